"""The output folder of a training run: the overwrite guard and checkpoint resolution that pretraining and
fine-tuning share.

transformers 5 dropped `TrainingArguments.overwrite_output_dir` and its check; `GuardedTrainingArguments` puts them
back, so that a finished run is never written over by accident, while a folder holding only `checkpoint-N/`
folders is an interrupted run that `--resume_from_checkpoint last` continues.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

# Files whose presence makes an output folder look like a finished run; written last, and only on success.
FINISHED_FILES = ("model.safetensors", "all_results.json", "README.md")


@dataclass
class GuardedTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus the output-folder guard that transformers 5 dropped."""

    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Allow writing into an output_dir that already holds a finished run."}
    )


def check_output_dir(
    training_args: GuardedTrainingArguments, finished_files: Iterable[str] = FINISHED_FILES
) -> None:
    """Refuse to overwrite a finished run (one of `finished_files` present) unless asked or resuming."""
    output_dir = Path(training_args.output_dir)
    finished = [name for name in finished_files if (output_dir / name).exists()]
    if finished and not training_args.overwrite_output_dir and not training_args.resume_from_checkpoint:
        raise ValueError(
            f"output_dir {str(output_dir)!r} already holds a finished run ({', '.join(finished)}); pass "
            "--overwrite_output_dir to replace it or choose another --output_dir."
        )


def resolve_checkpoint(training_args: TrainingArguments) -> str | None:
    """The checkpoint to resume from: a path, or the last one in output_dir for "true"/"last"."""
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() in ("false", ""):
        return None
    if str(resume).lower() in ("true", "last"):
        last = get_last_checkpoint(training_args.output_dir) if os.path.isdir(training_args.output_dir) else None
        if last is None:
            raise ValueError(f"--resume_from_checkpoint {resume}: no checkpoint-* folder in {training_args.output_dir!r}.")
        return last
    if not os.path.isdir(resume):
        raise ValueError(f"--resume_from_checkpoint {resume!r} is not a checkpoint folder.")
    return resume


__all__ = ["FINISHED_FILES", "GuardedTrainingArguments", "check_output_dir", "resolve_checkpoint"]
