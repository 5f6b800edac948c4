"""Fetch transformers' own common model tests for the INSTALLED transformers version, at test time.

`tests/test_modeling_common.py` (ModelTesterMixin), `tests/test_configuration_common.py` (ConfigTester) and
`tests/test_training_mixin.py` (TrainingTesterMixin) ship in the transformers sdist on PyPI, not in the wheel, and
this repository must not carry a copy. So the first run downloads the sdist with pip, extracts its top-level
`tests/*.py` into a cache folder as the package `transformers_common_tests` (so their relative imports work), and
puts that folder on `sys.path`. Later runs reuse the cache.

The sdist leaves out three sub-packages those files import, so small stand-ins of our own are written beside them
(only where the sdist lacks the real file):
- `exporters/test_export.py::ExportTesterMixin`: an empty mixin, so the torch.export tests do not run. Exporting is
  not part of this project's contract; the model is still checked under `torch.compile` by the common tests.
- `generation/test_utils.py::GenerationTesterMixin`: an empty mixin; BertScratch is an encoder and cannot generate,
  and ModelTesterMixin only uses the name to check that non-generative testers do not inherit it.
- `utils/test_configuration_utils.py::config_common_kwargs`: non-default values for the common PretrainedConfig
  fields, which `ConfigTester.check_config_arguments_init` checks are stored as given.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import transformers
from filelock import FileLock

PACKAGE = "transformers_common_tests"

_STAND_INS: dict[str, str] = {
    "exporters/test_export.py": (
        '"""Stand-in written by hf_bertscratch: the sdist does not ship tests/exporters."""\n\n\n'
        "class ExportTesterMixin:\n    pass\n"
    ),
    "generation/test_utils.py": (
        '"""Stand-in written by hf_bertscratch: the sdist does not ship tests/generation."""\n\n\n'
        "class GenerationTesterMixin:\n    pass\n"
    ),
    "utils/test_configuration_utils.py": (
        '"""Stand-in written by hf_bertscratch: the sdist does not ship tests/utils."""\n\n'
        "config_common_kwargs = {\n"
        '    "return_dict": False,\n'
        '    "output_hidden_states": True,\n'
        '    "output_attentions": True,\n'
        '    "dtype": "float16",\n'
        '    "tie_word_embeddings": False,\n'
        '    "chunk_size_feed_forward": 5,\n'
        '    "architectures": ["BertScratchModel"],\n'
        '    "id2label": {0: "label"},\n'
        '    "label2id": {"label": "0"},\n'
        '    "problem_type": "regression",\n'
        '    "pad_token_id": 7,\n'
        '    "bos_token_id": 6,\n'
        '    "eos_token_id": 8,\n'
        "}\n"
    ),
}


def cache_root(version: str = transformers.__version__) -> Path:
    """Where the extracted tests of this transformers version live (override with BERTSCRATCH_TESTS_CACHE)."""
    base = Path(os.environ.get("BERTSCRATCH_TESTS_CACHE", Path.home() / ".cache" / "hf_bertscratch"))
    return base / f"transformers-tests-{version}"


def _download_sdist(version: str, destination: Path) -> Path:
    """`pip download` the transformers sdist; raises RuntimeError (with pip's output) when PyPI is unreachable."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-build-isolation",
        "--disable-pip-version-check",
        "-q",
        f"transformers=={version}",
        "-d",
        str(destination),
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"pip download of transformers=={version} timed out after 300 s") from error
    archives = sorted(destination.glob("transformers-*.tar.gz"))
    if result.returncode != 0 or not archives:
        raise RuntimeError(f"pip download of transformers=={version} failed:\n{result.stdout}\n{result.stderr}")
    return archives[0]


def _extract_tests(archive: Path, package_dir: Path) -> None:
    """Copy the sdist's top-level tests/*.py into `package_dir`, then add the stand-ins it lacks."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py") and member.isfile():
                (package_dir / parts[2]).write_bytes(tar.extractfile(member).read())
    (package_dir / "__init__.py").touch()
    for relative, text in _STAND_INS.items():
        path = package_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        if not path.exists():
            path.write_text(text, encoding="utf-8")


def ensure_common_tests(version: str = transformers.__version__) -> Path:
    """Download and extract the common tests once per version (safe under pytest-xdist); returns the cache root."""
    root = cache_root(version)
    package_dir = root / PACKAGE
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock", timeout=600):
        if (package_dir / "test_modeling_common.py").exists():
            return root
        with tempfile.TemporaryDirectory(dir=root.parent) as scratch:
            archive = _download_sdist(version, Path(scratch))
            staging = Path(scratch) / root.name
            (staging / PACKAGE).mkdir(parents=True)
            _extract_tests(archive, staging / PACKAGE)
            if root.exists():  # a half-written folder from an interrupted run
                shutil.rmtree(root)
            staging.rename(root)  # atomic: the cache is either complete or absent
    return root


def import_common_tests(module: str) -> ModuleType:
    """Import `transformers_common_tests.<module>` (e.g. "test_modeling_common"), fetching it first if needed."""
    root = str(ensure_common_tests())
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(f"{PACKAGE}.{module}")
