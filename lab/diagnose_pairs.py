"""Why fine-tuning on a sentence-pair task does or does not keep what pretraining learnt: one record per model and task.

For a pretrained folder and a pair task (STS-B, MRPC, RTE, ...) it measures, on the task's dev set:

1. the no-learning baselines (`hf_bertscratch.baselines`): the constant answer, word overlap, and the zero-shot cosine
   of the two texts' mean-pooled states of every layer (0: the embeddings) and of the last layer's [CLS] state;
2. fine-tuning curves, one run per variant and seed (`bertscratch finetune` with the variant's flags, in
   `RUNS_DIR/<variant>-seed<seed>`): the dev metric, the spread of the predictions (`prediction_std` for a score,
   `top_class_share` for classes) per epoch, and the gradient norms of the head and of the encoder per log.

A finished run (its all_results.json) is read, not run again, so the command continues where it stopped. The record
(`--output_json`) holds every number, the machine and the commit:

    python -m lab.diagnose_pairs --model runs/D --task stsb --data_dir ../shared/data --runs_dir runs/diag-stsb \\
        --variants before table cls mean --seeds 42 --output_json results/pairs-diagnosis/stsb.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

import hf_bertscratch  # noqa: F401  (registers the model type)
from hf_bertscratch.baselines import constant_answer, score_baseline, word_overlaps
from hf_bertscratch.data import resolve_data_dir
from hf_bertscratch.similarity import pair_cosines
from hf_bertscratch.tasks import TASKS, TaskOverrides, TaskSpec, resolve_task
from hf_bertscratch.tasks.data import DataArguments, load_task_datasets

from . import diagnosis
from .diagnosis import ROOT, curve, run_folder, variant_mean
from .report_format import Sources

PROGRAM = "python -m lab.diagnose_pairs"

# Variant name -> the finetune flags that make it. "before" is what `bertscratch finetune --task T` ran before
# per-task defaults existed (the Trainer's rate, batch and epochs; no warm-up: transformers 5 ignores warmup_ratio);
# "table" the task table's runs (rate 3e-4, 5 epochs, batch 32, no warm-up); the rest change one thing at a time
# from today's defaults.
VARIANTS: dict[str, list[str]] = {
    "before": ["--classifier_pooling", "cls", "--learning_rate", "5e-5", "--num_train_epochs", "3",
               "--per_device_train_batch_size", "8", "--warmup_steps", "0"],
    "table": ["--classifier_pooling", "cls", "--learning_rate", "3e-4", "--num_train_epochs", "5", "--warmup_steps", "0"],
    "defaults": [],
    "cls": ["--classifier_pooling", "cls"],
    "cls+first": ["--classifier_pooling", "cls", "--segment_embeddings", "first"],
    "mean": ["--classifier_pooling", "mean"],
    "mean+first": ["--classifier_pooling", "mean", "--segment_embeddings", "first"],
    "segments": ["--classifier_pooling", "segments"],
    "segments+first": ["--classifier_pooling", "segments", "--segment_embeddings", "first"],
    "segments-10ep": ["--classifier_pooling", "segments", "--segment_embeddings", "first", "--num_train_epochs", "10"],
    "segments-lr1e-3": ["--classifier_pooling", "segments", "--segment_embeddings", "first", "--learning_rate", "1e-3"],
    "segments-20ep": ["--classifier_pooling", "segments", "--segment_embeddings", "first", "--num_train_epochs", "20"],
    "segments-20ep-lr1e-3": ["--classifier_pooling", "segments", "--segment_embeddings", "first",
                             "--num_train_epochs", "20", "--learning_rate", "1e-3"],
    "cls-10ep": ["--classifier_pooling", "cls", "--segment_embeddings", "first", "--num_train_epochs", "10"],
    "segments-probe": ["--classifier_pooling", "segments", "--segment_embeddings", "first", "--head_init", "probe"],
    "segments-probe-10ep": ["--classifier_pooling", "segments", "--segment_embeddings", "first", "--head_init",
                            "probe", "--num_train_epochs", "10"],
    "cls-probe": ["--classifier_pooling", "cls", "--segment_embeddings", "first", "--head_init", "probe"],
    "mean-probe": ["--classifier_pooling", "mean", "--segment_embeddings", "first", "--head_init", "probe"],
    "mean-lr1e-4": ["--classifier_pooling", "mean", "--learning_rate", "1e-4"],
    "mean-lr1e-3": ["--classifier_pooling", "mean", "--learning_rate", "1e-3"],
    "mean-10ep": ["--classifier_pooling", "mean", "--segment_embeddings", "first", "--num_train_epochs", "10"],
    "mean-nodropout": ["--classifier_pooling", "mean", "--dropout", "0"],
    "embedding": ["--task_type", "embedding"],
    "simcse": ["--task_type", "embedding", "--embedding_objective", "simcse"],
}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    pair_tasks = [t for t in TASKS if _is_pair(t)]
    parser = diagnosis.diagnosis_parser(
        __doc__.split("\n\n")[0],
        "The pretrained folder (or a fine-tuned one, for transfer).",
        f"A pair task of the table: {pair_tasks}.",
        VARIANTS,
        (2, "Fine-tuning runs at once (one thread each)."),
    )
    args = parser.parse_args(argv)
    diagnosis.check_arguments(args, pair_tasks, "sentence-pair task", VARIANTS)
    return args


def _is_pair(task: str) -> bool:
    spec = TASKS.get(task)
    return spec is not None and spec.shape in ("classification", "regression") and bool(spec.columns.get("text_pair"))


# ------------------------------------------------------------------------------------------------ no learning
def load_pairs(task: TaskSpec, name: str, data_dir: str | None) -> dict[str, dict[str, list]]:
    """The train and eval splits' first texts, second texts and labels."""
    raw = load_task_datasets(DataArguments(task=name, data_dir=data_dir), task)
    columns = task.columns
    ids = {label: i for i, label in enumerate(task.label_names or ())}  # class names (RTE's files) -> class ids
    return {
        role: {
            "first": list(raw[role][columns["text"]]),
            "second": list(raw[role][columns["text_pair"]]),
            "labels": [ids.get(label, label) for label in raw[role][columns["label"]]],
        }
        for role in ("train", "eval")
    }


def no_learning(model_dir: str, task: TaskSpec, pairs: dict[str, dict[str, list]]) -> dict:
    """The constant answer, word overlap, and the zero-shot cosines of every layer's mean-pooled states and of the
    last layer's [CLS] state, each scored as the task scores predictions."""
    num_labels = None if task.shape == "regression" else len(task.label_names)
    train, dev = pairs["train"], pairs["eval"]
    result = {
        "constant": constant_answer(train["labels"], dev["labels"], num_labels),
        "word_overlap": score_baseline(
            word_overlaps(train["first"], train["second"]),
            train["labels"],
            word_overlaps(dev["first"], dev["second"]),
            dev["labels"],
            num_labels,
        ),
    }
    model = AutoModel.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    layers = list(range(model.config.num_hidden_layers + 1))
    needs_train = num_labels is not None  # a threshold is fit on the train split's cosines
    cosines = {
        role: pair_cosines(model, tokenizer, split["first"], split["second"], "mean", layers)
        for role, split in (("train", train), ("eval", dev))
        if role == "eval" or needs_train
    }
    cls = {
        role: pair_cosines(model, tokenizer, split["first"], split["second"], "cls")
        for role, split in (("train", train), ("eval", dev))
        if role == "eval" or needs_train
    }
    result["zero_shot_mean_by_layer"] = [
        score_baseline(
            cosines["train"][i] if needs_train else None, train["labels"], cosines["eval"][i], dev["labels"], num_labels
        )
        for i in layers
    ]
    result["zero_shot_cls_last_layer"] = score_baseline(
        cls.get("train"), train["labels"], cls["eval"], dev["labels"], num_labels
    )
    result.update(joint_segments(model, tokenizer, pairs, num_labels))
    return result


def joint_segments(model, tokenizer, pairs: dict[str, dict[str, list]], num_labels: int | None) -> dict:
    """The zero-shot cosine of the two texts' means inside the joint sequence `[CLS] a [SEP] b [SEP]` (what the
    `segments` head reads), with the checkpoint's segment embeddings and with segment 0's for both texts."""
    from hf_bertscratch.modeling_bertscratch import segment_pool
    from hf_bertscratch.similarity import cosine

    def cosines(split: dict[str, list], same_segment: bool) -> np.ndarray:
        out = []
        for start in range(0, len(split["first"]), 64):
            batch = tokenizer(split["first"][start : start + 64], split["second"][start : start + 64], padding=True,
                              truncation=True, max_length=128, return_tensors="pt")  # fmt: skip
            types = batch["token_type_ids"]
            inputs = {**batch, "token_type_ids": torch.zeros_like(types)} if same_segment else dict(batch)
            with torch.no_grad():
                hidden = model(**inputs).last_hidden_state
            pooled = segment_pool(hidden, batch["attention_mask"], types).numpy()  # (B, 4H): u, v, ...
            width = hidden.shape[-1]
            out.append(cosine(pooled[:, :width], pooled[:, width : 2 * width]))
        return np.concatenate(out)

    result = {}
    for name, same in (("zero_shot_joint_segments", False), ("zero_shot_joint_segments_type0", True)):
        train = cosines(pairs["train"], same) if num_labels is not None else None
        result[name] = score_baseline(train, pairs["train"]["labels"], cosines(pairs["eval"], same),
                                      pairs["eval"]["labels"], num_labels)  # fmt: skip
    return result


# ------------------------------------------------------------------------------------------------ fine-tuning
def finetune_command(args: argparse.Namespace, variant: str, seed: int) -> list[str]:
    """`scripts/finetune.py` with the variant's flags."""
    program = [sys.executable, str(ROOT / "scripts" / "finetune.py")]
    return diagnosis.finetune_command(program, args, variant, seed, VARIANTS[variant])


def run_one(args: argparse.Namespace, variant: str, seed: int) -> None:
    diagnosis.run_one(args, variant, seed, finetune_command(args, variant, seed), one_thread=True)


# ------------------------------------------------------------------------------------------------- the records' tables
PAIRS_RECORDS = "results/pairs"  # `bash lab/record_pairs.sh`: README's pairs table and headline
PAIRS_DIAGNOSIS_RECORDS = "results/pairs-diagnosis"  # the diagnosis behind the defaults
PAIRS_BLOCK = ("<!-- pairs:start -->\n", "<!-- pairs:end -->")
PAIRS_DIAGNOSIS_BLOCK = ("<!-- pairs-diagnosis:start -->\n", "<!-- pairs-diagnosis:end -->")


def _pair_cell(values: list[float]) -> str:
    """Scores (0-1) of one variant's seeds as "mean ± sd (n)" x 100."""
    mean = 100 * statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.1f} (1 seed)"
    return f"{mean:.1f} ± {100 * statistics.stdev(values):.1f} ({len(values)} seeds)"


def render_pairs_table(record: dict) -> str:
    """One pair diagnostic record (`lab/diagnose_pairs.py`) as a table: the no-learning answers, then each
    fine-tuning variant's final dev score, mean ± sd over seeds, with the flags that made it."""
    metric = record["metric"]
    base = record["no_learning"]
    layers = base["zero_shot_mean_by_layer"]
    lines = [
        f"| {record['task']} dev, {metric} x 100 | score |",
        "| --- | ---: |",
        f"| no learning: constant answer | {100 * base['constant'][metric]:.1f} |",
        f"| no learning: word overlap (Jaccard of the word sets) | {100 * base['word_overlap'][metric]:.1f} |",
        f"| no learning: cosine of the mean-pooled last layer (layers 0..{len(layers) - 1}: "
        f"{' / '.join(f'{100 * m[metric]:.1f}' for m in layers)}) | **{100 * layers[-1][metric]:.1f}** |",
        f"| no learning: cosine of the last layer's [CLS] | {100 * base['zero_shot_cls_last_layer'][metric]:.1f} |",
    ]
    if "zero_shot_joint_segments" in base:
        joint, type0 = base["zero_shot_joint_segments"][metric], base["zero_shot_joint_segments_type0"][metric]
        lines.append(
            "| no learning: cosine of the two texts' means inside `[CLS] a [SEP] b [SEP]` (second text as segment 1 "
            f"/ as segment 0) | {100 * joint:.1f} / {100 * type0:.1f} |"
        )
    for variant, runs in record["fine_tuning"].items():
        finals = [run["final"] for run in runs.values() if run.get("final") is not None]
        if finals:
            flags = " ".join(next(iter(runs.values()))["flags"]) or "(the defaults)"
            lines.append(f"| fine-tuned `{variant}`: `{flags}` | {_pair_cell(finals)} |")
    note = record.get("model_note") or f"model `{record['model']}`"
    commands = record.get("commands") or [record["command"]]
    made = "; then ".join(f"`{command}`" for command in commands)
    lines.append("")
    lines.append(f"Model: {note}. Made by {made} ({record['machine']}, {record['date']}, commit {record['commit']}).")
    return "\n".join(lines) + "\n"


def _no_pairs_record() -> str:
    return f"No record yet: `python -m lab.diagnose_pairs ... --output_json {PAIRS_RECORDS}/TASK.json` writes it.\n"


def render_pairs_block(records: dict[str, dict]) -> str:
    """Every pair diagnostic record's table, in file-name order, or a line naming the command that makes them."""
    if not records:
        return _no_pairs_record()
    return "\n".join(render_pairs_table(record) for record in records.values())


# The summary's columns after the no-learning ones: (record file suffix, variant, heading). The task's own record is
# TASK.json (the pretrained model itself); TASK-from-stsb*.json start from a folder fine-tuned on STS-B.
PAIRS_SUMMARY_COLUMNS = (
    ("", "table", "the task table's former recipe ([CLS] head, lr 3e-4)"),
    ("", "defaults", "**`finetune` with its defaults**"),
    ("-from-stsb", "defaults", "the defaults, from the STS-B folder"),
    ("-simcse", "simcse", "SimCSE on the train texts, no labels"),
    ("", "embedding", "bi-encoder (`--task_type embedding`)"),
    ("-after-simcse", "embedding", "bi-encoder after SimCSE"),
)
PAIRS_SUMMARY_METRICS = {"mrpc": ("f1", "accuracy"), "stsb": ("spearmanr",), "rte": ("accuracy",)}


def render_pairs_summary(records: dict[str, dict]) -> str:
    """README's table of the pair tasks: per task and metric, what no learning scores (constant answer, word overlap,
    the pretrained model's zero-shot cosine through a threshold fit on train) beside each fine-tuning recipe, mean ±
    sd over seeds, from the records of `lab/diagnose_pairs.py`."""
    tasks = [task for task in PAIRS_SUMMARY_METRICS if f"{task}.json" in records]
    if not tasks:
        return _no_pairs_record()
    heading = ["task (dev), metric", "constant answer", "word overlap", "zero-shot cosine"]
    heading += [name for _, _, name in PAIRS_SUMMARY_COLUMNS]
    lines = ["| " + " | ".join(heading) + " |", "| --- |" + " ---: |" * (len(heading) - 1)]
    for task in tasks:
        own = records[f"{task}.json"]
        base = own["no_learning"]
        for metric in PAIRS_SUMMARY_METRICS[task]:
            cells = [f"{task.upper() if task != 'stsb' else 'STS-B'}, {metric}"]
            cells += [f"{100 * base[key][metric]:.1f}" for key in ("constant", "word_overlap")]
            cells.append(f"{100 * base['zero_shot_mean_by_layer'][-1][metric]:.1f}")
            cells += [variant_mean(records.get(f"{task}{suffix}.json"), variant, metric)
                      for suffix, variant, _ in PAIRS_SUMMARY_COLUMNS]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    seeds = sorted(
        {seed for task in tasks for runs in records[f"{task}.json"]["fine_tuning"].values() for seed in runs}
    )
    note = records[f"{tasks[0]}.json"].get("model_note") or records[f"{tasks[0]}.json"]["model"]
    lines += ["", f"Model: {note}. Mean ± sd over seeds {', '.join(seeds)}; zero-shot cosine and word overlap "
              "classify through a threshold fit on the train split. Every run and curve is in "
              f"`{PAIRS_RECORDS}/` (`bash lab/record_pairs.sh`; [Results](docs/results.md#sentence-pairs-and-similarity)).",
              ""]  # fmt: skip
    return "\n".join(lines)


def readme_pairs_block(sources: Sources) -> str:
    """README's pairs block: the summary of `PAIRS_RECORDS`."""
    return render_pairs_summary(sources.records(PAIRS_RECORDS))


def pairs_block(sources: Sources) -> str:
    """docs/results.md's pairs block: every record of `PAIRS_RECORDS` in full."""
    return render_pairs_block(sources.records(PAIRS_RECORDS))


def pairs_diagnosis_block(sources: Sources) -> str:
    """docs/fine-tuning.md's block: every record of `PAIRS_DIAGNOSIS_RECORDS`."""
    return render_pairs_block(sources.records(PAIRS_DIAGNOSIS_RECORDS))


# --------------------------------------------------------------------------------------------------------- main
def print_summary(record: dict, metric: str) -> None:
    base = record["no_learning"]
    print(f"\n{record['task']} dev, {metric} x 100 (model {record['model']})")
    print(f"  constant answer            {100 * base['constant'][metric]:6.1f}")
    print(f"  word overlap               {100 * base['word_overlap'][metric]:6.1f}")
    layers = " / ".join(f"{100 * m[metric]:.1f}" for m in base["zero_shot_mean_by_layer"])
    print(f"  zero-shot cosine, mean, layers 0..L   {layers}")
    print(f"  zero-shot cosine, [CLS] last layer    {100 * base['zero_shot_cls_last_layer'][metric]:6.1f}")
    diagnosis.print_fine_tuned(record, 18)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    data_dir = str(resolve_data_dir(args.data_dir) or "") or None
    args.data_dir = data_dir
    task = resolve_task(TaskOverrides(task=args.task))
    metric = task.main_metric
    record, old = diagnosis.start_record(args, list(argv if argv is not None else sys.argv[1:]), PROGRAM, metric)
    if old.get("model") == args.model and "zero_shot_joint_segments" in old.get("no_learning", {}):
        record["no_learning"] = old["no_learning"]
    else:
        record["no_learning"] = no_learning(args.model, task, load_pairs(task, args.task, data_dir))
    record["fine_tuning"] = old.get("fine_tuning", {}) if old.get("model") == args.model else {}
    diagnosis.run_variants(
        args,
        record,
        lambda variant, seed: run_one(args, variant, seed),
        lambda variant, seed: {
            "flags": VARIANTS[variant],
            **curve(run_folder(Path(args.runs_dir), variant, seed), metric),
        },
    )
    print_summary(record, metric)


if __name__ == "__main__":
    main()
