"""Side-by-side throughput of BertScratch, transformers' `BertForMaskedLM` (sdpa) and, for inference, ONNX Runtime,
all with the same weights.

For each case (preset, sequence length, padding fraction, eager or compiled) both models are built from the same
preset, the reference's weights are copied from ours through `hf_bertscratch.convert`, and in ONE process timed
repetitions of each model alternate (ours, reference, reference, ours, ...), so that load from other processes on
the machine hits both alike. The workloads:

- train: one MLM training step (forward, backward, AdamW) on a batch with 15% of the real tokens labelled;
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

import contextlib
import itertools
import json
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from transformers import BertForMaskedLM, HfArgumentParser, PreTrainedModel

from . import cpu_matmul, fast_decode
from .arguments import parse_args_or_json
from .configuration_bertscratch import PRESETS, BertScratchConfig
from .convert import bertscratch_config_to_bert, bertscratch_to_bert
from .inference import takes_masked_positions
from .modeling_bertscratch import BertScratchForMaskedLM
from .records import RunStart, environment_line, run_record
from .run_folder import write_text_atomically

logger = logging.getLogger(__name__)

WORKLOADS = ("train", "infer", "encode", "fill-mask")
INFERENCE_WORKLOADS = ("infer", "encode", "fill-mask")
VARIANTS = ("eager", "compiled")
PRECISIONS = ("fp32", "bf16")
DECODINGS = ("auto", "model")  # --decoding
VOCAB_SIZE = 30522  # bert-base-uncased's WordPiece vocabulary: the decoder it implies is most of a small BERT
FIRST_WORD_ID = 999  # ids below are [PAD], [unused*], [UNK], [CLS], [SEP], [MASK] in bert-base-uncased
# The ONNX Runtime contender's graph, as the results name it.
# The ONNX Runtime contenders: each is a `BenchmarkArguments` flag, a key of the timings, and the prefix of its
# `CaseResult` fields (`<name>_tokens_per_s`, `ours_over_<name>_median|min|max`, `<name>_max_abs_diff`).
ONNXRUNTIME_CONTENDERS = ("onnxruntime", "onnxruntime_int8")
ONNXRUNTIME_GRAPH = (
    "`bertscratch export` (`export_graph(optimize=True)`: com.microsoft.Attention per layer, the encoder on the real "
    "tokens' rows, every Linear a Gemm)"
)


@dataclass
class BenchmarkArguments:
    """What to benchmark; every list argument takes several values (`--presets tiny mini`)."""

    presets: list[str] = field(
        default_factory=lambda: ["tiny", "mini", "small", "base"],
        metadata={"help": f"Model sizes to benchmark, from {sorted(PRESETS)}."},
    )
    seq_lens: list[int] = field(
        default_factory=lambda: [128, 512], metadata={"help": "Padded sequence lengths T (at most 512)."}
    )
    paddings: list[float] = field(
        default_factory=lambda: [0.0, 0.3],
        metadata={
            "help": "Fractions of the (B, T) batch that are padding, in [0, 0.5]: row lengths are spread evenly "
            "between (1 - 2p) T and T, as in a real batch of varied sentences."
        },
    )
    workloads: list[str] = field(
        default_factory=lambda: ["train", "infer"],
        metadata={
            "help": f"Workloads to time, from {list(WORKLOADS)} (encode: the bare encoder's inference; fill-mask: "
            "inference answering one mask per row)."
        },
    )
    variants: list[str] = field(
        default_factory=lambda: ["eager"],
        metadata={
            "help": f"Execution modes, from {list(VARIANTS)} ('compiled' wraps both models in torch.compile, with "
            "inductor's freezing for the inference workloads)."
        },
    )
    precisions: list[str] = field(
        default_factory=lambda: ["fp32"],
        metadata={"help": f"Numeric precisions, from {list(PRECISIONS)} ('bf16': both models under CPU autocast)."},
    )
    batch_size: int = field(default=32, metadata={"help": "Rows per batch B."})
    repeats: int = field(default=5, metadata={"help": "Timed repetitions of each model per case."})
    warmup: int = field(default=1, metadata={"help": "Untimed repetitions of each model before timing."})
    mask_probability: float = field(default=0.15, metadata={"help": "Fraction of real tokens labelled for MLM."})
    dropout: float = field(default=0.1, metadata={"help": "Hidden and attention dropout during the training step."})
    onnxruntime: bool = field(
        default=False,
        metadata={"help": "Also time ONNX Runtime on our exported model in the inference workloads (needs [onnx])."},
    )
    onnxruntime_int8: bool = field(
        default=False,
        metadata={
            "help": "Also time ONNX Runtime on the int8 graph (`bertscratch export --quantize dynamic`) in the "
            "inference workloads (needs [onnx]); its ratio is ours over int8, so int8's speed-up is the inverse."
        },
    )
    memory: bool = field(
        default=True, metadata={"help": "Measure the peak training memory of each model in a subprocess."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch threads (default: torch's choice)."})
    gemm_path: str = field(
        default="auto",
        metadata={
            "help": "Our CPU GEMM path (`hf_bertscratch.cpu_matmul`): 'auto' (this machine's measured choice), "
            "'default' (torch's) or 'onednn' (prepacked weights)."
        },
    )
    decoding: str = field(
        default="auto",
        metadata={
            "help": "How our inference decodes the full logits: 'auto' (`fast_decode.enable`: the fastest on this CPU "
            "of the model's own decoding and decoding into a reused buffer) or 'model' (the model's own decoding, a "
            "padded batch's on the whole grid or at the real rows as measured on this CPU, or as "
            "BERTSCRATCH_PADDED_DECODING forces)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed for the weights and the batches."})
    output_json: str | None = field(
        default=None,
        metadata={
            "help": "Write the run's record to this JSON file: the command, git commit, UTC date, package versions, "
            "CPU, threads, load average at the start and the end, and every measured case (results/speed/*.json "
            "are what lab/make_report.py renders)."
        },
    )
    output_markdown: str | None = field(default=None, metadata={"help": "Write the results table to this file."})

    def __post_init__(self) -> None:
        _check_choices("presets", self.presets, sorted(PRESETS))
        _check_choices("workloads", self.workloads, WORKLOADS)
        _check_choices("variants", self.variants, VARIANTS)
        _check_choices("precisions", self.precisions, PRECISIONS)
        _check_choices("gemm_path", [self.gemm_path], ("auto", *cpu_matmul.PATHS))
        _check_choices("decoding", [self.decoding], DECODINGS)
        check_case_grid(self.seq_lens, self.paddings)
        for name in ("batch_size", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}.")
        if not 0.0 < self.mask_probability <= 1.0:
            raise ValueError(f"--mask_probability must be in (0, 1], got {self.mask_probability}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout must be in [0, 1), got {self.dropout}.")


def check_case_grid(seq_lens: list[int], paddings: list[float]) -> None:
    """Reject a sequence length outside [8, 512] (BERT's positions) or a padding fraction outside [0, 0.5]."""
    for seq_len in seq_lens:
        if not 8 <= seq_len <= 512:
            raise ValueError(f"--seq_lens values must be in [8, 512] (BERT's positions), got {seq_len}.")
    for padding in paddings:
        if not 0.0 <= padding <= 0.5:
            raise ValueError(f"--paddings values must be in [0, 0.5], got {padding}.")


def _check_choices(name: str, values: list[str], allowed: tuple[str, ...] | list[str]) -> None:
    bad = [value for value in values if value not in allowed]
    if bad or not values:
        raise ValueError(f"--{name} got {bad or 'nothing'}; expected one or more of {list(allowed)}.")


@dataclass
class CaseResult:
    """One measured case; tokens/s are medians over repetitions, the ratio is ours/reference per repetition."""

    preset: str
    seq_len: int
    padding: float
    workload: str
    variant: str
    precision: str
    batch_size: int
    useful_tokens: int
    ours_tokens_per_s: float
    reference_tokens_per_s: float
    ratio_median: float
    ratio_min: float
    ratio_max: float
    loss_max_abs_diff: float | None = None
    ours_peak_mib: float | None = None
    reference_peak_mib: float | None = None
    onnxruntime_tokens_per_s: float | None = None
    ours_over_onnxruntime_median: float | None = None
    ours_over_onnxruntime_min: float | None = None
    ours_over_onnxruntime_max: float | None = None
    onnxruntime_max_abs_diff: float | None = None
    onnxruntime_graph: str | None = None
    onnxruntime_int8_tokens_per_s: float | None = None
    ours_over_onnxruntime_int8_median: float | None = None
    ours_over_onnxruntime_int8_min: float | None = None
    ours_over_onnxruntime_int8_max: float | None = None
    onnxruntime_int8_max_abs_diff: float | None = None


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
    "bf16") on the batch's device."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

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
    from .onnx.export import export_graph, operator_counts
    from .onnx.quantize import quantize_int8
    from .onnx.runtime import onnx_session, run_session

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


TABLE_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ref tok/s | ours/ref (min-max) | peak MiB ours / ref "
    "| loss diff |\n|---|---|---|---|---|---|---|---|---|---|"
)
ONNXRUNTIME_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ref tok/s | ORT tok/s | ours/ref (min-max) "
    "| ours/ORT (min-max) | ORT diff |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def format_row(result: CaseResult) -> str:
    """One Markdown table row of `result`."""
    memory = "-"
    if result.ours_peak_mib is not None:
        memory = f"{result.ours_peak_mib:,.0f} / {result.reference_peak_mib:,.0f}"
    loss = "-" if result.loss_max_abs_diff is None else f"{result.loss_max_abs_diff:.1e}"
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.reference_tokens_per_s:,.0f} "
        f"| **{result.ratio_median:.2f}x** ({result.ratio_min:.2f}-{result.ratio_max:.2f}) | {memory} | {loss} |"
    )


def format_onnxruntime_row(result: CaseResult) -> str:
    """One Markdown row of an inference `result` timed with ONNX Runtime as the third contender."""
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.reference_tokens_per_s:,.0f} "
        f"| {result.onnxruntime_tokens_per_s:,.0f} "
        f"| {result.ratio_median:.2f}x ({result.ratio_min:.2f}-{result.ratio_max:.2f}) "
        f"| **{result.ours_over_onnxruntime_median:.2f}x** ({result.ours_over_onnxruntime_min:.2f}-"
        f"{result.ours_over_onnxruntime_max:.2f}) | {result.onnxruntime_max_abs_diff:.1e} |"
    )


def format_table(results: list[CaseResult]) -> str:
    """The Markdown table of all results; inference cases timed against ONNX Runtime get a second table."""
    with_ort = [result for result in results if result.onnxruntime_tokens_per_s is not None]
    others = [result for result in results if result.onnxruntime_tokens_per_s is None]
    tables = []
    if others:
        tables.append("\n".join([TABLE_HEADER, *(format_row(result) for result in others)]))
    if with_ort:
        rows = [format_onnxruntime_row(result) for result in with_ort]
        tables.append("\n".join([ONNXRUNTIME_HEADER, *rows, "", f"ORT: {ONNXRUNTIME_GRAPH}."]))
    with_int8 = [result for result in results if result.onnxruntime_int8_tokens_per_s is not None]
    if with_int8:
        rows = [format_int8_row(result) for result in with_int8]
        tables.append("\n".join([INT8_HEADER, *rows, "", f"ORT int8: {ONNXRUNTIME_GRAPH}, quantized (dynamic int8)."]))
    return "\n\n".join(tables)


INT8_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ORT int8 tok/s | ours/int8 (min-max) | int8 diff |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def format_int8_row(result: CaseResult) -> str:
    """One Markdown row of an inference `result` timed against ONNX Runtime on the int8 graph."""
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.onnxruntime_int8_tokens_per_s:,.0f} "
        f"| **{result.ours_over_onnxruntime_int8_median:.2f}x** ({result.ours_over_onnxruntime_int8_min:.2f}-"
        f"{result.ours_over_onnxruntime_int8_max:.2f}) | {result.onnxruntime_int8_max_abs_diff:.1e} |"
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


def write_outputs(args: BenchmarkArguments, results: list[CaseResult], record: dict) -> None:
    """Write the JSON record and the Markdown table asked for, each through a temporary file renamed into place."""
    if args.output_json:
        write_text_atomically(args.output_json, json.dumps(record, indent=2) + "\n")
    if args.output_markdown:
        write_text_atomically(args.output_markdown, format_table(results) + f"\n\n{environment_line()}\n")


def parse_args(argv: list[str] | None = None) -> BenchmarkArguments:
    """Arguments from the command line, or from a single .json file argument."""
    # transformers types the dataclasses as a NewType of Any, which no class is without calling it.
    parser = HfArgumentParser(BenchmarkArguments, description=__doc__.split("\n\n")[0])  # type: ignore[arg-type]
    (args,) = parse_args_or_json(parser, argv)
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


if __name__ == "__main__":
    main()
