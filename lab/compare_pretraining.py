"""Compare pretraining recipes at equal CPU time, by what they give on the task table.

    python -m lab.compare_pretraining --runs_dir runs/pretraining-comparison [--minutes 60]

Every recipe is `lab/reproduce_results.sh RUNS_DIR/<recipe>` with the recipe's settings (`RECIPES`): the same
text (the IMDB train reviews), the same minutes of pretraining on the same machine, then the pretrained model
fine-tuned on the GLUE tasks and CoNLL-2003 with the task table's epochs, lengths, seeds and learning-rate choice on
dev (`task_runs.RECIPES`); the from-scratch runs are the task table's and are not repeated here. The `mini` recipe
takes the objective of whichever of `mlm` and `electra` has the higher GLUE average, so it runs after both;
`mlm+tasks+nsp` is `mlm+tasks` with next-sentence prediction added on the tasks' text (the sequence heads read the
pooled `[CLS]`, which masked-LM alone never trains); it continues `mlm+tasks`' own general-text stage (a copy of its
finished `pretrain` folder), so the two rows differ only in their task-text stage. Finished stages and runs are skipped and interrupted ones
resumed (reproduce_results.sh does), so the comparison can simply be started again; `RUNS_DIR/comparison.md` and
`comparison.json` are rewritten after every recipe.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from argparse import RawDescriptionHelpFormatter
from dataclasses import dataclass, field
from pathlib import Path

from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.records import RunStart, package_versions
from hf_bertscratch.run_folder import write_text_atomically

from .finetune_tasks import task_recipe
from .report_format import Sources
from .results_table import (
    GLUE_AVERAGE,
    REFERENCES,
    ROWS,
    glue_average,
    mean_cell,
    objective_name,
    pretraining_description,
    replace_block,
    stage_totals,
    task_rows,
)

ROOT = Path(__file__).resolve().parents[1]
# The task table's tasks the comparison fine-tunes on, the short runs first (IMDB, the longest, is left out).
COMPARISON_TASKS = ("cola", "mrpc", "stsb", "rte", "conll2003", "sst2")
# The columns of the table: the main metric of each task (CoNLL-2003 on its test split, as NER papers report it).
COLUMNS = (
    ("cola", "eval_matthews_correlation", "CoLA MCC"),
    ("sst2", "eval_accuracy", "SST-2 acc."),
    ("mrpc", "eval_f1", "MRPC F1"),
    ("stsb", "eval_spearmanr", "STS-B Spearman"),
    ("rte", "eval_accuracy", "RTE acc."),
    ("conll2003", "test_overall_f1", "CoNLL-2003 F1 (test)"),
)
# The share of the budget the mlm+tasks recipe spends on the tasks' own text, after masked-LM on the general text.
TASK_TEXT_SHARE = 0.25
README_BLOCK = ("<!-- pretraining-comparison:start -->\n", "<!-- pretraining-comparison:end -->")
COMPARISON_RECORD = "results/pretraining_comparison.json"  # what docs/results.md's block is rendered from


@dataclass(frozen=True)
class Recipe:
    """One row of the comparison: what it is, and the reproduce_results.sh settings that make it.

    Attributes:
        what: the row's description in the table.
        settings: environment variables for reproduce_results.sh beyond the comparison's common ones.
        task_text_share: the share of the budget spent on the tasks' own text after the general text (0: none).
        objective_of_best: take OBJECTIVE from the better of the `mlm` and `electra` rows.
        first_stage_of: the recipe whose finished general-text stage ("pretrain") this one continues instead of
            training its own copy of it (the same settings and seed), so that the two rows differ only in what
            follows it.
    """

    what: str
    settings: dict[str, str] = field(default_factory=dict)
    task_text_share: float = 0.0
    objective_of_best: bool = False
    first_stage_of: str | None = None


RECIPES: dict[str, Recipe] = {
    "mlm": Recipe("masked-LM (the package's recipe), tiny"),
    "electra": Recipe(
        "ELECTRA replaced-token detection after a masked-LM start of the first quarter, generator 1/4 as wide, tiny",
        {"OBJECTIVE": "electra"},
    ),
    "mlm+tasks": Recipe(
        "masked-LM, the last quarter of the budget on the tasks' own unlabelled train text, tiny",
        task_text_share=TASK_TEXT_SHARE,
    ),
    "mini": Recipe("the better objective of mlm and electra, mini (4 layers, H=256)", {"SIZE": "mini"}, 0.0, True),
    "mlm+tasks+nsp": Recipe(
        "as mlm+tasks, with next-sentence prediction on the tasks' text (a pair's second text follows its first), tiny",
        {"TASK_TEXT_OBJECTIVE": "mlm_nsp"},
        TASK_TEXT_SHARE,
        first_stage_of="mlm+tasks",
    ),
}
OBJECTIVE_RECIPES = ("mlm", "electra")


def recipe_environment(
    recipe: Recipe,
    minutes: float,
    objective: str | None = None,
    smoke: bool = False,
    tasks: tuple[str, ...] | list[str] = COMPARISON_TASKS,
) -> dict:
    """reproduce_results.sh's settings for one recipe: `minutes` of pretraining in one stage of 128-token blocks (the
    GLUE and CoNLL-2003 runs read at most 128 tokens), split with the tasks' text when the recipe asks, and
    fine-tuning of the pretrained model only, on `tasks`."""
    task_minutes = round(minutes * recipe.task_text_share, 2)
    settings = {
        "PRETRAIN_MINUTES": f"{minutes - task_minutes:g}",
        "LONG_MINUTES": "0",
        "TASK_TEXT_MINUTES": f"{task_minutes:g}",
        "TASK_TEXT": " ".join(tasks),
        "INITS": "pretrained",
        "TASKS": " ".join(tasks),
        "SIZE": "tiny",
        **recipe.settings,
        "OBJECTIVE": objective or recipe.settings.get("OBJECTIVE", "mlm"),
    }
    # Size and objectives named, not left to reproduce_results.sh's defaults (which follow this comparison's winner).
    settings.setdefault("TASK_TEXT_OBJECTIVE", settings["OBJECTIVE"])
    return {**settings, "SMOKE": "1"} if smoke else settings


def recipe_row(name: str, folder: Path, smoke: bool = False) -> dict:
    """One recipe's row as data: its pretraining, tokens and minutes, each column's per-seed values (at the
    learning rate chosen on dev), the columns still short of their task's seeds ("2 of 5 seeds"), and the GLUE
    average (of the runs so far)."""
    rows = task_rows(folder)
    by_key = {(row["task"], row["key"]): row for row in rows}
    scores = {label: by_key[task, key]["pretrained"] for task, key, label in COLUMNS}
    seeds = {label: len(task_recipe(task, smoke).seeds) for task, _, label in COLUMNS}
    short = {
        label: f"{len(scores[label])} of {seeds[label]} seeds" for label in scores if len(scores[label]) < seeds[label]
    }
    tokens, seconds = stage_totals(folder)
    return {
        "recipe": name,
        "what": RECIPES[name].what,
        "objective": objective_name(folder / "pretrain"),
        "pretraining": pretraining_description(folder),
        "train_tokens": tokens,
        "train_minutes": round(seconds / 60, 1),
        "scores": scores,
        "short_of_seeds": short,
        "glue_average": glue_average(rows, "pretrained"),
    }


def glue_complete(row: dict) -> bool:
    """Whether every GLUE column of a row has all its seeds, so that its average can be compared with another's."""
    glue_labels = {label for task, key, label in COLUMNS if (task, key) in GLUE_AVERAGE}
    return row["glue_average"] is not None and not glue_labels & set(row.get("short_of_seeds", {}))


def best_objective(rows: list[dict]) -> str | None:
    """The objective (mlm or electra) whose row has the higher GLUE average; None until both rows have all their
    GLUE runs."""
    averages = {
        row["recipe"]: row["glue_average"] for row in rows if row["recipe"] in OBJECTIVE_RECIPES and glue_complete(row)
    }
    if len(averages) < len(OBJECTIVE_RECIPES):
        return None
    return max(OBJECTIVE_RECIPES, key=lambda name: (averages[name], name == "mlm"))


def render_comparison(record: dict) -> str:
    """The markdown table of a comparison record, with Google BERT-Tiny's published scores for scale."""
    labels = [label for _, _, label in COLUMNS]
    budget = (
        "a few steps (a smoke run: wiring, not results)" if record.get("smoke") else f"{record['minutes']:g} minutes"
    )
    lines = [
        f"Each recipe: {budget} of pretraining on {record['text']}, then fine-tuned as the task table (learning "
        "rate chosen on dev, mean ± sd over its seeds).",
        "",
        f"| recipe | tokens seen | {' | '.join(labels)} | GLUE average |",
        "| --- | ---: |" + " ---: |" * (len(labels) + 1),
    ]
    # Only rows with every GLUE run compete for the bold: a partial row's first seed chose its learning rate.
    best = max((row["glue_average"] for row in record["rows"] if glue_complete(row)), default=None)
    for row in record["rows"]:
        short = row.get("short_of_seeds", {})
        cells = [_cell(row["scores"][label], short.get(label)) for label in labels]
        objective = f" (it was {row['objective']})" if RECIPES[row["recipe"]].objective_of_best else ""
        average = row["glue_average"]
        shown = "incomplete" if average is None else f"{average:.1f}"
        if average is not None and not glue_complete(row):
            shown += " (runs missing)"
        elif average is not None and average == best:
            shown = f"**{shown}**"
        lines.append(
            f"| `{row['recipe']}`: {row['what']}{objective} | {row['train_tokens'] / 1e6:.1f}M in {row['train_minutes']:.0f} "
            f"min | {' | '.join(cells)} | {shown} |"
        )
    published = dict((label, tiny) for label, tiny, *_ in REFERENCES)
    reference = [published.get(_reference_label(task, key)) for task, key, _ in COLUMNS]
    lines.append(
        "| Google BERT-Tiny, published (GLUE test server, not dev) | | "
        + " | ".join("" if value is None else f"{value:.1f}" for value in reference)
        + f" | {statistics.fmean(v for v in reference[:5] if v is not None):.1f} |"
    )
    lines += ["", "What each pretraining reached, on its held-out text:", ""]
    lines += [f"- `{row['recipe']}`: {row['pretraining']}" for row in record["rows"]]
    written = f", written {record['date'][:10]} at commit {record['commit'] or 'unknown'}" if "date" in record else ""
    lines += ["", f"Made by `{record['command']}` on {record['machine']}{written}."]
    return "\n".join(lines) + "\n"


def comparison_block(sources: Sources) -> str:
    """docs/results.md's comparison block: `render_comparison` of `COMPARISON_RECORD`, or the command that writes it."""
    return sources.render_record(
        COMPARISON_RECORD, render_comparison, f"`python -m lab.compare_pretraining --record {COMPARISON_RECORD}`"
    )


def _cell(values: list[float], short: str | None) -> str:
    """A column's mean ± sd, and how many of its seeds ran when some are missing ("52.0 (1 of 3 seeds)")."""
    return mean_cell(values) + (f" ({short})" if short and values else "")


def _reference_label(task: str, key: str) -> str:
    """The label of `REFERENCES` for a column: the task table's label without its split."""
    label = next(label for t, k, label in ROWS if (t, k) == (task, key))
    return label.rsplit(" (", 1)[0]


@dataclass
class ComparisonArguments:
    """Where the runs go, the budget, and which recipes run."""

    runs_dir: str = field(
        default="runs/pretraining-comparison", metadata={"help": "Folder of one sub-folder per recipe."}
    )
    minutes: float = field(default=60.0, metadata={"help": "Pretraining minutes of every recipe (the equal budget)."})
    recipes: list[str] = field(
        default_factory=lambda: list(RECIPES), metadata={"help": f"Recipes to run, of {', '.join(RECIPES)}."}
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "Local data folder (default: $BERTSCRATCH_DATA_DIR, else ../shared/data)."}
    )
    record: str | None = field(
        default=None, metadata={"help": "Also write the record here (e.g. results/pretraining_comparison.json)."}
    )
    readme: str | None = field(
        default=None, metadata={"help": "Replace the pretraining-comparison block of this markdown file."}
    )
    tasks: list[str] = field(
        default_factory=lambda: list(COMPARISON_TASKS),
        metadata={"help": "Tasks to fine-tune on (and whose text mlm+tasks reads); the table's columns are fixed."},
    )
    smoke: bool = field(default=False, metadata={"help": "Check the wiring in minutes (reproduce_results' SMOKE=1)."})
    record_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of each recipe's run records (RECORDS=<record_dir>/<recipe> for reproduce_results.sh); "
            "default: reproduce_results.sh's, results/task-runs/<recipe>."
        },
    )


def _machine(folder: Path) -> str:
    """The machine the fine-tuning runs recorded, e.g. 'CPU (Intel(R) Xeon(R) Processor), 1 thread'."""
    for path in sorted(folder.glob("*-seed*/all_results.json")):
        machine = json.loads(path.read_text(encoding="utf-8")).get("machine")
        if machine:
            return machine
    return "?"


def comparison_record(args: ComparisonArguments, written: RunStart | None = None) -> dict:
    """The comparison as data: one row per recipe whose pretraining finished, in `RECIPES` order (a recipe still
    pretraining has no tokens or scores to show yet). `written` (default: now) gives the code that wrote the table,
    when, with which packages (the runs name their own): main takes it at its start, before its own record makes
    the checkout differ from its commit."""
    runs_dir = Path(args.runs_dir)
    names = [name for name in RECIPES if (runs_dir / name / "pretrain" / "all_results.json").is_file()]
    written = written or RunStart.now()
    return {
        "command": f"python -m lab.compare_pretraining --minutes {args.minutes:g}"
        + (" --smoke true" if args.smoke else ""),
        "commit": written.commit,
        "date": written.date,
        "versions": package_versions(onnxruntime=False),
        "minutes": args.minutes,
        "smoke": args.smoke,
        "text": "the IMDB train reviews",
        "machine": next((m for m in (_machine(runs_dir / n) for n in names) if m != "?"), "?"),
        "rows": [recipe_row(name, runs_dir / name, args.smoke) for name in names],
    }


def write_outputs(args: ComparisonArguments, record: dict) -> str:
    """comparison.json and comparison.md in the runs folder, and the record and README block asked for."""
    table = render_comparison(record)
    runs_dir = Path(args.runs_dir)
    text = json.dumps(record, indent=1) + "\n"
    for path, content in (
        (runs_dir / "comparison.json", text),
        (runs_dir / "comparison.md", table),
        *([(Path(args.record), text)] if args.record else []),
    ):
        write_text_atomically(path, content)
    if args.readme:
        readme = Path(args.readme)
        write_text_atomically(readme, replace_block(readme.read_text(encoding="utf-8"), table, README_BLOCK))
    return table


def share_first_stage(runs_dir: Path, name: str) -> None:
    """Give recipe `name` the finished general-text stage of the recipe it shares it with (`first_stage_of`): a copy
    of that `pretrain` folder without its checkpoints, made under a temporary name and renamed, so an interrupted copy
    is never taken for a finished stage. Nothing to do when the recipe shares no stage or has its own already."""
    source_name = RECIPES[name].first_stage_of
    target = runs_dir / name / "pretrain"
    if source_name is None or (target / "all_results.json").is_file():
        return
    source = runs_dir / source_name / "pretrain"
    if not (source / "all_results.json").is_file():
        raise ValueError(
            f"Recipe {name!r} continues the first stage of {source_name!r}, which has not finished in {source}; run "
            f"{source_name!r} first (it comes first in the default --recipes)."
        )
    if target.exists():
        raise ValueError(f"{target} exists but is not a finished stage; remove it to take {source}'s.")
    partial = target.with_name(target.name + ".copying")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial, ignore=shutil.ignore_patterns("checkpoint-*"))
    partial.rename(target)
    log = source.with_name(source.name + ".log")
    if log.is_file():
        shutil.copy2(log, target.with_name(target.name + ".log"))
    print(f"{target}: the finished first stage of {source_name!r} ({source})", flush=True)


def run_recipe(args: ComparisonArguments, name: str, objective: str | None) -> None:
    """reproduce_results.sh for one recipe into RUNS_DIR/<name> (finished parts skipped, interrupted ones resumed),
    after taking the first stage it shares with another recipe."""
    environment = recipe_environment(RECIPES[name], args.minutes, objective, args.smoke, args.tasks)
    if args.data_dir:
        environment["DATA_DIR"] = args.data_dir
    if args.record_dir:
        environment["RECORDS"] = str(Path(args.record_dir) / name)
    folder = Path(args.runs_dir) / name
    share_first_stage(Path(args.runs_dir), name)
    print(f"== {name}: {' '.join(f'{k}={v}' for k, v in environment.items())}", flush=True)
    done = subprocess.run(["bash", str(ROOT / "lab" / "reproduce_results.sh"), str(folder)],
                          env={**os.environ, **environment}, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"Recipe {name!r} failed (exit {done.returncode}); its logs are in {folder}.")


def main(argv: list[str] | None = None) -> None:
    """Run the recipes asked for (see the module docstring and `--help`), then write the table."""
    parser = ArgumentParser(ComparisonArguments, description=__doc__, formatter_class=RawDescriptionHelpFormatter)
    (args,) = parse_args_or_json(parser, argv)
    started = RunStart.now()
    unknown = sorted(set(args.recipes) - set(RECIPES))
    if unknown:
        raise ValueError(f"Unknown recipes {unknown}; expected some of {list(RECIPES)}.")
    unknown_tasks = sorted(set(args.tasks) - set(COMPARISON_TASKS))
    if unknown_tasks:
        raise ValueError(f"Unknown tasks {unknown_tasks}; expected some of {list(COMPARISON_TASKS)}.")
    if args.minutes <= 0:
        raise ValueError(f"minutes must be a positive budget, got {args.minutes:g}.")
    for name in [name for name in RECIPES if name in args.recipes]:
        objective = None
        if RECIPES[name].objective_of_best:
            objective = best_objective(comparison_record(args)["rows"])
            if objective is None:
                raise ValueError(
                    f"Recipe {name!r} takes the better objective of {OBJECTIVE_RECIPES}, and they have not both "
                    "finished; run them first (they come first in the default --recipes)."
                )
        run_recipe(args, name, objective)
        print(write_outputs(args, comparison_record(args, started)), end="", flush=True)


__all__ = [
    "COLUMNS",
    "COMPARISON_TASKS",
    "RECIPES",
    "ComparisonArguments",
    "Recipe",
    "best_objective",
    "comparison_record",
    "glue_complete",
    "recipe_environment",
    "render_comparison",
]


if __name__ == "__main__":
    main()
