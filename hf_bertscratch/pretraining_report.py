"""What a pretraining run reports when it ends (`hf_bertscratch.pretraining`): its scores beside the unigram answer's
and the hints the closing lines give (`summarise_run`), what its model card says (`card_info`), and the fill-mask
predictions of the saved folder (`show_fill_mask`)."""

from __future__ import annotations

from collections.abc import Sized
from pathlib import Path
from typing import Any, cast

import datasets
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

from .baselines import unigram_answer
from .cards import source_name
from .electra import ElectraPretrainingModel
from .hardware import describe_hardware
from .pretraining_arguments import (
    BUDGET_STEP_CAP,
    DEFAULT_BUDGET_MINUTES,
    DataArguments,
    ModelArguments,
    PretrainingArguments,
    adds_task_text,
    task_text_datasets,
)
from .run_folder import output_dir_of

# Training tokens per second of the default recipe (README's quick start: the tiny model, 128-token blocks, two
# processes) on the machines its records come from (the Xeon's with AdamW for every parameter, the default before
# Muon). A run of that recipe far below the slowest trained fewer tokens in its budget
# than the recipe was chosen for, and the end of the run says so.
REFERENCE_TOKENS_PER_SECOND = {"2-core AMD EPYC (AVX2)": 14_700, "2-core Intel Xeon (AMX)": 31_200}
# The processes of the runs REFERENCE_TOKENS_PER_SECOND was measured on (--num_processes auto on 2 cores).
REFERENCE_PROCESSES = 2
# Accuracy above the unigram answer's below which a run is said to be still on the unigram plateau.
PLATEAU_MARGIN = 0.03
# The sentences the saved folder's fill-mask predictions are shown on.
FILL_MASK_EXAMPLES = (
    "The capital of France is {mask}.",
    "He was born in {mask} and studied at the university.",
    "The {mask} of the river is in the mountains.",
)


def unigram_metrics(trainer: Trainer) -> dict[str, float]:
    """The unigram plateau's scores on the evaluation blocks (`baselines.unigram_answer`): what the run's accuracy
    and perplexity are read against. Empty for a streamed evaluation set."""
    dataset = cast("datasets.Dataset | datasets.IterableDataset | None", trainer.eval_dataset)  # build_trainer's
    if dataset is None or not hasattr(dataset, "__len__") or "input_ids" not in dataset.column_names:
        return {}
    tokenizer = trainer.processing_class
    assert isinstance(tokenizer, PreTrainedTokenizerBase), "build_trainer hands the Trainer the tokenizer"
    accuracy, perplexity, token = unigram_answer(dataset["input_ids"], tokenizer.all_special_ids)
    return {"eval_unigram_accuracy": accuracy, "eval_unigram_perplexity": perplexity, "eval_unigram_token": token}


def summarise_run(
    metrics: dict[str, float],
    training_args: PretrainingArguments,
    model_args: ModelArguments,
    tokenizer: PreTrainedTokenizerBase,
) -> list[str]:
    """The lines that end a run: its scores beside the unigram answer's, and a hint when the model is still on the
    unigram plateau or when this machine trained far fewer tokens a second than the default recipe expects."""
    discriminator = metrics.get("eval_discriminator_accuracy")
    unigram = metrics.get("eval_unigram_accuracy")
    baseline = (
        ""
        if unigram is None
        else (
            f" (the unigram answer {tokenizer.convert_ids_to_tokens(int(metrics['eval_unigram_token']))!r} everywhere: "
            f"{unigram:.4f}, perplexity {metrics['eval_unigram_perplexity']:.0f})"
        )
    )
    lines = [
        f"eval_accuracy {metrics['eval_accuracy']:.4f}  perplexity {metrics['eval_perplexity']:.2f}{baseline}  "
        + (f"discriminator_accuracy {discriminator:.4f}  " if discriminator is not None else "")
        + f"train {metrics['train_wall_time_seconds']:.0f}s  {metrics['train_tokens']:,} tokens  "
        + (
            f"({metrics['train_tokens_total']:,} since the run's start)  "
            if metrics.get("train_tokens_total", metrics["train_tokens"]) != metrics["train_tokens"]
            else ""
        )
        + f"{metrics['train_tokens_per_second']:.0f} tokens/s  -> {training_args.output_dir}"
    ]
    if unigram is not None and metrics["eval_accuracy"] < unigram + PLATEAU_MARGIN:
        lines.append(
            "The model is still on the unigram plateau: it answers the commonest tokens whatever the context. A BERT "
            "leaves it once it learns to read the words beside each mask, after a few thousand steps: train longer "
            "(--max_train_minutes) or on a faster machine."
        )
    slowest = min(REFERENCE_TOKENS_PER_SECOND.values())
    if runs_the_recipe(metrics, training_args, model_args) and metrics["train_tokens_per_second"] < 0.75 * slowest:
        measured = ", ".join(
            f"{speed / 1000:.1f}k on a {machine}" for machine, speed in REFERENCE_TOKENS_PER_SECOND.items()
        )
        lines.append(
            f"This machine trained {metrics['train_tokens_per_second'] / 1000:.1f}k tokens/s; the default recipe "
            f"was measured at {measured}. Fewer tokens in the same minutes give a weaker model: a slower CPU or "
            "other programs running are the likely cause (close them, or raise --max_train_minutes)."
        )
    return lines


def _default(arguments: Any, name: str) -> Any:
    """The default of the dataclass `arguments`' field `name` (its flag's default)."""
    return arguments.__dataclass_fields__[name].default


def runs_the_recipe(metrics: dict[str, float], training_args: PretrainingArguments, model_args: ModelArguments) -> bool:
    """Whether the run is the default recipe whose speed REFERENCE_TOKENS_PER_SECOND holds: a new model of the
    default size and objective, the default blocks and batch on as many processes, ended by a time budget at least
    the default one (a shorter run's tokens a second carry more of its start-up). Another run's speed is not to be
    read against it (shorter blocks, smaller batches or a few steps train fewer tokens a second on any machine)."""
    return (
        model_args.model_size == _default(ModelArguments, "model_size")
        and model_args.config_name is None
        and model_args.model_name_or_path is None
        and model_args.objective == _default(ModelArguments, "objective")
        and metrics.get("max_seq_length") == _default(DataArguments, "max_seq_length")
        and training_args.per_device_train_batch_size == _default(PretrainingArguments, "per_device_train_batch_size")
        and metrics.get("world_size") == REFERENCE_PROCESSES
        and training_args.max_steps == BUDGET_STEP_CAP  # only the budget ends the run
        and metrics.get("train_budget_minutes", 0) >= DEFAULT_BUDGET_MINUTES
    )


def _output_model(trainer: Trainer) -> PreTrainedModel:
    """The model a finished run's folder holds: the Trainer's, or the discriminator of an ELECTRA pair."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    return model.discriminator if isinstance(model, ElectraPretrainingModel) else model


# The evaluation results a model card shows (the discriminator's only in an ELECTRA run).
_CARD_RESULTS = ("eval_loss", "eval_accuracy", "eval_perplexity", "eval_discriminator_accuracy")


def _position_start(config) -> str:
    """How the position embeddings started, in words for the model card."""
    if config.sinusoidal_position_std is None:
        return f"N(0, {config.initializer_range:g}) (BERT's init)"
    return f"sinusoid table scaled to std {config.sinusoidal_position_std:g}"


def card_info(
    trainer: Trainer, metrics: dict[str, float], model_args: ModelArguments, data_args: DataArguments
) -> dict[str, Any]:
    """What the model card of a finished run says (`cards.write_model_card`): its data, size, hyperparameters,
    hardware, time, tokens and evaluation results."""
    args = trainer.args
    model = _output_model(trainer)
    hyperparameters = {
        "objective": model_args.objective,
        "max_seq_length": data_args.max_seq_length,
        "mlm_probability": data_args.mlm_probability,
        "whole_word_mask": data_args.whole_word_mask,
        "learning_rate": args.learning_rate,
        "effective_batch_size": metrics["train_effective_batch_size"],
        "max_steps": trainer.state.global_step,
        "warmup_steps": args.warmup_steps,
        "weight_decay": args.weight_decay,
        "seed": args.seed,
        "vocab_size": model.config.vocab_size,
        "position_embeddings_start": _position_start(model.config),
    }
    if model_args.objective == "electra":
        hyperparameters.update(
            generator_width_fraction=model_args.generator_width_fraction,
            discriminator_weight=model_args.discriminator_weight,
            mlm_start_fraction=model_args.mlm_start_fraction,
        )
    return {
        "model_name": Path(output_dir_of(args)).resolve().name,
        "datasets": card_datasets(data_args),
        # several --task_text tasks of one dataset, or a text with the tasks' added, have no one config
        "dataset_config": None
        if len(data_args.task_text or ()) > 1 or adds_task_text(data_args)
        else data_args.dataset_config_name,
        "dataset_description": _describe_data(trainer, model_args, data_args),
        "model_size": None if model_args.config_name or model_args.model_name_or_path else model_args.model_size,
        "base_model": model_args.model_name_or_path,
        "task_text": data_args.task_text,
        "num_parameters": model.num_parameters(),
        "hyperparameters": hyperparameters,
        "hardware": describe_hardware(),
        "wall_time_seconds": metrics["train_wall_time_seconds"],
        "train_tokens": metrics["train_tokens"],
        "results": {k: metrics[k] for k in _CARD_RESULTS if k in metrics},
    }


def card_datasets(data_args: DataArguments) -> list[str]:
    """The model card's `datasets`: the named text's (a Hub id; a local file is no dataset), then the tasks'."""
    named = (
        [data_args.dataset_name]
        if data_args.dataset_name and (adds_task_text(data_args) or not data_args.task_text)
        else []
    )
    return list(dict.fromkeys(named + task_text_datasets(data_args)))


def _describe_data(trainer: Trainer, model_args: ModelArguments, data_args: DataArguments) -> str:
    """One sentence on what the model saw: source (a Hub id, or a local file's or folder's name, never its path),
    example shape, and split sizes where known."""
    if data_args.train_file:
        source = source_name(data_args.train_file, "dataset")
    else:
        named = source_name(data_args.dataset_name, "dataset") if data_args.dataset_name else None
        source = " / ".join(filter(None, [named, data_args.dataset_config_name]))
    if adds_task_text(data_args):
        source += f"` and the train text of `{', '.join(data_args.task_text or ())}"
    shape = (
        "sentence pairs for MLM + next-sentence prediction"
        if model_args.objective == "mlm_nsp"
        else f"texts concatenated and packed into {data_args.max_seq_length}-token blocks"
    )
    sizes = ""
    if not data_args.streaming:  # then both splits are a datasets.Dataset, which has a length
        train, held_out = cast(Sized, trainer.train_dataset), cast(Sized, trainer.eval_dataset)
        sizes = f" ({len(train):,} training and {len(held_out):,} validation examples)"
    return f"Raw text from `{source}`, {shape}{sizes}."


def show_fill_mask(model_dir: str | Path, top_k: int = 3) -> list[str]:
    """Print the top-k fill-mask predictions of the saved model on a few example sentences; returns the lines.

    Loads the folder as a user would (`pipeline("fill-mask", model=model_dir)`), so it also checks the output.
    """
    from .inference import fill_mask, load_pipeline, quiet_loading_report

    with quiet_loading_report():  # an MLM + NSP folder under the fill-mask head: the NSP head and pooler are left out
        fill = load_pipeline("fill-mask", model_dir)
    lines = []
    assert fill.tokenizer is not None, "load_pipeline always hands the pipeline a tokenizer"
    for template in FILL_MASK_EXAMPLES:
        text = template.format(mask=fill.tokenizer.mask_token)
        (guesses,) = fill_mask(fill, text, top_k=top_k)
        lines.append(f"{text}  ->  " + ", ".join(f"{g['token_str']} ({g['score']:.2f})" for g in guesses))
    print("Fill-mask predictions:\n  " + "\n  ".join(lines))
    return lines
