"""Which head of the family each use of a model reads, and the check that a checkpoint has it: a masked-LM
checkpoint has no trained classifier, and transformers would silently attach a random one. The pipelines
(`hf_bertscratch.inference`), the ONNX export (`hf_bertscratch.onnx`) and fine-tuning read it here.
"""

from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig

from .run_folder import GENERATOR_FOLDER

# Task -> the architecture suffixes whose checkpoints hold a trained head for it. The feature extractor reads the bare
# encoder, which every checkpoint of the family holds. Every task but question-answering is a transformers pipeline
# (transformers 5 has none for question answering); each is also an ONNX export's task (Optimum's names).
TASK_HEADS: dict[str, tuple[str, ...]] = {
    "fill-mask": ("ForMaskedLM", "ForPreTraining"),
    "text-classification": ("ForSequenceClassification",),
    "question-answering": ("ForQuestionAnswering",),
    "token-classification": ("ForTokenClassification",),
    "feature-extraction": (),
}
# Heads a checkpoint fine-tuned for a task has: its states are that task's, not sentence vectors.
FINE_TUNED_HEADS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def check_task_head(model: str, task: str, shown: str | None = None) -> None:
    """Raise if the checkpoint's `architectures` show it has no trained head for `task`; the error names `shown`,
    the model as the user gave it, where `model` is the folder it was converted into on load (None: `model`)."""
    shown = model if shown is None else shown
    heads = TASK_HEADS[task]
    architectures = AutoConfig.from_pretrained(model).architectures or []
    if heads and architectures and not any(name.endswith(heads) for name in architectures):
        where = (
            "a masked-LM folder, as `bertscratch pretrain` writes it"
            if task == "fill-mask"
            else f"a pretrained checkpoint must first be fine-tuned for {task}: `bertscratch finetune`"
        )
        if task == "fill-mask" and any(name.endswith("ForReplacedTokenDetection") for name in architectures):
            where = f"an ELECTRA run's masked LM is its generator, the folder's {GENERATOR_FOLDER}/"
            if Path(shown).is_dir():
                where += f": {str(Path(shown) / GENERATOR_FOLDER)!r}"
        raise ValueError(
            f"Model {shown!r} is a {', '.join(architectures)} checkpoint; {task} needs one of the heads "
            f"{', '.join('*' + head for head in heads)} ({where})."
        )


__all__ = ["FINE_TUNED_HEADS", "TASK_HEADS", "check_task_head"]
