"""Fast decoding of the MLM vocabulary for CPU inference, chosen for the CPU at hand: the model's own decoding, one
GEMM into a reused logits buffer (a padded batch's real rows then moved to their places), or cache-sized tiles into it.

An MLM head's inference forward returns (B, T, V) logits (500 MB at mini, B=32, T=128): a fresh tensor of that size
is page-faulted and zeroed on every call, one GEMM writes the bias over it, then the product over it again. With
`enable(model)`, the model can decode instead (without autograd, on CPU, its decoder's weights not offloaded by
accelerate: an offloaded head decodes as usual, through its forward) into its last logits buffer once nothing
outside uses that memory any more, pad rows zeroed, in one GEMM whose real rows are then moved to their padded
positions, or tile by tile straight to them so that each output tile stays in cache while its bias and product are written. Logits are
the same as the model's own decoding (tested); `bertscratch pretrain`'s MLM + NSP evaluation and the inference workload of
`bertscratch benchmark` use it.

Which of these is fastest depends on the CPU, its GEMM path (`cpu_matmul`: the model's own decoding may run on
oneDNN, which cannot write into a given buffer) and its load: a 1 MiB fp32 output tile was fastest on an idle 2-core
Intel Xeon, and 3-4x slower than no tiling on a 2-core AMD EPYC. So `enable(model)` (tile "auto") times the three on
the model's own head at its first decoding (`choose_decoding`) and caches their times per machine and threads with
`cpu_matmul`'s other choices (`cpu_matmul.timed_candidates`); `enable(model, tile=(rows, words))` or `tile=None` (one GEMM) fixes it instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

import torch
from torch import nn

from . import cpu_matmul
from .padding_bertscratch import DECODING_PROBE_PADDING, BertScratchPadding, decode_padded, decoding_probe_batch

if TYPE_CHECKING:
    from .modeling_bertscratch import BertScratchLMHead

Tile = tuple[int, int] | None | Literal["auto", "model"]
Decoding = tuple[int, int] | None | Literal["model"]
_Model = TypeVar("_Model", bound=nn.Module)  # a `Tile` once "auto" is chosen (`choose_decoding`)
DEFAULT_TILE: tuple[int, int] = (256, 1024)  # the tiled candidate: (rows, words) per GEMM, a 1 MiB fp32 output tile
PROBE_ROWS = 512  # rows decoded by each candidate when `choose_decoding` times them
PROBE_ROUNDS = 3
# Private torch API (the number of tensors using a storage): without it the buffer is never reused, only tiled.
_storage_use_count = getattr(torch._C, "_storage_Use_Count", None)


def check_tile(tile: Tile, choices: tuple[str, ...] = ()) -> None:
    """Raise unless `tile` is None, two positive sizes (rows, words) or one of `choices` ("auto", "model")."""
    if isinstance(tile, str) and tile in choices:
        return
    if tile is not None and not (not isinstance(tile, str) and len(tile) == 2 and tile[0] > 0 and tile[1] > 0):
        expected = "two positive sizes (rows, words) or None" + "".join(f", {choice!r}" for choice in choices)
        raise ValueError(f"tile must be {expected}, got {tile}.")


def _tile_name(tile: tuple[int, int] | None | str) -> str:
    return tile if isinstance(tile, str) else "one GEMM" if tile is None else f"{tile[0]}x{tile[1]}"


def choose_decoding(head: BertScratchLMHead, padded: bool = False) -> Decoding:
    """The fastest of the model's own decoding ("model"), one GEMM into a reused buffer (None, `decode_into`) and
    `DEFAULT_TILE`, for `head`'s shape on this machine with its GEMM path, for batches without padding or, with
    `padded`, for padded ones (runs of real rows are shorter there, and the model's own decoding copies them into the
    grid or decodes the grid, `padding_bertscratch.decodes_padded_grid`): timed in interleaved rounds
    (`time_candidates`) once per machine, threads and shape, and cached (`cpu_matmul.timed_candidates`)."""
    hidden_size, vocab_size = head.decoder.in_features, head.decoder.out_features
    key = f"{hidden_size}x{vocab_size} {head.decoder.weight.dtype} gemm {cpu_matmul.choice().fp32}"
    key += f", padded {DECODING_PROBE_PADDING:.0%}, one GEMM moved into place" if padded else ""

    def measure() -> dict[str, float]:
        return {_tile_name(tile): seconds for tile, seconds in time_candidates(head, padded).items()}

    def fastest(seconds: dict[str, float]) -> str:
        return min(seconds, key=lambda name: seconds[name])

    batches = "padded batches" if padded else "batches without padding"
    seconds = cpu_matmul.timed_candidates(
        "fast_decode", key, measure, lambda seconds: f"MLM inference decoding of {batches}: {fastest(seconds)}"
    )
    return _tile_from_name(fastest(seconds))


def _tile_from_name(name: str) -> Decoding:
    """The decoding `_tile_name` names: "model", "one GEMM" (None) or "ROWSxWORDS"."""
    if name == "model":
        return "model"
    if name == _tile_name(None):
        return None
    rows, words = name.split("x")
    return int(rows), int(words)


def time_candidates(head: BertScratchLMHead, padded: bool = False) -> dict[Decoding, float]:
    """Median seconds of each decoding candidate, interleaved: on `PROBE_ROWS` random rows of `head`'s width (the
    vocabulary projection alone) or, with `padded`, on the padded batch of `padding_bertscratch.decoding_probe_batch`,
    as each candidate decodes it in the model (the head's transform, the grid's pad rows)."""
    if padded:
        return _time_padded_candidates(head)
    weight = head.decoder.weight
    generator = torch.Generator().manual_seed(0)  # the global generator (what seeds a run's masking) stays untouched
    hidden = torch.randn(PROBE_ROWS, weight.shape[1], generator=generator, dtype=weight.dtype)
    runs = [(0, 0, PROBE_ROWS)]
    buffers: dict[object, torch.Tensor] = {}

    def into_buffer(tile: tuple[int, int] | None) -> Callable[[], object]:
        def decode() -> object:
            out = buffers.setdefault(tile, weight.new_empty(PROBE_ROWS, weight.shape[0]))
            return decode_into(head, hidden, out, runs, tile)

        return decode

    candidates: dict[Decoding, Callable[[], object]] = {
        "model": lambda: head.decoder(hidden),
        None: into_buffer(None),
        DEFAULT_TILE: into_buffer(DEFAULT_TILE),
    }
    with torch.no_grad():
        return cpu_matmul.time_interleaved(candidates, PROBE_ROUNDS)


def _time_padded_candidates(head: BertScratchLMHead) -> dict[Decoding, float]:
    weight = head.decoder.weight
    hidden, padding = decoding_probe_batch(weight.shape[1], weight.dtype)

    def into_buffer(tile: tuple[int, int] | None) -> Callable[[], object]:
        decoder = TiledLogitsDecoder(tile)
        return lambda: decoder(head, hidden, padding)

    candidates: dict[Decoding, Callable[[], object]] = {
        "model": lambda: decode_padded(head, hidden, padding, weight.shape[0]),  # as `_BertScratchMLMMixin._decode`
        None: into_buffer(None),
        DEFAULT_TILE: into_buffer(DEFAULT_TILE),
    }
    with torch.no_grad():
        return cpu_matmul.time_interleaved(candidates, PROBE_ROUNDS)


def decode_into(
    head: BertScratchLMHead,
    hidden: torch.Tensor,
    out: torch.Tensor,
    runs: list[tuple[int, int, int]],
    tile: tuple[int, int] | None = DEFAULT_TILE,
) -> torch.Tensor:
    """Decode transformed (N, H) rows into rows of `out` (R, V) with `head`'s decoder; no autograd (writes with out=).

    For each run (out_start, hidden_start, length), rows [hidden_start, hidden_start + length) of `hidden` are
    decoded into rows [out_start, out_start + length) of `out`, unpadded rows to their padded position with no
    scatter; other rows of `out` are not touched, except as scratch by the one GEMM below (the caller zeroes a padded
    batch's pad rows after). With `tile` = (rows, words), one GEMM with the bias
    (`addmm`) per tile of each run. With `tile` None, one GEMM for all the rows: when the runs are a padded batch's
    (`BertScratchPadding.runs`: the rows of `hidden` in order, each run at or after its rows' place), into the first
    rows of `out`, then each run moved to its place (`_move_runs`), where one GEMM per run would pack the (V, H)
    weight once per run; otherwise one GEMM per run.
    """
    check_tile(tile)
    weight, bias = head.decoder.weight, head.decoder.bias
    if tile is None and _in_grid_order(runs):
        rows = sum(length for _, _, length in runs)
        torch.addmm(bias, hidden[:rows], weight.t(), out=out[:rows])
        _move_runs(out, runs)
        return out
    row_tile, vocab_tile = tile or (out.shape[0], weight.shape[0])
    row_tiles = [
        (out_start + offset, hidden_start + offset, min(row_tile, length - offset))
        for out_start, hidden_start, length in runs
        for offset in range(0, length, row_tile)
    ]
    for v0 in range(0, weight.shape[0], vocab_tile):
        w, b = weight[v0 : v0 + vocab_tile].t(), bias[v0 : v0 + vocab_tile]
        for out_start, hidden_start, rows in row_tiles:
            torch.addmm(
                b,
                hidden[hidden_start : hidden_start + rows],
                w,
                out=out[out_start : out_start + rows, v0 : v0 + vocab_tile],
            )
    return out


def _in_grid_order(runs: list[tuple[int, int, int]]) -> bool:
    """Whether the runs take the rows of `hidden` in order from its first and each run lands after the previous one:
    then each run's place is at or after its rows' (by induction), so all rows can be decoded to the start of `out`
    and moved back to front."""
    hidden_end = out_end = 0
    for out_start, hidden_start, length in runs:
        if hidden_start != hidden_end or out_start < out_end:
            return False
        hidden_end, out_end = hidden_start + length, out_start + length
    return True


def _move_runs(out: torch.Tensor, runs: list[tuple[int, int, int]]) -> None:
    """Move each run's rows from rows [hidden_start, hidden_start + length) of `out` to [out_start, ...), the last run
    first: a run's place is at or after its rows (`_in_grid_order`), so no move overwrites rows still to be moved.
    Where a run's place overlaps its rows it moves in pieces of at most the shift, from its end."""
    for out_start, hidden_start, length in reversed(runs):
        shift = out_start - hidden_start
        if shift == 0:
            continue
        for end in range(length, 0, -shift):
            begin = max(end - shift, 0)
            out[out_start + begin : out_start + end].copy_(out[hidden_start + begin : hidden_start + end])


class TiledLogitsDecoder:
    """A model's `logits_decoder` (set by `enable`): decodes (B, T, H) into (B, T, V) logits in `tile`s, into the
    reused buffer, where it can (CPU, no autograd, no tracing, no autocast, the decoder's weights not offloaded:
    `applies`); returns None elsewhere, and the model then decodes as usual. `tile` "auto" is resolved by `choose_decoding` at the first decoding of a batch without
    padding (`tile`) and at the first of a padded one (`padded_tile`); "model" leaves every decoding to the model. The buffer is not model state: a copy of the decoder starts without one."""

    def __init__(self, tile: Tile = "auto") -> None:
        check_tile(tile, ("auto", "model"))
        self.tile = tile  # batches without padding
        self.padded_tile = tile  # padded batches: "auto" is chosen apart (`choose_decoding(head, padded=True)`)
        self._buffer: torch.Tensor | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a copy or a pickle takes the tiles, not the buffer or the lock
        return {"tile": self.tile, "padded_tile": self.padded_tile}

    def __setstate__(self, state: dict) -> None:
        TiledLogitsDecoder.__init__(self, state["tile"])
        self.padded_tile = state.get("padded_tile", self.tile)

    def __call__(
        self, head: BertScratchLMHead, sequence_output: torch.Tensor, padding: BertScratchPadding | None
    ) -> torch.Tensor | None:
        """(B, T, H) -> (B, T, V) logits, only at real positions when `padding` is given (0 elsewhere); None where
        decoding into the buffer does not apply."""
        if not self.applies(head, sequence_output):
            return None
        if padding is None and self.tile == "auto":
            self.tile = choose_decoding(head)
        if padding is not None and self.padded_tile == "auto":
            self.padded_tile = choose_decoding(head, padded=True)
        tile = self.tile if padding is None else self.padded_tile
        if isinstance(tile, str):  # "model": the head's own decoding
            return None
        batch_size, seq_len, hidden_size = sequence_output.shape
        logits = self.logits_buffer(batch_size * seq_len, head.decoder.weight.shape[0], sequence_output)
        if padding is None:
            hidden = head.transform(sequence_output.reshape(-1, hidden_size))
            decode_into(head, hidden, logits, [(0, 0, batch_size * seq_len)], tile)
        else:
            runs, pad_indices = padding.runs(seq_len)
            decode_into(head, head.transform(padding.unpad(sequence_output)), logits, runs, tile)
            logits.index_fill_(0, pad_indices, 0)
        return logits.view(batch_size, seq_len, -1)

    @staticmethod
    def applies(head: BertScratchLMHead, sequence_output: torch.Tensor) -> bool:
        """Decoding into the buffer needs CPU, no autograd (it writes with out=), no tracing, no autocast (which does
        not cast out= calls), the decoder's dtype, a decoder bias, and the decoder's weights in memory: accelerate's
        offloading (a `device_map` with "disk" or "cpu" offload) leaves them on the meta device and loads them only
        within the decoder's forward, which the model's own decoding calls."""
        weight, bias = head.decoder.weight, head.decoder.bias
        return (
            sequence_output.device.type == "cpu"
            and not (torch.is_grad_enabled() and (sequence_output.requires_grad or weight.requires_grad))
            and not torch.compiler.is_compiling()
            and not torch.is_autocast_enabled("cpu")
            and sequence_output.dtype == weight.dtype
            and bias is not None
            and not (weight.is_meta or bias.is_meta)
        )

    def logits_buffer(self, rows: int, columns: int, like: torch.Tensor) -> torch.Tensor:
        """An uninitialised (rows, columns) tensor of `like`'s dtype and device: the last buffer when no tensor
        outside uses its memory any more and it is large enough, new memory (kept for next time) otherwise."""
        with self._lock:
            buffer, self._buffer = self._buffer, None
        if not (
            buffer is not None
            and _storage_use_count is not None
            and buffer.numel() >= rows * columns
            and (buffer.dtype, buffer.device) == (like.dtype, like.device)
            and (
                torch.is_inference_mode_enabled() or not buffer.is_inference()
            )  # inference tensors: written there only
            and _storage_use_count(buffer.untyped_storage()._cdata) <= 2  # this tensor and the storage object just made
        ):
            buffer = like.new_empty(rows * columns)
        logits = buffer[: rows * columns].view(rows, columns)  # in use from here on: another thread cannot take it
        with self._lock:
            self._buffer = buffer
        return logits


def enable(model: _Model, tile: Tile = "auto") -> _Model:
    """Make an MLM model (`BertScratchForMaskedLM`, `BertScratchForPreTraining`) decode its inference logits with a
    `TiledLogitsDecoder` of `tile` ("auto": the fastest for this CPU, `choose_decoding`); returns the model. A model
    without an MLM decoder is returned unchanged."""
    if hasattr(model, "logits_decoder"):
        # torch's stub of Module.__setattr__ admits only tensors and modules; any value is set at runtime.
        model.logits_decoder = TiledLogitsDecoder(tile)  # type: ignore[assignment]
    return model
