"""The arguments of `bertscratch finetune` (`hf_bertscratch.finetuning`): which checkpoint (`ModelArguments`), which
task and data (`DataArguments`, from `hf_bertscratch.tasks.data`) and how to train (`FinetuneTrainingArguments`),
each checked and completed as it is made, so a bad value fails as the command line is parsed. The parser makes them in
that order and hands the training arguments the data arguments (`arguments.ArgumentParser`): the task they name gives
`--metric_for_best_model auto` its metric.

What the arguments point to outside themselves (the model folder, the output folder, the Hub repository, the checkpoint
to resume) is checked by `resolve_paths`. The task's defaults that depend on the model's width (the head's pooling and
start, the learning rate, the epochs: `tasks.finetune_defaults`) are filled in once, from the model's config, by
`choose_task_defaults`, so that every later stage reads concrete values; what needs the data is checked where it is
loaded.
"""

from __future__ import annotations

import logging
from dataclasses import InitVar, dataclass, field

from transformers import PretrainedConfig, TrainingArguments

from hf_bertscratch_base import did_you_mean
from hf_bertscratch_base.model_config import check_threshold, describe_grid
from hf_bertscratch_base.model_reference import check_source_flag
from hf_bertscratch_base.task_table import MULTI_LABEL_THRESHOLD

from .arguments import ArgumentParser, described_values, parse_args_or_json
from .configuration_bertscratch import CLASSIFIER_POOLINGS
from .hub import check_training_push
from .model_reference import check_model_reference
from .run_folder import GuardedTrainingArguments, check_output_dir, resolve_checkpoint
from .tasks import SEQUENCE_SHAPES, finetune_defaults, recipe_name
from .tasks.data import DataArguments, chooses_on_test_split, fit_length_to_model, test_split_chosen_by

AUTO = "auto"  # a setting chosen for the task (and model) at hand
AUTO_METRIC = AUTO  # --metric_for_best_model's default: the task's main metric
# --multi_label_threshold's values that choose it on the eval split: one threshold for every label, or one per label.
AUTO_PER_LABEL = "auto-per-label"
CHOSEN_THRESHOLDS = (AUTO, AUTO_PER_LABEL)
SEGMENT_STARTS = ("keep", "first")
HEAD_INITS = ("random", "probe")
# --classifier_pooling: auto or a pooling of the config's CLASSIFIER_POOLINGS, and what the head reads under each.
POOLING_CHOICES = (AUTO, *CLASSIFIER_POOLINGS)
POOLING_READS = {
    AUTO: "the task shape's default, tasks.SHAPE_DEFAULTS",
    "cls": "BERT's pooled [CLS]",
    "mean": "the mean of the last hidden states",
    "max": "their elementwise maximum",
    "mean-max": "both side by side",
    "segments": "for a sentence pair, each text's own mean, read as [u, v, |u - v|, u * v]",
}

logger = logging.getLogger(__name__)
MULTI_LABEL_SHAPE = "multi-label-classification"  # the task shape whose labels --multi_label_threshold decides

# Task shape -> the metrics its evaluation reports beside the loss (`compute_metrics` of `tasks.shapes`), which
# --metric_for_best_model may name; token classification also reports `<TYPE>_f1` for each entity type of the data.
_REGRESSION_METRICS = ("pearson", "spearmanr", "combined_score", "mse", "prediction_std")  # `RegressionMetrics`
SHAPE_METRICS = {
    "classification": ("accuracy", "f1", "matthews_correlation", "top_class_share"),
    "multi-label-classification": ("micro_f1", "macro_f1", "subset_accuracy", "top_set_share"),  # MultiLabelMetrics
    "regression": _REGRESSION_METRICS,
    "token-classification": ("overall_precision", "overall_recall", "overall_f1", "overall_accuracy"),
    "question-answering": ("exact_match", "f1"),
    "embedding": _REGRESSION_METRICS,  # an embedding task's cosines are scored as a regressor's scores
}


def check_metric_for_best_model(metric: str, shape: str) -> None:
    """Refuse a --metric_for_best_model that the task's evaluation does not report (with or without `eval_`), naming
    those it does: transformers finds out only at the first evaluation, after an epoch of training."""
    name = metric.removeprefix("eval_")
    if name == "loss" or name in SHAPE_METRICS[shape] or (shape == "token-classification" and name.endswith("_f1")):
        return
    known = ["loss", *SHAPE_METRICS[shape]] + (["<TYPE>_f1"] if shape == "token-classification" else [])
    raise ValueError(
        f"--metric_for_best_model {metric!r} is not a metric a {shape} task reports{did_you_mean(name, known) or '.'} "
        f"Expected one of {known} (or {AUTO_METRIC!r}: the task's main metric)."
    )


def check_multi_label_threshold(value: object, data_args: DataArguments | None) -> str:
    """--multi_label_threshold as given: "auto", "auto-per-label", or a number strictly between 0 and 1 (a .json
    file's number too) as its text; refused for a task of another shape (`data_args`' task, when known), where it
    would decide nothing."""
    given = str(value)
    if given not in CHOSEN_THRESHOLDS:
        try:
            threshold = float(given)
        except ValueError:
            raise ValueError(
                f"--multi_label_threshold {given!r} is neither a number between 0 and 1 nor {AUTO!r} or "
                f"{AUTO_PER_LABEL!r} (chosen on the eval split)."
            ) from None
        check_threshold(threshold, "--multi_label_threshold")  # as classify's --threshold
    shape = data_args.task_spec.shape if data_args is not None else MULTI_LABEL_SHAPE
    if shape != MULTI_LABEL_SHAPE:
        raise ValueError(
            f"--multi_label_threshold {given!r} decides a {MULTI_LABEL_SHAPE} task's labels, but this is a {shape} "
            f"task: add --task_type {MULTI_LABEL_SHAPE}, or leave --multi_label_threshold out."
        )
    if given in CHOSEN_THRESHOLDS and data_args is not None and chooses_on_test_split(data_args):
        raise ValueError(
            f"--multi_label_threshold {given} would be chosen on the test split ({test_split_chosen_by(data_args)}): "
            "give a number, or choose it on a validation split."
        )
    return given


def check_evaluation_needed(eval_strategy: str, save_strategy: str, load_best_model_at_end: bool) -> None:
    """Refuse, naming both flags, what needs evaluations beside `--eval_strategy no`: `--save_strategy best` (which
    would save no checkpoint, silently), or checkpoints with `--load_best_model_at_end`, which is on by default here
    (transformers' own error names that flag as if it had been given)."""
    if eval_strategy != "no":
        return
    save_strategy = getattr(save_strategy, "value", save_strategy)  # "epoch", not SaveStrategy.EPOCH, in the line
    if save_strategy == "best":
        raise ValueError(
            "--save_strategy best saves a checkpoint where an evaluation scores best, and --eval_strategy no "
            "evaluates none: evaluate (--eval_strategy epoch or steps), or save on a schedule (--save_strategy epoch "
            "or steps)."
        )
    if load_best_model_at_end and save_strategy != "no":
        raise ValueError(
            f"--load_best_model_at_end (on by default) reloads the checkpoint an evaluation scored best, and "
            f"--eval_strategy no evaluates none: pass --load_best_model_at_end false to keep the --save_strategy "
            f"{save_strategy} checkpoints and end with the last model, or evaluate (--eval_strategy {save_strategy})."
        )


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how to load it."""

    _argument_group_name = "model"  # its flags' heading in --help

    model_name_or_path: str = field(
        metadata={
            "help": "A pretrained checkpoint, a folder or a Hub id: BertScratch's (pretrain.py, save_pretrained), or "
            "one of transformers' BERT family (model_type bert: BertModel, BertForMaskedLM, a sentence-transformers "
            "folder, bert-base-uncased), converted into BertScratch on load with the same weights."
        }
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "Tokenizer folder or Hub id, if not the one saved with the model."}
    )
    init_from_scratch: bool = field(
        default=False,
        metadata={
            "help": "Use only the checkpoint's config and tokenizer and start from random weights: the "
            "same-architecture baseline with no pretraining."
        },
    )
    dropout: float = field(
        default=0.1,
        metadata={
            "help": "Hidden and attention dropout while fine-tuning (BERT's 0.1; pretraining here runs without "
            "dropout, and the checkpoint's config records that). -1 keeps the checkpoint's values."
        },
    )
    classifier_pooling: str = field(
        default=AUTO,
        metadata={
            "help": "What a classification or regression head reads: "
            f"{described_values(POOLING_READS, POOLING_CHOICES)}.",
            "choices": list(POOLING_CHOICES),
        },
    )
    head_init: str = field(
        default=AUTO,
        metadata={
            "help": "How a new classification or regression head starts: random, or probe (fitted to the frozen "
            "pretrained features of the training examples first, LP-FT: Kumar et al. 2022); auto: the task's "
            "default (tasks.SHAPE_DEFAULTS).",
            "choices": [AUTO, *HEAD_INITS],
        },
    )
    segment_embeddings: str = field(
        default="keep",
        metadata={
            "help": "Where the second text's segment (token type 1) embedding starts: keep (the checkpoint's) or "
            "first (a copy of type 0's). Masked-LM pretraining never trains type 1; `bertscratch pretrain` saves "
            "such a model with type 1 copied from type 0 already, so first matters for other checkpoints only.",
            "choices": list(SEGMENT_STARTS),
        },
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Where Hub downloads are cached."})

    def __post_init__(self) -> None:
        check_source_flag("--tokenizer_name", self.tokenizer_name)
        if self.dropout != -1 and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1) or -1 (the checkpoint's), got {self.dropout}.")


@dataclass
class FinetuneTrainingArguments(GuardedTrainingArguments):
    """`TrainingArguments` with defaults for fine-tuning (per-epoch eval, the best checkpoint kept by the task's main
    metric, length grouping) and the output-folder guard (`hf_bertscratch.run_folder`)."""

    _argument_group_name = "training"  # its flags' heading in --help

    def __post_init__(self, data_args: DataArguments | None = None) -> None:
        if self.multi_label_threshold is not None:
            self.multi_label_threshold = check_multi_label_threshold(self.multi_label_threshold, data_args)
        if self.metric_for_best_model == AUTO_METRIC and data_args is not None:
            # The task's main metric; every main metric is higher-is-better.
            self.metric_for_best_model, self.greater_is_better = data_args.task_spec.main_metric, True
        elif self.metric_for_best_model is not None and data_args is not None:
            check_metric_for_best_model(self.metric_for_best_model, data_args.task_spec.shape)
        # Checkpoints where the evaluations are, unless told otherwise: the best one is kept by its score.
        if self.save_strategy is None:
            self.save_strategy = self.eval_strategy
        if self.save_steps is None:
            steps = self.eval_steps or self.logging_steps  # eval_steps unset or 0: transformers' logging_steps
            self.save_steps = steps if self.save_strategy == "steps" and steps > 0 else TrainingArguments.save_steps
        check_evaluation_needed(self.eval_strategy, self.save_strategy, self.load_best_model_at_end)
        super().__post_init__()

    # fp32 by default, unlike pretraining: the Trainer evaluates under the training's autocast too, and the scores a
    # run reports should be those of the saved model as a pipeline or `bertscratch classify` runs it (fp32).
    precision: str = field(
        default="fp32",
        metadata={
            "help": "fp32 (default: the scores are those the saved model gives at inference), bf16 or fp16 "
            "autocast for training and evaluation, or auto (bf16 on a GPU that supports it and on a CPU with native "
            "bf16, AMX or AVX512_BF16; fp32 elsewhere). --bf16 or --fp16, if given, decide."
        },
    )
    eval_strategy: str = field(default="epoch", metadata={"help": "When to evaluate: 'no', 'steps' or 'epoch'."})
    save_strategy: str | None = field(  # type: ignore[assignment]
        default=None,
        metadata={
            "help": "When to checkpoint: 'no', 'steps', 'epoch' or 'best' (default: as --eval_strategy, so the best "
            "checkpoint is kept by its evaluation)."
        },
    )
    save_steps: float | None = field(  # type: ignore[assignment]
        default=None,
        metadata={
            "help": "With --save_strategy steps: checkpoint every this many steps, or this fraction of the steps if "
            "< 1 (default: --eval_steps)."
        },
    )
    load_best_model_at_end: bool = field(default=True, metadata={"help": "Reload the best checkpoint at the end."})
    metric_for_best_model: str | None = field(
        default=AUTO_METRIC,
        metadata={
            "help": f"Metric that picks the best checkpoint; {AUTO_METRIC!r}: the task's main metric (accuracy, "
            "Matthews for CoLA, F1 for MRPC, Spearman for STS-B, entity F1 for NER, F1 for QA)."
        },
    )
    multi_label_threshold: str | None = field(
        default=None,
        metadata={
            "help": "A multi-label-classification task's: the sigmoid above which a label is given, in the eval and "
            f"test scores and the predictions: a number between 0 and 1, or {AUTO!r}: the one of {describe_grid()} "
            "that gives the chosen model the best eval micro F1 (macro F1 where --metric_for_best_model is "
            f"macro_f1; the checkpoints themselves are compared at {MULTI_LABEL_THRESHOLD:g}), or {AUTO_PER_LABEL!r}: "
            "one of them per label, by the same metric (a label that no eval example holds keeps auto's); never "
            f"chosen on the test split (refused where the eval split is the test split). None: {MULTI_LABEL_THRESHOLD:g}. "
            "Recorded in the model's config, where `bertscratch classify` reads it."
        },
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Checkpoints kept (the best one is always kept)."}
    )
    train_sampling_strategy: str = field(
        default="group_by_length",
        metadata={
            "help": "Training sampler: group_by_length (default: batches of similar length, less padding), random, "
            "sequential, batch_rebalance.",
            "choices": ["random", "sequential", "group_by_length", "batch_rebalance"],
        },
    )
    # None until finetuning fills in the task shape's default: wider than TrainingArguments' float on purpose.
    learning_rate: float | None = field(  # type: ignore[assignment]
        default=None,
        metadata={"help": "Peak AdamW learning rate (default: the task shape's, by model size; tasks.SHAPE_DEFAULTS)."},
    )
    num_train_epochs: float | None = field(  # type: ignore[assignment]
        default=None, metadata={"help": "Passes over the training set (default: the task shape's)."}
    )
    per_device_train_batch_size: int = field(default=32, metadata={"help": "Training examples per step and device."})
    per_device_eval_batch_size: int = field(default=64, metadata={"help": "Evaluation examples per step and device."})
    warmup_steps: float = field(
        default=0.1,
        metadata={"help": "Linear warm-up: a fraction in [0, 1) of the training steps, or a number of steps."},
    )
    logging_steps: float = field(
        default=0.02, metadata={"help": "Log the loss every this many steps, or this fraction of the steps if < 1."}
    )
    # Not a flag: the data arguments, made before these and handed over by the parser; the task they name gives
    # --metric_for_best_model auto its metric (made without them, it stays auto).
    data_args: InitVar = None


def resolve_paths(model_args: ModelArguments, training_args: FinetuneTrainingArguments) -> str | None:
    """Check what the arguments point to before the data loads: the model (a folder or a Hub id, of the family:
    transformers' BERT is converted now, `convert.family_checkpoint`), an output folder that holds no finished run,
    the Hub repository and token of --push_to_hub; returns the checkpoint to resume from (None: start afresh)."""
    from .convert import family_checkpoint

    model_args.model_name_or_path = check_model_reference(model_args.model_name_or_path)
    check_output_dir(training_args)
    check_training_push(training_args)  # a bad --hub_model_id or a missing token fails now, not after training
    family_checkpoint(model_args.model_name_or_path)  # a checkpoint BertScratch cannot hold fails in one line
    return resolve_checkpoint(training_args)


def choose_task_defaults(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: FinetuneTrainingArguments,
    config: PretrainedConfig,
) -> None:
    """Fill what the command line left to the task for the model of `config` (its width picks the recipe:
    `tasks.finetune_defaults`): --classifier_pooling and --head_init "auto", the learning rate and the epochs; log
    them with what `DataArguments` chose (`chosen_defaults`) and why (`tasks.recipe_name`). A max_seq_length the
    task chose is cut to the model's position embeddings (`fit_length_to_model`); a --max_seq_length beyond them is
    refused."""
    fit_length_to_model(data_args, getattr(config, "max_position_embeddings", None))
    task = data_args.task_spec
    defaults = finetune_defaults(task, data_args.task, config.hidden_size)
    chosen = list(data_args.chosen_defaults)  # max_seq_length, truncation, ...
    if model_args.head_init == "probe" and task.shape == "multi-label-classification":
        raise ValueError(
            "--head_init probe fits a new head to one class per example, but a multi-label-classification task's "
            "examples have any number of labels: leave --head_init out (its head starts random)."
        )
    for name in ("classifier_pooling", "head_init"):
        if getattr(model_args, name) == AUTO:
            setattr(model_args, name, getattr(defaults, name))
            if task.shape in SEQUENCE_SHAPES:  # the settings of a sequence head (the log's)
                chosen.append(f"{name} {getattr(model_args, name)}")
    if training_args.learning_rate is None:
        training_args.learning_rate = defaults.learning_rate_for(config.hidden_size)
        chosen.append(f"learning_rate {training_args.learning_rate:g}")
    if training_args.num_train_epochs is None:
        training_args.num_train_epochs = defaults.epochs
        chosen.append(f"num_train_epochs {defaults.epochs:g}")
    if chosen:
        logger.info("Task defaults, by %s: %s.", recipe_name(config.hidden_size), ", ".join(chosen))


# What `--help` lists: the flags a first run needs (every other flag: --help_all).
FIRST_RUN_FLAGS = (
    *("model_name_or_path", "init_from_scratch"),
    *("task", "task_type", "data_dir", "train_file", "validation_file", "test_file", "class_names"),
    *("text_column", "text_pair_column", "label_column", "label_separator", "multi_label_threshold"),
    *("tokens_column", "tags_column"),
    *("question_column", "context_column", "answers_column"),
    *("max_seq_length", "max_train_samples", "max_eval_samples"),
    *("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "num_train_epochs", "max_steps"),
    *("learning_rate", "per_device_train_batch_size", "seed", "report_to", "push_to_hub", "hub_model_id"),
)


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch finetune`: its three dataclasses, `--help` listing FIRST_RUN_FLAGS."""
    return ArgumentParser(
        (ModelArguments, DataArguments, FinetuneTrainingArguments),
        first_run=FIRST_RUN_FLAGS,
        description="Fine-tune a checkpoint on a task of the table (--task) or on your own data (--train_file).",
    )


def parse_args(argv: list[str] | None) -> tuple[ModelArguments, DataArguments, FinetuneTrainingArguments]:
    """Parse the three dataclasses from argv, or from a single .json file argument (each checked and completed as it
    is made: --metric_for_best_model "auto" is the task's main metric)."""
    model_args, data_args, training_args = parse_args_or_json(build_parser(), argv)
    return model_args, data_args, training_args
