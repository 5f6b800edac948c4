"""Command-line arguments as every entry point of the package reads them: flags, or one `.json` file of them.

`ArgumentParser` is transformers' `HfArgumentParser` as a command-line tool should behave: a bad value ends the
command with one line that names it (and the closest valid name), no usage dump; a shortened flag is refused (with
"did you mean") rather than taken for the flag it starts; `--help` lists the command's own flags, grouped, with the
dozen transformers `TrainingArguments` flags people use (or only the flags a first run needs, where the command names
them), and `--help_all` every flag, transformers' too; and it makes a command's dataclasses in order, handing each
the ones made before it that its `__post_init__` takes, so that every dataclass checks and completes itself as it is
made, even where a default or a check depends on another's flags. `parse_args_or_json` is the one place that decides
between flags and a `.json` file, so every command (`bertscratch pretrain`, `finetune`, `convert`, `push_to_hub`, the
benchmark, ...) accepts the same two forms and names a missing file the same way. `check_max_seq_length`
(`hf_bertscratch_base.model_config`'s, which the front door runs too) is the one check of a `--max_seq_length` against
the positions of the model it is for, with one message for every command.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from transformers import HfArgumentParser, TrainingArguments

from hf_bertscratch_base import HELP_WIDTH, did_you_mean
from hf_bertscratch_base.flags import OneLineParser

# transformers' TrainingArguments flags that `--help` lists beside the command's own (the rest: `--help_all`).
COMMON_TRAINER_FLAGS = frozenset(
    {
        "output_dir",
        "num_train_epochs",
        "max_steps",
        "learning_rate",
        "per_device_train_batch_size",
        "per_device_eval_batch_size",
        "gradient_accumulation_steps",
        "warmup_steps",
        "weight_decay",
        "lr_scheduler_type",
        "seed",
        "bf16",
        "fp16",
        "tf32",
        "eval_strategy",
        "eval_steps",
        "save_strategy",
        "save_steps",
        "save_total_limit",
        "logging_steps",
        "report_to",
        "resume_from_checkpoint",
        "push_to_hub",
        "hub_model_id",
        "disable_tqdm",
        "dataloader_num_workers",
    }
)
HELP_ALL = "--help_all"


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" only where the help does not already say its default and X is not None; names each
    flag once (not its `--dashed-alias`), in pages `HELP_WIDTH` columns wide."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs["width"] = HELP_WIDTH
        super().__init__(prog, **kwargs)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.dest == "help":
            return super()._format_action_invocation(action)
        if action.nargs == 0:
            return action.option_strings[0]
        return f"{action.option_strings[0]} {self._format_args(action, self._get_default_metavar_for_optional(action))}"

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or "default" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action) or ""  # typeshed says `str | None`; this base class gives a str


class _HelpAllAction(argparse.Action):
    """`--help_all`: the help with transformers' TrainingArguments flags listed too."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        for action, help in getattr(parser, "hidden_help", {}).items():
            action.help = help
        parser.print_help()
        parser.exit()


class ArgumentParser(OneLineParser, HfArgumentParser):
    """`HfArgumentParser` with one-line errors, "did you mean" suggestions, no abbreviated flags and help grouped for
    people.

    Each argument dataclass that sets `_argument_group_name` is its own group in `--help`. transformers'
    `TrainingArguments` flags that the command's dataclass does not redefine, beyond `COMMON_TRAINER_FLAGS`, are left
    out of `--help` and the usage line, and listed by `--help_all`. `first_run` (flag names without dashes), where
    given, is all that `--help` lists: what a first run needs; every other flag waits for `--help_all`.

    The dataclasses are made in order (`parse_dict`, from flags or a `.json` file alike). One whose defaults or checks
    depend on another's flags takes that one, made before it, as an `InitVar` that its `__post_init__` names with the
    dataclass's type (`data_args: InitVar = None` and `def __post_init__(self, data_args: DataArguments | None = None)`;
    the `InitVar` bare, as Python 3.10's `get_type_hints` refuses a subscripted one under postponed annotations).
    """

    def __init__(self, dataclass_types: Any = None, first_run: Iterable[str] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # `--learning_rat` is a typo to name, not --learning_rate
        super().__init__(dataclass_types, **kwargs)
        self._describe_negations()
        self.hidden_help: dict[argparse.Action, str | None] = {}
        inherited = _inherited_trainer_fields(self.dataclass_types)
        if first_run is not None:
            self._hide_all_but(set(first_run), trainer_flags=bool(inherited))
            inherited = set()  # hidden already, each in its own group
        if inherited:
            group = self.add_argument_group(
                "more of transformers' TrainingArguments", f"All of them pass through to the Trainer ({HELP_ALL})."
            )
            for action in list(self._actions):
                if action.dest in inherited and action.dest not in COMMON_TRAINER_FLAGS:
                    for owner in self._action_groups:
                        if action in owner._group_actions:
                            owner._group_actions.remove(action)
                    group._group_actions.append(action)
                    self.hidden_help[action], action.help = action.help, argparse.SUPPRESS
            self.add_argument(
                HELP_ALL, action=_HelpAllAction, help="Show every flag, transformers' TrainingArguments too, and exit."
            )

    def _describe_negations(self) -> None:
        """Give each `--no_X` that HfArgumentParser adds for a flag on by default its own help: it repeats X's, and
        its "(default: False)" read as if X were off by default."""
        for action in self._actions:
            if isinstance(action, argparse._StoreFalseAction) and action.option_strings[0].startswith("--no_"):
                action.help = f"Same as --{action.dest} false."
                action.default = None  # X's default, which X's own help gives; none appended here

    def _hide_all_but(self, shown: set[str], trainer_flags: bool) -> None:
        """Leave out of `--help` every flag whose name is not in `shown` (`--help_all` lists them, in their groups,
        transformers' TrainingArguments flags too where the command takes them: `trainer_flags`), and shorten the
        usage line to the required flags."""
        unknown = shown - {action.dest for action in self._actions}
        if unknown:
            raise ValueError(f"first_run names flags the command does not take: {sorted(unknown)}")
        for action in self._actions:
            if action.option_strings and action.dest not in shown and action.dest != "help":
                self.hidden_help[action], action.help = action.help, argparse.SUPPRESS
        required = [f"{action.option_strings[0]} {action.dest.upper()}" for action in self._actions if action.required]
        self.usage = " ".join(["%(prog)s", *required, "[FLAG VALUE ...]  (or: %(prog)s ARGUMENTS.json)"])
        every = "every flag, transformers' TrainingArguments too," if trainer_flags else "every flag"
        self.add_argument(HELP_ALL, action=_HelpAllAction, help=f"Show {every} and exit.")
        self.epilog = f"{len(self.hidden_help)} more flags: {HELP_ALL}."

    def parse_dict(self, args: dict[str, Any], allow_extra_keys: bool = False) -> tuple[Any, ...]:
        """The dataclasses made in order from `args` (field name -> value), each handed the ones made before it that
        its `__post_init__` takes; a key no dataclass takes is an error, after the dataclasses' own checks (as in
        `HfArgumentParser`, whose `parse_json_file` calls this)."""
        made: list[Any] = []
        for dtype in self.dataclass_types:
            names = _field_names(dtype)
            made.append(dtype(**{k: v for k, v in args.items() if k in names}, **_handed_over(dtype, made)))
        taken = set().union(*map(_field_names, self.dataclass_types))
        if not allow_extra_keys and set(args) - taken:
            raise ValueError(f"Some keys are not used by the HfArgumentParser: {sorted(set(args) - taken)}")
        return tuple(made)


def described_values(descriptions: Mapping[str, str], values: Iterable[str]) -> str:
    """ "a (what a does), b (...) or c (...)": every value a flag takes, in the order of `values` (the tuple its check
    or its choices use), with its description, for the flag's help. The help cannot leave a value out: a value
    without a description is a KeyError, and a description of a value the flag does not take a ValueError, where the
    help is made (when its module is imported)."""
    values = list(values)
    extra = set(descriptions) - set(values)
    if extra:
        raise ValueError(f"Described values the flag does not take: {sorted(extra)}; it takes {values}.")
    items = [f"{value} ({descriptions[value]})" for value in values]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _field_names(dtype: type) -> set[str]:
    """The fields of the dataclass `dtype` that its constructor takes: the keys of an arguments file or dict."""
    return {f.name for f in dataclasses.fields(dtype) if f.init}


def _handed_over(dtype: type, made: list[Any]) -> dict[str, Any]:
    """What `dtype`'s `__post_init__` takes beyond `self` (its `InitVar`s): for each, the dataclass of `made` of the
    type it names, or None where none was made."""
    post_init = getattr(dtype, "__post_init__", None)
    names = list(inspect.signature(post_init).parameters)[1:] if post_init else []
    if not names:
        return {}
    hints = typing.get_type_hints(post_init)
    kinds = {name: typing.get_args(hints[name]) or (hints[name],) for name in names}
    return {name: next((earlier for earlier in made if isinstance(earlier, kinds[name])), None) for name in names}


def _inherited_trainer_fields(dataclass_types: Iterable[type]) -> set[str]:
    """Names of the TrainingArguments fields a TrainingArguments subclass among `dataclass_types` takes unchanged."""
    base = TrainingArguments.__dataclass_fields__
    names: set[str] = set()
    for dtype in dataclass_types:
        if isinstance(dtype, type) and issubclass(dtype, TrainingArguments):
            own = dtype.__dataclass_fields__
            names |= {name for name, field in base.items() if own.get(name) is field}
    return names


def parse_args_or_json(
    parser: HfArgumentParser, argv: list[str] | None = None, positional: tuple[str, ...] = ()
) -> tuple[Any, ...]:
    """The parser's dataclasses from `argv` (default `sys.argv[1:]`), or from its one argument ending in `.json`.

    `positional` names the fields that leading arguments without a dash stand for (`convert SOURCE OUTPUT_DIR` is
    `--source SOURCE --output_dir OUTPUT_DIR`). A single `.json` argument that is not a file, and an argument no
    dataclass takes, are errors that name it (argparse's usage error, exit code 2).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].endswith(".json") and len(argv) > 1:
        parser.error(
            f"an arguments file is read alone: put {argv[1]} in {argv[0]}, or give flags only (expected flags, or "
            "one .json file of them)"
        )
    if len(argv) == 1 and argv[0].endswith(".json"):
        path = Path(argv[0])
        if not path.is_file():
            parser.error(f"arguments file {argv[0]!r} does not exist (expected flags, or one .json file of them)")
        _check_json_keys(parser, path)
        return parser.parse_json_file(json_file=path.resolve())
    leading: list[str] = []
    while argv and not argv[0].startswith("-") and len(leading) < len(positional):
        leading.append(argv.pop(0))
    flags = [item for name, value in zip(positional, leading) for item in (f"--{name}", value)]
    # An unknown flag is named before the dataclasses are made, whose own checks would otherwise speak first.
    namespace, remaining = parser.parse_known_args(args=[*flags, *argv])
    if remaining:
        parser.error(f"unrecognized arguments: {' '.join(remaining)}")
    return tuple(parser.parse_dict(vars(namespace)))


def _check_json_keys(parser: HfArgumentParser, path: Path) -> None:
    """Name, before any dataclass is made (whose own checks would speak first), a key of the arguments file `path`
    that no flag of `parser` takes, with the closest flag's name."""
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        parser.error(f"arguments file {str(path)!r} is not a JSON object of flags: {error}")
    if not isinstance(given, dict):
        parser.error(f"arguments file {str(path)!r} holds a {type(given).__name__}, expected a JSON object of flags")
    taken = set().union(*map(_field_names, parser.dataclass_types))
    unknown = sorted(set(given) - taken)
    if unknown:
        hint = did_you_mean(unknown[0], taken)
        parser.error(f"arguments file {str(path)!r} has key(s) no flag takes: {unknown}{hint}")
