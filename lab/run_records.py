"""Durable records of a task table's runs, kept under results/ beside the table they make.

A run folder (runs/...) holds weights and checkpoints and is lost with the machine; the table is made from a few small
files of each folder. `keep` copies those files into a record folder of the same layout (results/task-runs/<table>/
<run>/: all_results.json, the config.json of a pretraining stage, the step and token counts of its trainer_state.json)
with the fingerprint of the weights the run started from. `restore` puts a recorded run back into an empty run folder
when it started from the same weights, so a driver started again on another machine skips what is recorded, and
`lab.results_table` reads a record folder as it reads a runs folder.

    python -m lab.run_records keep RUN_FOLDER RECORD_DIR     # after a pretraining stage finishes
    python -m lab.run_records continue RUN_FOLDER            # the flags that carry on its unfinished run, one a line

`continue` gives the shell drivers the rule the Python ones follow (`hf_bertscratch_base.run_files.continue_flags`):
resume from the last whole checkpoint, or start over beside checkpoints a run stopped while saving left incomplete.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from hf_bertscratch_base.run_files import continue_flags

SOURCE = "source.json"  # what a recorded run started from: {"weights": <sha256 of the starting model's weights>}
RESTORED = "restored_from_record.json"


def fingerprint(model_folder: str | Path, weights: bool = True) -> str:
    """sha256 of what a run takes from a model folder: its weights (model.safetensors), or with `weights=False` its
    tokenizer (tokenizer.json; the from-scratch runs of a table take only the config and tokenizer)."""
    path = Path(model_folder) / ("model.safetensors" if weights else "tokenizer.json")
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: nothing to fingerprint the runs started from it by.")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{path.name}:{digest.hexdigest()}"


def _write_json(path: Path, value: dict) -> None:
    """Written whole or not at all: a stopped copy never leaves half a record."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def keep(run_folder: str | Path, record_dir: str | Path, source: str | None = None) -> Path:
    """Copy a finished run's table files to `record_dir/<run folder name>/`; `source`: the fingerprint of what it
    started from (None: not checked on restore, as for a pretraining stage)."""
    run_folder = Path(run_folder)
    results = _read_json(run_folder / "all_results.json")
    if results is None:
        raise FileNotFoundError(f"{run_folder} has not finished (no all_results.json); nothing to record.")
    record = Path(record_dir) / run_folder.name
    record.mkdir(parents=True, exist_ok=True)
    state = _read_json(run_folder / "trainer_state.json") or {}
    counts = {key: state[key] for key in ("global_step", "num_input_tokens_seen") if key in state}
    if counts:
        _write_json(record / "trainer_state.json", counts)
    config = _read_json(run_folder / "config.json")
    if config is not None and "task" not in results:  # a pretraining stage: the table names its size and objective
        _write_json(record / "config.json", config)
    _write_json(record / SOURCE, {"weights": source})
    _write_json(record / "all_results.json", results)  # last: a record with all_results.json is complete
    return record


def restore(record_dir: str | Path, run_folder: str | Path, source: str | None = None) -> dict | None:
    """A recorded run's all_results.json put back into `run_folder` (which must hold no results of its own), or None
    when none is recorded or it started from other weights than `source`."""
    run_folder = Path(run_folder)
    record = Path(record_dir) / run_folder.name
    results = _read_json(record / "all_results.json")
    recorded_source = (_read_json(record / SOURCE) or {}).get("weights")
    if results is None or (source is not None and recorded_source != source):
        return None
    run_folder.mkdir(parents=True, exist_ok=True)
    _write_json(run_folder / RESTORED, {"record": str(record)})
    _write_json(run_folder / "all_results.json", results)
    return results


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "continue":
        for flag in continue_flags(args[1]):
            print(flag)
        return
    if len(args) != 3 or args[0] != "keep":
        raise SystemExit(
            "usage: python -m lab.run_records keep RUN_FOLDER RECORD_DIR, or python -m lab.run_records continue "
            "RUN_FOLDER"
        )
    print(f"recorded {args[1]} in {keep(args[1], args[2])}")


__all__ = ["fingerprint", "keep", "restore"]


if __name__ == "__main__":
    main()
