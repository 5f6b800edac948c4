"""`bertscratch pretrain-flax`'s flags: the torch entry point's model and data arguments, and the optimisation and
output of a JAX run (`FlaxPretrainingArguments`).

They live outside `hf_bertscratch.flax`, which imports JAX (the [flax] extra): the front door keeps the command's
`--help` page and flags (`build_parser`) whether or not JAX is installed.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from .arguments import ArgumentParser, parse_args_or_json
from .pretraining_arguments import DataArguments, ModelArguments


@dataclass
class FlaxPretrainingArguments:
    """Optimisation and output of a JAX pretraining run (defaults: the torch recipe's, see `PretrainingArguments`)."""

    _argument_group_name = "training"  # its flags' heading in --help

    output_dir: str = field(metadata={"help": "Folder to write the model, tokenizer and all_results.json to."})
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Allow writing into an output_dir that already holds a finished run."}
    )
    max_steps: int = field(default=100, metadata={"help": "Optimizer steps to train."})
    per_device_train_batch_size: int = field(default=16, metadata={"help": "Blocks per step."})
    per_device_eval_batch_size: int = field(default=16, metadata={"help": "Blocks per evaluation batch."})
    learning_rate: float = field(default=3e-3, metadata={"help": "Peak AdamW learning rate."})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1."})
    adam_beta2: float = field(default=0.98, metadata={"help": "AdamW beta2."})
    adam_epsilon: float = field(default=1e-8, metadata={"help": "AdamW epsilon."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (not on biases and LayerNorms)."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Clip the global gradient norm to this (0: no clip)."})
    warmup_steps: float = field(
        default=0.1,
        metadata={"help": "Linear warm-up: steps, or a fraction of max_steps (below 1); then linear decay."},
    )
    logging_steps: int = field(default=50, metadata={"help": "Log the mean training loss every N steps."})
    seed: int = field(default=42, metadata={"help": "Seed of the parameters, batch order and masking."})

    # What the shared data stages read from a TrainingArguments: one process, nothing to resume.
    resume_from_checkpoint = None
    process_index = 0
    world_size = 1

    def main_process_first(self, desc: str = "") -> AbstractContextManager:
        return nullcontext()


# What `--help` lists: the flags a first run needs (every other flag: --help_all), as for `bertscratch pretrain`.
FIRST_RUN_FLAGS = (
    *("model_size", "model_name_or_path", "tokenizer_name"),
    *("train_file", "validation_file", "dataset_name", "dataset_config_name", "data_dir", "text_column"),
    *("max_seq_length", "max_train_samples"),
    *("output_dir", "overwrite_output_dir", "max_steps", "learning_rate", "per_device_train_batch_size", "seed"),
)


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch pretrain-flax`: its three dataclasses, `--help` listing FIRST_RUN_FLAGS (the front
    door keeps that page)."""
    return ArgumentParser(
        (ModelArguments, DataArguments, FlaxPretrainingArguments),
        first_run=FIRST_RUN_FLAGS,
        description="Pretrain a BertScratch masked language model in JAX (Flax NNX).",
    )


def parse_args(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, FlaxPretrainingArguments]:
    """Parse command-line arguments, or a single .json file of them, into the three argument dataclasses."""
    return parse_args_or_json(build_parser(), argv)


__all__ = ["FIRST_RUN_FLAGS", "FlaxPretrainingArguments", "build_parser", "parse_args"]
