"""Compare pretraining recipes for the same wall-clock budget on the same data and machine.

    python scripts/sweep_pretraining.py [--runs_dir runs/sweep] [--minutes 6] [--only NAME ...] [--seed 0]

Every candidate is `bertscratch pretrain` with the shared budget (`--max_train_minutes`) and the package defaults
plus the candidate's own arguments (`CANDIDATES`), so each row changes one thing from the default recipe. Each run is
evaluated on the validation split at 15% masking whatever its training rate (`--eval_mlm_probability`, the
pretraining default), and probed for layer-1 neighbour attention (`neighbour_attention`). A finished run (its
`all_results.json` exists) is skipped, so the sweep continues where it stopped; `RUNS_DIR/sweep.md` is rewritten
after every run with the rows so far. Run it from a checkout nobody edits meanwhile (each candidate imports the
package afresh), e.g. a `git worktree` with `PYTHONPATH` pointing at it.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import torch

from .outputs import atomic_write

logger = logging.getLogger(__name__)

# name -> (arguments added to the default recipe, what the row tests). "default" is the recipe as shipped.
CANDIDATES: dict[str, tuple[list[str], str]] = {
    "default": ([], "the shipped recipe"),
    "1proc-2threads": (["--num_processes", "1", "--per_device_train_batch_size", "32"],
                       "one process with two threads (the same effective batch of 32)"),
    "mask-15": (["--mlm_probability", "0.15"], "masking rate 15% (BERT)"),
    "mini": (["--model_size", "mini"], "BERT-Mini (4 layers, H=256) for the same minutes"),
    "dropout-0.1": (["--dropout", "0.1"], "dropout 0.1 while pretraining (BERT)"),
    "vocab-16k": (["--tokenizer_vocab_size", "16384"], "16,384-token WordPiece"),
    "one-cycle": (["--lr_scheduler_type", "linear", "--warmup_steps", "0.5"],
                  "one-cycle (triangle): warm-up to the middle of the budget, then linear decay"),
    "mask-40": (["--mlm_probability", "0.40"], "masking rate 40% (Wettig et al. 2022)"),
    "lr-1e-3": (["--learning_rate", "1e-3"], "peak learning rate 1e-3"),
    "vocab-4k": (["--tokenizer_vocab_size", "4096"], "4,096-token WordPiece"),
    "batch-64": (["--per_device_train_batch_size", "32"], "effective batch 64"),
    "position-0.1": (["--sinusoidal_position_std", "0.1"], "position embeddings start as sinusoids of std 0.1"),
    "batch-16": (["--per_device_train_batch_size", "8"], "effective batch 16 (twice the steps)"),
    "linear": (["--lr_scheduler_type", "linear"], "linear decay from the end of warm-up"),
    "lr-6e-3": (["--learning_rate", "6e-3"], "peak learning rate 6e-3"),
    "seq-64": (["--max_seq_length", "64", "--per_device_train_batch_size", "32"],
               "64-token blocks, the same tokens a step (evaluated on 64-token blocks)"),
}


def neighbour_attention(model_dir: str | Path, blocks: int = 16, seq: int = 128) -> float:
    """Mean layer-1 attention weight on the previous plus the next token, over `blocks` WikiText-2 validation blocks.

    A model that attends uniformly scores 2/(T-1) (0.016 at T=128); one that has learned to read its neighbours,
    the first thing an MLM must learn to leave the unigram plateau, scores far higher.
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from .data import DEFAULT_PRETRAINING_DATASET, load_raw_datasets
    from .pretraining import make_pack_function

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir, attn_implementation="eager").base_model.eval()
    text = list(load_raw_datasets(*DEFAULT_PRETRAINING_DATASET)["validation"].select(range(400))["text"])
    ids = torch.tensor(make_pack_function(tokenizer, "text", seq, False)({"text": text})["input_ids"][:blocks])
    with torch.no_grad():
        attention = model(ids, output_attentions=True).attentions[0]  # (B, heads, T, T)
    index = torch.arange(attention.shape[-1])
    return float(attention[..., index[1:], index[:-1]].mean() + attention[..., index[:-1], index[1:]].mean())


def run_candidate(name: str, runs_dir: Path, minutes: float, seed: int) -> dict:
    """Train one candidate (unless finished) and return its row."""
    extra, what = CANDIDATES[name]
    output_dir = runs_dir / name
    command = [sys.executable, "-m", "hf_bertscratch.pretraining", "--output_dir", str(output_dir),
               "--max_train_minutes", str(minutes), "--seed", str(seed), "--disable_tqdm", "true", *extra]
    if not (output_dir / "all_results.json").exists():
        if any(output_dir.glob("checkpoint-*")):
            command += ["--resume_from_checkpoint", "last"]
        logger.info("%s: %s", name, " ".join(command))
        start = time.perf_counter()
        with open(runs_dir / f"{name}.log", "a", encoding="utf-8") as log:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"Candidate {name!r} failed (exit {done.returncode}); see {runs_dir / (name + '.log')}.")
        (output_dir / "sweep_wall_seconds.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    results = json.loads((output_dir / "all_results.json").read_text())
    wall_file = output_dir / "sweep_wall_seconds.txt"
    return {
        "name": name, "what": what, "arguments": " ".join(extra) or "(none)",
        "eval_accuracy": results["eval_accuracy"], "eval_mlm_loss": results["eval_mlm_loss"],
        "eval_perplexity": results["eval_perplexity"], "train_tokens": results["train_tokens"],
        "steps": json.loads((output_dir / "trainer_state.json").read_text())["global_step"],
        "world_size": results["world_size"], "neighbour_attention": neighbour_attention(output_dir),
        "wall_seconds": float(wall_file.read_text()) if wall_file.exists() else None,
    }


def write_table(rows: list[dict], path: Path, minutes: float) -> None:
    """The sweep as a markdown table, best held-out MLM loss first."""
    lines = [f"Budget {minutes:g} min of training per run; evaluated at 15% masking on WikiText-2 validation.", "",
             "| run | changes from the default | accuracy | MLM loss | perplexity | tokens | steps | procs "
             "| layer-1 neighbour attention | wall |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in sorted(rows, key=lambda r: r["eval_mlm_loss"]):
        wall = f"{row['wall_seconds'] / 60:.1f} min" if row["wall_seconds"] else "-"
        lines.append(f"| {row['name']} | `{row['arguments']}` | {100 * row['eval_accuracy']:.1f}% | "
                     f"{row['eval_mlm_loss']:.3f} | {row['eval_perplexity']:.0f} | {row['train_tokens'] / 1e6:.1f}M | "
                     f"{row['steps']} | {row['world_size']} | {row['neighbour_attention']:.3f} | {wall} |")
    with atomic_write(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Run the sweep (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--runs_dir", default="runs/sweep", help="Folder of the runs, their logs and sweep.md.")
    parser.add_argument("--minutes", type=float, default=6.0, help="Training minutes per candidate.")
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), help="Run only these candidates.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of every run.")
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    runs_dir = Path(args.runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.only or list(CANDIDATES):
        rows.append(run_candidate(name, runs_dir, args.minutes, args.seed))
        (runs_dir / "sweep.json").write_text(json.dumps(rows, indent=2) + "\n")
        write_table(rows, runs_dir / "sweep.md", args.minutes)
        logger.info("%s: accuracy %.4f, MLM loss %.3f", name, rows[-1]["eval_accuracy"], rows[-1]["eval_mlm_loss"])


if __name__ == "__main__":
    main()
