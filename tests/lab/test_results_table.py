"""`lab.results_table`: the task table built from run folders (the learning rate chosen on dev, mean ± sd over
seeds, the no-learning column), the pretraining stages it describes, its record and README's block."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from hf_bertscratch import BertScratchConfig
from hf_bertscratch.tasks import TASKS
from lab import finetune_tasks as task_runs
from lab import results_table as results

from conftest import tiny_config_kwargs

ROOT = Path(__file__).resolve().parents[2]


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
    assert rows["CoNLL-2003 entity F1 (test)"][3].startswith("each word's most frequent tag ")


def test_task_table_rows_take_no_learning_from_their_runs_else_from_the_baselines_record() -> None:
    row = {"task": "sst2", "key": "eval_accuracy", "baselines": {}}
    no_learning = {"tasks": {"sst2": {"eval": {"constant": {"accuracy": 0.5}, "bag_of_words": {"accuracy": 0.8}}}}}
    assert results.row_baselines(row, no_learning) == {"constant answer": 50.0, "bag of words": 80.0}
    assert results.row_baselines({**row, "baselines": {"constant answer": 51.0}}, no_learning) == {
        "constant answer": 51.0
    }
    assert results.row_baselines({**row, "key": "test_accuracy"}, no_learning) == {}  # the split is the row's
    tagged = {"tasks": {"conll2003": {"test": {"most_frequent_tag": {"overall_f1": 0.6}}}}}
    test_row = {"task": "conll2003", "key": "test_overall_f1", "baselines": {}}
    assert results.row_baselines(test_row, tagged) == {"each word's most frequent tag": 60.0}


def test_task_table_chart_draws_mean_and_sd_of_rows_with_values() -> None:
    record = json.loads((ROOT / results.TASK_TABLE_RECORD).read_text(encoding="utf-8"))
    record["rows"][0]["scratch"] = []  # a row with one initialisation run keeps that one bar
    record["rows"][-1].update(pretrained=[], scratch=[])  # a row not run has no bars
    bars = results.task_table_bars(record)
    with_values = [row for row in record["rows"] if row["pretrained"] or row["scratch"]]
    assert list(bars) == [row["label"] for row in with_values] and len(with_values) < len(record["rows"])
    first = record["rows"][0]
    assert list(bars[first["label"]]) == ["pretrained here"]
    for row in with_values:
        for key, name in (("pretrained", "pretrained here"), ("scratch", "no pretraining")):
            if row[key]:
                mean, low, high = bars[row["label"]][name]
                assert mean == pytest.approx(sum(row[key]) / len(row[key]))
                spread = statistics.stdev(row[key]) if len(row[key]) > 1 else 0.0
                assert (mean - low, high - mean) == pytest.approx((spread, spread))
