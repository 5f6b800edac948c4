"""The benchmark's results: one `CaseResult` per measured case, and the Markdown tables they print as."""

from __future__ import annotations

from dataclasses import dataclass

# The ONNX Runtime contender's graph, as the results name it.
ONNXRUNTIME_GRAPH = (
    "`bertscratch export` (`export_graph(optimize=True)`: com.microsoft.Attention per layer, the encoder on the real "
    "tokens' rows, every Linear a Gemm)"
)


@dataclass
class CaseResult:
    """One measured case; tokens/s are medians over repetitions, the ratio is ours/reference per repetition."""

    preset: str
    seq_len: int
    padding: float
    workload: str
    variant: str
    precision: str
    batch_size: int
    useful_tokens: int
    ours_tokens_per_s: float
    reference_tokens_per_s: float
    ratio_median: float
    ratio_min: float
    ratio_max: float
    loss_max_abs_diff: float | None = None
    ours_peak_mib: float | None = None
    reference_peak_mib: float | None = None
    onnxruntime_tokens_per_s: float | None = None
    ours_over_onnxruntime_median: float | None = None
    ours_over_onnxruntime_min: float | None = None
    ours_over_onnxruntime_max: float | None = None
    onnxruntime_max_abs_diff: float | None = None
    onnxruntime_graph: str | None = None
    onnxruntime_int8_tokens_per_s: float | None = None
    ours_over_onnxruntime_int8_median: float | None = None
    ours_over_onnxruntime_int8_min: float | None = None
    ours_over_onnxruntime_int8_max: float | None = None
    onnxruntime_int8_max_abs_diff: float | None = None


TABLE_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ref tok/s | ours/ref (min-max) | peak MiB ours / ref "
    "| loss diff |\n|---|---|---|---|---|---|---|---|---|---|"
)
ONNXRUNTIME_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ref tok/s | ORT tok/s | ours/ref (min-max) "
    "| ours/ORT (min-max) | ORT diff |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def format_row(result: CaseResult) -> str:
    """One Markdown table row of `result`."""
    memory = "-"
    if result.ours_peak_mib is not None:
        memory = f"{result.ours_peak_mib:,.0f} / {result.reference_peak_mib:,.0f}"
    loss = "-" if result.loss_max_abs_diff is None else f"{result.loss_max_abs_diff:.1e}"
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.reference_tokens_per_s:,.0f} "
        f"| **{result.ratio_median:.2f}x** ({result.ratio_min:.2f}-{result.ratio_max:.2f}) | {memory} | {loss} |"
    )


def format_onnxruntime_row(result: CaseResult) -> str:
    """One Markdown row of an inference `result` timed with ONNX Runtime as the third contender."""
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.reference_tokens_per_s:,.0f} "
        f"| {result.onnxruntime_tokens_per_s:,.0f} "
        f"| {result.ratio_median:.2f}x ({result.ratio_min:.2f}-{result.ratio_max:.2f}) "
        f"| **{result.ours_over_onnxruntime_median:.2f}x** ({result.ours_over_onnxruntime_min:.2f}-"
        f"{result.ours_over_onnxruntime_max:.2f}) | {result.onnxruntime_max_abs_diff:.1e} |"
    )


def format_table(results: list[CaseResult]) -> str:
    """The Markdown table of all results; inference cases timed against ONNX Runtime get a second table."""
    with_ort = [result for result in results if result.onnxruntime_tokens_per_s is not None]
    others = [result for result in results if result.onnxruntime_tokens_per_s is None]
    tables = []
    if others:
        tables.append("\n".join([TABLE_HEADER, *(format_row(result) for result in others)]))
    if with_ort:
        rows = [format_onnxruntime_row(result) for result in with_ort]
        tables.append("\n".join([ONNXRUNTIME_HEADER, *rows, "", f"ORT: {ONNXRUNTIME_GRAPH}."]))
    with_int8 = [result for result in results if result.onnxruntime_int8_tokens_per_s is not None]
    if with_int8:
        rows = [format_int8_row(result) for result in with_int8]
        tables.append("\n".join([INT8_HEADER, *rows, "", f"ORT int8: {ONNXRUNTIME_GRAPH}, quantized (dynamic int8)."]))
    return "\n\n".join(tables)


INT8_HEADER = (
    "| preset | T | pad | workload | mode | ours tok/s | ORT int8 tok/s | ours/int8 (min-max) | int8 diff |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def format_int8_row(result: CaseResult) -> str:
    """One Markdown row of an inference `result` timed against ONNX Runtime on the int8 graph."""
    return (
        f"| {result.preset} | {result.seq_len} | {result.padding:g} | {result.workload} "
        f"| {result.variant}{'' if result.precision == 'fp32' else ' ' + result.precision} "
        f"| {result.ours_tokens_per_s:,.0f} | {result.onnxruntime_int8_tokens_per_s:,.0f} "
        f"| **{result.ours_over_onnxruntime_int8_median:.2f}x** ({result.ours_over_onnxruntime_int8_min:.2f}-"
        f"{result.ours_over_onnxruntime_int8_max:.2f}) | {result.onnxruntime_int8_max_abs_diff:.1e} |"
    )
