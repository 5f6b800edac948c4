"""Evaluate a fine-tuned model under PyTorch, ONNX fp32 and ONNX int8 (thin wrapper; see
hf_bertscratch/onnx_evaluation.py and --help)."""

from hf_bertscratch_base import run_as_script
from hf_bertscratch_base.errors import errors_as_one_line

run_as_script(__file__)  # its lines name `scripts/evaluate_onnx.py`, the command run

# An error: one line and exit status 1 ($BERTSCRATCH_DEBUG: the traceback), as `bertscratch evaluate-onnx` ends
with errors_as_one_line("evaluate-onnx"):
    from hf_bertscratch.onnx_evaluation import main

    if __name__ == "__main__":
        main()
