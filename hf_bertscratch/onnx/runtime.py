"""An exported folder run by ONNX Runtime: its session (`onnx_session`, `run_session`), the check of an export
against PyTorch (`check_export`), and `BertScratchOnnxRuntimeModel`, an `InferenceSession` as a `PreTrainedModel` whose forward
returns the PyTorch head's `ModelOutput`, so that transformers pipelines run on it unchanged."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import AutoConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..batching_bertscratch import check_inputs, check_masked_positions, cut_long_texts
from ..configuration_bertscratch import BertScratchConfig
from .common import MASKED_POSITIONS, ONNX_FILE, ONNX_TASKS, check_task, example_batch, require

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

logger = logging.getLogger(__name__)


# -------------------------------------------------------------------------------------------- ONNX Runtime


def onnx_session(folder: str | Path, num_threads: int | None = None, spinning: bool | None = None) -> InferenceSession:
    """An ONNX Runtime CPU `InferenceSession` on `folder`/model.onnx, all graph optimisations on.

    num_threads: intra-op threads; None: ONNX Runtime's choice.
    spinning: whether idle intra-op threads busy-wait for work; None: ONNX Runtime's default (they do).
    """
    ort = require("onnxruntime")
    path = Path(folder) / ONNX_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(folder)!r} has no {ONNX_FILE}: export the model first (bertscratch export MODEL OUT) and pass OUT."
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    if spinning is not None:
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def graph_input_names(inference_session: InferenceSession) -> tuple[str, ...]:
    """The input names of an ONNX Runtime `InferenceSession`'s graph, in order."""
    return tuple(each.name for each in inference_session.get_inputs())


def run_session(
    inference_session: InferenceSession, inputs: Mapping[str, torch.Tensor | np.ndarray]
) -> dict[str, np.ndarray]:
    """Run an ONNX Runtime `InferenceSession` on the named inputs its graph takes (attention_mask defaults to ones,
    token_type_ids to zeros); every output by name."""
    wanted = graph_input_names(inference_session)
    feeds = {name: np.asarray(value, dtype=np.int64) for name, value in inputs.items() if name in wanted}
    if "input_ids" not in feeds:
        raise ValueError(f"ONNX inputs need input_ids; got {sorted(inputs)}.")
    feeds.setdefault("attention_mask", np.ones_like(feeds["input_ids"]))
    feeds.setdefault("token_type_ids", np.zeros_like(feeds["input_ids"]))
    if MASKED_POSITIONS in wanted and MASKED_POSITIONS not in feeds:
        raise ValueError(
            f"This export decodes given positions only: pass {MASKED_POSITIONS} (batch, masks), or export without "
            "--masked_positions for logits at every position."
        )
    names = [output.name for output in inference_session.get_outputs()]
    return dict(zip(names, inference_session.run(names, feeds)))


def compare_outputs(
    folder: Path, model: PreTrainedModel, task: str, names: tuple[str, ...], batch_size: int, seq_len: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(PyTorch, ONNX Runtime) values of every output on a right-padded `example_batch`, per-token outputs at real
    positions only; an export with `masked_positions` is given 3 positions per row."""
    inference_session = onnx_session(folder)
    masks = 3 if MASKED_POSITIONS in graph_input_names(inference_session) else 0
    seq_len = min(seq_len, model.config.max_position_embeddings)
    batch = example_batch(model.config, batch_size, seq_len, seed=1, masks=masks)
    onnx_outputs = run_session(inference_session, batch)
    with torch.no_grad():
        torch_outputs = model(**batch, return_dict=True)
    real = batch["attention_mask"].bool().numpy()
    pairs = {}
    for name in names:
        expected, actual = torch_outputs[name].numpy(), onnx_outputs[name]
        if name not in ONNX_TASKS[task].per_sequence and not masks:
            expected, actual = expected[real], actual[real]  # per-token outputs: real positions only
        pairs[name] = (expected, actual)
    return pairs


class BertScratchOnnxRuntimeModel(PreTrainedModel):
    """An exported folder run by ONNX Runtime behind the `PreTrainedModel` interface pipelines use.

    `forward(input_ids, attention_mask, token_type_ids)` returns the task's `ModelOutput` (the PyTorch head's output
    class) holding the ONNX outputs as CPU tensors; a fill-mask export with `masked_positions` also takes those
    (`input_names` says which the graph takes). It has no parameters: it always runs on the CPU in float32 (an int8
    export quantizes inside the graph).
    """

    config_class = BertScratchConfig
    config: BertScratchConfig

    def __init__(self, config: BertScratchConfig, inference_session: InferenceSession, task: str) -> None:
        super().__init__(config)
        self.inference_session = inference_session
        self.task = task
        self.input_names = graph_input_names(inference_session)
        self.post_init()

    @classmethod
    def from_folder(cls, folder: str | Path, task: str, num_threads: int | None = None) -> BertScratchOnnxRuntimeModel:
        """Load `folder` (written by `export_onnx`) for `task`; raises if its graph lacks the task's outputs."""
        spec = check_task(task)
        inference_session = onnx_session(folder, num_threads)
        found = [output.name for output in inference_session.get_outputs()]
        if found[:1] != list(spec.outputs[:1]):
            raise ValueError(
                f"{str(Path(folder) / ONNX_FILE)!r} has outputs {found}, but {task} reads {list(spec.outputs)}: "
                f"export it with --task {task}."
            )
        return cls(AutoConfig.from_pretrained(str(folder)), inference_session, task)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        **kwargs: object,
    ) -> ModelOutput:
        if masked_positions is not None and MASKED_POSITIONS not in self.input_names:
            raise ValueError(
                f"This export has no {MASKED_POSITIONS} input: export it with --masked_positions (fill-mask) to "
                "decode given positions only."
            )
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if self.task == "text-classification":  # a long text cut as the PyTorch head cuts it (graphs never cut)
            inputs = cut_long_texts(self.config, {**inputs, "position_ids": None, "inputs_embeds": None})
        ids, mask, types = (inputs[name] for name in ("input_ids", "attention_mask", "token_type_ids"))
        assert ids is not None, "forward's input_ids, cut or not"
        check_inputs(self.config, ids, mask, types)  # as the PyTorch head refuses them
        if masked_positions is not None:
            check_masked_positions(masked_positions, ids.shape[0], ids.shape[1])
        inputs[MASKED_POSITIONS] = masked_positions
        outputs = run_session(
            self.inference_session, {name: value for name, value in inputs.items() if value is not None}
        )
        return ONNX_TASKS[self.task].output_class(**{name: torch.from_numpy(value) for name, value in outputs.items()})


__all__ = [
    "BertScratchOnnxRuntimeModel",
    "compare_outputs",
    "graph_input_names",
    "onnx_session",
    "run_session",
]
