"""Tests for hf_bertscratch.tasks.token_classification: CoNLL reading, piece labels, tag checks, logits back to tags,
and entity tagging through the pipeline."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from transformers import BertTokenizer, BertTokenizerLegacy

import hf_bertscratch
from hf_bertscratch.data import DATA_DIR_ENV, load_raw_datasets, read_conll
from hf_bertscratch.inference import tag_entities
from hf_bertscratch.tasks.data import DataArguments, check_data_arguments
from hf_bertscratch.tasks.features import FeatureSettings
from hf_bertscratch.tasks.token_classification import (
    CONLL2003_LABELS,
    TokenClassificationShape,
    check_tags,
    label_names_from,
    logits_to_word_tags,
    make_word_tokenize_function,
)
from hf_bertscratch.tokenization import align_labels_with_pieces

from conftest import tiny_config_kwargs

LABEL_TO_ID = {label: i for i, label in enumerate(CONLL2003_LABELS)}

# Two documents; the second sentence is followed by two blank lines, the last has no blank line after it.
CONLL_TEXT = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O"""


@pytest.fixture(scope="module")
def piece_tokenizer(vocab_file: Path, tmp_path_factory: pytest.TempPathFactory) -> BertTokenizer:
    """The conftest vocabulary plus "##dog" and "##s", so that "catdogs" is split into cat ##dog ##s."""
    path = tmp_path_factory.mktemp("pieces") / "vocab.txt"
    path.write_text(vocab_file.read_text(encoding="utf-8") + "##dog\n##s\n", encoding="utf-8")
    return BertTokenizer(vocab=str(path))


@pytest.fixture
def conll_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.txt"
    path.write_text(CONLL_TEXT, encoding="utf-8")
    return path


def _sentences(rows: list[tuple[list, list]]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"tokens": [t for t, _ in rows], "ner_tags": [n for _, n in rows]})


# ---------------------------------------------------------------------------------------------- reading CoNLL
def test_read_conll_skips_docstart_and_blank_lines(conll_file: Path) -> None:
    dataset = read_conll(conll_file)
    assert dataset["id"] == ["0", "1", "2"]
    assert dataset["tokens"] == [
        ["EU", "rejects", "German", "call"],
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22"],
    ]
    assert dataset["ner_tags"] == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"], ["B-LOC", "O"]]
    assert read_conll(conll_file, tag_column=1)["ner_tags"][0] == ["NNP", "VBZ", "JJ", "NN"]


def test_read_conll_gz_matches_plain(conll_file: Path) -> None:
    gz_path = conll_file.with_suffix(".txt.gz")
    gz_path.write_bytes(gzip.compress(conll_file.read_bytes()))
    assert read_conll(gz_path).to_dict() == read_conll(str(conll_file)).to_dict()


def test_read_conll_names_file_and_line_of_a_malformed_line(tmp_path: Path, conll_file: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(CONLL_TEXT.replace("call NN I-NP O", "call I-NP O"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt, line 6: 3 columns .*'call I-NP O'.* has 4"):
        read_conll(path)
    for column in (4, 0, -4):  # past the last column, and the word column itself
        with pytest.raises(ValueError, match=rf"train\.txt, line 3: tag_column={column} does not pick"):
            read_conll(conll_file, tag_column=column)


def test_read_conll_of_words_alone_gives_no_tags(tmp_path: Path) -> None:
    """A file of one word per line (a test file to predict) is read as sentences of words, with no tag column, rather
    than each word taken for its own tag."""
    path = tmp_path / "words.txt"
    path.write_text("-DOCSTART-\n\nEU\nrejects\n\nPeter\nBlackburn\n", encoding="utf-8")
    dataset = read_conll(path)
    assert dataset.column_names == ["id", "tokens"]
    assert dataset["tokens"] == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert read_conll(path, tag_column=1).column_names == ["id", "tokens"]  # no column is a tag column


@pytest.mark.parametrize(
    "text, line, found",
    [
        (
            CONLL_TEXT.replace("call NN I-NP O", "call"),
            6,
            r"a word alone \('call'\), but the file's first token line has 4 columns",
        ),
        (
            "EU\nrejects NNP B-NP O\n",
            2,
            r"4 columns \('rejects NNP B-NP O'\), but the file's first token line has a word alone",
        ),
    ],
    ids=["tagged-then-word", "word-then-tagged"],
)
def test_read_conll_refuses_words_with_and_without_tags_in_one_file(
    tmp_path: Path, text: str, line: int, found: str
) -> None:
    """Lines with a tag column and lines without one in the same file are refused at the first line that differs."""
    path = tmp_path / "mixed.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line {line}: {found}; every line of a file"):
        read_conll(path)


def test_a_split_of_conll_files_with_and_without_tags_is_refused(tmp_path: Path, conll_file: Path) -> None:
    """Files of one split (a glob) are all tagged or all words alone; a mix names the files without tags."""
    (tmp_path / "words.txt").write_text("EU\nrejects\n", encoding="utf-8")
    pattern = str(tmp_path / "*.txt")
    with pytest.raises(
        ValueError, match=r"^The test files .* mix sentences with tags and words alone: \[.*words\.txt'\]"
    ):
        load_raw_datasets(test_file=pattern, text_files_as_conll=True)


def test_read_conll_without_sentences(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt holds no sentence"):
        read_conll(path)


# ---------------------------------------------------------------------------------------------- labels
def test_label_names_from_strings_and_classlabel(conll_file: Path) -> None:
    assert label_names_from(read_conll(conll_file), "ner_tags") == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    hub_like = datasets.Dataset.from_dict(
        {"ner_tags": [[3, 0]]},
        features=datasets.Features({"ner_tags": datasets.List(datasets.ClassLabel(names=CONLL2003_LABELS))}),
    )
    splits = datasets.DatasetDict({"train": hub_like, "validation": read_conll(conll_file)})
    assert label_names_from(splits, "ner_tags") == list(CONLL2003_LABELS)


def test_a_row_without_tags_is_named_once_the_label_list_is_read() -> None:
    """A row whose tags are null (JSON Lines) leaves the label list to the other rows, and `check_tags` names it,
    rather than the label list failing on iterating None."""
    train = _sentences([(["EU"], ["B-ORG"]), (["rejects"], None)])
    names = label_names_from(train, "ner_tags")
    assert names == ["B-ORG"]
    with pytest.raises(ValueError, match=r"^Row 1 of the train split: .* must hold lists .* and NoneType None\.$"):
        check_tags(train, "tokens", "ner_tags", names, "train")


def test_check_tags_accepts_names_and_ids() -> None:
    check_tags(_sentences([(["EU", "rejects"], ["B-ORG", "O"])]), "tokens", "ner_tags", CONLL2003_LABELS, "train")
    check_tags(_sentences([(["EU", "rejects"], [3, 0])]), "tokens", "ner_tags", CONLL2003_LABELS, "train")


@pytest.mark.parametrize(
    "rows, match",
    [
        ([(["EU"], ["B-ORG"]), (["EU", "rejects"], ["B-ORG"])], r"Row 1 of the dev split has 2 words but 1 tags"),
        ([(["EU"], ["B-FOO"])], r"Row 0 of the dev split: tag 'B-FOO' is not in the label list \['O', 'B-PER'"),
        ([(["EU"], [9])], r"tag 9 is not in the label list"),
        ([("EU rejects", ["B-ORG", "O"])], r"must hold lists .* got str 'EU rejects'"),
    ],
)
def test_check_tags_errors_name_the_value(rows: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_tags(_sentences(rows), "tokens", "ner_tags", CONLL2003_LABELS, "dev")


# ---------------------------------------------------------------------------------------------- preprocess
def test_align_labels_with_pieces() -> None:
    word_ids = [None, 0, 1, 1, 1, 2, None]  # [CLS] w0 w1 w1 w1 w2 [SEP]
    assert align_labels_with_pieces(word_ids, [5, 7, 0]) == [-100, 5, 7, -100, -100, 0, -100]
    with pytest.raises(ValueError, match="Word id 2 is outside the 2 word labels"):
        align_labels_with_pieces(word_ids, [5, 7])


@pytest.mark.parametrize("tags", [["B-LOC", "B-MISC", "O"], [5, 7, 0]], ids=["strings", "classlabel-ids"])
def test_tokenize_labels_only_the_first_piece(piece_tokenizer: BertTokenizer, tags: list) -> None:
    dataset = _sentences([(["Paris", "catdogs", "."], tags)])
    tokenize = make_word_tokenize_function(piece_tokenizer, "tokens", "ner_tags", LABEL_TO_ID, max_seq_length=16)
    row = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names)[0]
    pieces = piece_tokenizer.convert_ids_to_tokens(row["input_ids"])
    assert pieces == ["[CLS]", "paris", "cat", "##dog", "##s", ".", "[SEP]"]
    assert row["labels"] == [-100, LABEL_TO_ID["B-LOC"], LABEL_TO_ID["B-MISC"], -100, -100, LABEL_TO_ID["O"], -100]
    assert row["token_type_ids"] == [0] * 7 and row["attention_mask"] == [1] * 7 and row["length"] == 7


def test_tokenize_truncates_at_max_seq_length(piece_tokenizer: BertTokenizer) -> None:
    tokenize = make_word_tokenize_function(piece_tokenizer, "tokens", "ner_tags", LABEL_TO_ID, max_seq_length=4)
    encoded = tokenize({"tokens": [["Paris", "catdogs", "."]], "ner_tags": [["B-LOC", "B-MISC", "O"]]})
    assert piece_tokenizer.convert_ids_to_tokens(encoded["input_ids"][0]) == ["[CLS]", "paris", "cat", "[SEP]"]
    assert encoded["labels"] == [[-100, LABEL_TO_ID["B-LOC"], LABEL_TO_ID["B-MISC"], -100]]
    assert encoded["length"] == [4]


def test_tokenize_errors(vocab_file: Path, piece_tokenizer: BertTokenizer) -> None:
    with pytest.raises(ValueError, match="slow tokenizer"):
        make_word_tokenize_function(
            BertTokenizerLegacy(vocab_file=str(vocab_file)), "tokens", "ner_tags", LABEL_TO_ID, 16
        )
    tokenize = make_word_tokenize_function(piece_tokenizer, "tokens", "ner_tags", LABEL_TO_ID, 16)
    with pytest.raises(ValueError, match="Tag 'B-FOO' is not in the label list"):
        tokenize({"tokens": [["Paris"]], "ner_tags": [["B-FOO"]]})


# ---------------------------------------------------------------------------------------------- postprocess
def test_logits_to_word_tags_reads_scored_positions_only() -> None:
    # Two sentences of T=5 over 3 labels; the scored positions are where labels != -100.
    labels = np.array([[-100, 1, -100, 0, -100], [-100, 2, 2, -100, -100]])
    predicted = np.array([[2, 1, 2, 1, 2], [0, 0, 2, 1, 1]])
    logits = np.eye(3)[predicted] * 5.0  # (2, 5, 3), one-hot on the predicted ids
    names = ["O", "B-PER", "I-PER"]
    predictions, references = logits_to_word_tags(logits, labels, names)
    assert predictions == [["B-PER", "B-PER"], ["O", "I-PER"]]
    assert references == [["B-PER", "O"], ["I-PER", "I-PER"]]
    assert logits_to_word_tags(logits, labels, dict(enumerate(names))) == (predictions, references)
    with pytest.raises(ValueError, match=r"logits \(N, T, C\) and labels \(N, T\)"):
        logits_to_word_tags(logits[:, :4], labels, names)


# ---------------------------------------------------------------------------------------------- inference
@pytest.fixture(scope="module")
def ner_model_dir(tokenizer: BertTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny untrained token classifier over the CoNLL-2003 labels whose bias makes every piece B-LOC, so the
    pipeline must find entities (a random model may tag everything O)."""
    torch.manual_seed(0)
    config = hf_bertscratch.BertScratchConfig(
        **tiny_config_kwargs(len(tokenizer)), id2label=dict(enumerate(CONLL2003_LABELS)), label2id=LABEL_TO_ID
    )
    model = hf_bertscratch.BertScratchForTokenClassification(config)
    with torch.no_grad():
        model.classifier.bias[LABEL_TO_ID["B-LOC"]] = 100.0
    path = tmp_path_factory.mktemp("ner")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_tag_entities_end_to_end(ner_model_dir: Path) -> None:
    text = "Paris is the capital of France ."
    entities = tag_entities(ner_model_dir, text, device="cpu")
    assert [e["word"] for e in entities] == text.lower().split()  # every word a B-LOC entity of its own
    for entity in entities:
        assert set(entity) == {"entity_group", "score", "word", "start", "end"}
        assert entity["entity_group"] == "LOC" and isinstance(entity["score"], float)
        assert text[entity["start"] : entity["end"]].lower() == entity["word"]


def test_tag_entities_covers_text_longer_than_the_positions(ner_model_dir: Path) -> None:
    from hf_bertscratch.inference import load_pipeline

    text = " ".join(["the cat sat on the mat ."] * 30)  # 210 pieces, the tiny model has 64 positions
    tagger = load_pipeline("token-classification", ner_model_dir)
    entities = tag_entities(tagger, text, aggregation_strategy="first")
    assert len(entities) == len(text.split())
    assert entities[-1]["end"] == len(text)


def test_tag_entities_without_aggregation_tags_each_piece(ner_model_dir: Path) -> None:
    pieces = tag_entities(ner_model_dir, "Paris is big", aggregation_strategy="none")
    assert [(p["entity"], p["word"], p["index"]) for p in pieces] == [
        ("B-LOC", w, i) for i, w in enumerate(["paris", "is", "big"], 1)
    ]


def test_tag_entities_without_aggregation_warns_that_a_long_text_is_cut(ner_model_dir: Path, caplog) -> None:
    """Aggregation "none" tags the first window only (the pipeline takes no stride without grouping): a long text's
    later pieces were left out without a word."""
    text = " ".join(["the cat sat on the mat ."] * 30)  # 210 pieces, the tiny model has 64 positions
    with caplog.at_level("WARNING", logger="hf_bertscratch.inference"):
        pieces = tag_entities(ner_model_dir, text, aggregation_strategy="none")
    assert len(pieces) == 62  # the first window, [CLS] and [SEP] aside
    assert "tags the first 64 of the text's 212 tokens only" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="hf_bertscratch.inference"):
        tag_entities(ner_model_dir, "Paris is big", aggregation_strategy="none")
    assert not caplog.records


def test_tag_entities_errors(ner_model_dir: Path, tokenizer: BertTokenizer, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Text is empty"):
        tag_entities(ner_model_dir, "  ")
    with pytest.raises(ValueError, match="aggregation_strategy='bogus'"):
        tag_entities(ner_model_dir, "Paris", aggregation_strategy="bogus")
    config = hf_bertscratch.BertScratchConfig(**tiny_config_kwargs(len(tokenizer)))
    hf_bertscratch.BertScratchForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="token-classification needs one of the heads \\*ForTokenClassification"):
        tag_entities(tmp_path, "Paris", tokenizer=ner_model_dir)


# ---------------------------------------------------------------------------------------------- real data
def test_real_conll2003_validation_counts() -> None:
    """The local CoNLL-2003 validation split against the counts in its SOURCE.md (and the Hub's size)."""
    data_dir = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[2] / "shared" / "data")
    path = data_dir / "conll2003" / "valid.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    dataset = read_conll(path)
    assert len(dataset) == 3250
    assert sum(len(tokens) for tokens in dataset["tokens"]) == 51362
    check_tags(dataset, "tokens", "ner_tags", CONLL2003_LABELS, "validation")
    entities = [tag[2:] for tags in dataset["ner_tags"] for tag in tags if tag.startswith("B-")]
    assert {kind: entities.count(kind) for kind in ("LOC", "MISC", "ORG", "PER")} == {
        "LOC": 1837,
        "MISC": 922,
        "ORG": 1341,
        "PER": 1842,
    }


def test_the_tags_are_listed_with_their_train_words_and_a_misspelt_one_is_warned_of(
    piece_tokenizer: BertTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """The tag set read from the train split comes in one line with each tag's count of train words; a tag on one
    word only, which the eval split lacks (a misspelt tag), gets a warning naming it."""
    task = check_data_arguments(DataArguments(train_file="x.jsonl", task_type="token-classification"))
    raw = datasets.DatasetDict(
        {
            "train": _sentences(
                [
                    (["EU", "rejects", "German"], ["B-ORG", "O", "B-MSIC"]),
                ]
                + [(["EU", "it"], ["B-ORG", "O"])] * 2
            ),
            "eval": _sentences([(["EU", "rejects"], ["B-ORG", "O"])]),
        }
    )
    shape = TokenClassificationShape(task, FeatureSettings(), piece_tokenizer)
    with caplog.at_level("INFO", logger="hf_bertscratch.tasks.features"):
        shape.prepare_labels(raw)
    assert [f"{record.levelname} {record.getMessage()}" for record in caplog.records] == [
        "INFO 3 tags in the train split's 'ner_tags' column, with their train words: O 3, B-MSIC 1, B-ORG 3.",
        "WARNING Tag 'B-MSIC' has 1 of the 7 train words and none of the eval split's: too few to learn it from; a "
        "misspelt label in the train file is a tag of its own.",
    ]


def test_tag_words_tags_every_word_once_and_groups_b_tags_apart(ner_model_dir: Path) -> None:
    from hf_bertscratch.inference import tag_words

    words = ["Paris,", "is", "big"]  # "Paris," is two pieces, one tag
    tagged = tag_words(ner_model_dir, words)
    assert tagged["tags"] == ["B-LOC"] * 3
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in tagged["entities"]] == [
        ("LOC", word, i, i + 1) for i, word in enumerate(words)
    ]
    with pytest.raises(ValueError, match="Word list is 'Paris is big': expected a list of words"):
        tag_words(ner_model_dir, "Paris is big")
    with pytest.raises(ValueError, match="holds no words or a blank one"):
        tag_words(ner_model_dir, ["Paris", " "])


def test_trainer_step_of_two_accumulated_micro_batches_of_4_equals_one_batch_of_8(
    tokenizer: BertTokenizer, tmp_path: Path
) -> None:
    """Trainer passes the head its count of scored tokens across the accumulation step, so 2 x 4 rows of unequal
    numbers of labelled words move the weights as one batch of the 8 rows does (plain SGD: the step is the gradient)."""
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    generator = torch.Generator().manual_seed(3)
    lengths = [12, 3, 2, 4, 12, 11, 12, 10]  # rows 5-8 score far more tokens than rows 1-4
    rows = [
        {
            "input_ids": torch.randint(5, len(tokenizer), (n,), generator=generator).tolist(),
            "labels": torch.randint(0, len(CONLL2003_LABELS), (n,), generator=generator).tolist(),
        }
        for n in lengths
    ]
    config = hf_bertscratch.BertScratchConfig(
        **tiny_config_kwargs(len(tokenizer)),
        num_labels=len(CONLL2003_LABELS),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )

    def one_step(batch_size: int, accumulation: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        model = hf_bertscratch.BertScratchForTokenClassification(config)
        arguments = TrainingArguments(
            output_dir=str(tmp_path / f"{batch_size}x{accumulation}"),
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            max_steps=1,
            optim="sgd",
            learning_rate=1.0,
            max_grad_norm=0.0,
            lr_scheduler_type="constant",
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
        )
        collator = DataCollatorForTokenClassification(tokenizer)
        Trainer(
            model=model, args=arguments, train_dataset=datasets.Dataset.from_list(rows), data_collator=collator
        ).train()
        return {name: parameter.detach().clone() for name, parameter in model.named_parameters()}

    whole, accumulated = one_step(8, 1), one_step(4, 2)
    for name, parameter in whole.items():
        torch.testing.assert_close(accumulated[name], parameter, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
