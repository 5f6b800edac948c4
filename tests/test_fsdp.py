"""The shipped FSDP2 configuration (scripts/configs/fsdp.yaml) against DDP: two gloo processes on the CPU train the
same steps on the same data and seed, under `accelerate launch` with the config and under `torchrun`, and must end
with the same weights and save folders that predict the same.

accelerate (1.15, and its main branch) turns an FSDP plugin on only for GPU-like process groups: on the CPU it sets
up `MULTI_CPU` and trains plain DDP, ignoring the FSDP settings. The FSDP run here therefore starts through a helper
that, where accelerate chose `MULTI_CPU` despite an FSDP plugin, makes the `AcceleratorState` take the path it takes
on GPUs. The rest is what a user runs: the launcher reads the config, the Trainer shards the model with FSDP2
(`fully_shard` per `BertScratchLayer`), trains, gathers the full state dict and saves the folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM, AutoTokenizer

import hf_bertscratch

from conftest import CORPUS, PRETRAIN_FAST

REPO = Path(__file__).parents[1]
FSDP_CONFIG = REPO / "scripts" / "configs" / "fsdp.yaml"
STEPS = 4
# Seconds one 2-process run may take; each took 25-35 s on 2 cores busy with other work, mostly imports.
RUN_TIMEOUT = 240
# The two runs do the same float32 arithmetic but for the order and scaling in which they sum the ranks' gradients
# (DDP all-reduces flat buckets; FSDP2 reduce-scatters each parameter, dividing by the world size around it) and the
# gradient norm that clipping divides by. A rounding difference of a gradient changes its AdamW step, which is
# about lr = 1e-3 whatever the gradient's size, by about lr x 1e-7; measured after 4 steps: at most 7.5e-9, and one
# weight near 1.0 one ulp (1.2e-7) apart. 1e-6 leaves room for other CPUs' kernels yet stays 1000x below one step,
# so a missed or repeated step, or a rank holding the wrong rows, fails. The logits, sums over 32 hidden units of
# such weights times layer-normed activations, differ as little (measured at most 9e-8); 1e-5 keeps the margin.
WEIGHT_ATOL = 1e-6
LOGIT_ATOL = 1e-5

_FSDP_HELPER = """
import json, sys, torch
import torch.distributed as dist
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType
from hf_bertscratch import pretraining

accelerate_init = AcceleratorState.__init__

def init(self, *args, fsdp_plugin=None, **kwargs):
    accelerate_init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        # What AcceleratorState does with an FSDP plugin on GPUs.
        self.distributed_type = PartialState._shared_state["distributed_type"] = DistributedType.FSDP
        if self._mixed_precision != "no":
            fsdp_plugin.set_mixed_precision(self._mixed_precision)
        self.fsdp_plugin = fsdp_plugin

AcceleratorState.__init__ = init
real_save = pretraining.save_outputs

def save_outputs(trainer, metrics, *args):
    real_save(trainer, metrics, *args)
    rank = dist.get_rank()
    state = trainer.model.state_dict()
    torch.save({k: v.to_local().detach().clone() for k, v in state.items()}, f"{sys.argv[1]}/rank{rank}.pt")
    json.dump({"distributed_type": trainer.accelerator.distributed_type.value,
               "fsdp_version": trainer.accelerator.state.fsdp_plugin.fsdp_version,
               "placements": sorted({str(v.placements) for v in state.values()}),
               "steps": trainer.state.global_step, "world_size": dist.get_world_size(),
               "backend": dist.get_backend()}, open(f"{sys.argv[1]}/rank{rank}.json", "w"))

pretraining.save_outputs = save_outputs
pretraining.main(sys.argv[2:])
"""


def _run(command: list[str]) -> None:
    """Run a 2-process launch on the CPU (gloo, even where a GPU is visible), one torch thread a process; a hang
    kills the launcher's workers too."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "ACCELERATE_USE_CPU", "ACCELERATE_MIXED_PRECISION"):
        env.pop(name, None)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as process:
        try:
            _, stderr = process.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert process.returncode == 0, stderr[-3000:]


def _train_ddp_and_fsdp(arguments: list[str], tmp_path: Path) -> tuple[Path, Path]:
    """Pretrain under README's DDP command (torchrun) and its FSDP2 command (accelerate launch with the shipped
    config); the FSDP ranks write their shards and what they ran as to tmp_path/rank{0,1}.pt/.json."""
    ddp, fsdp = tmp_path / "ddp", tmp_path / "fsdp"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    _run([*torchrun, str(REPO / "scripts" / "pretrain.py"), *arguments, "--output_dir", str(ddp)])
    helper = tmp_path / "fsdp_helper.py"
    helper.write_text(_FSDP_HELPER, encoding="utf-8")
    # `accelerate launch` is this module. float32 (the config asks for bf16, for GPUs), so that the runs can differ
    # only by rounding; port 0 takes a free port instead of accelerate's fixed 29500.
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG)]
    accelerate += ["--num_processes", "2", "--mixed_precision", "no", "--main_process_port", "0"]
    _run([*accelerate, str(helper), str(tmp_path), *arguments, "--output_dir", str(fsdp)])
    return ddp, fsdp


def _shard(full: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The rows of `full` that FSDP2's Shard(0) gives `rank` (torch.chunk's split; empty past the last chunk)."""
    chunks = torch.chunk(full, world_size, dim=0)
    return chunks[rank] if rank < len(chunks) else full[:0]


def _assert_ranks_hold_the_ddp_weights(tmp_path: Path, ddp_weights: dict[str, torch.Tensor]) -> None:
    for rank in (0, 1):
        info = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert info == {
            "distributed_type": "FSDP",
            "fsdp_version": 2,
            "placements": ["(Shard(dim=0),)"],
            "steps": STEPS,
            "world_size": 2,
            "backend": "gloo",
        }
        shards = torch.load(tmp_path / f"rank{rank}.pt")
        for name, full in ddp_weights.items():
            shard = shards[name]
            if name.endswith("token_type_embeddings.weight"):  # saved with segment 1 copied from the trained 0
                full, shard = full[:1], shard[: max(0, 1 - rank)]
            torch.testing.assert_close(shard, _shard(full, rank, 2), rtol=0, atol=WEIGHT_ATOL, msg=name)


def _logits(folder: Path, texts: list[str]) -> torch.Tensor:
    """(B, T, V) fill-mask logits of the folder loaded as a user would, with its own tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    assert isinstance(model, hf_bertscratch.BertScratchForMaskedLM)
    assert model.cls.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        return model(**tokenizer(texts, padding=True, return_tensors="pt")).logits


@pytest.mark.slow
def test_fsdp2_config_trains_like_ddp_and_saves_the_same_model(
    text_file: Path, tokenizer_dir: Path, config_dir: Path, tmp_path: Path
) -> None:
    """Under the shipped FSDP2 config each rank holds its half of every weight, equal to the DDP run's weights; the
    folder it saves loads with AutoModelForMaskedLM and predicts what the DDP run's folder predicts."""
    arguments = ["--train_file", str(text_file), "--tokenizer_name", str(tokenizer_dir)]
    arguments += ["--config_name", str(config_dir), *PRETRAIN_FAST, "--report_to", "none", "--max_steps", str(STEPS)]
    arguments += ["--precision", "fp32"]  # both in float32, whatever the CPU (auto trains bf16 on native-bf16 CPUs)
    ddp, fsdp = _train_ddp_and_fsdp(arguments, tmp_path)

    ddp_weights, fsdp_weights = load_file(ddp / "model.safetensors"), load_file(fsdp / "model.safetensors")
    _assert_ranks_hold_the_ddp_weights(tmp_path, ddp_weights)
    results = [json.loads((folder / "all_results.json").read_text()) for folder in (ddp, fsdp)]
    for name in ("train_loss", "eval_loss", "world_size", "train_effective_batch_size"):
        assert results[1][name] == pytest.approx(results[0][name], rel=1e-6), name
    # The gathered full state dict holds the tied decoder weight as a tensor of its own, so save_pretrained, which
    # finds ties by shared storage, writes it as well: the word embeddings again, which loading ties back.
    assert fsdp_weights.keys() - ddp_weights.keys() == {"cls.decoder.weight"}
    assert torch.equal(fsdp_weights.pop("cls.decoder.weight"), fsdp_weights["bert.embeddings.word_embeddings.weight"])
    assert fsdp_weights.keys() == ddp_weights.keys()
    for name, weight in ddp_weights.items():
        torch.testing.assert_close(fsdp_weights[name], weight, rtol=0, atol=WEIGHT_ATOL, msg=name)
    assert json.loads((fsdp / "config.json").read_text()) == json.loads((ddp / "config.json").read_text())
    torch.testing.assert_close(_logits(fsdp, CORPUS[:4]), _logits(ddp, CORPUS[:4]), rtol=0, atol=LOGIT_ATOL)

    # save_pretrained ships this package's code even though FSDP2 made the instance's class a subclass in torch.
    assert {path.name for path in fsdp.iterdir()} == {path.name for path in ddp.iterdir()}
