"""Tests for hf_bertscratch.onnx_evaluation (`bertscratch evaluate-onnx`): on tiny fine-tuned-looking models and a
tiny data folder, the fp32 export scores what PyTorch scores through fine-tuning's own features and metrics, the int8
export is scored beside them, and evaluation.json records the run; every shape runs, and bad requests fail before
any export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import hf_bertscratch
from hf_bertscratch import onnx_evaluation
from hf_bertscratch.tasks import CONLL2003_LABELS
from hf_bertscratch_cli import dispatch as cli

from conftest import CORPUS, tiny_config_kwargs
from test_onnx import int8_matmul_weights

pytest.importorskip("onnxruntime", reason="the ONNX tests need onnxruntime (pip install -e '.[onnx]')")
pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript (pip install -e '.[onnx]')")

BACKENDS = ["pytorch", "onnx fp32", "onnx int8"]
# Sentences of the conftest vocabulary with a CoNLL-2003 tag per word.
TAGGED = [
    [("paris", "B-LOC"), ("is", "O"), ("the", "O"), ("capital", "O"), ("of", "O"), ("france", "B-LOC")],
    [("the", "O"), ("movie", "O"), ("was", "O"), ("great", "O"), ("in", "O"), ("london", "B-LOC")],
    [("berlin", "B-ORG"), ("city", "I-ORG"), ("is", "O"), ("big", "O")],
    [("the", "O"), ("actor", "O"), ("from", "O"), ("rome", "B-LOC"), ("and", "O"), ("madrid", "B-MISC")],
]


pytestmark = pytest.mark.usefixtures("one_thread")


def write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> None:
    blocks = ["-DOCSTART- -X- -X- O"] + ["\n".join(f"{word} NN B-NP {tag}" for word, tag in s) for s in sentences]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder laid out as ../shared/data: sst2/{train,dev}.tsv and conll2003/{train,valid,test}.txt."""
    root = tmp_path_factory.mktemp("data")
    (root / "sst2").mkdir()
    rows = [f"{sentence}\t{i % 2}" for i, sentence in enumerate(CORPUS * 2)]  # 24 examples, both labels
    for name, lines in (("train.tsv", rows[:8]), ("dev.tsv", rows)):
        (root / "sst2" / name).write_text("sentence\tlabel\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (root / "conll2003").mkdir()
    for name, sentences in (("train.txt", TAGGED), ("valid.txt", TAGGED * 3), ("test.txt", TAGGED[::-1] * 2)):
        write_conll(root / "conll2003" / name, sentences)
    return root


def save_model(model_class: type, tokenizer: object, folder: Path, **config: object) -> Path:
    """A tiny model of `model_class` saved with the tokenizer; initializer_range 0.1 spreads its outputs about as a
    trained model's are (see tests/test_onnx.py's int8 tests), where int8 stays close to fp32."""
    torch.manual_seed(0)
    kwargs = dict(tiny_config_kwargs(len(tokenizer)), initializer_range=0.1, **config)
    model_class(hf_bertscratch.BertScratchConfig(**kwargs)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def classifier_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    labels = {"id2label": {0: "negative", 1: "positive"}}
    return save_model(
        hf_bertscratch.BertScratchForSequenceClassification, tokenizer, tmp_path_factory.mktemp("sst2"), **labels
    )


@pytest.fixture(scope="module")
def tagger_dir(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    labels = {"id2label": dict(enumerate(CONLL2003_LABELS))}
    return save_model(
        hf_bertscratch.BertScratchForTokenClassification, tokenizer, tmp_path_factory.mktemp("conll"), **labels
    )


def table_rows(printed: str) -> dict[str, dict[str, str]]:
    """The rows of the one Markdown table in `printed`: backend -> column -> cell."""
    lines = [line for line in printed.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines]
    return {row[0]: dict(zip(cells[0], row)) for row in cells[2:]}


def evaluate(data_dir: Path, model: Path, *argv: str) -> None:
    """Evaluate `model`; PyTorch's bf16 row only where `argv` asks for it (by default it depends on the CPU)."""
    bf16 = [] if "--bf16" in argv else ["--bf16", "false"]
    onnx_evaluation.main(
        [
            "--model",
            str(model),
            "--data_dir",
            str(data_dir),
            "--batch_size",
            "8",
            "--max_seq_length",
            "32",
            *bf16,
            *argv,
        ]
    )


def assert_fp32_scores_what_pytorch_scores(split: dict) -> None:
    """fp32 ONNX: PyTorch's metrics within float rounding, every top-1 the same; int8: every metric reported."""
    backends = {result["backend"]: result for result in split["backends"]}
    assert list(backends) == BACKENDS
    pytorch, fp32, int8 = (backends[name] for name in BACKENDS)
    assert fp32["metrics"].keys() == pytorch["metrics"].keys() == int8["metrics"].keys()
    assert fp32["metrics"] == pytest.approx(pytorch["metrics"], abs=1e-6)
    assert all(abs(difference) <= 1e-6 for difference in fp32["differences"].values())
    assert pytorch["differences"] == dict.fromkeys(pytorch["metrics"], 0.0)
    for name, value in int8["metrics"].items():
        assert int8["differences"][name] == pytest.approx(value - pytorch["metrics"][name])
    assert all(result["tokens_per_s"] > 0 and result["seconds"] > 0 for result in backends.values())


def test_sst2_fp32_scores_like_pytorch_and_int8_is_reported(capsys, data_dir, classifier_dir, tmp_path) -> None:
    out = tmp_path / "eval"
    evaluate(data_dir, classifier_dir, "--task", "sst2", "--output_dir", str(out))
    record = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert record["command"].endswith(f"--task sst2 --output_dir {out}")
    assert record["date"][:4].isdigit() and record["cpu"] and record["hardware"]
    assert all(record["versions"][name] for name in ("torch", "transformers", "onnxruntime", "hf-bertscratch"))
    assert (record["task"], record["task_type"], record["main_metric"]) == ("sst2", "classification", "accuracy")
    # the record names the int8 weights' bits the export used: 7 bits put a channel's largest weight at 64, 8 at 127
    weights = int8_matmul_weights(out / "int8" / "model.onnx")
    largest = {int(np.abs(weight.astype(np.int32)).max()) for weight in weights}
    assert weights and largest == {{7: 64, 8: 127}[record["int8_weight_bits"]]}
    assert list(record["splits"]) == ["eval"]  # SST-2 has no test split
    split = record["splits"]["eval"]
    assert (split["dataset_split"], split["examples"], split["features"]) == ("validation", 24, 24)
    assert_fp32_scores_what_pytorch_scores(split)
    agreements = [result["agreement"] for result in split["backends"]]
    assert agreements[:2] == [None, 1.0] and 0.5 <= agreements[2] <= 1.0
    assert {"accuracy", "f1", "matthews_correlation"} <= split["backends"][2]["metrics"].keys()
    assert (out / "fp32" / "model.onnx").is_file() and (out / "int8" / "model.onnx").is_file()

    printed = capsys.readouterr().out
    assert "| backend | accuracy | f1 | matthews_correlation | Δ accuracy | top-1 agreement | tokens/s |" in printed
    assert [line.split("|")[1].strip() for line in printed.splitlines() if line.startswith("| onnx")] == BACKENDS[1:]
    assert "| onnx fp32 |" in printed and "| +0.0000 | 100.00% |" in printed


def test_bf16_row_runs_the_same_model_under_bf16_autocast(data_dir, classifier_dir, tmp_path) -> None:
    evaluate(data_dir, classifier_dir, "--task", "sst2", "--output_dir", str(tmp_path), "--bf16", "true")
    split = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))["splits"]["eval"]
    backends = {result["backend"]: result for result in split["backends"]}
    assert list(backends) == ["pytorch", "pytorch bf16", *BACKENDS[1:]]
    bf16, pytorch = backends["pytorch bf16"], backends["pytorch"]
    assert bf16["metrics"].keys() == pytorch["metrics"].keys()
    for name, value in bf16["metrics"].items():
        assert bf16["differences"][name] == pytest.approx(value - pytorch["metrics"][name])
    assert 0.5 <= bf16["agreement"] <= 1.0
    # The row's outputs are the model's under torch.autocast: products in bf16, so near fp32's but not equal to it.
    model = AutoModelForSequenceClassification.from_pretrained(classifier_dir).eval()
    inputs = AutoTokenizer.from_pretrained(classifier_dir)(CORPUS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        fp32 = model(**inputs).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = model(**inputs).logits.float()
        wrapped = onnx_evaluation.Bf16Autocast(model)(**inputs).logits.float()
    assert torch.equal(wrapped, expected)
    assert 0 < (wrapped - fp32).abs().max() < 0.05 * fp32.abs().max()


def test_conll2003_scores_eval_and_test_splits(data_dir, tagger_dir, tmp_path) -> None:
    evaluate(data_dir, tagger_dir, "--task", "conll2003", "--output_dir", str(tmp_path), "--max_eval_samples", "10")
    record = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    assert (record["main_metric"], list(record["splits"])) == ("overall_f1", ["eval", "test"])
    for role, split in record["splits"].items():
        assert (split["dataset_split"], split["examples"]) == {"eval": ("validation", 10), "test": ("test", 8)}[role]
        assert_fp32_scores_what_pytorch_scores(split)
        assert [result["agreement"] for result in split["backends"]][:2] == [None, 1.0]
        assert {"overall_f1", "overall_precision", "overall_recall"} <= split["backends"][2]["metrics"].keys()


@pytest.fixture(scope="module")
def own_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's own files: scored sentence pairs (sts.tsv) and extractive questions (qa.jsonl), 12 rows each."""
    root = tmp_path_factory.mktemp("own")
    pairs = [f"{CORPUS[i]}\t{CORPUS[(i + 1) % len(CORPUS)]}\t{i * 5 / 11:.2f}" for i in range(len(CORPUS))]
    (root / "sts.tsv").write_text("sentence1\tsentence2\tlabel\n" + "\n".join(pairs) + "\n", encoding="utf-8")
    rows = []
    for i, sentence in enumerate(CORPUS):
        context = f"{sentence} {CORPUS[(i + 3) % len(CORPUS)]}"  # two sentences, answered by the first's first word
        answer = sentence.split()[0]
        question = f"what is {CORPUS[(i + 5) % len(CORPUS)].split()[-2]} ?"
        answers = {"text": [answer], "answer_start": [0]}
        rows.append(json.dumps({"id": f"q{i}", "question": question, "context": context, "answers": answers}))
    (root / "qa.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


# Shape -> (model class, config, flags naming the data beside --train_file/--validation_file, the data file).
OWN_TASKS = {
    "regression": (
        hf_bertscratch.BertScratchForSequenceClassification,
        {"num_labels": 1, "problem_type": "regression", "id2label": {0: "score"}},
        ["--text_column", "sentence1", "--text_pair_column", "sentence2"],
        "sts.tsv",
    ),
    "question-answering": (
        hf_bertscratch.BertScratchForQuestionAnswering,
        {},
        ["--doc_stride", "8"],  # 32-token windows of a ~20-token context: some questions take two windows
        "qa.jsonl",
    ),
}


@pytest.mark.parametrize("shape", list(OWN_TASKS))
def test_regression_and_question_answering_of_own_data(shape, capsys, own_data, tokenizer, tmp_path) -> None:
    """No --output_dir: the exports go to a temporary folder and the printed table is the result."""
    model_class, config, flags, data = OWN_TASKS[shape]
    model = save_model(model_class, tokenizer, tmp_path / "model", **config)
    files = ["--train_file", str(own_data / data), "--validation_file", str(own_data / data)]
    evaluate(own_data, model, "--task_type", shape, *files, *flags)
    printed = capsys.readouterr().out
    main = {"regression": "spearmanr", "question-answering": "f1"}[shape]
    rows = table_rows(printed)
    assert list(rows) == BACKENDS
    pytorch, fp32, int8 = rows.values()
    assert list(pytorch)[:2] == ["backend", main]
    assert fp32[main] == pytorch[main] and fp32[f"Δ {main}"] == "+0.0000"
    assert float(int8[f"Δ {main}"]) == pytest.approx(float(int8[main]) - float(pytorch[main]), abs=2e-4)
    assert fp32["top-1 agreement"] == int8["top-1 agreement"] == ""  # no top-1 to agree on
    assert "evaluation.json" not in printed


@pytest.fixture
def no_export(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_evaluation, "export_backends", lambda *args: pytest.fail("exported"))


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--task", "conll2003"], r"token-classification needs one of the heads \*ForTokenClassification"),
        (["--task", "sst2", "--split", "test"], r"The data has no test split \(it has \['eval'\]\)"),
        (["--task", "sst2", "--max_seq_length", "65"], "exceeds the model's max_position_embeddings 64"),
        (["--task", "sst2", "--batch_size", "0"], "--batch_size must be at least 1"),
    ],
)
def test_bad_requests_fail_before_any_export(no_export, data_dir, classifier_dir, argv, match) -> None:
    with pytest.raises(ValueError, match=match):
        evaluate(data_dir, classifier_dir, *argv)


def test_the_test_split_chosen_on_is_scored_as_the_eval_split(no_export, data_dir, classifier_dir) -> None:
    """--eval_split test makes the test file the eval split, scored once (as fine-tuning scores it): --split test
    names that, and asks for the eval split instead."""
    test = str(data_dir / "sst2" / "dev.tsv")
    with pytest.raises(ValueError, match=r"^The test split is the eval split here \(--eval_split test\), scored once"):
        evaluate(
            data_dir, classifier_dir, "--task", "sst2", "--test_file", test, "--eval_split", "test", "--split", "test"
        )


def test_a_test_file_without_labels_is_refused(no_export, data_dir, classifier_dir, tmp_path) -> None:
    """Fine-tuning predicts a test split without labels; evaluate-onnx scores every split, so it refuses one."""
    test = tmp_path / "test.tsv"
    test.write_text("sentence\na fine film\n", encoding="utf-8")
    files = [f"--{split}_file" for split in ("train", "validation", "test")]
    paths = [data_dir / "sst2" / "train.tsv", data_dir / "sst2" / "dev.tsv", test]
    with pytest.raises(ValueError, match=r"^The test split has no labels \(no 'label' column, or an empty one\)"):
        evaluate(data_dir, classifier_dir, "--task", "sst2", *[str(a) for pair in zip(files, paths) for a in pair])


def test_a_datasets_own_test_split_without_labels_is_left_out(data_dir, classifier_dir, tmp_path) -> None:
    """A dataset of one's own whose test split has its labels hidden (-1, as the Hub's GLUE test splits have them),
    which fine-tuning predicts: evaluate-onnx scores the eval split alone, and refuses the test split asked for."""
    import datasets

    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["negative", "positive"])}
    )
    texts = ["the movie was great", "the film was bad", "a fine film"]
    datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict({"text": texts, "label": labels}, features=features)
            for split, labels in (("train", [1, 0, 1]), ("validation", [1, 0, 1]), ("test", [-1, -1, -1]))
        }
    ).save_to_disk(str(tmp_path / "own"))
    flags = ["--model", str(classifier_dir), "--dataset_name", str(tmp_path / "own"), "--max_seq_length", "32"]
    args, data_args = onnx_evaluation.parse_args(flags)
    task = onnx_evaluation.check_arguments(args, data_args)
    _, raw, features_of = onnx_evaluation.load_split_features(args, data_args, task, str(classifier_dir))
    assert list(raw) == list(features_of) == ["eval"]
    args, data_args = onnx_evaluation.parse_args([*flags, "--split", "test"])
    with pytest.raises(ValueError, match=r"^The test split has no labels \(no 'label' column, or an empty one\)"):
        onnx_evaluation.load_split_features(args, data_args, onnx_evaluation.check_arguments(args, data_args), "m")


def test_a_model_of_other_labels_is_refused(no_export, data_dir, tokenizer, tmp_path) -> None:
    labels = {"id2label": {0: "negative", 1: "neutral", 2: "positive"}}
    model = save_model(hf_bertscratch.BertScratchForSequenceClassification, tokenizer, tmp_path, **labels)
    with pytest.raises(
        ValueError, match=r"has 3 outputs, but the classification task has 2 \['negative', 'positive'\]"
    ):
        evaluate(data_dir, model, "--task", "sst2")


def test_a_model_saved_without_its_tokenizer_is_refused_with_what_to_do(no_export, data_dir, tmp_path) -> None:
    """evaluate-onnx reads and exports the tokenizer saved with the model (it has no --tokenizer_name flag to name
    another), so the error says to save it there."""
    torch.manual_seed(0)
    labels = {"id2label": {0: "negative", 1: "positive"}}
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(CORPUS) + 100), **labels)
    hf_bertscratch.BertScratchForSequenceClassification(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"holds no tokenizer.*save the tokenizer it was fine-tuned with in") as error:
        evaluate(data_dir, tmp_path, "--task", "sst2")
    assert "--tokenizer_name" not in str(error.value)


def test_output_dir_is_not_overwritten(no_export, data_dir, classifier_dir, tmp_path) -> None:
    (tmp_path / "evaluation.json").write_text("{}", encoding="utf-8")
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        evaluate(data_dir, classifier_dir, "--task", "sst2", "--output_dir", str(tmp_path))


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_file_as_output_dir_is_refused(no_export, data_dir, classifier_dir, tmp_path, overwrite) -> None:
    """A file named as --output_dir is no folder to write into, --overwrite or not (it replaces exports and results
    in a folder, not a file)."""
    output = tmp_path / "results.txt"
    output.write_text("notes\n", encoding="utf-8")
    with pytest.raises(NotADirectoryError, match=r"^--output_dir '.*results.txt' is a file: expected a folder"):
        evaluate(data_dir, classifier_dir, "--task", "sst2", "--output_dir", str(output), *overwrite)
    assert output.read_text(encoding="utf-8") == "notes\n"


def test_cli_command(capsys, data_dir, classifier_dir) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["evaluate-onnx", "--help"])
    assert exit_info.value.code == 0 and "--max_eval_samples" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["evaluate-onnx", "--model", str(classifier_dir), "--task", "sst2", "--split", "dev"])
    assert "invalid choice: 'dev'" in capsys.readouterr().err
