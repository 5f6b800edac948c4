"""A padded batch in a BertScratch forward: where its real tokens are (`BertScratchPadding`, for running the dense
layers on them alone), and what each device does with it (`DEVICE_RULES`): whether it runs unpadded
(`unpadding_pays`), and whether its MLM logits are decoded on the whole grid or at the real rows (`decode_padded`,
on a CPU as measured on it, `grid_max_padding`).

`batching_bertscratch.py` plans a forward's batch on these and the model decodes with them; `save_pretrained` ships
this file with both (transformers copies a modeling file's relative imports), so it imports torch, public
transformers API, the configuration and `cpu_matmul` (whose cache holds the CPU's measured decoding) only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers.utils import is_tracing

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
            applies (`batching_bertscratch.torch_varlen_applies`): then no layer pads or unpads, and the batch
            unpads at every size.
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


def decode_padded(
    decode: nn.Module, sequence_output: torch.Tensor, padding: BertScratchPadding, vocab_size: int
) -> torch.Tensor:
    """A padded batch's (B, T, H) `sequence_output` -> (B, T, V) logits, 0 at pad positions: decoded on the whole
    grid with its pad rows zeroed after, or at its N real rows copied into the grid, as `decodes_padded_grid` says."""
    if decodes_padded_grid(decode, sequence_output, padding, vocab_size):
        return padding.zero_pad_rows(decode(sequence_output))
    return padding.pad(decode(padding.unpad(sequence_output)), sequence_output.shape[1])


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
