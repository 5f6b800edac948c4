"""Extractive question answering's windows and answers: one implementation for training, evaluation and inference.

The work is split as in transformers' `run_qa.py` / `utils_qa.py`:

1. preprocess: `prepare_train_features` / `prepare_eval_features` cut each (question, context) pair into windows of
   at most `max_seq_length` tokens, "[CLS] question [SEP] context part [SEP]", consecutive context parts overlapping
   by `doc_stride` tokens, so an answer cut by one window's edge lies whole in the next. Training features carry the
   answer's token positions; evaluation features carry `example_id` and the context's character `offset_mapping`.
2. postprocess: `postprocess_predictions` turns the start/end logits of all the windows of an example back into a
   character span of its context.

`hf_bertscratch.inference.answer_question` runs 1 and 2 around the forward passes of a `*ForQuestionAnswering` model;
`hf_bertscratch.tasks.question_answering` reads and checks SQuAD data and fine-tuning maps its splits through 1 and
scores 2's answers.

Features assume right padding (BERT tokenizers pad on the right): token t of feature f is at `[f, t]` of the logits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from transformers import BatchEncoding, PreTrainedTokenizerBase

if TYPE_CHECKING:
    from datasets import Dataset

# `datasets.map` hands batches over as column -> values; a Dataset answers `[column]` the same way.
Examples = Mapping[str, Sequence[Any]]
Offsets = Sequence[Sequence[int] | None]

_CONTEXT = 1  # the sequence id of the context: the tokenizer's second sequence


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
    ids = examples_column(examples, id_column, "id_column")
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
    questions = [question.lstrip() for question in examples_column(examples, question_column, "question_column")]
    _check_context_room(questions, tokenizer, max_seq_length, doc_stride)
    return tokenizer(
        questions,
        list(examples_column(examples, context_column, "context_column")),
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
    answers = examples_column(examples, answers_column, "answers_column")
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


def examples_column(examples: Examples | Dataset, name: str, role: str) -> Sequence[Any]:
    """The values of column `name` of a batch of examples or a Dataset; raises naming `role` if it has none."""
    # A batch is a Mapping (a dict, or the batch `datasets.map` hands over); a Dataset is not one.
    columns = list(examples) if isinstance(examples, Mapping) else examples.column_names
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
    example_ids = list(examples_column(examples, id_column, "id_column"))
    by_example = _features_by_example(example_ids, list(examples_column(features, "example_id", "features' column")))
    all_offsets = list(examples_column(features, "offset_mapping", "features' column"))
    _check_logits(start_logits, end_logits, len(all_offsets))
    predictions = {}
    for example_id, context in zip(example_ids, examples_column(examples, context_column, "context_column")):
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
    """The valid spans among one feature's top start x top end tokens; logits are (T,), T >= the feature's length.
    Only the feature's own tokens are ranked: padding past them (a batch padded to a longer feature) takes no place
    among the top tokens, so a feature's spans are the same in any batch."""
    length = len(offsets)
    top_starts = np.argsort(start_logits[:length])[::-1][:n_best_size]
    top_ends = np.argsort(end_logits[:length])[::-1][:n_best_size]
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


__all__ = [
    "Examples",
    "examples_column",
    "postprocess_predictions",
    "prepare_eval_features",
    "prepare_train_features",
]
