"""Sharing on the Hub: the dry-run folder loads with transformers alone, and push_to_hub uploads exactly that folder,
an ELECTRA run's generator/ subfolder included, into a repository that is private whenever private was asked for.

The Hub is unreachable here, so uploads are checked at huggingface_hub's boundary (`HfApi.create_repo`, `repo_info`,
`update_repo_settings`, `create_branch`, `upload_folder`, and for transformers' own uploads `create_commit` and
`ModelCard.load`, patched); everything up to those calls runs for real.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi, ModelCard
from transformers import TrainingArguments, pipeline

import hf_bertscratch
from hf_bertscratch import cards, hub, modeling_bertscratch
from hf_bertscratch.electra import GENERATOR_FOLDER, ElectraPretrainingModel

from conftest import assert_no_local_path, record_hub, tiny_config_kwargs

FILL_MASK_TEXT = "paris is the [MASK] of france ."
CLASSIFY_TEXT = "the movie was great and the acting was wonderful ."
LABELS = {0: "negative", 1: "positive"}


def _save_run(folder: Path, model: torch.nn.Module, tokenizer, kind: str) -> Path:
    """A run's output folder: what pretraining/fine-tuning leave, including files that must NOT be uploaded."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return _add_run_files(folder, kind)


def _add_run_files(folder: Path, kind: str) -> Path:
    """Metrics, a plot, the card, and what stays home (training_args.bin, trainer_state.json, a checkpoint)."""
    (folder / "all_results.json").write_text(json.dumps({"eval_loss": 1.5, "eval_accuracy": 0.5}), encoding="utf-8")
    (folder / "loss_curve.png").write_bytes(b"\x89PNG fake plot")
    (folder / "training_args.bin").write_bytes(b"pickle")
    (folder / "trainer_state.json").write_text("{}", encoding="utf-8")
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"old")
    cards.write_model_card(folder, kind, {"model_name": folder.name, "results": {"eval_loss": 1.5}})
    return folder


@pytest.fixture(scope="module")
def mlm_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    model = hf_bertscratch.BertScratchForMaskedLM(config)
    return _save_run(tmp_path_factory.mktemp("mlm-run"), model, tokenizer, "pretrained")


@pytest.fixture(scope="module")
def cls_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(1)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), id2label=LABELS)
    model = hf_bertscratch.BertScratchForSequenceClassification(config)
    folder = _save_run(tmp_path_factory.mktemp("cls-run"), model, tokenizer, "classifier")
    (folder / "confusion_matrix.png").write_bytes(b"\x89PNG fake matrix")
    return folder


@pytest.fixture(scope="module")
def electra_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An `--objective electra` run: the discriminator at the top, the generator (a fill-mask model) in generator/."""
    torch.manual_seed(2)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    pair = ElectraPretrainingModel(hf_bertscratch.BertScratchForReplacedTokenDetection(config), 0.5)
    folder = tmp_path_factory.mktemp("electra-run")
    pair.save_pretrained(folder, tokenizer)
    return _add_run_files(folder, "discriminator")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every Hub call fail loudly; returns the list of calls attempted (must stay empty)."""
    calls: list[str] = []

    def refuse(name: str):
        def call(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"HfApi.{name} called despite bad input")

        return call

    for name in ("create_repo", "repo_info", "update_repo_settings", "create_branch", "upload_folder"):
        monkeypatch.setattr(HfApi, name, refuse(name))
    return calls


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name, _ in hub.list_folder(folder)}


def test_dry_run_writes_exactly_the_shareable_files(mlm_dir: Path, tmp_path: Path, no_network: list[str]) -> None:
    folder = hub.push_to_hub(mlm_dir, "alice/tiny-mlm", dry_run=tmp_path / "dry")
    assert folder == tmp_path / "dry"
    assert [name for name, _ in hub.list_folder(folder)] == [
        "README.md",
        "all_results.json",
        "batching_bertscratch.py",
        "config.json",
        "configuration_bertscratch.py",
        "cpu_matmul.py",
        "loss_curve.png",
        "model.safetensors",
        "modeling_bertscratch.py",
        "padding_bertscratch.py",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (folder / "model.safetensors").read_bytes() == (mlm_dir / "model.safetensors").read_bytes()
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["auto_map"] == modeling_bertscratch.family_auto_map()
    assert set(config["auto_map"]) == {"AutoConfig", *modeling_bertscratch.AUTO_CLASS_TO_MODEL}
    card = ModelCard.load(folder / "README.md")
    assert 'repo_id = "alice/tiny-mlm"' in card.text
    assert (mlm_dir / "README.md").read_text(encoding="utf-8").count(cards.REPO_PLACEHOLDER) == 1  # source untouched
    assert no_network == []
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]  # no staging folder left


def test_the_upload_leaves_out_the_options_a_tokenizer_was_loaded_with(
    mlm_dir: Path, tmp_path: Path, no_network: list[str]
) -> None:
    """A folder saved from a loaded tokenizer (is_local, local_files_only: how it was loaded, not what it is) goes up
    without them, every other setting as written."""
    source = tmp_path / "run"
    shutil.copytree(mlm_dir, source)
    config_file = source / "tokenizer_config.json"
    written = json.loads(config_file.read_text(encoding="utf-8"))
    config_file.write_text(json.dumps({**written, "is_local": True, "local_files_only": True}), encoding="utf-8")
    folder = hub.push_to_hub(source, "alice/tiny-mlm", dry_run=tmp_path / "dry")
    assert json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")) == written
    assert no_network == []


def test_the_input_columns_fine_tuning_recorded_are_pushed(
    mlm_dir: Path, tmp_path: Path, no_network: list[str]
) -> None:
    """The columns a fine-tuned model read its inputs from (config.json's `input_columns`) go up with it, for the
    commands that run it on a file from its Hub id."""
    source = tmp_path / "model"
    shutil.copytree(mlm_dir, source)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    (source / "config.json").write_text(json.dumps({**config, "input_columns": {"text": "review"}}), encoding="utf-8")
    folder = hub.push_to_hub(source, "alice/tiny-mlm", dry_run=tmp_path / "dry")
    assert json.loads((folder / "config.json").read_text(encoding="utf-8"))["input_columns"] == {"text": "review"}
    assert no_network == []


def test_missing_code_auto_map_and_card_are_completed(
    mlm_dir: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (bare / name).write_bytes((mlm_dir / name).read_bytes())
    config = json.loads((mlm_dir / "config.json").read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoModelForMaskedLM": "modeling_bertscratch.BertScratchForMaskedLM"}
    (bare / "config.json").write_text(json.dumps(config), encoding="utf-8")
    folder = hub.push_to_hub(bare, "alice/bare", dry_run=tmp_path / "up")
    assert isinstance(folder, Path)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["auto_map"] == modeling_bertscratch.family_auto_map()
    code_files = [Path(name) for name in modeling_bertscratch.code_files()]
    assert {path.name for path in code_files} == {
        "modeling_bertscratch.py",
        "batching_bertscratch.py",
        "padding_bertscratch.py",
        "cpu_matmul.py",
        "configuration_bertscratch.py",
    }
    for code_file in code_files:
        assert (folder / code_file.name).read_bytes() == code_file.read_bytes()
    card = ModelCard.load(folder / "README.md")
    assert card.data.pipeline_tag == "fill-mask"
    assert 'repo_id = "alice/bare"' in card.text
    assert "# bare\n" in card.text  # the folder by its name, not its path
    assert_no_local_path(card.text, tmp_path_factory)


# Runs in a fresh interpreter where `import hf_bertscratch` must fail: only transformers and the downloaded code.
_DOWNLOADER = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class _NoPackage(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_bertscratch":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoPackage())
    try:
        import hf_bertscratch
        sys.exit("hf_bertscratch is importable: the test would not prove anything")
    except ModuleNotFoundError:
        pass

    import torch
    import transformers

    out = {}
    for case in json.loads(sys.argv[1]):
        auto = getattr(transformers, case["auto"])
        folder, subfolder, task, text = case["folder"], case["subfolder"], case["task"], case["text"]
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, subfolder=subfolder, trust_remote_code=True)
        model = auto.from_pretrained(folder, subfolder=subfolder, trust_remote_code=True)
        with torch.no_grad():
            logits = model(**tokenizer(text, return_tensors="pt")).logits
        if subfolder:
            pipe = transformers.pipeline(task, model=model, tokenizer=tokenizer)
        else:  # the pipeline loads the folder itself, as `pipeline(task, model=repo_id)` would
            pipe = transformers.pipeline(task, model=folder, trust_remote_code=True)
        predictions = pipe(text, top_k=5) if task == "fill-mask" else pipe(text, top_k=None)
        out[case["key"]] = {"class": type(model).__module__ + "." + type(model).__name__,
                            "logits": logits.tolist(), "pipeline": predictions}
    out["hf_bertscratch_loaded"] = [name for name in sys.modules if name.startswith("hf_bertscratch")]
    print(json.dumps(out))
    """
)
_AUTO_CLASS = {"fill-mask": "AutoModelForMaskedLM", "text-classification": "AutoModelForSequenceClassification"}


def _load_without_the_package(cases: list[dict], tmp_path: Path) -> dict:
    """Run `_DOWNLOADER` on `cases` (key, folder, subfolder, task, text) in a fresh, offline interpreter that cannot
    import hf_bertscratch; return its outputs by key."""
    cases = [{**case, "auto": _AUTO_CLASS[case["task"]], "folder": str(case["folder"])} for case in cases]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), TOKENIZERS_PARALLELISM="false")
    result = subprocess.run(
        [sys.executable, "-c", _DOWNLOADER, json.dumps(cases)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Do you wish to run the custom code" not in result.stdout  # every load that needs remote code says so
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote.pop("hf_bertscratch_loaded") == []
    for key, outputs in remote.items():
        # Loaded from the downloaded code (transformers_modules), not from this package.
        assert outputs["class"].startswith("transformers_modules."), (key, outputs["class"])
    return remote


def _reference_outputs(model_dir: Path, task: str, text: str, tokenizer) -> dict:
    """Outputs of the original model, loaded through this package."""
    import transformers

    model = getattr(transformers, _AUTO_CLASS[task]).from_pretrained(model_dir).eval()
    with torch.no_grad():
        logits = model(**tokenizer(text, return_tensors="pt")).logits
    pipe = pipeline(task, model=model, tokenizer=tokenizer)
    predictions = pipe(text, top_k=5) if task == "fill-mask" else pipe(text, top_k=None)
    return {"logits": logits, "pipeline": predictions}


def _by_key(predictions: list[dict], key: str) -> dict[str, float]:
    return {prediction[key]: prediction["score"] for prediction in predictions}


def _assert_same_outputs(remote: dict, reference: dict, label_key: str) -> None:
    """The logits and the pipeline's scores of a downloaded model equal those of the local one."""
    torch.testing.assert_close(torch.tensor(remote["logits"]), reference["logits"], atol=1e-5, rtol=1e-5)
    expected, got = _by_key(reference["pipeline"], label_key), _by_key(remote["pipeline"], label_key)
    assert got.keys() == expected.keys()
    for name, score in expected.items():
        assert got[name] == pytest.approx(score, abs=1e-6)


def test_dry_run_folders_load_with_transformers_alone(mlm_dir: Path, cls_dir: Path, tokenizer, tmp_path: Path) -> None:
    mlm_up = hub.push_to_hub(mlm_dir, "alice/tiny-mlm", dry_run=tmp_path / "mlm")
    cls_up = hub.push_to_hub(cls_dir, "alice/tiny-cls", dry_run=tmp_path / "cls")
    cases = [
        {"key": "mlm", "folder": mlm_up, "subfolder": "", "task": "fill-mask", "text": FILL_MASK_TEXT},
        {"key": "cls", "folder": cls_up, "subfolder": "", "task": "text-classification", "text": CLASSIFY_TEXT},
    ]
    remote = _load_without_the_package(cases, tmp_path)
    for key, folder, task, text, label_key in (
        ("mlm", mlm_dir, "fill-mask", FILL_MASK_TEXT, "token_str"),
        ("cls", cls_dir, "text-classification", CLASSIFY_TEXT, "label"),
    ):
        _assert_same_outputs(remote[key], _reference_outputs(folder, task, text, tokenizer), label_key)
    assert set(_by_key(remote["cls"]["pipeline"], "label")) == set(LABELS.values())


def test_uploads_refuse_offline_mode_and_a_missing_token_says_how_each_command_takes_one(
    mlm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline mode fails an upload before anything is sent, and a training run's --push_to_hub before training; a
    missing token names the flag of the command at hand."""
    calls = record_hub(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ValueError, match=r"HF_HUB_OFFLINE is set: unset it, or write the upload folder without the Hub"
    ):
        hub.push_to_hub(mlm_dir, "alice/tiny")
    assert hub.push_to_hub(mlm_dir, "alice/tiny", dry_run=tmp_path / "dry").is_dir()  # a dry run needs no Hub
    training = TrainingArguments(output_dir=str(tmp_path / "run"), push_to_hub=True, hub_model_id="alice/tiny")
    with pytest.raises(ValueError, match=r"or train without --push_to_hub and upload the saved folder later"):
        hub.check_training_push(training)
    assert calls == []

    monkeypatch.delenv("HF_HUB_OFFLINE")  # online: the missing token is what stops it
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(ValueError, match=r"No Hugging Face token found: .* or pass --hub_token\.$"):
        hub.check_training_push(training)
    with pytest.raises(ValueError, match=r"or pass --token \(or use --dry_run DIR to inspect the upload"):
        hub.push_to_hub(mlm_dir, "alice/tiny")


def test_electra_upload_carries_a_loadable_generator(
    electra_dir: Path, tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_hub(monkeypatch)
    hub.push_to_hub(electra_dir, "alice/tiny-electra")
    ((_, upload),) = [call for call in calls if call[0] == "upload_folder"]
    files: dict[str, bytes] = upload["files"]
    generator = {name.removeprefix(f"{GENERATOR_FOLDER}/") for name in files if name.startswith(f"{GENERATOR_FOLDER}/")}
    assert generator == {
        "batching_bertscratch.py",
        "config.json",
        "configuration_bertscratch.py",
        "cpu_matmul.py",
        "model.safetensors",
        "modeling_bertscratch.py",
        "padding_bertscratch.py",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    assert files["generator/model.safetensors"] == (electra_dir / GENERATOR_FOLDER / "model.safetensors").read_bytes()
    assert files["model.safetensors"] == (electra_dir / "model.safetensors").read_bytes()  # the discriminator
    assert json.loads(files["generator/config.json"])["auto_map"] == modeling_bertscratch.family_auto_map()
    # An upload replaces the whole generator/ (and the weights), so no file of an earlier run's stays beside them.
    for stale in ("generator/model.safetensors", "generator/old-shard.safetensors", "generator/vocab.txt"):
        assert any(fnmatch.fnmatch(stale, pattern) for pattern in upload["delete_patterns"]), stale
    assert not any(fnmatch.fnmatch("tokenizer.json", pattern) for pattern in upload["delete_patterns"])
    card = files["README.md"].decode()
    assert 'repo_id = "alice/tiny-electra"' in card and 'subfolder="generator"' in card

    # What went up, as a clone of the repository would hold it, loads with transformers alone.
    repo = tmp_path / "repo"
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    # transformers reads remote code from the repository's root even with `subfolder=`; the generator's own copy is
    # what loads its folder once downloaded on its own, so both ways are checked.
    cases = [
        {"key": "subfolder", "folder": repo, "subfolder": GENERATOR_FOLDER},
        {"key": "folder", "folder": repo / GENERATOR_FOLDER, "subfolder": ""},
    ]
    remote = _load_without_the_package([{**c, "task": "fill-mask", "text": FILL_MASK_TEXT} for c in cases], tmp_path)
    reference = _reference_outputs(electra_dir / GENERATOR_FOLDER, "fill-mask", FILL_MASK_TEXT, tokenizer)
    for key in ("subfolder", "folder"):
        assert remote[key]["class"].endswith(".BertScratchForMaskedLM")
        _assert_same_outputs(remote[key], reference, "token_str")


def test_embedding_upload_keeps_its_sentence_transformers_pooling(tokenizer, tmp_path: Path) -> None:
    """An embedding run's folder goes up with sentence-transformers' files, so `SentenceTransformer(repo_id)` (its
    card's snippet) pools as the model was trained, not with the mean pooling it makes up for a bare encoder."""
    from sentence_transformers import SentenceTransformer

    from hf_bertscratch.embedding import write_sentence_transformers_files

    torch.manual_seed(3)
    source = tmp_path / "embedding-run"
    model = hf_bertscratch.BertScratchModel(hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer))))
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    write_sentence_transformers_files(source, "cls", max_seq_length=32, dimension=model.config.hidden_size)
    cards.write_model_card(source, "embedding", {"model_name": "embedding-run"})
    upload = hub.push_to_hub(source, "alice/tiny-embedding", dry_run=tmp_path / "dry")
    for name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        assert (upload / name).read_bytes() == (source / name).read_bytes(), name
    texts = ["a man plays a guitar .", "the movie was great and the acting was wonderful ."]
    vectors = [
        SentenceTransformer(str(folder), trust_remote_code=True, device="cpu").encode(texts, convert_to_numpy=True)
        for folder in (source, upload)
    ]
    torch.testing.assert_close(torch.tensor(vectors[1]), torch.tensor(vectors[0]))


def test_broken_generator_fails_before_any_upload(
    electra_dir: Path, tmp_path: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    folder = tmp_path / "run"
    shutil.copytree(electra_dir, folder)
    (folder / GENERATOR_FOLDER / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=f"{GENERATOR_FOLDER}' has no safetensors weights"):
        hub.push_to_hub(folder, "alice/tiny")
    assert no_network == []


def test_offline_mode_is_named_before_a_missing_token(
    mlm_dir: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[str]
) -> None:
    """With HF_HUB_OFFLINE set and no token, an upload fails on offline mode: a token would not make it work."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(ValueError, match=r"^Uploading needs the Hub, and HF_HUB_OFFLINE is set"):
        hub.push_to_hub(mlm_dir, "alice/tiny")
    training = TrainingArguments(output_dir="unused", push_to_hub=True, hub_model_id="alice/tiny")
    with pytest.raises(ValueError, match=r"^Uploading needs the Hub, and HF_HUB_OFFLINE is set"):
        hub.check_training_push(training)
    assert no_network == []


@pytest.mark.parametrize("endpoint", [None, "https://hub.example.org"])
def test_an_unreachable_hub_is_one_line_naming_its_endpoint_and_the_dry_run(
    mlm_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, endpoint: str | None
) -> None:
    """Online with no network, `bertscratch push` ends with one line naming the address it could not reach (the Hub,
    or $HF_ENDPOINT) and how to write the upload folder without it, not the bare ConnectError."""
    from huggingface_hub import constants

    try:  # huggingface_hub 2's HTTP client; 1's is httpx
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]

    from hf_bertscratch_cli.dispatch import run_command

    calls = record_hub(monkeypatch)

    def unreachable(self: HfApi, repo_id: str, **kwargs) -> str:
        calls.append(("create_repo", {"repo_id": repo_id}))
        raise httpx.ConnectError("[Errno -2] Name or service not known")

    monkeypatch.setattr(HfApi, "create_repo", unreachable)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    if endpoint is not None:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    with pytest.raises(SystemExit) as failed:
        run_command("push", [str(mlm_dir), "--repo_id", "alice/tiny"])
    assert failed.value.code == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert line.startswith(
        f"bertscratch push: error: ConnectionError: could not reach the Hub at {endpoint or 'https://huggingface.co'} "
    )
    assert "Name or service not known" in line and "--dry_run DIR" in line
    assert [name for name, _ in calls] == ["create_repo"]  # nothing was uploaded


@pytest.mark.parametrize("how", ["save_pretrained", "push_to_hub"])
def test_transformers_own_push_uploads_the_code_its_config_names(
    cls_dir: Path, tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """`model.save_pretrained(folder, push_to_hub=True, repo_id=...)` and `model.push_to_hub(repo_id)`, transformers'
    own uploads, commit the modeling code beside the config whose auto_map names it: the repository loads with
    transformers alone. (save_pretrained uploads only the files it writes after noting the folder's times, and the
    code is written before that.)"""
    from huggingface_hub import CommitInfo, RepoUrl
    from huggingface_hub.errors import EntryNotFoundError

    committed: dict[str, bytes] = {}

    def create_commit(self: HfApi, repo_id: str, operations: list, **kwargs) -> CommitInfo:
        for operation in operations:
            committed[operation.path_in_repo] = Path(operation.path_or_fileobj).read_bytes()
        url = f"https://huggingface.co/{repo_id}/commit/abc"
        return CommitInfo(commit_url=url, commit_message="", commit_description="", oid="abc")

    def no_card(*args, **kwargs):  # a new repository: transformers writes its generic card
        raise EntryNotFoundError("README.md")

    monkeypatch.setattr(
        HfApi, "create_repo", lambda self, repo_id, **kwargs: RepoUrl(f"https://huggingface.co/{repo_id}")
    )
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    monkeypatch.setattr(ModelCard, "load", no_card)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    model = hf_bertscratch.BertScratchForSequenceClassification.from_pretrained(cls_dir)
    if how == "save_pretrained":
        model.save_pretrained(tmp_path / "saved", push_to_hub=True, repo_id="alice/tiny-cls", token="hf_test")
    else:
        model.push_to_hub("alice/tiny-cls", token="hf_test")

    code = {Path(path).name for path in modeling_bertscratch.code_files()}
    assert code | {"config.json", "model.safetensors"} <= set(committed), sorted(committed)
    uploaded = tmp_path / "uploaded"
    uploaded.mkdir()
    for name, content in committed.items():
        (uploaded / name).write_bytes(content)
    tokenizer.save_pretrained(uploaded)  # pushed on its own (`tokenizer.push_to_hub`), as docs/hub.md says
    case = {"key": "cls", "folder": uploaded, "subfolder": "", "task": "text-classification", "text": CLASSIFY_TEXT}
    remote = _load_without_the_package([case], tmp_path)
    _assert_same_outputs(
        remote["cls"], _reference_outputs(cls_dir, "text-classification", CLASSIFY_TEXT, tokenizer), "label"
    )


@pytest.mark.parametrize("revision", [None, "experiment-1"])
def test_push_to_hub_uploads_exactly_the_dry_run_folder(
    mlm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, revision: str | None
) -> None:
    expected = _snapshot(hub.push_to_hub(mlm_dir, "alice/tiny-mlm", revision=revision, dry_run=tmp_path / "dry"))
    calls = record_hub(monkeypatch)
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    commit = hub.push_to_hub(mlm_dir, "alice/tiny-mlm", private=True, revision=revision, commit_message="first")

    assert commit.oid == "abc"
    recorded = dict(calls)
    assert recorded["create_repo"] == {
        "repo_id": "alice/tiny-mlm",
        "token": "hf_from_env",
        "private": True,
        "repo_type": "model",
        "exist_ok": True,
    }
    assert ("create_branch" in recorded) == (revision is not None)
    upload = recorded["upload_folder"]
    assert upload["files"] == expected
    assert (upload["repo_id"], upload["revision"], upload["commit_message"]) == ("alice/tiny-mlm", revision, "first")
    assert upload["token"] == "hf_from_env"
    if revision:
        assert recorded["create_branch"] == {
            "repo_id": "alice/tiny-mlm",
            "branch": revision,
            "repo_type": "model",
            "exist_ok": True,
            "token": "hf_from_env",
        }
        assert f'revision = "{revision}"'.encode() in upload["files"]["README.md"]


@pytest.mark.parametrize("base", ["local", "hub"])
def test_uploaded_results_name_the_base_model_as_the_card_does(
    mlm_dir: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    base: str,
) -> None:
    """A fine-tuning run records `model_name_or_path` as given, an absolute path of the machine that trained it; the
    upload names it by its Hub id or its folder's name alone, and the run's own files keep the path."""
    run = tmp_path / "run"
    shutil.copytree(mlm_dir, run)
    source = str(mlm_dir.resolve()) if base == "local" else "google-bert/bert-base-uncased"
    kept = {}
    for name in ("all_results.json", "eval_results.json", "train_results.json"):
        text = json.dumps({"eval_accuracy": 0.5, "model_name_or_path": source}, indent=2) + "\n"
        (run / name).write_text(text, encoding="utf-8")
        kept[name] = text
    calls = record_hub(monkeypatch)
    hub.push_to_hub(run, "alice/tiny", token="hf_x")
    files = dict(calls)["upload_folder"]["files"]
    expected = mlm_dir.name if base == "local" else source
    for name, text in kept.items():
        assert json.loads(files[name]) == {"eval_accuracy": 0.5, "model_name_or_path": expected}
        assert_no_local_path(files[name], tmp_path_factory)
        assert (run / name).read_text(encoding="utf-8") == text


def test_results_that_are_not_json_fail_before_any_upload(
    mlm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(mlm_dir, run)
    (run / "eval_results.json").write_text("{'eval_accuracy': 0.5}", encoding="utf-8")
    calls = record_hub(monkeypatch)
    with pytest.raises(ValueError, match=r"eval_results.json' is not valid JSON \(.*\); expected a run's metrics\."):
        hub.push_to_hub(run, "alice/tiny", token="hf_x")
    assert calls == []


@pytest.mark.parametrize(
    ("existing", "private", "calls_before_upload", "private_after"),
    [
        # asked for private: a new repository is created private, an existing public one is made private first
        (None, True, ["create_repo", "repo_info"], True),
        (False, True, ["create_repo", "repo_info", "update_repo_settings"], True),
        (True, True, ["create_repo", "repo_info"], True),
        # not asked: the visibility is left to the Hub (the owner's default), an existing private repo stays private
        (None, False, ["create_repo"], False),
        (False, False, ["create_repo"], False),
        (True, False, ["create_repo"], True),
    ],
)
def test_private_holds_for_an_existing_repository_and_is_never_undone(
    mlm_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    existing: bool | None,
    private: bool,
    calls_before_upload: list[str],
    private_after: bool,
) -> None:
    """`create_repo(exist_ok=True, private=True)` leaves an existing public repository public: asked for private, the
    push makes it private before anything is uploaded; not asked, it never sends a visibility at all."""
    repos = {} if existing is None else {"alice/tiny": existing}
    calls = record_hub(monkeypatch, repos)
    with caplog.at_level("INFO", logger="hf_bertscratch.hub"):
        hub.push_to_hub(mlm_dir, "alice/tiny", private=private)
    assert [name for name, _ in calls] == [*calls_before_upload, "upload_folder"]
    assert repos == {"alice/tiny": private_after}
    recorded = dict(calls)
    assert recorded["create_repo"]["private"] is (True if private else None)
    if "update_repo_settings" in recorded:
        assert recorded["update_repo_settings"] == {
            "repo_id": "alice/tiny",
            "private": True,
            "repo_type": "model",
            "token": "hf_test",
        }
    made_private = [record.getMessage() for record in caplog.records if "private" in record.getMessage()]
    expected = ["alice/tiny is public: making it private, as asked, before uploading."]
    assert made_private == (expected if "update_repo_settings" in calls_before_upload else [])


def _break(folder: Path, mlm_dir: Path, how: str) -> Path:
    """A copy of the MLM run with one thing wrong."""
    folder.mkdir()
    for path in mlm_dir.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    if how == "no_config":
        (folder / "config.json").unlink()
    elif how == "other_model_type":
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert"}), encoding="utf-8")
    elif how == "no_safetensors":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    elif how == "no_tokenizer":
        (folder / "tokenizer.json").unlink()
    elif how == "no_tokenizer_config":
        (folder / "tokenizer_config.json").unlink()
    elif how == "bad_card_metadata":
        (folder / "README.md").write_text("---\nlicense: [mit\n---\n# my model\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("no_config", "no config.json"),
        ("other_model_type", "type 'bert', expected 'bertscratch' .* Convert it first: bertscratch convert .*broken"),
        ("no_safetensors", "pytorch_model.bin"),
        ("no_tokenizer", "tokenizer.json or vocab.txt"),
        ("no_tokenizer_config", "tokenizer_config.json"),
        ("bad_card_metadata", "broken/README.md' has a metadata block the Hub cannot read"),
    ],
)
def test_bad_model_folder_fails_before_any_upload(
    mlm_dir: Path, tmp_path: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch, how: str, message: str
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    folder = _break(tmp_path / "broken", mlm_dir, how)
    with pytest.raises(ValueError, match=message):
        hub.push_to_hub(folder, "alice/tiny")
    with pytest.raises(ValueError, match=message):
        hub.push_to_hub(folder, "alice/tiny", dry_run=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()
    assert no_network == []


def test_missing_folder_fails(tmp_path: Path, no_network: list[str]) -> None:
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        hub.push_to_hub(tmp_path / "does-not-exist", "alice/tiny", dry_run=tmp_path / "dry")


@pytest.mark.parametrize(
    "repo_id", ["tiny-mlm", "alice/", "/tiny", "alice/tiny/extra", "alice/tiny mlm", "alice/--x", ""]
)
def test_bad_repo_id_fails_before_any_upload(
    mlm_dir: Path, tmp_path: Path, no_network: list[str], repo_id: str
) -> None:
    with pytest.raises(ValueError, match="repo_id"):
        hub.push_to_hub(mlm_dir, repo_id, token="hf_x")
    assert no_network == []


@pytest.mark.parametrize("revision", ["v 1", "a..b", "x~1", "feature/", "-v1", ".hidden", "v1.lock", "a:b"])
def test_bad_revision_fails_before_any_upload_or_training(
    mlm_dir: Path, tmp_path: Path, no_network: list[str], revision: str
) -> None:
    """A branch name git refuses would fail at create_branch, after the repo is created (after training, for a
    run's --hub_revision): it is refused first, by name."""
    with pytest.raises(ValueError, match=f"revision {revision!r} is not a branch name"):
        hub.push_to_hub(mlm_dir, "alice/tiny", revision=revision, token="hf_x")
    with pytest.raises(ValueError, match=f"revision {revision!r} is not a branch name"):
        hub.push_to_hub(mlm_dir, "alice/tiny", revision=revision, dry_run=tmp_path / "dry")
    training = TrainingArguments(
        output_dir=str(tmp_path / "run"), push_to_hub=True, hub_model_id="alice/tiny", hub_revision=revision
    )
    with pytest.raises(ValueError, match=f"revision {revision!r} is not a branch name"):
        hub.check_training_push(training)
    assert no_network == []
    assert hub.check_revision("experiments/run-2") == "experiments/run-2"


def test_no_token_fails_before_any_upload(
    mlm_dir: Path, tmp_path: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: offline mode would be named first
    monkeypatch.setattr(hub, "get_token", lambda: None)  # also ignore any saved `hf auth login` token
    with pytest.raises(ValueError, match="HF_TOKEN"):
        hub.push_to_hub(mlm_dir, "alice/tiny")
    assert no_network == []


def test_dry_run_refuses_a_non_empty_folder(mlm_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "dry"
    target.mkdir()
    (target / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="not empty"):
        hub.push_to_hub(mlm_dir, "alice/tiny", dry_run=target)
    assert [path.name for path in target.iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match="outside the model folder"):
        hub.prepare_upload_folder(mlm_dir, mlm_dir / "upload")


def test_main_dry_run_lists_the_folder(mlm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    hub.main([str(mlm_dir), "--repo_id", "alice/tiny-mlm", "--dry_run", str(tmp_path / "dry")])
    out = capsys.readouterr().out
    assert "alice/tiny-mlm" in out
    for name, size in hub.list_folder(tmp_path / "dry"):
        assert name in out and f"{size:,d}" in out
    # The same arguments from a single .json file.
    args_file = tmp_path / "args.json"
    args_file.write_text(
        json.dumps({"model_dir": str(mlm_dir), "repo_id": "alice/tiny-mlm", "dry_run": str(tmp_path / "dry2")}),
        encoding="utf-8",
    )
    hub.main([str(args_file)])
    assert _snapshot(tmp_path / "dry2") == _snapshot(tmp_path / "dry")


def test_main_requires_a_repo_id(mlm_dir: Path) -> None:
    with pytest.raises(ValueError, match="--repo_id"):
        hub.main([str(mlm_dir)])


def test_training_push_is_checked_before_training_and_uploads_the_run(
    mlm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[str]
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the push is checked as with the Hub reachable
    args = TrainingArguments(output_dir=str(mlm_dir), push_to_hub=True, hub_token="hf_x", report_to=[])
    with pytest.raises(ValueError, match="--hub_model_id"):
        hub.check_training_push(args)
    args.hub_model_id = "no-namespace"
    with pytest.raises(ValueError, match="repo_id"):
        hub.check_training_push(args)
    assert no_network == []

    args.hub_model_id, args.hub_private_repo, args.hub_revision = "alice/run", True, "v2"
    seen: dict = {}
    monkeypatch.setattr(hub, "push_to_hub", lambda model_dir, **kwargs: seen.update(model_dir=model_dir, **kwargs))
    hub.push_training_output(args)
    assert seen == {
        "model_dir": str(mlm_dir),
        "repo_id": "alice/run",
        "private": True,
        "revision": "v2",
        "commit_message": "End of training",
        "token": "hf_x",
    }
    seen.clear()
    hub.push_training_output(TrainingArguments(output_dir=str(tmp_path), report_to=[]))
    assert seen == {}


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_a_hub_strategy_that_pushes_during_the_run_is_refused_as_the_arguments_are_read(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers' every_save, checkpoint and all_checkpoints promise pushes while training, which --push_to_hub
    does not make (it uploads the finished folder once, at the end, and the Trainer's own push stays off): with
    --push_to_hub each is refused before anything runs, in one line naming it and the value taken; end, the default,
    is taken, and without --push_to_hub the flag pushes nothing whatever its value."""
    from hf_bertscratch.finetuning_arguments import parse_args as parse_finetuning_args
    from hf_bertscratch.pretraining_arguments import parse_args as parse_pretraining_args

    calls = record_hub(monkeypatch)
    parse, argv = {
        "pretrain": (parse_pretraining_args, ["--output_dir", str(tmp_path / "run")]),
        "finetune": (
            parse_finetuning_args,
            ["--model_name_or_path", "m", "--task", "sst2", "--output_dir", str(tmp_path / "run")],
        ),
    }[command]
    push = ["--push_to_hub", "true", "--hub_model_id", "alice/run"]
    for strategy in ("every_save", "checkpoint", "all_checkpoints"):
        with pytest.raises(ValueError) as refused:
            parse([*argv, *push, "--hub_strategy", strategy])
        assert str(refused.value) == (
            f"--hub_strategy {strategy!r} is not what --push_to_hub does here: it uploads the finished output folder "
            "once, at the end of the run, and pushes nothing during it; expected 'end' (the default)."
        )
    for given in ([], ["--hub_strategy", "end"]):
        training = parse([*argv, *push, *given])[-1]
        assert training.hub_strategy == "end" and hub.wants_push(training) and not training.push_to_hub
    training = parse([*argv, "--hub_strategy", "checkpoint"])[-1]
    assert not hub.wants_push(training) and not training.push_to_hub
    assert calls == [] and not (tmp_path / "run").exists()


@pytest.mark.parametrize("saved_first", [False, True], ids=["bare-output-dir", "model-saved-into-it-first"])
def test_a_plain_trainers_pushes_while_it_trains_carry_the_code_only_when_the_model_was_saved_first(
    tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_first: bool
) -> None:
    """transformers' own Trainer (`TrainingArguments(push_to_hub=True)`, its default `hub_strategy="every_save"`)
    pushes its output folder at each save, having copied into it the checkpoint's config.json and weights alone
    (`Trainer._push_from_checkpoint`): the config's auto_map names code files the push lacks, so the repository does
    not load with `trust_remote_code` until the final `trainer.push_to_hub()`. A model saved into the output folder
    before training (docs/hub.md) leaves its code there, and each push carries it and loads without the package."""
    from transformers import Trainer

    calls = record_hub(monkeypatch)

    def no_model_info(*args, **kwargs):  # transformers' model card would read a base model's license from the Hub
        raise AssertionError("HfApi.model_info called")

    monkeypatch.setattr(HfApi, "model_info", no_model_info)
    torch.manual_seed(4)
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)), id2label=LABELS)
    model = hf_bertscratch.BertScratchForSequenceClassification(config)
    output = tmp_path / "output"
    if saved_first:
        model.save_pretrained(output)
    args = TrainingArguments(
        output_dir=str(output),
        push_to_hub=True,
        hub_model_id="alice/tiny-cls",
        save_strategy="steps",
        save_steps=1,
        max_steps=2,
        per_device_train_batch_size=2,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    assert args.hub_strategy == "every_save"
    examples = [{**tokenizer(CLASSIFY_TEXT), "labels": label} for label in (0, 1, 1, 0)]
    trainer = Trainer(model=model, args=args, train_dataset=examples, processing_class=tokenizer)
    trainer.train()

    pushes = [call["files"] for name, call in calls if name == "upload_folder"]
    assert [call["commit_message"] for name, call in calls if name == "upload_folder"] == [
        "Training in progress, step 1",
        "Training in progress, step 2",
    ]
    code = {Path(path).name for path in modeling_bertscratch.code_files()}
    for files in pushes:
        auto_map = json.loads(files["config.json"])["auto_map"]
        named = {f"{reference.split('.')[0]}.py" for reference in auto_map.values()}
        assert named and named <= code
        assert (code <= set(files)) if saved_first else not (code & set(files)), sorted(files)
    trainer.push_to_hub()  # the final push saves the model into the output folder: its code goes up
    (final,) = [call["files"] for name, call in calls if name == "upload_folder"][len(pushes) :]
    assert code <= set(final)
    if saved_first:
        pushed = tmp_path / "pushed"
        pushed.mkdir()
        for name, content in pushes[-1].items():
            (pushed / name).write_bytes(content)
        case = {"key": "cls", "folder": pushed, "subfolder": "", "task": "text-classification", "text": CLASSIFY_TEXT}
        remote = _load_without_the_package([case], tmp_path)
        with torch.no_grad():
            logits = trainer.model.eval()(**tokenizer(CLASSIFY_TEXT, return_tensors="pt")).logits
        torch.testing.assert_close(torch.tensor(remote["cls"]["logits"]), logits)
