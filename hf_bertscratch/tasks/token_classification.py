"""Named-entity recognition data: read CoNLL files, tokenise words into labelled pieces, turn logits back into tags.

One implementation of each step, shared by training and evaluation (the run_ner.py pair):

- preprocess: (`hf_bertscratch.data.read_conll` ->) `label_names_from` -> `check_tags` ->
  `make_word_tokenize_function` (via `tokenization.align_labels_with_pieces`): sentences of words and tags become input_ids and
  piece labels.
- postprocess: `logits_to_word_tags` turns (N, T, C) logits back into one tag per scored word, the lists of tag
  strings the seqeval metric takes.

Inference on raw text is `hf_bertscratch.inference.tag_entities` (transformers' "token-classification" pipeline).

Only the first word piece of each word carries the word's label; the other pieces, [CLS], [SEP] and padding get -100,
which the loss and `logits_to_word_tags` skip. So a word is scored once, however many pieces it is split into.

`TokenClassificationShape` (at the end) is these steps as fine-tuning's task shape (`hf_bertscratch.tasks.shapes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import datasets
import numpy as np
from transformers import (
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    EvalPrediction,
    PreTrainedTokenizerBase,
)
from transformers.trainer_utils import PredictionOutput

from ..metrics import load_metric
from ..tokenization import IGNORE_INDEX, align_labels_with_pieces, check_fast_tokenizer
from . import (
    CONLL2003_LABELS,  # the Hub dataset's ClassLabel names in id order (the conll2003 task's labels)
    TaskSpec,
)
from .features import (
    FeatureSettings,
    class_config,
    prediction_labels,
    prediction_logits,
    report_labels,
    write_csv,
)


# ------------------------------------------------------------------------------------------------ labels
def label_names_from(dataset: datasets.Dataset | datasets.DatasetDict, tags_column: str) -> list[str]:
    """The label list, its index being the class id.

    A ClassLabel tags column (the Hub's `conll2003`) gives its names. String tags give their sorted distinct values
    in the train split (a DatasetDict's "train"), with "O" first when present, so it gets id 0; a tag seen only in
    another split is then unknown and `check_tags` rejects it. Pass `CONLL2003_LABELS` instead to number CoNLL-2003
    tags as the Hub does.
    """
    if isinstance(dataset, datasets.DatasetDict):
        if "train" not in dataset:
            raise ValueError(f"No train split to read the labels from; the splits are {list(dataset)}.")
        dataset = dataset["train"]
    if tags_column not in dataset.column_names:
        raise ValueError(
            f"Column {tags_column!r} not in the dataset; it has {dataset.column_names}: name yours with --tags_column."
        )
    feature = getattr(dataset.features[tags_column], "feature", None)  # the element type of a list column
    if isinstance(feature, datasets.ClassLabel):
        return list(feature.names)
    tags = {tag for row in dataset[tags_column] if isinstance(row, list) for tag in row}  # others: `check_tags`
    if not all(isinstance(tag, str) for tag in tags):
        raise ValueError(
            f"Column {tags_column!r} holds non-string tags {sorted(map(repr, tags))[:10]} without ClassLabel names: "
            "name the tags in id order with --class_names."
        )
    return sorted(tags, key=lambda tag: (tag != "O", tag))


def _is_known(tag: object, label_names: Sequence[str], names: set[str]) -> bool:
    """Whether `tag` is one of the labels: a name, or an id into `label_names` (a ClassLabel column)."""
    if isinstance(tag, str):
        return tag in names
    return isinstance(tag, (int, np.integer)) and not isinstance(tag, bool) and bool(0 <= tag < len(label_names))


def check_tags(
    dataset: datasets.Dataset, tokens_column: str, tags_column: str, label_names: Sequence[str], split_name: str
) -> None:
    """Raise ValueError, naming the split, row and values, unless every row has a list of words and a list of as
    many tags, each a name in `label_names` or an id into it."""
    missing = [column for column in (tokens_column, tags_column) if column not in dataset.column_names]
    if missing:
        named = {"--tokens_column": tokens_column, "--tags_column": tags_column}
        flags = " and ".join(flag for flag, column in named.items() if column in missing)
        raise ValueError(
            f"Column(s) {missing} not in the {split_name} split; it has {dataset.column_names}: name yours with {flags}."
        )
    names = set(label_names)
    for row, (words, tags) in enumerate(zip(dataset[tokens_column], dataset[tags_column])):
        where = f"Row {row} of the {split_name} split"
        if not isinstance(words, list) or not isinstance(tags, list):
            raise ValueError(
                f"{where}: columns {tokens_column!r} and {tags_column!r} must hold lists (a word and a tag per "
                f"token), got {type(words).__name__} {words!r:.100} and {type(tags).__name__} {tags!r:.100}."
            )
        if len(words) != len(tags):
            raise ValueError(f"{where} has {len(words)} words but {len(tags)} tags: {words!r:.200} / {tags!r:.200}.")
        unknown = [tag for tag in tags if not _is_known(tag, label_names, names)]
        if unknown:
            raise ValueError(
                f"{where}: tag {unknown[0]!r} is not in the label list {list(label_names)}; to train with tags the "
                "train split lacks, or integer tags beyond it, name every tag in id order with --class_names."
            )


# ------------------------------------------------------------------------------------------------ preprocess
def _tag_ids(tags: list, label_to_id: dict) -> list[int]:
    """Label ids of one sentence's tags: strings through `label_to_id`, ints (ClassLabel ids) as they are."""
    try:
        return [label_to_id[tag] if isinstance(tag, str) else int(tag) for tag in tags]
    except KeyError as error:
        raise ValueError(f"Tag {error.args[0]!r} is not in the label list {list(label_to_id)}.") from None


def make_word_tokenize_function(
    tokenizer: PreTrainedTokenizerBase,
    tokens_column: str,
    tags_column: str,
    label_to_id: dict,
    max_seq_length: int,
) -> Callable[[dict[str, list]], dict[str, list]]:
    """A batched `datasets.map` function: word lists and tags -> input_ids, token_type_ids, attention_mask, labels
    and length, each a list per sentence of T <= max_seq_length entries (length is T, for length grouping).

    Words are tokenised with is_split_into_words=True and cut at max_seq_length pieces; words past the cut (and words
    the tokenizer turns into no piece) get no label, so they are not scored. Map with
    `remove_columns=dataset.column_names` to keep only these columns. Sentences without tags (a test split to
    predict: no `tags_column`) get `word_starts` instead of labels: 0 on the first piece of each word, -100 elsewhere,
    the positions its predicted tags are read at.

    Args:
        tags_column: tag strings, mapped by `label_to_id`, or ints (a ClassLabel column), taken as ids already.

    Raises:
        ValueError: for a slow tokenizer (see `check_fast_tokenizer`).
    """
    check_fast_tokenizer(tokenizer)
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS] word [SEP]), got {max_seq_length}.")

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(
            batch[tokens_column],
            is_split_into_words=True,
            truncation=True,
            max_length=max_seq_length,
            return_token_type_ids=True,
            return_attention_mask=True,
        )
        if tags_column in batch:
            name = "labels"
            word_labels = [_tag_ids(tags, label_to_id) for tags in batch[tags_column]]
        else:  # no tags to learn or score: where each word starts, to read its predicted tag there
            name = "word_starts"
            word_labels = [[0] * len(words) for words in batch[tokens_column]]
        return {
            "input_ids": encoded["input_ids"],
            "token_type_ids": encoded["token_type_ids"],
            "attention_mask": encoded["attention_mask"],
            name: [align_labels_with_pieces(encoded.word_ids(i), ids) for i, ids in enumerate(word_labels)],
            "length": [len(ids) for ids in encoded["input_ids"]],
        }

    return tokenize


# ------------------------------------------------------------------------------------------------ postprocess
def logits_to_word_tags(
    logits: np.ndarray, labels: np.ndarray, id_to_label: dict[int, str] | Sequence[str]
) -> tuple[list[list[str]], list[list[str]]]:
    """Predicted and reference tags per sentence, at the scored (first-piece) positions only, as seqeval takes them.

    Args:
        logits: (N, T, C) scores per piece.
        labels: (N, T) label ids, -100 where not scored (other pieces, special tokens, the Trainer's padding).
        id_to_label: a label name per id (the config's id2label, or the label list).

    Returns:
        (predictions, references): N lists of tag strings each, the i-th lists of equal length.
    """
    if logits.ndim != 3 or logits.shape[:2] != labels.shape:
        raise ValueError(f"Expected logits (N, T, C) and labels (N, T), got {logits.shape} and {labels.shape}.")
    predicted_ids = logits.argmax(axis=-1)  # (N, T)
    scored = labels != IGNORE_INDEX  # (N, T)
    predictions = [[id_to_label[int(i)] for i in row[mask]] for row, mask in zip(predicted_ids, scored)]
    references = [[id_to_label[int(i)] for i in row[mask]] for row, mask in zip(labels, scored)]
    return predictions, references


__all__ = [
    "CONLL2003_LABELS",
    "IGNORE_INDEX",
    "TokenClassificationShape",
    "check_tags",
    "label_names_from",
    "logits_to_word_tags",
    "make_word_tokenize_function",
]


# ------------------------------------------------------------------------------------------------ the task shape
class TokenClassificationShape:
    """Words -> one IOB2 tag per word (CoNLL-2003 NER): the label on each word's first piece, entity-level scores."""

    auto_class = AutoModelForTokenClassification
    picture = "per_type_f1.png"

    def __init__(self, task: TaskSpec, settings: FeatureSettings, tokenizer: PreTrainedTokenizerBase) -> None:
        check_fast_tokenizer(tokenizer)
        self.task, self.settings, self.tokenizer = task, settings, tokenizer
        self.names: list[str] = []

    def prepare_labels(self, raw: datasets.DatasetDict) -> None:
        """Read the tag list (the task's, else the train split's) and check every split's tags; a test split without
        tags is predicted, not scored. The tags are logged with their train words, and a tag too rare to learn or
        missing from the eval split warned of (`report_labels`: rare by its count alone, as entity tags are few
        beside O)."""
        tokens, tags = self.task.column("tokens"), self.task.column("tags")
        names = list(self.task.label_names) if self.task.label_names else label_names_from(raw["train"], tags)
        for role, split in raw.items():
            if self.task.has_labels(split.column_names) or role != "test":
                check_tags(split, tokens, tags, names, role)
        self.names = names
        label_to_id = {name: i for i, name in enumerate(names)}
        ids = {
            role: [i for row in split[tags] for i in _tag_ids(row, label_to_id)]
            for role, split in raw.items()
            if tags in split.column_names
        }
        report_labels("tag", names, ids["train"], ids.get("eval"), tags, unit="words", share=None)

    def config_updates(self) -> dict:
        """What the head's config must say: its tags."""
        return class_config(self.names)

    def features(self, split: datasets.Dataset, training: bool, **map_kwargs) -> datasets.Dataset:
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

    def _word_tags(
        self, prediction: EvalPrediction | PredictionOutput, features: datasets.Dataset | None = None
    ) -> tuple[list[list[str]], list[list[str]]]:
        """Predicted and gold tags per sentence; for a split without tags, read where its `features`' words start
        (the gold tags then mean nothing)."""
        logits, labels = prediction_logits(prediction), prediction_labels(prediction)
        if labels is None:
            assert features is not None, "a split without tags is read where its features' words start"
            labels = np.full(logits.shape[:2], IGNORE_INDEX)  # (N, T), T the logits' padded length
            for row, starts in enumerate(features["word_starts"]):
                labels[row, : len(starts)] = starts
        return logits_to_word_tags(logits, labels, dict(enumerate(self.names)))

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
        self,
        folder: Path,
        raw: datasets.Dataset,
        features: datasets.Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv (index, tokens, tags, predicted tags; space-joined) and the per-type F1 bars; a split
        without tags (`prediction.label_ids` None) its predicted tags alone, with no label column and no bars."""
        from ..plotting import plot_per_type_f1  # matplotlib loads only when a picture is drawn

        predictions, references = self._word_tags(prediction, features)
        labelled = prediction.label_ids is not None
        tokens = raw[self.task.columns["tokens"]]
        rows = [
            [i, " ".join(tokens[i][: len(predictions[i])]), *([" ".join(references[i])] if labelled else [])]
            + [" ".join(predictions[i])]
            for i in range(len(raw))
        ]
        header = ["index", "tokens"] + (["label"] if labelled else []) + ["prediction"]
        write_csv(folder / f"{prefix}predictions.csv", header, rows)
        if not labelled:
            return
        scores = load_metric("seqeval").compute(predictions=predictions, references=references)
        per_type = {name: value for name, value in scores.items() if isinstance(value, dict)}
        if per_type:
            plot_per_type_f1(per_type, folder / f"{prefix}{self.picture}", title)
