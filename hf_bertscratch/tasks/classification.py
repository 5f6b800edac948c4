"""Sequence classification and regression as task shapes: a text or a text pair -> one of K classes (GLUE, IMDB), any
number of K labels (multi-label: topics, emotions, kinds of toxicity), or a score (STS-B). Single texts are cut by
`--truncation` (`features.truncate_ids`), pairs by the tokenizer's longest-first truncation; labels are read and checked
against the label set of every split (`label_mapping`; a multi-label task's `multi_label_names`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import datasets
import numpy as np
import torch
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    EvalPrediction,
    PreTrainedTokenizerBase,
)
from transformers.trainer_utils import PredictionOutput

from hf_bertscratch_base.model_config import label_thresholds
from hf_bertscratch_base.task_table import MULTI_LABEL_THRESHOLD, check_labels_are_no_lists

from ..metrics import (
    ClassificationMetrics,
    MultiLabelMetrics,
    RegressionMetrics,
    choose_label_thresholds,
    choose_threshold,
    labels_above_threshold,
)
from . import TaskSpec
from .features import (
    FeatureSettings,
    class_config,
    prediction_labels,
    prediction_logits,
    report_labels,
    texts_of,
    truncate_ids,
    write_csv,
)

logger = logging.getLogger(__name__)


def cross_encoder_activation(activation: type[torch.nn.Module]) -> dict[str, dict[str, str]]:
    """The config entry (`BertScratchConfig.sentence_transformers`) naming the activation sentence-transformers'
    `CrossEncoder` applies to the head's logits in `predict`, where its default would not give the model's scores: a
    sigmoid on a head of one output (a regressor's score squashed into (0, 1)), nothing on a wider one (a multi-label
    classifier's logits, where transformers' text-classification pipeline gives each label's sigmoid)."""
    return {"sentence_transformers": {"activation_fn": f"{activation.__module__}.{activation.__qualname__}"}}


def make_text_tokenize_function(
    tokenizer: PreTrainedTokenizerBase,
    task: TaskSpec,
    label_map: dict | None,
    max_seq_length: int,
    strategy: str,
    head_tokens: int,
    encode_labels: Callable[[list], list] | None = None,
) -> Callable[[dict[str, list]], dict[str, list]]:
    """A batched `datasets.map` function: texts -> input_ids, token_type_ids, attention_mask, labels, length.

    Single texts are tokenised whole, then cut by `strategy` (so tail and head+tail see the real end of the
    review); their uncut length ([CLS] and [SEP] included) comes as `text_length`. Pairs use the tokenizer's own
    longest-first truncation, which is what GLUE pair tasks use. A missing text, single or either side of a pair, is
    an empty one (`texts_of`). Labels are class ids through `label_map`, or floats for regression (`label_map` None),
    or what `encode_labels` makes of a batch of them (a multi-label task's 0/1 rows); a split without the label column
    (a test split to predict) gets none.
    """
    text, pair, label = task.column("text"), task.columns.get("text_pair"), task.column("label")

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        if pair:
            encoded = dict(
                tokenizer(texts_of(batch[text]), texts_of(batch[pair]), truncation=True, max_length=max_seq_length)
            )
        else:
            texts = texts_of(batch[text])
            # uncut: cut below by `strategy` (and counted), so the tokenizer's "longer than the maximum" warning would
            # mislead
            pieces = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
            budget = max_seq_length - 2  # room for [CLS] and [SEP]
            input_ids = [
                [tokenizer.cls_token_id] + truncate_ids(ids, budget, strategy, head_tokens) + [tokenizer.sep_token_id]
                for ids in pieces
            ]
            encoded = {
                "input_ids": input_ids,
                "token_type_ids": [[0] * len(ids) for ids in input_ids],
                "attention_mask": [[1] * len(ids) for ids in input_ids],
                "text_length": [len(ids) + 2 for ids in pieces],
            }
        if label in batch:
            values = batch[label]
            if encode_labels is not None:
                encoded["labels"] = encode_labels(values)
            else:
                encoded["labels"] = [float(v) for v in values] if label_map is None else [label_map[v] for v in values]
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    return tokenize


def _is_class_id(value: object) -> bool | None:
    """Whether a label is an integer id (an int, or a string of digits as a csv file whose column also holds names
    gives it) or a name (any other string); None for anything else (booleans, numbers, missing)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    if isinstance(value, str):
        return value.strip().removeprefix("-").isdigit()
    return None


def check_one_label_kind(values: Sequence[object], label_column: str, role: str) -> None:
    """Refuse labels that mix integer ids and names (`_is_class_id`), naming the first of each and its row (1 for the
    split's first example): read as they are, "1" and "pos" would become two classes of one meaning or of none."""
    first: dict[bool, tuple[int, object]] = {}
    for row, value in enumerate(values, start=1):
        kind = _is_class_id(value)
        if kind is not None and kind not in first:
            first[kind] = (row, value)
            if len(first) == 2:
                (id_row, id_value), (name_row, name_value) = first[True], first[False]
                raise ValueError(
                    f"The {role} split's {label_column!r} column mixes integer ids and label names: {id_value!r} "
                    f"(row {id_row}) is an id, {name_value!r} (row {name_row}) a name; give every label as a name, "
                    "or every one as an id from 0."
                )


def label_mapping(raw: datasets.DatasetDict, label_column: str, names: list[str] | None) -> tuple[list[str], dict]:
    """Class names and a map from raw label value to class id; raises on any label outside the label set, and on
    labels that are lists (a multi-label task's: `check_labels_are_no_lists`).

    Integer labels are ids into the names, 0..K-1 with names given or not; string labels are names. Without given
    names, the sorted distinct train labels are the classes (booleans too: `False`, `True`).
    """
    for role, split in raw.items():
        if label_column in split.column_names:
            listed = next((value for value in split[label_column] if isinstance(value, list)), None)
            check_labels_are_no_lists(label_column, role, listed)
            check_one_label_kind(split[label_column], label_column, role)
    train_values = sorted(set(raw["train"][label_column]), key=lambda v: (str(type(v)), v))
    is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in train_values)
    if any(isinstance(v, float) for v in train_values) and not is_int:
        raise ValueError(
            f"The labels of column {label_column!r} are numbers such as {train_values[:5]}: a classification task "
            "needs class ids or names. For a score, run a regression task (--task_type regression)."
        )
    given = names is not None
    if names is None:
        if is_int and train_values != list(range(len(train_values))):
            top = int(train_values[-1])
            ways = "renumber them from 0 in the data files"
            if train_values[0] >= 0:  # ids from 1 (star ratings): names for 0..top work too, id 0 a class unseen
                ways += f", or name every id from 0 to {top} with --class_names ({top + 1} names, in id order)"
            raise ValueError(
                f"Integer labels are class ids 0..K-1, but the train split's {label_column!r} holds "
                f"{train_values[:20]}: {ways}; for scores, run a regression task (--task_type regression)."
            )
        names = [str(v) for v in train_values]
    mapping: dict
    if is_int:
        mapping = {i: i for i in range(len(names))}
    elif given:
        mapping = {name: i for i, name in enumerate(names)}
    else:  # the train values themselves, so labels that are no strings (JSON's true and false) map as they are read
        mapping = {value: i for i, value in enumerate(train_values)}
    if len(names) < 2:
        raise ValueError(f"Classification needs at least two labels, got {names}.")
    for role, split in raw.items():
        if label_column not in split.column_names:  # a test split without labels: predicted, not scored
            continue
        bad = sorted({v for v in split[label_column] if v not in mapping}, key=str)
        if bad:
            ids = "; integer labels are ids into --class_names, from 0" if is_int and given else ""
            raise ValueError(
                f"Label(s) {bad[:10]} in the {role} split are outside the label set {list(mapping)} (classes "
                f"{names}){ids}."
            )
    return names, mapping


class ClassificationShape:
    """A text or a text pair -> one of K classes (GLUE, IMDB); accuracy, F1 and Matthews correlation."""

    auto_class = AutoModelForSequenceClassification
    picture = "confusion_matrix.png"

    def __init__(self, task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase) -> None:
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.names: list[str] = []
        self.label_map: dict | None = None
        self.long_texts: dict[str, int] = {}  # split -> its texts longer than max_seq_length (cut by the truncation)

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Read and check the label set of every split; log the classes with their train counts, and warn of a class
        too rare to learn or missing from the eval split (`report_labels`)."""
        names = list(self.task.label_names) if self.task.label_names else None
        column = self.task.column("label")
        self.names, mapping = label_mapping(raw, column, names)
        self.label_map = mapping
        ids = {role: [mapping[v] for v in split[column]] for role, split in raw.items() if column in split.column_names}
        report_labels("class", self.names, ids["train"], ids.get("eval"), column)

    def config_updates(self) -> dict:
        """What the head's config must say: its classes, one per example (a regressor's folder handed to a
        classification task must not keep its problem type)."""
        return {**class_config(self.names), "problem_type": "single_label_classification"}

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
        """Tokenised examples with labels and lengths (the same for training and evaluation); how many single texts
        were longer than max_seq_length is kept in `long_texts`, and logged where there are any."""
        s = self.settings
        tokenize = make_text_tokenize_function(
            self.tokenizer, self.task, self.label_map, s.max_seq_length, s.truncation, s.head_tokens,
            self.label_encoder(),
        )  # fmt: skip
        features = split.map(tokenize, batched=True, remove_columns=split.column_names, desc="Tokenising", **map_kwargs)
        if "text_length" not in features.column_names:
            return features
        name = str(split.split or ("train" if training else "eval"))
        self.long_texts[name] = int(np.sum(np.asarray(features["text_length"]) > s.max_seq_length))
        if self.long_texts[name]:  # none cut: nothing to say
            logger.info(
                "%s of the %s %s texts are longer than %s tokens: read cut to them (--truncation %s%s).",
                f"{self.long_texts[name]:,}", f"{len(features):,}", name, s.max_seq_length, s.truncation,
                f", {s.head_tokens} from the start" if s.truncation == "head+tail" else "",
            )  # fmt: skip
        return features.remove_columns("text_length")

    def label_encoder(self) -> Callable[[list], list] | None:
        """What turns a batch of raw labels into the features' labels, where `label_map` does not (None)."""
        return None

    def collator(self):
        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8)

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return ClassificationMetrics(len(self.names), pairs=True)

    def _text_columns(self, raw: datasets.Dataset, i: int) -> list:
        pair = self.task.columns.get("text_pair")
        return [raw[i][self.task.columns["text"]]] + ([raw[i][pair]] if pair else [])

    def _write_rows(
        self,
        path: Path,
        raw: datasets.Dataset,
        gold_header: str,
        gold: list[str] | None,
        predicted: list[str],
        probabilities: np.ndarray,
    ) -> None:
        """predictions.csv of a classifier: index, text, [text_pair], the gold answer (under `gold_header`; none
        without labels), the prediction and one probability per name (p_<name>)."""
        header = ["index", "text"] + (["text_pair"] if self.task.columns.get("text_pair") else [])
        header += ([gold_header] if gold is not None else []) + ["prediction"] + [f"p_{name}" for name in self.names]
        rows = [
            [i, *self._text_columns(raw, i), *([] if gold is None else [gold[i]]), predicted[i]]
            + [f"{p:.6f}" for p in probabilities[i]]
            for i in range(len(raw))
        ]
        write_csv(path, header, rows)

    def write_predictions(
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv (index, text, [text_pair], label, prediction, p_<class>...) and the confusion matrix, each
        name after `prefix` (test_ for the test split). A split without labels (`prediction.label_ids` None) gets its
        predictions alone: no label column, no confusion matrix."""
        from ..plotting import plot_confusion_matrix  # matplotlib loads only when a picture is drawn

        logits = prediction_logits(prediction)
        labels = prediction_labels(prediction)
        probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1).numpy()  # (N, num_labels)
        gold = None if labels is None else [self.names[label] for label in labels]
        predicted = [self.names[int(row.argmax())] for row in probs]
        self._write_rows(folder / f"{prefix}predictions.csv", raw, "label", gold, predicted, probs)
        if labels is None:
            return
        plot_confusion_matrix(
            labels.tolist(), logits.argmax(-1).tolist(), self.names, folder / f"{prefix}{self.picture}", title
        )


class RegressionShape(ClassificationShape):
    """A text pair -> a score (STS-B): one output trained with MSE; Pearson and Spearman correlation."""

    picture = "regression.png"

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Every label must be a number; class names (strings) are refused."""
        column = self.task.columns["label"]
        for role, split in raw.items():
            values = split[column] if column in split.column_names else []  # none: a test split to predict
            bad = [v for v in values if isinstance(v, (str, bool)) or not isinstance(v, (int, float))]
            if bad:
                raise ValueError(
                    f"A regression task needs numeric labels, but the {role} split's {column!r} holds {bad[:5]}: "
                    "for class labels run a classification task (--task_type classification)."
                )
        self.names, self.label_map = ["score"], None

    def config_updates(self) -> dict:
        """One output, the score itself: its logit, which a CrossEncoder of the folder predicts unchanged."""
        return {
            "num_labels": 1,
            "problem_type": "regression",
            "id2label": {0: "score"},
            "label2id": {"score": 0},
            **cross_encoder_activation(torch.nn.Identity),
        }

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return RegressionMetrics()

    def write_predictions(
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv (index, text, [text_pair], label, prediction) and the predicted-vs-gold scatter; a split
        without labels (`prediction.label_ids` None) its predictions alone, with no label column and no scatter."""
        from ..plotting import plot_regression  # matplotlib loads only when a picture is drawn

        scores = np.asarray(prediction_logits(prediction), dtype=np.float64).reshape(-1)
        labels = prediction_labels(prediction, scores=True)
        header = ["index", "text"] + (["text_pair"] if self.task.columns.get("text_pair") else [])
        header += (["label"] if labels is not None else []) + ["prediction"]
        # Scores keep float32's full precision (9 digits): a regressor whose scores differ only past the 4th decimal
        # (early in training) must still give back the Pearson/Spearman reported from this file.
        rows = [
            [i, *self._text_columns(raw, i), *([] if labels is None else [f"{labels[i]:.7g}"]), f"{scores[i]:.9g}"]
            for i in range(len(raw))
        ]
        write_csv(folder / f"{prefix}predictions.csv", header, rows)
        if labels is not None:
            plot_regression(labels, scores, folder / f"{prefix}{self.picture}", title)


def label_sets(values: Sequence, separator: str) -> list[list[str | int]]:
    """Each row's labels of a multi-label label column: a list as it is (a jsonl list), a string split on `separator`
    (a csv/tsv field), each label stripped of surrounding spaces; an empty list, an empty field or a null: no label.
    A label that is an integer, or a string of digits, comes as an int: a class id (`multi_label_names`)."""
    sets = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            parts: list = []
        elif isinstance(value, str):
            parts = value.split(separator)
        elif isinstance(value, (list, tuple)):
            parts = [part for part in value if part is not None]
        else:  # one label read as a number (a csv column of single ids)
            parts = [value]
        labels: list[str | int] = []
        for part in parts:
            if isinstance(part, (int, np.integer)) and not isinstance(part, bool):
                labels.append(int(part))
            elif text := str(part).strip():
                labels.append(int(text) if text.isdecimal() else text)
        sets.append(labels)
    return sets


def multi_label_names(
    raw: datasets.DatasetDict, column: str, names: list[str] | None, separator: str
) -> tuple[list[str], dict[str | int, int]]:
    """A multi-label task's label names and the map from each label as `label_sets` reads it to its id. Labels that
    are all integers are class ids, as a single-label task's are: 0..K-1 into `names` (--class_names), or without
    names the ids 0 to the largest train id, named by their numbers. Other labels are names: `names` in their order,
    else the sorted distinct labels of the train split. Raises on a train split without any label and on a label of
    any split outside the set."""
    sets = {role: label_sets(split[column], separator) for role, split in raw.items() if column in split.column_names}
    train_labels = {label for labels in sets["train"] for label in labels}
    if not train_labels:
        raise ValueError(
            f"No example of the train split has a label in column {column!r}: a multi-label classifier learns which "
            f"labels a text has; give each train example its labels (a jsonl list, or a field of labels separated by "
            f"--label_separator {separator!r})."
        )
    as_ids = all(isinstance(label, int) for labels in sets.values() for row in labels for label in row)
    index: dict[str | int, int]
    if as_ids:
        if names is None:
            names = [str(i) for i in range(max(int(label) for label in train_labels) + 1)]
        index = {i: i for i in range(len(names))}
    else:
        names = list(names) if names is not None else sorted(str(label) for label in train_labels)
        index = {name: i for i, name in enumerate(names)}
        index.update({int(name): i for i, name in enumerate(names) if name.isdecimal()})  # "3" read as an id
    for role, role_sets in sets.items():
        bad = sorted({label for labels in role_sets for label in labels if label not in index}, key=str)
        if bad:
            ids = "; integer labels are ids into --class_names, from 0" if as_ids else ""
            raise ValueError(
                f"Label(s) {bad[:10]} in the {role} split are outside the label set {names} (the train split's labels, "
                f"or --class_names){ids}."
            )
    return names, index


class MultiLabelClassificationShape(ClassificationShape):
    """A text or a text pair -> any number of K labels, none included: one sigmoid per label trained with binary
    cross-entropy (transformers' problem_type "multi_label_classification"); a label is predicted where its sigmoid is
    above `threshold` (`metrics.MULTI_LABEL_THRESHOLD` unless given, or chosen on the eval split: `settle_threshold`),
    one for every label or each label's own. Micro F1 (the main metric), macro F1 and subset accuracy.

    Args:
        threshold: the sigmoid above which a label is predicted; None: chosen on the eval split's predictions of the
            trained model (`settle_threshold`), `MULTI_LABEL_THRESHOLD` until then.
        per_label: where chosen, choose one threshold per label (`metrics.choose_label_thresholds`), not one for
            every label.
        threshold_metric: where chosen, the eval metric it is chosen by: "micro_f1" or "macro_f1".
    """

    picture = "per_label_f1.png"

    def __init__(
        self,
        task: TaskSpec,
        settings: FeatureSettings,
        tokenizer: PreTrainedTokenizerBase,
        threshold: float | None = MULTI_LABEL_THRESHOLD,
        per_label: bool = False,
        threshold_metric: str = "micro_f1",
    ) -> None:
        super().__init__(task, settings, tokenizer)
        self.threshold_chosen_on_eval = threshold is None
        self.threshold_settled = threshold is not None  # given, or chosen on the eval split (`settle_threshold`)
        # One for every label, or label -> its own (as config.json records it: `label_thresholds` reads both).
        self.threshold: float | dict[str, float] = MULTI_LABEL_THRESHOLD if threshold is None else threshold
        self.per_label, self.threshold_metric = per_label, threshold_metric

    @property
    def thresholds(self) -> list[float]:
        """Each label's threshold, in the order of the head's outputs (`model_config.label_thresholds`)."""
        return list(label_thresholds(self.threshold, self.names).values())

    def settle_threshold(self, prediction: PredictionOutput) -> dict[str, float]:
        """Where the threshold is chosen on the eval split: set it to the one (or for each label, the one) at which
        the eval `prediction` (the trained model's) scores the best `threshold_metric` (`metrics.choose_threshold`,
        `metrics.choose_label_thresholds`), and return the eval scores at it. {} where it was given."""
        labels = prediction_labels(prediction)
        if not self.threshold_chosen_on_eval or labels is None:  # the eval split is always scored
            return {}
        chosen = self.choose_threshold(prediction_logits(prediction), labels)
        self.threshold = dict(zip(self.names, chosen, strict=True)) if isinstance(chosen, list) else chosen
        self.threshold_settled = True
        return MultiLabelMetrics(len(self.names), self.thresholds)(prediction)

    def threshold_choice(self) -> Callable[[np.ndarray, np.ndarray], float | list[float]] | None:
        """How the threshold is chosen on the eval split (`choose_threshold`), for another classifier to be scored as
        this one is (the bag-of-words baselines); None where it was given."""
        return self.choose_threshold if self.threshold_chosen_on_eval else None

    def choose_threshold(self, logits: np.ndarray, labels: np.ndarray) -> float | list[float]:
        """The threshold of the best `threshold_metric` for `logits` (N, K) against the 0/1 `labels` (N, K): one for
        every label (`metrics.choose_threshold`), or one per label in the head's order (`choose_label_thresholds`)."""
        if self.per_label:
            return choose_label_thresholds(logits, labels, metric=self.threshold_metric)
        return choose_threshold(logits, labels, metric=self.threshold_metric)

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Read and check every split's label sets (`multi_label_names`); log the labels with how many train examples
        hold each, and warn of one too rare to learn or missing from the eval split (`report_labels`)."""
        names = list(self.task.label_names) if self.task.label_names else None
        column = self.task.column("label")
        self.names, self.index = multi_label_names(raw, column, names, self.task.label_separator)
        self.label_map = None
        ids = {
            role: [self.index[label] for labels in label_sets(split[column], self.task.label_separator) for label in
                   dict.fromkeys(labels)]
            for role, split in raw.items()
            if column in split.column_names
        }  # fmt: skip
        report_labels("label", self.names, ids["train"], ids.get("eval"), column)

    def encode(self, values: Sequence) -> list[list[float]]:
        """Raw label values -> one 0/1 row over the label names per example (BCE's targets)."""
        rows = []
        for labels in label_sets(values, self.task.label_separator):
            row = [0.0] * len(self.names)
            for label in labels:
                row[self.index[label]] = 1.0
            rows.append(row)
        return rows

    def label_encoder(self) -> Callable[[list], list] | None:
        return self.encode

    def config_updates(self) -> dict:
        """A head of one output per label, each its own sigmoid (transformers' BCE loss for this problem type), and
        the threshold its labels are given at (`bertscratch classify` reads it): None in the checkpoints of a run
        that chooses it on the eval split until it is chosen (`settle_threshold`), which classify reads as
        `MULTI_LABEL_THRESHOLD`; and each label's sigmoid as what a CrossEncoder of the folder predicts, as the
        pipeline gives it."""
        return {
            **class_config(self.names),
            "problem_type": "multi_label_classification",
            **cross_encoder_activation(torch.nn.Sigmoid),
            "multi_label_threshold": self.threshold if self.threshold_settled else None,
        }

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return MultiLabelMetrics(len(self.names), self.thresholds)

    def _joined(self, row: np.ndarray) -> str:
        return self.task.label_separator.join(name for name, on in zip(self.names, row) if on)

    def write_predictions(
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv (index, text, [text_pair], labels, prediction, p_<label>...: the gold and the predicted
        labels (those above `threshold`) joined by the label separator, each label's sigmoid) and each label's F1 as
        bars (per_label_f1.png), each name after `prefix`. A split without labels gets its predictions alone: no labels
        column, no picture."""
        from sklearn.metrics import f1_score

        from ..plotting import plot_per_type_f1  # matplotlib loads only when a picture is drawn

        logits = prediction_logits(prediction)
        labels = prediction_labels(prediction)
        probabilities = torch.sigmoid(torch.as_tensor(logits, dtype=torch.float32)).numpy()  # (N, K)
        predicted = labels_above_threshold(logits, self.thresholds)
        gold = None if labels is None else [self._joined(row) for row in labels]
        names = [self._joined(row) for row in predicted]
        self._write_rows(folder / f"{prefix}predictions.csv", raw, "labels", gold, names, probabilities)
        if labels is None:
            return
        truth = np.asarray(labels, dtype=np.int64)
        f1s = f1_score(truth, predicted, average=None, zero_division=0)
        scores = {name: {"f1": float(f1), "number": int(n)} for name, f1, n in zip(self.names, f1s, truth.sum(0))}
        plot_per_type_f1(scores, folder / f"{prefix}{self.picture}", title, ylabel="F1")


__all__ = [
    "ClassificationShape",
    "MultiLabelClassificationShape",
    "RegressionShape",
    "check_one_label_kind",
    "label_mapping",
    "label_sets",
    "make_text_tokenize_function",
    "multi_label_names",
]
