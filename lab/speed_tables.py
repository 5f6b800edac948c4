"""The speed tables and chart: `python scripts/benchmark.py ... --output_json results/speed/NAME.json` records (the
command, commit, date, machine, versions, load and every figure; `bash lab/record_speed.sh` makes them), rendered as
the speed tables between `<!-- speed-table:start -->` and `<!-- speed-table:end -->` of README.md (the short form)
and docs/speed.md (every table), the other shapes' records (`results/speed-more/`) in docs/speed.md, and drawn as
`docs/images/speed.png` (`lab.make_report` writes them).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .report_format import WORKLOADS, Sources, padding_label, shown_path

SPEED_BLOCK = ("<!-- speed-table:start -->\n", "<!-- speed-table:end -->")
SPEED_RECORDS = "results/speed"
# Benchmark records of the other shapes, sizes, precisions and compiled runs (`lab/record_speed.sh sizes|bf16|
# compiled`): docs/speed.md shows them in full, README's summary and the chart do not.
MORE_SPEED_RECORDS = "results/speed-more"
MORE_SPEED_BLOCK = ("<!-- speed-more:start -->\n", "<!-- speed-more:end -->")
SPEED_CHART = "docs/images/speed.png"
# How README (the short form, `render_speed_summary`) and docs/speed.md (every table) link the chart, and where
# README links for every table.
README_CHART, SPEED_PAGE_CHART = SPEED_CHART, "images/speed.png"
README_DETAILS = "docs/speed.md#the-records"
# What a benchmark record must hold to be rendered (`hf_bertscratch.benchmark.benchmark_record`).
RECORD_KEYS = (
    "command",
    "commit",
    "date",
    "versions",
    "cpu",
    "cores",
    "threads",
    "load_average",
    "arguments",
    "results",
)

# Settings of a case that a record may vary: (result key, how a label shows its value).
SETTINGS = (("preset", "{}"), ("seq_len", "T={}"), ("variant", "{}"), ("precision", "{}"))


@dataclass(frozen=True)
class Contender:
    """What ours is timed against: how the table names it, the package whose version it adds, and the keys of a
    benchmark result holding its tokens/s and ours/its ratios (`<prefix>_median`, `_min`, `_max`)."""

    name: str
    package: str | None
    tokens_key: str
    ratio_prefix: str


CONTENDERS = (
    Contender("transformers' BERT", None, "reference_tokens_per_s", "ratio"),
    Contender("ONNX Runtime", "onnxruntime", "onnxruntime_tokens_per_s", "ours_over_onnxruntime"),
    Contender("ONNX Runtime int8", "onnxruntime", "onnxruntime_int8_tokens_per_s", "ours_over_onnxruntime_int8"),
)


@dataclass(frozen=True)
class SpeedCell:
    """Ours over one contender at one padding: the ratio per repetition (median, min, max) and the median tokens/s."""

    median: float
    low: float
    high: float
    ours_tokens_per_s: float
    their_tokens_per_s: float


@dataclass
class SpeedRow:
    """One row of a speed table: a workload (with the settings its record varies) against one contender, a cell per
    padding fraction."""

    workload: str
    against: str
    cells: dict[float, SpeedCell] = field(default_factory=dict)


@dataclass(frozen=True)
class SpeedRecord:
    """A benchmark record as read: where it is (as the tables name it) and its contents."""

    name: str
    data: dict


# ------------------------------------------------------------------------------------------------------ reading
def read_speed_records(records_dir: Path, root: Path) -> list[SpeedRecord]:
    """Every `*.json` record in `records_dir`, in the order they were measured (their dates, then file names); each
    named by its path under `root` where it is inside.

    Raises:
        ValueError: naming the file, when one is not a benchmark record (missing any of `RECORD_KEYS`).
    """
    records = []
    for path in sorted(records_dir.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in RECORD_KEYS if key not in data] if isinstance(data, dict) else list(RECORD_KEYS)
        if missing:
            raise ValueError(
                f"{path} is not a benchmark record (missing {missing}): write one with `python scripts/benchmark.py "
                "... --output_json`."
            )
        records.append(SpeedRecord(shown_path(path, root), data))
    return sorted(records, key=lambda record: (record.data["date"], record.name))


# ---------------------------------------------------------------------------------------------------- the table
def _varying(results: list[dict]) -> list[str]:
    """The settings (`SETTINGS` keys) that take more than one value across `results`."""
    return [key for key, _ in SETTINGS if len({result[key] for result in results}) > 1]


def _workload_label(result: dict, varying: list[str]) -> str:
    shown = [template.format(result[key]) for key, template in SETTINGS if key in varying]
    return ", ".join([WORKLOADS.get(result["workload"], result["workload"]), *shown])


def against_name(contender: Contender, versions: dict) -> str:
    version = versions.get(contender.package) if contender.package else None
    return f"{contender.name} {version}" if version else contender.name


def speed_rows(record: dict) -> list[SpeedRow]:
    """The rows of a record's speed table, in the order its cases first appear: every (workload, settings) against
    every contender timed on it, with a cell per padding fraction."""
    results = record["results"]
    varying = _varying(results)
    rows: dict[tuple, SpeedRow] = {}
    for result in results:
        for contender in CONTENDERS:
            if result.get(contender.tokens_key) is None:
                continue
            key = (*(result[name] for name, _ in SETTINGS), result["workload"], contender.name)
            row = rows.setdefault(
                key, SpeedRow(_workload_label(result, varying), against_name(contender, record["versions"]))
            )
            prefix = contender.ratio_prefix
            row.cells[result["padding"]] = SpeedCell(
                result[f"{prefix}_median"],
                result[f"{prefix}_min"],
                result[f"{prefix}_max"],
                result["ours_tokens_per_s"],
                result[contender.tokens_key],
            )
    return list(rows.values())


def memory_rows(record: dict) -> list[tuple[str, dict[float, tuple[float, float]]]]:
    """(label, padding -> (ours, reference) peak MiB) of every training case whose memory was measured."""
    results = record["results"]
    varying = _varying(results)
    rows: dict[str, dict[float, tuple[float, float]]] = {}
    for result in results:
        if result.get("ours_peak_mib") is not None:
            label = f"{_workload_label(result, varying)}, peak memory"
            rows.setdefault(label, {})[result["padding"]] = (result["ours_peak_mib"], result["reference_peak_mib"])
    return list(rows.items())


def ratio_cell(cell: SpeedCell) -> str:
    """ "**1.29x** (1.24-1.61)": the median ratio and its min-max over repetitions."""
    return f"**{cell.median:.2f}x** ({cell.low:.2f}-{cell.high:.2f})"


def tokens_cell(cell: SpeedCell) -> str:
    """ "5,220 / 3,815": ours and the contender's median tokens/s."""
    return f"{cell.ours_tokens_per_s:,.0f} / {cell.their_tokens_per_s:,.0f}"


def caption(record: dict) -> str:
    """The settings every case of the record shares, and how the ratios were taken."""
    results = record["results"]
    varying = _varying(results)
    fixed = [template.format(results[0][key]) for key, template in SETTINGS if key not in varying]
    fixed.append(f"B={results[0]['batch_size']}")
    repeats = record["arguments"].get("repeats", "?")
    return (
        f"**{', '.join(fixed)}**: ours/contender throughput, median (min-max) over {repeats} interleaved "
        "repetitions; tokens/s ours / theirs"
    )


def _footer(record: SpeedRecord) -> str:
    """How the record was made: command, machine, versions, date, commit, load, and the largest output differences."""
    data = record.data
    versions = ", ".join(f"{name} {version}" for name, version in data["versions"].items() if version)
    load = {when: f"{values[0]:.1f}" if values else "?" for when, values in data["load_average"].items()}
    threads = f"{data['threads']} thread{'s' if data['threads'] != 1 else ''}"
    lines = [
        f"`{data['command']}` on {data['cpu']} ({data['cores']} cores visible), {threads}; {versions}; "
        f"{data['date'][:10]}, commit {data['commit'] or 'unknown'}; load average (1 min) {load.get('start', '?')} "
        f"at the start, {load.get('end', '?')} at the end. Record: `{record.name}`."
    ]
    differences = {
        "the loss differs from transformers' BERT's by": "loss_max_abs_diff",
        "ONNX Runtime's outputs differ from ours at real positions by": "onnxruntime_max_abs_diff",
    }
    found = []
    for what, key in differences.items():
        values = [result[key] for result in data["results"] if result.get(key) is not None]
        if values:
            found.append(f"{what} at most {max(values):.1e}")
    if found:
        lines.append(f"Same weights, same function: {'; '.join(found)}.")
    lines += _gemm_lines(data)
    return " ".join(lines)


def _gemm_lines(data: dict) -> list[str]:
    """The CPU GEMM path ours ran on and each path's GFLOP/s, for records that name them."""
    lines = []
    path = data.get("gemm_path")
    if path:
        lines.append(f"Our CPU GEMM path: fp32 {path['fp32']}, bf16 {path['bf16']} ({path['reason']}).")
    for rate in data.get("gemm_rates", []):
        shape = " x ".join(f"{size:,}" for size in rate["mnk"])
        figures = ", ".join(f"{name} {value:,.0f}" for name, value in rate["gflops"].items())
        lines.append(f"GFLOP/s, {rate['shape']} GEMM (M x K x N = {shape}): {figures}.")
    return lines


def render_speed_table(record: SpeedRecord) -> str:
    """The markdown speed table of one record: a row per workload and contender, for each padding fraction the
    ratio ours/contender (median, min-max) beside both tokens/s; peak training memory where it was measured; then
    the command, machine, versions, date and commit it came from."""
    paddings = sorted({result["padding"] for result in record.data["results"]})
    header = "| workload | against |" + "".join(f" {padding_label(p)} | tok/s |" for p in paddings)
    lines = [caption(record.data) + ":", "", header, "| --- | --- |" + " ---: | ---: |" * len(paddings)]
    for row in speed_rows(record.data):
        cells = [row.cells.get(padding) for padding in paddings]
        shown = "".join(f" {ratio_cell(c)} | {tokens_cell(c)} |" if c else " | |" for c in cells)
        lines.append(f"| {row.workload} | {row.against} |{shown}")
    for label, memory in memory_rows(record.data):
        shown = "".join(
            f" {memory[p][0]:,.0f} / {memory[p][1]:,.0f} MiB | |" if p in memory else " | |" for p in paddings
        )
        lines.append(f"| {label} | {CONTENDERS[0].name} |{shown}")
    return "\n".join([*lines, "", _footer(record)])


def no_speed_record(records_dir: str) -> str:
    """The speed block while `records_dir` holds no record."""
    return (
        f"No benchmark record in `{records_dir}/` yet: `python scripts/benchmark.py ... --output_json "
        f"{records_dir}/NAME.json` writes one, and `python -m lab.make_report` renders it here.\n"
    )


def render_speed_block(records: list[SpeedRecord], chart: str | None, records_dir: str = SPEED_RECORDS) -> str:
    """What stands between the speed-table markers: every record's table and the speed chart (`chart`: its link
    from the page; None: no chart), or the line saying there is no record yet."""
    if not records:
        return no_speed_record(records_dir)
    parts = [render_speed_table(record) for record in records]
    if chart:
        parts.append(f"![Ours over each contender, from the records above]({chart})")
    return "\n\n".join(parts) + "\n"


def render_speed_summary(records: list[SpeedRecord], chart: str, details: str) -> str:
    """README's short form of the speed block: a row per workload and contender, and for each padding the median
    ratio of every record that timed it, in the order they were measured (so a reader sees at once whether runs
    agree); the records and `details` (the page with every table) named below it, and the chart."""
    if not records:
        return no_speed_record(SPEED_RECORDS)
    paddings = sorted({result["padding"] for record in records for result in record.data["results"]})
    ratios: dict[tuple[str, str], dict[float, list[str]]] = {}
    for record in records:
        for row in speed_rows(record.data):
            cells = ratios.setdefault((row.workload, row.against), {})
            for padding, cell in row.cells.items():
                cells.setdefault(padding, []).append(f"**{cell.median:.2f}x**")
        for label, memory in memory_rows(record.data):
            cells = ratios.setdefault((label, CONTENDERS[0].name), {})
            for padding, (ours, theirs) in memory.items():
                cells.setdefault(padding, []).append(f"{ours:,.0f} / {theirs:,.0f} MiB")
    settings = sorted({caption(record.data).split("**")[1] for record in records})
    lines = [
        f"Ours over each contender ({'; '.join(settings)}): the median over interleaved repetitions of each recorded "
        "run, in the order they ran:",
        "",
        "| workload | against |" + "".join(f" {padding_label(p)} |" for p in paddings),
        "| --- | --- |" + " ---: |" * len(paddings),
    ]
    for (workload, against), cells in ratios.items():
        lines.append(f"| {workload} | {against} |" + "".join(f" {', '.join(cells.get(p, []))} |" for p in paddings))
    folders = sorted({Path(record.name).parent.as_posix() for record in records})
    dates = sorted({record.data["date"][:10] for record in records})
    cpus = sorted({record.data["cpu"] for record in records})
    commits = sorted({(record.data["commit"] or "unknown").removesuffix("-dirty") for record in records})
    lines += [
        "",
        f"Records: {len(records)} runs in {', '.join(f'`{folder}/`' for folder in folders)} ({', '.join(dates)}; "
        f"{', '.join(cpus)}; commits {', '.join(commits)}). Tokens/s, spreads, commands and load: [Speed]({details}).",
    ]
    return "\n".join(lines) + f"\n\n![Ours over each contender, from the records]({chart})\n"


def speed_bars(records: list[SpeedRecord]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """The speed chart's data: a group per table row (workload vs contender), a bar per padding: the median over the
    records of each record's median ours/contender, with the lowest and highest of them (one record: its median and
    its min-max over repetitions)."""
    cells: dict[str, dict[str, list[SpeedCell]]] = {}
    for record in records:
        for row in speed_rows(record.data):
            group = cells.setdefault(f"{row.workload}\nvs {row.against}", {})
            for padding, cell in sorted(row.cells.items()):
                group.setdefault(padding_label(padding), []).append(cell)
    bars: dict[str, dict[str, tuple[float, float, float]]] = {}
    for label, group in cells.items():
        bars[label] = {}
        for padding, runs in group.items():
            if len(runs) == 1:
                bars[label][padding] = (runs[0].median, runs[0].low, runs[0].high)
            else:
                medians = [cell.median for cell in runs]
                bars[label][padding] = (statistics.median(medians), min(medians), max(medians))
    return bars


def draw_speed_chart(records: list[SpeedRecord], output_file: Path) -> Path:
    """`docs/images/speed.png`: ours/contender per workload and padding, median with min-max, a line at 1.0x."""
    from hf_bertscratch.plotting import plot_grouped_bars

    return plot_grouped_bars(
        speed_bars(records),
        output_file,
        "Ours over each contender, tokens/s (median and range over the recorded runs)",
        "ours / contender, tokens/s (right of 1.0: ours faster)",
        value_format="{:.2f}x",
        line_at=1.0,
        line_label="as fast",
    )


# ------------------------------------------------------------------------------------------------ the blocks
def speed_records(sources: Sources) -> list[SpeedRecord]:
    """The benchmark records of `sources.speed_records`, in the order they were measured."""
    return read_speed_records(sources.speed_records, sources.root)


def readme_speed_block(sources: Sources) -> str:
    """README's speed block: the short form, linking docs/speed.md for every table."""
    return render_speed_summary(speed_records(sources), README_CHART, README_DETAILS)


def speed_page_block(sources: Sources) -> str:
    """docs/speed.md's speed block: every record's table and the chart."""
    return render_speed_block(speed_records(sources), SPEED_PAGE_CHART, sources.shown(sources.speed_records))


def more_speed_block(sources: Sources) -> str:
    """docs/speed.md's block of the other shapes, sizes, precisions and compiled runs (no chart)."""
    return render_speed_block(read_speed_records(sources.root / MORE_SPEED_RECORDS, sources.root), None,
                              MORE_SPEED_RECORDS)  # fmt: skip


def speed_chart(sources: Sources) -> Callable[[Path], Path] | None:
    """What draws `SPEED_CHART` from the records, or None while there is none."""
    records = speed_records(sources)
    return (lambda path: draw_speed_chart(records, path)) if records else None
