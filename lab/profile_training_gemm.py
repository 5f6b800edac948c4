"""Whether training's products would gain from oneDNN: one Linear layer's forward and backward (input and weight
gradients) through `F.linear` (torch's default CPU path, MKL's sgemm) against the same three products through oneDNN
(`torch.ops.mkldnn._linear_pointwise` with the weight reordered on every call, as a weight that changes every step
must be), interleaved, at the shapes of a model's training step.

    python -m lab.profile_training_gemm --preset tiny --num_threads 1 --output_json results/training-gemm/tiny.json

The weight gradient runs either as `torch.mm` (`--weight_grad mm`) or through oneDNN too (`onednn`: its input is
transposed and reordered as a weight every call). Every case prints the GFLOP/s of both paths and their ratio; the
record keeps them with the command, the CPU and the load (`hf_bertscratch.records.run_record`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch.nn import functional as F

from hf_bertscratch.configuration_bertscratch import PRESETS
from hf_bertscratch.records import RunStart, run_record, write_record

PROGRAM = "python -m lab.profile_training_gemm"


def onednn_linear(weight_grad: str) -> type[torch.autograd.Function]:
    """A Linear whose forward and input gradient run on oneDNN; its weight gradient on `torch.mm` or oneDNN."""
    pointwise, reorder = torch.ops.mkldnn._linear_pointwise, torch.ops.mkldnn._reorder_linear_weight

    class OneDnnLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, weight)
            return pointwise(x, reorder(weight, x.shape[0]), bias, "none", [], "")

        @staticmethod
        def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            x, weight = ctx.saved_tensors
            grad = grad.contiguous()
            grad_x = pointwise(grad, reorder(weight.t().contiguous(), grad.shape[0]), None, "none", [], "")
            if weight_grad == "mm":
                grad_weight = grad.t().mm(x)
            else:
                grad_weight = pointwise(
                    grad.t().contiguous(), reorder(x.t().contiguous(), weight.shape[0]), None, "none", [], ""
                )
            return grad_x, grad_weight, grad.sum(0)

    return OneDnnLinear


def step_shapes(preset: str, tokens: int, masked: int) -> list[tuple[str, int, int, int]]:
    """(name, M, K, N) of each Linear product of a training step: the attention's fused QKV and output projection,
    the feed-forward's two, the MLM head's transform and its vocabulary decoder on the masked positions."""
    hidden, inner, vocab = PRESETS[preset]["hidden_size"], PRESETS[preset]["intermediate_size"], 8192  # quick start's
    return [
        ("qkv", tokens, hidden, 3 * hidden),
        ("attention output", tokens, hidden, hidden),
        ("feed-forward in", tokens, hidden, inner),
        ("feed-forward out", tokens, inner, hidden),
        ("decoder (masked positions)", masked, hidden, vocab),
    ]


def seconds_per_call(function: Callable[[], None], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="The model size whose shapes run.")
    parser.add_argument("--tokens", type=int, default=2048, help="Rows of a step (batch x sequence length).")
    parser.add_argument("--masked", type=int, default=820, help="Masked positions the decoder runs on (40%%).")
    parser.add_argument("--weight_grad", default="mm", choices=["mm", "onednn"], help="The weight gradient's path.")
    parser.add_argument("--num_threads", type=int, default=1, help="torch threads (a quick-start process has one).")
    parser.add_argument("--rounds", type=int, default=7, help="Interleaved rounds; the median is kept.")
    parser.add_argument("--calls", type=int, default=20, help="Forward and backward passes per round.")
    parser.add_argument("--output_json", default=None, help="Where the record goes (written atomically).")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    start = RunStart.now()
    torch.set_num_threads(args.num_threads)
    linear = onednn_linear(args.weight_grad)
    cases = []
    for name, rows, inner, outer in step_shapes(args.preset, args.tokens, args.masked):
        x = torch.randn(rows, inner, requires_grad=True)
        weight = torch.randn(outer, inner, requires_grad=True)
        bias = torch.randn(outer, requires_grad=True)
        grad = torch.randn(rows, outer)
        paths: dict[str, Callable[[], None]] = {
            "default": lambda: F.linear(x, weight, bias).backward(grad),
            "onednn": lambda: linear.apply(x, weight, bias).backward(grad),
        }
        times: dict[str, list[float]] = {path: [] for path in paths}
        for function in paths.values():
            function()  # warm-up
        for _ in range(args.rounds):
            for path, function in paths.items():
                times[path].append(seconds_per_call(function, args.calls))
        flops = 6 * rows * inner * outer  # forward, input gradient, weight gradient
        gflops = {path: flops / statistics.median(values) / 1e9 for path, values in times.items()}
        cases.append({"product": name, "m_k_n": [rows, inner, outer], "gflops": gflops,
                      "onednn_over_default": gflops["onednn"] / gflops["default"]})  # fmt: skip
        print(f"{name:28} {rows}x{inner}x{outer}: default {gflops['default']:.0f} GFLOP/s, oneDNN "
              f"{gflops['onednn']:.0f} GFLOP/s, {gflops['onednn'] / gflops['default']:.2f}x")  # fmt: skip
    record = {**run_record(PROGRAM, argv, vars(args), start, onnxruntime=False), "cases": cases}
    if args.output_json:
        write_record(args.output_json, record)
    return record


if __name__ == "__main__":
    main()
