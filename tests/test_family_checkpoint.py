"""Any checkpoint of transformers' BERT family through the commands (`convert.family_checkpoint`): folders saved by
transformers' own BertForMaskedLM/BertModel and by sentence-transformers convert on load, fine-tune for a single-text,
a pair and a token task, and answer as the original does; a checkpoint BertScratch cannot hold is refused in one line.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    DistilBertConfig,
    ElectraConfig,
    pipeline,
)

import hf_bertscratch
from hf_bertscratch import convert, inference
from hf_bertscratch.tasks import TASKS, finetune_defaults
from hf_bertscratch.tasks.data import DataArguments, check_data_arguments
from hf_bertscratch_cli import main as bertscratch

from conftest import in_offline_hub_cache, tiny_config_kwargs

POSITIVE = "the movie was great and the acting was wonderful best love".split()
NEGATIVE = "the film was boring and the plot was bad worst hate terrible".split()
CITIES = ["paris", "london", "berlin", "rome", "madrid"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _bert_folder(path: Path, model_class: type, tokenizer: BertTokenizer, **config_kwargs: object) -> Path:
    """A tiny randomly initialised transformers BERT of `model_class`, saved by transformers with its tokenizer."""
    torch.manual_seed(0)
    model_class(BertConfig(**tiny_config_kwargs(len(tokenizer)), **config_kwargs)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def bert_mlm(tmp_path_factory: pytest.TempPathFactory, tokenizer: BertTokenizer) -> Path:
    return _bert_folder(tmp_path_factory.mktemp("bert-mlm"), BertForMaskedLM, tokenizer)


@pytest.fixture(scope="module")
def bert_model(tmp_path_factory: pytest.TempPathFactory, tokenizer: BertTokenizer) -> Path:
    return _bert_folder(tmp_path_factory.mktemp("bert-model"), BertModel, tokenizer)


@pytest.fixture(scope="module")
def sentence_transformers_folder(tmp_path_factory: pytest.TempPathFactory, bert_model: Path) -> Path:
    """A tiny sentence-transformers model (a BertModel and mean pooling), saved by sentence-transformers itself."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    path = tmp_path_factory.mktemp("sentence-transformers")
    transformer = Transformer(str(bert_model), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(path))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """Run `bertscratch ARGV` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        bertscratch(argv)
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _finetune(model: Path, output: Path, train: Path, dev: Path, *flags: str) -> list[str]:
    return [
        "finetune", "--model_name_or_path", str(model), "--train_file", str(train), "--validation_file", str(dev),
        "--output_dir", str(output), "--max_seq_length", "24", "--per_device_train_batch_size", "8",
        "--num_train_epochs", "2", "--learning_rate", "1e-3", "--report_to", "none", "--disable_tqdm", "true",
        "--use_cpu", "true", *flags,
    ]  # fmt: skip


def _sentiment(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"text": " ".join(rng.choices(POSITIVE if i % 2 else NEGATIVE, k=rng.randint(3, 12))), "label": i % 2}
        for i in range(n)
    ]


def _pairs(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        city = rng.choice(CITIES)
        other = city if i % 2 else rng.choice([c for c in CITIES if c != city])
        rows.append({"text": f"the capital is {city} .", "text_pair": f"{other} is the capital .", "label": i % 2})
    return rows


def _entities(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"tokens": ["the", "cat", "sat", "in", city], "ner_tags": ["O", "O", "O", "O", "B-LOC"]}
        for city in rng.choices(CITIES, k=n)
    ]


def _inputs(tokenizer: BertTokenizer) -> dict[str, torch.Tensor]:
    """Two sentence pairs of different lengths: padding and token_type_ids both exercised."""
    return tokenizer(
        ["paris is the capital of", "the cat sat on the mat with the dog ."],
        ["france .", "it ran fast ."],
        padding=True,
        return_tensors="pt",
    )


# -------------------------------------------------------------------------------------------------- the seam
def test_a_bert_checkpoint_converts_once_and_gives_transformers_logits(
    bert_mlm: Path, tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="hf_bertscratch.convert"):
        loaded = convert.family_checkpoint(bert_mlm)
    assert loaded != str(bert_mlm) and convert.family_checkpoint(bert_mlm) == loaded  # converted once per process
    notes = [r.getMessage() for r in caplog.records if "converted on load" in r.getMessage()]
    assert len(notes) == 1 and "BertForMaskedLM" in notes[0] and "\n" not in notes[0]

    ours = AutoModelForMaskedLM.from_pretrained(loaded).eval()
    assert type(ours).__name__ == "BertScratchForMaskedLM"
    reference = BertForMaskedLM.from_pretrained(bert_mlm).eval()
    batch = _inputs(tokenizer)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).logits[real], reference(**batch).logits[real], atol=1e-5, rtol=1e-4)


def test_a_converted_checkpoint_without_the_head_is_named_as_given(
    bert_mlm: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A command refusing a converted checkpoint for the head it lacks names the folder the user gave, not the
    temporary folder it was converted into (which is gone when the command exits)."""
    for argv in (
        ["classify", str(bert_mlm), "a wonderful film"],
        ["answer", str(bert_mlm), "--question", "Who?", "--context", "Paris is in France."],
        ["export", str(bert_mlm), str(tmp_path / "exported"), "--task", "text-classification"],
    ):
        code, _, err = _run(argv, capsys)
        assert code == 1 and f"Model {str(bert_mlm)!r} is a BertScratchForMaskedLM checkpoint" in err, (argv, err)
        assert "bertscratch-converted-" not in err, err


def test_a_bertscratch_checkpoint_is_loaded_as_it_is(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchForMaskedLM(config).save_pretrained(tmp_path)
    assert convert.family_checkpoint(tmp_path) == str(tmp_path)


def test_a_transformers_classifier_answers_as_transformers_pipeline_does(
    tmp_path: Path, tokenizer: BertTokenizer
) -> None:
    labels = {"id2label": {0: "neg", 1: "pos"}, "label2id": {"neg": 0, "pos": 1}}
    folder = _bert_folder(tmp_path / "classifier", BertForSequenceClassification, tokenizer, **labels)
    ours = inference.classify(str(folder), "the movie was great", "it ran fast .")
    reference = pipeline("text-classification", model=str(folder), device="cpu")(
        {"text": "the movie was great", "text_pair": "it ran fast ."}, top_k=None
    )
    assert [r["label"] for r in ours] == [r["label"] for r in reference]
    np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in reference], atol=1e-6)


def test_the_converted_sentence_transformers_folder_embeds_as_sentence_transformers(
    sentence_transformers_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    from sentence_transformers import SentenceTransformer

    text = "the cat sat on the mat ."
    expected = SentenceTransformer(str(sentence_transformers_folder), device="cpu").encode([text])[0]
    code, out, err = _run(["embed", str(sentence_transformers_folder), text], capsys)
    assert code == 0, err
    np.testing.assert_allclose(json.loads(out), expected, atol=1e-5)


def test_a_transformers_embedding_model_by_hub_id_embeds_as_its_folder(
    tmp_path: Path, tokenizer: BertTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers' BERT given by Hub id is converted with the sentence-transformers files of its Hub snapshot: it
    pools, normalises and cuts its text (CLS, Normalize, 16 tokens) as the same model given by folder does."""
    from hf_bertscratch.embedding import write_sentence_transformers_files

    folder = _bert_folder(tmp_path / "bert-embedder", BertModel, tokenizer)
    write_sentence_transformers_files(folder, "cls", 16, 32)
    modules = json.loads((folder / "modules.json").read_text())
    normalize = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    (folder / "modules.json").write_text(json.dumps([*modules, normalize]))
    in_offline_hub_cache(monkeypatch, folder, tmp_path / "hub", "someone/bert-embedder")
    text = " ".join(["the cat sat on the mat ."] * 10)  # beyond the 16 tokens it was trained on
    by_folder = inference.embed(folder, text)
    assert np.linalg.norm(by_folder) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(inference.embed("someone/bert-embedder", text), by_folder, atol=1e-6)
    extractor = inference.load_pipeline("feature-extraction", "someone/bert-embedder")
    assert inference.embedding_truncation(extractor)["max_length"] == 16


# ------------------------------------------------------------------------------------------- fine-tuning
def test_finetune_a_transformers_masked_lm_on_single_texts(
    tmp_path: Path,
    bert_mlm: Path,
    capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(convert, "_CONVERTED", {})  # as in a fresh process: the conversion is made (and logged) here
    train = _write_jsonl(tmp_path / "train.jsonl", _sentiment(48, 0))
    dev = _write_jsonl(tmp_path / "dev.jsonl", _sentiment(10, 1))
    output = tmp_path / "run"
    with caplog.at_level("INFO"):
        code, _, err = _run(_finetune(bert_mlm, output, train, dev), capsys)
    assert code == 0, err
    assert any("is transformers' BertForMaskedLM" in r.getMessage() for r in caplog.records)

    config = json.loads((output / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("bertscratch", ["BertScratchForSequenceClassification"])
    results = json.loads((output / "all_results.json").read_text())
    assert results["model_name_or_path"] == str(bert_mlm)  # the source, not the conversion's temporary folder
    card = (output / "README.md").read_text()
    assert f"| Starting point | a local checkpoint (`{bert_mlm.name}`) |" in card  # the card names it too, by name
    # The encoder it started from is the source's: the fine-tuned model's word embeddings moved from those.
    started = BertForMaskedLM.from_pretrained(bert_mlm).bert.embeddings.word_embeddings.weight
    tuned = AutoModelForSequenceClassification.from_pretrained(output).bert.embeddings.word_embeddings.weight
    assert 0 < (tuned - started).abs().max() < 0.1

    code, out, err = _run(["classify", str(output), "the movie was great"], capsys)
    assert code == 0, err
    assert sorted(line.split()[0] for line in out.splitlines()) == ["0", "1"]  # the labels the run trained


def test_finetune_a_transformers_bert_model_on_sentence_pairs(
    tmp_path: Path, bert_model: Path, capsys: pytest.CaptureFixture
) -> None:
    train = _write_jsonl(tmp_path / "train.jsonl", _pairs(32, 0))
    dev = _write_jsonl(tmp_path / "dev.jsonl", _pairs(8, 1))
    output = tmp_path / "run"
    code, _, err = _run(_finetune(bert_model, output, train, dev, "--text_pair_column", "text_pair"), capsys)
    assert code == 0, err
    results = json.loads((output / "all_results.json").read_text())
    assert (results["classifier_pooling"], results["head_init"]) == ("segments", "probe")  # a small model's pairs
    pair = ["the capital is rome .", "--text_pair", "rome is the capital ."]
    code, out, err = _run(["classify", str(output), *pair], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == 2  # both classes, each with its score


def test_finetune_a_sentence_transformers_folder_on_tokens(
    tmp_path: Path, sentence_transformers_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    train = _write_jsonl(tmp_path / "train.jsonl", _entities(32, 0))
    dev = _write_jsonl(tmp_path / "dev.jsonl", _entities(8, 1))
    output = tmp_path / "run"
    flags = ("--task_type", "token-classification", "--learning_rate", "1e-2")
    code, _, err = _run(_finetune(sentence_transformers_folder, output, train, dev, *flags), capsys)
    assert code == 0, err
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["BertScratchForTokenClassification"]
    assert config["id2label"] == {"0": "O", "1": "B-LOC"}
    assert not (output / "modules.json").exists()  # a tagger, no embedding folder any more
    code, out, err = _run(["tag", str(output), "the cat sat in rome", "--json"], capsys)
    assert code == 0, err
    assert isinstance(json.loads(out), list)


def test_a_classifier_reading_cls_converts_back_to_transformers_bert(
    tmp_path: Path, bert_mlm: Path, tokenizer: BertTokenizer, capsys: pytest.CaptureFixture
) -> None:
    """The fine-tuned folder, written back as transformers' BERT by `bertscratch convert`, gives the same logits; a
    head that reads more than [CLS] is refused in one line."""
    train = _write_jsonl(tmp_path / "train.jsonl", _sentiment(16, 0))
    dev = _write_jsonl(tmp_path / "dev.jsonl", _sentiment(8, 1))
    for pooling in ("cls", "mean-max"):
        flags = ("--classifier_pooling", pooling, "--num_train_epochs", "1")
        code, _, err = _run(_finetune(bert_mlm, tmp_path / pooling, train, dev, *flags), capsys)
        assert code == 0, err
    code, _, err = _run(["convert", str(tmp_path / "cls"), str(tmp_path / "cls-bert")], capsys)
    assert code == 0, err
    ours = AutoModelForSequenceClassification.from_pretrained(tmp_path / "cls").eval()
    theirs = BertForSequenceClassification.from_pretrained(tmp_path / "cls-bert").eval()
    batch = _inputs(tokenizer)
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).logits, theirs(**batch).logits, atol=1e-5, rtol=1e-4)

    code, _, err = _run(["convert", str(tmp_path / "mean-max"), str(tmp_path / "mean-max-bert")], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "classifier_pooling='mean-max'" in err and "--classifier_pooling cls" in err


# ------------------------------------------------------------------------------------------- refusals
def _distilbert(path: Path) -> Path:
    DistilBertConfig(vocab_size=30, dim=32, n_layers=1, n_heads=2, hidden_dim=37).save_pretrained(path)
    return path


def _electra_generator(path: Path) -> Path:
    ElectraConfig(**tiny_config_kwargs(30), architectures=["ElectraForMaskedLM"]).save_pretrained(path)
    return path


def _narrow_electra(path: Path) -> Path:
    kwargs = {**tiny_config_kwargs(30), "embedding_size": 16}
    ElectraConfig(**kwargs, architectures=["ElectraForPreTraining"]).save_pretrained(path)
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_distilbert, "model_type 'distilbert'"),
        (_electra_generator, "'ElectraForMaskedLM' (an ELECTRA generator"),
        (_narrow_electra, "16-wide embeddings to hidden_size=32"),
    ],
    ids=["another-architecture", "electra-generator", "narrower-embeddings"],
)
@pytest.mark.parametrize("command", ["finetune", "classify", "export"])
def test_a_checkpoint_outside_the_family_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, make, message: str, command: str
) -> None:
    model = str(make(tmp_path / "model"))
    train = tmp_path / "train.csv"  # local data: the model is the one thing wrong, offline or not
    train.write_text("text,label\na fine film,1\na dull one,0\n")
    argv = {
        "finetune": [
            "finetune",
            "--model_name_or_path",
            model,
            "--train_file",
            str(train),
            "--validation_file",
            str(train),
            "--output_dir",
            str(tmp_path / "o"),
        ],  # fmt: skip
        "classify": ["classify", model, "a text"],
        "export": ["export", model, str(tmp_path / "o")],
    }[command]
    code, _, err = _run(argv, capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert message in err and "TypeError" not in err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------- defaults
def test_a_wide_model_gets_berts_recipe() -> None:
    """Wider than 256: the pooled [CLS], a random head, at most 3 epochs, BERT's rates; an embedding keeps its own."""
    for name in ("sst2", "imdb", "cola", "mrpc", "stsb"):
        task = check_data_arguments(DataArguments(task=name))
        small, large = finetune_defaults(task, name, 128), finetune_defaults(task, name, 384)
        assert (large.classifier_pooling, large.head_init, large.epochs) == ("cls", "random", min(small.epochs, 3))
        assert large.learning_rate_for(384) == small.learning_rate_large and 2e-5 <= small.learning_rate_large <= 5e-5
    assert finetune_defaults(TASKS["squad"], "squad", 768).epochs == 2
    embedding = check_data_arguments(DataArguments(task="stsb", task_type="embedding"))
    assert finetune_defaults(embedding, None, 768) == finetune_defaults(embedding, None, 128)
    assert finetune_defaults(TASKS["sst2"], "sst2", 256).classifier_pooling == "mean-max"  # 256 is still small


def test_a_checkpoint_without_a_tokenizer_is_told_where_to_save_one(
    tmp_path: Path, tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """Converted on load, a folder saved without its tokenizer goes into a temporary folder removed at exit: the
    warning says to save a tokenizer into the user's folder (or pass one), while `convert` names its output folder."""
    source = tmp_path / "weights-only"
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(**tiny_config_kwargs(len(tokenizer)))).save_pretrained(source)
    with caplog.at_level("WARNING", logger="hf_bertscratch.convert"):
        convert.family_checkpoint(source)
        convert.convert_checkpoint(source, tmp_path / "converted")
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("No tokenizer carried over")]
    assert len(warnings) == 2, warnings
    assert warnings[0].endswith(
        f"; save one into {source}, or pass the command's tokenizer (--tokenizer; finetune: --tokenizer_name)."
    )
    assert warnings[1].endswith(f"; save one into {tmp_path / 'converted'} (tokenizer.save_pretrained).")


def test_a_converted_checkpoint_without_a_tokenizer_is_named_as_given(
    tmp_path: Path, tokenizer: BertTokenizer, capsys: pytest.CaptureFixture
) -> None:
    """The inference commands and export load a converted checkpoint's tokenizer from the folder the user gave: a
    folder saved without one is named, not the temporary folder it was converted into (gone when the command exits)."""
    source = tmp_path / "weights-only"
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(**tiny_config_kwargs(len(tokenizer)))).save_pretrained(source)
    answering = tmp_path / "qa-weights-only"
    BertForQuestionAnswering(BertConfig(**tiny_config_kwargs(len(tokenizer)))).save_pretrained(answering)
    for argv in (
        ["classify", str(source), "a wonderful film"],
        ["export", str(source), str(tmp_path / "exported")],
        ["answer", str(answering), "--question", "who?", "--context", "a wonderful film"],
    ):
        code, _, err = _run(argv, capsys)
        folder = argv[1]
        assert code == 1 and f"Tokenizer folder {folder!r} holds neither" in err, (argv, err)
        assert "bertscratch-converted-" not in err, err
        # the command's own flag that supplies one, and where to save one instead
        assert f"save its tokenizer into {folder} (tokenizer.save_pretrained), or pass --tokenizer" in err, err
    tokenizer_folder = tmp_path / "no-tokenizer-either"
    tokenizer_folder.mkdir()
    code, _, err = _run(["classify", str(source), "a film", "--tokenizer", str(tokenizer_folder)], capsys)
    assert code == 1 and f"Tokenizer folder {str(tokenizer_folder)!r} holds neither" in err, err
    assert "pass --tokenizer" not in err, err  # the flag was given: its folder is what lacks a tokenizer
    tokenizer.save_pretrained(source)  # with its tokenizer, the same folder classifies
    code, out, err = _run(["classify", str(source), "a wonderful film"], capsys)
    assert code == 0 and "LABEL_" in out, err


def test_the_front_doors_model_types_are_those_the_commands_load() -> None:
    """The front door refuses a model folder by its model_type (`model_config.MODEL_TYPES`) before torch loads: those
    are BertScratch's own and the ones converted on load, no more and no fewer."""
    from hf_bertscratch_base.model_config import MODEL_TYPES

    assert set(MODEL_TYPES) == {hf_bertscratch.BertScratchConfig.model_type, *convert.CONVERTIBLE_MODEL_TYPES}
