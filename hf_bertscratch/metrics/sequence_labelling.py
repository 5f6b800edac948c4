"""Entity-level scores for sequence labelling (NER, chunking) that agree with conlleval and seqeval.

`entity_spans` turns one sentence of chunk tags into entity spans with conlleval's rules, which seqeval's default
(non-strict) mode ports: it reads IOB1, IOB2, IOE1, IOE2 and IOBES alike, and an ill-formed tag still yields a span
(`I-PER` after `O` starts one, `I-LOC` after `B-PER` ends the PER span and starts a LOC one). `sequence_labelling_scores`
computes from those spans what the Hub's `seqeval` metric returns, and `Seqeval` is that metric as an `evaluate`
module (the script `seqeval/seqeval.py` beside this file only imports it), so the same dict comes back offline.
"""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import evaluate

# conlleval's chunk boundaries between the previous tag prefix and the current one. A chunk also ends, and a new one
# starts, wherever the entity type changes next to a tag that is not outside ("O", or conlleval's "." marker).
_ENDS_AFTER = frozenset({"E", "S"})
_ENDS_BETWEEN = frozenset({("B", "B"), ("B", "S"), ("B", "O"), ("I", "B"), ("I", "S"), ("I", "O")})
_STARTS_AT = frozenset({"B", "S"})
_STARTS_BETWEEN = frozenset({("E", "E"), ("E", "I"), ("S", "E"), ("S", "I"), ("O", "E"), ("O", "I")})
_OUTSIDE = frozenset({"O", "."})

SEQEVAL_SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
ZERO_DIVISION_VALUES = {"warn": 0.0, 0: 0.0, 1: 1.0}


def split_tag(label: str, suffix: bool = False) -> tuple[str, str]:
    """The (prefix, entity type) of one label: "B-PER" -> ("B", "PER"), or "PER-B" with `suffix=True`.

    A label without a type ("O", or a bare "B") gets the type "_", the name seqeval gives such chunks.
    """
    if suffix:
        type_, _, prefix = label.rpartition("-")
    else:
        prefix, _, type_ = label.partition("-")
    return prefix, type_ or "_"


def _chunk_ends(prev_prefix: str, prev_type: str, prefix: str, type_: str) -> bool:
    if prev_prefix in _ENDS_AFTER or (prev_prefix, prefix) in _ENDS_BETWEEN:
        return True
    return prev_prefix not in _OUTSIDE and prev_type != type_


def _chunk_starts(prev_prefix: str, prev_type: str, prefix: str, type_: str) -> bool:
    if prefix in _STARTS_AT or (prev_prefix, prefix) in _STARTS_BETWEEN:
        return True
    return prefix not in _OUTSIDE and prev_type != type_


def entity_spans(tags: Sequence[str], suffix: bool = False) -> list[tuple[str, int, int]]:
    """The entities in one sentence of chunk tags, as `(type, start, end)` with `end` INCLUSIVE (seqeval's convention).

    Args:
        tags: one label per token: "O" or "<prefix>-<type>" with prefix B, I, E or S (IOB1/IOB2/IOE/IOBES).
        suffix: labels are "<type>-<prefix>" instead.

    Example: `entity_spans(["B-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]`.
    """
    spans: list[tuple[str, int, int]] = []
    # conlleval starts from an "O" of no type, so that a first tag of any type counts as a change of type.
    prev_prefix, prev_type, begin = "O", "", 0
    for position, label in enumerate([*tags, "O"]):  # the closing "O" ends a chunk that runs to the last token
        prefix, type_ = split_tag(label, suffix)
        if _chunk_ends(prev_prefix, prev_type, prefix, type_):
            spans.append((prev_type, begin, position - 1))
        if _chunk_starts(prev_prefix, prev_type, prefix, type_):
            begin = position
        prev_prefix, prev_type = prefix, type_
    return spans


def _precision_recall_f1(correct: int, predicted: int, actual: int, zero_value: float) -> tuple[float, float, float]:
    precision = correct / predicted if predicted else zero_value
    recall = correct / actual if actual else zero_value
    # seqeval takes F1 from the (possibly zero-division) precision and recall, and 0 when both are 0.
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _corpus_spans(sentences: Sequence[Sequence[str]], suffix: bool) -> set[tuple[str, int, int, int]]:
    """Every entity of every sentence as (type, sentence index, start, end): entities never cross sentences."""
    return {
        (type_, index, start, end)
        for index, tags in enumerate(sentences)
        for type_, start, end in entity_spans(tags, suffix)
    }


def _check_sentences(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"Got {len(predictions)} predicted sentences for {len(references)} reference sentences.")
    for index, (predicted, reference) in enumerate(zip(predictions, references)):
        if len(predicted) != len(reference):
            raise ValueError(
                f"Sentence {index} has {len(predicted)} predicted tags for {len(reference)} reference tags."
            )
    if not any(len(reference) for reference in references):
        raise ValueError("Got no tokens to score.")


def sequence_labelling_scores(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    suffix: bool = False,
    zero_division: str | int = "warn",
) -> dict:
    """Entity-level precision, recall and F1 per type and overall, and token accuracy: the Hub `seqeval` metric's dict.

    Args:
        predictions: predicted tags, one list per sentence.
        references: gold tags, with the same number of tags per sentence as `predictions`.
        suffix: labels are "<type>-<prefix>" instead of "<prefix>-<type>".
        zero_division: the precision or recall when its denominator is 0: "warn" or 0 give 0.0, 1 gives 1.0.

    Returns:
        `{type: {"precision", "recall", "f1", "number"}}` for every entity type predicted or in the references
        ("number": its count in the references), then "overall_precision", "overall_recall", "overall_f1" (micro
        averages over all entities) and "overall_accuracy" (the fraction of tokens whose tag is right).
    """
    if zero_division not in ZERO_DIVISION_VALUES:
        raise ValueError(f"zero_division must be one of {list(ZERO_DIVISION_VALUES)}, got {zero_division!r}.")
    _check_sentences(predictions, references)
    zero_value = ZERO_DIVISION_VALUES[zero_division]
    actual, predicted = _corpus_spans(references, suffix), _corpus_spans(predictions, suffix)
    scores: dict = {}
    for type_ in sorted({span[0] for span in actual | predicted}):
        actual_of_type = {span for span in actual if span[0] == type_}
        predicted_of_type = {span for span in predicted if span[0] == type_}
        correct = len(actual_of_type & predicted_of_type)
        precision, recall, f1 = _precision_recall_f1(correct, len(predicted_of_type), len(actual_of_type), zero_value)
        scores[type_] = {"precision": precision, "recall": recall, "f1": f1, "number": len(actual_of_type)}
    precision, recall, f1 = _precision_recall_f1(len(actual & predicted), len(predicted), len(actual), zero_value)
    tokens = [(p, r) for pred_tags, ref_tags in zip(predictions, references) for p, r in zip(pred_tags, ref_tags)]
    scores["overall_precision"], scores["overall_recall"], scores["overall_f1"] = precision, recall, f1
    scores["overall_accuracy"] = sum(p == r for p, r in tokens) / len(tokens)
    return scores


_INPUTS_DESCRIPTION = """
Args:
    predictions (list of list of str): predicted tags, one list per sentence.
    references (list of list of str): gold tags, one list per sentence.
    suffix (bool): labels are "<type>-<prefix>" instead of "<prefix>-<type>". Defaults to False.
    scheme (str): seqeval's tagging scheme for mode="strict"; ignored otherwise, as seqeval does.
    mode (str): None for conlleval's rules; seqeval's "strict" mode is not available offline.
    sample_weight (list of float): ignored, as seqeval's default mode ignores it.
    zero_division ("warn", 0 or 1): the precision or recall when its denominator is 0 ("warn" gives 0).
Returns:
    for each entity type a dict of precision, recall, f1 and number (its count in the references);
    overall_precision, overall_recall, overall_f1 and overall_accuracy (token accuracy).
"""


class Seqeval(evaluate.Metric):
    """Entity-level scores for sequence labelling with the Hub `seqeval` metric's inputs and outputs."""

    def _info(self) -> evaluate.MetricInfo:
        tag_sequence = datasets.Sequence(datasets.Value("string", id="label"), id="sequence")
        return evaluate.MetricInfo(
            description="Entity-level precision, recall and F1 of chunk taggers (conlleval's rules), and token accuracy.",
            citation="Nakayama, seqeval: A Python framework for sequence labeling evaluation, 2018; "
            "Tjong Kim Sang and Buchholz, Introduction to the CoNLL-2000 Shared Task: Chunking, 2000.",
            inputs_description=_INPUTS_DESCRIPTION,
            features=datasets.Features({"predictions": tag_sequence, "references": tag_sequence}),
            reference_urls=["https://github.com/chakki-works/seqeval"],
        )

    def _compute(
        self,
        predictions,
        references,
        suffix: bool = False,
        scheme: str | None = None,
        mode: str | None = None,
        sample_weight=None,
        zero_division: str | int = "warn",
    ) -> dict:
        if scheme is not None and scheme not in SEQEVAL_SCHEMES:
            raise ValueError(f"Scheme should be one of {list(SEQEVAL_SCHEMES)}, got {scheme!r}.")
        if mode is not None:
            raise ValueError(f"Only mode=None (conlleval's rules) is available offline, got mode={mode!r}.")
        return sequence_labelling_scores(predictions, references, suffix=suffix, zero_division=zero_division)


__all__ = ["Seqeval", "entity_spans", "sequence_labelling_scores", "split_tag"]
