"""`scripts/gpu_check.py`: the record its CPU quick mode writes, field by field, the FLOPs estimate and the bf16 peak
table it reads MFU from; on a CUDA device (`-m cuda`), the quick record with the GPU's own measurements."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from hf_bertscratch import PRESETS, BertScratchConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run_quick(gpu_check: ModuleType, device: str, folder: Path) -> dict:
    return gpu_check.main(["--device", device, "--quick", "--output_dir", str(folder)])


@pytest.fixture(scope="module")
def cpu_run(gpu_check: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """The record of one `--device cpu --quick` run (tiny preset, T 32, 0 and 30% padding, 2 timed steps) and what
    it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        record = _run_quick(gpu_check, "cpu", tmp_path_factory.mktemp("gpu"))
    return record, printed.getvalue()


@pytest.fixture(scope="module")
def cpu_record(cpu_run: tuple[dict, str]) -> dict:
    return cpu_run[0]


def test_cpu_quick_record_says_how_it_was_made(cpu_record: dict) -> None:
    written = json.loads(Path(cpu_record["path"]).read_text())
    assert written == {key: value for key, value in cpu_record.items() if key != "path"}
    # Named by the device (its name reduced to letters, digits and dashes: "Intel(R) Xeon(R)" -> "Intel-R-Xeon-R")
    # and the date, whatever punctuation the CPU's name holds.
    reduced_name = re.sub(r"[^A-Za-z0-9]+", "-", cpu_record["device"]["name"]).strip("-")
    assert Path(cpu_record["path"]).name.startswith(reduced_name + "-")
    assert re.fullmatch(r"[A-Za-z0-9-]+\.json", Path(cpu_record["path"]).name)
    assert cpu_record["command"].startswith("bash scripts/gpu_check.sh --device cpu --quick")
    assert "commit" in cpu_record and cpu_record["date"]
    assert cpu_record["versions"]["torch"] and cpu_record["versions"]["transformers"]
    assert cpu_record["device"]["type"] == "cpu" and cpu_record["device"]["bf16_peak_tflops"] is None
    assert cpu_record["arguments"]["presets"] == ["tiny"] and cpu_record["elapsed_s"] > 0


def test_cpu_quick_record_measures_every_case_and_names_what_it_skips(cpu_record: dict) -> None:
    cases = cpu_record["cases"]
    assert [(case["padding"], case["workload"]) for case in cases] == [
        (0.0, "train"),
        (0.0, "infer"),
        (0.3, "train"),
        (0.3, "infer"),
    ]
    for case in cases:
        assert case["preset"] == "tiny" and case["seq_len"] == 32 and case["precision"] == "bf16"
        others = {"transformers_sdpa", "ours_padded", "ours_unpadded", "ours_rows_decoding"}
        assert set(case["tokens_per_s"]) == {"ours", *others}
        assert all(value > 0 for value in case["tokens_per_s"].values())
        for other in others:
            ratio = case["ours_over"][other]
            assert ratio["min"] <= ratio["median"] <= ratio["max"]
        assert case["flops_per_step"] > 0
        assert case["peak_memory_mib"] is None and case["mfu"] is None  # GPU-only
        if case["workload"] == "train":  # ours and transformers' BERT compute the same loss on the batch
            assert case["loss_max_abs_diff"] < 1e-4
    padded = cases[2]
    assert padded["useful_tokens"] < padded["batch_size"] * padded["seq_len"]
    assert cpu_record["parity"] is None
    assert set(cpu_record["skipped"]) == {
        "parity",
        "peak_memory_mib",
        "mfu",
        "bertscratch_flash_attention_2",
        "transformers_flash_attention_2",
    }
    assert all(reason for reason in cpu_record["skipped"].values())


def test_past_the_budget_the_first_case_still_runs_and_the_rest_are_named(
    gpu_check: ModuleType, tmp_path: Path
) -> None:
    """A budget spent before the first case (setup on a loaded machine) still gives a record with a measurement."""
    record = gpu_check.main(["--device", "cpu", "--quick", "--budget_s", "0", "--output_dir", str(tmp_path)])
    assert [(case["padding"], case["workload"]) for case in record["cases"]] == [(0.0, "train"), (0.0, "infer")]
    assert record["skipped"]["cases"] == "past --budget_s 0: tiny T=32 padding=0.3"


def test_cpu_quick_record_is_printed(cpu_run: tuple[dict, str]) -> None:
    """A line per case with each contender's tokens/s beside ours over it, then the record itself."""
    record, out = cpu_run
    assert "tiny T=32 pad=0.3 train | ours " in out and "ours/it" in out
    printed = out[out.index("\n{") + 1 : out.rindex("}") + 1]
    assert json.loads(printed)["cases"] == record["cases"]


@pytest.mark.parametrize(("paddings", "padded"), [([0.0, 0.3], True), ([0.0], False)])
def test_the_padded_contenders_are_ours_running_padding_otherwise(
    gpu_check: ModuleType, paddings: list[float], padded: bool
) -> None:
    """Only where the grid has padding, each with the same weights as ours and only its own way changed: every layer
    on the (B, T) batch, every padded batch unpadded, or the logits decoded at the real rows whatever the device."""
    args = gpu_check.GpuCheckArguments(presets=["tiny"], paddings=paddings)
    contenders, _ = gpu_check.build_contenders("tiny", args, torch.device("cpu"))
    ours = contenders["ours"]
    assert ours.config.unpad_inputs is True
    names = {"ours_padded", "ours_unpadded", "ours_rows_decoding"}
    assert (names <= contenders.keys()) is padded
    if padded:
        padded_model, rows = contenders["ours_padded"], contenders["ours_rows_decoding"]
        assert padded_model.config.unpad_inputs is False and rows.config.unpad_inputs is True
        assert gpu_check.CONTENDER_RULES["ours_rows_decoding"] == {"padded_decoding": {"cuda": "rows", "cpu": "rows"}}
        for other in (padded_model, contenders["ours_unpadded"], rows):
            for (name, a), (_, b) in zip(ours.state_dict().items(), other.state_dict().items(), strict=True):
                assert torch.equal(a, b), name
    args = gpu_check.GpuCheckArguments(presets=["tiny"], paddings=paddings, padded_contenders=False)
    assert len(gpu_check.build_contenders("tiny", args, torch.device("cpu"))[0]) == 2


def test_the_unpadded_contender_unpads_whatever_the_size(
    gpu_check: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its step plans its padded batch unpadded even where `unpadding_pays` says no (a CUDA device below base's
    hidden size), and only while it steps: ours, stepped beside it, keeps the rule."""
    from hf_bertscratch import batching_bertscratch

    monkeypatch.setattr(batching_bertscratch.DEVICE_RULES, "unpad_min_hidden", {"cpu": 10**9})  # no, even on a CPU
    args = gpu_check.GpuCheckArguments(presets=["tiny"])
    contenders, _ = gpu_check.build_contenders("tiny", args, torch.device("cpu"))
    batch = gpu_check.make_batch(4, 16, 0.3)
    unpadded: list[str] = []  # the contender of each step that described its padding (it runs unpadded)
    from_mask = batching_bertscratch.BertScratchPadding.from_mask
    stepping = ""

    def recording(mask: torch.Tensor, extent: tuple[int, int] | None = None) -> object:
        unpadded.append(stepping)
        return from_mask(mask, extent)

    monkeypatch.setattr(batching_bertscratch.BertScratchPadding, "from_mask", recording)
    for stepping in ("ours_unpadded", "ours", "ours_unpadded", "ours"):
        gpu_check.contender_step(stepping, contenders[stepping], "infer", batch, torch.device("cpu"))()
    assert unpadded == ["ours_unpadded", "ours_unpadded"]
    assert batching_bertscratch.DEVICE_RULES.unpad_min_hidden == {"cpu": 10**9}  # restored after each step


def test_flops_estimate(gpu_check: ModuleType) -> None:
    """6 N per token for a training step (2 N forward) plus the attention term, 12 (4) L H n^2 per row of n tokens."""
    config = BertScratchConfig(**PRESETS["mini"])
    num_params, lengths = 1000, [3, 5]
    attention = 4 * 4 * 256 * (9 + 25)
    assert gpu_check.step_flops(num_params, config, lengths, "infer") == 2 * 1000 * 8 + attention
    assert gpu_check.step_flops(num_params, config, lengths, "train") == 3 * (2 * 1000 * 8 + attention)


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA GeForce RTX 3090", None),
    ],
)
def test_bf16_peak_by_device_name(gpu_check: ModuleType, name: str, peak: float | None) -> None:
    assert gpu_check.bf16_peak_tflops(name) == peak


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no CUDA device")
def test_cuda_is_refused_by_name_where_there_is_none(gpu_check: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cuda", "--output_dir", str(tmp_path)])


@pytest.mark.cuda
def test_cuda_quick_record_holds_the_gpu_measurements(gpu_check: ModuleType, tmp_path: Path) -> None:
    record = _run_quick(gpu_check, "cuda", tmp_path)
    assert record["device"]["type"] == "cuda" and record["device"]["name"]
    (parity,) = record["parity"]
    assert parity["fp32_max_abs_diff"] < 1e-4 and parity["bf16_max_abs_diff"] < 0.5
    for case in record["cases"]:
        assert all(value > 0 for value in case["peak_memory_mib"].values())
        assert case["mfu"] is None or all(0 < value < 1 for value in case["mfu"].values())
    assert "parity" not in record["skipped"] and "peak_memory_mib" not in record["skipped"]


def test_the_rows_contender_decodes_the_real_rows_by_its_device_rule(gpu_check: ModuleType) -> None:
    """Its rule decides before any measurement, on the CPU as on a GPU; outside its step the CPU's own choice and a
    GPU's grid stand."""
    from hf_bertscratch import batching_bertscratch as batching

    hidden, padding = batching.decoding_probe_batch(16, torch.float32)
    decode = torch.nn.Linear(16, 32)
    with batching.device_rules(**gpu_check.CONTENDER_RULES["ours_rows_decoding"]):
        assert batching.decodes_padded_grid(decode, hidden, padding, 32) is False
    with batching.device_rules(padded_decoding={"cpu": "grid"}):
        assert batching.decodes_padded_grid(decode, hidden, padding, 32) is True
    assert batching.DEVICE_RULES.padded_decoding == {}
    assert batching.decodes_padded_grid(decode, hidden.to("meta"), padding, 32) is True  # not a CPU: the grid
    with batching.device_rules(padded_decoding={"cpu": "columns"}):
        with pytest.raises(ValueError, match=r"padded_decoding\['cpu'\] must be one of \['auto', 'rows', 'grid'\]"):
            batching.decodes_padded_grid(decode, hidden, padding, 32)
