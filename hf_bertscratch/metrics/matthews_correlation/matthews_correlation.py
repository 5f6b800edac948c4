"""The `evaluate` metric module `matthews_correlation`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.sklearn_metrics import MatthewsCorrelation  # noqa: F401 (evaluate.load takes the script's metric class)
