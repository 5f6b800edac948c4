"""A data file's columns, known before anything loads, from the standard library alone: the formats a data file may
have (`FILE_BUILDERS`, by which `hf_bertscratch.data` reads it), the columns its header names (`read_columns`), and
the `bertscratch` front door's check that the files a command trains on have the columns it reads
(`check_data_files`).

A file that lacks a column would otherwise fail only once torch, transformers and datasets have loaded and the data
has been read (several seconds); the check here fails within a second, with the same line as the library's own check
(`task_table.check_columns`, which stays for users of the API). A file whose header cannot be read cheaply (parquet,
a glob, SQuAD's nested json, a file that is missing or not UTF-8) is left to the library.
"""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .commands import flag_value
from .task_table import (
    COLUMN_ROLES,
    TaskOverrides,
    check_columns,
    column_flag,
    required_columns,
    resolve_task,
    split_roles,
)

# File extension -> (datasets builder, extra builder kwargs). ".gz" is stripped first: datasets decompresses itself.
FILE_BUILDERS: dict[str, tuple[str, dict[str, str]]] = {
    "txt": ("text", {}),
    "text": ("text", {}),
    "raw": ("text", {}),
    "csv": ("csv", {}),
    "tsv": ("csv", {"sep": "\t"}),
    "json": ("json", {}),
    "jsonl": ("json", {}),
    "parquet": ("parquet", {}),
}
TEXT_COLUMN = "text"  # the one column of a text file (a row per line), and the default --text_column of pretraining
FIRST_ROW_LIMIT = 1 << 20  # characters of a JSON Lines file's first line read; a longer one is left to the library


def file_extension(path: Path) -> str:
    """The extension that says how `path` is read, after a ".gz" ("train.csv.gz" -> "csv"; "" when there is none)."""
    suffixes = [suffix.lstrip(".").lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == "gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def open_text(path: Path, encoding: str = "utf-8") -> TextIO:
    """The file as text, decompressed when it ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding)
    return path.open(encoding=encoding)


def read_columns(path: str | Path) -> list[str] | None:
    """The columns `datasets` reads from a local data file, told from its start alone: a csv or tsv file's header row,
    the keys of a JSON Lines file's first row, a text file's one column ("text"). None when its start does not say:
    a glob, a missing or unreadable file, parquet, json that is not one object per line (a list, SQuAD's nested
    layout)."""
    path = Path(path).expanduser()
    builder, kwargs = FILE_BUILDERS.get(file_extension(path), ("", {}))
    if builder not in ("text", "csv", "json") or any(char in str(path) for char in "*?[") or not path.is_file():
        return None
    if builder == "text":
        return [TEXT_COLUMN]
    try:
        with open_text(path, encoding="utf-8-sig") as lines:  # -sig: a byte-order mark is no part of the header
            if builder == "csv":
                return _csv_header(lines, kwargs.get("sep", ","))
            return _json_keys(lines.readline(FIRST_ROW_LIMIT))
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):  # unreadable, not gzip, not UTF-8, a huge field
        return None


def _csv_header(lines: TextIO, delimiter: str) -> list[str] | None:
    """The first row that is not blank (pandas, by which `datasets` reads csv, skips blank lines), or None."""
    for row in csv.reader(lines, delimiter=delimiter):
        if any(cell.strip() for cell in row):
            return row
    return None


def _json_keys(line: str) -> list[str] | None:
    """The keys of the JSON object on `line`; None when it holds none, or holds SQuAD's nested document (a "data"
    list, which question answering flattens into its own columns)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or isinstance(row.get("data"), list):
        return None
    return list(row)


def _given_files(args: list[str], splits: tuple[str, ...]) -> dict[str, str]:
    """Split -> the file that `--{split}_file` names, for the splits the arguments give a file."""
    files = {split: flag_value(args, f"--{split}_file") for split in splits}
    return {split: path for split, path in files.items() if path}


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
    columns = {split: read_columns(path) for split, path in files.items()}
    roles = split_roles(task, list(files), "test" in files, bool(overrides.test_split))
    for role, split in roles.items():
        found = columns.get(split)
        if found is not None:
            check_columns(found, required_columns(task, role, columns.get(roles["train"])), role)


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


# Command -> the check of the data files its arguments name.
DATA_FILE_CHECKS: dict[str, Callable[[list[str]], None]] = {
    "finetune": check_task_files,
    "pretrain": check_text_files,
    "pretrain-flax": check_text_files,
    "train-tokenizer": check_text_files,
}


def check_data_files(command: str, args: list[str]) -> None:
    """Fail in one line (ValueError), naming the missing column, the columns the file has and the flag that picks
    the column, when a local data file that `command`'s arguments name lacks a column the command reads."""
    check = DATA_FILE_CHECKS.get(command)
    if check is not None:
        check(args)


__all__ = [
    "DATA_FILE_CHECKS",
    "FILE_BUILDERS",
    "TEXT_COLUMN",
    "check_data_files",
    "check_task_files",
    "check_text_files",
    "file_extension",
    "open_text",
    "read_columns",
]
