"""Freed memory kept in the heap for the next step, in training processes on glibc (Linux).

glibc's malloc gives a freed block back to the kernel when it was mapped on its own (blocks above the mmap threshold:
128 KiB at first, rising to at most 32 MiB as such blocks are freed) or when the top of the heap holds more free
memory than the trim threshold; the next step's allocation of the same size then faults every page in again, zeroed.
A pretraining step makes its largest tensors afresh each step: the masked rows' logits over the vocabulary, their
log-softmax and its gradient (the quick start: about 820 rows x 8,192 words, 26 MB each), and on a virtual machine a
page fault is dear. With both thresholds raised the quick start trained 1.02x and 1.05x the tokens per second of
the commit before, alternated over three rounds each on a 2-core AMD EPYC (Zen 3)
(`results/pretraining-ab/keep-freed-memory-amd-epyc-avx2-f25-m1*.json`). `keep_freed_memory` raises both
thresholds with `mallopt`, so a training process keeps what it freed (up to `KEPT_BYTES` a block) and its resident
memory stays at its peak. A value set in the environment (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`,
glibc's malloc tunables) is kept, and off glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import platform

KEPT_BYTES = 1 << 30  # a freed block up to 1 GiB stays in the heap; so does up to 1 GiB free at its top
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

_kept: bool | None = None


def _set_by_environment() -> bool:
    return any(name in os.environ for name in ENVIRONMENT) or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds to `KEPT_BYTES` in this process (once); whether they are raised."""
    global _kept
    if _kept is None:
        _kept = False
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc" and not _set_by_environment():
            mallopt = ctypes.CDLL(None).mallopt
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            _kept = bool(mallopt(M_MMAP_THRESHOLD, KEPT_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEPT_BYTES))
    return _kept


def heap_policy() -> str:
    """How this process's malloc keeps freed memory, in words."""
    if _kept:
        return f"freed blocks up to {KEPT_BYTES >> 20} MiB kept for reuse"
    if _set_by_environment():
        return "malloc thresholds from the environment"
    return "malloc's default thresholds"
