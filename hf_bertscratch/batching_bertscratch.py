"""How a BertScratch forward runs its batch: the inputs checked where they enter, the batch's plan read on the host
in one sync (`plan_batch`), the real tokens of a padded batch (`BertScratchPadding`) or FlashAttention's sequences of
an unpadded one (`BertScratchVarlen`), and the attention mask each attention implementation takes.

`modeling_bertscratch.py` holds the model and imports this file; `save_pretrained` ships both (transformers copies a
modeling file's relative imports), so it imports torch, public transformers API, the configuration and `cpu_matmul`
(whose cache holds the CPU's measured decoding of a padded batch, `decodes_padded_grid`) only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers.masking_utils import create_bidirectional_mask, packed_sequence_mask_function
from transformers.utils import TransformersKwargs, is_tracing
from transformers.utils.generic import is_flash_attention_requested

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

from . import cpu_matmul
from .configuration_bertscratch import BertScratchConfig


def _read_on_host(scalars: dict[str, torch.Tensor]) -> dict[str, int]:
    """Read named 0-dim integer or bool tensors on the host in one sync (one `tolist`), as Python ints.

    On a GPU every read of a tensor value waits for all the work queued before it: a forward gathers what it must
    know about its batch (`BertScratchModel.plan_batch`) and reads it here once, instead of one wait per question.
    """
    if not scalars:
        return {}
    device = next(iter(scalars.values())).device
    values = torch.stack([scalar.to(device=device, dtype=torch.long) for scalar in scalars.values()]).tolist()
    return dict(zip(scalars, values))


@dataclass
class BertScratchDeviceRules:
    """How a forward runs a padded batch on each kind of device: public settings that a benchmark or a test changes
    for a block (`device_rules`) instead of patching the code that reads them.

    Attributes:
        unpad_min_hidden: device type -> the hidden size from which a padded batch runs unpadded when its attention
            cannot run varlen (the gathers and scatters around each layer's attention then cost more than the pad
            rows of the dense layers below it); a device type not named unpads at every size. On an H200 with 30%
            padding the padded run was 1.14-1.26x as fast at mini (H 256) and 1.04-1.22x at small and medium (H 512);
            at base (H 768) the unpadded one 0.86-1.08x the padded one's speed, in less training memory
            (`bash scripts/gpu_check.sh`: results/gpu/h200-*.json).
        torch_varlen_devices: device types on which sdpa runs a padded or padding-free batch's attention over its
            real tokens through PyTorch's varlen kernel (`torch.nn.attention.varlen`, PyTorch >= 2.10), where it
            applies (`torch_varlen_applies`): then no layer pads or unpads, and the batch unpads at every size.
        padded_decoding: device type -> how a padded batch's MLM logits are decoded: "grid" (the whole (B, T) grid,
            pad rows zeroed after), "rows" (the N real rows, copied into the grid) or "auto" (on a CPU, measured on
            the CPU it runs on: `decodes_padded_grid`). A device type not named decodes "auto" on a CPU and "grid"
            elsewhere: on a GPU the GEMM is cheap beside writing its (., V) output, and the copy writes the real
            rows' logits twice and holds both (mini, 30% padding, H200: the grid 1.06-1.12x the rows' speed, at
            1.1 GiB against 1.7, `results/gpu/h200-1.json`).
    """

    unpad_min_hidden: dict[str, int] = field(default_factory=lambda: {"cuda": 768})
    torch_varlen_devices: tuple[str, ...] = ("cuda",)
    padded_decoding: dict[str, str] = field(default_factory=dict)


DEVICE_RULES = BertScratchDeviceRules()


@contextmanager
def device_rules(**settings: Any) -> Iterator[BertScratchDeviceRules]:
    """`DEVICE_RULES` with `settings` (its attribute names) changed for the block, then restored:
    `with device_rules(unpad_min_hidden={}):` unpads a padded batch at every size on every device."""
    unknown = sorted(set(settings) - set(BertScratchDeviceRules.__dataclass_fields__))
    if unknown:
        raise TypeError(
            f"Unknown device rule(s) {unknown}; expected some of {sorted(BertScratchDeviceRules.__dataclass_fields__)}."
        )
    saved = {name: getattr(DEVICE_RULES, name) for name in settings}
    for name, value in settings.items():
        setattr(DEVICE_RULES, name, value)
    try:
        yield DEVICE_RULES
    finally:
        for name, value in saved.items():
            setattr(DEVICE_RULES, name, value)


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


def true_first(flags: torch.Tensor, count: int) -> torch.Tensor:
    """(M,) bool flags with `count` True (known on the host) -> (M,) positions: those of the True flags, then those
    of the False ones, each ascending. What `nonzero` gives for both lists, without its host sync (its output size
    depends on the values); a counting partition, linear where a stable sort would not be."""
    positions = torch.arange(flags.numel(), device=flags.device)
    true_so_far = flags.cumsum(0)  # (M,) True flags up to and including each position
    target = torch.where(flags, true_so_far - 1, positions - true_so_far + count)  # a permutation of 0..M-1
    return torch.empty_like(positions).scatter_(0, target, positions)


@dataclass
class BertScratchPadding:
    """Where the real tokens of a padded (B, T) batch are, for running dense layers on (N, H) instead of (B, T, H).

    Attributes:
        indices: (N,) flat positions of the real tokens in the (B * T') grid.
        batch_size: B.
        seq_len: T', the batch trimmed to its longest real row (trailing all-pad columns cost nothing).
        pad_indices: (B * T' - N,) flat positions of the pad tokens in the (B * T') grid.
    """

    indices: torch.Tensor
    batch_size: int
    seq_len: int
    pad_indices: torch.Tensor

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor, extent: tuple[int, int] | None = None) -> BertScratchPadding:
        """Build from a (B, T) 0/1 mask whose rows may be padded anywhere (left, right or in between).

        `extent` is (number of real tokens, last column holding one), the values of `extent_scalars` already read
        on the host (`BertScratchModel.plan_batch` reads them with the forward's other values); without it they
        are read here, one host sync. The positions come from `true_first`, so neither list needs a sync of its own.
        """
        keep = attention_mask.to(torch.bool)
        if extent is None:
            scalars = _read_on_host(cls.extent_scalars(keep))
            extent = scalars["real_tokens"], scalars["last_column"]
        num_real, last_column = extent
        seq_len = max(last_column, 1)
        order = true_first(keep[:, :seq_len].reshape(-1), num_real)  # real, then pad; each ascending
        return cls(indices=order[:num_real], batch_size=keep.shape[0], seq_len=seq_len, pad_indices=order[num_real:])

    @staticmethod
    def extent_scalars(keep: torch.Tensor) -> dict[str, torch.Tensor]:
        """The two values of a (B, T) bool mask the description needs on the host, as 0-dim device tensors: the
        number of real tokens and the last column (1-based, 0 for none) that holds one."""
        columns = torch.arange(1, keep.shape[1] + 1, device=keep.device)
        return {"real_tokens": keep.sum(), "last_column": (keep.any(dim=0) * columns).max()}

    @property
    def has_padding(self) -> bool:
        """Whether any position of the (B, T') grid is padding (known on the host: no sync)."""
        return self.pad_indices.numel() > 0

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (N, D); T may be longer than T' (the trimmed tail is dropped)."""
        return x[:, : self.seq_len].reshape(-1, x.shape[-1]).index_select(0, self.indices)

    def unpad_inputs(
        self,
        input_ids: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """(B, T) ids and (B, T, H) embeddings -> the N real tokens as one row: (1, N) ids, (1, N, H) embeddings.

        Embedding only the real tokens keeps the embedding layer and its (V, H) gradient off the padding. Position
        ids default to each token's column, as in the padded batch; (1, T) position ids broadcast over the batch.
        """
        if position_ids is None:
            given = input_ids if input_ids is not None else inputs_embeds
            assert given is not None, "plan_batch requires input_ids or inputs_embeds"
            position_ids = torch.arange(self.seq_len, device=given.device).unsqueeze(0)

        def one_row(x: torch.Tensor) -> torch.Tensor:
            x = x[:, : self.seq_len].expand(self.batch_size, -1, *x.shape[2:])
            return x.reshape(self.batch_size * self.seq_len, *x.shape[2:]).index_select(0, self.indices).unsqueeze(0)

        return (
            None if input_ids is None else one_row(input_ids),
            None if token_type_ids is None else one_row(token_type_ids),
            one_row(position_ids),
            None if inputs_embeds is None else one_row(inputs_embeds),
        )

    def pad(self, x: torch.Tensor, seq_len: int | None = None) -> torch.Tensor:
        """(N, D) -> (B, seq_len or T', D), zeros at pad positions; differentiable.

        Every row of the output is written once (real rows copied, pad rows zeroed) rather than zero-filling the
        whole grid first: for the (B, T, V) MLM logits that extra pass would cost as much as the decoder itself.
        """
        out_len, indices, pad_indices = self._grid(seq_len)
        grid = x.new_empty(self.batch_size * out_len, x.shape[-1])
        grid.index_copy_(0, indices, x).index_fill_(0, pad_indices, 0)
        return grid.view(self.batch_size, out_len, x.shape[-1])

    def zero_pad_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Contiguous (B, T, D) computed on the whole grid, T >= T' -> the same tensor, its pad positions zeroed in
        place as `pad` leaves them: only the pad rows are written. Differentiable where the op that made `x` does not
        keep its output for the backward pass (a Linear layer)."""
        _, _, pad_indices = self._grid(x.shape[1])
        x.view(-1, x.shape[-1]).index_fill_(0, pad_indices, 0)
        return x

    def _grid(self, seq_len: int | None) -> tuple[int, torch.Tensor, torch.Tensor]:
        """out_len = max(seq_len, T') and the flat positions of the real and of the pad tokens in (B * out_len)."""
        out_len = max(seq_len or self.seq_len, self.seq_len)
        if out_len == self.seq_len:
            return out_len, self.indices, self.pad_indices
        # Re-address into the longer grid: the trimmed tail columns are pad too. The number of real tokens is known on
        # the host, so the pad positions come from `true_first` without a sync (a `nonzero` would be one).
        indices = self.indices // self.seq_len * out_len + self.indices % self.seq_len
        is_real = torch.zeros(self.batch_size * out_len, dtype=torch.bool, device=indices.device)
        return out_len, indices, true_first(is_real.index_fill_(0, indices, True), indices.numel())[indices.numel() :]

    def runs(self, seq_len: int | None = None) -> tuple[list[tuple[int, int, int]], torch.Tensor]:
        """Runs of consecutive real tokens in the (B * out_len) grid, and that grid's pad positions.

        Returns:
            runs: (grid_start, real_start, length) per run: grid rows [grid_start, grid_start + length) hold real
                tokens [real_start, real_start + length) of the (N, D) unpadded tensor. A right-padded row is one
                run; full rows next to each other merge into one.
            pad_indices: flat positions of the pad rows in the (B * out_len) grid.
        """
        _, indices, pad_indices = self._grid(seq_len)
        if indices.numel() == 0:
            return [], pad_indices
        starts = torch.ones_like(indices, dtype=torch.bool)
        starts[1:] = indices[1:] != indices[:-1] + 1
        real_starts = starts.nonzero().squeeze(-1)  # a host sync: the number of runs
        lengths = torch.diff(real_starts, append=real_starts.new_tensor([indices.numel()]))
        grid_starts = indices.index_select(0, real_starts)
        runs = torch.stack([grid_starts, real_starts, lengths], dim=1).tolist()  # and one to read them
        return [tuple(run) for run in runs], pad_indices


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
            masks nothing (all ones) or none was given.
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
    given = input_ids if input_ids is not None else inputs_embeds
    assert given is not None  # exactly one of them, checked above
    shape = given.shape[0], given.shape[1]
    if shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"Sequence length {shape[1]} exceeds max_position_embeddings={config.max_position_embeddings}; "
            "truncate the inputs (e.g. tokenizer(..., truncation=True, max_length=...))."
        )
    if attention_mask is not None and tuple(attention_mask.shape) != shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {shape}; got {tuple(attention_mask.shape)}.")
    return shape


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


# Keyword arguments a forward accepts beyond its named ones: transformers' (`TransformersKwargs`: output flags,
# `num_items_in_batch`, attention-interface options) and `return_dict`. Anything else is a typo or an argument of
# another model, and is refused by name instead of being dropped (transformers' BERT accepts `atention_mask=`).
_KNOWN_KWARGS = frozenset(TransformersKwargs.__annotations__) | {"return_dict"}


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
    documents = document_ids(position_ids, kwargs, seq_len)  # (B or 1, T) or None: padding-free rows
    plan = BertScratchBatchPlan(batch_size, seq_len, None, attention_mask, documents)
    given = (input_ids, attention_mask, token_type_ids, position_ids, documents, labels)
    if not all(_values_readable(tensor) for tensor in given if tensor is not None):
        return plan
    checks = _input_ranges(config, input_ids, token_type_ids, position_ids)
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


def unpadding_pays(config: BertScratchConfig, device: torch.device) -> bool:
    """Whether a padded batch on `device` runs faster unpadded when its attention cannot run varlen (which always
    unpads): from `DEVICE_RULES.unpad_min_hidden`'s size for the device type up, at every size on other devices."""
    return config.hidden_size >= DEVICE_RULES.unpad_min_hidden.get(device.type, 0)


PADDED_DECODING_ENV = "BERTSCRATCH_PADDED_DECODING"
PADDED_DECODINGS = ("auto", "rows", "grid")  # auto: measured on this CPU (`grid_max_padding`)
DECODING_PROBE_SHAPE = (4, 128)  # (B, T) of the padded batch `grid_max_padding` decodes both ways
DECODING_PROBE_PADDING = 0.3  # its fraction of pad positions (row lengths spread evenly from 0.4 T to T)


def decodes_padded_grid(
    decode: nn.Module, sequence_output: torch.Tensor, padding: BertScratchPadding, vocab_size: int
) -> bool:
    """Whether the CPU decodes a padded batch's (B, T, H) `sequence_output` to logits with `decode` on the whole grid,
    pad rows zeroed after (`BertScratchPadding.zero_pad_rows`), rather than at its N real rows, copied into the grid
    (`BertScratchPadding.pad`). The rows save the pad rows' GEMM, the copy writes the logits twice: which wins
    depends on the CPU and the padding (mini on a loaded 2-core AMD EPYC, Zen 2: the grid at 10% padding, 1.07x as
    fast, the rows at 30% and 49%, 1.16x and 1.47x; `results/cpu-choices/padded-decoding-zen2.json`). So the grid is
    decoded below the padding fraction `grid_max_padding` measured on this CPU, or as `BERTSCRATCH_PADDED_DECODING`
    (rows or grid) says; when compiling or tracing, the rows. `DEVICE_RULES.padded_decoding` decides first for its
    device types; another device than the CPU decodes the grid."""
    device = sequence_output.device.type
    rule = DEVICE_RULES.padded_decoding.get(device, "auto")
    if rule not in PADDED_DECODINGS:
        raise ValueError(
            f"DEVICE_RULES.padded_decoding[{device!r}] must be one of {list(PADDED_DECODINGS)}, got {rule!r}."
        )
    if rule != "auto":
        return rule == "grid"
    if device != "cpu":
        return True
    requested = os.environ.get(PADDED_DECODING_ENV, "auto").strip().lower() or "auto"
    if requested not in PADDED_DECODINGS:
        raise ValueError(f"{PADDED_DECODING_ENV} must be one of {list(PADDED_DECODINGS)}, got {requested!r}.")
    if requested != "auto":
        return requested == "grid"
    if is_tracing(sequence_output) or torch.compiler.is_compiling():
        return False
    seq_len = sequence_output.shape[1]
    padded = 1.0 - padding.indices.numel() / (padding.batch_size * seq_len)
    return padded < grid_max_padding(decode, sequence_output.shape[-1], vocab_size, sequence_output.dtype)


def grid_max_padding(decode: nn.Module, hidden_size: int, vocab_size: int, dtype: torch.dtype) -> float:
    """The padding fraction below which decoding a padded batch's whole grid is faster on this CPU than decoding its
    real rows and copying them into the grid, from both timed on a `DECODING_PROBE_SHAPE` batch with
    `DECODING_PROBE_PADDING` of padding (`cpu_matmul.timed_candidates`: once per CPU, threads and shape, cached).

    The grid costs g per position (its GEMM and output); the rows g per real position plus k per position of the
    grid they are copied into. With the grid's time G and the rows' time R at a real fraction f, k / g = R / G - f,
    and the rows win where the pad fraction exceeds k / g."""
    autocast = torch.is_autocast_enabled("cpu")
    dtype = torch.get_autocast_dtype("cpu") if autocast else dtype
    path = cpu_matmul.choice()
    gemm = path.bf16 if dtype == torch.bfloat16 else path.fp32
    key = f"{hidden_size}x{vocab_size} {str(dtype).removeprefix('torch.')} gemm {gemm}"
    seq_len = DECODING_PROBE_SHAPE[1]
    real_fraction = decoding_probe_real_fraction()

    def measure() -> dict[str, float]:
        hidden, probe = decoding_probe_batch(hidden_size, dtype)
        with torch.no_grad():
            return cpu_matmul.time_interleaved(
                {
                    "rows": lambda: probe.pad(decode(probe.unpad(hidden)), seq_len),
                    "grid": lambda: probe.zero_pad_rows(decode(hidden)),
                },
                rounds=3,
            )

    def summary(seconds: dict[str, float]) -> str:
        return f"Padded batches' MLM logits decoded on the whole grid below {threshold(seconds):.0%} padding"

    def threshold(seconds: dict[str, float]) -> float:
        return min(max(seconds["rows"] / seconds["grid"] - real_fraction, 0.0), 1.0)

    return threshold(cpu_matmul.timed_candidates("padded_decoding", key, measure, summary))


def _decoding_probe_lengths() -> list[int]:
    """The probe's row lengths, spread evenly from (1 - 2p) T to T (on the host: read at every padded CPU forward)."""
    batch_size, seq_len = DECODING_PROBE_SHAPE
    shortest = round((1 - 2 * DECODING_PROBE_PADDING) * seq_len)
    return [round(shortest + row * (seq_len - shortest) / (batch_size - 1)) for row in range(batch_size)]


def decoding_probe_real_fraction() -> float:
    """The fraction of the decoding probe's (B, T) grid that is real tokens."""
    return sum(_decoding_probe_lengths()) / (DECODING_PROBE_SHAPE[0] * DECODING_PROBE_SHAPE[1])


def decoding_probe_batch(hidden_size: int, dtype: torch.dtype) -> tuple[torch.Tensor, BertScratchPadding]:
    """The padded batch CPU decodings are timed on: random (B, T, H) hidden states of a `DECODING_PROBE_SHAPE` batch
    whose row lengths spread evenly from (1 - 2p) T to T (p = `DECODING_PROBE_PADDING`), and its padding."""
    batch_size, seq_len = DECODING_PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)  # the global generator (dropout's) stays untouched
    hidden = torch.randn(batch_size, seq_len, hidden_size, generator=generator, dtype=dtype)
    lengths = torch.tensor(_decoding_probe_lengths())
    padding = BertScratchPadding.from_mask(torch.arange(seq_len)[None, :] < lengths[:, None])
    return hidden, padding


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


def document_ids(position_ids: torch.Tensor | None, kwargs: dict[str, object], seq_len: int) -> torch.Tensor | None:
    """(B, T) document index of every token of a padding-free batch (several documents packed in a row, as
    transformers' `DataCollatorWithFlattening` makes), or None for ordinary rows.

    Read from `seq_idx`, else from `cu_seq_lens_q` (one row), else from `position_ids`: a new document starts wherever
    a position does not follow the one before it. Ordinary position ids (increasing) give one document per row.
    """
    # The forward's TransformersKwargs, whose seq_idx and cu_seq_lens_q are tensors.
    if kwargs.get("seq_idx") is not None:
        return cast(torch.Tensor, kwargs["seq_idx"])
    starts = cast("torch.Tensor | None", kwargs.get("cu_seq_lens_q"))
    if starts is not None:
        positions = torch.arange(seq_len, device=starts.device)
        return torch.bucketize(positions, starts[1:-1].to(positions.dtype), right=True)[None]  # (1, T)
    if position_ids is None or position_ids.shape[-1] < 2:
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
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)


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
        attention_mask: (B, T) 0/1 key mask, or None when no key is masked.
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
    keeps its first `max_length` positions. With `head_tokens` = max_length - 2 that is the head of the text, with 0
    its tail: the cut `tasks.shapes.truncate_ids` makes of the token ids."""
    device = attention_mask.device if attention_mask is not None else None
    kept = torch.arange(max_length, device=device).expand(batch, max_length)  # (B, L)
    if attention_mask is None:
        real = torch.full((batch, 1), length, device=device)
    else:
        real = attention_mask.sum(dim=1, keepdim=True)  # (B, 1): real tokens, [CLS] and [SEP] included
    tail = real - max_length + kept  # the row's last max_length - 1 - head_tokens positions end at real - 1
    return torch.where((kept <= head_tokens) | (real <= max_length), kept, tail)


def cut_long_texts(config: BertScratchConfig, inputs: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
    """`inputs` (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds; (B, T) or (B, T, H)) cut to
    `config.long_text_max_length` tokens by `config.long_text_truncation` when T is longer; unchanged otherwise, and
    while compiled or exported (ONNX Runtime's model cuts on the host, `onnx.runtime`)."""
    max_length = config.long_text_max_length
    reference = inputs["input_ids"] if inputs["input_ids"] is not None else inputs["inputs_embeds"]
    if max_length is None or reference is None or torch.compiler.is_compiling():  # an exported graph reads as given
        return inputs
    if reference.shape[1] <= max_length:
        return inputs
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
