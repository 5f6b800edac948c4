"""hf_bertscratch.flax against the torch model: same numbers per head, checkpoints both ways, same MLM loss and
gradients, one AdamW step, and the JAX pretraining entry point end to end. Skipped without the [flax] extra."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, BertTokenizer

import hf_bertscratch

from conftest import tiny_config_kwargs

pytest.importorskip("jax", reason='needs the [flax] extra: pip install -e ".[flax]"')
pytest.importorskip("flax", reason='needs the [flax] extra: pip install -e ".[flax]"')
pytest.importorskip("optax", reason='needs the [flax] extra: pip install -e ".[flax]"')

from flax import nnx  # noqa: E402

from hf_bertscratch.flax import (  # noqa: E402
    FlaxBertScratchForMaskedLM,
    FlaxBertScratchForSequenceClassification,
    FlaxBertScratchModel,
    make_mlm_train_step,
    make_optimizer,
    mlm_loss_and_grads,
)
from hf_bertscratch.flax.training import num_predictions_for  # noqa: E402
from hf_bertscratch.pretraining import SeededMaskingCollator  # noqa: E402

# (torch class, Flax class, output field compared)
HEADS = [
    (hf_bertscratch.BertScratchModel, FlaxBertScratchModel, "last_hidden_state"),
    (hf_bertscratch.BertScratchForMaskedLM, FlaxBertScratchForMaskedLM, "logits"),
    (hf_bertscratch.BertScratchForSequenceClassification, FlaxBertScratchForSequenceClassification, "logits"),
]
# Config variants that change the numbers: the GELU flavour, LayerNorm epsilon, an untied decoder.
VARIANTS = {
    "default": {},
    "tanh_gelu_eps": {"hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-5},
    "untied_relu": {"hidden_act": "relu", "tie_word_embeddings": False},
    "mean_pooling": {"classifier_pooling": "mean"},  # the classifier reads the mean of the real tokens
}
PAIRS = [
    ("paris is the capital of france .", "the cat sat on the mat ."),
    ("the dog ran fast .", "london is the capital of england and the city is big ."),
    ("this is the best story , i love it !", "rome ."),
]
TOLERANCE = 1e-5


@pytest.fixture
def pair_batch(tokenizer: BertTokenizer) -> dict[str, np.ndarray]:
    """Right-padded sentence pairs with token types: rows of three different lengths."""
    batch = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="np")
    assert batch["attention_mask"].min() == 0 and batch["token_type_ids"].max() == 1
    return dict(batch)


def _config(tokenizer: BertTokenizer, **overrides: object) -> hf_bertscratch.BertScratchConfig:
    return hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), num_labels=3, **overrides)


def _torch_outputs(model: torch.nn.Module, batch: dict[str, np.ndarray], field: str) -> np.ndarray:
    with torch.no_grad():
        outputs = model(**{name: torch.from_numpy(array) for name, array in batch.items()})
    return getattr(outputs, field).numpy()


def _flax_outputs(model: nnx.Module, batch: dict[str, np.ndarray], field: str) -> np.ndarray:
    outputs = model(batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"])
    return np.asarray(getattr(outputs, field))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("torch_class, flax_class, field", HEADS, ids=[flax.__name__ for _, flax, _ in HEADS])
def test_flax_matches_torch_on_padded_pairs(
    torch_class, flax_class, field, variant: str, tokenizer, pair_batch, tmp_path: Path
) -> None:
    torch_model = torch_class(_config(tokenizer, **VARIANTS[variant])).eval()
    torch_model.save_pretrained(tmp_path)
    flax_model = flax_class.from_pretrained(tmp_path)
    expected = _torch_outputs(torch_model, pair_batch, field)
    actual = _flax_outputs(flax_model, pair_batch, field)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE)
    if field == "last_hidden_state":  # the pooler too
        pooled = flax_model(pair_batch["input_ids"], pair_batch["attention_mask"], pair_batch["token_type_ids"])
        with torch.no_grad():
            torch_pooled = torch_model(**{k: torch.from_numpy(v) for k, v in pair_batch.items()}).pooler_output
        np.testing.assert_allclose(np.asarray(pooled.pooler_output), torch_pooled.numpy(), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize(
    "auto_class, flax_class, field",
    [
        (AutoModel, FlaxBertScratchModel, "last_hidden_state"),
        (AutoModelForMaskedLM, FlaxBertScratchForMaskedLM, "logits"),
        (AutoModelForSequenceClassification, FlaxBertScratchForSequenceClassification, "logits"),
    ],
    ids=["base", "mlm", "classification"],
)
def test_flax_save_reloads_in_torch(auto_class, flax_class, field, tokenizer, pair_batch, tmp_path: Path) -> None:
    flax_model = flax_class(_config(tokenizer), rngs=nnx.Rngs(3))
    flax_model.eval()
    (tmp_path / "keep.txt").write_text("other work\n")
    flax_model.save_pretrained(tmp_path)
    torch_model, info = auto_class.from_pretrained(tmp_path, output_loading_info=True)
    assert type(torch_model).__name__ == flax_class.torch_class_name
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    np.testing.assert_allclose(
        _flax_outputs(flax_model, pair_batch, field),
        _torch_outputs(torch_model.eval(), pair_batch, field),
        rtol=0,
        atol=TOLERANCE,
    )
    assert (tmp_path / "keep.txt").read_text() == "other work\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_mlm_checkpoint_loads_into_classifier_with_new_head(tokenizer, tmp_path: Path, caplog) -> None:
    hf_bertscratch.BertScratchForMaskedLM(_config(tokenizer)).save_pretrained(tmp_path)
    torch_encoder = hf_bertscratch.BertScratchModel.from_pretrained(tmp_path, add_pooling_layer=False)
    model = FlaxBertScratchForSequenceClassification.from_pretrained(tmp_path)
    np.testing.assert_array_equal(
        np.asarray(model.bert.embeddings.word_embeddings.embedding[...]),
        torch_encoder.embeddings.word_embeddings.weight.detach().numpy(),
    )
    assert "classifier.weight" in caplog.text and "bert.pooler.dense.weight" in caplog.text


def test_bad_inputs_raise_naming_the_value(tokenizer) -> None:
    model = FlaxBertScratchModel(_config(tokenizer))
    with pytest.raises(ValueError, match=r"input_ids contains 999, outside \[0, \d+\] \(vocab_size="):
        model(np.array([[2, 999, 3]]))
    with pytest.raises(ValueError, match=r"must have shape \(batch, seq_len\); got shape \(3,\)"):
        model(np.array([2, 5, 3]))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings=64"):
        model(np.full((1, 65), 5))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of input_ids \(1, 3\); got \(1, 2\)"):
        model(np.array([[2, 5, 3]]), attention_mask=np.ones((1, 2), int))


def test_checkpoint_shape_mismatch_raises(tokenizer, tmp_path: Path) -> None:
    hf_bertscratch.BertScratchForMaskedLM(_config(tokenizer)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["intermediate_size"] = 40
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"'bert.encoder.layers.0.mlp.fc_in.bias' has shape \(37,\), expected "
        r"\(40,\) by the config \(.*intermediate_size=40",
    ):
        FlaxBertScratchForMaskedLM.from_pretrained(tmp_path)


# ------------------------------------------------------------------------------------------------ training


@pytest.fixture
def masked_batch(tokenizer: BertTokenizer) -> dict[str, np.ndarray]:
    """A batch masked by the pretraining collator (30% of tokens, 80/10/10), right-padded rows."""
    texts = [
        "paris is the capital of france and the city is big .",
        "the cat sat on the mat .",
        "the movie was great and the acting was wonderful .",
        "rome is the capital of italy .",
    ]
    examples = [{"input_ids": ids} for ids in tokenizer(texts)["input_ids"]]
    collator = SeededMaskingCollator(tokenizer, mlm_probability=0.3, seed=1)
    batch = {name: tensor.numpy() for name, tensor in collator(examples).items()}
    assert (batch["labels"] != -100).sum() > 4 and batch["attention_mask"].min() == 0
    return batch


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| relative to max |expected|: the scale of a tensor, so near-zero entries (whose
    rounding noise is large relative to themselves) are judged against the tensor's own size."""
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-30))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_mlm_loss_and_gradients_match_torch(sparse: bool, tokenizer, masked_batch, tmp_path: Path) -> None:
    config = _config(tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch_model = hf_bertscratch.BertScratchForMaskedLM(config).train()  # sparse prediction, unpadded, as training
    torch_model.save_pretrained(tmp_path)
    loss = torch_model(**{name: torch.from_numpy(array) for name, array in masked_batch.items()}).loss
    loss.backward()
    torch_grads = {name: p.grad.numpy() for name, p in torch_model.named_parameters()}

    flax_model = FlaxBertScratchForMaskedLM.from_pretrained(tmp_path)
    flax_model.train()
    num_predictions = num_predictions_for(masked_batch["labels"], multiple=8) if sparse else None
    flax_loss, grads = mlm_loss_and_grads(flax_model, masked_batch, num_predictions)
    assert abs(float(flax_loss) - loss.item()) <= TOLERANCE * loss.item()

    nnx.update(flax_model, grads)  # the gradients, laid out like the torch parameters
    flax_grads = flax_model.torch_state_dict()
    assert set(flax_grads) == set(torch_grads)
    errors = {name: _relative_error(flax_grads[name], torch_grads[name]) for name in torch_grads}
    assert max(errors.values()) <= TOLERANCE, {name: e for name, e in errors.items() if e > TOLERANCE}


def test_adamw_step_matches_torch_adamw(tokenizer, masked_batch, tmp_path: Path) -> None:
    """One jitted step equals torch AdamW as the Trainer sets it up: clipping, no decay on biases and LayerNorms."""
    config = _config(tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch_model = hf_bertscratch.BertScratchForMaskedLM(config).train()
    torch_model.save_pretrained(tmp_path)
    decay = [p for n, p in torch_model.named_parameters() if not (n.endswith("bias") or "layer_norm" in n)]
    no_decay = [p for n, p in torch_model.named_parameters() if n.endswith("bias") or "layer_norm" in n]
    lr, weight_decay, max_norm = 1e-3, 0.1, 1.0
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.98),
        eps=1e-8,
    )
    torch_model(**{name: torch.from_numpy(array) for name, array in masked_batch.items()}).loss.backward()
    torch.nn.utils.clip_grad_norm_(torch_model.parameters(), max_norm)
    optimizer.step()

    flax_model = FlaxBertScratchForMaskedLM.from_pretrained(tmp_path)
    flax_model.train()
    flax_optimizer = make_optimizer(
        flax_model, lr, b1=0.9, b2=0.98, eps=1e-8, weight_decay=weight_decay, max_grad_norm=max_norm
    )
    make_mlm_train_step()(flax_model, flax_optimizer, masked_batch, num_predictions_for(masked_batch["labels"]))
    updated = flax_model.torch_state_dict()
    for name, parameter in torch_model.state_dict().items():
        if name in updated:
            # Adam's first step moves every weight by about lr: 1e-6 is 0.1% of the step.
            np.testing.assert_allclose(updated[name], parameter.numpy(), rtol=0, atol=1e-6, err_msg=name)


# ------------------------------------------------------------------------------------- pretraining entry point


def test_pretrain_flax_writes_a_folder_torch_loads(tokenizer_dir, text_file, tiny_config, tmp_path: Path) -> None:
    from hf_bertscratch.flax.pretraining import main as pretraining_main
    from hf_bertscratch_cli.dispatch import main as cli_main

    tiny_config.hidden_dropout_prob = tiny_config.attention_probs_dropout_prob = 0.0
    tiny_config.save_pretrained(tmp_path / "config")
    output_dir = tmp_path / "run"
    argv = [
        "--output_dir",
        str(output_dir),
        "--train_file",
        str(text_file),
        "--tokenizer_name",
        str(tokenizer_dir),
        "--config_name",
        str(tmp_path / "config"),
        "--max_seq_length",
        "16",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--logging_steps",
        "1",
        "--learning_rate",
        "1e-3",
    ]
    output_dir.mkdir()
    for leftover in ("predictions.csv", "confusion_matrix.png", "notes.txt"):  # an earlier fine-tune's, and the user's
        (output_dir / leftover).write_text("earlier")
    cli_main(["pretrain-flax", *argv])
    assert sorted(
        path.name for path in output_dir.glob("*.*") if path.stem in ("predictions", "confusion_matrix", "notes")
    ) == ["notes.txt"]

    results = json.loads((output_dir / "all_results.json").read_text())
    assert results["train_steps"] == 3 and np.isfinite(results["eval_loss"]) and 0 <= results["eval_accuracy"] <= 1
    torch_model, info = AutoModelForMaskedLM.from_pretrained(output_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    trained = FlaxBertScratchForMaskedLM.from_pretrained(output_dir)
    new = hf_bertscratch.BertScratchForMaskedLM(tiny_config)  # not what was saved: training changed the weights
    saved = torch_model.state_dict()
    assert not torch.equal(saved["cls.dense.weight"], new.state_dict()["cls.dense.weight"])
    ids = np.array([[2, 10, 11, 4, 12, 3]])
    np.testing.assert_allclose(
        np.asarray(trained(ids).logits),
        _torch_outputs(torch_model.eval(), {"input_ids": ids}, "logits"),
        rtol=0,
        atol=TOLERANCE,
    )
    with pytest.raises(ValueError, match="already holds a finished run"):
        pretraining_main(argv)
    with pytest.raises(ValueError, match="--max_train_samples must be a positive number of examples.*got 0"):
        pretraining_main([*argv, "--max_train_samples", "0"])  # the torch side's check, before anything is loaded


def test_pretrain_flax_continues_a_transformers_bert_from_its_converted_weights(
    tokenizer: BertTokenizer, text_file, tmp_path: Path
) -> None:
    """`--model_name_or_path` with transformers' BERT starts from its weights, converted on load as `pretrain`
    converts them: at a learning rate too small to move them, the saved embeddings are the BERT's."""
    from transformers import BertConfig, BertForMaskedLM

    from hf_bertscratch.flax.pretraining import main as pretraining_main

    bert = BertForMaskedLM(BertConfig(**tiny_config_kwargs(len(tokenizer)), architectures=["BertForMaskedLM"]))
    bert.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    output_dir = tmp_path / "run"
    pretraining_main(
        [
            "--output_dir",
            str(output_dir),
            "--train_file",
            str(text_file),
            "--model_name_or_path",
            str(tmp_path / "bert"),
        ]
        + [
            "--max_seq_length",
            "16",
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "4",
            "--learning_rate",
            "1e-12",
        ]
    )
    saved = AutoModelForMaskedLM.from_pretrained(output_dir).state_dict()
    torch.testing.assert_close(
        saved["bert.embeddings.word_embeddings.weight"],
        bert.bert.embeddings.word_embeddings.weight.detach(),
        atol=1e-6,
        rtol=0,
    )


def test_pretrain_flax_leaves_a_fine_tuned_folders_task_out_of_the_pretrained_config(
    tokenizer: BertTokenizer, text_file, tmp_path: Path
) -> None:
    """As `pretrain` does: a fine-tuned classifier pretrained on keeps its encoder, not the labels, head settings and
    input columns fine-tuning recorded for its task."""
    from test_pretraining import FINE_TUNED_ENTRIES, save_fine_tuned_classifier

    from hf_bertscratch.flax.pretraining import main as pretraining_main

    reviews, output_dir = save_fine_tuned_classifier(tmp_path / "reviews", tokenizer), tmp_path / "run"
    argv = ["--output_dir", str(output_dir), "--train_file", str(text_file), "--model_name_or_path", str(reviews)]
    pretraining_main([*argv, "--max_seq_length", "16", "--max_steps", "2", "--per_device_train_batch_size", "4"])
    pretrained, new = AutoConfig.from_pretrained(output_dir), hf_bertscratch.BertScratchConfig()
    for name in FINE_TUNED_ENTRIES:
        assert getattr(pretrained, name) == getattr(new, name), name


# ------------------------------------------------------------------------------------------------- benchmark


@pytest.mark.slow  # about 10 s, nearly all of it XLA compiling the tiny preset's ops and training step
def test_benchmark_prints_parity_and_the_step_times_it_measured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`python -m hf_bertscratch.flax.benchmark` on the tiny preset, one timed step a side: a parity line per head with a tiny
    difference (the same weights on both sides), and the torch and JAX step times it measured, each under its name."""
    from hf_bertscratch.flax import benchmark as flax_benchmark

    measured: dict[str, float] = {}
    real_median_seconds = flax_benchmark._median_seconds

    def recording_median_seconds(step, steps: int, warmup: int) -> float:
        measured[step.__name__] = real_median_seconds(step, steps, warmup)
        return measured[step.__name__]

    monkeypatch.setattr(flax_benchmark, "_median_seconds", recording_median_seconds)
    monkeypatch.setattr(flax_benchmark.tempfile, "mkdtemp", lambda: str(tmp_path))
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))  # main appends to it: restored afterwards
    threads = torch.get_num_threads()
    try:
        flax_benchmark.main(
            ["--model_size", "tiny", "--vocab_size", "64", "--batch_size", "2", "--seq_len", "16"]
            + ["--steps", "1", "--warmup", "1", "--threads", "1"]
        )
    finally:
        torch.set_num_threads(threads)
    lines = capsys.readouterr().out.splitlines()
    parity = [line.split() for line in lines if line.startswith("parity ")]
    assert [(words[1], words[2]) for words in parity] == [(flax.__name__, name) for _, flax, name in HEADS]
    assert all(float(words[-1]) < TOLERANCE for words in parity), parity
    (timing,) = [line for line in lines if line.startswith("MLM train step")]
    assert set(measured) == {"torch_step", "flax_step"}
    assert f"torch {measured['torch_step'] * 1000:.1f} ms, JAX {measured['flax_step'] * 1000:.1f} ms" in timing
    assert "(tiny, V=64, batch 2 x 16, 1 thread(s))" in timing and timing.endswith("(median of 1)")


def test_flax_classifier_refuses_a_pooling_only_torch_computes(tokenizer: BertTokenizer) -> None:
    with pytest.raises(ValueError, match="got 'segments', which only the PyTorch model computes"):
        FlaxBertScratchForSequenceClassification(_config(tokenizer, classifier_pooling="segments"))
