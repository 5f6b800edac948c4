"""hf_bertscratch: BERT written from scratch in PyTorch, shipped as a transformers model plugin.

Importing the package registers model type "bertscratch" with AutoConfig, every Auto model class of the family and
AutoTokenizer, so `AutoModelForMaskedLM.from_pretrained`, `pipeline("fill-mask")`, `Trainer` and `accelerate` work
unchanged.
"""

from __future__ import annotations

import transformers

from . import modeling_bertscratch
from .configuration_bertscratch import PRESETS, BertScratchConfig
from .modeling_bertscratch import *  # noqa: F403 (the model family, as listed in its __all__)
from .modeling_bertscratch import AUTO_CLASS_TO_MODEL

__version__ = "0.1.0"


def _register() -> None:
    """Register the config and each head with its Auto class, and BERT's WordPiece tokenizer with AutoTokenizer
    (idempotent, so re-imports are harmless). The tokenizer is what AutoTokenizer builds for a folder whose files
    name no tokenizer class (a bare vocab.txt beside config.json, as Google's BERT checkpoints ship), as for "bert"."""
    transformers.AutoConfig.register(BertScratchConfig.model_type, BertScratchConfig, exist_ok=True)
    transformers.AutoTokenizer.register(BertScratchConfig, tokenizer_class=transformers.BertTokenizer, exist_ok=True)
    for auto_name, model_name in AUTO_CLASS_TO_MODEL.items():
        getattr(transformers, auto_name).register(BertScratchConfig, globals()[model_name], exist_ok=True)


_register()

__all__ = [
    "PRESETS",
    "BertScratchConfig",
    *(name for name in modeling_bertscratch.__all__ if name != "AUTO_CLASS_TO_MODEL"),
]
