"""Extractive question answering (SQuAD) data: read the json files, check the answers, cut windows, read answers back.

`load_squad_json` and `check_answers` read and validate the data before any of it is tokenized. The rest is split as
in transformers' `run_qa.py` / `utils_qa.py`, three parts kept apart:

1. preprocess: `prepare_train_features` / `prepare_eval_features` cut each (question, context) pair into windows of
   at most `max_seq_length` tokens, "[CLS] question [SEP] context part [SEP]", consecutive context parts overlapping
   by `doc_stride` tokens.
2. postprocess: `postprocess_predictions` turns the start/end logits of all the windows of an example back into a
   character span of its context.
3. metric: exact match / F1 compare `prediction["text"]` with the examples' answers; no part of this module.

1 and 2 live in `hf_bertscratch.qa_windows`, below this module, because inference runs them too
(`hf_bertscratch.inference.answer_question`, around its forward passes); this module passes them on.

`QuestionAnsweringShape` (at the end) is fine-tuning's task shape (`hf_bertscratch.tasks.shapes`): 1 and 2, and the
metric (3) as the official SQuAD script computes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict, Features, List, Value
from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding, EvalPrediction, PreTrainedTokenizerBase
from transformers.trainer_utils import PredictionOutput

from hf_bertscratch_base.data_files import is_squad_json

from ..metrics import load_metric
from ..qa_windows import examples_column, postprocess_predictions, prepare_eval_features, prepare_train_features
from . import TaskSpec
from .features import FeatureSettings, write_csv

# The Hub `squad` dataset's schema, so a local SQuAD file and the Hub dataset feed the same code.
SQUAD_FEATURES = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "context": Value("string"),
        "question": Value("string"),
        "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
    }
)

_REQUIRED = object()


# ---------------------------------------------------------------------------------------------------- loading


def load_squad_json(path: str | Path) -> Dataset:
    """Read an official SQuAD v1.1 json file (data -> paragraphs -> qas) into one row per question.

    Returns:
        A Dataset with the Hub `squad` columns: id, title, context, question and
        answers = {"text": [...], "answer_start": [...]}. An article without a title gets "", a question without
        an "answers" field None (a test file to predict, not score).

    Raises:
        ValueError: the file is not JSON or not nested as SQuAD is; the message names the file and the place.
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}): expected a SQuAD v1.1 file.") from error
    try:
        rows = list(_squad_rows(document))
    except ValueError as error:
        raise ValueError(f"{path} is not a SQuAD v1.1 file: {error}.") from error
    if not rows:
        raise ValueError(f"{path} holds no questions: expected data -> paragraphs -> qas entries.")
    return Dataset.from_list(rows, features=SQUAD_FEATURES)


def _squad_rows(document: object) -> Iterator[dict]:
    """The flat rows of a parsed SQuAD document, walking data[a].paragraphs[p].qas[q]."""
    for a, article in enumerate(_field(document, "data", list, "the top level")):
        where = f"data[{a}]"
        title = _field(article, "title", str, where, default="")
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, where)
            for q, qa in enumerate(_field(paragraph, "qas", list, where)):
                where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                given = _field(qa, "answers", list, where, default=None)  # none: a question to predict
                answers = [_squad_answer(answer, f"{where}.answers[{i}]") for i, answer in enumerate(given or [])]
                yield {
                    "id": _field(qa, "id", str, where),
                    "title": title,
                    "context": context,
                    "question": _field(qa, "question", str, where),
                    "answers": None
                    if given is None
                    else {"text": [t for t, _ in answers], "answer_start": [s for _, s in answers]},
                }


def _squad_answer(answer: object, where: str) -> tuple[str, int]:
    return _field(answer, "text", str, where), _field(answer, "answer_start", int, where)


def _field(parent: object, key: str, kind: type, where: str, default: Any = _REQUIRED) -> Any:
    """`parent[key]`, checked to be a `kind`; raises ValueError naming `where` otherwise."""
    if not isinstance(parent, dict):
        raise ValueError(f"{where} is a {type(parent).__name__}, expected a JSON object with a {key!r} field")
    if key not in parent and default is not _REQUIRED:
        return default
    if key not in parent:
        raise ValueError(f"{where} has no {key!r} field (it has {sorted(parent)})")
    value = parent[key]
    if not isinstance(value, kind) or isinstance(value, bool):  # JSON true is a Python int
        raise ValueError(f"{where}.{key} is {value!r:.80}, expected a {kind.__name__}")
    return value


# ---------------------------------------------------------------------------------------------------- validation


def check_answers(
    dataset: Dataset,
    question_column: str = "question",
    context_column: str = "context",
    answers_column: str = "answers",
    split_name: str = "train",
    id_column: str = "id",
    require_answer: bool | None = None,
) -> None:
    """Raise ValueError on the first example whose answers do not point into its context.

    Each answer must be a non-empty text found at its `answer_start`:
    `context[answer_start : answer_start + len(text)] == text`; `text` and `answer_start` must be lists of the same
    length; the question must not be blank.

    Args:
        require_answer: whether every example needs at least one answer. None (the default): only the "train" split
            does. SQuAD v1.1 training examples all have one, and training features of an unanswered one would teach
            the model to point at [CLS]; evaluation examples without an answer can still be predicted (their
            prediction is scored by no reference).

    Raises:
        ValueError: naming `split_name`, the example's id (row number when there is no `id_column`), and the values.
    """
    for column in (question_column, context_column, answers_column):
        examples_column(dataset, column, "column")
    if require_answer is None:
        require_answer = split_name == "train"
    ids = dataset[id_column] if id_column in dataset.column_names else range(len(dataset))
    rows = zip(ids, dataset[question_column], dataset[context_column], dataset[answers_column])
    for row, (example_id, question, context, answers) in enumerate(rows):
        problem = _answers_problem(question, context, answers, require_answer)
        if problem is not None:
            raise ValueError(f"{split_name} example {example_id!r} (row {row}): {problem}.")


def _answers_problem(question: object, context: object, answers: object, require_answer: bool) -> str | None:
    """What is wrong with one example's answers, or None."""
    if not isinstance(question, str) or not question.strip():
        return f"the question is {question!r}, expected a non-empty text"
    if not isinstance(context, str):
        return f"the context is {context!r:.80}, expected a text"
    if not isinstance(answers, Mapping) or not {"text", "answer_start"} <= set(answers):
        return f'answers is {answers!r:.120}, expected {{"text": [...], "answer_start": [...]}}'
    texts, starts = list(answers["text"]), list(answers["answer_start"])
    if len(texts) != len(starts):
        return f"answers has {len(texts)} texts but {len(starts)} answer_start values: {answers!r:.200}"
    if not texts and require_answer:
        return (
            "has no answer; every example trained on or scored needs one (SQuAD v1.1's metric scores against the "
            "gold answers)"
        )
    for i, (text, start) in enumerate(zip(texts, starts)):
        problem = _answer_problem(context, text, start)
        if problem is not None:
            return f"answer {i}: {problem}"
    return None


def _answer_problem(context: str, text: object, start: object) -> str | None:
    if not isinstance(text, str) or not text:
        return f"text is {text!r}, expected a non-empty text"
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        return f"answer_start is {start!r}, expected a character index >= 0"
    found = context[start : start + len(text)]
    if found != text:
        return f"text {text!r} is not at answer_start={start}: the context reads {found!r} there"
    return None


__all__ = [
    "SQUAD_FEATURES",
    "QuestionAnsweringShape",
    "check_answers",
    "is_squad_json",
    "load_squad_json",
    "postprocess_predictions",
    "prepare_eval_features",
    "prepare_train_features",
]


# ---------------------------------------------------------------------------------------------- the task shape
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

    def prepare_labels(self, raw: DatasetDict) -> None:
        """Check every split's answers: each split is trained on or scored, and SQuAD scores need an answer; a test
        split without answers is predicted, not scored."""
        for role, split in raw.items():
            if self.task.has_labels(split.column_names) or role != "test":
                check_answers(split, split_name=role, require_answer=True, **self._columns())

    def config_updates(self) -> dict:
        return {"num_labels": 2}

    def features(self, split: Dataset, training: bool, **map_kwargs) -> Dataset:
        s = self.settings
        kwargs = {"tokenizer": self.tokenizer, "max_seq_length": s.max_seq_length, "doc_stride": s.doc_stride}
        kwargs.update(self._columns())
        if not training:  # evaluation windows keep their example's id and the context's character offsets
            kwargs.update(id_column=self.task.columns["id"], with_positions=self.task.has_labels(split.column_names))
        prepare = prepare_train_features if training else prepare_eval_features
        return split.map(
            prepare, fn_kwargs=kwargs, batched=True, remove_columns=split.column_names, desc="Windowing", **map_kwargs
        )

    def collator(self):
        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8)

    def _answers(self, raw: Dataset, features: Dataset, prediction) -> dict[str, dict]:
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

    def compute_metrics(self, raw: Dataset, features: Dataset) -> Callable[[EvalPrediction], dict]:
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
        self,
        folder: Path,
        raw: Dataset,
        features: Dataset,
        prediction: PredictionOutput,
        title: str,
        prefix: str = "",
    ) -> None:
        """predictions.csv: index, id, question, gold answers (" | "-joined), predicted answer, its score; a split
        without answers (a test split predicted, not scored) has no gold column."""
        answers = self._answers(raw, features, prediction)
        c = self.task.columns
        labelled = self.task.has_labels(raw.column_names)
        rows = []
        for i, example in enumerate(raw):
            found = answers[str(example[c["id"]])]
            gold = [" | ".join(example[c["answers"]]["text"])] if labelled else []
            rows.append([i, example[c["id"]], example[c["question"]], *gold, found["text"], f"{found['score']:.6f}"])
        header = ["index", "id", "question"] + (["label"] if labelled else []) + ["prediction", "score"]
        write_csv(folder / f"{prefix}predictions.csv", header, rows)
