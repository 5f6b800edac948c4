"""transformers pipelines run on saved BertScratch folders with a BERT tokenizer, and report what the model computes.

Each pipeline's answer is checked against the model's own logits or hidden states computed by hand.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertTokenizer, pipeline

import hf_bertscratch

from conftest import tiny_config_kwargs

TEXT = "paris is the capital of france ."


def _save(model_class: type, tokenizer: BertTokenizer, folder: Path, **config_kwargs: object) -> torch.nn.Module:
    """Build a tiny randomly initialised head, save it (safetensors) with the tokenizer, return it in eval mode."""
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), **config_kwargs)
    model = model_class(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert (folder / "model.safetensors").is_file() and not (folder / "pytorch_model.bin").exists()
    return model


def _logits(model: torch.nn.Module, tokenizer: BertTokenizer, text: str) -> tuple[dict, torch.Tensor]:
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return encoded, model(**encoded).logits[0]


def test_fill_mask(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    model = _save(hf_bertscratch.BertScratchForMaskedLM, tokenizer, tmp_path)
    text = TEXT.replace("capital", tokenizer.mask_token)
    predictions = pipeline("fill-mask", model=str(tmp_path), tokenizer=tokenizer)(text, top_k=3)

    encoded, logits = _logits(model, tokenizer, text)
    position = int((encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero())
    probs = logits[position].softmax(-1)
    expected = probs.topk(3)
    assert [p["token"] for p in predictions] == expected.indices.tolist()
    for prediction, score in zip(predictions, expected.values.tolist()):
        assert prediction["score"] == pytest.approx(score, abs=1e-6)
        assert prediction["token_str"] == tokenizer.convert_ids_to_tokens(prediction["token"])


def test_text_classification(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    labels = {0: "negative", 1: "positive"}
    model = _save(
        hf_bertscratch.BertScratchForSequenceClassification,
        tokenizer,
        tmp_path,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    classifier = pipeline("text-classification", model=str(tmp_path), tokenizer=tokenizer)
    texts = ["the movie was great .", "the film was boring and the plot was bad ."]
    results = classifier(texts, top_k=None)
    for text, result in zip(texts, results):
        probs = _logits(model, tokenizer, text)[1].softmax(-1)
        assert {r["label"]: r["score"] for r in result} == pytest.approx(
            {labels[i]: p for i, p in enumerate(probs.tolist())}, abs=1e-6
        )


def test_token_classification(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    labels = {0: "O", 1: "B-LOC", 2: "I-LOC"}
    model = _save(
        hf_bertscratch.BertScratchForTokenClassification,
        tokenizer,
        tmp_path,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    entities = pipeline("token-classification", model=str(tmp_path), tokenizer=tokenizer, ignore_labels=[])(TEXT)

    encoded, logits = _logits(model, tokenizer, TEXT)
    probs = logits.softmax(-1)
    words = encoded["input_ids"][0, 1:-1]  # the pipeline drops [CLS] and [SEP]
    assert [e["word"] for e in entities] == tokenizer.convert_ids_to_tokens(words.tolist())
    for entity in entities:
        best = probs[entity["index"]].argmax().item()
        assert entity["entity"] == labels[best]
        assert entity["score"] == pytest.approx(probs[entity["index"], best].item(), abs=1e-6)


def test_feature_extraction(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    model = _save(hf_bertscratch.BertScratchModel, tokenizer, tmp_path)
    features = pipeline("feature-extraction", model=str(tmp_path), tokenizer=tokenizer)(TEXT, return_tensors=True)
    encoded = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded).last_hidden_state
    assert features.shape == (1, encoded["input_ids"].shape[1], model.config.hidden_size)
    torch.testing.assert_close(features, expected)


def test_pipeline_with_tokenizer_from_vocab_file(tmp_path: Path, vocab_file: Path) -> None:
    """A folder without tokenizer files, and a tokenizer built from a vocab.txt."""
    tokenizer = BertTokenizer(vocab=str(vocab_file))
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchForMaskedLM(config).save_pretrained(tmp_path / "out")
    predictions = pipeline("fill-mask", model=str(tmp_path / "out"), tokenizer=tokenizer)(
        "paris is the [MASK] of france ."
    )
    assert len(predictions) == 5 and all(0.0 <= p["score"] <= 1.0 for p in predictions)
    assert all(p["sequence"].startswith("paris is the ") for p in predictions)


def test_a_folder_with_a_bare_vocab_file_loads_its_tokenizer_as_berts_does(tmp_path: Path, vocab_file: Path) -> None:
    """config.json and vocab.txt, no tokenizer_config.json (as Google's BERT checkpoints ship): AutoTokenizer, and so
    any pipeline, builds the tokenizer it builds for transformers' BERT from the same files."""
    kwargs = tiny_config_kwargs(len(vocab_file.read_text(encoding="utf-8").split()))
    folders = {"bert": tmp_path / "bert", "bertscratch": tmp_path / "bertscratch"}
    BertConfig(**kwargs).save_pretrained(folders["bert"])
    hf_bertscratch.BertScratchForMaskedLM(hf_bertscratch.BertScratchConfig(**kwargs)).save_pretrained(
        folders["bertscratch"]
    )
    for folder in folders.values():
        shutil.copy(vocab_file, folder / "vocab.txt")
    bert, ours = (AutoTokenizer.from_pretrained(str(folder)) for folder in folders.values())
    assert type(ours) is type(bert)
    assert ours(TEXT, "the cat sat .")["input_ids"] == bert(TEXT, "the cat sat .")["input_ids"]
    predictions = pipeline("fill-mask", model=str(folders["bertscratch"]))(TEXT.replace("capital", "[MASK]"))
    assert all(p["sequence"].startswith("paris is the ") for p in predictions)
