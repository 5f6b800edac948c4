"""Run README's quick start and keep its record: `bertscratch pretrain --output_dir DIR [--seed S]`, timed end to end,
with its peak memory, then the command, commit, date, versions, CPU and load (`hf_bertscratch.records.run_record`)
and the run's own `all_results.json` written to `results/quick-start/seed-S.json`; `python -m lab.make_report`
renders README's quick-start table from those records.

    python -m lab.record_quick_start [--seed 42] [--output_dir runs/bert-tiny-wikitext2]

Run it on a machine with nothing else running: the budget is wall-clock time, so a shared CPU trains fewer tokens.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from hf_bertscratch.records import RunStart, run_record
from hf_bertscratch.run_folder import write_text_atomically

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "python -m lab.record_quick_start"


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42, help="Pretraining seed (the quick start's default is 42).")
    parser.add_argument("--output_dir", default="runs/bert-tiny-wikitext2", help="The quick start's output folder.")
    parser.add_argument("--records_dir", default=str(ROOT / "results" / "quick-start"), help="Where the record goes.")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    start = RunStart.now()
    command = ["bertscratch", "pretrain", "--output_dir", args.output_dir, "--seed", str(args.seed)]
    began = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - began
    # the largest resident set among the finished children (the launcher and its training processes), KiB on Linux
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    results = json.loads((Path(args.output_dir) / "all_results.json").read_text(encoding="utf-8"))
    state = json.loads((Path(args.output_dir) / "trainer_state.json").read_text(encoding="utf-8"))
    record = {
        **run_record(PROGRAM, argv, vars(args), start, onnxruntime=False),
        "quick_start_command": " ".join(command),
        "seed": args.seed,
        "end_to_end_seconds": round(seconds, 1),
        "peak_memory_mib": round(peak_mib),
        "steps": state["global_step"],
        "results": results,
    }
    path = Path(args.records_dir) / f"seed-{args.seed}.json"
    write_text_atomically(path, json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
