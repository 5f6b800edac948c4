"""Tests for hf_bertscratch.plotting: the images are real PNGs of the documented pixel size, errors are clear."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import image as mpimg

from hf_bertscratch import plotting
from hf_bertscratch_base import training_curves


def read_png(path: Path) -> np.ndarray:
    """Decode a PNG (failing on anything else) and return its (H, W, C) pixels."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return mpimg.imread(path)


def assert_png(path: Path, width: int, height: int) -> None:
    pixels = read_png(path)
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0.01, "the image is blank"


def write_state(run_dir: Path, history: list[dict]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 40, "log_history": history}), encoding="utf-8")
    return path


PRETRAIN_HISTORY = [{"loss": 4.0 - 0.1 * i, "step": 5 * (i + 1), "epoch": i / 8} for i in range(8)] + [
    {"eval_loss": 3.5, "step": 20},
    {"eval_loss": 3.2, "step": 40},
]
FINETUNE_HISTORY = PRETRAIN_HISTORY + [{"eval_loss": 0.6, "eval_accuracy": 0.7, "step": 40}]


# ----------------------------------------------------------------------------------------------- training curves


def test_training_curves_default_output_and_size(tmp_path: Path) -> None:
    write_state(tmp_path / "run", PRETRAIN_HISTORY)
    path = plotting.plot_training_curves(tmp_path / "run")
    assert path == tmp_path / "run" / "loss_curve.png"
    assert_png(path, 600, 400)  # one panel: no accuracy logged
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert names == {"trainer_state.json", "loss_curve.png"}, "temporary files were left behind"


def test_training_curves_add_accuracy_panel(tmp_path: Path) -> None:
    write_state(tmp_path / "run", FINETUNE_HISTORY)
    path = plotting.plot_training_curves(tmp_path / "run", tmp_path / "out" / "curves.png")
    assert_png(path, 1200, 400)


def test_training_curves_series_read_from_history() -> None:
    steps, values = training_curves._series(FINETUNE_HISTORY, "eval_loss")
    assert steps == [20.0, 40.0, 40.0] and values == [3.5, 3.2, 0.6]
    assert training_curves._series(PRETRAIN_HISTORY, "eval_accuracy") == ([], [])


def test_training_curves_fall_back_to_latest_checkpoint(tmp_path: Path) -> None:
    write_state(tmp_path / "run" / "checkpoint-5", PRETRAIN_HISTORY[:1])
    write_state(tmp_path / "run" / "checkpoint-40", PRETRAIN_HISTORY)
    write_state(tmp_path / "run" / "checkpoint-100", FINETUNE_HISTORY)
    assert plotting.find_trainer_state(tmp_path / "run") == tmp_path / "run" / "checkpoint-100" / "trainer_state.json"


@pytest.mark.parametrize(
    "setup, error, match",
    [
        (lambda d: None, FileNotFoundError, "does not exist"),
        (lambda d: d.mkdir(), FileNotFoundError, "No trainer_state.json"),
        (lambda d: write_state(d, [{"learning_rate": 1e-4, "step": 1}]), ValueError, "logs no 'loss'"),
        (lambda d: (d.mkdir(), (d / "trainer_state.json").write_text("{oops")), ValueError, "not valid JSON"),
        (lambda d: (d.mkdir(), (d / "trainer_state.json").write_text("{}")), ValueError, "no 'log_history'"),
    ],
)
def test_training_curves_errors(tmp_path: Path, setup, error: type, match: str) -> None:
    run_dir = tmp_path / "run"
    setup(run_dir)
    with pytest.raises(error, match=match):
        plotting.plot_training_curves(run_dir)
    assert not (run_dir / "loss_curve.png").exists()


def test_a_file_for_the_run_folder_or_a_folder_for_the_image_is_named(tmp_path: Path) -> None:
    """A run's trainer_state.json given as its folder, or a folder as the image, fails in one line saying which is
    which, not "does not exist" or an error about a temporary file's rename."""
    state = write_state(tmp_path / "run", PRETRAIN_HISTORY)
    with pytest.raises(
        NotADirectoryError, match=f"Run directory {str(state)!r} is a file: expected a Trainer output_dir"
    ):
        plotting.plot_training_curves(state)
    (tmp_path / "pictures").mkdir()
    with pytest.raises(IsADirectoryError, match="pictures': it is a folder; expected an image file's path"):
        plotting.plot_training_curves(tmp_path / "run", tmp_path / "pictures")
    assert list((tmp_path / "pictures").iterdir()) == []


def test_bad_image_format_is_rejected_before_writing(tmp_path: Path) -> None:
    write_state(tmp_path / "run", PRETRAIN_HISTORY)
    with pytest.raises(ValueError, match="format 'bmpx'"):
        plotting.plot_training_curves(tmp_path / "run", tmp_path / "curve.bmpx")
    assert list(tmp_path.glob("*curve*")) == []


def test_failed_save_keeps_previous_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    write_state(run_dir, PRETRAIN_HISTORY)
    (run_dir / "loss_curve.png").write_bytes(b"previous")

    def broken_savefig(self, *args, **kwargs) -> None:
        Path(args[0]).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(plotting.Figure, "savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):
        plotting.plot_training_curves(run_dir)
    assert (run_dir / "loss_curve.png").read_bytes() == b"previous"
    assert {p.name for p in run_dir.iterdir()} == {"trainer_state.json", "loss_curve.png"}


# ---------------------------------------------------------------------------------------------- confusion matrix


def test_confusion_matrix_png(tmp_path: Path) -> None:
    path = plotting.plot_confusion_matrix(
        [0, 1, 1, 0, 1], [0, 1, 0, 0, 1], ["neg", "pos"], tmp_path / "cm.png", "SST-2"
    )
    assert_png(path, 400, 400)
    path = plotting.plot_confusion_matrix([0, 4], [3, 4], list("abcde"), tmp_path / "cm5.png")
    assert_png(path, 600, 600)  # 2 + 0.8 * 5 inches


@pytest.mark.parametrize(
    "labels, predictions, names, match",
    [
        ([0, 1], [0], ["a", "b"], "2 entries but predictions has 1"),
        ([0, 2], [0, 1], ["a", "b"], "labels contains class id 2"),
        ([0, 1], [-1, 1], ["a", "b"], "predictions contains class id -1"),
        ([0], [0], [], "label_names is empty"),
    ],
)
def test_confusion_matrix_errors(tmp_path: Path, labels, predictions, names, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plotting.plot_confusion_matrix(labels, predictions, names, tmp_path / "cm.png")
    assert not (tmp_path / "cm.png").exists()


# ------------------------------------------------------------------------------------------------ attention maps


def attention(layers: int = 2, heads: int = 4, tokens: int = 7) -> tuple[list[str], np.ndarray]:
    """Tokens and (L, nh, T, T) weights whose rows are probabilities, as `inference.attention_weights` gives them."""
    scores = np.random.default_rng(0).normal(size=(layers, heads, tokens, tokens))
    weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    return ["[CLS]", *(f"w{i}" for i in range(tokens - 2)), "[SEP]"], weights


def test_attention_grid_and_single_head(tmp_path: Path) -> None:
    tokens, weights = attention(tokens=9)
    grid = plotting.plot_attention(tokens, weights, tmp_path / "grid.png")
    assert_png(grid, 600, 600)  # 4 heads -> 2 x 2 panels of 300 px
    one = plotting.plot_attention(tokens[:6], torch.from_numpy(weights[..., :6, :6]), tmp_path / "one.png", -2, 3)
    assert_png(one, 600, 600)


@pytest.mark.parametrize("kwargs, match", [({"layer": 2}, "layer=2 is out of range"), ({"head": -5}, "head=-5")])
def test_attention_bad_index(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plotting.plot_attention(*attention(), tmp_path / "a.png", **kwargs)
    assert not (tmp_path / "a.png").exists()


def test_attention_weights_must_match_the_tokens(tmp_path: Path) -> None:
    tokens, weights = attention(tokens=7)
    with pytest.raises(ValueError, match=r"weights has shape \(2, 4, 7, 7\): expected .* T = 6"):
        plotting.plot_attention(tokens[:6], weights, tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"weights has shape \(4, 7, 7\)"):
        plotting.plot_attention(tokens, weights[0], tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def test_training_curves_title_skips_staging_folder(tmp_path: Path) -> None:
    assert training_curves._run_name(tmp_path / "my-run" / ".staging") == "my-run"
    assert training_curves._run_name(tmp_path / "my-run") == "my-run"


def test_a_long_title_stays_inside_the_figure_and_clear_of_the_colour_bar() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from hf_bertscratch.plotting import _figure_title

    fig = Figure(figsize=(4, 4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    colour_bar = fig.colorbar(ax.imshow(np.eye(2)), ax=ax)
    _figure_title(fig, "mrpc-from-stsb: F1 0.8287 (accuracy 0.730, n=408) after the sentence-pair recipe")
    fig.canvas.draw()  # lays the figure out
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width and title.y1 <= fig.bbox.height
    assert not title.overlaps(colour_bar.ax.get_window_extent(renderer))
