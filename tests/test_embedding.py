"""hf_bertscratch.embedding: reading a sentence-transformers folder's pooling as sentence-transformers reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_bertscratch.embedding import POOLING_FOLDER, saved_pooling, write_sentence_transformers_files


def _pooling_config(folder: Path, config: dict) -> Path:
    (folder / POOLING_FOLDER).mkdir(parents=True, exist_ok=True)
    (folder / POOLING_FOLDER / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_pooling_written_is_the_pooling_read(tmp_path: Path, pooling: str) -> None:
    write_sentence_transformers_files(tmp_path, pooling, 16, 32)
    assert saved_pooling(tmp_path) == pooling


@pytest.mark.parametrize(
    ("config", "pooling"),
    [
        ({"word_embedding_dimension": 32, "pooling_mode": "cls"}, "cls"),  # sentence-transformers 6
        ({"word_embedding_dimension": 32, "pooling_mode": ["mean"]}, "mean"),
        ({"word_embedding_dimension": 32, "pooling_mode_cls_token": True}, "cls"),  # earlier versions
        # No mode asked for: sentence-transformers pools by the mean.
        ({"word_embedding_dimension": 32}, "mean"),
        ({"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False}, "mean"),
    ],
)
def test_a_pooling_config_reads_as_sentence_transformers_reads_it(tmp_path: Path, config: dict, pooling: str) -> None:
    assert saved_pooling(_pooling_config(tmp_path, config)) == pooling


@pytest.mark.parametrize(
    "config",
    [
        {"pooling_mode": ["cls", "mean"]},
        {"pooling_mode": "max"},
        # Earlier versions' flags: sentence-transformers concatenates every mode set, the [CLS] state then the mean.
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
        {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True},
        {"pooling_mode_mean_tokens": True, "pooling_mode_mean_sqrt_len_tokens": True},
    ],
)
def test_a_pooling_computed_elsewhere_is_refused(tmp_path: Path, config: dict) -> None:
    with pytest.raises(ValueError, match=r"asks for pooling .*; hf_bertscratch computes mean and cls pooling only"):
        saved_pooling(_pooling_config(tmp_path, {"word_embedding_dimension": 32, **config}))
