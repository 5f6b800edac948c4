"""The `bertscratch` console command's front door: the command list, `--help`, `--version` and a mistyped command
answered at once (nothing but the standard library is imported: `hf_bertscratch_cli.commands`), every command handed
to `hf_bertscratch.cli`.

It is a package of its own because importing `hf_bertscratch` registers the model with transformers' Auto classes,
which imports torch and transformers (several seconds).
"""

from __future__ import annotations

import os
import sys

from .commands import COMMANDS, DEBUG_ENV, PROG, did_you_mean, model_argument, parse, version
from .model_reference import check_model_reference


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `bertscratch` command (argv: the arguments after the program name)."""
    command, args, debug = parse(argv)
    model = model_argument(command, args)
    if model is not None and not (debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")):
        try:
            check_model_reference(model)  # a missing folder or an unreachable Hub: one line, before torch loads
        except OSError as error:
            print(f"{PROG} {command}: error: {type(error).__name__}: {error}", file=sys.stderr)
            raise SystemExit(1) from None
    from hf_bertscratch.cli import run_command  # torch and transformers load here, for a command that needs them

    run_command(command, args, debug=debug)


__all__ = ["COMMANDS", "DEBUG_ENV", "PROG", "did_you_mean", "main", "parse", "version"]
