"""What a model's config says that can refuse a command before anything loads, read with the standard library alone:
its model_type (`check_model_type`: a model BertScratch neither is nor converts), its positions
(`check_max_seq_length`: a --max_seq_length they do not cover) and its problem type (`classify_threshold`: a
--threshold for a classifier that is not multi-label). The `bertscratch` front door reads a local folder's
config.json (`read_config`); the library checks the same with the config it has loaded, in the same words. Both read
the input columns fine-tuning recorded in a model's config (`read_model_config`, a Hub id's from the Hub cache too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .model_reference import hub_cache_file
from .task_table import MULTI_LABEL_THRESHOLD, THRESHOLD_GRID

# The model types the commands load (`hf_bertscratch.convert.family_checkpoint`): BertScratch's own, then
# transformers' BERT and ELECTRA (a discriminator), which are converted on load.
MODEL_TYPES = ("bertscratch", "bert", "electra")
# What a model of those types keeps as it becomes BertScratch, by what its folder or file holds (`check_model_type`).
KEPT = {"checkpoint": "weights", "config": "sizes"}
# The positions of a new model (`bertscratch pretrain --max_position_embeddings`'s default).
NEW_MODEL_POSITIONS = 512
# transformers' problem_type of a multi-label classifier: one sigmoid per label, a label given where it is above a
# threshold (`classify_threshold`).
MULTI_LABEL_PROBLEM_TYPE = "multi_label_classification"
# The config attribute where fine-tuning records that threshold (`BertScratchConfig.multi_label_threshold`).
THRESHOLD_ATTRIBUTE = "multi_label_threshold"


def read_config(reference: str | Path) -> dict[str, Any] | None:
    """The config a local model folder (its config.json) or a config file holds; None for anything else (a Hub id,
    a missing path, a file that is not a JSON object), which the library reads and names itself."""
    path = Path(reference).expanduser()
    if path.is_dir():
        path = path / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8")) if path.suffix == ".json" and path.is_file() else None
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def read_model_config(model: str | Path) -> dict[str, Any] | None:
    """The config of a model folder or Hub id where it is at hand without a download: a local folder's config.json
    (`read_config`), or the config.json the Hub cache holds for a Hub id; None otherwise."""
    config = read_config(model)
    if config is not None or Path(model).expanduser().exists():
        return config
    cached = hub_cache_file(str(model), "config.json")
    return read_config(cached) if cached is not None else None


def check_model_type(
    model: str | Path, model_type: str | None, architectures: object = None, kind: str = "checkpoint"
) -> None:
    """Refuse, in one line naming it (and its `architectures`, where the config records them) and what is accepted,
    a model whose config's `model_type` is none of `MODEL_TYPES` (None: no model_type recorded, left to the library).
    The front door reads them from config.json, the library from the config it has loaded: the line is the same.
    `kind` is what `model` holds: a "checkpoint" (weights) or a "config" (a new model's sizes: `--config_name`)."""
    if model_type is None or model_type in MODEL_TYPES:
        return
    named = (
        f" ({', '.join(architectures)})"
        if isinstance(architectures, list) and architectures and all(isinstance(name, str) for name in architectures)
        else ""
    )
    raise ValueError(
        f"{model} holds a {kind} of model_type {model_type!r}{named}; expected 'bertscratch', or transformers' "
        f"'bert' or 'electra' (an ELECTRA discriminator), which become BertScratch with the same {KEPT[kind]}."
    )


def check_max_seq_length(max_seq_length: int | None, max_position_embeddings: int | None) -> None:
    """Refuse a `--max_seq_length` beyond the model's position embeddings, naming both numbers and what would fit.
    None for either number passes: no length chosen, or a model without such a limit."""
    if max_seq_length is not None and max_position_embeddings is not None and max_seq_length > max_position_embeddings:
        raise ValueError(
            f"--max_seq_length {max_seq_length} exceeds the model's max_position_embeddings "
            f"{max_position_embeddings}: use --max_seq_length {max_position_embeddings} or less."
        )


def check_threshold(threshold: float, flag: str) -> None:
    """Refuse a multi-label threshold (`flag`'s value) that is not strictly between 0 and 1, where some sigmoid could
    fall on either side of it."""
    if not 0.0 < threshold < 1.0:  # NaN too
        raise ValueError(
            f"{flag} {threshold:g} is not between 0 and 1: a multi-label classifier predicts each label whose sigmoid "
            "is above it."
        )


def label_thresholds(recorded: object, names: Sequence[str]) -> dict[str, float]:
    """Each label of a multi-label classifier (`names`, in the order of its outputs) with the sigmoid above which it is
    given, from the threshold its config records (`THRESHOLD_ATTRIBUTE`): None, `MULTI_LABEL_THRESHOLD` for every
    label; a number, it for every label; a mapping label -> threshold (chosen per label), its threshold for each. The
    one reading of a model's thresholds: fine-tuning's scores, `classify` and the card give labels at them. A recorded
    value that is not one of those, or names another set of labels, is refused in one line
    (`check_recorded_thresholds`)."""
    check_recorded_thresholds(recorded, names)
    if isinstance(recorded, Mapping):
        return {name: float(recorded[name]) for name in names}
    threshold = MULTI_LABEL_THRESHOLD if recorded is None else float(recorded)  # type: ignore[arg-type]
    return dict.fromkeys(names, threshold)


def check_recorded_thresholds(recorded: object, names: Sequence[str]) -> None:
    """Refuse a recorded multi-label threshold (`THRESHOLD_ATTRIBUTE`) that is neither None, a number in (0, 1), nor
    a mapping giving each of `names` one in (0, 1), naming the bad value."""
    field = f"BertScratchConfig.{THRESHOLD_ATTRIBUTE}"
    if isinstance(recorded, Mapping):
        lacking = [name for name in names if name not in recorded]
        unknown = [name for name in recorded if name not in names]
        if lacking or unknown:
            problem = f"{', '.join(lacking)} lacks one" if lacking else f"{', '.join(unknown)} is no label of the model"
            raise ValueError(
                f"{field} must give each of the labels {list(names)} one threshold, got {dict(recorded)} ({problem})."
            )
        for name, threshold in recorded.items():
            if not _in_zero_to_one(threshold):
                raise ValueError(f"{field} must be None or in (0, 1) for each label, got {threshold} for {name}.")
    elif recorded is not None and not _in_zero_to_one(recorded):
        raise ValueError(f"{field} must be None or in (0, 1), got {recorded}.")


def _in_zero_to_one(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0.0 < value < 1.0


def config_label_names(config: Mapping[str, Any]) -> list[str]:
    """A classifier's label names from its config's id2label (keys ints, or their text as in config.json), in the
    order of its outputs."""
    id2label = config.get("id2label") or {}
    return [id2label[key] for key in sorted(id2label, key=int)]


def classify_threshold(
    model: str | Path, config: Mapping[str, Any], threshold: float | None = None
) -> dict[str, float] | None:
    """The threshold `bertscratch classify` gives each of `model`'s labels at, from its `config`: for a multi-label
    classifier `threshold` (--threshold) for every label where given, else the ones fine-tuning recorded
    (`label_thresholds`); None for any other model, which refuses a --threshold in one line naming its problem_type.
    The front door reads `config` from config.json, the library from the config it has loaded: the line is the same."""
    if threshold is not None:
        check_threshold(threshold, "--threshold")
    problem_type = config.get("problem_type")
    if problem_type != MULTI_LABEL_PROBLEM_TYPE:
        if threshold is not None:
            named = f"has problem_type {problem_type!r}" if problem_type else "records no problem_type"
            raise ValueError(
                f"--threshold {threshold:g} decides which labels a multi-label classifier (problem_type "
                f"{MULTI_LABEL_PROBLEM_TYPE!r}) gives a text, and the config of {model} {named}: leave --threshold out."
            )
        return None
    return label_thresholds(
        config.get(THRESHOLD_ATTRIBUTE) if threshold is None else threshold, config_label_names(config)
    )


def describe_thresholds(threshold: float | Mapping[str, float]) -> str:
    """A multi-label threshold as the log, `bertscratch classify` and the card give it: one number for every label
    ("0.35"), or each label's own ("cats 0.3, dogs 0.55")."""
    if isinstance(threshold, Mapping):
        return ", ".join(f"{name} {value:g}" for name, value in threshold.items())
    return f"{threshold:g}"


def describe_grid(grid: Sequence[float] = THRESHOLD_GRID) -> str:
    """The thresholds fine-tuning chooses among, as the help and the card name them: "0.05, 0.10, ..., 0.95"."""
    return f"{grid[0]:.2f}, {grid[1]:.2f}, ..., {grid[-1]:.2f}"


def one_or_each(thresholds: Mapping[str, float]) -> float | dict[str, float]:
    """Labels' thresholds as a model records them: one number where every label has the same, else each label's."""
    values = set(thresholds.values())
    return values.pop() if len(values) == 1 else dict(thresholds)


__all__ = [
    "MODEL_TYPES",
    "MULTI_LABEL_PROBLEM_TYPE",
    "NEW_MODEL_POSITIONS",
    "THRESHOLD_ATTRIBUTE",
    "check_max_seq_length",
    "check_model_type",
    "check_recorded_thresholds",
    "check_threshold",
    "classify_threshold",
    "config_label_names",
    "describe_grid",
    "describe_thresholds",
    "label_thresholds",
    "one_or_each",
    "read_config",
    "read_model_config",
]
