"""Build the README results table from the run folders of `scripts/reproduce_results.sh`.

Each row is read from a run's `all_results.json`, `config.json` and `trainer_state.json`, so every number carries
how it was produced: model size, pretraining and fine-tuning steps, wall time and machine. Published reference
points (`REFERENCES`) are appended with their sources.

    python scripts/results_table.py runs/results --output runs/results/results.md
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser


# Run sub-folder -> (task label, initialisation label). The pretraining run is "pretrain".
RUNS: dict[str, tuple[str, str]] = {
    "sst2-pretrained": ("SST-2", "pretrained here"),
    "sst2-scratch": ("SST-2", "no pretraining"),
    "imdb-pretrained": ("IMDB", "pretrained here"),
    "imdb-scratch": ("IMDB", "no pretraining"),
}

# (task, model, accuracy %, how it was produced, source)
REFERENCES: tuple[tuple[str, str, float, str, str], ...] = (
    ("SST-2", "Google BERT-Tiny (2/128)", 83.2, "GLUE **test** server score; pretrained on BookCorpus+Wikipedia",
     "Turc et al. 2019, *Well-Read Students Learn Better*, table in github.com/google-research/bert README"),
    ("SST-2", "Google BERT-Mini (4/256)", 85.9, "GLUE **test** server score; pretrained on BookCorpus+Wikipedia",
     "Turc et al. 2019, same table"),
    ("SST-2", "BERT-base (12/768)", 93.5, "GLUE **test** server score, 4 TPU-days pretraining",
     "Devlin et al. 2019, *BERT*, Table 1"),
    ("IMDB", "NBSVM-bi (bigram NB-SVM)", 91.2, "full 25k test set, no neural pretraining",
     "Wang & Manning 2012, *Baselines and Bigrams*, Table 2 (91.22)"),
    ("IMDB", "BERT-base (12/768) fine-tuned", 94.6, "full 25k test set, test error 5.40%, max length 512",
     "Sun et al. 2019, *How to Fine-Tune BERT for Text Classification?*"),
)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _size(config: dict) -> str:
    """"2L/128H, 1.3M params"-style description from a config.json."""
    if not config:
        return "?"
    return f"{config.get('num_hidden_layers')}L/{config.get('hidden_size')}H, vocab {config.get('vocab_size')}"


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.1f} min"


def pretraining_description(run_dir: Path) -> str:
    """How the pretrained checkpoint was made: steps, batch x length, wall time, MLM accuracy/perplexity."""
    results = _read_json(run_dir / "all_results.json")
    state = _read_json(run_dir / "trainer_state.json")
    if not results:
        return "(pretraining run missing)"
    steps = state.get("global_step", "?")
    tokens = results.get("train_tokens")
    parts = [f"{steps} MLM steps"]
    if tokens:
        parts.append(f"{tokens / 1e6:.1f}M tokens")
    parts.append(f"{_minutes(results.get('train_wall_time_seconds', results.get('train_runtime')))} train")
    if "eval_perplexity" in results:
        parts.append(f"MLM ppl {results['eval_perplexity']:.0f}, masked acc {100 * results['eval_accuracy']:.1f}%")
    return ", ".join(parts)


@dataclass
class RunRow:
    """One fine-tuning run, as read from its folder."""

    task: str
    init: str
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


def read_run(run_dir: Path, task: str, init: str) -> RunRow | None:
    """The row for one fine-tuning run folder, or None if it has not finished (no all_results.json)."""
    results = _read_json(run_dir / "all_results.json")
    if not results:
        return None
    return RunRow(
        task=task,
        init=init,
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


def results_table(runs_dir: str | Path) -> str:
    """The markdown table (ours first, then the published references) for a reproduce_results.sh folder."""
    runs_dir = Path(runs_dir)
    pretraining = pretraining_description(runs_dir / "pretrain")
    lines = [
        "| task (split) | model | pretraining | accuracy % | F1 % | how it was produced |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for folder, (task, init) in RUNS.items():
        row = read_run(runs_dir / folder, task, init)
        split = "dev" if task == "SST-2" else "test"
        if row is None:
            lines.append(f"| {task} ({split}) | BertScratch | {init} | not run | | `{folder}` missing |")
            continue
        how = (
            f"{row.size}; fine-tuned {row.steps} steps on {row.train_samples:,} train examples, "
            f"max_seq_length {row.max_seq_length} ({row.truncation}); evaluated on {row.eval_samples:,} {split} "
            f"examples; fine-tune wall time {_minutes(row.wall_seconds)} on {row.machine}"
        )
        pre = pretraining if init == "pretrained here" else "none (random init, same config and tokenizer)"
        f1 = f"{row.f1:.1f}" if row.f1 is not None else ""
        lines.append(f"| {task} ({split}) | BertScratch | {pre} | **{row.accuracy:.1f}** | {f1} | {how} |")
    for task, model, accuracy, how, source in REFERENCES:
        split = "test"
        lines.append(f"| {task} ({split}) | {model} | published | {accuracy:.1f} | | {how}; {source} |")
    return "\n".join(lines) + "\n"


@dataclass
class ResultsTableArguments:
    """Where the runs are and where the table goes."""

    runs_dir: str = field(metadata={"help": "The folder reproduce_results.sh wrote (pretrain/, sst2-*/, imdb-*/)."})
    output: str | None = field(default=None, metadata={"help": "Markdown file to write; default: print only."})


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write) the results table for a runs folder."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-"):  # the runs folder may also be given positionally
        argv = ["--runs_dir", *argv]
    (args,) = HfArgumentParser(ResultsTableArguments).parse_args_into_dataclasses(args=argv)
    if not Path(args.runs_dir).is_dir():
        raise ValueError(f"runs_dir {args.runs_dir!r} is not a folder; expected the output of reproduce_results.sh.")
    table = results_table(args.runs_dir)
    if args.output:
        Path(args.output).write_text(table, encoding="utf-8")
    print(table, end="")


if __name__ == "__main__":
    main()
