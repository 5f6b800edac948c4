"""The `bertscratch` command's inspection commands: a model run on a text, or exported.

    bertscratch fill-mask MODEL "paris is the [MASK] of france ."   [--backend onnxruntime]
    bertscratch classify MODEL "a text" [--text_pair "a second text"]
    bertscratch tag MODEL "George Washington went to Washington ."
    bertscratch answer MODEL --question "Who went?" --context "George Washington went to Washington ."
    bertscratch embed MODEL "a text" [--output v.npy]
    bertscratch similarity MODEL "a text" "another text"
    bertscratch classify MODEL --input_file texts.csv [--output_file results.jsonl]   (any of the six above)
    bertscratch export MODEL OUT          ONNX model + config + tokenizer, laid out for Optimum's ORTModelFor*
    bertscratch attention MODEL "the cat sat on the mat ." --output attention.png

Each parses its own arguments with `HfArgumentParser` over the dataclasses below (positional fields are marked
`positional` in their metadata) and prints its result (`run_inspection_command`). The command's front door, the layer
above the library, runs them (and the training-side commands, `pretrain`, `finetune`, ..., by their modules'
`main(argv)`; `plot`, which needs neither torch nor transformers, by its own module), and turns any error into one
line on stderr and exit status 1 (`--debug`: the traceback).

The six commands that run a model on a text also run it on every input of a file (`--input_file`, read as
fine-tuning reads its files), `--batch_size` model rows per forward pass (an input each; `tag` and `answer` count
windows of texts, as transformers' chunked pipelines do, and `tag` a list of words as one) through the same
functions as one input (a list of one), and print one JSON line per input in the file's order, the input with its
result (`show_results`). A file's columns are those the column flags name, else those the model was fine-tuned
with (`finetune --text_column review`, recorded in its config as `input_columns`), else `text` (`question` and
`context` for `answer`). `tag` reads a row's list of words instead (`--tokens_column`, or the column a
token-classification model was fine-tuned on), a tag per word.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

from hf_bertscratch_base import PROG
from hf_bertscratch_base.data_files import (
    LIST_BUILDERS,
    check_input_file_is_not_conll,
    file_kinds,
    is_squad_json,
    is_text_file,
)
from hf_bertscratch_base.model_config import describe_thresholds, one_or_each, read_config, read_model_config
from hf_bertscratch_base.task_table import (
    INPUT_COLUMN_DEFAULTS,
    MULTI_LABEL_THRESHOLD,
    InputColumn,
    check_input_columns,
    choose_file_columns,
    column_flag,
    recorded_input_columns,
)

from .arguments import ArgumentParser, parse_args_or_json
from .run_folder import atomic_write

# ------------------------------------------------------------------------------------------ inspection arguments


def _positional(help: str) -> Any:
    return field(metadata={"positional": True, "help": help})


def _optional_positional(help: str) -> Any:
    """A positional argument that may be left out (given as --input_file's column instead)."""
    return field(default=None, metadata={"positional": True, "help": help})


# How --input_file's help describes a printed line: the input it answers, then its result (`show_results`).
TEXT_LINE = '{"text": ..., RESULT: what the text alone prints as JSON}'


def _input_file_field(instead_of: str, row: str, line: str = TEXT_LINE) -> Any:
    """--input_file, its help naming what it stands for (`instead_of`), where a row holds the input (`row`) and what
    a printed line holds (`line`)."""
    return field(
        default=None,
        metadata={
            "help": f"Run on every input of this file instead of {instead_of}: a .txt file holds one text per line; "
            f"a .csv, .tsv, .json/.jsonl or .parquet file (.gz too) one input per row, {row}. Prints one JSON line "
            f"per input, in the file's order: {line}."
        },
    )


# How --input_file's help describes a row of one text, and of text pairs.
TEXT_ROW = "its text in the column --text_column names"
PAIR_ROW = "its texts in the columns --text_column and --text_pair_column name"


def _column_field(role: str, help: str) -> Any:
    """--{role}_column: None where not given, the column then chosen with the model's config (`command_inputs`)."""
    default = INPUT_COLUMN_DEFAULTS[role]
    otherwise = f"else {default!r}" if default is not None else "else none"
    return field(
        default=None,
        metadata={
            "help": f"With --input_file (not .txt): {help} None: the column the model was fine-tuned with "
            f"(`finetune --{role}_column`, recorded in its config), {otherwise}."
        },
    )


def _batch_size_field(counts: str = "With --input_file: texts per forward pass", windows: str = "") -> Any:
    """--batch_size, its help saying what a forward pass counts (`counts`) for the command, and for a command that
    counts windows, what makes them (`windows`)."""
    return field(default=8, metadata={"help": f"{counts}, each batch padded to its longest{windows}."})


def _json_field(help: str) -> Any:
    return field(
        default=False,
        metadata={"help": f"{help} One input only: --input_file prints a JSON line per input, and refuses --json."},
    )


def _output_file_field() -> Any:
    return field(
        default=None,
        metadata={
            "help": "With --input_file: write the JSON lines to this file (in one rename, once all are done) "
            "instead of printing them."
        },
    )


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
class ModelArguments(CommandArguments):
    """A model and where it runs."""

    model: str = _positional("Model folder (a training output_dir) or Hub id.")
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder, vocab.txt or Hub id; None: the tokenizer saved with the model."},
    )
    device: str | None = field(
        default=None, metadata={"help": "Device to run on: cpu, cuda, cuda:1, ...; None: the pipeline's choice."}
    )
    dtype: Literal["float32", "tf32", "bfloat16", "float16"] = _dtype_field()


@dataclass(kw_only=True)
class ModelTextArguments(ModelArguments):
    """A model and one text to run it on."""

    text: str = _positional("The text to run the model on (quote it).")


@dataclass(kw_only=True)
class InferenceArguments(ModelArguments):
    """A model, one text or a file of them, and what runs the forward pass."""

    text: str | None = _optional_positional("The text to run the model on (quote it); or give --input_file.")
    input_file: str | None = _input_file_field("TEXT", TEXT_ROW)
    text_column: str | None = _column_field("text", "the column of texts.")
    batch_size: int = _batch_size_field()
    output_file: str | None = _output_file_field()
    backend: Literal["pytorch", "onnxruntime"] = field(
        default="pytorch",
        metadata={
            "help": "pytorch: MODEL is a model folder or Hub id. onnxruntime: MODEL is a folder written by "
            "`bertscratch export` (needs the [onnx] extra); results are the same within float32 rounding."
        },
    )


@dataclass(kw_only=True)
class FillMaskArguments(InferenceArguments):
    """Predict the tokens hidden behind each [MASK] of TEXT (or of each text of --input_file), best first, with their
    probabilities."""

    input_file: str | None = _input_file_field("TEXT", TEXT_ROW, '{"text": ..., "masks": each mask\'s candidates}')

    top_k: int = field(default=5, metadata={"help": "How many candidates to show for each mask."})
    json: bool = _json_field("Print the pipeline's results as JSON instead of a table.")


@dataclass(kw_only=True)
class ClassifyArguments(InferenceArguments):
    """Classify TEXT, or a sentence pair (or each input of --input_file), with a fine-tuned classifier or regressor.

    Prints every label's probability, best first, or a regressor's score (STS-B); for a multi-label classifier, each
    label's sigmoid, best first, and the labels above its threshold (those the text has: --threshold, else the one
    fine-tuning recorded in its config for every label or each label's own, else 0.5)."""

    text_pair: str | None = field(
        default=None, metadata={"help": "The second text of a sentence-pair task (MRPC, RTE, STS-B, ...)."}
    )
    input_file: str | None = _input_file_field(
        "TEXT (and --text_pair)",
        f"{PAIR_ROW} (a text alone without --text_pair_column)",
        '{"text": ..., "text_pair": ... (a pair), "labels": every label\'s score, best first, and for a multi-label '
        'classifier "predicted_labels": those above its threshold and "threshold": it (a number, or each label\'s)}',
    )
    text_pair_column: str | None = _column_field(
        "text_pair", "the column of the second texts of sentence pairs (none: single texts)."
    )
    batch_size: int = _batch_size_field("With --input_file: inputs (a text, or a sentence pair) per forward pass")
    threshold: float | None = field(
        default=None,
        metadata={
            "help": "A multi-label classifier's: give each label whose sigmoid is above this (between 0 and 1; "
            "another model refuses it), for every label. None: the threshold fine-tuning recorded in the model's "
            "config (`finetune --multi_label_threshold`: one for every label, or each label's own), else "
            f"{MULTI_LABEL_THRESHOLD:g}."
        },
    )
    json: bool = _json_field("Print the results as JSON instead of a table.")


@dataclass(kw_only=True)
class TagArguments(InferenceArguments):
    """Find the named entities in TEXT (or in each text, or list of words, of --input_file) with a fine-tuned token
    classifier: each entity's type, text, span, score; of a list of words, each word's tag too."""

    aggregation_strategy: Literal["simple", "first", "average", "max", "none"] = field(
        default="simple",
        metadata={
            "help": "How word pieces become entities (transformers' token-classification pipeline): simple groups "
            "adjacent pieces of one type; first/average/max score whole words; none lists every piece, of a text "
            "longer than the model reads the first window only (the others tag it all, window by window)."
        },
    )
    batch_size: int = _batch_size_field(
        "Windows of texts, or lists of words (--tokens_column), per forward pass",
        ": a text the model's positions hold is one window (as transformers' token-classification pipeline counts "
        "them), a longer one several (one with --aggregation_strategy none), and a batch takes the windows of "
        "consecutive texts of --input_file; a list of words is one, tagged whole, and a batch takes consecutive lists",
    )
    input_file: str | None = _input_file_field(
        "TEXT",
        f"{TEXT_ROW}, or, in a {file_kinds(LIST_BUILDERS)} file, a list of words in the column --tokens_column names",
        '{"text": ..., "entities": [...], [] for none}; of words: {"tokens": [...], "tags": a tag per word, '
        '"entities": runs of words, start and end word indices}',
    )
    tokens_column: str | None = field(
        default=None,
        metadata={
            "help": f"With --input_file ({file_kinds(LIST_BUILDERS)}, whose cells hold lists): the column of word "
            "lists (a sentence cut into words, as "
            "`finetune --task_type token-classification` reads them); each word is tagged as fine-tuning scored it, "
            "at its first piece, its runs of tags grouped into entities as --aggregation_strategy simple groups pieces "
            "(another strategy is refused), and a list must fit the model's positions. None: the column the model was "
            "fine-tuned with (`finetune --tokens_column`, recorded in its config) where the file has it or lacks "
            "the column of texts, else none (a row holds a text)."
        },
    )
    json: bool = _json_field("Print the results as JSON instead of a table.")


@dataclass(kw_only=True)
class AnswerArguments(CommandArguments):
    """Answer QUESTION from CONTEXT (or each question of --input_file from its context) with a fine-tuned extractive
    question-answering model.

    Prints the answer's text, its character span in the context and its score."""

    model: str = _positional("Model folder (a fine-tuning output_dir) or Hub id.")
    question: str | None = field(default=None, metadata={"help": "The question (quote it); or give --input_file."})
    context: str | None = field(
        default=None, metadata={"help": "The text that holds the answer (quote it); or give --input_file."}
    )
    input_file: str | None = _input_file_field(
        "--question and --context",
        "its question and context in the columns --question_column and --context_column name",
        '{"question": ..., "context": ..., "answer": ..., "start": ..., "end": ..., "score": ...}',
    )
    question_column: str | None = _column_field("question", "the column of questions.")
    context_column: str | None = _column_field("context", "the column of contexts.")
    batch_size: int = _batch_size_field(
        "Windows of question + context per forward pass (as tag counts them)",
        ": a context longer than --max_seq_length gives several, and a batch takes the windows of consecutive "
        "questions of --input_file",
    )
    output_file: str | None = _output_file_field()
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
    align_to_words: bool = field(
        default=True,
        metadata={
            "help": "Widen the answer to whole words, as transformers 4's question-answering pipeline did: a span "
            'that starts or ends inside a word ("hington" of was ##h ##ington) takes the whole word. '
            "--no_align_to_words keeps the span's tokens (what evaluation scores), for a language the tokenizer "
            "does not cut into words."
        },
    )
    json: bool = _json_field("Print the result as JSON.")


@dataclass(kw_only=True)
class EmbedArguments(InferenceArguments):
    """Embed TEXT (or each text of --input_file) as one sentence vector from the encoder's last layer and print it
    (or save it)."""

    input_file: str | None = _input_file_field("TEXT", TEXT_ROW, '{"text": ..., "embedding": its vector}')
    pooling: Literal["auto", "mean", "cls"] = _pooling_field()
    output: str | None = field(
        default=None,
        metadata={
            "help": "Write the vector to this .npy or .json file (with --input_file: an (N, H) array, a row per "
            "input); None: print it as a JSON list."
        },
    )


@dataclass(kw_only=True)
class SimilarityArguments(InferenceArguments):
    """Print the cosine similarity of TEXT and TEXT_PAIR's sentence vectors (the vectors `embed` prints; or of each
    pair of --input_file), from an embedding model (`finetune --task_type embedding`) or a pretrained encoder."""

    text_pair: str | None = _optional_positional("The second text (quote it); or give --input_file.")
    input_file: str | None = _input_file_field(
        "TEXT and TEXT_PAIR", PAIR_ROW, '{"text": ..., "text_pair": ..., "similarity": their cosine}'
    )
    text_pair_column: str | None = _column_field("text_pair", "the column of the second texts (required).")
    batch_size: int = _batch_size_field("With --input_file: pairs per forward pass (2 x this many texts)")
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


# ------------------------------------------------------------------------------------------- inspection commands

EMBEDDING_FORMATS = (".npy", ".json")
# The flags that say how a command loads its model, passed on as the load keyword arguments of `inference.load_pipeline`
# (and of `answer_question`); a command passes those of them its arguments have.
LOAD_FLAGS = ("tokenizer", "device", "dtype", "backend")


def load_kwargs(args: CommandArguments) -> dict[str, Any]:
    """The load keyword arguments (tokenizer, device, dtype and backend) that the command's flags give."""
    return {name: getattr(args, name) for name in LOAD_FLAGS if hasattr(args, name)}


def run_fill_mask(args: FillMaskArguments) -> None:
    from .inference import fill_mask_many

    texts = command_inputs(args, ("text",))["text"]
    results = fill_mask_many(args.model, texts, args.top_k, args.batch_size, **load_kwargs(args))
    show_results(args, results, {"text": texts}, "masks", _show_fill_mask)


def _show_fill_mask(args: FillMaskArguments, results: list[list[dict]]) -> None:
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for index, candidates in enumerate(results):
        if len(results) > 1:
            print(f"mask {index + 1}:")
        for rank, candidate in enumerate(candidates, start=1):
            print(f"{rank:>3}. {candidate['token_str']:<16} {candidate['score']:.4f}  {candidate['sequence']}")


def run_classify(args: ClassifyArguments) -> None:
    from .inference import classify_many, labels_above, multi_label_threshold

    thresholds = multi_label_threshold(args.model, args.threshold)  # None: not a multi-label classifier
    inputs = command_inputs(args, ("text",), optional=("text_pair",))
    results = classify_many(args.model, inputs["text"], inputs.get("text_pair"), args.batch_size, **load_kwargs(args))
    if thresholds is None:
        show_results(args, results, inputs, "labels", _show_classification)
        return
    threshold = one_or_each(thresholds)  # as config.json records it: one number, or each label's
    answers = (
        {"labels": scores, "predicted_labels": labels_above(scores, thresholds), "threshold": threshold}
        for scores in results
    )
    show_results(args, answers, inputs, None, _show_multi_label)


def _show_classification(args: ClassifyArguments, results: list[dict]) -> None:
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for result in results:
        print(f"{result['label']:<16} {result['score']:.4f}")


def _show_multi_label(args: ClassifyArguments, answer: dict) -> None:
    """A multi-label classifier's answer: each label's sigmoid, best first, then the labels above its threshold (one
    for every label, or each label's own)."""
    if args.json:
        print(json.dumps(answer, indent=2))
        return
    _show_classification(args, answer["labels"])
    threshold = answer["threshold"]
    per_label = isinstance(threshold, dict)
    above = (
        f"each label's threshold ({describe_thresholds(threshold)})" if per_label else describe_thresholds(threshold)
    )
    print(f"above {above}: {', '.join(answer['predicted_labels']) or '(none)'}")


def run_tag(args: TagArguments) -> None:
    from .inference import tag_entities_many, tag_words_many

    inputs = command_inputs(args, ("text",), ("tokens",))
    if "tokens" in inputs:
        if args.aggregation_strategy != "simple":  # a flag that would change nothing
            raise ValueError(
                f"--aggregation_strategy {args.aggregation_strategy!r} groups the pieces of texts, and --input_file "
                f"{args.input_file!r} holds lists of words, whose tags are grouped word by word as the simple strategy "
                "groups pieces: leave --aggregation_strategy out."
            )
        tagged = tag_words_many(args.model, inputs["tokens"], batch_size=args.batch_size, **load_kwargs(args))
        show_results(args, tagged, inputs, None, _show_entities)
        return
    texts = inputs["text"]
    entities = tag_entities_many(
        args.model,
        texts,
        aggregation_strategy=args.aggregation_strategy,
        batch_size=args.batch_size,
        **load_kwargs(args),
    )
    show_results(args, entities, {"text": texts}, "entities", _show_entities)


def _show_entities(args: TagArguments, entities: list[dict]) -> None:
    if args.json:
        print(json.dumps(entities, indent=2, default=float))
        return
    if not entities:
        print("(no entities)")
    for entity in entities:
        kind = entity.get("entity_group", entity.get("entity"))
        print(f"{kind:<8} {entity['word']:<24} [{entity['start']}:{entity['end']}]  {entity['score']:.4f}")


def run_answer(args: AnswerArguments) -> None:
    from .inference import answer_question_many

    inputs = command_inputs(args, ("question", "context"))
    answers = answer_question_many(
        args.model,
        inputs["question"],
        inputs["context"],
        max_seq_length=args.max_seq_length,
        doc_stride=args.doc_stride,
        max_answer_length=args.max_answer_length,
        batch_size=args.batch_size,
        align_to_words=args.align_to_words,
        **load_kwargs(args),
    )
    show_results(args, answers, inputs, None, _show_answer)


def _show_answer(args: AnswerArguments, result: dict) -> None:
    if args.json:
        print(json.dumps(result, indent=2, default=float))
        return
    print(f"{result['answer']}\n[{result['start']}:{result['end']}]  score {result['score']:.4f}")


def run_embed(args: EmbedArguments) -> None:
    from .inference import embed_many

    output = Path(args.output) if args.output else None
    if output is not None and output.suffix not in EMBEDDING_FORMATS:
        raise ValueError(f"--output {args.output!r} must end in one of {EMBEDDING_FORMATS}.")
    if output is not None and args.output_file is not None:
        raise ValueError(
            f"--output {args.output!r} and --output_file {args.output_file!r} were both given: --output writes the "
            "vectors as one array, --output_file as JSON lines; give one."
        )
    texts = command_inputs(args, ("text",))["text"]
    vectors = embed_many(args.model, texts, args.pooling, args.batch_size, **load_kwargs(args))
    if output is None:
        show_results(args, (vector.tolist() for vector in vectors), {"text": texts}, "embedding", _show_embedding)
        return
    if args.input_file is None:
        (vector,) = vectors
        _write_embedding(vector, output)
        print(f"Wrote a {vector.shape[0]}-dimensional embedding to {output}")
        return
    array = np.stack(list(with_progress(vectors, len(texts), prints_results=False)))  # (N, H)
    _write_embedding(array, output)
    print(f"Wrote {array.shape[0]} {array.shape[1]}-dimensional embeddings, one row per input, to {output}")


def _show_embedding(args: EmbedArguments, vector: list[float]) -> None:
    print(json.dumps(vector))


def run_similarity(args: SimilarityArguments) -> None:
    from .inference import similarity_many

    inputs = command_inputs(args, ("text", "text_pair"))
    scores = similarity_many(
        args.model, inputs["text"], inputs["text_pair"], args.pooling, args.batch_size, **load_kwargs(args)
    )
    show_results(args, scores, inputs, "similarity", _show_similarity)


def _show_similarity(args: SimilarityArguments, score: float) -> None:
    print(f"{score:.4f}")


def _write_embedding(vectors: np.ndarray, output: Path) -> None:
    """Save (H,) or (N, H) `vectors` as .npy or .json through a temp file and a rename, so a failure leaves no partial
    file."""
    with atomic_write(output) as tmp, open(tmp, "wb") as handle:
        if output.suffix == ".npy":
            np.save(handle, vectors)
        else:
            handle.write(json.dumps(vectors.tolist()).encode("utf-8"))


# ------------------------------------------------------------------------------------------ a file of inputs


def command_inputs(args: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, list[Any]]:
    """Input role ("text", "text_pair", "question", "context", each a field of `args`) -> the command's inputs, in
    order: the one the command line gives, or every row of --input_file, in the column `--{role}_column` names, else
    the one the model was fine-tuned with (recorded in its config), else the role's default
    (`task_table.choose_input_columns`, as the front door chooses them); a role of `optional` given neither way is
    left out. An optional role "tokens" (`tag`'s, which has no such field): a row of --input_file may hold a list of
    words instead (--tokens_column, `task_table.choose_file_columns`), which then comes alone.

    Raises naming what is given both ways (TEXT and --input_file) or neither, --output_file or a column flag
    without --input_file, and --json with it."""
    roles = (*required, *optional)
    given = {role: getattr(args, role, None) for role in roles if getattr(args, role, None) is not None}
    if args.input_file is None:
        missing = [_shown(args, role) for role in required if role not in given]
        if missing:
            raise ValueError(f"Give {' and '.join(missing)}, or a file of inputs with --input_file.")
        if args.output_file is not None:
            raise ValueError(
                f"--output_file {args.output_file!r} is where the results of --input_file go: give --input_file, or "
                "leave --output_file out to print the one result."
            )
        _check_no_columns_named(args, roles)
        return {role: [value] for role, value in given.items()}
    if getattr(args, "json", False):
        raise ValueError(
            f"--json prints one input's result as JSON; with --input_file {args.input_file!r} every result is printed "
            "as a JSON line already: leave --json out."
        )
    if given:
        shown = " and ".join(_shown(args, role) for role in given)
        flags = " and ".join(column_flag(role) for role in roles)
        raise ValueError(
            f"{shown} and --input_file {args.input_file!r} were both given: give the input on the command line, or "
            f"a file of inputs with --input_file (its columns named by {flags})."
        )
    named = {role: getattr(args, f"{role}_column") for role in roles}
    recorded = {} if has_fixed_columns(args.input_file) else model_input_columns(args.model)

    def choose(found: list[str]) -> dict[str, InputColumn]:
        columns = choose_file_columns(roles, named, recorded, found)
        for role in required:
            if role not in columns and "tokens" not in columns:
                raise ValueError(
                    f"--input_file {args.input_file!r}: name the column that holds {_shown(args, role)} with "
                    f"{column_flag(role)}."
                )
        return columns

    if named.get("tokens") is not None and named.get("text") is not None:
        choose([])  # both named: refused before the file is read
    return read_input_file(args.input_file, choose, quiet=not args.debug)


def has_fixed_columns(path: str) -> bool:
    """Whether the file of inputs `path` names its columns itself, whatever a model recorded: a text file's lines
    are its texts ("text"), a SQuAD-layout json's questions and contexts are "question" and "context"."""
    return is_text_file(path) or (Path(path).is_file() and is_squad_json(path))


def model_input_columns(model: str) -> dict[str, str]:
    """The input columns fine-tuning recorded in `model`'s config (`task_table.recorded_input_columns`): a local
    folder's, or a Hub id's from the Hub cache (as the front door reads them), else downloaded; {} where it records
    none or has no config to be had (loading the model then names what is wrong)."""
    config = read_model_config(model)
    if config is None and not Path(model).expanduser().exists():
        from huggingface_hub import hf_hub_download

        try:
            config = read_config(hf_hub_download(model, "config.json"))
        except (OSError, ValueError):  # offline, unreachable, no such model: the pipeline's load says which
            config = None
    return recorded_input_columns(config)


def _check_no_columns_named(args: Any, roles: tuple[str, ...]) -> None:
    """Raise naming a column flag (--text_column, ...) given without --input_file: only a file has columns, and the
    flag would do nothing."""
    for role in roles:
        column = getattr(args, f"{role}_column")
        if column is not None:
            raise ValueError(
                f"{column_flag(role)} {column!r} names a column of --input_file, and none was given: "
                f"give --input_file, or leave {column_flag(role)} out."
            )


def _shown(args: Any, name: str) -> str:
    """How the command line gives the field `name`: TEXT for a positional argument, --question for a flag."""
    fields = {each.name: each for each in dataclasses.fields(args)}
    return name.upper() if fields[name].metadata.get("positional") else f"--{name}"


def read_input_file(
    path: str,
    columns: dict[str, InputColumn] | Callable[[list[str]], dict[str, InputColumn]],
    quiet: bool = True,
) -> dict[str, list[Any]]:
    """Role -> the texts (role "tokens": the lists of words) of its column (`columns`: role -> its column,
    `task_table.choose_input_columns`, or what chooses them from the file's columns) in the data file `path`, row by
    row (a .txt file: line by line, its one column "text"; a SQuAD-layout .json file: question by
    question), read and checked as fine-tuning reads its files (`data.load_data_file`, `load_squad_json`). Raises
    naming a column the file lacks, where its name came from and the columns the file has, and the first row whose
    value is empty or not text."""
    from .data import load_data_file
    from .tasks.question_answering import load_squad_json

    check_input_file_is_not_conll(path)
    with _datasets_quiet(quiet):
        rows = load_squad_json(path) if Path(path).is_file() and is_squad_json(path) else load_data_file(path)
    if callable(columns):
        columns = columns(rows.column_names)
    check_input_columns(rows.column_names, columns, path)  # as the front door does
    inputs = {role: list(rows[column.column]) for role, column in columns.items()}
    for role, values in inputs.items():
        check = _check_words if role == "tokens" else _check_texts
        check(values, path, columns[role].column, column_flag(role))
    return inputs


def _check_words(values: list[Any], path: str, column: str, flag: str) -> None:
    """Raise naming the first of `values` (the column `column` of the file `path`) that is not a list of words."""
    for index, value in enumerate(values):
        if isinstance(value, list) and value and all(isinstance(word, str) and word.strip() for word in value):
            continue
        if not isinstance(value, list):
            found = f"holds {value!r:.100}"
        elif not value:
            found = "holds no words"
        else:
            found = "holds an empty word" if all(isinstance(w, str) for w in value) else f"holds {value!r:.100}"
        raise ValueError(
            f"Row {index + 1} of --input_file {path!r} (counting from 1, the header not counted) {found} in column "
            f"{column!r} ({flag}): expected a list of words (strings), as token-classification fine-tuning reads them."
        )


def _check_texts(values: list[Any], path: str, column: str, flag: str) -> None:
    """Raise naming the first of `values` (the column `column` of the file `path`) that is empty or not text."""
    for index, value in enumerate(values):
        if isinstance(value, str) and value.strip():
            continue
        found = "is empty" if value is None or isinstance(value, str) else f"holds {value!r}, not text"
        if is_text_file(path):
            raise ValueError(f"Line {index + 1} of --input_file {path!r} {found}: expected one text on every line.")
        raise ValueError(
            f"Row {index + 1} of --input_file {path!r} (counting from 1, the header not counted) {found} in column "
            f"{column!r} ({flag}): expected a text in every row."
        )


@contextmanager
def _datasets_quiet(quiet: bool) -> Iterator[None]:
    """Hide `datasets`' progress bars and info lines while a file loads (`quiet`), and put them back afterwards."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from datasets.utils import logging as datasets_logging

    if not quiet:
        yield
        return
    hidden, verbosity = are_progress_bars_disabled(), datasets_logging.get_verbosity()
    disable_progress_bars()
    datasets_logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets_logging.set_verbosity(verbosity)
        if not hidden:
            enable_progress_bars()


def show_results(
    args: Any,
    results: Iterator[Any],
    inputs: dict[str, list[str]],
    key: str | None,
    show_one: Callable[[Any, Any], None],
) -> None:
    """Show the command's results: the one result as `show_one` shows it (a table, or its --json), or with
    --input_file one JSON line per input, in order, printed as each batch is done or written to --output_file.

    A line is a JSON object of the input it answers (`inputs`: role -> its texts, "text", "text_pair", "question",
    "context") and the result, under `key` (a dict result, `answer`'s, with its own keys instead), so that each line
    reads alone, without counting lines against the file's rows."""
    if args.input_file is None:
        (result,) = results
        show_one(args, result)
        return
    count = len(next(iter(inputs.values())))
    try:
        with _output_lines(args.output_file) as lines:
            for index, result in enumerate(with_progress(results, count, prints_results=args.output_file is None)):
                line = {role: texts[index] for role, texts in inputs.items()}
                line.update(result if key is None else {key: result})
                lines.write(json.dumps(line, default=float) + "\n")
    except BrokenPipeError:
        if args.output_file is not None:
            raise
        _reader_gone()
        return
    if args.output_file is not None:
        print(f"Wrote {count} results, one JSON line per input, to {args.output_file}")


def _reader_gone() -> None:
    """What reads the printed lines stopped reading (`| head`): the command stops too, quietly, its stdout pointed
    at the null device so that Python's flush at exit does not fail on the closed pipe."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


@contextmanager
def _output_lines(output_file: str | None) -> Iterator[TextIO]:
    """stdout, or a file written through a temp file and a rename (`atomic_write`): a failure leaves no partial
    file, and a file that was there stays as it was."""
    if output_file is None:
        yield sys.stdout
        return
    with atomic_write(output_file) as tmp, open(tmp, "w", encoding="utf-8") as lines:
        yield lines


def with_progress(results: Iterator[Any], count: int, prints_results: bool) -> Iterator[Any]:
    """`results`, counted on a progress bar on stderr (tqdm, as transformers shows one) where stderr is a terminal
    and the results are not printed on it."""
    from tqdm.auto import tqdm

    hidden = not sys.stderr.isatty() or (prints_results and sys.stdout.isatty())
    with tqdm(total=count, unit="input", disable=hidden, file=sys.stderr) as bar:
        for result in results:
            yield result
            bar.update()


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
}


# ------------------------------------------------------------------------------------------------------ parsing


class CommandParser(ArgumentParser):
    """The package's `ArgumentParser` that turns fields marked `positional` in their metadata into positional arguments."""

    @staticmethod
    def _parse_dataclass_field(parser: argparse.ArgumentParser, field: dataclasses.Field) -> None:
        if field.metadata.get("positional"):
            optional = {} if field.default is dataclasses.MISSING else {"nargs": "?", "default": field.default}
            parser.add_argument(field.name, metavar=field.name.upper(), help=field.metadata["help"], **optional)
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
