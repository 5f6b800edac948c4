"""One record of BertScratch on a GPU against transformers' BERT with the same weights, written to results/gpu/.

What it measures, in one process:

1. parity: the masked-LM logits of each preset on the device against the CPU's, fp32 and under bf16 autocast (the
   largest |difference| at real positions of a padded batch);
2. for each preset, sequence length and padding fraction (rows of ragged lengths, `benchmark.make_batch`), and each
   workload (train: forward, backward and AdamW step; infer: an eval forward with the full logits; both under bf16
   autocast): every contender's useful (real-token) tokens/s, median of repetitions timed in turn (A, B, B, A, ...:
   `benchmark.time_interleaved`), the ratio ours/contender per repetition (median, min, max), each contender's peak
   memory (`torch.cuda.max_memory_allocated`, measured with no other contender on the device) and its MFU.

The contenders: ours (`BertScratchForMaskedLM`, sdpa), transformers' `BertForMaskedLM` with sdpa; when the grid has
padding, ours with `config.unpad_inputs=False` (`ours_padded`: every layer on the padded batch), ours unpadding
whatever the device and size with no varlen kernel, padding and unpadding around each attention as on a CPU
(`ours_unpadded`; ours runs a padded batch's attention through PyTorch's varlen kernel on CUDA in bf16 where it
exists, else padded below hidden size 768: `batching_bertscratch.DEVICE_RULES`) and ours decoding the logits at the
real rows only, as a CPU may
(`ours_rows_decoding`; ours decodes a padded batch's whole grid on a GPU); and ours and transformers' with
flash_attention_2 when `flash_attn` is importable (ours then runs padded batches varlen on the real tokens). MFU is
the model FLOPs of the useful work (`step_flops`: the same estimate for every contender, so they compare as their
tokens/s do) over the step time and the device's dense bf16 peak (`BF16_PEAK_TFLOPS`, by device name). What a device
cannot give (peak memory, MFU, parity on the CPU; flash attention without `flash_attn`) is null in the record, with
the reason under "skipped".

    bash scripts/gpu_check.sh                           # the CUDA device: mini and base, T 128 and 512, 0 and 30% pad
    bash scripts/gpu_check.sh --device cpu --quick      # every stage at the tiny preset on the CPU
"""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from transformers import HfArgumentParser

from hf_bertscratch import batching_bertscratch
from hf_bertscratch.arguments import parse_args_or_json
from hf_bertscratch.benchmark import (
    autocast,
    build_config,
    build_models,
    check_case_grid,
    loss_difference,
    make_batch,
    make_step,
    summarize,
    time_interleaved,
)
from hf_bertscratch.configuration_bertscratch import PRESETS
from hf_bertscratch.convert import bertscratch_to_bert
from hf_bertscratch.hardware import cpu_model
from hf_bertscratch.modeling_bertscratch import BertScratchForMaskedLM
from hf_bertscratch.records import RunStart, record_file, run_record, write_record

PROGRAM = "bash scripts/gpu_check.sh"
ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("train", "infer")
PRECISION = "bf16"
OURS = "ours"
PADDED = "ours_padded"  # ours with config.unpad_inputs=False: every layer on the padded (B, T) batch, as BERT runs
UNPADDED = "ours_unpadded"  # ours running a padded batch unpadded whatever the device and size, no varlen: as on a CPU
ROWS = "ours_rows_decoding"  # ours decoding a padded batch's logits at its real rows only, as a CPU may
# The device rules (`batching_bertscratch.DEVICE_RULES`) a contender steps under: the UNPADDED one unpads a padded
# batch whatever the device and size with no varlen kernel (padding and unpadding around each attention, as on a
# CPU), the ROWS one decodes a padded batch's logits at its real rows on every device.
CONTENDER_RULES: dict[str, dict[str, object]] = {
    UNPADDED: {"unpad_min_hidden": {}, "torch_varlen_devices": ()},
    ROWS: {"padded_decoding": {"cuda": "rows", "cpu": "rows"}},
}
# Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s from NVIDIA's datasheets, matched in order against
# `torch.cuda.get_device_name()` ("NVIDIA H100 80GB HBM3" is the SXM part): the first pattern found in the name wins.
BF16_PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200 NVL", 835.0),
    ("H200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
)
# What `--quick` runs instead of the full grid: seconds on a CPU, figures worth nothing but every stage exercised.
QUICK = {"presets": ["tiny"], "seq_lens": [32], "batch_tokens": 128, "repeats": 2, "warmup": 1}
MIB = 2**20


@dataclass
class GpuCheckArguments:
    """What the GPU check measures and where its record goes."""

    device: str = field(default="cuda", metadata={"help": "torch device to measure: cuda, cuda:N, or cpu."})
    quick: bool = field(
        default=False,
        metadata={"help": f"Every stage at tiny sizes ({QUICK}), replacing those arguments: checks the script runs."},
    )
    presets: list[str] = field(
        default_factory=lambda: ["mini", "base"], metadata={"help": f"Model sizes, from {sorted(PRESETS)}."}
    )
    seq_lens: list[int] = field(default_factory=lambda: [128, 512], metadata={"help": "Padded sequence lengths T."})
    paddings: list[float] = field(
        default_factory=lambda: [0.0, 0.3],
        metadata={"help": "Fractions of the batch's tokens that are padding, in [0, 0.5] (rows of ragged lengths)."},
    )
    batch_tokens: int = field(default=16384, metadata={"help": "Padded tokens per batch: B = batch_tokens // T."})
    repeats: int = field(default=20, metadata={"help": "Timed steps of each contender per case and workload."})
    warmup: int = field(default=3, metadata={"help": "Untimed steps of each contender before timing."})
    budget_s: float = field(
        default=420.0,
        metadata={
            "help": "No case starts after this many seconds (except the first, which always runs); the record names the "
            "cases left out."
        },
    )
    padded_contenders: bool = field(
        default=True,
        metadata={
            "help": f"With padding in the grid, also time ours with config.unpad_inputs=False ({PADDED!r}), ours "
            f"unpadding whatever the device and size ({UNPADDED!r}; both show what running the dense layers on the "
            f"real tokens only buys or costs here, which ours decides by `unpadding_pays`) and ours decoding the "
            f"logits at the real rows only, as a CPU may ({ROWS!r}: what decoding the whole grid buys)."
        },
    )
    dropout: float = field(default=0.1, metadata={"help": "Hidden and attention dropout in the training step."})
    seed: int = field(default=0, metadata={"help": "Seed of the weights and the batches."})
    output_dir: str = field(
        default=str(ROOT / "results" / "gpu"), metadata={"help": "Folder of the record (DEVICE-DATE.json)."}
    )

    def __post_init__(self) -> None:
        if self.quick:
            for name, value in QUICK.items():
                setattr(self, name, value)
        bad = [preset for preset in self.presets if preset not in PRESETS]
        if bad or not self.presets:
            raise ValueError(f"--presets got {bad or 'nothing'}; expected some of {sorted(PRESETS)}.")
        check_case_grid(self.seq_lens, self.paddings)
        for name in ("repeats", "batch_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}.")


def bf16_peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of the GPU named `device_name` (`BF16_PEAK_TFLOPS`), None when it is not in the table."""
    return next((peak for pattern, peak in BF16_PEAK_TFLOPS if pattern in device_name), None)


def device_info(device: torch.device) -> dict:
    """Name, compute capability, memory, CUDA version and bf16 peak of a CUDA device; name (the CPU model) for cpu."""
    if device.type != "cuda":
        return {"type": device.type, "name": cpu_model(), "bf16_peak_tflops": None}
    properties = torch.cuda.get_device_properties(device)
    return {
        "type": "cuda",
        "name": properties.name,
        "capability": f"{properties.major}.{properties.minor}",
        "memory_gib": round(properties.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
        "bf16_peak_tflops": bf16_peak_tflops(properties.name),
    }


def step_flops(num_params: int, config: object, lengths: list[int], workload: str) -> float:
    """Model FLOPs of one step on rows of `lengths` real tokens: 2 per parameter and token for the forward, plus the
    attention scores and their weighted sum, 4 L H n^2 for a row of n tokens; three times that for a training step
    (forward and backward). The decoder counts at every token, as the tied word embedding counts once in
    `num_params` (Kaplan et al. 2020; Chowdhery et al. 2022, appendix B)."""
    passes = 3 if workload == "train" else 1
    attention = 4 * config.num_hidden_layers * config.hidden_size * sum(n * n for n in lengths)
    return float(passes * (2 * num_params * sum(lengths) + attention))


@contextlib.contextmanager
def on_device(models: list[nn.Module], device: torch.device) -> Iterator[None]:
    """`models` on `device` for the block, back on the CPU after it with their gradients dropped and the device's
    cache emptied, so that what the next measurement allocates is its own."""
    for model in models:
        model.to(device)
    try:
        yield
    finally:
        for model in models:
            model.zero_grad(set_to_none=True)
            model.to("cpu")
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def synchronized(step: Callable[[], None], device: torch.device) -> Callable[[], None]:
    """`step`, returning only once the device has finished its work (CUDA runs asynchronously to the host)."""
    if device.type != "cuda":
        return step

    def run() -> None:
        step()
        torch.cuda.synchronize(device)

    return run


def contender_step(
    name: str, model: nn.Module, workload: str, batch: dict[str, torch.Tensor], device: torch.device
) -> Callable[[], None]:
    """The synchronised `workload` step of contender `name`, under its device rules while it steps
    (`CONTENDER_RULES`)."""
    step = make_step(workload, model, batch, PRECISION)
    rules = CONTENDER_RULES.get(name)
    if rules is not None:
        plain = step

        def step() -> None:
            with batching_bertscratch.device_rules(**rules):
                plain()

    return synchronized(step, device)


def peak_memory_mib(
    name: str, model: nn.Module, workload: str, batch: dict[str, torch.Tensor], device: torch.device
) -> float | None:
    """`torch.cuda.max_memory_allocated` over two `workload` steps of `model` alone on the device (weights, gradients,
    AdamW state, activations and the batch); None off CUDA."""
    if device.type != "cuda":
        return None
    with on_device([model], device):
        torch.cuda.reset_peak_memory_stats(device)
        step = contender_step(name, model, workload, batch, device)
        for _ in range(2):  # the second training step also holds AdamW's state
            step()
        del step
        return torch.cuda.max_memory_allocated(device) / MIB


def device_parity(preset: str, device: torch.device, seq_len: int, seed: int) -> dict:
    """Largest |logits on `device` - logits on the CPU (fp32)| of the masked-LM model at the real positions of a
    padded batch (8 rows, 30% padding): on the device in fp32 and under bf16 autocast."""
    torch.manual_seed(seed)
    model = BertScratchForMaskedLM(build_config(preset, dropout=0.0)).eval()
    batch = make_batch(8, seq_len, 0.3, seed=seed)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    real = batch["attention_mask"].bool()
    with torch.inference_mode():
        expected = model(**inputs).logits[real]
    on, real = {name: tensor.to(device) for name, tensor in inputs.items()}, real.to(device)
    with on_device([model], device), torch.inference_mode():
        fp32 = model(**on).logits[real].float().cpu()
        with autocast(PRECISION, device.type):
            bf16 = model(**on).logits[real].float().cpu()
    return {
        "preset": preset,
        "seq_len": seq_len,
        "fp32_matmul_precision": torch.get_float32_matmul_precision(),
        "fp32_max_abs_diff": (fp32 - expected).abs().max().item(),
        "bf16_max_abs_diff": (bf16 - expected).abs().max().item(),
    }


def build_contenders(preset: str, args: GpuCheckArguments, device: torch.device) -> tuple[dict, dict[str, str]]:
    """Ours and transformers' BertForMaskedLM (sdpa, and both with flash_attention_2 where it can run), same weights,
    on the CPU; and the reason for each contender left out."""
    ours, reference = build_models(preset, args.dropout, args.seed)
    ours.set_attn_implementation("sdpa")
    contenders: dict[str, nn.Module] = {OURS: ours, "transformers_sdpa": reference}
    skipped: dict[str, str] = {}
    if args.padded_contenders and any(args.paddings):
        padded, unpadded, rows = (copy.deepcopy(ours) for _ in range(3))  # each its own config: only it changes
        padded.config.unpad_inputs = False
        contenders.update({PADDED: padded, UNPADDED: unpadded, ROWS: rows})  # `CONTENDER_RULES` for the last two
    for flash, make in (
        ("bertscratch_flash_attention_2", lambda: copy.deepcopy(ours)),  # its own config: the implementation differs
        ("transformers_flash_attention_2", lambda: bertscratch_to_bert(ours)),
    ):
        if device.type != "cuda":
            skipped[flash] = "flash_attention_2 needs a CUDA device"
        elif importlib.util.find_spec("flash_attn") is None:
            skipped[flash] = "flash_attn is not importable"
        else:
            try:
                contenders[flash] = make()
                contenders[flash].set_attn_implementation("flash_attention_2")
            except (ImportError, ValueError, RuntimeError) as error:
                contenders.pop(flash, None)
                skipped[flash] = f"transformers refused flash_attention_2: {error}"
    return contenders, skipped


def measure_workload(
    contenders: dict[str, nn.Module],
    workload: str,
    batch: dict[str, torch.Tensor],
    args: GpuCheckArguments,
    device: torch.device,
) -> dict:
    """Tokens/s (median), ours/contender ratios and peak memory of every contender on one batch and workload."""
    useful_tokens = int(batch["attention_mask"].sum())
    memory = {name: peak_memory_mib(name, model, workload, batch, device) for name, model in contenders.items()}
    with on_device(list(contenders.values()), device):
        steps = {name: contender_step(name, model, workload, batch, device) for name, model in contenders.items()}
        seconds = time_interleaved(steps, args.repeats, args.warmup)
        del steps
    tokens_per_s = {name: statistics.median(useful_tokens / s for s in values) for name, values in seconds.items()}
    ratios = {}
    for name in contenders:
        if name != OURS:
            _, _, median, low, high = summarize(seconds, useful_tokens, other=name)
            ratios[name] = {"median": median, "min": low, "max": high}
    return {
        "tokens_per_s": tokens_per_s,
        "ours_over": ratios,
        "peak_memory_mib": memory if device.type == "cuda" else None,
    }


def mfu(tokens_per_s: dict[str, float], flops: float, useful_tokens: int, peak_tflops: float | None) -> dict | None:
    """Each contender's model FLOPs per second over the device's bf16 peak; None without a known peak."""
    if peak_tflops is None:
        return None
    return {name: flops * value / useful_tokens / (peak_tflops * 1e12) for name, value in tokens_per_s.items()}


def run_preset(
    preset: str, args: GpuCheckArguments, device: torch.device, deadline: float, skipped: dict, first: bool
) -> tuple[list[dict], list[str]]:
    """Every case of one preset: (results, names of the cases left out once past the deadline). The run's `first`
    preset measures its first case whatever the time: a record without a case says nothing."""
    contenders, left_out = build_contenders(preset, args, device)
    skipped.update(left_out)
    config = contenders[OURS].config
    num_params = sum(parameter.numel() for parameter in contenders[OURS].parameters())
    points = [(seq_len, padding) for seq_len in args.seq_lens for padding in args.paddings]
    batches = {point: make_batch(max(1, args.batch_tokens // point[0]), *point, seed=args.seed) for point in points}
    batches = {point: {name: t.to(device) for name, t in batch.items()} for point, batch in batches.items()}
    ours, reference = contenders[OURS], contenders["transformers_sdpa"]
    with on_device([ours, reference], device):  # before any training step, while the weights are still equal
        loss_diffs = {point: loss_difference(ours, reference, batch) for point, batch in batches.items()}
    peak = device_info(device)["bf16_peak_tflops"]
    results, not_run = [], []
    for (seq_len, padding), batch in batches.items():
        if time.monotonic() > deadline and (results or not first):
            not_run.append(f"{preset} T={seq_len} padding={padding:g}")
            continue
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        for workload in WORKLOADS:
            measured = measure_workload(contenders, workload, batch, args, device)
            flops = step_flops(num_params, config, lengths, workload)
            result = {
                "preset": preset,
                "seq_len": seq_len,
                "padding": padding,
                "workload": workload,
                "precision": PRECISION,
                "batch_size": batch["input_ids"].shape[0],
                "useful_tokens": sum(lengths),
                **measured,
                "flops_per_step": flops,
                "mfu": mfu(measured["tokens_per_s"], flops, sum(lengths), peak),
                "loss_max_abs_diff": loss_diffs[seq_len, padding] if workload == "train" else None,
            }
            print(format_result(result), flush=True)
            results.append(result)
    return results, not_run


def format_result(result: dict) -> str:
    """One line: the case, each contender's tokens/s beside ours/it (median), peak memory and MFU."""
    parts = [f"{result['preset']} T={result['seq_len']} pad={result['padding']:g} {result['workload']}"]
    for name, value in result["tokens_per_s"].items():
        part = f"{name} {value:,.0f} tok/s"
        if name in result["ours_over"]:
            part += f" (ours/it {result['ours_over'][name]['median']:.2f}x)"
        if result["peak_memory_mib"] is not None:
            part += f", {result['peak_memory_mib'][name]:,.0f} MiB"
        if result["mfu"] is not None:
            part += f", MFU {100 * result['mfu'][name]:.1f}%"
        parts.append(part)
    return " | ".join(parts)


def record_path(output_dir: str | Path, device: dict, date: str) -> Path:
    """results/gpu/DEVICE-DATE.json, the device name and the UTC date-time reduced to letters, digits and dashes."""
    return record_file(output_dir, device["name"], date)


def skip_reasons(device: dict) -> dict[str, str]:
    """Why the record holds null for what this device cannot measure."""
    reasons = {}
    if device["type"] != "cuda":
        reasons["parity"] = "the device is the CPU: there is no second device to compare against"
        reasons["peak_memory_mib"] = "torch.cuda.max_memory_allocated needs a CUDA device"
    if device["bf16_peak_tflops"] is None:
        reasons["mfu"] = f"no bf16 peak known for {device['name']!r} (BF16_PEAK_TFLOPS)"
    return reasons


def main(argv: list[str] | None = None) -> dict:
    """Run the check, write the record, print it; returns the record (its path under "path")."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(GpuCheckArguments, description=__doc__.split("\n\n")[0])
    (args,) = parse_args_or_json(parser, argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA device (run with --device cpu --quick on a CPU).")

    # 1. how the run was made
    start, began = RunStart.now(), time.monotonic()
    deadline = began + args.budget_s
    info = device_info(device)
    record = {**run_record(PROGRAM, argv, args, start, onnxruntime=False), "device": info}
    skipped = skip_reasons(info)

    # 2. the device against the CPU
    parity_len = min(128, max(args.seq_lens))
    if device.type == "cuda":
        record["parity"] = [device_parity(preset, device, parity_len, args.seed) for preset in args.presets]
    else:
        record["parity"] = None

    # 3. speed, memory and MFU of every contender, case by case
    cases, not_run = [], []
    for preset in args.presets:
        results, left = run_preset(preset, args, device, deadline, skipped, first=not cases)
        cases.extend(results)
        not_run.extend(left)
    if not_run:
        skipped["cases"] = f"past --budget_s {args.budget_s:g}: {', '.join(not_run)}"

    # 4. the record
    record.update(cases=cases, skipped=skipped, elapsed_s=round(time.monotonic() - began, 1))
    path = record_path(args.output_dir, info, start.date)
    print(json.dumps(record, indent=2))
    write_record(path, record)
    return {**record, "path": str(path)}


if __name__ == "__main__":
    main()
