"""Every command of the README's and the documentation's shell blocks runs as the page shows it, and succeeds.

Each command of a page's fenced `bash`/`sh`/`shell`/`console` blocks (`tests/_documented_commands.py` reads them) is
one test, with the id `PAGE:LINE`, so a failure names the page and the line. A page is a sequence: its commands run
in page order in one working folder per page, so `bertscratch fill-mask runs/x` finds what `bertscratch pretrain
--output_dir runs/x` above it made. The folder stands where the repository root would (`scripts/` is there, and
`../shared/data` beside it), as the pages assume.

What makes the commands tiny, without changing what the pages show:

- `OVERRIDES`: flags appended to a command (the last of a repeated flag wins): a few steps on a few examples;
- the data: `../shared/data` beside each page's folder, and `$BERTSCRATCH_DATA_DIR`, is a data directory with the
  layout of the real one and a few dozen rows per dataset (`write_data_dir`); the files of "your own data" a page
  names (`notes.txt`, `sts-train.csv`, ...) are written into its folder in the format the page shows
  (`USER_FILES`); the real `../shared/data` is never read;
- `HF_HUB_OFFLINE=1`: a command that needs the Hub fails, unless the skip table says why it is not run.

A page that uses a folder made on another page gets it made by that page's command first (`PAGE_INPUTS`,
`PROVIDED`). Commands that cannot run here are in `SKIPS`, each with its reason; documented commands that fail today
are in `KNOWN_FAILURES` (strict xfail: a fix turns them into failures until their entry goes). Commands run in this
process (`hf_bertscratch_cli.dispatch.main`, or the script as `__main__`): a subprocess would spend seconds importing torch
and transformers for each of some eighty commands.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _documented_commands import (
    USER_FILES,
    Command,
    Outcome,
    page_commands,
    run_in_process,
    split_command,
    write_data_dir,
    write_user_files,
)
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
# The repository's folders a page folder links to, as the pages run `python scripts/NAME.py` and `python -m lab.NAME`
# from the repository root.
REPO_FOLDERS = ("scripts", "lab")

# The README and the documentation pages whose commands run (mkdocs.yml's nav; the pages left out hold records of
# long runs: flax.md's JAX run, speed.md's benchmarks, results.md's reproduction, lab.md's sweeps, design.md's Hub
# conversion).
PAGES = (
    "README.md",
    "docs/index.md",
    "docs/getting-started.md",
    "docs/pretraining.md",
    "docs/fine-tuning.md",
    "docs/using-a-model.md",
    "docs/hub.md",
    "docs/onnx.md",
)

QUICK_START = "bertscratch pretrain --output_dir runs/bert-tiny-wikitext2"

# ----------------------------------------------------------------------------------- what makes a command tiny

# Command (a `bertscratch` subcommand) -> flags appended to it. Pretraining: two steps, no time budget, one process,
# a checkpoint and a logged loss at every step (so `--resume_from_checkpoint` and `bertscratch plot` have theirs).
OVERRIDES: dict[str, tuple[str, ...]] = {
    "pretrain": (
        "--max_steps", "2", "--max_train_minutes", "0", "--num_processes", "1",
        "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
        "--logging_steps", "1", "--save_steps", "2", "--report_to", "none", "--disable_tqdm", "true",
        "--preprocessing_num_workers", "1",
    ),
    "finetune": (
        "--num_train_epochs", "1", "--max_train_samples", "16", "--max_eval_samples", "16",
        "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8",
        "--report_to", "none", "--disable_tqdm", "true",
    ),
    "evaluate-onnx": ("--max_eval_samples", "8"),
}  # fmt: skip
# Scripts the pages run with `python`, as the `bertscratch` subcommand whose arguments they take.
SCRIPTS: dict[str, str] = {
    "scripts/pretrain.py": "pretrain",
    "scripts/finetune.py": "finetune",
    "scripts/evaluate_onnx.py": "evaluate-onnx",
}
# Flags that name a file of "your own data" (see `test_every_data_file_a_command_names_is_written`).
DATA_FILE_FLAGS = ("--train_file", "--validation_file", "--test_file", "--input_file")
# Absolute paths outside the page's folder, moved into it (a dry run's `/tmp/upload`).
PATH_PREFIXES: dict[str, str] = {"/tmp/": "tmp/"}

# -------------------------------------------------------------------------------- what a page starts from

# A folder some page makes -> the documented commands that make it (in order), as that page writes them.
PROVIDED: dict[str, tuple[str, ...]] = {
    "runs/bert-tiny-wikitext2": (QUICK_START,),
    "runs/sst2": (
        QUICK_START,
        "bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task sst2 --data_dir ../shared/data "
        "--output_dir runs/sst2",
    ),
    "runs/rte": (
        QUICK_START,
        "bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task stsb --data_dir ../shared/data "
        "--output_dir runs/stsb",
        "bertscratch finetune --model_name_or_path runs/stsb --task rte --data_dir ../shared/data "
        "--output_dir runs/rte",
    ),
    "runs/ner": (
        QUICK_START,
        "bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task conll2003 --data_dir ../shared/data "
        "--output_dir runs/ner",
    ),
    "runs/imdb": (
        QUICK_START,
        "bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task imdb --data_dir ../shared/data "
        "--output_dir runs/imdb",
    ),
}
# Page -> the folders of other pages it uses: the quick start of Getting started, and the fine-tuned models of the
# README (runs/sst2, runs/rte, runs/ner) and of Fine-tuning (runs/imdb).
PAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "docs/fine-tuning.md": ("runs/bert-tiny-wikitext2", "runs/rte"),
    "docs/hub.md": ("runs/bert-tiny-wikitext2", "runs/imdb"),
    "docs/onnx.md": ("runs/bert-tiny-wikitext2", "runs/sst2", "runs/ner"),
    "docs/using-a-model.md": ("runs/sst2",),
}
# Folders whose command reads nothing from a page's folder (only the data directory): a page running that command
# gets the folder and the outcome of its one run in this process instead of training it again.
REUSED = ("runs/bert-tiny-wikitext2",)


# ------------------------------------------------------------------------------------ skips and known failures


@dataclass(frozen=True)
class Entry:
    """A row of the skip table or of the known failures: the commands whose text `pattern` matches (`re.search`),
    on `page` if given, in generated block `region` if given."""

    pattern: str
    reason: str
    page: str = ""
    region: str = ""
    instead: str = ""  # a skipped command's stand-in, run in its place so later commands find what it makes

    def matches(self, command: Command) -> bool:
        return (
            (not self.page or command.page == self.page)
            and (not self.region or command.region == self.region)
            and re.search(self.pattern, command.text) is not None
        )


SKIPS: tuple[Entry, ...] = (
    Entry(r"^python -m venv ", "creates a virtual environment (the install step; .ci/run does it)"),
    Entry(r"^pip install ", "installs packages from the network (.ci/run does it)"),
    Entry(r"^python -m pytest\b", "runs this test suite itself"),
    Entry(r"--dataset_name HuggingFaceFW/fineweb-edu", "streams a Hub dataset: needs the network"),
    Entry(
        r"--task squad\b",
        "SQuAD has no local copy: it comes from the Hub; a question-answering model is trained from local files in "
        "SQuAD's format in its place, so that `bertscratch answer runs/squad` runs",
        instead="bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task_type question-answering "
        "--train_file squad-train.json --validation_file squad-dev.json --output_dir runs/squad",
    ),
    Entry(r"bertscratch push (?!.*--dry_run)", "uploads to the Hub: needs the network and a token"),
    Entry(
        r"--model_name_or_path google-bert/bert-base-uncased\b",
        "a pretrained BERT from the Hub: needs the network (folders saved by transformers and sentence-transformers "
        "fine-tune through the command in tests/test_family_checkpoint.py); the quick start's model, with the head "
        "such a model gets, stands in so that the commands after it find runs/bert-base-sst2",
        instead="bertscratch finetune --model_name_or_path runs/bert-tiny-wikitext2 --task sst2 --data_dir "
        "../shared/data --classifier_pooling cls --output_dir runs/bert-base-sst2",
    ),
    Entry(r"^export HF_TOKEN=", "sets a credential (a placeholder token)"),
    Entry(
        r"^(torchrun|accelerate launch) .*\bARGS$",
        "`ARGS` is a placeholder; several processes are tested by tests/test_pretraining.py and tests/test_fsdp.py",
    ),
    Entry(
        r"diagnose_pairs\b.* --model D\b",
        "`D` is a placeholder for a pretrained folder; the command fine-tunes 5 variants x 3 seeds",
    ),
    Entry(
        r"\bfinetune_tasks\b",
        "the task-table sweep (dozens of runs) on runs/results/pretrain-long, which the results reproduction script "
        "(reproduce_results.sh) makes first",
    ),
    Entry(r"\bcompare_onnx_graphs\b", "a benchmark that builds and times nine ONNX graphs (minutes a run)"),
    Entry(r"scripts/gpu_recipe\.py (?!--smoke)", "the one-GPU run: 9 minutes of a CUDA GPU"),
    Entry(r"scripts/gpu_recipe\.py --smoke", "tests/test_gpu_recipe.py runs the smoke run on a data folder of its own"),
    Entry(
        r"\blab\.record_pretrained_bert\b",
        "fine-tunes the packaged all-MiniLM-L6-v2 three times and transformers' recipe once (an hour on a 2-core CPU); "
        "its record is results/pretrained-bert/",
    ),
)

# Documented commands that fail today: each is a fix to the page (or the package) waiting to be made. Strict: once
# the command passes, its xfail fails the run until the entry is removed.
KNOWN_FAILURES: tuple[Entry, ...] = ()


# -------------------------------------------------------------------------------------------------- the runs


def all_commands() -> list[Command]:
    return [command for page in PAGES for command in page_commands(REPO, page)]


def first_match(entries: tuple[Entry, ...], command: Command) -> Entry | None:
    return next((entry for entry in entries if entry.matches(command)), None)


def tiny_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """`argv` with the test's overrides appended and absolute paths outside the page's folder moved into it."""
    words = list(argv)
    for index, word in enumerate(words):
        for prefix, replacement in PATH_PREFIXES.items():
            if word.startswith(prefix):
                words[index] = replacement + word[len(prefix) :]
    if words[0] == "bertscratch" and len(words) > 1:
        subcommand = words[1]
    elif words[0] in ("python", "python3") and len(words) > 1:
        subcommand = SCRIPTS.get(words[1], "")
    else:
        subcommand = ""
    return [*words, *OVERRIDES.get(subcommand, ())]


def record(command: Command, outcome: Outcome) -> dict[str, object]:
    """What a page's state file keeps of a command that ran."""
    how = "ok" if outcome.status == 0 else f"exit {outcome.status}: {outcome.error}"
    return {"id": command.id, "status": outcome.status, "output": outcome.output, "how": how}


class Pages:
    """The page folders of this pytest run, the data directory beside them, and the folder where the `PROVIDED`
    commands run.

    Each page runs down its commands once per pytest run, on demand: a command's test runs the page's commands up to
    it that have not run yet and reads its own outcome from the page's state file. State and folders live on disk
    under file locks, so pytest-xdist workers share them: whichever worker reaches a command first runs it, and a
    worker given a command that already ran reads its outcome instead of running the page again.
    """

    def __init__(self, root: Path, commands: list[Command]) -> None:
        self.root = root
        self.data_dir = root / "shared" / "data"
        self.environment = {
            "HF_HUB_OFFLINE": "1",
            "BERTSCRATCH_DATA_DIR": str(self.data_dir),
            "HF_DATASETS_CACHE": str(root / "datasets-cache"),
            "TOKENIZERS_PARALLELISM": "false",
            "MPLBACKEND": "Agg",
        }
        self.by_page: dict[str, list[Command]] = {}
        for command in commands:
            self.by_page.setdefault(command.page, []).append(command)
        self.provider = root / "provided"
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(root / "data.lock"):
            if not (root / "data.ready").exists():
                write_data_dir(self.data_dir)
                self.new_folder(self.provider)
                (root / "data.ready").touch()

    @staticmethod
    def new_folder(folder: Path, page: str = "") -> Path:
        """A page folder: what the pages assume of the repository root, and the files of "your own data"."""
        folder.mkdir()
        for name in REPO_FOLDERS:
            (folder / name).symlink_to(REPO / name, target_is_directory=True)
        (folder / "docs" / "images").mkdir(parents=True)
        (folder / "tmp").mkdir()
        write_user_files(folder, page)
        return folder

    def run(self, command: Command) -> tuple[dict[str, object], list[dict[str, object]]]:
        """`command`'s record, once it and the commands above it on its page have run; and the records of what
        came before it: the page's inputs from other pages, then the commands above it."""
        name = command.page.replace("/", "-")
        folder, state_file = self.root / name, self.root / f"{name}.json"
        commands = self.by_page[command.page]
        index = commands.index(command)
        with FileLock(self.root / f"{name}.lock"):
            if state_file.exists():
                state = json.loads(state_file.read_text(encoding="utf-8"))
            else:
                self.new_folder(folder, command.page)
                inputs = [self.provide(provided, folder) for provided in PAGE_INPUTS.get(command.page, ())]
                state = {"inputs": inputs, "records": []}
            records = state["records"]
            while len(records) <= index:
                records.append(self.step(folder, commands[len(records)]))
                state_file.write_text(json.dumps(state), encoding="utf-8")
        return records[index], state["inputs"] + records[:index]

    def step(self, folder: Path, command: Command) -> dict[str, object]:
        """Run the page's next command, or its skip's stand-in."""
        skip = first_match(SKIPS, command)
        if skip is not None:
            how = f"skipped: {skip.reason}"
            if skip.instead:
                outcome = run_in_process(tiny_argv(split_command(skip.instead)), folder, self.environment)
                how += (
                    f"; its stand-in `{skip.instead}` exit {outcome.status}: {outcome.error}" if outcome.status else ""
                )
            return {"id": command.id, "status": None, "output": "", "how": how}
        for provided in REUSED:
            if command.text == PROVIDED[provided][-1] and not (folder / provided).exists():
                return {**self.provide(provided, folder), "id": command.id}
        return record(command, run_in_process(tiny_argv(command.argv), folder, self.environment))

    def provide(self, folder: str, into: Path) -> dict[str, object]:
        """Copy `folder` into `into`, its `PROVIDED` commands run in the provider's folder first if need be; the
        record of the last of them, or of the first that failed."""
        with FileLock(self.root / "provided.lock"):
            state_file = self.root / "provided.json"
            records = json.loads(state_file.read_text(encoding="utf-8")) if state_file.exists() else {}
            for text in PROVIDED[folder]:
                if text not in records:
                    outcome = run_in_process(tiny_argv(split_command(text)), self.provider, self.environment)
                    records[text] = {"status": outcome.status, "output": outcome.output, "error": outcome.error}
                    state_file.write_text(json.dumps(records), encoding="utf-8")
            if (self.provider / folder).is_dir():  # else the page's command fails on the missing folder
                shutil.copytree(self.provider / folder, into / folder, symlinks=True)
        failed = [text for text in PROVIDED[folder] if records[text]["status"] != 0]
        text = failed[0] if failed else PROVIDED[folder][-1]
        how = f"exit {records[text]['status']}: {records[text]['error']}" if failed else "ok"
        return {"id": f"{folder}, made by `{text}`", **records[text], "how": how}


COMMANDS = all_commands()


def command_params() -> Iterator[object]:
    for command in COMMANDS:
        marks = []
        skip = first_match(SKIPS, command)
        known = first_match(KNOWN_FAILURES, command)
        if skip is not None:
            marks.append(pytest.mark.skip(reason=skip.reason))
        elif known is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=known.reason))
        yield pytest.param(command, id=command.id, marks=marks)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Pages:
    """The pages of this pytest run: under pytest-xdist in the folder all workers share (the run's base temporary
    folder, above each worker's own), else in the run's temporary folder."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return Pages(tmp_path_factory.getbasetemp().parent / "documented", COMMANDS)
    return Pages(tmp_path_factory.mktemp("documented"), COMMANDS)


@pytest.mark.slow
@pytest.mark.parametrize("command", command_params())
def test_documented_command(command: Command, pages: Pages) -> None:
    """The command exits with status 0 and shows no traceback."""
    outcome, above = pages.run(command)
    print(outcome["output"])
    trouble = [f"  {earlier['id']}: {earlier['how']}" for earlier in above if earlier["how"] != "ok"]
    context = "\n".join(["what came before it and did not run, or failed:", *trouble]) if trouble else ""
    assert outcome["status"] == 0, f"{command.id} `{command.text}` {outcome['how']}\n{context}"
    assert "Traceback (most recent call last)" not in outcome["output"], f"{command.id} printed a traceback\n{context}"


# -------------------------------------------------------------------------------------------- the tables


def test_every_table_entry_names_a_documented_command() -> None:
    """A skip, a known failure or a provided command whose text left the pages is stale: its entry must go."""
    for entry in (*SKIPS, *KNOWN_FAILURES):
        assert any(entry.matches(command) for command in COMMANDS), f"no documented command matches {entry}"
    texts = {command.text for command in COMMANDS} | {entry.instead for entry in SKIPS if entry.instead}
    for folder, commands in PROVIDED.items():
        for text in commands:
            assert text in texts, f"PROVIDED[{folder!r}] runs {text!r}, which no page shows"
    assert set(PAGE_INPUTS) <= set(PAGES)
    assert all(folder in PROVIDED for folders in PAGE_INPUTS.values() for folder in folders)


def test_every_data_file_a_command_names_is_written() -> None:
    """The files a command trains on (`--train_file` and the like) are in `USER_FILES` for its page."""
    for command in COMMANDS:
        if first_match(SKIPS, command) is not None:
            continue
        named = [value for flag, value in zip(command.argv, command.argv[1:]) if flag in DATA_FILE_FLAGS]
        missing = [name for name in named if name not in USER_FILES.get(command.page, ())]
        assert not missing, f"{command.id} reads {missing}: add them to USER_FILES[{command.page!r}]"


def test_reader_joins_continuations_drops_comments_and_expands_loops(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n"
        "```bash\n"
        "# a comment line\n"
        "bertscratch pretrain --output_dir runs/a \\\n"
        '    --train_file "my notes.txt"   # trailing comment\n'
        "BASE=runs/a\n"
        "for T in x y; do\n"
        "    bertscratch finetune --model_name_or_path $BASE --task $T\n"
        "done\n"
        "pip install foo && echo done\n"
        "```\n"
        "```python\n"
        "print('not a shell block')\n"
        "```\n"
        "```console\n"
        "$ bertscratch fill-mask runs/a 'the [MASK] .'\n"
        "the output, not a command\n"
        "```\n",
        encoding="utf-8",
    )
    commands = page_commands(tmp_path, "page.md")
    assert [command.id for command in commands] == [
        "page.md:4",
        "page.md:8[T=x]",
        "page.md:8[T=y]",
        "page.md:10",
        "page.md:16",
    ]
    assert commands[0].argv == ("bertscratch", "pretrain", "--output_dir", "runs/a", "--train_file", "my notes.txt")
    assert commands[0].text == 'bertscratch pretrain --output_dir runs/a --train_file "my notes.txt"'
    assert commands[2].argv[-4:] == ("--model_name_or_path", "runs/a", "--task", "y")
    assert commands[3].program == "shell"
    assert commands[4].argv == ("bertscratch", "fill-mask", "runs/a", "the [MASK] .")
    assert tiny_argv(shlex.split("python scripts/finetune.py --x 1"))[-len(OVERRIDES["finetune"]) :] == list(
        OVERRIDES["finetune"]
    )
