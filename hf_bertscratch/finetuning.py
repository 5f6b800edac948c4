"""Fine-tune a BertScratch (or any BERT-like) checkpoint for text classification with HF `Trainer`.

Tasks come from a table (`TASKS`: imdb, sst2) or from any csv/json/parquet/Hub dataset through
`--text_column/--label_column` (and `--text_pair_column` for sentence pairs). Long texts are cut to
`--max_seq_length` by a chosen strategy (head, tail, or head+tail as in Sun et al. 2019). The run ends by writing
the best model, `all_results.json`, `predictions.csv`, `confusion_matrix.png`, `loss_curve.png` and a model card.

    python scripts/finetune.py --model_name_or_path RUN --task sst2 --data_dir ../shared/data --output_dir OUT
"""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    HfArgumentParser,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    set_seed,
)
from transformers.trainer_utils import PredictionOutput

import hf_bertscratch  # noqa: F401  (registers the bertscratch model type with the Auto classes)

from .arguments import parse_args_or_json
from .data import check_max_samples, load_raw_datasets, sample_examples
from .hardware import describe_hardware
from .hub import check_training_push, push_training_output
from .metrics import ClassificationMetrics
from .run_folder import GuardedTrainingArguments, check_output_dir, finish_run, resolve_checkpoint

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------- task table
@dataclass(frozen=True)
class TaskSpec:
    """Where a classification task's data lives and which columns hold what.

    Attributes:
        dataset_name / dataset_config_name: the Hub dataset (also the key of the local copy under `--data_dir`).
        train_split / eval_split: the split trained on and the split reported (IMDB: test, SST-2: GLUE dev).
        text_column / text_pair_column / label_column: column names (pair column None for single sentences).
        label_names: class names in label-id order.
    """

    dataset_name: str
    dataset_config_name: str | None
    train_split: str
    eval_split: str
    text_column: str
    text_pair_column: str | None
    label_column: str
    label_names: tuple[str, ...]


TASKS: dict[str, TaskSpec] = {
    "imdb": TaskSpec("imdb", None, "train", "test", "text", None, "label", ("neg", "pos")),
    "sst2": TaskSpec("glue", "sst2", "train", "validation", "sentence", None, "label", ("negative", "positive")),
}

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")


# ---------------------------------------------------------------------------------------------------- arguments
@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how to load it."""

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
    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={
            "help": "Allow a classifier checkpoint whose num_labels differs from the task's (its head is "
            "re-initialised). Without it, the mismatch is an error."
        },
    )
    dropout: float = field(
        default=0.1,
        metadata={
            "help": "Hidden and attention dropout while fine-tuning (BERT's 0.1; pretraining here runs without "
            "dropout, and the checkpoint's config records that). -1 keeps the checkpoint's values."
        },
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Where Hub downloads are cached."})


@dataclass
class DataArguments:
    """Which data to train and evaluate on, and how to turn it into model inputs."""

    task: str | None = field(
        default=None, metadata={"help": f"A task from the table: {', '.join(TASKS)}. Or give a dataset below."}
    )
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset id (instead of --task)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's configuration."})
    train_file: str | None = field(default=None, metadata={"help": "A csv/tsv/json/jsonl/parquet training file."})
    validation_file: str | None = field(default=None, metadata={"help": "A csv/tsv/json/jsonl/parquet eval file."})
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with local copies of imdb/ and sst2/ (as in ../shared/data); default "
            "$BERTSCRATCH_DATA_DIR; the Hub otherwise."
        },
    )
    train_split: str | None = field(default=None, metadata={"help": "Split to train on (default: the task's/train)."})
    eval_split: str | None = field(
        default=None, metadata={"help": "Split to evaluate on (default: the task's, else validation, else test)."}
    )
    text_column: str | None = field(default=None, metadata={"help": "Column with the text (default: the task's)."})
    text_pair_column: str | None = field(
        default=None, metadata={"help": "Optional second text column, for sentence-pair tasks."}
    )
    label_column: str | None = field(default=None, metadata={"help": "Column with the labels (default: label)."})
    class_names: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated class names in id order. Integer labels must lie in [0, #names); string labels "
            "must be among the names. Default: the task's names, else the sorted labels of the train split."
        },
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "Tokens per example after truncation, incl. [CLS]/[SEP]."}
    )
    truncation: str = field(
        default="head",
        metadata={
            "help": "How to cut texts longer than max_seq_length: head (keep the start), tail (keep the end), or "
            "head+tail (keep --head_tokens from the start and the rest from the end; Sun et al. 2019).",
            "choices": list(TRUNCATION_STRATEGIES),
        },
    )
    head_tokens: int = field(
        default=128,
        metadata={"help": "With --truncation head+tail: text tokens kept from the start (Sun et al.: 128)."},
    )
    max_train_samples: int | None = field(
        default=None,
        metadata={"help": "Train on this many training texts, drawn at random with --seed (default: all of them)."},
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={"help": "Evaluate on this many evaluation texts, drawn at random with --seed (default: all)."},
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenisation."})


@dataclass
class FinetuneTrainingArguments(GuardedTrainingArguments):
    """`TrainingArguments` with defaults for classification (per-epoch eval, best checkpoint kept, length grouping)
    and the output-folder guard (`hf_bertscratch.run_folder`)."""

    eval_strategy: str = field(default="epoch", metadata={"help": "When to evaluate: 'no', 'steps' or 'epoch'."})
    save_strategy: str = field(default="epoch", metadata={"help": "When to checkpoint: must match eval_strategy."})
    load_best_model_at_end: bool = field(default=True, metadata={"help": "Reload the best checkpoint at the end."})
    metric_for_best_model: str | None = field(default="accuracy", metadata={"help": "Metric that picks the best."})
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
    learning_rate: float = field(default=5e-5, metadata={"help": "Peak AdamW learning rate."})
    warmup_ratio: float = field(default=0.1, metadata={"help": "Fraction of steps for linear warm-up."})


# ------------------------------------------------------------------------------------------------ resolve & check
@dataclass
class ResolvedTask:
    """The task after merging the table entry with command-line overrides."""

    train_split: str
    eval_split: str
    text_column: str
    text_pair_column: str | None
    label_column: str
    label_names: list[str] | None


def resolve_task(args: DataArguments) -> ResolvedTask:
    """Merge `--task` defaults with explicit column/split arguments; validates the task name and strategy."""
    if args.task is not None and args.task not in TASKS:
        raise ValueError(f"Unknown --task {args.task!r}; expected one of {list(TASKS)} (or give a dataset instead).")
    if args.task is None and not (args.dataset_name or args.train_file):
        raise ValueError("Give --task, --dataset_name or --train_file.")
    if args.truncation not in TRUNCATION_STRATEGIES:
        raise ValueError(f"Unknown --truncation {args.truncation!r}; expected one of {list(TRUNCATION_STRATEGIES)}.")
    if args.max_seq_length < 3:
        raise ValueError(f"--max_seq_length must be at least 3 ([CLS] text [SEP]), got {args.max_seq_length}.")
    if args.truncation == "head+tail" and not 0 <= args.head_tokens <= args.max_seq_length - 2:
        raise ValueError(f"--head_tokens must be in [0, max_seq_length - 2], got {args.head_tokens}.")
    check_max_samples(args)
    spec = TASKS.get(args.task) if args.task else None
    names = [n.strip() for n in args.class_names.split(",")] if args.class_names else None
    return ResolvedTask(
        train_split=args.train_split or (spec.train_split if spec else "train"),
        eval_split=args.eval_split or (spec.eval_split if spec else ""),
        text_column=args.text_column or (spec.text_column if spec else "text"),
        text_pair_column=args.text_pair_column or (spec.text_pair_column if spec else None),
        label_column=args.label_column or (spec.label_column if spec else "label"),
        label_names=names or (list(spec.label_names) if spec else None),
    )


def load_task_datasets(args: DataArguments, task: ResolvedTask, cache_dir: str | None = None) -> datasets.DatasetDict:
    """The train and eval splits (keys "train", "eval"), checked for presence, columns and emptiness."""
    spec = TASKS.get(args.task) if args.task else None
    raw = load_raw_datasets(
        dataset_name=args.dataset_name or (spec.dataset_name if spec else None),
        dataset_config_name=args.dataset_config_name or (spec.dataset_config_name if spec else None),
        train_file=args.train_file,
        validation_file=args.validation_file,
        data_dir=args.data_dir,
        cache_dir=cache_dir,
    )
    eval_split = task.eval_split or next((s for s in ("validation", "test") if s in raw), "")
    for role, split in (("train", task.train_split), ("eval", eval_split)):
        if split not in raw:
            raise ValueError(f"The {role} split {split!r} is not in the dataset; it has {list(raw)}.")
    chosen = datasets.DatasetDict({"train": raw[task.train_split], "eval": raw[eval_split]})
    needed = [c for c in (task.text_column, task.text_pair_column, task.label_column) if c]
    for role, split in chosen.items():
        missing = [c for c in needed if c not in split.column_names]
        if missing:
            raise ValueError(f"Column(s) {missing} not in the {role} split; it has {split.column_names}.")
        if len(split) == 0:
            raise ValueError(f"The {role} split is empty.")
    return chosen


def label_mapping(raw: datasets.DatasetDict, task: ResolvedTask) -> tuple[list[str], dict]:
    """Class names and a map from raw label value to class id; raises on any label outside the label set.

    Integer labels are ids into the names; string labels are names. Without given names, the sorted distinct
    train labels are the classes (integers must then be 0..K-1).
    """
    train_values = sorted(set(raw["train"][task.label_column]), key=lambda v: (str(type(v)), v))
    names = task.label_names
    is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in train_values)
    if names is None:
        if is_int:
            if train_values != list(range(len(train_values))):
                raise ValueError(
                    f"Integer labels must be 0..K-1, got {train_values[:20]}; pass --class_names to name the classes."
                )
            names = [str(v) for v in train_values]
        else:
            names = [str(v) for v in train_values]
    mapping = {i: i for i in range(len(names))} if is_int else {name: i for i, name in enumerate(names)}
    if len(names) < 2:
        raise ValueError(f"Classification needs at least two labels, got {names}.")
    for role, split in raw.items():
        bad = sorted({v for v in split[task.label_column] if v not in mapping}, key=str)
        if bad:
            raise ValueError(
                f"Label(s) {bad[:10]} in the {role} split are outside the label set {list(mapping)} (classes {names})."
            )
    return names, mapping


# -------------------------------------------------------------------------------------------------- tokenisation
def truncate_ids(ids: list[int], budget: int, strategy: str, head_tokens: int = 128) -> list[int]:
    """Cut a token-id list to at most `budget` ids.

    head keeps the first `budget`; tail the last `budget`; head+tail the first `head_tokens` and the last
    `budget - head_tokens` (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification?", best on IMDB with
    128 + 382 of 510).
    """
    if len(ids) <= budget:
        return ids
    if strategy == "head":
        return ids[:budget]
    if strategy == "tail":
        return ids[len(ids) - budget :]
    if strategy == "head+tail":
        tail = budget - head_tokens
        return ids[:head_tokens] + (ids[len(ids) - tail :] if tail > 0 else [])
    raise ValueError(f"Unknown truncation strategy {strategy!r}; expected one of {list(TRUNCATION_STRATEGIES)}.")


def make_tokenize_function(
    tokenizer: PreTrainedTokenizerBase,
    task: ResolvedTask,
    label_map: dict,
    max_seq_length: int,
    strategy: str,
    head_tokens: int,
):
    """A batched `datasets.map` function: texts -> input_ids, token_type_ids, attention_mask, labels, length.

    Single texts are tokenised whole, then cut by `strategy` (so tail and head+tail see the real end of the
    review). Pairs use the tokenizer's own longest-first truncation, which is what GLUE pair tasks use.
    """

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        if task.text_pair_column:
            encoded = tokenizer(
                batch[task.text_column], batch[task.text_pair_column], truncation=True, max_length=max_seq_length
            )
            encoded = dict(encoded)
        else:
            texts = [t if t is not None else "" for t in batch[task.text_column]]
            pieces = tokenizer(texts, add_special_tokens=False)["input_ids"]
            budget = max_seq_length - 2  # room for [CLS] and [SEP]
            input_ids = [
                [tokenizer.cls_token_id] + truncate_ids(ids, budget, strategy, head_tokens) + [tokenizer.sep_token_id]
                for ids in pieces
            ]
            encoded = {
                "input_ids": input_ids,
                "token_type_ids": [[0] * len(ids) for ids in input_ids],
                "attention_mask": [[1] * len(ids) for ids in input_ids],
            }
        encoded["labels"] = [label_map[v] for v in batch[task.label_column]]
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    return tokenize


# --------------------------------------------------------------------------------------------------------- model
def load_model(args: ModelArguments, num_labels: int, label_names: list[str]) -> PreTrainedModel:
    """The classifier: pretrained encoder + new head, or random weights with `init_from_scratch`.

    Raises ValueError when the checkpoint already is a sequence classifier with a different number of labels,
    unless `ignore_mismatched_sizes` is set.
    """
    config = AutoConfig.from_pretrained(args.model_name_or_path, cache_dir=args.cache_dir)
    is_classifier = any(a.endswith("ForSequenceClassification") for a in (config.architectures or []))
    if is_classifier and config.num_labels != num_labels and not args.ignore_mismatched_sizes:
        raise ValueError(
            f"{args.model_name_or_path} is a classifier with num_labels={config.num_labels}, but the task has "
            f"{num_labels} labels {label_names}; pass --ignore_mismatched_sizes to re-initialise its head."
        )
    labels = {
        "num_labels": num_labels,
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: i for i, name in enumerate(label_names)},
    }
    if args.dropout != -1:
        if not 0.0 <= args.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1) or -1 (the checkpoint's), got {args.dropout}.")
        labels.update(hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    if args.init_from_scratch:
        config.update(labels)
        return AutoModelForSequenceClassification.from_config(config)
    return AutoModelForSequenceClassification.from_pretrained(
        args.model_name_or_path,
        cache_dir=args.cache_dir,
        ignore_mismatched_sizes=args.ignore_mismatched_sizes,
        **labels,
    )


def load_classifier_tokenizer(args: ModelArguments) -> PreTrainedTokenizerBase:
    """The tokenizer saved with the model (or `--tokenizer_name`); it must have [CLS] and [SEP]."""
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_name or args.model_name_or_path, cache_dir=args.cache_dir)
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError(f"Tokenizer {args.tokenizer_name or args.model_name_or_path!r} lacks a [CLS] or [SEP] token.")
    return tokenizer


class OrderedEvalTrainer(Trainer):
    """`Trainer` that evaluates in dataset order.

    transformers 5 also length-groups (and so reorders) the eval set under train_sampling_strategy=group_by_length;
    predictions.csv must line up row by row with the eval examples, so evaluation stays sequential.
    """

    def _get_eval_sampler(self, eval_dataset: datasets.Dataset) -> torch.utils.data.Sampler | None:
        if self.args.world_size > 1 or not hasattr(eval_dataset, "__len__"):
            return super()._get_eval_sampler(eval_dataset)
        return torch.utils.data.SequentialSampler(eval_dataset)


# ------------------------------------------------------------------------------------------------------- outputs
def write_predictions(
    path: Path, raw_eval: datasets.Dataset, task: ResolvedTask, labels: np.ndarray, logits: np.ndarray, names: list[str]
) -> Path:
    """predictions.csv: one row per eval example (index, text, [text_pair], label, prediction, p_<class>...)."""
    probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1).numpy()  # (N, num_labels)
    columns = ["index", "text"] + (["text_pair"] if task.text_pair_column else []) + ["label", "prediction"]
    columns += [f"p_{name}" for name in names]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for i in range(len(raw_eval)):
            row = [i, raw_eval[i][task.text_column]]
            if task.text_pair_column:
                row.append(raw_eval[i][task.text_pair_column])
            row += [names[labels[i]], names[int(probs[i].argmax())]] + [f"{p:.6f}" for p in probs[i]]
            writer.writerow(row)
    return path


def write_reports(
    folder: Path,
    trainer: Trainer,
    raw_eval: datasets.Dataset,
    prediction: PredictionOutput,
    task: ResolvedTask,
    names: list[str],
    results: dict,
    model_args: ModelArguments,
    data_args: DataArguments,
) -> None:
    """predictions.csv, confusion_matrix.png, loss_curve.png, the model card and all_results.json in `folder` (the
    run's staging folder, holding trainer_state.json), from the best model's eval `prediction` (logits
    (N, num_labels), label_ids (N,))."""
    from .plotting import plot_confusion_matrix, plot_training_curves

    logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    labels = np.asarray(prediction.label_ids)
    write_predictions(folder / "predictions.csv", raw_eval, task, labels, logits, names)
    plot_confusion_matrix(
        labels.tolist(),
        logits.argmax(-1).tolist(),
        names,
        folder / "confusion_matrix.png",
        title=f"{data_args.task or data_args.dataset_name or 'eval'}: accuracy {results.get('eval_accuracy', 0):.4f}",
    )
    plot_training_curves(folder)  # titled with the output_dir's name, not the staging folder's
    _write_card(folder, Path(trainer.args.output_dir).resolve().name, trainer, names, results, model_args, data_args)
    (folder / "all_results.json").write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


def _write_card(
    folder: Path,
    run_name: str,
    trainer: Trainer,
    names: list[str],
    results: dict,
    model_args: ModelArguments,
    data_args: DataArguments,
) -> None:
    try:
        from .cards import write_model_card
    except ImportError:  # the cards module is optional at run time: a missing card must not lose a finished run
        logger.warning("hf_bertscratch.cards is not available; no model card written.")
        return
    spec = TASKS.get(data_args.task) if data_args.task else None
    dataset_id = data_args.dataset_name or (spec.dataset_name if spec else None)
    args = trainer.args
    write_model_card(
        folder,
        "classifier",
        {
            "model_name": run_name,
            "base_model": None if model_args.init_from_scratch else model_args.model_name_or_path,
            "datasets": [dataset_id] if dataset_id else [],
            "dataset_description": f"{data_args.task or dataset_id or data_args.train_file}, "
            f"max_seq_length {data_args.max_seq_length}, truncation {data_args.truncation}",
            "num_parameters": results.get("num_parameters"),
            "hyperparameters": {
                "learning_rate": args.learning_rate,
                "per_device_train_batch_size": args.per_device_train_batch_size,
                "num_train_epochs": args.num_train_epochs,
                "max_steps": args.max_steps,
                "warmup_ratio": args.warmup_ratio,
                "weight_decay": args.weight_decay,
                "seed": args.seed,
                "max_seq_length": data_args.max_seq_length,
                "truncation": data_args.truncation,
            },
            "hardware": results.get("machine"),
            "wall_time_seconds": results.get("train_runtime"),
            "results": {k: v for k, v in results.items() if k.startswith("eval_")},
            "task": "text-classification",
            "labels": names,
        },
    )


# ---------------------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> tuple[ModelArguments, DataArguments, FinetuneTrainingArguments]:
    """Parse the three dataclasses from argv, or from a single .json file argument."""
    parser = HfArgumentParser((ModelArguments, DataArguments, FinetuneTrainingArguments))
    return parse_args_or_json(parser, argv)


def main(argv: list[str] | None = None) -> None:
    """Fine-tune and evaluate a text classifier; see the module docstring and `--help`."""
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    set_seed(training_args.seed)

    # 1. Resolve and check everything that can be wrong before any training starts.
    check_output_dir(training_args)
    check_training_push(training_args)
    checkpoint = resolve_checkpoint(training_args)
    task = resolve_task(data_args)
    raw = load_task_datasets(data_args, task, model_args.cache_dir)
    raw["train"] = sample_examples(raw["train"], data_args.max_train_samples, training_args.seed)
    raw["eval"] = sample_examples(raw["eval"], data_args.max_eval_samples, training_args.seed)
    names, label_map = label_mapping(raw, task)
    tokenizer = load_classifier_tokenizer(model_args)
    model = load_model(model_args, len(names), names)
    max_positions = getattr(model.config, "max_position_embeddings", None)
    if max_positions is not None and data_args.max_seq_length > max_positions:
        raise ValueError(
            f"--max_seq_length {data_args.max_seq_length} exceeds the model's max_position_embeddings {max_positions}."
        )

    # 2. Tokenise with the chosen truncation strategy; lengths feed the length-grouped sampler.
    tokenize = make_tokenize_function(
        tokenizer, task, label_map, data_args.max_seq_length, data_args.truncation, data_args.head_tokens
    )
    with training_args.main_process_first(desc="tokenisation"):
        tokenized = raw.map(
            tokenize,
            batched=True,
            remove_columns=raw["train"].column_names,
            num_proc=data_args.preprocessing_num_workers,
            desc="Tokenising",
        )

    # 3. Train with per-epoch (or per-step) evaluation and best-checkpoint selection.
    metrics = ClassificationMetrics(len(names), pairs=task.text_pair_column is not None)
    trainer = OrderedEvalTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["eval"],
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8),
        compute_metrics=metrics,
    )
    output_dir = Path(training_args.output_dir)
    (output_dir / "all_results.json").unlink(missing_ok=True)  # a stale result must not outlive a failed rerun
    start = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=checkpoint)

    # 4. Evaluate the best model and write it with every report (run_folder.finish_run: all_results.json and the
    # model card last). One pass over the eval set gives both the metrics and the per-example predictions.
    prediction = trainer.predict(tokenized["eval"], metric_key_prefix="eval")
    results = {**train_result.metrics, **prediction.metrics}
    results.update(
        num_parameters=sum(p.numel() for p in model.parameters()),
        global_step=trainer.state.global_step,
        train_samples=len(tokenized["train"]),
        eval_samples=len(tokenized["eval"]),
        wall_time_seconds=time.perf_counter() - start,
        machine=describe_hardware(),
        seed=training_args.seed,
        max_seq_length=data_args.max_seq_length,
        truncation=data_args.truncation,
        init_from_scratch=model_args.init_from_scratch,
        model_name_or_path=model_args.model_name_or_path,
    )
    finish_run(
        trainer,
        lambda folder: write_reports(
            folder, trainer, raw["eval"], prediction, task, names, results, model_args, data_args
        ),
    )
    logger.info("eval_accuracy %.4f (%d eval examples)", results.get("eval_accuracy", math.nan), len(raw["eval"]))
    print(json.dumps({k: v for k, v in results.items() if k.startswith("eval_")}, indent=2))
    if trainer.is_world_process_zero():
        push_training_output(training_args)


if __name__ == "__main__":
    main()
