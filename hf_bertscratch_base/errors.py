"""A command's failure as one line on stderr, in the command itself and in the processes it launches.

`bertscratch pretrain` on a CPU runs as two data-parallel processes under `torch.distributed.run`. An error both
raise (a missing data file, say) would otherwise print a traceback in each and torchrun's report of the failed
children after them. Instead each launched process writes its one line into a folder the launcher names
(`LAUNCHED_ERRORS_ENV`) and exits with status 1, and the launcher prints the distinct lines once (`launched_errors`).
`$BERTSCRATCH_DEBUG` keeps the tracebacks. A run stopped by a signal (Ctrl-C, `kill`) is no error: it ends with the
one line of `Stopped`, printed once, and the signal's exit status (128 + its number, 130 for Ctrl-C), whether it runs
as `bertscratch COMMAND` or as `python scripts/COMMAND.py` (`stops_as_one_line`), as does an error, in its one
line and exit status 1 (`errors_as_one_line`). Each line starts with the name of
what the user ran, `bertscratch COMMAND` or `scripts/COMMAND.py` (`hf_bertscratch_base.program_name`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hf_bertscratch_base import program_name

DEBUG_ENV = "BERTSCRATCH_DEBUG"  # set (not "0"): every command shows the traceback of an error, not one line
LAUNCHED_ERRORS_ENV = "BERTSCRATCH_LAUNCHED_ERRORS"  # the folder a launched process writes its error line into


class Stopped(KeyboardInterrupt):
    """A run stopped by signal `signum` (SIGINT, as Ctrl-C sends, by default); its message is the line that says
    where it stopped and how a rerun continues, and `status` the exit status it ends with."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.status = 128 + int(signum)


def stop_line(command: str, stopped: BaseException) -> str | None:
    """`bertscratch COMMAND: <where it stopped>` (or the script's name, `program_name`) for a `Stopped` run; None for
    a bare KeyboardInterrupt, which stopped before there was anything to say."""
    return f"{program_name(command)}: {stopped}" if isinstance(stopped, Stopped) else None


def stop_status(stopped: KeyboardInterrupt) -> int:
    """The exit status a stop ends with: its signal's for a `Stopped` run, Ctrl-C's (130) for a bare
    KeyboardInterrupt."""
    return stopped.status if isinstance(stopped, Stopped) else 128 + signal.SIGINT


@contextmanager
def stops_as_one_line(command: str) -> Iterator[None]:
    """Ctrl-C or a training run's stop signal (`Stopped`) in the block ends the command with one line on stderr,
    `stop_line`'s (or "interrupted", for a stop before there was anything to say), and `stop_status`."""
    try:
        yield
    except KeyboardInterrupt as stopped:
        print(stop_line(command, stopped) or f"{program_name(command)}: interrupted", file=sys.stderr)
        raise SystemExit(stop_status(stopped)) from None


@contextmanager
def errors_as_one_line(command: str, debug: bool = False) -> Iterator[None]:
    """An error in the block ends the command with its one line on stderr (`error_line`) and exit status 1, a stop
    with its own (`stops_as_one_line`); with `debug` or `$BERTSCRATCH_DEBUG` the error is raised with its traceback.
    What `bertscratch COMMAND` and `python scripts/COMMAND.py` both end with."""
    try:
        with stops_as_one_line(command):
            yield
    except Exception as error:
        if debug or debugging():
            raise
        print_error(command, error)
        raise SystemExit(1) from None


def debugging() -> bool:
    """Whether `$BERTSCRATCH_DEBUG` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def error_line(command: str, error: BaseException) -> str:
    """`bertscratch COMMAND: error: Type: message` (or the script's name, `program_name`), the message's whitespace
    made single spaces."""
    message = " ".join(str(error).split()) or "(no message)"
    return f"{program_name(command)}: error: {type(error).__name__}: {message}"


def _rank_file(folder: str) -> Path:
    """This process's line in the launcher's folder: rank-N.txt."""
    return Path(folder) / f"rank-{os.environ.get('RANK', '0')}.txt"


def run_launched(command: str, main: Callable[[], None]) -> None:
    """Run `main()` in a process the command launched: an error is written as its one line into the folder of
    `LAUNCHED_ERRORS_ENV` (rank-N.txt) and ends the process with status 1 (with `$BERTSCRATCH_DEBUG`, or without the
    folder, it is raised as it is). A stop (`Stopped`, or Ctrl-C before training) writes its line, if it has one,
    and ends the process with the signal's status, without a traceback."""
    folder = os.environ.get(LAUNCHED_ERRORS_ENV)
    try:
        main()
    except KeyboardInterrupt as stopped:
        if not folder:
            raise
        line = stop_line(command, stopped)
        if line is not None:
            _rank_file(folder).write_text(line + "\n", encoding="utf-8")
        raise SystemExit(stop_status(stopped)) from None
    except Exception as error:
        if not folder or debugging():
            raise
        _rank_file(folder).write_text(error_line(command, error) + "\n", encoding="utf-8")
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
    "Stopped",
    "debugging",
    "error_line",
    "errors_as_one_line",
    "launched_errors",
    "print_error",
    "run_launched",
    "stop_line",
    "stop_status",
    "stops_as_one_line",
]
