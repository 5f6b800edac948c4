"""The closest valid flag to a mistyped one, the same before torch loads (the front door's check of a command's
flags) and after (the library's argument parser): flags of other training scripts and tools map to this package's,
any other by spelling."""

from __future__ import annotations

from collections.abc import Collection

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


__all__ = ["FLAG_ALIASES", "flag_suggestion"]
