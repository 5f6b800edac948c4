"""The front door's checks of a command's model by its config, before torch loads (`hf_bertscratch_base.model_config`,
whose words the library's checks use too): a local model folder, or a --config_name, of a model_type the command does
not load (`check_model_config`), a tokenizer or config flag naming a path that does not exist (`check_source_flags`),
and a `--max_seq_length` beyond the positions of the model it is for (`check_length`): a model folder's or a config's
`max_position_embeddings`, or a new model's `--max_position_embeddings`; and classify's `--threshold` outside (0, 1)
or for a model that is no multi-label classifier (`check_threshold_flag`). A Hub id, or a config that cannot be read,
is left to the library.
"""

from __future__ import annotations

from hf_bertscratch_base.model_config import (
    NEW_MODEL_POSITIONS,
    check_max_seq_length,
    check_model_type,
    check_threshold,
    classify_threshold,
    read_config,
)
from hf_bertscratch_base.model_reference import check_source_flag

from .commands import MODEL_FIRST, flag_value, model_argument

# The commands that load (or convert) their model as `hf_bertscratch.convert.family_checkpoint` does, which takes the
# model types `MODEL_TYPES`.
FAMILY_COMMANDS = ("finetune", *MODEL_FIRST)
# The commands whose model of another model_type is refused (`check_model_type`): the family's, and pretrain, which
# continues a BertScratch model (a model of any other model_type fails there).
MODEL_TYPE_COMMANDS = (*FAMILY_COMMANDS, "pretrain")
# A flag that names a tokenizer or a config (`SOURCE_FLAGS`) -> the commands that take it.
SOURCE_FLAG_COMMANDS: dict[str, tuple[str, ...]] = {
    "--tokenizer_name": ("pretrain", "pretrain-flax", "finetune"),
    "--config_name": ("pretrain", "pretrain-flax"),
    "--tokenizer": tuple(command for command in MODEL_FIRST if command != "convert"),
}
# The commands that refuse a --max_seq_length beyond their model's positions (`check_max_seq_length`).
LENGTH_COMMANDS = ("pretrain", "finetune", "answer", "evaluate-onnx")


def check_model_config(command: str, args: list[str]) -> None:
    """A MODEL_TYPE_COMMANDS command's local model folder, and a new model's local --config_name, hold a model_type
    the command loads (`check_model_type`)."""
    model = model_argument(command, args) if command in MODEL_TYPE_COMMANDS else None
    config = read_config(model) if model is not None else None
    if model is not None and config is not None:
        check_model_type(model, config.get("model_type"), config.get("architectures"))
    config_name = flag_value(args, "--config_name") if command in SOURCE_FLAG_COMMANDS["--config_name"] else None
    config = read_config(config_name) if config_name else None
    if config is not None:
        given = f"--config_name {config_name!r}"
        check_model_type(given, config.get("model_type"), config.get("architectures"), "config")


def check_source_flags(command: str, args: list[str]) -> None:
    """A tokenizer or config flag the command takes names no path that does not exist (`check_source_flag`)."""
    for flag, commands in SOURCE_FLAG_COMMANDS.items():
        if command in commands:
            check_source_flag(flag, flag_value(args, flag))


def _integer(value: str | None) -> int | None:
    """`value` as an integer; None where it is none (the command's parser names a value that is not one)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def model_positions(command: str, args: list[str]) -> int | None:
    """The positions of the model the command runs, where they are known before torch loads: the config.json of a
    local model folder (pretrain: the --model_name_or_path it continues, else its --config_name), or a new model's
    --max_position_embeddings (pretrain); None where they are not."""
    source = model_argument(command, args)
    if command == "pretrain" and source is None:
        source = flag_value(args, "--config_name")
        if source is None:
            given = flag_value(args, "--max_position_embeddings")
            return NEW_MODEL_POSITIONS if given is None else _integer(given)
    config = read_config(source) if source is not None else None
    positions = config.get("max_position_embeddings") if config is not None else None
    return positions if isinstance(positions, int) and not isinstance(positions, bool) else None


def check_length(command: str, args: list[str]) -> None:
    """A LENGTH_COMMANDS command's --max_seq_length fits its model's positions (`model_positions`)."""
    length = _integer(flag_value(args, "--max_seq_length")) if command in LENGTH_COMMANDS else None
    if length is not None:
        check_max_seq_length(length, model_positions(command, args))


def check_threshold_flag(command: str, args: list[str]) -> None:
    """classify's --threshold is between 0 and 1, and its local model is a multi-label classifier
    (`classify_threshold`, the library's check); a value that is no number is left to the command's parser."""
    given = flag_value(args, "--threshold") if command == "classify" else None
    try:
        threshold = float(given) if given is not None else None
    except ValueError:
        threshold = None  # no number: the command's parser names it
    if threshold is None:
        return
    model = model_argument(command, args)
    config = read_config(model) if model is not None else None
    if model is None or config is None:
        check_threshold(threshold, "--threshold")
    else:  # the range first, then the model's problem type
        classify_threshold(model, config, threshold)


__all__ = [
    "FAMILY_COMMANDS",
    "LENGTH_COMMANDS",
    "MODEL_TYPE_COMMANDS",
    "SOURCE_FLAG_COMMANDS",
    "check_length",
    "check_model_config",
    "check_source_flags",
    "check_threshold_flag",
    "model_positions",
]
