"""README's opening paragraph (between `<!-- headline:start -->` and `<!-- headline:end -->`) and the figures table of
docs/index.md (`<!-- headline-table:start -->`): the figures a reader picks the project by, each read from the records
the other blocks render (the quick start's, the speed records, the task table, the no-learning baselines and the
sentence pairs).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from .diagnose_pairs import PAIRS_RECORDS
from .record_quick_start import QUICK_START_RECORDS, cpu_name
from .report_format import WORKLOADS, Sources, and_list, read_records, wrap
from .results_table import TASK_BASELINES_RECORD, TASK_TABLE_RECORD, glue_average
from .speed_tables import CONTENDERS, SpeedRecord, against_name, caption, memory_rows, speed_records, speed_rows

HEADLINE_BLOCK = ("<!-- headline:start -->\n", "<!-- headline:end -->")
HEADLINE_TABLE_BLOCK = ("<!-- headline-table:start -->\n", "<!-- headline-table:end -->")
PAIRS_HEADLINE_RECORD = "stsb.json"  # the record the headline's similarity sentence reads
# The variants the headline names: the cross-encoder with the task's defaults, the bi-encoder.
PAIRS_HEADLINE_VARIANTS = (("defaults", "fine-tuned with its defaults"), ("embedding", "as a bi-encoder"))
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
        onnxruntime = against_name(CONTENDERS[1], record.data["versions"])
        for row in speed_rows(record.data):
            if row.workload == WORKLOADS["train"] and row.against == CONTENDERS[0].name:
                found = training
                settings["train"].add(caption(record.data).split("**")[1])
            elif row.workload == WORKLOADS["encode"] and row.against == onnxruntime:
                found = encoder
                settings["encode"].add(caption(record.data).split("**")[1])
            else:
                continue
            for padding, cell in row.cells.items():
                found.setdefault(padding, []).append(cell.median)
        for label, cells in memory_rows(record.data):
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
            f"{cpu_name(figures.quick_start)}, "
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
            f"For CPU inference its encoder runs {and_list(shown)} as fast as ONNX Runtime on ORT's fastest graph of "
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
        sentence += and_list(shown) or "nothing"
        if not_better:
            sentence += f"; on {and_list(not_better)} it is not yet better than random weights"
        if None not in averages:
            sentence += f", and the five GLUE dev tasks average {averages[0]:.1f} against {averages[1]:.1f}"
        parts.append(sentence + f" ([the task table](#results){_seeds_so_far([n for *_, n in tasks])}).")
        parts += _bag_of_words_sentence(figures.task_table.get("no_learning"))
    if figures.pairs:
        parts.append(_pairs_sentence(figures.pairs))
    return wrap(" ".join(parts)) + "\n"


# The single-text tasks whose bag of words the headline states: (task, its name, the split of its table row, metric).
BAG_OF_WORDS_HEADLINE = (("sst2", "SST-2", "eval", "accuracy"), ("imdb", "IMDB", "test", "accuracy"))


def _bag_of_words_sentence(no_learning: dict | None) -> list[str]:
    """The headline's bag-of-words sentence from a `lab.task_baselines` record: the best bag of words of each task."""
    shown = []
    for task, name, split, metric in BAG_OF_WORDS_HEADLINE:
        scores = (no_learning or {}).get("tasks", {}).get(task, {}).get(split, {})
        bags = {key: scores[key][metric] for key in ("bag_of_words", "bag_of_word_pairs") if key in scores}
        if bags:
            best = max(bags, key=bags.get)
            shown.append(
                f"{name} {100 * bags[best]:.1f}" + (" (words and word pairs)" if best != "bag_of_words" else "")
            )
    if not shown:
        return []
    sentence = (f"A bag of words with no pretraining (TF-IDF and logistic regression on the train split) scores "
                f"{and_list(shown)} on the same splits")  # fmt: skip
    tagged = (no_learning or {}).get("tasks", {}).get("conll2003", {}).get("test", {}).get("most_frequent_tag")
    if tagged:
        sentence += (
            f", and tagging each word as the train split tags it most often CoNLL-2003 {100 * tagged['overall_f1']:.1f}"
        )
    return [sentence + "."]


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
        f"From the 9-minute model, STS-B's Spearman is {and_list(shown)}, against {zero_shot:.1f} for the model's "
        f"own zero-shot cosine and {100 * base['word_overlap'][metric]:.1f} for word overlap "
        "([sentence pairs](#results))."
    )


def render_headline_table(figures: Headline) -> str:
    """The documentation home page's table of the same figures, each with the page that details it."""
    lines = ["| | measured | details |", "| --- | --- | --- |"]
    if figures.quick_start:
        took, accuracy, perplexity = _quick_start_phrase(figures.quick_start)
        lines.append(
            f"| the quick start, end to end on a 2-core {cpu_name(figures.quick_start)} | {took}, masked-token accuracy {accuracy}, perplexity "
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


def readme_headline_block(sources: Sources) -> str:
    """README's opening paragraph."""
    return render_headline(headline(sources.root, speed_records(sources)))


def home_table_block(sources: Sources) -> str:
    """docs/index.md's table of the same figures."""
    return render_headline_table(headline(sources.root, speed_records(sources)))
