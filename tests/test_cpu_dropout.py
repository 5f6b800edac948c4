"""Dropout in CPU training (`hf_bertscratch.cpu_matmul.apply_dropout`): where 16-bit draws are chosen, the keep mask
drops each element at the configured rate (rounded to 2**-16) and keeps the expectation, its gradient is the same mask,
seeds repeat it, the probe leaves the global generator as it was, and the model's hidden and attention dropouts all
draw through it; where bernoulli is chosen or the switch is off, it is torch's dropout itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, cpu_matmul
from tests.conftest import tiny_config_kwargs


def _choose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, winner: str | None) -> None:
    """A fresh cache for this test's choices; with `winner`, the dropout choice already timed there ("16-bit draws"
    or "bernoulli" the faster), as a machine that has run the probe `MAX_PROBES` times reads it."""
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cpu_matmul.json")
    cpu_matmul.set_path(None)
    if winner is not None:
        seconds = {"bernoulli": 2.0, "16-bit draws": 2.0, winner: 1.0}
        entry = {"seconds": seconds, "probes": cpu_matmul.MAX_PROBES}
        cpu_matmul.write_cache("dropout", {cpu_matmul.DROPOUT_PROBE_KEY: entry})


@pytest.fixture
def bits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """16-bit draws chosen on this machine."""
    _choose(tmp_path, monkeypatch, "16-bit draws")
    yield
    cpu_matmul.set_path(None)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_draws_drop_at_the_rate_and_keep_the_expectation(bits: None, p: float) -> None:
    torch.manual_seed(0)
    out = cpu_matmul.apply_dropout(torch.ones(1 << 20), p)
    scale = 1 / (1 - round(p * 2**16) / 2**16)
    assert out.unique().tolist() == [0.0, pytest.approx(scale, rel=1e-6)]
    sigma = (p * (1 - p) / out.numel()) ** 0.5
    assert (out == 0).float().mean().item() == pytest.approx(p, abs=5 * sigma)
    for lane in range(4):  # the four 16-bit draws of each 64-bit number are each uniform
        assert (out[lane::4] == 0).float().mean().item() == pytest.approx(p, abs=10 * sigma)
    assert out.mean().item() == pytest.approx(1.0, abs=5 * sigma * scale)


def test_the_gradient_is_the_same_mask(bits: None) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8, 64, requires_grad=True)
    out = cpu_matmul.apply_dropout(x, 0.3)
    grad = torch.randn_like(x)
    out.backward(grad)
    scale = 1 / (1 - round(0.3 * 2**16) / 2**16)
    kept = out != 0
    assert 0 < kept.sum() < x.numel()
    torch.testing.assert_close(out, x.detach() * kept * scale, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, grad * kept * scale, rtol=0, atol=0)


def test_a_seed_repeats_the_mask_and_the_generator_moves_on(bits: None) -> None:
    x = torch.ones(1000)
    torch.manual_seed(7)
    first, second = cpu_matmul.apply_dropout(x, 0.2), cpu_matmul.apply_dropout(x, 0.2)
    torch.manual_seed(7)
    assert torch.equal(cpu_matmul.apply_dropout(x, 0.2), first)
    assert not torch.equal(first, second)


def test_the_probe_leaves_the_global_generator_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _choose(tmp_path, monkeypatch, None)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    cpu_matmul.draws_dropout_bits(torch.ones(3))  # times both candidates now
    assert torch.equal(torch.get_rng_state(), state)
    (entry,) = [entry for entry in cpu_matmul.measured_choices() if entry["section"] == "dropout"]
    assert set(entry["seconds"]) == {"bernoulli", "16-bit draws"} and entry["how"] == "measured"
    assert entry["choice"].startswith("Dropout masks in CPU training drawn with ")
    cpu_matmul.set_path(None)


@pytest.mark.parametrize("how", ["bernoulli faster", "switch off", "eval", "compiling"])
def test_elsewhere_it_is_torchs_dropout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    _choose(tmp_path, monkeypatch, "bernoulli" if how == "bernoulli faster" else "16-bit draws")
    if how == "switch off":
        monkeypatch.setenv(cpu_matmul.ENV, "off")
    if how == "compiling":
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    training = how != "eval"
    x = torch.randn(64, 64)
    torch.manual_seed(1)
    expected = F.dropout(x, 0.25, training)
    torch.manual_seed(1)
    assert torch.equal(cpu_matmul.apply_dropout(x, 0.25, training), expected)
    cpu_matmul.set_path(None)


def test_the_models_hidden_and_attention_dropouts_draw_bits(bits: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """In CPU training under sdpa, every dropout of the encoder (embeddings, each layer's attention probabilities and
    its two residual branches) draws through `apply_dropout`: attention runs the eager function, sdpa's kernel would
    draw its own mask with bernoulli."""
    config = BertScratchConfig(**tiny_config_kwargs(50), hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = BertScratchForMaskedLM(config).train()
    drawn: list[tuple[int, ...]] = []
    draw = cpu_matmul._dropout_from_bits
    monkeypatch.setattr(cpu_matmul, "_dropout_from_bits", lambda x, p: drawn.append(tuple(x.shape)) or draw(x, p))
    input_ids = torch.randint(1, 50, (3, 10))
    torch.manual_seed(2)
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    batch, heads, hidden = 3, config.num_attention_heads, config.hidden_size
    layer = [(batch, heads, 10, 10), (batch, 10, hidden), (batch, 10, hidden)]
    assert drawn == [(batch, 10, hidden), *layer * config.num_hidden_layers]
    torch.manual_seed(2)
    assert model(input_ids=input_ids, labels=input_ids).loss.item() == loss.item()  # the seed repeats the step
    model.eval()
    assert model(input_ids=input_ids, labels=input_ids).loss.item() != loss.item()
