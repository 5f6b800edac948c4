"""Tokenizers for pretraining: load an existing WordPiece tokenizer, or train one on the training text.

`load_tokenizer` accepts the forms users have at hand (a saved tokenizer folder, a folder holding only `vocab.txt`,
a `vocab.txt` file, or a Hub id); `train_wordpiece_tokenizer` trains BERT's uncased WordPiece with the `tokenizers`
library and returns it as a `BertTokenizer` (in transformers v5 the `tokenizers`-backed class, which
`BertTokenizerFast` names too). `main()` is the `bertscratch train-tokenizer` command.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, BertTokenizer, PreTrainedTokenizerBase

from hf_bertscratch_base.data_files import TEXT_COLUMN, TEXT_TRAIN_FILE_HELP
from hf_bertscratch_base.model_reference import LOCAL_TOKENIZER, check_not_a_missing_path
from hf_bertscratch_base.task_table import check_columns

from .arguments import ArgumentParser, parse_args_or_json

logger = logging.getLogger(__name__)

# BERT's special tokens, in the order that gives them ids 0..4 (so [PAD] is 0, the config's pad_token_id).
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# The files of which any one makes a folder a tokenizer `load_tokenizer` loads.
TOKENIZER_FILES = (*_TOKENIZER_FILES, "vocab.txt")
# How transformers' `from_pretrained` found a tokenizer, which it keeps among the options `save_pretrained` writes
# back into tokenizer_config.json: they say nothing of the tokenizer, and do not hold where the folder goes next.
LOAD_OPTIONS = ("is_local", "local_files_only")


def forget_load_options(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """`tokenizer` without the `LOAD_OPTIONS` it was loaded with, so that saving it writes only its own settings."""
    for name in LOAD_OPTIONS:
        tokenizer.init_kwargs.pop(name, None)
    return tokenizer


def load_tokenizer(name_or_path: str, remedy: str | None = None) -> PreTrainedTokenizerBase:
    """Load a tokenizer from a tokenizer folder, a folder with only `vocab.txt`, a `vocab.txt` file, or a Hub id.

    Raises:
        FileNotFoundError: if `name_or_path` is a path that does not exist (rather than the Hub's "Repo id must be
            in the form ..." or a connection error for a mistyped folder), or a folder holding no tokenizer file (the
            message ends with `remedy` when given: how to supply one).
        ValueError: if the tokenizer has no mask token (masked language modelling needs one), or it is read from a
            vocab.txt that lists a word twice (`check_vocab_file`).
    """
    path = Path(name_or_path).expanduser()
    tokenizer: PreTrainedTokenizerBase
    if not path.exists():
        check_not_a_missing_path(name_or_path, "Tokenizer", LOCAL_TOKENIZER)
    if path.is_file():
        tokenizer = BertTokenizer(vocab=str(path))
    elif path.is_dir() and not any((path / name).is_file() for name in _TOKENIZER_FILES):
        if not (path / "vocab.txt").is_file():
            raise FileNotFoundError(
                f"Tokenizer folder {name_or_path!r} holds neither {' nor '.join(_TOKENIZER_FILES)} nor vocab.txt"
                + (f"; {remedy}." if remedy else ".")
            )
        # AutoTokenizer cannot tell a bare vocab.txt folder's class; WordPiece vocab files are BERT's.
        tokenizer = BertTokenizer.from_pretrained(str(path))
    else:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    check_mask_token(tokenizer, name_or_path)
    check_vocab_file(path)
    return forget_load_options(tokenizer)


def load_model_tokenizer(model: str | Path, tokenizer: str | Path | None) -> PreTrainedTokenizerBase:
    """The tokenizer of the inference commands and `export`: `tokenizer` (their --tokenizer) when given, else the one
    saved in the model folder or Hub id `model`; a model folder without one is told where to save one or which flag
    supplies one."""
    if tokenizer is not None:
        return load_tokenizer(str(tokenizer))
    remedy = f"save its tokenizer into {model} (tokenizer.save_pretrained), or pass --tokenizer (in Python, tokenizer=)"
    return load_tokenizer(str(model), remedy)


def check_vocabulary(tokenizer: PreTrainedTokenizerBase, name: str, remedy: str) -> None:
    """Raise ValueError, ending with `remedy`, when `tokenizer` knows nothing but its special tokens: what
    transformers builds from a model folder saved without its tokenizer (its config names the class, no file gives
    the vocabulary). Every text would be read as [UNK]."""
    size = len(tokenizer.get_vocab())
    if size <= len(set(tokenizer.all_special_tokens)):
        raise ValueError(
            f"{name!r} holds no tokenizer: the one transformers builds from it knows only its {size} special tokens; "
            f"{remedy}."
        )


# How many of a vocab.txt's repeated words `check_vocab_file` names.
_REPEATS_NAMED = 3


def check_vocab_file(name_or_path: str | Path) -> None:
    """Raise ValueError when the vocab.txt a tokenizer of `name_or_path` is read from (the file itself, or a local
    folder's vocab.txt where it holds no tokenizer.json, which a tokenizer reads instead) lists a word on more than one
    line, naming how many words and the first few with their lines. BertTokenizer gives such a word the id of its last
    line, so it has fewer tokens than its largest id + 1, and a model sized by it fails on an index out of range."""
    path = Path(name_or_path).expanduser()
    if path.is_dir() and not (path / "tokenizer.json").is_file():
        path /= "vocab.txt"
    if not path.is_file():
        return
    lines: dict[str, list[int]] = {}
    with path.open(encoding="utf-8") as vocab:  # read as transformers' `load_vocab` does: a word a line, as it is
        for number, line in enumerate(vocab, start=1):
            lines.setdefault(line.rstrip("\n"), []).append(number)
    repeated = sorted(((word, at) for word, at in lines.items() if len(at) > 1), key=lambda item: item[1][1])
    if not repeated:
        return
    named = ", ".join(
        f"{word!r} (lines {', '.join(map(str, at[:-1]))} and {at[-1]})" for word, at in repeated[:_REPEATS_NAMED]
    )
    more = f" and {len(repeated) - _REPEATS_NAMED} more" if len(repeated) > _REPEATS_NAMED else ""
    total = sum(map(len, lines.values()))
    raise ValueError(
        f"Vocabulary file {str(path)!r} lists {len(repeated)} {'word' if len(repeated) == 1 else 'words'} on more "
        f"than one line: {named}{more}; a tokenizer gives such a word the id of its last line, which leaves it "
        f"{len(lines)} tokens with ids up to {total - 1}, past the {len(lines)} embedding rows of a model sized by it: "
        "keep each word on one line."
    )


def check_tokenizer_fits(tokenizer: PreTrainedTokenizerBase, vocab_size: int, name: str = "tokenizer") -> None:
    """Raise ValueError when `tokenizer` has more tokens than the model's embedding rows (`vocab_size`): its ids past
    the last row would fail the model at the first text that uses them, or, in an exported graph, at run time."""
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"The {name} has {len(tokenizer)} tokens but the model's vocab_size is {vocab_size}: pass the tokenizer "
            "the model was trained with (the one saved with it)."
        )


def check_mask_token(tokenizer: PreTrainedTokenizerBase, name: str = "tokenizer") -> None:
    """Raise ValueError unless the tokenizer has a mask token that is in its vocabulary (MLM needs one).

    BERT tokenizers always name "[MASK]", so a vocabulary without it would silently mask with [UNK].
    """
    mask = tokenizer.mask_token
    if mask is None or mask not in tokenizer.get_vocab():
        raise ValueError(
            f"{name!r} has no usable mask token (mask_token={mask!r}, not None and in the vocabulary); masked language modelling needs "
            "one: add [MASK] to vocab.txt or train a tokenizer with train_tokenizer."
        )


def train_wordpiece_tokenizer(
    texts: Iterable[str], vocab_size: int, output_dir: str | None = None, lowercase: bool = True
) -> BertTokenizer:
    """Train a BERT WordPiece tokenizer on `texts` (BERT normaliser and pre-tokeniser, "##" continuation prefix).

    The special tokens [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0..4, the other tokens the following ids in sorted
    order: `tokenizers` numbers equally ranked tokens differently from run to run (its hash maps are seeded per
    process), and WordPiece splits words the same whatever the numbering, so trainings that learn the same tokens
    (as on a real corpus, where ties rarely change which tokens are learned) give them the same ids. Saved to
    `output_dir` when given, as a whole new folder that replaces it in one rename (no file of an older tokenizer
    stays beside the new ones, and a save that fails leaves the older one as it was).

    Raises:
        ValueError: if `vocab_size` cannot hold the special tokens.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}.")
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    backend.train_from_iterator(_non_empty(texts), trainer=trainer)
    learned = sorted(set(backend.get_vocab()) - set(SPECIAL_TOKENS))
    if not learned:
        raise ValueError("Cannot train a tokenizer: the texts given contain no characters to learn from.")
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + learned)}
    if len(vocab) > vocab_size:
        characters = sum(len(token) == 1 for token in learned)
        logger.warning(
            "The tokenizer has %d tokens, more than vocab_size %d: WordPiece keeps each of the text's %d distinct "
            "characters as a token (and as a ## continuation where it occurs inside a word), whatever the size asked.",
            len(vocab),
            vocab_size,
            characters,
        )
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=lowercase)
    if output_dir is not None:
        from .run_folder import staged_folder

        with staged_folder(output_dir) as staging:
            tokenizer.save_pretrained(staging)
        logger.info("Saved a %d-token WordPiece tokenizer to %s", len(tokenizer), output_dir)
    return tokenizer


def _non_empty(texts: Iterable[str]) -> Iterator[str]:
    return (text for text in texts if text and not text.isspace())


@dataclass
class TrainTokenizerArguments:
    """Arguments of `train_tokenizer`: which text to learn from and where to save the tokenizer."""

    output_dir: str = field(
        metadata={
            "help": "Folder to save the tokenizer in (loadable by AutoTokenizer); a tokenizer already there is "
            "replaced whole, once the new one is saved."
        }
    )
    vocab_size: int = field(default=30522, metadata={"help": "Vocabulary size, the 5 special tokens included."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset id (e.g. wikitext)."})
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "Hub dataset config (e.g. wikitext-2-raw-v1)."}
    )
    train_file: str | None = field(default=None, metadata={"help": TEXT_TRAIN_FILE_HELP})
    data_dir: str | None = field(
        default=None, metadata={"help": "Local copies of Hub datasets (default: $BERTSCRATCH_DATA_DIR)."}
    )
    text_column: str = field(default=TEXT_COLUMN, metadata={"help": "Column holding the text."})
    lowercase: bool = field(default=True, metadata={"help": "Lowercase and strip accents (BERT uncased)."})


def check_tokenizer_output_dir(output_dir: str) -> None:
    """Refuse an `output_dir` that is a file (`save_pretrained` would write nothing), a model's folder (the new
    tokenizer would replace the model's own, whose ids its embeddings were trained on) or a folder of other files
    (the new tokenizer replaces the whole folder), or the current folder or one holding it."""
    from .run_folder import check_replaceable

    check_replaceable(output_dir)
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--output_dir {output_dir!r} is a file; expected a folder to save the tokenizer in.")
    if (path / "config.json").is_file():
        raise ValueError(
            f"--output_dir {output_dir!r} holds a model (config.json): the new tokenizer would replace the model's "
            "own, whose ids its embeddings were trained on; choose another --output_dir."
        )
    if path.is_dir() and any(path.iterdir()) and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(
            f"--output_dir {output_dir!r} holds files and no tokenizer ({', '.join(TOKENIZER_FILES)}): the new "
            "tokenizer replaces the whole folder; choose a new or empty folder, or one holding a tokenizer to replace."
        )


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch train-tokenizer`."""
    return ArgumentParser(TrainTokenizerArguments, description=main.__doc__)


def main(argv: list[str] | None = None) -> None:
    """Train a WordPiece tokenizer on a dataset's train split and save it (`bertscratch train-tokenizer`)."""
    from .data import check_text_column, load_raw_datasets

    (args,) = parse_args_or_json(build_parser(), argv)
    check_tokenizer_output_dir(args.output_dir)
    if not (args.train_file or args.dataset_name):
        raise ValueError("No text to learn from: give --train_file FILE or --dataset_name NAME (a Hub dataset id).")
    raw = load_raw_datasets(
        args.dataset_name, args.dataset_config_name, train_file=args.train_file, data_dir=args.data_dir
    )
    train = raw["train"]
    check_columns(train.column_names, {"text": args.text_column}, "train")
    check_text_column(train, args.text_column, "train")
    tokenizer = train_wordpiece_tokenizer(train[args.text_column], args.vocab_size, args.output_dir, args.lowercase)
    print(f"Saved a {len(tokenizer)}-token WordPiece tokenizer to {args.output_dir}")


IGNORE_INDEX = -100  # the label the loss and the metric skip: special tokens and non-first pieces


def align_labels_with_pieces(word_ids: list[int | None], word_label_ids: list[int]) -> list[int]:
    """Piece labels (T,) from word labels: the word's label on its first piece, -100 on its other pieces and on the
    special tokens (word id None), so each word is scored once.

    Args:
        word_ids: per piece, the index of its word or None, as `BatchEncoding.word_ids(i)` gives it.
        word_label_ids: per word, its label id.
    """
    labels = []
    previous = None
    for word_id in word_ids:
        if word_id is None or word_id == previous:
            labels.append(IGNORE_INDEX)
        elif not 0 <= word_id < len(word_label_ids):
            raise ValueError(f"Word id {word_id} is outside the {len(word_label_ids)} word labels.")
        else:
            labels.append(word_label_ids[word_id])
        previous = word_id
    return labels


def check_fast_tokenizer(tokenizer: PreTrainedTokenizerBase) -> None:
    """Raise ValueError for a slow tokenizer: labels are aligned with pieces through word_ids, which only fast
    (Rust `tokenizers`) tokenizers give."""
    if not tokenizer.is_fast:
        raise ValueError(
            f"{type(tokenizer).__name__} is a slow tokenizer: token classification needs a fast one (it maps pieces "
            "back to words with word_ids); load it with AutoTokenizer or hf_bertscratch.tokenization.load_tokenizer."
        )


__all__ = [
    "IGNORE_INDEX",
    "SPECIAL_TOKENS",
    "align_labels_with_pieces",
    "check_fast_tokenizer",
    "build_parser",
    "check_mask_token",
    "check_tokenizer_fits",
    "check_vocab_file",
    "load_model_tokenizer",
    "load_tokenizer",
    "main",
    "train_wordpiece_tokenizer",
]


if __name__ == "__main__":
    main()
