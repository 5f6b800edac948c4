"""Tests for hf_bertscratch.electra and `--objective electra`: the discriminator against transformers' ELECTRA, the
shared embeddings, the replaced-token labels, the run end to end, resume, and bad input."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    BertTokenizer,
    ElectraConfig,
    ElectraForPreTraining,
    pipeline,
)

from hf_bertscratch import (
    BertScratchConfig,
    BertScratchForMaskedLM,
    BertScratchForReplacedTokenDetection,
    convert,
    pretraining,
    run_folder,
)
from hf_bertscratch.electra import ElectraPretrainingModel, generator_config, replace_masked_tokens
from hf_bertscratch.run_folder import FINISHED_FILES
from hf_bertscratch_cli.dispatch import main as cli_main

from conftest import cut_back_to_checkpoint, pretrain_args, tiny_config_kwargs


def _args(text_file: Path, tokenizer_dir: Path, config_dir: Path, output_dir: Path, *extra: str) -> list[str]:
    return ["--objective", "electra", *pretrain_args(text_file, tokenizer_dir, config_dir, output_dir, *extra)]


def _batch(tokenizer: BertTokenizer) -> dict[str, torch.Tensor]:
    """Two sentence pairs of different lengths: padding and token_type_ids both exercised."""
    return tokenizer(
        ["paris is the capital of", "the cat sat on the mat with the dog ."],
        ["france .", "it ran fast ."],
        padding=True,
        return_tensors="pt",
    )


def _electra_config(vocab_size: int) -> ElectraConfig:
    kwargs = tiny_config_kwargs(vocab_size)
    return ElectraConfig(**kwargs, embedding_size=kwargs["hidden_size"], hidden_act="gelu_new")


# ------------------------------------------------------------------------------------- the discriminator


@pytest.mark.parametrize("direction", ["from_electra", "to_electra"])
def test_discriminator_matches_electra_for_pretraining(tokenizer: BertTokenizer, direction: str) -> None:
    """Copied weights give transformers' ElectraForPreTraining logits and loss, in both directions of the converter
    (the ELECTRA side starts random, or the BertScratch side does)."""
    if direction == "from_electra":
        electra = ElectraForPreTraining(_electra_config(len(tokenizer)))
        ours = convert.electra_to_bertscratch(electra)
    else:
        ours = BertScratchForReplacedTokenDetection(BertScratchConfig(**tiny_config_kwargs(len(tokenizer))))
        electra = convert.bertscratch_to_electra(ours)
    assert type(ours) is BertScratchForReplacedTokenDetection and type(electra) is ElectraForPreTraining
    electra.config._attn_implementation = "eager"
    batch = _batch(tokenizer)
    real = batch["attention_mask"].bool()
    labels = torch.randint(0, 2, real.shape)
    with torch.no_grad():
        theirs_out, ours_out = electra.eval()(**batch, labels=labels), ours.eval()(**batch, labels=labels)
    torch.testing.assert_close(ours_out.logits[real], theirs_out.logits[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours_out.loss, theirs_out.loss, atol=1e-5, rtol=1e-5)
    # The state dicts convert back bit for bit.
    state = electra.state_dict()
    restored = convert.bertscratch_state_dict_to_electra(convert.electra_state_dict_to_bertscratch(state))
    assert restored.keys() == state.keys() and all(torch.equal(restored[k], state[k]) for k in state)


def test_converter_command_reads_electra_discriminators(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    """`convert_checkpoint.py` takes an ElectraForPreTraining folder to BertScratch and a discriminator folder back
    (the direction by model_type, the class by architectures); other ELECTRA heads, and embeddings narrower than the
    hidden states (`embeddings_project`), are refused by name."""
    ElectraForPreTraining(_electra_config(len(tokenizer))).save_pretrained(tmp_path / "electra")
    convert.main([str(tmp_path / "electra"), str(tmp_path / "scratch")])
    assert json.loads((tmp_path / "scratch" / "config.json").read_text())["architectures"] == [
        "BertScratchForReplacedTokenDetection"
    ]
    convert.main([str(tmp_path / "scratch"), str(tmp_path / "back")])
    original, back = (
        load_file(tmp_path / "electra" / "model.safetensors"),
        load_file(tmp_path / "back" / "model.safetensors"),
    )
    assert original.keys() == back.keys() and all(torch.equal(back[k], original[k]) for k in original)

    ElectraConfig(**tiny_config_kwargs(30), architectures=["ElectraForMaskedLM"]).save_pretrained(tmp_path / "gen")
    generator = (
        "has architecture 'ElectraForMaskedLM' (an ELECTRA generator: only the discriminator (ElectraForPreTraining) "
        "converts); supported: ['ElectraForPreTraining']."
    )
    with pytest.raises(ValueError, match=re.escape(generator)):
        convert.convert_checkpoint(tmp_path / "gen", tmp_path / "out")
    narrow = ElectraConfig(**{**tiny_config_kwargs(30), "hidden_size": 64}, embedding_size=32)
    with pytest.raises(ValueError, match="32-wide embeddings to hidden_size=64"):
        convert.electra_config_to_bertscratch(narrow)


def test_discriminator_folder_keeps_the_family_auto_map(tmp_path: Path, tiny_config: BertScratchConfig) -> None:
    """No Auto class loads the discriminator head, so saving it must not put it in auto_map under AutoModel (as
    transformers would): the folder still loads the bare encoder through AutoModel."""
    BertScratchForReplacedTokenDetection(tiny_config).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["BertScratchForReplacedTokenDetection"]
    assert config["auto_map"]["AutoModel"] == "modeling_bertscratch.BertScratchModel"
    assert (tmp_path / "modeling_bertscratch.py").is_file()
    assert type(AutoModel.from_pretrained(tmp_path)).__name__ == "BertScratchModel"


# ----------------------------------------------------------------------------- generator and labels


def test_generator_reads_the_discriminators_embeddings(tiny_config: BertScratchConfig) -> None:
    """One word table (a Parameter of the discriminator) serves both models: both losses reach it, only the
    generator's reaches the projection (no gradient through sampling), and the exported generator is an ordinary
    BertScratchForMaskedLM giving the pair's generator outputs."""
    model = ElectraPretrainingModel(BertScratchForReplacedTokenDetection(tiny_config)).train()
    word_table = model.discriminator.bert.embeddings.word_embeddings.weight
    tables = [name for name, p in model.named_parameters() if p.dim() == 2 and p.shape[0] == tiny_config.vocab_size]
    assert tables == ["discriminator.bert.embeddings.word_embeddings.weight"]
    assert (model.generator.config.hidden_size, model.generator.config.num_attention_heads) == (8, 1)  # 32 / 4

    torch.manual_seed(0)
    input_ids = torch.randint(5, tiny_config.vocab_size, (4, 12))
    labels = torch.where(torch.rand(input_ids.shape) < 0.3, input_ids, -100)
    labels[:, 1] = input_ids[:, 1]  # every row has a masked token
    out = model(input_ids.masked_fill(labels != -100, 4), labels=labels)
    project = model.embeddings_project.weight
    from_generator = torch.autograd.grad(out.generator_loss, [word_table, project], retain_graph=True)
    from_discriminator = torch.autograd.grad(out.discriminator_loss, [word_table, project], allow_unused=True)
    assert from_generator[0].abs().sum() > 0 and from_generator[1].abs().sum() > 0
    assert from_discriminator[0].abs().sum() > 0 and from_discriminator[1] is None
    torch.testing.assert_close(out.loss, out.generator_loss + 50.0 * out.discriminator_loss)

    exported = model.export_generator()
    assert type(exported) is BertScratchForMaskedLM
    assert exported.cls.decoder.weight is exported.bert.embeddings.word_embeddings.weight  # still tied
    model.eval()
    with torch.no_grad():
        pair = torch.func.functional_call(model.generator, model.generator_tables(), (input_ids,))
        torch.testing.assert_close(exported(input_ids).logits, pair.logits, atol=0, rtol=0)


def test_masked_lm_start_trains_the_discriminators_encoder_as_a_masked_lm(tokenizer: BertTokenizer) -> None:
    """In the masked-LM phase the loss is the generator's plus that of an ordinary BertScratchForMaskedLM made of the
    discriminator's encoder, its word table as decoder and the start head's own transform: the encoder learns, the
    replaced-token head waits at gradient 0. Afterwards the loss is the pair's usual one, the start head at 0."""
    config = BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(0)
    model = ElectraPretrainingModel(BertScratchForReplacedTokenDetection(config), mlm_start=True).train()
    own = {name for name, _ in model.start_mlm.named_parameters()}
    assert own == {"cls.dense.weight", "cls.dense.bias", "cls.layer_norm.weight", "cls.layer_norm.bias",
                   "cls.decoder.bias"}  # fmt: skip
    input_ids = torch.randint(5, config.vocab_size, (4, 12))
    labels = torch.where(torch.rand(input_ids.shape) < 0.3, input_ids, -100)
    labels[:, 1] = input_ids[:, 1]
    masked = input_ids.masked_fill(labels != -100, 4)

    model.masked_lm_phase = True
    out = model(masked, labels=labels)
    reference = BertScratchForMaskedLM(config).train()
    reference.bert.load_state_dict(model.discriminator.bert.state_dict())
    with torch.no_grad():
        for name in ("dense", "layer_norm"):
            getattr(reference.cls, name).load_state_dict(getattr(model.start_mlm.cls, name).state_dict())
        reference.cls.decoder.bias.copy_(model.start_mlm.cls.decoder.bias)
    assert reference.cls.decoder.weight is reference.bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(out.loss, out.generator_loss + reference(masked, labels=labels).loss)
    assert out.discriminator_loss is None
    out.loss.backward()
    gradients = {name: p.grad for name, p in model.named_parameters()}
    assert all(gradient is not None for gradient in gradients.values())  # DDP needs no unused-parameter search
    assert gradients["discriminator.bert.encoder.layers.1.attention.qkv.weight"].abs().sum() > 0
    assert gradients["start_mlm.cls.dense.weight"].abs().sum() > 0
    assert all(gradients[n].abs().sum() == 0 for n in gradients if n.startswith("discriminator.discriminator."))

    model.zero_grad()
    model.masked_lm_phase = False
    torch.manual_seed(1)
    out = model(masked, labels=labels)
    torch.testing.assert_close(out.loss, out.generator_loss + 50.0 * out.discriminator_loss)
    out.loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() == 0 for p in model.start_mlm.parameters())
    assert model.discriminator.discriminator.prediction.weight.grad.abs().sum() > 0
    # one copy of every tensor: the Trainer's safetensors checkpoint of the pair can be written
    pointers = [t.data_ptr() for t in model.state_dict().values()]
    assert len(pointers) == len(set(pointers))
    with pytest.raises(ValueError, match="masked_lm_phase needs a pair built with mlm_start=True"):
        plain = ElectraPretrainingModel(BertScratchForReplacedTokenDetection(config))
        plain.masked_lm_phase = True
        plain(masked, labels=labels)


def test_replaced_labels_on_a_hand_made_batch() -> None:
    """Sampled tokens go to the masked positions in row-major order; a sample equal to the original is labelled
    original (0), every other real token too; padding is -100."""
    pad, mask = 0, 4
    input_ids = torch.tensor([[2, mask, 11, mask, 3], [2, 12, mask, 3, pad]])
    labels = torch.tensor([[-100, 10, -100, 13, -100], [-100, -100, 14, -100, -100]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    sampled = torch.tensor([10, 20, 30])  # 10 is the original at (0, 1); 20 and 30 replace 13 and 14
    corrupted, replaced = replace_masked_tokens(input_ids, labels, sampled, attention_mask)
    assert corrupted.tolist() == [[2, 10, 11, 20, 3], [2, 12, 30, 3, pad]]
    assert replaced.tolist() == [[0, 0, 0, 1, 0], [0, 0, 1, 0, -100]]
    # A collator's random replacement at a masked position is undone: the original is what the generator fills in.
    _, replaced = replace_masked_tokens(
        torch.tensor([[2, 17, 3]]), torch.tensor([[-100, 15, -100]]), torch.tensor([15]), None
    )
    assert replaced.tolist() == [[0, 0, 0]]


def test_generator_width_keeps_the_head_size() -> None:
    base = BertScratchConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=12)
    shapes = {
        fraction: (c.hidden_size, c.num_attention_heads, c.intermediate_size, c.num_hidden_layers)
        for fraction in (0.25, 1 / 3, 0.3, 1.0)
        for c in [generator_config(base, fraction)]
    }
    assert shapes == {
        0.25: (192, 3, 768, 12),
        1 / 3: (256, 4, 1024, 12),
        0.3: (192, 3, 768, 12),  # 230 rounded down to whole 64-wide heads
        1.0: (768, 12, 3072, 12),
    }
    narrow = generator_config(BertScratchConfig(hidden_size=128, num_attention_heads=2, intermediate_size=512), 0.25)
    assert (narrow.hidden_size, narrow.num_attention_heads) == (32, 1)  # narrower than a head: one head


# ------------------------------------------------------------------------------------------ the run


@pytest.fixture(scope="module")
def electra_run(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Path]]:
    """One `bertscratch pretrain --objective electra` run of 8 steps, checkpoints every step (shared by the end-to-end
    and the resume test: one run fewer); returns its folder and the folders its fill-mask examples ran on."""
    out = tmp_path_factory.mktemp("electra") / "run"
    shown: list[Path] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretraining, "show_fill_mask", lambda folder: shown.append(Path(folder)))
        patch.setattr(run_folder, "prune_checkpoints", lambda *args: "")  # the resume test cuts back to the first
        cli_main(["pretrain", *_args(text_file, tokenizer_dir, config_dir, out, *_STEPS)])
    return out, shown


# 8 steps, a checkpoint after each: the first 2 in the masked-LM start, then replaced-token detection.
_STEPS = ("--max_steps", "8", "--save_strategy", "steps", "--save_steps", "1")


def test_pretrain_electra_end_to_end(electra_run: tuple[Path, list[Path]]) -> None:
    """The folder is the discriminator, fine-tunable through the Auto heads; generator/ is a fill-mask folder, on
    which the run shows its examples; the evaluation reports both models."""
    out, shown = electra_run
    assert shown == [out / "generator"]
    results = json.loads((out / "all_results.json").read_text())
    for name in ("eval_accuracy", "eval_perplexity", "eval_discriminator_accuracy", "eval_discriminator_loss"):
        assert name in results, name
    assert 0.0 <= results["eval_discriminator_accuracy"] <= 1.0 and 0.0 < results["eval_replaced_fraction"] < 1.0
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertScratchForReplacedTokenDetection"]
    card = (out / "README.md").read_text()
    assert "replaced-token detection" in card and "pipeline_tag: feature-extraction" in card and "fill_mask" not in card
    assert not any(p.name.startswith(".") for p in out.iterdir())
    assert {p.stat().st_mode & 0o777 for p in (out / "generator").iterdir()} == {0o666 & ~_umask()}

    saved = load_file(out / "model.safetensors")
    classifier = AutoModelForSequenceClassification.from_pretrained(out, num_labels=3)
    assert type(classifier).__name__ == "BertScratchForSequenceClassification"
    torch.testing.assert_close(
        classifier.bert.embeddings.word_embeddings.weight, saved["bert.embeddings.word_embeddings.weight"]
    )
    discriminator = BertScratchForReplacedTokenDetection.from_pretrained(out)
    torch.testing.assert_close(discriminator.discriminator.prediction.weight, saved["discriminator.prediction.weight"])

    generator = AutoModelForMaskedLM.from_pretrained(out / "generator")
    assert type(generator).__name__ == "BertScratchForMaskedLM" and generator.config.hidden_size == 8
    assert len(pretraining.show_fill_mask(out / "generator")) == 3
    fill = pipeline("fill-mask", model=str(out / "generator"))
    assert len(fill("paris is the [MASK] of france .", top_k=2)) == 2


def test_resume_matches_uninterrupted_run(
    electra_run: tuple[Path, list[Path]], text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """A run resumed from its checkpoint (the pair's state dict, optimizer and RNG state) ends with the weights of the
    uninterrupted run: the discriminator, and the generator, whose samples come from the restored RNG. It resumes
    inside the masked-LM start (after step 1 of its 2), so the start head is restored and the switch comes at the
    same step. A checkpoint whose start head the run would not build is refused."""
    finished, _ = electra_run
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    # As if killed after checkpoint-1. The finished run's generator/ stays, as after --overwrite_output_dir: the
    # resumed run replaces it (a folder cannot be renamed over a non-empty one).
    cut_back_to_checkpoint(run, "checkpoint-1")
    assert not any((run / name).exists() for name in FINISHED_FILES) and (run / "generator").is_dir()
    resume = [*_args(text_file, tokenizer_dir, config_dir, run, *_STEPS), "--resume_from_checkpoint", "true"]
    with pytest.raises(ValueError, match="saved by a run with a masked-LM start .* mlm_start_fraction=0: resume"):
        pretraining.main([*resume, "--mlm_start_fraction", "0"])
    pretraining.main(resume)
    assert json.loads((run / "trainer_state.json").read_text())["global_step"] == 8
    for name in ("model.safetensors", "generator/model.safetensors"):
        full, resumed = load_file(finished / name), load_file(run / name)
        assert resumed.keys() == full.keys(), name
        for key in full:
            torch.testing.assert_close(resumed[key], full[key], rtol=0, atol=1e-6, msg=f"{name}: {key}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    ("flag", "value", "match"),
    [
        ("--objective", "foo", "objective must be one of \\('mlm', 'mlm_nsp', 'electra'\\), got 'foo'"),
        ("--generator_width_fraction", "0", "generator_width_fraction must be in \\(0, 1\\], got 0.0"),
        ("--generator_width_fraction", "1.5", "generator_width_fraction must be in \\(0, 1\\], got 1.5"),
        ("--discriminator_weight", "-1", "discriminator_weight must be positive, got -1.0"),
        ("--mlm_start_fraction", "1", "mlm_start_fraction must be in \\[0, 1\\), got 1.0"),
        ("--prediction_fraction", "0.5", "prediction_fraction below 1 .* got 0.5 with objective 'electra'"),
    ],
)
def test_bad_electra_arguments_fail_before_training(
    flag: str, value: str, match: str, text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=match):
        pretraining.main(_args(text_file, tokenizer_dir, config_dir, tmp_path / "out", flag, value))
    assert not (tmp_path / "out").exists()


def test_the_masked_lm_start_takes_the_first_quarter_of_a_new_discriminators_run(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Trainer runs a new pair in its masked-LM phase for the first quarter of the steps by default, for none
    with --mlm_start_fraction 0 or when --model_name_or_path continues a model; evaluation is replaced-token
    detection. Masked-LM's objectives refuse the flag."""
    phases: list[tuple[bool, bool]] = []
    real = ElectraPretrainingModel.forward

    @functools.wraps(real)  # the Trainer keeps the dataset columns the forward's signature names
    def recording(self, *args, **kwargs):
        phases.append((self.training, self.masked_lm_phase))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ElectraPretrainingModel, "forward", recording)
    monkeypatch.setattr(pretraining, "show_fill_mask", lambda folder: [])
    steps = ("--max_steps", "8")
    new = tmp_path / "new"
    pretraining.main(_args(text_file, tokenizer_dir, config_dir, new, *steps))
    assert [phase for training, phase in phases if training] == [True] * 2 + [False] * 6
    assert not any(phase for training, phase in phases if not training)
    assert "| `mlm_start_fraction` | 0.25 |" in (new / "README.md").read_text()  # the card's hyperparameters

    for extra in (("--mlm_start_fraction", "0"), ("--model_name_or_path", str(new))):
        phases.clear()
        arguments = _args(text_file, tokenizer_dir, config_dir, tmp_path / extra[0].strip("-"), *steps, *extra)
        if extra[0] == "--model_name_or_path":
            arguments = [a for a in arguments if a not in ("--config_name", str(config_dir))]
        pretraining.main(arguments)
        assert [phase for training, phase in phases if training] == [False] * 8, extra
    with pytest.raises(ValueError, match="mlm_start_fraction is for objective 'electra'.*got objective 'mlm'"):
        pretraining.main([*_args(text_file, tokenizer_dir, config_dir, tmp_path / "mlm", *steps), "--objective",
                          "mlm", "--mlm_start_fraction", "0.5"])  # fmt: skip
