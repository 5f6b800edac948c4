"""The package's optional parts (the extras of pyproject.toml) and the pip command that installs one, which every
message about a missing optional dependency names: the same command for an install from PyPI and, in a clone of the
repository, its editable form."""

from __future__ import annotations

DISTRIBUTION = "hf-bertscratch"  # the name pip installs the package by
EXTRAS = ("tensorboard", "flax", "sentence-transformers", "onnx", "docs", "dev")


def install_command(extra: str) -> str:
    """`pip install "hf-bertscratch[EXTRA]"`, and its form in a clone (`pip install -e ".[EXTRA]"`), for one of
    `EXTRAS`."""
    if extra not in EXTRAS:
        raise ValueError(f"No extra named {extra!r}; expected one of {list(EXTRAS)}.")
    return f'pip install "{DISTRIBUTION}[{extra}]" (in a clone: pip install -e ".[{extra}]")'


__all__ = ["DISTRIBUTION", "EXTRAS", "install_command"]
