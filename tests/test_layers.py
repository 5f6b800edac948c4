"""The package's layers, read from the source: `hf_bertscratch_base` stands on the standard library alone, the library
on it, and the front door (`hf_bertscratch_cli`) on top, on the base when imported and on the library only when a
command runs; the library never imports the front door. Within the library every import, at the top of a module or
inside a function, points down its layers (`lab.import_graph.LAYERS`). Pretraining and the ONNX evaluation take task
data from `tasks`, never from fine-tuning."""

from __future__ import annotations

import sys

import pytest

from lab import import_graph
from lab.import_graph import ROOT, upward_imports
from lab.import_graph import imports as _imports
from lab.import_graph import module_paths as _modules


def test_the_base_package_imports_the_standard_library_alone() -> None:
    """(A function may import another package when called: huggingface_hub for the Hub cache lookup of
    `model_reference`, matplotlib for the curves `training_curves` draws.)"""
    for path in _modules("hf_bertscratch_base"):
        outside = {
            name
            for name in _imports(path, module_level=True)
            if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith("hf_bertscratch_base")
        }
        assert not outside, f"{path.relative_to(ROOT)} imports {sorted(outside)}"


def test_the_front_door_imports_the_library_only_to_run_a_command_and_the_library_never_the_front_door() -> None:
    for path in _modules("hf_bertscratch_cli"):  # dispatch imports a command's module when the command runs
        heavy = {
            name
            for name in _imports(path, module_level=True)
            if name.split(".")[0] in ("hf_bertscratch", "torch", "transformers")
        }
        assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)}"
    for path in _modules("hf_bertscratch"):
        front_door = {name for name in _imports(path) if name.startswith("hf_bertscratch_cli")}
        assert not front_door, f"{path.relative_to(ROOT)} imports {sorted(front_door)}"


def test_pretraining_and_onnx_take_task_data_from_tasks_not_from_finetuning() -> None:
    scripts = [ROOT / "hf_bertscratch" / "onnx_evaluation.py", *(ROOT / "hf_bertscratch").glob("pretraining*.py")]
    for path in [*_modules("hf_bertscratch/onnx"), *scripts]:
        assert "hf_bertscratch.finetuning" not in _imports(path), f"{path.relative_to(ROOT)} imports finetuning"


def test_every_import_of_the_library_points_down_its_layers() -> None:
    """`lab.import_graph.LAYERS`: the command line, training and evaluation scripts, tasks, using a model, the model and
    what it stands on, the base; every import, at the top of a module or inside a function."""
    assert not upward_imports(), f"imports that point up the layers: {upward_imports()}"


def test_no_modules_import_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest chain of imports is read off a graph without cycles; a cycle would be named."""
    chain = import_graph.longest_chain()
    assert all(later in import_graph.graph()[earlier] for earlier, later in zip(chain, chain[1:]))
    monkeypatch.setattr(import_graph, "graph", lambda: {"a": {"b"}, "b": {"c"}, "c": {"a"}})
    with pytest.raises(ValueError, match=r"Import cycle: a -> b -> c -> a\."):
        import_graph.longest_chain()
