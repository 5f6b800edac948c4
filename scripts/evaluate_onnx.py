"""Evaluate a fine-tuned model under PyTorch, ONNX fp32 and ONNX int8 (thin wrapper; see
hf_bertscratch/onnx_evaluation.py and --help)."""

from hf_bertscratch.onnx_evaluation import main

if __name__ == "__main__":
    main()
