"""`bertscratch plot RUN_DIR`: a training run's loss and evaluation curves, drawn from its trainer_state.json by
`hf_bertscratch_base.training_curves` with matplotlib alone. The front door runs it itself: the picture does not
wait the seconds torch and transformers take to import.
"""

from __future__ import annotations

import argparse
import functools

from hf_bertscratch_base import HELP_WIDTH, PROG
from hf_bertscratch_base.flags import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the front door keeps its `--help` page)."""
    parser = OneLineParser(
        prog=f"{PROG} plot",
        description="Draw training and validation loss (and validation accuracy) of a training run from its "
        "trainer_state.json.",
        formatter_class=functools.partial(argparse.HelpFormatter, width=HELP_WIDTH),
        allow_abbrev=False,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The output_dir of a pretraining or fine-tuning run.")
    parser.add_argument("--debug", action="store_true", help="On error, show the full traceback instead of one line.")
    parser.add_argument("--output", help="Image to write (default: RUN_DIR/loss_curve.png).")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Draw the run's curves and say where the image went."""
    args = build_parser().parse_args(argv)
    from hf_bertscratch_base.training_curves import plot_training_curves  # matplotlib loads here

    print(f"Wrote {plot_training_curves(args.run_dir, args.output)}")


__all__ = ["build_parser", "main"]
