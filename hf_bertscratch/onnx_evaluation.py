"""What int8 and bf16 cost in accuracy: a fine-tuned model's task metrics under PyTorch, PyTorch under CPU bf16 autocast
(on a CPU with native bf16: AVX512_BF16 or AMX; `--bf16`), its fp32 ONNX export and its dynamic int8 export, on the
task's evaluation split (and its test split, where the task has one: CoNLL-2003).

    python scripts/evaluate_onnx.py --model runs/sst2 --task sst2 --data_dir ../shared/data --output_dir eval/sst2
    bertscratch evaluate-onnx --model runs/conll2003 --task conll2003 --data_dir ../shared/data --split test

The model is exported twice with `hf_bertscratch.onnx.export.export_onnx` into `--output_dir` (`fp32/`, checked against
PyTorch as `bertscratch export` checks it, and `int8/`, `--quantize dynamic`: not held to the export's int8 tolerance,
since its cost is what is measured here), then every backend runs the same batches. Everything between the data and
the score is fine-tuning's own: the task and data flags are `tasks.data.DataArguments`, the splits come from its
`load_task_datasets`, the features from the task shape's `features(split, training=False)`, the batches from its
collator (in dataset order), and the metrics from its `compute_metrics(raw, features)` fed with an `EvalPrediction` of
the backend's outputs and the features' labels. The PyTorch row is therefore the score fine-tuning reports for the same
features (pass the `--max_seq_length` and `--truncation` it was fine-tuned with: they are checked against the run's
all_results.json). `--max_eval_samples` draws that many examples from each split scored, with `--seed`.

Every shape runs: classification and regression (text-classification export), token classification, and question
answering (start/end logits turned into answers by the shape's post-processing). Every backend runs on the CPU.

Besides the metrics, each row gives its top-1 agreement with PyTorch (classes, or tags at the scored first pieces)
and its throughput in real (non-pad) tokens per second of forward passes. The backends run one after another, not
interleaved: the speeds are measured in the same run on the same batches and threads, but a load that changes
during the run (another job on the machine) falls on them unevenly. For speed, `bertscratch benchmark` interleaves.

The table is printed; with `--output_dir` the exports and `evaluation.json` (every metric, the command, the date,
package versions and the hardware) stay there.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, EvalPrediction

import hf_bertscratch  # noqa: F401  (registers the bertscratch model type with the Auto classes)

from .arguments import ArgumentParser, parse_args_or_json
from .data import sample_examples
from .hardware import cpu_has_native_bf16, cpu_model, describe_hardware
from .model_reference import check_model_reference
from .onnx.common import INPUT_NAMES, ONNX_TASKS
from .onnx.export import export_onnx
from .onnx.quantize import int8_saturates
from .onnx.runtime import BertScratchOnnxRuntimeModel
from .records import write_record
from .task_heads import check_task_head
from .tasks import TaskSpec
from .tasks.data import (
    DataArguments,
    fit_length_to_model,
    load_task_datasets,
    load_task_tokenizer,
    test_split_chosen_by,
)
from .tasks.shapes import FeatureSettings, TaskShape, build_shape
from .tokenization import IGNORE_INDEX  # unscored labels; also what outputs and labels are padded with

logger = logging.getLogger(__name__)

RESULTS_FILE = "evaluation.json"
PYTORCH = "pytorch"
PYTORCH_BF16 = "pytorch bf16"  # the same model and weights, its forward under torch.autocast("cpu", torch.bfloat16)
# Backend -> (folder of its export inside --output_dir, `export_onnx`'s quantize); PyTorch runs the model folder.
EXPORTS: dict[str, tuple[str, str | None]] = {"onnx fp32": ("fp32", None), "onnx int8": ("int8", "dynamic")}
SPLITS = ("eval", "test")
PACKAGES = ("hf-bertscratch", "torch", "transformers", "datasets", "numpy", "onnx", "onnxscript", "onnxruntime")
TIMING_NOTE = (
    "tokens/s: real (non-pad) tokens over the forward passes alone, each backend's passes run one after another on "
    "the same batches and threads (not interleaved), after one warm-up batch; indicative only. They are this model's "
    "at this data's lengths: a small model on short texts spends much of its time in per-operator overhead, which "
    "ONNX Runtime's fused graph removes, so it can run several times PyTorch's speed here, unlike BERT-mini's "
    "encoder on 128-token batches, timed interleaved in README's Speed table (`bertscratch benchmark`)."
)


@dataclass(frozen=True)
class ShapeEvaluation:
    """How a task shape is evaluated here: the export that serves it, the metrics its table shows after the task's
    main metric, and whether its outputs have a top-1 to compare with PyTorch's."""

    onnx_task: str
    headline: tuple[str, ...]
    agreement: bool = True


SHAPE_EVALUATIONS: dict[str, ShapeEvaluation] = {
    "classification": ShapeEvaluation("text-classification", ("accuracy", "f1", "matthews_correlation")),
    "regression": ShapeEvaluation("text-classification", ("spearmanr", "pearson"), agreement=False),
    "token-classification": ShapeEvaluation(
        "token-classification", ("overall_f1", "overall_precision", "overall_recall")
    ),
    "question-answering": ShapeEvaluation("question-answering", ("f1", "exact_match"), agreement=False),
}


# ---------------------------------------------------------------------------------------------------- arguments
@dataclass
class OnnxEvaluationArguments:
    """Which fine-tuned model to evaluate, on which splits, and where the exports go (the task and data flags are
    fine-tuning's: `--task`, `--data_dir`, `--max_seq_length`, `--max_eval_samples`, ...)."""

    model: str = field(metadata={"help": "A fine-tuned model folder (a `bertscratch finetune` output_dir) or Hub id."})
    split: str | None = field(
        default=None,
        metadata={
            "help": "eval: the task's evaluation split; test: its test split (CoNLL-2003, or --test_split/--test_file). "
            "None: both where the task has a test split, else eval.",
            "choices": list(SPLITS),
        },
    )
    output_dir: str | None = field(
        default=None,
        metadata={
            "help": f"Folder for the fp32/ and int8/ exports and {RESULTS_FILE}; refused if it holds files, unless "
            "--overwrite. None: a temporary folder, removed at the end (the printed table is all that is kept)."
        },
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace the exports and results in --output_dir."})
    batch_size: int = field(default=32, metadata={"help": "Examples (features) per forward pass, every backend."})
    num_threads: int | None = field(
        default=None, metadata={"help": "Threads of every backend (torch and ONNX Runtime); None: torch's count."}
    )
    seed: int = field(
        default=42, metadata={"help": "Seed of the --max_eval_samples draw (fine-tuning's --seed draws the same)."}
    )
    bf16: str = field(
        default="auto",
        metadata={
            "help": "Also score PyTorch under CPU bf16 autocast: true, false, or auto (where the CPU has native bf16, "
            "AVX512_BF16 or AMX: elsewhere bf16 is emulated, slow, and not what a user would run).",
            "choices": ["auto", "true", "false"],
        },
    )


def build_parser() -> ArgumentParser:
    """The parser of `bertscratch evaluate-onnx`: its own flags and the task's data flags."""
    return ArgumentParser((OnnxEvaluationArguments, DataArguments), description=__doc__.split("\n\n")[0])


def parse_args(argv: list[str] | None = None) -> tuple[OnnxEvaluationArguments, DataArguments]:
    """The two argument dataclasses from argv, or from one .json file of them."""
    return parse_args_or_json(build_parser(), argv)


def check_arguments(args: OnnxEvaluationArguments, data_args: DataArguments) -> TaskSpec:
    """Every check that needs neither data nor export; returns the resolved task."""
    task = data_args.task_spec
    if task.shape not in SHAPE_EVALUATIONS:
        raise ValueError(
            f"evaluate-onnx scores a task of the shapes {list(SHAPE_EVALUATIONS)}; a {task.shape} task is none of them."
        )
    if args.split is not None and args.split not in SPLITS:
        raise ValueError(f"--split {args.split!r} is not one of {list(SPLITS)} (or leave it out for every split).")
    if args.batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {args.batch_size}.")
    if args.bf16 not in ("auto", "true", "false"):
        raise ValueError(f"--bf16 must be auto, true or false, got {args.bf16!r}.")
    if args.num_threads is not None and args.num_threads < 1:
        raise ValueError(f"--num_threads must be at least 1 (or left out), got {args.num_threads}.")
    if args.output_dir is not None:
        output = Path(args.output_dir)
        if output.exists() and not output.is_dir():
            raise NotADirectoryError(
                f"--output_dir {args.output_dir!r} is a file: expected a folder for the exports and {RESULTS_FILE} "
                "(or a new path)."
            )
        if output.exists() and any(output.iterdir()) and not args.overwrite:
            raise FileExistsError(
                f"--output_dir {args.output_dir!r} already exists and is not empty; pass --overwrite to replace its "
                "exports and results."
            )
    return task


def check_model(model: str, task: TaskSpec, shape: TaskShape, data_args: DataArguments) -> None:
    """The model must have the shape's head with the shape's number of outputs and cover the feature length; a
    fine-tuning run whose all_results.json records other feature settings than the flags' gets a warning."""
    check_task_head(model, SHAPE_EVALUATIONS[task.shape].onnx_task)
    config = AutoConfig.from_pretrained(model)
    expected = shape.config_updates()["num_labels"]
    if config.num_labels != expected:
        raise ValueError(
            f"{model} has {config.num_labels} outputs, but the {task.shape} task has {expected} {shape.names}: is it "
            "fine-tuned for this task?"
        )
    names = [config.id2label[i] for i in range(config.num_labels)]
    if shape.names and task.shape != "regression" and names != list(shape.names):
        logger.warning("%s names its labels %s; the task's are %s (scored by id).", model, names, shape.names)
    fit_length_to_model(data_args, config.max_position_embeddings)  # a length the task chose is cut, one given checked
    results = Path(model) / "all_results.json"
    recorded = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else {}
    for name in ("max_seq_length", "truncation"):
        if name in recorded and recorded[name] != getattr(data_args, name):
            logger.warning(
                "%s was fine-tuned with --%s %s, evaluated here with %s: pass --%s %s for fine-tuning's features.",
                model, name, recorded[name], getattr(data_args, name), name, recorded[name],
            )  # fmt: skip


# ------------------------------------------------------------------------------------------------------ backends
def export_backends(model: str, folder: Path, onnx_task: str, overwrite: bool) -> dict[str, Path]:
    """Export `model` once per `EXPORTS` row into `folder`; backend -> its export folder."""
    exports = {}
    for backend, (name, quantize) in EXPORTS.items():
        logger.info("Exporting %s to %s (%s)", model, folder / name, backend)
        # The int8 export is not held to export_onnx's int8 tolerance: how far it is off is what is measured here.
        exports[backend] = export_onnx(
            model, folder / name, task=onnx_task, overwrite=overwrite, check=quantize is None, quantize=quantize
        )
    return exports


class Bf16Autocast(nn.Module):
    """A model whose forward runs under CPU bf16 autocast, as `with torch.autocast("cpu", torch.bfloat16):` runs a
    user's: the weights stay fp32 (the same module), each product is made in bf16."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **inputs: torch.Tensor) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.model(**inputs)


def load_backends(
    model: str, shape: TaskShape, onnx_task: str, exports: dict[str, Path], bf16: bool = False
) -> dict[str, nn.Module]:
    """Backend -> a model whose forward takes the three BERT inputs and returns the task's `ModelOutput`: the
    PyTorch head (fp32, eval mode, CPU) first, with `bf16` the same under bf16 autocast, then each export run by ONNX
    Runtime with torch's thread count."""
    pytorch = shape.auto_class.from_pretrained(model, dtype=torch.float32).eval()
    backends: dict[str, nn.Module] = {PYTORCH: pytorch}
    if bf16:
        backends[PYTORCH_BF16] = Bf16Autocast(pytorch)
    for backend, folder in exports.items():
        backends[backend] = BertScratchOnnxRuntimeModel.from_folder(folder, onnx_task, torch.get_num_threads())
    return backends


def make_batches(
    features: datasets.Dataset, collator: Callable[[list[dict[str, Any]]], Mapping[str, torch.Tensor]], batch_size: int
) -> list[dict[str, torch.Tensor]]:
    """The features in dataset order, `batch_size` at a time, padded by the shape's collator: the model inputs and,
    where the features have them, the labels."""
    columns = [name for name in (*INPUT_NAMES, "labels") if name in features.column_names]
    loader = torch.utils.data.DataLoader(
        features.select_columns(columns), batch_size=batch_size, shuffle=False, collate_fn=collator
    )
    return [dict(batch) for batch in loader]


def concat_padded(arrays: list[np.ndarray], pad: float = IGNORE_INDEX) -> np.ndarray:
    """Concatenate per-batch arrays along the batch axis, padding every later axis to its largest size with `pad`
    (per-token outputs and labels of batches padded to different lengths, as Trainer gathers them)."""
    shape = np.max([array.shape for array in arrays], axis=0)
    padded = [
        np.pad(
            array, [(0, 0)] + [(0, int(size - n)) for n, size in zip(array.shape[1:], shape[1:])], constant_values=pad
        )
        for array in arrays
    ]
    return np.concatenate(padded)


def run_backend(
    model: nn.Module, batches: list[dict[str, torch.Tensor]], outputs: tuple[str, ...]
) -> tuple[list[np.ndarray], float]:
    """The named outputs of `model` over every batch (each concatenated by `concat_padded`) and the seconds its
    forward passes took, after one untimed warm-up pass on the first batch."""
    collected: list[list[np.ndarray]] = [[] for _ in outputs]
    seconds = 0.0
    with torch.inference_mode():
        model(**{name: batches[0][name] for name in INPUT_NAMES})
        for batch in batches:
            inputs = {name: batch[name] for name in INPUT_NAMES}
            start = time.perf_counter()
            result = model(**inputs)
            seconds += time.perf_counter() - start
            for values, name in zip(collected, outputs):
                values.append(result[name].float().numpy())
    return [concat_padded(values) for values in collected], seconds


def top1_agreement(reference: np.ndarray, logits: np.ndarray, labels: np.ndarray | None) -> float:
    """Fraction of rows (N, C) or of scored positions (N, T, C; labels not -100, every position without labels) whose
    top-1 is the reference's."""
    same = reference.argmax(-1) == logits.argmax(-1)  # (N,) or (N, T)
    return float(same[labels != IGNORE_INDEX].mean() if same.ndim == 2 else same.mean())


# -------------------------------------------------------------------------------------------------- evaluation
@dataclass
class BackendResult:
    """One backend on one split: the shape's metrics, the agreement with PyTorch and the forward passes' speed."""

    backend: str
    metrics: dict[str, float]
    differences: dict[str, float]  # metric - PyTorch's metric
    agreement: float | None  # top-1 agreement with PyTorch; None for PyTorch and where the shape has no top-1
    seconds: float
    tokens_per_s: float


@dataclass
class SplitResult:
    """Every backend on one split."""

    split: str  # "eval" or "test"
    dataset_split: str  # the dataset's name of the split (validation, test, ...)
    examples: int
    features: int
    tokens: int  # real (non-pad) tokens of the features
    backends: list[BackendResult]


def evaluate_split(
    role: str,
    split_name: str,
    raw: datasets.Dataset,
    features: datasets.Dataset,
    shape: TaskShape,
    backends: dict[str, nn.Module],
    batch_size: int,
) -> SplitResult:
    """Run every backend on the split's batches and score each with the shape's `compute_metrics`."""
    evaluation = SHAPE_EVALUATIONS[shape.task.shape]
    outputs = ONNX_TASKS[evaluation.onnx_task].outputs
    batches = make_batches(features, shape.collator(), batch_size)
    labels = concat_padded([batch["labels"].numpy() for batch in batches]) if "labels" in batches[0] else None
    tokens = int(sum(int(batch["attention_mask"].sum()) for batch in batches))
    compute_metrics = shape.compute_metrics(raw, features)
    results: list[BackendResult] = []
    for backend, model in backends.items():
        logger.info("Evaluating %s on the %s split (%d features)", backend, role, len(features))
        predictions, seconds = run_backend(model, batches, outputs)
        # transformers types the predictions' tuple as one array long and the labels as never None; Trainer itself
        # makes EvalPredictions of several outputs and of no labels.
        prediction = EvalPrediction(
            predictions=predictions[0] if len(outputs) == 1 else tuple(predictions),  # type: ignore[arg-type]
            label_ids=labels,  # type: ignore[arg-type]
        )
        metrics = {name: float(value) for name, value in compute_metrics(prediction).items()}
        if not results:  # the first backend, PyTorch, is what the others are compared with
            reference_metrics, reference_output = metrics, predictions[0]
        compared = bool(results) and evaluation.agreement
        agreement = top1_agreement(reference_output, predictions[0], labels) if compared else None
        differences = {
            name: value - reference_metrics[name] for name, value in metrics.items() if name in reference_metrics
        }
        results.append(BackendResult(backend, metrics, differences, agreement, seconds, tokens / max(seconds, 1e-12)))
    return SplitResult(role, split_name, len(raw), len(features), tokens, results)


def table_metrics(task: TaskSpec) -> list[str]:
    """The metrics the table shows: the task's main metric, then the shape's other headline metrics."""
    headline = SHAPE_EVALUATIONS[task.shape].headline
    return [task.main_metric, *(name for name in headline if name != task.main_metric)]


def format_table(task: TaskSpec, result: SplitResult) -> str:
    """A Markdown table of one split: a row per backend with its metrics, the main metric's difference from
    PyTorch, the top-1 agreement, tokens/s and the speed against PyTorch."""
    metrics = table_metrics(task)
    main = task.main_metric
    header = ["backend", *metrics, f"Δ {main}", "top-1 agreement", "tokens/s", "speed vs PyTorch"]
    rows = [f"| {' | '.join(header)} |", "| --- |" + " ---: |" * (len(header) - 1)]
    pytorch_speed = result.backends[0].tokens_per_s
    for backend in result.backends:
        cells = [backend.backend, *(_number(backend.metrics.get(name)) for name in metrics)]
        cells.append("" if backend.backend == PYTORCH else f"{backend.differences.get(main, math.nan):+.4f}")
        cells.append("" if backend.agreement is None else f"{backend.agreement:.2%}")
        cells += [f"{backend.tokens_per_s:,.0f}", f"{backend.tokens_per_s / pytorch_speed:.2f}x"]
        rows.append(f"| {' | '.join(cells)} |")
    title = (
        f"{result.split} split ({result.dataset_split}): {result.examples:,} examples, {result.features:,} features, "
        f"{result.tokens:,} tokens"
    )
    return "\n".join([title, "", *rows])


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


# ------------------------------------------------------------------------------------------------------ records
def package_versions() -> dict[str, str | None]:
    """The installed version of every package the numbers depend on (None where one is not installed)."""
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def command_line(argv: list[str]) -> str:
    """The command as it was typed (a script's path run by python, or `bertscratch evaluate-onnx`)."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else "evaluate_onnx"
    program = f"python {program}" if program.endswith(".py") else program
    return f"{program} {shlex.join(argv)}".strip()


def results_record(
    argv: list[str],
    args: OnnxEvaluationArguments,
    data_args: DataArguments,
    task: TaskSpec,
    splits: list[SplitResult],
) -> dict:
    """What evaluation.json holds: the command and its arguments, when and where it ran, and every split's results."""
    return {
        "command": command_line(argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": args.model,
        "task": data_args.task,
        "task_type": task.shape,
        "main_metric": task.main_metric,
        "versions": package_versions(),
        "hardware": describe_hardware(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "device": "cpu",
        "int8_weight_bits": 7 if int8_saturates() else 8,  # export_onnx's default on this CPU (quantize_int8)
        "timing": TIMING_NOTE,
        "arguments": {**asdict(args), **asdict(data_args)},
        "splits": {result.split: asdict(result) for result in splits},
    }


# ---------------------------------------------------------------------------------------------------------- main
def load_split_features(
    args: OnnxEvaluationArguments, data_args: DataArguments, task: TaskSpec, model: str
) -> tuple[TaskShape, dict[str, datasets.Dataset], dict[str, datasets.Dataset]]:
    """The task shape (labels read from the data, the model checked against it), and the raw examples and
    fine-tuning's evaluation features of every split scored, each keyed by role ("eval", "test")."""
    raw = load_task_datasets(data_args, task)
    unlabelled = "test" in raw and not task.has_labels(raw["test"].column_names)  # fine-tuning predicts such a split
    if unlabelled and not (data_args.test_file or data_args.test_split or args.split == "test"):
        logger.info("The test split has no %s: only the eval split is scored.", task.scored_what)
        del raw["test"]  # a dataset's own (GLUE's on the Hub), which nothing asked to score
    elif unlabelled:
        raise ValueError(
            f"The test split has no {task.scored_what} (no {task.scored_column!r} column, or an empty one): evaluate-onnx scores "
            "each split against its labels; give a test file with them, or leave it out."
        )
    if args.split == "test" and data_args.chosen_on_test_split:
        raise ValueError(
            f"The test split is the eval split here ({test_split_chosen_by(data_args)}), scored once, as fine-tuning "
            "scores it: give --split eval, or leave --split out."
        )
    if args.split is not None and args.split not in raw:
        raise ValueError(
            f"The data has no {args.split} split (it has {[role for role in SPLITS if role in raw]}): give "
            "--test_split or --test_file, or leave --split out."
        )
    roles = [role for role in SPLITS if role in raw and args.split in (None, role)]
    for role in roles:
        raw[role] = sample_examples(raw[role], data_args.max_eval_samples, args.seed)
    settings = FeatureSettings(**{name: getattr(data_args, name) for name in FeatureSettings.__dataclass_fields__})
    # The export takes the tokenizer saved with the model too: there is no other to name.
    remedy = f"save the tokenizer it was fine-tuned with in {model!r} (tokenizer.save_pretrained)"
    shape = build_shape(task, settings, load_task_tokenizer(model, remedy=remedy))
    shape.prepare_labels(raw)  # every split's labels, the training split's included, as fine-tuning reads them
    check_model(model, task, shape, data_args)
    features = {
        role: shape.features(raw[role], training=False, num_proc=data_args.preprocessing_num_workers) for role in roles
    }
    return shape, {role: raw[role] for role in roles}, features


def main(argv: list[str] | None = None) -> None:
    """Export the fine-tuned model twice, evaluate every backend, print the table; see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, data_args = parse_args(argv)
    # This package's progress at INFO; ONNX Runtime's quantizer reports every tensor it leaves in fp32 at INFO.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("hf_bertscratch").setLevel(logging.INFO)
    if args.num_threads is not None:
        torch.set_num_threads(args.num_threads)

    # 1. Check the arguments and the model, then load the splits and make fine-tuning's features of them.
    task = check_arguments(args, data_args)
    model = check_model_reference(args.model)
    shape, raw, features = load_split_features(args, data_args, task, model)

    # 2. Export fp32 and int8 into the output folder (a temporary one without --output_dir).
    with tempfile.TemporaryDirectory() if args.output_dir is None else nullcontext(args.output_dir) as folder:
        onnx_task = SHAPE_EVALUATIONS[task.shape].onnx_task
        exports = export_backends(model, Path(folder), onnx_task, args.overwrite)
        bf16 = args.bf16 == "true" or (args.bf16 == "auto" and cpu_has_native_bf16())
        backends = load_backends(model, shape, onnx_task, exports, bf16)

        # 3. Run every backend on the same batches of each split and score them with the shape's metrics.
        split_names = {"eval": task.eval_split or "validation", "test": task.test_split or "test"}
        splits = [
            evaluate_split(role, split_names[role], raw[role], features[role], shape, backends, args.batch_size)
            for role in features
        ]

        # 4. Write evaluation.json beside the exports and print the tables.
        if args.output_dir is not None:
            record = results_record(argv, args, data_args, task, splits)
            write_record(Path(folder) / RESULTS_FILE, record)
    name = data_args.task or data_args.dataset_name or data_args.validation_file or task.shape
    threads = torch.get_num_threads()
    print(
        f"{name}: {model}, PyTorch against its ONNX exports, CPU ({cpu_model()}), {threads} thread{'s' * (threads != 1)}"
    )
    for result in splits:
        print(f"\n{format_table(task, result)}")
    print(f"\n{TIMING_NOTE}")


__all__ = [
    "EXPORTS",
    "SHAPE_EVALUATIONS",
    "BackendResult",
    "OnnxEvaluationArguments",
    "ShapeEvaluation",
    "SplitResult",
    "build_parser",
    "concat_padded",
    "evaluate_split",
    "export_backends",
    "format_table",
    "load_backends",
    "load_split_features",
    "main",
    "make_batches",
    "package_versions",
    "results_record",
    "run_backend",
    "top1_agreement",
]
