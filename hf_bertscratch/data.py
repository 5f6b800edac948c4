"""Raw datasets for pretraining and fine-tuning: explicit files, a local data directory, or the Hub.

`load_raw_datasets` is the one entry point (`load_data_file` reads a single file its way). It resolves, in order:

1. explicit `train_file` / `validation_file` / `test_file` (text, csv, tsv, json/jsonl, parquet; optionally .gz);
   a `dataset_name` that is a folder written by `datasets`' `save_to_disk`;
2. a local copy of a named Hub dataset inside a data directory (`data_dir`, or `$BERTSCRATCH_DATA_DIR`), found
   through `LOCAL_DATASETS`, a table from (name, config) to files, so offline machines run the same commands;
3. a copy shipped inside the package (`BUNDLED_DATASETS`: WikiText-2 raw, the default pretraining corpus);
4. `datasets.load_dataset(name, config)` from the Hugging Face Hub.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import datasets
from datasets.fingerprint import Hasher
from pandas.errors import ParserError

from hf_bertscratch_base.data_files import (
    FILE_BUILDERS,
    check_row_width,
    conll_sentences,
    file_extension,
    is_text_file,
    open_text,
)
from hf_bertscratch_base.dataset_table import (
    BUNDLED_DATASETS,
    DATASET_CITATIONS,
    DEFAULT_PRETRAINING_DATASET,
    KNOWN_DATASETS,
    LOCAL_DATASETS,
    KnownDataset,
    LocalDataset,
    dataset_id,
    where_a_copy_goes,
)
from hf_bertscratch_base.model_reference import (
    DATA_DIR_ENV,
    check_hub_dataset,
    datasets_offline_variable,
    hub_dataset_missing,
    offline_not_cached,
    resolve_data_dir,
)

logger = logging.getLogger(__name__)


# Corpora shipped inside the package (hf_bertscratch/corpora, each with a SOURCE.md giving origin and licence): used
# when a named dataset has no copy in the data directory, before going to the Hub, so the default pretraining
# corpus works offline right after `pip install`.
BUNDLED_DIR = Path(__file__).resolve().parent / "corpora"


def _builder_for(files: list[Path]) -> tuple[str, dict[str, object]]:
    """The datasets builder that reads `files`, all of which must share one format (the files of one split)."""
    builders = []
    for path in files:
        extension = file_extension(path)
        if extension not in FILE_BUILDERS:
            raise ValueError(
                f"Cannot read {str(path)!r}: extension {extension!r} is not one of {sorted(FILE_BUILDERS)} "
                "(optionally .gz)."
            )
        builders.append(FILE_BUILDERS[extension])
    if any(b != builders[0] for b in builders):
        kinds = sorted({f"{name} {kwargs}" for name, kwargs in builders})
        raise ValueError(f"All data files must share one format, got {kinds} for {[str(f) for f in files]}.")
    return builders[0]


def _check_file(path: Path, split: str) -> Path:
    if path.is_dir():
        raise IsADirectoryError(_folder_given(path, split))
    if not path.is_file():
        raise FileNotFoundError(f"The {split} file {str(path)!r} does not exist.")
    if path.stat().st_size == 0:
        raise ValueError(f"The {split} file {str(path)!r} is empty; expected at least one example.")
    check_row_width(path)
    return path


def _folder_given(path: Path, split: str) -> str:
    """What to do with a folder named as a data file: a dataset saved with `save_to_disk` is a `--dataset_name`;
    other files are named with a glob, shown with the extension of the first data file in the folder."""
    if _saved_to_disk(path):
        return (
            f"The {split} file {str(path)!r} is a dataset saved with save_to_disk: pass the folder as --dataset_name."
        )
    files = sorted(f for f in path.iterdir() if f.is_file() and file_extension(f) in FILE_BUILDERS)
    pattern = path / f"*{''.join(files[0].suffixes)}" if files else path / "*.txt"
    return f"The {split} file {str(path)!r} is a folder: name the files in it with a glob, e.g. {str(pattern)!r}."


def _saved_to_disk(path: Path) -> bool:
    """Whether `path` is a folder that `datasets`' `save_to_disk` wrote (a `Dataset` or a `DatasetDict`)."""
    return (path / datasets.config.DATASET_STATE_JSON_FILENAME).is_file() or (
        path / datasets.config.DATASETDICT_JSON_FILENAME
    ).is_file()


def _load_saved(path: Path, streaming: bool) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """A folder `save_to_disk` wrote, through `load_from_disk`: a `DatasetDict` keeps its splits, a `Dataset` is the
    train split."""
    logger.info("Loading the dataset saved in %s", path)
    saved = datasets.load_from_disk(str(path))
    return _streamed(
        saved if isinstance(saved, datasets.DatasetDict) else datasets.DatasetDict({"train": saved}), streaming
    )


def _streamed(raw: datasets.DatasetDict, streaming: bool) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """`raw`, as iterable splits when `streaming`."""
    return datasets.IterableDatasetDict({k: v.to_iterable_dataset() for k, v in raw.items()}) if streaming else raw


def _expand(pattern: Path, split: str) -> list[Path]:
    """A file, or the sorted files a glob matches (error if none)."""
    if any(ch in str(pattern) for ch in "*?["):
        matches = sorted(pattern.parent.glob(pattern.name))
        if not matches:
            raise FileNotFoundError(f"No {split} file matches {str(pattern)!r}.")
        return [_check_file(m, split) for m in matches]
    return [_check_file(pattern, split)]


def _load_files(
    split_files: dict[str, list[Path]],
    streaming: bool,
    cache_dir: str | None,
    builder_kwargs: dict[str, object] | None = None,
    builder: str | None = None,
    text_as_conll: bool = False,
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """Each split from its files, read by `builder` where given, else by the builder of its files' format
    (`_builder_for`: the files of one split share one format; another split may have another). With `text_as_conll`
    (a token-classification task), a split of text files is read as CoNLL-format sentences (`read_conll`)."""
    splits = {}
    for split, files in split_files.items():
        if builder == "conll" or (builder is None and text_as_conll and all(map(is_text_file, files))):
            logger.info("Loading CoNLL files: %s", {split: [str(f) for f in files]})
            splits[split] = _streamed(datasets.DatasetDict({split: _read_conll_split(split, files)}), streaming)[split]
            continue
        name, found_kwargs = (builder, {}) if builder else _builder_for(files)
        kwargs: dict[str, object] = {**found_kwargs, **(builder_kwargs or {})}
        logger.info("Loading %s files: %s", name, {split: [str(f) for f in files]})
        # One split at a time: `datasets` reads the splits of one call as one table, so a column in one split alone
        # (an id in the dev file) would fail the whole load; a run reads its own columns of each split.
        digests = None if streaming else [file_digest(f) for f in files]
        splits[split] = _load_split(name, split, [str(f) for f in files], streaming, cache_dir, kwargs, digests)
        if digests is not None:
            splits[split]._fingerprint = Hasher.hash([name, kwargs, digests])
    return datasets.IterableDatasetDict(splits) if streaming else datasets.DatasetDict(splits)


# A file up to this size is hashed whole by `file_digest`; a larger one by its size and DIGEST_CHUNKS chunks of it.
DIGEST_WHOLE_BYTES = 256 * 2**20
DIGEST_CHUNKS = 64
DIGEST_CHUNK_BYTES = 2**20


def file_digest(path: Path) -> str:
    """A digest of a local file's bytes (BLAKE2b), not of its path or modification time: the whole file up to
    `DIGEST_WHOLE_BYTES` (tens of MB take well under a second); a larger one by its size and `DIGEST_CHUNKS` chunks of
    `DIGEST_CHUNK_BYTES` spread evenly from its first byte to its last, so an edit that keeps its size and falls
    between two chunks goes unseen.

    `_load_files` gives the splits it reads this fingerprint (their files' digests, the builder and its options) in
    place of the one `datasets` gives, which follows the files' paths and modification times; what is made of a split
    after (a selection, a shuffle, a concatenation) carries it on. A run's checkpoints record it
    (`run_folder.TrainingDataRecord`). `_load_split` keys `datasets`' cache of the converted files on it too."""
    size = path.stat().st_size
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    with path.open("rb") as handle:
        if size <= DIGEST_WHOLE_BYTES:
            while block := handle.read(DIGEST_CHUNK_BYTES):
                digest.update(block)
        else:
            stride = (size - DIGEST_CHUNK_BYTES) / (DIGEST_CHUNKS - 1)
            for chunk in range(DIGEST_CHUNKS):
                handle.seek(round(chunk * stride))
                digest.update(handle.read(DIGEST_CHUNK_BYTES))
    return digest.hexdigest()


def _load_split(
    builder: str,
    split: str,
    files: list[str],
    streaming: bool,
    cache_dir: str | None,
    kwargs: dict[str, object],
    digests: list[str] | None = None,
) -> datasets.Dataset | datasets.IterableDataset:
    """One split's files through `datasets.load_dataset`. A file it cannot read fails as a ValueError that names the
    file and the cause, instead of the library's "An error occurred while generating the dataset" (whose cause only
    its log shows): a ragged line, bytes that are not UTF-8, a header with no rows under it.

    `datasets` keys the Arrow files it converts the split to on the files' paths and modification times alone, so a
    file rewritten with its modification time kept (`cp -p`, `rsync -t`, two writes within the clock's resolution)
    would be read from the old conversion. The files' `digests` (`file_digest`), given as the builder config's
    description, enter that key (the config id hashes every config option the call sets, in datasets 4 and 5 alike):
    new bytes are converted again, unchanged ones read from the cache."""
    content = {"description": f"file digests {Hasher.hash(digests)}"} if digests else {}
    try:
        return datasets.load_dataset(
            builder,
            data_files={split: files},
            split=split,
            streaming=streaming,
            cache_dir=cache_dir,
            **content,
            **kwargs,
        )
    except datasets.exceptions.DatasetGenerationError as error:
        cause = error.__cause__ or error
        if isinstance(cause, UnicodeDecodeError):
            bad = cause.object[cause.start : cause.start + 1].hex()
            reason = f"it is not UTF-8 (byte 0x{bad}: {cause.reason}); save it as UTF-8"
            files = [f for f in files if not _is_utf8(Path(f))] or files
        elif isinstance(cause, ParserError):
            reason = f"{_first_line(cause)}; every line needs as many fields as the header"
        else:
            reason = f"{type(cause).__name__}: {_first_line(cause)}"
        raise ValueError(f"Cannot read the {_split_files(split, files)}: {reason}.") from error
    except ValueError as error:
        if "corresponds to no data" not in str(error):  # the library's words for a split of zero rows
            raise
        verb = "holds" if len(files) == 1 else "hold"
        raise ValueError(
            f"The {_split_files(split, files)} {verb} no rows (a header alone); expected at least one example."
        ) from error


def _split_files(split: str, files: list[str]) -> str:
    """How an error names a split's files: "train file 'a.csv'", or "train files ['a.csv', 'b.csv']"."""
    return f"{split} file {files[0]!r}" if len(files) == 1 else f"{split} files {files}"


# The library's own wording around a cause: its generic line, and pandas' prefix to a line that does not parse.
_GENERIC_LINES = ("An error occurred while generating the dataset", "Error tokenizing data. C error: ")


def _first_line(error: BaseException) -> str:
    """The first line of `error`'s message that says more than the library's generic wording."""
    for line in str(error).splitlines():
        for generic in _GENERIC_LINES:
            line = line.removeprefix(generic)
        if line.strip():
            return line.strip()
    return "no message"


def _is_utf8(path: Path) -> bool:
    """Whether the whole file (decompressed when .gz) decodes as UTF-8."""
    try:
        with open_text(path) as text:
            while text.read(1 << 20):
                pass
    except UnicodeDecodeError:
        return False
    return True


def _read_conll_split(split: str, files: list[Path]) -> datasets.Dataset:
    """One split's CoNLL files as one dataset; files of words alone beside files with tags are refused, naming them."""
    parts = [read_conll(f) for f in files]
    untagged = [str(f) for f, part in zip(files, parts, strict=True) if "ner_tags" not in part.column_names]
    if untagged and len(untagged) < len(parts):
        raise ValueError(
            f"The {split} files {[str(f) for f in files]} mix sentences with tags and words alone: {untagged} have no "
            "tag column. Give every file of a split its tags, or none."
        )
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def _find_local(
    data_dir: Path,
    dataset_name: str,
    dataset_config_name: str | None,
    table: dict[tuple[str, str | None], LocalDataset] = LOCAL_DATASETS,
) -> LocalDataset | None:
    spec = table.get((dataset_name, dataset_config_name)) or table.get((dataset_name, None))
    if spec is None or not (data_dir / spec.folder).is_dir():
        return None
    return spec


def _select_columns(
    raw: datasets.DatasetDict | datasets.IterableDatasetDict, columns: tuple[str, ...] | None
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    if columns is None:
        return raw
    return type(raw)({split: ds.select_columns(list(columns)) for split, ds in raw.items()})


def load_raw_datasets(
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    train_file: str | None = None,
    validation_file: str | None = None,
    test_file: str | None = None,
    data_dir: str | None = None,
    streaming: bool = False,
    cache_dir: str | None = None,
    text_files_as_conll: bool = False,
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """Load the raw (untokenised) splits of a dataset.

    Explicit files win; else a folder `dataset_name` that `save_to_disk` wrote (a `Dataset` is the train split); else
    a local copy of `dataset_name` in the data directory (see `LOCAL_DATASETS`); else a copy shipped inside the package
    (`BUNDLED_DATASETS`: WikiText-2 raw); else the Hub. Splits keep the names
    "train", "validation", "test" for whichever are present. With `text_files_as_conll` (a token-classification
    task), text files given are read as CoNLL-format sentences (`read_conll`).

    Returns:
        A `DatasetDict`, or an `IterableDatasetDict` when `streaming` is True.

    Raises:
        ValueError: if neither a dataset name nor any file is given, or a file is empty or of an unknown format.
        FileNotFoundError: if a file (or a local dataset's file) is missing.
    """
    named = {"train": train_file, "validation": validation_file, "test": test_file}
    files = {split: f for split, f in named.items() if f}
    if files:
        if dataset_name:
            logger.warning("Both dataset_name=%r and data files were given; using the files.", dataset_name)
        split_files = {split: _expand(Path(f).expanduser(), split) for split, f in files.items()}
        return _load_files(split_files, streaming, cache_dir, text_as_conll=text_files_as_conll)
    if not dataset_name:
        raise ValueError("No data given: pass dataset_name (a Hub id) or at least one of train_file/validation_file.")
    saved = Path(dataset_name).expanduser()
    if _saved_to_disk(saved):
        return _load_saved(saved, streaming)

    local_dir = resolve_data_dir(data_dir)
    copy = _local_copy(dataset_name, dataset_config_name, local_dir)
    if copy is not None:
        folder, spec = copy
        logger.info("Using the local copy of %s in %s", dataset_id(dataset_name, dataset_config_name), folder)
        split_files = {split: _expand(folder / pattern, split) for split, pattern in spec.splits.items()}
        raw = _load_files(split_files, streaming, cache_dir, spec.builder_kwargs, spec.builder)
        if spec.rename:
            raw = raw.rename_columns(spec.rename)
        return _select_columns(raw, spec.columns)
    if local_dir:
        logger.info(
            "%s has no local copy in %s; loading from the Hub.",
            dataset_id(dataset_name, dataset_config_name),
            local_dir,
        )
    _check_hub_for(dataset_name, dataset_config_name, local_dir)
    try:
        return datasets.load_dataset(dataset_name, dataset_config_name, streaming=streaming, cache_dir=cache_dir)
    except ConnectionError as error:  # offline mode and not cached: datasets' "Couldn't reach 'glue' on the Hub"
        if not datasets_offline_variable():
            raise
        raise _hub_dataset_missing(dataset_name, dataset_config_name, local_dir, offline_not_cached()) from error


def _local_copy(
    dataset_name: str, dataset_config_name: str | None, local_dir: Path | None
) -> tuple[Path, LocalDataset] | None:
    """The copy of a named dataset that `load_raw_datasets` reads before the Hub, with its layout: its folder in the
    data directory `local_dir`, else the one shipped inside the package; None when there is neither."""
    for root, table in ((local_dir, LOCAL_DATASETS), (BUNDLED_DIR, BUNDLED_DATASETS)):
        spec = _find_local(root, dataset_name, dataset_config_name, table) if root else None
        if root and spec is not None:
            return root / spec.folder, spec
    return None


def dataset_source(dataset_name: str, dataset_config_name: str | None = None, data_dir: str | None = None) -> str:
    """Where `load_raw_datasets` reads a named dataset from, in words: "the local copy of glue/rte in D/glue/RTE",
    "imdb saved in D" (a folder `save_to_disk` wrote), or "the Hub's glue/rte"."""
    name = dataset_id(dataset_name, dataset_config_name)
    if _saved_to_disk(Path(dataset_name).expanduser()):
        return f"{name} saved in {Path(dataset_name).expanduser()}"
    copy = _local_copy(dataset_name, dataset_config_name, resolve_data_dir(data_dir))
    return f"the local copy of {name} in {copy[0]}" if copy else f"the Hub's {name}"


def load_data_file(path: str | Path, name: str = "input", cache_dir: str | None = None) -> datasets.Dataset:
    """One local data file (txt: a row per line, in column "text"; csv, tsv, json/jsonl, parquet; .gz too), or the
    files of one format a glob matches, read as `load_raw_datasets` reads a split's files, with its checks: an error
    names it as the `name` file (missing, a folder, empty, an unknown extension, not UTF-8, a header alone)."""
    given = Path(path).expanduser()
    if given.is_dir() and _saved_to_disk(given):  # what reads this file has no --dataset_name to read that folder
        raise IsADirectoryError(
            f"The {name} file {str(given)!r} is a dataset saved with save_to_disk, not a data file: write its rows to "
            "one (Dataset.to_csv, to_json or to_parquet) and give that."
        )
    files = _expand(given, name)
    loaded = _load_files({name: files}, streaming=False, cache_dir=cache_dir)
    return cast("datasets.Dataset", loaded[name])


def _check_hub_for(dataset_name: str, dataset_config_name: str | None, local_dir: Path | None) -> None:
    """Fail at once when the Hub cannot be reached, naming the local copy's folder (`check_hub_dataset`)."""
    check_hub_dataset(*where_a_copy_goes(dataset_name, dataset_config_name, local_dir))


def _hub_dataset_missing(
    dataset_name: str, dataset_config_name: str | None, local_dir: Path | None, why: str
) -> FileNotFoundError:
    """The error of a dataset with no local copy that the Hub cannot give (`why`), naming the local copy's folder."""
    return hub_dataset_missing(*where_a_copy_goes(dataset_name, dataset_config_name, local_dir), why)


def check_text_column(split: datasets.Dataset | datasets.IterableDataset, column: str, name: str) -> None:
    """Refuse a --text_column whose values are not text (a csv column of numbers, say), naming its type."""
    feature = split.features.get(column) if split.features is not None else None
    if feature is not None and getattr(feature, "dtype", None) not in ("string", "large_string"):
        kind = getattr(feature, "dtype", None) or type(feature).__name__
        raise ValueError(
            f"--text_column {column!r} of the {name} split holds {kind} values, not text: name the column of raw "
            "text with --text_column."
        )


def sample_examples(
    split: datasets.Dataset | datasets.IterableDataset, max_samples: int | None, seed: int
) -> datasets.Dataset | datasets.IterableDataset:
    """What `--max_train_samples` means in pretraining and fine-tuning alike: `max_samples` of the split's examples
    (the rows the model is trained on: packed blocks or NSP pairs in pretraining, labelled texts in fine-tuning),
    drawn at random with `seed`; all of them when `max_samples` is None or not smaller than the split.

    A streamed split cannot be drawn from without reading it all: it gives its first `max_samples` examples, which
    are random when the stream was shuffled (pretraining shuffles it with `--shuffle_buffer_size`).
    """
    if max_samples is None:
        return split
    if isinstance(split, datasets.IterableDataset):
        return split.take(max_samples)
    return split if max_samples >= len(split) else split.shuffle(seed=seed).select(range(max_samples))


def check_max_samples(data_args: object) -> None:
    """Reject a `--max_train_samples` or `--max_eval_samples` below 1, before any data is loaded."""
    for name in ("max_train_samples", "max_eval_samples"):
        value = getattr(data_args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be a positive number of examples (or left out for all), got {value}.")


# The columns `read_conll` gives, named as in the Hub `conll2003` dataset (whose ner_tags are ClassLabel ids); a file
# of words alone (a test file to predict) gives no ner_tags.
CONLL_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "tokens": datasets.List(datasets.Value("string")),
        "ner_tags": datasets.List(datasets.Value("string")),
    }
)
CONLL_WORDS_FEATURES = datasets.Features({name: kind for name, kind in CONLL_FEATURES.items() if name != "ner_tags"})


# ------------------------------------------------------------------------------------------------ reading CoNLL
def _columns_said(count: int) -> str:
    """How an error names a token line's column count: "a word alone" for one column, "N columns" otherwise."""
    return "a word alone" if count == 1 else f"{count} columns"


def _check_line(fields: list[str], columns: int, tag_column: int, path: Path, line_number: int) -> None:
    """Raise ValueError, naming the file and line, when a token line does not fit the file's column layout: as many
    columns as its first token line, and a tag column after the word unless that line is a word alone."""
    where = f"{path}, line {line_number}"
    if len(fields) != columns:
        raise ValueError(
            f"{where}: {_columns_said(len(fields))} ({' '.join(fields)!r}), but the file's first token line has "
            f"{_columns_said(columns)}; every line of a file gives its word's tag (`word ... TAG`, the tag in the "
            "last column) or none does (one word per line: a test file to predict)."
        )
    if columns > 1 and (not -columns <= tag_column < columns or tag_column % columns == 0):
        raise ValueError(
            f"{where}: tag_column={tag_column} does not pick a tag column after the word in {' '.join(fields)!r} "
            f"({columns} columns)."
        )


def _conll_sentences(path: Path, tag_column: int) -> Iterator[tuple[list[str], list[str] | None]]:
    """(words, tags) per sentence, tags None in a file of words alone: blank lines end sentences, -DOCSTART- lines
    are skipped."""
    columns = 0  # set by the first token line; every token line must have as many
    with open_text(path) as lines:
        for sentence in conll_sentences(lines):
            words: list[str] = []
            tags: list[str] = []
            for line_number, fields in sentence:
                columns = columns or len(fields)
                _check_line(fields, columns, tag_column, path, line_number)
                words.append(fields[0])
                if columns > 1:
                    tags.append(fields[tag_column])
            yield words, tags if columns > 1 else None


def read_conll(path: str | Path, tag_column: int = -1) -> datasets.Dataset:
    """Read a CoNLL-format file (`word POS chunk NER` per line, blank line between sentences; .gz accepted), or one of
    words alone (one word per line, no tag column: a test file to predict).

    Args:
        path: the file; a name ending in .gz is decompressed.
        tag_column: the column holding the tag, -1 (the last) for NER in CoNLL-2003; 1 would read the POS tags.

    Returns:
        One row per sentence with columns id (str, the sentence's index in the file, as the Hub gives it),
        tokens (list[str]) and ner_tags (list[str], tag strings such as "B-PER"), no ner_tags for a file of words
        alone; -DOCSTART- lines and empty sentences are left out.

    Raises:
        ValueError: naming the file and line of a token line whose column count differs from the first one's (words
            with and without tags in one file), or when the file holds no sentence.
    """
    path = Path(path)
    sentences = list(_conll_sentences(path, tag_column))
    if not sentences:
        raise ValueError(f"{path} holds no sentence: expected `word ... TAG` lines with blank lines between sentences.")
    columns = {"id": [str(index) for index in range(len(sentences))], "tokens": [words for words, _ in sentences]}
    if sentences[0][1] is None:  # words alone: no tags to read
        return datasets.Dataset.from_dict(columns, features=CONLL_WORDS_FEATURES)
    return datasets.Dataset.from_dict({**columns, "ner_tags": [tags for _, tags in sentences]}, features=CONLL_FEATURES)


__all__ = [
    "BUNDLED_DATASETS",
    "DATASET_CITATIONS",
    "DATA_DIR_ENV",
    "CONLL_FEATURES",
    "CONLL_WORDS_FEATURES",
    "DEFAULT_PRETRAINING_DATASET",
    "KNOWN_DATASETS",
    "LOCAL_DATASETS",
    "KnownDataset",
    "LocalDataset",
    "check_max_samples",
    "check_text_column",
    "file_digest",
    "load_data_file",
    "load_raw_datasets",
    "read_conll",
    "resolve_data_dir",
    "sample_examples",
]
