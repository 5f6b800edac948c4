"""Tests for hf_bertscratch_base.data_files and hf_bertscratch_cli.data_checks: a data file's columns read from its start with the standard library, as
`datasets` reads them, and the front door's column check, which fails with the library's own line (the launcher's
timing and its torch-free import: tests/test_cli.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from hf_bertscratch.data import load_raw_datasets
from hf_bertscratch.pretraining_arguments import DataArguments as TextDataArguments
from hf_bertscratch.pretraining_data import load_text_splits
from hf_bertscratch.tasks.data import DataArguments, load_task_datasets
from hf_bertscratch_base.data_files import read_columns
from hf_bertscratch_cli.commands import flag_value
from hf_bertscratch_cli.data_checks import check_data_files

SQUAD_ROW = {"question": "Who?", "context": "Ann went.", "answers": {"text": ["Ann"], "answer_start": [0]}}


def write(path: Path, text: str | bytes) -> Path:
    """`text` into `path` in UTF-8, gzipped when the name ends in .gz; bytes as they are."""
    if isinstance(text, str):
        text = gzip.compress(text.encode("utf-8")) if path.suffix == ".gz" else text.encode("utf-8")
    path.write_bytes(text)
    return path


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("train.csv", "text,label\nthe cat,0\n", ["text", "label"]),
        ("train.tsv", "sentence\tlabel\nthe cat\t0\n", ["sentence", "label"]),
        ("quoted.tsv", '"sentence\tlabel"\nthe cat\t0\n', ['"sentence', 'label"']),  # tsv has no quoting
        ("train.csv.gz", 'review,"stars, given"\n"a, b",3\n', ["review", "stars, given"]),
        ("bom.csv", "\ufefftext,label\nthe cat,0\n", ["text", "label"]),
        ("blank.csv", "\n\ntext,label\nthe cat,0\n", ["text", "label"]),
        ("train.jsonl", jsonl({"text": "a", "label": 1}, {"text": "b", "label": 0}), ["text", "label"]),
        ("train.json.gz", jsonl({"tokens": ["a"], "ner_tags": ["O"]}), ["tokens", "ner_tags"]),
        ("notes.txt", "hello there\nsecond line\n", ["text"]),
    ],
)
def test_columns_from_the_header_are_those_datasets_reads(tmp_path: Path, name: str, text: str, expected: list) -> None:
    path = write(tmp_path / name, text)
    assert read_columns(path) == expected
    assert load_raw_datasets(train_file=str(path))["train"].column_names == expected


@pytest.mark.parametrize(
    "name, text",
    [
        ("train.parquet", b"PAR1 not read"),
        ("list.json", '[\n  {"text": "a", "label": 1}\n]\n'),
        ("squad.json", json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": []}]})),
        ("latin1.csv", "t\xe9xt,label\n".encode("latin-1")),
        ("broken.csv.gz", b"not gzip at all"),
        ("train.xlsx", "text,label\n"),
        ("*.csv", "text,label\n"),
        ("empty.csv", ""),
    ],
)
def test_a_start_that_does_not_say_the_columns_is_left_to_the_library(tmp_path: Path, name: str, text: str) -> None:
    assert read_columns(write(tmp_path / name, text)) is None
    assert read_columns(tmp_path / "missing.csv") is None


def both(name: str, text: str) -> dict[str, str]:
    """A train and a dev file of one format and the same columns."""
    stem, _, extension = name.partition(".")
    return {f"train.{extension}": text, f"dev.{extension}": text}


TAGS = jsonl({"words": ["Ann"], "ner_tags": ["B-PER"]})
QUESTIONS = jsonl({key: SQUAD_ROW[key] for key in ("question", "answers")})
MISSING = [
    ("finetune", both("x.csv", "text,stars\na,0\n"), [], "['label'] not in the train split; it has ['text', 'stars']: name yours with --label_column"),
    ("finetune", both("x.csv.gz", "text,label\na,0\n"), ["--text_column", "review"], "['review'] not in the train split; it has ['text', 'label']: name yours with --text_column"),
    ("finetune", both("x.tsv", "text\tlabel\na\t0\n"), ["--task", "sst2"], "['sentence'] not in the train split; it has ['text', 'label']: name yours with --text_column"),
    ("finetune", both("x.jsonl", TAGS), ["--task_type", "token-classification", "--tags-column", "ner_tags"], "['tokens'] not in the train split; it has ['words', 'ner_tags']: name yours with --tokens_column"),
    ("finetune", both("x.jsonl", QUESTIONS), ["--task_type", "question-answering"], "['context'] not in the train split; it has ['question', 'answers']: name yours with --context_column"),
    ("pretrain", {"notes.txt": "hello\n"}, ["--text_column", "body"], "['body'] not in the train split; it has ['text']: name yours with --text_column"),
]  # fmt: skip


def file_flags(tmp_path: Path, files: dict[str, str]) -> list[str]:
    """--train_file and --validation_file for the first and second of `files`, written into `tmp_path`."""
    paths = [write(tmp_path / name, text) for name, text in files.items()]
    return [arg for flag, path in zip(("--train_file", "--validation_file"), paths) for arg in (flag, str(path))]


def library_error(command: str, argv: list[str]) -> str:
    """The library's own line for `argv`'s data (the check `bertscratch COMMAND` meets once torch has loaded)."""
    kwargs = {argv[i].lstrip("-").replace("-", "_"): argv[i + 1] for i in range(0, len(argv), 2)}
    with pytest.raises(ValueError) as error:
        if command == "finetune":
            args = DataArguments(**kwargs)
            load_task_datasets(args, args.task_spec)
        else:
            load_text_splits(TextDataArguments(**kwargs), seed=0)
    return str(error.value)


@pytest.mark.parametrize("command, files, flags, missing", MISSING)
def test_a_missing_column_fails_at_the_front_door_as_in_the_library(
    tmp_path: Path, command: str, files: dict, flags: list, missing: str
) -> None:
    argv = file_flags(tmp_path, files) + flags
    with pytest.raises(ValueError) as error:
        check_data_files(command, argv)
    assert str(error.value) == f"Column(s) {missing}."
    assert str(error.value) == library_error(command, argv)


@pytest.mark.parametrize(
    "command, argv, line",
    [
        ("finetune", ["--train_file", "train.csv", "--validation_file", "dev.csv"], "['label'] not in the eval split; it has ['text', 'stars']: name yours with --label_column"),
        ("finetune", ["--train_file", "train.csv", "--validation_file", "train.csv", "--test_file", "notes.csv"], "['text'] not in the test split; it has ['body']: name yours with --text_column"),
        ("pretrain", ["--train_file", "train.csv", "--validation_file", "dev.csv"], "['text'] not in the validation split; it has ['body']: name yours with --text_column"),
        ("train-tokenizer", ["--train_file", "notes.txt.gz", "--text_column", "body"], "['body'] not in the train split; it has ['text']: name yours with --text_column"),
    ],
)  # fmt: skip
def test_the_front_door_names_the_split_that_lacks_the_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, argv: list, line: str
) -> None:
    """Files of one run with different columns: the check names the split that lacks the column."""
    write(tmp_path / "train.csv", "text,label\na,0\n")
    write(tmp_path / "dev.csv", "text,stars\nb,1\n" if command == "finetune" else "body\nb\n")
    write(tmp_path / "notes.txt.gz", "hello\n")
    write(tmp_path / "notes.csv", "body\nc\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        check_data_files(command, argv)
    assert str(error.value) == f"Column(s) {line}."


@pytest.mark.parametrize(
    "flags, test",
    [
        ([], "text\nc\n"),  # as GLUE's own test files come
        (["--task_type", "token-classification"], '{"tokens": ["c"]}\n'),
        (["--task_type", "question-answering"], '{"question": "q", "context": "c"}\n'),
        (["--task_type", "embedding", "--text_pair_column", "pair"], "text,pair\nc,d\n"),
    ],
    ids=["classification", "token-classification", "question-answering", "embedding"],
)
def test_a_test_file_without_labels_passes_the_front_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list, test: str
) -> None:
    """A test file without labels (tags, answers) is predicted, not scored: only the columns read as input are
    required of it."""
    extension = ".csv" if test.startswith("text") else ".jsonl"
    write(tmp_path / f"test{extension}", test)
    write(tmp_path / "train.parquet", "PAR1")  # columns not read before torch loads
    monkeypatch.chdir(tmp_path)
    files = ["--train_file", "train.parquet", "--validation_file", "train.parquet", "--test_file", f"test{extension}"]
    check_data_files("finetune", [*flags, *files])


def test_a_test_file_without_labels_as_the_eval_split_is_refused_at_the_front_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a validation file the test file is the eval split, which checkpoints are chosen on: one without labels
    is refused as that, not asked for a --label_column."""
    write(tmp_path / "train.csv", "text,label\na,0\n")
    write(tmp_path / "test.csv", "text\nc\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        check_data_files("finetune", ["--train_file", "train.csv", "--test_file", "test.csv"])
    assert str(error.value).startswith(
        "The test file 'test.csv' has no labels (no 'label' column), and it is the eval split here (no "
        "--validation_file), which checkpoints are chosen on: give a --validation_file with labels"
    )


@pytest.mark.parametrize(
    "command, files, flags",
    [
        ("finetune", {"train.csv": "text,label\na,0\n", "dev.csv": "text,label\nb,1\n"}, []),
        ("finetune", both("x.csv", "text,stars\na,0\n"), ["--label_column", "stars"]),
        ("finetune", {"train.csv": "text,stars\na,0\n"}, ["--label-column", "stars"]),  # transformers' dashed spelling
        ("finetune", {"train.csv": "text,stars\na,0\n"}, ["--label_column", "label", "--label_column=stars"]),
        ("finetune", {"train.csv": "text,label\n", "dev.csv": "a,b\n"}, ["--task", "imdb"]),  # imdb evaluates on test
        ("finetune", {"train.csv": "text,label\n", "dev.csv": "text,label\n"}, ["--task", "nope"]),  # named later
        ("finetune", {"train.json": json.dumps({"data": []}), "dev.parquet": "PAR1"}, ["--task_type", "question-answering"]),
        ("finetune", {"train.jsonl": jsonl(SQUAD_ROW)}, ["--task_type", "question-answering"]),  # ids made up
        ("finetune", {"train.jsonl": jsonl({"text": "a", "text_pair": "b"})}, ["--task_type", "embedding", "--text_pair_column", "text_pair"]),
        ("pretrain", {"train.csv": "body\nhello\n"}, ["--text_column", "body"]),
        ("pretrain", {"dev.csv": "body\nhello\n"}, ["--task_text", "sst2"]),
        ("classify", {"train.csv": "body\nhello\n"}, []),
    ],
)  # fmt: skip
def test_files_with_the_columns_pass_the_front_door(tmp_path: Path, command: str, files: dict, flags: list) -> None:
    check_data_files(command, file_flags(tmp_path, files) + flags)


def test_flag_value_reads_a_flag_as_the_parser_does() -> None:
    args = ["--text-column", "a", "--label_column=b", "--label_column", "c", "--task"]
    assert flag_value(args, "--text_column") == "a"
    assert flag_value(args, "--label_column") == "c"  # the last one given, as argparse keeps it
    assert flag_value(args, "--task") is None and flag_value(args, "--tags_column") is None
