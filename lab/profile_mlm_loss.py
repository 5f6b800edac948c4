"""Whether the quick start's training step gains from the masked-LM loss fused with the decoder: the step with the
plain loss (`skip_logits=False`: the decoder at the labelled rows, then transformers' masked-LM loss, log-softmax and
its backward as separate passes over the (M, V) logits) against the model's fused one
(`modeling_bertscratch.BertScratchMaskedLMLoss`: each chunk of rows' logits turned into their gradient while in
cache, the gradient products run at once). Interleaved rounds of whole training steps (forward, backward, AdamW), the
median kept; `--chunk_rows` sets the fused loss's chunk (`MLM_LOSS_CHUNK_ROWS`).

    python -m lab.profile_mlm_loss --output_json results/mlm-loss/amd-epyc-avx2.json

Every precision the CPU trains at (fp32, and bf16 autocast where the CPU has native bf16) prints each path's
tokens/s and their ratio; the record keeps them with the command, the CPU and the load
(`hf_bertscratch.records.run_record`). The fused loss's loss and gradients are checked against the plain one's first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time

import torch

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, modeling_bertscratch
from hf_bertscratch.hardware import cpu_has_native_bf16
from hf_bertscratch.records import RunStart, run_record
from hf_bertscratch.run_folder import write_text_atomically

PROGRAM = "python -m lab.profile_mlm_loss"


def quick_start_model(vocab_size: int) -> BertScratchForMaskedLM:
    """The quick start's model: tiny (2 layers, H 128), dropout 0, its WordPiece's vocabulary."""
    config = BertScratchConfig(
        vocab_size=vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return BertScratchForMaskedLM(config).train()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_size", type=int, default=16, help="Blocks a step (a quick-start process: 16).")
    parser.add_argument("--seq_len", type=int, default=128, help="Tokens a block.")
    parser.add_argument("--mlm_probability", type=float, default=0.4, help="Share of the tokens decoded and scored.")
    parser.add_argument("--vocab_size", type=int, default=8192, help="The vocabulary (the quick start's WordPiece).")
    parser.add_argument(
        "--chunk_rows", type=int, default=modeling_bertscratch.MLM_LOSS_CHUNK_ROWS, help="The fused loss's chunk."
    )
    parser.add_argument("--num_threads", type=int, default=1, help="torch threads (a quick-start process has one).")
    parser.add_argument("--rounds", type=int, default=7, help="Interleaved rounds; the median is kept.")
    parser.add_argument("--steps", type=int, default=10, help="Training steps per round.")
    parser.add_argument("--output_json", default=None, help="Where the record goes (written atomically).")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    start = RunStart.now()
    torch.manual_seed(0)
    torch.set_num_threads(args.num_threads)
    input_ids = torch.randint(5, args.vocab_size, (args.batch_size, args.seq_len))
    labels = torch.where(torch.rand(input_ids.shape) < args.mlm_probability, input_ids, -100)
    batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    modeling_bertscratch.MLM_LOSS_CHUNK_ROWS = args.chunk_rows
    paths = {"plain": False, "fused": None}  # skip_logits
    precisions = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
    cases = []
    for precision in precisions:
        model = quick_start_model(args.vocab_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

        def step(path: str) -> torch.Tensor:
            with autocast:
                loss = model(**batch, skip_logits=paths[path]).loss
            loss.backward()
            return loss

        grads = {}
        for path in paths:
            model.zero_grad()
            loss = step(path)
            grads[path] = (loss.detach(), [p.grad.clone() for p in model.parameters()])
        torch.testing.assert_close(grads["fused"][0], grads["plain"][0], atol=1e-4, rtol=1e-4)
        for fused, plain in zip(grads["fused"][1], grads["plain"][1], strict=True):
            torch.testing.assert_close(fused, plain, atol=1e-3 if precision == "bf16" else 1e-5, rtol=1e-2)
        times: dict[str, list[float]] = {path: [] for path in paths}
        for _ in range(args.rounds):
            for path in paths:
                began = time.perf_counter()
                for _ in range(args.steps):
                    step(path)
                    optimizer.step()
                    optimizer.zero_grad()
                times[path].append((time.perf_counter() - began) / args.steps)
        tokens = args.batch_size * args.seq_len
        speed = {path: tokens / statistics.median(values) for path, values in times.items()}
        ratio = speed["fused"] / speed["plain"]
        cases.append({"precision": precision, "tokens_per_second": speed, "fused_over_plain": ratio})
        print(f"{precision}: plain {speed['plain']:,.0f} tokens/s, fused {speed['fused']:,.0f} tokens/s, {ratio:.3f}x")
    record = {**run_record(PROGRAM, argv, vars(args), start, onnxruntime=False), "cases": cases}
    if args.output_json:
        write_text_atomically(args.output_json, json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.output_json}")
    return record


if __name__ == "__main__":
    main()
