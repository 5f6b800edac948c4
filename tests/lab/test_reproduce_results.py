"""`lab/reproduce_results.sh` end to end (SMOKE=1, and QUICK_START=1) on a small data folder written in the
published files' formats: every stage and run, the table built from them, and a run continued after an
interruption."""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from hf_bertscratch.baselines import BASELINE_NAMES, baseline_key
from lab import finetune_tasks as task_runs
from lab import results_table as results

from conftest import cut_back_to_checkpoint
from test_results_table import _task_table

ROOT = Path(__file__).resolve().parents[2]
POSITIVE = "great wonderful moving brilliant fine superb charming".split()
NEGATIVE = "awful boring dull terrible weak clumsy tedious".split()
FILLER = "the film movie story actor plot scene it was and a of to in this with its".split()
ENTITIES = {"PER": ["john", "mary"], "LOC": ["paris", "london"], "ORG": ["acme", "reuters"], "MISC": ["french"]}
# A classification task and a token-classification task with a test split (every shape runs end to end in
# test_finetuning; each fine-tune here is a process start, which dominates the smoke run's time).
SMOKE_TASKS = ("cola", "conll2003")


# ------------------------------------------------------------------------------------------ a data folder
def _words(rng: random.Random, label: int, count: int) -> list[str]:
    cue = POSITIVE if label else NEGATIVE
    return [rng.choice(cue) if rng.random() < 0.2 else rng.choice(FILLER) for _ in range(count)]


def _write_imdb(folder: Path, rng: random.Random) -> None:
    """imdb/train.csv.gz, `id,rating,label,text` (the pretraining text)."""
    folder.mkdir(parents=True)
    with gzip.open(folder / "train.csv.gz", "wt", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "rating", "label", "text"])
        for i in range(400):
            label = i % 2
            writer.writerow([i, 8 if label else 2, label, " ".join(_words(rng, label, rng.randint(40, 120))) + " ."])


def _write_cola(folder: Path, rng: random.Random) -> None:
    """glue/CoLA/{train,dev}.tsv without a header: `source label mark sentence`, mark '*' on unacceptable ones."""
    folder.mkdir(parents=True)
    for split, count in (("train", 80), ("dev", 24)):
        lines = []
        for i in range(count):
            label = i % 2
            lines.append(f"gj04\t{label}\t{'' if label else '*'}\t{' '.join(_words(rng, label, rng.randint(4, 10)))} .")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _conll_sentence(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(rng.randint(4, 9)):
        if rng.random() < 0.3:
            kind = rng.choice(sorted(ENTITIES))
            for j in range(rng.randint(1, 2)):
                lines.append(f"{rng.choice(ENTITIES[kind])} NNP {'B' if j == 0 else 'I'}-NP {'BI'[j]}-{kind}")
        else:
            lines.append(f"{rng.choice(FILLER)} NN B-NP O")
    return [*lines, ". . O O"]


def _write_conll(folder: Path, rng: random.Random) -> None:
    """conll2003/{train,valid,test}.txt: a -DOCSTART- line, then `word POS chunk NER` lines, sentences apart by blank
    lines."""
    folder.mkdir(parents=True)
    for split, count in (("train", 80), ("valid", 24), ("test", 24)):
        blocks = ["-DOCSTART- -X- -X- O"] + ["\n".join(_conll_sentence(rng)) for _ in range(count)]
        (folder / f"{split}.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def _fake_data_dir(root: Path) -> Path:
    """The layout of ../shared/data for the pretraining text and the smoke run's tasks."""
    rng = random.Random(0)
    _write_imdb(root / "imdb", rng)
    _write_cola(root / "glue" / "CoLA", rng)
    _write_conll(root / "conll2003", rng)
    return root


def _run_script(runs: Path, data: Path, tasks: tuple[str, ...], **knobs: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SMOKE": "1",
        "TASKS": " ".join(tasks),
        "DATA_DIR": str(data),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(runs.parent / "datasets-cache"),  # the test's files leave no trace in ~/.cache
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # its `python` is ours
        "RECORDS": str(runs.parent / "records"),  # the durable records, never the repository's results/
        **knobs,
    }
    return subprocess.run(
        ["bash", "lab/reproduce_results.sh", str(runs)],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
    )


# ------------------------------------------------------------------------------------------ reading the runs
def _expected_cell(values: list[float]) -> str:
    """Mean, and ± the sample standard deviation when there are several values."""
    if not values:
        return "not run"
    spread = f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.1f}{spread}"


def _main_score(run: dict) -> float:
    return run[f"eval_{run['main_metric']}"]


def _finished_runs(runs: Path, task: str, init: str) -> list[dict]:
    folders = [folder for folder in runs.glob(f"{task}-{init}-lr*-seed*") if folder.is_dir()]
    return [json.loads((folder / "all_results.json").read_text()) for folder in sorted(folders)]


def _chosen_runs(runs: Path, task: str, init: str) -> list[dict]:
    """The runs of (task, init) at the rate whose first-seed run scored best on dev (the smaller rate on ties), by
    seed, checking the sweep ran every rate with the first seed and the other seeds at that rate only."""
    found = _finished_runs(runs, task, init)
    for run in found:  # each folder holds the run its name says, started from the last pretraining stage
        assert (runs / task_runs.run_name(task, init, run["learning_rate"], run["seed"])).is_dir()
        assert (run["task"], run["init_from_scratch"]) == (task, init == "scratch")
        assert run["model_name_or_path"].endswith("pretrain-tasks")
    first_seed, *other_seeds = sorted({run["seed"] for run in found})
    first = [run for run in found if run["seed"] == first_seed]
    assert len(first) > 1 and other_seeds  # rates were compared, and more seeds ran
    best = max(_main_score(run) for run in first)
    rate = min(run["learning_rate"] for run in first if _main_score(run) == best)
    assert [run["seed"] for run in found if run["learning_rate"] != rate] == [first_seed]
    chosen = sorted((run for run in found if run["learning_rate"] == rate), key=lambda run: run["seed"])
    assert [run["seed"] for run in chosen] == [first_seed, *other_seeds]
    return chosen


def _check_row(cells: list[str], chosen: dict[str, list[dict]], key: str) -> None:
    """A table row against the chosen runs' own numbers: mean ± sd per init, their difference, the no-learning
    baselines the runs recorded for the task's main metric, the rates."""
    values = {init: [100 * run[key] for run in runs] for init, runs in chosen.items()}
    pretrained, scratch, difference, baselines, how = cells
    first = chosen["pretrained"][0]
    split = key.split("_", 1)[0]  # the row's split: its baselines are the runs' on that split
    recorded = {name: first.get(baseline_key(answer, split)) for answer, name in BASELINE_NAMES.items()}
    if key == f"{split}_{first['main_metric']}":  # the task's main metric (QA records none)
        assert baselines == ", ".join(
            f"{name} {100 * value:.1f}" for name, value in recorded.items() if value is not None
        )
    else:
        assert baselines == ""
    assert (pretrained, scratch) == (_expected_cell(values["pretrained"]), _expected_cell(values["scratch"]))
    assert difference == f"{statistics.fmean(values['pretrained']) - statistics.fmean(values['scratch']):+.1f}"
    rates = "/".join(f"{chosen[init][0]['learning_rate']:g}" for init in task_runs.INITS)
    assert how.startswith(f"lr {rates}; {len(chosen['pretrained'])} seeds; ")
    assert f"max_seq_length {chosen['pretrained'][0]['max_seq_length']};" in how


# ------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_reproduce_results_smoke_run_builds_the_table_from_its_runs(tmp_path: Path) -> None:
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    task_text = {"TASK_TEXT_MINUTES": "15"}  # the optional last stage too, on the tasks' text
    done = _run_script(runs, data, SMOKE_TASKS, **task_text)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    table = (runs / "results.md").read_text()
    assert table == results.results_table(runs)
    config = json.loads((runs / "pretrain" / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (4, 256)  # the default size, mini
    size = f"{config['num_hidden_layers']}L/{config['hidden_size']}H, vocab {config['vocab_size']}"
    assert table.startswith(f"Pretraining: {size}, MLM ") and " then " in table.splitlines()[0]  # both stages
    rows = _task_table(table)
    chosen = {task: {init: _chosen_runs(runs, task, init) for init in task_runs.INITS} for task in SMOKE_TASKS}
    for task, key, label in results.ROWS:
        if task in SMOKE_TASKS:
            _check_row(rows[label], chosen[task], key)
        else:
            assert rows[label][:3] == ["not run", "not run", ""]
    _check_row(rows["CoNLL-2003 entity F1 (test)"], chosen["conll2003"], "test_overall_f1")  # the test split's F1
    assert rows["GLUE average of the five dev tasks above"][:3] == ["incomplete", "incomplete", ""]

    # A fine-tune interrupted after its first checkpoint: a second run skips every finished stage and run,
    # continues that one from the checkpoint (its log keeps the first part), and rebuilds the table.
    cut = runs / task_runs.run_name("conll2003", "scratch", chosen["conll2003"]["scratch"][-1]["learning_rate"], 43)
    finished = json.loads((cut / "all_results.json").read_text())
    checkpoints = sorted((path.name for path in cut.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))
    cut_back_to_checkpoint(cut, checkpoints[0])
    shutil.rmtree(tmp_path / "records" / cut.name)  # stopped before it finished: never recorded
    again = _run_script(runs, data, SMOKE_TASKS, **task_text)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    run_count = sum(len(_finished_runs(runs, task, init)) for task in SMOKE_TASKS for init in task_runs.INITS)
    stages = [stage for stage in results.PRETRAINING_STAGES if (runs / stage).is_dir()]
    assert stages == ["pretrain", "pretrain-tasks"]  # the fine-tuned tasks' text, no longer blocks
    assert all(f"Task text of {task}:" in (runs / "pretrain-tasks.log").read_text() for task in SMOKE_TASKS)
    assert results.objective_name(runs / "pretrain-tasks") == "MLM+NSP"  # by default NSP added on the tasks' text
    assert again.stdout.count("(done)") == len(stages) + run_count - 1
    assert f"resume {cut}\n" in again.stdout
    resumed = json.loads((cut / "all_results.json").read_text())
    assert resumed["global_step"] == finished["global_step"]
    assert resumed["eval_overall_f1"] == finished["eval_overall_f1"]  # the checkpoint's model, scored again
    assert Path(f"{cut}.log").read_text().count("INFO hf_bertscratch.finetuning: eval_overall_f1") == 2
    assert (runs / "results.md").read_text() == results.results_table(runs)
    # every stage and run is recorded, and the records alone make the same table
    records = tmp_path / "records"
    assert sorted(path.name for path in records.iterdir()) == sorted(
        path.name for path in runs.iterdir() if (path / "all_results.json").is_file()
    )
    assert results.results_table(records) == results.results_table(runs)


@pytest.mark.slow
def test_quick_start_knob_fine_tunes_readmes_quick_start_itself(tmp_path: Path) -> None:
    """QUICK_START=1: stage 1 is `bertscratch pretrain` with its defaults (the packaged WikiText-2, no IMDB text), no
    longer-block stage, and the task runs start from that model."""
    data, runs = _fake_data_dir(tmp_path / "data"), tmp_path / "runs"
    done = _run_script(runs, data, ("cola",), QUICK_START="1", INITS="pretrained")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [stage for stage in results.PRETRAINING_STAGES if (runs / stage).exists()] == ["pretrain"]
    card = (runs / "pretrain" / "README.md").read_text()
    assert "name: WikiText-2" in card and "imdb" not in card.lower()
    finished = _finished_runs(runs, "cola", "pretrained")
    assert len(finished) == 3  # two rates at the first seed, then the second seed at the chosen one
    assert {run["model_name_or_path"] for run in finished} == {str(runs / "pretrain")}
    assert (runs / "results.md").read_text() == results.results_table(runs)


def test_quick_start_knob_refuses_other_values(tmp_path: Path) -> None:
    done = _run_script(tmp_path / "runs", tmp_path / "data", ("rte",), QUICK_START="yes")
    assert done.returncode == 2 and "QUICK_START=yes must be 0 or 1" in done.stderr
    assert not (tmp_path / "runs").exists()
