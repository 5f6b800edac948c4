"""Sentence embeddings as a task shape: a bi-encoder trained so that the cosine of two texts' mean-pooled vectors
says how similar they are, saved as a folder sentence-transformers loads.

Each text of a pair goes through the encoder alone (no cross-attention between the two, unlike a cross-encoder
classifier), and is pooled as `hf_bertscratch.similarity.encode` pools it. Three objectives:

| objective | data | loss (as sentence-transformers names it) |
| --- | --- | --- |
| cosine | pairs with a similarity score (STS-B) | MSE between the cosine and the score scaled to [0, 1] (CosineSimilarityLoss) |
| in-batch | pairs known to match (paraphrases; label 1 where a label is given) | cross-entropy of each text against every second text of the batch (MultipleNegativesRankingLoss) |
| simcse | single texts | in-batch, each text paired with itself under another dropout mask (SimCSE, Gao et al. 2021) |

Evaluation scores the cosine of the eval pairs against their labels (Spearman, Pearson: STS-B's metric). The saved
folder is the bare encoder (`AutoModel`, remote code included) with sentence-transformers' `modules.json`,
`sentence_bert_config.json` and `1_Pooling/config.json`, so `SentenceTransformer(folder)` gives the same vectors as
`bertscratch embed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F
from transformers import PreTrainedTokenizerBase, Trainer

from .similarity import pool

EMBEDDING_OBJECTIVES = ("cosine", "in-batch", "simcse")
SIMILARITY_SCALE = 20.0  # sentence-transformers' MultipleNegativesRankingLoss scale (1 / temperature 0.05)
PAIR_PREFIX = "pair_"  # the second text's features: pair_input_ids, pair_attention_mask, pair_token_type_ids
POOLING_FOLDER = "1_Pooling"
# The sentence-transformers modules an embedding folder may list: the encoder, its pooling, scaling to unit length.
COMPUTED_MODULES = ("Transformer", "Pooling", "Normalize")
# Earlier sentence-transformers' pooling flags -> the mode each turns on, in the order its outputs are concatenated.
_LEGACY_POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


# ----------------------------------------------------------------------------------------------------- the data
class PairCollator:
    """Pads a batch of (text, second text) features into two padded batches: `input_ids`, `attention_mask`,
    `token_type_ids` for the first texts and the same with `pair_` for the second; `labels` as floats when the
    features have them. Other feature columns (`length`) are dropped."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, pad_to_multiple_of: int | None = 8) -> None:
        self.tokenizer, self.pad_to_multiple_of = tokenizer, pad_to_multiple_of

    def _pad(self, features: list[dict], prefix: str) -> dict[str, torch.Tensor]:
        keys = ("input_ids", "attention_mask", "token_type_ids")
        rows = [{k: f[prefix + k] for k in keys if prefix + k in f} for f in features]
        padded = self.tokenizer.pad(rows, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        return {prefix + k: v for k, v in padded.items()}

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        batch = self._pad(features, "")
        if PAIR_PREFIX + "input_ids" in features[0]:  # SimCSE's single texts have no second text
            batch.update(self._pad(features, PAIR_PREFIX))
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([float(f["labels"]) for f in features], dtype=torch.float32)
        return batch


def objective_for_labels(labels: list | None) -> str:
    """The objective that fits a train split's labels (None: it has none): cosine for similarity scores, in-batch
    negatives for 0/1 match labels and for pairs without labels."""
    binary = labels is not None and set(labels) <= {0, 1}
    return "cosine" if labels is not None and not binary else "in-batch"


# ------------------------------------------------------------------------------------------------ the training
def embed_batch(model: torch.nn.Module, inputs: dict[str, torch.Tensor], prefix: str, pooling: str) -> torch.Tensor:
    """The pooled (B, H) vectors of one side of a pair batch."""
    fields = {k.removeprefix(prefix): v for k, v in inputs.items() if k.startswith(prefix) and k != "labels"}
    if not prefix:
        fields = {k: v for k, v in fields.items() if not k.startswith(PAIR_PREFIX)}
    hidden = model(**fields).last_hidden_state  # (B, T, H)
    return pool(hidden, fields["attention_mask"], pooling)


def in_batch_loss(first: torch.Tensor, second: torch.Tensor, scale: float = SIMILARITY_SCALE) -> torch.Tensor:
    """Cross-entropy of each first vector (B, H) against all second vectors (B, H), its own pair the right answer."""
    scores = scale * F.normalize(first, dim=-1) @ F.normalize(second, dim=-1).T  # (B, B)
    return F.cross_entropy(scores.float(), torch.arange(len(first), device=first.device))


def cosine_loss(first: torch.Tensor, second: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean squared error between each pair's cosine and its target in [0, 1]."""
    return F.mse_loss(F.cosine_similarity(first, second, dim=-1).float(), targets.float())


class EmbeddingTrainer(Trainer):
    """`Trainer` for a bi-encoder: the loss of `objective` on pooled vectors, and cosines as eval predictions.

    Args:
        objective: "cosine", "in-batch" or "simcse" (see the module docstring).
        pooling: "mean" or "cls".
        label_range: (lowest, highest) training label, mapped to cosine targets 0 and 1 by the cosine objective.
    """

    def __init__(
        self, *args: Any, objective: str, pooling: str, label_range: tuple[float, float] | None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.objective: str = objective
        self.pooling: str = pooling
        self.label_range: tuple[float, float] | None = label_range

    def _targets(self, labels: torch.Tensor) -> torch.Tensor:
        assert self.label_range is not None, "the cosine objective, the one that needs targets, is given a label range"
        low, high = self.label_range
        return (labels - low) / (high - low) if high > low else torch.zeros_like(labels)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        first = embed_batch(model, inputs, "", self.pooling)
        if self.objective == "simcse":  # the same texts again, through another dropout mask
            second = embed_batch(model, inputs, "", self.pooling)
        else:
            second = embed_batch(model, inputs, PAIR_PREFIX, self.pooling)
        if self.objective == "cosine":
            loss = cosine_loss(first, second, self._targets(inputs["labels"]))
        else:
            loss = in_batch_loss(first, second)
        return (loss, {"cosine": F.cosine_similarity(first, second, dim=-1)}) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            first = embed_batch(model, inputs, "", self.pooling)
            second = embed_batch(model, inputs, PAIR_PREFIX, self.pooling)
            cosines = F.cosine_similarity(first, second, dim=-1).float()  # (B,)
        labels = inputs.get("labels")
        return None, cosines.detach(), None if labels is None else labels.detach()


# ------------------------------------------------------------------------------------- the sentence-transformers folder
def write_sentence_transformers_files(folder: str | Path, pooling: str, max_seq_length: int, dimension: int) -> None:
    """modules.json, sentence_bert_config.json, config_sentence_transformers.json and 1_Pooling/config.json beside
    a saved encoder, so that `sentence_transformers.SentenceTransformer(folder)` loads it with this pooling."""
    folder = Path(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_FOLDER, "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}, indent=2) + "\n", encoding="utf-8"
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"similarity_fn_name": "cosine", "prompts": {}, "default_prompt_name": None}, indent=2) + "\n",
        encoding="utf-8",
    )
    (folder / POOLING_FOLDER).mkdir(exist_ok=True)
    config = {
        "word_embedding_dimension": dimension,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }
    (folder / POOLING_FOLDER / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def saved_pooling(folder: str | Path) -> str | None:
    """The pooling an embedding folder was trained with ("mean" or "cls"), None for a folder without
    sentence-transformers' pooling config (a pretrained encoder). The config reads as sentence-transformers reads it:
    every mode it names is computed and the results concatenated, so a config naming more than mean or cls alone is
    refused."""
    path = Path(folder) / POOLING_FOLDER / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    mode = config.get("pooling_mode")  # sentence-transformers 6 writes "pooling_mode": "mean" (or a list of modes)
    if mode is None:  # earlier versions: one flag per mode; none set (or no mode at all) is sentence-transformers' mean
        mode = [name for key, name in _LEGACY_POOLING_MODES.items() if config.get(key)] or "mean"
    modes = [mode] if isinstance(mode, str) else list(mode)
    if modes in (["mean"], ["cls"]):
        return modes[0]
    raise ValueError(f"{path} asks for pooling {modes}; hf_bertscratch computes mean and cls pooling only.")


def saved_modules(folder: str | Path) -> list[str]:
    """The class names of an embedding folder's sentence-transformers modules (its modules.json), in order; none for
    a folder without them. Raises, naming them, for modules hf_bertscratch does not compute (`COMPUTED_MODULES`): a
    Dense projection after the pooling, say, whose vectors would otherwise come out silently unlike
    sentence-transformers'."""
    path = Path(folder) / "modules.json"
    if not path.is_file():
        return []
    names = [module.get("type", "").rsplit(".", 1)[-1] for module in json.loads(path.read_text(encoding="utf-8"))]
    others = [name for name in names if name not in COMPUTED_MODULES]
    if others:
        raise ValueError(
            f"{path} lists the sentence-transformers modules {names}; hf_bertscratch computes {list(COMPUTED_MODULES)} "
            f"only, not {others}: embed this folder with sentence-transformers."
        )
    return names


def saved_normalize(folder: str | Path) -> bool:
    """Whether an embedding folder's sentence-transformers modules scale each vector to unit length after the
    pooling, as a Normalize module does (all-MiniLM-L6-v2's, for one); False for a folder without them. Raises for
    modules hf_bertscratch does not compute (`saved_modules`)."""
    return "Normalize" in saved_modules(folder)


def saved_max_seq_length(folder: str | Path) -> int | None:
    """The tokens an embedding folder's texts are cut to (its sentence_bert_config.json's `max_seq_length`, what it
    was trained on and where sentence-transformers cuts), None for a folder without one (a pretrained encoder)."""
    path = Path(folder) / "sentence_bert_config.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("max_seq_length")


__all__ = [
    "COMPUTED_MODULES",
    "EMBEDDING_OBJECTIVES",
    "EmbeddingTrainer",
    "PairCollator",
    "cosine_loss",
    "embed_batch",
    "in_batch_loss",
    "objective_for_labels",
    "saved_max_seq_length",
    "saved_modules",
    "saved_normalize",
    "saved_pooling",
    "write_sentence_transformers_files",
]
