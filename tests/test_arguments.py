"""Every entry point reads flags or one .json file of them through `hf_bertscratch.arguments.parse_args_or_json`."""

from __future__ import annotations

import json
import re
from dataclasses import InitVar, dataclass, field
from pathlib import Path

import pytest

from hf_bertscratch import convert, hub
from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.pretraining import parse_args as parse_pretraining_args


@dataclass
class _TaskArguments:
    task: str = field(default="sst2", metadata={"help": "The task."})


@dataclass
class _TrainArguments:
    metric: str = field(default="auto", metadata={"help": "The metric; auto: the task's."})
    task_args: InitVar = None  # not a flag: handed over by the parser

    def __post_init__(self, task_args: _TaskArguments | None = None) -> None:
        if self.metric == "auto" and task_args is not None:
            self.metric = f"{task_args.task}-metric"


def test_a_json_file_gives_the_same_arguments_as_the_flags(tmp_path: Path) -> None:
    flags = ["--output_dir", str(tmp_path / "out"), "--max_seq_length", "64", "--learning_rate", "1e-3"]
    from_flags = parse_pretraining_args(flags)
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "max_seq_length": 64, "learning_rate": 1e-3}))
    from_file = parse_pretraining_args([str(arguments)])
    assert from_file[1].max_seq_length == from_flags[1].max_seq_length == 64
    assert from_file[2].learning_rate == from_flags[2].learning_rate == 1e-3
    assert from_file[2].output_dir == from_flags[2].output_dir


def test_a_missing_json_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.json")
    with pytest.raises(SystemExit) as raised:
        parse_pretraining_args([missing])
    assert raised.value.code == 2
    assert f"arguments file {missing!r} does not exist" in capsys.readouterr().err


def test_leading_arguments_fill_the_positional_fields(tmp_path: Path) -> None:
    args = convert.parse_args(["SRC", "OUT", "--overwrite_output_dir"])
    assert (args.source, args.output_dir, args.overwrite_output_dir) == ("SRC", "OUT", True)
    args = hub.parse_args(["MODEL", "--repo_id", "user/name"])
    assert (args.model_dir, args.repo_id) == ("MODEL", "user/name")
    args = hub.parse_args(["--model_dir", "MODEL", "--repo_id", "user/name"])
    assert args.model_dir == "MODEL"


def test_each_dataclass_is_made_with_those_made_before_it(tmp_path: Path) -> None:
    """A dataclass whose default depends on another's flags completes itself as it is made: the parser hands it the
    dataclass made before it that its `__post_init__` names, from flags and from a .json file alike."""
    parser = ArgumentParser((_TaskArguments, _TrainArguments))
    assert "--task_args" not in parser.format_help()  # an InitVar is no flag
    _, train = parse_args_or_json(parser, ["--task", "cola"])
    assert train.metric == "cola-metric"
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps({"task": "cola"}))
    assert parse_args_or_json(parser, [str(arguments)])[1].metric == "cola-metric"
    assert parse_args_or_json(parser, ["--metric", "f1"])[1].metric == "f1"  # a value given is kept
    (alone,) = parse_args_or_json(ArgumentParser(_TrainArguments), [])
    assert alone.metric == "auto"  # nothing of the type it names was made before it
    with pytest.raises(ValueError, match=r"Some keys are not used by the HfArgumentParser: \['nope'\]"):
        parser.parse_dict({"task": "cola", "nope": 1})  # HfArgumentParser's check, after the dataclasses are made


def test_an_arguments_file_with_an_unknown_key_or_beside_flags_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt key of an arguments file is named with the closest flag before any dataclass is made (their own
    checks spoke first, then transformers' 'Some keys are not used by the HfArgumentParser'); flags after the file,
    which argparse read as a missing --model_name_or_path, are refused as what they are."""
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "learnin_rate": 1e-3}))
    for argv, message in [
        ([str(arguments)], r"has key\(s\) no flag takes: \['learnin_rate'\]; did you mean 'learning_rate'\?"),
        ([str(arguments), "--max_steps", "2"], r"an arguments file is read alone: put --max_steps in .*args.json"),
    ]:
        with pytest.raises(SystemExit) as raised:
            parse_pretraining_args(argv)
        assert raised.value.code == 2
        assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("--lr", "--learning_rate"),
        ("--batch_size", "--per_device_train_batch_size"),
        ("--max_length", "--max_seq_length"),
    ],
)
def test_flags_of_other_scripts_suggest_this_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, meant: str
) -> None:
    """What another training script calls a flag suggests its name here (by spelling alone --lr is closest to
    --help)."""
    with pytest.raises(SystemExit):
        parse_pretraining_args(["--output_dir", str(tmp_path / "out"), given, "8"])
    assert f"unrecognized arguments: {given} 8; did you mean {meant!r}?" in capsys.readouterr().err


def test_run_glues_task_name_suggests_the_task_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--task_name rte`, as run_glue.py and run_ner.py take it, points at --task, not --dataset_name (the closest
    spelling, a Hub dataset id)."""
    from hf_bertscratch.finetuning_arguments import parse_args as parse_finetuning_args

    with pytest.raises(SystemExit):
        parse_finetuning_args(["--model_name_or_path", "m", "--task_name", "rte", "--output_dir", str(tmp_path)])
    assert "unrecognized arguments: --task_name rte; did you mean '--task'?" in capsys.readouterr().err


@pytest.mark.parametrize("rate", ["-0.001", "0"])
def test_a_learning_rate_that_is_not_positive_is_refused_as_it_is_parsed(tmp_path: Path, rate: str) -> None:
    """Both training commands name the flag and the value before any data or model loads (torch's AdamW would
    refuse a negative rate only once the optimizer is made, and train nothing at 0)."""
    from hf_bertscratch.finetuning_arguments import parse_args as parse_finetuning_args

    message = f"--learning_rate must be positive, got {float(rate):g}."
    with pytest.raises(ValueError, match=message):
        parse_pretraining_args(["--output_dir", str(tmp_path / "p"), "--learning_rate", rate])
    with pytest.raises(ValueError, match=message):
        parse_finetuning_args(["--model_name_or_path", "m", "--task", "sst2", "--output_dir", str(tmp_path / "f"),
                               "--learning_rate", rate])  # fmt: skip
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--num_train_epochs", "0", "positive (passes over the training set)"),
        ("--num_train_epochs", "-1", "positive (passes over the training set)"),
        ("--per_device_train_batch_size", "0", "a positive integer"),
        ("--per_device_eval_batch_size", "0", "a positive integer"),
        ("--gradient_accumulation_steps", "0", "a positive integer (1: no accumulation)"),
        ("--eval_accumulation_steps", "0", "a positive integer, or left out"),
        (
            "--max_steps",
            "-5",
            "a positive number of steps, or -1 (the default: the epochs or the time budget end the run)",
        ),
        (
            "--max_steps",
            "0",
            "a positive number of steps, or -1 (the default: the epochs or the time budget end the run)",
        ),
        ("--save_steps", "0", "positive (steps, or a fraction of the run's steps below 1)"),
        ("--logging_steps", "-1", "positive (steps, or a fraction of the run's steps below 1)"),
        ("--eval_steps", "-2", "0 or more (steps, a fraction of the run's steps below 1, or 0 for --logging_steps's)"),
        ("--dataloader_num_workers", "-1", "0 (batches loaded by the training process) or more"),
    ],
)
def test_a_count_that_cannot_run_is_refused_as_it_is_parsed(
    tmp_path: Path, flag: str, value: str, expected: str
) -> None:
    """transformers takes these counts unchecked: 0 epochs train no step and then fail to plot, a batch size of 0
    fails at the first batch (the eval one only after training), a save_steps of 0 at the first step, max_steps -5
    is read as -1. Both training commands name the flag, the value and what is expected before anything loads."""
    from hf_bertscratch.finetuning_arguments import parse_args as parse_finetuning_args

    message = f"{flag} must be {expected}, got {float(value):g}."
    with pytest.raises(ValueError) as pretraining_error:
        parse_pretraining_args(["--output_dir", str(tmp_path / "p"), flag, value])
    with pytest.raises(ValueError) as finetuning_error:
        parse_finetuning_args(["--model_name_or_path", "m", "--task", "sst2", "--output_dir", str(tmp_path / "f"),
                               flag, value])  # fmt: skip
    assert str(pretraining_error.value) == str(finetuning_error.value) == message
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "flags",
    [["--max_steps", "-1"], ["--max_steps", "10", "--num_train_epochs", "0"], ["--eval_steps", "0"],
     ["--eval_steps", "0.5", "--save_steps", "0.25", "--logging_steps", "0.1"]],
)  # fmt: skip
def test_counts_transformers_gives_a_meaning_are_kept(tmp_path: Path, flags: list[str]) -> None:
    """-1 steps: the epochs decide; epochs beside --max_steps are unused; eval_steps 0: every logging_steps; below 1:
    a fraction of the run's steps."""
    from hf_bertscratch.finetuning_arguments import parse_args as parse_finetuning_args

    parse_pretraining_args(["--output_dir", str(tmp_path / "p"), *flags])
    parse_finetuning_args(["--model_name_or_path", "m", "--task", "sst2", "--output_dir", str(tmp_path / "f"), *flags])


@dataclass
class _SwitchedOn:
    """A flag on by default, for which HfArgumentParser adds --no_loud."""

    loud: bool = field(default=True, metadata={"help": "Speak up."})


def test_a_negated_flag_says_what_it_does_rather_than_repeating_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ArgumentParser(_SwitchedOn)
    assert parser.parse_args_into_dataclasses([])[0].loud is True
    assert parser.parse_args_into_dataclasses(["--no_loud"])[0].loud is False
    parser.print_help()
    lines = capsys.readouterr().out.splitlines()
    (no_loud,) = [line for line in lines if line.strip().startswith("--no_loud")]
    assert no_loud.split(None, 1)[1] == "Same as --loud false."
    assert "Speak up. (default: True)" in "\n".join(lines)
