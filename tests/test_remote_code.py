"""Remote code: a saved folder loads with `trust_remote_code=True` in a Python process WITHOUT hf_bertscratch.

The child process runs isolated (`python -I`, a cwd outside the repo) and, because the editable install is found
through site-packages even then, also with a meta-path hook that makes `import hf_bertscratch` fail. The child
checks that the import really fails, loads the folders through AutoModel, AutoModelForMaskedLM and
AutoModelForSequenceClassification, and writes its outputs back; they must equal the original model's exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from transformers import BertTokenizer

import hf_bertscratch

from conftest import tiny_config_kwargs

CHILD = textwrap.dedent(
    '''
    import sys

    class _NoBertScratch:
        """Meta-path hook: behave as if hf_bertscratch were not installed."""

        def find_spec(self, name, path=None, target=None):
            if name == "hf_bertscratch" or name.startswith("hf_bertscratch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoBertScratch())
    try:
        import hf_bertscratch  # noqa: F401
    except ModuleNotFoundError:
        print("hf_bertscratch: not importable")
    else:
        raise SystemExit("hf_bertscratch is importable: the remote-code test would prove nothing")

    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

    mlm_dir, classifier_dir, mean_dir, io_file = sys.argv[1:5]
    inputs = torch.load(io_file)["inputs"]
    results = {}
    for key, auto_class, folder in (
        ("base", AutoModel, classifier_dir),  # the classifier's encoder has a pooler, the MLM's does not
        ("mlm", AutoModelForMaskedLM, mlm_dir),
        ("classifier", AutoModelForSequenceClassification, classifier_dir),
        ("classifier_mean", AutoModelForSequenceClassification, mean_dir),  # classifier_pooling="mean"
    ):
        model = auto_class.from_pretrained(folder, trust_remote_code=True).eval()
        assert not type(model).__module__.startswith("hf_bertscratch"), type(model).__module__
        with torch.no_grad():
            results[key] = {k: v for k, v in model(**inputs).items() if isinstance(v, torch.Tensor)}
        results[key + "_class"] = f"{type(model).__module__}.{type(model).__name__}"
    results["config_class"] = type(AutoConfig.from_pretrained(mlm_dir, trust_remote_code=True)).__module__
    # transformers 5's AutoTokenizer reads config.json first, whose auto_map asks for remote code too.
    from transformers import AutoTokenizer

    results["vocab"] = AutoTokenizer.from_pretrained(mlm_dir, trust_remote_code=True).get_vocab()
    torch.save(results, sys.argv[5])
    print("loaded:", results["base_class"], results["mlm_class"], results["classifier_class"])
    '''
)


def _outputs(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return {k: v for k, v in model.eval()(**inputs).items() if isinstance(v, torch.Tensor)}


def test_folder_loads_through_remote_code_without_the_package(tmp_path: Path, tokenizer: BertTokenizer) -> None:
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), num_labels=3)
    mlm = hf_bertscratch.BertScratchForMaskedLM(config)
    classifier = hf_bertscratch.BertScratchForSequenceClassification(config)
    mean_classifier = hf_bertscratch.BertScratchForSequenceClassification(
        hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), num_labels=3, classifier_pooling="mean")
    )
    mlm.save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    classifier.save_pretrained(tmp_path / "classifier")
    mean_classifier.save_pretrained(tmp_path / "classifier-mean")
    assert json.loads((tmp_path / "classifier-mean" / "config.json").read_text())["classifier_pooling"] == "mean"

    # The folder ships the code, and its auto_map names every head, not only the saved one.
    for name in (
        "configuration_bertscratch.py",
        "modeling_bertscratch.py",
        "batching_bertscratch.py",
        "padding_bertscratch.py",
        "cpu_matmul.py",
        "model.safetensors",
    ):
        assert (tmp_path / "mlm" / name).is_file(), name
    auto_map = json.loads((tmp_path / "mlm" / "config.json").read_text())["auto_map"]
    assert set(auto_map) == {"AutoConfig", *hf_bertscratch.AUTO_CLASS_TO_MODEL}
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_bertscratch.BertScratchForSequenceClassification"

    inputs = dict(
        tokenizer(
            ["paris is the capital of", "the cat sat"], ["france .", "on the mat ."], padding=True, return_tensors="pt"
        )
    )
    torch.save({"inputs": inputs}, tmp_path / "inputs.pt")
    (tmp_path / "child.py").write_text(CHILD)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1")
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            str(tmp_path / "child.py"),
            str(tmp_path / "mlm"),
            str(tmp_path / "classifier"),
            str(tmp_path / "classifier-mean"),
            str(tmp_path / "inputs.pt"),
            str(tmp_path / "outputs.pt"),
        ],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,  # a prompt would read an empty answer, and say so in the output
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hf_bertscratch: not importable" in result.stdout
    for asked in ("Do you wish to run the custom code", "instantiate a model of type"):
        assert asked not in result.stdout + result.stderr, result.stdout + result.stderr

    remote = torch.load(tmp_path / "outputs.pt")
    assert remote["mlm_class"].startswith("transformers_modules.") and remote["mlm_class"].endswith(
        "BertScratchForMaskedLM"
    )
    assert remote["classifier_class"].endswith("BertScratchForSequenceClassification")
    assert remote["base_class"].endswith("BertScratchModel")
    assert remote["config_class"].startswith("transformers_modules.")
    assert remote["vocab"] == tokenizer.get_vocab()
    expected = {
        "base": _outputs(classifier.bert, inputs),
        "mlm": _outputs(mlm, inputs),
        "classifier": _outputs(classifier, inputs),
        "classifier_mean": _outputs(mean_classifier, inputs),
    }
    for key, tensors in expected.items():
        assert remote[key].keys() == tensors.keys(), key
        for name, tensor in tensors.items():
            assert torch.equal(remote[key][name], tensor), f"{key}.{name}"


def test_saving_changes_no_class_state_and_ships_the_code(tmp_path: Path) -> None:
    """save_pretrained copies the code and writes the family's auto_map without registering any class: nothing a
    save does is visible on the classes afterwards (no `_auto_class` set at save time)."""
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(64))
    for head in ("BertScratchForMaskedLM", "BertScratchForReplacedTokenDetection", "BertScratchModel"):
        model = getattr(hf_bertscratch, head)(config)
        model.save_pretrained(tmp_path / head)
        saved = json.loads((tmp_path / head / "config.json").read_text())
        assert saved["auto_map"] == hf_bertscratch.modeling_bertscratch.family_auto_map()
        assert {
            "modeling_bertscratch.py",
            "batching_bertscratch.py",
            "padding_bertscratch.py",
            "cpu_matmul.py",
            "configuration_bertscratch.py",
        } <= {p.name for p in (tmp_path / head).iterdir()}
    classes = [hf_bertscratch.BertScratchConfig, *(getattr(hf_bertscratch, name) for name in hf_bertscratch.__all__)]
    assert [cls for cls in classes if getattr(cls, "_auto_class", None) is not None] == []


def test_a_process_other_than_the_main_one_writes_no_code_files(tmp_path: Path) -> None:
    """`is_main_process=False`, given by keyword or in second place as transformers' own signature allows, keeps the
    code files out of the folder, as it keeps the config out: only the main process writes them."""
    model = hf_bertscratch.BertScratchForMaskedLM(hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(64)))
    code = {Path(path).name for path in hf_bertscratch.modeling_bertscratch.code_files()}
    model.save_pretrained(tmp_path / "keyword", is_main_process=False)
    model.save_pretrained(tmp_path / "positional", False)
    for folder in ("keyword", "positional"):
        written = {p.name for p in (tmp_path / folder).iterdir()}
        assert written & code == set(), folder
        assert "config.json" not in written, folder
