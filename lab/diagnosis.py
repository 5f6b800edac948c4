"""What the two fine-tuning diagnoses share (`lab.diagnose_pairs`, `lab.diagnose_single`): their common options, the
fine-tuning runs of every variant and seed (`RUNS_DIR/<variant>-seed<seed>`, each read back as a curve once
finished, resumed from its last checkpoint otherwise), and the record they keep, written again after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from hf_bertscratch.hardware import describe_hardware
from hf_bertscratch.records import portable_paths
from hf_bertscratch.run_folder import write_text_atomically
from hf_bertscratch_base.run_files import continue_flags

from .finetune_tasks import print_line

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------- arguments
def diagnosis_parser(
    description: str,
    model_help: str,
    task_help: str,
    variants: Iterable[str],
    processes: tuple[int, str],
    own_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.ArgumentParser:
    """The options every diagnosis takes, `own_options` (a diagnosis's own) added before `--extra`; `processes`:
    the default of `--processes` and its help."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", required=True, help=model_help)
    p.add_argument("--task", required=True, help=task_help)
    p.add_argument("--data_dir", default=None, help="Local copies of the datasets (default $BERTSCRATCH_DATA_DIR).")
    p.add_argument("--runs_dir", default=None, help="Where the fine-tuning runs go (needed with --variants).")
    p.add_argument("--variants", nargs="*", default=[], help=f"Fine-tuning variants to run, of {list(variants)}.")
    p.add_argument("--seeds", nargs="+", type=int, default=[42], help="Fine-tuning seeds of every variant.")
    p.add_argument("--processes", type=int, default=processes[0], help=processes[1])
    if own_options is not None:
        own_options(p)
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="Further flags for every finetune run.")
    p.add_argument("--output_json", default=None, help="Where the record goes (written atomically).")
    p.add_argument("--model_note", default=None, help="How the model was made, for the record's table.")
    return p


def check_arguments(args: argparse.Namespace, tasks: list[str], kind: str, variants: Iterable[str]) -> None:
    """Exit naming the bad value when `--task` is not one of `tasks` (`kind`: what they are), a variant is unknown,
    or variants are asked for without `--runs_dir`."""
    if args.task not in tasks:
        raise SystemExit(f"--task {args.task!r} is not a {kind} of the table; expected one of {tasks}.")
    unknown = sorted(set(args.variants) - set(variants))
    if unknown:
        raise SystemExit(f"Unknown variant(s) {unknown}; expected some of {list(variants)}.")
    if args.variants and not args.runs_dir:
        raise SystemExit("--variants needs --runs_dir, where the fine-tuning runs go.")


# -------------------------------------------------------------------------------------------------- fine-tuning
def run_folder(runs_dir: Path, variant: str, seed: int) -> Path:
    return runs_dir / f"{variant}-seed{seed}"


def finetune_command(
    program: list[str], args: argparse.Namespace, variant: str, seed: int, flags: list[str]
) -> list[str]:
    """`program` (the finetune command) on `args.model` and `args.task` into the run's folder with `flags` and then
    `args.extra`, carrying on the folder's unfinished run where there is one (`continue_flags`)."""
    folder = run_folder(Path(args.runs_dir), variant, seed)
    command = [*program, "--model_name_or_path", args.model, "--task", args.task, "--output_dir", str(folder),
               "--seed", str(seed), "--save_total_limit", "1", "--report_to", "none", "--disable_tqdm", "true",
               *flags, *args.extra]  # fmt: skip
    if args.data_dir:
        command += ["--data_dir", args.data_dir]
    return command + continue_flags(folder)


def run_one(args: argparse.Namespace, variant: str, seed: int, command: list[str], one_thread: bool) -> None:
    """Run `command` (the run's finetune command), its output in `<run folder>.log`, unless the run has finished
    (its all_results.json); `one_thread`: with OMP_NUM_THREADS=1."""
    folder = run_folder(Path(args.runs_dir), variant, seed)
    if (folder / "all_results.json").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    if one_thread:
        env["OMP_NUM_THREADS"] = "1"
    with (folder.parent / f"{folder.name}.log").open("w") as log:
        print_line(f"[{time.strftime('%H:%M:%S')}] {variant} seed {seed}")  # from the pool's threads: whole lines
        subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)


def curve(folder: Path, main_metric: str) -> dict:
    """What one finished run shows: its dev metric and prediction spread per evaluation, and its gradient norms."""
    state = json.loads((folder / "trainer_state.json").read_text())
    results = json.loads((folder / "all_results.json").read_text())
    evals = [e for e in state["log_history"] if f"eval_{main_metric}" in e]
    logs = [e for e in state["log_history"] if "grad_norm_head" in e]
    spread = "eval_prediction_std" if any("eval_prediction_std" in e for e in evals) else "eval_top_class_share"
    return {
        "final": results.get(f"eval_{main_metric}"),
        "final_metrics": {
            k.removeprefix("eval_"): v
            for k, v in results.items()
            if k.startswith("eval_") and isinstance(v, float) and not k.endswith(("_runtime", "_per_second", "_loss"))
        },  # fmt: skip
        "epochs": [e.get("epoch") for e in evals],
        "dev": [e[f"eval_{main_metric}"] for e in evals],
        "spread": {spread.removeprefix("eval_"): [e.get(spread) for e in evals]},
        "grad_norm_head": [round(e["grad_norm_head"], 5) for e in logs],
        "grad_norm_encoder": [round(e["grad_norm_encoder"], 5) for e in logs],
        "learning_rate": results.get("learning_rate"),
        "wall_time_seconds": results.get("wall_time_seconds"),
    }


def run_variants(
    args: argparse.Namespace,
    record: dict,
    run: Callable[[str, int], None],
    entry: Callable[[str, int], dict],
) -> None:
    """`run` every variant and seed of `args`, `args.processes` at once, keeping each finished run's `entry` in
    `record["fine_tuning"][variant][seed]` and the record written at once."""
    jobs = [(v, s) for v in args.variants for s in args.seeds]
    with ThreadPoolExecutor(max_workers=max(1, args.processes)) as pool:
        futures = {job: pool.submit(run, *job) for job in jobs}
        for (variant, seed), future in futures.items():
            future.result()
            record["fine_tuning"].setdefault(variant, {})[str(seed)] = entry(variant, seed)
            save_record(args, record)
    save_record(args, record)


# ------------------------------------------------------------------------------------------------------ the record
def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def recorded_command(given: list[str], program: str) -> str:
    """The command as a record keeps it: without `--model_note` (kept in the record itself), and with its paths as
    every record writes them (`records.portable_paths`: relative to the repository, where `python -m lab...` runs),
    so that no record names the machine that made it."""
    given = list(given)
    if "--model_note" in given:
        at = given.index("--model_note")
        del given[at : at + 2]
    return f"{program} " + shlex.join(portable_paths(given))


def start_record(args: argparse.Namespace, argv: list[str], program: str, metric: str) -> tuple[dict, dict]:
    """(the record of this run, the one `--output_json` holds already, or {}): every command that grew the record
    (while it is of the same model), the model, task, metric, machine, date, commit and the model's note."""
    old = {}
    if args.output_json and Path(args.output_json).is_file():
        old = json.loads(Path(args.output_json).read_text())
    command = recorded_command(argv, program)
    same_model = old.get("model") == args.model
    earlier = old.get("commands", [old["command"]] if "command" in old else []) if same_model else []
    record = {
        "commands": earlier + ([command] if command not in earlier else []),  # every run of the record, in order
        "model": args.model,
        "task": args.task,
        "metric": metric,
        "machine": describe_hardware(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "commit": git_commit(),
        "model_note": args.model_note
        or (old.get("model_note") if same_model else None),  # another model's note is not this one's
    }
    return record, old


def save_record(args: argparse.Namespace, record: dict) -> None:
    """Write `record` to `--output_json` (atomically), where one is given."""
    if args.output_json:
        write_text_atomically(args.output_json, json.dumps(record, indent=1) + "\n")


def print_fine_tuned(record: dict, width: int) -> None:
    """Each variant's final score, mean +/- sd over its seeds, the names `width` characters wide."""
    for variant, runs in record["fine_tuning"].items():
        finals = [100 * r["final"] for r in runs.values() if r.get("final") is not None]
        if finals:
            print(
                f"  fine-tuned: {variant:{width}s} {np.mean(finals):6.1f} +/- {np.std(finals):.1f} ({len(finals)} seeds)"
            )


def variant_mean(record: dict | None, variant: str, metric: str) -> str:
    """ "71.0 ± 1.4": a variant's `metric` x 100, mean ± sd over its seeds ("" while it has none)."""
    if record is None:
        return ""
    runs = record.get("fine_tuning", {}).get(variant, {})
    values = [run.get("final_metrics", {}).get(metric, run["final"] if metric == record["metric"] else None)
              for run in runs.values()]  # fmt: skip
    values = [v for v in values if v is not None]
    if not values:
        return ""
    sd = f" ± {100 * statistics.stdev(values):.1f}" if len(values) > 1 else ""
    return f"{100 * statistics.fmean(values):.1f}{sd}"
