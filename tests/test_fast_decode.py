"""Fast decoding (`hf_bertscratch.fast_decode`): tiles straight into a reused logits buffer give BERT's logits, never
overwrite logits a caller still holds, and the decoding of each machine is the fastest one it timed, cached."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM, BertScratchForPreTraining, fast_decode
from tests.conftest import tiny_config_kwargs
from tests.test_speed_equivalence import ATOL, VOCAB, _batch, _models


def test_models_decode_plainly_unless_enabled() -> None:
    config = BertScratchConfig(**tiny_config_kwargs(VOCAB))
    for head in (BertScratchForMaskedLM, BertScratchForPreTraining):
        model = head(config)
        assert model.logits_decoder is None
        assert isinstance(fast_decode.enable(model).logits_decoder, fast_decode.TiledLogitsDecoder)


@pytest.mark.parametrize("tiles", [None, (5, 40)])
def test_inference_decoding_into_the_padded_logits_matches_reference(
    monkeypatch: pytest.MonkeyPatch, tiles: tuple[int, int] | None
) -> None:
    """Without autograd, the vocabulary is decoded into the padded logits buffer: in one GEMM whose rows then move to
    their places (None), or tile by tile of each run of real rows straight to them.

    (5, 40): with that tile, 5-row tiles split the runs of real tokens, and 40-word vocabulary tiles leave a
    ragged last tile (99 words), so every edge of the tiling is crossed.
    """
    ours, reference = _models()
    fast_decode.enable(ours, tiles)
    calls = []
    decode_into = fast_decode.decode_into
    monkeypatch.setattr(fast_decode, "decode_into", lambda *args: calls.append(args[3]) or decode_into(*args))
    batch = _batch()
    ours.eval(), reference.eval()
    for inputs in (
        {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]},  # padded
        {"input_ids": batch["input_ids"][:1]},
    ):  # no padding: dense decoding, into the buffer too
        with torch.inference_mode():
            ours_logits, reference_logits = ours(**inputs).logits, reference(**inputs).logits
        differentiable = ours(**inputs).logits  # autograd on: the differentiable path
        real = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
        torch.testing.assert_close(ours_logits[real], reference_logits[real], atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(ours_logits, differentiable.detach(), atol=ATOL, rtol=1e-4)
        assert bool((ours_logits[~real] == 0).all())
    # The padded batch has runs of 12 + 7 (a full row then a right-padded one merge: 19), 3, and a left-padded 5.
    assert calls == [[(0, 0, 19), (24, 19, 3), (43, 22, 5)], [(0, 0, 12)]]


@pytest.mark.parametrize(
    "runs",
    [
        [(0, 0, 4), (6, 4, 10), (17, 14, 3), (30, 17, 1)],  # the second run's place overlaps its rows: moved in pieces
        [(2, 0, 5), (7, 5, 3)],  # every run shifted by the same 2 rows, pieces of 2
        [(10, 0, 3), (0, 3, 4)],  # not in grid order: one GEMM per run
    ],
)
@pytest.mark.parametrize("tile", [None, (3, 40)])
def test_decoding_into_runs_puts_each_run_at_its_place(runs: list[tuple[int, int, int]], tile) -> None:
    """`decode_into` writes each run's decoded rows at its place, whatever the overlap between a run's rows and its
    place; tiles and one GEMM per run leave the rows between runs as they were."""
    ours, _ = _models()
    head = ours.cls
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(sum(length for _, _, length in runs), head.decoder.in_features, generator=generator)
    out = torch.full((32, head.decoder.out_features), 7.0)
    expected = out.clone()
    for out_start, hidden_start, length in runs:
        expected[out_start : out_start + length] = head.decoder(hidden[hidden_start : hidden_start + length])
    with torch.no_grad():
        fast_decode.decode_into(head, hidden, out, runs, tile)
    written = torch.zeros(out.shape[0], dtype=torch.bool)
    for out_start, _, length in runs:
        written[out_start : out_start + length] = True
    torch.testing.assert_close(out[written], expected[written], atol=ATOL, rtol=1e-4)
    if tile is not None or not fast_decode._in_grid_order(runs):  # one GEMM uses the rows before a run as scratch
        assert bool((out[~written] == 7.0).all())


@pytest.mark.parametrize("tile", [None, (5, 40)])
def test_a_head_offloaded_by_accelerate_decodes_through_its_forward(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tile: tuple[int, int] | None
) -> None:
    """A device_map that offloads the MLM head to disk leaves its decoder's weights on the meta device, loaded in a
    hook accelerate wraps around the decoder's forward: with `enable`, the model then decodes through that forward
    (its own decoding), not into the buffer from the weights, and gives the logits of the model loaded whole, padded
    batch or not. (Untied: with the decoder tied to the word embeddings, a map that offloads the head to disk and not
    the embeddings is refused, as accelerate cannot load a tied weight from disk for one of its modules only.)"""
    torch.manual_seed(0)
    config = BertScratchConfig(**tiny_config_kwargs(VOCAB), tie_word_embeddings=False)
    BertScratchForMaskedLM(config).save_pretrained(tmp_path / "model")
    whole = BertScratchForMaskedLM.from_pretrained(tmp_path / "model").eval()
    offloaded = BertScratchForMaskedLM.from_pretrained(
        tmp_path / "model", device_map={"bert": "cpu", "cls": "disk"}, offload_folder=str(tmp_path / "offload")
    ).eval()
    assert offloaded.cls.decoder.weight.is_meta
    fast_decode.enable(offloaded, tile)
    calls = []
    decode_into = fast_decode.decode_into
    monkeypatch.setattr(fast_decode, "decode_into", lambda *args: calls.append(args[3]) or decode_into(*args))
    batch = _batch()
    for inputs in (
        {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]},
        {"input_ids": batch["input_ids"][:1]},
    ):
        real = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
        with torch.inference_mode():
            logits, expected = offloaded(**inputs).logits, whole(**inputs).logits
        torch.testing.assert_close(logits[real], expected[real], atol=ATOL, rtol=1e-4)
        assert bool((logits[~real] == 0).all())
    assert not calls


def test_a_bad_tile_is_named() -> None:
    ours, _ = _models()
    with pytest.raises(ValueError, match=r"tile must be two positive sizes .* got \(0, 40\)"):
        fast_decode.enable(ours, (0, 40))


def test_inference_reuses_the_logits_buffer_only_once_the_last_logits_are_dropped() -> None:
    """The decode writes into the model's last logits buffer when no tensor uses it any more, never into logits (or a
    view of them) that a caller still holds, and each result still equals BERT's logits."""
    import copy
    import pickle

    ours, reference = _models()
    fast_decode.enable(ours, tile=None)  # into the buffer, whatever this machine's choice
    ours.eval(), reference.eval()
    batch = _batch()
    inputs = [
        {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]},
        {"input_ids": batch["input_ids"].flip(0), "attention_mask": batch["attention_mask"].flip(0)},
    ]
    with torch.no_grad():
        expected = [reference(**x).logits * x["attention_mask"][..., None] for x in inputs]  # ours: 0 at pads
    with torch.inference_mode():  # a buffer made in inference mode is an inference tensor: not written outside it
        torch.testing.assert_close(ours(**inputs[1]).logits, expected[1], atol=ATOL, rtol=1e-4)
    with torch.no_grad():
        held = ours(**inputs[0]).logits
        second = ours(**inputs[1]).logits  # the first logits are held: new memory
        assert second.data_ptr() != held.data_ptr()
        torch.testing.assert_close(held, expected[0], atol=ATOL, rtol=1e-4)  # not overwritten
        address = second.data_ptr()
        del second, held
        third = ours(**inputs[0]).logits  # the last logits were dropped: their memory is reused
        assert third.data_ptr() == address
        torch.testing.assert_close(third, expected[0], atol=ATOL, rtol=1e-4)
        row = third[1]  # only a view of the logits is kept: still in use
        del third
        fourth = ours(**inputs[1]).logits
        assert fourth.data_ptr() != address
        torch.testing.assert_close(row, expected[0][1], atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(fourth, expected[1], atol=ATOL, rtol=1e-4)
        del fourth, row
    # The buffer is not model state: not in the state dict, not copied or pickled with the model.
    assert set(ours.state_dict()) == set(copy.deepcopy(ours).state_dict())
    assert ours.logits_decoder._buffer is not None and copy.deepcopy(ours).logits_decoder._buffer is None
    assert not any(isinstance(value, torch.Tensor) for value in vars(pickle.loads(pickle.dumps(ours))).values())


def test_the_decoding_is_chosen_by_timing_once_and_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    """`enable(model)` times the candidates at the first decoding of a padded batch and at the first of one without
    padding, each apart, takes the fastest, caches it per machine, and once the first `MAX_PROBES` processes have timed it a
    later model on the same machine reads the cache instead of timing again; "model" leaves decoding to the model."""
    from hf_bertscratch import cpu_matmul

    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "cpu_matmul.json")
    # a clear GEMM choice: a close call (a loaded machine's) is probed again by the next "process", and a decoding
    # choice is cached per GEMM path, so a flipped path would time the decoding again
    clear = {"fp32 default": 20.0, "fp32 onednn": 10.0, "bf16 default": 20.0, "bf16 onednn": 10.0}
    monkeypatch.setattr(cpu_matmul, "probe", lambda: clear)
    timings = []

    def fake_times(head: object, padded: bool = False) -> dict:
        timings.append(padded)
        if padded:
            return {"model": 3.0, None: 2.0, fast_decode.DEFAULT_TILE: 1.0}
        return {"model": 3.0, None: 1.0, fast_decode.DEFAULT_TILE: 2.0}

    monkeypatch.setattr(fast_decode, "time_candidates", fake_times)
    ours, reference = _models()
    inputs = {key: value for key, value in _batch().items() if key != "labels"}
    unpadded = {"input_ids": inputs["input_ids"][:1]}
    ours.eval()
    for process in range(cpu_matmul.MAX_PROBES + 1):  # timed by the first MAX_PROBES, the last from the cache
        cpu_matmul.set_path(None)  # a new process, as far as the choices go
        fast_decode.enable(ours)
        with torch.inference_mode():
            ours(**inputs)
        assert (ours.logits_decoder.tile, ours.logits_decoder.padded_tile) == ("auto", fast_decode.DEFAULT_TILE)
        with torch.inference_mode():
            ours(**unpadded)
        assert (ours.logits_decoder.tile, ours.logits_decoder.padded_tile) == (None, fast_decode.DEFAULT_TILE)
        assert timings == [True, False] * min(process + 1, cpu_matmul.MAX_PROBES)
    cpu_matmul.set_path(None)

    monkeypatch.setattr(fast_decode, "time_candidates", lambda head, padded: {"model": 1.0, None: 2.0})
    monkeypatch.setattr(cpu_matmul, "CACHE_FILE", tmp_path / "other-machine.json")
    fast_decode.enable(ours)
    calls = []
    monkeypatch.setattr(fast_decode, "decode_into", lambda *args: calls.append(args))
    with torch.inference_mode():
        logits = ours(**inputs).logits
    assert ours.logits_decoder.padded_tile == "model" and not calls  # the model's own decoding
    with torch.inference_mode():
        expected = reference(**inputs).logits
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(logits[real], expected[real], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("padded", [False, True])
def test_timing_the_candidates_names_each_and_leaves_the_global_generator(padded: bool) -> None:
    """Each candidate is timed, and the probe draws nothing from the global generator: a run's masking and dropout
    are the same whether its first evaluation probed or read the cache."""
    ours, _ = _models()
    torch.manual_seed(0)
    state = torch.get_rng_state()
    seconds = fast_decode.time_candidates(ours.cls, padded)
    assert set(seconds) == {"model", None, fast_decode.DEFAULT_TILE} and min(seconds.values()) > 0
    assert torch.equal(torch.get_rng_state(), state)
