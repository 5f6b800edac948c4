"""Sentence vectors and their cosine similarity, from any encoder of the family (or any transformers encoder).

`encode` batches texts through the bare encoder and pools each text's last hidden states (the mean over its real
tokens, or the [CLS] state); with `layers` it pools the output of each layer named (0 is the embeddings). What
`bertscratch embed` and `bertscratch similarity` print, what an embedding model (`--task_type embedding`) is trained
to make, and the zero-shot similarity baseline of a pretrained model (`pair_cosines`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .modeling_bertscratch import mean_pool

POOLINGS = ("mean", "cls")


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, H) states and their (B, T) mask -> (B, H) by `pooling` ("mean" over real tokens, or "cls")."""
    if pooling == "mean":
        return mean_pool(hidden_states, attention_mask)
    if pooling == "cls":
        return hidden_states[:, 0]
    raise ValueError(f"pooling={pooling!r} is not supported: expected one of {POOLINGS}.")


@torch.inference_mode()
def encode(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    pooling: str = "mean",
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
    max_length: int = 128,
) -> np.ndarray:
    """Pooled vectors of `texts`: (N, H) from the last layer, or (len(layers), N, H) with `layers` (hidden-state
    indices: 0 the embeddings' output, -1 the last layer).

    `model` is a bare encoder (`AutoModel`) or any head whose forward returns `hidden_states` when asked; it runs in
    eval mode (no dropout) and float32 results come back. Texts are cut to `max_length` tokens.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r} is not supported: expected one of {POOLINGS}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    chunks: list[np.ndarray] = []
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                list(texts[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            mask = batch["attention_mask"]
            if layers is None:
                outputs = model(**batch)
                hidden = getattr(outputs, "last_hidden_state", None)
                if hidden is None:
                    hidden = model(**batch, output_hidden_states=True).hidden_states[-1]
                chunks.append(pool(hidden, mask, pooling).float().cpu().numpy()[None])
            else:
                states = model(**batch, output_hidden_states=True).hidden_states  # layers + 1 of (B, T, H)
                chunks.append(np.stack([pool(states[i], mask, pooling).float().cpu().numpy() for i in layers]))
    finally:
        model.train(was_training)
    vectors = np.concatenate(chunks, axis=1) if chunks else np.zeros((1 if layers is None else len(layers), 0, 0))
    return vectors[0] if layers is None else vectors


def cosine(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (..., N, H) arrays -> (..., N); 0 where a vector is all zeros."""
    dot = (first * second).sum(axis=-1)
    norms = np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1)
    return np.divide(dot, norms, out=np.zeros_like(dot, dtype=np.float64), where=norms > 0)


def pair_cosines(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    firsts: Sequence[str],
    seconds: Sequence[str],
    pooling: str = "mean",
    layers: Sequence[int] | None = None,
    **encode_kwargs: int,  # encode's batch_size and max_length
) -> np.ndarray:
    """The cosine of each pair's two vectors, each text encoded alone: (N,), or (len(layers), N) with `layers`."""
    if len(firsts) != len(seconds):
        raise ValueError(f"Got {len(firsts)} first texts and {len(seconds)} second texts; expected pairs.")
    return cosine(
        encode(model, tokenizer, firsts, pooling, layers, **encode_kwargs),
        encode(model, tokenizer, seconds, pooling, layers, **encode_kwargs),
    )


__all__ = ["POOLINGS", "cosine", "encode", "pair_cosines", "pool"]
