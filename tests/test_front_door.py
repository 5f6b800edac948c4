"""The `bertscratch` front door's refusals that come before torch loads: each in one line, within seconds, naming what
is wrong in the words the library would use after loading."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs the front door on the command line after `-c`, exits with its status; fails where torch was imported.
FRONT_DOOR = (
    "import sys, hf_bertscratch_cli\n"
    "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
    "assert 'torch' not in sys.modules\nsys.exit(code)\n"
)


def front_door(folder: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`bertscratch ARGV` run in `folder` by the front door alone (its checks refuse the command, or torch would load),
    within seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", FRONT_DOOR, *argv], capture_output=True, text=True, check=False, cwd=folder, env=env
    )
    assert time.monotonic() - started < 5, done.stderr
    return done


def model_folder(path: Path, **config: object) -> Path:
    """A model folder whose config.json holds `config`."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.fixture
def reviews(tmp_path: Path) -> Path:
    """A folder with a model ("model") and a training file of reviews whose columns are not the default ones."""
    model_folder(tmp_path / "model", model_type="bertscratch", max_position_embeddings=512)
    (tmp_path / "train.csv").write_text("review,sentiment\nthe cat sat ,neg\na fine film ,pos\n")
    return tmp_path


def test_a_mistyped_flag_is_named_before_the_columns_its_value_would_name(reviews: Path) -> None:
    """`--label_col sentiment` is a mistyped --label_column: its error names the flag, not the 'label' column the
    file lacks (which the right flag would have named)."""
    done = front_door(
        reviews, "finetune", "--model_name_or_path", "model", "--train_file", "train.csv",
        "--text_column", "review", "--label_col", "sentiment", "--output_dir", "out",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "bertscratch finetune: error: unrecognized arguments: --label_col sentiment; did you mean '--label_column'? "
        "(see bertscratch finetune --help)\n"
    )


def test_a_missing_model_or_file_is_still_named_before_a_mistyped_flag(reviews: Path) -> None:
    """What the command reads is not there: that is the error, whatever flag is mistyped beside it."""
    done = front_door(
        reviews, "finetune", "--model_name_or_path", "model", "--train_file", "nowhere.csv", "--max_step", "3",
        "--output_dir", "out",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "bertscratch finetune: error: FileNotFoundError: The train file 'nowhere.csv' (--train_file) does not exist.\n"
    )
