"""Configuration of BertScratch, a from-scratch BERT that lives in the transformers ecosystem.

This file imports nothing but transformers, huggingface_hub and the standard library so that `save_pretrained` can
ship it next to the weights for `trust_remote_code=True` loading.
"""

import copy
from dataclasses import field
from typing import TypedDict

from huggingface_hub.dataclasses import strict
from transformers import PretrainedConfig

# Google's BERT sizes (Turc et al. 2019, "Well-Read Students Learn Better"): heads = H / 64, intermediate = 4H.
_SIZES: dict[str, tuple[int, int]] = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}


class BertScratchPreset(TypedDict):
    """The sizes a `PRESETS` entry gives `BertScratchConfig`."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int


PRESETS: dict[str, BertScratchPreset] = {
    name: {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": hidden // 64,
        "intermediate_size": 4 * hidden,
    }
    for name, (layers, hidden) in _SIZES.items()
}

# What the sequence classification head reads: the pooled [CLS] (BERT), the mean, the maximum or both of the last
# hidden states, or each text of a pair by its own mean.
CLASSIFIER_POOLINGS = ("cls", "mean", "max", "mean-max", "segments")
# How the sequence classification head cuts a single text longer than it was fine-tuned on: keep its start, its end,
# or its start and end (Sun et al. 2019).
LONG_TEXT_TRUNCATIONS = ("head", "tail", "head+tail")

# What fine-tuning records in a model's config for its task alone (`finetuning.load_model`): the head's classes and
# problem type (transformers' entries; num_labels follows id2label), how the sequence head reads and cuts a text, the
# columns its data was read from, and the activation sentence-transformers' CrossEncoder applies to its scores. A model
# pretrained on from a fine-tuned one holds none of them (`drop_task_entries`).
TASK_ENTRIES = (
    "id2label",
    "label2id",
    "problem_type",
    "multi_label_threshold",
    "classifier_pooling",
    "long_text_max_length",
    "long_text_truncation",
    "long_text_head_tokens",
    "input_columns",
    "sentence_transformers",
)

_ACTIVATIONS = ("gelu", "gelu_new", "gelu_python", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")


@strict
class BertScratchConfig(PretrainedConfig):
    r"""Configuration for the BertScratch model family; the fields and defaults are those of `BertConfig`
    (bert-base-uncased), so a converted Google/transformers BERT checkpoint keeps its numbers.

    Args:
        vocab_size: Size of the WordPiece vocabulary (rows of the word embedding and of the tied MLM decoder).
        hidden_size: Width H of every hidden state; must be divisible by `num_attention_heads`.
        num_hidden_layers: Number of post-LayerNorm transformer blocks.
        num_attention_heads: Heads per attention layer; head size is `hidden_size // num_attention_heads`.
        intermediate_size: Width of the GELU feed-forward layer (4H in Google's presets).
        hidden_act: Activation of the feed-forward layer and of the MLM transform.
        hidden_dropout_prob: Dropout on embeddings and on every residual branch.
        attention_probs_dropout_prob: Dropout on the attention probabilities.
        max_position_embeddings: Longest sequence the learned position embeddings cover.
        type_vocab_size: Number of segment (token type) ids; 2 for sentence pairs.
        initializer_range: Standard deviation of the truncated-free normal init of all weight matrices.
        sinusoidal_position_std: When set, the learned position embeddings start from the sinusoid table of
            Vaswani et al. (2017), rescaled to this standard deviation, instead of N(0, initializer_range); they are
            trained as usual, only the starting point differs. None (the default) is BERT's init. A structured start
            lets a small BERT trained from scratch attend to neighbouring tokens within hundreds of steps instead of
            sitting on the unigram plateau of masked language modelling (pretraining uses 0.05; README, Results).
        layer_norm_eps: Epsilon of every LayerNorm.
        pad_token_id: Id of [PAD]; its word embedding row is initialised to zero.
        classifier_dropout: Dropout before classification heads; `hidden_dropout_prob` when None.
        classifier_pooling: What the sequence classification and regression head reads: "cls" (BERT's pooler,
            tanh(dense(h_[CLS])), exactly as transformers' BERT) or "mean" (the mean of the last hidden states over
            the real tokens, no pooler; ModernBERT's and Cramming's choice), "max" (their elementwise maximum over
            the real tokens), "mean-max" (both, concatenated: 2H, as ULMFiT's concat pooling) or "segments" (for sentence pairs: the
            mean of each text's tokens, u and v, read as [u, v, |u - v|, u * v], as Sentence-BERT's classifier; no
            pooler). Masked-LM pretraining never trains the pooler, while the mean of a text's last hidden states
            already ranks sentence similarity before any fine-tuning (docs/fine-tuning.md).
        long_text_max_length: The sequence classification head's input length (tokens, [CLS] and [SEP] included):
            a longer input is cut to it by `long_text_truncation` before the encoder reads it, so a pipeline handed a
            whole review gets what fine-tuning measured. None (the default): inputs are read as given, up to
            `max_position_embeddings`.
        long_text_truncation: How a single text longer than `long_text_max_length` is cut: "head" keeps its first
            tokens, "tail" its last, "head+tail" its first `long_text_head_tokens` and its last (Sun et al. 2019);
            [CLS] and the final [SEP] stay. Fine-tuning cuts its features the same way (`--truncation`).
        long_text_head_tokens: The text tokens "head+tail" keeps from the start.
        input_columns: The columns of its data a model fine-tuned by `bertscratch finetune` read each example's
            input from, by role ("text", "text_pair", "tokens", "question", "context"; not its labels), e.g.
            `{"text": "review"}` after `--text_column review`. The commands that run it on a file of inputs
            (`bertscratch classify MODEL --input_file new.csv`, `answer`, `similarity`, ...) read the same columns
            where no column flag names another. None (the default): not recorded (a pretrained model, or one
            fine-tuned elsewhere); the commands read their default columns.
        sentence_transformers: sentence-transformers' own entry, which its `CrossEncoder` reads: `{"activation_fn":
            "torch.nn.modules.linear.Identity"}` names the activation `CrossEncoder(folder).predict` applies to the
            sequence head's logits, so that it predicts the model's own scores. Fine-tuning records it for a regressor
            (Identity: its score, where CrossEncoder's default would squash a head of one output with a sigmoid) and a
            multi-label classifier (Sigmoid: each label's, as transformers' text-classification pipeline gives
            them). {} (the default): not recorded; CrossEncoder's default, the logits for a head of two or more
            outputs (a single-label classifier; `predict(..., apply_softmax=True)` gives the pipeline's
            probabilities).
        multi_label_threshold: A multi-label classifier's (problem_type "multi_label_classification"): the sigmoid
            above which a label is given, as `bertscratch finetune` scored it (0.5, `--multi_label_threshold`, or
            the one chosen on the eval split): one number for every label, or a mapping giving each label of
            id2label its own (`--multi_label_threshold auto-per-label`), e.g. `{"cats": 0.3, "dogs": 0.55}`, each
            in (0, 1); `bertscratch classify` gives labels at it unless `--threshold` names one for every label.
            None (the default): not recorded (another head, or a model fine-tuned elsewhere): 0.5.
        sparse_prediction: During training with `labels`, decode the MLM vocabulary only at labelled positions
            (`labels != -100`). The loss is unchanged; `logits` then has shape `(num_labelled, vocab_size)`, in fp32
            under autocast too (what the loss reads). In evaluation the logits stay `(batch, seq_len, vocab_size)`
            and the loss reads the labelled rows only.
        unpad_inputs: When `attention_mask` marks padding, run the dense layers on the real tokens only where that
            is faster: on a CPU, under FlashAttention or PyTorch's varlen kernel (sdpa on a CUDA device in half
            precision), and otherwise on a CUDA device from `hidden_size` 768 up (`padding_bertscratch.DEVICE_RULES`). Outputs at real positions are unchanged; where the batch
            ran unpadded, hidden states and MLM logits at padded positions are zero.

    Example:
        >>> import hf_bertscratch
        >>> config = hf_bertscratch.BertScratchConfig(**hf_bertscratch.PRESETS["mini"])
    """

    model_type = "bertscratch"

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float | int = 0.1
    attention_probs_dropout_prob: float | int = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sinusoidal_position_std: float | None = None
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    classifier_dropout: float | int | None = None
    classifier_pooling: str = "cls"
    long_text_max_length: int | None = None
    long_text_truncation: str = "head"
    long_text_head_tokens: int = 128
    input_columns: dict[str, str] | None = None
    # {} rather than None when not recorded: CrossEncoder looks into it whenever the config has the attribute.
    sentence_transformers: dict[str, str] = field(default_factory=dict)
    multi_label_threshold: float | dict[str, float] | None = None
    tie_word_embeddings: bool = True
    sparse_prediction: bool = True
    unpad_inputs: bool = True

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs: object) -> "BertScratchConfig":
        """`PretrainedConfig.from_dict`, refusing another model type's config instead of loading random weights.

        transformers only warns when, e.g., a `bert` folder is loaded with `BertScratchForMaskedLM.from_pretrained`,
        and then silently initialises every renamed parameter; such a folder has to be converted first.
        """
        model_type = config_dict.get("model_type", cls.model_type)
        if model_type != cls.model_type:
            raise ValueError(
                f"This checkpoint has model_type {model_type!r}, expected {cls.model_type!r}. Convert a transformers "
                "BERT checkpoint first: bertscratch convert SOURCE OUTPUT_DIR."
            )
        return super().from_dict(config_dict, **kwargs)

    def validate_architecture(self) -> None:
        """Reject shapes the model cannot be built with, naming the bad value (run by `@strict` on creation)."""
        positive = (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        for name in positive:
            value = getattr(self, name)
            if value <= 0:
                raise ValueError(f"BertScratchConfig.{name} must be a positive integer, got {value}.")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"BertScratchConfig.hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}); try num_attention_heads={max(1, self.hidden_size // 64)}."
            )
        if self.classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ValueError(
                f"BertScratchConfig.classifier_pooling must be one of {CLASSIFIER_POOLINGS}, got {self.classifier_pooling!r}."
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(f"BertScratchConfig.hidden_act must be one of {_ACTIVATIONS}, got {self.hidden_act!r}.")
        if self.sinusoidal_position_std is not None and not self.sinusoidal_position_std > 0:
            raise ValueError(
                f"BertScratchConfig.sinusoidal_position_std must be positive or None, got {self.sinusoidal_position_std}."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"BertScratchConfig.{name} must be in [0, 1), got {value}.")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"BertScratchConfig.layer_norm_eps must be positive, got {self.layer_norm_eps}.")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"BertScratchConfig.pad_token_id must be None or in [0, vocab_size - 1 = {self.vocab_size - 1}], got "
                f"{self.pad_token_id}."
            )

    def validate_multi_label_threshold(self) -> None:
        """Reject a recorded multi-label threshold outside (0, 1), at which every label, or none, would be given, and
        per-label thresholds that do not give each label of id2label one."""
        # The same check as `hf_bertscratch_base.model_config.check_recorded_thresholds` (the front door's, on a
        # config.json), written out here as this file imports nothing of the package.
        field, recorded = "BertScratchConfig.multi_label_threshold", self.multi_label_threshold
        names = [str(name) for name in (self.id2label or {}).values()]
        if isinstance(recorded, dict):
            lacking = [name for name in names if name not in recorded]
            unknown = [name for name in recorded if name not in names]
            if lacking or unknown:
                problem = (
                    f"{', '.join(lacking)} lacks one" if lacking else f"{', '.join(unknown)} is no label of the model"
                )
                raise ValueError(
                    f"{field} must give each of the labels {names} one threshold, got {recorded} ({problem})."
                )
            for name, threshold in recorded.items():
                if not 0.0 < threshold < 1.0:
                    raise ValueError(f"{field} must be None or in (0, 1) for each label, got {threshold} for {name}.")
        elif recorded is not None and not 0.0 < recorded < 1.0:
            raise ValueError(f"{field} must be None or in (0, 1), got {recorded}.")

    def validate_long_text(self) -> None:
        """Reject a long-text setting the sequence head cannot apply, naming the bad value (run by `@strict`)."""
        if self.long_text_truncation not in LONG_TEXT_TRUNCATIONS:
            raise ValueError(
                f"BertScratchConfig.long_text_truncation must be one of {LONG_TEXT_TRUNCATIONS}, got "
                f"{self.long_text_truncation!r}."
            )
        length = self.long_text_max_length
        if length is not None and not 3 <= length <= self.max_position_embeddings:
            raise ValueError(
                f"BertScratchConfig.long_text_max_length must be None or in [3, max_position_embeddings "
                f"{self.max_position_embeddings}], got {length}."
            )
        if (
            length is not None
            and self.long_text_truncation == "head+tail"
            and not 0 <= self.long_text_head_tokens <= length - 2
        ):
            raise ValueError(
                f"BertScratchConfig.long_text_head_tokens must be in [0, long_text_max_length - 2 = {length - 2}], got "
                f"{self.long_text_head_tokens}."
            )


def drop_task_entries(config: BertScratchConfig) -> list[str]:
    """Put each of `TASK_ENTRIES` that `config` sets otherwise back to a new model's value, so that a model
    pretrained on from a fine-tuned one names no labels, head settings, threshold, input columns or CrossEncoder
    activation of the fine-tune's task (the commands that run a model on a file of inputs would look for that task's
    columns); returns their names."""
    new = BertScratchConfig()
    dropped = [name for name in TASK_ENTRIES if getattr(config, name) != getattr(new, name)]
    for name in dropped:
        setattr(config, name, copy.deepcopy(getattr(new, name)))
    return dropped


__all__ = [
    "CLASSIFIER_POOLINGS",
    "LONG_TEXT_TRUNCATIONS",
    "TASK_ENTRIES",
    "BertScratchConfig",
    "BertScratchPreset",
    "PRESETS",
    "drop_task_entries",
]
