"""The Flax part is optional: the core package never imports jax, and without jax the Flax import names the extra.

These run whether or not jax is installed (each in a fresh interpreter, so other tests' imports do not count).
"""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_core_package_does_not_import_jax() -> None:
    result = _run(
        "import sys, hf_bertscratch, hf_bertscratch.pretraining, hf_bertscratch.cli\n"
        "leaked = sorted(m for m in ('jax', 'flax', 'optax') if m in sys.modules)\n"
        "assert not leaked, leaked\n"
    )
    assert result.returncode == 0, result.stderr


def test_flax_import_without_jax_names_the_extra() -> None:
    # None in sys.modules makes `import jax` fail as it does when jax is not installed.
    result = _run(
        "import sys\nsys.modules['jax'] = None\n"
        "try:\n    import hf_bertscratch.flax\nexcept ModuleNotFoundError as error:\n    print(error)\n"
        "else:\n    raise SystemExit('imported without jax')\n"
    )
    assert result.returncode == 0, result.stderr
    assert 'pip install "hf-bertscratch[flax]"' in result.stdout
    assert "jax" in result.stdout
