"""A run folder's files, from the standard library alone: each written atomically with the permissions the umask
gives (`atomic_write`), a run's checkpoints found (`checkpoint_folders`), and where a file staged for a finished run
ends up (`final_path`). `hf_bertscratch.run_folder` builds the finished-run protocol on them; `bertscratch plot`
(`training_curves`) reads and writes a run's files with them before torch loads, or without it.
"""

from __future__ import annotations

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
    "STAGING",
    "atomic_write",
    "checkpoint_folders",
    "checkpoint_step",
    "final_path",
    "grant_usual_permissions",
]
