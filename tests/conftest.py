"""Shared fixtures: tiny configs, a tokenizer the tests build themselves, and tiny text corpora.

Nothing here reads ../shared/data: the core suite runs on data the tests make.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from hf_bertscratch_base.thread_pool import use_training_wait_policy

# The test processes train models side by side (pytest -n 2) and beside the training processes they start: their idle
# OpenMP threads sleep, as the training commands' do, rather than spin on the cores the others wait for (which made
# the fine-tuning tests about three times as slow). Set before torch loads, below.
use_training_wait_policy()

import torch  # noqa: E402
from transformers import AutoModelForMaskedLM, BertTokenizer  # noqa: E402

import hf_bertscratch  # noqa: E402
from hf_bertscratch.pretraining import PretrainingTrainer  # noqa: E402

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "the a of and to in is was it that for on with as by at from his her an be this which are not "
    "paris france capital city london england berlin germany rome italy madrid spain country river "
    "movie film great bad good terrible wonderful boring plot actor acting story love hate best worst "
    "cat dog sat mat ran fast slow big small red blue green . , ! ? ' \""
).split()

CORPUS = [
    "paris is the capital of france .",
    "london is the capital of england .",
    "berlin is the capital of germany .",
    "rome is the capital of italy .",
    "madrid is the capital of spain .",
    "the cat sat on the mat .",
    "the dog ran fast in the city .",
    "the movie was great and the acting was wonderful .",
    "the film was boring and the plot was bad .",
    "this is the best story , i love it !",
    "this is the worst film , i hate it .",
    "the big red dog sat with the small blue cat .",
]


# Pretraining settings that keep a test run to seconds: 16-token blocks of a tiny model, no checkpoints, seed 0, on
# the CPU (gloo between processes) whether or not the machine has a GPU.
PRETRAIN_FAST = [
    "--use_cpu",
    "true",
    "--max_seq_length",
    "16",
    "--per_device_train_batch_size",
    "4",
    "--per_device_eval_batch_size",
    "8",
    "--learning_rate",
    "1e-3",
    "--disable_tqdm",
    "true",
    "--save_strategy",
    "no",
    "--validation_split_percentage",
    "20",
    "--seed",
    "0",
    "--dataloader_pin_memory",
    "false",
]


# A pretraining run in one process: the fast settings, no reporting.
PRETRAIN_ONE_PROCESS = [*PRETRAIN_FAST, "--report_to", "none", "--num_processes", "1"]


def pretrain_args(text_file: Path, tokenizer_dir: Path, config_dir: Path, output_dir: Path, *extra: str) -> list[str]:
    """The argv of a fast one-process pretraining run on `text_file` with a saved tokenizer and config."""
    files = ["--train_file", str(text_file), "--tokenizer_name", str(tokenizer_dir), "--config_name", str(config_dir)]
    return [*files, "--output_dir", str(output_dir), *PRETRAIN_ONE_PROCESS, *extra]


def cut_back_to_checkpoint(run_dir: Path, keep: str) -> None:
    """Leave `run_dir` as a run interrupted just after saving `keep` would: that checkpoint folder alone, none of
    the later checkpoints and none of the final files."""
    assert (run_dir / keep).is_dir(), f"{run_dir} has no {keep}"
    for path in run_dir.iterdir():
        if path.is_file():
            path.unlink()
        elif path.name.startswith("checkpoint-") and path.name != keep:
            shutil.rmtree(path)


# Put first on PYTHONPATH, this folder's sitecustomize makes the Python processes a test starts (and the ones they
# start) hang opening $HANG_WRITE for writing, as on a disk that does not answer: the first to get there creates
# $HANG_STARTED and waits until the FIFO $HANG_FIFO is opened for reading, then writes the file.
HANGING_WRITE = """import builtins, os
real_open = builtins.open
def open(file, mode="r", *args, **kwargs):
    if "w" in mode and str(file) == os.environ["HANG_WRITE"]:
        real_open(os.environ["HANG_STARTED"], "w").close()
        real_open(os.environ["HANG_FIFO"], "w").close()
    return real_open(file, mode, *args, **kwargs)
builtins.open = open
"""


class HangingWrite:
    """A write of `path` that hangs in the processes started with `env` until `release`; `started` says it began."""

    def __init__(self, folder: Path, path: Path) -> None:
        hooks = folder / "hooks"
        hooks.mkdir()
        (hooks / "sitecustomize.py").write_text(HANGING_WRITE)
        self.marker, self.fifo = folder / "hang-started", folder / "hang-fifo"
        os.mkfifo(self.fifo)
        python_path = os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")]))
        self.env = {"PYTHONPATH": python_path, "HANG_WRITE": str(path)}
        self.env.update(HANG_STARTED=str(self.marker), HANG_FIFO=str(self.fifo))

    def started(self) -> bool:
        return self.marker.exists()

    def release(self) -> None:
        os.close(os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK))


def wait_for(condition: Callable[[], object], process: subprocess.Popen, seconds: float = 240) -> None:
    """Wait until `condition()` holds, failing if `process` ends first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the command ended first, with status {process.returncode}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def write_checkpoint(path: Path, step: int = 1, missing: tuple[str, ...] = ()) -> Path:
    """A `checkpoint-N` folder with the files Trainer writes into it, in its order (trainer_state.json last), less
    `missing`: all of them, a whole checkpoint; some, one a run stopped while saving it leaves."""
    path.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        if name not in missing:
            (path / name).write_text(name)
    if "trainer_state.json" not in missing:
        (path / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    return path


def tiny_config_kwargs(vocab_size: int) -> dict:
    """A model small enough for CPU unit tests yet with every moving part (2 layers, 4 heads, padding id 0)."""
    return dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        type_vocab_size=2,
    )


def assert_same_results(batch: object, single: object, atol: float = 1e-5) -> None:
    """The same nesting, keys and strings; numbers within `atol` (a batch is padded to its longest input, which moves
    float32 sums in their last bits)."""
    if isinstance(single, dict):
        assert isinstance(batch, dict) and list(batch) == list(single), (batch, single)
        for key in single:
            assert_same_results(batch[key], single[key], atol)
    elif isinstance(single, list):
        assert isinstance(batch, list) and len(batch) == len(single), (batch, single)
        for each, expected in zip(batch, single):
            assert_same_results(each, expected, atol)
    elif isinstance(single, float):
        assert batch == pytest.approx(single, abs=atol)
    else:
        assert batch == single


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BertScratch config.json (vocabulary 100) for `--config_name`."""
    path = tmp_path_factory.mktemp("config")
    hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(100)).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One torch thread for a module's tests (timings and results independent of the machine's cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WordPiece vocab.txt of the special tokens and a few dozen words."""
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(SPECIAL_TOKENS + WORDS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tokenizer(vocab_file: Path) -> BertTokenizer:
    """An uncased BERT tokenizer over `vocab_file`."""
    return BertTokenizer(vocab=str(vocab_file))


@pytest.fixture(scope="session")
def tokenizer_dir(tokenizer: BertTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer saved as a folder (what `--tokenizer_name` and pipelines take)."""
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: BertTokenizer) -> Path:
    """A tiny BertScratch MLM checkpoint with its tokenizer, as pretrain.py would leave it: what fine-tuning tests
    start from."""
    path = tmp_path_factory.mktemp("pretrained")
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    torch.manual_seed(0)
    AutoModelForMaskedLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def tiny_config(tokenizer: BertTokenizer) -> hf_bertscratch.BertScratchConfig:
    return hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))


@pytest.fixture(scope="session")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small raw-text training file, one sentence a line, documents separated by blank lines."""
    path = tmp_path_factory.mktemp("text") / "train.txt"
    lines = []
    for repeat in range(8):
        lines.extend(CORPUS[repeat % 3 :: 2])
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `cuda` are skipped where torch sees no CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


def assert_no_local_path(card: str | bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A model card (its text) names no folder of the tests' own: the models and data a test run makes live under
    pytest's base temporary folder, and a card on the Hub names where they came from by Hub id or by name alone."""
    text = card.decode() if isinstance(card, bytes) else card
    root = tmp_path_factory.getbasetemp()
    for folder in dict.fromkeys((str(root), str(root.resolve()))):
        assert folder not in text, f"the card names a local path under {folder}:\n{text}"


def in_offline_hub_cache(monkeypatch: pytest.MonkeyPatch, folder: Path, cache: Path, repo_id: str) -> None:
    """Lay `folder`'s files out in `cache` as huggingface_hub's cache holds a download of `repo_id`'s main branch,
    and read the Hub from that cache alone, offline, for the rest of the test."""
    import huggingface_hub

    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def record_hub(monkeypatch: pytest.MonkeyPatch, repos: dict[str, bool] | None = None) -> list[tuple[str, dict]]:
    """Record the calls that reach huggingface_hub's HfApi (the network boundary), with the files uploaded and the
    token each call carries.

    `repos` (repository id -> whether it is private) stands for the model repositories on the Hub, and is updated as
    the Hub would be: `create_repo` adds a missing one (private only when asked, as for an account whose default is
    public) and leaves an existing one as it is, `update_repo_settings` changes its visibility, `repo_info` reads it.
    """
    from huggingface_hub import CommitInfo, HfApi, ModelInfo, RepoUrl
    from huggingface_hub.utils import filter_repo_objects

    calls: list[tuple[str, dict]] = []
    repos = {} if repos is None else repos

    def upload_folder(self: HfApi, **kwargs) -> CommitInfo | Future:
        folder = Path(kwargs["folder_path"])  # temporary: read it at the moment it is handed over
        names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
        # the files the Hub would take (transformers' Trainer leaves its checkpoints out so)
        names = filter_repo_objects(
            names, allow_patterns=kwargs.get("allow_patterns"), ignore_patterns=kwargs.get("ignore_patterns")
        )
        files = {name: (folder / name).read_bytes() for name in names}
        calls.append(("upload_folder", {**kwargs, "files": files, "token": self.token}))
        commit = CommitInfo(
            commit_url="https://huggingface.co/alice/run/commit/abc",
            commit_message="",
            commit_description="",
            oid="abc",
        )
        if not kwargs.get("run_as_future"):
            return commit
        done: Future = Future()  # transformers' Trainer pushes in the background while it trains: already done
        done.set_result(commit)
        return done

    def create_repo(self: HfApi, repo_id: str, **kwargs) -> RepoUrl:
        calls.append(("create_repo", {"repo_id": repo_id, **kwargs, "token": self.token}))
        repos.setdefault(repo_id, kwargs.get("private") is True)
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def create_branch(self: HfApi, repo_id: str, **kwargs) -> None:
        calls.append(("create_branch", {"repo_id": repo_id, **kwargs, "token": self.token}))

    def repo_info(self: HfApi, repo_id: str, **kwargs) -> ModelInfo:
        calls.append(("repo_info", {"repo_id": repo_id, **kwargs, "token": self.token}))
        return ModelInfo(id=repo_id, private=repos[repo_id])

    def update_repo_settings(self: HfApi, repo_id: str, **kwargs) -> None:
        calls.append(("update_repo_settings", {"repo_id": repo_id, **kwargs, "token": self.token}))
        if kwargs.get("private") is not None:
            repos[repo_id] = kwargs["private"]

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_branch", create_branch)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(HfApi, "repo_info", repo_info)
    monkeypatch.setattr(HfApi, "update_repo_settings", update_repo_settings)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the recorded Hub is reachable
    return calls


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each training batch's tokens (without padding) and its padded size, as the Trainer computes its loss."""
    batches, compute_loss = [], PretrainingTrainer.compute_loss

    def recording(self: Any, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if model.training:
            batches.append((int(inputs["attention_mask"].sum()), inputs["input_ids"].numel()))
        return compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(PretrainingTrainer, "compute_loss", recording)
    return batches
