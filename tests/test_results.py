"""`scripts/reproduce_results.sh` end to end (SMOKE=1) on a tiny IMDB/SST-2-shaped data folder the test writes, and
the results table it builds from the runs (`hf_bertscratch.results`)."""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bertscratch import results

from conftest import cut_back_to_checkpoint

ROOT = Path(__file__).resolve().parents[1]
POSITIVE = "great wonderful moving brilliant fine superb charming".split()
NEGATIVE = "awful boring dull terrible weak clumsy tedious".split()
FILLER = "the film movie story actor plot scene it was and a of to in this with its".split()


def _review(rng: random.Random, label: int, words: int) -> str:
    cue = POSITIVE if label else NEGATIVE
    return " ".join(rng.choice(cue) if rng.random() < 0.2 else rng.choice(FILLER) for _ in range(words)) + " ."


def _fake_data_dir(root: Path) -> Path:
    """The layout of ../shared/data for imdb/ (csv.gz: id,rating,label,text) and sst2/ (tsv: sentence, label)."""
    rng = random.Random(0)
    (root / "imdb").mkdir(parents=True)
    (root / "sst2").mkdir()
    for split, n in (("train", 400), ("test", 60)):
        with gzip.open(root / "imdb" / f"{split}.csv.gz", "wt", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "rating", "label", "text"])
            for i in range(n):
                label = i % 2
                writer.writerow([i, 8 if label else 2, label, _review(rng, label, rng.randint(40, 120))])
    for split, n in (("train", 200), ("dev", 40)):
        lines = ["sentence\tlabel"] + [f"{_review(rng, i % 2, rng.randint(4, 12))}\t{i % 2}" for i in range(n)]
        (root / "sst2" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def _run_script(runs: Path, data: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SMOKE": "1",
        "DATA_DIR": str(data),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # its `python` is ours
    }
    return subprocess.run(
        ["bash", "scripts/reproduce_results.sh", str(runs)],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
    )


@pytest.mark.slow
def test_reproduce_results_smoke_run_builds_the_table_from_its_runs(tmp_path: Path) -> None:
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    done = _run_script(runs, data)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    table = (runs / "results.md").read_text()
    assert table == results.results_table(runs)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "| BertScratch |" in line]
    assert len(rows) == len(results.RUNS)
    stages = [json.loads((runs / name / "all_results.json").read_text()) for name in results.PRETRAINING_STAGES]
    assert [stage["max_seq_length"] for stage in stages] == [128, 32]  # SMOKE=1's long stage: 32-token blocks
    for (name, (task, init)), row in zip(results.RUNS.items(), rows, strict=True):  # rows in RUNS order
        seeds = [42, 43] if task == "SST-2" else [42]  # SMOKE=1 fine-tunes SST-2 with two seeds, IMDB with one
        runs_of_row = [json.loads((runs / f"{name}-seed{seed}" / "all_results.json").read_text()) for seed in seeds]
        assert [run["seed"] for run in runs_of_row] == seeds
        accuracies = [100 * run["eval_accuracy"] for run in runs_of_row]
        assert row.startswith(f"| {task} (")
        assert f"**{sum(accuracies) / len(accuracies):.1f}**" in row  # the mean of the runs' own numbers
        if len(seeds) > 1:
            assert f"over {len(seeds)} fine-tuning seeds" in row
            assert all(f"{seed}: {accuracy:.1f}" in row for seed, accuracy in zip(seeds, accuracies))
        run = runs_of_row[0]
        assert run["model_name_or_path"].endswith("pretrain-long")  # fine-tunes start from the last stage
        assert f"on {run['eval_samples']:,} " in row and f"max_seq_length {run['max_seq_length']}" in row
        if init == "pretrained here":  # both stages, and the final one's held-out numbers
            assert "MLM 5 steps of 32 x 128 tokens then 3 steps of 16 x 32 tokens" in row
            assert f"masked acc {100 * stages[-1]['eval_accuracy']:.1f}%" in row
    for _, model, accuracy, _, _ in results.REFERENCES:
        assert f"| {model} | published | {accuracy:.1f} |" in table

    # An IMDB fine-tune interrupted after its first epoch's checkpoint: the script continues it from there.
    cut = runs / "imdb-scratch-seed42"
    finished = json.loads((cut / "all_results.json").read_text())
    assert sorted(path.name for path in cut.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]  # 1 step/epoch
    cut_back_to_checkpoint(cut, "checkpoint-1")
    again = _run_script(runs, data)  # every other stage finished: a second run skips them and rebuilds the table
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("(done)") == 2 + 2 * 2 + 2 * 1 - 1  # pretraining stages, SST-2 and IMDB pairs per seed
    assert f"resume {cut}" in again.stdout
    resumed = json.loads((cut / "all_results.json").read_text())
    assert resumed["global_step"] == 2 and resumed["eval_accuracy"] == finished["eval_accuracy"]


def test_seed_runs_are_averaged_with_their_spread(tmp_path: Path) -> None:
    for seed, accuracy in ((44, 0.83), (42, 0.81), (43, 0.82)):
        folder = tmp_path / f"sst2-scratch-seed{seed}"
        folder.mkdir()
        (folder / "all_results.json").write_text(
            json.dumps(
                {
                    "eval_accuracy": accuracy,
                    "eval_f1": accuracy,
                    "seed": seed,
                    "eval_samples": 872,
                    "max_seq_length": 64,
                }
            )
        )
    (tmp_path / "sst2-scratch-seed7x").mkdir()  # not a seed folder: ignored
    row = next(
        line for line in results.results_table(tmp_path).splitlines() if "| SST-2 (dev) | BertScratch | none" in line
    )
    assert "**82.0** ± 1.0 | 82.0 |" in row  # mean, sample standard deviation, mean F1
    assert "over 3 fine-tuning seeds (42: 81.0, 43: 82.0, 44: 83.0)" in row


def test_table_marks_missing_runs(tmp_path: Path) -> None:
    table = results.results_table(tmp_path)
    assert table.count("not run") == len(results.RUNS)
    assert "(pretraining run missing)" not in table  # no pretrained row is filled when nothing ran


def test_results_table_cli_rejects_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a folder"):
        results.main([str(tmp_path / "nope")])


def test_pretraining_description_names_each_stage_and_its_budget(tmp_path: Path) -> None:
    stages = {
        "pretrain": (
            {
                "train_budget_minutes": 40.0,
                "train_effective_batch_size": 32,
                "max_seq_length": 128,
                "train_tokens": 40_960_000,
                "train_wall_time_seconds": 2400.0,
            },
            10_000,
        ),
        "pretrain-long": (
            {
                "train_effective_batch_size": 16,
                "max_seq_length": 256,
                "train_tokens": 4_096_000,
                "train_wall_time_seconds": 600.0,
                "eval_perplexity": 44.6,
                "eval_accuracy": 0.3561,
            },
            1_000,
        ),
    }
    for name, (stage, steps) in stages.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "all_results.json").write_text(json.dumps(stage))
        (tmp_path / name / "trainer_state.json").write_text(json.dumps({"global_step": steps}))
    assert results.pretraining_description(tmp_path) == (
        "MLM 10000 steps of 32 x 128 tokens in a 40-minute budget then 1000 steps of 16 x 256 tokens, 45.1M tokens, "
        "50.0 min train, MLM ppl 45, masked acc 35.6%"
    )
