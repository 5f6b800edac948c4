"""`lab.finetune_tasks`: the fine-tuning command of each task, init, rate and seed, the sweep that chooses the rate
on the first seed, and the runs it records and restores."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hf_bertscratch import finetuning_arguments
from hf_bertscratch.tasks import TASK_DEFAULTS, TASKS
from hf_bertscratch.tasks.data import check_data_arguments
from lab import finetune_tasks as task_runs
from lab import run_records

from conftest import write_checkpoint

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------ the sweep's commands
def _sweep(tmp_path: Path, **arguments: object) -> task_runs.Sweep:
    pretrained = tmp_path / "pretrain-long"
    pretrained.mkdir(exist_ok=True)
    (pretrained / "config.json").write_text("{}")
    args = task_runs.FinetuneTasksArguments(runs_dir=str(tmp_path / "runs"), pretrained=str(pretrained), **arguments)
    return task_runs.Sweep(args, log=lambda line: None)


def test_each_run_is_a_finetune_command_with_its_task_recipe(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, data_dir="/data", batch_size=16, extra=["--weight_decay", "0.01"])
    folder = sweep.runs_dir / task_runs.run_name("imdb", "scratch", 2e-4, 43)
    command = sweep.command("imdb", "scratch", 2e-4, 43, folder)
    assert command[:2] == [sys.executable, str(ROOT / "scripts" / "finetune.py")]
    model, data, training = finetuning_arguments.parse_args(command[2:])  # finetune.py's own parser takes it
    recipe = task_runs.RECIPES["imdb"]
    assert (model.model_name_or_path, model.init_from_scratch) == (sweep.args.pretrained, True)
    assert (data.task, data.data_dir, data.max_seq_length) == ("imdb", "/data", recipe.max_seq_length)
    assert data.truncation == TASK_DEFAULTS["imdb"].truncation  # no flag of its own: the task's default
    assert (training.seed, training.learning_rate, training.num_train_epochs) == (43, 2e-4, recipe.epochs)
    assert (training.per_device_train_batch_size, training.weight_decay) == (16, 0.01)
    assert Path(training.output_dir) == folder and training.resume_from_checkpoint is None

    command = sweep.command("cola", "pretrained", 1e-3, 42, folder)
    assert "--init_from_scratch" not in command and "--truncation" not in command
    model, data, training = finetuning_arguments.parse_args(command[2:])
    assert (model.init_from_scratch, data.task, training.learning_rate) == (False, "cola", 1e-3)

    # Stopped while saving its only checkpoint: nothing to continue from, so the run starts over beside it.
    write_checkpoint(folder / "checkpoint-30", step=30, missing=("trainer_state.json",))
    _, _, training = finetuning_arguments.parse_args(sweep.command("cola", "pretrained", 1e-3, 42, folder)[2:])
    assert (training.resume_from_checkpoint, training.overwrite_output_dir) == (None, True)
    write_checkpoint(folder / "checkpoint-20", step=20)  # interrupted: continue from its last whole checkpoint
    _, _, training = finetuning_arguments.parse_args(sweep.command("cola", "pretrained", 1e-3, 42, folder)[2:])
    assert (training.resume_from_checkpoint, training.overwrite_output_dir) == ("last", False)


@pytest.mark.parametrize("smoke", [False, True])
def test_every_recipe_passes_finetunes_argument_checks(tmp_path: Path, smoke: bool) -> None:
    sweep = _sweep(tmp_path, smoke=smoke)
    for task, recipe in task_runs.RECIPES.items():
        command = sweep.command(task, "scratch", recipe.learning_rates[0], recipe.seeds[0], tmp_path / task)
        _, data, training = finetuning_arguments.parse_args(command[2:])
        assert check_data_arguments(data) == TASKS[task]
        if smoke:  # a few steps on a few examples, still comparing two rates over two seeds
            assert training.num_train_epochs <= recipe.epochs and data.max_seq_length <= recipe.max_seq_length
            assert data.max_train_samples is not None and data.max_eval_samples is not None
            assert sweep.recipe(task).seeds == recipe.seeds[:2]
            assert sweep.recipe(task).learning_rates == recipe.learning_rates[:2]


def test_sweep_chooses_the_rate_on_the_first_seed_then_runs_the_other_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        """Stands in for finetune.py: a run scores best at 3e-4."""
        commands.append(command)
        rate = float(command[command.index("--learning_rate") + 1])
        seed = int(command[command.index("--seed") + 1])
        folder = Path(command[command.index("--output_dir") + 1])
        folder.mkdir()
        run = {"main_metric": "accuracy", "eval_accuracy": 0.7 if rate == 3e-4 else 0.5, "seed": seed}
        (folder / "all_results.json").write_text(json.dumps({**run, "learning_rate": rate}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    sweep = _sweep(tmp_path, tasks=["rte"], inits=["scratch"])
    recipe = task_runs.RECIPES["rte"]
    sweep.run_all()
    ran = [(float(c[c.index("--learning_rate") + 1]), int(c[c.index("--seed") + 1])) for c in commands]
    first = len(recipe.learning_rates)  # the candidates (two at a time, in any order), then the seeds at 3e-4
    assert sorted(ran[:first]) == sorted((rate, recipe.seeds[0]) for rate in recipe.learning_rates)
    assert sorted(ran[first:]) == [(3e-4, s) for s in recipe.seeds[1:]]
    sweep.run_all()  # everything finished: nothing runs again
    assert len(commands) == len(ran)


def test_sweep_runs_a_tasks_seeds_side_by_side_and_stops_at_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SST-2 has one candidate rate: its other seeds start together (each waits for the other at a barrier, which
    times out if they ran one after another); a failed run stops the sweep with its log's name."""
    together = threading.Barrier(2, timeout=30)

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        seed = int(command[command.index("--seed") + 1])
        folder = Path(command[command.index("--output_dir") + 1])
        if seed != task_runs.RECIPES["sst2"].seeds[0]:
            together.wait()
        folder.mkdir()
        run = {"main_metric": "accuracy", "eval_accuracy": 0.8, "seed": seed}
        (folder / "all_results.json").write_text(json.dumps(run))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    assert len(task_runs.RECIPES["sst2"].learning_rates) == 1 and len(task_runs.RECIPES["sst2"].seeds) == 3
    _sweep(tmp_path, tasks=["sst2"], inits=["pretrained"]).run_all()
    assert len(list((tmp_path / "runs").glob("sst2-pretrained-*/all_results.json"))) == 3

    monkeypatch.setattr(task_runs.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(command, 3))
    with pytest.raises(RuntimeError, match=r"rte-scratch-lr[0-9.e-]+-seed42 failed \(exit 3\); see .*\.log"):
        _sweep(tmp_path, tasks=["rte"], inits=["scratch"]).run_all()


def test_a_recorded_run_is_restored_only_from_the_same_weights_and_a_finished_one_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine is replaced: its run folders are gone, the committed records are not. A second sweep restores the
    runs recorded from the same pretrained weights (and tokenizer, for the from-scratch runs) without running them,
    and runs again those recorded from other weights."""
    ran: list[str] = []

    def finetune(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        folder = Path(command[command.index("--output_dir") + 1])
        ran.append(folder.name)
        folder.mkdir()
        seed = int(command[command.index("--seed") + 1])
        run = {"main_metric": "accuracy", "eval_accuracy": 0.8, "seed": seed, "task": "sst2"}
        (folder / "all_results.json").write_text(json.dumps(run))
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": 7, "log_history": [{"loss": 1.0}]}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(task_runs.subprocess, "run", finetune)
    records = tmp_path / "records"
    pretrained = Path(_sweep(tmp_path).args.pretrained)
    (pretrained / "model.safetensors").write_bytes(b"weights")
    (pretrained / "tokenizer.json").write_text("{}")
    sweep = _sweep(tmp_path, tasks=["sst2"], record_dir=str(records))
    sweep.run_all()
    assert len(ran) == 6
    assert sorted(path.name for path in records.iterdir()) == sorted(ran)
    kept = records / ran[0]
    assert json.loads((kept / "trainer_state.json").read_text()) == {"global_step": 7}  # no log history
    assert json.loads((kept / "all_results.json").read_text()) == json.loads(
        (sweep.runs_dir / ran[0] / "all_results.json").read_text()
    )

    shutil.rmtree(sweep.runs_dir)  # a new machine
    ran.clear()
    (pretrained / "model.safetensors").write_bytes(b"other weights")  # pretrained again
    again = _sweep(tmp_path, tasks=["sst2"], record_dir=str(records))
    again.run_all()
    assert sorted(ran) == sorted(name for name in (path.name for path in records.iterdir()) if "-pretrained-" in name)
    restored = [path.parent.name for path in again.runs_dir.glob(f"*/{run_records.RESTORED}")]
    assert sorted(restored) == sorted(path.name for path in records.iterdir() if "-scratch-" in path.name)
    assert len(restored) == 3 and len(ran) == 3


def test_the_shell_drivers_get_the_flags_that_carry_on_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`python -m lab.run_records continue FOLDER`: the flags the Python drivers add, one a line, for the shell ones."""
    run_records.main(["continue", str(tmp_path / "none")])
    assert capsys.readouterr().out == ""
    write_checkpoint(tmp_path / "run" / "checkpoint-8", step=8, missing=("model.safetensors",))
    run_records.main(["continue", str(tmp_path / "run")])
    assert capsys.readouterr().out == "--overwrite_output_dir\ntrue\n"
    write_checkpoint(tmp_path / "run" / "checkpoint-4", step=4)
    run_records.main(["continue", str(tmp_path / "run")])
    assert capsys.readouterr().out == "--resume_from_checkpoint\nlast\n"


def test_sweep_rejects_unknown_tasks_and_a_pretrained_folder_without_config(tmp_path: Path) -> None:
    pretrained = _sweep(tmp_path).args.pretrained
    with pytest.raises(ValueError, match="not in the task table"):
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", pretrained, "--tasks", "nope"])
    with pytest.raises(ValueError, match=r"Unknown task or init \['squad'\]"):  # a table task without a recipe
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", pretrained, "--tasks", "squad"])
    with pytest.raises(ValueError, match=r"Unknown task or init \['frozen'\]"):
        _sweep(tmp_path, inits=["frozen"])
    with pytest.raises(FileNotFoundError, match="no config.json"):
        task_runs.main(["--runs_dir", str(tmp_path / "runs"), "--pretrained", str(tmp_path / "runs")])


# ------------------------------------------------------------------------------------------ the sweep's log
# four threads each print many lines through `log` into a pipe, as the sweep's runs do into reproduce_results.sh
PRINTING = """
import sys, threading
from lab.finetune_tasks import print_line
log = print if sys.argv[1] == "print" else print_line
def work(thread):
    for k in range(20000):
        log(f"{thread} resume /runs/run-{k}")
threads = [threading.Thread(target=work, args=(thread,)) for thread in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def _broken_lines(log: str) -> int:
    printed = subprocess.run(
        [sys.executable, "-c", PRINTING, log], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    lines = printed.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 4 * 20000  # every line printed, each ended by one newline
    return sum(line.count(" resume ") != 1 for line in lines[:-1])


def test_progress_lines_stay_whole_when_threads_print_at_once() -> None:
    assert _broken_lines("print_line") == 0
