"""`lab/record_speed.sh`: the benchmark runs it records land where the speed tables (and docs/speed.md's per-CPU
sections, from results/cpu-choices/) read them."""

from __future__ import annotations

import shlex
from pathlib import Path

from hf_bertscratch import benchmark
from lab import speed_tables

ROOT = Path(__file__).resolve().parents[2]


def test_record_speed_script_runs_valid_benchmarks_into_the_folders_make_report_reads(tmp_path: Path) -> None:
    """Every benchmark command of lab/record_speed.sh parses (the arguments' own checks included) and writes its
    record into a folder the report renders; a shape it names is a case the benchmark runs."""
    script = (ROOT / "lab" / "record_speed.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = [line.split("python scripts/benchmark.py", 1)[1] for line in script.splitlines()
                if "python scripts/benchmark.py" in line]  # fmt: skip
    assert len(commands) == 9
    folders = []
    for command in commands:
        output = command.split('--output_json "$(next_record ', 1)[1].split(")", 1)[0].split()
        folders.append(f"results/{output[1] if len(output) > 1 else 'speed'}")
        argv = shlex.split(command.split("--output_json", 1)[0].replace('"${REPEATS:-', "").replace('}"', ""))
        args = benchmark.parse_args([*argv, "--output_json", str(tmp_path / "x.json")])
        assert args.repeats >= 3 and args.num_threads == 2
    assert set(folders) == {speed_tables.SPEED_RECORDS, speed_tables.MORE_SPEED_RECORDS, "results/cpu-choices"}
    assert (ROOT / "docs/speed.md").read_text(encoding="utf-8").count(speed_tables.MORE_SPEED_BLOCK[0]) == 1
