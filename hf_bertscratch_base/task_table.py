"""The task table, from the standard library alone: every task BERT is fine-tuned for (`TASKS`), each shape's column
roles (`SHAPE_COLUMNS`), and the task a command line names (`resolve_task`).

It lives below the library (in `hf_bertscratch_base`) so that the `bertscratch` front door knows, before torch loads, which columns a
task reads and which `--*_column` flag picks each (`required_columns`, `split_roles`), and which columns of an inference
command's --input_file hold its inputs (`choose_input_columns`: a flag, else the columns fine-tuning recorded in the
model's config, else the defaults); `hf_bertscratch.tasks` is its name inside the package, beside what each shape does
with its examples.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from . import did_you_mean
from .data_files import (
    FILE_BUILDERS,
    LIST_BUILDERS,
    column_file_kinds,
    file_extension,
    file_kinds,
    file_layout,
    is_text_file,
    read_first_row,
)

SHAPES = (
    "classification",
    "multi-label-classification",
    "regression",
    "token-classification",
    "question-answering",
    "embedding",
)
# The shapes of a sequence head (`AutoModelForSequenceClassification`): a text or a pair to classes or a score.
SEQUENCE_SHAPES = ("classification", "multi-label-classification", "regression")
# A multi-label classifier predicts each label whose sigmoid is above this, unless fine-tuning's
# --multi_label_threshold chose another (recorded in its config) or classify's --threshold gives one (transformers'
# text-classification pipeline gives the sigmoid of each label for a config whose problem_type is
# "multi_label_classification").
MULTI_LABEL_THRESHOLD = 0.5
# The thresholds fine-tuning chooses among on the eval split (`metrics.choose_threshold`): 0.05, 0.10, ..., 0.95.
THRESHOLD_GRID = tuple(round(0.05 * step, 2) for step in range(1, 20))
# How a multi-label task's label field of a csv/tsv file (or any string label) is split into its labels by default.
LABEL_SEPARATOR = ","

# Column roles each shape reads, with the column name a user's own data is assumed to have.
SHAPE_COLUMNS: dict[str, dict[str, str | None]] = {
    "classification": {"text": "text", "text_pair": None, "label": "label"},
    "multi-label-classification": {"text": "text", "text_pair": None, "label": "label"},  # a list of labels per row
    "regression": {"text": "text", "text_pair": None, "label": "label"},
    "token-classification": {"tokens": "tokens", "tags": "ner_tags"},
    "question-answering": {"id": "id", "question": "question", "context": "context", "answers": "answers"},
    "embedding": {"text": "text", "text_pair": None, "label": "label"},  # labels optional for training
}
# The column roles that hold what an example is scored against (its labels, tags or answers).
SCORED_ROLES = ("label", "tags", "answers")
# Every column role, in the order a shape names them; `--{role}_column` picks role's column (`column_flag`).
COLUMN_ROLES = tuple(dict.fromkeys(role for roles in SHAPE_COLUMNS.values() for role in roles))

# The metric that picks the best checkpoint and heads the results, per shape (a task may name another).
SHAPE_MAIN_METRIC: dict[str, str] = {
    "classification": "accuracy",
    "multi-label-classification": "micro_f1",
    "regression": "spearmanr",
    "token-classification": "overall_f1",
    "question-answering": "f1",
    "embedding": "spearmanr",
}

# The share (%) of the train split held out to choose checkpoints on where the data has no validation split and its
# test split is scored once, at the end (IMDB; a --train_file with a --test_file and no --validation_file).
HOLD_OUT_PERCENTAGE = 5
# The fewest train examples held out by default from train data alone, whose held-out examples are all the run scores.
MIN_HELD_OUT = 5

CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@dataclass(frozen=True)
class TaskSpec:
    """One row of the task table.

    Attributes:
        shape: one of `SHAPES`.
        dataset_name / dataset_config_name: the Hub dataset (also the key of its local copy under `--data_dir`).
        train_split / eval_split: the split trained on and the split checkpoints are chosen on.
        test_split: a split scored once, with the chosen model, at the end (CoNLL-2003's test set); None: none.
        validation_split_percentage: for data without a validation split (IMDB), the share of the train split held
            out as the split checkpoints are chosen on; the eval split is then scored once, at the end, as the test
            split. 0: none held out.
        columns: column role -> column name (roles: `SHAPE_COLUMNS[shape]`).
        label_names: class (or tag) names in label-id order; None for regression and question answering.
        label_separator: a multi-label task's: what splits a string label field (a csv/tsv cell) into its labels.
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
    validation_split_percentage: float = 0
    main_metric: str = ""
    metric_label: str = ""
    label_separator: str = LABEL_SEPARATOR

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"Unknown task shape {self.shape!r}; expected one of {SHAPES}.")
        if not self.main_metric:
            object.__setattr__(self, "main_metric", SHAPE_MAIN_METRIC[self.shape])
        if not self.metric_label:
            object.__setattr__(self, "metric_label", self.main_metric)

    @property
    def scored_role(self) -> str | None:
        """What an example is scored against: "label", "tags" or "answers" (None where no such column is named)."""
        return next((role for role in SCORED_ROLES if self.columns.get(role)), None)

    @property
    def scored_what(self) -> str:
        """What a split lacking `scored_column` lacks, in words: "labels", "tags" or "answers"."""
        return "labels" if self.scored_role in (None, "label") else str(self.scored_role)

    @property
    def scored_column(self) -> str | None:
        """The column an example is scored against: its label, tags or answers (None where none is named)."""
        return self.columns[self.scored_role] if self.scored_role else None

    def has_labels(self, columns: Collection[str]) -> bool:
        """Whether a split of these `columns` holds what its examples are scored against (`scored_column`). A test
        split without it is predicted, not scored; an embedding task trains on pairs without it too."""
        return self.scored_column in columns

    def column(self, role: str) -> str:
        """The column of `role`, one the shape always reads (every role but "text_pair", and an embedding task's
        "label", is named); `columns[role]` for the roles that may be None."""
        column = self.columns[role]
        if column is None:
            raise ValueError(f"A {self.shape} task reads a {role} column, but none is named: give {column_flag(role)}.")
        return column


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
    # Sentiment of long reviews (Maas et al. 2011): no validation split, so checkpoints are chosen on 5% of the train
    # reviews held out, and the test split is scored once at the end.
    "imdb": TaskSpec(
        "classification", "imdb", None, "train", "test", _single("text"), ("neg", "pos"),
        validation_split_percentage=HOLD_OUT_PERCENTAGE,
    ),
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
    label_separator: str | None = None


def check_task_names(task: str | None, task_type: str | None) -> None:
    """Raise ValueError for a `--task` not in the table or a `--task_type` not a shape, with the closest name."""
    if task is not None and task not in TASKS:
        hint = did_you_mean(task, TASKS) or "."
        raise ValueError(f"Unknown --task {task!r}{hint} Expected one of {list(TASKS)} (or give a dataset).")
    if task_type is not None and task_type not in SHAPES:
        hint = did_you_mean(task_type, SHAPES) or "."
        raise ValueError(f"Unknown --task_type {task_type!r}{hint} Expected one of {list(SHAPES)}.")


def resolve_task(overrides: TaskOverrides) -> TaskSpec:
    """The task to run: the table's `overrides.task` (if given) with every override applied, or a task of
    `overrides.task_type` on the user's own data (default columns `SHAPE_COLUMNS`).

    Raises:
        ValueError: an unknown task or shape, a shape that contradicts the named task's, a column role the shape
            does not read, class names given for a regression or question-answering task, one class name for a
            classification task, a class name given twice, or a label separator for a task that is not multi-label
            (or an empty one).
    """
    check_task_names(overrides.task, overrides.task_type)
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
    separator = overrides.label_separator
    if separator is not None and shape != "multi-label-classification":
        raise ValueError(
            f"--label_separator {separator!r} splits a multi-label-classification task's label field, but this is a "
            f"{shape} task: add --task_type multi-label-classification, or leave --label_separator out."
        )
    if separator == "":
        raise ValueError(
            f"--label_separator {separator!r} splits nothing; expected a character such as ',' or '|' (default "
            f"{LABEL_SEPARATOR!r})."
        )
    names = overrides.label_names or []
    if shape == "classification" and len(names) == 1:
        raise ValueError(f"--class_names {names[0]} names one class; a classifier needs two or more, in id order.")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:  # each name is one output of the head: a name given twice would be two classes no label tells apart
        raise ValueError(
            f"--class_names {','.join(names)} names {repeated} more than once; expected each class (or tag) once, "
            "in id order."
        )
    base = spec or TaskSpec(shape, "", None, "train", "", dict(roles))
    return replace(
        base,
        train_split=overrides.train_split or base.train_split,
        eval_split=overrides.eval_split or base.eval_split,
        test_split=overrides.test_split or base.test_split,
        columns={**base.columns, **overrides.columns},
        label_names=tuple(overrides.label_names) if overrides.label_names else base.label_names,
        label_separator=separator or base.label_separator,
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


def column_flag(role: str) -> str:
    """The flag that names the column of `role` ("label" -> "--label_column")."""
    return f"--{role}_column"


def split_roles(
    task: TaskSpec,
    splits: Collection[str],
    test_file: bool = False,
    test_split_named: bool = False,
    eval_split_named: bool = False,
) -> dict[str, str]:
    """Which split of the data each role reads: "train" the task's train split; "eval" its eval split, else
    "validation", else "test", whichever `splits` has ("" when neither); "test", when the task has a test split (or
    `test_file` gives one, or data of one's own has one: a table task reads the test split the table gives it) that
    `splits` has or that `test_split_named` (--test_split) asks for.

    The test split is scored once: unless `eval_split_named` (--eval_split) asks for it, it is not the eval split
    ("" then: a share of the train split is held out to choose checkpoints on, as for IMDB) and is scored at the end;
    where --eval_split names it, it is the eval split alone (no "test" role), whose scores are those of the split
    checkpoints are chosen on, as for a dataset's test split that --eval_split names."""
    eval_split = task.eval_split or next((s for s in ("validation", "test") if s in splits), "")
    roles = {"train": task.train_split, "eval": eval_split}
    own_test = not task.dataset_name and "test" in splits  # data of one's own; a table task's test split is its own
    test_split = task.test_split or ("test" if test_file or own_test else None)
    if test_split and (test_split in splits or test_split_named):
        if eval_split != test_split:
            roles["test"] = test_split
        elif not eval_split_named:
            roles["test"], roles["eval"] = test_split, ""
    return roles


def required_columns(task: TaskSpec, role: str, train_columns: Collection[str] | None) -> dict[str, str]:
    """Column role -> the column the `role` split ("train", "eval", "test") of `task` must have. Question answering
    makes up ids when the train split (`train_columns`; None: not known) has none; an embedding task trains on
    unlabelled pairs too; a test split without labels (tags, answers) is predicted, not scored."""
    required = {name: column for name, column in task.columns.items() if column}
    if task.shape == "question-answering" and (train_columns is None or required.get("id") not in train_columns):
        required.pop("id", None)
    if (task.shape == "embedding" and role == "train") or role == "test":
        for scored in SCORED_ROLES:
            required.pop(scored, None)
    return required


def check_columns(columns: Collection[str], required: dict[str, str], split: str) -> None:
    """Fail in one line when the `split` split's `columns` lack a `required` one (role -> column), naming the missing
    columns, the columns there are, and the flag that picks each missing one (a file of an inference command's
    inputs: `check_input_columns`)."""
    missing = [column for column in required.values() if column not in columns]
    if missing:
        flags = ", ".join(column_flag(role) for role, column in required.items() if column in missing)
        raise ValueError(
            f"Column(s) {missing} not in the {split} split; it has {list(columns)}: name yours with {flags}."
        )


# The column roles that hold what a model reads of an example (not its id, nor what it is scored against): the roles
# fine-tuning records the columns of in the model's config (`input_columns`), and an inference command reads from the
# rows of its --input_file.
INPUT_ROLES = ("text", "text_pair", "tokens", "question", "context")
# The config attribute that holds them (`hf_bertscratch.BertScratchConfig.input_columns`): role -> column name.
INPUT_COLUMNS_ATTRIBUTE = "input_columns"
# Each input role's column where neither a flag nor the model's config names one (None: none unless named).
INPUT_COLUMN_DEFAULTS: dict[str, str | None] = {
    role: column for roles in SHAPE_COLUMNS.values() for role, column in roles.items() if role in INPUT_ROLES
}
# Inference command -> the input roles a row of its --input_file holds, each picked by its `--{role}_column` flag.
INPUT_FILE_ROLES: dict[str, tuple[str, ...]] = {
    "fill-mask": ("text",),
    "classify": ("text", "text_pair"),
    "tag": ("text", "tokens"),  # a text, or a list of words (`choose_file_columns`)
    "answer": ("question", "context"),
    "embed": ("text",),
    "similarity": ("text", "text_pair"),
}
# Where an input column's name came from (`InputColumn.source`): its flag, the model's config, the flag's default.
FLAG, RECORDED, DEFAULT = "flag", "recorded", "default"


def input_columns(task: TaskSpec) -> dict[str, str]:
    """Input role -> the column `task` reads it from, for the input roles it names (`INPUT_ROLES`): what fine-tuning
    records in the model's config."""
    return {role: column for role, column in task.columns.items() if role in INPUT_ROLES and column}


def recorded_input_columns(config: Mapping[str, object] | None) -> dict[str, str]:
    """The input columns a model's config (config.json's object) records (`input_columns`, as fine-tuning writes it):
    input role -> column name; {} for a config that records none, or a record that is not such a mapping."""
    recorded = config.get(INPUT_COLUMNS_ATTRIBUTE) if config is not None else None
    if not isinstance(recorded, Mapping):
        return {}
    return {role: column for role, column in recorded.items() if role in INPUT_ROLES and isinstance(column, str)}


class InputColumn(NamedTuple):
    """The column an input role is read from, and where its name came from (`FLAG`, `RECORDED` or `DEFAULT`)."""

    column: str
    source: str

    def described(self, role: str) -> str:
        """The column and where its name came from: "'review' (--text_column recorded at fine-tuning)"."""
        flag = column_flag(role)
        how = {FLAG: f"{flag} as given", RECORDED: f"{flag} recorded at fine-tuning", DEFAULT: f"{flag}'s default"}
        return f"{self.column!r} ({how[self.source]})"


def choose_input_columns(
    roles: Iterable[str], flags: Mapping[str, str | None], recorded: Mapping[str, str]
) -> dict[str, InputColumn]:
    """Input role -> the column an inference command reads it from in its --input_file: the one its flag names
    (`flags`: role -> the flag's value, None where not given), else the one fine-tuning read it from (`recorded`:
    `recorded_input_columns` of the model's config), else the role's default (`INPUT_COLUMN_DEFAULTS`). A role none
    of them names (text_pair, of a model fine-tuned on single texts) is left out."""
    chosen = {}
    for role in roles:
        flag, record, default = flags.get(role), recorded.get(role), INPUT_COLUMN_DEFAULTS[role]
        if flag is not None:
            chosen[role] = InputColumn(flag, FLAG)
        elif record is not None:
            chosen[role] = InputColumn(record, RECORDED)
        elif default is not None:
            chosen[role] = InputColumn(default, DEFAULT)
    return chosen


def choose_file_columns(
    roles: Iterable[str],
    flags: Mapping[str, str | None],
    recorded: Mapping[str, str],
    columns: Collection[str] | None,
) -> dict[str, InputColumn]:
    """`choose_input_columns` for a file of inputs of `columns` (None: not known), where a row may hold a list of
    words (the "tokens" role, `tag`'s) instead of a text: the words of the column --tokens_column names, else of the
    one fine-tuning read them from where the file has it or lacks the text column, else texts, as
    `choose_input_columns` picks their column. The column of words has no default: a row holds a text unless a flag
    or the model says otherwise. Raises when both --tokens_column and --text_column are given."""
    roles = tuple(roles)
    if "tokens" not in roles:
        return choose_input_columns(roles, flags, recorded)
    words, text = flags.get("tokens"), flags.get("text")
    if words is not None and text is not None:
        raise ValueError(
            f"--tokens_column {words!r} and --text_column {text!r} were both given: a row holds a list of words or "
            "a text; name one of the two columns."
        )
    if words is not None:
        return {"tokens": InputColumn(words, FLAG)}
    texts = choose_input_columns([role for role in roles if role != "tokens"], flags, recorded)
    record = recorded.get("tokens")
    if text is None and record is not None:
        if columns is None or record in columns or texts["text"].column not in columns:
            return {"tokens": InputColumn(record, RECORDED)}
    return texts


def check_input_columns(columns: Collection[str], chosen: Mapping[str, InputColumn], path: str) -> None:
    """Fail in one line when the file of inputs `path` (--input_file) of `columns` lacks a `chosen` one
    (`choose_input_columns`), naming each missing column and where its name came from, the columns the file has, and
    the flags that name others; of a text file, that it holds one text per line and has no columns, and the files
    that have them (`_text_file_has_no_columns`). A column of lists of words (`tag`'s "tokens") in a csv or tsv file,
    whose cells hold strings, fails too (`check_word_lists_file`)."""
    missing = {role: chosen_column for role, chosen_column in chosen.items() if chosen_column.column not in columns}
    if not missing:
        check_word_lists_file(path, chosen)
        return
    named = " and ".join(chosen_column.described(role) for role, chosen_column in missing.items())
    noun = "Column" if len(missing) == 1 else "Columns"
    if is_text_file(path):
        raise ValueError(_text_file_has_no_columns(path, missing, f"{noun.lower()} {named}"))
    flags = ", ".join(column_flag(role) for role in missing)
    raise ValueError(f"{noun} {named} not in --input_file {path!r}; it has {list(columns)}: name yours with {flags}.")


def _text_file_has_no_columns(path: str, missing: Mapping[str, InputColumn], named: str) -> str:
    """The line of a text file of inputs (`path`: one text per line, its one column the lines) that lacks the
    `missing` columns (`named`, as the line names them): which files have such columns (lists of words: those whose
    cells hold lists, `LIST_BUILDERS`), and for a --text_column given, that its lines are read without it."""
    if "tokens" in missing:
        advice = f"lists of words come in a column of a {file_kinds(LIST_BUILDERS)} file"
    else:
        advice = f"columns come in a {column_file_kinds()} file"
    text = missing.get("text")
    if text is not None and text.source == FLAG:
        advice += f"; leave {column_flag('text')} out to read its lines"
    return (
        f"--input_file {path!r} is a .{file_extension(Path(path))} file: it holds one text per line and has no "
        f"columns, so no {named}: {advice}."
    )


def check_word_lists_file(path: str, chosen: Mapping[str, InputColumn]) -> None:
    """Fail in one line, naming the first row's value, when `chosen` reads lists of words (the "tokens" role) from a
    file of inputs (`path`) whose cells cannot hold lists, a csv or tsv file's (`LIST_BUILDERS`, as
    token-classification fine-tuning refuses them): its strings would be refused row by row as no lists. A file
    without a first row is left to the reader, which names it."""
    words = chosen.get("tokens")
    builder = FILE_BUILDERS.get(file_extension(Path(path)), ("", {}))[0]
    if words is None or builder in LIST_BUILDERS or (row := read_first_row(path)) is None:
        return
    raise ValueError(
        f"Row 1 of --input_file {path!r} (counting from 1, the header not counted) holds "
        f"{row.get(words.column)!r:.100} in column {words.described('tokens')}: a .{file_extension(Path(path))} "
        f"file's cells hold strings, and lists of words come in a column of a {file_kinds(LIST_BUILDERS)} file, as "
        f"token-classification fine-tuning reads them; to tag the strings as texts, name the column with "
        f"{column_flag('text')} instead."
    )


# A data file's layout that one task type alone reads (`data_files.file_layout`) -> that task type.
LAYOUT_TASK_TYPES = {"CoNLL": "token-classification", "SQuAD-format": "question-answering"}


def check_file_layout(
    task: TaskSpec, split: str, path: str, columns: Collection[str] | None, required: dict[str, str]
) -> None:
    """Fail in one line, naming the file and the --task_type that reads it, when the `split` file `path`
    (--{split}_file) of a task on one's own data lacks a `required` column (`columns`; None: not known) and is laid
    out as another task type's data (a CoNLL text file, a SQuAD-format json: `LAYOUT_TASK_TYPES`): the column check
    would only ask for a --label_column."""
    if task.dataset_name or (columns is not None and set(required.values()) <= set(columns)):
        return  # a task of the table names its own data; a file with the columns is read as it is
    layout = file_layout(path)
    task_type = LAYOUT_TASK_TYPES[layout] if layout is not None else task.shape
    if task_type != task.shape:
        raise ValueError(
            f"The {split} file {path!r} (--{split}_file) looks like a {layout} file: add --task_type {task_type}."
        )


def check_test_file_as_eval(
    task: TaskSpec, roles: dict[str, str], eval_columns: Collection[str], test_file: str | None
) -> None:
    """Fail in one line, naming the file, when `test_file` (--test_file) is the eval split too (`roles`: --eval_split
    test asks for it) and its `eval_columns` hold no labels (tags, answers): checkpoints are chosen on the eval split's
    scores, so it cannot be predicted alone, and the column check would only ask for a --label_column."""
    column = task.scored_column
    if roles.get("eval") != "test" or not test_file or not column or task.has_labels(eval_columns):
        return
    raise ValueError(
        f"The test file {test_file!r} has no {task.scored_what} (no {column!r} column), and --eval_split test makes it "
        "the eval split, which checkpoints are chosen on: leave out --eval_split test, and the test file is predicted, "
        "not scored."
    )


def check_tagged_conll_file(task: TaskSpec, role: str, split: str, path: str, columns: Collection[str]) -> None:
    """Fail in one line, naming the file, when the train or eval split (`role`) of a token-classification task comes
    from a CoNLL text file of words alone (`columns`, which then hold no tags column): such a file is a test file to
    predict, and the column check would only ask for a --tags_column. `split` is the split the file gives
    (--{split}_file: train, validation or test)."""
    if task.shape != "token-classification" or role == "test" or task.has_labels(columns):
        return
    doubled = " --eval_split test makes the test file the eval split here: leave it out." if split == "test" else ""
    raise ValueError(
        f"The {role} split's file {path!r} (--{split}_file) holds words without tags (one column per line), but the "
        f"{role} split needs each word's tag: the last whitespace-separated column of its line (`word ... TAG`, as "
        f"CoNLL-2003 has them). Only a test file may hold words alone, to be predicted.{doubled}"
    )


def check_labels_are_no_lists(column: str, split: str, value: object) -> None:
    """Fail in one line, naming the --task_type that reads them, when a classification task's label `value` (of the
    `split` split's `column`) is a list: a text with any number of labels is a multi-label task, whose labels are
    lists."""
    if isinstance(value, list):
        raise ValueError(
            f"The {split} split's labels in column {column!r} are lists, such as {value!r}: a text with any number of "
            "labels is a multi-label classification task: add --task_type multi-label-classification."
        )


def held_out_count(examples: int, percentage: float) -> int:
    """How many of `examples` train examples `percentage` % holds out (`hold_out_validation`): one at least."""
    return max(1, round(examples * percentage / 100))


def check_enough_held_out(examples: int, percentage: float) -> None:
    """Fail in one line, naming the count and the flag, where the default share `percentage` of train data alone
    (`examples` of them) would hold out fewer than `MIN_HELD_OUT` examples: too few for the eval score, all the run
    reports, to mean anything. The advice names a share that holds out enough where one leaves most to train on."""
    held = held_out_count(examples, percentage)
    if held >= MIN_HELD_OUT:
        return
    enough = math.ceil(100 * MIN_HELD_OUT / examples)
    more = f", or hold out more with --validation_split_percentage (e.g. {enough})" if enough <= 50 else ""
    raise ValueError(
        f"The data has no validation split, and {percentage:g}% of its {examples} train examples would hold out "
        f"{held} to choose checkpoints on and score, fewer than {MIN_HELD_OUT}: give --validation_file{more}."
    )


__all__ = [
    "COLUMN_ROLES",
    "CONLL2003_LABELS",
    "DEFAULT",
    "FLAG",
    "HOLD_OUT_PERCENTAGE",
    "INPUT_COLUMNS_ATTRIBUTE",
    "INPUT_COLUMN_DEFAULTS",
    "INPUT_FILE_ROLES",
    "INPUT_ROLES",
    "InputColumn",
    "LABEL_SEPARATOR",
    "RECORDED",
    "MIN_HELD_OUT",
    "MULTI_LABEL_THRESHOLD",
    "THRESHOLD_GRID",
    "SEQUENCE_SHAPES",
    "SHAPES",
    "SHAPE_COLUMNS",
    "SHAPE_MAIN_METRIC",
    "TASKS",
    "TaskOverrides",
    "LAYOUT_TASK_TYPES",
    "TaskSpec",
    "check_columns",
    "check_enough_held_out",
    "check_input_columns",
    "choose_file_columns",
    "check_file_layout",
    "check_labels_are_no_lists",
    "check_tagged_conll_file",
    "check_task_names",
    "check_test_file_as_eval",
    "check_word_lists_file",
    "choose_input_columns",
    "column_flag",
    "embedding_task",
    "held_out_count",
    "input_columns",
    "recorded_input_columns",
    "required_columns",
    "resolve_task",
    "split_roles",
]
