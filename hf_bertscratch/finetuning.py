"""Fine-tune a BertScratch checkpoint, or one of transformers' BERT family (converted on load:
`convert.family_checkpoint`), for any task BERT is fine-tuned for, with HF `Trainer`.

Tasks come from a table (`hf_bertscratch.tasks.TASKS`: the GLUE tasks, IMDB, CoNLL-2003, SQuAD) or from the user's
own csv/json/jsonl/parquet/Hub data under a shape (`--task_type`: classification, multi-label-classification,
regression, token-classification, question-answering, embedding) with the columns named by flags. One setup serves
every shape; what differs per shape (features, head, metric, predictions) lives in `hf_bertscratch.tasks.shapes`, and
the arguments with their checks in `hf_bertscratch.finetuning_arguments`. `main()` reads as its stages:

    parse and check -> data (tokenizer, splits, task shape) -> model (and features, a probed head) -> Trainer.train
    -> evaluate (the best model on eval, test once, no-learning baselines) -> report (all_results.json,
    predictions.csv, a picture fit for the shape, loss_curve.png, the model card)

    python scripts/finetune.py --model_name_or_path RUN --task conll2003 --data_dir ../shared/data --output_dir OUT

A test split without labels (no label, tags or answers column, or one wholly empty: GLUE's own test files) is
predicted, not scored, as transformers' run_glue.py does with --do_predict: test_predictions.csv holds the chosen
model's prediction for each of its examples, and no test metrics or baselines are written.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from transformers import (
    AutoConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_utils import EvalLoopOutput, PredictionOutput

import hf_bertscratch  # noqa: F401  (registers the bertscratch model type with the Auto classes)
from hf_bertscratch_base.dataset_table import dataset_id
from hf_bertscratch_base.model_config import describe_thresholds, label_thresholds

from . import cpu_matmul
from .baselines import BASELINE_NAMES, baseline_key, task_baselines
from .configuration_bertscratch import CLASSIFIER_POOLINGS
from .convert import family_checkpoint
from .embedding import EmbeddingTrainer
from .finetuning_arguments import (
    AUTO_PER_LABEL,
    CHOSEN_THRESHOLDS,
    FinetuneTrainingArguments,
    ModelArguments,
    choose_task_defaults,
    parse_args,
    resolve_paths,
)
from .hardware import describe_hardware, describe_precision, precision_name, use_threads
from .hub import push_training_output
from .inference import quiet_loading_report
from .initialisation import probe_head, reinitialise_head, start_segments_as_first
from .metrics import MULTI_LABEL_THRESHOLD, labels_above_threshold
from .run_folder import (
    TrainingDataRecord,
    check_resumed_model,
    finish_run,
    log_resumption,
    output_dir_of,
    show_fewer_loss_lines,
    stopping_with_one_line,
)
from .task_heads import FINE_TUNED_HEADS
from .tasks import SEQUENCE_SHAPES, TaskSpec, input_columns
from .tasks.data import DataArguments, load_task_data, load_task_tokenizer
from .tasks.features import prediction_logits
from .tasks.shapes import EmbeddingShape, FeatureSettings, MultiLabelClassificationShape, TaskShape, build_shape
from .tokenization import check_tokenizer_fits

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------- data
def build_task_shape(
    task: TaskSpec,
    raw: datasets.DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: FinetuneTrainingArguments,
) -> TaskShape:
    """The task's shape (`tasks.shapes.build_shape`) with the feature settings of the flags, its labels read from
    `raw` (and checked); an embedding task's with its objective and pooling, a multi-label task's with its threshold
    (`multi_label_threshold`)."""
    settings = FeatureSettings(
        **{name: getattr(data_args, name) for name in FeatureSettings.__dataclass_fields__}  # one source: the flags
    )
    options: dict[str, object] = {}
    if task.shape == "embedding":
        options = {"objective": data_args.embedding_objective, "pooling": model_args.classifier_pooling}
        training_args.remove_unused_columns = False  # the second text's features are no argument of forward
    elif task.shape == "multi-label-classification":
        options = multi_label_threshold(training_args)
    shape = build_shape(task, settings, tokenizer, **options)
    shape.prepare_labels(raw)
    return shape


def multi_label_threshold(training_args: FinetuneTrainingArguments) -> dict[str, object]:
    """How --multi_label_threshold gives a multi-label task's labels, as `MultiLabelClassificationShape` takes it:
    "threshold", its number (`MULTI_LABEL_THRESHOLD` where not given) or None for "auto" and "auto-per-label"
    (chosen on the eval split once the model is trained); "per_label", whether one is chosen per label; and
    "threshold_metric", the eval metric it is chosen by: the run's --metric_for_best_model where that is macro F1, else
    micro F1 (the main metric)."""
    given = training_args.multi_label_threshold
    best = (training_args.metric_for_best_model or "").removeprefix("eval_")
    return {
        "threshold": MULTI_LABEL_THRESHOLD if given is None else None if given in CHOSEN_THRESHOLDS else float(given),
        "per_label": given == AUTO_PER_LABEL,
        "threshold_metric": "macro_f1" if best == "macro_f1" else "micro_f1",
    }


def make_features(
    shape: TaskShape, raw: datasets.DatasetDict, data_args: DataArguments, training_args: FinetuneTrainingArguments
) -> dict[str, datasets.Dataset]:
    """Examples -> features, split by split (the shape's preprocessing); their lengths feed the length-grouped
    sampler."""
    with training_args.main_process_first(desc="tokenisation"):
        return {
            role: shape.features(split, training=role == "train", num_proc=data_args.preprocessing_num_workers)
            for role, split in raw.items()
        }


def forget_truncation(tokenizer: PreTrainedTokenizerBase) -> None:
    """Turn off the cut that tokenising the features left on a fast tokenizer's backend, which its tokenizer.json
    would otherwise record: a user of the saved folder's tokenizers library would find every text cut to
    --max_seq_length without asking."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_truncation()


def training_data_record(
    task: TaskSpec, raw: datasets.DatasetDict, data_args: DataArguments
) -> TrainingDataRecord | None:
    """What each checkpoint records of the train split, and what a resumed run is checked against
    (`run_folder.TrainingDataRecord`): its fingerprint and where it was read from."""
    dataset = data_args.dataset_name or task.dataset_name
    config = data_args.dataset_config_name or task.dataset_config_name
    source = data_args.train_file or (dataset_id(dataset, config) if dataset else "the task's train split")
    return TrainingDataRecord.of(raw["train"], source)


# A share of unknown tokens in the training text above which the tokenizer does not fit the text (WordPiece leaves
# [UNK] only for characters its vocabulary lacks: a tokenizer of this text's language leaves well under 1%).
UNKNOWN_TOKEN_WARNING = 0.05


def unknown_token_share(train: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, rows: int = 1000) -> float:
    """The share of [UNK] among the first `rows` training features' tokens, special tokens but [UNK] left out."""
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    tokens = [token for ids in train[: min(rows, len(train))]["input_ids"] for token in ids if token not in special]
    return sum(token == tokenizer.unk_token_id for token in tokens) / max(len(tokens), 1)


def warn_of_unknown_tokens(train: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, source: str) -> None:
    """Log a warning when [UNK] is more than `UNKNOWN_TOKEN_WARNING` of the training text's tokens: a tokenizer
    that does not fit the text (another language, a vocabulary that was not loaded) trains a model on little."""
    if tokenizer.unk_token_id is None or "input_ids" not in train.column_names:
        return
    share = unknown_token_share(train, tokenizer)
    if share > UNKNOWN_TOKEN_WARNING:
        logger.warning(
            "%.0f%% of the training text's tokens are %s: the tokenizer of %s does not cover this text (vocabulary "
            "of %d tokens), and the model learns nothing from an unknown token. Check --model_name_or_path or "
            "--tokenizer_name.",
            100 * share,
            tokenizer.unk_token,
            source,
            len(tokenizer),
        )


# --------------------------------------------------------------------------------------------------------- model
def _task_head(config) -> str | None:
    """The fine-tuned head a checkpoint's config names (e.g. "BertScratchForSequenceClassification"), or None for a
    pretrained one (masked-LM, MLM+NSP, ELECTRA)."""
    return next((a for a in config.architectures or [] if a.endswith(FINE_TUNED_HEADS)), None)


def _same_outputs(config, updates: dict, head_class: str, wanted_head: str) -> bool:
    """Whether a checkpoint's head (`config`, its class `head_class`) already answers the task at hand: the wanted
    head class (e.g. "ForSequenceClassification"), labels and problem type, so fine-tuning can continue it."""
    if not wanted_head or not head_class.endswith(wanted_head):
        return False
    wanted = {k: v for k, v in updates.items() if k in ("num_labels", "id2label", "problem_type")}
    current = {"num_labels": config.num_labels, "id2label": config.id2label, "problem_type": config.problem_type}
    return all(current[k] == v for k, v in wanted.items())


def long_text_settings(shape, max_positions: int) -> dict:
    """The config fields that make a single-text sequence head cut a longer input at inference as its features were
    cut here (`BertScratchConfig.long_text_*`), at most `max_positions` tokens; {} for sentence pairs, which the
    tokenizer cuts longest-first."""
    if shape.task.columns.get("text_pair"):
        return {}
    settings = shape.settings
    return {
        "long_text_max_length": min(settings.max_seq_length, max_positions),
        "long_text_truncation": settings.truncation,
        "long_text_head_tokens": settings.head_tokens,
    }


def model_config(args: ModelArguments) -> PretrainedConfig:
    """The config of the checkpoint to fine-tune: its width picks the task's defaults, its positions bound
    --max_seq_length (`finetuning_arguments.choose_task_defaults`)."""
    return AutoConfig.from_pretrained(family_checkpoint(args.model_name_or_path), cache_dir=args.cache_dir)


def load_model(args: ModelArguments, shape: TaskShape) -> PreTrainedModel:
    """The task's head (`shape.auto_class`) on the pretrained encoder, or on random weights with
    `init_from_scratch`.

    A checkpoint fine-tuned for another task (another head, other labels: STS-B's regressor handed to MRPC) gives
    its encoder and pooler; its head is dropped and a new one starts, as intermediate-task transfer does (BERT on
    MNLI, then RTE). A checkpoint whose head already answers this task keeps it. Both are logged. A sequence head
    reads as --classifier_pooling says (`finetuning_arguments.choose_task_defaults` has resolved "auto").
    """
    assert args.classifier_pooling in CLASSIFIER_POOLINGS, "choose_task_defaults resolves --classifier_pooling first"
    source = family_checkpoint(args.model_name_or_path)  # transformers' BERT: its BertScratch conversion
    config = AutoConfig.from_pretrained(source, cache_dir=args.cache_dir)
    updates = {
        "multi_label_threshold": None,  # the checkpoint's, if any, is no threshold of this head's (the shape's is)
        "sentence_transformers": {},  # nor its CrossEncoder activation (the shape's, where it has one)
        **shape.config_updates(),
        "input_columns": input_columns(shape.task),  # what --input_file reads then
    }
    if shape.task.shape in SEQUENCE_SHAPES:
        updates["classifier_pooling"] = args.classifier_pooling
        updates.update(long_text_settings(shape, config.max_position_embeddings))
    if args.dropout != -1:
        updates.update(hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    if args.init_from_scratch:
        config.update(updates)
        logger.info(
            "Starting from random weights (--init_from_scratch): the config and tokenizer of %s, none of its weights.",
            args.model_name_or_path,
        )
        return shape.auto_class.from_config(config)
    head = _task_head(config)
    wanted_head = shape.auto_class.__name__.removeprefix("AutoModel")  # "" for the bare encoder of an embedding
    keep_head = head is not None and _same_outputs(config, updates, head, wanted_head)
    with quiet_loading_report():  # the head swap it reports is the expected one; what changed is logged below
        model = shape.auto_class.from_pretrained(
            source, cache_dir=args.cache_dir, ignore_mismatched_sizes=True, **updates
        )
    if head is None:
        logger.info(
            "Starting from the pretrained encoder of %s; a new %s head is trained.",
            args.model_name_or_path,
            wanted_head or "embedding (mean-pooled) ",
        )
    elif not keep_head:
        reinitialise_head(model)
        labels = list(config.id2label.values()) if config.id2label else config.num_labels
        logger.info(
            "%s was fine-tuned already (%s, labels %s): starting from its encoder; its head is dropped and a new "
            "one is trained for %s.",
            args.model_name_or_path,
            head,
            labels,
            shape.names,
        )
    else:
        logger.info("%s already has this task's head (%s, labels %s): training it on.", args.model_name_or_path, head,
                    shape.names)  # fmt: skip
    if args.segment_embeddings == "first":
        start_segments_as_first(model)
    return model


def fit_head(model: PreTrainedModel, args: ModelArguments, shape: TaskShape, train) -> None:
    """With --head_init probe (or the task's default), fit a new sequence head to the frozen encoder's features of
    the training set before fine-tuning (`initialisation.probe_head`)."""
    if args.head_init != "probe" or shape.task.shape not in ("classification", "regression"):
        return
    columns = [c for c in train.column_names if c not in ("length",)]
    loader = torch.utils.data.DataLoader(train.select_columns(columns), batch_size=64, collate_fn=shape.collator())
    score = probe_head(model, loader, regression=shape.task.shape == "regression")
    logger.info(
        "Head fitted to the frozen encoder's features of %d training examples (LP-FT): training %s %.3f.",
        len(train),
        "R^2" if shape.task.shape == "regression" else "accuracy",
        score,
    )


# ------------------------------------------------------------------------------------------------------ training
class OrderedEvalTrainer(Trainer):
    """`Trainer` that evaluates in dataset order, and keeps the predictions of its evaluations while training.

    transformers 5 also length-groups (and so reorders) the eval set under train_sampling_strategy=group_by_length,
    with one process or several; predictions must line up row by row with the eval features (predictions.csv,
    question answering's windows), so evaluation stays sequential. The end of a run reads the best checkpoint's
    predictions from the evaluation that chose it (`evaluation_of_current_weights`) instead of evaluating the same
    weights again.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._evaluations: dict[int, EvalLoopOutput] = {}

    def evaluation_loop(self, *args: Any, **kwargs: Any) -> EvalLoopOutput:
        output = super().evaluation_loop(*args, **kwargs)
        if self.state.global_step and kwargs.get("metric_key_prefix") == "eval":
            best = self.state.best_global_step
            self._evaluations = {step: kept for step, kept in self._evaluations.items() if step == best}
            self._evaluations[self.state.global_step] = output
        return output

    def evaluation_of_current_weights(self) -> PredictionOutput | None:
        """The evaluation made while training of the weights the model holds now (the best checkpoint's under
        load_best_model_at_end, else the last step's), or None when those weights were not evaluated in this process."""
        step = self.state.best_global_step if self.args.load_best_model_at_end else self.state.global_step
        output = self._evaluations.get(step) if step else None
        return None if output is None else PredictionOutput(output.predictions, output.label_ids, output.metrics)

    def _get_eval_sampler(self, eval_dataset: datasets.Dataset) -> torch.utils.data.Sampler | None:
        if not hasattr(eval_dataset, "__len__"):
            return super()._get_eval_sampler(eval_dataset)
        # Under several processes too: accelerate deals the batches out in turn and gathers them back in order.
        return torch.utils.data.SequentialSampler(eval_dataset)


class OrderedEmbeddingTrainer(OrderedEvalTrainer, EmbeddingTrainer):
    """The bi-encoder's `Trainer` (`hf_bertscratch.embedding`), evaluating in dataset order."""


class GradientNormCallback(TrainerCallback):
    """Logs the gradient norms of the task head and of the encoder beside the loss (`grad_norm_head`,
    `grad_norm_encoder`: their mean over the optimizer steps since the last log, after clipping). A head whose
    gradients dwarf the encoder's, or an encoder whose gradients vanish, is how a fine-tune that learns nothing
    shows itself (Mosbach et al. 2021)."""

    PARTS = ("head", "encoder")

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor | float] = dict.fromkeys(self.PARTS, 0.0)
        self.steps = 0

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs) -> None:
        prefix = getattr(model, "base_model_prefix", "")
        bare = getattr(model, "base_model", None) is model  # an embedding model is all encoder
        grads: dict[str, list[torch.Tensor]] = {part: [] for part in self.PARTS}
        for name, parameter in model.named_parameters():
            if parameter.grad is not None:
                part = "encoder" if bare or (prefix and name.startswith(prefix)) else "head"
                grads[part].append(parameter.grad.detach())
        for part, found in grads.items():  # summed where the gradients live: read back only when logged
            if found:
                self.sums[part] = self.sums[part] + torch.linalg.vector_norm(
                    torch.stack([torch.linalg.vector_norm(g, dtype=torch.float32) for g in found])
                )
        self.steps += 1

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        if self.steps and logs is not None and "loss" in logs and state.log_history:
            norms = {f"grad_norm_{part}": float(total) / self.steps for part, total in self.sums.items()}
            state.log_history[-1].update(norms)
            self.sums, self.steps = dict.fromkeys(self.PARTS, 0.0), 0


def build_trainer(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    shape: TaskShape,
    raw: datasets.DatasetDict,
    features: dict[str, datasets.Dataset],
    training_args: FinetuneTrainingArguments,
    extra_callbacks: tuple[TrainerCallback, ...] = (),
) -> OrderedEvalTrainer:
    """The run's `Trainer`: per-epoch (or per-step) evaluation with the shape's metric, the best checkpoint kept by
    the task's main metric, the gradient norms logged, a tenth of the logged losses shown (`show_fewer_loss_lines`),
    and `extra_callbacks` (the training data's record); an embedding task's trains its bi-encoder objective."""
    embedding = {}
    if isinstance(shape, EmbeddingShape):
        embedding = {"objective": shape.objective, "pooling": shape.pooling, "label_range": shape.label_range}
    trainer = (OrderedEmbeddingTrainer if embedding else OrderedEvalTrainer)(
        **embedding,
        model=model,
        args=training_args,
        train_dataset=features["train"],
        eval_dataset=features["eval"],
        processing_class=tokenizer,
        data_collator=shape.collator(),
        compute_metrics=shape.compute_metrics(raw["eval"], features["eval"]),
        callbacks=[GradientNormCallback(), *extra_callbacks],
    )
    show_fewer_loss_lines(trainer)
    return trainer


# ------------------------------------------------------------------------------------------------------- results
def scored_splits(task: TaskSpec, raw: datasets.DatasetDict) -> list[str]:
    """The splits scored against their labels: "eval", and "test" when the task has one with labels (a test split
    without them is predicted, not scored)."""
    return [role for role in ("eval", "test") if role in raw and task.has_labels(raw[role].column_names)]


def log_predicted_test(task: TaskSpec, raw: datasets.DatasetDict) -> None:
    """Say in one line, before training, that a test split without labels will be predicted, not scored."""
    if "test" in raw and "test" not in scored_splits(task, raw):
        logger.info(
            "The test split has no %s (no %r column, or an empty one): its %s examples are predicted with the "
            "chosen model at the end, not scored (test_predictions.csv, no test metrics).",
            task.scored_what,
            task.scored_column,
            f"{len(raw['test']):,}",
        )


def evaluate_best_model(
    trainer: OrderedEvalTrainer, shape: TaskShape, raw: datasets.DatasetDict, features: dict[str, datasets.Dataset]
) -> tuple[dict[str, PredictionOutput], dict]:
    """The best model's predictions (split -> its per-example predictions: "eval", and "test" when the task has a
    test split) and the eval (and test) metrics. The evaluation comes from training when it was made there; else one
    pass now gives both the metrics and the per-example predictions. The test split is scored once; one without
    labels is predicted, and gives no metrics. A multi-label task's threshold to choose is chosen on the eval
    predictions before the test split is scored (`settle_threshold`)."""
    prediction = trainer.evaluation_of_current_weights() or trainer.predict(features["eval"], metric_key_prefix="eval")
    assert prediction.metrics is not None, "Trainer's evaluation loop always reports metrics"
    predictions, metrics = {"eval": prediction}, dict(prediction.metrics)
    scored = "test" in scored_splits(shape.task, raw)
    metrics.update(settle_threshold(shape, prediction, scored))
    if "test" in features:
        trainer.compute_metrics = shape.compute_metrics(raw["test"], features["test"]) if scored else None
        predictions["test"] = trainer.predict(features["test"], metric_key_prefix="test")
        if scored:
            metrics.update(predictions["test"].metrics or {})
    return predictions, metrics


def settle_threshold(shape: TaskShape, prediction: PredictionOutput, test_scored: bool) -> dict[str, float]:
    """Where a multi-label task's threshold is chosen on the eval split (--multi_label_threshold auto,
    auto-per-label), choose it on the trained model's eval `prediction`
    (`MultiLabelClassificationShape.settle_threshold`) and say so in one line; returns the eval scores at it, which
    replace those at `MULTI_LABEL_THRESHOLD`. {} for any other task, and a threshold given."""
    if not isinstance(shape, MultiLabelClassificationShape):
        return {}
    scores = shape.settle_threshold(prediction)
    if not scores:
        return {}
    assert prediction.metrics is not None, "Trainer's evaluation loop always reports metrics"
    metric = shape.threshold_metric
    per_label = isinstance(shape.threshold, dict)
    listed = describe_thresholds(shape.threshold)
    chosen = f"thresholds per label ({listed})" if per_label else f"threshold {listed}"
    logger.info(
        "Multi-label %s, chosen by eval %s on the %d eval examples: eval %s %.4f (%.4f at %g)%s.",
        chosen,
        metric.replace("_f1", " F1"),
        len(prediction_logits(prediction)),
        metric.replace("_f1", " F1"),
        scores[metric],
        prediction.metrics[f"eval_{metric}"],
        MULTI_LABEL_THRESHOLD,
        f"; the test split is scored at {'them' if per_label else 'it'}" if test_scored else "",
    )
    return {f"eval_{name}": value for name, value in scores.items()}


def threshold_record(shape: TaskShape) -> dict:
    """What all_results.json records of a multi-label task's threshold: the sigmoid above which its scores give a
    label (one for every label, or each label's, as config.json records it), whether it was chosen on the eval split,
    and if so by which eval metric; {} for other tasks."""
    if not isinstance(shape, MultiLabelClassificationShape):
        return {}
    chosen = shape.threshold_chosen_on_eval
    return {
        "multi_label_threshold": shape.threshold,
        "multi_label_threshold_chosen": chosen,
        **({"multi_label_threshold_metric": shape.threshold_metric} if chosen else {}),
    }


def run_baselines(shape: TaskShape, raw: datasets.DatasetDict, features: dict, prediction: PredictionOutput) -> dict:
    """What the task scores with no learning (`baselines.task_baselines`), for the run's results; a multi-label bag of
    words at a threshold chosen on the eval split as the model's is, where the model's is chosen there."""
    task = shape.task
    choose = shape.threshold_choice() if isinstance(shape, MultiLabelClassificationShape) else None
    if task.shape == "question-answering":  # answers are read from the examples (features are context windows)
        answers = task.columns["answers"]
        scored = {role: (raw[role], raw[role][answers]) for role in scored_splits(task, raw)}
        return task_baselines(task, raw["train"], [], scored)
    if "labels" not in features["train"].column_names or prediction.label_ids is None:
        return {}
    train_labels = features["train"]["labels"]
    if len(train_labels) != len(raw["train"]):  # features filtered (in-batch negatives' matching pairs)
        return {}
    eval_labels = np.asarray(prediction.label_ids)  # (N,), or (N, K) 0/1 rows for a multi-label task
    if task.shape != "multi-label-classification":
        eval_labels = eval_labels.reshape(-1)
    scored = {"eval": (raw["eval"], eval_labels.tolist())}
    test = features.get("test")
    if test is not None and "labels" in test.column_names and len(test) == len(raw["test"]):  # one row per example
        scored["test"] = (raw["test"], test["labels"])
    return task_baselines(task, raw["train"], train_labels, scored, choose)


def pooling_and_objective(config, shape) -> dict:
    """What a run's results record of its head: a classifier's pooling, an embedding's pooling and objective."""
    if getattr(shape, "objective", None):
        return {"pooling": shape.pooling, "embedding_objective": shape.objective}
    pooling = getattr(config, "classifier_pooling", None)
    return {"classifier_pooling": pooling} if shape.task.shape in SEQUENCE_SHAPES else {}


def describe_run(
    model: PreTrainedModel,
    trainer: Trainer,
    shape,
    raw: datasets.DatasetDict,
    model_args: ModelArguments,
    data_args: DataArguments,
    wall_time_seconds: float,
) -> dict:
    """What all_results.json records of a run beside its scores: the task, the model, the data, the settings chosen
    and the machine."""
    task, args = shape.task, trainer.args
    gemm = cpu_matmul.choice()
    return {
        "task": data_args.task,
        "task_type": task.shape,
        "main_metric": task.main_metric,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "global_step": trainer.state.global_step,
        "train_samples": len(raw["train"]),
        "eval_samples": len(raw["eval"]),
        **({"test_samples": len(raw["test"])} if "test" in raw else {}),
        # the eval split is the test split: it is scored once, as eval, and its eval_* scores are those chosen on
        **({"checkpoints_chosen_on_test_split": True} if data_args.chosen_on_test_split else {}),
        # what the eval and test examples were: the data's split read as each, and the share of train held out
        "split_names": dict(data_args.split_names),
        "validation_split_percentage": data_args.validation_split_percentage or 0,
        "wall_time_seconds": wall_time_seconds,
        "machine": describe_hardware(),
        "precision": precision_name(args.bf16, args.fp16),
        # the products of evaluation (eval mode, no autograd) on a CPU: torch's default or oneDNN (cpu_matmul)
        "cpu_gemm_path": {"fp32": gemm.fp32, "bf16": gemm.bf16},
        "seed": args.seed,
        "learning_rate": args.learning_rate,
        "max_seq_length": data_args.max_seq_length,
        "truncation": data_args.truncation,
        **({"long_texts": shape.long_texts} if getattr(shape, "long_texts", None) else {}),
        "init_from_scratch": model_args.init_from_scratch,
        "head_init": model_args.head_init,
        "model_name_or_path": model_args.model_name_or_path,
        "num_train_epochs": args.num_train_epochs,
        **pooling_and_objective(model.config, shape),
        **threshold_record(shape),
    }


# ------------------------------------------------------------------------------------------------------- outputs
def write_reports(
    folder: Path,
    trainer: Trainer,
    shape: TaskShape,
    raw: datasets.DatasetDict,
    features: dict[str, datasets.Dataset],
    predictions: dict[str, PredictionOutput],
    results: dict,
    model_args: ModelArguments,
    data_args: DataArguments,
    task: TaskSpec,
) -> None:
    """predictions.csv and the shape's picture (test_predictions.csv and test_<picture> for a test split; no picture
    for one without labels), loss_curve.png, the model card and all_results.json in `folder` (the run's staging
    folder, holding trainer_state.json), from the best model's `predictions` (split -> its per-example predictions)."""
    from .plotting import plot_training_curves

    name = data_args.task or data_args.dataset_name or "eval"
    for role, prediction in predictions.items():
        main_value = results.get(f"{role}_{task.main_metric}", math.nan)
        title = f"{name}{' test' if role == 'test' else ''}: {task.metric_label} {main_value:.4f}"
        prefix = "" if role == "eval" else f"{role}_"
        shape.write_predictions(folder, raw[role], features[role], prediction, title, prefix=prefix)
    plot_training_curves(folder)  # titled with the output_dir's name, not the staging folder's
    _write_card(
        folder, Path(output_dir_of(trainer.args)).resolve().name, trainer, shape, results, model_args, data_args
    )
    (folder / "all_results.json").write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


# Task shape -> the model card kind of its head.
CARD_KINDS_OF_SHAPES = {
    "classification": "classifier",
    "multi-label-classification": "multi-label-classifier",
    "regression": "regressor",
    "token-classification": "token-classifier",
    "question-answering": "question-answering",
    "embedding": "embedding",
}


def _write_card(
    folder: Path,
    run_name: str,
    trainer: Trainer,
    shape: TaskShape,
    results: dict,
    model_args: ModelArguments,
    data_args: DataArguments,
) -> None:
    try:
        from .cards import evaluation_results, scored_on, source_name, write_model_card
    except ImportError:  # the cards module is optional at run time: a missing card must not lose a finished run
        logger.warning("hf_bertscratch.cards is not available; no model card written.")
        return
    task = data_args.task_spec
    dataset_id = data_args.dataset_name or task.dataset_name or None
    named = dataset_id or data_args.train_file
    source = data_args.task or (source_name(named, "dataset") if named else None)  # a local one by its name alone
    args = trainer.args
    write_model_card(
        folder,
        CARD_KINDS_OF_SHAPES[shape.task.shape],
        {
            "model_name": run_name,
            "base_model": None if model_args.init_from_scratch else model_args.model_name_or_path,
            "datasets": [dataset_id] if dataset_id else [],
            # which of the dataset's tasks (GLUE's sst2, rte, ...) and split the eval results measure; a split held
            # out of train (--validation_split_percentage) is none of the dataset's own
            "dataset_config": (data_args.dataset_config_name or task.dataset_config_name) if dataset_id else None,
            "eval_split": None if data_args.validation_split_percentage else task.eval_split or None,
            "dataset_description": f"{source}, "
            f"max_seq_length {data_args.max_seq_length}, truncation {data_args.truncation}"
            + _subsets(data_args, results, args.seed),
            "num_parameters": results.get("num_parameters"),
            "hyperparameters": {
                "learning_rate": args.learning_rate,
                "per_device_train_batch_size": args.per_device_train_batch_size,
                "num_train_epochs": args.num_train_epochs,
                "max_steps": args.max_steps,
                "warmup_steps": args.warmup_steps,
                "weight_decay": args.weight_decay,
                "seed": args.seed,
                "max_seq_length": data_args.max_seq_length,
                "truncation": data_args.truncation,
            },
            "hardware": results.get("machine"),
            "wall_time_seconds": results.get("train_runtime"),
            "results": evaluation_results(results),
            "scored_on": scored_on(results),
            "labels": shape.names if shape.task.shape != "embedding" else [],
            "text_pair": "text_pair" in input_columns(task),  # a pair model's card loads it as a CrossEncoder too
        },
    )


def _subsets(data_args: DataArguments, results: dict, seed: int) -> str:
    """ "; trained on 4,000 of the 67,349 training examples ..." for each split a run drew a subset of, else ""."""
    sizes = getattr(data_args, "split_sizes", {})
    drawn = [
        f"{verb} {results[f'{role}_samples']:,} of the {sizes[role]:,} {name} examples"
        for role, verb, name in (("train", "trained on", "training"), ("eval", "evaluated on", "evaluation"))
        if role in sizes and results.get(f"{role}_samples", sizes[role]) < sizes[role]
    ]
    return f"; {', '.join(drawn)} (drawn at random with seed {seed})" if drawn else ""


# A regressor whose eval scores spread less than this share of the eval labels' spread gives every example nearly the
# same score: a constant answer, whatever the labels' scale (STS-B's 0-5, a user's 0-1 or 0-100).
LOW_SPREAD = 0.01


def report_against_baselines(
    results: dict, task: TaskSpec, sizes: dict[str, int], prediction: PredictionOutput, names: list[str]
) -> None:
    """Log the main metric of each scored split (`sizes`: "eval", and "test" when there is one: split -> examples)
    beside its no-learning baselines, saying where the eval split is the test split that checkpoints were chosen on;
    warn when a baseline beats the model, and when the model answers one thing (read from the eval `prediction`, its
    classes named by `names`)."""
    metric = task.main_metric
    chosen_on_test = results.get("checkpoints_chosen_on_test_split")
    for split, examples in sizes.items():
        value = results.get(f"{split}_{metric}", math.nan)
        keys = {name: baseline_key(answer, split) for answer, name in BASELINE_NAMES.items()}
        baselines = {name: results[key] for name, key in keys.items() if results.get(key) is not None}
        # None: a baseline the data at hand did not allow (`baselines.no_learning_scores` logged why)
        beside = [
            f"{name} {results[key]:.4f}" if name in baselines else f"{name} not computed"
            for name, key in keys.items()
            if key in results
        ]
        logger.info(
            "%s_%s %.4f (%d %s examples%s)%s",
            split,
            metric,
            value,
            examples,
            split,
            ": the test split, which checkpoints were chosen on" if chosen_on_test and split == "eval" else "",
            f"; with no learning: {', '.join(beside)}" if beside else "",
        )
        best = max(baselines, key=lambda label: baselines[label], default=None)
        if best is not None and baselines[best] > value:
            logger.warning(
                "The model's %s_%s %.4f is below what no learning scores: %s %.4f.",
                split, metric, value, best, baselines[best],
            )  # fmt: skip
    warn_of_a_constant_answer(results, prediction, names)


def warn_of_a_constant_answer(results: dict, prediction: PredictionOutput, names: list[str]) -> None:
    """Warn when the model gives every eval example the same class (`eval_top_class_share` 1) or the same label set
    (a multi-label task's `eval_top_set_share` 1), naming it, or scores that hardly vary against the labels' own
    spread (`eval_prediction_std` below `LOW_SPREAD` of it): a constant answer, which reads nothing of the texts. The
    constant answer of the baselines is the train split's commonest class; the model's may be another."""
    if results.get("eval_top_set_share") == 1.0:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        thresholds = list(label_thresholds(results.get("multi_label_threshold"), names).values())
        given = [name for name, on in zip(names, labels_above_threshold(np.asarray(logits)[:1], thresholds)[0]) if on]
        logger.warning(
            "The model gives the same labels (%s) to every eval example: a constant answer, which reads nothing of the "
            "texts (try more epochs or another learning rate).",
            ", ".join(given) or "none",
        )
    elif results.get("eval_top_class_share") == 1.0:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        index = int(np.asarray(logits).reshape(len(logits), -1)[0].argmax())
        logger.warning(
            "The model gives the same class (%s) to every eval example: a constant answer, which reads nothing of the "
            "texts (try more epochs or another learning rate).",
            names[index] if index < len(names) else index,
        )
    elif "eval_prediction_std" in results and prediction.label_ids is not None:
        spread = float(np.std(np.asarray(prediction.label_ids, dtype=np.float64)))
        if results["eval_prediction_std"] < LOW_SPREAD * spread:
            logger.warning(
                "The model gives every eval example nearly the same score (spread %.2g against the labels' %.2g): "
                "close to a constant answer (try more epochs or another learning rate).",
                results["eval_prediction_std"],
                spread,
            )


# ---------------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    """Fine-tune and evaluate a model on one task; see the module docstring and `--help`."""
    # 1. Parse: every flag is checked as it is parsed; then what the flags point to, and the task's defaults for the
    # model's width, before anything loads.
    model_args, data_args, training_args = parse_args(argv)
    # Under torchrun or accelerate launch, the other processes log warnings only: each line once, as pretraining does.
    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level)
    set_seed(training_args.seed)
    checkpoint = resolve_paths(model_args, training_args)
    threads = use_threads(training_args.threads)
    logger.info("Training on %s at %s: %s.", describe_hardware(), describe_precision(training_args), threads.describe())
    config = model_config(model_args)
    choose_task_defaults(model_args, data_args, training_args, config)  # BERT's for a wide model
    task = data_args.task_spec  # the task the flags name, from the table

    # 2. Data: the tokenizer (checked against the model's vocabulary), the splits and their labels, checked before any
    # training, and the shape that makes their features.
    tokenizer_name = model_args.tokenizer_name or model_args.model_name_or_path
    tokenizer = load_task_tokenizer(tokenizer_name, model_args.cache_dir)
    check_tokenizer_fits(tokenizer, config.vocab_size, f"tokenizer of {tokenizer_name!r}")
    # Saved with the model as the limit transformers' pipelines cut at: the starting tokenizer's (what pretraining
    # read), at most the model's positions; not --max_seq_length, which would cut a text longer than the fine-tune's
    # features where the model reads further. This package's commands cut as fine-tuning did from config.json.
    tokenizer.model_max_length = min(tokenizer.model_max_length, config.max_position_embeddings)
    raw = load_task_data(data_args, task, model_args.cache_dir, training_args.seed)
    log_predicted_test(task, raw)
    shape = build_task_shape(task, raw, tokenizer, model_args, data_args, training_args)
    # Resumed: a warning where the train split changed since the checkpoint.
    data_record = training_data_record(task, raw, data_args)
    if data_record is not None and training_args.process_index == 0:  # its warning once, from the first process
        data_record.check_resumed(checkpoint)

    # 3. Model: the task's head on the pretrained encoder; a probed head is fitted to the training features.
    model = load_model(model_args, shape)
    check_resumed_model(checkpoint, model)  # resumed: refused for another head, or other labels, before it loads
    features = make_features(shape, raw, data_args, training_args)
    forget_truncation(tokenizer)
    warn_of_unknown_tokens(features["train"], tokenizer, tokenizer_name)
    if checkpoint is None:
        fit_head(model, model_args, shape, features["train"])

    # 4. Trainer and training, with the best checkpoint kept by the task's main metric.
    records = (data_record,) if data_record is not None else ()
    trainer = build_trainer(model, tokenizer, shape, raw, features, training_args, records)
    # An earlier finished run's files (--overwrite_output_dir) stay until this run's replace them (finish_run), so a
    # rerun that fails keeps the earlier run whole.
    log_resumption(checkpoint)
    start = time.perf_counter()
    with stopping_with_one_line(trainer, "finetune"):  # Ctrl-C: one line naming the checkpoint to continue from
        train_result = trainer.train(resume_from_checkpoint=checkpoint)

    # 5. Evaluate: the best model on eval, the test split once (predicted alone when it has no labels), and what no
    # learning scores.
    predictions, scores = evaluate_best_model(trainer, shape, raw, features)
    prediction = predictions["eval"]
    if isinstance(shape, MultiLabelClassificationShape):  # given or chosen on eval: what classify reads in config.json
        model.config.multi_label_threshold = shape.threshold
    results = {**train_result.metrics, **scores, **run_baselines(shape, raw, features, prediction)}
    results.update(describe_run(model, trainer, shape, raw, model_args, data_args, time.perf_counter() - start))

    # 6. Report: every file written (run_folder.finish_run: all_results.json and the model card last), then pushed.
    kept = finish_run(
        trainer,
        lambda folder: write_reports(
            folder, trainer, shape, raw, features, predictions, results, model_args, data_args, task
        ),
    )
    if trainer.is_world_process_zero():  # every process holds the results; the first reports them
        sizes = {role: len(raw[role]) for role in scored_splits(task, raw)}
        report_against_baselines(results, task, sizes, prediction, shape.names)
        print(json.dumps({k: v for k, v in results.items() if k.startswith(("eval_", "test_"))}, indent=2))
        push_training_output(training_args)
        print(kept)  # the intermediate checkpoints removed: a finished fine-tune resumes from none


if __name__ == "__main__":
    main()
