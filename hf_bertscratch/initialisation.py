"""Where a model's weights start when it goes from one training stage to the next: a fine-tuned checkpoint's head
replaced for a new task, and segment embeddings that pretraining never trained.

Used by pretraining (the saved folder) and fine-tuning (a checkpoint handed to another task).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel


def reinitialise_head(model: PreTrainedModel) -> None:
    """Give every module outside the encoder (`model.base_model_prefix`) fresh initial weights: the task head."""
    prefix = model.base_model_prefix
    for name, module in model.named_modules():
        if name and not name.startswith(prefix) and not list(module.children()):
            for parameter in module.parameters(recurse=False):
                parameter._is_hf_initialized = False  # transformers' init skips weights it loaded
            model._init_weights(module)


def start_segments_as_first(model: PreTrainedModel) -> None:
    """Copy the segment (token type) 0 embedding into every other type's row: the start for a checkpoint whose
    pretraining never trained type 1 (masked-LM alone), where that row is still its random init."""
    segments = getattr(getattr(model.base_model, "embeddings", None), "token_type_embeddings", None)
    if segments is None:
        raise ValueError(f"{type(model).__name__} has no segment (token type) embeddings to start from type 0's.")
    with torch.no_grad():
        segments.weight[1:] = segments.weight[0]


__all__ = ["reinitialise_head", "start_segments_as_first"]
