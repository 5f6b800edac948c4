"""How the OpenMP threads torch computes with wait between parallel regions, set before torch loads.

A training run beside other runs on a few cores (a fine-tune beside another fine-tune and a test suite on a laptop)
crawled when its threads spun while waiting: GNU OpenMP, torch's thread pool on Linux, lets each idle thread spin for
a while before it sleeps, and spinning threads take the cores the other processes' threads are waiting for. With
`OMP_WAIT_POLICY=PASSIVE` they sleep at once. On a 2-core AMD EPYC (Zen 2) under a load average of 7-9, a lone
fine-tune with 2 spinning threads made 1.4 steps/s and each of two side by side 0.44, against 15.2 and 6.9 for runs
of 1 thread (`results/threads/finetune-sst2-zen2.json`); with 2 sleeping threads, under a load of 3.5-5, 22.3 and
12.3 (`results/threads/finetune-sst2-zen2-passive.json`; `python -m lab.time_side_by_side`). The OpenMP runtime reads
the variable when it loads, with torch, so the training commands' entry points (`bertscratch pretrain` and
`finetune`, `scripts/pretrain.py` and `scripts/finetune.py`, pretraining's launched processes) set it before
importing torch; a value already in the environment is kept.
"""

from __future__ import annotations

import os

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
TRAINING_WAIT_POLICY = "PASSIVE"


def use_training_wait_policy() -> None:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless the environment sets it; in effect only where torch is not loaded yet."""
    os.environ.setdefault(WAIT_POLICY_ENV, TRAINING_WAIT_POLICY)


def wait_policy() -> str:
    """The OpenMP wait policy of this process's environment, in words."""
    value = os.environ.get(WAIT_POLICY_ENV, "").strip()
    return f"{WAIT_POLICY_ENV}={value}" if value else f"{WAIT_POLICY_ENV} unset (idle threads spin, then sleep)"
