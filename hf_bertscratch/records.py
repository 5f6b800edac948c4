"""How a measurement was made, the head of every speed and sweep record: the command with portable paths, the code's
commit, the date, package versions, CPU, cores, threads and the load average at the start and the end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from . import cpu_matmul
from .hardware import cpu_identity, cpu_model
from .run_folder import write_text_atomically

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def environment_line() -> str:
    """Where the numbers come from: torch (and onnxruntime) version, threads, CPU model and load average."""
    load = ", ".join(f"{x:.1f}" for x in _load_average())
    versions = f"torch {torch.__version__}"
    with contextlib.suppress(ImportError):
        import onnxruntime

        versions += f", onnxruntime {onnxruntime.__version__}"
    return f"{versions}, {torch.get_num_threads()} threads, {cpu_model()}, load average at the end {load}"


def _load_average() -> tuple[float, ...]:
    try:
        return os.getloadavg()
    except OSError:
        return ()


def _load_average_list() -> list[float]:
    """The 1-, 5- and 15-minute load averages to two decimals (empty where the system has none)."""
    return [round(value, 2) for value in _load_average()]


# The checkout holding this package when it runs from a source tree (an editable install).
REPOSITORY = Path(__file__).resolve().parents[1]
# Distributions whose versions a record names; onnxruntime is added when it is a contender.
RECORD_PACKAGES = ("torch", "transformers", "hf-bertscratch")


def git_commit(folder: str | Path = REPOSITORY) -> str | None:
    """The short hash of HEAD of the git checkout whose top folder is `folder`, with "-dirty" when tracked files
    differ from it (untracked ones do not count); None when `folder` is not the top of a checkout (an installed
    package inside some other repository's folder included) or git is missing."""
    folder = Path(folder).resolve()
    try:
        top, head = _git(folder, "rev-parse", "--show-toplevel", "--short", "HEAD").splitlines()
        changes = _git(folder, "status", "--porcelain", "--untracked-files=no")
    except (OSError, ValueError, subprocess.CalledProcessError):
        return None
    if Path(top).resolve() != folder:
        return None
    return f"{head}-dirty" if changes.strip() else head


def _git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=folder, capture_output=True, text=True, check=True).stdout


def package_versions(onnxruntime: bool) -> dict[str, str | None]:
    """The installed version of each of `RECORD_PACKAGES` (and onnxruntime when timed); None where not installed."""
    versions: dict[str, str | None] = {}
    for package in (*RECORD_PACKAGES, "onnxruntime") if onnxruntime else RECORD_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


@dataclass(frozen=True)
class RunStart:
    """What a record takes before the timing starts: the code's commit, the UTC date-time and the load average."""

    commit: str | None
    date: str
    load_average: list[float]

    @classmethod
    def now(cls) -> RunStart:
        date = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return cls(git_commit(), date, _load_average_list())


def run_record(
    program: str,
    argv: list[str],
    arguments: DataclassInstance | Mapping[str, Any],
    start: RunStart,
    onnxruntime: bool,
) -> dict:
    """How a timed run was made, the head of every speed and sweep record: command, commit, date, versions, CPU,
    the CPU's vendor, family, model and instruction sets, cores, threads, the CPU GEMM path (`cpu_matmul.choice`), load average at the start and the end, and the parsed
    arguments (a dataclass or a mapping)."""
    return {
        "command": f"{program} {shlex.join(portable_paths(argv))}".strip(),
        "commit": start.commit,
        "date": start.date,
        "versions": package_versions(onnxruntime),
        "cpu": cpu_model(),
        "cpu_identity": cpu_identity(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "gemm_path": asdict(cpu_matmul.choice()),
        "load_average": {"start": start.load_average, "end": _load_average_list()},
        "arguments": {
            name: portable_paths([value])[0] if isinstance(value, str) else value
            for name, value in (dict(arguments) if isinstance(arguments, Mapping) else asdict(arguments)).items()
        },
        "environment": environment_line(),
    }


def write_record(path: str | Path, record: dict) -> None:
    """Write a record as indented JSON through a temporary file renamed into place, and print where it went."""
    write_text_atomically(path, json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}")


def portable_paths(values: list[str]) -> list[str]:
    """`values` with each absolute path under the parent of the current folder written relative to the current folder
    (the repository, for the lab's records): a record names `runs/x` or `../shared/data`, not the machine that made it.
    A path given as `--flag=PATH` is written so too.
    """
    here = Path.cwd()

    def portable(value: str) -> str:
        path = Path(value)
        if path.is_absolute() and path.is_relative_to(here.parent):
            return os.path.relpath(path, here)
        return value

    written = []
    for value in values:
        flag, equals, given = value.partition("=")
        written.append(flag + equals + portable(given) if value.startswith("-") and equals else portable(value))
    return written


def record_file(output_dir: str | Path, *parts: str) -> Path:
    """OUTPUT_DIR/NAME.json, NAME the `parts` (a device name, a date) joined and reduced to letters, digits and
    dashes: `Intel(R) Xeon(R) ...` and `2026-11-28T17:00:00+00:00` make `Intel-R-Xeon-R-...-2026-11-28T17-00-00-00-00`."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", "-".join(parts)).strip("-")
    return Path(output_dir) / f"{name}.json"
