"""Masked-language-model training in JAX: the loss, AdamW as the torch Trainer sets it up, and a jitted step.

The loss is the torch model's: cross-entropy averaged over the positions whose label is not -100. As the torch side
decodes only those positions in training (`config.sparse_prediction`), `mlm_loss` can decode a fixed number of
gathered positions instead of all B x T: jit needs static shapes, so the count is rounded up to a bucket
(`num_predictions_for`) and the filler slots are ignored by the loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .modeling_flax_bertscratch import FlaxBertScratchForMaskedLM

Batch = Mapping[str, jax.Array]
# Parameters AdamW does not decay, as transformers' Trainer (`get_decay_parameter_names`): biases and LayerNorm
# weights (`scale` in NNX). Embedding tables are decayed there too.
NO_DECAY = ("bias", "scale")


def masked_lm_loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross-entropy of (..., V) logits over the positions whose (...) label is not -100 (0 if there is none)."""
    scored = labels != -100
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(log_probs, jnp.where(scored, labels, 0)[..., None], axis=-1)[..., 0]
    return -jnp.sum(jnp.where(scored, picked, 0.0)) / jnp.maximum(scored.sum(), 1)


def num_predictions_for(labels: np.ndarray, multiple: int = 64) -> int:
    """The number of labelled positions of a host-side (B, T) batch, rounded up to `multiple`: the static size of
    the sparse decode, so batches of similar masking share one compiled step."""
    count = int((np.asarray(labels) != -100).sum())
    return min(max(multiple, math.ceil(count / multiple) * multiple), int(np.asarray(labels).size))


def mlm_loss(model: FlaxBertScratchForMaskedLM, batch: Batch, num_predictions: int | None = None) -> jax.Array:
    """MLM loss of a collated batch (`input_ids`, `labels`, optional `attention_mask`, `token_type_ids`).

    With `num_predictions` (at least the batch's count of labelled positions, e.g. `num_predictions_for`), only that
    many gathered positions are decoded; the loss and its gradient are those of the dense decode.
    """
    hidden = model.bert(batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")).last_hidden_state
    labels = jnp.asarray(batch["labels"])
    if num_predictions is None:
        return masked_lm_loss(model.decode(hidden), labels)
    flat_labels = labels.reshape(-1)
    scored = flat_labels != -100
    (positions,) = jnp.nonzero(scored, size=num_predictions, fill_value=0)  # (P,) labelled positions, then filler
    filled = jnp.arange(num_predictions) < scored.sum()
    logits = model.decode(hidden.reshape(-1, hidden.shape[-1])[positions])  # (P, V)
    return masked_lm_loss(logits, jnp.where(filled, flat_labels[positions], -100))


def mlm_loss_and_grads(
    model: FlaxBertScratchForMaskedLM, batch: Batch, num_predictions: int | None = None
) -> tuple[jax.Array, nnx.State]:
    """The MLM loss and its gradient for every parameter (an `nnx.State` shaped like `nnx.state(model, nnx.Param)`)."""
    return nnx.value_and_grad(mlm_loss)(model, batch, num_predictions)


def _decay_mask(params: Any) -> Any:
    def decays(path: tuple, _: Any) -> bool:
        names = [getattr(key, "key", getattr(key, "name", None)) for key in path]
        return not any(name in NO_DECAY for name in names)

    return jax.tree_util.tree_map_with_path(decays, params)


def make_optimizer(
    model: nnx.Module,
    learning_rate: float | optax.Schedule,
    *,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = 1.0,
) -> nnx.Optimizer:
    """AdamW as the torch Trainer runs it: global gradient-norm clipping (`max_grad_norm`, None for none), then
    decoupled weight decay on every parameter except biases and LayerNorm weights."""
    adamw = optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=_decay_mask)
    tx = adamw if max_grad_norm is None else optax.chain(optax.clip_by_global_norm(max_grad_norm), adamw)
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


def make_mlm_train_step() -> Callable[..., jax.Array]:
    """A jitted `step(model, optimizer, batch, num_predictions=None) -> loss` that updates model and optimizer in
    place; `num_predictions` is static (one compilation per value, see `num_predictions_for`)."""

    @nnx.jit(static_argnames=("num_predictions",))
    def step(
        model: FlaxBertScratchForMaskedLM, optimizer: nnx.Optimizer, batch: Batch, num_predictions: int | None = None
    ) -> jax.Array:
        loss, grads = nnx.value_and_grad(mlm_loss)(model, batch, num_predictions)
        optimizer.update(model, grads)
        return loss

    return step


__all__ = [
    "NO_DECAY",
    "make_mlm_train_step",
    "make_optimizer",
    "masked_lm_loss",
    "mlm_loss",
    "mlm_loss_and_grads",
    "num_predictions_for",
]
