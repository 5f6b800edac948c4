"""ONNX Runtime's dynamic int8 quantization of an exported graph (`quantize_int8`), whether the CPU saturates
int8 products (`int8_saturates`), and the int8 export's check against PyTorch (`check_quantized_export`)."""

from __future__ import annotations

import logging
import os
import platform
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from transformers import PreTrainedModel

from .common import INT8_RTOL, ONNX_TASKS, require
from .runtime import compare_outputs

if TYPE_CHECKING:
    from onnx import GraphProto

logger = logging.getLogger(__name__)


def int8_saturates(cpuinfo: str | None = None, machine: str | None = None) -> bool:
    """Whether ONNX Runtime's uint8 x int8 products can saturate on this CPU: an x86 CPU without a VNNI dot product
    (`avx512_vnni`, `avx_vnni` or `amx_int8` among /proc/cpuinfo's flags), whose AVX2 kernel adds pairs of 8-bit
    products in 16 bits. Where the flags cannot be read, an x86 CPU is taken to saturate; other CPUs (Arm) do not.
    `cpuinfo` and `machine` stand in for /proc/cpuinfo and `platform.machine()`."""
    machine = (machine if machine is not None else platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return True
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}


def quantize_int8(path: Path, reduce_range: bool | None = None) -> None:
    """Replace the fp32 ONNX file `path` by ONNX Runtime's dynamic int8 quantization of it.

    Every product with a constant weight gets int8 (QInt8) weights, one scale per output channel, and quantizes its
    input to uint8 at run time from that tensor's range (`quantize_dynamic`): each MatMul (a Gemm is rewritten as
    MatMul and Add first, `_gemms_as_matmuls`: the dynamic quantizer has no integer Gemm) and each Attention
    (QAttention, whose QKV weights the quantizer always rounds to 7 bits). ONNX Runtime's pre-processing
    (`quant_pre_process`: shape inference and constant folding) runs first, which turns the tied decoder's
    transposed embedding matrix into a constant that can be quantized: the vocabulary projection, most of a small
    BERT's compute, then runs in int8 too (the embedding lookup keeps its own fp32 copy).

    Args:
        reduce_range: round the weights to 7 bits. On an x86 CPU without VNNI the full 8-bit product saturates (on
            a 2-core AMD EPYC with AVX2 only, the int8 tests' 8-bit exports failed `check_quantized_export`, one
            output off by 38% of its range, and passed with 7 bits); with VNNI, per_channel=True and the full 8-bit
            range was the most accurate of the four settings of `per_channel` and `reduce_range` on the check batch
            and on a trained masked LM's masked tokens. None: 7 bits where this CPU saturates (`int8_saturates`). A
            model with 8-bit weights exported on a VNNI CPU can saturate on an AVX2-only one: pass True for a model
            that runs anywhere.
    """
    reduce_range = int8_saturates() if reduce_range is None else reduce_range
    onnx = require("onnx")
    quantization = require("onnxruntime.quantization")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        matmuls, prepared = Path(scratch) / "matmuls.onnx", Path(scratch) / "prepared.onnx"
        quantized = Path(scratch) / "quantized.onnx"
        model = onnx.load(str(path))
        _gemms_as_matmuls(model.graph)
        onnx.save(model, str(matmuls))
        try:
            quant_pre_process(str(matmuls), str(prepared))
        except TypeError:  # its symbolic shape inference cannot follow some reductions (a max-pooling head's)
            quant_pre_process(str(matmuls), str(prepared), skip_symbolic_shape=True)
        quantization.quantize_dynamic(
            prepared,
            quantized,
            op_types_to_quantize=["MatMul", "Attention"],
            per_channel=True,
            reduce_range=reduce_range,
            weight_type=quantization.QuantType.QInt8,
        )
        os.replace(quantized, path)


def _gemms_as_matmuls(graph: GraphProto) -> None:
    """Rewrite every Gemm of the ONNX `graph` (changed in place) as MatMul, then Add of its bias if it has one; a
    transposed weight (transB) gets a Transpose node, which `quant_pre_process` folds into a constant."""
    helper = require("onnx").helper
    nodes = []
    for node in graph.node:
        if node.op_type != "Gemm" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        attributes = {each.name: helper.get_attribute_value(each) for each in node.attribute}
        if attributes.get("alpha", 1.0) != 1.0 or attributes.get("beta", 1.0) != 1.0 or attributes.get("transA", 0):
            raise ValueError(f"Gemm {node.name!r} has attributes {attributes}: only alpha = beta = 1, transA = 0.")
        name = node.name or node.output[0]
        weight = node.input[1]
        if attributes.get("transB", 0):
            nodes.append(
                helper.make_node("Transpose", [weight], [f"{name}/weight_t"], f"{name}/transpose", perm=[1, 0])
            )
            weight = f"{name}/weight_t"
        bias = node.input[2] if len(node.input) > 2 else ""
        product = f"{name}/product" if bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], weight], [product], f"{name}/matmul"))
        if bias:
            nodes.append(helper.make_node("Add", [product, bias], [node.output[0]], f"{name}/bias"))
    del graph.node[:]
    graph.node.extend(nodes)


def check_quantized_export(
    folder: Path, model: PreTrainedModel, task: str, names: tuple[str, ...]
) -> tuple[float, float | None]:
    """Check an int8 export against the fp32 PyTorch model on a right-padded (16, 16) batch.

    One test, raising RuntimeError when failed, and one measure, returned and logged:
    - every output within `INT8_RTOL` (10%) of its largest |PyTorch value|: max |ONNX Runtime - PyTorch| <= 0.1 *
      max |PyTorch|. Relative, because dynamic quantization rounds each MatMul input to 256 levels spread over that
      tensor's own range (and each weight row to 255 levels over its range), so the error grows with the values'
      magnitude, not as a fixed amount. Measured: 1-3% on logits of random and trained models, 5% on the pooler
      output of a random 12-layer base model; a broken quantization (a wrong scale, a saturated product) is off by
      the order of the values themselves. The fp32 tolerance `ATOL` (1e-4) is far below int8's resolution.
    - how often the predictions agree: the fraction of the batch's rows or real positions where the top-1 of every
      `OnnxTask.decisions` output (a classifier's label, fill-mask's token, a tagger's tag) equals PyTorch's. Not a
      test: on this batch of random tokens a row's top-1 can flip only where PyTorch's two best scores are within
      twice the error the first test bounds, so a model whose scores are near-ties there (a barely trained
      classifier: 14 of 16 rows agreed in one run of the documented commands' tests, at least 15 in others) flips
      by chance, while a quantization that changes confident answers fails the first test. Agreement on real
      text is `bertscratch evaluate-onnx`'s "top-1 agreement" (measured 95-100% on trained models).

    Returns:
        The largest difference as a fraction of its output's range, and the lowest agreement (None without
        decisions).
    """
    worst, lowest = 0.0, None
    for name, (expected, actual) in compare_outputs(folder, model, task, names, 16, 16).items():
        relative = float(np.abs(expected - actual).max() / max(float(np.abs(expected).max()), 1e-12))
        if not relative <= INT8_RTOL:
            raise RuntimeError(
                f"int8 {name} differs from PyTorch by {relative:.1%} of its range (> {INT8_RTOL:.0%}): "
                "quantization broke the model."
            )
        worst = max(worst, relative)
        if name in ONNX_TASKS[task].decisions:
            agreement = float((expected.argmax(-1) == actual.argmax(-1)).mean())
            lowest = agreement if lowest is None else min(lowest, agreement)
    return worst, lowest


__all__ = [
    "check_quantized_export",
    "int8_saturates",
    "quantize_int8",
]
