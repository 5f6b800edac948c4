"""What fine-tuning does differently for each task shape, kept apart from the one training setup (`finetuning.py`):
the table of shapes (`SHAPE_CLASSES`, `build_shape`) and what each must answer (`TaskShape`).

Each shape is a triple, as in transformers' run_glue/run_ner/run_qa examples: preprocess examples into features
(`features`), turn the model's outputs on the features back into per-example predictions and a score
(`compute_metrics`), and write what a person reads (`write_predictions`: predictions.csv and a picture). The
`Auto` head, its config (labels, problem type) and the collator come with the shape too. Each shape lives beside its
data, what they share in `tasks.features`:

| shape | module | checked before training | picture |
| --- | --- | --- | --- |
| classification | `tasks.classification` | labels inside the class list | confusion_matrix.png |
| multi-label-classification | `tasks.classification` | each row's labels inside the label list | per_label_f1.png |
| regression | `tasks.classification` | numeric labels | regression.png (predicted vs gold) |
| token-classification | `tasks.token_classification` | equal-length tokens/tags lists, tags inside the tag list | per_type_f1.png |
| question-answering | `tasks.question_answering` | answer texts found at their offsets in the context | (none) |
| embedding | `tasks.embedding` | numeric scores or 0/1 labels, scored eval pairs | regression.png (cosine vs gold) |

A test split without labels (`TaskSpec.has_labels`: no label, tags or answers column) is predicted, not scored: each
shape makes its features without labels, and `write_predictions`, handed a prediction whose `label_ids` is None,
writes the predictions alone (no label column, no picture).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import datasets
from transformers import EvalPrediction, PreTrainedTokenizerBase
from transformers.trainer_utils import PredictionOutput

from . import TaskSpec
from .classification import (
    ClassificationShape,
    MultiLabelClassificationShape,
    RegressionShape,
    label_mapping,
    make_text_tokenize_function,
)
from .embedding import EmbeddingShape
from .features import TRUNCATION_STRATEGIES, FeatureSettings, truncate_ids
from .question_answering import QuestionAnsweringShape
from .token_classification import TokenClassificationShape


class TaskShape(Protocol):
    """What fine-tuning, the ONNX evaluation and the model card ask of a task shape (the classes of
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
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None: ...


SHAPE_CLASSES: dict[str, Callable[..., TaskShape]] = {
    "classification": ClassificationShape,
    "multi-label-classification": MultiLabelClassificationShape,
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
    "MultiLabelClassificationShape",
    "QuestionAnsweringShape",
    "RegressionShape",
    "TaskShape",
    "TokenClassificationShape",
    "build_shape",
    "label_mapping",
    "make_text_tokenize_function",
    "truncate_ids",
]
