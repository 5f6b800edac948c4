"""The `evaluate` metric module `accuracy`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.sklearn_metrics import Accuracy  # noqa: F401 (evaluate.load takes the script's metric class)
