"""Time fine-tuning runs side by side on this machine's cores against one run alone, as a run sharing a laptop is.

    python -m lab.time_side_by_side --model runs/side-by-side/model --record results/threads/NAME.json

Each run is `bertscratch finetune --task sst2` from `--model` for `--steps` steps (2,000 training sentences, a random
head, no evaluation or checkpoint during training; the time is the training's, `train_runtime`). Each round runs one
alone, then two at once, for each way of choosing the threads:

- fitted: `scripts/finetune.py` as shipped: the threads `hardware.fit_threads` chooses (before 2026-11-28 17:50 the
  cores this process may use less those the load at start kept busy, since then the cores it may use; each run's
  count is in the record), idle OpenMP threads sleeping (`OMP_WAIT_POLICY=PASSIVE`, `thread_pool`);
- every-core: as before them, `python -m hf_bertscratch.finetuning --threads <cores>` with `OMP_WAIT_POLICY` unset
  (every process takes as many threads as cores, idle threads spin for a while);
- every-core-passive (with `--ways`): `scripts/finetune.py --threads <cores>`, idle threads sleeping and every
  process taking as many threads as cores: the wait policy's part alone.

The record keeps every run's steps per second, threads and the load average (1 minute) at its start, and for each way
the median pair run's steps per second over the median lone run's. Other processes on the machine load both ways
alike only roughly: the rounds alternate the ways, and the load is in the record.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from hf_bertscratch.hardware import available_cores
from hf_bertscratch.records import REPOSITORY, RunStart, run_record, write_record
from hf_bertscratch_base.thread_pool import WAIT_POLICY_ENV

FINETUNE = REPOSITORY / "scripts" / "finetune.py"  # `bertscratch finetune`
WAYS = ("fitted", "every-core", "every-core-passive")
THREADS_LOGGED = re.compile(r"(\d+) torch threads? per process")


def command(way: str, args: argparse.Namespace, out: Path) -> tuple[list[str], dict[str, str]]:
    """The fine-tune of `way` writing to `out`, and its environment."""
    environment = {key: value for key, value in os.environ.items() if key not in (WAIT_POLICY_ENV, "OMP_NUM_THREADS")}
    shipped = way != "every-core"  # the script sets the wait policy; the module run as before does not
    start = [sys.executable, str(FINETUNE)] if shipped else [sys.executable, "-m", "hf_bertscratch.finetuning"]
    every_core = ["--threads", str(available_cores())] if way.startswith("every-core") else []
    flags = [
        "--model_name_or_path",
        args.model,
        "--task",
        "sst2",
        "--data_dir",
        args.data_dir,
        "--output_dir",
        str(out),
    ]
    flags += ["--max_train_samples", "2000", "--max_eval_samples", "200", "--head_init", "random"]
    flags += ["--max_steps", str(args.steps), "--eval_strategy", "no", "--save_strategy", "no"]
    flags += ["--load_best_model_at_end", "false", "--disable_tqdm", "true", "--report_to", "none"]
    return [*start, *flags, *every_core], environment


def run_together(way: str, args: argparse.Namespace, names: list[str]) -> list[dict]:
    """Start one run per name at once and wait for all; each run's steps/s, threads and the load at its start."""
    started = []
    for name in names:
        out = Path(args.runs_dir) / name
        shutil.rmtree(out, ignore_errors=True)
        argv, environment = command(way, args, out)
        log = open(f"{out}.log", "w")  # noqa: SIM115  # closed once the run ends
        load = os.getloadavg()[0]
        started.append((out, log, load, subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT)))
    runs = []
    for out, log, load, process in started:
        if process.wait() != 0:
            raise SystemExit(f"{out}: the fine-tune failed; see {out}.log")
        log.close()
        results = json.loads((out / "all_results.json").read_text())
        threads = THREADS_LOGGED.search(Path(f"{out}.log").read_text())
        runs.append(
            {
                "way": way,
                "together": len(names),
                "steps_per_second": results["global_step"] / results["train_runtime"],
                "threads": int(threads.group(1)) if threads else None,
                "load_average_at_start": load,
            }
        )
        print(runs[-1], flush=True)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The model folder to fine-tune.")
    parser.add_argument("--record", required=True, help="Where the JSON record goes.")
    parser.add_argument("--steps", type=int, default=150, help="Training steps timed per run.")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds, each a lone run and a pair of each way.")
    parser.add_argument("--data_dir", default="../shared/data", help="The folder holding sst2/.")
    parser.add_argument("--runs_dir", default="runs/side-by-side", help="Where the runs' folders go.")
    parser.add_argument("--ways", nargs="+", default=list(WAYS[:2]), choices=WAYS, help="Ways of choosing threads.")
    args = parser.parse_args(argv)
    start = RunStart.now()
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    runs = []
    for round_ in range(args.rounds):
        for way in args.ways if round_ % 2 == 0 else reversed(args.ways):
            runs += run_together(way, args, [f"{way}-{round_}-alone"])
            runs += run_together(way, args, [f"{way}-{round_}-pair-{index}" for index in range(2)])
    summary = {}
    for way in args.ways:
        alone = statistics.median(r["steps_per_second"] for r in runs if r["way"] == way and r["together"] == 1)
        paired = statistics.median(r["steps_per_second"] for r in runs if r["way"] == way and r["together"] == 2)
        summary[way] = {
            "alone_steps_per_second": alone,
            "pair_steps_per_second": paired,
            "pair_over_alone": paired / alone,
        }
    record = run_record(
        "python -m lab.time_side_by_side", sys.argv[1:] if argv is None else argv, vars(args), start, False
    )
    record.update(cores_available=available_cores(), runs=runs, median=summary)
    write_record(args.record, record)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
