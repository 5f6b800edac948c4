"""`lab/diagnose_position_init.py` (the loop behind docs/design.md's position-start table) runs and probes on tiny data."""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import diagnose_position_init

from conftest import CORPUS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("posinit", ["normal", "sin"])
def test_diagnostic_loop_prints_a_probe_every_100_steps(tmp_path: Path, tokenizer_dir: Path, posinit: str) -> None:
    train = tmp_path / "train.csv"
    with train.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text"])
        writer.writerows([sentence] for sentence in CORPUS * 40)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.diagnose_position_init",
            "--tokenizer",
            str(tokenizer_dir),
            "--train_file",
            str(train),
            "--cache_dir",
            str(tmp_path / "cache"),
            "--bs",
            "4",
            "--seq",
            "16",
            "--steps",
            "100",
            "--warmup",
            "10",
            "--posinit",
            posinit,
            "--posscale",
            "2.5",
            "--output_json",
            str(tmp_path / "record.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probe_lines = [line for line in done.stdout.splitlines() if line.startswith("100 ")]
    assert len(probe_lines) == 1, done.stdout[-2000:]
    probe = ast.literal_eval(probe_lines[0][probe_lines[0].index("{") :])
    assert len(probe["ent"]) == len(probe["nb"]) == 2  # one value per layer of the tiny preset
    assert all(0 < value < 1 for value in probe["nb"]) and 0 < probe["heldloss"] < 20
    assert (tmp_path / "cache" / "ids_16.npy").is_file()
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["command"].startswith("python -m lab.diagnose_position_init --tokenizer")
    assert [p["step"] for p in record["probes"]] == [100] and record["arguments"]["posinit"] == posinit
    assert {k: record["probes"][0][k] for k in probe} == probe  # the record holds what was printed
    # docs/design.md's table from it: its row at step 600, which this short run never reached, stays blank
    record["probes"].append({**record["probes"][0], "step": 600, "nb": [0.4321, 0.1], "heldloss": 5.4321})
    table = diagnose_position_init.render_position_table({"row.json": record})
    start = "sinusoid, std 0.05" if posinit == "sin" else "N(0, 0.05)"
    row = next(line for line in table.splitlines() if line.startswith(f"| {start}, on 16-token blocks |"))
    assert "--posscale 2.5 --seq 16` |" in row
    assert row.endswith("| 0.432 | 5.43 |  |  |")  # layer 1 at step 600; the run never reached step 1,000
