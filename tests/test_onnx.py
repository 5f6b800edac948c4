"""Tests for hf_bertscratch.onnx_export and the onnxruntime backend: every exported head run by ONNX Runtime gives
the PyTorch model's outputs (1e-4, fp32) on right-padded batches of two shapes other than the traced one, and the CLI
gives the same answers on either backend."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import hf_bertscratch
from hf_bertscratch import cli, onnx_export
from hf_bertscratch.onnx_export import ATOL, ONNX_TASKS, example_batch, onnx_session, run_session

from conftest import tiny_config_kwargs

pytest.importorskip("onnxruntime", reason="the ONNX tests need onnxruntime (pip install 'hf-bertscratch[onnx]')")
pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript (pip install 'hf-bertscratch[onnx]')")

HEADS = {
    "feature-extraction": hf_bertscratch.BertScratchModel,
    "fill-mask": hf_bertscratch.BertScratchForMaskedLM,
    "text-classification": hf_bertscratch.BertScratchForSequenceClassification,
    "token-classification": hf_bertscratch.BertScratchForTokenClassification,
    "question-answering": hf_bertscratch.BertScratchForQuestionAnswering,
}
# (batch, seq_len) of the checks: neither is the traced (2, 8), and the second is longer than the trace.
SHAPES = [(3, 5), (4, 19)]


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A saved tiny model folder (with tokenizer) per head. initializer_range 0.5 spreads the untrained logits, so
    that top tokens and labels are far apart and the CLI comparison is not decided by rounding."""
    torch.manual_seed(0)
    kwargs = dict(tiny_config_kwargs(len(tokenizer)), initializer_range=0.5)
    dirs = {}
    for task, model_class in HEADS.items():
        dirs[task] = tmp_path_factory.mktemp(task)
        # Three labels for the classifier; the QA head needs the default two (start, end).
        labels = {"id2label": {0: "neg", 1: "pos", 2: "mixed"}} if task == "text-classification" else {}
        model_class(hf_bertscratch.BertScratchConfig(**kwargs, **labels)).save_pretrained(dirs[task])
        tokenizer.save_pretrained(dirs[task])
    return dirs


@pytest.fixture(scope="module")
def onnx_dirs(model_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each head exported through the Python function, task from the checkpoint's architecture."""
    return {
        task: onnx_export.export_onnx(folder, tmp_path_factory.mktemp("onnx") / task)
        for task, folder in model_dirs.items()
    }


@pytest.mark.parametrize("task", list(HEADS))
def test_export_matches_pytorch_on_padded_batches(task: str, model_dirs, onnx_dirs) -> None:
    """Every output equals the dense PyTorch path everywhere, and the default (unpadded) path at real positions."""
    model = HEADS[task].from_pretrained(model_dirs[task]).eval()
    dense = HEADS[task].from_pretrained(model_dirs[task], unpad_inputs=False).eval()
    session = onnx_session(onnx_dirs[task])
    for batch_size, seq_len in SHAPES:
        batch = example_batch(model.config, batch_size, seq_len, seed=seq_len)
        assert not batch["attention_mask"].all() and batch["token_type_ids"].any()
        outputs = run_session(session, batch)
        with torch.no_grad():
            expected, expected_dense = model(**batch), dense(**batch)
        assert list(outputs) == list(onnx_export.output_names(model, task))
        real = batch["attention_mask"].bool().numpy()
        for name, actual in outputs.items():
            assert actual.shape == tuple(expected[name].shape), name
            np.testing.assert_allclose(actual, expected_dense[name].numpy(), rtol=0, atol=ATOL, err_msg=name)
            if name not in ONNX_TASKS[task].per_sequence:
                np.testing.assert_allclose(actual[real], expected[name].numpy()[real], rtol=0, atol=ATOL, err_msg=name)
            else:
                np.testing.assert_allclose(actual, expected[name].numpy(), rtol=0, atol=ATOL, err_msg=name)


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


def test_export_bad_task(model_dirs, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="task='summarization' cannot be exported: expected one of"):
        onnx_export.export_onnx(model_dirs["fill-mask"], tmp_path / "out", task="summarization")
    assert not (tmp_path / "out").exists()


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = onnx_export.importlib.import_module

    def without_onnxruntime(name: str, *args: object) -> object:
        if name == "onnxruntime":
            raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
        return real_import(name, *args)

    monkeypatch.setattr(onnx_export.importlib, "import_module", without_onnxruntime)
    with pytest.raises(ImportError, match=r"needs the 'onnxruntime' package.*hf-bertscratch\[onnx\]"):
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


def test_cli_fill_mask_backends_agree(capsys, model_dirs, cli_exports) -> None:
    text = "[MASK] is the capital of [MASK] ."
    torch_results = cli_json(capsys, "fill-mask", model_dirs["fill-mask"], text, "--top_k", "5", "--json")
    onnx_results = cli_json(
        capsys, "fill-mask", cli_exports["fill-mask"], text, "--top_k", "5", "--json", "--backend", "onnxruntime"
    )
    assert len(onnx_results) == 2
    for torch_mask, onnx_mask in zip(torch_results, onnx_results):
        assert [c["token_str"] for c in onnx_mask] == [c["token_str"] for c in torch_mask]
        assert [c["sequence"] for c in onnx_mask] == [c["sequence"] for c in torch_mask]
        np.testing.assert_allclose([c["score"] for c in onnx_mask], [c["score"] for c in torch_mask], atol=1e-5)


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
