"""The package's layers, read from the source: `hf_bertscratch_base` stands on the standard library alone, the library
on it, and the front door (`hf_bertscratch_cli`) on top, on the base when imported and on the library only when a
command runs; the library never imports the front door. Within the library every import, at the top of a module or
inside a function, points down its layers (`LAYERS`). Pretraining and the ONNX evaluation take task data from `tasks`,
never from fine-tuning."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _statements(tree: ast.AST, module_level: bool) -> list[ast.AST]:
    """Every node of `tree`; with `module_level`, only those that run when the module is imported (not inside a
    function, where an import waits for the call)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not (module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
            todo.extend(ast.iter_child_nodes(node))
    return nodes


def _imports(path: Path, module_level: bool = False) -> set[str]:
    """The absolute names a module imports (relative imports resolved against its package); with `module_level`,
    those imported when the module itself is."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    names = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")), module_level):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_base_package_imports_the_standard_library_alone() -> None:
    """(A function may import huggingface_hub when called: the Hub cache lookup of `model_reference`.)"""
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
    for path in [*_modules("hf_bertscratch/onnx"), *(ROOT / "hf_bertscratch").glob("pretraining*.py")]:
        assert "hf_bertscratch.finetuning" not in _imports(path), f"{path.relative_to(ROOT)} imports finetuning"


# The library's layers from the top down, each the modules of hf_bertscratch (a name and what is under it) it holds;
# every module not named stands on the base below them all: the model family, its data, tokenizer, metrics and run
# helpers.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the command line", ("cli",)),
    (
        "training and evaluation scripts",
        (
            "finetuning",
            "finetuning_arguments",
            "pretraining",
            "pretraining_arguments",
            "pretraining_data",
            "pretraining_report",
            "benchmark",
            "onnx_evaluation",
            "flax.pretraining",
            "flax.benchmark",
        ),
    ),  # fmt: skip
    ("tasks", ("tasks",)),
    (
        "using a model",
        ("inference", "qa_windows", "embedding", "similarity", "hub", "cards", "convert", "plotting", "onnx"),
    ),  # fmt: skip
)


def _layer(module: str) -> int:
    """0 for the front door, 1 for the command line, ..., len(LAYERS) + 1 for the model and what it stands on, and
    one more for the base package: the higher the number, the lower the layer."""
    if module.startswith("hf_bertscratch_cli"):
        return 0
    if module.startswith("hf_bertscratch_base"):
        return len(LAYERS) + 2
    name = module.removeprefix("hf_bertscratch.")
    for number, (_, names) in enumerate(LAYERS, start=1):
        if any(name == held or name.startswith(f"{held}.") for held in names):
            return number
    return len(LAYERS) + 1


def test_every_import_of_the_library_points_down_its_layers() -> None:
    upward = []
    for path in _modules("hf_bertscratch"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for name in _imports(path):
            if name.split(".")[0] in ("hf_bertscratch", "hf_bertscratch_base", "hf_bertscratch_cli"):
                if name != "hf_bertscratch" and _layer(name) < _layer(module):
                    upward.append(f"{module} -> {name}")
    assert not upward, f"imports that point up the layers: {upward}"
