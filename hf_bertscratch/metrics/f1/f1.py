"""The `evaluate` metric module `f1`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.sklearn_metrics import F1  # noqa: F401 (evaluate.load takes the script's metric class)
