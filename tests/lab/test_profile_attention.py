"""`lab/profile_attention.py`: each shape timed in both functions (fp32, and bf16 where the CPU has it), the ratio
in the record beside the times; a malformed shape is refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_bertscratch.hardware import cpu_has_native_bf16
from lab import profile_attention as script


def test_record_gives_both_times_and_the_ratio_of_each_shape(tmp_path: Path) -> None:
    out = tmp_path / "attention.json"
    script.main(["--shapes", "2x2x16x8", "1x4x8x4", "--rounds", "1", "--output_json", str(out)])
    record = json.loads(out.read_text())
    assert record["command"].startswith(script.PROGRAM)
    dtypes = ["float32", *(["bfloat16"] if cpu_has_native_bf16() else [])]
    assert [(row["shape"], row["dtype"]) for row in record["shapes"]] == [
        (shape, dtype) for dtype in dtypes for shape in ([2, 2, 16, 8], [1, 4, 8, 4])
    ]
    for row in record["shapes"]:
        assert set(row["seconds"]) == {"sdpa", "eager"} and all(value > 0 for value in row["seconds"].values())
        assert row["sdpa_over_eager"] == pytest.approx(row["seconds"]["sdpa"] / row["seconds"]["eager"])


def test_a_shape_of_other_than_four_numbers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        script.main(["--shapes", "2x16x8"])
    assert "(2, 16, 8)" in capsys.readouterr().err
