"""Which data becomes which split of a fine-tuning run (`hf_bertscratch.tasks.data.load_task_datasets`): a --*_file
replaces the split it names alone, the task's dataset (its local copy under --data_dir) gives the others; a test split
given without a validation split is scored once, at the end, and checkpoints are chosen on train examples held out."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import datasets
import huggingface_hub
import pytest

from hf_bertscratch.tasks.data import MIN_HELD_OUT, DataArguments, chooses_on_test_split, load_task_datasets
from hf_bertscratch_base.task_table import HOLD_OUT_PERCENTAGE

RTE_HEADER = ("index", "sentence1", "sentence2", "label")


def rte_rows(n: int, start: int) -> list[tuple[str, ...]]:
    """`n` rows in GLUE RTE's layout, numbered from `start` so that each file's sentences are its own."""
    labels = ("not_entailment", "entailment")
    return [(str(i), f"sentence {i} .", f"hypothesis {i} .", labels[i % 2]) for i in range(start, start + n)]


def write_tsv(path: Path, rows: list[tuple[str, ...]], header: tuple[str, ...] = RTE_HEADER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("\t".join(row) for row in [header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory with RTE's local copy (20 train, 6 dev rows) and IMDB's (40 train, 10 test reviews)."""
    root = tmp_path / "data"
    write_tsv(root / "glue" / "RTE" / "train.tsv", rte_rows(20, 0))
    write_tsv(root / "glue" / "RTE" / "dev.tsv", rte_rows(6, 20))
    (root / "imdb").mkdir()
    for split, n in (("train", 40), ("test", 10)):
        with gzip.open(root / "imdb" / f"{split}.csv.gz", "wt", encoding="utf-8") as handle:
            handle.write("text,label\n" + "".join(f"{split} review {i},{i % 2}\n" for i in range(n)))
    return root


def load(caplog: pytest.LogCaptureFixture, **flags: str | float) -> tuple[datasets.DatasetDict, DataArguments]:
    """The splits a run of these data `flags` reads, keyed by role, and its arguments."""
    args = DataArguments(**flags)
    with caplog.at_level(logging.INFO):
        return load_task_datasets(args, args.task_spec), args


def sizes(splits: datasets.DatasetDict) -> dict[str, int]:
    return {role: len(split) for role, split in splits.items()}


def said(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.getMessage().startswith(start)]


def test_a_test_file_replaces_the_test_split_alone(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--task rte --data_dir D --test_file X`: train and dev from RTE's local copy, the test split from X, scored
    once at the end; one log line says which split comes from where."""
    test = write_tsv(tmp_path / "test.tsv", rte_rows(4, 100))
    splits, args = load(caplog, task="rte", data_dir=str(data_dir), test_file=str(test))
    assert sizes(splits) == {"train": 20, "eval": 6, "test": 4}
    assert splits["train"]["sentence1"] == [row[1] for row in rte_rows(20, 0)]
    assert splits["eval"]["sentence1"] == [row[1] for row in rte_rows(6, 20)]
    assert splits["test"]["sentence1"] == [row[1] for row in rte_rows(4, 100)]
    assert args.validation_split_percentage == 0  # RTE has its dev split: nothing held out
    assert said(caplog, "Splits: ") == [
        f"Splits: test from {str(test)!r} (--test_file); train, validation from the local copy of glue/rte in "
        f"{data_dir / 'glue' / 'RTE'}."
    ]


@pytest.mark.parametrize(
    "split, flag, role", [("train", "train_file", "train"), ("validation", "validation_file", "eval")]
)
def test_a_train_or_validation_file_replaces_its_split_alone(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture, split: str, flag: str, role: str
) -> None:
    path = write_tsv(tmp_path / f"{split}.tsv", rte_rows(3, 200))
    splits, _ = load(caplog, task="rte", data_dir=str(data_dir), **{flag: str(path)})
    assert splits[role]["sentence1"] == [row[1] for row in rte_rows(3, 200)]
    other, rows = ("eval", rte_rows(6, 20)) if role == "train" else ("train", rte_rows(20, 0))
    assert splits[other]["sentence1"] == [row[1] for row in rows]  # from the local copy
    kept = "validation" if split == "train" else "train"
    assert said(caplog, "Splits: ") == [
        f"Splits: {split} from {str(path)!r} (--{flag}); {kept} from the local copy of glue/rte in "
        f"{data_dir / 'glue' / 'RTE'}."
    ]


def test_files_for_every_split_the_task_reads_leave_the_local_copy_unread(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = write_tsv(tmp_path / "train.tsv", rte_rows(5, 300))
    dev = write_tsv(tmp_path / "dev.tsv", rte_rows(2, 400))
    splits, _ = load(caplog, task="rte", data_dir=str(data_dir), train_file=str(train), validation_file=str(dev))
    assert sizes(splits) == {"train": 5, "eval": 2}
    assert not said(caplog, "Splits: ") and not said(caplog, "Using the local copy")


def test_a_labelled_test_file_without_a_validation_file_is_scored_once_and_train_is_held_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--train_file T --test_file X`: checkpoints are chosen on a share of T held out (the share IMDB holds out),
    never on X, which is the test split alone, scored once at the end."""
    train = write_tsv(tmp_path / "train.tsv", rte_rows(40, 0))
    test = write_tsv(tmp_path / "test.tsv", rte_rows(6, 100))
    pair = {"text_column": "sentence1", "text_pair_column": "sentence2"}
    splits, args = load(caplog, train_file=str(train), test_file=str(test), **pair)
    held = round(40 * HOLD_OUT_PERCENTAGE / 100)
    assert sizes(splits) == {"train": 40 - held, "eval": held, "test": 6}
    assert splits["test"]["sentence1"] == [row[1] for row in rte_rows(6, 100)]
    drawn = [*splits["train"]["sentence1"], *splits["eval"]["sentence1"]]
    assert sorted(drawn) == sorted(row[1] for row in rte_rows(40, 0))  # a partition of the train file
    assert splits["eval"].split == "held_out"
    assert args.validation_split_percentage == HOLD_OUT_PERCENTAGE
    assert said(caplog, "No validation split") == [
        f"No validation split: checkpoints are chosen on {held} train examples held out ({HOLD_OUT_PERCENTAGE}%, "
        "split held_out), not on the 6 examples of the test split, which the chosen model meets once, at the end."
    ]


def test_a_test_file_without_labels_and_no_validation_file_is_predicted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = write_tsv(tmp_path / "train.tsv", [(f"text {i}", str(i % 2)) for i in range(20)], ("text", "label"))
    test = write_tsv(tmp_path / "test.tsv", [("a text",), ("another",)], ("text",))
    splits, _ = load(caplog, train_file=str(train), test_file=str(test))
    assert sizes(splits) == {"train": 19, "eval": 1, "test": 2}
    assert "label" not in splits["test"].column_names and "label" in splits["eval"].column_names


def test_imdb_with_a_test_file_holds_out_its_share_of_train(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """IMDB evaluates on its test split; a test file given replaces that split, which is then scored once at the end,
    and checkpoints are chosen on 5% of the local train reviews, as without the file."""
    test = write_tsv(tmp_path / "test.tsv", [("a fine film", "1"), ("dull", "0"), ("good", "1")], ("text", "label"))
    splits, args = load(caplog, task="imdb", data_dir=str(data_dir), test_file=str(test))
    assert sizes(splits) == {"train": 38, "eval": 2, "test": 3}
    assert splits["test"]["text"] == ["a fine film", "dull", "good"]
    assert all(text.startswith("train review") for text in splits["eval"]["text"])
    assert args.validation_split_percentage == 5


def test_explicit_split_flags_keep_their_meaning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """--validation_split_percentage holds out the share it names, or none; --eval_split test makes the test file the
    eval split, scored once."""
    train = write_tsv(tmp_path / "train.tsv", [(f"text {i}", str(i % 2)) for i in range(20)], ("text", "label"))
    test = write_tsv(tmp_path / "test.tsv", [("a", "0"), ("b", "1")], ("text", "label"))
    files = {"train_file": str(train), "test_file": str(test)}
    assert sizes(load(caplog, **files, validation_split_percentage=20)[0]) == {"train": 16, "eval": 4, "test": 2}
    explicit, args = load(caplog, **files, eval_split="test")
    assert sizes(explicit) == {"train": 20, "eval": 2} and args.validation_split_percentage == 0
    with pytest.raises(ValueError, match=r"^The data has no validation split to evaluate on \(its splits: \['train', "):
        load(caplog, **files, validation_split_percentage=0)


def test_eval_split_test_scores_the_test_split_once_from_a_file_as_from_a_dataset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--eval_split test chooses checkpoints on the test split: a --test_file, as a dataset's test split, is then the
    eval split alone, scored once (never again as the test split), and the log says that its scores are those of the
    split the checkpoints were chosen on. With a share of train held out to choose on, both score it once, at the
    end, as the test split."""
    rows = {"train": [(f"train {i}", str(i % 2)) for i in range(20)], "test": [("a", "0"), ("b", "1"), ("c", "0")]}
    files = {
        f"{split}_file": str(write_tsv(tmp_path / f"{split}.tsv", r, ("text", "label"))) for split, r in rows.items()
    }
    folder = tmp_path / "dataset"
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {"text": [text for text, _ in r], "label": [int(label) for _, label in r]}
            )
            for split, r in rows.items()
        }
    ).save_to_disk(str(folder))
    for flags in (files, {"dataset_name": str(folder), "task_type": "classification"}):
        caplog.clear()
        splits, args = load(caplog, **flags, eval_split="test")
        assert sizes(splits) == {"train": 20, "eval": 3} and splits["eval"]["text"] == ["a", "b", "c"]
        assert args.chosen_on_test_split
        assert said(caplog, "Checkpoints are chosen on the test split") == [
            "Checkpoints are chosen on the test split 'test' (3 examples, --eval_split test), which is scored once, "
            "as the eval split: its eval_* scores are those of the split the checkpoints were chosen on, not of "
            "examples the choice never saw."
        ], flags
        splits, args = load(caplog, **flags, eval_split="test", validation_split_percentage=10)
        assert sizes(splits) == {"train": 18, "eval": 2, "test": 3} and splits["test"]["text"] == ["a", "b", "c"]
        assert not args.chosen_on_test_split


# Data flags -> whether checkpoints are chosen on the test split. The files: a train file, a labelled test file.
TEST_SPLIT_CHOICES = [
    ({"files": True, "eval_split": "test"}, True),
    ({"files": True, "eval_split": "test", "validation_split_percentage": 10}, False),
    ({"files": True}, False),  # the test file is scored once; a share of train is held out to choose on
    ({"task": "imdb"}, False),  # IMDB's 5% of train held out; its test split scored once
    ({"task": "imdb", "eval_split": "test"}, False),
    ({"task": "imdb", "validation_split_percentage": 0}, True),  # its eval split, the only labelled one, is its test
    ({"task": "imdb", "eval_split": "test", "validation_split_percentage": 0}, True),
    ({"task": "rte"}, False),
]


@pytest.mark.parametrize("flags, chosen_on_test", TEST_SPLIT_CHOICES)
def test_one_rule_says_where_checkpoints_are_chosen_on_the_test_split(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture, flags: dict, chosen_on_test: bool
) -> None:
    """The command line's answer (`chooses_on_test_split`, which refuses a multi-label threshold to choose there) is
    the loaded data's (`args.chosen_on_test_split`, the run's record), and both are whether the eval split read is
    the test split: IMDB's eval split is its test split, so holding none of train out chooses on it, --eval_split or
    not, and the log says so."""
    flags = dict(flags)
    if flags.pop("files", False):
        rows = {"train": [(f"train {i}", str(i % 2)) for i in range(20)], "test": [("a", "0"), ("b", "1")]}
        for split, split_rows in rows.items():
            flags[f"{split}_file"] = str(write_tsv(tmp_path / f"{split}.tsv", split_rows, ("text", "label")))
    else:
        flags["data_dir"] = str(data_dir)
    args = DataArguments(**flags)
    assert chooses_on_test_split(args) is chosen_on_test
    splits, args = load(caplog, **flags)
    assert args.chosen_on_test_split is chosen_on_test
    assert (args.split_names["eval"] == "test" and "test" not in splits) is chosen_on_test
    logged = said(caplog, "Checkpoints are chosen on the test split")
    task_eval_split = "the task's eval split, with --validation_split_percentage 0"  # IMDB's, its test split
    why = f"--eval_split {flags['eval_split']}" if "eval_split" in flags else task_eval_split
    assert logged == (
        [
            f"Checkpoints are chosen on the test split 'test' ({len(splits['eval'])} examples, {why}), "
            "which is scored once, as the eval split: its eval_* scores are those of the split the "
            "checkpoints were chosen on, not of examples the choice never saw."
        ]
        if chosen_on_test
        else []
    )


def test_a_file_the_run_does_not_read_is_refused(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """IMDB chooses on 5% of train held out and scores its test split at the end: a validation file would be left
    unread. The advice given makes it the split checkpoints are chosen on."""
    dev = write_tsv(tmp_path / "dev.tsv", [("fine", "1")], ("text", "label"))
    with pytest.raises(ValueError) as error:
        load(caplog, task="imdb", data_dir=str(data_dir), validation_file=str(dev))
    assert str(error.value) == (
        f"The validation file {str(dev)!r} (--validation_file) is no split the run reads (it reads train 'train', 5% "
        "of it held out to choose on, 'test' scored at the end): to choose on it, add --eval_split validation "
        "--test_split test --validation_split_percentage 0, or leave the file out."
    )
    splits, _ = load(
        caplog,
        task="imdb",
        data_dir=str(data_dir),
        validation_file=str(dev),
        eval_split="validation",
        test_split="test",
        validation_split_percentage=0,
    )
    assert sizes(splits) == {"train": 40, "eval": 1, "test": 10}


def test_a_conll_test_file_of_words_alone_without_a_validation_file_is_predicted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tagged CoNLL train file and a test file of words alone: the test file is predicted, and checkpoints are
    chosen on train sentences held out, so no split scored needs the tags the test file lacks."""
    train = tmp_path / "train.txt"
    train.write_text("".join(f"Paris{i} NNP B-NP B-LOC\nsleeps VBZ B-VP O\n\n" for i in range(20)), encoding="utf-8")
    test = tmp_path / "test.txt"
    test.write_text("Rome\nwakes\n\nOslo\n\n", encoding="utf-8")
    splits, _ = load(caplog, task_type="token-classification", train_file=str(train), test_file=str(test))
    assert sizes(splits) == {"train": 19, "eval": 1, "test": 2}
    assert splits["test"]["tokens"] == [["Rome", "wakes"], ["Oslo"]] and "ner_tags" not in splits["test"].column_names


def test_a_dataset_with_train_and_test_splits_only_is_chosen_on_train_held_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A dataset (`--dataset_name`, here a local `save_to_disk` folder) with a train and a test split and no
    validation split, as the Hub's IMDB has them: checkpoints are chosen on train examples held out and the test split
    is scored once, at the end; `--eval_split test` still chooses on the test split."""
    folder = tmp_path / "reviews"
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {"text": [f"{split} {i}" for i in range(n)], "label": [i % 2 for i in range(n)]}
            )
            for split, n in (("train", 40), ("test", 10))
        }
    ).save_to_disk(str(folder))
    splits, args = load(caplog, dataset_name=str(folder), task_type="classification")
    assert sizes(splits) == {"train": 38, "eval": 2, "test": 10}
    assert args.validation_split_percentage == HOLD_OUT_PERCENTAGE
    assert not set(splits["eval"]["text"]) & set(splits["test"]["text"])
    assert said(caplog, "No validation split: checkpoints are chosen on 2 train examples held out")
    splits, _ = load(caplog, dataset_name=str(folder), task_type="classification", eval_split="test")
    assert sizes(splits) == {"train": 40, "eval": 10}
    with_validation = tmp_path / "with-validation"
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict({"text": ["a", "b", "c"], "label": [0, 1, 0]})
            for split in ("train", "validation")
        }
    ).save_to_disk(str(with_validation))
    splits, args = load(caplog, dataset_name=str(with_validation), task_type="classification")
    assert sizes(splits) == {"train": 3, "eval": 3} and args.validation_split_percentage == 0


def save_splits(folder: Path, sizes: dict[str, int], labels: dict[str, list[int]] | None = None) -> Path:
    """A dataset saved to disk (what `--dataset_name FOLDER` reads) of one split per `sizes` entry, `n` texts each,
    labelled 0/1 in turns (or `labels[split]`: -1 for no label, as the Hub's GLUE test splits have them)."""
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["no", "yes"])})
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {
                    "text": [f"{split} {i}" for i in range(n)],
                    "label": (labels or {}).get(split, [i % 2 for i in range(n)]),
                },
                features=features,
            )
            for split, n in sizes.items()
        }
    ).save_to_disk(str(folder))
    return folder


def test_a_train_split_alone_holds_out_a_share_of_train_to_choose_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--train_file T` alone, or a dataset with a train split alone: HOLD_OUT_PERCENTAGE of train (the same examples
    in every run) is held out, chosen on and reported as the eval split, and one log line says so;
    `--validation_split_percentage 0` holds none out and is refused in one line."""
    train = write_tsv(tmp_path / "train.tsv", [(f"text {i}", str(i % 2)) for i in range(100)], ("text", "label"))
    held = round(100 * HOLD_OUT_PERCENTAGE / 100)
    line = (
        f"No validation split: checkpoints are chosen on {held} train examples held out ({HOLD_OUT_PERCENTAGE}%, "
        "split held_out), which are the eval split scored and reported; there is no test split."
    )
    splits, args = load(caplog, train_file=str(train))
    assert sizes(splits) == {"train": 100 - held, "eval": held}
    assert splits["eval"].split == "held_out"
    assert sorted([*splits["train"]["text"], *splits["eval"]["text"]]) == sorted(f"text {i}" for i in range(100))
    assert args.validation_split_percentage == HOLD_OUT_PERCENTAGE
    assert said(caplog, "No validation split") == [line]
    caplog.clear()
    folder = save_splits(tmp_path / "train-only", {"train": 100})
    splits, args = load(caplog, dataset_name=str(folder), task_type="classification")
    assert sizes(splits) == {"train": 100 - held, "eval": held}
    assert args.validation_split_percentage == HOLD_OUT_PERCENTAGE
    assert said(caplog, "No validation split") == [line]
    for flags in ({"train_file": str(train)}, {"dataset_name": str(folder)}):
        with pytest.raises(ValueError) as refused:
            load(caplog, **flags, validation_split_percentage=0)
        assert str(refused.value) == (
            "The data has no validation split to evaluate on (its splits: ['train']) and --validation_split_percentage "
            "0 holds none of train out: give --validation_file, name one of its splits with --eval_split, or hold out "
            f"part of the train split with --validation_split_percentage (default {HOLD_OUT_PERCENTAGE})."
        )


def test_a_train_split_alone_too_small_to_hold_out_a_handful_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A train file alone whose HOLD_OUT_PERCENTAGE would be fewer than a handful of examples is refused, naming the
    count and the flag; a share given with --validation_split_percentage is held out as given."""
    train = write_tsv(tmp_path / "train.tsv", [(f"text {i}", str(i % 2)) for i in range(40)], ("text", "label"))
    with pytest.raises(ValueError) as refused:
        load(caplog, train_file=str(train))
    assert str(refused.value) == (
        f"The data has no validation split, and {HOLD_OUT_PERCENTAGE}% of its 40 train examples would hold out 2 to "
        f"choose checkpoints on and score, fewer than {MIN_HELD_OUT}: give --validation_file, or hold out more with "
        "--validation_split_percentage (e.g. 13)."
    )
    tiny = write_tsv(tmp_path / "tiny.tsv", [("a", "0"), ("b", "1")], ("text", "label"))
    with pytest.raises(ValueError, match=r"of its 2 train examples would hold out 1 .*: give --validation_file\.$"):
        load(caplog, train_file=str(tiny))
    splits, _ = load(caplog, train_file=str(train), validation_split_percentage=5)
    assert sizes(splits) == {"train": 38, "eval": 2}


def test_a_dataset_with_a_test_split_of_its_own_scores_it_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Data of one's own with train, validation and test splits, given with no split flags (a dataset saved to disk,
    or a file for each split): checkpoints are chosen on the validation split and the test split is scored once, at
    the end; a test split whose labels are all -1 (the Hub's GLUE test splits) is predicted, not scored."""
    folder = save_splits(tmp_path / "own", {"train": 6, "validation": 3, "test": 4})
    splits, args = load(caplog, dataset_name=str(folder), task_type="classification")
    assert sizes(splits) == {"train": 6, "eval": 3, "test": 4}
    assert splits["test"]["text"] == [f"test {i}" for i in range(4)] and "label" in splits["test"].column_names
    assert args.validation_split_percentage == 0
    hidden = save_splits(tmp_path / "hidden", {"train": 6, "validation": 3, "test": 4}, {"test": [-1] * 4})
    splits, _ = load(caplog, dataset_name=str(hidden))
    assert sizes(splits) == {"train": 6, "eval": 3, "test": 4} and "label" not in splits["test"].column_names
    files = {
        f"{split}_file": str(write_tsv(tmp_path / f"{split}.tsv", [(f"{split} {i}", str(i % 2)) for i in range(n)],
                                       ("text", "label")))
        for split, n in (("train", 6), ("validation", 3), ("test", 4))
    }  # fmt: skip
    assert sizes(load(caplog, **files)[0]) == {"train": 6, "eval": 3, "test": 4}


def test_a_table_task_reads_the_test_split_the_table_gives_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A GLUE task from a copy of its dataset with a test split (labels hidden as -1 on the Hub) keeps to the table:
    no test split is read, scored or predicted."""
    features = datasets.Features(
        {"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
         "label": datasets.ClassLabel(names=["entailment", "not_entailment"])}
    )  # fmt: skip
    rows = {"sentence1": ["a", "b", "c"], "sentence2": ["d", "e", "f"]}
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict({**rows, "label": labels}, features=features)
            for split, labels in (("train", [0, 1, 0]), ("validation", [1, 0, 1]), ("test", [-1, -1, -1]))
        }
    ).save_to_disk(str(tmp_path / "rte"))
    splits, _ = load(caplog, task="rte", dataset_name=str(tmp_path / "rte"))
    assert sizes(splits) == {"train": 3, "eval": 3}


def test_imdb_from_a_named_dataset_keeps_its_hold_out(
    data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--task imdb --dataset_name D` (a copy of IMDB with train and test splits) chooses on IMDB's share of train
    held out, never on the test reviews, as `--task imdb` does."""
    folder = tmp_path / "imdb-copy"
    datasets.load_dataset(
        "csv", data_files={s: str(data_dir / "imdb" / f"{s}.csv.gz") for s in ("train", "test")}
    ).save_to_disk(str(folder))
    splits, args = load(caplog, task="imdb", dataset_name=str(folder))
    assert sizes(splits) == {"train": 38, "eval": 2, "test": 10}
    assert args.validation_split_percentage == HOLD_OUT_PERCENTAGE


def test_train_and_validation_files_are_read_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Files that give the train and eval splits of a table task are read alone, offline too: the task's test split
    (CoNLL-2003's) comes from --test_file only, and its dataset is not looked for."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tagged = tmp_path / "tagged.txt"
    tagged.write_text("".join(f"Paris{i} NNP B-NP B-LOC\nsleeps VBZ B-VP O\n\n" for i in range(4)), encoding="utf-8")
    splits, _ = load(caplog, task="conll2003", train_file=str(tagged), validation_file=str(tagged))
    assert sizes(splits) == {"train": 4, "eval": 4}


def test_a_dataset_the_files_need_but_cannot_reach_is_named_with_the_splits_it_would_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A test file alone leaves RTE's train and validation splits to its dataset: with no local copy and no Hub, the
    one line says so beside where a local copy would go, and which files would stand in."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # as datasets and huggingface_hub read it when imported, in a process started with it: else they try the Hub,
    # with retries, for over 20 seconds before the run fails
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("BERTSCRATCH_DATA_DIR", raising=False)
    test = write_tsv(tmp_path / "rte-test.tsv", rte_rows(2, 0))
    with pytest.raises(FileNotFoundError) as error:
        load(caplog, task="rte", test_file=str(test))
    message = str(error.value)
    assert message.startswith(
        "Dataset glue/rte has no local copy (neither --data_dir nor $BERTSCRATCH_DATA_DIR is set)"
    )
    assert message.endswith(
        "The files given leave the train and validation splits to it (or give --train_file, --validation_file too)."
    )


def test_each_split_is_read_in_its_own_files_format(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A csv train file beside a JSON Lines validation file and a parquet test file; a CoNLL text train file beside a
    JSON Lines test file of tokens: each split read by its own format's reader."""
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"train {i},{i % 2}\n" for i in range(6)), encoding="utf-8")
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(f'{{"text": "dev {i}", "label": {i % 2}}}\n' for i in range(3)), encoding="utf-8")
    test = tmp_path / "test.parquet"
    datasets.Dataset.from_dict({"text": ["test 0", "test 1"], "label": [0, 1]}).to_parquet(str(test))
    splits, _ = load(caplog, train_file=str(train), validation_file=str(dev), test_file=str(test))
    assert sizes(splits) == {"train": 6, "eval": 3, "test": 2}
    assert splits["eval"]["text"][0] == "dev 0" and splits["test"]["text"] == ["test 0", "test 1"]
    conll = tmp_path / "train.txt"
    conll.write_text("".join(f"Paris{i} NNP B-NP B-LOC\nsleeps VBZ B-VP O\n\n" for i in range(4)), encoding="utf-8")
    tokens = tmp_path / "test.jsonl"
    tokens.write_text('{"tokens": ["Rome", "wakes"], "ner_tags": ["B-LOC", "O"]}\n', encoding="utf-8")
    splits, _ = load(
        caplog,
        task_type="token-classification",
        train_file=str(conll),
        validation_file=str(conll),
        test_file=str(tokens),
    )
    assert sizes(splits) == {"train": 4, "eval": 4, "test": 1}
    assert splits["test"]["tokens"] == [["Rome", "wakes"]] and splits["train"]["tokens"][0] == ["Paris0", "sleeps"]
