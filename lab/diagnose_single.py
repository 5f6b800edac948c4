"""Why fine-tuning on a single-text classification task (IMDB, SST-2, CoLA) does or does not beat a bag of words: one
record per model and task.

For a pretrained folder and a single-text task it measures, on the task's eval split (IMDB: test; GLUE: dev):

1. the no-learning baselines: the constant answer and TF-IDF + logistic regression on words, and on words and word
   pairs (`hf_bertscratch.baselines.bag_of_words`), fitted on the train split;
2. frozen-feature probes: logistic regression on the pretrained encoder's last states pooled four ways ([CLS] state,
   mean, max, mean and max), at the task's length and truncation, on `--probe_samples` train and eval examples;
3. fine-tuning curves, one run per variant and seed (`bertscratch finetune` with the variant's flags, in
   `RUNS_DIR/<variant>-seed<seed>`): the eval metric per epoch, the gradient norms, the run's own baselines and how
   many texts were longer than the length read.

A finished run (its all_results.json) is read, not run again, and the record is written after each run, so the
command continues where it stopped, also from its committed record alone (`--output_json` of an earlier run):

    python -m lab.diagnose_single --model runs/D --task imdb --data_dir ../shared/data --runs_dir runs/diag-imdb \\
        --variants defaults mean-max --seeds 42 --output_json results/single-diagnosis/imdb.json

`--extra` passes further flags to every run (e.g. `--max_train_samples 5000 --max_eval_samples 5000` to screen on a
subset; the record keeps them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

import hf_bertscratch  # noqa: F401  (registers the model type)
from hf_bertscratch.baselines import no_learning_scores
from hf_bertscratch.data import resolve_data_dir
from hf_bertscratch.modeling_bertscratch import max_pool, mean_pool
from hf_bertscratch.tasks import TASKS, TaskSpec, finetune_defaults
from hf_bertscratch.tasks.data import DataArguments, load_task_datasets
from hf_bertscratch.tasks.shapes import truncate_ids

from . import diagnosis
from .diagnosis import curve, run_folder, variant_mean
from .report_format import Sources

PROGRAM = "python -m lab.diagnose_single"

# Variant name -> the finetune flags that make it: each changes one or two things from the task's defaults.
VARIANTS: dict[str, list[str]] = {
    "defaults": [],
    "cls": ["--classifier_pooling", "cls"],
    "mean": ["--classifier_pooling", "mean"],
    "max": ["--classifier_pooling", "max"],
    "mean-max": ["--classifier_pooling", "mean-max"],
    "cls-probe": ["--classifier_pooling", "cls", "--head_init", "probe"],
    "mean-max-probe": ["--classifier_pooling", "mean-max", "--head_init", "probe"],
    "mean-max-random": ["--classifier_pooling", "mean-max", "--head_init", "random"],
    "head-256": ["--max_seq_length", "256", "--truncation", "head"],
    "head-512": ["--max_seq_length", "512", "--truncation", "head"],
    "head+tail-512": ["--max_seq_length", "512", "--truncation", "head+tail", "--head_tokens", "128"],
    "mean-max-head+tail-512": ["--classifier_pooling", "mean-max", "--max_seq_length", "512", "--truncation",
                               "head+tail", "--head_tokens", "128"],
    "cls-lr1e-3": ["--classifier_pooling", "cls", "--learning_rate", "1e-3"],
    "mean-max-lr1e-3": ["--classifier_pooling", "mean-max", "--learning_rate", "1e-3"],
    "mean-max-lr1e-3-head+tail-512": ["--classifier_pooling", "mean-max", "--learning_rate", "1e-3",
                                      "--max_seq_length", "512", "--truncation", "head+tail", "--head_tokens", "128"],
    "lr1e-4": ["--learning_rate", "1e-4"],
    "lr5e-4": ["--learning_rate", "5e-4"],
    "lr1e-3": ["--learning_rate", "1e-3"],
    "epochs-2": ["--num_train_epochs", "2"],
    "epochs-5": ["--num_train_epochs", "5"],
    "scratch": ["--init_from_scratch", "true"],
}  # fmt: skip

POOLINGS = ("cls", "mean", "max", "mean-max")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    def probe_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--probe_samples", type=int, default=5000, help="Train and eval examples of the frozen probes.")
        p.add_argument("--no_probe", action="store_true", help="Skip the baselines and probes (kept from the record).")

    parser = diagnosis.diagnosis_parser(
        __doc__.split("\n\n")[0],
        "The pretrained folder.",
        f"A single-text classification task: {single_text_tasks()}.",
        VARIANTS,
        (1, "Fine-tuning runs at once (one thread each when > 1)."),
        probe_options,
    )
    args = parser.parse_args(argv)
    diagnosis.check_arguments(args, single_text_tasks(), "single-text classification task", VARIANTS)
    return args


def single_text_tasks() -> list[str]:
    return [name for name, t in TASKS.items() if t.shape == "classification" and not t.columns.get("text_pair")]


# ------------------------------------------------------------------------------------------------ no learning
def load_texts(task: TaskSpec, name: str, data_dir: str | None) -> dict[str, dict[str, list]]:
    """The train and eval splits' texts and class ids."""
    raw = load_task_datasets(DataArguments(task=name, data_dir=data_dir, validation_split_percentage=0), task)
    ids = {label: i for i, label in enumerate(task.label_names or ())}
    return {
        role: {
            "texts": [text or "" for text in raw[role][task.columns["text"]]],
            "labels": [ids.get(label, label) for label in raw[role][task.columns["label"]]],
        }
        for role in ("train", "eval")
    }


def baselines(task: TaskSpec, splits: dict[str, dict[str, list]]) -> dict:
    """The constant answer and the bags of words (`baselines.no_learning_scores`), each with every metric."""
    column = task.columns["text"]
    train, dev = ({column: split["texts"]} for split in (splits["train"], splits["eval"]))
    return no_learning_scores(task, train, splits["train"]["labels"], {"eval": (dev, splits["eval"]["labels"])})["eval"]


def pooled_features(
    model, tokenizer, texts: list[str], max_length: int, truncation: str, head_tokens: int
) -> dict[str, np.ndarray]:
    """The frozen encoder's last states of `texts` (cut as fine-tuning cuts them), pooled each of `POOLINGS` way:
    pooling -> (N, H) or (N, 2H)."""
    pieces = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]  # cut below, as fine-tuning cuts
    rows = [
        [tokenizer.cls_token_id] + truncate_ids(ids, max_length - 2, truncation, head_tokens) + [tokenizer.sep_token_id]
        for ids in pieces
    ]
    order = np.argsort([len(r) for r in rows])  # batches of similar length
    out: dict[str, list] = {p: [None] * len(rows) for p in POOLINGS}
    for start in range(0, len(rows), 64):
        batch = [rows[i] for i in order[start : start + 64]]
        width = max(map(len, batch))
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in batch])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch])
        with torch.no_grad():
            states = model(input_ids=ids, attention_mask=mask).last_hidden_state
        mean, largest = mean_pool(states, mask), max_pool(states, mask)
        pooled = {"cls": states[:, 0], "mean": mean, "max": largest, "mean-max": torch.cat([mean, largest], -1)}
        for pooling, values in pooled.items():
            for j, i in enumerate(order[start : start + 64]):
                out[pooling][i] = values[j].numpy()
    return {pooling: np.stack(values) for pooling, values in out.items()}


def frozen_probes(model_dir: str, task: TaskSpec, name: str, splits: dict, samples: int) -> dict:
    """Logistic regression on the frozen pooled features of `samples` train examples, scored on `samples` eval
    examples (both drawn with seed 0), at the task's default length and truncation."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from hf_bertscratch.metrics import ClassificationMetrics

    defaults = finetune_defaults(task, name)
    model, tokenizer = AutoModel.from_pretrained(model_dir).eval(), AutoTokenizer.from_pretrained(model_dir)
    rng = np.random.default_rng(0)
    chosen = {role: rng.permutation(len(s["texts"]))[:samples] for role, s in splits.items()}
    features = {
        role: pooled_features(
            model, tokenizer, [splits[role]["texts"][i] for i in index], defaults.max_seq_length, "head", 128
        )
        for role, index in chosen.items()
    }
    labels = {role: [splits[role]["labels"][i] for i in index] for role, index in chosen.items()}
    out = {"samples": samples, "max_seq_length": defaults.max_seq_length, "truncation": "head"}
    for pooling in POOLINGS:
        scaler = StandardScaler().fit(features["train"][pooling])
        classifier = LogisticRegression(max_iter=2000).fit(
            scaler.transform(features["train"][pooling]), labels["train"]
        )
        predictions = classifier.predict(scaler.transform(features["eval"][pooling]))
        out[pooling] = ClassificationMetrics(len(task.label_names), pairs=True).compute(
            [int(p) for p in predictions], labels["eval"]
        )
    return out


# ------------------------------------------------------------------------------------------------ fine-tuning
def finetune_command(args: argparse.Namespace, variant: str, seed: int) -> list[str]:
    """`bertscratch finetune` with the variant's flags, its curve on the eval split itself."""
    flags = ["--validation_split_percentage", "0", *VARIANTS[variant]]
    return diagnosis.finetune_command(["bertscratch", "finetune"], args, variant, seed, flags)


def run_one(args: argparse.Namespace, variant: str, seed: int) -> None:
    command = finetune_command(args, variant, seed)
    diagnosis.run_one(args, variant, seed, command, one_thread=args.processes > 1)


def run_summary(folder: Path, metric: str) -> dict:
    """`diagnosis.curve` of a finished run, with its own baselines and length settings."""
    results = json.loads((folder / "all_results.json").read_text())
    keep = ("baseline_", "max_seq_length", "truncation", "classifier_pooling", "long_texts", "train_samples",
            "eval_samples", "num_train_epochs", "head_init")  # fmt: skip
    return {**curve(folder, metric), **{k: v for k, v in results.items() if k.startswith(keep)}}


# ------------------------------------------------------------------------------------------------- the records' table
SINGLE_DIAGNOSIS_RECORDS = "results/single-diagnosis"  # `bash lab/record_single.sh`: IMDB and SST-2
SINGLE_DIAGNOSIS_BLOCK = ("<!-- single-diagnosis:start -->\n", "<!-- single-diagnosis:end -->")
# A single-text diagnosis record's no-learning entries -> how its table names them.
SINGLE_BASELINES = {
    "constant": "constant answer",
    "bag_of_words": "bag of words (TF-IDF + logistic regression)",
    "bag_of_word_pairs": "bag of words and word pairs",
}


# What a fine-tuning run of a single-text record ran with, flags or the defaults of its day: record key -> name.
SINGLE_RUN_SETTINGS = {"learning_rate": "lr", "max_seq_length": "length"}


def render_single_table(record: dict) -> str:
    """One `lab/diagnose_single.py` record as a table: the no-learning scores, the frozen probes per pooling and
    each fine-tuning variant (its flags with the rate and length it ran at, mean ± sd over seeds, the eval metric
    per epoch)."""
    metric = record["metric"]
    lines = [f"**{record['task']}** ({metric} x 100):", "",
             "| what | how | score | per epoch | bag of words on the run's examples (words / and word pairs) |",
             "| --- | --- | ---: | --- | ---: |"]  # fmt: skip
    for key, name in SINGLE_BASELINES.items():
        if record.get("no_learning", {}).get(key):  # {}: not computed on this data
            lines.append(
                f"| {name} | no learning, the whole train and eval splits | {100 * record['no_learning'][key][metric]:.1f} "
                "| | |"
            )
    probes = record.get("frozen_probes", {})
    for pooling in ("cls", "mean", "max", "mean-max"):
        if pooling in probes:
            how = f"{probes['samples']:,} train / eval examples, max_seq_length {probes['max_seq_length']}"
            lines.append(
                f"| frozen features, {pooling}, logistic regression | {how} | {100 * probes[pooling][metric]:.1f} | | |"
            )
    for variant, runs in record.get("fine_tuning", {}).items():
        first = next(iter(runs.values()))
        flags = " ".join(first.get("flags", [])) or "(the task's defaults)"
        ran = [f"{name} {first[key]:g}" for key, name in SINGLE_RUN_SETTINGS.items() if first.get(key) is not None]
        flags = f"`{flags}`" + (f" ({', '.join(ran)})" if ran else "")
        curves = " / ".join(" ".join(f"{100 * v:.1f}" for v in run.get("dev", [])) for run in runs.values())
        bags = " / ".join(
            f"{100 * first[k]:.1f}"
            for k in ("baseline_bag_of_words", "baseline_bag_of_word_pairs")
            if first.get(k) is not None
        )
        lines.append(
            f"| fine-tuned: `{variant}` | {flags} | {variant_mean(record, variant, metric)} | {curves} | {bags} |"
        )
    note = record.get("model_note") or record["model"]
    commands = "; then ".join(f"`{c}`" for c in record.get("commands", []))
    lines += ["", f"Model: {note}. Made by {commands} ({record.get('machine', '?')}, {record.get('date', '?')}, commit "
              f"{record.get('commit', '?')}).", ""]  # fmt: skip
    return "\n".join(lines)


def render_single_block(records: dict[str, dict]) -> str:
    """Every single-text diagnosis record's table, in file-name order, or a line naming the command that makes them."""
    if not records:
        return f"No record yet: `bash lab/record_single.sh` writes them to `{SINGLE_DIAGNOSIS_RECORDS}/`.\n"
    return "\n".join(render_single_table(record) for record in records.values())


def single_block(sources: Sources) -> str:
    """docs/fine-tuning.md's block: every record of `SINGLE_DIAGNOSIS_RECORDS`."""
    return render_single_block(sources.records(SINGLE_DIAGNOSIS_RECORDS))


# --------------------------------------------------------------------------------------------------------- main
def print_summary(record: dict, metric: str) -> None:
    print(f"\n{record['task']} {metric} x 100 (model {record['model']})")
    for name, scores in record.get("no_learning", {}).items():
        print(f"  {name:32s} {100 * scores[metric]:6.1f}" if scores else f"  {name:32s} not computed")
    for pooling in POOLINGS:
        if pooling in record.get("frozen_probes", {}):
            print(f"  frozen probe, {pooling:18s} {100 * record['frozen_probes'][pooling][metric]:6.1f}")
    diagnosis.print_fine_tuned(record, 20)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.data_dir = str(resolve_data_dir(args.data_dir) or "") or None
    task = TASKS[args.task]
    metric = task.main_metric
    record, old = diagnosis.start_record(args, list(argv if argv is not None else sys.argv[1:]), PROGRAM, metric)
    same_model = old.get("model") == args.model
    for part in ("no_learning", "frozen_probes"):
        if same_model and part in old:
            record[part] = old[part]
    record["fine_tuning"] = old.get("fine_tuning", {}) if same_model else {}
    if not args.no_probe and not ("no_learning" in record and "frozen_probes" in record):
        splits = load_texts(task, args.task, args.data_dir)
        record["no_learning"] = baselines(task, splits)
        diagnosis.save_record(args, record)
        record["frozen_probes"] = frozen_probes(args.model, task, args.task, splits, args.probe_samples)
        diagnosis.save_record(args, record)
    diagnosis.run_variants(
        args,
        record,
        lambda variant, seed: run_one(args, variant, seed),
        lambda variant, seed: {
            "flags": VARIANTS[variant] + args.extra,
            **run_summary(run_folder(Path(args.runs_dir), variant, seed), metric),
        },
    )
    print_summary(record, metric)


if __name__ == "__main__":
    main()
