"""Pictures of what the model does: training curves, confusion matrices and attention maps; and grouped bars with
error bars, which `lab.make_report` draws the committed records with.

Every function draws on a bare `matplotlib.figure.Figure` (rendered by Agg), never through `pyplot`, so calling them
from a notebook neither changes the notebook's backend nor leaks open figures; they return the path of the image
they wrote (show it in a notebook with `IPython.display.Image(path)`). They draw what they are given (logs, labels,
arrays) and run no model: `hf_bertscratch.inference.attention_weights` gives `plot_attention` its tokens and weights.

Images are written atomically: drawn to a temporary file beside the target, then renamed, so a failed plot never
leaves a half-written image that looks finished. The training curves are drawn by
`hf_bertscratch_base.training_curves`, which `bertscratch plot` runs without torch; each image written here is logged.
"""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from hf_bertscratch_base import training_curves
from hf_bertscratch_base.run_files import final_path
from hf_bertscratch_base.training_curves import DPI, find_trainer_state, read_log_history, save_figure

if TYPE_CHECKING:
    import torch
    from matplotlib.axes import Axes
    from matplotlib.image import AxesImage

logger = logging.getLogger(__name__)

# Characters of a default-size (12 pt) title that fit in an inch of figure width.
TITLE_CHARACTERS_PER_INCH = 10
ATTENTION_PANEL_INCHES = 3.0  # side of one head's heatmap in `plot_attention`'s grid
SINGLE_ATTENTION_INCHES = 6.0  # side of the figure when one head is drawn alone
BARS_WIDTH_INCHES = 9.0  # width of `plot_grouped_bars`; its height grows with the bars
BAR_INCHES = 0.3  # height of one bar of `plot_grouped_bars`


def _save_figure(fig: Figure, output_file: str | Path) -> Path:
    """`save_figure`, logging the image written (under the name it keeps once a run's staging folder is moved in)."""
    path = save_figure(fig, output_file)
    logger.info("Wrote %s", final_path(path))
    return path


def plot_training_curves(run_dir: str | Path, output_file: str | Path | None = None, title: str | None = None) -> Path:
    """Plot training and validation loss (and validation accuracy when logged) of a Trainer run, and log the image
    written: `hf_bertscratch_base.training_curves.plot_training_curves` (its arguments, image size and return)."""
    path = training_curves.plot_training_curves(run_dir, output_file, title)
    logger.info("Wrote %s", final_path(path))
    return path


# ---------------------------------------------------------------------------------------------------------------
# Confusion matrix
# ---------------------------------------------------------------------------------------------------------------


def plot_confusion_matrix(
    labels: Sequence[int] | np.ndarray,
    predictions: Sequence[int] | np.ndarray,
    label_names: Sequence[str],
    output_file: str | Path,
    title: str = "",
) -> Path:
    """Draw the confusion matrix of class ids `predictions` against true `labels` (rows: true, columns: predicted).

    Args:
        labels, predictions: (n,) class ids in [0, len(label_names)).
        label_names: the name of each class id, in id order.
        output_file: image to write.
        title: figure title.

    Returns:
        The path written; the figure is square, max(4, 2 + 0.8 * num_classes) inches at 100 dpi.
    """
    labels = np.asarray(labels).reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    num_classes = len(label_names)
    if num_classes == 0:
        raise ValueError("label_names is empty: expected one name per class id.")
    if labels.shape != predictions.shape:
        raise ValueError(f"labels has {labels.size} entries but predictions has {predictions.size}: expected equal.")
    for name, ids in (("labels", labels), ("predictions", predictions)):
        bad = ids[(ids < 0) | (ids >= num_classes)] if ids.size else ids
        if bad.size:
            raise ValueError(f"{name} contains class id {bad[0]}, outside [0, {num_classes - 1}] ({label_names=}).")
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (labels.astype(np.int64), predictions.astype(np.int64)), 1)

    side = max(4.0, 2.0 + 0.8 * num_classes)
    fig = Figure(figsize=(side, side), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="Blues")
    fig.colorbar(image, ax=ax, shrink=0.8)
    ticks = range(num_classes)
    ax.set_xticks(ticks, labels=label_names, rotation=45, ha="right")
    ax.set_yticks(ticks, labels=label_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    threshold = matrix.max() / 2 if matrix.size else 0
    for (row, col), count in np.ndenumerate(matrix):
        ax.text(col, row, str(count), ha="center", va="center", color="white" if count > threshold else "black")
    accuracy = float(np.trace(matrix)) / max(int(matrix.sum()), 1)
    _figure_title(fig, f"{title} (accuracy {accuracy:.3f}, n={labels.size})" if title else f"accuracy {accuracy:.3f}")
    return _save_figure(fig, output_file)


def plot_regression(
    labels: Sequence[float] | np.ndarray,
    predictions: Sequence[float] | np.ndarray,
    output_file: str | Path,
    title: str = "",
) -> Path:
    """Scatter predicted against gold scores (n,) with the y = x diagonal, titled with Pearson and Spearman."""
    from scipy.stats import pearsonr, spearmanr

    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    predictions = np.asarray(predictions, dtype=np.float64).reshape(-1)
    if labels.shape != predictions.shape or labels.size < 2:
        raise ValueError(
            f"Expected two equal-length score lists of at least 2, got {labels.size} and {predictions.size}."
        )
    fig = Figure(figsize=(5, 5), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.scatter(labels, predictions, s=6, alpha=0.4)
    low, high = float(min(labels.min(), predictions.min())), float(max(labels.max(), predictions.max()))
    ax.plot([low, high], [low, high], color="grey", linewidth=1, linestyle="--")
    ax.set_xlabel("gold score")
    ax.set_ylabel("predicted score")
    scores = f"Pearson {pearsonr(labels, predictions)[0]:.3f}, Spearman {spearmanr(labels, predictions)[0]:.3f}"
    _figure_title(fig, f"{title} ({scores}, n={labels.size})" if title else scores)
    return _save_figure(fig, output_file)


def plot_per_type_f1(
    scores: dict[str, dict[str, float]], output_file: str | Path, title: str = "", ylabel: str = "entity F1"
) -> Path:
    """Bar chart of F1 per entity type (or per label of a multi-label task, `ylabel` "F1"); `scores` maps type ->
    {"f1", "number"} (seqeval's output: F1 and gold count)."""
    if not scores:
        raise ValueError("No entity types to draw: expected seqeval's per-type scores.")
    types = sorted(scores)
    fig = Figure(figsize=(max(4.0, 1.0 + 0.9 * len(types)), 4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    bars = ax.bar(types, [scores[t]["f1"] for t in types], color="tab:blue")
    for bar, name in zip(bars, types):
        label = f"{scores[name]['f1']:.3f}\nn={int(scores[name].get('number', 0))}"
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), label, ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(ylabel)
    _figure_title(fig, title or f"{ylabel} per type")
    return _save_figure(fig, output_file)


def _figure_title(fig: Figure, title: str) -> None:
    """Title the whole figure, wrapped to its width: above a colour bar too, and never cut at the edges."""
    characters = max(20, int(fig.get_figwidth() * TITLE_CHARACTERS_PER_INCH))
    fig.suptitle(textwrap.fill(title, characters))


# ---------------------------------------------------------------------------------------------------------------
# Attention maps
# ---------------------------------------------------------------------------------------------------------------


def _check_index(name: str, value: int | None, count: int) -> int | None:
    """Accept Python-style indices in [-count, count); raise a clear error otherwise."""
    if value is None:
        return None
    if not -count <= value < count:
        raise ValueError(f"{name}={value} is out of range: the model has {count} {name}s (use 0..{count - 1}).")
    return value % count


def _draw_heatmap(ax: Axes, weights: np.ndarray, tokens: list[str], title: str, fontsize: float) -> AxesImage:
    """One (T, T) heatmap, queries down the rows and keys across the columns, a token on every tick."""
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    ticks = range(len(tokens))
    ax.set_xticks(ticks, labels=tokens, rotation=90, fontsize=fontsize)
    ax.set_yticks(ticks, labels=tokens, fontsize=fontsize)
    ax.set_title(title, fontsize=fontsize + 2)
    return image


def plot_attention(
    tokens: Sequence[str],
    weights: torch.Tensor | np.ndarray,
    output_file: str | Path,
    layer: int | None = None,
    head: int | None = None,
) -> Path:
    """Draw an attention map as heatmaps with the tokens on both axes (rows attend to columns).

    Args:
        tokens, weights: the T tokens and the (L, nh, T, T) attention probabilities of every layer and head, as
            `hf_bertscratch.inference.attention_weights` returns them for a text.
        output_file: image to write.
        layer: layer index (negative counts from the end); defaults to the last layer.
        head: one head to draw alone in a 600x600 px figure; by default every head of `layer` is drawn in a
            grid of ceil(sqrt(nh)) columns, each panel 300x300 px (a 4-head model gives 600x600 px).

    Returns:
        The path written.
    """
    tokens = list(tokens)
    weights = np.asarray(weights, dtype=np.float32)
    if weights.ndim != 4 or weights.shape[2:] != (len(tokens), len(tokens)):
        raise ValueError(
            f"weights has shape {weights.shape}: expected (layers, heads, T, T) with T = {len(tokens)}, the number "
            "of tokens."
        )
    num_layers, num_heads = weights.shape[:2]
    layer = _check_index("layer", -1 if layer is None else layer, num_layers)
    head = _check_index("head", head, num_heads)
    heads = list(range(num_heads)) if head is None else [head]
    columns = math.ceil(math.sqrt(len(heads)))
    rows = math.ceil(len(heads) / columns)
    panel = SINGLE_ATTENTION_INCHES if head is not None else ATTENTION_PANEL_INCHES
    # Shrink the tick labels with long sentences so neighbouring tokens stay readable.
    fontsize = max(3.0, min(9.0, panel * 72 / (1.6 * len(tokens)) - 1))
    fig = Figure(figsize=(panel * columns, panel * rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).reshape(-1)
    for ax, index in zip(axes, heads):
        image = _draw_heatmap(ax, weights[layer, index], tokens, f"layer {layer} head {index}", fontsize)
    for ax in axes[len(heads) :]:
        ax.set_axis_off()
    fig.colorbar(image, ax=axes.tolist(), shrink=0.6)
    return _save_figure(fig, output_file)


# ---------------------------------------------------------------------------------------------------------------
# Grouped bars
# ---------------------------------------------------------------------------------------------------------------


def plot_grouped_bars(
    groups: dict[str, dict[str, tuple[float, float, float]]],
    output_file: str | Path,
    title: str,
    xlabel: str,
    value_format: str = "{:.1f}",
    line_at: float | None = None,
    line_label: str = "",
) -> Path:
    """Horizontal bars, one group per label (top to bottom in the order given), one bar per series in each group.

    Args:
        groups: label -> series name -> (value, low, high); the bar ends at value, its error bar spans low..high
            (mean ± sd, or median and min-max). A series a group lacks is left out of that group.
        output_file: image to write.
        title, xlabel: the figure's title and the value axis's label.
        value_format: how each bar's value is written beside it.
        line_at: draw a dashed vertical line at this value (e.g. 1.0 for ratios), labelled `line_label`.

    Returns:
        The path written; the figure is `BARS_WIDTH_INCHES` wide and `BAR_INCHES` high per bar drawn, plus margins.
    """
    if not groups:
        raise ValueError("No groups to draw: expected at least one label with one series value.")
    series = list(dict.fromkeys(name for bars in groups.values() for name in bars))
    height = 0.8 / len(series)
    fig = Figure(
        figsize=(BARS_WIDTH_INCHES, 1.5 + BAR_INCHES * len(groups) * len(series)), dpi=DPI, layout="constrained"
    )
    ax = fig.subplots()
    for index, name in enumerate(series):
        drawn = [(row, bars[name]) for row, bars in enumerate(groups.values()) if name in bars]
        positions = [row - 0.4 + height * (index + 0.5) for row, _ in drawn]
        values = [value for _, (value, _, _) in drawn]
        errors = [[value - low for _, (value, low, _) in drawn], [high - value for _, (value, _, high) in drawn]]
        ax.barh(positions, values, height=height * 0.9, xerr=errors, capsize=3, label=name)
        for position, (_, (value, _, high)) in zip(positions, drawn):
            ax.text(max(high, 0.0), position, " " + value_format.format(value), va="center", fontsize=8)
    if line_at is not None:
        ax.axvline(line_at, color="grey", linestyle="--", linewidth=1, label=line_label or None)
    ax.set_yticks(range(len(groups)), labels=list(groups), fontsize=9)
    ax.invert_yaxis()  # the first group on top, as in the table it comes from
    ax.margins(x=0.12)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(title)
    return _save_figure(fig, output_file)


__all__ = [
    "find_trainer_state",
    "plot_attention",
    "plot_confusion_matrix",
    "plot_grouped_bars",
    "plot_per_type_f1",
    "plot_regression",
    "plot_training_curves",
    "read_log_history",
]
