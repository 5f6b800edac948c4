"""The GEMM path of the model's Linear layers in CPU inference: torch's default or oneDNN with prepacked weights.

On CPU, `F.linear` in fp32 goes to MKL's sgemm, which re-reads the weight in its (N, K) layout on every call;
oneDNN's inner-product kernel (`torch.ops.mkldnn._linear_pointwise`, what inductor's CPU backend calls) runs on a copy
of the weight reordered once into the blocked layout its kernel reads (`torch.ops.mkldnn._reorder_linear_weight`).
On a 2-core AVX-512 AMD EPYC the mini encoder's GEMMs ran about 1.5x as fast that way, in bf16 too; on another CPU it
may not pay. So the path is chosen once per machine and thread count by a small timed probe (`probe`): each path
multiplies the mini encoder's feed-forward shape in interleaved rounds, and oneDNN is chosen only where its median
time beats the default's by `MIN_SPEEDUP`. The choice is cached in `~/.cache/hf_bertscratch/cpu_matmul.json` (keyed
by CPU model, flags, thread count and torch version) and logged once per process. Load from other processes slows
every path of one probe alike but not evenly, so a close call (a ratio within `UNSURE_MARGIN` of `MIN_SPEEDUP`) is
probed again by the next `MAX_PROBES` - 1 processes, each path keeping its best rate over the probes (load only ever
slows a path), and decided again from those; a clear one is final at the first probe.

`BertScratchLinear` is an `nn.Linear` (same parameters, same state dict, same init) whose forward takes the chosen
path where nothing is lost by it: a CPU input, no autograd (eval with `torch.no_grad`/`inference_mode`, as the CLI,
pipelines and a user's forward run), no forward-mode AD or `torch.func` transform, no compiling, exporting or
tracing. Elsewhere, training included, it is `F.linear`: at the tiny and mini presets' training shapes, oneDNN ran a
Linear's forward and both gradients only 0.98-1.10x as fast on a 2-core AVX-512 AMD EPYC, its weight reordered every
step (`python -m lab.profile_training_gemm`, results/training-gemm/); on such a CPU, bf16 autocast is training's
faster path (`--precision auto`). The reordered copy is cached on the layer, rebuilt when the weight changes (another
tensor, as a parametrized weight is at each forward, its data pointer or version, or after any optimizer step: a fused
step writes in place without a new version), and never saved, copied or pickled. Under bf16 CPU autocast it
multiplies a bf16 copy, as autocast would, on CPUs with native bf16 (AVX512_BF16 or AMX) where oneDNN's bf16 path
wins the probe.

Where the product runs on oneDNN, what follows it in the encoder runs inside the same kernel (a post-op), as in
inductor's CPU graphs: the feed-forward's GELU (`linear_act`) and the residual add after each block's output
projection (`linear_add`), so the (N, 4H) activation and the (N, H) sum are not read and written again. On torch's
default path the same two calls save what they can without a post-op: the GELU runs in place on the product, and the
output projection's product is accumulated onto `residual + bias` by one GEMM with beta 1 where `F.linear` would copy
the bias into a new (N, H) tensor for the sum to read again (inference only; under autograd, as in training, they
are the layer, the activation and the add as written: accumulating there did not run faster).

The switch, `BERTSCRATCH_CPU_MATMUL` (read when the path is first needed) or `set_path()`:
- `auto` (default): the probe's choice;
- `default` (or `off`): torch's default path everywhere, as before this module;
- `onednn`: oneDNN with prepacked weights without probing.

The same cache holds the other choices that depend on the CPU, each timed once per machine and thread count by
`timed_candidates` (interleaved rounds, timed again by the next `MAX_PROBES` - 1 processes, each candidate keeping its
best time: a clear answer under load can be the wrong one) and logged once per process: the decoding of a padded
batch's MLM logits (`padding_bertscratch`), the decoding of CPU inference into a reused buffer
(`hf_bertscratch.fast_decode`), how training draws its dropout masks (`apply_dropout`, which `BertScratchDropout`
and the model's attention use) and which attention function training runs (`eager_attention_trains_faster`).
`measured_choices()` lists what this process measured or read, for a benchmark's record.

This file imports torch only: the model file imports it, and `save_pretrained` ships it beside the model for
`trust_remote_code` loading.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch._C import _functorch
from torch.nn import functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

logger = logging.getLogger(__name__)

ENV = "BERTSCRATCH_CPU_MATMUL"
PATHS = ("default", "onednn")  # what a choice names; "auto" asks the probe
MIN_SPEEDUP = 1.1  # oneDNN must be this much faster than the default at the probe's median to be chosen
PROBE_SHAPE = (1024, 256, 1024)  # (M, K, N): the mini encoder's feed-forward input GEMM on 1,024 tokens
PROBE_ROUNDS = 7
MAX_PROBES = 3  # probes of a machine whose choice stays a close call; each path keeps its best rate over them
UNSURE_MARGIN = 1.25  # a oneDNN/default ratio within this factor of MIN_SPEEDUP (either way) is a close call
CACHE_FILE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hf_bertscratch" / "cpu_matmul.json"


@dataclass(frozen=True)
class MatmulChoice:
    """The GEMM path of CPU inference: `fp32` and `bf16` each "default" or "onednn"; `reason` says how it was chosen;
    `gflops` the probe's median GFLOP/s of each path it timed ("fp32 default", "fp32 onednn", "bf16 default", ...)."""

    fp32: str
    bf16: str
    reason: str
    gflops: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for logs and the CLI: the path of each precision, how it was chosen and the probe's GFLOP/s."""
        rates = ", ".join(f"{name} {value:.0f}" for name, value in self.gflops.items())
        measured = f"; probe GFLOP/s (M, K, N = {PROBE_SHAPE}): {rates}" if rates else ""
        return f"CPU GEMM path: fp32 {self.fp32}, bf16 {self.bf16} ({self.reason}{measured})"


_lock = threading.Lock()
_choice: MatmulChoice | None = None
_forced: str | None = None
_timed_lock = threading.RLock()
_timed: dict[tuple[str, str, int, Path], dict[str, Any]] = {}  # this process's answers, by section, key, threads, cache


# Optimizer steps taken in this process, any optimizer's: part of a packed weight's key. A fused optimizer step
# (torch's fused AdamW, Trainer's default) writes the weights in place without bumping their version counters, so the
# version alone would let a model stepped without a train()/eval() call (a loop of one's own, in eval mode) keep
# evaluating its old weights.
_optimizer_steps = 0


def _count_optimizer_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    global _optimizer_steps
    _optimizer_steps += 1


register_optimizer_step_post_hook(_count_optimizer_step)


def set_path(path: str | None) -> None:
    """Force the CPU GEMM path of this process ("default", "onednn", or "auto"/None for the probe's choice); overrides
    `BERTSCRATCH_CPU_MATMUL`. The process's other choices (`timed_candidates`) are read or timed again."""
    global _choice, _forced
    if path not in (None, "auto", "off", *PATHS):
        raise ValueError(f"CPU GEMM path must be one of {['auto', 'off', *PATHS]}, got {path!r}.")
    with _lock:
        _forced, _choice = path, None
    with _timed_lock:
        _timed.clear()


def choice() -> MatmulChoice:
    """The CPU GEMM path of this process, chosen (and logged) on first use."""
    global _choice
    with _lock:
        if _choice is None:
            _choice = _choose(_forced or os.environ.get(ENV, "auto"))
            logger.info(_choice.describe())
        return _choice


def _choose(requested: str) -> MatmulChoice:
    requested = requested.strip().lower() or "auto"
    if requested in ("default", "off"):
        return MatmulChoice("default", "default", f"{ENV}={requested}")
    if not (torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()):
        return MatmulChoice("default", "default", "oneDNN is not available in this torch")
    if requested == "onednn":
        return MatmulChoice("onednn", "onednn" if native_bf16() else "default", f"{ENV}=onednn")
    if requested != "auto":
        raise ValueError(f"{ENV} must be one of {['auto', 'off', *PATHS]}, got {requested!r}.")
    return cached_probe()


def native_bf16() -> bool:
    """Whether the CPU multiplies bf16 in hardware (AVX512_BF16 or AMX), where a bf16 GEMM can beat fp32."""
    flags = _cpu_flags()
    return bool({"avx512_bf16", "amx_bf16"} & flags)


def _cpuinfo_value(key: str) -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    return ""


def _cpu_flags() -> set[str]:
    return set(_cpuinfo_value("flags").split())


def machine_key() -> str:
    """What a cached measurement holds for: CPU model, a hash of its flags, torch threads and torch version."""
    model = _cpuinfo_value("model name") or platform.processor() or platform.machine()
    flags = hashlib.sha1(" ".join(sorted(_cpu_flags())).encode()).hexdigest()[:12]
    return f"{model} | flags {flags} | {torch.get_num_threads()} threads | torch {torch.__version__}"


def read_cache(section: str) -> Any:
    """The cached entry of `section` for this machine (`machine_key`), None when there is none or it is unreadable."""
    try:
        return json.loads(CACHE_FILE.read_text())[section][machine_key()]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cache(section: str, value: Any) -> None:
    """Store `value` as `section`'s entry for this machine; a cache that cannot be written is skipped silently."""
    try:
        cache = json.loads(CACHE_FILE.read_text()) if CACHE_FILE.exists() else {}
        cache.setdefault(section, {})[machine_key()] = value
        CACHE_FILE.parent.mkdir(parents=True, exist_ok=True)
        temporary = CACHE_FILE.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(cache, indent=1))
        temporary.replace(CACHE_FILE)
    except (OSError, ValueError, AttributeError):
        pass


def cached_probe() -> MatmulChoice:
    """The probe's choice for this machine: from the cache, or measured now and cached. A cached close call
    (`unsure`) measured fewer than `MAX_PROBES` times is probed again, each path keeping its best rate. The count of
    probes is kept in a section of its own: a model folder's copy of this file from before it reads the
    "gemm_path" entry's fields alone."""
    cached = read_cache("gemm_path")
    probes = int(read_cache("gemm_path_probes") or 1) if cached is not None else 0
    if cached is not None and (probes >= MAX_PROBES or not unsure(cached["gflops"], native_bf16())):
        fields = {key: cached[key] for key in ("fp32", "bf16", "gflops")}
        return MatmulChoice(**fields, reason=cached["reason"] + ", cached")
    rates = probe()
    if cached is not None:
        rates = {name: max(rate, cached["gflops"].get(name, 0.0)) for name, rate in rates.items()}
    chosen = decide(rates, native_bf16(), probes + 1)
    write_cache("gemm_path", asdict(chosen))
    write_cache("gemm_path_probes", probes + 1)
    return chosen


def _rates(gflops: dict[str, float], precision: str) -> tuple[float, float] | None:
    """The (default, oneDNN) rates of `precision` in `gflops`, None where either was not measured (or is 0)."""
    default, onednn = gflops.get(f"{precision} default"), gflops.get(f"{precision} onednn")
    return (default, onednn) if default and onednn else None


def unsure(gflops: dict[str, float], has_native_bf16: bool) -> bool:
    """Whether a choice from `gflops` is a close call: oneDNN's rate over the default's, for a precision the choice
    decides, within a factor `UNSURE_MARGIN` of `MIN_SPEEDUP`."""
    rates = [_rates(gflops, precision) for precision in (("fp32", "bf16") if has_native_bf16 else ("fp32",))]
    return any(
        pair is not None and MIN_SPEEDUP / UNSURE_MARGIN < pair[1] / pair[0] < MIN_SPEEDUP * UNSURE_MARGIN
        for pair in rates
    )


def decide(gflops: dict[str, float], has_native_bf16: bool, probes: int = 1) -> MatmulChoice:
    """The paths `gflops` (the probe's median GFLOP/s by "fp32 default", "fp32 onednn", "bf16 ...", the best of
    `probes` probes) call for: oneDNN where it beats the default by `MIN_SPEEDUP`; for bf16 only on a CPU with native
    bf16."""

    def pick(precision: str) -> str:
        pair = _rates(gflops, precision)
        return "onednn" if pair is not None and pair[1] >= MIN_SPEEDUP * pair[0] else "default"

    bf16 = pick("bf16") if has_native_bf16 else "default"
    best_of = f", the best of {probes} probes" if probes > 1 else ""
    return MatmulChoice(
        pick("fp32"), bf16, f"measured{best_of}, oneDNN chosen where >= {MIN_SPEEDUP}x the default", gflops
    )


def probe(shape: tuple[int, int, int] = PROBE_SHAPE, rounds: int = PROBE_ROUNDS) -> dict[str, float]:
    """Median GFLOP/s of each path on an (M, K) x (K, N) product with bias, timed in interleaved rounds so that load
    from other processes hits every path alike; bf16 paths only on a CPU with native bf16."""
    rows, inner, columns = shape
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, inner, generator=generator)
    weight = torch.randn(columns, inner, generator=generator) / inner**0.5
    bias = torch.zeros(columns)
    contenders = {}
    # Without autocast: the probe runs lazily, at the first forward that needs the choice, which may be inside a bf16
    # autocast region (a bf16 run's evaluation), where the "fp32" products would run in bf16.
    with torch.no_grad(), torch.autocast("cpu", enabled=False):
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            if dtype == torch.bfloat16 and not native_bf16():
                continue
            xd, wd, bd = x.to(dtype), weight.to(dtype), bias.to(dtype)
            packed = torch.ops.mkldnn._reorder_linear_weight(wd, rows)
            contenders[f"{name} default"] = lambda xd=xd, wd=wd, bd=bd: F.linear(xd, wd, bd)
            contenders[f"{name} onednn"] = lambda xd=xd, p=packed, bd=bd: _onednn_linear(xd, p, bd)
        seconds = time_interleaved(contenders, rounds)
    flops = 2 * rows * inner * columns
    return {name: float(f"{flops / median / 1e9:.3g}") for name, median in seconds.items()}


_Name = TypeVar("_Name")


def time_interleaved(candidates: Mapping[_Name, Callable[[], object]], rounds: int) -> dict[_Name, float]:
    """Median seconds of each candidate over `rounds` rounds, one call of each per round after a warm-up call, so that
    load from other processes hits every candidate alike."""
    times: dict[_Name, list[float]] = {name: [] for name in candidates}
    for run in candidates.values():
        run()  # warm-up: first-call allocations and kernel creation
    for _ in range(rounds):
        for name, run in candidates.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def timed_candidates(
    section: str, key: str, measure: Callable[[], dict[str, float]], summary: Callable[[dict[str, float]], str]
) -> dict[str, float]:
    """Seconds of each candidate of a choice that depends on the CPU, for this machine (`machine_key`: CPU, threads,
    torch) and `key` (what was timed: a shape, a dtype, a GEMM path): this process's earlier answer, the cache's
    (`section`), or `measure()` now (candidate name -> seconds, timed interleaved), then cached. A choice timed fewer
    than `MAX_PROBES` times is timed again by the next process, each candidate keeping its best time (load only ever
    slows a candidate): load from other processes does not slow the candidates alike, and can make the wrong one win
    clearly (MLM decoding of 512 rows into mini's 30,522 words on a 2-core Zen 2 EPYC at load 5: one GEMM 270 ms
    against 725 ms in 1 MiB tiles; idle, the tiles 64 ms against 82: results/cpu-choices/inference-mini-zen2-auto.json
    at commits 35efadf and 24dc00f). The first answer of a process is logged with `summary(seconds)`, the choice it
    makes."""
    memo_key = (section, key, torch.get_num_threads(), CACHE_FILE)
    with _timed_lock:
        if memo_key in _timed:
            return _timed[memo_key]["seconds"]
        entries = read_cache(section)
        entries = entries if isinstance(entries, dict) else {}
        entry = entries.get(key)
        cached: dict[str, float] = entry.get("seconds") or {} if isinstance(entry, dict) else {}
        probes = int(entry.get("probes", 1)) if cached and isinstance(entry, dict) else 0
        if cached and probes >= MAX_PROBES:
            seconds, how = cached, "cached"
        else:
            seconds = {name: min(value, cached.get(name, value)) for name, value in measure().items()}
            probes += 1
            how = "measured" + (f", the best of {probes} probes" if probes > 1 else "")
            write_cache(section, {**entries, key: {"seconds": seconds, "probes": probes}})
        times = ", ".join(f"{name} {value * 1e3:.1f} ms" for name, value in seconds.items())
        _timed[memo_key] = {"section": section, "key": key, "seconds": seconds, "choice": summary(seconds), "how": how}
        logger.info("%s (%s; %s: %s)", _timed[memo_key]["choice"], how, key, times)
        return seconds


def measured_choices() -> list[dict[str, Any]]:
    """This process's CPU-dependent choices: the GEMM path's (`choice()`) and each one `timed_candidates` answered,
    with its section, key, seconds, the choice in words and how it was made (measured or cached)."""
    gemm = choice()
    with _timed_lock:
        timed = [dict(entry) for entry in _timed.values()]
    return [{"section": "gemm_path", "choice": gemm.describe(), **asdict(gemm)}, *timed]


def _onednn_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


# The activations oneDNN's linear runs as a post-op (config.hidden_act -> its GELU algorithm): exact (erf) GELU and
# its tanh approximation, which transformers' "gelu_pytorch_tanh" computes with the same formula.
FUSED_ACTIVATIONS = {"gelu": "none", "gelu_pytorch_tanh": "tanh"}


def _unhooked(module: nn.Module) -> bool:
    """Whether `module` is this file's layer itself (not an adapter wrapping it, not a subclass), with no hooks that a
    call computing its product some other way would skip (or that could keep its output): torch's, or a forward
    replaced on the module itself, as accelerate's hooks do (offloading loads the weights in that forward)."""
    return (
        type(module) is BertScratchLinear
        and "forward" not in vars(module)
        and not (module._forward_hooks or module._forward_pre_hooks)
        and not (nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks)
    )


def _route(module: nn.Module, input: torch.Tensor) -> tuple[BertScratchLinear, torch.dtype | None] | None:
    """How `linear_act` and `linear_add` may compute `module`'s product on `input`, decided once per call:
    - None: as written (`module` not `_unhooked`, or not CPU inference on a plain tensor, or a product torch's
      default path would run under CPU autocast or in mixed dtypes);
    - (layer, dtype): on oneDNN in `dtype`, fused with what follows;
    - (layer, None): torch's default product in the weight's dtype, read by the caller alone, which may write into
      its output or accumulate it onto another tensor."""
    if not _unhooked(module):
        return None
    layer = cast(BertScratchLinear, module)
    if not _cpu_inference(input, layer.weight):
        return None
    dtype = layer._onednn_dtype(input)
    if dtype is not None:
        return layer, dtype
    plain = (
        not torch.is_autocast_enabled("cpu")
        and input.dtype == layer.weight.dtype
        and (layer.bias is None or layer.bias.dtype == input.dtype)
    )
    return (layer, None) if plain else None


def _accumulates(layer: BertScratchLinear, input: torch.Tensor, residual: torch.Tensor) -> bool:
    """Whether the product of `layer` on `input` can be accumulated onto (a copy of) `residual`: a plain tensor of the
    product's dtype and shape, contiguous."""
    return (
        type(residual) is torch.Tensor
        and residual.is_contiguous()
        and residual.dtype == input.dtype
        and residual.shape == (*input.shape[:-1], layer.out_features)
        and input.shape[-1] == layer.in_features
    )


def linear_act(module: nn.Module, input: torch.Tensor, activation: nn.Module, hidden_act: str) -> torch.Tensor:
    """`activation(module(input))`, with the activation run inside oneDNN's product where it runs there, and on
    torch's default path in place on the product's output (no second (N, out) tensor written) where nothing reads it
    but the activation (`_route`). `hidden_act` is the name of what `activation` computes (a config's `hidden_act`;
    anything else, "" included, runs `activation` as written)."""
    route = _route(module, input) if isinstance(hidden_act, str) and hidden_act in FUSED_ACTIVATIONS else None
    if route is None:
        return activation(module(input))
    layer, dtype = route
    if dtype is None:
        return torch.ops.aten.gelu_(
            F.linear(input, layer.weight, layer.bias), approximate=FUSED_ACTIVATIONS[hidden_act]
        )
    packed, bias = layer._packed_weight(dtype, input.numel() // layer.in_features)
    return torch.ops.mkldnn._linear_pointwise(input.to(dtype), packed, bias, "gelu", [], FUSED_ACTIVATIONS[hidden_act])


def linear_add(module: nn.Module, input: torch.Tensor, residual: torch.Tensor, dropout: nn.Dropout) -> torch.Tensor:
    """`residual + dropout(module(input))`, with the add run inside oneDNN's product where it runs there (no dropout
    active, the residual already in the product's dtype and shape). On torch's default path, where nothing but the
    sum reads the product (`_route`), the product is accumulated onto `residual + bias` (one GEMM with beta 1)
    instead of the bias being copied into a new (N, out) tensor that is then added to the residual."""
    route = None if dropout.training and dropout.p > 0 else _route(module, input)
    if route is not None:
        layer, dtype = route
        if dtype is None and _accumulates(layer, input, residual):
            total = torch.add(residual, layer.bias) if layer.bias is not None else residual.clone()
            total.view(-1, layer.out_features).addmm_(input.reshape(-1, layer.in_features), layer.weight.t())
            return total
        if dtype is not None and residual.dtype == dtype and residual.shape == (*input.shape[:-1], layer.out_features):
            packed, bias = layer._packed_weight(dtype, input.numel() // layer.in_features)
            return torch.ops.mkldnn._linear_pointwise.binary(
                input.to(dtype), residual.contiguous(), packed, bias, "add"
            )
    return residual + dropout(module(input))


def _is_traced() -> bool:
    return torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.jit.is_tracing()


def _cpu_inference(input: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a product of `weight` on `input` is CPU inference on a plain tensor: no autograd, forward-mode AD
    (an open dual level, or torch.func's jvp), tracing, compiling or exporting, no tensor subclass (fake, functional
    and other traced tensors), no torch.func transform (vmap's batched weights have no memory to pack, grad's and
    jvp's wrappers carry derivatives the oneDNN product does not compute)."""
    return (
        type(input) is torch.Tensor
        and input.device.type == "cpu"
        and not (torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad))
        and input.layout == torch.strided
        and not _is_traced()
        and fwAD._current_level < 0
        and not (_functorch.is_functorch_wrapped_tensor(input) or _functorch.is_functorch_wrapped_tensor(weight))
    )


class BertScratchLinear(nn.Linear):
    """`nn.Linear` whose CPU inference runs on the process's GEMM path (`choice()`): oneDNN on a prepacked copy of the
    weight where that path was chosen, `F.linear` elsewhere. Parameters, state dict and init are `nn.Linear`'s."""

    # (key, the weight it was made from, the reordered weight, the bias in its dtype)
    _packed: tuple[tuple, weakref.ref[torch.Tensor], torch.Tensor, torch.Tensor | None] | None = None

    def train(self, mode: bool = True) -> "BertScratchLinear":
        """`nn.Module.train`, dropping the packed weight: a change written through the weight's `.data` leaves its
        version counter as it was, so each evaluation after a train() or eval() call packs it anew."""
        self._packed = None
        return super().train(mode)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """(..., in_features) -> (..., out_features)."""
        dtype = self._fast_dtype(input)
        if dtype is None:
            return F.linear(input, self.weight, self.bias)
        packed, bias = self._packed_weight(dtype, input.numel() // self.in_features)
        return _onednn_linear(input.to(dtype), packed, bias)

    def _fast_dtype(self, input: torch.Tensor) -> torch.dtype | None:
        """The dtype the oneDNN path multiplies in for `input`, None where `F.linear` runs instead."""
        return self._onednn_dtype(input) if _cpu_inference(input, self.weight) else None

    def _onednn_dtype(self, input: torch.Tensor) -> torch.dtype | None:
        """`_fast_dtype` of an input already known to be CPU inference (`_cpu_inference`). None for weights made in
        inference mode: such tensors keep no version, so a copy packed from them could not tell they changed."""
        weight = self.weight
        if weight.is_inference() or (self.bias is not None and self.bias.is_inference()):
            return None
        dtype = input.dtype
        if torch.is_autocast_enabled("cpu"):
            dtype = torch.get_autocast_dtype("cpu")
            if dtype != torch.bfloat16 or input.dtype not in (torch.float32, torch.bfloat16):
                return None
        elif dtype != weight.dtype or dtype not in (torch.float32, torch.bfloat16):
            return None
        path = choice()
        return dtype if (path.fp32 if dtype == torch.float32 else path.bf16) == "onednn" else None

    def _packed_weight(self, dtype: torch.dtype, rows: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weight reordered for oneDNN in `dtype` (and the bias in it), made again when the weight changed: another
        tensor (a parametrized weight, weight_norm say, is computed anew at each forward, often into the memory the
        last one freed, so its address and version alone could match), new memory, a new version, or any optimizer
        step since it was made."""
        weight, bias = self.weight, self.bias
        key = (
            dtype,
            _optimizer_steps,
            weight.data_ptr(),
            weight._version,
            None if bias is None else (bias.data_ptr(), bias._version),
        )
        packed = self._packed
        if packed is None or packed[0] != key or packed[1]() is not weight:
            with torch.no_grad():
                reordered = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(dtype), max(rows, 1))
                packed = (key, weakref.ref(weight), reordered, None if bias is None else bias.detach().to(dtype))
            self._packed = packed
        return packed[2], packed[3]

    def __getstate__(self) -> dict:  # copies and pickles leave the reordered weight behind (oneDNN tensors cannot)
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        state.pop("_packed", None)
        return state


# Dropout in CPU training. torch draws a dropout mask with `bernoulli_`, which runs MKL's generator on Intel CPUs and
# elsewhere draws one number per element from the CPU generator, serially (a 2 Mi-element mask: 18 ms on a 2-core
# Zen 4 EPYC, about 10% of mini's fp32 training step at dropout 0.1). `apply_dropout` draws 16 bits per element instead,
# four from each 64-bit number the same generator gives, where that is faster on this CPU (`draws_dropout_bits`).
KEEP_MASK_BITS = 16  # the dropout rate runs rounded to a multiple of 2**-16 (0.1 as 0.1000061)
DROPOUT_PROBE_SHAPE = (32, 4, 128, 128)  # mini's attention probabilities of a 32 x 128 batch: 2 Mi elements
DROPOUT_PROBE_RATE = 0.1
DROPOUT_PROBE_KEY = f"{'x'.join(map(str, DROPOUT_PROBE_SHAPE))} float32, rate {DROPOUT_PROBE_RATE}"  # its cache key


def draws_dropout_bits(input: torch.Tensor) -> bool:
    """Whether `apply_dropout` draws `input`'s keep mask itself: a plain CPU tensor in eager mode (no tracing,
    compiling, exporting or torch.func transform), `BERTSCRATCH_CPU_MATMUL` not `default`/`off`, and 16-bit draws
    timed faster than torch's dropout on this CPU (`cpu_matmul.timed_candidates`, once per machine and thread count,
    cached)."""
    if not _eager_cpu_tensor(input) or _switched_off():
        return False

    def measure() -> dict[str, float]:
        probe = torch.randn(DROPOUT_PROBE_SHAPE, generator=torch.Generator().manual_seed(0))
        with torch.random.fork_rng(devices=[]):  # the global generator (what seeds a run's dropout) stays untouched
            return time_interleaved(
                {
                    "bernoulli": lambda: F.dropout(probe, DROPOUT_PROBE_RATE, True),
                    "16-bit draws": lambda: _dropout_from_bits(probe, DROPOUT_PROBE_RATE),
                },
                rounds=5,
            )

    def summary(seconds: dict[str, float]) -> str:
        return f"Dropout masks in CPU training drawn with {min(seconds, key=lambda name: seconds[name])}"

    seconds = timed_candidates("dropout", DROPOUT_PROBE_KEY, measure, summary)
    return seconds["16-bit draws"] < seconds["bernoulli"]


def _eager_cpu_tensor(input: torch.Tensor) -> bool:
    """A plain strided CPU tensor in eager mode: no tracing, compiling, exporting or torch.func transform."""
    return (
        type(input) is torch.Tensor
        and input.device.type == "cpu"
        and input.layout == torch.strided
        and not _is_traced()
        and not _functorch.is_functorch_wrapped_tensor(input)
    )


def _switched_off() -> bool:
    """`BERTSCRATCH_CPU_MATMUL` (or `set_path`) is `default`/`off`: torch's own paths throughout."""
    return (_forced or os.environ.get(ENV, "auto")).strip().lower() in ("default", "off")


def apply_dropout(input: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """`F.dropout(input, p, training)`: each element zeroed with probability `p`, the others scaled by 1 / (1 - p),
    in training only. Where `draws_dropout_bits`, the keep mask comes from 16 random bits per element of the CPU
    generator (`torch.manual_seed` makes it repeatable) and `p` runs rounded to a multiple of 2**-16, the scale
    1 / (1 - that) so that the expectation stays `input`; elsewhere it is `F.dropout`."""
    if not training or p <= 0.0 or p >= 1.0 or not draws_dropout_bits(input):
        return F.dropout(input, p, training)
    return _dropout_from_bits(input, p)


def _dropout_from_bits(input: torch.Tensor, p: float) -> torch.Tensor:
    drops = round(p * 2**KEEP_MASK_BITS)  # of the 2**16 values a 16-bit draw takes, how many drop the element
    if not 0 < drops < 2**KEEP_MASK_BITS:  # p within 2**-17 of 0 or 1
        return F.dropout(input, p, True)
    draws = torch.empty(-(-input.numel() // 4), dtype=torch.int64).random_(-(2**63), 2**63 - 1)  # 64 random bits
    lanes = draws.view(torch.int16)[: input.numel()].view(input.shape)  # each uniform over [-2**15, 2**15)
    keep = lanes >= drops - 2**15
    return _MaskedScale.apply(input, keep, 2**KEEP_MASK_BITS / (2**KEEP_MASK_BITS - drops))


class _MaskedScale(torch.autograd.Function):
    """input * keep * scale, whose backward multiplies the gradient alike (keeping the bool mask only, as torch's
    dropout does)."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return input.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad_output.mul(keep).mul_(ctx.scale), None, None


class BertScratchDropout(nn.Dropout):
    """`nn.Dropout` whose CPU training draws its mask with `apply_dropout` (16-bit draws where faster on this CPU)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.inplace:
            return F.dropout(input, self.p, self.training, inplace=True)
        return apply_dropout(input, self.p, self.training)


# Attention in CPU training. Without dropout masks to draw (pretraining's default dropout 0), attention under sdpa runs
# torch's CPU flash kernel. On a Zen 4 AMD EPYC, one thread (`lab.profile_attention`, results/cpu-choices/
# attention-zen4.json), its forward and backward in bf16 took 2.0-7.5x as long as the eager function's at T = 32 and
# 128 (a third of a quick-start process's samples) and 0.6-0.8x at T = 512; in fp32 0.6-0.9x from T = 128 and 1.1x at
# T = 32. So the two are timed where training runs, per shape and dtype.
ATTENTION_PROBE_SCORES = 64 * 128 * 128  # B * nh * T * T of the probe's batch: 16 sequences of 4 heads at T = 128


def attention_probe(query: torch.Tensor) -> tuple[str, tuple[int, int, int, int]]:
    """The cache key of attention's training probe for `query` (B, nh, T, hs) and the (B', nh, T', hs) shape it times:
    T' is T rounded up to a power of two (at least 16), B' as many sequences as make `ATTENTION_PROBE_SCORES` scores
    (at least 1); the key names the heads, head size, T' and dtype."""
    _, heads, length, head_size = query.shape
    bucket = max(16, 1 << max(0, length - 1).bit_length())
    sequences = max(1, ATTENTION_PROBE_SCORES // (heads * bucket * bucket))
    dtype = str(query.dtype).removeprefix("torch.")
    return f"{heads} heads of {head_size}, T {bucket}, {dtype}", (sequences, heads, bucket, head_size)


def eager_attention_trains_faster(
    query: torch.Tensor, eager: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
) -> bool:
    """Whether attention's forward and backward ran faster through `eager` ((query, key, value) -> output, the model's
    eager function) than through torch's `scaled_dot_product_attention`, timed on `attention_probe`'s shape in
    `query`'s dtype (`timed_candidates`: once per machine, thread count and key, cached). Only for a plain CPU
    `query` that autograd tracks, in eager mode (`_eager_cpu_tensor`), with `BERTSCRATCH_CPU_MATMUL` not
    `default`/`off`; False elsewhere. The probe's tensors come from a generator of its own: the global one, which
    seeds a run's dropout, is not drawn from."""
    if not (_eager_cpu_tensor(query) and torch.is_grad_enabled() and query.requires_grad) or _switched_off():
        return False
    key, shape = attention_probe(query)

    def measure() -> dict[str, float]:
        generator = torch.Generator().manual_seed(0)
        inputs = [torch.randn(shape, generator=generator).to(query.dtype).requires_grad_() for _ in range(3)]
        scale = shape[-1] ** -0.5

        def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(query, key, value, scale=scale)

        def train(attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
            output = attend(*inputs)
            torch.autograd.grad(output, inputs, torch.ones_like(output))

        return time_interleaved({"sdpa": lambda: train(sdpa), "eager": lambda: train(eager)}, rounds=5)

    def summary(seconds: dict[str, float]) -> str:
        faster = "the eager function" if seconds["eager"] < seconds["sdpa"] else "sdpa"
        return f"Attention in CPU training through {faster}"

    seconds = timed_candidates("training_attention", key, measure, summary)
    return seconds["eager"] < seconds["sdpa"]
