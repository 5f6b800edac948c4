"""hf_bertscratch.convert: transformers BERT <-> BertScratch checkpoints, as functions and as the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    AutoModel,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    DistilBertConfig,
)

import hf_bertscratch
from hf_bertscratch import convert

from conftest import tiny_config_kwargs

# The `bertscratch` console command, as its entry point runs it.
LAUNCHER = "import sys; from hf_bertscratch_cli import main; main(sys.argv[1:])"
SENTENCES = (["paris is the capital of", "france ."], ["the cat sat on the mat with the dog .", "it ran fast ."])


def _bert_folder(path: Path, model_class: type, tokenizer: BertTokenizer, **config_kwargs: object) -> Path:
    """A tiny randomly initialised transformers BERT of `model_class`, saved with its tokenizer."""
    config = BertConfig(**tiny_config_kwargs(len(tokenizer)), **config_kwargs)
    model_class(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _batch(tokenizer: BertTokenizer) -> dict[str, torch.Tensor]:
    """Two sentence pairs of different lengths: padding and token_type_ids both exercised."""
    return tokenizer([a for a, _ in SENTENCES], [b for _, b in SENTENCES], padding=True, return_tensors="pt")


def _outputs(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model.eval()(**batch)
    mask = batch["attention_mask"].bool()
    tensors = []
    for value in out.values():
        if value.dim() == 3 and value.shape[:2] == mask.shape:
            value = value[mask]  # compare per-token outputs at real tokens (BertScratch zeroes pad positions)
        tensors.append(value)
    return tensors


@pytest.mark.parametrize(
    ("bert_class", "scratch_name", "config_kwargs"),
    [
        (BertModel, "BertScratchModel", {}),
        (BertForMaskedLM, "BertScratchForMaskedLM", {}),
        (BertForPreTraining, "BertScratchForPreTraining", {}),
        (
            BertForSequenceClassification,
            "BertScratchForSequenceClassification",
            {"id2label": {0: "neg", 1: "neu", 2: "pos"}, "label2id": {"neg": 0, "neu": 1, "pos": 2}},
        ),
    ],
)
def test_cli_converts_bert_and_back(
    tmp_path: Path, tokenizer: BertTokenizer, bert_class: type, scratch_name: str, config_kwargs: dict
) -> None:
    source = _bert_folder(tmp_path / "bert", bert_class, tokenizer, **config_kwargs)
    convert.main([str(source), str(tmp_path / "scratch")])

    scratch = getattr(hf_bertscratch, scratch_name).from_pretrained(tmp_path / "scratch")
    assert scratch.config.model_type == "bertscratch"
    assert scratch.config.architectures == [scratch_name]
    assert scratch.config.id2label == bert_class.from_pretrained(source).config.id2label
    assert (tmp_path / "scratch" / "model.safetensors").is_file()
    # The tokenizer is carried over and loads through AutoTokenizer.
    assert AutoTokenizer.from_pretrained(tmp_path / "scratch").get_vocab() == tokenizer.get_vocab()

    batch = _batch(tokenizer)
    reference = bert_class.from_pretrained(source, attn_implementation="eager")
    for ours, theirs in zip(_outputs(scratch, batch), _outputs(reference, batch), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)

    # And back: BertScratch -> transformers' BERT gives the original tensors, bit for bit.
    convert.main([str(tmp_path / "scratch"), str(tmp_path / "back")])
    back = bert_class.from_pretrained(tmp_path / "back")
    assert back.config.model_type == "bert"
    original = reference.state_dict()
    restored = back.state_dict()
    assert restored.keys() == original.keys()
    for name, tensor in original.items():
        assert torch.equal(restored[name], tensor), name


def test_an_embedding_folder_converts_to_an_embedding_folder(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    """BertScratch's embedding folder converted to transformers' BERT keeps its sentence-transformers files, so
    SentenceTransformer on the converted folder pools as trained (CLS here, not its mean default) and gives the same
    vectors; and back."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from hf_bertscratch.embedding import write_sentence_transformers_files

    source = tmp_path / "embedding"
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchModel(config).save_pretrained(source)
    tokenizer.save_pretrained(source)
    write_sentence_transformers_files(source, "cls", 32, config.hidden_size)

    bert, back = tmp_path / "bert", tmp_path / "back"
    convert.convert_checkpoint(source, bert)
    convert.convert_checkpoint(bert, back)
    texts = [" ".join(pair) for pair in SENTENCES]
    vectors = {}
    for folder in (source, bert, back):
        for file in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
            assert (folder / file).is_file(), (folder.name, file)
        encoder = sentence_transformers.SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
        vectors[folder.name] = encoder.encode(texts, convert_to_numpy=True)
    assert AutoModel.from_pretrained(tmp_path / "bert").config.model_type == "bert"
    np.testing.assert_allclose(vectors["bert"], vectors["embedding"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(vectors["back"], vectors["embedding"], rtol=0, atol=1e-5)


def test_state_dict_round_trip_is_exact(tokenizer: BertTokenizer) -> None:
    model = BertForPreTraining(BertConfig(**tiny_config_kwargs(len(tokenizer))))
    state = model.state_dict()
    scratch = convert.bert_state_dict_to_bertscratch(state)
    assert any(name.endswith("attention.qkv.weight") for name in scratch)
    assert not any(".query." in name for name in scratch)
    restored = convert.bertscratch_state_dict_to_bert(scratch)
    assert restored.keys() == state.keys()
    assert all(torch.equal(restored[name], state[name]) for name in state)


def test_an_untied_mlm_head_keeps_the_bias_its_decoder_adds(tokenizer: BertTokenizer) -> None:
    """With tie_word_embeddings=False transformers' BERT ties neither the decoder's weight nor its bias: the logits
    add `cls.predictions.decoder.bias` (what training moves), while `cls.predictions.bias` is read by nothing. The
    converted head adds the same bias, and converted back gives the same logits."""
    config = BertConfig(**tiny_config_kwargs(len(tokenizer)), tie_word_embeddings=False)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():
        model.cls.predictions.decoder.bias.copy_(torch.linspace(-2.0, 2.0, config.vocab_size))
    assert not torch.equal(model.cls.predictions.decoder.bias, model.cls.predictions.bias)
    batch = _batch(tokenizer)
    scratch = convert.bert_to_bertscratch(model)
    for ours, theirs in zip(_outputs(scratch, batch), _outputs(model, batch), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    back = convert.bertscratch_to_bert(scratch)
    for ours, theirs in zip(_outputs(back, batch), _outputs(model, batch), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_bertscratch_only_config_fields_are_dropped_for_bert() -> None:
    """A model pretrained here (sinusoidal position start, unpadding switches) converts to a plain BertConfig."""
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(50), sinusoidal_position_std=0.05)
    bert = convert.bertscratch_config_to_bert(config).to_dict()
    assert bert["model_type"] == "bert"
    for name in ("sinusoidal_position_std", "sparse_prediction", "unpad_inputs"):
        assert name not in bert, name
    assert bert["hidden_size"] == config.hidden_size and bert["vocab_size"] == 50


@pytest.mark.parametrize(
    ("name", "recorded"),
    [
        ("input_columns", {"text": "premise", "text_pair": "hypothesis"}),
        ("multi_label_threshold", 0.35),
        ("multi_label_threshold", {"LABEL_0": 0.2, "LABEL_1": 0.65}),  # one per label, chosen per label
        ("sentence_transformers", {"activation_fn": "torch.nn.modules.linear.Identity"}),  # a regressor's
    ],
)
def test_what_fine_tuning_recorded_survives_saving_and_conversion(name: str, recorded: object, tmp_path: Path) -> None:
    """`input_columns`, a multi-label classifier's `multi_label_threshold` and the activation sentence-transformers'
    CrossEncoder applies to a head's scores are saved in config.json and read back, and go to transformers' BERT and
    back with the model, so that a converted model's --input_file reads the same columns, `classify` gives labels at
    the same threshold and a CrossEncoder of it predicts the same scores. Not recorded, each is None, or {} for
    sentence-transformers' entry (which CrossEncoder looks into whenever a config has it)."""
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(50), **{name: recorded})
    config.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))[name] == recorded
    assert getattr(hf_bertscratch.BertScratchConfig.from_pretrained(tmp_path), name) == recorded
    bert = convert.bertscratch_config_to_bert(config)
    assert bert.to_dict()[name] == recorded
    assert getattr(convert.bert_config_to_bertscratch(bert), name) == recorded
    unrecorded = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(50))
    assert getattr(unrecorded, name) == ({} if name == "sentence_transformers" else None)


def test_other_model_type_is_refused_before_writing(tmp_path: Path) -> None:
    DistilBertConfig(vocab_size=30, dim=32, n_layers=1, n_heads=2, hidden_dim=37).save_pretrained(tmp_path / "distil")
    with pytest.raises(ValueError, match="model_type 'distilbert'.*expected 'bertscratch', or transformers' 'bert'"):
        convert.main([str(tmp_path / "distil"), str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["distil"]  # no staging folder left behind


def test_unsupported_architecture_is_refused(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    config = BertConfig(**tiny_config_kwargs(len(tokenizer)), architectures=["BertLMHeadModel"])
    config.save_pretrained(tmp_path / "decoder")
    with pytest.raises(ValueError, match=r"'BertLMHeadModel' \(a left-to-right decoder.*; supported"):
        convert.convert_checkpoint(tmp_path / "decoder", tmp_path / "out")


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_relative_position_attention_is_refused(tmp_path: Path, tokenizer: BertTokenizer, kind: str) -> None:
    """A BERT trained with relative position attention (transformers 4's position_embedding_type, its
    distance_embedding weights) computes something else than absolute position embeddings: refused in one line
    before any weights load, not converted into a model that reads positions it was not trained on."""
    config = BertConfig(**tiny_config_kwargs(len(tokenizer)), position_embedding_type=kind)
    with pytest.raises(ValueError, match=rf"position_embedding_type='{kind}'.*absolute"):
        convert.bert_config_to_bertscratch(config)
    config.architectures = ["BertForMaskedLM"]
    config.save_pretrained(tmp_path / "relative")
    with pytest.raises(ValueError, match=rf"relative \(BertForMaskedLM\) cannot convert: .*'{kind}'"):
        convert.convert_checkpoint(tmp_path / "relative", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    absolute = BertConfig(**tiny_config_kwargs(len(tokenizer)), position_embedding_type="absolute")
    assert convert.bert_config_to_bertscratch(absolute).hidden_size == absolute.hidden_size


def test_a_config_bertscratch_cannot_build_is_refused_in_one_line(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    """An activation transformers' BERT takes but BertScratch does not compute is refused as a ValueError of one line
    naming the checkpoint and the value, before any weights load (not the config validator's two-line error)."""
    config = BertConfig(
        **tiny_config_kwargs(len(tokenizer)), hidden_act="quick_gelu", architectures=["BertForMaskedLM"]
    )
    config.save_pretrained(tmp_path / "quick")
    with pytest.raises(ValueError, match=r"hidden_act must be one of .*, got 'quick_gelu'\.$") as refused:
        convert.bert_config_to_bertscratch(config)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match=r"quick \(BertForMaskedLM\) cannot convert: .*got 'quick_gelu'") as refused:
        convert.convert_checkpoint(tmp_path / "quick", tmp_path / "out")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_non_empty_output_is_kept_unless_overwrite(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    source = _bert_folder(tmp_path / "bert", BertForMaskedLM, tokenizer)
    output = tmp_path / "out"
    output.mkdir()
    (output / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="already exists and is not empty.*--overwrite_output_dir"):
        convert.main([str(source), str(output)])
    assert (output / "notes.txt").read_text() == "keep me"

    convert.main([str(source), str(output), "--overwrite_output_dir"])
    assert not (output / "notes.txt").exists()
    assert type(AutoModel.from_pretrained(output)).__name__ == "BertScratchModel"


def test_arguments(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match="SOURCE OUTPUT_DIR; OUTPUT_DIR is missing") as missing:
        convert.parse_args([str(tmp_path)])
    assert "convert_checkpoint.py" not in str(missing.value)  # a script that does not exist
    with pytest.raises(SystemExit) as exit_info:
        convert.parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "model_type 'bert'" in capsys.readouterr().out
    json_file = tmp_path / "args.json"
    json_file.write_text('{"source": "a", "output_dir": "b", "overwrite_output_dir": true}')
    args = convert.parse_args([str(json_file)])
    assert (args.source, args.output_dir, args.overwrite_output_dir) == ("a", "b", True)


def test_command_runs(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    source = _bert_folder(tmp_path / "bert", BertForMaskedLM, tokenizer)
    result = subprocess.run(
        [sys.executable, "-c", LAUNCHER, "convert", str(source), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Saved BertScratchForMaskedLM (bertscratch)" in result.stdout
    assert (tmp_path / "out" / "config.json").is_file()


def test_a_folder_without_a_tokenizer_converts_without_one(
    tmp_path: Path, tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """transformers builds a tokenizer of its 5 special tokens from a weights-only BERT folder; carried over, it
    would read every text as [UNK]. The converted folder has no tokenizer instead, and the log says why. Fine-tuning
    from such a folder is refused in one line naming --tokenizer_name."""
    from hf_bertscratch.tasks.data import load_task_tokenizer

    source = tmp_path / "bert"
    BertForMaskedLM(BertConfig(**tiny_config_kwargs(len(tokenizer)))).save_pretrained(source)
    with caplog.at_level("WARNING"):
        convert.main([str(source), str(tmp_path / "scratch")])
    assert not any((tmp_path / "scratch" / name).exists() for name in ("tokenizer.json", "vocab.txt"))
    assert "knows only its 5 special tokens" in caplog.text
    with pytest.raises(ValueError, match=r"'.*bert' holds no tokenizer: .* 5 special tokens; pass --tokenizer_name"):
        load_task_tokenizer(str(source))
    assert load_task_tokenizer(str(_bert_folder(tmp_path / "with", BertForMaskedLM, tokenizer))).get_vocab() == (
        tokenizer.get_vocab()
    )
