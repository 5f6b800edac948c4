"""The front door's check that the local data files a command names have the columns it reads, before torch loads:
their headers (`hf_bertscratch_base.data_files.read_columns`; a CoNLL text file's first token line,
`read_conll_columns`) against the task table's columns, or an inference command's input columns (and a
classification task's first jsonl row, whose label must be no list: `check_labels_are_no_lists`), and the
`--*_column` flags (an inference command's: else the columns fine-tuning recorded in the model's config), failing with
the library's own line (`task_table.check_columns`, `check_input_columns`, `check_tagged_conll_file`, which stay for
users of the API), and that a train file alone holds enough examples to hold some out of
(`check_train_file_holds_out_enough`). A file whose header cannot be read cheaply (parquet, a glob, SQuAD's nested json,
a file that is not UTF-8) is left to the library; a named file that does not exist fails here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

from hf_bertscratch_base.data_files import (
    TEXT_COLUMN,
    check_input_file_is_not_conll,
    check_row_width,
    count_examples,
    is_text_file,
    read_columns,
    read_conll_columns,
    read_first_row,
)
from hf_bertscratch_base.model_config import read_model_config
from hf_bertscratch_base.task_table import (
    COLUMN_ROLES,
    FLAG,
    HOLD_OUT_PERCENTAGE,
    INPUT_FILE_ROLES,
    MIN_HELD_OUT,
    TaskOverrides,
    TaskSpec,
    check_columns,
    check_enough_held_out,
    check_file_layout,
    check_input_columns,
    check_labels_are_no_lists,
    check_tagged_conll_file,
    check_test_file_as_eval,
    choose_file_columns,
    column_flag,
    recorded_input_columns,
    required_columns,
    resolve_task,
    split_roles,
)

from .commands import flag_value, model_argument


def _given_files(args: list[str], splits: tuple[str, ...]) -> dict[str, str]:
    """Split -> the file that `--{split}_file` names, for the splits the arguments give a file; a plain path (not a
    glob or a URL) that does not exist fails here (FileNotFoundError), before any other file's check, as does a csv
    or tsv file whose first row has more fields than its header (`check_row_width`)."""
    files = {split: flag_value(args, f"--{split}_file") for split in splits}
    given = {split: path for split, path in files.items() if path}
    for split, path in given.items():
        if not any(char in path for char in "*?[") and "://" not in path and not Path(path).exists():
            raise FileNotFoundError(f"The {split} file {path!r} (--{split}_file) does not exist.")
    for path in given.values():
        check_row_width(path)
    return given


def check_task_files(args: list[str]) -> None:
    """`finetune`: each file read as a split of the task (train, eval, test) has the columns the task reads there, by
    the task table and the column flags (`required_columns`, as `hf_bertscratch.tasks.data` checks them)."""
    files = _given_files(args, ("train", "validation", "test"))
    if not files:
        return
    overrides = TaskOverrides(
        task=flag_value(args, "--task"),
        task_type=flag_value(args, "--task_type"),
        train_split=flag_value(args, "--train_split"),
        eval_split=flag_value(args, "--eval_split"),
        test_split=flag_value(args, "--test_split"),
        columns={role: name for role in COLUMN_ROLES if (name := flag_value(args, column_flag(role)))},
    )
    try:
        task = resolve_task(overrides)
    except ValueError:  # an unknown task, or flags that do not fit it: the command's own check names them
        return
    conll = task.shape == "token-classification"  # a text file holds CoNLL-format sentences there
    columns = {
        split: read_conll_columns(path) if conll and is_text_file(path) else read_columns(path)
        for split, path in files.items()
    }
    roles = split_roles(task, list(files), "test" in files, bool(overrides.test_split), bool(overrides.eval_split))
    for role, split in roles.items():
        if split in files:
            required = required_columns(task, role, columns.get(roles["train"]))
            check_file_layout(task, split, files[split], columns.get(split), required)
    for role, split in roles.items():
        found = columns.get(split)
        if conll and found is not None and is_text_file(files[split]):
            check_tagged_conll_file(task, role, split, files[split], found)
    if (eval_columns := columns.get(roles["eval"])) is not None:
        check_test_file_as_eval(task, roles, eval_columns, files.get("test"))
    for role, split in roles.items():
        found = columns.get(split)
        if found is not None:
            check_columns(found, required_columns(task, role, columns.get(roles["train"])), role)
    if task.shape == "classification":  # a jsonl file's first label a list: a multi-label task's labels
        for role, split in roles.items():
            if split in files and (row := read_first_row(files[split])) is not None:
                check_labels_are_no_lists(task.column("label"), role, row.get(task.column("label")))
    if set(files) == {"train"} and overrides.task is None and not _other_data(args):
        check_train_file_holds_out_enough(task, files["train"], conll and is_text_file(files["train"]))


def _other_data(args: list[str]) -> bool:
    """Whether the arguments name data beside the files, or a share to hold out: the library then holds out what it
    is asked, or has other splits to choose on."""
    flags = ("--dataset_name", "--data_dir", "--eval_split", "--test_split", "--validation_split_percentage")
    return any(flag_value(args, flag) is not None for flag in flags)


def check_train_file_holds_out_enough(task: TaskSpec, path: str, conll: bool) -> None:
    """A train file alone, of own data, has enough examples that the share held out of it to choose on and score is
    `MIN_HELD_OUT` at least (`check_enough_held_out`, as `hf_bertscratch.tasks.data.load_task_datasets` checks it),
    counted without datasets (`count_examples`) up to the count that holds out enough; a file that cannot be counted
    so is left to the library."""
    percentage = task.validation_split_percentage or HOLD_OUT_PERCENTAGE
    enough = math.ceil(100 * MIN_HELD_OUT / percentage)  # holds out MIN_HELD_OUT at least, as any larger count does
    examples = count_examples(path, conll=conll, up_to=enough)
    if examples:  # none: the library names an empty file
        check_enough_held_out(examples, percentage)


def check_text_files(args: list[str]) -> None:
    """`pretrain`, `pretrain-flax`, `train-tokenizer`: the train (and validation) file has the --text_column."""
    files = _given_files(args, ("train", "validation"))
    if "train" not in files or flag_value(args, "--task_text") is not None:  # the command refuses these itself
        return
    text_column = flag_value(args, column_flag("text"))
    for split, path in files.items():
        found = read_columns(path)
        if found is not None:
            check_columns(found, {"text": TEXT_COLUMN if text_column is None else text_column}, split)


def check_input_file(command: str, args: list[str]) -> None:
    """An inference command's --input_file has the columns the command reads from it: each its column flag names,
    else the one fine-tuning recorded in the model's config (a model folder's config.json, or a Hub id's in the Hub
    cache), else the flag's default (`task_table.choose_file_columns`, `tag`'s column of word lists or of texts, as
    `hf_bertscratch.cli.command_inputs` chooses them, failing with the same line). A text file's lines are its texts, whatever the model recorded. Where
    the model's config is not at hand (a Hub id the cache does not hold), only the columns the flags name are
    checked: the library reads the others once it has the config."""
    path = _given_files(args, ("input",)).get("input")
    if path is None or "--json" in args:  # --json with a file: the library's refusal of it comes first
        return
    check_input_file_is_not_conll(path)
    found = read_columns(path)
    if found is None:
        return
    model = model_argument(command, args)
    config = read_model_config(model) if model is not None else None
    roles = INPUT_FILE_ROLES[command]
    flags = {role: flag_value(args, column_flag(role)) for role in roles}
    recorded = {} if is_text_file(path) else recorded_input_columns(config)
    chosen = choose_file_columns(roles, flags, recorded, found)
    if config is None:
        chosen = {role: column for role, column in chosen.items() if column.source == FLAG}
    check_input_columns(found, chosen, path)


# Command -> the splits whose file its `--{split}_file` flags name (an inference command's: --input_file).
FILE_SPLITS: dict[str, tuple[str, ...]] = {
    "finetune": ("train", "validation", "test"),
    **{command: ("train", "validation") for command in ("pretrain", "pretrain-flax", "train-tokenizer")},
    **{command: ("input",) for command in INPUT_FILE_ROLES},
}
# Command -> the check of the data files its arguments name.
DATA_FILE_CHECKS: dict[str, Callable[[list[str]], None]] = {
    "finetune": check_task_files,
    "pretrain": check_text_files,
    "pretrain-flax": check_text_files,
    "train-tokenizer": check_text_files,
    **{command: functools.partial(check_input_file, command) for command in INPUT_FILE_ROLES},
}


def check_files_exist(command: str, args: list[str]) -> None:
    """Fail in one line (FileNotFoundError) when a local data file that `command`'s arguments name is missing."""
    _given_files(args, FILE_SPLITS.get(command, ()))


def check_data_files(command: str, args: list[str]) -> None:
    """Fail in one line when a local data file that `command`'s arguments name is missing (FileNotFoundError) or
    lacks a column the command reads (ValueError, naming the missing column, the columns the file has and the flag
    that picks the column)."""
    check = DATA_FILE_CHECKS.get(command)
    if check is not None:
        check(args)


__all__ = [
    "DATA_FILE_CHECKS",
    "FILE_SPLITS",
    "check_data_files",
    "check_files_exist",
    "check_input_file",
    "check_task_files",
    "check_train_file_holds_out_enough",
    "check_text_files",
]
