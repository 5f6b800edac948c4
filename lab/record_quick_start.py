"""Run README's quick start and keep its record: `bertscratch pretrain --output_dir DIR [--seed S]`, timed end to end,
with its peak memory, then the command, commit, date, versions, CPU and load (`hf_bertscratch.records.run_record`)
and the run's own `all_results.json` written to `results/quick-start/seed-S.json`; `python -m lab.make_report`
renders README's quick-start table from those records.

    python -m lab.record_quick_start [--seed 42] [--output_dir runs/bert-tiny-wikitext2] [--one_core]

`--one_core` runs it as on a machine with one core (`OMP_NUM_THREADS=1 bertscratch pretrain ... --num_processes 1`);
`--precision bf16` (or fp32) trains at that precision instead of the quick start's `auto` (bf16 autocast on a CPU
with native bf16, AMX or AVX512_BF16, fp32 elsewhere), to see what another precision gives in the same 8.5 minutes
(file name `...-bf16-seed-S`).
The record (`results/quick-start/CPU[-one-core]-seed-S.json`, CPU as `amd-epyc-avx2-f25-m1` or
`intel-xeon-avx512-vnni-f6-m85`: the model, the widest instruction set its choices turn on, the family and model
numbers) also keeps the model's top answers for FILL_MASK_TEXT, the fill-mask demo. Run it on a machine with nothing
else running: the budget is wall-clock time, so a shared CPU trains fewer tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from hf_bertscratch.hardware import short_cpu_name
from hf_bertscratch.records import RunStart, portable_paths, run_record, write_record

from .report_format import Sources

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "python -m lab.record_quick_start"
FILL_MASK_TEXT = "the capital of france is [MASK] ."


def widest_choice_flag(record: dict) -> str | None:
    """The widest of the instruction sets a record's CPU choices turn on (`hardware.CHOICE_FLAGS`, in its
    `cpu_identity`): "AMD EPYC" names a Zen 2 with AVX2 and a Zen 5 with AVX512_BF16 alike, whose runs differ by 2x.
    None for a record made before records kept it."""
    flags = (record.get("cpu_identity") or {}).get("flags")
    return flags[-1] if flags else None


def family_model(record: dict) -> tuple[int, int] | None:
    """The CPU's family and model numbers a record keeps (`cpu_identity`): a Zen 2 (family 23) and a Zen 3 (family 25)
    EPYC share "AMD EPYC" and AVX2, and train at different speeds. None for a record made before records kept them."""
    identity = record.get("cpu_identity") or {}
    family, model = identity.get("family"), identity.get("model")
    return (family, model) if family is not None and model is not None else None


def cpu_name(record: dict) -> str:
    """The CPU as the quick-start table gives it: "AMD EPYC (AVX2, family 25 model 1)", or the short model name alone
    for a record without `cpu_identity`."""
    flag, numbers = widest_choice_flag(record), family_model(record)
    details = [*([flag.upper()] if flag else []), *([f"family {numbers[0]} model {numbers[1]}"] if numbers else [])]
    return short_cpu_name(record["cpu"]) + (f" ({', '.join(details)})" if details else "")


def cpu_slug(record: dict) -> str:
    """A record's file-name prefix for its CPU: "amd-epyc", "intel-xeon", else the model's first two words, then the
    widest instruction set and the family and model numbers where the record names them ("amd-epyc-avx2-f25-m1")."""
    words = short_cpu_name(record["cpu"]).lower().split()[:2] or ["cpu"]
    flag, numbers = widest_choice_flag(record), family_model(record)
    return "-".join(
        [
            *words,
            *([flag.replace("_", "-")] if flag else []),
            *([f"f{numbers[0]}", f"m{numbers[1]}"] if numbers else []),
        ]
    )


def top_answers(model_dir: str | Path, text: str = FILL_MASK_TEXT, top_k: int = 5) -> list[str]:
    """The model's `top_k` tokens for the [MASK] of `text`, best first."""
    from hf_bertscratch.inference import fill_mask

    return [candidate["token_str"] for candidate in fill_mask(str(model_dir), text, top_k=top_k)[0]]


QUICK_START_RECORDS = "results/quick-start"
QUICK_START_BLOCK = ("<!-- quick-start:start -->\n", "<!-- quick-start:end -->")
QUICK_START_FULL_TABLE = "docs/pretraining.md#what-it-measured"  # where README links for every seed's run


def render_quick_start_table(records: dict[str, dict]) -> str:
    """README's quick-start table from `lab/record_quick_start.py` records (file name -> record): per CPU, process
    count and seed the held-out masked-token accuracy and perplexity, training tokens and tokens/s, steps, end-to-end
    time, peak memory and the fill-mask demo's top answers; then where each ran."""
    if not records:
        return f"No record in `{QUICK_START_RECORDS}/` yet: `python -m lab.record_quick_start` writes one.\n"
    ordered = sorted(
        records.items(),
        key=lambda item: (
            item[1]["cpu"], item[1].get("one_core", False), item[1].get("precision") or "", item[1]["seed"]
        ),
    )  # fmt: skip
    texts = {r["fill_mask"]["text"] for _, r in ordered if "fill_mask" in r}
    demo = f'top 5 for "{texts.pop()}"' if len(texts) == 1 else "fill-mask demo"
    lines = [
        "| CPU | run | seed | masked-token accuracy | perplexity | training tokens | tokens/s | steps | end to end | "
        f"peak memory | {demo} |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for _, record in ordered:
        results = record["results"]
        minutes, seconds = divmod(round(record["end_to_end_seconds"]), 60)
        run = "one core, 1 process" if record.get("one_core") else f"{results.get('world_size', 1)} processes"
        run += f", --precision {record['precision']}" if record.get("precision") else ""
        answers = ", ".join(record["fill_mask"]["top"]) if "fill_mask" in record else "-"
        lines.append(
            f"| {cpu_name(record)} | {run} | {record['seed']} | **{100 * results['eval_accuracy']:.1f}%** | "
            f"{results['eval_perplexity']:.1f} | {results['train_tokens'] / 1e6:.1f}M | "
            f"{results['train_tokens_per_second']:,.0f} | {record['steps']:,} | {minutes} min {seconds:02d} s | "
            f"{record['peak_memory_mib'] / 1024:.1f} GB | {answers} |"
        )
    ran = "; ".join(
        f"`{file}`: {r['date'][:10]}, commit {r['commit'] or 'unknown'}, load average (1 min) "
        f"{r['load_average']['start'][0]:.1f} at the start"
        for file, r in ordered
    )
    return "\n".join([*lines, "", f"`python -m lab.record_quick_start --seed S [--one_core] [--precision P]` ({ran}); records in "
                       f"`{QUICK_START_RECORDS}/`."]) + "\n"  # fmt: skip


def readme_quick_start_block(sources: Sources) -> str:
    """README's quick-start block: the seed-42 runs, and where every record is."""
    records = sources.records(QUICK_START_RECORDS)
    shown = {name: record for name, record in records.items() if record["seed"] == 42}
    table = render_quick_start_table(shown)
    if len(shown) < len(records):
        table = table.rstrip("\n") + f" Every seed, {len(records)} records: [Pretraining]({QUICK_START_FULL_TABLE}).\n"
    return table


def quick_start_block(sources: Sources) -> str:
    """docs/pretraining.md's quick-start block: every record."""
    return render_quick_start_table(sources.records(QUICK_START_RECORDS))


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42, help="Pretraining seed (the quick start's default is 42).")
    parser.add_argument("--output_dir", default="runs/bert-tiny-wikitext2", help="The quick start's output folder.")
    parser.add_argument("--records_dir", default=str(ROOT / "results" / "quick-start"), help="Where the record goes.")
    parser.add_argument(
        "--one_core", action="store_true", help="Train as on one core: OMP_NUM_THREADS=1 and --num_processes 1."
    )
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default=None,
        help="Train at this precision instead of the quick start's default (auto: bf16 on a CPU with native bf16).",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if Path(args.output_dir).exists() and any(Path(args.output_dir).iterdir()):
        parser.error(
            f"--output_dir {args.output_dir} is not empty: the record times README's command on a fresh folder, so "
            "remove it or name another"
        )
    start = RunStart.now()
    command = ["bertscratch", "pretrain", "--output_dir", args.output_dir, "--seed", str(args.seed)]
    env = None
    if args.one_core:
        command += ["--num_processes", "1"]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if args.precision:
        command += ["--precision", args.precision]
    began = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    seconds = time.perf_counter() - began
    # the largest resident set among the finished children (the launcher and its training processes), KiB on Linux
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    results = json.loads((Path(args.output_dir) / "all_results.json").read_text(encoding="utf-8"))
    state = json.loads((Path(args.output_dir) / "trainer_state.json").read_text(encoding="utf-8"))
    record = {
        **run_record(PROGRAM, argv, vars(args), start, onnxruntime=False),
        "quick_start_command": ("OMP_NUM_THREADS=1 " if args.one_core else "") + " ".join(portable_paths(command)),
        "one_core": args.one_core,
        "precision": args.precision,  # None: the quick start's default
        "seed": args.seed,
        "end_to_end_seconds": round(seconds, 1),
        "peak_memory_mib": round(peak_mib),
        "steps": state["global_step"],
        "results": results,
        "fill_mask": {"text": FILL_MASK_TEXT, "top": top_answers(args.output_dir)},
    }
    kind = ("-one-core" if args.one_core else "") + (f"-{args.precision}" if args.precision else "")
    name = f"{cpu_slug(record)}{kind}-seed-{args.seed}.json"
    path = Path(args.records_dir) / name
    write_record(path, record)
    return path


if __name__ == "__main__":
    main()
