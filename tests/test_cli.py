"""Tests for the `bertscratch` command: every subcommand on tiny models, forwarding, and one-line errors."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from test_plotting import FINETUNE_HISTORY, assert_png, write_state
from transformers import (
    AutoConfig,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

import hf_bertscratch
import hf_bertscratch_cli
from hf_bertscratch import cli
from hf_bertscratch_base.data_files import LIST_BUILDERS, file_kinds
from hf_bertscratch_cli import dispatch

from conftest import PRETRAIN_FAST, assert_same_results, tiny_config_kwargs

SENTENCE = "paris is the capital of france ."


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> str:
    """Run `bertscratch ARGV` in-process and return what it printed on stdout."""
    capsys.readouterr()
    dispatch.main([str(arg) for arg in argv])
    return capsys.readouterr().out


def run_cli_error(capsys: pytest.CaptureFixture, *argv: str) -> str:
    """Run a command that must fail; return its stderr after checking it is one line with exit status 1."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main([str(arg) for arg in argv])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# --------------------------------------------------------------------------------------------------- fixtures


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def memorised_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny masked LM trained until it rebuilds every word of SENTENCE from the others, saved with its tokenizer."""
    torch.manual_seed(0)
    model = hf_bertscratch.BertScratchForMaskedLM(
        hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    )
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]  # (1, T)
    positions = torch.arange(1, ids.shape[1] - 1)  # every word, not [CLS]/[SEP]
    rows = torch.arange(len(positions))
    input_ids = ids.repeat(len(positions), 1)  # (T - 2, T): row i masks word i
    labels = torch.full_like(input_ids, -100)
    labels[rows, positions] = input_ids[rows, positions]
    input_ids[rows, positions] = tokenizer.mask_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(80):
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert loss.item() < 0.1, f"the tiny model did not memorise the sentence (loss {loss.item():.3f})"
    path = tmp_path_factory.mktemp("memorised")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# The shared fast settings, six steps with an evaluation every three (what the CLI tests read back).
# One process: `--num_processes auto` would relaunch the command under torchrun on any CPU with 2 or more cores.
CLI_PRETRAIN = [
    *PRETRAIN_FAST,
    "--num_processes",
    "1",
    "--max_steps",
    "6",
    "--logging_steps",
    "1",
    "--eval_strategy",
    "steps",
    "--eval_steps",
    "3",
]
REVIEWS = [
    ("the movie was great and the acting was wonderful .", 1),
    ("the film was boring and the plot was bad .", 0),
    ("this is the best story , i love it !", 1),
    ("this is the worst film , i hate it .", 0),
]


@pytest.fixture(scope="module")
def pretrained_dir(text_file: Path, tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bertscratch pretrain` for 6 steps with `--report_to tensorboard`: its output_dir."""
    config_dir = tmp_path_factory.mktemp("config")
    hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(100)).save_pretrained(config_dir)
    output_dir = tmp_path_factory.mktemp("pretrained") / "run"
    dispatch.main(
        [
            "pretrain",
            "--train_file",
            str(text_file),
            "--tokenizer_name",
            str(tokenizer_dir),
            "--config_name",
            str(config_dir),
            "--output_dir",
            str(output_dir),
            "--report_to",
            "tensorboard",
            *CLI_PRETRAIN,
        ]
    )
    return output_dir


def run_tiny_finetune(pretrained_dir: Path, output_dir: Path, *flags: str) -> None:
    """`bertscratch finetune` of the pretrained run for one epoch, 16 tokens per example, into `output_dir`, with
    the data and task `flags` name."""
    dispatch.main(
        [
            "finetune",
            "--model_name_or_path",
            str(pretrained_dir),
            *flags,
            "--output_dir",
            str(output_dir),
            "--max_seq_length",
            "16",
            "--num_train_epochs",
            "1",
            "--per_device_train_batch_size",
            "8",
            "--report_to",
            "none",
            "--disable_tqdm",
            "true",
            "--seed",
            "0",
            "--dataloader_pin_memory",
            "false",
        ]
    )


def finetune_reviews(pretrained_dir: Path, data_dir: Path, header: str, *columns: str) -> Path:
    """`bertscratch finetune` of the pretrained run for one epoch on 16 reviews (labels neg/pos) in a train.csv of
    `header` (its text column, then its label column), named to finetune by the column flags `columns`: its
    output_dir."""
    lines = [header] + [f'"{text}",{label}' for text, label in REVIEWS * 4]
    (data_dir / "train.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output_dir = data_dir / "classifier"
    files = ["--train_file", str(data_dir / "train.csv"), "--validation_file", str(data_dir / "train.csv")]
    run_tiny_finetune(pretrained_dir, output_dir, *files, *columns, "--class_names", "neg,pos")
    return output_dir


@pytest.fixture(scope="module")
def finetuned_dir(pretrained_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bertscratch finetune` of the pretrained run on reviews in the default columns (text, label)."""
    return finetune_reviews(pretrained_dir, tmp_path_factory.mktemp("reviews"), "text,label")


@pytest.fixture(scope="module")
def review_classifier_dir(pretrained_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bertscratch finetune` of the pretrained run on reviews in columns of one's own (review, sentiment)."""
    columns = ["--text_column", "review", "--label_column", "sentiment"]
    return finetune_reviews(pretrained_dir, tmp_path_factory.mktemp("own-columns"), "review,sentiment", *columns)


# -------------------------------------------------------------------------------------------------- fill-mask


def test_fill_mask_puts_memorised_token_first(capsys, memorised_dir: Path) -> None:
    out = run_cli(capsys, "fill-mask", memorised_dir, "paris is the [MASK] of france .", "--top_k", "3")
    lines = out.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:2] == ["1.", "capital"], out


def test_inspection_commands_print_the_cpu_choices_under_debug_only(
    capsys, monkeypatch: pytest.MonkeyPatch, memorised_dir: Path
) -> None:
    """The GEMM path is logged when a process first chooses it: an inspection command prints its results alone, and
    the choice too under --debug."""
    for debug in ([], ["--debug"]):
        monkeypatch.setattr(hf_bertscratch.cpu_matmul, "_forced", "default")
        monkeypatch.setattr(hf_bertscratch.cpu_matmul, "_choice", None)  # chosen (and logged) afresh by the command
        capsys.readouterr()
        dispatch.main(["fill-mask", str(memorised_dir), "paris is the [MASK] of france .", *debug])
        err = capsys.readouterr().err
        assert ("CPU GEMM path: fp32 default" in err) == bool(debug), err


def test_the_cpu_choice_starts_a_line_of_its_own_under_an_open_progress_bar(
    capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fine-tuning first chooses the GEMM path at its first evaluation, while the training bar is still drawn on
    stderr: the line saying so is written as tqdm writes around its bars, not glued to the end of the bar's line."""
    from tqdm.auto import tqdm

    dispatch.show_gemm_path()
    monkeypatch.setattr(hf_bertscratch.cpu_matmul, "_forced", "default")
    monkeypatch.setattr(hf_bertscratch.cpu_matmul, "_choice", None)  # chosen (and logged) afresh below
    capsys.readouterr()
    with tqdm(total=10, file=sys.stderr) as bar:
        bar.update(10)
        hf_bertscratch.cpu_matmul.choice()
    pieces = re.split(r"[\r\n]", capsys.readouterr().err)
    assert any(piece.startswith("bertscratch: CPU GEMM path: fp32 default") for piece in pieces), pieces


def test_fill_mask_json_matches_model(capsys, memorised_dir: Path, tokenizer) -> None:
    text = "[MASK] is the capital of [MASK] ."
    results = json.loads(run_cli(capsys, "fill-mask", memorised_dir, text, "--top_k", "2", "--json"))
    assert [[c["token_str"] for c in mask][0] for mask in results] == ["paris", "france"]
    model = hf_bertscratch.BertScratchForMaskedLM.from_pretrained(memorised_dir).eval()
    encoding = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probs = model(**encoding).logits[0].softmax(-1)  # (T, V)
    masked = (encoding["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
    for mask_result, position in zip(results, masked):
        reference = probs[position].topk(2)
        assert [c["token"] for c in mask_result] == reference.indices.tolist()
        np.testing.assert_allclose([c["score"] for c in mask_result], reference.values.numpy(), rtol=1e-4)


def test_fill_mask_without_mask_is_one_line_error(capsys, memorised_dir: Path) -> None:
    err = run_cli_error(capsys, "fill-mask", memorised_dir, "paris is the capital")
    assert "has no [MASK] token" in err


def test_fill_mask_on_classifier_is_refused(capsys, finetuned_dir: Path) -> None:
    err = run_cli_error(capsys, "fill-mask", finetuned_dir, "the [MASK] sat")
    assert "BertScratchForSequenceClassification checkpoint" in err and "ForMaskedLM" in err


# --------------------------------------------------------------------------------------------------- classify


def test_classify_matches_model(capsys, finetuned_dir: Path, tokenizer) -> None:
    lines = run_cli(capsys, "classify", finetuned_dir, "the movie was great").splitlines()
    scores = {label: float(score) for label, score in (line.split() for line in lines)}
    assert list(scores) == sorted(scores, key=scores.get, reverse=True)
    model = hf_bertscratch.BertScratchForSequenceClassification.from_pretrained(finetuned_dir).eval()
    with torch.no_grad():
        probs = model(**tokenizer("the movie was great", return_tensors="pt")).logits[0].softmax(-1)
    np.testing.assert_allclose([scores["neg"], scores["pos"]], probs.numpy(), atol=1e-4)


def test_classify_refuses_masked_lm(capsys, memorised_dir: Path) -> None:
    err = run_cli_error(capsys, "classify", memorised_dir, "the movie was great")
    assert "BertScratchForMaskedLM checkpoint" in err and "fine-tuned" in err


# ---------------------------------------------------------------------------------- every fine-tuned head served
PREMISE, HYPOTHESIS = "paris is the capital of france .", "paris is a city ."
NLI_LABELS = ("entailment", "neutral", "contradiction")


def save_untrained_head(
    path: Path, tokenizer, head: type, output_std: float, output_bias: dict[int, float] | None = None, **config_kwargs
) -> None:
    """Save a randomly initialised tiny `head` model with the tokenizer, as a fine-tuning run leaves its folder.

    The output layer is redrawn with `output_std` (wider than BERT's 0.02, so outputs differ visibly from input to
    input), and `output_bias` shifts chosen outputs (output id -> bias).
    """
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), **config_kwargs)
    model = head.from_config(config)
    output_layer = model.qa_outputs if hasattr(model, "qa_outputs") else model.classifier
    with torch.no_grad():
        torch.nn.init.normal_(output_layer.weight, std=output_std)
        for index, bias in (output_bias or {}).items():
            output_layer.bias[index] = bias
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model


@pytest.fixture(scope="module")
def pair_classifier_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nli")
    labels = dict(enumerate(NLI_LABELS))
    save_untrained_head(path, tokenizer, AutoModelForSequenceClassification, 1.0, num_labels=3, id2label=labels)
    return path


@pytest.fixture(scope="module")
def regressor_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stsb")
    kwargs = {"num_labels": 1, "problem_type": "regression", "id2label": {0: "score"}}  # as fine-tuning saves it
    save_untrained_head(path, tokenizer, AutoModelForSequenceClassification, 1.0, **kwargs)
    return path


@pytest.fixture(scope="module")
def tagger_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hf_bertscratch.tasks import CONLL2003_LABELS

    path = tmp_path_factory.mktemp("ner")
    labels = dict(enumerate(CONLL2003_LABELS))
    # About half the pieces of TAG_TEXT come out "O" (id 0), the others entities of several types.
    save_untrained_head(path, tokenizer, AutoModelForTokenClassification, 0.5, {0: 3.0}, id2label=labels)
    return path


@pytest.fixture(scope="module")
def reader_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa")
    save_untrained_head(path, tokenizer, AutoModelForQuestionAnswering, 1.0)
    return path


def direct_outputs(model_dir: Path, head: type, tokenizer, *texts: str, **kwargs) -> tuple:
    """The saved model's outputs on `texts` (a text or a pair), computed here with torch: (outputs, encoding)."""
    model = head.from_pretrained(model_dir).eval()
    encoding = tokenizer(*texts, return_tensors="pt", **kwargs)
    inputs = {k: v for k, v in encoding.items() if k != "offset_mapping"}
    with torch.no_grad():
        return model(**inputs), encoding


def test_classify_sentence_pair(capsys, pair_classifier_dir: Path, tokenizer) -> None:
    lines = run_cli(capsys, "classify", pair_classifier_dir, PREMISE, "--text_pair", HYPOTHESIS).splitlines()
    printed = {label: float(score) for label, score in (line.split() for line in lines)}
    assert sorted(printed) == sorted(NLI_LABELS) and list(printed.values()) == sorted(printed.values(), reverse=True)
    assert sum(printed.values()) == pytest.approx(1.0, abs=2e-4)  # 4 printed decimals each

    results = json.loads(run_cli(capsys, "classify", pair_classifier_dir, PREMISE, "--text_pair", HYPOTHESIS, "--json"))
    scores = {result["label"]: result["score"] for result in results}
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-6)
    outputs, _ = direct_outputs(pair_classifier_dir, AutoModelForSequenceClassification, tokenizer, PREMISE, HYPOTHESIS)
    expected = outputs.logits[0].softmax(-1).numpy()
    np.testing.assert_allclose([scores[label] for label in NLI_LABELS], expected, atol=1e-6)
    np.testing.assert_allclose([printed[label] for label in NLI_LABELS], expected, atol=1e-4)
    # The second text is read: the premise alone scores otherwise.
    alone, _ = direct_outputs(pair_classifier_dir, AutoModelForSequenceClassification, tokenizer, PREMISE)
    assert np.abs(alone.logits[0].softmax(-1).numpy() - expected).max() > 5e-4


def test_classify_regressor_prints_its_score(capsys, regressor_dir: Path, tokenizer) -> None:
    outputs, _ = direct_outputs(regressor_dir, AutoModelForSequenceClassification, tokenizer, PREMISE, HYPOTHESIS)
    expected = outputs.logits[0, 0].item()  # the raw output: no sigmoid, no softmax
    (line,) = run_cli(capsys, "classify", regressor_dir, PREMISE, "--text_pair", HYPOTHESIS).splitlines()
    label, score = line.split()
    assert label == "score" and float(score) == pytest.approx(expected, abs=1e-4)
    (result,) = json.loads(run_cli(capsys, "classify", regressor_dir, PREMISE, "--text_pair", HYPOTHESIS, "--json"))
    assert result["score"] == pytest.approx(expected, abs=1e-6)


TAG_TEXT = "Paris is the capital of France , and Berlin is big ."
ENTITY_LINE = re.compile(r"^(\S+)\s+(.+?)\s+\[(\d+):(\d+)\]\s+([\d.]+)$")


def test_tag_pieces_match_the_model(capsys, tagger_dir: Path, tokenizer) -> None:
    """Without aggregation every piece not tagged O is listed: its tag, score and span are the model's own."""
    pieces = json.loads(run_cli(capsys, "tag", tagger_dir, TAG_TEXT, "--aggregation_strategy", "none", "--json"))
    outputs, encoding = direct_outputs(
        tagger_dir, AutoModelForTokenClassification, tokenizer, TAG_TEXT, return_offsets_mapping=True
    )
    probs = outputs.logits[0].softmax(-1)  # (T, C)
    id2label = AutoConfig.from_pretrained(tagger_dir).id2label
    expected = [
        (t, id2label[int(probs[t].argmax())], *encoding["offset_mapping"][0, t].tolist())
        for t in range(1, probs.shape[0] - 1)  # not [CLS] and [SEP]
        if id2label[int(probs[t].argmax())] != "O"
    ]
    assert 2 <= len(expected) < probs.shape[0] - 2  # some pieces are entities, some are not
    assert [(p["index"], p["entity"], p["start"], p["end"]) for p in pieces] == expected
    np.testing.assert_allclose([p["score"] for p in pieces], [probs[t].max().item() for t, *_ in expected], atol=1e-6)


def test_tag_entities_index_into_the_text(capsys, tagger_dir: Path) -> None:
    lines = run_cli(capsys, "tag", tagger_dir, TAG_TEXT).splitlines()
    entities = json.loads(run_cli(capsys, "tag", tagger_dir, TAG_TEXT, "--json"))
    assert len(lines) == len(entities) > 0
    for line, entity in zip(lines, entities):
        kind, word, start, end, score = ENTITY_LINE.match(line).groups()
        assert (kind, word, int(start), int(end)) == tuple(entity[k] for k in ("entity_group", "word", "start", "end"))
        assert float(score) == pytest.approx(entity["score"], abs=1e-4)
        assert TAG_TEXT[entity["start"] : entity["end"]].lower() == entity["word"]  # an uncased tokenizer's word
        assert entity["entity_group"] in {"PER", "ORG", "LOC", "MISC"}


def test_tag_refuses_a_masked_lm(capsys, memorised_dir: Path) -> None:
    err = run_cli_error(capsys, "tag", memorised_dir, TAG_TEXT)
    assert err.startswith("bertscratch tag: error: ValueError:")
    assert "BertScratchForMaskedLM checkpoint" in err and "needs one of the heads *ForTokenClassification" in err


QUESTION, CONTEXT = "what is the capital of spain ?", "madrid is the capital of spain ."


def best_span(reader_dir: Path, tokenizer, max_answer_length: int = 30) -> tuple[str, int, int]:
    """The answer read off the model's logits by trying every span of context tokens (the input fits one window)."""
    outputs, encoding = direct_outputs(
        reader_dir, AutoModelForQuestionAnswering, tokenizer, QUESTION, CONTEXT, return_offsets_mapping=True
    )
    start_logits, end_logits = outputs.start_logits[0], outputs.end_logits[0]  # (T,)
    context = [t for t, sequence in enumerate(encoding.sequence_ids(0)) if sequence == 1]
    assert len(encoding["input_ids"][0]) <= 20  # every token is in the top 20 the search looks at
    spans = [(s, e) for s in context for e in context if s <= e < s + max_answer_length]
    s, e = max(spans, key=lambda span: (start_logits[span[0]] + end_logits[span[1]]).item())
    offsets = encoding["offset_mapping"][0]
    start, end = offsets[s][0].item(), offsets[e][1].item()
    return CONTEXT[start:end], start, end


def test_answer_is_the_best_span_of_the_context(capsys, reader_dir: Path, tokenizer) -> None:
    answer, start, end = best_span(reader_dir, tokenizer)
    windows = ["--max_seq_length", "64", "--doc_stride", "16"]
    result = json.loads(
        run_cli(capsys, "answer", reader_dir, "--question", QUESTION, "--context", CONTEXT, *windows, "--json")
    )
    assert (result["answer"], result["start"], result["end"]) == (answer, start, end)
    assert CONTEXT[result["start"] : result["end"]] == result["answer"] and 0 < result["score"] <= 1
    text, span = run_cli(
        capsys, "answer", reader_dir, "--question", QUESTION, "--context", CONTEXT, *windows
    ).splitlines()
    assert text == answer and span.startswith(f"[{start}:{end}]  score ")
    # By default the windows fit the model: the tiny model's 64 positions, not SQuAD's usual 384, give the same span.
    default = json.loads(run_cli(capsys, "answer", reader_dir, "--question", QUESTION, "--context", CONTEXT, "--json"))
    assert CONTEXT[default["start"] : default["end"]] == default["answer"]
    # Windows longer than the model's positions: one line says so.
    err = run_cli_error(
        capsys, "answer", reader_dir, "--question", QUESTION, "--context", CONTEXT, "--max_seq_length", "384"
    )
    assert "--max_seq_length 384 exceeds the model's max_position_embeddings 64: use --max_seq_length 64 or less" in err


# ------------------------------------------------------------------------------------------------------ embed


def _reference_embedding(model_dir: Path, tokenizer, text: str, pooling: str) -> np.ndarray:
    model = hf_bertscratch.BertScratchModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        hidden = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]  # (T, H)
    return (hidden.mean(0) if pooling == "mean" else hidden[0]).numpy()


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_embed_prints_pooled_vector(capsys, memorised_dir: Path, tokenizer, pooling: str) -> None:
    vector = json.loads(run_cli(capsys, "embed", memorised_dir, SENTENCE, "--pooling", pooling))
    np.testing.assert_allclose(vector, _reference_embedding(memorised_dir, tokenizer, SENTENCE, pooling), atol=1e-5)


@pytest.mark.parametrize("suffix", [".npy", ".json"])
def test_embed_writes_file(capsys, tmp_path: Path, memorised_dir: Path, tokenizer, suffix: str) -> None:
    output = tmp_path / f"vector{suffix}"
    run_cli(capsys, "embed", memorised_dir, SENTENCE, "--output", output)
    vector = np.load(output) if suffix == ".npy" else np.array(json.loads(output.read_text()))
    np.testing.assert_allclose(vector, _reference_embedding(memorised_dir, tokenizer, SENTENCE, "mean"), atol=1e-5)
    assert [p.name for p in tmp_path.iterdir()] == [output.name]


def test_embed_bad_output_format(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    err = run_cli_error(capsys, "embed", memorised_dir, SENTENCE, "--output", tmp_path / "v.txt")
    assert "must end in one of ('.npy', '.json')" in err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ a file of inputs


def write_inputs(path: Path, rows: list[dict[str, str]]) -> Path:
    """Write `rows` as the file `path` names by its extension: a .txt file one text per line (the rows' one column),
    csv or tsv with a header, jsonl one object per line."""
    if path.suffix == ".txt":
        lines = [next(iter(row.values())) for row in rows]
    elif path.suffix == ".jsonl":
        lines = [json.dumps(row) for row in rows]
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        quote = (lambda value: value) if sep == "\t" else (lambda value: '"' + value.replace('"', '""') + '"')
        lines = [sep.join(rows[0])] + [sep.join(quote(value) for value in row.values()) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def json_lines(out: str) -> list:
    return [json.loads(line) for line in out.splitlines()]


def answered(rows: list[dict[str, str]], results: list, key: str | None) -> list[dict]:
    """The JSON lines a file of `rows` (each its inputs, by role) prints: each row's inputs, then its result under
    `key` (a dict result, `answer`'s, with its own keys instead)."""
    return [{**row, **(result if key is None else {key: result})} for row, result in zip(rows, results)]


FILL_TEXTS = ["paris is the [MASK] of france .", "[MASK] is the capital of [MASK] .", "the [MASK] ."]


def test_fill_mask_on_a_text_file_is_each_line_alone(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    """Three lines in batches of two (one padded, one short): a JSON line per text, in order, each what the text
    alone prints under --json (one and two masks)."""
    path = write_inputs(tmp_path / "texts.txt", [{"text": text} for text in FILL_TEXTS])
    out = run_cli(capsys, "fill-mask", memorised_dir, "--input_file", path, "--batch_size", "2", "--top_k", "3")
    singles = [
        json.loads(run_cli(capsys, "fill-mask", memorised_dir, text, "--top_k", "3", "--json")) for text in FILL_TEXTS
    ]
    assert_same_results(json_lines(out), answered([{"text": text} for text in FILL_TEXTS], singles, "masks"))
    assert json_lines(out)[0]["masks"][0][0]["token_str"] == "capital"


PAIRS = [
    {"premise": PREMISE, "hypothesis": HYPOTHESIS},
    {"premise": "a city .", "hypothesis": "paris is the capital of france , a big city ."},
    {"premise": "the movie was great and the acting was wonderful .", "hypothesis": "the film was bad ."},
]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_classify_a_file_of_pairs_is_each_pair_alone(
    capsys, tmp_path: Path, pair_classifier_dir: Path, suffix: str
) -> None:
    path = write_inputs(tmp_path / f"pairs{suffix}", PAIRS)
    columns = ["--text_column", "premise", "--text_pair_column", "hypothesis"]
    out = run_cli(capsys, "classify", pair_classifier_dir, "--input_file", path, *columns, "--batch_size", "2")
    singles = [
        json.loads(
            run_cli(capsys, "classify", pair_classifier_dir, row["premise"], "--text_pair", row["hypothesis"], "--json")
        )
        for row in PAIRS
    ]
    pairs = [{"text": row["premise"], "text_pair": row["hypothesis"]} for row in PAIRS]
    assert_same_results(json_lines(out), answered(pairs, singles, "labels"))


def test_classify_a_file_with_the_fine_tuned_classifier_writes_its_output_file(
    capsys, tmp_path: Path, finetuned_dir: Path
) -> None:
    """The fine-tuning file's own layout (text, label) read with the defaults; --output_file holds what stdout would,
    written in one rename (no temporary file left), and stdout says where it went."""
    rows = [{"text": text, "label": str(label)} for text, label in REVIEWS]
    path = write_inputs(tmp_path / "reviews.csv", rows)
    printed = run_cli(capsys, "classify", finetuned_dir, "--input_file", path, "--batch_size", "3")
    singles = [json.loads(run_cli(capsys, "classify", finetuned_dir, row["text"], "--json")) for row in rows]
    singles = answered([{"text": row["text"]} for row in rows], singles, "labels")  # the label column is no input
    assert_same_results(json_lines(printed), singles)
    output = tmp_path / "out" / "results.jsonl"
    out = run_cli(capsys, "classify", finetuned_dir, "--input_file", path, "--output_file", output)
    assert out == f"Wrote 4 results, one JSON line per input, to {output}\n"
    assert_same_results(json_lines(output.read_text(encoding="utf-8")), singles)
    assert [p.name for p in output.parent.iterdir()] == [output.name]


def test_a_classifier_fine_tuned_on_columns_of_its_own_reads_them_from_a_file(
    capsys, tmp_path: Path, review_classifier_dir: Path
) -> None:
    """`finetune --text_column review` records the column in the model's config (not the label column); classify
    --input_file then reads a file's review column without the flag, each row as that text alone; a flag given names
    another column; a text file is read line by line as before."""
    config = json.loads((review_classifier_dir / "config.json").read_text(encoding="utf-8"))
    assert config["input_columns"] == {"text": "review"}
    rows = [
        {"review": text, "sentiment": str(label), "note": other}
        for (text, label), (other, _) in zip(REVIEWS, REVIEWS[::-1])
    ]
    path = write_inputs(tmp_path / "new.csv", rows)
    printed = json_lines(run_cli(capsys, "classify", review_classifier_dir, "--input_file", path))
    singles = [json.loads(run_cli(capsys, "classify", review_classifier_dir, row["review"], "--json")) for row in rows]
    assert_same_results(printed, answered([{"text": row["review"]} for row in rows], singles, "labels"))
    flagged = run_cli(capsys, "classify", review_classifier_dir, "--input_file", path, "--text_column", "note")
    assert [line["text"] for line in json_lines(flagged)] == [row["note"] for row in rows]
    lines = write_inputs(tmp_path / "new.txt", [{"review": row["review"]} for row in rows])
    read = run_cli(capsys, "classify", review_classifier_dir, "--input_file", lines)
    assert [line["text"] for line in json_lines(read)] == [row["review"] for row in rows]


def assert_library_and_front_door_refuse(capsys, argv: list[str], line: str) -> None:
    """The library and the front door (before torch loads) both refuse `argv` with `line`, the front door exiting 1."""
    assert run_cli_error(capsys, *argv) == line
    with pytest.raises(SystemExit) as exit_info:
        hf_bertscratch_cli.main(argv)
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == line


def test_a_file_without_the_column_recorded_at_fine_tuning_is_one_line_naming_where_it_came_from(
    capsys, tmp_path: Path, review_classifier_dir: Path
) -> None:
    """The front door, reading the model's config.json before torch loads, and the library fail with the same line:
    the column looked for, that fine-tuning recorded it, the columns the file has and the flag that names another."""
    path = write_inputs(tmp_path / "texts.csv", [{"text": text, "label": str(label)} for text, label in REVIEWS])
    argv = ["classify", str(review_classifier_dir), "--input_file", str(path)]
    expected = (
        f"Column 'review' (--text_column recorded at fine-tuning) not in --input_file {str(path)!r}; it has ['text', "
        "'label']: name yours with --text_column.\n"
    )
    assert_library_and_front_door_refuse(capsys, argv, f"bertscratch classify: error: ValueError: {expected}")


def test_a_conll_text_file_as_input_file_is_one_line_saying_how_to_give_words(
    capsys, tmp_path: Path, tagger_dir: Path
) -> None:
    """A .txt --input_file holds one text per line; a CoNLL file (a word and its tags on each line) read so would be
    tagged word by word as texts, or fail at its first blank line: the front door and the library refuse it alike."""
    path = tmp_path / "sentences.txt"
    path.write_text("EU B-ORG\nrejects O\nGerman B-MISC\n\nPeter B-PER\nBlackburn I-PER\n", encoding="utf-8")
    argv = ["tag", str(tagger_dir), "--input_file", str(path)]
    expected = (
        f"--input_file {str(path)!r} is laid out as CoNLL (a word and its tags on each line), and a .txt file of "
        "inputs holds one text per line: give each sentence's words as a list in a JSON Lines column instead (tag "
        "--tokens_column).\n"
    )
    assert_library_and_front_door_refuse(capsys, argv, f"bertscratch tag: error: ValueError: {expected}")


def test_classify_a_file_of_regression_pairs(capsys, tmp_path: Path, regressor_dir: Path) -> None:
    rows = [{"text": row["premise"], "text_pair": row["hypothesis"]} for row in PAIRS]
    path = write_inputs(tmp_path / "pairs.csv", rows)
    out = run_cli(capsys, "classify", regressor_dir, "--input_file", path, "--text_pair_column", "text_pair")
    singles = [
        json.loads(run_cli(capsys, "classify", regressor_dir, row["text"], "--text_pair", row["text_pair"], "--json"))
        for row in rows
    ]
    assert_same_results(json_lines(out), answered(rows, singles, "labels"))


@pytest.mark.parametrize("aggregation", ["simple", "none"])
def test_tag_a_file_is_each_text_alone(capsys, tmp_path: Path, tagger_dir: Path, aggregation: str) -> None:
    """Texts of several lengths, one longer than the model's 64 positions (tagged in windows, or its first window
    alone without aggregation), in batches of two."""
    texts = [TAG_TEXT, "Berlin is big .", " ".join([TAG_TEXT] * 6)]
    path = write_inputs(tmp_path / "texts.jsonl", [{"sentence": text} for text in texts])
    flags = ["--aggregation_strategy", aggregation]
    out = run_cli(
        capsys, "tag", tagger_dir, "--input_file", path, "--text_column", "sentence", "--batch_size", "2", *flags
    )
    singles = [json.loads(run_cli(capsys, "tag", tagger_dir, text, *flags, "--json")) for text in texts]
    assert_same_results(json_lines(out), answered([{"text": text} for text in texts], singles, "entities"))
    assert any(singles)  # entities to compare


@pytest.mark.parametrize(("flags", "align_to_words"), [([], True), (["--no_align_to_words"], False)])
def test_answer_widens_to_whole_words_unless_told_not_to(
    capsys, monkeypatch, reader_dir: Path, flags: list[str], align_to_words: bool
) -> None:
    calls = []

    def answers(*args: object, **kwargs: object) -> list[dict]:
        calls.append(kwargs["align_to_words"])
        return [{"answer": "madrid", "start": 0, "end": 6, "score": 0.5}]

    monkeypatch.setattr("hf_bertscratch.inference.answer_question_many", answers)
    run_cli(capsys, "answer", reader_dir, "--question", QUESTION, "--context", CONTEXT, *flags)
    assert calls == [align_to_words]


def test_answer_a_file_is_each_question_alone(capsys, tmp_path: Path, reader_dir: Path) -> None:
    """Contexts of one window and of several (a 24-token window), in batches of two questions."""
    long_context = " ".join([CONTEXT, "paris is the capital of france .", "berlin is big ."] * 3)
    rows = [
        {"id": "a", "question": QUESTION, "context": CONTEXT},
        {"id": "b", "question": "what is big ?", "context": long_context},
        {"id": "c", "question": "where ?", "context": "berlin is big ."},
    ]
    path = write_inputs(tmp_path / "questions.csv", rows)
    windows = ["--max_seq_length", "24", "--doc_stride", "8"]
    out = run_cli(capsys, "answer", reader_dir, "--input_file", path, "--batch_size", "2", *windows)
    singles = [
        json.loads(
            run_cli(
                capsys,
                "answer",
                reader_dir,
                "--question",
                row["question"],
                "--context",
                row["context"],
                *windows,
                "--json",
            )
        )
        for row in rows
    ]
    inputs = [{"question": row["question"], "context": row["context"]} for row in rows]  # the id is no input
    assert_same_results(json_lines(out), answered(inputs, singles, None))


def test_answer_a_squad_json_file_as_finetune_reads_it(capsys, tmp_path: Path, reader_dir: Path) -> None:
    """A SQuAD-layout .json file (data -> paragraphs -> qas, the layout finetune reads) gives one JSON line per
    question, each what the question alone prints; not the file's two top-level columns."""
    questions = [QUESTION, "where ?"]
    qas = [{"id": str(index), "question": question} for index, question in enumerate(questions)]
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(squad), encoding="utf-8")
    out = run_cli(capsys, "answer", reader_dir, "--input_file", path)
    singles = [
        json.loads(run_cli(capsys, "answer", reader_dir, "--question", question, "--context", CONTEXT, "--json"))
        for question in questions
    ]
    inputs = [{"question": question, "context": CONTEXT} for question in questions]
    assert_same_results(json_lines(out), answered(inputs, singles, None))


EMBED_TEXTS = [SENTENCE, "the capital .", "paris is the capital of france and berlin is big ."]


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_embed_a_file_is_each_text_alone(capsys, tmp_path: Path, memorised_dir: Path, pooling: str) -> None:
    """JSON lines of vectors, or with --output one (N, H) array; each the text's vector alone (the mean leaves the
    batch's padding out)."""
    path = write_inputs(tmp_path / "texts.txt", [{"text": text} for text in EMBED_TEXTS])
    flags = ["--pooling", pooling, "--batch_size", "3"]
    singles = [json.loads(run_cli(capsys, "embed", memorised_dir, text, "--pooling", pooling)) for text in EMBED_TEXTS]
    printed = json_lines(run_cli(capsys, "embed", memorised_dir, "--input_file", path, *flags))
    assert_same_results(printed, answered([{"text": text} for text in EMBED_TEXTS], singles, "embedding"))
    output = tmp_path / "vectors.npy"
    out = run_cli(capsys, "embed", memorised_dir, "--input_file", path, *flags, "--output", output)
    assert out == f"Wrote 3 32-dimensional embeddings, one row per input, to {output}\n"
    np.testing.assert_allclose(np.load(output), np.array(singles), atol=1e-5)


def test_similarity_a_file_of_pairs_is_each_pair_alone(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    path = write_inputs(tmp_path / "pairs.tsv", PAIRS)
    columns = ["--text_column", "premise", "--text_pair_column", "hypothesis"]
    out = run_cli(capsys, "similarity", memorised_dir, "--input_file", path, *columns, "--batch_size", "2")
    singles = [float(run_cli(capsys, "similarity", memorised_dir, row["premise"], row["hypothesis"])) for row in PAIRS]
    pairs = [{"text": row["premise"], "text_pair": row["hypothesis"]} for row in PAIRS]
    # the single score is printed to 4 decimals
    assert_same_results(json_lines(out), answered(pairs, singles, "similarity"), atol=1e-4)


def test_the_progress_bar_shows_on_a_terminal_the_results_do_not_go_to(
    capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, memorised_dir: Path
) -> None:
    path = write_inputs(tmp_path / "texts.txt", [{"text": text} for text in EMBED_TEXTS])
    output = ["--output_file", str(tmp_path / "vectors.jsonl")]
    for stderr_is_a_terminal, stdout_is_a_terminal, flags, shown in (
        (True, False, [], True),  # printed into a pipe or a file
        (True, True, output, True),
        (True, True, [], False),  # printed on the terminal the bar would be drawn on
        (False, False, output, False),
    ):
        monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_is_a_terminal)
        monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_is_a_terminal)
        capsys.readouterr()
        dispatch.main(["embed", str(memorised_dir), "--input_file", str(path), *flags])
        assert ("3/3" in capsys.readouterr().err) == shown


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path, finetuned_dir: Path) -> None:
    """`bertscratch classify --input_file texts.txt | head -1`: more lines than a pipe holds, so the command is still
    printing when the reader closes it; it stops with status 0 and no error."""
    path = write_inputs(tmp_path / "texts.txt", [{"text": text} for text, _ in REVIEWS * 300])
    argv = ["classify", str(finetuned_dir), "--input_file", str(path), "--batch_size", "64"]
    process = subprocess.Popen(
        [sys.executable, "-m", "hf_bertscratch_cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    first = json.loads(process.stdout.readline())
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert first["text"] == REVIEWS[0][0] and {result["label"] for result in first["labels"]} == {"neg", "pos"}
    assert process.returncode == 0 and b"rror" not in err, err.decode()


@pytest.mark.parametrize(
    "argv, files, message",
    [
        (["classify", "{classifier}", "a text", "--input_file", "{reviews.csv}"], {},
         "TEXT and --input_file '{reviews.csv}' were both given: give the input on the command line, or a file"),
        (["classify", "{classifier}", "--text_pair", "a", "--input_file", "{reviews.csv}"], {},
         "--text_pair and --input_file '{reviews.csv}' were both given"),
        (["classify", "{classifier}"], {}, "Give TEXT, or a file of inputs with --input_file."),
        (["similarity", "{classifier}", "a text"], {}, "Give TEXT_PAIR, or a file of inputs with --input_file."),
        (["answer", "{classifier}"], {}, "Give --question and --context, or a file of inputs with --input_file."),
        (["classify", "{classifier}", "a text", "--output_file", "{out.jsonl}"], {},
         "--output_file '{out.jsonl}' is where the results of --input_file go"),
        (["classify", "{classifier}", "a text", "--text_column", "review"], {},
         "--text_column 'review' names a column of --input_file, and none was given: give --input_file, or leave "
         "--text_column out."),
        (["answer", "{classifier}", "--question", "who ?", "--context", "me .", "--context_column", "passage"], {},
         "--context_column 'passage' names a column of --input_file"),
        (["classify", "{classifier}", "--input_file", "{missing.csv}"], {},
         "The input file '{missing.csv}' does not exist."),
        (["classify", "{classifier}", "--input_file", "{reviews.csv}", "--text_column", "review"], {},
         "Column 'review' (--text_column as given) not in --input_file '{reviews.csv}'; it has ['text', 'label']: "
         "name yours with --text_column."),
        (["answer", "{classifier}", "--input_file", "{reviews.csv}"], {},
         "Columns 'question' (--question_column's default) and 'context' (--context_column's default) not in "
         "--input_file '{reviews.csv}'; it has ['text', 'label']: name yours with --question_column, --context_column."),
        (["classify", "{classifier}", "--input_file", "{empty.txt}"], {"empty.txt": ""},
         "The input file '{empty.txt}' is empty; expected at least one example."),
        (["classify", "{classifier}", "--input_file", "{header.csv}"], {"header.csv": "text,label\n"},
         "The input file '{header.csv}' holds no rows (a header alone); expected at least one example."),
        (["classify", "{classifier}", "--input_file", "{texts.doc}"], {"texts.doc": "a text\n"},
         "Cannot read '{texts.doc}': extension 'doc' is not one of"),
        (["classify", "{classifier}", "--input_file", "{blank.txt}"], {"blank.txt": "a text\n\nanother\n"},
         "Line 2 of --input_file '{blank.txt}' is empty: expected one text on every line."),
        (["classify", "{classifier}", "--input_file", "{gap.csv}"], {"gap.csv": 'text,label\n"a",1\n,0\n'},
         "Row 2 of --input_file '{gap.csv}' (counting from 1, the header not counted) is empty in column 'text' "
         "(--text_column): expected a text in every row."),
        (["classify", "{classifier}", "--input_file", "{numbers.csv}", "--text_column", "label"], {},
         "Row 1 of --input_file '{numbers.csv}' (counting from 1, the header not counted) holds 1, not text in "
         "column 'label'"),
        (["similarity", "{classifier}", "--input_file", "{reviews.csv}"], {},
         "--input_file '{reviews.csv}': name the column that holds TEXT_PAIR with --text_pair_column."),
        (["classify", "{classifier}", "--input_file", "{reviews.csv}", "--batch_size", "0"], {},
         "batch_size must be at least 1, got 0."),
        (["classify", "{classifier}", "--input_file", "{reviews.csv}", "--json"], {},
         "--json prints one input's result as JSON; with --input_file '{reviews.csv}' every result is printed as a "
         "JSON line already: leave --json out."),
        (["answer", "{classifier}", "--input_file", "{reviews.csv}", "--json"], {},
         "--json prints one input's result as JSON; with --input_file '{reviews.csv}'"),
    ],
)  # fmt: skip
def test_a_bad_file_of_inputs_is_one_line_naming_it(
    capsys, tmp_path: Path, finetuned_dir: Path, argv: list[str], files: dict[str, str], message: str
) -> None:
    """Each before the model runs: a missing, empty or unreadable file, a column it lacks (with the columns it has),
    a row without text, an input given twice or not at all, a column flag or --output_file without a file, --json
    with one (its results are JSON lines either way)."""
    rows = "text,label\n" + "".join(f'"{text}",{label}\n' for text, label in REVIEWS)
    for name, text in {"reviews.csv": rows, "numbers.csv": rows, **files}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    names = {name: str(tmp_path / name[1:-1]) for name in re.findall(r"\{[^}]+\}", " ".join(argv))}
    names["{classifier}"] = str(finetuned_dir)
    err = run_cli_error(capsys, *(names.get(arg, arg) for arg in argv))
    for placeholder, value in names.items():
        message = message.replace(placeholder, value)
    assert message in err, err


# -------------------------------------------------------------------------------------------------- attention


def test_attention_grid_and_single_head(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    run_cli(capsys, "attention", memorised_dir, SENTENCE, "--output", tmp_path / "grid.png")
    assert_png(tmp_path / "grid.png", 600, 600)  # 4 heads: a 2 x 2 grid of 300 px panels
    run_cli(capsys, "attention", memorised_dir, SENTENCE, "--output", tmp_path / "h.png", "--layer", "0", "--head", "1")
    assert_png(tmp_path / "h.png", 600, 600)


def test_attention_bad_layer(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    err = run_cli_error(capsys, "attention", memorised_dir, SENTENCE, "--output", tmp_path / "a.png", "--layer", "7")
    assert "layer=7 is out of range: the model has 2 layers" in err
    assert not (tmp_path / "a.png").exists()


# ------------------------------------------------------------------------------------------ plot / TensorBoard


def test_pretrain_reports_to_tensorboard(pretrained_dir: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (log_dir,) = pretrained_dir.glob("runs/*")
    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    assert {"train/loss", "eval/loss"} <= set(accumulator.Tags()["scalars"])
    assert [event.step for event in accumulator.Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]


def test_plot_pretraining_run(capsys, tmp_path: Path, pretrained_dir: Path) -> None:
    out = run_cli(capsys, "plot", pretrained_dir, "--output", tmp_path / "curve.png")
    assert out.strip() == f"Wrote {tmp_path / 'curve.png'}"
    assert_png(tmp_path / "curve.png", 1200, 400)  # the MLM run logs eval_accuracy (masked-token accuracy) too
    assert_png(pretrained_dir / "loss_curve.png", 1200, 400)  # pretraining drew the same at the end


def test_plot_finetuning_run_default_output(capsys, finetuned_dir: Path) -> None:
    (finetuned_dir / "loss_curve.png").unlink()
    assert run_cli(capsys, "plot", finetuned_dir).strip() == f"Wrote {finetuned_dir / 'loss_curve.png'}"
    assert_png(finetuned_dir / "loss_curve.png", 1200, 400)


def test_plot_imports_neither_torch_nor_transformers(tmp_path: Path) -> None:
    """A run's curves need matplotlib and its trainer_state.json alone: `bertscratch plot` draws them, or says in one
    line what is missing, without the seconds torch and transformers take to import."""
    write_state(tmp_path / "run", FINETUNE_HISTORY)
    code = (
        "import sys, hf_bertscratch_cli\n"
        "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "else:\n    code = 0\n"
        "loaded = [name for name in ('torch', 'transformers', 'hf_bertscratch') if name in sys.modules]\n"
        "assert not loaded, loaded\nsys.exit(code)\n"
    )
    for argv, status, out, err in (
        (["run", "--output", "curve.png"], 0, "Wrote curve.png\n", ""),
        (["nope"], 1, "", "bertscratch plot: error: FileNotFoundError: Run directory 'nope' does not exist"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code, "plot", *argv], capture_output=True, text=True, check=False, cwd=tmp_path
        )
        assert (done.returncode, done.stdout) == (status, out), done.stderr
        assert done.stderr.startswith(err) and done.stderr.count("\n") == (status != 0), done.stderr
    assert_png(tmp_path / "curve.png", 1200, 400)


def test_plot_missing_run_dir(capsys, tmp_path: Path) -> None:
    err = run_cli_error(capsys, "plot", tmp_path / "nope")
    assert err.startswith("bertscratch plot: error: FileNotFoundError:") and "does not exist" in err


# -------------------------------------------------------------------------------- errors, debug and --help


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        dispatch.main(["--debug", "plot", str(tmp_path / "nope")])
    with pytest.raises(FileNotFoundError):
        dispatch.main(["plot", str(tmp_path / "nope"), "--debug"])
    monkeypatch.setenv(hf_bertscratch_cli.DEBUG_ENV, "1")
    with pytest.raises(FileNotFoundError):
        dispatch.main(["plot", str(tmp_path / "nope")])


def test_debug_reaches_the_processes_a_command_launches_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bertscratch --debug pretrain` sets $BERTSCRATCH_DEBUG for the processes it launches (their tracebacks then,
    not one line each), and only while the command runs."""
    seen = []
    fake = types.SimpleNamespace(main=lambda argv: seen.append(os.environ.get(hf_bertscratch_cli.DEBUG_ENV)))
    monkeypatch.setitem(sys.modules, dispatch.FORWARDED["pretrain"], fake)
    monkeypatch.delenv(hf_bertscratch_cli.DEBUG_ENV, raising=False)
    dispatch.main(["--debug", "pretrain"])
    dispatch.main(["pretrain"])
    assert seen == ["1", None] and hf_bertscratch_cli.DEBUG_ENV not in os.environ


@pytest.mark.parametrize("command", sorted(cli.INSPECTION_COMMANDS))
def test_inspection_help(capsys, command: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: bertscratch {command}")
    assert cli.INSPECTION_COMMANDS[command][0].__doc__.split()[0] in out


def test_top_level_help_lists_every_command(capsys) -> None:
    with pytest.raises(SystemExit):
        dispatch.main(["--help"])
    out = capsys.readouterr().out
    assert set(hf_bertscratch_cli.COMMAND_SUMMARIES) == {*dispatch.FORWARDED, *dispatch.OWN, *cli.INSPECTION_COMMANDS}
    assert set(dispatch.INSPECTION) == set(cli.INSPECTION_COMMANDS)
    for command in hf_bertscratch_cli.COMMAND_SUMMARIES:
        assert f"\n  {command} " in out


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["finetun"], ["finetune", "--help"], ["pretrain", "--help"], ["pretrain-flax", "-h"]],
)
def test_help_version_and_a_mistyped_command_import_neither_torch_nor_transformers(argv: list[str]) -> None:
    """The console script answers these from the standard library alone (well under a second)."""
    code = (
        "import sys, hf_bertscratch_cli\n"
        "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "loaded = [name for name in ('torch', 'transformers', 'jax', 'hf_bertscratch') if name in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False)
    assert time.monotonic() - started < 2  # a whole Python start included
    assert done.returncode == 0, done.stderr
    if argv == ["finetun"]:
        assert done.stderr == (
            "bertscratch: error: unknown command 'finetun'; did you mean 'finetune'? (see bertscratch --help)\n"
        )
    if argv == ["--version"]:
        assert done.stdout == f"bertscratch {hf_bertscratch.__version__}\n"
    if argv[1:] in (["--help"], ["-h"]):
        assert done.stdout.startswith(f"usage: bertscratch {argv[0]} ")


def test_the_front_door_runs_as_a_module_as_the_console_script_does() -> None:
    """`python -m hf_bertscratch_cli ARGS` is `bertscratch ARGS`: the same answers, lines and exit statuses."""
    for argv, code, stream, line in (
        (["--version"], 0, "stdout", f"bertscratch {hf_bertscratch.__version__}\n"),
        (["finetun"], 2, "stderr", "bertscratch: error: unknown command 'finetun'; did you mean 'finetune'? "
         "(see bertscratch --help)\n"),
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "hf_bertscratch_cli", *argv], capture_output=True, text=True, check=False
        )
        assert (done.returncode, getattr(done, stream)) == (code, line), done.stderr


def test_every_command_answers_help_from_a_stored_page() -> None:
    """`bertscratch COMMAND --help` is what a new user types first: every command's page is stored, so it answers in
    a fraction of a second, not after the seconds torch and transformers (and JAX, for pretrain-flax) take to
    import."""
    stored = set(dispatch.STORED)
    assert set(hf_bertscratch_cli.COMMAND_SUMMARIES) == stored
    assert all((hf_bertscratch_cli.commands.HELP_PAGES / f"{command}.txt").is_file() for command in stored)


def test_pretrain_flax_without_jax_keeps_its_page_and_names_the_extra_to_install(tmp_path: Path) -> None:
    """Where JAX is not installed (None in sys.modules makes `import jax` fail as it does then), pretrain-flax's page
    is the one stored, and running the command says in one line what to install."""
    without_jax = "import sys\nsys.modules['jax'] = None\n"
    page = subprocess.run(
        [sys.executable, "-c", f"{without_jax}from hf_bertscratch_cli import dispatch\n"
         "print(dispatch.help_page('pretrain-flax'), end='')"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert page.stdout == (hf_bertscratch_cli.commands.HELP_PAGES / "pretrain-flax.txt").read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", f"{without_jax}import hf_bertscratch_cli\nhf_bertscratch_cli.main(sys.argv[1:])",
         "pretrain-flax", "--output_dir", "out"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("bertscratch pretrain-flax: error: ") and 'pip install "hf-bertscratch[flax]"' in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(dispatch.STORED))
def test_stored_help_pages_are_the_parsers_and_fit_200_lines(command: str) -> None:
    """`COMMAND --help` prints a stored page (no torch import); it must be what the parser says. After changing a
    flag: python -c "from hf_bertscratch_cli.dispatch import write_help_pages; write_help_pages()"."""
    stored = (hf_bertscratch_cli.commands.HELP_PAGES / f"{command}.txt").read_text(encoding="utf-8")
    assert stored == dispatch.help_page(command)
    assert len(stored.splitlines()) <= 200 and max(map(len, stored.splitlines())) <= 140
    code = (
        "import sys, hf_bertscratch_cli.commands as c\ntry:\n    c.parse(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    )
    code += "assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code, command, "--help"], capture_output=True, text=True, check=True)
    assert done.stdout == stored


def test_bad_training_flags_are_one_line_with_the_closest_name(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main(["finetune", "--model_name_or_path", "m", "--task_type", "classifcation"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "invalid choice: 'classifcation'" in line and "did you mean 'classification'?" in line
    with pytest.raises(SystemExit):
        dispatch.main(["pretrain", "--lerning_rate", "1e-3"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "bertscratch pretrain: error: unrecognized arguments: --lerning_rate 1e-3; did you mean '--learning_rate'? "
        "(see bertscratch pretrain --help)"
    )


def test_an_abbreviated_flag_is_refused_with_the_flag_it_starts(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main(["finetune", "--learning_rat", "1e-4", "--model_name_or_path", "m"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "unrecognized arguments: --learning_rat 1e-4; did you mean '--learning_rate'?" in line


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_training_help_lists_what_a_first_run_needs_and_the_rest_behind_help_all(capsys, command: str) -> None:
    with pytest.raises(SystemExit):
        dispatch.main([command, "--help"])
    short = capsys.readouterr().out
    with pytest.raises(SystemExit):
        dispatch.main([command, "--help_all"])
    full = capsys.readouterr().out
    headings = [line for line in short.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings == ["options:", "model:", "data:", "training:"]
    assert "--max_train_minutes" in short or command == "finetune"
    assert "--tokenizer_name" in short or command == "finetune"  # own text: a vocab.txt of one's own, or trained
    assert "--data_dir" in short and "--learning_rate" in short and "--output_dir" in short
    assert "--label_smoothing_factor" not in short and "--weight_decay" not in short  # --help_all only
    assert "--label_smoothing_factor" in full and "--weight_decay" in full
    assert len(full.splitlines()) > 2 * len(short.splitlines()) and "more flags: --help_all." in short
    assert "--model-name-or-path" not in short  # each flag named once
    flat = " ".join(short.split())
    assert "(default: None)" not in flat and not re.search(r"\(default[^)]*\)\.? \(default", flat)  # said once


def closed_port_hub(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a machine whose Hub cannot be reached: HF_ENDPOINT on a port nothing listens on."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    return dict(os.environ)


def test_a_hub_that_does_not_answer_counts_as_unreachable_within_the_probes_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name lookup or a connection that hangs (a machine behind a silent firewall) costs the probe's 3 s, once."""
    from hf_bertscratch_base import model_reference

    closed_port_hub(monkeypatch)

    def hang(*args: object, **kwargs: object) -> None:
        time.sleep(30)
        raise TimeoutError("timed out")  # as a hung connection ends, long after the probe stopped waiting

    monkeypatch.setattr(model_reference.socket, "create_connection", hang)
    model_reference.probe_hub.cache_clear()
    started = time.monotonic()
    try:
        assert model_reference.hub_unreachable() == "127.0.0.1 did not answer within 3 s"
        assert model_reference.hub_unreachable() == "127.0.0.1 did not answer within 3 s"  # asked once per process
    finally:
        model_reference.probe_hub.cache_clear()
    assert time.monotonic() - started < model_reference.HUB_PROBE_TIMEOUT + 1


@pytest.mark.parametrize(
    "argv",
    [
        ["classify", "runs/no-such-model", "hello"],
        ["finetune", "--model_name_or_path", "someone/no-such-model", "--task", "sst2", "--output_dir", "out"],
        ["finetune", "--model_name_or_path", ".", "--task", "sst2", "--output_dir", "out"],
    ],
)
def test_a_model_neither_here_nor_reachable_fails_in_one_line_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]
) -> None:
    """With the Hub unreachable, a model reference that is no folder fails before torch loads (no half minute of
    retries), naming the reference and both places it was looked for."""
    code = (
        "import sys, hf_bertscratch_cli\n"
        "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "assert 'torch' not in sys.modules\nsys.exit(code)\n"
    )
    env = closed_port_hub(monkeypatch)
    env.pop("BERTSCRATCH_DATA_DIR", None)
    (tmp_path / "config.json").write_text("{}")  # "." is a model folder
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False, cwd=tmp_path, env=env
    )
    assert time.monotonic() - started < 5
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    if argv[2] == ".":  # a model folder, and a table task with no data directory
        assert line.startswith(
            "bertscratch finetune: error: FileNotFoundError: Dataset glue/sst2 has no local copy (neither "
            "--data_dir nor $BERTSCRATCH_DATA_DIR is set) and the Hub cannot be reached (127.0.0.1 cannot be reached"
        )
        assert line.endswith(
            "pass --data_dir DIR or set $BERTSCRATCH_DATA_DIR=DIR, DIR holding sst2/ (as ../shared/data does)."
        )
        return
    model = argv[1] if argv[0] == "classify" else argv[2]
    assert line.startswith(
        f"bertscratch {argv[0]}: error: FileNotFoundError: Model {model!r} is neither a local folder"
    )
    assert "nor reachable on the Hub (127.0.0.1 cannot be reached" in line


@pytest.mark.parametrize("header", ["text,stars", "text,label"])
def test_a_file_without_the_tasks_column_fails_in_one_line_before_torch_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, header: str
) -> None:
    """With the Hub unreachable, a training file that lacks a column the task reads fails within seconds, naming the
    column, the file's columns and the flag that picks it; a file that has them passes the front door."""
    checks = "check_sources('finetune', sys.argv[1:]); hf_bertscratch_cli.check_arguments('finetune', sys.argv[1:])"
    call = "main(['finetune', *sys.argv[1:]])" if header == "text,stars" else checks
    code = (
        "import sys, hf_bertscratch_cli\n"
        f"try:\n    hf_bertscratch_cli.{call}\nexcept SystemExit as exit:\n    code = exit.code\nelse:\n    code = 0\n"
        "assert 'torch' not in sys.modules\nsys.exit(code)\n"
    )
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "train.csv.gz").write_bytes(gzip.compress(f"{header}\nthe cat,0\n".encode()))
    argv = ["--model_name_or_path", "model", "--train_file", "train.csv.gz", "--validation_file", "train.csv.gz"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, *argv, "--output_dir", "out"],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=closed_port_hub(monkeypatch),
    )  # fmt: skip
    assert time.monotonic() - started < 5
    if header == "text,label":
        assert (done.returncode, done.stderr) == (0, "")
        return
    assert done.returncode == 1
    assert done.stderr == (
        "bertscratch finetune: error: ValueError: Column(s) ['label'] not in the train split; it has ['text', "
        "'stars']: name yours with --label_column.\n"
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["finetune", "--model_name_or_path", "model", "--train_file", "train.csv", "--validation_file", "dev.csv"],
            "FileNotFoundError: The train file 'train.csv' (--train_file) does not exist.",
        ),
        (
            ["finetune", "--model_name_or_path", "model", "--task", "sst-2"],
            "ValueError: Unknown --task 'sst-2'; did you mean 'sst2'? Expected one of [",
        ),
        (
            ["pretrain", "--task_text", "sst2", "--data_dir", "nowhere"],
            "NotADirectoryError: data_dir='nowhere' is not a directory; expected a folder of local datasets.",
        ),
        (
            ["answer", "model", "--input_file", "questions.csv"],
            "FileNotFoundError: The input file 'questions.csv' (--input_file) does not exist.",
        ),
        (
            ["classify", "model", "--input_file", "dev.csv", "--text_pair_column", "second"],
            "ValueError: Column 'second' (--text_pair_column as given) not in --input_file 'dev.csv'; it has ['id', "
            "'text']: name yours with --text_pair_column.",
        ),
        (
            ["finetune", "--model_name_or_path", "model", "--task_type", "token-classification"]
            + ["--train_file", "words.txt", "--validation_file", "words.txt"],
            "ValueError: The train split's file 'words.txt' (--train_file) holds words without tags (one column per "
            "line), but the train split needs each word's tag",
        ),
    ],
    ids=[
        "missing-train-file",
        "misspelt-task",
        "missing-data-dir",
        "missing-input-file",
        "input-column",
        "conll-words",
    ],
)
def test_a_missing_file_or_folder_or_an_unknown_task_is_named_before_torch_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str], error: str
) -> None:
    """What the arguments name that is not there fails in one line within a second, before torch loads: a
    --train_file (before another file's columns are checked), a --task, a --data_dir, an --input_file or a column
    of it; and a CoNLL training file of words without tags."""
    code = (
        "import sys, hf_bertscratch_cli\n"
        "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "assert 'torch' not in sys.modules\nsys.exit(code)\n"
    )
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "dev.csv").write_text("id,text\n1,the cat\n")  # no label column: the train file is the error
    (tmp_path / "words.txt").write_text("-DOCSTART-\n\nthe\ncat\n")
    output = ["--output_dir", "out"] if argv[0] in ("finetune", "pretrain") else []  # an inference command has none
    done = subprocess.run(
        [sys.executable, "-c", code, *argv, *output],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=closed_port_hub(monkeypatch),
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.startswith(f"bertscratch {argv[0]}: error: {error}"), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_inspection_arguments_from_json_file(tmp_path: Path, memorised_dir: Path) -> None:
    config = tmp_path / "fill.json"
    config.write_text(json.dumps({"model": str(memorised_dir), "text": "the [MASK]", "top_k": 7}))
    args = cli.parse_command_arguments("fill-mask", [str(config)])
    assert (args.model, args.text, args.top_k, args.json) == (str(memorised_dir), "the [MASK]", 7, False)


# ----------------------------------------------------------------------------------------- forwarded commands


@pytest.mark.parametrize("command", sorted(dispatch.FORWARDED))
def test_forwarded_arguments_unchanged(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    calls = []
    fake = types.ModuleType("fake")
    fake.main = lambda argv: calls.append((list(argv), sys.argv[0]))
    monkeypatch.setitem(sys.modules, dispatch.FORWARDED[command], fake)
    argv = ["--output_dir", "out dir", "--debug", "x.json", "--help"]
    dispatch.main([command, *argv])
    assert calls == [(argv, f"bertscratch {command}")]
    assert sys.argv[0] != f"bertscratch {command}"


def test_forwarded_errors_are_one_line(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(argv: list[str]) -> None:
        raise ValueError("--max_steps=-3 is negative:\n expected a positive number.")

    monkeypatch.setitem(sys.modules, dispatch.FORWARDED["pretrain"], types.SimpleNamespace(main=fail))
    err = run_cli_error(capsys, "pretrain", "--max_steps", "-3")
    assert err == "bertscratch pretrain: error: ValueError: --max_steps=-3 is negative: expected a positive number.\n"


def test_missing_forwarded_module_is_one_line(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, dispatch.FORWARDED["benchmark"], None)
    err = run_cli_error(capsys, "benchmark")
    assert "is not available in this install (hf_bertscratch.benchmark is missing)" in err


@pytest.mark.parametrize("command", sorted(dispatch.FORWARDED))
def test_forwarded_help_is_the_module_help(capsys, command: str) -> None:
    module_name = dispatch.FORWARDED[command]
    module = pytest.importorskip(module_name)
    if not hasattr(module, "main"):
        pytest.skip(f"{module_name} has no main() yet")
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def test_finetune_writes_plots(finetuned_dir: Path) -> None:
    assert_png(finetuned_dir / "confusion_matrix.png", 400, 400)  # 2 classes
    assert json.loads((finetuned_dir / "config.json").read_text())["id2label"] == {"0": "neg", "1": "pos"}


def test_convert_to_bert_keeps_predictions(capsys, tmp_path: Path, memorised_dir: Path) -> None:
    run_cli(capsys, "convert", memorised_dir, tmp_path / "bert")
    assert json.loads((tmp_path / "bert" / "config.json").read_text())["model_type"] == "bert"
    out = run_cli(capsys, "fill-mask", tmp_path / "bert", "paris is the [MASK] of france .", "--top_k", "1")
    assert out.split()[:2] == ["1.", "capital"]


def test_push_dry_run(capsys, tmp_path: Path, pretrained_dir: Path) -> None:
    run_cli(capsys, "push", pretrained_dir, "--repo_id", "someone/tiny-bert", "--dry_run", tmp_path / "upload")
    assert {"config.json", "model.safetensors", "README.md"} <= {p.name for p in (tmp_path / "upload").iterdir()}


def test_benchmark_tiny(capsys, tmp_path: Path) -> None:
    run_cli(
        capsys,
        "benchmark",
        "--presets",
        "tiny",
        "--seq_lens",
        "16",
        "--paddings",
        "0",
        "--workloads",
        "infer",
        "--batch_size",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--no_memory",
        "--num_threads",
        "1",
        "--output_json",
        tmp_path / "bench.json",
    )
    (result,) = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert result["preset"] == "tiny"


# ------------------------------------------------------------------------------------------ installed command


def test_console_script_error_exit(tmp_path: Path) -> None:
    executable = shutil.which("bertscratch")
    if executable is None:
        pytest.skip("the package is not installed with its console script")
    result = subprocess.run(
        [executable, "plot", str(tmp_path / "nope")], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Run directory" in result.stderr


def test_inspection_commands_restore_transformers_logging(capsys, tmp_path: Path) -> None:
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    run_cli_error(capsys, "plot", tmp_path / "nope")
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) == before


def test_the_stored_flags_are_the_parsers() -> None:
    """The front door names a mistyped flag from FLAGS_FILE: each command's flags as its parser takes them, read under
    the installed transformers (training commands take its TrainingArguments flags). After changing a flag:
    python -c "from hf_bertscratch_cli.dispatch import write_help_pages; write_help_pages()"."""
    stored = json.loads(hf_bertscratch_cli.commands.FLAGS_FILE.read_text(encoding="utf-8"))
    if stored["transformers"] != transformers.__version__:
        pytest.skip(f"flags read under transformers {stored['transformers']}; the front door leaves them to the parser")
    assert stored == dispatch.stored_flags()


@pytest.mark.parametrize(
    "argv",
    [
        ["pretrain", "--lerning_rate", "1e-3"],
        ["finetune", "--model_name_or_path", "m", "--max_step", "10", "--lr=1e-4"],
        ["classify", "m", "some text", "--batch_sise=4"],
        ["benchmark", "--presets", "mini", "--workload", "train"],
    ],
)
def test_a_mistyped_flag_is_the_parsers_error_before_torch_loads(capsys, tmp_path: Path, argv: list[str]) -> None:
    """A flag the command does not take ends the command at the front door, within a second and without torch, with
    the line (and exit status 2) its parser gives once torch has loaded (after the checks of its sources: "m" is a
    model folder here)."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    code = (
        "import sys, hf_bertscratch_cli\n"
        "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "assert 'torch' not in sys.modules\nsys.exit(code)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert time.monotonic() - started < 3
    assert done.returncode == 2, done.stderr
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main(argv)  # the library's parser, torch loaded
    assert exit_info.value.code == 2
    assert done.stderr == capsys.readouterr().err
    assert "did you mean" in done.stderr


def test_flags_the_command_takes_pass_the_front_door(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every spelling of a known flag, `--flag=value`, the values of a list flag, anything after `--`; and no check
    at all where the flags were read under another transformers than the installed one."""
    check = hf_bertscratch_cli.commands.check_flags
    check("finetune", ["--model_name_or_path", "m", "--max-steps", "3", "--learning_rate=1e-4", "--", "--lr"])
    check("benchmark", ["--paddings", "0", "0.3", "--seq_lens", "128"])
    check("finetune", ["args.json"])
    monkeypatch.setattr(hf_bertscratch_cli.commands.metadata, "version", lambda name: "0.0")
    check("finetune", ["--max_step", "3"])


# ----------------------------------------------------------------------------------------------- tag word lists

WORD_ROWS = [
    ["Paris", "is", "the", "capital", "of", "France", "."],
    ["Berlin", "is", "big", "."],
    ["Berlin,", "Paris.", "and", "Rome!"],  # words of two pieces, only the first one read
]


def first_piece_tags(model_dir: Path, tokenizer, words: list[str]) -> list[str]:
    """The tag of each word, read here from the model's logits at the word's first piece."""
    outputs, encoding = direct_outputs(
        model_dir, AutoModelForTokenClassification, tokenizer, words, is_split_into_words=True
    )
    id2label = AutoConfig.from_pretrained(model_dir).id2label
    word_ids = encoding.word_ids(0)
    firsts = [word_ids.index(index) for index in range(len(words))]
    return [id2label[int(outputs.logits[0, position].argmax())] for position in firsts]


@pytest.fixture(scope="module")
def word_tagger_dir(tagger_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tagger as `finetune --task_type token-classification --tokens_column words` leaves it: its config records
    the column of word lists."""
    path = tmp_path_factory.mktemp("ner-words")
    shutil.copytree(tagger_dir, path, dirs_exist_ok=True)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "input_columns": {"tokens": "words"}}))
    return path


def test_tag_a_file_of_word_lists_tags_each_word_at_its_first_piece(
    capsys, tmp_path: Path, tagger_dir: Path, tokenizer
) -> None:
    path = write_inputs(tmp_path / "words.jsonl", [{"words": words, "id": str(i)} for i, words in enumerate(WORD_ROWS)])
    out = run_cli(capsys, "tag", tagger_dir, "--input_file", path, "--tokens_column", "words", "--batch_size", "2")
    lines = json_lines(out)
    assert [line["tokens"] for line in lines] == WORD_ROWS
    assert len(tokenizer(WORD_ROWS[2], is_split_into_words=True)["input_ids"]) > len(WORD_ROWS[2]) + 2
    for line, words in zip(lines, WORD_ROWS):
        assert line["tags"] == first_piece_tags(tagger_dir, tokenizer, words)
        groups = [(e["entity_group"], e["start"], e["end"]) for e in line["entities"]]
        expected = []
        for index, tag in enumerate(line["tags"]):
            kind = tag.split("-", 1)[-1]
            if tag != "O" and expected and expected[-1][0] == kind and expected[-1][2] == index and tag[0] != "B":
                expected[-1] = (kind, expected[-1][1], index + 1)
            elif tag != "O":
                expected.append((kind, index, index + 1))
        assert groups == expected
        for entity in line["entities"]:
            assert entity["word"] == " ".join(words[entity["start"] : entity["end"]])
    assert any(line["entities"] for line in lines) and any("O" in line["tags"] for line in lines)


def test_tag_reads_the_word_lists_of_the_column_recorded_at_fine_tuning(
    capsys, tmp_path: Path, word_tagger_dir: Path, tokenizer
) -> None:
    path = write_inputs(tmp_path / "words.jsonl", [{"words": words} for words in WORD_ROWS])
    lines = json_lines(run_cli(capsys, "tag", word_tagger_dir, "--input_file", path))
    assert [line["tags"] for line in lines] == [first_piece_tags(word_tagger_dir, tokenizer, w) for w in WORD_ROWS]
    texts = write_inputs(tmp_path / "texts.jsonl", [{"text": TAG_TEXT}])  # a file of texts is read as before
    (line,) = json_lines(run_cli(capsys, "tag", word_tagger_dir, "--input_file", texts))
    assert line["text"] == TAG_TEXT and "entities" in line


@pytest.mark.parametrize("strategy", ["first", "average", "max", "none"])
def test_tag_word_lists_refuse_an_aggregation_strategy_they_do_not_use(
    capsys, tmp_path: Path, word_tagger_dir: Path, strategy: str
) -> None:
    """Word lists are grouped into entities word by word, as the simple strategy groups pieces: another strategy
    would change nothing, and is refused naming it rather than passed over."""
    path = write_inputs(tmp_path / "words.jsonl", [{"words": words} for words in WORD_ROWS])
    err = run_cli_error(capsys, "tag", word_tagger_dir, "--input_file", path, "--aggregation_strategy", strategy)
    assert err == (
        f"bertscratch tag: error: ValueError: --aggregation_strategy {strategy!r} groups the pieces of texts, and "
        f"--input_file {str(path)!r} holds lists of words, whose tags are grouped word by word as "
        "the simple strategy groups pieces: leave --aggregation_strategy out.\n"
    )


def test_tag_word_lists_refuses_a_row_longer_than_the_model_reads(capsys, tmp_path: Path, tagger_dir: Path) -> None:
    rows = [{"words": WORD_ROWS[1]}, {"words": ["paris"] * 70}]  # the tiny model has 64 positions
    path = write_inputs(tmp_path / "words.jsonl", rows)
    err = run_cli_error(capsys, "tag", tagger_dir, "--input_file", path, "--tokens_column", "words")
    assert "Word list 2 of 2 is 72 tokens long ([CLS] and [SEP] included) and the model reads 64 at most" in err


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [{"words": "Paris is big"}],
            "Row 1 of --input_file {path!r} (counting from 1, the header not counted) holds 'Paris is big' in column 'words' "
            "(--tokens_column): expected a list of words",
        ),
        (
            [{"words": ["Paris", ""]}],
            "Row 1 of --input_file {path!r} (counting from 1, the header not counted) holds an empty word in column 'words' "
            "(--tokens_column): expected a list of words",
        ),
        (
            [{"words": []}],
            "Row 1 of --input_file {path!r} (counting from 1, the header not counted) holds no words in column 'words' (--tokens_column)",
        ),
    ],
)
def test_tag_word_lists_names_a_row_that_is_not_one(
    capsys, tmp_path: Path, tagger_dir: Path, rows: list, message: str
) -> None:
    path = write_inputs(tmp_path / "words.jsonl", rows)
    err = run_cli_error(capsys, "tag", tagger_dir, "--input_file", path, "--tokens_column", "words")
    assert message.format(path=str(path)) in err


@pytest.mark.parametrize(
    ("flags", "named"), [([], "recorded at fine-tuning"), (["--tokens_column", "words"], "as given")]
)
def test_tag_word_lists_column_missing_is_one_line_the_front_door_agrees_with(
    capsys, tmp_path: Path, word_tagger_dir: Path, flags: list[str], named: str
) -> None:
    """A file of neither the word lists' column nor texts: the front door, before torch loads, and the library name
    the column of words looked for, and where its name came from."""
    path = write_inputs(tmp_path / "words.jsonl", [{"tokens": WORD_ROWS[0]}])
    argv = ["tag", str(word_tagger_dir), "--input_file", str(path), *flags]
    expected = (
        f"bertscratch tag: error: ValueError: Column 'words' (--tokens_column {named}) not in --input_file "
        f"{str(path)!r}; it has ['tokens']: name yours with --tokens_column.\n"
    )
    assert run_cli_error(capsys, *argv) == expected
    with pytest.raises(SystemExit):
        hf_bertscratch_cli.main(argv)
    assert capsys.readouterr().err == expected


def test_tag_batch_size_help_says_what_a_batch_holds_of_each_input_tag_reads() -> None:
    """tag reads texts, cut into windows, and lists of words, each tagged whole: --batch_size counts both."""
    (batch_size,) = [a for a in cli.command_parser("tag")._actions if a.dest == "batch_size"]
    assert batch_size.help.startswith("Windows of texts, or lists of words (--tokens_column), per forward pass")
    assert "a list of words is one, tagged whole" in batch_size.help


def test_tag_input_file_help_says_which_files_hold_lists_of_words() -> None:
    """Lists of words come in a column of a .json, .jsonl or .parquet file (a csv or tsv cell holds a string, and
    `check_word_lists_file` refuses it): --input_file's help and --tokens_column's say so."""
    helps = {action.dest: action.help or "" for action in cli.command_parser("tag")._actions}
    kinds = file_kinds(LIST_BUILDERS)
    assert f"or, in a {kinds} file, a list of words in the column --tokens_column names" in helps["input_file"]
    assert helps["tokens_column"].startswith(f"With --input_file ({kinds}, whose cells hold lists)")


def test_tag_refuses_a_column_of_words_and_one_of_texts_together(capsys, tmp_path: Path, tagger_dir: Path) -> None:
    path = write_inputs(tmp_path / "words.jsonl", [{"words": WORD_ROWS[0], "text": TAG_TEXT}])
    argv = ["tag", tagger_dir, "--input_file", path, "--tokens_column", "words", "--text_column", "text"]
    err = run_cli_error(capsys, *argv)
    assert "--tokens_column 'words' and --text_column 'text' were both given" in err


WORD_TAGS = [
    ["B-LOC", "O", "O", "O", "O", "B-LOC", "O"],
    ["B-LOC", "O", "O", "O"],
    ["B-LOC", "B-LOC", "O", "B-LOC"],
]


@pytest.fixture(scope="module")
def word_finetuned_dir(pretrained_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bertscratch finetune --task_type token-classification` of the pretrained run on word lists in columns of
    one's own (words, ner), predicting a test file of the words alone: its output_dir."""
    data_dir = tmp_path_factory.mktemp("word-lists")
    train = write_inputs(data_dir / "train.jsonl", [{"words": w, "ner": t} for w, t in zip(WORD_ROWS, WORD_TAGS)] * 4)
    test = write_inputs(data_dir / "test.jsonl", [{"words": words} for words in WORD_ROWS])
    output_dir = data_dir / "tagger"
    columns = ["--tokens_column", "words", "--tags_column", "ner"]
    files = ["--train_file", str(train), "--validation_file", str(train), "--test_file", str(test)]
    run_tiny_finetune(pretrained_dir, output_dir, "--task_type", "token-classification", *files, *columns)
    return output_dir


def test_tag_word_lists_agrees_with_the_predictions_of_fine_tuning(capsys, word_finetuned_dir: Path, tokenizer) -> None:
    """The model as fine-tuning leaves it records the column of words: tag reads it alone, and tags each word as the
    logits at its first piece, and as fine-tuning predicted the test file's words."""
    test = word_finetuned_dir.parent / "test.jsonl"
    lines = json_lines(run_cli(capsys, "tag", word_finetuned_dir, "--input_file", test))
    tags = [line["tags"] for line in lines]
    assert tags == [first_piece_tags(word_finetuned_dir, tokenizer, words) for words in WORD_ROWS]
    predictions = word_finetuned_dir / "test_predictions.csv"
    with open(predictions, encoding="utf-8") as rows:
        predicted = [row["prediction"].split() for row in csv.DictReader(rows)]
    assert predicted == tags
    assert len({tag for row in tags for tag in row}) > 1  # both tags predicted, each where fine-tuning put it


# A bad value given each script, and the one line it ends with (after the script's name).
SCRIPT_ERRORS = {
    "finetune.py": (
        ["--model_name_or_path", "model", "--dropout", "5", "--output_dir", "out"],
        "ValueError: dropout must be in [0, 1) or -1 (the checkpoint's), got 5.0.",
    ),
    "pretrain.py": (["--dropout", "3", "--output_dir", "out"], "ValueError: dropout must be in [0, 1), got 3.0."),
    "evaluate_onnx.py": (
        ["--model", "model", "--task", "sst3"],
        "ValueError: Unknown --task 'sst3'; did you mean 'sst2'? Expected one of ['cola', 'sst2', 'mrpc', 'stsb', "
        "'rte', 'wnli', 'mnli', 'qnli', 'qqp', 'imdb', 'conll2003', 'squad'] (or give a dataset).",
    ),
}


@pytest.mark.parametrize("script", list(SCRIPT_ERRORS))
def test_a_scripts_bad_value_ends_in_the_commands_one_line(tmp_path: Path, script: str) -> None:
    """`python scripts/NAME.py` with a bad value ends as `bertscratch COMMAND` does: one line naming the script and
    exit status 1; `BERTSCRATCH_DEBUG=1` shows the traceback."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "bertscratch"}')
    argv, line = SCRIPT_ERRORS[script]
    command = [sys.executable, str(Path(__file__).resolve().parents[1] / "scripts" / script), *argv]
    env = {key: value for key, value in os.environ.items() if key != "BERTSCRATCH_DEBUG"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert done.returncode == 1
    assert done.stderr == f"scripts/{script}: error: {line}\n"
    debugged = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env={**env, "BERTSCRATCH_DEBUG": "1"}, check=False
    )
    assert debugged.returncode == 1 and "Traceback" in debugged.stderr, debugged.stderr
