"""The task table: `lab/reproduce_results.sh` end to end (SMOKE=1) on a small data folder written in the published
files' formats, the table `lab.results_table` builds from run folders, and the fine-tuning commands of
`lab.finetune_tasks`."""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hf_bertscratch import BertScratchConfig, finetuning_arguments
from hf_bertscratch.tasks import TASK_DEFAULTS, TASKS
from hf_bertscratch.tasks.data import check_data_arguments
from lab import finetune_tasks as task_runs
from lab import results_table as results
from lab import run_records

from conftest import cut_back_to_checkpoint, tiny_config_kwargs

ROOT = Path(__file__).resolve().parents[2]
POSITIVE = "great wonderful moving brilliant fine superb charming".split()
NEGATIVE = "awful boring dull terrible weak clumsy tedious".split()
FILLER = "the film movie story actor plot scene it was and a of to in this with its".split()
ENTITIES = {"PER": ["john", "mary"], "LOC": ["paris", "london"], "ORG": ["acme", "reuters"], "MISC": ["french"]}
# A classification task and a token-classification task with a test split (every shape runs end to end in
# test_finetuning; each fine-tune here is a process start, which dominates the smoke run's time).
SMOKE_TASKS = ("cola", "conll2003")


# ------------------------------------------------------------------------------------------ a data folder
def _words(rng: random.Random, label: int, count: int) -> list[str]:
    cue = POSITIVE if label else NEGATIVE
    return [rng.choice(cue) if rng.random() < 0.2 else rng.choice(FILLER) for _ in range(count)]


def _write_imdb(folder: Path, rng: random.Random) -> None:
    """imdb/train.csv.gz, `id,rating,label,text` (the pretraining text)."""
    folder.mkdir(parents=True)
    with gzip.open(folder / "train.csv.gz", "wt", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "rating", "label", "text"])
        for i in range(400):
            label = i % 2
            writer.writerow([i, 8 if label else 2, label, " ".join(_words(rng, label, rng.randint(40, 120))) + " ."])


def _write_cola(folder: Path, rng: random.Random) -> None:
    """glue/CoLA/{train,dev}.tsv without a header: `source label mark sentence`, mark '*' on unacceptable ones."""
    folder.mkdir(parents=True)
    for split, count in (("train", 80), ("dev", 24)):
        lines = []
        for i in range(count):
            label = i % 2
            lines.append(f"gj04\t{label}\t{'' if label else '*'}\t{' '.join(_words(rng, label, rng.randint(4, 10)))} .")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _conll_sentence(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(rng.randint(4, 9)):
        if rng.random() < 0.3:
            kind = rng.choice(sorted(ENTITIES))
            for j in range(rng.randint(1, 2)):
                lines.append(f"{rng.choice(ENTITIES[kind])} NNP {'B' if j == 0 else 'I'}-NP {'BI'[j]}-{kind}")
        else:
            lines.append(f"{rng.choice(FILLER)} NN B-NP O")
    return [*lines, ". . O O"]


def _write_conll(folder: Path, rng: random.Random) -> None:
    """conll2003/{train,valid,test}.txt: a -DOCSTART- line, then `word POS chunk NER` lines, sentences apart by blank
    lines."""
    folder.mkdir(parents=True)
    for split, count in (("train", 80), ("valid", 24), ("test", 24)):
        blocks = ["-DOCSTART- -X- -X- O"] + ["\n".join(_conll_sentence(rng)) for _ in range(count)]
        (folder / f"{split}.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def _fake_data_dir(root: Path) -> Path:
    """The layout of ../shared/data for the pretraining text and the smoke run's tasks."""
    rng = random.Random(0)
    _write_imdb(root / "imdb", rng)
    _write_cola(root / "glue" / "CoLA", rng)
    _write_conll(root / "conll2003", rng)
    return root


def _run_script(runs: Path, data: Path, tasks: tuple[str, ...], **knobs: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SMOKE": "1",
        "TASKS": " ".join(tasks),
        "DATA_DIR": str(data),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(runs.parent / "datasets-cache"),  # the test's files leave no trace in ~/.cache
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # its `python` is ours
        "RECORDS": str(runs.parent / "records"),  # the durable records, never the repository's results/
        **knobs,
    }
    return subprocess.run(
        ["bash", "lab/reproduce_results.sh", str(runs)],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
    )


# ------------------------------------------------------------------------------------------ reading the table
def _task_table(table: str) -> dict[str, list[str]]:
    """The first table's rows as label -> [pretrained, scratch, difference, how] (bold marks dropped)."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| task, metric (split) |")) + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        label, *cells = [cell.strip().strip("*") for cell in line.strip().strip("|").split("|")]
        rows[label] = cells
    return rows


def _expected_cell(values: list[float]) -> str:
    """Mean, and ± the sample standard deviation when there are several values."""
    if not values:
        return "not run"
    spread = f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.1f}{spread}"


def _main_score(run: dict) -> float:
    return run[f"eval_{run['main_metric']}"]


def _finished_runs(runs: Path, task: str, init: str) -> list[dict]:
    folders = [folder for folder in runs.glob(f"{task}-{init}-lr*-seed*") if folder.is_dir()]
    return [json.loads((folder / "all_results.json").read_text()) for folder in sorted(folders)]


def _chosen_runs(runs: Path, task: str, init: str) -> list[dict]:
    """The runs of (task, init) at the rate whose first-seed run scored best on dev (the smaller rate on ties), by
    seed, checking the sweep ran every rate with the first seed and the other seeds at that rate only."""
    found = _finished_runs(runs, task, init)
    for run in found:  # each folder holds the run its name says, started from the last pretraining stage
        assert (runs / task_runs.run_name(task, init, run["learning_rate"], run["seed"])).is_dir()
        assert (run["task"], run["init_from_scratch"]) == (task, init == "scratch")
        assert run["model_name_or_path"].endswith("pretrain-tasks")
    first_seed, *other_seeds = sorted({run["seed"] for run in found})
    first = [run for run in found if run["seed"] == first_seed]
    assert len(first) > 1 and other_seeds  # rates were compared, and more seeds ran
    best = max(_main_score(run) for run in first)
    rate = min(run["learning_rate"] for run in first if _main_score(run) == best)
    assert [run["seed"] for run in found if run["learning_rate"] != rate] == [first_seed]
    chosen = sorted((run for run in found if run["learning_rate"] == rate), key=lambda run: run["seed"])
    assert [run["seed"] for run in chosen] == [first_seed, *other_seeds]
    return chosen


def _check_row(cells: list[str], chosen: dict[str, list[dict]], key: str) -> None:
    """A table row against the chosen runs' own numbers: mean ± sd per init, their difference, the no-learning
    baselines the runs recorded for the task's main metric, the rates."""
    values = {init: [100 * run[key] for run in runs] for init, runs in chosen.items()}
    pretrained, scratch, difference, baselines, how = cells
    first = chosen["pretrained"][0]
    if key == f"eval_{first['main_metric']}" and "baseline_constant" in first:  # NER and QA have none
        assert baselines.startswith(f"constant answer {100 * first['baseline_constant']:.1f}")
        if "baseline_bag_of_words" in first:
            assert f"bag of words {100 * first['baseline_bag_of_words']:.1f}" in baselines
    else:
        assert baselines == ""
    assert (pretrained, scratch) == (_expected_cell(values["pretrained"]), _expected_cell(values["scratch"]))
    assert difference == f"{statistics.fmean(values['pretrained']) - statistics.fmean(values['scratch']):+.1f}"
    rates = "/".join(f"{chosen[init][0]['learning_rate']:g}" for init in task_runs.INITS)
    assert how.startswith(f"lr {rates}; {len(chosen['pretrained'])} seeds; ")
    assert f"max_seq_length {chosen['pretrained'][0]['max_seq_length']};" in how


# ------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_reproduce_results_smoke_run_builds_the_table_from_its_runs(tmp_path: Path) -> None:
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    task_text = {"TASK_TEXT_MINUTES": "15"}  # the optional last stage too, on the tasks' text
    done = _run_script(runs, data, SMOKE_TASKS, **task_text)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    table = (runs / "results.md").read_text()
    assert table == results.results_table(runs)
    config = json.loads((runs / "pretrain" / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (4, 256)  # the default size, mini
    size = f"{config['num_hidden_layers']}L/{config['hidden_size']}H, vocab {config['vocab_size']}"
    assert table.startswith(f"Pretraining: {size}, MLM ") and " then " in table.splitlines()[0]  # both stages
    rows = _task_table(table)
    chosen = {task: {init: _chosen_runs(runs, task, init) for init in task_runs.INITS} for task in SMOKE_TASKS}
    for task, key, label in results.ROWS:
        if task in SMOKE_TASKS:
            _check_row(rows[label], chosen[task], key)
        else:
            assert rows[label][:3] == ["not run", "not run", ""]
    _check_row(rows["CoNLL-2003 entity F1 (test)"], chosen["conll2003"], "test_overall_f1")  # the test split's F1
    assert rows["GLUE average of the five dev tasks above"][:3] == ["incomplete", "incomplete", ""]

    # A fine-tune interrupted after its first checkpoint: a second run skips every finished stage and run,
    # continues that one from the checkpoint (its log keeps the first part), and rebuilds the table.
    cut = runs / task_runs.run_name("conll2003", "scratch", chosen["conll2003"]["scratch"][-1]["learning_rate"], 43)
    finished = json.loads((cut / "all_results.json").read_text())
    checkpoints = sorted((path.name for path in cut.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))
    cut_back_to_checkpoint(cut, checkpoints[0])
    shutil.rmtree(tmp_path / "records" / cut.name)  # stopped before it finished: never recorded
    again = _run_script(runs, data, SMOKE_TASKS, **task_text)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    run_count = sum(len(_finished_runs(runs, task, init)) for task in SMOKE_TASKS for init in task_runs.INITS)
    stages = [stage for stage in results.PRETRAINING_STAGES if (runs / stage).is_dir()]
    assert stages == ["pretrain", "pretrain-tasks"]  # the fine-tuned tasks' text, no longer blocks
    assert all(f"Task text of {task}:" in (runs / "pretrain-tasks.log").read_text() for task in SMOKE_TASKS)
    assert results.objective_name(runs / "pretrain-tasks") == "MLM+NSP"  # by default NSP added on the tasks' text
    assert again.stdout.count("(done)") == len(stages) + run_count - 1
    assert f"resume {cut}\n" in again.stdout
    resumed = json.loads((cut / "all_results.json").read_text())
    assert resumed["global_step"] == finished["global_step"]
    assert resumed["eval_overall_f1"] == finished["eval_overall_f1"]  # the checkpoint's model, scored again
    assert Path(f"{cut}.log").read_text().count("INFO hf_bertscratch.finetuning: eval_overall_f1") == 2
    assert (runs / "results.md").read_text() == results.results_table(runs)
    # every stage and run is recorded, and the records alone make the same table
    records = tmp_path / "records"
    assert sorted(path.name for path in records.iterdir()) == sorted(
        path.name for path in runs.iterdir() if (path / "all_results.json").is_file()
    )
    assert results.results_table(records) == results.results_table(runs)


@pytest.mark.slow
def test_quick_start_knob_fine_tunes_readmes_quick_start_itself(tmp_path: Path) -> None:
    """QUICK_START=1: stage 1 is `bertscratch pretrain` with its defaults (the packaged WikiText-2, no IMDB text), no
    longer-block stage, and the task runs start from that model."""
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    done = _run_script(runs, data, ("cola",), QUICK_START="1", INITS="pretrained")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [stage for stage in results.PRETRAINING_STAGES if (runs / stage).exists()] == ["pretrain"]
    card = (runs / "pretrain" / "README.md").read_text()
    assert "name: WikiText-2" in card and "imdb" not in card.lower()
    finished = _finished_runs(runs, "cola", "pretrained")
    assert len(finished) == 3  # two rates at the first seed, then the second seed at the chosen one
    assert {run["model_name_or_path"] for run in finished} == {str(runs / "pretrain")}
    assert (runs / "results.md").read_text() == results.results_table(runs)


def test_quick_start_knob_refuses_other_values(tmp_path: Path) -> None:
    done = _run_script(tmp_path / "runs", tmp_path / "data", ("rte",), QUICK_START="yes")
    assert done.returncode == 2 and "QUICK_START=yes must be 0 or 1" in done.stderr
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------ the table
def _write_run(runs: Path, task: str, init: str, learning_rate: float, seed: int, **metrics: float) -> None:
    """A finished run folder as finetune.py leaves it, reduced to what the table reads."""
    folder = runs / task_runs.run_name(task, init, learning_rate, seed)
    folder.mkdir(parents=True)
    run = {
        "task": task,
        "main_metric": TASKS[task].main_metric,
        "seed": seed,
        "learning_rate": learning_rate,
        "global_step": 40,
        "train_samples": 1280,
        "max_seq_length": 64,
        "wall_time_seconds": 60.0,
        **metrics,
    }
    (folder / "all_results.json").write_text(json.dumps(run))


def test_seed_runs_at_the_chosen_rate_are_averaged_with_their_spread(tmp_path: Path) -> None:
    for rate, score in ((1e-4, 0.30), (3e-4, 0.50), (1e-3, 0.40)):  # the first seed compares the rates
        _write_run(tmp_path, "cola", "pretrained", rate, 42, eval_matthews_correlation=score)
    for seed, score in ((44, 0.54), (43, 0.52)):
        _write_run(tmp_path, "cola", "pretrained", 3e-4, seed, eval_matthews_correlation=score)
    _write_run(tmp_path, "cola", "pretrained", 1e-4, 43, eval_matthews_correlation=0.9)  # not the chosen rate
    (tmp_path / task_runs.run_name("cola", "pretrained", 3e-4, 45)).mkdir()  # unfinished: no all_results.json
    (tmp_path / f"{task_runs.run_name('cola', 'pretrained', 3e-4, 42)}.log").write_text("")  # its log: not a run
    for rate, seed, score in ((1e-4, 42, 0.20), (3e-4, 42, 0.10), (1e-4, 43, 0.10)):
        _write_run(tmp_path, "cola", "scratch", rate, seed, eval_matthews_correlation=score)

    pretrained, scratch, difference, how = _task_table(results.results_table(tmp_path))["CoLA Matthews corr. (dev)"]
    assert (pretrained, scratch, difference) == ("52.0 ± 2.0", "15.0 ± 7.1", "+37.0")
    assert how.startswith("lr 0.0003/0.0001; 3 seeds; 40 steps on 1,280 examples, max_seq_length 64; 1.0 min/run")
    row = next(row for row in results.task_rows(tmp_path) if row["task"] == "cola")
    assert row["pretrained"] == pytest.approx([50.0, 52.0, 54.0])  # by seed
    assert row["learning_rates"] == {"pretrained": 3e-4, "scratch": 1e-4}


def test_missing_runs_are_marked(tmp_path: Path) -> None:
    table = results.results_table(tmp_path)
    assert table.startswith("Pretraining: (pretraining run missing).")
    assert all(
        cells[:3] == ["not run", "not run", ""] for label, cells in _task_table(table).items() if "GLUE" not in label
    )
    assert len(_task_table(table)) == len(results.ROWS) + 1

    _write_run(tmp_path, "rte", "pretrained", 2e-4, 42, eval_accuracy=0.6)
    pretrained, scratch, difference, _ = _task_table(results.results_table(tmp_path))["RTE accuracy (dev)"]
    assert (pretrained, scratch, difference) == ("60.0", "not run", "")  # one seed: no spread


def test_glue_average_waits_for_all_five_tasks_and_averages_their_means(tmp_path: Path) -> None:
    main_scores = {
        "cola": {"eval_matthews_correlation": 0.2},
        "sst2": {"eval_accuracy": 0.8},
        "mrpc": {"eval_f1": 0.8, "eval_accuracy": 0.7},  # the average takes F1
        "stsb": {"eval_spearmanr": 0.6, "eval_pearson": 0.65},  # and Spearman
    }
    for task, metrics in main_scores.items():
        for init, shift in (("pretrained", 0.0), ("scratch", -0.1)):
            _write_run(tmp_path, task, init, 1e-4, 42, **{key: value + shift for key, value in metrics.items()})

    def average() -> list[str]:
        return _task_table(results.results_table(tmp_path))["GLUE average of the five dev tasks above"][:3]

    assert average() == ["incomplete", "incomplete", ""]
    for seed, score in ((42, 0.6), (43, 0.7)):  # RTE's mean 65.0 enters the average, not its seeds
        _write_run(tmp_path, "rte", "pretrained", 1e-4, seed, eval_accuracy=score)
    assert average() == ["61.0", "incomplete", ""]  # (20 + 80 + 80 + 60 + 65) / 5
    _write_run(tmp_path, "rte", "scratch", 1e-4, 42, eval_accuracy=0.5)
    assert average() == ["61.0", "50.0", "+11.0"]  # (10 + 70 + 70 + 50 + 50) / 5


@pytest.mark.parametrize(
    ("scores", "expected"),
    [((0.5, 0.7, 0.7), 3e-4), ((0.6, 0.6, 0.6), 1e-4), ((0.5, 0.6, 0.7), 1e-3), ((0.7, 0.6, 0.7), 1e-4)],
)
def test_learning_rate_ties_go_to_the_smaller_rate_in_the_table_and_the_sweep(
    tmp_path: Path, scores: tuple[float, ...], expected: float
) -> None:
    recipe = task_runs.RECIPES["rte"]
    assert recipe.learning_rates == (1e-4, 3e-4, 1e-3)  # the scores above are given in this order
    for rate, score in reversed(list(zip(recipe.learning_rates, scores, strict=True))):
        assert task_runs.choose_learning_rate(tmp_path, "rte", "scratch", recipe) is None  # until every rate ran
        _write_run(tmp_path, "rte", "scratch", rate, recipe.seeds[0], eval_accuracy=score)
    row = next(row for row in results.task_rows(tmp_path) if row["task"] == "rte")
    assert row["learning_rates"]["scratch"] == expected
    assert task_runs.choose_learning_rate(tmp_path, "rte", "scratch", recipe) == expected


def _write_stage(folder: Path, steps: int, **numbers: float) -> None:
    folder.mkdir()
    (folder / "all_results.json").write_text(json.dumps(numbers))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": steps}))


def test_pretraining_description_names_the_model_each_stage_and_its_budget(tmp_path: Path) -> None:
    _write_stage(
        tmp_path / "pretrain",
        10_000,
        train_budget_minutes=40.0,
        train_effective_batch_size=32,
        max_seq_length=128,
        train_tokens=40_960_000,
        train_wall_time_seconds=2400.0,
        eval_perplexity=60.2,
        eval_accuracy=0.31,
    )
    assert results.pretraining_description(tmp_path) == (
        "?, MLM 10000 steps of 32 x 128 tokens in a 40-minute budget, 41.0M tokens, 40.0 min train, "
        "MLM ppl 60, masked acc 31.0%"
    )  # no config.json: the size is unknown
    BertScratchConfig(**tiny_config_kwargs(8192)).save_pretrained(tmp_path / "pretrain")
    _write_stage(
        tmp_path / "pretrain-long",
        1_000,
        train_effective_batch_size=16,
        max_seq_length=256,
        train_tokens=4_096_000,
        train_wall_time_seconds=600.0,
        eval_perplexity=44.6,
        eval_accuracy=0.3561,
    )
    assert results.pretraining_description(tmp_path) == (
        "2L/32H, vocab 8192, MLM 10000 steps of 32 x 128 tokens in a 40-minute budget then 1000 steps of 16 x 256 "
        "tokens, 45.1M tokens, 50.0 min train, MLM ppl 45, masked acc 35.6%"
    )  # the held-out numbers are the last stage's


def test_pretraining_description_of_electra_gives_the_discriminator_beside_always_original(tmp_path: Path) -> None:
    numbers = {"eval_perplexity": 68.4, "eval_accuracy": 0.302, "eval_discriminator_accuracy": 0.8714}
    _write_stage(tmp_path / "pretrain", 100, **numbers, eval_replaced_fraction=0.1193)
    assert results.pretraining_description(tmp_path).endswith(
        "generator MLM ppl 68, masked acc 30.2%, replaced-token accuracy 87.1% (all 'original': 88.1%)"
    )


def test_a_resumed_stage_counts_its_whole_run(tmp_path: Path) -> None:
    """A stage resumed from a checkpoint reports tokens and wall time of its last part only (train_tokens is what
    that process trained); the totals count all its steps and the whole budget it spent."""
    _write_stage(
        tmp_path / "pretrain",
        10_000,
        train_budget_minutes=40.0,
        train_budget_spent_minutes=40.0,
        train_effective_batch_size=32,
        max_seq_length=128,
        train_tokens=8_192_000,  # the 2,000 steps after the checkpoint
        train_wall_time_seconds=480.0,
    )
    assert results.stage_totals(tmp_path) == (10_000 * 32 * 128, 2400.0)
    assert "41.0M tokens, 40.0 min train" in results.pretraining_description(tmp_path)


def test_an_nsp_stage_is_described_by_its_pairs_and_the_tokens_counted(tmp_path: Path) -> None:
    shape = {"train_effective_batch_size": 32, "max_seq_length": 128, "train_budget_minutes": 1.0}
    _write_stage(tmp_path / "pretrain", 100, **shape, train_budget_spent_minutes=1.0)
    _write_stage(tmp_path / "pretrain-tasks", 50, **shape, train_budget_spent_minutes=1.0, eval_accuracy=0.4)
    for stage, architecture in (
        ("pretrain", "BertScratchForMaskedLM"),
        ("pretrain-tasks", "BertScratchForPreTraining"),
    ):
        config = {"architectures": [architecture], "num_hidden_layers": 2, "hidden_size": 128, "vocab_size": 8192}
        (tmp_path / stage / "config.json").write_text(json.dumps(config))
    state = tmp_path / "pretrain-tasks" / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 50, "num_input_tokens_seen": 60_000}))  # short pairs
    assert results.pretraining_description(tmp_path).startswith(
        "2L/128H, vocab 8192, MLM 100 steps of 32 x 128 tokens in a 1-minute budget then MLM+NSP 50 steps of 32 pairs of up to 128 tokens in "
        "a 1-minute budget on the tasks' text, 0.5M tokens, 2.0 min train"
    )
    assert results.stage_totals(tmp_path)[0] == 100 * 32 * 128 + 60_000


def test_a_stage_whose_trainer_counted_its_tokens_reports_that_count(tmp_path: Path) -> None:
    """NSP's pairs are often shorter than the block: the Trainer's count of their tokens, kept across resumes in
    trainer_state.json, is taken over steps x batch x block length."""
    _write_stage(tmp_path / "pretrain", 1_000, train_effective_batch_size=32, max_seq_length=128, train_tokens=9)
    state = tmp_path / "pretrain" / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 1_000, "num_input_tokens_seen": 1_234_567}))
    assert results.stage_totals(tmp_path)[0] == 1_234_567


def test_results_table_cli_writes_the_table_and_rejects_a_missing_folder(tmp_path: Path) -> None:
    _write_run(tmp_path, "sst2", "scratch", 2e-4, 42, eval_accuracy=0.8)
    results.main([str(tmp_path), "--output", str(tmp_path / "results.md")])
    assert (tmp_path / "results.md").read_text() == results.results_table(tmp_path)
    with pytest.raises(ValueError, match="is not a folder"):
        results.main([str(tmp_path / "nope")])


def test_record_renders_the_same_table_and_fills_the_readme_block(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for init, score in (("pretrained", 0.7), ("scratch", 0.6)):
        _write_run(runs, "rte", init, 1e-4, 42, eval_accuracy=score)
    readme = tmp_path / "README.md"
    readme.write_text("# title\n<!-- task-table:start -->\nold\n<!-- task-table:end -->\nafter\n")
    record = tmp_path / "results" / "task_table.json"
    results.main([str(runs), "--record", str(record), "--readme", str(readme), "--command", "bash x.sh"])
    table = results.readme_block(readme.read_text())
    assert readme.read_text().startswith("# title\n") and readme.read_text().endswith("-->\nafter\n")
    assert table == results.render_task_table(json.loads(record.read_text())) != results.results_table(runs)
    assert table.replace("`bash x.sh`", "`bash lab/reproduce_results.sh`") == results.render_task_table(
        results.task_table_record(runs, "bash lab/reproduce_results.sh")
    )
    assert "Made by `bash x.sh`: 2 fine-tuning runs, 2 min" in table  # 60 s each
    assert _task_table(table)["RTE accuracy (dev)"][:3] == ["70.0", "60.0", "+10.0"]
    results.main(["--from_record", str(record), "--output", str(tmp_path / "again.md")])
    assert (tmp_path / "again.md").read_text() == table


def test_readme_task_table_is_rendered_from_the_committed_record() -> None:
    """README's task table is what `lab/results_table.py --from_record results/task_table.json` prints."""
    record = json.loads((ROOT / "results" / "task_table.json").read_text(encoding="utf-8"))
    no_learning = json.loads((ROOT / "results" / "task_baselines.json").read_text(encoding="utf-8"))
    table = results.render_task_table(record, no_learning)
    assert results.readme_block((ROOT / "README.md").read_text(encoding="utf-8")) == table
    rows = _task_table(table)
    assert rows["IMDB accuracy (test)"][3].startswith("constant answer 50.0, bag of words 88.8")  # no learning
    assert rows["MRPC F1 (dev)"][3].startswith("constant answer 81.2, word overlap 81.6")


def test_task_table_rows_take_no_learning_from_their_runs_else_from_the_baselines_record() -> None:
    row = {"task": "sst2", "key": "eval_accuracy", "baselines": {}}
    no_learning = {"tasks": {"sst2": {"constant": {"accuracy": 0.5}, "bag_of_words": {"accuracy": 0.8}}}}
    assert results.row_baselines(row, no_learning) == {"constant answer": 50.0, "bag of words": 80.0}
    assert results.row_baselines({**row, "baselines": {"constant answer": 51.0}}, no_learning) == {
        "constant answer": 51.0
    }
    assert results.row_baselines({**row, "key": "test_overall_f1"}, no_learning) == {}


# ------------------------------------------------------------------------------------------ the sweep's commands
def _sweep(tmp_path: Path, **arguments: object) -> task_runs.Sweep:
    pretrained = tmp_path / "pretrain-long"
    pretrained.mkdir(exist_ok=True)
    (pretrained / "config.json").write_text("{}")
    args = task_runs.FinetuneTasksArguments(runs_dir=str(tmp_path / "runs"), pretrained=str(pretrained), **arguments)
    return task_runs.Sweep(args, log=lambda line: None)


def test_each_run_is_a_finetune_command_with_its_task_recipe(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, data_dir="/data", batch_size=16, extra=["--weight_decay", "0.01"])
    folder = sweep.runs_dir / task_runs.run_name("imdb", "scratch", 2e-4, 43)
    command = sweep.command("imdb", "scratch", 2e-4, 43, folder)
    assert command[:2] == [sys.executable, str(ROOT / "scripts" / "finetune.py")]
    model, data, training = finetuning_arguments.parse_args(command[2:])  # finetune.py's own parser takes it
    recipe = task_runs.RECIPES["imdb"]
    assert (model.model_name_or_path, model.init_from_scratch) == (sweep.args.pretrained, True)
    assert (data.task, data.data_dir, data.max_seq_length) == ("imdb", "/data", recipe.max_seq_length)
    assert data.truncation == TASK_DEFAULTS["imdb"].truncation  # no flag of its own: the task's default
    assert (training.seed, training.learning_rate, training.num_train_epochs) == (43, 2e-4, recipe.epochs)
    assert (training.per_device_train_batch_size, training.weight_decay) == (16, 0.01)
    assert Path(training.output_dir) == folder and training.resume_from_checkpoint is None

    command = sweep.command("cola", "pretrained", 1e-3, 42, folder)
    assert "--init_from_scratch" not in command and "--truncation" not in command
    model, data, training = finetuning_arguments.parse_args(command[2:])
    assert (model.init_from_scratch, data.task, training.learning_rate) == (False, "cola", 1e-3)

    (folder / "checkpoint-30").mkdir(parents=True)  # interrupted: continue from its last checkpoint
    _, _, training = finetuning_arguments.parse_args(sweep.command("cola", "pretrained", 1e-3, 42, folder)[2:])
    assert training.resume_from_checkpoint == "last"


@pytest.mark.parametrize("smoke", [False, True])
def test_every_recipe_passes_finetunes_argument_checks(tmp_path: Path, smoke: bool) -> None:
    sweep = _sweep(tmp_path, smoke=smoke)
    for task, recipe in task_runs.RECIPES.items():
        command = sweep.command(task, "scratch", recipe.learning_rates[0], recipe.seeds[0], tmp_path / task)
        _, data, training = finetuning_arguments.parse_args(command[2:])
        assert check_data_arguments(data) == TASKS[task]
        if smoke:  # a few steps on a few examples, still comparing two rates over two seeds
            assert training.num_train_epochs <= recipe.epochs and data.max_seq_length <= recipe.max_seq_length
            assert data.max_train_samples is not None and data.max_eval_samples is not None
            assert sweep.recipe(task).seeds == recipe.seeds[:2]
            assert sweep.recipe(task).learning_rates == recipe.learning_rates[:2]


def test_sweep_chooses_the_rate_on_the_first_seed_then_runs_the_other_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        """Stands in for finetune.py: a run scores best at 3e-4."""
        commands.append(command)
        rate = float(command[command.index("--learning_rate") + 1])
        seed = int(command[command.index("--seed") + 1])
        folder = Path(command[command.index("--output_dir") + 1])
        folder.mkdir()
        run = {"main_metric": "accuracy", "eval_accuracy": 0.7 if rate == 3e-4 else 0.5, "seed": seed}
        (folder / "all_results.json").write_text(json.dumps({**run, "learning_rate": rate}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    sweep = _sweep(tmp_path, tasks=["rte"], inits=["scratch"])
    recipe = task_runs.RECIPES["rte"]
    sweep.run_all()
    ran = [(float(c[c.index("--learning_rate") + 1]), int(c[c.index("--seed") + 1])) for c in commands]
    first = len(recipe.learning_rates)  # the candidates (two at a time, in any order), then the seeds at 3e-4
    assert sorted(ran[:first]) == sorted((rate, recipe.seeds[0]) for rate in recipe.learning_rates)
    assert sorted(ran[first:]) == [(3e-4, s) for s in recipe.seeds[1:]]
    sweep.run_all()  # everything finished: nothing runs again
    assert len(commands) == len(ran)


def test_sweep_runs_a_tasks_seeds_side_by_side_and_stops_at_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SST-2 has one candidate rate: its other seeds start together (each waits for the other at a barrier, which
    times out if they ran one after another); a failed run stops the sweep with its log's name."""
    together = threading.Barrier(2, timeout=30)

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        seed = int(command[command.index("--seed") + 1])
        folder = Path(command[command.index("--output_dir") + 1])
        if seed != task_runs.RECIPES["sst2"].seeds[0]:
            together.wait()
        folder.mkdir()
        run = {"main_metric": "accuracy", "eval_accuracy": 0.8, "seed": seed}
        (folder / "all_results.json").write_text(json.dumps(run))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    assert len(task_runs.RECIPES["sst2"].learning_rates) == 1 and len(task_runs.RECIPES["sst2"].seeds) == 3
    _sweep(tmp_path, tasks=["sst2"], inits=["pretrained"]).run_all()
    assert len(list((tmp_path / "runs").glob("sst2-pretrained-*/all_results.json"))) == 3

    monkeypatch.setattr(task_runs.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(command, 3))
    with pytest.raises(RuntimeError, match=r"rte-scratch-lr[0-9.e-]+-seed42 failed \(exit 3\); see .*\.log"):
        _sweep(tmp_path, tasks=["rte"], inits=["scratch"]).run_all()


def test_a_recorded_run_is_restored_only_from_the_same_weights_and_a_finished_one_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine is replaced: its run folders are gone, the committed records are not. A second sweep restores the
    runs recorded from the same pretrained weights (and tokenizer, for the from-scratch runs) without running them,
    and runs again those recorded from other weights."""
    ran: list[str] = []

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        folder = Path(command[command.index("--output_dir") + 1])
        ran.append(folder.name)
        folder.mkdir()
        seed = int(command[command.index("--seed") + 1])
        run = {"main_metric": "accuracy", "eval_accuracy": 0.8, "seed": seed, "task": "sst2"}
        (folder / "all_results.json").write_text(json.dumps(run))
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": 7, "log_history": [{"loss": 1.0}]}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    records = tmp_path / "records"
    pretrained = Path(_sweep(tmp_path).args.pretrained)
    (pretrained / "model.safetensors").write_bytes(b"weights")
    (pretrained / "tokenizer.json").write_text("{}")
    sweep = _sweep(tmp_path, tasks=["sst2"], record_dir=str(records))
    sweep.run_all()
    assert len(ran) == 6
    assert sorted(path.name for path in records.iterdir()) == sorted(ran)
    kept = records / ran[0]
    assert json.loads((kept / "trainer_state.json").read_text()) == {"global_step": 7}  # no log history
    assert json.loads((kept / "all_results.json").read_text()) == json.loads(
        (sweep.runs_dir / ran[0] / "all_results.json").read_text()
    )

    shutil.rmtree(sweep.runs_dir)  # a new machine
    ran.clear()
    (pretrained / "model.safetensors").write_bytes(b"other weights")  # pretrained again
    again = _sweep(tmp_path, tasks=["sst2"], record_dir=str(records))
    again.run_all()
    assert sorted(ran) == sorted(name for name in (path.name for path in records.iterdir()) if "-pretrained-" in name)
    restored = [path.parent.name for path in again.runs_dir.glob(f"*/{run_records.RESTORED}")]
    assert sorted(restored) == sorted(path.name for path in records.iterdir() if "-scratch-" in path.name)
    assert len(restored) == 3 and len(ran) == 3


def test_sweep_rejects_unknown_tasks_and_a_pretrained_folder_without_config(tmp_path: Path) -> None:
    pretrained = _sweep(tmp_path).args.pretrained
    with pytest.raises(ValueError, match="not in the task table"):
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", pretrained, "--tasks", "nope"])
    with pytest.raises(ValueError, match=r"Unknown task or init \['squad'\]"):  # a table task without a recipe
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", pretrained, "--tasks", "squad"])
    with pytest.raises(ValueError, match=r"Unknown task or init \['frozen'\]"):
        _sweep(tmp_path, inits=["frozen"])
    with pytest.raises(FileNotFoundError, match="no config.json"):
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", str(tmp_path / "runs")])
