"""The benchmark stays runnable: its tiniest case end to end, its batches and its argument checks (no timing)."""

from __future__ import annotations

import functools
import json
import multiprocessing.pool
from pathlib import Path

import pytest
import torch

from hf_bertscratch import benchmark, records
from hf_bertscratch.benchmark import cases

TINIEST = ["--presets", "tiny", "--seq_lens", "16", "--batch_size", "4", "--repeats", "1", "--warmup", "0"]


def printed_rows(table: str) -> list[list[str]]:
    """The cells of each data row of a printed benchmark table."""
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| preset")
    ]


def printed_number(cell: str) -> float:
    """A tokens/s cell ("12,345") or the median of a ratio cell ("**1.23x** (1.10-1.40)") as a number."""
    return float(cell.split("x")[0].strip("*").replace(",", ""))


def test_main_runs_tiniest_case_and_writes_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The memory probes run in subprocesses: a hung one fails the test (the pool then terminates them).
    monkeypatch.setattr(
        multiprocessing.pool.ApplyResult, "get", functools.partialmethod(multiprocessing.pool.ApplyResult.get, 300)
    )
    json_file, markdown_file = tmp_path / "out" / "bench.json", tmp_path / "bench.md"
    benchmark.main(
        [*TINIEST, "--paddings", "0.3", "--output_json", str(json_file), "--output_markdown", str(markdown_file)]
    )
    record = json.loads(json_file.read_text())
    results = record["results"]
    assert [(r["padding"], r["workload"]) for r in results] == [(0.3, "train"), (0.3, "infer")]
    # The record names each choice made for this CPU: the GEMM path and the inference decoding at least.
    assert {"gemm_path", "fast_decode"} <= {choice["section"] for choice in record["cpu_choices"]}
    assert all(choice["choice"] for choice in record["cpu_choices"])
    for result in results:
        assert result["ours_tokens_per_s"] > 0 and result["reference_tokens_per_s"] > 0
        # One repetition: the ratio is ours/reference of the very tokens/s recorded beside it (> 1: ours faster).
        ratio = result["ours_tokens_per_s"] / result["reference_tokens_per_s"]
        assert result["ratio_min"] == result["ratio_median"] == result["ratio_max"] == pytest.approx(ratio)
    printed = capsys.readouterr().out
    for cells in printed_rows(printed):
        ours, reference, ratio = (printed_number(cell) for cell in cells[5:8])
        # As printed: ours/ref, up to the rounding of the whole tokens/s and of the two-decimal ratio.
        assert (ours - 0.5) / (reference + 0.5) - 0.005 <= ratio <= (ours + 0.5) / (reference - 0.5) + 0.005, cells
    for result in (r for r in results if r["workload"] == "train"):
        assert result["loss_max_abs_diff"] < 1e-5  # same weights, same batch: the same loss
        assert result["ours_peak_mib"] > 50 and result["reference_peak_mib"] > 50  # a real process measured
    assert results[0]["useful_tokens"] < 4 * 16  # the padded batch counts only real tokens
    table = markdown_file.read_text()
    assert table.count("| tiny | 16 |") == 2
    assert "| tiny | 16 | 0.3 | infer | eager |" in printed and len(printed_rows(printed)) == 2


def test_bf16_autocast_case_runs() -> None:
    args = benchmark.parse_args([*TINIEST, "--paddings", "0.3", "--precisions", "bf16", "--memory", "false"])
    results = benchmark.run_benchmark(args)
    assert [(r.workload, r.precision) for r in results] == [("train", "bf16"), ("infer", "bf16")]
    assert results[0].loss_max_abs_diff < 1e-5  # the loss check itself stays in fp32
    assert "| eager bf16 |" in benchmark.format_row(results[1])


def test_onnxruntime_contender_runs_with_parity() -> None:
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install -e '.[onnx]')")
    pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript")
    args = benchmark.parse_args(
        [
            *TINIEST,
            "--paddings",
            "0.3",
            "--workloads",
            "train",
            "infer",
            "encode",
            "--onnxruntime",
            "true",
            "--onnxruntime_int8",
            "true",
            "--memory",
            "false",
        ]
    )
    train, infer, encode = benchmark.run_benchmark(args)
    assert train.onnxruntime_tokens_per_s is None  # training has no ONNX Runtime contender
    for result in (infer, encode):
        assert result.onnxruntime_tokens_per_s > 0
        low, median, high = (
            result.ours_over_onnxruntime_min,
            result.ours_over_onnxruntime_median,
            result.ours_over_onnxruntime_max,
        )
        assert low == median == high == pytest.approx(result.ours_tokens_per_s / result.onnxruntime_tokens_per_s)
        assert result.onnxruntime_max_abs_diff < 1e-4  # the same weights compute the same outputs
        assert result.onnxruntime_int8_tokens_per_s > 0
        # the int8 contender runs the quantized graph: its outputs move by far more than fp32 rounding
        assert result.onnxruntime_int8_max_abs_diff > 100 * result.onnxruntime_max_abs_diff
    table = benchmark.format_table([train, infer, encode])
    assert "| ours/ORT (min-max) |" in table and "| tiny | 16 | 0.3 | encode | eager |" in table
    assert "| ours/int8 (min-max) |" in table and table.count("| tiny | 16 | 0.3 | infer | eager |") == 2


def test_ratios_are_ours_over_each_contender_per_repetition(monkeypatch: pytest.MonkeyPatch) -> None:
    """With known step times, every recorded and printed ratio is ours/contender of the tokens/s it came from: taken
    per repetition (then median, min, max), and above 1 where ours is the faster."""
    seconds = {
        "ours": [0.1, 0.2, 0.1],
        "reference": [0.2, 0.3, 0.4],
        "onnxruntime": [0.4, 0.1, 0.2],
        "onnxruntime_int8": [0.05, 0.4, 0.05],
    }
    monkeypatch.setattr(cases, "time_interleaved", lambda steps, repeats, warmup: {n: seconds[n] for n in steps})
    monkeypatch.setattr(cases, "onnxruntime_contender", lambda *args, **kwargs: (lambda: None, 0.0))
    args = benchmark.BenchmarkArguments(
        presets=["tiny"],
        seq_lens=[16],
        paddings=[0.3],
        workloads=["train", "infer"],
        batch_size=4,
        repeats=3,
        onnxruntime=True,
        onnxruntime_int8=True,
        memory=False,
    )
    train, infer = benchmark.run_case(args, benchmark.Case("tiny", 16, 0.3, "eager", "fp32"))
    tokens = train.useful_tokens
    for result in (train, infer):
        assert result.ours_tokens_per_s == pytest.approx(tokens / 0.1)  # median of tokens/0.1, /0.2, /0.1
        assert result.reference_tokens_per_s == pytest.approx(tokens / 0.3)
        # Per repetition ours/reference = reference seconds / ours seconds: 2, 1.5, 4.
        assert (result.ratio_median, result.ratio_min, result.ratio_max) == pytest.approx((2.0, 1.5, 4.0))
    assert train.onnxruntime_tokens_per_s is None  # training has no ONNX Runtime contender
    assert infer.onnxruntime_tokens_per_s == pytest.approx(tokens / 0.2)
    # Per repetition ours/ORT = ORT seconds / ours seconds: 4, 0.5, 2.
    ours_over_ort = (
        infer.ours_over_onnxruntime_median,
        infer.ours_over_onnxruntime_min,
        infer.ours_over_onnxruntime_max,
    )
    assert ours_over_ort == pytest.approx((2.0, 0.5, 4.0))
    assert train.onnxruntime_int8_tokens_per_s is None
    assert infer.onnxruntime_int8_tokens_per_s == pytest.approx(tokens / 0.05)
    # Per repetition ours/int8 = int8 seconds / ours seconds: 0.5, 2, 0.5; int8 the faster where below 1.
    ours_over_int8 = (
        infer.ours_over_onnxruntime_int8_median,
        infer.ours_over_onnxruntime_int8_min,
        infer.ours_over_onnxruntime_int8_max,
    )
    assert ours_over_int8 == pytest.approx((0.5, 0.5, 2.0))
    assert "| **0.50x** (0.50-2.00) |" in benchmark.format_int8_row(infer)
    assert "| **2.00x** (1.50-4.00) |" in benchmark.format_row(train)
    assert "| 2.00x (1.50-4.00) | **2.00x** (0.50-4.00) |" in benchmark.format_onnxruntime_row(infer)
    assert (
        "| ours/ref (min-max) |" in benchmark.TABLE_HEADER and "| ours/ORT (min-max) |" in benchmark.ONNXRUNTIME_HEADER
    )


def test_json_argument_file(tmp_path: Path) -> None:
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"presets": ["tiny"], "seq_lens": [16], "paddings": [0.3], "repeats": 2}))
    args = benchmark.parse_args([str(config)])
    assert (args.presets, args.seq_lens, args.paddings, args.repeats) == (["tiny"], [16], [0.3], 2)


@pytest.mark.parametrize("padding", [0.0, 0.3, 0.5])
def test_make_batch_padding_and_labels(padding: float) -> None:
    batch = benchmark.make_batch(32, 128, padding, mask_probability=0.15, seed=1)
    mask, labels = batch["attention_mask"], batch["labels"]
    assert abs(1 - mask.float().mean().item() - padding) < 0.02
    assert mask.sum(1).max().item() == 128  # the longest row fills T, as in a real padded batch
    assert bool((mask[:, 1:] <= mask[:, :-1]).all())  # right padding
    assert bool(((labels != -100) <= (mask == 1)).all())  # labels only on real tokens
    assert bool(((labels != -100).sum(1) >= 1).all())
    assert abs((labels != -100).sum().item() / mask.sum().item() - 0.15) < 0.05
    assert bool((batch["input_ids"][mask == 0] == 0).all())


def test_models_share_weights_and_reference_uses_sdpa() -> None:
    ours, reference = benchmark.build_models("tiny", dropout=0.1, seed=0)
    assert reference.config._attn_implementation == "sdpa"
    batch = benchmark.make_batch(4, 16, 0.3)
    ours.eval(), reference.eval()
    with torch.no_grad():
        mask = batch["attention_mask"].bool()
        ours_logits = ours(batch["input_ids"], batch["attention_mask"]).logits[mask]
        reference_logits = reference(batch["input_ids"], batch["attention_mask"]).logits[mask]
    torch.testing.assert_close(ours_logits, reference_logits, atol=1e-4, rtol=1e-4)


def test_dropout_disabled_restores_rates() -> None:
    ours, reference = benchmark.build_models("tiny", dropout=0.1, seed=0)
    with benchmark.dropout_disabled(ours, reference):
        assert ours.config.attention_probs_dropout_prob == 0.0
        assert all(m.p == 0.0 for m in reference.modules() if isinstance(m, torch.nn.Dropout))
    assert ours.config.attention_probs_dropout_prob == 0.1
    assert all(m.p == 0.1 for m in reference.modules() if isinstance(m, torch.nn.Dropout))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--presets", "huge"], "huge"),
        (["--seq_lens", "1024"], "1024"),
        (["--paddings", "0.8"], "0.8"),
        (["--workloads", "sing"], "sing"),
        (["--variants", "jit"], "jit"),
        (["--precisions", "fp8"], "fp8"),
        (["--repeats", "0"], "repeats"),
        (["--warmup", "-1"], "--warmup must be at least 0, got -1"),
        (["--num_threads", "0"], "--num_threads must be at least 1, got 0"),
        (["--gemm_path", "fast"], r"--gemm_path got 'fast'; expected one of \['auto', "),
        (["--decoding", "x"], r"--decoding got 'x'; expected one of \['auto', 'model'\]"),
    ],
)
def test_bad_arguments_name_the_value(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        benchmark.parse_args(argv)


def test_help_explains_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        benchmark.parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "padding" in capsys.readouterr().out


def test_compiled_inference_is_timed_with_inductors_freezing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled variant compiles inference as one deploys it (freezing on) and training without freezing;
    compilation happens inside the timed calls' warm-up, so the setting must hold while they run."""
    seen = {}

    def fake_timer(steps: dict, repeats: int, warmup: int) -> dict:
        seen[len(seen)] = torch._inductor.config.freezing
        return {name: [1.0] * repeats for name in steps}

    monkeypatch.setattr(cases, "time_interleaved", fake_timer)
    args = benchmark.BenchmarkArguments(
        presets=["tiny"],
        seq_lens=[16],
        paddings=[0.0],
        workloads=["train", "infer", "encode"],
        variants=["compiled"],
        batch_size=2,
        repeats=1,
        memory=False,
    )
    results = benchmark.run_case(args, benchmark.Case("tiny", 16, 0.0, "compiled", "fp32"))
    assert [result.workload for result in results] == ["train", "infer", "encode"]
    assert seen == {0: False, 1: True, 2: True} and torch._inductor.config.freezing is False


def test_records_name_paths_relative_to_where_the_command_ran(tmp_path, monkeypatch) -> None:
    repository = tmp_path / "checkout"
    repository.mkdir()
    monkeypatch.chdir(repository)
    given = [str(repository / "runs" / "x"), str(tmp_path / "shared" / "data"), "--seq_len", "128", "relative/path"]
    assert records.portable_paths(given) == ["runs/x", "../shared/data", "--seq_len", "128", "relative/path"]
    given = [f"--output_dir={repository / 'runs' / 'x'}", f"--data={tmp_path / 'shared'}", "--seq_len=128", "a=/b"]
    assert records.portable_paths(given) == ["--output_dir=runs/x", "--data=../shared", "--seq_len=128", "a=/b"]
    assert records.portable_paths(["--out=/elsewhere/x"]) == ["--out=/elsewhere/x"]  # outside: kept as given


def test_a_mistyped_flag_is_named_in_one_line_not_taken_as_an_abbreviation(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--repeat", "1"])
    error = capsys.readouterr().err
    assert "did you mean '--repeats'?" in error
    assert len(error.strip().splitlines()) == 1
