"""A data file's columns, known before anything loads, from the standard library alone: the formats a data file may
have (`FILE_BUILDERS`, by which `hf_bertscratch.data` reads it) and the columns its header names (`read_columns`,
None where they cannot be read cheaply: parquet, a glob, SQuAD's nested json, a file that is missing or not UTF-8),
by which the `bertscratch` front door (`hf_bertscratch_cli.data_checks`) checks a command's files before torch loads.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

# How a tsv file is read: tab-separated with quoting off, as GLUE's own TSV files are (the Hub's `glue` loader reads
# them so). TSV has no quoting convention, so a '"' is part of the text: with csv's quoting on, an unmatched one would
# silently join every line up to the next '"' into one field.
TSV_READING: dict[str, object] = {"sep": "\t", "quoting": csv.QUOTE_NONE}
# File extension -> (datasets builder, extra builder kwargs). ".gz" is stripped first: datasets decompresses itself.
FILE_BUILDERS: dict[str, tuple[str, dict[str, object]]] = {
    "txt": ("text", {}),
    "text": ("text", {}),
    "raw": ("text", {}),
    "csv": ("csv", {}),
    "tsv": ("csv", TSV_READING),
    "json": ("json", {}),
    "jsonl": ("json", {}),
    "parquet": ("parquet", {}),
}
TEXT_COLUMN = "text"  # the one column of a text file (a row per line), and the default --text_column of pretraining
# The builders whose columns may hold lists (a row's list of words, as token classification reads them): a csv or tsv
# cell holds a string, and a text file has no columns.
LIST_BUILDERS = ("json", "parquet")
# The --train_file help of the commands that read raw text (pretraining, train-tokenizer): the formats and globs
# `hf_bertscratch.data.load_raw_datasets` reads.
TEXT_TRAIN_FILE_HELP = (
    "Training data file (txt: one row per line; csv, tsv, json/jsonl, parquet; .gz ok), or several of one format "
    "through a quoted glob ('texts/*.txt')."
)
FIRST_ROW_LIMIT = 1 << 20  # characters of a JSON Lines file's first line read; a longer one is left to the library


def file_extension(path: Path) -> str:
    """The extension that says how `path` is read, after a ".gz" ("train.csv.gz" -> "csv"; "" when there is none)."""
    suffixes = [suffix.lstrip(".").lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == "gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def file_kinds(builders: Iterable[str]) -> str:
    """The extensions of the data files `builders` read, as a line names them: ".json, .jsonl or .parquet"."""
    wanted = set(builders)
    kinds = [f".{extension}" for extension, (builder, _) in FILE_BUILDERS.items() if builder in wanted]
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


def column_file_kinds() -> str:
    """The extensions of the data files whose rows have named columns (all but plain text's): ".csv, ... or .parquet"."""
    return file_kinds(builder for builder, _ in FILE_BUILDERS.values() if builder != "text")


def open_text(path: Path, encoding: str = "utf-8") -> TextIO:
    """The file as text, decompressed when it ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding)
    return path.open(encoding=encoding)


# The columns of a text file read as CoNLL-format sentences (`word ... TAG` lines, blank lines between sentences):
# what a token-classification task makes of a .txt file (`hf_bertscratch.data.read_conll`); a file of words alone
# (one column per line: a test file to predict) has no "ner_tags".
CONLL_COLUMNS = ["id", "tokens", "ner_tags"]
CONLL_DOCSTART = "-DOCSTART-"  # a CoNLL file's document separator line, no token


def is_text_file(path: str | Path) -> bool:
    """Whether `datasets` reads `path` as plain lines of text (.txt, .text, .raw; gzipped or not)."""
    return FILE_BUILDERS.get(file_extension(Path(path)), ("", {}))[0] == "text"


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
                return _csv_header(lines, kwargs)
            return _json_keys(lines.readline(FIRST_ROW_LIMIT))
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):  # unreadable, not gzip, not UTF-8, a huge field
        return None


def read_conll_columns(path: str | Path) -> list[str] | None:
    """The columns `hf_bertscratch.data.read_conll` gives a CoNLL-format text file, told from its first token line
    (the first that is neither blank nor -DOCSTART-, which sets the columns of every line): `CONLL_COLUMNS`, without
    "ner_tags" where that line is a word alone. None where the file holds no token line, or cannot be read."""
    path = Path(path).expanduser()
    if not is_text_file(path) or not path.is_file():
        return None
    try:
        with open_text(path) as lines:
            for line in lines:
                fields = line.split()
                if fields and fields[0] != CONLL_DOCSTART:
                    return CONLL_COLUMNS if len(fields) > 1 else CONLL_COLUMNS[:-1]
    except (OSError, EOFError, ValueError, zlib.error):  # unreadable, not gzip, not UTF-8
        return None
    return None


def conll_sentences(lines: Iterable[str]) -> Iterator[list[tuple[int, list[str]]]]:
    """The sentences of CoNLL-format lines, each as its token lines' (line number, whitespace-separated fields): a
    blank line or a -DOCSTART- line ends a sentence, and is none of its lines."""
    sentence: list[tuple[int, list[str]]] = []
    for line_number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0] == CONLL_DOCSTART:
            if sentence:
                yield sentence
            sentence = []
        else:
            sentence.append((line_number, fields))
    if sentence:  # a file need not end with a blank line
        yield sentence


def count_examples(path: str | Path, conll: bool = False, up_to: int | None = None) -> int | None:
    """How many examples `datasets` reads from a local data file, counted without it: a csv or tsv file's rows under
    its header (blank lines aside, as pandas skips them), a JSON Lines file's lines, a json list's items, and with
    `conll` a text file's CoNLL sentences (`conll_sentences`, as `hf_bertscratch.data.read_conll` reads them). Counting
    stops at `up_to`, which is returned once reached. None where the count is not so plain: a glob, a missing file,
    parquet, plain text, SQuAD's nested json, a file whose rows cannot be read with the standard library."""
    path = Path(path).expanduser()
    builder, kwargs = FILE_BUILDERS.get(file_extension(path), ("", {}))
    if any(char in str(path) for char in "*?[") or not path.is_file() or builder not in ("text", "csv", "json"):
        return None
    if builder == "text" and not conll:
        return None
    try:
        if builder == "json" and _first_character(path) == "[":
            return _json_list_length(path)
        with open_text(path, encoding="utf-8-sig") as lines:
            rows: Iterable[object]
            if builder == "text":  # read_conll refuses token lines of different widths: left to it
                rows = _same_width(conll_sentences(lines))
            elif builder == "csv":
                rows = itertools.islice(_csv_rows(lines, kwargs), 1, None)  # its header is no example
            elif _json_keys(lines.readline(FIRST_ROW_LIMIT)) is None:
                return None  # one json document (SQuAD's, a pretty-printed object): not one row per line
            else:
                rows = itertools.chain([None], (line for line in lines if line.strip()))  # the first line read
            return sum(1 for _ in itertools.islice(rows, up_to))
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):  # unreadable, not gzip, not UTF-8, a huge field
        return None


def _same_width(sentences: Iterator[list[tuple[int, list[str]]]]) -> Iterator[list[tuple[int, list[str]]]]:
    """`sentences`, raising ValueError at a token line whose number of fields differs from the first one's."""
    width = 0
    for sentence in sentences:
        width = width or len(sentence[0][1])
        if any(len(fields) != width for _, fields in sentence):
            raise ValueError("token lines of different widths")
        yield sentence


def _first_character(path: Path) -> str:
    """The first character of a text file that is not whitespace ("" for none)."""
    with open_text(path, encoding="utf-8-sig") as text:
        while chunk := text.read(4096):
            if stripped := chunk.lstrip():
                return stripped[0]
    return ""


def _json_list_length(path: Path) -> int | None:
    """The number of objects in a json file holding one list of them (up to `LAYOUT_SNIFF_BYTES`); None otherwise."""
    if path.stat().st_size > LAYOUT_SNIFF_BYTES:
        return None
    with open_text(path, encoding="utf-8-sig") as text:
        rows = json.load(text)
    return len(rows) if isinstance(rows, list) and all(isinstance(row, dict) for row in rows) else None


def is_squad_json(path: str | Path) -> bool:
    """Whether `path` is a SQuAD-layout json file (one object whose "data" holds the articles), which
    `hf_bertscratch.tasks.question_answering.load_squad_json` reads, rather than a flat file of one row per question
    (json lines, or a json list), which `datasets` reads."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        return False
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):  # json lines under a .json name: one row per line
        return False
    return isinstance(document, dict) and isinstance(document.get("data"), list)


CONLL_SNIFF_LINES = 20  # token lines of a text file read to tell whether it is CoNLL-format (`looks_like_conll`)
IOB_TAG = re.compile(r"^(O|[BIESLU]-\S+)$")  # a tag of the IOB family (O, B-PER, I-ORG, ...), as NER files have
LAYOUT_SNIFF_BYTES = 64 << 20  # a json file larger than this is not read whole to tell its layout (`file_layout`)


def looks_like_conll(path: str | Path) -> bool:
    """Whether a text file starts as CoNLL-format tagged words do: its first token lines (up to `CONLL_SNIFF_LINES`,
    -DOCSTART- and blank lines aside) hold the same number, two or more, of whitespace-separated fields, the last an
    IOB tag (`IOB_TAG`). Sentences, or words with tags of another kind, are not told apart from plain text."""
    path = Path(path).expanduser()
    if not is_text_file(path) or not path.is_file():
        return False
    lines: list[list[str]] = []
    try:
        with open_text(path) as text:
            for line in text:
                fields = line.split()
                if fields and fields[0] != CONLL_DOCSTART:
                    lines.append(fields)
                if len(lines) == CONLL_SNIFF_LINES:
                    break
    except (OSError, EOFError, ValueError, zlib.error):  # unreadable, not gzip, not UTF-8
        return False
    widths = {len(fields) for fields in lines}
    return len(widths) == 1 and widths.pop() > 1 and all(IOB_TAG.match(fields[-1]) for fields in lines)


def check_input_file_is_not_conll(path: str | Path) -> None:
    """Fail in one line when an inference command's --input_file is a CoNLL text file (`looks_like_conll`): its lines
    would be read as texts, a word and its tags each."""
    if looks_like_conll(path):
        raise ValueError(
            f"--input_file {str(path)!r} is laid out as CoNLL (a word and its tags on each line), and a .txt file of "
            "inputs holds one text per line: give each sentence's words as a list in a JSON Lines column instead "
            "(tag --tokens_column)."
        )


def file_layout(path: str | Path) -> str | None:
    """The layout of a data file that one task type alone reads: "CoNLL" (a text file of tagged words,
    `looks_like_conll`), "SQuAD-format" (a json document of articles, `is_squad_json`, up to `LAYOUT_SNIFF_BYTES`);
    None for rows any task type may read."""
    path = Path(path).expanduser()
    if looks_like_conll(path):
        return "CoNLL"
    if path.is_file() and path.stat().st_size <= LAYOUT_SNIFF_BYTES and is_squad_json(path):
        return "SQuAD-format"
    return None


def _csv_reader(lines: TextIO, reading: dict[str, object]) -> Iterator[list[str]]:
    """A csv reader of `lines` with the separator and quoting pandas (by which `datasets` reads csv) reads them with:
    `reading` is the file's builder kwargs (`FILE_BUILDERS`)."""
    delimiter = str(reading.get("sep", ","))
    if reading.get("quoting") == csv.QUOTE_NONE:
        return csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    return csv.reader(lines, delimiter=delimiter)


def _csv_rows(lines: TextIO, reading: dict[str, object]) -> Iterator[list[str]]:
    """The rows of a csv or tsv file, header first, empty lines left out as pandas leaves them out. A line of
    whitespace alone, which pandas may read either way, raises ValueError."""
    for row in _csv_reader(lines, reading):
        if len(row) == 1 and row[0] and not row[0].strip():
            raise ValueError("a line of whitespace alone")
        if row:
            yield row


def _csv_header(lines: TextIO, reading: dict[str, object]) -> list[str] | None:
    """The first row that is not blank (pandas skips blank lines), or None."""
    for row in _csv_reader(lines, reading):
        if any(cell.strip() for cell in row):
            return row
    return None


def check_row_width(path: str | Path) -> None:
    """Refuse a csv or tsv file whose first data row has more fields than its header, naming the row and both counts:
    pandas (by which `datasets` reads csv) would take the extra leading fields as the row index and shift every
    column onto the wrong name, silently. A file of another kind, or one that cannot be read, passes (its reader
    names what is wrong)."""
    path = Path(path).expanduser()
    builder, kwargs = FILE_BUILDERS.get(file_extension(path), ("", {}))
    if builder != "csv" or any(char in str(path) for char in "*?[") or not path.is_file():
        return
    try:
        with open_text(path, encoding="utf-8-sig") as lines:
            rows = itertools.islice(_csv_rows(lines, kwargs), 2)
            header, first = next(rows, None), next(rows, None)
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):  # unreadable, not gzip, not UTF-8, a huge field
        return
    if header is not None and first is not None and len(first) > len(header):
        raise ValueError(
            f"{str(path)!r}: its first data row has {len(first)} fields ({first[:6]}) and its header {len(header)} "
            f"({header}), which would shift every column onto the wrong name: quote the fields that hold the "
            "separator, or give the header a name for each field."
        )


def read_first_row(path: str | Path) -> dict | None:
    """The first row of a JSON Lines file, as `datasets` reads it (a JSON object), or of a csv or tsv file, its cells
    as the strings they are (under the header's names); None for a file of another kind, or one whose start holds no
    such row (`read_columns`)."""
    path = Path(path).expanduser()
    builder, kwargs = FILE_BUILDERS.get(file_extension(path), ("", {}))
    if builder not in ("csv", "json") or any(char in str(path) for char in "*?[") or not path.is_file():
        return None
    try:
        with open_text(path, encoding="utf-8-sig") as lines:
            if builder == "json":
                return _json_row(lines.readline(FIRST_ROW_LIMIT))
            rows = itertools.islice(_csv_rows(lines, kwargs), 2)
            header, first = next(rows, None), next(rows, None)
            return None if header is None or first is None else dict(zip(header, first))
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):  # unreadable, not gzip, not UTF-8, a huge field
        return None


def _json_row(line: str) -> dict | None:
    """The JSON object on `line`; None when it holds none, or holds SQuAD's nested document (a "data" list, which
    question answering flattens into its own columns)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or isinstance(row.get("data"), list):
        return None
    return row


def _json_keys(line: str) -> list[str] | None:
    """The keys of the JSON object on `line` (`_json_row`), or None."""
    row = _json_row(line)
    return None if row is None else list(row)


__all__ = [
    "CONLL_COLUMNS",
    "CONLL_DOCSTART",
    "FILE_BUILDERS",
    "LIST_BUILDERS",
    "TEXT_COLUMN",
    "TSV_READING",
    "check_input_file_is_not_conll",
    "check_row_width",
    "conll_sentences",
    "count_examples",
    "column_file_kinds",
    "file_extension",
    "file_kinds",
    "file_layout",
    "is_squad_json",
    "is_text_file",
    "looks_like_conll",
    "open_text",
    "read_columns",
    "read_conll_columns",
    "read_first_row",
]
