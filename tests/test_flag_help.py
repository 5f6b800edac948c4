"""Every flag's help names each value the flag takes: a help that lists values lists all of them, so a value added to
a flag's choices or to the tuple its check uses shows in `--help` (read from the commands' parsers, no model)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest
from transformers.trainer_utils import IntervalStrategy, SaveStrategy

from hf_bertscratch import (
    benchmark,
    cli,
    cpu_matmul,
    finetuning_arguments,
    hardware,
    pretraining_arguments,
    run_folder,
)
from hf_bertscratch.arguments import ArgumentParser, _inherited_trainer_fields, described_values
from hf_bertscratch.configuration_bertscratch import CLASSIFIER_POOLINGS, PRESETS
from hf_bertscratch.onnx.common import ONNX_TASKS
from hf_bertscratch.tasks import COLUMN_ROLES, SHAPE_COLUMNS

# (command, flag) -> the values the flag takes, for flags whose values are checked in code rather than by argparse's
# choices (each tuple is the one its check uses).
CHECKED_IN_CODE: dict[tuple[str, str], tuple[str, ...]] = {
    ("pretrain", "objective"): pretraining_arguments.OBJECTIVES,
    ("pretrain", "model_size"): tuple(PRESETS),
    ("pretrain", "precision"): hardware.PRECISIONS,
    ("finetune", "precision"): hardware.PRECISIONS,
    ("finetune", "eval_strategy"): tuple(strategy.value for strategy in IntervalStrategy),
    ("finetune", "save_strategy"): tuple(strategy.value for strategy in SaveStrategy),
    ("pretrain", "hub_strategy"): run_folder.PUSH_HUB_STRATEGIES,
    ("finetune", "hub_strategy"): run_folder.PUSH_HUB_STRATEGIES,
    ("benchmark", "presets"): tuple(PRESETS),
    ("benchmark", "workloads"): benchmark.WORKLOADS,
    ("benchmark", "variants"): benchmark.VARIANTS,
    ("benchmark", "precisions"): benchmark.PRECISIONS,
    ("benchmark", "gemm_path"): ("auto", *cpu_matmul.PATHS),
    ("benchmark", "decoding"): benchmark.DECODINGS,
    ("export", "task"): tuple(ONNX_TASKS),
}


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield "pretrain", pretraining_arguments.build_parser()
    yield "finetune", finetuning_arguments.build_parser()
    yield "benchmark", ArgumentParser(benchmark.BenchmarkArguments)
    for command, (arguments_class, _) in cli.INSPECTION_COMMANDS.items():
        yield command, cli.CommandParser(arguments_class)


def own_flags() -> Iterator[tuple[str, argparse.Action, str]]:
    """(command, flag, its help) for every flag the package defines: transformers' TrainingArguments flags that a
    command takes unchanged are left out (their help is transformers'), and the help a first-run page hides is read
    from where the parser keeps it for --help_all."""
    for command, parser in _parsers():
        inherited = _inherited_trainer_fields(getattr(parser, "dataclass_types", ()))
        hidden = getattr(parser, "hidden_help", {})
        for action in parser._actions:
            if action.option_strings and action.dest not in inherited and action.dest not in ("help", "help_all"):
                yield command, action, hidden.get(action, action.help) or ""


def named(values: tuple[str, ...] | list[str], help: str) -> list[str]:
    """The values that `help` names as words of their own (`mean` is not named by `mean-max` nor `meaning`)."""
    return [value for value in values if re.search(rf"(?<![\w-]){re.escape(str(value))}(?![\w-])", help)]


FLAGS = list(own_flags())
CHOICE_FLAGS = [flag for flag in FLAGS if flag[1].choices and not set(flag[1].choices) <= {True, False}]


def test_the_flags_are_read() -> None:
    """Every flag of the table is read, and so are choices flags of the fine-tuning and inspection commands."""
    read = {(command, action.dest) for command, action, _ in FLAGS}
    assert set(CHECKED_IN_CODE) <= read
    assert {("finetune", "classifier_pooling"), ("similarity", "pooling"), ("tag", "aggregation_strategy")} <= read


@pytest.mark.parametrize(
    "command, action, help", CHOICE_FLAGS, ids=[f"{command}--{action.dest}" for command, action, _ in CHOICE_FLAGS]
)
def test_a_help_that_lists_a_flags_choices_lists_them_all(command: str, action: argparse.Action, help: str) -> None:
    """A help naming one value (its default, as --task_type's) lists none; naming two or more, it names every one."""
    choices = list(action.choices or ())
    listed = named(choices, help)
    assert len(listed) < 2 or listed == choices, f"{command} --{action.dest}: {help!r} leaves out " + str(
        [value for value in choices if value not in listed]
    )


@pytest.mark.parametrize("command, flag", sorted(CHECKED_IN_CODE))
def test_a_help_names_every_value_the_flags_check_takes(command: str, flag: str) -> None:
    (help,) = [help for name, action, help in FLAGS if (name, action.dest) == (command, flag)]
    values = CHECKED_IN_CODE[command, flag]
    assert named(values, help) == list(values), f"{command} --{flag}: {help!r}"


def test_classifier_poolings_help_is_made_from_the_configs_poolings() -> None:
    """--classifier_pooling's help and choices come from the config's CLASSIFIER_POOLINGS: a pooling added there
    without a description fails as the module is made, and one described but not taken is refused."""
    assert finetuning_arguments.POOLING_CHOICES == ("auto", *CLASSIFIER_POOLINGS)
    with pytest.raises(KeyError, match="'new'"):
        described_values(finetuning_arguments.POOLING_READS, [*finetuning_arguments.POOLING_CHOICES, "new"])
    with pytest.raises(ValueError, match=r"Described values the flag does not take: \['segments'\]"):
        described_values(finetuning_arguments.POOLING_READS, finetuning_arguments.POOLING_CHOICES[:-1])
    assert described_values({"a": "x", "b": "y", "c": "z"}, "abc") == "a (x), b (y) or c (z)"
    assert described_values({"a": "x"}, "a") == "a (x)"


def test_the_inspection_commands_take_the_values_the_library_takes() -> None:
    """The inspection flags' choices (`Literal` types, so that a type checker reads them) are the library's own tuples:
    a value the library gains or drops is a value the command gains or drops."""
    from typing import get_args, get_type_hints

    from hf_bertscratch import inference, similarity
    from hf_bertscratch.onnx.common import QUANTIZATIONS

    def literal_values(hint: object) -> set[str]:  # Literal["a"] | None -> {"a"}
        return {value for arg in get_args(hint) for value in ({arg} if isinstance(arg, str) else literal_values(arg))}

    def values(arguments: type, name: str) -> set[str]:
        return literal_values(get_type_hints(arguments)[name])

    assert values(cli.TagArguments, "aggregation_strategy") == set(inference.AGGREGATION_STRATEGIES)
    assert values(cli.InferenceArguments, "backend") == set(inference.BACKENDS)
    for arguments in (cli.InferenceArguments, cli.AnswerArguments):
        assert values(arguments, "dtype") == set(inference.DTYPES)
    for arguments in (cli.EmbedArguments, cli.SimilarityArguments):
        assert values(arguments, "pooling") == {"auto", *similarity.POOLINGS}
    assert values(cli.ExportArguments, "quantize") == set(QUANTIZATIONS)


SHAPE_WORDS = {  # how a column flag's help names each shape
    "classification": "classification",
    "multi-label-classification": "multi-label",
    "regression": "regression",
    "token-classification": "token classification",
    "question-answering": "question answering",
    "embedding": "embedding",
}


@pytest.mark.parametrize("role", COLUMN_ROLES)
def test_a_column_flags_help_names_every_shape_that_reads_it(role: str) -> None:
    """`--text_column`, `--label_column`, ...: the help names each shape of `SHAPE_COLUMNS` that reads the column
    (an embedding task reads text, text_pair and label), so none looks as if a shape ignored it."""
    (help,) = [help for name, action, help in FLAGS if (name, action.dest) == ("finetune", f"{role}_column")]
    readers = [shape for shape, roles in SHAPE_COLUMNS.items() if role in roles]
    missing = [shape for shape in readers if SHAPE_WORDS[shape] not in help.lower()]
    assert not missing, f"--{role}_column: {help!r} does not name {missing}"


def test_the_hold_out_help_states_each_tasks_default_as_parsing_sets_it() -> None:
    """--validation_split_percentage's help names, for every task of the table, the share of train it holds out
    unless the flag is given, and that share is the one parsing `--task NAME` sets; a task that holds some out by
    default chooses on its test split with 0, as the help says."""
    from hf_bertscratch.tasks import TASKS
    from hf_bertscratch.tasks.data import DataArguments, chooses_on_test_split

    (help,) = [
        help for name, action, help in FLAGS if (name, action.dest) == ("finetune", "validation_split_percentage")
    ]
    stated = re.search(r"Default, by --task: (.*?)\. For your own data:", " ".join(help.split()))
    assert stated, help
    shares = {}
    for group in stated.group(1).split("); "):
        stated_group = re.fullmatch(r"([\w, ]+?) (\d+) \(.*", group)
        assert stated_group, group
        shares.update(dict.fromkeys(stated_group.group(1).split(", "), float(stated_group.group(2))))
    assert shares == {name: DataArguments(task=name).validation_split_percentage for name in TASKS}
    for name in (name for name, share in shares.items() if share):
        assert chooses_on_test_split(DataArguments(task=name, validation_split_percentage=0))


def test_the_eval_split_help_names_the_tasks_whose_held_out_share_chooses_instead_of_the_test_split() -> None:
    """--eval_split's help says that naming the test split chooses on it only where none of train is held out: it
    names each task that holds a share out by default, with that share, and on those `--eval_split test` chooses on
    the held-out examples unless --validation_split_percentage 0 is given too, as parsing decides."""
    from hf_bertscratch.tasks import TASKS
    from hf_bertscratch.tasks.data import DataArguments, chooses_on_test_split

    (help,) = [help for name, action, help in FLAGS if (name, action.dest) == ("finetune", "eval_split")]
    help = " ".join(help.split()).replace("%%", "%")
    holders = {
        name: task.validation_split_percentage for name, task in TASKS.items() if task.validation_split_percentage
    }
    assert holders, "a task of the table holds a share of train out by default"
    for name, share in holders.items():
        assert f"{name}'s {share:g}% by default" in help, help
        assert not chooses_on_test_split(DataArguments(task=name, eval_split="test"))
        assert chooses_on_test_split(DataArguments(task=name, eval_split="test", validation_split_percentage=0))
    assert "chooses on it where none of train is held out" in help
    assert "add --validation_split_percentage 0 to choose on it" in help
