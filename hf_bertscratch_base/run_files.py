"""A run folder's files, from the standard library alone: each written atomically with the permissions the umask
gives (`atomic_write`), a run's checkpoints found (`checkpoint_folders`) and told whole or incomplete
(`checkpoint_gaps`), the flags that carry on an unfinished run (`continue_flags`), and where a file staged for a
finished run ends up (`final_path`). `hf_bertscratch.run_folder` builds the finished-run protocol on them; `bertscratch plot`
(`training_curves`) reads and writes a run's files with them before torch loads, or without it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The hidden folder inside output_dir where a finished run is assembled before it is moved in
# (`hf_bertscratch.run_folder.finish_run`).
STAGING = ".staging"


def checkpoint_step(path: Path) -> int:
    """The step N of a `checkpoint-N` folder."""
    return int(path.name.split("-")[-1])


def checkpoint_folders(output_dir: str | Path) -> list[Path]:
    """The `checkpoint-N` folders of a run's output folder, by step (none for a folder that does not exist)."""
    output_dir = Path(output_dir)
    found = [path for path in output_dir.glob("checkpoint-*") if path.is_dir() and path.name.split("-")[-1].isdigit()]
    return sorted(found, key=checkpoint_step)


# What a resume reads of a `checkpoint-N` folder: its weights (one of WEIGHTS_FILES, or an index of shards), the
# optimizer and schedule (RESUMED_STATE), then trainer_state.json, in the order `Trainer._save_checkpoint` writes
# them, none atomically: a run stopped while saving (kill -9, a power cut, a full disk) leaves a folder without
# trainer_state.json, or with it cut short. The random state, written before it, is optional to transformers' resume.
RESUMED_STATE = ("optimizer.pt", "scheduler.pt")
TRAINER_STATE = "trainer_state.json"
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")


def _has_weights(checkpoint: Path) -> bool:
    """Whether `checkpoint` holds the model's weights: one file, or an index whose shards are all there."""
    if any((checkpoint / name).is_file() for name in WEIGHTS_FILES):
        return True
    for index in (checkpoint / f"{name}.index.json" for name in WEIGHTS_FILES):
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if all((checkpoint / shard).is_file() for shard in shards):
            return True
    return False


def checkpoint_gaps(checkpoint: str | Path, save_only_model: bool = False) -> str | None:
    """What keeps `checkpoint` from being resumed, as "no X, Y" or "trainer_state.json unreadable" (None for a
    whole one): its weights, its optimizer and schedule (none with --save_only_model) and trainer_state.json, which
    Trainer writes last and which must parse."""
    checkpoint = Path(checkpoint)
    missing = [] if _has_weights(checkpoint) else [WEIGHTS_FILES[0]]
    if not save_only_model:
        missing += [name for name in RESUMED_STATE if not (checkpoint / name).is_file()]
    state = checkpoint / TRAINER_STATE
    if not state.is_file():
        missing.append(TRAINER_STATE)
    if missing:
        return "no " + ", ".join(missing)
    try:
        if isinstance(json.loads(state.read_text(encoding="utf-8")), dict):
            return None
    except (OSError, ValueError):
        pass
    return f"{TRAINER_STATE} unreadable"


def continue_flags(output_dir: str | Path, save_only_model: bool = False) -> list[str]:
    """The flags that carry on the unfinished run in `output_dir`, by the rule `--resume_from_checkpoint last` follows
    (`checkpoint_gaps`): `--resume_from_checkpoint last` where it holds a whole checkpoint; `--overwrite_output_dir
    true` where it holds incomplete ones alone (a run stopped while saving its only checkpoint: nothing to resume
    from, and a fresh start beside them is refused without it); none for a folder without checkpoints."""
    checkpoints = checkpoint_folders(output_dir)
    if not checkpoints:
        return []
    if any(checkpoint_gaps(checkpoint, save_only_model) is None for checkpoint in checkpoints):
        return ["--resume_from_checkpoint", "last"]
    return ["--overwrite_output_dir", "true"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def grant_usual_permissions(path: str | Path) -> None:
    """Give a written file the mode a plain `open()` would (0666 minus the umask): safetensors and `mkstemp` write
    0600, which another user or a serving container on a shared disk cannot read."""
    mode = 0o666 & ~_umask()
    if stat.S_IMODE(os.stat(path).st_mode) != mode:
        os.chmod(path, mode)


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; on success it replaces `path` in one rename.

    Readers see the old file or the whole new one; a failure leaves neither a partial file nor the temporary one.
    The file gets the usual permissions (see `grant_usual_permissions`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        grant_usual_permissions(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def final_path(path: str | Path) -> Path:
    """Where a file written into a run's staging folder (`STAGING`) ends up: `X/.staging/name` -> `X/name`; any
    other path unchanged. Log lines name this path, which still exists when the run has ended."""
    path = Path(path)
    parts = path.parts
    if STAGING in parts:
        index = parts.index(STAGING)
        return Path(*parts[:index], *parts[index + 1 :])
    return path


__all__ = [
    "RESUMED_STATE",
    "STAGING",
    "TRAINER_STATE",
    "WEIGHTS_FILES",
    "atomic_write",
    "checkpoint_folders",
    "checkpoint_gaps",
    "checkpoint_step",
    "continue_flags",
    "final_path",
    "grant_usual_permissions",
]
