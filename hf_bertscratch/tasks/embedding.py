"""Sentence embeddings as a task shape: a pair of texts (and a similarity score or a match label), or one text, ->
a bi-encoder (`hf_bertscratch.embedding`: its objectives, collator, trainer and sentence-transformers files) scored by
the Spearman correlation of the eval pairs' cosines with their labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import datasets
import numpy as np
from transformers import AutoModel, EvalPrediction, PreTrainedTokenizerBase
from transformers.trainer_utils import PredictionOutput

from ..embedding import EMBEDDING_OBJECTIVES, PairCollator, write_sentence_transformers_files
from ..metrics import RegressionMetrics
from . import TaskSpec
from .features import FeatureSettings, prediction_labels, prediction_logits, texts_of, write_csv


class EmbeddingShape:
    """A pair of texts (and a similarity score or a match label), or one text -> a bi-encoder whose cosine says how
    alike two texts are (`hf_bertscratch.embedding`); scored by the Spearman correlation of the eval pairs' cosines
    with their labels.

    `objective` is "cosine", "in-batch" or "simcse" (`hf_bertscratch.embedding`): `--embedding_objective auto` is
    resolved from the train labels when the data loads (`tasks.data.load_task_data`).
    """

    auto_class = AutoModel
    picture = "regression.png"

    def __init__(
        self,
        task: TaskSpec,
        settings: FeatureSettings,
        tokenizer: PreTrainedTokenizerBase,
        objective: str,
        pooling: str = "mean",
    ) -> None:
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
        """Check that labels are numbers (or booleans, JSON's true and false: match labels), read the cosine
        objective's label range, and require scored eval pairs."""
        column = self.task.columns.get("label")
        for role, split in raw.items():
            values = self._labels(split)
            bad = [v for v in values or [] if not isinstance(v, (int, float))]  # a bool is an int: 0/1
            if bad:
                raise ValueError(
                    f"An embedding task's labels are similarity scores or 0/1 match labels, but the {role} split's "
                    f"{column!r} holds {bad[:5]}."
                )
        train = self._labels(raw["train"])
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
            first = self.tokenizer(texts_of(batch[text]), truncation=True, max_length=limit)
            encoded = dict(first)
            lengths = [len(ids) for ids in first["input_ids"]]
            if pair:
                second = self.tokenizer(texts_of(batch[pair]), truncation=True, max_length=limit)
                encoded.update({f"pair_{k}": v for k, v in second.items()})
                lengths = [max(a, len(b)) for a, b in zip(lengths, second["input_ids"])]
            if label:
                encoded["labels"] = [float(v) for v in batch[label]]
            encoded["length"] = lengths
            return encoded

        return split.map(tokenize, batched=True, remove_columns=split.column_names, desc="Tokenising", **map_kwargs)

    def collator(self):
        return PairCollator(self.tokenizer)

    def compute_metrics(self, raw: datasets.Dataset, features: datasets.Dataset) -> Callable[[EvalPrediction], dict]:
        return RegressionMetrics()

    def write_predictions(
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv (index, text, text_pair, label, cosine), the cosine-vs-label scatter, and the
        sentence-transformers files that make the folder a `SentenceTransformer`. A split without labels (a test
        split predicted, not scored) gets each pair's cosine alone: no label column, no scatter."""
        from ..plotting import plot_regression  # matplotlib loads only when a picture is drawn

        cosines = np.asarray(prediction_logits(prediction), dtype=np.float64).reshape(-1)
        labels = prediction_labels(prediction, scores=True)
        c = self.task.columns
        rows = [
            [i, raw[i][c["text"]], raw[i][c["text_pair"]], *([] if labels is None else [f"{labels[i]:.7g}"])]
            + [f"{cosines[i]:.9g}"]
            for i in range(len(raw))
        ]
        header = ["index", "text", "text_pair"] + (["label"] if labels is not None else []) + ["prediction"]
        write_csv(folder / f"{prefix}predictions.csv", header, rows)
        if labels is not None:
            plot_regression(labels, cosines, folder / f"{prefix}{self.picture}", title)
        dimension = json.loads((folder / "config.json").read_text(encoding="utf-8"))["hidden_size"]
        write_sentence_transformers_files(folder, self.pooling, self.settings.max_seq_length, dimension)


__all__ = ["EmbeddingShape"]
