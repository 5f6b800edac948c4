"""Which of two commits, or of two sets of flags, pretrains faster as the quick start runs (its processes, data,
Trainer and budget): each contender's commit checked out in a `git worktree`, then `python -m
hf_bertscratch.pretraining` from each with a short training budget and the contender's flags, alternated round by round
so that both see the machine in the same state (each round swapping which runs first: A B, B A, ...), and the tokens/s
each run's `all_results.json` gives printed beside the ratio of their medians.

    python -m lab.time_pretraining_ab 713a1d7 45e564a --minutes 1.5 --rounds 2 \
        --output_json results/mlm-loss/quick-start-ab-amd-epyc-avx2.json
    python -m lab.time_pretraining_ab "HEAD --precision fp32" "HEAD --precision bf16" --minutes 1.5 --rounds 4

(713a1d7: the plain masked-LM loss; 45e564a: the loss fused with the decoder, `lab.profile_mlm_loss`'s candidate.)
A contender is a commit, then any flags of `bertscratch pretrain` for its runs.
A lone training step (`lab.profile_mlm_loss`) can rank two versions otherwise than the whole run does. The record
keeps every run's tokens/s with the command, CPU and load (`hf_bertscratch.records.run_record`). Run it on a machine
with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_bertscratch.records import RunStart, run_record, write_record

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "python -m lab.time_pretraining_ab"


def pretrain_tokens_per_second(checkout: Path, output_dir: Path, minutes: float, flags: list[str] = ()) -> float:
    """Pretrain from `checkout` (its package first on the path) for `minutes` of training with `flags`; its
    tokens/s."""
    command = [sys.executable, "-m", "hf_bertscratch.pretraining", "--output_dir", str(output_dir),
               "--max_train_minutes", str(minutes), "--max_eval_samples", "50", "--disable_tqdm", "true", *flags]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(command, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads((output_dir / "all_results.json").read_text())["train_tokens_per_second"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "commits", nargs=2, help="The two contenders (A, then B): a commit, then any flags of its runs."
    )
    parser.add_argument("--minutes", type=float, default=1.5, help="Training budget of each run.")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of one run of each commit, alternated.")
    parser.add_argument("--output_json", default=None, help="Where the record goes (written atomically).")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    start = RunStart.now()
    speeds: dict[str, list[float]] = {commit: [] for commit in args.commits}
    with tempfile.TemporaryDirectory(prefix="pretraining-ab-") as work:
        checkouts, flags = {}, {}
        for index, contender in enumerate(args.commits):
            commit, *flags[contender] = shlex.split(contender)
            checkouts[contender] = Path(work) / f"{'ab'[index]}-{commit}"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkouts[contender]), commit],
                           check=True, capture_output=True)  # fmt: skip
        try:
            for round_ in range(args.rounds):
                # A B, then B A, ...: the commit that runs first in a round (or second) alternates, so that being
                # first weighs on both alike
                for commit in args.commits if round_ % 2 == 0 else args.commits[::-1]:
                    output_dir = Path(work) / f"run-{checkouts[commit].name}-{round_}"
                    tokens_per_second = pretrain_tokens_per_second(
                        checkouts[commit], output_dir, args.minutes, flags[commit]
                    )
                    speeds[commit].append(tokens_per_second)
                    print(f"round {round_ + 1}, {commit}: {tokens_per_second:,.0f} tokens/s", flush=True)
        finally:
            for checkout in checkouts.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    first, second = args.commits
    ratio = statistics.median(speeds[second]) / statistics.median(speeds[first])
    print(f"{second} over {first}: {ratio:.3f}x (medians of {args.rounds} runs each)")
    record = {**run_record(PROGRAM, argv, vars(args), start, onnxruntime=False), "tokens_per_second": speeds,
              "second_over_first": ratio}  # fmt: skip
    if args.output_json:
        write_record(args.output_json, record)
    return record


if __name__ == "__main__":
    main()
