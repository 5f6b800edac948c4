"""`lab/time_pretraining_ab.py`: each commit in its own worktree, runs alternated round by round from there (which
runs first swapping each round), every run's tokens/s and the ratio of the medians in the record; the worktrees are
removed after."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lab import time_pretraining_ab as script


def test_runs_alternate_between_the_commits_worktrees(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_run = subprocess.run
    ran: list[tuple[str, ...]] = []
    speed = {"a-aaa": iter([100.0, 120.0]), "b-bbb": iter([90.0, 96.0])}

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        if command[0] == "git" and command[1] != "-C":  # the record's commit
            return real_run(command, **kwargs)
        if command[0] == "git":  # git -C ROOT worktree add --detach PATH COMMIT, or remove --force PATH
            ran.append(("git", command[4], Path(command[-2 if command[4] == "add" else -1]).name))
            return subprocess.CompletedProcess(command, 0)
        checkout = Path(str(kwargs["cwd"]))
        assert kwargs["env"]["PYTHONPATH"] == str(checkout)  # type: ignore[index]
        out = Path(command[command.index("--output_dir") + 1])
        out.mkdir(parents=True)
        (out / "all_results.json").write_text(json.dumps({"train_tokens_per_second": next(speed[checkout.name])}))
        flags = command[command.index("true") + 1 :]  # after --disable_tqdm true: the contender's own flags
        ran.append(("pretrain", checkout.name, command[command.index("--max_train_minutes") + 1], *flags))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(script.subprocess, "run", fake_run)
    out = tmp_path / "ab.json"
    record = script.main(
        ["aaa", "bbb --precision fp32", "--minutes", "0.5", "--rounds", "2", "--output_json", str(out)]
    )
    # the first contender of a round alternates: A B, then B A; B's runs carry its flags
    a, b = ("pretrain", "a-aaa", "0.5"), ("pretrain", "b-bbb", "0.5", "--precision", "fp32")
    assert [step for step in ran if step[0] == "pretrain"] == [a, b, b, a]
    assert ran[:2] == [("git", "add", "a-aaa"), ("git", "add", "b-bbb")]
    assert ran[-2:] == [("git", "remove", "a-aaa"), ("git", "remove", "b-bbb")]
    assert record["tokens_per_second"] == {"aaa": [100.0, 120.0], "bbb --precision fp32": [90.0, 96.0]}
    assert record["second_over_first"] == pytest.approx(93.0 / 110.0)
    assert json.loads(out.read_text())["command"].startswith(script.PROGRAM)
