"""Where a model's weights start when it goes from one training stage to the next: a fine-tuned checkpoint's head
replaced for a new task, and segment embeddings that pretraining never trained.

Used by pretraining (the saved folder) and fine-tuning (a checkpoint handed to another task, and a head fitted to the
pretrained features before fine-tuning: `probe_head`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from torch import nn
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


@torch.no_grad()
def start_decoder_bias_at_unigram(
    model: PreTrainedModel, token_counts: np.ndarray, never_labels: Iterable[int]
) -> None:
    """Set a masked LM's decoder bias to the log of each token's add-one frequency (`token_counts`, (V,), with the
    ids in `never_labels`, the special tokens no collator masks, counted as 0): with the tied word embeddings near 0
    at init, the first predictions are then the unigram distribution, the plateau every run must first reach, and the
    loss starts at its entropy instead of ln V."""
    bias = model.get_output_embeddings().bias
    counts = torch.as_tensor(token_counts, dtype=torch.float64)
    if bias is None or counts.shape != bias.shape:
        shape = None if bias is None else tuple(bias.shape)
        raise ValueError(f"Token counts of shape {tuple(counts.shape)} do not fit the decoder bias of shape {shape}.")
    counts[list(never_labels)] = 0.0
    bias.copy_(torch.log((counts + 1.0) / (counts.sum() + counts.numel())).to(bias.dtype))


SEGMENT_EMBEDDING_SUFFIX = "embeddings.token_type_embeddings.weight"


def start_saved_segments_as_first(folder: str | Path) -> bool:
    """`start_segments_as_first` on a saved folder's weights (every `model*.safetensors` file that holds a segment
    table), rewritten in place: what a sharded (FSDP) model cannot do on its live parameters. Returns whether a table
    was found."""
    from safetensors.torch import load_file, save_file

    found = False
    for path in sorted(Path(folder).glob("model*.safetensors")):
        with safe_open(path, framework="pt") as handle:
            metadata, names = handle.metadata(), list(handle.keys())
        if not any(name.endswith(SEGMENT_EMBEDDING_SUFFIX) for name in names):
            continue
        weights = load_file(path)
        for name in names:
            if name.endswith(SEGMENT_EMBEDDING_SUFFIX):
                table = weights[name].clone()
                table[1:] = table[0]
                weights[name] = table
        save_file(weights, path, metadata=metadata)
        found = True
    return found


@torch.no_grad()
def head_inputs(model: PreTrainedModel, batches: Iterable[dict[str, torch.Tensor]]) -> tuple[np.ndarray, np.ndarray]:
    """What `model.classifier` reads for every example of `batches` (each with `labels`), in eval mode: (N, D)
    features and (N,) labels."""
    seen: list[torch.Tensor] = []
    hook = model.get_submodule("classifier").register_forward_pre_hook(
        lambda module, args: seen.append(args[0].detach().float())
    )
    was_training = model.training
    model.eval()
    labels = []
    try:
        device = next(model.parameters()).device
        for batch in batches:
            labels.append(batch.pop("labels").float())
            model(**{k: v.to(device) for k, v in batch.items()})
    finally:
        hook.remove()
        model.train(was_training)
    return torch.cat(seen).cpu().numpy(), torch.cat(labels).cpu().numpy()


def probe_head(model: PreTrainedModel, batches: Iterable[dict[str, torch.Tensor]], regression: bool) -> float:
    """The first stage of LP-FT (Kumar et al. 2022, "Fine-Tuning can Distort Pretrained Features"): fit the linear
    head `model.classifier` on the frozen encoder's features of the training examples, so that fine-tuning starts
    from the best head the pretrained features allow instead of a random one, whose large early gradients reshape
    those features first. Ridge regression for a score (its penalty chosen by cross-validation), multinomial
    logistic regression for classes.

    Returns the fitted head's score on the training features (R^2 for a score, accuracy for classes).
    """
    from sklearn.linear_model import LogisticRegression, RidgeCV

    classifier = model.classifier
    assert isinstance(classifier, nn.Linear), "the sequence heads that probe (BertScratch's) end in one nn.Linear"
    features, labels = head_inputs(model, batches)
    weight = classifier.weight
    if regression:
        fit = RidgeCV(alphas=np.logspace(-3, 3, 7)).fit(features, labels)
        coef, intercept = fit.coef_.reshape(1, -1), np.atleast_1d(fit.intercept_)
        score = fit.score(features, labels)
    else:
        classes = labels.astype(np.int64)
        fit = LogisticRegression(max_iter=2000).fit(features, classes)
        coef, intercept = fit.coef_, fit.intercept_
        if coef.shape[0] == 1:  # binary: one logit difference, split evenly over the two outputs
            coef, intercept = np.concatenate([-coef, coef]) / 2, np.concatenate([-intercept, intercept]) / 2
        present = fit.classes_
        full_coef = np.zeros((weight.shape[0], coef.shape[1]))
        full_intercept = np.full(weight.shape[0], -1e2 if len(present) < weight.shape[0] else 0.0)
        full_coef[present], full_intercept[present] = coef, intercept  # a class absent from training stays unlikely
        coef, intercept = full_coef, full_intercept
        score = fit.score(features, classes)
    with torch.no_grad():
        classifier.weight.copy_(torch.as_tensor(coef, dtype=weight.dtype))
        classifier.bias.copy_(torch.as_tensor(intercept, dtype=weight.dtype))
    return float(score)


__all__ = [
    "head_inputs",
    "probe_head",
    "reinitialise_head",
    "start_saved_segments_as_first",
    "start_segments_as_first",
]
