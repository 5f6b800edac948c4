"""Pretrain a BertScratch model on raw text: masked language modelling (optionally plus NSP), or ELECTRA's
replaced-token detection (`hf_bertscratch.electra`).

In the style of transformers' `run_mlm.py`: `HfArgumentParser` over `ModelArguments`, `DataArguments` and
`PretrainingArguments` (a `TrainingArguments`), and a `main()` that reads as named stages:

    parse + validate -> raw data -> tokenizer -> tokenize and pack (datasets.map) -> model -> Trainer.train
    -> evaluate (loss, perplexity, masked-token accuracy) -> save -> all_results.json, loss curve, model card
    -> fill-mask examples

With `--objective electra` the model is the generator-discriminator pair; the data, masking, time budget, resume and
checks are the masked-LM run's. The output folder holds the discriminator, and `generator/` the generator (which
gives the fill-mask examples).

The same command runs on one CPU, under `torchrun` and under `accelerate launch` (DDP/FSDP/DeepSpeed), since the
Trainer does the distribution.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from safetensors import safe_open
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    DataCollatorForLanguageModeling,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    SchedulerType,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
    set_seed,
)

from .arguments import ArgumentParser, parse_args_or_json
from .baselines import unigram_answer
from .budget import WSD_DECAY_FRACTION, TrainingBudget, budget_lr_lambda
from .configuration_bertscratch import PRESETS, BertScratchConfig
from .data import DEFAULT_PRETRAINING_DATASET, check_max_samples, load_raw_datasets, sample_examples
from .electra import (
    GENERATOR_FOLDER,
    ElectraPretrainingModel,
    check_electra_arguments,
    replaced_token_metrics,
    replaced_token_reductions,
)
from .hub import check_training_push, push_training_output
from .initialisation import start_saved_segments_as_first
from .modeling_bertscratch import BertScratchForReplacedTokenDetection
from .nsp import make_nsp_pairs_function
from .run_folder import (
    GuardedTrainingArguments,
    check_output_dir,
    finish_run,
    resolve_checkpoint,
)
from .tasks import TASKS, task_texts
from .tokenization import check_mask_token, load_tokenizer, train_wordpiece_tokenizer

logger = logging.getLogger(__name__)

OBJECTIVES = ("mlm", "mlm_nsp", "electra")
# Objectives that train on packed blocks of text (mlm_nsp trains on sentence pairs).
PACKED_OBJECTIVES = ("mlm", "electra")
# Training minutes of a run that names neither --max_steps nor --num_train_epochs: the README quick start's budget
# (about 40 s of tokenising, evaluation and saving come on top; the whole job fits in 10 minutes on 2 cores).
DEFAULT_BUDGET_MINUTES = 8.5
# Training tokens per second of the default recipe (README's quick start: the tiny model, 128-token blocks, two
# processes) on the machines its records come from. A run far below the slowest trained fewer tokens in its budget
# than the recipe was chosen for, and the end of the run says so.
REFERENCE_TOKENS_PER_SECOND = {"2-core AMD EPYC (AVX2)": 16_100, "2-core Intel Xeon (AMX)": 31_200}
# Accuracy above the unigram answer's below which a run is said to be still on the unigram plateau.
PLATEAU_MARGIN = 0.03
# Fraction of a run trained on blocks cut to a quarter of max_seq_length (`cut_blocks`) before full blocks.
SHORT_SEQ_FRACTION = 0.25
# --max_steps given to the Trainer when only a time budget ends the run (it needs a step count to size its loop).
BUDGET_STEP_CAP = 10_000_000
FILL_MASK_EXAMPLES = (
    "The capital of France is {mask}.",
    "He was born in {mask} and studied at the university.",
    "The {mask} of the river is in the mountains.",
)


@dataclass
class ModelArguments:
    """Which model to pretrain and which tokenizer it reads."""

    _argument_group_name = "model"  # its flags' heading in --help

    model_size: str = field(default="tiny", metadata={"help": f"Size preset of a new model: one of {sorted(PRESETS)}."})
    config_name: str | None = field(
        default=None,
        metadata={"help": "A config.json folder/file or Hub id to build a new model from (overrides model_size)."},
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Continue pretraining these weights (a model folder or Hub id) instead of a new model."},
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "Tokenizer: a tokenizer folder, a folder with only vocab.txt, a vocab.txt, or a Hub id. "
            "Default: train a WordPiece tokenizer on the training text."
        },
    )
    tokenizer_vocab_size: int = field(
        default=8192,
        metadata={"help": "Vocabulary size of the WordPiece tokenizer trained when no tokenizer_name is given."},
    )
    tokenizer_train_samples: int = field(
        default=200_000, metadata={"help": "Training texts the on-the-fly tokenizer learns from (the first N)."}
    )
    objective: str = field(
        default="mlm",
        metadata={
            "help": f"Pretraining objective: one of {OBJECTIVES} (mlm_nsp adds next-sentence prediction; electra "
            "trains a discriminator to spot the tokens a small MLM generator put in, and saves the generator in "
            "output_dir/generator)."
        },
    )
    generator_width_fraction: float = field(
        default=0.25,
        metadata={
            "help": "electra: the generator's width as a fraction of the discriminator's, in (0, 1] (rounded down to "
            "whole heads of the discriminator's head size; as many layers). It reads the discriminator's embedding "
            "tables through a learned projection."
        },
    )
    discriminator_weight: float = field(
        default=50.0,
        metadata={"help": "electra: loss = generator MLM loss + this weight x discriminator loss (ELECTRA's 50)."},
    )
    mlm_start_fraction: float | None = field(
        default=None,
        metadata={
            "help": "electra: train the discriminator's encoder as a masked LM for this fraction of the run (of the "
            "time budget, or of the steps) before replaced-token detection, in [0, 1). From random weights a small "
            "discriminator can stay at the all-'original' prior for a whole short budget; after a masked-LM start "
            "its encoder reads the context. Default: the short-block start's fraction for a new model, 0 when "
            "--model_name_or_path continues one."
        },
    )
    max_position_embeddings: int = field(
        default=512, metadata={"help": "Positions of a new model; max_seq_length must not exceed it."}
    )
    dropout: float = field(
        default=0.0,
        metadata={
            "help": "Hidden and attention dropout of a new --model_size model while it pretrains (Cramming: "
            "0 learns faster in a short budget; BERT used 0.1). The saved config keeps this value; fine-tuning "
            "sets its own."
        },
    )
    sinusoidal_position_std: float = field(
        default=0.05,
        metadata={
            "help": "A new --model_size model's learned position embeddings start from a sinusoid table with "
            "this standard deviation (0: BERT's N(0, initializer_range) init). A small BERT then learns to attend "
            "to neighbouring tokens within hundreds of steps instead of staying on the MLM unigram plateau."
        },
    )


@dataclass
class DataArguments:
    """Which text to train on and how to turn it into masked examples."""

    _argument_group_name = "data"  # its flags' heading in --help

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Hub dataset id, e.g. wikitext. With none of this, --train_file and --task_text: WikiText-2 "
            "raw (wikitext / wikitext-2-raw-v1), read from the copy shipped in the package (offline)."
        },
    )
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "Hub dataset config, e.g. wikitext-2-raw-v1."}
    )
    train_file: str | None = field(
        default=None, metadata={"help": "Training data file (txt, csv, tsv, json/jsonl, parquet; .gz ok)."}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Validation data file, same formats as train_file."}
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of local copies of Hub datasets, looked up before the Hub (default: $BERTSCRATCH_DATA_DIR)."
        },
    )
    task_text: list[str] | None = field(
        default=None,
        metadata={
            "help": "Task-adaptive pretraining: train on the unlabelled text of fine-tuning tasks' train splits, "
            f"one or more of {', '.join(TASKS)} (several: their texts together), loaded as fine-tuning loads them "
            "(--data_dir for local copies). Classification/regression: each text, and a pair's second text as a "
            "text of its own; token classification: the words joined with spaces; question answering: each "
            "distinct context and every question. Labels are never read. The tasks' eval splits (IMDB: its test "
            "split) give the held-out text of the MLM loss and perplexity only, and are never trained on. Continue "
            "a pretrained model with --model_name_or_path (its tokenizer is kept). Not with --train_file, "
            "--validation_file, --dataset_name, --dataset_config_name, --text_column or --streaming."
        },
    )
    text_column: str = field(default="text", metadata={"help": "Column holding the raw text."})
    max_seq_length: int = field(
        default=128,
        metadata={"help": "Tokens per example, [CLS] and [SEP] included; texts are concatenated and packed."},
    )
    short_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "Tokens per block during the first --short_seq_fraction of training: each max_seq_length "
            "block is cut into blocks of this length (it must divide max_seq_length; default a quarter of "
            "it, 32 for 128). A small BERT leaves the MLM unigram plateau in far fewer steps on short blocks, "
            "then trains on full blocks."
        },
    )
    short_seq_fraction: float | None = field(
        default=None,
        metadata={
            "help": "Fraction of the training (of the time budget, or of the steps) on short blocks; 0 turns the "
            f"short start off. Default {SHORT_SEQ_FRACTION} with objective mlm and a max_seq_length divisible by "
            "4, else 0."
        },
    )
    mlm_probability: float = field(
        default=0.3,
        metadata={
            "help": "Fraction of tokens selected for prediction while training (30%% as ModernBERT; Wettig et "
            "al. 2022 find 15%% too few for short budgets). Evaluation masks --eval_mlm_probability."
        },
    )
    eval_mlm_probability: float = field(
        default=0.15,
        metadata={
            "help": "Fraction of tokens masked in evaluation, whatever the training rate, so that the accuracy "
            "and perplexity of runs trained at different rates compare (BERT's 15%%)."
        },
    )
    mask_replace_prob: float = field(
        default=0.8, metadata={"help": "Of the selected tokens, the fraction replaced by [MASK]."}
    )
    random_replace_prob: float = field(
        default=0.1,
        metadata={"help": "Of the selected tokens, the fraction replaced by a random token (the rest stay)."},
    )
    whole_word_mask: bool = field(
        default=False,
        metadata={"help": "Mask all WordPieces of a word together (mlm objective; forces mask_replace_prob=1)."},
    )
    nsp_random_probability: float = field(
        default=0.5, metadata={"help": "For mlm_nsp: probability that segment B comes from a random other document."}
    )
    validation_split_percentage: int = field(
        default=5,
        metadata={"help": "Percent of the train split held out for validation when no validation split exists."},
    )
    max_train_samples: int | None = field(
        default=None,
        metadata={
            "help": "Train on this many examples (packed blocks, or NSP pairs with mlm_nsp), drawn at random with "
            "--seed after packing, so documents stay whole inside blocks (streaming: the first N of the shuffled "
            "stream). As in fine-tuning, an example is a row the model trains on. Default: all of them."
        },
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Keep only the first N raw validation texts (streaming: texts held out; default 1000; with "
            "--task_text, the first N/k of each of the k tasks')."
        },
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenisation (datasets.map)."}
    )
    overwrite_cache: bool = field(default=False, metadata={"help": "Re-tokenise even if datasets has a cached result."})
    streaming: bool = field(
        default=False, metadata={"help": "Stream the data (needs max_steps) instead of downloading and caching it all."}
    )
    shuffle_buffer_size: int = field(default=10_000, metadata={"help": "Streaming: size of the shuffle buffer."})


@dataclass
class PretrainingArguments(GuardedTrainingArguments):
    """`TrainingArguments` with the output-folder guard (`hf_bertscratch.run_folder`), a time budget, and the
    defaults a GPU machine wants (`device_defaults`): mixed precision and batch-loading workers."""

    _argument_group_name = "training"  # its flags' heading in --help

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}.")
        gpus = 0 if self.use_cpu or not torch.cuda.is_available() else torch.cuda.device_count()
        chosen = device_defaults(gpus, gpus > 0 and torch.cuda.is_bf16_supported(), _cores(), self.precision)
        if not (self.bf16 or self.fp16):
            self.bf16, self.fp16 = chosen["bf16"], chosen["fp16"]
        if self.dataloader_num_workers is None:
            self.dataloader_num_workers = chosen["dataloader_num_workers"]
        super().__post_init__()

    num_processes: str = field(
        default="auto",
        metadata={
            "help": "Data-parallel processes this command launches itself (torchrun) when it is not already "
            "running under torchrun/accelerate: a number, or auto = one per GPU (NCCL) on a GPU machine, 2 on a "
            "CPU-only machine with 2 or more cores (gloo; one torch thread per process trains a small BERT faster "
            "there than one process with all the threads), else 1. Each process trains on its own "
            "per_device_train_batch_size share."
        },
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "auto (bf16 autocast on a GPU that supports it, fp32 elsewhere), fp32, bf16 or fp16. --bf16 or "
            "--fp16, if given, decide."
        },
    )
    dataloader_num_workers: int | None = field(
        default=None,
        metadata={"help": "Batch-loading worker processes; default: 4 per GPU at most (cores allowing), 0 on a CPU."},
    )
    max_train_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Train for this many minutes of training time (evaluation and saving not counted; a resumed "
            f"run counts the time already spent), then evaluate and save. Default: {DEFAULT_BUDGET_MINUTES:g} "
            "when neither --max_steps nor --num_train_epochs is given; 0 turns the budget off. The "
            "learning-rate schedule is laid over the budget: --warmup_steps is then a fraction of it and "
            "--lr_scheduler_type one of linear, cosine, constant_with_warmup, warmup_stable_decay. --max_steps, "
            "if given with a budget, still caps the steps."
        },
    )
    num_train_epochs: float | None = field(
        default=None, metadata={"help": "Epochs to train when neither a time budget nor --max_steps ends the run."}
    )
    # The small-budget recipe (README, "Pretraining recipe"): measured by lab/sweep_pretraining.py.
    per_device_train_batch_size: int = field(
        default=16, metadata={"help": "Blocks per process per step (16 x 2 processes: more steps in the budget)."}
    )
    learning_rate: float = field(default=3e-3, metadata={"help": "Peak AdamW learning rate."})
    adam_beta2: float = field(default=0.98, metadata={"help": "AdamW beta2 (0.98 as RoBERTa, steadier at high rates)."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    warmup_steps: float = field(
        default=0.1, metadata={"help": "Linear warm-up: steps, or with a time budget a fraction of it (below 1)."}
    )
    lr_scheduler_type: str = field(
        default="warmup_stable_decay",
        metadata={
            "help": "Learning-rate schedule after warm-up (warmup_stable_decay: hold the peak, decay at the end)."
        },
    )
    logging_steps: float = field(default=50, metadata={"help": "Log the training loss every N steps."})


def parse_args(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, PretrainingArguments]:
    """Parse command-line arguments, or a single .json file of them, into the three argument dataclasses."""
    parser = ArgumentParser(
        (ModelArguments, DataArguments, PretrainingArguments),
        description="Pretrain a BertScratch model on raw text (masked language modelling, optionally with NSP).",
    )
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        # torchrun/accelerate launch without GPUs: TrainingArguments only builds the CPU (gloo) process group
        # when told to use the CPU, and otherwise trains each process alone. Must be set before parsing.
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    return parse_args_or_json(parser, argv)


def validate_args(model_args: ModelArguments, data_args: DataArguments, training_args: PretrainingArguments) -> None:
    """Reject bad arguments before anything is loaded or written, naming the bad value and what was expected."""
    if model_args.objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {model_args.objective!r}.")
    if model_args.mlm_start_fraction is None:
        new_electra = model_args.objective == "electra" and model_args.model_name_or_path is None
        model_args.mlm_start_fraction = SHORT_SEQ_FRACTION if new_electra else 0.0
    check_electra_arguments(
        model_args.generator_width_fraction, model_args.discriminator_weight, model_args.mlm_start_fraction
    )
    if model_args.mlm_start_fraction > 0 and model_args.objective != "electra":
        raise ValueError(
            f"mlm_start_fraction is for objective 'electra' (a masked-LM start of its discriminator), got objective "
            f"{model_args.objective!r} with mlm_start_fraction={model_args.mlm_start_fraction}."
        )
    if (
        model_args.config_name is None
        and model_args.model_name_or_path is None
        and model_args.model_size not in PRESETS
    ):
        raise ValueError(f"model_size must be one of {sorted(PRESETS)}, got {model_args.model_size!r}.")
    if not 0.0 <= model_args.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {model_args.dropout}.")
    if model_args.sinusoidal_position_std < 0:
        raise ValueError(
            f"sinusoidal_position_std must be >= 0 (0 turns it off), got {model_args.sinusoidal_position_std}."
        )
    check_task_text(data_args)
    if not data_args.dataset_name and not data_args.train_file:
        data_args.dataset_name, data_args.dataset_config_name = DEFAULT_PRETRAINING_DATASET
    for name in (
        "mlm_probability",
        "eval_mlm_probability",
        "mask_replace_prob",
        "random_replace_prob",
        "nsp_random_probability",
    ):
        value = getattr(data_args, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}.")
    for name in ("mlm_probability", "eval_mlm_probability"):
        if not 0.0 < getattr(data_args, name):
            raise ValueError(f"{name} must be positive, got {getattr(data_args, name)}.")
    if data_args.mask_replace_prob + data_args.random_replace_prob > 1.0:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must not exceed 1, got {data_args.mask_replace_prob} + "
            f"{data_args.random_replace_prob}."
        )
    if data_args.whole_word_mask and model_args.objective not in PACKED_OBJECTIVES:
        raise ValueError(
            f"whole_word_mask works with objectives {PACKED_OBJECTIVES} only, got objective {model_args.objective!r}."
        )
    if data_args.max_seq_length < 8:
        raise ValueError(f"max_seq_length must be at least 8, got {data_args.max_seq_length}.")
    if data_args.short_seq_fraction is None:
        usual = model_args.objective in PACKED_OBJECTIVES and data_args.max_seq_length % 4 == 0
        data_args.short_seq_fraction = SHORT_SEQ_FRACTION if usual else 0.0
    if not 0.0 <= data_args.short_seq_fraction < 1.0:
        raise ValueError(f"short_seq_fraction must be in [0, 1), got {data_args.short_seq_fraction}.")
    if data_args.short_seq_length is None:
        data_args.short_seq_length = max(1, data_args.max_seq_length // 4)
    if data_args.short_seq_fraction > 0:
        if (
            not 0 < data_args.short_seq_length <= data_args.max_seq_length
            or data_args.max_seq_length % data_args.short_seq_length
        ):
            raise ValueError(
                f"short_seq_length must divide max_seq_length={data_args.max_seq_length}, got "
                f"{data_args.short_seq_length} (or turn the short start off with --short_seq_fraction 0)."
            )
        if model_args.objective not in PACKED_OBJECTIVES:
            raise ValueError(
                "The short-block start works with objective 'mlm' only (or 'electra', also on packed blocks: cutting "
                f"would split NSP's sentence pairs), got objective {model_args.objective!r}; add --short_seq_fraction 0."
            )
    check_max_samples(data_args)
    if not 0 < data_args.validation_split_percentage < 100:
        raise ValueError(
            f"validation_split_percentage must be in (0, 100), got {data_args.validation_split_percentage}."
        )
    if (
        training_args.max_train_minutes is None
        and training_args.max_steps <= 0
        and training_args.num_train_epochs is None
    ):
        training_args.max_train_minutes = DEFAULT_BUDGET_MINUTES
    if training_args.num_train_epochs is None:
        training_args.num_train_epochs = 3.0  # TrainingArguments' default; unused when max_steps ends the run
    if training_args.max_train_minutes == 0:
        training_args.max_train_minutes = None
    if training_args.max_train_minutes is not None:
        if not training_args.max_train_minutes > 0:
            raise ValueError(f"max_train_minutes must be positive, got {training_args.max_train_minutes}.")
        budget_lr_lambda(str(training_args.lr_scheduler_type.value), training_args.warmup_steps)  # validates both
        if training_args.max_steps <= 0:
            training_args.max_steps = BUDGET_STEP_CAP  # the budget stops the run; the Trainer needs a step count
    if data_args.streaming and training_args.max_steps <= 0:
        raise ValueError(
            "--streaming needs --max_steps > 0 or --max_train_minutes: a streamed dataset has no length "
            "to count epochs by."
        )
    check_output_dir(training_args)
    check_training_push(training_args)  # a bad --hub_model_id or a missing token fails now, not after training
    if training_args.ddp_find_unused_parameters is None:
        # Every parameter gets a gradient in both objectives; DDP's unused-parameter search is wasted work.
        training_args.ddp_find_unused_parameters = False


def check_resumed_pair(checkpoint: str | None, model_args: ModelArguments) -> None:
    """Refuse to resume an ELECTRA checkpoint whose masked-LM start head (`start_mlm`) this run would not build, or
    lacks the head this run would: the Trainer reloads a plain module's state dict without strict key checks, so the
    run would go on silently with a new head or without its start."""
    weights = Path(checkpoint or "") / "model.safetensors"
    if model_args.objective != "electra" or checkpoint is None or not weights.is_file():
        return
    with safe_open(weights, framework="pt") as saved:
        has_start = any(name.startswith("start_mlm.") for name in saved.keys())
    if has_start != bool(model_args.mlm_start_fraction):
        raise ValueError(
            f"{checkpoint} was saved by a run {'with' if has_start else 'without'} a masked-LM start "
            f"(--mlm_start_fraction), and this run has mlm_start_fraction={model_args.mlm_start_fraction:g}: resume "
            f"with the --mlm_start_fraction the run started with ({'above 0' if has_start else '0'})."
        )


def check_task_text(data_args: DataArguments) -> None:
    """Refuse a `--task_text` that names no task of the table, names one twice or comes with another source of text;
    then record the tasks' dataset as the run's (`dataset_name`, `dataset_config_name`, which the model card names
    and cites; several tasks of one dataset, as GLUE's, give their configs joined with commas)."""
    names = data_args.task_text
    if not names:
        return
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        raise ValueError(f"Unknown --task_text {', '.join(map(repr, unknown))}; expected some of {list(TASKS)}.")
    if len(set(names)) < len(names):
        raise ValueError(f"--task_text names a task twice: {' '.join(names)}; give each task once.")
    other_sources = ("train_file", "validation_file", "dataset_name", "dataset_config_name", "streaming")
    given = [f"--{flag}" for flag in other_sources if getattr(data_args, flag)]
    if data_args.text_column != "text":  # the task table names the text columns
        given.append("--text_column")
    if given:
        raise ValueError(
            f"--task_text {' '.join(names)} trains on the tasks' own train splits (and evaluates on their eval "
            f"splits); it cannot be combined with {', '.join(given)}. Drop those, or drop --task_text."
        )
    datasets_ = task_text_datasets(data_args)
    configs = [TASKS[name].dataset_config_name for name in names if TASKS[name].dataset_config_name]
    data_args.dataset_name = datasets_[0] if len(datasets_) == 1 else ", ".join(datasets_)
    data_args.dataset_config_name = ", ".join(configs) or None


def task_text_datasets(data_args: DataArguments) -> list[str]:
    """The Hub dataset ids of the `--task_text` tasks, each once, in order (the model card's `datasets`)."""
    return list(dict.fromkeys(TASKS[name].dataset_name for name in data_args.task_text or ()))


# ----------------------------------------------------------------------------------------------- data stages


def load_task_text_splits(
    data_args: DataArguments, documents: bool = False
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """`--task_text`: the texts of the tasks' train splits to train on, and of their eval splits for the held-out
    MLM loss, without labels (`tasks.task_texts`), as one-column datasets, task after task; the splits are loaded and
    checked as fine-tuning loads them (`finetuning.load_task_datasets`). With `documents` (next-sentence
    prediction), an empty text ends each example, so each example is a document of its own. `--max_eval_samples N`
    keeps each of the k tasks' first N/k held-out texts (`_first_texts`), so every task is scored, not the first
    task alone."""
    from .finetuning import DataArguments as TaskDataArguments
    from .finetuning import check_data_arguments, load_task_datasets

    texts: dict[str, list[str]] = {"train": [], "eval": []}
    for name in data_args.task_text:
        task_args = TaskDataArguments(task=name, data_dir=data_args.data_dir)
        task = check_data_arguments(task_args)
        raw = load_task_datasets(task_args, task)
        train, held_out = (task_texts(task, raw[role], documents) for role in texts)
        if data_args.max_eval_samples is not None:
            share = max(1, data_args.max_eval_samples // len(data_args.task_text))
            held_out = _first_texts(held_out, share, documents)
        texts["train"] += train
        texts["eval"] += held_out
        logger.info(
            "Task text of %s: %d texts from its %r split to train on, %d from its %r split held out",
            name,
            len(train),
            task.train_split,
            len(held_out),
            task.eval_split,
        )
    train, validation = (datasets.Dataset.from_dict({data_args.text_column: texts[role]}) for role in texts)
    return train, validation


def _first_texts(texts: list[str], count: int, documents: bool) -> list[str]:
    """The first `count` of one task's texts. With `documents`, cut back to the end of the last whole document (its
    empty text), so that a cut document does not run into the next task's first one; a first document longer than
    `count` is kept whole."""
    kept = texts[:count]
    if documents and len(kept) < len(texts):
        while kept and kept[-1]:
            kept.pop()
        if not kept:
            kept = texts[: texts.index("") + 1]
    return kept


def load_text_splits(
    data_args: DataArguments, seed: int, documents: bool = False
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | datasets.IterableDataset]:
    """The raw train and validation splits; validation is carved off the end of train when there is none. With
    `--task_text`, a task's train and eval texts (`load_task_text_splits`, each example a document when
    `documents`)."""
    if data_args.task_text:
        return load_task_text_splits(data_args, documents)
    raw = load_raw_datasets(
        data_args.dataset_name,
        data_args.dataset_config_name,
        train_file=data_args.train_file,
        validation_file=data_args.validation_file,
        data_dir=data_args.data_dir,
        streaming=data_args.streaming,
    )
    if "train" not in raw:
        raise ValueError(f"The data has no train split; splits found: {sorted(raw)}.")
    train = raw["train"]
    columns = train.column_names if train.column_names is not None else list(next(iter(train)).keys())
    if data_args.text_column not in columns:
        raise ValueError(f"text_column={data_args.text_column!r} is not a column of the data; columns: {columns}.")
    validation = raw.get("validation")
    if validation is None and data_args.streaming:
        held_out = data_args.max_eval_samples or 1000
        train, validation = train.skip(held_out), train.take(held_out)
    elif validation is None:
        # The last rows, not a random sample: keeps documents contiguous for packing and NSP.
        split = train.train_test_split(test_size=data_args.validation_split_percentage / 100, shuffle=False)
        train, validation = split["train"], split["test"]
    if data_args.max_eval_samples is not None and not data_args.streaming:
        validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
    if data_args.streaming:
        train = train.shuffle(seed=seed, buffer_size=data_args.shuffle_buffer_size)
    return train, validation


def build_tokenizer(
    model_args: ModelArguments,
    train: datasets.Dataset | datasets.IterableDataset,
    text_column: str,
    checkpoint: str | None,
    training_args: TrainingArguments,
) -> PreTrainedTokenizerBase:
    """The given tokenizer, the one saved in the checkpoint being resumed, or a WordPiece trained on `train`.

    Under torchrun/accelerate only the first process trains the tokenizer and sends it to the others, so every rank
    tokenises with the same ids even where training ties could be broken differently.
    """
    if model_args.tokenizer_name:
        return load_tokenizer(model_args.tokenizer_name)
    for source in (checkpoint, model_args.model_name_or_path):
        if source:
            return load_tokenizer(source)
    tokenizer = None
    if training_args.process_index == 0:
        logger.info("Training a %d-token WordPiece tokenizer on the training text", model_args.tokenizer_vocab_size)
        texts = (
            (row[text_column] for row in train.take(model_args.tokenizer_train_samples))
            if isinstance(train, datasets.IterableDataset)
            else train.select(range(min(len(train), model_args.tokenizer_train_samples)))[text_column]
        )
        tokenizer = train_wordpiece_tokenizer(texts, model_args.tokenizer_vocab_size)
    if training_args.world_size > 1:
        shared = [tokenizer]
        torch.distributed.broadcast_object_list(shared, src=0)
        tokenizer = shared[0]
    return tokenizer


def make_pack_function(
    tokenizer: PreTrainedTokenizerBase, text_column: str, max_seq_length: int, with_offsets: bool
) -> Any:
    """A batched `datasets.map` function: tokenise texts, concatenate them, cut `[CLS] block [SEP]` examples.

    Every example is exactly `max_seq_length` tokens (the batch's remainder is dropped), so no compute is spent on
    padding. With `with_offsets`, character offsets travel along for whole-word masking: a token that does not
    start where the previous one ended begins a new word (offsets restart at each text, so texts never merge).
    """
    block = max_seq_length - 2

    def pack(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(
            batch[text_column],
            add_special_tokens=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            return_offsets_mapping=with_offsets,
            verbose=False,
        )
        ids = [t for seq in encoded["input_ids"] for t in seq]
        n_blocks = len(ids) // block
        out: dict[str, list] = {
            "input_ids": [
                [tokenizer.cls_token_id, *ids[i * block : (i + 1) * block], tokenizer.sep_token_id]
                for i in range(n_blocks)
            ],
            "special_tokens_mask": [[1] + [0] * block + [1]] * n_blocks,
        }
        if with_offsets:
            offsets = [tuple(o) for seq in encoded["offset_mapping"] for o in seq]
            out["offset_mapping"] = [[(0, 0), *offsets[i * block : (i + 1) * block], (0, 0)] for i in range(n_blocks)]
        return out

    return pack


def tokenize_splits(
    splits: dict[str, datasets.Dataset | datasets.IterableDataset],
    tokenizer: PreTrainedTokenizerBase,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: PretrainingArguments,
) -> dict[str, datasets.Dataset | datasets.IterableDataset]:
    """Tokenise each split with a batched (multiprocess, cached) `datasets.map`: packed MLM blocks or NSP pairs; then
    draw `--max_train_samples` of the training examples (`data.sample_examples`)."""
    if model_args.objective == "mlm_nsp":
        function = make_nsp_pairs_function(
            tokenizer,
            data_args.text_column,
            data_args.max_seq_length,
            data_args.nsp_random_probability,
            training_args.seed,
        )
        map_kwargs: dict[str, Any] = {"with_indices": True}
    else:
        function = make_pack_function(
            tokenizer, data_args.text_column, data_args.max_seq_length, data_args.whole_word_mask
        )
        map_kwargs = {}
    result = {}
    for name, split in splits.items():
        columns = split.column_names if split.column_names is not None else [data_args.text_column]
        if not data_args.streaming:
            map_kwargs.update(
                num_proc=data_args.preprocessing_num_workers,
                load_from_cache_file=not data_args.overwrite_cache,
                desc=f"Tokenizing and packing {name}",
            )
        # Only the main process tokenises; the others then read datasets' cache instead of redoing the work.
        with training_args.main_process_first(desc=f"tokenize {name}"):
            result[name] = split.map(function, batched=True, remove_columns=columns, **map_kwargs)
        _check_not_empty(name, result[name], data_args)
        if model_args.objective == "mlm_nsp" and isinstance(result[name], datasets.Dataset):
            not_next = sum(result[name]["next_sentence_label"])
            logger.info(
                "NSP pairs of %s: %d IsNext, %d NotNext (a one-sentence document has no next sentence: NotNext only)",
                name,
                len(result[name]) - not_next,
                not_next,
            )
    result["train"] = sample_examples(result["train"], data_args.max_train_samples, training_args.seed)
    return result


def _check_not_empty(name: str, split: datasets.Dataset | datasets.IterableDataset, data_args: DataArguments) -> None:
    empty = next(iter(split), None) is None if isinstance(split, datasets.IterableDataset) else len(split) == 0
    if empty:
        raise ValueError(
            f"The {name} split yields no example of max_seq_length={data_args.max_seq_length} tokens after "
            "tokenisation (its texts are empty or too short); give more text or a smaller --max_seq_length."
        )


# ---------------------------------------------------------------------------------------------- model stage


def build_model(
    model_args: ModelArguments, data_args: DataArguments, tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel | ElectraPretrainingModel:
    """A new model from a preset or config, or given weights; checked against the tokenizer and sequence length.

    With objective electra, the generator-discriminator pair around that model as the discriminator (given weights
    start the discriminator; the generator starts new, its projection being stored in no generator folder).
    """
    path = model_args.model_name_or_path
    config = None if path else new_model_config(model_args, tokenizer)
    if model_args.objective == "electra":
        discriminator_class = BertScratchForReplacedTokenDetection
        model = discriminator_class.from_pretrained(path) if path else discriminator_class(config)
    else:
        auto_class = AutoModelForPreTraining if model_args.objective == "mlm_nsp" else AutoModelForMaskedLM
        model = auto_class.from_pretrained(path) if path else auto_class.from_config(config)
    check_model_fits(model.config, data_args, tokenizer)
    if model_args.objective == "electra":
        return ElectraPretrainingModel(
            model,
            model_args.generator_width_fraction,
            model_args.discriminator_weight,
            mlm_start=bool(model_args.mlm_start_fraction),
        )
    return model


def new_model_config(model_args: ModelArguments, tokenizer: PreTrainedTokenizerBase) -> BertScratchConfig:
    """The config of a new model: `--config_name`, or the `--model_size` preset with this run's dropout, positions
    and position init; its vocabulary and [PAD] are the tokenizer's. (Shared with the JAX entry point.)"""
    if model_args.config_name:
        config = AutoConfig.from_pretrained(model_args.config_name)
    else:
        config = BertScratchConfig(
            **PRESETS[model_args.model_size],
            hidden_dropout_prob=model_args.dropout,
            attention_probs_dropout_prob=model_args.dropout,
            max_position_embeddings=model_args.max_position_embeddings,
            sinusoidal_position_std=model_args.sinusoidal_position_std or None,
        )
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    return config


def check_model_fits(config: BertScratchConfig, data_args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a model whose positions or vocabulary are too small for the data, naming both numbers."""
    if data_args.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length={data_args.max_seq_length} exceeds the model's max_position_embeddings="
            f"{config.max_position_embeddings}; use --max_seq_length {config.max_position_embeddings} or less."
        )
    if len(tokenizer) > config.vocab_size:
        raise ValueError(
            f"The tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}."
        )


# -------------------------------------------------------------------------------------------- metric stage


def preprocess_logits_for_metrics(logits: torch.Tensor | tuple, labels: torch.Tensor | tuple) -> torch.Tensor:
    """Reduce eval logits to what the metrics need, so (B, T, V) never accumulates across batches.

    Returns (B, T, 2) float: [..., 0] the argmax token, [..., 1] the token's cross-entropy (0 where unlabelled),
    and for NSP (B, 1+T, 2) with the sentence-relation argmax prepended at position 0 (the Trainer right-pads
    batches of different T, so position 0 is the only one that stays put).
    """
    mlm_logits = logits[0] if isinstance(logits, tuple) else logits  # (B, T, V): eval decodes densely
    mlm_labels = labels[0] if isinstance(labels, tuple) else labels  # (B, T)
    token_loss = torch.nn.functional.cross_entropy(
        mlm_logits.float().transpose(1, 2), mlm_labels.clamp(min=0), reduction="none"
    ) * (mlm_labels != -100)
    reduced = torch.stack([mlm_logits.argmax(-1).float(), token_loss], dim=-1)
    if isinstance(logits, tuple) and len(logits) > 1 and logits[1].dim() == 2:
        nsp = torch.stack([logits[1].argmax(-1).float(), torch.zeros_like(logits[1][:, 0])], dim=-1)  # (B, 2)
        reduced = torch.cat([nsp[:, None, :], reduced], dim=1)
    return reduced


def compute_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
    """Masked-token accuracy (`accuracy`), token-weighted MLM loss and its perplexity, and NSP accuracy if any."""
    reduced, labels = eval_pred.predictions, eval_pred.label_ids
    mlm_labels = labels[0] if isinstance(labels, tuple) else labels
    metrics = {}
    if isinstance(labels, tuple):
        nsp_labels = labels[1]
        metrics["nsp_accuracy"] = float((reduced[:, 0, 0] == nsp_labels).mean())
        reduced = reduced[:, 1:]
    scored = mlm_labels != -100
    n_scored = max(int(scored.sum()), 1)
    metrics["accuracy"] = float((reduced[..., 0][scored] == mlm_labels[scored]).sum() / n_scored)
    metrics["mlm_loss"] = float(reduced[..., 1][scored].sum() / n_scored)
    metrics["perplexity"] = math.exp(min(metrics["mlm_loss"], 50.0))
    return metrics


def preprocess_electra_logits_for_metrics(logits: tuple[torch.Tensor, ...], labels: torch.Tensor) -> torch.Tensor:
    """ELECTRA's evaluation outputs reduced per batch to (B, T, 5): the generator's argmax and token loss (as
    `preprocess_logits_for_metrics`), then the discriminator's prediction, token loss and replaced label."""
    generator_logits, discriminator_logits, replaced = logits[:3]
    generator = preprocess_logits_for_metrics(generator_logits, labels)
    return torch.cat([generator, replaced_token_reductions(discriminator_logits, replaced)], dim=-1)


def compute_electra_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
    """The generator's masked-token accuracy, MLM loss and perplexity (as `compute_metrics`), and the discriminator's
    accuracy and loss over every real token, with the fraction of them replaced."""
    reduced = eval_pred.predictions
    metrics = compute_metrics(EvalPrediction(predictions=reduced[..., :2], label_ids=eval_pred.label_ids))
    metrics.update(replaced_token_metrics(reduced[..., 2:]))
    return metrics


# objective -> (preprocess_logits_for_metrics, compute_metrics) of its evaluation; masked-LM's for the others.
OBJECTIVE_METRICS = {"electra": (preprocess_electra_logits_for_metrics, compute_electra_metrics)}


# ------------------------------------------------------------------------------------------ masking stage


@dataclass
class SeededMaskingCollator(DataCollatorForLanguageModeling):
    """`DataCollatorForLanguageModeling` whose masks depend only on (seed, epoch, the batch's tokens).

    The stock collator draws masks from the global RNG inside the dataloader, which accelerate runs one batch ahead
    of the training step; a checkpoint then saves an RNG state that already consumed the next batch's masks, and a
    resumed run masks differently from an uninterrupted one. Seeding each batch from its own content makes masking
    reproducible across resume, dataloader workers and ranks (each rank's batches differ, so do its masks), and
    the epoch keeps masks dynamic: a block seen again in a later epoch is masked afresh, as in RoBERTa.
    """

    epoch: int = 0
    _batch_seed: int = field(default=0, init=False, repr=False)

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        digest = hashlib.blake2b(digest_size=8)
        digest.update(f"{self.seed}/{self.epoch}".encode())
        for example in examples:
            digest.update(np.asarray(example["input_ids"], dtype=np.int64).tobytes() + b"|")
        self._batch_seed = int.from_bytes(digest.digest(), "little") >> 1
        # With no generator, the stock torch_call asks create_rng for one (every transformers 5.x does), and ours
        # returns the batch's. Setting self.generator here instead is not enough: transformers 5.24 replaces a
        # generator whose creating process it did not record (`_generator_pid`, new in 5.24's data_collator.py) with
        # one seeded from `seed` alone, which made masks depend on the batches drawn before and broke exact resume.
        self.generator = None
        return super().torch_call(examples)

    def create_rng(self, *args: Any, **kwargs: Any) -> None:
        """The generator of the batch being collated (see `torch_call`)."""
        self.generator = torch.Generator().manual_seed(self._batch_seed)
        self._generator_pid = os.getpid()  # transformers >= 5.24 checks it; earlier versions ignore it


def masking_collators(
    tokenizer: PreTrainedTokenizerBase, data_args: DataArguments, seed: int
) -> tuple[SeededMaskingCollator, SeededMaskingCollator]:
    """The training and evaluation collators of a run: the same masking, at the training and the evaluation rate."""
    return tuple(
        SeededMaskingCollator(
            tokenizer,
            mlm_probability=probability,
            whole_word_mask=data_args.whole_word_mask,
            mask_replace_prob=data_args.mask_replace_prob,
            random_replace_prob=data_args.random_replace_prob,
            seed=seed,
        )
        for probability in (data_args.mlm_probability, data_args.eval_mlm_probability)
    )


class MaskingEpochCallback(TrainerCallback):
    """Tells the collator which epoch is starting (also right after a resume, mid-epoch)."""

    def __init__(self, collator: SeededMaskingCollator) -> None:
        self.collator = collator

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.collator.epoch = int(math.floor(state.epoch or 0.0))


# --------------------------------------------------------------------------------------------- main stages


def cut_blocks(inputs: dict[str, Any], length: int) -> dict[str, Any]:
    """A packed (B, T) MLM batch as (B * T / length, length): the same tokens, masks and labels in shorter blocks.

    Each short block gets positions 0..length-1 and attends only within itself; only the first of a row keeps the
    row's [CLS] and only the last its [SEP], which MLM does not need.
    """
    rows, seq_len = inputs["input_ids"].shape
    if seq_len % length:
        raise ValueError(f"Cannot cut blocks of {seq_len} tokens into blocks of {length}.")
    return {
        key: value.reshape(rows * seq_len // length, length)
        if isinstance(value, torch.Tensor) and value.shape == (rows, seq_len)
        else value
        for key, value in inputs.items()
    }


# Dataset columns the masking collator reads and pops (`DataCollatorForLanguageModeling.torch_call`): whole-word
# masking finds words from the character offsets. The Trainer must pass them to the collator although the model's
# forward does not take them; they never reach the forward.
COLLATOR_COLUMNS = ("offset_mapping",)


class PretrainingTrainer(Trainer):
    """`Trainer` whose learning-rate schedule follows the time budget when there is one (`hf_bertscratch.budget`),
    which trains on blocks cut to `short_seq_length` for the first `short_seq_fraction` of the run (and an ELECTRA
    pair in its masked-LM phase for the first `mlm_start_fraction`), and which keeps
    the columns its masking collator reads (`COLLATOR_COLUMNS`) when it drops those the model does not take."""

    def __init__(
        self,
        *args: Any,
        eval_collator: SeededMaskingCollator | None = None,
        budget: TrainingBudget | None = None,
        short_seq_length: int = 0,
        short_seq_fraction: float = 0.0,
        mlm_start_fraction: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.eval_collator = eval_collator
        self.budget = budget
        self.short_seq_length, self.short_seq_fraction = short_seq_length, short_seq_fraction
        self.mlm_start_fraction = mlm_start_fraction
        if budget is not None:
            budget.attach(self)

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            super()._set_signature_columns_if_needed()
            self._signature_columns += [name for name in COLLATOR_COLUMNS if name not in self._signature_columns]

    def progress(self) -> float:
        """Fraction of the training done: of the time budget, or of the steps."""
        if self.budget is not None:
            return self.budget.fraction
        return self.state.global_step / self.state.max_steps if self.state.max_steps else 0.0

    def compute_loss(self, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if model.training and self.short_seq_fraction > 0 and self.progress() < self.short_seq_fraction:
            inputs = cut_blocks(inputs, self.short_seq_length)
        pair = self.accelerator.unwrap_model(model)
        if isinstance(pair, ElectraPretrainingModel):
            pair.masked_lm_phase = model.training and self.progress() < self.mlm_start_fraction
        return super().compute_loss(model, inputs, *args, **kwargs)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`, except for the finished run of an ELECTRA pair, written as two ordinary folders
        (`ElectraPretrainingModel.save_pretrained`). Checkpoints (`_internal_call`) hold the pair's state dict as
        Trainer saves any module, which resume reloads."""
        model = self.accelerator.unwrap_model(self.model)
        if _internal_call or not isinstance(model, ElectraPretrainingModel):
            super().save_model(output_dir, _internal_call)
        elif self.args.should_save:
            model.save_pretrained(output_dir or self.args.output_dir, self.processing_class)

    def get_eval_dataloader(self, eval_dataset: Any = None) -> torch.utils.data.DataLoader:
        """Evaluation batches are masked by `eval_collator` (the evaluation masking rate), training ones are not."""
        if self.eval_collator is None:
            return super().get_eval_dataloader(eval_dataset)
        train_collator, self.data_collator = self.data_collator, self.eval_collator
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.data_collator = train_collator

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> torch.optim.lr_scheduler.LRScheduler:
        if self.budget is None or self.lr_scheduler is not None:
            kwargs = self.args.lr_scheduler_kwargs or {}
            if self.args.lr_scheduler_type == SchedulerType.WARMUP_STABLE_DECAY and "num_decay_steps" not in kwargs:
                # The same shape as with a budget: the last WSD_DECAY_FRACTION of the steps decay linearly to 0.
                self.args.lr_scheduler_kwargs = {
                    "num_decay_steps": math.ceil(WSD_DECAY_FRACTION * num_training_steps),
                    "decay_type": "linear",
                    **kwargs,
                }
            return super().create_scheduler(num_training_steps, optimizer)
        factor = budget_lr_lambda(str(self.args.lr_scheduler_type.value), self.args.warmup_steps)
        budget = self.budget
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer or self.optimizer, lambda _step: factor(budget.fraction)
        )
        return self.lr_scheduler


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: PretrainingArguments,
    checkpoint: str | None = None,
) -> Trainer:
    """Every stage before training: data, tokenizer, tokenised splits, model, collator, and the Trainer."""
    set_seed(training_args.seed)
    documents = model_args.objective == "mlm_nsp"  # NSP pairs sentences within a document
    train_text, validation_text = load_text_splits(data_args, training_args.seed, documents)
    tokenizer = build_tokenizer(model_args, train_text, data_args.text_column, checkpoint, training_args)
    check_mask_token(tokenizer)  # before the (slow) tokenisation
    model = build_model(model_args, data_args, tokenizer)
    splits = tokenize_splits(
        {"train": train_text, "validation": validation_text}, tokenizer, model_args, data_args, training_args
    )
    # Set after tokenisation (texts are longer before packing): pipelines then truncate to what the model saw.
    tokenizer.model_max_length = data_args.max_seq_length
    collator, eval_collator = masking_collators(tokenizer, data_args, training_args.seed)
    budget = None
    if training_args.max_train_minutes is not None:
        budget = TrainingBudget.resumed(training_args.max_train_minutes, checkpoint)
    preprocess, metrics = OBJECTIVE_METRICS.get(model_args.objective, (preprocess_logits_for_metrics, compute_metrics))
    if training_args.include_num_input_tokens_seen == "no":
        # Count the tokens trained on, as the run's train_tokens: without padding, since NSP's pairs are often
        # shorter than max_seq_length (a flag rather than a default, which the argument parser reads as a bool).
        training_args.include_num_input_tokens_seen = "non_padding"
    return PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=splits["train"],
        eval_dataset=splits["validation"],
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=metrics,
        preprocess_logits_for_metrics=preprocess,
        callbacks=[MaskingEpochCallback(collator)],
        eval_collator=eval_collator,
        budget=budget,
        short_seq_length=data_args.short_seq_length,
        short_seq_fraction=data_args.short_seq_fraction,
        mlm_start_fraction=model_args.mlm_start_fraction or 0.0,
    )


def train_and_evaluate(trainer: Trainer, data_args: DataArguments, checkpoint: str | None) -> dict[str, float]:
    """Train (resuming from `checkpoint`), evaluate, and return train and eval metrics with throughput."""
    start = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    wall = time.perf_counter() - start
    args = trainer.args
    effective_batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    # The tokens the Trainer counted (build_trainer turns the count on) since the checkpoint this process resumed.
    counted = trainer.state.num_input_tokens_seen - _checkpoint_state(checkpoint).get("num_input_tokens_seen", 0)
    metrics = dict(train_result.metrics)
    metrics.update(
        train_wall_time_seconds=wall,
        train_effective_batch_size=effective_batch,
        max_seq_length=data_args.max_seq_length,
        world_size=args.world_size,
        train_tokens=counted,
    )
    metrics["train_tokens_per_second"] = metrics["train_tokens"] / wall if wall > 0 else 0.0
    budget = getattr(trainer, "budget", None)
    if budget is not None:
        metrics.update(train_budget_minutes=budget.minutes, train_budget_spent_minutes=budget.spent_seconds / 60)
    metrics.update(trainer.evaluate())
    metrics.update(unigram_metrics(trainer))
    return metrics


def unigram_metrics(trainer: Trainer) -> dict[str, float]:
    """The unigram plateau's scores on the evaluation blocks (`baselines.unigram_answer`): what the run's accuracy
    and perplexity are read against. Empty for a streamed evaluation set."""
    dataset = trainer.eval_dataset
    if dataset is None or not hasattr(dataset, "__len__") or "input_ids" not in dataset.column_names:
        return {}
    accuracy, perplexity, token = unigram_answer(dataset["input_ids"], trainer.processing_class.all_special_ids)
    return {"eval_unigram_accuracy": accuracy, "eval_unigram_perplexity": perplexity, "eval_unigram_token": token}


def summarise_run(
    metrics: dict[str, float],
    training_args: PretrainingArguments,
    model_args: ModelArguments,
    tokenizer: PreTrainedTokenizerBase,
) -> list[str]:
    """The lines that end a run: its scores beside the unigram answer's, and a hint when the model is still on the
    unigram plateau or when this machine trained far fewer tokens a second than the default recipe expects."""
    discriminator = metrics.get("eval_discriminator_accuracy")
    unigram = metrics.get("eval_unigram_accuracy")
    baseline = (
        ""
        if unigram is None
        else (
            f" (the unigram answer {tokenizer.convert_ids_to_tokens(int(metrics['eval_unigram_token']))!r} everywhere: "
            f"{unigram:.4f}, perplexity {metrics['eval_unigram_perplexity']:.0f})"
        )
    )
    lines = [
        f"eval_accuracy {metrics['eval_accuracy']:.4f}  perplexity {metrics['eval_perplexity']:.2f}{baseline}  "
        + (f"discriminator_accuracy {discriminator:.4f}  " if discriminator is not None else "")
        + f"train {metrics['train_wall_time_seconds']:.0f}s  {metrics['train_tokens']:,} tokens  "
        f"{metrics['train_tokens_per_second']:.0f} tokens/s  -> {training_args.output_dir}"
    ]
    if unigram is not None and metrics["eval_accuracy"] < unigram + PLATEAU_MARGIN:
        lines.append(
            "The model is still on the unigram plateau: it answers the commonest tokens whatever the context. A BERT "
            "leaves it once it learns to read the words beside each mask, after a few thousand steps: train longer "
            "(--max_train_minutes) or on a faster machine."
        )
    slowest = min(REFERENCE_TOKENS_PER_SECOND.values())
    usual = model_args.model_size == "tiny" and model_args.config_name is None and model_args.model_name_or_path is None
    if usual and metrics.get("train_budget_minutes") and metrics["train_tokens_per_second"] < 0.75 * slowest:
        measured = ", ".join(
            f"{speed / 1000:.1f}k on a {machine}" for machine, speed in REFERENCE_TOKENS_PER_SECOND.items()
        )
        lines.append(
            f"This machine trained {metrics['train_tokens_per_second'] / 1000:.1f}k tokens/s; the default recipe "
            f"was measured at {measured}. Fewer tokens in the same minutes give a weaker model: a slower CPU or "
            "other programs running are the likely cause (close them, or raise --max_train_minutes)."
        )
    return lines


def _checkpoint_state(checkpoint: str | None) -> dict:
    """The trainer state a run resumes from ({} for a fresh start): its step and tokens counted so far."""
    if checkpoint is None:
        return {}
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())


def save_outputs(
    trainer: Trainer, metrics: dict[str, float], model_args: ModelArguments, data_args: DataArguments
) -> None:
    """Write the model, tokenizer, trainer_state.json, all_results.json, loss curve and model card, through the
    finished-run protocol fine-tuning shares (`run_folder.finish_run`: staged, moved in with the card last)."""
    from .cards import write_model_card
    from .plotting import plot_training_curves

    def write_reports(staging: Path) -> None:
        if model_args.objective != "mlm_nsp" and model_args.model_name_or_path is None:
            # Nothing here trained segment 1 (one text per example), so its row is still random; a fine-tune on
            # pairs should start the second text where the first's was learnt.
            start_saved_segments_as_first(staging)
        (staging / "all_results.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        plot_training_curves(staging)  # titled with the output_dir's name, not the staging folder's
        kind = "discriminator" if model_args.objective == "electra" else "pretrained"
        write_model_card(staging, kind, _card_info(trainer, metrics, model_args, data_args))

    finish_run(trainer, write_reports)


def _output_model(trainer: Trainer) -> PreTrainedModel:
    """The model a finished run's folder holds: the Trainer's, or the discriminator of an ELECTRA pair."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    return model.discriminator if isinstance(model, ElectraPretrainingModel) else model


# The evaluation results a model card shows (the discriminator's only in an ELECTRA run).
_CARD_RESULTS = ("eval_loss", "eval_accuracy", "eval_perplexity", "eval_discriminator_accuracy")


def _position_start(config) -> str:
    """How the position embeddings started, in words for the model card."""
    if config.sinusoidal_position_std is None:
        return f"N(0, {config.initializer_range:g}) (BERT's init)"
    return f"sinusoid table scaled to std {config.sinusoidal_position_std:g}"


def _card_info(
    trainer: Trainer, metrics: dict[str, float], model_args: ModelArguments, data_args: DataArguments
) -> dict[str, Any]:
    from .hardware import describe_hardware

    args = trainer.args
    model = _output_model(trainer)
    hyperparameters = {
        "objective": model_args.objective,
        "max_seq_length": data_args.max_seq_length,
        "mlm_probability": data_args.mlm_probability,
        "whole_word_mask": data_args.whole_word_mask,
        "learning_rate": args.learning_rate,
        "effective_batch_size": metrics["train_effective_batch_size"],
        "max_steps": trainer.state.global_step,
        "warmup_steps": args.warmup_steps,
        "weight_decay": args.weight_decay,
        "seed": args.seed,
        "vocab_size": model.config.vocab_size,
        "position_embeddings_start": _position_start(model.config),
    }
    if model_args.objective == "electra":
        hyperparameters.update(
            generator_width_fraction=model_args.generator_width_fraction,
            discriminator_weight=model_args.discriminator_weight,
            mlm_start_fraction=model_args.mlm_start_fraction,
        )
    return {
        "model_name": Path(args.output_dir).resolve().name,
        "datasets": task_text_datasets(data_args) or ([data_args.dataset_name] if data_args.dataset_name else []),
        # several --task_text tasks of one dataset have no one config (their names, joined, describe the data)
        "dataset_config": None if len(data_args.task_text or ()) > 1 else data_args.dataset_config_name,
        "dataset_description": _describe_data(trainer, model_args, data_args),
        "model_size": None if model_args.config_name or model_args.model_name_or_path else model_args.model_size,
        "base_model": model_args.model_name_or_path,
        "task_text": data_args.task_text,
        "num_parameters": model.num_parameters(),
        "hyperparameters": hyperparameters,
        "hardware": describe_hardware(),
        "wall_time_seconds": metrics["train_wall_time_seconds"],
        "train_tokens": metrics["train_tokens"],
        "results": {k: metrics[k] for k in _CARD_RESULTS if k in metrics},
    }


def _describe_data(trainer: Trainer, model_args: ModelArguments, data_args: DataArguments) -> str:
    """One sentence on what the model saw: source, example shape, and split sizes where known."""
    source = data_args.train_file or " / ".join(filter(None, [data_args.dataset_name, data_args.dataset_config_name]))
    shape = (
        "sentence pairs for MLM + next-sentence prediction"
        if model_args.objective == "mlm_nsp"
        else f"texts concatenated and packed into {data_args.max_seq_length}-token blocks"
    )
    sizes = ""
    if not data_args.streaming:
        sizes = f" ({len(trainer.train_dataset):,} training and {len(trainer.eval_dataset):,} validation examples)"
    return f"Raw text from `{source}`, {shape}{sizes}."


def show_fill_mask(model_dir: str | Path, top_k: int = 3) -> list[str]:
    """Print the top-k fill-mask predictions of the saved model on a few example sentences; returns the lines.

    Loads the folder as a user would (`pipeline("fill-mask", model=model_dir)`), so it also checks the output.
    """
    from .inference import fill_mask, load_pipeline

    fill = load_pipeline("fill-mask", model_dir)
    lines = []
    for template in FILL_MASK_EXAMPLES:
        text = template.format(mask=fill.tokenizer.mask_token)
        (guesses,) = fill_mask(fill, text, top_k=top_k)
        lines.append(f"{text}  ->  " + ", ".join(f"{g['token_str']} ({g['score']:.2f})" for g in guesses))
    print("Fill-mask predictions:\n  " + "\n  ".join(lines))
    return lines


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def device_defaults(gpus: int, bf16_supported: bool, cores: int, precision: str = "auto") -> dict[str, Any]:
    """What `--num_processes auto`, `--precision` and the batch-loading workers come to on a machine with `gpus`
    CUDA devices (0: CPU only) and `cores` CPU cores: one process per GPU with bf16 autocast where the GPU has it,
    and up to 4 loading workers each; on a CPU, 2 processes when there are 2 cores, fp32, loading in the process."""
    bf16 = precision == "bf16" or (precision == "auto" and gpus > 0 and bf16_supported)
    return {
        "processes": gpus if gpus > 0 else (2 if cores >= 2 else 1),
        "bf16": bf16,
        "fp16": precision == "fp16",
        "dataloader_num_workers": min(4, max(0, cores // gpus - 1)) if gpus > 0 else 0,
    }


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def describe_device_choice(training_args: PretrainingArguments, processes: int) -> str:
    """One line on where and how the run trains, as chosen (`device_defaults`) or given."""
    gpus = 0 if training_args.use_cpu or not torch.cuda.is_available() else torch.cuda.device_count()
    where = f"{gpus} CUDA GPU(s) ({torch.cuda.get_device_name(0)})" if gpus else f"the CPU ({_cores()} cores)"
    precision = "bf16 autocast" if training_args.bf16 else "fp16 autocast" if training_args.fp16 else "fp32"
    pinned = ", pinned memory" if training_args.dataloader_pin_memory else ""
    return (
        f"Training on {where}: {processes} process(es), {precision}, "
        f"{training_args.dataloader_num_workers} loading worker(s) per process{pinned}."
    )


def resolve_num_processes(training_args: PretrainingArguments) -> int:
    """How many processes this command should launch: 1 when already launched (torchrun/accelerate) or asked."""
    if "WORLD_SIZE" in os.environ:
        return 1
    value = str(training_args.num_processes).strip().lower()
    if value == "auto":
        gpus = 0 if training_args.use_cpu or not torch.cuda.is_available() else torch.cuda.device_count()
        return device_defaults(gpus, False, _cores())["processes"]
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"num_processes must be a positive integer or 'auto', got {training_args.num_processes!r}.")
    return int(value)


def launch_processes(argv: list[str], processes: int) -> None:
    """Run this same command under `torch.distributed.run` with `processes` processes, splitting the CPU threads."""
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, _cores() // processes))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={processes}",
        "-m",
        __name__ if __name__ != "__main__" else "hf_bertscratch.pretraining",
        *argv,
    ]
    logger.info("Launching %d processes with %s torch thread(s) each: %s", processes, threads, " ".join(command))
    done = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": threads}, check=False)
    if done.returncode != 0:
        raise SystemExit(done.returncode)


def main(argv: list[str] | None = None) -> None:
    """Pretrain a BertScratch model on raw text and save a fill-mask-ready model folder (see --help)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    model_args, data_args, training_args = parse_args(argv)
    validate_args(model_args, data_args, training_args)
    processes = resolve_num_processes(training_args)
    if "WORLD_SIZE" not in os.environ:
        print(describe_device_choice(training_args, processes))
    if processes > 1:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logger.setLevel(logging.INFO)
        launch_processes(argv, processes)
        return
    checkpoint = resolve_checkpoint(training_args)
    check_resumed_pair(checkpoint, model_args)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger(__package__).setLevel(logging.INFO if training_args.should_log else logging.WARNING)
    trainer = build_trainer(model_args, data_args, training_args, checkpoint)
    metrics = train_and_evaluate(trainer, data_args, checkpoint)
    save_outputs(trainer, metrics, model_args, data_args)
    if trainer.is_world_process_zero():
        logger.info("Results: %s", json.dumps({k: round(v, 4) for k, v in metrics.items()}))
        print("\n".join(summarise_run(metrics, training_args, model_args, trainer.processing_class)))
        fill_mask_dir = Path(training_args.output_dir)
        if model_args.objective == "electra":
            fill_mask_dir = fill_mask_dir / GENERATOR_FOLDER  # the discriminator does not fill masks
        show_fill_mask(fill_mask_dir)
        push_training_output(training_args)


__all__ = [
    "DataArguments",
    "ModelArguments",
    "PretrainingArguments",
    "build_trainer",
    "compute_electra_metrics",
    "compute_metrics",
    "main",
    "parse_args",
    "preprocess_electra_logits_for_metrics",
    "preprocess_logits_for_metrics",
    "validate_args",
]


if __name__ == "__main__":
    main()
