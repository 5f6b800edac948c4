"""`lab/compare_onnx_graphs.py`: every graph is checked against PyTorch and timed, and `--output_json` writes a
record that `lab.make_report` renders into docs/onnx.md's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_bertscratch import records

ROOT = Path(__file__).resolve().parents[2]


def _script():
    from lab import compare_onnx_graphs

    return compare_onnx_graphs


def test_record_of_two_graphs_renders_as_their_ratio_to_ours(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install -e '.[onnx]')")
    pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript")
    script = _script()
    path = tmp_path / "results" / "onnx-graphs" / "encode-0.3.json"
    argv = ["--preset", "tiny", "--batch_size", "2", "--seq_len", "16", "--rounds", "2", "--repeats", "2",
            "--graphs", "ours, optimize=False", "--num_threads", "1", "--output_json", str(path)]  # fmt: skip
    script.main(argv)
    record = json.loads(path.read_text())
    assert record["command"] == "python -m lab.compare_onnx_graphs " + " ".join(
        f"'{a}'" if " " in a else a
        for a in records.portable_paths(argv)  # paths as the record writes them
    )
    assert list(record["graphs"]) == [script.OURS, "ours, optimize=False"]  # ours first, always timed
    ours, plain = record["graphs"].values()
    assert ours["ratio_median"] == ours["ratio_min"] == ours["ratio_max"] == 1.0
    rounds = [p / o for p, o in zip(plain["rounds_tokens_per_s"], ours["rounds_tokens_per_s"])]
    assert (plain["ratio_min"], plain["ratio_max"]) == pytest.approx((min(rounds), max(rounds)))
    assert record["useful_tokens"] > 0 and record["versions"]["onnxruntime"]

    table = script.render_graph_table({path.name: record})
    lines = table.splitlines()
    assert lines[0] == "| graph | inference, encoder only, 30% padding |"
    assert lines[2] == f"| {script.OURS} | 1.00 (1.00-1.00) |"
    median, low, high = plain["ratio_median"], plain["ratio_min"], plain["ratio_max"]
    assert lines[3] == f"| ours, optimize=False | {median:.2f} ({low:.2f}-{high:.2f}) |"
    assert f"`results/onnx-graphs/encode-0.3.json`: {ours['tokens_per_s']:,.0f} tokens/s, 2 rounds" in table
