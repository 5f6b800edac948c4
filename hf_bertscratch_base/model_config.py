"""What a model's config says that can refuse a command before anything loads, read with the standard library alone:
its model_type (`check_model_type`: a model BertScratch neither is nor converts), its positions
(`check_max_seq_length`: a --max_seq_length they do not cover) and its problem type (`classify_threshold`: a
--threshold for a classifier that is not multi-label). The `bertscratch` front door reads a local folder's
config.json (`read_config`); the library checks the same with the config it has loaded, in the same words. Both read
the input columns fine-tuning recorded in a model's config (`read_model_config`, a Hub id's from the Hub cache too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .model_reference import hub_cache_file
from .task_table import MULTI_LABEL_THRESHOLD

# The model types the commands load (`hf_bertscratch.convert.family_checkpoint`): BertScratch's own, then
# transformers' BERT and ELECTRA (a discriminator), which are converted on load.
MODEL_TYPES = ("bertscratch", "bert", "electra")
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


def check_model_type(model: str | Path, model_type: str | None, architectures: object = None) -> None:
    """Refuse, in one line naming it (and its `architectures`, where the config records them) and what is accepted,
    a model whose config's `model_type` is none of `MODEL_TYPES` (None: no model_type recorded, left to the library).
    The front door reads them from config.json, the library from the config it has loaded: the line is the same."""
    if model_type is None or model_type in MODEL_TYPES:
        return
    named = (
        f" ({', '.join(architectures)})"
        if isinstance(architectures, list) and architectures and all(isinstance(name, str) for name in architectures)
        else ""
    )
    raise ValueError(
        f"{model} holds a checkpoint of model_type {model_type!r}{named}; expected 'bertscratch', or transformers' "
        "'bert' or 'electra' (an ELECTRA discriminator), which become BertScratch with the same weights."
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


def classify_threshold(model: str | Path, config: Mapping[str, Any], threshold: float | None = None) -> float | None:
    """The threshold `bertscratch classify` gives `model`'s labels at, from its `config`: for a multi-label classifier
    `threshold` (--threshold) where given, else the one fine-tuning recorded (`THRESHOLD_ATTRIBUTE`), else
    `MULTI_LABEL_THRESHOLD`; None for any other model, which refuses a --threshold in one line naming its problem_type.
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
    if threshold is not None:
        return threshold
    recorded = config.get(THRESHOLD_ATTRIBUTE)
    return (
        float(recorded)
        if isinstance(recorded, int | float) and not isinstance(recorded, bool)
        else MULTI_LABEL_THRESHOLD
    )


__all__ = [
    "MODEL_TYPES",
    "MULTI_LABEL_PROBLEM_TYPE",
    "NEW_MODEL_POSITIONS",
    "THRESHOLD_ATTRIBUTE",
    "check_max_seq_length",
    "check_model_type",
    "check_threshold",
    "classify_threshold",
    "read_config",
    "read_model_config",
]
