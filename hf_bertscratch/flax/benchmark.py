"""JAX against torch on this machine: max abs difference per head, and the time of one MLM training step.

    python -m hf_bertscratch.flax.benchmark --model_size mini --batch_size 16 --seq_len 128 --threads 1

Both sides train the same weights on the same masked batch (random ids, 30% of positions labelled, no padding, as
packed pretraining blocks): torch's step is forward, backward, gradient clipping and AdamW as the Trainer runs it;
JAX's is `make_mlm_train_step` (jitted, the same) with sparse decoding. Times are medians over `--steps` after
`--warmup` steps (JAX's first step compiles). Parity is measured on a right-padded batch of the same model.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # jax is imported in main, after its flags are set
    from transformers import PreTrainedModel

    from hf_bertscratch.flax.modeling_flax_bertscratch import FlaxBertScratchPreTrainedModel


@dataclass
class BenchmarkArguments:
    """What to time."""

    model_size: str = field(default="mini", metadata={"help": "Size preset (hf_bertscratch.PRESETS)."})
    vocab_size: int = field(default=8192, metadata={"help": "Vocabulary (the pretraining recipe's tokenizer size)."})
    batch_size: int = field(default=16, metadata={"help": "Blocks per step."})
    seq_len: int = field(default=128, metadata={"help": "Tokens per block."})
    steps: int = field(default=10, metadata={"help": "Timed steps per side."})
    warmup: int = field(default=2, metadata={"help": "Untimed steps first (compilation, allocator)."})
    threads: int = field(default=1, metadata={"help": "CPU threads for each side (torch and XLA)."})


def _batch(args: BenchmarkArguments, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(5, args.vocab_size, (args.batch_size, args.seq_len))
    labels = np.where(rng.random(input_ids.shape) < 0.3, input_ids, -100)
    input_ids = np.where(labels != -100, 4, input_ids)  # [MASK]
    return {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids), "labels": labels}


def _median_seconds(step: Callable[[], object], steps: int, warmup: int) -> float:
    times = []
    for number in range(warmup + steps):
        started = time.perf_counter()
        step()
        if number >= warmup:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:

    from ..arguments import ArgumentParser, parse_args_or_json

    (args,) = parse_args_or_json(ArgumentParser(BenchmarkArguments), argv)
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
        f"intra_op_parallelism_threads={args.threads}"
    )
    import torch

    import hf_bertscratch
    from hf_bertscratch.flax import (
        FlaxBertScratchForMaskedLM,
        FlaxBertScratchForSequenceClassification,
        FlaxBertScratchModel,
        make_mlm_train_step,
        make_optimizer,
    )
    from hf_bertscratch.flax.training import num_predictions_for

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(
        **hf_bertscratch.PRESETS[args.model_size],
        vocab_size=args.vocab_size,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    folder = tempfile.mkdtemp()
    heads: list[tuple[type[PreTrainedModel], type[FlaxBertScratchPreTrainedModel], str]] = [
        (hf_bertscratch.BertScratchModel, FlaxBertScratchModel, "last_hidden_state"),
        (hf_bertscratch.BertScratchForMaskedLM, FlaxBertScratchForMaskedLM, "logits"),
        (hf_bertscratch.BertScratchForSequenceClassification, FlaxBertScratchForSequenceClassification, "logits"),
    ]
    padded = _batch(args, seed=1)
    padded["attention_mask"][:, args.seq_len // 2 :] = 0
    padded["attention_mask"][0] = 1
    padded["token_type_ids"] = (
        (np.arange(args.seq_len)[None] >= args.seq_len // 4).repeat(args.batch_size, 0).astype(np.int64)
    )
    inputs = {name: padded[name] for name in ("input_ids", "attention_mask", "token_type_ids")}
    for torch_class, flax_class, name in heads:
        torch_model = torch_class(config).eval()
        torch_model.save_pretrained(folder)
        with torch.no_grad():
            expected = getattr(torch_model(**{k: torch.from_numpy(v) for k, v in inputs.items()}), name).numpy()
        actual = np.asarray(getattr(flax_class.from_pretrained(folder)(**inputs), name))
        print(f"parity {flax_class.__name__:42s} {name:18s} max abs diff {np.abs(actual - expected).max():.3g}")

    batch = _batch(args)
    torch_model = hf_bertscratch.BertScratchForMaskedLM(config).train()
    torch_model.save_pretrained(folder)
    names = [n for n, _ in torch_model.named_parameters()]
    no_decay = [n.endswith("bias") or "layer_norm" in n for n in names]
    params = list(torch_model.parameters())
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for p, skip in zip(params, no_decay) if not skip], "weight_decay": 0.01},
            {"params": [p for p, skip in zip(params, no_decay) if skip], "weight_decay": 0.0},
        ],
        lr=1e-4,
        betas=(0.9, 0.98),
    )
    torch_batch = {k: torch.from_numpy(v) for k, v in batch.items()}

    def torch_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch_model(**torch_batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(torch_model.parameters(), 1.0)
        optimizer.step()

    flax_model = FlaxBertScratchForMaskedLM.from_pretrained(folder)
    flax_model.train()
    flax_optimizer = make_optimizer(flax_model, 1e-4, b2=0.98, weight_decay=0.01, max_grad_norm=1.0)
    train_step, num_predictions = make_mlm_train_step(), num_predictions_for(batch["labels"])

    def flax_step() -> None:
        train_step(flax_model, flax_optimizer, batch, num_predictions).block_until_ready()

    torch_seconds = _median_seconds(torch_step, args.steps, args.warmup)
    flax_seconds = _median_seconds(flax_step, args.steps, args.warmup)
    shape = (
        f"{args.model_size}, V={args.vocab_size}, batch {args.batch_size} x {args.seq_len}, {args.threads} thread(s)"
    )
    print(
        f"MLM train step ({shape}): torch {torch_seconds * 1000:.1f} ms, JAX {flax_seconds * 1000:.1f} ms "
        f"(median of {args.steps})"
    )


if __name__ == "__main__":
    main()
