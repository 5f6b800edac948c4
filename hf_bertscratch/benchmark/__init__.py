"""Side-by-side throughput of BertScratch, transformers' `BertForMaskedLM` (sdpa) and, for inference, ONNX Runtime,
all with the same weights.

For each case (preset, sequence length, padding fraction, eager or compiled) both models are built from the same
preset, the reference's weights are copied from ours through `hf_bertscratch.convert`, and in ONE process timed
repetitions of each model alternate (ours, reference, reference, ours, ...), so that load from other processes on
the machine hits both alike. The workloads:

- train: one MLM training step (forward, backward, fused AdamW as Trainer's default) on a batch with 15% of the real
  tokens labelled;
- infer: one batched forward under `torch.inference_mode` in eval mode (full (B, T, V) logits, as scoring every
  position needs);
- encode: the same for the bare encoder (`model.bert`: (B, T, H) last hidden states, as embeddings need);
- fill-mask: the same forward answering one mask per row (its first labelled position): ours decodes the vocabulary
  at that position only (`masked_positions`), the reference decodes every position and the pipeline reads the
  masked rows, as transformers' fill-mask pipeline runs it.

The compiled variant wraps both models in `torch.compile`; for the inference workloads with inductor's `freezing`
on, as one compiles for inference (weights become constants: prepacked for the GEMMs, folded where they can be).

With `--onnxruntime true`, the inference workloads time a third contender: our model exported with
`hf_bertscratch.onnx.export` (what `bertscratch export` writes, with `--masked_positions` for fill-mask) and run by an
ONNX Runtime CPU `InferenceSession` with every graph optimisation, as many intra-op threads as torch uses and spinning
off (spinning threads would steal the CPU from the PyTorch contenders between their turns). That graph
(`ONNXRUNTIME_GRAPH`) is the fastest under ONNX Runtime of those `lab/compare_onnx_graphs.py` times for the same
weights, transformers' BERT exported by torch.onnx (TorchScript and dynamo) and rewritten by ONNX Runtime's
transformer optimizer included. Its largest difference from ours at real positions (fill-mask: the masked ones) is
printed.

Throughput is counted in useful tokens/s: real (non-pad) tokens of the batch divided by the step time. Peak memory
of each model's training step is measured in a separate subprocess (its `ru_maxrss`), so neither model's
allocations hide the other's. The loss of both models on the same batch, before any step, shows they compute the
same function; ours runs its fast path (sparse prediction, unpadding) in that check.

Ours runs its Linear layers on the CPU GEMM path this machine chose (`hf_bertscratch.cpu_matmul`: oneDNN with
prepacked weights where that was faster, torch's default elsewhere; `--gemm_path` forces one), transformers' BERT on
torch's default. After the cases, each GEMM path is timed alone (`gemm_rates`) on the encoder's feed-forward product
and on a square one 8H wide (2,048 at mini), the most these paths reach on this CPU (the ceiling the record shows).

`--output_json` writes the run's record: the command, the code's commit, the UTC date, package versions, CPU, threads,
load average at the start and the end, the GEMM path and its GFLOP/s, every other choice made for this CPU with the
times it was made from (`cpu_choices`: `cpu_matmul.measured_choices()`, such as the decoding of padded batches' logits
and of inference into a reused buffer), and every figure; `python -m lab.make_report`
renders the records under `results/speed/` into the README's and the docs' speed tables.

Usage:
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --repeats 5 \
        --output_markdown benchmark.md
"""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict

from .. import cpu_matmul
from ..arguments import ArgumentParser, parse_args_or_json
from ..records import RunStart, environment_line, run_record, write_record
from ..run_folder import write_text_atomically
from .arguments import (
    DECODINGS,
    INFERENCE_WORKLOADS,
    ONNXRUNTIME_CONTENDERS,
    PRECISIONS,
    VARIANTS,
    WORKLOADS,
    BenchmarkArguments,
    check_case_grid,
)
from .cases import (
    FIRST_WORD_ID,
    VOCAB_SIZE,
    Case,
    autocast,
    build_config,
    build_models,
    dropout_disabled,
    first_masked_positions,
    gemm_rates,
    loss_difference,
    make_batch,
    make_fill_mask_step,
    make_infer_step,
    make_step,
    make_train_step,
    onnxruntime_contender,
    peak_training_memory_mib,
    run_benchmark,
    run_case,
    summarize,
    time_interleaved,
)
from .report import (
    INT8_HEADER,
    ONNXRUNTIME_GRAPH,
    ONNXRUNTIME_HEADER,
    TABLE_HEADER,
    CaseResult,
    format_int8_row,
    format_onnxruntime_row,
    format_row,
    format_table,
)

# The command a record names: the script, whichever entry point (`bertscratch benchmark`, a test) ran the arguments.
PROGRAM = "python scripts/benchmark.py"


def benchmark_record(argv: list[str], args: BenchmarkArguments, results: list[CaseResult], start: RunStart) -> dict:
    """What `--output_json` writes: how the run was made (`run_record`) and every case's figures (`results`, one
    `CaseResult` each)."""
    onnxruntime = args.onnxruntime or args.onnxruntime_int8
    head = run_record(PROGRAM, argv, args, start, onnxruntime)
    choices = cpu_matmul.measured_choices()  # before `gemm_rates`, whose probes are no choice
    return {**head, "cpu_choices": choices, "gemm_rates": gemm_rates(args), "results": [asdict(r) for r in results]}


def write_outputs(args: BenchmarkArguments, results: list[CaseResult], record: dict) -> None:
    """Write the JSON record and the Markdown table asked for, each through a temporary file renamed into place."""
    if args.output_json:
        write_record(args.output_json, record)
    if args.output_markdown:
        write_text_atomically(args.output_markdown, format_table(results) + f"\n\n{environment_line()}\n")


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch benchmark`."""
    return ArgumentParser(BenchmarkArguments, description=__doc__.split("\n\n")[0])


def parse_args(argv: list[str] | None = None) -> BenchmarkArguments:
    """Arguments from the command line, or from a single .json file argument."""
    (args,) = parse_args_or_json(build_parser(), argv)
    return args


def main(argv: list[str] | None = None) -> None:
    """Benchmark ours against transformers' BertForMaskedLM and print the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    start = RunStart.now()
    results = run_benchmark(args)
    write_outputs(args, results, benchmark_record(argv, args, results, start))
    print(format_table(results))
    print(f"\n{environment_line()}")


__all__ = [
    "DECODINGS",
    "FIRST_WORD_ID",
    "INFERENCE_WORKLOADS",
    "INT8_HEADER",
    "ONNXRUNTIME_CONTENDERS",
    "ONNXRUNTIME_GRAPH",
    "ONNXRUNTIME_HEADER",
    "PRECISIONS",
    "PROGRAM",
    "TABLE_HEADER",
    "VARIANTS",
    "VOCAB_SIZE",
    "WORKLOADS",
    "BenchmarkArguments",
    "Case",
    "CaseResult",
    "autocast",
    "benchmark_record",
    "build_config",
    "build_models",
    "build_parser",
    "check_case_grid",
    "dropout_disabled",
    "first_masked_positions",
    "format_int8_row",
    "format_onnxruntime_row",
    "format_row",
    "format_table",
    "gemm_rates",
    "loss_difference",
    "main",
    "make_batch",
    "make_fill_mask_step",
    "make_infer_step",
    "make_step",
    "make_train_step",
    "onnxruntime_contender",
    "parse_args",
    "peak_training_memory_mib",
    "run_benchmark",
    "run_case",
    "summarize",
    "time_interleaved",
    "write_outputs",
]
