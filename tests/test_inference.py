"""Tests for hf_bertscratch.inference: results match the model run by hand (fill-mask, decoding the masks only, matches
transformers' pipeline), bad input fails early and clearly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import hf_bertscratch
import hf_bertscratch_base.model_reference
from hf_bertscratch import inference
from hf_bertscratch.model_reference import check_model_reference

from conftest import assert_same_results, in_offline_hub_cache, tiny_config_kwargs

LONG_TEXT = " ".join(["the cat sat on the mat ."] * 30)  # 211 tokens, beyond the tiny model's 64 positions


@pytest.fixture(scope="module")
def model_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Untrained tiny masked-LM and two-label classifier folders, each saved with the tokenizer."""
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), id2label={0: "neg", 1: "pos"})
    dirs = {}
    for name, model_class in [
        ("mlm", hf_bertscratch.BertScratchForMaskedLM),
        ("classifier", hf_bertscratch.BertScratchForSequenceClassification),
    ]:
        dirs[name] = tmp_path_factory.mktemp(name)
        model_class(config).save_pretrained(dirs[name])
        tokenizer.save_pretrained(dirs[name])
    return dirs


def test_embed_truncates_long_text_to_the_positions(model_dirs, tokenizer) -> None:
    vector = inference.embed(model_dirs["mlm"], LONG_TEXT, pooling="mean")
    model = hf_bertscratch.BertScratchModel.from_pretrained(model_dirs["mlm"]).eval()
    encoding = tokenizer(LONG_TEXT, return_tensors="pt", truncation=True, max_length=64)
    with torch.no_grad():
        reference = model(**encoding).last_hidden_state[0].mean(0)  # (H,)
    np.testing.assert_allclose(vector, reference.numpy(), atol=1e-5)


def test_embed_cuts_an_embedding_folders_text_where_sentence_transformers_does(tmp_path: Path, tokenizer) -> None:
    """An embedding folder trained on 16-token texts: `embed` cuts a long text at its max_seq_length, as
    sentence-transformers does (not at the model's 64 positions), and gives sentence-transformers' vector."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from hf_bertscratch.embedding import write_sentence_transformers_files

    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchModel(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    write_sentence_transformers_files(tmp_path, "mean", 16, config.hidden_size)
    encoder = sentence_transformers.SentenceTransformer(str(tmp_path), trust_remote_code=True, device="cpu")
    reference = encoder.encode([LONG_TEXT], convert_to_numpy=True)[0]
    np.testing.assert_allclose(inference.embed(tmp_path, LONG_TEXT), reference, atol=1e-5)


def _embedding_folder_with(folder: Path, tokenizer, module: dict) -> Path:
    """A mean-pooling embedding folder whose sentence-transformers modules end with `module` (as modules.json
    lists it; its folder, if any, gets an empty config)."""
    from hf_bertscratch.embedding import write_sentence_transformers_files

    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_sentence_transformers_files(folder, "mean", 16, config.hidden_size)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([*modules, {"idx": len(modules), "name": "2", **module}]))
    if module["path"]:
        (folder / module["path"]).mkdir()
        (folder / module["path"] / "config.json").write_text("{}")
    return folder


def test_embed_scales_to_unit_length_where_the_folders_modules_do(tmp_path: Path, tokenizer) -> None:
    """A sentence-transformers folder ending with a Normalize module (as all-MiniLM-L6-v2's does) gives unit
    vectors there; `embed` gives the same vectors, the similarity is unchanged."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = _embedding_folder_with(
        tmp_path, tokenizer, {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    )
    texts = ["the cat sat on the mat .", "paris is the capital of france ."]
    encoder = sentence_transformers.SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    reference = encoder.encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(np.linalg.norm(reference, axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.stack(list(inference.embed_many(folder, texts))), reference, atol=1e-5)
    assert inference.similarity(folder, *texts) == pytest.approx(float(reference[0] @ reference[1]), abs=1e-5)


def test_embed_by_hub_id_reads_the_snapshots_sentence_transformers_files(
    tmp_path: Path, tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding model given by its Hub id pools, normalises and cuts its text as its sentence-transformers files
    in the Hub snapshot say (here CLS pooling, a Normalize module, 16 tokens), as the same model given by folder
    does; offline, from the Hub cache alone."""
    folder = _embedding_folder_with(
        tmp_path / "embedder", tokenizer, {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    )
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "cls"}))
    in_offline_hub_cache(monkeypatch, folder, tmp_path / "hub", "someone/my-embedder")
    by_folder = inference.embed(folder, LONG_TEXT)
    assert np.linalg.norm(by_folder) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(inference.embed("someone/my-embedder", LONG_TEXT), by_folder, atol=1e-6)
    pipeline = inference.load_pipeline("feature-extraction", "someone/my-embedder")
    np.testing.assert_allclose(inference.embed(pipeline, LONG_TEXT), by_folder, atol=1e-6)


def test_embed_refuses_a_folder_whose_modules_it_does_not_compute(tmp_path: Path, tokenizer) -> None:
    """A Dense projection after the pooling (LaBSE's kind) would be left out, and the vectors silently unlike
    sentence-transformers': refused in one line naming it."""
    folder = _embedding_folder_with(
        tmp_path, tokenizer, {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    )
    with pytest.raises(ValueError, match=r"modules.json lists .*'Dense'.*hf_bertscratch computes"):
        inference.embed(folder, "the cat sat on the mat .")


def test_fill_mask_on_a_classifier_points_to_a_masked_lm(model_dirs) -> None:
    """Fine-tuning cannot give a classifier its masked-LM head back: the error points to a pretraining folder."""
    with pytest.raises(
        ValueError, match=r"fill-mask needs one of the heads .*\(a masked-LM folder, as `bertscratch pre"
    ):
        inference.fill_mask(model_dirs["classifier"], "the [MASK] sat .")


def test_a_tokenizer_larger_than_the_vocabulary_is_refused_on_loading(model_dirs, tokenizer, tmp_path: Path) -> None:
    """Refused when the model loads, naming both sizes, not at the first text holding a token past the embeddings."""
    config = hf_bertscratch.BertScratchConfig.from_pretrained(model_dirs["mlm"])
    hf_bertscratch.BertScratchForQuestionAnswering(config).save_pretrained(tmp_path / "qa")
    big = tmp_path / "vocab.txt"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(config.vocab_size)]
    big.write_text("\n".join(words))
    message = rf"tokenizer has {config.vocab_size + 5} tokens but the model's vocab_size is {config.vocab_size}"
    with pytest.raises(ValueError, match=message):
        inference.fill_mask(model_dirs["mlm"], "the [MASK] sat .", tokenizer=big)
    with pytest.raises(ValueError, match=message):
        inference.answer_question(tmp_path / "qa", "who ?", "the cat .", tokenizer=big)


@pytest.mark.parametrize("device", ["0", "cuda", "cuda:1"])
def test_a_gpu_device_without_one_is_refused_naming_it(model_dirs, device: str) -> None:
    """--device 0 (a GPU index, as the docs offer it) failed as torch's 'Invalid device string'; a CUDA device on a
    machine without one as an AssertionError from inside torch."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    message = rf"device={device!r} is a CUDA GPU and torch sees none here"
    with pytest.raises(ValueError, match=message):
        inference.classify(model_dirs["classifier"], "a film", device=device)
    with pytest.raises(ValueError, match=message):
        inference.fill_mask(model_dirs["mlm"], "the [MASK] sat .", device=device)


def test_device_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [inference.torch_device(d) for d in ("0", " 1", "cuda:1", "cpu", None, -1)] == [
        0,
        1,
        "cuda:1",
        "cpu",
        None,
        -1,
    ]
    with pytest.raises(ValueError, match=r"device='gpu' is not a device torch knows: expected cpu, cuda"):
        inference.torch_device("gpu")


def test_classify_long_text_and_reuse_pipeline(model_dirs) -> None:
    pipe = inference.load_pipeline("text-classification", model_dirs["classifier"], device="cpu")
    results = inference.classify(pipe, LONG_TEXT)
    assert sorted(r["label"] for r in results) == ["neg", "pos"]
    assert sum(r["score"] for r in results) == pytest.approx(1.0)
    assert results[0]["score"] >= results[1]["score"]


def test_a_pair_classifier_asks_for_the_second_text(model_dirs) -> None:
    """A classifier that reads each text of a pair by its own mean (`segments`) scored a single text as if its second
    text were empty; it asks for the pair instead, and scores the pair as the model does."""
    pipe = inference.load_pipeline("text-classification", model_dirs["classifier"], device="cpu")
    pipe.model.config.classifier_pooling = "segments"
    pipe.model = hf_bertscratch.BertScratchForSequenceClassification(pipe.model.config).eval()
    with pytest.raises(ValueError, match=r"reads a sentence pair .* give the second text \(--text_pair\)"):
        inference.classify(pipe, "the cat sat")
    scores = {r["label"]: r["score"] for r in inference.classify(pipe, "the cat sat", text_pair="a cat sat")}
    encoding = pipe.tokenizer("the cat sat", "a cat sat", return_tensors="pt")
    with torch.no_grad():
        expected = pipe.model(**encoding).logits.softmax(-1)[0]
    assert [scores["neg"], scores["pos"]] == pytest.approx(expected.tolist(), abs=1e-5)


def test_a_pipeline_runs_in_bfloat16_when_asked_and_gives_the_float32_answer(model_dirs) -> None:
    """`dtype="bfloat16"` (for a GPU; the CPU runs it too) loads the weights in bfloat16: the class probabilities stay
    within bfloat16's precision of float32's."""
    full = inference.load_pipeline("text-classification", model_dirs["classifier"])
    half = inference.load_pipeline("text-classification", model_dirs["classifier"], dtype="bfloat16")
    assert full.model.dtype == torch.float32 and half.model.dtype == torch.bfloat16
    scores = [{r["label"]: r["score"] for r in inference.classify(pipe, LONG_TEXT)} for pipe in (full, half)]
    assert scores[1] == {label: pytest.approx(score, abs=1e-2) for label, score in scores[0].items()}


def test_tf32_switches_matrix_products_as_trainer_does_and_needs_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    switched: list[bool] = []
    monkeypatch.setattr(inference, "enable_tf32", switched.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="dtype='tf32' is a CUDA GPU's matrix-product mode"):
        inference.inference_dtype("tf32")
    assert switched == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert inference.inference_dtype("tf32") == torch.float32 and switched == [True]
    with pytest.raises(ValueError, match="the onnxruntime backend runs the exported float32"):
        inference.inference_dtype("tf32", backend="onnxruntime")


MASKED_TEXTS = ["the [MASK] sat on the mat .", "[MASK] is the capital of [MASK] ."]


def assert_same_candidates(results: list[dict], expected: list[dict]) -> None:
    """The same tokens and sequences in the same order, scores within 1e-5."""
    assert [c["token"] for c in results] == [c["token"] for c in expected]
    assert [(c["token_str"], c["sequence"]) for c in results] == [(c["token_str"], c["sequence"]) for c in expected]
    np.testing.assert_allclose([c["score"] for c in results], [c["score"] for c in expected], rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def full_fill_mask(model_dirs, tokenizer) -> transformers.FillMaskPipeline:
    """transformers' own fill-mask pipeline on the masked LM: it decodes all T positions."""
    pipe = transformers.pipeline("fill-mask", model=str(model_dirs["mlm"]), tokenizer=tokenizer, dtype=torch.float32)
    assert type(pipe) is transformers.FillMaskPipeline
    return pipe


@pytest.mark.parametrize("text", MASKED_TEXTS)
def test_fill_mask_decodes_masks_only(model_dirs, full_fill_mask, text: str) -> None:
    """`fill_mask` asks the model for the masks' logits alone, (1, K, V), and answers as transformers' pipeline does
    from all (1, T, V) logits."""
    pipe = inference.load_pipeline("fill-mask", model_dirs["mlm"])
    assert isinstance(pipe, inference.BertScratchFillMaskPipeline)
    shapes = []
    hook = pipe.model.register_forward_hook(lambda module, args, output: shapes.append(tuple(output.logits.shape)))
    try:
        results = inference.fill_mask(pipe, text, top_k=5)
    finally:
        hook.remove()
    masks = text.count("[MASK]")
    assert shapes == [(1, masks, pipe.model.config.vocab_size)]
    expected = full_fill_mask(text, top_k=5)
    for mask, expected_mask in zip(results, expected if masks > 1 else [expected], strict=True):
        assert_same_candidates(mask, expected_mask)


def test_fill_mask_batches_rows_with_different_mask_counts(model_dirs, full_fill_mask) -> None:
    """A batch of texts with one and two masks (the one-mask row's positions padded with its own mask)."""
    pipe = inference.load_pipeline("fill-mask", model_dirs["mlm"])
    results, expected = pipe(MASKED_TEXTS, batch_size=2, top_k=3), full_fill_mask(MASKED_TEXTS, batch_size=2, top_k=3)
    assert_same_candidates(results[0], expected[0])
    for mask, expected_mask in zip(results[1], expected[1], strict=True):
        assert_same_candidates(mask, expected_mask)


def test_masked_positions_in_text_order() -> None:
    """Each row's mask positions in order; a row with fewer masks than the most repeats its first."""
    input_ids = torch.tensor([[2, 4, 7, 4, 3], [2, 7, 4, 3, 0], [4, 4, 4, 3, 0]])
    assert inference.masked_positions(input_ids, 4).tolist() == [[1, 3, 1], [2, 2, 2], [0, 1, 2]]


def test_masked_lm_decodes_given_positions(model_dirs) -> None:
    """`masked_positions` (B, K): the (B, K, V) logits are the full logits at those positions (padded rows too)."""
    model = hf_bertscratch.BertScratchForMaskedLM.from_pretrained(model_dirs["mlm"]).eval()
    input_ids = torch.randint(5, model.config.vocab_size, (3, 9))
    attention_mask = (torch.arange(9)[None] < torch.tensor([[9], [6], [2]])).long()
    positions = torch.tensor([[0, 8, 4], [5, 1, 1], [1, 0, 1]])
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, T, V)
        logits = model(input_ids=input_ids, attention_mask=attention_mask, masked_positions=positions).logits
    expected = full.gather(1, positions[..., None].expand(-1, -1, full.shape[-1]))
    assert logits.shape == (3, 3, model.config.vocab_size)
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"masked_positions contains 9, outside \[0, 8\]"):
        model(input_ids=input_ids, masked_positions=positions + 1)
    with pytest.raises(ValueError, match=r"masked_positions must have shape \(batch, masks\) with batch 3"):
        model(input_ids=input_ids, masked_positions=positions[0])
    with pytest.raises(ValueError, match="Pass labels or masked_positions, not both"):
        model(input_ids=input_ids, labels=input_ids, masked_positions=positions)


def test_tokenizer_override(model_dirs, vocab_file: Path) -> None:
    results = inference.fill_mask(model_dirs["mlm"], "the [MASK] sat .", top_k=2, tokenizer=vocab_file)
    assert len(results) == 1 and len(results[0]) == 2


@pytest.mark.parametrize(
    "reference, error, match",
    [
        ("{tmp}/missing", FileNotFoundError, "does not exist"),
        ("./missing", FileNotFoundError, "does not exist"),
        ("a/b/c", FileNotFoundError, "neither|does not exist"),
        ("{tmp}", FileNotFoundError, "has no config.json"),
        ("{tmp}/file.txt", NotADirectoryError, "is a file"),
    ],
)
def test_check_model_reference_errors(tmp_path: Path, reference: str, error: type, match: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(error, match=match):
        check_model_reference(reference.format(tmp=tmp_path))


def test_a_missing_folder_under_an_existing_one_is_not_taken_for_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(FileNotFoundError, match="Model folder 'runs/nope' does not exist"):
        check_model_reference("runs/nope")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="the Hub is offline"):
        check_model_reference("someone/bert-mini")


def test_check_model_reference_accepts_hub_ids_and_folders(model_dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_bertscratch_base.model_reference, "hub_unreachable", lambda: None)  # as if online
    assert check_model_reference("someone/bert-mini") == "someone/bert-mini"
    assert check_model_reference("bert-base-uncased") == "bert-base-uncased"
    assert check_model_reference(model_dirs["mlm"]) == str(model_dirs["mlm"])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda d: inference.fill_mask(d["mlm"], "the [MASK]", top_k=0), "top_k must be at least 1"),
        (lambda d: inference.embed(d["mlm"], "the cat", pooling="max"), "pooling='max' is not supported"),
        (lambda d: inference.load_pipeline("summarization", d["mlm"]), "No pipeline for task 'summarization'"),
        (lambda d: inference.load_pipeline("question-answering", d["mlm"]), "answer_question"),
        (lambda d: inference.classify(d["classifier"], "  "), "Text is empty"),
        (lambda d: inference.classify_many(d["classifier"], ["a cat", " "]), "Text 2 of 2 is empty"),
        (lambda d: inference.classify_many(d["classifier"], ["a"], ["b", "c"]), "1 texts and 2 text_pairs"),
        (lambda d: inference.embed_many(d["mlm"], ["a cat"], batch_size=0), "batch_size must be at least 1, got 0"),
        (
            lambda d: inference.fill_mask_many(d["mlm"], ["the [MASK]", "a cat"]),
            r"Text 2 of 2 'a cat' has no \[MASK\] token",
        ),
        (
            lambda d: inference.fill_mask_many(d["mlm"], ["the [MASK] .", f"{LONG_TEXT} the [MASK] ."]),
            r"Text 2 of 2 is \d+ tokens long \(\[CLS\] and \[SEP\] included\), and the model reads at most 64: "
            r"shorten it around its \[MASK\]\.",
        ),
        (lambda d: inference.load_pipeline("fill-mask", d["mlm"], dtype="half"), "dtype='half' is not supported"),
        (
            lambda d: inference.load_pipeline("fill-mask", d["mlm"], backend="onnxruntime", dtype="bfloat16"),
            "the onnxruntime backend runs the exported float32",
        ),
    ],
)
def test_bad_arguments(model_dirs, call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(model_dirs)


BATCH_TEXTS = ["the cat sat .", LONG_TEXT, "the [MASK] sat on the mat .", "a [MASK] ."]


def test_the_feature_extraction_pipeline_gives_each_text_its_own_tokens_in_a_batch(model_dirs) -> None:
    """transformers' own hands back each text's states padded to the longest text of its batch; the pipeline
    `load_pipeline` builds cuts them to the text's tokens, the states the text alone gives."""
    extractor = inference.load_pipeline("feature-extraction", model_dirs["mlm"])
    cut = {"truncation": True, "max_length": 64}
    batched = extractor(BATCH_TEXTS, batch_size=2, return_tensors=True, tokenize_kwargs=cut)
    for text, states in zip(BATCH_TEXTS, batched, strict=True):
        alone = extractor(text, return_tensors=True, tokenize_kwargs=cut)  # (1, T, H)
        assert states.shape == alone.shape
        torch.testing.assert_close(states, alone, atol=1e-5, rtol=0)


def test_a_batch_gives_each_text_what_it_gives_alone(model_dirs) -> None:
    """Texts of different lengths (one cut to the model's positions) in batches: the results come in input order,
    each the one-text function's result for it."""
    encoder = inference.load_pipeline("feature-extraction", model_dirs["mlm"])
    vectors = list(inference.embed_many(encoder, BATCH_TEXTS, batch_size=2))
    assert len(vectors) == len(BATCH_TEXTS)
    for vector, text in zip(vectors, BATCH_TEXTS):
        np.testing.assert_allclose(vector, inference.embed(encoder, text), atol=1e-5)
    classifier = inference.load_pipeline("text-classification", model_dirs["classifier"])
    results = list(inference.classify_many(classifier, BATCH_TEXTS, batch_size=3))
    assert_same_results(results, [inference.classify(classifier, text) for text in BATCH_TEXTS])
    fill, masked = inference.load_pipeline("fill-mask", model_dirs["mlm"]), BATCH_TEXTS[2:]
    results = list(inference.fill_mask_many(fill, masked, top_k=3, batch_size=2))
    assert_same_results(results, [inference.fill_mask(fill, text, top_k=3) for text in masked])


def test_similarity_runs_batch_size_pairs_per_forward_pass(model_dirs, monkeypatch) -> None:
    """A pair is one input, as in `classify_many` (and --batch_size counts inputs): both texts of `batch_size` pairs
    go through each forward pass; a batch size below 1 is refused before the model loads."""
    encoder = inference.load_pipeline("feature-extraction", model_dirs["mlm"])
    sizes: list[int] = []
    forward = encoder.model.forward

    def counted(**inputs: torch.Tensor) -> object:
        sizes.append(len(inputs["input_ids"]))
        return forward(**inputs)

    monkeypatch.setattr(encoder.model, "forward", counted)
    texts, pairs = ["the cat sat .", "a cat .", "the mat ."], ["the dog sat .", "a dog .", "the rug ."]
    scores = list(inference.similarity_many(encoder, texts, pairs, batch_size=2))
    assert sizes == [4, 2]
    assert_same_results(scores, [inference.similarity(encoder, text, pair) for text, pair in zip(texts, pairs)])
    monkeypatch.setattr(inference, "load_pipeline", lambda *args, **kwargs: pytest.fail("the model loaded"))
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        inference.similarity_many(model_dirs["mlm"], texts, pairs, batch_size=0)


def test_attention_weights_match_model_output(tiny_config, tokenizer) -> None:
    model = hf_bertscratch.BertScratchForMaskedLM(tiny_config).train()
    tokens, weights = inference.attention_weights(model, tokenizer, "paris is the capital of france .")
    assert tokens == ["[CLS]", "paris", "is", "the", "capital", "of", "france", ".", "[SEP]"]
    assert weights.shape == (2, 4, 9, 9)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 9))
    assert model.training, "the model's train/eval mode must be restored"
    model.eval()
    reference = model(**tokenizer("paris is the capital of france .", return_tensors="pt"), output_attentions=True)
    torch.testing.assert_close(weights[1], reference.attentions[1][0])


def test_attention_weights_of_an_empty_text(tiny_config, tokenizer) -> None:
    with pytest.raises(ValueError, match="text is empty"):
        inference.attention_weights(hf_bertscratch.BertScratchForMaskedLM(tiny_config), tokenizer, "  ")


def test_fill_mask_on_an_electra_discriminator_points_to_its_generator(tokenizer, tmp_path: Path) -> None:
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchForReplacedTokenDetection(config).save_pretrained(tmp_path / "electra")
    tokenizer.save_pretrained(tmp_path / "electra")
    generator = re.escape(repr(str(tmp_path / "electra" / "generator")))
    with pytest.raises(ValueError, match=f"fill-mask needs .* masked LM is its generator, .*: {generator}"):
        inference.fill_mask(tmp_path / "electra", "the [MASK] sat")
