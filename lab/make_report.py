"""Tables and charts rendered from the records committed under `results/`, so that no measurement is typed by hand.

Each generated block of README.md and docs/ stands between a start and an end marker (`<!-- speed-table:start -->`
... `<!-- speed-table:end -->`) and is rendered from its records by a renderer living beside the lab script that
makes them (`BLOCKS`, listed below); each chart is drawn the same way (`CHARTS`). The benchmark records the speed
tables and the headline read are `results/speed/*.json` (`python scripts/benchmark.py ... --output_json
results/speed/NAME.json`: the command, commit, date, machine, versions, load and every figure), or those of
`--records_dir`.

`python -m lab.make_report` writes them all; with `--check` it writes nothing and exits non-zero, naming each file
whose block differs from what the records give (charts are checked to exist, not compared).

A new family of records is one `Block` here and its renderer beside the script that writes the records.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.run_folder import write_text_atomically

from . import (
    compare_onnx_graphs,
    compare_pretraining,
    diagnose_pairs,
    diagnose_position_init,
    diagnose_single,
    headline,
    int8_table,
    profile_decode,
    record_quick_start,
    results_table,
    speed_tables,
    sweep_pretraining,
)
from .report_format import Sources, shown_path
from .results_table import readme_block, replace_block

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Block:
    """A generated block: the page holding it (under the repository), its start and end markers, and its renderer:
    what stands between the markers given the records, or None to leave the block as it is (no record yet)."""

    page: str
    markers: tuple[str, str]
    render: Callable[[Sources], str | None]


@dataclass(frozen=True)
class Chart:
    """A generated chart: where it goes (under the repository), and what draws it there from the records (None while
    there is no record to draw)."""

    path: str
    drawer: Callable[[Sources], Callable[[Path], Path] | None]


BLOCKS = (
    Block("README.md", speed_tables.SPEED_BLOCK, speed_tables.readme_speed_block),
    Block("docs/speed.md", speed_tables.SPEED_BLOCK, speed_tables.speed_page_block),
    Block("README.md", results_table.README_BLOCK, results_table.readme_task_table_block),
    Block("docs/results.md", compare_pretraining.README_BLOCK, compare_pretraining.comparison_block),
    Block("docs/results.md", results_table.QUICK_START_TASKS_BLOCK, results_table.quick_start_tasks_block),
    Block("docs/onnx.md", compare_onnx_graphs.GRAPH_BLOCK, compare_onnx_graphs.graph_block),
    Block("README.md", record_quick_start.QUICK_START_BLOCK, record_quick_start.readme_quick_start_block),
    Block("docs/pretraining.md", record_quick_start.QUICK_START_BLOCK, record_quick_start.quick_start_block),
    Block("docs/onnx.md", int8_table.INT8_BLOCK, int8_table.int8_block),
    Block("docs/speed.md", speed_tables.MORE_SPEED_BLOCK, speed_tables.more_speed_block),
    Block("docs/speed.md", profile_decode.DECODER_BLOCK, profile_decode.decoder_block),
    Block("docs/design.md", diagnose_position_init.POSITION_BLOCK, diagnose_position_init.position_block),
    Block("docs/lab.md", sweep_pretraining.SWEEP_BLOCK, sweep_pretraining.sweep_block),
    Block("README.md", diagnose_pairs.PAIRS_BLOCK, diagnose_pairs.readme_pairs_block),
    Block("docs/results.md", diagnose_pairs.PAIRS_BLOCK, diagnose_pairs.pairs_block),
    Block("docs/fine-tuning.md", diagnose_pairs.PAIRS_DIAGNOSIS_BLOCK, diagnose_pairs.pairs_diagnosis_block),
    Block("docs/fine-tuning.md", diagnose_single.SINGLE_DIAGNOSIS_BLOCK, diagnose_single.single_block),
    Block("README.md", headline.HEADLINE_BLOCK, headline.readme_headline_block),
    Block("docs/index.md", headline.HEADLINE_TABLE_BLOCK, headline.home_table_block),
)
CHARTS = (
    Chart(speed_tables.SPEED_CHART, speed_tables.speed_chart),
    Chart(results_table.TASK_TABLE_CHART, results_table.task_table_chart),
)


# ------------------------------------------------------------------------------------------- pages and checking
def sources(root: str | Path = ".", records_dir: str | Path | None = None) -> Sources:
    """The records under `root`, the benchmark records in `records_dir` (default `root`/results/speed)."""
    root = Path(root)
    return Sources(root, Path(records_dir) if records_dir is not None else root / speed_tables.SPEED_RECORDS)


def rendered_blocks(found: Sources) -> list[tuple[Block, str]]:
    """Every block of `BLOCKS` with what the records give, but those with nothing to render yet."""
    rendered = [(block, block.render(found)) for block in BLOCKS]
    return [(block, text) for block, text in rendered if text is not None]


def expected_pages(found: Sources) -> dict[Path, str]:
    """Each page holding a generated block with its blocks rendered from the records.

    Raises:
        ValueError: naming the page, when it lacks a block.
    """
    pages: dict[Path, str] = {}
    for block, rendered in rendered_blocks(found):
        path = found.root / block.page
        text = pages.get(path) or path.read_text(encoding="utf-8")
        try:
            pages[path] = replace_block(text, rendered, block.markers)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
    return pages


def charts(found: Sources) -> dict[Path, Callable[[Path], Path]]:
    """The charts the records give: path -> the function drawing it there."""
    drawn = {found.root / chart.path: chart.drawer(found) for chart in CHARTS}
    return {path: draw for path, draw in drawn.items() if draw is not None}


def check_report(root: str | Path = ".", records_dir: str | Path | None = None) -> list[str]:
    """What differs from the records: each page whose generated block is missing or not what the records give, each
    chart missing. An empty list: everything matches."""
    found = sources(root, records_dir)
    problems = []
    for block, rendered in rendered_blocks(found):
        text = (found.root / block.page).read_text(encoding="utf-8")
        start, end = block.markers
        if start not in text or end not in text:
            problems.append(f"{block.page}: no {start.strip()} ... {end} block")
        elif readme_block(text, block.markers) != rendered:
            problems.append(f"{block.page}: the {start.strip()} block differs from what the records give")
    problems += [f"{shown_path(path, found.root)}: missing" for path in charts(found) if not path.is_file()]
    return problems


def write_report(root: str | Path = ".", records_dir: str | Path | None = None, draw: bool = True) -> list[Path]:
    """Render every generated block from the records, writing each page that changes through a temporary file renamed
    into place, and draw the charts; returns the files written."""
    found = sources(root, records_dir)
    written = []
    for path, text in expected_pages(found).items():
        if path.read_text(encoding="utf-8") != text:
            write_text_atomically(path, text)
            written.append(path)
    if draw:
        written += [draw_chart(path) for path, draw_chart in charts(found).items()]
    return written


# ---------------------------------------------------------------------------------------------------------- main
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """`--help` with each option's default, and the description's list as written."""


def _description() -> str:
    """The module's docstring and every block and chart with its renderer."""
    lines = [f"- {b.page}: {b.markers[0].strip()} ({b.render.__module__}.{b.render.__name__})" for b in BLOCKS]
    lines += [f"- {c.path} ({c.drawer.__module__}.{c.drawer.__name__})" for c in CHARTS]
    return f"{__doc__}\nThe blocks and charts:\n\n" + "\n".join(lines)


@dataclass
class ReportArguments:
    """Where the records are, and whether to write the report or check it."""

    root: str = field(
        default=".", metadata={"help": "The repository: README.md, docs/ and results/ are read and written under it."}
    )
    records_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of benchmark records (*.json, as --output_json writes them); default "
            f"ROOT/{speed_tables.SPEED_RECORDS}."
        },
    )
    check: bool = field(
        default=False,
        metadata={
            "help": "Write nothing; exit 1, naming each file, when a page's generated block differs from what the "
            "records give or a chart is missing."
        },
    )
    charts: bool = field(
        default=True, metadata={"help": f"Draw the charts ({', '.join(chart.path for chart in CHARTS)})."}
    )


def main(argv: list[str] | None = None) -> None:
    """Write the report from the records, or with --check, exit 1 when the committed pages differ from them."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    parser = ArgumentParser(ReportArguments, description=_description(), formatter_class=_HelpFormatter)
    (args,) = parse_args_or_json(parser, argv)
    if args.check:
        problems = check_report(args.root, args.records_dir)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("Run `python -m lab.make_report` to render them from the records.", file=sys.stderr)
            raise SystemExit(1)
        print("The generated tables match the records.")
        return
    for path in write_report(args.root, args.records_dir, args.charts):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
