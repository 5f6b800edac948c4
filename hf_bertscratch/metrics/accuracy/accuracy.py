"""Accuracy as an `evaluate` metric module, shipped with the package so `evaluate.load` works offline.

Same name, inputs and output key as the Hub's `evaluate-metric/accuracy`; computed with scikit-learn.
"""

import datasets
import evaluate
from sklearn.metrics import accuracy_score

_DESCRIPTION = "Accuracy: the fraction of predictions equal to the references."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): ground-truth labels.
    normalize (bool): if False, return the number of correct predictions instead of the fraction.
    sample_weight (list of float): optional per-example weights.
Returns:
    accuracy (float)
"""
_CITATION = "Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011."


class Accuracy(evaluate.Metric):
    """Accuracy over integer class ids (scikit-learn's `accuracy_score`)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.accuracy_score.html"],
        )

    def _compute(self, predictions, references, normalize: bool = True, sample_weight=None) -> dict:
        return {
            "accuracy": float(accuracy_score(references, predictions, normalize=normalize, sample_weight=sample_weight))
        }
