"""FlashAttention through transformers' own `flash_attention_forward`: padded and padding-free batches run varlen
on the real tokens (one row of sequences, `cu_seq_lens`), and every token gets what eager attention gives it.

On a CPU the flash-attn kernels do not exist: `cpu_flash` stands in for them below transformers' interface (where
transformers imports `flash_attn_func`/`flash_attn_varlen_func`), with SDPA per sequence, so that everything above
the kernel is the real code path: the model's plan, transformers' kwargs processing and its dispatch. The
CUDA-marked test at the end runs the real kernels where flash-attn is installed.
"""

from __future__ import annotations

import pytest
import torch
import transformers
import transformers.modeling_flash_attention_utils as flash_utils
from torch.nn import functional as F

import hf_bertscratch
from hf_bertscratch import BertScratchConfig
from hf_bertscratch.batching_bertscratch import BertScratchVarlen
from tests.conftest import tiny_config_kwargs
from tests.test_modeling_bertscratch import (
    TRAINING_BATCHES,
    TRAINING_STEP_HOST_READS,
    _count_host_reads,
    _training_batch,
)

ATOL = 1e-5
VOCAB = 99


def _attention(q, k, v, softmax_scale):  # noqa: ANN001, ANN202
    """(B, T, nh, hs) in and out, as flash-attn's kernels take them."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=softmax_scale)
    return out.transpose(1, 2)


@pytest.fixture
def cpu_flash(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Make transformers' "flash_attention_2" run on a CPU: its kernel imports return SDPA-based functions with
    flash-attn's signatures. Returns the varlen calls made: the sequence bounds and the number of tokens."""
    calls: list[dict] = []

    def flash_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,  # noqa: ANN001, ANN202
                     softmax_scale=None, causal=False):  # fmt: skip
        """flash_attn_varlen_func's contract: (N, nh, hs) tokens of the sequences cu_seqlens bounds."""
        bounds = cu_seqlens_q.tolist()
        assert cu_seqlens_q.dtype == torch.int32 and torch.equal(cu_seqlens_q, cu_seqlens_k)
        assert max_seqlen_q == max_seqlen_k == max(b - a for a, b in zip(bounds, bounds[1:]))
        assert bounds[-1] == q.shape[0] and not causal
        calls.append({"bounds": bounds, "tokens": q.shape[0]})
        out = torch.empty_like(q)
        for start, end in zip(bounds, bounds[1:]):
            out[start:end] = _attention(q[None, start:end], k[None, start:end], v[None, start:end], softmax_scale)[0]
        return out

    def flash_dense(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):  # noqa: ANN001, ANN202
        """flash_attn_func's contract: (B, T, nh, hs) rows with nothing padded."""
        calls.append({"dense": tuple(q.shape)})
        return _attention(q, k, v, softmax_scale)

    def imports(implementation, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return flash_dense, flash_varlen, None, flash_utils._pad_input, flash_utils._unpad_input

    monkeypatch.setattr(flash_utils, "_lazy_imports", imports)
    monkeypatch.setattr(flash_utils, "_loaded_implementation", None)
    return calls


def _model(head: str = "BertScratchModel", unpad: bool = True) -> torch.nn.Module:
    torch.manual_seed(0)
    config = BertScratchConfig(**tiny_config_kwargs(VOCAB), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.unpad_inputs = unpad
    return getattr(hf_bertscratch, head)(config).eval()


def _as(model: torch.nn.Module, implementation: str) -> torch.nn.Module:
    # Set on the config directly: `set_attn_implementation("flash_attention_2")` checks that flash-attn is installed.
    model.config._attn_implementation = implementation
    return model


def _padded_batch() -> dict[str, torch.Tensor]:
    """Right, left and middle padding and a row with no padding (lengths 7, 4, 5, 9 of 9)."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(1, VOCAB, (4, 9), generator=generator)
    attention_mask = torch.ones(4, 9, dtype=torch.long)
    attention_mask[0, 7:] = 0
    attention_mask[1, :5] = 0
    attention_mask[2, 2:6] = 0
    return {"input_ids": input_ids.masked_fill(attention_mask == 0, 0), "attention_mask": attention_mask}


def test_a_padded_batch_runs_varlen_on_its_real_tokens_as_eager_attention_does(cpu_flash: list[dict]) -> None:
    model = _model("BertScratchForMaskedLM")
    batch = _padded_batch()
    with torch.no_grad():
        eager = _as(model, "eager")(**batch).logits
        flash = _as(model, "flash_attention_2")(**batch).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(flash[real], eager[real], atol=ATOL, rtol=ATOL)
    assert len(cpu_flash) == model.config.num_hidden_layers  # one varlen call per layer, nothing padded around it
    assert {tuple(call["bounds"]) for call in cpu_flash} == {(0, 7, 11, 16, 25)}  # the rows' real tokens
    assert all(call["tokens"] == int(real.sum()) for call in cpu_flash)


def test_training_through_varlen_gives_eager_attentions_gradients(cpu_flash: list[dict]) -> None:
    batch = _padded_batch()
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    grads = {}
    for implementation in ("eager", "flash_attention_2"):
        model = _as(_model("BertScratchForMaskedLM"), implementation).train()
        model(**batch, labels=labels).loss.backward()
        grads[implementation] = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert cpu_flash and grads["eager"].keys() == grads["flash_attention_2"].keys()
    for name, grad in grads["eager"].items():
        torch.testing.assert_close(grads["flash_attention_2"][name], grad, atol=ATOL, rtol=1e-4, msg=name)


@pytest.mark.parametrize("flash_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
def test_a_padding_free_batch_gives_each_document_what_it_gets_alone(cpu_flash: list[dict], flash_kwargs: bool) -> None:
    """transformers' DataCollatorWithFlattening: one row of documents, positions restarting (and the FA kwargs)."""
    model = _model()
    documents = [[2, 5, 6, 7, 3], [2, 8, 3], [2, 9, 10, 11, 12, 3]]
    batch = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=flash_kwargs)(
        [{"input_ids": ids} for ids in documents]
    )
    batch.pop("labels")
    with torch.no_grad():
        packed = _as(model, "flash_attention_2")(**batch).last_hidden_state[0]
        positions = [torch.arange(len(ids))[None] for ids in documents]
        alone = [
            _as(model, "eager")(input_ids=torch.tensor([ids]), position_ids=p).last_hidden_state[0]
            for ids, p in zip(documents, positions)
        ]
    torch.testing.assert_close(packed, torch.cat(alone), atol=ATOL, rtol=ATOL)
    assert {tuple(call["bounds"]) for call in cpu_flash} == {(0, 5, 8, 14)}


def test_per_layer_outputs_keep_the_batch_padded_and_still_match_eager(cpu_flash: list[dict]) -> None:
    """Hidden states of every layer are per padded position: the batch runs padded, transformers' flash function
    unpads the (B, T) key mask in each layer; a padding-free row runs as SDPA with its document mask."""
    model = _model()
    batch = _padded_batch()
    with torch.no_grad():
        eager = _as(model, "eager")(**batch, output_hidden_states=True).hidden_states
        flash = _as(model, "flash_attention_2")(**batch, output_hidden_states=True).hidden_states
    real = batch["attention_mask"].bool()
    for ours, reference in zip(flash, eager, strict=True):
        torch.testing.assert_close(ours[real], reference[real], atol=ATOL, rtol=ATOL)
    assert len(cpu_flash) == model.config.num_hidden_layers  # transformers' own unpadding, varlen per layer

    packed = {"input_ids": torch.tensor([[2, 5, 6, 3, 2, 8, 3]]), "position_ids": torch.tensor([[0, 1, 2, 3, 0, 1, 2]])}
    with torch.no_grad():
        flash = _as(model, "flash_attention_2")(**packed, output_hidden_states=True).last_hidden_state
        eager = _as(model, "eager")(**packed, output_hidden_states=True).last_hidden_state
    torch.testing.assert_close(flash, eager, atol=ATOL, rtol=ATOL)


def test_a_batch_with_nothing_padded_runs_the_dense_kernel(cpu_flash: list[dict]) -> None:
    model = _model()
    batch = {"input_ids": torch.randint(1, VOCAB, (2, 6), generator=torch.Generator().manual_seed(0))}
    batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    with torch.no_grad():
        eager = _as(model, "eager")(**batch).last_hidden_state
        flash = _as(model, "flash_attention_2")(**batch).last_hidden_state
    torch.testing.assert_close(flash, eager, atol=ATOL, rtol=ATOL)
    assert cpu_flash == [{"dense": (2, 6, 4, 8)}] * model.config.num_hidden_layers  # flash_attn_func, no varlen


def test_sequence_bounds_come_from_rows_and_documents_without_a_host_read() -> None:
    keep = torch.tensor([[1, 1, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    documents = torch.tensor([[7, 7, 9, 9, 9], [0, 0, 0, 0, 0], [0, 0, 1, 1, 1]])
    counts, scalars = BertScratchVarlen.length_scalars(keep, documents)
    assert {name: int(value) for name, value in scalars.items()} == {"sequences": 4, "longest_sequence": 3}
    varlen = BertScratchVarlen.from_counts(counts, 4, 3)
    assert varlen.cu_seq_lens.tolist() == [0, 2, 4, 5, 8]  # the empty row has no sequence
    assert varlen.kwargs()["max_length_q"] == 3


def test_flash_attention_is_declared_to_transformers() -> None:
    assert hf_bertscratch.BertScratchForMaskedLM._supports_flash_attn


@pytest.mark.cuda
def test_flash_attention_2_on_a_gpu_matches_sdpa_in_bf16() -> None:
    pytest.importorskip("flash_attn", reason="flash-attn is not installed")
    model = _model("BertScratchForMaskedLM").to("cuda", torch.bfloat16)
    batch = {name: tensor.cuda() for name, tensor in _padded_batch().items()}
    with torch.no_grad():
        sdpa = _as(model, "sdpa")(**batch).logits.float()
        flash = _as(model, "flash_attention_2")(**batch).logits.float()
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(flash[real], sdpa[real], atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("kind", TRAINING_BATCHES)
def test_a_varlen_training_step_reads_the_host_once(
    cpu_flash: list[dict], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The sequence bounds and the longest sequence are read with the batch's other values, in its one host read
    (the stand-in kernel's own reads are not the model's)."""
    model = _as(_model("BertScratchForMaskedLM"), "flash_attention_2").train()
    batch = _training_batch(kind)
    reads = _count_host_reads(monkeypatch)
    model(**batch, num_items_in_batch=(batch["labels"] != -100).sum()).loss.backward()
    monkeypatch.undo()
    assert [read for read in reads if read[1] != "flash_varlen"] == TRAINING_STEP_HOST_READS, reads
    assert cpu_flash, "the step ran no FlashAttention"
