"""The `bertscratch` command's names and top-level parsing, from the standard library alone: the command list,
`--help`, `--version`, "did you mean" for a mistyped name. `hf_bertscratch.cli` runs what this parses."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable
from importlib import metadata
from typing import NoReturn

PROG = "bertscratch"
DISTRIBUTION = "hf-bertscratch"
DEBUG_ENV = "BERTSCRATCH_DEBUG"

# Every command, in the order `bertscratch --help` lists them, with its one-line help.
COMMANDS: dict[str, str] = {
    "pretrain": "Pretrain a BERT by masked language modelling (= scripts/pretrain.py).",
    "pretrain-flax": 'Pretrain a masked LM in JAX (needs "hf-bertscratch[flax]").',
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


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest of `names` to `name`, or "" when none is close."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def version() -> str:
    """The installed distribution's version."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        hint = ""
        if message.startswith("argument COMMAND: invalid choice:"):
            given = message.split("'")[1]
            message = f"unknown command {given!r}"
            hint = did_you_mean(given, COMMANDS)
        self.exit(2, f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: global flags, then COMMAND and the command's own arguments (left unparsed)."""
    listing = "\n".join(f"  {name:<16} {help}" for name, help in COMMANDS.items())
    parser = _Parser(
        prog=PROG,
        description="BERT from scratch: pretrain, fine-tune, inspect and share models.",
        epilog=f"commands:\n{listing}\n\nRun `{PROG} COMMAND --help` for a command's arguments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help=f"Show tracebacks on error (or set {DEBUG_ENV}=1).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("command", metavar="COMMAND", choices=list(COMMANDS), help="One of the commands below.")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="The command's arguments.")
    return parser


def parse(argv: list[str] | None = None) -> tuple[str, list[str], bool]:
    """(COMMAND, its arguments, --debug) from the command line; `--help`, `--version`, no arguments and a mistyped
    command end here (exit 0 or 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        raise SystemExit(2)
    args = parser.parse_args(argv)
    return args.command, args.args, args.debug
