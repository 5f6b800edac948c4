"""lab/diagnose_single.py: the frozen features it probes, the runs it asks for, and the record's table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import hf_bertscratch
from hf_bertscratch.tasks.shapes import truncate_ids
from lab import diagnose_single

from conftest import tiny_config_kwargs, write_checkpoint


def test_pooled_features_pool_the_cut_texts_as_the_heads_do(tokenizer) -> None:
    """Each text is cut as fine-tuning cuts it; [CLS] is the first state, mean and max run over the real tokens only
    (a batch's padding changes nothing), and mean-max is both side by side."""
    torch.manual_seed(0)
    model = hf_bertscratch.BertScratchModel(hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer))))
    model.eval()
    texts = ["the movie was great", "bad " * 30, "an awful and boring film with bad acting"]
    features = diagnose_single.pooled_features(model, tokenizer, texts, 12, "head+tail", 4)
    for i, text in enumerate(texts):
        pieces = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [tokenizer.cls_token_id, *truncate_ids(pieces, 10, "head+tail", 4), tokenizer.sep_token_id]
        with torch.no_grad():
            states = model(input_ids=torch.tensor([ids])).last_hidden_state[0]  # (T, H) of the text alone
        expected = {"cls": states[0], "mean": states.mean(0), "max": states.max(0).values}
        expected["mean-max"] = torch.cat([expected["mean"], expected["max"]])
        for pooling, vector in expected.items():
            torch.testing.assert_close(torch.from_numpy(features[pooling][i]), vector, atol=1e-5, rtol=1e-5)


def test_a_run_resumes_and_takes_its_variants_flags(tmp_path: Path) -> None:
    args = diagnose_single.parse_args(
        ["--model", "m", "--task", "imdb", "--runs_dir", str(tmp_path), "--variants", "mean-max", "--extra", "--x", "1"]
    )
    command = diagnose_single.finetune_command(args, "mean-max", 42)
    assert command[:2] == ["bertscratch", "finetune"] and command[-4:] == [
        "--classifier_pooling",
        "mean-max",
        "--x",
        "1",
    ]
    assert "--resume_from_checkpoint" not in command
    write_checkpoint(tmp_path / "mean-max-seed42" / "checkpoint-10", step=10)
    assert diagnose_single.finetune_command(args, "mean-max", 42)[-2:] == ["--resume_from_checkpoint", "last"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "m", "--task", "mrpc"], "not a single-text classification task"),
        (["--model", "m", "--task", "sst2", "--variants", "nope"], "Unknown variant"),
        (["--model", "m", "--task", "sst2", "--variants", "cls"], "needs --runs_dir"),
    ],
)
def test_bad_arguments_are_refused_by_name(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        diagnose_single.parse_args(argv)


def test_the_record_renders_every_baseline_probe_and_run() -> None:
    record = {
        "task": "sst2",
        "metric": "accuracy",
        "model": "m",
        "commands": ["python -m lab.diagnose_single --task sst2"],
        "no_learning": {"constant": {"accuracy": 0.5}, "bag_of_words": {"accuracy": 0.822}},
        "frozen_probes": {"samples": 100, "max_seq_length": 64, "truncation": "head", "mean": {"accuracy": 0.6}},
        "fine_tuning": {
            "mean-max": {
                "42": {"flags": ["--classifier_pooling", "mean-max"], "final": 0.78, "dev": [0.7, 0.78],
                       "baseline_bag_of_words": 0.803, "learning_rate": 1e-3, "max_seq_length": 64},
                "43": {"flags": ["--classifier_pooling", "mean-max"], "final": 0.76, "dev": [0.72, 0.76]},
            }
        },
    }  # fmt: skip
    table = diagnose_single.render_single_table(record)
    assert (
        "| bag of words (TF-IDF + logistic regression) | no learning, the whole train and eval splits | 82.2 |" in table
    )
    assert (
        "| frozen features, mean, logistic regression | 100 train / eval examples, max_seq_length 64 | 60.0 |" in table
    )
    assert (
        "| fine-tuned: `mean-max` | `--classifier_pooling mean-max` (lr 0.001, length 64) | 77.0 ± 1.4 "
        "| 70.0 78.0 / 72.0 76.0 | 80.3 |" in table  # the rate and length it ran at, flags or the defaults of its day
    )
    assert "Made by `python -m lab.diagnose_single --task sst2`" in table
