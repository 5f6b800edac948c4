"""How a BertScratch forward runs its batch: the inputs checked where they enter, the batch's plan read on the host
in one sync (`plan_batch`), FlashAttention's or PyTorch's sequences of an unpadded batch (`BertScratchVarlen`), the
documents of a padding-free one, the attention mask each attention implementation takes, and long texts cut to the
length fine-tuning saw. A padded batch's real tokens and each device's rules for it are `padding_bertscratch.py`.

`modeling_bertscratch.py` holds the model and imports this file; `save_pretrained` ships both (transformers copies a
modeling file's relative imports), so it imports torch, public transformers API, the configuration and
`padding_bertscratch` only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers.masking_utils import create_bidirectional_mask, packed_sequence_mask_function
from transformers.utils import TransformersKwargs, is_tracing
from transformers.utils.generic import is_flash_attention_requested

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

from .configuration_bertscratch import BertScratchConfig

# What planning uses of the padding file, and (`X as X`) its device rules and decoding choice: importable from here
# too, where a forward's batch is planned.
from .padding_bertscratch import DECODING_PROBE_PADDING as DECODING_PROBE_PADDING
from .padding_bertscratch import DEVICE_RULES, BertScratchPadding, _read_on_host, true_first, unpadding_pays
from .padding_bertscratch import PADDED_DECODING_ENV as PADDED_DECODING_ENV
from .padding_bertscratch import decodes_padded_grid as decodes_padded_grid
from .padding_bertscratch import decoding_probe_batch as decoding_probe_batch
from .padding_bertscratch import device_rules as device_rules
from .padding_bertscratch import grid_max_padding as grid_max_padding

# The dtypes PyTorch's varlen kernel (FlashAttention's) computes in.
TORCH_VARLEN_DTYPES = (torch.float16, torch.bfloat16)
# "off" keeps every process it is set for off PyTorch's varlen kernel (padded or unpadded attention as without it):
# a switch for a GPU, driver or PyTorch build on which the kernel fails, without a change to the code.
TORCH_VARLEN_ENV = "BERTSCRATCH_TORCH_VARLEN"
TORCH_VARLEN_SWITCH = ("on", "off")


def torch_varlen_switched_on() -> bool:
    """What `BERTSCRATCH_TORCH_VARLEN` says (on unless set to off; anything else is refused by name)."""
    value = os.environ.get(TORCH_VARLEN_ENV, "on").strip().lower() or "on"
    if value not in TORCH_VARLEN_SWITCH:
        raise ValueError(f"{TORCH_VARLEN_ENV} must be one of {list(TORCH_VARLEN_SWITCH)}, got {value!r}.")
    return value == "on"


def torch_varlen_attention() -> Callable[..., torch.Tensor] | None:
    """PyTorch's variable-length attention, `torch.nn.attention.varlen.varlen_attn` (PyTorch >= 2.10), or None."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return cast("Callable[..., torch.Tensor]", varlen_attn)


def torch_varlen_applies(
    config: BertScratchConfig, device: torch.device, training: bool, dtype: torch.dtype | None
) -> bool:
    """Whether sdpa runs this batch's attention through PyTorch's varlen kernel (`torch_varlen_attention`): on a
    device of `DEVICE_RULES.torch_varlen_devices`, in half precision (autocast's dtype, else the model's `dtype`),
    with a head size the kernel takes (a multiple of 8, at most 256), and no attention dropout while training (the
    kernel has none); never where `BERTSCRATCH_TORCH_VARLEN=off`."""
    if config._attn_implementation != "sdpa" or device.type not in DEVICE_RULES.torch_varlen_devices:
        return False
    if not torch_varlen_switched_on():
        return False
    if training and config.attention_probs_dropout_prob > 0:
        return False
    head_size = config.hidden_size // config.num_attention_heads
    if head_size % 8 or head_size > 256:
        return False
    autocast = torch.is_autocast_enabled(device.type)
    compute_dtype = torch.get_autocast_dtype(device.type) if autocast else dtype
    return compute_dtype in TORCH_VARLEN_DTYPES and torch_varlen_attention() is not None


@dataclass
class BertScratchVarlen:
    """The sequences of an unpadded (N, H) batch, as FlashAttention's varlen kernels take them: the attention runs on
    the N real tokens as one row, each token attending within its own sequence (a row of the padded batch, or one
    document of a padding-free row), with no pad and unpad around each layer.

    Attributes:
        cu_seq_lens: (S + 1,) int32 offsets of the S sequences in the N tokens: 0, len_1, len_1 + len_2, ..., N.
        max_length: the longest sequence, known on the host (read in the batch's one sync).
        kernel: which kernel runs it: "flash" (FlashAttention through transformers' `flash_attention_forward`) or
            "torch" (PyTorch's own varlen attention under sdpa, `torch_varlen_attention`).
    """

    cu_seq_lens: torch.Tensor
    max_length: int
    kernel: str = "flash"

    @staticmethod
    def length_scalars(
        keep: torch.Tensor, documents: torch.Tensor | None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(B, T) bool mask of the real tokens and (B or 1, T) document ids (or None) -> the (B * T,) real-token
        count of every (row, document), in the order the unpadded tokens come in, and the two values of it the
        host needs, as 0-dim device tensors: the number of sequences and the longest. Fixed shapes: no sync."""
        batch_size, seq_len = keep.shape
        if documents is None:
            slots = torch.zeros_like(keep, dtype=torch.long)
        else:  # renumbered from 0 in each row, so that any ids that change at a new document will do
            documents = documents.expand(batch_size, -1)
            changes = documents[:, 1:] != documents[:, :-1]
            slots = F.pad(changes.long().cumsum(dim=1), (1, 0))  # (B, T), < T
        counts = torch.zeros_like(slots).scatter_add_(1, slots, keep.long()).reshape(-1)  # (B * T,)
        return counts, {"sequences": (counts > 0).sum(), "longest_sequence": counts.max()}

    @classmethod
    def from_counts(
        cls, counts: torch.Tensor, sequences: int, max_length: int, kernel: str = "flash"
    ) -> BertScratchVarlen:
        """Build from `length_scalars`' counts and its two values read on the host."""
        lengths = counts.index_select(0, true_first(counts > 0, sequences)[:sequences])
        cu_seq_lens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        return cls(cu_seq_lens=cu_seq_lens, max_length=max_length, kernel=kernel)

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """PyTorch's varlen attention over the sequences: (N, nh, hs) query, key and value -> (N, nh, hs), scaled
        by the kernel's default 1/sqrt(hs), BERT's. The arguments are the seven every release since PyTorch 2.10
        takes (2.10 and 2.11 have no `scale`)."""
        varlen_attn = torch_varlen_attention()
        assert varlen_attn is not None, "plan_batch chooses the torch kernel only where it exists"
        lengths, longest = self.cu_seq_lens, self.max_length
        return varlen_attn(query, key, value, lengths, lengths, longest, longest)

    def kwargs(self) -> dict[str, torch.Tensor | int]:
        """The keywords transformers' `flash_attention_forward` takes for a varlen call."""
        return {
            "cu_seq_lens_q": self.cu_seq_lens,
            "cu_seq_lens_k": self.cu_seq_lens,
            "max_length_q": self.max_length,
            "max_length_k": self.max_length,
        }


@dataclass
class BertScratchBatchPlan:
    """How a forward runs its batch, decided from the batch's values read on the host in one sync
    (`BertScratchModel.plan_batch`): a head that needs the answers too plans once and passes the plan down.

    Attributes:
        batch_size, seq_len: B and T of the inputs.
        padding: the real tokens to run unpadded, or None to run the padded (B, T) batch.
        attention_mask: the (B, T) key mask the attention applies (trimmed to T' when unpadded), or None where it
            masks nothing (all ones) or none was given; a prepared 4D mask (B, 1, T or 1, T) as given (the batch
            then runs padded).
        documents: (B or 1, T) document ids of a padding-free batch (trimmed to T' when unpadded), or None for one
            document per row.
        num_labelled: the number of labels that are not -100, when asked for (sparse MLM decoding) and readable.
        varlen: under FlashAttention, the sequences of the unpadded batch (`padding` is then set, even where nothing
            is padded, for a padding-free batch), or None.
    """

    batch_size: int
    seq_len: int
    padding: BertScratchPadding | None
    attention_mask: torch.Tensor | None
    documents: torch.Tensor | None
    num_labelled: int | None = None
    varlen: BertScratchVarlen | None = None

    def labelled_positions(self, labels: torch.Tensor) -> torch.Tensor:
        """(B, T) labels -> (num_labelled,) flat positions of those that are not -100, in row-major order (as
        `labels[labels != -100]`): from the count the plan read in its one host sync, with no sync of their own, else
        (not read: compiling, tracing) by `nonzero`, whose output size depends on the values."""
        labelled = labels.reshape(-1) != -100
        if self.num_labelled is None:
            return labelled.nonzero().squeeze(-1)
        return true_first(labelled, self.num_labelled)[: self.num_labelled]


def _check_inputs(
    config: BertScratchConfig,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
) -> tuple[int, int]:
    """Validate the inputs' shapes where they enter and return (B, T); each error names the bad value and the limit.
    (Their values are checked by `_input_ranges`, read with the forward's other values in `plan_batch`.)"""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
    if input_ids is not None and input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, seq_len); got shape {tuple(input_ids.shape)}.")
    if inputs_embeds is not None and (inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.hidden_size):
        raise ValueError(
            f"inputs_embeds must have shape (batch, seq_len, hidden_size={config.hidden_size}); got shape "
            f"{tuple(inputs_embeds.shape)}."
        )
    given = input_ids if input_ids is not None else inputs_embeds
    assert given is not None  # exactly one of them, checked above
    shape = given.shape[0], given.shape[1]
    if 0 in shape:
        raise ValueError(f"The batch holds no tokens: inputs of shape {tuple(given.shape)}.")
    if shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"Sequence length {shape[1]} exceeds max_position_embeddings={config.max_position_embeddings}; "
            "truncate the inputs (e.g. tokenizer(..., truncation=True, max_length=...))."
        )
    if attention_mask is not None and attention_mask.dim() == 4:
        prepared = (shape[0], 1, shape[1], shape[1]), (shape[0], 1, 1, shape[1])
        if tuple(attention_mask.shape) not in prepared:
            raise ValueError(
                f"A 4D attention_mask must have shape (batch, 1, seq_len, seq_len) {prepared[0]} or (batch, 1, 1, "
                f"seq_len) {prepared[1]}; got {tuple(attention_mask.shape)}."
            )
        if not (attention_mask.dtype == torch.bool or attention_mask.is_floating_point()):
            raise ValueError(
                "A 4D attention_mask must be bool (True to attend) or float (additive: 0 to attend, a large negative "
                f"to ignore); got dtype {attention_mask.dtype}."
            )
    elif attention_mask is not None and tuple(attention_mask.shape) != shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {shape}; got {tuple(attention_mask.shape)}.")
    return shape


def key_mask(attention_mask: torch.Tensor | None, reader: str) -> torch.Tensor | None:
    """`attention_mask` for `reader`, which reads from it which tokens are real: a (B, T) key mask, or None. A
    prepared 4D mask does not say which tokens are real (its rows are what each query attends to): refused, naming
    the reader."""
    if attention_mask is not None and attention_mask.dim() == 4:
        raise ValueError(
            f"{reader} reads which tokens are real from a (batch, seq_len) attention_mask; a prepared 4D mask of shape "
            f"{tuple(attention_mask.shape)} does not say: pass the (batch, seq_len) mask."
        )
    return attention_mask


def position_rows(position_ids: torch.Tensor | None) -> torch.Tensor | None:
    """(T,) position ids, which transformers' BERT broadcasts over the batch, as (1, T); any other shape as given."""
    return position_ids[None] if position_ids is not None and position_ids.dim() == 1 else position_ids


def _check_aligned(
    shape: tuple[int, int],
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    labels: torch.Tensor | None,
) -> None:
    """The per-token inputs beside the ids line up with them: token_type_ids and position_ids (B, T) or, shared by
    every row, (1, T); a masked LM's labels (B, T). A mismatch would otherwise broadcast, or (sparse decoding reads
    the labelled positions of the flattened labels) pair labels with the wrong tokens without an error."""
    for name, tensor in (("token_type_ids", token_type_ids), ("position_ids", position_ids)):
        if tensor is not None and (
            tensor.dim() != 2 or tensor.shape[1] != shape[1] or tensor.shape[0] not in (1, shape[0])
        ):
            raise ValueError(
                f"{name} must have the shape of input_ids {shape} (or (1, {shape[1]})); got {tuple(tensor.shape)}."
            )
    if labels is not None and tuple(labels.shape) != shape:
        raise ValueError(f"labels must have the shape of input_ids {shape}; got {tuple(labels.shape)}.")


# (name, ids, limit, the config field of the limit): an id tensor, or None, whose values must lie in [0, limit).
_RangeCheck = tuple[str, torch.Tensor | None, int, str]


def _input_ranges(
    config: BertScratchConfig,
    input_ids: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
) -> tuple[_RangeCheck, ...]:
    """The range checks of a forward's id inputs: an out-of-range id would index past an embedding table, which on
    a GPU is a device-side assert that names nothing and leaves the process unusable."""
    return (
        ("input_ids", input_ids, config.vocab_size, "vocab_size"),
        ("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size"),
        ("position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings"),
    )


def _range_scalars(checks: tuple[_RangeCheck, ...]) -> dict[str, torch.Tensor]:
    """The min and max of each id tensor given (and not empty), as 0-dim device tensors for `_read_on_host`."""
    scalars: dict[str, torch.Tensor] = {}
    for name, ids, _, _ in checks:
        if ids is not None and ids.numel() > 0:
            scalars[f"{name} min"], scalars[f"{name} max"] = torch.aminmax(ids)
    return scalars


def _raise_if_out_of_range(checks: tuple[_RangeCheck, ...], values: dict[str, int]) -> None:
    """Raise for the first id tensor whose min or max (read by `_read_on_host`) lies outside [0, limit)."""
    for name, _, limit, limit_name in checks:
        low, high = values.get(f"{name} min", 0), values.get(f"{name} max", 0)
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            raise ValueError(f"{name} contains {bad}, outside [0, {limit - 1}] ({limit_name}={limit}).")


def check_ranges(*checks: _RangeCheck) -> None:
    """Every id tensor within [0, limit); one host sync for all of them (their min and max, read together)."""
    _raise_if_out_of_range(checks, _read_on_host(_range_scalars(checks)))


def check_inputs(
    config: BertScratchConfig,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> None:
    """The checks of a forward's shapes and id ranges, for a graph that runs the model without them (an ONNX export
    would fail on an id past an embedding table with an error that names no input)."""
    _check_inputs(config, input_ids, attention_mask, None)
    check_ranges(*_input_ranges(config, input_ids, token_type_ids, None))


def check_masked_positions(masked_positions: torch.Tensor, batch_size: int, seq_len: int) -> None:
    """(B, K) positions to decode of a (B, T) batch: the shape checked, and (unless compiling) every position within
    [0, T), in one host sync."""
    if masked_positions.dim() != 2 or masked_positions.shape[0] != batch_size:
        raise ValueError(
            f"masked_positions must have shape (batch, masks) with batch {batch_size}; "
            f"got shape {tuple(masked_positions.shape)}."
        )
    if not torch.compiler.is_compiling():
        check_ranges(("masked_positions", masked_positions, seq_len, "seq_len"))


def selected_positions(selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) bool -> the (B, K) positions of each row's selected tokens in text order, K the most any row has (at
    least 1; a row with fewer repeats its first position after them), and the (B, 1) counts: the `masked_positions`
    that a masked LM decodes at (fill-mask's [MASK] tokens, evaluation's scored labels). One host read (K)."""
    counts = selected.sum(dim=1, keepdim=True)  # (B, 1)
    order = torch.sort((~selected).to(torch.uint8), dim=1, stable=True).indices  # (B, T): selected positions first
    positions = order[:, : max(int(counts.max()), 1)]  # (B, K)
    rank = torch.arange(positions.shape[1], device=selected.device)[None]  # (1, K)
    return torch.where(rank < counts, positions, positions[:, :1]), counts


# Keyword arguments a forward accepts beyond its named ones: transformers' (`TransformersKwargs`: output flags,
# `num_items_in_batch`, attention-interface options) and `return_dict`. Anything else is a typo or an argument of
# another model, and is refused by name instead of being dropped (transformers' BERT accepts `atention_mask=`).
# `use_cache` is accepted and has no effect: transformers' BERT takes it (for its decoder use), generic training code
# passes `use_cache=False` to any model, and an encoder keeps no cache.
_KNOWN_KWARGS = frozenset(TransformersKwargs.__annotations__) | {"return_dict", "use_cache"}


def check_kwargs(model: nn.Module, kwargs: dict[str, object]) -> None:
    unknown = sorted(set(kwargs) - _KNOWN_KWARGS)
    if unknown:
        raise TypeError(
            f"BertScratch got unexpected keyword argument(s) {unknown} (checked by {type(model).__name__}.forward, "
            "which every head calls); it takes input_ids, "
            "attention_mask, token_type_ids, position_ids, inputs_embeds, its head's labels and transformers' "
            f"keyword arguments ({', '.join(sorted(_KNOWN_KWARGS))})."
        )


def requested(kwargs: dict[str, object], name: str, config: BertScratchConfig) -> bool:
    """An output flag as `capture_outputs` reads it: the keyword if given (and not None), else the config's."""
    value = kwargs.get(name)
    return bool(getattr(config, name, False) if value is None else value)


def plan_batch(
    config: BertScratchConfig,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
    labels: torch.Tensor | None = None,
    *,
    training: bool = False,
    dtype: torch.dtype | None = None,
    **kwargs: object,
) -> BertScratchBatchPlan:
    """Check the inputs and decide how the batch runs, reading all that needs of their values in ONE host sync
    (on a GPU each read waits for the work queued before it): the ids' min and max (`_input_ranges`), the number
    of real tokens and the last real column (whether to unpad, whether the mask masks anything), whether each
    row is one document, and the number of `labels` that are not -100 (given only to be counted, for sparse MLM
    decoding). `kwargs` are the forward's: its output flags and padding-free keywords count. `training` and `dtype`
    (the model's mode and parameter dtype) decide with the device whether PyTorch's varlen kernel applies.

    Where values cannot be read (`_values_readable`: compiling, tracing, meta tensors) nothing is: the ranges go
    unchecked, the batch runs padded and every mask is applied as given, which is correct, only slower.
    """
    batch_size, seq_len = _check_inputs(config, input_ids, attention_mask, inputs_embeds)
    position_ids = position_rows(position_ids)
    _check_aligned((batch_size, seq_len), token_type_ids, position_ids, labels)
    checks = _input_ranges(config, input_ids, token_type_ids, position_ids)
    if attention_mask is not None and attention_mask.dim() == 4:
        return _plan_prepared_mask(batch_size, seq_len, attention_mask, checks, labels)
    documents = document_ids(position_ids, kwargs, seq_len, attention_mask)  # (B or 1, T) or None: padding-free rows
    plan = BertScratchBatchPlan(batch_size, seq_len, None, attention_mask, documents)
    given = (input_ids, attention_mask, token_type_ids, position_ids, documents, labels)
    if not all(_values_readable(tensor) for tensor in given if tensor is not None):
        return plan
    keep = None if attention_mask is None else attention_mask.to(torch.bool)
    may_unpad = _may_unpad(config, kwargs)
    # FlashAttention, and sdpa where PyTorch's varlen kernel applies, run padded and padding-free batches as one row
    # of sequences (varlen) over the real tokens
    device = (input_ids if input_ids is not None else inputs_embeds).device  # type: ignore[union-attr]
    kernel = "flash" if is_flash_attention_requested(config) else None
    if kernel is None and torch_varlen_applies(config, device, training, dtype):
        kernel = "torch"
    varlen = may_unpad and kernel is not None and (keep, documents) != (None, None)
    if varlen and keep is None:
        assert documents is not None, "varlen runs on a mask or on documents"
        keep = torch.ones(batch_size, seq_len, dtype=torch.bool, device=documents.device)
    unpad = keep is not None and may_unpad and (varlen or unpadding_pays(config, keep.device))
    scalars = _plan_scalars(checks, keep, unpad, documents, labels)
    if varlen:
        assert keep is not None  # the mask, or made above
        counts, lengths = BertScratchVarlen.length_scalars(keep, documents)
        scalars.update(lengths)
    values = _read_on_host(scalars)  # the forward's one host sync
    _raise_if_out_of_range(checks, values)
    plan.num_labelled = values.get("labelled")
    padded = unpad and values["real_tokens"] < batch_size * max(values["last_column"], 1)  # pad within T'
    packed = documents is not None and not values.get("one_document_per_row")
    if padded or (varlen and packed):  # unpad
        assert keep is not None  # both need a mask (unpad, varlen): given, or made above
        padding = BertScratchPadding.from_mask(keep, (values["real_tokens"], values["last_column"]))
        plan.padding = padding
        plan.attention_mask = None if attention_mask is None else attention_mask[:, : padding.seq_len]
        plan.documents = None if documents is None else documents[:, : padding.seq_len]
        if varlen:
            assert kernel is not None  # varlen needs a kernel
            plan.varlen = BertScratchVarlen.from_counts(counts, values["sequences"], values["longest_sequence"], kernel)
        return plan
    # Run padded. A mask that masks nothing is dropped: with no mask at all SDPA may run its flash kernel, which an
    # `attn_mask` rules out; transformers' `create_bidirectional_mask` drops an all-ones mask for the same reason,
    # so outputs are those of transformers' BERT either way.
    if keep is not None and values["real_tokens"] == keep.numel():
        plan.attention_mask = None
    if values.get("one_document_per_row"):
        plan.documents = None
    return plan


def _plan_prepared_mask(
    batch_size: int,
    seq_len: int,
    attention_mask: torch.Tensor,
    checks: tuple[_RangeCheck, ...],
    labels: torch.Tensor | None,
) -> BertScratchBatchPlan:
    """The plan of a batch with a prepared 4D `attention_mask` (B, 1, T or 1, T), which transformers' BERT hands to
    the attention as given: the batch runs padded with that mask (its rows say what each query attends to, not which
    tokens are real, so there is nothing to unpad by), and neither restarting positions nor padding-free keywords
    add documents to it. The ids' ranges and the labels are read in the one host sync, as for any batch."""
    plan = BertScratchBatchPlan(batch_size, seq_len, None, attention_mask, None)
    given = (attention_mask, labels, *(ids for _, ids, _, _ in checks))
    if all(_values_readable(tensor) for tensor in given if tensor is not None):
        values = _read_on_host(_plan_scalars(checks, None, False, None, labels))
        _raise_if_out_of_range(checks, values)
        plan.num_labelled = values.get("labelled")
    return plan


def _may_unpad(config: BertScratchConfig, kwargs: dict[str, object]) -> bool:
    """Whether a padded batch may run unpadded: when the config asks for it and every requested output can still
    be given per position (attentions and hidden states of every layer are per padded position)."""
    return bool(config.unpad_inputs) and not (
        requested(kwargs, "output_attentions", config) or requested(kwargs, "output_hidden_states", config)
    )


def _plan_scalars(
    checks: tuple[_RangeCheck, ...],
    keep: torch.Tensor | None,
    unpad: bool,
    documents: torch.Tensor | None,
    labels: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """What `plan_batch` reads on the host, as 0-dim device tensors: the ids' min and max, the number of real tokens
    of the (B, T) bool mask `keep` (and its last real column when the batch may run unpadded), whether each row of
    `documents` is one document, and the number of `labels` that are not -100."""
    scalars = _range_scalars(checks)
    if keep is not None and unpad:  # `unpad` needs a mask
        scalars.update(BertScratchPadding.extent_scalars(keep))
    elif keep is not None:
        scalars["real_tokens"] = keep.sum()
    if documents is not None:
        scalars["one_document_per_row"] = (documents == documents[..., :1]).all()
    if labels is not None:
        scalars["labelled"] = (labels != -100).sum()
    return scalars


def document_ids(
    position_ids: torch.Tensor | None,
    kwargs: dict[str, object],
    seq_len: int,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """(B, T) document index of every token of a padding-free batch (several documents packed in a row, as
    transformers' `DataCollatorWithFlattening` makes), or None for ordinary rows.

    Read from `seq_idx`, else from `cu_seq_lens_q` (one row), else, where no (B, T) `attention_mask` is given, from
    `position_ids`: a new document starts wherever a position does not follow the one before it. Ordinary position
    ids (increasing) give one document per row. Beside a mask, position ids that restart are positions only, as in
    transformers' BERT: its mask utilities read packed documents from position ids only where the 2D mask is None,
    and its FlashAttention reads them only for a single row with no mask or an all-ones one (where the mask masks
    something it unpads by the mask alone). Without a mask its eager and sdpa attend across the documents; here each
    token attends within its own, under every implementation.
    """
    # The forward's TransformersKwargs, whose seq_idx and cu_seq_lens_q are tensors.
    if kwargs.get("seq_idx") is not None:
        return cast(torch.Tensor, kwargs["seq_idx"])
    starts = cast("torch.Tensor | None", kwargs.get("cu_seq_lens_q"))
    if starts is not None:
        positions = torch.arange(seq_len, device=starts.device)
        return torch.bucketize(positions, starts[1:-1].to(positions.dtype), right=True)[None]  # (1, T)
    if attention_mask is not None or position_ids is None or position_ids.shape[-1] < 2:
        return None
    restarts = position_ids[..., 1:] <= position_ids[..., :-1]  # (B, T-1)
    first = torch.zeros_like(restarts[..., :1])
    return torch.cat([first, restarts], dim=-1).cumsum(dim=-1)  # (B or 1, T)


def _additive_mask(
    attention_mask: torch.Tensor | None, dtype: torch.dtype, documents: torch.Tensor | None = None
) -> torch.Tensor | None:
    """(B, T) 0/1 key mask -> additive (B, 1, 1, T) mask: 0 to attend, finfo(dtype).min to ignore. With `documents`
    ((B, T) document ids of a padding-free batch) a (B, 1, T, T) mask: each token attends within its document only.

    A finite minimum (never -inf) keeps a fully padded row finite: its softmax is uniform instead of NaN.
    """
    if attention_mask is None and documents is None:
        return None
    keep = None if attention_mask is None else attention_mask[:, None, None, :].to(torch.bool)  # (B, 1, 1, T)
    if documents is not None:
        same = (documents[:, :, None] == documents[:, None, :])[:, None]  # (B, 1, T, T)
        keep = same if keep is None else keep & same
    assert keep is not None  # from the mask or the documents, one of which is given
    return _additive(keep, dtype)


def _additive(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool mask (True to attend) -> the additive mask of the same shape: 0 to attend, finfo(dtype).min to ignore."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)


def _prepared_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A prepared 4D mask (B, 1, T or 1, T), applied as given under every attention implementation: a bool mask
    (True to attend) as its additive form (`_additive`), a float mask as it is (already additive: 0 to attend, a
    large negative to ignore).

    transformers' BERT hands a 4D mask to the attention function unchanged, and its implementations disagree on a
    bool one: sdpa reads True as attend, eager adds the bools to the scores (+1 where True, no key ignored). This
    follows sdpa's reading, under eager too, so that eager and sdpa give the same outputs.
    """
    return _additive(attention_mask, dtype) if attention_mask.dtype == torch.bool else attention_mask


def _values_readable(tensor: torch.Tensor) -> bool:
    """Whether `tensor`'s values may be read on the host here. Not while torch.compile, torch.export, jit or fx trace
    the forward (a branch on a value would break the graph or bake this batch's answer into it), not during CUDA graph
    capture (a sync is illegal there), not for fake tensors (transformers' `is_tracing` covers these), not on the
    meta device (no values)."""
    return not (torch.compiler.is_compiling() or is_tracing(tensor) or tensor.device.type == "meta")


def attention_implementation(config: BertScratchConfig, output_attentions: bool) -> str:
    """The attention implementation a forward runs: the config's, or eager when the attention probabilities are asked
    for (eager alone computes them)."""
    return "eager" if output_attentions else config._attn_implementation


def attention_mask_for(
    config: BertScratchConfig,
    attention_mask: torch.Tensor | None,
    documents: torch.Tensor | None,
    grid: tuple[int, int],
    hidden_states: torch.Tensor,
    output_attentions: bool = False,
) -> torch.Tensor | BlockMask | None:
    """The mask the forward's attention implementation takes over the (B, T) `grid` the attention runs on.

    Args:
        attention_mask: (B, T) 0/1 key mask, or None when no key is masked, or a prepared 4D mask (B, 1, T or 1, T),
            which every implementation takes as additive (`_prepared_mask`; FlashAttention then runs as SDPA, flex
            attention adds it as a position bias, `BertScratchAttention`).
        documents: (B or 1, T) document ids of a padding-free batch, or None.
        hidden_states: the encoder's input, for the additive mask's dtype and the device.

    Returns:
        None when neither masks anything; for flex attention, the `BlockMask` transformers'
        `create_bidirectional_mask` builds (blocks with no attended key are skipped); for FlashAttention on a padded
        batch of one document per row, the (B, T) key mask (transformers' flash function unpads it); otherwise the
        additive (B, 1, 1 or T, T) mask of `_additive_mask` (FlashAttention then runs as SDPA: a padding-free batch
        runs varlen, `BertScratchVarlen`, except where per-layer outputs keep it padded).
    """
    if attention_mask is None and documents is None:
        return None
    implementation = attention_implementation(config, output_attentions)
    if attention_mask is not None and attention_mask.dim() == 4:  # prepared: the attention runs it as given
        return _prepared_mask(attention_mask, hidden_states.dtype)
    if is_flash_attention_requested(requested_attention_implementation=implementation) and documents is None:
        return attention_mask
    if implementation != "flex_attention":
        return _additive_mask(attention_mask, hidden_states.dtype, documents)
    batch_size, seq_len = grid
    shape_of_grid = torch.empty(batch_size, seq_len, 0, device=hidden_states.device)  # read for B, T and device
    same_document = None if documents is None else packed_sequence_mask_function(documents.expand(batch_size, -1))
    return create_bidirectional_mask(config, shape_of_grid, attention_mask, and_mask_function=same_document)


def long_text_positions(
    attention_mask: torch.Tensor | None, batch: int, length: int, max_length: int, head_tokens: int
) -> torch.Tensor:
    """(B, max_length) positions to keep of (B, length) rows longer than `max_length`: [CLS] and the first
    `head_tokens` text tokens, then the last tokens up to the row's final [SEP] (its last real token). A row that fits
    keeps its real tokens and the padding beside them: its first `max_length` positions, or its last where the batch
    is padded on the left. With `head_tokens` = max_length - 2 that is the head of the text, with 0 its tail: the
    cut `tasks.shapes.truncate_ids` makes of the token ids."""
    device = attention_mask.device if attention_mask is not None else None
    kept = torch.arange(max_length, device=device).expand(batch, max_length)  # (B, L)
    if attention_mask is None:
        real = torch.full((batch, 1), length, device=device)
        start = torch.zeros((batch, 1), dtype=torch.long, device=device)
    else:
        real = attention_mask.sum(dim=1, keepdim=True)  # (B, 1): real tokens, [CLS] and [SEP] included
        start = attention_mask.to(torch.int8).argmax(dim=1, keepdim=True)  # (B, 1): [CLS] (0 unless padded left)
    tail = real - max_length + kept  # the row's last max_length - 1 - head_tokens positions end at real - 1
    fits = torch.clamp(start, max=length - max_length) + kept  # (B, L): right padding from 0, left up to the end
    return torch.where(real <= max_length, fits, start + torch.where(kept <= head_tokens, kept, tail))


def cut_long_texts(config: BertScratchConfig, inputs: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
    """`inputs` (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds; (B, T) or (B, T, H)) cut to
    `config.long_text_max_length` tokens by `config.long_text_truncation` when T is longer; unchanged otherwise, and
    while compiled or exported (ONNX Runtime's model cuts on the host, `onnx.runtime`)."""
    max_length = config.long_text_max_length
    reference = inputs["input_ids"] if inputs["input_ids"] is not None else inputs["inputs_embeds"]
    if max_length is None or reference is None or torch.compiler.is_compiling():  # an exported graph reads as given
        return inputs
    if reference.dim() != (2 if inputs["input_ids"] is not None else 3):  # the encoder's check names the shape
        return inputs
    if reference.shape[1] <= max_length:
        return inputs
    key_mask(inputs["attention_mask"], f"Cutting a text to long_text_max_length={max_length}")
    head = {"head": max_length - 2, "tail": 0, "head+tail": config.long_text_head_tokens}[config.long_text_truncation]
    batch, length = reference.shape[:2]
    kept = long_text_positions(inputs["attention_mask"], batch, length, max_length, head)  # (B, L)
    cut: dict[str, torch.Tensor | None] = {}
    for name, value in inputs.items():
        if value is None or name == "position_ids":
            cut[name] = None  # positions restart at 0 in the kept tokens
        elif value.dim() == 3:
            cut[name] = value.gather(1, kept.unsqueeze(-1).expand(-1, -1, value.shape[-1]))
        else:
            cut[name] = value.expand(batch, -1).gather(1, kept)
    return cut
