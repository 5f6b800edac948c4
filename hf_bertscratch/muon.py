"""Muon for the encoder's weight matrices, AdamW for every other parameter, as one optimizer.

Muon (Jordan et al. 2024; "Muon is scalable for LLM training", Liu et al. 2025) replaces a matrix's momentum update by
the nearest semi-orthogonal matrix (five Newton-Schulz iterations), which steps each direction of the matrix by the
same amount. It is meant for hidden weight matrices; embeddings, the output layer, biases and LayerNorms stay with
AdamW. `torch.optim.Muon` is the reference: `Muon` here is it, except that the orthogonalisation runs in a chosen
dtype where torch's always casts to bf16, which a CPU without bf16 matrix instructions emulates (the tiny model's eight
matrices on one thread of an AVX2 AMD EPYC: 381 ms a step in bf16, 19 ms in fp32, against a ~280 ms training step).
With torch's `adjust_lr_fn="match_rms_adamw"` the update's RMS matches AdamW's, so one learning rate and weight decay
serve both. A fused projection (the attention's Q, K and V stacked in one (3H, H) weight) can be orthogonalised as
the matrices it stacks (a param group's `blocks`), as modded-nanogpt orthogonalises its (3, H, H) QKV weight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

# Which parameters Muon trains: the 2-D weights of the encoder layers (attention and feed-forward).
ENCODER_LAYER_PREFIX = "encoder.layers."
# The attention's fused projection: Q, K and V stacked in one (3H, H) weight.
FUSED_QKV_SUFFIX = ".attention.qkv.weight"


def orthogonalise(
    update: torch.Tensor, dtype: torch.dtype, coefficients: tuple[float, float, float], steps: int, eps: float
) -> torch.Tensor:
    """The quintic Newton-Schulz iteration of `torch.optim.Muon` (the same operations in the same order), in `dtype`."""
    a, b, c = coefficients
    ortho = update.to(dtype)
    tall = update.size(0) > update.size(1)
    if tall:
        ortho = ortho.T
    ortho = ortho.div(ortho.norm().clamp(min=eps))
    for _ in range(steps):
        gram = ortho @ ortho.T
        gram_update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        ortho = torch.addmm(ortho, gram_update, ortho, beta=a)
    return ortho.T if tall else ortho


def orthogonalisation_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU (as torch's Muon), fp32 on a CPU (bf16 matrix products are emulated on most of them)."""
    return torch.float32 if device.type == "cpu" else torch.bfloat16


class Muon(torch.optim.Muon):
    """`torch.optim.Muon` (same arguments, state and update) orthogonalising in `orthogonalisation_dtype` of each
    parameter's device, or in `dtype` when given.

    A param group's `blocks` (default 1) says how many matrices each of its weights stacks along its rows (a fused
    QKV projection: 3); each is orthogonalised and its step sized apart, as if it were a parameter of its own. It
    describes the model, so loading a state dict keeps the groups' `blocks` as constructed.

    `replicas`, a process group whose ranks hold the same parameters and gradients (data parallel, DDP), shares the
    orthogonalisation out: each rank orthogonalises its share of the matrices (`owners`) and broadcasts the updates,
    and every rank applies every update, so the ranks stay identical and equal to one process's step (each rank
    would otherwise repeat the whole iteration: about 7% of a 2-process CPU pretraining step)."""

    def __init__(
        self,
        params: Any,
        dtype: torch.dtype | None = None,
        replicas: torch.distributed.ProcessGroup | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(params, **kwargs)
        self.dtype = dtype
        self.replicas = replicas
        for group in self.param_groups:
            blocks = group.setdefault("blocks", 1)
            for param in group["params"]:
                if not isinstance(blocks, int) or blocks < 1 or param.shape[0] % blocks:
                    raise ValueError(
                        f"a Muon param group's blocks must be a positive int dividing each weight's rows, got "
                        f"{blocks!r} for a weight of shape {tuple(param.shape)}."
                    )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """`torch.optim.Optimizer.load_state_dict`, each group keeping the `blocks` it was constructed with."""
        blocks = [group["blocks"] for group in self.param_groups]
        super().load_state_dict(state_dict)
        for group, count in zip(self.param_groups, blocks, strict=True):
            group["blocks"] = count

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        updates = [
            (group, param, self._momentum_update(group, param))
            for group in self.param_groups
            for param in group["params"]
            if param.grad is not None
        ]
        rank, world_size = 0, 1
        if self.replicas is not None:
            rank = torch.distributed.get_rank(self.replicas)
            world_size = torch.distributed.get_world_size(self.replicas)
        ranks = owners(
            [orthogonalisation_cost(param.shape, group["blocks"]) for group, param, _ in updates], world_size
        )
        orthogonal, pending = [], []
        for (group, param, update), owner in zip(updates, ranks, strict=True):
            if owner == rank:
                dtype = self.dtype or orthogonalisation_dtype(param.device)
                steps = group["ns_coefficients"], group["ns_steps"], group["eps"]
                blocks = update.view(group["blocks"], -1, update.shape[-1]).unbind(0)
                parts = [orthogonalise(block, dtype, *steps) for block in blocks]
                ortho = (parts[0] if len(parts) == 1 else torch.cat(parts)).to(param.dtype).contiguous()
            else:
                ortho = torch.empty_like(param)
            if self.replicas is not None:  # started as soon as it is made, waited for below
                pending.append(torch.distributed.broadcast(ortho, group=self.replicas, group_src=owner, async_op=True))
            orthogonal.append(ortho)
        for work in pending:
            work.wait()
        for (group, param, _), ortho in zip(updates, orthogonal, strict=True):
            lr = group["lr"]
            param.mul_(1 - lr * group["weight_decay"])
            param.add_(
                ortho, alpha=-lr * adjusted_lr_ratio(group["adjust_lr_fn"], block_shape(param.shape, group["blocks"]))
            )
        return loss

    def _momentum_update(self, group: dict[str, Any], param: torch.Tensor) -> torch.Tensor:
        """The momentum buffer's step (every rank keeps every buffer: the gradients are the same) and the update to
        orthogonalise."""
        grad = param.grad
        assert grad is not None
        state = self.state[param]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - group["momentum"])
        return grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf


def orthogonalisation_cost(shape: tuple[int, ...], blocks: int = 1) -> int:
    """Multiply-adds of one Newton-Schulz iteration on a weight of `shape` stacking `blocks` matrices along its rows
    (on an (m, n) matrix, m <= n: about 2 m^2 n + m^3)."""
    short, long = sorted(block_shape(shape, blocks))
    return blocks * (2 * short**2 * long + short**3)


def block_shape(shape: tuple[int, ...] | torch.Size, blocks: int) -> tuple[int, int]:
    """The (rows, columns) of each of the `blocks` matrices a weight of `shape` stacks along its rows."""
    return shape[0] // blocks, shape[1]


def owners(costs: Iterable[int], world_size: int) -> list[int]:
    """Which rank orthogonalises each weight, given what each costs (`orthogonalisation_cost`): the costliest first,
    each to the rank with the least work so far. The same on every rank."""
    costs = list(costs)
    load, ranks = [0] * world_size, [0] * len(costs)
    for index in sorted(range(len(costs)), key=lambda i: -costs[i]):
        ranks[index] = min(range(world_size), key=lambda rank: load[rank])
        load[ranks[index]] += costs[index]
    return ranks


def adjusted_lr_ratio(adjust_lr_fn: str | None, shape: tuple[int, ...]) -> float:
    """torch.optim.Muon's learning-rate scale of an (A, B) matrix."""
    rows, columns = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1, rows / columns))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, columns))
    return 1.0


class MuonWithAdamW(torch.optim.Optimizer):
    """One optimizer of two: `Muon` for `muon_groups`, `torch.optim.AdamW` for `adamw_groups`. Its param groups are
    theirs (the same dicts, so a learning-rate scheduler drives both); its state dict holds both states."""

    def __init__(
        self,
        muon_groups: Iterable[dict[str, Any]],
        adamw_groups: Iterable[dict[str, Any]],
        *,
        lr: float,
        replicas: torch.distributed.ProcessGroup | None = None,
        **adamw_kwargs: Any,
    ) -> None:
        """`lr` is both optimizers'; `replicas` Muon's (data-parallel ranks that share the orthogonalisation out);
        `adamw_kwargs` (betas, eps, fused, ...) AdamW's alone."""
        self.muon = Muon(list(muon_groups), lr=lr, adjust_lr_fn="match_rms_adamw", replicas=replicas)
        self.adamw = torch.optim.AdamW(list(adamw_groups), lr=lr, **adamw_kwargs)
        super().__init__(self._inner_groups(), {})

    def _inner_groups(self) -> list[dict[str, Any]]:
        return [*self.muon.param_groups, *self.adamw.param_groups]

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = self.muon.step(closure)  # which evaluates the closure, if any, once
        self.adamw.step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"muon", "adamw"}:
            raise ValueError(
                f"a MuonWithAdamW state dict has the keys 'muon' and 'adamw', got {sorted(state_dict)}: a checkpoint "
                "written with another optimizer (one written with AdamW alone resumes with --no_muon)"
            )
        self.muon.load_state_dict(state_dict["muon"])
        self.adamw.load_state_dict(state_dict["adamw"])
        self.param_groups = self._inner_groups()  # loading replaced the inner optimizers' group dicts


def muon_parameter_groups(
    model: torch.nn.Module, decay_names: Iterable[str], weight_decay: float, split_qkv: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Muon's groups, AdamW's groups) of a model's trainable parameters: the encoder layers' 2-D weights to Muon
    (decayed), the rest to AdamW, decayed when named in `decay_names` (Trainer's choice: not biases or norms). With
    `split_qkv`, the fused QKV weights are a Muon group of their own whose Q, K and V are orthogonalised apart
    (`blocks` 3)."""
    decay = set(decay_names)
    muon: list[torch.nn.Parameter] = []
    qkv: list[torch.nn.Parameter] = []
    adamw_decay, adamw_plain = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim == 2 and ENCODER_LAYER_PREFIX in name:
            (qkv if split_qkv and name.endswith(FUSED_QKV_SUFFIX) else muon).append(param)
        elif name in decay:
            adamw_decay.append(param)
        else:
            adamw_plain.append(param)
    muon_groups = [
        {"params": muon, "weight_decay": weight_decay},
        {"params": qkv, "weight_decay": weight_decay, "blocks": 3},
    ]
    muon_groups = [group for group in muon_groups if group["params"]]
    if not muon_groups:
        raise ValueError(
            f"muon trains the 2-D weights of parameters named '*{ENCODER_LAYER_PREFIX}*'; this model has none."
        )
    adamw_groups = [{"params": adamw_decay, "weight_decay": weight_decay}, {"params": adamw_plain, "weight_decay": 0.0}]
    return muon_groups, [group for group in adamw_groups if group["params"]]
