"""Conversion between transformers' BERT (`BertFor*`) and BertScratch (`BertScratchFor*`) checkpoints, and between
transformers' ELECTRA discriminator (`ElectraForPreTraining`) and `BertScratchForReplacedTokenDetection`.

Parameter names differ in two ways only: snake_case module names, and the fused QKV projection (transformers keeps
query, key and value separate). Every other tensor is copied as is, so converted models give the same numbers.
ELECTRA's encoder is BERT's, names included, under `electra.` instead of `bert.`; a discriminator converts when its
`embedding_size` equals its `hidden_size` (BertScratch has no `embeddings_project`).

An embedding folder (`finetune --task_type embedding`, or any sentence-transformers folder) stays one: its
`modules.json`, `sentence_bert_config.json` and module folders such as `1_Pooling/` are carried over.

Command line (the direction follows the source's `model_type`, the head its `architectures`):

    bertscratch convert SOURCE OUTPUT_DIR [--overwrite_output_dir]
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoConfig, BertConfig, ElectraConfig, PreTrainedModel

from hf_bertscratch_base.model_config import check_model_type

from . import modeling_bertscratch
from .arguments import ArgumentParser, parse_args_or_json
from .configuration_bertscratch import BertScratchConfig
from .model_reference import check_model_reference, hub_offline
from .modeling_bertscratch import AUTO_CLASS_TO_MODEL
from .run_folder import staged_folder

logger = logging.getLogger(__name__)

# transformers' BERT class -> BertScratch class, one row per head (the heads are named after BERT's).
ARCHITECTURES: dict[str, str] = {name.replace("BertScratch", "Bert"): name for name in AUTO_CLASS_TO_MODEL.values()}
# transformers' ELECTRA class -> BertScratch class: the discriminator, which `--objective electra` pretrains.
ELECTRA_ARCHITECTURES: dict[str, str] = {"ElectraForPreTraining": "BertScratchForReplacedTokenDetection"}

# (transformers BERT name, BertScratch name) pairs, "{i}" standing for a layer index; QKV fusion is handled apart.
_RENAMES: list[tuple[str, str]] = [
    ("embeddings.LayerNorm.", "embeddings.layer_norm."),
    ("encoder.layer.{i}.attention.output.dense.", "encoder.layers.{i}.attention.dense."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "encoder.layers.{i}.attention.layer_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "encoder.layers.{i}.mlp.fc_in."),
    ("encoder.layer.{i}.output.dense.", "encoder.layers.{i}.mlp.fc_out."),
    ("encoder.layer.{i}.output.LayerNorm.", "encoder.layers.{i}.mlp.layer_norm."),
    ("cls.predictions.transform.dense.", "cls.dense."),
    ("cls.predictions.transform.LayerNorm.", "cls.layer_norm."),
    ("cls.predictions.decoder.weight", "cls.decoder.weight"),
    ("cls.predictions.bias", "cls.decoder.bias"),
    ("cls.seq_relationship.", "nsp."),
]


def _rule(source: str, target: str) -> tuple[re.Pattern[str], str]:
    pattern = "(^|\\.)" + re.escape(source).replace(re.escape("{i}"), r"(\d+)")
    return re.compile(pattern), r"\1" + target.replace("{i}", r"\2")


# (transformers ELECTRA name, BertScratch name) pairs, applied before (to BertScratch) or after (back) BERT's.
_ELECTRA_RENAMES: list[tuple[str, str]] = [
    ("electra.", "bert."),
    ("discriminator_predictions.dense.", "discriminator.dense."),
    ("discriminator_predictions.dense_prediction.", "discriminator.prediction."),
]

_TO_SCRATCH = [_rule(bert, scratch) for bert, scratch in _RENAMES]
_TO_BERT = [_rule(scratch, bert) for bert, scratch in _RENAMES]
_ELECTRA_TO_SCRATCH = [_rule(electra, scratch) for electra, scratch in _ELECTRA_RENAMES]
_SCRATCH_TO_ELECTRA = [_rule(scratch, electra) for electra, scratch in _ELECTRA_RENAMES]
_QKV = re.compile(r"(.*)encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias)")
_FUSED = re.compile(r"(.*)encoder\.layers\.(\d+)\.attention\.qkv\.(weight|bias)")
# Config fields of transformers' BertConfig that an encoder-only model does not use.
_BERT_ONLY_FIELDS = ("is_decoder", "add_cross_attention", "use_cache", "position_embedding_type")
# Config fields of BertScratch that only choose how it computes or starts (transformers' BERT has no such switches).
_SCRATCH_ONLY_FIELDS = (
    "sparse_prediction",
    "unpad_inputs",
    "sinusoidal_position_std",
    "long_text_max_length",
    "long_text_truncation",
    "long_text_head_tokens",
)
# Config fields of transformers' ElectraConfig beyond BERT's: the embedding width and the sequence-summary head.
_ELECTRA_ONLY_FIELDS = (
    "embedding_size",
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_last_dropout",
)


def _rename(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in rules:
        name = pattern.sub(replacement, name)
    return name


def bert_state_dict_to_bertscratch(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a transformers BERT state dict to BertScratch names, fusing Q, K and V per layer."""
    converted: dict[str, torch.Tensor] = {}
    qkv_parts: dict[tuple[str, str, str], dict[str, torch.Tensor]] = {}
    for name, tensor in state_dict.items():
        # The logits add the decoder's own bias: the same tensor as cls.predictions.bias in a tied head, apart from it
        # (which then nothing reads) in an untied one (tie_word_embeddings=False).
        if name.endswith("cls.predictions.bias") and name.replace(".bias", ".decoder.bias") in state_dict:
            continue
        name = re.sub(r"cls\.predictions\.decoder\.bias$", "cls.predictions.bias", name)
        if match := _QKV.fullmatch(name):
            prefix, layer, part, kind = match.groups()
            qkv_parts.setdefault((prefix, layer, kind), {})[part] = tensor
            continue
        converted[_rename(name, _TO_SCRATCH)] = tensor
    for (prefix, layer, kind), parts in qkv_parts.items():
        converted[f"{prefix}encoder.layers.{layer}.attention.qkv.{kind}"] = torch.cat(
            [parts["query"], parts["key"], parts["value"]], dim=0
        )
    return converted


def bertscratch_state_dict_to_bert(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `bert_state_dict_to_bertscratch`: split the fused QKV and restore transformers' names."""
    converted: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if match := _FUSED.fullmatch(name):
            prefix, layer, kind = match.groups()
            for part, chunk in zip(("query", "key", "value"), tensor.chunk(3, dim=0)):
                converted[f"{prefix}encoder.layer.{layer}.attention.self.{part}.{kind}"] = chunk.clone()
            continue
        name = _rename(name, _TO_BERT)
        converted[name] = tensor
        if name.endswith("cls.predictions.bias"):
            converted[name.replace("cls.predictions.bias", "cls.predictions.decoder.bias")] = tensor
    return converted


def electra_state_dict_to_bertscratch(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a transformers ELECTRA discriminator state dict to BertScratch names, fusing Q, K and V per layer."""
    return bert_state_dict_to_bertscratch({_rename(name, _ELECTRA_TO_SCRATCH): t for name, t in state_dict.items()})


def bertscratch_state_dict_to_electra(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `electra_state_dict_to_bertscratch`."""
    bert = bertscratch_state_dict_to_bert(state_dict)
    return {_rename(name, _SCRATCH_TO_ELECTRA): tensor for name, tensor in bert.items()}


def bert_config_to_bertscratch(config: BertConfig) -> BertScratchConfig:
    """A BertScratchConfig with the same sizes, labels and special tokens as a transformers `BertConfig`."""
    if config.model_type != "bert":
        raise ValueError(f"Expected a config of model_type 'bert', got {config.model_type!r}.")
    return _bertscratch_config(config, _BERT_ONLY_FIELDS)


def bertscratch_config_to_bert(config: BertScratchConfig) -> BertConfig:
    """A transformers `BertConfig` with the same sizes, labels and special tokens as a BertScratchConfig."""
    return BertConfig(**_transformers_config_values(config))


def electra_config_to_bertscratch(config: ElectraConfig) -> BertScratchConfig:
    """A BertScratchConfig with the same sizes, labels and special tokens as a transformers `ElectraConfig`."""
    if config.model_type != "electra":
        raise ValueError(f"Expected a config of model_type 'electra', got {config.model_type!r}.")
    if config.embedding_size != config.hidden_size:
        raise ValueError(
            f"This ELECTRA model projects {config.embedding_size}-wide embeddings to hidden_size={config.hidden_size} "
            "(embeddings_project), which BertScratch does not have: only embedding_size == hidden_size converts."
        )
    return _bertscratch_config(config, (*_BERT_ONLY_FIELDS, *_ELECTRA_ONLY_FIELDS))


def bertscratch_config_to_electra(config: BertScratchConfig) -> ElectraConfig:
    """A transformers `ElectraConfig` with the same sizes, labels and special tokens as a BertScratchConfig, its
    embeddings as wide as its hidden states."""
    return ElectraConfig(**_transformers_config_values(config), embedding_size=config.hidden_size)


def _bertscratch_config(config: Any, other_fields: tuple[str, ...]) -> BertScratchConfig:
    """The BertScratchConfig of a transformers encoder config, leaving out the fields BertScratch does not have."""
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        raise ValueError(
            f"BertScratch is an encoder: decoder {config.model_type} configs (is_decoder/add_cross_attention) cannot "
            "convert."
        )
    positions = getattr(config, "position_embedding_type", "absolute")
    if positions not in (None, "absolute"):
        raise ValueError(
            f"This {config.model_type} model's attention reads relative positions (position_embedding_type="
            f"{positions!r}, distance_embedding weights); BertScratch, as transformers 5's BERT, computes absolute "
            "position embeddings only, so its outputs would not be the trained model's."
        )
    values = config.to_dict()
    for key in (*other_fields, "model_type", "architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    try:
        return BertScratchConfig(**values)
    except StrictDataclassError as error:  # huggingface_hub wraps the validators' ValueError in a two-line error
        raise ValueError(" ".join(str(error.__cause__ or error).split())) from error


def _transformers_config_values(config: BertScratchConfig) -> dict[str, Any]:
    """A BertScratchConfig's fields as keyword arguments of a transformers config (BertScratch's own switches left
    out)."""
    if config.model_type != BertScratchConfig.model_type:
        raise ValueError(f"Expected a config of model_type 'bertscratch', got {config.model_type!r}.")
    values = config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "auto_map", *_SCRATCH_ONLY_FIELDS):
        values.pop(key, None)
    return values


def _model_class(name: str) -> type[PreTrainedModel]:
    if name.startswith("BertScratch"):
        return getattr(modeling_bertscratch, name)
    return getattr(transformers, name)


def bert_to_bertscratch(model: PreTrainedModel) -> PreTrainedModel:
    """Convert a loaded transformers `BertFor*` model into the matching `BertScratchFor*` with the same weights."""
    return _convert_model(model, ARCHITECTURES, bert_config_to_bertscratch, bert_state_dict_to_bertscratch)


def bertscratch_to_bert(model: PreTrainedModel) -> PreTrainedModel:
    """Convert a loaded `BertScratchFor*` model into the matching transformers `BertFor*` with the same weights; a
    sequence head that reads more than the pooled [CLS] (`classifier_pooling`) has no counterpart there."""
    _check_bert_head(model.config, type(model).__name__)
    reverse = {v: k for k, v in ARCHITECTURES.items()}
    return _convert_model(model, reverse, bertscratch_config_to_bert, bertscratch_state_dict_to_bert)


def _check_bert_head(config: Any, architecture: str) -> None:
    """Refuse, in one line, a BertScratch sequence head that transformers' BERT has no counterpart for: one that reads
    more than the pooled [CLS] (`classifier_pooling`)."""
    pooling = getattr(config, "classifier_pooling", "cls")
    if architecture.endswith("ForSequenceClassification") and pooling != "cls":
        raise ValueError(
            f"This classifier's head reads classifier_pooling={pooling!r}; transformers' BertForSequenceClassification "
            "reads the pooled [CLS] only: fine-tune with --classifier_pooling cls to convert the result."
        )


def electra_to_bertscratch(model: PreTrainedModel) -> PreTrainedModel:
    """Convert a loaded transformers `ElectraForPreTraining` into a `BertScratchForReplacedTokenDetection`."""
    return _convert_model(
        model, ELECTRA_ARCHITECTURES, electra_config_to_bertscratch, electra_state_dict_to_bertscratch
    )


def bertscratch_to_electra(model: PreTrainedModel) -> PreTrainedModel:
    """Convert a loaded `BertScratchForReplacedTokenDetection` into transformers' `ElectraForPreTraining`."""
    reverse = {v: k for k, v in ELECTRA_ARCHITECTURES.items()}
    return _convert_model(model, reverse, bertscratch_config_to_electra, bertscratch_state_dict_to_electra)


def _convert_model(
    model: PreTrainedModel,
    classes: dict[str, str],
    convert_config: Callable[[Any], Any],
    convert_state_dict: Callable[[dict], dict],
) -> PreTrainedModel:
    """The model of class `classes[type(model).__name__]` with the converted config and weights, in eval mode."""
    source_name = type(model).__name__
    if source_name not in classes:
        raise ValueError(f"Cannot convert {source_name}; supported: {sorted(classes)}.")
    target = _model_class(classes[source_name])(convert_config(model.config))
    target.load_state_dict(convert_state_dict(model.state_dict()), strict=True)
    # PreTrainedModel.to is functools.wraps(nn.Module.to), which typeshed types as unbound: self comes first.
    return target.to(next(model.parameters()).dtype).eval()  # type: ignore[arg-type]


# model_type of a transformers checkpoint -> (its bare model's class, the classes that convert, the config's
# conversion, the model's). The config's runs first: it refuses what cannot convert before any weights load.
_FROM_TRANSFORMERS: dict[
    str, tuple[str, dict[str, str], Callable[[Any], BertScratchConfig], Callable[[PreTrainedModel], PreTrainedModel]]
] = {
    "bert": ("BertModel", ARCHITECTURES, bert_config_to_bertscratch, bert_to_bertscratch),
    "electra": ("ElectraModel", ELECTRA_ARCHITECTURES, electra_config_to_bertscratch, electra_to_bertscratch),
}
# The model types `bertscratch convert` turns into BertScratch.
CONVERTIBLE_MODEL_TYPES = tuple(_FROM_TRANSFORMERS)
# The way back: (transformers class -> BertScratch class, conversion), by the BertScratch class a checkpoint holds.
_TO_TRANSFORMERS: list[tuple[dict[str, str], Callable[[PreTrainedModel], PreTrainedModel]]] = [
    (ARCHITECTURES, bertscratch_to_bert),
    (ELECTRA_ARCHITECTURES, bertscratch_to_electra),
]
# Why an architecture of the family's model types has no BertScratch counterpart, where a reason helps.
_NO_COUNTERPART = {
    "ElectraForMaskedLM": "an ELECTRA generator: only the discriminator (ElectraForPreTraining) converts",
    "BertLMHeadModel": "a left-to-right decoder: BertScratch is an encoder",
}


def bertscratch_config(config: Any, source: str) -> BertScratchConfig:
    """`config` as a BertScratch config: itself where it is one, a BERT or ELECTRA config converted (the same sizes);
    any other model_type refused in the front door's line, naming `source` (where the config came from)."""
    check_model_type(source, config.model_type, config.architectures, "config")
    if config.model_type not in _FROM_TRANSFORMERS:
        return config
    return _FROM_TRANSFORMERS[config.model_type][2](config)


def _conversion_from_transformers(
    source: str | Path, config: Any
) -> tuple[str, Callable[[PreTrainedModel], PreTrainedModel]]:
    """The transformers architecture of `config` (a BERT or ELECTRA checkpoint's) and the conversion that turns its
    model into BertScratch; one line naming what `source` is and what converts, for anything else. The config itself
    is converted here, so a decoder or an ELECTRA with narrower embeddings is refused before its weights load."""
    check_model_type(source, config.model_type, config.architectures)  # the front door's line
    bare, table, convert_config, convert = _FROM_TRANSFORMERS[config.model_type]
    architecture = (config.architectures or [bare])[0]
    if architecture not in table:
        why = f" ({_NO_COUNTERPART[architecture]})" if architecture in _NO_COUNTERPART else ""
        raise ValueError(f"{source} has architecture {architecture!r}{why}; supported: {sorted(table)}.")
    try:
        convert_config(config)
    except ValueError as error:
        raise ValueError(f"{source} ({architecture}) cannot convert: {error}") from None
    return architecture, convert


def convert_checkpoint(source: str | Path, output_dir: str | Path, overwrite: bool = False) -> PreTrainedModel:
    """Convert a checkpoint folder or Hub id in either direction and save it, tokenizer included, to `output_dir`.

    The direction follows the source's `model_type` ("bert" or "electra" -> BertScratch, "bertscratch" -> the
    transformers class of its head); the head follows its `architectures` (the bare model when none is recorded).
    The output is written to a temporary folder and moved into place, so a failed conversion leaves nothing that
    looks finished. A non-empty `output_dir` is only replaced when `overwrite` is set (checked before anything is
    loaded).
    """
    output_dir = Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not overwrite:
        raise ValueError(
            f"Output folder {output_dir} already exists and is not empty; pass --overwrite_output_dir "
            "(overwrite=True) to replace it, or choose another folder."
        )
    if Path(source).resolve() == output_dir.resolve():
        raise ValueError(f"SOURCE and OUTPUT_DIR are the same folder ({output_dir}); write the conversion elsewhere.")
    config = AutoConfig.from_pretrained(str(source))
    convert: Callable[[PreTrainedModel], PreTrainedModel] | None
    if config.model_type == BertScratchConfig.model_type:
        architecture = (config.architectures or ["BertScratchModel"])[0]
        table = {scratch: theirs for classes, _ in _TO_TRANSFORMERS for theirs, scratch in classes.items()}
        if architecture not in table:
            raise ValueError(f"{source} has architecture {architecture!r}; supported: {sorted(table)}.")
        convert = next((to for classes, to in _TO_TRANSFORMERS if architecture in classes.values()), None)
        assert convert is not None, "every architecture in the table has its conversion"
        _check_bert_head(config, architecture)  # before the weights load
    else:
        architecture, convert = _conversion_from_transformers(source, config)
    model = convert(_model_class(architecture).from_pretrained(str(source)))
    modules = _save_atomically(model, source, output_dir, f"save one into {output_dir} (tokenizer.save_pretrained)")
    kept = f", with the sentence-transformers modules {', '.join(modules)}" if modules else ""
    logger.info("Converted %s (%s) into %s (%s)%s", source, architecture, output_dir, type(model).__name__, kept)
    return model


def _save_atomically(model: PreTrainedModel, source: str | Path, output_dir: Path, remedy: str) -> list[str]:
    """Save `model` with `source`'s tokenizer and sentence-transformers files into `output_dir` in one rename;
    returns the sentence-transformers modules kept (none for a plain checkpoint). `remedy` ends the warning for a
    source without a tokenizer (`_copy_tokenizer`)."""
    with staged_folder(output_dir) as staging:
        model.save_pretrained(staging)
        _copy_tokenizer(source, staging, remedy)
        return copy_sentence_transformers_files(source, staging)


# Checkpoints converted on load in this process: what a command was given -> the BertScratch folder it loads.
_CONVERTED: dict[str, str] = {}


def family_checkpoint(model: str | Path) -> str:
    """The checkpoint a command loads for `model`, a folder or Hub id (checked first: `check_model_reference`).

    A BertScratch checkpoint (or an ONNX export of one) is loaded as it is. One of transformers' BERT family (or an
    ELECTRA discriminator) is converted as `convert_checkpoint` converts it (the same weights, tokenizer and
    sentence-transformers files), once per process, into a temporary folder removed at exit, with one log line saying
    so; that folder is returned. Anything else is refused in one line naming what it is and what is accepted
    (`hf_bertscratch_base.model_config.check_model_type`, as the front door refuses it), before any weights load.

    Every command that loads a model goes through here (`finetune`, `classify`, `tag`, `answer`, `embed`,
    `similarity`, `attention`, `fill-mask`, `export`), so each takes the same checkpoints."""
    model = check_model_reference(model)
    if model in _CONVERTED:
        return _CONVERTED[model]
    config = AutoConfig.from_pretrained(model)
    if config.model_type == BertScratchConfig.model_type:
        return model
    architecture, convert = _conversion_from_transformers(model, config)
    folder = Path(tempfile.mkdtemp(prefix="bertscratch-converted-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    converted = convert(_model_class(architecture).from_pretrained(model))
    # The converted folder is removed at exit: a missing tokenizer is saved into the user's folder, or given apart.
    save = f"save one into {model}, or " if Path(model).is_dir() else ""
    _save_atomically(
        converted,
        model,
        folder / "model",
        f"{save}pass the command's tokenizer (--tokenizer; finetune: --tokenizer_name)",
    )
    _CONVERTED[model] = str(folder / "model")
    logger.info(
        "%s is transformers' %s (model_type %r): converted on load into %s with the same weights "
        "(bertscratch convert); its outputs are the original's.",
        model,
        architecture,
        config.model_type,
        type(converted).__name__,
    )
    return _CONVERTED[model]


# The files that make a folder a sentence-transformers model, beside the modules' own folders that modules.json names.
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def sentence_transformers_folder(model: str | Path) -> Path | None:
    """The folder whose sentence-transformers files (modules.json, sentence_bert_config.json,
    config_sentence_transformers.json, each module folder's config.json) say how `model` embeds: a local folder itself;
    for a Hub id, the snapshot folder of huggingface_hub's cache those files are downloaded into, once per process
    (from the cache alone where HF_HUB_OFFLINE is set). None for a Hub id without modules.json (no embedding model),
    or one the Hub does not give (loading the model then says why)."""
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import constants

    return _hub_sentence_transformers_folder(str(model), hub_offline(), str(constants.HF_HUB_CACHE))


@functools.cache
def _hub_sentence_transformers_folder(repo_id: str, offline: bool, cache_dir: str) -> Path | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, HFValidationError

    def download(name: str) -> Path | None:
        try:
            return Path(hf_hub_download(repo_id, name, cache_dir=cache_dir, local_files_only=offline))
        except (EntryNotFoundError, HfHubHTTPError, HFValidationError):
            return None

    modules = download("modules.json")
    if modules is None:
        return None
    for name in SENTENCE_TRANSFORMERS_FILES[1:]:
        download(name)
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if module.get("path"):
            download(f"{module['path']}/config.json")
    return modules.parent


def copy_sentence_transformers_files(source: str | Path, destination: Path) -> list[str]:
    """Keep an embedding folder one: its sentence-transformers files and module folders (1_Pooling/, ...) go along,
    so sentence-transformers, embedding servers and `bertscratch embed` read the converted (or exported) encoder
    with the pooling and length it was trained with, not their own default. The first module, the transformer at
    the folder's root, is the converted model. Returns the modules' types (none when `source` is no
    sentence-transformers folder)."""
    folder = sentence_transformers_folder(source)
    if folder is None or not (folder / "modules.json").is_file():
        return []
    source = folder
    for name in SENTENCE_TRANSFORMERS_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, destination / name)
    modules = json.loads((source / "modules.json").read_text(encoding="utf-8"))
    for module in modules:
        folder = module.get("path", "")
        if folder and (source / folder).is_dir():
            shutil.copytree(source / folder, destination / folder, dirs_exist_ok=True)
    return [module["type"] for module in modules]


def _copy_tokenizer(source: str | Path, destination: Path, remedy: str) -> None:
    """Carry the tokenizer over when the source has one (a folder with only weights converts without it, with a
    warning that ends with `remedy`: what to do where the converted folder is the user's, or a temporary one)."""
    from transformers import AutoTokenizer

    from .tokenization import check_vocab_file, check_vocabulary, forget_load_options

    try:
        tokenizer = forget_load_options(AutoTokenizer.from_pretrained(str(source)))
        check_vocabulary(tokenizer, str(source), remedy)
        check_vocab_file(source)
    except (OSError, ValueError) as error:
        logger.warning("No tokenizer carried over from %s: %s", source, error)
        return
    tokenizer.save_pretrained(destination)


@dataclass
class ConvertArguments:
    """Arguments of `bertscratch convert` (SOURCE and OUTPUT_DIR may be given positionally, or all as one .json)."""

    source: str | None = field(
        default=None,
        metadata={
            "help": "Checkpoint to convert: a folder saved by save_pretrained, or a Hub id when online. A "
            "transformers BERT (model_type 'bert') or ELECTRA discriminator (ElectraForPreTraining) becomes "
            "BertScratch; a BertScratch checkpoint becomes transformers' BERT, or ElectraForPreTraining for "
            "a discriminator pretrained with --objective electra. The head follows config.architectures."
        },
    )
    output_dir: str | None = field(
        default=None, metadata={"help": "Folder to write the converted model, config and tokenizer files into."}
    )
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Replace OUTPUT_DIR if it already exists and is not empty."}
    )


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch convert`."""
    return ArgumentParser(
        ConvertArguments,
        description="Convert a checkpoint between transformers' BERT (BertFor*) or ELECTRA discriminator "
        "(ElectraForPreTraining) and BertScratch (BertScratchFor*); "
        "weights, config (sizes, labels) and tokenizer files are carried over.",
        usage="%(prog)s SOURCE OUTPUT_DIR [--overwrite_output_dir]   (or: %(prog)s ARGS.json)",
    )


def parse_args(argv: list[str] | None = None) -> ConvertArguments:
    """Arguments from the command line (`SOURCE OUTPUT_DIR [--flags]`) or from a single .json file."""
    parser = build_parser()
    (args,) = parse_args_or_json(parser, argv, positional=("source", "output_dir"))
    if args.source is None or args.output_dir is None:
        missing = " and ".join(name.upper() for name in ("source", "output_dir") if getattr(args, name) is None)
        raise ValueError(f"Give both folders: {parser.prog} SOURCE OUTPUT_DIR; {missing} is missing (see --help).")
    return args


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point of `bertscratch convert`."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    args = parse_args(argv)
    assert args.source is not None and args.output_dir is not None, "parse_args requires both folders"
    model = convert_checkpoint(args.source, args.output_dir, overwrite=args.overwrite_output_dir)
    print(f"Saved {type(model).__name__} ({model.config.model_type}) to {args.output_dir}")


__all__ = [
    "ARCHITECTURES",
    "AUTO_CLASS_TO_MODEL",
    "ELECTRA_ARCHITECTURES",
    "bert_state_dict_to_bertscratch",
    "bertscratch_state_dict_to_bert",
    "bert_config_to_bertscratch",
    "bertscratch_config",
    "bertscratch_config_to_bert",
    "bert_to_bertscratch",
    "bertscratch_to_bert",
    "electra_state_dict_to_bertscratch",
    "bertscratch_state_dict_to_electra",
    "electra_config_to_bertscratch",
    "bertscratch_config_to_electra",
    "electra_to_bertscratch",
    "bertscratch_to_electra",
    "convert_checkpoint",
    "copy_sentence_transformers_files",
    "family_checkpoint",
    "sentence_transformers_folder",
    "CONVERTIBLE_MODEL_TYPES",
    "ConvertArguments",
    "build_parser",
    "main",
    "parse_args",
]


if __name__ == "__main__":
    main()
