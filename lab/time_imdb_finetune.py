"""Time IMDB fine-tuning on this machine, fp32 (fine-tuning's default) against bf16 autocast (`--precision bf16`).

    python -m lab.time_imdb_finetune --model runs/quick-start-tasks/pretrain --record results/imdb-fine-tune-speed/NAME.json

Each run is `bertscratch finetune --task imdb` (`scripts/finetune.py`: 512 tokens, head and tail, batch 32, every
core) from the same model, seed and batches, for its first `--steps` steps, the held-out and test splits cut to 200
reviews (the time is the training's, `train_runtime`); the precisions alternate, `--rounds` times each, so that a
change in the machine's speed hits both. The record keeps every run's seconds per step, the ratio of the medians and
what the whole run (2,229 steps, 3 epochs of 23,750 reviews) would take at each median; nothing else should run
beside it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from hf_bertscratch.records import REPOSITORY, RunStart, run_record, write_record

FINETUNE = REPOSITORY / "scripts" / "finetune.py"  # `bertscratch finetune`
FULL_RUN_STEPS = 2229  # 3 epochs of IMDB's 23,750 train reviews (5% held out) at batch 32
PRECISIONS = ("fp32", "bf16")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The model folder to fine-tune.")
    parser.add_argument("--record", required=True, help="Where the JSON record goes.")
    parser.add_argument("--steps", type=int, default=200, help="Training steps timed per run.")
    parser.add_argument("--rounds", type=int, default=2, help="Runs of each precision, alternating.")
    parser.add_argument("--data_dir", default="../shared/data", help="The folder holding imdb/.")
    parser.add_argument("--runs_dir", default="runs/imdb-speed", help="Where the runs' folders go.")
    parser.add_argument("--max_seq_length", type=int, help="Instead of the task's 512 tokens.")
    args = parser.parse_args(argv)
    start = RunStart.now()
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    runs = []
    for round_ in range(args.rounds):
        for precision in PRECISIONS:
            out = Path(args.runs_dir) / f"{precision}-{round_}"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, str(FINETUNE), "--model_name_or_path", args.model, "--task", "imdb"]
            command += ["--data_dir", args.data_dir, "--output_dir", str(out), "--precision", precision]
            command += ["--max_steps", str(args.steps), "--eval_strategy", "no", "--save_strategy", "no"]
            command += ["--load_best_model_at_end", "false", "--max_eval_samples", "200", "--disable_tqdm", "true"]
            command += ["--max_seq_length", str(args.max_seq_length)] if args.max_seq_length else []
            with open(f"{out}.log", "w") as log:
                subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
            results = json.loads((out / "all_results.json").read_text())
            run = {"precision": results["precision"], "train_runtime": results["train_runtime"]}
            run["seconds_per_step"] = results["train_runtime"] / results["global_step"]
            print(run, flush=True)
            runs.append(run)
    medians = {p: statistics.median(r["seconds_per_step"] for r in runs if r["precision"] == p) for p in PRECISIONS}
    record = run_record(
        "python -m lab.time_imdb_finetune", sys.argv[1:] if argv is None else argv, vars(args), start, False
    )
    record.update(
        runs=runs,
        median_seconds_per_step=medians,
        bf16_speedup=medians["fp32"] / medians["bf16"],
        full_run_minutes_at_median={p: medians[p] * FULL_RUN_STEPS / 60 for p in PRECISIONS},
    )
    write_record(args.record, record)
    print(json.dumps({k: record[k] for k in ("median_seconds_per_step", "bf16_speedup", "full_run_minutes_at_median")}))


if __name__ == "__main__":
    main()
