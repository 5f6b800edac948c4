"""The `bertscratch` command's dispatcher: each command run by the library module that implements it, imported only
when the command runs, and any error it raises made one line on stderr with exit status 1 (`--debug` or
`$BERTSCRATCH_DEBUG`: the traceback instead).

Training-side commands (`FORWARDED`) hand their arguments unchanged to the module's `main(argv)` (imported only when
used, so one missing or broken module does not take the others down); a command that needs neither torch nor
transformers (`OWN`: `plot`) is run by the front door's own module; every other command is an inspection command,
which `hf_bertscratch.cli` parses and runs. Nothing from the library is imported before a command runs: the module
stands on the standard library, as the rest of the front door does.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

from hf_bertscratch_base import PROG, PROGRAM_ENV
from hf_bertscratch_base.errors import DEBUG_ENV, debugging, errors_as_one_line

from .commands import COMMAND_SUMMARIES, FLAGS_FILE, HELP_PAGES, parse

# Forwarded command -> the module whose main(argv) runs it (each command's one-line help: COMMAND_SUMMARIES).
FORWARDED: dict[str, str] = {
    "pretrain": "hf_bertscratch.pretraining",
    "pretrain-flax": "hf_bertscratch.flax.pretraining",
    "finetune": "hf_bertscratch.finetuning",
    "convert": "hf_bertscratch.convert",
    "push": "hf_bertscratch.hub",
    "benchmark": "hf_bertscratch.benchmark",
    "train-tokenizer": "hf_bertscratch.tokenization",
    "evaluate-onnx": "hf_bertscratch.onnx_evaluation",
}
# Forwarded command -> the module whose build_parser() makes its parser, for the `--help` pages kept in HELP_PAGES.
# pretrain-flax's flags live outside `hf_bertscratch.flax`, which imports JAX (the [flax] extra): its page is kept
# whether or not JAX is installed.
STORED_HELP: dict[str, str] = {
    "pretrain": "hf_bertscratch.pretraining_arguments",
    "pretrain-flax": "hf_bertscratch.flax_pretraining_arguments",
    "finetune": "hf_bertscratch.finetuning_arguments",
    "convert": "hf_bertscratch.convert",
    "push": "hf_bertscratch.hub",
    "benchmark": "hf_bertscratch.benchmark",
    "train-tokenizer": "hf_bertscratch.tokenization",
    "evaluate-onnx": "hf_bertscratch.onnx_evaluation",
}
# Commands that need neither torch nor transformers -> the front door's module whose build_parser() makes its parser
# and whose main(argv) runs it, without the library.
OWN: dict[str, str] = {"plot": "hf_bertscratch_cli.plot"}
# The commands `hf_bertscratch.cli` parses and runs itself (`INSPECTION_COMMANDS` there): every other one.
INSPECTION = tuple(command for command in COMMAND_SUMMARIES if command not in FORWARDED and command not in OWN)
# Every command whose `--help` page HELP_PAGES keeps, and whose flags FLAGS_FILE keeps: all of them.
STORED = (*STORED_HELP, *INSPECTION, *OWN)


def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of a STORED command, as the command runs it."""
    module = STORED_HELP.get(command) or OWN.get(command)
    if module is not None:
        parser = importlib.import_module(module).build_parser()
    else:
        parser = importlib.import_module("hf_bertscratch.cli").command_parser(command)
    parser.prog = f"{PROG} {command}"
    return parser


def help_page(command: str) -> str:
    """`bertscratch COMMAND --help`'s text, from the command's parser (what HELP_PAGES keeps for it)."""
    return _parser(command).format_help()


def command_flags(command: str) -> list[str]:
    """Every flag the command's parser takes (each spelling: `--max_steps`, `--max-steps`), sorted; its parser takes
    no abbreviation, so these are all a command line may give."""
    parser = _parser(command)
    assert not parser.allow_abbrev, "an abbreviation of a flag would pass for a flag the front door does not know"
    return sorted(option for action in parser._actions for option in action.option_strings if option.startswith("--"))


def stored_flags() -> dict:
    """What FLAGS_FILE keeps: the transformers version the flags were read under (training commands take its
    TrainingArguments flags) and each STORED command's flags (`command_flags`)."""
    return {
        "transformers": metadata.version("transformers"),
        "commands": {command: command_flags(command) for command in STORED},
    }


def write_help_pages() -> None:
    """Write the `--help` page of each STORED command into HELP_PAGES, and their flags into FLAGS_FILE (run after
    changing a flag or its help): `--help` then answers, and a mistyped flag is named, without torch."""
    HELP_PAGES.mkdir(exist_ok=True)
    for command in STORED:
        (HELP_PAGES / f"{command}.txt").write_text(help_page(command), encoding="utf-8")
    FLAGS_FILE.write_text(json.dumps(stored_flags(), indent=1) + "\n", encoding="utf-8")


@contextmanager
def _program_name(name: str) -> Iterator[None]:
    """Make argparse in a forwarded module print `bertscratch COMMAND` as its usage name, as a script would its own."""
    saved = sys.argv[0]
    sys.argv[0] = name
    try:
        yield
    finally:
        sys.argv[0] = saved


def run_forwarded(command: str, argv: list[str]) -> None:
    """Import the command's module only now and call its `main(argv)` with the arguments unchanged."""
    module_name = FORWARDED[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise  # a dependency of the module is missing: report that, not the module
        raise RuntimeError(
            f"`{PROG} {command}` is not available in this install ({module_name} is missing)."
        ) from error
    with _program_name(f"{PROG} {command}"):
        module.main(argv)


class CurrentStderrHandler(logging.StreamHandler):
    """A `StreamHandler` writing to whatever `sys.stderr` is when a record is emitted, not to the stream it was made
    with (a process that redirects stderr, as a test running commands in-process does, would leave it a closed one),
    through `tqdm.write`: a progress bar drawn on stderr at that moment (fine-tuning's, whose first evaluation makes
    the first choice) is cleared and drawn again below the line, which would otherwise be glued to the bar's end."""

    @property
    def stream(self):  # noqa: D102
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102
        from tqdm import tqdm  # loaded with transformers by the time a record comes

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 (logging's own policy: a handler that fails reports it, never raises)
            self.handleError(record)


def show_gemm_path() -> None:
    """Print, once per process and on stderr, which CPU GEMM path the model's inference chose
    (`hf_bertscratch.cpu_matmul`), when it is first chosen, whatever the command's own logging shows (the inspection
    commands, which print results only, show it under their --debug)."""
    from hf_bertscratch import cpu_matmul  # torch and transformers load here

    gemm_logger = logging.getLogger(cpu_matmul.__name__)
    if not gemm_logger.handlers:
        handler = CurrentStderrHandler()
        handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
        gemm_logger.addHandler(handler)
    gemm_logger.setLevel(logging.INFO)
    gemm_logger.propagate = False


def _run(command: str, argv: list[str]) -> None:
    if command in OWN:
        importlib.import_module(OWN[command]).main(argv)  # neither torch nor transformers
        return
    show_gemm_path()
    if command in FORWARDED:
        run_forwarded(command, argv)
        return
    from hf_bertscratch.cli import run_inspection_command

    run_inspection_command(command, argv)


@contextmanager
def _debug_environment(debug: bool) -> Iterator[None]:
    """`$BERTSCRATCH_DEBUG` set while the command runs when `debug`, as it was before afterwards."""
    before = os.environ.get(DEBUG_ENV)
    if debug:
        os.environ[DEBUG_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DEBUG_ENV, None)
        else:
            os.environ[DEBUG_ENV] = before


def run_command(command: str, argv: list[str], debug: bool = False) -> None:
    """Run COMMAND with its arguments; any error ends it with one line on stderr and exit status 1 (with `debug`,
    `$BERTSCRATCH_DEBUG` or an inspection command's own --debug: the traceback), a stop with its own line and the
    signal's status (`errors.errors_as_one_line`)."""
    debug = debug or debugging()
    # Inspection commands and the front door's own also take --debug after the command; forwarded ones only before it.
    tracebacks = debug or (command not in FORWARDED and "--debug" in argv)
    # Under `debug`, the processes a command launches show their tracebacks too
    with errors_as_one_line(command, tracebacks), _debug_environment(debug):
        _run(command, argv)


def main(argv: list[str] | None = None) -> None:
    """`bertscratch ARGV` in this process without the front door's checks of the sources (`hf_bertscratch_cli.main`
    makes them, and sets the training commands' OpenMP wait policy, first): parse, then `run_command`. A script's
    name (`PROGRAM_ENV`, inherited or exported) is dropped: this run is `bertscratch COMMAND`, as are the processes
    it launches."""
    os.environ.pop(PROGRAM_ENV, None)
    command, args, debug = parse(argv)
    run_command(command, args, debug=debug)


__all__ = [
    "FORWARDED",
    "INSPECTION",
    "OWN",
    "STORED",
    "STORED_HELP",
    "command_flags",
    "help_page",
    "main",
    "run_command",
    "run_forwarded",
    "show_gemm_path",
    "stored_flags",
    "write_help_pages",
]
