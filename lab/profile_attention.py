"""Attention's forward and backward in CPU training through sdpa's kernel and through the model's eager function, on
a grid of shapes and dtypes: what `cpu_matmul.eager_attention_trains_faster` chooses between, timed on the shapes
where training runs rather than the probe's one.

    python -m lab.profile_attention --output_json results/cpu-choices/attention-zen4.json

Each shape (sequences x heads x T x head size) in fp32, and in bf16 where the CPU has native bf16, interleaved
rounds of both (`cpu_matmul.time_interleaved`), the median kept; each prints both times and sdpa's over the eager
function's. The record keeps them with the command, the CPU and the load (`hf_bertscratch.records.run_record`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch
from torch.nn import functional as F

from hf_bertscratch import BertScratchConfig, cpu_matmul
from hf_bertscratch.hardware import cpu_has_native_bf16
from hf_bertscratch.modeling_bertscratch import BertScratchAttention
from hf_bertscratch.records import RunStart, run_record, write_record

PROGRAM = "python -m lab.profile_attention"
# (sequences, heads, T, head size): the quick start's full and short blocks per process (4 heads of 32), mini's
# benchmark batch, a base-width model's heads, and T = 512
SHAPES = ((16, 4, 128, 32), (64, 4, 32, 32), (32, 4, 128, 64), (8, 12, 128, 64), (4, 4, 512, 32), (4, 4, 512, 64))


def time_shape(shape: tuple[int, int, int, int], dtype: torch.dtype, rounds: int) -> dict[str, Any]:
    """Seconds of one forward and backward of each function on random (shape) query, key and value of `dtype`."""
    sequences, heads, length, head_size = shape
    attention = BertScratchAttention(
        BertScratchConfig(hidden_size=heads * head_size, num_attention_heads=heads, attention_probs_dropout_prob=0.0)
    ).train()
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator).to(dtype).requires_grad_() for _ in range(3)]

    def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(query, key, value, scale=head_size**-0.5)

    def train(attend: Any) -> None:
        output = attend(*inputs)
        torch.autograd.grad(output, inputs, torch.ones_like(output))

    seconds = cpu_matmul.time_interleaved(
        {"sdpa": lambda: train(sdpa), "eager": lambda: train(attention._eager)}, rounds
    )
    return {"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "seconds": seconds,
            "sdpa_over_eager": seconds["sdpa"] / seconds["eager"]}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="Timed rounds of each function per shape.")
    parser.add_argument("--num_threads", type=int, default=None, help="torch threads (default: torch's).")
    parser.add_argument("--shapes", nargs="+", default=None, help="Shapes as BxHxTxD (default: the grid above).")
    parser.add_argument("--output_json", default=None, help="Where the record goes (written atomically).")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    shapes = [tuple(int(n) for n in text.split("x")) for text in args.shapes] if args.shapes else list(SHAPES)
    for shape in shapes:
        if len(shape) != 4:
            parser.error(f"a shape is sequences x heads x T x head size, e.g. 16x4x128x32; got {shape}")
    start = RunStart.now()
    dtypes = [torch.float32, *([torch.bfloat16] if cpu_has_native_bf16() else [])]
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            row = time_shape(shape, dtype, args.rounds)  # type: ignore[arg-type]
            rows.append(row)
            sdpa, eager = (row["seconds"][name] * 1e3 for name in ("sdpa", "eager"))
            print(f"{'x'.join(map(str, shape))} {row['dtype']}: sdpa {sdpa:.2f} ms, eager {eager:.2f} ms, "
                  f"sdpa / eager {row['sdpa_over_eager']:.2f}", flush=True)  # fmt: skip
    record = {**run_record(PROGRAM, argv, vars(args), start, onnxruntime=False), "shapes": rows}
    if args.output_json:
        write_record(args.output_json, record)
    return record


if __name__ == "__main__":
    main()
