"""The benchmark's arguments: which cases to time (presets, lengths, paddings, workloads, variants, precisions), how
often, against which contenders, and where to write the results; each checked where it is parsed."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import cpu_matmul
from ..configuration_bertscratch import PRESETS

WORKLOADS = ("train", "infer", "encode", "fill-mask")
INFERENCE_WORKLOADS = ("infer", "encode", "fill-mask")
VARIANTS = ("eager", "compiled")
PRECISIONS = ("fp32", "bf16")
DECODINGS = ("auto", "model")  # --decoding
# The ONNX Runtime contenders: each is a `BenchmarkArguments` flag, a key of the timings, and the prefix of its
# `CaseResult` fields (`<name>_tokens_per_s`, `ours_over_<name>_median|min|max`, `<name>_max_abs_diff`).
ONNXRUNTIME_CONTENDERS = ("onnxruntime", "onnxruntime_int8")


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
        _check_choices("gemm_path", self.gemm_path, ("auto", *cpu_matmul.PATHS))
        _check_choices("decoding", self.decoding, DECODINGS)
        check_case_grid(self.seq_lens, self.paddings)
        for name, least in (("batch_size", 1), ("repeats", 1), ("warmup", 0), ("num_threads", 1)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ValueError(f"--{name} must be at least {least}, got {value}.")
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


def _check_choices(name: str, values: list[str] | str, allowed: tuple[str, ...] | list[str]) -> None:
    """Refuse a value of a list flag (`values` a list) or of a one-value flag (`values` a str) not in `allowed`."""
    if isinstance(values, str):
        if values not in allowed:
            raise ValueError(f"--{name} got {values!r}; expected one of {list(allowed)}.")
        return
    bad = [value for value in values if value not in allowed]
    if bad or not values:
        raise ValueError(f"--{name} got {bad or 'nothing'}; expected one or more of {list(allowed)}.")
