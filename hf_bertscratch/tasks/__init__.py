"""Fine-tuning tasks by shape: the task table (this module) and what each shape does with its examples.

| module | what it holds |
| --- | --- |
| `hf_bertscratch.tasks` | the task table: every task BERT is fine-tuned for, its shape, data, columns and metric |
| `hf_bertscratch.tasks.shapes` | the table of shapes (`build_shape`); each lives beside its data, in the modules below |
| `hf_bertscratch.tasks.features` | what the shapes share: feature settings, the cut of a long text, predictions.csv |
| `hf_bertscratch.tasks.classification` | a text or a pair to a class or a score: the two sequence shapes |
| `hf_bertscratch.tasks.token_classification` | words and IOB2 tags to labelled pieces and back |
| `hf_bertscratch.tasks.question_answering` | SQuAD json and its checks; the windows and answers of `qa_windows` |
| `hf_bertscratch.tasks.embedding` | pairs (or single texts) for a bi-encoder: the embedding shape |

The table itself (`TASKS`, `SHAPE_COLUMNS`, `resolve_task`, the column checks) is `hf_bertscratch_base.task_table`'s,
from the standard library alone, so the `bertscratch` front door knows a task's columns before torch loads; this
module adds each shape's fine-tuning defaults and unlabelled texts. It imports none of the modules beside it, so each
of them imports the table without a cycle.

A task's *shape* says which head it trains and how its examples become features and its predictions a score:

| shape | head | examples | metric |
| --- | --- | --- | --- |
| classification | `AutoModelForSequenceClassification` | a text (or a pair) and a class | accuracy, F1, Matthews |
| multi-label-classification | `AutoModelForSequenceClassification`, one sigmoid per label, BCE | a text (or a pair) and a list of labels, maybe empty | micro and macro F1, subset accuracy |
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
from dataclasses import dataclass, replace
from typing import TypedDict

from hf_bertscratch_base.task_table import (
    COLUMN_ROLES,
    CONLL2003_LABELS,
    LABEL_SEPARATOR,
    SEQUENCE_SHAPES,
    SHAPE_COLUMNS,
    SHAPE_MAIN_METRIC,
    SHAPES,
    TASKS,
    TaskOverrides,
    TaskSpec,
    check_columns,
    column_flag,
    embedding_task,
    input_columns,
    required_columns,
    resolve_task,
    split_roles,
)


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
        return self.learning_rate_large if is_large(hidden_size) else self.learning_rate


class HeadDefaults(TypedDict, total=False):
    """The `FinetuneDefaults` fields that say how a task's head reads the encoder and starts."""

    classifier_pooling: str
    head_init: str


SMALL_HIDDEN_SIZE = 256  # up to Google's BERT-Mini (4L/H256): small models fine-tune best at 1e-4 to 1e-3

# Per shape, chosen on the task table's dev sets (docs/fine-tuning.md, "Defaults"); TASK_DEFAULTS overrides a task.
SHAPE_DEFAULTS: dict[str, FinetuneDefaults] = {
    "classification": FinetuneDefaults(3e-4, 3e-5, 5),
    "multi-label-classification": FinetuneDefaults(3e-4, 3e-5, 5),
    "regression": FinetuneDefaults(3e-4, 3e-5, 5),
    "token-classification": FinetuneDefaults(1e-3, 5e-5, 3),
    # transformers' run_qa.py: 384-token windows with a 128-token stride.
    "question-answering": FinetuneDefaults(3e-4, 3e-5, 2, max_seq_length=384),
    "embedding": FinetuneDefaults(3e-4, 3e-5, 5, classifier_pooling="mean"),
}
# Sentiment (SST-2, IMDB): the head reads the mean and the maximum of the last states, and a small model trains at
# 1e-3. From the quick start's model (one seed each, results/single-diagnosis/): IMDB on 5,000 reviews 81.0 against
# 72.9 for [CLS] at 2e-4 (the former default); SST-2 on 20,000 sentences 78.7 against 76.7.
SENTIMENT_HEAD: HeadDefaults = {"classifier_pooling": "mean-max"}
TASK_DEFAULTS: dict[str, FinetuneDefaults] = {
    "cola": replace(SHAPE_DEFAULTS["classification"], max_seq_length=64),
    "sst2": FinetuneDefaults(1e-3, 2e-5, 3, max_seq_length=64, **SENTIMENT_HEAD),
    # IMDB's reviews (a median of about 230 words) read at 512 tokens, the first 128 and the last 382 (Sun et al.
    # 2019): 2.1-2.5 points above the first 256 in lab/diagnose_single.py's screens (docs/fine-tuning.md).
    "imdb": FinetuneDefaults(1e-3, 2e-5, 3, max_seq_length=512, truncation="head+tail", **SENTIMENT_HEAD),
}


# A sentence-pair task's head (classification or regression of two texts): each text read by its own mean, the head
# fitted to the frozen features first. From random [CLS] heads, STS-B from the 9-minute model stayed at 11-16
# Spearman while the model's own zero-shot cosine ranked it at 61 (docs/fine-tuning.md, "Sentence pairs").
PAIR_HEAD: HeadDefaults = {"classifier_pooling": "segments", "head_init": "probe"}


# BERT's own fine-tuning recipe (Devlin et al. 2019, section 4 and appendix A.3) for a model wider than
# SMALL_HIDDEN_SIZE, a pretrained BERT from the Hub among them: the pooled [CLS] under a new random head, 2 to 4
# epochs (3; question answering keeps its 2), at a rate of 2e-5 to 5e-5 (`learning_rate_large`). The heads chosen above
# (mean-max for sentiment, each text's mean with a probed head for pairs) were measured on the small models pretrained
# here; a sequence head that reads [CLS] is also one transformers' BertForSequenceClassification holds exactly.
BERT_HEAD: HeadDefaults = {"classifier_pooling": "cls", "head_init": "random"}
BERT_EPOCHS = 3


def finetune_defaults(task: TaskSpec, name: str | None = None, hidden_size: int | None = None) -> FinetuneDefaults:
    """The defaults of the table's task `name`, else of `task`'s shape; a sentence-pair classification or regression
    task reads each text by its own mean, with a probed head (`PAIR_HEAD`). A model wider than `SMALL_HIDDEN_SIZE`
    (`hidden_size`; None: not known yet) fine-tunes by BERT's recipe instead (`BERT_HEAD`, at most `BERT_EPOCHS`);
    an embedding task keeps its own."""
    defaults = TASK_DEFAULTS.get(name or "", SHAPE_DEFAULTS[task.shape])
    if task.shape in ("classification", "regression") and task.columns.get("text_pair"):
        defaults = replace(defaults, **PAIR_HEAD)
    if is_large(hidden_size) and task.shape != "embedding":
        defaults = replace(defaults, **BERT_HEAD, epochs=min(defaults.epochs, BERT_EPOCHS))
    return defaults


def is_large(hidden_size: int | None) -> bool:
    """Whether a model of this width fine-tunes by BERT's recipe (`BERT_HEAD`, `learning_rate_large`)."""
    return hidden_size is not None and hidden_size > SMALL_HIDDEN_SIZE


def recipe_name(hidden_size: int) -> str:
    """Which defaults a model of this width gets and why, as a run's log says it."""
    if is_large(hidden_size):
        return f"BERT's fine-tuning recipe for a model wider than {SMALL_HIDDEN_SIZE} (hidden size {hidden_size})"
    return f"the task table's recipe for a small model (hidden size {hidden_size}, at most {SMALL_HIDDEN_SIZE})"


# A split as task_texts reads it: column name -> the column's values (a `datasets.Dataset`, or a dict of lists).
Split = Mapping[str, Iterable]


def _sentence_texts(task: TaskSpec, split: Split) -> list[list[str]]:
    """Classification (single- or multi-label) and regression: each example's text, then a pair's second text as a
    text of its own."""
    names = [name for name in (task.columns["text"], task.columns.get("text_pair")) if name]
    return [[text for text in row if text and text.strip()] for row in zip(*(split[name] for name in names))]


def _token_texts(task: TaskSpec, split: Split) -> list[list[str]]:
    """Token classification: each sentence's words joined with spaces."""
    return [[" ".join(tokens)] for tokens in split[task.column("tokens")] if tokens]


def _question_answering_texts(task: TaskSpec, split: Split) -> list[list[str]]:
    """Question answering: each context once (the data repeats it for every question on it), where it first occurs,
    and every question after its context."""
    seen: set[str] = set()
    groups: list[list[str]] = []
    for context, question in zip(split[task.column("context")], split[task.column("question")]):
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
SHAPE_TEXTS: dict[str, Callable[[TaskSpec, Split], list[list[str]]]] = {
    "classification": _sentence_texts,
    "multi-label-classification": _sentence_texts,
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
    return [text for group in SHAPE_TEXTS[task.shape](task, split) if group for text in group + end]


__all__ = [
    "BERT_EPOCHS",
    "BERT_HEAD",
    "COLUMN_ROLES",
    "CONLL2003_LABELS",
    "LABEL_SEPARATOR",
    "PAIR_HEAD",
    "SEQUENCE_SHAPES",
    "SHAPE_DEFAULTS",
    "SMALL_HIDDEN_SIZE",
    "TASK_DEFAULTS",
    "FinetuneDefaults",
    "HeadDefaults",
    "finetune_defaults",
    "is_large",
    "recipe_name",
    "SHAPES",
    "SHAPE_COLUMNS",
    "SHAPE_MAIN_METRIC",
    "SHAPE_TEXTS",
    "TASKS",
    "TaskOverrides",
    "TaskSpec",
    "check_columns",
    "column_flag",
    "embedding_task",
    "input_columns",
    "required_columns",
    "resolve_task",
    "split_roles",
    "task_texts",
]
