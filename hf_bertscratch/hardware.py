"""What a run ran on, described once for model cards, the results table and the benchmark."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


def cpu_model() -> str:
    """The CPU's model name (what `lscpu | grep 'Model name'` shows), or the architecture where it is not known."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def describe_hardware() -> str:
    """One line: the GPUs this process sees, or the CPU with the torch threads it uses and the cores it sees."""
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    threads = torch.get_num_threads()
    return f"CPU ({cpu_model()}), {threads} thread{'s' if threads != 1 else ''} ({os.cpu_count()} cores visible)"
