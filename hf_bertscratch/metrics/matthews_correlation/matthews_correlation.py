"""Matthews correlation as an `evaluate` metric module, shipped with the package so it works offline.

Same name, inputs and output key as the Hub's `evaluate-metric/matthews_correlation`; computed with scikit-learn.
"""

import datasets
import evaluate
from sklearn.metrics import matthews_corrcoef

_DESCRIPTION = "Matthews correlation coefficient: a balanced measure in [-1, 1] even for skewed classes."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): ground-truth labels.
    sample_weight (list of float): optional per-example weights.
Returns:
    matthews_correlation (float)
"""
_CITATION = "Matthews, B. W., Biochimica et Biophysica Acta 405(2), 1975."


class MatthewsCorrelation(evaluate.Metric):
    """Matthews correlation over integer class ids (scikit-learn's `matthews_corrcoef`)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.matthews_corrcoef.html"],
        )

    def _compute(self, predictions, references, sample_weight=None) -> dict:
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions, sample_weight=sample_weight))}
