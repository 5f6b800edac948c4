"""Fine-tuning: truncation strategies, the task table, bad input raised before training, and an end-to-end run."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertTokenizer,
    pipeline,
)
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging as transformers_logging

import hf_bertscratch
from hf_bertscratch import inference
from hf_bertscratch.finetuning import OrderedEvalTrainer, load_model, main
from hf_bertscratch.finetuning_arguments import ModelArguments
from hf_bertscratch.hub import prepare_upload_folder
from hf_bertscratch.inference import quiet_loading_report
from hf_bertscratch.tasks import CONLL2003_LABELS, TASKS
from hf_bertscratch.tasks.classification import (
    ClassificationShape,
    cross_encoder_activation,
    label_mapping,
    make_text_tokenize_function,
)
from hf_bertscratch.tasks.data import DataArguments, check_data_arguments, load_task_datasets
from hf_bertscratch.tasks.embedding import EmbeddingShape
from hf_bertscratch.tasks.features import FeatureSettings, truncate_ids

from conftest import HangingWrite, assert_no_local_path, record_hub, tiny_config_kwargs, wait_for

POSITIVE = "the movie was great and the acting was wonderful best love".split()
NEGATIVE = "the film was boring and the plot was bad worst hate terrible".split()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write_csv(path: Path, rows: list[tuple], header: tuple[str, ...] = ("text", "label")) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def sentiment_rows(n: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(" ".join(rng.choices(POSITIVE if i % 2 else NEGATIVE, k=rng.randint(3, 30))), i % 2) for i in range(n)]


@pytest.fixture(scope="module")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("data")
    return write_csv(folder / "train.csv", sentiment_rows(48, 0)), write_csv(folder / "dev.csv", sentiment_rows(10, 1))


def run_argv(model_dir: Path, output_dir: Path) -> list[str]:
    """The settings every end-to-end run here shares: a tiny model, two epochs, the CPU, no reporting."""
    return [
        "--model_name_or_path",
        str(model_dir),
        "--output_dir",
        str(output_dir),
        "--max_seq_length",
        "24",
        "--per_device_train_batch_size",
        "8",
        "--per_device_eval_batch_size",
        "4",
        "--num_train_epochs",
        "2",
        "--learning_rate",
        "1e-3",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--use_cpu",
        "true",
    ]


def base_argv(model_dir: Path, train: Path, dev: Path, output_dir: Path) -> list[str]:
    return ["--train_file", str(train), "--validation_file", str(dev), *run_argv(model_dir, output_dir)]


# ------------------------------------------------------------------------------------------------ truncation
@pytest.mark.parametrize(
    "strategy, expected",
    [("head", [0, 1, 2, 3, 4]), ("tail", [5, 6, 7, 8, 9]), ("head+tail", [0, 1, 7, 8, 9])],
)
def test_truncate_ids(strategy: str, expected: list[int]) -> None:
    assert truncate_ids(list(range(10)), 5, strategy, head_tokens=2) == expected
    assert truncate_ids([1, 2], 5, strategy, head_tokens=2) == [1, 2]  # short texts are never cut


def test_head_plus_tail_all_head() -> None:
    assert truncate_ids(list(range(10)), 4, "head+tail", head_tokens=4) == [0, 1, 2, 3]


def test_tokenize_head_plus_tail_keeps_start_and_end(tokenizer: BertTokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    task = check_data_arguments(DataArguments(task="imdb"))
    text = "paris is the capital of france . the cat sat on the mat . i love it !"
    full = tokenizer(text, add_special_tokens=False)["input_ids"]
    tokenize = make_text_tokenize_function(
        tokenizer, task, {0: 0, 1: 1}, max_seq_length=10, strategy="head+tail", head_tokens=3
    )
    # The text is longer than the tokenizer's maximum, but cut here: no "indexing errors" warning from transformers.
    monkeypatch.setattr(tokenizer, "model_max_length", 10)  # a tokenizer every test shares: put back after this one
    tokenizer.deprecation_warnings.pop("sequence-length-is-longer-than-the-specified-maximum", None)  # warned once
    with CaptureLogger(transformers_logging.get_logger("transformers.tokenization_utils_base")) as captured:
        out = tokenize({"text": [text, "the cat"], "label": [1, 0]})
    assert "longer than the specified maximum" not in captured.out
    assert out["input_ids"][0] == [tokenizer.cls_token_id] + full[:3] + full[-5:] + [tokenizer.sep_token_id]
    assert out["input_ids"][1] == tokenizer("the cat")["input_ids"]  # matches the tokenizer's own special tokens
    assert out["labels"] == [1, 0] and out["length"] == [10, 4]
    assert out["attention_mask"][1] == [1, 1, 1, 1] and out["token_type_ids"][1] == [0, 0, 0, 0]


def test_pair_tokenization_uses_both_columns(tokenizer: BertTokenizer) -> None:
    task = check_data_arguments(DataArguments(train_file="x.csv", text_column="a", text_pair_column="b"))
    tokenize = make_text_tokenize_function(tokenizer, task, {0: 0}, 16, "head", 0)
    out = tokenize({"a": ["the cat"], "b": ["the dog"], "label": [0]})
    assert out["input_ids"][0] == tokenizer("the cat", "the dog")["input_ids"]
    assert 1 in out["token_type_ids"][0]


def test_a_missing_text_is_empty_in_a_pair_as_in_a_single_text(tokenizer: BertTokenizer) -> None:
    """An empty csv field (None once read) is an empty text, on either side of a pair as for a single text."""
    task = check_data_arguments(DataArguments(train_file="x.csv", text_column="a", text_pair_column="b"))
    tokenize = make_text_tokenize_function(tokenizer, task, {0: 0}, 16, "head", 0)
    out = tokenize({"a": ["the cat", None], "b": [None, "the dog"], "label": [0, 0]})
    expected = tokenizer(["the cat", ""], ["", "the dog"])["input_ids"]  # [CLS] a [SEP] b [SEP], a side empty
    assert out["input_ids"] == expected and [ids.count(tokenizer.sep_token_id) for ids in expected] == [2, 2]
    single = check_data_arguments(DataArguments(train_file="x.csv", text_column="a"))
    tokenize = make_text_tokenize_function(tokenizer, single, {0: 0}, 16, "head", 0)
    assert tokenize({"a": [None], "label": [0]})["input_ids"] == [tokenizer("")["input_ids"]]
    embedding = EmbeddingShape(replace(task, shape="embedding"), FeatureSettings(), tokenizer, "cosine")
    rows = datasets.Dataset.from_dict({"a": ["the cat", None], "b": [None, "the dog"], "label": [1.0, 0.0]})
    features = embedding.features(rows, training=False)
    assert features["input_ids"][1] == features["pair_input_ids"][0] == tokenizer("")["input_ids"]


def test_texts_cut_to_max_seq_length_are_counted_and_logged_only_when_there_are_some(
    tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """Each split's texts longer than max_seq_length are counted; the line saying they are cut comes only when some
    are (a line that says none is cut tells nothing)."""
    task = check_data_arguments(DataArguments(train_file="x.csv", text_column="a"))
    shape = ClassificationShape(task, FeatureSettings(max_seq_length=6), tokenizer)
    shape.label_map = {0: 0}
    short = datasets.Dataset.from_dict({"a": ["the cat", "the dog"], "label": [0, 0]}, split="validation")
    long = datasets.Dataset.from_dict({"a": ["the cat sat on the mat and the dog", "the dog"], "label": [0, 0]})
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.tasks.classification"):
        shape.features(short, training=False)
        shape.features(long, training=True)
    assert shape.long_texts == {"validation": 0, "train": 1}
    lines = [record.getMessage() for record in caplog.records if "longer than" in record.getMessage()]
    assert lines == ["1 of the 2 train texts are longer than 6 tokens: read cut to them (--truncation head)."]


# ---------------------------------------------------------------------------------------------- task table
def test_task_table_defaults() -> None:
    assert TASKS["sst2"].dataset_config_name == "sst2" and TASKS["imdb"].eval_split == "test"
    task = check_data_arguments(DataArguments(task="sst2", text_column="text"))
    assert (task.train_split, task.eval_split, task.columns["text"], task.columns["label"]) == (
        "train",
        "validation",
        "text",
        "label",
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task": "colaa"}, "colaa"),
        ({"task": "mrcp"}, "Unknown --task 'mrcp'; did you mean 'mrpc'?"),
        ({"task": "foo"}, r"^Unknown --task 'foo'\. Expected one of \['cola', "),
        (
            {"train_file": "x.csv", "task_type": "ner"},
            r"^Unknown --task_type 'ner'\. Expected one of \['classification', ",
        ),
        ({"task": "cola", "task_type": "regression"}, "classification task"),
        ({"task": "conll2003", "text_column": "sentence"}, r"\['text'\] do not apply"),
        ({"task": "stsb", "class_names": "low,high"}, "regression task, which has no classes"),
        (
            {"train_file": "x.csv", "class_names": "pos, pos,neg"},
            r"--class_names pos,pos,neg names \['pos'\] more than once",
        ),
        ({"task": "sst2", "class_names": "good"}, r"^--class_names good names one class; a classifier needs two or"),
        ({"task": "squad", "doc_stride": 128, "max_seq_length": 128}, "doc_stride"),
        ({"task": "imdb", "truncation": "middle"}, "middle"),
        ({"task": "imdb", "truncation": "head+tail", "max_seq_length": 16, "head_tokens": 15}, "head_tokens"),
        ({}, "--task"),
    ],
)
def test_bad_task_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_data_arguments(DataArguments(**kwargs))


# --------------------------------------------------------------------------------- bad input before training
@pytest.mark.parametrize(
    "dev_rows, header, extra, message",
    [
        ([("the cat", 0), ("the dog", 5)], ("text", "label"), [], r"\[5\].*outside the label set"),
        (
            [("the cat", 0), ("the dog", "")],
            ("text", "label"),
            [],
            r"^1 of the 2 examples of the eval split have no "
            r"label in column 'label' \(an empty field or a null; the first is example 1, counting from 0\)",
        ),
        ([("the cat", 0)], ("text", "label"), ["--text_column", "review"], r"Column\(s\) \['review'\]"),
        ([], ("text", "label"), [], "empty"),
    ],
)
def test_bad_data_raises_before_training(
    tmp_path: Path,
    model_dir: Path,
    data_files: tuple[Path, Path],
    dev_rows: list,
    header: tuple,
    extra: list,
    message: str,
) -> None:
    dev = write_csv(tmp_path / "dev.csv", dev_rows, header)
    if not dev_rows:  # an empty csv needs typed columns, else datasets cannot infer them
        dev = tmp_path / "dev.json"
        dev.write_text("", encoding="utf-8")
    output = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        main(base_argv(model_dir, data_files[0], dev, output) + extra)
    assert not any(output.glob("checkpoint-*")) and not (output / "all_results.json").exists()


def test_a_missing_column_names_the_flag_that_picks_it(tmp_path: Path, model_dir: Path) -> None:
    train = write_csv(tmp_path / "train.csv", [("the cat", 0), ("the dog", 1)], ("text", "stars"))
    with pytest.raises(ValueError, match=r"Column\(s\) \['label'\].*'stars'\]: name yours with --label_column\.$"):
        main(base_argv(model_dir, train, train, tmp_path / "out"))


def test_a_tokenizer_larger_than_the_models_vocabulary_is_refused_before_the_data_loads(
    tmp_path: Path, tokenizer: BertTokenizer
) -> None:
    """A model folder whose tokenizer has ids past the model's embedding rows stops in one line naming both sizes,
    before the data is read (the train file named here does not exist), not at the first batch holding such an id."""
    model = tmp_path / "model"
    AutoModelForMaskedLM.from_config(hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(10))).save_pretrained(model)
    tokenizer.save_pretrained(model)
    missing = tmp_path / "missing.csv"
    with pytest.raises(ValueError, match=rf"has {len(tokenizer)} tokens but the model's vocab_size is 10: pass the"):
        main(base_argv(model, missing, missing, tmp_path / "out"))


def test_a_new_head_is_loaded_without_the_load_report_or_a_layer_list(model_dir: Path) -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    library = logging.getLogger("transformers")
    library.addHandler(handler)
    try:
        with quiet_loading_report():
            AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    finally:
        library.removeHandler(handler)
    assert not [record.getMessage()[:80] for record in records if record.levelno >= logging.WARNING]
    assert logging.getLogger("transformers.modeling_utils").filters == []


def test_string_label_outside_class_names(tmp_path: Path, model_dir: Path) -> None:
    train = write_csv(tmp_path / "train.csv", [("the cat", "neg"), ("the dog", "pos")])
    dev = write_csv(tmp_path / "dev.csv", [("the cat", "neutral")])
    with pytest.raises(ValueError, match="neutral"):
        main(base_argv(model_dir, train, dev, tmp_path / "out") + ["--class_names", "neg,pos"])


def test_integer_labels_not_from_zero_are_told_a_way_that_works() -> None:
    """Labels 1..2 are not ids 0..K-1: the error names ways that work, and --class_names of their count does not."""
    labels = datasets.Dataset.from_dict({"stars": [1, 2, 2]})
    raw = datasets.DatasetDict({"train": labels, "eval": labels})
    with pytest.raises(ValueError, match=r"'stars' holds \[1, 2\]: renumber them from 0 .*from 0 to 2 with --class_n"):
        label_mapping(raw, "stars", None)
    with pytest.raises(ValueError, match=r"Label\(s\) \[2\] in the train split .*ids into --class_names, from 0\.$"):
        label_mapping(raw, "stars", ["bad", "good"])
    assert label_mapping(raw, "stars", ["none", "bad", "good"]) == (["none", "bad", "good"], {0: 0, 1: 1, 2: 2})
    renumbered = datasets.Dataset.from_dict({"stars": [0, 1, 1]})
    assert label_mapping(datasets.DatasetDict({"train": renumbered}), "stars", ["bad", "good"])[1] == {0: 0, 1: 1}


def test_boolean_labels_are_classes_of_their_own() -> None:
    """JSON's true and false (an `is_duplicate` column) are two classes named as they read, not labels outside a
    label set of their own names."""
    raw = datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"label": [True, False, True]}),
         "eval": datasets.Dataset.from_dict({"label": [False, True]})}
    )  # fmt: skip
    assert label_mapping(raw, "label", None) == (["False", "True"], {False: 0, True: 1})


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        ("mixed.csv", "text,label\na fine film,pos\na dull film,neg\nso so,1\n"),
        ("mixed.jsonl", '{"text": "a fine film", "label": "pos"}\n{"text": "a dull film", "label": "neg"}\n'
         '{"text": "so so", "label": 1}\n'),
    ],
)  # fmt: skip
def test_labels_mixing_ids_and_names_are_refused_naming_the_first_of_each(tmp_path: Path, name: str, rows: str) -> None:
    """Read as they are, "1" and "pos" would be two classes: the first id and the first name are named with their
    rows, in a csv file (where the id comes as a string) as in a JSON Lines one."""
    from hf_bertscratch.data import load_data_file

    (tmp_path / name).write_text(rows)
    raw = datasets.DatasetDict({"train": load_data_file(tmp_path / name, "train")})
    with pytest.raises(ValueError) as refused:
        label_mapping(raw, "label", None)
    assert str(refused.value) == (
        f"The train split's 'label' column mixes integer ids and label names: {raw['train']['label'][2]!r} (row 3) is "
        "an id, 'pos' (row 1) a name; give every label as a name, or every one as an id from 0."
    )


def prepared_classes(train: list, dev: list | None, caplog: pytest.LogCaptureFixture, **columns: str) -> list[str]:
    """The lines `prepare_labels` logs for a task with these train (and eval) labels."""
    task = check_data_arguments(DataArguments(train_file="x.csv", label_column="sentiment", **columns))
    raw = {"train": datasets.Dataset.from_dict({"sentiment": train})}
    if dev is not None:
        raw["eval"] = datasets.Dataset.from_dict({"sentiment": dev})
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.tasks.features"):
        ClassificationShape(task, FeatureSettings(), tokenizer=None).prepare_labels(datasets.DatasetDict(raw))
    return [f"{record.levelname} {record.getMessage()}" for record in caplog.records]


def test_a_misspelt_train_label_is_a_class_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A label misspelt once in the train file becomes a class of its own: the classes are listed with their train
    counts, and the one so rare that it cannot be learnt, which the eval split lacks too, gets a warning naming it."""
    train = ["neg"] * 50 + ["pos"] * 49 + ["postive"]
    assert prepared_classes(train, ["neg", "pos"] * 5, caplog) == [
        "INFO 3 classes in the train split's 'sentiment' column, with their train examples: neg 50, pos 49, postive 1.",
        "WARNING Class 'postive' has 1 of the 100 train examples and none of the eval split's: too few to learn it "
        "from; a misspelt label in the train file is a class of its own.",
    ]


@pytest.mark.parametrize(
    "train, dev, warning",
    [
        # under 1% of a large train split, though more than 2
        (["a"] * 500 + ["b"] * 497 + ["c"] * 3, ["a", "b", "c"],
         "Class 'c' has 3 of the 1,000 train examples: too few to learn it from; a misspelt label in the train file "
         "is a class of its own."),
        # a class the eval split lacks: the eval scores say nothing of it
        (["a", "b", "c"] * 4, ["a", "b"],
         "Class 'c' has 4 of the 12 train examples and none of the eval split's: the eval scores say nothing of it."),
    ],
)  # fmt: skip
def test_a_rare_class_or_one_the_eval_split_lacks_gets_one_warning(
    caplog: pytest.LogCaptureFixture, train: list, dev: list, warning: str
) -> None:
    assert [line for line in prepared_classes(train, dev, caplog) if line.startswith("WARNING")] == [
        f"WARNING {warning}"
    ]


def test_classes_well_spread_over_both_splits_get_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Integer labels counted by class, a test split without labels ignored, and no warning: every class has enough
    train examples and appears in the eval split."""
    assert prepared_classes([0, 1, 1, 0, 1, 0], [1, 0], caplog) == [
        "INFO 2 classes in the train split's 'sentiment' column, with their train examples: 0 3, 1 3."
    ]
    assert prepared_classes([0, 1] * 3, None, caplog)[-1].startswith("INFO 2 classes")


def test_a_tokenizer_name_that_is_not_there_is_refused_as_it_is_parsed() -> None:
    """Past the front door too: the flag and its value in one line, not transformers' "Repo id must use alphanumeric
    chars" once the model's config has loaded."""
    with pytest.raises(FileNotFoundError, match=re.escape("Tokenizer '../nowhere' (--tokenizer_name) does not exist")):
        ModelArguments(model_name_or_path="m", tokenizer_name="../nowhere")


def resolved(model: Path, **kwargs: object) -> ModelArguments:
    """The model arguments of `model` as `choose_task_defaults` leaves them for a classification task with a small
    model: [CLS] pooling."""
    return ModelArguments(model_name_or_path=str(model), classifier_pooling="cls", **kwargs)


def classes(*names: str) -> ClassificationShape:
    """The classification shape of a task with these classes (as prepare_labels leaves it)."""
    shape = ClassificationShape(TASKS["sst2"], FeatureSettings(), tokenizer=None)
    shape.names = list(names)
    return shape


def test_a_fine_tuned_folder_gives_its_encoder_to_another_task(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Intermediate-task transfer: a regressor's folder handed to a classification task keeps its encoder and drops
    its head (logged) and the CrossEncoder activation it recorded; a folder whose head already has the task's classes
    keeps it; other classes of the same count get a new head."""
    regressor_dir = tmp_path / "regressor"
    regressor = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=1, problem_type="regression", **cross_encoder_activation(torch.nn.Identity)
    )
    assert regressor.config.sentence_transformers == {"activation_fn": "torch.nn.modules.linear.Identity"}
    regressor.save_pretrained(regressor_dir)
    with caplog.at_level("INFO", logger="hf_bertscratch.finetuning"):
        model = load_model(resolved(regressor_dir), classes("neg", "pos"))
    assert model.config.num_labels == 2 and model.config.id2label == {0: "neg", 1: "pos"}
    assert model.config.problem_type == "single_label_classification"  # not the regressor's MSE
    assert model.config.sentence_transformers == {}  # CrossEncoder's default for two outputs, not the regressor's
    batch = AutoTokenizer.from_pretrained(model_dir)(["the cat", "a dog ran"], padding=True, return_tensors="pt")
    loss = model(**batch, labels=torch.tensor([0, 1])).loss
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(model(**batch).logits, torch.tensor([0, 1])))
    assert "its head is dropped" in caplog.text and "BertScratchForSequenceClassification" in caplog.text
    source = regressor.state_dict()
    encoder = [name for name in source if name.startswith("bert.embeddings.") or name.startswith("bert.encoder.")]
    assert encoder and all(torch.equal(model.state_dict()[name], source[name]) for name in encoder)

    classifier_dir = tmp_path / "classifier"
    model.save_pretrained(classifier_dir)
    kept = load_model(resolved(classifier_dir), classes("neg", "pos"))
    assert torch.equal(kept.classifier.weight, model.classifier.weight)
    other = load_model(resolved(classifier_dir), classes("no", "yes"))
    assert not torch.equal(other.classifier.weight, model.classifier.weight)
    assert torch.equal(other.bert.encoder.layers[0].mlp.fc_in.weight, model.bert.encoder.layers[0].mlp.fc_in.weight)


def test_segment_embeddings_can_start_as_the_first_texts(model_dir: Path) -> None:
    model = load_model(resolved(model_dir, segment_embeddings="first"), classes("a", "b"))
    segments = model.bert.embeddings.token_type_embeddings.weight
    kept = load_model(resolved(model_dir), classes("a", "b"))
    assert torch.equal(segments[1], segments[0]) and torch.equal(
        segments[0], kept.bert.embeddings.token_type_embeddings.weight[0]
    )
    assert not torch.equal(kept.bert.embeddings.token_type_embeddings.weight[1], segments[0])


@pytest.mark.parametrize("progress_bar", [True, False])
def test_the_terminal_shows_a_tenth_of_the_logged_losses_and_every_evaluation(
    tmp_path: Path,
    model_dir: Path,
    data_files: tuple[Path, Path],
    capsys: pytest.CaptureFixture,
    progress_bar: bool,
) -> None:
    """48 steps log their loss at each step (--logging_steps 0.02): trainer_state.json keeps all 48 for the loss
    curve, the terminal one line per tenth of the run (each the mean of the logged losses since the line before),
    beside each epoch's evaluation and the final summary, as transformers' defaults show a short run: few lines."""
    output = tmp_path / "run"
    argv = base_argv(model_dir, *data_files, output) + ["--per_device_train_batch_size", "2"]
    if progress_bar:
        argv += ["--disable_tqdm", "false"]
    main(argv)
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{'")]
    state = json.loads((output / "trainer_state.json").read_text())
    logged = [log for log in state["log_history"] if "loss" in log]
    assert [log["step"] for log in logged] == list(range(1, 49))
    losses = [line for line in printed if "'loss'" in line]
    assert len(losses) == 10, printed
    first = sum(log["loss"] for log in logged[:5]) / 5  # steps 1-5: the first tenth of 48 steps
    assert losses[0].startswith(f"{{'loss': '{first:.4g}'"), (losses[0], first)
    assert sum("'eval_loss'" in line for line in printed) == 2 and "'train_runtime'" in printed[-1]


def test_a_resumed_run_shows_its_loss_lines_at_the_same_tenths_as_one_never_stopped(
    capsys: pytest.CaptureFixture,
) -> None:
    """A run resumed at step 30 of 100 shows a loss line at steps 40, 50, ... 100, each the mean of the losses logged
    since the tenth before, as the run never stopped would: not a line at its first logged step."""
    from transformers import PrinterCallback, TrainerControl, TrainerState, TrainingArguments

    from hf_bertscratch.run_folder import FewerLossLines

    printer = type("FewerLossLinesPrinterCallback", (FewerLossLines, PrinterCallback), {})()  # show_fewer_loss_lines'
    args = TrainingArguments(output_dir="unused", report_to="none")
    state, control = TrainerState(global_step=30, max_steps=100), TrainerControl()
    printer.on_train_begin(args, state, control)
    for step in range(31, 101):
        state.global_step = step
        printer.on_log(args, state, control, logs={"loss": float(step)})
    printed = [line for line in capsys.readouterr().out.splitlines() if "'loss'" in line]
    assert len(printed) == 7, printed
    assert printed[0] == "{'loss': '35.5'}" and printed[-1] == "{'loss': '95.5'}", printed  # steps 31-40, 91-100


def test_validation_split_holds_out_train_examples_and_scores_the_eval_split_once(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    output = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        main(base_argv(model_dir, *data_files, output) + ["--validation_split_percentage", "25"])
    results = json.loads((output / "all_results.json").read_text())
    # 12 of the 48 train examples choose the checkpoint; the 10 dev examples are scored once, as the test split.
    assert (results["eval_samples"], results["test_samples"]) == (12, 10)
    assert set(results["long_texts"]) == {"train", "held_out", "validation"}  # one count per split
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) == 2  # chosen per epoch on the held-out part
    assert not any("test_accuracy" in log for log in state["log_history"])
    # Examples held out of train are no split of the data: the card's model-index names none for them.
    card = ModelCard.load(output / "README.md")
    assert {r.metric_name: r.dataset_split for r in card.data.eval_results}["eval_accuracy"] is None
    assert _scored_on(output) == (
        "The `eval_*` scores are on 12 train examples held out (25% of the train examples), which checkpoints were "
        "chosen on; the `test_*` scores are on the 10 examples of the validation split, which the chosen model met "
        "once, at the end."
    )
    # `push` of the folder without its card writes one from all_results.json that says the same.
    (output / "README.md").unlink()
    upload = prepare_upload_folder(output, tmp_path / "upload")
    assert _scored_on(upload) == _scored_on_text(card.content)
    with data_files[1].open() as handle:
        dev_labels = [int(row["label"]) for row in csv.DictReader(handle)]
    predictions = AutoModelForSequenceClassification.from_pretrained(output).eval()
    tokenizer = AutoTokenizer.from_pretrained(output)
    with data_files[1].open() as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    with torch.no_grad():
        logits = predictions(
            **tokenizer(texts, padding=True, truncation=True, max_length=24, return_tensors="pt")
        ).logits
    assert results["test_accuracy"] == pytest.approx(np.mean(logits.argmax(-1).numpy() == np.array(dev_labels)))
    # The no-learning answers are scored on the test split too, and the log sets the test score beside them.
    assert {"test_baseline_constant", "test_baseline_bag_of_words", "test_baseline_bag_of_word_pairs"} <= set(results)
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from hf_bertscratch.tasks.data import hold_out_validation

    loaded = datasets.load_dataset("csv", data_files={"train": str(data_files[0]), "eval": str(data_files[1])})
    train = hold_out_validation(loaded, 25)["train"]  # what the run trained on: the bag of words is fitted on it
    vectorizer = TfidfVectorizer(sublinear_tf=True, min_df=2)
    fitted = LogisticRegression(C=4.0, max_iter=1000).fit(vectorizer.fit_transform(train["text"]), train["label"])
    expected = np.mean(fitted.predict(vectorizer.transform(texts)) == np.array(dev_labels))
    assert results["test_baseline_bag_of_words"] == pytest.approx(expected)
    assert any(
        record.getMessage().startswith("test_accuracy") and "bag of words" in record.getMessage()
        for record in caplog.records
    )


def test_hold_out_validation_draws_the_same_train_examples_every_time() -> None:
    from hf_bertscratch.tasks.data import hold_out_validation

    splits = datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"i": list(range(40))}), "eval": datasets.Dataset.from_dict({"i": [-1]})}
    )
    held = hold_out_validation(splits, 10)
    assert (len(held["train"]), len(held["eval"]), list(held["test"]["i"])) == (36, 4, [-1])
    assert held["eval"].split == "held_out"  # told apart from the train split in logs and records
    assert sorted([*held["train"]["i"], *held["eval"]["i"]]) == list(range(40))  # a partition of the train split
    assert list(hold_out_validation(splits, 10)["eval"]["i"]) == list(held["eval"]["i"])  # one draw, whatever the seed
    with pytest.raises(ValueError, match="has an eval and a test split"):
        hold_out_validation(held, 10)
    alone = hold_out_validation(datasets.DatasetDict({"train": splits["train"]}), 10)  # a train file alone
    assert (set(alone), list(alone["eval"]["i"])) == ({"train", "eval"}, list(held["eval"]["i"]))
    with pytest.raises(ValueError, match="validation_split_percentage"):
        DataArguments(task="imdb", validation_split_percentage=100)


def test_a_train_file_alone_is_evaluated_on_the_examples_it_holds_out(tmp_path: Path) -> None:
    """--validation_split_percentage with only --train_file: the held-out examples are the eval split, no test."""
    from hf_bertscratch.tasks.data import check_data_arguments, load_task_datasets

    rows = [(f"text number {i}", i % 2) for i in range(20)]
    args = DataArguments(train_file=str(write_csv(tmp_path / "train.csv", rows)), validation_split_percentage=25)
    splits = load_task_datasets(args, check_data_arguments(args))
    assert {role: len(split) for role, split in splits.items()} == {"train": 15, "eval": 5}


def test_a_conll_file_without_task_type_is_named_for_its_layout_after_loading_too(tmp_path: Path) -> None:
    """Past the front door (the Python API, --debug), a CoNLL text file read as a classification task's rows is
    named as the front door names it, with the --task_type that reads it."""
    from hf_bertscratch.tasks.data import check_data_arguments, load_task_datasets

    train = tmp_path / "ner.txt"
    train.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    args = DataArguments(train_file=str(train), validation_file=str(train))
    with pytest.raises(ValueError, match=r"\(--train_file\) looks like a CoNLL file: add --task_type token-classif"):
        load_task_datasets(args, check_data_arguments(args))


def _scored_on(output: Path) -> str:
    """What the model card of the run in `output` says, under its results, the scores were measured on."""
    return _scored_on_text((output / "README.md").read_text(encoding="utf-8"))


def _scored_on_text(text: str) -> str:
    """What the model card `text` says, under its results, the scores were measured on."""
    results = text.split("## Evaluation results", 1)[1].split("## Limitations", 1)[0]
    return " ".join(results.strip().split("\n\n")[-1].split())


def test_a_test_file_without_a_validation_file_is_scored_once_never_chosen_on(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """--train_file and a labelled --test_file, no --validation_file: checkpoints are chosen on 5% of the train
    examples held out (2 of 48), and the 10 test examples are scored once, with the chosen model, at the end."""
    output = tmp_path / "run"
    files = ["--train_file", str(data_files[0]), "--test_file", str(data_files[1])]
    with caplog.at_level(logging.INFO):
        main(files + run_argv(model_dir, output))
    results = json.loads((output / "all_results.json").read_text())
    assert (results["eval_samples"], results["test_samples"]) == (2, 10)
    assert "test_accuracy" in results and "test_baseline_constant" in results
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) == 2  # per epoch, on the held-out examples
    assert not any(key.startswith("test_") for log in state["log_history"] for key in log)
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("No validation split")] == [
        "No validation split: checkpoints are chosen on 2 train examples held out (5%, split held_out), not on the "
        "10 examples of the test split, which the chosen model meets once, at the end."
    ]
    assert _scored_on(output) == (
        "The `eval_*` scores are on 2 train examples held out (5% of the train examples), which checkpoints were "
        "chosen on; the `test_*` scores are on the 10 examples of the test split, which the chosen model met once, "
        "at the end."
    )


def test_a_train_file_alone_is_chosen_on_and_scored_on_train_held_out(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--train_file alone, no split flags: 5% of its examples (5 of 100) are held out, chosen on every epoch and
    reported as the eval split; there is no test split."""
    output = tmp_path / "run"
    train = write_csv(tmp_path / "train.csv", sentiment_rows(100, 0))
    with caplog.at_level(logging.INFO):
        main(["--train_file", str(train)] + run_argv(model_dir, output))
    results = json.loads((output / "all_results.json").read_text())
    assert (results["train_samples"], results["eval_samples"]) == (95, 5) and "eval_accuracy" in results
    assert not any(key.startswith("test_") for key in results) and not (output / "test_predictions.csv").exists()
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) == 2  # per epoch, on the held-out examples
    assert "baseline_constant" in results  # reported beside its no-learning baselines, as any eval split
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("No validation split")] == [
        "No validation split: checkpoints are chosen on 5 train examples held out (5%, split held_out), which are the "
        "eval split scored and reported; there is no test split."
    ]
    assert _scored_on(output) == (
        "The `eval_*` scores are on 5 train examples held out (5% of the train examples), which checkpoints were "
        "chosen on."
    )


def test_a_dataset_with_its_own_labelled_test_split_scores_it_once_at_the_end(tmp_path: Path, model_dir: Path) -> None:
    """--dataset_name of a dataset saved to disk with labelled train, validation and test splits, no split flags:
    checkpoints are chosen on the validation split and the test split is scored once, at the end, with its
    no-learning baselines and test_predictions.csv, as a --test_file is."""
    folder = tmp_path / "own"
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict({"text": [t for t, _ in rows], "label": [y for _, y in rows]})
            for split, rows in (
                ("train", sentiment_rows(48, 0)), ("validation", sentiment_rows(10, 1)), ("test", sentiment_rows(6, 2))
            )
        }
    ).save_to_disk(str(folder))  # fmt: skip
    output = tmp_path / "run"
    main(["--dataset_name", str(folder)] + run_argv(model_dir, output))
    results = json.loads((output / "all_results.json").read_text())
    assert (results["eval_samples"], results["test_samples"]) == (10, 6)
    assert "test_accuracy" in results and "test_baseline_constant" in results
    assert len(read_rows(output / "test_predictions.csv")) == 6
    state = json.loads((output / "trainer_state.json").read_text())
    assert not any(key.startswith("test_") for log in state["log_history"] for key in log)  # never chosen on
    assert _scored_on(output) == (
        "The `eval_*` scores are on the 10 examples of the validation split, which checkpoints were chosen on; the "
        "`test_*` scores are on the 6 examples of the test split, which the chosen model met once, at the end."
    )


def test_eval_split_test_scores_the_test_file_once_and_says_it_was_chosen_on(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """--train_file, a labelled --test_file and --eval_split test: checkpoints are chosen on the test file, which is
    scored once, as the eval split (as a dataset's test split that --eval_split names is), and the record and the
    last log lines say that the scores reported are those of the split the checkpoints were chosen on."""
    output = tmp_path / "run"
    files = ["--train_file", str(data_files[0]), "--test_file", str(data_files[1]), "--eval_split", "test"]
    with caplog.at_level(logging.INFO):
        main(files + run_argv(model_dir, output))
    results = json.loads((output / "all_results.json").read_text())
    assert results["eval_samples"] == 10 and "eval_accuracy" in results
    assert not any(key.startswith("test_") for key in results)  # scored once: no second score of the same split
    assert results["checkpoints_chosen_on_test_split"] is True
    assert not (output / "test_predictions.csv").exists()
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) == 2  # chosen per epoch, on the test file
    reported = [r.getMessage() for r in caplog.records if r.getMessage().startswith("eval_accuracy")]
    assert len(reported) == 1 and reported[0].startswith(
        f"eval_accuracy {results['eval_accuracy']:.4f} (10 eval examples: the test split, which checkpoints were "
        "chosen on)"
    ), reported
    assert _scored_on(output) == (
        "The `eval_*` scores are on the 10 examples of the test split, which checkpoints were chosen on: not on "
        "examples the choice never saw."
    )


def test_task_defaults_fill_what_the_command_line_left_unset(tmp_path: Path) -> None:
    from dataclasses import replace

    from hf_bertscratch.finetuning_arguments import FinetuneTrainingArguments, choose_task_defaults
    from hf_bertscratch.tasks import SHAPE_DEFAULTS, TASK_DEFAULTS, finetune_defaults

    squad = DataArguments(task="squad")
    assert check_data_arguments(squad).shape == "question-answering" and squad.max_seq_length == 384
    assert DataArguments(task="sst2").max_seq_length == TASK_DEFAULTS["sst2"].max_seq_length  # resolved when made
    assert DataArguments(task="sst2", max_seq_length=32).max_seq_length == 32
    sst2 = DataArguments(task="sst2", truncation="tail")
    assert sst2.chosen_defaults == [f"max_seq_length {TASK_DEFAULTS['sst2'].max_seq_length}"]  # logged with the rest
    imdb = DataArguments(task="imdb")
    assert (imdb.max_seq_length, imdb.truncation, imdb.head_tokens) == (512, "head+tail", 128)  # Sun et al.'s cut
    assert imdb.chosen_defaults == [
        "max_seq_length 512", "truncation head+tail", "head_tokens 128", "validation_split_percentage 5"
    ]  # fmt: skip
    # with a test file, whether a share of train is held out waits for the data's splits (`load_task_datasets`)
    assert DataArguments(task="imdb", test_file="t.csv").validation_split_percentage is None
    assert DataArguments(task="sst2").validation_split_percentage == 0  # a task with a dev split holds nothing out
    short = DataArguments(task="imdb", max_seq_length=64)  # a shorter length keeps a quarter of it from the start
    assert (short.truncation, short.head_tokens) == ("head+tail", 16)
    assert DataArguments(task="imdb", head_tokens=100).head_tokens == 100
    stsb = check_data_arguments(DataArguments(task="stsb"))
    defaults = finetune_defaults(stsb, "stsb")
    assert defaults == replace(SHAPE_DEFAULTS["regression"], classifier_pooling="segments", head_init="probe")
    assert finetune_defaults(check_data_arguments(DataArguments(task="mrpc")), "mrpc").classifier_pooling == "segments"
    assert finetune_defaults(check_data_arguments(DataArguments(task="cola")), "cola").classifier_pooling == "cls"
    for hidden_size, expected in ((128, defaults), (768, finetune_defaults(stsb, "stsb", 768))):
        model, args = ModelArguments(model_name_or_path="m"), FinetuneTrainingArguments(output_dir=str(tmp_path))
        config = hf_bertscratch.BertScratchConfig(hidden_size=hidden_size, num_attention_heads=2)
        choose_task_defaults(model, DataArguments(task="stsb"), args, config)  # "auto" and unset: resolved once
        assert (model.classifier_pooling, model.head_init) == (expected.classifier_pooling, expected.head_init)
        assert (args.learning_rate, args.num_train_epochs) == (expected.learning_rate_for(hidden_size), expected.epochs)
    assert (expected.classifier_pooling, expected.head_init, expected.epochs) == ("cls", "random", 3)  # BERT's recipe
    model = ModelArguments(model_name_or_path="m", classifier_pooling="mean", head_init="random")
    given = FinetuneTrainingArguments(output_dir=str(tmp_path), learning_rate=1e-5, num_train_epochs=2)
    config = hf_bertscratch.BertScratchConfig(hidden_size=128, num_attention_heads=2)
    choose_task_defaults(model, DataArguments(task="stsb"), given, config)
    assert (model.classifier_pooling, model.head_init, given.learning_rate, given.num_train_epochs) == (
        "mean", "random", 1e-5, 2
    )  # fmt: skip
    config.max_position_embeddings = 64  # one check, one message, before any data loads
    with pytest.raises(ValueError, match=r"^--max_seq_length 128 exceeds the model's max_position_embeddings 64: use "):
        choose_task_defaults(model, DataArguments(task="stsb", max_seq_length=128), given, config)
    chosen = DataArguments(task="stsb")  # a length the user never gave is cut to the model's positions, and said
    choose_task_defaults(model, chosen, given, config)
    assert chosen.max_seq_length == 64
    assert "max_seq_length 64 (the model's positions; the task's default is 128)" in chosen.chosen_defaults
    squad = DataArguments(task="squad")  # 384 by default, its windows overlapping by 128: both follow the model
    assert (squad.max_seq_length, squad.doc_stride) == (384, 128)
    choose_task_defaults(model, squad, given, config)
    assert (squad.max_seq_length, squad.doc_stride) == (64, 21)
    assert {"max_seq_length 64 (the model's positions; the task's default is 384)", "doc_stride 21"} <= set(
        squad.chosen_defaults
    )
    stride = DataArguments(task="squad", doc_stride=100)  # given: kept, and refused where it no longer fits
    with pytest.raises(ValueError, match=r"--doc_stride must be in \[1, max_seq_length 64\), got 100"):
        choose_task_defaults(model, stride, given, config)
    assert FinetuneTrainingArguments(output_dir=str(tmp_path)).warmup_steps == 0.1  # transformers 5's warm-up field


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--save_strategy", "best"],
            "--save_strategy best saves a checkpoint where an evaluation scores best, and --eval_strategy no evaluates "
            "none: evaluate (--eval_strategy epoch or steps), or save on a schedule (--save_strategy epoch or steps).",
        ),
        (
            ["--save_strategy", "epoch"],
            "--load_best_model_at_end (on by default) reloads the checkpoint an evaluation scored best, and "
            "--eval_strategy no evaluates none: pass --load_best_model_at_end false to keep the --save_strategy epoch "
            "checkpoints and end with the last model, or evaluate (--eval_strategy epoch).",
        ),
    ],
)
def test_what_needs_evaluations_beside_eval_strategy_no_is_refused_naming_both_flags(
    tmp_path: Path, flags: list[str], line: str
) -> None:
    """--save_strategy best would save nothing, silently; checkpoints to choose the best of, with nothing evaluated,
    fail in transformers' words as if --load_best_model_at_end had been given: one line names both flags instead.
    Without checkpoints, or with --load_best_model_at_end false, the run goes on."""
    from hf_bertscratch.finetuning_arguments import parse_args

    base = ["--model_name_or_path", "unused", "--task", "sst2", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(ValueError) as refused:
        parse_args([*base, "--eval_strategy", "no", *flags])
    assert str(refused.value) == line
    kept = parse_args([*base, "--eval_strategy", "no", "--save_strategy", "epoch", "--load_best_model_at_end", "false"])
    assert (kept[2].save_strategy, kept[2].load_best_model_at_end) == ("epoch", False)


@pytest.mark.parametrize(
    "flags, strategy, steps",
    [
        (["--eval_strategy", "steps"], "steps", 0.02),  # eval_steps unset: transformers' logging_steps
        (["--eval_strategy", "steps", "--eval_steps", "50"], "steps", 50),
        (["--eval_strategy", "steps", "--save_strategy", "steps", "--eval_steps", "50"], "steps", 50),
        (["--eval_strategy", "steps", "--eval_steps", "50", "--save_steps", "100"], "steps", 100),
        (["--eval_strategy", "no"], "no", 500),
        ([], "epoch", 500),
    ],
)
def test_checkpoints_follow_the_evaluations_unless_told(
    tmp_path: Path, flags: list[str], strategy: str, steps: float
) -> None:
    """The best checkpoint is chosen among evaluated ones, so --eval_strategy steps (with or without --eval_steps)
    saves where it evaluates, as run_glue's users pass it, instead of failing on a save strategy left at 'epoch' or
    save_steps 500 beside a fraction; a --save_strategy or --save_steps given is kept."""
    from hf_bertscratch.finetuning_arguments import parse_args

    base = ["--model_name_or_path", "unused", "--task", "sst2", "--output_dir", str(tmp_path / "out")]
    training_args = parse_args(base + flags)[2]
    assert (training_args.save_strategy, training_args.save_steps) == (strategy, steps)
    assert training_args.load_best_model_at_end


def test_a_metric_for_best_model_the_task_does_not_report_is_refused_as_parsed(tmp_path: Path) -> None:
    """A misspelt --metric_for_best_model fails as the flags are parsed, naming the metrics the task reports, rather
    than at the first evaluation after an epoch of training; each shape's table is what its metrics return."""
    from hf_bertscratch.finetuning_arguments import SHAPE_METRICS, parse_args
    from hf_bertscratch.metrics import ClassificationMetrics, RegressionMetrics, load_metric

    base = ["--model_name_or_path", "unused", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(ValueError, match=r"^--metric_for_best_model 'acuracy' is not a metric a classification task "
                       r"reports; did you mean 'accuracy'\? Expected one of \['loss', 'accuracy', "):  # fmt: skip
        parse_args([*base, "--task", "sst2", "--metric_for_best_model", "acuracy"])
    with pytest.raises(ValueError, match=r"'spearman' is not a metric a regression task reports; did you mean 'spe"):
        parse_args([*base, "--task", "stsb", "--metric_for_best_model", "spearman"])
    for task, metric in (("sst2", "eval_f1"), ("conll2003", "PER_f1"), ("squad", "exact_match"), ("stsb", "mse")):
        assert parse_args([*base, "--task", task, "--metric_for_best_model", metric])[2].metric_for_best_model
    reported = {
        "classification": ClassificationMetrics(2, pairs=True).compute([0, 1, 1], [0, 1, 0]),
        "regression": RegressionMetrics().compute([0.1, 0.5, 0.9], [0.0, 1.0, 0.5]),
        "question-answering": load_metric("squad").compute(
            predictions=[{"id": "q", "prediction_text": "a"}],
            references=[{"id": "q", "answers": {"text": ["a"], "answer_start": [0]}}],
        ),
    }
    for shape, metrics in reported.items():
        assert set(metrics) == set(SHAPE_METRICS[shape]), shape
    assert SHAPE_METRICS["embedding"] == SHAPE_METRICS["regression"]  # its metric is RegressionMetrics
    seqeval = load_metric("seqeval").compute(predictions=[["B-PER", "O"]], references=[["B-PER", "O"]])
    assert {key for key in seqeval if key.startswith("overall_")} == set(SHAPE_METRICS["token-classification"])


@pytest.mark.parametrize("task", ["sst2", "cola", "mrpc", "stsb", "conll2003", "squad"])
def test_parsing_picks_the_tasks_main_metric_for_the_best_checkpoint(tmp_path: Path, task: str) -> None:
    """--metric_for_best_model auto (the default) is the task's main metric once the flags are parsed (the parser hands
    the training arguments the data arguments), from flags and from a .json file alike; a metric given is kept."""
    from hf_bertscratch.finetuning_arguments import AUTO_METRIC, FinetuneTrainingArguments, parse_args

    flags = {"model_name_or_path": "unused", "task": task, "output_dir": str(tmp_path / "out")}
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps(flags))
    given = [item for name, value in flags.items() for item in (f"--{name}", value)]
    for argv in (given, [str(arguments)]):
        _, _, training = parse_args(argv)
        assert (training.metric_for_best_model, training.greater_is_better) == (TASKS[task].main_metric, True)
    _, _, training = parse_args([*given, "--metric_for_best_model", "loss"])
    assert (training.metric_for_best_model, training.greater_is_better) == ("loss", False)
    assert FinetuneTrainingArguments(output_dir=str(tmp_path)).metric_for_best_model == AUTO_METRIC  # made alone


@pytest.mark.parametrize("flags", [{"avx2", "avx512f", "avx512_bf16"}, {"avx2", "fma"}])
def test_finetuning_trains_in_fp32_unless_told_and_takes_bf16_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: set
) -> None:
    """fp32 by default on any CPU (a run's scores are the saved model's at fp32 inference); --precision auto is bf16
    on a CPU with native bf16 (AVX512_BF16 here) only; bf16 asked for on a CPU, as --precision or transformers' --bf16,
    trains on the CPU (transformers refuses --bf16 without --use_cpu)."""
    from hf_bertscratch import hardware
    from hf_bertscratch.finetuning_arguments import parse_args

    monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
    given = ["--model_name_or_path", "unused", "--task", "sst2", "--output_dir", str(tmp_path / "out")]
    _, _, default = parse_args(given)
    assert not (default.bf16 or default.fp16)
    if not torch.cuda.is_available():
        _, _, auto = parse_args([*given, "--precision", "auto"])
        assert auto.bf16 == auto.use_cpu == ("avx512_bf16" in flags)
        for asked in (["--precision", "bf16"], ["--bf16", "true"]):
            _, _, bf16 = parse_args([*given, *asked])
            assert bf16.bf16 and bf16.use_cpu and not bf16.fp16
    with pytest.raises(ValueError, match="precision must be one of .*got 'half'"):
        parse_args([*given, "--precision", "half"])


@pytest.mark.parametrize("asked, trains", [(["--precision", "auto"], "bf16"), ([], "fp32")])
def test_accelerate_launchs_mixed_precision_is_the_precision_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asked: list[str], trains: str
) -> None:
    """`accelerate launch` with a config of mixed_precision bf16 (scripts/configs/ddp.yaml): --precision auto trains
    at the launch's bf16, and fine-tuning's default, fp32, at fp32, TrainingArguments' mixed precision and the run's
    own record (`bf16`, `fp16`: all_results.json's precision) agreeing either way."""
    from hf_bertscratch import hardware
    from hf_bertscratch.finetuning_arguments import parse_args

    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "fma"})  # no native bf16: auto alone is fp32
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    given = ["--model_name_or_path", "unused", "--task", "sst2", "--output_dir", str(tmp_path / "out"), *asked]
    _, _, training = parse_args(given)
    assert hardware.precision_name(training.bf16, training.fp16) == trains
    assert training.mixed_precision == {"bf16": "bf16", "fp32": "no"}[trains]


def test_bf16_finetuning_trains_under_cpu_autocast_and_records_it(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hf_bertscratch.modeling_bertscratch import BertScratchEncoder

    seen = []
    real_forward = BertScratchEncoder.forward

    def recorded_forward(self, *args, **kwargs):  # inside the model's forward, which accelerate runs under autocast
        seen.append((self.training, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(BertScratchEncoder, "forward", recorded_forward)
    output = tmp_path / "run"
    main(base_argv(model_dir, *data_files, output) + ["--precision", "bf16", "--num_train_epochs", "1"])
    training = [(enabled, dtype) for is_training, enabled, dtype in seen if is_training]
    assert training and all(step == (True, torch.bfloat16) for step in training)
    results = json.loads((output / "all_results.json").read_text())
    assert results["precision"] == "bf16" and 0.0 <= results["eval_accuracy"] <= 1.0


def test_init_from_scratch_ignores_pretrained_weights(model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    pretrained = load_model(resolved(model_dir), classes("a", "b"))
    with caplog.at_level(logging.INFO):
        scratch = load_model(resolved(model_dir, init_from_scratch=True), classes("a", "b"))
    assert "Starting from random weights (--init_from_scratch)" in caplog.text  # the log says what the card says
    assert pretrained.config.to_dict()["hidden_size"] == scratch.config.to_dict()["hidden_size"]
    name = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(pretrained.state_dict()[name], scratch.state_dict()[name])


# -------------------------------------------------------------------------------------------------- end to end
def test_finetune_end_to_end(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "run"
    passes = []
    real_loop = OrderedEvalTrainer.evaluation_loop

    def counted_loop(self, *args, **kwargs):
        passes.append(self.state.global_step)
        return real_loop(self, *args, **kwargs)

    monkeypatch.setattr(OrderedEvalTrainer, "evaluation_loop", counted_loop)
    main(base_argv(model_dir, *data_files, output) + ["--truncation", "head+tail", "--head_tokens", "6"])
    assert passes == [6, 12]  # one pass per epoch; the best checkpoint's predictions are not made again at the end

    results = json.loads((output / "all_results.json").read_text())
    assert results["precision"] == "fp32"  # fine-tuning's default, whatever the CPU
    chosen = hf_bertscratch.cpu_matmul.choice()  # the GEMM path evaluation ran on, as this process chose it
    assert results["cpu_gemm_path"] == {"fp32": chosen.fp32, "bf16": chosen.bf16}
    with (output / "predictions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    with data_files[1].open() as handle:
        dev = list(csv.DictReader(handle))
    assert [r["text"] for r in rows] == [d["text"] for d in dev]  # one row per eval example, in order
    assert [r["label"] for r in rows] == [d["label"] for d in dev]
    accuracy = sum(r["label"] == r["prediction"] for r in rows) / len(rows)
    assert results["eval_accuracy"] == pytest.approx(accuracy)
    train_labels = [r["label"] for r in csv.DictReader(data_files[0].open())]
    commonest = max(["0", "1"], key=lambda c: (train_labels.count(c), c == "0"))  # ties go to the first class
    assert results["baseline_constant"] == pytest.approx(sum(d["label"] == commonest for d in dev) / len(dev))
    # The bags of words: scikit-learn's TF-IDF + logistic regression fitted on the train texts, scored on dev.
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    train = list(csv.DictReader(data_files[0].open()))
    for ngrams, key in (((1, 1), "baseline_bag_of_words"), ((1, 2), "baseline_bag_of_word_pairs")):
        vectorizer = TfidfVectorizer(ngram_range=ngrams, sublinear_tf=True, min_df=2)
        fitted = LogisticRegression(C=4.0, max_iter=1000).fit(
            vectorizer.fit_transform([r["text"] for r in train]), [int(r["label"]) for r in train]
        )
        predicted = fitted.predict(vectorizer.transform([d["text"] for d in dev]))
        assert results[key] == pytest.approx(np.mean(predicted == np.array([int(d["label"]) for d in dev])))
    # How many texts were longer than max_seq_length, and the cut the saved classifier applies at inference.
    assert set(results["long_texts"]) == {"train", "validation"}
    config = AutoConfig.from_pretrained(output)
    assert (config.long_text_max_length, config.long_text_truncation, config.long_text_head_tokens) == (
        results["max_seq_length"],
        "head+tail",
        6,
    )
    # The saved tokenizer's limit is the model's positions (the starting one set none), not --max_seq_length.
    assert AutoTokenizer.from_pretrained(output).model_max_length == config.max_position_embeddings
    # A pipeline handed a text longer than the model's positions (64) classifies it as cut in fine-tuning.
    long_text = " ".join(POSITIVE * 40)
    classify = pipeline("text-classification", model=str(output))
    reloaded = AutoModelForSequenceClassification.from_pretrained(output).eval()
    pieces = classify.tokenizer(long_text, add_special_tokens=False)["input_ids"]
    assert len(pieces) > reloaded.config.max_position_embeddings
    cut = [classify.tokenizer.cls_token_id, *truncate_ids(pieces, 22, "head+tail", 6), classify.tokenizer.sep_token_id]
    with torch.no_grad():
        expected = torch.softmax(reloaded(input_ids=torch.tensor([cut])).logits, -1)[0]
    # bertscratch classify gives the same answer, without transformers' warning that the text "will result in
    # indexing errors" (it does not: the model cuts it), which the plain pipeline's tokenizer prints.
    with CaptureLogger(transformers_logging.get_logger("transformers.tokenization_utils_base")) as captured:
        answers = (inference.classify(str(output), long_text)[0], classify(long_text)[0])
        AutoTokenizer.from_pretrained(output)(long_text)  # a fresh tokenizer of the folder warns: the one line
    assert captured.out.count("will result in indexing errors") == 1
    for answer in answers:
        assert answer["score"] == pytest.approx(float(expected.max()), abs=1e-5)
        assert answer["label"] == reloaded.config.id2label[int(expected.argmax())]
    assert all(abs(float(r["p_0"]) + float(r["p_1"]) - 1) < 1e-4 for r in rows)
    assert results["global_step"] == 12 and results["truncation"] == "head+tail"
    for name in ("confusion_matrix.png", "loss_curve.png", "model.safetensors", "config.json"):
        assert (output / name).is_file(), name
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) >= 2  # evaluated every epoch
    assert state["best_model_checkpoint"] is not None
    reloaded = AutoModelForSequenceClassification.from_pretrained(output)
    assert reloaded.config.num_labels == 2


def test_max_eval_samples_caps_the_test_split_too(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path]
) -> None:
    output = tmp_path / "run"
    subsets = ["--max_eval_samples", "4", "--max_train_samples", "40"]
    main(base_argv(model_dir, *data_files, output) + ["--test_file", str(data_files[1]), *subsets])
    results = json.loads((output / "all_results.json").read_text())
    assert (results["eval_samples"], results["test_samples"]) == (4, 4) and "test_accuracy" in results
    test_rows = read_rows(output / "test_predictions.csv")  # the test split's own predictions, as scored
    assert len(test_rows) == 4 and (output / "test_confusion_matrix.png").is_file()
    assert results["test_accuracy"] == pytest.approx(np.mean([r["label"] == r["prediction"] for r in test_rows]))
    card = " ".join((output / "README.md").read_text(encoding="utf-8").split())
    assert "trained on 40 of the 48 training examples, evaluated on 4 of the 10 evaluation examples" in card


@pytest.fixture
def stopped_fine_tune(
    tmp_path: Path,
    model_dir: Path,
    data_files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
):
    """Run `bertscratch finetune` into tmp_path/cut with a signal sent to itself where the Trainer's `method` is
    called and `when(trainer)` holds; gives its exit status and the one line it ends with."""
    from hf_bertscratch_cli.dispatch import run_command

    def stopped(method: str, signum: int, when) -> tuple[object, str]:
        real = getattr(OrderedEvalTrainer, method)

        def signalled(self, *args, **kwargs):
            if when(self):
                os.kill(os.getpid(), signum)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(OrderedEvalTrainer, method, signalled)
        with pytest.raises(SystemExit) as exited:
            run_command("finetune", base_argv(model_dir, *data_files, tmp_path / "cut"))
        (line,) = [line for line in capsys.readouterr().err.splitlines() if "stopped" in line or "interrupted" in line]
        return exited.value.code, line

    return stopped


@pytest.mark.parametrize("at_step", [2, 8])
def test_ctrl_c_ends_a_fine_tune_with_one_line_naming_the_checkpoint_to_continue_from(
    at_step: int, tmp_path: Path, stopped_fine_tune
) -> None:
    """SIGINT during training ends `bertscratch finetune` with status 130 and one line: the step it stopped at and
    the first epoch's checkpoint-6 a rerun continues from, or, in the first epoch, that there is none yet."""
    status, line = stopped_fine_tune(
        "training_step", signal.SIGINT, lambda trainer: trainer.state.global_step == at_step
    )
    assert status == 130
    if at_step == 2:
        expected = "stopped at step 2, before its first checkpoint (--save_strategy epoch): nothing to resume from"
    else:
        expected = (
            f"stopped at step 8; the last checkpoint is {tmp_path / 'cut' / 'checkpoint-6'}: rerun with "
            "--resume_from_checkpoint last to continue"
        )
    assert line == f"bertscratch finetune: {expected}"


def test_a_stop_signal_while_a_checkpoint_is_written_stops_the_run_once_it_is_whole(
    tmp_path: Path, stopped_fine_tune
) -> None:
    """SIGTERM while the first epoch's checkpoint-6 writes its weights (before its optimizer, random and trainer state)
    waits for the checkpoint to be whole: the run then stops with SIGTERM's status and one line naming checkpoint-6,
    which holds everything a rerun continues from."""
    status, line = stopped_fine_tune("save_model", signal.SIGTERM, lambda _: True)
    assert status == 128 + signal.SIGTERM
    checkpoint = tmp_path / "cut" / "checkpoint-6"
    assert line == (
        f"bertscratch finetune: stopped at step 6; the last checkpoint is {checkpoint}: rerun with "
        "--resume_from_checkpoint last to continue"
    )
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert (checkpoint / name).is_file(), name
    assert not list(checkpoint.parent.glob("checkpoint-*[!6]"))


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_while_a_checkpoint_is_written_says_so_and_a_second_one_stops_at_once(
    presses: int, tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path]
) -> None:
    """`python scripts/finetune.py` stopped by Ctrl-C while its second epoch's checkpoint-12 is written (a disk that
    does not answer) says at once that it stops once that checkpoint is whole, and does; a second Ctrl-C stops it at
    once instead, naming the first epoch's checkpoint-6 as the one to continue from. Either way it ends as
    `bertscratch finetune` does: one line, status 130, no traceback; its lines name the script, the command run."""
    out = tmp_path / "cut"
    hang = HangingWrite(tmp_path, out / "checkpoint-12" / "trainer_state.json")
    script = Path(__file__).parents[1] / "scripts" / "finetune.py"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "", **hang.env}
    with (
        (tmp_path / "stderr.txt").open("w") as log,
        subprocess.Popen(
            [sys.executable, str(script), *base_argv(model_dir, *data_files, out)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            start_new_session=True,
        ) as process,
    ):
        try:
            wait_for(hang.started, process)
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole job
            wait_for(lambda: "again" in (tmp_path / "stderr.txt").read_text(), process, seconds=30)
            if presses == 2:
                os.killpg(process.pid, signal.SIGINT)
            else:
                time.sleep(1)
                assert process.poll() is None, "it stopped before the checkpoint was whole"
                hang.release()
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130
    stderr = (tmp_path / "stderr.txt").read_text()
    for noise in ("Traceback", "KeyboardInterrupt", "Exception ignored"):
        assert noise not in stderr, stderr[-3000:]
    (notice,) = [line for line in stderr.splitlines() if "again" in line]
    assert notice == (
        f"scripts/finetune.py: stopping once {out / 'checkpoint-12'} is written; press Ctrl-C again to stop now, "
        "leaving it incomplete: --resume_from_checkpoint last passes over it"
    )
    (line,) = [line for line in stderr.splitlines() if "stopped" in line]
    last = out / ("checkpoint-12" if presses == 1 else "checkpoint-6")
    assert line == (
        f"scripts/finetune.py: stopped at step 12; the last checkpoint is {last}: rerun with "
        "--resume_from_checkpoint last to continue"
    )
    assert (out / "checkpoint-12" / "trainer_state.json").is_file() == (presses == 1)


def test_finished_output_is_kept_and_an_interrupted_run_resumes(
    tmp_path: Path,
    model_dir: Path,
    data_files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys,
    caplog: pytest.LogCaptureFixture,
) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    main(base_argv(model_dir, *data_files, full))
    last_line = capsys.readouterr().out.splitlines()[-1]
    assert re.fullmatch(
        rf"{re.escape(str(full))} keeps the best model \(by eval accuracy, from checkpoint-\d+\); removed 2 intermediate "
        r"checkpoint\(s\) \(\d+ MB\), kept for "
        "resuming an interrupted run only.",
        last_line,
    )
    assert not list(full.glob("checkpoint-*"))  # a finished fine-tune resumes from none
    finished = (full / "all_results.json").read_text()
    with pytest.raises(ValueError, match=r"already holds a finished run \(model.safetensors, all_results.json"):
        main(base_argv(model_dir, *data_files, full))
    assert (full / "all_results.json").read_text() == finished  # refused before anything was written

    # Killed during the second epoch: checkpoint-6 (the first epoch's) and nothing that looks finished.
    real_step, steps = OrderedEvalTrainer.training_step, {"n": 0}

    def dying_step(self, *args, **kwargs):
        steps["n"] += 1
        if steps["n"] == 8:
            raise KeyboardInterrupt("killed")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(OrderedEvalTrainer, "training_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        main(base_argv(model_dir, *data_files, cut))
    monkeypatch.setattr(OrderedEvalTrainer, "training_step", real_step)
    assert sorted(path.name for path in cut.iterdir() if path.name != "runs") == ["checkpoint-6"]
    # The same command again would train from step 0 and remove checkpoint-6 at its end: refused, nothing touched.
    with pytest.raises(
        ValueError, match="holds checkpoint-6 of an interrupted run; pass --resume_from_checkpoint last"
    ):
        main(base_argv(model_dir, *data_files, cut))
    assert sorted(path.name for path in cut.iterdir() if path.name != "runs") == ["checkpoint-6"]
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.run_folder"):
        main(base_argv(model_dir, *data_files, cut) + ["--resume_from_checkpoint", "last"])
    assert f"Resuming from {cut / 'checkpoint-6'} at step 6" in caplog.text
    state = json.loads((cut / "trainer_state.json").read_text())
    assert state["global_step"] == 12
    resumed, uninterrupted = (load_file(str(folder / "model.safetensors")) for folder in (cut, full))
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        torch.testing.assert_close(resumed[name], uninterrupted[name], msg=name)

    with pytest.raises(ValueError, match="no checkpoint-\\* folder"):
        main(base_argv(model_dir, *data_files, tmp_path / "empty") + ["--resume_from_checkpoint", "last"])
    with pytest.raises(ValueError, match="overwrite_output_dir"):
        main(base_argv(model_dir, *data_files, cut))
    main(base_argv(model_dir, *data_files, cut) + ["--overwrite_output_dir", "true", "--num_train_epochs", "1"])
    assert json.loads((cut / "all_results.json").read_text())["global_step"] == 6


def test_a_resumed_fine_tune_checks_its_training_data_and_refuses_another_label_set(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fine-tune's checkpoints record its training data as pretraining's do (`training_data.json`): resumed on the
    same rows, also after the file was touched, it says nothing; on a train file rewritten since, its modification
    time kept, it warns in one line naming the file. Resumed with another label set, whose ids the checkpoint's head
    does not mean (other names, or another number of classes), it is refused in one line naming both."""
    train = write_csv(tmp_path / "train.csv", sentiment_rows(48, 0))
    dev = write_csv(tmp_path / "dev.csv", sentiment_rows(10, 1))
    cut = tmp_path / "cut"
    real_step = OrderedEvalTrainer.training_step

    def stop_at(step: int) -> None:
        steps = {"n": 0}

        def dying_step(self, *args, **kwargs):
            steps["n"] += 1
            if steps["n"] == step:
                raise KeyboardInterrupt("killed")
            return real_step(self, *args, **kwargs)

        monkeypatch.setattr(OrderedEvalTrainer, "training_step", dying_step)

    stop_at(8)  # in the second epoch: checkpoint-6 stays
    with pytest.raises(KeyboardInterrupt):
        main(base_argv(model_dir, train, dev, cut))
    checkpoint = cut / "checkpoint-6"
    assert json.loads((checkpoint / "training_data.json").read_text())["data"] == str(train)

    def resumed(*flags: str, train_file: Path = train) -> list[str]:
        stop_at(1)  # the checks come before the first step: checkpoint-6 stays for the next resumption
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_bertscratch"), pytest.raises(KeyboardInterrupt):
            main([*base_argv(model_dir, train_file, dev, cut), "--resume_from_checkpoint", "last", *flags])
        return [record.getMessage() for record in caplog.records if "training data" in record.getMessage()]

    before = train.stat()
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))  # touched, its rows the same
    assert resumed() == []
    write_csv(train, sentiment_rows(48, 2))
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert resumed() == [
        f"The training data ({train}) changed since {checkpoint} was saved: the resumed run skips the batches that "
        "checkpoint trained on as if they were the same, which they are not."
    ]
    three = write_csv(tmp_path / "three.csv", [(text, i % 3) for i, (text, _) in enumerate(sentiment_rows(48, 0))])
    for flags, train_file, labels in (
        (("--class_names", "bad,good"), train, "['bad', 'good']"),
        ((), three, "['0', '1', '2']"),
    ):
        with pytest.raises(ValueError) as refused:
            resumed(*flags, train_file=train_file)
        assert str(refused.value) == (
            f"--resume_from_checkpoint {checkpoint} was trained on the labels ['0', '1'] (single_label_classification), "
            f"this run on {labels} (single_label_classification): its head's ids would stand for other classes, or its "
            "outputs be read otherwise. Resume with the task, data and labels it was trained on, or start over in "
            "another --output_dir (or with --overwrite_output_dir)."
        )
    assert sorted(path.name for path in cut.iterdir() if path.name != "runs") == ["checkpoint-6"]


def test_torchrun_two_processes_train_one_model_and_write_its_outputs_once(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path]
) -> None:
    """`torchrun --nproc_per_node 2 scripts/finetune.py` on a CPU, without --use_cpu: the two processes train one
    model in a gloo process group (each a share of every batch, so half the steps of one process), and rank 0
    writes the folder once."""
    output = tmp_path / "ddp"
    argv = base_argv(model_dir, *data_files, output)
    assert argv[-2:] == ["--use_cpu", "true"]
    argv = argv[:-2]  # with --use_cpu, TrainingArguments builds the gloo group whatever the command does
    argv += ["--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "2", "--num_train_epochs", "1"]
    script = Path(__file__).parents[1] / "scripts" / "finetune.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    # Its own process group (start_new_session), so a hang kills torchrun's workers too rather than leaving them behind.
    with subprocess.Popen(
        [*command, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert process.returncode == 0, stderr[-3000:]
    train_rows = len(list(csv.DictReader(data_files[0].open())))
    results = json.loads((output / "all_results.json").read_text())
    assert results["global_step"] == math.ceil(train_rows / (2 * 4))  # an effective batch of 2 processes x 4
    assert stderr.count("Wrote the classifier model card") == 1
    assert stderr.count("Training on ") == 1  # the other process logs warnings only
    assert stdout.count('"eval_accuracy"') == stderr.count("with no learning:") == 1  # the results, reported once
    # The predictions gathered from both processes line up with the eval examples (texts of several lengths, 2 a
    # batch: a length-grouped evaluation would reorder them).
    with (output / "predictions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    dev = list(csv.DictReader(data_files[1].open()))
    assert [r["text"] for r in rows] == [d["text"] for d in dev]
    assert [r["label"] for r in rows] == [d["label"] for d in dev]


def test_a_tiny_train_set_finishes_and_a_failed_rerun_keeps_the_finished_run(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Four train texts that share no word leave the bag of words nothing to fit: the run still finishes, says so in
    one line and records both bags as not computed (null). A rerun with --overwrite_output_dir that fails after
    training leaves the finished run's files as they were: they are replaced only when the new run's move in."""
    from hf_bertscratch import finetuning
    from hf_bertscratch.run_folder import FINISHED_FILES

    rows = [("A wonderful film.", 1), ("Terrible acting.", 0), ("Loved every minute", 1), ("Boring and slow", 0)]
    train = write_csv(tmp_path / "train.csv", rows)
    dev = write_csv(tmp_path / "dev.csv", [("a great film", 1), ("bad acting", 0)])
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="hf_bertscratch.baselines"):
        main(base_argv(model_dir, train, dev, out))
    results = json.loads((out / "all_results.json").read_text())
    assert (results["baseline_bag_of_words"], results["baseline_bag_of_word_pairs"]) == (None, None)
    assert results["baseline_constant"] == 0.5
    assert [record.getMessage() for record in caplog.records if record.name == "hf_bertscratch.baselines"] == [
        "No-learning baseline not computed: bag of words, bag of words and word pairs (no word occurs in 2 or more "
        "of the 4 train texts, as the bag of words needs)."
    ]
    finished = {name: (out / name).read_bytes() for name in FINISHED_FILES}

    def fails_after_training(*args, **kwargs):
        raise RuntimeError("the evaluation failed")

    monkeypatch.setattr(finetuning, "evaluate_best_model", fails_after_training)
    with pytest.raises(RuntimeError, match="the evaluation failed"):
        main(base_argv(model_dir, train, dev, out) + ["--overwrite_output_dir", "true"])
    assert {name: (out / name).read_bytes() for name in FINISHED_FILES} == finished


def test_a_constant_answer_is_named_as_the_model_gives_it(caplog: pytest.LogCaptureFixture) -> None:
    """A classifier that gives every eval example the class that is not the train split's commonest scores other than
    the constant answer: the warning names the class it gives and calls that a constant answer, without claiming the
    baseline's score. A regressor's scores are flat against the labels' own spread, whatever their scale."""
    from transformers.trainer_utils import PredictionOutput

    from hf_bertscratch.finetuning import report_against_baselines

    def warnings_of(results: dict, task: str, prediction: PredictionOutput, names: list[str]) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_bertscratch.finetuning"):
            report_against_baselines(results, TASKS[task], {"eval": len(prediction.label_ids)}, prediction, names)
        return [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]

    logits = np.tile([[-1.0, 2.0]], (12, 1))  # class 1 ("positive") for all 12; 7 of them are 1
    one_class = PredictionOutput(logits, np.array([1] * 7 + [0] * 5), None)
    results = {"eval_accuracy": 7 / 12, "baseline_constant": 5 / 12, "eval_top_class_share": 1.0}
    assert warnings_of(results, "sst2", one_class, ["negative", "positive"]) == [
        "The model gives the same class (positive) to every eval example: a constant answer, which reads nothing of "
        "the texts (try more epochs or another learning rate)."
    ]
    labels = np.linspace(0.0, 5.0, 60)  # spread 1.5
    flat = {"eval_spearmanr": -0.01, "baseline_constant": 0.0, "eval_prediction_std": 0.0024}
    assert warnings_of(flat, "stsb", PredictionOutput(np.zeros(60), labels, None), []) == [
        "The model's eval_spearmanr -0.0100 is below what no learning scores: constant answer 0.0000.",
        "The model gives every eval example nearly the same score (spread 0.0024 against the labels' 1.5): close to "
        "a constant answer (try more epochs or another learning rate).",
    ]
    narrow = {"eval_spearmanr": 0.8, "baseline_constant": 0.0, "eval_prediction_std": 5e-4}  # labels spread 1e-3
    assert warnings_of(narrow, "stsb", PredictionOutput(np.zeros(60), labels / 5000, None), []) == []


def test_push_to_hub_uploads_the_finished_classifier(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    model_dir: Path,
    data_files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fine-tuning's --push_to_hub: one upload of the finished folder with the classifier card and remote code. The
    card names the local base model and training file by their names alone; the run's records keep the paths."""
    from hf_bertscratch import hub

    calls = record_hub(monkeypatch)
    out = tmp_path / "run"
    main(
        [
            *base_argv(model_dir, *data_files, out),
            "--num_train_epochs",
            "1",
            "--push_to_hub",
            "true",
            "--hub_model_id",
            "alice/classifier",
        ]
    )
    assert [name for name, _ in calls] == ["create_repo", "upload_folder"]
    upload = calls[-1][1]
    assert (upload["repo_id"], upload["revision"]) == ("alice/classifier", None)
    expected = hub.push_to_hub(out, "alice/classifier", dry_run=tmp_path / "dry")
    assert sorted(upload["files"]) == sorted(name for name, _ in hub.list_folder(expected))
    assert "training_args.bin" not in upload["files"] and "modeling_bertscratch.py" in upload["files"]
    card = upload["files"]["README.md"].decode()
    assert "text-classification" in card
    assert f"fine-tuned from a local checkpoint (`{model_dir.name}`)" in card
    assert "train.csv, max_seq_length" in card
    assert_no_local_path(card, tmp_path_factory)
    assert_no_local_path((out / "README.md").read_text(encoding="utf-8"), tmp_path_factory)
    assert json.loads((out / "all_results.json").read_text(encoding="utf-8"))["model_name_or_path"] == str(model_dir)


def test_dropout_is_set_for_fine_tuning(model_dir: Path, tmp_path: Path) -> None:
    """A checkpoint pretrained without dropout fine-tunes with BERT's 0.1 unless told to keep its own."""
    no_dropout = tmp_path / "no-dropout"
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
    model.save_pretrained(no_dropout)
    for scratch in (False, True):
        classifier = load_model(resolved(no_dropout, init_from_scratch=scratch), classes("a", "b"))
        assert (classifier.config.hidden_dropout_prob, classifier.config.attention_probs_dropout_prob) == (0.1, 0.1)
    kept = load_model(resolved(no_dropout, dropout=-1), classes("a", "b"))
    assert (kept.config.hidden_dropout_prob, kept.config.attention_probs_dropout_prob) == (0.0, 0.0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\) or -1 \(the checkpoint's\), got 1.5"):
        load_model(resolved(no_dropout, dropout=1.5), classes("a", "b"))


# ------------------------------------------------------------------------------------ every task shape, end to end
CITIES = {"paris": "france", "london": "england", "berlin": "germany", "rome": "italy", "madrid": "spain"}
FILLER = "the cat sat on the mat and the dog ran fast in the city".split()


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def scored_pairs(n: int, seed: int) -> list[tuple[str, str, float]]:
    """Sentence pairs with a score in [0, 5]: above 3 when the second text says "great", below 2 when "bad"."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        high = i % 2 == 0
        pair = rng.choices(FILLER, k=rng.randint(2, 6))
        pair.insert(rng.randint(0, len(pair)), "great" if high else "bad")
        score = rng.uniform(3.0, 5.0) if high else rng.uniform(0.0, 2.0)
        rows.append((" ".join(rng.choices(FILLER, k=rng.randint(3, 8))), " ".join(pair), round(score, 3)))
    return rows


def run_on_scored_pairs(tmp_path: Path, model_dir: Path, task_type: str) -> tuple[Path, list[tuple], dict]:
    """A run of `task_type` on 48 train and 16 dev scored pairs (text, text_pair, score), the first train pair's second
    text missing (an empty csv field, read as an empty text): its output folder, the dev rows and its
    all_results.json."""
    header = ("text", "text_pair", "score")
    train_rows = scored_pairs(48, 0)
    train_rows[0] = (train_rows[0][0], "", train_rows[0][2])
    train = write_csv(tmp_path / "train.csv", train_rows, header)
    dev_rows = scored_pairs(16, 1)
    dev = write_csv(tmp_path / "dev.csv", dev_rows, header)
    output = tmp_path / "run"
    columns = ["--label_column", "score", "--text_pair_column", "text_pair"]
    main(base_argv(model_dir, train, dev, output) + ["--task_type", task_type, *columns])
    return output, dev_rows, json.loads((output / "all_results.json").read_text())


def test_regression_end_to_end(tmp_path: Path, model_dir: Path) -> None:
    from scipy.stats import pearsonr, spearmanr

    output, dev_rows, results = run_on_scored_pairs(tmp_path, model_dir, "regression")
    rows = read_rows(output / "predictions.csv")
    assert [(r["text"], r["text_pair"]) for r in rows] == [(text, pair) for text, pair, _ in dev_rows]
    labels = [float(r["label"]) for r in rows]
    predictions = [float(r["prediction"]) for r in rows]
    assert labels == pytest.approx([score for *_, score in dev_rows], abs=1e-4)
    # Exact to float rounding: scores of an early model may differ only in their 5th digit, so no rounding is allowed.
    # The metrics read float32 (evaluate's Value("float")): the reference rounds the same way.
    labels32, predictions32 = np.float32(labels).astype(np.float64), np.float32(predictions).astype(np.float64)
    assert results["eval_pearson"] == pytest.approx(pearsonr(labels32, predictions32).statistic, abs=1e-6)
    assert results["eval_spearmanr"] == pytest.approx(spearmanr(labels32, predictions32).statistic, abs=1e-6)
    assert results["task_type"] == "regression" and results["main_metric"] == "spearmanr"
    # Beside the result, what no learning scores: a constant ranks nothing; word overlap ranks by shared words.
    from hf_bertscratch.baselines import word_overlap

    overlaps = [word_overlap(text, pair) for text, pair, _ in dev_rows]
    assert results["baseline_constant"] == 0.0
    assert results["baseline_word_overlap"] == pytest.approx(spearmanr(overlaps, labels).statistic, abs=1e-5)
    assert (output / "regression.png").is_file() and not (output / "confusion_matrix.png").exists()

    config = json.loads((output / "config.json").read_text())
    assert config["problem_type"] == "regression" and config["id2label"] == {"0": "score"}
    card = (output / "README.md").read_text(encoding="utf-8")  # a regressor's card, not a classifier's
    assert "A BERT text regression model" in card and "classifier" not in card and "cross-entropy" not in card
    assert "CrossEncoder(repo_id, revision=revision, trust_remote_code=True)" in card  # a pair model's card
    model = AutoModelForSequenceClassification.from_pretrained(output).eval()
    assert model.config.num_labels == 1
    # The saved model's own scores are the predictions written.
    tokenizer = AutoTokenizer.from_pretrained(output)
    texts, pairs = [text for text, _, _ in dev_rows], [pair for _, pair, _ in dev_rows]
    batch = tokenizer(texts, pairs, truncation=True, max_length=24, padding=True, return_tensors="pt")
    with torch.no_grad():
        scores = model(**batch).logits  # (N, 1)
    assert scores.shape == (len(dev_rows), 1)
    assert predictions == pytest.approx(scores[:, 0].tolist(), abs=1e-6)
    # sentence-transformers' CrossEncoder predicts those scores too, not their sigmoid (its default for one output):
    # the config names the activation it applies.
    from sentence_transformers import CrossEncoder

    cross_encoder = CrossEncoder(str(output), device="cpu", max_length=24)
    predicted = cross_encoder.predict(list(zip(texts, pairs, strict=True)), batch_size=4)
    assert predicted.tolist() == pytest.approx(scores[:, 0].tolist(), abs=1e-5)
    assert config["sentence_transformers"] == {"activation_fn": "torch.nn.modules.linear.Identity"}


def conll_sentences(n: int, seed: int) -> list[list[tuple[str, str]]]:
    """`n` CoNLL sentences of (word, IOB2 tag) with locations, persons, organisations and nationalities.

    Person and organisation names are not in the test vocabulary (one [UNK] piece each); "mat." and "spain," are
    two pieces, so only their first piece carries the word's tag.
    """
    rng = random.Random(seed)
    people = [("Anna", "Berg"), ("John", "Smith"), ("Maria", "Lopez")]
    teams = ["Reuters", "Siemens", "Fiat"]
    sentences = []
    for i in range(n):
        city = rng.choice(list(CITIES))
        kind = i % 4
        if kind == 0:
            words = [city.title(), "is", "the", "capital", "of", CITIES[city].title(), "."]
            tags = ["B-LOC", "O", "O", "O", "O", "B-LOC", "O"]
        elif kind == 1:
            first, last = rng.choice(people)
            words, tags = [first, last, "sat", "on", "the", "mat."], ["B-PER", "I-PER", "O", "O", "O", "O"]
        elif kind == 2:
            words = ["the", "film", "by", rng.choice(teams), "was", "bad", "in", city.title()]
            tags = ["O", "O", "O", "B-ORG", "O", "O", "O", "B-LOC"]
        else:
            words = ["the", "Italian", "movie", "was", "great", "in", "spain,", "!"]
            tags = ["O", "B-MISC", "O", "O", "O", "O", "B-LOC", "O"]
        sentences.append(list(zip(words, tags)))
    return sentences


def write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    """CoNLL-2003's layout: `word POS chunk TAG` lines, a blank line after each sentence, -DOCSTART- first."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for sentence in sentences:
        lines += [f"{word} NN I-NP {tag}" for word, tag in sentence] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def first_piece_tags(model_dir: Path, sentences: list[list[str]], max_seq_length: int) -> list[list[str]]:
    """The saved token classifier's tag of each word (read on its first piece), straight from its logits."""
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tags = []
    for words in sentences:
        encoding = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_seq_length)
        with torch.no_grad():
            predicted = model(**encoding.convert_to_tensors("pt", prepend_batch_axis=True)).logits[0].argmax(-1)
        word_ids = encoding.word_ids()
        firsts = [word_ids.index(w) for w in range(len(words)) if w in word_ids]
        tags.append([model.config.id2label[int(predicted[t])] for t in firsts])
    return tags


def test_token_classification_end_to_end(tmp_path: Path, model_dir: Path) -> None:
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    folder = tmp_path / "data" / "conll2003"
    folder.mkdir(parents=True)
    splits = {"train": conll_sentences(48, 0), "valid": conll_sentences(12, 1), "test": conll_sentences(12, 2)}
    for name, sentences in splits.items():
        write_conll(folder / f"{name}.txt", sentences)
    output = tmp_path / "run"
    fast = ["--learning_rate", "1e-2"]  # enough for 12 steps to find entities: F1 is not 0 on both sides
    main(run_argv(model_dir, output) + ["--task", "conll2003", "--data_dir", str(tmp_path / "data"), *fast])

    results = json.loads((output / "all_results.json").read_text())
    rows = read_rows(output / "predictions.csv")
    words = {name: [[w for w, _ in s] for s in sentences] for name, sentences in splits.items()}
    gold = {name: [[t for _, t in s] for s in sentences] for name, sentences in splits.items()}
    assert [r["tokens"] for r in rows] == [" ".join(w) for w in words["valid"]]
    references = [r["label"].split() for r in rows]
    predictions = [r["prediction"].split() for r in rows]
    assert references == gold["valid"]
    assert predictions == first_piece_tags(output, words["valid"], 24)  # the saved model's own tags
    assert results["eval_overall_f1"] == pytest.approx(f1_score(references, predictions))
    assert results["eval_overall_precision"] == pytest.approx(precision_score(references, predictions))
    assert results["eval_overall_recall"] == pytest.approx(recall_score(references, predictions))
    assert results["eval_overall_accuracy"] == pytest.approx(accuracy_score(references, predictions))
    # The test split is scored once, with the chosen (saved) model, and its predictions written beside the eval ones.
    test_predictions = first_piece_tags(output, words["test"], 24)
    assert results["test_overall_f1"] == pytest.approx(f1_score(gold["test"], test_predictions))
    test_rows = read_rows(output / "test_predictions.csv")
    assert [r["tokens"] for r in test_rows] == [" ".join(w) for w in words["test"]]
    assert [r["label"].split() for r in test_rows] == gold["test"]
    assert [r["prediction"].split() for r in test_rows] == test_predictions
    assert (output / "test_per_type_f1.png").is_file()
    assert results["eval_overall_f1"] > 0  # something was learnt: the comparisons above are not of empty sets

    assert (output / "per_type_f1.png").is_file()
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {str(i): name for i, name in enumerate(CONLL2003_LABELS)}


def test_conll_text_files_of_ones_own_are_read_as_sentences(tmp_path: Path) -> None:
    """A token-classification task given .txt files reads them as CoNLL-format sentences (`read_conll`), in the
    front door's column check and in the loading alike; for other tasks a .txt file stays lines of text, and one of
    CoNLL-format sentences is named as one, with the --task_type that reads it."""
    from hf_bertscratch.tasks.data import check_data_arguments, load_task_datasets
    from hf_bertscratch_cli.data_checks import check_task_files

    train = write_conll(tmp_path / "train.txt", conll_sentences(6, 0))
    dev = write_conll(tmp_path / "dev.txt", conll_sentences(3, 1))
    flags = ["--task_type", "token-classification", "--train_file", str(train), "--validation_file", str(dev)]
    check_task_files(flags)  # tokens and ner_tags: what read_conll gives
    args = DataArguments(task_type="token-classification", train_file=str(train), validation_file=str(dev))
    splits = load_task_datasets(args, check_data_arguments(args))
    assert splits["train"]["tokens"] == [[w for w, _ in s] for s in conll_sentences(6, 0)]
    assert splits["eval"]["ner_tags"] == [[t for _, t in s] for s in conll_sentences(3, 1)]
    with pytest.raises(ValueError, match=r"\(--train_file\) looks like a CoNLL file: add --task_type token-class"):
        check_task_files(["--train_file", str(train), "--validation_file", str(dev)])  # classification: lines


def test_token_classification_on_own_jsonl_columns(tmp_path: Path, model_dir: Path) -> None:
    from seqeval.metrics import f1_score

    def write_jsonl(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
        lines = [json.dumps({"words": [w for w, _ in s], "labels": [t for _, t in s]}) for s in sentences]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def animals(n: int, seed: int) -> list[list[tuple[str, str]]]:
        rng = random.Random(seed)
        return [
            [("the", "O"), (rng.choice(["cat", "dog"]), "B-ANIMAL"), ("sat", "O"), ("in", "O"), (city, "B-CITY")]
            for city in rng.choices(list(CITIES), k=n)
        ]

    train = write_jsonl(tmp_path / "train.jsonl", animals(24, 0))
    dev = write_jsonl(tmp_path / "dev.jsonl", animals(8, 1))
    output = tmp_path / "run"
    columns = ["--tokens_column", "words", "--tags_column", "labels"]
    main(base_argv(model_dir, train, dev, output) + ["--task_type", "token-classification", *columns])

    results = json.loads((output / "all_results.json").read_text())
    rows = read_rows(output / "predictions.csv")
    references = [r["label"].split() for r in rows]
    assert references == [[t for _, t in s] for s in animals(8, 1)]
    assert results["eval_overall_f1"] == pytest.approx(f1_score(references, [r["prediction"].split() for r in rows]))
    assert "test_overall_f1" not in results  # no --test_file
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "O", "1": "B-ANIMAL", "2": "B-CITY"}  # "O" first, then sorted
    # transformers' pipeline alone tags a text longer than the fine-tune's --max_seq_length (24) to its end: the
    # saved tokenizer neither records that length as its own limit nor keeps truncation on.
    from transformers import pipeline

    text = " ".join(["the cat sat in paris"] * 8)  # 42 pieces with [CLS] and [SEP]
    tagger = pipeline("token-classification", model=str(output), device="cpu", aggregation_strategy="none")
    pieces = tagger(text, ignore_labels=[])  # every piece, those tagged O too
    assert [piece["word"] for piece in pieces] == text.split()
    assert json.loads((output / "tokenizer.json").read_text())["truncation"] is None


QA_QUESTION = "what is the capital of {} ?"


def squad_paragraph(rng: random.Random, cities: list[str], id_prefix: str, two_answers: bool) -> dict:
    """One SQuAD paragraph: facts "<city> is the capital of <country> ." among filler sentences, one question per
    fact. The context is long enough that 48-token windows cut it in several, and later facts lie past the first."""
    sentences = [f"{city} is the capital of {CITIES[city]} ." for city in cities]
    sentences += [" ".join(rng.choices(FILLER, k=6)) + " ." for _ in range(4)]
    rng.shuffle(sentences)
    context = " ".join(sentences)
    qas = []
    for city in cities:
        start = context.index(f"{city} is the capital")
        answers = [{"text": city, "answer_start": start}]
        if two_answers:
            answers.append({"text": f"{city} is the capital of {CITIES[city]}", "answer_start": start})
        question = QA_QUESTION.format(CITIES[city])
        qas.append({"id": f"{id_prefix}-{city}", "question": question, "answers": answers})
    return {"context": context, "qas": qas}


def write_squad(path: Path, seed: int, articles: int, paragraphs: int, two_answers: bool = False) -> Path:
    """A SQuAD v1.1 file in the official nested layout: data -> paragraphs -> qas."""
    rng = random.Random(seed)
    data = [
        {
            "title": f"article_{a}",
            "paragraphs": [
                squad_paragraph(rng, rng.sample(list(CITIES), 3), f"{seed}-{a}-{p}", two_answers)
                for p in range(paragraphs)
            ],
        }
        for a in range(articles)
    ]
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return path


def test_question_answering_end_to_end(tmp_path: Path, model_dir: Path) -> None:
    from hf_bertscratch.inference import answer_question
    from hf_bertscratch.metrics import load_metric

    train = write_squad(tmp_path / "train.json", 0, articles=2, paragraphs=4)
    dev = write_squad(tmp_path / "dev.json", 1, articles=1, paragraphs=3, two_answers=True)
    examples = [
        (qa, paragraph["context"])
        for article in json.loads(dev.read_text())["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    room = 48 - 3 - len(tokenizer(QA_QUESTION.format("spain"), add_special_tokens=False)["input_ids"])
    assert all(len(tokenizer(c, add_special_tokens=False)["input_ids"]) > room for _, c in examples)  # 2+ windows
    output = tmp_path / "run"
    windows = ["--max_seq_length", "48", "--doc_stride", "16"]
    main(base_argv(model_dir, train, dev, output) + ["--task_type", "question-answering", *windows])

    results = json.loads((output / "all_results.json").read_text())
    rows = read_rows(output / "predictions.csv")
    assert [r["id"] for r in rows] == [qa["id"] for qa, _ in examples]
    assert [r["label"].split(" | ") for r in rows] == [[a["text"] for a in qa["answers"]] for qa, _ in examples]
    expected = load_metric("squad").compute(
        predictions=[{"id": r["id"], "prediction_text": r["prediction"]} for r in rows],
        references=[
            {"id": qa["id"], "answers": {key: [a[key] for a in qa["answers"]] for key in ("text", "answer_start")}}
            for qa, _ in examples
        ],
    )
    assert results["eval_exact_match"] == pytest.approx(expected["exact_match"])
    assert results["eval_f1"] == pytest.approx(expected["f1"])
    assert results["eval_f1"] > 0  # spans overlap the gold answers: the comparison is not of zeros
    # The saved folder answers each question as the evaluation did, with a span of its context (its tokens' span,
    # which evaluation scores, as run_qa.py does: not widened to whole words).
    for (qa, context), row in zip(examples, rows):
        found = answer_question(output, qa["question"], context, max_seq_length=48, doc_stride=16, align_to_words=False)
        assert found["answer"] == row["prediction"] == context[found["start"] : found["end"]]
    assert json.loads((output / "config.json").read_text())["architectures"] == ["BertScratchForQuestionAnswering"]


def write_rte(folder: Path, n: int, seed: int) -> list[tuple[str, str, str]]:
    """GLUE's RTE TSV (`index sentence1 sentence2 label`, string labels); returns the rows written."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        city = rng.choice(list(CITIES))
        country = CITIES[city] if i % 2 else rng.choice([c for c in CITIES.values() if c != CITIES[city]])
        label = "entailment" if i % 2 else "not_entailment"
        rows.append((f"{city} is the capital of {CITIES[city]} .", f"{city} is in {country} .", label))
    lines = ["index\tsentence1\tsentence2\tlabel"] + ["\t".join((str(i), *row)) for i, row in enumerate(rows)]
    (folder / ("train.tsv" if seed == 0 else "dev.tsv")).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def test_sentence_pair_classification_from_the_table(tmp_path: Path, model_dir: Path) -> None:
    folder = tmp_path / "data" / "glue" / "RTE"
    folder.mkdir(parents=True)
    write_rte(folder, 32, seed=0)
    dev_rows = write_rte(folder, 10, seed=1)
    output = tmp_path / "run"
    main(run_argv(model_dir, output) + ["--task", "rte", "--data_dir", str(tmp_path / "data")])

    results = json.loads((output / "all_results.json").read_text())
    rows = read_rows(output / "predictions.csv")
    assert list(rows[0]) == [
        "index",
        "text",
        "text_pair",
        "label",
        "prediction",
        "p_entailment",
        "p_not_entailment",
    ]
    assert [(r["text"], r["text_pair"], r["label"]) for r in rows] == dev_rows
    accuracy = sum(r["label"] == r["prediction"] for r in rows) / len(rows)
    assert results["eval_accuracy"] == pytest.approx(accuracy)
    assert all(abs(float(r["p_entailment"]) + float(r["p_not_entailment"]) - 1) < 1e-4 for r in rows)
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "entailment", "1": "not_entailment"}  # the table's order, not sorted labels
    # The card's model-index says which of GLUE's tasks and which split its results measure.
    card = ModelCard.load(output / "README.md")
    assert {(r.dataset_type, r.dataset_config, r.dataset_split) for r in card.data.eval_results} == {
        ("glue", "rte", "validation")
    }


# ------------------------------------------------------------------------- every shape's bad data, before training
def _own_jsonl(tmp_path: Path, rows: list[dict], *flags: str) -> list[str]:
    """--train_file/--validation_file of `rows` (the same file) and `flags`."""
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return ["--train_file", str(path), "--validation_file", str(path), *flags]


def _mismatched_tags(tmp_path: Path) -> list[str]:
    rows = [{"tokens": ["paris", "is", "big"], "ner_tags": ["B-LOC", "O", "O"]}]
    rows.append({"tokens": ["rome", "is", "big"], "ner_tags": ["B-LOC", "O"]})
    return _own_jsonl(tmp_path, rows, "--task_type", "token-classification")


def _unknown_tag(tmp_path: Path) -> list[str]:
    folder = tmp_path / "conll2003"
    folder.mkdir()
    for name in ("train", "test"):
        write_conll(folder / f"{name}.txt", conll_sentences(4, 0))
    write_conll(folder / "valid.txt", [[("Paris", "B-CITY"), ("is", "O")]])
    return ["--task", "conll2003", "--data_dir", str(tmp_path)]


def _answer_not_in_context(tmp_path: Path) -> list[str]:
    """Flat question-answering rows (not SQuAD's nesting) under column names of their own."""
    answers = {"text": ["london"], "answer_start": [0]}
    row = {"q": "what is the capital of spain ?", "passage": "madrid is the capital of spain .", "gold": answers}
    columns = ["--question_column", "q", "--context_column", "passage", "--answers_column", "gold"]
    windows = ["--max_seq_length", "48", "--doc_stride", "16"]
    return _own_jsonl(tmp_path, [row], "--task_type", "question-answering", *columns, *windows)


def _unanswered_dev_question(tmp_path: Path) -> list[str]:
    """A dev question without a gold answer: SQuAD's metric cannot score it, so the run stops before training."""
    answered = {
        "question": "what is big ?",
        "context": "paris is big .",
        "answers": {"text": ["paris"], "answer_start": [0]},
    }
    unanswered = {**answered, "answers": {"text": [], "answer_start": []}}
    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text(json.dumps(answered) + "\n", encoding="utf-8")
    dev.write_text(json.dumps(unanswered) + "\n", encoding="utf-8")
    windows = ["--max_seq_length", "48", "--doc_stride", "16"]
    return ["--train_file", str(train), "--validation_file", str(dev), "--task_type", "question-answering", *windows]


def _class_names_for_regression(tmp_path: Path) -> list[str]:
    path = write_csv(tmp_path / "data.csv", [("the cat", "high"), ("the dog", "low")])
    return ["--task_type", "regression", "--train_file", str(path), "--validation_file", str(path)]


def _scores_for_classification(tmp_path: Path) -> list[str]:
    path = write_csv(tmp_path / "data.csv", [("the cat", 0.5), ("the dog", 3.25)])
    return ["--train_file", str(path), "--validation_file", str(path)]


def _no_validation_split(tmp_path: Path) -> list[str]:
    return ["--train_file", str(write_csv(tmp_path / "train.csv", [("the cat", 0), ("the dog", 1)]))]


@pytest.mark.parametrize(
    "data_flags, message",
    [
        (_mismatched_tags, r"Row 1 of the train split has 3 words but 2 tags"),
        (
            _unknown_tag,
            r"eval split: tag 'B-CITY' is not in the label list \['O', 'B-PER'.*in id order with --class_names",
        ),
        (
            _answer_not_in_context,
            r"example 'train-0'.*text 'london' is not at answer_start=0: the context reads 'madrid'",
        ),
        (
            _unanswered_dev_question,
            r"eval example 'eval-0' \(row 0\): has no answer; every example trained on or scored",
        ),
        (_class_names_for_regression, r"regression task needs numeric labels.*\['high', 'low'\].*classification"),
        (_scores_for_classification, r"numbers such as \[0.5, 3.25\]: a classification task needs class ids or names"),
        (
            _no_validation_split,
            r"no validation split, and 5% of its 2 train examples would hold out 1 to choose checkpoints on and score, "
            r"fewer than 5: give --validation_file\.",
        ),
        (
            lambda _: ["--task", "rte", "--task_type", "regression"],
            r"--task rte is a classification task, but --task_t",
        ),
    ],
    ids=[
        "tags-length",
        "unknown-tag",
        "answer-not-in-context",
        "unanswered-dev-question",
        "regression-classes",
        "float-classes",
        "no-dev",
        "shape",
    ],
)
def test_every_shape_refuses_bad_data_before_training(
    tmp_path: Path, model_dir: Path, data_flags, message: str
) -> None:
    output = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        main(run_argv(model_dir, output) + data_flags(tmp_path))
    assert not any(output.glob("checkpoint-*")) and not (output / "all_results.json").exists()


# --------------------------------------------------------------------------------------- embeddings (bi-encoder)
def test_embedding_folder_gives_the_same_vectors_in_sentence_transformers(tmp_path: Path, model_dir: Path) -> None:
    """An embedding run saves a folder whose written cosines, `bertscratch embed` vectors and sentence-transformers
    vectors all agree, and whose eval Spearman is that of its cosines."""
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from hf_bertscratch.inference import embed, similarity

    output, dev_rows, results = run_on_scored_pairs(tmp_path, model_dir, "embedding")
    assert (results["embedding_objective"], results["pooling"], results["main_metric"]) == (
        "cosine",
        "mean",
        "spearmanr",
    )
    rows = read_rows(output / "predictions.csv")
    cosines = [float(r["prediction"]) for r in rows]
    labels = [score for *_, score in dev_rows]
    assert results["eval_spearmanr"] == pytest.approx(spearmanr(labels, cosines).statistic, abs=1e-6)
    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json", "README.md"):
        assert (output / name).is_file(), name
    assert json.loads((output / "config.json").read_text())["architectures"] == ["BertScratchModel"]

    texts = [text for text, _, _ in dev_rows[:6]]
    pairs = [pair for _, pair, _ in dev_rows[:6]]
    ours = np.stack([embed(str(output), text) for text in texts])
    encoder = SentenceTransformer(str(output), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(encoder.encode(texts, convert_to_numpy=True), ours, atol=1e-5)
    # The cosines written are the cosines of those vectors (each text alone, no padding), as `similarity` prints.
    for i, (text, pair) in enumerate(zip(texts, pairs)):
        assert similarity(str(output), text, pair) == pytest.approx(cosines[i], abs=1e-5)


def test_embedding_needs_pairs_and_numeric_labels(tmp_path: Path, model_dir: Path) -> None:
    header = ("text", "text_pair", "score")
    rows = scored_pairs(8, 0)
    train = write_csv(tmp_path / "train.csv", rows, header)
    output = tmp_path / "run"
    with pytest.raises(ValueError, match="--text_pair_column"):
        main(base_argv(model_dir, train, train, output) + ["--task_type", "embedding", "--label_column", "score"])
    words = write_csv(tmp_path / "words.csv", [(a, b, "high" if s > 2.5 else "low") for a, b, s in rows], header)
    with pytest.raises(ValueError, match=r"similarity scores or 0/1 match labels.*'low'|'high'"):
        main(
            base_argv(model_dir, words, words, output)
            + ["--task_type", "embedding", "--text_pair_column", "text_pair", "--label_column", "score"]
        )
    with pytest.raises(ValueError, match="has no sentence pairs"):
        check_data_arguments(DataArguments(task="sst2", task_type="embedding"))
    assert not output.exists() or not any(output.iterdir())


def test_a_classifier_is_refused_where_sentence_vectors_are_needed(tmp_path: Path, model_dir: Path) -> None:
    from hf_bertscratch.inference import embed, similarity

    classifier_dir = tmp_path / "classifier"
    AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2).save_pretrained(classifier_dir)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(classifier_dir)
    for call in (lambda: embed(str(classifier_dir), "a text"), lambda: similarity(str(classifier_dir), "a", "b")):
        with pytest.raises(ValueError, match="BertScratchForSequenceClassification checkpoint, fine-tuned for a task"):
            call()
    assert embed(str(model_dir), "the cat sat").shape == (tiny_config_kwargs(10)["hidden_size"],)  # an encoder is fine


def test_boolean_match_labels_train_an_embedding_as_0_and_1(tokenizer: BertTokenizer) -> None:
    """JSON's true and false in the label column (an is_duplicate column) are 0/1 match labels: in-batch negatives
    are chosen for them and the shape takes them as 0.0 and 1.0, rather than refusing them as not numbers."""
    from hf_bertscratch.embedding import objective_for_labels

    task = check_data_arguments(DataArguments(train_file="x.csv", task_type="embedding", text_pair_column="b"))
    pairs = datasets.Dataset.from_dict({"text": ["a cat", "a dog"], "b": ["the cat", "a bird"], "label": [True, False]})
    assert objective_for_labels(pairs["label"]) == "in-batch"
    shape = EmbeddingShape(task, FeatureSettings(), tokenizer, "in-batch")
    shape.prepare_labels(datasets.DatasetDict({"train": pairs, "eval": pairs}))
    assert shape.features(pairs, training=False)["labels"] == [1.0, 0.0]


def test_embedding_objective_auto_is_chosen_from_the_train_labels() -> None:
    from hf_bertscratch.embedding import objective_for_labels

    assert objective_for_labels([0.0, 2.5, 5.0]) == "cosine"  # similarity scores
    assert objective_for_labels([0, 1, 1]) == objective_for_labels([1, 1]) == "in-batch"  # 0/1 match labels
    assert objective_for_labels(None) == "in-batch"  # pairs without labels


@pytest.mark.parametrize("objective", ["in-batch", "simcse"])
def test_embedding_objectives_without_scores(tmp_path: Path, model_dir: Path, objective: str) -> None:
    """In-batch negatives train on the matching pairs of 0/1 labels; SimCSE on every distinct text alone. Both are
    evaluated on the eval pairs' cosines, and both save a sentence-transformers folder."""
    header = ("text", "text_pair", "label")
    rows = [(a, b, int(score > 2.5)) for a, b, score in scored_pairs(48, 0)]
    train = write_csv(tmp_path / "train.csv", rows, header)
    dev = write_csv(tmp_path / "dev.csv", [(a, b, int(s > 2.5)) for a, b, s in scored_pairs(16, 1)], header)
    output = tmp_path / "run"
    flags = ["--task_type", "embedding", "--text_pair_column", "text_pair"]
    flags += [] if objective == "in-batch" else ["--embedding_objective", "simcse"]
    main(base_argv(model_dir, train, dev, output) + flags)
    results = json.loads((output / "all_results.json").read_text())
    assert results["embedding_objective"] == objective and -1 <= results["eval_spearmanr"] <= 1
    matching = sum(label for *_, label in rows)
    texts = len({text for a, b, _ in rows for text in (a, b)})
    steps_per_epoch = -(-(matching if objective == "in-batch" else texts) // 8)  # batch 8, two epochs
    assert results["global_step"] == 2 * steps_per_epoch
    assert (output / "1_Pooling" / "config.json").is_file()


@pytest.mark.parametrize("regression", [True, False], ids=["score", "classes"])
def test_probe_head_is_the_linear_fit_of_the_frozen_features(model_dir: Path, regression: bool) -> None:
    """LP-FT's first stage: after `probe_head` the model's own outputs are those of a ridge (logistic) regression
    fitted to what its classifier reads, with the encoder untouched."""
    from sklearn.linear_model import LogisticRegression, RidgeCV

    from hf_bertscratch.initialisation import head_inputs, probe_head

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    num_labels = 1 if regression else 2
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=num_labels, classifier_pooling="segments", hidden_dropout_prob=0.1
    )
    rows = scored_pairs(40, 0)
    labels = [score if regression else int(score > 2.5) for *_, score in rows]

    def batches() -> list[dict[str, torch.Tensor]]:
        out = []
        for start in range(0, len(rows), 16):
            chunk = rows[start : start + 16]
            batch = dict(tokenizer([a for a, *_ in chunk], [b for _, b, _ in chunk], padding=True, return_tensors="pt"))
            batch["labels"] = torch.tensor(labels[start : start + 16])
            out.append(batch)
        return out

    encoder = {k: v.clone() for k, v in model.bert.state_dict().items()}
    features, _ = head_inputs(model, batches())
    assert features.shape == (40, 4 * model.config.hidden_size)  # [u, v, |u - v|, u * v]
    probe_head(model, batches(), regression=regression)
    assert all(torch.equal(v, model.bert.state_dict()[k]) for k, v in encoder.items())
    model.eval()
    with torch.no_grad():
        outputs = torch.cat([model(**{k: v for k, v in b.items() if k != "labels"}).logits for b in batches()])
    if regression:
        reference = RidgeCV(alphas=np.logspace(-3, 3, 7)).fit(features, labels).predict(features)
        np.testing.assert_allclose(outputs[:, 0].numpy(), reference, atol=1e-3)
    else:
        reference = LogisticRegression(max_iter=2000).fit(features, labels).predict(features)
        assert outputs.argmax(-1).tolist() == reference.tolist()


def test_gradient_norm_callback_logs_the_mean_norms_of_head_and_encoder(model_dir: Path) -> None:
    from transformers import TrainerControl, TrainerState

    from hf_bertscratch.finetuning import GradientNormCallback

    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    callback, state, expected = GradientNormCallback(), TrainerState(), {"head": 0.0, "encoder": 0.0}
    for scale in (1.0, 3.0):  # two optimizer steps
        for parameter in model.parameters():
            parameter.grad = torch.full_like(parameter, scale)
        for part in expected:
            grads = [p.grad for n, p in model.named_parameters() if n.startswith("bert") == (part == "encoder")]
            expected[part] += float(torch.cat([g.reshape(-1) for g in grads]).norm())
        callback.on_pre_optimizer_step(None, state, TrainerControl(), model=model)
    state.log_history.append({"loss": 1.0})
    callback.on_log(None, state, TrainerControl(), logs={"loss": 1.0})
    assert state.log_history[-1]["grad_norm_head"] == pytest.approx(expected["head"] / 2, rel=1e-5)
    assert state.log_history[-1]["grad_norm_encoder"] == pytest.approx(expected["encoder"] / 2, rel=1e-5)
    assert callback.steps == 0


def test_a_tokenizer_that_does_not_cover_the_text_is_warned_of(
    tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """A tokenizer that turns much of the training text into [UNK] (another language, a vocabulary that was not
    loaded) is named in a warning; one that covers the text is not."""
    import datasets

    from hf_bertscratch import finetuning

    def features(texts: list[str]) -> datasets.Dataset:
        return datasets.Dataset.from_dict({"input_ids": tokenizer(texts)["input_ids"]})

    covered = features([" ".join(POSITIVE), " ".join(NEGATIVE)])
    assert finetuning.unknown_token_share(covered, tokenizer) == 0
    foreign = features(["le film était ennuyeux", "the film était génial"])
    share = finetuning.unknown_token_share(foreign, tokenizer)
    assert share == pytest.approx(5 / 8)  # "le", "était", "ennuyeux", "était", "génial" of 8 words, [CLS]/[SEP] aside
    caplog.clear()  # and the tokenizer's own warnings: only the warnings of finetuning count
    with caplog.at_level(logging.WARNING, logger=finetuning.__name__):
        finetuning.warn_of_unknown_tokens(covered, tokenizer, "runs/model")
        assert not [record for record in caplog.records if record.name == finetuning.__name__]
        finetuning.warn_of_unknown_tokens(foreign, tokenizer, "runs/model")
    (record,) = [record for record in caplog.records if record.name == finetuning.__name__]
    assert record.getMessage().startswith("62% of the training text's tokens are [UNK]: the tokenizer of runs/model")


# ---------------------------------------------------------------- a test split without labels: predicted, not scored
def assert_predicted_not_scored(
    output: Path, caplog: pytest.LogCaptureFixture, column: str, examples: int, what: str = "labels"
) -> list[dict[str, str]]:
    """What every run given a test split without labels shows, whatever its shape: one log line saying the split is
    predicted, not scored; test_predictions.csv with a prediction and no label for each of its examples; no test
    metric, baseline or picture. Returns test_predictions.csv's rows."""
    said = [r.getMessage() for r in caplog.records if "The test split has no" in r.getMessage()]
    assert said == [
        f"The test split has no {what} (no {column!r} column, or an empty one): its {examples} examples are "
        "predicted with the chosen model at the end, not scored (test_predictions.csv, no test metrics)."
    ]
    results = json.loads((output / "all_results.json").read_text())
    assert [key for key in results if key.startswith("test")] == ["test_samples"]
    assert results["test_samples"] == examples
    assert any(key.startswith("eval_") for key in results)  # the eval split is scored as ever
    assert not list(output.glob("test_*.png"))
    rows = read_rows(output / "test_predictions.csv")
    assert len(rows) == examples and "label" not in rows[0] and all(row["prediction"] for row in rows)
    assert "label" in read_rows(output / "predictions.csv")[0]
    return rows


def test_a_test_file_without_labels_is_predicted_not_scored(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A test file without a label column (as GLUE's own test files come) gets the chosen model's class and
    probabilities for each example, as the saved classifier gives them, as run_glue.py's --do_predict does."""
    texts = [text for text, _ in sentiment_rows(6, 2)]
    test = write_csv(tmp_path / "test.csv", [(text,) for text in texts], ("text",))
    output = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        main(base_argv(model_dir, *data_files, output) + ["--test_file", str(test)])
    rows = assert_predicted_not_scored(output, caplog, "label", len(texts))
    assert list(rows[0]) == ["index", "text", "prediction", "p_0", "p_1"]
    assert [row["text"] for row in rows] == texts
    classifier = inference.load_pipeline("text-classification", str(output))
    for row in rows:
        best = inference.classify(classifier, row["text"])[0]
        # written to 6 places from a padded batch, against one text alone (`assert_same_results`' 1e-5)
        assert row["prediction"] == best["label"] and float(row[f"p_{best['label']}"]) == pytest.approx(
            best["score"], abs=1e-5
        )


def test_a_wholly_empty_label_column_is_no_labels(tmp_path: Path) -> None:
    """A test split whose label column holds no value at all (empty csv fields; -1 in a ClassLabel column, as the
    Hub's GLUE test splits hold) is read as one without labels, to be predicted."""
    from hf_bertscratch.tasks.data import without_empty_labels

    train = write_csv(tmp_path / "train.csv", [("the film", 0), ("the movie", 1)])
    test = write_csv(tmp_path / "test.csv", [("the film", ""), ("the movie", "")])
    args = DataArguments(train_file=str(train), validation_file=str(train), test_file=str(test))
    raw = load_task_datasets(args, args.task_spec)
    assert raw["test"].column_names == ["text"] and len(raw["test"]) == 2
    assert raw["eval"].column_names == ["text", "label"]
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["a", "b"])})
    glue_test = datasets.Dataset.from_dict({"text": ["x", "y"], "label": [-1, -1]}, features=features)
    assert without_empty_labels(glue_test, "label").column_names == ["text"]
    some = datasets.Dataset.from_dict({"text": ["x", "y"], "label": [-1, 1]}, features=features)
    assert without_empty_labels(some, "label").column_names == ["text", "label"]  # left for check_labels_given


def _some_labels(tmp_path: Path) -> list[str]:
    train = write_csv(tmp_path / "train.csv", [("the film", 0), ("the movie", 1)])
    test = write_csv(tmp_path / "test.csv", [("the film", 0), ("the movie", ""), ("a film", 1)])
    return ["--train_file", str(train), "--validation_file", str(train), "--test_file", str(test)]


def _some_tags(tmp_path: Path) -> list[str]:
    rows = [{"tokens": ["paris", "is", "big"], "ner_tags": ["B-LOC", "O", "O"]}]
    flags = _own_jsonl(tmp_path, rows, "--task_type", "token-classification")
    test = tmp_path / "test.jsonl"
    lines = [json.dumps({**rows[0], "ner_tags": tags}) for tags in (["O"] * 3, None, ["O"] * 3)]
    test.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [*flags, "--test_file", str(test)]


def _some_answers(tmp_path: Path) -> list[str]:
    train = write_squad(tmp_path / "train.json", 0, articles=1, paragraphs=1)
    test = json.loads(train.read_text())
    del test["data"][0]["paragraphs"][0]["qas"][2]["answers"]
    (tmp_path / "test.json").write_text(json.dumps(test), encoding="utf-8")
    files = ["--train_file", str(train), "--validation_file", str(train), "--test_file", str(tmp_path / "test.json")]
    return [*files, "--task_type", "question-answering"]


@pytest.mark.parametrize(
    "data_flags, what, column, missing, first",
    [
        (_some_labels, "label", "label", 1, 1),
        (_some_tags, "tags", "ner_tags", 1, 1),
        (_some_answers, "answers", "answers", 1, 2),
    ],
    ids=["labels", "tags", "answers"],
)
def test_a_test_split_with_some_labels_missing_is_refused(
    tmp_path: Path, data_flags, what: str, column: str, missing: int, first: int
) -> None:
    """Only some labels (tags, answers) of a test split missing is a data error, refused as in the train and eval
    splits, naming what is missing (label, tags, answers), the column, how many and the first; only a test split with
    none is predicted."""
    argv = data_flags(tmp_path)
    kwargs = {argv[i].lstrip("-"): argv[i + 1] for i in range(0, len(argv), 2)}
    args = DataArguments(**kwargs)
    with pytest.raises(ValueError) as error:
        load_task_datasets(args, args.task_spec)
    assert str(error.value).startswith(
        f"{missing} of the 3 examples of the test split have no {what} in column {column!r} (an empty field or a "
        f"null; the first is example {first}, counting from 0): give each example its {what}, or remove those rows."
    )


def test_a_test_file_without_labels_made_the_eval_split_too_is_refused(tmp_path: Path) -> None:
    """--eval_split test makes the test file the eval split, which checkpoints are chosen on: one without labels
    cannot be that, and the error says so instead of asking for a --label_column."""
    train = write_csv(tmp_path / "train.csv", [("the film", 0), ("the movie", 1)])
    test = write_csv(tmp_path / "test.csv", [("the film",), ("a movie",)], ("text",))
    args = DataArguments(train_file=str(train), test_file=str(test), eval_split="test")
    with pytest.raises(ValueError) as error:
        load_task_datasets(args, args.task_spec)
    assert str(error.value) == (
        f"The test file {str(test)!r} has no labels (no 'label' column), and --eval_split test makes it the eval "
        "split, which checkpoints are chosen on: leave out --eval_split test, and the test file is predicted, not "
        "scored."
    )


def test_a_sentence_pair_test_file_in_glues_layout_is_predicted(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """RTE's test.tsv as GLUE ships it (index, sentence1, sentence2: no label) beside its train and dev files."""
    write_rte(tmp_path, 32, seed=0)
    write_rte(tmp_path, 10, seed=1)
    pairs = [
        (f"{city} is the capital of {country} .", f"{country} has a capital .") for city, country in CITIES.items()
    ]
    test = tmp_path / "test.tsv"
    lines = ["index\tsentence1\tsentence2"] + [f"{i}\t{a}\t{b}" for i, (a, b) in enumerate(pairs)]
    test.write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = [f"--{split}_file" for split in ("train", "validation", "test")]
    paths = [tmp_path / "train.tsv", tmp_path / "dev.tsv", test]
    output = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        main(run_argv(model_dir, output) + ["--task", "rte", *[str(a) for pair in zip(files, paths) for a in pair]])
    rows = assert_predicted_not_scored(output, caplog, "label", len(pairs))
    assert list(rows[0]) == ["index", "text", "text_pair", "prediction", "p_entailment", "p_not_entailment"]
    assert [(row["text"], row["text_pair"]) for row in rows] == pairs
    classifier = inference.load_pipeline("text-classification", str(output))
    for row in rows:
        assert row["prediction"] == inference.classify(classifier, row["text"], row["text_pair"])[0]["label"]


def predict_unscored_pairs(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture, task_type: str, count: int
) -> tuple[Path, list[tuple[str, str]], list[dict[str, str]]]:
    """Fine-tune a scored-pairs `task_type` (regression, embedding) on scored train and dev pairs with a test file of
    `count` pairs without scores, checked as predicted, not scored: the output folder, the test pairs and
    test_predictions.csv's rows."""
    header = ("text", "text_pair", "score")
    train = write_csv(tmp_path / "train.csv", scored_pairs(48, 0), header)
    dev = write_csv(tmp_path / "dev.csv", scored_pairs(16, 1), header)
    pairs = [(text, pair) for text, pair, _ in scored_pairs(count, 2)]
    test = write_csv(tmp_path / "test.csv", pairs, ("text", "text_pair"))
    output = tmp_path / "run"
    columns = ["--label_column", "score", "--text_pair_column", "text_pair", "--test_file", str(test)]
    with caplog.at_level(logging.INFO):
        main(base_argv(model_dir, train, dev, output) + ["--task_type", task_type, *columns])
    return output, pairs, assert_predicted_not_scored(output, caplog, "score", len(pairs))


def test_a_regression_test_file_without_scores_is_predicted(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """STS-B's shape: each test pair gets the saved regressor's score."""
    output, pairs, rows = predict_unscored_pairs(tmp_path, model_dir, caplog, "regression", 6)
    assert list(rows[0]) == ["index", "text", "text_pair", "prediction"]
    regressor = inference.load_pipeline("text-classification", str(output))
    for row, (text, pair) in zip(rows, pairs, strict=True):
        assert float(row["prediction"]) == pytest.approx(
            inference.classify(regressor, text, pair)[0]["score"], abs=1e-5
        )


def write_words(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    """A CoNLL-format file of words alone: one word per line, a blank line after each sentence, no tag column."""
    path.write_text("".join("\n".join(word for word, _ in s) + "\n\n" for s in sentences), encoding="utf-8")
    return path


def write_tagged_jsonl(path: Path, sentences: list[list[tuple[str, str]]], tags: bool = True) -> Path:
    """JSON Lines sentences: `tokens`, and their `ner_tags` unless `tags` is False."""
    rows = [{"tokens": [w for w, _ in s], **({"ner_tags": [t for _, t in s]} if tags else {})} for s in sentences]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("form", ["jsonl", "conll"])
def test_a_token_classification_test_file_without_tags_is_predicted(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    """Sentences of words alone (JSON Lines without `ner_tags`, or a CoNLL file of one word per line) get the saved
    tagger's tag of each word, read on its first piece as in evaluation."""
    if form == "jsonl":
        train = write_tagged_jsonl(tmp_path / "train.jsonl", conll_sentences(32, 0))
        dev = write_tagged_jsonl(tmp_path / "dev.jsonl", conll_sentences(8, 1))
        test = write_tagged_jsonl(tmp_path / "test.jsonl", conll_sentences(6, 2), tags=False)
    else:
        train = write_conll(tmp_path / "train.txt", conll_sentences(32, 0))
        dev = write_conll(tmp_path / "dev.txt", conll_sentences(8, 1))
        test = write_words(tmp_path / "test.txt", conll_sentences(6, 2))
    output = tmp_path / "run"
    flags = ["--task_type", "token-classification", "--test_file", str(test), "--learning_rate", "1e-2"]
    with caplog.at_level(logging.INFO):
        main(base_argv(model_dir, train, dev, output) + flags)
    rows = assert_predicted_not_scored(output, caplog, "ner_tags", 6, "tags")
    assert list(rows[0]) == ["index", "tokens", "prediction"]
    words = [[w for w, _ in s] for s in conll_sentences(6, 2)]
    assert [row["tokens"] for row in rows] == [" ".join(w) for w in words]
    assert [row["prediction"].split() for row in rows] == first_piece_tags(output, words, 24)


@pytest.mark.parametrize(
    "files, named, role",
    [
        ({"train_file": "words", "validation_file": "dev"}, "train_file", "train"),
        ({"train_file": "train", "validation_file": "words"}, "validation_file", "eval"),
        ({"train_file": "train", "test_file": "words", "eval_split": "test"}, "test_file", "eval"),  # eval split too
    ],
    ids=["train", "validation", "test-as-eval"],
)
def test_a_conll_file_of_words_alone_is_refused_where_tags_are_scored(
    tmp_path: Path, files: dict[str, str], named: str, role: str
) -> None:
    """A CoNLL file without a tag column is a test file to predict; as a train or eval split it is refused, naming the
    file and where the tags are expected, before its words could be taken for anything else."""
    paths = {
        "train": write_conll(tmp_path / "train.txt", conll_sentences(4, 0)),
        "dev": write_conll(tmp_path / "dev.txt", conll_sentences(2, 1)),
        "words": write_words(tmp_path / "words.txt", conll_sentences(2, 2)),
    }
    flags = {flag: str(paths[name]) if name in paths else name for flag, name in files.items()}
    args = DataArguments(task_type="token-classification", **flags)
    with pytest.raises(ValueError) as error:
        load_task_datasets(args, args.task_spec)
    doubled = (
        " --eval_split test makes the test file the eval split here: leave it out." if "eval_split" in files else ""
    )
    assert str(error.value) == (
        f"The {role} split's file {str(paths['words'])!r} (--{named}) holds words without tags (one column per "
        f"line), but the {role} split needs each word's tag: the last whitespace-separated column of its line "
        "(`word ... TAG`, as CoNLL-2003 has them). Only a test file may hold words alone, to be predicted." + doubled
    )


def test_a_question_answering_test_file_without_answers_is_predicted(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A SQuAD file whose questions carry no answers gets the saved model's answer, a span of its context, for each
    question."""
    from hf_bertscratch.inference import answer_question

    train = write_squad(tmp_path / "train.json", 0, articles=2, paragraphs=2)
    dev = write_squad(tmp_path / "dev.json", 1, articles=1, paragraphs=1)
    test = json.loads(write_squad(tmp_path / "test.json", 2, articles=1, paragraphs=2).read_text())
    for paragraph in test["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            del qa["answers"]
    (tmp_path / "test.json").write_text(json.dumps(test), encoding="utf-8")
    examples = [(qa, p["context"]) for p in test["data"][0]["paragraphs"] for qa in p["qas"]]
    output = tmp_path / "run"
    flags = ["--task_type", "question-answering", "--max_seq_length", "48", "--doc_stride", "16"]
    with caplog.at_level(logging.INFO):
        main(base_argv(model_dir, train, dev, output) + [*flags, "--test_file", str(tmp_path / "test.json")])
    rows = assert_predicted_not_scored(output, caplog, "answers", len(examples), "answers")
    assert list(rows[0]) == ["index", "id", "question", "prediction", "score"]
    assert [(row["id"], row["question"]) for row in rows] == [(qa["id"], qa["question"]) for qa, _ in examples]
    for (qa, context), row in zip(examples, rows, strict=True):
        found = answer_question(output, qa["question"], context, max_seq_length=48, doc_stride=16, align_to_words=False)
        assert found["answer"] == row["prediction"] == context[found["start"] : found["end"]]


def test_an_embedding_test_file_without_scores_gets_each_pairs_cosine(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bi-encoder predicts how alike a pair's texts are: the cosine of their vectors, as `similarity` gives it."""
    from hf_bertscratch.inference import similarity

    output, pairs, rows = predict_unscored_pairs(tmp_path, model_dir, caplog, "embedding", 4)
    assert list(rows[0]) == ["index", "text", "text_pair", "prediction"]
    for row, (text, pair) in zip(rows, pairs, strict=True):
        assert float(row["prediction"]) == pytest.approx(similarity(str(output), text, pair), abs=1e-5)
