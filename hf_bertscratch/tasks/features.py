"""What every task shape shares in turning examples into features and predictions into files: the feature settings
(`FeatureSettings`), the cut of a long text (`truncate_ids`), a missing text read as empty (`texts_of`), a head's
label fields (`class_config`), its labels' train counts logged and a rare one warned of (`report_labels`), the logits
and labels of a prediction (`prediction_logits`, `prediction_labels`: none for a test split predicted, not scored)
and the predictions.csv writer (`write_csv`).

The shapes themselves live beside their data (`tasks.classification`, `tasks.token_classification`,
`tasks.question_answering`, `tasks.embedding`), and `tasks.shapes` is their table (`build_shape`).
"""

from __future__ import annotations

import csv
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from transformers import EvalPrediction
from transformers.trainer_utils import PredictionOutput

logger = logging.getLogger(__name__)

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")
# A label (a class, a tag) with at most this many train examples, or (classes) under this share of them, is too rare
# to learn: most often a misspelt label, which becomes a label of its own.
RARE_LABEL_COUNT = 2
RARE_LABEL_SHARE = 0.01


@dataclass(frozen=True)
class FeatureSettings:
    """How examples become features: the tokenizer's length limits and the strategies for long inputs."""

    max_seq_length: int = 128
    truncation: str = "head"
    head_tokens: int = 128
    doc_stride: int = 128
    max_answer_length: int = 30
    n_best_size: int = 20


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


def texts_of(values: list[str | None]) -> list[str]:
    """A text column's values as the tokenizer takes them: a missing text (an empty csv field, a JSON null) is an
    empty text, in a single text and either side of a pair alike."""
    return [value if value is not None else "" for value in values]


def class_config(names: list[str]) -> dict:
    """The config fields of a head over `names` (classes or tags), in id order."""
    return {
        "num_labels": len(names),
        "id2label": dict(enumerate(names)),
        "label2id": {name: i for i, name in enumerate(names)},
    }


def report_labels(
    kind: str,
    names: list[str],
    train_ids: Iterable[int],
    eval_ids: Iterable[int] | None,
    column: str,
    unit: str = "examples",
    share: float | None = RARE_LABEL_SHARE,
) -> None:
    """Log the labels (`kind`: "class", "tag") with their train counts (of `unit`) in one line, and warn, a line each,
    of a label seen in training too rarely to learn (at most `RARE_LABEL_COUNT` times, or under `share` of the train
    labels) or, where the eval split is labelled (`eval_ids` not None), not in it. A label no train example holds
    (named by --class_names, unseen) is listed, not warned of."""
    counts = Counter(train_ids)
    total = sum(counts.values())
    evaluated = None if eval_ids is None else set(eval_ids)
    plural = f"{kind}es" if kind.endswith("s") else f"{kind}s"
    listed = ", ".join(f"{name} {counts[i]:,}" for i, name in enumerate(names))
    logger.info(
        "%d %s in the train split's %r column, with their train %s: %s.", len(names), plural, column, unit, listed
    )
    for i, name in enumerate(names):
        count = counts[i]
        rare = 0 < count and (count <= RARE_LABEL_COUNT or (share is not None and count < share * total))
        unscored = 0 < count and evaluated is not None and i not in evaluated
        if not rare and not unscored:
            continue
        why = (
            f"too few to learn it from; a misspelt label in the train file is a {kind} of its own"
            if rare
            else "the eval scores say nothing of it"
        )
        logger.warning(
            "%s %r has %s of the %s train %s%s: %s.",
            kind.capitalize(), name, f"{count:,}", f"{total:,}", unit,
            " and none of the eval split's" if unscored else "", why,
        )  # fmt: skip


def prediction_logits(prediction: EvalPrediction | PredictionOutput) -> np.ndarray:
    """The logits of a prediction (the first of its outputs when the model gives several)."""
    predictions = prediction.predictions
    return predictions[0] if isinstance(predictions, tuple) else predictions


def prediction_labels(prediction: EvalPrediction | PredictionOutput, scores: bool = False) -> np.ndarray | None:
    """The labels of a prediction as an array, one float per example with `scores` (regression, embedding), or None
    for a split without labels: a test split that is predicted, not scored, whose predictions.csv has no label column
    and no picture beside it."""
    if prediction.label_ids is None:
        return None
    labels = np.asarray(prediction.label_ids)
    return labels.astype(np.float64).reshape(-1) if scores else labels


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    """A csv file of `header` and `rows` (predictions.csv)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


__all__ = [
    "TRUNCATION_STRATEGIES",
    "FeatureSettings",
    "class_config",
    "prediction_labels",
    "prediction_logits",
    "report_labels",
    "truncate_ids",
    "write_csv",
]
