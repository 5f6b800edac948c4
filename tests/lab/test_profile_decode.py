"""The decoder profile (`python -m lab.profile_decode`): every variant of the MLM head's decoding is timed."""

from __future__ import annotations

import pytest

from lab import profile_decode


def test_profile_decode_times_each_variant_of_the_heads_decoding() -> None:
    args = profile_decode.DecodeProfileArguments(
        num_threads=1, hidden_size=16, vocab_size=300, rows=64, tile=[16, 64], repeats=2
    )
    milliseconds = profile_decode.profile_decode(args)
    assert sorted(milliseconds) == sorted(
        f"{tile}, {memory} output" for tile in ("tiles 16x64", "one GEMM") for memory in ("fresh", "reused")
    )
    assert all(value > 0 for value in milliseconds.values())
    with pytest.raises(ValueError, match=r"tile must be two positive sizes \(rows words\), got \[16\]"):
        profile_decode.DecodeProfileArguments(tile=[16])


def test_profile_decode_times_onnxruntimes_gemm_on_the_same_decode() -> None:
    """The ORT contender is checked against torch's decode before it is timed (it raises beyond 1e-4)."""
    pytest.importorskip("onnxruntime")
    args = profile_decode.DecodeProfileArguments(
        num_threads=1, hidden_size=16, vocab_size=300, rows=64, tile=[16, 64], repeats=2, onnxruntime=True
    )
    milliseconds = profile_decode.profile_decode(args)
    assert len(milliseconds) == 5 and milliseconds["onnxruntime Gemm"] > 0


def test_profile_decode_times_the_models_two_decodings_of_a_padded_batch() -> None:
    args = profile_decode.DecodeProfileArguments(
        num_threads=1, hidden_size=16, vocab_size=300, rows=256, tile=[16, 64], repeats=2, paddings=[0.0, 0.3]
    )
    milliseconds = profile_decode.profile_decode(args)
    for padding in ("0% padding", "30% padding"):  # 2 rows of 128: 51 and 128 real tokens at 0.3
        for way in ("real rows, copied into the grid", "the grid, pad rows zeroed"):
            assert milliseconds[f"{padding}: {way}"] > 0
    with pytest.raises(ValueError, match="rows must be a multiple of 128 with --paddings, got 100"):
        profile_decode.DecodeProfileArguments(rows=100, paddings=[0.3])
    with pytest.raises(ValueError, match=r"--paddings values must be in \[0, 0.5\], got 0.9"):
        profile_decode.DecodeProfileArguments(paddings=[0.9])
