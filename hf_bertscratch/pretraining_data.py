"""The data of `bertscratch pretrain` (`hf_bertscratch.pretraining`): raw text splits, the tokenizer (loaded or
trained on the text), tokenised and packed blocks (or NSP sentence pairs), and the masking collators.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import datasets
import numpy as np
import torch
from transformers import (
    DataCollatorForLanguageModeling,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from .data import check_text_column, load_raw_datasets, sample_examples
from .nsp import make_nsp_pairs_function
from .pretraining_arguments import DataArguments, ModelArguments, adds_task_text
from .tasks import check_columns, task_texts
from .tokenization import TOKENIZER_FILES, load_tokenizer, train_wordpiece_tokenizer

logger = logging.getLogger(__name__)


class RunProcesses(Protocol):
    """What the data stages read of a run's arguments: its processes and seed (`TrainingArguments`, or the JAX
    run's own arguments, one process)."""

    @property
    def process_index(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def seed(self) -> int: ...

    def main_process_first(self, *, desc: str) -> AbstractContextManager[object]: ...


# ----------------------------------------------------------------------------------------------- data stages


def load_task_text_splits(
    data_args: DataArguments, documents: bool = False
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """`--task_text`: the texts of the tasks' train splits to train on, and of their eval splits for the held-out
    MLM loss, without labels (`tasks.task_texts`), as one-column datasets, task after task; the splits are loaded and
    checked as fine-tuning loads them (`tasks.data.load_task_datasets`). With `documents` (next-sentence
    prediction), an empty text ends each example, so each example is a document of its own. `--max_eval_samples N`
    keeps each of the k tasks' first N/k held-out texts (`_first_texts`), so every task is scored, not the first
    task alone."""
    from .tasks.data import DataArguments as TaskDataArguments
    from .tasks.data import load_task_datasets

    assert data_args.task_text is not None, "read only where --task_text names tasks (load_text_splits)"
    texts: dict[str, list[str]] = {"train": [], "eval": []}
    for name in data_args.task_text:
        task_args = TaskDataArguments(task=name, data_dir=data_args.data_dir)
        task = task_args.task_spec
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


def _column_names(split: datasets.Dataset | datasets.IterableDataset) -> list[str]:
    """A split's columns; a streamed split's, when its files do not say them, from its first row."""
    return split.column_names if split.column_names is not None else list(next(iter(split), {}))


def load_text_splits(
    data_args: DataArguments, seed: int, documents: bool = False
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | datasets.IterableDataset]:
    """The raw train and validation splits; validation is carved off the end of train when there is none. With
    `--task_text`, a task's train and eval texts (`load_task_text_splits`, each example a document when
    `documents`), after the named text's when `--dataset_name` or `--train_file` names one too."""
    if data_args.task_text and not adds_task_text(data_args):
        return load_task_text_splits(data_args, documents)
    train, validation = _load_named_text_splits(data_args, seed)
    if data_args.task_text:  # the tasks' texts added to the named text, each split after the named text's own
        task_train, task_held_out = load_task_text_splits(data_args, documents)
        column = data_args.text_column
        # both one column of strings, named --text_column (`load_task_text_splits` names the tasks' so)
        train = datasets.concatenate_datasets([train.select_columns([column]), task_train])
        validation = datasets.concatenate_datasets([validation.select_columns([column]), task_held_out])
        logger.info("With the tasks' texts: %d texts to train on, %d held out", len(train), len(validation))
    return train, validation


def _load_named_text_splits(
    data_args: DataArguments, seed: int
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | datasets.IterableDataset]:
    """The train and validation splits of `--dataset_name` or `--train_file`/`--validation_file`."""
    raw = load_raw_datasets(
        data_args.dataset_name,
        data_args.dataset_config_name,
        train_file=data_args.train_file,
        validation_file=data_args.validation_file,
        data_dir=data_args.data_dir,
        streaming=data_args.streaming,
    )
    if "train" not in raw:
        raise ValueError(
            f"The data has no train split (splits found: {sorted(raw)}): give the training text with --train_file, "
            "or a --dataset_name that has a train split."
        )
    train, validation = raw["train"], raw.get("validation")
    for name, data in (("train", train), ("validation", validation)):
        if data is not None:
            check_columns(_column_names(data), {"text": data_args.text_column}, name)
            check_text_column(data, data_args.text_column, name)
    if validation is None and data_args.streaming:
        held_out = data_args.max_eval_samples or 1000
        train, validation = train.skip(held_out), train.take(held_out)
        if next(iter(train), None) is None:  # reads the held-out rows and one more
            raise ValueError(
                f"The streamed train split has no row left after its first {held_out} rows (--max_eval_samples, "
                "1000 by default), held out for validation: give a --validation_file, a smaller "
                "--max_eval_samples, or more rows."
            )
    elif validation is None:
        _check_rows_to_hold_out(len(train), data_args.validation_split_percentage)
        # The last rows, not a random sample: keeps documents contiguous for packing and NSP.
        split = train.train_test_split(test_size=data_args.validation_split_percentage / 100, shuffle=False)
        train, validation = split["train"], split["test"]
    if data_args.max_eval_samples is not None and not data_args.streaming:
        validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
    if data_args.streaming:
        train = train.shuffle(seed=seed, buffer_size=data_args.shuffle_buffer_size)
    return train, validation


def _check_rows_to_hold_out(rows: int, percentage: int) -> None:
    """Refuse a train split too short to hold out `percentage`% of its rows (at least one) and keep one to train on,
    before `train_test_split` fails in its own words."""
    if rows - math.ceil(rows * percentage / 100) < 1:
        raise ValueError(
            f"The train split has {rows} row(s) (a text file gives one per line), too few to hold out "
            f"--validation_split_percentage {percentage}% for validation and train on the rest: give a "
            "--validation_file, or more rows."
        )


def build_tokenizer(
    model_args: ModelArguments,
    train: datasets.Dataset | datasets.IterableDataset,
    text_column: str,
    checkpoint: str | None,
    training_args: RunProcesses,
) -> PreTrainedTokenizerBase:
    """The given tokenizer, the one saved in the checkpoint being resumed, or a WordPiece trained on `train`.

    Under torchrun/accelerate only the first process trains the tokenizer and sends it to the others, so every rank
    tokenises with the same ids even where training ties could be broken differently.

    Raises:
        ValueError: if `--tokenizer_name` names another tokenizer than the one saved in the checkpoint being resumed
            (its embeddings are rows of that one's ids).
    """
    if model_args.tokenizer_name:
        given = load_tokenizer(model_args.tokenizer_name)
        if checkpoint is not None and any((Path(checkpoint) / name).is_file() for name in TOKENIZER_FILES):
            if given.get_vocab() != load_tokenizer(checkpoint).get_vocab():
                raise ValueError(
                    f"--tokenizer_name {model_args.tokenizer_name!r} is not the tokenizer of the checkpoint resumed, "
                    f"{checkpoint!r}, whose embeddings are rows of its own tokenizer's ids: leave --tokenizer_name "
                    "out to resume with the checkpoint's tokenizer."
                )
        return given
    for source in (checkpoint, model_args.model_name_or_path):
        if source:
            return load_tokenizer(source)
    tokenizer: PreTrainedTokenizerBase | None = None
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
    assert tokenizer is not None, "the first process trains it, and the broadcast hands it to the others"
    return tokenizer


def make_pack_function(
    tokenizer: PreTrainedTokenizerBase, text_column: str, max_seq_length: int, with_offsets: bool
) -> Any:
    """A batched `datasets.map` function: tokenise texts, concatenate them, cut `[CLS] block [SEP]` examples.

    Every example is exactly `max_seq_length` tokens (the batch's remainder is dropped), so no compute is spent on
    padding. With `with_offsets`, character offsets travel along for whole-word masking: a token that does not
    start where the previous one ended begins a new word. Each text's offsets are moved past the previous text's
    end and one character more, so that the first token of a text always begins a word: offsets restarting at each
    text would join "a" (0, 1) and " b" (1, 2) into one word.
    """
    block = max_seq_length - 2

    def pack(batch: dict[str, list]) -> dict[str, list]:
        texts = [text or "" for text in batch[text_column]]  # an empty csv cell or a json null reads as None
        encoded = tokenizer(
            texts,
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
            offsets, start = [], 0
            for text, seq in zip(texts, encoded["offset_mapping"], strict=True):
                offsets += [(begin + start, end + start) for begin, end in seq]
                start += len(text) + 1
            out["offset_mapping"] = [[(0, 0), *offsets[i * block : (i + 1) * block], (0, 0)] for i in range(n_blocks)]
        return out

    return pack


def tokenize_splits(
    splits: dict[str, datasets.Dataset | datasets.IterableDataset],
    tokenizer: PreTrainedTokenizerBase,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: RunProcesses,
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
            _log_nsp_labels(name, result[name]["next_sentence_label"])
    result["train"] = sample_examples(result["train"], data_args.max_train_samples, training_args.seed)
    return result


def _log_nsp_labels(name: str, labels: list[int]) -> None:
    """Log how many of a split's NSP pairs are IsNext (0) and NotNext (1); warn when they are all one of them."""
    not_next = sum(labels)
    logger.info(
        "NSP pairs of %s: %d IsNext, %d NotNext (a one-sentence document has no next sentence: NotNext only)",
        name,
        len(labels) - not_next,
        not_next,
    )
    if not_next in (0, len(labels)):
        logger.warning(
            "Every NSP pair of %s is %s (%d pairs): next-sentence prediction has nothing to tell apart there. "
            "IsNext only: the rows form one document (a NotNext B comes from another document of the same batch "
            "of rows); NotNext only: each document is one sentence.",
            name,
            "IsNext" if not_next == 0 else "NotNext",
            len(labels),
        )


# Training blocks read to count the tokens for `--decoder_bias_start unigram`: all of WikiText-2's ~20k, and a
# sample of a larger corpus (a unigram distribution settles within a few million tokens).
UNIGRAM_COUNT_BLOCKS = 32_768


def count_tokens(
    split: datasets.Dataset | datasets.IterableDataset, vocab_size: int, max_blocks: int = UNIGRAM_COUNT_BLOCKS
) -> np.ndarray:
    """(V,) int64: how often each token id occurs in the first `max_blocks` examples' `input_ids` (a tokenised
    split, streamed or not)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    examples = (
        split.take(max_blocks)
        if isinstance(split, datasets.IterableDataset)
        else split.select(range(min(max_blocks, len(split))))
    )
    for batch in examples.iter(batch_size=1024):
        ids = np.concatenate([np.asarray(row, dtype=np.int64) for row in batch["input_ids"]])
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    return counts


def _check_not_empty(name: str, split: datasets.Dataset | datasets.IterableDataset, data_args: DataArguments) -> None:
    empty = next(iter(split), None) is None if isinstance(split, datasets.IterableDataset) else len(split) == 0
    if empty:
        raise ValueError(
            f"The {name} split yields no example of max_seq_length={data_args.max_seq_length} tokens after "
            "tokenisation (its texts are empty or too short); give more text or a smaller --max_seq_length."
        )


# ------------------------------------------------------------------------------------------ masking stage


# Evaluation's replacement mix, whatever the training's (`masking_collators`): BERT's 80% [MASK], 10% random, 10% kept.
EVAL_MASK_REPLACE_PROB, EVAL_RANDOM_REPLACE_PROB = 0.8, 0.1


@dataclass
class SeededMaskingCollator(DataCollatorForLanguageModeling):
    """`DataCollatorForLanguageModeling` whose masks depend only on (seed, epoch, the batch's tokens).

    The stock collator draws masks from the global RNG inside the dataloader, which accelerate runs one batch ahead
    of the training step; a checkpoint then saves an RNG state that already consumed the next batch's masks, and a
    resumed run masks differently from an uninterrupted one. Seeding each batch from its own content makes masking
    reproducible across resume, dataloader workers and ranks (each rank's batches differ, so do its masks), and
    the epoch keeps masks dynamic: a block seen again in a later epoch is masked afresh, as in RoBERTa.

    `prediction_fraction` below 1 separates the corruption rate from the prediction rate (Wettig et al. 2022): every
    selected token is corrupted as usual, and the loss is computed on a random `prediction_fraction` of them only
    (the others' labels become -100), which a sparse-prediction model does not decode at all.
    """

    epoch: int = 0
    prediction_fraction: float = 1.0
    _batch_seed: int = field(default=0, init=False, repr=False)

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:  # the pipeline's examples: dicts of input_ids
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
        batch = super().torch_call(examples)
        if self.prediction_fraction < 1.0:
            labels = batch["labels"]
            assert self.generator is not None, "create_rng made the batch's generator"
            unpredicted = torch.rand(labels.shape, generator=self.generator) >= self.prediction_fraction
            labels[unpredicted] = -100
        return batch

    def create_rng(self, *args: Any, **kwargs: Any) -> None:
        """The generator of the batch being collated (see `torch_call`)."""
        self.generator = torch.Generator().manual_seed(self._batch_seed)
        self._generator_pid = os.getpid()  # transformers >= 5.24 checks it; earlier versions ignore it


def masking_collators(
    tokenizer: PreTrainedTokenizerBase, data_args: DataArguments, seed: int
) -> tuple[SeededMaskingCollator, SeededMaskingCollator]:
    """The training and evaluation collators of a run. Training masks as its arguments say; evaluation masks
    `eval_mlm_probability` of the tokens one by one with BERT's 80/10/10 mix and predicts them all, whatever the
    training's rate, mix, whole-word masking or `prediction_fraction`, so that every run's accuracy compares."""
    train = SeededMaskingCollator(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        whole_word_mask=data_args.whole_word_mask,
        mask_replace_prob=data_args.mask_replace_prob,
        random_replace_prob=data_args.random_replace_prob,
        seed=seed,
        prediction_fraction=data_args.prediction_fraction,
    )
    evaluation = SeededMaskingCollator(
        tokenizer,
        mlm_probability=data_args.eval_mlm_probability,
        mask_replace_prob=EVAL_MASK_REPLACE_PROB,
        random_replace_prob=EVAL_RANDOM_REPLACE_PROB,
        seed=seed,
    )
    return train, evaluation


class MaskingEpochCallback(TrainerCallback):
    """Tells the collator which epoch is starting (also right after a resume, mid-epoch)."""

    def __init__(self, collator: SeededMaskingCollator) -> None:
        self.collator = collator

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.collator.epoch = int(math.floor(state.epoch or 0.0))


def training_data_source(data_args: DataArguments) -> str:
    """How the resume warning names the training text (`run_folder.TrainingDataRecord`): the file, the dataset, or
    the tasks' texts."""
    named = data_args.train_file or " ".join(filter(None, (data_args.dataset_name, data_args.dataset_config_name)))
    return named or "the tasks' texts"
