"""F1 as an `evaluate` metric module, shipped with the package so `evaluate.load` works offline.

Same name, inputs and output key as the Hub's `evaluate-metric/f1`; computed with scikit-learn.
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import f1_score

_DESCRIPTION = "F1: the harmonic mean of precision and recall, F1 = 2 * (P * R) / (P + R)."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): ground-truth labels.
    labels (list of int): the labels to include when average != "binary".
    pos_label (int): the positive class for average="binary". Defaults to 1.
    average (str): "binary" (default), "micro", "macro", "weighted", "samples" or None (per-class scores).
    sample_weight (list of float): optional per-example weights.
Returns:
    f1 (float, or array of float when average=None)
"""
_CITATION = "Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011."


class F1(evaluate.Metric):
    """F1 over integer class ids (scikit-learn's `f1_score`)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.f1_score.html"],
        )

    def _compute(self, predictions, references, labels=None, pos_label=1, average="binary", sample_weight=None) -> dict:
        score = f1_score(
            references, predictions, labels=labels, pos_label=pos_label, average=average, sample_weight=sample_weight
        )
        # A scalar for averaged scores, the per-class array when average=None (as the Hub module does).
        return {"f1": float(score) if np.ndim(score) == 0 else score}
