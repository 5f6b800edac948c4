"""Parity of every BertScratch head with transformers' BERT (weights copied through hf_bertscratch.convert), and the
model's own contracts: eager == sdpa, attentions and hidden states, gradient checkpointing, fully padded rows,
sparse MLM decoding, `num_items_in_batch`, problem types, clear errors on bad input, and the host reads
(syncs on a GPU) of a training step, counted.

Reference outputs come from transformers' `BertFor*` with the same weights, in fp32 on a padded batch of sentence
pairs (token_type_ids 0 and 1). With `unpad_inputs` on, BertScratch leaves zeros at pad positions, so per-token
outputs are compared at real tokens only; with it off they are compared everywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers
from torch.nn import functional as F
from transformers import BertConfig

import hf_bertscratch
from hf_bertscratch import BertScratchConfig, convert
from hf_bertscratch.batching_bertscratch import PADDED_DECODING_ENV, BertScratchPadding
from tests.conftest import tiny_config_kwargs

ATOL = 1e-5
HEADS = list(convert.ARCHITECTURES)  # BertModel, BertForPreTraining, ... : every head of the family
BATCH, SEQ, VOCAB, CHOICES = 3, 9, 99, 2
# Largest |ours - BERT| seen by the parity tests in this process (printed after the last test by -rA / -s).
MAX_DIFF: dict[str, float] = {"value": 0.0}


def _bert_config(**overrides: object) -> BertConfig:
    kwargs = dict(tiny_config_kwargs(VOCAB), num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    kwargs.update(overrides)
    return BertConfig(**kwargs)


def _inputs(multiple_choice: bool = False) -> dict[str, torch.Tensor]:
    """A right-padded batch (real lengths 9, 6, 3) of two segments with token_type_ids, ids avoiding [PAD]=0."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=generator)
    lengths = torch.tensor([SEQ, 6, 3])
    attention_mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
    token_type_ids = ((torch.arange(SEQ)[None, :] >= lengths[:, None] // 2) & attention_mask.bool()).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if multiple_choice:  # (B, C, T): choice c is the batch shifted by c rows
        inputs = {k: torch.stack([v.roll(c, dims=0) for c in range(CHOICES)], dim=1) for k, v in inputs.items()}
    return inputs


def _labels(head: str, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Labels for each head's loss; per-token labels are -100 at padding (as a data collator leaves them)."""
    mask = inputs["attention_mask"].bool()
    token_labels = torch.randint(0, 3, mask.shape).masked_fill(~mask, -100)
    mlm_labels = inputs["input_ids"].masked_fill(~mask, -100)
    mlm_labels[:, 1::2] = -100  # score only some positions, as in real MLM
    sequence = torch.tensor([0, 2, 1])
    return {
        "BertModel": {},
        "BertForPreTraining": {"labels": mlm_labels, "next_sentence_label": torch.tensor([0, 1, 1])},
        "BertForMaskedLM": {"labels": mlm_labels},
        "BertForNextSentencePrediction": {"labels": torch.tensor([1, 0, 1])},
        "BertForSequenceClassification": {"labels": sequence},
        "BertForTokenClassification": {"labels": token_labels},
        "BertForQuestionAnswering": {
            "start_positions": torch.tensor([1, 2, 0]),
            "end_positions": torch.tensor([3, 5, 2]),
        },
        "BertForMultipleChoice": {"labels": torch.tensor([1, 0, 1])},
    }[head]


def _pair(
    head: str, attn: str = "eager", unpad: bool = True, **config: object
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(transformers BertFor*, BertScratchFor*) with identical weights, in eval mode."""
    torch.manual_seed(0)
    if head == "BertForQuestionAnswering":
        config.setdefault("num_labels", 2)  # start and end logits
    reference = getattr(transformers, head)(_bert_config(**config)).eval()
    reference.set_attn_implementation(attn)
    ours = convert.bert_to_bertscratch(reference)
    ours.config.unpad_inputs = unpad
    ours.set_attn_implementation(attn)
    return reference, ours.eval()


def _qa_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return (
        F.cross_entropy(start_logits, inputs["start_positions"]) + F.cross_entropy(end_logits, inputs["end_positions"])
    ) / 2


def _compare(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor | None, name: str) -> None:
    """assert_close at real tokens (when `mask` is given and the tensor is per token) or everywhere."""
    if mask is not None and ours.dim() >= mask.dim() and ours.shape[: mask.dim()] == mask.shape:
        ours, theirs = ours[mask], theirs[mask]
    assert ours.shape == theirs.shape, name
    MAX_DIFF["value"] = max(MAX_DIFF["value"], (ours - theirs).abs().max().item())
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=ATOL, msg=lambda m: f"{name}: {m}")


def _compare_outputs(ours: dict, theirs: dict, mask: torch.Tensor | None) -> None:
    assert set(theirs) <= set(ours) | {"past_key_values"}, (set(theirs), set(ours))
    for key, value in theirs.items():
        if isinstance(value, torch.Tensor):
            _compare(ours[key], value, mask, key)
        elif isinstance(value, tuple):
            assert len(ours[key]) == len(value), key
            for i, (a, b) in enumerate(zip(ours[key], value)):
                _compare(a, b, mask, f"{key}[{i}]")


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("head", HEADS)
def test_parity_with_transformers_bert(head: str, attn: str, unpad: bool) -> None:
    reference, ours = _pair(head, attn, unpad)
    inputs = _inputs(multiple_choice=head == "BertForMultipleChoice")
    inputs.update(_labels(head, inputs))
    with torch.no_grad():
        expected, got = reference(**inputs), ours(**inputs)
    mask = inputs["attention_mask"].bool() if unpad else None
    if mask is not None and head == "BertForMultipleChoice":
        mask = mask.reshape(-1, SEQ)
    if unpad and head == "BertForQuestionAnswering":
        # BERT's span loss is a softmax over ALL T positions, pad included; under unpad_inputs our pad positions
        # hold zeros (logit = bias), so only this loss differs (logits at real tokens are compared below). With
        # unpad_inputs off (the "padded" case) the loss matches too.
        torch.testing.assert_close(got.loss, _qa_loss(got.start_logits, got.end_logits, inputs))
        expected.loss = got.loss
    _compare_outputs(got, expected, mask)
    if unpad and head == "BertModel":  # documented behaviour: the unpadded path leaves zeros at pad positions
        assert got.last_hidden_state[~mask].abs().max() == 0
    if head != "BertModel":
        assert got.loss is not None and torch.isfinite(got.loss)


def _block_diagonal_mask(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, 1, T, T) bool mask, True to attend: each real token attends within its own segment (token type), and a
    pad position attends to the pad positions of its row, so that no query row is fully masked."""
    real = inputs["attention_mask"].bool()
    segment = torch.where(real, inputs["token_type_ids"], 2)  # (B, T): 0, 1, or 2 for padding
    return (segment[:, :, None] == segment[:, None, :])[:, None]


def _additive_form(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("form", ["bool", "float"])
@pytest.mark.parametrize("head", ["BertModel", "BertForMaskedLM"])
def test_parity_with_a_prepared_4d_mask(head: str, form: str, attn: str, unpad: bool) -> None:
    """A (B, 1, T, T) mask is applied as given, as transformers' BERT applies it. A bool mask reads True as attend
    under both implementations: transformers' sdpa reads it so, its eager adds the bools to the scores, so the bool
    mask is compared with transformers' sdpa."""
    reference, ours = _pair(head, "sdpa" if form == "bool" else attn, unpad)
    ours.set_attn_implementation(attn)
    inputs = _inputs()
    inputs.update(_labels(head, inputs))
    blocks = _block_diagonal_mask(inputs)
    inputs["attention_mask"] = blocks if form == "bool" else _additive_form(blocks)
    with torch.no_grad():
        expected, got = reference(**inputs), ours(**inputs)
    _compare_outputs(got, expected, mask=None)
    with torch.no_grad():  # the mask is applied, not dropped: a segment's tokens do not see the other segment
        plain = ours(**(inputs | {"attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}))
    key = "logits" if head == "BertForMaskedLM" else "last_hidden_state"
    assert not torch.allclose(plain[key], got[key])


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_parity_with_a_prepared_key_mask(attn: str, unpad: bool) -> None:
    """A (B, 1, 1, T) additive key mask gives transformers' outputs, pad positions included (the batch runs padded)."""
    reference, ours = _pair("BertForMaskedLM", attn, unpad)
    inputs = _inputs()
    inputs["attention_mask"] = _additive_form(inputs["attention_mask"].bool()[:, None, None, :])
    with torch.no_grad():
        _compare_outputs(ours(**inputs), reference(**inputs), mask=None)


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
def test_parity_with_1d_position_ids(unpad: bool) -> None:
    """(T,) position_ids are broadcast over the batch, as transformers' BERT broadcasts them."""
    reference, ours = _pair("BertForMaskedLM", "sdpa", unpad)
    inputs = _inputs() | {"position_ids": torch.arange(SEQ) + 5}  # (T,), increasing: one document per row
    mask = inputs["attention_mask"].bool() if unpad else None
    with torch.no_grad():
        _compare_outputs(ours(**inputs), reference(**inputs), mask)


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("padding", ["padded", "all-ones"])
@pytest.mark.parametrize("head", ["BertModel", "BertForMaskedLM"])
def test_restarting_position_ids_beside_a_mask_are_positions_only(
    head: str, padding: str, attn: str, unpad: bool
) -> None:
    """With a (B, T) attention_mask given, position ids that restart are positions and nothing more: transformers'
    BERT reads no packed documents from them (its masks infer documents from position ids only where no mask is
    given), so every token attends to every real token of its row, as there."""
    reference, ours = _pair(head, attn, unpad)
    inputs = _inputs()
    if padding == "all-ones":
        inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
    inputs["position_ids"] = torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1]).expand(BATCH, -1)
    mask = inputs["attention_mask"].bool() if unpad else None
    with torch.no_grad():
        _compare_outputs(ours(**inputs), reference(**inputs), mask)
    assert getattr(ours, "bert", ours).plan_batch(**inputs).documents is None


@pytest.mark.parametrize("reader", ["mean", "max", "mean-max", "segments", "replaced-token loss", "long-text cut"])
def test_what_reads_the_real_tokens_refuses_a_prepared_4d_mask_by_name(reader: str) -> None:
    """A prepared 4D mask says what each query attends to, not which tokens are real: the poolings over the real
    tokens, ELECTRA's replaced-token loss and the cut of a long text name themselves instead of failing on its shape;
    BERT's [CLS] head takes it."""
    kwargs = dict(tiny_config_kwargs(VOCAB), num_labels=2)
    inputs = _inputs()
    inputs["attention_mask"] = _block_diagonal_mask(inputs)
    if reader == "replaced-token loss":
        model = hf_bertscratch.BertScratchForReplacedTokenDetection(BertScratchConfig(**kwargs))
        inputs["labels"] = torch.zeros(BATCH, SEQ, dtype=torch.long)
        expected = "The replaced-token loss reads which tokens are real"
    elif reader == "long-text cut":
        model = hf_bertscratch.BertScratchForSequenceClassification(BertScratchConfig(**kwargs, long_text_max_length=6))
        expected = "Cutting a text to long_text_max_length=6 reads which tokens are real"
    else:
        model = hf_bertscratch.BertScratchForSequenceClassification(
            BertScratchConfig(**kwargs, classifier_pooling=reader)
        )
        expected = f"classifier_pooling={reader!r} reads which tokens are real"
    with torch.no_grad(), pytest.raises(ValueError) as error:
        model.eval()(**inputs)
    assert str(error.value).startswith(expected) and f"{(BATCH, 1, SEQ, SEQ)}" in str(error.value)
    cls_head = hf_bertscratch.BertScratchForSequenceClassification(BertScratchConfig(**kwargs)).eval()
    inputs.pop("labels", None)
    with torch.no_grad():
        assert cls_head(**inputs).logits.shape == (BATCH, 2)


def test_parity_hidden_states_and_attentions() -> None:
    """output_hidden_states / output_attentions: same number, shapes and values as BERT's, pad positions included."""
    reference, ours = _pair("BertForMaskedLM", "eager", unpad=True)
    inputs = _inputs()
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True, output_attentions=True)
        got = ours(**inputs, output_hidden_states=True, output_attentions=True)
    assert len(got.hidden_states) == 3 and len(got.attentions) == 2
    assert got.hidden_states[0].shape == (BATCH, SEQ, 32)
    assert got.attentions[0].shape == (BATCH, 4, SEQ, SEQ)
    _compare_outputs(got, expected, mask=None)
    # Attention rows sum to one and give no weight to padded keys.
    probs = got.attentions[-1]
    torch.testing.assert_close(probs.sum(-1), torch.ones(BATCH, 4, SEQ))
    assert probs[2, :, :, 3:].abs().max() < 1e-6


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
def test_eager_equals_sdpa(unpad: bool) -> None:
    _, eager = _pair("BertForPreTraining", "eager", unpad)
    _, sdpa = _pair("BertForPreTraining", "sdpa", unpad)
    assert eager.config._attn_implementation == "eager" and sdpa.config._attn_implementation == "sdpa"
    inputs = _inputs()
    with torch.no_grad():
        _compare_outputs(sdpa(**inputs), eager(**inputs), inputs["attention_mask"].bool())


def test_attn_implementation_from_pretrained(tmp_path: Path) -> None:
    _, ours = _pair("BertModel")
    ours.save_pretrained(tmp_path)
    for attn in ("eager", "sdpa"):
        loaded = transformers.AutoModel.from_pretrained(tmp_path, attn_implementation=attn)
        assert loaded.config._attn_implementation == attn


def _grads(model: torch.nn.Module, inputs: dict[str, torch.Tensor], **kwargs: object) -> tuple[torch.Tensor, dict]:
    model.zero_grad()
    loss = model(**inputs, **kwargs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_grads(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=1e-5, msg=lambda m: f"{name}: {m}")


def test_gradient_checkpointing_gives_same_gradients() -> None:
    _, model = _pair("BertForPreTraining")
    model.train()  # dropout is 0, so train mode is deterministic
    inputs = _inputs()
    inputs.update(_labels("BertForPreTraining", inputs))
    loss, plain = _grads(model, inputs)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert model.is_gradient_checkpointing
    checkpointed_loss, checkpointed = _grads(model, inputs)
    torch.testing.assert_close(checkpointed_loss, loss)
    _assert_same_grads(checkpointed, plain)


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_fully_padded_row_gives_no_nan(attn: str, unpad: bool) -> None:
    _, model = _pair("BertForSequenceClassification", attn, unpad)
    inputs = _inputs()
    inputs["attention_mask"][1] = 0
    with torch.no_grad():
        out = model(**inputs, labels=torch.tensor([0, 1, 2]))
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    # The other rows are unaffected by the empty one.
    with torch.no_grad():
        alone = model(**{k: v[[0, 2]] for k, v in inputs.items()})
    torch.testing.assert_close(out.logits[[0, 2]], alone.logits, atol=ATOL, rtol=ATOL)
    inputs["attention_mask"][:] = 0  # every row empty
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).logits).all()


def test_sparse_prediction_matches_dense() -> None:
    _, sparse = _pair("BertForMaskedLM")
    _, dense = _pair("BertForMaskedLM")
    dense.config.sparse_prediction = False
    sparse.train(), dense.train()
    inputs = _inputs()
    inputs.update(_labels("BertForMaskedLM", inputs))
    num_labelled = int((inputs["labels"] != -100).sum())
    assert sparse(**inputs).logits.shape == (num_labelled, VOCAB)
    assert dense(**inputs).logits.shape == (BATCH, SEQ, VOCAB)
    sparse_loss, sparse_grads = _grads(sparse, inputs)
    dense_loss, dense_grads = _grads(dense, inputs)
    torch.testing.assert_close(sparse_loss, dense_loss)
    _assert_same_grads(sparse_grads, dense_grads)
    # In eval mode (pipelines, evaluation) logits always cover every position.
    assert sparse.eval()(**inputs).logits.shape == (BATCH, SEQ, VOCAB)


def test_num_items_in_batch_makes_accumulation_exact() -> None:
    """Two micro-batches divided by Trainer's total label count give the gradient of the whole batch."""
    _, model = _pair("BertForMaskedLM")
    model.train()
    assert type(model).accepts_loss_kwargs is True
    assert hf_bertscratch.BertScratchForSequenceClassification.accepts_loss_kwargs is False
    inputs = _inputs()
    inputs.update(_labels("BertForMaskedLM", inputs))
    total = int((inputs["labels"] != -100).sum())
    full_loss, full_grads = _grads(model, inputs)

    model.zero_grad()
    accumulated = 0.0
    for rows in ([0], [1, 2]):
        loss = model(**{k: v[rows] for k, v in inputs.items()}, num_items_in_batch=torch.tensor(total)).loss
        loss.backward()
        accumulated += loss.item()
    torch.testing.assert_close(torch.tensor(accumulated), full_loss, atol=1e-6, rtol=1e-5)
    _assert_same_grads({n: p.grad for n, p in model.named_parameters() if p.grad is not None}, full_grads)


def test_num_items_in_batch_makes_token_classification_accumulation_exact() -> None:
    """A batch of 8 taken as 2 micro-batches of 4, each divided by Trainer's count of scored tokens in all 8, gives
    the whole batch's loss and gradient, though the micro-batches score different numbers of tokens."""
    torch.manual_seed(0)
    config = BertScratchConfig(
        **tiny_config_kwargs(VOCAB), num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    model = hf_bertscratch.BertScratchForTokenClassification(config).train()
    generator = torch.Generator().manual_seed(2)
    lengths = torch.tensor([SEQ, 2, 3, 2, SEQ, SEQ, 7, SEQ])  # the second 4 rows score far more tokens
    attention_mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
    labels = torch.randint(0, 3, (8, SEQ), generator=generator).masked_fill(attention_mask == 0, -100)
    inputs = {"input_ids": torch.randint(1, VOCAB, (8, SEQ), generator=generator), "attention_mask": attention_mask}
    inputs["labels"] = labels
    total = int((labels != -100).sum())
    full_loss, full_grads = _grads(model, inputs)

    model.zero_grad()
    accumulated = 0.0
    for rows in (slice(0, 4), slice(4, 8)):
        loss = model(**{k: v[rows] for k, v in inputs.items()}, num_items_in_batch=torch.tensor(total)).loss
        loss.backward()
        accumulated += loss.item()
    torch.testing.assert_close(torch.tensor(accumulated), full_loss, atol=1e-6, rtol=1e-5)
    _assert_same_grads({n: p.grad for n, p in model.named_parameters() if p.grad is not None}, full_grads)
    assert type(model).accepts_loss_kwargs is True  # Trainer passes num_items_in_batch only then


@pytest.mark.parametrize(
    ("problem_type", "labels", "loss_fn"),
    [
        ("regression", torch.tensor([[0.5, -1.0, 2.0]] * BATCH), F.mse_loss),
        (
            "multi_label_classification",
            torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]),
            F.binary_cross_entropy_with_logits,
        ),
        ("single_label_classification", torch.tensor([2, 0, 1]), F.cross_entropy),
    ],
)
def test_sequence_classification_problem_types(problem_type: str, labels: torch.Tensor, loss_fn: Callable) -> None:
    reference, ours = _pair("BertForSequenceClassification", problem_type=problem_type)
    inputs = _inputs()
    with torch.no_grad():
        got, expected = ours(**inputs, labels=labels), reference(**inputs, labels=labels)
    torch.testing.assert_close(got.loss, loss_fn(got.logits, labels))
    torch.testing.assert_close(got.loss, expected.loss, atol=ATOL, rtol=ATOL)


def test_single_output_regression_is_inferred() -> None:
    reference, ours = _pair("BertForSequenceClassification", num_labels=1)
    labels = torch.tensor([0.3, -0.2, 1.5])
    with torch.no_grad():
        got, expected = ours(**_inputs(), labels=labels), reference(**_inputs(), labels=labels)
    assert ours.config.problem_type == "regression"
    torch.testing.assert_close(got.loss, expected.loss, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
def test_mean_pooling_head_reads_the_mean_of_the_real_tokens(unpad: bool) -> None:
    """classifier_pooling="mean": the classifier reads the mean of transformers' BERT's last hidden states over each
    row's real tokens (sentence-transformers' mean pooling), with no pooler; "cls" is the parity-tested default."""
    reference, ours = _pair("BertForSequenceClassification", unpad=unpad)
    config = BertScratchConfig.from_dict({**ours.config.to_dict(), "classifier_pooling": "mean"})
    mean_head = hf_bertscratch.BertScratchForSequenceClassification(config).eval()
    missing, unexpected = mean_head.load_state_dict(ours.state_dict(), strict=False)
    assert (
        mean_head.bert.pooler is None
        and not missing
        and set(unexpected)
        == {
            "bert.pooler.dense.weight",
            "bert.pooler.dense.bias",
        }
    )
    inputs = _inputs()
    mask = inputs["attention_mask"][..., None].float()  # (B, T, 1)
    with torch.no_grad():
        hidden = reference.bert(**inputs).last_hidden_state  # (B, T, H)
        expected = reference.classifier((hidden * mask).sum(1) / mask.sum(1))
        got = mean_head(**inputs).logits
    _compare(got, expected, None, "logits")
    assert not torch.allclose(got, ours(**inputs).logits, atol=1e-3)  # the cls head reads something else


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
def test_segments_head_reads_each_text_of_the_pair_by_its_mean(unpad: bool) -> None:
    """classifier_pooling="segments": u, the mean of transformers' BERT's last states over the first text's tokens
    (segment 0), v over the second's (segment 1), read as [u, v, |u - v|, u * v]."""
    reference, ours = _pair("BertForSequenceClassification", unpad=unpad)
    config = BertScratchConfig.from_dict({**ours.config.to_dict(), "classifier_pooling": "segments"})
    torch.manual_seed(0)
    head = hf_bertscratch.BertScratchForSequenceClassification(config).eval()
    assert head.classifier.in_features == 4 * config.hidden_size and head.bert.pooler is None
    head.bert.load_state_dict(ours.bert.state_dict(), strict=False)
    inputs = _inputs()
    real = inputs["attention_mask"].bool()
    first = (real & (inputs["token_type_ids"] == 0))[..., None].float()
    second = (real & (inputs["token_type_ids"] == 1))[..., None].float()
    with torch.no_grad():
        hidden = reference.bert(**inputs).last_hidden_state
        u, v = (hidden * first).sum(1) / first.sum(1), (hidden * second).sum(1) / second.sum(1)
        expected = head.classifier(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))
        got = head(**inputs).logits
    _compare(got, expected, None, "logits")


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("pooling", ["max", "mean-max"])
def test_max_and_mean_max_heads_read_the_real_tokens(pooling: str, unpad: bool) -> None:
    """classifier_pooling="max": the elementwise maximum of transformers' BERT's last states over each row's real
    tokens; "mean-max": the mean and the maximum side by side (2H)."""
    reference, ours = _pair("BertForSequenceClassification", unpad=unpad)
    config = BertScratchConfig.from_dict({**ours.config.to_dict(), "classifier_pooling": pooling})
    torch.manual_seed(0)
    head = hf_bertscratch.BertScratchForSequenceClassification(config).eval()
    assert head.classifier.in_features == (2 if pooling == "mean-max" else 1) * config.hidden_size
    head.bert.load_state_dict(ours.bert.state_dict(), strict=False)
    inputs = _inputs()
    mask = inputs["attention_mask"][..., None].float()  # (B, T, 1)
    with torch.no_grad():
        hidden = reference.bert(**inputs).last_hidden_state  # (B, T, H)
        largest = torch.stack([h[m[:, 0].bool()].max(0).values for h, m in zip(hidden, mask)])  # (B, H)
        mean = (hidden * mask).sum(1) / mask.sum(1)
        expected = head.classifier(largest if pooling == "max" else torch.cat([mean, largest], dim=-1))
        got = head(**inputs).logits
    _compare(got, expected, None, "logits")


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("strategy", ["head", "tail", "head+tail"])
def test_a_long_text_is_cut_by_the_head_as_its_features_were(strategy: str, padding_side: str) -> None:
    """With `long_text_max_length` set, a classifier handed rows longer than it (a padded batch, as a pipeline or a
    user gives whole reviews) scores each as the features `truncate_ids` cut to that length: [CLS], the kept text
    tokens, [SEP]. Rows that fit are read whole, with their padding on the side the batch has it (left padding used
    to keep a short row's first positions: padding only)."""
    from hf_bertscratch.tasks.shapes import truncate_ids

    config = BertScratchConfig(
        **tiny_config_kwargs(100),
        long_text_max_length=12,
        long_text_truncation=strategy,
        long_text_head_tokens=4,
        classifier_pooling="mean",
    )
    torch.manual_seed(0)
    model = hf_bertscratch.BertScratchForSequenceClassification(config).eval()
    generator = torch.Generator().manual_seed(1)
    texts = [torch.randint(5, config.vocab_size, (n,), generator=generator).tolist() for n in (30, 7, 10, 19)]

    def padded(rows: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, mask) of `rows` padded to `width` on `padding_side`."""
        pads = [[0] * (width - len(row)) for row in rows]
        if padding_side == "left":
            return torch.tensor([p + r for p, r in zip(pads, rows)]), torch.tensor(
                [p + [1] * len(r) for p, r in zip(pads, rows)]
            )
        return torch.tensor([r + p for p, r in zip(pads, rows)]), torch.tensor(
            [[1] * len(r) + p for p, r in zip(pads, rows)]
        )

    rows = [[2] + text + [3] for text in texts]  # [CLS]=2, [SEP]=3
    input_ids, attention_mask = padded(rows, max(map(len, rows)))
    with torch.no_grad():
        got = model(input_ids=input_ids, attention_mask=attention_mask).logits
        for i, text in enumerate(texts):
            cut_ids, cut_mask = padded([[2] + truncate_ids(text, 10, strategy, head_tokens=4) + [3]], 12)
            expected = model(input_ids=cut_ids, attention_mask=cut_mask).logits
            torch.testing.assert_close(got[i : i + 1], expected, atol=1e-5, rtol=1e-5)
        model.config.long_text_max_length = None  # read whole: the long row scores otherwise
        whole = model(input_ids=input_ids, attention_mask=attention_mask).logits
    assert (whole[0] - got[0]).abs().max() > 1e-4
    if padding_side == "right":  # on the left, BERT's absolute positions move a short row with the batch's width
        torch.testing.assert_close(whole[1], got[1], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def tiny_model() -> hf_bertscratch.BertScratchModel:
    return hf_bertscratch.BertScratchModel(convert.bert_config_to_bertscratch(_bert_config())).eval()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda x: x.update(input_ids=x["input_ids"].index_fill(1, torch.tensor([2]), VOCAB)),
            rf"input_ids contains {VOCAB}, outside \[0, {VOCAB - 1}\] \(vocab_size={VOCAB}\)",
        ),
        (
            lambda x: x.update(input_ids=x["input_ids"].index_fill(1, torch.tensor([2]), -1)),
            r"input_ids contains -1, outside \[0, 98\]",
        ),
        (
            lambda x: x.update(token_type_ids=x["token_type_ids"] + 2),
            r"token_type_ids contains 3, outside \[0, 1\] \(type_vocab_size=2\)",
        ),
        (
            lambda x: x.update(attention_mask=x["attention_mask"][:, :-1]),
            r"attention_mask must have the shape of input_ids \(3, 9\); got \(3, 8\)",
        ),
        (
            lambda x: x.update({k: v.repeat(1, 8) for k, v in x.items()}),
            r"Sequence length 72 exceeds max_position_embeddings=64",
        ),
        (
            lambda x: x.update(input_ids=x["input_ids"][0]),
            r"input_ids must have shape \(batch, seq_len\); got shape \(9,\)",
        ),
        (
            lambda x: x.update(token_type_ids=x["token_type_ids"][:, :-1]),
            r"token_type_ids must have the shape of input_ids \(3, 9\) \(or \(1, 9\)\); got \(3, 8\)",
        ),
        (
            lambda x: x.update(position_ids=torch.arange(9).expand(2, -1)),
            r"position_ids must have the shape of input_ids \(3, 9\) \(or \(1, 9\)\); got \(2, 9\)",
        ),
        (
            lambda x: x.update(attention_mask=torch.ones(3, 1, 9, 8, dtype=torch.bool)),
            r"A 4D attention_mask must have shape \(batch, 1, seq_len, seq_len\) \(3, 1, 9, 9\) or \(batch, 1, 1, "
            r"seq_len\) \(3, 1, 1, 9\); got \(3, 1, 9, 8\)",
        ),
        (
            lambda x: x.update(attention_mask=torch.ones(3, 1, 9, 9, dtype=torch.long)),
            r"A 4D attention_mask must be bool \(True to attend\) or float .*; got dtype torch.int64",
        ),
        (
            lambda x: x.update({k: v[:, :0] for k, v in x.items()}),
            r"The batch holds no tokens: inputs of shape \(3, 0\)",
        ),
        (
            lambda x: x.update(inputs_embeds=torch.zeros(3, 9), input_ids=None),
            r"inputs_embeds must have shape \(batch, seq_len, hidden_size=32\); got shape \(3, 9\)",
        ),
    ],
    ids=[
        "id-too-large",
        "negative-id",
        "token-type",
        "mask-shape",
        "too-long",
        "1d-ids",
        "token-type-shape",
        "position-shape",
        "4d-mask-shape",
        "4d-mask-dtype",
        "empty",
        "2d-embeds",
    ],
)
def test_bad_inputs_raise_clear_errors(tiny_model: torch.nn.Module, change: Callable, message: str) -> None:
    inputs = _inputs()
    change(inputs)
    with pytest.raises(ValueError, match=message):
        tiny_model(**inputs)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"input_ids": torch.tensor([2, 5, 6, 3])}, r"input_ids must have shape \(batch, seq_len\); got shape \(4,\)"),
        (
            {"inputs_embeds": torch.zeros(4, 32)},
            r"inputs_embeds must have shape \(batch, seq_len, hidden_size=32\); got shape \(4, 32\)",
        ),
    ],
    ids=["1d-ids", "2d-embeds"],
)
def test_a_classifier_that_cuts_long_texts_names_a_badly_shaped_input(inputs: dict, message: str) -> None:
    """A classifier fine-tuned with a long-text cut (`long_text_max_length`) reads the length of its input before the
    encoder does: an input of the wrong shape gets the encoder's error, not an IndexError from the cut."""
    config = BertScratchConfig(**tiny_config_kwargs(VOCAB), long_text_max_length=16)
    model = hf_bertscratch.BertScratchForSequenceClassification(config).eval()
    with pytest.raises(ValueError, match=message):
        model(**inputs)


@pytest.mark.parametrize("training", [True, False])
def test_mlm_labels_of_another_shape_are_refused(training: bool) -> None:
    """Sparse decoding picks the labelled positions of the flattened labels: labels one token short of the ids would
    pair every row's labels with the wrong tokens and still give a loss. transformers' BERT refuses the mismatch
    (its cross-entropy's batch sizes differ); so does this model, naming both shapes."""
    model = hf_bertscratch.BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(VOCAB))).train(training)
    batch = _training_batch("right-padded")
    with pytest.raises(ValueError, match=rf"labels must have the shape of input_ids \({BATCH}, {SEQ}\); got "):
        model(**dict(batch, labels=batch["labels"][:, :-1]))


@pytest.mark.parametrize("head", ["BertScratchForMaskedLM", "BertScratchForPreTraining"])
def test_mlm_heads_in_training_check_the_ids_in_their_one_read(head: str) -> None:
    """The MLM heads plan the batch themselves (`plan_batch` with the labels to count): their one host read still
    checks every id tensor, with the same errors as the bare encoder's."""
    model = getattr(hf_bertscratch, head)(BertScratchConfig(**tiny_config_kwargs(VOCAB))).train()
    batch = _training_batch("right-padded")
    for name, value, message in [
        ("input_ids", VOCAB, rf"input_ids contains {VOCAB}, outside \[0, {VOCAB - 1}\] \(vocab_size={VOCAB}\)"),
        ("token_type_ids", 2, r"token_type_ids contains 2, outside \[0, 1\] \(type_vocab_size=2\)"),
        ("position_ids", -1, r"position_ids contains -1, outside \[0, 63\] \(max_position_embeddings=64\)"),
    ]:
        bad = dict(batch, position_ids=torch.arange(SEQ).expand(BATCH, -1).clone())
        bad[name] = bad[name].index_fill(1, torch.tensor([4]), value)
        with pytest.raises(ValueError, match=message):
            model(**bad)


@pytest.mark.parametrize("head", HEADS)
def test_unknown_keyword_is_refused_by_name(head: str) -> None:
    """transformers' BERT drops `atention_mask=` silently and attends to the padding; every head here refuses it."""
    _, ours = _pair(head)
    inputs = _inputs(multiple_choice=head == "BertForMultipleChoice")
    inputs["atention_mask"] = inputs.pop("attention_mask")
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['atention_mask'\]"):
        ours(**inputs)
    inputs["attention_mask"] = inputs.pop("atention_mask")
    with torch.no_grad():  # transformers' own keyword arguments pass, and use_cache (an encoder keeps no cache)
        ours(**inputs, output_hidden_states=False, num_items_in_batch=None, return_dict=True)
        first = next(iter(ours(**inputs).values()))
        torch.testing.assert_close(next(iter(ours(**inputs, use_cache=False).values())), first, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"hidden_size": 30, "num_attention_heads": 4},
            r"hidden_size \(30\) must be divisible by num_attention_heads \(4\)",
        ),
        ({"num_hidden_layers": 0}, r"num_hidden_layers must be a positive integer, got 0"),
        ({"hidden_act": "softmax"}, r"hidden_act must be one of .* got 'softmax'"),
        ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be in \[0, 1\), got 1.5"),
        ({"sinusoidal_position_std": 0.0}, r"sinusoidal_position_std must be positive or None, got 0.0"),
        ({"classifier_dropout": 2.0}, r"classifier_dropout must be in \[0, 1\), got 2.0"),
        ({"layer_norm_eps": -1.0}, r"layer_norm_eps must be positive, got -1.0"),
        ({"pad_token_id": 30522}, r"pad_token_id must be None or in \[0, vocab_size - 1 = 30521\], got 30522"),
        (
            {"classifier_pooling": "median"},
            r"classifier_pooling must be one of \('cls', 'mean', 'max', 'mean-max', 'segments'\), got 'median'",
        ),
        ({"long_text_truncation": "middle"}, r"long_text_truncation must be one of .*, got 'middle'"),
        (
            {"long_text_max_length": 600},
            r"long_text_max_length must be None or in \[3, max_position_embeddings 512\], got 600",
        ),
        (
            {"long_text_max_length": 64, "long_text_truncation": "head+tail", "long_text_head_tokens": 63},
            r"long_text_head_tokens must be in \[0, long_text_max_length - 2 = 62\], got 63",
        ),
        ({"multi_label_threshold": 1.5}, r"multi_label_threshold must be None or in \(0, 1\), got 1.5"),
        # The field types are checked too (@strict reads the annotations, so the config module must not postpone them).
        ({"unpad_inputs": "yes"}, r"Field 'unpad_inputs' expected bool, got str \(value: 'yes'\)"),
        ({"hidden_size": 128.0}, r"Field 'hidden_size' expected int, got float"),
    ],
)
def test_bad_configs_raise_clear_errors(kwargs: dict, message: str) -> None:
    # huggingface_hub's @strict wraps the config's ValueError (or a field's TypeError) in its own error, same text.
    with pytest.raises(Exception, match=message) as error:
        BertScratchConfig(**kwargs)
    assert isinstance(error.value, (ValueError, TypeError)) or isinstance(
        error.value.__cause__, (ValueError, TypeError)
    )


def test_config_values_set_after_creation_are_checked_before_use(tmp_path: Path) -> None:
    """`from_pretrained(folder, num_attention_heads=3)` sets its keyword arguments on the loaded config, after the
    config's own checks: the model refuses them before building a layer (as transformers' BERT does), and
    `save_pretrained` refuses a config changed since, before writing any file (it used to copy the code files and
    then fail, leaving a folder without config.json or weights)."""
    model = hf_bertscratch.BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(VOCAB)))
    model.save_pretrained(tmp_path / "model")
    with pytest.raises(Exception, match=r"hidden_size \(32\) must be divisible by num_attention_heads \(3\)"):
        transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "model", num_attention_heads=3)
    model.config.pad_token_id = VOCAB
    with pytest.raises(
        Exception, match=rf"pad_token_id must be None or in \[0, vocab_size - 1 = {VOCAB - 1}\], got {VOCAB}"
    ):
        model.save_pretrained(tmp_path / "changed")
    assert not (tmp_path / "changed").exists()


def test_checkpoint_of_another_model_type_is_refused(tmp_path: Path) -> None:
    transformers.BertForMaskedLM(_bert_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model_type 'bert', expected 'bertscratch'.*bertscratch convert"):
        hf_bertscratch.BertScratchForMaskedLM.from_pretrained(tmp_path)


@pytest.mark.parametrize("head", HEADS)
def test_a_config_of_another_model_is_refused_by_name(head: str, tmp_path: Path) -> None:
    """transformers' `BertConfig` handed to a BertScratch head, built or loaded, is refused where it enters, naming
    the converter, instead of failing later on a field BertConfig lacks; the converted config builds the model."""
    name = head.replace("Bert", "BertScratch", 1)
    model_class = getattr(hf_bertscratch, name)
    model_class(BertScratchConfig(**tiny_config_kwargs(VOCAB))).save_pretrained(tmp_path)
    expected = rf"{name} needs a BertScratchConfig, got BertConfig \(model_type 'bert'\).*bert_config_to_bertscratch"
    with pytest.raises(TypeError, match=expected):
        model_class(_bert_config())
    with pytest.raises(TypeError, match=expected):
        model_class.from_pretrained(tmp_path, config=_bert_config())
    assert isinstance(model_class(convert.bert_config_to_bertscratch(_bert_config())), model_class)


# ------------------------------------------------------------------------------------------- family and presets


def test_presets_are_googles_sizes() -> None:
    expected = {
        "tiny": (2, 128),
        "mini": (4, 256),
        "small": (4, 512),
        "medium": (8, 512),
        "base": (12, 768),
        "large": (24, 1024),
    }
    assert set(hf_bertscratch.PRESETS) == set(expected)
    for name, (layers, hidden) in expected.items():
        preset = hf_bertscratch.PRESETS[name]
        assert preset == {
            "num_hidden_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": hidden // 64,
            "intermediate_size": 4 * hidden,
        }, name
    config = transformers.AutoConfig.for_model("bertscratch", **hf_bertscratch.PRESETS["mini"])
    assert isinstance(config, BertScratchConfig) and config.hidden_size == 256


@pytest.mark.parametrize("head", ["BertScratchModel", "BertScratchForMaskedLM", "BertScratchForSequenceClassification"])
def test_sinusoidal_position_start(head: str, tmp_path: Path) -> None:
    """`sinusoidal_position_std` starts the position embeddings (only them) at the scaled sinusoid table of Vaswani
    et al.; the embeddings stay trainable and a saved model reloads its trained values, not the table."""
    model_class = getattr(hf_bertscratch, head)
    config = BertScratchConfig(**hf_bertscratch.PRESETS["tiny"], vocab_size=VOCAB, sinusoidal_position_std=0.05)
    torch.manual_seed(0)
    model = model_class(config)
    positions = model.base_model.embeddings.position_embeddings.weight
    p, i = torch.arange(512.0)[:, None], torch.arange(0, 128, 2.0)
    table = torch.stack([torch.sin(p / 10000 ** (i / 128)), torch.cos(p / 10000 ** (i / 128))], dim=-1).reshape(
        512, 128
    )
    torch.testing.assert_close(positions, table * 0.05 / table.std(), atol=1e-5, rtol=1e-4)
    assert positions.requires_grad
    embeddings = model.base_model.embeddings  # the other embeddings keep BERT's N(0, 0.02)
    for other in (embeddings.word_embeddings.weight[1:], embeddings.token_type_embeddings.weight):
        assert abs(other.std().item() - 0.02) < 3e-3
    bert_init = model_class(BertScratchConfig(**hf_bertscratch.PRESETS["tiny"], vocab_size=VOCAB))
    assert abs(bert_init.base_model.embeddings.position_embeddings.weight.std().item() - 0.02) < 2e-3
    with torch.no_grad():
        positions.add_(1.0)
    model.save_pretrained(tmp_path)
    reloaded = model_class.from_pretrained(tmp_path)
    assert torch.equal(reloaded.base_model.embeddings.position_embeddings.weight, positions)


def test_mlm_decoder_is_tied_to_word_embeddings() -> None:
    for head in ("BertScratchForMaskedLM", "BertScratchForPreTraining"):
        model = getattr(hf_bertscratch, head)(BertScratchConfig(**hf_bertscratch.PRESETS["tiny"], vocab_size=VOCAB))
        assert model.cls.decoder.weight is model.bert.embeddings.word_embeddings.weight, head


# Device maps that offload the tied MLM weights (decoder and word embeddings) to disk together: the whole model, or
# the embeddings and the head with the encoder in memory. Module names are BERT's too.
TIED_ON_DISK = {"all": {"": "disk"}, "tied": {"bert.embeddings": "disk", "bert.encoder": "cpu", "cls": "disk"}}


@pytest.mark.parametrize(
    ("head", "device_map"),
    [("BertForMaskedLM", "all"), ("BertForMaskedLM", "tied"), ("BertForPreTraining", "all")],
)
def test_mlm_heads_offloaded_to_disk_match_bert_offloaded_alike(head: str, device_map: str, tmp_path: Path) -> None:
    """Loaded with a device_map that puts the tied weights on disk, an MLM head gives what transformers' BERT loaded
    the same way gives, with token_type_ids and without (segment 0 then comes through the segment embedding's
    forward, inside which accelerate loads its weight)."""
    reference, ours = _pair(head)
    reference.save_pretrained(tmp_path / "bert")
    ours.save_pretrained(tmp_path / "ours")
    loaded = [
        model_class.from_pretrained(
            tmp_path / name, device_map=TIED_ON_DISK[device_map], offload_folder=str(tmp_path / f"offload-{name}")
        )
        for model_class, name in ((getattr(transformers, head), "bert"), (type(ours), "ours"))
    ]
    assert all(model.get_output_embeddings().weight.is_meta for model in loaded)  # on disk, loaded per forward
    inputs = _inputs()
    for given in (inputs, {key: value for key, value in inputs.items() if key != "token_type_ids"}):
        with torch.no_grad():
            expected, got = loaded[0](**given), loaded[1](**given)
        _compare_outputs(got, expected, inputs["attention_mask"].bool())


@pytest.mark.parametrize(
    ("device_map", "message"),
    [
        (
            {"bert": "cpu", "cls": "disk"},
            r"puts cls.decoder.weight on 'disk' and bert.embeddings.word_embeddings.weight, the weight tied to it, on "
            r"'cpu': accelerate cannot offload one of two tied weights to disk. Give both the same place",
        ),
        (
            {"bert.embeddings": "disk", "bert.encoder": "cpu", "cls": "cpu"},
            r"puts cls.decoder.weight on 'cpu' and bert.embeddings.word_embeddings.weight, the weight tied to it, on "
            r"'disk'",
        ),
    ],
)
def test_a_device_map_offloading_one_of_the_tied_weights_to_disk_is_refused_by_name(
    device_map: dict, message: str, tmp_path: Path
) -> None:
    """transformers' BERT fails under such a map, with a KeyError at the first forward or a meta-device error at
    loading that names neither weight (the refusal stands for that: drop it once BERT loads and runs there); ours
    refuses it before loading, from the class and through the Auto class. Untied, the same map loads."""
    reference, ours = _pair("BertForMaskedLM")
    reference.save_pretrained(tmp_path / "bert")
    ours.save_pretrained(tmp_path / "ours")
    offload = str(tmp_path / "offload")
    with pytest.raises((KeyError, ValueError)):
        bert = transformers.BertForMaskedLM.from_pretrained(
            tmp_path / "bert", device_map=device_map, offload_folder=offload
        )
        bert(**_inputs())
    for loader in (type(ours), transformers.AutoModelForMaskedLM):
        with pytest.raises(ValueError, match=message):
            loader.from_pretrained(tmp_path / "ours", device_map=device_map, offload_folder=offload)
    untied = type(ours)(BertScratchConfig(**tiny_config_kwargs(VOCAB), tie_word_embeddings=False))
    untied.save_pretrained(tmp_path / "untied")
    loaded = type(ours).from_pretrained(tmp_path / "untied", device_map=device_map, offload_folder=offload + "-untied")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**_inputs()).logits, untied.eval()(**_inputs()).logits)


def test_largest_parity_difference_is_reported(capsys: pytest.CaptureFixture) -> None:
    """Runs every head once more and reports the largest |ours - BERT| (the figure quoted in the README)."""
    for head in HEADS:
        test_parity_with_transformers_bert(head, "sdpa", True)
    with capsys.disabled():
        print(f"\n[parity] largest |BertScratch - transformers BERT| difference: {MAX_DIFF['value']:.2e}")
    assert MAX_DIFF["value"] < ATOL


def test_question_answering_with_other_than_two_labels_names_the_count() -> None:
    model = hf_bertscratch.BertScratchForQuestionAnswering(BertScratchConfig(**tiny_config_kwargs(VOCAB), num_labels=3))
    with pytest.raises(ValueError, match="needs config.num_labels == 2 .*got 3"):
        model(torch.tensor([[2, 5, 6, 3]]))


@pytest.mark.parametrize("flash_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_padding_free_batch_gives_each_document_what_it_gets_alone(attn: str, flash_kwargs: bool) -> None:
    """transformers' DataCollatorWithFlattening packs documents into one row with restarting position ids (and, when
    asked, cu_seq_lens/seq_idx): every document must attend within itself, as if run alone."""
    _, ours = _pair("BertForMaskedLM", attn=attn)
    base = ours.bert
    documents = [[2, 5, 6, 7, 3], [2, 8, 3], [2, 9, 10, 11, 12, 3]]
    collator = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=flash_kwargs)
    batch = collator([{"input_ids": ids} for ids in documents])
    batch.pop("labels")
    if flash_kwargs:
        batch.pop("position_ids")  # the documents' bounds come from cu_seq_lens alone
    with torch.no_grad():
        packed = base(**batch).last_hidden_state[0]  # (N, H)
        alone = [base(input_ids=torch.tensor([ids])).last_hidden_state[0] for ids in documents]
    if flash_kwargs:  # positions restart in the reference runs; without position_ids the packed row counts on
        alone = [base(input_ids=torch.tensor([ids]), position_ids=torch.arange(start, start + len(ids))[None])
                 .last_hidden_state[0] for ids, start in zip(documents, (0, 5, 8))]  # fmt: skip
    torch.testing.assert_close(packed, torch.cat(alone), atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_fully_padded_row_stays_finite_under_autocast(attn: str, dtype: torch.dtype) -> None:
    """Under autocast the attention runs in half precision, where float32's minimum is -inf (fp16): the mask is
    clamped to the compute dtype's minimum, so an empty row is uniform attention, not NaN."""
    _, model = _pair("BertForSequenceClassification", attn, unpad=False)
    inputs = _inputs()
    inputs["attention_mask"][1] = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        logits = model(**inputs).logits
    assert torch.isfinite(logits).all()


# ------------------------------------------------------------------------------------------------ host reads

# Every way a forward can read a tensor's value on the host, which on a GPU waits for all the work queued before it
# (a host-device synchronisation): Tensor methods, then torch functions. Boolean indexing is counted by
# `_count_host_reads` itself (it runs `nonzero` in C++, out of reach of these patches).
HOST_READ_METHODS = (
    "item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy", "nonzero", "argwhere",
    "masked_select", "unique", "unique_consecutive", "repeat_interleave",
)  # fmt: skip
HOST_READ_FUNCTIONS = ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "repeat_interleave")

# The host reads of one training step (forward and backward) of the MLM heads, as (read, function that reads), with
# why each must stay. One: `BertScratchModel.plan_batch` gathers every value the step needs on the host and reads them
# in one `tolist` (`_read_on_host`): the ids' min and max (the range check must raise a ValueError naming the bad id,
# where the embedding lookup would fail with a CUDA device-side assert), the number of real tokens and the last real
# column (the sizes N and T' of the unpadded batch, and whether the mask masks anything at all: SDPA's flash kernel
# needs no mask), whether each row is one document, and the number of labels (the size of the sparse MLM decoding).
# Every position list is then computed with sizes known on the host (`true_first`), with no `nonzero`.
TRAINING_STEP_HOST_READS = [("tolist", "_read_on_host")]


def _count_host_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """From here on (until monkeypatch undoes it), record every host read of a tensor value as (read, the function
    that made it). Boolean masks used as an index or in an assignment count as `nonzero`."""
    reads: list[tuple[str, str]] = []

    def counted(name: str, original: Callable) -> Callable:
        def read(*args: object, **kwargs: object) -> object:
            reads.append((name, sys._getframe(1).f_code.co_name))
            return original(*args, **kwargs)

        return read

    def by_mask(name: str, original: Callable) -> Callable:
        def index(self: torch.Tensor, key: object, *value: object) -> object:
            keys = key if isinstance(key, tuple) else (key,)
            if any(isinstance(k, torch.Tensor) and k.dtype == torch.bool for k in keys):
                reads.append((f"{name} with a bool mask", sys._getframe(1).f_code.co_name))
            return original(self, key, *value)

        return index

    for name in HOST_READ_METHODS:
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    for name in HOST_READ_FUNCTIONS:
        monkeypatch.setattr(torch, name, counted(f"torch.{name}", getattr(torch, name)))
    for name in ("__getitem__", "__setitem__"):
        monkeypatch.setattr(torch.Tensor, name, by_mask(name, getattr(torch.Tensor, name)))
    return reads


def _training_batch(kind: str) -> dict[str, torch.Tensor]:
    """A masked-LM training batch as the pretraining collator makes it: ids, mask, token types, labels at about a
    third of the real tokens (-100 elsewhere and at padding). `kind`: how its rows are padded."""
    lengths, left = {
        "right-padded": ([SEQ, 6, 3], False),
        "trimmed": ([7, 6, 3], False),  # the last columns are pad in every row: unpadded on a trimmed grid
        "left-padded": ([SEQ, 6, 3], True),
        "full": ([SEQ] * BATCH, False),  # no padding at all: runs padded, with no mask
    }[kind]
    columns = torch.arange(SEQ)[None, :]
    real = torch.tensor(lengths)[:, None]
    mask = (columns >= SEQ - real) if left else (columns < real)
    generator = torch.Generator().manual_seed(2)
    input_ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=generator).masked_fill(~mask, 0)
    labelled = (torch.rand(BATCH, SEQ, generator=generator) < 0.35) & mask
    labelled |= mask & (mask.cumsum(dim=1) == 2)  # every row has a label: its second real token
    return {
        "input_ids": input_ids,
        "attention_mask": mask.long(),
        "token_type_ids": (columns >= SEQ // 2).long() * mask,
        "labels": input_ids.masked_fill(~labelled, -100),
    }


TRAINING_BATCHES = ["right-padded", "trimmed", "left-padded", "full"]


@pytest.mark.parametrize("kind", TRAINING_BATCHES)
@pytest.mark.parametrize("head", ["BertScratchForMaskedLM", "BertScratchForPreTraining"])
def test_a_training_step_reads_the_host_once(monkeypatch: pytest.MonkeyPatch, head: str, kind: str) -> None:
    """One forward and backward of an MLM head in training (dropout on, unpadded, sparse decoding, Trainer's
    `num_items_in_batch` on the device) reads tensor values on the host exactly as `TRAINING_STEP_HOST_READS` says:
    a read added anywhere in the step fails this test."""
    model = getattr(hf_bertscratch, head)(BertScratchConfig(**tiny_config_kwargs(VOCAB), hidden_dropout_prob=0.1))
    model.train()
    assert model.config.unpad_inputs and model.config.sparse_prediction
    batch = _training_batch(kind)
    if head == "BertScratchForPreTraining":
        batch["next_sentence_label"] = torch.tensor([0, 1, 1])
    num_items = (batch["labels"] != -100).sum()  # as Trainer passes it: a tensor, already on the device
    reads = _count_host_reads(monkeypatch)
    output = model(**batch, num_items_in_batch=num_items) if "MaskedLM" in head else model(**batch)
    output.loss.backward()
    monkeypatch.undo()
    assert reads == TRAINING_STEP_HOST_READS, reads
    assert output.loss.isfinite()


@pytest.mark.parametrize("kind", TRAINING_BATCHES)
def test_sparse_decoding_without_nonzero_keeps_the_labels_row_major_order(kind: str) -> None:
    """Sparse decoding (positions from `true_first`, not `nonzero`) gives the dense logits at the labelled positions
    in row-major order, as `labels[labels != -100]` (ELECTRA's generator samples rely on it), and the dense loss."""
    config = BertScratchConfig(**tiny_config_kwargs(VOCAB), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = hf_bertscratch.BertScratchForMaskedLM(config).train()  # without dropout: sparse and dense comparable
    batch = _training_batch(kind)
    sparse = model(**batch)
    model.config.sparse_prediction = False
    dense = model(**batch)
    labelled = batch["labels"] != -100
    torch.testing.assert_close(sparse.logits, dense.logits[labelled], atol=ATOL, rtol=ATOL)
    torch.testing.assert_close(sparse.loss, dense.loss, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("kind", TRAINING_BATCHES)
def test_evaluation_keeps_dense_logits_and_takes_the_loss_at_the_labelled_rows(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """In evaluation under `sparse_prediction` the logits are the whole (B, T, V) grid, as without it, and the loss
    (computed at the labelled rows only) is the dense loss, read with the batch plan's one host read."""
    model = hf_bertscratch.BertScratchForMaskedLM(BertScratchConfig(**tiny_config_kwargs(VOCAB))).eval()
    batch = _training_batch(kind)
    loss_rows = []
    real_loss = model._mlm_loss
    monkeypatch.setattr(
        model, "_mlm_loss", lambda logits, *rest: loss_rows.append(logits.shape[0]) or real_loss(logits, *rest)
    )
    reads = _count_host_reads(monkeypatch)
    with torch.no_grad():
        sparse = model(**batch)
    monkeypatch.undo()
    assert loss_rows == [int((batch["labels"] != -100).sum())]  # not B x T
    model.config.sparse_prediction = False
    with torch.no_grad():
        dense = model(**batch)
    assert sparse.logits.shape == (*batch["labels"].shape, VOCAB)
    torch.testing.assert_close(sparse.logits, dense.logits, atol=0, rtol=0)
    torch.testing.assert_close(sparse.loss, dense.loss, atol=ATOL, rtol=ATOL)
    assert reads == TRAINING_STEP_HOST_READS, reads


def test_true_first_lists_what_nonzero_lists() -> None:
    """`true_first` (positions of the True flags, then of the False ones, from a count known on the host) agrees
    with `nonzero` on both lists, including the empty and the full cases."""
    from hf_bertscratch.batching_bertscratch import true_first

    generator = torch.Generator().manual_seed(3)
    cases = [torch.rand(50, generator=generator) < p for p in (0.0, 0.15, 0.5, 1.0)] + [torch.zeros(0, dtype=bool)]
    for flags in cases:
        count = int(flags.sum())
        order = true_first(flags, count)
        assert order[:count].tolist() == flags.nonzero().squeeze(-1).tolist()
        assert order[count:].tolist() == (~flags).nonzero().squeeze(-1).tolist()


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast_decode"])
def test_a_padded_mlm_inference_forward_reads_the_host_once_and_twice_more_with_fast_decoding(
    monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    """A padded MLM inference forward reads the plan once; `fast_decode` adds its tiled decoder's runs: their number,
    then their bounds (a list of GEMMs the host launches). That decoder runs on CPU only, where a read waits for
    nothing."""
    from hf_bertscratch import fast_decode

    _, ours = _pair("BertForMaskedLM")
    if fast:
        fast_decode.enable(ours, tile=None)  # decoding into the buffer, whatever this machine's choice
    inputs = _inputs()
    reads = _count_host_reads(monkeypatch)
    with torch.no_grad():
        logits = ours(**inputs).logits
    monkeypatch.undo()
    expected = [("tolist", "_read_on_host"), *([("nonzero", "runs"), ("tolist", "runs")] if fast else [])]
    assert reads == expected, reads
    assert logits[~inputs["attention_mask"].bool()].abs().max() == 0  # it did run unpadded


@pytest.mark.parametrize("head", ["BertForMaskedLM", "BertForPreTraining"])
def test_decoding_the_padded_grid_gives_the_real_rows_decoding(monkeypatch: pytest.MonkeyPatch, head: str) -> None:
    """Decoding a padded batch on the whole (B, T) grid, pad rows zeroed after, gives the logits, the loss and the
    gradients of decoding the N real rows, copied into the grid, and transformers' logits at real rows. Each is forced
    through the switch (`BERTSCRATCH_PADDED_DECODING`) that overrides the CPU's measured choice."""
    reference, ours = _pair(head)
    inputs = _inputs()
    real = inputs["attention_mask"].bool()
    labels = inputs["input_ids"].masked_fill(~real, -100)
    calls = []
    grid_decoding = BertScratchPadding.zero_pad_rows
    monkeypatch.setattr(BertScratchPadding, "zero_pad_rows", lambda self, x: calls.append(1) or grid_decoding(self, x))
    results = {}
    for grid in (False, True):
        monkeypatch.setenv(PADDED_DECODING_ENV, "grid" if grid else "rows")
        calls.clear()
        ours.zero_grad()
        output = ours(**inputs, labels=labels)
        output.loss.backward()
        logits = output.logits if head == "BertForMaskedLM" else output.prediction_logits
        gradients = {name: p.grad.clone() for name, p in ours.named_parameters() if p.grad is not None}
        results[grid] = logits.detach(), output.loss.detach(), gradients
        assert bool(calls) is grid
    monkeypatch.undo()
    (rows, rows_loss, rows_grads), (grid, grid_loss, grid_grads) = results[False], results[True]
    assert grid[~real].abs().max() == 0
    assert grid_grads.keys() == rows_grads.keys() and "cls.decoder.bias" in rows_grads
    torch.testing.assert_close(grid, rows, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grid_loss, rows_loss)
    for name, gradient in rows_grads.items():
        torch.testing.assert_close(grid_grads[name], gradient, rtol=1e-4, atol=1e-6, msg=name)
    with torch.no_grad():
        expected = reference(**inputs)
    expected = expected.logits if head == "BertForMaskedLM" else expected.prediction_logits
    torch.testing.assert_close(grid[real], expected[real], rtol=1e-4, atol=1e-5)


def test_the_cpu_decodes_the_padded_grid_below_the_padding_it_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On a CPU the grid is decoded below the padding fraction measured there (`grid_max_padding`: the rows' and the
    grid's times at 30% padding), the rows above it; the measurement is cached once timed by `MAX_PROBES` processes, and a
    bad switch value is named. The
    GEMM path is fixed (`set_path`, which also starts the process's choices afresh, as a new process would)."""
    from hf_bertscratch import cpu_matmul
    from hf_bertscratch.batching_bertscratch import DECODING_PROBE_PADDING, grid_max_padding

    monkeypatch.delenv(PADDED_DECODING_ENV, raising=False)
    cpu_matmul.set_path("default")
    _, ours = _pair("BertForMaskedLM")
    hidden = ours.config.hidden_size
    real = 358 / 512  # the probe's rows: 51, 77, 102 and 128 of 128 positions
    assert abs(1 - real - DECODING_PROBE_PADDING) < 0.01
    timings = []
    for rows_seconds, expected in ((1.0, 1 - real), (0.8, 0.8 - real), (2.0, 1.0), (0.5, 0.0)):
        cpu_matmul.set_path("default")
        monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / f"{rows_seconds}.json")
        seconds = {"rows": rows_seconds, "grid": 1.0}
        monkeypatch.setattr(cpu_matmul, "time_interleaved", lambda candidates, rounds: timings.append(1) or seconds)
        threshold = grid_max_padding(ours.cls, hidden, VOCAB, torch.float32)
        assert threshold == pytest.approx(expected)
        assert grid_max_padding(ours.cls, hidden, VOCAB, torch.float32) == threshold  # this process's answer
    assert len(timings) == 4
    for probes in range(2, cpu_matmul.MAX_PROBES + 2):  # new processes: timed by the first MAX_PROBES, then cached
        cpu_matmul.set_path("default")
        assert grid_max_padding(ours.cls, hidden, VOCAB, torch.float32) == 0.0
        assert len(timings) == 3 + min(probes, cpu_matmul.MAX_PROBES)

    # The model's decision: _inputs() has 9 of its 27 positions padded (33%), the grid decoded below the threshold.
    inputs = _inputs()
    calls = []
    grid_decoding = BertScratchPadding.zero_pad_rows
    monkeypatch.setattr(BertScratchPadding, "zero_pad_rows", lambda self, x: calls.append(1) or grid_decoding(self, x))
    for rows_seconds, grid in ((1.0, False), (2.0, True)):
        cpu_matmul.set_path("default")
        monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / f"{rows_seconds}.json")
        seconds = {"rows": rows_seconds, "grid": 1.0}  # if timed again: as that cache's first timing
        calls.clear()
        with torch.no_grad():
            ours(**inputs)
        assert bool(calls) is grid
    monkeypatch.setenv(PADDED_DECODING_ENV, "fast")
    with pytest.raises(ValueError, match="BERTSCRATCH_PADDED_DECODING must be one of .*got 'fast'"):
        ours(**inputs)
    cpu_matmul.set_path(None)


def test_the_padded_decoding_probe_times_both_decodings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hf_bertscratch import cpu_matmul
    from hf_bertscratch.batching_bertscratch import grid_max_padding

    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cpu_matmul.json")
    cpu_matmul.set_path(None)
    _, ours = _pair("BertForMaskedLM")
    hidden = ours.config.hidden_size
    state = torch.random.get_rng_state()
    assert 0.0 <= grid_max_padding(ours.cls, hidden, VOCAB, torch.float32) <= 1.0
    assert torch.equal(torch.random.get_rng_state(), state)  # the probe leaves the global generator alone
    (entry,) = [entry for entry in cpu_matmul.measured_choices() if entry["section"] == "padded_decoding"]
    assert set(entry["seconds"]) == {"rows", "grid"} and min(entry["seconds"].values()) > 0
    assert entry["key"] == f"{hidden}x{VOCAB} float32 gemm {cpu_matmul.choice().fp32}"
    cpu_matmul.set_path(None)


@pytest.mark.parametrize(
    ("preset", "cpu", "cuda"), [("tiny", True, False), ("mini", True, False), ("base", True, True)]
)
def test_padded_batches_run_unpadded_where_that_pays(preset: str, cpu: bool, cuda: bool) -> None:
    """On a CPU always; on a CUDA device from hidden size 768 (base) up (`DEVICE_RULES.unpad_min_hidden`)."""
    from hf_bertscratch.batching_bertscratch import unpadding_pays

    config = BertScratchConfig(**hf_bertscratch.PRESETS[preset])
    assert unpadding_pays(config, torch.device("cpu")) is cpu
    assert unpadding_pays(config, torch.device("cuda")) is cuda
    assert unpadding_pays(config, torch.device("cuda", 1)) is cuda


@pytest.mark.parametrize("head", HEADS)
def test_a_batch_the_rule_keeps_padded_runs_padded(monkeypatch: pytest.MonkeyPatch, head: str) -> None:
    """Where `unpadding_pays` says no, `unpad_inputs=True` runs a padded batch as `unpad_inputs=False` does: no
    padding is described (`BertScratchPadding.from_mask`, which only an unpadded run calls) and every output is the
    padded run's; where it says yes, the batch is unpadded."""
    from hf_bertscratch import batching_bertscratch

    _, ours = _pair(head, unpad=False)
    inputs = _inputs(multiple_choice=head == "BertForMultipleChoice")
    inputs.update(_labels(head, inputs))
    described = []
    from_mask = batching_bertscratch.BertScratchPadding.from_mask
    monkeypatch.setattr(
        batching_bertscratch.BertScratchPadding, "from_mask", lambda *args: described.append(1) or from_mask(*args)
    )
    with torch.no_grad():
        expected = ours(**inputs)
        ours.config.unpad_inputs = True
        for pays in (False, True):
            monkeypatch.setattr(batching_bertscratch, "unpadding_pays", lambda config, device, pays=pays: pays)
            got = ours(**inputs)
            assert bool(described) is pays
            if not pays:
                for name, value in expected.items():
                    torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m: f"{name}: {m}")


@pytest.mark.cuda
@pytest.mark.parametrize("unpad", [False, True], ids=["by-size", "unpadded"])
@pytest.mark.parametrize("kind", TRAINING_BATCHES)
def test_a_cuda_training_step_syncs_only_to_read_its_plan(
    monkeypatch: pytest.MonkeyPatch, kind: str, unpad: bool
) -> None:
    """On CUDA, one forward and backward of the masked LM under `torch.cuda.set_sync_debug_mode("error")` (any
    synchronising call raises, C++ ones such as the backward's included) syncs only in `_read_on_host`, once: run
    as this size runs on CUDA (padded), and unpadded as a base-sized model runs."""
    from hf_bertscratch import batching_bertscratch as batching

    if unpad:
        monkeypatch.setattr(batching.DEVICE_RULES, "unpad_min_hidden", {})

    config = BertScratchConfig(**tiny_config_kwargs(VOCAB), hidden_dropout_prob=0.1, attn_implementation="sdpa")
    model = hf_bertscratch.BertScratchForMaskedLM(config).cuda().train()  # fp32: no varlen kernel
    batch = {name: tensor.cuda() for name, tensor in _training_batch(kind).items()}
    num_items = (batch["labels"] != -100).sum()
    model(**batch, num_items_in_batch=num_items).loss.backward()  # warm-up: lazy CUDA and cuBLAS initialisation
    torch.cuda.synchronize()
    allowed: list[int] = []
    read_on_host = batching._read_on_host

    def the_one_allowed_sync(scalars: dict[str, torch.Tensor]) -> dict[str, int]:
        allowed.append(len(scalars))
        torch.cuda.set_sync_debug_mode("default")
        try:
            return read_on_host(scalars)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    monkeypatch.setattr(batching, "_read_on_host", the_one_allowed_sync)
    torch.cuda.set_sync_debug_mode("error")
    try:
        model(**batch, num_items_in_batch=num_items).loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert len(allowed) == 1, allowed


# ------------------------------------------------------------------------------------------ attention masks


def _record_sdpa_masks(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor | None]:
    """The `attn_mask` of every `scaled_dot_product_attention` call from here on (transformers' sdpa attention
    function, which both models dispatch to, looks it up on `torch.nn.functional` at each call)."""
    masks: list[torch.Tensor | None] = []
    sdpa = F.scaled_dot_product_attention

    def recording(*args: object, **kwargs: object) -> torch.Tensor:
        masks.append(kwargs.get("attn_mask"))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", recording)
    return masks


@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
def test_sdpa_gets_no_mask_when_nothing_is_masked(monkeypatch: pytest.MonkeyPatch, unpad: bool) -> None:
    """An all-ones attention_mask (beside any position ids), or position ids that make each row one document, reach
    SDPA as no mask at all (as in transformers' BERT), which leaves SDPA free to pick its flash kernel; padding and
    packed documents (position ids that restart, with no mask) keep theirs.
    Outputs stay those of transformers' BERT."""
    reference, ours = _pair("BertForMaskedLM", "sdpa", unpad)
    masks = _record_sdpa_masks(monkeypatch)
    inputs = _inputs()
    full = {**inputs, "attention_mask": torch.ones_like(inputs["attention_mask"])}
    layers = ours.config.num_hidden_layers
    with torch.no_grad():
        expected = reference(**full).logits
        assert masks == [None] * layers  # transformers' BERT drops the all-ones mask too
        masks.clear()
        _compare(ours(**full).logits, expected, None, "logits")
        assert masks == [None] * layers
        masks.clear()
        ours(**full, position_ids=torch.arange(SEQ).expand(BATCH, -1))  # one document per row: nothing masked
        assert masks == [None] * layers
        masks.clear()
        _compare(ours(**inputs).logits, reference(**inputs).logits, inputs["attention_mask"].bool(), "logits")
        assert len(masks) == 2 * layers and all(mask is not None for mask in masks)  # padding is masked
        masks.clear()
        restarting = torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1]).expand(BATCH, -1)  # three documents per row
        ours(**full, position_ids=restarting)  # beside a mask, positions only: nothing masked
        assert masks == [None] * layers
        masks.clear()
        ours(input_ids=full["input_ids"], position_ids=restarting)  # no mask: packed documents
        assert len(masks) == layers and all(mask is not None for mask in masks)


def test_all_ones_check_reads_the_mask_once_per_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the mask masks anything is read once per forward, whatever the number of layers, and in the same
    read as the input range check."""
    _, ours = _pair("BertModel", "sdpa", unpad=False, num_hidden_layers=4)
    inputs = _inputs()
    inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
    reads = _count_host_reads(monkeypatch)
    with torch.no_grad():
        ours(**inputs)
    assert reads == [("tolist", "_read_on_host")], reads


def test_masks_are_kept_where_their_values_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """While compiling or tracing (and on the meta device) an all-ones mask is applied as given instead of read, and
    position ids (without a mask) are kept as documents instead of read for whether each row is one: a branch on
    their values would break the graph or bake one batch's answer into it. Nothing else is read either."""
    _, ours = _pair("BertModel", "sdpa")
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    restarting = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2]).expand(BATCH, -1)  # three documents per row
    ordinary = torch.arange(SEQ).expand(BATCH, -1)  # one document per row
    ids = torch.ones(BATCH, SEQ, dtype=torch.long)
    for given in (mask, None):
        plan = ours.plan_batch(ids, given, position_ids=ordinary)
        assert (plan.padding, plan.attention_mask, plan.documents) == (None, None, None)
    assert ours.plan_batch(ids, position_ids=restarting).documents is not None
    on_meta = ours.plan_batch(ids.to("meta"), mask.to("meta"), position_ids=ordinary.to("meta"))
    assert on_meta.padding is None and on_meta.attention_mask.is_meta and on_meta.documents is None
    on_meta = ours.plan_batch(ids.to("meta"), position_ids=ordinary.to("meta"))
    assert on_meta.padding is None and on_meta.attention_mask is None and on_meta.documents is not None
    reads = _count_host_reads(monkeypatch)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiling = ours.plan_batch(ids, _inputs()["attention_mask"], position_ids=ordinary)
    assert compiling.padding is None and compiling.attention_mask is not None and compiling.documents is None
    assert ours.plan_batch(ids, position_ids=ordinary).documents is not None
    assert reads == []


@pytest.mark.slow  # torch compiles flex attention and its block mask, on CPU too: tens of seconds
def test_flex_attention_equals_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """attn_implementation="flex_attention" (transformers' flex attention function, given the BlockMask transformers'
    mask utilities build) gives eager's outputs: padded rows, run unpadded or not, packed documents, and no padding."""
    from torch.nn.attention.flex_attention import BlockMask

    from hf_bertscratch.modeling_bertscratch import ALL_ATTENTION_FUNCTIONS

    flex, handed = ALL_ATTENTION_FUNCTIONS["flex_attention"], []

    def recording(*args: object, **kwargs: object) -> tuple[torch.Tensor, torch.Tensor | None]:
        handed.append(args[4])  # (module, query, key, value, attention_mask)
        return flex(*args, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS, "flex_attention", recording)
    _, model = _pair("BertForMaskedLM", "eager")
    inputs = _inputs()
    full = {**inputs, "attention_mask": torch.ones_like(inputs["attention_mask"])}
    packed = {
        "input_ids": inputs["input_ids"],
        "position_ids": torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1]).expand(BATCH, -1),
    }
    batches = {"padded": inputs, "packed": packed, "full": full}
    outputs: dict[str, dict[tuple[str, bool], torch.Tensor]] = {name: {} for name in batches}
    for attn in ("eager", "flex_attention"):
        model.set_attn_implementation(attn)
        assert model.config._attn_implementation == attn
        for unpad in (True, False):
            model.config.unpad_inputs = unpad
            with torch.no_grad():
                for name, batch in batches.items():
                    handed.clear()
                    outputs[name][attn, unpad] = model(**batch).logits
                    if attn == "flex_attention":  # a BlockMask where something is masked, nothing otherwise
                        assert handed and all(
                            mask is None if name == "full" else isinstance(mask, BlockMask) for mask in handed
                        ), (name, handed)
    real = inputs["attention_mask"].bool()
    for name, got in outputs.items():
        for unpad in (True, False):
            mask = real if name == "padded" and unpad else None
            _compare(got["flex_attention", unpad], got["eager", unpad], mask, f"{name}, unpad={unpad}")
    assert not torch.allclose(outputs["packed"]["eager", False], outputs["full"]["eager", False], atol=1e-3)


@pytest.mark.slow  # torch compiles flex attention, on CPU too
@pytest.mark.parametrize("unpad", [True, False], ids=["unpad", "padded"])
@pytest.mark.parametrize("form", ["bool", "float"])
@pytest.mark.parametrize("head", ["BertModel", "BertForMaskedLM"])
def test_flex_attention_applies_a_prepared_4d_mask_as_given(head: str, form: str, unpad: bool) -> None:
    """A (B, 1, T, T) mask, bool (True to attend) or additive, and a (B, 1, 1, T) additive key mask are applied under
    flex attention as under eager and sdpa with the same weights, and give transformers' BERT's outputs (its sdpa for
    the bool mask, as `test_parity_with_a_prepared_4d_mask`). Forward only: flex attention has no CPU backward."""
    reference, ours = _pair(head, "sdpa" if form == "bool" else "eager", unpad)
    inputs = _inputs()
    inputs.update(_labels(head, inputs))
    blocks = _block_diagonal_mask(inputs)
    masks = {"(B, 1, T, T)": blocks if form == "bool" else _additive_form(blocks)}
    if form == "float":
        masks["(B, 1, 1, T)"] = _additive_form(inputs["attention_mask"].bool()[:, None, None, :])
    key = "logits" if head == "BertForMaskedLM" else "last_hidden_state"
    for shape, mask in masks.items():
        batch = inputs | {"attention_mask": mask}
        got = {}
        for attn in ("eager", "sdpa", "flex_attention"):
            ours.set_attn_implementation(attn)
            with torch.no_grad():
                got[attn] = ours(**batch)
        for attn in ("eager", "sdpa"):
            _compare(got["flex_attention"][key], got[attn][key], None, f"{shape}: flex against {attn}")
        with torch.no_grad():
            _compare_outputs(got["flex_attention"], reference(**batch), mask=None)
    with torch.no_grad():  # the mask is applied, not dropped: a segment's tokens do not see the other segment
        plain = ours(**(inputs | {"attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}))
    assert not torch.allclose(plain[key], got["flex_attention"][key])


# --------------------------------------------------------------------------------------------------------- CUDA


@pytest.fixture
def ieee_fp32_matmuls() -> object:
    """fp32 matrix products in full precision (no TF32) for the test, whatever the process had set."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


@pytest.mark.cuda
@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", 1e-5), ("bf16", 1e-2)])
@pytest.mark.parametrize("way", ["unpad", "padded", "by-size"])
@pytest.mark.parametrize("head", HEADS)
def test_cuda_matches_cpu(
    monkeypatch: pytest.MonkeyPatch, head: str, way: str, precision: str, tolerance: float, ieee_fp32_matmuls: object
) -> None:
    """Every head on CUDA gives its CPU fp32 outputs and loss: in fp32 within 1e-5, under bf16 autocast within 1e-2.
    A padded batch runs unpadded on both (forced on CUDA at this size; under bf16 its attention runs through
    PyTorch's varlen kernel where torch has one), padded on both (`unpad_inputs=False`), or `by-size`:
    `unpad_inputs=True` on CUDA below `DEVICE_RULES.unpad_min_hidden` with no varlen kernel runs padded, as the CPU's
    padded run."""
    from hf_bertscratch import batching_bertscratch

    if way == "unpad":
        monkeypatch.setattr(batching_bertscratch.DEVICE_RULES, "unpad_min_hidden", {})
    if way == "by-size":
        monkeypatch.setattr(batching_bertscratch.DEVICE_RULES, "torch_varlen_devices", ())
    varlen_calls = []
    attend = batching_bertscratch.BertScratchVarlen.attend
    monkeypatch.setattr(
        batching_bertscratch.BertScratchVarlen, "attend", lambda *args: varlen_calls.append(1) or attend(*args)
    )
    _, ours = _pair(head, "sdpa", unpad=way == "unpad")
    assert ours.config.hidden_size < batching_bertscratch.DEVICE_RULES.unpad_min_hidden.get("cuda", 0) or way == "unpad"
    inputs = _inputs(multiple_choice=head == "BertForMultipleChoice")
    inputs.update(_labels(head, inputs))
    with torch.no_grad():
        expected = ours(**inputs)
        ours.config.unpad_inputs = way != "padded"
        ours.to("cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            got = ours(**{name: tensor.cuda() for name, tensor in inputs.items()})
    assert set(got.keys()) == set(expected.keys())
    for name, value in expected.items():
        torch.testing.assert_close(
            got[name].float().cpu(), value, atol=tolerance, rtol=tolerance, msg=lambda m: f"{name}: {m}"
        )
    varlen_expected = (
        way == "unpad" and precision == "bf16" and batching_bertscratch.torch_varlen_attention() is not None
    )
    assert bool(varlen_calls) is varlen_expected
