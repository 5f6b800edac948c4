"""`lab.speed_tables`: the benchmark's `--output_json` record, the speed tables rendered from it (every record's table,
README's short form) and the speed chart's data."""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
import torch
import transformers

import hf_bertscratch
from hf_bertscratch.hardware import cpu_model
from hf_bertscratch.records import REPOSITORY, git_commit, portable_paths
from lab import report_format, speed_tables

from _lab_records import assert_png, benchmark_run, markdown_table, speed_record

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, datetime, datetime]:
    """A record written by the benchmark's main (`benchmark_run`)."""
    return benchmark_run(tmp_path_factory)


@pytest.fixture
def record(tiny_run: tuple[list[str], Path, datetime, datetime]) -> dict:
    return json.loads(tiny_run[1].read_text(encoding="utf-8"))


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


def test_speed_table_shows_the_records_numbers(record: dict) -> None:
    table = speed_tables.render_speed_table(speed_record(record))
    header, rows = markdown_table(table)
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
    table = speed_tables.render_speed_table(speed_record(data))
    header, rows = markdown_table(table)
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
        speed_record(later, "results/speed/b-later.json"),
        speed_record(record, "results/speed/z.json"),
    )
    summary = speed_tables.render_speed_summary([first, later_record], "speed.png", "docs/speed.md")
    header, rows = markdown_table(summary)
    assert header == ["workload", "against", "no padding", "30% padding"]
    for result in record["results"]:
        label = (report_format.WORKLOADS[result["workload"]], "transformers' BERT")
        cell = rows[label][[0, 0.3].index(result["padding"])]
        assert cell == f"**{result['ratio_median']:.2f}x**, **{2 * result['ratio_median']:.2f}x**"  # by date
    assert (
        f"Records: 2 runs in `results/speed/` ({record['date'][:10]}, 2999-01-01; {record['cpu']}; commits " in summary
    )
    assert summary.endswith("[Speed](docs/speed.md).\n\n![Ours over each contender, from the records](speed.png)\n")


def test_unreadable_record_is_named(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(json.dumps({"arguments": {}, "results": []}))
    with pytest.raises(ValueError, match=r"old\.json is not a benchmark record \(missing \['command'"):
        speed_tables.read_speed_records(tmp_path, tmp_path)


def test_speed_chart_draws_every_ratio_of_the_table(record: dict, tmp_path: Path) -> None:
    one = speed_tables.speed_bars([speed_record(record)])  # one record: its median and min-max over repetitions
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
    records = [speed_record(data, f"results/speed/run{i}.json") for i, data in enumerate(runs)]
    several = speed_tables.speed_bars(records)
    assert list(several) == list(one)
    for result in record["results"]:
        label = f"{report_format.WORKLOADS[result['workload']]}\nvs transformers' BERT"
        median = result["ratio_median"]
        bar = several[label][report_format.padding_label(result["padding"])]
        assert bar == pytest.approx((2 * median, median, 3 * median))
    assert_png(speed_tables.draw_speed_chart(records, tmp_path / "speed.png"))
