"""Build the README task table from the run folders of `lab/reproduce_results.sh`.

Each cell is read from the runs' `all_results.json` (and the pretraining stages' `config.json` and
`trainer_state.json`), so every number carries how it was produced: the learning rate chosen on dev, seeds, steps,
examples and wall time. Published scores (`REFERENCES`) follow in a second table, for scale.

    python -m lab.results_table runs/results --output runs/results/results.md
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.baselines import BASELINE_NAMES, baseline_key
from hf_bertscratch.run_folder import write_text_atomically

from .report_format import Sources

# The rows of the task table: (task, the all_results.json key, how the table names it). The first row of a task is
# its main metric; CoNLL-2003 is chosen on validation and reported on test, as NER papers do; IMDB, which has no
# validation split, is chosen on 5% of its train reviews held out and reported on test.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("cola", "eval_matthews_correlation", "CoLA Matthews corr. (dev)"),
    ("sst2", "eval_accuracy", "SST-2 accuracy (dev)"),
    ("mrpc", "eval_f1", "MRPC F1 (dev)"),
    ("mrpc", "eval_accuracy", "MRPC accuracy (dev)"),
    ("stsb", "eval_spearmanr", "STS-B Spearman (dev)"),
    ("stsb", "eval_pearson", "STS-B Pearson (dev)"),
    ("rte", "eval_accuracy", "RTE accuracy (dev)"),
    ("conll2003", "test_overall_f1", "CoNLL-2003 entity F1 (test)"),
    ("conll2003", "eval_overall_f1", "CoNLL-2003 entity F1 (dev)"),
    ("imdb", "test_accuracy", "IMDB accuracy (test)"),
)
# The GLUE average of the table: the main metric of each of these five dev sets.
GLUE_AVERAGE = (
    ("cola", "eval_matthews_correlation"),
    ("sst2", "eval_accuracy"),
    ("mrpc", "eval_f1"),
    ("stsb", "eval_spearmanr"),
    ("rte", "eval_accuracy"),
)

# Published scores for scale: (row label, Google BERT-Tiny 2/128, BERT-Mini 4/256, a larger reference, its name).
# Turc et al. 2019 (*Well-Read Students Learn Better*, the table in github.com/google-research/bert's README) give
# GLUE **test-server** scores, not dev: they are a scale, not a like-for-like comparison with the dev rows above.
REFERENCES: tuple[tuple[str, float | None, float | None, float | None, str], ...] = (
    ("CoLA Matthews corr.", 0.0, 0.0, 60.5, "BERT-large, GLUE test (Devlin et al. 2019)"),
    ("SST-2 accuracy", 83.2, 85.9, 93.5, "BERT-base, GLUE test (Devlin et al. 2019)"),
    ("MRPC F1", 81.1, 81.1, 88.9, "BERT-base, GLUE test (Devlin et al. 2019)"),
    ("MRPC accuracy", 71.1, 71.8, None, ""),
    ("STS-B Spearman", 73.6, 73.3, 85.8, "BERT-base, GLUE test (Devlin et al. 2019)"),
    ("STS-B Pearson", 74.3, 75.4, None, ""),
    ("RTE accuracy", 57.2, 57.9, 66.4, "BERT-base, GLUE test (Devlin et al. 2019)"),
    ("CoNLL-2003 entity F1", None, None, 90.9, "BiLSTM-CRF, no pretraining (Lample et al. 2016: 90.94)"),
    ("IMDB accuracy", None, None, 94.6, "BERT-base, max length 512 (Sun et al. 2019)"),
)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _size(config: dict) -> str:
    """ "2L/128H, 1.3M params"-style description from a config.json."""
    if not config:
        return "?"
    return f"{config.get('num_hidden_layers')}L/{config.get('hidden_size')}H, vocab {config.get('vocab_size')}"


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.1f} min"


# The pretraining stages reproduce_results.sh runs, in order: packed 128-token blocks, then 256-token blocks that
# teach the positions IMDB fine-tuning reads (BERT's own recipe: most steps short, the last ones long), then (when
# asked for) the tasks' own unlabelled text.
PRETRAINING_STAGES = ("pretrain", "pretrain-long", "pretrain-tasks")


def objective_name(run_dir: Path) -> str:
    """ "ELECTRA" for a replaced-token-detection run (its folder holds the discriminator), "MLM+NSP" for masked-LM
    with next-sentence prediction, else "MLM"."""
    architectures = _read_json(run_dir / "config.json").get("architectures") or []
    if "BertScratchForReplacedTokenDetection" in architectures:
        return "ELECTRA"
    return "MLM+NSP" if "BertScratchForPreTraining" in architectures else "MLM"


def _stage(run_dir: Path) -> tuple[str, dict] | None:
    """'6000 steps of 64 x 128 tokens' (with ' in a 40-minute budget' for a time-budgeted stage; NSP's steps are of
    sentence pairs of up to that length) and the stage's all_results.json, or None if the stage did not finish."""
    results = _read_json(run_dir / "all_results.json")
    if not results:
        return None
    steps = _read_json(run_dir / "trainer_state.json").get("global_step", 0)
    batch = results.get("train_effective_batch_size", 0)
    length = results.get("max_seq_length") or (results.get("train_tokens", 0) // max(steps * batch, 1))
    budget = f" in a {results['train_budget_minutes']:g}-minute budget" if results.get("train_budget_minutes") else ""
    if objective_name(run_dir) == "MLM+NSP":
        return f"{steps} steps of {batch} pairs of up to {length} tokens{budget}", results
    return f"{steps} steps of {batch} x {length} tokens{budget}", results


def pretraining_description(runs_dir: Path) -> str:
    """How the pretrained checkpoint was made: each stage's steps and shape, tokens, wall time, and the final
    stage's MLM accuracy/perplexity on held-out text."""
    found = [(name, _stage(runs_dir / name)) for name in PRETRAINING_STAGES]
    names = [name for name, stage in found if stage is not None]
    stages = [stage for _, stage in found if stage is not None]
    if not stages:
        return "(pretraining run missing)"
    tokens, seconds = stage_totals(runs_dir)
    parts = [
        _size(_read_json(runs_dir / names[0] / "config.json")),
        " then ".join(_stage_phrases(runs_dir, names, [shape for shape, _ in stages])),
        f"{tokens / 1e6:.1f}M tokens",
        f"{_minutes(seconds)} train",
    ]
    final = stages[-1][1]
    if "eval_perplexity" in final:
        mlm = "generator MLM" if "eval_discriminator_accuracy" in final else "MLM"
        parts.append(f"{mlm} ppl {final['eval_perplexity']:.0f}, masked acc {100 * final['eval_accuracy']:.1f}%")
    if "eval_discriminator_accuracy" in final:
        prior = (
            f" (all 'original': {100 * (1 - final['eval_replaced_fraction']):.1f}%)"
            if "eval_replaced_fraction" in final
            else ""
        )
        parts.append(f"replaced-token accuracy {100 * final['eval_discriminator_accuracy']:.1f}%{prior}")
    return ", ".join(parts)


def stage_totals(runs_dir: Path) -> tuple[int, float]:
    """Training tokens and training seconds summed over the finished pretraining stages in `runs_dir`, each stage
    counted whole: a resumed stage's `train_tokens` and wall time cover only the part after its checkpoint, so the
    tokens are the ones its Trainer counted over all its steps (trainer_state.json's `num_input_tokens_seen`, without
    padding), else its steps x its effective batch x its block length (exact for packed blocks, an upper bound for
    NSP's pairs), and the time is what its budget spent, where it had one."""
    tokens, seconds = 0, 0.0
    for name in PRETRAINING_STAGES:
        results = _read_json(runs_dir / name / "all_results.json")
        if not results:
            continue
        state = _read_json(runs_dir / name / "trainer_state.json")
        steps = state.get("global_step")
        if state.get("num_input_tokens_seen"):
            tokens += state["num_input_tokens_seen"]
        elif steps and results.get("train_effective_batch_size") and results.get("max_seq_length"):
            tokens += steps * results["train_effective_batch_size"] * results["max_seq_length"]
        else:
            tokens += results.get("train_tokens", 0)
        if results.get("train_budget_spent_minutes") is not None:
            seconds += 60 * results["train_budget_spent_minutes"]
        else:
            seconds += results.get("train_wall_time_seconds", results.get("train_runtime", 0.0))
    return tokens, seconds


def _stage_phrases(runs_dir: Path, names: list[str], shapes: list[str]) -> list[str]:
    """Each stage's shape, with its objective where it is the first stage's or changes ("MLM 10 steps of ...")."""
    phrases, before = [], None
    for name, shape in zip(names, shapes):
        objective = objective_name(runs_dir / name)
        text = shape if objective == before else f"{objective} {shape}"
        phrases.append(text + (" on the tasks' text" if name == "pretrain-tasks" else ""))
        before = objective
    return phrases


def _runs(runs_dir: Path, task: str, init: str) -> tuple[float | None, list[dict]]:
    """The learning rate chosen on dev for (task, init) and the finished runs at it, one per seed, by seed."""
    from .finetune_tasks import read_results

    folders = sorted(runs_dir.glob(f"{task}-{init}-lr*-seed*"))
    runs = [(folder, read_results(folder)) for folder in folders]
    runs = [results for _, results in runs if results is not None]
    if not runs:
        return None, []
    first_seed = min(run["seed"] for run in runs)
    candidates = [run for run in runs if run["seed"] == first_seed]
    best = max(candidates, key=lambda run: (run[f"eval_{run['main_metric']}"], -run["learning_rate"]))
    chosen = [run for run in runs if run["learning_rate"] == best["learning_rate"]]
    return best["learning_rate"], sorted(chosen, key=lambda run: run["seed"])


def _percent(runs: list[dict], key: str) -> list[float]:
    return [100 * float(run[key]) for run in runs if key in run]


def mean_cell(values: list[float]) -> str:
    """ "52.0 ± 2.0": the mean and sample sd of per-seed values ("52.0" for one, "not run" for none)."""
    if not values:
        return "not run"
    mean, spread = _mean_and_spread(values)
    return f"{mean:.1f}{spread}"


def _mean_and_spread(values: list[float]) -> tuple[float, str]:
    """The mean, and " ± sd" (sample standard deviation) when there is more than one value."""
    mean = statistics.fmean(values)
    return mean, f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""


def _difference(pretrained: list[float], scratch: list[float]) -> str:
    if not pretrained or not scratch:
        return ""
    return f"{statistics.fmean(pretrained) - statistics.fmean(scratch):+.1f}"


def _how(runs: dict[str, tuple[float | None, list[dict]]]) -> str:
    rates = "/".join(f"{rate:g}" if rate else "-" for rate, _ in runs.values())
    first = next((found[0] for _, found in runs.values() if found), None)
    if first is None:
        return ""
    seeds = max(len(found) for _, found in runs.values())
    minutes = statistics.fmean(run.get("wall_time_seconds", 0.0) for _, found in runs.values() for run in found) / 60
    return (
        f"lr {rates}; {seeds} seed{'s' if seeds > 1 else ''}; {first.get('global_step', 0)} steps on {first.get('train_samples', 0):,} "
        f"examples, max_seq_length {first.get('max_seq_length')}; {minutes:.1f} min/run"
    )


def _baselines(runs: dict[str, tuple[float | None, list[dict]]], key: str) -> dict[str, float]:
    """The no-learning scores (x 100) its runs recorded for a row's metric, when it is the task's main metric: they
    score it on the row's split (`hf_bertscratch.baselines.baseline_key`), named as BASELINE_NAMES names them."""
    first = next((found[0] for _, found in runs.values() if found), None)
    split = key.split("_", 1)[0]  # eval or test: the baselines are recorded on both
    if first is None or key != f"{split}_{first.get('main_metric')}":
        return {}
    keys = {name: baseline_key(answer, split) for answer, name in BASELINE_NAMES.items()}
    return {name: 100 * float(first[field]) for name, field in keys.items() if first.get(field) is not None}


def task_rows(runs_dir: Path) -> list[dict]:
    """Every row of the task table as data: label, the per-seed values of pretrained and scratch, the no-learning
    baselines, how."""
    rows = []
    for task, key, label in ROWS:
        runs = {init: _runs(runs_dir, task, init) for init in ("pretrained", "scratch")}
        rows.append(
            {
                "task": task,
                "key": key,
                "label": label,
                "pretrained": _percent(runs["pretrained"][1], key),
                "scratch": _percent(runs["scratch"][1], key),
                "baselines": _baselines(runs, key),
                "learning_rates": {init: rate for init, (rate, _) in runs.items()},
                "how": _how(runs),
            }
        )
    return rows


def baseline_cell(baselines: dict[str, float]) -> str:
    """ "constant answer 50.0, bag of words 88.8": a row's no-learning scores, "" for none recorded."""
    return ", ".join(f"{name} {value:.1f}" for name, value in baselines.items())


def task_table_record(runs_dir: str | Path, command: str = "") -> dict:
    """The task table as data (what README's table is rendered from, and what is committed as a record): the
    pretraining, every row's per-seed values, the machine and package versions the runs recorded, and `command`."""
    from .finetune_tasks import read_results

    runs_dir = Path(runs_dir)
    finished = [read_results(folder) for folder in sorted(runs_dir.glob("*-seed*")) if folder.is_dir()]
    finished = [run for run in finished if run]
    return {
        "command": command,
        "pretraining": pretraining_description(runs_dir),
        "rows": task_rows(runs_dir),
        "machines": sorted({run.get("machine", "?") for run in finished}),
        "runs": len(finished),
        "fine_tune_wall_seconds": round(sum(run.get("wall_time_seconds", 0.0) for run in finished)),
    }


def row_baselines(row: dict, no_learning: dict | None) -> dict[str, float]:
    """A row's no-learning scores (x 100): those its runs recorded, else those of `no_learning` (a
    `lab.task_baselines` record: task -> split -> answer -> metrics) for the row's task, split and metric."""
    if row.get("baselines"):
        return row["baselines"]
    split, metric = row["key"].split("_", 1)  # eval_accuracy, test_overall_f1
    scores = (no_learning or {}).get("tasks", {}).get(row["task"], {}).get(split, {})
    return {
        BASELINE_NAMES[name]: 100 * metrics[metric]
        for name, metrics in scores.items()
        if metrics.get(metric) is not None and name in BASELINE_NAMES
    }


def render_task_table(record: dict, no_learning: dict | None = None) -> str:
    """The markdown task table of a `task_table_record`: each task's metric from the pretrained model and from
    random weights (mean ± sd over seeds, at the learning rate chosen on dev for each), their difference, what no
    learning scores (recorded by the runs, else from `no_learning`, a `lab.task_baselines` record), the GLUE average,
    and the published scores for scale."""
    rows = [{**row, "baselines": row_baselines(row, no_learning)} for row in record["rows"]]
    with_baselines = any(row["baselines"] for row in rows)
    baseline_header = " with no learning |" if with_baselines else ""
    lines = [
        f"Pretraining: {record['pretraining']}.",
        "",
        f"| task, metric (split) | pretrained here | no pretraining | difference |{baseline_header} how (lr "
        "pretrained/scratch) |",
        "| --- | ---: | ---: | ---: |" + (" --- |" if with_baselines else "") + " --- |",
    ]
    for row in rows:
        pretrained, scratch = row["pretrained"], row["scratch"]
        baselines = f" {baseline_cell(row.get('baselines', {}))} |" if with_baselines else ""
        lines.append(
            f"| {row['label']} | **{mean_cell(pretrained)}** | {mean_cell(scratch)} | {_difference(pretrained, scratch)} |"
            f"{baselines} {row['how']} |"
        )
    average = {init: glue_average(rows, init) for init in ("pretrained", "scratch")}
    cells = [f"{value:.1f}" if value is not None else "incomplete" for value in average.values()]
    difference = f"{average['pretrained'] - average['scratch']:+.1f}" if None not in average.values() else ""
    lines.append(
        f"| GLUE average of the five dev tasks above | **{cells[0]}** | {cells[1]} | {difference} |"
        + (" |" if with_baselines else "")
        + " |"
    )
    lines += [
        "",
        "| published (GLUE: test server; CoNLL-2003, IMDB: test) | Google BERT-Tiny (2/128) | Google BERT-Mini "
        "(4/256) | larger reference |",
        "| --- | ---: | ---: | --- |",
    ]
    for label, tiny, mini, other, name in REFERENCES:
        show = [f"{value:.1f}" if value is not None else "" for value in (tiny, mini)]
        lines.append(f"| {label} | {show[0]} | {show[1]} | {f'{other:.1f} ({name})' if other else ''} |")
    if with_baselines and any(not row.get("baselines") for row in record["rows"]) and no_learning:
        lines += ["", f"No learning: `{no_learning['command']}` ({no_learning.get('date', '?')})."]
    if record.get("command"):
        machines = "; ".join(record.get("machines", [])) or "?"
        minutes = record.get("fine_tune_wall_seconds", 0) / 60
        lines += [
            "",
            f"Made by `{record['command']}`: {record.get('runs', 0)} fine-tuning runs, {minutes:.0f} min of "
            f"fine-tuning wall time in all (two runs at a time) on {machines}.",
        ]
    return "\n".join(lines) + "\n"


DEFAULT_COMMAND = "bash lab/reproduce_results.sh"


def results_table(runs_dir: str | Path, command: str = DEFAULT_COMMAND) -> str:
    """The markdown task table for a reproduce_results.sh folder (`render_task_table` of its record)."""
    return render_task_table(task_table_record(runs_dir, command))


README_BLOCK = ("<!-- task-table:start -->\n", "<!-- task-table:end -->")


def replace_block(text: str, table: str, block: tuple[str, str] = README_BLOCK) -> str:
    """`text` with the part between the block's start and end markers replaced by `table`."""
    start, end = block
    if start not in text or end not in text:
        raise ValueError(f"No {start.strip()} ... {end} block to replace.")
    head, rest = text.split(start, 1)
    return head + start + table + end + rest.split(end, 1)[1]


def readme_block(text: str, block: tuple[str, str] = README_BLOCK) -> str:
    """What stands between the block's markers in `text`."""
    start, end = block
    return text.split(start, 1)[1].split(end, 1)[0]


def glue_average(rows: list[dict], init: str) -> float | None:
    """The mean over `GLUE_AVERAGE`'s five dev tasks of each one's mean for `init`; None while one has no run."""
    values = []
    for task, key in GLUE_AVERAGE:
        row = next(r for r in rows if r["task"] == task and r["key"] == key)
        if not row[init]:
            return None
        values.append(statistics.fmean(row[init]))
    return statistics.fmean(values)


# ------------------------------------------------------------------------------------------ the report's blocks
TASK_TABLE_RECORD = "results/task_table.json"
TASK_TABLE_CHART = "docs/images/task_table.png"
TASK_BASELINES_RECORD = "results/task_baselines.json"  # `python -m lab.task_baselines`: the no-learning column
# The task table of README's quick start's own model (WikiText-2, 8.5 minutes) against random weights.
QUICK_START_TASKS_RECORD = "results/quick-start-tasks.json"
QUICK_START_TASKS_COMMAND = (
    'QUICK_START=1 TASKS="imdb sst2 cola mrpc stsb rte conll2003" bash lab/reproduce_results.sh runs/quick-start-tasks'
)
QUICK_START_TASKS_BLOCK = ("<!-- quick-start-tasks:start -->\n", "<!-- quick-start-tasks:end -->")


def readme_task_table_block(sources: Sources) -> str | None:
    """README's task table from `TASK_TABLE_RECORD` with the no-learning column of `TASK_BASELINES_RECORD`; None (the
    block left as it is) while the record does not exist."""
    record = sources.record(TASK_TABLE_RECORD)
    return None if record is None else render_task_table(record, sources.record(TASK_BASELINES_RECORD))


def quick_start_tasks_block(sources: Sources) -> str:
    """docs/results.md's task table of README's quick-start model, or the commands that make its record."""
    return sources.render_record(
        QUICK_START_TASKS_RECORD,
        lambda record: render_task_table(record, sources.record(TASK_BASELINES_RECORD)),
        f"`{QUICK_START_TASKS_COMMAND}`, then `python -m lab.results_table results/task-runs/quick-start-tasks --record "
        f"{QUICK_START_TASKS_RECORD} --command '{QUICK_START_TASKS_COMMAND}'`",
    )


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


def task_table_chart(sources: Sources) -> Callable[[Path], Path] | None:
    """What draws `TASK_TABLE_CHART` from `TASK_TABLE_RECORD`, or None while it does not exist."""
    record = sources.record(TASK_TABLE_RECORD)
    return None if record is None else lambda path: draw_task_table_chart(record, path)


@dataclass
class ResultsTableArguments:
    """Where the runs are and where the table goes."""

    runs_dir: str | None = field(
        default=None,
        metadata={
            "help": "The folder reproduce_results.sh wrote (pretrain/, <task>-<init>-lr<lr>-seed<seed>/); "
            "may also be given as the first argument, without --runs_dir."
        },
    )
    output: str | None = field(default=None, metadata={"help": "Markdown file to write; default: print only."})
    record: str | None = field(
        default=None, metadata={"help": "Write the table's data as JSON here (e.g. results/task_table.json)."}
    )
    from_record: str | None = field(
        default=None, metadata={"help": "Render a JSON record written by --record instead of reading runs."}
    )
    readme: str | None = field(
        default=None, metadata={"help": "Replace the task-table block of this markdown file (e.g. README.md)."}
    )
    command: str = field(default=DEFAULT_COMMAND, metadata={"help": "The command the record says made it."})


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write) the task table of a runs folder or of a committed record."""
    # the runs folder may also be given positionally
    (args,) = parse_args_or_json(ArgumentParser(ResultsTableArguments), argv, positional=("runs_dir",))
    if args.from_record:
        record = json.loads(Path(args.from_record).read_text(encoding="utf-8"))
    else:
        if not args.runs_dir or not Path(args.runs_dir).is_dir():
            raise ValueError(
                f"runs_dir {args.runs_dir!r} is not a folder; expected the output of reproduce_results.sh "
                "(or give --from_record)."
            )
        record = task_table_record(args.runs_dir, args.command)
    table = render_task_table(record)
    if args.record:
        write_text_atomically(args.record, json.dumps(record, indent=1) + "\n")
    if args.output:
        write_text_atomically(args.output, table)
    if args.readme:
        path = Path(args.readme)
        write_text_atomically(path, replace_block(path.read_text(encoding="utf-8"), table))
    print(table, end="")


if __name__ == "__main__":
    main()
