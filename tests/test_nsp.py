"""Tests for hf_bertscratch.nsp: documents, IsNext/NotNext pair sampling, and MLM masking of the pairs."""

from __future__ import annotations

import logging
from pathlib import Path

import datasets
import pytest
import torch
from transformers import BertTokenizer, DataCollatorForLanguageModeling

from hf_bertscratch import BertScratchConfig, BertScratchForPreTraining
from hf_bertscratch.nsp import make_nsp_pairs_function, split_documents
from hf_bertscratch.pretraining_report import show_fill_mask

from conftest import tiny_config_kwargs


def _documents(n_docs: int = 12, n_sentences: int = 6) -> list[str]:
    """Rows of numbered sentences, one paragraph per row, documents separated by a blank row."""
    rows = []
    for d in range(n_docs):
        words = [
            "paris",
            "london",
            "berlin",
            "rome",
            "madrid",
            "spain",
            "italy",
            "france",
            "germany",
            "england",
            "city",
            "river",
        ]
        rows.append(" ".join(f"the {words[d]} {words[(d + s) % 12]} ." for s in range(n_sentences)))
        rows.append("")
    return rows


def test_split_documents_on_blank_rows_and_sentence_ends() -> None:
    docs = split_documents(["A b. C d!", "E f?", "", "  ", "G h.", ""])
    assert docs == [["A b.", "C d!", "E f?"], ["G h."]]


def test_rows_without_blank_rows_are_one_document_each() -> None:
    assert split_documents(["A b. C d!", "E f?", "G h. I j."]) == [["A b.", "C d!"], ["E f?"], ["G h.", "I j."]]


def test_one_document_per_row_data_gets_not_next_pairs(tokenizer: BertTokenizer) -> None:
    """A CSV of reviews has no blank rows: each review is its own document, so B can come from another one."""
    rows = [row for row in _documents() if row]
    out = make_nsp_pairs_function(tokenizer, "text", 24, 0.5, 0)({"text": rows}, list(range(len(rows))))
    labels = out["next_sentence_label"]
    assert 0.3 < sum(labels) / len(labels) < 0.7, labels
    doc_ids = [tokenizer(row, add_special_tokens=False)["input_ids"] for row in rows]
    for ids, types, label in zip(out["input_ids"], out["token_type_ids"], labels, strict=True):
        split = types.index(1)
        a, b = ids[1 : split - 1], ids[split:-1]
        if label == 1:  # NotNext: A and B are not read together in any one review
            assert not any(_contains(doc, a + b) for doc in doc_ids)


def test_pairs_are_half_is_next_and_is_next_continues_the_document(tokenizer: BertTokenizer) -> None:
    rows = _documents()
    pairs = make_nsp_pairs_function(tokenizer, "text", max_seq_length=24, random_next_probability=0.5, seed=0)
    out = pairs({"text": rows}, list(range(len(rows))))
    labels = out["next_sentence_label"]
    assert 0.3 < sum(labels) / len(labels) < 0.7, labels  # about half NotNext
    doc_ids = [tokenizer(row, add_special_tokens=False)["input_ids"] for row in rows if row]
    for ids, types, special, label in zip(
        out["input_ids"], out["token_type_ids"], out["special_tokens_mask"], labels, strict=True
    ):
        assert len(ids) <= 24 and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        split = types.index(1)
        assert ids[split - 1] == tokenizer.sep_token_id and types == sorted(types)
        assert [i for i, s in zip(ids, special, strict=True) if s] == [tokenizer.cls_token_id] + [
            tokenizer.sep_token_id
        ] * 2
        a, b = ids[1 : split - 1], ids[split:-1]
        source = [doc for doc in doc_ids if _contains(doc, a)]
        assert source, "segment A is a run of one document"
        if label == 0:  # IsNext: A then B read contiguously in the same document (when nothing was truncated)
            assert any(_contains(doc, a + b) for doc in source) or len(ids) == 24
        else:
            assert not any(_contains(doc, a + b) for doc in source)


def test_a_sentence_longer_than_the_pair_is_paired_with_another_document(tokenizer: BertTokenizer) -> None:
    """A one-sentence document longer than the pair's room still makes a NotNext pair, its A and B cut to fit,
    whatever the length of the document B comes from (a B cut to the room left after A would be empty)."""
    long, short = " ".join(["the cat sat on the mat"] * 10), "the dog ran ."
    out = make_nsp_pairs_function(tokenizer, "text", 24, 0.5, 0)({"text": [long, "", short, ""]}, [0])
    long_ids, short_ids = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in (long, short))
    sources = []
    for ids, types, label in zip(out["input_ids"], out["token_type_ids"], out["next_sentence_label"], strict=True):
        assert len(ids) <= 24 and label == 1
        split = types.index(1)
        a, b = ids[1 : split - 1], ids[split:-1]
        assert a and b
        sources.append("long" if _contains(long_ids, a) else "short" if _contains(short_ids, a) else None)
    assert sorted(sources) == ["long", "short"]


def test_nsp_pairs_of_one_label_only_are_warned_of(
    tokenizer: BertTokenizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows that make one document give IsNext pairs only (a NotNext B comes from another document): the run is told
    that next-sentence prediction has nothing to tell apart there, not left to read an NSP accuracy of nothing."""
    from hf_bertscratch.pretraining import parse_args
    from hf_bertscratch.pretraining_data import tokenize_splits

    model_args, data_args, training_args = parse_args(
        ["--output_dir", str(tmp_path), "--objective", "mlm_nsp", "--max_seq_length", "16", "--use_cpu", "true"]
    )
    one_document = datasets.Dataset.from_dict({"text": _documents(n_docs=1)})
    documents = datasets.Dataset.from_dict({"text": _documents()})
    with caplog.at_level(logging.WARNING, logger="hf_bertscratch"):
        tokenize_splits(
            {"train": documents, "validation": one_document}, tokenizer, model_args, data_args, training_args
        )
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("Every NSP pair of validation is IsNext"), warnings


def _contains(sequence: list[int], part: list[int]) -> bool:
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


def test_sampling_is_seeded(tokenizer: BertTokenizer) -> None:
    rows = _documents()
    make = lambda seed: make_nsp_pairs_function(tokenizer, "text", 24, 0.5, seed)({"text": rows}, [0])  # noqa: E731
    assert make(1) == make(1) and make(1) != make(2)


def test_collator_masks_pairs_and_keeps_nsp_labels(tokenizer: BertTokenizer) -> None:
    rows = _documents()
    out = make_nsp_pairs_function(tokenizer, "text", 24, 0.5, 0)({"text": rows}, [0])
    examples = [dict(zip(out, values, strict=True)) for values in zip(*out.values(), strict=True)][:8]
    batch = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3, seed=0)(examples)
    assert batch["next_sentence_label"].tolist() == [e["next_sentence_label"] for e in examples]
    width = max(len(e["input_ids"]) for e in examples)
    assert batch["input_ids"].shape == batch["token_type_ids"].shape == batch["labels"].shape == (8, width)
    special = (batch["input_ids"] == tokenizer.cls_token_id) | (batch["attention_mask"] == 0)
    assert (batch["labels"][special] == -100).all() and (batch["labels"] != -100).any()


def test_the_runs_fill_mask_examples_of_an_mlm_nsp_folder_show_no_load_report(
    tokenizer: BertTokenizer, tmp_path: Path
) -> None:
    """The fill-mask examples a run ends with load its folder under the fill-mask head; for an MLM + NSP folder
    transformers' LOAD REPORT would list the NSP head and pooler, which fill-mask leaves out by design."""
    torch.manual_seed(0)
    BertScratchForPreTraining(BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    reported: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = reported.append  # type: ignore[method-assign]
    reporter = logging.getLogger("transformers.modeling_utils")
    reporter.addHandler(handler)
    try:
        assert len(show_fill_mask(tmp_path)) == 3
    finally:
        reporter.removeHandler(handler)
    assert not [record for record in reported if "nsp.weight" in record.getMessage()]
