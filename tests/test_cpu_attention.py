"""Which attention function CPU training runs (`hf_bertscratch.cpu_matmul.eager_attention_trains_faster`): the eager
function or sdpa's kernel, whichever the probe timed faster for the shape and dtype; both give the same loss and
gradients; the probe is keyed by heads, head size, T rounded up to a power of two and dtype, and leaves the global
generator as it was; eval, no autograd, compiling and the switch off keep sdpa without probing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, cpu_matmul
from hf_bertscratch import modeling_bertscratch as modeling
from tests.conftest import tiny_config_kwargs


def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cpu_matmul.json")
    cpu_matmul.set_path(None)


def _timed(key: str, winner: str) -> None:
    """The choice for `key` already timed `MAX_PROBES` times, `winner` ("eager" or "sdpa") the faster."""
    seconds = {"sdpa": 2.0, "eager": 2.0, winner: 1.0}
    cpu_matmul.write_cache("training_attention", {key: {"seconds": seconds, "probes": cpu_matmul.MAX_PROBES}})


def test_the_probe_key_rounds_t_up_to_a_power_of_two() -> None:
    key, shape = cpu_matmul.attention_probe(torch.empty(3, 4, 100, 32))
    assert key == "4 heads of 32, T 128, float32" and shape == (16, 4, 128, 32)
    key, shape = cpu_matmul.attention_probe(torch.empty(1, 2, 5, 64, dtype=torch.bfloat16))
    assert key == "2 heads of 64, T 16, bfloat16" and shape == (2048, 2, 16, 64)
    assert cpu_matmul.attention_probe(torch.empty(1, 12, 512, 64))[1] == (1, 12, 512, 64)


@pytest.mark.parametrize("winner", ["eager", "sdpa"])
def test_training_runs_the_faster_function_and_the_same_gradients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, winner: str
) -> None:
    _fresh_cache(tmp_path, monkeypatch)
    config = BertScratchConfig(**tiny_config_kwargs(50), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = BertScratchForMaskedLM(config).train()
    input_ids = torch.randint(1, 50, (3, 10))
    heads, head_size = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    _timed(f"{heads} heads of {head_size}, T 16, float32", winner)
    eager_calls: list[tuple[int, ...]] = []
    eager = modeling.eager_attention_forward
    monkeypatch.setattr(
        modeling, "eager_attention_forward", lambda m, q, *a, **k: eager_calls.append(q.shape) or eager(m, q, *a, **k)
    )
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    assert len(eager_calls) == (config.num_hidden_layers if winner == "eager" else 0)
    gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    monkeypatch.setenv(cpu_matmul.ENV, "default")  # sdpa's kernel throughout
    reference = model(input_ids=input_ids, labels=input_ids).loss
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(gradients[name], p.grad, rtol=1e-5, atol=1e-6, msg=name)
    cpu_matmul.set_path(None)


def test_the_probe_times_both_once_and_leaves_the_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_cache(tmp_path, monkeypatch)
    query = torch.randn(2, 2, 20, 8, requires_grad=True)
    attention = modeling.BertScratchAttention(BertScratchConfig(**tiny_config_kwargs(50)))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    faster = cpu_matmul.eager_attention_trains_faster(query, attention._eager)
    assert torch.equal(torch.get_rng_state(), state)
    (entry,) = [entry for entry in cpu_matmul.measured_choices() if entry["section"] == "training_attention"]
    assert entry["key"] == "2 heads of 8, T 32, float32" and entry["how"] == "measured"
    assert set(entry["seconds"]) == {"sdpa", "eager"}
    assert faster == (entry["seconds"]["eager"] < entry["seconds"]["sdpa"])
    assert entry["choice"] == f"Attention in CPU training through {'the eager function' if faster else 'sdpa'}"
    cached = cpu_matmul.read_cache("training_attention")["2 heads of 8, T 32, float32"]
    assert cached == {"seconds": entry["seconds"], "probes": 1}
    cpu_matmul.set_path(None)


@pytest.mark.parametrize("how", ["no autograd", "switch off", "compiling"])
def test_elsewhere_sdpa_runs_without_a_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    _fresh_cache(tmp_path, monkeypatch)
    query = torch.randn(2, 2, 20, 8, requires_grad=how != "no autograd")
    if how == "switch off":
        monkeypatch.setenv(cpu_matmul.ENV, "off")
    if how == "compiling":
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(cpu_matmul, "time_interleaved", lambda *a, **k: pytest.fail("probed"))
    assert not cpu_matmul.eager_attention_trains_faster(query, lambda q, k, v: q)
    assert cpu_matmul.read_cache("training_attention") is None
    cpu_matmul.set_path(None)
