"""scripts/gpu_recipe.py: the one-GPU run (pretrain, then fine-tune from the pretrained weights and from random
weights, one record). Its `--smoke` mode runs every stage on the CPU at toy sizes, on a data folder laid out as
../shared/data with a few examples per task, so that the GPU run cannot fail on a typo."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests._documented_commands import page_commands, write_data_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_recipe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_recipe", ROOT / "scripts" / "gpu_recipe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GPU machine's one command (scripts/gpu_recipe.sh) in smoke mode on a bundle as scripts/gpu_bundle.sh packs
    it (the tasks' data as data.tar.gz; no wheels: this machine has the packages): what comes back in OUT."""
    root = tmp_path_factory.mktemp("gpu-recipe")
    write_data_dir(root / "data")
    (root / "bundle").mkdir()
    subprocess.run(["tar", "-czf", root / "bundle" / "data.tar.gz", "-C", root, "data"], check=True)
    env = {**os.environ, "BUNDLE": str(root / "bundle"), "PYTHON": sys.executable, "TEST_S": "100"}
    argv = ["--smoke", "true", "--work_dir", str(root / "work"), "--tasks", "imdb", "sst2"]
    done = subprocess.run(["bash", ROOT / "scripts" / "gpu_recipe.sh", root / "out", *argv], env=env, text=True,
                          capture_output=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return root / "out"


@pytest.mark.slow
def test_the_smoke_run_writes_every_stage_to_its_record(smoke_out: Path) -> None:
    (path,) = smoke_out.glob("gpu-recipe-*[0-9].json")
    written = json.loads(path.read_text())
    assert written["command"].startswith("python scripts/gpu_recipe.py --data_dir ")
    assert written["command"].endswith(
        " --smoke true --work_dir " + written["arguments"]["work_dir"] + " --tasks imdb sst2"
    )
    # the deadline is what the call's 590 seconds leave after the CUDA tests (collected, skipped on this CPU)
    assert 0 < written["arguments"]["deadline_minutes"] <= 9
    assert " skipped" in (smoke_out / "pytest-cuda.log").read_text().splitlines()[-1]
    assert written["device"]["type"] == "cpu" and written["versions"]["torch"]
    assert path.with_name(path.stem + "-logs.txt").is_file()

    step = written["step_check"]
    assert step["status"] == "finished" and step["record"]["cases"]
    assert step["command"].startswith("python scripts/gpu_check.py --device cpu --quick true")

    pretraining = written["pretraining"]
    assert pretraining["status"] == "finished"
    assert written["torch_varlen"] == "on" and written["failed_pretraining"] == []
    # the recipe's own flags, with the smoke run's sizes in place of the recipe's
    assert " --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 --task_text " in pretraining["command"]
    assert " --model_size tiny " in pretraining["command"] and "--max_steps 6" in pretraining["command"]
    results = pretraining["results"]
    assert results["train_tokens"] > 0 and 0 <= results["eval_accuracy"] <= 1
    assert 0 <= results["eval_unigram_accuracy"] <= 1 and results["eval_unigram_perplexity"] > 1  # the baseline
    assert pretraining["step_tokens_per_s"] > 0 and pretraining["end_to_end_over_step"] > 0

    finetunes = written["finetunes"]
    assert [(run["task"], run["init"], run["seed"]) for run in finetunes] == [
        (task, init, 42) for task in ("imdb", "sst2") for init in ("pretrained", "scratch")
    ]
    assert all(run["status"] == "finished" for run in finetunes)
    scratch = [run for run in finetunes if run["init"] == "scratch"]
    assert all("--init_from_scratch true" in run["command"] for run in scratch)
    imdb = written["tasks"]["imdb"]
    assert imdb["split"] == "test" and imdb["metric"] == "accuracy"  # IMDB's test reviews, scored once
    assert set(imdb["baselines"]) >= {"constant", "bag_of_words"}
    assert written["tasks"]["sst2"]["split"] == "eval"  # SST-2's dev set: no test labels
    assert imdb["pretrained_minus_scratch"] == pytest.approx(imdb["pretrained"]["mean"] - imdb["scratch"]["mean"])


def test_a_run_still_going_at_the_deadline_is_stopped_and_one_not_started_is_not_run(
    gpu_recipe: ModuleType, tmp_path: Path
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    runs = [gpu_recipe.Run(f"sleep{i}", sleeper, tmp_path / f"sleep{i}") for i in range(2)]
    changes: list[int] = []
    began = time.monotonic()
    gpu_recipe.run_all(runs, 1, began + 2, tmp_path, lambda: changes.append(1))
    assert time.monotonic() - began < 40
    assert [run.status for run in runs] == ["cut at the deadline", "not run"]
    assert changes and runs[0].seconds >= 2


def test_a_failed_record_write_leaves_the_runs_going_and_an_error_stops_them(
    gpu_recipe: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quick = gpu_recipe.Run("quick", [sys.executable, "-c", "pass"], tmp_path / "quick")
    sleeper = gpu_recipe.Run("sleep", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "sleep")

    def broken_write() -> None:
        raise OSError("disk full")

    began = time.monotonic()
    gpu_recipe.run_all([quick, sleeper], 2, began + 3, tmp_path, broken_write)
    assert quick.status == "finished" and sleeper.status == "cut at the deadline"
    assert "recording failed: OSError('disk full')" in capsys.readouterr().err
    assert time.monotonic() - began < 3 + gpu_recipe.STOP_GRACE_S + 5

    sleeper = gpu_recipe.Run("sleep2", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "sleep2")
    missing = gpu_recipe.Run("missing", [str(tmp_path / "no-such-program")], tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        gpu_recipe.run_all([sleeper, missing], 2, time.monotonic() + 60, tmp_path, lambda: None)
    assert sleeper.status == "stopped by an error of the recipe" and sleeper.process.poll() is not None


# A pretraining run that fails where PyTorch's varlen attention is on and finishes where it is off (a kernel that does
# not run on the GPU at hand); it writes the results pretraining writes
FAILS_WITH_VARLEN = """
import json, os, pathlib, sys
if os.environ.get("BERTSCRATCH_TORCH_VARLEN") != "off":
    sys.exit("varlen_attn failed")
out = pathlib.Path(sys.argv[sys.argv.index("--output_dir") + 1])
out.mkdir(parents=True)
(out / "all_results.json").write_text(json.dumps({"train_tokens": 10, "eval_accuracy": 0.3}))
"""


def _without_varlen_record(
    gpu_recipe: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step_check_fails: bool
) -> tuple[dict, list]:
    monkeypatch.setattr(
        gpu_recipe,
        "pretrain_command",
        lambda args, folder: [sys.executable, "-c", FAILS_WITH_VARLEN, "--output_dir", str(folder)],  # fmt: skip
    )
    failing_check = [sys.executable, "-c", "import sys; sys.exit(1)" if step_check_fails else "pass"]
    monkeypatch.setattr(gpu_recipe, "step_check_run", lambda args, folder: gpu_recipe.Run("step-check", failing_check,
                                                                                          folder))  # fmt: skip
    finetunes: list = []
    monkeypatch.setattr(gpu_recipe, "finetune_runs", lambda args, pretrained, work, env: finetunes.append(
        (pretrained, env)) or [])  # fmt: skip
    argv = ["--data_dir", str(tmp_path), "--work_dir", str(tmp_path / "work"), "--output_dir", str(tmp_path / "out")]
    record = gpu_recipe.main([*argv, "--pretrain_minutes", "0.1", "--deadline_minutes", "3"])
    return json.loads(Path(record["path"]).read_text()), finetunes


def test_pretraining_that_fails_with_varlen_attention_runs_again_without_it(
    gpu_recipe: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, finetunes = _without_varlen_record(gpu_recipe, tmp_path, monkeypatch, step_check_fails=False)
    assert record["torch_varlen"] == "off: pretraining with it failed"
    assert [run["status"] for run in record["failed_pretraining"]] == ["failed (exit code 1)"]
    assert record["pretraining"]["status"] == "finished" and record["pretraining"]["results"]["train_tokens"] == 10
    # the fine-tunes start from the run that finished, with the attention it ran
    assert finetunes == [(tmp_path / "work" / "pretrain-without-varlen", {"BERTSCRATCH_TORCH_VARLEN": "off"})]


def test_a_failed_step_check_turns_varlen_attention_off_from_the_start(
    gpu_recipe: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, finetunes = _without_varlen_record(gpu_recipe, tmp_path, monkeypatch, step_check_fails=True)
    assert record["step_check"]["status"] == "failed (exit code 1)"
    assert record["torch_varlen"] == "off: the step check failed" and record["failed_pretraining"] == []
    assert finetunes == [(tmp_path / "work" / "pretrain", {"BERTSCRATCH_TORCH_VARLEN": "off"})]


def test_the_task_table_averages_the_finished_seeds(gpu_recipe: ModuleType) -> None:
    def run(init: str, seed: int, test: float) -> dict:
        baselines = {"baseline_constant": 0.5, "test_baseline_constant": 0.5, "test_baseline_bag_of_words": 0.88}
        return {"task": "imdb", "init": init, "seed": seed, "metric": "accuracy", "eval": 0.9, "test": test,
                "baselines": baselines}  # fmt: skip

    table = gpu_recipe.task_table(
        [run("pretrained", 42, 0.90), run("pretrained", 43, 0.92), run("scratch", 42, 0.86), {"status": "not run"}]
    )
    imdb = table["imdb"]
    assert imdb["pretrained"] == {"seeds": [42, 43], "scores": [0.90, 0.92], "mean": 0.91}
    assert imdb["scratch"]["mean"] == 0.86 and imdb["pretrained_minus_scratch"] == pytest.approx(0.05)
    assert imdb["baselines"] == {"constant": 0.5, "bag_of_words": 0.88}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tasks", "imdb", "squad"], "Unknown --tasks ['squad']; expected some of"),
        (["--concurrent", "0"], "--concurrent must be at least 1, got 0."),
        (["--pretrain_minutes", "0"], "--pretrain_minutes must be positive, got 0.0."),
    ],
)
def test_bad_arguments_fail_before_anything_runs(
    gpu_recipe: ModuleType, tmp_path: Path, flags: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        gpu_recipe.main(["--data_dir", str(tmp_path), "--work_dir", str(tmp_path / "work"), *flags])
    assert not (tmp_path / "work").exists()


def test_a_missing_data_folder_is_named(gpu_recipe: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--data_dir '.*nowhere' is not a folder"):
        gpu_recipe.main(["--data_dir", str(tmp_path / "nowhere"), "--work_dir", str(tmp_path / "work")])


def test_the_documented_one_gpu_command_is_the_recipe_the_script_runs(gpu_recipe: ModuleType) -> None:
    """docs/pretraining.md's one-GPU command is `PRETRAIN_RECIPE` with the data folder, the script's default budget
    and an output folder: the page cannot drift from what the GPU record ran."""
    (command,) = [c for c in page_commands(ROOT, "docs/pretraining.md") if "--model_size medium" in c.text]
    assert command.argv[:2] == ("bertscratch", "pretrain")
    minutes = gpu_recipe.GpuRecipeArguments.__dataclass_fields__["pretrain_minutes"].default
    expected = gpu_recipe.with_flags(gpu_recipe.PRETRAIN_RECIPE, {"--max_train_minutes": f"{minutes:g}"})
    flags = list(command.argv[2:])
    for flag in ("--data_dir", "--output_dir"):
        flags[flags.index(flag) : flags.index(flag) + 2] = []
    assert flags == expected


def test_fine_tunes_start_seed_by_seed_imdb_and_sst2_first(gpu_recipe: ModuleType, tmp_path: Path) -> None:
    """A deadline then leaves whole seeds of IMDB and SST-2, the tasks the recipe runs first, before any other starts."""
    args = gpu_recipe.GpuRecipeArguments(data_dir=str(tmp_path), tasks=["rte", "imdb", "sst2"], seeds=[42, 43])
    assert gpu_recipe.finetune_order(args) == [
        (task, seed, init)
        for task, seed in [("imdb", 42), ("sst2", 42), ("imdb", 43), ("sst2", 43), ("rte", 42), ("rte", 43)]
        for init in ("pretrained", "scratch")
    ]


def test_fine_tunes_read_the_task_tables_heads_not_berts_cls(gpu_recipe: ModuleType) -> None:
    """A medium model would get BERT's [CLS] recipe by default; the recipe names the table's heads instead."""
    assert gpu_recipe.head_flags("imdb") == ["--classifier_pooling", "mean-max", "--head_init", "random"]
    assert gpu_recipe.head_flags("stsb") == ["--classifier_pooling", "segments", "--head_init", "probe"]
    assert gpu_recipe.head_flags("conll2003") == []
