"""The closest valid flag to a mistyped one, and the one line a usage error ends with, the same before torch loads
(the front door's parsers and its check of a command's flags) and after (the library's argument parser): flags of
other training scripts and tools map to this package's, any other by spelling."""

from __future__ import annotations

import argparse
import re
from collections.abc import Collection
from typing import NoReturn

from . import did_you_mean

# Flags of other training scripts and tools -> this package's (transformers' TrainingArguments names), suggested for
# an unknown flag where its spelling alone would suggest something else (`--lr` is closest to `--help`).
FLAG_ALIASES = {
    "--lr": "--learning_rate",
    "--batch_size": "--per_device_train_batch_size",
    "--bs": "--per_device_train_batch_size",
    "--train_batch_size": "--per_device_train_batch_size",
    "--eval_batch_size": "--per_device_eval_batch_size",
    "--epochs": "--num_train_epochs",
    "--max_length": "--max_seq_length",
    "--max_len": "--max_seq_length",
    "--seq_len": "--max_seq_length",
    "--model": "--model_name_or_path",
    "--model_name": "--model_name_or_path",
    "--tokenizer": "--tokenizer_name",
    "--output": "--output_dir",
    "--out_dir": "--output_dir",
    "--dev_file": "--validation_file",
    "--eval_file": "--validation_file",
    "--warmup_ratio": "--warmup_steps",
    "--resume": "--resume_from_checkpoint",
    "--task_name": "--task",  # run_glue's and run_ner's (by spelling alone: --dataset_name)
}


def flag_suggestion(given: str, flags: Collection[str]) -> str:
    """ "; did you mean '--x'?" for the unknown flag `given` (`--name` or `--name=value`) among a command's `flags`,
    or "" when none is close."""
    name = given.split("=")[0]
    if FLAG_ALIASES.get(name) in flags:
        return f"; did you mean {FLAG_ALIASES[name]!r}?"
    return did_you_mean(name, flags)


def usage_error_line(prog: str, message: str) -> str:
    """`PROG: error: MESSAGE (see PROG --help)`: the one line every command's usage error is."""
    return f"{prog}: error: {message} (see {prog} --help)\n"


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose usage error is one line (`usage_error_line`, exit status 2): the bad value and what
    was expected (argparse's message) with the closest valid name, a choice's or a flag's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, usage_error_line(self.prog, f"{message}{self.suggestion(message)}"))

    def suggestion(self, message: str) -> str:
        """ "; did you mean ...?" for argparse's `message` of an invalid choice or an unrecognized flag, else ""."""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            names = re.findall(r"'([^']*)'", choice.group(2))
            return did_you_mean(choice.group(1), names)
        unknown = re.search(r"unrecognized arguments: (\S+)", message)
        if unknown:
            return flag_suggestion(
                unknown.group(1), [option for action in self._actions for option in action.option_strings]
            )
        return ""


__all__ = ["FLAG_ALIASES", "OneLineParser", "flag_suggestion", "usage_error_line"]
