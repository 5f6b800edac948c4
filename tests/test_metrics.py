"""The packaged evaluate metric modules load offline and agree with scikit-learn."""

from __future__ import annotations

import evaluate
import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import EvalPrediction

from hf_bertscratch.metrics import ClassificationMetrics, load_metric, local_metric_path

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


def test_falls_back_to_packaged_copy_when_hub_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    real_load = evaluate.load
    calls = []

    def fake_load(path: str, *args, **kwargs):
        calls.append(path)
        if path == "accuracy":  # what evaluate raises when neither a local script nor the Hub has the module
            raise FileNotFoundError("Couldn't find a module script ... doesn't exist on the Hugging Face Hub either.")
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(evaluate, "load", fake_load)
    metric = load_metric("accuracy")
    assert calls == ["accuracy", str(local_metric_path("accuracy"))]
    assert metric.compute(predictions=[1, 0], references=[1, 1])["accuracy"] == 0.5
