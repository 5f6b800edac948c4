"""Command-line arguments as every entry point of the package reads them: flags, or one `.json` file of them.

`HfArgumentParser` parses both; `parse_args_or_json` is the one place that decides which, so every command
(`bertscratch pretrain`, `finetune`, `convert`, `push_to_hub`, the benchmark, ...) accepts the same two forms and
names a missing file the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser


def parse_args_or_json(
    parser: HfArgumentParser, argv: list[str] | None = None, positional: tuple[str, ...] = ()
) -> tuple[Any, ...]:
    """The parser's dataclasses from `argv` (default `sys.argv[1:]`), or from its one argument ending in `.json`.

    `positional` names the fields that leading arguments without a dash stand for (`convert SOURCE OUTPUT_DIR` is
    `--source SOURCE --output_dir OUTPUT_DIR`). A single `.json` argument that is not a file is an error that names
    it (argparse's usage error, exit code 2).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        path = Path(argv[0])
        if not path.is_file():
            parser.error(f"arguments file {argv[0]!r} does not exist (expected flags, or one .json file of them)")
        return parser.parse_json_file(json_file=path.resolve())
    leading = []
    while argv and not argv[0].startswith("-") and len(leading) < len(positional):
        leading.append(argv.pop(0))
    flags = [item for name, value in zip(positional, leading) for item in (f"--{name}", value)]
    return parser.parse_args_into_dataclasses(args=[*flags, *argv])
