"""The arguments of `bertscratch finetune` (`hf_bertscratch.finetuning`): which checkpoint (`ModelArguments`), which
task and data (`DataArguments`) and how to train (`FinetuneTrainingArguments`), each checked as it is made, so a bad
value fails as the command line is parsed; `parse_args` reads them and resolves what one of them needs another for.

What the arguments point to outside themselves (the model folder, the output folder, the Hub repository, the checkpoint
to resume) is checked by `resolve_paths`; what needs the data or the model is checked where those are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .arguments import ArgumentParser, parse_args_or_json
from .configuration_bertscratch import CLASSIFIER_POOLINGS
from .data import check_max_samples
from .hub import check_training_push
from .model_reference import check_model_reference
from .run_folder import GuardedTrainingArguments, check_output_dir, resolve_checkpoint
from .tasks import SHAPE_COLUMNS, SHAPES, TASKS, TaskOverrides, TaskSpec, finetune_defaults, resolve_task
from .tasks.shapes import TRUNCATION_STRATEGIES

AUTO = "auto"  # a setting chosen for the task (and model) at hand
AUTO_METRIC = AUTO  # --metric_for_best_model's default: the task's main metric
SEGMENT_STARTS = ("keep", "first")
HEAD_INITS = ("random", "probe")


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how to load it."""

    _argument_group_name = "model"  # its flags' heading in --help

    model_name_or_path: str = field(
        metadata={"help": "A pretrained checkpoint: a folder written by pretrain.py/save_pretrained, or a Hub id."}
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
            "help": "What a classification or regression head reads: cls (BERT's pooled [CLS]), mean (the mean of "
            "the last hidden states) or auto (the task shape's default, tasks.SHAPE_DEFAULTS).",
            "choices": [AUTO, *CLASSIFIER_POOLINGS],
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
        if self.dropout != -1 and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1) or -1 (the checkpoint's), got {self.dropout}.")


@dataclass
class DataArguments:
    """Which task and data to train and evaluate on, and how to turn examples into model inputs."""

    _argument_group_name = "data"  # its flags' heading in --help

    task: str | None = field(
        default=None, metadata={"help": f"A task from the table: {', '.join(TASKS)}. Or give a dataset below."}
    )
    task_type: str | None = field(
        default=None,
        metadata={
            "help": "The shape of your own data's task (default: classification, or the --task's shape).",
            "choices": list(SHAPES),
        },
    )
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset id (instead of --task)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's configuration."})
    train_file: str | None = field(
        default=None,
        metadata={"help": "A csv/tsv/json/jsonl/parquet training file (question answering: also SQuAD's nested json)."},
    )
    validation_file: str | None = field(default=None, metadata={"help": "An evaluation file, same formats."})
    test_file: str | None = field(
        default=None, metadata={"help": "A test file, scored once with the chosen model at the end (optional)."}
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with local copies of the table's datasets (imdb/, sst2/, glue/, conll2003/ as in "
            "../shared/data); default $BERTSCRATCH_DATA_DIR; the Hub otherwise."
        },
    )
    train_split: str | None = field(default=None, metadata={"help": "Split to train on (default: the task's/train)."})
    eval_split: str | None = field(
        default=None, metadata={"help": "Split to evaluate on (default: the task's, else validation, else test)."}
    )
    test_split: str | None = field(
        default=None, metadata={"help": "Split scored once at the end with the chosen model (default: the task's)."}
    )
    text_column: str | None = field(default=None, metadata={"help": "Classification/regression: the text column."})
    text_pair_column: str | None = field(
        default=None, metadata={"help": "Classification/regression: the second text of a sentence pair."}
    )
    label_column: str | None = field(
        default=None, metadata={"help": "Classification: class ids or names; regression: numbers (default: label)."}
    )
    tokens_column: str | None = field(
        default=None, metadata={"help": "Token classification: a column of word lists (default: tokens)."}
    )
    tags_column: str | None = field(
        default=None, metadata={"help": "Token classification: one tag per word, e.g. IOB2 (default: ner_tags)."}
    )
    question_column: str | None = field(default=None, metadata={"help": "Question answering (default: question)."})
    context_column: str | None = field(default=None, metadata={"help": "Question answering (default: context)."})
    answers_column: str | None = field(
        default=None,
        metadata={"help": 'Question answering: {"text": [...], "answer_start": [...]} per row (default: answers).'},
    )
    id_column: str | None = field(default=None, metadata={"help": "Question answering: example ids (default: id)."})
    class_names: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated class (or tag) names in id order. Integer labels must lie in [0, #names); string "
            "labels must be among the names. Default: the task's names, else the sorted labels of the train split."
        },
    )
    embedding_objective: str = field(
        default="auto",
        metadata={
            "help": "Embedding tasks: cosine (pairs with similarity scores), in-batch (matching pairs, in-batch "
            "negatives), simcse (single texts, each against itself under dropout) or auto (cosine for scores, "
            "in-batch for 0/1 labels or unlabelled pairs).",
            "choices": ["auto", "cosine", "in-batch", "simcse"],
        },
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "Tokens per example after truncation, incl. [CLS]/[SEP] (default: the task's; 128, question "
            "answering 384, IMDB 256, CoLA and SST-2 64)."
        },
    )
    truncation: str = field(
        default=AUTO,
        metadata={
            "help": "How to cut single texts longer than max_seq_length: head (keep the start), tail (keep the end), "
            "head+tail (keep --head_tokens from the start and the rest from the end; Sun et al. 2019), or auto (the "
            "task's: head+tail for IMDB, else head). The saved classifier cuts longer inputs the same way.",
            "choices": [AUTO, *TRUNCATION_STRATEGIES],
        },
    )
    head_tokens: int = field(
        default=128,
        metadata={"help": "With --truncation head+tail: text tokens kept from the start (Sun et al.: 128)."},
    )
    doc_stride: int = field(
        default=128,
        metadata={"help": "Question answering: tokens shared by consecutive windows of a long context."},
    )
    max_answer_length: int = field(default=30, metadata={"help": "Question answering: longest answer, in tokens."})
    n_best_size: int = field(
        default=20, metadata={"help": "Question answering: start and end candidates searched per window."}
    )
    max_train_samples: int | None = field(
        default=None,
        metadata={"help": "Train on this many training examples, drawn at random with --seed (default: all)."},
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Evaluate on this many evaluation examples, and as many test examples, drawn at random with --seed "
            "(default: all)."
        },
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenisation."})

    def __post_init__(self) -> None:
        # A bad flag fails as it is parsed; max_seq_length gets the task's default. The task the flags name, from the
        # table, is kept (not a field: neither a flag nor part of the arguments' dict).
        self.task_spec: TaskSpec = check_data_arguments(self)


@dataclass
class FinetuneTrainingArguments(GuardedTrainingArguments):
    """`TrainingArguments` with defaults for fine-tuning (per-epoch eval, the best checkpoint kept by the task's main
    metric, length grouping) and the output-folder guard (`hf_bertscratch.run_folder`)."""

    _argument_group_name = "training"  # its flags' heading in --help

    eval_strategy: str = field(default="epoch", metadata={"help": "When to evaluate: 'no', 'steps' or 'epoch'."})
    save_strategy: str = field(default="epoch", metadata={"help": "When to checkpoint: must match eval_strategy."})
    load_best_model_at_end: bool = field(default=True, metadata={"help": "Reload the best checkpoint at the end."})
    metric_for_best_model: str | None = field(
        default=AUTO_METRIC,
        metadata={
            "help": f"Metric that picks the best checkpoint; {AUTO_METRIC!r}: the task's main metric (accuracy, "
            "Matthews for CoLA, F1 for MRPC, Spearman for STS-B, entity F1 for NER, F1 for QA)."
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
    learning_rate: float | None = field(
        default=None,
        metadata={"help": "Peak AdamW learning rate (default: the task shape's, by model size; tasks.SHAPE_DEFAULTS)."},
    )
    num_train_epochs: float | None = field(
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


def task_overrides(args: DataArguments) -> TaskOverrides:
    """The command line's task settings: the named task, the shape, splits, columns and class names."""
    columns = {
        role: getattr(args, f"{role}_column")
        for role in {r for roles in SHAPE_COLUMNS.values() for r in roles}
        if getattr(args, f"{role}_column", None)
    }
    names = [n.strip() for n in args.class_names.split(",")] if args.class_names else None
    return TaskOverrides(
        task=args.task,
        task_type=args.task_type,
        train_split=args.train_split,
        eval_split=args.eval_split,
        test_split=args.test_split,
        columns=columns,
        label_names=names,
    )


def check_data_arguments(args: DataArguments) -> TaskSpec:
    """Every check of the data arguments that needs no data (`DataArguments` runs them when made), filling
    `max_seq_length` with the task's default when unset; returns the resolved task."""
    if args.task is None and not (args.dataset_name or args.train_file):
        raise ValueError("Give --task, --dataset_name or --train_file.")
    if args.truncation not in (AUTO, *TRUNCATION_STRATEGIES):
        raise ValueError(f"Unknown --truncation {args.truncation!r}; expected one of {[AUTO, *TRUNCATION_STRATEGIES]}.")
    check_max_samples(args)
    task = resolve_task(task_overrides(args))
    defaults = finetune_defaults(task, args.task)
    args.chosen_defaults = []  # what the task's defaults filled in, for the run's log
    if args.max_seq_length is None:
        args.max_seq_length = defaults.max_seq_length
        args.chosen_defaults.append(f"max_seq_length {args.max_seq_length}")
    if args.truncation == AUTO:
        args.truncation = defaults.truncation
        args.chosen_defaults.append(f"truncation {args.truncation}")
    if args.max_seq_length < 3:
        raise ValueError(f"--max_seq_length must be at least 3 ([CLS] text [SEP]), got {args.max_seq_length}.")
    if args.truncation == "head+tail" and not 0 <= args.head_tokens <= args.max_seq_length - 2:
        raise ValueError(f"--head_tokens must be in [0, max_seq_length - 2], got {args.head_tokens}.")
    if task.shape == "question-answering":
        if not 0 < args.doc_stride < args.max_seq_length:
            raise ValueError(f"--doc_stride must be in [1, max_seq_length), got {args.doc_stride}.")
        for name in ("max_answer_length", "n_best_size"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}.")
    return task


def choose_best_metric(training_args: FinetuneTrainingArguments, task: TaskSpec) -> None:
    """Resolve --metric_for_best_model "auto" to the task's main metric (every main metric is higher-is-better)."""
    if training_args.metric_for_best_model == AUTO_METRIC:
        training_args.metric_for_best_model = task.main_metric
        training_args.greater_is_better = True


def resolve_paths(model_args: ModelArguments, training_args: FinetuneTrainingArguments) -> str | None:
    """Check what the arguments point to before anything loads: the model (a folder or a Hub id), an output folder
    that holds no finished run, the Hub repository and token of --push_to_hub; returns the checkpoint to resume from
    (None: start afresh)."""
    model_args.model_name_or_path = check_model_reference(model_args.model_name_or_path)
    check_output_dir(training_args)
    check_training_push(training_args)  # a bad --hub_model_id or a missing token fails now, not after training
    return resolve_checkpoint(training_args)


# What `--help` lists: the flags a first run needs (every other flag: --help_all).
FIRST_RUN_FLAGS = (
    *("model_name_or_path", "init_from_scratch"),
    *("task", "task_type", "data_dir", "train_file", "validation_file", "test_file", "class_names"),
    *("text_column", "text_pair_column", "label_column", "tokens_column", "tags_column"),
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
    """Parse the three dataclasses from argv, or from a single .json file argument (each checked as it is made), and
    resolve --metric_for_best_model "auto" to the task's main metric."""
    parser = build_parser()
    model_args, data_args, training_args = parse_args_or_json(parser, argv)
    choose_best_metric(training_args, data_args.task_spec)
    return model_args, data_args, training_args
