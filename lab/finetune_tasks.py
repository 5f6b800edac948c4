"""Fine-tune one pretrained checkpoint, and the same model from random weights, on the task table.

For each task and each initialisation (pretrained, scratch) the learning rate is chosen on the task's dev set with
the first seed, as GLUE papers do (BERT picked the best of {5e-5, 4e-5, 3e-5, 2e-5} on dev), then the remaining
seeds run at the chosen rate, two runs at a time by default (`--processes`), one process each. Every run
is `scripts/finetune.py` in a folder `<task>-<init>-lr<lr>-seed<seed>`: a finished run (all_results.json) is
skipped and an interrupted one continues from its last whole checkpoint (or starts over where it was stopped while
saving its only one: `continue_flags`), so the whole sweep can be started again.

    python -m lab.finetune_tasks --runs_dir runs/results --pretrained runs/results/pretrain-long
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hf_bertscratch.arguments import ArgumentParser, parse_args_or_json
from hf_bertscratch.tasks import TASKS
from hf_bertscratch_base.run_files import continue_flags

from . import run_records

INITS = ("pretrained", "scratch")
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class TaskRecipe:
    """How one task of the table is fine-tuned.

    Attributes:
        epochs: passes over the training set.
        max_seq_length: tokens per example (per window for question answering).
        seeds: fine-tuning seeds; the first one also chooses the learning rate.
        learning_rates: the candidates tried on dev with the first seed (one candidate: no choice).
        flags: further `finetune.py` flags.
    """

    epochs: float
    max_seq_length: int
    seeds: tuple[int, ...]
    learning_rates: tuple[float, ...]
    flags: tuple[str, ...] = ()


FIVE_SEEDS = (42, 43, 44, 45, 46)
LEARNING_RATES = (1e-4, 3e-4, 1e-3)

# The table's tasks, in the order they run: the short runs first. The small GLUE dev sets (277-1,500 examples) get
# five seeds; CoNLL-2003, SST-2 and IMDB (3,453, 872 and 25,000 scored examples, and the longest runs) fewer.
RECIPES: dict[str, TaskRecipe] = {
    "cola": TaskRecipe(5, 64, FIVE_SEEDS, LEARNING_RATES),
    "mrpc": TaskRecipe(5, 128, FIVE_SEEDS, LEARNING_RATES),
    "stsb": TaskRecipe(5, 128, FIVE_SEEDS, LEARNING_RATES),
    "rte": TaskRecipe(5, 128, FIVE_SEEDS, LEARNING_RATES),
    "conll2003": TaskRecipe(3, 128, (42, 43, 44), LEARNING_RATES),
    # SST-2 and IMDB at the rate their fine-tuning defaults give a small model (tasks.TASK_DEFAULTS).
    "sst2": TaskRecipe(3, 64, (42, 43, 44), (1e-3,)),
    "imdb": TaskRecipe(3, 512, (42, 43, 44), (1e-3,)),
}


def run_name(task: str, init: str, learning_rate: float, seed: int) -> str:
    """The folder of one fine-tuning run: `<task>-<init>-lr<lr>-seed<seed>`."""
    return f"{task}-{init}-lr{learning_rate:g}-seed{seed}"


def read_results(folder: Path) -> dict | None:
    """A finished run's all_results.json, or None."""
    path = folder / "all_results.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def main_score(results: dict) -> float:
    """The score a run is judged by on dev: its task's main metric on the eval split."""
    return float(results[f"eval_{results['main_metric']}"])


def choose_learning_rate(runs_dir: Path, task: str, init: str, recipe: TaskRecipe) -> float | None:
    """The candidate whose first-seed run scored best on dev (the first candidate on ties); None until all ran."""
    scores = []
    for learning_rate in recipe.learning_rates:
        results = read_results(runs_dir / run_name(task, init, learning_rate, recipe.seeds[0]))
        if results is None:
            return None
        scores.append((main_score(results), -recipe.learning_rates.index(learning_rate), learning_rate))
    return max(scores)[2]


@dataclass
class FinetuneTasksArguments:
    """Where the runs go, what they start from, and how they share the CPU."""

    runs_dir: str = field(metadata={"help": "Folder of the run folders (and the pretraining run, if yours is there)."})
    pretrained: str = field(metadata={"help": "The pretrained checkpoint to fine-tune (its config and tokenizer also "
                                              "make the from-scratch runs)."})  # fmt: skip
    tasks: list[str] = field(
        default_factory=lambda: list(RECIPES), metadata={"help": f"Tasks to run, of {', '.join(RECIPES)}."}
    )
    inits: list[str] = field(default_factory=lambda: list(INITS), metadata={"help": "pretrained and/or scratch."})
    data_dir: str | None = field(default=None, metadata={"help": "Local data folder (default: $BERTSCRATCH_DATA_DIR)."})
    processes: int = field(default=2, metadata={"help": "Fine-tuning runs at once."})
    threads: int = field(default=1, metadata={"help": "torch threads per run."})
    batch_size: int = field(default=32, metadata={"help": "Training batch size of every run."})
    smoke: bool = field(
        default=False, metadata={"help": "Check the wiring in minutes: 2 seeds, 2 rates, a few steps, few examples."}
    )
    extra: list[str] = field(default_factory=list, metadata={"help": "Further flags for every finetune.py run."})
    record_dir: str | None = field(
        default=None,
        metadata={"help": "Folder of the runs' durable records (lab.run_records): each finished run is recorded there, "
                          "and a recorded run started from the same weights is restored instead of run again."},
    )  # fmt: skip


def _smoke(recipe: TaskRecipe) -> TaskRecipe:
    rates = recipe.learning_rates[:2]
    # 32-token examples: a head+tail recipe keeps a 16-token head (IMDB's 64 would not fit, and finetune.py refuses)
    flags = tuple(
        "16" if before == "--head_tokens" else flag for before, flag in zip(("", *recipe.flags), recipe.flags)
    )
    # every checkpoint kept: the smoke test resumes a run cut back to its first
    return TaskRecipe(1, 32, recipe.seeds[:2], rates, (*flags, "--max_train_samples", "48",
                                                       "--max_eval_samples", "24", "--keep_checkpoints", "true"))  # fmt: skip


def task_recipe(task: str, smoke: bool = False) -> TaskRecipe:
    """The runs of `task`: its `RECIPES` entry, or the smoke run's few seeds, rates, steps and examples."""
    return _smoke(RECIPES[task]) if smoke else RECIPES[task]


_PRINTING = threading.Lock()


def print_line(line: str) -> None:
    """Print one whole line from any of the sweep's threads: print() writes the text and its newline separately, so
    two threads printing at once can leave one line's newline after the other's text."""
    with _PRINTING:
        sys.stdout.write(f"{line}\n")
        sys.stdout.flush()


class Sweep:
    """The runs of one `finetune_tasks` call, each started at most once and logged to `<run>.log`."""

    def __init__(self, args: FinetuneTasksArguments, log: Callable[[str], None] = print_line) -> None:
        unknown = sorted(set(args.tasks) - set(RECIPES)) + sorted(set(args.inits) - set(INITS))
        if unknown:
            raise ValueError(f"Unknown task or init {unknown}; expected tasks of {list(RECIPES)}, inits of {INITS}.")
        if not (Path(args.pretrained) / "config.json").is_file():
            raise FileNotFoundError(f"--pretrained {args.pretrained!r} is not a model folder (no config.json).")
        self.args, self.log = args, log
        self.runs_dir = Path(args.runs_dir)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        # what each init's runs start from, checked before a recorded run is taken for one of this sweep's
        self.sources = (
            {init: run_records.fingerprint(args.pretrained, weights=init == "pretrained") for init in args.inits}
            if args.record_dir
            else {}
        )

    def recipe(self, task: str) -> TaskRecipe:
        return task_recipe(task, self.args.smoke)

    def command(self, task: str, init: str, learning_rate: float, seed: int, folder: Path) -> list[str]:
        recipe, args = self.recipe(task), self.args
        command = [sys.executable, str(ROOT / "scripts" / "finetune.py"), "--model_name_or_path", args.pretrained]
        command += ["--task", task, "--seed", str(seed), "--learning_rate", f"{learning_rate:g}"]
        command += ["--num_train_epochs", f"{recipe.epochs:g}", "--max_seq_length", str(recipe.max_seq_length)]
        command += ["--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", "64"]
        command += ["--logging_steps", "20", "--report_to", "none", "--disable_tqdm", "true", *recipe.flags]
        command += ["--output_dir", str(folder), *(["--data_dir", args.data_dir] if args.data_dir else [])]
        command += [*(["--init_from_scratch"] if init == "scratch" else []), *args.extra]
        return command + continue_flags(folder)

    def run(self, task: str, init: str, learning_rate: float, seed: int) -> dict:
        """One fine-tuning run (skipped when finished), its all_results.json."""
        folder = self.runs_dir / run_name(task, init, learning_rate, seed)
        done = read_results(folder)
        if done is None and self.args.record_dir:
            done = run_records.restore(self.args.record_dir, folder, self.sources[init])
            if done is not None:
                self.log(f"skip {folder} (recorded in {self.args.record_dir})")
                return done
        if done is not None:
            self.log(f"skip {folder} (done)")
            self.keep(folder, init)
            return done
        how = "resume" if "--resume_from_checkpoint" in continue_flags(folder) else "start"
        self.log(f"{time.strftime('%H:%M:%S', time.gmtime())} {how} {folder}")
        env = {**os.environ, "OMP_NUM_THREADS": str(self.args.threads), "TOKENIZERS_PARALLELISM": "false"}
        with open(f"{folder}.log", "a" if how == "resume" else "w", encoding="utf-8") as log:
            done = subprocess.run(
                self.command(task, init, learning_rate, seed, folder), stdout=log, stderr=log, env=env
            )
        if done.returncode != 0:
            raise RuntimeError(f"{folder} failed (exit {done.returncode}); see {folder}.log")
        self.log(f"{time.strftime('%H:%M:%S', time.gmtime())} done  {folder}")
        self.keep(folder, init)
        return read_results(folder)

    def keep(self, folder: Path, init: str) -> None:
        """Record a finished run (with what it started from) in `record_dir`, when one is given."""
        if self.args.record_dir and not (folder / run_records.RESTORED).is_file():
            run_records.keep(folder, self.args.record_dir, self.sources[init])

    def run_all(self) -> None:
        """Every run, `processes` at a time: first each task and init's learning-rate candidates at the first seed,
        then each one's other seeds at its chosen rate, queued as soon as its candidates have finished (so the seeds
        of a long task run side by side, not one after another). A failed run cancels the runs not yet started."""
        jobs = [(task, init) for task in self.args.tasks for init in self.args.inits]
        pool = ThreadPoolExecutor(max_workers=self.args.processes)
        try:
            candidates = {
                (task, init): [
                    pool.submit(self.run, task, init, rate, self.recipe(task).seeds[0])
                    for rate in self.recipe(task).learning_rates
                ]
                for task, init in jobs
            }
            seeds = []
            for (task, init), futures in candidates.items():
                for future in futures:
                    future.result()
                chosen = choose_learning_rate(self.runs_dir, task, init, self.recipe(task))
                seeds += [pool.submit(self.run, task, init, chosen, seed) for seed in self.recipe(task).seeds[1:]]
            for future in seeds:
                future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def main(argv: list[str] | None = None) -> None:
    """Run the task-table fine-tunes (see the module docstring and `--help`)."""
    (args,) = parse_args_or_json(ArgumentParser(FinetuneTasksArguments), argv)
    missing = [task for task in args.tasks if task not in TASKS]
    if missing:
        raise ValueError(f"Tasks {missing} are not in the task table {list(TASKS)}.")
    Sweep(args).run_all()


__all__ = [
    "INITS",
    "RECIPES",
    "FinetuneTasksArguments",
    "Sweep",
    "TaskRecipe",
    "choose_learning_rate",
    "run_name",
    "task_recipe",
]


if __name__ == "__main__":
    main()
