"""Pretrain a BertScratch model on raw text: masked language modelling (optionally plus NSP), or ELECTRA's
replaced-token detection (`hf_bertscratch.electra`).

In the style of transformers' `run_mlm.py`: `HfArgumentParser` over `ModelArguments`, `DataArguments` and
`PretrainingArguments` (a `TrainingArguments`), and a `main()` that reads as named stages:

    parse + validate -> raw data -> tokenizer -> tokenize and pack (datasets.map) -> model -> Trainer.train
    -> evaluate (loss, perplexity, masked-token accuracy) -> save -> all_results.json, loss curve, model card
    -> fill-mask examples

With `--objective electra` the model is the generator-discriminator pair; the data, masking, time budget, resume and
checks are the masked-LM run's. The output folder holds the discriminator, and `generator/` the generator (which
gives the fill-mask examples).

The same command runs on one CPU, under `torchrun` and under `accelerate launch` (DDP/FSDP/DeepSpeed), since the
Trainer does the distribution.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    SchedulerType,
    Trainer,
    set_seed,
)

from hf_bertscratch_base import program_name
from hf_bertscratch_base.errors import DEBUG_ENV, LAUNCHED_ERRORS_ENV, debugging, launched_errors, run_launched
from hf_bertscratch_base.heap import keep_freed_memory
from hf_bertscratch_base.thread_pool import TRAINING_WAIT_POLICY, WAIT_POLICY_ENV

from . import fast_decode
from .batching_bertscratch import selected_positions
from .budget import TrainingBudget, budget_lr_lambda, scheduler_kwargs, wsd_cooldown
from .convert import family_checkpoint
from .electra import (
    GENERATOR_FOLDER,
    ElectraPretrainingModel,
    replaced_token_metrics,
    replaced_token_reductions,
)
from .hardware import THREADS_ENV, ThreadChoice, describe_device_choice, fit_threads, resolve_num_processes
from .hub import push_training_output
from .initialisation import start_decoder_bias_at_unigram, start_saved_segments_as_first
from .modeling_bertscratch import BertScratchForMaskedLM, BertScratchForReplacedTokenDetection
from .muon import MuonWithAdamW, muon_parameter_groups
from .pretraining_arguments import (
    DataArguments,
    ModelArguments,
    PretrainingArguments,
    check_model_fits,
    check_resumed_pair,
    forget_fine_tuned_task,
    new_model_config,
    parse_args,
)
from .pretraining_data import (
    MaskingEpochCallback,
    SeededMaskingCollator,
    build_tokenizer,
    count_tokens,
    load_text_splits,
    masking_collators,
    tokenize_splits,
    training_data_source,
)
from .pretraining_report import card_info, show_fill_mask, summarise_run, unigram_metrics
from .run_folder import (
    STOP_SIGNALS,
    TrainingDataRecord,
    check_resumed_model,
    finish_run,
    log_resumption,
    output_dir_of,
    resolve_checkpoint,
    restore_signal_handlers,
    show_fewer_loss_lines,
    steps_done,
    stopped_message,
    stopping_with_one_line,
)
from .tokenization import check_mask_token

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- model stage


def build_model(
    model_args: ModelArguments, data_args: DataArguments, tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel | ElectraPretrainingModel:
    """A new model from a preset or config, or given weights; checked against the tokenizer and sequence length.

    With objective electra, the generator-discriminator pair around that model as the discriminator (given weights
    start the discriminator; the generator starts new, its projection being stored in no generator folder). Given
    weights of transformers' BERT family are converted on load (`family_checkpoint`), as every command converts them.
    """
    path = family_checkpoint(model_args.model_name_or_path) if model_args.model_name_or_path else None
    if model_args.objective == "electra":
        discriminator_class = BertScratchForReplacedTokenDetection
        model = (
            discriminator_class.from_pretrained(path)
            if path
            else discriminator_class(new_model_config(model_args, tokenizer))
        )
    else:
        auto_class = AutoModelForPreTraining if model_args.objective == "mlm_nsp" else AutoModelForMaskedLM
        model = (
            auto_class.from_pretrained(path)
            if path
            else auto_class.from_config(new_model_config(model_args, tokenizer))
        )
    if model_args.model_name_or_path:
        forget_fine_tuned_task(model.config, model_args.model_name_or_path)
    check_model_fits(model.config, data_args, tokenizer)
    if model_args.objective == "electra":
        return ElectraPretrainingModel(
            model,
            model_args.generator_width_fraction,
            model_args.discriminator_weight,
            mlm_start=bool(model_args.mlm_start_fraction),
        )
    return fast_decode.enable(model)  # NSP's evaluation decodes every position: the fastest decoding for this CPU


# -------------------------------------------------------------------------------------------- metric stage


def preprocess_logits_for_metrics(logits: torch.Tensor | tuple, labels: torch.Tensor | tuple) -> torch.Tensor:
    """Reduce eval logits to what the metrics need, so (B, T, V) never accumulates across batches.

    Returns (B, T, 2) float: [..., 0] the argmax token, [..., 1] the token's cross-entropy (0 where unlabelled),
    and for NSP (B, 1+T, 2) with the sentence-relation argmax prepended at position 0 (the Trainer right-pads
    batches of different T, so position 0 is the only one that stays put).
    """
    mlm_logits = logits[0] if isinstance(logits, tuple) else logits  # (B, T, V): decoded densely
    mlm_labels = labels[0] if isinstance(labels, tuple) else labels  # (B, T)
    scored = mlm_labels != -100  # the cross-entropy of the scored rows only: 15% of a (B, T, V) log-softmax
    token_loss = torch.zeros(mlm_labels.shape, dtype=torch.float32, device=mlm_labels.device)
    token_loss[scored] = torch.nn.functional.cross_entropy(
        mlm_logits[scored].float(), mlm_labels[scored], reduction="none"
    )
    reduced = torch.stack([mlm_logits.argmax(-1).float(), token_loss], dim=-1)
    if isinstance(logits, tuple) and len(logits) > 1 and logits[1].dim() == 2:
        nsp = torch.stack([logits[1].argmax(-1).float(), torch.zeros_like(logits[1][:, 0])], dim=-1)  # (B, 2)
        reduced = torch.cat([nsp[:, None, :], reduced], dim=1)
    return reduced


def compute_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
    """Masked-token accuracy (`accuracy`), token-weighted MLM loss and its perplexity, and NSP accuracy if any."""
    # One array: preprocess_logits_for_metrics reduces each batch's outputs to one tensor. The labels are one array,
    # or two with NSP (transformers types the tuple as one array long).
    reduced = cast(np.ndarray, eval_pred.predictions)
    labels = cast("np.ndarray | tuple[np.ndarray, ...]", eval_pred.label_ids)
    mlm_labels = labels[0] if isinstance(labels, tuple) else labels
    metrics = {}
    if isinstance(labels, tuple):
        nsp_labels = labels[1]
        metrics["nsp_accuracy"] = float((reduced[:, 0, 0] == nsp_labels).mean())
        reduced = reduced[:, 1:]
    scored = mlm_labels != -100
    n_scored = max(int(scored.sum()), 1)
    metrics["accuracy"] = float((reduced[..., 0][scored] == mlm_labels[scored]).sum() / n_scored)
    metrics["mlm_loss"] = float(reduced[..., 1][scored].sum() / n_scored)
    metrics["perplexity"] = math.exp(min(metrics["mlm_loss"], 50.0))
    return metrics


def preprocess_electra_logits_for_metrics(logits: tuple[torch.Tensor, ...], labels: torch.Tensor) -> torch.Tensor:
    """ELECTRA's evaluation outputs reduced per batch to (B, T, 5): the generator's argmax and token loss (as
    `preprocess_logits_for_metrics`), then the discriminator's prediction, token loss and replaced label."""
    generator_logits, discriminator_logits, replaced = logits[:3]
    generator = preprocess_logits_for_metrics(generator_logits, labels)
    return torch.cat([generator, replaced_token_reductions(discriminator_logits, replaced)], dim=-1)


def compute_electra_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
    """The generator's masked-token accuracy, MLM loss and perplexity (as `compute_metrics`), and the discriminator's
    accuracy and loss over every real token, with the fraction of them replaced."""
    reduced = cast(np.ndarray, eval_pred.predictions)  # one array (preprocess_electra_logits_for_metrics)
    metrics = compute_metrics(EvalPrediction(predictions=reduced[..., :2], label_ids=eval_pred.label_ids))
    metrics.update(replaced_token_metrics(reduced[..., 2:]))
    return metrics


def masked_rows_reduction(
    logits: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor, inside: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`preprocess_logits_for_metrics`'s (B, T, 2) and the batch's MLM loss from logits decoded at the scored
    positions only: (B, K, V) `logits` at `positions` (B, K), of which `inside` (B, K) marks the scored ones (a row
    with fewer than K scored positions repeats its first after them: `selected_positions`). Unscored positions hold 0
    in both channels, which `compute_metrics` does not read."""
    picked = logits[inside].float()  # (num_scored, V), row-major as labels[labels != -100]
    rows, slots = inside.nonzero(as_tuple=True)
    columns = positions[rows, slots]
    token_loss = torch.nn.functional.cross_entropy(picked, labels[rows, columns], reduction="none")
    reduced = torch.zeros((*labels.shape, 2), dtype=torch.float32, device=labels.device)
    reduced[rows, columns, 0] = picked.argmax(-1).float()
    reduced[rows, columns, 1] = token_loss
    return reduced, token_loss.mean()


# objective -> (preprocess_logits_for_metrics, compute_metrics) of its evaluation; masked-LM's for the others.
OBJECTIVE_METRICS = {"electra": (preprocess_electra_logits_for_metrics, compute_electra_metrics)}


# --------------------------------------------------------------------------------------------- main stages


def cut_blocks(inputs: dict[str, Any], length: int) -> dict[str, Any]:
    """A packed (B, T) MLM batch as (B * T / length, length): the same tokens, masks and labels in shorter blocks.

    Each short block gets positions 0..length-1 and attends only within itself; only the first of a row keeps the
    row's [CLS] and only the last its [SEP], which MLM does not need.
    """
    rows, seq_len = inputs["input_ids"].shape
    if seq_len % length:
        raise ValueError(f"Cannot cut blocks of {seq_len} tokens into blocks of {length}.")
    return {
        key: value.reshape(rows * seq_len // length, length)
        if isinstance(value, torch.Tensor) and value.shape == (rows, seq_len)
        else value
        for key, value in inputs.items()
    }


# Dataset columns the masking collator reads and pops (`DataCollatorForLanguageModeling.torch_call`): whole-word
# masking finds words from the character offsets. The Trainer must pass them to the collator although the model's
# forward does not take them; they never reach the forward.
COLLATOR_COLUMNS = ("offset_mapping",)


class PretrainingTrainer(Trainer):
    """`Trainer` whose learning-rate schedule follows the time budget when there is one (`hf_bertscratch.budget`),
    which trains on blocks cut to `short_seq_length` for the first `short_seq_fraction` of the run (and an ELECTRA
    pair in its masked-LM phase for the first `mlm_start_fraction`), whose masking rate goes linearly from the
    first to the second of `masking_rates` over the run when they are given, and which keeps
    the columns its masking collator reads (`COLLATOR_COLUMNS`) when it drops those the model does not take.

    Each evaluation batch's outputs are reduced as soon as they are computed, by `reduce_predictions` (the
    objective's `preprocess_logits_for_metrics`, which this trainer applies itself), so (B, T, V) logits never
    accumulate; a masked LM (`BertScratchForMaskedLM`) is decoded at the scored positions only (`masked_positions`),
    which is most of a small model's evaluation compute saved at 15% masking."""

    def __init__(
        self,
        *args: Any,
        eval_collator: SeededMaskingCollator | None = None,
        budget: TrainingBudget | None = None,
        short_seq_length: int = 0,
        short_seq_fraction: float = 0.0,
        mlm_start_fraction: float = 0.0,
        masking_rates: tuple[float, float] | None = None,
        reduce_predictions: Callable[[Any, Any], torch.Tensor] | None = None,
        **kwargs: Any,
    ) -> None:
        if reduce_predictions is not None and kwargs.get("preprocess_logits_for_metrics") is not None:
            raise ValueError("Pass reduce_predictions or preprocess_logits_for_metrics, not both: they do one thing.")
        super().__init__(*args, **kwargs)
        self.reduce_predictions = reduce_predictions
        self.eval_collator = eval_collator
        self.budget = budget
        self.short_seq_length, self.short_seq_fraction = short_seq_length, short_seq_fraction
        self.mlm_start_fraction = mlm_start_fraction
        self.masking_rates = masking_rates
        if budget is not None:
            budget.attach(self)
        show_fewer_loss_lines(self, steps_done if budget is None else budget.seconds_spent)

    def _load_callback_state(self) -> None:
        """transformers' restore of the saved callbacks (`--restore_callback_states_from_checkpoint`), but for the
        budget: restored, it would be a new `TrainingBudget` of the checkpoint's minutes in place of this run's, whose
        clock the schedule reads. The run's budget resumed its clock itself (`TrainingBudget.resumed`)."""
        super()._load_callback_state()
        if self.budget is not None and self.budget not in self.callback_handler.callbacks:
            self.callback_handler.remove_callback(TrainingBudget)
            self.callback_handler.add_callback(self.budget)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> None:
        """Trainer's pass over the data, unless the training is already told to stop: Trainer takes a step before it
        looks, which a run resumed with its time budget spent must not (`TrainingBudget.on_train_begin`)."""
        if self.control.should_training_stop:
            return
        super()._run_epoch(*args, **kwargs)

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            super()._set_signature_columns_if_needed()
            # The call above made it a list; Trainer leaves the attribute unannotated, so it is typed None.
            columns = cast("list[str]", self._signature_columns)
            columns += [name for name in COLLATOR_COLUMNS if name not in columns]

    def progress(self) -> float:
        """Fraction of the training done: of the time budget, or of the steps."""
        if self.budget is not None:
            return self.budget.fraction
        return self.state.global_step / self.state.max_steps if self.state.max_steps else 0.0

    def compute_loss(self, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if model.training and self.short_seq_fraction > 0 and self.progress() < self.short_seq_fraction:
            inputs = cut_blocks(inputs, self.short_seq_length)
        if model.training and self.masking_rates is not None:
            # The rate of the batches collated from now on (the dataloader runs a batch ahead of the step).
            start, end = self.masking_rates
            collator = cast(SeededMaskingCollator, self.data_collator)
            collator.mlm_probability = start + (end - start) * min(1.0, self.progress())
        pair = self.accelerator.unwrap_model(model)
        if isinstance(pair, ElectraPretrainingModel):
            pair.masked_lm_phase = model.training and self.progress() < self.mlm_start_fraction
        return super().compute_loss(model, inputs, *args, **kwargs)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`, except for the finished run of an ELECTRA pair, written as two ordinary folders
        (`ElectraPretrainingModel.save_pretrained`). Checkpoints (`_internal_call`) hold the pair's state dict as
        Trainer saves any module, which resume reloads."""
        model = self.accelerator.unwrap_model(self.model)
        if _internal_call or not isinstance(model, ElectraPretrainingModel):
            super().save_model(output_dir, _internal_call)
        elif self.args.should_save:
            tokenizer = self.processing_class
            assert tokenizer is None or isinstance(tokenizer, PreTrainedTokenizerBase), "pretraining's is a tokenizer"
            model.save_pretrained(output_dir or output_dir_of(self.args), tokenizer)

    def get_eval_dataloader(self, eval_dataset: Any = None) -> torch.utils.data.DataLoader:
        """Evaluation batches are masked by `eval_collator` (the evaluation masking rate), training ones are not."""
        if self.eval_collator is None:
            return super().get_eval_dataloader(eval_dataset)
        train_collator, self.data_collator = self.data_collator, self.eval_collator
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.data_collator = train_collator

    def prediction_step(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Trainer's evaluation step with its outputs reduced (`reduce_predictions`); a masked LM with labels
        decoded at the scored positions only (`masked_lm_step`), unless a label smoother or a `compute_loss_func`
        makes the loss (Trainer's `compute_loss` then runs on the full logits, as it would without this step)."""
        if prediction_loss_only or self.reduce_predictions is None:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        masked_lm = isinstance(self.accelerator.unwrap_model(model), BertScratchForMaskedLM)
        own_loss = self.label_smoother is None and self.compute_loss_func is None
        if (
            masked_lm
            and own_loss
            and self.reduce_predictions is preprocess_logits_for_metrics
            and inputs.get("labels") is not None
        ):
            return self.masked_lm_step(model, inputs)
        loss, logits, labels = super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        return loss, None if logits is None else self.reduce_predictions(logits, labels), labels

    def masked_lm_step(
        self, model: torch.nn.Module, inputs: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, `preprocess_logits_for_metrics`'s reduction, labels) of a masked-LM batch, the vocabulary decoded at
        each row's scored positions only (the model's `masked_positions`, K wide: the most any row has); the loss is
        the model's loss computed here: the mean cross-entropy over the batch's scored positions. (With several
        processes Trainer's own step weighs each process's loss by its share of the scored positions; the runs'
        MLM loss, `eval_mlm_loss`, is the mean over every scored position either way.)"""
        inputs = self._prepare_inputs(inputs)
        labels = inputs["labels"]
        positions, counts = selected_positions(labels != -100)  # (B, K), (B, 1)
        inside = torch.arange(positions.shape[1], device=labels.device) < counts
        model_inputs = {key: value for key, value in inputs.items() if key != "labels"}
        with torch.no_grad(), self.compute_loss_context_manager():
            logits = model(**model_inputs, masked_positions=positions).logits  # (B, K, V)
            reduced, loss = masked_rows_reduction(logits, labels, positions, inside)
        return loss.detach(), reduced, labels

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """Trainer's AdamW, or with `--muon` Muon for the encoder layers' weight matrices beside it
        (`hf_bertscratch.muon`)."""
        args = cast(PretrainingArguments, self.args)
        if not args.muon or self.optimizer is not None:
            return super().create_optimizer(model)
        opt_model = self.model if model is None else model
        assert opt_model is not None, "Trainer has its model before the optimizer"
        muon_groups, adamw_groups = muon_parameter_groups(
            opt_model, self.get_decay_parameter_names(opt_model), args.weight_decay, split_qkv=args.muon_split_qkv
        )
        # The AdamW Trainer would make of the arguments (lr, betas, eps, fused): --optim is one of MUON_ADAMW.
        _, adamw_kwargs = self.get_optimizer_cls_and_kwargs(args)
        # Data-parallel ranks (DDP) hold the same parameters and gradients: they share the orthogonalisation out.
        # FSDP shards the parameters, so each rank keeps to its own.
        data_parallel = args.world_size > 1 and torch.distributed.is_initialized() and not self.is_fsdp_enabled
        replicas = torch.distributed.group.WORLD if data_parallel else None
        self.optimizer = MuonWithAdamW(muon_groups, adamw_groups, replicas=replicas, **adamw_kwargs)
        return self.optimizer

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> torch.optim.lr_scheduler.LRScheduler:
        if self.budget is None or self.lr_scheduler is not None:
            if self.args.lr_scheduler_type == SchedulerType.WARMUP_STABLE_DECAY:
                kwargs = scheduler_kwargs(self.args.lr_scheduler_kwargs)
                # The same cooldown as with a budget (by default the last WSD_DECAY_FRACTION of the steps, linear
                # to 0), its length a fraction of the steps when below 1, as warmup_steps is.
                length, shape, _ = wsd_cooldown(kwargs)
                steps = math.ceil(length * num_training_steps) if length < 1 else int(length)
                self.args.lr_scheduler_kwargs = {**kwargs, "num_decay_steps": steps, "decay_type": shape}
            return super().create_scheduler(num_training_steps, optimizer)
        scheduler = SchedulerType(self.args.lr_scheduler_type)  # the member TrainingArguments made of the name
        factor = budget_lr_lambda(str(scheduler.value), self.args.warmup_steps, self.args.lr_scheduler_kwargs)
        budget = self.budget
        optimizer = optimizer or self.optimizer
        assert optimizer is not None, "Trainer creates the optimizer before the scheduler"
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _step: factor(budget.fraction))
        return self.lr_scheduler


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: PretrainingArguments,
    checkpoint: str | None = None,
) -> Trainer:
    """Every stage before training: data, tokenizer, tokenised splits, model, collator, and the Trainer."""
    set_seed(training_args.seed)
    documents = model_args.objective == "mlm_nsp"  # NSP pairs sentences within a document
    train_text, validation_text = load_text_splits(data_args, training_args.seed, documents)
    data_record = TrainingDataRecord.of(train_text, training_data_source(data_args))
    if data_record is not None and training_args.process_index == 0:  # its warning once, from the first process
        data_record.check_resumed(checkpoint)
    tokenizer = build_tokenizer(model_args, train_text, data_args.text_column, checkpoint, training_args)
    check_mask_token(tokenizer)  # before the (slow) tokenisation
    model = build_model(model_args, data_args, tokenizer)
    splits = tokenize_splits(
        {"train": train_text, "validation": validation_text}, tokenizer, model_args, data_args, training_args
    )
    if model_args.decoder_bias_start == "unigram":
        assert isinstance(model, PreTrainedModel), "check_model_arguments keeps ELECTRA at decoder_bias_start zero"
        counts = count_tokens(splits["train"], model.config.vocab_size)
        start_decoder_bias_at_unigram(model, counts, tokenizer.all_special_ids)
    # Set after tokenisation (texts are longer before packing): pipelines then truncate to what the model saw.
    tokenizer.model_max_length = data_args.max_seq_length
    collator, eval_collator = masking_collators(tokenizer, data_args, training_args.seed)
    # Made with the DataArguments (check_data_arguments, check_objective_fits_data).
    assert data_args.short_seq_length is not None and data_args.short_seq_fraction is not None
    budget = None
    if training_args.max_train_minutes is not None:
        budget = TrainingBudget.resumed(training_args.max_train_minutes, checkpoint)
    preprocess, metrics = OBJECTIVE_METRICS.get(model_args.objective, (preprocess_logits_for_metrics, compute_metrics))
    if training_args.include_num_input_tokens_seen == "no":
        # Count the tokens trained on, as the run's train_tokens: without padding, since NSP's pairs are often
        # shorter than max_seq_length (a flag rather than a default, which the argument parser reads as a bool).
        training_args.include_num_input_tokens_seen = "non_padding"
    return PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=splits["train"],
        eval_dataset=splits["validation"],
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=metrics,
        reduce_predictions=preprocess,
        callbacks=[MaskingEpochCallback(collator), *([data_record] if data_record is not None else [])],
        eval_collator=eval_collator,
        budget=budget,
        short_seq_length=data_args.short_seq_length,
        short_seq_fraction=data_args.short_seq_fraction,
        mlm_start_fraction=model_args.mlm_start_fraction or 0.0,
        masking_rates=None
        if data_args.mlm_probability_end is None
        else (data_args.mlm_probability, data_args.mlm_probability_end),
    )


def train_and_evaluate(trainer: Trainer, data_args: DataArguments, checkpoint: str | None) -> dict[str, float]:
    """Train (resuming from `checkpoint`), evaluate, and return train and eval metrics with throughput."""
    start = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    wall = time.perf_counter() - start
    args = trainer.args
    effective_batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    # The tokens the Trainer counted (build_trainer turns the count on) since the checkpoint this process resumed.
    counted = trainer.state.num_input_tokens_seen - _checkpoint_state(checkpoint).get("num_input_tokens_seen", 0)
    metrics = dict(train_result.metrics)
    metrics.update(
        train_wall_time_seconds=wall,
        train_effective_batch_size=effective_batch,
        max_seq_length=data_args.max_seq_length,
        world_size=args.world_size,
        train_tokens=counted,
        train_tokens_total=trainer.state.num_input_tokens_seen,  # since the run's first step, resumed or not
    )
    metrics["train_tokens_per_second"] = metrics["train_tokens"] / wall if wall > 0 else 0.0
    budget = getattr(trainer, "budget", None)
    if budget is not None:
        metrics.update(train_budget_minutes=budget.minutes, train_budget_spent_minutes=budget.spent_seconds / 60)
    metrics.update(trainer.evaluate())
    metrics.update(unigram_metrics(trainer))
    return metrics


def _checkpoint_state(checkpoint: str | None) -> dict:
    """The trainer state a run resumes from ({} for a fresh start): its step and tokens counted so far."""
    if checkpoint is None:
        return {}
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())


def save_outputs(
    trainer: Trainer, metrics: dict[str, float], model_args: ModelArguments, data_args: DataArguments
) -> str | None:
    """Write the model, tokenizer, trainer_state.json, all_results.json, loss curve and model card, through the
    finished-run protocol fine-tuning shares (`run_folder.finish_run`: staged, moved in with the card last), keeping
    the last checkpoint only (a larger budget continues from it); returns the sentence that says so (main process)."""
    from .cards import write_model_card
    from .plotting import plot_training_curves

    def write_reports(staging: Path) -> None:
        if model_args.objective != "mlm_nsp" and model_args.model_name_or_path is None:
            # Nothing here trained segment 1 (one text per example), so its row is still random; a fine-tune on
            # pairs should start the second text where the first's was learnt.
            start_saved_segments_as_first(staging)
        (staging / "all_results.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        plot_training_curves(staging)  # titled with the output_dir's name, not the staging folder's
        kind = "discriminator" if model_args.objective == "electra" else "pretrained"
        write_model_card(staging, kind, card_info(trainer, metrics, model_args, data_args))

    return finish_run(trainer, write_reports, keep_last_checkpoint=True)


LAUNCHED = "hf_bertscratch_base.launched"  # the module the processes a command launches start in


# torchrun, except that children that fail are not reported again by torchrun's log and traceback: they have said why
# (`hf_bertscratch_base.errors.run_launched`), and the launcher prints it (`$BERTSCRATCH_DEBUG`: torchrun's report);
# nor is a signal that stopped the run. Its agent passes the first signal on to the children and waits for them to
# stop, however long that takes (a child writing a checkpoint stops once the checkpoint is whole, rather than being
# killed after torch's 30 seconds); each signal after it reaches the children too, which then stop at once
# (`run_folder.stopping_with_one_line`). The launcher starts it with setsid, detached from the terminal's process
# group, so that a Ctrl-C reaches it once, through the launcher, and not again from the terminal.
TORCHRUN = """import logging, os, sys
from torch.distributed.elastic.multiprocessing import api
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
for name in list(logging.root.manager.loggerDict):
    if name.startswith("torch.distributed.elastic"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(2**31 - 1))  # no deadline: the children stop themselves
stop_children = getattr(api, "_terminate_process_handler", None)  # torch's own; absent, torch's behaviour
if stop_children is not None:
    started = []
    start = api.PContext.start
    def start_and_keep(self):
        started.append(self)
        start(self)
    api.PContext.start = start_and_keep
    def stop_then_pass_on(signum, frame):
        if not getattr(stop_then_pass_on, "stopping", False):
            stop_then_pass_on.stopping = True
            stop_children(signum, frame)
        for children in started:
            for pid in children.pids().values():
                try:
                    os.killpg(pid, signum)
                except OSError:
                    pass
    api._terminate_process_handler = stop_then_pass_on
try:
    main()
except ChildFailedError:
    sys.exit(1)
except SignalException as stopped:
    sys.exit(128 + int(stopped.sigval))
"""


# What stops a run from outside: Ctrl-C, which reaches the processes of the terminal's job, and a signal sent to this
# command alone (kill, a job scheduler, timeout). Either must reach torchrun's agent, which runs outside that job and
# passes each signal on to its training processes (each of which says where it stopped,
# `run_folder.stopping_with_one_line`).
FORWARDED_SIGNALS = STOP_SIGNALS


@contextmanager
def forwarding_signals(child: subprocess.Popen) -> Iterator[list[int]]:
    """Pass `FORWARDED_SIGNALS` on to `child` while the block runs, instead of ending this process and leaving the
    child's processes training; yields the list of the signals received."""
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        yield received
    finally:
        restore_signal_handlers(previous)


def launch_processes(argv: list[str], processes: int, threads: int, training_args: PretrainingArguments) -> None:
    """Run this same command under `torch.distributed.run` with `processes` processes of `threads` torch threads
    each (`hardware.fit_threads`), their OpenMP threads sleeping when idle (`thread_pool`). Should they fail, the
    error lines they wrote (each process's one line, `run_launched`) are printed once each on stderr; stopped by a
    signal, the first process's line saying where they stopped (or, if none said it, `stopped_message`'s)."""
    module = __name__ if __name__ != "__main__" else "hf_bertscratch.pretraining"
    # Each process starts quietly stoppable, before this module's import of torch (`launched`).
    torchrun = ["--standalone", f"--nproc_per_node={processes}", "-m", LAUNCHED, "pretrain", module, *argv]
    command = [sys.executable, *(["-m", "torch.distributed.run"] if debugging() else ["-c", TORCHRUN]), *torchrun]
    logger.info(
        "Launching %d processes with %s torch thread(s) each: torchrun %s", processes, threads, " ".join(torchrun)
    )
    with tempfile.TemporaryDirectory(prefix="bertscratch-errors-") as errors:
        environment = {WAIT_POLICY_ENV: TRAINING_WAIT_POLICY, **os.environ, THREADS_ENV: str(threads)}
        environment[LAUNCHED_ERRORS_ENV] = errors
        with (
            subprocess.Popen(command, env=environment, start_new_session=True) as child,
            forwarding_signals(child) as received,
        ):
            returncode = child.wait()
        lines = launched_errors(errors)
    program = program_name("pretrain")
    if received:  # stopped from outside, as asked: nothing failed
        said = [line for line in lines if ": error: " not in line]
        print(said[0] if said else f"{program}: {stopped_message(training_args, None)}", file=sys.stderr)
        raise SystemExit(128 + received[0])
    if returncode != 0:
        if not lines and not debugging():  # with $BERTSCRATCH_DEBUG, torchrun has reported it
            lines = [
                f"{program}: error: a training process ended with exit code {returncode} and no error of its own "
                f"(killed: out of memory?); {DEBUG_ENV}=1 shows torchrun's report"
            ]
        for line in lines:
            print(line, file=sys.stderr)
        raise SystemExit(returncode)


def device_choice_to_print(
    training_args: PretrainingArguments, processes: int, threads: ThreadChoice | None = None
) -> str | None:
    """The "Training on ..." line (`describe_device_choice`) this process prints, once per run: before this command
    launches its own processes (`launch_processes`, whose processes do not print it again), or on the main process
    (RANK 0) of a run launched by torchrun or accelerate launch, for all its WORLD_SIZE processes; None elsewhere."""
    if "WORLD_SIZE" not in os.environ:
        return describe_device_choice(training_args, processes, threads)
    if LAUNCHED_ERRORS_ENV in os.environ or os.environ.get("RANK", "0") != "0":
        return None
    return describe_device_choice(training_args, int(os.environ["WORLD_SIZE"]), threads)


def main(argv: list[str] | None = None) -> None:
    """Pretrain a BertScratch model on raw text and save a fill-mask-ready model folder (see --help)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    keep_freed_memory()  # each step's logits and their gradients reuse the last step's pages (`heap`)
    model_args, data_args, training_args = parse_args(argv)
    processes = resolve_num_processes(training_args)
    threads = fit_threads(training_args.threads, processes)
    line = device_choice_to_print(training_args, processes, threads)
    if line is not None:
        print(line)
    if processes > 1:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logger.setLevel(logging.INFO)
        launch_processes(argv, processes, threads.count, training_args)
        return
    torch.set_num_threads(threads.count)
    checkpoint = resolve_checkpoint(training_args)
    check_resumed_pair(checkpoint, model_args)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger(__package__).setLevel(logging.INFO if training_args.should_log else logging.WARNING)
    trainer = build_trainer(model_args, data_args, training_args, checkpoint)
    check_resumed_model(checkpoint, trainer.model)
    log_resumption(checkpoint)
    with stopping_with_one_line(trainer, "pretrain"):
        metrics = train_and_evaluate(trainer, data_args, checkpoint)
    kept = save_outputs(trainer, metrics, model_args, data_args)
    if trainer.is_world_process_zero():
        logger.info("Results: %s", json.dumps({k: round(v, 4) for k, v in metrics.items()}))
        tokenizer = trainer.processing_class
        assert isinstance(tokenizer, PreTrainedTokenizerBase), "build_trainer hands the Trainer the tokenizer"
        print("\n".join(summarise_run(metrics, training_args, model_args, tokenizer)))
        fill_mask_dir = Path(output_dir_of(training_args))
        if model_args.objective == "electra":
            fill_mask_dir = fill_mask_dir / GENERATOR_FOLDER  # the discriminator does not fill masks
        show_fill_mask(fill_mask_dir)
        push_training_output(training_args)
        print(kept)


__all__ = [
    "DataArguments",
    "ModelArguments",
    "PretrainingArguments",
    "build_trainer",
    "compute_electra_metrics",
    "compute_metrics",
    "main",
    "parse_args",
    "preprocess_electra_logits_for_metrics",
    "preprocess_logits_for_metrics",
]


if __name__ == "__main__":
    run_launched("pretrain", main)  # as the processes launch_processes starts run it (`LAUNCHED`)
