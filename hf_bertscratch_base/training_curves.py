"""A training run's loss and evaluation curves, drawn from its `trainer_state.json` with matplotlib alone:
`bertscratch plot` draws them without importing torch or transformers, and pretraining and fine-tuning draw them into
their output folder at the end (through `hf_bertscratch.plotting`, which logs each image it writes and draws the
model's other pictures with `save_figure` too).

Figures are bare `matplotlib.figure.Figure`s rendered by Agg, never `pyplot`'s, so a notebook's backend is left alone
and no figure stays open; images are written atomically (`run_files.atomic_write`). matplotlib is imported when a
figure is drawn: the module itself stands on the standard library, as the rest of the base does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from .run_files import atomic_write, checkpoint_folders

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
CURVE_PANEL_INCHES = (6.0, 4.0)  # (width, height) of one panel of `plot_training_curves`
# Series of `trainer_state.json`'s log_history drawn by `plot_training_curves`: panel -> [(log key, legend label)].
CURVE_PANELS: dict[str, list[tuple[str, str]]] = {
    "loss": [("loss", "training loss"), ("eval_loss", "validation loss")],
    "accuracy": [("eval_accuracy", "validation accuracy")],
}


def check_image_path(output_file: str | Path) -> None:
    """Refuse, in one line, an image path that is an existing folder (the picture would replace no file there, and
    the rename onto it fails); checked before the picture is drawn (`bertscratch attention`: before torch loads)."""
    if Path(output_file).expanduser().is_dir():
        raise IsADirectoryError(
            f"Cannot write image {str(output_file)!r}: it is a folder; expected an image file's path, e.g. "
            f"{str(Path(output_file) / 'picture.png')!r}."
        )


def save_figure(fig: Figure, output_file: str | Path) -> Path:
    """Write `fig` to `output_file` (format from its suffix, PNG if none) through a temp file and a rename."""
    output_file = Path(output_file)
    check_image_path(output_file)
    image_format = output_file.suffix.lstrip(".").lower() or "png"
    supported = fig.canvas.get_supported_filetypes()
    if image_format not in supported:
        raise ValueError(
            f"Cannot write image {str(output_file)!r}: format {image_format!r} is not one of {sorted(supported)}."
        )
    with atomic_write(output_file) as tmp:
        fig.savefig(tmp, format=image_format, dpi=DPI)
    return output_file


def find_trainer_state(run_dir: str | Path) -> Path:
    """The `trainer_state.json` of a Trainer run: `run_dir`'s own, else that of its latest `checkpoint-N`."""
    run_dir = Path(run_dir)
    if run_dir.is_file():
        raise NotADirectoryError(
            f"Run directory {str(run_dir)!r} is a file: expected a Trainer output_dir, the folder that holds "
            "trainer_state.json or checkpoint-* folders."
        )
    if not run_dir.is_dir():
        raise FileNotFoundError(f"Run directory {str(run_dir)!r} does not exist (expected a Trainer output_dir).")
    state = run_dir / "trainer_state.json"
    if state.is_file():
        return state
    checkpoints = [state for path in checkpoint_folders(run_dir) if (state := path / "trainer_state.json").is_file()]
    if checkpoints:
        return checkpoints[-1]
    raise FileNotFoundError(
        f"No trainer_state.json in {str(run_dir)!r} or its checkpoint-* folders: expected the output_dir of a "
        "finished Trainer run (pretraining or fine-tuning)."
    )


def read_log_history(trainer_state: str | Path) -> list[dict]:
    """The `log_history` list of a `trainer_state.json` (one dict per logging/eval event, each with "step")."""
    trainer_state = Path(trainer_state)
    try:
        state = json.loads(trainer_state.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{str(trainer_state)!r} is not valid JSON: {error}.") from error
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{str(trainer_state)!r} has no 'log_history' list: is it a Trainer's trainer_state.json?")
    return history


def _series(history: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of every log entry that holds `key`."""
    points = [(entry.get("step", index), entry[key]) for index, entry in enumerate(history) if key in entry]
    return [float(step) for step, _ in points], [float(value) for _, value in points]


def _run_name(run_dir: Path) -> str:
    """The run's folder name; for a hidden staging folder inside the output_dir (".staging"), the output_dir's."""
    run_dir = run_dir.resolve()
    return run_dir.parent.name if run_dir.name.startswith(".") else run_dir.name


def plot_training_curves(run_dir: str | Path, output_file: str | Path | None = None, title: str | None = None) -> Path:
    """Plot training and validation loss (and validation accuracy when logged) of a Trainer run.

    Args:
        run_dir: a Trainer `output_dir` holding `trainer_state.json` (or `checkpoint-N/trainer_state.json`).
        output_file: image to write; defaults to `run_dir/loss_curve.png`.
        title: figure title; defaults to the run folder's name.

    Returns:
        The path written. The figure is one 600x400 px panel for the losses, plus a second panel beside it
        (1200x400 px in all) when `eval_accuracy` was logged.
    """
    history = read_log_history(find_trainer_state(run_dir))
    output_file = Path(run_dir) / "loss_curve.png" if output_file is None else Path(output_file)
    check_image_path(output_file)  # before the drawing
    panels = {name: [(label, *_series(history, key)) for key, label in series] for name, series in CURVE_PANELS.items()}
    panels = {name: [s for s in series if s[1]] for name, series in panels.items()}
    if not panels["loss"]:
        raise ValueError(
            f"The trainer_state.json of {str(run_dir)!r} logs no 'loss' or 'eval_loss' yet: train for at least "
            "`logging_steps` steps (or evaluate) before plotting."
        )
    drawn = {name: series for name, series in panels.items() if series}
    from matplotlib.figure import Figure  # matplotlib loads here, when there is something to draw

    width, height = CURVE_PANEL_INCHES
    fig = Figure(figsize=(width * len(drawn), height), dpi=DPI, layout="constrained")
    for ax, (name, series) in zip(fig.subplots(1, len(drawn), squeeze=False)[0], drawn.items()):
        for label, steps, values in series:
            # A lone point (e.g. one final evaluation) is invisible as a line: give it a marker.
            ax.plot(steps, values, marker="o" if len(steps) < 20 else None, markersize=3, label=label)
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(_run_name(Path(run_dir)) if title is None else title)
    return save_figure(fig, output_file)


__all__ = [
    "CURVE_PANELS",
    "CURVE_PANEL_INCHES",
    "DPI",
    "check_image_path",
    "find_trainer_state",
    "plot_training_curves",
    "read_log_history",
    "save_figure",
]
