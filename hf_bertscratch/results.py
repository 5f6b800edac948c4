"""Build the README results table from the run folders of `scripts/reproduce_results.sh`.

Each row is read from a run's `all_results.json`, `config.json` and `trainer_state.json`, so every number carries
how it was produced: model size, pretraining and fine-tuning steps, wall time and machine. Published reference
points (`REFERENCES`) are appended with their sources.

    python scripts/results_table.py runs/results --output runs/results/results.md
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from .arguments import parse_args_or_json

# Run name -> (task label, initialisation label). A run's fine-tunes live in `<name>-seed<N>` folders, one per
# fine-tuning seed; the pretraining run is "pretrain".
RUNS: dict[str, tuple[str, str]] = {
    "sst2-pretrained": ("SST-2", "pretrained here"),
    "sst2-scratch": ("SST-2", "no pretraining"),
    "imdb-pretrained": ("IMDB", "pretrained here"),
    "imdb-scratch": ("IMDB", "no pretraining"),
}

# (task, model, accuracy %, how it was produced, source)
REFERENCES: tuple[tuple[str, str, float, str, str], ...] = (
    (
        "SST-2",
        "Google BERT-Tiny (2/128)",
        83.2,
        "GLUE **test** server score; pretrained on BookCorpus+Wikipedia",
        "Turc et al. 2019, *Well-Read Students Learn Better*, table in github.com/google-research/bert README",
    ),
    (
        "SST-2",
        "Google BERT-Mini (4/256)",
        85.9,
        "GLUE **test** server score; pretrained on BookCorpus+Wikipedia",
        "Turc et al. 2019, same table",
    ),
    (
        "SST-2",
        "BERT-base (12/768)",
        93.5,
        "GLUE **test** server score, 4 TPU-days pretraining",
        "Devlin et al. 2019, *BERT*, Table 1",
    ),
    (
        "IMDB",
        "NBSVM-bi (bigram NB-SVM)",
        91.2,
        "full 25k test set, no neural pretraining",
        "Wang & Manning 2012, *Baselines and Bigrams*, Table 2 (91.22)",
    ),
    (
        "IMDB",
        "BERT-base (12/768) fine-tuned",
        94.6,
        "full 25k test set, test error 5.40%, max length 512",
        "Sun et al. 2019, *How to Fine-Tune BERT for Text Classification?*",
    ),
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
# teach the positions IMDB fine-tuning reads (BERT's own recipe: most steps short, the last ones long).
PRETRAINING_STAGES = ("pretrain", "pretrain-long")


def _stage(run_dir: Path) -> tuple[str, dict] | None:
    """'6000 steps of 64 x 128 tokens' (with ' in a 40-minute budget' for a time-budgeted stage) and the stage's
    all_results.json, or None if the stage did not finish."""
    results = _read_json(run_dir / "all_results.json")
    if not results:
        return None
    steps = _read_json(run_dir / "trainer_state.json").get("global_step", 0)
    batch = results.get("train_effective_batch_size", 0)
    length = results.get("max_seq_length") or (results.get("train_tokens", 0) // max(steps * batch, 1))
    budget = f" in a {results['train_budget_minutes']:g}-minute budget" if results.get("train_budget_minutes") else ""
    return f"{steps} steps of {batch} x {length} tokens{budget}", results


def pretraining_description(runs_dir: Path) -> str:
    """How the pretrained checkpoint was made: each stage's steps and shape, tokens, wall time, and the final
    stage's MLM accuracy/perplexity on held-out text."""
    stages = [stage for stage in (_stage(runs_dir / name) for name in PRETRAINING_STAGES) if stage is not None]
    if not stages:
        return "(pretraining run missing)"
    tokens = sum(results.get("train_tokens", 0) for _, results in stages)
    seconds = sum(results.get("train_wall_time_seconds", results.get("train_runtime", 0.0)) for _, results in stages)
    parts = [
        "MLM " + " then ".join(shape for shape, _ in stages),
        f"{tokens / 1e6:.1f}M tokens",
        f"{_minutes(seconds)} train",
    ]
    final = stages[-1][1]
    if "eval_perplexity" in final:
        parts.append(f"MLM ppl {final['eval_perplexity']:.0f}, masked acc {100 * final['eval_accuracy']:.1f}%")
    return ", ".join(parts)


@dataclass
class RunRow:
    """One fine-tuning run, as read from its folder."""

    task: str
    init: str
    seed: int
    accuracy: float
    f1: float | None
    size: str
    steps: int
    train_samples: int
    eval_samples: int
    max_seq_length: int
    truncation: str
    wall_seconds: float
    machine: str


def _folder_seed(run_dir: Path) -> int | None:
    """N of a `<name>-seed<N>` folder, or None for any other name."""
    suffix = run_dir.name.rsplit("-seed", 1)[-1]
    return int(suffix) if "-seed" in run_dir.name and suffix.isdigit() else None


def read_run(run_dir: Path, task: str, init: str) -> RunRow | None:
    """The row for one fine-tuning run folder, or None if it has not finished (no all_results.json)."""
    results = _read_json(run_dir / "all_results.json")
    if not results:
        return None
    return RunRow(
        task=task,
        init=init,
        seed=results.get("seed", _folder_seed(run_dir)),
        accuracy=100 * results["eval_accuracy"],
        f1=100 * results["eval_f1"] if "eval_f1" in results else None,
        size=_size(_read_json(run_dir / "config.json")),
        steps=results.get("global_step", 0),
        train_samples=results.get("train_samples", 0),
        eval_samples=results.get("eval_samples", 0),
        max_seq_length=results.get("max_seq_length", 0),
        truncation=results.get("truncation", "?"),
        wall_seconds=results.get("wall_time_seconds", results.get("train_runtime", 0.0)),
        machine=results.get("machine", "?"),
    )


def read_seeds(runs_dir: Path, name: str, task: str, init: str) -> list[RunRow]:
    """The finished `<name>-seed<N>` runs of one table row, by seed."""
    folders = [path for path in runs_dir.glob(f"{name}-seed*") if _folder_seed(path) is not None]
    rows = [read_run(folder, task, init) for folder in folders]
    return sorted((row for row in rows if row is not None), key=lambda row: row.seed)


def _mean_and_spread(values: list[float]) -> tuple[float, str]:
    """The mean, and " ± sd" (sample standard deviation) when there is more than one value."""
    mean = statistics.fmean(values)
    return mean, f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""


def _row(runs: list[RunRow], split: str, pretraining: str) -> str:
    first = runs[0]
    accuracy, spread = _mean_and_spread([run.accuracy for run in runs])
    f1s = [run.f1 for run in runs if run.f1 is not None]
    f1 = f"{_mean_and_spread(f1s)[0]:.1f}" if f1s else ""
    if len(runs) == 1:
        seeds = f"fine-tuning seed {first.seed}"
    else:
        each = ", ".join(f"{run.seed}: {run.accuracy:.1f}" for run in runs)
        seeds = f"mean ± sd over {len(runs)} fine-tuning seeds ({each})"
    wall = _minutes(sum(run.wall_seconds for run in runs) / len(runs))
    how = (
        f"{first.size}; fine-tuned {first.steps} steps on {first.train_samples:,} train examples, "
        f"max_seq_length {first.max_seq_length} ({first.truncation}); evaluated on {first.eval_samples:,} {split} "
        f"examples; {seeds}; fine-tune wall time {wall} per run on {first.machine}"
    )
    pre = pretraining if first.init == "pretrained here" else "none (random init, same config and tokenizer)"
    return f"| {first.task} ({split}) | BertScratch | {pre} | **{accuracy:.1f}**{spread} | {f1} | {how} |"


def results_table(runs_dir: str | Path) -> str:
    """The markdown table (ours first, then the published references) for a reproduce_results.sh folder."""
    runs_dir = Path(runs_dir)
    pretraining = pretraining_description(runs_dir)
    lines = [
        "| task (split) | model | pretraining | accuracy % | F1 % | how it was produced |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for name, (task, init) in RUNS.items():
        runs = read_seeds(runs_dir, name, task, init)
        split = "dev" if task == "SST-2" else "test"
        if not runs:
            lines.append(f"| {task} ({split}) | BertScratch | {init} | not run | | `{name}-seed*` missing |")
            continue
        lines.append(_row(runs, split, pretraining))
    for task, model, accuracy, how, source in REFERENCES:
        split = "test"
        lines.append(f"| {task} ({split}) | {model} | published | {accuracy:.1f} | | {how}; {source} |")
    return "\n".join(lines) + "\n"


@dataclass
class ResultsTableArguments:
    """Where the runs are and where the table goes."""

    runs_dir: str = field(
        metadata={
            "help": "The folder reproduce_results.sh wrote (pretrain/, sst2-*/, imdb-*/); "
            "may also be given as the first argument, without --runs_dir."
        }
    )
    output: str | None = field(default=None, metadata={"help": "Markdown file to write; default: print only."})


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write) the results table for a runs folder."""
    # the runs folder may also be given positionally
    (args,) = parse_args_or_json(HfArgumentParser(ResultsTableArguments), argv, positional=("runs_dir",))
    if not Path(args.runs_dir).is_dir():
        raise ValueError(f"runs_dir {args.runs_dir!r} is not a folder; expected the output of reproduce_results.sh.")
    table = results_table(args.runs_dir)
    if args.output:
        Path(args.output).write_text(table, encoding="utf-8")
    print(table, end="")


if __name__ == "__main__":
    main()
