"""The `evaluate` metric module `seqeval`, shipped so that `evaluate.load` works offline (`hf_bertscratch.metrics`)."""

from hf_bertscratch.metrics.sequence_labelling import Seqeval  # noqa: F401 (evaluate.load takes the script's metric class)
