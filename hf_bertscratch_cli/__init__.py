"""The `bertscratch` console command's front door: the command list, `--help`, `--version` and a mistyped command
answered at once (nothing but the standard library is imported: `hf_bertscratch_cli.commands`), a command's model,
dataset and data files checked before torch loads (by `hf_bertscratch_base`'s `model_reference` and task table:
`data_checks`), every command then run by the library module that implements it (`dispatch`; `plot`, which needs
neither torch nor transformers, by the front door's own `plot` module).

It is a package of its own because importing `hf_bertscratch` registers the model with transformers' Auto classes,
which imports torch and transformers (several seconds). It is the top layer: it stands on `hf_bertscratch_base`, as
the library does, and imports the library only when a command runs; the library never imports it.
"""

from __future__ import annotations

import os

from hf_bertscratch_base import PROG, did_you_mean
from hf_bertscratch_base.errors import DEBUG_ENV, debugging, print_error
from hf_bertscratch_base.model_reference import DATA_DIR_ENV, check_hub_dataset, check_model_reference, resolve_data_dir
from hf_bertscratch_base.task_table import check_task_names
from hf_bertscratch_base.thread_pool import use_training_wait_policy

from .commands import COMMAND_SUMMARIES, check_flags, flag_value, model_argument, parse, version
from .data_checks import check_data_files
from .dispatch import run_command

# The commands whose OpenMP threads sleep when idle (`hf_bertscratch_base.thread_pool`).
TRAINING_COMMANDS = ("pretrain", "finetune")
# finetune flags that name data other than the task's own local copy or Hub dataset.
OTHER_DATA_FLAGS = ("--data_dir", "--train_file", "--dataset_name")


def check_sources(command: str, args: list[str]) -> None:
    """What the arguments point to that can fail before torch loads, checked in a second: the model (a folder, or a
    Hub id with the Hub reachable), finetune's --task without a data directory when the Hub cannot be reached, and
    the columns of the local data files a training command, or an inference command's --input_file, reads
    (`check_data_files`)."""
    model = model_argument(command, args)
    if model is not None:
        check_model_reference(model)
    task = flag_value(args, "--task") if command == "finetune" else None
    if command == "finetune":
        check_task_names(task, flag_value(args, "--task_type"))
    data_dir = flag_value(args, "--data_dir") if command in ("finetune", "pretrain") else None
    if data_dir:
        resolve_data_dir(data_dir)  # a folder that is not there
    if task and not os.environ.get(DATA_DIR_ENV) and not any(flag_value(args, flag) for flag in OTHER_DATA_FLAGS):
        check_hub_dataset(f"Task {task!r}'s dataset", None, "")
    check_data_files(command, args)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `bertscratch` command (argv: the arguments after the program name)."""
    command, args, debug = parse(argv)
    if not (debug or debugging()):
        try:
            check_sources(command, args)  # a missing folder or column, an unreachable Hub: one line, before torch
        except (OSError, ValueError) as error:
            print_error(command, error)
            raise SystemExit(1) from None
    check_flags(command, args)  # a mistyped flag: the command's usage error, before torch
    if command in TRAINING_COMMANDS:
        use_training_wait_policy()  # before torch loads
    run_command(command, args, debug=debug)  # torch and transformers load here, for a command that needs them


__all__ = ["COMMAND_SUMMARIES", "DEBUG_ENV", "PROG", "did_you_mean", "main", "parse", "run_command", "version"]
