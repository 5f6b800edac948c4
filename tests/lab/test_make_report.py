"""`lab.make_report`: every generated block and chart written from the records, `--check`, `--records_dir`, and the
committed pages against the committed records."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from lab import compare_pretraining as pretraining_comparison
from lab import int8_table, speed_tables
from lab import make_report as reports
from lab import results_table as results

from _lab_records import assert_png, benchmark_run

ROOT = Path(__file__).resolve().parents[2]
PAGE = "# title\n\nbefore\n\n## Speed\n\n<!-- speed-table:start -->\nold\n<!-- speed-table:end -->\n\nafter\n"
README_PAGE = (
    "# title\n\n<!-- task-table:start -->\nold\n<!-- task-table:end -->\n\n"
    "<!-- quick-start:start -->\nold\n<!-- quick-start:end -->\n\n"
    "<!-- pairs:start -->\nold\n<!-- pairs:end -->\n\n"
    "<!-- headline:start -->\nold\n<!-- headline:end -->\n\n" + PAGE.split("\n\n", 1)[1]
)
SPEED_PAGE = PAGE.replace(
    "before",
    "<!-- speed-more:start -->\nold\n<!-- speed-more:end -->\n\n<!-- decoder-profile:start -->\nold\n"
    "<!-- decoder-profile:end -->\n\nbefore",
)
PRETRAINING_PAGE = "# Pretraining\n\n<!-- quick-start:start -->\nold\n<!-- quick-start:end -->\n"
LAB_PAGE = "# How the defaults were chosen\n\n<!-- sweeps:start -->\nold\n<!-- sweeps:end -->\n"
RESULTS_PAGE = (
    "# Results\n\n<!-- quick-start-tasks:start -->\nold\n<!-- quick-start-tasks:end -->\n\n"
    "<!-- pairs:start -->\nold\n<!-- pairs:end -->\n\n"
    "<!-- pretraining-comparison:start -->\nold\n<!-- pretraining-comparison:end -->\n"
)
FINE_TUNING_PAGE = (
    "# Fine-tuning\n\n<!-- pairs-diagnosis:start -->\nold\n<!-- pairs-diagnosis:end -->\n\n"
    "<!-- single-diagnosis:start -->\nold\n<!-- single-diagnosis:end -->\n"
)
DESIGN_PAGE = "# Design\n\n<!-- position-init:start -->\nold\n<!-- position-init:end -->\n"
HOME_PAGE = "# home\n\n<!-- headline-table:start -->\nold\n<!-- headline-table:end -->\n"
ONNX_PAGE = (
    "# ONNX\n\n<!-- onnx-graphs:start -->\nold\n<!-- onnx-graphs:end -->\n\n"
    "<!-- int8-table:start -->\nold\n<!-- int8-table:end -->\n"
)
SPEED_PAGES = {"README.md": speed_tables.README_CHART, "docs/speed.md": speed_tables.SPEED_PAGE_CHART}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, datetime, datetime]:
    """A record written by the benchmark's main (`benchmark_run`)."""
    return benchmark_run(tmp_path_factory)


@pytest.fixture
def record(tiny_run: tuple[list[str], Path, datetime, datetime]) -> dict:
    return json.loads(tiny_run[1].read_text(encoding="utf-8"))


def _repository(tmp_path: Path, records: list[Path]) -> Path:
    """A folder laid out as the repository for make_report: the two pages, the task-table record, `records`."""
    for page in SPEED_PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(README_PAGE if page == "README.md" else SPEED_PAGE, encoding="utf-8")
    (tmp_path / "docs" / "onnx.md").write_text(ONNX_PAGE, encoding="utf-8")
    (tmp_path / "docs/index.md").write_text(HOME_PAGE, encoding="utf-8")
    (tmp_path / "docs" / "pretraining.md").write_text(PRETRAINING_PAGE, encoding="utf-8")
    (tmp_path / "docs/lab.md").write_text(LAB_PAGE, encoding="utf-8")
    (tmp_path / "docs/design.md").write_text(DESIGN_PAGE, encoding="utf-8")
    (tmp_path / "docs/results.md").write_text(RESULTS_PAGE, encoding="utf-8")
    (tmp_path / "docs" / "fine-tuning.md").write_text(FINE_TUNING_PAGE, encoding="utf-8")
    shutil.copytree(ROOT / int8_table.INT8_RECORDS, tmp_path / int8_table.INT8_RECORDS)
    (tmp_path / "results" / "speed").mkdir(parents=True)
    shutil.copy(ROOT / results.TASK_TABLE_RECORD, tmp_path / results.TASK_TABLE_RECORD)
    for path in records:
        shutil.copy(path, tmp_path / "results" / "speed" / path.name)
    return tmp_path


def test_no_record_leaves_an_explicit_line_and_no_speed_chart(tmp_path: Path) -> None:
    root = _repository(tmp_path, [])
    reports.main(["--root", str(root)])
    for page in SPEED_PAGES:
        text = (root / page).read_text(encoding="utf-8")
        assert results.readme_block(text, speed_tables.SPEED_BLOCK) == speed_tables.no_speed_record("results/speed")
        assert "No benchmark record in `results/speed/` yet" in text and "speed.png" not in text
    assert not (root / speed_tables.SPEED_CHART).exists()
    assert_png(root / results.TASK_TABLE_CHART)
    quick_start_tasks = results.readme_block((root / "docs/results.md").read_text(), results.QUICK_START_TASKS_BLOCK)
    assert quick_start_tasks.startswith(f"No record yet: `{results.QUICK_START_TASKS_COMMAND}`")
    assert f"--record {results.QUICK_START_TASKS_RECORD} " in quick_start_tasks
    assert reports.check_report(root) == []


def test_quick_start_task_table_is_rendered_from_its_record(tmp_path: Path) -> None:
    root = _repository(tmp_path, [])
    record = json.loads((ROOT / results.TASK_TABLE_RECORD).read_text(encoding="utf-8"))
    record["command"] = results.QUICK_START_TASKS_COMMAND
    (root / results.QUICK_START_TASKS_RECORD).write_text(json.dumps(record), encoding="utf-8")
    assert reports.check_report(root) != []
    reports.main(["--root", str(root)])
    page = (root / "docs/results.md").read_text(encoding="utf-8")
    assert results.readme_block(page, results.QUICK_START_TASKS_BLOCK) == results.render_task_table(record)
    assert f"Made by `{results.QUICK_START_TASKS_COMMAND}`" in page
    assert reports.check_report(root) == []


def test_make_report_writes_the_blocks_and_charts_and_check_finds_tampering(
    tiny_run: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repository(tmp_path, [tiny_run[1]])
    with pytest.raises(SystemExit) as exit_info:  # the pages still hold "old"
        reports.main(["--root", str(root), "--check"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    for block in ("speed-table", "task-table", "quick-start", "headline"):
        assert f"README.md: the <!-- {block}:start --> block differs from what the records give" in err
    for page, block in (("docs/results.md", "pretraining-comparison"), ("docs/onnx.md", "int8-table")):
        assert f"{page}: the <!-- {block}:start --> block differs from what the records give" in err

    reports.main(["--root", str(root)])
    records = speed_tables.read_speed_records(root / "results" / "speed", root)
    readme = (root / "README.md").read_text(encoding="utf-8")
    task_table = json.loads((root / results.TASK_TABLE_RECORD).read_text(encoding="utf-8"))
    assert results.readme_block(readme, results.README_BLOCK) == results.render_task_table(task_table)
    results_page = (root / "docs/results.md").read_text(encoding="utf-8")
    no_comparison = results.readme_block(results_page, pretraining_comparison.README_BLOCK)
    assert no_comparison.startswith("No record yet: `python -m lab.compare_pretraining --record results/")
    for page, chart in SPEED_PAGES.items():
        text = (root / page).read_text(encoding="utf-8")
        assert text.endswith("-->\n\nafter\n") and "before\n\n## Speed\n\n" in text
        block = results.readme_block(text, speed_tables.SPEED_BLOCK)
        if page == "README.md":  # README: one ratio per run, the full tables one link away
            assert block == speed_tables.render_speed_summary(records, chart, speed_tables.README_DETAILS)
        else:
            assert block == speed_tables.render_speed_block(records, chart)
            assert speed_tables.render_speed_table(records[0]) in block
        assert block.endswith(f"]({chart})\n")
    assert_png(root / speed_tables.SPEED_CHART)
    assert_png(root / results.TASK_TABLE_CHART)
    reports.main(["--root", str(root), "--check"])
    assert "match the records" in capsys.readouterr().out

    for page in SPEED_PAGES:
        path = root / page
        fresh = path.read_text(encoding="utf-8")
        start = fresh.index(speed_tables.SPEED_BLOCK[0])
        path.write_text(fresh[:start] + fresh[start:].replace("x**", "1x**", 1), encoding="utf-8")  # one ratio
        with pytest.raises(SystemExit) as exit_info:
            reports.main(["--root", str(root), "--check"])
        assert exit_info.value.code == 1
        problems = [line for line in capsys.readouterr().err.splitlines() if "differs" in line]
        assert problems == [f"{page}: the <!-- speed-table:start --> block differs from what the records give"]
        path.write_text(fresh, encoding="utf-8")
    (root / speed_tables.SPEED_CHART).unlink()
    assert reports.check_report(root) == [f"{speed_tables.SPEED_CHART}: missing"]


def test_records_dir_option_reads_records_elsewhere(tiny_run: tuple, tmp_path: Path) -> None:
    root = _repository(tmp_path / "repository", [])
    reports.main(["--root", str(root), "--records_dir", str(tiny_run[1].parent), "--charts", "false"])
    block = results.readme_block((root / "docs" / "speed.md").read_text(encoding="utf-8"), speed_tables.SPEED_BLOCK)
    assert f"Record: `{tiny_run[1].as_posix()}`." in block  # outside the repository: named as given
    missing = [f"{chart}: missing" for chart in (speed_tables.SPEED_CHART, results.TASK_TABLE_CHART)]
    assert reports.check_report(root, tiny_run[1].parent) == missing  # the pages match; no chart drawn
    assert reports.check_report(root) != []  # the repository's own records folder is empty


def test_help_explains_what_is_read_and_written(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        reports.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "results/speed/*.json" in out and "--records_dir" in out and "--check" in out


def test_committed_speed_blocks_and_charts_are_what_the_committed_records_give() -> None:
    """README.md's and docs/speed.md's speed blocks are what `lab/make_report.py` renders from results/speed/,
    and every chart the records give is committed."""
    assert reports.check_report(ROOT) == []


def test_every_block_stands_once_on_its_page_and_is_rendered_beside_the_script_of_its_records() -> None:
    """Each entry of the table names a committed page holding its markers once, a renderer outside make_report, and
    no two entries fill the same block of a page; each chart is drawn by a module of its own records too."""
    for block in reports.BLOCKS:
        text = (ROOT / block.page).read_text(encoding="utf-8")
        assert [text.count(marker) for marker in block.markers] == [1, 1], block
        assert block.render.__module__.startswith("lab.") and block.render.__module__ != reports.__name__
    assert len({(block.page, block.markers) for block in reports.BLOCKS}) == len(reports.BLOCKS)
    assert all(chart.drawer.__module__ != reports.__name__ for chart in reports.CHARTS)
