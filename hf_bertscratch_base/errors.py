"""A command's failure as one line on stderr, in the command itself and in the processes it launches.

`bertscratch pretrain` on a CPU runs as two data-parallel processes under `torch.distributed.run`. An error both
raise (a missing data file, say) would otherwise print a traceback in each and torchrun's report of the failed
children after them. Instead each launched process writes its one line into a folder the launcher names
(`LAUNCHED_ERRORS_ENV`) and exits with status 1, and the launcher prints the distinct lines once (`launched_errors`).
`$BERTSCRATCH_DEBUG` keeps the tracebacks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from hf_bertscratch_base import PROG

DEBUG_ENV = "BERTSCRATCH_DEBUG"  # set (not "0"): every command shows the traceback of an error, not one line
LAUNCHED_ERRORS_ENV = "BERTSCRATCH_LAUNCHED_ERRORS"  # the folder a launched process writes its error line into


def debugging() -> bool:
    """Whether `$BERTSCRATCH_DEBUG` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def error_line(command: str, error: BaseException) -> str:
    """`bertscratch COMMAND: error: Type: message`, the message's whitespace made single spaces."""
    message = " ".join(str(error).split()) or "(no message)"
    return f"{PROG} {command}: error: {type(error).__name__}: {message}"


def run_launched(command: str, main: Callable[[], None]) -> None:
    """Run `main()` in a process the command launched: an error is written as its one line into the folder of
    `LAUNCHED_ERRORS_ENV` (rank-N.txt) and ends the process with status 1 (with `$BERTSCRATCH_DEBUG`, or without the
    folder, it is raised as it is)."""
    folder = os.environ.get(LAUNCHED_ERRORS_ENV)
    try:
        main()
    except Exception as error:
        if not folder or debugging():
            raise
        path = Path(folder) / f"rank-{os.environ.get('RANK', '0')}.txt"
        path.write_text(error_line(command, error) + "\n", encoding="utf-8")
        raise SystemExit(1) from None


def launched_errors(folder: str | Path) -> list[str]:
    """The distinct error lines the launched processes wrote into `folder`, in rank order."""
    files = sorted(Path(folder).glob("rank-*.txt"), key=lambda path: int(path.stem.removeprefix("rank-")))
    lines: list[str] = []
    for path in files:
        line = path.read_text(encoding="utf-8").strip()
        if line and line not in lines:
            lines.append(line)
    return lines


def print_error(command: str, error: BaseException) -> None:
    """The error's one line on stderr."""
    print(error_line(command, error), file=sys.stderr)


__all__ = [
    "DEBUG_ENV",
    "LAUNCHED_ERRORS_ENV",
    "debugging",
    "error_line",
    "launched_errors",
    "print_error",
    "run_launched",
]
