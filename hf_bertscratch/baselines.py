"""What a task scores with no learning at all, so that a fine-tuned model's number can be read against it.

Four answers that need no training of the model:

- the **constant answer**: the commonest class of the train split for every example (for a score: the same number
  for every pair, which ranks nothing: correlation 0);
- **word overlap**: the Jaccard similarity of a pair's two lower-cased word sets (`word_overlap`);
- the **bag of words**: TF-IDF features of a single text's words, and of its words and word pairs, with a logistic
  regression fitted on the train split (`bag_of_words`): the classical text classifier a fine-tuned model must beat;
- the **zero-shot cosine**: the cosine of the two texts' mean-pooled last hidden states of the pretrained model,
  no fine-tuning (`hf_bertscratch.similarity.pair_cosines`);
- for tagging, **each word's most frequent tag** in the train split, the commonest tag for a word never seen there
  (`most_frequent_tags`): a lookup table, scored by entity as the tagger is;
- for extractive question answering, **the sentence of the context that shares the most words with the question**
  (`best_sentence_answers`), scored by SQuAD's exact match and F1 as the reader is;
- for multi-label classification, **each label's commonest train value** (present or absent: most often no label at
  all), **the train split's commonest label set** for every example (`constant_label_sets`), and the bag of words as
  one logistic regression per label, scored by micro and macro F1 and subset accuracy as the classifier is.

A score baseline is read as the task reads predictions: a regression task's correlations come straight from the
scores; a classification task's accuracy, F1 and Matthews correlation come from one threshold on the score, chosen on
the train split (either direction: above it means the last class, or the first), then applied to the eval split.
The metrics are the ones fine-tuning reports (`hf_bertscratch.metrics`), under the same names.

A baseline is a yardstick beside a run, never a reason for the run to fail: an answer that cannot be computed on the
data at hand (a bag of words of a few train texts that share no word) is logged in one line and recorded as not
computed.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Protocol, TypeAlias

import numpy as np

from .metrics import ClassificationMetrics, MultiLabelMetrics, RegressionMetrics, labels_above_threshold, load_metric

_WORD = re.compile(r"\w+")

logger = logging.getLogger(__name__)
# A multi-label threshold choice on the eval split: (logits (N, K), 0/1 labels (N, K)) -> one threshold, or one per
# label.
ThresholdChoice: TypeAlias = Callable[[np.ndarray, np.ndarray], float | list[float]]


class _Split(Protocol):
    """A raw split whose text columns are read by name (a `datasets.Dataset`)."""

    def __getitem__(self, column: str, /) -> Sequence[str]: ...


def word_set(text: str) -> set[str]:
    """The lower-cased words (runs of letters, digits and underscores) of `text`."""
    return set(_WORD.findall(text.lower()))


def word_overlap(first: str, second: str) -> float:
    """Jaccard similarity of the two texts' lower-cased word sets: |A & B| / |A | B|, 0 when both are empty."""
    a, b = word_set(first), word_set(second)
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def word_overlaps(firsts: Sequence[str | None], seconds: Sequence[str | None]) -> np.ndarray:
    """`word_overlap` of each pair: (N,) floats; a missing text (None) is an empty one, as fine-tuning reads it."""
    pairs = zip(firsts, seconds, strict=True)
    return np.array([word_overlap(a or "", b or "") for a, b in pairs], dtype=np.float64)


def fit_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, bool]:
    """The threshold on `scores` (N,) and direction that classify the binary `labels` (N,) most accurately:
    predict 1 where `score > threshold` (`above_is_one`) or where `score <= threshold` (not `above_is_one`).

    Every midpoint between consecutive distinct scores is tried, and one below the lowest (a constant answer)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    order = np.argsort(scores, kind="stable")
    sorted_scores, sorted_labels = scores[order], labels[order]
    # ones_at_or_below[k]: how many of the k lowest scores have label 1.
    ones_at_or_below = np.concatenate([[0], np.cumsum(sorted_labels)])
    total_ones, n = int(sorted_labels.sum()), len(labels)
    distinct = np.flatnonzero(np.diff(sorted_scores) > 0) + 1  # cut points between distinct values
    cuts = np.concatenate([[0], distinct])  # k: predictions split after the k lowest scores
    # "above is one": the k lowest are 0, the rest 1.
    correct_above = (cuts - ones_at_or_below[cuts]) + (total_ones - ones_at_or_below[cuts])
    correct_below = n - correct_above
    best_above, best_below = int(correct_above.argmax()), int(correct_below.argmax())
    above_is_one = correct_above[best_above] >= correct_below[best_below]
    k = cuts[best_above if above_is_one else best_below]
    threshold = sorted_scores[0] - 1.0 if k == 0 else (sorted_scores[k - 1] + sorted_scores[k]) / 2
    return float(threshold), bool(above_is_one)


def threshold_predictions(scores: np.ndarray, threshold: float, above_is_one: bool) -> np.ndarray:
    """Binary predictions (N,) of `fit_threshold`'s rule."""
    above = np.asarray(scores, dtype=np.float64) > threshold
    return (above if above_is_one else ~above).astype(np.int64)


def constant_answer(train_labels: Sequence, eval_labels: Sequence, num_labels: int | None) -> dict[str, float]:
    """The metrics of answering the train split's commonest class for every eval example (`num_labels` classes),
    or, for a regression task (`num_labels` None), of one score for every pair: correlation 0, and the mean
    squared error of the train mean."""
    if num_labels is None:
        mean = float(np.mean(np.asarray(train_labels, dtype=np.float64)))
        errors = (np.asarray(eval_labels, dtype=np.float64) - mean) ** 2
        return {"pearson": 0.0, "spearmanr": 0.0, "combined_score": 0.0, "mse": float(errors.mean())}
    commonest = int(np.bincount(np.asarray(train_labels, dtype=np.int64), minlength=num_labels).argmax())
    predictions = [commonest] * len(eval_labels)
    return ClassificationMetrics(num_labels, pairs=True).compute(predictions, list(map(int, eval_labels)))


def score_baseline(
    train_scores: np.ndarray | None,
    train_labels: Sequence,
    eval_scores: np.ndarray,
    eval_labels: Sequence,
    num_labels: int | None,
) -> dict[str, float]:
    """The metrics of a no-learning score (word overlap, zero-shot cosine) on the eval split.

    Regression (`num_labels` None): the correlations of the scores with the labels (`train_scores` unused).
    Binary classification: a threshold fit on the train split's scores (`fit_threshold`), applied to the eval scores.
    """
    if num_labels is None:
        metrics = RegressionMetrics().compute(list(map(float, eval_scores)), list(map(float, eval_labels)))
        metrics.pop("mse")  # a similarity is not on the labels' scale
        return metrics
    if num_labels != 2:
        raise ValueError(f"A score baseline classifies two classes by a threshold; this task has {num_labels}.")
    if train_scores is None:
        raise ValueError("A classification task's score baseline needs the train split's scores to fit a threshold.")
    threshold, above_is_one = fit_threshold(np.asarray(train_scores), np.asarray(train_labels))
    predictions = threshold_predictions(np.asarray(eval_scores), threshold, above_is_one)
    return ClassificationMetrics(2, pairs=True).compute(predictions.tolist(), list(map(int, eval_labels)))


# The bag-of-words classifier: sublinear term frequencies, words seen in at least two train texts, L2-regularised
# logistic regression with C=4 (scikit-learn). On a busy 2-core AMD EPYC it scores SST-2 dev 82.2 (words) / 82.0 (words
# and word pairs) in 20 s each, and IMDB test 88.8 / 90.4 in 37 s / 95 s.
BAG_OF_WORDS = {"sublinear_tf": True, "min_df": 2}
BAG_OF_WORDS_C = 4.0
# A no-learning answer -> how logs and tables name it (a run's results record it as `baseline_<answer>`).
BASELINE_NAMES = {
    "constant": "constant answer",
    "word_overlap": "word overlap",
    "bag_of_words": "bag of words",
    "bag_of_word_pairs": "bag of words and word pairs",
    "most_frequent_tag": "each word's most frequent tag",
    "best_sentence": "the context's sentence most like the question",
    "label_majority": "each label's commonest value",
    "commonest_set": "the commonest label set",
}
# n-gram range -> the name of its baseline
BAG_OF_WORDS_NGRAMS = {(1, 1): "bag_of_words", (1, 2): "bag_of_word_pairs"}


def bag_of_words(
    train_texts: Sequence[str],
    train_labels: Sequence[int],
    scored: Sequence[tuple[Sequence[str], Sequence[int]]],
    num_labels: int,
    ngram_range: tuple[int, int] = (1, 1),
    choose: ThresholdChoice | None = None,
) -> list[dict[str, float]]:
    """The metrics on each of `scored` ((texts, labels) per split) of TF-IDF + logistic regression fitted once on the
    train texts (`BAG_OF_WORDS`): single texts of `num_labels` classes, words (`ngram_range` (1, 1)) or words and word
    pairs ((1, 2)). Multi-label `train_labels` ((N, K) 0/1 rows) fit one logistic regression per label, each scored
    as a multi-label classifier is (`MultiLabelMetrics`): at `MULTI_LABEL_THRESHOLD`, or where the classifier's
    threshold is chosen on the eval split, at the one `choose` (the classifier's own choice: one threshold, or one per
    label) picks on the first of `scored` (the eval split) from the regressions' probabilities as logits."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    labels_of_rows = np.asarray(train_labels, dtype=np.int64)
    multi_label = labels_of_rows.ndim == 2  # (N, K) 0/1 rows: one logistic regression per label
    vectorizer = TfidfVectorizer(ngram_range=ngram_range, **BAG_OF_WORDS)
    try:
        features = vectorizer.fit_transform([text or "" for text in train_texts])
    except ValueError as error:  # scikit-learn's "empty vocabulary" or "After pruning, no terms remain"
        raise ValueError(
            f"no word occurs in {BAG_OF_WORDS['min_df']} or more of the {len(train_texts)} train texts, as the bag of "
            "words needs"
        ) from error
    classifier = LogisticRegression(C=BAG_OF_WORDS_C, max_iter=1000)
    fitted = (OneVsRestClassifier(classifier) if multi_label else classifier).fit(features, labels_of_rows)
    rows = [vectorizer.transform([text or "" for text in texts]) for texts, _ in scored]
    if multi_label and choose is not None:  # at the threshold chosen on the eval split (the first of `scored`)
        logits = [_as_logits(fitted.predict_proba(split)) for split in rows]
        threshold = choose(logits[0], np.asarray(scored[0][1]))
        predictions = [labels_above_threshold(split, threshold) for split in logits]
    else:
        predictions = [fitted.predict(split) for split in rows]
    if multi_label:
        return [
            MultiLabelMetrics(num_labels).compute(predicted, np.asarray(labels))
            for predicted, (_, labels) in zip(predictions, scored, strict=True)
        ]
    return [
        ClassificationMetrics(num_labels, pairs=True).compute([int(p) for p in predicted], list(map(int, labels)))
        for predicted, (_, labels) in zip(predictions, scored, strict=True)
    ]


def _as_logits(probabilities: np.ndarray) -> np.ndarray:
    """Probabilities as the logits whose sigmoids they are (a threshold choice reads logits)."""
    clipped = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(clipped / (1 - clipped))


def constant_label_sets(
    train_labels: Sequence[Sequence[float]], scored: Sequence[Sequence[Sequence[float]]]
) -> dict[str, list[dict[str, float]]]:
    """A multi-label task's constant answers, scored on each split of `scored` (its (N, K) 0/1 rows): "label_majority",
    each label present where most train examples hold it (absent at a tie), and "commonest_set", the label set the
    most train examples hold (the first seen among equals)."""
    train = np.asarray(train_labels, dtype=np.int64)
    majority = (2 * train.sum(0) > len(train)).astype(np.int64)
    sets = Counter(tuple(row) for row in train.tolist())
    commonest = np.asarray(sets.most_common(1)[0][0], dtype=np.int64)
    metrics = MultiLabelMetrics(train.shape[1])
    return {
        answer: [metrics.compute(np.tile(row, (len(labels), 1)), np.asarray(labels)) for labels in scored]
        for answer, row in (("label_majority", majority), ("commonest_set", commonest))
    }


def most_frequent_tags(
    train_words: Sequence[Sequence[str]], train_tags: Sequence[Sequence[str]], words: Sequence[Sequence[str]]
) -> list[list[str]]:
    """Each word's tag in the train split most often (the first seen among equals), the train split's commonest tag
    (O in named entities) for a word it never saw: one list of tags per sentence of `words`."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for sentence, tags in zip(train_words, train_tags, strict=True):
        for word, tag in zip(sentence, tags, strict=True):
            counts[word][tag] += 1
    commonest = Counter(tag for tags in train_tags for tag in tags).most_common(1)[0][0]
    table = {word: tags.most_common(1)[0][0] for word, tags in counts.items()}
    return [[table.get(word, commonest) for word in sentence] for sentence in words]


def tag_names(task, train: _Split) -> list[str] | None:
    """The names of a token-classification split's tag ids: the task's label names, else the `ClassLabel` names of
    the tags column's feature; None when the tags are names already or their names are not known."""
    if task.label_names:
        return list(task.label_names)
    feature = getattr(getattr(train, "features", {}).get(task.columns["tags"]), "feature", None)
    names = getattr(feature, "names", None)
    return list(names) if names is not None else None


def tagging_baseline(task, train: _Split, splits: Sequence[_Split], names: list[str] | None) -> list[dict[str, float]]:
    """`most_frequent_tags` fitted on the train split, scored on each of `splits` with the tagger's metric
    (entity-level `seqeval`, its `overall_*` scores); tag ids are read as `names` (`tag_names`), names as given."""
    words, tags = task.columns["tokens"], task.columns["tags"]

    def named(split: _Split) -> list[list[str]]:
        return [[names[t] if names is not None and not isinstance(t, str) else t for t in row] for row in split[tags]]

    train_tags, seqeval = named(train), load_metric("seqeval")
    out = []
    for split in splits:
        predicted = most_frequent_tags(train[words], train_tags, split[words])
        scores = seqeval.compute(predictions=predicted, references=named(split))
        out.append({key: float(value) for key, value in scores.items() if key.startswith("overall_")})
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def best_sentence_answers(questions: Sequence[str], contexts: Sequence[str]) -> list[str]:
    """For each question, the sentence of its context (split after `.`, `!` or `?`) that shares the most lower-cased
    words with it (`word_set`), the first among equals: an answer found by word overlap alone."""
    answers = []
    for question, context in zip(questions, contexts, strict=True):
        asked = word_set(question or "")
        sentences = [part for part in _SENTENCE_END.split(context or "") if part.strip()] or [context or ""]
        answers.append(max(sentences, key=lambda sentence: len(asked & word_set(sentence))).strip())
    return answers


def reading_baseline(task, splits: Sequence[_Split]) -> list[dict[str, float]]:
    """`best_sentence_answers` on each of `splits`, scored with the reader's metric (SQuAD v1.1's exact match and
    F1, 0-100, against every gold answer)."""
    squad, c = load_metric("squad"), task.columns
    out = []
    for split in splits:
        ids = [str(i) for i in split[c["id"]]]  # made up where the data has none (`tasks.data.load_task_datasets`)
        answers = best_sentence_answers(split[c["question"]], split[c["context"]])
        out.append(
            squad.compute(
                predictions=[{"id": i, "prediction_text": a} for i, a in zip(ids, answers, strict=True)],
                references=[{"id": i, "answers": g} for i, g in zip(ids, split[c["answers"]], strict=True)],
            )
        )
    return out


def _reason(error: Exception) -> str:
    """What stopped a no-learning answer, in a few words for a log line."""
    return (str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}").rstrip(".")


def no_learning_scores(
    task,
    train: _Split,
    train_labels: Sequence,
    scored: Mapping[str, tuple[_Split, Sequence]],
    choose: ThresholdChoice | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Every metric of each no-learning answer to a task on each split of `scored`: split -> answer -> metrics.
    The answers: "constant"; for a pair task with scores or two classes, "word_overlap"; for a single-text
    classification task, "bag_of_words" and "bag_of_word_pairs" (`bag_of_words`, each fitted once); for token
    classification, "most_frequent_tag" alone (`tagging_baseline`: read from the splits' words and tags); for
    question answering, "best_sentence" alone (`reading_baseline`: from the splits' questions, contexts and answers);
    for multi-label classification, "label_majority" and "commonest_set" (`constant_label_sets`) and, for single
    texts, the bags of words.
    A split gets {} when it has no labels. One line names the answers and splits before the work starts; an answer
    that cannot be computed on this data gets {} as its metrics, and one warning line per reason names the answers it
    stopped.

    Args:
        task: the run's `TaskSpec`.
        train / train_labels: the raw train split (its text columns are read for word overlap and the bags of words)
            and its labels as the run scores them (class ids, numbers, or a multi-label task's 0/1 rows).
        scored: split name ("eval", "test") -> (the raw split, its labels).
        choose: a multi-label classifier's threshold choice where it is made on the eval split (`bag_of_words`).
    """
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in scored}
    scored = {name: split for name, split in scored.items() if len(split[1]) > 0}
    if not scored:
        return out
    not_computed: dict[str, list[str]] = {}  # reason -> the answers it stopped
    answers = _answers(task, train, train_labels, scored, choose)
    if answers:  # the bags of words of a large train split take a while: the wait is named before it starts
        logger.info(
            "Scoring what no learning scores on the %s split%s: %s%s.",
            " and ".join(scored), "s" if len(scored) > 1 else "", ", ".join(BASELINE_NAMES[a] for a in answers),
            " (fitted on the train split)" if len(train_labels) else "",
        )  # fmt: skip
    for answer, compute in answers.items():
        try:
            per_split = compute()
        except Exception as error:  # noqa: BLE001 (any error: a yardstick beside a run must not cost it its model)
            not_computed.setdefault(_reason(error), []).append(BASELINE_NAMES[answer])
            per_split = [{} for _ in scored]
        for name, metrics in zip(scored, per_split, strict=True):
            out[name][answer] = metrics
    for reason, names in not_computed.items():
        logger.warning("No-learning baseline not computed: %s (%s).", ", ".join(names), reason)
    return out


def _answers(
    task,
    train: _Split,
    train_labels: Sequence,
    scored: Mapping[str, tuple[_Split, Sequence]],
    choose: ThresholdChoice | None = None,
) -> dict[str, Callable[[], list[dict[str, float]]]]:
    """The no-learning answers that apply to the task (`no_learning_scores`), each a callable that gives its metrics
    on every split of `scored`, in order."""
    if task.shape == "token-classification":
        names = tag_names(task, train)
        if names is None and any(not isinstance(t, str) for row in train[task.columns["tags"]] for t in row):
            return {}  # tag ids whose names are not known: nothing to score entities by
        splits = [split for split, _ in scored.values()]
        return {"most_frequent_tag": partial(tagging_baseline, task, train, splits, names)}
    if task.shape == "question-answering":
        return {"best_sentence": partial(reading_baseline, task, [split for split, _ in scored.values()])}
    if task.shape == "multi-label-classification":
        return _multi_label_answers(task, train, train_labels, scored, choose)
    num_labels = len(task.label_names) if task.label_names else None
    if task.shape == "classification" and num_labels is None:
        num_labels = int(max(max(train_labels), *(max(labels) for _, labels in scored.values()))) + 1
    answers: dict[str, Callable[[], list[dict[str, float]]]] = {
        "constant": lambda: [constant_answer(train_labels, labels, num_labels) for _, labels in scored.values()]
    }
    first, second = task.columns.get("text"), task.columns.get("text_pair")
    if second and num_labels in (None, 2):

        def overlaps() -> list[dict[str, float]]:
            train_scores = word_overlaps(train[first], train[second])
            return [
                score_baseline(
                    train_scores, train_labels, word_overlaps(split[first], split[second]), labels, num_labels
                )
                for split, labels in scored.values()
            ]

        answers["word_overlap"] = overlaps
    if task.shape == "classification" and not second and num_labels is not None and len(set(train_labels)) > 1:
        texts = [(split[first], labels) for split, labels in scored.values()]
        for ngrams, answer in BAG_OF_WORDS_NGRAMS.items():
            answers[answer] = partial(bag_of_words, train[first], train_labels, texts, num_labels, ngrams)
    return answers


def _multi_label_answers(
    task,
    train: _Split,
    train_labels: Sequence,
    scored: Mapping[str, tuple[_Split, Sequence]],
    choose: ThresholdChoice | None = None,
) -> dict[str, Callable[[], list[dict[str, float]]]]:
    """A multi-label task's no-learning answers (`no_learning_scores`): the constant label sets and, for single texts,
    the bags of words, one logistic regression per label (a label that every train example holds, or none, answered
    as the train split holds it)."""
    label_rows = [labels for _, labels in scored.values()]
    constants = functools.cache(lambda: constant_label_sets(train_labels, label_rows))
    answers: dict[str, Callable[[], list[dict[str, float]]]] = {
        "label_majority": lambda: constants()["label_majority"],
        "commonest_set": lambda: constants()["commonest_set"],
    }
    first, second = task.columns.get("text"), task.columns.get("text_pair")
    if not second and len(train_labels):
        num_labels = len(train_labels[0])
        texts = [(split[first], labels) for split, labels in scored.values()]
        for ngrams, answer in BAG_OF_WORDS_NGRAMS.items():
            answers[answer] = partial(bag_of_words, train[first], train_labels, texts, num_labels, ngrams, choose)
    return answers


def baseline_key(answer: str, split: str = "eval") -> str:
    """The results key of a no-learning answer's score on a split: `baseline_<answer>` on the eval split,
    `<split>_baseline_<answer>` on another (`test_baseline_bag_of_words`)."""
    return f"baseline_{answer}" if split == "eval" else f"{split}_baseline_{answer}"


def task_baselines(
    task,
    train: _Split,
    train_labels: Sequence,
    scored: Mapping[str, tuple[_Split, Sequence]],
    choose: ThresholdChoice | None = None,
) -> dict[str, float | None]:
    """`no_learning_scores` of the task's main metric, as a run's results record them (`baseline_key`): on the eval
    split `baseline_constant`, `baseline_word_overlap`, `baseline_bag_of_words`, `baseline_bag_of_word_pairs` (those
    that apply); on a test split the same keys with `test_` in front. An answer not computed on this data is
    recorded as None (null in all_results.json)."""
    out: dict[str, float | None] = {}
    for split, answers in no_learning_scores(task, train, train_labels, scored, choose).items():
        for answer, metrics in answers.items():
            if not metrics:  # not computed on this data (`no_learning_scores` said why)
                out[baseline_key(answer, split)] = None
            elif metrics.get(task.main_metric) is not None:
                out[baseline_key(answer, split)] = metrics[task.main_metric]
    return out


__all__ = [
    "BAG_OF_WORDS_NGRAMS",
    "BASELINE_NAMES",
    "baseline_key",
    "bag_of_words",
    "no_learning_scores",
    "task_baselines",
    "constant_answer",
    "constant_label_sets",
    "fit_threshold",
    "best_sentence_answers",
    "most_frequent_tags",
    "reading_baseline",
    "score_baseline",
    "tagging_baseline",
    "threshold_predictions",
    "word_overlap",
    "word_overlaps",
    "word_set",
]


def unigram_answer(rows: Sequence[Sequence[int]], special_ids: Sequence[int]) -> tuple[float, float, int]:
    """What a masked LM scores on the unigram plateau, where it predicts the text's token frequencies everywhere.

    Masked positions are drawn uniformly from the non-special tokens of `rows` (token id lists), so always answering
    the commonest token scores its share, and the token frequencies as the prediction score the exponentiated
    entropy as perplexity. Returns (accuracy, perplexity, the commonest token's id); (0, 1, -1) for no tokens.
    """
    ids = np.concatenate([np.asarray(row, dtype=np.int64) for row in rows]) if len(rows) else np.zeros(0, np.int64)
    ids = ids[~np.isin(ids, np.asarray(list(special_ids), dtype=np.int64))]
    if ids.size == 0:
        return 0.0, 1.0, -1
    counts = np.bincount(ids)
    shares = counts[counts > 0] / ids.size
    return float(counts.max() / ids.size), float(np.exp(-(shares * np.log(shares)).sum())), int(counts.argmax())
