"""Side-by-side fine-tunes (`python -m lab.time_side_by_side`): each way of choosing threads runs what it names."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hf_bertscratch.hardware import available_cores
from lab import time_side_by_side


def test_each_way_runs_the_fine_tune_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # neither leaks into a run: each way chooses its own
    args = argparse.Namespace(model="m", data_dir="d", steps=5)
    commands = {way: time_side_by_side.command(way, args, Path("out")) for way in time_side_by_side.WAYS}
    for way, (argv, environment) in commands.items():
        assert "OMP_WAIT_POLICY" not in environment and "OMP_NUM_THREADS" not in environment
        assert argv[argv.index("--max_steps") + 1] == "5" and argv[argv.index("--task") + 1] == "sst2"
        given = argv[argv.index("--threads") + 1] if "--threads" in argv else None
        assert given == (None if way == "fitted" else str(available_cores())), way
    assert commands["fitted"][0][1].endswith("scripts/finetune.py")  # the shipped entry point: PASSIVE before torch
    assert commands["every-core-passive"][0][1].endswith("scripts/finetune.py")
    assert commands["every-core"][0][1:3] == ["-m", "hf_bertscratch.finetuning"]  # as before: no wait policy set
