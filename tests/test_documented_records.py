"""Every record the README and the documentation quote exists: each `results/...` path they name, and each record
file they name by itself (`amd-epyc-seed-42.json`), resolves in the repository. A number quoted from a record that is
not there cannot be checked by anyone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.headline import headline
from lab.record_quick_start import QUICK_START_RECORDS
from lab.report_format import read_records

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])

# A `results/...` path as the pages write it; not one inside another folder (`runs/results/...`, a run folder).
RECORD_PATH = re.compile(r"(?<![\w./-])results/[\w.*/-]*")
# A record file named alone, in backticks: `NAME.json`.
RECORD_NAME = re.compile(r"`([\w.*-]+\.json)`")
# Files every run folder, its checkpoints or a model folder hold, which the pages name without meaning a record.
RUN_FILES = frozenset(
    {
        "config.json",
        "all_results.json",
        "trainer_state.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "evaluation.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "training_data.json",
        "*_results.json",
    }
)
PLACEHOLDER = re.compile(r"[A-Z]{2,}")  # results/speed/NAME.json: a pattern the page explains, not a record


def named_records(page: Path) -> list[tuple[int, str]]:
    """(line, path relative to the repository) of every record `page` names."""
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        for match in RECORD_PATH.finditer(line):
            path = match.group(0).rstrip(".")
            if path != "results/" and not PLACEHOLDER.search(path):
                found.append((number, path))
        for match in RECORD_NAME.finditer(line):
            name = match.group(1)
            if "/" not in name and name not in RUN_FILES and name != ".json" and not PLACEHOLDER.search(name):
                found.append((number, name))
    return found


def resolves(path: str) -> bool:
    if "/" in path:
        return any(REPO.glob(path.rstrip("/"))) if "*" in path else (REPO / path).exists()
    return any((REPO / "results").rglob(path))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_record_a_page_names_exists(page: Path) -> None:
    missing = [f"line {line}: {path}" for line, path in named_records(page) if not resolves(path)]
    assert not missing, f"{page.relative_to(REPO)} names records that do not exist: {missing}"


def test_the_pages_name_records() -> None:
    """The check above reads what it should: the README names the quick start's records."""
    names = {path for _, path in named_records(REPO / "README.md")}
    assert {"amd-epyc-seed-42.json", "results/task_table.json"} <= names


def _install_commands(page: Path) -> list[str]:
    """The commands of `page`'s first shell block under "## Install", continuation lines joined."""
    text = page.read_text(encoding="utf-8")
    block = text.split("## Install", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _minutes_and_seconds(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_two_commands_set_everything_up_and_give_recorded_times(page: str) -> None:
    """One command installs the package and runs the quick start, the other installs the tests' extra and runs the
    suite as CI does; the quick start's time is its record's."""
    quick_start, tests = _install_commands(REPO / page)
    record = headline(REPO, []).quick_start  # the record the headline quotes
    assert record is not None
    assert 'pip install "torch==2.13.0" -e . ' in quick_start
    assert "&& bertscratch pretrain --output_dir runs/bert-tiny-wikitext2" in quick_start
    assert quick_start.endswith(f"# the quick start: {_minutes_and_seconds(record['end_to_end_seconds'])}")
    after = (REPO / page).read_text(encoding="utf-8").split("## Install", 1)[1].split("```", 2)[2].split("\n\n", 2)[1]
    name = next(name for name, found in read_records(REPO, QUICK_START_RECORDS).items() if found == record)
    assert name in after, f"{page}'s time is not said to be of the headline's record, {name}"
    assert 'pip install "torch==2.13.0" -e ".[dev]"' in tests and "&& python -m pytest -n 2 " in tests
    assert tests.endswith("# the tests: 531 s")  # .ci/run's suite on an idle 2-core machine (Xeon AMX, f7caf2a)
    dev = (REPO / "pyproject.toml").read_text(encoding="utf-8").split("\ndev = [", 1)[1].split("]", 1)[0]
    assert '"pytest>=' in dev and '"pytest-xdist>=' in dev  # what -n 2 needs
