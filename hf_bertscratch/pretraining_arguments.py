"""The arguments of `bertscratch pretrain` (`hf_bertscratch.pretraining`): what the model, the data and the training
are (`ModelArguments`, `DataArguments`, `PretrainingArguments`), each checked and completed as it is made, so a bad
value fails as the command line is parsed. What one needs of another it is handed by the parser, which makes them in
that order (`arguments.ArgumentParser`): the data arguments the model's objective, the training arguments the data
arguments. What the run defaults to on the machine it runs on (processes, precision, loading workers) is
`hardware.device_defaults`.
"""

from __future__ import annotations

import logging
from dataclasses import InitVar, dataclass, field
from pathlib import Path

from safetensors import safe_open
from transformers import AutoConfig, PreTrainedTokenizerBase, SchedulerType
from transformers.training_args import OptimizerNames

from hf_bertscratch_base.data_files import TEXT_COLUMN, TEXT_TRAIN_FILE_HELP
from hf_bertscratch_base.model_config import NEW_MODEL_POSITIONS, check_max_seq_length
from hf_bertscratch_base.model_reference import check_source_flag
from hf_bertscratch_base.task_table import TASKS

from .arguments import ArgumentParser, parse_args_or_json
from .budget import budget_lr_lambda, wsd_cooldown
from .configuration_bertscratch import PRESETS, BertScratchConfig, BertScratchPreset, drop_task_entries
from .convert import bertscratch_config
from .data import DEFAULT_PRETRAINING_DATASET, check_max_samples
from .electra import (
    check_electra_arguments,
)
from .hardware import available_cores, device_defaults, visible_gpus
from .hub import check_training_push
from .run_folder import (
    GuardedTrainingArguments,
    check_output_dir,
)
from .tokenization import SPECIAL_TOKENS, check_tokenizer_fits

logger = logging.getLogger(__name__)

OBJECTIVES = ("mlm", "mlm_nsp", "electra")
# Objectives that train on packed blocks of text (mlm_nsp trains on sentence pairs).
PACKED_OBJECTIVES = ("mlm", "electra")
# Training minutes of a run that names neither --max_steps nor --num_train_epochs: the README quick start's budget
# (about 40 s of tokenising, evaluation and saving come on top; the whole job fits in 10 minutes on 2 cores).
DEFAULT_BUDGET_MINUTES = 8.5
# Fraction of a run trained on blocks cut to a quarter of max_seq_length (`cut_blocks`) before full blocks.
SHORT_SEQ_FRACTION = 0.25
# --max_steps given to the Trainer when only a time budget ends the run (it needs a step count to size its loop).
BUDGET_STEP_CAP = 10_000_000


DECODER_BIAS_STARTS = ("zero", "unigram")  # --decoder_bias_start
# --num_attention_heads of a new model where it differs from the preset's: tiny with 4 heads of 32 reached 33.5% and
# 33.3% in the budget screen at seeds 42 and 43 against 2 heads of 64's 32.1% and 32.2%, and left the plateau at
# step 450 both times (results/sweeps/heads-4-budget-1.json, unigram-bias-budget-1.json).
PRETRAINING_HEADS = {"tiny": 4}
# The AdamW that --muon trains the other parameters with (`hf_bertscratch.muon.MuonWithAdamW`).
MUON_ADAMW = (OptimizerNames.ADAMW_TORCH, OptimizerNames.ADAMW_TORCH_FUSED)


@dataclass
class ModelArguments:
    """Which model to pretrain and which tokenizer it reads."""

    _argument_group_name = "model"  # its flags' heading in --help

    model_size: str = field(default="tiny", metadata={"help": f"Size preset of a new model: one of {sorted(PRESETS)}."})
    num_attention_heads: int | None = field(
        default=None,
        metadata={
            "help": "Attention heads of a new --model_size model; they must divide its hidden size. Default: "
            f"{PRETRAINING_HEADS} (of 32 dimensions each: at the quick start's budget 4 heads reached about a point "
            "more masked-token accuracy than BERT-Tiny's 2 of 64), the preset's (hidden size / 64) for the others."
        },
    )
    config_name: str | None = field(
        default=None,
        metadata={"help": "A config.json folder/file or Hub id to build a new model from (overrides model_size)."},
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Continue pretraining these weights (a model folder or Hub id) instead of a new model; transformers' "
            "BERT or an ELECTRA discriminator is converted on load (bertscratch convert)."
        },
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "Tokenizer: a tokenizer folder, a folder with only vocab.txt, a vocab.txt, or a Hub id. "
            "Default: the --model_name_or_path model's own, else a WordPiece tokenizer of --tokenizer_vocab_size "
            "tokens trained on the training text."
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
        default=NEW_MODEL_POSITIONS, metadata={"help": "Positions of a new model; max_seq_length must not exceed it."}
    )
    dropout: float = field(
        default=0.0,
        metadata={
            "help": "Hidden and attention dropout of a new --model_size model while it pretrains (Cramming: "
            "0 learns faster in a short budget; BERT used 0.1). The saved config keeps this value; fine-tuning "
            "sets its own."
        },
    )
    decoder_bias_start: str | None = field(
        default=None,
        metadata={
            "help": "Where a new model's MLM decoder bias starts: 'unigram', the log of each token's add-one "
            "frequency in the training text, so that the first predictions are the unigram distribution every run "
            "must first learn (the loss starts at its entropy instead of ln V), or 'zero' (BERT's init). Default: "
            "unigram for a new masked LM, zero for ELECTRA and when --model_name_or_path continues a model."
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

    def __post_init__(self) -> None:
        check_model_arguments(self)  # a bad flag fails as it is parsed


@dataclass
class DataArguments:
    """Which text to train on and how to turn it into masked examples."""

    _argument_group_name = "data"  # its flags' heading in --help

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Hub dataset id, e.g. wikitext, or a folder that datasets' save_to_disk wrote (a Dataset is the "
            "train split). With none of this, --train_file and --task_text: WikiText-2 raw (wikitext / "
            "wikitext-2-raw-v1), read from the copy shipped in the package (offline)."
        },
    )
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "Hub dataset config, e.g. wikitext-2-raw-v1."}
    )
    train_file: str | None = field(
        default=None,
        metadata={"help": TEXT_TRAIN_FILE_HELP},
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
            "a pretrained model with --model_name_or_path (its tokenizer is kept). With --dataset_name or "
            "--train_file, the tasks' texts are added to that text (train to train, held-out to validation): "
            "`--dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 --task_text imdb sst2` trains on "
            "WikiText-2 and the two tasks' train text. Not with --streaming."
        },
    )
    text_column: str = field(default=TEXT_COLUMN, metadata={"help": "Column holding the raw text."})
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
        default=0.4,
        metadata={
            "help": "Fraction of tokens selected for prediction while training (40%%, as Wettig et al. 2022 "
            "recommend; on a 2-core CPU it left the unigram plateau sooner than 30%% and ended 2-6 points higher: "
            "docs/lab.md). Evaluation masks --eval_mlm_probability."
        },
    )
    mlm_probability_end: float | None = field(
        default=None,
        metadata={
            "help": "Masking rate at the end of training, reached linearly from --mlm_probability over the run (the "
            "time budget or the steps; Ankner et al. 2024 decrease 30%% to 15%%; 40%% to 15%% did not beat a constant "
            "40%% in the 2-core CPU quick start's time: docs/lab.md). Default: --mlm_probability throughout. Needs "
            "--dataloader_num_workers 0 (workers keep their own copy of the collator)."
        },
    )
    eval_mlm_probability: float = field(
        default=0.15,
        metadata={
            "help": "Fraction of tokens masked in evaluation (BERT's 15%%), one by one with BERT's 80/10/10 mix, "
            "whatever the training's rate, mix and whole-word masking, so that the accuracy and perplexity of "
            "runs trained differently compare."
        },
    )
    prediction_fraction: float = field(
        default=1.0,
        metadata={
            "help": "Of the tokens selected by --mlm_probability (all corrupted as usual), the fraction the loss is "
            "computed on, drawn at random (Wettig et al. 2022 separate the corruption and prediction rates; 1: "
            "all, as BERT). The vocabulary decoder then runs on fewer positions: a cheaper step, but at 0.5 the "
            "2-core CPU quick start's recipe scored 2.6 points lower in the same time (docs/lab.md). Evaluation "
            "predicts them all."
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
    # Not a flag: the model arguments, made first and handed over by the parser; their objective decides
    # short_seq_fraction's default and whether the short start and whole-word masking apply (made without them:
    # the default model's).
    model_args: InitVar = None

    def __post_init__(self, model_args: ModelArguments | None = None) -> None:
        check_data_arguments(self)  # a bad flag fails as it is parsed
        check_objective_fits_data(model_args if model_args is not None else ModelArguments(), self)


@dataclass
class PretrainingArguments(GuardedTrainingArguments):
    """`TrainingArguments` with the output-folder guard (`hf_bertscratch.run_folder`), a time budget, and the
    defaults a GPU machine wants (`device_defaults`): mixed precision and batch-loading workers."""

    _argument_group_name = "training"  # its flags' heading in --help

    def __post_init__(self, data_args: DataArguments | None = None) -> None:
        if self.dataloader_num_workers is None:
            gpus = visible_gpus(self.use_cpu)
            chosen = device_defaults(gpus, False, available_cores())
            self.dataloader_num_workers = chosen["dataloader_num_workers"]
        super().__post_init__()  # --precision: GuardedTrainingArguments
        check_training_arguments(self)
        if data_args is not None:
            check_run_ends(data_args, self)

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
    # None until __post_init__ chooses it for the hardware: wider than TrainingArguments' int on purpose.
    dataloader_num_workers: int | None = field(  # type: ignore[assignment]
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
            "--lr_scheduler_type one of linear, cosine, constant_with_warmup, warmup_stable_decay (whose "
            "--lr_scheduler_kwargs may set num_decay_steps, a fraction of the budget, decay_type and min_lr_ratio). "
            "--max_steps, if given with a budget, still caps the steps."
        },
    )
    # None until check_training_arguments fills in the default: wider than TrainingArguments' float on purpose.
    num_train_epochs: float | None = field(  # type: ignore[assignment]
        default=None, metadata={"help": "Epochs to train when neither a time budget nor --max_steps ends the run."}
    )
    # The small-budget recipe (README, "Pretraining recipe"): measured by lab/sweep_pretraining.py.
    per_device_train_batch_size: int = field(
        default=16, metadata={"help": "Blocks per process per step (16 x 2 processes: more steps in the budget)."}
    )
    learning_rate: float = field(
        default=3e-3, metadata={"help": "Peak learning rate (AdamW's; Muon's update is sized to match it)."}
    )
    adam_beta2: float = field(default=0.98, metadata={"help": "AdamW beta2 (0.98 as RoBERTa, steadier at high rates)."})
    weight_decay: float = field(
        default=0.1, metadata={"help": "Weight decay (AdamW's and Muon's; 0.1 as Moonlight's Muon, BERT's 0.01)."}
    )
    muon: bool = field(
        default=True,
        metadata={
            "help": "Train the encoder layers' weight matrices with Muon (torch.optim.Muon's update, its size matched "
            "to AdamW's so --learning_rate and --weight_decay serve both; orthogonalised in fp32 on a CPU) and every "
            "other parameter (embeddings, the MLM head, biases, LayerNorms) with AdamW (--optim adamw_torch or "
            "adamw_torch_fused). --no_muon: every parameter with --optim."
        },
    )
    muon_split_qkv: bool = field(
        default=False,
        metadata={
            "help": "With --muon, orthogonalise each attention's fused Q, K and V weights as three matrices (each "
            "its own update and step size) rather than one (3H, H) matrix."
        },
    )
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
    # Not a flag: the data arguments, made before these and handed over by the parser (a streamed dataset needs a
    # step count or a budget).
    data_args: InitVar = None


# What `--help` lists: the flags a first run needs (every other flag: --help_all).
FIRST_RUN_FLAGS = (
    *("model_size", "model_name_or_path", "tokenizer_name", "objective"),
    *("train_file", "validation_file", "dataset_name", "dataset_config_name", "data_dir", "text_column", "streaming"),
    *("max_seq_length", "max_train_samples"),
    *("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "max_train_minutes", "max_steps"),
    *("num_train_epochs", "learning_rate", "per_device_train_batch_size", "num_processes", "seed", "report_to"),
    *("push_to_hub", "hub_model_id"),
)


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch pretrain`: its three dataclasses, `--help` listing FIRST_RUN_FLAGS."""
    return ArgumentParser(
        (ModelArguments, DataArguments, PretrainingArguments),
        first_run=FIRST_RUN_FLAGS,
        description="Pretrain a BertScratch model on raw text (masked language modelling, optionally with NSP).",
    )


def parse_args(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, PretrainingArguments]:
    """Parse command-line arguments, or a single .json file of them, into the three argument dataclasses (each
    checked and completed as it is made)."""
    parser = build_parser()
    model_args, data_args, training_args = parse_args_or_json(parser, argv)
    return model_args, data_args, training_args


def check_num_attention_heads(model_args: ModelArguments) -> None:
    """A new --model_size model's heads: given, they must divide its hidden size (and come with no --config_name or
    --model_name_or_path, whose configs set theirs); else `PRETRAINING_HEADS`' or the preset's."""
    new_preset_model = model_args.config_name is None and model_args.model_name_or_path is None
    if model_args.num_attention_heads is None:
        if new_preset_model and model_args.model_size in PRESETS:
            preset_heads = PRESETS[model_args.model_size]["num_attention_heads"]
            model_args.num_attention_heads = PRETRAINING_HEADS.get(model_args.model_size, preset_heads)
        return
    if not new_preset_model:
        given = "--config_name" if model_args.config_name is not None else "--model_name_or_path"
        raise ValueError(
            f"num_attention_heads shapes a new --model_size model, got num_attention_heads="
            f"{model_args.num_attention_heads} with {given} (whose config sets its heads)."
        )
    hidden_size = PRESETS[model_args.model_size]["hidden_size"]
    if model_args.num_attention_heads < 1 or hidden_size % model_args.num_attention_heads:
        raise ValueError(
            f"num_attention_heads must be a positive divisor of {model_args.model_size}'s hidden size {hidden_size}, "
            f"got {model_args.num_attention_heads}."
        )


def check_model_arguments(model_args: ModelArguments) -> None:
    """Every check of the model arguments (`ModelArguments` runs them when made), naming the bad value and what was
    expected; `mlm_start_fraction` and `decoder_bias_start` get their defaults for the objective and model."""
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
    check_num_attention_heads(model_args)
    check_source_flag("--config_name", model_args.config_name)
    check_source_flag("--tokenizer_name", model_args.tokenizer_name)
    if model_args.tokenizer_name is None and model_args.model_name_or_path is None:  # a tokenizer is trained
        if model_args.tokenizer_vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"tokenizer_vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens "
                f"({' '.join(SPECIAL_TOKENS)}), got {model_args.tokenizer_vocab_size}."
            )
        if model_args.tokenizer_train_samples < 1:
            raise ValueError(
                f"tokenizer_train_samples must be a positive number of texts, got {model_args.tokenizer_train_samples}."
            )
    if not 0.0 <= model_args.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {model_args.dropout}.")
    if model_args.sinusoidal_position_std < 0:
        raise ValueError(
            f"sinusoidal_position_std must be >= 0 (0 turns it off), got {model_args.sinusoidal_position_std}."
        )
    if model_args.decoder_bias_start is None:
        new_mlm = model_args.objective != "electra" and model_args.model_name_or_path is None
        model_args.decoder_bias_start = "unigram" if new_mlm else "zero"
    if model_args.decoder_bias_start not in DECODER_BIAS_STARTS:
        raise ValueError(
            f"decoder_bias_start must be one of {DECODER_BIAS_STARTS}, got {model_args.decoder_bias_start!r}."
        )
    if model_args.decoder_bias_start == "unigram":
        if model_args.objective == "electra":
            raise ValueError("decoder_bias_start 'unigram' starts a masked LM's decoder, got objective 'electra'.")
        if model_args.model_name_or_path is not None:
            raise ValueError(
                "decoder_bias_start 'unigram' starts a new model's decoder, got model_name_or_path="
                f"{model_args.model_name_or_path!r}, whose decoder is already trained: leave it at 'zero'."
            )


def check_data_arguments(data_args: DataArguments) -> None:
    """Every check of the data arguments that needs no other arguments (`DataArguments` runs them when made); the
    text defaults to WikiText-2 (or the `--task_text` tasks' own), `short_seq_length` to a quarter block."""
    check_task_text(data_args)
    if not data_args.dataset_name and not data_args.train_file:
        data_args.dataset_name, data_args.dataset_config_name = DEFAULT_PRETRAINING_DATASET
    for name in (
        "mlm_probability",
        "eval_mlm_probability",
        "prediction_fraction",
        "mask_replace_prob",
        "random_replace_prob",
        "nsp_random_probability",
    ):
        value = getattr(data_args, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}.")
    for name in ("mlm_probability", "eval_mlm_probability", "prediction_fraction"):
        if not 0.0 < getattr(data_args, name):
            raise ValueError(f"{name} must be positive, got {getattr(data_args, name)}.")
    if data_args.mlm_probability_end is not None and not 0.0 < data_args.mlm_probability_end <= 1.0:
        raise ValueError(f"mlm_probability_end must be in (0, 1], got {data_args.mlm_probability_end}.")
    if data_args.mask_replace_prob + data_args.random_replace_prob > 1.0:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must not exceed 1, got {data_args.mask_replace_prob} + "
            f"{data_args.random_replace_prob}."
        )
    if data_args.max_seq_length < 8:
        raise ValueError(f"max_seq_length must be at least 8, got {data_args.max_seq_length}.")
    if data_args.short_seq_length is None:
        data_args.short_seq_length = max(1, data_args.max_seq_length // 4)
    check_max_samples(data_args)
    if not 0 < data_args.validation_split_percentage < 100:
        raise ValueError(
            f"validation_split_percentage must be in (0, 100), got {data_args.validation_split_percentage}."
        )


def check_training_arguments(training_args: PretrainingArguments) -> None:
    """The time budget and what it decides (`PretrainingArguments` runs this when made): the default budget when
    nothing else ends the run, 0 for none, and the step count the Trainer needs; the output folder and the Hub
    repository checked before anything is written."""
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
        scheduler = SchedulerType(training_args.lr_scheduler_type)  # the member TrainingArguments made of the name
        budget_lr_lambda(str(scheduler.value), training_args.warmup_steps, training_args.lr_scheduler_kwargs)
        if training_args.max_steps <= 0:
            training_args.max_steps = BUDGET_STEP_CAP  # the budget stops the run; the Trainer needs a step count
    elif training_args.lr_scheduler_type == SchedulerType.WARMUP_STABLE_DECAY:
        wsd_cooldown(training_args.lr_scheduler_kwargs)  # a bad cooldown fails now, not after the data is prepared
    if training_args.muon and training_args.optim not in MUON_ADAMW:
        raise ValueError(
            f"--muon pairs Muon with AdamW: --optim must be one of {[str(name.value) for name in MUON_ADAMW]}, got "
            f"{str(OptimizerNames(training_args.optim).value)!r} (--no_muon trains every parameter with --optim)."
        )
    if training_args.muon_split_qkv and not training_args.muon:
        raise ValueError(
            "--muon_split_qkv says how Muon orthogonalises the QKV weights; --no_muon trains no weight with Muon."
        )
    check_output_dir(training_args)
    check_training_push(training_args)  # a bad --hub_model_id or a missing token fails now, not after training
    if training_args.ddp_find_unused_parameters is None:
        # Every parameter gets a gradient in both objectives; DDP's unused-parameter search is wasted work.
        training_args.ddp_find_unused_parameters = False


def check_objective_fits_data(model_args: ModelArguments, data_args: DataArguments) -> None:
    """What the data arguments need of the model's objective (`DataArguments` runs this when made, handed the model
    arguments): whole-word masking and the short-block start work on packed blocks, whose objectives also give
    `short_seq_fraction` its default."""
    if data_args.whole_word_mask and model_args.objective not in PACKED_OBJECTIVES:
        raise ValueError(
            f"whole_word_mask works with objectives {PACKED_OBJECTIVES} only, got objective {model_args.objective!r}."
        )
    if data_args.prediction_fraction < 1.0 and model_args.objective == "electra":
        raise ValueError(
            f"prediction_fraction below 1 works with objectives 'mlm' and 'mlm_nsp', got {data_args.prediction_fraction} "
            "with objective 'electra' (its discriminator reads every masked position's sample)."
        )
    if data_args.short_seq_fraction is None:
        usual = model_args.objective in PACKED_OBJECTIVES and data_args.max_seq_length % 4 == 0
        data_args.short_seq_fraction = SHORT_SEQ_FRACTION if usual else 0.0
    if not 0.0 <= data_args.short_seq_fraction < 1.0:
        raise ValueError(f"short_seq_fraction must be in [0, 1), got {data_args.short_seq_fraction}.")
    if data_args.short_seq_fraction > 0:
        assert data_args.short_seq_length is not None, "check_data_arguments, run first, sets its default"
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


def check_run_ends(data_args: DataArguments, training_args: PretrainingArguments) -> None:
    """What the training arguments need of the data arguments (`PretrainingArguments` runs this when made, handed the
    data arguments): a streamed dataset needs a step count or a budget, a masking-rate schedule the collator in this
    process."""
    if data_args.mlm_probability_end is not None and training_args.dataloader_num_workers:
        raise ValueError(
            f"mlm_probability_end={data_args.mlm_probability_end} needs --dataloader_num_workers 0, got "
            f"{training_args.dataloader_num_workers}: each worker masks with its own copy of the collator, which the "
            "schedule cannot reach."
        )
    if data_args.streaming and training_args.max_steps <= 0:
        raise ValueError(
            "--streaming needs --max_steps > 0 or --max_train_minutes: a streamed dataset has no length "
            "to count epochs by."
        )


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
    if data_args.streaming:
        raise ValueError(
            f"--task_text {' '.join(names)} reads the tasks' whole train splits; it cannot be combined with "
            "--streaming. Drop one of them."
        )
    if data_args.validation_file and not (data_args.train_file or data_args.dataset_name):
        raise ValueError(
            "--validation_file with --task_text needs the text it validates: --train_file or --dataset_name."
        )
    if data_args.train_file or data_args.dataset_name:
        return  # the tasks' texts are added to the named text (`pretraining_data.load_text_splits`)
    if data_args.text_column != TEXT_COLUMN:  # the task table names the text columns
        raise ValueError(
            f"--task_text {' '.join(names)} alone reads the tasks' own text columns; --text_column names the column "
            "of --train_file or --dataset_name. Drop --text_column, or name the text it is a column of."
        )
    data_args.dataset_name, data_args.dataset_config_name = task_text_source(names)


def task_text_source(names: list[str]) -> tuple[str, str | None]:
    """The dataset id and config a run on the `names` tasks' text alone records as its dataset (several tasks of
    one dataset, as GLUE's, give their configs joined with commas)."""
    datasets_ = list(dict.fromkeys(TASKS[name].dataset_name for name in names))
    configs = [config for config in (TASKS[name].dataset_config_name for name in names) if config]
    return datasets_[0] if len(datasets_) == 1 else ", ".join(datasets_), ", ".join(configs) or None


def adds_task_text(data_args: DataArguments) -> bool:
    """Whether the run trains on a named text (`--dataset_name` or `--train_file`) with the `--task_text` tasks'
    texts added, rather than on the tasks' texts alone."""
    if not data_args.task_text:
        return False
    alone = (data_args.dataset_name, data_args.dataset_config_name) == task_text_source(data_args.task_text)
    return bool(data_args.train_file) or not alone


def task_text_datasets(data_args: DataArguments) -> list[str]:
    """The Hub dataset ids of the `--task_text` tasks, each once, in order (the model card's `datasets`)."""
    return list(dict.fromkeys(TASKS[name].dataset_name for name in data_args.task_text or ()))


def preset_sizes(model_args: ModelArguments) -> BertScratchPreset:
    """The sizes of a new --model_size model: its preset's, with this run's heads (`--num_attention_heads`)."""
    preset = PRESETS[model_args.model_size].copy()
    preset["num_attention_heads"] = model_args.num_attention_heads or preset["num_attention_heads"]
    return preset


def new_model_config(model_args: ModelArguments, tokenizer: PreTrainedTokenizerBase) -> BertScratchConfig:
    """The config of a new model: `--config_name` (transformers' BERT or ELECTRA sizes made BertScratch's, any other
    model_type refused: `bertscratch_config`), or the `--model_size` preset with this run's dropout, positions and
    position init; its vocabulary and [PAD] are the tokenizer's. (Shared with the JAX entry point.)"""
    if model_args.config_name:
        given = AutoConfig.from_pretrained(model_args.config_name)
        config = bertscratch_config(given, f"--config_name {model_args.config_name!r}")
    else:
        config = BertScratchConfig(
            **preset_sizes(model_args),
            hidden_dropout_prob=model_args.dropout,
            attention_probs_dropout_prob=model_args.dropout,
            max_position_embeddings=model_args.max_position_embeddings,
            sinusoidal_position_std=model_args.sinusoidal_position_std or None,
        )
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    return config


def forget_fine_tuned_task(config: BertScratchConfig, source: str) -> None:
    """Leave out of the config of a model pretrained on from given weights (`source`) what fine-tuning recorded for
    its task alone (`configuration_bertscratch.drop_task_entries`: labels, head settings, input columns), saying
    so where there was any."""
    dropped = drop_task_entries(config)
    if dropped:
        logger.info(
            "The task entries of %s's config (%s) are left out of the pretrained model: fine-tuning records "
            "them for its own task.",
            source,
            ", ".join(dropped),
        )


def check_model_fits(config: BertScratchConfig, data_args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a model whose positions or vocabulary are too small for the data, naming both numbers."""
    check_max_seq_length(data_args.max_seq_length, config.max_position_embeddings)
    check_tokenizer_fits(tokenizer, config.vocab_size)
