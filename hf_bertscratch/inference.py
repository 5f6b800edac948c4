"""Ask a trained model something: fill in masks, classify a text, embed a sentence, tag its entities, answer a
question about it, show its attention.

Thin wrappers over transformers pipelines (the same code path users get from `pipeline(...)`), with the checks a
command line needs: the model must have the head the task reads (a masked-LM checkpoint has no trained classifier,
and transformers would silently attach a random one), and the text must be usable (a [MASK] for fill-mask).
Each function takes a model folder / Hub id or an already built pipeline, so a notebook can reuse one pipeline.
Each has a `*_many` form that runs a list of inputs through the pipeline `batch_size` at a time and yields the
results in input order; the one-text function is that form on a batch of one.
Question answering, which transformers 5 has no pipeline for, is `answer_question`: the windows and answer spans of
`hf_bertscratch.qa_windows` around batched forward passes, `batch_size` windows each as in the token-classification
pipeline. `attention_weights` runs a model for the attention maps
`hf_bertscratch.plotting.plot_attention` draws.

`backend="onnxruntime"` runs the same pipeline on a folder written by `bertscratch export` (see
`hf_bertscratch.onnx`): tokenization and post-processing are the pipeline's either way, only the forward
pass changes.

Fill-mask decodes the vocabulary at the mask tokens only (`BertScratchFillMaskPipeline`), where the model can be
asked for them (BertScratchForMaskedLM's `masked_positions`, an export with that input); its answers are those of
transformers' fill-mask pipeline.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForQuestionAnswering,
    FeatureExtractionPipeline,
    FillMaskPipeline,
    Pipeline,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TextClassificationPipeline,
    TokenClassificationPipeline,
    pipeline,
)
from transformers.utils import ModelOutput, enable_tf32

from hf_bertscratch_base.model_config import check_max_seq_length, classify_threshold

from .batching_bertscratch import selected_positions
from .convert import family_checkpoint, sentence_transformers_folder
from .model_reference import check_model_reference
from .qa_windows import postprocess_predictions, prepare_eval_features
from .similarity import POOLINGS
from .task_heads import FINE_TUNED_HEADS, TASK_HEADS, check_task_head
from .tokenization import check_tokenizer_fits, load_model_tokenizer

if TYPE_CHECKING:
    from .onnx.runtime import BertScratchOnnxRuntimeModel

logger = logging.getLogger(__name__)

BACKENDS = ("pytorch", "onnxruntime")
# The token-classification pipeline's aggregation strategies: "none" tags each piece, the others group pieces into
# entities (`tag_entities`).
AGGREGATION_STRATEGIES = ("none", "simple", "first", "average", "max")
# Inference dtypes by name: float32 everywhere; bfloat16 and float16 where the device runs them fast (a GPU); tf32:
# float32 weights whose matrix products run as TensorFloat-32 on a CUDA GPU that has it (Ampere and later).
DTYPES = {"float32": torch.float32, "tf32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@contextmanager
def quiet_loading_report() -> Iterator[None]:
    """Hold back transformers' LOAD REPORT table (warnings of `transformers.modeling_utils`) while a pretrained
    encoder is loaded under a new head: the weights it lists as missing or unexpected are the heads swapped.

    A filter rather than the logger's level: transformers checks a model's tensor-parallel plan only while that
    logger's level is WARNING or above, and logs every layer of a model without one ("The following layers were not
    sharded: ...", a thousand characters)."""
    reporter = logging.getLogger("transformers.modeling_utils")
    below_errors = _BelowErrors()
    reporter.addFilter(below_errors)
    try:
        yield
    finally:
        reporter.removeFilter(below_errors)


class _BelowErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def masked_positions(input_ids: torch.Tensor, mask_token_id: int) -> torch.Tensor:
    """(B, T) ids -> (B, K) positions of each row's mask tokens in text order, K the most masks in a row; a row
    with fewer masks repeats its first one (every row must have one)."""
    return selected_positions(input_ids == mask_token_id)[0]


def takes_masked_positions(model: nn.Module) -> bool:
    """Whether `model` can decode given positions only: an export with the `masked_positions` input, or a PyTorch
    model whose forward takes `masked_positions` (BertScratchForMaskedLM)."""
    from .onnx.common import MASKED_POSITIONS
    from .onnx.runtime import BertScratchOnnxRuntimeModel

    if isinstance(model, BertScratchOnnxRuntimeModel):
        return MASKED_POSITIONS in model.input_names
    return MASKED_POSITIONS in inspect.signature(model.forward).parameters


class BertScratchFillMaskPipeline(FillMaskPipeline):
    """transformers' fill-mask pipeline, with the vocabulary decoded at the mask tokens only.

    A model that takes `masked_positions` (`takes_masked_positions`) returns logits (B, K, V) at the K masks of each
    row, which go to their positions in a (B, T, V) tensor of zeros, so that transformers' `postprocess` (it reads
    logits[0, masked_index]) returns what it returns on the full logits: the zero rows are never read. Any other
    model runs as in transformers' pipeline.
    """

    # Without Pipeline._forward's **forward_parameters, as FillMaskPipeline's own: fill-mask has none.
    def _forward(self, model_inputs: dict[str, torch.Tensor]) -> ModelOutput:  # type: ignore[override]
        if not takes_masked_positions(self.model):
            return super()._forward(model_inputs)
        input_ids = model_inputs["input_ids"]  # (B, T)
        assert self.tokenizer is not None, "a fill-mask pipeline is always built with its tokenizer"
        positions = masked_positions(input_ids, self.tokenizer.mask_token_id)  # (B, K)
        outputs = self.model(**model_inputs, masked_positions=positions)
        logits = outputs["logits"]  # (B, K, V)
        grid = logits.new_zeros(*input_ids.shape, logits.shape[-1])  # (B, T, V)
        outputs["logits"] = grid.scatter_(1, positions[..., None].expand_as(logits), logits)
        outputs["input_ids"] = input_ids
        return outputs


class BertScratchFeatureExtractionPipeline(FeatureExtractionPipeline):
    """transformers' feature-extraction pipeline, whose result for each text holds that text's tokens alone.

    Run with `batch_size` > 1, transformers' own returns each text's states padded to the longest text of its batch,
    so a mean over them would count the padding; here the batch's attention mask travels with the outputs and each
    text's states are cut to its real tokens: (1, T_text, H), the same as the text alone gives.
    """

    def _forward(self, model_inputs: dict[str, torch.Tensor]) -> ModelOutput:  # type: ignore[override]
        outputs = self.model(**model_inputs)
        outputs["attention_mask"] = model_inputs["attention_mask"]  # (B, T), sliced per text with the states
        return outputs

    def postprocess(self, model_outputs: ModelOutput, return_tensors: bool = False) -> Any:  # type: ignore[override]
        real = model_outputs["attention_mask"][0].bool()  # (T,)
        states = model_outputs[0][:, real]  # (1, T_text, H)
        return states if return_tensors else states.tolist()


# Pipeline task -> the class `load_pipeline` builds: transformers' own, but for fill-mask and feature extraction.
PIPELINE_CLASSES: dict[str, type[Pipeline]] = {
    "fill-mask": BertScratchFillMaskPipeline,
    "text-classification": TextClassificationPipeline,
    "token-classification": TokenClassificationPipeline,
    "feature-extraction": BertScratchFeatureExtractionPipeline,
}


class _OnnxRuntimeModelCheck:
    """Put ahead of a pipeline class for `BertScratchOnnxRuntimeModel` (`onnx_pipeline_class`).

    transformers' text- and token-classification pipelines check the model's class name against the task's Auto
    mapping (`Pipeline.check_model_type`) and log an error, one ~3,000-character line listing every supported class,
    for any other. The wrapper is none of them: one class runs every exported head, and registering it with the Auto
    classes would take BertScratchConfig from the PyTorch heads. The check here is the wrapper's own: its task must
    be the pipeline's (`from_folder` checked the graph's outputs against that task).
    """

    # What the pipeline class it is put ahead of has, here with the ONNX wrapper.
    model: BertScratchOnnxRuntimeModel
    task: str

    def check_model_type(self, supported_models: list[str] | dict) -> None:
        if self.model.task != self.task:
            raise ValueError(f"The exported model runs {self.model.task!r}, not this pipeline's {self.task!r}.")


@functools.cache
def onnx_pipeline_class(task: str) -> type[Pipeline]:
    """The pipeline class of `task` (`PIPELINE_CLASSES`) made to take the ONNX wrapper."""
    base = PIPELINE_CLASSES[task]
    return type(f"OnnxRuntime{base.__name__}", (_OnnxRuntimeModelCheck, base), {"__module__": __name__})


def load_pipeline(
    task: str,
    model: str | Path,
    tokenizer: str | Path | None = None,
    device: str | int | None = None,
    backend: str = "pytorch",
    dtype: str = "float32",
) -> Pipeline:
    """Build the transformers pipeline for `task` ("fill-mask", "text-classification", "feature-extraction").

    Args:
        model: a model folder or Hub id; for backend "onnxruntime", a folder written by `bertscratch export`.
        tokenizer: tokenizer folder, vocab.txt or Hub id; defaults to the one saved with the model.
        device: "cpu", "cuda", "cuda:1", a GPU index, or None for the pipeline's default (onnxruntime: CPU only).
        backend: "pytorch" or "onnxruntime".
        dtype: the weights' and activations' type (`DTYPES`): float32, or on a GPU bfloat16/float16 for speed.
    """
    if task not in TASK_HEADS or task == "question-answering":
        pipelines = sorted(set(TASK_HEADS) - {"question-answering"})
        raise ValueError(
            f"No pipeline for task {task!r}: expected one of {pipelines} (question answering: "
            "hf_bertscratch.inference.answer_question)."
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not supported: expected one of {BACKENDS}.")
    torch_dtype = inference_dtype(dtype, backend)
    given, model = str(model), family_checkpoint(model)  # transformers' BERT converted on load
    check_task_head(model, task, shown=given)
    loaded = load_model_tokenizer(given, tokenizer)  # a converted folder holds its copy
    check_tokenizer_fits(loaded, AutoConfig.from_pretrained(model).vocab_size)
    if backend == "onnxruntime":
        return _onnx_pipeline(task, model, loaded, device)
    check_pytorch_weights(model)
    # dtype="auto" would load a checkpoint saved in half precision as is: the type is always chosen here.
    # transformers' overloads of pipeline() name each task literally and take only its own tokenizer and model classes.
    return pipeline(  # type: ignore[call-overload]
        task,
        model=model,
        tokenizer=loaded,
        device=torch_device(device),
        dtype=torch_dtype,
        pipeline_class=PIPELINE_CLASSES[task],
    )


# The commands that run an exported folder (`--backend onnxruntime`); `answer` and `attention` need PyTorch weights.
ONNX_COMMANDS = ("fill-mask", "classify", "tag", "embed", "similarity")


def check_pytorch_weights(model: str | Path) -> None:
    """Raise if the folder `model` holds an ONNX export and no PyTorch weights, saying what runs it (transformers'
    own error names weight files only)."""
    exported = Path(model) / "model.onnx"
    weights = [*Path(model).glob("*.safetensors"), *Path(model).glob("pytorch_model*.bin")]
    if exported.is_file() and not weights:
        raise ValueError(
            f"{model} holds an ONNX export ({exported.name}) and no PyTorch weights: run it with --backend "
            f"onnxruntime ({', '.join(ONNX_COMMANDS)}; in Python: backend='onnxruntime'), or pass the model folder "
            "it was exported from."
        )


def torch_device(device: str | int | torch.device | None) -> str | int | torch.device | None:
    """`device` as pipelines and `Module.to` take it, a GPU index given as text (`--device 0`) made an int; raises
    naming it where torch cannot run (a name torch does not know, a CUDA device on a machine without one)."""
    given = device
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    if device is None or (isinstance(device, int) and device < 0):  # a pipeline's -1 is the CPU
        return device
    try:
        kind = torch.device("cuda", device).type if isinstance(device, int) else torch.device(device).type
    except RuntimeError as error:
        raise ValueError(
            f"device={given!r} is not a device torch knows: expected cpu, cuda, cuda:N or a GPU index N."
        ) from error
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={given!r} is a CUDA GPU and torch sees none here: pass --device cpu or leave it out.")
    return device


def inference_dtype(dtype: str, backend: str = "pytorch") -> torch.dtype:
    """The torch dtype named `dtype` (one of `DTYPES`); half precision and TF32 only for the pytorch backend.

    "tf32" switches this process's float32 matrix products to TensorFloat-32 with transformers' `enable_tf32`, as
    `TrainingArguments(tf32=True)` does for training, and needs a GPU.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported: expected one of {tuple(DTYPES)}.")
    if backend != "pytorch" and dtype != "float32":
        raise ValueError(f"dtype={dtype!r}: the {backend} backend runs the exported float32 (or int8) graph.")
    if dtype == "tf32":
        if not torch.cuda.is_available():
            raise ValueError("dtype='tf32' is a CUDA GPU's matrix-product mode and torch sees no CUDA device here.")
        enable_tf32(True)
    return DTYPES[dtype]


def _onnx_pipeline(task: str, model: str, tokenizer: PreTrainedTokenizerBase, device: str | int | None) -> Pipeline:
    """The pipeline for `task` over the exported folder `model`, run by ONNX Runtime on the CPU."""
    from .onnx.runtime import BertScratchOnnxRuntimeModel

    if device not in (None, "cpu", -1):
        raise ValueError(
            f"device={device!r}: the onnxruntime backend runs on the CPU only (pass --device cpu or none)."
        )
    if not Path(model).is_dir():
        raise FileNotFoundError(
            f"Model {model!r}: the onnxruntime backend reads a local folder written by `bertscratch export`."
        )
    return pipeline(  # type: ignore[call-overload]  # as in load_pipeline
        task,
        model=BertScratchOnnxRuntimeModel.from_folder(model, task),
        tokenizer=tokenizer,
        pipeline_class=onnx_pipeline_class(task),
    )


def as_pipeline(task: str, model: str | Path | Pipeline, **kwargs: Any) -> Pipeline:  # kwargs: load_pipeline's
    """`model` itself when it is a built pipeline, else the pipeline `load_pipeline` builds for `task` from it."""
    return model if isinstance(model, Pipeline) else load_pipeline(task, model, **kwargs)


# The key under which a transformers tokenizer records that it warned about a text longer than model_max_length.
TOO_LONG_WARNING = "sequence-length-is-longer-than-the-specified-maximum"


def truncation_kwargs(model: PreTrainedModel) -> dict:
    """Tokenizer arguments that cut a long text to what the model's position embeddings cover (a tokenizer
    saved without `model_max_length` would otherwise let it through and fail inside the model)."""
    return {"truncation": True, "max_length": model.config.max_position_embeddings}


def check_batch_size(batch_size: int) -> None:
    """Raise unless `batch_size` (inputs per forward pass) is at least 1."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")


def _input_name(name: str, index: int, count: int) -> str:
    """How an error names input `index` (from 0) of `count`: `name` when it is the only one, else "Text 3 of 10"
    (the third text of a file, its third line or row)."""
    return name if count == 1 else f"{name} {index + 1} of {count}"


def _check_not_empty(values: Sequence[str], name: str, expected: str) -> None:
    """Raise naming the first of `values` that is empty or blank ("Text 3 of 10 is empty: expected ...")."""
    for index, value in enumerate(values):
        if not value.strip():
            raise ValueError(f"{_input_name(name, index, len(values))} is empty: expected {expected}.")


def _check_pairs(
    firsts: Sequence[str], seconds: Sequence[str] | None, names: tuple[str, str] = ("texts", "text_pairs")
) -> None:
    """Raise unless `seconds` (if given) has one for each of `firsts` (a second text for each text, a context for
    each question)."""
    if seconds is not None and len(seconds) != len(firsts):
        raise ValueError(f"{len(firsts)} {names[0]} and {len(seconds)} {names[1]}: expected one of each per input.")


def _streamed(values: Sequence[Any]) -> Iterator[Any]:
    """`values` as the generator by which a pipeline returns its results one at a time, as each batch is done (a
    list would be run to the end first)."""
    return (value for value in values)


def fill_mask(model: str | Path | Pipeline, text: str, top_k: int = 5, **load_kwargs: Any) -> list[list[dict]]:
    """The `top_k` most likely tokens for each mask token in `text`: `fill_mask_many` on a batch of one.

    The pipeline `load_pipeline` builds (`BertScratchFillMaskPipeline`) decodes the vocabulary at the mask tokens
    only; a pipeline passed in runs as it was built.

    Returns:
        One list per mask, in text order, of {"token_str", "score", "token", "sequence"} dicts, best first.
    """
    (results,) = fill_mask_many(model, [text], top_k, **load_kwargs)
    return results


def fill_mask_many(
    model: str | Path | Pipeline, texts: Sequence[str], top_k: int = 5, batch_size: int = 1, **load_kwargs: object
) -> Iterator[list[list[dict]]]:
    """`fill_mask` of each of `texts`, in order, `batch_size` texts per forward pass (padded to the longest of the
    batch); every text is checked before the model runs, and the results come as each batch is done."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}.")
    check_batch_size(batch_size)
    fill = as_pipeline("fill-mask", model, **load_kwargs)
    assert fill.tokenizer is not None, "a fill-mask pipeline is always built with its tokenizer"
    mask = fill.tokenizer.mask_token
    for index, text in enumerate(texts):
        if mask not in text:
            name = _input_name("Text", index, len(texts))
            raise ValueError(f"{name} {text!r} has no {mask} token: write the word to predict as {mask}.")
    _check_fits_positions(fill, texts)
    results = fill(_streamed(texts), top_k=top_k, batch_size=batch_size)
    # The pipeline un-nests a single mask's list.
    return (result if text.count(mask) > 1 else [result] for text, result in zip(texts, results, strict=True))


def _check_fits_positions(fill: Pipeline, texts: Sequence[str]) -> None:
    """Raise naming the first of `texts` with more tokens than the model has positions: fill-mask cannot cut a text
    (the cut could drop its masks), and the model would fail at an index past its position embeddings."""
    positions = getattr(getattr(fill.model, "config", None), "max_position_embeddings", None)
    assert fill.tokenizer is not None, "a fill-mask pipeline is always built with its tokenizer"
    if positions is None:
        return
    for index, count in enumerate(token_counts(fill.tokenizer, texts)):
        if count > positions:
            raise ValueError(
                f"{_input_name('Text', index, len(texts))} is {count} tokens long ([CLS] and [SEP] included), and "
                f"the model reads at most {positions}: shorten it around its {fill.tokenizer.mask_token}."
            )


def token_counts(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], chunk: int = 1024) -> Iterator[int]:
    """The number of tokens of each of `texts` ([CLS] and [SEP] included), tokenized `chunk` texts at a time so that
    the ids of a long file's texts are never all held at once."""
    for start in range(0, len(texts), chunk):
        yield from (len(ids) for ids in tokenizer(list(texts[start : start + chunk]), verbose=False)["input_ids"])


def classify(model: str | Path | Pipeline, text: str, text_pair: str | None = None, **load_kwargs: Any) -> list[dict]:
    """Score every label for `text` (and `text_pair`, for a sentence-pair task such as MRPC or RTE):
    `classify_many` on a batch of one.

    Returns:
        A classifier's [{"label", "score"}, ...], best first, scores summing to 1 (a multi-label classifier's: each
        label's own sigmoid, the text having those above its threshold: `multi_label_threshold`, `labels_above`); a
        regressor's (STS-B) [{"label": "score", "score": the predicted value}].
    """
    (results,) = classify_many(model, [text], None if text_pair is None else [text_pair], **load_kwargs)
    return results


def classify_many(
    model: str | Path | Pipeline,
    texts: Sequence[str],
    text_pairs: Sequence[str] | None = None,
    batch_size: int = 1,
    **load_kwargs: object,
) -> Iterator[list[dict]]:
    """`classify` of each of `texts` (with the same position of `text_pairs`, for a sentence-pair task), in order,
    `batch_size` inputs per forward pass; every input is checked before the model runs, and the results come as each
    batch is done."""
    check_batch_size(batch_size)
    _check_pairs(texts, text_pairs)
    _check_not_empty(texts, "Text", "something to classify")
    _check_not_empty(text_pairs or [], "Text pair", "something to classify")
    classifier = as_pipeline("text-classification", model, **load_kwargs)
    if text_pairs is None and getattr(classifier.model.config, "classifier_pooling", None) == "segments":
        raise ValueError(
            "This classifier reads a sentence pair (classifier_pooling segments: each text by its own mean), and a "
            "single text has no second one: give the second text (--text_pair), or a file's column of second texts "
            "(--text_pair_column)."
        )
    if text_pairs is None:
        inputs: Sequence[str | dict[str, str]] = texts
    else:
        inputs = [{"text": text, "text_pair": pair} for text, pair in zip(texts, text_pairs, strict=True)]
    # A fine-tuned single-text classifier cuts a long text itself, as fine-tuning cut it (say head+tail); the
    # tokenizer's cut would keep the head alone.
    cuts_itself = text_pairs is None and getattr(classifier.model.config, "long_text_max_length", None)
    if cuts_itself and classifier.tokenizer is not None:
        # The tokenizer would warn that a text longer than its model_max_length "will result in indexing errors":
        # not for this model, which cuts it. transformers warns once per tokenizer; mark it as warned.
        classifier.tokenizer.deprecation_warnings[TOO_LONG_WARNING] = True
    truncation = {} if cuts_itself else truncation_kwargs(classifier.model)
    results = classifier(_streamed(inputs), top_k=None, batch_size=batch_size, **truncation)
    if classifier.model.config.num_labels == 1:  # a regressor: one score, whatever its label was named
        return ([{"label": "score", "score": result[0]["score"]}] for result in results)
    return iter(results)


def multi_label_threshold(model: str | Path | Pipeline, threshold: float | None = None) -> dict[str, float] | None:
    """The threshold a multi-label classifier `model` (a folder, a Hub id or a built pipeline) gives each of its
    labels at (label -> threshold): `threshold` for every label where given (strictly between 0 and 1), else those
    fine-tuning recorded in its config (`multi_label_threshold`: one for every label, or one per label), else
    `MULTI_LABEL_THRESHOLD`; None for any other model, which refuses a `threshold` naming its problem_type
    (`model_config.classify_threshold`)."""
    config = model.model.config if isinstance(model, Pipeline) else AutoConfig.from_pretrained(str(model))
    return classify_threshold(config.name_or_path or str(model), config.to_dict(), threshold)


def labels_above(scores: Sequence[dict], threshold: float | Mapping[str, float]) -> list[str]:
    """The labels of a multi-label classifier's `classify` scores above `threshold` (one for every label, or label ->
    its own), in the scores' order (best first): the labels the text has. The model's own are
    `multi_label_threshold(model)`, those fine-tuning recorded, as `bertscratch classify` reads them:
    `labels_above(classify(model, text), multi_label_threshold(model))`."""
    return [
        score["label"]
        for score in scores
        if score["score"] > (threshold[score["label"]] if isinstance(threshold, Mapping) else threshold)
    ]


def check_encoder(model: str | Path) -> None:
    """Raise if `model` is a checkpoint fine-tuned for a task (a classifier, tagger, QA model): its last layer was
    trained for that head, not for sentence vectors. Pretrained encoders and embedding models pass."""
    architectures = AutoConfig.from_pretrained(str(model)).architectures or []
    heads = [name for name in architectures if name.endswith(FINE_TUNED_HEADS)]
    if heads:
        raise ValueError(
            f"Model {str(model)!r} is a {heads[0]} checkpoint, fine-tuned for a task: sentence vectors come from an "
            "embedding model (`bertscratch finetune --task_type embedding`) or a pretrained encoder."
        )


def embedding_pooling(model: str | Path | Pipeline, pooling: str = "auto") -> str:
    """`pooling`, or for "auto" the pooling an embedding model was trained with (its sentence-transformers
    `1_Pooling/config.json`, in its folder or Hub snapshot: `convert.sentence_transformers_folder`), else mean."""
    if pooling != "auto":
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not supported: expected one of {('auto', *POOLINGS)}.")
        return pooling
    from .embedding import saved_pooling

    folder = _sentence_transformers_folder(model.model.name_or_path if isinstance(model, Pipeline) else model)
    return (saved_pooling(folder) if folder else None) or "mean"


def embedding_normalizes(model: str | Path | Pipeline) -> bool:
    """Whether an embedding model's sentence-transformers modules (in its folder or Hub snapshot) scale its vectors to
    unit length (a Normalize module: `saved_normalize`), as `embed` then does too; raises for a model listing modules
    `embed` does not compute."""
    from .embedding import saved_normalize

    folder = _sentence_transformers_folder(model.model.name_or_path if isinstance(model, Pipeline) else model)
    return folder is not None and saved_normalize(folder)


def embedding_truncation(extractor: Pipeline) -> dict:
    """Tokenizer arguments that cut a text where an embedding model was trained to read (its
    sentence_bert_config.json's max_seq_length, in its folder or Hub snapshot, where sentence-transformers cuts it
    too), else at the model's positions (`truncation_kwargs`)."""
    from .embedding import saved_max_seq_length

    kwargs = truncation_kwargs(extractor.model)
    folder = _sentence_transformers_folder(extractor.model.name_or_path)
    trained = saved_max_seq_length(folder) if folder else None
    if trained:
        kwargs["max_length"] = min(trained, kwargs["max_length"])
    return kwargs


def _sentence_transformers_folder(model: str | Path | None) -> Path | None:
    """Where an embedding model's sentence-transformers files are read from, folder or Hub id
    (`convert.sentence_transformers_folder`); None for no model name (a pipeline built from a model in memory)."""
    return sentence_transformers_folder(model) if model else None


def embed(model: str | Path | Pipeline, text: str, pooling: str = "auto", **load_kwargs: Any) -> np.ndarray:
    """A sentence vector of shape (H,): the mean of the encoder's last hidden states over all T tokens
    ([CLS] and [SEP] included, padding left out), or the [CLS] state; "auto" pools as an embedding folder was trained
    to (`embedding_pooling`), else by the mean; scaled to unit length where the folder's sentence-transformers modules
    end by doing so (`embedding_normalizes`), as sentence-transformers gives it. Text beyond an embedding folder's max_seq_length tokens (the model's
    max_position_embeddings for another encoder) is cut off, as sentence-transformers cuts it
    (`embedding_truncation`). A checkpoint fine-tuned for a task is refused (`check_encoder`). `embed_many` on a
    batch of one."""
    (vector,) = embed_many(model, [text], pooling, **load_kwargs)
    return vector


def embed_many(
    model: str | Path | Pipeline,
    texts: Sequence[str],
    pooling: str = "auto",
    batch_size: int = 1,
    **load_kwargs: object,
) -> Iterator[np.ndarray]:
    """`embed` of each of `texts`, in order, `batch_size` texts per forward pass; every text is checked before the
    model runs, and the vectors come as each batch is done. A pipeline passed in must leave each text's states
    unpadded, as `load_pipeline`'s does (`BertScratchFeatureExtractionPipeline`), for batch_size > 1."""
    check_batch_size(batch_size)
    _check_not_empty(texts, "Text", "a sentence to embed")
    if not isinstance(model, Pipeline) and load_kwargs.get("backend", "pytorch") == "pytorch":
        check_encoder(check_model_reference(model))  # before the settings: a mistyped folder asks no Hub for them
    pooling = embedding_pooling(model, pooling)
    normalize = embedding_normalizes(model)
    extractor = as_pipeline("feature-extraction", model, **load_kwargs)
    outputs = extractor(
        _streamed(texts), return_tensors=True, tokenize_kwargs=embedding_truncation(extractor), batch_size=batch_size
    )
    return (_pooled(states[0].float(), pooling, normalize) for states in outputs)


def _pooled(hidden: torch.Tensor, pooling: str, normalize: bool = False) -> np.ndarray:
    """(T, H) states of one text -> its (H,) vector: their mean, or the [CLS] state; of unit length if `normalize`
    (sentence-transformers' Normalize: a zero vector stays zero)."""
    vector = hidden.mean(dim=0) if pooling == "mean" else hidden[0]
    return (torch.nn.functional.normalize(vector, dim=-1) if normalize else vector).numpy()


def similarity(
    model: str | Path | Pipeline, text: str, text_pair: str, pooling: str = "auto", **load_kwargs: Any
) -> float:
    """The cosine similarity of the two texts' `embed` vectors (one model load for both): `similarity_many` on a
    batch of one."""
    (score,) = similarity_many(model, [text], [text_pair], pooling, **load_kwargs)
    return score


def similarity_many(
    model: str | Path | Pipeline,
    texts: Sequence[str],
    text_pairs: Sequence[str],
    pooling: str = "auto",
    batch_size: int = 1,
    **load_kwargs: Any,
) -> Iterator[float]:
    """The cosine similarity of each of `texts` with the same position of `text_pairs`, in order; each pair's two
    texts are embedded side by side, `batch_size` pairs (2 x `batch_size` texts) per forward pass, as a pair is one
    input of `classify_many`. Every input is checked before the model loads."""
    check_batch_size(batch_size)
    _check_pairs(texts, text_pairs)
    _check_not_empty(texts, "Text", "a sentence to embed")
    _check_not_empty(text_pairs, "Text pair", "a sentence to embed")
    pooling = embedding_pooling(model, pooling)
    embedding_normalizes(model)  # refuses modules `embed` does not compute before the model loads
    if not isinstance(model, Pipeline):
        backend = load_kwargs.get("backend", "pytorch")
        if backend == "pytorch":
            check_encoder(check_model_reference(model))
        model = load_pipeline("feature-extraction", model, **load_kwargs)
    side_by_side = list(chain.from_iterable(zip(texts, text_pairs, strict=True)))  # text 0, pair 0, text 1, ...
    vectors = embed_many(model, side_by_side, pooling, 2 * batch_size)
    return (_cosine(first, second) for first, second in zip(vectors, vectors))  # the same iterator: in twos


def _cosine(first: np.ndarray, second: np.ndarray) -> float:
    norms = float(np.linalg.norm(first) * np.linalg.norm(second))
    return float(first @ second / norms) if norms > 0 else 0.0


def _cover_whole_text(tagger: Pipeline, texts: Sequence[str], aggregation_strategy: str) -> dict[str, int]:
    """Pipeline arguments that tag texts longer than the model's positions in overlapping windows.

    The pipeline cuts input at the tokenizer's model_max_length, which a tokenizer saved without one sets to ~1e30
    (so a long text would overrun the position embeddings); capping it at the model's positions and giving a stride
    tags the whole text, window by window, instead of failing. The pipeline refuses a stride without aggregation, so
    "none" tags only the first window, and says so in a warning.
    """
    positions = getattr(getattr(tagger.model, "config", None), "max_position_embeddings", None)
    if positions is None:
        return {}
    tokenizer = tagger.tokenizer
    assert tokenizer is not None, "a token-classification pipeline is always built with its tokenizer"
    tokenizer.model_max_length = min(tokenizer.model_max_length, positions)
    if aggregation_strategy != "none":
        return {"stride": tokenizer.model_max_length // 4}
    longer = [count for count in token_counts(tokenizer, texts) if count > tokenizer.model_max_length]
    if longer:
        which = "the text's" if len(texts) == 1 else f"{len(longer)} of the {len(texts)} texts, the longest of"
        logger.warning(
            "aggregation_strategy 'none' tags the first %d of %s %d tokens only (transformers' pipeline takes no "
            "stride without grouping); simple, first, average or max tag the whole text in windows.",
            tokenizer.model_max_length,
            which,
            max(longer),
        )
    return {}


def tag_entities(
    model: str | Path | Pipeline,
    text: str,
    tokenizer: str | Path | None = None,
    aggregation_strategy: str = "simple",
    device: str | int | None = None,
    **load_kwargs: Any,
) -> list[dict]:
    """The named entities in `text`, through transformers' "token-classification" pipeline: `tag_entities_many` on
    a batch of one.

    The pipeline tags each word piece, then groups pieces into entities by `aggregation_strategy` ("simple": runs
    of pieces with the same entity type, a B- tag starting a new one; "first", "average", "max": one tag per whole
    word, from its first piece or from its pieces' averaged or best scores; "none": no grouping, one dict per
    piece). "O" pieces are left out. A text longer than the model's positions is tagged in overlapping windows.

    Args:
        model: a model folder or Hub id of a *ForTokenClassification checkpoint, or a built pipeline (reused as it
            is: `tokenizer`, `device` and `load_kwargs` are then not read).
        tokenizer: tokenizer folder, vocab.txt or Hub id; defaults to the one saved with the model.
        load_kwargs: passed on to `load_pipeline` (backend="onnxruntime").

    Returns:
        One dict per entity, in text order: {"entity_group", "score", "word", "start", "end"}, where
        text[start:end] is the entity's text and word the tokenizer's rendering of its pieces (lower-cased by an
        uncased tokenizer). With "none", one dict per piece, with "entity" (the tag) and "index" (the piece's
        position) in place of "entity_group".
    """
    (entities,) = tag_entities_many(model, [text], tokenizer, aggregation_strategy, device, **load_kwargs)
    return entities


def tag_entities_many(
    model: str | Path | Pipeline,
    texts: Sequence[str],
    tokenizer: str | Path | None = None,
    aggregation_strategy: str = "simple",
    device: str | int | None = None,
    batch_size: int = 1,
    **load_kwargs: object,
) -> Iterator[list[dict]]:
    """`tag_entities` of each of `texts`, in order, `batch_size` windows per forward pass; every text is checked
    before the model runs, and the entities come as each batch is done."""
    check_batch_size(batch_size)
    _check_not_empty(texts, "Text", "a sentence to tag")
    if aggregation_strategy not in AGGREGATION_STRATEGIES:
        raise ValueError(
            f"aggregation_strategy={aggregation_strategy!r} is not supported: expected one of {AGGREGATION_STRATEGIES}."
        )
    tagger = as_pipeline("token-classification", model, tokenizer=tokenizer, device=device, **load_kwargs)
    found = tagger(
        _streamed(texts),
        aggregation_strategy=aggregation_strategy,
        batch_size=batch_size,
        **_cover_whole_text(tagger, texts, aggregation_strategy),
    )
    # The pipeline's scores are numpy float32, which json cannot write.
    return ([{**entity, "score": float(entity["score"])} for entity in entities] for entities in found)


def tag_words(
    model: str | Path | Pipeline, words: Sequence[str], tokenizer: str | Path | None = None, **load_kwargs: Any
) -> dict[str, list]:
    """The tag of each of `words` (a sentence already cut into words, as a CoNLL file holds it): `tag_words_many`
    on a batch of one."""
    (tagged,) = tag_words_many(model, [words], tokenizer, **load_kwargs)
    return tagged


def tag_words_many(
    model: str | Path | Pipeline,
    word_lists: Sequence[Sequence[str]],
    tokenizer: str | Path | None = None,
    device: str | int | None = None,
    batch_size: int = 1,
    **load_kwargs: object,
) -> Iterator[dict[str, list]]:
    """Tag each word of each of `word_lists` as token-classification fine-tuning trained and scored the model: the
    tag predicted at the word's first piece (`tokenization.align_labels_with_pieces`), `batch_size`
    lists per forward pass. Every list is checked before the model runs: each must be a non-empty list of
    non-empty words whose pieces, with [CLS] and [SEP], fit the model's positions (a list is tagged whole, as
    fine-tuning read it; a longer one is refused, naming it).

    Args:
        model: as `tag_entities` takes it (a model folder, a Hub id, or a built token-classification pipeline).

    Returns:
        Per list, in order: {"tags": one tag per word, in the words' order (None for a word the tokenizer turns
        into no piece), "entities": the B-/I- runs of tags grouped as the pipeline's "simple" strategy groups
        pieces, each {"entity_group", "score", "word", "start", "end"} with start and end word indices
        (words[start:end] is the entity) and score the mean of its words' probabilities}.
    """
    from .tokenization import align_labels_with_pieces, check_fast_tokenizer

    check_batch_size(batch_size)
    _check_word_lists(word_lists)
    tagger = as_pipeline("token-classification", model, tokenizer=tokenizer, device=device, **load_kwargs)
    pieces = tagger.tokenizer
    assert pieces is not None, "a token-classification pipeline is always built with its tokenizer"
    check_fast_tokenizer(pieces)
    limit = min(pieces.model_max_length, tagger.model.config.max_position_embeddings)
    encoded = pieces([list(words) for words in word_lists], is_split_into_words=True, return_token_type_ids=True)
    for index, ids in enumerate(encoded["input_ids"]):
        if len(ids) > limit:
            raise ValueError(
                f"{_input_name('Word list', index, len(word_lists))} is {len(ids)} tokens long ([CLS] and [SEP] "
                f"included) and the model reads {limit} at most: split it into shorter lists (a list of words is "
                "tagged whole, as fine-tuning read it)."
            )
    first_pieces = [
        align_labels_with_pieces(encoded.word_ids(index), list(range(len(words))))
        for index, words in enumerate(word_lists)
    ]
    return (
        _tagged_words(tagger, words, logits, word_at)
        for words, logits, word_at in zip(
            word_lists, _word_logits(tagger, encoded["input_ids"], batch_size), first_pieces
        )
    )


def _check_word_lists(word_lists: Sequence[Sequence[str]]) -> None:
    """Raise naming the first of `word_lists` that is empty, not a list of strings, or holds a blank word."""
    for index, words in enumerate(word_lists):
        name = _input_name("Word list", index, len(word_lists))
        if isinstance(words, str) or not all(isinstance(word, str) for word in words):
            raise ValueError(f"{name} is {words!r:.100}: expected a list of words (strings).")
        if not words or not all(word.strip() for word in words):
            raise ValueError(f"{name} {words!r:.100} holds no words or a blank one: expected words to tag.")


def _word_logits(tagger: Pipeline, input_ids: list[list[int]], batch_size: int) -> Iterator[np.ndarray]:
    """The (T, C) logits of each of `input_ids` (one token type, as a single sentence), `batch_size` per forward
    pass, each cut back to its own length."""
    pieces = tagger.tokenizer
    assert pieces is not None, "a token-classification pipeline is always built with its tokenizer"
    for start in range(0, len(input_ids), batch_size):
        rows = input_ids[start : start + batch_size]
        batch = pieces.pad({"input_ids": rows}, return_tensors="pt", return_attention_mask=True)
        inputs = {**batch, "token_type_ids": torch.zeros_like(batch["input_ids"])}
        with torch.no_grad():
            logits = tagger.model(**{name: value.to(tagger.device) for name, value in inputs.items()}).logits
        logits = logits.float().cpu().numpy()
        yield from (logits[row, : len(ids)] for row, ids in enumerate(rows))


def _tagged_words(tagger: Pipeline, words: Sequence[str], logits: np.ndarray, word_at: list[int]) -> dict[str, list]:
    """One list's tags, read at each word's first piece (`word_at`: per piece, the index of the word it starts, or
    -100), and its entities."""
    id2label = cast(dict[int, str], tagger.model.config.id2label)
    probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    tags: list[str | None] = [None] * len(words)
    scored = []
    for position, index in enumerate(word_at):
        if index < 0:
            continue
        label = int(probabilities[position].argmax())
        tags[index] = id2label[label]
        entity = {"entity": tags[index], "score": float(probabilities[position, label]), "word": words[index]}
        scored.append({**entity, "start": index, "end": index + 1})
    # As the pipeline's "simple" strategy: runs grouped with the O words among them, the O groups then left out.
    groups = tagger.group_entities(scored)  # type: ignore[attr-defined]  # a token-classification pipeline
    entities = [
        {**group, "score": float(group["score"]), "word": " ".join(words[group["start"] : group["end"]])}
        for group in groups
        if group["entity_group"] != "O"
    ]
    return {"tags": tags, "entities": entities}


def answer_question(
    model: str | Path | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    question: str,
    context: str,
    tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
    max_seq_length: int | None = None,
    doc_stride: int = 128,
    max_answer_length: int = 30,
    n_best_size: int = 20,
    device: str | torch.device | None = None,
    dtype: str = "float32",
    batch_size: int = 1,
    align_to_words: bool = True,
) -> dict:
    """Extract the answer to `question` from `context` with a question-answering model: `answer_question_many` on a
    list of one, its windows `batch_size` per forward pass (1, as transformers' pipelines run by default).

    Args:
        model: a model folder / Hub id with a *ForQuestionAnswering head, or an already loaded (model, tokenizer).
        tokenizer: tokenizer (folder, vocab.txt, Hub id or instance) for a model given by name; defaults to the one
            saved with the model.
        max_seq_length: tokens per window; None: 384 (SQuAD's usual), or the model's max_position_embeddings when
            smaller, with doc_stride lowered to a third of it when it would not fit.
        device: where to run the model; None keeps it where it is (the CPU for a model loaded here).
        dtype: for a model loaded here, its type (`DTYPES`; bfloat16/float16 for a GPU).
        align_to_words: widen the best span to whole words, as transformers 4's question-answering pipeline did by
            default: its first token's word from that word's first character, its last token's word to that word's
            last, the words being the tokenizer's (`token_to_word`): "hington" of "was ##h ##ington" is read as
            "Washington". A tokenizer that gives a token no word keeps that token's characters. A BERT tokenizer
            makes each Chinese character a word; a language it does not cut into words (Japanese kana, for one) can
            lose by the widening: False keeps the span's tokens, as evaluation (`postprocess_predictions`) does.

    Returns:
        {"answer", "start", "end", "score"}: `context[start:end] == answer`, score as in `postprocess_predictions`
        (a probability among the n-best spans; the widening leaves it as it is). "" with start = end = 0 and score 0.0
        if no span is valid.
    """
    (answer,) = answer_question_many(
        model,
        [question],
        [context],
        tokenizer=tokenizer,
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_answer_length=max_answer_length,
        n_best_size=n_best_size,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        align_to_words=align_to_words,
    )
    return answer


def answer_question_many(
    model: str | Path | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    questions: Sequence[str],
    contexts: Sequence[str],
    tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
    max_seq_length: int | None = None,
    doc_stride: int = 128,
    max_answer_length: int = 30,
    n_best_size: int = 20,
    device: str | torch.device | None = None,
    dtype: str = "float32",
    batch_size: int = 1,
    align_to_words: bool = True,
) -> Iterator[dict]:
    """`answer_question` of each question with the same position of `contexts`, in order, `batch_size` windows per
    forward pass (a context longer than a window gives several, as transformers' chunked pipelines count a batch);
    the windows of `batch_size` questions at a time are made and read together. Every input is checked before the
    model runs, and the answers come as each `batch_size` questions are done."""
    check_batch_size(batch_size)
    _check_pairs(questions, contexts, ("questions", "contexts"))
    _check_not_empty(questions, "Question", "a question to answer")
    _check_not_empty(contexts, "Context", "a text to find the answer in")
    qa_model, tokenizer = _load_qa_model(model, tokenizer, device, dtype)
    positions = getattr(qa_model.config, "max_position_embeddings", None) or 384
    if max_seq_length is None:
        max_seq_length = min(384, positions)
        doc_stride = min(doc_stride, max_seq_length // 3)
    check_max_seq_length(max_seq_length, positions)
    settings = {
        "max_seq_length": max_seq_length,
        "doc_stride": doc_stride,
        "n_best_size": n_best_size,
        "max_answer_length": max_answer_length,
    }
    batches = (
        _answer_batch(
            qa_model,
            tokenizer,
            questions[at : at + batch_size],
            contexts[at : at + batch_size],
            batch_size,
            align_to_words,
            **settings,
        )
        for at in range(0, len(questions), batch_size)
    )
    return chain.from_iterable(batches)


def _answer_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    contexts: Sequence[str],
    batch_size: int,
    align_to_words: bool,
    max_seq_length: int,
    doc_stride: int,
    n_best_size: int,
    max_answer_length: int,
) -> list[dict]:
    """The answers to `questions` from `contexts`, their windows `batch_size` per forward pass."""
    ids = [str(index) for index in range(len(questions))]
    examples = {"id": ids, "question": list(questions), "context": list(contexts)}
    features = prepare_eval_features(examples, tokenizer, max_seq_length, doc_stride)
    start_logits, end_logits = _qa_logits(model, tokenizer, features, batch_size)
    predictions = postprocess_predictions(examples, features, start_logits, end_logits, n_best_size, max_answer_length)
    spans = [(predictions[index]["start_char"], predictions[index]["end_char"]) for index in ids]
    if align_to_words:
        spans = _whole_words(tokenizer, contexts, spans)
    return [
        {"answer": context[start:end], "start": start, "end": end, "score": predictions[index]["score"]}
        for index, context, (start, end) in zip(ids, contexts, spans)
    ]


def _whole_words(
    tokenizer: PreTrainedTokenizerBase, contexts: Sequence[str], spans: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Each (start, end) character span of its context widened to the tokenizer's whole words, by the rule of
    transformers 4's question-answering pipeline (`align_to_words`): from the first character of the word that holds
    the span's first character to the last of the word that holds its last. Where the tokenizer gives either no word,
    the span stays as it is (the pipeline then keeps the tokens' offsets); an empty span (no answer) stays empty.

    The words are those of each context tokenized alone: the tokenizer cuts a context into words before it splits it
    into windows, so they are the words of every window (a word cut by a window's edge is whole here)."""
    encoding = tokenizer(list(contexts), add_special_tokens=False, verbose=False)  # not truncated: every word
    widened = []
    for row, (start, end) in enumerate(spans):
        words = (encoding.char_to_word(row, start), encoding.char_to_word(row, end - 1)) if end > start else None
        if words is not None and None not in words:
            start, end = encoding.word_to_chars(row, words[0]).start, encoding.word_to_chars(row, words[1]).end
        widened.append((start, end))
    return widened


def _load_qa_model(
    model: str | Path | tuple[PreTrainedModel, PreTrainedTokenizerBase],
    tokenizer: str | Path | PreTrainedTokenizerBase | None,
    device: str | torch.device | None,
    dtype: str = "float32",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model in eval mode (on `device` if given, of `dtype` if loaded here) and its tokenizer."""
    heads = TASK_HEADS["question-answering"]
    if isinstance(model, tuple):
        if tokenizer is not None:
            raise ValueError("Pass the tokenizer either in the (model, tokenizer) pair or as tokenizer=, not both.")
        qa_model, tokenizer = model
        if not type(qa_model).__name__.endswith(heads):
            raise ValueError(f"Model is a {type(qa_model).__name__}; question answering needs a *{heads[0]} model.")
    else:
        name = family_checkpoint(model)  # transformers' BERT converted on load
        check_task_head(name, "question-answering", shown=str(model))
        check_pytorch_weights(name)
        # dtype="auto" would keep a half-precision checkpoint as is: the type is always chosen here.
        qa_model = AutoModelForQuestionAnswering.from_pretrained(name, dtype=inference_dtype(dtype))
        if not isinstance(tokenizer, PreTrainedTokenizerBase):
            tokenizer = load_model_tokenizer(str(model), tokenizer)  # as given, not `name`
        check_tokenizer_fits(tokenizer, qa_model.config.vocab_size)
    target = torch_device(device)
    if target is not None:
        # PreTrainedModel.to is functools.wraps(nn.Module.to), which typeshed types as unbound: self comes first.
        qa_model = qa_model.to(target)  # type: ignore[arg-type]
    return qa_model.eval(), tokenizer


def _qa_logits(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, features: dict[str, list], batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits, each (F, T) with T the longest feature's length, `batch_size` features per forward
    pass, each batch right-padded to its longest feature (past a feature's own tokens a row holds zeros, which
    `postprocess_predictions` does not read)."""
    names = ("input_ids", "token_type_ids", "attention_mask")
    count, width = len(features["input_ids"]), max(map(len, features["input_ids"]))
    start_logits, end_logits = np.zeros((count, width), np.float32), np.zeros((count, width), np.float32)
    for at in range(0, count, batch_size):
        inputs = {name: features[name][at : at + batch_size] for name in names if name in features}
        # Right padding keeps token t of each feature at index t, where its offset_mapping entry is.
        batch = tokenizer.pad(inputs, padding_side="right", return_tensors="pt").to(model.device)
        with torch.inference_mode():
            outputs = model(**batch)
        for logits, found in ((start_logits, outputs.start_logits), (end_logits, outputs.end_logits)):
            logits[at : at + batch_size, : found.shape[1]] = found.float().cpu().numpy()
    return start_logits, end_logits


@torch.no_grad()
def attention_weights(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, text: str
) -> tuple[list[str], torch.Tensor]:
    """Run `model` on `text` and return its tokens and the attention probabilities of every layer.

    Args:
        model: any encoder that returns `attentions` when called with `output_attentions=True`.
        tokenizer: the model's tokenizer.
        text: one sentence (or a pair separated by [SEP]).

    Returns:
        (tokens, weights): the T tokens including [CLS]/[SEP], and float32 weights of shape (L, nh, T, T),
        weights[l, h, i, j] being how much token i attends to token j in head h of layer l.
    """
    if not text or not text.strip():
        raise ValueError("text is empty: expected a sentence to draw attention for.")
    was_training = model.training
    model.eval()  # attention dropout would make the map random
    try:
        device = next(model.parameters()).device
        encoding = tokenizer(text, return_tensors="pt", **truncation_kwargs(model)).to(device)
        outputs = model(**encoding, output_attentions=True, return_dict=True)
    finally:
        model.train(was_training)
    if not outputs.attentions:
        raise ValueError(f"{type(model).__name__} returned no attentions: it does not support output_attentions.")
    weights = torch.stack([layer[0] for layer in outputs.attentions]).float().cpu()  # (L, nh, T, T)
    tokens = cast("list[str]", tokenizer.convert_ids_to_tokens(encoding["input_ids"][0].tolist()))  # ids: a list
    return tokens, weights


__all__ = [
    "AGGREGATION_STRATEGIES",
    "PIPELINE_CLASSES",
    "POOLINGS",
    "BertScratchFeatureExtractionPipeline",
    "BertScratchFillMaskPipeline",
    "answer_question",
    "answer_question_many",
    "attention_weights",
    "check_encoder",
    "check_model_reference",
    "check_pytorch_weights",
    "check_batch_size",
    "classify",
    "classify_many",
    "embed",
    "embed_many",
    "embedding_normalizes",
    "embedding_pooling",
    "embedding_truncation",
    "fill_mask",
    "fill_mask_many",
    "load_pipeline",
    "masked_positions",
    "onnx_pipeline_class",
    "similarity",
    "similarity_many",
    "tag_entities",
    "tag_entities_many",
    "takes_masked_positions",
    "torch_device",
    "truncation_kwargs",
]
