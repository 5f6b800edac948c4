"""Fine-tuning tasks by shape: the task table (this module) and what each shape does with its examples.

| module | what it holds |
| --- | --- |
| `hf_bertscratch.tasks` | the task table: every task BERT is fine-tuned for, its shape, data, columns and metric |
| `hf_bertscratch.tasks.shapes` | a class per shape: its head, features, collator, metric, predictions (`build_shape`) |
| `hf_bertscratch.tasks.token_classification` | words and IOB2 tags to labelled pieces and back; `tag_entities` |
| `hf_bertscratch.tasks.question_answering` | SQuAD json, question/context windows and answers back; `answer_question` |

The table imports none of the modules beside it, so each of them imports the table without a cycle.

A task's *shape* says which head it trains and how its examples become features and its predictions a score:

| shape | head | examples | metric |
| --- | --- | --- | --- |
| classification | `AutoModelForSequenceClassification` | a text (or a pair) and a class | accuracy, F1, Matthews |
| regression | `AutoModelForSequenceClassification`, one output, MSE | a pair and a number | Pearson, Spearman |
| token-classification | `AutoModelForTokenClassification` | words and one IOB2 tag per word | entity P/R/F1 |
| question-answering | `AutoModelForQuestionAnswering` | question, context, answers | exact match, F1 |
| embedding | `AutoModel`, a bi-encoder (`hf_bertscratch.embedding`) | a pair (and a score), or one text | cosine Spearman |

`TASKS` names the tasks of GLUE, IMDB, CoNLL-2003 and SQuAD; a user's own data runs under a shape with
`--task_type` and the column flags (`resolve_task` merges both). `task_texts` reads a split's text without its labels,
what task-adaptive pretraining (`pretraining --task_text`) trains on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..arguments import did_you_mean

SHAPES = ("classification", "regression", "token-classification", "question-answering", "embedding")

# Column roles each shape reads, with the column name a user's own data is assumed to have.
SHAPE_COLUMNS: dict[str, dict[str, str | None]] = {
    "classification": {"text": "text", "text_pair": None, "label": "label"},
    "regression": {"text": "text", "text_pair": None, "label": "label"},
    "token-classification": {"tokens": "tokens", "tags": "ner_tags"},
    "question-answering": {"id": "id", "question": "question", "context": "context", "answers": "answers"},
    "embedding": {"text": "text", "text_pair": None, "label": "label"},  # labels optional for training
}

# The metric that picks the best checkpoint and heads the results, per shape (a task may name another).
SHAPE_MAIN_METRIC: dict[str, str] = {
    "classification": "accuracy",
    "regression": "spearmanr",
    "token-classification": "overall_f1",
    "question-answering": "f1",
    "embedding": "spearmanr",
}

CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@dataclass(frozen=True)
class TaskSpec:
    """One row of the task table.

    Attributes:
        shape: one of `SHAPES`.
        dataset_name / dataset_config_name: the Hub dataset (also the key of its local copy under `--data_dir`).
        train_split / eval_split: the split trained on and the split checkpoints are chosen on.
        test_split: a split scored once, with the chosen model, at the end (CoNLL-2003's test set); None: none.
        columns: column role -> column name (roles: `SHAPE_COLUMNS[shape]`).
        label_names: class (or tag) names in label-id order; None for regression and question answering.
        main_metric: the metric that picks the best checkpoint and heads the results table.
        metric_label: how the results table names the main metric.
    """

    shape: str
    dataset_name: str
    dataset_config_name: str | None
    train_split: str
    eval_split: str
    columns: dict[str, str | None]
    label_names: tuple[str, ...] | None = None
    test_split: str | None = None
    main_metric: str = ""
    metric_label: str = ""

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"Unknown task shape {self.shape!r}; expected one of {SHAPES}.")
        if not self.main_metric:
            object.__setattr__(self, "main_metric", SHAPE_MAIN_METRIC[self.shape])
        if not self.metric_label:
            object.__setattr__(self, "metric_label", self.main_metric)


def _pair(first: str, second: str) -> dict[str, str | None]:
    return {"text": first, "text_pair": second, "label": "label"}


def _single(text: str) -> dict[str, str | None]:
    return {"text": text, "text_pair": None, "label": "label"}


def _glue(config: str, columns: dict, labels: tuple[str, ...] | None, shape: str = "classification", **kw) -> TaskSpec:
    return TaskSpec(shape, "glue", config, "train", kw.pop("eval_split", "validation"), columns, labels, **kw)


TASKS: dict[str, TaskSpec] = {
    # GLUE (Wang et al. 2019), with GLUE's metrics; the label ids are those of the Hub's `glue` dataset.
    "cola": _glue(
        "cola", _single("sentence"), ("unacceptable", "acceptable"), main_metric="matthews_correlation",
        metric_label="Matthews corr.",
    ),
    "sst2": _glue("sst2", _single("sentence"), ("negative", "positive"), metric_label="accuracy"),
    "mrpc": _glue(
        "mrpc", _pair("sentence1", "sentence2"), ("not_equivalent", "equivalent"), main_metric="f1", metric_label="F1"
    ),
    "stsb": _glue("stsb", _pair("sentence1", "sentence2"), None, shape="regression", metric_label="Spearman"),
    "rte": _glue("rte", _pair("sentence1", "sentence2"), ("entailment", "not_entailment")),
    "wnli": _glue("wnli", _pair("sentence1", "sentence2"), ("not_entailment", "entailment")),
    "mnli": _glue(
        "mnli", _pair("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
        eval_split="validation_matched",
    ),
    "qnli": _glue("qnli", _pair("question", "sentence"), ("entailment", "not_entailment")),
    "qqp": _glue("qqp", _pair("question1", "question2"), ("not_duplicate", "duplicate")),
    # Sentiment of long reviews (Maas et al. 2011): no validation split, so the test split is the one reported.
    "imdb": TaskSpec("classification", "imdb", None, "train", "test", _single("text"), ("neg", "pos")),
    # Named entities (Tjong Kim Sang & De Meulder 2003): checkpoints chosen on validation, test scored at the end.
    "conll2003": TaskSpec(
        "token-classification", "conll2003", None, "train", "validation", {"tokens": "tokens", "tags": "ner_tags"},
        CONLL2003_LABELS, test_split="test", metric_label="entity F1",
    ),
    # Extractive question answering (Rajpurkar et al. 2016), SQuAD v1.1.
    "squad": TaskSpec(
        "question-answering", "squad", None, "train", "validation", dict(SHAPE_COLUMNS["question-answering"]),
        metric_label="F1",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class FinetuneDefaults:
    """The settings `bertscratch finetune` uses for a task when the command line does not name them.

    Attributes:
        learning_rate: peak AdamW rate for a small model (hidden size <= `SMALL_HIDDEN_SIZE`: tiny, mini).
        learning_rate_large: the rate for larger models (BERT's own fine-tuning range, 2e-5 to 5e-5).
        epochs: passes over the training set; the best epoch on dev is the model kept.
        classifier_pooling: what a classification or regression head reads ("cls", "mean" or "segments").
        head_init: how a new classification or regression head starts ("random", or "probe": fitted to the
            frozen pretrained features first).
        max_seq_length: tokens per example (per window for question answering).
        truncation: how a single text longer than `max_seq_length` is cut ("head", "tail", "head+tail").
    """

    learning_rate: float
    learning_rate_large: float
    epochs: float
    classifier_pooling: str = "cls"
    head_init: str = "random"
    max_seq_length: int = 128
    truncation: str = "head"

    def learning_rate_for(self, hidden_size: int) -> float:
        """The default rate for a model of this width."""
        return self.learning_rate if hidden_size <= SMALL_HIDDEN_SIZE else self.learning_rate_large


SMALL_HIDDEN_SIZE = 256  # up to Google's BERT-Mini (4L/H256): small models fine-tune best at 1e-4 to 1e-3

# Per shape, chosen on the task table's dev sets (docs/fine-tuning.md, "Defaults"); TASK_DEFAULTS overrides a task.
SHAPE_DEFAULTS: dict[str, FinetuneDefaults] = {
    "classification": FinetuneDefaults(3e-4, 3e-5, 5),
    "regression": FinetuneDefaults(3e-4, 3e-5, 5),
    "token-classification": FinetuneDefaults(1e-3, 5e-5, 3),
    # transformers' run_qa.py: 384-token windows with a 128-token stride.
    "question-answering": FinetuneDefaults(3e-4, 3e-5, 2, max_seq_length=384),
    "embedding": FinetuneDefaults(3e-4, 3e-5, 5, classifier_pooling="mean"),
}
# Sentiment (SST-2, IMDB): the head reads the mean and the maximum of the last states, and a small model trains at
# 1e-3. From the quick start's model (one seed each, results/single-diagnosis/): IMDB on 5,000 reviews 81.0 against
# 72.9 for [CLS] at 2e-4 (the former default); SST-2 on 20,000 sentences 78.7 against 76.7.
SENTIMENT_HEAD = {"classifier_pooling": "mean-max"}
TASK_DEFAULTS: dict[str, FinetuneDefaults] = {
    "cola": replace(SHAPE_DEFAULTS["classification"], max_seq_length=64),
    "sst2": FinetuneDefaults(1e-3, 2e-5, 3, max_seq_length=64, **SENTIMENT_HEAD),
    "imdb": FinetuneDefaults(1e-3, 2e-5, 3, max_seq_length=256, **SENTIMENT_HEAD),
}


# A sentence-pair task's head (classification or regression of two texts): each text read by its own mean, the head
# fitted to the frozen features first. From random [CLS] heads, STS-B from the 9-minute model stayed at 11-16
# Spearman while the model's own zero-shot cosine ranked it at 61 (docs/fine-tuning.md, "Sentence pairs").
PAIR_HEAD = {"classifier_pooling": "segments", "head_init": "probe"}


def finetune_defaults(task: TaskSpec, name: str | None = None) -> FinetuneDefaults:
    """The defaults of the table's task `name`, else of `task`'s shape; a sentence-pair classification or regression
    task reads each text by its own mean, with a probed head (`PAIR_HEAD`)."""
    defaults = TASK_DEFAULTS.get(name or "", SHAPE_DEFAULTS[task.shape])
    if task.shape in ("classification", "regression") and task.columns.get("text_pair"):
        defaults = replace(defaults, **PAIR_HEAD)
    return defaults


@dataclass
class TaskOverrides:
    """What a user may say on the command line to change a table task or describe their own data."""

    task: str | None = None
    task_type: str | None = None
    train_split: str | None = None
    eval_split: str | None = None
    test_split: str | None = None
    columns: dict[str, str | None] = field(default_factory=dict)
    label_names: list[str] | None = None


def resolve_task(overrides: TaskOverrides) -> TaskSpec:
    """The task to run: the table's `overrides.task` (if given) with every override applied, or a task of
    `overrides.task_type` on the user's own data (default columns `SHAPE_COLUMNS`).

    Raises:
        ValueError: an unknown task or shape, a shape that contradicts the named task's, a column role the shape
            does not read, or class names given for a regression or question-answering task.
    """
    if overrides.task is not None and overrides.task not in TASKS:
        hint = did_you_mean(overrides.task, TASKS)
        raise ValueError(f"Unknown --task {overrides.task!r}{hint} Expected one of {list(TASKS)} (or give a dataset).")
    if overrides.task_type is not None and overrides.task_type not in SHAPES:
        hint = did_you_mean(overrides.task_type, SHAPES)
        raise ValueError(f"Unknown --task_type {overrides.task_type!r}{hint} Expected one of {list(SHAPES)}.")
    spec = TASKS.get(overrides.task) if overrides.task else None
    if spec is not None and overrides.task_type == "embedding" and spec.shape != "embedding":
        spec = embedding_task(spec, overrides.task)
    if spec is not None and overrides.task_type not in (None, spec.shape):
        raise ValueError(
            f"--task {overrides.task} is a {spec.shape} task, but --task_type {overrides.task_type} was given."
        )
    shape = spec.shape if spec else overrides.task_type or "classification"
    roles = SHAPE_COLUMNS[shape]
    unknown = sorted(set(overrides.columns) - set(roles))
    if unknown:
        raise ValueError(f"A {shape} task reads the columns {list(roles)}; {unknown} do not apply to it.")
    if overrides.label_names and shape in ("regression", "question-answering", "embedding"):
        raise ValueError(f"--class_names {overrides.label_names} given for a {shape} task, which has no classes.")
    base = spec or TaskSpec(shape, "", None, "train", "", dict(roles))
    return replace(
        base,
        train_split=overrides.train_split or base.train_split,
        eval_split=overrides.eval_split or base.eval_split,
        test_split=overrides.test_split or base.test_split,
        columns={**base.columns, **overrides.columns},
        label_names=tuple(overrides.label_names) if overrides.label_names else base.label_names,
    )


def embedding_task(spec: TaskSpec, name: str | None = None) -> TaskSpec:
    """A pair task of the table (STS-B, MRPC, QQP, ...) as an embedding task: the same data and pair columns, a
    bi-encoder scored by the cosine Spearman correlation of its vectors with the task's labels."""
    if spec.shape not in ("classification", "regression") or not spec.columns.get("text_pair"):
        raise ValueError(
            f"--task {name or spec.dataset_config_name} has no sentence pairs ({spec.shape}): an embedding model "
            "trains on pairs of texts; name a pair task (stsb, mrpc, qqp, ...) or your own pairs with --text_pair_column."
        )
    return replace(spec, shape="embedding", label_names=None, main_metric="spearmanr", metric_label="cosine Spearman")


# A split as task_texts reads it: column name -> the column's values (a `datasets.Dataset`, or a dict of lists).
Split = Mapping[str, Iterable]


def _sentence_texts(columns: dict[str, str | None], split: Split) -> list[list[str]]:
    """Classification and regression: each example's text, then a pair's second text as a text of its own."""
    names = [name for name in (columns["text"], columns.get("text_pair")) if name]
    return [[text for text in row if text and text.strip()] for row in zip(*(split[name] for name in names))]


def _token_texts(columns: dict[str, str | None], split: Split) -> list[list[str]]:
    """Token classification: each sentence's words joined with spaces."""
    return [[" ".join(tokens)] for tokens in split[columns["tokens"]] if tokens]


def _question_answering_texts(columns: dict[str, str | None], split: Split) -> list[list[str]]:
    """Question answering: each context once (the data repeats it for every question on it), where it first occurs,
    and every question after its context."""
    seen: set[str] = set()
    groups: list[list[str]] = []
    for context, question in zip(split[columns["context"]], split[columns["question"]]):
        if context and context not in seen:
            seen.add(context)
            groups.append([context])
        if question and question.strip():
            if not groups:
                groups.append([])
            groups[-1].append(question)
    return groups


# shape -> the unlabelled texts of one split of a task of that shape, grouped by example (a pair's two texts, a
# context and its questions).
SHAPE_TEXTS: dict[str, Callable[[dict[str, str | None], Split], list[list[str]]]] = {
    "classification": _sentence_texts,
    "regression": _sentence_texts,
    "embedding": _sentence_texts,
    "token-classification": _token_texts,
    "question-answering": _question_answering_texts,
}


def task_texts(task: TaskSpec, split: Split, documents: bool = False) -> list[str]:
    """The raw texts of one split of `task`, without labels: what masked-LM pretraining on a task's own text reads.

    Classification and regression give each example's text and, for a sentence pair, its second text as the next
    text; token classification each sentence's tokens joined with spaces; question answering each distinct context
    once and every question. Label, tag, answer and id columns are never read; empty texts are left out.

    Args:
        task: the task, whose `shape` and `columns` say which columns hold text.
        split: one split of the task's data (a `datasets.Dataset`, or a dict from column name to values).
        documents: follow each example's texts with an empty text, so that next-sentence prediction
            (`nsp.split_documents`) reads each example as a document: a pair's second text follows its first, and
            a NotNext segment comes from another example.
    """
    end = [""] if documents else []
    return [text for group in SHAPE_TEXTS[task.shape](task.columns, split) if group for text in group + end]


__all__ = [
    "CONLL2003_LABELS",
    "PAIR_HEAD",
    "SHAPE_DEFAULTS",
    "SMALL_HIDDEN_SIZE",
    "TASK_DEFAULTS",
    "FinetuneDefaults",
    "finetune_defaults",
    "SHAPES",
    "SHAPE_COLUMNS",
    "SHAPE_TEXTS",
    "TASKS",
    "TaskOverrides",
    "TaskSpec",
    "embedding_task",
    "resolve_task",
    "task_texts",
]
