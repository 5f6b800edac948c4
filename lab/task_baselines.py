"""What each task of the task table scores with no learning, on its eval split and on its test split where it has
one (the splits the table's rows report): the constant answer, word overlap for sentence pairs, the bags of words
for single texts, each word's most frequent tag for named entities (`hf_bertscratch.baselines.no_learning_scores`,
every metric). The task tables show them beside the fine-tuned scores (`lab.results_table`).

    python -m lab.task_baselines --data_dir ../shared/data --record results/task_baselines.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import datetime, timezone

from hf_bertscratch.baselines import no_learning_scores
from hf_bertscratch.data import resolve_data_dir
from hf_bertscratch.hardware import describe_hardware
from hf_bertscratch.records import portable_paths
from hf_bertscratch.run_folder import write_text_atomically
from hf_bertscratch.tasks import TASKS
from hf_bertscratch.tasks.data import DataArguments, load_task_datasets

TASK_TABLE_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "imdb", "conll2003")  # the table's tasks


def task_scores(name: str, data_dir: str | None) -> dict[str, dict[str, dict[str, float]]]:
    """`no_learning_scores` of the table's task `name` on its eval split and, where it has one (IMDB's test reviews,
    CoNLL-2003's test sentences), its test split: split -> answer -> metrics, fitted on the train split fine-tuning
    trains on, labels as it reads them."""
    task = TASKS[name]
    raw = load_task_datasets(DataArguments(task=name, data_dir=data_dir), task)
    roles = [role for role in ("eval", "test") if role in raw]
    if task.shape == "token-classification":  # the tagging baseline reads the splits' own tags
        labels = {role: raw[role][task.columns["tags"]] for role in ("train", *roles)}
    else:
        ids = {label: i for i, label in enumerate(task.label_names or ())}  # class names (RTE's files) -> ids
        labels = {role: [ids.get(v, v) for v in raw[role][task.columns["label"]]] for role in ("train", *roles)}
    return no_learning_scores(task, raw["train"], labels["train"], {role: (raw[role], labels[role]) for role in roles})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data_dir", default=None, help="Local copies of the datasets (default $BERTSCRATCH_DATA_DIR)."
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASK_TABLE_TASKS), choices=list(TASK_TABLE_TASKS))
    parser.add_argument("--record", default=None, help="Where the record goes (json, written atomically).")
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    data_dir = str(resolve_data_dir(args.data_dir) or "") or None
    record = {
        "command": "python -m lab.task_baselines " + shlex.join(portable_paths(given)),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": describe_hardware(),
        "tasks": {},
    }
    for name in args.tasks:
        record["tasks"][name] = task_scores(name, data_dir)
        metric = TASKS[name].main_metric
        for split, answers in record["tasks"][name].items():
            print(name, split, {k: round(100 * v[metric], 1) if v else None for k, v in answers.items()})
    if args.record:
        write_text_atomically(args.record, json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
