"""The `evaluate` metric module `spearmanr`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.scipy_metrics import Spearmanr  # noqa: F401 (evaluate.load takes the script's metric class)
