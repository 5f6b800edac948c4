"""`lab/profile_mlm_loss.py`: it times whole training steps with the plain and the fused masked-LM loss, after
checking that both give the same loss and gradients, and keeps both speeds and their ratio per precision."""

from __future__ import annotations

import json
from pathlib import Path

from hf_bertscratch import modeling_bertscratch
from lab import profile_mlm_loss as script


def test_record_gives_each_paths_speed_and_the_ratio(tmp_path: Path) -> None:
    out = tmp_path / "mlm-loss.json"
    chunk = modeling_bertscratch.MLM_LOSS_CHUNK_ROWS
    try:
        flags = ["--batch_size", "2", "--seq_len", "16", "--vocab_size", "300", "--chunk_rows", "4"]
        script.main([*flags, "--rounds", "1", "--steps", "1", "--output_json", str(out)])
    finally:
        modeling_bertscratch.MLM_LOSS_CHUNK_ROWS = chunk
    record = json.loads(out.read_text())
    assert record["command"].startswith(script.PROGRAM) and record["cpu"]
    case = record["cases"][0]
    assert case["precision"] == "fp32" and set(case["tokens_per_second"]) == {"plain", "fused"}
    speed = case["tokens_per_second"]
    assert case["fused_over_plain"] == speed["fused"] / speed["plain"] and min(speed.values()) > 0
