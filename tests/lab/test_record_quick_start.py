"""`lab/record_quick_start.py`: the record it keeps of README's quick start (the run itself is the pretraining tests')."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import record_quick_start as script

ROOT = Path(__file__).resolve().parents[2]


def test_record_holds_the_command_the_runs_results_and_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = {
        "eval_accuracy": 0.339, "eval_perplexity": 54.1, "train_tokens": 14_700_000, "train_tokens_per_second": 9567.4,
        "world_size": 1,
    }  # fmt: skip
    ran, envs = [], []
    real_run = subprocess.run

    def fake_run(command, **kwargs):
        if command[0] == "git":  # the record's commit
            return real_run(command, **kwargs)
        ran.append(command)
        envs.append(kwargs.get("env"))
        out = Path(command[command.index("--output_dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "all_results.json").write_text(json.dumps(results))
        (out / "trainer_state.json").write_text(json.dumps({"global_step": 3599}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(script.subprocess, "run", fake_run)
    monkeypatch.setattr(script, "top_answers", lambda model_dir: ["paris", "the", "london", "rome", "it"])
    monkeypatch.setattr("hf_bertscratch.records.cpu_model", lambda: "AMD EPYC 7B13")
    identity = {"vendor": "AuthenticAMD", "family": 23, "model": 49, "flags": ["avx2"]}
    monkeypatch.setattr("hf_bertscratch.records.cpu_identity", lambda: identity)
    argv = ["--seed", "7", "--output_dir", str(tmp_path / "run"), "--records_dir", str(tmp_path / "r"), "--one_core"]
    path = script.main(argv)
    command = ["bertscratch", "pretrain", "--output_dir", str(tmp_path / "run"), "--seed", "7", "--num_processes", "1"]
    assert ran == [command] and envs[0]["OMP_NUM_THREADS"] == "1"
    record = json.loads(path.read_text())
    assert (
        path.name == "amd-epyc-avx2-f23-m49-one-core-seed-7.json"
        and record["seed"] == 7
        and record["results"] == results
    )
    assert record["steps"] == 3599 and record["end_to_end_seconds"] >= 0 and record["peak_memory_mib"] > 0
    assert record["command"].startswith("python -m lab.record_quick_start --seed 7")
    assert record["quick_start_command"] == "OMP_NUM_THREADS=1 " + " ".join(command)
    assert record["fill_mask"] == {"text": script.FILL_MASK_TEXT, "top": ["paris", "the", "london", "rome", "it"]}
    table = script.render_quick_start_table({path.name: record})
    assert (
        "| AMD EPYC 7B13 (AVX2, family 23 model 49) | one core, 1 process | 7 | **33.9%** | 54.1 | 14.7M | 9,567 | 3,599 |"
        in table
    )
    assert table.splitlines()[2].endswith("| paris, the, london, rome, it |")
    # Another precision than the quick start's: passed on, named in the file, the table and apart in the headline.
    # Run from the folder beside the output: the record names the output folder relative to it, not where it ran.
    monkeypatch.chdir(tmp_path / "r")
    with pytest.raises(SystemExit):  # the finished run's folder: the record times the command on a fresh one
        script.main([*argv[:4], "--records_dir", str(tmp_path / "r"), "--precision", "bf16"])
    assert len(ran) == 1
    shutil.rmtree(tmp_path / "run")
    path = script.main([*argv[:4], "--records_dir", str(tmp_path / "r"), "--precision", "bf16"])
    assert ran[-1] == [
        "bertscratch",
        "pretrain",
        "--output_dir",
        str(tmp_path / "run"),
        "--seed",
        "7",
        "--precision",
        "bf16",
    ]
    assert path.name == "amd-epyc-avx2-f23-m49-bf16-seed-7.json" and json.loads(path.read_text())["precision"] == "bf16"
    expected = "bertscratch pretrain --output_dir ../run --seed 7 --precision bf16"
    assert json.loads(path.read_text())["quick_start_command"] == expected
    table = script.render_quick_start_table({path.name: json.loads(path.read_text())})
    assert "| AMD EPYC 7B13 (AVX2, family 23 model 49) | 1 processes, --precision bf16 | 7 |" in table


def test_record_file_names_name_the_cpu_its_widest_instruction_set_family_and_model() -> None:
    zen2 = {"cpu": "AMD EPYC 7B13", "cpu_identity": {"family": 23, "model": 49, "flags": ["avx2"]}}
    zen5 = {"cpu": "AMD EPYC", "cpu_identity": {"family": 26, "model": 2, "flags": ["avx2", "avx512f", "avx512_bf16"]}}
    zen3 = {"cpu": "AMD EPYC", "cpu_identity": {"family": 25, "model": 1, "flags": ["avx2"]}}
    assert (script.cpu_slug(zen2), script.cpu_name(zen2)) == (
        "amd-epyc-avx2-f23-m49", "AMD EPYC 7B13 (AVX2, family 23 model 49)"
    )  # fmt: skip
    # the same model name and instruction set, another CPU: apart in the file name and the table
    assert (script.cpu_slug(zen3), script.cpu_name(zen3)) == (
        "amd-epyc-avx2-f25-m1",
        "AMD EPYC (AVX2, family 25 model 1)",
    )
    assert (script.cpu_slug(zen5), script.cpu_name(zen5)) == (
        "amd-epyc-avx512-bf16-f26-m2", "AMD EPYC (AVX512_BF16, family 26 model 2)"
    )  # fmt: skip
    # a record made before records kept the CPU's identity: the model alone
    assert script.cpu_slug({"cpu": "Intel(R) Xeon(R) Processor"}) == "intel-xeon"
    assert script.cpu_name({"cpu": "Intel(R) Xeon(R) Processor"}) == "Intel Xeon"


def test_quick_start_table_gives_each_seeds_record() -> None:
    def record(seed: int, accuracy: float, seconds: float, one_core: bool = False) -> dict:
        return {
            "seed": seed, "cpu": "Some CPU", "date": "2026-11-25T22:00:00+00:00", "commit": "abc1234",
            "load_average": {"start": [0.25, 0.1, 0.1], "end": [1.5, 1.0, 0.5]}, "end_to_end_seconds": seconds,
            "peak_memory_mib": 1228.8, "steps": 3599, "one_core": one_core,
            "results": {"eval_accuracy": accuracy, "eval_perplexity": 54.12, "train_tokens": 14_745_600,
                        "train_tokens_per_second": 16095.2, "world_size": 1 if one_core else 2},
        }  # fmt: skip

    table = script.render_quick_start_table(
        {
            "some-cpu-seed-42.json": record(42, 0.3391, 536.4),
            "some-cpu-seed-0.json": record(0, 0.2, 60),
            "some-cpu-one-core-seed-42.json": record(42, 0.25, 600, one_core=True),
        }
    )
    lines = [line.split(" | ") for line in table.splitlines() if line.startswith("| Some CPU")]
    assert [(cells[1], cells[2], cells[3]) for cells in lines] == [
        ("2 processes", "0", "**20.0%**"),  # by CPU, processes, then seed
        ("2 processes", "42", "**33.9%**"),
        ("one core, 1 process", "42", "**25.0%**"),
    ]
    assert lines[1][4:10] == ["54.1", "14.7M", "16,095", "3,599", "8 min 56 s", "1.2 GB"]
    assert "`some-cpu-seed-42.json`: 2026-11-25, commit abc1234, load average (1 min) 0.2 at the start" in table
    assert script.render_quick_start_table({}).startswith("No record in `results/quick-start/` yet")
