"""Where a model comes from: a local folder or a Hub id, told apart before anything loads, with the standard library
alone (so the `bertscratch` front door checks a command's model before torch loads).

A mistyped local path would otherwise be tried as a Hub id, retried over the network for half a minute and reported as
a connection error; `check_model_reference` names the missing folder at once, and says when the Hub is offline or
cannot be reached (and the model is not in the Hub cache). `hub_offline` and `hub_unreachable` are what the datasets
go by too, and the metrics, which also take evaluate's and datasets' own offline switches (`first_variable_on`).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

DATA_DIR_ENV = "BERTSCRATCH_DATA_DIR"  # the data directory of local dataset copies, when --data_dir is not given
HUB_PROBE_TIMEOUT = 3.0  # seconds one connection to the Hub may take before it counts as unreachable
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
# What a local tokenizer is, as `hf_bertscratch.tokenization.load_tokenizer` loads one.
LOCAL_TOKENIZER = "a tokenizer folder, a vocab.txt file or its folder"


def resolve_data_dir(data_dir: str | None) -> Path | None:
    """The local data directory: `data_dir` if given, else `$BERTSCRATCH_DATA_DIR`, else None.

    Raises:
        NotADirectoryError: if the directory named (by argument or environment) does not exist.
    """
    source = "data_dir" if data_dir else DATA_DIR_ENV
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV) or None
    if data_dir is None:
        return None
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise NotADirectoryError(f"{source}={str(data_dir)!r} is not a directory; expected a folder of local datasets.")
    return path


def hub_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` is set, read now (huggingface_hub reads it once, at import)."""
    return _true(os.environ.get("HF_HUB_OFFLINE", "0"))


def datasets_offline_variable() -> str | None:
    """The variable that puts datasets in offline mode, read now as datasets reads it once, at import
    (`datasets.config.HF_HUB_OFFLINE`): `HF_DATASETS_OFFLINE` wherever it is set, on or off, else `HF_HUB_OFFLINE`;
    None when datasets is online."""
    value = os.environ.get("HF_DATASETS_OFFLINE")
    if value is not None:
        return "HF_DATASETS_OFFLINE" if _true(value) else None
    return "HF_HUB_OFFLINE" if hub_offline() else None


def first_variable_on(names: Sequence[str]) -> str | None:
    """The first of the environment variables `names` set to a true value ("1", "ON", "YES", "TRUE"), read now, or
    None."""
    return next((name for name in names if _true(os.environ.get(name, "0"))), None)


def _true(value: str) -> bool:
    return value.upper() in {"1", "ON", "YES", "TRUE"}


def hub_unreachable() -> str | None:
    """Why the Hub cannot be reached now (one phrase, e.g. "huggingface.co cannot be reached: Name or service not
    known"), or None when it answers, behind a proxy or in offline mode (the libraries decide then).

    One TCP connection to the Hub's endpoint (`HF_ENDPOINT`), within `HUB_PROBE_TIMEOUT`, once per process and
    endpoint: what lets a missing folder or dataset fail at once instead of after huggingface_hub's half minute of
    retries.
    """
    if hub_offline() or any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    return probe_hub(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")


@functools.cache
def probe_hub(endpoint: str) -> str | None:
    """Why `endpoint` cannot be reached (its name lookup and a TCP connection, within `HUB_PROBE_TIMEOUT`), or None."""
    url = urlparse(endpoint)
    host = url.hostname or endpoint
    address = (host, url.port or (443 if url.scheme == "https" else 80))
    failures: list[OSError] = []

    def connect() -> None:
        try:
            socket.create_connection(address, HUB_PROBE_TIMEOUT).close()
        except OSError as error:
            failures.append(error)

    # In a thread: the connection's timeout does not bound the name lookup, which can hang on a machine offline.
    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(HUB_PROBE_TIMEOUT)
    if probe.is_alive():
        return f"{host} did not answer within {HUB_PROBE_TIMEOUT:g} s"
    if failures:
        return f"{host} cannot be reached: {failures[0].strerror or failures[0]}"
    return None


# A Hub id is "name" or "namespace/name" made of these characters; anything else can only be a local path.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def check_model_reference(model: str | Path) -> str:
    """Fail early, in one line, when `model` is neither an existing local folder nor shaped like a Hub id."""
    model = str(model)
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"Model {model!r} is a file: expected a model folder (with config.json).")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"Model folder {model!r} has no config.json: is it a saved model folder?")
        return str(path)
    check_not_a_missing_path(model, "Model", "a model folder")
    if hub_offline() and not _in_hub_cache(model):
        raise FileNotFoundError(
            f"Model {model!r} is not a local folder, and the Hub is offline (HF_HUB_OFFLINE is set): expected a model "
            "folder here, or unset HF_HUB_OFFLINE to download it."
        )
    unreachable = hub_unreachable()
    if unreachable and not _in_hub_cache(model):
        raise FileNotFoundError(
            f"Model {model!r} is neither a local folder (no {str(path)!r} here) nor reachable on the Hub "
            f"({unreachable}): expected a model folder, or a Hub id with the network up."
        )
    return model


def check_not_a_missing_path(reference: str, kind: str, local: str, flag: str | None = None) -> None:
    """Fail in one line when `reference`, which names no existing path, cannot be a Hub id either: a path
    (`./x`, `/x`, `~/x`, `a/b/c`) or `runs/nope` where `runs/` is a local folder (not a Hub user). `kind` names the
    thing ("Model", "Tokenizer"), `local` what a local one is ("a model folder"), `flag` the flag that gave it, where
    one did."""
    given = f"{reference!r} ({flag})" if flag else repr(reference)
    if reference.startswith((".", "/", "~")) or not _HUB_ID.match(reference):
        raise FileNotFoundError(f"{kind} {given} does not exist: expected {local} or a Hub id (user/name).")
    namespace = reference.split("/")[0] if "/" in reference else None
    if namespace is not None and Path(namespace).is_dir():  # runs/nope: a folder of runs/, not a Hub user
        raise FileNotFoundError(f"{kind} folder {given} does not exist (there is a local folder {namespace!r}).")


# A flag that names a tokenizer or a config, a local path or a Hub id -> what it names and what a local one is.
SOURCE_FLAGS: dict[str, tuple[str, str]] = {
    "--tokenizer_name": ("Tokenizer", LOCAL_TOKENIZER),
    "--tokenizer": ("Tokenizer", LOCAL_TOKENIZER),
    "--config_name": ("Config", "a config.json file, a model folder holding one"),
}


def check_source_flag(flag: str, value: str | None) -> None:
    """Fail in one line naming `flag` (one of `SOURCE_FLAGS`) and its value when the value is a path that does not
    exist (`check_not_a_missing_path`): said at once, not after a Hub id's retries or transformers' "Repo id must
    use alphanumeric chars". None (the flag not given) passes."""
    if value is not None and not Path(value).expanduser().exists():
        kind, local = SOURCE_FLAGS[flag]
        check_not_a_missing_path(value, kind, local, flag)


# Why a dataset that datasets' cache does not hold cannot load in offline mode, as the errors put it.
def offline_not_cached() -> str:
    """Why a dataset in datasets' offline mode cannot load (for `hub_dataset_missing`), naming the variable set."""
    return f"{datasets_offline_variable()} is set, with no copy in the datasets cache"


def _cache_folders(cache_dir: str | None) -> list[Path]:
    """The folders datasets may find a dataset in offline: `cache_dir` (the command's --cache_dir) or the datasets
    cache, the Hub cache and the datasets modules cache, where their environment variables put them."""
    home = Path(os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub"
    modules = Path(os.environ.get("HF_MODULES_CACHE") or home / "modules") / "datasets_modules" / "datasets"
    datasets_cache = cache_dir or os.environ.get("HF_DATASETS_CACHE") or home / "datasets"
    return [Path(folder).expanduser() for folder in (datasets_cache, hub, modules)]


def in_datasets_cache(dataset_name: str, cache_dir: str | None = None) -> bool:
    """Whether a cache may hold `dataset_name`, so that datasets may load it in offline mode: an entry named for it
    (its last part: "glue" of "nyu-mll/glue") in the datasets cache (`namespace___name`), the Hub cache
    (`datasets--namespace--name`) or the modules cache. Told by the names alone, so a maybe counts as yes: datasets
    then decides."""
    name = dataset_name.split("/")[-1].lower()
    for folder in _cache_folders(cache_dir):
        try:
            entries = [entry.name.lower() for entry in folder.iterdir()]
        except OSError:  # no such cache
            continue
        if any(entry == name or entry.endswith((f"___{name}", f"--{name}")) for entry in entries):
            return True
    return False


def check_hub_dataset(what: str, data_dir: str | None, local_folder: str | None) -> None:
    """Fail at once, in one line naming where a local copy would go, when data that has no local copy would come from
    the Hub and the Hub cannot be reached (rather than after half a minute of retries ending in "Couldn't reach ...").

    Args:
        what: how the message names the data ("Dataset glue/sst2": `dataset_table.where_a_copy_goes`).
        data_dir: the data directory searched, None when neither --data_dir nor $BERTSCRATCH_DATA_DIR is set.
        local_folder: the folder a local copy has in a data directory ("sst2"); "" when unknown here; None when the
            data has no local copy at all (only local files can stand in).
    """
    unreachable = None if datasets_offline_variable() else hub_unreachable()  # offline: datasets reads its cache
    if unreachable:
        raise hub_dataset_missing(what, data_dir, local_folder, f"the Hub cannot be reached ({unreachable})")


def hub_dataset_missing(what: str, data_dir: str | None, local_folder: str | None, why: str) -> FileNotFoundError:
    """The one-line error of data that has no local copy and cannot come from the Hub (`why`: "the Hub cannot be
    reached (...)", or offline mode's reason), naming where a local copy would go (arguments: `check_hub_dataset`)."""
    where = f"in {data_dir!r}" if data_dir else f"(neither --data_dir nor ${DATA_DIR_ENV} is set)"
    files = "name local files with --train_file/--validation_file"
    if local_folder is None:
        fix = f"{files}, or load it with the network up"
    else:
        holding = f"{local_folder}/" if local_folder else "its local copy"
        fix = f"pass --data_dir DIR or set ${DATA_DIR_ENV}=DIR, DIR holding {holding} (as ../shared/data does)"
        fix += "" if local_folder else f", or {files}"
    return FileNotFoundError(f"{what} has no local copy {where} and {why}: {fix}.")


def _in_hub_cache(model: str) -> bool:
    """Whether the Hub cache holds `model`'s config.json (it then loads offline)."""
    return hub_cache_file(model, "config.json") is not None


def hub_cache_file(model: str, name: str) -> str | None:
    """The path of the file `name` of the Hub model `model` in the Hub cache; None where the cache holds none."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model, name)
    except ValueError:  # not a valid repository id
        return None
    return cached if isinstance(cached, str) else None


__all__ = [
    "DATA_DIR_ENV",
    "HUB_PROBE_TIMEOUT",
    "LOCAL_TOKENIZER",
    "SOURCE_FLAGS",
    "check_hub_dataset",
    "check_model_reference",
    "check_not_a_missing_path",
    "check_source_flag",
    "datasets_offline_variable",
    "first_variable_on",
    "hub_cache_file",
    "hub_dataset_missing",
    "hub_offline",
    "hub_unreachable",
    "in_datasets_cache",
    "offline_not_cached",
    "resolve_data_dir",
]
