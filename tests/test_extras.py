"""A missing optional dependency is named with the pip command that installs its extra, for an install from PyPI
(`pip install "hf-bertscratch[EXTRA]"`) and for a clone, and every extra a message names is one pyproject.toml
declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_bertscratch_base.extras import EXTRAS, install_command

REPO = Path(__file__).resolve().parents[1]


def test_the_extras_are_those_pyproject_declares() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "hf-bertscratch"
    assert set(EXTRAS) == set(project["optional-dependencies"])
    assert install_command("flax") == 'pip install "hf-bertscratch[flax]" (in a clone: pip install -e ".[flax]")'
    with pytest.raises(ValueError, match="'jax'.*expected one of"):
        install_command("jax")


def test_a_missing_onnx_package_names_the_onnx_extra() -> None:
    from hf_bertscratch.onnx.common import require

    with pytest.raises(ImportError) as raised:
        require("no_such_onnx_package")
    assert "'no_such_onnx_package'" in str(raised.value)
    assert 'pip install "hf-bertscratch[onnx]"' in str(raised.value)


def test_report_to_tensorboard_without_it_names_the_extra_before_training(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hf_bertscratch import run_folder
    from hf_bertscratch.finetuning_arguments import FinetuneTrainingArguments

    monkeypatch.setattr(run_folder, "is_tensorboard_available", lambda: False)
    with pytest.raises(ValueError) as raised:
        FinetuneTrainingArguments(output_dir=str(tmp_path), report_to="tensorboard")
    assert str(raised.value) == (
        "--report_to tensorboard needs the tensorboard package, which is not installed: "
        'pip install "hf-bertscratch[tensorboard]" (in a clone: pip install -e ".[tensorboard]").'
    )
    FinetuneTrainingArguments(output_dir=str(tmp_path), report_to="none")  # no reporting needs nothing
