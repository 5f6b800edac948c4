"""What fine-tuning does differently for each task shape, kept apart from the one training setup (`finetuning.py`).

Each shape is a triple, as in transformers' run_glue/run_ner/run_qa examples: preprocess examples into features
(`features`), turn the model's outputs on the features back into per-example predictions and a score
(`compute_metrics`), and write what a person reads (`write_predictions`: predictions.csv and a picture). The
`Auto` head, its config (labels, problem type) and the collator come with the shape too.

| shape | checked before training | picture |
| --- | --- | --- |
| classification | labels inside the class list | confusion_matrix.png |
| regression | numeric labels | regression.png (predicted vs gold) |
| token-classification | equal-length tokens/tags lists, tags inside the tag list | per_type_f1.png |
| question-answering | answer texts found at their offsets in the context | (none) |
| embedding | numeric scores or 0/1 labels, scored eval pairs | regression.png (cosine vs gold) |
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import datasets
import numpy as np
import torch
from transformers import (
    AutoModel,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    EvalPrediction,
    PreTrainedTokenizerBase,
)
from transformers.trainer_utils import PredictionOutput

from ..metrics import ClassificationMetrics, RegressionMetrics, load_metric
from . import TaskSpec

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeatureSettings:
    """How examples become features: the tokenizer's length limits and the strategies for long inputs."""

    max_seq_length: int = 128
    truncation: str = "head"
    head_tokens: int = 128
    doc_stride: int = 128
    max_answer_length: int = 30
    n_best_size: int = 20


class TaskShape(Protocol):
    """What fine-tuning, the ONNX evaluation and the model card ask of a task shape (the five classes below,
    `SHAPE_CLASSES`): the head (`auto_class`, `config_updates`), features from examples, the collator, the metric on
    the examples and the predictions a person reads. `names` are the classes, tags or outputs, once
    `prepare_labels` has read them."""

    @property
    def task(self) -> TaskSpec: ...

    @property
    def names(self) -> list[str]: ...

    @property
    def auto_class(self) -> Any: ...  # the transformers Auto class of the head

    @property
    def picture(self) -> str | None: ...  # the file `write_predictions` draws, if any

    def prepare_labels(self, raw: datasets.DatasetDict) -> None: ...

    def config_updates(self) -> dict: ...

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs: Any) -> datasets.Dataset: ...

    def collator(self) -> Any: ...

    def compute_metrics(
        self, raw: datasets.Dataset, features: datasets.Dataset
    ) -> Callable[[EvalPrediction], dict]: ...

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None: ...


def _logits(prediction: EvalPrediction | PredictionOutput) -> np.ndarray:
    predictions = prediction.predictions
    return predictions[0] if isinstance(predictions, tuple) else predictions


def class_config(names: list[str]) -> dict:
    """The config fields of a head over `names` (classes or tags), in id order."""
    return {
        "num_labels": len(names),
        "id2label": dict(enumerate(names)),
        "label2id": {name: i for i, name in enumerate(names)},
    }


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# ------------------------------------------------------------------------------------------ sequence classification
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


def make_text_tokenize_function(
    tokenizer: PreTrainedTokenizerBase,
    task: TaskSpec,
    label_map: dict | None,
    max_seq_length: int,
    strategy: str,
    head_tokens: int,
) -> Callable[[dict[str, list]], dict[str, list]]:
    """A batched `datasets.map` function: texts -> input_ids, token_type_ids, attention_mask, labels, length.

    Single texts are tokenised whole, then cut by `strategy` (so tail and head+tail see the real end of the
    review); their uncut length ([CLS] and [SEP] included) comes as `text_length`. Pairs use the tokenizer's own
    longest-first truncation, which is what GLUE pair tasks use. Labels are
    class ids through `label_map`, or floats for regression (`label_map` None).
    """
    text, pair, label = task.column("text"), task.columns.get("text_pair"), task.column("label")

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        if pair:
            encoded = dict(tokenizer(batch[text], batch[pair], truncation=True, max_length=max_seq_length))
        else:
            texts = [t if t is not None else "" for t in batch[text]]
            # uncut: cut below by `strategy` (and counted), so the tokenizer's "longer than the maximum" warning would
            # mislead
            pieces = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
            budget = max_seq_length - 2  # room for [CLS] and [SEP]
            input_ids = [
                [tokenizer.cls_token_id] + truncate_ids(ids, budget, strategy, head_tokens) + [tokenizer.sep_token_id]
                for ids in pieces
            ]
            encoded = {
                "input_ids": input_ids,
                "token_type_ids": [[0] * len(ids) for ids in input_ids],
                "attention_mask": [[1] * len(ids) for ids in input_ids],
                "text_length": [len(ids) + 2 for ids in pieces],
            }
        values = batch[label]
        encoded["labels"] = [float(v) for v in values] if label_map is None else [label_map[v] for v in values]
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    return tokenize


def label_mapping(raw: datasets.DatasetDict, label_column: str, names: list[str] | None) -> tuple[list[str], dict]:
    """Class names and a map from raw label value to class id; raises on any label outside the label set.

    Integer labels are ids into the names; string labels are names. Without given names, the sorted distinct
    train labels are the classes (integers must then be 0..K-1).
    """
    train_values = sorted(set(raw["train"][label_column]), key=lambda v: (str(type(v)), v))
    is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in train_values)
    if any(isinstance(v, float) for v in train_values) and not is_int:
        raise ValueError(
            f"The labels of column {label_column!r} are numbers such as {train_values[:5]}: a classification task "
            "needs class ids or names. For a score, run a regression task (--task_type regression)."
        )
    if names is None:
        if is_int and train_values != list(range(len(train_values))):
            raise ValueError(
                f"Integer labels must be 0..K-1, got {train_values[:20]}; pass --class_names to name the classes."
            )
        names = [str(v) for v in train_values]
    mapping = {i: i for i in range(len(names))} if is_int else {name: i for i, name in enumerate(names)}
    if len(names) < 2:
        raise ValueError(f"Classification needs at least two labels, got {names}.")
    for role, split in raw.items():
        bad = sorted({v for v in split[label_column] if v not in mapping}, key=str)
        if bad:
            raise ValueError(
                f"Label(s) {bad[:10]} in the {role} split are outside the label set {list(mapping)} (classes {names})."
            )
    return names, mapping


class ClassificationShape:
    """A text or a text pair -> one of K classes (GLUE, IMDB); accuracy, F1 and Matthews correlation."""

    auto_class = AutoModelForSequenceClassification
    picture = "confusion_matrix.png"

    def __init__(self, task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase) -> None:
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.names: list[str] = []
        self.label_map: dict | None = None
        self.long_texts: dict[str, int] = {}  # split -> its texts longer than max_seq_length (cut by the truncation)

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Read and check the label set of every split."""
        names = list(self.task.label_names) if self.task.label_names else None
        self.names, self.label_map = label_mapping(raw, self.task.column("label"), names)

    def config_updates(self) -> dict:
        """What the head's config must say: its classes, one per example (a regressor's folder handed to a
        classification task must not keep its problem type)."""
        return {**class_config(self.names), "problem_type": "single_label_classification"}

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
        """Tokenised examples with labels and lengths (the same for training and evaluation); how many single texts
        were longer than max_seq_length is kept in `long_texts` and logged."""
        s = self.settings
        tokenize = make_text_tokenize_function(
            self.tokenizer, self.task, self.label_map, s.max_seq_length, s.truncation, s.head_tokens
        )
        features = split.map(tokenize, batched=True, remove_columns=split.column_names, desc="Tokenising", **map_kwargs)
        if "text_length" not in features.column_names:
            return features
        name = str(split.split or ("train" if training else "eval"))
        self.long_texts[name] = int(np.sum(np.asarray(features["text_length"]) > s.max_seq_length))
        logger.info(
            "%s of the %s %s texts are longer than %s tokens: read cut to them (--truncation %s%s).",
            f"{self.long_texts[name]:,}", f"{len(features):,}", name, s.max_seq_length, s.truncation,
            f", {s.head_tokens} from the start" if s.truncation == "head+tail" else "",
        )  # fmt: skip
        return features.remove_columns("text_length")

    def collator(self):
        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8)

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return ClassificationMetrics(len(self.names), pairs=True)

    def _text_columns(self, raw: datasets.Dataset, i: int) -> list:
        pair = self.task.columns.get("text_pair")
        return [raw[i][self.task.columns["text"]]] + ([raw[i][pair]] if pair else [])

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv (index, text, [text_pair], label, prediction, p_<class>...) and the confusion matrix."""
        from ..plotting import plot_confusion_matrix

        logits = _logits(prediction)
        labels = np.asarray(prediction.label_ids)
        probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1).numpy()  # (N, num_labels)
        header = ["index", "text"] + (["text_pair"] if self.task.columns.get("text_pair") else [])
        header += ["label", "prediction"] + [f"p_{name}" for name in self.names]
        rows = [
            [i, *self._text_columns(raw, i), self.names[labels[i]], self.names[int(probs[i].argmax())]]
            + [f"{p:.6f}" for p in probs[i]]
            for i in range(len(raw))
        ]
        _write_csv(folder / "predictions.csv", header, rows)
        plot_confusion_matrix(labels.tolist(), logits.argmax(-1).tolist(), self.names, folder / self.picture, title)


class RegressionShape(ClassificationShape):
    """A text pair -> a score (STS-B): one output trained with MSE; Pearson and Spearman correlation."""

    picture = "regression.png"

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Every label must be a number; class names (strings) are refused."""
        column = self.task.columns["label"]
        for role, split in raw.items():
            bad = [v for v in split[column] if isinstance(v, (str, bool)) or not isinstance(v, (int, float))]
            if bad:
                raise ValueError(
                    f"A regression task needs numeric labels, but the {role} split's {column!r} holds {bad[:5]}: "
                    "for class labels run a classification task (--task_type classification)."
                )
        self.names, self.label_map = ["score"], None

    def config_updates(self) -> dict:
        return {"num_labels": 1, "problem_type": "regression", "id2label": {0: "score"}, "label2id": {"score": 0}}

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return RegressionMetrics()

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv (index, text, [text_pair], label, prediction) and the predicted-vs-gold scatter."""
        from ..plotting import plot_regression

        scores = np.asarray(_logits(prediction), dtype=np.float64).reshape(-1)
        labels = np.asarray(prediction.label_ids, dtype=np.float64).reshape(-1)
        header = ["index", "text"] + (["text_pair"] if self.task.columns.get("text_pair") else [])
        # Scores keep float32's full precision (9 digits): a regressor whose scores differ only past the 4th decimal
        # (early in training) must still give back the Pearson/Spearman reported from this file.
        rows = [[i, *self._text_columns(raw, i), f"{labels[i]:.7g}", f"{scores[i]:.9g}"] for i in range(len(raw))]
        _write_csv(folder / "predictions.csv", header + ["label", "prediction"], rows)
        plot_regression(labels, scores, folder / self.picture, title)


# --------------------------------------------------------------------------------------------- token classification
class TokenClassificationShape:
    """Words -> one IOB2 tag per word (CoNLL-2003 NER): the label on each word's first piece, entity-level scores."""

    auto_class = AutoModelForTokenClassification
    picture = "per_type_f1.png"

    def __init__(self, task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase) -> None:
        from . import token_classification

        token_classification.check_fast_tokenizer(tokenizer)
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.names: list[str] = []

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        from .token_classification import check_tags, label_names_from

        tokens, tags = self.task.column("tokens"), self.task.column("tags")
        names = list(self.task.label_names) if self.task.label_names else label_names_from(raw["train"], tags)
        for role, split in raw.items():
            check_tags(split, tokens, tags, names, role)
        self.names = names

    def config_updates(self) -> dict:
        """What the head's config must say: its tags."""
        return class_config(self.names)

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
        from .token_classification import make_word_tokenize_function

        tokenize = make_word_tokenize_function(
            self.tokenizer,
            self.task.column("tokens"),
            self.task.column("tags"),
            {name: i for i, name in enumerate(self.names)},
            self.settings.max_seq_length,
        )
        return split.map(tokenize, batched=True, remove_columns=split.column_names, desc="Tokenising", **map_kwargs)

    def collator(self):
        return DataCollatorForTokenClassification(self.tokenizer, pad_to_multiple_of=8)

    def _word_tags(self, prediction: EvalPrediction | PredictionOutput) -> tuple[list[list[str]], list[list[str]]]:
        from .token_classification import logits_to_word_tags

        return logits_to_word_tags(_logits(prediction), np.asarray(prediction.label_ids), dict(enumerate(self.names)))

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        seqeval = load_metric("seqeval")

        def compute(prediction: EvalPrediction) -> dict[str, float]:
            predictions, references = self._word_tags(prediction)
            scores = seqeval.compute(predictions=predictions, references=references)
            flat = {key: float(value) for key, value in scores.items() if key.startswith("overall_")}
            flat.update({f"{name}_f1": float(value["f1"]) for name, value in scores.items() if isinstance(value, dict)})
            return flat

        return compute

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv (index, tokens, tags, predicted tags; space-joined) and the per-type F1 bars."""
        from ..plotting import plot_per_type_f1

        predictions, references = self._word_tags(prediction)
        tokens = raw[self.task.columns["tokens"]]
        rows = [
            [i, " ".join(tokens[i][: len(references[i])]), " ".join(references[i]), " ".join(predictions[i])]
            for i in range(len(raw))
        ]
        _write_csv(folder / "predictions.csv", ["index", "tokens", "label", "prediction"], rows)
        scores = load_metric("seqeval").compute(predictions=predictions, references=references)
        per_type = {name: value for name, value in scores.items() if isinstance(value, dict)}
        if per_type:
            plot_per_type_f1(per_type, folder / self.picture, title)


# --------------------------------------------------------------------------------------------- question answering
class QuestionAnsweringShape:
    """Question + context -> the answer's span in the context (SQuAD v1.1): windows of the context with a stride,
    start/end logits turned back into text, exact match and F1 as the official script computes them."""

    auto_class = AutoModelForQuestionAnswering
    picture = None

    def __init__(self, task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase) -> None:
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.names: list[str] = []

    def _columns(self) -> dict[str, str]:
        return {
            "question_column": self.task.column("question"),
            "context_column": self.task.column("context"),
            "answers_column": self.task.column("answers"),
        }

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        from .question_answering import check_answers

        for role, split in raw.items():  # every split is trained on or scored, and SQuAD scores need an answer
            check_answers(split, split_name=role, require_answer=True, **self._columns())

    def config_updates(self) -> dict:
        return {"num_labels": 2}

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
        from .question_answering import prepare_eval_features, prepare_train_features

        s = self.settings
        kwargs = {"tokenizer": self.tokenizer, "max_seq_length": s.max_seq_length, "doc_stride": s.doc_stride}
        kwargs.update(self._columns())
        if training:
            return split.map(
                prepare_train_features,
                fn_kwargs=kwargs,
                batched=True,
                remove_columns=split.column_names,
                desc="Windowing",
                **map_kwargs,
            )
        return split.map(
            prepare_eval_features,
            fn_kwargs={**kwargs, "id_column": self.task.columns["id"], "with_positions": True},
            batched=True,
            remove_columns=split.column_names,
            desc="Windowing",
            **map_kwargs,
        )

    def collator(self):
        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8)

    def _answers(self, raw: datasets.Dataset, features: datasets.Dataset, prediction) -> dict[str, dict]:
        from .question_answering import postprocess_predictions

        start_logits, end_logits = prediction.predictions[:2]
        return postprocess_predictions(
            raw,
            features,
            start_logits,
            end_logits,
            n_best_size=self.settings.n_best_size,
            max_answer_length=self.settings.max_answer_length,
            id_column=self.task.column("id"),
            context_column=self.task.column("context"),
        )

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        squad = load_metric("squad")
        id_column, answers_column = self.task.columns["id"], self.task.columns["answers"]

        def compute(prediction: EvalPrediction) -> dict[str, float]:
            answers = self._answers(raw, features, prediction)
            predictions = [{"id": str(i), "prediction_text": answers[str(i)]["text"]} for i in raw[id_column]]
            references = [
                {"id": str(i), "answers": a} for i, a in zip(raw[id_column], raw[answers_column], strict=True)
            ]
            return squad.compute(predictions=predictions, references=references)

        return compute

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv: index, id, question, gold answers (" | "-joined), predicted answer, its score."""
        answers = self._answers(raw, features, prediction)
        c = self.task.columns
        rows = []
        for i, example in enumerate(raw):
            found = answers[str(example[c["id"]])]
            gold = " | ".join(example[c["answers"]]["text"])
            rows.append([i, example[c["id"]], example[c["question"]], gold, found["text"], f"{found['score']:.6f}"])
        _write_csv(folder / "predictions.csv", ["index", "id", "question", "label", "prediction", "score"], rows)


# ------------------------------------------------------------------------------------------------------- embedding
class EmbeddingShape:
    """A pair of texts (and a similarity score or a match label), or one text -> a bi-encoder whose cosine says how
    alike two texts are (`hf_bertscratch.embedding`); scored by the Spearman correlation of the eval pairs' cosines
    with their labels.

    The objective follows the data unless named (`objective`): cosine for numeric scores with more than two values,
    in-batch negatives on the matching pairs for 0/1 labels (or pairs without labels), SimCSE for single texts.
    """

    auto_class = AutoModel
    picture = "regression.png"

    def __init__(
        self,
        task: TaskSpec,
        settings: FeatureSettings,
        tokenizer: PreTrainedTokenizerBase,
        objective: str = "auto",
        pooling: str = "mean",
    ) -> None:
        from ..embedding import EMBEDDING_OBJECTIVES

        if objective not in EMBEDDING_OBJECTIVES:
            raise ValueError(f"Unknown --embedding_objective {objective!r}; expected one of {EMBEDDING_OBJECTIVES}.")
        if not task.columns.get("text_pair") and objective != "simcse":
            raise ValueError(
                "An embedding task trains on pairs of texts: name the second text's column with --text_pair_column "
                "(and the score's with --label_column), or train on single texts with --embedding_objective simcse."
            )
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.objective, self.pooling = objective, pooling
        self.names: list[str] = ["cosine"]
        self.label_range: tuple[float, float] | None = None

    def _labels(self, split: datasets.Dataset) -> list | None:
        column = self.task.columns.get("label")
        return list(split[column]) if column and column in split.column_names else None

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Check that labels are numbers, choose the objective from the train labels, and require scored eval pairs."""
        column = self.task.columns.get("label")
        for role, split in raw.items():
            values = self._labels(split)
            bad = [v for v in values or [] if isinstance(v, (str, bool)) or not isinstance(v, (int, float))]
            if bad:
                raise ValueError(
                    f"An embedding task's labels are similarity scores or 0/1 match labels, but the {role} split's "
                    f"{column!r} holds {bad[:5]}."
                )
        train = self._labels(raw["train"])
        if self.objective == "auto":
            binary = train is not None and set(train) <= {0, 1}
            self.objective = "cosine" if train is not None and not binary else "in-batch"
        if self.objective == "cosine":
            if train is None:
                raise ValueError("--embedding_objective cosine needs similarity scores: name them with --label_column.")
            self.label_range = (float(min(train)), float(max(train)))
        if self._labels(raw["eval"]) is None or not self.task.columns.get("text_pair"):
            raise ValueError(
                "An embedding model is evaluated on scored pairs: the eval split needs --text_pair_column and a "
                "--label_column of similarity scores or 0/1 match labels."
            )

    def config_updates(self) -> dict:
        return {}

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
        """Each text tokenised alone ([CLS] text [SEP]); the second text's features under `pair_`; labels as floats.
        SimCSE trains on every distinct text of the split, each alone; in-batch negatives on matching pairs only."""
        text, pair = self.task.column("text"), self.task.columns.get("text_pair")
        label = self.task.columns.get("label")
        label = label if label and label in split.column_names else None
        limit = self.settings.max_seq_length
        if training and self.objective == "simcse":
            texts = [t for c in (text, pair) if c for t in split[c] if t and t.strip()]
            split = datasets.Dataset.from_dict({"text": list(dict.fromkeys(texts))})
            text, pair, label = "text", None, None
        elif training and self.objective == "in-batch" and label:
            split = split.filter(lambda row: row[label] == 1, desc="Matching pairs")

        def tokenize(batch: dict[str, list]) -> dict[str, list]:
            first = self.tokenizer(batch[text], truncation=True, max_length=limit)
            encoded = dict(first)
            lengths = [len(ids) for ids in first["input_ids"]]
            if pair:
                second = self.tokenizer(batch[pair], truncation=True, max_length=limit)
                encoded.update({f"pair_{k}": v for k, v in second.items()})
                lengths = [max(a, len(b)) for a, b in zip(lengths, second["input_ids"])]
            if label:
                encoded["labels"] = [float(v) for v in batch[label]]
            encoded["length"] = lengths
            return encoded

        return split.map(tokenize, batched=True, remove_columns=split.column_names, desc="Tokenising", **map_kwargs)

    def collator(self):
        from ..embedding import PairCollator

        return PairCollator(self.tokenizer)

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return RegressionMetrics()

    def write_predictions(
        self, folder: Path, raw: datasets.Dataset, features: datasets.Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv (index, text, text_pair, label, cosine), the cosine-vs-label scatter, and the
        sentence-transformers files that make the folder a `SentenceTransformer`."""
        from ..embedding import write_sentence_transformers_files
        from ..plotting import plot_regression

        cosines = np.asarray(_logits(prediction), dtype=np.float64).reshape(-1)
        labels = np.asarray(prediction.label_ids, dtype=np.float64).reshape(-1)
        c = self.task.columns
        rows = [
            [i, raw[i][c["text"]], raw[i][c["text_pair"]], f"{labels[i]:.7g}", f"{cosines[i]:.9g}"]
            for i in range(len(raw))
        ]
        _write_csv(folder / "predictions.csv", ["index", "text", "text_pair", "label", "prediction"], rows)
        plot_regression(labels, cosines, folder / self.picture, title)
        dimension = json.loads((folder / "config.json").read_text(encoding="utf-8"))["hidden_size"]
        write_sentence_transformers_files(folder, self.pooling, self.settings.max_seq_length, dimension)


SHAPE_CLASSES: dict[str, Callable[..., TaskShape]] = {
    "classification": ClassificationShape,
    "regression": RegressionShape,
    "token-classification": TokenClassificationShape,
    "question-answering": QuestionAnsweringShape,
    "embedding": EmbeddingShape,
}


def build_shape(
    task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase, **options: object
) -> TaskShape:
    """The shape object that pre- and post-processes `task`'s examples (`options`: the embedding shape's objective
    and pooling)."""
    return SHAPE_CLASSES[task.shape](task, settings, tokenizer, **options)


__all__ = [
    "SHAPE_CLASSES",
    "TRUNCATION_STRATEGIES",
    "ClassificationShape",
    "EmbeddingShape",
    "FeatureSettings",
    "QuestionAnsweringShape",
    "RegressionShape",
    "TaskShape",
    "TokenClassificationShape",
    "build_shape",
    "label_mapping",
    "make_text_tokenize_function",
    "truncate_ids",
]
