"""No-learning baselines (`hf_bertscratch.baselines`), zero-shot cosines (`hf_bertscratch.similarity`) and the pair
diagnostic that reports them (`lab/diagnose_pairs.py`), each against a direct computation."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import AutoModel, AutoModelForMaskedLM, BertTokenizer

import hf_bertscratch
from hf_bertscratch.baselines import (
    best_sentence_answers,
    constant_answer,
    fit_threshold,
    most_frequent_tags,
    no_learning_scores,
    score_baseline,
    task_baselines,
    threshold_predictions,
    unigram_answer,
    word_overlap,
    word_overlaps,
)
from hf_bertscratch.similarity import encode, pair_cosines
from hf_bertscratch.tasks import TASKS

from conftest import CORPUS, tiny_config_kwargs

ROOT = Path(__file__).resolve().parents[1]


def test_word_overlap_is_the_jaccard_of_lower_cased_word_sets() -> None:
    assert word_overlap("The cat sat.", "the CAT ran") == pytest.approx(2 / 4)  # {the, cat} of {the, cat, sat, ran}
    assert word_overlap("", "") == 0.0 and word_overlap("a b", "c") == 0.0 and word_overlap("a, b", "b a") == 1.0
    assert word_overlaps(["the cat", None], [None, None]).tolist() == [0.0, 0.0]  # a missing text is empty
    np.testing.assert_allclose(word_overlaps(["a b", "c"], ["b", "c d"]), [0.5, 0.5])


def test_fit_threshold_is_the_most_accurate_rule_on_the_train_scores() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(1, 25))
        scores, labels = np.round(rng.random(n), 1), rng.integers(0, 2, n)
        threshold, above_is_one = fit_threshold(scores, labels)
        got = (threshold_predictions(scores, threshold, above_is_one) == labels).mean()
        best = max(
            ((scores > cut) if above else (scores <= cut)).astype(int).__eq__(labels).mean()
            for cut in [scores.min() - 1, *np.unique(scores)]
            for above in (True, False)
        )
        assert got == pytest.approx(best)


def test_score_baselines_match_a_direct_computation() -> None:
    rng = np.random.default_rng(1)
    scores, labels = rng.random(40), rng.random(40) * 5
    regression = score_baseline(None, labels, scores, labels, None)
    assert regression["spearmanr"] == pytest.approx(spearmanr(scores, labels).statistic, abs=1e-6)  # float32 inputs
    assert regression["pearson"] == pytest.approx(pearsonr(scores, labels).statistic, abs=1e-6)

    train_scores, train_labels = rng.random(60), rng.integers(0, 2, 60)
    dev_scores, dev_labels = rng.random(30), rng.integers(0, 2, 30)
    threshold, above = fit_threshold(train_scores, train_labels)
    predictions = threshold_predictions(dev_scores, threshold, above)
    classified = score_baseline(train_scores, train_labels, dev_scores, dev_labels, 2)
    assert classified["accuracy"] == pytest.approx(accuracy_score(dev_labels, predictions))
    assert classified["f1"] == pytest.approx(f1_score(dev_labels, predictions))
    assert classified["matthews_correlation"] == pytest.approx(matthews_corrcoef(dev_labels, predictions))
    with pytest.raises(ValueError, match="needs the train split's scores"):
        score_baseline(None, train_labels, dev_scores, dev_labels, 2)


def test_constant_answer_is_the_commonest_train_class() -> None:
    train, dev = [1, 1, 0, 1], [0, 1, 1, 0, 1]
    scores = constant_answer(train, dev, 2)
    assert scores["accuracy"] == pytest.approx(0.6) and scores["f1"] == pytest.approx(f1_score(dev, [1] * 5))
    assert scores["matthews_correlation"] == 0.0 and scores["top_class_share"] == 1.0
    regression = constant_answer([1.0, 3.0], [0.0, 4.0], None)
    assert (regression["spearmanr"], regression["mse"]) == (0.0, pytest.approx(((0 - 2) ** 2 + (4 - 2) ** 2) / 2))


def test_most_frequent_tags_look_each_word_up_in_the_train_split() -> None:
    words = [["Paris", "is", "big"], ["Paris", "Hilton", "is"], ["to", "Paris"]]
    tags = [["B-LOC", "O", "O"], ["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    # Paris: LOC twice, PER once; unseen words get the commonest tag (O)
    assert most_frequent_tags(words, tags, [["Paris", "Hilton", "sings"]]) == [["B-LOC", "I-PER", "O"]]


def test_the_tagging_baseline_is_scored_by_entity_as_the_tagger() -> None:
    """no_learning_scores of a token-classification task: each word's most frequent tag, its tag ids read by the
    task's names, scored by the seqeval package's entity F1 (what the tagger's run reports)."""
    import datasets
    from seqeval.metrics import f1_score as entity_f1

    from hf_bertscratch.tasks import TASKS

    task = TASKS["conll2003"]
    names = list(task.label_names)
    train = datasets.Dataset.from_dict(
        {"tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]], "ner_tags": [[3, 0, 7, 0], [1, 2]]}
    )
    dev = datasets.Dataset.from_dict(
        {"tokens": [["German", "Peter", "rejects"], ["EU", "call", "Blackburn"]], "ner_tags": [[7, 1, 0], [3, 0, 2]]}
    )
    scores = no_learning_scores(task, train, [[0]], {"eval": (dev, [[0]])})["eval"]["most_frequent_tag"]
    predicted = [["B-MISC", "B-PER", "O"], ["B-ORG", "O", "I-PER"]]
    references = [[names[t] for t in row] for row in dev["ner_tags"]]
    assert scores["overall_f1"] == pytest.approx(entity_f1(references, predicted))


def test_the_reading_baseline_answers_with_the_sentence_most_like_the_question() -> None:
    """Question answering's no-learning answer: the context's sentence sharing the most words with the question,
    scored by the official SQuAD v1.1 script's exact match and F1 (tests/reference_squad_v1.py) as the reader is."""
    import datasets
    import reference_squad_v1 as official

    from hf_bertscratch.tasks import TASKS

    context = "George Washington was born in Virginia. He led the army! Where did he live? He lived at Mount Vernon."
    questions = ["Where was Washington born?", "Where did Washington live?", "Who led the army?"]
    assert best_sentence_answers(questions, [context] * 3) == [
        "George Washington was born in Virginia.",
        "Where did he live?",  # the most shared words, not the answer: what no reading gives
        "He led the army!",
    ]
    golds = [["Virginia"], ["Mount Vernon"], ["George Washington", "Washington"]]
    dev = datasets.Dataset.from_dict(
        {
            "id": ["a", "b", "c"],
            "question": questions,
            "context": [context] * 3,
            "answers": [{"text": g, "answer_start": [context.index(g[0])]} for g in golds],
        }
    )
    scores = task_baselines(TASKS["squad"], dev, [], {"eval": (dev, dev["answers"])})
    paragraphs = [{"qas": [{"id": i, "answers": [{"text": t} for t in g]} for i, g in zip(dev["id"], golds)]}]
    predictions = dict(zip(dev["id"], best_sentence_answers(questions, [context] * 3)))
    assert scores == {
        "baseline_best_sentence": pytest.approx(official.evaluate([{"paragraphs": paragraphs}], predictions)["f1"])
    }


def test_a_baseline_the_data_does_not_allow_is_recorded_as_not_computed(caplog: pytest.LogCaptureFixture) -> None:
    """Four train texts that share no word leave the bag of words no vocabulary (it keeps words seen in two texts):
    both bags are recorded as None, in one warning line that says why, and the constant answer is still there."""
    train = {"sentence": ["A wonderful film.", "Terrible acting.", "Loved every minute", "Boring and slow"]}
    dev = {"sentence": ["a great film", "bad acting"]}
    with caplog.at_level(logging.WARNING, logger="hf_bertscratch.baselines"):
        scores = task_baselines(TASKS["sst2"], train, [1, 0, 1, 0], {"eval": (dev, [1, 0])})
    assert scores == {"baseline_constant": 0.5, "baseline_bag_of_words": None, "baseline_bag_of_word_pairs": None}
    assert [record.getMessage() for record in caplog.records] == [
        "No-learning baseline not computed: bag of words, bag of words and word pairs (no word occurs in 2 or more "
        "of the 4 train texts, as the bag of words needs)."
    ]


def test_the_baselines_are_announced_before_they_are_computed(caplog: pytest.LogCaptureFixture) -> None:
    """Fitting the bags of words on a large train split takes seconds after the training bar has ended: one line
    names the answers being computed and the splits they score before the work starts, so the wait is explained."""
    train = {"sentence": ["a wonderful film", "a terrible film", "a wonderful cast", "a terrible cast"]}
    dev = {"sentence": ["a wonderful film", "a terrible cast"]}
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.baselines"):
        task_baselines(TASKS["sst2"], train, [1, 0, 1, 0], {"eval": (dev, [1, 0]), "test": (dev, [1, 0])})
    lines = [record.getMessage() for record in caplog.records if record.name == "hf_bertscratch.baselines"]
    assert lines == [
        "Scoring what no learning scores on the eval and test splits: constant answer, bag of words, bag of words "
        "and word pairs (fitted on the train split)."
    ]


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: BertTokenizer) -> Path:
    path = tmp_path_factory.mktemp("encoder")
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    AutoModelForMaskedLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _alone(model: torch.nn.Module, tokenizer: BertTokenizer, text: str, layer: int = -1) -> np.ndarray:
    """A text's mean-pooled state of `layer`, computed on the text alone (no padding, no batching)."""
    with torch.no_grad():
        states = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
    return states[layer][0].mean(0).numpy()


def test_batched_cosines_equal_each_text_encoded_alone(encoder_dir: Path) -> None:
    model, tokenizer = AutoModel.from_pretrained(encoder_dir).eval(), BertTokenizer.from_pretrained(encoder_dir)
    firsts, seconds = CORPUS[:5], CORPUS[5:10]
    got = pair_cosines(model, tokenizer, firsts, seconds, layers=[0, 2], batch_size=3)  # (2, 5)
    for i, layer in enumerate((0, 2)):
        expected = []
        for a, b in zip(firsts, seconds):
            u, v = _alone(model, tokenizer, a, layer), _alone(model, tokenizer, b, layer)
            expected.append(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
        np.testing.assert_allclose(got[i], expected, atol=1e-5)
    cls = encode(model, tokenizer, firsts, pooling="cls")
    with torch.no_grad():
        direct = model(**tokenizer(firsts[0], return_tensors="pt")).last_hidden_state[0, 0].numpy()
    np.testing.assert_allclose(cls[0], direct, atol=1e-5)


def test_unigram_answer_scores_the_commonest_token_and_the_frequencies_entropy() -> None:
    rows = [[101, 5, 5, 6, 102], [101, 5, 7, 0, 102]]  # 101/102/0: special tokens, never masked
    accuracy, perplexity, token = unigram_answer(rows, special_ids=[0, 101, 102])
    shares = np.array([3, 1, 1]) / 5  # tokens 5, 6, 7
    assert (accuracy, token) == (pytest.approx(3 / 5), 5)
    assert perplexity == pytest.approx(np.exp(-(shares * np.log(shares)).sum()))
    assert unigram_answer([[101, 102]], special_ids=[101, 102]) == (0.0, 1.0, -1)
