"""The `evaluate` metric module `squad`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.squad_metrics import Squad  # noqa: F401 (evaluate.load takes the script's metric class)
