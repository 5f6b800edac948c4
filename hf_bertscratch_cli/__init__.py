"""The `bertscratch` console command's front door: the command list, `--help`, `--version` and a mistyped command
answered at once (nothing but the standard library is imported: `hf_bertscratch_cli.commands`), a command checked
before torch loads (by `hf_bertscratch_base`'s `model_reference` and task table: `data_checks`) in three steps: that
its model and data files are there (`check_sources`), that its flags are the command's (`commands.check_flags`), and
what their values ask of the model and the data (`check_arguments`), the first and last skipped where the arguments
ask for the command's help (`asks_for_help`); every command then run by the library module that implements it
(`dispatch`; `plot`, which needs neither torch nor transformers, by the front door's own `plot` module).

It is a package of its own because importing `hf_bertscratch` registers the model with transformers' Auto classes,
which imports torch and transformers (several seconds). It is the top layer: it stands on `hf_bertscratch_base`, as
the library does, and imports the library only when a command runs; the library never imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from hf_bertscratch_base import PROG, did_you_mean
from hf_bertscratch_base.dataset_table import check_named_dataset
from hf_bertscratch_base.errors import DEBUG_ENV, debugging, print_error
from hf_bertscratch_base.model_reference import DATA_DIR_ENV, check_model_reference, resolve_data_dir
from hf_bertscratch_base.task_table import TASKS, check_task_names
from hf_bertscratch_base.thread_pool import use_training_wait_policy
from hf_bertscratch_base.training_curves import check_image_path

from .commands import COMMAND_SUMMARIES, check_flags, flag_value, model_argument, parse, version
from .data_checks import check_data_files, check_files_exist
from .dispatch import run_command
from .model_checks import check_length, check_model_config, check_source_flags, check_threshold_flag

# The commands whose OpenMP threads sleep when idle (`hf_bertscratch_base.thread_pool`).
TRAINING_COMMANDS = ("pretrain", "finetune")
# The commands whose --output is the image they draw (`check_image_path`: no folder).
IMAGE_COMMANDS = ("attention", "plot")
# finetune flags that name data other than the task's own local copy or Hub dataset, or files that stand in for some
# of its splits (the library's error then says which splits they leave to the dataset).
OTHER_DATA_FLAGS = ("--data_dir", "--dataset_name", "--train_file", "--validation_file", "--test_file")


def check_sources(command: str, args: list[str]) -> None:
    """What the arguments point to that can be missing or of the wrong kind, checked in a second before the flags
    are: the model (a folder, or a Hub id with the Hub reachable; a folder of a model_type the command loads), a
    tokenizer or config flag's path (there, and a config of a model_type the command loads), the --data_dir of a
    training command, the local data files a command reads and the image a drawing command writes (no folder)."""
    model = model_argument(command, args)
    if model is not None:
        check_model_reference(model)
    check_source_flags(command, args)
    check_model_config(command, args)
    data_dir = flag_value(args, "--data_dir") if command in ("finetune", "pretrain") else None
    if data_dir:
        resolve_data_dir(data_dir)  # a folder that is not there
    check_files_exist(command, args)
    image = flag_value(args, "--output") if command in IMAGE_COMMANDS else None
    if image is not None:
        check_image_path(image)


def check_arguments(command: str, args: list[str]) -> None:
    """What the flags' values ask for that can fail before torch loads, checked once the flags are known to be the
    command's: finetune's --task and --task_type, its --task without a data directory when the Hub cannot be
    reached or is offline with no cached copy (`check_named_dataset`), a --max_seq_length beyond the model's positions
    (`check_length`), classify's --threshold for a model that is no multi-label classifier (`check_threshold_flag`),
    the columns of the local data files a training command, or an inference command's --input_file, reads, and a
    finetune train file alone too small to hold examples out of (`check_data_files`)."""
    task = flag_value(args, "--task") if command == "finetune" else None
    if command == "finetune":
        check_task_names(task, flag_value(args, "--task_type"))
    if task and not os.environ.get(DATA_DIR_ENV) and not any(flag_value(args, flag) for flag in OTHER_DATA_FLAGS):
        check_named_dataset(TASKS[task].dataset_name, TASKS[task].dataset_config_name, flag_value(args, "--cache_dir"))
    check_length(command, args)
    check_threshold_flag(command, args)
    check_data_files(command, args)


def _in_one_line(check: Callable[[str, list[str]], None], command: str, args: list[str]) -> None:
    """Run `check`; an OSError or ValueError it raises ends the command with its one line and exit status 1."""
    try:
        check(command, args)
    except (OSError, ValueError) as error:
        print_error(command, error)
        raise SystemExit(1) from None


def asks_for_help(args: list[str]) -> bool:
    """Whether a command's arguments ask for its help (-h or --help, before any `--`), which its parser prints before
    it reads any other value."""
    given = args[: args.index("--")] if "--" in args else args
    return any(arg in ("-h", "--help") for arg in given)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `bertscratch` command (argv: the arguments after the program name)."""
    command, args, debug = parse(argv)
    # --debug: the library's own checks, with their tracebacks; a help request: the help, whatever the values say.
    checking = not (debug or debugging() or asks_for_help(args))
    if checking:
        _in_one_line(check_sources, command, args)  # a missing folder or file, an unreachable Hub: before torch
    check_flags(command, args)  # a mistyped flag: the command's usage error, before torch
    if checking:
        _in_one_line(check_arguments, command, args)  # a missing column, an unknown task: before torch
    if command in TRAINING_COMMANDS:
        use_training_wait_policy()  # before torch loads
    run_command(command, args, debug=debug)  # torch and transformers load here, for a command that needs them


__all__ = ["COMMAND_SUMMARIES", "DEBUG_ENV", "PROG", "did_you_mean", "main", "parse", "run_command", "version"]
