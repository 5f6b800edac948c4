"""Time every ONNX graph of the same BERT weights under ONNX Runtime's CPU provider, interleaved in one process.

The weights are the benchmark's (`hf_bertscratch.benchmark.build_models`: ours at random init, transformers'
`BertForMaskedLM` holding the same weights), the batch its right-padded one (`make_batch`). Each graph (`GRAPHS`) is
written for the workload (encode: the bare encoder's last hidden state; infer: the MLM's logits at every position),
checked against our PyTorch model at real positions, then run by an ONNX Runtime `InferenceSession` set up as the
benchmark's (`onnx_session`: every graph optimisation, `--num_threads` intra-op threads, spinning off). Every round
times all graphs' InferenceSessions alternately (`time_interleaved`), so load from other processes hits each alike; each
graph's tokens/s per round is its median over `--repeats` calls, and its speed is given as a ratio to `bertscratch
export`'s in the same round (above 1: faster than ours).

Usage:
    python -m lab.compare_onnx_graphs --preset mini --seq_len 128 --padding 0.3 --rounds 3
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import HfArgumentParser, PreTrainedModel

from hf_bertscratch.arguments import parse_args_or_json
from hf_bertscratch.benchmark import (
    RunStart,
    build_models,
    environment_line,
    make_batch,
    run_record,
    time_interleaved,
)
from hf_bertscratch.configuration_bertscratch import PRESETS
from hf_bertscratch.onnx.common import INPUT_NAMES, ONNX_FILE, require
from hf_bertscratch.onnx.export import export_graph, operator_counts
from hf_bertscratch.onnx.runtime import onnx_session, run_session
from hf_bertscratch.records import write_record

from .report_format import WORKLOADS as WORKLOAD_NAMES
from .report_format import Sources, padding_label

logger = logging.getLogger(__name__)

PROGRAM = "python -m lab.compare_onnx_graphs"
OURS = "bertscratch export"  # what `bertscratch export` writes: the graph every other is compared with
# workload -> (task of our export, output read, submodule of either model that computes it: "" for the whole MLM)
WORKLOADS: dict[str, tuple[str, str, str]] = {
    "encode": ("feature-extraction", "last_hidden_state", "bert"),
    "infer": ("fill-mask", "logits", ""),
}


@dataclass(frozen=True)
class Graph:
    """One candidate: whose model, how torch.onnx writes it, and which optimizer rewrites it afterwards."""

    model: str  # "ours" or "transformers"
    exporter: str  # "export" (ours: `export_graph`), "dynamo" or "torchscript" (torch.onnx.export)
    optimize: bool = False  # ours: `export_graph(optimize=...)`
    post: str | None = None  # None, "ort" (onnxruntime.transformers.optimizer) or "onnxscript" (its ORT fusions)
    attention: str = "sdpa"  # transformers' attention implementation when traced


GRAPHS: dict[str, Graph] = {
    OURS: Graph("ours", "export", optimize=True),
    "ours, optimize=False": Graph("ours", "export"),
    "ours, optimize=False + ORT optimizer": Graph("ours", "export", post="ort"),
    "transformers, TorchScript": Graph("transformers", "torchscript"),
    "transformers, TorchScript + ORT optimizer": Graph("transformers", "torchscript", post="ort"),
    "transformers eager attention, TorchScript + ORT optimizer": Graph(
        "transformers", "torchscript", post="ort", attention="eager"
    ),
    "transformers, dynamo": Graph("transformers", "dynamo"),
    "transformers, dynamo + ORT optimizer": Graph("transformers", "dynamo", post="ort"),
    "transformers, dynamo + onnxscript ORT fusions": Graph("transformers", "dynamo", post="onnxscript"),
}


@dataclass
class CompareArguments:
    """What to compare; the defaults are the benchmark's mini case with 30% padding."""

    preset: str = field(default="mini", metadata={"help": f"Model size, one of {sorted(PRESETS)}."})
    workload: str = field(
        default="encode",
        metadata={"help": "encode: the bare encoder's last hidden state; infer: the MLM's logits at every position."},
    )
    graphs: list[str] = field(
        default_factory=lambda: list(GRAPHS),
        metadata={"help": f"Graphs to time besides {OURS!r} (always timed), from {list(GRAPHS)}."},
    )
    batch_size: int = field(default=32, metadata={"help": "Rows per batch B."})
    seq_len: int = field(default=128, metadata={"help": "Padded sequence length T."})
    padding: float = field(default=0.3, metadata={"help": "Fraction of the (B, T) batch that is padding, in [0, 0.5]."})
    num_threads: int = field(
        default=2, metadata={"help": "ONNX Runtime intra-op threads of every graph's InferenceSession."}
    )
    rounds: int = field(default=3, metadata={"help": "Interleaved rounds; each prints its own tokens/s and ratios."})
    repeats: int = field(default=5, metadata={"help": "Timed calls of each graph per round."})
    warmup: int = field(default=1, metadata={"help": "Untimed calls of each graph before each round."})
    seed: int = field(default=0, metadata={"help": "Seed for the weights and the batch."})
    output_dir: str | None = field(
        default=None, metadata={"help": "Keep each graph as OUTPUT_DIR/<n>/model.onnx (default: a temporary folder)."}
    )
    output_json: str | None = field(
        default=None,
        metadata={
            "help": "Write the run's record here (command, commit, date, versions, CPU, load, every round's "
            "tokens/s and each graph's ratio to ours), e.g. results/onnx-graphs/encode-0.3.json; "
            "`python -m lab.make_report` renders the records into docs/onnx.md."
        },
    )

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"--preset {self.preset!r} is not one of {sorted(PRESETS)}.")
        if self.workload not in WORKLOADS:
            raise ValueError(f"--workload {self.workload!r} is not one of {list(WORKLOADS)}.")
        unknown = [name for name in self.graphs if name not in GRAPHS]
        if unknown:
            raise ValueError(f"--graphs {unknown} are not among {list(GRAPHS)}.")
        self.graphs = [OURS, *(name for name in self.graphs if name != OURS)]
        for name in ("batch_size", "seq_len", "num_threads", "rounds", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}.")
        if not 0.0 <= self.padding <= 0.5:
            raise ValueError(f"--padding must be in [0, 0.5], got {self.padding}.")


class _Output(nn.Module):
    """The traced function of a transformers model: the three named inputs in, one output out."""

    def __init__(self, model: PreTrainedModel, output: str) -> None:
        super().__init__()
        self.model = model
        self.output = output

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[
            self.output
        ]


def export_torchscript(model: PreTrainedModel, output: str, path: Path) -> None:
    """Write `model` with torch.onnx's TorchScript exporter (opset 17, both axes of every input dynamic)."""
    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in INPUT_NAMES)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation notice, and TracerWarnings of transformers' mask code
        torch.onnx.export(
            _Output(model, output).eval(),
            example,
            str(path),
            input_names=list(INPUT_NAMES),
            output_names=[output],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES},
            opset_version=17,
            dynamo=False,
        )


def ort_optimizer(path: Path, num_heads: int, hidden_size: int) -> None:
    """Rewrite `path` with ONNX Runtime's transformer optimizer, model type bert, its default fusions."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimize_model(
        str(path), model_type="bert", num_heads=num_heads, hidden_size=hidden_size, opt_level=0
    ).save_model_to_file(str(path))


def onnxscript_fusions(path: Path) -> None:
    """Rewrite `path` with onnxscript's fusions for ONNX Runtime (`optimize_for_ort`)."""
    import onnx_ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    model, _ = optimize_for_ort(onnx_ir.load(str(path)))
    onnx_ir.save(model, str(path))


def build_graph(
    graph: Graph, models: dict[str, PreTrainedModel], workload: str, path: Path, num_heads: int, hidden_size: int
) -> None:
    """Write the candidate `graph` of the workload's model to `path`."""
    task, output, submodule = WORKLOADS[workload]
    model = models[graph.model]
    if graph.model == "transformers":
        model.set_attn_implementation(graph.attention)
    model = model.get_submodule(submodule).eval()
    if graph.exporter == "torchscript":
        export_torchscript(model, output, path)
    else:
        export_graph(model, task, path, optimize=graph.optimize)
    if graph.post == "ort":
        ort_optimizer(path, num_heads, hidden_size)
    elif graph.post == "onnxscript":
        onnxscript_fusions(path)


def notable_operators(path: Path) -> str:
    """The operators that tell the graphs apart: ONNX Runtime's contrib ones and the products, with counts."""
    notable = ("com.microsoft.", "Gemm", "MatMul", "Softmax", "LayerNormalization")
    counts = operator_counts(path)
    return ", ".join(f"{name} {count}" for name, count in counts.items() if name.startswith(notable)) or "-"


def run_steps(
    folders: dict[str, Path],
    ours: PreTrainedModel,
    args: CompareArguments,
    batch: dict[str, torch.Tensor],
) -> dict[str, Callable[[], object]]:
    """A closure running each graph's InferenceSession on `batch`; raises if a graph's output at real positions
    differs from our PyTorch model's by more than 1e-4."""
    _, output, submodule = WORKLOADS[args.workload]
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.inference_mode():
        expected = ours.get_submodule(submodule).eval()(**inputs)[output].numpy()
    real = batch["attention_mask"].bool().numpy()
    steps = {}
    for name, folder in folders.items():
        inference_session = onnx_session(folder, num_threads=args.num_threads, spinning=False)
        difference = float(np.abs(run_session(inference_session, inputs)[output][real] - expected[real]).max())
        if not difference <= 1e-4:
            raise RuntimeError(f"{name!r} differs from the PyTorch model by {difference:.1e} (> 1e-4).")
        logger.info(
            "%s: max |ONNX Runtime - PyTorch| %.1e, %s", name, difference, notable_operators(folder / ONNX_FILE)
        )
        steps[name] = lambda inference_session=inference_session: run_session(inference_session, inputs)
    return steps


def print_round(index: int, seconds: dict[str, list[float]], useful_tokens: int) -> dict[str, float]:
    """Print one round's tokens/s and ratio to ours per graph; returns the tokens/s."""
    tokens_per_s = {name: useful_tokens / statistics.median(times) for name, times in seconds.items()}
    print(f"\nround {index + 1}: tokens/s (speed / {OURS})")
    for name, value in tokens_per_s.items():
        print(f"  {name:60s} {value:10,.0f}  {value / tokens_per_s[OURS]:.2f}x")
    return tokens_per_s


# ------------------------------------------------------------------------------------------------- the records' table
GRAPH_RECORDS = "results/onnx-graphs"
GRAPH_BLOCK = ("<!-- onnx-graphs:start -->\n", "<!-- onnx-graphs:end -->")


def render_graph_table(records: dict[str, dict]) -> str:
    """`lab/compare_onnx_graphs.py` records (file name -> record) as one table: a row per graph, a column per
    record (its workload and padding), each cell the graph's speed over `bertscratch export`'s, median (min-max) over
    the record's interleaved rounds; then each record's machine, load, date and commit."""
    if not records:
        return (
            f"No record in `{GRAPH_RECORDS}/` yet: `python -m lab.compare_onnx_graphs ... --output_json` writes one.\n"
        )
    names = list(dict.fromkeys(name for record in records.values() for name in record["graphs"]))
    columns = [
        f"{WORKLOAD_NAMES.get(r['arguments']['workload'], r['arguments']['workload'])}, {padding_label(r['arguments']['padding'])}"
        for r in records.values()
    ]
    lines = ["| graph | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for name in names:
        cells = []
        for record in records.values():
            graph = record["graphs"].get(name)
            cells.append(
                f"{graph['ratio_median']:.2f} ({graph['ratio_min']:.2f}-{graph['ratio_max']:.2f})" if graph else ""
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    ours = ", ".join(
        f"`{GRAPH_RECORDS}/{file}`: {next(iter(r['graphs'].values()))['tokens_per_s']:,.0f} tokens/s, "
        f"{r['arguments']['rounds']} rounds, {r['cpu']}, {r['threads']} threads, load average (1 min) "
        f"{r['load_average']['start'][0]:.1f}-{r['load_average']['end'][0]:.1f}, {r['date'][:10]}, commit "
        f"{r['commit'] or 'unknown'}"
        for file, r in records.items()
    )
    return "\n".join([*lines, "", f"Ours (the first row) per record: {ours}."]) + "\n"


def graph_block(sources: Sources) -> str:
    """docs/onnx.md's graphs block: every record of `GRAPH_RECORDS`."""
    return render_graph_table(sources.records(GRAPH_RECORDS))


def main(argv: list[str] | None = None) -> None:
    """Build every graph, check it, and time them interleaved round after round."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    parser = HfArgumentParser(CompareArguments, description=__doc__.split("\n\n")[0])
    argv = list(sys.argv[1:] if argv is None else argv)
    (args,) = parse_args_or_json(parser, argv)
    require("onnxruntime")
    start = RunStart.now()

    # 1. The same weights in both models, and the benchmark's batch.
    ours, reference = build_models(args.preset, 0.0, args.seed)
    models = {"ours": ours.eval(), "transformers": reference.eval()}
    batch = make_batch(args.batch_size, args.seq_len, args.padding, seed=args.seed)
    useful_tokens = int(batch["attention_mask"].sum())

    with tempfile.TemporaryDirectory() as scratch:
        # 2. Every graph, each in its own folder as `onnx_session` reads it.
        root = Path(args.output_dir or scratch)
        folders = {name: root / str(index) for index, name in enumerate(args.graphs)}
        config = ours.config
        for name, folder in folders.items():
            folder.mkdir(parents=True, exist_ok=True)
            logger.info("Writing %r to %s", name, folder)
            build_graph(
                GRAPHS[name], models, args.workload, folder / ONNX_FILE, config.num_attention_heads, config.hidden_size
            )

        # 3. One InferenceSession per graph, checked against PyTorch, then timed round after round.
        steps = run_steps(folders, ours, args, batch)
        print(
            f"{args.preset}, {args.workload}, B={args.batch_size} T={args.seq_len} padding {args.padding:g} "
            f"({useful_tokens} real tokens), ONNX Runtime with {args.num_threads} threads, spinning off"
        )
        rounds = [
            print_round(index, time_interleaved(steps, args.repeats, args.warmup), useful_tokens)
            for index in range(args.rounds)
        ]

    print(f"\nmedian over {args.rounds} rounds: tokens/s, speed / {OURS} (min-max)")
    graphs = {}
    for name in args.graphs:
        ratios = [each[name] / each[OURS] for each in rounds]
        tokens_per_s = statistics.median(each[name] for each in rounds)
        graphs[name] = {
            "tokens_per_s": tokens_per_s,
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "rounds_tokens_per_s": [each[name] for each in rounds],
        }
        print(
            f"  {name:60s} {tokens_per_s:10,.0f}  {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        )
    print(f"\n{environment_line()}")
    if args.output_json:
        record = {**run_record(PROGRAM, argv, args, start, onnxruntime=True), "useful_tokens": useful_tokens}
        record["graphs"] = graphs
        write_record(args.output_json, record)


if __name__ == "__main__":
    main()
