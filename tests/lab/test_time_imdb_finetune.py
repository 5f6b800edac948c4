from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import pytest
import torch
from transformers import AutoModelForMaskedLM, BertTokenizer

import hf_bertscratch
from lab import time_imdb_finetune
from tests._documented_commands import run_in_process

from conftest import tiny_config_kwargs


def write_reviews(path: Path, count: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    words = {0: "bad awful boring", 1: "good great fun"}
    with gzip.open(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("id", "rating", "label", "text"))
        for index in range(count):
            label = index % 2
            picks = torch.randint(0, 3, (6,), generator=generator).tolist()
            writer.writerow((index, 1 + 9 * label, label, " ".join(words[label].split()[i] for i in picks)))


def in_this_process(command: list[str], stdout: IO[str], stderr: object, check: bool) -> subprocess.CompletedProcess:
    """`subprocess.run` of a `python FILE.py ...` command, run in this process (`run_in_process`: the command's own
    work without a new interpreter's imports), its output written to `stdout`."""
    assert command[0] == sys.executable and stderr is subprocess.STDOUT
    outcome = run_in_process(["python", *command[1:]], Path.cwd(), {})
    stdout.write(outcome.output)
    if check and outcome.status:
        raise subprocess.CalledProcessError(outcome.status, command, outcome.output)
    return subprocess.CompletedProcess(command, outcome.status)


def test_the_record_times_each_precision_and_compares_their_medians(
    tmp_path: Path, tokenizer: BertTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model"
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    AutoModelForMaskedLM.from_config(config).save_pretrained(model)
    tokenizer.save_pretrained(model)
    (tmp_path / "data" / "imdb").mkdir(parents=True)
    write_reviews(tmp_path / "data" / "imdb" / "train.csv.gz", 60, 0)
    write_reviews(tmp_path / "data" / "imdb" / "test.csv.gz", 20, 1)
    record_path = tmp_path / "record.json"
    monkeypatch.setattr(
        time_imdb_finetune, "subprocess", SimpleNamespace(run=in_this_process, STDOUT=subprocess.STDOUT)
    )
    time_imdb_finetune.main(
        ["--model", str(model), "--record", str(record_path), "--steps", "2", "--rounds", "1"]
        + ["--data_dir", str(tmp_path / "data"), "--runs_dir", str(tmp_path / "runs"), "--max_seq_length", "32"]
    )
    record = json.loads(record_path.read_text())
    assert [run["precision"] for run in record["runs"]] == ["fp32", "bf16"]  # what each run's all_results says
    for run in record["runs"]:
        results = json.loads((tmp_path / "runs" / f"{run['precision']}-0" / "all_results.json").read_text())
        assert (results["global_step"], results["precision"]) == (2, run["precision"])
        assert run["seconds_per_step"] == pytest.approx(results["train_runtime"] / 2)
    medians = record["median_seconds_per_step"]
    assert record["bf16_speedup"] == pytest.approx(medians["fp32"] / medians["bf16"])
    assert record["full_run_minutes_at_median"]["fp32"] == pytest.approx(medians["fp32"] * 2229 / 60)
    assert record["command"].startswith("python -m lab.time_imdb_finetune --model")
