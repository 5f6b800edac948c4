"""The metrics `hf_bertscratch.metrics` ships for offline `evaluate.load`, computed with scikit-learn.

Each class keeps the name, inputs and output key of the Hub's `evaluate-metric/<name>` module; the module scripts
`<name>/<name>.py` beside this file only import their class from here (`evaluate.load` takes a script's first
metric class).
"""

import evaluate
import numpy as np
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from hf_bertscratch.metrics.metric_info import metric_info


def class_id_metric_info(
    description: str, citation: str, sklearn_function: str, arguments: str, returns: str
) -> evaluate.MetricInfo:
    """The `MetricInfo` every packaged metric module returns: integer class ids in, computed by `sklearn_function`.

    arguments: the docstring lines of the keyword arguments beyond predictions, references and sample_weight.
    """
    return metric_info(
        description,
        citation,
        "int32",
        ("predicted labels", "ground-truth labels"),
        f"{arguments}\nsample_weight (list of float): optional per-example weights.",
        returns,
        f"https://scikit-learn.org/stable/modules/generated/sklearn.metrics.{sklearn_function}.html",
    )


class Accuracy(evaluate.Metric):
    """Accuracy over integer class ids (scikit-learn's `accuracy_score`)."""

    def _info(self) -> evaluate.MetricInfo:
        return class_id_metric_info(
            description="Accuracy: the fraction of predictions equal to the references.",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            sklearn_function="accuracy_score",
            arguments="normalize (bool): if False, return the number of correct predictions instead of the fraction.",
            returns="accuracy (float)",
        )

    def _compute(self, predictions, references, normalize: bool = True, sample_weight=None) -> dict:
        return {
            "accuracy": float(accuracy_score(references, predictions, normalize=normalize, sample_weight=sample_weight))
        }


class F1(evaluate.Metric):
    """F1 over integer class ids (scikit-learn's `f1_score`)."""

    def _info(self) -> evaluate.MetricInfo:
        return class_id_metric_info(
            description="F1: the harmonic mean of precision and recall, F1 = 2 * (P * R) / (P + R).",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            sklearn_function="f1_score",
            arguments="""
                labels (list of int): the labels to include when average != "binary".
                pos_label (int): the positive class for average="binary". Defaults to 1.
                average (str): "binary" (default), "micro", "macro", "weighted", "samples" or None (per class).
            """,
            returns="f1 (float, or array of float when average=None)",
        )

    def _compute(self, predictions, references, labels=None, pos_label=1, average="binary", sample_weight=None) -> dict:
        score = f1_score(
            references, predictions, labels=labels, pos_label=pos_label, average=average, sample_weight=sample_weight
        )
        # A scalar for averaged scores, the per-class array when average=None (as the Hub module does).
        return {"f1": float(score) if np.ndim(score) == 0 else score}


class MatthewsCorrelation(evaluate.Metric):
    """Matthews correlation over integer class ids (scikit-learn's `matthews_corrcoef`)."""

    def _info(self) -> evaluate.MetricInfo:
        return class_id_metric_info(
            description="Matthews correlation coefficient: a balanced measure in [-1, 1] even for skewed classes.",
            citation="Matthews, B. W., Biochimica et Biophysica Acta 405(2), 1975.",
            sklearn_function="matthews_corrcoef",
            arguments="",
            returns="matthews_correlation (float)",
        )

    def _compute(self, predictions, references, sample_weight=None) -> dict:
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions, sample_weight=sample_weight))}


__all__ = ["F1", "Accuracy", "MatthewsCorrelation", "class_id_metric_info"]
