"""What every part of the ONNX layer shares: the file and input names, the tasks an export serves (`OnnxTask`),
the export tolerance, and the optional packages it needs (`require`)."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType

import torch
from transformers import PretrainedConfig
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from hf_bertscratch_base.extras import install_command

from ..task_heads import TASK_HEADS

logger = logging.getLogger(__name__)


ONNX_FILE = "model.onnx"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
MASKED_POSITIONS = "masked_positions"  # the fourth input of a fill-mask export with `masked_positions=True`
QUANTIZATIONS = ("dynamic",)
# Tolerance of the check run after every export (and of the tests): fp32 ONNX Runtime against PyTorch.
ATOL = 1e-4
# Tolerances of an int8 export against PyTorch (`check_quantized_export` says why these values).
INT8_RTOL = 0.1  # largest |ONNX Runtime - PyTorch| of an output, as a fraction of that output's largest |value|
# Least fraction of top-1 predictions (of `OnnxTask.decisions`) an int8 model must share with PyTorch in the tests, on
# trained models; the export's check logs its random batch's agreement without asking for it.
INT8_AGREEMENT = 0.9


@dataclass(frozen=True)
class OnnxTask:
    """One exportable head: the Auto class that loads it, its outputs in order, and what reads them."""

    auto_class: str
    outputs: tuple[str, ...]
    output_class: type[ModelOutput]
    optimum_class: str  # the Optimum class that loads the exported folder
    per_sequence: tuple[str, ...] = ()  # outputs with one row per sequence (B, ...), not per token (B, T, ...)
    decisions: tuple[str, ...] = ()  # outputs whose top-1 over the last axis is the prediction (a class, a token)


# Task names are Optimum's (and the pipelines'); the heads each reads are `TASK_HEADS`'.
ONNX_TASKS: dict[str, OnnxTask] = {
    "feature-extraction": OnnxTask(
        "AutoModel",
        ("last_hidden_state", "pooler_output"),
        BaseModelOutputWithPooling,
        "ORTModelForFeatureExtraction",
        per_sequence=("pooler_output",),
    ),
    "fill-mask": OnnxTask(
        "AutoModelForMaskedLM",
        ("logits",),
        MaskedLMOutput,
        "ORTModelForMaskedLM",
        decisions=("logits",),
    ),
    "text-classification": OnnxTask(
        "AutoModelForSequenceClassification",
        ("logits",),
        SequenceClassifierOutput,
        "ORTModelForSequenceClassification",
        per_sequence=("logits",),
        decisions=("logits",),
    ),
    "token-classification": OnnxTask(
        "AutoModelForTokenClassification",
        ("logits",),
        TokenClassifierOutput,
        "ORTModelForTokenClassification",
        decisions=("logits",),
    ),
    "question-answering": OnnxTask(
        "AutoModelForQuestionAnswering",
        ("start_logits", "end_logits"),
        QuestionAnsweringModelOutput,
        "ORTModelForQuestionAnswering",
    ),
}


def require(package: str) -> ModuleType:
    """Import `package` or raise ImportError naming it and the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as error:
        raise ImportError(
            f"The ONNX path needs the {package!r} package, which is not installed: {install_command('onnx')}."
        ) from error


def default_task(architectures: list[str] | None) -> str:
    """The task of the checkpoint's trained head (feature-extraction for a bare encoder or an unexported head)."""
    for task in ONNX_TASKS:
        for name in architectures or []:
            if TASK_HEADS[task] and name.endswith(TASK_HEADS[task]):
                return task
    return "feature-extraction"


def check_task(task: str) -> OnnxTask:
    if task not in ONNX_TASKS:
        raise ValueError(f"task={task!r} cannot be exported: expected one of {list(ONNX_TASKS)}.")
    return ONNX_TASKS[task]


def example_batch(
    config: PretrainedConfig, batch_size: int, seq_len: int, seed: int = 0, masks: int = 0
) -> dict[str, torch.Tensor]:
    """A right-padded (batch_size, seq_len) batch of random ids: row i has seq_len - i real tokens (at least 1).

    Token type ids switch to 1 halfway through each row's real tokens (when the config has two segments). With
    `masks` > 0 it also holds `masked_positions` (batch_size, masks): positions spread evenly over each row's real
    tokens, first to last (repeated in a row shorter than `masks`).
    """
    generator = torch.Generator().manual_seed(seed)
    lengths = (seq_len - torch.arange(batch_size)).clamp(min=1)  # (B,)
    positions = torch.arange(seq_len)[None]  # (1, T)
    attention_mask = (positions < lengths[:, None]).long()  # (B, T)
    low = min(5, config.vocab_size - 1)  # past the usual special tokens
    input_ids = torch.randint(low, config.vocab_size, (batch_size, seq_len), generator=generator)
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id or 0)
    second = (positions >= (lengths[:, None] + 1) // 2) & (attention_mask == 1)
    token_type_ids = (second & (config.type_vocab_size > 1)).long()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if masks > 0:
        batch[MASKED_POSITIONS] = torch.arange(masks)[None] * (lengths[:, None] - 1) // max(masks - 1, 1)  # (B, K)
    return batch


__all__ = [
    "ATOL",
    "INPUT_NAMES",
    "INT8_AGREEMENT",
    "INT8_RTOL",
    "MASKED_POSITIONS",
    "ONNX_FILE",
    "ONNX_TASKS",
    "OnnxTask",
    "QUANTIZATIONS",
    "check_task",
    "default_task",
    "example_batch",
    "require",
]
