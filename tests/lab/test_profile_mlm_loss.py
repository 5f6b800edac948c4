"""`lab/profile_mlm_loss.py`: its fused loss computes the plain loss and its gradients (over several chunks, in fp32
and under bf16 autocast), so the steps it times do the same work; its record keeps both paths' speeds."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch.nn import functional as F

from lab import profile_mlm_loss as script


def test_fused_loss_gives_the_plain_loss_and_gradients() -> None:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=generator).requires_grad_()
    weight = (torch.randn(50, 16, generator=generator) * 0.5).requires_grad_()
    bias = torch.randn(50, generator=generator).requires_grad_()
    labels = torch.randint(0, 50, (37,), generator=generator)
    for dtype, tolerance in ((None, 1e-6), (torch.bfloat16, 2e-2)):
        results = []
        for fused in (True, False):
            hidden.grad = weight.grad = bias.grad = None
            with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
                if fused:
                    loss = script.FusedMaskedLMLoss.apply(hidden, weight, bias, labels, 8) / 37
                else:
                    loss = F.cross_entropy(F.linear(hidden, weight, bias).float(), labels)
            (2.0 * loss).backward()  # a scaled upstream gradient reaches every input
            results.append([loss.detach(), hidden.grad, weight.grad, bias.grad])
        for got, expected in zip(*results, strict=True):
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, atol=tolerance, rtol=tolerance)


def test_record_gives_each_paths_speed_and_the_ratio(tmp_path: Path) -> None:
    out = tmp_path / "mlm-loss.json"
    flags = ["--batch_size", "2", "--seq_len", "16", "--vocab_size", "300", "--chunk_rows", "4"]
    script.main([*flags, "--rounds", "1", "--steps", "1", "--output_json", str(out)])
    record = json.loads(out.read_text())
    assert record["command"].startswith(script.PROGRAM) and record["cpu"]
    case = record["cases"][0]
    assert case["precision"] == "fp32" and set(case["tokens_per_second"]) == {"plain", "fused"}
    speed = case["tokens_per_second"]
    assert case["fused_over_plain"] == speed["fused"] / speed["plain"] and min(speed.values()) > 0
