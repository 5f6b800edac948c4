"""Export a BertScratch model to ONNX, and run an exported folder with ONNX Runtime.

    bertscratch export MODEL OUT [--task fill-mask] [--masked_positions] [--quantize dynamic]

The export is the project's own, through `torch.onnx.export(dynamo=True)` (Hugging Face Optimum does not install
beside transformers 5 yet). OUT is laid out as Optimum's `ORTModelFor*` classes expect: `model.onnx` (one file,
weights inside), `config.json` (plus `configuration_bertscratch.py` for `trust_remote_code` loading) and the tokenizer
files. The graph takes `input_ids`, `attention_mask` and `token_type_ids`, each (batch, sequence) int64 with both axes
dynamic, and returns the head's outputs by the names transformers gives them (`ONNX_TASKS`).

Two variants:
- `masked_positions=True` (fill-mask only): the graph takes a fourth input `masked_positions`, (batch, masks) int64
  positions, and decodes the vocabulary there only: `logits` is (batch, masks, V). A fill-mask query needs the [MASK]
  rows alone, and the vocabulary projection is most of a small BERT's compute. Optimum's `ORTModelForMaskedLM` feeds
  the three standard inputs only, so this variant is for `BertScratchOnnxRuntimeModel` (`--backend onnxruntime`).
- `quantize="dynamic"`: OUT's `model.onnx` is ONNX Runtime's dynamic int8 quantization of the checked fp32 graph
  (`quantize_int8`); the fp32 graph is not kept (export again without `--quantize` for it). It is checked against
  PyTorch with the int8 tolerance of `check_quantized_export`.

The graph written (`optimize=True`, the default) is the one ONNX Runtime's CPU provider runs fastest
(`BertScratchOnnxEncoder` says why; docs/onnx.md has the measurements): each layer's attention is ONNX Runtime's
contrib operator `com.microsoft.Attention` on the fused QKV weight, the rest of the encoder runs on the rows of the
real tokens only, and every Linear is a Gemm. It runs on ONNX Runtime only. At real (non-pad) positions the outputs
equal the PyTorch model's; at pad positions the last hidden state is zero, as the PyTorch model's default (unpadded)
path returns it, and a per-token head gives what it computes from zeros there: read pad positions from neither.
`optimize=False` writes the plain graph of torch.onnx for other ONNX runtimes: the dense eager computation,
transformers' BERT's numbers at pad positions too. The tiled decoding of the PyTorch model is off under tracing.

`BertScratchOnnxRuntimeModel` wraps an exported folder's `InferenceSession` as a `PreTrainedModel` whose forward
returns the same `ModelOutput` as the PyTorch head, so transformers pipelines run on it unchanged
(`hf_bertscratch.inference`, `--backend onnxruntime`).
"""

from __future__ import annotations

import importlib
import logging
import os
import platform
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from . import configuration_bertscratch
from .configuration_bertscratch import BertScratchConfig
from .modeling_bertscratch import BertScratchAttention, BertScratchEncoder, BertScratchModel
from .run_folder import staged_folder

logger = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
MASKED_POSITIONS = "masked_positions"  # the fourth input of a fill-mask export with `masked_positions=True`
QUANTIZATIONS = ("dynamic",)
# Tolerance of the check run after every export (and of the tests): fp32 ONNX Runtime against PyTorch.
ATOL = 1e-4
# Tolerances of an int8 export against PyTorch (`check_quantized_export` says why these values).
INT8_RTOL = 0.1  # largest |ONNX Runtime - PyTorch| of an output, as a fraction of that output's largest |value|
INT8_AGREEMENT = 0.9  # least fraction of the check batch's predictions (top-1 of `OnnxTask.decisions`) that agree


@dataclass(frozen=True)
class OnnxTask:
    """One exportable head: the Auto class that loads it, its outputs in order, and what reads them."""

    auto_class: str
    outputs: tuple[str, ...]
    output_class: type[ModelOutput]
    architectures: tuple[str, ...]  # checkpoint architecture suffixes whose default task this is
    optimum_class: str  # the Optimum class that loads the exported folder
    per_sequence: tuple[str, ...] = ()  # outputs with one row per sequence (B, ...), not per token (B, T, ...)
    decisions: tuple[str, ...] = ()  # outputs whose top-1 over the last axis is the prediction (a class, a token)


# Task names are Optimum's (and the pipelines').
ONNX_TASKS: dict[str, OnnxTask] = {
    "feature-extraction": OnnxTask(
        "AutoModel",
        ("last_hidden_state", "pooler_output"),
        BaseModelOutputWithPooling,
        (),
        "ORTModelForFeatureExtraction",
        per_sequence=("pooler_output",),
    ),
    "fill-mask": OnnxTask(
        "AutoModelForMaskedLM",
        ("logits",),
        MaskedLMOutput,
        ("ForMaskedLM", "ForPreTraining"),
        "ORTModelForMaskedLM",
        decisions=("logits",),
    ),
    "text-classification": OnnxTask(
        "AutoModelForSequenceClassification",
        ("logits",),
        SequenceClassifierOutput,
        ("ForSequenceClassification",),
        "ORTModelForSequenceClassification",
        per_sequence=("logits",),
        decisions=("logits",),
    ),
    "token-classification": OnnxTask(
        "AutoModelForTokenClassification",
        ("logits",),
        TokenClassifierOutput,
        ("ForTokenClassification",),
        "ORTModelForTokenClassification",
        decisions=("logits",),
    ),
    "question-answering": OnnxTask(
        "AutoModelForQuestionAnswering",
        ("start_logits", "end_logits"),
        QuestionAnsweringModelOutput,
        ("ForQuestionAnswering",),
        "ORTModelForQuestionAnswering",
    ),
}


def require(package: str) -> object:
    """Import `package` or raise ImportError naming it and the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as error:
        raise ImportError(
            f"The ONNX path needs the {package!r} package, which is not installed: "
            "pip install 'hf-bertscratch[onnx]' (or pip install onnx onnxruntime onnxscript)."
        ) from error


def default_task(architectures: list[str] | None) -> str:
    """The task of the checkpoint's trained head (feature-extraction for a bare encoder or an unexported head)."""
    for task, spec in ONNX_TASKS.items():
        for name in architectures or []:
            if spec.architectures and name.endswith(spec.architectures):
                return task
    return "feature-extraction"


def check_task(task: str) -> OnnxTask:
    if task not in ONNX_TASKS:
        raise ValueError(f"task={task!r} cannot be exported: expected one of {list(ONNX_TASKS)}.")
    return ONNX_TASKS[task]


# ------------------------------------------------------------------------------------------------------- export


class _OnnxGraph(nn.Module):
    """The traced function: the three named inputs (and `masked_positions`, when traced with it) in, the task's
    outputs out as a tuple."""

    def __init__(self, model: PreTrainedModel, outputs: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.outputs = outputs

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
        masked_positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        extra = {} if masked_positions is None else {MASKED_POSITIONS: masked_positions}
        result = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, return_dict=True, **extra
        )
        return tuple(result[name] for name in self.outputs)


def output_names(model: PreTrainedModel, task: str) -> tuple[str, ...]:
    """The task's outputs that `model` returns (a bare encoder saved without a pooler has no `pooler_output`)."""
    names = ONNX_TASKS[task].outputs
    if task == "feature-extraction" and getattr(model, "pooler", None) is None:
        names = names[:1]
    return names


def example_batch(
    config: BertScratchConfig, batch_size: int, seq_len: int, seed: int = 0, masks: int = 0
) -> dict[str, torch.Tensor]:
    """A right-padded (batch_size, seq_len) batch of random ids: row i has seq_len - i real tokens (at least 1).

    Token type ids switch to 1 halfway through each row's real tokens (when the config has two segments). With
    `masks` > 0 it also holds `masked_positions` (batch_size, masks): positions spread evenly over each row's real
    tokens, first to last (repeated in a row shorter than `masks`).
    """
    generator = torch.Generator().manual_seed(seed)
    lengths = (seq_len - torch.arange(batch_size)).clamp(min=1)  # (B,)
    positions = torch.arange(seq_len)[None]  # (1, T)
    attention_mask = (positions < lengths[:, None]).long()  # (B, T)
    low = min(5, config.vocab_size - 1)  # past the usual special tokens
    input_ids = torch.randint(low, config.vocab_size, (batch_size, seq_len), generator=generator)
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id or 0)
    second = (positions >= (lengths[:, None] + 1) // 2) & (attention_mask == 1)
    token_type_ids = (second & (config.type_vocab_size > 1)).long()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if masks > 0:
        batch[MASKED_POSITIONS] = torch.arange(masks)[None] * (lengths[:, None] - 1) // max(masks - 1, 1)  # (B, K)
    return batch


def export_graph(
    model: PreTrainedModel,
    task: str,
    path: Path,
    opset: int | None = None,
    masked_positions: bool = False,
    optimize: bool = True,
) -> tuple[str, ...]:
    """Trace `model` (eval mode, fp32) with dynamic batch and sequence axes and write the ONNX file `path`.

    masked_positions: trace the fill-mask head with the `masked_positions` input (module docstring).
    optimize: write the graph ONNX Runtime runs fastest (`onnx_runtime_layout`): each layer's attention as one
        `com.microsoft.Attention` node, every Linear as a Gemm on rows. It runs on ONNX Runtime only (the contrib
        operator). False: the plain graph of torch.onnx, which any ONNX runtime runs; under ONNX Runtime's CPU
        provider 1.2x (no padding) to 1.45x (30% padding) slower (docs/onnx.md).

    Returns the output names written.
    """
    require("onnxscript")  # torch.onnx's dynamo exporter translates through it
    if masked_positions and task != "fill-mask":
        raise ValueError(f"masked_positions is an input of the fill-mask export only; task is {task!r}.")
    names = output_names(model, task)
    graph = _OnnxGraph(model.float().eval(), names).eval()
    # No axis may be 1 in the example: torch.export would specialise on it.
    example = example_batch(model.config, 2, min(8, model.config.max_position_embeddings), masks=2)
    batch = torch.export.Dim("batch")
    sequence = torch.export.Dim("sequence", max=model.config.max_position_embeddings)
    dynamic = {name: {0: batch, 1: sequence} for name in INPUT_NAMES}
    if masked_positions:
        dynamic[MASKED_POSITIONS] = {0: batch, 1: torch.export.Dim("masks")}
    layout = onnx_runtime_layout(model) if optimize else nullcontext()
    with torch.no_grad(), _quiet_exporter(), layout:
        program = torch.onnx.export(
            graph,
            tuple(example[name] for name in dynamic),
            input_names=list(dynamic),
            output_names=list(names),
            dynamic_shapes=dynamic,
            opset_version=opset,
            dynamo=True,
            verbose=False,
        )
    program.save(str(path), external_data=False)
    return names


class BertScratchOnnxEncoder(nn.Module):
    """`BertScratchEncoder` as traced for ONNX Runtime (`export_graph(optimize=True)`): the layers run on the rows
    of the real tokens only, and each layer's attention is one `com.microsoft.Attention` node.

    Why each choice, measured under ONNX Runtime 1.32 on CPU (`lab/compare_onnx_graphs.py`, docs/onnx.md):
    - Attention: the projection, scores, softmax and context of all heads in one operator, in place of the
      Reshape/Transpose/Slice chain that splits the fused QKV product and the decomposed scaled dot product.
      ONNX Runtime's transformer optimizer cannot fuse it afterwards: its attention pattern wants three Q, K and V
      MatMuls on the same input, and the fused projection is one MatMul. The fused QKV projection is the operator's
      weight as it stands: Attention's (H, 3H) weight holds the query, key and value columns in that order, each
      head's hs columns together, which is `qkv.weight.T` (the module views its 3H outputs as (3, nh, hs)), and its
      (3H,) bias is `qkv.bias`. The key mask goes in raw, (B, T) int32 with 1 where attended, and a masked key gets
      `mask_filter_value` = finfo(float32).min added to its score as PyTorch's additive mask does, so any mask (left
      padding, a fully padded row) gives PyTorch's numbers. The operator's default scale 1/sqrt(hs) is `scaling`.
    - Rows: every Linear becomes one Gemm with its bias, and the residual Add + LayerNorm is left alone. On
      (B, T, H) tensors ONNX Runtime fuses Add + LayerNorm into SkipLayerNormalization, whose CPU kernel (a scalar
      loop with a division per element) is 2-4x slower than the two operators it replaces; the fusion only
      takes 3-D tensors.
    - Real tokens only: as the PyTorch model's unpadded path, the N real rows are gathered once (NonZero of the
      mask) and the output projection, LayerNorms and MLP run on (N, H); only Attention, which needs the (B, T, H)
      grid, gets them scattered back, pad rows zero. The last hidden state is zero at pad positions, as the PyTorch
      model's default path returns it.
    """

    def __init__(self, encoder: BertScratchEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        padding: object = None,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        """(B, T, H) and the additive (B, 1, 1, T) mask of `BertScratchModel` -> (B, T, H) last hidden state."""
        if padding is not None or output_attentions:
            raise ValueError("The ONNX encoder unpads the batch itself and returns no attention probabilities.")
        batch_size, seq_len, hidden_size = hidden_states.shape
        rows = hidden_states.reshape(batch_size * seq_len, hidden_size)  # (B*T, H)
        keep = real = None
        if attention_mask is not None:
            attended = attention_mask[:, 0, 0, :] == 0  # (B, T)
            keep = attended.to(torch.int32)
            real = attended.reshape(-1).nonzero().squeeze(-1)  # (N,) grid rows of the real tokens
            rows = rows.index_select(0, real)  # (N, H)
        for layer in self.encoder.layers:
            rows = layer.mlp(self._attention(layer.attention, rows, real, keep, hidden_states.shape))
        return _to_grid(rows, real, hidden_states.shape)

    @staticmethod
    def _attention(
        attention: BertScratchAttention,
        rows: torch.Tensor,
        real: torch.Tensor | None,
        keep: torch.Tensor | None,
        shape: torch.Size,
    ) -> torch.Tensor:
        """(N, H) -> (N, H): `BertScratchAttention` with its core as one ONNX Runtime Attention node on the grid."""
        hidden = _to_grid(rows, real, shape)  # (B, T, H)
        inputs = [hidden, attention.qkv.weight.t(), attention.qkv.bias]  # (B, T, H), (H, 3H), (3H,)
        if keep is not None:
            inputs.append(keep)
        context = torch.onnx.ops.symbolic(
            "com.microsoft::Attention",
            inputs,
            {"num_heads": attention.num_heads, "mask_filter_value": torch.finfo(torch.float32).min},
            dtype=rows.dtype,
            shape=shape,
            version=1,
        ).reshape(-1, shape[-1])  # (B*T, H)
        if real is not None:
            context = context.index_select(0, real)  # (N, H)
        return attention.layer_norm(rows + attention.dropout(attention.dense(context)))


def _to_grid(rows: torch.Tensor, real: torch.Tensor | None, shape: torch.Size) -> torch.Tensor:
    """(N, H) rows of the real tokens -> the (B, T, H) grid, zeros at pad positions (`real` None: rows are the
    whole grid already)."""
    if real is None:
        return rows.reshape(shape)
    return rows.new_zeros(shape[0] * shape[1], shape[2]).index_copy(0, real, rows).reshape(shape)


class _RowwiseLinear(nn.Linear):
    """An `nn.Linear` outside the encoder (its very parameters) on (..., in) traced as one (rows, in) product: a Gemm
    with its bias, and for the tied decoder the embedding matrix as it is, in place of a MatMul on a transposed copy
    of the weight plus an Add over the whole output."""

    def __init__(self, linear: nn.Linear) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        rows = super().forward(hidden_states.reshape(-1, self.in_features))  # (rows, out)
        return rows.reshape(*hidden_states.shape[:-1], self.out_features)


class _RowwiseLayerNorm(nn.LayerNorm):
    """An `nn.LayerNorm` outside the encoder (its very parameters) traced on (rows, H): the embeddings' sum and
    LayerNorm then stay two operators instead of becoming SkipLayerNormalization (`BertScratchOnnxEncoder`)."""

    def __init__(self, norm: nn.LayerNorm) -> None:
        nn.Module.__init__(self)
        self.normalized_shape, self.eps = norm.normalized_shape, norm.eps
        self.elementwise_affine, self.weight, self.bias = norm.elementwise_affine, norm.weight, norm.bias

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return super().forward(hidden_states.reshape(-1, hidden_states.shape[-1])).reshape(hidden_states.shape)


# Module type -> its row-wise form, for the modules outside the encoder (`onnx_runtime_layout`).
_ROWWISE: dict[type[nn.Module], type[nn.Module]] = {nn.Linear: _RowwiseLinear, nn.LayerNorm: _RowwiseLayerNorm}


@contextmanager
def onnx_runtime_layout(model: nn.Module) -> Iterator[None]:
    """While open, `model` traces as `export_graph(optimize=True)` writes it: its encoder as
    `BertScratchOnnxEncoder`, the Linear and LayerNorm layers outside it (embeddings, pooler, heads) on rows
    (`_ROWWISE`). For tracing only (outside an ONNX export the Attention operator has no values); the modules are
    put back on closing."""
    encoders = [(owner, owner.encoder) for owner in model.modules() if isinstance(owner, BertScratchModel)]
    inside = {id(module) for _, encoder in encoders for module in encoder.modules()}
    swaps = [  # (owner, attribute, original module)
        (owner, name, child)
        for owner in model.modules()
        if id(owner) not in inside
        for name, child in owner.named_children()
        if type(child) in _ROWWISE
    ]
    try:
        for owner, encoder in encoders:
            owner.encoder = BertScratchOnnxEncoder(encoder)
        for owner, name, child in swaps:
            setattr(owner, name, _ROWWISE[type(child)](child))
        yield
    finally:
        for owner, encoder in encoders:
            owner.encoder = encoder
        for owner, name, child in swaps:
            setattr(owner, name, child)


def operator_counts(path: str | Path) -> dict[str, int]:
    """How many nodes of each operator the ONNX file `path` holds, most frequent first (contrib operators of
    ONNX Runtime, domain com.microsoft, prefixed `com.microsoft.`)."""
    onnx = require("onnx")
    graph = onnx.load(str(path), load_external_data=False).graph
    names = (f"{node.domain}.{node.op_type}" if node.domain else node.op_type for node in graph.node)
    return dict(Counter(names).most_common())


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Hide the exporter's notes that say nothing about this model (torchvision ops it skips, the shared names of
    the dynamic axes, a deprecation inside torch); anything else it warns about still shows."""
    names = ("torch.onnx._internal.exporter._registration", "onnx_ir", "onnxscript")
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for each in loggers:  # onnx_ir and onnxscript log every initializer they fold or deduplicate at INFO
        each.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"# The axis name: \w+ will not be used", category=UserWarning)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def export_onnx(
    model: str | Path,
    output_dir: str | Path,
    task: str | None = None,
    tokenizer: str | Path | None = None,
    opset: int | None = None,
    overwrite: bool = False,
    check: bool = True,
    masked_positions: bool = False,
    quantize: str | None = None,
    optimize: bool = True,
    reduce_range: bool | None = None,
) -> Path:
    """Export the model folder (or Hub id) `model` to ONNX in `output_dir`, with its config and tokenizer.

    Args:
        task: one of `ONNX_TASKS`; None: the task of the checkpoint's head (`default_task`).
        tokenizer: tokenizer folder, vocab.txt or Hub id; None: the one saved with the model.
        opset: ONNX opset; None: torch.onnx's default.
        overwrite: replace an `output_dir` that already holds files (otherwise refused).
        check: run the written fp32 model with ONNX Runtime on a right-padded batch of another shape than the traced
            one and raise unless every output matches PyTorch within `ATOL` at real positions; after quantizing,
            check the int8 model too (`check_quantized_export`).
        masked_positions: fill-mask only: the graph takes `masked_positions` and decodes there only.
        quantize: None for fp32, or one of `QUANTIZATIONS`: "dynamic" writes ONNX Runtime's dynamic int8 model
            (`quantize_int8`) as model.onnx, in place of the fp32 one.
        optimize: write the graph ONNX Runtime runs fastest, with its contrib Attention operator (`export_graph`);
            False: the plain graph of torch.onnx, for other ONNX runtimes.
        reduce_range: with `quantize`: 7-bit weights (True), 8-bit (False), or None: 7 bits where this CPU's int8
            products saturate (`quantize_int8`).

    Returns:
        `output_dir`, written in one rename once complete.
    """
    from .model_reference import check_model_reference
    from .tokenization import load_tokenizer

    model = check_model_reference(model)
    output_dir = Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not overwrite:
        raise FileExistsError(
            f"Output {str(output_dir)!r} already exists and is not empty; pass --overwrite to replace it."
        )
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize={quantize!r} is not supported: expected one of {QUANTIZATIONS} or none.")
    config = AutoConfig.from_pretrained(model)
    task = task or default_task(config.architectures)
    spec = check_task(task)
    torch_model = getattr(importlib.import_module("transformers"), spec.auto_class).from_pretrained(
        model, dtype=torch.float32
    )
    loaded_tokenizer = load_tokenizer(str(tokenizer if tokenizer is not None else model))
    with staged_folder(output_dir) as staging:
        names = export_graph(torch_model, task, staging / ONNX_FILE, opset, masked_positions, optimize)
        torch_model.config.save_pretrained(staging)
        shutil.copy(configuration_bertscratch.__file__, staging / Path(configuration_bertscratch.__file__).name)
        loaded_tokenizer.save_pretrained(staging)
        if check:
            difference = check_export(staging, torch_model, task, names)
            logger.info("ONNX Runtime matches PyTorch: largest difference %.1e", difference)
        if quantize is not None:
            quantize_int8(staging / ONNX_FILE, reduce_range)
            if check:
                relative, agreement = check_quantized_export(staging, torch_model, task, names)
                logger.info(
                    "int8 ONNX Runtime matches PyTorch: largest difference %.1f%% of the output's range, "
                    "top-1 agreement %s",
                    100 * relative,
                    "-" if agreement is None else f"{agreement:.1%}",
                )
    return output_dir


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
        quant_pre_process(str(matmuls), str(prepared))
        quantization.quantize_dynamic(
            prepared,
            quantized,
            op_types_to_quantize=["MatMul", "Attention"],
            per_channel=True,
            reduce_range=reduce_range,
            weight_type=quantization.QuantType.QInt8,
        )
        os.replace(quantized, path)


def _gemms_as_matmuls(graph: object) -> None:
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


# -------------------------------------------------------------------------------------------- ONNX Runtime


def onnx_session(folder: str | Path, num_threads: int | None = None, spinning: bool | None = None) -> object:
    """An ONNX Runtime CPU `InferenceSession` on `folder`/model.onnx, all graph optimisations on.

    num_threads: intra-op threads; None: ONNX Runtime's choice.
    spinning: whether idle intra-op threads busy-wait for work; None: ONNX Runtime's default (they do).
    """
    ort = require("onnxruntime")
    path = Path(folder) / ONNX_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(folder)!r} has no {ONNX_FILE}: export the model first (bertscratch export MODEL OUT) and pass OUT."
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    if spinning is not None:
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def graph_input_names(inference_session: object) -> tuple[str, ...]:
    """The input names of an ONNX Runtime `InferenceSession`'s graph, in order."""
    return tuple(each.name for each in inference_session.get_inputs())


def run_session(inference_session: object, inputs: dict[str, torch.Tensor | np.ndarray]) -> dict[str, np.ndarray]:
    """Run an ONNX Runtime `InferenceSession` on the named inputs its graph takes (attention_mask defaults to ones,
    token_type_ids to zeros); every output by name."""
    wanted = graph_input_names(inference_session)
    feeds = {name: np.asarray(value, dtype=np.int64) for name, value in inputs.items() if name in wanted}
    if "input_ids" not in feeds:
        raise ValueError(f"ONNX inputs need input_ids; got {sorted(inputs)}.")
    feeds.setdefault("attention_mask", np.ones_like(feeds["input_ids"]))
    feeds.setdefault("token_type_ids", np.zeros_like(feeds["input_ids"]))
    if MASKED_POSITIONS in wanted and MASKED_POSITIONS not in feeds:
        raise ValueError(
            f"This export decodes given positions only: pass {MASKED_POSITIONS} (batch, masks), or export without "
            "--masked_positions for logits at every position."
        )
    names = [output.name for output in inference_session.get_outputs()]
    return dict(zip(names, inference_session.run(names, feeds)))


def compare_outputs(
    folder: Path, model: PreTrainedModel, task: str, names: tuple[str, ...], batch_size: int, seq_len: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(PyTorch, ONNX Runtime) values of every output on a right-padded `example_batch`, per-token outputs at real
    positions only; an export with `masked_positions` is given 3 positions per row."""
    inference_session = onnx_session(folder)
    masks = 3 if MASKED_POSITIONS in graph_input_names(inference_session) else 0
    seq_len = min(seq_len, model.config.max_position_embeddings)
    batch = example_batch(model.config, batch_size, seq_len, seed=1, masks=masks)
    onnx_outputs = run_session(inference_session, batch)
    with torch.no_grad():
        torch_outputs = model(**batch, return_dict=True)
    real = batch["attention_mask"].bool().numpy()
    pairs = {}
    for name in names:
        expected, actual = torch_outputs[name].numpy(), onnx_outputs[name]
        if name not in ONNX_TASKS[task].per_sequence and not masks:
            expected, actual = expected[real], actual[real]  # per-token outputs: real positions only
        pairs[name] = (expected, actual)
    return pairs


def check_export(folder: Path, model: PreTrainedModel, task: str, names: tuple[str, ...]) -> float:
    """Largest |ONNX Runtime - PyTorch| over every output at real positions of a right-padded (3, 11) batch; raises
    if over `ATOL`. PyTorch runs its default path here (unpadded), so this also checks the two paths agree."""
    worst = 0.0
    for name, (expected, actual) in compare_outputs(folder, model, task, names, 3, 11).items():
        difference = float(np.abs(expected - actual).max())
        if not difference <= ATOL:
            raise RuntimeError(f"Exported {name} differs from PyTorch by {difference:.2e} (> {ATOL}): export is wrong.")
        worst = max(worst, difference)
    return worst


def check_quantized_export(
    folder: Path, model: PreTrainedModel, task: str, names: tuple[str, ...]
) -> tuple[float, float | None]:
    """Check an int8 export against the fp32 PyTorch model on a right-padded (16, 16) batch.

    Two tests, both raising RuntimeError when failed:
    - every output within `INT8_RTOL` (10%) of its largest |PyTorch value|: max |ONNX Runtime - PyTorch| <= 0.1 *
      max |PyTorch|. Relative, because dynamic quantization rounds each MatMul input to 256 levels spread over that
      tensor's own range (and each weight row to 255 levels over its range), so the error grows with the values'
      magnitude, not as a fixed amount. Measured: 1-3% on logits of random and trained models, 5% on the pooler
      output of a random 12-layer base model; a broken quantization (a wrong scale, a saturated product) is off by
      the order of the values themselves. The fp32 tolerance `ATOL` (1e-4) is far below int8's resolution.
    - the predictions agree: the top-1 of every `OnnxTask.decisions` output (a classifier's label, fill-mask's
      token, a tagger's tag) equals PyTorch's on at least `INT8_AGREEMENT` (90%) of the batch's rows or real
      positions. Where PyTorch's two best scores are closer than the int8 error the top-1 may flip, which the
      tolerance allows; 90% leaves room for those near-ties (measured 95-100%) while catching a model whose
      answers have changed.

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
            if not agreement >= INT8_AGREEMENT:
                raise RuntimeError(
                    f"int8 {name} predicts PyTorch's top-1 on {agreement:.0%} of the check batch "
                    f"(< {INT8_AGREEMENT:.0%}): quantization changed the model's answers."
                )
            lowest = agreement if lowest is None else min(lowest, agreement)
    return worst, lowest


class BertScratchOnnxRuntimeModel(PreTrainedModel):
    """An exported folder run by ONNX Runtime behind the `PreTrainedModel` interface pipelines use.

    `forward(input_ids, attention_mask, token_type_ids)` returns the task's `ModelOutput` (the PyTorch head's output
    class) holding the ONNX outputs as CPU tensors; a fill-mask export with `masked_positions` also takes those
    (`input_names` says which the graph takes). It has no parameters: it always runs on the CPU in float32 (an int8
    export quantizes inside the graph).
    """

    config_class = BertScratchConfig

    def __init__(self, config: BertScratchConfig, inference_session: object, task: str) -> None:
        super().__init__(config)
        self.inference_session = inference_session
        self.task = task
        self.input_names = graph_input_names(inference_session)
        self.post_init()

    @classmethod
    def from_folder(cls, folder: str | Path, task: str, num_threads: int | None = None) -> BertScratchOnnxRuntimeModel:
        """Load `folder` (written by `export_onnx`) for `task`; raises if its graph lacks the task's outputs."""
        spec = check_task(task)
        inference_session = onnx_session(folder, num_threads)
        found = [output.name for output in inference_session.get_outputs()]
        if found[:1] != list(spec.outputs[:1]):
            raise ValueError(
                f"{str(Path(folder) / ONNX_FILE)!r} has outputs {found}, but {task} reads {list(spec.outputs)}: "
                f"export it with --task {task}."
            )
        return cls(AutoConfig.from_pretrained(str(folder)), inference_session, task)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        **kwargs: object,
    ) -> ModelOutput:
        if masked_positions is not None and MASKED_POSITIONS not in self.input_names:
            raise ValueError(
                f"This export has no {MASKED_POSITIONS} input: export it with --masked_positions (fill-mask) to "
                "decode given positions only."
            )
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            MASKED_POSITIONS: masked_positions,
        }
        outputs = run_session(
            self.inference_session, {name: value for name, value in inputs.items() if value is not None}
        )
        return ONNX_TASKS[self.task].output_class(**{name: torch.from_numpy(value) for name, value in outputs.items()})


__all__ = [
    "ATOL",
    "INT8_AGREEMENT",
    "INT8_RTOL",
    "BertScratchOnnxEncoder",
    "BertScratchOnnxRuntimeModel",
    "INPUT_NAMES",
    "MASKED_POSITIONS",
    "ONNX_FILE",
    "ONNX_TASKS",
    "QUANTIZATIONS",
    "OnnxTask",
    "check_export",
    "check_quantized_export",
    "compare_outputs",
    "default_task",
    "example_batch",
    "export_graph",
    "export_onnx",
    "graph_input_names",
    "int8_saturates",
    "onnx_runtime_layout",
    "onnx_session",
    "operator_counts",
    "quantize_int8",
    "run_session",
]
