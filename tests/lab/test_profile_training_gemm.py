"""`lab/profile_training_gemm.py`: its oneDNN Linear computes what `F.linear` computes, forward and both gradients,
so the comparison it times is of the same products; and its record holds every product of a training step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from lab import profile_training_gemm as script


@pytest.mark.parametrize("weight_grad", ["mm", "onednn"])
def test_onednn_linear_gives_f_linears_output_and_gradients(weight_grad: str) -> None:
    torch.manual_seed(0)
    x, weight, bias = (torch.randn(*shape, requires_grad=True) for shape in ((37, 24), (40, 24), (40,)))
    grad = torch.randn(37, 40)
    expected = F.linear(x, weight, bias)
    expected.backward(grad)
    reference = [t.grad.clone() for t in (x, weight, bias)]
    for t in (x, weight, bias):
        t.grad = None
    output = script.onednn_linear(weight_grad).apply(x, weight, bias)
    output.backward(grad)
    torch.testing.assert_close(output, expected, atol=1e-4, rtol=1e-4)
    for got, want in zip((x.grad, weight.grad, bias.grad), reference):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_record_holds_every_product_of_a_step(tmp_path: Path) -> None:
    out = tmp_path / "gemm.json"
    script.main(["--tokens", "64", "--masked", "16", "--rounds", "1", "--calls", "1", "--output_json", str(out)])
    record = json.loads(out.read_text())
    assert record["command"].startswith(script.PROGRAM) and record["cpu"]
    assert [case["m_k_n"] for case in record["cases"]] == [
        [64, 128, 384], [64, 128, 128], [64, 128, 512], [64, 512, 128], [16, 128, 8192]
    ]  # fmt: skip
    for case in record["cases"]:
        assert case["gflops"]["default"] > 0 and case["onednn_over_default"] == pytest.approx(
            case["gflops"]["onednn"] / case["gflops"]["default"]
        )
