"""The `bertscratch` command's inspection commands: a model run on a text, exported, or a training run drawn.

    bertscratch fill-mask MODEL "paris is the [MASK] of france ."   [--backend onnxruntime]
    bertscratch classify MODEL "a text" [--text_pair "a second text"]
    bertscratch tag MODEL "George Washington went to Washington ."
    bertscratch answer MODEL --question "Who went?" --context "George Washington went to Washington ."
    bertscratch embed MODEL "a text" [--output v.npy]
    bertscratch similarity MODEL "a text" "another text"
    bertscratch export MODEL OUT          ONNX model + config + tokenizer, laid out for Optimum's ORTModelFor*
    bertscratch attention MODEL "the cat sat on the mat ." --output attention.png
    bertscratch plot OUTPUT_DIR

Each parses its own arguments with `HfArgumentParser` over the dataclasses below (positional fields are marked
`positional` in their metadata) and prints its result (`run_inspection_command`). The command's front door, the layer
above the library, runs them (and the training-side commands, `pretrain`, `finetune`, ..., by their modules'
`main(argv)`), and turns any error into one line on stderr and exit status 1 (`--debug`: the traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hf_bertscratch_base import PROG

from .arguments import ArgumentParser, parse_args_or_json
from .run_folder import atomic_write

# ------------------------------------------------------------------------------------------ inspection arguments


def _positional(help: str) -> Any:
    return field(metadata={"positional": True, "help": help})


def _dtype_field() -> Any:
    return field(
        default="float32",
        metadata={
            "help": "The model's type while it runs: float32, or on a GPU bfloat16/float16 (faster) or tf32 (float32 "
            "weights, TensorFloat-32 matrix products)."
        },
    )


def _pooling_field() -> Any:
    return field(
        default="auto",
        metadata={
            "help": "mean: average of all token vectors; cls: the [CLS] token's vector; auto: as an embedding "
            "model was trained (its 1_Pooling/config.json), else mean."
        },
    )


@dataclass(kw_only=True)
class CommandArguments:
    """Options every inspection command takes."""

    debug: bool = field(
        default=False,
        metadata={
            "help": "On error, show the full traceback instead of one line; show transformers' logs, progress bars and "
            "the CPU choices made (GEMM path, decoding) too."
        },
    )


@dataclass(kw_only=True)
class ModelTextArguments(CommandArguments):
    """A model and one text to run it on."""

    model: str = _positional("Model folder (a training output_dir) or Hub id.")
    text: str = _positional("The text to run the model on (quote it).")
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder, vocab.txt or Hub id; None: the tokenizer saved with the model."},
    )
    device: str | None = field(
        default=None, metadata={"help": "Device to run on: cpu, cuda, cuda:1, ...; None: the pipeline's choice."}
    )
    dtype: Literal["float32", "tf32", "bfloat16", "float16"] = _dtype_field()


@dataclass(kw_only=True)
class InferenceArguments(ModelTextArguments):
    """A model, one text, and what runs the forward pass."""

    backend: Literal["pytorch", "onnxruntime"] = field(
        default="pytorch",
        metadata={
            "help": "pytorch: MODEL is a model folder or Hub id. onnxruntime: MODEL is a folder written by "
            "`bertscratch export` (needs the [onnx] extra); results are the same within float32 rounding."
        },
    )


@dataclass(kw_only=True)
class FillMaskArguments(InferenceArguments):
    """Predict the tokens hidden behind each [MASK] of TEXT, best first, with their probabilities."""

    top_k: int = field(default=5, metadata={"help": "How many candidates to show for each mask."})
    json: bool = field(default=False, metadata={"help": "Print the pipeline's results as JSON instead of a table."})


@dataclass(kw_only=True)
class ClassifyArguments(InferenceArguments):
    """Classify TEXT, or a sentence pair, with a fine-tuned classifier or regressor.

    Prints every label's probability, best first, or a regressor's score (STS-B)."""

    text_pair: str | None = field(
        default=None, metadata={"help": "The second text of a sentence-pair task (MRPC, RTE, STS-B, ...)."}
    )
    json: bool = field(default=False, metadata={"help": "Print the results as JSON instead of a table."})


@dataclass(kw_only=True)
class TagArguments(InferenceArguments):
    """Find the named entities in TEXT with a fine-tuned token classifier: each entity's type, text, span, score."""

    aggregation_strategy: Literal["simple", "first", "average", "max", "none"] = field(
        default="simple",
        metadata={
            "help": "How word pieces become entities (transformers' token-classification pipeline): simple groups "
            "adjacent pieces of one type; first/average/max score whole words; none lists every piece, of a text "
            "longer than the model reads the first window only (the others tag it all, window by window)."
        },
    )
    json: bool = field(default=False, metadata={"help": "Print the results as JSON instead of a table."})


@dataclass(kw_only=True)
class AnswerArguments(CommandArguments):
    """Answer QUESTION from CONTEXT with a fine-tuned extractive question-answering model.

    Prints the answer's text, its character span in the context and its score."""

    model: str = _positional("Model folder (a fine-tuning output_dir) or Hub id.")
    question: str = field(metadata={"help": "The question (quote it)."})
    context: str = field(metadata={"help": "The text that holds the answer (quote it)."})
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder or Hub id; None: the tokenizer saved with the model."},
    )
    device: str | None = field(default=None, metadata={"help": "Device to run on: cpu, cuda, ...; None: cpu."})
    dtype: Literal["float32", "tf32", "bfloat16", "float16"] = _dtype_field()
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer considered, in tokens."})
    max_seq_length: int | None = field(
        default=None,
        metadata={"help": "Tokens per window of question + context; None: 384, or the model's positions if fewer."},
    )
    doc_stride: int = field(default=128, metadata={"help": "Tokens shared by consecutive windows of a long context."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


@dataclass(kw_only=True)
class EmbedArguments(InferenceArguments):
    """Embed TEXT as one sentence vector from the encoder's last layer and print it (or save it)."""

    pooling: Literal["auto", "mean", "cls"] = _pooling_field()
    output: str | None = field(
        default=None, metadata={"help": "Write the vector to this .npy or .json file; None: print it as a JSON list."}
    )


@dataclass(kw_only=True)
class SimilarityArguments(InferenceArguments):
    """Print the cosine similarity of TEXT and TEXT_PAIR's sentence vectors (the vectors `embed` prints), from an
    embedding model (`finetune --task_type embedding`) or a pretrained encoder."""

    text_pair: str = _positional("The second text (quote it).")
    pooling: Literal["auto", "mean", "cls"] = _pooling_field()


@dataclass(kw_only=True)
class AttentionArguments(ModelTextArguments):
    """Draw the self-attention of TEXT as heatmaps with the tokens on both axes (row token attends to column)."""

    output: str = field(default="attention.png", metadata={"help": "Image to write (.png, .pdf, .svg, ...)."})
    layer: int | None = field(
        default=None, metadata={"help": "Layer to draw, from 0 (negative counts from the end); None: the last layer."}
    )
    head: int | None = field(
        default=None, metadata={"help": "Draw only this head, larger; None: every head of the layer, in a grid."}
    )


@dataclass(kw_only=True)
class ExportArguments(CommandArguments):
    """Export MODEL to ONNX in OUTPUT_DIR with its config and tokenizer, checked against PyTorch by ONNX Runtime."""

    model: str = _positional("Model folder (a training output_dir) or Hub id.")
    output_dir: str = _positional("Folder to write; refused if it exists and is not empty, unless --overwrite.")
    task: str | None = field(
        default=None,
        metadata={
            "help": "What to export: feature-extraction, fill-mask, text-classification, token-classification or "
            "question-answering. None: the task of the checkpoint's head (feature-extraction for a bare encoder)."
        },
    )
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder, vocab.txt or Hub id; None: the tokenizer saved with the model."},
    )
    opset: int | None = field(default=None, metadata={"help": "ONNX opset version; None: torch.onnx's default."})
    overwrite: bool = field(default=False, metadata={"help": "Replace OUTPUT_DIR if it already holds files."})
    check: bool = field(
        default=True,
        metadata={
            "help": "Run the written model with ONNX Runtime on a right-padded batch and fail unless it matches "
            "PyTorch within 1e-4; an int8 model within 10%% of each output's range, its top-1 agreement with "
            "PyTorch logged (--no_check to skip)."
        },
    )
    quantize: Literal["dynamic"] | None = field(
        default=None,
        metadata={
            "help": "dynamic: write ONNX Runtime's dynamic int8 quantization of the checked fp32 graph as model.onnx "
            "(int8 MatMul weights per output channel, activations quantized at run time; the fp32 graph is not "
            "kept). None: fp32."
        },
    )
    reduce_range: bool | None = field(
        default=None,
        metadata={
            "help": "With --quantize: round the int8 weights to 7 bits (true) or keep 8 (false). On an x86 CPU "
            "without VNNI (AVX2 only) 8-bit products can saturate, far off the fp32 outputs; with VNNI 8 bits were "
            "the more accurate. None: 7 bits where this CPU lacks VNNI. Pass true for a model that runs on any CPU."
        },
    )
    masked_positions: bool = field(
        default=False,
        metadata={
            "help": "fill-mask only: the graph takes a fourth input masked_positions (batch, masks) and decodes the "
            "vocabulary there only (for --backend onnxruntime; Optimum's ORTModelForMaskedLM feeds three inputs)."
        },
    )
    optimize: bool = field(
        default=True,
        metadata={
            "help": "Write ONNX Runtime's fused Attention and run the encoder on real tokens only (the fastest graph "
            "under ONNX Runtime; needs ONNX Runtime to run). --no_optimize writes plain ONNX operators only."
        },
    )


@dataclass(kw_only=True)
class PlotArguments(CommandArguments):
    """Draw training and validation loss (and validation accuracy) of a training run from its trainer_state.json."""

    run_dir: str = _positional("The output_dir of a pretraining or fine-tuning run.")
    output: str | None = field(default=None, metadata={"help": "Image to write; None: RUN_DIR/loss_curve.png."})


# ------------------------------------------------------------------------------------------- inspection commands

EMBEDDING_FORMATS = (".npy", ".json")
# The flags that say how a command loads its model, passed on as the load keyword arguments of `inference.load_pipeline`
# (and of `answer_question`); a command passes those of them its arguments have.
LOAD_FLAGS = ("tokenizer", "device", "dtype", "backend")


def load_kwargs(args: CommandArguments) -> dict[str, Any]:
    """The load keyword arguments (tokenizer, device, dtype and backend) that the command's flags give."""
    return {name: getattr(args, name) for name in LOAD_FLAGS if hasattr(args, name)}


def run_fill_mask(args: FillMaskArguments) -> None:
    from .inference import fill_mask

    results = fill_mask(args.model, args.text, args.top_k, **load_kwargs(args))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for index, candidates in enumerate(results):
        if len(results) > 1:
            print(f"mask {index + 1}:")
        for rank, candidate in enumerate(candidates, start=1):
            print(f"{rank:>3}. {candidate['token_str']:<16} {candidate['score']:.4f}  {candidate['sequence']}")


def run_classify(args: ClassifyArguments) -> None:
    from .inference import classify

    results = classify(args.model, args.text, args.text_pair, **load_kwargs(args))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for result in results:
        print(f"{result['label']:<16} {result['score']:.4f}")


def run_tag(args: TagArguments) -> None:
    from .inference import tag_entities

    entities = tag_entities(args.model, args.text, aggregation_strategy=args.aggregation_strategy, **load_kwargs(args))
    if args.json:
        print(json.dumps(entities, indent=2, default=float))
        return
    if not entities:
        print("(no entities)")
    for entity in entities:
        kind = entity.get("entity_group", entity.get("entity"))
        print(f"{kind:<8} {entity['word']:<24} [{entity['start']}:{entity['end']}]  {entity['score']:.4f}")


def run_answer(args: AnswerArguments) -> None:
    from .inference import answer_question

    result = answer_question(
        args.model,
        args.question,
        args.context,
        max_seq_length=args.max_seq_length,
        doc_stride=args.doc_stride,
        max_answer_length=args.max_answer_length,
        **load_kwargs(args),
    )
    if args.json:
        print(json.dumps(result, indent=2, default=float))
        return
    print(f"{result['answer']}\n[{result['start']}:{result['end']}]  score {result['score']:.4f}")


def run_embed(args: EmbedArguments) -> None:
    from .inference import embed

    output = Path(args.output) if args.output else None
    if output is not None and output.suffix not in EMBEDDING_FORMATS:
        raise ValueError(f"--output {args.output!r} must end in one of {EMBEDDING_FORMATS}.")
    vector = embed(args.model, args.text, args.pooling, **load_kwargs(args))
    if output is None:
        print(json.dumps(vector.tolist()))
        return
    _write_embedding(vector, output)
    print(f"Wrote a {vector.shape[0]}-dimensional embedding to {output}")


def run_similarity(args: SimilarityArguments) -> None:
    from .inference import similarity

    score = similarity(args.model, args.text, args.text_pair, args.pooling, **load_kwargs(args))
    print(f"{score:.4f}")


def _write_embedding(vector: np.ndarray, output: Path) -> None:
    """Save (H,) `vector` as .npy or .json through a temp file and a rename, so a failure leaves no partial file."""
    with atomic_write(output) as tmp, open(tmp, "wb") as handle:
        if output.suffix == ".npy":
            np.save(handle, vector)
        else:
            handle.write(json.dumps(vector.tolist()).encode("utf-8"))


def run_attention(args: AttentionArguments) -> None:
    from .inference import attention_weights, load_pipeline
    from .plotting import plot_attention

    encoder = load_pipeline("feature-extraction", args.model, **load_kwargs(args))
    assert encoder.tokenizer is not None, "load_pipeline always hands the pipeline a tokenizer"
    tokens, weights = attention_weights(encoder.model, encoder.tokenizer, args.text)
    path = plot_attention(tokens, weights, args.output, args.layer, args.head)
    print(f"Wrote {path}")


def run_export(args: ExportArguments) -> None:
    from .onnx import export

    with _shown_on_stderr(export.__name__):  # the check's figures: ONNX Runtime against PyTorch (fp32, int8)
        output = export.export_onnx(
            args.model,
            args.output_dir,
            task=args.task,
            tokenizer=args.tokenizer,
            opset=args.opset,
            overwrite=args.overwrite,
            check=args.check,
            masked_positions=args.masked_positions,
            quantize=args.quantize,
            optimize=args.optimize,
            reduce_range=args.reduce_range,
        )
    checked = "checked against PyTorch with ONNX Runtime" if args.check else "not checked"
    kind = "int8 " if args.quantize else ""
    print(f"Wrote {kind}{output / 'model.onnx'} with its config and tokenizer ({checked})")


def run_plot(args: PlotArguments) -> None:
    from .plotting import plot_training_curves

    print(f"Wrote {plot_training_curves(args.run_dir, args.output)}")


# Inspection command -> (its arguments, what runs it).
INSPECTION_COMMANDS: dict[str, tuple[type[CommandArguments], Callable[[Any], None]]] = {
    "fill-mask": (FillMaskArguments, run_fill_mask),
    "classify": (ClassifyArguments, run_classify),
    "tag": (TagArguments, run_tag),
    "answer": (AnswerArguments, run_answer),
    "embed": (EmbedArguments, run_embed),
    "similarity": (SimilarityArguments, run_similarity),
    "attention": (AttentionArguments, run_attention),
    "export": (ExportArguments, run_export),
    "plot": (PlotArguments, run_plot),
}


# ------------------------------------------------------------------------------------------------------ parsing


class CommandParser(ArgumentParser):
    """The package's `ArgumentParser` that turns fields marked `positional` in their metadata into positional arguments."""

    @staticmethod
    def _parse_dataclass_field(parser: argparse.ArgumentParser, field: dataclasses.Field) -> None:
        if field.metadata.get("positional"):
            parser.add_argument(field.name, metavar=field.name.upper(), help=field.metadata["help"])
        else:
            ArgumentParser._parse_dataclass_field(parser, field)


def command_parser(command: str) -> CommandParser:
    """An inspection command's parser (its `--help` page is kept by the front door: `hf_bertscratch_cli.dispatch`)."""
    arguments_class, _ = INSPECTION_COMMANDS[command]
    return CommandParser(arguments_class, prog=f"{PROG} {command}", description=arguments_class.__doc__)


def parse_command_arguments(command: str, argv: list[str]) -> CommandArguments:
    """Parse an inspection command's argv (or its single .json file argument) into its dataclass."""
    (args,) = parse_args_or_json(command_parser(command), argv)
    return args


# ------------------------------------------------------------------------------------------------------ running

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"  # the inspection commands' warnings (and export's check)


@contextmanager
def _shown_on_stderr(name: str) -> Iterator[None]:
    """Print logger `name`'s INFO records too on stderr while the block runs (the root logger's handler, which the
    inspection commands give warnings only, is bypassed so that nothing prints twice)."""
    shown = logging.getLogger(name)
    handler, level, propagate = logging.StreamHandler(sys.stderr), shown.level, shown.propagate
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    shown.addHandler(handler)
    shown.setLevel(logging.INFO)
    shown.propagate = False
    try:
        yield
    finally:
        shown.removeHandler(handler)
        shown.setLevel(level)
        shown.propagate = propagate


@contextmanager
def _results_only() -> Iterator[None]:
    """Inspection commands print results only: hide load reports, progress bars and the CPU choices' lines
    (`cpu_matmul`: the GEMM path and decoding; warnings still show), and put the settings back afterwards, since a
    command may run in-process (tests, notebooks)."""
    from transformers.utils import logging as hf_logging

    from . import cpu_matmul

    verbosity, progress_bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    choices_logger = logging.getLogger(cpu_matmul.__name__)
    choices_level = choices_logger.level
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    choices_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if progress_bar:
            hf_logging.enable_progress_bar()
        choices_logger.setLevel(choices_level)


def run_inspection_command(command: str, argv: list[str]) -> None:
    """Parse an inspection command's arguments and run it, printing its results only (its --debug: transformers'
    logging, progress bars and the CPU choices too)."""
    args = parse_command_arguments(command, argv)
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    with _results_only() if not args.debug else nullcontext():
        INSPECTION_COMMANDS[command][1](args)
