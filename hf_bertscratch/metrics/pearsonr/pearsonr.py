"""The `evaluate` metric module `pearsonr`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.scipy_metrics import Pearsonr  # noqa: F401 (evaluate.load takes the script's metric class)
