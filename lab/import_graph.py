"""The installed packages' import graph, read from the source: the layers' rule, the imports that break it, the
longest chain of imports and the largest modules.

    python -m lab.import_graph              # the summary
    python -m lab.import_graph --json       # the same as one json object

Every import counts, at the top of a module or inside a function (an import that waits for its call still ties the
two modules together). `LAYERS` is the rule `tests/test_layers.py` holds the package to: from the command line down
to the model and what it stands on, each import points to its own layer or one below.
"""

from __future__ import annotations

import argparse
import ast
import json
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hf_bertscratch", "hf_bertscratch_base", "hf_bertscratch_cli")

# The library's layers from the top down, each the modules of hf_bertscratch (a name and what is under it) it holds;
# every module not named stands below them all: the model family, its data, tokenizer, metrics and run helpers.
# hf_bertscratch_cli (the front door) stands above the library, hf_bertscratch_base below it.
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
            "flax_pretraining_arguments",
            "flax.benchmark",
        ),
    ),  # fmt: skip
    ("tasks", ("tasks",)),
    (
        "using a model",
        ("inference", "qa_windows", "embedding", "similarity", "hub", "cards", "convert", "plotting", "onnx"),
    ),  # fmt: skip
)


def statements(tree: ast.AST, module_level: bool) -> list[ast.AST]:
    """Every node of `tree`; with `module_level`, only those that run when the module is imported (not inside a
    function, where an import waits for the call, nor under `if TYPE_CHECKING:`, which only a type checker reads)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if (
            module_level
            and isinstance(node, ast.If)
            and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        ):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def module_name(path: Path) -> str:
    """hf_bertscratch/tasks/__init__.py -> hf_bertscratch.tasks; hf_bertscratch/cli.py -> hf_bertscratch.cli."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, module_level: bool = False) -> set[str]:
    """The absolute names a module imports (relative imports resolved against its package, `from X import name`
    read as X and, where X.name is a module of the packages, X.name too); with `module_level`, those imported when
    the module itself is."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    names: set[str] = set()
    for node in statements(ast.parse(path.read_text(encoding="utf-8")), module_level):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in modules())
    return names


def module_paths(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@cache
def modules() -> dict[str, Path]:
    """Every module of `PACKAGES` by name."""
    return {module_name(path): path for package in PACKAGES for path in module_paths(package)}


def layer(module: str) -> int:
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


@cache
def graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports: itself and the packages it is in left out (Python imports a
    submodule's packages before it, whatever it names). Read once: callers must not change it."""
    known = modules()
    return {
        name: {
            imported
            for imported in imports(path)
            if imported in known and imported != name and not name.startswith(f"{imported}.")
        }
        for name, path in known.items()
    }


def upward_imports() -> list[str]:
    """ "A -> B" for each import of a module B from a higher layer than A's (the package itself, which every
    submodule's import loads first, left out)."""
    return sorted(
        f"{module} -> {imported}"
        for module, imported_modules in graph().items()
        for imported in imported_modules
        if imported not in PACKAGES and layer(imported) < layer(module)
    )


def longest_chain() -> list[str]:
    """The longest path of imports, as module names from the importing end. The graph must have no cycle (two
    modules that import each other, at the top or in a function): one is named if it does."""
    edges: dict[str, set[str]] = graph()
    best: dict[str, list[str]] = {}

    def walk(module: str, path: tuple[str, ...]) -> list[str]:
        if module in path:
            raise ValueError(f"Import cycle: {' -> '.join([*path[path.index(module) :], module])}.")
        if module not in best:
            tails = [walk(imported, (*path, module)) for imported in sorted(edges[module])]
            best[module] = [module, *max(tails, key=len, default=[])]
        return best[module]

    return max((walk(module, ()) for module in sorted(edges)), key=len)


def largest_modules(count: int = 8) -> list[tuple[str, int]]:
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    return sorted(lines.items(), key=lambda item: -item[1])[:count]


def summary() -> dict:
    chain = longest_chain()
    return {
        "modules": len(modules()),
        "imports": sum(len(imported) for imported in graph().values()),
        "upward_imports": upward_imports(),
        "longest_chain": {"modules": len(chain), "chain": chain},
        "largest_modules": dict(largest_modules()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="Print one json object.")
    args = parser.parse_args(argv)
    found = summary()
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(f"{found['modules']} modules, {found['imports']} imports among them")
    print(f"imports up the layers: {len(found['upward_imports'])}")
    for line in found["upward_imports"]:
        print(f"  {line}")
    print(f"longest chain: {found['longest_chain']['modules']} modules")
    print("  " + " -> ".join(found["longest_chain"]["chain"]))
    print("largest modules (lines):")
    for name, lines in found["largest_modules"].items():
        print(f"  {lines:6,d}  {name}")


if __name__ == "__main__":
    main()
