"""A run's output folder: the overwrite guard and checkpoint resolution that pretraining and fine-tuning share (with
the loss lines their terminal shows, `show_fewer_loss_lines`, and the record of the training data each checkpoint
holds, `TrainingDataRecord`), and the atomic writes every command uses
(`atomic_write` for a file, `staged_folder`/`publish_folder` for a folder that appears only when complete), with the
permissions the umask gives (the file-level pieces, which need no torch, are `hf_bertscratch_base.run_files`'s).

transformers 5 dropped `TrainingArguments.overwrite_output_dir` and its check; `GuardedTrainingArguments` puts them
back, so that a finished run is never written over by accident; a folder holding only `checkpoint-N/` folders is an
interrupted run, which `--resume_from_checkpoint last` continues and which is not started over by accident either.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from transformers import PreTrainedModel, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.integrations import is_tensorboard_available
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy

from hf_bertscratch_base import program_name
from hf_bertscratch_base.errors import Stopped
from hf_bertscratch_base.extras import install_command
from hf_bertscratch_base.model_config import config_label_names, read_config
from hf_bertscratch_base.run_files import (
    STAGING,
    atomic_write,
    checkpoint_folders,
    checkpoint_gaps,
    checkpoint_step,
    final_path,
    grant_usual_permissions,
)

from .hardware import choose_precision, use_cpu_process_group

if TYPE_CHECKING:
    import datasets
    from transformers import Trainer

logger = logging.getLogger(__name__)

# Files whose presence makes an output folder look like a finished run; written last, and only on success.
FINISHED_FILES = ("model.safetensors", "all_results.json", "README.md")
# The order in which `finish_run` moves the last of them in: a folder holding the model card is complete.
_WRITTEN_LAST = ("all_results.json", "README.md")
# The subfolder of an ELECTRA run's output folder that holds its generator, a fill-mask model of its own.
GENERATOR_FOLDER = "generator"
# The shapes' pictures of fine-tuning's evaluation (`TaskShape.picture`), each also drawn for a test split (test_).
_PICTURES = ("confusion_matrix.png", "per_label_f1.png", "regression.png", "per_type_f1.png")
# What pretraining and fine-tuning write into an output folder beside what every run saves (the model, its tokenizer
# and code, trainer_state.json, all_results.json, the model card): reports, an embedding model's sentence-transformers
# files (`embedding.write_sentence_transformers_files`) and ELECTRA's generator. Those an earlier run left
# (--overwrite_output_dir) that the new run does not write again are removed when it finishes (`finish_run`), so the
# folder holds one run; no other file of the folder is touched.
RUN_OUTPUTS = (
    "loss_curve.png",
    "predictions.csv",
    "test_predictions.csv",
    *_PICTURES,
    *(f"test_{picture}" for picture in _PICTURES),
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
    GENERATOR_FOLDER,
)


# Counts TrainingArguments takes without a check, though a bad one trains and then fails (a batch size of 0 at the
# first batch, or at the first evaluation after training; a save_steps of 0 at the first step) or does nothing the
# flag asks for (max_steps -5 is read as -1): flag -> (the values that run, what is expected). None is never checked.
COUNTS: dict[str, tuple[Callable[[float], bool], str]] = {
    "per_device_train_batch_size": (lambda value: value >= 1, "a positive integer"),
    "per_device_eval_batch_size": (lambda value: value >= 1, "a positive integer"),
    "gradient_accumulation_steps": (lambda value: value >= 1, "a positive integer (1: no accumulation)"),
    "eval_accumulation_steps": (lambda value: value >= 1, "a positive integer, or left out"),
    "max_steps": (
        lambda value: value > 0 or value == -1,
        "a positive number of steps, or -1 (the default: the epochs or the time budget end the run)",
    ),
    "logging_steps": (lambda value: value > 0, "positive (steps, or a fraction of the run's steps below 1)"),
    "save_steps": (lambda value: value > 0, "positive (steps, or a fraction of the run's steps below 1)"),
    "eval_steps": (
        lambda value: value >= 0,
        "0 or more (steps, a fraction of the run's steps below 1, or 0 for --logging_steps's)",
    ),
    "dataloader_num_workers": (lambda value: value >= 0, "0 (batches loaded by the training process) or more"),
}

# The --hub_strategy values that --push_to_hub keeps to: it uploads the finished output folder once, when the run ends
# (`hub.push_training_output`). transformers' every_save, checkpoint and all_checkpoints would push during the run, which
# these commands do not (the Trainer's own push stays off: `GuardedTrainingArguments`).
PUSH_HUB_STRATEGIES = ("end",)


def check_hub_strategy(args: TrainingArguments) -> None:
    """Refuse, with --push_to_hub, a --hub_strategy that promises pushes during the run (not in
    `PUSH_HUB_STRATEGIES`), naming it and what is accepted."""
    strategy = getattr(args.hub_strategy, "value", args.hub_strategy)  # a HubStrategy once transformers has read it
    if args.push_to_hub and strategy not in PUSH_HUB_STRATEGIES:
        raise ValueError(
            f"--hub_strategy {strategy!r} is not what --push_to_hub does here: it uploads the finished output folder "
            f"once, at the end of the run, and pushes nothing during it; expected "
            f"{' or '.join(map(repr, PUSH_HUB_STRATEGIES))} (the default)."
        )


def check_counts(args: TrainingArguments) -> None:
    """Refuse a count of `COUNTS` outside the values that run, and epochs that would train no step while they set
    the run's length (--max_steps -1), naming the flag, the value and what is expected."""
    for flag, (runs, expected) in COUNTS.items():
        value = getattr(args, flag)
        if value is not None and not runs(value):
            raise ValueError(f"--{flag} must be {expected}, got {value:g}.")
    epochs = args.num_train_epochs  # None until the task (finetune) or the budget (pretrain) chooses
    if args.max_steps == -1 and epochs is not None and not epochs > 0:
        raise ValueError(f"--num_train_epochs must be positive (passes over the training set), got {epochs:g}.")


@dataclass
class GuardedTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus the output-folder guard that transformers 5 dropped, batches pinned only where a GPU
    is there to read them (transformers warns at every evaluation on a CPU otherwise), and `--precision`, the numeric
    precision chosen for the device (`hardware.choose_precision`), which pretraining and fine-tuning share."""

    output_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder the run writes: the model, its tokenizer, model card (README.md), all_results.json and "
            "checkpoints (default: trainer_output, transformers' default)."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Allow writing into an output_dir that already holds a finished run (its files are replaced when "
            "this run's are moved in; those this run does not write, such as another task's predictions, are then "
            "removed, files the commands never write kept), or starting over beside an interrupted run's "
            "checkpoint-N folders."
        },
    )
    # transformers' help for these describes its example scripts and the Trainer's own push, not these commands
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "Continue an interrupted run: `last` (or `true`) for the newest checkpoint-N in output_dir, or a "
            "checkpoint folder's path."
        },
    )
    push_to_hub: bool = field(
        default=False,
        metadata={
            "help": "Upload the finished output folder to the Hub once, at the end of the run (to --hub_model_id, "
            "with the project's model card and remote code; checked before training starts)."
        },
    )
    hub_model_id: str | None = field(
        default=None, metadata={"help": "The Hub repository USER/NAME (or ORG/NAME) that --push_to_hub uploads to."}
    )
    hub_strategy: HubStrategy | str = field(
        default="end",
        metadata={
            "help": "When --push_to_hub uploads: end, the finished output folder once, at the end of the run (the "
            "only value taken with --push_to_hub). transformers' pushes during the run (every_save, checkpoint, "
            "all_checkpoints) are not made: save checkpoints with --save_strategy, and upload a folder yourself with "
            "bertscratch push."
        },
    )
    dataloader_pin_memory: bool = field(
        default=torch.cuda.is_available(), metadata={"help": "Pin batches in memory (only useful with a GPU)."}
    )
    keep_checkpoints: bool = field(
        default=False,
        metadata={
            "help": "Keep every checkpoint-N of a finished run. By default a finished run keeps its final model and "
            "only the checkpoint a later run can continue from (pretraining's last)."
        },
    )

    precision: str = field(
        default="auto",
        metadata={
            "help": "auto (bf16 autocast on a GPU that supports it and on a CPU with native bf16, AMX or AVX512_BF16; "
            "fp32 elsewhere), fp32, bf16 or fp16. --bf16 or --fp16, if given, decide."
        },
    )

    threads: int | None = field(
        default=None,
        metadata={
            "help": "torch threads per process (default: OMP_NUM_THREADS where set, else the cores this process may "
            "use, shared among pretraining's processes; `hardware.fit_threads`)."
        },
    )

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads must be a positive integer, got {self.threads}.")
        if self.learning_rate is not None and not self.learning_rate > 0:  # None: the task chooses (finetune)
            raise ValueError(f"--learning_rate must be positive, got {self.learning_rate:g}.")
        check_counts(self)  # before transformers' __post_init__ turns eval_steps 0 into logging_steps
        check_hub_strategy(self)
        choose_precision(self)
        use_cpu_process_group()  # else each process of a CPU torchrun or accelerate launch would train alone
        super().__post_init__()
        # transformers would say so only once training starts, and name tensorboardX or an old PyTorch as the fix
        if "tensorboard" in (self.report_to or []) and not is_tensorboard_available():  # a list once checked
            raise ValueError(
                "--report_to tensorboard needs the tensorboard package, which is not installed: "
                f"{install_command('tensorboard')}."
            )
        # --push_to_hub is this package's: the finished output folder goes up once, at the end, with the project's card
        # and remote code (hf_bertscratch.hub.push_training_output). The Trainer's own push, which would create the
        # repo at start-up and upload the whole folder (staging, training_args.bin) with a generic card, stays off.
        self.push_at_end, self.push_to_hub = self.push_to_hub, False


class OutputFolderArguments(Protocol):
    """What the overwrite guard reads of a run's arguments: `GuardedTrainingArguments`, or the JAX run's own."""

    @property
    def output_dir(self) -> str | None: ...

    @property
    def overwrite_output_dir(self) -> bool: ...

    @property
    def resume_from_checkpoint(self) -> str | None: ...


def output_dir_of(args: TrainingArguments | OutputFolderArguments) -> str:
    """`args.output_dir`, typed `str | None` by transformers though its `__post_init__` always sets it (to
    "trainer_output" where none is given)."""
    assert args.output_dir is not None, "TrainingArguments.__post_init__ sets output_dir"
    return args.output_dir


def check_output_dir(training_args: OutputFolderArguments, finished_files: Iterable[str] = FINISHED_FILES) -> None:
    """Refuse to overwrite a finished run (one of `finished_files` present), or to start afresh in the folder of an
    interrupted one (`checkpoint-N` folders and no finished files: the new run would train from step 0 beside them
    and remove them when it ends), unless --overwrite_output_dir or --resume_from_checkpoint says which is meant."""
    if training_args.overwrite_output_dir or resuming(training_args.resume_from_checkpoint):
        return
    output_dir = Path(output_dir_of(training_args))
    finished = finished_files_in(output_dir, finished_files)
    if finished:
        raise ValueError(
            f"output_dir {str(output_dir)!r} already holds a finished run ({', '.join(finished)}); pass "
            "--overwrite_output_dir to replace it or choose another --output_dir."
        )
    checkpoints = checkpoint_folders(output_dir)
    if checkpoints:
        raise ValueError(
            f"output_dir {str(output_dir)!r} holds {checkpoints[-1].name} of an interrupted run; pass "
            "--resume_from_checkpoint last to continue it or --overwrite_output_dir to start over."
        )


def finished_files_in(output_dir: str | Path, finished_files: Iterable[str] = FINISHED_FILES) -> list[str]:
    """The `finished_files` present in `output_dir`: none for a folder that holds no finished run."""
    return [name for name in finished_files if (Path(output_dir) / name).exists()]


def resuming(resume_from_checkpoint: str | None) -> bool:
    """Whether --resume_from_checkpoint asks to resume (`last`, `true` or a path; not unset, `false` or empty)."""
    return resume_from_checkpoint is not None and str(resume_from_checkpoint).lower() not in ("false", "")


STOPPED_WHILE_SAVING = "as a run stopped while saving it leaves it"


def resolve_checkpoint(training_args: TrainingArguments | OutputFolderArguments) -> str | None:
    """The checkpoint to resume from: a path, or the newest whole one in output_dir for "true"/"last", passing over
    incomplete ones (`checkpoint_gaps`) with a line each and leaving them there. An incomplete checkpoint named is
    refused, as is a folder with no whole checkpoint, saying whether it holds a finished run (which removed its
    checkpoints), incomplete checkpoints alone, or none."""
    resume = training_args.resume_from_checkpoint
    if resume is None or not resuming(resume):
        return None
    save_only_model = bool(getattr(training_args, "save_only_model", False))
    if str(resume).lower() in ("true", "last"):
        output_dir = output_dir_of(training_args)
        checkpoints = checkpoint_folders(output_dir)
        passed_over = []
        for checkpoint in reversed(checkpoints):
            gaps = checkpoint_gaps(checkpoint, save_only_model)
            if gaps is None:
                return str(checkpoint)
            if getattr(training_args, "should_log", True):  # one line, not one a process; before logging is set up
                logger.warning(
                    "Passing over %s: incomplete (%s), %s; it stays where it is.",
                    checkpoint,
                    gaps,
                    STOPPED_WHILE_SAVING,
                )
            passed_over.append(f"{checkpoint.name}: {gaps}")
        finished = finished_files_in(output_dir)
        if finished:
            raise ValueError(
                f"--resume_from_checkpoint {resume}: the run in {output_dir!r} finished "
                f"({', '.join(finished)}) and kept no checkpoint-* folder to continue from; pass "
                "--overwrite_output_dir to train it again from the start, or choose another --output_dir (with "
                f"--model_name_or_path {output_dir} to train its model further)."
            )
        if passed_over:
            raise ValueError(
                f"--resume_from_checkpoint {resume}: {output_dir!r} holds incomplete checkpoints alone "
                f"({'; '.join(passed_over)}), as a run stopped while saving leaves them: nothing to resume from; pass "
                "--overwrite_output_dir to start over."
            )
        raise ValueError(f"--resume_from_checkpoint {resume}: no checkpoint-* folder in {output_dir!r}.")
    if not os.path.isdir(resume):
        raise ValueError(f"--resume_from_checkpoint {resume!r} is not a checkpoint folder.")
    gaps = checkpoint_gaps(resume, save_only_model)
    if gaps is not None:
        raise ValueError(
            f"--resume_from_checkpoint {resume!r} is an incomplete checkpoint ({gaps}), {STOPPED_WHILE_SAVING}; pass "
            "a whole one, or --resume_from_checkpoint last for the newest whole one."
        )
    return resume


def check_resumed_model(checkpoint: str | None, model: object) -> None:
    """Refuse to resume `checkpoint` into `model` where its weights would not fit or not mean the same, naming both,
    before they load: a model of another class than the one its config.json records (its `architectures`: a
    fine-tune's head in pretraining, a token classifier in a sequence classification), or a head of one output per
    label (`num_labels`) over other labels, in id order, or for another problem type (its `id2label` and
    `problem_type`: a checkpoint of another task's or data's classes, whose head ids would stand for other classes,
    or whose weights fail on a size mismatch). A checkpoint that records no config, or a model that is no
    transformers model (ELECTRA's generator-discriminator pair), passes."""
    config = read_config(checkpoint) if checkpoint is not None else None
    if config is None or not isinstance(model, PreTrainedModel):
        return
    recorded = config.get("architectures")
    run_class = type(model).__name__
    if isinstance(recorded, list) and recorded and run_class not in recorded:
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint} holds a {', '.join(map(str, recorded))} and this run trains a "
            f"{run_class}: resume a checkpoint of a run like this one, or start from that model with "
            f"--model_name_or_path {checkpoint} and another --output_dir."
        )
    if getattr(model, "num_labels", None) is None:  # no head of one output per label: a masked LM, an encoder
        return
    trained, trained_type = _recorded_labels(config), config.get("problem_type")
    labels, problem_type = config_label_names({"id2label": model.config.id2label}), model.config.problem_type
    if trained != labels or bool(problem_type and trained_type and trained_type != problem_type):
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint} was trained on the labels {trained}{_of_type(trained_type)}, "
            f"this run on {labels}{_of_type(problem_type)}: its head's ids would stand for other classes, or its "
            "outputs be read otherwise. Resume with the task, data and labels it was trained on, or start over in "
            "another --output_dir (or with --overwrite_output_dir)."
        )


def _recorded_labels(config: dict[str, Any]) -> list[str]:
    """A head's label names, in id order, as its config.json records them: transformers writes no `id2label` for
    its default two labels (LABEL_0, LABEL_1), nor for a config's `num_labels` alone."""
    return config_label_names(config) or [f"LABEL_{i}" for i in range(int(config.get("num_labels", 2)))]


def _of_type(problem_type: str | None) -> str:
    return f" ({problem_type})" if problem_type else ""


def log_resumption(checkpoint: str | None) -> None:
    """Say in one line which checkpoint a run resumes from, and at which step (nothing for a fresh start)."""
    if checkpoint is None:
        return
    state = Path(checkpoint) / "trainer_state.json"
    step = json.loads(state.read_text(encoding="utf-8")).get("global_step") if state.is_file() else None
    at = f" at step {step}" if step is not None else ""
    logger.info("Resuming from %s%s: its weights, optimizer, schedule and random state.", checkpoint, at)


# The file of each checkpoint that records the data it trained on (`TrainingDataRecord`), and the form of that record
# written now: the records of earlier versions (no "format") hold a fingerprint of paths and modification times.
TRAINING_DATA_FILE = "training_data.json"
TRAINING_DATA_FORMAT = 2


class TrainingDataRecord(TrainerCallback):
    """Records the training data's fingerprint in each checkpoint (`TRAINING_DATA_FILE`), and on resuming warns in
    one line when the checkpoint recorded another: Trainer skips the batches the checkpoint trained on, as if they
    were the same. Pretraining and fine-tuning share it.

    The fingerprint is the train split's own (`datasets`'s `_fingerprint`): it follows a local file's bytes
    (`data.file_digest`, the fingerprint `data.load_raw_datasets` gives the splits it reads from files), a Hub
    dataset's name, config and revision, and the selection made of them (a subset, a shuffle, a held-out share). A
    checkpoint's labels and problem type are `check_resumed_model`'s to compare, whatever the data."""

    def __init__(self, fingerprint: str, source: str) -> None:
        self.fingerprint, self.source = fingerprint, source

    @classmethod
    def of(cls, train: datasets.Dataset | datasets.IterableDataset, source: str) -> TrainingDataRecord | None:
        """The record of the train split `train`, read from `source` (a file, a dataset: how a warning names it);
        None for one `datasets` gives no fingerprint (a streamed split)."""
        fingerprint = getattr(train, "_fingerprint", None)
        return cls(fingerprint, source) if isinstance(fingerprint, str) else None

    def check_resumed(self, checkpoint: str | None) -> None:
        """Warn when `checkpoint` (None: a run not resumed) recorded other training data than this run's, and say
        when its record is one of an earlier version's, which is not compared. It only logs: a run of several
        processes calls it on the first alone, so that the warning is said once."""
        recorded = Path(checkpoint) / TRAINING_DATA_FILE if checkpoint is not None else None
        if recorded is None or not recorded.is_file():
            return
        try:
            record = json.loads(recorded.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            logger.warning("Cannot read %s (%s): the training data is not compared with it.", recorded, error)
            return
        if not isinstance(record, dict) or record.get("format") != TRAINING_DATA_FORMAT:
            logger.info(
                "%s recorded its training data by path and modification time, as earlier versions did: it is not "
                "compared with this run's.",
                checkpoint,
            )
        elif record.get("fingerprint") != self.fingerprint:
            logger.warning(
                "The training data (%s) changed since %s was saved: the resumed run skips the batches that checkpoint "
                "trained on as if they were the same, which they are not.",
                self.source,
                checkpoint,
            )

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        folder = Path(output_dir_of(args)) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            record = {"format": TRAINING_DATA_FORMAT, "fingerprint": self.fingerprint, "data": self.source}
            write_text_atomically(folder / TRAINING_DATA_FILE, json.dumps(record, indent=2) + "\n")


# What stops a training run from outside: Ctrl-C, `kill` (a job scheduler, `timeout`), a closed terminal.
# (SIGHUP is POSIX's alone.)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def stopped_message(training_args: TrainingArguments, step: int | None) -> str:
    """Where a stopped run stands: the step it stopped at (when known) and the checkpoint that
    `--resume_from_checkpoint last` continues from (the newest whole one), or that it saved none yet."""
    at = "stopped" if step is None else f"stopped at step {step}"
    save_only_model = bool(getattr(training_args, "save_only_model", False))
    checkpoints = checkpoint_folders(output_dir_of(training_args))
    whole = [checkpoint for checkpoint in checkpoints if checkpoint_gaps(checkpoint, save_only_model) is None]
    if whole:
        return f"{at}; the last checkpoint is {whole[-1]}: rerun with --resume_from_checkpoint last to continue"
    strategy = str(getattr(training_args.save_strategy, "value", training_args.save_strategy))
    schedule = f"--save_steps {training_args.save_steps:g}" if strategy == "steps" else f"--save_strategy {strategy}"
    return f"{at}, before its first checkpoint ({schedule}): nothing to resume from"


def finish_saving_notice(command: str, checkpoint: str, signum: int) -> str:
    """The line a stop signal that comes while `checkpoint` is written prints at once: the run stops once it is
    whole, or at once on a second signal, which leaves it for `resolve_checkpoint` to pass over."""
    again = "press Ctrl-C again" if signum == signal.SIGINT else f"send {signal.Signals(signum).name} again"
    return (
        f"{program_name(command)}: stopping once {checkpoint} is written; {again} to stop now, leaving it incomplete: "
        "--resume_from_checkpoint last passes over it"
    )


# Loss lines the terminal shows in a training run: one per this share of the run. Every logged loss (--logging_steps)
# stays in trainer_state.json, whose loss curve `bertscratch plot` draws.
PRINTED_LOSS_LINES = 10


def steps_done(state: TrainerState) -> tuple[float, float]:
    """How far a run of a fixed number of steps is: (steps taken, steps to take)."""
    return state.global_step, max(state.max_steps, 1)


class FewerLossLines:
    """Shows a training log (one with "loss") only at each tenth of the run (`PRINTED_LOSS_LINES`) and at its last
    step, its loss the mean of the losses logged since the line before; evaluations and the final summary show as
    they come. `progress` says how far the run is, as (done, of): its steps (`steps_done`), or the seconds of its
    time budget. Mixed into transformers' progress bar and its printer (what shows without the bar) by
    `show_fewer_loss_lines`."""

    def __init__(
        self, *args: Any, progress: Callable[[TrainerState], tuple[float, float]] = steps_done, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.progress = progress
        self.losses: list[float] = []
        self.shown_share = 0

    def share_shown(self, state: TrainerState) -> int:
        """The tenths of the run `state` has reached (0 to `PRINTED_LOSS_LINES`)."""
        done, of = self.progress(state)
        return min(int(done * PRINTED_LOSS_LINES // of), PRINTED_LOSS_LINES)

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        # A resumed run starts within a tenth: its lines fall at the tenths a run never stopped shows.
        self.losses, self.shown_share = [], self.share_shown(state)
        super().on_train_begin(args, state, control, **kwargs)  # type: ignore[misc]

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        if logs is not None and "loss" in logs:
            self.losses.append(float(logs["loss"]))
            share = self.share_shown(state)
            if share == self.shown_share and state.global_step < state.max_steps:
                return
            self.shown_share = share
            logs = {**logs, "loss": sum(self.losses) / len(self.losses)}
            self.losses = []
        super().on_log(args, state, control, logs=logs, **kwargs)  # type: ignore[misc]


def show_fewer_loss_lines(
    trainer: Trainer, progress: Callable[[TrainerState], tuple[float, float]] = steps_done
) -> None:
    """Put the `FewerLossLines` forms of the trainer's progress bar and log printer (whichever class each is: a
    budgeted run's bar is `budget.BudgetProgressCallback`) in place of them, the run's progress told by `progress`."""
    for shown in (ProgressCallback, PrinterCallback):
        callback = trainer.pop_callback(shown)
        if callback is not None:
            fewer = type(f"FewerLossLines{type(callback).__name__}", (FewerLossLines, type(callback)), {})
            trainer.add_callback(fewer(progress=progress))


@contextmanager
def stopping_with_one_line(trainer: Trainer, command: str) -> Iterator[None]:
    """While the block trains `trainer` for `bertscratch COMMAND`, a `STOP_SIGNALS` signal stops it with `Stopped`,
    whose line names the step and the last whole checkpoint (`stopped_message`) and whose status is the signal's; so
    does any error that follows one (a process of a multi-process run whose peer stopped first). A signal that comes
    while a checkpoint is written stops the run once the checkpoint is whole, the process that writes it saying so
    at once (`finish_saving_notice`); a second signal then stops it at once, leaving that checkpoint incomplete.
    Other signals that follow the first find the run stopping."""
    if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
        with _stopping(trainer, command):
            yield
    else:
        yield


@contextmanager
def _stopping(trainer: Trainer, command: str) -> Iterator[None]:
    received: list[int] = []
    saving: str | None = None  # the checkpoint being written

    def stop(signum: int, _frame: object) -> None:
        received.append(signum)
        if saving is None:
            if len(received) == 1:
                raise KeyboardInterrupt
        elif len(received) > 1:
            raise KeyboardInterrupt
        elif trainer.args.should_save:  # the process that writes the checkpoint
            say_at_once(finish_saving_notice(command, saving, signum))

    save_checkpoint = trainer._save_checkpoint

    def save_whole(*args: Any, **kwargs: Any) -> None:
        nonlocal saving
        saving = os.path.join(output_dir_of(trainer.args), f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}")
        try:
            save_checkpoint(*args, **kwargs)
        finally:
            saving = None
        if received:
            raise KeyboardInterrupt

    trainer._save_checkpoint = save_whole  # type: ignore[method-assign]
    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    except BaseException as error:
        if not received and not isinstance(error, KeyboardInterrupt):
            raise
        # Another signal while the line is made (it reads the output folder, on a disk that may not answer) acts as
        # it would outside the block.
        restore_signal_handlers(previous)
        signum = received[0] if received else signal.SIGINT
        raise Stopped(stopped_message(trainer.args, trainer.state.global_step), signum) from None
    finally:
        restore_signal_handlers(previous)
        del trainer._save_checkpoint


def say_at_once(line: str) -> None:
    """Print `line` on stderr from a signal handler, which may have interrupted a write to sys.stderr: straight to
    its file descriptor, where it has one."""
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without one (io.UnsupportedOperation)
        print(line, file=sys.stderr, flush=True)
        return
    os.write(descriptor, (line + "\n").encode())


def restore_signal_handlers(previous: dict[int, Any]) -> None:
    """Set back the handlers `signal.signal` returned, each signal's; a handler installed outside Python reads as
    None, which Python cannot set, and stays in place."""
    for signum, handler in previous.items():
        if handler is not None:
            signal.signal(signum, handler)


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through `atomic_write`: readers see the old file or the whole new one."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def check_replaceable(target: str | Path) -> None:
    """Refuse a `target` that `staged_folder` cannot replace: the current folder or one holding it (removed from
    under the shell that ran the command, which would then see an empty folder)."""
    if Path.cwd().is_relative_to(os.path.abspath(target)):
        raise ValueError(
            f"{str(target)!r} is the current folder or holds it: the folder written replaces it whole; expected a "
            "folder inside it."
        )


@contextmanager
def staged_folder(target: str | Path) -> Iterator[Path]:
    """Yield a new hidden folder beside `target` to assemble; on success it replaces `target` in one rename (a
    folder already there is removed once the new one stands in its place: `replace_folder`), its files with the usual permissions; on failure it is deleted. A `target`
    that holds the current folder is refused (`check_replaceable`)."""
    check_replaceable(target)
    target = Path(os.path.abspath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        for path in staging.rglob("*"):
            if path.is_file():
                grant_usual_permissions(path)
        replace_folder(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_folder(staging: str | Path, output_dir: str | Path, last: Iterable[str] = ("README.md",)) -> None:
    """Move every file and folder of `staging` into `output_dir` with the usual permissions, the `last` names last
    and in their order, then remove `staging`: a folder holding its `last` files (the model card) is complete. A
    folder of the same name an earlier run left in `output_dir` (--overwrite_output_dir) is replaced, as a folder
    cannot be renamed over a non-empty one."""
    staging, output_dir = Path(staging), Path(output_dir)
    last = tuple(last)
    for path in sorted(staging.iterdir(), key=lambda p: last.index(p.name) if p.name in last else -1):
        for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
            if item.is_file():
                grant_usual_permissions(item)
        if path.is_dir():
            replace_folder(path, output_dir / path.name)
        else:
            os.replace(path, output_dir / path.name)
    staging.rmdir()


def replace_folder(new: Path, target: Path) -> None:
    """Move the folder `new` to `target`, replacing a folder there: the old one is set aside under a hidden name
    beside it, the new one renamed into place, then the old one removed. A failure on the way (a full disk, a kill)
    leaves the old folder whole, at `target` or, after a kill between the two renames, at its hidden name."""
    if not target.exists():
        os.replace(new, target)
        return
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def finish_run(
    trainer: Trainer, write_reports: Callable[[Path], None], keep_last_checkpoint: bool = False
) -> str | None:
    """How pretraining and fine-tuning end a run: the trained model (tokenizer, config, remote code) and
    `trainer_state.json` are saved into the hidden `output_dir/.staging` folder, `write_reports(staging)` adds the
    run's own files there on the main process (all_results.json, plots, the model card), and everything is moved into
    `output_dir` with all_results.json and the model card last. So an output folder holding them is complete, and a
    run that fails on the way leaves nothing that looks finished. Then the intermediate checkpoints go, unless
    --keep_checkpoints (`prune_checkpoints`: all of them, or all but the last with `keep_last_checkpoint`); returns
    the sentence that says what the folder keeps, on the main process (None on the others)."""
    output_dir = output_dir_of(trainer.args)
    staging = Path(output_dir) / STAGING
    if trainer.is_world_process_zero():
        shutil.rmtree(staging, ignore_errors=True)  # what a run that failed here before left behind
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(staging))  # collective under FSDP/DeepSpeed: every rank calls it
    if not trainer.is_world_process_zero():
        return None
    trainer.state.save_to_json(str(staging / "trainer_state.json"))
    write_reports(staging)
    publish_run(staging, output_dir, last=_WRITTEN_LAST)
    model = "the final model"
    if getattr(trainer.args, "load_best_model_at_end", False) and trainer.state.best_model_checkpoint:
        metric = trainer.args.metric_for_best_model or "loss"
        model = f"the best model (by eval {metric}, from {Path(trainer.state.best_model_checkpoint).name})"
    if getattr(trainer.args, "keep_checkpoints", False):
        return f"{output_dir} keeps {model} and every checkpoint (--keep_checkpoints)."
    return prune_checkpoints(output_dir, keep_last_checkpoint, model, trainer.state.global_step)


def publish_run(staging: str | Path, output_dir: str | Path, last: Iterable[str]) -> None:
    """`publish_folder`, then `remove_stale_outputs`: the `RUN_OUTPUTS` an earlier run left that `staging` lacks."""
    stale = [name for name in RUN_OUTPUTS if (Path(output_dir) / name).exists() and not (Path(staging) / name).exists()]
    publish_folder(staging, output_dir, last=last)
    remove_stale_outputs(output_dir, stale)


def remove_stale_outputs(output_dir: str | Path, stale: list[str]) -> None:
    """Remove `stale`, the `RUN_OUTPUTS` an earlier run left in `output_dir` that the run just finished did not
    write (another task's predictions and picture, an ELECTRA generator beside a masked LM, the sentence-transformers
    files that would load a classifier as an embedding model), saying so in one line."""
    for name in stale:
        path = Path(output_dir) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if stale:
        logger.info("Removed the earlier run's %s from %s: this run does not write them.", ", ".join(stale), output_dir)


def prune_checkpoints(
    output_dir: str | Path, keep_last: bool, model: str = "the final model", last_step: int | None = None
) -> str:
    """Remove a finished run's `checkpoint-N` folders: all of them, or all but the last with `keep_last` (what
    `--resume_from_checkpoint last` continues from, where a finished run can go on: pretraining with a larger budget).
    With `last_step`, the run's final step, a checkpoint past it is an earlier run's (--overwrite_output_dir) and is
    never the one kept.
    Intermediate checkpoints serve an interrupted run only; the finished folder holds `model` (the final model, or
    the best where the run loaded it at the end).

    Returns:
        One sentence for the run's last lines: what the folder keeps and what was removed.
    """
    output_dir = Path(output_dir)
    checkpoints = checkpoint_folders(output_dir)
    ours = [path for path in checkpoints if last_step is None or checkpoint_step(path) <= last_step]
    kept = ours[-1:] if keep_last else []
    removed = [path for path in checkpoints if path not in kept]
    size = sum(file.stat().st_size for path in removed for file in path.rglob("*") if file.is_file())
    for path in removed:
        shutil.rmtree(path)
    sentence = f"{output_dir} keeps {model}"
    if kept:
        sentence += (
            f" and {kept[0].name}, which `--resume_from_checkpoint last` continues with a larger --max_train_minutes "
            "or --max_steps"
        )
    if removed:
        sentence += f"; removed {len(removed)} intermediate checkpoint(s) ({size / 1e6:.0f} MB), kept for resuming "
        sentence += "an interrupted run only"
    return sentence + "."


__all__ = [
    "check_resumed_model",
    "PRINTED_LOSS_LINES",
    "FewerLossLines",
    "show_fewer_loss_lines",
    "FINISHED_FILES",
    "GuardedTrainingArguments",
    "OutputFolderArguments",
    "PUSH_HUB_STRATEGIES",
    "RUN_OUTPUTS",
    "STOP_SIGNALS",
    "STAGING",
    "TRAINING_DATA_FILE",
    "TRAINING_DATA_FORMAT",
    "TrainingDataRecord",
    "atomic_write",
    "check_counts",
    "check_hub_strategy",
    "check_output_dir",
    "check_replaceable",
    "checkpoint_folders",
    "checkpoint_gaps",
    "checkpoint_step",
    "finish_run",
    "final_path",
    "finish_saving_notice",
    "finished_files_in",
    "grant_usual_permissions",
    "log_resumption",
    "output_dir_of",
    "prune_checkpoints",
    "publish_folder",
    "replace_folder",
    "publish_run",
    "remove_stale_outputs",
    "resolve_checkpoint",
    "restore_signal_handlers",
    "say_at_once",
    "resuming",
    "staged_folder",
    "stopped_message",
    "stopping_with_one_line",
    "write_text_atomically",
]
