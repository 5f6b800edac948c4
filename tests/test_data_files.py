"""Tests for hf_bertscratch_base.data_files and hf_bertscratch_cli.data_checks: a data file's columns read from its start with the standard library, as
`datasets` reads them, and the front door's column checks of training files and inference commands' --input_file,
which fail with the library's own line (the launcher's timing and its torch-free import: tests/test_cli.py)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from hf_bertscratch.data import load_raw_datasets
from hf_bertscratch.pretraining_arguments import DataArguments as TextDataArguments
from hf_bertscratch.pretraining_data import load_text_splits
from hf_bertscratch.tasks.data import DataArguments, load_task_datasets
from hf_bertscratch_base.data_files import read_columns
from hf_bertscratch_base.task_table import (
    COLUMN_ROLES,
    INPUT_FILE_ROLES,
    TaskOverrides,
    column_flag,
    input_columns,
    recorded_input_columns,
    resolve_task,
)
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
    """--eval_split test makes the test file the eval split, which checkpoints are chosen on: one without labels is
    refused as that, not asked for a --label_column. Without the flag it is predicted (train examples are held out to
    choose on), and passes."""
    write(tmp_path / "train.csv", "text,label\na,0\n")
    write(tmp_path / "test.csv", "text\nc\n")
    monkeypatch.chdir(tmp_path)
    files = ["--train_file", "train.csv", "--test_file", "test.csv"]
    with pytest.raises(ValueError) as error:
        check_data_files("finetune", [*files, "--eval_split", "test"])
    assert str(error.value).startswith(
        "The test file 'test.csv' has no labels (no 'label' column), and --eval_split test makes it the eval split, "
        "which checkpoints are chosen on: leave out --eval_split test"
    )
    check_data_files("finetune", files)


# A train file alone of a row or two, with a share to hold out named: its columns pass, and the library holds out what
# it is asked (without the share, 5% of it would hold out too few to choose on: refused).
HELD = ["--validation_split_percentage", "50"]


@pytest.mark.parametrize(
    "command, files, flags",
    [
        ("finetune", {"train.csv": "text,label\na,0\n", "dev.csv": "text,label\nb,1\n"}, []),
        ("finetune", both("x.csv", "text,stars\na,0\n"), ["--label_column", "stars"]),
        ("finetune", {"train.csv": "text,stars\na,0\n"}, ["--label-column", "stars", *HELD]),  # transformers' dashed spelling
        ("finetune", {"train.csv": "text,stars\na,0\n"}, ["--label_column", "label", "--label_column=stars", *HELD]),
        ("finetune", {"train.csv": "text,label\n", "dev.csv": "a,b\n"}, ["--task", "imdb"]),  # imdb evaluates on test
        ("finetune", {"train.csv": "text,label\n", "dev.csv": "text,label\n"}, ["--task", "nope"]),  # named later
        ("finetune", {"train.json": json.dumps({"data": []}), "dev.parquet": "PAR1"}, ["--task_type", "question-answering"]),
        ("finetune", {"train.jsonl": jsonl(SQUAD_ROW)}, ["--task_type", "question-answering", *HELD]),  # ids made up
        ("finetune", {"train.jsonl": jsonl({"text": "a", "text_pair": "b"})}, ["--task_type", "embedding", "--text_pair_column", "text_pair", *HELD]),
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


TAGGED = "-DOCSTART- -X- O O\n\nAnn NNP B-PER\nwent VBD O\n\nBob NNP B-PER\n"
WORDS = "-DOCSTART-\n\n\nAnn\nwent\n\nBob\n"  # a -DOCSTART- line and blank lines before the first word


@pytest.mark.parametrize(
    "files",
    [
        {"--train_file": "words.txt", "--validation_file": "tagged.txt"},
        {"--train_file": "tagged.txt", "--validation_file": "words.txt.gz"},
        {"--train_file": "tagged.txt", "--test_file": "words.txt", "--eval_split": "test"},  # the test file is eval
    ],
    ids=["train", "validation", "test-as-eval"],
)
def test_a_conll_file_of_words_alone_fails_at_the_front_door_as_in_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    """A CoNLL text file whose first token line is a word alone is a test file to predict; as a train or eval split
    it is refused before torch loads, with the library's line, read from its first token line."""
    for name, text in {"tagged.txt": TAGGED, "words.txt": WORDS, "words.txt.gz": WORDS}.items():
        write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    argv = ["--task_type", "token-classification", *(arg for pair in files.items() for arg in pair)]
    with pytest.raises(ValueError) as error:
        check_data_files("finetune", argv)
    assert "holds words without tags (one column per line)" in str(error.value)
    assert str(error.value) == library_error("finetune", argv)


@pytest.mark.parametrize(
    "files",
    [
        {"--train_file": "tagged.txt", "--validation_file": "tagged.txt", "--test_file": "words.txt"},
        {"--train_file": "tagged.txt", "--validation_file": "blank.txt"},  # no token line: left to the library
    ],
    ids=["test-predicted", "no-token-line"],
)
def test_conll_files_that_the_front_door_leaves_to_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    for name, text in {"tagged.txt": TAGGED, "words.txt": WORDS, "blank.txt": "-DOCSTART-\n\n"}.items():
        write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    check_data_files("finetune", ["--task_type", "token-classification", *(a for pair in files.items() for a in pair)])


# The start of the line a text file of inputs (one text per line) fails with where a column is asked of it.
TEXT_FILE = "--input_file '{path}' is a .txt file: it holds one text per line and has no columns,"
# An inference command's --input_file: (command, file, its text, flags, the input columns the model's config records,
# the line it fails with).
INPUT_MISSING = [
    ("classify", "reviews.csv", "text,label\na,0\n", ["--text_column", "review"], {}, "Column 'review' (--text_column as given) not in --input_file '{path}'; it has ['text', 'label']: name yours with --text_column"),
    ("classify", "pairs.tsv", "text\tlabel\na\t0\n", ["--text-pair-column", "second"], {}, "Column 'second' (--text_pair_column as given) not in --input_file '{path}'; it has ['text', 'label']: name yours with --text_pair_column"),
    ("similarity", "pairs.jsonl", jsonl({"a": "x", "b": "y"}), ["--text_pair_column=b"], {}, "Column 'text' (--text_column's default) not in --input_file '{path}'; it has ['a', 'b']: name yours with --text_column"),
    ("answer", "questions.csv.gz", "text,label\na,0\n", [], {}, "Columns 'question' (--question_column's default) and 'context' (--context_column's default) not in --input_file '{path}'; it has ['text', 'label']: name yours with --question_column, --context_column"),
    ("answer", "questions.jsonl", QUESTIONS, ["--question_column", "query"], {}, "Columns 'query' (--question_column as given) and 'context' (--context_column's default) not in --input_file '{path}'; it has ['question', 'answers']: name yours with --question_column, --context_column"),
    ("tag", "texts.jsonl", jsonl({"sentence": "Ann went ."}), [], {}, "Column 'text' (--text_column's default) not in --input_file '{path}'; it has ['sentence']: name yours with --text_column"),
    ("embed", "notes.txt", "hello\n", ["--text_column", "body"], {}, f"{TEXT_FILE} so no column 'body' (--text_column as given): columns come in a .csv, .tsv, .json, .jsonl or .parquet file; leave --text_column out to read its lines"),
    ("tag", "notes.txt", "Ann went .\n", ["--tokens_column", "words"], {}, f"{TEXT_FILE} so no column 'words' (--tokens_column as given): lists of words come in a column of a .json, .jsonl or .parquet file"),
    ("tag", "notes.txt.gz", "Ann went .\n", ["--tokens_column", "words"], {"tokens": "words"}, f"{TEXT_FILE} so no column 'words' (--tokens_column as given): lists of words come in a column of a .json, .jsonl or .parquet file"),
    ("classify", "notes.txt", "a premise\n", ["--text_pair_column", "hypothesis"], {}, f"{TEXT_FILE} so no column 'hypothesis' (--text_pair_column as given): columns come in a .csv, .tsv, .json, .jsonl or .parquet file"),
    ("similarity", "notes.txt", "a text\n", ["--text_pair_column", "b"], {"text_pair": "b"}, f"{TEXT_FILE} so no column 'b' (--text_pair_column as given): columns come in a .csv, .tsv, .json, .jsonl or .parquet file"),
    ("answer", "notes.txt", "Who?\n", [], {}, f"{TEXT_FILE} so no columns 'question' (--question_column's default) and 'context' (--context_column's default): columns come in a .csv, .tsv, .json, .jsonl or .parquet file"),
    ("fill-mask", "texts.csv", "body\nthe [MASK] .\n", [], {}, "Column 'text' (--text_column's default) not in --input_file '{path}'; it has ['body']: name yours with --text_column"),
    ("classify", "reviews.csv", "text,label\na,0\n", [], {"text": "review"}, "Column 'review' (--text_column recorded at fine-tuning) not in --input_file '{path}'; it has ['text', 'label']: name yours with --text_column"),
    ("classify", "pairs.csv", "premise,label\na,0\n", [], {"text": "premise", "text_pair": "hypothesis"}, "Column 'hypothesis' (--text_pair_column recorded at fine-tuning) not in --input_file '{path}'; it has ['premise', 'label']: name yours with --text_pair_column"),
    ("similarity", "pairs.jsonl", jsonl({"a": "x", "b": "y"}), ["--text_column", "a"], {"text": "s1", "text_pair": "s2"}, "Column 's2' (--text_pair_column recorded at fine-tuning) not in --input_file '{path}'; it has ['a', 'b']: name yours with --text_pair_column"),
    ("answer", "questions.jsonl", jsonl(SQUAD_ROW), [], {"question": "query", "context": "passage", "tokens": "words"}, "Columns 'query' (--question_column recorded at fine-tuning) and 'passage' (--context_column recorded at fine-tuning) not in --input_file '{path}'; it has ['question', 'context', 'answers']: name yours with --question_column, --context_column"),
    ("tag", "words.jsonl", jsonl({"sentence": "Ann went ."}), [], {"tokens": "words"}, "Column 'words' (--tokens_column recorded at fine-tuning) not in --input_file '{path}'; it has ['sentence']: name yours with --tokens_column"),
    ("tag", "words.jsonl", jsonl({"text": "Ann went ."}), ["--tokens_column", "words"], {}, "Column 'words' (--tokens_column as given) not in --input_file '{path}'; it has ['text']: name yours with --tokens_column"),
    ("embed", "texts.csv", "body\nhello\n", [], {"text": "sentence"}, "Column 'sentence' (--text_column recorded at fine-tuning) not in --input_file '{path}'; it has ['body']: name yours with --text_column"),
]  # fmt: skip


# A csv or tsv file's word-list column: (file, its text, flags, the input columns the model's config records).
CSV_WORD_LISTS = [
    ("words.csv", "words,id\nEU rejects German call,1\n", [], {"tokens": "words"}),
    ("words.tsv.gz", "id\twords\n1\tEU rejects German call\n", ["--tokens_column", "words"], {}),
]


@pytest.mark.parametrize("name, text, flags, recorded", CSV_WORD_LISTS)
def test_a_csv_column_of_word_lists_fails_at_the_front_door_as_in_the_library(
    tmp_path: Path, name: str, text: str, flags: list[str], recorded: dict[str, str]
) -> None:
    """A csv or tsv cell holds a string: `tag` refuses the column it would read word lists from, naming the row and
    its value, the files that hold lists, and the flag that reads the strings as texts."""
    path = write(tmp_path / name, text)
    model = model_folder(tmp_path / "model", recorded)
    source = "as given" if flags else "recorded at fine-tuning"
    expected = (
        f"Row 1 of --input_file {str(path)!r} (counting from 1, the header not counted) holds 'EU rejects German "
        f"call' in column 'words' (--tokens_column {source}): a .{name.split('.')[1]} file's cells hold strings, and "
        "lists of words come in a column of a .json, .jsonl or .parquet file, as token-classification fine-tuning "
        "reads them; to tag the strings as texts, name the column with --text_column instead."
    )
    with pytest.raises(ValueError) as error:
        check_data_files("tag", [str(model), "--input_file", str(path), *flags])
    assert str(error.value) == expected
    assert str(error.value) == library_input_error(model, "tag", path, flags)


def model_folder(path: Path, recorded: dict[str, str]) -> Path:
    """A model folder's config.json, recording the input columns `recorded` (none when empty) as fine-tuning does."""
    path.mkdir()
    config = {"model_type": "bertscratch", **({"input_columns": recorded} if recorded else {})}
    write(path / "config.json", json.dumps(config))
    return path


def library_input_error(model: Path, command: str, path: Path, argv: list[str]) -> str:
    """The library's own line for an inference command's --input_file (`cli.command_inputs`, once torch has
    loaded), the command's arguments parsed by its own parser."""
    from hf_bertscratch import cli

    args = cli.parse_command_arguments(command, [str(model), "--input_file", str(path), *argv])
    with pytest.raises(ValueError) as error:
        cli.command_inputs(args, (), INPUT_FILE_ROLES[command])
    return str(error.value)


@pytest.mark.parametrize("command, name, text, flags, recorded, missing", INPUT_MISSING)
def test_an_input_file_without_the_commands_columns_fails_at_the_front_door_as_in_the_library(
    tmp_path: Path, command: str, name: str, text: str, flags: list[str], recorded: dict[str, str], missing: str
) -> None:
    """Each column the command reads is the one its flag names, else the one fine-tuning recorded in the model's
    config, else the flag's default; the line names it, where the name came from, and the columns the file has."""
    path = write(tmp_path / name, text)
    model = model_folder(tmp_path / "model", recorded)
    with pytest.raises(ValueError) as error:
        check_data_files(command, [str(model), "--input_file", str(path), *flags])
    assert str(error.value) == f"{missing.format(path=path)}."
    assert str(error.value) == library_input_error(model, command, path, flags)


@pytest.mark.parametrize(
    "command, files, flags, recorded",
    [
        ("classify", {"reviews.csv": "review,label\na,0\n"}, ["--text_column", "review"], {}),
        ("classify", {"pairs.tsv": "text\tsecond\na\tb\n"}, ["--text_pair_column", "second"], {}),
        ("similarity", {"pairs.jsonl": jsonl({"a": "x", "b": "y"})}, ["--text_column", "a", "--text_pair_column", "b"], {}),
        ("answer", {"questions.jsonl": jsonl(SQUAD_ROW)}, [], {}),
        ("answer", {"dev.json": json.dumps({"version": "1.1", "data": []})}, [], {}),  # SQuAD's layout: the library's
        ("tag", {"texts.txt": "Ann went .\n"}, [], {}),
        ("tag", {"words.jsonl": jsonl({"words": ["Ann", "went"]})}, [], {"tokens": "words"}),
        ("tag", {"texts.jsonl": jsonl({"text": "Ann went ."})}, [], {"tokens": "words"}),  # texts, of a words model
        ("tag", {"texts.txt": "Ann went .\n"}, [], {"tokens": "words"}),  # a text file's lines are its texts
        ("embed", {"texts.parquet": "PAR1"}, ["--text_column", "body"], {}),  # columns not read before torch loads
        ("fill-mask", {}, ["the [MASK] ."], {}),  # no --input_file
        ("answer", {"reviews.csv": "text,label\na,0\n"}, ["--json"], {}),  # the library refuses --json with a file first
        ("classify", {"reviews.csv": "review,label\na,0\n"}, [], {"text": "review"}),
        ("classify", {"reviews.csv": "text,label\na,0\n"}, ["--text_column", "text"], {"text": "review"}),  # the flag wins
        ("classify", {"reviews.txt": "a review\n"}, [], {"text": "review"}),  # a text file's lines are its texts
        ("similarity", {"pairs.csv": "s1,s2\na,b\n"}, [], {"text": "s1", "text_pair": "s2"}),
        ("answer", {"questions.csv": "query,passage\nwho?,Ann went.\n"}, [], {"question": "query", "context": "passage"}),
    ],
)  # fmt: skip
def test_input_files_with_the_commands_columns_pass_the_front_door(
    tmp_path: Path, command: str, files: dict[str, str], flags: list[str], recorded: dict[str, str]
) -> None:
    paths = [str(write(tmp_path / name, text)) for name, text in files.items()]
    model = model_folder(tmp_path / "model", recorded)
    check_data_files(command, [str(model), *(arg for path in paths for arg in ("--input_file", path)), *flags])


@pytest.mark.parametrize(
    "command, name, text, flags, recorded, expected",
    [
        ("answer", "questions.csv", "query,passage\nwho?,Ann went.\n", [], {"question": "query", "context": "passage"},
         {"question": ["who?"], "context": ["Ann went."]}),
        ("classify", "pairs.csv", "premise,hypothesis\na,b\n", [], {"text": "premise", "text_pair": "hypothesis"},
         {"text": ["a"], "text_pair": ["b"]}),
        ("classify", "reviews.csv", "review,note\na,b\n", ["--text_column", "note"], {"text": "review"},
         {"text": ["b"]}),
        ("embed", "texts.txt", "a line\n", [], {"text": "review"}, {"text": ["a line"]}),
        ("tag", "texts.csv", "text,note\nAnn went .,x\n", [], {"tokens": "words"}, {"text": ["Ann went ."]}),
        ("tag", "words.jsonl", jsonl({"text": "Ann went .", "words": ["Ann", "went", "."]}), [], {"tokens": "words"},
         {"tokens": [["Ann", "went", "."]]}),
        ("tag", "words.jsonl", jsonl({"text": "Ann went .", "words": ["Ann", "went", "."]}), ["--text_column", "text"],
         {"tokens": "words"}, {"text": ["Ann went ."]}),
    ],
)  # fmt: skip
def test_the_library_reads_the_columns_a_model_was_fine_tuned_on(
    tmp_path: Path,
    command: str,
    name: str,
    text: str,
    flags: list[str],
    recorded: dict[str, str],
    expected: dict[str, list[str]],
) -> None:
    """A pair model reads its pairs, a reader its questions and contexts, from the recorded columns; a flag given
    wins; a text file's lines are its texts; `tag` reads a token classifier's recorded word lists where the file has
    them, else texts."""
    from hf_bertscratch import cli

    path = write(tmp_path / name, text)
    model = model_folder(tmp_path / "model", recorded)
    args = cli.parse_command_arguments(command, [str(model), "--input_file", str(path), *flags])
    assert cli.command_inputs(args, (), INPUT_FILE_ROLES[command]) == expected


def test_the_front_door_leaves_the_columns_of_a_model_whose_config_it_cannot_read_to_the_library(
    tmp_path: Path,
) -> None:
    """A Hub id the cache does not hold may record columns of its own: the front door checks the columns the flags
    name alone, and leaves the others to the library, which reads the config it downloads."""
    path = write(tmp_path / "reviews.csv", "review,label\na,0\n")
    check_data_files("classify", ["user/model", "--input_file", str(path)])
    with pytest.raises(ValueError, match="Column 'body' \\(--text_column as given\\)"):
        check_data_files("classify", ["user/model", "--input_file", str(path), "--text_column", "body"])


def test_a_missing_input_file_fails_at_the_front_door(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        check_data_files("embed", ["model", "--input_file", str(tmp_path / "texts.csv")])
    assert str(error.value) == f"The input file {str(tmp_path / 'texts.csv')!r} (--input_file) does not exist."


def test_the_front_door_reads_the_input_columns_the_commands_read() -> None:
    """`INPUT_FILE_ROLES` is each inference command's input roles, whose column flags default to None: the column
    fine-tuning recorded, else the role's default, is chosen with the model's config (`choose_input_columns`)."""
    from hf_bertscratch import cli

    commands = {
        command
        for command, (arguments, _) in cli.INSPECTION_COMMANDS.items()
        if "input_file" in {each.name for each in dataclasses.fields(arguments)}
    }
    assert set(INPUT_FILE_ROLES) == commands
    for command, roles in INPUT_FILE_ROLES.items():
        fields = {each.name: each.default for each in dataclasses.fields(cli.INSPECTION_COMMANDS[command][0])}
        assert {name[: -len("_column")] for name in fields if name.endswith("_column")} == set(roles), command
        assert {fields[f"{role}_column"] for role in roles} == {None}, command


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--task", "sst2"], {"text": "sentence"}),
        (["--task", "mnli"], {"text": "premise", "text_pair": "hypothesis"}),
        (["--task_type", "classification", "--text_column", "review", "--label_column", "stars"], {"text": "review"}),
        (["--task_type", "token-classification", "--tokens_column", "words", "--tags_column", "labels"], {"tokens": "words"}),
        (["--task_type", "question-answering", "--question_column", "query", "--context_column", "passage"], {"question": "query", "context": "passage"}),
        (["--task_type", "embedding", "--text_pair_column", "b"], {"text": "text", "text_pair": "b"}),
    ],
)  # fmt: skip
def test_fine_tuning_records_the_columns_it_reads_the_inputs_from(flags: list[str], expected: dict[str, str]) -> None:
    """The input roles alone (not the labels, tags, answers or ids), read back from a config as recorded."""
    overrides = TaskOverrides(
        task=flag_value(flags, "--task"),
        task_type=flag_value(flags, "--task_type"),
        columns={role: name for role in COLUMN_ROLES if (name := flag_value(flags, column_flag(role)))},
    )
    recorded = input_columns(resolve_task(overrides))
    assert recorded == expected
    assert recorded_input_columns({"input_columns": recorded}) == expected


@pytest.mark.parametrize(
    "config", [None, {}, {"input_columns": None}, {"input_columns": ["text"]}, {"input_columns": {"label": "stars"}}]
)
def test_a_config_without_input_columns_records_none(config: dict | None) -> None:
    """A config of another model, or one whose record is not a mapping of input roles to column names."""
    assert recorded_input_columns(config) == {}


@pytest.mark.parametrize(
    ("name", "lines"), [("extra.csv", "text,label\na,good film,1\n"), ("extra.tsv", "text\tlabel\na\tgood film\t1\n")]
)
def test_a_first_row_wider_than_the_header_is_refused_naming_the_row_and_counts(
    tmp_path: Path, name: str, lines: str
) -> None:
    """pandas would take the extra leading field as the row's index and read 'good film' as the text and 1 as the
    label of a row whose text is 'a': refused before the file is read, by the library as by the front door."""
    import hf_bertscratch_cli
    from hf_bertscratch.data import load_data_file

    path = tmp_path / name
    path.write_text(lines + "b,fine,0\n".replace(",", "\t" if name.endswith("tsv") else ","))
    line = (
        f"{str(path)!r}: its first data row has 3 fields (['a', 'good film', '1']) and its header 2 (['text', "
        "'label']), which would shift every column onto the wrong name: quote the fields that hold the separator, "
        "or give the header a name for each field."
    )
    with pytest.raises(ValueError) as refused:
        load_data_file(path, "train")
    assert str(refused.value) == line
    with pytest.raises(ValueError) as at_the_door:
        hf_bertscratch_cli.check_sources("finetune", ["--train_file", str(path)])
    assert str(at_the_door.value) == line
