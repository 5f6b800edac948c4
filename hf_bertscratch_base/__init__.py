"""What both the `bertscratch` front door and the library know, written with the standard library alone: the task
table and its column checks (`task_table`), a data file's format and header (`data_files`), where a model comes from
(`model_reference`), a run folder's files (`run_files`), the pip command of an extra (`extras`), the command's name
and the program a run's lines name (`program_name`: `bertscratch COMMAND`, or the script run), and the "did you
mean" of a mistyped name; and a run's loss and evaluation curves (`training_curves`, which imports
matplotlib to draw them), which `bertscratch plot` draws without torch.

It is a package of its own below both: importing `hf_bertscratch` registers the model with transformers' Auto classes,
which imports torch and transformers (several seconds), and the front door (`hf_bertscratch_cli`) answers and checks
a command's arguments before that; the library never imports the front door.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

# The console command's name, which its usage lines and one-line errors start with (`bertscratch COMMAND: error: ...`).
PROG = "bertscratch"
# Set by a script run as `python scripts/NAME.py` (`run_as_script`) to "NAME=scripts/NAME.py": the command the script
# runs and the name the lines of that command start with instead of `bertscratch NAME`, which the processes it launches
# inherit; another command started under it keeps its own name.
PROGRAM_ENV = "BERTSCRATCH_PROGRAM"
# Columns of every command's help page, whatever the terminal: the stored pages (`hf_bertscratch_cli.dispatch`) are
# this wide.
HELP_WIDTH = 100


def program_name(command: str) -> str:
    """What the user ran, which a run's one-line messages start with (its stop, an error of a process it launched):
    `bertscratch COMMAND`, or the script the run was started as (`scripts/finetune.py`, `run_as_script`) where it
    runs this command."""
    script_command, _, script = os.environ.get(PROGRAM_ENV, "").partition("=")
    return script if script and script_command == command else f"{PROG} {command}"


def run_as_script(path: str) -> None:
    """Make this process, and the ones it launches, name the script at `path` (its `__file__`, in scripts/) as
    `scripts/NAME.py` in its lines (`program_name`): the command the user ran, `python scripts/NAME.py`."""
    os.environ[PROGRAM_ENV] = f"{Path(path).stem.replace('_', '-')}=scripts/{Path(path).name}"


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest of `names` to `name`, or "" when none is close."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


__all__ = ["HELP_WIDTH", "PROG", "PROGRAM_ENV", "did_you_mean", "program_name", "run_as_script"]
