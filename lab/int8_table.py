"""The int8 and bf16 accuracy table of docs/onnx.md (between `<!-- int8-table:start -->` and `<!-- int8-table:end -->`):
`bertscratch evaluate-onnx ... --output_dir DIR` writes `DIR/evaluation.json`, the record kept in `results/int8/`;
`lab.make_report` renders them.
"""

from __future__ import annotations

from hf_bertscratch.tasks import TASKS

from .report_format import Sources
from .results_table import ROWS

INT8_RECORDS = "results/int8"
INT8_BLOCK = ("<!-- int8-table:start -->\n", "<!-- int8-table:end -->")


def render_int8_table(records: dict[str, dict], commands: bool = True) -> str:
    """int8's and bf16's accuracy cost from `bertscratch evaluate-onnx` records (file name -> record): per task and
    split, the main metric from PyTorch, PyTorch under bf16 autocast (records made on a CPU with native bf16), the fp32
    and the int8 ONNX exports, bf16 and int8 minus PyTorch, and how many predictions each shares with PyTorch; then the
    records (and with `commands`, the commands that made them)."""
    if not records:
        return (
            f"No record in `{INT8_RECORDS}/` yet: `bertscratch evaluate-onnx ... --output_dir DIR` writes "
            "`DIR/evaluation.json`, the record to keep there.\n"
        )
    lines = [
        "| task, split | metric | PyTorch | PyTorch bf16 | ONNX fp32 | ONNX int8 | bf16 - PyTorch | int8 - PyTorch | "
        "predictions agreeing with PyTorch (bf16 / int8) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, record in records.items():
        task, metric = record["task"], record["main_metric"]
        title = next((label.split(" ")[0] for t, _, label in ROWS if t == task), task)
        label = TASKS[task].metric_label if task in TASKS else metric
        unit = " of tags" if record["task_type"] == "token-classification" else ""
        for split in record["splits"].values():
            scores = {backend["backend"]: backend for backend in split["backends"]}
            pytorch = 100 * scores["pytorch"]["metrics"][metric]
            cells = [f"{title} {split['dataset_split']} ({split['examples']:,})", label, f"{pytorch:.2f}"]
            values = {
                b: 100 * scores[b]["metrics"][metric] for b in ("pytorch bf16", "onnx fp32", "onnx int8") if b in scores
            }
            cells += [f"{values[b]:.2f}" if b in values else "" for b in ("pytorch bf16", "onnx fp32", "onnx int8")]
            cells += [f"{values[b] - pytorch:+.2f}" if b in values else "" for b in ("pytorch bf16", "onnx int8")]
            agreeing = [f"{100 * scores[b]['agreement']:.2f}%" for b in ("pytorch bf16", "onnx int8") if b in scores]
            cells.append(" / ".join(agreeing) + unit)
            lines.append(f"| {' | '.join(cells)} |")
    sources = ", ".join(f"`{INT8_RECORDS}/{name}`" for name in records)
    made = "; ".join(f"`{record['command']}`" for record in records.values())
    machines = sorted({record["cpu"] for record in records.values()})
    note = f"Records: {sources} ({', '.join(machines)})" + (f", made by {made}." if commands else ".")
    return "\n".join([*lines, "", note]) + "\n"


def int8_block(sources: Sources) -> str:
    """docs/onnx.md's block: every record's rows, and the commands that made them."""
    return render_int8_table(sources.records(INT8_RECORDS))
