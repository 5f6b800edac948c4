"""Tests for hf_bertscratch.data: explicit files, the local data-directory table, and clear errors."""

from __future__ import annotations

import gzip
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest

from hf_bertscratch import data
from hf_bertscratch.data import DATA_DIR_ENV, file_digest, load_data_file, load_raw_datasets, resolve_data_dir
from hf_bertscratch_base import model_reference


def _fake_data_dir(root: Path) -> Path:
    """A data directory shaped like ../shared/data, with a few lines per file."""
    wiki = root / "wikitext-2-raw"
    (wiki / "train_split_5").mkdir(parents=True)
    (wiki / "train_split_5" / "train_0.txt").write_text(" = A = \n\n first line .\n", encoding="utf-8")
    (wiki / "train_split_5" / "train_1.txt").write_text(" second line .\n", encoding="utf-8")
    (wiki / "wiki.valid.raw").write_bytes(b" valid one .\r\n valid two .\r\n")
    (wiki / "wiki.test.raw").write_bytes(b" test .\r\n")
    (root / "sst2").mkdir()
    (root / "sst2" / "train.tsv").write_text("sentence\tlabel\ngood film \t1\nbad , film \t0\n", encoding="utf-8")
    (root / "sst2" / "dev.tsv").write_text("sentence\tlabel\nfine \t1\n", encoding="utf-8")
    (root / "imdb").mkdir()
    for split in ("train", "test"):
        with gzip.open(root / "imdb" / f"{split}.csv.gz", "wt", encoding="utf-8") as f:
            f.write('id,rating,label,text\n0,9,1,"Great, truly."\n1,2,0,Awful.\n')
    return root


def test_wikitext_from_data_dir_keeps_hub_splits(tmp_path: Path) -> None:
    raw = load_raw_datasets("wikitext", "wikitext-2-raw-v1", data_dir=str(_fake_data_dir(tmp_path)))
    assert set(raw) == {"train", "validation", "test"}
    # Train is the 5 pieces concatenated in order; CRLF files are read as lines without "\r".
    assert raw["train"]["text"] == [" = A = ", "", " first line .", " second line ."]
    assert raw["validation"]["text"] == [" valid one .", " valid two ."]


@pytest.mark.parametrize("name,config", [("glue", "sst2"), ("stanfordnlp/sst2", None), ("sst2", None)])
def test_sst2_aliases_from_env_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, config: str
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(_fake_data_dir(tmp_path)))
    raw = load_raw_datasets(name, config)
    assert set(raw) == {"train", "validation"}
    assert raw["train"].column_names == ["sentence", "label"]
    assert raw["train"]["label"] == [1, 0] and raw["train"]["sentence"][1] == "bad , film "


def test_imdb_keeps_text_and_label_only(tmp_path: Path) -> None:
    raw = load_raw_datasets("imdb", data_dir=str(_fake_data_dir(tmp_path)))
    assert raw["test"].column_names == ["text", "label"]
    assert raw["train"][0] == {"text": "Great, truly.", "label": 1}


def test_streaming_local_copy_is_iterable(tmp_path: Path) -> None:
    raw = load_raw_datasets("wikitext", "wikitext-2-raw-v1", data_dir=str(_fake_data_dir(tmp_path)), streaming=True)
    assert isinstance(raw, datasets.IterableDatasetDict)
    assert [row["text"] for row in raw["validation"]] == [" valid one .", " valid two ."]


@pytest.mark.parametrize("suffix", ["txt", "csv", "jsonl", "parquet"])
def test_explicit_files_each_format(tmp_path: Path, suffix: str) -> None:
    rows = [{"text": "hello world"}, {"text": "second row"}]
    path = tmp_path / f"train.{suffix}"
    if suffix == "txt":
        path.write_text("\n".join(r["text"] for r in rows) + "\n", encoding="utf-8")
    elif suffix == "csv":
        path.write_text("text\n" + "\n".join(r["text"] for r in rows) + "\n", encoding="utf-8")
    elif suffix == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    else:
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    raw = load_raw_datasets(train_file=str(path), validation_file=str(path))
    assert raw["train"]["text"] == ["hello world", "second row"]
    assert set(raw) == {"train", "validation"}


def test_a_tsv_file_is_read_without_quoting(tmp_path: Path) -> None:
    """A '"' in a tsv file is part of its text, as in GLUE's files: an unmatched one does not join the rows after it."""
    rows = ['"a quoted start', "middle one", "middle two", 'end of quote" said', "normal"]
    path = tmp_path / "train.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{row}\t{i % 2}\n" for i, row in enumerate(rows)), encoding="utf-8")
    raw = load_raw_datasets(train_file=str(path))
    assert raw["train"]["text"] == rows and raw["train"]["label"] == [0, 1, 0, 1, 0]


def test_glue_local_copy_keeps_unbalanced_quotes(tmp_path: Path) -> None:
    mrpc = tmp_path / "glue" / "MRPC"
    mrpc.mkdir(parents=True)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for name in ("train.tsv", "dev.tsv"):
        text = header + '1\t1\t2\t"He said so\tShe agreed\n0\t3\t4\tNo quote\tOr here "\n'
        (mrpc / name).write_text("\ufeff" + text, encoding="utf-8")
    raw = load_raw_datasets("glue", "mrpc", data_dir=str(tmp_path))
    assert raw["train"].column_names == ["sentence1", "sentence2", "label"]
    assert raw["train"]["sentence1"] == ['"He said so', "No quote"] and raw["validation"]["sentence2"][1] == 'Or here "'


def test_a_column_in_one_split_alone_is_harmless(tmp_path: Path) -> None:
    """Each split keeps its own columns: an id column in the dev file alone does not fail the load."""
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\nthe cat,pos\n", encoding="utf-8")
    dev.write_text("id,text,label\n7,the dog,neg\n", encoding="utf-8")
    for streaming in (False, True):
        raw = load_raw_datasets(train_file=str(train), validation_file=str(dev), streaming=streaming)
        assert list(raw) == ["train", "validation"]
        assert [dict(row) for row in raw["train"]] == [{"text": "the cat", "label": "pos"}]
        assert [dict(row) for row in raw["validation"]] == [{"id": 7, "text": "the dog", "label": "neg"}]


def test_files_win_over_dataset_name(text_file: Path, tmp_path: Path) -> None:
    raw = load_raw_datasets(
        "wikitext", "wikitext-2-raw-v1", train_file=str(text_file), data_dir=str(_fake_data_dir(tmp_path))
    )
    assert set(raw) == {"train"} and raw["train"][0]["text"] == text_file.read_text().splitlines()[0]


def test_errors_name_the_bad_value(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_raw_datasets(train_file=str(tmp_path / "missing.txt"))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty.txt.*empty"):
        load_raw_datasets(train_file=str(tmp_path / "empty.txt"))
    (tmp_path / "data.xml").write_text("<a/>")
    with pytest.raises(ValueError, match="'xml'"):
        load_raw_datasets(train_file=str(tmp_path / "data.xml"))
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.txt").write_text("x\n")
    (tmp_path / "mixed" / "b.csv").write_text("text\nx\n")
    with pytest.raises(ValueError, match="one format"):  # one split's files; each split may have its own format
        load_raw_datasets(train_file=str(tmp_path / "mixed" / "*"))
    with pytest.raises(ValueError, match="No data given"):
        load_raw_datasets()


def test_a_folder_named_as_a_file_says_how_to_name_its_files(tmp_path: Path) -> None:
    """Not "does not exist": a folder of files gets the glob that names them, a folder that `save_to_disk` wrote the
    flag that reads it."""
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt.gz").write_bytes(gzip.compress(b"one\n"))
    with pytest.raises(
        IsADirectoryError,
        match=re.escape(
            f"is a folder: name the files in it with a glob, e.g. {str(tmp_path / 'texts' / '*.txt.gz')!r}."
        ),
    ):
        load_raw_datasets(train_file=str(tmp_path / "texts"))
    datasets.Dataset.from_dict({"text": ["one", "two"]}).save_to_disk(tmp_path / "saved")
    with pytest.raises(
        IsADirectoryError, match="is a dataset saved with save_to_disk: pass the folder as --dataset_name"
    ):
        load_raw_datasets(train_file=str(tmp_path / "saved"))


def test_a_saved_dataset_named_as_a_single_data_file_is_refused_without_a_dataset_flag(tmp_path: Path) -> None:
    """`load_data_file` reads the file of a command that has no --dataset_name (the inference commands'
    --input_file): a folder that `save_to_disk` wrote is no data file, and the error does not point at that flag."""
    datasets.Dataset.from_dict({"text": ["one", "two"]}).save_to_disk(tmp_path / "saved")
    with pytest.raises(IsADirectoryError, match="is a dataset saved with save_to_disk, not a data file") as error:
        load_data_file(tmp_path / "saved")
    assert "--dataset_name" not in str(error.value)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_dataset_name_that_save_to_disk_wrote_loads_from_disk(tmp_path: Path, streaming: bool) -> None:
    """A saved `Dataset` is the train split; a saved `DatasetDict` keeps its splits."""
    one = datasets.Dataset.from_dict({"text": ["one", "two"]})
    one.save_to_disk(tmp_path / "dataset")
    datasets.DatasetDict({"train": one, "validation": one.select([1])}).save_to_disk(tmp_path / "dict")
    raw = load_raw_datasets(str(tmp_path / "dataset"), streaming=streaming)
    assert list(raw) == ["train"] and [row["text"] for row in raw["train"]] == ["one", "two"]
    raw = load_raw_datasets(str(tmp_path / "dict"), streaming=streaming)
    assert list(raw) == ["train", "validation"] and [row["text"] for row in raw["validation"]] == ["two"]
    assert isinstance(raw["train"], datasets.IterableDataset) == streaming


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("ragged.tsv", b"a\tb\tlabel\nx\ty\t0\nx\ty\tz\t1\n", r"Expected 3 fields in line 3, saw 4; every line needs"),
        ("latin1.csv", "text,label\ncaf\xe9,0\n".encode("latin-1"), r"it is not UTF-8 \(byte 0xe9: .*\); save it as UTF-8\.$"),
        ("header.csv", b"text,label\n\n", r"^The train file '.*header.csv' holds no rows \(a header alone\); expected"),
    ],
)  # fmt: skip
def test_a_file_the_library_cannot_read_names_itself_and_the_cause(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    """Not the library's "An error occurred while generating the dataset": the file, and what is wrong with it."""
    (tmp_path / name).write_bytes(content)
    dev = tmp_path / f"dev{Path(name).suffix}"
    dev.write_text("text,label\nfine,0\n".replace(",", "\t" if dev.suffix == ".tsv" else ","), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        load_raw_datasets(train_file=str(tmp_path / name), validation_file=str(dev))
    assert str(tmp_path / name) in str(error.value) and "\n" not in str(error.value)


def test_a_table_dataset_without_its_local_copy_names_data_dir_when_the_hub_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No half minute of Hub retries ending in "Couldn't reach 'glue' on the Hub": one line, at once, that says where
    the local copy goes."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(model_reference, "hub_unreachable", lambda: "huggingface.co cannot be reached: no network")
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: pytest.fail("asked the Hub"))
    started = time.monotonic()
    with pytest.raises(FileNotFoundError) as error:
        load_raw_datasets("glue", "sst2")
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert "\n" not in message and "Dataset glue/sst2 has no local copy" in message
    assert f"--data_dir DIR or set ${DATA_DIR_ENV}=DIR, DIR holding sst2/" in message
    with pytest.raises(FileNotFoundError, match=f"in '{tmp_path}' and the Hub cannot be reached"):
        load_raw_datasets("glue", "sst2", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="--train_file/--validation_file"):
        load_raw_datasets("squad")


@pytest.mark.parametrize(
    ("variable", "online"),
    [("HF_HUB_OFFLINE", {}), ("HF_DATASETS_OFFLINE", {"HF_DATASETS_OFFLINE": "0", "HF_HUB_OFFLINE": "1"})],
)
def test_a_table_dataset_missing_from_the_cache_in_offline_mode_names_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, online: dict[str, str]
) -> None:
    """With datasets offline (HF_HUB_OFFLINE, or HF_DATASETS_OFFLINE, which datasets reads first whatever
    HF_HUB_OFFLINE says) the Hub is not probed (datasets' cache may hold the data); where it does not, the error is not
    datasets' "Couldn't reach 'glue' on the Hub (OfflineModeIsEnabled)", which names neither the task's folder nor
    --data_dir, but one line saying where the local copy goes and which variable is set."""

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'glue' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv(variable, "1")
    monkeypatch.setattr(model_reference, "probe_hub", lambda endpoint: pytest.fail("probed the Hub"))
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(FileNotFoundError) as error:
        load_raw_datasets("glue", "sst2")
    message = str(error.value)
    assert "\n" not in message and message.startswith("Dataset glue/sst2 has no local copy (neither --data_dir")
    assert f"{variable} is set, with no copy in the datasets cache: pass --data_dir" in message
    assert f"--data_dir DIR or set ${DATA_DIR_ENV}=DIR, DIR holding sst2/" in message
    monkeypatch.delenv(variable)
    for name, value in online.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(model_reference, "hub_unreachable", lambda: None)  # online: datasets' own error stands
    with pytest.raises(ConnectionError, match="Couldn't reach 'glue'"):
        load_raw_datasets("glue", "sst2")


def test_resolve_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert resolve_data_dir(None) is None
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert resolve_data_dir(None) == tmp_path
    assert resolve_data_dir(str(tmp_path / "..")) == tmp_path / ".."  # the argument beats the environment
    with pytest.raises(NotADirectoryError, match="nowhere"):
        resolve_data_dir(str(tmp_path / "nowhere"))


def test_sample_examples_is_a_seeded_random_draw() -> None:
    """The one meaning of --max_train_samples / --max_eval_samples: N examples drawn at random with the seed."""
    from hf_bertscratch.data import check_max_samples, sample_examples

    split = datasets.Dataset.from_dict({"n": list(range(100))})
    drawn = sample_examples(split, 10, seed=0)["n"]
    assert len(set(drawn)) == 10 and drawn == sample_examples(split, 10, seed=0)["n"]
    assert drawn != sample_examples(split, 10, seed=1)["n"] and drawn != list(range(10))
    assert sample_examples(split, None, seed=0) is split and sample_examples(split, 100, seed=0) is split
    streamed = sample_examples(split.to_iterable_dataset(), 4, seed=0)
    assert [row["n"] for row in streamed] == [0, 1, 2, 3]  # a stream gives its first N (shuffled upstream)

    class Args:
        max_train_samples, max_eval_samples = 5, 0

    with pytest.raises(ValueError, match="--max_eval_samples must be a positive number of examples.*got 0"):
        check_max_samples(Args())


def test_a_files_digest_follows_its_bytes_and_a_large_ones_its_size_and_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's digest follows its bytes, not its modification time; one above DIGEST_WHOLE_BYTES follows its size
    and the chunks read, an edit between two chunks unseen (as documented)."""
    path = tmp_path / "train.txt"
    text = bytes(range(97, 123)) * 40  # 1040 bytes
    path.write_bytes(text)
    digest = file_digest(path)
    os.utime(path, ns=(0, 10**9))
    assert file_digest(path) == digest
    path.write_bytes(text[:-1] + b"!")
    assert file_digest(path) != digest
    monkeypatch.setattr(data, "DIGEST_WHOLE_BYTES", 100)
    monkeypatch.setattr(data, "DIGEST_CHUNKS", 3)
    monkeypatch.setattr(data, "DIGEST_CHUNK_BYTES", 10)  # chunks at bytes 0, 515 and 1030
    path.write_bytes(text)
    sampled = file_digest(path)
    assert sampled != digest

    def edited(at: int) -> str:
        path.write_bytes(text[:at] + b"!" + text[at + 1 :])
        return file_digest(path)

    assert [edited(at) == sampled for at in (5, 520, 1035, 300)] == [False, False, False, True]
    path.write_bytes(text + b"!")
    assert file_digest(path) != sampled


def test_splits_read_from_files_are_fingerprinted_by_their_bytes(tmp_path: Path) -> None:
    """The fingerprint of a split read from a file stays when the file is touched and changes with its bytes."""
    path = tmp_path / "train.csv"
    path.write_text("text,label\nhello,0\nworld,1\n", encoding="utf-8")
    first = load_raw_datasets(train_file=str(path))["train"]._fingerprint
    os.utime(path, ns=(0, 10**9))
    assert load_raw_datasets(train_file=str(path))["train"]._fingerprint == first
    path.write_text("text,label\nhello,1\nworld,0\n", encoding="utf-8")
    assert load_raw_datasets(train_file=str(path))["train"]._fingerprint != first


def _read_input(path: Path, cache: Path) -> list[str]:
    return list(load_data_file(path, cache_dir=str(cache))["sentence"])


def _read_train(path: Path, cache: Path) -> list[str]:
    return list(load_raw_datasets(train_file=str(path), cache_dir=str(cache))["train"]["sentence"])


def _read_local_copy(path: Path, cache: Path) -> list[str]:
    raw = load_raw_datasets("glue", "sst2", data_dir=str(path.parent.parent), cache_dir=str(cache))
    return list(raw["train"]["sentence"])


@pytest.mark.parametrize("read", [_read_input, _read_train, _read_local_copy])
def test_a_file_rewritten_with_its_modification_time_kept_is_read_anew_and_an_unchanged_one_from_the_cache(
    tmp_path: Path, read: Callable[[Path, Path], list[str]]
) -> None:
    """`datasets` keys its cache on a local file's path and modification time: a file rewritten with both kept (as
    `cp -p` or `rsync -t` leave it) gives its new rows, not the cached old ones; a file left alone is not converted
    again."""
    path = tmp_path / "data" / "sst2" / "train.tsv"
    path.parent.mkdir(parents=True)
    (path.parent / "dev.tsv").write_text("sentence\tlabel\ndev\t1\n", encoding="utf-8")
    cache = tmp_path / "cache"

    def converted() -> int:
        return len(list(cache.glob("*/*/*/*/dataset_info.json")))

    path.write_text("sentence\tlabel\nold one\t0\nold two\t1\n", encoding="utf-8")
    kept = path.stat()
    assert read(path, cache) == ["old one", "old two"]
    first = converted()
    assert read(path, cache) == ["old one", "old two"]
    assert converted() == first
    path.write_text("sentence\tlabel\nnew one\t0\nnew two\t1\n", encoding="utf-8")
    os.utime(path, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert path.stat().st_mtime_ns == kept.st_mtime_ns
    assert read(path, cache) == ["new one", "new two"]
    assert converted() == first + 1
