"""Whether the quick start's training step gains from a chunked, fused vocabulary projection + cross-entropy for the
masked positions: the step as the model runs it (the decoder at the labelled rows, then transformers' masked-LM
loss: log-softmax over the vocabulary and its backward as separate passes over the (M, V) logits) against the same
step with the loss computed by `FusedMaskedLMLoss`, which turns each chunk of rows' logits into their gradient
(softmax minus one-hot) while they are in cache and runs the gradient products at once, so that backward only scales
what forward made. Interleaved rounds of whole training steps (forward, backward, AdamW), the median kept.

    python -m lab.profile_mlm_loss --output_json results/mlm-loss/amd-epyc-avx2.json

Every precision the CPU trains at (fp32, and bf16 autocast where the CPU has native bf16) prints each path's
tokens/s and their ratio; the record keeps them with the command, the CPU and the load
(`hf_bertscratch.records.run_record`). The fused loss matches the plain one's loss and gradients (checked first).
A lone step need not rank the two as the whole run does: `lab.time_pretraining_ab` times the quick start itself
with each (the model file ran the fused loss at commit 45e564a, the plain one at its parent 713a1d7).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM
from hf_bertscratch.hardware import cpu_has_native_bf16
from hf_bertscratch.modeling_bertscratch import _BertScratchMLMMixin
from hf_bertscratch.pretraining_arguments import ModelArguments, preset_sizes
from hf_bertscratch.records import RunStart, run_record, write_record

PROGRAM = "python -m lab.profile_mlm_loss"


class FusedMaskedLMLoss(torch.autograd.Function):
    """Summed cross-entropy of `hidden @ weight.T + bias` against `labels`, `chunk_rows` rows at a time, its gradients
    made in forward. hidden (M, H), weight (V, H), bias (V,), labels (M,) -> loss ()."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, labels: torch.Tensor, chunk_rows: int
    ) -> torch.Tensor:
        device_type = hidden.device.type
        dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else hidden.dtype
        with torch.autocast(device_type, enabled=False):
            h, w, b = hidden.to(dtype), weight.to(dtype), bias.to(dtype)
            loss = torch.zeros((), dtype=torch.float32)
            grad_hidden = torch.empty_like(h)
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32)
            grad_bias = torch.zeros(bias.shape, dtype=torch.float32)
            for start in range(0, h.shape[0], chunk_rows):
                h_chunk, y = h[start : start + chunk_rows], labels[start : start + chunk_rows]
                grad = torch.log_softmax(torch.addmm(b, h_chunk, w.t()).float(), dim=-1)  # log p, then p - one-hot
                loss -= grad.gather(1, y[:, None]).sum()
                grad.exp_()
                grad[torch.arange(y.numel()), y] -= 1.0
                grad_bias += grad.sum(0)
                grad_low = grad.to(dtype)
                torch.mm(grad_low, w, out=grad_hidden[start : start + chunk_rows])
                grad_weight += torch.mm(grad_low.t(), h_chunk).float()
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.dtypes = (hidden.dtype, weight.dtype, bias.dtype)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        grads = [(grad * grad_loss).to(dtype) for grad, dtype in zip(ctx.saved_tensors, ctx.dtypes, strict=True)]
        return (*grads, None, None)


def fused_mlm_loss(chunk_rows: int) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """`_BertScratchMLMMixin._mlm_logits_and_loss` in training with the loss from `FusedMaskedLMLoss` (no logits)."""

    def mlm_logits_and_loss(
        self: Any, sequence_output: torch.Tensor, labels: torch.Tensor, plan: Any, num_items_in_batch: object = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        selected = plan.labelled_positions(labels)
        hidden = self.cls.transform(sequence_output.reshape(-1, sequence_output.shape[-1]).index_select(0, selected))
        targets = labels.reshape(-1).index_select(0, selected)
        decoder = self.cls.decoder
        loss = FusedMaskedLMLoss.apply(hidden, decoder.weight, decoder.bias, targets, chunk_rows)
        return torch.empty(0), loss / (targets.numel() if num_items_in_batch is None else num_items_in_batch)

    return mlm_logits_and_loss


def quick_start_model(vocab_size: int) -> BertScratchForMaskedLM:
    """The quick start's model: tiny (2 layers, H 128) with the pretraining default's heads (`preset_sizes`),
    dropout 0, its WordPiece's vocabulary."""
    config = BertScratchConfig(
        vocab_size=vocab_size,
        **preset_sizes(ModelArguments(model_size="tiny")),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertScratchForMaskedLM(config).train()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_size", type=int, default=16, help="Blocks a step (a quick-start process: 16).")
    parser.add_argument("--seq_len", type=int, default=128, help="Tokens a block.")
    parser.add_argument("--mlm_probability", type=float, default=0.4, help="Share of the tokens decoded and scored.")
    parser.add_argument("--vocab_size", type=int, default=8192, help="The vocabulary (the quick start's WordPiece).")
    parser.add_argument("--chunk_rows", type=int, default=256, help="Rows of the vocabulary projection a chunk.")
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
    paths = {"plain": _BertScratchMLMMixin._mlm_logits_and_loss, "fused": fused_mlm_loss(args.chunk_rows)}
    precisions = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
    cases = []
    for precision in precisions:
        model = quick_start_model(args.vocab_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

        def step(path: str) -> torch.Tensor:
            _BertScratchMLMMixin._mlm_logits_and_loss = paths[path]  # type: ignore[method-assign]
            try:
                with autocast:
                    loss = model(**batch).loss
                loss.backward()
            finally:
                _BertScratchMLMMixin._mlm_logits_and_loss = paths["plain"]  # type: ignore[method-assign]
            return loss

        grads = {}
        for path in paths:
            model.zero_grad()
            loss = step(path)
            grads[path] = (loss.detach(), [p.grad.clone() for p in model.parameters()])
        torch.testing.assert_close(grads["fused"][0], grads["plain"][0], atol=1e-4, rtol=1e-4)
        for fused, plain in zip(grads["fused"][1], grads["plain"][1], strict=True):
            # bf16 rounds each summed term to 8 bits (2^-8 = 0.4%), so a gradient summed over many tokens differs
            # between the paths by about that share of its largest values, wherever the element: measured against
            # its tensor's scale (1%), as an element near zero can differ by more than itself.
            scale = 1e-2 * plain.abs().max().item() if precision == "bf16" else 1e-5
            torch.testing.assert_close(fused, plain, atol=scale, rtol=1e-2)
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
        write_record(args.output_json, record)
    return record


if __name__ == "__main__":
    main()
