"""Every speed optimisation of BertScratch gives the numbers of transformers' BERT (or of the plain path it replaces).

Covered: sparse MLM prediction (loss and every gradient), unpadded execution (embeddings, dense layers, attention and
vocabulary decoding on real tokens only, from ids or from `inputs_embeds`), inference decoding straight into the padded
logits (and reusing their buffer only once no caller holds them), the fused QKV projection, bf16 autocast within bf16
tolerance, and torch.compile against eager.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from torch import nn

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, convert
from hf_bertscratch.batching_bertscratch import BertScratchPadding
from tests.conftest import tiny_config_kwargs

VOCAB = 99
ATOL = 2e-5


def _models(**overrides: object) -> tuple[BertScratchForMaskedLM, transformers.BertForMaskedLM]:
    """Ours (dropout off, so both compute the same function in training mode) and BERT (sdpa) with its weights."""
    torch.manual_seed(0)
    kwargs = {**tiny_config_kwargs(VOCAB), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    ours = BertScratchForMaskedLM(BertScratchConfig(**{**kwargs, **overrides}))
    reference = convert.bertscratch_to_bert(ours)
    reference.set_attn_implementation("sdpa")
    return ours, reference


def _batch() -> dict[str, torch.Tensor]:
    """Right-, left- and un-padded rows (lengths 12, 7, 3 and a left-padded 5) with two segments and MLM labels."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, VOCAB, (4, 12), generator=generator)
    positions = torch.arange(12)
    attention_mask = torch.stack([positions < 12, positions < 7, positions < 3, positions >= 7]).long()
    input_ids = input_ids * attention_mask
    token_type_ids = (positions >= 5).long().expand(4, -1) * attention_mask
    labels = input_ids.masked_fill((attention_mask == 0) | (torch.rand(4, 12, generator=generator) > 0.4), -100)
    labels[:, 0] = torch.where(attention_mask[:, 0] == 1, input_ids[:, 0], -100)
    labels[3, 7] = input_ids[3, 7]
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "labels": labels,
    }


def _reference_grads(reference: nn.Module) -> dict[str, torch.Tensor]:
    """The reference's gradients under BertScratch parameter names (QKV fused), for a name-by-name comparison."""
    grads = {name: p.grad for name, p in reference.named_parameters() if p.grad is not None}
    return convert.bert_state_dict_to_bertscratch(grads)


def test_sparse_prediction_and_unpadding_match_reference_loss_and_gradients() -> None:
    ours, reference = _models()
    ours.train(), reference.train()
    batch = _batch()
    ours_out, reference_out = ours(**batch), reference(**batch)
    labelled = int((batch["labels"] != -100).sum())
    assert ours_out.logits.shape == (labelled, VOCAB)  # decoded at labelled positions only
    torch.testing.assert_close(ours_out.loss, reference_out.loss, atol=ATOL, rtol=0)
    ours_out.loss.backward()
    reference_out.loss.backward()
    expected = _reference_grads(reference)
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, expected[name], atol=ATOL, rtol=1e-4, msg=name)


@pytest.mark.parametrize("sparse", [True, False])
def test_fast_path_matches_plain_path(sparse: bool) -> None:
    """Sparse decoding + unpadding against the same model with both switched off: same loss and gradients."""
    fast, _ = _models(sparse_prediction=sparse)
    plain, _ = _models(sparse_prediction=False, unpad_inputs=False)
    batch = _batch()
    losses = []
    for model in (fast, plain):
        model.train()
        loss = model(**batch).loss
        loss.backward()
        losses.append(loss)
    torch.testing.assert_close(losses[0], losses[1], atol=ATOL, rtol=0)
    for (name, a), b in zip(fast.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=ATOL, rtol=1e-4, msg=name)


@pytest.mark.parametrize("give_ids", [False, True])
def test_unpadded_inference_matches_reference_at_real_tokens(give_ids: bool) -> None:
    ours, reference = _models()
    batch = _batch()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if give_ids:  # explicit (1, T) position ids and segment ids take the unpadded embedding path too
        inputs.update(token_type_ids=batch["token_type_ids"], position_ids=torch.arange(12)[None])
    ours.eval(), reference.eval()
    with torch.inference_mode():
        ours_logits, reference_logits = ours(**inputs).logits, reference(**inputs).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(ours_logits[real], reference_logits[real], atol=ATOL, rtol=1e-4)
    assert bool((ours_logits[~real] == 0).all())  # the vocabulary is not decoded at padding


def test_inference_without_padding_matches_reference() -> None:
    """A batch with no padding (no unpadding, dense decoding) gives BERT's logits at every position."""
    ours, reference = _models()
    input_ids = _batch()["input_ids"][:1]  # the unpadded row
    ours.eval(), reference.eval()
    with torch.inference_mode():
        ours_logits, reference_logits = ours(input_ids).logits, reference(input_ids).logits
    assert ours_logits.shape == reference_logits.shape == (1, 12, VOCAB)
    torch.testing.assert_close(ours_logits, reference_logits, atol=ATOL, rtol=1e-4)


def test_padding_runs_address_every_real_token_once() -> None:
    """`BertScratchPadding.runs` covers each real token of the grid exactly once, also in a grid longer than T'."""
    mask = torch.tensor([[1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]])
    padding = BertScratchPadding.from_mask(mask)
    assert padding.seq_len == 5
    for out_len in (5, 8):
        runs, pad_indices = padding.runs(out_len)
        grid = torch.full((4 * out_len,), -1)
        for grid_start, real_start, length in runs:
            assert bool((grid[grid_start : grid_start + length] == -1).all())
            grid[grid_start : grid_start + length] = torch.arange(real_start, real_start + length)
        padded_mask = torch.zeros(4, out_len, dtype=torch.bool)
        padded_mask[:, :6] = mask[:, :out_len].bool()
        real = padded_mask.reshape(-1)
        assert grid[real].tolist() == list(range(int(real.sum())))  # real token k of the (N, D) tensor, in order
        assert bool((grid[~real] == -1).all())
        assert pad_indices.tolist() == (~real).nonzero().squeeze(-1).tolist()


def test_unpadded_inputs_embeds_match_padded() -> None:
    ours, _ = _models()
    plain, _ = _models(unpad_inputs=False)
    batch = _batch()
    embeds = ours.get_input_embeddings()(batch["input_ids"])
    ours.eval(), plain.eval()
    with torch.no_grad():
        fast = ours.bert(inputs_embeds=embeds, attention_mask=batch["attention_mask"]).last_hidden_state
        slow = plain.bert(inputs_embeds=embeds, attention_mask=batch["attention_mask"]).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(fast[real], slow[real], atol=ATOL, rtol=1e-4)


def test_fused_qkv_is_the_three_projections_of_the_reference() -> None:
    ours, reference = _models()
    for layer, reference_layer in zip(ours.bert.encoder.layers, reference.bert.encoder.layer):
        self_attention = reference_layer.attention.self
        parts = (self_attention.query, self_attention.key, self_attention.value)
        torch.testing.assert_close(layer.attention.qkv.weight, torch.cat([p.weight for p in parts]))
        torch.testing.assert_close(layer.attention.qkv.bias, torch.cat([p.bias for p in parts]))
    batch = _batch()
    ours.eval(), reference.eval()
    with torch.no_grad():  # hidden states turn unpadding off: every layer is compared at every position
        ours_states = ours(batch["input_ids"], batch["attention_mask"], output_hidden_states=True).hidden_states
        reference_states = reference(
            batch["input_ids"], batch["attention_mask"], output_hidden_states=True
        ).hidden_states
    for ours_state, reference_state in zip(ours_states, reference_states, strict=True):
        torch.testing.assert_close(ours_state, reference_state, atol=ATOL, rtol=1e-4)


def test_bf16_autocast_matches_reference_within_bf16_tolerance() -> None:
    ours, reference = _models()
    batch = _batch()
    ours.train(), reference.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours_loss = ours(**batch).loss
        reference_bf16_loss = reference(**batch).loss
    reference_loss = reference(**batch).loss
    assert ours_loss.dtype == torch.float32  # the loss is reduced in fp32 even under autocast
    # bf16 keeps 8 bits of mantissa: a loss near ln(99) = 4.6 is good to about 1e-2.
    torch.testing.assert_close(ours_loss, reference_loss, atol=3e-2, rtol=0)
    torch.testing.assert_close(ours_loss, reference_bf16_loss, atol=3e-2, rtol=0)
    ours_loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in ours.parameters() if p.grad is not None)


def test_sparse_training_logits_leave_autocast_in_fp32_once() -> None:
    """Under bf16 autocast the training step's (num_labelled, V) logits come out in fp32 holding the bf16 decoding's
    values (what the loss reads), so accelerate's mixed precision, which converts a model's half-precision outputs to
    fp32 after the forward, has nothing left to copy."""
    from accelerate.utils import convert_to_fp32

    ours, _ = _models()
    ours.train()
    batch = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs = ours(**batch)
    labelled = int((batch["labels"] != -100).sum())
    assert outputs.logits.shape == (labelled, VOCAB) and outputs.logits.dtype == torch.float32
    torch.testing.assert_close(outputs.logits.bfloat16().float(), outputs.logits, atol=0, rtol=0)
    assert convert_to_fp32(outputs).logits is outputs.logits


def test_torch_compile_matches_eager() -> None:
    ours, _ = _models()
    batch = _batch()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    ours.eval()
    with torch.no_grad():
        eager = ours(**inputs).logits
        # aot_eager traces the whole model through dynamo and AOT autograd without C++ codegen: fullgraph=True fails
        # on any graph break, so a data-dependent shape sneaking into the compiled path would fail here.
        compiled = torch.compile(ours, backend="aot_eager", fullgraph=True)(**inputs).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(compiled[real], eager[real], atol=ATOL, rtol=1e-4)
    ours.train()
    loss = torch.compile(ours, backend="aot_eager")(**batch).loss
    loss.backward()
    ours.zero_grad()
    torch.testing.assert_close(loss, ours(**batch).loss, atol=ATOL, rtol=0)
