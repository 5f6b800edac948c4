"""Tests for hf_bertscratch.pretraining: the quick start end to end on tiny data, resume, streaming, NSP, whole-word
masking, bad input, and a 2-process gloo run under torchrun."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    AutoTokenizer,
    BertTokenizer,
    DataCollatorForLanguageModeling,
    PreTrainedTokenizerBase,
    pipeline,
)
from transformers.trainer_pt_utils import LabelSmoother

import hf_bertscratch
from hf_bertscratch import fast_decode, hardware, pretraining, pretraining_arguments, run_folder
from hf_bertscratch.pretraining import (
    compute_metrics,
    main,
    parse_args,
    preprocess_logits_for_metrics,
)
from hf_bertscratch.pretraining_data import make_pack_function
from hf_bertscratch.run_folder import FINISHED_FILES
from hf_bertscratch.tokenization import train_wordpiece_tokenizer
from hf_bertscratch_base import errors
from hf_bertscratch_base.heap import heap_policy
from hf_bertscratch_base.task_table import recorded_input_columns

from conftest import (
    CORPUS,
    PRETRAIN_ONE_PROCESS,
    HangingWrite,
    assert_no_local_path,
    cut_back_to_checkpoint,
    pretrain_args,
    record_hub,
    wait_for,
    write_checkpoint,
)


def _typed(value: str) -> object:
    """A command-line value as the JSON type HfArgumentParser.parse_json_file expects."""
    if value in ("true", "false"):
        return value == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _results(output_dir: Path) -> dict:
    return json.loads((output_dir / "all_results.json").read_text())


def _assert_not_finished(output_dir: Path) -> None:
    assert not any((output_dir / name).exists() for name in FINISHED_FILES)
    assert not list(output_dir.glob("checkpoint-*")) if output_dir.exists() else True


def test_quick_start_end_to_end(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
    trained: list[tuple[int, int]],
) -> None:
    out = tmp_path / "run"
    config_file = tmp_path / "args.json"  # the JSON-file form of the same command
    parser_args = pretrain_args(
        text_file,
        tokenizer_dir,
        config_dir,
        out,
        "--max_steps",
        "6",
        "--logging_steps",
        "2",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "3",
    )
    config_file.write_text(json.dumps({k.lstrip("-"): _typed(v) for k, v in zip(parser_args[::2], parser_args[1::2])}))
    with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
        main([str(config_file)])
    assert f"Wrote {out / 'loss_curve.png'}" in caplog.text and ".staging" not in caplog.text  # paths that remain

    for name in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "trainer_state.json",
        "all_results.json",
        "loss_curve.png",
        "README.md",
        "modeling_bertscratch.py",
    ):
        assert (out / name).is_file(), name
    results = _results(out)
    assert 0.0 <= results["eval_accuracy"] <= 1.0 and results["train_effective_batch_size"] == 4
    assert results["eval_perplexity"] == pytest.approx(math.exp(results["eval_mlm_loss"]))
    assert len(trained) == 6 and results["train_tokens"] == sum(tokens for tokens, _ in trained)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6 and any("eval_accuracy" in log for log in state["log_history"])
    card = (out / "README.md").read_text()
    assert "fill-mask" in card and f"{results['eval_accuracy']:.4f}"[:4] in card
    assert "N(0, 0.02) (BERT's init)" in card  # a --config_name model keeps BERT's position init
    printed = capsys.readouterr().out
    assert "Fill-mask predictions" in printed
    # The result is read against the unigram answer of the same evaluation blocks (counted here by hand).
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert 0 < results["eval_unigram_accuracy"] < 1 and results["eval_unigram_perplexity"] > 1
    unigram = tokenizer.convert_ids_to_tokens(results["eval_unigram_token"])
    assert f"(the unigram answer {unigram!r} everywhere: {results['eval_unigram_accuracy']:.4f}" in printed
    assert not (out / ".staging").exists()
    # Masked-LM never sees a second segment: the saved type-1 row starts where type 0 was learnt, not at random.
    segments = load_file(out / "model.safetensors")["bert.embeddings.token_type_embeddings.weight"]
    assert torch.equal(segments[1], segments[0])

    fill = pipeline("fill-mask", model=str(out))
    assert len(fill("paris is the [MASK] of france .", top_k=2)) == 2
    # Through remote code, with the package made unimportable: what a user with transformers alone gets.
    code = (
        "import sys; sys.modules['hf_bertscratch'] = None\n"
        "from transformers import AutoModelForMaskedLM, pipeline\n"
        f"fill = pipeline('fill-mask', model={str(out)!r}, trust_remote_code=True)\n"
        "print(type(fill.model).__name__, fill('the cat sat on the [MASK] .', top_k=1)[0]['token_str'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("BertScratchForMaskedLM ")


def test_metrics_match_a_direct_computation() -> None:
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    labels = torch.full((3, 5), -100)
    labels[0, 1], labels[1, 3], labels[2, 0], labels[2, 4] = 4, 7, int(logits[2, 0].argmax()), 2
    reduced = preprocess_logits_for_metrics(logits, labels)
    metrics = compute_metrics(type("Pred", (), {"predictions": reduced.numpy(), "label_ids": labels.numpy()})())
    scored = labels != -100
    expected_loss = torch.nn.functional.cross_entropy(logits[scored], labels[scored]).item()
    expected_acc = (logits.argmax(-1)[scored] == labels[scored]).float().mean().item()
    assert metrics["mlm_loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert metrics["accuracy"] == pytest.approx(expected_acc) and metrics["accuracy"] >= 0.25
    assert metrics["perplexity"] == pytest.approx(math.exp(expected_loss), rel=1e-5)


def test_masked_lm_evaluation_decodes_only_the_scored_positions_and_scores_as_the_full_logits(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pretraining Trainer's evaluation of a masked LM decodes the vocabulary at each row's scored positions only
    (logits narrower than the blocks) and gives the metrics and loss that the model's full (B, T, V) logits give
    through `preprocess_logits_for_metrics` (the dense step, which `test_metrics_match_a_direct_computation` checks);
    on a padded batch too, with a row that has no scored position."""
    trainer = pretraining.build_trainer(*parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path)))
    model = trainer.model
    widths: list[tuple[int, int]] = []
    forward = model.forward

    @functools.wraps(forward)  # the Trainer reads the forward's signature for the columns it keeps
    def spy(*args: object, **kwargs: object) -> object:
        outputs = forward(*args, **kwargs)
        widths.append((outputs.logits.shape[1], kwargs["input_ids"].shape[1]))  # type: ignore[union-attr]
        return outputs

    monkeypatch.setattr(model, "forward", spy)
    sparse = trainer.evaluate()
    assert widths and all(decoded < length for decoded, length in widths)  # 15% masking: a fraction of each row
    widths.clear()
    trainer.reduce_predictions = lambda logits, labels: preprocess_logits_for_metrics(logits, labels)  # dense step
    dense = trainer.evaluate()
    assert widths and all(decoded == length for decoded, length in widths)
    assert sparse["eval_accuracy"] == dense["eval_accuracy"] > 0
    for key in ("eval_loss", "eval_mlm_loss", "eval_perplexity"):
        assert sparse[key] == pytest.approx(dense[key], rel=1e-5), key
    # a label smoother makes the loss: Trainer's step on the full logits, as without the sparse step
    widths.clear()
    trainer.reduce_predictions = preprocess_logits_for_metrics
    trainer.label_smoother = LabelSmoother(epsilon=0.1)
    smoothed = trainer.evaluate()
    assert widths and all(decoded == length for decoded, length in widths)
    assert smoothed["eval_accuracy"] == dense["eval_accuracy"]
    assert smoothed["eval_loss"] > dense["eval_loss"] * 1.01  # the smoothed loss, not the plain one
    trainer.label_smoother = None

    torch.manual_seed(0)
    input_ids = torch.randint(5, model.config.vocab_size, (3, 12))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = attention_mask[2, 4:] = 0
    labels = torch.full_like(input_ids, -100)
    labels[0, [1, 5, 6, 11]] = input_ids[0, [1, 5, 6, 11]]
    labels[1, 2] = input_ids[1, 2]  # row 2 has no scored position
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    trainer.reduce_predictions = preprocess_logits_for_metrics
    loss, reduced, _ = trainer.prediction_step(model, dict(batch), prediction_loss_only=False)
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    expected = preprocess_logits_for_metrics(full.logits, labels)
    scored = labels != -100
    assert reduced is not None and reduced.shape == expected.shape
    assert torch.equal(reduced[..., 0][scored], expected[..., 0][scored])
    torch.testing.assert_close(reduced[..., 1], expected[..., 1], rtol=1e-5, atol=1e-6)  # 0 where not scored
    assert loss is not None and loss.item() == pytest.approx(full.loss.item(), rel=1e-5)


def test_nsp_metrics_match_a_direct_computation() -> None:
    """The mlm_nsp evaluation path as the Trainer runs it: per-batch reduction of (MLM logits, NSP logits), batches of
    different lengths right-padded with -100 into one array (`EvalLoopContainer`), then the metrics: NSP accuracy
    over every pair and the MLM metrics over every labelled token equal those computed directly."""
    from transformers import EvalPrediction
    from transformers.trainer_pt_utils import EvalLoopContainer

    torch.manual_seed(0)
    predictions, label_ids = EvalLoopContainer(padding_index=-100), EvalLoopContainer(padding_index=-100)
    batches = []
    for rows, length in ((3, 5), (2, 7)):  # the second batch is longer: the first is padded to it
        mlm_logits, nsp_logits = torch.randn(rows, length, 11), torch.randn(rows, 2)
        mlm_labels = torch.where(torch.rand(rows, length) < 0.5, torch.randint(0, 11, (rows, length)), -100)
        mlm_labels[:, 1] = mlm_logits[:, 1].argmax(-1)  # some right guesses, at least one label per row
        nsp_labels = nsp_logits.argmax(-1)
        nsp_labels[0] = 1 - nsp_labels[0]  # one wrong sentence-relation guess per batch
        batches.append((mlm_logits, nsp_logits, mlm_labels, nsp_labels))
        predictions.add(preprocess_logits_for_metrics((mlm_logits, nsp_logits), (mlm_labels, nsp_labels)))
        label_ids.add((mlm_labels, nsp_labels))
    predictions.to_cpu_and_numpy(), label_ids.to_cpu_and_numpy()
    metrics = compute_metrics(EvalPrediction(predictions=predictions.get_arrays(), label_ids=label_ids.get_arrays()))

    nsp_right = torch.cat([(nsp_logits.argmax(-1) == nsp_labels) for _, nsp_logits, _, nsp_labels in batches])
    scored_logits = torch.cat([mlm_logits[mlm_labels != -100] for mlm_logits, _, mlm_labels, _ in batches])
    scored_labels = torch.cat([mlm_labels[mlm_labels != -100] for _, _, mlm_labels, _ in batches])
    expected_loss = torch.nn.functional.cross_entropy(scored_logits, scored_labels).item()
    assert metrics["nsp_accuracy"] == pytest.approx(nsp_right.float().mean().item()) == 3 / 5
    assert metrics["accuracy"] == pytest.approx((scored_logits.argmax(-1) == scored_labels).float().mean().item())
    assert metrics["mlm_loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert metrics["perplexity"] == pytest.approx(math.exp(expected_loss), rel=1e-5)


def test_resume_passes_over_a_checkpoint_cut_short_while_saving(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A disk that fills while checkpoint-6 is written leaves it with the weights alone (Trainer writes the optimizer,
    the schedule, the random state and trainer_state.json after them): naming it is refused in one line, and
    `--resume_from_checkpoint last` passes over it, saying so, and continues from checkpoint-3 to the weights of a
    run never stopped."""
    extra = ("--max_steps", "9", "--save_strategy", "steps", "--save_steps", "3", "--no_muon")
    main(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "full", *extra))

    real_save = pretraining.Trainer._save_optimizer_and_scheduler

    def full_disk(self, output_dir: str) -> None:
        if output_dir.endswith("checkpoint-6"):
            raise OSError(28, "No space left on device")
        real_save(self, output_dir)

    monkeypatch.setattr(pretraining.Trainer, "_save_optimizer_and_scheduler", full_disk)
    cut = tmp_path / "cut"
    with pytest.raises(OSError, match="No space left"):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *extra))
    monkeypatch.undo()
    incomplete = cut / "checkpoint-6"
    written = {path.name for path in incomplete.iterdir()}
    assert "model.safetensors" in written and not written & {"optimizer.pt", "scheduler.pt", "trainer_state.json"}

    with pytest.raises(ValueError) as refused:
        main(
            pretrain_args(
                text_file, tokenizer_dir, config_dir, cut, *extra, "--resume_from_checkpoint", str(incomplete)
            )
        )
    assert str(refused.value) == (
        f"--resume_from_checkpoint {str(incomplete)!r} is an incomplete checkpoint (no optimizer.pt, scheduler.pt, "
        "trainer_state.json), as a run stopped while saving it leaves it; pass a whole one, or "
        "--resume_from_checkpoint last for the newest whole one."
    )
    with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *extra, "--resume_from_checkpoint", "last"))
    passed_over = [record.getMessage() for record in caplog.records if "Passing over" in record.getMessage()]
    assert passed_over == [
        f"Passing over {incomplete}: incomplete (no optimizer.pt, scheduler.pt, trainer_state.json), as a run stopped "
        "while saving it leaves it; it stays where it is."
    ]
    assert f"Resuming from {cut / 'checkpoint-3'} at step 3" in caplog.text
    full, resumed = load_file(tmp_path / "full" / "model.safetensors"), load_file(cut / "model.safetensors")
    for name in full:
        torch.testing.assert_close(resumed[name], full[name], rtol=0, atol=1e-6, msg=name)


def test_only_the_first_process_warns_that_the_training_text_changed(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of several processes resuming a checkpoint of other training data says so once, from the first process
    (the others compare nothing), before the tokenizer is read."""
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    record = {"format": run_folder.TRAINING_DATA_FORMAT, "fingerprint": "0123", "data": "old.txt"}
    (checkpoint / run_folder.TRAINING_DATA_FILE).write_text(json.dumps(record), encoding="utf-8")
    args = parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "run"))

    class Stop(Exception):
        """Raised where the tokenizer is built: the check comes before it."""

    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(pretraining, "build_tokenizer", stop)
    said = {}
    for index in (0, 1):
        monkeypatch.setattr(type(args[2]), "process_index", property(lambda self, index=index: index))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_bertscratch"), pytest.raises(Stop):
            pretraining.build_trainer(*args, checkpoint=str(checkpoint))
        said[index] = [r.getMessage() for r in caplog.records if "training data" in r.getMessage()]
    assert said == {
        0: [
            f"The training data ({text_file}) changed since {checkpoint} was saved: the resumed run skips the batches "
            "that checkpoint trained on as if they were the same, which they are not."
        ],
        1: [],
    }


def test_resume_warns_in_one_line_when_the_training_text_changed(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each checkpoint records the training data's fingerprint, which follows a local file's bytes: resumed on the
    same text it says nothing more, also after the file was touched; on a text rewritten since (whose first batches
    the run skips as if they were the old ones), its modification time kept or not, it warns in one line naming the
    file. A record in the older form (path and modification time) is not compared: one line says so."""
    train = tmp_path / "train.txt"
    train.write_text(text_file.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "run"
    steps = ("--max_steps", "6", "--save_strategy", "steps", "--save_steps", "3", "--keep_checkpoints")
    argv = pretrain_args(train, tokenizer_dir, config_dir, out, *steps)
    main(argv)
    record = out / "checkpoint-3" / "training_data.json"
    written = record.read_text(encoding="utf-8")
    resume = [*argv, "--resume_from_checkpoint", "last"]

    def touch() -> None:
        os.utime(train, ns=(train.stat().st_atime_ns, train.stat().st_mtime_ns + 10**9))

    def rewrite_keeping_the_time() -> None:
        before = train.stat()
        train.write_text(train.read_text(encoding="utf-8").upper(), encoding="utf-8")
        os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))

    def older_record() -> None:
        record.write_text(json.dumps({"fingerprint": "0123456789abcdef", "data": str(train)}), encoding="utf-8")

    said: list[list[str]] = []
    for change in (None, touch, rewrite_keeping_the_time, older_record):
        cut_back_to_checkpoint(out, "checkpoint-3")
        record.write_text(written, encoding="utf-8")
        if change is not None:
            change()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
            main(resume)
        said.append([r.getMessage() for r in caplog.records if "training data" in r.getMessage()])
    checkpoint = out / "checkpoint-3"
    assert said == [
        [],
        [],
        [
            f"The training data ({train}) changed since {checkpoint} was saved: the resumed run skips the "
            "batches that checkpoint trained on as if they were the same, which they are not."
        ],
        [
            f"{checkpoint} recorded its training data by path and modification time, as earlier versions did: "
            "it is not compared with this run's."
        ],
    ], said


@pytest.mark.parametrize(
    "optimizer", [["--no_muon"], [], ["--muon_split_qkv"]], ids=["adamw", "muon", "muon-split-qkv"]
)
def test_resume_matches_uninterrupted_run(
    optimizer: list[str],
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra = ("--max_steps", "6", "--save_strategy", "steps", "--save_steps", "3", *optimizer)
    main(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "full", *extra))

    # Kill the second run during step 5: it leaves checkpoint-3 and nothing that looks finished.
    steps = {"n": 0}
    real_step = pretraining.Trainer.training_step

    def dying_step(self, *args, **kwargs):
        steps["n"] += 1
        if steps["n"] == 5:
            raise KeyboardInterrupt("killed")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(pretraining.Trainer, "training_step", dying_step)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *extra))
    assert sorted(p.name for p in cut.glob("checkpoint-*")) == ["checkpoint-3"]
    assert not any((cut / name).exists() for name in FINISHED_FILES)
    monkeypatch.undo()
    # The same command without --resume_from_checkpoint would start over beside checkpoint-3: refused as parsed.
    with pytest.raises(
        ValueError, match="holds checkpoint-3 of an interrupted run; pass --resume_from_checkpoint last"
    ):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *extra))
    saved_optimizer = torch.load(cut / "checkpoint-3" / "optimizer.pt", weights_only=True)
    assert sorted(saved_optimizer) == (["param_groups", "state"] if "--no_muon" in optimizer else ["adamw", "muon"])
    if "--no_muon" not in optimizer:  # with --muon_split_qkv, the QKV weights as three matrices in a group of their own
        blocks = [group["blocks"] for group in saved_optimizer["muon"]["param_groups"]]
        assert blocks == ([1, 3] if "--muon_split_qkv" in optimizer else [1])
    seen_at = {
        "checkpoint-3": json.loads((cut / "checkpoint-3" / "trainer_state.json").read_text())
    }  # pruned at the end

    main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *extra, "--resume_from_checkpoint", "true"))
    full, resumed = load_file(tmp_path / "full" / "model.safetensors"), load_file(cut / "model.safetensors")
    assert full.keys() == resumed.keys()
    for name in full:
        torch.testing.assert_close(resumed[name], full[name], rtol=0, atol=1e-6, msg=name)
    # tokens: those of the steps this process ran, and over the whole run as many as the uninterrupted one's
    seen_at = {name: state["num_input_tokens_seen"]
               for name, state in {**seen_at, "cut": json.loads((cut / "trainer_state.json").read_text())}.items()}  # fmt: skip
    assert 0 < seen_at["checkpoint-3"] < seen_at["cut"] == json.loads((tmp_path / "full" / "trainer_state.json")
                                                                      .read_text())["num_input_tokens_seen"]  # fmt: skip
    assert _results(cut)["train_tokens"] == seen_at["cut"] - seen_at["checkpoint-3"]
    assert _results(cut)["train_tokens_total"] == seen_at["cut"] == _results(tmp_path / "full")["train_tokens_total"]


def test_streaming_trains_from_local_files(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "stream"
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--streaming",
            "true",
            "--max_steps",
            "3",
            "--max_eval_samples",
            "10",
            "--shuffle_buffer_size",
            "8",
        )
    )
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and "eval_accuracy" in _results(out)


@pytest.mark.parametrize("held_out", [[], ["--max_eval_samples", "100"]])
def test_streaming_a_file_no_longer_than_its_held_out_rows_is_refused(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, held_out: list[str]
) -> None:
    """A streamed train split with no validation split gives its first --max_eval_samples rows (1000 by default) to
    validation: a file of fewer rows leaves nothing to train on, which is said so, not read as texts too short."""
    rows = len(text_file.read_text(encoding="utf-8").splitlines())
    argv = pretrain_args(
        text_file, tokenizer_dir, config_dir, tmp_path / "o", "--streaming", "true", "--max_steps", "3"
    )
    count = held_out[-1] if held_out else "1000"
    with pytest.raises(ValueError, match=rf"^The streamed train split has no row left after its first {count} rows "):
        main([*argv, *held_out])
    assert rows < 100


def test_nsp_objective_trains_pretraining_heads(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "nsp"
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--objective",
            "mlm_nsp",
            "--max_seq_length",
            "32",
            "--max_steps",
            "2",
            "--validation_split_percentage",
            "40",
        )
    )
    results = _results(out)
    assert 0.0 <= results["eval_nsp_accuracy"] <= 1.0 and "eval_perplexity" in results
    model = AutoModelForPreTraining.from_pretrained(out)
    assert type(model).__name__ == "BertScratchForPreTraining"
    segments = model.bert.embeddings.token_type_embeddings.weight
    assert not torch.equal(segments[1], segments[0])  # NSP trains both segments: nothing is copied
    assert type(AutoModelForMaskedLM.from_pretrained(out)).__name__ == "BertScratchForMaskedLM"


@pytest.mark.parametrize("objective", ["mlm", "electra"])
def test_a_transformers_bert_folder_is_continued_from_its_converted_weights(
    text_file: Path, tokenizer: BertTokenizer, tmp_path: Path, caplog: pytest.LogCaptureFixture, objective: str
) -> None:
    """Continuing a transformers BERT (bert-base-uncased on one's own text, say) pretrains BertScratch from the same
    weights, converted on load as finetune converts them, and keeps the folder's tokenizer: the saved model's
    embeddings and encoder are the BERT's (the learning rate is too small to move them) and the run says so."""
    from transformers import BertConfig, BertForMaskedLM

    from conftest import tiny_config_kwargs

    bert = BertForMaskedLM(BertConfig(**tiny_config_kwargs(len(tokenizer)), architectures=["BertForMaskedLM"]))
    bert.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    out = tmp_path / "continued"
    argv = ["--train_file", str(text_file), "--model_name_or_path", str(tmp_path / "bert"), "--output_dir", str(out)]
    extra = ["--objective", objective, "--max_seq_length", "32", "--max_steps", "2", "--learning_rate", "1e-12"]
    with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
        main([*argv, *PRETRAIN_ONE_PROCESS, *extra, "--validation_split_percentage", "40"])
    assert "converted on load" in caplog.text
    saved = load_file(out / "model.safetensors")
    words = next(tensor for name, tensor in saved.items() if name.endswith("embeddings.word_embeddings.weight"))
    torch.testing.assert_close(words, bert.bert.embeddings.word_embeddings.weight.detach(), atol=1e-6, rtol=0)
    assert json.loads((out / "config.json").read_text())["model_type"] == "bertscratch"


# What fine-tuning records in a model's config for its task alone (`finetuning.load_model`): the head's classes and
# problem type, how the sequence head reads and cuts its inputs, the columns its data was read from, and the activation
# sentence-transformers' CrossEncoder applies to its scores.
FINE_TUNED_ENTRIES = {
    "num_labels": 3,
    "id2label": {0: "neg", 1: "neutral", 2: "pos"},
    "label2id": {"neg": 0, "neutral": 1, "pos": 2},
    "problem_type": "multi_label_classification",
    "multi_label_threshold": {"neg": 0.35, "neutral": 0.5, "pos": 0.2},  # chosen per label
    "classifier_pooling": "mean",
    "long_text_max_length": 32,
    "long_text_truncation": "head+tail",
    "long_text_head_tokens": 8,
    "input_columns": {"text": "review"},
    "sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Sigmoid"},  # CrossEncoder's
}


def save_fine_tuned_classifier(path: Path, tokenizer: BertTokenizer) -> Path:
    """A tiny (multi-label) classifier with its tokenizer in `path`, its config holding what fine-tuning records for its task
    (`FINE_TUNED_ENTRIES`)."""
    from conftest import tiny_config_kwargs

    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), **FINE_TUNED_ENTRIES)
    hf_bertscratch.BertScratchForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("objective", ["mlm", "electra"])
def test_pretraining_a_fine_tuned_folder_leaves_its_task_out_of_the_pretrained_config(
    text_file: Path, tokenizer: BertTokenizer, tmp_path: Path, objective: str
) -> None:
    """Pretraining on from a fine-tuned classifier keeps its encoder, not what it recorded for its task: the
    pretrained model's config has a new model's labels and heads' settings, and records no input columns (or the
    commands that run it on a file of inputs would look for the fine-tune's)."""
    reviews, out = save_fine_tuned_classifier(tmp_path / "reviews", tokenizer), tmp_path / "continued"
    argv = ["--train_file", str(text_file), "--model_name_or_path", str(reviews), "--output_dir", str(out)]
    extra = ["--objective", objective, "--max_steps", "2", "--validation_split_percentage", "40"]
    main([*argv, *PRETRAIN_ONE_PROCESS, *extra])
    saved = json.loads((out / "config.json").read_text())
    assert recorded_input_columns(saved) == {}
    pretrained, new = AutoConfig.from_pretrained(out), hf_bertscratch.BertScratchConfig()
    for name in FINE_TUNED_ENTRIES:
        assert getattr(pretrained, name) == getattr(new, name), name


def test_whole_word_mask_masks_every_piece_of_a_word(tmp_path: Path) -> None:
    # A small vocabulary so most words split into several "##" pieces.
    tokenizer = train_wordpiece_tokenizer(CORPUS, vocab_size=60)
    pack = make_pack_function(tokenizer, "text", max_seq_length=24, with_offsets=True)
    examples = pack({"text": CORPUS * 4})
    rows = [dict(zip(examples, values, strict=True)) for values in zip(*examples.values(), strict=True)]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3, whole_word_mask=True, seed=0)
    batch = collator(rows)
    masked = batch["labels"] != -100
    assert masked.any()
    original = torch.tensor(examples["input_ids"])
    for row in range(len(rows)):
        pieces = tokenizer.convert_ids_to_tokens(original[row].tolist())
        word_start = 0
        for pos, piece in enumerate(pieces):
            if not piece.startswith("##"):
                word_start = pos
            elif not tokenizer.convert_ids_to_tokens(int(original[row, word_start])).startswith("["):
                assert masked[row, pos] == masked[row, word_start], (pieces, pos)
    assert (batch["input_ids"][masked] == tokenizer.mask_token_id).all()  # WWM replaces with [MASK] only


def test_whole_word_mask_never_joins_the_words_of_two_texts(tokenizer: BertTokenizer) -> None:
    """A text's first token starts a word of its own even where its offset starts where the previous text's last
    token ended ("a" then " b": offsets (0, 1) then (1, 2)), so whole-word masking never masks across texts."""
    pack = make_pack_function(tokenizer, "text", max_seq_length=8, with_offsets=True)
    examples = pack({"text": ["a", " the", "cat", "dog", "sat", "mat"]})
    offsets = np.array(examples["offset_mapping"])
    word_ids, _ = DataCollatorForLanguageModeling._calc_word_ids_and_prob_mask(
        offsets, np.array(examples["special_tokens_mask"])
    )
    assert word_ids.tolist() == [[-1, 1, 2, 3, 4, 5, 6, -1]]


def test_resuming_with_another_tokenizer_than_the_checkpoints_is_refused(tokenizer_dir: Path, tmp_path: Path) -> None:
    """The checkpoint's embeddings are rows of its own tokenizer's ids: --tokenizer_name may name that tokenizer on
    resume, and is refused, before any tokenisation, when it names another (of the same size or not)."""
    from hf_bertscratch.pretraining_data import build_tokenizer

    model_args, data_args, training_args = pretraining.parse_args(
        ["--output_dir", str(tmp_path), "--tokenizer_name", str(tokenizer_dir)]
    )
    same, other = tmp_path / "checkpoint-2", tmp_path / "checkpoint-4"
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(same)
    train_wordpiece_tokenizer(CORPUS, vocab_size=60).save_pretrained(other)
    resumed = build_tokenizer(model_args, None, "text", str(same), training_args)  # type: ignore[arg-type]
    assert resumed.get_vocab() == AutoTokenizer.from_pretrained(tokenizer_dir).get_vocab()
    with pytest.raises(ValueError, match=r"^--tokenizer_name '.*' is not the tokenizer of the checkpoint resumed"):
        build_tokenizer(model_args, None, "text", str(other), training_args)  # type: ignore[arg-type]


def test_packing_reads_an_empty_cell_as_an_empty_text(tokenizer: BertTokenizer) -> None:
    """A csv's empty cell or a json null arrives as None: packed as no text, as a blank line is."""
    pack = make_pack_function(tokenizer, "text", max_seq_length=8, with_offsets=False)
    assert pack({"text": [CORPUS[0], None, CORPUS[1]]}) == pack({"text": [CORPUS[0], "", CORPUS[1]]})


def test_whole_word_mask_through_main_masks_whole_words(
    text_file: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--whole_word_mask true` end to end: the Trainer hands the character offsets to the collator although the
    model's forward does not take them, they never reach the forward, and every batch trained on masks all
    WordPieces of a word together (a 60-token vocabulary splits most words into several pieces); evaluation masks
    token by token (`test_evaluation_masks_as_bert_whatever_the_training_masking`)."""
    batches: list[dict[str, torch.Tensor]] = []
    evaluated = []
    real_compute_loss = pretraining.PretrainingTrainer.compute_loss

    real_forward = hf_bertscratch.BertScratchForMaskedLM.forward

    def recording_compute_loss(self, model, inputs, *args, **kwargs):
        if model.training:
            batches.append({name: value.clone() for name, value in inputs.items()})
        return real_compute_loss(self, model, inputs, *args, **kwargs)

    @functools.wraps(real_forward)  # the Trainer reads the forward's signature for the columns it keeps
    def recording_forward(self, *args, **kwargs):
        if not self.training:
            evaluated.append(set(kwargs))
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(pretraining.PretrainingTrainer, "compute_loss", recording_compute_loss)
    monkeypatch.setattr(hf_bertscratch.BertScratchForMaskedLM, "forward", recording_forward)
    out = tmp_path / "wwm"
    main(
        [
            "--train_file",
            str(text_file),
            "--config_name",
            str(config_dir),
            "--tokenizer_vocab_size",
            "60",
            "--output_dir",
            str(out),
            *PRETRAIN_ONE_PROCESS,
            "--max_steps",
            "3",
            "--whole_word_mask",
            "true",
        ]
    )
    assert _results(out)["eval_accuracy"] >= 0.0
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert len(batches) == 3 and evaluated  # the 3 training steps, and evaluation ran
    assert all("offset_mapping" not in names for names in evaluated)
    masked_pieces = 0
    for batch in batches:
        assert "offset_mapping" not in batch and set(batch) >= {"input_ids", "labels"}
        masked = batch["labels"] != -100
        assert (batch["input_ids"][masked] == tokenizer.mask_token_id).all()  # whole words: [MASK] only
        original = torch.where(masked, batch["labels"], batch["input_ids"])
        for row in range(len(original)):
            pieces = tokenizer.convert_ids_to_tokens(original[row].tolist())
            word_start = 0
            for position, piece in enumerate(pieces):
                if not piece.startswith("##"):
                    word_start = position
                elif pieces[word_start] not in tokenizer.all_special_tokens:  # a word cut at [CLS] starts after it
                    assert masked[row, position] == masked[row, word_start], (pieces, position)
                    masked_pieces += int(masked[row, position])
    assert masked_pieces > 0  # the check saw words of several pieces masked


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "case",
    [
        "missing_file",
        "empty_file",
        "bad_column",
        "empty_after_filtering",
        "one_row",
        "numbers_column",
        "too_long",
        "no_mask_token",
        "finished_output",
    ],
)
def test_bad_input_fails_before_training(
    case: str, text_file: Path, tokenizer_dir: Path, config_dir: Path, vocab_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    train, extra = text_file, []
    if case == "missing_file":
        train, error, match = tmp_path / "nope.txt", FileNotFoundError, "nope.txt"
    elif case == "empty_file":
        train, error, match = _write(tmp_path / "empty.txt", ""), ValueError, "empty"
    elif case == "bad_column":
        train, error = _write(tmp_path / "t.csv", "sentence\nhello\n"), ValueError
        match = r"Column\(s\) \['text'\] not in the train split; it has \['sentence'\]: name yours with --text_column\."
    elif case == "empty_after_filtering":
        train, error, match = _write(tmp_path / "blank.txt", "\n \n\n"), ValueError, "no example"
    elif case == "one_row":  # one long line, say: nothing to hold out for validation
        train, error = _write(tmp_path / "one.txt", "paris is the capital of france . " * 50 + "\n"), ValueError
        match = r"^The train split has 1 row\(s\) .* too few to hold out --validation_split_percentage 20% .*--validation_file"
    elif case == "numbers_column":
        train, error = _write(tmp_path / "n.csv", "id,text\n1,2\n3,4\n"), ValueError
        match = r"--text_column 'text' of the train split holds int64 values, not text"
    elif case == "too_long":
        extra, error, match = (
            ["--max_seq_length", "128"],
            ValueError,
            "--max_seq_length 128 exceeds the model's max_position_embeddings 64",
        )
    elif case == "no_mask_token":
        BertTokenizer(vocab=str(vocab_file), mask_token=None).save_pretrained(tmp_path / "nomask")
        extra, error, match = ["--tokenizer_name", str(tmp_path / "nomask")], ValueError, "mask token"
    else:
        out.mkdir()
        _write(out / "model.safetensors", "keep me")
        error, match = ValueError, "overwrite_output_dir"
    with pytest.raises(error, match=match):
        main(pretrain_args(train, tokenizer_dir, config_dir, out, "--max_steps", "2", *extra))
    if case == "finished_output":
        assert (out / "model.safetensors").read_text() == "keep me"  # nothing already written is lost
    else:
        _assert_not_finished(out)


def test_validation_file_alone_asks_for_the_training_text(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    argv = pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "out", "--max_steps", "2")
    argv[argv.index("--train_file")] = "--validation_file"
    with pytest.raises(ValueError, match=r"^The data has no train split .*--train_file"):
        main(argv)
    _assert_not_finished(tmp_path / "out")


PROBABILITIES = (
    "mlm_probability",
    "eval_mlm_probability",
    "prediction_fraction",
    "mask_replace_prob",
    "random_replace_prob",
)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--model_size", "huge", f"model_size must be one of {sorted(hf_bertscratch.PRESETS)}, got 'huge'."),
        ("--objective", "mlm_sop", f"objective must be one of {pretraining_arguments.OBJECTIVES}, got 'mlm_sop'."),
        *(
            (f"--{name}", value, f"{name} must be in [0, 1], got {value}.")
            for name in PROBABILITIES
            for value in ("-0.1", "1.5")
        ),
        ("--nsp_random_probability", "2.0", "nsp_random_probability must be in [0, 1], got 2.0."),
        ("--prediction_fraction", "0", "prediction_fraction must be positive, got 0.0."),
        (
            "--tokenizer_vocab_size",
            "3",
            "tokenizer_vocab_size must exceed the 5 special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]), got 3.",
        ),
        ("--tokenizer_train_samples", "0", "tokenizer_train_samples must be a positive number of texts, got 0."),
    ],
)
def test_unknown_size_and_probabilities_outside_the_unit_interval_fail_before_training(
    flag: str, value: str, message: str, text_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented errors name the bad value, and come before any data, tokenizer or model is built."""

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{flag} {value} was accepted")

    monkeypatch.setattr(pretraining, "build_trainer", no_training)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(message)):
        main(
            [
                "--train_file",
                str(text_file),
                "--output_dir",
                str(out),
                *PRETRAIN_ONE_PROCESS,
                "--max_steps",
                "2",
                flag,
                value,
            ]
        )
    assert not out.exists()


@pytest.mark.parametrize(("std", "expected"), [(None, 0.05), (0.02, 0.02), (0.0, None)])
def test_new_preset_models_start_with_sinusoidal_positions(
    std: float | None, expected: float | None, tokenizer: BertTokenizer
) -> None:
    """A new --model_size model starts its position embeddings from the sinusoid table (default std 0.05, the
    README's measured choice); 0 keeps BERT's normal init."""
    model_args = pretraining.ModelArguments(
        model_size="tiny", max_position_embeddings=64, **({} if std is None else {"sinusoidal_position_std": std})
    )
    model = pretraining.build_model(model_args, pretraining.DataArguments(max_seq_length=32), tokenizer)
    assert model.config.sinusoidal_position_std == expected
    assert isinstance(model.logits_decoder, fast_decode.TiledLogitsDecoder)  # evaluation decodes in tiles
    positions = model.bert.embeddings.position_embeddings.weight
    assert positions.std().item() == pytest.approx(expected or 0.02, rel=0.1)
    assert (positions[0, 1::2] > 0).all() == (expected is not None)  # cos(0) = 1: every odd column starts positive


def test_unigram_decoder_bias_start_predicts_the_training_blocks_token_frequencies(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """--decoder_bias_start unigram (a new masked LM's default): its decoder bias is the log of each token's add-one
    frequency in the packed training blocks, the special tokens (never labels) counted as 0; so with the word
    embeddings the decoder shares at 0, its first prediction everywhere is that distribution. zero leaves BERT's 0."""

    def new_model(*extra: str) -> tuple[torch.nn.Module, list[list[int]], list[int]]:
        trainer = pretraining.build_trainer(
            *parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path, *extra))
        )
        return trainer.model, trainer.train_dataset["input_ids"], trainer.processing_class.all_special_ids

    model, blocks, special_ids = new_model("--decoder_bias_start", "unigram")
    vocab_size = model.config.vocab_size
    counts = torch.bincount(torch.tensor(blocks).flatten(), minlength=vocab_size).double()
    assert counts[special_ids].sum() > 0  # [CLS] and [SEP] are in every block, yet never predicted
    counts[special_ids] = 0
    expected = (counts + 1) / (counts.sum() + vocab_size)
    with torch.no_grad():
        model.get_input_embeddings().weight.zero_()  # the decoder's tied weights: its logits are then the bias
        logits = model(input_ids=torch.tensor(blocks[:2])).logits  # (2, T, V)
    torch.testing.assert_close(logits.softmax(-1).double(), expected.expand_as(logits), atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(new_model()[0].cls.decoder.bias, model.cls.decoder.bias)  # the default
    bert, _, _ = new_model("--decoder_bias_start", "zero")
    assert bert.config.vocab_size == vocab_size and not bert.cls.decoder.bias.any()


def test_token_counts_of_a_split_streamed_or_not() -> None:
    import datasets

    from hf_bertscratch.pretraining_data import count_tokens

    split = datasets.Dataset.from_dict({"input_ids": [[1, 2, 2], [3, 2, 4], [4, 4, 1]]})
    for data in (split, split.to_iterable_dataset()):
        assert count_tokens(data, 6).tolist() == [0, 2, 3, 1, 3, 0]
        assert count_tokens(data, 6, max_blocks=2).tolist() == [0, 1, 3, 1, 1, 0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--decoder_bias_start", "uniform"],
            r"decoder_bias_start must be one of \('zero', 'unigram'\), got 'uniform'",
        ),
        (["--decoder_bias_start", "unigram", "--objective", "electra"], "got objective 'electra'"),
    ],
)
def test_bad_decoder_bias_start_is_refused(
    flags: list[str], message: str, text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path, *flags))
    with pytest.raises(ValueError, match="whose decoder is already trained"):
        pretraining.ModelArguments(model_name_or_path="some/model", decoder_bias_start="unigram")
    # by default, a model that is not a new masked LM keeps its decoder's bias
    assert pretraining.ModelArguments(model_name_or_path="some/model").decoder_bias_start == "zero"
    assert pretraining.ModelArguments(objective="electra").decoder_bias_start == "zero"
    assert pretraining.ModelArguments(objective="mlm_nsp").decoder_bias_start == "unigram"


def test_a_new_models_heads_are_the_recipes_for_tiny_the_presets_otherwise_or_as_given(tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    from hf_bertscratch.pretraining_arguments import PRETRAINING_HEADS, new_model_config

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    heads = {
        (size, given): new_model_config(
            pretraining.ModelArguments(model_size=size, num_attention_heads=given), tokenizer
        ).num_attention_heads
        for size, given in (("tiny", None), ("mini", None), ("small", None), ("tiny", 2), ("mini", 8))
    }
    assert PRETRAINING_HEADS["tiny"] == 4  # 4 heads of 32, not BERT-Tiny's 2 of 64
    assert heads == {("tiny", None): 4, ("mini", None): 4, ("small", None): 8, ("tiny", 2): 2, ("mini", 8): 8}
    assert pretraining.ModelArguments(model_name_or_path="some/model").num_attention_heads is None  # its config's
    with pytest.raises(ValueError, match="positive divisor of tiny's hidden size 128, got 3"):
        pretraining.ModelArguments(num_attention_heads=3)
    with pytest.raises(ValueError, match="got num_attention_heads=4 with --config_name"):
        pretraining.ModelArguments(num_attention_heads=4, config_name="some/config")


@pytest.mark.parametrize("flag", ["config_name", "tokenizer_name"])
def test_a_config_or_tokenizer_path_that_is_not_there_is_refused_as_it_is_parsed(flag: str) -> None:
    """Past the front door too: the flag and its value in one line, before a tokenizer is trained or a model built,
    not transformers' "Repo id must use alphanumeric chars" once the data has loaded."""
    kind = "Config" if flag == "config_name" else "Tokenizer"
    with pytest.raises(FileNotFoundError, match=re.escape(f"{kind} './nowhere' (--{flag}) does not exist: expected")):
        pretraining.ModelArguments(**{flag: "./nowhere"})


def test_a_config_name_of_bert_is_made_bertscratchs_and_of_gpt2_refused(tmp_path: Path, tokenizer_dir: Path) -> None:
    """A --config_name of transformers' BERT gives a BertScratch model of its sizes (not transformers' own BERT); a
    GPT-2 config is refused in the front door's line, naming the model_type found and those taken."""
    from transformers import AutoTokenizer, BertConfig, GPT2Config

    from hf_bertscratch.pretraining_arguments import new_model_config

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    BertConfig(hidden_size=48, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64).save_pretrained(
        tmp_path / "bert"
    )
    config = new_model_config(pretraining.ModelArguments(config_name=str(tmp_path / "bert")), tokenizer)
    assert type(config) is hf_bertscratch.BertScratchConfig
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (48, 1, 64)
    assert type(AutoModelForMaskedLM.from_config(config)) is hf_bertscratch.BertScratchForMaskedLM
    GPT2Config(n_embd=32, n_layer=1, n_head=2, architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path / "gpt2")
    gpt2 = str(tmp_path / "gpt2")
    with pytest.raises(ValueError) as refused:
        new_model_config(pretraining.ModelArguments(config_name=gpt2), tokenizer)
    assert str(refused.value) == (
        f"--config_name {gpt2!r} holds a config of model_type 'gpt2' (GPT2LMHeadModel); expected 'bertscratch', or "
        "transformers' 'bert' or 'electra' (an ELECTRA discriminator), which become BertScratch with the same sizes."
    )


def test_resuming_a_fine_tunes_checkpoint_is_refused_naming_both_model_classes(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """A fine-tune's checkpoint resumed in pretraining names the classifier it holds and the masked LM this run
    trains, before its weights load (where they would fail on a size mismatch, or load half)."""
    out = tmp_path / "out"
    checkpoint = write_checkpoint(out / "checkpoint-4", step=4)
    (checkpoint / "config.json").write_text(json.dumps({"architectures": ["BertScratchForSequenceClassification"]}))
    with pytest.raises(ValueError) as refused:
        main(pretrain_args(text_file, tokenizer_dir, config_dir, out, "--resume_from_checkpoint", "last"))
    assert str(refused.value) == (
        f"--resume_from_checkpoint {checkpoint} holds a BertScratchForSequenceClassification and this run trains a "
        f"BertScratchForMaskedLM: resume a checkpoint of a run like this one, or start from that model with "
        f"--model_name_or_path {checkpoint} and another --output_dir."
    )


def test_negative_sinusoidal_position_std_is_refused(text_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sinusoidal_position_std must be >= 0 .* got -0.1"):
        main(
            [
                "--train_file",
                str(text_file),
                "--model_size",
                "tiny",
                "--sinusoidal_position_std",
                "-0.1",
                "--output_dir",
                str(tmp_path / "out"),
                *PRETRAIN_ONE_PROCESS,
            ]
        )


def test_help_and_parse_errors(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    short = capsys.readouterr().out
    assert "--max_train_minutes" in short and "--mlm_probability" not in short  # a first run's flags
    with pytest.raises(SystemExit):
        parse_args(["--help_all"])
    assert "--mlm_probability" in capsys.readouterr().out
    with pytest.raises(ValueError, match="objective"):
        parse_args(["--train_file", "x.txt", "--objective", "clm", "--output_dir", "o"])
    with pytest.raises(ValueError, match="max_steps"):  # a budget, the default, ends a streamed run too; none does not
        parse_args(["--train_file", "x.txt", "--streaming", "true", "--output_dir", "o", "--max_train_minutes", "0"])


_DDP_HELPER = """
import hashlib, json, sys, torch
import torch.distributed as dist
from hf_bertscratch import pretraining

real_save = pretraining.save_outputs

def save_outputs(trainer, metrics, *args):
    real_save(trainer, metrics, *args)
    rank = dist.get_rank()
    torch.save({k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}, f"{sys.argv[1]}/rank{rank}.pt")
    json.dump({"steps": trainer.state.global_step, "train_blocks": len(trainer.train_dataset),
               "world_size": dist.get_world_size(), "backend": dist.get_backend(),
               "vocab": hashlib.sha256(json.dumps(sorted(trainer.processing_class.get_vocab().items())).encode()).hexdigest()},
              open(f"{sys.argv[1]}/rank{rank}.json", "w"))

pretraining.save_outputs = save_outputs
pretraining.main(sys.argv[2:])
"""


def _readme_quick_start_argv() -> list[str]:
    """The arguments of the README's quick-start command (the first `bertscratch pretrain` call under "Quick start")."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    words = shlex.split(block.replace("\\\n", " "))
    start = next(i for i in range(len(words) - 1) if words[i : i + 2] == ["bertscratch", "pretrain"])
    return words[start + 2 :]


def test_readme_quick_start_is_the_defaults_and_the_shipped_config_spells_them_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README quick start names only its output folder; scripts/configs/pretrain_wikitext2.json gives the same run
    with every recipe argument written out."""
    monkeypatch.chdir(tmp_path)  # its relative output folder: not a quick start a user already ran in the checkout
    argv = _readme_quick_start_argv()
    assert argv[0] == "--output_dir" and len(argv) == 2
    config = Path(__file__).parents[1] / "scripts" / "configs" / "pretrain_wikitext2.json"
    from_file, from_readme = parse_args([str(config)]), parse_args(argv)
    assert from_file[:2] == from_readme[:2]  # model and data arguments
    ignore = {"logging_dir"}  # derived from the run's start time
    training = [{k: v for k, v in args.to_dict().items() if k not in ignore} for args in (from_file[2], from_readme[2])]
    assert training[0] == training[1]
    assert from_readme[2].max_train_minutes == pretraining_arguments.DEFAULT_BUDGET_MINUTES
    assert (from_readme[1].dataset_name, from_readme[1].data_dir) == ("wikitext", None)  # the shipped copy, offline


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["mlm", "electra"])
def test_torchrun_two_processes_keep_ranks_identical(
    text_file: Path, config_dir: Path, tmp_path: Path, objective: str
) -> None:
    """Ranks end with the same weights and the same tokenizer, which the run trains (rank 0 learns it, then sends
    it: two processes each training one would number tokens of equal rank differently). ELECTRA's pair too, through
    its masked-LM start and the switch to replaced-token detection (DDP runs without its unused-parameter search, so a
    parameter without a gradient in either phase would stop the run)."""
    helper = _write(tmp_path / "ddp_helper.py", _DDP_HELPER)
    out = tmp_path / "ddp"
    arguments = [
        "--train_file",
        str(text_file),
        "--tokenizer_vocab_size",
        "120",
        "--config_name",
        str(config_dir),
        "--output_dir",
        str(out),
        *PRETRAIN_ONE_PROCESS,
        "--num_train_epochs",
        "1",
        "--objective",
        objective,
    ]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--standalone",
        str(helper),
        str(tmp_path),
        *arguments,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    # Its own process group (start_new_session), so a hang kills torchrun's workers too rather than leaving them behind.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as process:
        try:
            _, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert process.returncode == 0, stderr[-3000:]
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert infos[0] == infos[1] and infos[0]["world_size"] == 2 and infos[0]["backend"] == "gloo"
    # Effective batch = 2 processes x 4 per device: one epoch takes ceil(blocks / 8) optimizer steps.
    assert infos[0]["steps"] == math.ceil(infos[0]["train_blocks"] / 8)
    assert _results(out)["train_effective_batch_size"] == 8 and _results(out)["world_size"] == 2
    rank0, rank1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
    saved_vocab = json.dumps(sorted(AutoTokenizer.from_pretrained(out).get_vocab().items())).encode()
    assert hashlib.sha256(saved_vocab).hexdigest() == infos[0]["vocab"]
    saved = load_file(out / "model.safetensors")  # what rank 0 wrote is what both ranks hold
    prefix = "discriminator." if objective == "electra" else ""  # the pair's discriminator is the saved folder
    for name in saved:
        held = rank0[prefix + name]
        if name.endswith("token_type_embeddings.weight"):  # saved with segment 1 copied from the trained segment 0
            held = held[:1].expand_as(held)
        assert torch.equal(saved[name], held), name
    if objective == "electra":
        # a masked-LM step and 2 or more after it: DDP notices a parameter left without a gradient in the next step
        assert infos[0]["steps"] >= 3


class _TimedPopen(subprocess.Popen):
    """The launcher's `Popen`, whose wait for the launched processes fails a test that hangs."""

    def wait(self, timeout: float | None = 240) -> int:
        return super().wait(timeout)


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["kill", "ctrl-c"])
def test_a_stop_signal_ends_the_command_and_the_processes_it_launched_with_one_line(
    signum: int, to_group: bool, text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """`kill` of `bertscratch pretrain` (SIGTERM to the command alone, as a job scheduler or `timeout` sends it) and
    Ctrl-C (SIGINT to the terminal's job: the command alone, since torchrun's agent and the training processes it
    starts are each started with setsid, detached from the terminal's process group) stop the two training processes
    it launched too, rather than leaving them training into the output folder; the command ends with the signal's exit
    status and one line naming the step and the whole checkpoint a rerun continues from, and no traceback of any
    process."""
    out = tmp_path / "run"
    argv = pretrain_args(text_file, tokenizer_dir, config_dir, out, "--num_processes", "2", "--max_steps", "100000")
    argv += ["--save_strategy", "steps", "--save_steps", "2"]
    env = {key: value for key, value in os.environ.items() if key not in ("WORLD_SIZE", "OMP_NUM_THREADS")}
    env.update(TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES="")
    script = Path(__file__).parents[1] / "scripts" / "pretrain.py"
    # stderr in a file: processes left behind would hold a pipe open.
    with (
        (tmp_path / "stderr.txt").open("w") as log,
        subprocess.Popen([sys.executable, str(script), *argv], stderr=log, env=env, start_new_session=True) as process,
        _ending_with_no_process_left(process, out),
    ):
        deadline = time.monotonic() + 240
        while not (out / "checkpoint-2").is_dir() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (out / "checkpoint-2").is_dir(), "the run saved no checkpoint"
        if to_group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
    assert process.returncode == 128 + signum
    stderr = (tmp_path / "stderr.txt").read_text()
    for noise in ("Traceback", "KeyboardInterrupt", "Exception ignored", "error"):
        assert noise not in stderr, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines() if "stopped" in line]
    stop = re.fullmatch(
        rf"scripts/pretrain.py: stopped at step (\d+); the last checkpoint is {re.escape(str(out))}/checkpoint-(\d+): "
        "rerun with --resume_from_checkpoint last to continue",
        line,
    )
    assert stop and int(stop[1]) >= int(stop[2]) >= 2, line
    assert (out / f"checkpoint-{stop[2]}" / "trainer_state.json").is_file()  # written last: the checkpoint is whole
    assert not (out / "model.safetensors").exists()


@pytest.mark.parametrize("signum, processes", [(signal.SIGTERM, 1), (signal.SIGINT, 2)], ids=["kill", "ctrl-c"])
def test_a_second_stop_signal_while_a_checkpoint_is_written_stops_at_once(
    signum: int, processes: int, text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """A stop signal while checkpoint-4 is written (a disk that does not answer) makes `python scripts/pretrain.py`
    say at once, in one line, that it stops once that checkpoint is whole and how to stop now; the same signal again
    stops it at once: one line naming checkpoint-2, the last whole one, and the signal's status. So for `kill` of a
    one-process run and for Ctrl-C of a run in two processes (the command's, which reach its training processes
    through torchrun's agent), each line once and no process left behind."""
    out = tmp_path / "run"
    hang = HangingWrite(tmp_path, out / "checkpoint-4" / "trainer_state.json")
    argv = pretrain_args(text_file, tokenizer_dir, config_dir, out, "--num_processes", str(processes))
    argv += ["--max_steps", "100000", "--save_strategy", "steps", "--save_steps", "2"]
    env = {key: value for key, value in os.environ.items() if key not in ("WORLD_SIZE", "OMP_NUM_THREADS")}
    env.update(TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES="", **hang.env)
    script = Path(__file__).parents[1] / "scripts" / "pretrain.py"

    def signalled() -> None:
        if processes == 2:
            os.killpg(process.pid, signum)  # Ctrl-C: the terminal signals the whole job
        else:
            process.send_signal(signum)

    with (
        (tmp_path / "stderr.txt").open("w") as log,
        subprocess.Popen(
            [sys.executable, str(script), *argv], stdout=subprocess.DEVNULL, stderr=log, env=env, start_new_session=True
        ) as process,
        _ending_with_no_process_left(process, out),
    ):
        wait_for(hang.started, process)
        signalled()
        wait_for(lambda: "again" in (tmp_path / "stderr.txt").read_text(), process, seconds=30)
        time.sleep(1)  # any second copy of the first signal has arrived
        assert process.poll() is None, "it stopped before the checkpoint was whole"
        signalled()
    assert process.returncode == 128 + signum
    stderr = (tmp_path / "stderr.txt").read_text()
    for noise in ("Traceback", "KeyboardInterrupt", "Exception ignored", "error"):
        assert noise not in stderr, stderr[-3000:]
    again = "press Ctrl-C again" if signum == signal.SIGINT else "send SIGTERM again"
    (notice,) = [line for line in stderr.splitlines() if " again " in line]
    assert notice == (
        f"scripts/pretrain.py: stopping once {out / 'checkpoint-4'} is written; {again} to stop now, leaving it "
        "incomplete: --resume_from_checkpoint last passes over it"
    )
    (line,) = [line for line in stderr.splitlines() if "stopped" in line]
    assert line == (
        f"scripts/pretrain.py: stopped at step 4; the last checkpoint is {out / 'checkpoint-2'}: rerun with "
        "--resume_from_checkpoint last to continue"
    )
    assert not (out / "checkpoint-4" / "trainer_state.json").exists()


@pytest.mark.parametrize("during", ["step", "save", "first-step"])
def test_ctrl_c_in_one_process_ends_with_one_line_and_never_leaves_half_a_checkpoint(
    during: str,
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """SIGINT in a one-process run ends the command with status 130 and one line: the step it stopped at and the
    checkpoint a rerun continues from, or that there is none yet. One that comes while a checkpoint is written stops
    the run once that checkpoint is whole (trainer_state.json, written last, is there)."""
    from hf_bertscratch_cli.dispatch import run_command

    out = tmp_path / "out"
    save_steps = "100" if during == "first-step" else "3"
    argv = pretrain_args(text_file, tokenizer_dir, config_dir, out, "--max_steps", "50")
    argv += ["--save_strategy", "steps", "--save_steps", save_steps]
    real_step, real_save = pretraining.Trainer.training_step, pretraining.Trainer._save_rng_state

    def interrupted_step(self, *args, **kwargs):
        if self.state.global_step == (5 if during == "step" else 1):
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(self, *args, **kwargs)

    def interrupted_save(self, *args, **kwargs):
        if self.state.global_step == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return real_save(self, *args, **kwargs)

    if during == "save":
        monkeypatch.setattr(pretraining.Trainer, "_save_rng_state", interrupted_save)
    else:
        monkeypatch.setattr(pretraining.Trainer, "training_step", interrupted_step)
    with pytest.raises(SystemExit) as stopped:
        run_command("pretrain", argv)
    assert stopped.value.code == 130
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "stopped" in line or "interrupted" in line]
    checkpoint = out / ("checkpoint-3" if during == "step" else "checkpoint-6")
    expected = {
        "step": f"stopped at step 5; the last checkpoint is {checkpoint}: "
        "rerun with --resume_from_checkpoint last to continue",
        "save": f"stopped at step 6; the last checkpoint is {checkpoint}: "
        "rerun with --resume_from_checkpoint last to continue",
        "first-step": "stopped at step 1, before its first checkpoint (--save_steps 100): nothing to resume from",
    }[during]
    assert line == f"bertscratch pretrain: {expected}"
    if during != "first-step":
        assert (checkpoint / "trainer_state.json").is_file() and (checkpoint / "rng_state.pth").is_file()
    assert not any((out / name).exists() for name in FINISHED_FILES)


@contextlib.contextmanager
def _ending_with_no_process_left(process: subprocess.Popen, output_dir: Path) -> Iterator[None]:
    """After the block, wait for `process` to end, and for the processes training into `output_dir` to end with it
    (failing if they outlive it by a minute); kill any left, whatever happened."""
    try:
        yield
        process.wait(timeout=60)
        deadline = time.monotonic() + 60
        while _processes_writing(output_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _processes_writing(output_dir), "training processes outlived the command"
    finally:
        for pid in _processes_writing(output_dir):  # torchrun's workers run outside its process group (setsid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _processes_writing(output_dir: Path) -> list[int]:
    """The processes whose command line names `output_dir` (Linux's /proc)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(output_dir).encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:  # ended meanwhile
            pass
    return pids


def test_num_processes_auto_launches_two_processes_that_share_the_budget(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README quick start's path: `--num_processes auto` (the default) on a CPU with 2 cores relaunches the command
    under torch.distributed.run with two single-thread processes, and the time budget, whose clock is the maximum
    over the ranks, stops both at the same step (a rank that stopped alone would leave the other hanging in DDP)."""
    monkeypatch.setattr(pretraining.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(pretraining.torch.cuda, "is_available", lambda: False)
    for name in ("WORLD_SIZE", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the processes it launches: gloo on the CPU, GPU or none
    monkeypatch.setattr(pretraining.subprocess, "Popen", _TimedPopen)  # a hang fails
    assert pretraining.resolve_num_processes(parse_args(["--output_dir", "unused"])[2]) == 2
    out = tmp_path / "auto"
    main(
        pretrain_args(
            text_file, tokenizer_dir, config_dir, out, "--num_processes", "auto", "--max_train_minutes", "0.05"
        )
    )
    results = _results(out)
    assert results["world_size"] == 2 and results["train_effective_batch_size"] == 2 * 4
    assert results["train_budget_spent_minutes"] >= 0.05  # the budget stopped it (where: the real-clock test)
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] < pretraining_arguments.BUDGET_STEP_CAP
    assert load_file(out / "model.safetensors")  # rank 0 saved the model


def test_an_error_in_the_launched_processes_is_one_line(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    """An error both launched processes raise (here: the tasks' text from a data folder that is not there) ends the
    command with its line once on stderr, and neither their tracebacks nor torchrun's report of the failed children."""
    for name in ("WORLD_SIZE", "OMP_NUM_THREADS", "BERTSCRATCH_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(pretraining.subprocess, "Popen", _TimedPopen)  # a hang fails
    argv = ["--task_text", "sst2", "--data_dir", str(tmp_path / "nowhere"), "--output_dir", str(tmp_path / "out")]
    argv += ["--tokenizer_name", str(tokenizer_dir), "--config_name", str(config_dir), "--num_processes", "2"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ChildFailedError" not in err and "exitcode" not in err, err[-3000:]
    (line,) = [line for line in err.splitlines() if "error" in line.lower()]
    assert line.startswith("bertscratch pretrain: error: ") and "nowhere" in line


def test_launched_processes_write_their_error_lines_and_the_launcher_reads_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(errors.LAUNCHED_ERRORS_ENV, str(tmp_path))
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)

    def fail() -> None:
        raise ValueError("bad\n value")

    def fail_to_write() -> None:
        raise OSError("disk")

    for rank, failing in (("1", fail), ("0", fail), ("2", fail_to_write)):
        monkeypatch.setenv("RANK", rank)
        with pytest.raises(SystemExit):
            errors.run_launched("pretrain", failing)
    assert errors.launched_errors(tmp_path) == [
        "bertscratch pretrain: error: ValueError: bad value",
        "bertscratch pretrain: error: OSError: disk",
    ]
    monkeypatch.setenv(errors.DEBUG_ENV, "1")  # the traceback, as the command's own errors
    with pytest.raises(ValueError, match="bad"):
        errors.run_launched("pretrain", fail)


def test_a_launched_process_stopped_by_a_signal_writes_its_stop_line_and_exits_with_the_signals_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(errors.LAUNCHED_ERRORS_ENV, str(tmp_path))
    monkeypatch.setenv(errors.DEBUG_ENV, "1")  # a stop is no error: no traceback even so
    monkeypatch.setenv("RANK", "1")

    def stopped() -> None:
        raise errors.Stopped("stopped at step 3; nothing to resume from", signal.SIGTERM)

    def interrupted() -> None:  # before training: no line of its own (the launcher says it)
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exited:
        errors.run_launched("pretrain", stopped)
    assert exited.value.code == 128 + signal.SIGTERM
    assert errors.launched_errors(tmp_path) == ["bertscratch pretrain: stopped at step 3; nothing to resume from"]
    (tmp_path / "rank-1.txt").unlink()
    with pytest.raises(SystemExit) as exited:
        errors.run_launched("pretrain", interrupted)
    assert exited.value.code == 130 and errors.launched_errors(tmp_path) == []


def test_the_lines_of_a_run_started_as_a_script_name_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python scripts/pretrain.py` names itself in its lines, and the processes it launches (which inherit its
    environment) name it in theirs: the command the user ran, not `bertscratch pretrain`."""
    from hf_bertscratch.run_folder import finish_saving_notice
    from hf_bertscratch_base import PROGRAM_ENV, run_as_script

    assert errors.error_line("pretrain", ValueError("bad")) == "bertscratch pretrain: error: ValueError: bad"
    monkeypatch.setenv(PROGRAM_ENV, "")  # put back as it was afterwards
    run_as_script(str(Path(__file__).parents[1] / "scripts" / "pretrain.py"))
    monkeypatch.setenv(errors.LAUNCHED_ERRORS_ENV, str(tmp_path))
    monkeypatch.setenv("RANK", "0")

    def stopped() -> None:
        raise errors.Stopped("stopped at step 3; nothing to resume from", signal.SIGTERM)

    with pytest.raises(SystemExit):
        errors.run_launched("pretrain", stopped)
    assert errors.launched_errors(tmp_path) == ["scripts/pretrain.py: stopped at step 3; nothing to resume from"]
    assert errors.error_line("pretrain", ValueError("bad")) == "scripts/pretrain.py: error: ValueError: bad"
    notice = finish_saving_notice("pretrain", "out/checkpoint-4", signal.SIGINT)
    assert notice.startswith("scripts/pretrain.py: stopping once out/checkpoint-4 is written; press Ctrl-C again")


def test_a_script_names_itself_in_its_own_commands_lines_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another command started under a script's environment (a child process, or the variable exported in a shell)
    names itself as `bertscratch COMMAND`, not as the script."""
    from hf_bertscratch_base import PROGRAM_ENV, program_name, run_as_script

    monkeypatch.setenv(PROGRAM_ENV, "")  # put back as it was afterwards
    run_as_script(str(Path(__file__).parents[1] / "scripts" / "finetune.py"))
    assert program_name("finetune") == "scripts/finetune.py"
    assert program_name("classify") == "bertscratch classify"
    assert program_name("pretrain") == "bertscratch pretrain"
    assert errors.error_line("evaluate", ValueError("bad")) == "bertscratch evaluate: error: ValueError: bad"


def test_a_launched_process_stopped_while_it_starts_exits_quietly(tmp_path: Path) -> None:
    """Ctrl-C while a launched process still imports torch (the first seconds) ends it with status 130 and no
    traceback, as later on; once started it runs the command's main with its arguments."""
    (tmp_path / "slow_start.py").write_text("raise KeyboardInterrupt\n")
    (tmp_path / "started.py").write_text(
        "import sys\ndef main(argv):\n    print('main', argv, sys.argv[1:])\n    raise ValueError('bad value')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[1])])}
    env.update({errors.LAUNCHED_ERRORS_ENV: str(tmp_path)})
    env.pop(errors.DEBUG_ENV, None)
    launched = [sys.executable, "-m", "hf_bertscratch_base.launched", "pretrain"]
    stopped = subprocess.run([*launched, "slow_start"], env=env, capture_output=True, text=True, timeout=60)
    assert (stopped.returncode, stopped.stderr) == (130, "")
    failed = subprocess.run([*launched, "started", "--x", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and failed.stdout == "main ['--x', '1'] ['--x', '1']\n", failed.stderr
    assert errors.launched_errors(tmp_path) == ["bertscratch pretrain: error: ValueError: bad value"]


def _collator_rows(tokenizer: PreTrainedTokenizerBase, text: list[str], max_seq_length: int) -> list[dict]:
    """The texts packed into blocks as pretraining packs them, as the rows a masking collator is handed."""
    examples = make_pack_function(tokenizer, "text", max_seq_length=max_seq_length, with_offsets=False)({"text": text})
    return [
        {"input_ids": ids, "special_tokens_mask": mask}
        for ids, mask in zip(examples["input_ids"], examples["special_tokens_mask"], strict=True)
    ]


def test_masks_depend_only_on_the_batch_and_epoch(tokenizer_dir: Path) -> None:
    """The cause of exact resume: a batch is masked the same whatever was collated before it (on every transformers
    5.x; 5.24's collator re-seeds a generator it did not create itself)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    rows = _collator_rows(tokenizer, CORPUS, max_seq_length=16)
    first, second = rows[:4], rows[4:8]
    collator = pretraining.SeededMaskingCollator(tokenizer, mlm_probability=0.5, seed=3)
    alone = collator([dict(row) for row in first])
    collator([dict(row) for row in second])
    again = collator([dict(row) for row in first])
    assert torch.equal(alone["labels"], again["labels"]) and torch.equal(alone["input_ids"], again["input_ids"])
    collator.epoch = 1
    assert not torch.equal(collator([dict(row) for row in first])["labels"], alone["labels"])  # masks stay dynamic


def test_a_prediction_fraction_predicts_a_subset_of_the_same_corruption(tokenizer_dir: Path) -> None:
    """Below 1 the input is corrupted exactly as with every selected token predicted (the same draws), and the labels
    keep the original token at a random subset of about that fraction of the selected positions, -100 elsewhere."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    rows = _collator_rows(tokenizer, CORPUS * 8, max_seq_length=32)
    every = pretraining.SeededMaskingCollator(tokenizer, mlm_probability=0.5, seed=3)([dict(row) for row in rows])
    half_collator = pretraining.SeededMaskingCollator(tokenizer, mlm_probability=0.5, seed=3, prediction_fraction=0.5)
    half = half_collator([dict(row) for row in rows])
    assert torch.equal(half["input_ids"], every["input_ids"])
    selected, predicted = every["labels"] != -100, half["labels"] != -100
    assert not (predicted & ~selected).any()  # only selected positions are predicted, with their original token
    assert torch.equal(half["labels"][predicted], every["labels"][predicted])
    share = predicted.sum().item() / selected.sum().item()
    assert selected.sum().item() > 200 and 0.4 < share < 0.6, share
    assert torch.equal(half_collator([dict(row) for row in rows])["labels"], half["labels"])  # seeded by the batch


def test_evaluation_masks_as_bert_whatever_the_training_masking(tokenizer_dir: Path, text_file: Path) -> None:
    """A run trained with whole-word, [MASK]-only masking of half the tokens, predicting half of them, is evaluated
    as every other run: 15% of the tokens one by one, BERT's 80/10/10 mix (some scored positions keep a real token),
    every one predicted."""
    from hf_bertscratch.pretraining_data import masking_collators

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    flags = ["--train_file", str(text_file), "--output_dir", "unused", "--mlm_probability", "0.5", "--whole_word_mask"]
    flags += ["--mask_replace_prob", "1", "--random_replace_prob", "0", "--prediction_fraction", "0.5"]
    _, data_args, _ = parse_args(flags)
    train, evaluation = masking_collators(tokenizer, data_args, seed=3)
    assert (train.whole_word_mask, train.mask_replace_prob, train.prediction_fraction) == (True, 1.0, 0.5)
    rows = _collator_rows(tokenizer, CORPUS * 8, max_seq_length=32)
    batch = evaluation([dict(row) for row in rows])
    scored = batch["labels"] != -100
    tokens = batch["input_ids"].numel() - sum(int(row["special_tokens_mask"].count(1)) for row in rows)
    assert 0.1 < scored.sum().item() / tokens < 0.2
    masked = batch["input_ids"][scored] == tokenizer.mask_token_id
    assert 0.7 < masked.float().mean().item() < 0.9  # the rest: random or kept tokens, as BERT evaluates


def test_the_masking_rate_goes_linearly_to_its_end_over_the_run(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--mlm_probability_end`: the share of tokens masked in the training batches falls from --mlm_probability to
    the end rate as the steps go (the dataloader collates a batch ahead, so a batch lags the schedule by a step);
    evaluation stays at 15%. Batch-loading workers, which hold their own collator, are refused."""
    shares: list[tuple[bool, float]] = []
    real_compute_loss = pretraining.PretrainingTrainer.compute_loss

    def recording_compute_loss(self, model, inputs, *args, **kwargs):
        shares.append((model.training, (inputs["labels"] != -100).float().mean().item()))
        return real_compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(pretraining.PretrainingTrainer, "compute_loss", recording_compute_loss)
    rates = ("--mlm_probability", "0.6", "--mlm_probability_end", "0.1", "--short_seq_fraction", "0")
    main(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "out", "--max_steps", "10", *rates))
    trained = [share for training, share in shares if training]
    assert len(trained) == 10
    assert trained[0] > 0.45 and trained[-1] < 0.25, trained
    assert sum(trained[:3]) > sum(trained[-3:]) + 0.6, trained
    assert all(0.05 < share < 0.3 for training, share in shares if not training)  # evaluation: 15%
    with pytest.raises(ValueError, match="mlm_probability_end=0.1 needs --dataloader_num_workers 0, got 2"):
        parse_args(
            pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "w", *rates, "--dataloader_num_workers", "2")
        )


def test_budget_schedule_shapes() -> None:
    from hf_bertscratch.budget import budget_lr_lambda

    linear = budget_lr_lambda("linear", 0.2)
    assert [linear(x) for x in (0.0, 0.1, 0.2, 0.6, 1.0)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
    wsd = budget_lr_lambda("warmup_stable_decay", 0.1)
    assert [wsd(x) for x in (0.05, 0.5, 0.8, 0.9, 1.0)] == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.0])
    cosine = budget_lr_lambda("cosine", 0.0)
    assert [cosine(x) for x in (0.0, 0.5, 1.0)] == pytest.approx([1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="lr_scheduler_type must be one of .* got 'polynomial'"):
        budget_lr_lambda("polynomial", 0.1)
    with pytest.raises(ValueError, match="fraction of the budget in \\[0, 1\\), got 300"):
        budget_lr_lambda("linear", 300)
    # warmup-stable-decay's cooldown from --lr_scheduler_kwargs: its length a fraction of the budget, its shape, floor
    root = budget_lr_lambda("warmup_stable_decay", 0.1, {"num_decay_steps": 0.4, "decay_type": "1-sqrt"})
    assert [root(x) for x in (0.5, 0.6, 0.7, 0.9, 1.0)] == pytest.approx([1.0, 1.0, 0.5, 1 - 0.75**0.5, 0.0])
    floored = budget_lr_lambda("warmup_stable_decay", 0.1, {"decay_type": "cosine", "min_lr_ratio": 0.1})
    assert [floored(x) for x in (0.8, 0.9, 1.0)] == pytest.approx([1.0, 0.55, 0.1])
    for schedule, kwargs, error in [
        (
            "linear",
            {"num_decay_steps": 0.4},
            "apply to warmup_stable_decay only, got {'num_decay_steps': 0.4} with 'linear'",
        ),
        ("warmup_stable_decay", {"warmup_type": "cosine"}, "may set .* got \\['warmup_type'\\]"),
        ("warmup_stable_decay", {"num_decay_steps": 400}, "a fraction of the budget below 1 .* got 400"),
        ("warmup_stable_decay", {"num_decay_steps": 0.95}, "fits after the warm-up \\(0.1\\), got 0.95"),
        ("warmup_stable_decay", {"num_decay_steps": -0.2}, "positive step count or a fraction below 1, got -0.2"),
        ("warmup_stable_decay", {"decay_type": "exp"}, "decay_type must be one of .* got 'exp'"),
        ("warmup_stable_decay", {"min_lr_ratio": 1.5}, "min_lr_ratio must be in \\[0, 1\\), got 1.5"),
        ("warmup_stable_decay", "decay", "must be a JSON object .* got 'decay'"),
    ]:
        with pytest.raises(ValueError, match=error):
            budget_lr_lambda(schedule, 0.1, kwargs)


def test_a_bad_cooldown_fails_before_training(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """--lr_scheduler_kwargs is checked when the arguments are parsed, with a step count and with a time budget."""
    for length, cooldown, error in [
        (["--max_steps", "20"], '{"decay_type": "exp"}', "decay_type must be one of .* got 'exp'"),
        (["--max_train_minutes", "1"], '{"num_decay_steps": 400}', "a fraction of the budget below 1 .* got 400"),
        (
            ["--max_train_minutes", "1", "--lr_scheduler_type", "cosine"],
            '{"num_cycles": 2}',
            "warmup_stable_decay only",
        ),
    ]:
        with pytest.raises(ValueError, match=error):
            parse_args(
                pretrain_args(
                    text_file, tokenizer_dir, config_dir, tmp_path / "w", *length, "--lr_scheduler_kwargs", cooldown
                )
            )


def test_time_budget_stops_at_the_budget_on_the_real_clock(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real clock the run goes on while the budget lasts and stops at the first step that spends it.

    The budget's own reading after every step is recorded, so nothing here assumes how fast the machine is."""
    from hf_bertscratch.budget import TrainingBudget

    spent_after_step: list[tuple[int, float]] = []
    real_step_end = TrainingBudget.on_step_end

    def recording_step_end(self, args, state, control, **kwargs):
        real_step_end(self, args, state, control, **kwargs)
        spent_after_step.append((state.global_step, self.spent_seconds))

    monkeypatch.setattr(TrainingBudget, "on_step_end", recording_step_end)
    out = tmp_path / "budget"
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--max_train_minutes",
            "0.04",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
        )
    )
    results, state = _results(out), json.loads((out / "trainer_state.json").read_text())
    steps, spent = zip(*spent_after_step, strict=True)
    assert (
        steps == tuple(range(1, state["global_step"] + 1))
        and state["global_step"] < pretraining_arguments.BUDGET_STEP_CAP
    )
    assert all(later > earlier for earlier, later in zip(spent, spent[1:]))  # the clock runs on the real time
    assert all(s < 2.4 for s in spent[:-1]) and spent[-1] >= 2.4  # stops at the first step past 0.04 minutes
    assert results["train_budget_minutes"] == 0.04
    assert results["train_budget_spent_minutes"] == pytest.approx(spent[-1] / 60, abs=1e-4)


@pytest.mark.parametrize(
    ("schedule", "cooldown"),
    [
        ("linear", None),
        ("warmup_stable_decay", None),
        ("warmup_stable_decay", '{"num_decay_steps": 0.5, "decay_type": "1-sqrt"}'),
    ],
)
def test_time_budget_lays_the_schedule_over_the_budget(
    schedule: str,
    cooldown: str | None,
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a clock that advances one second per reading, a 30-second budget is 30 one-second steps, and the learning
    rate of step k is the peak times the schedule's factor at the fraction spent before step k - 1 (the scheduler steps
    after the optimizer, before the budget's clock reads the step's time; step 1 runs at the initial factor)."""
    from hf_bertscratch import budget as budget_module
    from hf_bertscratch.budget import budget_lr_lambda

    ticks = iter(range(10**6))
    monkeypatch.setattr(budget_module, "_clock", lambda: float(next(ticks)))
    out = tmp_path / schedule
    kwargs = [] if cooldown is None else ["--lr_scheduler_kwargs", cooldown]
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--max_train_minutes",
            "0.5",
            "--warmup_steps",
            "0.2",
            "--lr_scheduler_type",
            schedule,
            "--learning_rate",
            "1e-3",
            "--logging_steps",
            "1",
            *kwargs,
        )
    )
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 30 and _results(out)["train_budget_spent_minutes"] == 0.5
    logged = {log["step"]: log["learning_rate"] for log in state["log_history"] if "learning_rate" in log}
    factor = budget_lr_lambda(schedule, 0.2, None if cooldown is None else json.loads(cooldown))
    assert sorted(logged) == list(range(1, 31))
    assert [logged[step] for step in range(1, 31)] == pytest.approx(
        [1e-3 * factor(max(step - 2, 0) / 30) for step in range(1, 31)]
    )


def test_time_budget_resumes_with_the_time_already_spent(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """With a clock that advances one second per reading, each step costs exactly one second of the budget: a
    30-second budget is 30 steps, and a run interrupted after checkpoint-10 trains steps 11-30 when resumed."""
    from hf_bertscratch import budget as budget_module

    ticks = iter(range(10**6))
    monkeypatch.setattr(budget_module, "_clock", lambda: float(next(ticks)))
    budget = ("--max_train_minutes", "0.5", "--save_strategy", "steps", "--save_steps", "10")
    full = tmp_path / "full"
    main(pretrain_args(text_file, tokenizer_dir, config_dir, full, *budget))
    assert json.loads((full / "trainer_state.json").read_text())["global_step"] == 30
    # A finished run keeps its last checkpoint only (a larger budget continues from it), and says so last.
    assert [path.name for path in full.glob("checkpoint-*")] == ["checkpoint-30"]
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(
            f"{full} keeps the final model and checkpoint-30, which `--resume_from_checkpoint last` continues with a "
            "larger --max_train_minutes or --max_steps; removed 2 intermediate checkpoint(s) ("
        )
    )

    steps = {"n": 0}
    real_step = pretraining.Trainer.training_step

    def dying_step(self, *args, **kwargs):
        steps["n"] += 1
        if steps["n"] == 13:
            raise KeyboardInterrupt("killed")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(pretraining.Trainer, "training_step", dying_step)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *budget))
    monkeypatch.setattr(pretraining.Trainer, "training_step", real_step)
    saved = json.loads((cut / "checkpoint-10" / "trainer_state.json").read_text())
    assert saved["stateful_callbacks"]["TrainingBudget"]["attributes"]["spent_seconds"] == 10.0
    main(pretrain_args(text_file, tokenizer_dir, config_dir, cut, *budget, "--resume_from_checkpoint", "true"))
    assert json.loads((cut / "trainer_state.json").read_text())["global_step"] == 30
    assert _results(cut)["train_budget_spent_minutes"] == 0.5


def test_a_larger_budget_continues_when_callback_states_are_restored(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--restore_callback_states_from_checkpoint makes transformers rebuild each saved callback from the checkpoint:
    the run's budget keeps this run's minutes and the clock it resumed, so a larger budget still trains on (one
    second per step, as above: 15 steps, then 15 more)."""
    from hf_bertscratch import budget as budget_module

    ticks = iter(range(10**6))
    monkeypatch.setattr(budget_module, "_clock", lambda: float(next(ticks)))
    out = tmp_path / "run"
    saving = ("--save_strategy", "steps", "--save_steps", "5")
    main(pretrain_args(text_file, tokenizer_dir, config_dir, out, "--max_train_minutes", "0.25", *saving))
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 15
    restore = ("--resume_from_checkpoint", "last", "--restore_callback_states_from_checkpoint", "true")
    main(pretrain_args(text_file, tokenizer_dir, config_dir, out, "--max_train_minutes", "0.5", *saving, *restore))
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 30
    assert _results(out)["train_budget_spent_minutes"] == 0.5


def test_resuming_a_spent_budget_trains_nothing_and_says_so(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run resumed from the checkpoint that spent its budget, with that budget, takes no step (one second per
    step, as above: 15 steps, then none) and says in one line why; it still writes its results."""
    from hf_bertscratch import budget as budget_module

    ticks = iter(range(10**6))
    monkeypatch.setattr(budget_module, "_clock", lambda: float(next(ticks)))
    out = tmp_path / "run"
    budget = ("--max_train_minutes", "0.25", "--save_strategy", "steps", "--save_steps", "5")
    main(pretrain_args(text_file, tokenizer_dir, config_dir, out, *budget))
    (out / "all_results.json").unlink()
    with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
        main(pretrain_args(text_file, tokenizer_dir, config_dir, out, *budget, "--resume_from_checkpoint", "last"))
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 15
    assert _results(out)["train_budget_spent_minutes"] == 0.25
    spent = [record.getMessage() for record in caplog.records if "time budget" in record.getMessage()]
    assert spent == [
        "Step 15 has spent the 0.25-minute time budget: nothing to train (a larger --max_train_minutes trains on)."
    ], spent


@pytest.mark.parametrize(("run_length", "progress_bar"), [("budget", True), ("steps", False)])
def test_the_terminal_shows_a_loss_line_per_tenth_of_the_run(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    run_length: str,
    progress_bar: bool,
) -> None:
    """30 steps logging their loss at each step: trainer_state.json keeps all 30 for the loss curve, the terminal one
    line per tenth of the run, of the time budget (one second per step, as above) or of the steps, each the mean of
    the losses logged since the line before, as fine-tuning shows its run."""
    from hf_bertscratch import budget as budget_module

    ticks = iter(range(10**6))
    monkeypatch.setattr(budget_module, "_clock", lambda: float(next(ticks)))
    out = tmp_path / "run"
    length = ("--max_train_minutes", "0.5") if run_length == "budget" else ("--max_steps", "30")
    argv = pretrain_args(text_file, tokenizer_dir, config_dir, out, *length, "--logging_steps", "1")
    main(argv + ["--disable_tqdm", "false" if progress_bar else "true"])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{'")]
    logged = [
        log["loss"] for log in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in log
    ]
    assert len(logged) == 30
    losses = [line for line in printed if "'loss'" in line]
    assert len(losses) == 10, printed
    means = [f"{{'loss': '{sum(logged[:steps]) / steps:.4g}'" for steps in range(1, 31)]
    assert any(losses[0].startswith(mean) for mean in means[1:5]), (losses[0], means[:5])


def test_bad_budget_arguments_fail_before_training(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    base = pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "x")
    with pytest.raises(ValueError, match="max_train_minutes must be positive, got -1.0"):
        main([*base, "--max_train_minutes", "-1"])
    with pytest.raises(ValueError, match="warmup_steps is a fraction of the budget in \\[0, 1\\), got 80"):
        main([*base, "--max_train_minutes", "1", "--warmup_steps", "80"])
    with pytest.raises(ValueError, match="num_processes must be a positive integer or 'auto', got 'two'"):
        main([*base, "--num_processes", "two"])
    assert not (tmp_path / "x").exists()


def test_default_data_is_the_shipped_wikitext2() -> None:
    """With no data named, pretraining reads the WikiText-2 copy inside the package: the Hub dataset's rows."""
    from hf_bertscratch.data import load_raw_datasets

    model_args, data_args, training_args = parse_args(["--output_dir", "unused"])
    assert (data_args.dataset_name, data_args.dataset_config_name) == ("wikitext", "wikitext-2-raw-v1")
    raw = load_raw_datasets(data_args.dataset_name, data_args.dataset_config_name, data_dir=None)
    assert {name: len(split) for name, split in raw.items()} == {"train": 36718, "validation": 3760, "test": 4358}
    assert (
        raw["train"][1]["text"] == " = Valkyria Chronicles III = "
        and raw["validation"][1]["text"] == " = Homarus gammarus = "
    )


def test_push_to_hub_uploads_the_finished_folder_once(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--push_to_hub uploads the finished output folder once, at the end, as `bertscratch push` would: the
    project's card and remote code, no staging folder, checkpoints or training_args.bin; the Trainer never pushes.
    The card names the local training file by its name alone."""
    from hf_bertscratch import hub

    calls = record_hub(monkeypatch)
    out = tmp_path / "run"
    push = ("--push_to_hub", "true", "--hub_model_id", "alice/run", "--hub_revision", "v1")
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--max_steps",
            "4",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            *push,
        )
    )
    assert [name for name, _ in calls] == ["create_repo", "create_branch", "upload_folder"]
    upload = calls[-1][1]
    assert (upload["repo_id"], upload["revision"], upload["commit_message"]) == ("alice/run", "v1", "End of training")
    calls.clear()
    expected = hub.push_to_hub(out, "alice/run", revision="v1", dry_run=tmp_path / "dry")  # bertscratch push
    assert calls == []
    assert sorted(upload["files"]) == sorted(name for name, _ in hub.list_folder(expected))
    assert upload["files"]["model.safetensors"] == (out / "model.safetensors").read_bytes()
    assert not any(
        name.startswith((".staging", "checkpoint-")) or name == "training_args.bin" for name in upload["files"]
    )
    assert {"modeling_bertscratch.py", "configuration_bertscratch.py", "tokenizer.json"} <= set(upload["files"])
    assert json.loads(upload["files"]["config.json"])["auto_map"]["AutoModelForMaskedLM"].endswith(
        "BertScratchForMaskedLM"
    )
    card = upload["files"]["README.md"].decode()
    assert "fill-mask" in card and "alice/run" in card and "unknown dataset" not in card
    assert "Raw text from `train.txt`" in card
    assert_no_local_path(card, tmp_path_factory)
    assert_no_local_path((out / "README.md").read_text(encoding="utf-8"), tmp_path_factory)


def test_push_to_hub_checks_first_and_uploads_nothing_when_training_fails(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_hub(monkeypatch)
    with pytest.raises(ValueError, match="repo_id"):
        main(
            pretrain_args(
                text_file,
                tokenizer_dir,
                config_dir,
                tmp_path / "bad",
                "--max_steps",
                "4",
                "--push_to_hub",
                "true",
                "--hub_model_id",
                "no-namespace",
            )
        )
    assert not (tmp_path / "bad").exists()

    def dying_step(self, *args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(pretraining.Trainer, "training_step", dying_step)
    with pytest.raises(RuntimeError, match="out of memory"):
        main(
            pretrain_args(
                text_file,
                tokenizer_dir,
                config_dir,
                tmp_path / "dies",
                "--max_steps",
                "4",
                "--push_to_hub",
                "true",
                "--hub_model_id",
                "alice/run",
            )
        )
    assert calls == []


def test_outputs_get_the_usual_permissions(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """Every file of a finished run is readable as the umask says (safetensors and mkstemp would leave 0600)."""
    old = os.umask(0o022)
    try:
        out = tmp_path / "run"
        main(pretrain_args(text_file, tokenizer_dir, config_dir, out, "--max_steps", "2"))
        from hf_bertscratch.convert import convert_checkpoint
        from hf_bertscratch.hub import prepare_upload_folder

        upload = prepare_upload_folder(out, tmp_path / "upload")
        convert_checkpoint(out, tmp_path / "as-bert")
    finally:
        os.umask(old)
    for folder in (out, upload, tmp_path / "as-bert"):
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir() if p.is_file()}
        assert {"model.safetensors", "config.json"} <= set(modes) and ("README.md" in modes) == (
            folder != tmp_path / "as-bert"
        )
        assert set(modes.values()) == {"0o644"}, modes
    assert oct(upload.stat().st_mode & 0o777) == "0o755"


@pytest.mark.parametrize("cooldown", [None, '{"num_decay_steps": 0.4, "decay_type": "1-sqrt"}'])
def test_step_budget_runs_take_the_same_schedule_shape(
    cooldown: str | None, text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """Without a time budget the default warmup-stable-decay schedule runs over --max_steps: warm-up, the peak held,
    a linear decay over the last 20% (transformers' WSD needs num_decay_steps; the package supplies it), or the
    cooldown --lr_scheduler_kwargs asks for, its length a fraction of the steps as with a budget."""
    out = tmp_path / "steps"
    kwargs = [] if cooldown is None else ["--lr_scheduler_kwargs", cooldown]
    main(
        pretrain_args(
            text_file,
            tokenizer_dir,
            config_dir,
            out,
            "--max_steps",
            "20",
            "--logging_steps",
            "1",
            "--lr_scheduler_type",
            "warmup_stable_decay",
            "--warmup_steps",
            "0.1",
            *kwargs,
        )
    )
    rates = [
        log["learning_rate"]
        for log in json.loads((out / "trainer_state.json").read_text())["log_history"]
        if "learning_rate" in log
    ]
    assert len(rates) == 20 and rates[0] < rates[1] < rates[2] == pytest.approx(1e-3)  # 2 warm-up steps
    if cooldown is None:
        assert rates[16] == pytest.approx(1e-3) and rates[16:] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
    else:  # 8 steps of 1 - sqrt(progress) after the peak held to step 12
        assert rates[2:13] == pytest.approx([1e-3] * 11)
        assert rates[12:] == pytest.approx([1e-3 * (1 - (k / 8) ** 0.5) for k in range(8)])


def test_cut_blocks_keeps_every_token_and_label_in_order() -> None:
    from hf_bertscratch.pretraining import cut_blocks

    ids = torch.arange(2 * 8).reshape(2, 8)
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones(2, 8, dtype=torch.long),
        "labels": ids + 100,
        "num_items": 3,
    }
    cut = cut_blocks(batch, 4)
    assert cut["input_ids"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert torch.equal(cut["labels"], cut["input_ids"] + 100) and cut["attention_mask"].shape == (4, 4)
    assert cut["num_items"] == 3
    with pytest.raises(ValueError, match="Cannot cut blocks of 8 tokens into blocks of 3"):
        cut_blocks(batch, 3)


def test_short_block_start_trains_the_first_quarter_on_short_blocks(
    text_file: Path,
    tokenizer_dir: Path,
    config_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trained: list[tuple[int, int]],
) -> None:
    """By default the first quarter of the steps trains on blocks a quarter as long (the same tokens and labels in
    four times the rows), the rest on full blocks; evaluation always reads full blocks."""
    shapes: list[tuple[bool, tuple[int, ...]]] = []
    real = pretraining.Trainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        shapes.append((model.training, tuple(inputs["input_ids"].shape)))
        return real(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(pretraining.Trainer, "compute_loss", recording)
    main(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "short", "--max_steps", "8"))
    train = [shape for training, shape in shapes if training]
    assert [length for _, length in train] == [4] * 2 + [16] * 6  # steps 1-2 of 8 on 4-token blocks, then 16
    assert train[:2] == [(16, 4)] * 2  # 4 blocks of 16 a step, each cut in four
    assert all(shape[1] == 16 for training, shape in shapes if not training)
    assert _results(tmp_path / "short")["train_tokens"] == sum(tokens for tokens, _ in trained)  # cut or not

    shapes.clear()
    main(
        pretrain_args(
            text_file, tokenizer_dir, config_dir, tmp_path / "long", "--max_steps", "8", "--short_seq_fraction", "0"
        )
    )
    assert [shape[1] for training, shape in shapes if training] == [16] * 8


def test_bad_short_block_arguments_fail_before_training(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    base = pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "x")
    with pytest.raises(ValueError, match="short_seq_length must divide max_seq_length=16, got 5"):
        main([*base, "--short_seq_length", "5"])
    with pytest.raises(ValueError, match="short_seq_fraction must be in \\[0, 1\\), got 1.0"):
        main([*base, "--short_seq_fraction", "1"])
    with pytest.raises(ValueError, match="objective 'mlm' only .* got objective 'mlm_nsp'"):
        main([*base, "--objective", "mlm_nsp", "--short_seq_fraction", "0.25"])
    assert not (tmp_path / "x").exists()
    model_args, data_args, training_args = parse_args(["--output_dir", "unused", "--objective", "mlm_nsp"])
    assert data_args.short_seq_fraction == 0.0  # NSP keeps its sentence pairs whole by default


@pytest.mark.parametrize(
    "objective, max_seq_length, expected",
    [("mlm", 128, 0.25), ("electra", 128, 0.25), ("mlm_nsp", 128, 0.0), ("mlm", 30, 0.0)],
)
def test_parsing_fills_the_short_block_start_for_the_objective(
    tmp_path: Path, objective: str, max_seq_length: int, expected: float
) -> None:
    """short_seq_fraction's default depends on the model's objective, a flag of another dataclass: parsing alone fills
    it (the parser hands the data arguments the model arguments), from flags and from a .json file alike."""
    flags = {"output_dir": "unused", "objective": objective, "max_seq_length": max_seq_length}
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps(flags))
    for argv in ([item for name, value in flags.items() for item in (f"--{name}", str(value))], [str(arguments)]):
        model_args, data_args, _ = parse_args(argv)
        assert (model_args.objective, data_args.short_seq_fraction) == (objective, expected)
        assert data_args.short_seq_length == max_seq_length // 4
    assert pretraining.DataArguments().short_seq_fraction == 0.25  # made alone: the default model's objective
    nsp = pretraining.ModelArguments(objective="mlm_nsp")
    assert pretraining.DataArguments(model_args=nsp).short_seq_fraction == 0.0  # made with them: theirs


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--short_seq_length", "5"], "short_seq_length must divide max_seq_length=128, got 5"),
        (["--short_seq_fraction", "1"], "short_seq_fraction must be in \\[0, 1\\), got 1.0"),
        (["--objective", "mlm_nsp", "--short_seq_fraction", "0.25"], "objective 'mlm' only .* got objective 'mlm_nsp'"),
        (["--objective", "mlm_nsp", "--whole_word_mask", "true"], "whole_word_mask works with objectives .* 'mlm_nsp'"),
        (["--streaming", "true", "--max_train_minutes", "0"], "--streaming needs --max_steps > 0"),
    ],
)
def test_what_one_dataclass_needs_of_another_fails_as_it_is_parsed(flags: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_args(["--output_dir", "unused", *flags])


def test_max_train_samples_draws_whole_packed_blocks_at_random(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """--max_train_samples counts examples the model trains on (packed blocks), as in fine-tuning: a seeded random
    draw of whole blocks of the full packing, the same for the same seed."""

    def train_blocks(*extra: str) -> list[list[int]]:
        args = parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path / "unused", *extra))
        return pretraining.build_trainer(*args).train_dataset["input_ids"]

    every = train_blocks()
    drawn = train_blocks("--max_train_samples", "3")
    assert len(every) > 6 and len(drawn) == 3
    assert all(block in every for block in drawn) and len({tuple(b) for b in drawn}) == 3
    assert drawn == train_blocks("--max_train_samples", "3")
    assert drawn != train_blocks("--max_train_samples", "3", "--seed", "1")
    with pytest.raises(ValueError, match="--max_train_samples must be a positive number of examples.*got 0"):
        parse_args(pretrain_args(text_file, tokenizer_dir, config_dir, tmp_path, "--max_train_samples", "0"))


@pytest.mark.parametrize("backend, expected", [("gloo", "cpu"), ("nccl", "accelerator"), ("NCCL", "accelerator")])
def test_budget_clock_is_reduced_on_the_device_its_backend_needs(
    monkeypatch: pytest.MonkeyPatch, backend: str, expected: str
) -> None:
    """NCCL reduces accelerator tensors only: the budget's clock goes where the process group's backend needs it
    (a CPU tensor under NCCL stops every multi-GPU run at its first step)."""
    from types import SimpleNamespace

    from transformers import TrainerControl, TrainerState

    from hf_bertscratch import budget

    accelerator = torch.device("meta")  # stands for the process's GPU on this CPU machine
    args = SimpleNamespace(device=accelerator, world_size=2)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_backend", lambda group=None: backend)
    assert budget.collective_device(args) == (accelerator if expected == "accelerator" else torch.device("cpu"))
    reduced = []

    def all_reduce(tensor: torch.Tensor, op=None) -> None:
        reduced.append(tensor.device)
        if tensor.device.type == "meta":
            raise RuntimeError("stop here: a meta tensor has no value to read")

    monkeypatch.setattr(torch.distributed, "all_reduce", all_reduce)
    clock = budget.TrainingBudget(1.0)
    clock._mark = 0.0
    try:
        clock.on_step_end(args, TrainerState(), TrainerControl())
    except RuntimeError:
        pass
    assert reduced == [budget.collective_device(args)]


def test_the_end_of_a_run_says_when_the_model_is_on_the_unigram_plateau_and_when_the_machine_was_slow(
    tokenizer_dir: Path,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model_args, _, training_args = pretraining.parse_args(["--output_dir", "D"])
    metrics = {
        "eval_accuracy": 0.33,
        "eval_perplexity": 61.0,
        "eval_unigram_accuracy": 0.066,
        "eval_unigram_perplexity": 880.0,
        "eval_unigram_token": tokenizer.convert_tokens_to_ids("the"),
        "train_wall_time_seconds": 510.0,
        "train_tokens": 11_100_160,
        "train_tokens_per_second": 21_800.0,
        "train_budget_minutes": 8.5,
        "max_seq_length": 128,
        "world_size": 2,
    }
    (line,) = pretraining.summarise_run(metrics, training_args, model_args, tokenizer)
    assert line.startswith("eval_accuracy 0.3300  perplexity 61.00 (the unigram answer 'the' everywhere: 0.0660")
    assert "11,100,160 tokens  21800 tokens/s  -> D" in line
    on_plateau = {**metrics, "eval_accuracy": 0.07, "train_tokens_per_second": 9_600.0}
    _, plateau, slow = pretraining.summarise_run(on_plateau, training_args, model_args, tokenizer)
    assert plateau.startswith("The model is still on the unigram plateau")
    assert slow.startswith("This machine trained 9.6k tokens/s; the default recipe was measured at 14.7k on a")
    # runs of another shape than the recipe's: their speed is not the quick start's to judge
    for other in ({"max_seq_length": 32}, {"world_size": 1}, {"train_budget_minutes": 0.5}):
        lines = pretraining.summarise_run({**on_plateau, **other}, training_args, model_args, tokenizer)
        assert len(lines) == 2, (other, lines)
    for flags in (["--per_device_train_batch_size", "4"], ["--max_steps", "1"], ["--objective", "electra"]):
        model_args, _, other_args = pretraining.parse_args(["--output_dir", "D", *flags])
        assert len(pretraining.summarise_run(on_plateau, other_args, model_args, tokenizer)) == 2, flags
    model_args.model_size = "base"  # another recipe: its speed is not the quick start's to judge
    assert len(pretraining.summarise_run(on_plateau, training_args, model_args, tokenizer)) == 2


def test_a_budgeted_run_shows_no_step_cap_as_its_progress_total() -> None:
    from tqdm.auto import tqdm
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from hf_bertscratch.budget import TrainingBudget

    budget = TrainingBudget(1.0)
    callback = types.SimpleNamespace(training_bar=tqdm(total=pretraining_arguments.BUDGET_STEP_CAP, disable=True))
    budget.progress_callbacks = [callback]
    budget.on_train_begin(TrainingArguments("out", use_cpu=True), TrainerState(), TrainerControl())
    assert callback.training_bar.total is None  # until the step rate gives the expected steps


def test_a_budgeted_runs_progress_bar_never_draws_the_step_cap(capsys: pytest.CaptureFixture[str]) -> None:
    """The Trainer's progress bar opens at on_train_begin with `state.max_steps`, which under a time budget is only
    the cap that lets the Trainer run: its first frame, kept in a log file, would show that cap."""
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback, ProgressCallback

    from hf_bertscratch.budget import TrainingBudget

    handler = CallbackHandler([DefaultFlowCallback, ProgressCallback], None, None, None, None)
    trainer = types.SimpleNamespace(
        callback_handler=handler, add_callback=handler.add_callback, pop_callback=handler.pop_callback
    )
    TrainingBudget(1.0).attach(trainer)  # type: ignore[arg-type]
    args, state = TrainingArguments("out", use_cpu=True), TrainerState(max_steps=pretraining_arguments.BUDGET_STEP_CAP)
    handler.on_train_begin(args, state, TrainerControl())
    frames = capsys.readouterr().err
    assert "0it" in frames and str(pretraining_arguments.BUDGET_STEP_CAP) not in frames, frames
    assert [type(cb).__name__ for cb in handler.callbacks][-2:] == ["BudgetProgressCallback", "TrainingBudget"]


def test_a_budgeted_runs_progress_total_follows_the_step_rate_and_ends_at_100_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tqdm.auto import tqdm
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from hf_bertscratch import budget as budget_module

    now = [0.0]
    monkeypatch.setattr(budget_module, "_clock", lambda: now[0])
    budget = budget_module.TrainingBudget(1.0)
    callback = types.SimpleNamespace(training_bar=tqdm(total=pretraining_arguments.BUDGET_STEP_CAP, disable=True))
    budget.progress_callbacks = [callback]
    args, state, control = TrainingArguments("out", use_cpu=True), TrainerState(), TrainerControl()
    budget.on_train_begin(args, state, control)
    totals = []
    while not control.should_training_stop:
        now[0] += 0.5 if state.global_step < 40 else 0.25  # the machine speeds up after 40 steps
        state.global_step += 1
        budget.on_step_end(args, state, control)
        totals.append(callback.training_bar.total)
    steps = state.global_step
    assert steps == 200  # 40 steps in 20 s, then 40 s at 4 steps/s
    assert totals[: budget_module.RATE_STEPS] == [None] * budget_module.RATE_STEPS
    assert totals[budget_module.RATE_STEPS] == 120  # 60 s at the first 20 steps' 2 steps/s
    shown = totals[budget_module.RATE_STEPS : -1]
    assert all(total > step for step, total in enumerate(shown, budget_module.RATE_STEPS + 1))  # never overshot
    changes = [
        (step, a, b) for step, (a, b) in enumerate(zip(shown, shown[1:]), budget_module.RATE_STEPS + 2) if a != b
    ]
    # It moves as the faster rate shows, by more than 2% each time unless the bar has reached it (from 120 towards
    # 200: a few dozen moves, not one at each of the 180 steps), and ends at the steps taken.
    assert 1 <= len(changes) <= 30
    assert all(abs(b - a) > 0.02 * a or step >= a for step, a, b in changes)
    assert totals[-1] == steps


@pytest.mark.parametrize("flags", [{"avx2", "amx_bf16", "amx_tile"}, {"avx2", "avx512f", "avx512_bf16"}])
def test_a_cpu_with_native_bf16_trains_in_bf16_and_says_why(monkeypatch: pytest.MonkeyPatch, flags: set) -> None:
    monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)  # AMX (Intel Xeon), AVX512_BF16 (AMD EPYC Zen 4/5)
    _, _, args = pretraining.parse_args(["--output_dir", "D", "--use_cpu", "true"])
    assert args.bf16 and not args.fp16
    chosen = pretraining.describe_device_choice(args, 2)
    assert "bf16 autocast (the CPU has native bf16, AMX or AVX512_BF16; --precision fp32 for fp32)" in chosen
    _, _, fp32 = pretraining.parse_args(["--output_dir", "D", "--use_cpu", "true", "--precision", "fp32"])
    assert not fp32.bf16
    if not torch.cuda.is_available():  # the quick start names no device: bf16 on the CPU without --use_cpu
        _, _, unnamed = pretraining.parse_args(["--output_dir", "D"])
        assert unnamed.bf16 and unnamed.use_cpu


def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Native bf16 (AMX or AVX512_BF16) serves bf16 inference, and training defaults to bf16 on it: the quick start
    trained more tokens in its budget and reached a higher accuracy there (records in results/quick-start/)."""
    from hf_bertscratch import hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "amx_bf16", "amx_tile"})
    assert hardware.cpu_has_native_bf16()
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    assert hardware.cpu_has_native_bf16()
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "avx512f"})
    assert not hardware.cpu_has_native_bf16()


def test_records_tell_cpus_of_one_name_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A speed record names the CPU's vendor, family, model and the instruction sets its choices turn on: "AMD EPYC"
    alone names a Zen 2 without AVX-512 and a Zen 5 with AVX512_BF16 alike."""
    from hf_bertscratch import hardware, records

    cpuinfo = {"vendor_id": "GenuineIntel", "cpu family": "6", "model\t": "85", "model name": "Intel(R) Xeon(R)"}
    monkeypatch.setattr(hardware, "_cpuinfo_value", cpuinfo.get)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"sse2", "avx2", "avx512f", "avx512_vnni"})
    expected = {"vendor": "GenuineIntel", "family": 6, "model": 85, "flags": ["avx2", "avx512f", "avx512_vnni"]}
    assert hardware.cpu_identity() == expected
    start = records.RunStart("abc", "2026-11-28", [0.0, 0.0, 0.0])
    record = records.run_record("prog", [], {}, start, onnxruntime=False)
    assert record["cpu"] == "Intel(R) Xeon(R)" and record["cpu_identity"] == expected
    monkeypatch.setattr(hardware, "_cpuinfo_value", lambda key: None)  # no /proc/cpuinfo: nothing is made up
    monkeypatch.setattr(hardware, "cpu_flags", set)
    assert hardware.cpu_identity() == {"vendor": None, "family": None, "model": None, "flags": []}


@pytest.mark.parametrize(
    "gpus, bf16_supported, cores, precision, expected",
    [
        (0, False, 2, "auto", {"processes": 2, "bf16": False, "fp16": False, "dataloader_num_workers": 0}),
        (0, False, 1, "auto", {"processes": 1, "bf16": False, "fp16": False, "dataloader_num_workers": 0}),
        (1, True, 16, "auto", {"processes": 1, "bf16": True, "fp16": False, "dataloader_num_workers": 4}),
        (8, True, 16, "auto", {"processes": 8, "bf16": True, "fp16": False, "dataloader_num_workers": 1}),
        (2, False, 8, "auto", {"processes": 2, "bf16": False, "fp16": False, "dataloader_num_workers": 3}),
        (1, True, 16, "fp32", {"processes": 1, "bf16": False, "fp16": False, "dataloader_num_workers": 4}),
        (1, True, 16, "fp16", {"processes": 1, "bf16": False, "fp16": True, "dataloader_num_workers": 4}),
        (0, True, 2, "auto", {"processes": 2, "bf16": True, "fp16": False, "dataloader_num_workers": 0}),  # AMX
        (0, True, 2, "fp32", {"processes": 2, "bf16": False, "fp16": False, "dataloader_num_workers": 0}),
    ],
)
def test_device_defaults_give_a_gpu_machine_one_process_per_gpu_bf16_and_loading_workers(
    gpus: int, bf16_supported: bool, cores: int, precision: str, expected: dict
) -> None:
    assert hardware.device_defaults(gpus, bf16_supported, cores, precision) == expected


def test_the_cpu_run_is_what_it_was_and_says_what_it_chose(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "fma"})  # an AVX2 CPU, as the AMD EPYC Zen 3
    _, _, args = pretraining.parse_args(["--output_dir", "D", "--use_cpu", "true"])
    assert (args.bf16, args.fp16, args.dataloader_num_workers, args.dataloader_pin_memory) == (False, False, 0, False)
    assert pretraining.describe_device_choice(args, 2) == (
        f"Training on the CPU ({hardware.available_cores()} cores): 2 process(es), fp32, 0 loading worker(s) per process."
    )
    _, _, given = pretraining.parse_args(["--output_dir", "D", "--dataloader_num_workers", "3", "--precision", "fp32"])
    assert given.dataloader_num_workers == 3
    if not torch.cuda.is_available():  # bf16 asked for on a CPU trains there: transformers refuses it without --use_cpu
        _, _, told = pretraining.parse_args(["--output_dir", "D", "--bf16", "true"])
        assert told.bf16 and told.use_cpu
    with pytest.raises(ValueError, match="precision must be one of .*got 'half'"):
        pretraining.parse_args(["--output_dir", "D", "--precision", "half"])


def test_the_device_line_is_printed_once_however_the_run_was_launched(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bertscratch pretrain` prints "Training on ..." before it launches its own processes, which do not print it
    again; under torchrun or accelerate launch the main process prints it, with the run's WORLD_SIZE processes."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx2", "fma"})
    _, _, args = pretraining.parse_args(["--output_dir", "D", "--use_cpu", "true"])
    for name in ("WORLD_SIZE", "RANK", errors.LAUNCHED_ERRORS_ENV):
        monkeypatch.delenv(name, raising=False)
    alone = pretraining.device_choice_to_print(args, 2)
    assert alone == pretraining.describe_device_choice(args, 2)
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    assert pretraining.device_choice_to_print(args, 1) == pretraining.describe_device_choice(args, 3)
    assert "3 process(es)" in pretraining.describe_device_choice(args, 3)
    monkeypatch.setenv("RANK", "2")
    assert pretraining.device_choice_to_print(args, 1) is None  # not the main process
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv(errors.LAUNCHED_ERRORS_ENV, "errors")  # a process `bertscratch pretrain` launched: it said so
    assert pretraining.device_choice_to_print(args, 1) is None


def test_threads_fit_the_cores_the_process_may_use_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fit_threads`: --threads, else OMP_NUM_THREADS, else the cores this process may use (its affinity), shared
    among the run's processes, at least 1; the load average at start is said with it; in the run's first line."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5})  # 3 of the machine's cores
    monkeypatch.setattr(os, "getloadavg", lambda: (7.5, 0.0, 0.0))
    for processes, expected in ((1, 3), (2, 1), (4, 1)):
        chosen = hardware.fit_threads(None, processes)
        assert chosen.count == expected, processes
        assert "the 3 cores this process may use" in chosen.reason and "load average 7.50 at start" in chosen.reason
    assert hardware.fit_threads(3, 2) == hardware.ThreadChoice(3, "--threads")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert hardware.fit_threads(None, 1) == hardware.ThreadChoice(2, "OMP_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="OMP_NUM_THREADS must be a positive integer, got 'many'"):
        hardware.fit_threads(None, 1)
    with pytest.raises(ValueError, match="--threads must be a positive integer, got 0"):
        pretraining.parse_args(["--output_dir", "D", "--threads", "0"])
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    _, _, args = pretraining.parse_args(["--output_dir", "D", "--use_cpu", "true", "--threads", "1"])
    line = pretraining.describe_device_choice(args, 1, hardware.fit_threads(args.threads))
    assert f"1 process(es), 1 torch thread per process (--threads; OMP_WAIT_POLICY=PASSIVE; {heap_policy()}), " in line


def test_training_entry_points_make_idle_threads_sleep_before_torch_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`OMP_WAIT_POLICY=PASSIVE` is set by the training commands before torch is imported (the OpenMP runtime reads
    it as it loads), and a value in the environment is kept."""
    probe = (
        "import builtins, os, runpy, sys\n"
        "real = builtins.__import__\n"
        "def spy(name, *args, **kwargs):\n"
        "    if name == 'torch' and 'torch' not in sys.modules:\n"
        "        print('torch sees', os.environ.get('OMP_WAIT_POLICY'), flush=True)\n"
        "        os._exit(0)\n"  # what torch would see is known: loading it (and the rest) adds nothing
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = spy\n"
        "runpy.run_path(sys.argv[1], run_name='imported')\n"  # the module's imports, not its main()
    )
    environment = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    repository = Path(__file__).resolve().parents[1]
    for script, policy in (("pretrain.py", None), ("finetune.py", None), ("finetune.py", "ACTIVE")):
        given = {} if policy is None else {"OMP_WAIT_POLICY": policy}
        seen = subprocess.run(
            [sys.executable, "-c", probe, str(repository / "scripts" / script)],
            env={**environment, **given},
            capture_output=True,
            text=True,
        )
        assert f"torch sees {policy or 'PASSIVE'}" in seen.stdout, seen.stdout + seen.stderr

    import hf_bertscratch_cli

    ran = []

    def run_command(command: str, args: list[str], debug: bool) -> None:
        ran.append((command, os.environ.get("OMP_WAIT_POLICY")))

    monkeypatch.setattr(hf_bertscratch_cli, "run_command", run_command)
    monkeypatch.setattr(hf_bertscratch_cli, "check_sources", lambda command, args: None)
    for command, argv in (("classify", ["m"]), ("finetune", ["--model_name_or_path", "m"])):
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        hf_bertscratch_cli.main([command, *argv])
    assert ran == [("classify", None), ("finetune", "PASSIVE")]
