"""Fine-tuning: truncation strategies, the task table, bad input raised before training, and an end-to-end run."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, BertTokenizer

import hf_bertscratch
from hf_bertscratch.finetuning import DataArguments, ModelArguments, check_data_arguments, load_model, main
from hf_bertscratch.task_shapes import ClassificationShape, FeatureSettings, make_tokenize_function, truncate_ids
from hf_bertscratch.tasks import TASKS

from conftest import cut_back_to_checkpoint, record_hub, tiny_config_kwargs

POSITIVE = "the movie was great and the acting was wonderful best love".split()
NEGATIVE = "the film was boring and the plot was bad worst hate terrible".split()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: BertTokenizer) -> Path:
    """A tiny BertScratch MLM checkpoint with its tokenizer, as pretrain.py would leave it."""
    path = tmp_path_factory.mktemp("pretrained")
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    torch.manual_seed(0)
    AutoModelForMaskedLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_csv(path: Path, rows: list[tuple[str, object]], header: tuple[str, str] = ("text", "label")) -> Path:
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


def base_argv(model_dir: Path, train: Path, dev: Path, output_dir: Path) -> list[str]:
    return [
        "--model_name_or_path",
        str(model_dir),
        "--train_file",
        str(train),
        "--validation_file",
        str(dev),
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


def test_tokenize_head_plus_tail_keeps_start_and_end(tokenizer: BertTokenizer) -> None:
    task = check_data_arguments(DataArguments(task="imdb"))
    text = "paris is the capital of france . the cat sat on the mat . i love it !"
    full = tokenizer(text, add_special_tokens=False)["input_ids"]
    tokenize = make_tokenize_function(
        tokenizer, task, {0: 0, 1: 1}, max_seq_length=10, strategy="head+tail", head_tokens=3
    )
    out = tokenize({"text": [text, "the cat"], "label": [1, 0]})
    assert out["input_ids"][0] == [tokenizer.cls_token_id] + full[:3] + full[-5:] + [tokenizer.sep_token_id]
    assert out["input_ids"][1] == tokenizer("the cat")["input_ids"]  # matches the tokenizer's own special tokens
    assert out["labels"] == [1, 0] and out["length"] == [10, 4]
    assert out["attention_mask"][1] == [1, 1, 1, 1] and out["token_type_ids"][1] == [0, 0, 0, 0]


def test_pair_tokenization_uses_both_columns(tokenizer: BertTokenizer) -> None:
    task = check_data_arguments(DataArguments(train_file="x.csv", text_column="a", text_pair_column="b"))
    tokenize = make_tokenize_function(tokenizer, task, {0: 0}, 16, "head", 0)
    out = tokenize({"a": ["the cat"], "b": ["the dog"], "label": [0]})
    assert out["input_ids"][0] == tokenizer("the cat", "the dog")["input_ids"]
    assert 1 in out["token_type_ids"][0]


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
        ({"task": "cola", "task_type": "regression"}, "classification task"),
        ({"task": "conll2003", "text_column": "sentence"}, r"\['text'\] do not apply"),
        ({"task": "stsb", "class_names": "low,high"}, "regression task, which has no classes"),
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


def test_string_label_outside_class_names(tmp_path: Path, model_dir: Path) -> None:
    train = write_csv(tmp_path / "train.csv", [("the cat", "neg"), ("the dog", "pos")])
    dev = write_csv(tmp_path / "dev.csv", [("the cat", "neutral")])
    with pytest.raises(ValueError, match="neutral"):
        main(base_argv(model_dir, train, dev, tmp_path / "out") + ["--class_names", "neg,pos"])


def classes(*names: str) -> ClassificationShape:
    """The classification shape of a task with these classes (as prepare_labels leaves it)."""
    shape = ClassificationShape(TASKS["sst2"], FeatureSettings(), tokenizer=None)
    shape.names = list(names)
    return shape


def test_mismatched_num_labels_is_an_error(tmp_path: Path, model_dir: Path) -> None:
    classifier_dir = tmp_path / "classifier3"
    AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=3).save_pretrained(classifier_dir)
    with pytest.raises(ValueError, match="num_labels=3.*2 outputs"):
        load_model(ModelArguments(model_name_or_path=str(classifier_dir)), classes("neg", "pos"))
    model = load_model(
        ModelArguments(model_name_or_path=str(classifier_dir), ignore_mismatched_sizes=True), classes("neg", "pos")
    )
    assert model.config.num_labels == 2 and model.config.id2label == {0: "neg", 1: "pos"}


def test_init_from_scratch_ignores_pretrained_weights(model_dir: Path) -> None:
    pretrained = load_model(ModelArguments(model_name_or_path=str(model_dir)), classes("a", "b"))
    scratch = load_model(ModelArguments(model_name_or_path=str(model_dir), init_from_scratch=True), classes("a", "b"))
    assert pretrained.config.to_dict()["hidden_size"] == scratch.config.to_dict()["hidden_size"]
    name = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(pretrained.state_dict()[name], scratch.state_dict()[name])


# -------------------------------------------------------------------------------------------------- end to end
def test_finetune_end_to_end(tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path]) -> None:
    output = tmp_path / "run"
    main(base_argv(model_dir, *data_files, output) + ["--truncation", "head+tail", "--head_tokens", "6"])

    results = json.loads((output / "all_results.json").read_text())
    with (output / "predictions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    with data_files[1].open() as handle:
        dev = list(csv.DictReader(handle))
    assert [r["text"] for r in rows] == [d["text"] for d in dev]  # one row per eval example, in order
    assert [r["label"] for r in rows] == [d["label"] for d in dev]
    accuracy = sum(r["label"] == r["prediction"] for r in rows) / len(rows)
    assert results["eval_accuracy"] == pytest.approx(accuracy)
    assert all(abs(float(r["p_0"]) + float(r["p_1"]) - 1) < 1e-4 for r in rows)
    assert results["global_step"] == 12 and results["truncation"] == "head+tail"
    for name in ("confusion_matrix.png", "loss_curve.png", "model.safetensors", "config.json"):
        assert (output / name).is_file(), name
    state = json.loads((output / "trainer_state.json").read_text())
    assert sum("eval_accuracy" in log for log in state["log_history"]) >= 2  # evaluated every epoch
    assert state["best_model_checkpoint"] is not None
    reloaded = AutoModelForSequenceClassification.from_pretrained(output)
    assert reloaded.config.num_labels == 2


def test_finished_output_is_kept_and_an_interrupted_run_resumes(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path]
) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    main(base_argv(model_dir, *data_files, full))
    finished = (full / "all_results.json").read_text()
    with pytest.raises(ValueError, match=r"already holds a finished run \(model.safetensors, all_results.json"):
        main(base_argv(model_dir, *data_files, full))
    assert (full / "all_results.json").read_text() == finished  # refused before anything was written

    # An interruption after the first epoch's checkpoint: only checkpoint-6 is left.
    main(base_argv(model_dir, *data_files, cut))
    cut_back_to_checkpoint(cut, "checkpoint-6")
    main(base_argv(model_dir, *data_files, cut) + ["--resume_from_checkpoint", "last"])
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


def test_push_to_hub_uploads_the_finished_classifier(
    tmp_path: Path, model_dir: Path, data_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fine-tuning's --push_to_hub: one upload of the finished folder with the classifier card and remote code."""
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
    assert "text-classification" in upload["files"]["README.md"].decode()


def test_dropout_is_set_for_fine_tuning(model_dir: Path, tmp_path: Path) -> None:
    """A checkpoint pretrained without dropout fine-tunes with BERT's 0.1 unless told to keep its own."""
    from hf_bertscratch.finetuning import ModelArguments

    no_dropout = tmp_path / "no-dropout"
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
    model.save_pretrained(no_dropout)
    for scratch in (False, True):
        classifier = load_model(
            ModelArguments(model_name_or_path=str(no_dropout), init_from_scratch=scratch), classes("a", "b")
        )
        assert (classifier.config.hidden_dropout_prob, classifier.config.attention_probs_dropout_prob) == (0.1, 0.1)
    kept = load_model(ModelArguments(model_name_or_path=str(no_dropout), dropout=-1), classes("a", "b"))
    assert (kept.config.hidden_dropout_prob, kept.config.attention_probs_dropout_prob) == (0.0, 0.0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\) or -1 \(the checkpoint's\), got 1.5"):
        load_model(ModelArguments(model_name_or_path=str(no_dropout), dropout=1.5), classes("a", "b"))
