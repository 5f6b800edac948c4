"""BertScratch: BERT (Devlin et al. 2019) written from scratch as a transformers-native model family.

File order follows transformers' `modeling_bert.py`: embeddings, attention functions, attention, MLP, layer, encoder,
pooler, heads, `PreTrainedModel`, the base model, then the `For*` task models. Shapes use B = batch, T = sequence
length, N = number of real (non-pad) tokens in the batch, H = hidden size, nh = heads, hs = head size, V = vocab.

Two things differ from transformers' BERT, both invisible at real (non-pad) positions:
- `config.unpad_inputs`: with padding in `attention_mask`, the dense layers run on the N real tokens only, and
  attention is computed on the trimmed (B, T', ...) batch, T' the longest real row (under FlashAttention, and under
  sdpa on a CUDA device in half precision through PyTorch's varlen kernel, varlen on the N tokens themselves);
  outputs at pad positions are then 0. On a CUDA device below hidden size 768 with neither, the batch runs padded,
  which is faster there (`padding_bertscratch.DEVICE_RULES`).
- `config.sparse_prediction`: in training with `labels`, the MLM vocabulary projection is decoded only at the
  labelled positions, which is most of a small BERT's training compute; in evaluation the logits stay (B, T, V) and
  the loss is computed at the labelled positions only.

How a forward runs its batch (input checks, the one host read, varlen and masks) is `batching_bertscratch.py`, a
padded batch's real tokens and each device's rules for it `padding_bertscratch.py`, and the GEMM path of CPU
inference and the dropout masks of CPU training `cpu_matmul.py`. This file imports torch, public transformers API,
its own configuration and those three files only, so that `save_pretrained` can ship them for `trust_remote_code=True`
loading.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.dynamic_module_utils import custom_object_save, get_relative_import_files
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput, TransformersKwargs, can_return_tuple
from transformers.utils.generic import is_flash_attention_requested
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask
    from typing_extensions import Unpack

from .batching_bertscratch import (
    BertScratchBatchPlan,
    BertScratchVarlen,
    attention_implementation,
    attention_mask_for,
    check_kwargs,
    check_masked_positions,
    cut_long_texts,
    document_ids,
    key_mask,
    plan_batch,
    position_rows,
    requested,
)
from .configuration_bertscratch import BertScratchConfig
from .cpu_matmul import (
    BertScratchDropout,
    BertScratchLinear,
    apply_dropout,
    draws_dropout_bits,
    eager_attention_trains_faster,
    linear_act,
    linear_add,
)
from .padding_bertscratch import BertScratchPadding, decode_padded

# Every head of the family, by the Auto class that loads it: used for registration and for the `auto_map` that
# `save_pretrained` writes, so a saved folder of any head can be reloaded as any other through remote code.
AUTO_CLASS_TO_MODEL: dict[str, str] = {
    "AutoModel": "BertScratchModel",
    "AutoModelForPreTraining": "BertScratchForPreTraining",
    "AutoModelForMaskedLM": "BertScratchForMaskedLM",
    "AutoModelForNextSentencePrediction": "BertScratchForNextSentencePrediction",
    "AutoModelForSequenceClassification": "BertScratchForSequenceClassification",
    "AutoModelForTokenClassification": "BertScratchForTokenClassification",
    "AutoModelForQuestionAnswering": "BertScratchForQuestionAnswering",
    "AutoModelForMultipleChoice": "BertScratchForMultipleChoice",
}


class BertScratchEmbeddings(nn.Module):
    """Word + learned position + segment embeddings, then LayerNorm and dropout: (B, T) ids -> (B, T, H)."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = BertScratchDropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        seq_len, device = inputs_embeds.shape[1], inputs_embeds.device
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=device).unsqueeze(0)  # (1, T), broadcast over the batch
        embeddings = inputs_embeds + self.position_embeddings(position_ids)
        if token_type_ids is None:
            # segment 0's row, looked up through the module (not read from its weight): offloading loads the weight
            # only around the module's own forward
            segment_zero = torch.zeros((), dtype=torch.long, device=device)
            embeddings = embeddings + self.token_type_embeddings(segment_zero)  # (H,), broadcast over (B, T)
        else:
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.layer_norm(embeddings))


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """(num_positions, dim) sinusoid position table of Vaswani et al. (2017): sin in even, cos in odd columns."""
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (P, 1)
    frequencies = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (dim/2,)
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(positions * frequencies)
    table[:, 1::2] = torch.cos(positions * frequencies[: dim // 2])
    return table


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain softmax(QK^T * scaling + mask) V with the scores and the softmax in fp32.

    Args:
        query, key, value: (B, nh, T, hs).
        attention_mask: additive (B, 1, 1 or T, T) mask, 0 where attended and finfo.min elsewhere.

    Returns:
        (B, T, nh, hs) attention output and (B, nh, T, T) attention probabilities.
    """
    scores = torch.matmul(query, key.transpose(-1, -2)).float() * scaling  # (B, nh, T, T), fp32 under autocast too
    if attention_mask is not None:
        scores = scores + attention_mask.float()  # in half precision a masked score could overflow to -inf
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    probs = apply_dropout(probs, dropout, module.training)
    output = torch.matmul(probs, value).transpose(1, 2).contiguous()  # (B, T, nh, hs)
    return output, probs


class BertScratchAttention(nn.Module):
    """Multi-head self-attention with one fused QKV projection, output projection, residual and post-LayerNorm."""

    is_causal = False  # read by transformers' sdpa attention function

    def __init__(self, config: BertScratchConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.qkv = BertScratchLinear(config.hidden_size, 3 * config.hidden_size)
        self.dense = BertScratchLinear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = BertScratchDropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | BlockMask | None,
        padding: BertScratchPadding | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, T, H), or (N, H) when `padding` is given -> same shape, plus (B, nh, T, T) probs if asked for (what
        `capture_outputs` records as `attentions`). `attention_mask` is what `attention_mask_for` built for this
        attention implementation: additive (B, 1, 1 or T, T), flex attention's `BlockMask`, FlashAttention's
        `BertScratchVarlen` (the N tokens run as one row of sequences: no pad and unpad here) or (B, T) key mask,
        or None."""
        qkv = self.qkv(hidden_states)  # (B, T, 3H) or (N, 3H)
        varlen = attention_mask if isinstance(attention_mask, BertScratchVarlen) else None
        if varlen is not None and varlen.kernel == "torch":  # PyTorch's varlen kernel, on (N, nh, hs) each
            query, key, value = qkv.view(-1, 3, self.num_heads, self.head_size).unbind(1)
            context = varlen.attend(query, key, value).reshape(qkv.shape[0], -1)  # (N, H), scaled 1/sqrt(hs)
            return self.layer_norm(linear_add(self.dense, context, hidden_states, self.dropout)), None
        if varlen is not None:
            qkv = qkv.unsqueeze(0)  # (1, N, 3H)
        elif padding is not None:
            qkv = padding.pad(qkv)  # (B, T', 3H)
        batch_size, seq_len, _ = qkv.shape
        qkv = qkv.view(batch_size, seq_len, 3, self.num_heads, self.head_size).permute(2, 0, 3, 1, 4)
        query, key, value = qkv.unbind(0)  # each (B, nh, T, hs)

        implementation = attention_implementation(self.config, output_attentions)
        if implementation == "sdpa" and self.training:
            # The eager function computes what sdpa's CPU kernel does; it runs in CPU training where it draws the
            # dropout mask faster (`apply_dropout`; the kernel draws it with bernoulli) or was timed faster at this
            # shape and dtype (the kernel in bf16 on some CPUs)
            dropout = self.config.attention_probs_dropout_prob
            if (dropout > 0 and draws_dropout_bits(query)) or eager_attention_trains_faster(query, self._eager):
                implementation = "eager"
        mask = attention_mask
        extra: dict[str, torch.Tensor | int] = {}  # what the attention function takes beside the mask
        if varlen is not None:
            mask, extra = None, varlen.kwargs()
        elif isinstance(mask, torch.Tensor) and mask.dim() == 4:  # additive, built in float32: clamp for fp16
            mask = mask.clamp(min=torch.finfo(query.dtype).min).to(query.dtype)
            if is_flash_attention_requested(requested_attention_implementation=implementation):
                implementation = "sdpa"  # a padding-free batch kept padded for per-layer outputs (see plan_batch)
            elif implementation == "flex_attention":
                # transformers' flex function reads a tensor mask as mask[b][0][q][kv], which crashes torch's compiled
                # CPU kernel (torch 2.13), and a position bias as bias[b, h, q, kv]: the same additive scores
                bias = mask.expand(batch_size, self.num_heads, seq_len, seq_len)  # (B, nh, T, T), a view
                mask, extra = None, {"position_bias": bias}
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        context, probs = attention_interface(
            self,
            query,
            key,
            value,
            mask,
            dropout=self.config.attention_probs_dropout_prob if self.training else 0.0,
            scaling=self.scaling,
            **extra,
        )
        context = context.reshape(batch_size, seq_len, -1)  # (B, T, H) or (1, N, H)
        if varlen is not None:
            context = context.squeeze(0)  # (N, H)
        elif padding is not None:
            context = padding.unpad(context)  # (N, H)
        output = self.layer_norm(linear_add(self.dense, context, hidden_states, self.dropout))
        return output, probs

    def _eager(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The eager function's output alone, without mask or dropout: what `eager_attention_trains_faster` times."""
        return eager_attention_forward(self, query, key, value, None, self.scaling)[0]


class BertScratchMLP(nn.Module):
    """Position-wise feed-forward block: H -> intermediate -> H with GELU, residual and post-LayerNorm."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.fc_in = BertScratchLinear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.hidden_act = config.hidden_act
        self._act_type = type(self.act)  # what `hidden_act` names; another module put in `act` runs as written
        self.fc_out = BertScratchLinear(config.intermediate_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = BertScratchDropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., H); row-wise, so it runs the same on (B, T, H) and unpadded (N, H). On the oneDNN path of
        CPU inference the GELU and the residual add run inside the products (`cpu_matmul`)."""
        named = self.hidden_act if type(self.act) is self._act_type else ""  # "": `act` replaced, not what is named
        inner = linear_act(self.fc_in, hidden_states, self.act, named)
        return self.layer_norm(linear_add(self.fc_out, inner, hidden_states, self.dropout))


class BertScratchLayer(GradientCheckpointingLayer):
    """One post-LN transformer block: self-attention then feed-forward."""

    def __init__(self, config: BertScratchConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.attention = BertScratchAttention(config, layer_idx=layer_idx)
        self.mlp = BertScratchMLP(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | BlockMask | None = None,
        padding: BertScratchPadding | None = None,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        """(B, T, H), or (N, H) under `padding` -> same shape (what `capture_outputs` records as `hidden_states`)."""
        hidden_states, _ = self.attention(hidden_states, attention_mask, padding, output_attentions)
        return self.mlp(hidden_states)


class BertScratchEncoder(nn.Module):
    """The stack of `num_hidden_layers` blocks (hidden states and attentions are recorded by `capture_outputs`)."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([BertScratchLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | BlockMask | None,
        padding: BertScratchPadding | None,
        output_attentions: bool,
    ) -> torch.Tensor:
        """The last hidden state, in the layout of the input ((B, T, H), or (N, H) under `padding`)."""
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, padding, output_attentions)
        return hidden_states


class BertScratchPooler(nn.Module):
    """tanh(dense(h_[CLS])): the sentence vector used by NSP and the sequence classification heads."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, H) -> (B, H)."""
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertScratchLMHead(nn.Module):
    """MLM head: dense + GELU + LayerNorm transform, then a decoder to the vocabulary tied to the word embeddings."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.dense = BertScratchLinear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        # an nn.Linear once resize_token_embeddings replaces it (set_output_embeddings)
        self.decoder: nn.Linear = BertScratchLinear(config.hidden_size, config.vocab_size)

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., H): dense, GELU, LayerNorm; what the decoder reads."""
        return self.layer_norm(self.act(self.dense(hidden_states)))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) logits."""
        return self.decoder(self.transform(hidden_states))


class BertScratchDiscriminatorHead(nn.Module):
    """ELECTRA's replaced-token detection head (transformers' `ElectraDiscriminatorPredictions`): dense, the config's
    activation, then one logit per token, positive where the token is judged replaced."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (...) logits."""
        return self.prediction(self.act(self.dense(hidden_states))).squeeze(-1)


class BertScratchPreTrainedModel(PreTrainedModel):
    """Weight init, attention-backend flags and `save_pretrained` with a complete `auto_map` for remote code."""

    config_class = BertScratchConfig
    config: BertScratchConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    # Attention dispatches through transformers' ALL_ATTENTION_FUNCTIONS: sdpa, flex attention (with the BlockMask
    # of `attention_mask_for`) and FlashAttention (varlen over the unpadded tokens, `BertScratchVarlen`) are tested
    # against eager; FlashAttention through transformers' own `flash_attention_forward` with a CPU stand-in for the
    # kernel, and on a GPU where flash-attn is installed.
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    _no_split_modules = ["BertScratchEmbeddings", "BertScratchLayer"]
    # What `capture_outputs` records: each layer's output (after the embeddings, the first layer's input) and each
    # attention's probabilities (its second output, computed eagerly when asked for).
    _can_record_outputs = {
        "hidden_states": BertScratchLayer,
        "attentions": OutputRecorder(BertScratchAttention, index=1),
    }
    # Task heads average their loss per batch: Trainer divides by the accumulation steps itself.
    accepts_loss_kwargs = False

    def __init__(self, config: BertScratchConfig, *inputs: Any, **kwargs: Any) -> None:
        # Another model's config (transformers' `BertConfig` say) lacks this family's fields, which would fail later
        # as a missing attribute; compared by model type, so the class of a remote-code module passes too.
        if getattr(config, "model_type", None) != BertScratchConfig.model_type:
            raise TypeError(
                f"{type(self).__name__} needs a BertScratchConfig, got {type(config).__name__} (model_type "
                f"{getattr(config, 'model_type', None)!r}); convert a BERT config with "
                "hf_bertscratch.convert.bert_config_to_bertscratch(config)."
            )
        # The config's checks run where it is made; values set on it after (`from_pretrained(..., num_attention_heads=3)`
        # sets its keyword arguments on the loaded config) are checked here, before a layer is built from them.
        config.validate()
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Normal(0, initializer_range) matrices and embeddings, zero biases, unit LayerNorms, zero [PAD] row; the
        position embeddings start from a scaled sinusoid table instead when `config.sinusoidal_position_std` is set."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding) and self._starts_sinusoidal(module):
            table = sinusoidal_table(module.num_embeddings, module.embedding_dim)
            position_std = self.config.sinusoidal_position_std
            assert position_std is not None, "_starts_sinusoidal requires it"
            init.copy_(module.weight, table * (position_std / table.std()))
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)

    def _starts_sinusoidal(self, module: nn.Embedding) -> bool:
        """Whether `module` is this model's position embedding and the config asks for a sinusoidal start."""
        embeddings = getattr(self.base_model, "embeddings", None)
        return self.config.sinusoidal_position_std is not None and module is getattr(
            embeddings, "position_embeddings", None
        )

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike | None, *args: Any, **kwargs: Any) -> Any:
        """`PreTrainedModel.from_pretrained`, first refusing a `device_map` that offloads one of two tied weights to
        disk and not the other (`tied_weights_split_by_disk`): accelerate then fails, at loading or at the first
        forward, with an error that names neither (transformers' BERT fails the same way)."""
        device_map = kwargs.get("device_map")
        split = tied_weights_split_by_disk(device_map, cls._tied_weights_keys) if isinstance(device_map, dict) else None
        if split is not None and cls._ties_word_embeddings(pretrained_model_name_or_path, kwargs):
            (target, target_place), (source, source_place) = split
            raise ValueError(
                f"device_map={device_map!r} puts {target} on {target_place!r} and {source}, the weight tied to it, "
                f"on {source_place!r}: accelerate cannot offload one of two tied weights to disk. Give both the same "
                "place (both 'disk', or both kept in memory, e.g. 'cpu'), or pass device_map='auto'."
            )
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    @classmethod
    def _ties_word_embeddings(cls, pretrained_model_name_or_path: str | os.PathLike | None, kwargs: dict) -> bool:
        """Whether the config `from_pretrained` would build the model from ties the word embeddings: `config` when
        given as one, else the one it names or the folder's, with the keyword arguments that set its fields."""
        config = kwargs.get("config")
        if isinstance(config, PreTrainedConfig):
            return bool(config.tie_word_embeddings)
        source = config if config is not None else pretrained_model_name_or_path
        if source is None:  # no config to read: `from_pretrained` says so itself
            return False
        options = {key: value for key, value in kwargs.items() if key != "config"}
        loaded, _ = cls.config_class.from_pretrained(source, return_unused_kwargs=True, **options)
        return bool(loaded.tie_word_embeddings)

    def save_pretrained(
        self, save_directory: str | os.PathLike, is_main_process: bool = True, *args: Any, **kwargs: Any
    ) -> None:
        """`PreTrainedModel.save_pretrained`, plus this package's code and an `auto_map` naming every head.

        The configuration and modeling files are copied next to the weights so that transformers alone can load the
        folder with `trust_remote_code=True`, through any Auto class of the family.
        """
        self.config.validate()  # a config changed since the model was built: refused before any file is written
        # FSDP2 swaps the model's class for a subclass defined in torch; the code to ship is this file's class.
        model_class = next(c for c in type(self).__mro__ if c.__module__ == __name__)
        if is_main_process:  # a push from save_pretrained takes it along: _upload_modified_files
            os.makedirs(save_directory, exist_ok=True)
            custom_object_save(model_class, save_directory)  # this file and those it imports (`code_files`)
        self.config.auto_map = family_auto_map()
        super().save_pretrained(save_directory, is_main_process, *args, **kwargs)

    def _upload_modified_files(
        self,
        working_dir: str | os.PathLike,
        repo_id: str,
        files_timestamps: dict[str, float],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """transformers' upload of the files a save changed (`save_pretrained(..., push_to_hub=True)`), the code files
        included: `save_pretrained` writes them before transformers notes the folder's file times, and a repository
        whose config's auto_map names code it lacks does not load."""
        code = {os.path.basename(path) for path in code_files()}
        changed = {name: time for name, time in files_timestamps.items() if name not in code}
        return super()._upload_modified_files(working_dir, repo_id, changed, *args, **kwargs)


def code_files() -> list[str]:
    """The files `save_pretrained` ships for `trust_remote_code=True` loading, as transformers' `custom_object_save`
    finds them: this one and those it imports relatively (the configuration, `batching_bertscratch.py`,
    `padding_bertscratch.py` and `cpu_matmul.py`)."""
    return [__file__, *get_relative_import_files(__file__)]


def tied_weights_split_by_disk(
    device_map: dict[str, Any], tied_weights: dict[str, str] | None
) -> tuple[tuple[str, Any], tuple[str, Any]] | None:
    """The first pair of tied weights (`_tied_weights_keys`, target -> source) of which `device_map` offloads one to
    disk and not the other, as ((target, its place), (source, its place)); None where there is none. A weight's place
    is the value of the longest entry naming it or a module above it ("" names the whole model)."""

    def place(name: str) -> Any:
        entries = [key for key in device_map if key in ("", name) or name.startswith(key + ".")]
        return device_map[max(entries, key=len)] if entries else None

    for target, source in (tied_weights or {}).items():
        if (place(target) == "disk") != (place(source) == "disk"):
            return (target, place(target)), (source, place(source))
    return None


def family_auto_map() -> dict[str, str]:
    """`auto_map` entries for the config and every head, as written into a saved `config.json`: any Auto class of
    the family loads any saved head's folder with `trust_remote_code=True` (a head no Auto class names, the ELECTRA
    discriminator, through its `architectures` entry)."""
    modeling = __name__.rsplit(".", 1)[-1]
    config_module = BertScratchConfig.__module__.rsplit(".", 1)[-1]
    entries = {"AutoConfig": f"{config_module}.BertScratchConfig"}
    entries.update({auto: f"{modeling}.{name}" for auto, name in AUTO_CLASS_TO_MODEL.items()})
    return entries


class BertScratchModel(BertScratchPreTrainedModel):
    """The bare encoder: embeddings, `num_hidden_layers` blocks and (optionally) the pooler.

    Returns `BaseModelOutputWithPooling` with `last_hidden_state` (B, T, H), `pooler_output` (B, H), and when asked
    `hidden_states` (num_layers + 1 tensors of (B, T, H)) and `attentions` (num_layers tensors of (B, nh, T, T)).
    """

    def __init__(self, config: BertScratchConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = BertScratchEmbeddings(config)
        self.encoder = BertScratchEncoder(config)
        self.pooler = BertScratchPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    # transformers types the argument as any module; the word table is an nn.Embedding (resize_token_embeddings's too).
    def set_input_embeddings(self, value: nn.Embedding) -> None:  # type: ignore[override]
        self.embeddings.word_embeddings = value

    # transformers' TransformersKwargs lists position_ids, which its own models (BertModel too) take as a named
    # argument, as every forward here does: mypy calls that an overlap, hence the ignores on these forwards.
    @capture_outputs
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        plan: BertScratchBatchPlan | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPooling:
        """`plan`: how the batch runs, from `plan_batch` (which checks the inputs and reads what it needs of their
        values in one host sync); a head that needs the plan too makes it once and passes it, else it is made here."""
        check_kwargs(self, kwargs)
        position_ids = position_rows(position_ids)  # (T,) -> (1, T), as transformers' BERT broadcasts it
        if plan is None:
            plan = self.plan_batch(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        elif not isinstance(plan, BertScratchBatchPlan):
            raise TypeError(f"plan must be a BertScratchBatchPlan from plan_batch, or None; got {plan!r}.")
        padding = plan.padding
        if padding is None:
            hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)  # (B, T, H)
        else:
            real_inputs = padding.unpad_inputs(input_ids, token_type_ids, position_ids, inputs_embeds)  # (1, N)
            hidden_states = self.embeddings(*real_inputs).squeeze(0)  # (N, H)
        output_attentions = requested(kwargs, "output_attentions", self.config)
        grid = (plan.batch_size, plan.seq_len if padding is None else padding.seq_len)  # what the attention runs on
        mask = plan.varlen or attention_mask_for(
            self.config, plan.attention_mask, plan.documents, grid, hidden_states, output_attentions
        )
        hidden_states = self.encoder(hidden_states, mask, padding, output_attentions)
        if padding is not None:
            hidden_states = padding.pad(hidden_states, plan.seq_len)  # (B, T, H), zeros at pad positions
        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return BaseModelOutputWithPooling(last_hidden_state=hidden_states, pooler_output=pooled)

    def plan_batch(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: object,
    ) -> BertScratchBatchPlan:
        """How this batch runs (`batching_bertscratch.plan_batch`: the inputs checked, and all the forward needs of
        their values read in one host sync); a head that needs the plan too makes it once and passes it to `forward`."""
        return plan_batch(
            self.config,
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            labels,
            training=self.training,
            dtype=self.dtype,
            **kwargs,
        )


@dataclass
class BertScratchForPreTrainingOutput(ModelOutput):
    """Output of `BertScratchForPreTraining`.

    Attributes:
        loss: MLM loss plus NSP loss, for the labels given.
        prediction_logits: (B, T, V) MLM logits, or (num_labelled, V) under `sparse_prediction` in training.
        seq_relationship_logits: (B, 2) NSP logits (index 0 = IsNext, 1 = NotNext).
        hidden_states: per-layer (B, T, H) when asked for.
        attentions: per-layer (B, nh, T, T) when asked for.
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class BertScratchForReplacedTokenDetectionOutput(ModelOutput):
    """Output of `BertScratchForReplacedTokenDetection`.

    Attributes:
        loss: binary cross-entropy of the replaced/original labels, averaged over the scored tokens.
        logits: (B, T) one logit per token, positive where the token is judged replaced.
        hidden_states: per-layer (B, T, H) when asked for.
        attentions: per-layer (B, nh, T, T) when asked for.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# For the type checker, the mixin is the pretrained model it is mixed into (its config, loss_function, training).
if TYPE_CHECKING:
    _MLMHeadBase = BertScratchPreTrainedModel
else:
    _MLMHeadBase = object


class _BertScratchMLMMixin(_MLMHeadBase):
    """MLM decoding shared by the MaskedLM and PreTraining heads (both own `self.bert` and `self.cls`)."""

    _tied_weights_keys = {"cls.decoder.weight": "bert.embeddings.word_embeddings.weight"}
    # Inference decoding of the (B, T, V) logits by another callable (head, sequence_output, padding) -> logits, or
    # None where it does not apply: `hf_bertscratch.fast_decode.enable` sets one (tiles into a reused CPU buffer).
    logits_decoder: Callable[[BertScratchLMHead, torch.Tensor, BertScratchPadding | None], torch.Tensor | None] | None
    logits_decoder = None
    # The submodules of the heads that use the mixin.
    bert: BertScratchModel
    cls: BertScratchLMHead

    def get_output_embeddings(self) -> nn.Linear:
        return self.cls.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.cls.decoder = new_embeddings

    def _plan_batch(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        labels: torch.Tensor | None,
        kwargs: dict[str, object],
    ) -> BertScratchBatchPlan:
        """The encoder's `plan_batch`, which also counts the labels under `sparse_prediction`: the encoder and the
        decoder (or, in evaluation, the loss) share its one host sync."""
        sparse = labels is not None and self.config.sparse_prediction
        return self.bert.plan_batch(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            labels=labels if sparse else None,
            **kwargs,
        )

    def _mlm_logits_and_loss(
        self,
        sequence_output: torch.Tensor,
        labels: torch.Tensor | None,
        plan: BertScratchBatchPlan,
        num_items_in_batch: object = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits (B, T, V), or (num_labelled, V) in fp32 when decoding sparsely in training, and the MLM loss.

        When the encoder ran unpadded (`plan.padding`), logits at pad positions are 0 like the hidden states there
        (`_decode`). Sparse decoding takes the labelled positions in row-major order (as `labels[labels != -100]`);
        in evaluation under `sparse_prediction` the logits are decoded densely and the loss reads those rows only
        (the cross-entropy of the unlabelled rows, which the loss ignores, is not computed).
        """
        if labels is None or not self.config.sparse_prediction:
            logits = self._decode(sequence_output, plan.padding)
            return logits, None if labels is None else self._mlm_loss(logits, labels, num_items_in_batch)
        selected = plan.labelled_positions(labels)  # (num_labelled,)
        labelled = labels.reshape(-1).index_select(0, selected)
        if not self.training:
            logits = self._decode(sequence_output, plan.padding)
            labelled_logits = logits.reshape(-1, logits.shape[-1]).index_select(0, selected)
            return logits, self._mlm_loss(labelled_logits, labelled, num_items_in_batch)
        hidden = sequence_output.reshape(-1, sequence_output.shape[-1]).index_select(0, selected)
        # (num_labelled, V) in fp32 once: the loss reads it so, and under autocast accelerate's mixed precision
        # converts a model's half-precision outputs to fp32 after the forward (`convert_outputs_to_fp32`), a second
        # copy of the logits that the training step never reads.
        logits = self.cls(hidden).float()
        return logits, self._mlm_loss(logits, labelled, num_items_in_batch)

    def _mlm_loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: object) -> torch.Tensor:
        """transformers' masked-LM loss (`self.loss_function`): cross-entropy over the positions whose label is not
        -100, averaged over them, or over `num_items_in_batch` (Trainer's count of labelled positions across the
        micro-batches of a gradient-accumulation step) when given, so that the accumulated gradient is one batch's."""
        return self.loss_function(logits, labels, vocab_size=logits.shape[-1], num_items_in_batch=num_items_in_batch)

    def _logits_at(self, sequence_output: torch.Tensor, masked_positions: torch.Tensor) -> torch.Tensor:
        """(B, T, H) and (B, K) positions -> (B, K, V) logits decoded at those positions only (fill-mask reads the
        [MASK] positions, and the vocabulary projection is most of a small BERT's inference compute)."""
        batch_size, seq_len, hidden_size = sequence_output.shape
        check_masked_positions(masked_positions, batch_size, seq_len)
        index = masked_positions.long()[..., None].expand(-1, -1, hidden_size)  # (B, K, H)
        return self.cls(sequence_output.gather(1, index))  # (B, K, V)

    def _decode(self, sequence_output: torch.Tensor, padding: BertScratchPadding | None) -> torch.Tensor:
        """(B, T, H) -> (B, T, V) logits, 0 at pad positions when `padding` is given: on the whole grid or at the real
        rows as the device's rule says (`decode_padded`; on a CPU the faster there). The model's `logits_decoder`,
        when set (`hf_bertscratch.fast_decode.enable`), decodes where it applies."""
        if self.logits_decoder is not None:
            logits = self.logits_decoder(self.cls, sequence_output, padding)
            if logits is not None:
                return logits
        if padding is None:
            return self.cls(sequence_output)
        return decode_padded(self.cls, sequence_output, padding, self.config.vocab_size)


class BertScratchForPreTraining(_BertScratchMLMMixin, BertScratchPreTrainedModel):
    """BERT's pretraining model: masked language modelling plus next sentence prediction on the pooled [CLS]."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.bert = BertScratchModel(config)
        self.cls = BertScratchLMHead(config)
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.loss_type = "ForMaskedLM"  # its `loss_function` (transformers has none for the NSP part)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BertScratchForPreTrainingOutput:
        """`labels` (B, T) MLM targets with -100 at unscored positions; `next_sentence_label` (B,) 0 IsNext, 1 not."""
        plan = self._plan_batch(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, labels, kwargs)
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            plan=plan,
            return_dict=True,
            **kwargs,
        )
        logits, loss = self._mlm_logits_and_loss(outputs.last_hidden_state, labels, plan)
        nsp_logits = self.nsp(outputs.pooler_output)
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.reshape(-1))
            loss = nsp_loss if loss is None else loss + nsp_loss
        return BertScratchForPreTrainingOutput(
            loss=loss,
            prediction_logits=logits,
            seq_relationship_logits=nsp_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class BertScratchForMaskedLM(_BertScratchMLMMixin, BertScratchPreTrainedModel):
    """Masked language model: the encoder (no pooler) and the tied MLM head; what `pipeline("fill-mask")` uses."""

    # The MLM loss is a token average: with Trainer's `num_items_in_batch` it stays exact under accumulation.
    accepts_loss_kwargs = True

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.bert = BertScratchModel(config, add_pooling_layer=False)
        self.cls = BertScratchLMHead(config)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput:
        """`labels` (B, T): target ids at scored positions and -100 elsewhere. `masked_positions` (B, K) int64: decode
        the vocabulary at these positions of each row only; the logits are then (B, K, V) (inference: no labels)."""
        if masked_positions is not None and labels is not None:
            raise ValueError("Pass labels or masked_positions, not both: masked_positions is for inference.")
        plan = self._plan_batch(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, labels, kwargs)
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            plan=plan,
            return_dict=True,
            **kwargs,
        )
        if masked_positions is not None:
            logits, loss = self._logits_at(outputs.last_hidden_state, masked_positions), None
        else:
            logits, loss = self._mlm_logits_and_loss(
                outputs.last_hidden_state, labels, plan, kwargs.get("num_items_in_batch")
            )
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BertScratchForNextSentencePrediction(BertScratchPreTrainedModel):
    """Next sentence prediction alone: a 2-way classifier on the pooled [CLS] (0 = IsNext, 1 = NotNext)."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.bert = BertScratchModel(config)
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> NextSentencePredictorOutput:
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.nsp(outputs.pooler_output)  # (B, 2)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.reshape(-1))
        return NextSentencePredictorOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


def _replaced_token_loss(
    logits: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """Binary cross-entropy averaged over the tokens whose label is not -100 and, given a mask, that are not padding
    (transformers' ELECTRA scores the tokens its attention mask keeps); 0 when no token is scored."""
    scored = labels != -100
    attention_mask = key_mask(attention_mask, "The replaced-token loss")
    if attention_mask is not None:
        scored = scored & attention_mask.to(torch.bool)
    weights = scored.to(torch.float32)
    loss = F.binary_cross_entropy_with_logits(
        logits.float(), labels.clamp(min=0).float(), weight=weights, reduction="sum"
    )
    return loss / weights.sum().clamp(min=1.0)


class BertScratchForReplacedTokenDetection(BertScratchPreTrainedModel):
    """ELECTRA's discriminator (Clark et al. 2020): the encoder (no pooler) and a replaced/original logit per token.

    What `--objective electra` pretrains (see `hf_bertscratch.electra`), with the weights of transformers'
    `ElectraForPreTraining` (`hf_bertscratch.convert`). Its folder fine-tunes through any Auto head of the family;
    no Auto class loads this head itself (transformers' `AutoModelForPreTraining` is BERT's MLM + NSP here).
    """

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.bert = BertScratchModel(config, add_pooling_layer=False)
        self.discriminator = BertScratchDiscriminatorHead(config)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BertScratchForReplacedTokenDetectionOutput:
        """`labels` (B, T): 1 where the token was replaced, 0 where it is the original, -100 where not scored."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.discriminator(outputs.last_hidden_state)  # (B, T)
        loss = None if labels is None else _replaced_token_loss(logits, labels, attention_mask)
        return BertScratchForReplacedTokenDetectionOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


def _num_labels(config: BertScratchConfig) -> int:
    """`config.num_labels`, typed `int | None` by transformers though every config sets its `id2label` at init."""
    num_labels = config.num_labels
    assert num_labels is not None, "PreTrainedConfig.__post_init__ always sets id2label"
    return num_labels


def _classifier_dropout(config: BertScratchConfig) -> BertScratchDropout:
    rate = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return BertScratchDropout(rate)


def mean_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T, H) states, (B, T) 0/1 mask -> (B, H): the mean over each row's real tokens ([CLS] and [SEP] included),
    over all T when there is no mask. What sentence-transformers' mean pooling computes."""
    if attention_mask is None:
        return hidden_states.mean(dim=1)
    weights = attention_mask[:, : hidden_states.shape[1], None].to(hidden_states.dtype)  # (B, T, 1)
    return (hidden_states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


def segment_pool(
    hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """(B, T, H) states of sentence pairs -> (B, 4H): the mean u of the first text's tokens (segment 0: [CLS], the
    text, [SEP]) and v of the second's (segment 1), as [u, v, |u - v|, u * v] (Reimers & Gurevych 2019). A row with
    no second segment has v = 0."""
    mask = (
        torch.ones(hidden_states.shape[:2], device=hidden_states.device) if attention_mask is None else attention_mask
    )
    mask = mask[:, : hidden_states.shape[1]].bool()
    second = torch.zeros_like(mask) if token_type_ids is None else token_type_ids[:, : hidden_states.shape[1]] == 1
    u = mean_pool(hidden_states, mask & ~second)  # (B, H)
    v = mean_pool(hidden_states, mask & second)  # (B, H); 0 where a row has no second text
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


def max_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T, H) states, (B, T) 0/1 mask -> (B, H): the elementwise maximum over each row's real tokens."""
    if attention_mask is None:
        return hidden_states.amax(dim=1)
    real = attention_mask[:, : hidden_states.shape[1], None].bool()  # (B, T, 1)
    return hidden_states.masked_fill(~real, torch.finfo(hidden_states.dtype).min).amax(dim=1)


# classifier_pooling -> the width of what the classifier reads, in hidden sizes
_POOLED_WIDTH = {"cls": 1, "mean": 1, "max": 1, "mean-max": 2, "segments": 4}


class BertScratchForSequenceClassification(BertScratchPreTrainedModel):
    """Classifier or regressor: single-label, multi-label or regression by `problem_type`, reading the pooled [CLS]
    (`config.classifier_pooling="cls"`, BERT's head), the mean, the maximum or both ("mean-max") of the last hidden
    states (no pooler), or each text of a pair by its own mean ("segments": `segment_pool`, no pooler). An input
    longer than `config.long_text_max_length` is cut as fine-tuning cut it (`cut_long_texts`)."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.num_labels = _num_labels(config)
        self.bert = BertScratchModel(config, add_pooling_layer=config.classifier_pooling == "cls")
        self.dropout = _classifier_dropout(config)
        width = _POOLED_WIDTH[config.classifier_pooling] * config.hidden_size
        self.classifier = nn.Linear(width, self.num_labels)
        self.post_init()

    def pool(
        self,
        outputs: BaseModelOutputWithPooling,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
    ) -> torch.Tensor:
        """What the classifier reads, by `config.classifier_pooling`: (B, H), (B, 2H) for mean-max, (B, 4H) for
        segments."""
        states, pooling = outputs.last_hidden_state, self.config.classifier_pooling
        assert states is not None  # the encoder always returns its last hidden state
        if pooling != "cls":  # the others pool over the real tokens
            attention_mask = key_mask(attention_mask, f"classifier_pooling={pooling!r}")
        if pooling == "mean":
            return mean_pool(states, attention_mask)
        if pooling == "max":
            return max_pool(states, attention_mask)
        if pooling == "mean-max":
            return torch.cat([mean_pool(states, attention_mask), max_pool(states, attention_mask)], dim=-1)
        if pooling == "segments":
            return segment_pool(states, attention_mask, token_type_ids)
        assert outputs.pooler_output is not None  # "cls": the encoder was built with its pooler
        return outputs.pooler_output

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> SequenceClassifierOutput:
        """`labels`: (B,) class ids, (B, num_labels) multi-hot floats, or (B,) floats for regression."""
        inputs = cut_long_texts(
            self.config,
            {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": token_type_ids,
                "position_ids": position_ids,
                "inputs_embeds": inputs_embeds,
            },
        )
        outputs = self.bert(**inputs, return_dict=True, **kwargs)
        pooled = self.pool(outputs, inputs["attention_mask"], inputs["token_type_ids"])
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        # transformers' loss by `config.problem_type` (MSE, cross-entropy or BCE; inferred from the labels when unset)
        loss = None if labels is None else self.loss_function(labels, logits, self.config)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BertScratchForTokenClassification(BertScratchPreTrainedModel):
    """Per-token classifier (NER, POS) on the last hidden states."""

    # The loss is a token average: with Trainer's `num_items_in_batch` it stays exact under accumulation.
    accepts_loss_kwargs = True

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.num_labels = _num_labels(config)
        self.bert = BertScratchModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput:
        """`labels` (B, T) class ids, -100 where not scored."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))  # (B, T, num_labels)
        loss = None
        if labels is not None:
            # Cross-entropy over the positions not labelled -100, averaged over them, or over `num_items_in_batch`
            # (Trainer's count of them across a gradient-accumulation step's micro-batches) when given.
            loss = self.loss_function(logits, labels, self.config, num_items_in_batch=kwargs.get("num_items_in_batch"))
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BertScratchForQuestionAnswering(BertScratchPreTrainedModel):
    """Extractive QA (SQuAD): start and end logits per token."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.num_labels = _num_labels(config)
        self.bert = BertScratchModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> QuestionAnsweringModelOutput:
        """`start_positions`/`end_positions` (B,): answer span; positions beyond T are ignored in the loss."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.qa_outputs(outputs.last_hidden_state)  # (B, T, 2)
        if logits.shape[-1] != 2:
            raise ValueError(
                f"Question answering needs config.num_labels == 2 (a start and an end logit per token), got {logits.shape[-1]}."
            )
        start_logits, end_logits = (t.squeeze(-1).contiguous() for t in logits.split(1, dim=-1))
        # the mean of the start and end cross-entropies; positions outside the sequence are ignored
        loss = self.loss_function(start_logits.float(), end_logits.float(), start_positions, end_positions)
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class BertScratchForMultipleChoice(BertScratchPreTrainedModel):
    """Multiple choice (SWAG): each (B, C, T) choice is encoded, scored from its pooled [CLS], softmaxed over C."""

    def __init__(self, config: BertScratchConfig) -> None:
        super().__init__(config)
        self.bert = BertScratchModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(  # type: ignore[misc]  # TransformersKwargs lists position_ids too
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput:
        """Inputs (B, C, T) (`inputs_embeds` (B, C, T, H)); `labels` (B,) index of the right choice."""
        choices = input_ids if input_ids is not None else inputs_embeds
        if choices is None:
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        num_choices = choices.shape[1]

        def flat(x: torch.Tensor | None, tail: int = 1) -> torch.Tensor | None:
            return None if x is None else x.reshape(-1, *x.shape[-tail:])  # (B * C, T[, H])

        outputs = self.bert(
            flat(input_ids),
            attention_mask=flat(attention_mask),
            token_type_ids=flat(token_type_ids),
            position_ids=flat(position_ids),
            inputs_embeds=flat(inputs_embeds, 2),
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)  # (B, C)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.reshape(-1))
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


__all__ = [
    "AUTO_CLASS_TO_MODEL",
    "BertScratchPreTrainedModel",
    "BertScratchModel",
    "BertScratchForPreTraining",
    "BertScratchForPreTrainingOutput",
    "BertScratchForMaskedLM",
    "BertScratchForNextSentencePrediction",
    "BertScratchForReplacedTokenDetection",
    "BertScratchForReplacedTokenDetectionOutput",
    "BertScratchForSequenceClassification",
    "BertScratchForTokenClassification",
    "BertScratchForQuestionAnswering",
    "BertScratchForMultipleChoice",
    "document_ids",
    "max_pool",
    "mean_pool",
    "segment_pool",
]
