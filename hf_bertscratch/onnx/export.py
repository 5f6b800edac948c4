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
import shutil
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import cast

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, PreTrainedModel

from .. import configuration_bertscratch
from ..cpu_matmul import BertScratchLinear
from ..modeling_bertscratch import BertScratchAttention, BertScratchEncoder, BertScratchLayer, BertScratchModel
from ..run_folder import staged_folder
from ..task_heads import check_task_head
from .common import (
    ATOL,
    INPUT_NAMES,
    MASKED_POSITIONS,
    ONNX_FILE,
    ONNX_TASKS,
    QUANTIZATIONS,
    check_task,
    default_task,
    example_batch,
    require,
)
from .quantize import check_quantized_export, quantize_int8
from .runtime import compare_outputs

logger = logging.getLogger(__name__)


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
    assert program is not None, "the dynamo exporter returns its program"
    program.save(str(path), external_data=False)
    if opset is not None:
        check_opset(path, opset)
    return names


def check_opset(path: Path, opset: int) -> None:
    """Raise unless the ONNX file `path` has the standard opset `opset`: asked for one it cannot write, torch.onnx
    warns and writes another (one it cannot convert down to: 18; one past its translator's newest: a graph labelled
    18 that ONNX Runtime refuses to load)."""
    onnx = require("onnx")
    imports = onnx.load(str(path), load_external_data=False).opset_import
    written = next((each.version for each in imports if each.domain in ("", "ai.onnx")), None)
    if written != opset:
        raise ValueError(
            f"opset={opset} cannot be exported: torch.onnx {torch.__version__} wrote opset {written} instead. "
            "Pass an opset torch.onnx writes, or none for its default."
        )


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
        for layer in cast("Iterable[BertScratchLayer]", self.encoder.layers):  # the ModuleList's layers
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
_ROWWISE: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: _RowwiseLinear,
    BertScratchLinear: _RowwiseLinear,  # the MLM head's, an nn.Linear with a CPU inference path of its own
    nn.LayerNorm: _RowwiseLayerNorm,
}


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
            setattr(owner, "encoder", BertScratchOnnxEncoder(encoder))  # a stand-in of another class, for the trace
        for parent, name, child in swaps:
            setattr(parent, name, _ROWWISE[type(child)](child))
        yield
    finally:
        for owner, encoder in encoders:
            owner.encoder = encoder
        for parent, name, child in swaps:
            setattr(parent, name, child)


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
        task: one of `ONNX_TASKS`; None: the task of the checkpoint's head (`default_task`). A task whose head the
            checkpoint lacks (text-classification of a masked LM) is refused, as the inference commands refuse it.
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
    from ..convert import copy_sentence_transformers_files, family_checkpoint
    from ..tokenization import check_tokenizer_fits, load_model_tokenizer

    given, model = str(model), family_checkpoint(model)  # transformers' BERT converted on load
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise NotADirectoryError(f"Output {str(output_dir)!r} is a file: expected a folder to write (or a new path).")
    if output_dir.exists() and any(output_dir.iterdir()) and not overwrite:
        raise FileExistsError(
            f"Output {str(output_dir)!r} already exists and is not empty; pass --overwrite to replace it."
        )
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize={quantize!r} is not supported: expected one of {QUANTIZATIONS} or none.")
    if reduce_range is not None and quantize is None:
        raise ValueError(
            f"reduce_range={reduce_range} sets the bits of int8 weights, and this export is fp32: pass --quantize "
            "dynamic with it, or leave it out."
        )
    config = AutoConfig.from_pretrained(model)
    task = task or default_task(config.architectures)
    spec = check_task(task)
    check_task_head(model, task, shown=given)  # a head the checkpoint lacks would be exported with random weights
    torch_model = getattr(importlib.import_module("transformers"), spec.auto_class).from_pretrained(
        model, dtype=torch.float32
    )
    loaded_tokenizer = load_model_tokenizer(given, tokenizer)  # as the user gave it
    check_tokenizer_fits(loaded_tokenizer, config.vocab_size)
    with staged_folder(output_dir) as staging:
        names = export_graph(torch_model, task, staging / ONNX_FILE, opset, masked_positions, optimize)
        torch_model.config.save_pretrained(staging)
        shutil.copy(configuration_bertscratch.__file__, staging / Path(configuration_bertscratch.__file__).name)
        loaded_tokenizer.save_pretrained(staging)
        copy_sentence_transformers_files(model, staging)  # an embedding model's pooling and length
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


__all__ = [
    "BertScratchOnnxEncoder",
    "check_export",
    "check_opset",
    "export_graph",
    "export_onnx",
    "onnx_runtime_layout",
    "operator_counts",
    "output_names",
]
