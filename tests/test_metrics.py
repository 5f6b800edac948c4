"""The packaged evaluate metric modules load offline and agree with their references.

scikit-learn and SciPy for the classification and correlation metrics, the `seqeval` package for entity spans and
sequence-labelling scores, and the official SQuAD v1.1 script (`reference_squad_v1.py`) for SQuAD.
"""

from __future__ import annotations

import logging

import evaluate
import numpy as np
import pytest
import reference_squad_v1
import seqeval.metrics
from scipy.stats import pearsonr, spearmanr
from seqeval.metrics.sequence_labeling import get_entities
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import EvalPrediction

from hf_bertscratch import metrics as hf_metrics
from hf_bertscratch.metrics import (
    ClassificationMetrics,
    RegressionMetrics,
    entity_spans,
    load_metric,
    local_metric_path,
)
from hf_bertscratch.metrics.squad_metrics import exact_match_score, normalize_answer, squad_scores
from hf_bertscratch.metrics.squad_metrics import f1_score as squad_f1_score

RNG = np.random.default_rng(0)
REFS = RNG.integers(0, 3, size=50).tolist()
PREDS = [r if RNG.random() < 0.6 else int(RNG.integers(0, 3)) for r in REFS]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize(
    "name, kwargs, reference",
    [
        ("accuracy", {}, accuracy_score(REFS, PREDS)),
        ("f1", {"average": "macro"}, f1_score(REFS, PREDS, average="macro")),
        ("matthews_correlation", {}, matthews_corrcoef(REFS, PREDS)),
    ],
)
def test_local_metric_matches_sklearn(name: str, kwargs: dict, reference: float) -> None:
    metric = load_metric(name)
    assert isinstance(metric, evaluate.EvaluationModule)
    assert metric.compute(predictions=PREDS, references=REFS, **kwargs)[name] == pytest.approx(reference)


def test_f1_binary_and_per_class() -> None:
    binary_refs, binary_preds = [0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 1, 0]
    f1 = evaluate.load(str(local_metric_path("f1")))
    assert f1.compute(predictions=binary_preds, references=binary_refs)["f1"] == pytest.approx(
        f1_score(binary_refs, binary_preds)
    )
    per_class = f1.compute(predictions=PREDS, references=REFS, average=None)["f1"]
    np.testing.assert_allclose(per_class, f1_score(REFS, PREDS, average=None))


def test_unknown_local_metric_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="bleu"):
        local_metric_path("bleu")


def test_classification_metrics_from_logits() -> None:
    logits = np.eye(3)[PREDS] + 0.01  # (N, 3): argmax recovers PREDS
    metrics = ClassificationMetrics(num_labels=3, pairs=True)
    out = metrics(EvalPrediction(predictions=logits, label_ids=np.asarray(REFS)))
    assert out["accuracy"] == pytest.approx(accuracy_score(REFS, PREDS))
    assert out["f1"] == pytest.approx(f1_score(REFS, PREDS, average="macro"))
    assert out["matthews_correlation"] == pytest.approx(matthews_corrcoef(REFS, PREDS))
    assert out["top_class_share"] == pytest.approx(max(PREDS.count(c) for c in set(PREDS)) / len(PREDS))


@pytest.fixture
def counted_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every `evaluate.load` path from now on, with the Hub's "accuracy" missing, and no metric loaded yet."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    real_load = evaluate.load
    calls: list[str] = []

    def fake_load(path: str, *args, **kwargs):
        calls.append(path)
        if path == "accuracy":  # what evaluate raises when neither a local script nor the Hub has the module
            raise FileNotFoundError("Couldn't find a module script ... doesn't exist on the Hugging Face Hub either.")
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(evaluate, "load", fake_load)
    hf_metrics.load_metric.cache_clear()
    hf_metrics._say_packaged.cache_clear()
    yield calls
    hf_metrics.load_metric.cache_clear()


def test_falls_back_to_packaged_copy_when_the_hub_lacks_the_metric(
    monkeypatch: pytest.MonkeyPatch, counted_loads: list[str]
) -> None:
    monkeypatch.setattr(hf_metrics, "hub_unreachable", lambda: None)  # the Hub answers, without the script
    metric = load_metric("accuracy")
    assert counted_loads == ["accuracy", str(local_metric_path("accuracy"))]
    assert metric.compute(predictions=[1, 0], references=[1, 1])["accuracy"] == 0.5
    assert load_metric("accuracy") is metric and len(counted_loads) == 2  # resolved once per run


def test_an_unreachable_hub_is_asked_nothing_and_said_once(
    monkeypatch: pytest.MonkeyPatch, counted_loads: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hf_metrics, "hub_unreachable", lambda: "huggingface.co cannot be reached: no network")
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.metrics"):
        ClassificationMetrics(num_labels=2, pairs=True)
        ClassificationMetrics(num_labels=2, pairs=True)  # e.g. the baselines at the end of a run
    assert counted_loads == [str(local_metric_path(name)) for name in ("accuracy", "f1", "matthews_correlation")]
    (message,) = [record.getMessage() for record in caplog.records]
    assert message == "Metrics: the copies packaged with hf_bertscratch (huggingface.co cannot be reached: no network)."


@pytest.mark.parametrize("variable", ["HF_EVALUATE_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"])
def test_any_offline_switch_loads_the_packaged_copies_without_asking_the_network(
    monkeypatch: pytest.MonkeyPatch, counted_loads: list[str], caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    """evaluate's own switch (HF_EVALUATE_OFFLINE, which evaluate reads), datasets' and the Hub's each mean no
    download: the packaged copy is loaded at once, the network never probed, and the line names the switch."""
    for name in ("HF_EVALUATE_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "1")

    def probe() -> str:
        raise AssertionError("the network was probed")

    monkeypatch.setattr(hf_metrics, "hub_unreachable", probe)
    with caplog.at_level(logging.INFO, logger="hf_bertscratch.metrics"):
        load_metric("accuracy")
    assert counted_loads == [str(local_metric_path("accuracy"))]
    assert [record.getMessage() for record in caplog.records] == [
        f"Metrics: the copies packaged with hf_bertscratch ({variable} is set)."
    ]


# float32 values, so that the metrics' Value("float") features pass them through unchanged.
SCORES = RNG.normal(size=40).astype(np.float32)
SCORE_PREDICTIONS = (SCORES + RNG.normal(scale=0.7, size=40)).astype(np.float32)


@pytest.mark.parametrize(
    "name, pvalue_key, reference",
    [("pearsonr", "p-value", pearsonr), ("spearmanr", "spearmanr_pvalue", spearmanr)],
)
def test_correlation_metric_matches_scipy(name: str, pvalue_key: str, reference) -> None:
    metric = load_metric(name)
    expected = reference(SCORES.astype(np.float64), SCORE_PREDICTIONS.astype(np.float64))
    out = metric.compute(predictions=SCORE_PREDICTIONS.tolist(), references=SCORES.tolist(), return_pvalue=True)
    assert set(out) == {name, pvalue_key}
    assert out[name] == pytest.approx(expected[0], rel=1e-9)
    assert out[pvalue_key] == pytest.approx(expected[1], rel=1e-6)
    assert metric.compute(predictions=SCORE_PREDICTIONS.tolist(), references=SCORES.tolist()) == {name: out[name]}


@pytest.mark.parametrize("column", [True, False], ids=["(N,1)", "(N,)"])
def test_regression_metrics_match_scipy(column: bool) -> None:
    predictions = SCORE_PREDICTIONS[:, None] if column else SCORE_PREDICTIONS
    out = RegressionMetrics()(EvalPrediction(predictions=predictions, label_ids=SCORES))
    pearson = pearsonr(SCORE_PREDICTIONS.astype(np.float64), SCORES.astype(np.float64))[0]
    spearman = spearmanr(SCORE_PREDICTIONS.astype(np.float64), SCORES.astype(np.float64))[0]
    assert set(out) == {"pearson", "spearmanr", "combined_score", "mse", "prediction_std"}
    assert out["prediction_std"] == pytest.approx(float(np.std(SCORE_PREDICTIONS.astype(np.float64))), rel=1e-9)
    assert out["pearson"] == pytest.approx(pearson, rel=1e-9)
    assert out["spearmanr"] == pytest.approx(spearman, rel=1e-9)
    assert out["combined_score"] == pytest.approx((pearson + spearman) / 2, rel=1e-9)
    mse = np.mean((SCORE_PREDICTIONS.astype(np.float64) - SCORES.astype(np.float64)) ** 2)
    assert out["mse"] == pytest.approx(mse, rel=1e-9)


def test_regression_metrics_reject_several_outputs() -> None:
    with pytest.raises(ValueError, match=r"\(40, 2\)"):
        RegressionMetrics()(EvalPrediction(predictions=np.zeros((40, 2)), label_ids=SCORES))


# (tags, the spans conlleval finds): IOB2, IOB1 (I- opens a chunk), ill-formed transitions, IOE/IOBES, no type.
ENTITY_CASES = [
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 1), ("LOC", 3, 3)]),
    (["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 5)]),
    (["O", "I-PER", "I-PER"], [("PER", 1, 2)]),
    (["B-PER", "I-LOC", "I-LOC", "B-PER", "B-PER"], [("PER", 0, 0), ("LOC", 1, 2), ("PER", 3, 3), ("PER", 4, 4)]),
    (["B-PER", "I-PER", "I-PER"], [("PER", 0, 2)]),
    (
        ["I-ORG", "E-ORG", "S-PER", "B-LOC", "E-LOC", "E-LOC"],
        [("ORG", 0, 1), ("PER", 2, 2), ("LOC", 3, 4), ("LOC", 5, 5)],
    ),
    (["S-PER", "I-PER", "E-PER", "O", "E-MISC"], [("PER", 0, 0), ("PER", 1, 2), ("MISC", 4, 4)]),
    (["B", "I", "O", "I", "B"], [("_", 0, 1), ("_", 3, 3), ("_", 4, 4)]),
    (["O", "O"], []),
    ([], []),
]


@pytest.mark.parametrize("tags, expected", ENTITY_CASES)
def test_entity_spans_follow_conlleval(tags: list[str], expected: list[tuple[str, int, int]]) -> None:
    assert entity_spans(tags) == expected
    assert entity_spans(tags) == get_entities(tags)
    suffixed = ["O" if tag == "O" else "-".join(reversed(tag.split("-", 1))) for tag in tags]
    assert entity_spans(suffixed, suffix=True) == expected


def seqeval_package_scores(predictions: list[list[str]], references: list[list[str]], zero_division="warn") -> dict:
    """What the Hub `seqeval` metric returns, computed with the `seqeval` package as that module computes it."""
    report = seqeval.metrics.classification_report(
        references, predictions, output_dict=True, zero_division=zero_division
    )
    overall = report.pop("micro avg")
    report.pop("macro avg"), report.pop("weighted avg")
    scores = {
        name: {"precision": row["precision"], "recall": row["recall"], "f1": row["f1-score"], "number": row["support"]}
        for name, row in report.items()
    }
    scores["overall_precision"] = overall["precision"]
    scores["overall_recall"] = overall["recall"]
    scores["overall_f1"] = overall["f1-score"]
    scores["overall_accuracy"] = seqeval.metrics.accuracy_score(references, predictions)
    return scores


def assert_same_scores(out: dict, expected: dict) -> None:
    assert list(out) == list(expected)  # the same entity types, in the same order
    for key, value in expected.items():
        if isinstance(value, dict):
            assert out[key]["number"] == value["number"], key
            for name in ("precision", "recall", "f1"):
                assert out[key][name] == pytest.approx(value[name], abs=1e-12), (key, name)
        else:
            assert out[key] == pytest.approx(value, abs=1e-12), key


def random_tags(rng: np.random.Generator, length: int) -> list[str]:
    """Tags drawn at random, so that ill-formed sequences (I-PER after O, I-LOC after B-PER, E-/S-) are common."""
    labels = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "E-LOC", "S-PER"]
    return [labels[i] for i in rng.integers(0, len(labels), size=length)]


def noisy_copy(rng: np.random.Generator, tags: list[str]) -> list[str]:
    """A prediction that keeps most gold tags, so that many entities match and some are cut, merged or retyped."""
    noise = random_tags(rng, len(tags))
    return [tag if rng.random() < 0.75 else other for tag, other in zip(tags, noise)]


@pytest.mark.filterwarnings("ignore::UserWarning")  # the seqeval package on ORG, which is never predicted
def test_seqeval_hand_made_case() -> None:
    references = [["O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O", "B-LOC"], ["O", "I-ORG"]]
    predictions = [["B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O", "I-LOC"], ["O", "O"]]
    out = load_metric("seqeval").compute(predictions=predictions, references=references)
    assert out["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "number": 1}
    assert out["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}
    assert out["LOC"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}
    assert out["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "number": 1}
    assert out["overall_precision"] == pytest.approx(2 / 3) and out["overall_recall"] == pytest.approx(2 / 4)
    assert out["overall_accuracy"] == pytest.approx(7 / 11)
    assert_same_scores(out, seqeval_package_scores(predictions, references))


@pytest.mark.parametrize("seed", range(5))
def test_seqeval_matches_package_on_random_tags(seed: int) -> None:
    rng = np.random.default_rng(seed)
    references = [random_tags(rng, int(rng.integers(1, 12))) for _ in range(60)]
    predictions = [noisy_copy(rng, tags) for tags in references]
    for tags in references + predictions:
        assert entity_spans(tags) == get_entities(tags)
    out = load_metric("seqeval").compute(predictions=predictions, references=references)
    assert_same_scores(out, seqeval_package_scores(predictions, references))
    assert out["overall_precision"] == pytest.approx(seqeval.metrics.precision_score(references, predictions))
    assert out["overall_recall"] == pytest.approx(seqeval.metrics.recall_score(references, predictions))
    assert out["overall_f1"] == pytest.approx(seqeval.metrics.f1_score(references, predictions))


# The seqeval package warns about the very zero divisions this test is about.
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("zero_division", ["warn", 0, 1])
def test_seqeval_zero_division_matches_package(zero_division) -> None:
    metric = load_metric("seqeval")
    cases = [
        ([["O", "B-PER", "O"]], [["O", "O", "B-LOC"]]),  # each type only predicted or only gold
        ([["O", "O"]], [["O", "O"]]),  # no entity at all
    ]
    for predictions, references in cases:
        out = metric.compute(predictions=predictions, references=references, zero_division=zero_division)
        assert_same_scores(out, seqeval_package_scores(predictions, references, zero_division=zero_division))


def test_seqeval_rejects_misaligned_sentences() -> None:
    with pytest.raises(ValueError, match="Sentence 1 has 2 predicted tags for 3"):
        load_metric("seqeval").compute(predictions=[["O"], ["O", "O"]], references=[["O"], ["O", "O", "B-PER"]])


ANSWER_PAIRS = [
    ("The Eiffel Tower", "Eiffel Tower"),
    ("an apple a day", "apple day"),
    ("theater", "the ater"),  # an article only as a whole word
    ("Denver Broncos!", "denver  broncos"),
    ("U.S. Army", "US army"),
    ("“quoted”", "quoted"),  # typographic quotes are not ASCII punctuation
    ("cat cat dog", "cat dog dog"),  # shared tokens count as a multiset
    ("", "Paris"),
    ("a the an", ""),
    ("1,000 people", "1000"),
]


@pytest.mark.parametrize("prediction, gold", ANSWER_PAIRS)
def test_squad_answer_scores_match_official_script(prediction: str, gold: str) -> None:
    assert normalize_answer(prediction) == reference_squad_v1.normalize_answer(prediction)
    assert exact_match_score(prediction, gold) == float(reference_squad_v1.exact_match_score(prediction, gold))
    assert squad_f1_score(prediction, gold) == pytest.approx(reference_squad_v1.f1_score(prediction, gold), abs=1e-12)


def test_squad_answer_scores_known_values() -> None:
    assert normalize_answer("  The  Cat, an animal! ") == "cat animal"
    assert exact_match_score("The cat.", "cat") == 1.0
    assert squad_f1_score("a cat sat", "the cat") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert squad_f1_score("", "cat") == 0.0


SQUAD_GOLDS = {
    "q1": ["Denver Broncos", "the Broncos"],
    "q2": ["Santa Clara, California", "Levi's Stadium"],
    "q3": ["February 7, 2016"],
    "q4": ["gold"],
    "q5": ["an anniversary", "50th anniversary"],
    "q6": ["Carolina Panthers"],
}
SQUAD_PREDICTIONS = {
    "q1": "Broncos",
    "q2": "Levi's Stadium.",
    "q3": "",
    "q4": "golden",
    "q5": "the 50th Super Bowl anniversary",
    "q6": "The Carolina Panthers",
}


def official_squad_scores(predictions: dict[str, str]) -> dict[str, float]:
    """The official script's `evaluate` on `SQUAD_GOLDS`, as the Hub `squad` module calls it."""
    questions = [{"id": qid, "answers": [{"text": text} for text in texts]} for qid, texts in SQUAD_GOLDS.items()]
    return reference_squad_v1.evaluate([{"paragraphs": [{"qas": questions}]}], predictions)


def squad_references() -> list[dict]:
    return [
        {"id": qid, "answers": {"text": texts, "answer_start": [0] * len(texts)}} for qid, texts in SQUAD_GOLDS.items()
    ]


def test_squad_metric_matches_official_script() -> None:
    predictions = [{"id": qid, "prediction_text": text} for qid, text in SQUAD_PREDICTIONS.items()]
    out = load_metric("squad").compute(predictions=predictions, references=squad_references())
    expected = official_squad_scores(SQUAD_PREDICTIONS)
    assert set(out) == {"exact_match", "f1"}
    assert out["exact_match"] == pytest.approx(expected["exact_match"], abs=1e-9)
    assert out["f1"] == pytest.approx(expected["f1"], abs=1e-9)
    assert out["exact_match"] == pytest.approx(300 / 6)  # q1 ("the Broncos"), q2 and q6 match after normalization


def test_squad_unanswered_question_scores_zero(capsys: pytest.CaptureFixture) -> None:
    answered = {qid: text for qid, text in SQUAD_PREDICTIONS.items() if qid != "q6"}
    predictions = [{"id": qid, "prediction_text": text} for qid, text in answered.items()]
    out = squad_scores(predictions, squad_references())
    expected = official_squad_scores(answered)
    assert "Unanswered question q6" in capsys.readouterr().err
    assert out["exact_match"] == pytest.approx(expected["exact_match"], abs=1e-9)
    assert out["f1"] == pytest.approx(expected["f1"], abs=1e-9)
    assert out["exact_match"] == pytest.approx(200 / 6)  # q1 and q2; q6 counts in the total
