"""Replaced-token detection (ELECTRA, Clark et al. 2020) as a pretraining objective: `--objective electra`.

A small masked-LM generator fills the masked positions of each batch (the masking collator's masks) with tokens
sampled from its softmax, and the discriminator, `BertScratchForReplacedTokenDetection`, learns for every non-padding
token whether it was replaced; a sampled token equal to the original counts as original. The loss is the generator's
MLM loss plus `discriminator_weight` times the discriminator's, and one optimizer trains both.

Masked-LM start. From random weights a small discriminator can sit at the prior (every token "original") for a whole
short budget: telling a sampled token from the original needs the context, and an encoder that does not yet read its
neighbours has none (the masked-LM unigram plateau, met from the other side). With `mlm_start_fraction` the pair
first trains the discriminator's encoder as a masked LM, through an MLM head of its own decoding through the shared
word table (`start_mlm`), beside the generator's MLM loss; the Trainer switches to replaced-token detection once
that fraction of the run is done (`PretrainingTrainer`), when the encoder reads its neighbours. The start head is
not part of either saved folder.

Shared embeddings. ELECTRA shares the token and position embeddings of the generator and the discriminator; with a
narrower generator, transformers' ELECTRA projects the shared embeddings into the generator's width after their
LayerNorm (`ElectraModel.embeddings_project`). Here the generator reads the discriminator's word, position and segment
tables through one learned bias-free projection P (H -> the generator's width Hg) and keeps its own LayerNorm. Since
P(e_word + e_position + e_segment) = P e_word + P e_position + P e_segment, the generator is exactly a
`BertScratchForMaskedLM` of width Hg whose tables are E P^T, its MLM decoder tied to the projected word table (so
it also decodes through the shared table). That is what a finished run saves in `generator/`: an ordinary fill-mask
folder, with the projected tables written out. Projecting after a shared LayerNorm, as transformers does, would need
an `embeddings_project` that BertScratch does not have.

    from hf_bertscratch.electra import ElectraPretrainingModel
    model = ElectraPretrainingModel(BertScratchForReplacedTokenDetection(config))
    loss = model(input_ids, attention_mask, labels=mlm_labels).loss
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F
from transformers import PreTrainedTokenizerBase
from transformers.utils import ModelOutput

from .configuration_bertscratch import BertScratchConfig
from .modeling_bertscratch import BertScratchForMaskedLM, BertScratchForReplacedTokenDetection
from .run_folder import GENERATOR_FOLDER

# The generator's tables that come from the discriminator (module names in `BertScratchEmbeddings`).
SHARED_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


def check_electra_arguments(
    generator_width_fraction: float, discriminator_weight: float, mlm_start_fraction: float = 0.0
) -> None:
    """Refuse a generator width fraction outside (0, 1], a discriminator weight that is not positive, or a masked-LM
    start fraction outside [0, 1)."""
    if not 0.0 < generator_width_fraction <= 1.0:
        raise ValueError(f"generator_width_fraction must be in (0, 1], got {generator_width_fraction}.")
    if not discriminator_weight > 0:
        raise ValueError(f"discriminator_weight must be positive, got {discriminator_weight}.")
    if not 0.0 <= mlm_start_fraction < 1.0:
        raise ValueError(f"mlm_start_fraction must be in [0, 1), got {mlm_start_fraction}.")


def generator_config(config: BertScratchConfig, width_fraction: float) -> BertScratchConfig:
    """The generator's config: the discriminator's, `width_fraction` as wide, with as many layers.

    The width is rounded down to whole heads of the discriminator's head size (heads = width // head size), so the
    head size is kept; a generator narrower than one head has one head of that width. The feed-forward layer keeps
    the discriminator's ratio to the width.
    """
    check_electra_arguments(width_fraction, discriminator_weight=1.0)
    head_size = config.hidden_size // config.num_attention_heads
    width = max(1, round(config.hidden_size * width_fraction))
    heads = max(1, width // head_size)
    if width >= head_size:
        width = heads * head_size
    values = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "auto_map")}
    values.update(
        hidden_size=width,
        num_attention_heads=heads,
        intermediate_size=max(1, round(config.intermediate_size * width / config.hidden_size)),
    )
    return BertScratchConfig.from_dict(values)


def replace_masked_tokens(
    input_ids: torch.Tensor, labels: torch.Tensor, sampled: torch.Tensor, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and labels: the original tokens with the generator's samples at the masked positions.

    Args:
        input_ids: (B, T) the masked batch (the collator's [MASK], random and kept tokens at the masked positions).
        labels: (B, T) the original token at the masked positions, -100 elsewhere.
        sampled: (M,) the generator's sample for each masked position, in row-major order (as `labels[labels != -100]`).
        attention_mask: (B, T) 1 for real tokens, 0 for padding; None when nothing is padded.

    Returns:
        (B, T) discriminator input ids, and (B, T) labels: 1 where the token differs from the original, 0 where it is
        the original (a sample equal to the original included), -100 at padding.
    """
    masked = labels != -100
    original = torch.where(masked, labels, input_ids)
    corrupted = original.masked_scatter(masked, sampled.to(original.dtype))
    replaced = (corrupted != original).long()
    if attention_mask is not None:
        replaced = replaced.masked_fill(attention_mask == 0, -100)
    return corrupted, replaced


def _at_weight_zero(module: nn.Module) -> torch.Tensor | float:
    """0 x the sum of `module`'s parameters: added to a loss, it gives each of them a (zero) gradient (0.0 for a
    module without parameters)."""
    return 0.0 * sum(parameter.sum() for parameter in module.parameters())


@dataclass
class ElectraPretrainingOutput(ModelOutput):
    """Output of `ElectraPretrainingModel`.

    Attributes:
        loss: generator MLM loss + discriminator_weight x discriminator loss.
        generator_logits: (B, T, V) MLM logits, or (M, V) at the M masked positions under sparse prediction.
        discriminator_logits: (B, T) replaced-token logits.
        replaced_labels: (B, T) 1 replaced, 0 original, -100 padding: what the discriminator was scored on.
        generator_loss: the generator's MLM loss alone.
        discriminator_loss: the discriminator's loss alone (before the weight).
    """

    loss: torch.Tensor | None = None
    generator_logits: torch.Tensor | None = None
    discriminator_logits: torch.Tensor | None = None
    replaced_labels: torch.Tensor | None = None
    generator_loss: torch.Tensor | None = None
    discriminator_loss: torch.Tensor | None = None


class ElectraPretrainingModel(nn.Module):
    """The generator and the discriminator trained together, as the Trainer's model under `--objective electra`.

    Trainer checkpoints hold this module's state dict (discriminator, generator and projection: one copy of the shared
    tables), which resume reloads as is; `save_pretrained` writes the finished run as two ordinary folders.
    """

    # Each loss is a per-batch average (the generator's over masked tokens, the discriminator's over all real
    # tokens): Trainer's `num_items_in_batch`, a count of masked tokens, fits only the first, so it is not taken.
    accepts_loss_kwargs = False

    def __init__(
        self,
        discriminator: BertScratchForReplacedTokenDetection,
        generator_width_fraction: float = 0.25,
        discriminator_weight: float = 50.0,
        mlm_start: bool = False,
    ) -> None:
        super().__init__()
        check_electra_arguments(generator_width_fraction, discriminator_weight)
        self.discriminator = discriminator
        # With `mlm_start`, the discriminator's encoder can train as a masked LM (`masked_lm_phase`, set by the
        # Trainer): `start_mlm` is an MLM model whose encoder and decoder weights are the discriminator's (supplied
        # at each call, as the generator's tables are); only its head's transform and bias are its own.
        self.start_mlm = BertScratchForMaskedLM(discriminator.config) if mlm_start else None
        self.masked_lm_phase = False
        if self.start_mlm is not None:
            for module in self.start_mlm.bert.modules():
                for name in list(module._parameters):
                    delattr(module, name)
            del self.start_mlm.cls.decoder.weight
        self.discriminator_weight = float(discriminator_weight)
        config = generator_config(discriminator.config, generator_width_fraction)
        self.generator = BertScratchForMaskedLM(config)
        # The generator's tables are not its own: `generator_tables` computes them for every forward.
        for name in SHARED_TABLES:
            del getattr(self.generator.bert.embeddings, name).weight
        del self.generator.cls.decoder.weight  # tied to the word table
        self.embeddings_project = nn.Linear(discriminator.config.hidden_size, config.hidden_size, bias=False)
        # Orthonormal rows: the projected tables start with the scale of the discriminator's (std 0.02, or the
        # sinusoid's), where a N(0, 0.02) matrix would scale them by 0.02 * sqrt(H) (0.23 at H = 128).
        nn.init.orthogonal_(self.embeddings_project.weight)

    def generator_tables(self) -> dict[str, torch.Tensor]:
        """The generator's embedding tables and tied decoder, by parameter name: the discriminator's tables projected
        to the generator's width, (rows, H) @ P^T -> (rows, Hg); differentiable in both."""
        shared = self.discriminator.bert.embeddings
        tables = {
            f"bert.embeddings.{name}.weight": self.embeddings_project(getattr(shared, name).weight)
            for name in SHARED_TABLES
        }
        tables["cls.decoder.weight"] = tables["bert.embeddings.word_embeddings.weight"]
        return tables

    def start_tables(self) -> dict[str, torch.Tensor]:
        """`start_mlm`'s weights that are the discriminator's, by parameter name: its encoder's and, as the decoder,
        its word table."""
        encoder = self.discriminator.bert
        tables: dict[str, torch.Tensor] = {f"bert.{name}": tensor for name, tensor in encoder.named_parameters()}
        tables["cls.decoder.weight"] = encoder.embeddings.word_embeddings.weight
        return tables

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ElectraPretrainingOutput:
        """`input_ids` (B, T) masked by the collator, `labels` (B, T) the original tokens at the masked positions and
        -100 elsewhere."""
        if labels is None:
            raise ValueError("ELECTRA pretraining needs labels: the original tokens at the masked positions.")
        inputs = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        generated = functional_call(self.generator, self.generator_tables(), (input_ids,), {**inputs, "labels": labels})
        if self.masked_lm_phase:
            if self.start_mlm is None:
                raise ValueError("masked_lm_phase needs a pair built with mlm_start=True.")
            started = functional_call(self.start_mlm, self.start_tables(), (input_ids,), {**inputs, "labels": labels})
            # The parameters this phase does not use join the graph at weight 0, so that every parameter has a
            # gradient in every step (DDP without its unused-parameter search). AdamW still steps them: weight decay
            # shrinks the waiting replaced-token head a little, and its moments start at the switch while its step
            # count does not (a larger first update, as after a warm-up). The logged training loss changes meaning
            # at the switch: generator + start loss before, generator + weight x discriminator loss after.
            return ElectraPretrainingOutput(
                loss=generated.loss + started.loss + _at_weight_zero(self.discriminator.discriminator),
                generator_logits=generated.logits,
                generator_loss=generated.loss,
            )
        masked = labels != -100
        with torch.no_grad():
            logits = generated.logits if generated.logits.dim() == 2 else generated.logits[masked]  # (M, V)
            sampled = torch.multinomial(F.softmax(logits.float(), dim=-1), 1).squeeze(-1)
            corrupted, replaced = replace_masked_tokens(input_ids, labels, sampled, attention_mask)
        judged = self.discriminator(corrupted, labels=replaced, **inputs)
        loss = generated.loss + self.discriminator_weight * judged.loss
        if self.start_mlm is not None:  # the start head, done with, at weight 0 (see above)
            loss = loss + _at_weight_zero(self.start_mlm)
        return ElectraPretrainingOutput(
            loss=loss,
            generator_logits=generated.logits,
            discriminator_logits=judged.logits,
            replaced_labels=replaced,
            generator_loss=generated.loss,
            discriminator_loss=judged.loss,
        )

    @torch.no_grad()
    def export_generator(self) -> BertScratchForMaskedLM:
        """The generator as an ordinary `BertScratchForMaskedLM` (on the CPU, in eval mode): its own weights and the
        projected tables, written out."""
        generator = BertScratchForMaskedLM(self.generator.config)
        state = {**self.generator.state_dict(), **self.generator_tables()}
        generator.load_state_dict({name: tensor.detach().cpu() for name, tensor in state.items()}, strict=True)
        return generator.eval()

    def save_pretrained(self, output_dir: str | Path, tokenizer: PreTrainedTokenizerBase | None = None) -> None:
        """The finished run: the discriminator in `output_dir`, the generator in `output_dir/generator`, each an
        ordinary BertScratch folder (config, weights, remote code) with the tokenizer when given."""
        output_dir = Path(output_dir)
        folders = {output_dir: self.discriminator, output_dir / GENERATOR_FOLDER: self.export_generator()}
        for folder, model in folders.items():
            model.save_pretrained(folder)
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)


# ------------------------------------------------------------------------------------------------ evaluation


def replaced_token_reductions(logits: torch.Tensor, replaced: torch.Tensor) -> torch.Tensor:
    """(B, T) discriminator logits and labels -> (B, T, 3) floats: the prediction (1 = replaced), the token's binary
    cross-entropy (0 where unscored) and the label (-100 where unscored), so that no logits accumulate in evaluation."""
    scored = replaced != -100
    token_loss = (
        F.binary_cross_entropy_with_logits(logits.float(), replaced.clamp(min=0).float(), reduction="none") * scored
    )
    return torch.stack([(logits > 0).float(), token_loss, replaced.float()], dim=-1)


def replaced_token_metrics(reduced: np.ndarray) -> dict[str, float]:
    """From the concatenated `replaced_token_reductions`: the discriminator's accuracy and loss over the scored
    tokens, and the fraction of them replaced (1 minus it is the accuracy of always answering "original")."""
    predicted, token_loss, label = reduced[..., 0], reduced[..., 1], reduced[..., 2]
    scored = label != -100
    count = max(int(scored.sum()), 1)
    return {
        "discriminator_accuracy": float((predicted[scored] == label[scored]).sum() / count),
        "discriminator_loss": float(token_loss[scored].sum() / count),
        "replaced_fraction": float((label[scored] == 1).sum() / count),
    }


__all__ = [
    "GENERATOR_FOLDER",
    "ElectraPretrainingModel",
    "ElectraPretrainingOutput",
    "check_electra_arguments",
    "generator_config",
    "replace_masked_tokens",
    "replaced_token_metrics",
    "replaced_token_reductions",
]
