"""Compare pretraining recipes for the same wall-clock budget on the same data and machine.

    python -m lab.sweep_pretraining [--runs_dir runs/sweep] [--minutes 6] [--only NAME ...] [--seeds 0 ...]
    python -m lab.sweep_pretraining --max_steps 1800 --jobs 2 [--only NAME ...] [--seeds 42 1]

Every candidate is `bertscratch pretrain` with the shared budget (`--max_train_minutes`) and the package defaults
plus the candidate's own arguments (`CANDIDATES`), so each row changes one thing from the default recipe. Each run is
evaluated on the validation split at 15% masking whatever its training rate (`--eval_mlm_probability`, the
pretraining default), and probed for layer-1 neighbour attention (`neighbour_attention`). A finished run (its
`all_results.json` exists) is skipped, so the sweep continues where it stopped; `RUNS_DIR/sweep.md` is rewritten
after every run with the rows so far. Run it from a checkout nobody edits meanwhile (each candidate imports the
package afresh), e.g. a `git worktree` with `PYTHONPATH` pointing at it.

With several `--seeds`, each seed's runs go to `RUNS_DIR/seed-S/`; with one, to `RUNS_DIR/` itself. Every row also
gives the step at which the run left the unigram plateau: the first logged training loss below `PLATEAU_EXIT_LOSS`.

`--budget_fractions F ... --jobs J` asks what a slower machine gets from the same command: each candidate trains
F x `REFERENCE_BUDGET_STEPS` steps (the steps the default's 8.5-minute budget reached on a 2-core AMD EPYC) with its
own schedule laid over those steps (warm-up, short-block start and decay as fractions, as the time budget lays them),
in one process with gradient accumulation standing in for the default's processes, J runs at a time. Step counts
make the result independent of the machine's load; 0.6 is about what one core trains in the budget.

`--max_steps N --jobs J` is a *screen* that does not depend on the machine's load: every run trains exactly N steps
(`STEP_SCREEN_ARGUMENTS`: the default's peak rate held after its warm-up, i.e. warmup-stable-decay before its decay
starts), in one process with gradient accumulation standing in for the default's processes (the same effective
batch), J runs at a time with the cores shared out. It asks one question, when each candidate leaves the plateau,
and leaves the budgeted comparison to the time mode.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from hf_bertscratch.records import RunStart, run_record, write_record
from hf_bertscratch.run_folder import write_text_atomically
from hf_bertscratch_base.run_files import continue_flags

from .diagnose_position_init import neighbour_weight
from .report_format import Sources

logger = logging.getLogger(__name__)

PROGRAM = "python -m lab.sweep_pretraining"

# name -> (arguments added to the default recipe, what the row tests). "default" is the recipe as shipped.
CANDIDATES: dict[str, tuple[list[str], str]] = {
    "default": ([], "the shipped recipe"),
    "1proc-2threads": (
        ["--num_processes", "1", "--per_device_train_batch_size", "32"],
        "one process with two threads (the same effective batch of 32)",
    ),
    "mask-15": (["--mlm_probability", "0.15"], "masking rate 15% (BERT)"),
    "mini": (["--model_size", "mini"], "BERT-Mini (4 layers, H=256) for the same minutes"),
    "dropout-0.1": (["--dropout", "0.1"], "dropout 0.1 while pretraining (BERT)"),
    "vocab-16k": (["--tokenizer_vocab_size", "16384"], "16,384-token WordPiece"),
    "one-cycle": (
        ["--lr_scheduler_type", "linear", "--warmup_steps", "0.5"],
        "one-cycle (triangle): warm-up to the middle of the budget, then linear decay",
    ),
    "mask-30": (["--mlm_probability", "0.30"], "masking rate 30% (ModernBERT; the default before 40%)"),
    "lr-1e-3": (["--learning_rate", "1e-3"], "peak learning rate 1e-3"),
    "vocab-4k": (["--tokenizer_vocab_size", "4096"], "4,096-token WordPiece"),
    "batch-64": (["--per_device_train_batch_size", "32"], "effective batch 64"),
    "position-0.1": (["--sinusoidal_position_std", "0.1"], "position embeddings start as sinusoids of std 0.1"),
    "batch-16": (["--per_device_train_batch_size", "8"], "effective batch 16 (twice the steps)"),
    "linear": (["--lr_scheduler_type", "linear"], "linear decay from the end of warm-up"),
    "lr-6e-3": (["--learning_rate", "6e-3"], "peak learning rate 6e-3"),
    "seq-64": (
        ["--max_seq_length", "64", "--per_device_train_batch_size", "32", "--short_seq_fraction", "0"],
        "64-token blocks throughout, the same tokens a step (evaluated on 64-token blocks)",
    ),
    "lr-1.5e-3": (["--learning_rate", "1.5e-3"], "peak learning rate 1.5e-3"),
    "seq-32": (
        ["--max_seq_length", "32", "--per_device_train_batch_size", "64", "--short_seq_fraction", "0"],
        "32-token blocks throughout, the same tokens a step (evaluated on 32-token blocks)",
    ),
    "no-short-start": (["--short_seq_fraction", "0"], "128-token blocks from the start (no short-block start)"),
    "short-64": (["--short_seq_length", "64"], "the short-block start on 64-token blocks"),
    "short-0.5": (["--short_seq_fraction", "0.5"], "the short-block start for half the run"),
    "short-16": (["--short_seq_length", "16"], "the short-block start on 16-token blocks (the default: 32)"),
    "position-0.2": (["--sinusoidal_position_std", "0.2"], "position embeddings start as sinusoids of std 0.2"),
    "warmup-0.05": (["--warmup_steps", "0.05"], "warm-up over a twentieth of the budget (default: a tenth)"),
    "short-0.1": (["--short_seq_fraction", "0.1"], "the short-block start for a tenth of the run (default: a quarter)"),
    "warmup-0.2": (["--warmup_steps", "0.2"], "warm-up over a fifth of the budget (default: a tenth)"),
    "unigram-bias": (
        ["--decoder_bias_start", "unigram"],
        "the MLM decoder bias starts at the training text's log unigram frequencies (first prediction: the plateau)",
    ),
    "electra": (["--objective", "electra"], "ELECTRA: generator 1/4 as wide, discriminator weight 50"),
    "electra-lr-1e-3": (["--objective", "electra", "--learning_rate", "1e-3"], "ELECTRA at peak learning rate 1e-3"),
    "electra-weight-10": (
        ["--objective", "electra", "--discriminator_weight", "10"],
        "ELECTRA with discriminator weight 10",
    ),
    "heads-4": (
        ["--config_name", "lab/configs/bertscratch-2x128-4heads"],
        "tiny with 4 attention heads of 32 (the preset: 2 of 64): more heads, each a chance to find the neighbours",
    ),
    "heads-8": (["--num_attention_heads", "8"], "8 attention heads of 16 (the default: 4 of 32)"),
    "mask-50": (["--mlm_probability", "0.5"], "masking rate 50% (the default: 40%)"),
    "lr-4e-3": (["--learning_rate", "4e-3"], "peak learning rate 4e-3 (the default: 3e-3)"),
    "lr-2e-3": (["--learning_rate", "2e-3"], "peak learning rate 2e-3 (the default: 3e-3)"),
    "mask-40-to-15": (
        ["--mlm_probability_end", "0.15"],
        "masking rate falling linearly from 40% to 15% over the run (Ankner et al. 2024: 30% to 15%)",
    ),
    "predict-half": (
        ["--prediction_fraction", "0.5"],
        "40% of the tokens corrupted, the loss on a random half of them: the decoder runs on 20% (a cheaper step)",
    ),
    # The cooldown of warmup-stable-decay (the default: linear over the last 20%, 400 of the budget screen's 2,000
    # steps). Hägele et al. 2024 find a 1-sqrt cooldown and a longer one better than a linear 20%. The step counts
    # assume the budget screen at fraction 1 (--budget_fractions 1).
    "cooldown-1-sqrt": (
        ["--lr_scheduler_kwargs", '{"num_decay_steps": 400, "decay_type": "1-sqrt"}'],
        "the cooldown over the last 20% of 2,000 steps falls as 1 - sqrt(progress) instead of linearly",
    ),
    "cooldown-40": (
        ["--lr_scheduler_kwargs", '{"num_decay_steps": 800, "decay_type": "linear"}'],
        "the linear cooldown over the last 40% of 2,000 steps (the default: 20%)",
    ),
    "cooldown-40-1-sqrt": (
        ["--lr_scheduler_kwargs", '{"num_decay_steps": 800, "decay_type": "1-sqrt"}'],
        "a 1 - sqrt(progress) cooldown over the last 40% of 2,000 steps",
    ),
    # A third layer (lab/configs/bertscratch-3x128-4heads) costs a fifth to a quarter more per step here, so the budget
    # screen runs it at --budget_fractions 0.83: the default's wall time, not its steps.
    "layers-3": (
        ["--config_name", "lab/configs/bertscratch-3x128-4heads"],
        "3 layers of H 128 with 4 heads (the default: 2)",
    ),
    # Muon for the encoder layers' matrices, AdamW for the rest, at AdamW's rate (its update's RMS matched to AdamW's).
    "muon": (["--muon"], "Muon for the encoder layers' weight matrices, AdamW for the rest (the default: AdamW)"),
    "muon-lr-6e-3": (["--muon", "--learning_rate", "6e-3"], "Muon beside AdamW, both at peak learning rate 6e-3"),
    "muon-lr-2e-3": (["--learning_rate", "2e-3"], "Muon beside AdamW (the default), both at peak learning rate 2e-3"),
    # Since Muon is the default: AdamW for every parameter, the default before.
    "muon-split-qkv": (
        ["--muon_split_qkv"],
        "Muon orthogonalising each attention's Q, K and V apart (the default: the fused (3H, H) weight as one matrix)",
    ),
    "adamw": (["--no_muon"], "AdamW for every parameter (the default: Muon for the encoder layers' matrices)"),
    "weight-decay-0.1": (
        ["--weight_decay", "0.1"],
        "weight decay 0.1 for Muon and AdamW alike (Moonlight's; the default: 0.01)",
    ),
    "weight-decay-0.3": (
        ["--weight_decay", "0.3"],
        "weight decay 0.3 for Muon and AdamW alike (the default: 0.01)",
    ),
    # Since 0.1 is the default: the decay before.
    "weight-decay-0.01": (["--weight_decay", "0.01"], "weight decay 0.01 (BERT's; the default: 0.1)"),
    # The peak rate again at decay 0.1 (the rates above ran at 0.01, where 3e-3 beat 2e-3 and 6e-3): decoupled decay
    # shrinks the weights by rate x decay per step, so the best rate may move with the decay.
    "lr-4e-3-decay-0.1": (
        ["--learning_rate", "4e-3"],
        "peak learning rate 4e-3 at weight decay 0.1 (the default: 3e-3)",
    ),
    "lr-5e-3-decay-0.1": (
        ["--learning_rate", "5e-3"],
        "peak learning rate 5e-3 at weight decay 0.1 (the default: 3e-3)",
    ),
    # Transformers' gradient clipping (max_grad_norm 1.0, on by default) off: Muon orthogonalises its matrices'
    # momentum whatever the gradient's scale, so the clip reaches them only through the momentum's mix of steps.
    "no-clip": (["--max_grad_norm", "0"], "no gradient clipping (the default: the total norm clipped to 1.0)"),
    # The two above together.
    "lr-4e-3-no-clip": (
        ["--learning_rate", "4e-3", "--max_grad_norm", "0"],
        "peak learning rate 4e-3 and no gradient clipping (the default: 3e-3, the norm clipped to 1.0)",
    ),
    # The one-GPU recipe's depth (8 post-LayerNorm layers) at three peak rates, at tiny's width so that a CPU runs
    # it (lab/configs/bertscratch-8x128: 8 layers, H 128, dropout 0): which trains, and which leaves the plateau
    # first, at the same steps (scripts/gpu_recipe.py's PRETRAIN_RECIPE runs medium, 8 layers of H 512, at 1e-3).
    **{
        f"8-layer-lr-{rate}": (
            ["--config_name", "lab/configs/bertscratch-8x128", "--learning_rate", rate],
            f"8 layers of H 128 at peak learning rate {rate}",
        )
        for rate in ("5e-4", "1e-3", "2e-3")
    },
    # The same depth with Muon for the encoder layers' matrices, at the one-GPU recipe's rate (the rows above ran AdamW
    # for every parameter, the default before Muon).
    "8-layer-muon-lr-1e-3": (
        ["--config_name", "lab/configs/bertscratch-8x128", "--learning_rate", "1e-3", "--muon"],
        "8 layers of H 128, Muon beside AdamW at peak learning rate 1e-3",
    ),
    # The row above at the weight decay it was recorded with (8-layer-muon-1500-steps.json, when the default was
    # 0.01), against the default since (0.1) which the one-GPU recipe would inherit.
    "8-layer-muon-lr-1e-3-weight-decay-0.01": (
        [
            "--config_name",
            "lab/configs/bertscratch-8x128",
            "--learning_rate",
            "1e-3",
            "--muon",
            "--weight_decay",
            "0.01",
        ],
        "8 layers of H 128, Muon beside AdamW at peak learning rate 1e-3, weight decay 0.01 (the default: 0.1)",
    ),
}
# Training loss (nats) below which a run has left the unigram plateau: on the shipped WikiText-2 with the default
# 8,192-token WordPiece the plateau sits at 6.2-6.5, and a run that reads its neighbours falls through 5.8 within a
# few hundred steps.
PLATEAU_EXIT_LOSS = 5.8
# The step screen (--max_steps): the default's warm-up in steps (about a tenth of the ~3,500 steps of its 8.5-minute
# budget), then its peak rate held, as warmup-stable-decay holds it until 80% of the budget.
STEP_SCREEN_ARGUMENTS = ["--lr_scheduler_type", "constant_with_warmup", "--warmup_steps", "350"]
# The steps (32 blocks of 128 tokens each) of the default's 8.5-minute budget on a 2-core AMD EPYC at 16.1k tokens/s:
# 8.2M tokens. One process on one core trained 4.9M (0.6 of it), the Intel Xeon records 15.8M (1.9).
REFERENCE_BUDGET_STEPS = 2000
DEFAULT_PROCESSES = (
    2  # what --num_processes auto starts on this project's 2-core machine (the recipe's batch is per process)
)


def neighbour_attention(model_dir: str | Path, blocks: int = 16, seq: int = 128) -> float:
    """Mean layer-1 attention weight on the previous plus the next token, over `blocks` WikiText-2 validation blocks.

    A model that attends uniformly scores 2/(T-1) (0.016 at T=128); one that has learned to read its neighbours,
    the first thing an MLM must learn to leave the unigram plateau, scores far higher.
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from hf_bertscratch.data import DEFAULT_PRETRAINING_DATASET, load_raw_datasets
    from hf_bertscratch.pretraining_data import make_pack_function

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir, attn_implementation="eager").base_model.eval()
    text = list(load_raw_datasets(*DEFAULT_PRETRAINING_DATASET)["validation"].select(range(400))["text"])
    ids = torch.tensor(make_pack_function(tokenizer, "text", seq, False)({"text": text})["input_ids"][:blocks])
    with torch.no_grad():
        return neighbour_weight(model(ids, output_attentions=True).attentions[0])


def plateau_exit_step(log_history: list[dict]) -> int | None:
    """The first logged step whose training loss is below `PLATEAU_EXIT_LOSS` (None: never left the plateau)."""
    return next((log["step"] for log in log_history if "loss" in log and log["loss"] < PLATEAU_EXIT_LOSS), None)


def run_candidate(
    name: str,
    runs_dir: Path,
    minutes: float,
    seed: int,
    max_steps: int | None = None,
    threads: int | None = None,
    fraction: float | None = None,
) -> dict:
    """Train one candidate (unless finished) and return its row.

    With `max_steps`, the step screen: that many steps in one process of `threads` threads, with gradient
    accumulation over `DEFAULT_PROCESSES` micro-batches standing in for the default's processes. With `fraction`,
    the budget screen: `fraction` x `REFERENCE_BUDGET_STEPS` steps the same way, on the candidate's own schedule.
    """
    extra, what = CANDIDATES[name]
    output_dir = runs_dir / (name if fraction is None else f"{name}@{fraction:g}")
    if fraction is not None:
        max_steps = max(1, round(fraction * REFERENCE_BUDGET_STEPS))
    if max_steps is None:
        length = ["--max_train_minutes", str(minutes)]
        env = None
    else:
        length = [
            "--max_steps",
            str(max_steps),
            *(STEP_SCREEN_ARGUMENTS if fraction is None else []),
            "--num_processes",
            "1",
            "--gradient_accumulation_steps",
            str(DEFAULT_PROCESSES),
        ]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads or 1)}
    command = [
        sys.executable,
        "-m",
        "hf_bertscratch.pretraining",
        "--output_dir",
        str(output_dir),
        *length,
        "--seed",
        str(seed),
        "--disable_tqdm",
        "true",
        *extra,
    ]
    if not (output_dir / "all_results.json").exists():
        command += continue_flags(output_dir)
        logger.info("%s: %s", name, " ".join(command))
        start = time.perf_counter()
        log_path = runs_dir / f"{output_dir.name}.log"
        with open(log_path, "a", encoding="utf-8") as log:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"Candidate {name!r} failed (exit {done.returncode}); see {log_path}.")
        (output_dir / "sweep_wall_seconds.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    results = json.loads((output_dir / "all_results.json").read_text())
    state = json.loads((output_dir / "trainer_state.json").read_text())
    wall_file = output_dir / "sweep_wall_seconds.txt"
    return {
        "name": name,
        "seed": seed,
        **({} if fraction is None else {"budget_fraction": fraction}),
        "what": what,
        "arguments": " ".join(extra) or "(none)",
        "eval_accuracy": results["eval_accuracy"],
        "eval_mlm_loss": results["eval_mlm_loss"],
        "eval_perplexity": results["eval_perplexity"],
        # ELECTRA: the discriminator's accuracy over every real token, and the share it would get saying "original"
        "discriminator_accuracy": results.get("eval_discriminator_accuracy"),
        "replaced_fraction": results.get("eval_replaced_fraction"),
        "train_tokens": results["train_tokens"],
        "steps": state["global_step"],
        "plateau_exit_step": plateau_exit_step(state["log_history"]),
        "world_size": results["world_size"],
        "neighbour_attention": neighbour_attention(output_dir),
        "wall_seconds": float(wall_file.read_text()) if wall_file.exists() else None,
    }


def _replaced_token_cell(row: dict) -> str:
    """ELECTRA rows: the discriminator's accuracy, and in brackets what always answering "original" would score."""
    if row.get("discriminator_accuracy") is None:
        return "-"
    return f"{100 * row['discriminator_accuracy']:.1f}% ({100 * (1 - row['replaced_fraction']):.1f}%)"


def _run_name(row: dict) -> str:
    return row["name"] + (f" @{row['budget_fraction']:g}" if "budget_fraction" in row else "")


def render_table(rows: list[dict], length: str, unmeasured: tuple[str, ...] | list[str] = ()) -> str:
    """The sweep as a markdown table: candidates by their mean held-out MLM loss over seeds, best first (in the rows'
    own order when some have no loss, as runs written down before sweeps kept records). A field in `unmeasured` (runs
    that did not measure it) shows as a blank cell; a `commit` on the rows adds a column."""
    commits = any("commit" in row for row in rows)
    lines = [
        f"{length} per run; evaluated at 15% masking on WikiText-2 validation.",
        "",
        "| run | seed | changes from the default | accuracy | MLM loss | perplexity | tokens | steps "
        "| left the plateau at step | procs | layer-1 neighbour attention | wall | replaced-token accuracy (all 'original') |"
        + (" commit |" if commits else ""),
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        + (" --- |" if commits else ""),
    ]

    def cell(row: dict, key: str, shown: Callable[[Any], str]) -> str:
        if key in unmeasured:
            return ""
        return "-" if row.get(key) is None else shown(row[key])

    losses: dict[str, list[float]] = {}
    for row in rows:
        losses.setdefault(_run_name(row), []).append(row.get("eval_mlm_loss"))
    if all(loss is not None for values in losses.values() for loss in values):
        rows = sorted(
            rows,
            key=lambda r: (-r.get("budget_fraction", 0), statistics.fmean(losses[_run_name(r)]), r["name"], r["seed"]),
        )
    for row in rows:
        cells = [
            _run_name(row),
            str(row.get("seed", "-")),
            f"`{row['arguments']}`",
            f"{100 * row['eval_accuracy']:.1f}%",
            cell(row, "eval_mlm_loss", "{:.3f}".format),
            cell(row, "eval_perplexity", "{:.0f}".format),
            cell(row, "train_tokens", lambda tokens: f"{tokens / 1e6:.1f}M"),
            cell(row, "steps", str),
            cell(row, "plateau_exit_step", str),
            cell(row, "world_size", str),
            cell(row, "neighbour_attention", "{:.3f}".format),
            cell(row, "wall_seconds", lambda seconds: f"{seconds / 60:.1f} min"),
            _replaced_token_cell(row),
            *([row.get("commit", "")] if commits else []),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def recorded_rows(record: Path) -> list[dict]:
    """The rows of a sweep record written before (none if there is no such file), so that a resumed sweep skips them."""
    if not record.exists():
        return []
    try:
        return list(json.loads(record.read_text(encoding="utf-8"))["rows"])
    except (ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"--record {record} is not a sweep record (a JSON object with 'rows'): {error}") from None


# ------------------------------------------------------------------------------------------------- the records' tables
SWEEP_RECORDS = "results/sweeps"
SWEEP_BLOCK = ("<!-- sweeps:start -->\n", "<!-- sweeps:end -->")


def render_sweep_tables(records: dict[str, dict]) -> str:
    """`lab/sweep_pretraining.py --record` records (file name -> record), oldest first: each sweep's table
    (`render_table`) and the command, machine, load, date and commit that made it."""
    if not records:
        return f"No record in `{SWEEP_RECORDS}/` yet: `python -m lab.sweep_pretraining ... --record` writes one.\n"
    parts = []
    for name, record in sorted(records.items(), key=lambda item: (item[1]["date"], item[0])):
        table = render_table(record["rows"], record["length"], record.get("unmeasured", ()))
        if "transcribed" in record:  # runs from before sweeps kept records: their commands, one per commit
            commands = "\n".join(record["commands"])
            footer = (
                f"{record['transcribed']} {record['cpu']} ({record['cores']} cores), {record['date'][:10]}; load not "
                f"recorded. {record['notes']}\n\n```bash\n{commands}\n```"
            )
        else:
            load = record["load_average"]
            footer = (
                f"`{record['command']}` on {record['cpu']} ({record['cores']} cores), {record['date'][:10]}, commit "
                f"{record['commit'] or 'unknown'}, load average (1 min) {load['start'][0]:.1f} at the start, "
                f"{load['end'][0]:.1f} at the end."
            )
        parts.append(f"**`{SWEEP_RECORDS}/{name}`**\n\n{table}\n{footer}\n")
    return "\n".join(parts)


def sweep_block(sources: Sources) -> str:
    """docs/lab.md's sweeps block: every record of `SWEEP_RECORDS`."""
    return render_sweep_tables(sources.records(SWEEP_RECORDS))


def main(argv: list[str] | None = None) -> None:
    """Run the sweep (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--runs_dir", default="runs/sweep", help="Folder of the runs, their logs and sweep.md.")
    parser.add_argument("--minutes", type=float, default=6.0, help="Training minutes per candidate.")
    parser.add_argument(
        "--max_steps",
        type=int,
        default=None,
        help="Instead of --minutes: the step screen, exactly this many steps per run (see above).",
    )
    parser.add_argument(
        "--budget_fractions",
        nargs="+",
        type=float,
        default=None,
        help=f"Instead of --minutes: the budget screen, one run per fraction of {REFERENCE_BUDGET_STEPS} steps per "
        "candidate (see above).",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="With --max_steps or --budget_fractions: runs at a time, each in one process with cores/jobs threads.",
    )
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), help="Run only these candidates.")
    parser.add_argument(
        "--seeds", "--seed", nargs="+", type=int, default=[0], help="Seeds; every candidate runs once per seed."
    )
    parser.add_argument(
        "--record",
        default=None,
        help="Also write the sweep's record here (e.g. results/sweeps/NAME.json): the command, commit, date, versions, "
        "CPU and load of the run that wrote it, and every row. RUNS_DIR/sweep.json is the same record.",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    start = RunStart.now()
    args = parser.parse_args(argv)
    if args.max_steps is not None and args.max_steps <= 0:
        parser.error(f"--max_steps must be a positive number of steps, got {args.max_steps}")
    if args.max_steps is not None and args.budget_fractions:
        parser.error("--max_steps and --budget_fractions are two screens: give one")
    bad = [fraction for fraction in args.budget_fractions or [] if not fraction > 0]
    if bad:
        parser.error(f"--budget_fractions must be positive fractions of the reference budget, got {bad[0]:g}")
    stepped = args.max_steps is not None or bool(args.budget_fractions)
    if args.jobs < 1 or (args.jobs > 1 and not stepped):
        parser.error(
            "--jobs must be 1, or more with --max_steps or --budget_fractions (timed runs need the machine to "
            f"themselves), got {args.jobs}"
        )
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    runs_dir = Path(args.runs_dir)
    if args.budget_fractions:
        length = f"A fraction (@F) of {REFERENCE_BUDGET_STEPS} steps of 32 x 128-token blocks"
    else:
        length = f"Budget {args.minutes:g} min of training" if args.max_steps is None else f"{args.max_steps} steps"
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    tasks = [
        (name, seed, runs_dir if len(args.seeds) == 1 else runs_dir / f"seed-{seed}", fraction)
        for seed in args.seeds
        for fraction in args.budget_fractions or [None]
        for name in args.only or list(CANDIDATES)
    ]
    rows = recorded_rows(Path(args.record)) if args.record else []
    done = {(row["name"], row["seed"], row.get("budget_fraction")) for row in rows}
    if done:
        logger.info("%s already records %d run(s); they are not run again", args.record, len(done))
    tasks = [task for task in tasks if (task[0], task[1], task[3]) not in done]
    for _, _, folder, _ in tasks:
        folder.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def run(task: tuple[str, int, Path, float | None]) -> None:
        name, seed, folder, fraction = task
        row = run_candidate(name, folder, args.minutes, seed, args.max_steps, threads, fraction)
        with lock:  # the table is rewritten from the rows so far
            rows.append(row)
            record = {**run_record(PROGRAM, argv, vars(args), start, onnxruntime=False), "length": length, "rows": rows}
            for path in [runs_dir / "sweep.json", *([Path(args.record)] if args.record else [])]:
                write_record(path, record)
            write_text_atomically(runs_dir / "sweep.md", render_table(rows, length))
        logger.info(
            "%s (seed %d): accuracy %.4f, MLM loss %.3f, left the plateau at step %s",
            name,
            seed,
            row["eval_accuracy"],
            row["eval_mlm_loss"],
            row["plateau_exit_step"],
        )

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(run, tasks))


if __name__ == "__main__":
    main()
