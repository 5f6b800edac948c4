"""`lab.int8_table`: docs/onnx.md's int8 and bf16 accuracy table, from the committed `bertscratch evaluate-onnx` records."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import int8_table, report_format

ROOT = Path(__file__).resolve().parents[2]


def test_int8_table_gives_each_records_metric_per_backend_and_split() -> None:
    records = report_format.read_records(ROOT, int8_table.INT8_RECORDS)
    assert records, "results/int8/ holds the committed evaluate-onnx records"
    table = int8_table.render_int8_table(records)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    expected = []
    names = ("pytorch", "pytorch bf16", "onnx fp32", "onnx int8")
    for name, record in records.items():
        metric = record["main_metric"]
        for split in record["splits"].values():
            by = {backend["backend"]: backend for backend in split["backends"]}
            values = [100 * by[b]["metrics"][metric] if b in by else None for b in names]
            differences = [None if value is None else value - values[0] for value in (values[1], values[3])]
            agreements = [100 * by[b]["agreement"] for b in ("pytorch bf16", "onnx int8") if b in by]
            expected.append((values, differences, agreements))
        assert f"`results/int8/{name}`" in table and f"`{record['command']}`" in table
    assert len(rows) == len(expected)
    for row, (values, differences, agreements) in zip(rows, expected):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for cell, value in zip(cells[2:6], values):  # a record made without the bf16 row leaves its cells empty
            assert cell == "" if value is None else float(cell) == pytest.approx(value, abs=0.005)
        assert cells[6:8] == ["" if d is None else f"{d:+.2f}" for d in differences]
        assert cells[8].startswith(" / ".join(f"{agreement:.2f}%" for agreement in agreements))
    short = int8_table.render_int8_table(records, commands=False)  # README's: the records, not the commands
    assert short.splitlines()[:-1] == table.splitlines()[:-1] and "made by" not in short
    assert int8_table.render_int8_table({}).startswith("No record in `results/int8/` yet")
