"""Tables and charts rendered from the records committed under `results/`, so that no measurement is typed by hand.

- `results/speed/*.json`, benchmark records (`python scripts/benchmark.py ... --output_json results/speed/NAME.json`:
  the command, commit, date, machine, versions, load and every figure): rendered as the speed tables between
  `<!-- speed-table:start -->` and `<!-- speed-table:end -->` in README.md and docs/speed.md, and drawn as
  `docs/images/speed.png`;
- `results/task_table.json` (`python -m lab.results_table ... --record`): README's task table (between
  `<!-- task-table:start -->` and `<!-- task-table:end -->`), drawn as `docs/images/task_table.png`;
- `results/pretraining_comparison.json` (`python -m lab.compare_pretraining ... --record`): the comparison of
  pretraining recipes in docs/results.md (between `<!-- pretraining-comparison:start -->` and
  `<!-- pretraining-comparison:end -->`).
- `results/quick-start-tasks.json` (`QUICK_START=1 bash lab/reproduce_results.sh`, then `results_table.py ... --record`):
  the task table of README's quick start's own model, in docs/results.md (`<!-- quick-start-tasks:start -->`).

- the quick-start, speed and task-table records together: README's opening paragraph (between `<!-- headline:start -->`
  and `<!-- headline:end -->`) and the figures table of docs/index.md (`<!-- headline-table:start -->`).

`python -m lab.make_report` writes them all; with `--check` it writes nothing and exits non-zero, naming each file
whose block differs from what the records give (charts are checked to exist, not compared).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.hardware import short_cpu_name
from hf_bertscratch.run_folder import write_text_atomically

from .results_table import readme_block, replace_block

logger = logging.getLogger(__name__)

SPEED_BLOCK = ("<!-- speed-table:start -->\n", "<!-- speed-table:end -->")
SPEED_RECORDS = "results/speed"
# Benchmark records of the other shapes, sizes, precisions and compiled runs (`lab/record_speed.sh sizes|bf16|
# compiled`): docs/speed.md shows them in full, README's summary and the chart do not.
MORE_SPEED_RECORDS = "results/speed-more"
MORE_SPEED_BLOCK = ("<!-- speed-more:start -->\n", "<!-- speed-more:end -->")
MORE_SPEED_PAGE = "docs/speed.md"
SPEED_CHART = "docs/images/speed.png"
TASK_TABLE_RECORD = "results/task_table.json"
TASK_BASELINES_RECORD = "results/task_baselines.json"
COMPARISON_PAGE = "docs/results.md"  # the pretraining recipes compared at equal time  # `python -m lab.task_baselines`: the no-learning column
TASK_TABLE_CHART = "docs/images/task_table.png"
# The task table of README's quick start's own model (WikiText-2, 8.5 minutes) against random weights.
QUICK_START_TASKS_RECORD = "results/quick-start-tasks.json"
QUICK_START_TASKS_COMMAND = (
    'QUICK_START=1 TASKS="imdb sst2 cola mrpc stsb rte conll2003" bash lab/reproduce_results.sh runs/quick-start-tasks'
)
QUICK_START_TASKS_PAGE = "docs/results.md"
QUICK_START_TASKS_BLOCK = ("<!-- quick-start-tasks:start -->\n", "<!-- quick-start-tasks:end -->")
COMPARISON_RECORD = "results/pretraining_comparison.json"
QUICK_START_RECORDS = "results/quick-start"
QUICK_START_BLOCK = ("<!-- quick-start:start -->\n", "<!-- quick-start:end -->")
QUICK_START_PAGES = ("README.md", "docs/pretraining.md")
QUICK_START_FULL_TABLE = "docs/pretraining.md#what-it-measured"  # where README links for every seed's run
DECODER_RECORDS = "results/decoder"
DECODER_BLOCK = ("<!-- decoder-profile:start -->\n", "<!-- decoder-profile:end -->")
DECODER_PAGE = "docs/speed.md"
POSITION_RECORDS = "results/position-init"
POSITION_BLOCK = ("<!-- position-init:start -->\n", "<!-- position-init:end -->")
POSITION_PAGE = "docs/design.md"
# The steps at which the position-start table shows each run's probe.
POSITION_STEPS = (600, 1000)
POSITION_SEQ = 128  # the block length of the rows that do not name theirs
SWEEP_RECORDS = "results/sweeps"
SWEEP_BLOCK = ("<!-- sweeps:start -->\n", "<!-- sweeps:end -->")
SWEEP_PAGE = "docs/lab.md"
GRAPH_RECORDS = "results/onnx-graphs"
GRAPH_BLOCK = ("<!-- onnx-graphs:start -->\n", "<!-- onnx-graphs:end -->")
GRAPH_PAGE = "docs/onnx.md"
INT8_RECORDS = "results/int8"
INT8_BLOCK = ("<!-- int8-table:start -->\n", "<!-- int8-table:end -->")
# The headline figures: README's opening paragraph and the documentation home page's table.
PAIRS_RECORDS = "results/pairs"  # `bash lab/record_pairs.sh`: README's pairs table and headline
PAIRS_DIAGNOSIS_RECORDS = "results/pairs-diagnosis"  # the diagnosis behind the defaults
SINGLE_DIAGNOSIS_RECORDS = "results/single-diagnosis"  # `bash lab/record_single.sh`: IMDB and SST-2
SINGLE_DIAGNOSIS_BLOCK = ("<!-- single-diagnosis:start -->\n", "<!-- single-diagnosis:end -->")
PAIRS_BLOCK = ("<!-- pairs:start -->\n", "<!-- pairs:end -->")
PAIRS_DIAGNOSIS_BLOCK = ("<!-- pairs-diagnosis:start -->\n", "<!-- pairs-diagnosis:end -->")
PAIRS_HEADLINE_RECORD = "stsb.json"  # the record the headline's similarity sentence reads
# The variants the headline names: the cross-encoder with the task's defaults, the bi-encoder.
PAIRS_HEADLINE_VARIANTS = (("defaults", "fine-tuned with its defaults"), ("embedding", "as a bi-encoder"))
HEADLINE_BLOCK = ("<!-- headline:start -->\n", "<!-- headline:end -->")
HEADLINE_TABLE_BLOCK = ("<!-- headline-table:start -->\n", "<!-- headline-table:end -->")
HEADLINE_TABLE_PAGE = "docs/index.md"
# The task-table rows the headline names: (task, metric key, how the headline calls it), token-level NER first.
HEADLINE_TASKS = (
    ("conll2003", "test_overall_f1", "CoNLL-2003 entity F1"),
    ("sst2", "eval_accuracy", "SST-2"),
    ("imdb", "test_accuracy", "IMDB"),
    ("cola", "eval_matthews_correlation", "CoLA Matthews"),
    ("mrpc", "eval_f1", "MRPC"),
    ("stsb", "eval_spearmanr", "STS-B"),
    ("rte", "eval_accuracy", "RTE"),
)
# The pages holding the int8 accuracy block.
INT8_PAGES = ("docs/onnx.md",)
# The pages holding the speed block (paths under the repository) and how each links the speed chart.
SPEED_PAGES = {"README.md": SPEED_CHART, "docs/speed.md": "images/speed.png"}
# The pages that show the short form (`render_speed_summary`), and where each links for every table.
SUMMARY_PAGES = {"README.md": "docs/speed.md#the-records"}
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

WORKLOADS = {
    "train": "MLM training step",
    "infer": "inference, full MLM logits",
    "encode": "inference, encoder only",
    "fill-mask": "fill-mask, one mask per row",
}
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
        records.append(SpeedRecord(_shown(path, root), data))
    return sorted(records, key=lambda record: (record.data["date"], record.name))


def _shown(path: Path, root: Path) -> str:
    """`path` under `root` (as the repository names it) where it is inside, else as given."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# ---------------------------------------------------------------------------------------------------- the table
def _varying(results: list[dict]) -> list[str]:
    """The settings (`SETTINGS` keys) that take more than one value across `results`."""
    return [key for key, _ in SETTINGS if len({result[key] for result in results}) > 1]


def _workload_label(result: dict, varying: list[str]) -> str:
    shown = [template.format(result[key]) for key, template in SETTINGS if key in varying]
    return ", ".join([WORKLOADS.get(result["workload"], result["workload"]), *shown])


def _against(contender: Contender, versions: dict) -> str:
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
                key, SpeedRow(_workload_label(result, varying), _against(contender, record["versions"]))
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


def _memory_rows(record: dict) -> list[tuple[str, dict[float, tuple[float, float]]]]:
    """(label, padding -> (ours, reference) peak MiB) of every training case whose memory was measured."""
    results = record["results"]
    varying = _varying(results)
    rows: dict[str, dict[float, tuple[float, float]]] = {}
    for result in results:
        if result.get("ours_peak_mib") is not None:
            label = f"{_workload_label(result, varying)}, peak memory"
            rows.setdefault(label, {})[result["padding"]] = (result["ours_peak_mib"], result["reference_peak_mib"])
    return list(rows.items())


def padding_label(padding: float) -> str:
    """ "no padding", or "30% padding"."""
    return "no padding" if padding == 0 else f"{padding:.0%} padding"


def ratio_cell(cell: SpeedCell) -> str:
    """ "**1.29x** (1.24-1.61)": the median ratio and its min-max over repetitions."""
    return f"**{cell.median:.2f}x** ({cell.low:.2f}-{cell.high:.2f})"


def tokens_cell(cell: SpeedCell) -> str:
    """ "5,220 / 3,815": ours and the contender's median tokens/s."""
    return f"{cell.ours_tokens_per_s:,.0f} / {cell.their_tokens_per_s:,.0f}"


def _caption(record: dict) -> str:
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
    lines = [_caption(record.data) + ":", "", header, "| --- | --- |" + " ---: | ---: |" * len(paddings)]
    for row in speed_rows(record.data):
        cells = [row.cells.get(padding) for padding in paddings]
        shown = "".join(f" {ratio_cell(c)} | {tokens_cell(c)} |" if c else " | |" for c in cells)
        lines.append(f"| {row.workload} | {row.against} |{shown}")
    for label, memory in _memory_rows(record.data):
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
        for label, memory in _memory_rows(record.data):
            cells = ratios.setdefault((label, CONTENDERS[0].name), {})
            for padding, (ours, theirs) in memory.items():
                cells.setdefault(padding, []).append(f"{ours:,.0f} / {theirs:,.0f} MiB")
    settings = sorted({_caption(record.data).split("**")[1] for record in records})
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


def render_int8_table(records: dict[str, dict], commands: bool = True) -> str:
    """int8's and bf16's accuracy cost from `bertscratch evaluate-onnx` records (file name -> record): per task and
    split, the main metric from PyTorch, PyTorch under bf16 autocast (records made on a CPU with native bf16), the fp32
    and the int8 ONNX exports, bf16 and int8 minus PyTorch, and how many predictions each shares with PyTorch; then the
    records (and with `commands`, the commands that made them)."""
    from hf_bertscratch.tasks import TASKS

    from .results_table import ROWS

    if not records:
        return (
            f"No record in `{INT8_RECORDS}/` yet: `bertscratch evaluate-onnx ... --output_dir DIR` writes "
            "`DIR/evaluation.json`, the record to keep there.\n"
        )
    lines = [
        "| task, split | metric | PyTorch | PyTorch bf16 | ONNX fp32 | ONNX int8 | bf16 - PyTorch | int8 - PyTorch | "
        "predictions agreeing with PyTorch (bf16 / int8) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, record in records.items():
        task, metric = record["task"], record["main_metric"]
        title = next((label.split(" ")[0] for t, _, label in ROWS if t == task), task)
        label = TASKS[task].metric_label if task in TASKS else metric
        unit = " of tags" if record["task_type"] == "token-classification" else ""
        for split in record["splits"].values():
            scores = {backend["backend"]: backend for backend in split["backends"]}
            pytorch = 100 * scores["pytorch"]["metrics"][metric]
            cells = [f"{title} {split['dataset_split']} ({split['examples']:,})", label, f"{pytorch:.2f}"]
            values = {
                b: 100 * scores[b]["metrics"][metric] for b in ("pytorch bf16", "onnx fp32", "onnx int8") if b in scores
            }
            cells += [f"{values[b]:.2f}" if b in values else "" for b in ("pytorch bf16", "onnx fp32", "onnx int8")]
            cells += [f"{values[b] - pytorch:+.2f}" if b in values else "" for b in ("pytorch bf16", "onnx int8")]
            agreeing = [f"{100 * scores[b]['agreement']:.2f}%" for b in ("pytorch bf16", "onnx int8") if b in scores]
            cells.append(" / ".join(agreeing) + unit)
            lines.append(f"| {' | '.join(cells)} |")
    sources = ", ".join(f"`{INT8_RECORDS}/{name}`" for name in records)
    made = "; ".join(f"`{record['command']}`" for record in records.values())
    machines = sorted({record["cpu"] for record in records.values()})
    note = f"Records: {sources} ({', '.join(machines)})" + (f", made by {made}." if commands else ".")
    return "\n".join([*lines, "", note]) + "\n"


def render_quick_start_table(records: dict[str, dict]) -> str:
    """README's quick-start table from `lab/record_quick_start.py` records (file name -> record): per CPU, process
    count and seed the held-out masked-token accuracy and perplexity, training tokens and tokens/s, steps, end-to-end
    time, peak memory and the fill-mask demo's top answers; then where each ran."""
    if not records:
        return f"No record in `{QUICK_START_RECORDS}/` yet: `python -m lab.record_quick_start` writes one.\n"
    ordered = sorted(
        records.items(),
        key=lambda item: (
            item[1]["cpu"], item[1].get("one_core", False), item[1].get("precision") or "", item[1]["seed"]
        ),
    )  # fmt: skip
    texts = {r["fill_mask"]["text"] for _, r in ordered if "fill_mask" in r}
    demo = f'top 5 for "{texts.pop()}"' if len(texts) == 1 else "fill-mask demo"
    lines = [
        "| CPU | run | seed | masked-token accuracy | perplexity | training tokens | tokens/s | steps | end to end | "
        f"peak memory | {demo} |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for _, record in ordered:
        results = record["results"]
        minutes, seconds = divmod(round(record["end_to_end_seconds"]), 60)
        run = "one core, 1 process" if record.get("one_core") else f"{results.get('world_size', 1)} processes"
        run += f", --precision {record['precision']}" if record.get("precision") else ""
        answers = ", ".join(record["fill_mask"]["top"]) if "fill_mask" in record else "-"
        lines.append(
            f"| {short_cpu_name(record['cpu'])} | {run} | {record['seed']} | **{100 * results['eval_accuracy']:.1f}%** | "
            f"{results['eval_perplexity']:.1f} | {results['train_tokens'] / 1e6:.1f}M | "
            f"{results['train_tokens_per_second']:,.0f} | {record['steps']:,} | {minutes} min {seconds:02d} s | "
            f"{record['peak_memory_mib'] / 1024:.1f} GB | {answers} |"
        )
    ran = "; ".join(
        f"`{file}`: {r['date'][:10]}, commit {r['commit'] or 'unknown'}, load average (1 min) "
        f"{r['load_average']['start'][0]:.1f} at the start"
        for file, r in ordered
    )
    return "\n".join([*lines, "", f"`python -m lab.record_quick_start --seed S [--one_core] [--precision P]` ({ran}); records in "
                       f"`{QUICK_START_RECORDS}/`."]) + "\n"  # fmt: skip


def render_decoder_table(records: dict[str, dict]) -> str:
    """`lab/profile_decode.py --output_json` records (file name -> record) as one table: a row per decoding
    variant, a column per record (its CPU and threads, grouped by CPU), each cell the median milliseconds; then each
    record's shape, command, machine, load, date and commit."""
    if not records:
        return f"No record in `{DECODER_RECORDS}/` yet: `bash lab/record_speed.sh decoder` writes them.\n"
    records = dict(sorted(records.items(), key=lambda item: (item[1]["cpu"], item[1]["arguments"]["num_threads"])))
    columns = []
    for record in records.values():
        threads = record["arguments"]["num_threads"]
        columns.append(f"{record['cpu']}, {threads} thread{'s' if threads != 1 else ''}")
    names = list(dict.fromkeys(name for record in records.values() for name in record["milliseconds"]))
    lines = ["| decoding | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for name in names:
        cells = [f"{r['milliseconds'][name]:,.1f} ms" if name in r["milliseconds"] else "" for r in records.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    made = "; ".join(
        f"`{DECODER_RECORDS}/{file}`: {r['arguments']['rows']:,} x {r['arguments']['hidden_size']} -> "
        f"{r['arguments']['vocab_size']:,}, median of {r['arguments']['repeats']}, `{r['command']}` on {r['cpu']}, "
        f"load average (1 min) {r['load_average']['start'][0]:.1f}, {r['date'][:10]}, commit {r['commit'] or 'unknown'}"
        for file, r in records.items()
    )
    return "\n".join([*lines, "", f"Records: {made}."]) + "\n"


def render_position_table(records: dict[str, dict]) -> str:
    """`lab/diagnose_position_init.py --output_json` records (file name -> record) as docs/design.md's table: per
    start of the position embeddings, layer 1's neighbour attention and the held-out MLM loss at `POSITION_STEPS`
    (blank where a run stopped earlier), then the records and how they were made."""
    if not records:
        return f"No record in `{POSITION_RECORDS}/` yet: `bash lab/record_position_init.sh` writes them.\n"
    steps = [f"step {step:,}" for step in POSITION_STEPS]
    lines = [
        "| position embeddings start as | flags | "
        + " | ".join(f"neighbour attention, {s} | held-out MLM loss, {s}" for s in steps)
        + " |",
        "| --- | --- |" + " ---: | ---: |" * len(steps),
    ]
    order = sorted(
        records.items(),
        key=lambda item: tuple(item[1]["arguments"][key] for key in ("seq", "posinit", "posscale")),
    )
    for _, record in order:
        arguments = record["arguments"]
        std = arguments["posscale"] * arguments["init"]
        sinusoid = arguments["posinit"] == "sin"
        what = f"sinusoid, std {std:g}" if sinusoid else f"N(0, {std:g})"
        if not sinusoid and round(std, 6) == 0.02:
            what += ", BERT's init"
        flags = f"--posinit {arguments['posinit']} --posscale {arguments['posscale']:g}"
        if arguments["seq"] != POSITION_SEQ:  # the table's block length is the pretraining's
            what, flags = f"{what}, on {arguments['seq']}-token blocks", f"{flags} --seq {arguments['seq']}"
        flags = f"`{flags}`"
        probes = {probe["step"]: probe for probe in record["probes"]}
        cells = []
        for step in POSITION_STEPS:
            probe = probes.get(step)
            cells += [f"{probe['nb'][0]:.3f}", f"{probe['heldloss']:.2f}"] if probe else ["", ""]
        lines.append(f"| {what} | {flags} | " + " | ".join(cells) + " |")
    made = sorted({(r["cpu"], r["date"][:10], r["commit"] or "unknown") for r in records.values()})
    where = "; ".join(f"{cpu}, {date}, commit {commit}" for cpu, date, commit in made)
    # each run's command up to its start of the position embeddings (the rest: --posinit P --posscale S ...)
    commands = " or ".join(f"`{c} --posinit P --posscale S ...`" for c in
                           sorted({r["command"].split(" --posinit")[0] for r in records.values()}))  # fmt: skip
    return "\n".join(
        [*lines, "", f"Records: `{POSITION_RECORDS}/` ({where}), made by `bash lab/record_position_init.sh`, "
         f"each {commands}."]
    ) + "\n"  # fmt: skip


def render_sweep_tables(records: dict[str, dict]) -> str:
    """`lab/sweep_pretraining.py --record` records (file name -> record), oldest first: each sweep's table
    (`sweep.render_table`) and the command, machine, load, date and commit that made it."""
    from .sweep_pretraining import render_table

    if not records:
        return f"No record in `{SWEEP_RECORDS}/` yet: `python -m lab.sweep_pretraining ... --record` writes one.\n"
    parts = []
    for name, record in sorted(records.items(), key=lambda item: (item[1]["date"], item[0])):
        table = render_table(record["rows"], record["length"], record.get("unmeasured", ()))
        if "transcribed" in record:  # runs from before sweeps kept records: their commands, one per commit
            commands = "\n".join(record["commands"])
            footer = (
                f"{record['transcribed']} {record['cpu']} ({record['cores']} cores), {record['date'][:10]}; load not "
                f"recorded. {record['notes']}\n\n```bash\n{commands}\n```"
            )
        else:
            load = record["load_average"]
            footer = (
                f"`{record['command']}` on {record['cpu']} ({record['cores']} cores), {record['date'][:10]}, commit "
                f"{record['commit'] or 'unknown'}, load average (1 min) {load['start'][0]:.1f} at the start, "
                f"{load['end'][0]:.1f} at the end."
            )
        parts.append(f"**`{SWEEP_RECORDS}/{name}`**\n\n{table}\n{footer}\n")
    return "\n".join(parts)


def render_graph_table(records: dict[str, dict]) -> str:
    """`lab/compare_onnx_graphs.py` records (file name -> record) as one table: a row per graph, a column per
    record (its workload and padding), each cell the graph's speed over `bertscratch export`'s, median (min-max) over
    the record's interleaved rounds; then each record's machine, load, date and commit."""
    if not records:
        return (
            f"No record in `{GRAPH_RECORDS}/` yet: `python -m lab.compare_onnx_graphs ... --output_json` writes one.\n"
        )
    names = list(dict.fromkeys(name for record in records.values() for name in record["graphs"]))
    columns = [
        f"{WORKLOADS.get(r['arguments']['workload'], r['arguments']['workload'])}, {padding_label(r['arguments']['padding'])}"
        for r in records.values()
    ]
    lines = ["| graph | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for name in names:
        cells = []
        for record in records.values():
            graph = record["graphs"].get(name)
            cells.append(
                f"{graph['ratio_median']:.2f} ({graph['ratio_min']:.2f}-{graph['ratio_max']:.2f})" if graph else ""
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    ours = ", ".join(
        f"`{GRAPH_RECORDS}/{file}`: {next(iter(r['graphs'].values()))['tokens_per_s']:,.0f} tokens/s, "
        f"{r['arguments']['rounds']} rounds, {r['cpu']}, {r['threads']} threads, load average (1 min) "
        f"{r['load_average']['start'][0]:.1f}-{r['load_average']['end'][0]:.1f}, {r['date'][:10]}, commit "
        f"{r['commit'] or 'unknown'}"
        for file, r in records.items()
    )
    return "\n".join([*lines, "", f"Ours (the first row) per record: {ours}."]) + "\n"


def read_records(root: Path, folder: str) -> dict[str, dict]:
    """The json records in `root`/`folder` (e.g. `INT8_RECORDS`), by file name, in file-name order."""
    return {path.name: json.loads(path.read_text("utf-8")) for path in sorted((root / folder).glob("*.json"))}


# ------------------------------------------------------------------------------------------- sentence pairs
def _pair_cell(values: list[float]) -> str:
    """Scores (0-1) of one variant's seeds as "mean ± sd (n)" x 100."""
    mean = 100 * statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.1f} (1 seed)"
    return f"{mean:.1f} ± {100 * statistics.stdev(values):.1f} ({len(values)} seeds)"


def render_pairs_table(record: dict) -> str:
    """One pair diagnostic record (`lab/diagnose_pairs.py`) as a table: the no-learning answers, then each
    fine-tuning variant's final dev score, mean ± sd over seeds, with the flags that made it."""
    metric = record["metric"]
    base = record["no_learning"]
    layers = base["zero_shot_mean_by_layer"]
    lines = [
        f"| {record['task']} dev, {metric} x 100 | score |",
        "| --- | ---: |",
        f"| no learning: constant answer | {100 * base['constant'][metric]:.1f} |",
        f"| no learning: word overlap (Jaccard of the word sets) | {100 * base['word_overlap'][metric]:.1f} |",
        f"| no learning: cosine of the mean-pooled last layer (layers 0..{len(layers) - 1}: "
        f"{' / '.join(f'{100 * m[metric]:.1f}' for m in layers)}) | **{100 * layers[-1][metric]:.1f}** |",
        f"| no learning: cosine of the last layer's [CLS] | {100 * base['zero_shot_cls_last_layer'][metric]:.1f} |",
    ]
    if "zero_shot_joint_segments" in base:
        joint, type0 = base["zero_shot_joint_segments"][metric], base["zero_shot_joint_segments_type0"][metric]
        lines.append(
            "| no learning: cosine of the two texts' means inside `[CLS] a [SEP] b [SEP]` (second text as segment 1 "
            f"/ as segment 0) | {100 * joint:.1f} / {100 * type0:.1f} |"
        )
    for variant, runs in record["fine_tuning"].items():
        finals = [run["final"] for run in runs.values() if run.get("final") is not None]
        if finals:
            flags = " ".join(next(iter(runs.values()))["flags"]) or "(the defaults)"
            lines.append(f"| fine-tuned `{variant}`: `{flags}` | {_pair_cell(finals)} |")
    note = record.get("model_note") or f"model `{record['model']}`"
    commands = record.get("commands") or [record["command"]]
    made = "; then ".join(f"`{command}`" for command in commands)
    lines.append("")
    lines.append(f"Model: {note}. Made by {made} ({record['machine']}, {record['date']}, commit {record['commit']}).")
    return "\n".join(lines) + "\n"


def _no_pairs_record() -> str:
    return f"No record yet: `python -m lab.diagnose_pairs ... --output_json {PAIRS_RECORDS}/TASK.json` writes it.\n"


def render_pairs_block(records: dict[str, dict]) -> str:
    """Every pair diagnostic record's table, in file-name order, or a line naming the command that makes them."""
    if not records:
        return _no_pairs_record()
    return "\n".join(render_pairs_table(record) for record in records.values())


# A single-text diagnosis record's no-learning entries -> how its table names them.
SINGLE_BASELINES = {
    "constant": "constant answer",
    "bag_of_words": "bag of words (TF-IDF + logistic regression)",
    "bag_of_word_pairs": "bag of words and word pairs",
}


# What a fine-tuning run of a single-text record ran with, flags or the defaults of its day: record key -> name.
SINGLE_RUN_SETTINGS = {"learning_rate": "lr", "max_seq_length": "length"}


def render_single_table(record: dict) -> str:
    """One `lab/diagnose_single.py` record as a table: the no-learning scores, the frozen probes per pooling and
    each fine-tuning variant (its flags with the rate and length it ran at, mean ± sd over seeds, the eval metric
    per epoch)."""
    metric = record["metric"]
    lines = [f"**{record['task']}** ({metric} x 100):", "",
             "| what | how | score | per epoch | bag of words on the run's examples (words / and word pairs) |",
             "| --- | --- | ---: | --- | ---: |"]  # fmt: skip
    for key, name in SINGLE_BASELINES.items():
        if key in record.get("no_learning", {}):
            lines.append(
                f"| {name} | no learning, the whole train and eval splits | {100 * record['no_learning'][key][metric]:.1f} "
                "| | |"
            )
    probes = record.get("frozen_probes", {})
    for pooling in ("cls", "mean", "max", "mean-max"):
        if pooling in probes:
            how = f"{probes['samples']:,} train / eval examples, max_seq_length {probes['max_seq_length']}"
            lines.append(
                f"| frozen features, {pooling}, logistic regression | {how} | {100 * probes[pooling][metric]:.1f} | | |"
            )
    for variant, runs in record.get("fine_tuning", {}).items():
        first = next(iter(runs.values()))
        flags = " ".join(first.get("flags", [])) or "(the task's defaults)"
        ran = [f"{name} {first[key]:g}" for key, name in SINGLE_RUN_SETTINGS.items() if first.get(key) is not None]
        flags = f"`{flags}`" + (f" ({', '.join(ran)})" if ran else "")
        curves = " / ".join(" ".join(f"{100 * v:.1f}" for v in run.get("dev", [])) for run in runs.values())
        bags = " / ".join(
            f"{100 * first[k]:.1f}" for k in ("baseline_bag_of_words", "baseline_bag_of_word_pairs") if k in first
        )
        lines.append(
            f"| fine-tuned: `{variant}` | {flags} | {_variant_mean(record, variant, metric)} | {curves} | {bags} |"
        )
    note = record.get("model_note") or record["model"]
    commands = "; then ".join(f"`{c}`" for c in record.get("commands", []))
    lines += ["", f"Model: {note}. Made by {commands} ({record.get('machine', '?')}, {record.get('date', '?')}, commit "
              f"{record.get('commit', '?')}).", ""]  # fmt: skip
    return "\n".join(lines)


def render_single_block(records: dict[str, dict]) -> str:
    """Every single-text diagnosis record's table, in file-name order, or a line naming the command that makes them."""
    if not records:
        return f"No record yet: `bash lab/record_single.sh` writes them to `{SINGLE_DIAGNOSIS_RECORDS}/`.\n"
    return "\n".join(render_single_table(record) for record in records.values())


# The summary's columns after the no-learning ones: (record file suffix, variant, heading). The task's own record is
# TASK.json (the pretrained model itself); TASK-from-stsb*.json start from a folder fine-tuned on STS-B.
PAIRS_SUMMARY_COLUMNS = (
    ("", "table", "the task table's former recipe ([CLS] head, lr 3e-4)"),
    ("", "defaults", "**`finetune` with its defaults**"),
    ("-from-stsb", "defaults", "the defaults, from the STS-B folder"),
    ("-simcse", "simcse", "SimCSE on the train texts, no labels"),
    ("", "embedding", "bi-encoder (`--task_type embedding`)"),
    ("-after-simcse", "embedding", "bi-encoder after SimCSE"),
)
PAIRS_SUMMARY_METRICS = {"mrpc": ("f1", "accuracy"), "stsb": ("spearmanr",), "rte": ("accuracy",)}


def _variant_mean(record: dict | None, variant: str, metric: str) -> str:
    runs = (record or {}).get("fine_tuning", {}).get(variant, {})
    values = [run.get("final_metrics", {}).get(metric, run["final"] if metric == record["metric"] else None)
              for run in runs.values()]  # fmt: skip
    values = [v for v in values if v is not None]
    if not values:
        return ""
    sd = f" ± {100 * statistics.stdev(values):.1f}" if len(values) > 1 else ""
    return f"{100 * statistics.fmean(values):.1f}{sd}"


def render_pairs_summary(records: dict[str, dict]) -> str:
    """README's table of the pair tasks: per task and metric, what no learning scores (constant answer, word overlap,
    the pretrained model's zero-shot cosine through a threshold fit on train) beside each fine-tuning recipe, mean ±
    sd over seeds, from the records of `lab/diagnose_pairs.py`."""
    tasks = [task for task in PAIRS_SUMMARY_METRICS if f"{task}.json" in records]
    if not tasks:
        return _no_pairs_record()
    heading = ["task (dev), metric", "constant answer", "word overlap", "zero-shot cosine"]
    heading += [name for _, _, name in PAIRS_SUMMARY_COLUMNS]
    lines = ["| " + " | ".join(heading) + " |", "| --- |" + " ---: |" * (len(heading) - 1)]
    for task in tasks:
        own = records[f"{task}.json"]
        base = own["no_learning"]
        for metric in PAIRS_SUMMARY_METRICS[task]:
            cells = [f"{task.upper() if task != 'stsb' else 'STS-B'}, {metric}"]
            cells += [f"{100 * base[key][metric]:.1f}" for key in ("constant", "word_overlap")]
            cells.append(f"{100 * base['zero_shot_mean_by_layer'][-1][metric]:.1f}")
            cells += [_variant_mean(records.get(f"{task}{suffix}.json"), variant, metric)
                      for suffix, variant, _ in PAIRS_SUMMARY_COLUMNS]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    seeds = sorted(
        {seed for task in tasks for runs in records[f"{task}.json"]["fine_tuning"].values() for seed in runs}
    )
    note = records[f"{tasks[0]}.json"].get("model_note") or records[f"{tasks[0]}.json"]["model"]
    lines += ["", f"Model: {note}. Mean ± sd over seeds {', '.join(seeds)}; zero-shot cosine and word overlap "
              "classify through a threshold fit on the train split. Every run and curve is in "
              f"`{PAIRS_RECORDS}/` (`bash lab/record_pairs.sh`; [Results](docs/results.md#sentence-pairs-and-similarity)).",
              ""]  # fmt: skip
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- the headline
@dataclass
class Headline:
    """The figures README's opening paragraph and the documentation home page state, each read from a record.

    Attributes:
        quick_start: the quick-start record (`QUICK_START_RECORDS`; the newest of seed 42 on all cores where there is
            one), or None.
        training: padding -> each speed record's median ratio of our MLM training step over transformers' BERT.
        memory: padding -> (ours, transformers') peak training MiB, the median over the records.
        encoder: padding -> each speed record's median ratio of our encoder over ONNX Runtime's fp32 graph.
        task_table: the task-table record (`TASK_TABLE_RECORD`), or None.
        settings: "train" and "encode" -> the shape the speed records timed, e.g. "mini, T=128, B=32".
    """

    quick_start: dict | None
    training: dict[float, list[float]]
    memory: dict[float, tuple[float, float]]
    encoder: dict[float, list[float]]
    task_table: dict | None
    settings: dict[str, str]
    pairs: dict | None = None


def headline(root: Path, records: list[SpeedRecord]) -> Headline:
    """The headline figures from the records under `root` and the speed `records`."""
    newest_first = sorted(read_records(root, QUICK_START_RECORDS).values(), key=lambda r: r["date"], reverse=True)
    # the newest seed-42 run of the quick start as given (two processes, its default precision)
    quick_starts = sorted(
        newest_first, key=lambda r: (r["seed"] != 42, bool(r.get("one_core")), bool(r.get("precision")))
    )
    training: dict[float, list[float]] = {}
    encoder: dict[float, list[float]] = {}
    memory: dict[float, list[tuple[float, float]]] = {}
    settings: dict[str, set[str]] = {"train": set(), "encode": set()}
    for record in records:
        onnxruntime = _against(CONTENDERS[1], record.data["versions"])
        for row in speed_rows(record.data):
            if row.workload == WORKLOADS["train"] and row.against == CONTENDERS[0].name:
                found = training
                settings["train"].add(_caption(record.data).split("**")[1])
            elif row.workload == WORKLOADS["encode"] and row.against == onnxruntime:
                found = encoder
                settings["encode"].add(_caption(record.data).split("**")[1])
            else:
                continue
            for padding, cell in row.cells.items():
                found.setdefault(padding, []).append(cell.median)
        for label, cells in _memory_rows(record.data):
            if label.startswith(WORKLOADS["train"]):
                for padding, pair in cells.items():
                    memory.setdefault(padding, []).append(pair)
    task_table = root / TASK_TABLE_RECORD
    table = json.loads(task_table.read_text("utf-8")) if task_table.is_file() else None
    if table is not None and (root / TASK_BASELINES_RECORD).is_file():
        table["no_learning"] = json.loads((root / TASK_BASELINES_RECORD).read_text("utf-8"))
    return Headline(
        quick_starts[0] if quick_starts else None,
        training,
        {p: (statistics.median(o for o, _ in v), statistics.median(t for _, t in v)) for p, v in memory.items()},
        encoder,
        table,
        {workload: "; ".join(sorted(shown)) for workload, shown in settings.items()},
        read_records(root, PAIRS_RECORDS).get(PAIRS_HEADLINE_RECORD),
    )


def _span(values: list[float]) -> str:
    """ "1.03x" for one run, "1.00-1.06x" (lowest-highest) for several."""
    low, high = min(values), max(values)
    return f"{low:.2f}x" if len(values) == 1 or f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}x"


def _median_ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x"


def _with_padding(padding: float) -> str:
    """ "" for no padding, " with 30% padding" otherwise: what follows a ratio in the headline."""
    return f" with {padding:.0%} padding" if padding else ""


def _runs(values: dict[float, list[float]], noun: str = "run") -> str:
    """ "4 runs": how many recorded runs a figure's ranges are over."""
    runs = max(len(found) for found in values.values())
    return f"{runs} {noun}{'s' if runs != 1 else ''}"


def _and_list(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def _quick_start_phrase(record: dict) -> tuple[str, str, str]:
    """("9 min 01 s", "34.9%", "50.9"): a quick-start record's end-to-end time, masked-token accuracy and perplexity."""
    minutes, seconds = divmod(round(record["end_to_end_seconds"]), 60)
    results = record["results"]
    return (
        f"{minutes} min {seconds:02d} s",
        f"{100 * results['eval_accuracy']:.1f}%",
        f"{results['eval_perplexity']:.1f}",
    )


def _task_figures(record: dict) -> tuple[list[tuple[str, float, float, int]], str, list[float | None]]:
    """Each headline task's (name, pretrained mean, scratch mean, the fewer seeds of the two) with both inits run, the
    pretraining minutes, and the GLUE dev average of each init (None while one has no run)."""
    from .results_table import glue_average

    rows = {(row["task"], row["key"]): row for row in record["rows"]}
    figures = []
    for task, key, name in HEADLINE_TASKS:
        row = rows.get((task, key))
        if row and row["pretrained"] and row["scratch"]:
            seeds = min(len(row["pretrained"]), len(row["scratch"]))
            figures.append((name, statistics.fmean(row["pretrained"]), statistics.fmean(row["scratch"]), seeds))
    minutes = re.search(r"([\d.]+) min train", record["pretraining"])
    averages = [glue_average(record["rows"], init) for init in ("pretrained", "scratch")]
    return figures, f"{float(minutes.group(1)):.0f} minutes" if minutes else "its pretraining", averages


def _seeds_so_far(seeds: list[int], enough: int = 3) -> str:
    """ ", one seed per task so far" while a headline task has fewer than `enough` seeds of each init; "" after."""
    if not seeds or min(seeds) >= enough:
        return ""
    low, high = min(seeds), max(seeds)
    count = "one seed" if high == 1 else f"{low} seeds" if low == high else f"{low}-{high} seeds"
    return f", {count} per task so far"


def render_headline(figures: Headline) -> str:
    """README's opening paragraph: why one would pick the project, every figure from a record."""
    parts = []
    if figures.quick_start:
        took, accuracy, perplexity = _quick_start_phrase(figures.quick_start)
        parts.append(
            f"Why pick it: one command pretrains a 2-layer BERT on WikiText-2 in **{took}** end to end on a 2-core "
            f"{short_cpu_name(figures.quick_start['cpu'])}, "
            f"to **{accuracy}** masked-token accuracy (perplexity {perplexity})."
        )
    if figures.training:
        first, *others = sorted(figures.training)
        sentence = f"Its MLM training step runs **{_median_ratio(figures.training[first])}** as fast as transformers' "
        sentence += "`BertForMaskedLM`" + _with_padding(first)
        if first in figures.memory:
            ours, theirs = figures.memory[first]
            sentence += f", with {ours:,.0f} MiB of peak memory against {theirs:,.0f}"
        if others:
            sentence += f" (**{_median_ratio(figures.training[others[0]])}**{_with_padding(others[0])})"
        parts.append(sentence + ".")
    if figures.encoder:
        shown = [
            f"**{_span(figures.encoder[p])}**{_with_padding(p) or ' without padding'}" for p in sorted(figures.encoder)
        ]
        parts.append(
            f"For CPU inference its encoder runs {_and_list(shown)} as fast as ONNX Runtime on ORT's fastest graph of "
            f"the same weights ({_runs(figures.encoder, 'recorded run')}, [Speed](#speed))."
        )
    parts.append(
        "It computes transformers' BERT to 1e-5 (all 8 heads, checkpoints convert both ways), so Auto classes, "
        "pipelines, `Trainer`, `accelerate` and the Hub work unchanged."
    )
    if figures.task_table:
        tasks, minutes, averages = _task_figures(figures.task_table)
        shown = [f"{n} **{p:.1f}** against {s:.1f}" for n, p, s, _ in tasks if p > s]
        not_better = [n for n, p, s, _ in tasks if p <= s]
        if shown:
            shown[0] += " from random weights"
        sentence = f"Fine-tuned after {minutes} of pretraining on a 2-core CPU, the tiny model reaches "
        sentence += _and_list(shown) or "nothing"
        if not_better:
            sentence += f"; on {_and_list(not_better)} it is not yet better than random weights"
        if None not in averages:
            sentence += f", and the five GLUE dev tasks average {averages[0]:.1f} against {averages[1]:.1f}"
        parts.append(sentence + f" ([the task table](#results){_seeds_so_far([n for *_, n in tasks])}).")
        parts += _bag_of_words_sentence(figures.task_table.get("no_learning"))
    if figures.pairs:
        parts.append(_pairs_sentence(figures.pairs))
    return _wrap(" ".join(parts)) + "\n"


# The single-text tasks whose bag of words the headline states: (task, its name, metric).
BAG_OF_WORDS_HEADLINE = (("sst2", "SST-2", "accuracy"), ("imdb", "IMDB", "accuracy"))


def _bag_of_words_sentence(no_learning: dict | None) -> list[str]:
    """The headline's bag-of-words sentence from a `lab.task_baselines` record: the best bag of words of each task."""
    shown = []
    for task, name, metric in BAG_OF_WORDS_HEADLINE:
        scores = (no_learning or {}).get("tasks", {}).get(task, {})
        bags = {key: scores[key][metric] for key in ("bag_of_words", "bag_of_word_pairs") if key in scores}
        if bags:
            best = max(bags, key=bags.get)
            shown.append(
                f"{name} {100 * bags[best]:.1f}" + (" (words and word pairs)" if best != "bag_of_words" else "")
            )
    if not shown:
        return []
    return [f"A bag of words with no pretraining (TF-IDF and logistic regression on the train split) scores "
            f"{_and_list(shown)} on the same splits."]  # fmt: skip


def _pairs_sentence(record: dict) -> str:
    """The headline's similarity sentence: the record's cross-encoder and bi-encoder against its no-learning answers."""
    metric = record["metric"]
    base = record["no_learning"]
    shown = []
    for variant, words in PAIRS_HEADLINE_VARIANTS:
        finals = [run["final"] for run in record["fine_tuning"].get(variant, {}).values()]
        if finals:
            shown.append(f"**{100 * statistics.fmean(finals):.1f}** {words}")
    zero_shot = 100 * base["zero_shot_mean_by_layer"][-1][metric]
    return (
        f"From the 9-minute model, STS-B's Spearman is {_and_list(shown)}, against {zero_shot:.1f} for the model's "
        f"own zero-shot cosine and {100 * base['word_overlap'][metric]:.1f} for word overlap "
        "([sentence pairs](#results))."
    )


def _wrap(text: str, width: int = 118) -> str:
    """`text` broken into lines of at most `width` characters (markdown renders them as one paragraph)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))


def render_headline_table(figures: Headline) -> str:
    """The documentation home page's table of the same figures, each with the page that details it."""
    lines = ["| | measured | details |", "| --- | --- | --- |"]
    if figures.quick_start:
        took, accuracy, perplexity = _quick_start_phrase(figures.quick_start)
        lines.append(
            f"| the quick start, end to end on a 2-core {short_cpu_name(figures.quick_start['cpu'])} | {took}, masked-token accuracy {accuracy}, perplexity "
            f"{perplexity} | [Pretraining](pretraining.md#the-quick-start) |"
        )
    if figures.training:
        cells = [f"{_median_ratio(figures.training[p])}{_with_padding(p)}" for p in sorted(figures.training)]
        first = min(figures.training)
        if first in figures.memory:
            cells[0] += f" (peak memory {figures.memory[first][0]:,.0f} vs {figures.memory[first][1]:,.0f} MiB)"
        lines.append(
            f"| MLM training step against transformers' BERT ({figures.settings['train']}) | {', '.join(cells)} | "
            "[Speed](speed.md#the-records) |"
        )
    if figures.encoder:
        cells = [f"{_span(figures.encoder[p])}{_with_padding(p)}" for p in sorted(figures.encoder)]
        lines.append(
            f"| CPU inference of the encoder against ONNX Runtime's fastest graph (same weights; "
            f"{figures.settings['encode']}) | {', '.join(cells)} ({_runs(figures.encoder)}) | "
            "[Speed](speed.md#the-records) |"
        )
    lines.append(
        "| outputs of all 8 heads against transformers' `BertFor*` (converted weights) | equal to 1e-5 in fp32 | "
        "[Model design](design.md#what-the-model-tests-check) |"
    )
    if figures.task_table:
        tasks, minutes, averages = _task_figures(figures.task_table)
        cells = [f"{n} {p:.1f} vs {s:.1f}" for n, p, s, _ in tasks[:1]]
        if None not in averages:
            cells.append(f"GLUE average (5 dev tasks) {averages[0]:.1f} vs {averages[1]:.1f}")
        lines.append(
            f"| fine-tuned after {minutes} of pretraining, against random weights | {'; '.join(cells)} | "
            "[Results](results.md) |"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------- the charts
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


def task_table_bars(record: dict) -> dict[str, dict[str, tuple[float, float, float]]]:
    """The task-table chart's data (`results.task_table_record`): a group per row with values, a bar per
    initialisation that has some: (mean, mean - sd, mean + sd) over seeds (sd 0 for one seed)."""
    series = {"pretrained": "pretrained here", "scratch": "no pretraining"}
    groups = {}
    for row in record["rows"]:
        bars = {}
        for key, name in series.items():
            values = row[key]
            if values:
                mean = statistics.fmean(values)
                sd = statistics.stdev(values) if len(values) > 1 else 0.0
                bars[name] = (mean, mean - sd, mean + sd)
        if bars:
            groups[row["label"]] = bars
    return groups


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


def draw_task_table_chart(record: dict, output_file: Path) -> Path:
    """`docs/images/task_table.png`: each task row, fine-tuned from the pretrained and from random weights, mean
    with ± sd error bars over seeds; rows without values are left out."""
    from hf_bertscratch.plotting import plot_grouped_bars

    return plot_grouped_bars(
        task_table_bars(record),
        output_file,
        "Fine-tuned from pretrained vs random weights, mean ± sd over seeds",
        "score x 100",
    )


# ------------------------------------------------------------------------------------------- pages and checking
def _render_record(path: Path, render: Callable[[dict], str], writer: str) -> str:
    """`render` of the JSON record at `path`, or a line naming `writer`, the command that writes it, until it exists."""
    if path.is_file():
        return render(json.loads(path.read_text("utf-8")))
    return f"No record yet: {writer} writes it.\n"


def record_blocks(root: Path, records: list[SpeedRecord], records_dir: str) -> list[tuple[str, tuple[str, str], str]]:
    """Every generated block: (page, its markers, what the records give), for the speed blocks of `SPEED_PAGES`,
    README's task table (`results/task_table.json`) and README's pretraining comparison
    (`results/pretraining_comparison.json`, or a line saying it has not run)."""
    from .compare_pretraining import README_BLOCK as COMPARISON_BLOCK
    from .compare_pretraining import render_comparison
    from .results_table import README_BLOCK as TASK_TABLE_BLOCK
    from .results_table import render_task_table

    blocks = [
        (
            page,
            SPEED_BLOCK,
            render_speed_summary(records, chart, SUMMARY_PAGES[page])
            if page in SUMMARY_PAGES
            else render_speed_block(records, chart, records_dir),
        )
        for page, chart in SPEED_PAGES.items()
    ]
    no_learning_path = root / TASK_BASELINES_RECORD
    no_learning = json.loads(no_learning_path.read_text("utf-8")) if no_learning_path.is_file() else None
    task_table = root / TASK_TABLE_RECORD
    if task_table.is_file():
        table = render_task_table(json.loads(task_table.read_text("utf-8")), no_learning)
        blocks.append(("README.md", TASK_TABLE_BLOCK, table))
    comparison = _render_record(
        root / COMPARISON_RECORD,
        render_comparison,
        f"`python -m lab.compare_pretraining --record {COMPARISON_RECORD}`",
    )
    blocks.append((COMPARISON_PAGE, COMPARISON_BLOCK, comparison))
    quick_start_tasks = _render_record(
        root / QUICK_START_TASKS_RECORD,
        lambda record: render_task_table(record, no_learning),
        f"`{QUICK_START_TASKS_COMMAND}`, then `python -m lab.results_table results/task-runs/quick-start-tasks --record "
        f"{QUICK_START_TASKS_RECORD} --command '{QUICK_START_TASKS_COMMAND}'`",
    )
    blocks.append((QUICK_START_TASKS_PAGE, QUICK_START_TASKS_BLOCK, quick_start_tasks))
    blocks.append((GRAPH_PAGE, GRAPH_BLOCK, render_graph_table(read_records(root, GRAPH_RECORDS))))
    quick_starts = read_records(root, QUICK_START_RECORDS)
    for page in QUICK_START_PAGES:  # README: the seed-42 runs, and where every record is
        shown = quick_starts if page != "README.md" else {n: r for n, r in quick_starts.items() if r["seed"] == 42}
        table = render_quick_start_table(shown)
        if len(shown) < len(quick_starts):
            table = (
                table.rstrip("\n")
                + f" Every seed, {len(quick_starts)} records: [Pretraining]({QUICK_START_FULL_TABLE}).\n"
            )
        blocks.append((page, QUICK_START_BLOCK, table))
    int8 = read_records(root, INT8_RECORDS)
    blocks += [(page, INT8_BLOCK, render_int8_table(int8, page not in SUMMARY_PAGES)) for page in INT8_PAGES]
    more = read_speed_records(root / MORE_SPEED_RECORDS, root)
    blocks.append((MORE_SPEED_PAGE, MORE_SPEED_BLOCK, render_speed_block(more, None, MORE_SPEED_RECORDS)))
    blocks.append((DECODER_PAGE, DECODER_BLOCK, render_decoder_table(read_records(root, DECODER_RECORDS))))
    blocks.append((POSITION_PAGE, POSITION_BLOCK, render_position_table(read_records(root, POSITION_RECORDS))))
    blocks.append((SWEEP_PAGE, SWEEP_BLOCK, render_sweep_tables(read_records(root, SWEEP_RECORDS))))
    pair_records = read_records(root, PAIRS_RECORDS)
    blocks.append(("README.md", PAIRS_BLOCK, render_pairs_summary(pair_records)))
    blocks.append(("docs/results.md", PAIRS_BLOCK, render_pairs_block(pair_records)))
    diagnosis = render_pairs_block(read_records(root, PAIRS_DIAGNOSIS_RECORDS))
    blocks.append(("docs/fine-tuning.md", PAIRS_DIAGNOSIS_BLOCK, diagnosis))
    single = render_single_block(read_records(root, SINGLE_DIAGNOSIS_RECORDS))
    blocks.append(("docs/fine-tuning.md", SINGLE_DIAGNOSIS_BLOCK, single))
    figures = headline(root, records)
    blocks.append(("README.md", HEADLINE_BLOCK, render_headline(figures)))
    blocks.append((HEADLINE_TABLE_PAGE, HEADLINE_TABLE_BLOCK, render_headline_table(figures)))
    return blocks


def expected_pages(root: Path, records: list[SpeedRecord], records_dir: str) -> dict[Path, str]:
    """Each page holding a generated block (`record_blocks`) with its blocks rendered from the records.

    Raises:
        ValueError: naming the page, when it lacks a block.
    """
    pages: dict[Path, str] = {}
    for page, block, rendered in record_blocks(root, records, records_dir):
        path = root / page
        text = pages.get(path) or path.read_text(encoding="utf-8")
        try:
            pages[path] = replace_block(text, rendered, block)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
    return pages


def charts(root: Path, records: list[SpeedRecord]) -> dict[Path, Callable[[Path], Path]]:
    """The charts the records give: path -> the function drawing it there (the speed chart only when there are
    records, the task-table chart only when its record exists)."""
    drawn: dict[Path, Callable[[Path], Path]] = {}
    if records:
        drawn[root / SPEED_CHART] = lambda path: draw_speed_chart(records, path)
    task_table = root / TASK_TABLE_RECORD
    if task_table.is_file():
        record = json.loads(task_table.read_text(encoding="utf-8"))
        drawn[root / TASK_TABLE_CHART] = lambda path: draw_task_table_chart(record, path)
    return drawn


def _speed_records(root: Path, records_dir: str | Path | None) -> tuple[list[SpeedRecord], str]:
    """The speed records of `records_dir` (default `root`/`SPEED_RECORDS`) and that folder as the pages name it."""
    folder = Path(records_dir) if records_dir is not None else root / SPEED_RECORDS
    return read_speed_records(folder, root), _shown(folder, root)


def check_report(root: str | Path = ".", records_dir: str | Path | None = None) -> list[str]:
    """What differs from the records: each page whose generated block (`record_blocks`) is missing or not what the
    records give, each chart missing. An empty list: everything matches."""
    root = Path(root)
    records, shown = _speed_records(root, records_dir)
    problems = []
    for page, block, rendered in record_blocks(root, records, shown):
        text = (root / page).read_text(encoding="utf-8")
        if block[0] not in text or block[1] not in text:
            problems.append(f"{page}: no {block[0].strip()} ... {block[1]} block")
        elif readme_block(text, block) != rendered:
            problems.append(f"{page}: the {block[0].strip()} block differs from what the records give")
    problems += [f"{_shown(path, root)}: missing" for path in charts(root, records) if not path.is_file()]
    return problems


def write_report(root: str | Path = ".", records_dir: str | Path | None = None, draw: bool = True) -> list[Path]:
    """Render every generated block (`record_blocks`) from the records, writing each page that changes through a
    temporary file renamed into place, and draw the charts; returns the files written."""
    root = Path(root)
    records, shown = _speed_records(root, records_dir)
    written = []
    for path, text in expected_pages(root, records, shown).items():
        if path.read_text(encoding="utf-8") != text:
            write_text_atomically(path, text)
            written.append(path)
    if draw:
        written += [draw_chart(path) for path, draw_chart in charts(root, records).items()]
    return written


# ---------------------------------------------------------------------------------------------------------- main
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """`--help` with each option's default, and the description's list as written."""


@dataclass
class ReportArguments:
    """Where the records are, and whether to write the report or check it."""

    root: str = field(
        default=".", metadata={"help": "The repository: README.md, docs/ and results/ are read and written under it."}
    )
    records_dir: str | None = field(
        default=None,
        metadata={
            "help": f"Folder of benchmark records (*.json, as --output_json writes them); default ROOT/{SPEED_RECORDS}."
        },
    )
    check: bool = field(
        default=False,
        metadata={
            "help": "Write nothing; exit 1, naming each file, when a page's speed block differs from what the "
            "records give or a chart is missing."
        },
    )
    charts: bool = field(default=True, metadata={"help": f"Draw {SPEED_CHART} and {TASK_TABLE_CHART}."})


def main(argv: list[str] | None = None) -> None:
    """Write the report from the records, or with --check, exit 1 when the committed pages differ from them."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    parser = ArgumentParser(ReportArguments, description=__doc__, formatter_class=_HelpFormatter)
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
