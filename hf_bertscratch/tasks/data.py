"""A task's data: the flags that name the task and its data (`DataArguments`, checked as they are made), its splits
loaded and checked (`load_task_datasets`, `load_task_data`) and the tokenizer it is read with (`load_task_tokenizer`).

Fine-tuning (`hf_bertscratch.finetuning`), task-adaptive pretraining (`pretraining --task_text`) and the ONNX
evaluation (`bertscratch evaluate-onnx`) read a task's data through this module, so each loads the same splits with the
same checks and none of them depends on another.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import datasets
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from hf_bertscratch_base.data_files import is_text_file
from hf_bertscratch_base.model_config import check_max_seq_length
from hf_bertscratch_base.task_table import (
    HOLD_OUT_PERCENTAGE,
    LABEL_SEPARATOR,
    MIN_HELD_OUT,
    check_enough_held_out,
    check_file_layout,
    check_tagged_conll_file,
    check_test_file_as_eval,
    held_out_count,
)

from ..data import check_max_samples, dataset_source, load_raw_datasets, sample_examples
from ..embedding import EMBEDDING_OBJECTIVES, objective_for_labels
from ..tokenization import check_vocab_file, check_vocabulary, forget_load_options
from . import (
    COLUMN_ROLES,
    SHAPES,
    TASKS,
    TaskOverrides,
    TaskSpec,
    check_columns,
    finetune_defaults,
    required_columns,
    resolve_task,
    split_roles,
)
from .features import TRUNCATION_STRATEGIES
from .question_answering import is_squad_json, load_squad_json

AUTO = "auto"  # a setting chosen for the task at hand
logger = logging.getLogger(__name__)

# Question answering's --doc_stride at most (BERT's SQuAD runs: 128 of max_seq_length 384).
DOC_STRIDE = 128


def _held_out_shares() -> dict[str, float]:
    """The table tasks that hold a share of train out unless --validation_split_percentage is given (no validation
    split), with that share (`TaskSpec.validation_split_percentage`)."""
    return {name: task.validation_split_percentage for name, task in TASKS.items() if task.validation_split_percentage}


def _task_hold_outs() -> str:
    """What --validation_split_percentage's help says each table task holds out unless it is given: "imdb 5 (...);
    cola, sst2, ... 0 (...)"."""
    held = _held_out_shares()
    kept = [name for name in TASKS if name not in held]
    return (
        f"{', '.join(f'{name} {share:g}' for name, share in held.items())} (no validation split: its test split is "
        "scored once, at the end; 0 chooses on that test split instead, scored once as the eval split); "
        f"{', '.join(kept)} 0 (none held out: each has a validation split to choose on)"
    )


def _task_hold_out_defaults() -> str:
    """The tasks that hold a share of train out unless --validation_split_percentage is given, with their share, as
    --eval_split's help names them: "imdb's 5%%" (argparse shows it as 5%)."""
    return ", ".join(f"{name}'s {share:g}%%" for name, share in _held_out_shares().items())  # argparse: %% shows %


@dataclass
class DataArguments:
    """Which task and data to train and evaluate on, and how to turn examples into model inputs."""

    _argument_group_name = "data"  # its flags' heading in --help

    task: str | None = field(
        default=None, metadata={"help": f"A task from the table: {', '.join(TASKS)}. Or give a dataset below."}
    )
    task_type: str | None = field(
        default=None,
        metadata={
            "help": f"The shape of your own data's task: {', '.join(SHAPES)} (default: classification, or the "
            "--task's shape).",
            "choices": list(SHAPES),
            "metavar": "TASK_TYPE",  # the shapes are listed in the help: in the usage line they would be too wide
        },
    )
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset id (instead of --task)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's configuration."})
    train_file: str | None = field(
        default=None,
        metadata={"help": "A csv/tsv/json/jsonl/parquet training file (question answering: also SQuAD's nested json)."},
    )
    validation_file: str | None = field(default=None, metadata={"help": "An evaluation file, same formats."})
    test_file: str | None = field(
        default=None,
        metadata={
            "help": "A test file, scored once against its labels with the chosen model at the end (optional); one "
            "without labels, as GLUE's come, is predicted instead: test_predictions.csv, no test metrics."
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with local copies of the table's datasets (imdb/, sst2/, glue/, conll2003/ as in "
            "../shared/data); default $BERTSCRATCH_DATA_DIR; the Hub otherwise. A --train_file, --validation_file or "
            "--test_file replaces the split it names alone; train and validation files are read alone."
        },
    )
    train_split: str | None = field(default=None, metadata={"help": "Split to train on (default: the task's/train)."})
    eval_split: str | None = field(
        default=None,
        metadata={
            "help": "Split to choose checkpoints on (default: the task's, else validation; without one, a share of "
            "train held out, the test split scored once at the end). Naming the test split (test) chooses on it where "
            "none of train is held out: it is then scored once, as the eval split, and the run's record says so. "
            f"Where --validation_split_percentage holds a share of train out ({_task_hold_out_defaults()} by "
            "default), that share chooses the checkpoint and is the eval split scored (eval_*), and the test split "
            "is scored once, at the end, as the test split (test_*): add --validation_split_percentage 0 to choose "
            "on it."
        },
    )
    test_split: str | None = field(
        default=None,
        metadata={
            "help": "Split scored once at the end with the chosen model, or predicted when it has no labels (default: "
            "the task's; for your own data, test where it has one)."
        },
    )
    validation_split_percentage: float | None = field(
        default=None,
        metadata={
            "help": "For data without a validation split: hold out this percentage of the train split (the same "
            "examples in every run) to choose checkpoints on; the eval split is then scored once, at the end, as the "
            f"test split. Default, by --task: {_task_hold_outs()}. For your own data: {HOLD_OUT_PERCENTAGE} without "
            "a validation split (a test split is scored once, not chosen on; train data alone must hold out "
            f"{MIN_HELD_OUT} examples at least, or is refused; 0 is refused, leaving no split to choose on), else 0."
        },
    )
    text_column: str | None = field(
        default=None,
        metadata={
            "help": "Classification (single- or multi-label)/regression/embedding: the text column (default: text, or "
            "the task's)."
        },
    )
    text_pair_column: str | None = field(
        default=None,
        metadata={
            "help": "Classification (single- or multi-label)/regression/embedding: the second text of a sentence pair."
        },
    )
    label_column: str | None = field(
        default=None,
        metadata={
            "help": "Classification: class ids or names; multi-label classification: each row's list of label names "
            "(a jsonl list, or a csv/tsv field split on --label_separator; empty: no label); regression: numbers; "
            "embedding: similarity scores or 0/1 match labels (default: label)."
        },
    )
    label_separator: str | None = field(
        default=None,
        metadata={
            "help": "Multi-label classification: what separates the labels of a csv/tsv label field (default: "
            f'{LABEL_SEPARATOR!r}, the field quoted: "joy,anger"). A jsonl list needs none.'
        },
    )
    tokens_column: str | None = field(
        default=None, metadata={"help": "Token classification: a column of word lists (default: tokens)."}
    )
    tags_column: str | None = field(
        default=None, metadata={"help": "Token classification: one tag per word, e.g. IOB2 (default: ner_tags)."}
    )
    question_column: str | None = field(default=None, metadata={"help": "Question answering (default: question)."})
    context_column: str | None = field(default=None, metadata={"help": "Question answering (default: context)."})
    answers_column: str | None = field(
        default=None,
        metadata={"help": 'Question answering: {"text": [...], "answer_start": [...]} per row (default: answers).'},
    )
    id_column: str | None = field(default=None, metadata={"help": "Question answering: example ids (default: id)."})
    class_names: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated class (or tag) names in id order. Integer labels must lie in [0, #names); string "
            "labels must be among the names. Default: the task's names, else the sorted labels of the train split."
        },
    )
    embedding_objective: str = field(
        default=AUTO,
        metadata={
            "help": "Embedding tasks: cosine (pairs with similarity scores), in-batch (matching pairs, in-batch "
            "negatives), simcse (single texts, each against itself under dropout) or auto (cosine for scores, "
            "in-batch for 0/1 labels or unlabelled pairs; chosen from the train labels when the data loads).",
            "choices": [AUTO, *EMBEDDING_OBJECTIVES],
        },
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "Tokens per example after truncation, incl. [CLS]/[SEP] (default: the task's; 128, question "
            "answering 384, IMDB 512, CoLA and SST-2 64)."
        },
    )
    truncation: str = field(
        default=AUTO,
        metadata={
            "help": "How to cut single texts longer than max_seq_length: head (keep the start), tail (keep the end), "
            "head+tail (keep --head_tokens from the start and the rest from the end; Sun et al. 2019), or auto (the "
            "task's, tasks.TASK_DEFAULTS: head+tail for IMDB, head for the rest of the table). The saved classifier cuts longer inputs "
            "the same way.",
            "choices": [AUTO, *TRUNCATION_STRATEGIES],
        },
    )
    head_tokens: int | None = field(
        default=None,
        metadata={
            "help": "With --truncation head+tail: text tokens kept from the start (default: a quarter of "
            "max_seq_length, 128 of 512 as in Sun et al.)."
        },
    )
    doc_stride: int | None = field(
        default=None,
        metadata={
            "help": "Question answering: tokens shared by consecutive windows of a long context (default: a third of "
            f"max_seq_length, at most {DOC_STRIDE}: {DOC_STRIDE} of 384 as in BERT's SQuAD runs)."
        },
    )
    max_answer_length: int = field(default=30, metadata={"help": "Question answering: longest answer, in tokens."})
    n_best_size: int = field(
        default=20, metadata={"help": "Question answering: start and end candidates searched per window."}
    )
    max_train_samples: int | None = field(
        default=None,
        metadata={"help": "Train on this many training examples, drawn at random with --seed (default: all)."},
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Evaluate on this many evaluation examples, and as many test examples, drawn at random with --seed "
            "(default: all)."
        },
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenisation."})

    def __post_init__(self) -> None:
        # A bad flag fails as it is parsed; max_seq_length gets the task's default. The task the flags name, from the
        # table, is kept (not a field: neither a flag nor part of the arguments' dict), with what the task's defaults
        # filled in (for the run's log) and, once loaded, each split's size before a subset is drawn (for the card).
        self.chosen_defaults: list[str] = []
        self.length_chosen = False  # max_seq_length: the task's default, not given
        self.derived_from_length: list[str] = []  # head_tokens, doc_stride: set from max_seq_length, not given
        self.split_sizes: dict[str, int] = {}
        self.split_names: dict[str, str] = {}  # train, eval, test -> the data's split read as it (or held_out)
        self.chosen_on_test_split = False  # the eval split is the test split: its scores are those chosen on
        self.task_spec: TaskSpec = check_data_arguments(self)


def task_overrides(args: DataArguments) -> TaskOverrides:
    """The command line's task settings: the named task, the shape, splits, columns and class names."""
    columns = {role: getattr(args, f"{role}_column") for role in COLUMN_ROLES if getattr(args, f"{role}_column", None)}
    names = [n.strip() for n in args.class_names.split(",")] if args.class_names else None
    return TaskOverrides(
        task=args.task,
        task_type=args.task_type,
        train_split=args.train_split,
        eval_split=args.eval_split,
        test_split=args.test_split,
        columns=columns,
        label_names=names,
        label_separator=args.label_separator,
    )


def check_data_arguments(args: DataArguments) -> TaskSpec:
    """Every check of the data arguments that needs no data (`DataArguments` runs them when made), filling
    `max_seq_length` with the task's default when unset; returns the resolved task."""
    if args.task is None and not (args.dataset_name or args.train_file):
        raise ValueError("Give --task, --dataset_name or --train_file.")
    if args.truncation not in (AUTO, *TRUNCATION_STRATEGIES):
        raise ValueError(f"Unknown --truncation {args.truncation!r}; expected one of {[AUTO, *TRUNCATION_STRATEGIES]}.")
    check_max_samples(args)
    task = resolve_task(task_overrides(args))
    defaults = finetune_defaults(task, args.task)
    args.chosen_defaults.clear()  # what the task's defaults fill in, for the run's log
    args.length_chosen = args.max_seq_length is None
    if args.max_seq_length is None:
        args.max_seq_length = defaults.max_seq_length
        args.chosen_defaults.append(f"max_seq_length {args.max_seq_length}")
    if args.truncation == AUTO:
        args.truncation = defaults.truncation
        args.chosen_defaults.append(f"truncation {args.truncation}")
    if args.max_seq_length < 3:
        raise ValueError(f"--max_seq_length must be at least 3 ([CLS] text [SEP]), got {args.max_seq_length}.")
    args.derived_from_length = [name for name in ("head_tokens", "doc_stride") if getattr(args, name) is None]
    _derive_from_length(args, task)
    _check_lengths(args, task)
    # The table task's; for data of one's own, or where a test split is given, or a dataset may have one, whether a
    # share is held out waits for the data's splits (`load_task_datasets`: only where there is no validation split).
    own_data = not task.dataset_name
    if args.validation_split_percentage is None and not (
        own_data or args.test_file or args.test_split or args.dataset_name
    ):
        args.validation_split_percentage = task.validation_split_percentage
        if args.validation_split_percentage:
            args.chosen_defaults.append(f"validation_split_percentage {args.validation_split_percentage:g}")
    percentage = args.validation_split_percentage
    if percentage is not None and not 0 <= percentage < 100:
        raise ValueError(f"--validation_split_percentage must be in [0, 100), got {percentage}.")
    if task.shape == "question-answering":
        for name in ("max_answer_length", "n_best_size"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}.")
    return task


def _derive_from_length(args: DataArguments, task: TaskSpec) -> None:
    """Set what was not given of --head_tokens and --doc_stride (`args.derived_from_length`) from max_seq_length,
    naming them in the run's log where they apply (head+tail truncation; question answering)."""
    length = args.max_seq_length
    assert length is not None  # check_data_arguments fills it first
    derived = {"head_tokens": length // 4, "doc_stride": min(DOC_STRIDE, length // 3)}
    applies = {"head_tokens": args.truncation == "head+tail", "doc_stride": task.shape == "question-answering"}
    args.chosen_defaults[:] = [entry for entry in args.chosen_defaults if entry.split()[0] not in derived]
    for name in args.derived_from_length:
        setattr(args, name, derived[name])
        if applies[name]:
            args.chosen_defaults.append(f"{name} {derived[name]}")


def _check_lengths(args: DataArguments, task: TaskSpec) -> None:
    """--head_tokens (head+tail truncation) and --doc_stride (question answering) within max_seq_length."""
    length = args.max_seq_length
    assert length is not None and args.head_tokens is not None and args.doc_stride is not None  # filled first
    if args.truncation == "head+tail" and not 0 <= args.head_tokens <= length - 2:
        raise ValueError(f"--head_tokens must be in [0, max_seq_length {length} - 2], got {args.head_tokens}.")
    if task.shape == "question-answering" and not 0 < args.doc_stride < length:
        raise ValueError(f"--doc_stride must be in [1, max_seq_length {length}), got {args.doc_stride}.")


def fit_length_to_model(args: DataArguments, max_position_embeddings: int | None) -> None:
    """Make max_seq_length fit a model of `max_position_embeddings` positions (None: no such limit): one the task
    chose (`args.length_chosen`) is cut to them, with what was derived from it, and the run's log says so; a
    --max_seq_length given beyond them is refused (`check_max_seq_length`)."""
    length, positions = args.max_seq_length, max_position_embeddings
    if args.length_chosen and length is not None and positions is not None and length > positions:
        args.chosen_defaults[:] = [
            f"max_seq_length {positions} (the model's positions; the task's default is {length})"
            if entry == f"max_seq_length {length}"
            else entry
            for entry in args.chosen_defaults
        ]
        args.max_seq_length = positions
        _derive_from_length(args, args.task_spec)
        _check_lengths(args, args.task_spec)  # a --head_tokens or --doc_stride given may no longer fit
    check_max_seq_length(args.max_seq_length, positions)


# The flag that names the file of each split `load_raw_datasets` reads from files.
SPLIT_FILE_FLAGS = {"train": "train_file", "validation": "validation_file", "test": "test_file"}


def _split_files(args: DataArguments) -> dict[str, str]:
    """Split -> the file its --*_file flag gives, for the splits given one."""
    return {split: path for split, flag in SPLIT_FILE_FLAGS.items() if (path := getattr(args, flag))}


def _read_question_answering_files(args: DataArguments) -> datasets.DatasetDict | None:
    """SQuAD's own nested json files (data -> paragraphs -> qas), flattened; None when the files are not that."""
    files = _split_files(args)
    if not files or not all(is_squad_json(path) for path in files.values()):
        return None
    return datasets.DatasetDict({split: load_squad_json(path) for split, path in files.items()})


def _read_split_files(
    args: DataArguments, task: TaskSpec, cache_dir: str | None, unread: str | None
) -> datasets.DatasetDict:
    """The splits the --*_file flags give, each read from its file; `unread`: a dataset named but not read, which
    the log says."""
    raw = _read_question_answering_files(args) if task.shape == "question-answering" else None
    if raw is None:
        raw = load_raw_datasets(
            dataset_name=unread,
            dataset_config_name=args.dataset_config_name or task.dataset_config_name,
            train_file=args.train_file,
            validation_file=args.validation_file,
            test_file=args.test_file,
            data_dir=args.data_dir,
            cache_dir=cache_dir,
            text_files_as_conll=task.shape == "token-classification",
        )
    return raw


def _load_splits(args: DataArguments, task: TaskSpec, cache_dir: str | None = None) -> datasets.DatasetDict:
    """The data's splits by name: each one a --*_file names from that file, the others from the dataset the task
    reads (its local copy under --data_dir, else the Hub), which is read only where the run needs a split (the task's
    train or eval split) that no file gives; it then gives the task's test split too, unless --test_file does. Where
    files and the dataset mix, one line of the log says which split comes from where."""
    files = _split_files(args)
    dataset = args.dataset_name or task.dataset_name or None
    config = args.dataset_config_name or task.dataset_config_name
    needed = [split for split in (task.train_split, task.eval_split or "validation") if split]
    if files and (dataset is None or all(split in files for split in needed)):
        return _read_split_files(args, task, cache_dir, dataset)
    try:
        raw = load_raw_datasets(
            dataset_name=dataset, dataset_config_name=config, data_dir=args.data_dir, cache_dir=cache_dir
        )
    except FileNotFoundError as error:  # no local copy and no Hub: say which splits the files left to it
        if not files:
            raise
        left = [split for split in needed if split not in files]
        flags = ", ".join(f"--{SPLIT_FILE_FLAGS[split]}" for split in left if split in SPLIT_FILE_FLAGS)
        raise FileNotFoundError(
            f"{error} The files given leave the {' and '.join(left)} split{'s' if len(left) > 1 else ''} to it"
            + (f" (or give {flags} too)." if flags else ".")
        ) from error
    if not files:
        return raw
    assert dataset is not None  # files leave splits to a dataset only where there is one
    given = _read_split_files(args, task, cache_dir, None)
    kept = [split for split in raw if split not in given]
    from_files = "; ".join(f"{split} from {files[split]!r} (--{SPLIT_FILE_FLAGS[split]})" for split in given)
    source = dataset_source(dataset, config, args.data_dir)
    logger.info("Splits: %s; %s from %s.", from_files, ", ".join(kept) or "none", source)
    return datasets.DatasetDict({**{split: raw[split] for split in kept}, **given})


def load_task_datasets(args: DataArguments, task: TaskSpec, cache_dir: str | None = None) -> datasets.DatasetDict:
    """The train, eval and (when the task has one) test splits, keyed "train", "eval", "test", checked for
    presence, columns and emptiness before any training. Without a validation split, a share of the train split is
    held out to choose checkpoints on (`HOLD_OUT_PERCENTAGE`, or the task's): where a test split is given, it is
    scored once, at the end; where train is all the data, the held-out examples are the eval split reported, and at
    least `MIN_HELD_OUT` of them. Where the eval split is the test split (--eval_split names it, or IMDB's with none
    of train held out), it is scored once too, as the eval split that checkpoints are chosen on, which the log says
    (`log_test_split_chosen_on`)."""
    raw = _load_splits(args, task, cache_dir)
    roles = split_roles(task, list(raw), bool(args.test_file), bool(args.test_split), bool(args.eval_split))
    share_chosen = args.validation_split_percentage is None  # not given: the task's, else by the data's splits
    if share_chosen:
        task_share = task.validation_split_percentage or 0  # IMDB's, from a named copy of its dataset too
        args.validation_split_percentage = (task_share or HOLD_OUT_PERCENTAGE) if not roles["eval"] else task_share
    check_files_read(args, roles)
    if not roles["eval"] and not args.validation_split_percentage:
        raise ValueError(
            f"The data has no validation split to evaluate on (its splits: {list(raw)}) and "
            "--validation_split_percentage 0 holds none of train out: give --validation_file, name one of its splits "
            "with --eval_split, or hold out part of the train split with --validation_split_percentage (default "
            f"{HOLD_OUT_PERCENTAGE})."
        )
    roles = {role: split for role, split in roles.items() if split}  # no eval split: held out of train below
    for role, split in roles.items():
        if split not in raw:
            raise ValueError(f"The {role} split {split!r} is not in the dataset; it has {list(raw)}.")
    chosen = datasets.DatasetDict({role: raw[split] for role, split in roles.items()})
    for role, split in roles.items():  # a CoNLL or SQuAD-format file without its --task_type
        if path := getattr(args, SPLIT_FILE_FLAGS.get(split, ""), None):
            required = required_columns(task, role, chosen["train"].column_names)
            check_file_layout(task, split, path, chosen[role].column_names, required)
    check_tagged_conll_files(args, task, roles, chosen)
    if "eval" in chosen:  # none when it is held out of train below
        check_test_file_as_eval(task, roles, chosen["eval"].column_names, args.test_file)
    if "test" in chosen:  # predicted, not scored, where it has no labels at all
        chosen["test"] = without_empty_labels(chosen["test"], task.scored_column)
    for role, split in chosen.items():  # before a hold-out draws from train: rows are the file's
        check_labels_given(split, task, role)
    args.split_names = dict(roles)
    if args.validation_split_percentage:
        if share_chosen and set(chosen) == {"train"}:  # all the run scores: a handful at least
            check_enough_held_out(len(chosen["train"]), args.validation_split_percentage)
        chosen = hold_out_validation(chosen, args.validation_split_percentage)
        scored_once = roles.get("test", roles.get("eval"))  # the former eval split becomes the test split
        args.split_names = {"train": roles["train"], "eval": HELD_OUT, **({"test": scored_once} if scored_once else {})}
    log_test_split_chosen_on(args, roles.get("eval"), len(chosen["eval"]))
    for role, split in chosen.items():
        check_columns(split.column_names, required_columns(task, role, chosen["train"].column_names), role)
        if len(split) == 0:
            raise ValueError(f"The {role} split is empty.")
    if task.shape == "question-answering" and task.columns["id"] not in chosen["train"].column_names:
        chosen = datasets.DatasetDict(
            {role: split.add_column(task.columns["id"], [f"{role}-{i}" for i in range(len(split))])
             for role, split in chosen.items()}
        )  # fmt: skip
    return chosen


def chooses_on_test_split(args: DataArguments, eval_split: str | None = None) -> bool:
    """Whether checkpoints (and a multi-label threshold) are chosen on the test split: the split read as eval is the
    test split (the task's, else "test") and no share of train is held out in its place. `eval_split`: the data's
    split read as eval once the splits are known (`split_roles`; "" where one is held out of train); None: the task's
    (--eval_split, else the table's: IMDB's is its test split), as the command line is parsed. The share held out:
    --validation_split_percentage, else the task's (IMDB's 5%)."""
    task = args.task_spec
    split = task.eval_split if eval_split is None else eval_split
    share = args.validation_split_percentage
    held_out = share if share is not None else task.validation_split_percentage
    return bool(split) and not held_out and split == (task.test_split or "test")


def test_split_chosen_by(args: DataArguments) -> str:
    """What makes the eval split the test split (`chooses_on_test_split`), as a message names it: --eval_split, or the
    task's own eval split with none of train held out in its place."""
    if args.eval_split:
        return f"--eval_split {args.eval_split}"
    return "the task's eval split, with --validation_split_percentage 0"


def log_test_split_chosen_on(args: DataArguments, eval_split: str | None, examples: int) -> None:
    """Where checkpoints are chosen on the test split (`chooses_on_test_split`: `eval_split`, the data's split read as
    eval, is the test split), say in one line that it is scored once, as the eval split, so that its scores are those
    of the split checkpoints are chosen on, and mark the arguments so (`args.chosen_on_test_split`, for the run's
    record)."""
    args.chosen_on_test_split = chooses_on_test_split(args, eval_split or "")
    if args.chosen_on_test_split:
        logger.info(
            "Checkpoints are chosen on the test split %r (%s examples, %s), which is scored once, as the eval split: "
            "its eval_* scores are those of the split the checkpoints were chosen on, not of examples the choice "
            "never saw.",
            eval_split, f"{examples:,}", test_split_chosen_by(args),
        )  # fmt: skip


def check_files_read(args: DataArguments, roles: dict[str, str]) -> None:
    """Fail in one line when a --*_file gives a split that the run reads as none of train, eval and test (`roles`),
    naming the file and the splits read: a file given is never left unread. Where a share of train is held out to
    choose on (IMDB), the advice also turns that off, so that the file is what checkpoints are chosen on."""
    for split, flag in SPLIT_FILE_FLAGS.items():
        path = getattr(args, flag)
        if path and split not in roles.values():
            share = args.validation_split_percentage
            if share:
                read = f"train {roles['train']!r}, {share:g}% of it held out to choose on"
                scored = [name for role, name in roles.items() if role != "train" and name]  # the test split
                read += "".join(f", {name!r} scored at the end" for name in scored)
                tests = "".join(f" --test_split {name}" for name in scored)
                fix = f"to choose on it, add --eval_split {split}{tests} --validation_split_percentage 0"
            else:
                read = ", ".join(f"{role} {name!r}" for role, name in roles.items() if name)
                fix = f"name its split {split!r} with --eval_split or --test_split"
            raise ValueError(
                f"The {split} file {path!r} (--{flag}) is no split the run reads (it reads {read}): {fix}, or leave "
                "the file out."
            )


def check_tagged_conll_files(
    args: DataArguments, task: TaskSpec, roles: dict[str, str], chosen: datasets.DatasetDict
) -> None:
    """Fail in one line, naming the file, when a train or eval split of a token-classification task comes from a
    CoNLL text file of words alone (`hf_bertscratch.data.read_conll` gives it no tags column): such a file is a test
    file to predict, and the column check would only ask for a --tags_column (`check_tagged_conll_file`, which the
    front door runs on the file's first token line)."""
    for role, split in roles.items():
        path = getattr(args, SPLIT_FILE_FLAGS.get(split, ""), None)
        if path and is_text_file(path):
            check_tagged_conll_file(task, role, split, path, chosen[role].column_names)


def unlabelled_rows(split: datasets.Dataset, column: str) -> list[int]:
    """The rows of `split` with no value in its label `column` (labels, tags or answers): an empty csv field, a JSON
    null, or -1 in a ClassLabel column (how `datasets` marks a missing class: the Hub's GLUE test splits)."""
    classes = isinstance(split.features[column], datasets.ClassLabel)
    return [i for i, value in enumerate(split[column]) if value is None or (classes and value == -1)]


def without_empty_labels(split: datasets.Dataset, column: str | None) -> datasets.Dataset:
    """A test split whose label `column` holds no value at all (`unlabelled_rows`) as one without that column, so
    that it is predicted, not scored, as a test split without the column is. A column with some values stays, for
    `check_labels_given` to refuse the rows without one."""
    if column and column in split.column_names and len(unlabelled_rows(split, column)) == len(split):
        return split.remove_columns(column)
    return split


def check_labels_given(split: datasets.Dataset, task: TaskSpec, role: str) -> None:
    """Fail in one line when rows of the `role` split have no value in the task's label, tags or answers column
    (`unlabelled_rows`), naming which of them it is, before the label set is read: a missing label is no class (`None`
    would become one) and no number. A multi-label task's empty field is an empty label set: an example of no label."""
    column, what = task.scored_column, task.scored_role
    if not column or column not in split.column_names or task.shape == "multi-label-classification":
        return
    missing = unlabelled_rows(split, column)
    if missing:
        raise ValueError(
            f"{len(missing)} of the {len(split)} examples of the {role} split have no {what} in column {column!r} (an "
            f"empty field or a null; the first is example {missing[0]}, counting from 0): give each example its "
            f"{what}, or remove those rows."
        )


# Which train examples are held out (`hold_out_validation`): one draw, the same for every run and seed, so that runs
# from different weights train on the same examples.
HOLD_OUT_SEED = 0
HELD_OUT = "held_out"  # the name of the split held out


def hold_out_validation(chosen: datasets.DatasetDict, percentage: float) -> datasets.DatasetDict:
    """`percentage` % of the train split, drawn with `HOLD_OUT_SEED`, as the eval split checkpoints are chosen on;
    the former eval split, if any, becomes the test split, scored once at the end (a test split without an eval
    split stays the test split)."""
    if "eval" in chosen and "test" in chosen:
        raise ValueError(
            f"--validation_split_percentage {percentage:g} holds out train examples for data without a validation "
            "split, but this data has an eval and a test split: give --validation_split_percentage 0."
        )
    held = held_out_count(len(chosen["train"]), percentage)
    if held >= len(chosen["train"]):
        raise ValueError(
            f"--validation_split_percentage {percentage:g} of {len(chosen['train'])} train examples leaves none to "
            "train on."
        )
    split = chosen["train"].train_test_split(test_size=held, seed=HOLD_OUT_SEED)
    # named apart from the train split (train_test_split keeps its name) and the eval one, for logs and records
    validation = split["test"].flatten_indices()
    validation = datasets.Dataset(validation.data, info=validation.info.copy(), split=datasets.NamedSplit(HELD_OUT))
    if "test" in chosen:  # no validation split: the test split is not chosen on
        logger.info(
            "No validation split: checkpoints are chosen on %s train examples held out (%g%%, split %s), not on the %s "
            "examples of the test split, which the chosen model meets once, at the end.",
            f"{held:,}", percentage, HELD_OUT, f"{len(chosen['test']):,}",
        )  # fmt: skip
        return datasets.DatasetDict({"train": split["train"], "eval": validation, "test": chosen["test"]})
    if "eval" not in chosen:  # train data alone
        logger.info(
            "No validation split: checkpoints are chosen on %s train examples held out (%g%%, split %s), which are the "
            "eval split scored and reported; there is no test split.",
            f"{held:,}", percentage, HELD_OUT,
        )  # fmt: skip
        return datasets.DatasetDict({"train": split["train"], "eval": validation})
    logger.info(
        "Checkpoints are chosen on %s train examples held out (%g%%, split %s); the %s examples of the "
        "%s split are scored once, at the end, as the test split.",
        f"{held:,}", percentage, HELD_OUT, f"{len(chosen['eval']):,}", chosen["eval"].split or "eval",
    )  # fmt: skip
    return datasets.DatasetDict({"train": split["train"], "eval": validation, "test": chosen["eval"]})


def load_task_data(args: DataArguments, task: TaskSpec, cache_dir: str | None, seed: int) -> datasets.DatasetDict:
    """The task's splits (`load_task_datasets`), the train split drawn down to --max_train_samples and the eval and
    test splits to --max_eval_samples, at random with `seed`. An embedding task's `--embedding_objective auto` becomes
    the objective its train labels call for (`embedding.objective_for_labels`), once, here."""
    raw = load_task_datasets(args, task, cache_dir)
    args.split_sizes = {role: len(split) for role, split in raw.items()}  # before the draw: what a card's subset is of
    raw["train"] = sample_examples(raw["train"], args.max_train_samples, seed)
    for role in ("eval", "test"):
        if role in raw:
            raw[role] = sample_examples(raw[role], args.max_eval_samples, seed)
    if task.shape == "embedding" and args.embedding_objective == AUTO:
        label = task.columns.get("label")
        labels = list(raw["train"][label]) if label and label in raw["train"].column_names else None
        args.embedding_objective = objective_for_labels(labels)
        logger.info("Task default, from the train labels: embedding_objective %s.", args.embedding_objective)
    return raw


def load_task_tokenizer(
    name_or_path: str,
    cache_dir: str | None = None,
    remedy: str = "pass --tokenizer_name (a tokenizer folder or Hub id)",
) -> PreTrainedTokenizerBase:
    """The tokenizer of a model folder or Hub id (the one saved with the model, or `--tokenizer_name`); it must have
    a vocabulary, read from a vocab.txt that lists each word once where it is one, and [CLS] and [SEP]. `remedy` ends
    the error of a folder that holds no tokenizer: what the command takes instead."""
    tokenizer = forget_load_options(AutoTokenizer.from_pretrained(name_or_path, cache_dir=cache_dir))
    check_vocabulary(tokenizer, name_or_path, remedy)
    check_vocab_file(name_or_path)
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError(f"Tokenizer {name_or_path!r} lacks a [CLS] or [SEP] token.")
    return tokenizer
