"""The decoder profile (`python -m lab.profile_decode`): every variant of the MLM head's decoding is timed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch

from hf_bertscratch.records import portable_paths
from lab import profile_decode

from _lab_records import markdown_table


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


def test_profile_decode_times_the_four_decodings_of_a_padded_batch() -> None:
    args = profile_decode.DecodeProfileArguments(
        num_threads=1, hidden_size=16, vocab_size=300, rows=256, tile=[16, 64], repeats=2, paddings=[0.0, 0.3]
    )
    milliseconds = profile_decode.profile_decode(args)
    for padding in ("0% padding", "30% padding"):  # 2 rows of 128: 51 and 128 real tokens at 0.3
        for way in (
            "real rows, copied into the grid",
            "the grid, pad rows zeroed",
            "one GEMM into a reused buffer, moved into place",
            "tiles 16x64 into a reused buffer",
        ):
            assert milliseconds[f"{padding}: {way}"] > 0
    with pytest.raises(ValueError, match="rows must be a multiple of 128 with --paddings, got 100"):
        profile_decode.DecodeProfileArguments(rows=100, paddings=[0.3])
    with pytest.raises(ValueError, match=r"--paddings values must be in \[0, 0.5\], got 0.9"):
        profile_decode.DecodeProfileArguments(paddings=[0.9])


def test_decoder_profile_record_is_rendered_with_each_variants_milliseconds(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    paths = {}
    try:
        for count in (2, 1):
            paths[count] = tmp_path / f"threads-{count}.json"
            argv = ["--num_threads", str(count), "--hidden_size", "16", "--vocab_size", "300", "--rows", "64",
                    "--tile", "16", "64", "--repeats", "2", "--output_json", str(paths[count])]  # fmt: skip
            printed = profile_decode.main(argv)
            record = json.loads(paths[count].read_text(encoding="utf-8"))
            assert record["milliseconds"] == printed and record["arguments"]["num_threads"] == count
            assert record["command"] == "python -m lab.profile_decode " + shlex.join(portable_paths(argv))
    finally:
        torch.set_num_threads(threads)
    records = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in paths.values()}
    # distinct figures (the tiny decode's own are all near 0 ms): each cell must be its record's, by variant
    for count, record in zip((2, 1), records.values()):
        record["milliseconds"] = {name: 100.0 * count + index for index, name in enumerate(record["milliseconds"])}
    # columns are grouped by CPU, then ordered by threads, whatever the file names' order
    records["threads-2.json"]["cpu"], records["threads-1.json"]["cpu"] = "A CPU", "B CPU"
    records["threads-2.json"]["cpu_identity"] = {"flags": ["avx2", "avx512f"]}  # the widest names the CPU
    records["threads-1.json"].pop("cpu_identity")  # a record from before records kept it: the model name alone
    records["threads-1-2.json"] = {
        **records["threads-2.json"],
        "milliseconds": dict(records["threads-1.json"]["milliseconds"]),
    }
    records["threads-1-2.json"]["arguments"] = {**records["threads-2.json"]["arguments"], "num_threads": 1}
    header, rows = markdown_table(profile_decode.render_decoder_table(records))
    assert header == ["decoding", "A CPU (AVX512F), 1 thread", "A CPU (AVX512F), 2 threads", "B CPU, 1 thread"]
    names = list(records["threads-2.json"]["milliseconds"])
    assert [(name, cells) for (name, _), cells in rows.items()] == [
        (name, [f"{200 + i:.1f} ms", f"{100 + i:.1f} ms"]) for i, name in enumerate(names)
    ]
    assert [first for (_, first) in rows] == [f"{100 + i:.1f} ms" for i in range(len(names))]
    assert len(rows) == 4 and "64 x 16 -> 300, median of 2" in profile_decode.render_decoder_table(records)
    assert profile_decode.render_decoder_table({}).startswith("No record in `results/decoder/` yet")
