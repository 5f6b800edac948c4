"""Share a trained BertScratch model on the Hugging Face Hub so that anyone can load it with transformers alone.

    bertscratch push MODEL_DIR --repo_id USER/NAME [--private] [--revision BRANCH] [--dry_run DIR]

Stages: (1) validate the model folder, the repo id and the token, before anything is written or uploaded;
(2) assemble the upload folder: weights (safetensors), `config.json` with a complete `auto_map`, the configuration and
modeling code for `trust_remote_code=True`, the tokenizer, metrics, plots and the model card (pointed at the repo);
a model subfolder (the `generator/` of an ELECTRA run) goes up beside them with its own weights, config, code and
tokenizer, so it loads with `from_pretrained(repo_id, subfolder=...)`;
(3) hand that folder to `huggingface_hub` (`HfApi.create_repo`, with `repo_info` and `update_repo_settings` making an
existing public repository private under `--private`; `create_branch`, `upload_folder`). With `--dry_run DIR` stage 3
is replaced by writing the folder to DIR and listing it: nothing touches the network.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import CommitInfo, HfApi, ModelCard, constants, get_token
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import TrainingArguments

from hf_bertscratch_base.model_reference import hub_offline

from .arguments import ArgumentParser, parse_args_or_json
from .cards import info_from_model_folder, set_card_repo, source_name, write_model_card
from .configuration_bertscratch import BertScratchConfig
from .convert import CONVERTIBLE_MODEL_TYPES, copy_sentence_transformers_files
from .modeling_bertscratch import code_files, family_auto_map
from .run_folder import GENERATOR_FOLDER, output_dir_of, staged_folder
from .tokenization import LOAD_OPTIONS

logger = logging.getLogger(__name__)

# What goes up, by file-name pattern (top level of the model folder and of its `MODEL_SUBFOLDERS` only), with an
# embedding model's sentence-transformers files and module folders (`copy_sentence_transformers_files`):
# checkpoints, optimizer states, TensorBoard logs, pickled training arguments and pytorch_model.bin stay home.
UPLOAD_PATTERNS: dict[str, str] = {
    "config.json": "configuration with the auto_map for remote code",
    "*.safetensors": "weights",
    "model.safetensors.index.json": "index of sharded weights",
    "configuration_bertscratch.py": "remote code: configuration",
    "modeling_bertscratch.py": "remote code: model",
    "batching_bertscratch.py": "remote code: how the model runs a batch",
    "padding_bertscratch.py": "remote code: a padded batch's real tokens and each device's rules for it",
    "cpu_matmul.py": "remote code: the model's CPU GEMM path",
    "tokenizer.json": "tokenizer",
    "tokenizer_config.json": "tokenizer",
    "special_tokens_map.json": "tokenizer",
    "added_tokens.json": "tokenizer",
    "vocab.txt": "tokenizer",
    "*_results.json": "metrics",
    "*.png": "training curves and confusion matrix",
    "README.md": "model card",
}
# Subfolders holding a model of their own, uploaded beside the main one when present.
MODEL_SUBFOLDERS: dict[str, str] = {GENERATOR_FOLDER: "ELECTRA's generator, a fill-mask model"}
# What an upload replaces, deleted in its commit unless uploaded again: weight shards of an earlier upload (top level
# or subfolder) and a model subfolder, so a repository never keeps the generator of an earlier run.
STALE_PATTERNS = ("*.safetensors", "*model.safetensors.index.json", *(f"{name}/*" for name in MODEL_SUBFOLDERS))
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
# Keys of a run's `*_results.json` that name where its model came from, as given (a path of the machine that trained
# it): an upload names it as the model card does (`cards.source_name`), the folder's own files keep the path.
RESULTS_SOURCE_KEYS = ("model_name_or_path",)
DEFAULT_COMMIT_MESSAGE = "Upload BertScratch model with hf_bertscratch"
# USER/NAME or ORG/NAME: an explicit namespace, so a push never lands somewhere the user did not name.
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class PushToHubArguments:
    """Arguments of `push_to_hub.py` (also accepted as a single .json file)."""

    model_dir: str | None = field(
        default=None,
        metadata={
            "help": "Saved model folder (the output_dir of a pretraining or fine-tuning run); may be given "
            "as the first positional argument instead."
        },
    )
    repo_id: str | None = field(
        default=None, metadata={"help": "Hub repository to create or update, as USER/NAME or ORG/NAME."}
    )
    private: bool = field(
        default=False,
        metadata={
            "help": "Make the repository private: create it private, or make an existing public one private before "
            "uploading. Without it the visibility is left as it is (a new repository gets its owner's default)."
        },
    )
    revision: str | None = field(
        default=None, metadata={"help": "Branch to upload to (created from main if missing); default: main."}
    )
    commit_message: str | None = field(
        default=None, metadata={"help": f"Commit message; default: {DEFAULT_COMMIT_MESSAGE!r}."}
    )
    token: str | None = field(
        default=None,
        metadata={
            "help": "Hub token with write access; default: the HF_TOKEN environment variable, else the token "
            "saved by `hf auth login`."
        },
    )
    dry_run: str | None = field(
        default=None,
        metadata={
            "help": "Write the exact folder that would be uploaded into this (new or empty) folder and list "
            "it, touching no network and needing no token."
        },
    )


def check_repo_id(repo_id: str | None) -> str:
    """Return `repo_id` if it has the form USER/NAME (or ORG/NAME) the Hub accepts, else raise ValueError."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id):
        raise ValueError(
            f"repo_id must look like 'USER/NAME' or 'ORG/NAME' (letters, digits, '-', '_', '.'), got {repo_id!r}."
        )
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ValueError(f"repo_id {repo_id!r} is not a valid Hub repository id: {error}") from error
    return repo_id


# What git (and so the Hub) refuses in a branch name: spaces and control characters, ~ ^ : ? * [ \, "..", "//",
# "@{", a component starting with "." or ending with ".lock", a leading "/" or "-", a trailing "/" or ".".
_BAD_BRANCH = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|//|@\{|(^|/)\.|\.lock(/|$)|^[/-]|[/.]$|^@$")


def check_revision(revision: str | None) -> str | None:
    """Return `revision` (None: main) if git accepts it as a branch name, else raise ValueError naming it."""
    if revision is not None and _BAD_BRANCH.search(revision):
        raise ValueError(
            f"revision {revision!r} is not a branch name the Hub accepts: expected a git branch name such as 'v1' "
            "or 'experiments/run-2' (no spaces, '..', '~', '^', ':', '?', '*', '[', '\\', and not starting "
            "with '/', '-' or '.')."
        )
    return revision


# How `bertscratch push` takes a token, and what it can do without one (`resolve_token`'s message).
PUSH_TOKEN_HINT = "pass --token (or use --dry_run DIR to inspect the upload without a token)"


def resolve_token(token: str | None = None, hint: str = PUSH_TOKEN_HINT) -> str:
    """The write token: `token`, else HF_TOKEN, else the saved login. Raises ValueError when there is none, its
    message ending with `hint`: how the command at hand takes a token."""
    token = token or get_token()
    if not token:
        raise ValueError(
            f"No Hugging Face token found: set the HF_TOKEN environment variable, run `hf auth login`, or {hint}."
        )
    return token


def check_hub_online(instead: str) -> None:
    """Raise ValueError when `HF_HUB_OFFLINE` is set (an upload would fail there), saying what to do `instead`."""
    if hub_offline():
        raise ValueError(f"Uploading needs the Hub, and HF_HUB_OFFLINE is set: unset it, or {instead}.")


def check_model_folder(model_dir: str | Path) -> Path:
    """Check that `model_dir`, and each of its `MODEL_SUBFOLDERS` present, is a saved BertScratch model with
    safetensors weights and a tokenizer.

    Raises:
        FileNotFoundError: the folder does not exist.
        ValueError: naming the folder and what is missing or wrong (no config.json, another model_type, no
            safetensors weights, no tokenizer files, a model card whose metadata does not parse).
    """
    path = Path(model_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"Model folder {str(path)!r} does not exist or is not a folder.")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(
            f"{str(path)!r} is not a saved model folder: it has no config.json "
            f"(save the model with model.save_pretrained)."
        )
    model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    if model_type != BertScratchConfig.model_type:
        hint = (
            f" Convert it first: bertscratch convert {path} OUTPUT_DIR."
            if model_type in CONVERTIBLE_MODEL_TYPES
            else ""
        )
        raise ValueError(
            f"{str(path)!r} holds a model of type {model_type!r}, expected "
            f"{BertScratchConfig.model_type!r} (a BertScratch model).{hint}"
        )
    BertScratchConfig.from_pretrained(path)  # its own validation names any bad field
    if not any(path.glob("*.safetensors")):
        hint = " It has pytorch_model.bin: reload and re-save it." if (path / "pytorch_model.bin").exists() else ""
        raise ValueError(f"{str(path)!r} has no safetensors weights (model.safetensors).{hint}")
    missing = [name for name in ("tokenizer_config.json",) if not (path / name).is_file()]
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append(" or ".join(TOKENIZER_FILES))
    if missing:
        raise ValueError(
            f"{str(path)!r} lacks tokenizer files: {', '.join(missing)}. Save the tokenizer next to the "
            f"model with tokenizer.save_pretrained({str(path)!r})."
        )
    check_model_card(path / "README.md")
    for subfolder in model_subfolders(path):
        check_model_folder(path / subfolder)
    return path


def check_model_card(card_file: Path) -> None:
    """Raise ValueError naming `card_file` when it exists and its YAML metadata block is one the Hub cannot read."""
    if not card_file.is_file():
        return
    try:
        ModelCard.load(card_file)
    except (ValueError, yaml.YAMLError) as error:
        raise ValueError(
            f"The model card {str(card_file)!r} has a metadata block the Hub cannot read (expected YAML mapping "
            f"between '---' lines): {' '.join(str(error).split())}"
        ) from error


def model_subfolders(model_dir: str | Path) -> list[str]:
    """The `MODEL_SUBFOLDERS` that `model_dir` holds, in table order."""
    return [name for name in MODEL_SUBFOLDERS if (Path(model_dir) / name).is_dir()]


def prepare_upload_folder(
    model_dir: str | Path, output_dir: str | Path, repo_id: str | None = None, revision: str | None = None
) -> Path:
    """Write into `output_dir` exactly the files a Hub repository of this model needs, and return `output_dir`.

    Copies the files of `UPLOAD_PATTERNS` from the top level of `model_dir` and of each of its `MODEL_SUBFOLDERS`
    (into a subfolder of the same name), and an embedding model's sentence-transformers files (the metrics naming
    the model they started from as the card does, `RESULTS_SOURCE_KEYS`); completes `auto_map`
    in each config.json and adds the package's configuration/modeling code where missing (so
    `trust_remote_code=True` can load every head, subfolders included); keeps the model card, pointing its loading
    example at `repo_id`/`revision`, or writes one from the folder's config and metrics. `output_dir` must be new or
    empty; it is assembled beside itself and renamed, so it never looks finished after a failure.
    """
    source = check_model_folder(model_dir)
    if repo_id is not None:
        check_repo_id(repo_id)
    target = Path(output_dir)
    if target.resolve() == source.resolve() or source.resolve() in target.resolve().parents:
        raise ValueError(f"Upload folder {str(target)!r} must be outside the model folder {str(source)!r}.")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"Upload folder {str(target)!r} already exists and is not empty; give a new folder.")
    with staged_folder(target) as staging:
        _assemble(source, staging, repo_id, revision)
    return target


def list_folder(folder: str | Path) -> list[tuple[str, int]]:
    """(relative path, size in bytes) of every file under `folder`, sorted."""
    root = Path(folder)
    files = (path for path in root.rglob("*") if path.is_file())
    return sorted((path.relative_to(root).as_posix(), path.stat().st_size) for path in files)


def push_to_hub(
    model_dir: str | Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    dry_run: str | Path | None = None,
) -> CommitInfo | Path:
    """Upload a saved BertScratch model folder to the Hub repository `repo_id` (created if needed).

    Everything is validated first (folder, repo id, token), so a bad input uploads nothing. The upload is the
    folder `prepare_upload_folder` builds (subfolders such as an ELECTRA run's `generator/` included), handed to
    `HfApi.upload_folder` in one commit; stale weight shards and subfolders of an earlier upload are deleted in the
    same commit.

    Args:
        model_dir: Saved model folder (weights, config, tokenizer; metrics, plots and card when present).
        repo_id: "USER/NAME" or "ORG/NAME".
        private: Make the repository private before uploading: create it private, or make an existing public one
            private (`create_repo` alone leaves an existing repository as it is). False leaves the visibility as it
            is: a new repository gets its owner's default, an existing private one stays private.
        revision: Branch to commit to, created from main when missing; None for main.
        commit_message: Commit message; a default one when None.
        token: Write token; HF_TOKEN or the saved login when None.
        dry_run: When given, write the upload folder there and return its path instead of uploading.

    Returns:
        The `CommitInfo` of the upload, or the dry-run folder.
    """
    check_repo_id(repo_id)
    check_revision(revision)
    check_model_folder(model_dir)
    if dry_run is not None:
        folder = prepare_upload_folder(model_dir, dry_run, repo_id=repo_id, revision=revision)
        logger.info("Dry run: wrote the folder that would be uploaded to %s at %s", repo_id, folder)
        return folder
    check_hub_online("write the upload folder without the Hub (--dry_run DIR)")  # first: a token would not help
    token = resolve_token(token)
    with tempfile.TemporaryDirectory(prefix="bertscratch-upload-") as tmp, naming_an_unreachable_hub():
        folder = prepare_upload_folder(model_dir, Path(tmp) / "upload", repo_id=repo_id, revision=revision)
        api = HfApi(token=token)
        repo_url = create_or_keep_repo(api, repo_id, private)
        if revision:
            api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type="model",
            revision=revision,
            commit_message=commit_message or DEFAULT_COMMIT_MESSAGE,
            delete_patterns=list(STALE_PATTERNS),
        )
    logger.info("Uploaded %s to %s (%s)", model_dir, repo_url, commit.commit_url)
    return commit


def _is_unreachable(error: BaseException) -> bool:
    """Whether `error` is a failure to connect: the ConnectError or ConnectTimeout of the HTTP client huggingface_hub
    uses (httpx2 in huggingface_hub 2, httpx in 1), told by name so as to hold for either."""
    return any(kind.__name__ in ("ConnectError", "ConnectTimeout") for kind in type(error).__mro__)


@contextmanager
def naming_an_unreachable_hub() -> Iterator[None]:
    """Turn a failure to connect to the Hub in the block into one ConnectionError that names the address it could not
    reach (https://huggingface.co, or $HF_ENDPOINT) and how to go on without it (`--dry_run DIR`)."""
    try:
        yield
    except Exception as error:
        if not _is_unreachable(error):
            raise
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ConnectionError(
            f"could not reach the Hub at {constants.ENDPOINT} ({reason}): check the network (or $HF_ENDPOINT), or "
            "write the upload folder without it (bertscratch push MODEL_DIR --repo_id ID --dry_run DIR) and upload that "
            "from a machine that reaches it."
        ) from error


def create_or_keep_repo(api: HfApi, repo_id: str, private: bool) -> str:
    """Create the model repository `repo_id` when it is missing, make it private when `private` asks, and return its
    URL.

    `create_repo(exist_ok=True)` ignores `private` for a repository that exists, so a public one is read back
    (`repo_info`) and made private (`update_repo_settings`) before anything is uploaded. Without `private` no
    visibility is sent at all: a new repository gets its owner's default (an organisation's may be private), and an
    existing private one is never made public.
    """
    repo_url = api.create_repo(repo_id, private=True if private else None, repo_type="model", exist_ok=True)
    if private and not api.repo_info(repo_id, repo_type="model").private:
        logger.warning("%s is public: making it private, as asked, before uploading.", repo_id)
        api.update_repo_settings(repo_id, private=True, repo_type="model")
    return str(repo_url)


def wants_push(training_args: TrainingArguments) -> bool:
    """Whether `--push_to_hub` was given (`GuardedTrainingArguments` keeps it as `push_at_end`, off for the Trainer)."""
    return bool(getattr(training_args, "push_at_end", training_args.push_to_hub))


def check_training_push(training_args: TrainingArguments) -> None:
    """Validate `--push_to_hub` arguments of a training run before training starts (no-op without push_to_hub).

    Pretraining and fine-tuning call this right after parsing, so a bad `--hub_model_id` or a missing token fails
    in seconds, not after hours of training.
    """
    if not wants_push(training_args):
        return
    if training_args.hub_model_id is None:
        raise ValueError("--push_to_hub needs --hub_model_id USER/NAME (the Hub repository to upload to).")
    check_repo_id(training_args.hub_model_id)
    check_revision(training_args.hub_revision)
    check_hub_online("train without --push_to_hub and upload the saved folder later (bertscratch push OUTPUT_DIR)")
    resolve_token(training_args.hub_token, "pass --hub_token")


def push_training_output(
    training_args: TrainingArguments, output_dir: str | Path | None = None
) -> CommitInfo | Path | None:
    """Upload a finished run's output folder with `push_to_hub`, when `--push_to_hub` was given.

    Call it last, after the model, tokenizer, metrics, plots and card are written. It replaces
    `Trainer.push_to_hub`, which would overwrite this package's model card with its own and upload the whole output
    folder (TensorBoard logs, training_args.bin); the repo, privacy, branch and token come from the training
    arguments (`--hub_model_id`, `--hub_private_repo`, `--hub_revision`, `--hub_token`).
    """
    if not wants_push(training_args):
        return None
    check_training_push(training_args)
    assert training_args.hub_model_id is not None, "check_training_push requires --hub_model_id"
    return push_to_hub(
        output_dir or output_dir_of(training_args),
        repo_id=training_args.hub_model_id,
        private=bool(training_args.hub_private_repo),
        revision=training_args.hub_revision,
        commit_message="End of training",
        token=training_args.hub_token,
    )


def _assemble(source: Path, target: Path, repo_id: str | None, revision: str | None) -> None:
    """Fill the empty folder `target` from the validated model folder `source` (stage 2)."""
    _copy_model(source, target)
    for subfolder in model_subfolders(source):
        (target / subfolder).mkdir()
        _copy_model(source / subfolder, target / subfolder)
    card = target / "README.md"
    if card.exists():
        if repo_id:
            set_card_repo(card, repo_id, revision)
    else:
        kind, info = info_from_model_folder(source)
        logger.info("%s has no model card: writing a %s card from its config and metrics.", source, kind)
        if repo_id:
            info.repo_id, info.model_name = repo_id, repo_id.split("/")[-1]
        write_model_card(target, kind, info)


def _copy_model(source: Path, target: Path) -> None:
    """Copy the `UPLOAD_PATTERNS` files of one model folder and make it loadable with remote code on its own."""
    for path in sorted({path for pattern in UPLOAD_PATTERNS for path in source.glob(pattern) if path.is_file()}):
        shutil.copy2(path, target / path.name)
    copy_sentence_transformers_files(source, target)
    for results_file in sorted(target.glob("*_results.json")):
        _name_sources(results_file, source / results_file.name)
    _complete_auto_map(target / "config.json")
    _drop_load_options(target / "tokenizer_config.json")
    for code_file in map(Path, code_files()):  # the code `trust_remote_code` imports
        if not (target / code_file.name).exists():
            logger.info("%s has no %s: adding this package's copy for remote code.", source, code_file.name)
            shutil.copy2(code_file, target / code_file.name)


def _name_sources(results_file: Path, original: Path) -> None:
    """Name the model a copied `*_results.json` (of the model folder's `original`) records (`RESULTS_SOURCE_KEYS`)
    by its Hub id or its folder's name alone, as the model card does, never by a path of the machine that trained
    it."""
    try:
        results = json.loads(results_file.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{str(original)!r} is not valid JSON ({error}); expected a run's metrics.") from error
    if not isinstance(results, dict):
        return
    named = {key: source_name(results[key]) for key in RESULTS_SOURCE_KEYS if isinstance(results.get(key), str)}
    if any(results[key] != name for key, name in named.items()):
        results.update(named)
        results_file.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def _complete_auto_map(config_file: Path) -> None:
    """Make config.json's `auto_map` name the config and every head, keeping every other field as written."""
    config: dict[str, Any] = json.loads(config_file.read_text(encoding="utf-8"))
    expected = family_auto_map()
    if config.get("auto_map") != expected:
        logger.info("Completing auto_map in %s so every Auto class can load the model with remote code.", config_file)
        config["auto_map"] = expected
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _drop_load_options(tokenizer_config_file: Path) -> None:
    """Leave out of tokenizer_config.json how its tokenizer was loaded (`LOAD_OPTIONS`, which transformers saves
    back), keeping every other field as written."""
    if not tokenizer_config_file.is_file():
        return
    config: dict[str, Any] = json.loads(tokenizer_config_file.read_text(encoding="utf-8"))
    if any(name in config for name in LOAD_OPTIONS):
        for name in LOAD_OPTIONS:
            config.pop(name, None)
        text = json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n"  # as transformers writes it
        tokenizer_config_file.write_text(text, encoding="utf-8")


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch push`."""
    return ArgumentParser(
        PushToHubArguments,
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s MODEL_DIR --repo_id USER/NAME [--private] [--revision BRANCH]\n"
        "         [--commit_message MSG] [--token TOKEN] [--dry_run DIR]   (or: %(prog)s ARGS.json)",
    )


def parse_args(argv: list[str] | None = None) -> PushToHubArguments:
    """Arguments from the command line (MODEL_DIR may come first, positionally) or from a single .json file."""
    parser = build_parser()
    (args,) = parse_args_or_json(parser, argv, positional=("model_dir",))
    if args.model_dir is None:
        raise ValueError(f"Give the model folder: {parser.prog} MODEL_DIR --repo_id USER/NAME.")
    if args.repo_id is None:
        raise ValueError("Give the Hub repository: --repo_id USER/NAME.")
    return args


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point of `bertscratch push`."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    args = parse_args(argv)
    assert args.model_dir is not None and args.repo_id is not None, "parse_args requires both"
    result = push_to_hub(
        args.model_dir,
        repo_id=args.repo_id,
        private=args.private,
        revision=args.revision,
        commit_message=args.commit_message,
        token=args.token,
        dry_run=args.dry_run,
    )
    if isinstance(result, Path):
        print(f"Dry run: {result} holds what would be uploaded to {args.repo_id}:")
        for name, size in list_folder(result):
            print(f"  {name:40s} {size:>12,d} bytes")
    else:
        print(f"Uploaded to {result.commit_url}")


__all__ = [
    "MODEL_SUBFOLDERS",
    "PushToHubArguments",
    "build_parser",
    "check_model_folder",
    "check_repo_id",
    "check_revision",
    "check_training_push",
    "create_or_keep_repo",
    "list_folder",
    "main",
    "model_subfolders",
    "prepare_upload_folder",
    "push_to_hub",
    "push_training_output",
    "resolve_token",
]


if __name__ == "__main__":
    main()
