"""`lab.headline`: README's opening paragraph and the home page's table state what the records give."""

from __future__ import annotations

import copy
import json
import statistics
from datetime import datetime
from pathlib import Path

import pytest

from lab import headline, speed_tables
from lab import results_table as results

from _lab_records import benchmark_run, speed_record

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, datetime, datetime]:
    """A record written by the benchmark's main (`benchmark_run`)."""
    return benchmark_run(tmp_path_factory)


@pytest.fixture
def record(tiny_run: tuple[list[str], Path, datetime, datetime]) -> dict:
    return json.loads(tiny_run[1].read_text(encoding="utf-8"))


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
    return speed_record(data, f"results/speed/{date[:4]}.json")


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
