"""`hf_bertscratch.muon` against torch's own Muon and AdamW."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_bertscratch import BertScratchConfig, BertScratchForMaskedLM
from hf_bertscratch.muon import (
    Muon,
    MuonWithAdamW,
    muon_parameter_groups,
    orthogonalisation_cost,
    orthogonalise,
    owners,
)
from hf_bertscratch.pretraining_arguments import parse_args

SHAPES = [(48, 16), (16, 16), (16, 40)]


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*shape, generator=generator)) for shape in SHAPES]


def _give_grads(*param_lists: list[torch.nn.Parameter], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for params in zip(*param_lists, strict=True):
        grad = torch.randn(params[0].shape, generator=generator)
        for param in params:
            param.grad = grad.clone()


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust_lr_fn", [None, "match_rms_adamw"])
def test_muon_in_bf16_is_torchs_muon(nesterov: bool, adjust_lr_fn: str | None) -> None:
    ours, torchs = _params(), _params()
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "nesterov": nesterov, "adjust_lr_fn": adjust_lr_fn}
    mine, reference = Muon(ours, dtype=torch.bfloat16, **kwargs), torch.optim.Muon(torchs, **kwargs)
    for step in range(4):
        _give_grads(ours, torchs, seed=step)
        mine.step()
        reference.step()
    for got, expected in zip(ours, torchs, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    for got, expected in zip(ours, torchs, strict=True):
        torch.testing.assert_close(
            mine.state[got]["momentum_buffer"], reference.state[expected]["momentum_buffer"], rtol=0, atol=0
        )


@pytest.mark.parametrize("nesterov", [True, False])
def test_a_weight_of_three_blocks_steps_as_three_weights_of_torchs_muon(nesterov: bool) -> None:
    generator = torch.Generator().manual_seed(0)
    fused = torch.nn.Parameter(torch.randn(48, 16, generator=generator))  # Q, K and V stacked: (3H, H)
    apart = [torch.nn.Parameter(block.clone()) for block in fused.detach().chunk(3)]
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "nesterov": nesterov, "adjust_lr_fn": "match_rms_adamw"}
    mine = Muon([{"params": [fused], "blocks": 3}], dtype=torch.bfloat16, **kwargs)
    reference = torch.optim.Muon(apart, **kwargs)
    for step in range(4):
        grad = torch.randn(48, 16, generator=torch.Generator().manual_seed(step))
        fused.grad = grad.clone()
        for param, block in zip(apart, grad.chunk(3), strict=True):
            param.grad = block.clone()
        mine.step()
        reference.step()
    torch.testing.assert_close(fused.detach(), torch.cat([param.detach() for param in apart]), rtol=0, atol=0)
    with pytest.raises(
        ValueError, match=r"blocks must be a positive int dividing each weight's rows, got 5 .*\(48, 16\)"
    ):
        Muon([{"params": [torch.nn.Parameter(torch.randn(48, 16))], "blocks": 5}], **kwargs)


def test_loading_a_state_dict_keeps_the_blocks_the_groups_were_made_with() -> None:
    params = _params()
    kwargs = {"lr": 0.02, "adjust_lr_fn": "match_rms_adamw"}
    joint = Muon([{"params": params[:1]}, {"params": params[1:]}], **kwargs)  # Q, K and V as one matrix
    _give_grads(params, seed=0)
    joint.step()
    split = Muon([{"params": params[:1], "blocks": 3}, {"params": params[1:]}], **kwargs)
    split.load_state_dict(joint.state_dict())
    assert [group["blocks"] for group in split.param_groups] == [3, 1]
    torch.testing.assert_close(split.state[params[0]]["momentum_buffer"], joint.state[params[0]]["momentum_buffer"])


def test_owners_share_the_work_by_cost_the_same_on_every_rank() -> None:
    # the quick start's eight: qkv (384, 128), attention output (128, 128), feed-forward in (512, 128) and out (128, 512)
    shapes = [torch.Size(shape) for shape in [(384, 128), (128, 128), (512, 128), (128, 512)] * 2]
    costs = [orthogonalisation_cost(shape) for shape in shapes]
    ranks = owners(costs, 2)
    assert ranks == owners(costs, 2) and sorted(ranks) == [0, 0, 0, 0, 1, 1, 1, 1]
    for size in {tuple(sorted(shape)) for shape in shapes}:  # as many of each size on each rank: an even split
        held = [rank for rank, shape in zip(ranks, shapes, strict=True) if tuple(sorted(shape)) == size]
        assert held.count(0) == held.count(1)
    assert owners(costs, 1) == [0] * 8
    assert sorted(owners(costs[:3], 4)) == [0, 1, 2]  # more ranks than matrices: some orthogonalise none
    # three (128, 128) blocks cost three times one: a third of the (384, 128) matrix's 2 * 128^2 * 384 + 128^3
    assert orthogonalisation_cost((384, 128), blocks=3) == 3 * orthogonalisation_cost((128, 128))
    assert orthogonalisation_cost((384, 128)) == 2 * 128**2 * 384 + 128**3


_REPLICAS_HELPER = """
import json, sys, torch
import torch.distributed as dist
from hf_bertscratch import muon

dist.init_process_group("gloo")
calls = []
real = muon.orthogonalise
muon.orthogonalise = lambda update, *args: calls.append(tuple(update.shape)) or real(update, *args)
shapes = json.loads(sys.argv[2])
generator = torch.Generator().manual_seed(0)
params = [torch.nn.Parameter(torch.randn(*shape, generator=generator)) for shape in shapes]
optimizer = muon.Muon(params, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw", replicas=dist.group.WORLD)
for step in range(3):
    generator = torch.Generator().manual_seed(100 + step)
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator)
    optimizer.step()
rank = dist.get_rank()
torch.save({"params": [p.detach() for p in params], "state": optimizer.state_dict(), "calls": calls},
           f"{sys.argv[1]}/rank{rank}.pt")
dist.barrier()  # neither rank tears its gloo connections down while the other still uses them (an abort at exit)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_data_parallel_ranks_share_the_orthogonalisation_and_end_as_one_process(tmp_path: Path) -> None:
    """Two gloo ranks each orthogonalise half the matrices, and both end with the parameters and momentum of one
    process's Muon, to the bit."""
    shapes = [[48, 16], [16, 16], [16, 40], [24, 24], [32, 16]]
    helper = tmp_path / "replicas.py"
    helper.write_text(_REPLICAS_HELPER)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone", str(helper)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([*command, str(tmp_path), json.dumps(shapes)], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in (0, 1)]
    generator = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*shape, generator=generator)) for shape in shapes]
    alone = Muon(params, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for step in range(3):
        generator = torch.Generator().manual_seed(100 + step)
        for param in params:
            param.grad = torch.randn(param.shape, generator=generator)
        alone.step()
    for held in ranks:
        for got, expected in zip(held["params"], params, strict=True):
            torch.testing.assert_close(got, expected.detach(), rtol=0, atol=0)
        for index, expected in enumerate(params):
            got = held["state"]["state"][index]["momentum_buffer"]
            torch.testing.assert_close(got, alone.state[expected]["momentum_buffer"], rtol=0, atol=0)
    # each step: every matrix orthogonalised once, by the rank `owners` names
    costs = [orthogonalisation_cost(shape) for shape in shapes]
    mine = [[tuple(shape) for shape, owner in zip(shapes, owners(costs, 2), strict=True) if owner == rank]
            for rank in (0, 1)]  # fmt: skip
    assert [held["calls"] for held in ranks] == [mine[0] * 3, mine[1] * 3]
    assert mine[0] and mine[1]


def test_on_a_cpu_muon_orthogonalises_in_fp32() -> None:
    update = torch.randn(64, 24, generator=torch.Generator().manual_seed(1))
    coefficients = (3.4445, -4.775, 2.0315)
    exact = orthogonalise(update.double(), torch.float64, coefficients, 5, 1e-7)
    fp32 = orthogonalise(update, torch.float32, coefficients, 5, 1e-7)
    bf16 = orthogonalise(update, torch.bfloat16, coefficients, 5, 1e-7)
    assert fp32.dtype == torch.float32
    torch.testing.assert_close(fp32.double(), exact, rtol=0, atol=1e-5)
    assert (bf16.double() - exact).abs().max() > 1e-3  # what the fp32 path is for
    # Muon's default on a CPU parameter is that fp32 path.
    (param,), (twin,) = [torch.nn.Parameter(torch.zeros(64, 24))], [torch.nn.Parameter(torch.zeros(64, 24))]
    param.grad, twin.grad = update.clone(), update.clone()
    Muon([param], lr=0.1, weight_decay=0.0).step()
    Muon([twin], dtype=torch.float32, lr=0.1, weight_decay=0.0).step()
    torch.testing.assert_close(param, twin, rtol=0, atol=0)


def test_muon_with_adamw_steps_both_and_a_scheduler_drives_both() -> None:
    hidden, rest = _params(0), _params(1)
    hidden_twin, rest_twin = _params(0), _params(1)
    both = MuonWithAdamW(
        [{"params": hidden, "weight_decay": 0.1}],
        [{"params": rest, "weight_decay": 0.01}],
        lr=0.01,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    muon = Muon([{"params": hidden_twin, "weight_decay": 0.1}], lr=0.01, adjust_lr_fn="match_rms_adamw")
    adamw = torch.optim.AdamW([{"params": rest_twin, "weight_decay": 0.01}], lr=0.01, betas=(0.9, 0.98), eps=1e-6)
    schedules = [torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 / (step + 1)) for opt in (both, muon, adamw)]
    for step in range(3):
        _give_grads(hidden + rest, hidden_twin + rest_twin, seed=step)
        for opt, schedule in zip((both, muon, adamw), schedules, strict=True):
            opt.step()
            schedule.step()
    for got, expected in zip(hidden + rest, hidden_twin + rest_twin, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert [group["lr"] for group in both.param_groups] == [0.01 / 4] * 2
    calls: list[int] = []
    assert both.step(lambda: calls.append(1) or 2.5) == 2.5 and calls == [1]  # a closure: evaluated once, its loss


def test_muon_with_adamw_state_round_trips_and_stays_driven_by_its_scheduler() -> None:
    def make(params: list[torch.nn.Parameter]) -> MuonWithAdamW:
        return MuonWithAdamW([{"params": params[:2]}], [{"params": params[2:]}], lr=0.01, betas=(0.9, 0.98), eps=1e-6)

    first_params, second_params = _params(), _params()
    first = make(first_params)
    _give_grads(first_params, seed=0)
    first.step()
    second = make(second_params)
    schedule = torch.optim.lr_scheduler.LambdaLR(second, lambda step: 0.5**step)
    second.load_state_dict(first.state_dict())
    for mine, theirs in zip(second_params, first_params, strict=True):
        state = second.muon.state[mine] or second.adamw.state[mine]
        expected = first.muon.state[theirs] or first.adamw.state[theirs]
        assert state.keys() == expected.keys()
        for key in state:
            torch.testing.assert_close(state[key], expected[key], rtol=0, atol=0)
    second.step()  # no gradients: nothing moves
    schedule.step()  # after loading, the scheduler's rate still reaches both inner optimizers
    assert [group["lr"] for group in second.muon.param_groups + second.adamw.param_groups] == [0.005, 0.005]
    with pytest.raises(
        ValueError, match=r"keys 'muon' and 'adamw', got \['param_groups', 'state'\]: .* resumes with --no_muon"
    ):
        second.load_state_dict(torch.optim.AdamW(second_params).state_dict())


def test_muon_trains_the_encoder_layers_weight_matrices_only() -> None:
    config = BertScratchConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=32)  # fmt: skip
    model = BertScratchForMaskedLM(config)
    names = {id(param): name for name, param in model.named_parameters()}
    decay = [name for name in names.values() if "bias" not in name and "norm" not in name]
    muon_groups, adamw_groups = muon_parameter_groups(model, decay, 0.01)
    assert sorted(names[id(p)] for group in muon_groups for p in group["params"]) == sorted(
        f"bert.encoder.layers.{layer}.{matrix}.weight"
        for layer in range(2)
        for matrix in ("attention.qkv", "attention.dense", "mlp.fc_in", "mlp.fc_out")
    )
    decayed, plain = ([names[id(p)] for p in group["params"]] for group in adamw_groups)
    assert "bert.embeddings.word_embeddings.weight" in decayed and "cls.dense.weight" in decayed
    assert all("bias" in name or "norm" in name for name in plain)
    assert [group["weight_decay"] for group in adamw_groups] == [0.01, 0.0]
    with pytest.raises(ValueError, match=r"'\*encoder.layers.\*'; this model has none"):
        muon_parameter_groups(torch.nn.Linear(4, 4), [], 0.0)
    other, qkv = muon_parameter_groups(model, decay, 0.01, split_qkv=True)[0]
    assert sorted(names[id(p)] for p in qkv["params"]) == [
        f"bert.encoder.layers.{i}.attention.qkv.weight" for i in (0, 1)
    ]
    assert qkv["blocks"] == 3 and qkv["weight_decay"] == 0.01 and "blocks" not in other and len(other["params"]) == 6


def test_muon_pairs_with_adamw_only(tmp_path) -> None:
    with pytest.raises(
        ValueError, match=r"--optim must be one of \['adamw_torch', 'adamw_torch_fused'\], got 'sgd' \(--no_muon"
    ):
        parse_args(["--output_dir", str(tmp_path / "run"), "--optim", "sgd"])
    with pytest.raises(ValueError, match=r"--muon_split_qkv says how Muon .*; --no_muon trains no weight with Muon"):
        parse_args(["--output_dir", str(tmp_path / "run"), "--no_muon", "--muon_split_qkv"])
    assert not parse_args(["--output_dir", str(tmp_path / "run"), "--optim", "sgd", "--no_muon"])[2].muon


@pytest.mark.cuda
def test_on_a_gpu_muon_is_torchs_muon() -> None:
    """On CUDA the default orthogonalisation is torch's own: bf16, the same update to the bit."""
    ours = [torch.nn.Parameter(p.detach().cuda()) for p in _params()]
    torchs = [torch.nn.Parameter(p.detach().cuda()) for p in _params()]
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "adjust_lr_fn": "match_rms_adamw"}
    mine, reference = Muon(ours, **kwargs), torch.optim.Muon(torchs, **kwargs)
    for step in range(3):
        generator = torch.Generator().manual_seed(step)
        for param, twin in zip(ours, torchs, strict=True):
            grad = torch.randn(param.shape, generator=generator).cuda()
            param.grad, twin.grad = grad.clone(), grad.clone()
        mine.step()
        reference.step()
    for got, expected in zip(ours, torchs, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
