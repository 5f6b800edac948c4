"""ONNX, a backend: export a BertScratch model (`export.export_onnx`, `bertscratch export`), quantize it to int8
(`quantize`), and run an exported folder with ONNX Runtime (`runtime.BertScratchOnnxRuntimeModel`, `--backend
onnxruntime`). Scoring a fine-tuned model under all three is an application standing on this package and on the tasks:
`hf_bertscratch.onnx_evaluation` (`bertscratch evaluate-onnx`). The onnx, onnxscript and onnxruntime packages come
with the `[onnx]` extra.
"""
