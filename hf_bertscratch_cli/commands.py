"""The `bertscratch` command's names and top-level parsing, from the standard library alone: the command list,
`--help`, `--version`, "did you mean" for a mistyped name. `hf_bertscratch_cli.dispatch` runs what this parses."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import NoReturn

from hf_bertscratch_base import PROG, did_you_mean
from hf_bertscratch_base.errors import DEBUG_ENV
from hf_bertscratch_base.flags import OneLineParser, flag_suggestion, usage_error_line

DISTRIBUTION = "hf-bertscratch"
# `COMMAND --help` pages kept as text, answered without importing torch (`dispatch.write_help_pages`
# writes them from the commands' parsers; a test checks they match).
HELP_PAGES = Path(__file__).parent / "help"
# Each of those commands' flags, and the transformers version they were read under (`dispatch.write_help_pages`).
FLAGS_FILE = HELP_PAGES / "flags.json"

# Every command, in the order `bertscratch --help` lists them, with its one-line help.
COMMAND_SUMMARIES: dict[str, str] = {
    "pretrain": "Pretrain a BERT by masked language modelling (= scripts/pretrain.py).",
    "pretrain-flax": "Pretrain a masked LM in JAX (needs the [flax] extra).",
    "finetune": "Fine-tune for a task: GLUE, IMDB, CoNLL-2003 NER, SQuAD or your own data (= scripts/finetune.py).",
    "convert": "Convert a checkpoint between transformers' BERT and BertScratch.",
    "push": "Upload a trained model folder to the Hugging Face Hub.",
    "benchmark": "Time BertScratch against transformers' BERT and ONNX Runtime (= scripts/benchmark.py).",
    "train-tokenizer": "Train a WordPiece tokenizer.",
    "evaluate-onnx": "Score a fine-tuned model under PyTorch, ONNX fp32 and ONNX int8 on its task.",
    "fill-mask": "Predict the tokens hidden behind each [MASK] of a text.",
    "classify": "Classify a text or a sentence pair with a fine-tuned classifier or regressor.",
    "tag": "Find the named entities in a text with a fine-tuned token classifier.",
    "answer": "Answer a question from a context with a fine-tuned extractive reader.",
    "embed": "One vector for a text: the model's pooled hidden states.",
    "similarity": "Cosine similarity of two texts' vectors.",
    "attention": "Draw a text's attention weights, every layer and head or one.",
    "export": "Export a model to ONNX (+ config and tokenizer) for ONNX Runtime and Optimum.",
    "plot": "Draw a training run's loss and evaluation curves.",
}

# Commands whose first argument, when it is not a flag, is a model folder or Hub id; any command's
# --model_name_or_path (evaluate-onnx's --model: MODEL_FLAGS) is one too. The front door checks it before torch loads (`model_argument`).
MODEL_FIRST = ("fill-mask", "classify", "tag", "answer", "embed", "similarity", "attention", "export", "convert")
MODEL_FLAG = "--model_name_or_path"
# Commands that name their model with another flag than MODEL_FLAG.
MODEL_FLAGS = {"evaluate-onnx": "--model"}


def flag_value(args: list[str], flag: str) -> str | None:
    """The value `args` give `flag` (`--flag VALUE` or `--flag=VALUE`, the flag also spelt with dashes as
    transformers' parser takes it, `--flag-name`), the last one where it is given twice (as argparse keeps it); None
    where they do not give it."""
    spellings = {flag, "--" + flag[2:].replace("_", "-")}
    value = None
    for index, arg in enumerate(args):
        name, equals, given = arg.partition("=")
        if equals and name in spellings:
            value = given
        elif arg in spellings and index + 1 < len(args):
            value = args[index + 1]
    return value


def model_argument(command: str, args: list[str]) -> str | None:
    """The model folder or Hub id that `command`'s arguments name, or None where they name none."""
    model = flag_value(args, MODEL_FLAGS.get(command, MODEL_FLAG))
    if model is not None:
        return model
    if command in MODEL_FIRST and args and not args[0].startswith("-") and not args[0].endswith(".json"):
        return args[0]
    return None


def check_flags(command: str, args: list[str]) -> None:
    """End with the command's own usage error (exit status 2) when `args` give a flag the command does not take,
    with the closest one, as its parser would after torch loads (`hf_bertscratch.arguments.ArgumentParser`): the
    flag and the values after it, up to the next flag. The flags are FLAGS_FILE's, read where the installed
    transformers is the one they were read under (a training command takes its TrainingArguments flags); otherwise,
    and after `--`, the parser alone judges."""
    try:
        stored = json.loads(FLAGS_FILE.read_text(encoding="utf-8"))
        known = stored["commands"].get(command) if stored["transformers"] == metadata.version("transformers") else None
    except (OSError, ValueError, KeyError, metadata.PackageNotFoundError):
        known = None
    if not known:
        return
    unknown: list[str] = []
    values = False  # whether the arguments since the last flag are an unknown flag's values
    for arg in args[: args.index("--") if "--" in args else len(args)]:
        if arg.startswith("--"):
            values = arg.split("=")[0] not in known
            if values:
                unknown.append(arg)
        elif values and arg != "-h":
            unknown.append(arg)
    if not unknown:
        return
    prog = f"{PROG} {command}"
    message = f"unrecognized arguments: {' '.join(unknown)}{flag_suggestion(unknown[0], known)}"
    sys.stderr.write(usage_error_line(prog, message))
    raise SystemExit(2)


def version() -> str:
    """The installed distribution's version."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Parser(OneLineParser):
    def error(self, message: str) -> NoReturn:
        if message.startswith("argument COMMAND: invalid choice:"):
            given = message.split("'")[1]
            self.exit(
                2, usage_error_line(self.prog, f"unknown command {given!r}{did_you_mean(given, COMMAND_SUMMARIES)}")
            )
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: global flags, then COMMAND and the command's own arguments (left unparsed)."""
    listing = "\n".join(f"  {name:<16} {help}" for name, help in COMMAND_SUMMARIES.items())
    parser = _Parser(
        prog=PROG,
        description="BERT from scratch: pretrain, fine-tune, inspect and share models.",
        epilog=f"commands:\n{listing}\n\nRun `{PROG} COMMAND --help` for a command's arguments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help=f"Show tracebacks on error (or set {DEBUG_ENV}=1).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument(
        "command", metavar="COMMAND", choices=list(COMMAND_SUMMARIES), help="One of the commands below."
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="The command's arguments.")
    return parser


def parse(argv: list[str] | None = None) -> tuple[str, list[str], bool]:
    """(COMMAND, its arguments, --debug) from the command line; `--help`, `--version`, no arguments, a mistyped
    command and `COMMAND --help` of a command with a stored page end here (exit 0 or 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        raise SystemExit(2)
    args = parser.parse_args(argv)
    page = HELP_PAGES / f"{args.command}.txt"
    if args.args in (["--help"], ["-h"]) and page.is_file():
        sys.stdout.write(page.read_text(encoding="utf-8"))
        raise SystemExit(0)
    return args.command, args.args, args.debug
