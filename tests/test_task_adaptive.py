"""Tests for task-adaptive pretraining (`pretraining --task_text`): the unlabelled texts of each task shape
(`tasks.task_texts`), a run that continues a saved MLM on a fake RTE's train text, and the arguments it refuses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import datasets
import pytest
from transformers import AutoModelForPreTraining, AutoTokenizer, BertTokenizer

from hf_bertscratch import pretraining, pretraining_arguments, pretraining_report
from hf_bertscratch.tasks import SHAPE_TEXTS, SHAPES, TASKS, task_texts

from conftest import CORPUS, PRETRAIN_ONE_PROCESS, assert_no_local_path

# A fake GLUE RTE: train pairs from the shared corpus, dev pairs that share no sentence with them.
RTE_TRAIN = [(CORPUS[i], CORPUS[i + 1], "entailment" if i % 4 else "not_entailment") for i in range(0, 12, 2)]
RTE_DEV = [
    ("the river is in the big country .", "the small cat sat on the red mat .", "not_entailment"),
    ("the dog was good and the cat was bad .", "this story was wonderful , i love it !", "entailment"),
    ("the actor ran to london from paris .", "the best film of the city was boring .", "entailment"),
]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_every_shape_has_a_text_reader() -> None:
    assert set(SHAPE_TEXTS) == set(SHAPES)


@pytest.mark.parametrize(
    ("task", "columns", "expected"),
    [
        (  # a pair gives both texts, the second as a text of its own; the labels never appear
            "rte",
            {
                "sentence1": ["a cat sat .", "a dog ran ."],
                "sentence2": ["it sat .", "it ran ."],
                "label": ["entailment", "not_entailment"],
            },
            ["a cat sat .", "it sat .", "a dog ran .", "it ran ."],
        ),
        (  # a single text; an empty one is left out
            "sst2",
            {"sentence": ["a great film ", "", "a bad plot "], "label": [1, 0, 0], "idx": [0, 1, 2]},
            ["a great film ", "a bad plot "],
        ),
        (  # regression: the pair, not the score
            "stsb",
            {"sentence1": ["a plane takes off ."], "sentence2": ["an air plane takes off ."], "label": [5.0]},
            ["a plane takes off .", "an air plane takes off ."],
        ),
        (  # token classification: the words joined with spaces, no tags
            "conll2003",
            {
                "tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]],
                "ner_tags": [[3, 0, 7, 0], [1, 2]],
            },
            ["EU rejects German call", "Peter Blackburn"],
        ),
        (  # question answering: each context once, every question after it; no answers, no ids
            "squad",
            {
                "id": ["q1", "q2", "q3"],
                "context": ["Paris is in France.", "Paris is in France.", "Rome is in Italy."],
                "question": ["Where is Paris?", "What is in France?", "Where is Rome?"],
                "answers": [
                    {"text": ["France"], "answer_start": [12]},
                    {"text": ["Paris"], "answer_start": [0]},
                    {"text": ["Italy"], "answer_start": [11]},
                ],
            },
            ["Paris is in France.", "Where is Paris?", "What is in France?", "Rome is in Italy.", "Where is Rome?"],
        ),
    ],
)
def test_task_texts_read_the_text_columns_only(task: str, columns: dict[str, list], expected: list[str]) -> None:
    split = datasets.Dataset.from_dict(columns)
    texts = task_texts(TASKS[task], split)
    assert texts == expected
    assert task_texts(TASKS[task], columns) == expected  # a dict of columns reads the same
    label_column = TASKS[task].columns.get("label")
    if label_column and isinstance(columns[label_column][0], str):
        assert not any(label in text for label in columns[label_column] for text in texts)


def test_task_texts_as_documents_end_each_example_with_an_empty_text() -> None:
    pairs = {"sentence1": ["a cat sat .", "a dog ran ."], "sentence2": ["it sat .", "it ran ."], "label": [0, 1]}
    assert task_texts(TASKS["rte"], pairs, documents=True) == [
        "a cat sat .",
        "it sat .",
        "",
        "a dog ran .",
        "it ran .",
        "",
    ]
    squad = {"context": ["P is in F.", "P is in F.", "R is in I."], "question": ["Where is P?", "What?", "Where is R?"]}
    assert task_texts(TASKS["squad"], squad, documents=True) == [
        "P is in F.", "Where is P?", "What?", "", "R is in I.", "Where is R?", "",
    ]  # fmt: skip
    assert task_texts(TASKS["sst2"], {"sentence": ["good .", " ", "bad ."]}, documents=True) == [
        "good .",
        "",
        "bad .",
        "",
    ]


def test_next_sentence_pairs_of_a_pair_task_follow_its_examples(tokenizer: BertTokenizer) -> None:
    """NSP on a pair task's texts as documents: IsNext is an example's first text then its second, NotNext a text
    then a text of another example."""
    from hf_bertscratch.nsp import make_nsp_pairs_function

    first = [f"the {w} sat on the mat ." for w in ("cat", "dog", "rome", "paris", "film", "movie", "city", "river")]
    second = [f"it was the {w} ." for w in ("best", "worst", "big", "small", "red", "blue", "great", "bad")]
    texts = task_texts(TASKS["rte"], {"sentence1": first, "sentence2": second}, documents=True)
    out = make_nsp_pairs_function(tokenizer, "text", 64, 0.5, 0)({"text": texts}, list(range(len(texts))))
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    examples = {tuple(encode(a)): encode(b) for a, b in zip(first, second, strict=True)}
    labels = out["next_sentence_label"]
    assert 0 < sum(labels) < len(labels)
    for ids, types, label in zip(out["input_ids"], out["token_type_ids"], labels, strict=True):
        split = types.index(1)
        a, b = ids[1 : split - 1], ids[split:-1]
        if label == 0:  # IsNext: an example's two texts, in order
            assert examples.get(tuple(a)) == b
        else:  # NotNext: never the two texts of one example
            assert examples.get(tuple(a)) != b


# A fake GLUE CoLA as the GLUE files have it: no header; source, label, original label (empty), sentence.
COLA_TRAIN = ["the cat sat on the mat .", "mat the on sat cat the .", "a dog ran to the park ."]
COLA_DEV = ["the river ran to the sea ."]


def _write_cola(root: Path) -> None:
    folder = root / "glue" / "CoLA"
    folder.mkdir(parents=True)
    for name, sentences in (("train.tsv", COLA_TRAIN), ("dev.tsv", COLA_DEV)):
        lines = [f"gj04\t{i % 2}\t\t{sentence}" for i, sentence in enumerate(sentences)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_rte(root: Path) -> Path:
    folder = root / "glue" / "RTE"
    folder.mkdir(parents=True)
    for name, rows in (("train.tsv", RTE_TRAIN), ("dev.tsv", RTE_DEV)):
        lines = ["index\tsentence1\tsentence2\tlabel", *("\t".join((str(i), *row)) for i, row in enumerate(rows))]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def rte_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_rte(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def base_dir(model_dir: Path) -> Path:
    """A tiny saved masked-LM with its tokenizer: the model a task-adaptive run continues."""
    return model_dir


def _packed_blocks(tokenizer: BertTokenizer, texts: list[str], max_seq_length: int = 16) -> int:
    """How many blocks `make_pack_function` cuts from `texts` (one map batch)."""
    tokens = sum(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts)
    return tokens // (max_seq_length - 2)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The raw texts of each split as pretraining hands them to tokenisation, filled in when a run gets there."""
    seen: dict[str, list[str]] = {}
    tokenize_splits = pretraining.tokenize_splits

    def recording(splits: dict, *args: object, **kwargs: object) -> dict:
        seen.update({name: list(split["text"]) for name, split in splits.items()})
        return tokenize_splits(splits, *args, **kwargs)

    monkeypatch.setattr(pretraining, "tokenize_splits", recording)
    return seen


def test_continues_a_model_on_the_train_text_of_rte_within_a_budget(
    rte_dir: Path,
    base_dir: Path,
    tokenizer: BertTokenizer,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    seen: dict[str, list[str]],
    trained: list[tuple[int, int]],
) -> None:
    out = tmp_path / "tapt"
    argv = ["--task_text", "rte", "--data_dir", str(rte_dir), "--model_name_or_path", str(base_dir)]
    pretraining.main(
        [*argv, "--output_dir", str(out), *PRETRAIN_ONE_PROCESS, "--max_train_minutes", "1", "--max_steps", "3"]
    )

    train_texts = [text for first, second, _ in RTE_TRAIN for text in (first, second)]
    dev_texts = [text for first, second, _ in RTE_DEV for text in (first, second)]
    assert seen == {"train": train_texts, "validation": dev_texts}  # the dev text is held out, labels never read
    saved = AutoTokenizer.from_pretrained(out)
    assert saved.get_vocab() == AutoTokenizer.from_pretrained(base_dir).get_vocab()  # the base's, not a new one
    results = json.loads((out / "all_results.json").read_text())
    assert results["train_budget_minutes"] == 1 and len(trained) == 3
    # the tokens of the batches trained on: packed blocks, no padding, and an epoch's last batch may be short
    assert results["train_tokens"] == sum(tokens for tokens, _ in trained) == sum(size for _, size in trained)
    assert results["train_tokens"] <= 3 * 4 * 16
    train_blocks, dev_blocks = _packed_blocks(tokenizer, train_texts), _packed_blocks(tokenizer, dev_texts)
    card = (out / "README.md").read_text()
    assert f"({train_blocks:,} training and {dev_blocks:,} validation examples)" in card
    assert "Raw text from `glue / rte`" in card
    # the local base model by its folder's name alone: its path means nothing on the Hub
    assert f"continued from a local checkpoint (`{base_dir.name}`) on the unlabelled text of the `rte` task's" in card
    assert_no_local_path(card, tmp_path_factory)
    assert "from scratch" not in card


def test_next_sentence_prediction_on_task_text_reads_each_example_as_a_document(
    rte_dir: Path, base_dir: Path, tmp_path: Path, seen: dict[str, list[str]], trained: list[tuple[int, int]]
) -> None:
    out = tmp_path / "tapt-nsp"
    argv = ["--task_text", "rte", "--data_dir", str(rte_dir), "--model_name_or_path", str(base_dir)]
    argv += ["--objective", "mlm_nsp", "--short_seq_fraction", "0", "--output_dir", str(out), *PRETRAIN_ONE_PROCESS]
    pretraining.main([*argv, "--max_seq_length", "64", "--max_steps", "2"])  # room for the pairs to differ in length

    assert seen["train"] == [text for first, second, _ in RTE_TRAIN for text in (first, second, "")]
    assert seen["validation"] == [text for first, second, _ in RTE_DEV for text in (first, second, "")]
    results = json.loads((out / "all_results.json").read_text())
    assert "eval_nsp_accuracy" in results
    # tokens seen: the pairs' own tokens, not the padding nor max_seq_length per pair
    assert len(trained) == 2 and results["train_tokens"] == sum(tokens for tokens, _ in trained)
    assert results["train_tokens"] < sum(size for _, size in trained) <= 2 * 64 * results["train_effective_batch_size"]
    assert type(AutoModelForPreTraining.from_pretrained(out)).__name__ == "BertScratchForPreTraining"


def test_several_tasks_give_their_texts_together_and_their_dataset_configs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _write_rte(data_dir)
    _write_cola(data_dir)
    argv = ["--task_text", "rte", "cola", "--data_dir", str(data_dir), "--output_dir", str(tmp_path / "o")]
    model_args, data_args, training_args = pretraining.parse_args([*argv, *PRETRAIN_ONE_PROCESS])
    assert (data_args.dataset_name, data_args.dataset_config_name) == ("glue", "rte, cola")
    assert pretraining_arguments.task_text_datasets(data_args) == ["glue"]
    train, validation = pretraining.load_text_splits(data_args, seed=0)
    rte_train = [text for first, second, _ in RTE_TRAIN for text in (first, second)]
    rte_dev = [text for first, second, _ in RTE_DEV for text in (first, second)]
    assert list(train["text"]) == rte_train + COLA_TRAIN  # task after task, labels never read
    assert list(validation["text"]) == rte_dev + COLA_DEV


@pytest.mark.parametrize(
    ("max_eval_samples", "documents", "expected"),
    [
        (2, False, [RTE_DEV[0][0], *COLA_DEV]),  # one text of each task, not RTE's first two
        (12, True, [*RTE_DEV[0][:2], "", *RTE_DEV[1][:2], "", COLA_DEV[0], ""]),  # 6 each: whole documents
        (4, True, [*RTE_DEV[0][:2], "", COLA_DEV[0], ""]),  # RTE's first document is longer than 2: kept whole
    ],
)
def test_max_eval_samples_holds_out_texts_of_every_task(
    tmp_path: Path, max_eval_samples: int, documents: bool, expected: list[str]
) -> None:
    """--max_eval_samples shares the held-out texts among the tasks (the first N of all would be the first task's
    alone), and with NSP's documents a cut never joins one task's half document to the next task's first."""
    data_dir = tmp_path / "data"
    _write_rte(data_dir)
    _write_cola(data_dir)
    argv = ["--task_text", "rte", "cola", "--data_dir", str(data_dir), "--output_dir", str(tmp_path / "o")]
    argv += ["--max_eval_samples", str(max_eval_samples)]
    model_args, data_args, training_args = pretraining.parse_args([*argv, *PRETRAIN_ONE_PROCESS])
    _, validation = pretraining.load_text_splits(data_args, seed=0, documents=documents)
    assert list(validation["text"]) == expected


def test_task_text_without_a_base_model_is_accepted(rte_dir: Path, tmp_path: Path) -> None:
    """Allowed (a new model and a tokenizer trained on the task text), though the recipe continues a model."""
    argv = [
        "--task_text",
        "rte",
        "--data_dir",
        str(rte_dir),
        "--output_dir",
        str(tmp_path / "o"),
        *PRETRAIN_ONE_PROCESS,
    ]
    model_args, data_args, training_args = pretraining.parse_args(argv)
    assert (data_args.dataset_name, data_args.dataset_config_name) == ("glue", "rte")
    train, validation = pretraining.load_text_splits(data_args, seed=0)
    assert len(train) == 2 * len(RTE_TRAIN) and len(validation) == 2 * len(RTE_DEV)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--task_text", "rtee"], f"Unknown --task_text 'rtee'; expected some of {list(TASKS)}."),
        (["--task_text", "rte", "cola", "sts", "mnli2"], "Unknown --task_text 'sts', 'mnli2'; expected some of"),
        (["--task_text", "rte", "cola", "rte"], "--task_text names a task twice: rte cola rte; give each task once."),
        (
            ["--task_text", "rte", "--validation_file", "v.txt"],
            "--validation_file with --task_text needs the text it validates: --train_file or --dataset_name.",
        ),
        (["--task_text", "rte", "--text_column", "body"], "--text_column names the column of --train_file"),
        (
            ["--task_text", "conll2003", "--dataset_name", "wikitext", "--streaming", "true", "--max_steps", "2"],
            "it cannot be combined with --streaming.",
        ),
    ],
)
def test_bad_task_text_arguments_fail_before_anything_is_loaded(
    extra: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{extra} was accepted")

    monkeypatch.setattr(pretraining, "build_trainer", no_training)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(message)):
        pretraining.main([*extra, "--output_dir", str(out), *PRETRAIN_ONE_PROCESS, "--max_steps", "2"])
    assert not out.exists()


def test_task_text_is_added_to_a_named_text(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    """--train_file (or --dataset_name) with --task_text: the file's texts then the tasks' train texts to train on,
    the file's held-out texts then the tasks' eval texts to validate on; the card names both sources."""
    data_dir = _write_rte(tmp_path / "data")
    notes = tmp_path / "notes.txt"
    notes_texts = [f"note number {i} says the {w} is here ." for i, w in enumerate(["cat", "dog", "film"] * 7)]
    notes.write_text("\n".join(notes_texts) + "\n", encoding="utf-8")
    argv = ["--train_file", str(notes), "--task_text", "rte", "--data_dir", str(data_dir)]
    argv += ["--output_dir", str(tmp_path / "o"), *PRETRAIN_ONE_PROCESS]
    model_args, data_args, training_args = pretraining.parse_args(argv)
    assert pretraining_arguments.adds_task_text(data_args) and data_args.dataset_name is None
    train, validation = pretraining.load_text_splits(data_args, seed=0)
    rte_train = [text for first, second, _ in RTE_TRAIN for text in (first, second)]
    rte_dev = [text for first, second, _ in RTE_DEV for text in (first, second)]
    kept = len(train) - len(rte_train)  # the file's first rows train, its last are held out
    assert 0 < kept < len(notes_texts)
    assert list(train["text"]) == notes_texts[:kept] + rte_train
    assert list(validation["text"]) == notes_texts[kept:] + rte_dev
    assert pretraining_report.card_datasets(data_args) == ["glue"]  # a local file is no dataset id

    named = pretraining.parse_args([*argv[2:], "--dataset_name", "wikitext", "--dataset_config_name", "x"])[1]
    assert pretraining_arguments.adds_task_text(named)
    assert pretraining_report.card_datasets(named) == ["wikitext", "glue"]
    alone = pretraining.parse_args(argv[2:])[1]
    assert not pretraining_arguments.adds_task_text(alone) and pretraining_report.card_datasets(alone) == ["glue"]
