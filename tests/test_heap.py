"""`hf_bertscratch_base.heap`: a training process keeps what it freed for the next step, against glibc's default."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bertscratch_base import heap


def _huge_pages_always() -> bool:
    """Whether every large mapping gets transparent huge pages (a fault maps 2 MiB, so faults are not counted in 4 KiB
    pages)."""
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


glibc = pytest.mark.skipif(
    not (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc") or _huge_pages_always(),
    reason="glibc's malloc, faulting in 4 KiB pages",
)

# Eight steps' logits over 8,192 words and their gradient, the rows varying as a step's masked rows do (~42 MB each:
# above the 32 MiB that glibc's default mmap threshold rises to), and the page faults each step took.
_STEPS = """
import json, resource, sys, torch
from hf_bertscratch_base import heap
kept = heap.keep_freed_memory() if sys.argv[1] == "keep" else False
faults = []
for rows in (1310, 1300, 1290, 1305, 1310, 1280, 1300, 1295):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(rows, 8192) for _ in range(2)]
    del blocks
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "policy": heap.heap_policy(), "faults": faults}))
"""
BLOCK_PAGES = 1280 * 8192 * 4 // 4096  # the smallest block's 4 KiB pages


def _steps(mode: str, environment: dict[str, str] | None = None) -> dict:
    clean = {key: value for key, value in os.environ.items() if key not in (*heap.ENVIRONMENT, "GLIBC_TUNABLES")}
    done = subprocess.run(
        [sys.executable, "-c", _STEPS, mode], env={**clean, **(environment or {})}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@glibc
def test_a_process_that_keeps_freed_memory_reuses_it_where_glibc_faults_it_in_each_step() -> None:
    plain, kept = _steps("plain"), _steps("keep")
    assert not plain["kept"] and plain["policy"] == "malloc's default thresholds"
    assert all(faults >= BLOCK_PAGES for faults in plain["faults"][1:]), plain  # each step's blocks mapped afresh
    assert kept["kept"] and kept["policy"] == "freed blocks up to 1024 MiB kept for reuse"
    assert sum(kept["faults"][1:]) <= sum(plain["faults"][1:]) / 2, (kept, plain)


@glibc
@pytest.mark.parametrize(
    "environment",
    [{"MALLOC_MMAP_THRESHOLD_": "131072"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"}],
    ids=["malloc-variable", "glibc-tunables"],
)
def test_thresholds_the_environment_sets_are_kept(environment: dict[str, str]) -> None:
    seen = _steps("keep", environment)
    assert not seen["kept"] and seen["policy"] == "malloc thresholds from the environment"
    assert all(faults >= BLOCK_PAGES for faults in seen["faults"][1:]), seen


def test_off_glibc_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_kept", None)
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("", ""))
    for name in (*heap.ENVIRONMENT, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    assert heap.keep_freed_memory() is False
    assert heap.heap_policy() == "malloc's default thresholds"
