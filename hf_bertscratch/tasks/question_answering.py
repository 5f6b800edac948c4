"""Extractive question answering (SQuAD): one implementation for training, evaluation and inference.

The work is split as in transformers' `run_qa.py` / `utils_qa.py`, three parts kept apart:

1. preprocess: `prepare_train_features` / `prepare_eval_features` cut each (question, context) pair into windows of
   at most `max_seq_length` tokens, "[CLS] question [SEP] context part [SEP]", consecutive context parts overlapping
   by `doc_stride` tokens, so an answer cut by one window's edge lies whole in the next. Training features carry the
   answer's token positions; evaluation features carry `example_id` and the context's character `offset_mapping`.
2. postprocess: `postprocess_predictions` turns the start/end logits of all the windows of an example back into a
   character span of its context.
3. metric: exact match / F1 compare `prediction["text"]` with the examples' answers; no part of this module.

`answer_question` runs 1 and 2 around one forward pass of a `*ForQuestionAnswering` model. `load_squad_json` and
`check_answers` read and validate the data before any of it is tokenized.

Features assume right padding (BERT tokenizers pad on the right): token t of feature f is at `[f, t]` of the logits.

`QuestionAnsweringShape` (at the end) is fine-tuning's task shape (`hf_bertscratch.tasks.shapes`): 1 and 2, and the
metric (3) as the official SQuAD script computes it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from datasets import Dataset, DatasetDict, Features, List, Value
from transformers import (
    AutoModelForQuestionAnswering,
    BatchEncoding,
    DataCollatorWithPadding,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.trainer_utils import PredictionOutput

from ..convert import family_checkpoint
from ..inference import TASK_HEADS, check_task_head, inference_dtype
from ..metrics import load_metric
from ..tokenization import load_tokenizer
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

# `datasets.map` hands batches over as column -> values; a Dataset answers `[column]` the same way.
Examples = Mapping[str, Sequence[Any]]
Offsets = Sequence[Sequence[int] | None]

_CONTEXT = 1  # the sequence id of the context: the tokenizer's second sequence
_REQUIRED = object()


# ---------------------------------------------------------------------------------------------------- loading


def load_squad_json(path: str | Path) -> Dataset:
    """Read an official SQuAD v1.1 json file (data -> paragraphs -> qas) into one row per question.

    Returns:
        A Dataset with the Hub `squad` columns: id, title, context, question and
        answers = {"text": [...], "answer_start": [...]}. An article without a title gets "".

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


def is_squad_json(path: str | Path) -> bool:
    """Whether `path` is a SQuAD-layout json file (one object whose "data" holds the articles), which
    `load_squad_json` reads, rather than a flat file of one row per question (json lines, or a json list), which
    `datasets` reads."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        return False
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):  # json lines under a .json name: one row per line
        return False
    return isinstance(document, dict) and isinstance(document.get("data"), list)


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
                answers = [
                    _squad_answer(answer, f"{where}.answers[{i}]")
                    for i, answer in enumerate(_field(qa, "answers", list, where))
                ]
                yield {
                    "id": _field(qa, "id", str, where),
                    "title": title,
                    "context": context,
                    "question": _field(qa, "question", str, where),
                    "answers": {"text": [t for t, _ in answers], "answer_start": [s for _, s in answers]},
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
        _column(dataset, column, "column")
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


# ---------------------------------------------------------------------------------------------------- preprocess


def prepare_train_features(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    question_column: str = "question",
    context_column: str = "context",
    answers_column: str = "answers",
) -> dict[str, list]:
    """Training features of a batch of examples (a batched `datasets.map` function, as in run_qa.py).

    Each example gives one or more windows (see the module docstring). Features are unpadded: a collator pads.

    Returns:
        input_ids, token_type_ids, attention_mask: lists of F token lists, F >= len(batch);
        start_positions, end_positions: F token indices of the first answer's first and last token in that window,
        or of [CLS] (0) where the answer is not wholly inside the window or the example has none.
    """
    encoded = _tokenize_windows(examples, tokenizer, max_seq_length, doc_stride, question_column, context_column)
    starts, ends = _answer_positions(examples, encoded, tokenizer, answers_column)
    for name in ("offset_mapping", "overflow_to_sample_mapping"):  # the model takes neither
        encoded.pop(name)
    return {**encoded, "start_positions": starts, "end_positions": ends}


def prepare_eval_features(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    question_column: str = "question",
    context_column: str = "context",
    id_column: str = "id",
    answers_column: str = "answers",
    with_positions: bool = False,
) -> dict[str, list]:
    """Evaluation (and inference) features of a batch of examples: the same windows as `prepare_train_features`.

    Args:
        with_positions: also give the training features' start_positions/end_positions (read from
            `answers_column`, which is otherwise not needed), so that an evaluation can report a loss.

    Returns:
        input_ids, token_type_ids, attention_mask: lists of F token lists;
        example_id: the id of the example each feature comes from (F values);
        offset_mapping: per feature, per token, the (start, end) characters of the token in the context, or None
        for tokens that are not context ([CLS], question, [SEP]), so no answer can be read from them.
        `datasets` stores the None values as they are.
    """
    encoded = _tokenize_windows(examples, tokenizer, max_seq_length, doc_stride, question_column, context_column)
    if with_positions:
        encoded["start_positions"], encoded["end_positions"] = _answer_positions(
            examples, encoded, tokenizer, answers_column
        )
    sample_map = encoded.pop("overflow_to_sample_mapping")
    ids = _column(examples, id_column, "id_column")
    encoded["example_id"] = [ids[i] for i in sample_map]
    encoded["offset_mapping"] = [
        [offset if sequence_id == _CONTEXT else None for offset, sequence_id in zip(offsets, encoded.sequence_ids(f))]
        for f, offsets in enumerate(encoded["offset_mapping"])
    ]
    return dict(encoded)


def _tokenize_windows(
    examples: Examples,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    doc_stride: int,
    question_column: str,
    context_column: str,
) -> BatchEncoding:
    """The overlapping "[CLS] question [SEP] context part [SEP]" windows, with offsets and the sample map."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"Question answering needs a fast tokenizer (its offset mappings map answers to characters), got "
            f"{type(tokenizer).__name__}: load one with hf_bertscratch.tokenization.load_tokenizer."
        )
    if max_seq_length < 1 or not 0 <= doc_stride < max_seq_length:
        raise ValueError(
            f"max_seq_length={max_seq_length}, doc_stride={doc_stride}: expected max_seq_length >= 1 and "
            "0 <= doc_stride < max_seq_length."
        )
    # Some tokenizers make tokens of leading whitespace, taking room from the context (run_qa.py strips it too).
    questions = [question.lstrip() for question in _column(examples, question_column, "question_column")]
    _check_context_room(questions, tokenizer, max_seq_length, doc_stride)
    return tokenizer(
        questions,
        list(_column(examples, context_column, "context_column")),
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


def _check_context_room(
    questions: list[str], tokenizer: PreTrainedTokenizerBase, max_seq_length: int, doc_stride: int
) -> None:
    """Raise unless every window leaves more context tokens than `doc_stride` (the Rust tokenizer panics else)."""
    if not questions:
        return
    lengths = [len(ids) for ids in tokenizer(questions, add_special_tokens=False)["input_ids"]]
    longest = int(np.argmax(lengths))
    room = max_seq_length - tokenizer.num_special_tokens_to_add(pair=True) - lengths[longest]
    if room <= doc_stride:
        raise ValueError(
            f"Question {questions[longest]!r:.100} takes {lengths[longest]} tokens, leaving {room} of "
            f"max_seq_length={max_seq_length} for the context; the windows need more than doc_stride={doc_stride}: "
            "raise max_seq_length or lower doc_stride."
        )


def _answer_positions(
    examples: Examples, encoded: BatchEncoding, tokenizer: PreTrainedTokenizerBase, answers_column: str
) -> tuple[list[int], list[int]]:
    """Per window of `encoded` (still holding offset_mapping and overflow_to_sample_mapping), the token indices of
    the first answer's first and last token, or of [CLS] where the answer is not wholly inside the window."""
    answers = _column(examples, answers_column, "answers_column")
    sample_map = encoded["overflow_to_sample_mapping"]
    starts, ends = [], []
    for f, offsets in enumerate(encoded["offset_mapping"]):
        cls_index = encoded["input_ids"][f].index(tokenizer.cls_token_id)
        span = _answer_tokens(answers[sample_map[f]], offsets, encoded.sequence_ids(f))
        start, end = span if span is not None else (cls_index, cls_index)
        starts.append(start)
        ends.append(end)
    return starts, ends


def _answer_tokens(
    answers: Mapping[str, Sequence], offsets: Sequence[Sequence[int]], sequence_ids: list[int | None]
) -> tuple[int, int] | None:
    """The first and last token of the first answer in this window, or None if it is not wholly inside it.
    `offsets` are the tokenizer's own, a (start, end) pair for every token."""
    if not answers["answer_start"]:
        return None
    start_char = answers["answer_start"][0]
    end_char = start_char + len(answers["text"][0])
    context = [t for t, sequence_id in enumerate(sequence_ids) if sequence_id == _CONTEXT]
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return None
    start = max(t for t in context if offsets[t][0] <= start_char)
    end = min(t for t in context if offsets[t][1] >= end_char)
    return start, end


def _column(examples: Examples | Dataset, name: str, role: str) -> Sequence[Any]:
    columns = examples.column_names if isinstance(examples, Dataset) else list(examples)
    if name not in columns:
        raise ValueError(f"{role}={name!r} is not a column of the examples; columns: {columns}.")
    return examples[name]


# ---------------------------------------------------------------------------------------------------- postprocess


class _Span(NamedTuple):
    logit: float  # start_logit + end_logit, the span's unnormalised log-score
    start_logit: float
    end_logit: float
    start_char: int
    end_char: int


def postprocess_predictions(
    examples: Examples | Dataset,
    features: Examples | Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    id_column: str = "id",
    context_column: str = "context",
) -> dict[str, dict]:
    """The best answer span of each example, over all its features (as utils_qa.postprocess_qa_predictions).

    In each feature, the top `n_best_size` start tokens x top `n_best_size` end tokens are the candidates; a
    candidate is valid when both tokens are context (offset not None, inside the feature: logits padded past a
    feature's length are ignored), end >= start, and it spans at most `max_answer_length` tokens. Valid
    candidates of all features are ranked by start_logit + end_logit; the same character span found in two
    overlapping windows counts once, with its best logit.

    Args:
        examples: the examples, with `id_column` and `context_column`.
        features: `prepare_eval_features` output (or its Dataset), with example_id and offset_mapping.
        start_logits, end_logits: (F, T) arrays, row f for feature f, T >= each feature's length.

    Returns:
        example id -> {"text", "start_char", "end_char", "score", "logit", "n_best"} where
        `context[start_char:end_char] == text` (end exclusive), "logit" is start_logit + end_logit and "score" the
        softmax of the logits over the example's n-best spans: a probability relative to those candidates, not
        calibrated across examples. "n_best" lists up to `n_best_size` such dicts (with start_logit and end_logit),
        best first. An example without any valid span gets text "", start_char = end_char = 0, score 0.0.
    """
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(f"n_best_size={n_best_size}, max_answer_length={max_answer_length}: both must be >= 1.")
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    example_ids = list(_column(examples, id_column, "id_column"))
    by_example = _features_by_example(example_ids, list(_column(features, "example_id", "features' column")))
    all_offsets = list(_column(features, "offset_mapping", "features' column"))
    _check_logits(start_logits, end_logits, len(all_offsets))
    predictions = {}
    for example_id, context in zip(example_ids, _column(examples, context_column, "context_column")):
        spans = [
            span
            for f in by_example[example_id]
            for span in _valid_spans(start_logits[f], end_logits[f], all_offsets[f], n_best_size, max_answer_length)
        ]
        predictions[example_id] = _best_answer(spans, context, n_best_size)
    return predictions


def _features_by_example(example_ids: list, feature_example_ids: list) -> dict[Any, list[int]]:
    """example id -> the indices of its features; raises on duplicate ids or features of unknown examples."""
    by_example: dict[Any, list[int]] = {example_id: [] for example_id in example_ids}
    if len(by_example) != len(example_ids):
        duplicates = [example_id for example_id, n in Counter(example_ids).items() if n > 1][:5]
        raise ValueError(f"Example ids must be unique to map features back to examples; repeated: {duplicates}.")
    for f, example_id in enumerate(feature_example_ids):
        if example_id not in by_example:
            raise ValueError(f"Feature {f} has example_id {example_id!r}, which is not among the examples' ids.")
        by_example[example_id].append(f)
    return by_example


def _check_logits(start_logits: np.ndarray, end_logits: np.ndarray, n_features: int) -> None:
    if start_logits.ndim != 2 or start_logits.shape != end_logits.shape or len(start_logits) != n_features:
        raise ValueError(
            f"start_logits {start_logits.shape} and end_logits {end_logits.shape} must both be (F, T) with "
            f"F = {n_features} features."
        )


def _valid_spans(
    start_logits: np.ndarray, end_logits: np.ndarray, offsets: Offsets, n_best_size: int, max_answer_length: int
) -> Iterator[_Span]:
    """The valid spans among one feature's top start x top end tokens; logits are (T,)."""
    top_starts = np.argsort(start_logits)[::-1][:n_best_size]
    top_ends = np.argsort(end_logits)[::-1][:n_best_size]
    for start in top_starts:
        for end in top_ends:
            if _is_valid_span(int(start), int(end), offsets, max_answer_length):
                yield _Span(
                    float(start_logits[start] + end_logits[end]),
                    float(start_logits[start]),
                    float(end_logits[end]),
                    int(offsets[start][0]),
                    int(offsets[end][1]),
                )


def _is_valid_span(start: int, end: int, offsets: Offsets, max_answer_length: int) -> bool:
    if start >= len(offsets) or end >= len(offsets):  # padding past this feature's tokens
        return False
    if offsets[start] is None or offsets[end] is None:  # [CLS], question, [SEP]
        return False
    return start <= end < start + max_answer_length


def _best_answer(spans: list[_Span], context: str, n_best_size: int) -> dict:
    """The prediction dict of one example from its valid spans (see `postprocess_predictions`)."""
    ranked, seen = [], set()
    for span in sorted(spans, key=lambda span: span.logit, reverse=True):
        if (span.start_char, span.end_char) not in seen:
            seen.add((span.start_char, span.end_char))
            ranked.append(span)
    ranked = ranked[:n_best_size]
    if not ranked:
        return {"text": "", "start_char": 0, "end_char": 0, "score": 0.0, "logit": None, "n_best": []}
    logits = np.array([span.logit for span in ranked])
    scores = np.exp(logits - logits.max())  # shifted: exp of raw logits can overflow
    scores /= scores.sum()
    n_best = [
        {"text": context[span.start_char : span.end_char], "score": float(score), **span._asdict()}
        for span, score in zip(ranked, scores)
    ]
    return {**n_best[0], "n_best": n_best}


# ---------------------------------------------------------------------------------------------------- inference


def answer_question(
    model: str | Path | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    question: str,
    context: str,
    tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
    max_seq_length: int | None = None,
    doc_stride: int = 128,
    max_answer_length: int = 30,
    n_best_size: int = 20,
    device: str | torch.device | None = None,
    dtype: str = "float32",
) -> dict:
    """Extract the answer to `question` from `context` with a question-answering model.

    All the windows of the context go through the model in one batch.

    Args:
        model: a model folder / Hub id with a *ForQuestionAnswering head, or an already loaded (model, tokenizer).
        tokenizer: tokenizer (folder, vocab.txt, Hub id or instance) for a model given by name; defaults to the one
            saved with the model.
        max_seq_length: tokens per window; None: 384 (SQuAD's usual), or the model's max_position_embeddings when
            smaller, with doc_stride lowered to a third of it when it would not fit.
        device: where to run the model; None keeps it where it is (the CPU for a model loaded here).
        dtype: for a model loaded here, its type (`hf_bertscratch.inference.DTYPES`; bfloat16/float16 for a GPU).

    Returns:
        {"answer", "start", "end", "score"}: `context[start:end] == answer`, score as in `postprocess_predictions`
        (a probability among the n-best spans). "" with start = end = 0 and score 0.0 if no span is valid.
    """
    if not question.strip():
        raise ValueError("Question is empty: expected a question to answer.")
    if not context.strip():
        raise ValueError("Context is empty: expected a text to find the answer in.")
    qa_model, tokenizer = _load_qa_model(model, tokenizer, device, dtype)
    positions = getattr(qa_model.config, "max_position_embeddings", None) or 384
    if max_seq_length is None:
        max_seq_length = min(384, positions)
        doc_stride = min(doc_stride, max_seq_length // 3)
    if max_seq_length > positions:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's max_position_embeddings={positions}: "
            f"pass max_seq_length <= {positions} (and a doc_stride below it)."
        )
    examples = {"id": ["0"], "question": [question], "context": [context]}
    features = prepare_eval_features(examples, tokenizer, max_seq_length, doc_stride)
    start_logits, end_logits = _qa_logits(qa_model, tokenizer, features)
    prediction = postprocess_predictions(examples, features, start_logits, end_logits, n_best_size, max_answer_length)
    best = prediction["0"]
    return {"answer": best["text"], "start": best["start_char"], "end": best["end_char"], "score": best["score"]}


def _load_qa_model(
    model: str | Path | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    tokenizer: str | Path | PreTrainedTokenizerBase | None,
    device: str | torch.device | None,
    dtype: str = "float32",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model in eval mode (on `device` if given, of `dtype` if loaded here) and its tokenizer."""
    heads = TASK_HEADS["question-answering"]
    if isinstance(model, tuple):
        if tokenizer is not None:
            raise ValueError("Pass the tokenizer either in the (model, tokenizer) pair or as tokenizer=, not both.")
        qa_model, tokenizer = model
        if not type(qa_model).__name__.endswith(heads):
            raise ValueError(f"Model is a {type(qa_model).__name__}; question answering needs a *{heads[0]} model.")
    else:
        name = family_checkpoint(model)  # transformers' BERT converted on load
        check_task_head(name, "question-answering")
        # dtype="auto" would keep a half-precision checkpoint as is: the type is always chosen here.
        qa_model = AutoModelForQuestionAnswering.from_pretrained(name, dtype=inference_dtype(dtype))
        if not isinstance(tokenizer, PreTrainedTokenizerBase):
            tokenizer = load_tokenizer(str(tokenizer if tokenizer is not None else name))
    if device is not None:
        # PreTrainedModel.to is functools.wraps(nn.Module.to), which typeshed types as unbound: self comes first.
        qa_model = qa_model.to(device)  # type: ignore[arg-type]
    return qa_model.eval(), tokenizer


def _qa_logits(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, features: dict[str, list]
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits, each (F, T), of the features in one right-padded batch."""
    names = ("input_ids", "token_type_ids", "attention_mask")
    inputs: dict[str, list] = {name: features[name] for name in names if name in features}
    # Right padding keeps token t of each feature at index t, where its offset_mapping entry is.
    batch = tokenizer.pad(inputs, padding_side="right", return_tensors="pt").to(model.device)
    with torch.inference_mode():
        outputs = model(**batch)
    return outputs.start_logits.float().cpu().numpy(), outputs.end_logits.float().cpu().numpy()


__all__ = [
    "SQUAD_FEATURES",
    "QuestionAnsweringShape",
    "answer_question",
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
        for role, split in raw.items():  # every split is trained on or scored, and SQuAD scores need an answer
            check_answers(split, split_name=role, require_answer=True, **self._columns())

    def config_updates(self) -> dict:
        return {"num_labels": 2}

    def features(self, split: Dataset, training: bool, **map_kwargs) -> Dataset:
        s = self.settings
        kwargs = {"tokenizer": self.tokenizer, "max_seq_length": s.max_seq_length, "doc_stride": s.doc_stride}
        kwargs.update(self._columns())
        if not training:  # evaluation windows keep their example's id and the context's character offsets
            kwargs.update(id_column=self.task.columns["id"], with_positions=True)
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
        self, folder: Path, raw: Dataset, features: Dataset, prediction: PredictionOutput, title: str
    ) -> None:
        """predictions.csv: index, id, question, gold answers (" | "-joined), predicted answer, its score."""
        answers = self._answers(raw, features, prediction)
        c = self.task.columns
        rows = []
        for i, example in enumerate(raw):
            found = answers[str(example[c["id"]])]
            gold = " | ".join(example[c["answers"]]["text"])
            rows.append([i, example[c["id"]], example[c["question"]], gold, found["text"], f"{found['score']:.6f}"])
        write_csv(folder / "predictions.csv", ["index", "id", "question", "label", "prediction", "score"], rows)
