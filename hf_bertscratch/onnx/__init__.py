"""ONNX: export a BertScratch model (`export.export_onnx`, `bertscratch export`), quantize it to int8 (`quantize`),
run an exported folder with ONNX Runtime (`runtime.BertScratchOnnxRuntimeModel`, `--backend onnxruntime`), and score
a fine-tuned model under all three (`evaluation`, `bertscratch evaluate-onnx`). The onnx, onnxscript and onnxruntime
packages come with the `[onnx]` extra.
"""
