"""`lab/diagnosis.py`, what the two fine-tuning diagnoses share: the record they grow run by run and the runs'
commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from lab import diagnosis

from conftest import write_checkpoint


def _args(tmp_path: Path, **given: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "model": "runs/D", "task": "stsb", "data_dir": None, "runs_dir": str(tmp_path / "runs"), "variants": [],
        "seeds": [42], "processes": 1, "extra": [], "output_json": str(tmp_path / "record.json"), "model_note": None,
    }  # fmt: skip
    return argparse.Namespace(**{**values, **given})


def test_a_record_of_the_same_model_keeps_every_command_and_note(tmp_path: Path) -> None:
    args = _args(tmp_path)
    old = {"model": "runs/D", "command": "python -m lab.diagnose_pairs --old", "model_note": "the 9-minute model"}
    Path(args.output_json).write_text(json.dumps(old))
    record, found = diagnosis.start_record(args, ["--model", "runs/D", "--model_note", "x"], "python -m lab.p", "f1")
    assert found == old
    assert record["commands"] == ["python -m lab.diagnose_pairs --old", "python -m lab.p --model runs/D"]
    assert (record["model_note"], record["metric"], record["task"]) == ("the 9-minute model", "f1", "stsb")
    again, _ = diagnosis.start_record(args, ["--old"], "python -m lab.diagnose_pairs", "f1")
    assert again["commands"] == ["python -m lab.diagnose_pairs --old"]  # a command already there is not repeated
    other, _ = diagnosis.start_record(_args(tmp_path, model="runs/E"), ["--model", "runs/E"], "python -m lab.p", "f1")
    assert other["commands"] == ["python -m lab.p --model runs/E"]  # another model: a record of its own
    assert other["model_note"] is None  # and not the other model's note


def test_every_finished_run_is_kept_in_the_record_at_once(tmp_path: Path) -> None:
    args = _args(tmp_path, variants=["a", "b"], seeds=[1, 2])
    record: dict = {"fine_tuning": {"old": {"7": {}}}}
    ran: list[tuple[str, int]] = []

    def entry(variant: str, seed: int) -> dict:
        written = json.loads(Path(args.output_json).read_text()) if ran[:-1] else record
        assert len(ran) == 1 or written["fine_tuning"] == record["fine_tuning"]  # the runs before: on disk already
        return {"flags": [variant], "final": seed / 10}

    diagnosis.run_variants(args, record, lambda variant, seed: ran.append((variant, seed)), entry)
    assert sorted(ran) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    expected = {"old": {"7": {}}, **{v: {str(s): {"flags": [v], "final": s / 10} for s in (1, 2)} for v in "ab"}}
    assert record["fine_tuning"] == expected == json.loads(Path(args.output_json).read_text())["fine_tuning"]


def test_a_run_command_takes_the_flags_then_the_extra_ones_and_resumes(tmp_path: Path) -> None:
    args = _args(tmp_path, extra=["--x", "1"], data_dir="data")
    command = diagnosis.finetune_command(["prog"], args, "v", 3, ["--flag", "f"])
    folder = str(tmp_path / "runs" / "v-seed3")
    assert command[:7] == ["prog", "--model_name_or_path", "runs/D", "--task", "stsb", "--output_dir", folder]
    assert command[-6:] == ["--flag", "f", "--x", "1", "--data_dir", "data"]
    write_checkpoint(tmp_path / "runs" / "v-seed3" / "checkpoint-5", missing=("trainer_state.json",))
    assert diagnosis.finetune_command(["prog"], args, "v", 3, [])[-2:] == ["--overwrite_output_dir", "true"]
    write_checkpoint(tmp_path / "runs" / "v-seed3" / "checkpoint-3")
    assert diagnosis.finetune_command(["prog"], args, "v", 3, [])[-2:] == ["--resume_from_checkpoint", "last"]


@pytest.mark.parametrize(
    "given, message",
    [
        ({"task": "sst2"}, "--task 'sst2' is not a pair task of the table; expected one of \\['stsb'\\]"),
        ({"variants": ["nope"]}, "Unknown variant"),
        ({"variants": ["a"], "runs_dir": None}, "needs --runs_dir"),
    ],
)
def test_bad_arguments_are_refused_by_name(tmp_path: Path, given: dict, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        diagnosis.check_arguments(_args(tmp_path, **given), ["stsb"], "pair task", ["a"])
