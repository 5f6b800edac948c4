"""Tests for hf_bertscratch.onnx_export and the onnxruntime backend: every exported head run by ONNX Runtime gives
the PyTorch model's outputs (1e-4, fp32) at real positions of padded batches of two shapes other than the traced one,
and the CLI gives the same answers on either backend. The graph holds the operators its speed rests on (one
com.microsoft.Attention per layer, Gemm for every Linear, no SkipLayerNormalization once ONNX Runtime has optimized
it); the plain graph (`optimize=False`) is torch.onnx's dense computation. An int8 export (`--quantize dynamic`)
stays within the int8 tolerance (`INT8_RTOL`, `INT8_AGREEMENT`); a fill-mask export with `--masked_positions`
decodes the given positions only."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import hf_bertscratch
from hf_bertscratch import inference
from hf_bertscratch.onnx import common, quantize, runtime
from hf_bertscratch.onnx import export as onnx_export
from hf_bertscratch.onnx.common import (
    ATOL,
    INPUT_NAMES,
    INT8_AGREEMENT,
    INT8_RTOL,
    MASKED_POSITIONS,
    ONNX_FILE,
    ONNX_TASKS,
    example_batch,
)
from hf_bertscratch.onnx.export import export_graph, operator_counts
from hf_bertscratch.onnx.runtime import onnx_session, run_session
from hf_bertscratch_cli import dispatch as cli

from conftest import assert_same_results, tiny_config_kwargs

pytest.importorskip("onnxruntime", reason="the ONNX tests need onnxruntime (pip install -e '.[onnx]')")
pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript (pip install -e '.[onnx]')")

HEADS = {
    "feature-extraction": hf_bertscratch.BertScratchModel,
    "fill-mask": hf_bertscratch.BertScratchForMaskedLM,
    "text-classification": hf_bertscratch.BertScratchForSequenceClassification,
    "token-classification": hf_bertscratch.BertScratchForTokenClassification,
    "question-answering": hf_bertscratch.BertScratchForQuestionAnswering,
}
# (batch, seq_len) of the checks: neither is the traced (2, 8), and the second is longer than the trace.
SHAPES = [(3, 5), (4, 19)]


pytestmark = pytest.mark.usefixtures("one_thread")


def save_heads(tokenizer, tmp_path_factory: pytest.TempPathFactory, initializer_range: float) -> dict[str, Path]:
    """A saved tiny model folder (with tokenizer) per head, weights drawn with `initializer_range`."""
    torch.manual_seed(0)
    kwargs = dict(tiny_config_kwargs(len(tokenizer)), initializer_range=initializer_range)
    dirs = {}
    for task, model_class in HEADS.items():
        dirs[task] = tmp_path_factory.mktemp(task)
        # Three labels for the classifier; the QA head needs the default two (start, end).
        # The classifier cuts texts longer than 12 tokens as a fine-tuned folder does (head+tail).
        labels = {"id2label": {0: "neg", 1: "pos", 2: "mixed"}} if task == "text-classification" else {}
        if task == "text-classification":
            labels.update(long_text_max_length=12, long_text_truncation="head+tail", long_text_head_tokens=4)
        model_class(hf_bertscratch.BertScratchConfig(**kwargs, **labels)).save_pretrained(dirs[task])
        tokenizer.save_pretrained(dirs[task])
    return dirs


@pytest.fixture(scope="module")
def model_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """initializer_range 0.5 spreads the untrained logits, so that top tokens and labels are far apart and the CLI
    comparison is not decided by rounding."""
    return save_heads(tokenizer, tmp_path_factory, 0.5)


@pytest.fixture(scope="module")
def onnx_dirs(model_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each head exported through the Python function, task from the checkpoint's architecture."""
    return {
        task: onnx_export.export_onnx(folder, tmp_path_factory.mktemp("onnx") / task)
        for task, folder in model_dirs.items()
    }


def padded_batch(config: hf_bertscratch.BertScratchConfig, batch_size: int, seq_len: int) -> dict[str, torch.Tensor]:
    """`example_batch` (right-padded, rows of different lengths) with its first row left-padded and its last row
    fully padded."""
    batch = example_batch(config, batch_size, seq_len, seed=seq_len)
    batch["attention_mask"][0, :2] = 0
    batch["attention_mask"][-1] = 0
    return batch


@pytest.mark.parametrize("task", list(HEADS))
def test_export_matches_pytorch_on_padded_batches(task: str, model_dirs, onnx_dirs) -> None:
    """Every output equals the PyTorch model's default (unpadded) path and its dense path at real positions, and the
    last hidden state is zero at pad positions as the default path returns it; per-sequence outputs equal the
    default path on every row, a fully padded one included."""
    whole = {"long_text_max_length": None} if task == "text-classification" else {}  # the graph reads all tokens
    model = HEADS[task].from_pretrained(model_dirs[task], **whole).eval()
    dense = HEADS[task].from_pretrained(model_dirs[task], unpad_inputs=False, **whole).eval()
    inference_session = onnx_session(onnx_dirs[task])
    for batch_size, seq_len in SHAPES:
        batch = padded_batch(model.config, batch_size, seq_len)
        assert batch["token_type_ids"].any()
        outputs = run_session(inference_session, batch)
        with torch.no_grad():
            expected, expected_dense = model(**batch), dense(**batch)
        assert list(outputs) == list(onnx_export.output_names(model, task))
        real = batch["attention_mask"].bool().numpy()
        for name, actual in outputs.items():
            assert actual.shape == tuple(expected[name].shape), name
            if name in ONNX_TASKS[task].per_sequence:
                np.testing.assert_allclose(actual, expected[name].numpy(), rtol=0, atol=ATOL, err_msg=name)
                continue
            np.testing.assert_allclose(actual[real], expected[name].numpy()[real], rtol=0, atol=ATOL, err_msg=name)
            np.testing.assert_allclose(
                actual[real], expected_dense[name].numpy()[real], rtol=0, atol=ATOL, err_msg=name
            )
            if name == "last_hidden_state":
                assert not actual[~real].any()


def test_onnx_runtime_classifier_cuts_a_long_text_as_pytorch_does(model_dirs, onnx_dirs) -> None:
    """The graph reads every token; the ONNX Runtime model cuts a row longer than the folder's
    `long_text_max_length` on the host first, so a long review gets the PyTorch head's answer."""
    from hf_bertscratch.onnx.runtime import BertScratchOnnxRuntimeModel

    model = HEADS["text-classification"].from_pretrained(model_dirs["text-classification"]).eval()
    runtime = BertScratchOnnxRuntimeModel.from_folder(onnx_dirs["text-classification"], "text-classification")
    batch = example_batch(model.config, 3, 30, seed=3)
    batch["token_type_ids"].zero_()  # single texts
    with torch.no_grad():
        expected = model(**batch).logits
    np.testing.assert_allclose(runtime(**batch).logits.numpy(), expected.numpy(), rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("long", r"^Sequence length 65 exceeds max_position_embeddings=64; truncate"),
        ("input_ids", r"^input_ids contains 999, outside \[0, \d+\] \(vocab_size="),
        ("token_type_ids", r"^token_type_ids contains 2, outside \[0, 1\] \(type_vocab_size=2\)"),
    ],
)
def test_onnx_runtime_model_refuses_inputs_as_pytorch_does(change: str, match: str, onnx_dirs) -> None:
    """Inputs the graph would index past its embedding tables with are refused in the PyTorch model's words, not
    by an ONNX Runtime Gather error that names no input."""
    from hf_bertscratch.onnx.runtime import BertScratchOnnxRuntimeModel

    runtime = BertScratchOnnxRuntimeModel.from_folder(onnx_dirs["fill-mask"], "fill-mask")
    batch = example_batch(runtime.config, 2, 65 if change == "long" else 8)
    if change != "long":
        batch[change][0, 1] = 999 if change == "input_ids" else 2
    with pytest.raises(ValueError, match=match):
        runtime(**batch)


@pytest.mark.parametrize("pooling", ["max", "mean-max"])
def test_int8_export_of_a_max_pooling_classifier(pooling: str, tokenizer, tmp_path: Path) -> None:
    """ONNX Runtime's symbolic shape inference cannot follow the max-pooling head's reduction; the int8 export still
    runs (without it) and passes its check against PyTorch (`check_quantized_export`)."""
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), classifier_pooling=pooling)
    hf_bertscratch.BertScratchForSequenceClassification(config).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    onnx_export.export_onnx(tmp_path / "model", tmp_path / "int8", quantize="dynamic")
    assert (tmp_path / "int8" / "model.onnx").is_file()


def test_export_keeps_attention_layout_with_biases(tmp_path: Path) -> None:
    """The fused QKV weight and bias feed ONNX Runtime's Attention in its (q, k, v) x heads layout: with every bias
    drawn (the saved test models have zero biases, which the exporter drops) the outputs still equal PyTorch's."""
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(99), initializer_range=0.5)
    model = hf_bertscratch.BertScratchForMaskedLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(std=0.5)
    export_graph(model, "fill-mask", tmp_path / "model.onnx")
    batch = padded_batch(config, 4, 19)
    actual = run_session(onnx_session(tmp_path), batch)["logits"]
    with torch.no_grad():
        expected = model(**batch).logits.numpy()
    real = batch["attention_mask"].bool().numpy()
    np.testing.assert_allclose(actual[real], expected[real], rtol=0, atol=ATOL)


def test_export_holds_onnx_runtimes_fused_operators(onnx_dirs, tmp_path: Path) -> None:
    """Each layer's attention is one com.microsoft.Attention node, every Linear a Gemm (no MatMul, no Softmax left);
    the encoder gathers the real tokens (NonZero). Once ONNX Runtime has optimized the graph for its CPU provider
    there is still no SkipLayerNormalization, the fusion whose CPU kernel is slower than Add + LayerNormalization."""
    import onnx
    import onnxruntime

    for task, folder in onnx_dirs.items():
        operators = operator_counts(folder / "model.onnx")
        assert operators["com.microsoft.Attention"] == 2, (task, operators)
        assert operators["NonZero"] == 1, (task, operators)
        assert operators["Gemm"] >= 2 * 3, (task, operators)  # the output projection and the MLP of every layer
        assert not {"MatMul", "Softmax"} & set(operators), (task, operators)
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    onnxruntime.InferenceSession(
        str(onnx_dirs["fill-mask"] / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    optimized = {node.op_type for node in onnx.load(str(tmp_path / "optimized.onnx")).graph.node}
    assert "Attention" in optimized and "Gemm" in optimized
    assert "SkipLayerNormalization" not in optimized


def test_plain_export_is_the_dense_computation(model_dirs, tmp_path: Path) -> None:
    """`optimize=False`: standard ONNX operators only, and PyTorch's dense path at every position, pad ones too."""
    model = HEADS["fill-mask"].from_pretrained(model_dirs["fill-mask"], unpad_inputs=False).eval()
    export_graph(model, "fill-mask", tmp_path / "model.onnx", optimize=False)
    operators = operator_counts(tmp_path / "model.onnx")
    assert not [name for name in operators if name.startswith("com.microsoft.")], operators
    batch = padded_batch(model.config, 4, 19)
    actual = run_session(onnx_session(tmp_path), batch)["logits"]
    with torch.no_grad():
        expected = model(**batch).logits.numpy()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=ATOL)


def test_export_interface_and_folder_layout(onnx_dirs, tokenizer) -> None:
    """Inputs named and typed as transformers' ONNX exports, dynamic (batch, sequence) axes, Optimum's file names."""
    import onnx

    for task, folder in onnx_dirs.items():
        graph = onnx.load(str(folder / "model.onnx")).graph
        inputs = {i.name: i.type.tensor_type for i in graph.input}
        assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
        for tensor_type in inputs.values():
            assert tensor_type.elem_type == onnx.TensorProto.INT64
            assert [d.dim_param for d in tensor_type.shape.dim] == ["batch", "sequence"]
        assert [o.name for o in graph.output] == list(ONNX_TASKS[task].outputs)
        assert {"model.onnx", "config.json", "tokenizer.json", "tokenizer_config.json"} <= {
            p.name for p in folder.iterdir()
        }
    config = hf_bertscratch.BertScratchConfig.from_pretrained(onnx_dirs["text-classification"])
    assert config.id2label == {0: "neg", 1: "pos", 2: "mixed"}
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(onnx_dirs["fill-mask"]).get_vocab() == tokenizer.get_vocab()


def test_export_refuses_to_clobber(model_dirs, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("work")
    with pytest.raises(FileExistsError, match="already exists and is not empty; pass --overwrite"):
        onnx_export.export_onnx(model_dirs["fill-mask"], out)
    assert (out / "keep.txt").read_text() == "work"


@pytest.mark.parametrize("overwrite", [False, True])
def test_export_refuses_a_file_as_output(model_dirs, tmp_path: Path, overwrite: bool) -> None:
    """A file was called a non-empty folder, and with --overwrite failed as a bare NotADirectoryError after the
    whole export."""
    out = tmp_path / "out"
    out.write_text("work")
    with pytest.raises(NotADirectoryError, match=r"Output '.*out' is a file: expected a folder to write"):
        onnx_export.export_onnx(model_dirs["fill-mask"], out, overwrite=overwrite)
    assert out.read_text() == "work"


def test_export_bad_task(model_dirs, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="task='summarization' cannot be exported: expected one of"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", task="summarization")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_head_the_checkpoint_lacks(model_dirs, tmp_path: Path) -> None:
    """A masked LM exported as a classifier would get a randomly initialised classifier: refused, as `classify`
    refuses it, before anything is written."""
    with pytest.raises(ValueError, match="BertScratchForMaskedLM checkpoint; text-classification needs one of"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", task="text-classification")
    assert not (tmp_path / "out").exists()


def test_export_command_shows_its_checks_figures(capsys, model_dirs, tmp_path: Path) -> None:
    """`bertscratch export` prints how close ONNX Runtime came to PyTorch, once, as its check measured it."""
    capsys.readouterr()
    cli.main(["export", str(model_dirs["fill-mask"]), str(tmp_path / "out")])
    captured = capsys.readouterr()
    (line,) = [line for line in captured.err.splitlines() if "matches PyTorch" in line]
    assert re.fullmatch(
        r"INFO hf_bertscratch\.onnx\.export: ONNX Runtime matches PyTorch: largest difference \S+", line
    )
    assert float(line.rsplit(" ", 1)[1]) <= onnx_export.ATOL
    assert captured.out.startswith("Wrote ")


@pytest.mark.parametrize("opset", [16, 99])
def test_export_refuses_an_opset_it_did_not_write(model_dirs, tmp_path: Path, opset: int) -> None:
    """torch.onnx answers an opset below what it converts to, or past its newest, with a warning and a graph of
    another opset (past the newest, one ONNX Runtime cannot load): the export names the opset asked and the one
    written, and writes nothing."""
    with pytest.raises(ValueError, match=rf"opset={opset} cannot be exported: torch\.onnx .* wrote opset 18 instead"):
        onnx_export.export_onnx(model_dirs["feature-extraction"], tmp_path / "out", opset=opset)
    assert not (tmp_path / "out").exists()


def test_export_writes_the_opset_asked_for(model_dirs, tmp_path: Path) -> None:
    folder = onnx_export.export_onnx(model_dirs["feature-extraction"], tmp_path / "out", opset=21, check=False)
    import onnx  # onnxscript's dependency

    imports = onnx.load(str(folder / ONNX_FILE)).opset_import
    assert [each.version for each in imports if each.domain == ""] == [21]


def test_export_refuses_reduce_range_without_quantize(model_dirs, tmp_path: Path) -> None:
    """--reduce_range only sets the bits of int8 weights: on an fp32 export it did nothing, silently."""
    with pytest.raises(ValueError, match=r"reduce_range=True sets the bits of int8 weights.*pass --quantize dynamic"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", reduce_range=True)
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_tokenizer_larger_than_the_vocabulary(model_dirs, tmp_path: Path) -> None:
    """A --tokenizer with more tokens than the model's embedding rows exported a folder whose graph fails at run
    time on the first text with such a token (the check's random ids never reach them)."""
    big = tmp_path / "vocab.txt"
    vocab_size = hf_bertscratch.BertScratchConfig.from_pretrained(model_dirs["fill-mask"]).vocab_size
    big.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(vocab_size)]))
    with pytest.raises(ValueError, match=rf"tokenizer has {vocab_size + 5} tokens but the model's vocab_size is"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", tokenizer=big)
    assert not (tmp_path / "out").exists()


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = common.importlib.import_module

    def without_onnxruntime(name: str, *args: object) -> object:
        if name == "onnxruntime":
            raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
        return real_import(name, *args)

    monkeypatch.setattr(common.importlib, "import_module", without_onnxruntime)
    with pytest.raises(ImportError, match=r"needs the 'onnxruntime' package.*pip install \"hf-bertscratch\[onnx\]\""):
        onnx_session(tmp_path)


# ------------------------------------------------------------------------------------------- the CLI backend


def cli_json(capsys: pytest.CaptureFixture, *argv: object) -> object:
    capsys.readouterr()
    cli.main([str(arg) for arg in argv])
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def cli_exports(model_dirs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fill-mask, classifier and encoder folders exported through `bertscratch export`."""
    root = tmp_path_factory.mktemp("cli_exports")
    tasks = ("fill-mask", "text-classification", "feature-extraction")
    for task in tasks:
        cli.main(["export", str(model_dirs[task]), str(root / task)])
    return {task: root / task for task in tasks}


def assert_same_fill_mask(results: list[list[dict]], expected: list[list[dict]]) -> None:
    """Same candidates and sequences for every mask, in the same order, scores within 1e-5."""
    assert len(results) == len(expected)
    for mask, expected_mask in zip(results, expected):
        assert [c["token_str"] for c in mask] == [c["token_str"] for c in expected_mask]
        assert [c["sequence"] for c in mask] == [c["sequence"] for c in expected_mask]
        np.testing.assert_allclose([c["score"] for c in mask], [c["score"] for c in expected_mask], atol=1e-5)


def test_cli_fill_mask_backends_agree(capsys, model_dirs, cli_exports) -> None:
    text = "[MASK] is the capital of [MASK] ."
    torch_results = cli_json(capsys, "fill-mask", model_dirs["fill-mask"], text, "--top_k", "5", "--json")
    onnx_results = cli_json(
        capsys, "fill-mask", cli_exports["fill-mask"], text, "--top_k", "5", "--json", "--backend", "onnxruntime"
    )
    assert len(onnx_results) == 2
    assert_same_fill_mask(onnx_results, torch_results)


def test_cli_classify_backends_agree(capsys, model_dirs, cli_exports) -> None:
    text = "the movie was great and the acting was wonderful ."
    torch_results = cli_json(capsys, "classify", model_dirs["text-classification"], text, "--json")
    onnx_results = cli_json(
        capsys, "classify", cli_exports["text-classification"], text, "--json", "--backend", "onnxruntime"
    )
    assert [r["label"] for r in onnx_results] == [r["label"] for r in torch_results]
    assert len(onnx_results) == 3
    np.testing.assert_allclose([r["score"] for r in onnx_results], [r["score"] for r in torch_results], atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_cli_embed_backends_agree(capsys, model_dirs, cli_exports, pooling: str) -> None:
    text = "the cat sat on the mat ."
    torch_vector = cli_json(capsys, "embed", model_dirs["feature-extraction"], text, "--pooling", pooling)
    onnx_vector = cli_json(
        capsys, "embed", cli_exports["feature-extraction"], text, "--pooling", pooling, "--backend", "onnxruntime"
    )
    assert len(onnx_vector) == 32
    np.testing.assert_allclose(onnx_vector, torch_vector, rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    "command, task, texts",
    [
        (
            "classify",
            "text-classification",
            ["the movie was great and the acting was wonderful , the best film .", "a film .", "the plot was bad ."],
        ),
        ("fill-mask", "fill-mask", ["[MASK] is the capital of [MASK] .", "the [MASK] sat .", "paris [MASK] ."]),
        ("embed", "feature-extraction", ["the cat sat on the mat .", "the cat .", "a dog sat on the rug ."]),
    ],
)
def test_cli_onnx_backend_runs_a_file_as_each_text_alone(
    capsys, tmp_path: Path, model_dirs, cli_exports, command: str, task: str, texts: list[str]
) -> None:
    """A file of texts in batches of two, padded (the first classifier text is longer than the 12 tokens the
    classifier cuts to, on the host): each JSON line is what the text alone prints, and what PyTorch prints for the
    file, after the text it answers."""
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    onnx, as_json = ["--backend", "onnxruntime"], [] if command == "embed" else ["--json"]

    def lines(*argv: object) -> list:
        capsys.readouterr()
        cli.main([str(arg) for arg in argv])
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    batch = lines(command, cli_exports[task], "--input_file", path, "--batch_size", "2", *onnx)
    singles = [cli_json(capsys, command, cli_exports[task], text, *as_json, *onnx) for text in texts]
    key = {"classify": "labels", "fill-mask": "masks", "embed": "embedding"}[command]
    assert_same_results(batch, [{"text": text, key: single} for text, single in zip(texts, singles)])
    assert_same_results(batch, lines(command, model_dirs[task], "--input_file", path, "--batch_size", "2"), atol=ATOL)


def test_an_exported_embedding_model_pools_and_cuts_as_trained(capsys, model_dirs, tmp_path: Path) -> None:
    """An embedding folder trained with [CLS] pooling on 8-token texts keeps both in its export: `embed` on the
    export (pooling auto) gives the PyTorch folder's vector for a text longer than 8 tokens."""
    from hf_bertscratch.embedding import write_sentence_transformers_files

    folder = tmp_path / "embedding"
    shutil.copytree(model_dirs["feature-extraction"], folder)
    write_sentence_transformers_files(folder, "cls", 8, 32)
    exported = onnx_export.export_onnx(folder, tmp_path / "exported")
    text = "the cat sat on the mat and the dog sat on the rug ."
    torch_vector = cli_json(capsys, "embed", folder, text)
    onnx_vector = cli_json(capsys, "embed", exported, text, "--backend", "onnxruntime")
    np.testing.assert_allclose(onnx_vector, torch_vector, rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    "argv, match",
    [
        (
            ["embed", "{fill-mask}", "the cat", "--backend", "onnxruntime"],
            "has outputs \\['logits'\\], but feature-extraction reads",
        ),
        (["fill-mask", "{torch}", "the [MASK]", "--backend", "onnxruntime"], "has no model.onnx: export the model"),
        (
            ["fill-mask", "{fill-mask}", "the [MASK]", "--backend", "onnxruntime", "--device", "cuda"],
            "runs on the CPU only",
        ),
        (["classify", "{fill-mask}", "the cat", "--backend", "onnxruntime"], "needs one of the heads"),
    ],
)
def test_cli_onnx_backend_errors(capsys, model_dirs, cli_exports, argv: list[str], match: str) -> None:
    folders = {"{fill-mask}": cli_exports["fill-mask"], "{torch}": model_dirs["fill-mask"]}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(folders.get(arg, arg)) for arg in argv])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert re.search(match, err), err


# ------------------------------------------------------------------------------ the pipelines print answers only


@pytest.mark.parametrize(
    "command, task, text, line",
    [
        ("classify", "text-classification", "the movie was great .", r"(neg|pos|mixed) +\d\.\d{4}"),
        ("tag", "token-classification", "paris is the capital of france .", r"\S+ +.+ \[\d+:\d+\]  \d\.\d{4}"),
        ("fill-mask", "fill-mask", "the [MASK] sat .", r" +\d\. \S+ +\d\.\d{4}  .+"),
    ],
)
def test_cli_onnx_backend_prints_answers_only(
    capsys, caplog, monkeypatch, onnx_dirs, command: str, task: str, text: str, line: str
) -> None:
    """transformers' classification pipelines log an error, one ~3,000-character line naming every supported class,
    for a model class outside the task's Auto mapping; on the exported model they log nothing."""
    from transformers.utils import logging as hf_logging

    monkeypatch.setattr(hf_logging.get_logger(), "propagate", True)  # transformers' records reach caplog as well
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        cli.main([command, str(onnx_dirs[task]), text, "--backend", "onnxruntime"])
    out, err = capsys.readouterr()
    assert out.splitlines() and all(re.fullmatch(line, each) for each in out.splitlines()), out
    assert err == "", err
    assert not caplog.records, caplog.text


@pytest.mark.parametrize(
    "task, argv",
    [
        ("fill-mask", ["fill-mask", "{model}", "paris is the [MASK] of france ."]),
        ("feature-extraction", ["attention", "{model}", "the cat sat .", "--output", "{tmp}/attention.png"]),
        ("question-answering", ["answer", "{model}", "--question", "who sat ?", "--context", "the cat sat ."]),
    ],
)
def test_an_export_run_without_the_onnxruntime_backend_is_one_line_naming_it(
    capsys, onnx_dirs, tmp_path: Path, task: str, argv: list[str]
) -> None:
    """Every command that loads PyTorch weights says what runs an export (answer failed with transformers' missing
    weight files; attention, which has no --backend, was told to pass one)."""
    with pytest.raises(SystemExit):
        cli.main([arg.format(model=onnx_dirs[task], tmp=tmp_path) for arg in argv])
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"bertscratch {argv[0]}: error: ValueError: {onnx_dirs[task]} holds an ONNX export (model.onnx) and "
        "no PyTorch weights: run it with --backend onnxruntime (fill-mask, classify, tag, embed, similarity; in "
        "Python: backend='onnxruntime'), or pass the model folder it was exported from."
    )


# ---------------------------------------------------------------------------------------------------- int8


def float_weight_products(graph: object) -> list[str]:
    """The MatMul/Gemm nodes of an ONNX graph that multiply by a float weight (an initializer, or one transposed)."""
    constants = {each.name for each in graph.initializer}
    constants |= {node.output[0] for node in graph.node if node.op_type == "Transpose" and node.input[0] in constants}
    return [node.name for node in graph.node if node.op_type in ("MatMul", "Gemm") and set(node.input) & constants]


def int8_matmul_weights(path: Path) -> list[np.ndarray]:
    """The int8 weights of every MatMulInteger of the ONNX file `path` (a quantized product's constant side)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    constants = {each.name: numpy_helper.to_array(each) for each in graph.initializer}
    return [constants[node.input[1]] for node in graph.node if node.op_type == "MatMulInteger"]


@pytest.fixture(scope="module")
def int8_model_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """initializer_range 0.1 spreads logits about as a trained model's are; model_dirs' 0.5 drives activations far
    past a trained BERT's, where int8's 256 levels per tensor are off by 10-30% of an output's range."""
    return save_heads(tokenizer, tmp_path_factory, 0.1)


@pytest.fixture(scope="module")
def int8_dirs(int8_model_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each head exported by `bertscratch export MODEL OUT --quantize dynamic` (which checks fp32, then int8)."""
    root = tmp_path_factory.mktemp("int8")
    for task, folder in int8_model_dirs.items():
        cli.main(["export", str(folder), str(root / task), "--quantize", "dynamic"])
    return {task: root / task for task in int8_model_dirs}


@pytest.mark.parametrize("task", list(HEADS))
def test_int8_export_within_int8_tolerance(task: str, int8_model_dirs, int8_dirs, onnx_dirs) -> None:
    """One model.onnx with every weight product in int8 (the fp32 export's are float Gemms), attention included
    (QAttention); on batches of other shapes than the export's check, every output within INT8_RTOL of its range at
    real positions and the predictions agreeing on INT8_AGREEMENT of them."""
    import onnx

    assert [path.name for path in int8_dirs[task].glob("*.onnx")] == ["model.onnx"]
    assert float_weight_products(onnx.load(str(onnx_dirs[task] / "model.onnx")).graph)
    graph = onnx.load(str(int8_dirs[task] / "model.onnx")).graph
    assert float_weight_products(graph) == [] and any(node.op_type == "MatMulInteger" for node in graph.node)
    operators = operator_counts(int8_dirs[task] / "model.onnx")
    assert operators["com.microsoft.QAttention"] == 2 and "com.microsoft.Attention" not in operators
    model = HEADS[task].from_pretrained(int8_model_dirs[task]).eval()
    inference_session = onnx_session(int8_dirs[task])
    for batch_size, seq_len in SHAPES:
        batch = example_batch(model.config, batch_size, seq_len, seed=seq_len)
        outputs = run_session(inference_session, batch)
        with torch.no_grad():
            expected = model(**batch)
        real = batch["attention_mask"].bool().numpy()
        for name, actual in outputs.items():
            reference = expected[name].numpy()
            if name not in ONNX_TASKS[task].per_sequence:
                actual, reference = actual[real], reference[real]
            assert np.abs(actual - reference).max() <= INT8_RTOL * np.abs(reference).max(), name
            if name in ONNX_TASKS[task].decisions:
                assert (actual.argmax(-1) == reference.argmax(-1)).mean() >= INT8_AGREEMENT, name


def test_int8_saturates_on_x86_without_a_vnni_dot_product() -> None:
    """An AVX2-only x86 CPU (flags as a 2-core AMD EPYC's) saturates; with a VNNI or AMX flag, or on Arm, it does
    not; an x86 CPU whose flags name none of them is taken to saturate."""
    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
    assert quantize.int8_saturates(avx2, "x86_64")
    for flag in ("avx512_vnni", "avx_vnni", "amx_int8"):
        assert not quantize.int8_saturates(avx2.replace("avx2", f"avx2 {flag}"), "x86_64"), flag
    assert not quantize.int8_saturates(avx2, "aarch64")
    assert quantize.int8_saturates("", "AMD64")


@pytest.mark.parametrize("reduce_range", [True, False])
def test_export_reduce_range_sets_the_bits_of_the_int8_weights(int8_model_dirs, tmp_path: Path, reduce_range) -> None:
    """`--reduce_range true` rounds every MatMul weight to 7 bits, false keeps 8 (each output channel's scale puts
    its largest weight at the end of the range). Written unchecked: 8 bits can fail the int8 check on a CPU
    without VNNI, which is why the default follows the CPU."""
    output = tmp_path / "out"
    cli.main(["export", str(int8_model_dirs["fill-mask"]), str(output), "--quantize", "dynamic", "--reduce_range",
              str(reduce_range).lower(), "--no_check"])  # fmt: skip
    weights = int8_matmul_weights(output / "model.onnx")
    assert len(weights) >= 5 and all(weight.dtype == np.int8 for weight in weights)
    largest = [int(np.abs(weight.astype(np.int32)).max()) for weight in weights]
    assert set(largest) == ({64} if reduce_range else {127}), largest


def answer_keys_and_scores(command: str, results: list) -> tuple[list, list[float]]:
    """What a command's --json results answer (labels, tokens per mask, entities) and their scores, flattened."""
    if command == "fill-mask":
        return [[c["token_str"] for c in mask] for mask in results], [c["score"] for mask in results for c in mask]
    if command == "tag":
        keys = [(e["entity_group"], e["word"], e["start"], e["end"]) for e in results]
        return keys, [e["score"] for e in results]
    return [r["label"] for r in results], [r["score"] for r in results]


@pytest.mark.parametrize(
    "command, task, text",
    [
        ("classify", "text-classification", "the movie was great and the acting was wonderful ."),
        ("tag", "token-classification", "paris is the capital of france ."),
        ("fill-mask", "fill-mask", "[MASK] is the capital of [MASK] ."),
    ],
)
def test_cli_int8_backend_answers_like_pytorch(
    capsys, int8_model_dirs, int8_dirs, command: str, task: str, text: str
) -> None:
    """The pipeline's model on the int8 folder gives PyTorch's logits within INT8_RTOL on the text; the command
    gives PyTorch's answers in PyTorch's order, with probabilities within 0.02."""
    from transformers import AutoTokenizer

    pipe = inference.load_pipeline(task, int8_dirs[task], backend="onnxruntime")
    encoding = AutoTokenizer.from_pretrained(int8_model_dirs[task])(text, return_tensors="pt")
    with torch.no_grad():
        expected = HEADS[task].from_pretrained(int8_model_dirs[task]).eval()(**encoding).logits.numpy()
    actual = pipe.model(**encoding).logits.numpy()
    assert np.abs(actual - expected).max() <= INT8_RTOL * np.abs(expected).max()

    torch_keys, torch_scores = answer_keys_and_scores(
        command, cli_json(capsys, command, int8_model_dirs[task], text, "--json")
    )
    int8_keys, int8_scores = answer_keys_and_scores(
        command, cli_json(capsys, command, int8_dirs[task], text, "--json", "--backend", "onnxruntime")
    )
    assert int8_keys == torch_keys
    np.testing.assert_allclose(int8_scores, torch_scores, rtol=0, atol=0.02)


def test_int8_check_refuses_what_int8_cannot_represent(model_dirs, tmp_path: Path) -> None:
    """model_dirs' classifier (initializer_range 0.5) has activations int8 rounds off by over 10% of the logits'
    range: the export fails and writes nothing."""
    with pytest.raises(RuntimeError, match=r"int8 logits differs from PyTorch by .*% of its range \(> 10%\)"):
        onnx_export.export_onnx(model_dirs["text-classification"], tmp_path / "out", quantize="dynamic")
    assert not (tmp_path / "out").exists()


# -------------------------------------------------------------------------------------------- masked positions


@pytest.fixture(scope="module")
def masked_export(model_dirs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fill-mask head exported by `bertscratch export MODEL OUT --masked_positions`."""
    folder = tmp_path_factory.mktemp("masked") / "fill-mask"
    cli.main(["export", str(model_dirs["fill-mask"]), str(folder), "--masked_positions"])
    return folder


def test_masked_positions_export_matches_pytorch(model_dirs, masked_export) -> None:
    """The graph takes (batch, masks) positions and returns (batch, masks, V) logits: PyTorch's full logits at those
    positions within ATOL, for 1 and 4 masks per row (the trace had 2)."""
    import onnx

    graph = onnx.load(str(masked_export / "model.onnx")).graph
    inputs = {each.name: [d.dim_param for d in each.type.tensor_type.shape.dim] for each in graph.input}
    assert inputs == {**{name: ["batch", "sequence"] for name in INPUT_NAMES}, MASKED_POSITIONS: ["batch", "masks"]}
    model = HEADS["fill-mask"].from_pretrained(model_dirs["fill-mask"]).eval()
    (output,) = graph.output
    assert [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim] == [
        "batch",
        "masks",
        model.config.vocab_size,
    ]
    inference_session = onnx_session(masked_export)
    for (batch_size, seq_len), masks in zip(SHAPES, (1, 4)):
        batch = example_batch(model.config, batch_size, seq_len, seed=seq_len, masks=masks)
        positions = batch.pop(MASKED_POSITIONS)  # (B, K)
        logits = run_session(inference_session, {**batch, MASKED_POSITIONS: positions})["logits"]
        with torch.no_grad():
            full = model(**batch).logits  # (B, T, V)
        expected = full.gather(1, positions[..., None].expand(-1, -1, full.shape[-1])).numpy()
        assert logits.shape == (batch_size, masks, model.config.vocab_size)
        np.testing.assert_allclose(logits, expected, rtol=0, atol=ATOL)


@pytest.mark.parametrize("text", ["the [MASK] sat on the mat .", "[MASK] is the capital of [MASK] ."])
def test_cli_fill_mask_on_masked_positions_export(capsys, model_dirs, masked_export, text: str) -> None:
    torch_results = cli_json(capsys, "fill-mask", model_dirs["fill-mask"], text, "--json")
    onnx_results = cli_json(capsys, "fill-mask", masked_export, text, "--json", "--backend", "onnxruntime")
    assert_same_fill_mask(onnx_results, torch_results)


def test_masked_positions_errors(model_dirs, cli_exports, masked_export, tmp_path: Path) -> None:
    ids = torch.tensor([[2, 7, 4, 3]])
    dense = runtime.BertScratchOnnxRuntimeModel.from_folder(cli_exports["fill-mask"], "fill-mask")
    with pytest.raises(ValueError, match="has no masked_positions input: export it with --masked_positions"):
        dense(ids, masked_positions=torch.tensor([[2]]))
    with pytest.raises(ValueError, match="decodes given positions only: pass masked_positions"):
        run_session(onnx_session(masked_export), {"input_ids": ids})
    with pytest.raises(ValueError, match="masked_positions is an input of the fill-mask export only"):
        onnx_export.export_onnx(model_dirs["text-classification"], tmp_path / "out", masked_positions=True)
    with pytest.raises(ValueError, match="quantize='static' is not supported: expected one of"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", quantize="static")
    assert not (tmp_path / "out").exists()


def test_export_command_writes_the_fused_graph_unless_told_not_to(model_dirs, tmp_path: Path) -> None:
    """`bertscratch export` writes ORT's Attention by default; --no_optimize writes plain ONNX operators, checked
    against PyTorch all the same."""
    source = model_dirs["text-classification"]
    cli.main(["export", str(source), str(tmp_path / "fused")])
    cli.main(["export", str(source), str(tmp_path / "plain"), "--no_optimize"])
    fused, plain = (operator_counts(tmp_path / name / "model.onnx") for name in ("fused", "plain"))
    layers = json.loads((source / "config.json").read_text())["num_hidden_layers"]
    assert fused.get("com.microsoft.Attention") == layers
    assert not any(name.startswith("com.microsoft.") for name in plain) and "Softmax" in plain


def test_word_lists_are_tagged_as_pytorch_tags_them(model_dirs, onnx_dirs) -> None:
    """`tag --input_file` of word lists under --backend onnxruntime: each word's tag that of the PyTorch folder, in
    batches of two lists of different lengths."""
    word_lists = [["Paris,", "is", "the", "capital", "of", "France", "."], ["Berlin", "is", "big"], ["Rome!"]]
    task = "token-classification"
    onnx = list(inference.tag_words_many(onnx_dirs[task], word_lists, batch_size=2, backend="onnxruntime"))
    torch_tags = list(inference.tag_words_many(model_dirs[task], word_lists, batch_size=2))
    assert [tagged["tags"] for tagged in onnx] == [tagged["tags"] for tagged in torch_tags]
    assert [len(tagged["tags"]) for tagged in onnx] == [len(words) for words in word_lists]
