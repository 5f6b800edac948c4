"""The `bertscratch` front door's refusals that come before torch loads: each in one line, within seconds, naming what
is wrong in the words the library would use after loading."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs the front door on the command line after `-c`, exits with its status; fails where torch was imported.
FRONT_DOOR = (
    "import sys, hf_bertscratch_cli\n"
    "try:\n    hf_bertscratch_cli.main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
    "assert 'torch' not in sys.modules\nsys.exit(code)\n"
)


def front_door(folder: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`bertscratch ARGV` run in `folder` by the front door alone (its checks refuse the command, or torch would load),
    within seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", FRONT_DOOR, *argv], capture_output=True, text=True, check=False, cwd=folder, env=env
    )
    assert time.monotonic() - started < 5, done.stderr
    return done


def model_folder(path: Path, **config: object) -> Path:
    """A model folder whose config.json holds `config`."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.fixture
def reviews(tmp_path: Path) -> Path:
    """A folder with a model ("model") and a training file of reviews whose columns are not the default ones."""
    model_folder(tmp_path / "model", model_type="bertscratch", max_position_embeddings=512)
    (tmp_path / "train.csv").write_text("review,sentiment\nthe cat sat ,neg\na fine film ,pos\n")
    return tmp_path


def test_a_mistyped_flag_is_named_before_the_columns_its_value_would_name(reviews: Path) -> None:
    """`--label_col sentiment` is a mistyped --label_column: its error names the flag, not the 'label' column the
    file lacks (which the right flag would have named)."""
    done = front_door(
        reviews, "finetune", "--model_name_or_path", "model", "--train_file", "train.csv",
        "--text_column", "review", "--label_col", "sentiment", "--output_dir", "out",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "bertscratch finetune: error: unrecognized arguments: --label_col sentiment; did you mean '--label_column'? "
        "(see bertscratch finetune --help)\n"
    )


def test_a_missing_model_or_file_is_still_named_before_a_mistyped_flag(reviews: Path) -> None:
    """What the command reads is not there: that is the error, whatever flag is mistyped beside it."""
    done = front_door(
        reviews, "finetune", "--model_name_or_path", "model", "--train_file", "nowhere.csv", "--max_step", "3",
        "--output_dir", "out",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "bertscratch finetune: error: FileNotFoundError: The train file 'nowhere.csv' (--train_file) does not exist.\n"
    )


@pytest.mark.parametrize("command", ["finetune", "classify", "convert", "pretrain"])
def test_a_model_of_another_architecture_is_refused_by_its_model_type(tmp_path: Path, command: str) -> None:
    """A folder whose config.json names a model_type BertScratch neither is nor converts is refused in one short
    line naming the model_type and what is accepted, before torch loads (and its warnings): pretraining, which
    continues a BertScratch model, too."""
    model_folder(tmp_path / "gpt2", model_type="gpt2", architectures=["GPT2LMHeadModel"], n_positions=1024)
    argv = {
        "finetune": ["--model_name_or_path", "gpt2", "--task", "sst2", "--output_dir", "out"],
        "pretrain": ["--model_name_or_path", "gpt2", "--output_dir", "out"],
        "classify": ["gpt2", "a fine film"],
        "convert": ["gpt2", "converted"],
    }[command]
    done = front_door(tmp_path, command, *argv)
    assert done.returncode == 1
    assert done.stderr == f"bertscratch {command}: error: ValueError: {GPT2_REFUSED}\n"


# The one line a model of another architecture is refused with, at the front door and by the library alike.
GPT2_REFUSED = (
    "gpt2 holds a checkpoint of model_type 'gpt2' (GPT2LMHeadModel); expected 'bertscratch', or transformers' 'bert' "
    "or 'electra' (an ELECTRA discriminator), which become BertScratch with the same weights."
)


def test_the_library_refuses_another_architecture_in_the_front_doors_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Reached from Python, past the front door, the library refuses the same folder in the same line."""
    from transformers import GPT2Config

    from hf_bertscratch.convert import family_checkpoint

    GPT2Config(n_embd=32, n_layer=1, n_head=2, architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path / "gpt2")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as refused:
        family_checkpoint("gpt2")
    assert str(refused.value) == GPT2_REFUSED


@pytest.mark.parametrize("model_type", ["bertscratch", "bert", "electra", None])
def test_a_model_type_bertscratch_takes_passes_the_front_door(tmp_path: Path, model_type: str | None) -> None:
    """BertScratch's own, transformers' BERT and ELECTRA (converted on load) pass, as a config.json without a
    model_type does (the library names what is wrong with it)."""
    import hf_bertscratch_cli

    config = {"model_type": model_type} if model_type else {}
    model = model_folder(tmp_path / "model", **config)
    hf_bertscratch_cli.check_sources("finetune", ["--model_name_or_path", str(model), "--output_dir", "out"])
    hf_bertscratch_cli.check_sources("classify", [str(model), "a fine film"])


# What a missing tokenizer and config are called in their one line, and what a local one is.
SOURCE_LINES = {
    "tokenizer": ("Tokenizer", "a tokenizer folder, a vocab.txt file or its folder"),
    "config": ("Config", "a config.json file, a model folder holding one"),
}


@pytest.mark.parametrize(
    ("command", "flag", "argv"),
    [
        ("finetune", "--tokenizer_name", ["--model_name_or_path", "model", "--task", "sst2", "--output_dir", "out"]),
        ("pretrain", "--tokenizer_name", ["--output_dir", "out"]),
        ("pretrain", "--config_name", ["--output_dir", "out"]),
        ("pretrain-flax", "--config_name", ["--output_dir", "out"]),
        ("classify", "--tokenizer", ["model", "a fine film"]),
    ],
)
@pytest.mark.parametrize("path", ["./nowhere", "../nowhere", "~/nowhere/tokenizer", "/nowhere", "model/a/b"])
def test_a_tokenizer_or_config_flag_naming_a_missing_path_is_refused_naming_the_flag(
    reviews: Path, command: str, flag: str, argv: list[str], path: str
) -> None:
    """A path that is not there (a Hub id cannot start with ./, ../, ~ or /, nor have two slashes) is refused in one
    line naming the flag and its value, before torch loads, not tried as a Hub id after it."""
    done = front_door(reviews, command, *argv, flag, path)
    kind, local = SOURCE_LINES["config" if flag == "--config_name" else "tokenizer"]
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"bertscratch {command}: error: FileNotFoundError: {kind} {path!r} ({flag}) does not exist: expected {local} "
        "or a Hub id (user/name).\n"
    )


@pytest.mark.parametrize("command", ["pretrain", "pretrain-flax"])
@pytest.mark.parametrize("config_name", ["gpt2", "gpt2/config.json"])
def test_a_config_name_of_another_model_type_is_refused_naming_the_types(
    tmp_path: Path, command: str, config_name: str
) -> None:
    """A --config_name folder or file whose model_type BertScratch neither is nor converts is refused in one line
    naming the flag, the model_type found and those taken, before torch loads."""
    model_folder(tmp_path / "gpt2", model_type="gpt2", architectures=["GPT2LMHeadModel"], n_positions=1024)
    done = front_door(tmp_path, command, "--config_name", config_name, "--output_dir", "out")
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"bertscratch {command}: error: ValueError: --config_name {config_name!r} holds a config of model_type 'gpt2' "
        "(GPT2LMHeadModel); expected 'bertscratch', or transformers' 'bert' or 'electra' (an ELECTRA discriminator), "
        "which become BertScratch with the same sizes.\n"
    )


@pytest.mark.parametrize("command", ["attention", "plot"])
def test_a_folder_as_the_image_to_draw_is_refused_before_drawing(tmp_path: Path, command: str) -> None:
    """The picture's --output an existing folder: one line before torch loads (attention) or anything is drawn."""
    model_folder(tmp_path / "model", model_type="bertscratch")
    (tmp_path / "pictures").mkdir()
    argv = ["model", "the cat sat"] if command == "attention" else ["model"]
    done = front_door(tmp_path, command, *argv, "--output", "pictures")
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"bertscratch {command}: error: IsADirectoryError: Cannot write image 'pictures': it is a folder; expected an "
        "image file's path, e.g. 'pictures/picture.png'.\n"
    )


LENGTH_LINE = (
    "bertscratch {command}: error: ValueError: --max_seq_length {length} exceeds the model's max_position_embeddings "
    "{positions}: use --max_seq_length {positions} or less.\n"
)


@pytest.mark.parametrize(
    ("command", "argv", "positions"),
    [
        (
            "finetune",
            ["--model_name_or_path", "model", "--train_file", "train.csv", "--text_column", "review"]
            + ["--label_column", "sentiment", "--output_dir", "out"],
            512,
        ),
        ("pretrain", ["--train_file", "train.csv", "--text_column", "review", "--output_dir", "out"], 512),
        ("pretrain", ["--model_name_or_path", "small", "--train_file", "train.csv", "--output_dir", "out"], 64),
        ("pretrain", ["--config_name", "small", "--output_dir", "out"], 64),
        ("pretrain", ["--config_name", "small/config.json", "--output_dir", "out"], 64),
        ("pretrain", ["--max_position_embeddings", "128", "--output_dir", "out"], 128),
        ("answer", ["model", "--question", "who?", "--context", "the cat"], 512),
        ("evaluate-onnx", ["--model", "small", "--task", "sst2"], 64),
    ],
    ids=["finetune", "pretrain-new", "pretrain-continued", "pretrain-config", "pretrain-config-file",
         "pretrain-positions", "answer", "evaluate-onnx"],
)  # fmt: skip
def test_a_max_seq_length_beyond_the_models_positions_is_refused_at_once(
    reviews: Path, command: str, argv: list[str], positions: int
) -> None:
    """Where the model's positions are known before torch loads (a model folder's or a config's
    max_position_embeddings, a new model's --max_position_embeddings or its default), a longer --max_seq_length is
    refused in the library's words, before a tokenizer is trained or a model loaded."""
    model_folder(reviews / "small", model_type="bertscratch", max_position_embeddings=64)
    length = 1000
    done = front_door(reviews, command, *argv, "--max_seq_length", str(length))
    assert done.returncode == 1, done.stderr
    assert done.stderr == LENGTH_LINE.format(command=command, length=length, positions=positions)


def test_a_max_seq_length_within_the_models_positions_passes(reviews: Path) -> None:
    import hf_bertscratch_cli

    hf_bertscratch_cli.check_arguments("pretrain", ["--max_position_embeddings", "128", "--max_seq_length", "128"])
    hf_bertscratch_cli.check_arguments("finetune", ["--model_name_or_path", str(reviews / "model"),
                                                    "--max_seq_length", "512"])  # fmt: skip
    hf_bertscratch_cli.check_arguments(
        "finetune", ["--model_name_or_path", "someone/model", "--max_seq_length", "4096"]
    )
    hf_bertscratch_cli.check_arguments("evaluate-onnx", ["--model", str(reviews / "model"), "--max_seq_length", "512"])


def test_a_missing_model_of_evaluate_onnx_is_named_at_once(tmp_path: Path) -> None:
    done = front_door(tmp_path, "evaluate-onnx", "--model", "nowhere", "--task", "sst2")
    assert done.returncode == 1
    assert "'nowhere'" in done.stderr and done.stderr.count("\n") == 1, done.stderr


CONLL_LINES = (
    "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\n"
)
SQUAD_DOCUMENT = {
    "version": "1.1",
    "data": [{"title": "t", "paragraphs": [{"context": "George went home.", "qas": [
        {"id": "q0", "question": "Who went home?", "answers": [{"text": "George", "answer_start": 0}]}]}]}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("files", "layout", "task_type"),
    [
        (("ner-train.txt", "ner-dev.txt"), "CoNLL", "token-classification"),
        (("qa-train.json", "qa-dev.json"), "SQuAD-format", "question-answering"),
    ],
)
def test_a_file_laid_out_for_another_task_type_names_the_task_type(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: tuple[str, str], layout: str, task_type: str
) -> None:
    """A CoNLL text file or a SQuAD-format json given without --task_type (a classification task) is named for what
    it looks like, with the --task_type that reads it, not by the 'label' column it lacks; with that --task_type it
    passes."""
    import hf_bertscratch_cli

    model_folder(tmp_path / "model", model_type="bertscratch")
    for name in files:
        text = CONLL_LINES if name.endswith(".txt") else json.dumps(SQUAD_DOCUMENT)
        (tmp_path / name).write_text(text)
    argv = ["--model_name_or_path", "model", "--train_file", files[0], "--validation_file", files[1]]
    done = front_door(tmp_path, "finetune", *argv, "--output_dir", "out")
    assert done.returncode == 1
    assert done.stderr == (
        f"bertscratch finetune: error: ValueError: The train file {files[0]!r} (--train_file) looks like a {layout} "
        f"file: add --task_type {task_type}.\n"
    )
    monkeypatch.chdir(tmp_path)
    hf_bertscratch_cli.check_arguments("finetune", [*argv, "--task_type", task_type])


@pytest.mark.parametrize(
    "text",
    [
        "the cat sat on the mat\nit was a fine day\n",  # sentences
        "the cat O\nsat on the mat\n",  # lines of different lengths
        "the cat\nsat mat\n",  # two words a line, no tags
    ],
)
def test_a_text_file_that_is_not_conll_is_not_named_conll(tmp_path: Path, text: str) -> None:
    from hf_bertscratch_base.data_files import file_layout

    (tmp_path / "train.txt").write_text(text)
    assert file_layout(tmp_path / "train.txt") is None


def offline_without_caches(monkeypatch: pytest.MonkeyPatch, folder: Path) -> dict[str, str]:
    """The environment of a machine in offline mode whose datasets and Hub caches are empty, with no data directory."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("BERTSCRATCH_DATA_DIR", raising=False)
    for name in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_MODULES_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(folder / "hf-home"))
    return dict(__import__("os").environ)


def test_a_task_without_local_data_in_offline_mode_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--task sst2` with HF_HUB_OFFLINE set, no data directory and nothing in the datasets cache: the library's line
    (where a local copy would go), before torch loads; a copy in the datasets cache lets the library load it."""
    import hf_bertscratch_cli

    model_folder(tmp_path / "model", model_type="bertscratch")
    env = offline_without_caches(monkeypatch, tmp_path)
    argv = ["--model_name_or_path", "model", "--task", "sst2", "--max_steps", "3", "--output_dir", "out"]
    done = front_door(tmp_path, "finetune", *argv, env=env)
    assert done.returncode == 1
    assert done.stderr == (
        "bertscratch finetune: error: FileNotFoundError: Dataset glue/sst2 has no local copy (neither --data_dir nor "
        "$BERTSCRATCH_DATA_DIR is set) and HF_HUB_OFFLINE is set, with no copy in the datasets cache: pass --data_dir "
        "DIR or set $BERTSCRATCH_DATA_DIR=DIR, DIR holding sst2/ (as ../shared/data does).\n"
    )
    (tmp_path / "hf-home" / "datasets" / "nyu-mll___glue" / "sst2").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    hf_bertscratch_cli.check_arguments("finetune", argv)


def test_a_task_without_local_data_in_datasets_offline_mode_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """HF_DATASETS_OFFLINE alone puts datasets in offline mode: the front door says so in the library's line, without
    asking the Hub."""
    model_folder(tmp_path / "model", model_type="bertscratch")
    env = offline_without_caches(monkeypatch, tmp_path)
    del env["HF_HUB_OFFLINE"]
    env.update(HF_DATASETS_OFFLINE="1", HF_ENDPOINT="http://192.0.2.1:9")  # an endpoint no probe would get past
    argv = ["--model_name_or_path", "model", "--task", "sst2", "--max_steps", "3", "--output_dir", "out"]
    done = front_door(tmp_path, "finetune", *argv, env=env)
    assert done.returncode == 1
    assert done.stderr.endswith(
        "and HF_DATASETS_OFFLINE is set, with no copy in the datasets cache: pass --data_dir DIR or set "
        "$BERTSCRATCH_DATA_DIR=DIR, DIR holding sst2/ (as ../shared/data does).\n"
    )


def test_a_task_whose_files_stand_in_for_some_splits_is_left_to_the_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A --test_file beside --task: the library's line names the splits the file leaves to the dataset, so the
    front door does not answer for it."""
    import hf_bertscratch_cli

    offline_without_caches(monkeypatch, tmp_path)
    (tmp_path / "test.tsv").write_text("sentence1\tsentence2\tlabel\na\tb\tentailment\n")
    hf_bertscratch_cli.check_arguments("finetune", ["--task", "rte", "--test_file", str(tmp_path / "test.tsv")])


def _rows(name: str, count: int) -> str:
    """A train file of `count` labelled examples in the format `name`'s extension says."""
    if name.endswith(".csv"):
        return "text,label\n" + "".join(f'"film {i}, fine",pos\n\n' for i in range(count))
    if name.endswith(".tsv"):
        return "text\tlabel\n" + "".join(f'"film {i}\tpos\n' for i in range(count))
    if name.endswith(".jsonl"):
        return "".join(json.dumps({"text": f"film {i}", "label": "pos"}) + "\n" for i in range(count))
    if name.endswith(".json"):
        return json.dumps([{"text": f"film {i}", "label": "pos"} for i in range(count)])
    return "-DOCSTART- -X- O\n\n" + "".join(f"Peter B-PER\nran{i} O\n\n\n" for i in range(count))


HELD_OUT_LINE = (
    "bertscratch finetune: error: ValueError: The data has no validation split, and 5% of its {count} train examples "
    "would hold out 2 to choose checkpoints on and score, fewer than 5: give --validation_file, or hold out more "
    "with --validation_split_percentage (e.g. {enough}).\n"
)


@pytest.mark.parametrize("name", ["train.csv", "train.tsv", "train.jsonl", "train.json", "ner.txt"])
def test_train_data_alone_too_small_to_hold_out_from_is_refused_at_once(tmp_path: Path, name: str) -> None:
    """A train file alone, whose 5% held out to choose on would be fewer than 5 examples: the library's line, before
    torch loads (its examples counted as datasets reads them: a csv's quoted fields and blank lines, a CoNLL file's
    sentences)."""
    model_folder(tmp_path / "model", model_type="bertscratch")
    (tmp_path / name).write_text(_rows(name, 30))
    task_type = ["--task_type", "token-classification"] if name.endswith(".txt") else []
    done = front_door(
        tmp_path, "finetune", "--model_name_or_path", "model", "--train_file", name, *task_type, "--output_dir", "out"
    )
    assert done.returncode == 1
    assert done.stderr == HELD_OUT_LINE.format(count=30, enough=17)


def test_the_front_door_counts_examples_as_the_library_reads_them(tmp_path: Path) -> None:
    from hf_bertscratch.data import load_data_file, read_conll
    from hf_bertscratch_base.data_files import count_examples

    for name in ("train.csv", "train.tsv", "train.jsonl", "train.json", "ner.txt"):
        (tmp_path / name).write_text(_rows(name, 30))
        read = read_conll(tmp_path / name) if name.endswith(".txt") else load_data_file(tmp_path / name)
        assert count_examples(tmp_path / name, conll=name.endswith(".txt")) == len(read) == 30, name


@pytest.mark.parametrize(
    ("count", "extra"),
    [
        (100, []),  # 5 held out: enough
        (30, ["--validation_split_percentage", "5"]),  # a share given: the library holds out what it is asked
        (30, ["--validation_file", "train.csv"]),
        (30, ["--task", "sst2", "--text_column", "text"]),  # the task's dataset gives the other splits
    ],
    ids=["enough", "share-given", "validation-file", "task"],
)
def test_train_data_that_is_not_alone_or_holds_out_enough_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, count: int, extra: list[str]
) -> None:
    import hf_bertscratch_cli

    (tmp_path / "train.csv").write_text(_rows("train.csv", count))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERTSCRATCH_DATA_DIR", str(tmp_path))
    hf_bertscratch_cli.check_arguments("finetune", ["--train_file", "train.csv", *extra])


def test_a_train_file_the_front_door_cannot_count_is_left_to_the_library(tmp_path: Path) -> None:
    from hf_bertscratch_base.data_files import count_examples

    (tmp_path / "train.parquet").write_bytes(b"PAR1")
    (tmp_path / "squad.json").write_text(json.dumps(SQUAD_DOCUMENT))
    assert count_examples(tmp_path / "train.parquet") is None
    assert count_examples(tmp_path / "squad.json") is None
    assert count_examples(tmp_path / "*.csv") is None


@pytest.mark.parametrize(
    "argv",
    [
        ["finetune", "--task", "sst2"],  # offline, no copy anywhere
        ["finetune", "--model_name_or_path", "model", "--max_seq_length", "128"],  # beyond the model's 64 positions
        ["finetune", "--train_file", "nowhere.csv"],
        ["classify", "gpt2"],  # a model_type BertScratch does not load
    ],
    ids=["offline-task", "too-long", "missing-file", "other-model-type"],
)
def test_help_after_a_commands_arguments_is_shown_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """`COMMAND ARGS --help` is run, so that the command's parser prints its help (as it does before anything else),
    however ARGS would be refused: a help request uses none of their values."""
    import hf_bertscratch_cli

    model_folder(tmp_path / "model", model_type="bertscratch", max_position_embeddings=64)
    model_folder(tmp_path / "gpt2", model_type="gpt2")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no datasets cache
    monkeypatch.delenv("BERTSCRATCH_DATA_DIR", raising=False)
    ran: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(
        hf_bertscratch_cli, "run_command", lambda command, args, debug=False: ran.append((command, args))
    )
    hf_bertscratch_cli.main([*argv, "--help"])
    assert ran == [(argv[0], [*argv[1:], "--help"])]


def test_the_front_door_names_its_command_under_a_scripts_exported_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`bertscratch finetune` run where `scripts/finetune.py`'s variable is exported (a shell, a child process) is
    still `bertscratch finetune` in its lines."""
    from hf_bertscratch_base import PROGRAM_ENV
    from hf_bertscratch_cli import dispatch

    monkeypatch.setenv(PROGRAM_ENV, "finetune=scripts/finetune.py")
    with pytest.raises(SystemExit):
        dispatch.main(["finetune", "--model_name_or_path", "m", "--task_type", "multi-label-classification",
                       "--train_file", "t.jsonl", "--output_dir", "out", "--multi_label_threshold", "best"])  # fmt: skip
    assert capsys.readouterr().err.splitlines()[-1].startswith("bertscratch finetune: error: ValueError: ")
