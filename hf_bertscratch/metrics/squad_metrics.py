"""SQuAD v1.1 exact match and F1: the official evaluation script's logic, and the Hub `squad` metric built on it.

An answer is compared after `normalize_answer`; exact match asks for equal normalized strings, F1 counts the tokens
the two share (as multisets). Each question scores its best gold answer, and the corpus scores are percentages (0-100)
over all reference questions, a question without a prediction scoring 0. `Squad` is the Hub `squad` metric as an
`evaluate` module (the script `squad/squad.py` beside this file only imports it), so the same dict comes back offline.
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import datasets
import evaluate

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, then collapse whitespace (the official order)."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> float:
    """1.0 when the normalized prediction equals the normalized gold answer, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction: str, ground_truth: str) -> float:
    """Token F1 between the normalized prediction and gold answer, shared tokens counted as a multiset; 0.0 if none."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    num_same = sum((Counter(prediction_tokens) & Counter(ground_truth_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_ground_truths(metric: Callable[[str, str], float], prediction: str, ground_truths: Sequence[str]) -> float:
    """The best score of `prediction` against any of the gold answers."""
    return max(metric(prediction, ground_truth) for ground_truth in ground_truths)


def squad_scores(predictions: Sequence[Mapping], references: Sequence[Mapping]) -> dict[str, float]:
    """Corpus exact match and F1 in percent, the Hub `squad` metric's dict.

    Args:
        predictions: `{"id": str, "prediction_text": str}` per answered question.
        references: `{"id": str, "answers": {"text": [str, ...], ...}}` per question; every one counts in the total.

    Returns:
        `{"exact_match": float, "f1": float}`, each the mean over `references` of the best score over gold answers,
        times 100.
    """
    if not references:
        raise ValueError("Got no reference questions to score.")
    predicted = {prediction["id"]: prediction["prediction_text"] for prediction in predictions}
    unanswered = [reference["id"] for reference in references if reference["id"] not in predicted]
    if unanswered:
        logger.warning(
            "%d of %d questions have no prediction and score 0 (e.g. %r).",
            len(unanswered),
            len(references),
            unanswered[0],
        )
    exact_match = f1 = 0.0
    for reference in references:
        if reference["id"] not in predicted:
            continue
        gold = reference["answers"]["text"]
        if not gold:
            raise ValueError(
                f"Question {reference['id']!r} has no gold answer; SQuAD v1.1 questions have at least one."
            )
        exact_match += max_over_ground_truths(exact_match_score, predicted[reference["id"]], gold)
        f1 += max_over_ground_truths(f1_score, predicted[reference["id"]], gold)
    return {"exact_match": 100.0 * exact_match / len(references), "f1": 100.0 * f1 / len(references)}


_INPUTS_DESCRIPTION = """
Args:
    predictions (list of dict): {"id": str, "prediction_text": str} per answered question.
    references (list of dict): {"id": str, "answers": {"text": list of str, "answer_start": list of int}} per question.
Returns:
    exact_match (float): the percentage of questions whose prediction matches a gold answer after normalization.
    f1 (float): the mean over questions of the best token F1 against a gold answer, in percent.
"""


class Squad(evaluate.Metric):
    """SQuAD v1.1 exact match and F1 with the Hub `squad` metric's inputs and outputs."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="SQuAD v1.1: exact match and token F1 of extracted answers against the gold answers.",
            citation="Rajpurkar et al., SQuAD: 100,000+ Questions for Machine Comprehension of Text, EMNLP 2016.",
            inputs_description=_INPUTS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                    "references": {
                        "id": datasets.Value("string"),
                        "answers": datasets.Sequence(
                            {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                        ),
                    },
                }
            ),
            codebase_urls=["https://rajpurkar.github.io/SQuAD-explorer/"],
            reference_urls=["https://rajpurkar.github.io/SQuAD-explorer/"],
        )

    def _compute(self, predictions, references) -> dict:
        return squad_scores(predictions, references)


__all__ = ["Squad", "exact_match_score", "f1_score", "max_over_ground_truths", "normalize_answer", "squad_scores"]
