"""The finished-run protocol pretraining and fine-tuning share (`run_folder.finish_run`)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from hf_bertscratch import convert, run_folder
from hf_bertscratch.run_folder import FINISHED_FILES, STAGING, final_path, finish_run, publish_folder, staged_folder

from conftest import write_checkpoint


class _Trainer:
    """What `finish_run` uses of a `transformers.Trainer`: its output_dir, saving, the state and the rank."""

    def __init__(self, output_dir: Path, main_process: bool = True) -> None:
        self.args = SimpleNamespace(output_dir=str(output_dir))
        self.accelerator = SimpleNamespace(wait_for_everyone=lambda: None)
        self.state = SimpleNamespace(save_to_json=lambda path: Path(path).write_text("{}"), global_step=20)
        self.main_process = main_process

    def is_world_process_zero(self) -> bool:
        return self.main_process

    def save_model(self, folder: str) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "model.safetensors").write_text("weights")


def _reports(staging: Path) -> None:
    for name in ("README.md", "all_results.json", "loss_curve.png"):
        (staging / name).write_text(name)


def test_finish_run_moves_the_results_and_the_card_in_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    (out / ".staging").mkdir(parents=True)
    (out / ".staging" / "stale.png").write_text("left by a run that failed while finishing")
    moved, replace = [], os.replace
    monkeypatch.setattr(
        run_folder.os, "replace", lambda source, target: moved.append(Path(target).name) or replace(source, target)
    )
    finish_run(_Trainer(out), _reports)
    assert moved[-2:] == ["all_results.json", "README.md"]
    assert sorted(moved) == sorted(path.name for path in out.iterdir())
    assert sorted(moved) == [
        "README.md",
        "all_results.json",
        "loss_curve.png",
        "model.safetensors",
        "trainer_state.json",
    ]


def test_a_run_that_fails_while_finishing_leaves_no_finished_files(tmp_path: Path) -> None:
    def failing_reports(staging: Path) -> None:
        (staging / "all_results.json").write_text("{}")
        raise RuntimeError("the plot failed")

    with pytest.raises(RuntimeError, match="the plot failed"):
        finish_run(_Trainer(tmp_path), failing_reports)
    assert not any((tmp_path / name).exists() for name in FINISHED_FILES)


def test_only_the_main_process_writes_reports(tmp_path: Path) -> None:
    finish_run(
        _Trainer(tmp_path, main_process=False), lambda staging: pytest.fail("reports written off the main process")
    )
    assert not any((tmp_path / name).exists() for name in FINISHED_FILES)


def test_log_lines_name_where_a_staged_file_ends_up(tmp_path: Path) -> None:
    assert final_path(tmp_path / "run" / STAGING / "loss_curve.png") == tmp_path / "run" / "loss_curve.png"
    assert final_path(tmp_path / "run" / "loss_curve.png") == tmp_path / "run" / "loss_curve.png"


def test_publishing_replaces_a_subfolder_an_earlier_run_left(tmp_path: Path) -> None:
    """A rerun with --overwrite_output_dir of a run that writes a subfolder (sentence-transformers' 1_Pooling, an
    ELECTRA generator) moves the new one in over the old, which is not empty."""
    output_dir, staging = tmp_path / "run", tmp_path / "run" / STAGING
    (output_dir / "1_Pooling").mkdir(parents=True)
    (output_dir / "1_Pooling" / "config.json").write_text("old")
    (output_dir / "1_Pooling" / "stale.txt").write_text("old")
    (staging / "1_Pooling").mkdir(parents=True)
    (staging / "1_Pooling" / "config.json").write_text("new")
    (staging / "README.md").write_text("card")
    publish_folder(staging, output_dir)
    assert sorted(p.name for p in (output_dir / "1_Pooling").iterdir()) == ["config.json"]
    assert (output_dir / "1_Pooling" / "config.json").read_text() == "new" and not staging.exists()


@pytest.mark.parametrize("keep_last, kept", [(False, []), (True, ["checkpoint-20"])])
def test_a_finished_run_keeps_only_the_checkpoint_a_later_run_continues_from(
    tmp_path: Path, keep_last: bool, kept: list[str]
) -> None:
    for step in (5, 10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "optimizer.pt").write_bytes(b"x" * 1_000_000)
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    sentence = run_folder.prune_checkpoints(tmp_path, keep_last)
    assert sorted(path.name for path in tmp_path.glob("checkpoint-*")) == kept
    assert (tmp_path / "model.safetensors").is_file()
    removed = 3 - len(kept)
    assert sentence.startswith(f"{tmp_path} keeps the final model")
    assert sentence.endswith(f"removed {removed} intermediate checkpoint(s) ({removed} MB), kept for resuming an "
                             "interrupted run only.")  # fmt: skip
    assert ("checkpoint-20, which `--resume_from_checkpoint last` continues" in sentence) == keep_last


def _folder_args(output_dir: Path, overwrite: bool = False, resume: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(output_dir=str(output_dir), overwrite_output_dir=overwrite, resume_from_checkpoint=resume)


def test_an_interrupted_run_is_not_started_over_by_accident(tmp_path: Path) -> None:
    """A folder holding only checkpoint-N folders is an interrupted run: a command without --resume_from_checkpoint
    would train from step 0 beside them and remove them at its end. It is refused in one line that names the
    checkpoint and both ways on; either flag lets it through, as does a folder with no checkpoint."""
    run_folder.check_output_dir(_folder_args(tmp_path / "new"))
    for step in (6, 12):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / "runs").mkdir()  # the Trainer's log folder is no checkpoint
    with pytest.raises(ValueError) as refused:
        run_folder.check_output_dir(_folder_args(tmp_path))
    assert str(refused.value) == (
        f"output_dir {str(tmp_path)!r} holds checkpoint-12 of an interrupted run; pass --resume_from_checkpoint last "
        "to continue it or --overwrite_output_dir to start over."
    )
    with pytest.raises(ValueError, match="checkpoint-12 of an interrupted run"):
        run_folder.check_output_dir(_folder_args(tmp_path, resume="false"))
    run_folder.check_output_dir(_folder_args(tmp_path, resume="last"))
    run_folder.check_output_dir(_folder_args(tmp_path, overwrite=True))
    (tmp_path / "model.safetensors").write_text("weights")  # a finished run that kept its last checkpoint
    with pytest.raises(ValueError, match="already holds a finished run"):
        run_folder.check_output_dir(_folder_args(tmp_path))


def test_a_resumed_run_says_where_it_resumes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = tmp_path / "checkpoint-6"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text('{"global_step": 6}')
    with caplog.at_level(logging.INFO, logger=run_folder.__name__):
        run_folder.log_resumption(None)
        run_folder.log_resumption(str(checkpoint))
    assert [record.getMessage() for record in caplog.records] == [
        f"Resuming from {checkpoint} at step 6: its weights, optimizer, schedule and random state."
    ]


@pytest.mark.parametrize("resume", ["last", "true"])
def test_resuming_a_finished_run_says_it_finished(tmp_path: Path, resume: str) -> None:
    """A finished fine-tuning run removes its checkpoints: `--resume_from_checkpoint last` on its folder says the run
    there finished and how to go on, not merely that no checkpoint is there; an empty folder still says that."""
    with pytest.raises(ValueError) as refused:
        run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=resume))
    assert str(refused.value) == f"--resume_from_checkpoint {resume}: no checkpoint-* folder in {str(tmp_path)!r}."
    for name in ("model.safetensors", "all_results.json"):
        (tmp_path / name).write_text(name)
    with pytest.raises(ValueError) as refused:
        run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=resume))
    assert str(refused.value) == (
        f"--resume_from_checkpoint {resume}: the run in {str(tmp_path)!r} finished (model.safetensors, "
        "all_results.json) and kept no checkpoint-* folder to continue from; pass --overwrite_output_dir to train it "
        f"again from the start, or choose another --output_dir (with --model_name_or_path {tmp_path} to train its "
        "model further)."
    )
    write_checkpoint(
        tmp_path / "checkpoint-20"
    )  # a finished pretraining run keeps its last checkpoint, which continues
    assert run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=resume)) == str(tmp_path / "checkpoint-20")


@pytest.mark.parametrize("resume", ["last", "true"])
def test_resuming_passes_over_an_incomplete_checkpoint(
    tmp_path: Path, resume: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A run stopped while it saved a checkpoint (kill -9, a power cut, a full disk) leaves it without the files
    Trainer writes last: `last` continues from the newest whole one, saying in one line which it passed over and
    leaving it there; a truncated trainer_state.json is as incomplete as a missing one."""
    write_checkpoint(tmp_path / "checkpoint-10", step=10)
    write_checkpoint(
        tmp_path / "checkpoint-20", step=20, missing=("optimizer.pt", "scheduler.pt", "trainer_state.json")
    )
    write_checkpoint(tmp_path / "checkpoint-30", step=30, missing=("trainer_state.json",))
    (tmp_path / "checkpoint-30" / "trainer_state.json").write_text('{"global_st')
    with caplog.at_level(logging.INFO, logger=run_folder.__name__):
        chosen = run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=resume))
    assert chosen == str(tmp_path / "checkpoint-10")
    assert [record.getMessage() for record in caplog.records] == [
        f"Passing over {tmp_path / 'checkpoint-30'}: incomplete (trainer_state.json unreadable), as a run stopped "
        "while saving it leaves it; it stays where it is.",
        f"Passing over {tmp_path / 'checkpoint-20'}: incomplete (no optimizer.pt, scheduler.pt, trainer_state.json), "
        "as a run stopped while saving it leaves it; it stays where it is.",
    ]
    assert (tmp_path / "checkpoint-20").is_dir() and (tmp_path / "checkpoint-30").is_dir()


def test_a_stopped_run_names_the_checkpoint_a_rerun_continues_from(tmp_path: Path) -> None:
    """The line of a stopped run names the newest whole checkpoint, the one `last` continues from, not one an earlier
    run left incomplete past it."""
    args = SimpleNamespace(output_dir=str(tmp_path), save_strategy="steps", save_steps=3, save_only_model=False)
    write_checkpoint(tmp_path / "checkpoint-3", step=3)
    write_checkpoint(tmp_path / "checkpoint-6", step=6, missing=("trainer_state.json",))
    assert run_folder.stopped_message(args, 4) == (
        f"stopped at step 4; the last checkpoint is {tmp_path / 'checkpoint-3'}: rerun with --resume_from_checkpoint "
        "last to continue"
    )


def test_a_named_incomplete_checkpoint_is_refused(tmp_path: Path) -> None:
    incomplete = write_checkpoint(tmp_path / "checkpoint-20", missing=("model.safetensors", "trainer_state.json"))
    with pytest.raises(ValueError) as refused:
        run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=str(incomplete)))
    assert str(refused.value) == (
        f"--resume_from_checkpoint {str(incomplete)!r} is an incomplete checkpoint (no model.safetensors, "
        "trainer_state.json), as a run stopped while saving it leaves it; pass a whole one, or "
        "--resume_from_checkpoint last for the newest whole one."
    )


def test_a_checkpoint_saved_without_its_optimizer_resumes_with_save_only_model(tmp_path: Path) -> None:
    """--save_only_model checkpoints hold no optimizer or schedule: with that flag they are whole, without it they
    lack what the resume reads."""
    only_model = write_checkpoint(tmp_path / "checkpoint-20", missing=("optimizer.pt", "scheduler.pt", "rng_state.pth"))
    args = _folder_args(tmp_path, resume=str(only_model))
    with pytest.raises(ValueError, match=r"incomplete checkpoint \(no optimizer.pt, scheduler.pt\)"):
        run_folder.resolve_checkpoint(args)
    args.save_only_model = True
    assert run_folder.resolve_checkpoint(args) == str(only_model)


@pytest.mark.parametrize("resume", ["last", "true"])
def test_a_folder_of_incomplete_checkpoints_has_nothing_to_resume_from(tmp_path: Path, resume: str) -> None:
    write_checkpoint(tmp_path / "checkpoint-5", missing=("trainer_state.json",))
    with pytest.raises(ValueError) as refused:
        run_folder.resolve_checkpoint(_folder_args(tmp_path, resume=resume))
    assert str(refused.value) == (
        f"--resume_from_checkpoint {resume}: {str(tmp_path)!r} holds incomplete checkpoints alone (checkpoint-5: "
        "no trainer_state.json), as a run stopped while saving leaves them: nothing to resume from; pass "
        "--overwrite_output_dir to start over."
    )


def _finetune_reports(staging: Path) -> None:
    """A fine-tune's files: the reports every run writes, the predictions and picture of its eval and test splits,
    and an embedding model's sentence-transformers files."""
    _reports(staging)
    for name in ("predictions.csv", "confusion_matrix.png", "test_predictions.csv", "test_confusion_matrix.png"):
        (staging / name).write_text(name)
    (staging / "modules.json").write_text("[]")
    (staging / "1_Pooling").mkdir()
    (staging / "1_Pooling" / "config.json").write_text("{}")


def test_a_run_over_another_leaves_only_its_own_outputs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """--overwrite_output_dir over a finished run of another kind: the files the earlier run wrote that this one
    does not (its predictions, pictures, sentence-transformers files, generator, a checkpoint past this run's last
    step) go once this run has finished, so the folder holds one run; files the commands never write stay."""
    out = tmp_path / "run"
    finish_run(_Trainer(out), _finetune_reports)
    (out / "generator").mkdir()  # an ELECTRA run's generator
    (out / "generator" / "model.safetensors").write_text("generator")
    (out / "checkpoint-500").mkdir()  # the earlier run's last checkpoint, past this run's 20 steps
    (out / "notes.txt").write_text("the user's own")
    (out / "checkpoint-20").mkdir()  # this run's, as its Trainer saves them
    (out / "checkpoint-10").mkdir()
    with caplog.at_level(logging.INFO, logger=run_folder.__name__):
        sentence = finish_run(_Trainer(out), _reports, keep_last_checkpoint=True)
    assert sorted(path.name for path in out.iterdir()) == [
        "README.md",
        "all_results.json",
        "checkpoint-20",
        "loss_curve.png",
        "model.safetensors",
        "notes.txt",
        "trainer_state.json",
    ]
    assert sentence is not None and "checkpoint-20, which `--resume_from_checkpoint last` continues" in sentence
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Removed")] == [
        f"Removed the earlier run's predictions.csv, test_predictions.csv, confusion_matrix.png, "
        f"test_confusion_matrix.png, modules.json, 1_Pooling, generator from {out}: this run does not write them."
    ]


def test_the_outputs_removed_over_another_run_are_those_the_commands_write() -> None:
    from hf_bertscratch.embedding import POOLING_FOLDER
    from hf_bertscratch.tasks.shapes import SHAPE_CLASSES

    pictures = {shape.picture for shape in SHAPE_CLASSES.values() if shape.picture is not None}
    assert pictures and all(p in run_folder.RUN_OUTPUTS and f"test_{p}" in run_folder.RUN_OUTPUTS for p in pictures)
    assert POOLING_FOLDER in run_folder.RUN_OUTPUTS
    assert set(convert.SENTENCE_TRANSFORMERS_FILES) <= set(run_folder.RUN_OUTPUTS)


def test_handlers_installed_outside_python_are_left_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal whose handler was installed outside Python reads as None (`signal.signal` returns it so), which
    Python cannot set back: stopping and forwarding leave it in place, restoring the handlers Python can set."""
    import signal

    from hf_bertscratch.pretraining import forwarding_signals
    from hf_bertscratch.run_folder import stopping_with_one_line

    installed: dict[int, object] = {}

    def fake_signal(signum: int, handler: object) -> object:
        if handler is None:
            raise TypeError("signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable object")
        previous = installed.get(signum)  # None: a handler Python did not install
        installed[signum] = handler
        return previous

    monkeypatch.setattr(signal, "signal", fake_signal)
    monkeypatch.setattr(signal, "getsignal", installed.get)
    trainer = SimpleNamespace(_save_checkpoint=lambda: None)
    with stopping_with_one_line(trainer, "pretrain"):  # type: ignore[arg-type]
        pass
    installed.clear()
    installed[signal.SIGTERM] = signal.SIG_DFL
    with forwarding_signals(SimpleNamespace(send_signal=lambda _signum: None)) as received:  # type: ignore[arg-type]
        assert received == []
    assert installed[signal.SIGTERM] is signal.SIG_DFL  # the one Python can set is set back


def test_a_folder_written_whole_keeps_the_old_one_until_the_new_one_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while the new folder is moved into place (a full disk, a kill) leaves the old folder where it was,
    whole: it is set aside, not removed, until the new one stands in its place."""
    target = tmp_path / "exported"
    target.mkdir()
    (target / "model.onnx").write_text("old")
    real_replace = os.replace

    def failing_replace(source: object, destination: object) -> None:
        if Path(str(destination)) == target and Path(str(source)).name.endswith(".tmp"):  # the new folder's move
            raise OSError(28, "No space left on device")
        real_replace(source, destination)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space"), staged_folder(target) as staging:
        (staging / "model.onnx").write_text("new")
    assert (target / "model.onnx").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported"]

    monkeypatch.setattr(os, "replace", real_replace)
    with staged_folder(target) as staging:
        (staging / "model.onnx").write_text("new")
    assert (target / "model.onnx").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported"]


def test_a_resumed_checkpoint_of_other_training_data_is_warned_of_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The record a checkpoint saved is compared with this run's: other data is one warning, the same data or no
    checkpoint (a run not resumed, or one whose checkpoint records none) says nothing, and an earlier version's
    record (no "format") is named as not compared."""
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    record = run_folder.TrainingDataRecord("0123", "train.txt")

    def said(written: dict | None, resumed: Path | None = checkpoint) -> list[tuple[int, str]]:
        if written is not None:
            (checkpoint / run_folder.TRAINING_DATA_FILE).write_text(json.dumps(written), encoding="utf-8")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
            record.check_resumed(None if resumed is None else str(resumed))
        return [(entry.levelno, entry.getMessage()) for entry in caplog.records]

    assert said(None) == []  # a checkpoint that records no training data
    assert said({"format": run_folder.TRAINING_DATA_FORMAT, "fingerprint": "0123", "data": "train.txt"}) == []
    assert said({"format": run_folder.TRAINING_DATA_FORMAT, "fingerprint": "4567", "data": "train.txt"}) == [
        (
            logging.WARNING,
            f"The training data (train.txt) changed since {checkpoint} was saved: the resumed run skips the batches "
            "that checkpoint trained on as if they were the same, which they are not.",
        )
    ]
    assert said(None, resumed=None) == []
    assert said({"fingerprint": "4567", "data": "train.txt"}) == [
        (
            logging.INFO,
            f"{checkpoint} recorded its training data by path and modification time, as earlier versions did: it is "
            "not compared with this run's.",
        )
    ]


def test_a_training_data_record_that_cannot_be_read_is_named_and_not_compared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    (checkpoint / run_folder.TRAINING_DATA_FILE).write_text("{cut short", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="hf_bertscratch"):
        run_folder.TrainingDataRecord("0123", "train.txt").check_resumed(str(checkpoint))
    assert [record.getMessage() for record in caplog.records] == [
        f"Cannot read {checkpoint / 'training_data.json'} (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)): the training data is not compared with it."
    ]


def test_a_resumed_head_of_other_labels_or_another_problem_type_is_refused_in_one_line(
    tmp_path: Path, tiny_config: object
) -> None:
    """A checkpoint of the run's own class whose head was trained on other labels (other names, another order, another
    number: whose weights would fail on a size mismatch), or for another problem type, is refused naming both label
    sets, before its weights load; one that records no id2label holds transformers' default two labels."""
    import hf_bertscratch

    config = tiny_config.to_dict() | {"id2label": {0: "cats", 1: "dogs"}, "label2id": {"cats": 0, "dogs": 1}}
    checkpoint = write_checkpoint(tmp_path / "checkpoint-3", step=3)

    def resumed(labels: list[str], problem_type: str, head: str = "Sequence", recorded: dict | None = None) -> None:
        model_class = getattr(hf_bertscratch, f"BertScratchFor{head}Classification")
        id2label = dict(enumerate(labels))
        model = model_class(type(tiny_config)(**config | {"id2label": id2label, "problem_type": problem_type}))
        written = {"architectures": [model_class.__name__], "problem_type": "single_label_classification"}
        written |= {"id2label": {"0": "cats", "1": "dogs"}} if recorded is None else recorded
        (checkpoint / "config.json").write_text(json.dumps(written), encoding="utf-8")
        run_folder.check_resumed_model(str(checkpoint), model)

    resumed(["cats", "dogs"], "single_label_classification")
    resumed(["cats", "dogs"], None, "Token")  # a head whose problem type is unset reads its outputs either way
    for labels, problem_type, head in (
        (["cats", "dogs"], "multi_label_classification", "Sequence"),
        (["dogs", "cats"], "single_label_classification", "Sequence"),
        (["cats", "dogs", "birds"], "single_label_classification", "Sequence"),
        (["cats", "dogs", "birds"], None, "Token"),
    ):
        with pytest.raises(ValueError) as refused:
            resumed(labels, problem_type, head)
        of_type = f" ({problem_type})" if problem_type else ""
        assert str(refused.value) == (
            f"--resume_from_checkpoint {checkpoint} was trained on the labels ['cats', 'dogs'] "
            f"(single_label_classification), this run on {labels}{of_type}: its head's ids would stand for other "
            "classes, or its outputs be read otherwise. Resume with the task, data and labels it was trained on, or "
            "start over in another --output_dir (or with --overwrite_output_dir)."
        )
    with pytest.raises(ValueError, match=r"trained on the labels \['LABEL_0', 'LABEL_1'\] \(single_label_clas"):
        resumed(["cats", "dogs", "birds"], "single_label_classification", recorded={})
    with pytest.raises(ValueError, match=r"trained on the labels \['LABEL_0', 'LABEL_1', 'LABEL_2'\] \(single_lab"):
        resumed(["cats", "dogs"], "single_label_classification", recorded={"num_labels": 3})


def test_a_checkpoint_of_another_head_is_refused_naming_both_classes(tmp_path: Path, tiny_config: object) -> None:
    """A token classifier's checkpoint resumed by a sequence classification fine-tune: both classes named, before the
    Trainer loads its weights; a checkpoint of the run's own class, or one that records no architectures, passes."""
    import hf_bertscratch

    model = hf_bertscratch.BertScratchForSequenceClassification(tiny_config)
    checkpoint = write_checkpoint(tmp_path / "checkpoint-2", step=2)
    (checkpoint / "config.json").write_text(json.dumps({"architectures": ["BertScratchForTokenClassification"]}))
    with pytest.raises(ValueError) as refused:
        run_folder.check_resumed_model(str(checkpoint), model)
    assert str(refused.value) == (
        f"--resume_from_checkpoint {checkpoint} holds a BertScratchForTokenClassification and this run trains a "
        f"BertScratchForSequenceClassification: resume a checkpoint of a run like this one, or start from that model "
        f"with --model_name_or_path {checkpoint} and another --output_dir."
    )
    (checkpoint / "config.json").write_text(json.dumps({"architectures": ["BertScratchForSequenceClassification"]}))
    run_folder.check_resumed_model(str(checkpoint), model)
    (checkpoint / "config.json").write_text("{}")
    run_folder.check_resumed_model(str(checkpoint), model)
