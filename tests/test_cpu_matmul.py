"""The CPU GEMM path (`hf_bertscratch.cpu_matmul`): oneDNN on prepacked weights gives `F.linear`'s numbers, runs only
where autograd is not needed, follows weight changes, is never saved or copied, and is chosen once per machine."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import transformers
from torch import nn
from torch.nn import functional as F

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, convert, cpu_matmul
from tests.conftest import tiny_config_kwargs

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")


@pytest.fixture
def path() -> Iterator[None]:
    """Restore the process's GEMM path after a test forces one."""
    yield
    cpu_matmul.set_path(None)


def _linear(bias: bool = True) -> cpu_matmul.BertScratchLinear:
    torch.manual_seed(0)
    return cpu_matmul.BertScratchLinear(48, 40, bias=bias)


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_onednn_gives_the_default_paths_numbers(path: None, bias: bool) -> None:
    cpu_matmul.set_path("onednn")
    layer = _linear(bias)
    for shape in ((7, 48), (3, 5, 48), (1, 48)):
        x = torch.randn(shape)
        with torch.inference_mode():
            fast = layer(x)
        assert layer._packed is not None  # it ran on the packed weight
        torch.testing.assert_close(fast, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)


@needs_onednn
def test_autograd_and_the_default_path_use_f_linear(path: None) -> None:
    layer, x = _linear(), torch.randn(6, 48)
    cpu_matmul.set_path("onednn")
    layer(x).sum().backward()  # autograd on: F.linear, with gradients
    assert layer._packed is None and layer.weight.grad is not None
    cpu_matmul.set_path("default")
    with torch.no_grad():
        layer(x)
    assert layer._packed is None


@needs_onednn
def test_the_packed_weight_follows_weight_changes_and_is_not_state(path: None) -> None:
    cpu_matmul.set_path("onednn")
    layer, x = _linear(), torch.randn(6, 48)
    with torch.no_grad():
        layer(x)
        layer.weight.mul_(2.0)  # in place: a new version of the same memory
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
        layer.to(torch.float64).to(torch.float32)  # new memory
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    assert set(layer.state_dict()) == set(nn.Linear(48, 40).state_dict())
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert clone._packed is None
        with torch.no_grad():
            torch.testing.assert_close(clone(x), layer(x))


@needs_onednn
def test_a_model_made_in_inference_mode_runs_and_follows_its_weights(path: None) -> None:
    """Weights made inside `torch.inference_mode()` (a model built there) are inference tensors, which keep no version
    to tell a change by: the layers and the fused products run as `F.linear` would, through changes made in place."""
    cpu_matmul.set_path("onednn")
    x, residual = torch.randn(6, 48), torch.randn(6, 40)
    with torch.inference_mode():
        layer = _linear()
        for _ in range(2):
            product = F.linear(x, layer.weight, layer.bias)
            torch.testing.assert_close(layer(x), product, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(
                cpu_matmul.linear_act(layer, x, nn.GELU(), "gelu"), F.gelu(product), atol=1e-5, rtol=1e-5
            )
            torch.testing.assert_close(
                cpu_matmul.linear_add(layer, x, residual, nn.Dropout(0.1).eval()),
                residual + product,
                atol=1e-5,
                rtol=1e-5,
            )
            layer.weight.mul_(2.0)


@needs_onednn
def test_an_optimizer_step_between_evaluations_is_seen(path: None) -> None:
    """Trainer's fused AdamW changes the weight in place without bumping its version counter; evaluating after the
    next training step (train(), step, eval()) still reads the new weight."""
    cpu_matmul.set_path("onednn")
    layer, x = _linear(), torch.randn(6, 48)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True)
    for _ in range(2):
        layer.eval()
        with torch.no_grad():
            torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
        layer.train()
        layer(x).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()


def _bert_config() -> transformers.BertConfig:
    """A tiny transformers BERT config, dropout on (the models compared run in eval mode)."""
    return transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37
    )


@needs_onednn
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_a_model_stepped_in_eval_mode_evaluates_its_new_weights_as_transformers_bert_does(
    path: None, fused: bool
) -> None:
    """A loop of one's own that trains in eval mode (no dropout) and evaluates between optimizer steps never calls
    train(): each evaluation still reads the weights the last step wrote, as transformers' BERT with the same
    weights, though a fused AdamW step leaves the weights' version counters as they were."""
    cpu_matmul.set_path("onednn")
    torch.manual_seed(0)
    reference = transformers.BertForMaskedLM(_bert_config()).eval()
    model = convert.bert_to_bertscratch(reference).eval()
    input_ids = torch.randint(5, 99, (3, 11))
    labels = input_ids.masked_fill(torch.rand(3, 11) < 0.5, -100)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.05, fused=fused) for m in (reference, model)]
    for _ in range(3):
        with torch.no_grad():
            expected = reference(input_ids=input_ids).logits
            torch.testing.assert_close(model(input_ids=input_ids).logits, expected, atol=1e-4, rtol=1e-4)
        for m, optimizer in zip((reference, model), optimizers):
            m(input_ids=input_ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()


@needs_onednn
def test_a_weight_norm_layer_evaluates_its_new_weights_as_transformers_bert_does(path: None) -> None:
    """A parametrized weight (weight_norm) is computed anew at each forward, often into the memory the last one freed:
    a change of its parameters between evaluations is still read, as transformers' BERT with the same
    parametrization reads it."""
    cpu_matmul.set_path("onednn")
    torch.manual_seed(0)
    reference = transformers.BertForSequenceClassification(_bert_config()).eval()
    model = convert.bert_to_bertscratch(reference).eval()
    layers = [reference.bert.encoder.layer[0].intermediate.dense, model.bert.encoder.layers[0].mlp.fc_in]
    for layer in layers:
        nn.utils.parametrizations.weight_norm(layer)
    inputs = {"input_ids": torch.randint(5, 99, (2, 7)), "attention_mask": torch.ones(2, 7, dtype=torch.long)}
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(model(**inputs).logits, reference(**inputs).logits, atol=1e-5, rtol=1e-5)
            for layer in layers:
                layer.parametrizations.weight.original0.mul_(2.0)


def _jvp(model: nn.Module, inputs: dict[str, torch.Tensor], tangent: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """torch.func.jvp of the logits in `inputs_embeds`: (logits, their tangent)."""
    embeds = inputs["inputs_embeds"]
    rest = {key: value for key, value in inputs.items() if key != "inputs_embeds"}
    return torch.func.jvp(lambda e: model(inputs_embeds=e, **rest).logits, (embeds,), (tangent,))


def _forward_ad(model: nn.Module, inputs: dict[str, torch.Tensor], tangent: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The logits and their tangent from forward-mode AD on a dual `inputs_embeds`."""
    with fwAD.dual_level():
        dual = fwAD.make_dual(inputs["inputs_embeds"], tangent)
        logits = model(**{**inputs, "inputs_embeds": dual}).logits
        primal, tangent_out = fwAD.unpack_dual(logits)
        assert tangent_out is not None, "the logits lost their tangent"
        return primal, tangent_out


@needs_onednn
@pytest.mark.parametrize("transform", [_jvp, _forward_ad], ids=["func.jvp", "forward_ad"])
def test_forward_mode_ad_gives_transformers_berts_tangents(path: None, transform: Callable) -> None:
    """Forward-mode AD under no_grad (no autograd graph, so no requires_grad to see) takes `F.linear`, whose
    tangents the oneDNN product does not compute: the logits' tangent is transformers' BERT's."""
    cpu_matmul.set_path("onednn")
    torch.manual_seed(0)
    reference = transformers.BertForSequenceClassification(_bert_config()).eval()
    reference.set_attn_implementation("eager")  # torch's CPU sdpa kernels have no forward-mode derivative
    model = convert.bert_to_bertscratch(reference).eval()
    model.set_attn_implementation("eager")
    attention_mask = torch.ones(2, 7, dtype=torch.long)
    attention_mask[1, 5:] = 0
    inputs = {"inputs_embeds": torch.randn(2, 7, 32), "attention_mask": attention_mask}
    tangent = torch.randn(2, 7, 32)
    with torch.no_grad():
        expected, got = transform(reference, inputs, tangent), transform(model, inputs, tangent)
    for ours, theirs in zip(got, expected):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_an_ensemble_under_vmap_gives_each_transformers_berts_logits(path: None) -> None:
    """torch.func's model ensembling (stacked weights, functional_call under vmap) multiplies batched weights, which
    have no memory to pack: each member's logits are its transformers' BERT's."""
    cpu_matmul.set_path("onednn")
    torch.manual_seed(0)
    references = [transformers.BertForSequenceClassification(_bert_config()).eval() for _ in range(2)]
    members = [convert.bert_to_bertscratch(reference).eval() for reference in references]
    params, buffers = torch.func.stack_module_state(members)
    skeleton = copy.deepcopy(members[0]).to("meta")
    inputs = {"input_ids": torch.randint(5, 99, (2, 7)), "attention_mask": torch.ones(2, 7, dtype=torch.long)}
    inputs["attention_mask"][1, 5:] = 0

    def member_logits(p: dict, b: dict) -> torch.Tensor:
        return torch.func.functional_call(skeleton, (p, b), kwargs=inputs).logits

    with torch.no_grad():
        got = torch.func.vmap(member_logits)(params, buffers)
        expected = torch.stack([reference(**inputs).logits for reference in references])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_bf16_autocast_multiplies_in_bf16_as_autocast_would(path: None) -> None:
    cpu_matmul.set_path("onednn")
    layer, x = _linear(), torch.randn(6, 48)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        fast = layer(x)
        expected = F.linear(x, layer.weight, layer.bias)
    assert fast.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(fast.float(), expected.float(), atol=2e-2, rtol=2e-2)


@needs_onednn
def test_a_model_on_onednn_gives_the_default_paths_logits(path: None) -> None:
    """The model's fp32 inference on oneDNN stays within 1e-4 of torch's default path (and of before this path)."""
    torch.manual_seed(0)
    model = BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(99))).eval()
    input_ids = torch.randint(5, 99, (3, 11))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    logits = {}
    for gemm in ("default", "onednn"):
        cpu_matmul.set_path(gemm)
        with torch.inference_mode():
            logits[gemm] = model(input_ids=input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(logits["onednn"], logits["default"], atol=1e-4, rtol=1e-4)


@needs_onednn
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_pytorch_tanh"])
def test_the_fused_gelu_and_residual_add_give_the_unfused_numbers(
    path: None, hidden_act: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`linear_act` and `linear_add` on the oneDNN path (the GELU and the add run inside the product) give what the
    layer, the activation and the add give one after another, on (N, H) and (B, T, H) inputs."""
    from transformers.activations import ACT2FN

    cpu_matmul.set_path("onednn")
    layer, activation, dropout = _linear(), ACT2FN[hidden_act], nn.Dropout(0.1).eval()
    unfused = []
    # a fused call skips the layer's forward (the class's: one replaced on the layer itself is a hook, and runs)
    monkeypatch.setattr(cpu_matmul.BertScratchLinear, "forward", lambda self, input: unfused.append(input))
    for shape in ((7, 48), (3, 5, 48)):
        x, residual = torch.randn(shape), torch.randn(*shape[:-1], 40)
        expected_act = activation(F.linear(x, layer.weight, layer.bias))
        expected_add = residual + F.linear(x, layer.weight, layer.bias)
        with torch.inference_mode():
            fused_act = cpu_matmul.linear_act(layer, x, activation, hidden_act)
            fused_add = cpu_matmul.linear_add(layer, x, residual, dropout)
        assert layer._packed is not None and not unfused  # the packed weight, without the layer's own forward
        torch.testing.assert_close(fused_act, expected_act, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(fused_add, expected_add, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_fusion_steps_aside_for_hooks_wrappers_dropout_and_other_activations(path: None) -> None:
    """A forward hook on the layer still sees its output (the product is not fused past it), an active dropout still
    drops, and an activation oneDNN does not run (ReLU) is applied after the product."""
    cpu_matmul.set_path("onednn")
    layer, x, residual = _linear(), torch.randn(6, 48), torch.randn(6, 40)
    seen = []
    handle = layer.register_forward_hook(lambda module, args, output: seen.append(output))
    with torch.inference_mode():
        cpu_matmul.linear_act(layer, x, nn.GELU(), "gelu")
        cpu_matmul.linear_add(layer, x, residual, nn.Dropout(0.1).eval())
    handle.remove()
    assert len(seen) == 2
    with torch.inference_mode():
        relu = cpu_matmul.linear_act(layer, x, nn.ReLU(), "relu")
        dropped = cpu_matmul.linear_add(layer, x, residual, nn.Dropout(0.5).train())
    torch.testing.assert_close(relu, F.relu(F.linear(x, layer.weight, layer.bias)), atol=1e-5, rtol=1e-5)
    product = F.linear(x, layer.weight, layer.bias)
    zeros = (dropped - residual).abs() < 1e-6
    assert zeros.float().mean() > 0.3  # about half the product's entries dropped, the rest scaled by 2
    torch.testing.assert_close((dropped - residual)[~zeros], 2 * product[~zeros], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_pytorch_tanh"])
def test_the_default_paths_in_place_gelu_and_accumulated_add_give_the_unfused_numbers(
    path: None, bias: bool, hidden_act: str
) -> None:
    """On torch's default path in inference, `linear_act` applies the GELU in place on the product and `linear_add`
    accumulates the product onto `residual + bias`: the numbers of the layer, the activation and the add one after
    another, on (N, H) and (B, T, H) inputs, the input and the residual left as they were."""
    from transformers.activations import ACT2FN

    cpu_matmul.set_path("default")
    layer, activation, dropout = _linear(bias), ACT2FN[hidden_act], nn.Dropout(0.1).eval()
    for shape in ((7, 48), (3, 5, 48)):
        x, residual = torch.randn(shape), torch.randn(*shape[:-1], 40)
        x_before, residual_before = x.clone(), residual.clone()
        assert cpu_matmul._route(layer, x) is None  # autograd on: the layer and the add as written
        with torch.inference_mode():
            assert cpu_matmul._route(layer, x) == (layer, None)  # torch's default product, read by the caller alone
            product = F.linear(x, layer.weight, layer.bias)
            in_place = cpu_matmul.linear_act(layer, x, activation, hidden_act)
            accumulated = cpu_matmul.linear_add(layer, x, residual, dropout)
        torch.testing.assert_close(in_place, activation(product), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(accumulated, residual + product, atol=1e-5, rtol=1e-5)
        assert accumulated.data_ptr() != residual.data_ptr()
        assert torch.equal(x, x_before) and torch.equal(residual, residual_before)


def test_the_default_path_keeps_a_hooks_output_and_gradients(path: None) -> None:
    """A forward hook that keeps the layer's output sees the product, not the GELU written over it; a residual that is
    not contiguous is added as written; with autograd on, the gradients are those of the layer and the add."""
    cpu_matmul.set_path("default")
    layer, x = _linear(), torch.randn(6, 48)
    seen = []
    handle = layer.register_forward_hook(lambda module, args, output: seen.append(output))
    with torch.inference_mode():
        activated = cpu_matmul.linear_act(layer, x, nn.GELU(), "gelu")
    handle.remove()
    product = F.linear(x, layer.weight, layer.bias)
    torch.testing.assert_close(seen[0], product.detach(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(activated, F.gelu(product).detach(), atol=1e-6, rtol=1e-6)
    x3, transposed = torch.randn(2, 3, 48), torch.randn(40, 3, 2).permute(2, 1, 0)  # (2, 3, 40), not contiguous
    with torch.inference_mode():
        summed = cpu_matmul.linear_add(layer, x3, transposed, nn.Dropout(0.1).eval())
    expected_sum = transposed + F.linear(x3, layer.weight, layer.bias)
    torch.testing.assert_close(summed, expected_sum.detach(), atol=1e-5, rtol=1e-5)
    residual = torch.randn(6, 40, requires_grad=True)
    cpu_matmul.linear_add(layer, x, residual, nn.Dropout(0.1).eval()).square().sum().backward()
    expected = [grad.clone() for grad in (layer.weight.grad, layer.bias.grad, residual.grad)]
    layer.zero_grad()
    residual.grad = None
    (residual + F.linear(x, layer.weight, layer.bias)).square().sum().backward()
    for got, want in zip(expected, (layer.weight.grad, layer.bias.grad, residual.grad), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("gemm", ["default", pytest.param("onednn", marks=needs_onednn)])
def test_layers_offloaded_by_accelerate_compute_with_their_weights(path: None, gemm: str, tmp_path: Path) -> None:
    """A device_map that offloads the encoder to disk loads each layer's weights in a hook accelerate wraps around
    the layer's forward (no torch hook): the fused products go through that forward, so inference gives the logits
    of the model loaded whole instead of reading weights still on the meta device."""
    cpu_matmul.set_path(gemm)
    torch.manual_seed(0)
    BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(99))).save_pretrained(tmp_path / "model")
    whole = BertScratchForMaskedLM.from_pretrained(tmp_path / "model").eval()
    device_map = {"bert.embeddings": "cpu", "bert.encoder": "disk", "cls": "cpu"}
    offloaded = BertScratchForMaskedLM.from_pretrained(
        tmp_path / "model", device_map=device_map, offload_folder=str(tmp_path / "offload")
    ).eval()
    inputs = {"input_ids": torch.tensor([[2, 7, 8, 9, 3], [2, 7, 3, 0, 0]]), "attention_mask": torch.ones(2, 5)}
    inputs["attention_mask"][1, 3:] = 0
    with torch.inference_mode():
        torch.testing.assert_close(offloaded(**inputs).logits, whole(**inputs).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("gemm", ["default", pytest.param("onednn", marks=needs_onednn)])
def test_a_replaced_activation_runs_as_written_in_inference(path: None, gemm: str) -> None:
    """A feed-forward whose `act` was replaced (ReLU where the config names GELU) runs the replacement in inference, on
    either GEMM path: the logits of the model under autograd, where every layer runs as written."""
    torch.manual_seed(0)
    model = BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(99))).eval()
    for layer in model.bert.encoder.layers:
        layer.mlp.act = nn.ReLU()
    input_ids = torch.randint(5, 99, (2, 9))
    cpu_matmul.set_path(gemm)
    with torch.inference_mode():
        fast = model(input_ids=input_ids).logits
    as_written = model(input_ids=input_ids).logits.detach()
    torch.testing.assert_close(fast, as_written, atol=1e-5, rtol=1e-5)


def test_the_switch_turns_the_path_off_and_names_bad_values(monkeypatch: pytest.MonkeyPatch, path: None) -> None:
    monkeypatch.setenv(cpu_matmul.ENV, "off")
    cpu_matmul.set_path(None)
    assert (cpu_matmul.choice().fp32, cpu_matmul.choice().bf16) == ("default", "default")
    assert "BERTSCRATCH_CPU_MATMUL=off" in cpu_matmul.choice().describe()
    with pytest.raises(ValueError, match="got 'fast'"):
        cpu_matmul.set_path("fast")
    monkeypatch.setenv(cpu_matmul.ENV, "fast")
    cpu_matmul.set_path(None)
    with pytest.raises(ValueError, match="BERTSCRATCH_CPU_MATMUL must be one of .* got 'fast'"):
        cpu_matmul.choice()


def test_onednn_is_chosen_only_where_it_pays() -> None:
    rates = {"fp32 default": 50.0, "fp32 onednn": 100.0, "bf16 default": 90.0, "bf16 onednn": 95.0}
    assert (cpu_matmul.decide(rates, True).fp32, cpu_matmul.decide(rates, True).bf16) == ("onednn", "default")
    rates["bf16 onednn"] = 150.0
    assert cpu_matmul.decide(rates, True).bf16 == "onednn"
    assert cpu_matmul.decide(rates, False).bf16 == "default"  # no native bf16: today's path
    slower = {"fp32 default": 100.0, "fp32 onednn": 105.0}  # within MIN_SPEEDUP: not worth a second weight copy
    assert cpu_matmul.decide(slower, False).fp32 == "default"
    assert cpu_matmul.decide({}, False).fp32 == "default"


def test_the_probe_runs_once_per_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, path: None) -> None:
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cache" / "cpu_matmul.json")
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    probes = []
    monkeypatch.setattr(cpu_matmul, "probe", lambda: probes.append(1) or {"fp32 default": 1.0, "fp32 onednn": 2.0})
    monkeypatch.delenv(cpu_matmul.ENV, raising=False)
    for _ in range(2):
        cpu_matmul.set_path(None)  # a new process, as far as the choice goes
        assert cpu_matmul.choice().fp32 == "onednn"
    assert len(probes) == 1 and "cached" in cpu_matmul.choice().reason
    torch.set_num_threads(torch.get_num_threads())  # same key; another thread count would be another entry
    assert cpu_matmul.read_cache("gemm_path")["gflops"] == {"fp32 default": 1.0, "fp32 onednn": 2.0}


def test_a_close_call_is_probed_again_keeping_each_paths_best_rate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, path: None
) -> None:
    """A probe under load can make oneDNN look no faster; the next processes probe again (at most MAX_PROBES in
    all) and decide from each path's best rate, then the choice is final."""
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cache" / "cpu_matmul.json")
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    monkeypatch.setattr(cpu_matmul, "native_bf16", lambda: False)
    monkeypatch.delenv(cpu_matmul.ENV, raising=False)
    measured = [
        {"fp32 default": 10.0, "fp32 onednn": 10.5},  # loaded: a close call, the default kept
        {"fp32 default": 12.0, "fp32 onednn": 20.0},  # quieter: oneDNN clearly ahead of the best default (12)
        {"fp32 default": 30.0, "fp32 onednn": 1.0},  # never taken: the choice was final
    ]
    monkeypatch.setattr(cpu_matmul, "probe", lambda: measured.pop(0))
    choices = []
    for _ in range(3):
        cpu_matmul.set_path(None)  # a new process, as far as the choice goes
        choices.append(cpu_matmul.choice())
    assert [choice.fp32 for choice in choices] == ["default", "onednn", "onednn"]
    assert len(measured) == 1 and "cached" in choices[2].reason and "the best of 2 probes" in choices[1].reason
    cache = json.loads(cpu_matmul.CACHE_FILE.read_text())
    assert cache["gemm_path_probes"][cpu_matmul.machine_key()] == 2
    # The entry keeps the fields a model folder's older copy of cpu_matmul.py reads into its MatmulChoice.
    entry = cache["gemm_path"][cpu_matmul.machine_key()]
    assert set(entry) == {"fp32", "bf16", "reason", "gflops"}
    assert entry["gflops"] == {"fp32 default": 12.0, "fp32 onednn": 20.0}

    # A close call on every probe ends after MAX_PROBES of them.
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "other" / "cpu_matmul.json")
    probes = []
    monkeypatch.setattr(cpu_matmul, "probe", lambda: probes.append(1) or {"fp32 default": 10.0, "fp32 onednn": 10.0})
    for _ in range(cpu_matmul.MAX_PROBES + 2):
        cpu_matmul.set_path(None)
        assert cpu_matmul.choice().fp32 == "default"
    assert len(probes) == cpu_matmul.MAX_PROBES
    assert cpu_matmul.unsure({"fp32 default": 10.0, "fp32 onednn": 10.0}, False)
    assert not cpu_matmul.unsure({"fp32 default": 10.0, "fp32 onednn": 20.0}, False)
    assert cpu_matmul.unsure({"fp32 default": 10.0, "fp32 onednn": 20.0, "bf16 default": 9, "bf16 onednn": 9}, True)


@needs_onednn
def test_the_probe_times_each_path_in_its_own_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    rates = cpu_matmul.probe((256, 128, 256), rounds=2)
    assert {"fp32 default", "fp32 onednn"} <= set(rates) and min(rates.values()) > 0
    assert ("bf16 onednn" in rates) == cpu_matmul.native_bf16()
    # The probe runs at the first forward that needs the choice, perhaps inside a bf16 run's autocast: its fp32
    # products must still run in fp32.
    seen = []
    linear = F.linear
    monkeypatch.setattr(F, "linear", lambda x, w, b=None: seen.append(linear(x, w, b).dtype) or linear(x, w, b))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_matmul.probe((64, 32, 64), rounds=1)
    assert torch.float32 in seen


def test_without_onednn_the_default_path_runs(monkeypatch: pytest.MonkeyPatch, path: None) -> None:
    """A torch built without oneDNN (or with it disabled) keeps torch's default path, asked for or not."""
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    for requested in ("auto", "onednn"):
        cpu_matmul.set_path(requested)
        assert (cpu_matmul.choice().fp32, cpu_matmul.choice().bf16) == ("default", "default")
    layer = _linear()
    with torch.no_grad():
        layer(torch.randn(2, 48))
    assert layer._packed is None


def test_a_timed_choice_is_timed_by_the_first_processes_then_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`timed_candidates`: timed by the first `MAX_PROBES` processes of a machine and key, each candidate keeping its
    best time (a clear answer under load can be the wrong one), then read from the cache."""
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cpu_matmul.json")
    # a wins clearly, then b (a slowed by load in the second timing), then a's best stands against b's
    measured = [{"a": 1.0, "b": 3.0}, {"a": 9.0, "b": 0.5}, {"a": 0.8, "b": 9.0}, {"a": 0.0, "b": 0.0}]
    answers = []
    for _ in range(cpu_matmul.MAX_PROBES + 1):
        cpu_matmul.set_path(None)  # a new process, as far as the choices go
        answers.append(cpu_matmul.timed_candidates("section", "key", lambda: measured.pop(0), lambda s: ""))
    assert answers == [{"a": 1.0, "b": 3.0}, {"a": 1.0, "b": 0.5}, {"a": 0.8, "b": 0.5}, {"a": 0.8, "b": 0.5}]
    assert len(measured) == 1 and cpu_matmul.read_cache("section")["key"]["probes"] == cpu_matmul.MAX_PROBES
    choices = cpu_matmul.measured_choices()
    assert [entry["section"] for entry in choices] == ["gemm_path", "section"]
    assert choices[1]["how"] == "cached" and choices[1]["key"] == "key"

    cpu_matmul.set_path(None)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # torch deprecates the API itself
def test_torch_dynamic_quantization_reaches_only_the_plain_linear_layers() -> None:
    """docs/onnx.md: `quantize_dynamic(model, {nn.Linear})` swaps exact types only, so the encoder's layers (this
    package's `nn.Linear` subclass) stay fp32 and the int8 route is the ONNX export's `--quantize dynamic`."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    config = BertScratchConfig(**tiny_config_kwargs(vocab_size=99), num_labels=3)
    model = transformers.AutoModelForSequenceClassification.from_config(config).eval()
    quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    swapped = {name for name, module in quantized.named_modules() if isinstance(module, DynamicLinear)}
    assert swapped == {"bert.pooler.dense", "classifier"}
    assert sum(isinstance(module, cpu_matmul.BertScratchLinear) for module in quantized.modules()) > 0
