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
    return subprocess.run(["bash", "scripts/reproduce_results.sh", str(runs)], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=900)


@pytest.mark.slow
def test_reproduce_results_smoke_run_builds_the_table_from_its_runs(tmp_path: Path) -> None:
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    done = _run_script(runs, data)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    table = (runs / "results.md").read_text()
    assert table == results.results_table(runs)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "| BertScratch |" in line]
    assert len(rows) == len(results.RUNS)
    pretraining = json.loads((runs / "pretrain" / "all_results.json").read_text())
    for (folder, (task, init)), row in zip(results.RUNS.items(), rows, strict=True):  # rows in RUNS order
        run = json.loads((runs / folder / "all_results.json").read_text())
        assert row.startswith(f"| {task} (")
        assert f"**{100 * run['eval_accuracy']:.1f}**" in row  # the number is the run's own
        assert f"on {run['eval_samples']:,} " in row and f"max_seq_length {run['max_seq_length']}" in row
        if init == "pretrained here":
            assert f"masked acc {100 * pretraining['eval_accuracy']:.1f}%" in row
    for _, model, accuracy, _, _ in results.REFERENCES:
        assert f"| {model} | published | {accuracy:.1f} |" in table

    again = _run_script(runs, data)  # every stage finished: a second run skips them all and rebuilds the table
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("(done)") == 1 + len(results.RUNS)
    assert (runs / "results.md").read_text() == table


def test_table_marks_missing_runs(tmp_path: Path) -> None:
    table = results.results_table(tmp_path)
    assert table.count("not run") == len(results.RUNS)
    assert "(pretraining run missing)" not in table  # no pretrained row is filled when nothing ran


def test_results_table_cli_rejects_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a folder"):
        results.main([str(tmp_path / "nope")])
