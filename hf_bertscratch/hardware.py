"""What a run runs on: the device a training run chooses and how many processes it launches (`device_defaults`,
`resolve_num_processes`), and what it ran on, described once for model cards, the results table and the benchmark."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from hf_bertscratch_base.heap import heap_policy
from hf_bertscratch_base.thread_pool import wait_policy


def _cpuinfo_value(key: str) -> str | None:
    """The value of the first `key` line of /proc/cpuinfo (the first CPU's), None where there is no such line."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    return None


def cpu_model() -> str:
    """The CPU's model name (what `lscpu | grep 'Model name'` shows), or the architecture where it is not known."""
    return _cpuinfo_value("model name") or platform.processor() or platform.machine()


# the instruction sets the CPU's choices turn on (the GEMM path, bf16 autocast), in the order a record names them
CHOICE_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")


def cpu_identity() -> dict:
    """What tells two CPUs of one model name apart ("AMD EPYC" names Zen 2 and Zen 5 alike): /proc/cpuinfo's vendor,
    family and model numbers, and which of `CHOICE_FLAGS` it has; None for what is not known."""
    family, model = _cpuinfo_value("cpu family"), _cpuinfo_value("model\t")
    flags = cpu_flags()
    return {
        "vendor": _cpuinfo_value("vendor_id"),
        "family": int(family) if family and family.isdigit() else None,
        "model": int(model) if model and model.isdigit() else None,
        "flags": [flag for flag in CHOICE_FLAGS if flag in flags],
    }


def short_cpu_name(cpu: str) -> str:
    """ "Intel(R) Xeon(R) Processor" -> "Intel Xeon": a CPU model name without trademark marks and "Processor"."""
    return re.sub(r"\s*\(R\)|\s*Processor$", "", cpu).strip()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo's `flags`), empty where they are not known."""
    return set((_cpuinfo_value("flags") or "").split())


def cpu_has_native_bf16() -> bool:
    """Whether the CPU multiplies bf16 in hardware (Intel AMX, flag `amx_bf16`, or AVX512_BF16, `avx512_bf16`), where
    bf16 autocast trains a small BERT faster than fp32 (`results/speed-more/bf16-mini.json`, AMX: 5,445 against 3,850
    tokens/s; `results/speed-more/bf16-mini-3.json`, AVX512_BF16 on an AMD EPYC: 5,841 against 4,118) and the quick
    start gained accuracy in its budget (`results/quick-start/amd-epyc-bf16-seed-43.json` and the others, AVX512_BF16: 34.4% and
    34.8% at 29,400 tokens/s against 32.6% and 33.3% at 21,200-21,800 in fp32). Training picks bf16 by default there."""
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


def describe_hardware() -> str:
    """One line: the GPUs this process sees, or the CPU with the torch threads it uses and the cores it sees."""
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    threads = torch.get_num_threads()
    return f"CPU ({cpu_model()}), {threads} thread{'s' if threads != 1 else ''} ({os.cpu_count()} cores visible)"


PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # --precision of pretrain and finetune
MIXED_PRECISION_ENV = "ACCELERATE_MIXED_PRECISION"  # accelerate launch's --mixed_precision, or its config file's


class PrecisionArguments(Protocol):
    """The training arguments the precision choice reads and completes (`run_folder.GuardedTrainingArguments`)."""

    use_cpu: bool
    bf16: bool
    fp16: bool
    precision: str


def choose_precision(args: PrecisionArguments) -> None:
    """Complete `args.bf16`/`args.fp16` from `args.precision` (`device_defaults`: auto is bf16 autocast where the
    device computes bf16 fast, a GPU that supports it or a CPU with native bf16, and fp32 elsewhere) unless `--bf16` or
    `--fp16` was given; bf16 on a machine without a GPU in sight sets `use_cpu`, as `TrainingArguments` wants for bf16
    off a GPU (it refuses `--bf16` on a CPU otherwise).

    Under `accelerate launch`, auto is the launch's mixed precision where that is bf16 or fp16, and an fp32 choice
    sets the launch's to none: `TrainingArguments` trains at the launch's unless told bf16 or fp16, and the run
    would record a precision it did not train at."""
    if args.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {args.precision!r}.")
    launched = os.environ.get(MIXED_PRECISION_ENV, "no")
    if args.precision == "auto" and launched in ("bf16", "fp16"):
        args.precision = launched
    gpus = visible_gpus(args.use_cpu)
    if not (args.bf16 or args.fp16):
        chosen = device_defaults(gpus, fast_bf16(gpus), available_cores(), args.precision)
        args.bf16, args.fp16 = chosen["bf16"], chosen["fp16"]
    if launched != "no" and not (args.bf16 or args.fp16):
        os.environ[MIXED_PRECISION_ENV] = "no"
    args.use_cpu = args.use_cpu or (args.bf16 and gpus == 0)


def describe_precision(args: PrecisionArguments) -> str:
    """The precision a run trains at, in words, with why where `--precision auto` chose bf16 on a CPU."""
    name = precision_name(args.bf16, args.fp16)
    precision = name if name == "fp32" else f"{name} autocast"
    if args.bf16 and not visible_gpus(args.use_cpu) and args.precision == "auto":
        precision += " (the CPU has native bf16, AMX or AVX512_BF16; --precision fp32 for fp32)"
    return precision


def precision_name(bf16: bool, fp16: bool) -> str:
    """What a run record keeps of its precision (TrainingArguments' `bf16` and `fp16`): bf16, fp16 or fp32."""
    return "bf16" if bf16 else "fp16" if fp16 else "fp32"


class LaunchArguments(Protocol):
    """The training arguments the device choice reads and completes (`PretrainingArguments`)."""

    use_cpu: bool
    bf16: bool
    fp16: bool
    precision: str
    num_processes: str
    dataloader_num_workers: int | None  # None until PretrainingArguments.__post_init__ chooses it
    dataloader_pin_memory: bool


def use_cpu_process_group() -> None:
    """Under torchrun or accelerate launch without GPUs, make TrainingArguments build the CPU (gloo) process group:
    it builds it only when told to use the CPU, and otherwise trains each process alone. Must run before
    `TrainingArguments.__post_init__` (`run_folder.GuardedTrainingArguments` calls it)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")


def visible_gpus(use_cpu: bool) -> int:
    """The CUDA devices a run trains on: none when told to use the CPU or when torch sees none."""
    return 0 if use_cpu or not torch.cuda.is_available() else torch.cuda.device_count()


def fast_bf16(gpus: int) -> bool:
    """Whether the device a run trains on computes bf16 fast: a GPU that supports it, or a CPU with native bf16 (AMX or
    AVX512_BF16, `cpu_has_native_bf16`)."""
    return torch.cuda.is_bf16_supported() if gpus > 0 else cpu_has_native_bf16()


def device_defaults(gpus: int, bf16_fast: bool, cores: int, precision: str = "auto") -> dict[str, Any]:
    """What `--num_processes auto`, `--precision` and the batch-loading workers come to on a machine with `gpus`
    CUDA devices (0: CPU only) and `cores` CPU cores: one process per GPU and up to 4 loading workers each; on a CPU,
    2 processes when there are 2 cores, loading in the process; bf16 autocast where the device computes bf16 fast
    (`bf16_fast`: a GPU that supports it, a CPU with native bf16), fp32 elsewhere."""
    bf16 = precision == "bf16" or (precision == "auto" and bf16_fast)
    return {
        "processes": gpus if gpus > 0 else (2 if cores >= 2 else 1),
        "bf16": bf16,
        "fp16": precision == "fp16",
        "dataloader_num_workers": min(4, max(0, cores // gpus - 1)) if gpus > 0 else 0,
    }


def available_cores() -> int:
    """The cores this process may run on (its affinity: `taskset`, a container's cpuset), else the CPU count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


THREADS_ENV = "OMP_NUM_THREADS"


@dataclass(frozen=True)
class ThreadChoice:
    """The torch threads each process of a training run computes with (`count`) and why (`reason`)."""

    count: int
    reason: str

    def describe(self) -> str:
        """One line for the run's log: the threads, why, how idle threads wait (`thread_pool.wait_policy`) and what
        malloc keeps of freed memory (`heap.heap_policy`)."""
        plural = "s" if self.count != 1 else ""
        return f"{self.count} torch thread{plural} per process ({self.reason}; {wait_policy()}; {heap_policy()})"


def fit_threads(requested: int | None = None, processes: int = 1) -> ThreadChoice:
    """The torch threads of each of a run's `processes`: `requested` (`--threads`) when given, `OMP_NUM_THREADS` when
    set (a launcher's share, or the user's), and otherwise the cores this process may use (`available_cores`: its
    affinity, not the machine's count) shared among the processes, at least 1. The load average at start is logged
    with the choice, not subtracted from it: with idle threads sleeping (`thread_pool`), two fine-tunes side by side
    on a loaded 2-core AMD EPYC each ran 1.7x as fast with 2 threads as with the 1 the load left
    (`results/threads/finetune-sst2-zen2-passive.json`); a thread short of the cores only gives up the process's share
    of them."""
    if requested is not None:  # checked where the flag is parsed (`run_folder.GuardedTrainingArguments`)
        return ThreadChoice(requested, "--threads")
    given = os.environ.get(THREADS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"{THREADS_ENV} must be a positive integer, got {given!r}.")
        return ThreadChoice(int(given), THREADS_ENV)
    cores = available_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    shared = f" shared by {processes} processes" if processes > 1 else ""
    reason = f"the {cores} cores this process may use{shared}, load average {load:.2f} at start"
    return ThreadChoice(max(1, cores // processes), reason)


def use_threads(requested: int | None = None) -> ThreadChoice:
    """Set this process's torch threads to `fit_threads(requested)`; returns the choice, for the run's log."""
    chosen = fit_threads(requested)
    torch.set_num_threads(chosen.count)
    return chosen


def describe_device_choice(training_args: LaunchArguments, processes: int, threads: ThreadChoice | None = None) -> str:
    """One line on where and how the run trains, as chosen (`device_defaults`, `fit_threads`) or given."""
    gpus = visible_gpus(training_args.use_cpu)
    where = f"{gpus} CUDA GPU(s) ({torch.cuda.get_device_name(0)})" if gpus else f"the CPU ({available_cores()} cores)"
    precision = describe_precision(training_args)
    pinned = ", pinned memory" if training_args.dataloader_pin_memory else ""
    computing = f", {threads.describe()}" if threads is not None else ""
    return (
        f"Training on {where}: {processes} process(es){computing}, {precision}, "
        f"{training_args.dataloader_num_workers} loading worker(s) per process{pinned}."
    )


def resolve_num_processes(training_args: LaunchArguments) -> int:
    """How many processes this command should launch: 1 when already launched (torchrun/accelerate) or asked."""
    if "WORLD_SIZE" in os.environ:
        return 1
    value = str(training_args.num_processes).strip().lower()
    if value == "auto":
        gpus = visible_gpus(training_args.use_cpu)
        return device_defaults(gpus, False, available_cores())["processes"]
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"num_processes must be a positive integer or 'auto', got {training_args.num_processes!r}.")
    return int(value)
