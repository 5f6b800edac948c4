"""Where a model comes from: a local folder or a Hub id, told apart before anything loads.

A mistyped local path would otherwise be tried as a Hub id, retried over the network and reported as a connection
error; `check_model_reference` names the missing folder at once, and says when the Hub is offline.
"""

from __future__ import annotations

import re
from pathlib import Path

from .metrics import hub_offline

# A Hub id is "name" or "namespace/name" made of these characters; anything else can only be a local path.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def check_model_reference(model: str | Path) -> str:
    """Fail early, in one line, when `model` is neither an existing local folder nor shaped like a Hub id."""
    model = str(model)
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"Model {model!r} is a file: expected a model folder (with config.json).")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"Model folder {model!r} has no config.json: is it a saved model folder?")
        return str(path)
    if model.startswith((".", "/", "~")) or not _HUB_ID.match(model):
        raise FileNotFoundError(f"Model {model!r} does not exist: expected a model folder or a Hub id (user/name).")
    namespace = model.split("/")[0] if "/" in model else None
    if namespace is not None and Path(namespace).is_dir():  # runs/nope: a folder of runs/, not a Hub user
        raise FileNotFoundError(f"Model folder {model!r} does not exist (there is a local folder {namespace!r}).")
    if hub_offline():
        raise FileNotFoundError(
            f"Model {model!r} is not a local folder, and the Hub is offline (HF_HUB_OFFLINE is set): expected a model "
            "folder here, or unset HF_HUB_OFFLINE to download it."
        )
    return model


__all__ = ["check_model_reference"]
