"""Pretrain a BertScratch masked language model in JAX, on the torch side's data pipeline; writes a folder that
`AutoModelForMaskedLM` (torch) and `FlaxBertScratchForMaskedLM` both load.

    bertscratch pretrain-flax --output_dir runs/flax --train_file train.txt --max_steps 200

Stages, as `hf_bertscratch.pretraining`:

    parse + validate -> raw data -> tokenizer -> tokenize and pack -> model -> jitted AdamW steps on batches masked
    by `SeededMaskingCollator` -> evaluate (loss, perplexity, masked-token accuracy) -> save (staged, then moved in)

The data, tokenizer, model-config and masking stages are the torch entry point's own functions; the model arguments
and data arguments are the same dataclasses. Only the MLM objective, one process, and a linear warm-up then linear
decay schedule over `--max_steps` (transformers' "linear").
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import jax
import numpy as np
import optax
from flax import nnx
from transformers import PreTrainedTokenizerBase

from ..convert import family_checkpoint
from ..flax_pretraining_arguments import FlaxPretrainingArguments, parse_args
from ..pretraining_arguments import (
    DataArguments,
    ModelArguments,
    check_model_fits,
    forget_fine_tuned_task,
    new_model_config,
)
from ..pretraining_data import (
    SeededMaskingCollator,
    build_tokenizer,
    load_text_splits,
    masking_collators,
    tokenize_splits,
)
from ..run_folder import STAGING, check_output_dir, publish_run
from ..tokenization import check_mask_token
from .modeling_flax_bertscratch import FlaxBertScratchForMaskedLM
from .training import Batch, make_mlm_train_step, make_optimizer, masked_lm_loss, num_predictions_for

logger = logging.getLogger(__name__)

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "labels")


def validate_args(model_args: ModelArguments, data_args: DataArguments, args: FlaxPretrainingArguments) -> None:
    """Reject what this entry point does not do, naming the bad value, before anything is loaded or written."""
    if model_args.objective != "mlm":
        raise ValueError(f"pretrain-flax trains objective 'mlm' only, got {model_args.objective!r}.")
    if data_args.streaming:
        raise ValueError("pretrain-flax does not stream (--streaming); give a dataset that fits on disk.")
    for name in ("max_steps", "per_device_train_batch_size", "per_device_eval_batch_size", "logging_steps"):
        if getattr(args, name) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {getattr(args, name)}.")
    if not 0 <= args.warmup_steps:
        raise ValueError(f"warmup_steps must be >= 0 (steps, or a fraction below 1), got {args.warmup_steps}.")
    check_output_dir(args)


def build_model(
    model_args: ModelArguments, data_args: DataArguments, tokenizer: PreTrainedTokenizerBase, seed: int
) -> FlaxBertScratchForMaskedLM:
    """Given weights (`--model_name_or_path`; transformers' BERT converted on load, as the torch side converts it)
    or a new model from the torch side's config choice."""
    if model_args.model_name_or_path:
        model = FlaxBertScratchForMaskedLM.from_pretrained(family_checkpoint(model_args.model_name_or_path), seed=seed)
        forget_fine_tuned_task(model.config, model_args.model_name_or_path)
    else:
        model = FlaxBertScratchForMaskedLM(new_model_config(model_args, tokenizer), rngs=nnx.Rngs(seed))
    check_model_fits(model.config, data_args, tokenizer)
    return model


def learning_rate_schedule(args: FlaxPretrainingArguments) -> optax.Schedule:
    """Linear warm-up to `learning_rate`, then linear decay to 0 at `max_steps`."""
    warmup = int(args.warmup_steps * args.max_steps) if args.warmup_steps < 1 else int(args.warmup_steps)
    warmup = min(warmup, args.max_steps)
    return optax.join_schedules(
        [
            optax.linear_schedule(0.0, args.learning_rate, max(warmup, 1)),
            optax.linear_schedule(args.learning_rate, 0.0, max(args.max_steps - warmup, 1)),
        ],
        [warmup],
    )


def masked_batches(
    dataset: datasets.Dataset, collator: SeededMaskingCollator, batch_size: int, seed: int, epochs: int | None = None
) -> Iterator[dict[str, np.ndarray]]:
    """Collated numpy batches of `batch_size` blocks (the last partial batch of an epoch dropped, so the jitted step
    compiles once), reshuffled and re-masked each epoch; endless unless `epochs` is given."""
    if len(dataset) < batch_size:
        raise ValueError(
            f"The split has {len(dataset)} blocks, fewer than one batch of {batch_size}; give more text "
            "or a smaller batch size."
        )
    epoch = 0
    while epochs is None or epoch < epochs:
        collator.epoch = epoch
        order = np.random.default_rng([seed, epoch]).permutation(len(dataset))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            batch = collator([dataset[int(i)] for i in order[start : start + batch_size]])
            yield {name: batch[name].numpy() for name in MODEL_INPUTS if name in batch}
        epoch += 1


def train(
    model: FlaxBertScratchForMaskedLM,
    dataset: datasets.Dataset,
    collator: SeededMaskingCollator,
    args: FlaxPretrainingArguments,
) -> dict[str, float]:
    """Run `max_steps` jitted AdamW steps; returns the training metrics."""
    model.train()
    optimizer = make_optimizer(
        model,
        learning_rate_schedule(args),
        b1=args.adam_beta1,
        b2=args.adam_beta2,
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm or None,
    )
    step = make_mlm_train_step()
    batches = masked_batches(dataset, collator, args.per_device_train_batch_size, args.seed)
    losses, started = [], time.perf_counter()
    for number in range(1, args.max_steps + 1):
        batch = next(batches)
        losses.append(step(model, optimizer, batch, num_predictions_for(batch["labels"])))
        if number % args.logging_steps == 0 or number == args.max_steps:
            window = [float(loss) for loss in losses[-args.logging_steps :]]
            logger.info("step %d/%d  loss %.4f", number, args.max_steps, sum(window) / len(window))
    final = float(losses[-1])  # waits for the last step
    seconds = time.perf_counter() - started
    return {
        "train_steps": args.max_steps,
        "train_loss": sum(float(x) for x in losses) / len(losses),
        "train_last_loss": final,
        "train_wall_time_seconds": seconds,
    }


@nnx.jit
def _eval_step(model: FlaxBertScratchForMaskedLM, batch: Batch) -> tuple[jax.Array, ...]:
    logits = model(batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")).logits
    labels = batch["labels"]
    scored = labels != -100
    count = scored.sum()
    correct = ((logits.argmax(-1) == labels) & scored).sum()
    return masked_lm_loss(logits, labels) * count, correct, count


def evaluate(
    model: FlaxBertScratchForMaskedLM,
    dataset: datasets.Dataset,
    collator: SeededMaskingCollator,
    args: FlaxPretrainingArguments,
) -> dict[str, float]:
    """Token-averaged MLM loss, perplexity and masked-token accuracy over one pass of the validation blocks."""
    model.eval()
    batch_size = min(args.per_device_eval_batch_size, len(dataset))
    total_loss = correct = count = 0.0
    for batch in masked_batches(dataset, collator, batch_size, args.seed, epochs=1):
        # nnx.jit turns numpy arrays into jax arrays; its typing keeps the function's own signature.
        batch_loss, batch_correct, batch_count = _eval_step(model, batch)  # type: ignore[arg-type]
        total_loss, correct, count = (
            total_loss + float(batch_loss),
            correct + int(batch_correct),
            count + int(batch_count),
        )
    loss = total_loss / max(count, 1)
    return {"eval_loss": loss, "eval_perplexity": math.exp(min(loss, 50.0)), "eval_accuracy": correct / max(count, 1)}


def save_outputs(
    model: FlaxBertScratchForMaskedLM, tokenizer: PreTrainedTokenizerBase, metrics: dict[str, Any], output_dir: str
) -> None:
    """Model, tokenizer and all_results.json, assembled in a hidden staging folder and moved in file by file at the
    end, so a failure never leaves a folder that looks finished; the reports an earlier run left are removed."""
    staging = Path(output_dir) / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "all_results.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        publish_run(staging, output_dir, last=("all_results.json",))  # an earlier run's reports go
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> None:
    """Pretrain a BertScratch MLM in JAX and save a folder the torch side loads (see --help)."""
    model_args, data_args, args = parse_args(argv)
    validate_args(model_args, data_args, args)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger(__package__).setLevel(logging.INFO)
    train_text, validation_text = load_text_splits(data_args, args.seed)
    tokenizer = build_tokenizer(model_args, train_text, data_args.text_column, None, args)
    check_mask_token(tokenizer)
    model = build_model(model_args, data_args, tokenizer, args.seed)
    splits = tokenize_splits(
        {"train": train_text, "validation": validation_text}, tokenizer, model_args, data_args, args
    )
    tokenizer.model_max_length = data_args.max_seq_length
    train_collator, eval_collator = masking_collators(tokenizer, data_args, args.seed)
    metrics = train(model, splits["train"], train_collator, args)
    metrics.update(evaluate(model, splits["validation"], eval_collator, args))
    save_outputs(model, tokenizer, metrics, args.output_dir)
    print(
        f"eval_accuracy {metrics['eval_accuracy']:.4f}  perplexity {metrics['eval_perplexity']:.2f}  "
        f"train {metrics['train_wall_time_seconds']:.0f}s  -> {args.output_dir}"
    )


__all__ = ["FlaxPretrainingArguments", "main", "parse_args", "validate_args"]


if __name__ == "__main__":
    main()
