"""What the tests of the lab's report renderers share: a real benchmark record to render (`benchmark_run`), and how
they read a markdown table and check a chart."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch
from matplotlib.image import imread

from hf_bertscratch import benchmark
from lab import speed_tables

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
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


_RUNS: list[tuple[list[str], Path, datetime, datetime]] = []


def benchmark_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, datetime, datetime]:
    """A record written by the benchmark's main: (its arguments, the record's path, the time before and after); made
    once per test process: the report, speed-table and headline tests each have a module fixture that reads it."""
    if _RUNS:
        return _RUNS[0]
    threads = torch.get_num_threads()
    path = tmp_path_factory.mktemp("speed") / "tiny.json"
    argv = [*TINY_RUN, "--output_json", str(path)]
    before = datetime.now(timezone.utc).replace(microsecond=0)
    try:
        benchmark.main(argv)
    finally:
        torch.set_num_threads(threads)
    _RUNS.append((argv, path, before, datetime.now(timezone.utc)))
    return _RUNS[0]


def speed_record(data: dict, name: str = "results/speed/tiny.json") -> speed_tables.SpeedRecord:
    return speed_tables.SpeedRecord(name, data)


def markdown_table(text: str) -> tuple[list[str], dict[tuple[str, str], list[str]]]:
    """The header cells and the data rows, keyed by (workload, against), of the one markdown table in `text`."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    split = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return split[0], {(cells[0], cells[1]): cells[2:] for cells in split[2:]}  # past the header and its rule


def assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    height, width, _ = imread(path).shape  # decodes the whole image
    assert width >= 600 and height >= 200, (path, width, height)
