"""One GPU, one run of the whole product: pretrain a BERT from scratch on the text the project's data ships with, then
fine-tune it and the same model from random weights on the task table, and write one record under results/gpu/.

The stages, in one process that runs the package's own commands (`scripts/pretrain.py`, `scripts/finetune.py`,
`scripts/gpu_check.py`) as subprocesses under one wall-clock deadline (`--deadline_minutes`):

1. the training step at the recipe's shape (`scripts/gpu_check.py`, `--step_check_s`): tokens/s and MFU of ours and
   transformers' BERT, with no padding (packed blocks, as pretraining runs) and with 30%;
2. pretraining (`PRETRAIN_RECIPE`, the README's one-GPU command): WikiText-2 and the unlabelled train text of IMDB,
   SST-2, the GLUE tasks and CoNLL-2003 (about 10 M words; IMDB's test reviews are never trained on), a medium-sized
   model (8 layers, H 512), `--pretrain_minutes` of training;
3. fine-tuning, `--concurrent` runs at a time on the same GPU, in the order of `--tasks` (IMDB and SST-2 first), each
   task at every seed from the pretrained weights and from random weights (`--init_from_scratch`: the same
   architecture and tokenizer); a run still going at the deadline is stopped and recorded as cut, a run not started
   by then as not run.

The record (GPU, versions, commit, every command, the pretraining run's end-to-end tokens/s beside the step's, MFU,
every run's scores and the no-learning baselines each run computes on the same split) is written again after each
stage, atomically, so a run stopped from outside keeps what it finished; each subprocess's log is kept in one file
beside it. Model weights stay in `--work_dir`.

    python scripts/gpu_recipe.py --data_dir DATA                      # one CUDA GPU: about 9 minutes
    python scripts/gpu_recipe.py --smoke --data_dir DATA              # every stage on the CPU at toy sizes (a test)

DATA is a folder laid out as ../shared/data (`hf_bertscratch.data`); WikiText-2 comes from it when it holds a copy,
else from the package's own.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python scripts/gpu_recipe.py` from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

from transformers import HfArgumentParser  # noqa: E402

from hf_bertscratch.arguments import parse_args_or_json  # noqa: E402
from hf_bertscratch.batching_bertscratch import TORCH_VARLEN_ENV  # noqa: E402
from hf_bertscratch.records import RunStart, portable_paths, record_file, run_record, write_record  # noqa: E402
from hf_bertscratch.run_folder import write_text_atomically  # noqa: E402

PROGRAM = "python scripts/gpu_recipe.py"
INITS = ("pretrained", "scratch")
# The tasks' unlabelled train text pretraining adds to WikiText-2 (`pretrain --task_text`): IMDB's train reviews,
# SST-2's and the GLUE tasks' train sentences, CoNLL-2003's train sentences; never a test split.
TASK_TEXT = ("imdb", "sst2", "cola", "mrpc", "stsb", "rte", "wnli", "conll2003")
# The one-GPU pretraining command's flags but --data_dir, --output_dir and the budget (README, "Pretrain on one GPU"):
# a medium model (8 layers, H 512), 128-token blocks of 256 a step, 40% masking with the package's short-block
# start, dropout 0, warmup-stable-decay laid over the budget at a peak of 1e-3 (a CPU step screen at 8 layers of H 128,
# results/sweeps/8-layer-lr-1500-steps.json, found 1e-3 and 2e-3 stable and far ahead of 5e-4, 2e-3 slightly ahead;
# this model is 4x as wide, which lowers Adam's best rate), the package's Muon for the encoder layers' matrices beside
# fused AdamW (the same screen with Muon at 1e-3, results/sweeps/8-layer-muon-1500-steps.json: 29.3% against AdamW's
# 27.8% at 1e-3 and 28.7% at 2e-3), weight decay 0.01 as those screens ran (the package's default since is 0.1, which
# the same screen again put at 28.1% against 28.4% at 0.01: results/sweeps/8-layer-muon-weight-decay-1500-steps.json),
# bf16 (the GPU default).
PRETRAIN_RECIPE: tuple[str, ...] = (
    *("--model_size", "medium", "--tokenizer_vocab_size", "16384"),
    *("--dataset_name", "wikitext", "--dataset_config_name", "wikitext-2-raw-v1", "--task_text", *TASK_TEXT),
    *("--max_seq_length", "128", "--per_device_train_batch_size", "256", "--learning_rate", "1e-3"),
    *("--weight_decay", "0.01"),
    *("--warmup_steps", "0.06", "--optim", "adamw_torch_fused", "--max_eval_samples", "4000"),
    *("--preprocessing_num_workers", "8", "--logging_steps", "100"),
)
# Fine-tuning, per task: examples a step and epochs (more examples a step than the CPU defaults: on a GPU a small
# model's step costs about the same at 32 or 128 short rows), and the peak rate of both initialisations (one rate for
# both, no search on dev: the budget has no room for one). Everything else is the task's own default.
FINETUNE_BATCH: dict[str, tuple[int, float]] = {
    "imdb": (32, 1),
    "sst2": (128, 3),
    "cola": (32, 5),
    "mrpc": (32, 5),
    "stsb": (32, 5),
    "rte": (32, 5),
    "wnli": (32, 5),
    "conll2003": (32, 3),
}
FINETUNE_LEARNING_RATE = 1e-4
# The heads: the task table's for the models pretrained here (`tasks.finetune_defaults` without a width: the mean and
# maximum for sentiment, each text's mean with a probed head for pairs), not BERT's [CLS] recipe that a model wider
# than 256 gets by default: pretrained by masked-LM alone, the recipe's model never trains its [CLS] before
# fine-tuning, and the table's heads are what the CPU's task table measured.
# The tasks whose seeds start before any other task's.
FIRST_TASKS = ("imdb", "sst2")
# The smoke run: every stage at toy sizes on the CPU, in about a minute. Pretraining's flags replace the recipe's.
SMOKE_PRETRAIN: dict[str, str] = {
    "--model_size": "tiny",
    "--tokenizer_vocab_size": "400",
    "--per_device_train_batch_size": "8",
    "--max_eval_samples": "40",
    "--preprocessing_num_workers": "2",  # several tokenising and batch-loading workers, as the GPU run has
    "--dataloader_num_workers": "2",
    "--logging_steps": "2",
    "--max_steps": "6",
    "--num_processes": "1",
}
SMOKE_FINETUNE: tuple[str, ...] = ("--max_train_samples", "24", "--max_eval_samples", "16", "--num_train_epochs", "1")


def with_flags(flags: tuple[str, ...], changes: dict[str, str]) -> list[str]:
    """`flags` with the value after each flag of `changes` replaced, and the flags it lacks appended."""
    out = list(flags)
    for flag, value in changes.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


@dataclass
class GpuRecipeArguments:
    """What one run of the GPU recipe does and where it writes."""

    data_dir: str = field(
        default=os.environ.get("BERTSCRATCH_DATA_DIR", str(ROOT.parent / "shared" / "data")),
        metadata={
            "help": "Folder of the tasks' local copies, laid out as ../shared/data (default $BERTSCRATCH_DATA_DIR)."
        },
    )
    output_dir: str = field(
        default=str(ROOT / "results" / "gpu"),
        metadata={"help": "Folder of the record (gpu-recipe-DEVICE-DATE.json) and its log (...-logs.txt)."},
    )
    work_dir: str = field(
        default=str(ROOT / "runs" / "gpu-recipe"),
        metadata={"help": "Folder of the runs themselves (model weights, checkpoints, each run's log)."},
    )
    tasks: list[str] = field(
        default_factory=lambda: ["imdb", "sst2", "cola", "mrpc", "stsb", "rte", "conll2003"],
        metadata={"help": f"Tasks to fine-tune, in the order they start; from {sorted(FINETUNE_BATCH)}."},
    )
    seeds: list[int] = field(default_factory=lambda: [42, 43, 44], metadata={"help": "Fine-tuning seeds of each task."})
    pretrain_minutes: float = field(default=4.5, metadata={"help": "Training minutes of the pretraining run."})
    deadline_minutes: float = field(
        default=9.0,
        metadata={
            "help": "Wall-clock minutes of the whole run: runs still going are stopped in time for the record to be "
            "written by then, and none starts after."
        },
    )
    step_check_s: float = field(
        default=25.0, metadata={"help": "Seconds of the step's timing at the recipe's shape (0: skip it)."}
    )
    concurrent: int = field(default=6, metadata={"help": "Fine-tuning runs at a time on the device."})
    smoke: bool = field(
        default=False,
        metadata={
            "help": "Every stage on the CPU at toy sizes (a tiny model, a few steps, 24 examples a task, seed 42 "
            "alone, 2 runs at a time): checks the script end to end in about a minute."
        },
    )

    def __post_init__(self) -> None:
        unknown = [task for task in self.tasks if task not in FINETUNE_BATCH]
        if unknown:
            raise ValueError(f"Unknown --tasks {unknown}; expected some of {sorted(FINETUNE_BATCH)}.")
        for name in ("pretrain_minutes", "deadline_minutes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}.")
        if self.concurrent < 1:
            raise ValueError(f"--concurrent must be at least 1, got {self.concurrent}.")
        if not Path(self.data_dir).is_dir():
            raise ValueError(f"--data_dir {self.data_dir!r} is not a folder (expected one laid out as ../shared/data).")
        if self.smoke:
            self.seeds, self.concurrent = self.seeds[:1], min(self.concurrent, 2)


# ------------------------------------------------------------------------------------------------ the stages


@dataclass
class Run:
    """One subprocess of the recipe: its name, command line and folder, and what became of it."""

    name: str
    argv: list[str]
    folder: Path
    status: str = "not run"  # not run, running, finished, failed (exit code), cut (stopped at the deadline)
    seconds: float | None = None
    process: subprocess.Popen | None = None
    started: float = 0.0

    threads: int | None = None  # torch threads of the process (OMP_NUM_THREADS), None: its own choice
    env: dict[str, str] = field(default_factory=dict)  # further environment of the process

    def start(self, logs: Path) -> None:
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = str(self.threads)
        env.update(self.env)
        log = (logs / f"{self.name}.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.status, self.started = "running", time.monotonic()

    def poll(self) -> bool:
        """Whether it has ended (and its status then)."""
        assert self.process is not None, "started first"
        code = self.process.poll()
        if code is None:
            return False
        self.seconds = round(time.monotonic() - self.started, 1)
        self.status = "finished" if code == 0 else f"failed (exit code {code})"
        return True

    def command(self) -> str:
        """The command line as a record gives it: `python`, paths relative to the repository."""
        program = "python" if self.argv[0] == sys.executable else self.argv[0]
        return shlex.join([program, *portable_paths(self.argv[1:])])


# Seconds a stopped run has to exit after SIGTERM before it is killed; the runs of one stop share them.
STOP_GRACE_S = 10.0


def stop_runs(runs: list[Run], status: str) -> None:
    """Stop every run of `runs` at once: SIGTERM to all, then SIGKILL to those still going after `STOP_GRACE_S`
    (shared). A run that ended meanwhile keeps what it ended as; the others get `status`."""
    live = [run for run in runs if not run.poll()]
    for run in live:
        assert run.process is not None, "started first"
        run.process.terminate()
    until = time.monotonic() + STOP_GRACE_S
    for run in live:
        assert run.process is not None, "started first"
        try:
            run.process.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            run.process.kill()
            run.process.wait()
        run.seconds = round(time.monotonic() - run.started, 1)
        run.status = status


def run_all(runs: list[Run], concurrent: int, deadline: float, logs: Path, on_change: Callable[[], None]) -> None:
    """Run `runs` in order, `concurrent` at a time; none starts after `deadline` (monotonic seconds) and any still
    going then is stopped, as is every one going when this function ends by an error. `on_change()` is called
    whenever a run ends; an error in it is printed and the runs go on (it writes the record, which the next call
    writes again)."""
    waiting, going = list(runs), []

    def changed() -> None:
        try:
            on_change()
        except Exception as error:  # noqa: BLE001 (the runs, and the record of those that end, outlive a bad write)
            print(f"gpu_recipe: recording failed: {error!r}", file=sys.stderr)

    try:
        while waiting or going:
            while waiting and len(going) < concurrent and time.monotonic() < deadline:
                run = waiting.pop(0)
                run.start(logs)
                going.append(run)
            ended = [run for run in going if run.poll()]
            for run in ended:
                going.remove(run)
            if ended:
                changed()
            if time.monotonic() >= deadline:
                stopped, going = going, []
                stop_runs(stopped, "cut at the deadline")
                if stopped:
                    changed()
                return
            if not waiting and not going:
                return
            time.sleep(0.5)
    finally:
        stop_runs(going, "stopped by an error of the recipe")


def step_check_run(args: GpuRecipeArguments, folder: Path) -> Run:
    """`scripts/gpu_check.py` at the recipe's shape: training at T=128, no padding and 30%, dropout 0 (as pretraining
    and as the padded batches of fine-tuning train), ours against transformers' BERT."""
    if args.smoke:
        flags = ["--device", "cpu", "--quick", "true", "--budget_s", "5"]
    else:
        flags = ["--presets", "medium", "--seq_lens", "128", "--paddings", "0", "0.3", "--batch_tokens", "32768"]
        flags += ["--padded_contenders", "true", "--budget_s", f"{args.step_check_s:g}", "--repeats", "10"]
    flags += ["--dropout", "0", "--output_dir", str(folder)]
    return Run("step-check", [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), *flags], folder)


def pretrain_command(args: GpuRecipeArguments, output_dir: Path) -> list[str]:
    """The pretraining run's `scripts/pretrain.py` command line (the README's one-GPU command in the full run)."""
    if args.smoke:
        recipe = with_flags(PRETRAIN_RECIPE, SMOKE_PRETRAIN)
    else:
        recipe = with_flags(PRETRAIN_RECIPE, {"--max_train_minutes": f"{args.pretrain_minutes:g}"})
    return [sys.executable, str(ROOT / "scripts" / "pretrain.py"), *recipe, "--data_dir", args.data_dir,
            "--output_dir", str(output_dir), "--save_total_limit", "1"]  # fmt: skip


def finetune_order(args: GpuRecipeArguments) -> list[tuple[str, int, str]]:
    """(task, seed, init) of every fine-tune in the order they start: IMDB's and SST-2's (`FIRST_TASKS`) before the
    others, and within each group seed by seed, so that a deadline leaves whole seeds of every task of the group
    (seed 42 of IMDB and SST-2 before either's 43); each seed pretrained, then from random weights."""
    first = [task for task in args.tasks if task in FIRST_TASKS]
    rest = [task for task in args.tasks if task not in FIRST_TASKS]
    return [(task, seed, init) for group in (first, rest) for seed in args.seeds for task in group for init in INITS]


def head_flags(task: str) -> list[str]:
    """The `--classifier_pooling` and `--head_init` of the task table's head for `task` (a classification or
    regression task; none for the others)."""
    from hf_bertscratch.tasks import TASKS, finetune_defaults

    spec = TASKS[task]
    if spec.shape not in ("classification", "regression"):
        return []
    defaults = finetune_defaults(spec, task)
    return ["--classifier_pooling", defaults.classifier_pooling, "--head_init", defaults.head_init]


def finetune_runs(
    args: GpuRecipeArguments, pretrained: Path, work: Path, env: dict[str, str] | None = None
) -> list[Run]:
    """Every fine-tune, in the order they start (`finetune_order`), each with `env` in its environment."""
    runs = []
    for task, seed, init in finetune_order(args):
        batch, epochs = FINETUNE_BATCH[task]
        name = f"{task}-{init}-seed{seed}"
        flags = ["--model_name_or_path", str(pretrained), "--task", task, "--data_dir", args.data_dir]
        flags += ["--seed", str(seed), "--learning_rate", f"{FINETUNE_LEARNING_RATE:g}"]
        flags += ["--per_device_train_batch_size", str(batch), "--num_train_epochs", f"{epochs:g}"]
        flags += ["--output_dir", str(work / name), "--save_total_limit", "1", "--report_to", "none"]
        if init == "scratch":
            flags += ["--init_from_scratch", "true"]
        flags += head_flags(task)
        flags += ["--dataloader_num_workers", "2"]
        if args.smoke:
            flags += [*SMOKE_FINETUNE, "--per_device_train_batch_size", "8"]
        command = [sys.executable, str(ROOT / "scripts" / "finetune.py"), *flags]
        # the runs side by side share the host's cores (tokenising, the baselines' bag of words)
        threads = max(1, (os.cpu_count() or 1) // args.concurrent)
        runs.append(Run(name, command, work / name, threads=threads, env=dict(env or {})))
    return runs


# ----------------------------------------------------------------------------------------------- the record


def device_info(smoke: bool) -> dict:
    import torch

    if smoke or not torch.cuda.is_available():
        from hf_bertscratch.hardware import cpu_model

        return {"type": "cpu", "name": cpu_model()}
    properties = torch.cuda.get_device_properties(0)
    return {
        "type": "cuda",
        "name": properties.name,
        "memory_gib": round(properties.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
        "count": torch.cuda.device_count(),
    }


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def pretraining_summary(run: Run, step_check: dict | None) -> dict:
    """The pretraining run's results beside the unigram answer's (the no-learning baseline of masked-token accuracy
    and perplexity), and its end-to-end training tokens/s beside the step's at the same shape."""
    summary: dict = {"command": run.command(), "status": run.status, "wall_seconds": run.seconds}
    results = read_json(run.folder / "all_results.json")
    if results is None:
        return summary
    keep = ("train_tokens", "train_wall_time_seconds", "train_runtime", "train_effective_batch_size", "max_seq_length",
            "eval_accuracy", "eval_perplexity", "eval_loss", "eval_unigram_accuracy", "eval_unigram_perplexity")  # fmt: skip
    summary["results"] = {key: results[key] for key in keep if key in results}
    summary["results"].update({key: value for key, value in results.items() if "tokens_per_second" in key})
    end_to_end = results.get("train_tokens_per_second")
    step = None
    for case in (step_check or {}).get("cases", []):
        if case["workload"] == "train" and case["padding"] == 0.0:
            step = case["tokens_per_s"].get("ours")
    summary["step_tokens_per_s"] = step
    summary["end_to_end_over_step"] = round(end_to_end / step, 3) if end_to_end and step else None
    return summary


def finetune_summary(run: Run) -> dict:
    """One fine-tune's command, status and scores: the task's main metric on its eval split and, where the task has
    one, on its test split, with the no-learning baselines the run scored on the same splits."""
    summary: dict = {"command": run.command(), "status": run.status, "wall_seconds": run.seconds}
    results = read_json(run.folder / "all_results.json")
    if results is None:
        return summary
    metric = results.get("main_metric")
    summary.update(
        task=results.get("task"),
        init="scratch" if results.get("init_from_scratch") else "pretrained",
        seed=results.get("seed"),
        metric=metric,
        eval=results.get(f"eval_{metric}"),
        test=results.get(f"test_{metric}"),
        baselines={key: value for key, value in results.items() if "baseline" in key and not isinstance(value, dict)},
        train_seconds=results.get("train_runtime"),
    )
    return summary


def task_table(finetunes: list[dict]) -> dict:
    """Per task and initialisation: the scores of the finished seeds (the test split's where the task has one, else
    the eval split's), their mean, and the no-learning baselines of the first run. A run without a task or a score
    (not run, cut, failed) counts in none."""
    table: dict = {}
    for run in finetunes:
        if run.get("task") is None or (run["test"] is None and run["eval"] is None):
            continue
        split = "test" if run["test"] is not None else "eval"
        entry = table.setdefault(run["task"], {"metric": run["metric"], "split": split, "baselines": {}})
        scores = entry.setdefault(run["init"], {"seeds": [], "scores": []})
        scores["seeds"].append(run["seed"])
        scores["scores"].append(run[split])
        scores["mean"] = round(sum(scores["scores"]) / len(scores["scores"]), 4)
        prefix = "test_baseline_" if split == "test" else "baseline_"
        entry["baselines"] = entry["baselines"] or {
            key.removeprefix(prefix): value for key, value in run["baselines"].items() if key.startswith(prefix)
        }
    for entry in table.values():
        if "pretrained" in entry and "scratch" in entry:
            entry["pretrained_minus_scratch"] = round(entry["pretrained"]["mean"] - entry["scratch"]["mean"], 4)
    return table


def record_path(output_dir: str | Path, device: dict, date: str) -> Path:
    """results/gpu/gpu-recipe-DEVICE-DATE.json, the device name and the date reduced to letters, digits and dashes."""
    return record_file(output_dir, "gpu-recipe", device["name"], date)


def write_logs(path: Path, logs: Path, tail_lines: int = 200) -> None:
    """Every run's log in one file (its last `tail_lines` lines each): what comes back from a GPU machine."""
    parts = []
    for log in sorted(logs.glob("*.log")):
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        parts.append(f"===== {log.name} ({len(lines)} lines, the last {min(len(lines), tail_lines)})")
        parts.extend(lines[-tail_lines:])
    write_text_atomically(path, "\n".join(parts) + "\n")


# ------------------------------------------------------------------------------------------------------ main

# What a second pretraining run must leave to the fine-tunes: IMDB's and SST-2's first seed, side by side.
FINETUNE_RESERVE_S = 120.0


def can_pretrain_again(args: GpuRecipeArguments, deadline: float) -> bool:
    """Whether the time left holds another pretraining run and the fine-tunes' reserve (`FINETUNE_RESERVE_S`)."""
    return deadline - time.monotonic() >= 60 * args.pretrain_minutes + FINETUNE_RESERVE_S


def main(argv: list[str] | None = None) -> dict:
    """Run the recipe, writing the record after each stage; returns the record (its path under "path")."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(GpuRecipeArguments, description=__doc__.split("\n\n")[0])
    (args,) = parse_args_or_json(parser, argv)
    start, began = RunStart.now(), time.monotonic()
    # the runs are stopped by then, and the record written (stopping takes STOP_GRACE_S at the most)
    deadline = began + 60 * args.deadline_minutes - STOP_GRACE_S - 5
    work, logs = Path(args.work_dir), Path(args.work_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    device = device_info(args.smoke)
    path = record_path(args.output_dir, device, start.date)
    record = {**run_record(PROGRAM, argv, args, start, onnxruntime=False), "device": device}

    def save(**stages: object) -> None:
        record.update(stages, elapsed_s=round(time.monotonic() - began, 1))
        write_record(path, record)
        write_logs(path.with_name(path.stem + "-logs.txt"), logs)

    # 1. the training step at the recipe's shape
    step_check, varlen = None, "on"
    if args.step_check_s > 0:
        check = step_check_run(args, work / "step-check")
        run_all([check], 1, deadline, logs, lambda: None)
        records = sorted((work / "step-check").glob("*.json"))
        step_check = read_json(records[-1]) if records else None
        save(step_check={"command": check.command(), "status": check.status, "record": step_check})
        if check.status.startswith("failed"):
            varlen = "off: the step check failed"

    # 2. pretraining, with PyTorch's varlen attention where it applies, unless the step check (which runs it first)
    # failed; a pretraining run that fails with it is run once more without it while the budget still holds one
    switch = {TORCH_VARLEN_ENV: "on" if varlen == "on" else "off"}
    pretrain = Run("pretrain", pretrain_command(args, work / "pretrain"), work / "pretrain", env=switch)
    run_all([pretrain], 1, deadline, logs, lambda: None)
    attempts = [pretrain]
    if pretrain.status.startswith("failed") and varlen == "on" and can_pretrain_again(args, deadline):
        varlen = "off: pretraining with it failed"
        folder = work / "pretrain-without-varlen"
        pretrain = Run(folder.name, pretrain_command(args, folder), folder, env={TORCH_VARLEN_ENV: "off"})
        run_all([pretrain], 1, deadline, logs, lambda: None)
        attempts.append(pretrain)
    save(
        torch_varlen=varlen,
        pretraining=pretraining_summary(pretrain, step_check),
        failed_pretraining=[{"command": run.command(), "status": run.status} for run in attempts[:-1]],
    )
    if pretrain.status != "finished":
        print(f"pretraining {pretrain.status}: no fine-tuning (log: {logs / pretrain.name}.log)", file=sys.stderr)
        return {**record, "path": str(path)}

    # 3. fine-tuning from the pretrained weights and from random weights, with the attention pretraining ran
    runs = finetune_runs(args, pretrain.folder, work / "finetune", env=pretrain.env)

    def save_finetunes() -> None:
        finetunes = [finetune_summary(run) for run in runs]
        save(finetunes=finetunes, tasks=task_table(finetunes))

    run_all(runs, args.concurrent, deadline, logs, save_finetunes)
    save_finetunes()
    print(json.dumps(record["tasks"], indent=2))
    return {**record, "path": str(path)}


if __name__ == "__main__":
    main()
