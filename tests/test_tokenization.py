"""Tests for hf_bertscratch.tokenization: every tokenizer form loads, WordPiece training, mask-token checks."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from transformers import BertTokenizer

from hf_bertscratch.tokenization import SPECIAL_TOKENS, load_tokenizer, main, train_wordpiece_tokenizer

from conftest import CORPUS, tiny_config_kwargs


@pytest.mark.parametrize("form", ["folder", "vocab_folder", "vocab_file"])
def test_load_tokenizer_forms_agree(form: str, tokenizer: BertTokenizer, tokenizer_dir: Path, vocab_file: Path) -> None:
    path = {"folder": tokenizer_dir, "vocab_folder": vocab_file.parent, "vocab_file": vocab_file}[form]
    loaded = load_tokenizer(str(path))
    text = "Paris is the capital of France ."
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.mask_token_id == tokenizer.mask_token_id


def test_load_tokenizer_rejects_missing_mask_and_empty_folder(vocab_file: Path, tmp_path: Path) -> None:
    BertTokenizer(vocab=str(vocab_file), mask_token=None).save_pretrained(tmp_path / "nomask")
    with pytest.raises(ValueError, match="mask token"):
        load_tokenizer(str(tmp_path / "nomask"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        load_tokenizer(str(tmp_path / "empty"))


def test_a_vocab_file_that_lists_a_word_twice_is_refused_naming_its_lines(vocab_file: Path, tmp_path: Path) -> None:
    """BertTokenizer gives a word listed twice the id of its last line, leaving fewer tokens than its largest id + 1
    (training then fails on an index out of range): such a vocab.txt is refused where a tokenizer is read from it (the
    file, a folder holding only it, the vocab.txt beside a model's config.json as Google's BERT checkpoints ship it,
    for pretraining and for fine-tuning), naming how many words and the first three with their lines."""
    import hf_bertscratch
    from hf_bertscratch.tasks.data import load_task_tokenizer

    words = vocab_file.read_text(encoding="utf-8").splitlines()
    n = len(words)
    listed = [*words, words[5], "extra", words[6], words[7], words[5], words[8]]
    only, model = tmp_path / "only", tmp_path / "model"
    hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(n + 1)).save_pretrained(model)
    for folder in (only, model):
        folder.mkdir(exist_ok=True)
        (folder / "vocab.txt").write_text("\n".join(listed) + "\n", encoding="utf-8")
    for load, given in (
        (load_tokenizer, only / "vocab.txt"),
        (load_tokenizer, only),
        (load_tokenizer, model),
        (load_task_tokenizer, model),
    ):
        with pytest.raises(ValueError) as refused:
            load(str(given))
        read = given if given.is_file() else given / "vocab.txt"
        assert str(refused.value) == (
            f"Vocabulary file {str(read)!r} lists 4 words on more than one line: {words[5]!r} (lines 6, {n + 1} "
            f"and {n + 5}), {words[6]!r} (lines 7 and {n + 3}), {words[7]!r} (lines 8 and {n + 4}) and 1 more; "
            "a tokenizer gives such a word the id of its last line, "
            f"which leaves it {n + 1} tokens with ids up to {n + 5}, past the {n + 1} embedding rows of a model sized "
            "by it: keep each word on one line."
        ), (load.__name__, given)
    (only / "vocab.txt").write_text("\n".join([*words, "extra"]) + "\n", encoding="utf-8")
    assert len(load_tokenizer(str(only))) == n + 1


def test_load_tokenizer_names_a_missing_path_instead_of_trying_it_on_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped folder or vocab.txt is not sent to the Hub (whose answer is "Repo id must be in the form ..." or a
    connection error): the message names the path and the forms a tokenizer comes in."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for missing, message in [
        (str(tmp_path / "nope"), "does not exist: expected a tokenizer folder, a vocab.txt file or its folder"),
        ("./nope/vocab.txt", "does not exist: expected a tokenizer folder"),
        ("runs/nope", "Tokenizer folder 'runs/nope' does not exist (there is a local folder 'runs')"),
    ]:
        with pytest.raises(FileNotFoundError, match=re.escape(message)):
            load_tokenizer(missing)


def test_train_wordpiece_tokenizer_round_trips(tmp_path: Path) -> None:
    tokenizer = train_wordpiece_tokenizer(CORPUS * 3 + ["", "  "], vocab_size=80, output_dir=str(tmp_path))
    assert tokenizer.convert_ids_to_tokens(list(range(5))) == SPECIAL_TOKENS
    assert tokenizer.pad_token_id == 0 and len(tokenizer) <= 80
    assert any(token.startswith("##") for token in tokenizer.get_vocab())  # real WordPiece continuation pieces
    encoded = tokenizer("Paris is the capital of France .")["input_ids"]
    assert encoded[0] == tokenizer.cls_token_id and encoded[-1] == tokenizer.sep_token_id
    assert tokenizer.decode(encoded, skip_special_tokens=True) == "paris is the capital of france."
    reloaded = load_tokenizer(str(tmp_path))  # saved as a BertTokenizerFast folder
    assert reloaded("the cat sat")["input_ids"] == tokenizer("the cat sat")["input_ids"]


def test_train_wordpiece_tokenizer_numbers_the_same_tokens_the_same_way() -> None:
    """`tokenizers` numbers equally ranked tokens by per-process hash seeds; trainings that learn the same tokens
    (as on this corpus, every time) must give them the same ids, so a rerun of the same command reads the same ids."""
    vocabularies = [train_wordpiece_tokenizer(CORPUS, vocab_size=80).get_vocab() for _ in range(5)]
    assert all(set(vocab) == set(vocabularies[0]) for vocab in vocabularies)  # the premise: same tokens learned
    assert all(vocab == vocabularies[0] for vocab in vocabularies[1:])
    learned = [token for token, _ in sorted(vocabularies[0].items(), key=lambda item: item[1])][len(SPECIAL_TOKENS) :]
    assert learned == sorted(learned)


def test_train_wordpiece_tokenizer_errors() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece_tokenizer(CORPUS, vocab_size=5)
    with pytest.raises(ValueError, match="no characters"):
        train_wordpiece_tokenizer(["", " "], vocab_size=50)


def test_main_trains_from_a_file(text_file: Path, tmp_path: Path) -> None:
    main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(tmp_path / "tok")])
    assert len(load_tokenizer(str(tmp_path / "tok"))) <= 70
    with pytest.raises(ValueError, match="'sentence'"):
        main(["--train_file", str(text_file), "--text_column", "sentence", "--output_dir", str(tmp_path / "x")])
    with pytest.raises(ValueError, match=r"give --train_file FILE or --dataset_name NAME") as no_text:
        main(["--output_dir", str(tmp_path / "x")])
    assert "validation_file" not in str(no_text.value)  # a flag this command does not take


def test_main_refuses_a_text_column_that_is_not_text(tmp_path: Path) -> None:
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("id,text\n1,hello there\n2,general kenobi\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'id' of the train split holds int64 values, not text"):
        main(["--train_file", str(numbers), "--text_column", "id", "--output_dir", str(tmp_path / "tok")])
    assert not (tmp_path / "tok").exists()


def test_main_refuses_an_output_dir_it_would_not_write_or_would_spoil(text_file: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("kept\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is a file; expected a folder"):
        main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(a_file)])
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="holds a model"):
        main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(model)])
    assert sorted(path.name for path in model.iterdir()) == ["config.json"]
    assert a_file.read_text(encoding="utf-8") == "kept\n"


def test_a_vocabulary_larger_than_asked_is_said(caplog: pytest.LogCaptureFixture) -> None:
    """WordPiece keeps every character of the text, so a text of many characters overshoots a small vocab_size."""
    texts = [" ".join(chr(code) for code in range(0x4E00 + i, 0x4E00 + i + 40)) for i in range(0, 400, 40)]
    with caplog.at_level(logging.WARNING, logger="hf_bertscratch.tokenization"):
        tokenizer = train_wordpiece_tokenizer(texts, vocab_size=50)
    assert len(tokenizer) > 50
    assert f"has {len(tokenizer)} tokens, more than vocab_size 50" in caplog.text
    assert "400 distinct characters" in caplog.text


def test_main_reads_the_files_of_a_quoted_glob_as_its_help_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "quoted glob ('texts/*.txt')" in " ".join(capsys.readouterr().out.split())
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("zebra zebra zebra\n" * 20, encoding="utf-8")
    (tmp_path / "texts" / "b.txt").write_text("quokka quokka quokka\n" * 20, encoding="utf-8")
    main(["--train_file", str(tmp_path / "texts" / "*.txt"), "--vocab_size", "60", "--output_dir", str(tmp_path / "t")])
    vocab = load_tokenizer(str(tmp_path / "t")).get_vocab()
    assert "zebra" in vocab and "quokka" in vocab


def test_a_loaded_tokenizer_saves_no_load_time_options(tmp_path: Path) -> None:
    """transformers keeps how a tokenizer was loaded (is_local, local_files_only) among the options it saves back;
    a tokenizer this package loads saves only its own settings, as `train-tokenizer` writes them."""
    from hf_bertscratch.tasks.data import load_task_tokenizer

    trained = train_wordpiece_tokenizer(CORPUS, vocab_size=120)
    trained.save_pretrained(tmp_path / "trained")
    written = json.loads((tmp_path / "trained" / "tokenizer_config.json").read_text())
    for name, load in (("tokenization", load_tokenizer), ("task", load_task_tokenizer)):
        load(str(tmp_path / "trained")).save_pretrained(tmp_path / name)
        assert json.loads((tmp_path / name / "tokenizer_config.json").read_text()) == written, name
    assert not {"is_local", "local_files_only"} & set(written)


def test_main_replaces_an_older_tokenizer_whole_and_keeps_it_on_failure(
    text_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokenizer folder trained again holds the new tokenizer's files alone (an older vocab.txt left beside the new
    tokenizer.json could be loaded with it); a training that fails on the way leaves the older tokenizer as it was."""
    output = tmp_path / "tok"
    output.mkdir()
    (output / "vocab.txt").write_text("[PAD]\n[UNK]\nold\n", encoding="utf-8")
    (output / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(BertTokenizer, "save_pretrained", fail)
    with pytest.raises(OSError, match="disk full"):
        main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(output)])
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []
    assert (output / "vocab.txt").read_text(encoding="utf-8") == "[PAD]\n[UNK]\nold\n"
    monkeypatch.undo()
    main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(output)])
    assert "old" not in load_tokenizer(str(output)).get_vocab()
    assert not (output / "merges.txt").exists()
    assert not (output / "vocab.txt").exists() or "old" not in (output / "vocab.txt").read_text().split()
    assert len(load_tokenizer(str(output))) <= 70


def test_main_refuses_a_folder_of_other_files(text_file: Path, tmp_path: Path) -> None:
    """Saving replaces the whole folder: one holding files and no tokenizer is refused, its files kept."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("kept\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--output_dir '.*notes' holds files and no tokenizer"):
        main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", str(notes)])
    assert (notes / "todo.md").read_text(encoding="utf-8") == "kept\n"


def test_main_refuses_the_current_folder_it_would_replace(
    text_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The saved folder replaces --output_dir whole: the current folder (or one holding it) would be removed from
    under the shell that ran the command, so it is refused in one line naming it."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for given in (".", str(here), ".."):
        with pytest.raises(ValueError, match=rf"^{re.escape(repr(given))} is the current folder or holds it"):
            main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", given])
    assert here.is_dir() and not any(here.iterdir())
    main(["--train_file", str(text_file), "--vocab_size", "70", "--output_dir", "tok"])
    assert len(load_tokenizer(str(here / "tok"))) <= 70
