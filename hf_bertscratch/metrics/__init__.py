"""Evaluation metrics through `evaluate`, with an offline path that keeps `evaluate`'s API.

`evaluate.load("accuracy")` fetches the metric script from the Hub. This package ships the same metrics as `evaluate`
metric modules `hf_bertscratch/metrics/<name>/<name>.py`, each importing its class from the module that computes it:
accuracy, f1 and matthews_correlation with scikit-learn (`sklearn_metrics.py`), pearsonr and spearmanr with SciPy
(`scipy_metrics.py`), seqeval (`sequence_labelling.py`) and squad (`squad_metrics.py`) implemented here. It loads them
with `evaluate.load(<local path>)` whenever downloads are off (`OFFLINE_VARIABLES`: evaluate's own
`HF_EVALUATE_OFFLINE`, `HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` set to 1, without asking the network) or the Hub
cannot be reached (asked once per process, `hub_unreachable`), and says so in one line per reason; each metric is loaded once per process. The returned
objects are ordinary `evaluate.EvaluationModule`s, with the Hub modules' names, inputs and output keys.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import evaluate
import numpy as np

from hf_bertscratch.metrics.sequence_labelling import entity_spans
from hf_bertscratch_base.model_reference import first_variable_on, hub_unreachable
from hf_bertscratch_base.task_table import MULTI_LABEL_THRESHOLD, THRESHOLD_GRID

logger = logging.getLogger(__name__)

METRICS_DIR = Path(__file__).resolve().parent
LOCAL_METRICS: tuple[str, ...] = (
    "accuracy",
    "f1",
    "matthews_correlation",
    "pearsonr",
    "spearmanr",
    "seqeval",
    "squad",
)
# Each turns metric downloads off: evaluate's own switch (which `evaluate` reads, at import), and the Hub's and
# datasets', by which a user says no download at all.
OFFLINE_VARIABLES = ("HF_EVALUATE_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def local_metric_path(name: str) -> Path:
    """The folder of the metric module shipped with the package (what `evaluate.load` takes as a path)."""
    if name not in LOCAL_METRICS:
        raise ValueError(f"No local metric named {name!r}; expected one of {list(LOCAL_METRICS)}.")
    return METRICS_DIR / name


@functools.cache
def load_metric(name: str) -> evaluate.EvaluationModule:
    """`evaluate.load(name)` from the Hub, or the packaged copy when offline or the Hub is unreachable; once per name
    and process (a run's later loads of a metric are the same module).

    Args:
        name: a metric name: one of `LOCAL_METRICS` for the offline fallback, or any Hub metric when online.
    """
    if name not in LOCAL_METRICS:
        return evaluate.load(name)
    offline = first_variable_on(OFFLINE_VARIABLES)
    why = f"{offline} is set" if offline else hub_unreachable()
    if why is None:
        try:
            return evaluate.load(name)
        except (OSError, ConnectionError) as error:  # FileNotFoundError when the Hub has no such script
            why = f"the Hub's {name!r}: {type(error).__name__}"
    _say_packaged(why)
    return evaluate.load(str(local_metric_path(name)))


@functools.cache
def _say_packaged(why: str) -> None:
    logger.info("Metrics: the copies packaged with hf_bertscratch (%s).", why)


def classification_metric_names(pairs: bool = False) -> list[str]:
    """Accuracy and F1 for every task (macro F1 when there are more than two labels); Matthews for pairs."""
    names = ["accuracy", "f1"]
    if pairs:
        names.append("matthews_correlation")
    return names


class ClassificationMetrics:
    """A `compute_metrics` callable for `Trainer`: accuracy, F1 (binary or macro) and optionally Matthews.

    Args:
        num_labels: the number of classes; F1 is binary for 2, macro-averaged otherwise.
        pairs: also compute Matthews correlation (the GLUE metric for sentence-pair tasks like CoLA/MRPC).
    """

    def __init__(self, num_labels: int, pairs: bool = False) -> None:
        self.num_labels = num_labels
        self.metrics = {name: load_metric(name) for name in classification_metric_names(pairs)}

    def compute(self, predictions: Sequence[int], references: Sequence[int]) -> dict[str, float]:
        """Every metric on integer predictions and references, both of shape (N,), and "top_class_share": the
        share of predictions in the commonest predicted class (1.0: the model gives one answer to everything)."""
        results: dict[str, float] = {}
        for name, metric in self.metrics.items():
            kwargs = {"average": "binary" if self.num_labels == 2 else "macro"} if name == "f1" else {}
            results.update(metric.compute(predictions=predictions, references=references, **kwargs))
        counts = np.bincount(np.asarray(predictions, dtype=np.int64), minlength=self.num_labels)
        results["top_class_share"] = float(counts.max() / max(len(predictions), 1))
        return results

    def __call__(self, eval_prediction) -> dict[str, float]:
        """Trainer hook: `eval_prediction.predictions` (N, num_labels) logits, `.label_ids` (N,)."""
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return self.compute(np.argmax(logits, axis=-1).tolist(), np.asarray(eval_prediction.label_ids).tolist())


def labels_above_threshold(
    logits: np.ndarray, threshold: float | Sequence[float] = MULTI_LABEL_THRESHOLD
) -> np.ndarray:
    """The 0/1 predictions (N, K) of a multi-label head's logits (N, K): sigmoid(logit) > `threshold`, one for every
    label or one per label (K)."""
    probabilities = 1 / (1 + np.exp(-np.asarray(logits, dtype=np.float64)))
    return (probabilities > np.asarray(threshold, dtype=np.float64)).astype(np.int64)


# The metrics a multi-label threshold is chosen by (`choose_threshold`): micro F1, the main metric, or macro F1.
THRESHOLD_METRICS = ("micro_f1", "macro_f1")


def _f1(predicted: np.ndarray, gold: np.ndarray, metric: str) -> float:
    """Micro or macro F1 (`metric`) of boolean predictions against boolean gold labels, both (N, K); a label never
    predicted nor gold scores 0 in the macro mean, as in `MultiLabelMetrics`."""
    true_positives = (predicted & gold).sum(axis=0)
    decided = predicted.sum(axis=0) + gold.sum(axis=0)  # 2 TP + FP + FN, per label
    if metric == "micro_f1":
        return 2 * int(true_positives.sum()) / int(decided.sum()) if decided.sum() else 0.0
    per_label = np.divide(2 * true_positives, decided, out=np.zeros(len(decided)), where=decided > 0)
    return float(per_label.mean()) if len(per_label) else 0.0


def _best(grid: Sequence[float], score: Callable[[float], float]) -> float:
    """The threshold of `grid` with the best `score`; of thresholds that score alike, the nearest to
    `MULTI_LABEL_THRESHOLD`."""
    scores = {threshold: score(threshold) for threshold in grid}
    return min(grid, key=lambda t: (-scores[t], abs(t - MULTI_LABEL_THRESHOLD), t))


def _check_threshold_metric(metric: str) -> None:
    if metric not in THRESHOLD_METRICS:
        raise ValueError(
            f"Cannot choose a multi-label threshold by {metric!r}; expected {' or '.join(map(repr, THRESHOLD_METRICS))}."
        )


def choose_threshold(
    logits: np.ndarray, labels: np.ndarray, grid: Sequence[float] = THRESHOLD_GRID, metric: str = "micro_f1"
) -> float:
    """The one threshold of `grid` at which a multi-label head's `logits` (N, K) score the best `metric` (micro F1,
    the main metric, or macro F1) against the 0/1 `labels` (N, K); of thresholds that score alike, the nearest to
    `MULTI_LABEL_THRESHOLD` (0.5 where nothing is gained)."""
    _check_threshold_metric(metric)
    gold = np.asarray(labels, dtype=np.int64).astype(bool)
    return _best(grid, lambda t: _f1(labels_above_threshold(logits, t).astype(bool), gold, metric))


def choose_label_thresholds(
    logits: np.ndarray, labels: np.ndarray, grid: Sequence[float] = THRESHOLD_GRID, metric: str = "micro_f1"
) -> list[float]:
    """One threshold of `grid` per label (K) for a multi-label head's `logits` (N, K) against the 0/1 `labels`
    (N, K), starting from the one threshold `choose_threshold` gives every label. By macro F1 each label takes the
    threshold of its own best F1 (which makes their mean the best); by micro F1 each label in turn takes the one of
    the best micro F1, the others' held. Of thresholds that score alike, the nearest to `MULTI_LABEL_THRESHOLD`; a
    label with no gold example keeps the one threshold, as nothing on the split tells how high its sigmoids go."""
    gold = np.asarray(labels, dtype=np.int64).astype(bool).reshape(len(logits), -1)
    thresholds = [choose_threshold(logits, gold, grid, metric)] * gold.shape[1]
    logits = np.asarray(logits, dtype=np.float64).reshape(gold.shape)
    for label in np.flatnonzero(gold.any(axis=0)):

        def score(threshold: float, label: int = int(label)) -> float:
            if metric == "macro_f1":  # the label's own F1
                return _f1(labels_above_threshold(logits[:, label : label + 1], threshold).astype(bool),
                           gold[:, label : label + 1], metric)  # fmt: skip
            trial = [*thresholds[:label], threshold, *thresholds[label + 1 :]]
            return _f1(labels_above_threshold(logits, trial).astype(bool), gold, metric)

        thresholds[label] = _best(grid, score)
    return thresholds


class MultiLabelMetrics:
    """A `compute_metrics` callable for `Trainer` on multi-label tasks, each label predicted where its sigmoid is above
    `threshold`: "micro_f1" (F1 of every (example, label) decision pooled: the main metric), "macro_f1" (the mean of
    the per-label F1s, a label never predicted nor gold scoring 0), "subset_accuracy" (the share of examples whose
    predicted label set is exactly the gold one) and "top_set_share" (the share of examples given the commonest
    predicted set: 1.0, the model gives one answer to everything). scikit-learn computes the scores.

    Args:
        num_labels: the number of labels K.
        threshold: the sigmoid above which a label is predicted (`MULTI_LABEL_THRESHOLD` by default): one for every
            label, or one per label.
    """

    def __init__(self, num_labels: int, threshold: float | Sequence[float] = MULTI_LABEL_THRESHOLD) -> None:
        self.num_labels = num_labels
        self.threshold = threshold

    def compute(self, predictions: np.ndarray, references: np.ndarray) -> dict[str, float]:
        """Every metric on 0/1 predictions and references, both of shape (N, K)."""
        from sklearn.metrics import accuracy_score, f1_score

        predicted = np.asarray(predictions, dtype=np.int64).reshape(-1, self.num_labels)
        gold = np.asarray(references, dtype=np.int64).reshape(-1, self.num_labels)
        _, counts = np.unique(predicted, axis=0, return_counts=True)
        return {
            "micro_f1": float(f1_score(gold, predicted, average="micro", zero_division=0)),
            "macro_f1": float(f1_score(gold, predicted, average="macro", zero_division=0)),
            "subset_accuracy": float(accuracy_score(gold, predicted)),
            "top_set_share": float(counts.max() / max(len(predicted), 1)) if len(predicted) else 0.0,
        }

    def __call__(self, eval_prediction) -> dict[str, float]:
        """Trainer hook: `eval_prediction.predictions` (N, K) logits, `.label_ids` (N, K) 0/1 floats."""
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return self.compute(labels_above_threshold(logits, self.threshold), np.asarray(eval_prediction.label_ids))


class RegressionMetrics:
    """A `compute_metrics` callable for `Trainer` on regression tasks (STS-B): the correlations `run_glue` reports.

    Returns "pearson" and "spearmanr" (run_glue's key names, computed by the `pearsonr` and `spearmanr` metrics),
    "combined_score" (their mean, run_glue's model-selection score), "mse" (the mean squared error) and
    "prediction_std" (the spread of the predictions: near 0, the model gives every pair the same score).
    """

    def __init__(self) -> None:
        self.pearsonr = load_metric("pearsonr")
        self.spearmanr = load_metric("spearmanr")

    def compute(self, predictions: Sequence[float], references: Sequence[float]) -> dict[str, float]:
        """Every metric on float predictions and references, both of shape (N,)."""
        pearson = self.pearsonr.compute(predictions=predictions, references=references)["pearsonr"]
        spearman = self.spearmanr.compute(predictions=predictions, references=references)["spearmanr"]
        squared_errors = (np.asarray(predictions, dtype=np.float64) - np.asarray(references, dtype=np.float64)) ** 2
        return {
            "pearson": float(pearson),
            "spearmanr": float(spearman),
            "combined_score": (float(pearson) + float(spearman)) / 2,
            "mse": float(squared_errors.mean()),
            "prediction_std": float(np.std(np.asarray(predictions, dtype=np.float64))),
        }

    def __call__(self, eval_prediction) -> dict[str, float]:
        """Trainer hook: `eval_prediction.predictions` (N, 1) or (N,) scores, `.label_ids` (N,) float targets."""
        predictions = eval_prediction.predictions
        predictions = np.asarray(predictions[0] if isinstance(predictions, tuple) else predictions)
        if predictions.ndim == 2 and predictions.shape[1] == 1:
            predictions = predictions[:, 0]
        if predictions.ndim != 1:
            raise ValueError(f"Regression predictions must have shape (N,) or (N, 1), got {predictions.shape}.")
        references = np.asarray(eval_prediction.label_ids).reshape(-1)
        if references.shape != predictions.shape:
            raise ValueError(f"Got {predictions.shape[0]} predictions for {references.shape[0]} labels.")
        return self.compute(predictions.tolist(), references.tolist())


__all__ = [
    "LOCAL_METRICS",
    "MULTI_LABEL_THRESHOLD",
    "OFFLINE_VARIABLES",
    "ClassificationMetrics",
    "MultiLabelMetrics",
    "RegressionMetrics",
    "THRESHOLD_GRID",
    "THRESHOLD_METRICS",
    "choose_label_thresholds",
    "choose_threshold",
    "entity_spans",
    "labels_above_threshold",
    "load_metric",
    "local_metric_path",
]
