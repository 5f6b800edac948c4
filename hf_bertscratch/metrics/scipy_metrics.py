"""Correlation metrics `hf_bertscratch.metrics` ships for offline `evaluate.load`, computed with SciPy.

Each class keeps the name, inputs and output keys of the Hub's `evaluate-metric/<name>` module (predictions and
references as `Value("float")`, so both paths see the same float32 values); the module scripts `<name>/<name>.py`
beside this file only import their class from here.
"""

import evaluate
from scipy.stats import pearsonr, spearmanr

from hf_bertscratch.metrics.metric_info import metric_info


def correlation_metric_info(description: str, citation: str, scipy_function: str, returns: str) -> evaluate.MetricInfo:
    """The `MetricInfo` of a correlation metric: float predictions and references, computed by `scipy_function`."""
    return metric_info(
        description,
        citation,
        "float",
        ("predicted scores", "ground-truth scores"),
        "return_pvalue (bool): also return the p-value of the test for no correlation. Defaults to False.",
        returns,
        f"https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.{scipy_function}.html",
    )


SCIPY_CITATION = (
    "Virtanen et al., SciPy 1.0: Fundamental Algorithms for Scientific Computing in Python, Nature Methods 17, 2020."
)


class Pearsonr(evaluate.Metric):
    """Pearson correlation coefficient between float predictions and references (SciPy's `pearsonr`)."""

    def _info(self) -> evaluate.MetricInfo:
        return correlation_metric_info(
            description="Pearson correlation coefficient: the linear correlation of two samples, in [-1, 1].",
            citation=SCIPY_CITATION,
            scipy_function="pearsonr",
            returns='pearsonr (float), and "p-value" (float) when return_pvalue=True',
        )

    def _compute(self, predictions, references, return_pvalue: bool = False) -> dict:
        result = pearsonr(references, predictions)
        if return_pvalue:
            return {"pearsonr": float(result[0]), "p-value": float(result[1])}
        return {"pearsonr": float(result[0])}


class Spearmanr(evaluate.Metric):
    """Spearman rank correlation coefficient between float predictions and references (SciPy's `spearmanr`)."""

    def _info(self) -> evaluate.MetricInfo:
        return correlation_metric_info(
            description="Spearman rank correlation coefficient: the Pearson correlation of the ranks, in [-1, 1].",
            citation=SCIPY_CITATION,
            scipy_function="spearmanr",
            returns="spearmanr (float), and spearmanr_pvalue (float) when return_pvalue=True",
        )

    def _compute(self, predictions, references, return_pvalue: bool = False) -> dict:
        result = spearmanr(references, predictions)
        if return_pvalue:
            return {"spearmanr": float(result[0]), "spearmanr_pvalue": float(result[1])}
        return {"spearmanr": float(result[0])}


__all__ = ["Pearsonr", "Spearmanr", "correlation_metric_info"]
