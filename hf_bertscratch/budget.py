"""Time-budgeted training: stop at a wall-clock budget, with the learning-rate schedule laid over the budget.

Cramming (Geiping & Goldstein 2023) trains "as well as possible in N hours": the warm-up and decay are fractions of
the time budget, not of a step count guessed in advance, and the step rate is simply whatever the machine delivers.
`TrainingBudget` is the clock (a `TrainerCallback`): it counts training time (evaluation and checkpoint saving
excluded), agrees on it across processes (the maximum over ranks, so every rank stops at the same step and applies
the same learning rate), stops the run when the budget is spent, and is saved in each checkpoint's
`trainer_state.json`, so a resumed run counts the time already spent. `budget_lr_lambda` turns the fraction of the
budget spent into a learning-rate factor for the `lr_scheduler_type` given.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import ExportableState, ProgressCallback

logger = logging.getLogger(__name__)
_clock = time.perf_counter  # the training clock (tests replace it with a deterministic one)
# Decay shapes (transformers' WSD `decay_type`s): factor(progress through the decay, in [0, 1]), from 1 to 0.
DECAY_SHAPES: dict[str, Callable[[float], float]] = {
    "linear": lambda progress: 1.0 - progress,
    "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)),
    "1-sqrt": lambda progress: 1.0 - math.sqrt(progress),
}
# lr_scheduler_type -> factor(progress after warm-up, in [0, 1]); None: warmup-stable-decay, whose cooldown
# `budget_lr_lambda` builds from `wsd_cooldown`.
BUDGET_SCHEDULES: dict[str, Callable[[float], float] | None] = {
    "linear": DECAY_SHAPES["linear"],
    "cosine": DECAY_SHAPES["cosine"],
    "constant_with_warmup": lambda progress: 1.0,
    "warmup_stable_decay": None,
}
# Warmup-stable-decay holds the peak, then cools down over the last WSD_DECAY_FRACTION of the run (Hägele et al.
# 2024 find 10-20% enough), linearly unless `decay_type` names another of DECAY_SHAPES.
WSD_DECAY_FRACTION = 0.2
# What --lr_scheduler_kwargs may set of warmup-stable-decay under a time budget (the rest is counted in steps).
WSD_BUDGET_KWARGS = ("num_decay_steps", "decay_type", "min_lr_ratio")


def wsd_cooldown(kwargs: dict[str, Any] | str | None) -> tuple[float, str, float]:
    """The cooldown that `--lr_scheduler_kwargs` asks of warmup-stable-decay: its length (`num_decay_steps`: steps,
    or below 1 a fraction of the run; default `WSD_DECAY_FRACTION`), its shape (`decay_type`, default "linear") and
    the floor it ends on (`min_lr_ratio`, default 0), checked."""
    kwargs = scheduler_kwargs(kwargs)
    length = kwargs.get("num_decay_steps", WSD_DECAY_FRACTION)
    shape = kwargs.get("decay_type", "linear")
    floor = kwargs.get("min_lr_ratio", 0.0)
    if isinstance(length, bool) or not isinstance(length, (int, float)) or not length > 0:
        raise ValueError(
            f"lr_scheduler_kwargs' num_decay_steps must be a positive step count or a fraction below 1, got {length!r}."
        )
    if shape not in DECAY_SHAPES:
        raise ValueError(f"lr_scheduler_kwargs' decay_type must be one of {sorted(DECAY_SHAPES)}, got {shape!r}.")
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 <= floor < 1.0:
        raise ValueError(f"lr_scheduler_kwargs' min_lr_ratio must be in [0, 1), got {floor!r}.")
    return float(length), shape, float(floor)


def scheduler_kwargs(kwargs: dict[str, Any] | str | None) -> dict[str, Any]:
    """`--lr_scheduler_kwargs` as the dict TrainingArguments parses from a JSON object (anything else is an error)."""
    if isinstance(kwargs, str):
        raise ValueError(
            f"lr_scheduler_kwargs must be a JSON object such as '{{\"num_decay_steps\": 0.4}}', got {kwargs!r}."
        )
    return kwargs or {}


def budget_lr_lambda(
    schedule: str, warmup_fraction: float, kwargs: dict[str, Any] | str | None = None
) -> Callable[[float], float]:
    """Learning-rate factor as a function of the fraction of the time budget spent (0 at the start, 1 at the end).

    Linear warm-up over the first `warmup_fraction` of the budget, then `schedule` (a key of `BUDGET_SCHEDULES`)
    over the rest. A one-cycle (triangle) schedule is "linear" with `warmup_fraction` 0.5. Warmup-stable-decay takes
    its cooldown from `kwargs` (`--lr_scheduler_kwargs`, `WSD_BUDGET_KWARGS`; its length a fraction of the budget);
    the other schedules take none.
    """
    if schedule not in BUDGET_SCHEDULES:
        raise ValueError(
            f"With a time budget, lr_scheduler_type must be one of {sorted(BUDGET_SCHEDULES)}, got {schedule!r}."
        )
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(
            f"With a time budget, warmup_steps is a fraction of the budget in [0, 1), got {warmup_fraction}."
        )
    decay = BUDGET_SCHEDULES[schedule]
    kwargs = scheduler_kwargs(kwargs)
    if decay is not None and kwargs:
        raise ValueError(
            f"With a time budget, lr_scheduler_kwargs apply to warmup_stable_decay only, got {kwargs} with "
            f"{schedule!r}."
        )
    if decay is None:
        unknown = sorted(set(kwargs) - set(WSD_BUDGET_KWARGS))
        if unknown:
            raise ValueError(
                f"With a time budget, lr_scheduler_kwargs may set {list(WSD_BUDGET_KWARGS)} of warmup_stable_decay, "
                f"got {unknown}."
            )
        length, shape, floor = wsd_cooldown(kwargs)
        if not length < 1.0 or warmup_fraction + length > 1.0:
            raise ValueError(
                "With a time budget, lr_scheduler_kwargs' num_decay_steps is a fraction of the budget below 1 that "
                f"fits after the warm-up ({warmup_fraction:g}), got {length:g}."
            )
        cool = DECAY_SHAPES[shape]

    def factor(spent: float) -> float:
        spent = min(max(spent, 0.0), 1.0)
        if spent < warmup_fraction:
            return spent / warmup_fraction
        if decay is None:  # warmup-stable-decay: the peak until the last `length` of the budget, then the cooldown
            into = (spent - (1.0 - length)) / length
            return 1.0 if into <= 0.0 else floor + (1.0 - floor) * cool(into)
        return max(0.0, decay((spent - warmup_fraction) / (1.0 - warmup_fraction)))

    return factor


RATE_STEPS = 20  # steps whose rate sets a budgeted run's expected total in its progress bar
TOTAL_TOLERANCE = 0.02  # the shown total moves only when the step rate since then puts the end this far from it


class BudgetProgressCallback(ProgressCallback):
    """transformers' progress bar, opened without a total: under a time budget `state.max_steps` is only the cap
    that lets the Trainer run, which the bar's first frame (kept whole in a log file) would otherwise show.
    `TrainingBudget` gives it the expected steps once the step rate is measured."""

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if state.is_world_process_zero:
            self.training_bar = tqdm(total=None, dynamic_ncols=True)
        self.current_step = 0


class TrainingBudget(TrainerCallback, ExportableState):
    """Stops training once `minutes` of training time are spent; `fraction` drives the budget schedule.

    Training time is the wall time between steps; evaluation and checkpoint saving are not counted. Under several
    processes the clocks are reduced with MAX after every step (one scalar all-reduce), so all ranks stop together.
    """

    def __init__(self, minutes: float, spent_seconds: float = 0.0) -> None:
        if not minutes > 0:
            raise ValueError(f"The time budget must be positive minutes, got {minutes}.")
        self.minutes = float(minutes)
        self.spent_seconds = float(spent_seconds)
        self._mark: float | None = None
        self._first_step: int | None = None
        self._first_spent = 0.0
        # The callbacks whose bars show the expected steps; empty, the progress bars among `callbacks` (see attach).
        self.progress_callbacks: list[ProgressCallback] = []
        self.callbacks: list[TrainerCallback] = []
        self._shown_total: int | None = None

    def attach(self, trainer: Trainer) -> None:
        """Add the budget to `trainer`'s callbacks and let it drive the trainer's progress bar (a
        `BudgetProgressCallback` in place of transformers' own, where the trainer draws one). The bar is looked up in
        the trainer's callbacks when the budget moves it, so a form of it put in place later is the one moved."""
        if trainer.pop_callback(ProgressCallback) is not None:
            trainer.add_callback(BudgetProgressCallback)
        trainer.add_callback(self)
        self.callbacks = trainer.callback_handler.callbacks

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0

    @property
    def fraction(self) -> float:
        """Fraction of the budget spent, in [0, 1]."""
        return min(self.spent_seconds / self.seconds, 1.0)

    @classmethod
    def resumed(cls, minutes: float, checkpoint: str | Path | None) -> TrainingBudget:
        """A budget that continues the clock saved in `checkpoint`'s trainer_state.json (a fresh one without)."""
        spent = 0.0
        if checkpoint is not None:
            state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
            saved = state.get("stateful_callbacks", {}).get(cls.__name__)
            if saved is not None:
                spent = float((saved[0] if isinstance(saved, list) else saved)["attributes"]["spent_seconds"])
        return cls(minutes, spent)

    def state(self) -> dict[str, Any]:
        return {"args": {"minutes": self.minutes}, "attributes": {"spent_seconds": self.spent_seconds}}

    def seconds_spent(self, state: TrainerState) -> tuple[float, float]:
        """How far the run is, as `run_folder.FewerLossLines` reads it: (seconds spent, seconds of the budget)."""
        return self.spent_seconds, self.seconds

    def _restart_clock(self, *args: Any, **kwargs: Any) -> None:
        self._mark = _clock()

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Restart the clock; the progress bar shows no total (not the step cap) until the step rate is measured.
        A run resumed with its budget already spent stops before its first step, saying so in one line."""
        self._restart_clock()
        self._set_progress_total(None)
        self._first_step, self._shown_total = None, None
        if self.spent_seconds >= self.seconds:
            control.should_training_stop = True
            if state.is_world_process_zero:
                logger.warning(
                    "Step %d has spent the %g-minute time budget: nothing to train (a larger --max_train_minutes "
                    "trains on).",
                    state.global_step,
                    self.minutes,
                )

    on_evaluate = _restart_clock  # evaluation and saving happen between on_step_end and the next step
    on_save = _restart_clock

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        now = _clock()
        self.spent_seconds += now - (self._mark if self._mark is not None else now)
        self._mark = now
        if torch.distributed.is_available() and torch.distributed.is_initialized() and args.world_size > 1:
            clock = torch.tensor([self.spent_seconds], dtype=torch.float64, device=collective_device(args))
            torch.distributed.all_reduce(clock, op=torch.distributed.ReduceOp.MAX)
            self.spent_seconds = float(clock.item())
        if self.spent_seconds >= self.seconds:
            control.should_training_stop = True
        self._update_progress_bar(state, control.should_training_stop)

    def _update_progress_bar(self, state: TrainerState, stopping: bool) -> None:
        """Show the expected number of steps (at the step rate since the first step, once `RATE_STEPS` steps have
        given one) instead of the step cap. The total moves only when the expected end is more than
        `TOTAL_TOLERANCE` away from it (a total that moved at every step would read as noise, one that never moved
        would end the bar short of or past 100% when the machine speeds up or slows down); the last step sets it to
        the steps taken, so the bar ends at 100%."""
        if stopping:
            self._set_progress_total(state.global_step)
            return
        if self._first_step is None:
            self._first_step, self._first_spent = state.global_step, self.spent_seconds
            return
        steps, seconds = state.global_step - self._first_step, self.spent_seconds - self._first_spent
        if steps < RATE_STEPS or seconds <= 0:
            return
        expected = state.global_step + max(0, round((self.seconds - self.spent_seconds) * steps / seconds))
        shown = self._shown_total
        if shown is None or abs(expected - shown) > TOTAL_TOLERANCE * shown or state.global_step >= shown:
            self._set_progress_total(max(expected, state.global_step + 1))

    def _set_progress_total(self, total: int | None) -> None:
        self._shown_total = total
        bars = self.progress_callbacks or [
            callback for callback in self.callbacks if isinstance(callback, ProgressCallback)
        ]
        for callback in bars:
            bar = getattr(callback, "training_bar", None)
            if bar is not None and bar.total != total:
                bar.total = total
                bar.refresh()


# Process-group backends that reduce only tensors on the process's accelerator (NCCL has no CPU path).
ACCELERATOR_BACKENDS = ("nccl", "xccl", "hccl")


def collective_device(args: TrainingArguments) -> torch.device:
    """Where a tensor for a collective of the default process group must live: the process's accelerator
    (`args.device`) under NCCL and its kin, the CPU under gloo."""
    backend = str(torch.distributed.get_backend()).lower()
    return args.device if backend in ACCELERATOR_BACKENDS else torch.device("cpu")


__all__ = [
    "ACCELERATOR_BACKENDS",
    "BUDGET_SCHEDULES",
    "BudgetProgressCallback",
    "TrainingBudget",
    "budget_lr_lambda",
    "collective_device",
]
