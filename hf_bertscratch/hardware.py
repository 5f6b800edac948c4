"""What a run ran on, described once for model cards, the results table and the benchmark."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import torch


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


def short_cpu_name(cpu: str) -> str:
    """ "Intel(R) Xeon(R) Processor" -> "Intel Xeon": a CPU model name without trademark marks and "Processor"."""
    return re.sub(r"\s*\(R\)|\s*Processor$", "", cpu).strip()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo's `flags`), empty where they are not known."""
    return set((_cpuinfo_value("flags") or "").split())


def cpu_has_native_bf16() -> bool:
    """Whether the CPU multiplies bf16 in hardware (Intel AMX, flag `amx_bf16`, or AVX512_BF16, `avx512_bf16`), where
    bf16 autocast trains a small BERT faster than fp32 (`results/speed-more/bf16-mini.json`, AMX: 5,445 against 3,850
    tokens/s; `results/speed-more/bf16-mini-2.json`, AVX512_BF16 on an AMD EPYC: 630 against 361)."""
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


def describe_hardware() -> str:
    """One line: the GPUs this process sees, or the CPU with the torch threads it uses and the cores it sees."""
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    threads = torch.get_num_threads()
    return f"CPU ({cpu_model()}), {threads} thread{'s' if threads != 1 else ''} ({os.cpu_count()} cores visible)"
