"""PyTorch's own variable-length attention (`torch.nn.attention.varlen`) under sdpa: where it applies (a CUDA device,
half precision, no attention dropout in training), a padded or padding-free batch's attention runs over its real
tokens as one row of sequences, with no pad and unpad around each layer, and every token gets what the padded
computation gives it.

On a CPU the kernel does not exist (its FlashAttention kernel is CUDA's): `cpu_varlen` stands in for it with SDPA per
sequence, under the kernel's contract, and lets the CPU count as a device where it applies, so that everything above
the kernel (the plan, the sequence bounds, the layout of the heads) is the real code path. The CUDA-marked tests at
the end run the real kernel.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from torch.nn import functional as F

import hf_bertscratch
from hf_bertscratch import BertScratchConfig, batching_bertscratch
from tests.conftest import tiny_config_kwargs

VOCAB = 99
BF16_TOLERANCE = 2e-2


def _sdpa_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    """(T, nh, hs) in and out: one sequence's attention."""
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), scale=scale)
    return out.transpose(0, 1)


@pytest.fixture
def cpu_varlen(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """PyTorch's varlen kernel on a CPU: `torch_varlen_attention` returns an SDPA stand-in with `varlen_attn`'s
    signature, and the CPU is a device where it applies. Returns the calls made: the bounds and the tokens."""
    calls: list[dict] = []

    def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k):  # noqa: ANN001, ANN202
        """varlen_attn's contract since PyTorch 2.10: (N, nh, hs) tokens in half precision, int32 bounds, the
        longest known, scaled by 1/sqrt(hs) (2.10 and 2.11 take no `scale`)."""
        scale = None
        bounds = cu_seq_q.tolist()
        assert cu_seq_q.dtype == torch.int32 and torch.equal(cu_seq_q, cu_seq_k)
        assert max_q == max_k == max(b - a for a, b in zip(bounds, bounds[1:]))
        assert query.dim() == 3 and bounds[-1] == query.shape[0] and query.stride(-1) == 1
        assert query.dtype in batching_bertscratch.TORCH_VARLEN_DTYPES
        calls.append({"bounds": bounds, "tokens": query.shape[0]})
        out = torch.empty_like(query)
        for start, end in zip(bounds, bounds[1:]):
            out[start:end] = _sdpa_rows(query[start:end], key[start:end], value[start:end], scale)
        return out

    monkeypatch.setattr(batching_bertscratch, "torch_varlen_attention", lambda: varlen_attn)
    monkeypatch.setattr(batching_bertscratch.DEVICE_RULES, "torch_varlen_devices", ("cpu",))
    return calls


def _model(head: str = "BertScratchForMaskedLM", **overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    kwargs = {**tiny_config_kwargs(VOCAB), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **overrides}
    config = BertScratchConfig(**kwargs, attn_implementation="sdpa")
    return getattr(hf_bertscratch, head)(config).eval()


def _padded_batch() -> dict[str, torch.Tensor]:
    """Right, left and middle padding and a row with no padding (lengths 7, 4, 5, 9 of 9)."""
    ids = torch.randint(5, VOCAB, (4, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    mask[1, :5] = 0
    mask[2, 2:6] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _without_varlen(model: torch.nn.Module, batch: dict, **kwargs: object) -> torch.Tensor:
    with batching_bertscratch.device_rules(torch_varlen_devices=()):
        return model(**batch, **kwargs)


def test_a_padded_bf16_batch_runs_varlen_on_its_real_tokens(cpu_varlen: list[dict]) -> None:
    model = _model().to(torch.bfloat16)
    batch = _padded_batch()
    with torch.no_grad():
        varlen = model(**batch).logits.float()
        assert len(cpu_varlen) == model.config.num_hidden_layers  # one call per layer, nothing padded around it
        padded = _without_varlen(model, batch).logits.float()
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(varlen[real], padded[real], atol=BF16_TOLERANCE, rtol=BF16_TOLERANCE)
    assert not varlen[~real].any()  # pad positions are zero, as in any unpadded run
    assert {tuple(call["bounds"]) for call in cpu_varlen} == {(0, 7, 11, 16, 25)}  # the rows' real tokens


def test_autocast_counts_as_half_precision(cpu_varlen: list[dict]) -> None:
    """An fp32 model under bf16 autocast computes its attention in bf16: the kernel applies."""
    model = _model()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(**_padded_batch())
    assert len(cpu_varlen) == model.config.num_hidden_layers


@pytest.mark.parametrize(
    ("case", "applies"),
    [
        ("fp32", False),  # the kernel computes in half precision only
        ("bf16 eval", True),
        ("bf16 training, no attention dropout", True),
        ("bf16 training, attention dropout", False),  # the kernel has no dropout
        ("eager", False),  # sdpa's kernel, not eager's
        ("head size 12", False),  # not a multiple of 8
        ("attentions asked for", False),  # per-position outputs keep the batch padded
    ],
)
def test_where_the_kernel_applies(cpu_varlen: list[dict], case: str, applies: bool) -> None:
    overrides: dict[str, object] = {}
    if case == "bf16 training, attention dropout":
        overrides["attention_probs_dropout_prob"] = 0.1
    if case == "head size 12":
        overrides.update(hidden_size=24, num_attention_heads=2, intermediate_size=48)
    model = _model(**overrides)
    if case != "fp32":
        model.to(torch.bfloat16)
    if case.startswith("bf16 training"):
        model.train()
    if case == "eager":
        model.config._attn_implementation = "eager"
    model(**_padded_batch(), output_attentions=case == "attentions asked for")
    assert bool(cpu_varlen) is applies


def test_a_padding_free_batch_gives_each_document_what_it_gets_alone(cpu_varlen: list[dict]) -> None:
    model = _model("BertScratchModel").to(torch.bfloat16)
    documents = [[2, 11, 12, 13, 3], [2, 14, 3], [2, 15, 16, 17, 18, 3]]
    batch = transformers.DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": ids} for ids in documents])
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).last_hidden_state[0]
        alone = [_without_varlen(model, {"input_ids": torch.tensor([ids])}).last_hidden_state[0] for ids in documents]
    torch.testing.assert_close(packed.float(), torch.cat(alone).float(), atol=BF16_TOLERANCE, rtol=BF16_TOLERANCE)
    assert {tuple(call["bounds"]) for call in cpu_varlen} == {(0, 5, 8, 14)}


def test_the_switch_turns_the_kernel_off_for_a_process(cpu_varlen: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """BERTSCRATCH_TORCH_VARLEN=off: the batch runs as without the kernel, with the same outputs; a bad value is
    refused by name."""
    model, batch = _model().to(torch.bfloat16), _padded_batch()
    monkeypatch.setenv("BERTSCRATCH_TORCH_VARLEN", "off")
    with torch.no_grad():
        off = model(**batch).logits
        assert not cpu_varlen
        torch.testing.assert_close(off, _without_varlen(model, batch).logits, atol=0, rtol=0)
    monkeypatch.setenv("BERTSCRATCH_TORCH_VARLEN", "on")
    with torch.no_grad():
        model(**batch)
    assert len(cpu_varlen) == model.config.num_hidden_layers
    monkeypatch.setenv("BERTSCRATCH_TORCH_VARLEN", "0")
    with pytest.raises(ValueError, match=r"BERTSCRATCH_TORCH_VARLEN must be one of \['on', 'off'\], got '0'"):
        model(**batch)


def test_device_rules_are_restored_and_refuse_unknown_names() -> None:
    before = batching_bertscratch.DEVICE_RULES.unpad_min_hidden
    with batching_bertscratch.device_rules(unpad_min_hidden={}) as rules:
        assert rules.unpad_min_hidden == {}
        assert batching_bertscratch.unpadding_pays(_model().config, torch.device("cuda"))
    assert batching_bertscratch.DEVICE_RULES.unpad_min_hidden == before
    with pytest.raises(TypeError, match=r"Unknown device rule\(s\) \['unpad_from'\]; expected some of"):
        with batching_bertscratch.device_rules(unpad_from=0):
            pass


# ------------------------------------------------------------------------------------------------- on a GPU


@pytest.mark.cuda
def test_the_kernel_on_a_gpu_matches_the_padded_computation_in_training() -> None:
    """Under bf16 autocast on CUDA a padded batch's attention runs through the real kernel (PyTorch >= 2.10), and the
    loss, the logits at real positions and the gradients match the same model run padded (`unpad_inputs=False`)."""
    if batching_bertscratch.torch_varlen_attention() is None:
        pytest.skip("this PyTorch has no torch.nn.attention.varlen")
    batch = {name: tensor.cuda() for name, tensor in _padded_batch().items()}
    labels = torch.where(batch["attention_mask"].bool(), batch["input_ids"], -100)
    results = {}
    for way in ("varlen", "padded"):
        model = _model().cuda().train()
        model.config.unpad_inputs = way == "varlen"
        calls = []
        attend = batching_bertscratch.BertScratchVarlen.attend

        def counting(*args: object, attend=attend, calls=calls) -> torch.Tensor:  # noqa: ANN001
            calls.append(1)
            return attend(*args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(batching_bertscratch.BertScratchVarlen, "attend", counting)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                output = model(**batch, labels=labels)
            output.loss.backward()
        assert bool(calls) is (way == "varlen")
        grads = {name: p.grad.float().cpu() for name, p in model.named_parameters() if p.grad is not None}
        results[way] = (output.loss.float().item(), output.logits.float().cpu(), grads)
    (loss, logits, grads), (padded_loss, padded_logits, padded_grads) = results["varlen"], results["padded"]
    real = batch["attention_mask"].bool().cpu()
    assert abs(loss - padded_loss) < BF16_TOLERANCE * max(1.0, abs(padded_loss))
    torch.testing.assert_close(logits[real], padded_logits[real], atol=5e-2, rtol=5e-2)
    for name, grad in padded_grads.items():
        torch.testing.assert_close(grads[name], grad, atol=5e-2, rtol=5e-2, msg=lambda m, name=name: f"{name}: {m}")
