"""BertScratch in Flax NNX: BERT (Devlin et al. 2019) as in `modeling_bertscratch.py`, written for JAX.

File order follows the torch file: embeddings, attention, MLP, layer, encoder, pooler, MLM head, the pretrained-model
base (checkpoint reading and writing), the base model, then the heads. Shapes use B = batch, T = sequence length,
H = hidden size, nh = heads, hs = head size, V = vocabulary.

Parameters are named after the torch modules, so a torch `state_dict` key maps to one NNX parameter by a fixed rule
(`weight` of a Linear is the transposed `kernel`, of an Embedding the `embedding`, of a LayerNorm the `scale`):
`from_pretrained` reads any BertScratch folder's `model.safetensors` and `save_pretrained` writes one the torch side
loads. As in torch's unpadded runs (`config.unpad_inputs`; on the CPU at every size), hidden states and MLM logits
at padded positions are 0; real positions do not depend on the padding.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct
from safetensors import safe_open
from safetensors.numpy import save_file
from transformers.utils import cached_file

from ..configuration_bertscratch import BertScratchConfig
from ..modeling_bertscratch import code_files, family_auto_map, sinusoidal_table
from ..run_folder import publish_folder

logger = logging.getLogger(__name__)

# config.hidden_act -> the function transformers' ACT2FN gives torch: "gelu" is the exact (erf) GELU, the "_new" and
# "_pytorch_tanh" flavours the tanh approximation.
ACT2FN: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": partial(jax.nn.gelu, approximate=False),
    "gelu_python": partial(jax.nn.gelu, approximate=False),
    "gelu_new": partial(jax.nn.gelu, approximate=True),
    "gelu_pytorch_tanh": partial(jax.nn.gelu, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
}


@struct.dataclass
class FlaxBaseModelOutputWithPooling:
    """`last_hidden_state` (B, T, H) and `pooler_output` (B, H), None without a pooler."""

    last_hidden_state: jax.Array
    pooler_output: jax.Array | None = None


@struct.dataclass
class FlaxMaskedLMOutput:
    """`logits` (B, T, V), 0 at padded positions."""

    logits: jax.Array


@struct.dataclass
class FlaxSequenceClassifierOutput:
    """`logits` (B, num_labels)."""

    logits: jax.Array


def _linear(config: BertScratchConfig, in_features: int, out_features: int, rngs: nnx.Rngs) -> nnx.Linear:
    """Normal(0, initializer_range) kernel and zero bias, as the torch `_init_weights`."""
    return nnx.Linear(
        in_features,
        out_features,
        kernel_init=nnx.initializers.normal(config.initializer_range),
        bias_init=nnx.initializers.zeros_init(),
        rngs=rngs,
    )


def _layer_norm(config: BertScratchConfig, rngs: nnx.Rngs) -> nnx.LayerNorm:
    # The two-pass variance, as torch computes it; the fast E[x^2] - E[x]^2 one drifts from torch's numbers.
    return nnx.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps, use_fast_variance=False, rngs=rngs)


def _embed(config: BertScratchConfig, num_embeddings: int, rngs: nnx.Rngs) -> nnx.Embed:
    return nnx.Embed(
        num_embeddings, config.hidden_size, embedding_init=nnx.initializers.normal(config.initializer_range), rngs=rngs
    )


class FlaxBertScratchEmbeddings(nnx.Module):
    """Word + learned position + segment embeddings, then LayerNorm and dropout: (B, T) ids -> (B, T, H)."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.word_embeddings = _embed(config, config.vocab_size, rngs)
        self.position_embeddings = _embed(config, config.max_position_embeddings, rngs)
        self.token_type_embeddings = _embed(config, config.type_vocab_size, rngs)
        self.layer_norm = _layer_norm(config, rngs)
        self.dropout = nnx.Dropout(config.hidden_dropout_prob, rngs=rngs)
        self._init_tables(config)

    def _init_tables(self, config: BertScratchConfig) -> None:
        """The torch init's two special cases: a zero [PAD] row, and the optional scaled sinusoid positions."""
        if config.pad_token_id is not None:
            table = self.word_embeddings.embedding
            table.value = table.value.at[config.pad_token_id].set(0.0)
        if config.sinusoidal_position_std is not None:
            sinusoid = sinusoidal_table(config.max_position_embeddings, config.hidden_size)
            sinusoid = sinusoid * (config.sinusoidal_position_std / sinusoid.std())
            self.position_embeddings.embedding.value = jnp.asarray(sinusoid.numpy())

    def __call__(
        self, input_ids: jax.Array, token_type_ids: jax.Array | None, position_ids: jax.Array | None
    ) -> jax.Array:
        if position_ids is None:
            position_ids = jnp.arange(input_ids.shape[1])[None]  # (1, T), broadcast over the batch
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.layer_norm(embeddings))


class FlaxBertScratchAttention(nnx.Module):
    """Multi-head self-attention with one fused QKV projection, output projection, residual and post-LayerNorm.

    The fused projection's output is laid out (3, nh, hs) as in torch: all queries, then all keys, then all values.
    """

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.num_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.qkv = _linear(config, config.hidden_size, 3 * config.hidden_size, rngs)
        self.dense = _linear(config, config.hidden_size, config.hidden_size, rngs)
        self.layer_norm = _layer_norm(config, rngs)
        self.attention_dropout = nnx.Dropout(config.attention_probs_dropout_prob, rngs=rngs)
        self.dropout = nnx.Dropout(config.hidden_dropout_prob, rngs=rngs)

    def __call__(self, hidden_states: jax.Array, additive_mask: jax.Array | None) -> jax.Array:
        """(B, T, H) and an additive (B, 1, 1 or T, T) mask -> (B, T, H)."""
        batch_size, seq_len, hidden_size = hidden_states.shape
        qkv = self.qkv(hidden_states).reshape(batch_size, seq_len, 3, self.num_heads, self.head_size)
        query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # each (B, T, nh, hs)
        scores = jnp.einsum("bqhd,bkhd->bhqk", query, key) * self.scaling  # (B, nh, T, T)
        if additive_mask is not None:
            scores = scores + additive_mask
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(query.dtype)
        probs = self.attention_dropout(probs)
        context = jnp.einsum("bhqk,bkhd->bqhd", probs, value).reshape(batch_size, seq_len, hidden_size)
        return self.layer_norm(hidden_states + self.dropout(self.dense(context)))


class FlaxBertScratchMLP(nnx.Module):
    """Position-wise feed-forward block: H -> intermediate -> H with `config.hidden_act`, residual, post-LayerNorm."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.fc_in = _linear(config, config.hidden_size, config.intermediate_size, rngs)
        self.act = ACT2FN[config.hidden_act]
        self.fc_out = _linear(config, config.intermediate_size, config.hidden_size, rngs)
        self.layer_norm = _layer_norm(config, rngs)
        self.dropout = nnx.Dropout(config.hidden_dropout_prob, rngs=rngs)

    def __call__(self, hidden_states: jax.Array) -> jax.Array:
        """(..., H) -> (..., H)."""
        return self.layer_norm(hidden_states + self.dropout(self.fc_out(self.act(self.fc_in(hidden_states)))))


class FlaxBertScratchLayer(nnx.Module):
    """One post-LN transformer block: self-attention then feed-forward."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.attention = FlaxBertScratchAttention(config, rngs=rngs)
        self.mlp = FlaxBertScratchMLP(config, rngs=rngs)

    def __call__(self, hidden_states: jax.Array, additive_mask: jax.Array | None) -> jax.Array:
        return self.mlp(self.attention(hidden_states, additive_mask))


class FlaxBertScratchEncoder(nnx.Module):
    """The stack of `num_hidden_layers` blocks."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.layers = nnx.List([FlaxBertScratchLayer(config, rngs=rngs) for _ in range(config.num_hidden_layers)])

    def __call__(self, hidden_states: jax.Array, additive_mask: jax.Array | None) -> jax.Array:
        for layer in self.layers:
            hidden_states = layer(hidden_states, additive_mask)
        return hidden_states


class FlaxBertScratchPooler(nnx.Module):
    """tanh(dense(h_[CLS])): the sentence vector the sequence classification head reads."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.dense = _linear(config, config.hidden_size, config.hidden_size, rngs)

    def __call__(self, hidden_states: jax.Array) -> jax.Array:
        """(B, T, H) -> (B, H)."""
        return jnp.tanh(self.dense(hidden_states[:, 0]))


class FlaxBertScratchDecoder(nnx.Module):
    """The vocabulary projection: the word embeddings (tied, `config.tie_word_embeddings`) or its own (V, H) weight,
    plus a bias; stored as torch's `cls.decoder.weight` / `cls.decoder.bias`."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.bias = nnx.Param(jnp.zeros((config.vocab_size,), jnp.float32))
        init = nnx.initializers.normal(config.initializer_range)
        shape = (config.vocab_size, config.hidden_size)
        self.weight = None if config.tie_word_embeddings else nnx.Param(init(rngs.params(), shape, jnp.float32))

    def __call__(self, hidden_states: jax.Array, word_embeddings: jax.Array) -> jax.Array:
        """(..., H) and the (V, H) word embeddings -> (..., V)."""
        weight = word_embeddings if self.weight is None else self.weight[...]
        return hidden_states @ weight.T + self.bias[...]


class FlaxBertScratchLMHead(nnx.Module):
    """MLM head: dense + activation + LayerNorm transform, then the decoder to the vocabulary."""

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs) -> None:
        self.dense = _linear(config, config.hidden_size, config.hidden_size, rngs)
        self.act = ACT2FN[config.hidden_act]
        self.layer_norm = _layer_norm(config, rngs)
        self.decoder = FlaxBertScratchDecoder(config, rngs=rngs)

    def __call__(self, hidden_states: jax.Array, word_embeddings: jax.Array) -> jax.Array:
        """(..., H) -> (..., V) logits."""
        return self.decoder(self.layer_norm(self.act(self.dense(hidden_states))), word_embeddings)


# ------------------------------------------------------------------------------------------ checkpoints

# NNX parameter name -> (torch parameter name, whether the array is stored transposed in torch).
_TORCH_NAMES: dict[str, tuple[str, bool]] = {
    "kernel": ("weight", True),  # nnx.Linear (in, out); torch (out, in)
    "embedding": ("weight", False),
    "scale": ("weight", False),
    "weight": ("weight", False),
    "bias": ("bias", False),
}

Model = TypeVar("Model", bound="FlaxBertScratchPreTrainedModel")


class FlaxBertScratchPreTrainedModel(nnx.Module):
    """Reading and writing BertScratch folders (config.json + model.safetensors) for the Flax models.

    Subclasses set `torch_class_name`, the torch head whose checkpoint layout they share (written as the saved
    config's `architectures`, so the folder loads with the matching Auto class).
    """

    torch_class_name: str = ""
    base_model_prefix = "bert"

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs | None = None) -> None:
        """`rngs`: what a subclass initialises its modules from (`from_pretrained` hands one to every head)."""
        if not isinstance(config, BertScratchConfig):
            raise TypeError(f"config must be a BertScratchConfig, got {type(config).__name__}.")
        self.config = config

    @classmethod
    def from_pretrained(
        cls: type[Model], pretrained_model_name_or_path: str | os.PathLike, *, seed: int = 0, **config_kwargs: Any
    ) -> Model:
        """Load a BertScratch folder (or Hub id) saved by the torch or the Flax side, in evaluation mode.

        Parameters the checkpoint lacks (a new classifier on an MLM checkpoint) are initialised from `seed` and
        logged, as transformers does; `config_kwargs` override config fields (e.g. `num_labels=3`).
        """
        config = BertScratchConfig.from_pretrained(pretrained_model_name_or_path, **config_kwargs)
        model = cls(config, rngs=nnx.Rngs(seed))
        path = cached_file(str(pretrained_model_name_or_path), "model.safetensors")
        with safe_open(path, framework="flax") as checkpoint:
            weights = {key: checkpoint.get_tensor(key) for key in checkpoint.keys()}  # noqa: SIM118 (not a dict)
        model.load_torch_state_dict(weights)
        model.eval()
        return model

    def torch_parameters(self) -> dict[str, tuple[nnx.Variable, bool]]:
        """Every parameter by its torch `state_dict` key, with whether torch stores it transposed."""
        parameters = {}
        for path, variable in nnx.state(self, nnx.Param).flat_state():
            torch_name, transposed = _TORCH_NAMES[str(path[-1])]  # a parameter's attribute name
            key = ".".join(str(part) for part in (*path[:-1], torch_name))
            parameters[key] = (_variable_at(self, path), transposed)
        return parameters

    def torch_state_dict(self) -> dict[str, np.ndarray]:
        """The parameters as the torch model's `state_dict` (float32 numpy, torch layout; tied weights once)."""
        return {
            key: np.ascontiguousarray(np.asarray(variable[...]).T if transposed else np.asarray(variable[...]))
            for key, (variable, transposed) in self.torch_parameters().items()
        }

    def load_torch_state_dict(self, weights: dict[str, Any]) -> None:
        """Set the parameters from a torch-layout state dict (numpy or jax arrays, any float dtype).

        A head's checkpoint loads into the base model (its `bert.` prefix dropped) and a base model's into a head,
        as with transformers. A shape that does not match raises; missing and unexpected keys are logged.
        """
        weights = self._align_prefix(dict(weights))
        parameters = self.torch_parameters()
        for key, (variable, transposed) in parameters.items():
            if key not in weights:
                continue
            array = jnp.asarray(weights[key], dtype=jnp.float32)
            array = array.T if transposed else array
            if array.shape != variable[...].shape:
                expected = variable[...].shape[::-1] if transposed else variable[...].shape
                raise ValueError(
                    f"Checkpoint tensor {key!r} has shape {tuple(weights[key].shape)}, expected "
                    f"{tuple(expected)} by the config (hidden_size={self.config.hidden_size}, "
                    f"intermediate_size={self.config.intermediate_size}, "
                    f"vocab_size={self.config.vocab_size}); the config does not describe these weights."
                )
            variable.value = array
        missing = sorted(set(parameters) - set(weights))
        # A tied checkpoint may still carry the decoder weight (it is the word embedding table); it is not read.
        unexpected = sorted(set(weights) - set(parameters) - {"cls.decoder.weight"})
        if missing:
            logger.warning("%s: parameters not in the checkpoint, newly initialised: %s", type(self).__name__, missing)
        if unexpected:
            logger.warning("%s: checkpoint tensors not used: %s", type(self).__name__, unexpected)

    def _align_prefix(self, weights: dict[str, Any]) -> dict[str, Any]:
        prefix = self.base_model_prefix + "."  # the base model's own keys have none: a head's checkpoint is stripped
        own_prefixed = any(key.startswith(prefix) for key in self.torch_parameters())
        checkpoint_prefixed = any(key.startswith(prefix) for key in weights)
        if checkpoint_prefixed and not own_prefixed:
            return {key.removeprefix(prefix): value for key, value in weights.items()}
        if own_prefixed and not checkpoint_prefixed:
            return {prefix + key: value for key, value in weights.items()}
        return weights

    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        """Write config.json, model.safetensors and the torch code, as the torch `save_pretrained` lays them out.

        The folder loads with the torch Auto class of this head (`architectures`) once `hf_bertscratch` is imported,
        or with transformers alone and `trust_remote_code=True`. Files are assembled in a hidden staging folder and
        each moved in with one rename, config.json last; other files in the folder are left alone.
        """
        folder = Path(save_directory)
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder / f".flax-save.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            save_file(self.torch_state_dict(), staging / "model.safetensors", metadata={"format": "pt"})
            for code_file in code_files():  # the code `trust_remote_code` imports
                shutil.copyfile(code_file, staging / Path(code_file).name)
            config = copy.deepcopy(self.config)
            config.architectures = [self.torch_class_name]
            config.auto_map = family_auto_map()
            config.save_pretrained(staging)
            publish_folder(staging, folder, last=("config.json",))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _variable_at(module: nnx.Module, path: tuple) -> nnx.Variable:
    node: Any = module
    for part in path:
        node = node[part] if isinstance(part, int) else getattr(node, part)
    return node


# ------------------------------------------------------------------------------------------- inputs


def _as_ids(name: str, ids: Any, shape: tuple[int, ...] | None = None) -> jax.Array | None:
    """numpy/jax/list ids -> an int32 jax array of rank 2 (and `shape` when given)."""
    if ids is None:
        return None
    ids = jnp.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"{name} must have shape (batch, seq_len); got shape {tuple(ids.shape)}.")
    if shape is not None and name != "position_ids" and tuple(ids.shape) != shape:
        raise ValueError(f"{name} must have the shape of input_ids {shape}; got {tuple(ids.shape)}.")
    return ids.astype(jnp.int32)


def _check_range(name: str, ids: jax.Array | None, limit: int, limit_name: str) -> None:
    """Outside jit only (traced values have no min): out-of-range ids would read NaN rows silently."""
    if ids is None or ids.size == 0 or isinstance(ids, jax.core.Tracer):
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= limit:
        bad = low if low < 0 else high
        raise ValueError(f"{name} contains {bad}, outside [0, {limit - 1}] ({limit_name}={limit}).")


def _additive_mask(attention_mask: jax.Array | None, dtype: jnp.dtype) -> jax.Array | None:
    """(B, T) 0/1 key mask -> additive (B, 1, 1, T) mask: 0 to attend, finfo(dtype).min to ignore (never -inf: no NaN
    on an all-pad row)."""
    if attention_mask is None:
        return None
    keep = attention_mask[:, None, None, :].astype(bool)
    return jnp.where(keep, 0.0, jnp.finfo(dtype).min).astype(dtype)


# ------------------------------------------------------------------------------------------- models


class FlaxBertScratchModel(FlaxBertScratchPreTrainedModel):
    """The bare encoder: embeddings, `num_hidden_layers` blocks and (optionally) the pooler."""

    torch_class_name = "BertScratchModel"

    def __init__(
        self, config: BertScratchConfig, *, add_pooling_layer: bool = True, rngs: nnx.Rngs | None = None
    ) -> None:
        super().__init__(config)
        rngs = nnx.Rngs(0) if rngs is None else rngs
        self.embeddings = FlaxBertScratchEmbeddings(config, rngs=rngs)
        self.encoder = FlaxBertScratchEncoder(config, rngs=rngs)
        self.pooler = FlaxBertScratchPooler(config, rngs=rngs) if add_pooling_layer else None

    def __call__(
        self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None, position_ids: Any = None
    ) -> FlaxBaseModelOutputWithPooling:
        """(B, T) ids (numpy or jax) -> `last_hidden_state` (B, T, H), 0 at padded positions under
        `config.unpad_inputs` as in torch, and `pooler_output` (B, H)."""
        config = self.config
        input_ids = _as_ids("input_ids", input_ids)
        shape = tuple(input_ids.shape)
        if shape[1] > config.max_position_embeddings:
            raise ValueError(
                f"Sequence length {shape[1]} exceeds max_position_embeddings={config.max_position_embeddings}; "
                "truncate the inputs (e.g. tokenizer(..., truncation=True, max_length=...))."
            )
        attention_mask = _as_ids("attention_mask", attention_mask, shape)
        token_type_ids = _as_ids("token_type_ids", token_type_ids, shape)
        position_ids = _as_ids("position_ids", position_ids, shape)
        _check_range("input_ids", input_ids, config.vocab_size, "vocab_size")
        _check_range("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size")
        _check_range("position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings")

        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H)
        additive_mask = _additive_mask(attention_mask, hidden_states.dtype)
        hidden_states = self.encoder(hidden_states, additive_mask)
        if config.unpad_inputs and attention_mask is not None:
            hidden_states = jnp.where(attention_mask[..., None].astype(bool), hidden_states, 0.0)
        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return FlaxBaseModelOutputWithPooling(last_hidden_state=hidden_states, pooler_output=pooled)


class FlaxBertScratchForMaskedLM(FlaxBertScratchPreTrainedModel):
    """Masked language model: the encoder (no pooler) and the MLM head tied to the word embeddings."""

    torch_class_name = "BertScratchForMaskedLM"

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs | None = None) -> None:
        super().__init__(config)
        rngs = nnx.Rngs(0) if rngs is None else rngs
        self.bert = FlaxBertScratchModel(config, add_pooling_layer=False, rngs=rngs)
        self.cls = FlaxBertScratchLMHead(config, rngs=rngs)

    def __call__(
        self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None, position_ids: Any = None
    ) -> FlaxMaskedLMOutput:
        """(B, T) ids -> `logits` (B, T, V); 0 at padded positions under `config.unpad_inputs`, as in torch."""
        hidden_states = self.bert(input_ids, attention_mask, token_type_ids, position_ids).last_hidden_state
        logits = self.decode(hidden_states)
        if self.config.unpad_inputs and attention_mask is not None:
            logits = jnp.where(jnp.asarray(attention_mask)[..., None].astype(bool), logits, 0.0)
        return FlaxMaskedLMOutput(logits=logits)

    def decode(self, hidden_states: jax.Array) -> jax.Array:
        """(..., H) encoder output -> (..., V) logits."""
        return self.cls(hidden_states, self.bert.embeddings.word_embeddings.embedding[...])


class FlaxBertScratchForSequenceClassification(FlaxBertScratchPreTrainedModel):
    """Classifier or regressor on the pooled [CLS] or, with `config.classifier_pooling="mean"`, on the mean of the
    last hidden states over the real tokens (no pooler), as in torch: `config.num_labels` logits."""

    torch_class_name = "BertScratchForSequenceClassification"

    def __init__(self, config: BertScratchConfig, *, rngs: nnx.Rngs | None = None) -> None:
        super().__init__(config)
        if config.classifier_pooling not in ("cls", "mean"):
            raise ValueError(
                f"The Flax classifier reads the pooled [CLS] or the mean (classifier_pooling 'cls' or 'mean'); got "
                f"{config.classifier_pooling!r}, which only the PyTorch model computes."
            )
        rngs = nnx.Rngs(0) if rngs is None else rngs
        self.bert = FlaxBertScratchModel(config, add_pooling_layer=config.classifier_pooling == "cls", rngs=rngs)
        rate = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nnx.Dropout(rate, rngs=rngs)
        num_labels = config.num_labels
        assert num_labels is not None, "PreTrainedConfig.__post_init__ always sets id2label"
        self.classifier = _linear(config, config.hidden_size, num_labels, rngs)

    def __call__(
        self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None, position_ids: Any = None
    ) -> FlaxSequenceClassifierOutput:
        """(B, T) ids -> `logits` (B, num_labels)."""
        outputs = self.bert(input_ids, attention_mask, token_type_ids, position_ids)
        if self.config.classifier_pooling == "mean":
            hidden = outputs.last_hidden_state  # (B, T, H)
            if attention_mask is None:
                pooled = hidden.mean(axis=1)
            else:
                weights = jnp.asarray(attention_mask, hidden.dtype)[:, :, None]  # (B, T, 1)
                pooled = (hidden * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1.0)
        else:
            assert outputs.pooler_output is not None  # "cls": the encoder was built with its pooler
            pooled = outputs.pooler_output
        return FlaxSequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))


__all__ = [
    "ACT2FN",
    "FlaxBaseModelOutputWithPooling",
    "FlaxBertScratchForMaskedLM",
    "FlaxBertScratchForSequenceClassification",
    "FlaxBertScratchModel",
    "FlaxBertScratchPreTrainedModel",
    "FlaxMaskedLMOutput",
    "FlaxSequenceClassifierOutput",
]
