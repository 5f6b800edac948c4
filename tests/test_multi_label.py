"""Multi-label classification: label sets read from jsonl lists or separated csv fields, micro/macro F1 and subset
accuracy at a threshold on the sigmoid (0.5, given, or chosen on the eval split), the no-learning baselines, a tiny
fine-tune, `bertscratch classify` and the front door."""

from __future__ import annotations

import csv
import json
import re
import shutil
import warnings
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score
from test_cli import assert_library_and_front_door_refuse
from test_front_door import front_door
from transformers import AutoConfig, BertTokenizer, EvalPrediction

import hf_bertscratch
from hf_bertscratch.baselines import no_learning_scores
from hf_bertscratch.finetuning import main
from hf_bertscratch.metrics import MultiLabelMetrics, choose_label_thresholds, choose_threshold, labels_above_threshold
from hf_bertscratch.tasks import TaskOverrides, resolve_task
from hf_bertscratch.tasks.classification import MultiLabelClassificationShape, label_sets
from hf_bertscratch.tasks.features import FeatureSettings
from hf_bertscratch_cli import dispatch

TASK_TYPE = "multi-label-classification"
# Words that carry each label: a text holds the words of its labels, and filler.
LABEL_WORDS = {"cats": ["cat", "mat"], "dogs": ["dog", "ran"], "films": ["movie", "film"]}
FILLER = ["the", "a", "is", "of"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def rows(label_lists: list[list[str]]) -> list[dict]:
    """One example per label list: the words of its labels among filler."""
    return [
        {"text": " ".join(FILLER[: 1 + i % 3] + [word for label in labels for word in LABEL_WORDS[label]]),
         "labels": labels}
        for i, labels in enumerate(label_lists)
    ]  # fmt: skip


TRAIN_SETS = [["cats"], ["dogs"], ["cats", "dogs"], [], ["films"], ["cats", "films"], ["dogs"], ["cats"]] * 3
EVAL_SETS = [["cats"], ["dogs", "films"], [], ["cats", "dogs"], ["films"], ["dogs"]]


def write_jsonl(path: Path, examples: list[dict]) -> Path:
    path.write_text("".join(json.dumps(example) + "\n" for example in examples), encoding="utf-8")
    return path


def task(**overrides: object):
    return resolve_task(TaskOverrides(task_type=TASK_TYPE, columns={"label": "labels"}, **overrides))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- metrics
def test_metrics_are_sklearns_on_the_labels_above_one_half() -> None:
    logits = np.array([[2.0, -1.0, 0.5], [-3.0, -0.2, 0.0], [1.0, 1.0, -1.0], [-1.0, 4.0, 3.0], [0.1, -2.0, -2.0]])
    labels = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=np.float32)
    predicted = (1 / (1 + np.exp(-logits)) > 0.5).astype(int)  # a logit of 0 is a sigmoid of 0.5: not above it
    assert predicted[1].tolist() == [0, 0, 0]
    scores = MultiLabelMetrics(3)(EvalPrediction(predictions=logits, label_ids=labels))
    assert scores["micro_f1"] == pytest.approx(f1_score(labels, predicted, average="micro"))
    assert scores["macro_f1"] == pytest.approx(f1_score(labels, predicted, average="macro", zero_division=0))
    assert scores["subset_accuracy"] == pytest.approx(accuracy_score(labels, predicted))
    assert scores["subset_accuracy"] == pytest.approx(2 / 5)  # rows 0 and 2 exactly right
    assert scores["micro_f1"] != pytest.approx(scores["macro_f1"])


def test_a_model_that_predicts_no_label_scores_zero_f1_without_a_warning() -> None:
    labels = np.array([[1, 0], [0, 1]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = MultiLabelMetrics(2)(EvalPrediction(predictions=np.full((2, 2), -5.0), label_ids=labels))
    assert scores["micro_f1"] == 0.0 and scores["macro_f1"] == 0.0 and scores["subset_accuracy"] == 0.0
    assert scores["top_set_share"] == 1.0


# Sigmoids of 3 examples x 2 labels, none on a threshold of the grid, and their gold labels: micro F1 0.667 at 0.5,
# 8/9 at 0.25 and 0.3 (all but 0.22 predicted), 0.75 at 0.35 and 0.4, 6/7 at 0.45.
SIGMOIDS = np.array([[0.31, 0.62], [0.47, 0.22], [0.72, 0.41]])
GOLD = np.array([[1, 1], [1, 0], [1, 0]], dtype=np.float32)


def logits_of(probabilities: np.ndarray) -> np.ndarray:
    return np.log(probabilities / (1 - probabilities))


def test_metrics_and_predictions_read_the_threshold_given() -> None:
    logits = logits_of(SIGMOIDS)
    assert labels_above_threshold(logits).tolist() == [[0, 1], [0, 0], [1, 0]]
    assert labels_above_threshold(logits, 0.3).tolist() == [[1, 1], [1, 0], [1, 1]]
    prediction = EvalPrediction(predictions=logits, label_ids=GOLD)
    assert MultiLabelMetrics(2)(prediction)["micro_f1"] == pytest.approx(2 / 3)
    assert MultiLabelMetrics(2, threshold=0.3)(prediction)["micro_f1"] == pytest.approx(8 / 9)


def test_the_chosen_threshold_is_the_grids_best_micro_f1_the_nearest_to_one_half_of_a_tie() -> None:
    assert choose_threshold(logits_of(SIGMOIDS), GOLD) == 0.3  # 0.25 scores the same, further from 0.5
    assert choose_threshold(logits_of(SIGMOIDS[:, :1]), GOLD[:, :1]) == 0.3  # 1.0 from 0.05 to 0.3
    assert choose_threshold(logits_of(SIGMOIDS), np.zeros_like(GOLD)) == 0.5  # nothing to find: F1 0 everywhere


def test_a_threshold_chosen_by_macro_f1_is_the_grids_best_mean_of_the_label_f1s() -> None:
    # At 0.45 the labels score F1 0.8 and 1.0 (macro 0.9); at 0.3, micro F1's choice, 1.0 and 0.667 (macro 0.833).
    assert choose_threshold(logits_of(SIGMOIDS), GOLD, metric="macro_f1") == 0.45
    with pytest.raises(ValueError, match="choose a multi-label threshold by 'accuracy'; expected 'micro_f1' or 'macro"):
        choose_threshold(logits_of(SIGMOIDS), GOLD, metric="accuracy")


def test_thresholds_chosen_per_label_are_each_labels_best_and_the_global_one_for_a_label_without_positives() -> None:
    # Label 0 (gold everywhere) scores F1 1.0 up to 0.3; label 1 (gold in the first example) from 0.45 to 0.6;
    # label 2 has no gold example: it keeps the one threshold chosen for every label by the same metric.
    sigmoids = np.column_stack([SIGMOIDS, [0.9, 0.1, 0.2]])
    gold = np.column_stack([GOLD, np.zeros(3, dtype=np.float32)])
    assert choose_threshold(logits_of(sigmoids), gold) == 0.3
    assert choose_label_thresholds(logits_of(sigmoids), gold) == [0.3, 0.5, 0.3]
    assert choose_threshold(logits_of(sigmoids), gold, metric="macro_f1") == 0.45
    assert choose_label_thresholds(logits_of(sigmoids), gold, metric="macro_f1") == [0.3, 0.5, 0.45]
    thresholds = choose_label_thresholds(logits_of(sigmoids), gold)
    assert labels_above_threshold(logits_of(sigmoids), thresholds).tolist() == [[1, 1, 1], [1, 0, 0], [1, 0, 0]]
    prediction = EvalPrediction(predictions=logits_of(sigmoids), label_ids=gold)
    assert MultiLabelMetrics(3, threshold=thresholds)(prediction)["micro_f1"] == pytest.approx(8 / 9)


# ------------------------------------------------------------------------------------------------------- labels
def test_label_sets_are_lists_or_separated_fields_and_may_be_empty() -> None:
    values = [["b", "a"], "a,c", " c , a ", "", None, [], "b"]
    assert label_sets(values, ",") == [["b", "a"], ["a", "c"], ["c", "a"], [], [], [], ["b"]]
    assert label_sets(["a|b", "x,y"], "|") == [["a", "b"], ["x,y"]]


def shape_of(
    train: list[list], eval_: list[list], threshold: float | None = 0.5, **overrides: object
) -> MultiLabelClassificationShape:
    raw = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": ["t"] * len(train), "labels": train}),
            "eval": datasets.Dataset.from_dict({"text": ["t"] * len(eval_), "labels": eval_}),
        }
    )
    shape = MultiLabelClassificationShape(task(**overrides), FeatureSettings(), None, threshold)  # type: ignore[arg-type]
    shape.prepare_labels(raw)
    return shape


def test_a_shape_scores_at_the_threshold_given_or_at_the_one_it_chooses_on_the_eval_predictions() -> None:
    from transformers.trainer_utils import PredictionOutput

    from hf_bertscratch.cards import threshold_used

    prediction = PredictionOutput(predictions=logits_of(SIGMOIDS), label_ids=GOLD, metrics={})
    raw = datasets.Dataset.from_dict({"text": ["t"] * 3})  # compute_metrics' examples: a multi-label shape reads none
    given = shape_of([["a"], ["b"]], [["a"]], threshold=0.45)
    assert given.compute_metrics(raw, raw)(prediction)["micro_f1"] == pytest.approx(6 / 7)
    assert given.settle_threshold(prediction) == {} and given.threshold == 0.45
    assert given.config_updates()["multi_label_threshold"] == 0.45
    assert threshold_used({"multi_label_threshold": 0.45, "multi_label_threshold_chosen": False}) == (
        "A label is predicted where its sigmoid is above 0.45 (given at fine-tuning)."
    )
    chosen = shape_of([["a"], ["b"]], [["a"]], threshold=None)
    assert chosen.threshold == 0.5  # until the eval predictions choose it
    assert chosen.config_updates()["multi_label_threshold"] is None  # a checkpoint's config: none chosen yet
    assert chosen.settle_threshold(prediction)["micro_f1"] == pytest.approx(8 / 9)
    assert chosen.threshold == 0.3
    assert chosen.config_updates()["multi_label_threshold"] == 0.3
    assert chosen.compute_metrics(raw, raw)(prediction)["micro_f1"] == pytest.approx(8 / 9)


def test_a_shape_chooses_a_threshold_per_label_by_the_metric_it_is_told_and_records_each_labels() -> None:
    from transformers.trainer_utils import PredictionOutput

    from hf_bertscratch.cards import threshold_used

    prediction = PredictionOutput(predictions=logits_of(SIGMOIDS), label_ids=GOLD, metrics={})
    raw = datasets.Dataset.from_dict({"text": ["t"] * 3})
    by_macro = shape_of([["a"], ["b"]], [["a"]], threshold=None)
    by_macro.threshold_metric = "macro_f1"
    assert by_macro.settle_threshold(prediction)["macro_f1"] == pytest.approx(0.9)
    assert by_macro.threshold == 0.45
    per_label = shape_of([["a"], ["b"]], [["a"]], threshold=None)
    per_label.per_label, per_label.threshold_metric = True, "macro_f1"
    assert per_label.settle_threshold(prediction)["macro_f1"] == 1.0
    assert per_label.threshold == {"a": 0.3, "b": 0.5}
    assert per_label.config_updates()["multi_label_threshold"] == {"a": 0.3, "b": 0.5}
    assert per_label.compute_metrics(raw, raw)(prediction)["micro_f1"] == 1.0
    results = {
        "multi_label_threshold": {"a": 0.3, "b": 0.5},
        "multi_label_threshold_chosen": True,
        "multi_label_threshold_metric": "macro_f1",
    }
    assert threshold_used(results) == (
        "Each label is predicted where its sigmoid is above its own threshold (a 0.3, b 0.5), each chosen for its label "
        "on the eval split: the one of 0.05, 0.10, ..., 0.95 that gave the chosen model its best eval macro F1, so the "
        "`eval_*` scores are at their best thresholds."
    )


def test_the_log_says_the_thresholds_chosen_and_the_metric_they_were_chosen_by(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from transformers.trainer_utils import PredictionOutput

    from hf_bertscratch.finetuning import settle_threshold

    at_one_half = {"eval_micro_f1": 2 / 3, "eval_macro_f1": 0.75}
    prediction = PredictionOutput(predictions=logits_of(SIGMOIDS), label_ids=GOLD, metrics=at_one_half)
    shape = shape_of([["a"], ["b"]], [["a"]], threshold=None)
    shape.per_label, shape.threshold_metric = True, "macro_f1"
    caplog.clear()
    with caplog.at_level("INFO", logger="hf_bertscratch.finetuning"):
        assert settle_threshold(shape, prediction, test_scored=True)["eval_macro_f1"] == 1.0
    assert [record.getMessage() for record in caplog.records if record.name == "hf_bertscratch.finetuning"] == [
        "Multi-label thresholds per label (a 0.3, b 0.5), chosen by eval macro F1 on the 3 eval examples: eval macro F1 "
        "1.0000 (0.7500 at 0.5); the test split is scored at them."
    ]


def test_the_label_names_are_the_sorted_train_labels_and_the_head_is_multi_label() -> None:
    shape = shape_of(["dogs,cats", "", "films"], ["cats", "dogs,films"])
    assert shape.names == ["cats", "dogs", "films"]
    updates = shape.config_updates()
    assert updates["problem_type"] == "multi_label_classification"
    assert updates["num_labels"] == 3 and updates["id2label"] == {0: "cats", 1: "dogs", 2: "films"}


def test_a_label_the_train_split_lacks_is_refused_in_one_line_naming_it() -> None:
    with pytest.raises(ValueError) as error:
        shape_of([["cats"], ["dogs"]], [["cats", "birds"]])
    assert str(error.value) == (
        "Label(s) ['birds'] in the eval split are outside the label set ['cats', 'dogs'] (the train split's labels, "
        "or --class_names)."
    )


def test_class_names_give_the_order_and_may_name_a_label_no_train_example_holds() -> None:
    shape = shape_of([["dogs"], ["cats"]], [["birds"]], label_names=["dogs", "cats", "birds"])
    assert shape.names == ["dogs", "cats", "birds"]


def test_a_train_split_without_any_label_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^No example of the train split has a label"):
        shape_of([[], []], [["cats"]])


def test_integer_labels_are_ids_into_the_class_names_as_single_label_ids_are() -> None:
    """Lists of class ids (GoEmotions' layout), in a jsonl list or a csv field: ids 0..K-1 into --class_names, or
    named by their numbers in numeric order without them."""
    named = shape_of([[0, 2], [10]], [[1]], label_names=[f"e{i}" for i in range(11)])
    assert named.names == [f"e{i}" for i in range(11)]
    assert named.encode([[0, 2], "10", []]) == [
        [1.0, 0.0, 1.0, *[0.0] * 8],
        [*[0.0] * 10, 1.0],
        [0.0] * 11,
    ]
    unnamed = shape_of([[0, 2], [10]], [[1]])
    assert unnamed.names == [str(i) for i in range(11)]
    assert unnamed.encode(["2,10"]) == [[0.0, 0.0, 1.0, *[0.0] * 7, 1.0]]
    with pytest.raises(ValueError) as error:
        shape_of([[0], [3]], [[1]], label_names=["a", "b", "c"])
    assert str(error.value) == (
        "Label(s) [3] in the train split are outside the label set ['a', 'b', 'c'] (the train split's labels, or "
        "--class_names); integer labels are ids into --class_names, from 0."
    )


# ---------------------------------------------------------------------------------------------------- baselines
def multi_hot(sets: list[list[str]], names: list[str]) -> list[list[float]]:
    return [[float(name in labels) for name in names] for labels in sets]


def test_no_learning_baselines_are_the_label_majorities_the_commonest_set_and_a_bag_of_words() -> None:
    names = sorted(LABEL_WORDS)
    train, dev = rows(TRAIN_SETS), rows(EVAL_SETS)
    train_split = datasets.Dataset.from_list(train)
    dev_split = datasets.Dataset.from_list(dev)
    spec = task(label_names=names)
    y_train, y_dev = multi_hot(TRAIN_SETS, names), multi_hot(EVAL_SETS, names)
    scores = no_learning_scores(spec, train_split, y_train, {"eval": (dev_split, y_dev)})["eval"]
    assert set(scores) == {"label_majority", "commonest_set", "bag_of_words", "bag_of_word_pairs"}
    truth = np.array(y_dev, dtype=int)
    # Each label is absent in most train examples: its majority value is 0, so nothing is predicted.
    nothing = np.zeros_like(truth)
    assert scores["label_majority"]["micro_f1"] == 0.0
    assert scores["label_majority"]["subset_accuracy"] == pytest.approx(accuracy_score(truth, nothing))
    # The commonest train set: ["cats"] (6 of 24) and ["dogs"] (6) tie; the first seen wins.
    cats = np.tile([1, 0, 0], (len(truth), 1))
    assert scores["commonest_set"]["micro_f1"] == pytest.approx(f1_score(truth, cats, average="micro"))
    assert scores["commonest_set"]["macro_f1"] == pytest.approx(f1_score(truth, cats, average="macro", zero_division=0))
    # The bag of words: one logistic regression per label on the train texts' TF-IDF.
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    vectorizer = TfidfVectorizer(sublinear_tf=True, min_df=2)
    fitted = OneVsRestClassifier(LogisticRegression(C=4.0, max_iter=1000)).fit(
        vectorizer.fit_transform([r["text"] for r in train]), np.array(y_train, dtype=int)
    )
    predicted = fitted.predict(vectorizer.transform([r["text"] for r in dev]))
    assert scores["bag_of_words"]["micro_f1"] == pytest.approx(f1_score(truth, predicted, average="micro"))
    assert scores["bag_of_words"]["subset_accuracy"] == pytest.approx(accuracy_score(truth, predicted))


def test_a_bag_of_words_scores_every_split_at_the_threshold_chosen_on_the_first_as_a_chosen_one_is() -> None:
    from hf_bertscratch.baselines import bag_of_words

    names = sorted(LABEL_WORDS)
    train, dev, test = rows(TRAIN_SETS), rows(EVAL_SETS), rows(TRAIN_SETS[:6])
    y_train, y_dev, y_test = (multi_hot(sets, names) for sets in (TRAIN_SETS, EVAL_SETS, TRAIN_SETS[:6]))
    seen: list[tuple[np.ndarray, list]] = []

    def choose(logits: np.ndarray, labels: np.ndarray) -> float:
        seen.append((logits, labels.tolist()))
        return 0.999  # above every sigmoid: no label predicted

    scored = [([r["text"] for r in dev], y_dev), ([r["text"] for r in test], y_test)]
    at_half = bag_of_words([r["text"] for r in train], y_train, scored, len(names))
    chosen = bag_of_words([r["text"] for r in train], y_train, scored, len(names), choose=choose)
    assert [labels for _, labels in seen] == [np.asarray(y_dev).tolist()]  # chosen once, on the first split
    assert seen[0][0].shape == (len(dev), len(names))
    assert at_half[0]["micro_f1"] > 0 and at_half[1]["micro_f1"] > 0
    assert chosen[0]["micro_f1"] == chosen[1]["micro_f1"] == 0.0


# ------------------------------------------------------------------------------------------------ fine-tuning
def fine_tune(folder: Path, model_dir: Path, *flags: str, test_sets: list[list[str]] | None = None) -> Path:
    """A fine-tune of the tiny model on jsonl label lists written into `folder` (a test split of `test_sets` too),
    a few steps, with `flags` besides: its output_dir."""
    train = write_jsonl(folder / "train.jsonl", rows(TRAIN_SETS))
    dev = write_jsonl(folder / "dev.jsonl", rows(EVAL_SETS))
    test = ["--test_file", str(write_jsonl(folder / "test.jsonl", rows(test_sets)))] if test_sets else []
    output = folder / "run"
    main(
        ["--model_name_or_path", str(model_dir), "--task_type", TASK_TYPE, "--label_column", "labels",
         "--train_file", str(train), "--validation_file", str(dev), *test, "--output_dir", str(output),
         "--max_seq_length", "16", "--per_device_train_batch_size", "8", "--num_train_epochs", "2",
         "--learning_rate", "1e-3", "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true", *flags]
    )  # fmt: skip
    return output


@pytest.fixture(scope="module")
def multi_label_run(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """A fine-tune of the tiny model on jsonl label lists, a few steps: its output_dir."""
    return fine_tune(tmp_path_factory.mktemp("multi_label"), model_dir)


def test_a_fine_tune_scores_micro_f1_from_its_predictions_beside_the_baselines(multi_label_run: Path) -> None:
    results = json.loads((multi_label_run / "all_results.json").read_text())
    assert results["task_type"] == TASK_TYPE and results["main_metric"] == "micro_f1"
    for key in ("eval_micro_f1", "eval_macro_f1", "eval_subset_accuracy", "baseline_label_majority",
                "baseline_commonest_set", "baseline_bag_of_words"):  # fmt: skip
        assert isinstance(results[key], float), key
    config = AutoConfig.from_pretrained(multi_label_run)
    assert config.problem_type == "multi_label_classification"
    assert list(config.id2label.values()) == ["cats", "dogs", "films"]
    with (multi_label_run / "predictions.csv").open() as handle:
        predictions = list(csv.DictReader(handle))
    assert len(predictions) == len(EVAL_SETS)
    truth = np.array(multi_hot(EVAL_SETS, ["cats", "dogs", "films"]), dtype=int)
    assert [row["labels"] for row in predictions] == [",".join(labels) for labels in EVAL_SETS]
    predicted = np.array([[float(row[f"p_{name}"]) > 0.5 for name in ("cats", "dogs", "films")] for row in predictions])
    names = np.array(["cats", "dogs", "films"])
    assert [row["prediction"] for row in predictions] == [",".join(names[p]) for p in predicted]
    assert results["eval_micro_f1"] == pytest.approx(f1_score(truth, predicted, average="micro"), abs=1e-6)
    assert results["eval_subset_accuracy"] == pytest.approx(accuracy_score(truth, predicted), abs=1e-6)
    assert (multi_label_run / "per_label_f1.png").is_file()
    card = (multi_label_run / "README.md").read_text()
    assert "multi-label" in card and "sigmoid" in card


def test_classify_prints_each_labels_sigmoid_and_the_labels_above_one_half(
    multi_label_run: Path, capsys: pytest.CaptureFixture, tokenizer: BertTokenizer
) -> None:
    text = "the cat sat on the mat"
    model = hf_bertscratch.BertScratchForSequenceClassification.from_pretrained(multi_label_run).eval()
    with torch.no_grad():
        probabilities = torch.sigmoid(model(**tokenizer(text, return_tensors="pt")).logits[0]).numpy()
    expected = {model.config.id2label[i]: float(p) for i, p in enumerate(probabilities)}
    above = [name for name, p in sorted(expected.items(), key=lambda item: -item[1]) if p > 0.5]
    capsys.readouterr()
    dispatch.main(["classify", str(multi_label_run), text])
    *lines, last = capsys.readouterr().out.splitlines()
    printed = {label: float(score) for label, score in (line.split() for line in lines)}
    assert printed == pytest.approx(expected, abs=1e-4)
    assert list(printed) == sorted(printed, key=printed.get, reverse=True)
    assert last == f"above 0.5: {', '.join(above) if above else '(none)'}"
    dispatch.main(["classify", str(multi_label_run), text, "--json"])
    answer = json.loads(capsys.readouterr().out)
    assert answer["predicted_labels"] == above
    assert {entry["label"]: entry["score"] for entry in answer["labels"]} == pytest.approx(expected, abs=1e-4)


def test_a_fine_tune_records_the_threshold_of_its_scores_one_half_by_default(multi_label_run: Path) -> None:
    results = json.loads((multi_label_run / "all_results.json").read_text())
    assert results["multi_label_threshold"] == 0.5 and results["multi_label_threshold_chosen"] is False
    assert AutoConfig.from_pretrained(multi_label_run).multi_label_threshold == 0.5
    card = (multi_label_run / "README.md").read_text()
    assert "A label is predicted where its sigmoid is above 0.5 (the default)." in card


def test_a_cross_encoder_of_the_folder_predicts_each_labels_sigmoid_as_the_pipeline_gives_it(
    multi_label_run: Path, tokenizer: BertTokenizer
) -> None:
    """sentence-transformers' CrossEncoder applies the activation the config names: each label's sigmoid, the scores
    transformers' text-classification pipeline gives (its default for a head of several outputs is the logits)."""
    from sentence_transformers import CrossEncoder
    from transformers import pipeline

    assert AutoConfig.from_pretrained(multi_label_run).sentence_transformers == {
        "activation_fn": "torch.nn.modules.activation.Sigmoid"
    }
    pairs = [("the cat sat on the mat", "a dog ran"), ("a movie", "the film is a film")]
    predicted = CrossEncoder(str(multi_label_run), device="cpu").predict(pairs)
    model = hf_bertscratch.BertScratchForSequenceClassification.from_pretrained(multi_label_run).eval()
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer)
    for (text, text_pair), scores in zip(pairs, predicted, strict=True):
        with torch.no_grad():
            logits = model(**tokenizer(text, text_pair, return_tensors="pt")).logits[0]
        assert scores.tolist() == pytest.approx(torch.sigmoid(logits).tolist(), abs=1e-5)
        by_label = {
            entry["label"]: entry["score"] for entry in classify({"text": text, "text_pair": text_pair}, top_k=None)
        }
        assert scores.tolist() == pytest.approx([by_label[name] for name in ("cats", "dogs", "films")], abs=1e-5)


TEST_SETS = [["dogs"], ["cats", "films"], ["films"], [], ["cats"], ["cats", "dogs", "films"], ["dogs", "films"]]


@pytest.fixture(scope="module")
def chosen_threshold_run(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """The fine-tune of `multi_label_run` with a test split, its threshold chosen on the eval split: its output_dir."""
    folder = tmp_path_factory.mktemp("chosen_threshold")
    return fine_tune(folder, model_dir, "--multi_label_threshold", "auto", test_sets=TEST_SETS)


def sigmoids_and_gold(predictions_csv: Path) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """A multi-label run's predictions.csv: each example's sigmoids (N, K), gold 0/1 rows (N, K) and the rows."""
    with predictions_csv.open() as handle:
        table = list(csv.DictReader(handle))
    names = ["cats", "dogs", "films"]
    sigmoids = np.array([[float(row[f"p_{name}"]) for name in names] for row in table])
    gold = np.array([[name in row["labels"].split(",") for name in names] for row in table], dtype=int)
    return sigmoids, gold, table


def test_a_threshold_chosen_on_the_eval_split_scores_eval_and_test_and_is_recorded(chosen_threshold_run: Path) -> None:
    results = json.loads((chosen_threshold_run / "all_results.json").read_text())
    threshold = results["multi_label_threshold"]
    assert threshold != 0.5  # a choice that moved it: one skipped would leave 0.5 and pass the checks below too
    assert results["multi_label_threshold_chosen"] is True and results["multi_label_threshold_metric"] == "micro_f1"
    assert AutoConfig.from_pretrained(chosen_threshold_run).multi_label_threshold == threshold
    eval_sigmoids, eval_gold, eval_rows = sigmoids_and_gold(chosen_threshold_run / "predictions.csv")
    # Chosen on the eval split's sigmoids alone: the grid's best eval micro F1, the nearest to 0.5 of a tie.
    grid = [round(0.05 * step, 2) for step in range(1, 20)]
    f1s = {t: f1_score(eval_gold, eval_sigmoids > t, average="micro", zero_division=0) for t in grid}
    best = max(f1s.values())
    assert threshold == min((t for t in grid if f1s[t] == pytest.approx(best)), key=lambda t: abs(t - 0.5))
    assert results["eval_micro_f1"] == pytest.approx(f1s[threshold], abs=1e-6)
    names = np.array(["cats", "dogs", "films"])
    assert [row["prediction"] for row in eval_rows] == [",".join(names[row > threshold]) for row in eval_sigmoids]
    test_sigmoids, test_gold, _ = sigmoids_and_gold(chosen_threshold_run / "test_predictions.csv")
    assert results["test_micro_f1"] == pytest.approx(
        f1_score(test_gold, test_sigmoids > threshold, average="micro", zero_division=0), abs=1e-6
    )
    assert results["test_subset_accuracy"] == pytest.approx(accuracy_score(test_gold, test_sigmoids > threshold))
    card = (chosen_threshold_run / "README.md").read_text()
    assert (
        f"A label is predicted where its sigmoid is above {threshold:g}, the threshold chosen on the eval split" in card
    )


@pytest.fixture(scope="module")
def per_label_run(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """The fine-tune of `chosen_threshold_run` judged by macro F1, a threshold chosen for each label: its output_dir."""
    folder = tmp_path_factory.mktemp("per_label")
    flags = ("--multi_label_threshold", "auto-per-label", "--metric_for_best_model", "macro_f1")
    return fine_tune(folder, model_dir, *flags, test_sets=TEST_SETS)


def test_thresholds_chosen_per_label_on_the_eval_split_score_eval_and_test_and_are_recorded(
    per_label_run: Path,
) -> None:
    results = json.loads((per_label_run / "all_results.json").read_text())
    names = ["cats", "dogs", "films"]
    thresholds = results["multi_label_threshold"]
    assert list(thresholds) == names
    assert set(thresholds.values()) != {0.5}  # a choice that moved one: one skipped would leave 0.5 for each
    assert results["multi_label_threshold_chosen"] is True and results["multi_label_threshold_metric"] == "macro_f1"
    assert AutoConfig.from_pretrained(per_label_run).multi_label_threshold == thresholds
    eval_sigmoids, eval_gold, eval_rows = sigmoids_and_gold(per_label_run / "predictions.csv")
    # Chosen on the eval split's sigmoids alone, by the run's metric for best model (macro F1).
    assert thresholds == dict(
        zip(names, choose_label_thresholds(logits_of(eval_sigmoids), eval_gold, metric="macro_f1"))
    )
    vector = np.array([thresholds[name] for name in names])
    for metric, average in (("macro_f1", "macro"), ("micro_f1", "micro")):
        assert results[f"eval_{metric}"] == pytest.approx(
            f1_score(eval_gold, eval_sigmoids > vector, average=average, zero_division=0), abs=1e-6
        )
    assert [row["prediction"] for row in eval_rows] == [
        ",".join(np.array(names)[row > vector]) for row in eval_sigmoids
    ]
    test_sigmoids, test_gold, _ = sigmoids_and_gold(per_label_run / "test_predictions.csv")
    assert results["test_macro_f1"] == pytest.approx(
        f1_score(test_gold, test_sigmoids > vector, average="macro", zero_division=0), abs=1e-6
    )
    card = (per_label_run / "README.md").read_text()
    listed = ", ".join(f"{name} {thresholds[name]:g}" for name in names)
    assert f"Each label is predicted where its sigmoid is above its own threshold ({listed})" in card


def with_threshold(run: Path, model: Path, recorded: object) -> Path:
    """A copy of the fine-tuned `run` in `model` whose config.json records `recorded` as its multi-label threshold."""
    shutil.copytree(run, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "multi_label_threshold": recorded}))
    return model


def test_classify_predicts_at_the_recorded_threshold_and_at_the_one_given(
    multi_label_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    model = with_threshold(multi_label_run, tmp_path / "model", 0.01)
    text = "the cat sat on the mat"
    capsys.readouterr()
    dispatch.main(["classify", str(model), text, "--json"])
    answer = json.loads(capsys.readouterr().out)
    assert answer["predicted_labels"] == [entry["label"] for entry in answer["labels"] if entry["score"] > 0.01]
    dispatch.main(["classify", str(model), text, "--threshold", "0.99"])
    assert capsys.readouterr().out.splitlines()[-1] == "above 0.99: (none)"
    dispatch.main(["classify", str(model), text])
    assert capsys.readouterr().out.splitlines()[-1].startswith("above 0.01: ")


def test_classify_predicts_at_each_labels_recorded_threshold_and_says_which(
    multi_label_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    thresholds = {"cats": 0.01, "dogs": 0.99, "films": 0.02}
    model = with_threshold(multi_label_run, tmp_path / "model", thresholds)
    texts = write_jsonl(tmp_path / "texts.jsonl", [{"text": "the cat sat on the mat"}, {"text": "a film"}])
    capsys.readouterr()
    dispatch.main(["classify", str(model), "--input_file", str(texts)])
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [answer["threshold"] for answer in answers] == [thresholds, thresholds]
    for answer in answers:  # dogs' sigmoid is never above 0.99; the others' always above 0.02
        assert answer["predicted_labels"] == [e["label"] for e in answer["labels"] if e["label"] != "dogs"]
    dispatch.main(["classify", str(model), "the cat sat on the mat"])
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith("above each label's threshold (cats 0.01, dogs 0.99, films 0.02): ")
    )
    dispatch.main(["classify", str(model), "--input_file", str(texts), "--threshold", "0.99"])
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(answer["threshold"], answer["predicted_labels"]) for answer in answers] == [(0.99, []), (0.99, [])]


@pytest.mark.parametrize(
    ("recorded", "line"),
    [
        (
            {"cats": 0.3, "dogs": 0.5},
            "BertScratchConfig.multi_label_threshold must give each of the labels "
            "['cats', 'dogs', 'films'] one threshold, got {'cats': 0.3, 'dogs': 0.5} (films lacks one).",
        ),
        (
            {"cats": 0.3, "dogs": 0.5, "films": 1.0, "birds": 0.5},
            "BertScratchConfig.multi_label_threshold must give "
            "each of the labels ['cats', 'dogs', 'films'] one threshold, got {'cats': 0.3, 'dogs': 0.5, 'films': 1.0, "
            "'birds': 0.5} (birds is no label of the model).",
        ),
        (
            {"cats": 0.3, "dogs": 0.5, "films": 1.0},
            "BertScratchConfig.multi_label_threshold must be None or in (0, 1) for each label, got 1.0 for films.",
        ),
    ],
)
def test_a_recorded_threshold_is_one_in_zero_to_one_for_every_label_or_one_per_label(
    recorded: object, line: str
) -> None:
    id2label = {0: "cats", 1: "dogs", 2: "films"}
    with pytest.raises(Exception, match=re.escape(line)):  # @strict wraps the config's ValueError, same text
        hf_bertscratch.BertScratchConfig(id2label=id2label, multi_label_threshold=recorded)


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2", "nan"])
def test_classify_refuses_a_threshold_outside_zero_to_one(value: str, multi_label_run: Path, capsys) -> None:
    assert_library_and_front_door_refuse(
        capsys,
        ["classify", str(multi_label_run), "a cat", "--threshold", value],
        f"bertscratch classify: error: ValueError: --threshold {float(value):g} is not between 0 and 1: a "
        "multi-label classifier predicts each label whose sigmoid is above it.\n",
    )


def test_classify_refuses_a_threshold_for_a_model_that_is_not_multi_label(tmp_path: Path, capsys) -> None:
    for problem_type, named in (("single_label_classification", "has problem_type 'single_label_classification'"),
                                ("regression", "has problem_type 'regression'"), (None, "records no problem_type")):  # fmt: skip
        model = tmp_path / str(problem_type)
        model.mkdir()
        (model / "config.json").write_text(
            json.dumps(
                {
                    "model_type": "bertscratch",
                    "architectures": ["BertScratchForSequenceClassification"],
                    "problem_type": problem_type,
                }
            )  # fmt: skip
        )
        argv = ["classify", str(model), "a cat", "--threshold", "0.3"]
        line = (
            f"bertscratch classify: error: ValueError: --threshold 0.3 decides which labels a multi-label classifier "
            f"(problem_type 'multi_label_classification') gives a text, and the config of {model} {named}: "
            "leave --threshold out.\n"
        )
        assert_library_and_front_door_refuse(capsys, argv, line)
        done = front_door(tmp_path, *argv)  # before torch loads
        assert (done.returncode, done.stderr) == (1, line)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (
            "1",
            "--multi_label_threshold 1 is not between 0 and 1: a multi-label classifier predicts each label whose sigmoid is above it.",
        ),
        (
            "best",
            "--multi_label_threshold 'best' is neither a number between 0 and 1 nor 'auto' or 'auto-per-label' (chosen on the eval split).",
        ),  # fmt: skip
    ],
)
def test_a_bad_multi_label_threshold_is_refused_as_the_command_line_is_parsed(value: str, line: str) -> None:
    from hf_bertscratch.finetuning_arguments import parse_args

    with pytest.raises(ValueError) as error:
        parse_args(["--model_name_or_path", "m", "--task_type", TASK_TYPE, "--train_file", "t.jsonl",
                    "--output_dir", "out", "--multi_label_threshold", value])  # fmt: skip
    assert str(error.value) == line


def test_a_multi_label_threshold_for_another_task_type_is_refused() -> None:
    from hf_bertscratch.finetuning_arguments import parse_args

    with pytest.raises(ValueError) as error:
        parse_args(["--model_name_or_path", "m", "--train_file", "t.csv", "--output_dir", "out",
                    "--multi_label_threshold", "auto"])  # fmt: skip
    assert str(error.value) == (
        "--multi_label_threshold 'auto' decides a multi-label-classification task's labels, but this is a "
        "classification task: add --task_type multi-label-classification, or leave --multi_label_threshold out."
    )


def test_a_csv_label_field_is_split_on_the_label_separator(tmp_path: Path) -> None:
    from hf_bertscratch.tasks.data import DataArguments, load_task_datasets

    train = tmp_path / "train.tsv"
    train.write_text("text\ttopics\na cat\tcats|dogs\nno topic\t\na film\tfilms\n", encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("text\ttopics\na dog\tdogs\nnothing\t\n", encoding="utf-8")
    args = DataArguments(
        task_type=TASK_TYPE, train_file=str(train), validation_file=str(dev), label_column="topics",
        label_separator="|",
    )  # fmt: skip
    raw = load_task_datasets(args, args.task_spec)
    shape = MultiLabelClassificationShape(args.task_spec, FeatureSettings(), tokenizer=None)  # type: ignore[arg-type]
    shape.prepare_labels(raw)
    assert shape.names == ["cats", "dogs", "films"]
    assert shape.encode(raw["eval"]["topics"]) == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_a_label_separator_for_another_task_type_is_refused() -> None:
    from hf_bertscratch.tasks.data import DataArguments

    with pytest.raises(ValueError) as error:
        DataArguments(train_file="train.csv", label_separator="|")
    assert str(error.value) == (
        "--label_separator '|' splits a multi-label-classification task's label field, but this is a classification "
        "task: add --task_type multi-label-classification, or leave --label_separator out."
    )


# ------------------------------------------------------------------------------------------------- front door
def test_the_front_door_knows_the_task_type_and_its_label_column(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text('text,tags\na cat,"cats,dogs"\n', encoding="utf-8")
    argv = ["finetune", "--model_name_or_path", "model", "--train_file", "train.csv", "--output_dir", "out"]
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "bertscratch"}))
    done = front_door(tmp_path, *argv, "--task_type", TASK_TYPE)
    assert done.returncode == 1
    assert done.stderr == (
        "bertscratch finetune: error: ValueError: Column(s) ['label'] not in the train split; it has ['text', 'tags']: name yours "
        "with --label_column.\n"
    )
    done = front_door(tmp_path, *argv, "--task_type", "multilabel-classification")
    assert done.returncode == 1
    assert "did you mean 'multi-label-classification'?" in done.stderr


LISTED_LINE = (
    "The train split's labels in column 'labels' are lists, such as ['cats', 'dogs']: a text with any number of "
    "labels is a multi-label classification task: add --task_type multi-label-classification."
)


def test_list_labels_of_a_classification_task_name_the_task_type_that_reads_them(tmp_path: Path) -> None:
    from hf_bertscratch.tasks.classification import label_mapping

    raw = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"labels": [["cats", "dogs"], []]})})
    with pytest.raises(ValueError) as error:
        label_mapping(raw, "labels", None)
    assert str(error.value) == LISTED_LINE
    write_jsonl(tmp_path / "train.jsonl", rows([["cats", "dogs"], ["films"]]))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "bertscratch"}))
    done = front_door(
        tmp_path, "finetune", "--model_name_or_path", "model", "--train_file", "train.jsonl", "--label_column", "labels",
        "--output_dir", "out",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == f"bertscratch finetune: error: ValueError: {LISTED_LINE}\n"


def test_a_constant_label_set_is_named_as_the_model_gives_it(caplog: pytest.LogCaptureFixture) -> None:
    from transformers.trainer_utils import PredictionOutput

    from hf_bertscratch.finetuning import warn_of_a_constant_answer

    logits = np.array([[2.0, -1.0, 3.0], [1.0, -2.0, 0.5]])
    prediction = PredictionOutput(predictions=logits, label_ids=np.zeros((2, 3)), metrics={})
    with caplog.at_level("WARNING"):
        warn_of_a_constant_answer({"eval_top_set_share": 1.0}, prediction, ["cats", "dogs", "films"])
    assert "The model gives the same labels (cats, films) to every eval example" in caplog.text


def test_a_probed_head_is_refused_for_a_multi_label_task(tmp_path: Path, model_dir: Path) -> None:
    from hf_bertscratch.finetuning_arguments import choose_task_defaults, parse_args

    write_jsonl(tmp_path / "train.jsonl", rows(TRAIN_SETS))
    model_args, data_args, training_args = parse_args(
        ["--model_name_or_path", str(model_dir), "--task_type", TASK_TYPE, "--train_file", str(tmp_path / "train.jsonl"),
         "--head_init", "probe", "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^--head_init probe fits a new head to one class per example"):
        choose_task_defaults(model_args, data_args, training_args, AutoConfig.from_pretrained(model_dir))


def test_a_saved_multi_label_model_gets_the_multi_label_card(multi_label_run: Path) -> None:
    from hf_bertscratch.cards import info_from_model_folder

    kind, info = info_from_model_folder(multi_label_run)
    assert kind == "multi-label-classifier"
    assert info.labels == ["cats", "dogs", "films"]


def test_evaluate_onnx_refuses_a_multi_label_task_in_one_line(tmp_path: Path) -> None:
    from hf_bertscratch.onnx_evaluation import OnnxEvaluationArguments, check_arguments
    from hf_bertscratch.tasks.data import DataArguments

    data_args = DataArguments(task_type=TASK_TYPE, train_file=str(write_jsonl(tmp_path / "t.jsonl", rows([["cats"]]))))
    with pytest.raises(ValueError) as error:
        check_arguments(OnnxEvaluationArguments(model=str(tmp_path)), data_args)
    assert str(error.value) == (
        "evaluate-onnx scores a task of the shapes ['classification', 'regression', 'token-classification', "
        "'question-answering']; a multi-label-classification task is none of them."
    )


@pytest.mark.parametrize("value", ["auto", "auto-per-label"])
def test_a_threshold_to_choose_on_the_test_split_is_refused_as_the_command_line_is_parsed(value: str) -> None:
    from hf_bertscratch.finetuning_arguments import parse_args

    with pytest.raises(ValueError) as error:
        parse_args(["--model_name_or_path", "m", "--task_type", TASK_TYPE, "--train_file", "t.jsonl",
                    "--test_file", "s.jsonl", "--eval_split", "test", "--validation_split_percentage", "0",
                    "--output_dir", "out", "--multi_label_threshold", value])  # fmt: skip
    assert str(error.value) == (
        f"--multi_label_threshold {value} would be chosen on the test split (--eval_split test): give a number, "
        "or choose it on a validation split."
    )


def test_the_python_api_gives_the_labels_above_the_models_recorded_threshold(
    multi_label_run: Path, tmp_path: Path
) -> None:
    from hf_bertscratch.inference import classify, labels_above, multi_label_threshold

    model = with_threshold(multi_label_run, tmp_path / "model", 0.01)
    scores = classify(model, "the cat sat on the mat")
    assert labels_above(scores, multi_label_threshold(model)) == [s["label"] for s in scores if s["score"] > 0.01]
    with pytest.raises(TypeError):  # no threshold of its own: a model's is read with multi_label_threshold
        labels_above(scores)  # type: ignore[call-arg]


def test_thresholds_and_the_grid_are_described_one_way_everywhere() -> None:
    from hf_bertscratch.metrics import THRESHOLD_GRID
    from hf_bertscratch_base.model_config import describe_grid, describe_thresholds

    assert describe_thresholds(0.35) == "0.35"
    assert describe_thresholds({"cats": 0.3, "dogs": 0.55}) == "cats 0.3, dogs 0.55"
    assert describe_grid() == "0.05, 0.10, ..., 0.95"
    assert describe_grid((0.2, 0.4, 0.6)) == "0.20, 0.40, ..., 0.60"
    assert describe_grid() == describe_grid(THRESHOLD_GRID)
