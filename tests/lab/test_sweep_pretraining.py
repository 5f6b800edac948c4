"""The pretraining sweep's bookkeeping: which command each candidate runs, when it left the plateau, the table."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from lab import sweep_pretraining as sweep

from conftest import write_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def test_plateau_exit_is_the_first_logged_loss_below_the_threshold() -> None:
    history = [
        {"step": 50, "loss": 8.6},
        {"step": 100, "loss": 6.4},
        {"step": 150, "eval_loss": 5.0},
        {"step": 200, "loss": sweep.PLATEAU_EXIT_LOSS - 0.01},
        {"step": 250, "loss": 4.0},
    ]
    assert sweep.plateau_exit_step(history) == 200
    assert sweep.plateau_exit_step(history[:3]) is None


def _fake_run(calls: list[dict]):
    """Stands in for the training subprocess: records the command and writes what a finished run leaves."""

    real_run = subprocess.run

    def run(command, stdout=None, stderr=None, check=False, env=None, **kwargs):
        if command[0] == "git":  # the record's commit: the real git (patching sweep.subprocess patches it for all)
            return real_run(command, stdout=stdout, stderr=stderr, check=check, env=env, **kwargs)
        calls.append({"command": command, "env": env})
        out = Path(command[command.index("--output_dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        lr = float(command[command.index("--learning_rate") + 1]) if "--learning_rate" in command else 3e-3
        loss = 4.0 if lr < 3e-3 else 6.3
        (out / "all_results.json").write_text(
            json.dumps(
                {
                    "eval_accuracy": 0.3 if loss < 5 else 0.14,
                    "eval_mlm_loss": loss,
                    "eval_perplexity": 2.718**loss,
                    "train_tokens": 1e6,
                    "world_size": 1,
                    **(
                        {"eval_discriminator_accuracy": 0.9, "eval_replaced_fraction": 0.14}
                        if "electra" in command
                        else {}
                    ),
                }
            )
        )
        (out / "trainer_state.json").write_text(
            json.dumps({"global_step": 10, "log_history": [{"step": 5, "loss": 6.4}, {"step": 10, "loss": loss}]})
        )
        return subprocess.CompletedProcess(command, 0)

    return run


def test_step_screen_runs_each_seed_in_one_process_with_the_default_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    argv = [
        "--runs_dir",
        str(tmp_path),
        "--max_steps",
        "10",
        "--jobs",
        "2",
        "--seeds",
        "42",
        "1",
        "--only",
        "default",
        "lr-1e-3",
    ]
    sweep.main(argv)
    assert len(calls) == 4
    for call in calls:
        command = call["command"]
        assert command[command.index("--max_steps") + 1] == "10" and "--max_train_minutes" not in command
        assert command[command.index("--num_processes") + 1] == "1"
        assert command[command.index("--gradient_accumulation_steps") + 1] == str(sweep.DEFAULT_PROCESSES)
        assert call["env"]["OMP_NUM_THREADS"] == str(max(1, (sweep.os.cpu_count() or 1) // 2))
    assert sorted(
        str(Path(c["command"][c["command"].index("--output_dir") + 1]).relative_to(tmp_path)) for c in calls
    ) == ["seed-1/default", "seed-1/lr-1e-3", "seed-42/default", "seed-42/lr-1e-3"]
    table = (tmp_path / "sweep.md").read_text().splitlines()
    assert table[0].startswith("10 steps per run")
    body = [line.split(" | ")[:2] for line in table[4:]]
    assert body == [
        ["| lr-1e-3", "1"],
        ["| lr-1e-3", "42"],
        ["| default", "1"],
        ["| default", "42"],
    ]  # best mean loss first
    assert all(line.split(" | ")[8] == ("10" if "lr-1e-3" in line else "-") for line in table[4:])  # left the plateau

    calls.clear()  # finished runs are not trained again
    sweep.main(argv)
    assert calls == []


def test_budget_screen_lays_each_candidates_own_schedule_over_a_fraction_of_the_reference_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    argv = ["--runs_dir", str(tmp_path), "--budget_fractions", "0.25", "1", "--jobs", "2", "--only", "default"]
    sweep.main(argv)
    steps = {}
    for call in calls:
        command = call["command"]
        assert "--lr_scheduler_type" not in command and "--warmup_steps" not in command  # the recipe's own schedule
        assert command[command.index("--gradient_accumulation_steps") + 1] == str(sweep.DEFAULT_PROCESSES)
        steps[Path(command[command.index("--output_dir") + 1]).name] = int(command[command.index("--max_steps") + 1])
    assert steps == {"default@0.25": sweep.REFERENCE_BUDGET_STEPS // 4, "default@1": sweep.REFERENCE_BUDGET_STEPS}
    table = (tmp_path / "sweep.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[4:]] == ["| default @1", "| default @0.25"]  # the full budget first
    record = json.loads((tmp_path / "sweep.json").read_text())
    assert sorted(row["budget_fraction"] for row in record["rows"]) == [0.25, 1.0]
    with pytest.raises(SystemExit):
        sweep.main(["--runs_dir", str(tmp_path), "--budget_fractions", "0"])
    assert "--budget_fractions must be positive fractions of the reference budget, got 0" in capsys.readouterr().err


def test_a_resumed_sweep_keeps_its_recorded_rows_and_runs_only_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    record = tmp_path / "record.json"
    first = ["--runs_dir", str(tmp_path / "a"), "--budget_fractions", "1", "--only", "default", "--record", str(record)]
    sweep.main(first)
    assert len(calls) == 1
    calls.clear()  # a new machine: the run folders are gone, the committed record is not
    sweep.main(["--runs_dir", str(tmp_path / "b"), *first[2:-3], "default", "mask-30", "--record", str(record)])
    assert [Path(call["command"][call["command"].index("--output_dir") + 1]).name for call in calls] == ["mask-30@1"]
    rows = json.loads(record.read_text())["rows"]
    assert [(row["name"], row["budget_fraction"]) for row in rows] == [("default", 1.0), ("mask-30", 1.0)]
    record.write_text("[]")
    with pytest.raises(SystemExit, match="is not a sweep record"):
        sweep.main(first)


def test_an_interrupted_candidate_continues_from_its_last_whole_checkpoint_or_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate stopped while saving its only checkpoint (kill -9) has nothing to continue from: it starts over
    beside it, where the pretraining run would refuse a resume and a fresh start; one with a whole checkpoint resumes."""
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    argv = ["--runs_dir", str(tmp_path), "--minutes", "2", "--only", "mask-15", "mask-30"]
    write_checkpoint(tmp_path / "mask-15" / "checkpoint-40", step=40, missing=("optimizer.pt", "trainer_state.json"))
    write_checkpoint(tmp_path / "mask-30" / "checkpoint-20", step=20)
    sweep.main(argv)
    flags = {
        Path(call["command"][call["command"].index("--output_dir") + 1]).name: call["command"][-2:] for call in calls
    }
    assert flags == {"mask-15": ["--overwrite_output_dir", "true"], "mask-30": ["--resume_from_checkpoint", "last"]}


def test_timed_runs_use_the_budget_and_refuse_parallel_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    sweep.main(["--runs_dir", str(tmp_path), "--minutes", "2", "--seed", "7", "--only", "mask-15"])
    command = calls[0]["command"]
    assert command[command.index("--max_train_minutes") + 1] == "2.0" and calls[0]["env"] is None
    assert command[command.index("--output_dir") + 1] == str(tmp_path / "mask-15")  # one seed: no seed folder
    assert command[-2:] == ["--mlm_probability", "0.15"]
    with pytest.raises(SystemExit):
        sweep.main(["--runs_dir", str(tmp_path), "--jobs", "2"])
    assert "--jobs must be 1, or more with --max_steps" in capsys.readouterr().err


def test_electra_rows_give_the_discriminator_accuracy_beside_always_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(sweep.subprocess, "run", _fake_run(calls))
    monkeypatch.setattr(sweep, "neighbour_attention", lambda model_dir: 0.5)
    record_path = tmp_path / "record.json"
    argv = ["--runs_dir", str(tmp_path), "--minutes", "2", "--only", "default", "electra-weight-10"]
    sweep.main([*argv, "--record", str(record_path)])
    record = json.loads(record_path.read_text())
    assert record == json.loads((tmp_path / "sweep.json").read_text())  # the runs folder keeps the same record
    assert record["command"].startswith("python -m lab.sweep_pretraining --runs_dir ")
    assert record["arguments"]["minutes"] == 2 and record["length"] == "Budget 2 min of training"
    assert [row["name"] for row in record["rows"]] == ["default", "electra-weight-10"]
    assert record["rows"][1]["discriminator_accuracy"] == 0.9 and record["cpu"] and record["date"]
    electra = calls[1]["command"]
    assert electra[-4:] == ["--objective", "electra", "--discriminator_weight", "10"]
    rows = {line.split(" | ")[0]: line for line in (tmp_path / "sweep.md").read_text().splitlines()[4:]}
    assert rows["| electra-weight-10"].endswith("| 90.0% (86.0%) |")  # 1 - 0.14 replaced: all "original"
    assert rows["| default"].endswith("| - |")


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
