"""Opt-in fast decoding of the MLM vocabulary for CPU inference: tiles, straight into a reused logits buffer.

An MLM head's inference forward returns (B, T, V) logits (500 MB at mini, B=32, T=128): a fresh tensor of that size
is page-faulted and zeroed on every call, one GEMM writes the bias over it, then the product over it again. With
`enable(model)`, the model decodes instead (without autograd, on CPU) into its last logits buffer once nothing
outside uses that memory any more, tile by tile, so that each output tile stays in cache while its bias and product
are written, real rows straight to their padded position, pad rows zeroed. Logits are the same as the model's own
decoding (tested); evaluation in `bertscratch pretrain` and the inference workload of `bertscratch benchmark` use it.

Which tile is fastest depends on the CPU and its load: the default was measured with `python -m lab.profile_decode`
(a 1 MiB fp32 output tile was faster on an idle 2-core AMD EPYC at 1 and 2 threads, one GEMM per run of rows when
other processes kept the cores busy); `enable(model, tile=None)` decodes each run of rows with one GEMM.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from .batching_bertscratch import BertScratchPadding
    from .modeling_bertscratch import BertScratchLMHead

DEFAULT_TILE: tuple[int, int] = (256, 1024)  # (rows, words) per GEMM
# Private torch API (the number of tensors using a storage): without it the buffer is never reused, only tiled.
_storage_use_count = getattr(torch._C, "_storage_Use_Count", None)


def check_tile(tile: tuple[int, int] | None) -> None:
    """Raise unless `tile` is None or two positive sizes (rows, words)."""
    if tile is not None and not (len(tile) == 2 and tile[0] > 0 and tile[1] > 0):
        raise ValueError(f"tile must be two positive sizes (rows, words) or None, got {tile}.")


def decode_into(
    head: BertScratchLMHead,
    hidden: torch.Tensor,
    out: torch.Tensor,
    runs: list[tuple[int, int, int]],
    tile: tuple[int, int] | None = DEFAULT_TILE,
) -> torch.Tensor:
    """Decode transformed (N, H) rows into rows of `out` (R, V) with `head`'s decoder; no autograd (writes with out=).

    For each run (out_start, hidden_start, length), rows [hidden_start, hidden_start + length) of `hidden` are
    decoded into rows [out_start, out_start + length) of `out`; other rows of `out` are not touched, so unpadded
    rows go straight to their padded position with no scatter. Each run is one GEMM with the bias (`addmm`), or,
    with `tile` = (rows, words), one GEMM per tile.
    """
    check_tile(tile)
    weight, bias = head.decoder.weight, head.decoder.bias
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


class TiledLogitsDecoder:
    """A model's `logits_decoder` (set by `enable`): decodes (B, T, H) into (B, T, V) logits in `tile`s, into the
    reused buffer, where it can (CPU, no autograd, no tracing, no autocast); returns None elsewhere, and the model
    then decodes as usual. The buffer is not model state: a copy of the decoder starts without one."""

    def __init__(self, tile: tuple[int, int] | None = DEFAULT_TILE) -> None:
        check_tile(tile)
        self.tile = tile
        self._buffer: torch.Tensor | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a copy or a pickle takes the tile, not the buffer or the lock
        return {"tile": self.tile}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["tile"])

    def __call__(
        self, head: BertScratchLMHead, sequence_output: torch.Tensor, padding: BertScratchPadding | None
    ) -> torch.Tensor | None:
        """(B, T, H) -> (B, T, V) logits, only at real positions when `padding` is given (0 elsewhere); None where
        decoding into the buffer does not apply."""
        if not self.applies(head, sequence_output):
            return None
        batch_size, seq_len, hidden_size = sequence_output.shape
        logits = self.logits_buffer(batch_size * seq_len, head.decoder.weight.shape[0], sequence_output)
        if padding is None:
            hidden = head.transform(sequence_output.reshape(-1, hidden_size))
            decode_into(head, hidden, logits, [(0, 0, batch_size * seq_len)], self.tile)
        else:
            runs, pad_indices = padding.runs(seq_len)
            decode_into(head, head.transform(padding.unpad(sequence_output)), logits, runs, self.tile)
            logits.index_fill_(0, pad_indices, 0)
        return logits.view(batch_size, seq_len, -1)

    @staticmethod
    def applies(head: BertScratchLMHead, sequence_output: torch.Tensor) -> bool:
        """Decoding into the buffer needs CPU, no autograd (it writes with out=), no tracing, no autocast (which does
        not cast out= calls), the decoder's dtype and a decoder bias."""
        weight = head.decoder.weight
        return (
            sequence_output.device.type == "cpu"
            and not (torch.is_grad_enabled() and (sequence_output.requires_grad or weight.requires_grad))
            and not torch.compiler.is_compiling()
            and not torch.is_autocast_enabled("cpu")
            and sequence_output.dtype == weight.dtype
            and head.decoder.bias is not None
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


def enable(model: nn.Module, tile: tuple[int, int] | None = DEFAULT_TILE) -> nn.Module:
    """Make an MLM model (`BertScratchForMaskedLM`, `BertScratchForPreTraining`) decode its inference logits with a
    `TiledLogitsDecoder` of `tile`; returns the model. A model without an MLM decoder is returned unchanged."""
    if hasattr(model, "logits_decoder"):
        model.logits_decoder = TiledLogitsDecoder(tile)
    return model
