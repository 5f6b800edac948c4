"""The pair diagnostic (`lab/diagnose_pairs.py`) reports the no-learning baselines it names, each against a direct
computation."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from transformers import AutoModel, BertTokenizer

from hf_bertscratch.baselines import constant_answer, word_overlap
from hf_bertscratch.tasks import TASKS
from lab import diagnose_pairs, diagnosis, headline

from conftest import CORPUS
from test_baselines import _alone, encoder_dir  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]


def test_pair_diagnostic_reports_the_baselines_it_names(encoder_dir: Path) -> None:  # noqa: F811
    diagnostic = diagnose_pairs
    rng = random.Random(0)
    pairs = {
        role: {
            "first": [rng.choice(CORPUS) for _ in range(n)],
            "second": [rng.choice(CORPUS) for _ in range(n)],
            "labels": [round(rng.uniform(0, 5), 2) for _ in range(n)],
        }
        for role, n in (("train", 12), ("eval", 10))
    }
    result = diagnostic.no_learning(str(encoder_dir), TASKS["stsb"], pairs)
    dev = pairs["eval"]
    overlaps = [word_overlap(a, b) for a, b in zip(dev["first"], dev["second"])]
    assert result["word_overlap"]["spearmanr"] == pytest.approx(spearmanr(overlaps, dev["labels"]).statistic, abs=1e-6)
    model, tokenizer = AutoModel.from_pretrained(encoder_dir).eval(), BertTokenizer.from_pretrained(encoder_dir)
    cosines = []
    for a, b in zip(dev["first"], dev["second"]):
        u, v = _alone(model, tokenizer, a), _alone(model, tokenizer, b)
        cosines.append(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    assert len(result["zero_shot_mean_by_layer"]) == model.config.num_hidden_layers + 1
    last = result["zero_shot_mean_by_layer"][-1]["spearmanr"]
    assert last == pytest.approx(spearmanr(cosines, dev["labels"]).statistic, abs=1e-6)
    assert result["constant"]["spearmanr"] == 0.0
    joint = []  # the two texts' means inside the joint sequence, each pair alone
    for a, b in zip(dev["first"], dev["second"]):
        encoded = tokenizer(a, b, return_tensors="pt")
        with torch.no_grad():
            states = model(**encoded).last_hidden_state[0]
        second = encoded["token_type_ids"][0].bool()
        u, v = states[~second].mean(0).numpy(), states[second].mean(0).numpy()
        joint.append(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    got = result["zero_shot_joint_segments"]["spearmanr"]
    assert got == pytest.approx(spearmanr(joint, dev["labels"]).statistic, abs=1e-5)


def test_pair_diagnostic_refuses_a_single_text_task() -> None:
    with pytest.raises(SystemExit, match="not a sentence-pair task"):
        diagnose_pairs.parse_args(["--model", "m", "--task", "sst2"])


def test_pair_diagnostic_reads_class_names_as_class_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """RTE's files hold class names: the diagnostic's baselines read them as the task's class ids."""
    import datasets

    diagnostic = diagnose_pairs
    split = datasets.Dataset.from_dict(
        {"sentence1": ["a b", "c d"], "sentence2": ["a", "e"], "label": ["not_entailment", "entailment"]}
    )
    monkeypatch.setattr(diagnostic, "load_task_datasets", lambda *args: {"train": split, "eval": split})
    pairs = diagnostic.load_pairs(TASKS["rte"], "rte", None)
    assert pairs["eval"]["labels"] == [1, 0] and pairs["train"]["first"] == ["a b", "c d"]
    assert constant_answer(pairs["train"]["labels"], pairs["eval"]["labels"], 2)["accuracy"] == 0.5


def test_pair_record_names_paths_relative_to_the_repository_and_leaves_out_the_note() -> None:
    command = diagnosis.recorded_command(
        ["--model", str(ROOT / "runs" / "D"), "--data_dir", str(ROOT.parent / "shared" / "data"), "--task", "stsb",
         "--model_note", "the model, made `here`", "--output_json", "results/pairs/stsb.json"],
        diagnose_pairs.PROGRAM,
    )  # fmt: skip
    assert command == (
        "python -m lab.diagnose_pairs --model runs/D --data_dir ../shared/data --task stsb "
        "--output_json results/pairs/stsb.json"
    )


def test_pair_diagnostic_table_gives_each_baseline_and_variant_of_its_record() -> None:
    record = {
        "command": "python -m lab.diagnose_pairs --model D --task stsb",
        "model": "D",
        "model_note": "the 9-minute model",
        "task": "stsb",
        "metric": "spearmanr",
        "machine": "CPU",
        "date": "2026-11-27",
        "commit": "abc1234",
        "no_learning": {
            "constant": {"spearmanr": 0.0},
            "word_overlap": {"spearmanr": 0.653},
            "zero_shot_mean_by_layer": [{"spearmanr": 0.5}, {"spearmanr": 0.612}],
            "zero_shot_cls_last_layer": {"spearmanr": 0.287},
        },
        "fine_tuning": {
            "before": {"42": {"flags": ["--learning_rate", "5e-5"], "final": 0.109}},
            "embedding": {
                "42": {"flags": ["--task_type", "embedding"], "final": 0.7},
                "43": {"flags": [], "final": 0.72},
            },
        },
    }
    table = diagnose_pairs.render_pairs_table(record)
    assert "| no learning: word overlap (Jaccard of the word sets) | 65.3 |" in table
    assert "(layers 0..1: 50.0 / 61.2) | **61.2** |" in table and "| no learning: constant answer | 0.0 |" in table
    assert "| fine-tuned `before`: `--learning_rate 5e-5` | 10.9 (1 seed) |" in table
    assert "| fine-tuned `embedding`: `--task_type embedding` | 71.0 ± 1.4 (2 seeds) |" in table
    assert (
        table.rstrip().endswith("(CPU, 2026-11-27, commit abc1234).") and "the 9-minute model. Made by `python" in table
    )
    assert diagnose_pairs.render_pairs_block({}).startswith("No record yet")
    transfer = {**record, "fine_tuning": {"defaults": {"42": {"flags": [], "final": 0.5}}}}
    summary = diagnose_pairs.render_pairs_summary({"stsb.json": record, "stsb-from-stsb.json": transfer})
    assert "| STS-B, spearmanr | 0.0 | 65.3 | 61.2 |  |  | 50.0 |  | 71.0 ± 1.4 |  |" in summary
    assert "Model: the 9-minute model. Mean ± sd over seeds 42, 43;" in summary
    figures = headline.Headline(None, {}, {}, {}, None, {"train": "", "encode": ""}, pairs=record)
    sentence = " ".join(headline.render_headline(figures).split())
    assert (
        "STS-B's Spearman is **71.0** as a bi-encoder, against 61.2 for the model's own zero-shot cosine and 65.3 for "
        "word overlap" in sentence
    )
