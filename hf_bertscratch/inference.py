"""Ask a trained model something: fill in masks, classify a text, embed a sentence.

Thin wrappers over transformers pipelines (the same code path users get from `pipeline(...)`), with the checks a
command line needs: the model must have the head the task reads (a masked-LM checkpoint has no trained classifier,
and transformers would silently attach a random one), and the text must be usable (a [MASK] for fill-mask).
Each function takes a model folder / Hub id or an already built pipeline, so a notebook can reuse one pipeline.

`backend="onnxruntime"` runs the same pipeline on a folder written by `bertscratch export` (see
`hf_bertscratch.onnx_export`): tokenization and post-processing are the pipeline's either way, only the forward
pass changes.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, Pipeline, PreTrainedModel, pipeline

from .tokenization import load_tokenizer

logger = logging.getLogger(__name__)

# Task -> the architecture suffixes whose checkpoints hold a trained head for it. The feature extractor reads the bare
# encoder, which every checkpoint of the family holds. Every task but question-answering is a transformers pipeline;
# transformers 5 has none for question answering, which `hf_bertscratch.question_answering.answer_question` serves.
TASK_HEADS: dict[str, tuple[str, ...]] = {
    "fill-mask": ("ForMaskedLM", "ForPreTraining"),
    "text-classification": ("ForSequenceClassification",),
    "question-answering": ("ForQuestionAnswering",),
    "token-classification": ("ForTokenClassification",),
    "feature-extraction": (),
}
POOLINGS = ("mean", "cls")
BACKENDS = ("pytorch", "onnxruntime")

# A Hub id is "name" or "namespace/name" made of these characters; anything else can only be a local path.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def check_model_reference(model: str | Path) -> str:
    """Fail early, in one line, when `model` is neither an existing local folder nor shaped like a Hub id."""
    model = str(model)
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"Model {model!r} is a file: expected a model folder (with config.json).")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"Model folder {model!r} has no config.json: is it a saved model folder?")
        return str(path)
    if model.startswith((".", "/", "~")) or not _HUB_ID.match(model):
        raise FileNotFoundError(f"Model {model!r} does not exist: expected a model folder or a Hub id (user/name).")
    return model


def check_task_head(model: str, task: str) -> None:
    """Raise if the checkpoint's `architectures` show it has no trained head for `task`."""
    heads = TASK_HEADS[task]
    architectures = AutoConfig.from_pretrained(model).architectures or []
    if heads and architectures and not any(name.endswith(heads) for name in architectures):
        raise ValueError(
            f"Model {model!r} is a {', '.join(architectures)} checkpoint; {task} needs one of the heads "
            f"{', '.join('*' + head for head in heads)} (a pretrained checkpoint must first be fine-tuned for {task}: "
            "`bertscratch finetune`)."
        )


def load_pipeline(
    task: str,
    model: str | Path,
    tokenizer: str | Path | None = None,
    device: str | int | None = None,
    backend: str = "pytorch",
) -> Pipeline:
    """Build the transformers pipeline for `task` ("fill-mask", "text-classification", "feature-extraction").

    Args:
        model: a model folder or Hub id; for backend "onnxruntime", a folder written by `bertscratch export`.
        tokenizer: tokenizer folder, vocab.txt or Hub id; defaults to the one saved with the model.
        device: "cpu", "cuda", "cuda:1", a GPU index, or None for the pipeline's default (onnxruntime: CPU only).
        backend: "pytorch" or "onnxruntime".
    """
    if task not in TASK_HEADS or task == "question-answering":
        pipelines = sorted(set(TASK_HEADS) - {"question-answering"})
        raise ValueError(
            f"No pipeline for task {task!r}: expected one of {pipelines} (question answering: "
            "hf_bertscratch.question_answering.answer_question)."
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not supported: expected one of {BACKENDS}.")
    model = check_model_reference(model)
    check_task_head(model, task)
    tokenizer = load_tokenizer(str(tokenizer if tokenizer is not None else model))
    if backend == "onnxruntime":
        return _onnx_pipeline(task, model, tokenizer, device)
    # dtype="auto" would load a checkpoint saved in half precision as is; inference on CPU wants float32.
    return pipeline(task, model=model, tokenizer=tokenizer, device=device, dtype=torch.float32)


def _onnx_pipeline(task: str, model: str, tokenizer: object, device: str | int | None) -> Pipeline:
    """The pipeline for `task` over the exported folder `model`, run by ONNX Runtime on the CPU."""
    from .onnx_export import BertScratchOnnxRuntimeModel

    if device not in (None, "cpu", -1):
        raise ValueError(
            f"device={device!r}: the onnxruntime backend runs on the CPU only (pass --device cpu or none)."
        )
    if not Path(model).is_dir():
        raise FileNotFoundError(
            f"Model {model!r}: the onnxruntime backend reads a local folder written by `bertscratch export`."
        )
    return pipeline(task, model=BertScratchOnnxRuntimeModel.from_folder(model, task), tokenizer=tokenizer)


def _as_pipeline(task: str, model: str | Path | Pipeline, **kwargs: object) -> Pipeline:
    return model if isinstance(model, Pipeline) else load_pipeline(task, model, **kwargs)


def truncation_kwargs(model: PreTrainedModel) -> dict:
    """Tokenizer arguments that cut a long text to what the model's position embeddings cover (a tokenizer
    saved without `model_max_length` would otherwise let it through and fail inside the model)."""
    return {"truncation": True, "max_length": model.config.max_position_embeddings}


def fill_mask(model: str | Path | Pipeline, text: str, top_k: int = 5, **load_kwargs: object) -> list[list[dict]]:
    """The `top_k` most likely tokens for each mask token in `text`.

    Returns:
        One list per mask, in text order, of {"token_str", "score", "token", "sequence"} dicts, best first.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}.")
    fill = _as_pipeline("fill-mask", model, **load_kwargs)
    mask = fill.tokenizer.mask_token
    if mask not in text:
        raise ValueError(f"Text {text!r} has no {mask} token: write the word to predict as {mask}.")
    results = fill(text, top_k=top_k)
    return results if text.count(mask) > 1 else [results]  # the pipeline un-nests a single mask's list


def classify(
    model: str | Path | Pipeline, text: str, text_pair: str | None = None, **load_kwargs: object
) -> list[dict]:
    """Score every label for `text` (and `text_pair`, for a sentence-pair task such as MRPC or RTE).

    Returns:
        A classifier's [{"label", "score"}, ...], best first, scores summing to 1; a regressor's (STS-B)
        [{"label": "score", "score": the predicted value}].
    """
    for name, value in (("Text", text), ("Text pair", text_pair)):
        if value is not None and not value.strip():
            raise ValueError(f"{name} is empty: expected something to classify.")
    classifier = _as_pipeline("text-classification", model, **load_kwargs)
    inputs = text if text_pair is None else {"text": text, "text_pair": text_pair}
    results = classifier(inputs, top_k=None, **truncation_kwargs(classifier.model))
    return results[0] if results and isinstance(results[0], list) else results


def embed(model: str | Path | Pipeline, text: str, pooling: str = "mean", **load_kwargs: object) -> np.ndarray:
    """A sentence vector of shape (H,): the mean of the encoder's last hidden states over all T tokens
    ([CLS] and [SEP] included; one unpadded text has no padding to leave out), or the [CLS] state.
    Text beyond the model's max_position_embeddings tokens is cut off."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r} is not supported: expected one of {POOLINGS}.")
    if not text.strip():
        raise ValueError("Text is empty: expected a sentence to embed.")
    extractor = _as_pipeline("feature-extraction", model, **load_kwargs)
    outputs = extractor(text, return_tensors=True, tokenize_kwargs=truncation_kwargs(extractor.model))
    hidden = outputs[0].float()  # (T, H)
    vector = hidden.mean(dim=0) if pooling == "mean" else hidden[0]
    return vector.numpy()


__all__ = [
    "POOLINGS",
    "TASK_HEADS",
    "check_model_reference",
    "classify",
    "embed",
    "fill_mask",
    "load_pipeline",
    "truncation_kwargs",
]
