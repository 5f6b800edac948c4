"""The equal-time comparison of pretraining recipes (`lab.compare_pretraining`): each recipe's
settings for reproduce_results.sh, the table built from run folders, the choice of the mini shape's objective, and
a smoke run of three recipes end to end (ELECTRA, and masked-LM continued on the tasks' own text without and with
next-sentence prediction)."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

import pytest
import torch

from hf_bertscratch import records
from lab import compare_pretraining as comparison
from lab import finetune_tasks as task_runs
from lab.results_table import REFERENCES

from test_reproduce_results import _fake_data_dir
from test_results_table import _write_run


def test_each_recipe_spends_the_same_minutes_and_fine_tunes_the_pretrained_model_only() -> None:
    recipes = comparison.RECIPES
    common = {
        "LONG_MINUTES": "0",
        "INITS": "pretrained",
        "TASKS": " ".join(comparison.COMPARISON_TASKS),
        "SIZE": "tiny",
    }
    mlm = comparison.recipe_environment(recipes["mlm"], 60)
    assert mlm == {**common, "PRETRAIN_MINUTES": "60", "TASK_TEXT_MINUTES": "0", "TASK_TEXT": common["TASKS"],
                   "OBJECTIVE": "mlm", "TASK_TEXT_OBJECTIVE": "mlm"}  # fmt: skip
    electra = comparison.recipe_environment(recipes["electra"], 60)
    assert electra == {**mlm, "OBJECTIVE": "electra", "TASK_TEXT_OBJECTIVE": "electra"}  # masked-LM start included
    tasks = comparison.recipe_environment(recipes["mlm+tasks"], 60)
    assert (tasks["PRETRAIN_MINUTES"], tasks["TASK_TEXT_MINUTES"]) == ("45", "15")  # 3/4 general, 1/4 the tasks'
    nsp = comparison.recipe_environment(recipes["mlm+tasks+nsp"], 60)
    assert nsp == {**tasks, "TASK_TEXT_OBJECTIVE": "mlm_nsp"}  # the same stages, NSP added to the last
    mini = comparison.recipe_environment(recipes["mini"], 20, objective="electra", tasks=["cola"])
    assert mini == {**common, "TASKS": "cola", "TASK_TEXT": "cola", "PRETRAIN_MINUTES": "20",
                    "TASK_TEXT_MINUTES": "0", "SIZE": "mini", "OBJECTIVE": "electra",
                    "TASK_TEXT_OBJECTIVE": "electra"}  # fmt: skip
    assert comparison.recipe_environment(recipes["mlm"], 1, smoke=True)["SMOKE"] == "1"


def test_reproduce_results_defaults_are_the_recorded_comparisons_best_row() -> None:
    """README and docs say lab/reproduce_results.sh takes the best row of the recorded comparison by default: its
    defaults are that row's settings (every row names the size and objectives, so none leans on the defaults)."""
    root = Path(__file__).resolve().parents[2]
    record = json.loads((root / "results" / "pretraining_comparison.json").read_text(encoding="utf-8"))
    best = max((row for row in record["rows"] if comparison.glue_complete(row)), key=lambda row: row["glue_average"])
    objective = {"MLM": "mlm", "ELECTRA": "electra"}[best["objective"]]
    wanted = comparison.recipe_environment(comparison.RECIPES[best["recipe"]], record["minutes"], objective)
    script = (root / "lab" / "reproduce_results.sh").read_text(encoding="utf-8")
    defaults = dict(re.findall(r"^(\w+)=\$\{\1:-([^}$]*)\}", script, flags=re.MULTILINE))
    for name in ("SIZE", "OBJECTIVE", "PRETRAIN_MINUTES", "LONG_MINUTES", "TASK_TEXT_MINUTES"):
        assert (name, defaults.get(name)) == (name, wanted[name])
    if wanted["TASK_TEXT_MINUTES"] != "0":  # the script's default for that stage: mlm_nsp after masked-LM
        assert wanted["TASK_TEXT_OBJECTIVE"] == ("mlm_nsp" if objective == "mlm" else objective)


def _write_recipe(runs: Path, name: str, architecture: str, scores: dict[str, list[float]], tokens: int) -> None:
    """A recipe folder as reproduce_results.sh leaves it, reduced to what the table reads: the pretraining stage and
    one fine-tuning run per seed of each column's task at one learning rate (scores in [0, 1], by seed)."""
    folder = runs / name
    pretrain = folder / "pretrain"
    pretrain.mkdir(parents=True)
    (pretrain / "config.json").write_text(json.dumps({"architectures": [architecture], "num_hidden_layers": 2,
                                                       "hidden_size": 128, "vocab_size": 8192}))  # fmt: skip
    results = {"train_tokens": tokens, "train_wall_time_seconds": 3600.0, "train_effective_batch_size": 32,
               "max_seq_length": 128, "train_budget_minutes": 60}  # fmt: skip
    (pretrain / "all_results.json").write_text(json.dumps(results))
    for task, key, label in comparison.COLUMNS:
        for seed, score in zip(task_runs.RECIPES[task].seeds, scores[label]):
            metrics = {key: score}
            if key == "test_overall_f1":
                metrics["eval_overall_f1"] = score
            _write_run(folder, task, "pretrained", 1e-3, seed, **metrics)


def _scores(base: float) -> dict[str, list[float]]:
    """Per-seed scores of each column, one for each of its task's seeds."""
    return {
        label: [base + 0.01 * i, base + 0.02 * i, base, base + 0.03 * i, base - 0.01 * i][
            : len(task_runs.RECIPES[task].seeds)
        ]
        for i, (task, _, label) in enumerate(comparison.COLUMNS, 1)
    }


def test_the_table_gives_each_recipes_runs_and_the_better_objective(tmp_path: Path) -> None:
    _write_recipe(tmp_path, "mlm", "BertScratchForMaskedLM", _scores(0.50), 40_000_000)
    _write_recipe(tmp_path, "electra", "BertScratchForReplacedTokenDetection", _scores(0.60), 30_000_000)
    (tmp_path / "mlm+tasks" / "pretrain" / "checkpoint-500").mkdir(parents=True)  # still pretraining: no row yet
    args = comparison.ComparisonArguments(runs_dir=str(tmp_path), minutes=60)
    record = comparison.comparison_record(args)
    rows = {row["recipe"]: row for row in record["rows"]}
    assert list(rows) == ["mlm", "electra"] and rows["electra"]["objective"] == "ELECTRA"
    for name, base in (("mlm", 0.50), ("electra", 0.60)):
        expected = {label: [100 * v for v in values] for label, values in _scores(base).items()}
        assert rows[name]["scores"].keys() == expected.keys()
        assert all(rows[name]["scores"][label] == pytest.approx(values) for label, values in expected.items())
        glue = [statistics.fmean(expected[label]) for label in ("CoLA MCC", "SST-2 acc.", "MRPC F1",
                                                                "STS-B Spearman", "RTE acc.")]  # fmt: skip
        assert rows[name]["glue_average"] == pytest.approx(statistics.fmean(glue))
    assert comparison.best_objective(record["rows"]) == "electra"
    assert record["commit"] == records.git_commit() and record["versions"]["torch"] == torch.__version__
    assert f", written {record['date'][:10]} at commit {record['commit'] or 'unknown'}." in (
        comparison.render_comparison(record)
    )
    assert comparison.best_objective(record["rows"][:1]) is None  # electra not finished: no choice yet

    table = comparison.render_comparison(record)
    electra_line = next(line for line in table.splitlines() if line.startswith("| `electra`"))
    cells = [cell.strip() for cell in electra_line.strip("|").split("|")]
    assert cells[1] == "30.0M in 60 min"
    mcc = [100 * v for v in _scores(0.60)["CoLA MCC"]]
    assert cells[2] == f"{statistics.fmean(mcc):.1f} ± {statistics.stdev(mcc):.1f}"
    assert cells[-1] == f"**{rows['electra']['glue_average']:.1f}**"  # the best average is bold, the other not
    assert f"| {rows['mlm']['glue_average']:.1f} |" in table
    tiny = {label: value for label, value, *_ in REFERENCES}
    published = next(line for line in table.splitlines() if line.startswith("| Google BERT-Tiny"))
    assert f"| {tiny['STS-B Spearman']:.1f} | {tiny['RTE accuracy']:.1f} |" in published
    for name in ("mlm", "electra"):  # what each pretraining reached, under the table
        assert f"\n- `{name}`: {rows[name]['pretraining']}\n" in table


def test_a_row_short_of_its_seeds_is_marked_and_neither_wins_nor_chooses_the_objective(tmp_path: Path) -> None:
    """A row whose later seeds have not run averages its first seed, the one its learning rate was chosen on: it is
    marked, not bold, and the mini shape's objective waits for it."""
    _write_recipe(tmp_path, "mlm", "BertScratchForMaskedLM", _scores(0.50), 40_000_000)
    _write_recipe(tmp_path, "electra", "BertScratchForReplacedTokenDetection", _scores(0.60), 30_000_000)
    seeds = task_runs.RECIPES["sst2"].seeds
    shutil.rmtree(tmp_path / "electra" / task_runs.run_name("sst2", "pretrained", 1e-3, seeds[-1]))
    record = comparison.comparison_record(comparison.ComparisonArguments(runs_dir=str(tmp_path), minutes=60))
    rows = {row["recipe"]: row for row in record["rows"]}
    assert rows["electra"]["short_of_seeds"] == {"SST-2 acc.": f"{len(seeds) - 1} of {len(seeds)} seeds"}
    assert rows["mlm"]["short_of_seeds"] == {}
    assert rows["electra"]["glue_average"] > rows["mlm"]["glue_average"]
    assert comparison.best_objective(record["rows"]) is None
    table = comparison.render_comparison(record)
    electra_line = next(line for line in table.splitlines() if line.startswith("| `electra`"))
    cells = [cell.strip() for cell in electra_line.strip("|").split("|")]
    assert cells[3].endswith(f" ({len(seeds) - 1} of {len(seeds)} seeds)")
    assert cells[-1] == f"{rows['electra']['glue_average']:.1f} (runs missing)"
    assert f"| **{rows['mlm']['glue_average']:.1f}** |" in table  # the best of the complete rows


def test_every_record_of_a_run_names_the_commit_it_started_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record written after the first recipe changes the checkout (results/ is tracked): the later records keep
    the commit and date taken when the run started, not a "-dirty" one."""
    _write_recipe(tmp_path, "mlm", "BertScratchForMaskedLM", _scores(0.50), 40_000_000)
    _write_recipe(tmp_path, "electra", "BertScratchForReplacedTokenDetection", _scores(0.60), 30_000_000)
    starts = iter([records.RunStart("abc1234", "2026-01-01T00:00:00+00:00", [0.0, 0.0, 0.0])])
    monkeypatch.setattr(comparison.RunStart, "now", lambda: next(starts, records.RunStart("abc1234-dirty", "x", [])))
    monkeypatch.setattr(comparison, "run_recipe", lambda *args: None)
    record_path = tmp_path / "record.json"
    comparison.main(["--runs_dir", str(tmp_path), "--recipes", "mlm", "electra", "--record", str(record_path)])
    record = json.loads(record_path.read_text())
    assert (record["commit"], record["date"]) == ("abc1234", "2026-01-01T00:00:00+00:00")
    assert [row["recipe"] for row in record["rows"]] == ["mlm", "electra"]


def test_mini_waits_for_both_objectives_and_bad_arguments_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_run(*args: object) -> None:
        raise AssertionError("a recipe ran")

    monkeypatch.setattr(comparison, "run_recipe", no_run)
    runs = ["--runs_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=r"Recipe 'mini' takes the better objective of \('mlm', 'electra'\)"):
        comparison.main([*runs, "--recipes", "mini"])
    with pytest.raises(ValueError, match=r"Unknown recipes \['bert'\]; expected some of \['mlm', "):
        comparison.main([*runs, "--recipes", "mlm", "bert"])
    with pytest.raises(ValueError, match=r"Unknown tasks \['imdb'\]"):
        comparison.main([*runs, "--tasks", "cola", "imdb"])
    with pytest.raises(ValueError, match="minutes must be a positive budget, got -5"):
        comparison.main([*runs, "--minutes", "-5"])


def test_nsp_continues_the_first_stage_of_mlm_plus_tasks_once_it_has_finished(tmp_path: Path) -> None:
    source, target = tmp_path / "mlm+tasks" / "pretrain", tmp_path / "mlm+tasks+nsp" / "pretrain"
    with pytest.raises(ValueError, match=r"Recipe 'mlm\+tasks\+nsp' continues the first stage of 'mlm\+tasks', which"):
        comparison.share_first_stage(tmp_path, "mlm+tasks+nsp")
    (source / "checkpoint-500").mkdir(parents=True)
    (source / "model.safetensors").write_bytes(b"weights")
    (source / "all_results.json").write_text('{"train_tokens": 5}')
    (tmp_path / "mlm+tasks" / "pretrain.log").write_text("the first stage's log")
    target.with_name("pretrain.copying").mkdir(parents=True)  # an interrupted copy is redone, not taken
    (target.with_name("pretrain.copying") / "stale").write_text("x")
    comparison.share_first_stage(tmp_path, "mlm+tasks+nsp")
    assert sorted(p.name for p in target.iterdir()) == ["all_results.json", "model.safetensors"]
    assert (target / "model.safetensors").read_bytes() == b"weights"
    assert target.with_name("pretrain.log").read_text() == "the first stage's log"
    assert not target.with_name("pretrain.copying").exists()
    (source / "model.safetensors").write_bytes(b"changed")
    comparison.share_first_stage(tmp_path, "mlm+tasks+nsp")  # a finished stage of its own is kept
    assert (target / "model.safetensors").read_bytes() == b"weights"
    comparison.share_first_stage(tmp_path, "mlm")  # a recipe sharing nothing is left alone
    assert not (tmp_path / "mlm").exists()
    (target / "all_results.json").unlink()
    with pytest.raises(ValueError, match="exists but is not a finished stage; remove it"):
        comparison.share_first_stage(tmp_path, "mlm+tasks+nsp")


@pytest.mark.slow
def test_smoke_run_of_electra_and_of_masked_lm_on_the_tasks_text_with_and_without_nsp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    for name, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
                        "TOKENIZERS_PARALLELISM": "false"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    record_path = tmp_path / "record.json"
    records = tmp_path / "records"  # not the repository's results/task-runs/
    comparison.main(["--runs_dir", str(runs), "--data_dir", str(data), "--tasks", "cola", "--smoke", "true",
                     "--recipes", "electra", "mlm+tasks", "mlm+tasks+nsp", "--record", str(record_path),
                     "--record_dir", str(records)])  # fmt: skip
    assert (records / "electra" / "pretrain" / "all_results.json").is_file()  # each recipe's records apart
    assert (records / "mlm+tasks+nsp" / "pretrain-tasks" / "all_results.json").is_file()

    electra, tasks, nsp = runs / "electra", runs / "mlm+tasks", runs / "mlm+tasks+nsp"
    assert not (electra / "pretrain-long").exists() and not (tasks / "pretrain-long").exists()  # one general stage
    assert json.loads((electra / "pretrain" / "config.json").read_text())["architectures"] == [
        "BertScratchForReplacedTokenDetection"
    ]
    assert (electra / "pretrain" / "generator" / "config.json").is_file()
    assert "| `mlm_start_fraction` | 0.25 |" in (electra / "pretrain" / "README.md").read_text()  # a masked-LM start
    assert "Task text of cola: 80 texts" in (tasks / "pretrain-tasks.log").read_text()
    assert json.loads((tasks / "pretrain-tasks" / "config.json").read_text())["architectures"] == [
        "BertScratchForMaskedLM"
    ]
    assert json.loads((nsp / "pretrain-tasks" / "config.json").read_text())["architectures"] == [
        "BertScratchForPreTraining"
    ]
    assert "eval_nsp_accuracy" in json.loads((nsp / "pretrain-tasks" / "all_results.json").read_text())
    # NSP continues mlm+tasks' own general-text stage: the same weights, copied without the checkpoints
    shared = "model.safetensors", "all_results.json", "tokenizer.json"
    assert all((nsp / "pretrain" / f).read_bytes() == (tasks / "pretrain" / f).read_bytes() for f in shared)
    assert list((tasks / "pretrain").glob("checkpoint-*")) and not list((nsp / "pretrain").glob("checkpoint-*"))
    for folder, start in ((electra, "pretrain"), (tasks, "pretrain-tasks"), (nsp, "pretrain-tasks")):
        finished = [task_runs.read_results(run) for run in folder.glob("cola-*-seed*") if run.is_dir()]
        assert finished and all(run["model_name_or_path"] == str(folder / start) for run in finished)
        assert not list(folder.glob("cola-scratch-*"))  # the table's scratch runs are not repeated
    record = json.loads(record_path.read_text())
    assert record == json.loads((runs / "comparison.json").read_text())
    assert (runs / "comparison.md").read_text() == comparison.render_comparison(record)
    assert [row["recipe"] for row in record["rows"]] == ["electra", "mlm+tasks", "mlm+tasks+nsp"]
    assert " then 3 steps of 32 x 128 tokens on the tasks' text" in record["rows"][1]["pretraining"]
    assert (
        " then MLM+NSP 3 steps of 32 pairs of up to 128 tokens on the tasks' text" in record["rows"][2]["pretraining"]
    )
    assert "replaced-token accuracy" in record["rows"][0]["pretraining"]
