"""Time the MLM head's inference decoding alone: one GEMM per run vs cache-sized tiles, fresh vs reused output,
optionally ONNX Runtime's Gemm on the same product, and with `--paddings` the model's own two decodings of a padded
batch, its real rows copied into the grid against the grid with its pad rows zeroed (`batching_bertscratch.
decodes_padded_grid` chooses between them on each CPU), all interleaved (see `--help`). Records land in
results/decoder/ (the two decodings' in results/cpu-choices/)."""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from transformers import HfArgumentParser

from hf_bertscratch.arguments import parse_args_or_json
from hf_bertscratch.batching_bertscratch import BertScratchPadding
from hf_bertscratch.benchmark import check_case_grid, make_batch, time_interleaved
from hf_bertscratch.configuration_bertscratch import BertScratchConfig
from hf_bertscratch.fast_decode import TiledLogitsDecoder, decode_into
from hf_bertscratch.modeling_bertscratch import BertScratchLMHead
from hf_bertscratch.onnx.common import ONNX_FILE, require
from hf_bertscratch.onnx.runtime import onnx_session
from hf_bertscratch.records import RunStart, run_record, write_record

from .record_quick_start import cpu_name
from .report_format import Sources

PROGRAM = "python -m lab.profile_decode"
SEQ_LEN = 128  # T of the padded batches (--paddings)


@dataclass
class DecodeProfileArguments:
    """`python -m lab.profile_decode`: the MLM head's inference decoding alone (what `fast_decode.DEFAULT_TILE` was
    measured with), one GEMM per run vs cache-sized tiles, into fresh memory vs a reused buffer."""

    num_threads: int = field(default=2, metadata={"help": "torch intra-op threads."})
    hidden_size: int = field(default=256, metadata={"help": "H of the model (mini: 256)."})
    vocab_size: int = field(default=30522, metadata={"help": "V (BERT's WordPiece: 30522)."})
    rows: int = field(default=4096, metadata={"help": "Rows decoded (B x T: 32 x 128)."})
    tile: list[int] = field(default_factory=lambda: [256, 1024], metadata={"help": "The tiled variant's rows words."})
    repeats: int = field(default=6, metadata={"help": "Timed repetitions after one warm-up."})
    paddings: list[float] = field(
        default_factory=list,
        metadata={
            "help": "Also time the model's own decoding of a padded (rows / 128, 128) batch with each of these pad "
            "fractions (row lengths spread evenly, as the benchmark's), both ways: the real rows then copied into the "
            "grid (`BertScratchPadding.pad`), and the whole grid with its pad rows zeroed (`zero_pad_rows`)."
        },
    )
    onnxruntime: bool = field(
        default=False,
        metadata={
            "help": "Also time ONNX Runtime's CPU Gemm on the same decode (one Gemm node with the head's weight and "
            "bias, the same threads, spinning off; needs [onnx]): the matrix product alone, PyTorch's MKL against "
            "ONNX Runtime's MLAS."
        },
    )
    output_json: str | None = field(
        default=None,
        metadata={
            "help": "Also write the record here (e.g. results/decoder/NAME.json): how the run was made (command, "
            "commit, date, versions, CPU, load) and each variant's median milliseconds."
        },
    )

    def __post_init__(self) -> None:
        if len(self.tile) != 2 or min(self.tile) < 1:
            raise ValueError(f"tile must be two positive sizes (rows words), got {self.tile}.")
        if self.paddings and self.rows % SEQ_LEN:
            raise ValueError(f"rows must be a multiple of {SEQ_LEN} with --paddings, got {self.rows}.")
        check_case_grid([SEQ_LEN], self.paddings)


def profile_decode(args: DecodeProfileArguments) -> dict[str, float]:
    """Median milliseconds of `fast_decode.decode_into` per variant, timed interleaved (`time_interleaved`)."""
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    config = BertScratchConfig(
        hidden_size=args.hidden_size, vocab_size=args.vocab_size, num_attention_heads=1, intermediate_size=4
    )
    head = BertScratchLMHead(config).eval()
    hidden, reused = torch.randn(args.rows, args.hidden_size), torch.empty(args.rows, args.vocab_size)

    def variant(tile: tuple[int, int] | None, reuse: bool) -> Callable[[], None]:
        def step() -> None:
            out = reused if reuse else torch.empty(args.rows, args.vocab_size)
            decode_into(head, hidden, out, [(0, 0, args.rows)], tile)

        return step

    steps = {
        f"{'tiles ' + 'x'.join(map(str, tile)) if tile else 'one GEMM'}, {'reused' if reuse else 'fresh'} output": (
            variant(tile, reuse)
        )
        for tile in (tuple(args.tile), None)
        for reuse in (False, True)
    }
    for padding in args.paddings:
        steps.update(_padded_decodings(head, args.rows, args.hidden_size, padding, tuple(args.tile)))
    with tempfile.TemporaryDirectory() as folder, torch.inference_mode():
        if args.onnxruntime:
            steps["onnxruntime Gemm"] = _onnxruntime_decode(head, hidden, Path(folder), args.num_threads)
        seconds = time_interleaved(steps, args.repeats, warmup=1)
    return {name: 1000 * statistics.median(values) for name, values in seconds.items()}


def _padded_decodings(
    head: BertScratchLMHead, rows: int, hidden_size: int, padding: float, tile: tuple[int, int]
) -> dict[str, Callable[[], object]]:
    """The decodings of a (rows / `SEQ_LEN`, `SEQ_LEN`) batch with `padding` of it pad: the model's two (its real rows
    copied into the grid, the grid with its pad rows zeroed) and `fast_decode`'s two into a reused buffer (one GEMM,
    the rows then moved into place; `tile`s straight to their places)."""
    attention_mask = make_batch(rows // SEQ_LEN, SEQ_LEN, padding)["attention_mask"]
    grid = BertScratchPadding.from_mask(attention_mask)
    hidden = torch.randn(rows // SEQ_LEN, SEQ_LEN, hidden_size)
    name = f"{1 - grid.indices.numel() / rows:.0%} padding"
    one_gemm, tiled = TiledLogitsDecoder(None), TiledLogitsDecoder(tile)
    return {
        f"{name}: real rows, copied into the grid": lambda: grid.pad(head(grid.unpad(hidden)), SEQ_LEN),
        f"{name}: the grid, pad rows zeroed": lambda: grid.zero_pad_rows(head(hidden)),
        f"{name}: one GEMM into a reused buffer, moved into place": lambda: one_gemm(head, hidden, grid),
        f"{name}: tiles {'x'.join(map(str, tile))} into a reused buffer": lambda: tiled(head, hidden, grid),
    }


def _onnxruntime_decode(head: nn.Module, hidden: torch.Tensor, folder: Path, num_threads: int) -> Callable[[], None]:
    """One ONNX Gemm node computing `hidden @ decoder.weight.T + bias` in an ONNX Runtime InferenceSession set up as
    the benchmark's (`hf_bertscratch.onnx.runtime.onnx_session`); raises unless its output equals torch's to 1e-4."""
    onnx = require("onnx")
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    weight, bias = head.decoder.weight.detach(), head.decoder.bias.detach()  # (V, H), (V,)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["hidden", "weight", "bias"], ["logits"], transB=1)],
        "decode",
        [helper.make_tensor_value_info("hidden", onnx.TensorProto.FLOAT, ["rows", weight.shape[1]])],
        [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["rows", weight.shape[0]])],
        [numpy_helper.from_array(weight.numpy(), "weight"), numpy_helper.from_array(bias.numpy(), "bias")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), folder / ONNX_FILE)
    inference_session = onnx_session(folder, num_threads=num_threads, spinning=False)
    feeds = {"hidden": hidden.numpy()}
    difference = float(abs(inference_session.run(None, feeds)[0] - torch.addmm(bias, hidden, weight.T).numpy()).max())
    if difference > 1e-4:
        raise RuntimeError(f"ONNX Runtime's Gemm differs from torch's decode by {difference:.1e} (> 1e-4).")
    return lambda: inference_session.run(None, feeds)


# ------------------------------------------------------------------------------------------------- the record's table
DECODER_RECORDS = "results/decoder"
DECODER_BLOCK = ("<!-- decoder-profile:start -->\n", "<!-- decoder-profile:end -->")


def render_decoder_table(records: dict[str, dict]) -> str:
    """`lab/profile_decode.py --output_json` records (file name -> record) as one table: a row per decoding
    variant, a column per record (its CPU with its widest instruction set, `record_quick_start.cpu_name`, and threads, grouped by CPU), each cell the median milliseconds; then each
    record's shape, command, machine, load, date and commit."""
    if not records:
        return f"No record in `{DECODER_RECORDS}/` yet: `bash lab/record_speed.sh decoder` writes them.\n"
    records = dict(sorted(records.items(), key=lambda item: (cpu_name(item[1]), item[1]["arguments"]["num_threads"])))
    columns = []
    for record in records.values():
        threads = record["arguments"]["num_threads"]
        columns.append(f"{cpu_name(record)}, {threads} thread{'s' if threads != 1 else ''}")
    names = list(dict.fromkeys(name for record in records.values() for name in record["milliseconds"]))
    lines = ["| decoding | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for name in names:
        cells = [f"{r['milliseconds'][name]:,.1f} ms" if name in r["milliseconds"] else "" for r in records.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    made = "; ".join(
        f"`{DECODER_RECORDS}/{file}`: {r['arguments']['rows']:,} x {r['arguments']['hidden_size']} -> "
        f"{r['arguments']['vocab_size']:,}, median of {r['arguments']['repeats']}, `{r['command']}` on {cpu_name(r)}, "
        f"load average (1 min) {r['load_average']['start'][0]:.1f}, {r['date'][:10]}, commit {r['commit'] or 'unknown'}"
        for file, r in records.items()
    )
    return "\n".join([*lines, "", f"Records: {made}."]) + "\n"


def decoder_block(sources: Sources) -> str:
    """docs/speed.md's decoder block: every record of `DECODER_RECORDS`."""
    return render_decoder_table(sources.records(DECODER_RECORDS))


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Time the decoding variants, print them, and with --output_json write the record; returns the milliseconds."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(DecodeProfileArguments, description=DecodeProfileArguments.__doc__)
    (args,) = parse_args_or_json(parser, argv)
    start = RunStart.now()
    print(
        f"decode {args.rows} x {args.hidden_size} -> {args.vocab_size}, {args.num_threads} threads, median of {args.repeats}:"
    )
    milliseconds = profile_decode(args)
    for name, value in milliseconds.items():
        print(f"  {name:48s} {value:8.1f} ms")
    if args.output_json:
        record = {**run_record(PROGRAM, argv, args, start, args.onnxruntime), "milliseconds": milliseconds}
        write_record(args.output_json, record)
    return milliseconds


if __name__ == "__main__":
    main()
