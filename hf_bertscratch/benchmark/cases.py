"""The benchmark's cases: both models built with the same weights, the batch, each workload's step, the ONNX Runtime
contenders, interleaved timing, the training step's peak memory in a subprocess, and the GEMM paths' rates."""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import BertForMaskedLM, PreTrainedModel

from .. import cpu_matmul, fast_decode
from ..configuration_bertscratch import PRESETS, BertScratchConfig
from ..convert import bertscratch_config_to_bert, bertscratch_to_bert
from ..inference import takes_masked_positions
from ..modeling_bertscratch import BertScratchForMaskedLM
from .arguments import INFERENCE_WORKLOADS, ONNXRUNTIME_CONTENDERS, BenchmarkArguments
from .report import ONNXRUNTIME_GRAPH, CaseResult, format_onnxruntime_row, format_row

logger = logging.getLogger(__name__)

VOCAB_SIZE = 30522  # bert-base-uncased's WordPiece vocabulary: the decoder it implies is most of a small BERT
FIRST_WORD_ID = 999  # ids below are [PAD], [unused*], [UNK], [CLS], [SEP], [MASK] in bert-base-uncased


def build_config(preset: str, dropout: float = 0.1) -> BertScratchConfig:
    """A BertScratch config of `preset` with bert-base-uncased's vocabulary and 512 positions."""
    return BertScratchConfig(
        **PRESETS[preset], vocab_size=VOCAB_SIZE, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
    )


def build_models(
    preset: str, dropout: float, seed: int, decoding: str = "auto"
) -> tuple[BertScratchForMaskedLM, BertForMaskedLM]:
    """Ours at random init and transformers' `BertForMaskedLM` (sdpa) holding exactly the same weights; ours decodes
    its inference logits as `bertscratch pretrain` evaluates (`fast_decode.enable`) for `decoding` "auto", on its own
    for "model"."""
    torch.manual_seed(seed)
    ours = BertScratchForMaskedLM(build_config(preset, dropout))
    reference = bertscratch_to_bert(ours)
    assert isinstance(reference, BertForMaskedLM), "the conversion gives each head transformers' own"
    reference.set_attn_implementation("sdpa")
    return fast_decode.enable(ours) if decoding == "auto" else ours, reference


def make_batch(
    batch_size: int, seq_len: int, padding: float, mask_probability: float = 0.15, seed: int = 0
) -> dict[str, torch.Tensor]:
    """A right-padded MLM batch whose rows have varied lengths (a fraction `padding` of the grid is pad).

    Row lengths are spread evenly over [(1 - 2 padding) T, T] and shuffled; `mask_probability` of each row's real
    tokens carry a label (at least one per row), the rest are -100.

    Returns:
        input_ids, attention_mask, labels: each (B, T) int64.
    """
    generator = torch.Generator().manual_seed(seed)
    shortest = max(2, round((1.0 - 2.0 * padding) * seq_len))
    lengths = torch.linspace(shortest, seq_len, batch_size).round().long()
    lengths = lengths[torch.randperm(batch_size, generator=generator)]
    positions = torch.arange(seq_len).unsqueeze(0)  # (1, T)
    attention_mask = (positions < lengths.unsqueeze(1)).long()  # (B, T)
    input_ids = torch.randint(FIRST_WORD_ID, VOCAB_SIZE, (batch_size, seq_len), generator=generator)
    input_ids = input_ids * attention_mask  # pad id 0
    scores = torch.rand(batch_size, seq_len, generator=generator).masked_fill(attention_mask == 0, 2.0)
    labelled = scores < mask_probability
    labelled[torch.arange(batch_size), scores.argmin(dim=1)] = True  # every row scores at least one token
    labels = input_ids.masked_fill(~labelled, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


@contextlib.contextmanager
def dropout_disabled(*models: PreTrainedModel) -> Iterator[None]:
    """Turn every dropout of `models` off (modules and config rates) and restore them afterwards."""
    saved: list[tuple[object, str, float]] = []
    for model in models:
        saved.append((model.config, "attention_probs_dropout_prob", model.config.attention_probs_dropout_prob))
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                saved.append((module, "p", module.p))
    try:
        for owner, name, _ in saved:
            setattr(owner, name, 0.0)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def loss_difference(ours: PreTrainedModel, reference: PreTrainedModel, batch: dict[str, torch.Tensor]) -> float:
    """|loss_ours - loss_reference| on `batch`, both in training mode (ours on its fast path), dropout off."""
    ours.train()
    reference.train()
    with dropout_disabled(ours, reference), torch.no_grad():
        return abs(ours(**batch).loss.item() - reference(**batch).loss.item())


def autocast(precision: str, device_type: str = "cpu") -> contextlib.AbstractContextManager:
    """bf16 autocast on `device_type` ("cpu", "cuda") for "bf16", nothing for "fp32"."""
    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_train_step(model: nn.Module, batch: dict[str, torch.Tensor], precision: str = "fp32") -> Callable[[], None]:
    """A closure running one MLM training step (forward, backward, AdamW) of `model` on `batch`, autocast (for
    "bf16") on the batch's device. AdamW runs fused, as transformers' `Trainer` runs it by default
    (`adamw_torch_fused`, torch >= 2.8) and `bertscratch pretrain` with it."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step() -> None:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, batch["input_ids"].device.type):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()

    return step


def make_infer_step(model: nn.Module, batch: dict[str, torch.Tensor], precision: str = "fp32") -> Callable[[], None]:
    """A closure running one batched eval-mode forward of `model` under `torch.inference_mode`."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def step() -> None:
        model.eval()
        with torch.inference_mode(), autocast(precision, batch["input_ids"].device.type):
            model(**inputs)

    return step


def first_masked_positions(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, 1) the first labelled position of each row of a `make_batch` batch (every row has one)."""
    return (batch["labels"] != -100).int().argmax(dim=1, keepdim=True)


def make_fill_mask_step(
    model: nn.Module, batch: dict[str, torch.Tensor], precision: str = "fp32"
) -> Callable[[], None]:
    """A closure answering one mask per row (`first_masked_positions`) in one eval-mode forward: a model whose
    forward takes `masked_positions` (ours) decodes there only; any other (transformers' BERT) decodes every
    position, and the masked rows are read from its logits, as transformers' fill-mask pipeline does."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    positions = first_masked_positions(batch)  # (B, 1)
    sparse = takes_masked_positions(getattr(model, "_orig_mod", model))  # torch.compile keeps the model as _orig_mod

    def step() -> None:
        model.eval()
        with torch.inference_mode(), autocast(precision, batch["input_ids"].device.type):
            if sparse:
                model(**inputs, masked_positions=positions)  # (B, 1, V)
            else:
                logits = model(**inputs).logits  # (B, T, V)
                logits.gather(1, positions[..., None].expand(-1, -1, logits.shape[-1]))  # (B, 1, V)

    return step


def make_step(
    workload: str, model: nn.Module, batch: dict[str, torch.Tensor], precision: str = "fp32"
) -> Callable[[], None]:
    """The step closure of `workload` (`WORKLOADS`; encode is infer on the bare encoder)."""
    steps = {
        "train": make_train_step,
        "infer": make_infer_step,
        "encode": make_infer_step,
        "fill-mask": make_fill_mask_step,
    }
    return steps[workload](model, batch, precision)


def onnxruntime_contender(
    ours: BertScratchForMaskedLM, workload: str, batch: dict[str, torch.Tensor], folder: Path, int8: bool = False
) -> tuple[Callable[[], None], float]:
    """Export ours (the MLM; its encoder for "encode"; with `masked_positions` for "fill-mask") into `folder` (with
    `int8`, then quantized as `bertscratch export --quantize dynamic` does) and return a closure running one ONNX
    Runtime forward on `batch`, and the largest |ONNX Runtime - ours| over real positions (fill-mask: the masked
    ones) of that batch."""
    from ..onnx.export import export_graph, operator_counts
    from ..onnx.quantize import quantize_int8
    from ..onnx.runtime import onnx_session, run_session

    model, task = (ours.bert, "feature-extraction") if workload == "encode" else (ours, "fill-mask")
    masked = workload == "fill-mask"
    model.eval()
    (name,) = export_graph(model, task, folder / "model.onnx", masked_positions=masked)[:1]
    if int8:
        quantize_int8(folder / "model.onnx")
    logger.info("ONNX Runtime runs %s: %s", ONNXRUNTIME_GRAPH, operator_counts(folder / "model.onnx"))
    inference_session = onnx_session(folder, num_threads=torch.get_num_threads(), spinning=False)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if masked:
        inputs["masked_positions"] = first_masked_positions(batch)
    with torch.inference_mode():
        expected = model(**inputs, return_dict=True)[name].numpy()
    actual = run_session(inference_session, inputs)[name]
    if not masked:
        real = batch["attention_mask"].bool().numpy()
        expected, actual = expected[real], actual[real]

    def step() -> None:
        run_session(inference_session, inputs)

    return step, float(abs(actual - expected).max())


def time_interleaved(steps: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each step, alternating the order every repetition (ABBA) so drift hits both alike."""
    names = list(steps)
    for _ in range(warmup):
        for name in names:
            steps[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            start = time.perf_counter()
            steps[name]()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def summarize(
    seconds: dict[str, list[float]], useful_tokens: int, other: str = "reference"
) -> tuple[float, float, float, float, float]:
    """(ours tokens/s, `other`'s tokens/s, ratio ours/other median, min, max) from per-repetition times."""
    ours = [useful_tokens / s for s in seconds["ours"]]
    reference = [useful_tokens / s for s in seconds[other]]
    ratios = [o / r for o, r in zip(ours, reference)]
    return statistics.median(ours), statistics.median(reference), statistics.median(ratios), min(ratios), max(ratios)


@dataclass(frozen=True)
class Case:
    """One point of the benchmark grid; every workload in `--workloads` is timed on it."""

    preset: str
    seq_len: int
    padding: float
    variant: str
    precision: str


def peak_training_memory_mib(args: BenchmarkArguments, case: Case) -> dict[str, float]:
    """Peak resident memory (MiB) of ours and of the reference, each a fresh subprocess running two training steps.

    The two subprocesses run side by side (each has its own address space, so neither sees the other's memory).
    """
    context = multiprocessing.get_context("spawn")
    with context.Pool(2, maxtasksperchild=1) as pool:
        pending = {kind: pool.apply_async(_memory_probe, (kind, args, case)) for kind in ("ours", "reference")}
        return {kind: result.get() for kind, result in pending.items()}


def _memory_probe(kind: str, args: BenchmarkArguments, case: Case) -> float:
    """Runs in the subprocess: builds only the model `kind` ("ours" or "reference") so nothing else is resident."""
    config = build_config(case.preset, args.dropout)
    if kind == "ours":
        model: nn.Module = BertScratchForMaskedLM(config)
    else:
        model = BertForMaskedLM(bertscratch_config_to_bert(config))
        model.set_attn_implementation("sdpa")
    if case.variant == "compiled":
        model = torch.compile(model)  # type: ignore[assignment]  # a module (torch types it as any callable)
    batch = make_batch(args.batch_size, case.seq_len, case.padding, args.mask_probability)
    step = make_train_step(model, batch, case.precision)
    for _ in range(2):  # the second step also holds AdamW's state
        step()
    return _peak_rss_mib()


def _peak_rss_mib() -> float:
    """This process's peak resident memory in MiB.

    Linux's VmHWM is per address space, so it restarts at the exec of a spawned child; `ru_maxrss` would carry the
    parent's peak over (it survives fork + exec), which is why it is only the fallback off Linux.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    per_mib = 1024 * 1024 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / per_mib


def run_case(args: BenchmarkArguments, case: Case) -> list[CaseResult]:
    """Measure every workload of one (preset, T, padding, variant, precision) case; one result per workload."""
    preset, seq_len, padding, variant, precision = case.preset, case.seq_len, case.padding, case.variant, case.precision
    ours, reference = build_models(preset, args.dropout, args.seed, args.decoding)
    batch = make_batch(args.batch_size, seq_len, padding, args.mask_probability, args.seed)
    useful_tokens = int(batch["attention_mask"].sum())
    loss_diff = loss_difference(ours, reference, batch)
    results = []
    for workload in args.workloads:
        models: dict[str, nn.Module] = {"ours": ours, "reference": reference}
        if workload == "encode":
            models = {"ours": ours.bert, "reference": reference.bert}  # both keep the bare encoder as .bert
        if variant == "compiled":
            # torch types what it compiles as any callable; a compiled module is a module (OptimizedModule).
            models = {name: torch.compile(model) for name, model in models.items()}  # type: ignore[misc]
        steps = {name: make_step(workload, model, batch, precision) for name, model in models.items()}
        with tempfile.TemporaryDirectory() as onnx_dir:
            differences = {}
            for contender in ONNXRUNTIME_CONTENDERS:
                if getattr(args, contender) and workload in INFERENCE_WORKLOADS:
                    folder = Path(onnx_dir) / contender
                    folder.mkdir()
                    steps[contender], differences[contender] = onnxruntime_contender(
                        ours, workload, batch, folder, int8=contender == "onnxruntime_int8"
                    )
            # Compilation happens in the first (warm-up) call; freezing applies to graphs run without autograd.
            freezing = variant == "compiled" and workload in INFERENCE_WORKLOADS
            with torch._inductor.config.patch(freezing=freezing) if freezing else contextlib.nullcontext():
                seconds = time_interleaved(steps, args.repeats, args.warmup)
        ours_tps, ref_tps, ratio, low, high = summarize(seconds, useful_tokens)
        result = CaseResult(
            preset,
            seq_len,
            padding,
            workload,
            variant,
            precision,
            args.batch_size,
            useful_tokens,
            ours_tps,
            ref_tps,
            ratio,
            low,
            high,
        )
        for contender in differences:  # each ONNX Runtime contender timed: its tokens/s, ours/it, output difference
            _, tokens_per_s, *ratios = summarize(seconds, useful_tokens, contender)
            setattr(result, f"{contender}_tokens_per_s", tokens_per_s)
            for statistic, ratio in zip(("median", "min", "max"), ratios):
                setattr(result, f"ours_over_{contender}_{statistic}", ratio)
            setattr(result, f"{contender}_max_abs_diff", differences[contender])
            result.onnxruntime_graph = ONNXRUNTIME_GRAPH
        if workload == "train":
            result.loss_max_abs_diff = loss_diff
            if args.memory:
                memory = peak_training_memory_mib(args, case)
                result.ours_peak_mib, result.reference_peak_mib = memory["ours"], memory["reference"]
        row = format_row if result.onnxruntime_tokens_per_s is None else format_onnxruntime_row
        logger.info("%s", row(result))
        results.append(result)
    return results


def run_benchmark(args: BenchmarkArguments) -> list[CaseResult]:
    """Every case of the grid in `args`, in order preset, T, padding, variant, precision."""
    if args.num_threads is not None:
        torch.set_num_threads(args.num_threads)
    cpu_matmul.set_path(args.gemm_path)
    cpu_matmul.choice()  # chosen (and logged) before any timing
    grid = itertools.product(args.presets, args.seq_lens, args.paddings, args.variants, args.precisions)
    return [result for point in grid for result in run_case(args, Case(*point))]


def gemm_rates(args: BenchmarkArguments) -> list[dict]:
    """GFLOP/s of each GEMM path (`cpu_matmul.probe`: fp32 and, on a CPU with native bf16, bf16; torch's default and
    oneDNN prepacked) on the first preset's feed-forward product (the last padding's useful tokens x H x 4H) and on a
    square product 8H wide, the most they reach here; each a median over interleaved rounds."""
    hidden = PRESETS[args.presets[0]]["hidden_size"]
    batch = make_batch(args.batch_size, args.seq_lens[0], args.paddings[-1], args.mask_probability, args.seed)
    tokens = int(batch["attention_mask"].sum())
    rates = []
    for name, shape in {"encoder": (tokens, hidden, 4 * hidden), "ceiling": (8 * hidden,) * 3}.items():
        rates.append({"shape": name, "mnk": list(shape), "gflops": cpu_matmul.probe(shape, rounds=5)})
        logger.info("GEMM GFLOP/s, %s %s: %s", name, shape, rates[-1]["gflops"])
    return rates
