"""Records and what is rendered from them: the benchmark's `--output_json` record, the speed tables and charts of
`lab.make_report`, `lab/make_report.py --check`, and the committed pages against the committed records."""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch
import transformers
from matplotlib.image import imread

import hf_bertscratch
from hf_bertscratch import benchmark
from hf_bertscratch.hardware import cpu_model
from hf_bertscratch.records import REPOSITORY, git_commit, portable_paths
from lab import compare_pretraining as pretraining_comparison
from lab import diagnose_pairs, headline, int8_table, profile_decode, record_quick_start, report_format, speed_tables
from lab import make_report as reports
from lab import results_table as results
from lab import sweep_pretraining as sweep

ROOT = Path(__file__).resolve().parents[2]
# The tiniest real benchmark run with two paddings, the training step and inference (no memory probe, one thread).
TINY_RUN = [
    "--presets",
    "tiny",
    "--seq_lens",
    "16",
    "--paddings",
    "0",
    "0.3",
    "--batch_size",
    "2",
    "--repeats",
    "3",
    "--warmup",
    "0",
    "--workloads",
    "train",
    "infer",
    "--memory",
    "false",
    "--num_threads",
    "1",
]
PAGE = "# title\n\nbefore\n\n## Speed\n\n<!-- speed-table:start -->\nold\n<!-- speed-table:end -->\n\nafter\n"
# README also holds the task table, the quick start's table, the pairs table and the headline, rendered from records.
README_PAGE = (
    "# title\n\n<!-- task-table:start -->\nold\n<!-- task-table:end -->\n\n"
    "<!-- quick-start:start -->\nold\n<!-- quick-start:end -->\n\n"
    "<!-- pairs:start -->\nold\n<!-- pairs:end -->\n\n"
    "<!-- headline:start -->\nold\n<!-- headline:end -->\n\n" + PAGE.split("\n\n", 1)[1]
)
# docs/speed.md also holds the other shapes' records (results/speed-more/).
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
# The pages holding the speed block, and how each links the chart.
SPEED_PAGES = {"README.md": speed_tables.README_CHART, "docs/speed.md": speed_tables.SPEED_PAGE_CHART}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, datetime, datetime]:
    """A record written by the benchmark's main: (its arguments, the record's path, the time before and after)."""
    threads = torch.get_num_threads()
    path = tmp_path_factory.mktemp("speed") / "tiny.json"
    argv = [*TINY_RUN, "--output_json", str(path)]
    before = datetime.now(timezone.utc).replace(microsecond=0)
    try:
        benchmark.main(argv)
    finally:
        torch.set_num_threads(threads)
    return argv, path, before, datetime.now(timezone.utc)


@pytest.fixture
def record(tiny_run: tuple[list[str], Path, datetime, datetime]) -> dict:
    return json.loads(tiny_run[1].read_text(encoding="utf-8"))


def _speed_record(data: dict, name: str = "results/speed/tiny.json") -> speed_tables.SpeedRecord:
    return speed_tables.SpeedRecord(name, data)


def _table(text: str) -> tuple[list[str], dict[tuple[str, str], list[str]]]:
    """The header cells and the data rows, keyed by (workload, against), of the one markdown table in `text`."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    split = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return split[0], {(cells[0], cells[1]): cells[2:] for cells in split[2:]}  # past the header and its rule


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


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    height, width, _ = imread(path).shape  # decodes the whole image
    assert width >= 600 and height >= 200, (path, width, height)


# ------------------------------------------------------------------------------------------ the benchmark's record
def test_benchmark_record_says_how_it_was_made(tiny_run: tuple, record: dict) -> None:
    argv, _, before, after = tiny_run
    assert record["command"] == "python scripts/benchmark.py " + shlex.join(portable_paths(argv))
    assert record["commit"] == git_commit()
    if REPOSITORY == ROOT and (ROOT / ".git").exists():  # run from the checkout: its HEAD
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        assert record["commit"].removesuffix("-dirty") == head.stdout.strip()
    assert before <= datetime.fromisoformat(record["date"]) <= after
    assert record["versions"] == {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "hf-bertscratch": hf_bertscratch.__version__,
    }  # onnxruntime did not run: not named
    assert (record["cpu"], record["threads"]) == (cpu_model(), 1)
    assert record["gemm_path"]["fp32"] in ("default", "onednn")  # ours' CPU GEMM path, and each path's GFLOP/s
    assert [rate["shape"] for rate in record["gemm_rates"]] == ["encoder", "ceiling"]
    assert all(value > 0 for rate in record["gemm_rates"] for value in rate["gflops"].values())
    for when in ("start", "end"):
        assert len(record["load_average"][when]) == 3 and all(value >= 0 for value in record["load_average"][when])
    # The keys the record had before stay (the CLI test and older readers use them).
    assert record["arguments"]["presets"] == ["tiny"] and record["environment"].startswith("torch ")
    cases = [(result["padding"], result["workload"]) for result in record["results"]]
    assert cases == [(0.0, "train"), (0.0, "infer"), (0.3, "train"), (0.3, "infer")]


def test_git_commit_is_heads_short_hash_marked_dirty_by_tracked_changes(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    assert git_commit(tmp_path) is None  # not a checkout

    def git(*arguments: str) -> str:
        command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *arguments]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "--short", "HEAD")
    assert git_commit(tmp_path) == head
    (tmp_path / "new.txt").write_text("untracked\n")
    assert git_commit(tmp_path) == head  # an untracked file changes no tracked code
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == f"{head}-dirty"
    (tmp_path / "inner").mkdir()
    assert git_commit(tmp_path / "inner") is None  # only the checkout's top folder is the code's


# ------------------------------------------------------------------------------------------ the speed table
def test_speed_table_shows_the_records_numbers(record: dict) -> None:
    table = speed_tables.render_speed_table(_speed_record(record))
    header, rows = _table(table)
    assert header == ["workload", "against", "no padding", "tok/s", "30% padding", "tok/s"]
    assert set(rows) == {
        ("MLM training step", "transformers' BERT"),
        ("inference, full MLM logits", "transformers' BERT"),
    }
    for result in record["results"]:
        cells = rows[(report_format.WORKLOADS[result["workload"]], "transformers' BERT")]
        ratio, tokens = cells[0:2] if result["padding"] == 0 else cells[2:4]
        assert ratio == f"**{result['ratio_median']:.2f}x** ({result['ratio_min']:.2f}-{result['ratio_max']:.2f})"
        assert tokens == f"{result['ours_tokens_per_s']:,.0f} / {result['reference_tokens_per_s']:,.0f}"
    assert table.startswith("**tiny, T=16, eager, fp32, B=2**: ours/contender throughput, median (min-max) over 3 ")
    assert f"`{record['command']}` on {record['cpu']} (" in table
    assert f"{record['date'][:10]}, commit {record['commit'] or 'unknown'};" in table
    assert f"load average (1 min) {record['load_average']['start'][0]:.1f} at the start" in table
    assert "Record: `results/speed/tiny.json`." in table


def test_speed_table_adds_onnxruntime_memory_and_what_varies(record: dict) -> None:
    data = copy.deepcopy(record)
    data["versions"]["onnxruntime"] = "1.32.0"
    train, infer = data["results"][2:4]  # 30% padding
    train.update(ours_peak_mib=1344.4, reference_peak_mib=2547.0)
    infer.update(
        onnxruntime_tokens_per_s=5887.0,
        ours_over_onnxruntime_median=0.98,
        ours_over_onnxruntime_min=0.891,
        ours_over_onnxruntime_max=1.034,
        onnxruntime_max_abs_diff=1.8e-6,
        onnxruntime_int8_tokens_per_s=11774.0,
        ours_over_onnxruntime_int8_median=0.49,
        ours_over_onnxruntime_int8_min=0.452,
        ours_over_onnxruntime_int8_max=0.517,
        onnxruntime_int8_max_abs_diff=3.1e-2,
    )
    mini = copy.deepcopy(data["results"][0])
    data["results"].append({**mini, "preset": "mini"})
    table = speed_tables.render_speed_table(_speed_record(data))
    header, rows = _table(table)
    ort = rows[("inference, full MLM logits, tiny", "ONNX Runtime 1.32.0")]
    assert ort == ["", "", "**0.98x** (0.89-1.03)", f"{infer['ours_tokens_per_s']:,.0f} / 5,887"]  # 30% only
    int8 = rows[("inference, full MLM logits, tiny", "ONNX Runtime int8 1.32.0")]
    assert int8 == ["", "", "**0.49x** (0.45-0.52)", f"{infer['ours_tokens_per_s']:,.0f} / 11,774"]
    assert rows[("MLM training step, tiny, peak memory", "transformers' BERT")] == ["", "", "1,344 / 2,547 MiB", ""]
    assert rows[("MLM training step, mini", "transformers' BERT")][2:] == ["", ""]  # mini ran no padding only
    assert table.startswith("**T=16, eager, fp32, B=2**")  # the preset varies: the rows name it
    assert "onnxruntime 1.32.0" in table and "differ from ours at real positions by at most 1.8e-06" in table


def test_readme_summary_gives_each_runs_median_in_the_order_they_ran(record: dict) -> None:
    later = copy.deepcopy(record)
    later["date"] = "2999-01-01T00:00:00+00:00"
    for result in later["results"]:
        result["ratio_median"] *= 2
    later_record, first = (
        _speed_record(later, "results/speed/b-later.json"),
        _speed_record(record, "results/speed/z.json"),
    )
    summary = speed_tables.render_speed_summary([first, later_record], "speed.png", "docs/speed.md")
    header, rows = _table(summary)
    assert header == ["workload", "against", "no padding", "30% padding"]
    for result in record["results"]:
        label = (report_format.WORKLOADS[result["workload"]], "transformers' BERT")
        cell = rows[label][[0, 0.3].index(result["padding"])]
        assert cell == f"**{result['ratio_median']:.2f}x**, **{2 * result['ratio_median']:.2f}x**"  # by date
    assert (
        f"Records: 2 runs in `results/speed/` ({record['date'][:10]}, 2999-01-01; {record['cpu']}; commits " in summary
    )
    assert summary.endswith("[Speed](docs/speed.md).\n\n![Ours over each contender, from the records](speed.png)\n")


def test_no_record_leaves_an_explicit_line_and_no_speed_chart(tmp_path: Path) -> None:
    root = _repository(tmp_path, [])
    reports.main(["--root", str(root)])
    for page in SPEED_PAGES:
        text = (root / page).read_text(encoding="utf-8")
        assert results.readme_block(text, speed_tables.SPEED_BLOCK) == speed_tables.no_speed_record("results/speed")
        assert "No benchmark record in `results/speed/` yet" in text and "speed.png" not in text
    assert not (root / speed_tables.SPEED_CHART).exists()
    _assert_png(root / results.TASK_TABLE_CHART)
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


def test_unreadable_record_is_named(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(json.dumps({"arguments": {}, "results": []}))
    with pytest.raises(ValueError, match=r"old\.json is not a benchmark record \(missing \['command'"):
        speed_tables.read_speed_records(tmp_path, tmp_path)


# ------------------------------------------------------------------------------------------ make_report
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
    _assert_png(root / speed_tables.SPEED_CHART)
    _assert_png(root / results.TASK_TABLE_CHART)
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


# ------------------------------------------------------------------------------------------ the charts' data
def test_task_table_chart_draws_mean_and_sd_of_rows_with_values() -> None:
    record = json.loads((ROOT / results.TASK_TABLE_RECORD).read_text(encoding="utf-8"))
    record["rows"][0]["scratch"] = []  # a row with one initialisation run keeps that one bar
    record["rows"][-1].update(pretrained=[], scratch=[])  # a row not run has no bars
    bars = results.task_table_bars(record)
    with_values = [row for row in record["rows"] if row["pretrained"] or row["scratch"]]
    assert list(bars) == [row["label"] for row in with_values] and len(with_values) < len(record["rows"])
    first = record["rows"][0]
    assert list(bars[first["label"]]) == ["pretrained here"]
    for row in with_values:
        for key, name in (("pretrained", "pretrained here"), ("scratch", "no pretraining")):
            if row[key]:
                mean, low, high = bars[row["label"]][name]
                assert mean == pytest.approx(sum(row[key]) / len(row[key]))
                spread = statistics.stdev(row[key]) if len(row[key]) > 1 else 0.0
                assert (mean - low, high - mean) == pytest.approx((spread, spread))


def test_speed_chart_draws_every_ratio_of_the_table(record: dict, tmp_path: Path) -> None:
    one = speed_tables.speed_bars([_speed_record(record)])  # one record: its median and min-max over repetitions
    assert list(one) == [f"{w}\nvs transformers' BERT" for w in ("MLM training step", "inference, full MLM logits")]
    for result in record["results"]:
        label = f"{report_format.WORKLOADS[result['workload']]}\nvs transformers' BERT"
        padding = report_format.padding_label(result["padding"])
        assert one[label][padding] == (result["ratio_median"], result["ratio_min"], result["ratio_max"])
    runs = []
    for factor in (1.0, 3.0, 2.0):  # several records: the median of their medians, and the lowest and highest
        data = copy.deepcopy(record)
        for result in data["results"]:
            result["ratio_median"] *= factor
        runs.append(data)
    records = [_speed_record(data, f"results/speed/run{i}.json") for i, data in enumerate(runs)]
    several = speed_tables.speed_bars(records)
    assert list(several) == list(one)
    for result in record["results"]:
        label = f"{report_format.WORKLOADS[result['workload']]}\nvs transformers' BERT"
        median = result["ratio_median"]
        bar = several[label][report_format.padding_label(result["padding"])]
        assert bar == pytest.approx((2 * median, median, 3 * median))
    _assert_png(speed_tables.draw_speed_chart(records, tmp_path / "speed.png"))


# ------------------------------------------------------------------------------------------ the committed pages
def test_committed_speed_blocks_and_charts_are_what_the_committed_records_give() -> None:
    """README.md's and docs/speed.md's speed blocks are what `lab/make_report.py` renders from results/speed/,
    and every chart the records give is committed."""
    assert reports.check_report(ROOT) == []


def test_int8_table_gives_each_records_metric_per_backend_and_split() -> None:
    records = report_format.read_records(ROOT, int8_table.INT8_RECORDS)
    assert records, "results/int8/ holds the committed evaluate-onnx records"
    table = int8_table.render_int8_table(records)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    expected = []
    names = ("pytorch", "pytorch bf16", "onnx fp32", "onnx int8")
    for name, record in records.items():
        metric = record["main_metric"]
        for split in record["splits"].values():
            by = {backend["backend"]: backend for backend in split["backends"]}
            values = [100 * by[b]["metrics"][metric] if b in by else None for b in names]
            differences = [None if value is None else value - values[0] for value in (values[1], values[3])]
            agreements = [100 * by[b]["agreement"] for b in ("pytorch bf16", "onnx int8") if b in by]
            expected.append((values, differences, agreements))
        assert f"`results/int8/{name}`" in table and f"`{record['command']}`" in table
    assert len(rows) == len(expected)
    for row, (values, differences, agreements) in zip(rows, expected):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for cell, value in zip(cells[2:6], values):  # a record made without the bf16 row leaves its cells empty
            assert cell == "" if value is None else float(cell) == pytest.approx(value, abs=0.005)
        assert cells[6:8] == ["" if d is None else f"{d:+.2f}" for d in differences]
        assert cells[8].startswith(" / ".join(f"{agreement:.2f}%" for agreement in agreements))
    short = int8_table.render_int8_table(records, commands=False)  # README's: the records, not the commands
    assert short.splitlines()[:-1] == table.splitlines()[:-1] and "made by" not in short
    assert int8_table.render_int8_table({}).startswith("No record in `results/int8/` yet")


def test_quick_start_table_gives_each_seeds_record() -> None:
    def record(seed: int, accuracy: float, seconds: float, one_core: bool = False) -> dict:
        return {
            "seed": seed, "cpu": "Some CPU", "date": "2026-11-25T22:00:00+00:00", "commit": "abc1234",
            "load_average": {"start": [0.25, 0.1, 0.1], "end": [1.5, 1.0, 0.5]}, "end_to_end_seconds": seconds,
            "peak_memory_mib": 1228.8, "steps": 3599, "one_core": one_core,
            "results": {"eval_accuracy": accuracy, "eval_perplexity": 54.12, "train_tokens": 14_745_600,
                        "train_tokens_per_second": 16095.2, "world_size": 1 if one_core else 2},
        }  # fmt: skip

    table = record_quick_start.render_quick_start_table(
        {
            "some-cpu-seed-42.json": record(42, 0.3391, 536.4),
            "some-cpu-seed-0.json": record(0, 0.2, 60),
            "some-cpu-one-core-seed-42.json": record(42, 0.25, 600, one_core=True),
        }
    )
    lines = [line.split(" | ") for line in table.splitlines() if line.startswith("| Some CPU")]
    assert [(cells[1], cells[2], cells[3]) for cells in lines] == [
        ("2 processes", "0", "**20.0%**"),  # by CPU, processes, then seed
        ("2 processes", "42", "**33.9%**"),
        ("one core, 1 process", "42", "**25.0%**"),
    ]
    assert lines[1][4:10] == ["54.1", "14.7M", "16,095", "3,599", "8 min 56 s", "1.2 GB"]
    assert "`some-cpu-seed-42.json`: 2026-11-25, commit abc1234, load average (1 min) 0.2 at the start" in table
    assert record_quick_start.render_quick_start_table({}).startswith("No record in `results/quick-start/` yet")


def _encode_record(
    record: dict, ratios: dict[float, float], int8: float, date: str, memory: float = 1000.0
) -> speed_tables.SpeedRecord:
    """`record` with its inference cases turned into encoder cases timed against ONNX Runtime, fp32 at `ratios`
    (padding -> median) and int8 at `int8`."""
    data = copy.deepcopy(record)
    data["date"], data["versions"]["onnxruntime"] = date, "1.32.0"
    for result in data["results"]:
        if result["workload"] == "infer":
            median = ratios[result["padding"]]
            result.update(workload="encode", onnxruntime_tokens_per_s=1000.0, onnxruntime_int8_tokens_per_s=2000.0)
            for prefix, value in (("ours_over_onnxruntime", median), ("ours_over_onnxruntime_int8", int8)):
                result.update({f"{prefix}_median": value, f"{prefix}_min": value - 0.1, f"{prefix}_max": value + 0.1})
        elif result["padding"] == 0:
            result.update(ours_peak_mib=memory, reference_peak_mib=2 * memory)
    return _speed_record(data, f"results/speed/{date[:4]}.json")


def test_headline_states_what_the_records_give(record: dict, tmp_path: Path) -> None:
    first = _encode_record(record, {0.0: 1.01, 0.3: 1.12}, int8=0.55, date="2026-01-01T00:00:00+00:00")
    second = _encode_record(record, {0.0: 0.93, 0.3: 1.2}, int8=0.6, date="2027-01-01T00:00:00+00:00", memory=1100)
    second.data["results"][0]["ratio_median"] = 9.0  # the training ratio the headline takes is the median of runs
    root = tmp_path
    (root / "results" / "quick-start").mkdir(parents=True)
    quick_start = {
        "seed": 42,
        "date": "2026-11-27T07:00:00+00:00",
        "cpu": "Intel(R) Xeon(R) Processor",
        "end_to_end_seconds": 541.4,
        "results": {"eval_accuracy": 0.3488, "eval_perplexity": 50.94},
    }
    (root / "results" / "quick-start" / "a-seed-42.json").write_text(json.dumps(quick_start))
    # the headline states the newest seed-42 run on all cores: not an older one, not a one-core run
    older = {
        **quick_start,
        "date": "2026-11-25T07:00:00+00:00",
        "results": {"eval_accuracy": 0.1, "eval_perplexity": 9},
    }
    one_core = {**quick_start, "date": "2026-11-28T07:00:00+00:00", "one_core": True, "results": older["results"]}
    (root / "results" / "quick-start" / "b-seed-42.json").write_text(json.dumps(older))
    (root / "results" / "quick-start" / "a-one-core-seed-42.json").write_text(json.dumps(one_core))
    task_table = json.loads((ROOT / results.TASK_TABLE_RECORD).read_text(encoding="utf-8"))
    for row in task_table["rows"]:  # ahead of random weights on every task but MRPC and RTE, whatever the record says
        behind = row["task"] in ("mrpc", "rte")
        row["scratch"] = ((row["scratch"] or [50.0]) * 3)[:3]  # three seeds a row, also where the record has none
        row["pretrained"] = [value + (-1 if behind else 1) for value in row["scratch"]]
    stsb = next(row for row in task_table["rows"] if row["key"] == "eval_spearmanr")
    stsb["pretrained"] = [value + 50 for value in stsb["scratch"]]  # moved further by its record
    (root / results.TASK_TABLE_RECORD).write_text(json.dumps(task_table))

    figures = headline.headline(root, [first, second])
    text = headline.render_headline(figures).replace("\n", " ")
    train = statistics.median([first.data["results"][0]["ratio_median"], 9.0])
    assert (
        "in **9 min 01 s** end to end on a 2-core Intel Xeon, to **34.9%** masked-token accuracy (perplexity 50.9)"
        in text
    )
    assert f"runs **{train:.2f}x** as fast as transformers' `BertForMaskedLM`" in text
    assert "with 1,050 MiB of peak memory against 2,100" in text  # the median of the runs
    # the encoder's range over the runs, fp32 ORT only (int8's 0.55-0.60 is not what it claims)
    assert "encoder runs **0.93-1.01x** without padding and **1.12-1.20x** with 30% padding" in text
    assert "(2 recorded runs, [Speed](#speed))" in text and "0.55" not in text
    rows = {(row["task"], row["key"]): row for row in task_table["rows"]}
    conll = rows["conll2003", "test_overall_f1"]
    expected = (
        f"CoNLL-2003 entity F1 **{statistics.fmean(conll['pretrained']):.1f}** against "
        f"{statistics.fmean(conll['scratch']):.1f} from random weights"
    )
    assert expected in text
    assert f"STS-B **{statistics.fmean(stsb['pretrained']):.1f}**" in text  # moved by its record
    assert "on MRPC and RTE it is not yet better than random weights" in text
    average = [results.glue_average(task_table["rows"], init) for init in ("pretrained", "scratch")]
    assert f"the five GLUE dev tasks average {average[0]:.1f} against {average[1]:.1f}" in text
    assert all(len(line) <= 118 for line in headline.render_headline(figures).splitlines())
    assert "so far" not in text  # every task has three seeds
    figures.task_table["rows"][0]["scratch"] = figures.task_table["rows"][0]["scratch"][:1]  # a task with one seed
    assert "([the task table](#results), 1-3 seeds per task so far)" in " ".join(
        headline.render_headline(figures).split()
    )

    table = headline.render_headline_table(figures)
    assert "| 9 min 01 s, masked-token accuracy 34.9%, perplexity 50.9 |" in table
    assert "0.93-1.01x, 1.12-1.20x with 30% padding (2 runs)" in table
    assert f"{train:.2f}x (peak memory 1,050 vs 2,100 MiB), " in table
    padded_only = headline.Headline(None, {0.3: [3.0]}, {}, {}, None, {"train": "x", "encode": "y"})
    assert "runs **3.00x** as fast as transformers' `BertForMaskedLM` with 30% padding." in headline.render_headline(
        padded_only
    )
    assert "| 3.00x with 30% padding |" in headline.render_headline_table(padded_only)

    empty = headline.headline(tmp_path / "nothing", [])
    assert headline.render_headline(empty).startswith("It computes transformers' BERT to 1e-5")  # no record, no figure


def test_sweep_tables_render_each_record_oldest_first_with_how_it_was_made() -> None:
    committed = json.loads((ROOT / sweep.SWEEP_RECORDS / "electra-8.5min.json").read_text(encoding="utf-8"))
    older = copy.deepcopy(committed)
    older.update(date="2026-01-01T00:00:00+00:00", commit=None, command="python -m lab.sweep_pretraining --x")
    older["rows"] = older["rows"][:1]
    text = sweep.render_sweep_tables({"z-old.json": older, "a-new.json": committed})
    assert text.index("`results/sweeps/z-old.json`") < text.index("`results/sweeps/a-new.json`")  # by date
    for row in committed["rows"]:
        line = next(line for line in text.splitlines() if line.startswith(f"| {row['name']} | "))
        assert f"| {100 * row['eval_accuracy']:.1f}% | {row['eval_mlm_loss']:.3f} |" in line
    assert "`python -m lab.sweep_pretraining --x` on " in text and "2026-01-01, commit unknown" in text
    assert sweep.render_sweep_tables({}).startswith("No record in `results/sweeps/` yet")


def test_sweeps_written_down_before_records_render_blank_unmeasured_cells_their_commits_and_order() -> None:
    """The history-* records (sweeps from before `--record`) keep their rows' order (they have no MLM loss to sort
    by), leave what their runs did not measure blank rather than "-" (never left the plateau), and give each row's
    commit and every command."""
    name = "history-2-step-screen-1800.json"
    record = json.loads((ROOT / sweep.SWEEP_RECORDS / name).read_text(encoding="utf-8"))
    text = sweep.render_sweep_tables({name: record})
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| run |")][1:]
    assert len(lines) == len(record["rows"])
    for line, row in zip(lines, record["rows"], strict=True):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[:2] == [row["name"], str(row["seed"])] and cells[3] == f"{100 * row['eval_accuracy']:.1f}%"
        assert cells[4:7] == ["", "", ""] and cells[11] == ""  # loss, perplexity, tokens, wall: not measured
        assert cells[8] == ("-" if row["plateau_exit_step"] is None else str(row["plateau_exit_step"]))
        assert cells[-1] == row["commit"]
    assert "```bash\n" + "\n".join(record["commands"]) + "\n```" in text
    assert "load not recorded" in text and record["notes"] in text


def test_record_speed_script_runs_valid_benchmarks_into_the_folders_make_report_reads(tmp_path: Path) -> None:
    """Every benchmark command of lab/record_speed.sh parses (the arguments' own checks included) and writes its
    record into a folder the report renders; a shape it names is a case the benchmark runs."""
    script = (ROOT / "lab" / "record_speed.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = [line.split("python scripts/benchmark.py", 1)[1] for line in script.splitlines()
                if "python scripts/benchmark.py" in line]  # fmt: skip
    assert len(commands) == 6
    folders = []
    for command in commands:
        output = command.split('--output_json "$(next_record ', 1)[1].split(")", 1)[0].split()
        folders.append(f"results/{output[1] if len(output) > 1 else 'speed'}")
        argv = shlex.split(command.split("--output_json", 1)[0].replace('"${REPEATS:-', "").replace('}"', ""))
        args = benchmark.parse_args([*argv, "--output_json", str(tmp_path / "x.json")])
        assert args.repeats >= 3 and args.num_threads == 2
    assert set(folders) == {speed_tables.SPEED_RECORDS, speed_tables.MORE_SPEED_RECORDS}
    assert (ROOT / "docs/speed.md").read_text(encoding="utf-8").count(speed_tables.MORE_SPEED_BLOCK[0]) == 1


def test_decoder_profile_record_is_rendered_with_each_variants_milliseconds(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    paths = {}
    try:
        for count in (2, 1):
            paths[count] = tmp_path / f"threads-{count}.json"
            argv = ["--num_threads", str(count), "--hidden_size", "16", "--vocab_size", "300", "--rows", "64",
                    "--tile", "16", "64", "--repeats", "2", "--output_json", str(paths[count])]  # fmt: skip
            printed = profile_decode.main(argv)
            record = json.loads(paths[count].read_text(encoding="utf-8"))
            assert record["milliseconds"] == printed and record["arguments"]["num_threads"] == count
            assert record["command"] == "python -m lab.profile_decode " + shlex.join(portable_paths(argv))
    finally:
        torch.set_num_threads(threads)
    records = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in paths.values()}
    # distinct figures (the tiny decode's own are all near 0 ms): each cell must be its record's, by variant
    for count, record in zip((2, 1), records.values()):
        record["milliseconds"] = {name: 100.0 * count + index for index, name in enumerate(record["milliseconds"])}
    # columns are grouped by CPU, then ordered by threads, whatever the file names' order
    records["threads-2.json"]["cpu"], records["threads-1.json"]["cpu"] = "A CPU", "B CPU"
    records["threads-1-2.json"] = {
        **records["threads-2.json"],
        "milliseconds": dict(records["threads-1.json"]["milliseconds"]),
    }
    records["threads-1-2.json"]["arguments"] = {**records["threads-2.json"]["arguments"], "num_threads": 1}
    header, rows = _table(profile_decode.render_decoder_table(records))
    assert header == ["decoding", "A CPU, 1 thread", "A CPU, 2 threads", "B CPU, 1 thread"]
    names = list(records["threads-2.json"]["milliseconds"])
    assert [(name, cells) for (name, _), cells in rows.items()] == [
        (name, [f"{200 + i:.1f} ms", f"{100 + i:.1f} ms"]) for i, name in enumerate(names)
    ]
    assert [first for (_, first) in rows] == [f"{100 + i:.1f} ms" for i in range(len(names))]
    assert len(rows) == 4 and "64 x 16 -> 300, median of 2" in profile_decode.render_decoder_table(records)
    assert profile_decode.render_decoder_table({}).startswith("No record in `results/decoder/` yet")


def test_pair_diagnostic_table_gives_each_baseline_and_variant_of_its_record() -> None:
    record = {
        "command": "python -m lab.diagnose_pairs --model D --task stsb",
        "model": "D",
        "model_note": "the 9-minute model",
        "task": "stsb",
        "metric": "spearmanr",
        "machine": "CPU",
        "date": "2026-11-27",
        "commit": "abc1234",
        "no_learning": {
            "constant": {"spearmanr": 0.0},
            "word_overlap": {"spearmanr": 0.653},
            "zero_shot_mean_by_layer": [{"spearmanr": 0.5}, {"spearmanr": 0.612}],
            "zero_shot_cls_last_layer": {"spearmanr": 0.287},
        },
        "fine_tuning": {
            "before": {"42": {"flags": ["--learning_rate", "5e-5"], "final": 0.109}},
            "embedding": {
                "42": {"flags": ["--task_type", "embedding"], "final": 0.7},
                "43": {"flags": [], "final": 0.72},
            },
        },
    }
    table = diagnose_pairs.render_pairs_table(record)
    assert "| no learning: word overlap (Jaccard of the word sets) | 65.3 |" in table
    assert "(layers 0..1: 50.0 / 61.2) | **61.2** |" in table and "| no learning: constant answer | 0.0 |" in table
    assert "| fine-tuned `before`: `--learning_rate 5e-5` | 10.9 (1 seed) |" in table
    assert "| fine-tuned `embedding`: `--task_type embedding` | 71.0 ± 1.4 (2 seeds) |" in table
    assert (
        table.rstrip().endswith("(CPU, 2026-11-27, commit abc1234).") and "the 9-minute model. Made by `python" in table
    )
    assert diagnose_pairs.render_pairs_block({}).startswith("No record yet")
    transfer = {**record, "fine_tuning": {"defaults": {"42": {"flags": [], "final": 0.5}}}}
    summary = diagnose_pairs.render_pairs_summary({"stsb.json": record, "stsb-from-stsb.json": transfer})
    assert "| STS-B, spearmanr | 0.0 | 65.3 | 61.2 |  |  | 50.0 |  | 71.0 ± 1.4 |  |" in summary
    assert "Model: the 9-minute model. Mean ± sd over seeds 42, 43;" in summary
    figures = headline.Headline(None, {}, {}, {}, None, {"train": "", "encode": ""}, pairs=record)
    sentence = " ".join(headline.render_headline(figures).split())
    assert (
        "STS-B's Spearman is **71.0** as a bi-encoder, against 61.2 for the model's own zero-shot cosine and 65.3 for "
        "word overlap" in sentence
    )
