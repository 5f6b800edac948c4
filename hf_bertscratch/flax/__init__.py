"""BertScratch in Flax NNX (JAX): the same model family, reading and writing the same `model.safetensors` folders.

    pip install "hf-bertscratch[flax]"   (in a clone: pip install -e ".[flax]")

    from hf_bertscratch.flax import FlaxBertScratchForMaskedLM
    model = FlaxBertScratchForMaskedLM.from_pretrained("path/to/bertscratch-folder")
    logits = model(input_ids, attention_mask=attention_mask).logits  # (B, T, V)

This subpackage is optional: the core package never imports jax, and importing this one without jax, flax and
optax installed raises an error naming the extra to install.
"""

from __future__ import annotations

from hf_bertscratch_base.extras import install_command

try:
    import flax  # noqa: F401
    import jax  # noqa: F401
    import optax  # noqa: F401
except ImportError as error:
    raise ModuleNotFoundError(
        f"hf_bertscratch.flax needs jax, flax and optax ({error.name or error} is missing); install them with "
        f"{install_command('flax')}.",
        name=error.name,
    ) from error

from . import modeling_flax_bertscratch  # noqa: E402 (after the dependency check, on purpose)
from .modeling_flax_bertscratch import *  # noqa: E402, F403 (the models and outputs its __all__ lists)
from .training import make_mlm_train_step, make_optimizer, masked_lm_loss, mlm_loss, mlm_loss_and_grads  # noqa: E402

__all__ = [
    *(name for name in modeling_flax_bertscratch.__all__ if name.startswith("Flax")),  # its models and outputs
    "make_mlm_train_step",
    "make_optimizer",
    "masked_lm_loss",
    "mlm_loss",
    "mlm_loss_and_grads",
]
