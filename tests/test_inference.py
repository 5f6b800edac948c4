"""Tests for hf_bertscratch.inference: results match the model run by hand, bad input fails early and clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import hf_bertscratch
from hf_bertscratch import inference

from conftest import tiny_config_kwargs

LONG_TEXT = " ".join(["the cat sat on the mat ."] * 30)  # 211 tokens, beyond the tiny model's 64 positions


@pytest.fixture(scope="module")
def model_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Untrained tiny masked-LM and two-label classifier folders, each saved with the tokenizer."""
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), id2label={0: "neg", 1: "pos"})
    dirs = {}
    for name, model_class in [
        ("mlm", hf_bertscratch.BertScratchForMaskedLM),
        ("classifier", hf_bertscratch.BertScratchForSequenceClassification),
    ]:
        dirs[name] = tmp_path_factory.mktemp(name)
        model_class(config).save_pretrained(dirs[name])
        tokenizer.save_pretrained(dirs[name])
    return dirs


def test_embed_truncates_long_text_to_the_positions(model_dirs, tokenizer) -> None:
    vector = inference.embed(model_dirs["mlm"], LONG_TEXT, pooling="mean")
    model = hf_bertscratch.BertScratchModel.from_pretrained(model_dirs["mlm"]).eval()
    encoding = tokenizer(LONG_TEXT, return_tensors="pt", truncation=True, max_length=64)
    with torch.no_grad():
        reference = model(**encoding).last_hidden_state[0].mean(0)  # (H,)
    np.testing.assert_allclose(vector, reference.numpy(), atol=1e-5)


def test_classify_long_text_and_reuse_pipeline(model_dirs) -> None:
    pipe = inference.load_pipeline("text-classification", model_dirs["classifier"], device="cpu")
    results = inference.classify(pipe, LONG_TEXT)
    assert sorted(r["label"] for r in results) == ["neg", "pos"]
    assert sum(r["score"] for r in results) == pytest.approx(1.0)
    assert results[0]["score"] >= results[1]["score"]


def test_tokenizer_override(model_dirs, vocab_file: Path) -> None:
    results = inference.fill_mask(model_dirs["mlm"], "the [MASK] sat .", top_k=2, tokenizer=vocab_file)
    assert len(results) == 1 and len(results[0]) == 2


@pytest.mark.parametrize(
    "reference, error, match",
    [
        ("{tmp}/missing", FileNotFoundError, "does not exist"),
        ("./missing", FileNotFoundError, "does not exist"),
        ("a/b/c", FileNotFoundError, "neither|does not exist"),
        ("{tmp}", FileNotFoundError, "has no config.json"),
        ("{tmp}/file.txt", NotADirectoryError, "is a file"),
    ],
)
def test_check_model_reference_errors(tmp_path: Path, reference: str, error: type, match: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(error, match=match):
        inference.check_model_reference(reference.format(tmp=tmp_path))


def test_check_model_reference_accepts_hub_ids_and_folders(model_dirs) -> None:
    assert inference.check_model_reference("someone/bert-mini") == "someone/bert-mini"
    assert inference.check_model_reference("bert-base-uncased") == "bert-base-uncased"
    assert inference.check_model_reference(model_dirs["mlm"]) == str(model_dirs["mlm"])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda d: inference.fill_mask(d["mlm"], "the [MASK]", top_k=0), "top_k must be at least 1"),
        (lambda d: inference.embed(d["mlm"], "the cat", pooling="max"), "pooling='max' is not supported"),
        (lambda d: inference.load_pipeline("summarization", d["mlm"]), "No pipeline for task 'summarization'"),
        (lambda d: inference.load_pipeline("question-answering", d["mlm"]), "answer_question"),
        (lambda d: inference.classify(d["classifier"], "  "), "Text is empty"),
    ],
)
def test_bad_arguments(model_dirs, call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(model_dirs)
