"""Extractive QA pre/post-processing: windows, answer positions, span choice, SQuAD loading, and answer_question."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import BertTokenizerFast, PreTrainedTokenizerBase
from transformers.modeling_outputs import QuestionAnsweringModelOutput

from hf_bertscratch import BertScratchForMaskedLM, BertScratchForQuestionAnswering, inference
from hf_bertscratch.inference import answer_question
from hf_bertscratch.tasks.question_answering import (
    SQUAD_FEATURES,
    check_answers,
    load_squad_json,
    postprocess_predictions,
    prepare_eval_features,
    prepare_train_features,
)
from hf_bertscratch.tokenization import load_tokenizer

QUESTION = "what is the capital of spain ?"  # 7 tokens ("what" is [UNK])
FILLER = "the dog ran fast in the city and the cat sat on the mat".split()  # one token a word

# With this question, 20-token windows hold 10 context tokens and start every 6 (doc_stride 4 overlapping):
# windows cover context tokens [0, 10), [6, 16), [12, 22), [18, 28), [24, 30).
WINDOW = {"max_seq_length": 20, "doc_stride": 4}
ANSWER_WORDS = ["madrid", "spain"]
ANSWER_AT = 9  # tokens 9 and 10: window 0 holds only "madrid", window 1 holds both


def words_context(n_words: int, answer_words: list[str], at: int) -> tuple[str, str, int]:
    """A context of `n_words` one-token words with `answer_words` at word `at`: (context, answer, answer_start)."""
    words = [FILLER[i % len(FILLER)] for i in range(n_words)]
    words[at : at + len(answer_words)] = answer_words
    context, answer = " ".join(words), " ".join(answer_words)
    start = len(" ".join(words[:at])) + (1 if at else 0)
    assert context[start : start + len(answer)] == answer
    return context, answer, start


@pytest.fixture(scope="module")
def qa_tokenizer(tokenizer: PreTrainedTokenizerBase, vocab_file: Path) -> PreTrainedTokenizerBase:
    """The conftest tokenizer if it is fast (transformers 5's BertTokenizer is), else a fast one of its vocab."""
    return tokenizer if tokenizer.is_fast else BertTokenizerFast(vocab=str(vocab_file))


@pytest.fixture
def long_example() -> tuple[dict, str, int]:
    """One 30-word example whose 2-word answer straddles the end of the first window: (examples, answer, start)."""
    context, answer, start = words_context(30, ANSWER_WORDS, ANSWER_AT)
    examples = {
        "id": ["q"],
        "question": [QUESTION],
        "context": [context],
        "answers": [{"text": [answer], "answer_start": [start]}],
    }
    return examples, answer, start


def token_at(offsets: list, char_start: int | None = None, char_end: int | None = None) -> int:
    """The index of the context token starting at `char_start` (or ending at `char_end`)."""
    matches = [
        t
        for t, offset in enumerate(offsets)
        if offset is not None and (offset[0] == char_start if char_start is not None else offset[1] == char_end)
    ]
    assert len(matches) == 1, (char_start, char_end, offsets)
    return matches[0]


# ---------------------------------------------------------------------------------------------------- preprocess


def test_conftest_tokenizer_is_fast(tokenizer: PreTrainedTokenizerBase) -> None:
    assert tokenizer.is_fast, "transformers 5's BertTokenizer is the Rust-backed one; offsets need it"


def test_train_positions_cover_the_answer_or_point_at_cls(qa_tokenizer, long_example) -> None:
    examples, answer, start = long_example
    train = prepare_train_features(examples, qa_tokenizer, **WINDOW)
    evaluation = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    assert train["input_ids"] == evaluation["input_ids"]  # the same windows
    assert len(train["input_ids"]) == 5
    context = examples["context"][0]
    for f, offsets in enumerate(evaluation["offset_mapping"]):
        first, last = train["start_positions"][f], train["end_positions"][f]
        inside = [o for o in offsets if o is not None]
        if inside[0][0] <= start and inside[-1][1] >= start + len(answer):
            assert context[offsets[first][0] : offsets[last][1]] == answer
        else:
            assert (first, last) == (0, 0)
            assert train["input_ids"][f][0] == qa_tokenizer.cls_token_id
    # Window 0 ends on "madrid": partial, so [CLS]; window 1 holds the whole answer.
    assert context[slice(*[o for o in evaluation["offset_mapping"][0] if o][-1])] == "madrid"
    assert [s != 0 for s in train["start_positions"]] == [False, True, False, False, False]


def test_eval_features_with_positions_match_the_train_features(qa_tokenizer, long_example) -> None:
    examples, _, _ = long_example
    train = prepare_train_features(examples, qa_tokenizer, **WINDOW)
    evaluation = prepare_eval_features(examples, qa_tokenizer, **WINDOW, with_positions=True)
    assert evaluation["start_positions"] == train["start_positions"]
    assert evaluation["end_positions"] == train["end_positions"]
    assert "start_positions" not in prepare_eval_features(examples, qa_tokenizer, **WINDOW)


def test_train_positions_of_an_unanswered_example_point_at_cls(qa_tokenizer) -> None:
    examples = {"question": [QUESTION], "context": ["the dog ran fast"], "answers": [{"text": [], "answer_start": []}]}
    train = prepare_train_features(examples, qa_tokenizer, **WINDOW)
    assert train["start_positions"] == train["end_positions"] == [0]


def test_train_features_strip_the_question_and_have_no_offsets(qa_tokenizer, long_example) -> None:
    examples, _, _ = long_example
    spaced = {**examples, "question": ["   " + QUESTION]}
    train = prepare_train_features(spaced, qa_tokenizer, **WINDOW)
    assert train["input_ids"] == prepare_train_features(examples, qa_tokenizer, **WINDOW)["input_ids"]
    assert set(train) == {"input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions"}


def test_eval_offsets_are_none_outside_the_context(qa_tokenizer, long_example) -> None:
    examples, _, _ = long_example
    features = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    assert features["example_id"] == ["q"] * 5
    context = examples["context"][0]
    for ids, types, offsets in zip(features["input_ids"], features["token_type_ids"], features["offset_mapping"]):
        # token type 0: [CLS], question, first [SEP]; the last token is the closing [SEP].
        assert [o is None for o in offsets] == [t == 0 for t in types[:-1]] + [True]
        tokens = qa_tokenizer.convert_ids_to_tokens(ids)
        assert all(context[o[0] : o[1]] == token for o, token in zip(offsets, tokens) if o is not None)


def test_eval_features_through_datasets_map_keep_none(qa_tokenizer, long_example) -> None:
    examples, _, _ = long_example
    dataset = Dataset.from_dict(examples)
    features = dataset.map(
        prepare_eval_features,
        batched=True,
        remove_columns=dataset.column_names,
        fn_kwargs={"tokenizer": qa_tokenizer, **WINDOW},
    )
    direct = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    assert len(features) == 5
    assert features[0]["offset_mapping"][0] is None
    assert features[0]["offset_mapping"] == [list(o) if o is not None else None for o in direct["offset_mapping"][0]]


def test_features_need_a_fast_tokenizer(long_example) -> None:
    examples, _, _ = long_example
    with pytest.raises(ValueError, match="fast tokenizer"):
        prepare_eval_features(examples, SimpleNamespace(is_fast=False), **WINDOW)


def test_a_stride_larger_than_the_context_room_is_a_value_error(qa_tokenizer, long_example) -> None:
    # 20 - 3 special - 7 question tokens leave 10 context tokens; a stride of 10 cannot advance (Rust would panic).
    examples, _, _ = long_example
    with pytest.raises(ValueError, match="doc_stride=10"):
        prepare_train_features(examples, qa_tokenizer, max_seq_length=20, doc_stride=10)
    prepare_train_features(examples, qa_tokenizer, max_seq_length=20, doc_stride=9)


def test_an_unknown_column_is_named(qa_tokenizer, long_example) -> None:
    examples, _, _ = long_example
    with pytest.raises(ValueError, match="question_column='query'"):
        prepare_eval_features(examples, qa_tokenizer, question_column="query")


# ---------------------------------------------------------------------------------------------------- postprocess


def test_the_window_holding_the_answer_gives_its_exact_characters(qa_tokenizer, long_example) -> None:
    examples, answer, start = long_example
    features = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    offsets = features["offset_mapping"]
    start_logits = np.full((5, 20), -10.0)
    end_logits = np.full((5, 20), -10.0)
    # Window 0 is confident that the answer starts at its last context token "madrid" and ends on [SEP]: invalid.
    start_logits[0, token_at(offsets[0], char_start=start)] = 8.0
    end_logits[0, len(features["input_ids"][0]) - 1] = 9.0
    # Window 1 holds the whole answer.
    start_logits[1, token_at(offsets[1], char_start=start)] = 6.0
    end_logits[1, token_at(offsets[1], char_end=start + len(answer))] = 6.0
    prediction = postprocess_predictions(examples, features, start_logits, end_logits)["q"]
    assert prediction["text"] == answer
    assert (prediction["start_char"], prediction["end_char"]) == (start, start + len(answer))
    assert examples["context"][0][prediction["start_char"] : prediction["end_char"]] == answer


def answer_in_window_1(features: dict, answer: str, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits, (5, 20) zeros, but 5.0 where window 1 of `features` starts and ends `answer` (at
    character `start` of the context)."""
    start_logits, end_logits = np.zeros((5, 20)), np.zeros((5, 20))
    start_logits[1, token_at(features["offset_mapping"][1], char_start=start)] = 5.0
    end_logits[1, token_at(features["offset_mapping"][1], char_end=start + len(answer))] = 5.0
    return start_logits, end_logits


def test_postprocess_reads_datasets_and_logits_padded_by_a_trainer(qa_tokenizer, long_example) -> None:
    examples, answer, start = long_example
    features = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    start_logits, end_logits = answer_in_window_1(features, answer, start)
    # Trainer pads each batch's logits to a common width with -100; a pad value above that must still be ignored.
    pad = np.full((5, 6), 50.0)
    padded_start, padded_end = np.hstack([start_logits, pad]), np.hstack([end_logits, pad])
    from_dicts = postprocess_predictions(examples, features, start_logits, end_logits)
    from_datasets = postprocess_predictions(
        Dataset.from_dict(examples), Dataset.from_dict(features), padded_start, padded_end
    )
    assert from_datasets == from_dicts and from_dicts["q"]["text"] == answer


def test_padding_past_a_feature_takes_no_place_among_its_top_tokens(qa_tokenizer, long_example) -> None:
    """Features batched with a longer one carry logits past their tokens that may outrank them: the n-best spans,
    and so the answer and its score, are those of the features alone."""
    examples, answer, start = long_example
    features = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    start_logits, end_logits = answer_in_window_1(features, answer, start)
    pad = np.full((5, 6), 50.0)
    alone = postprocess_predictions(examples, features, start_logits, end_logits, n_best_size=3)
    padded = postprocess_predictions(
        examples, features, np.hstack([start_logits, pad]), np.hstack([end_logits, pad]), n_best_size=3
    )
    assert padded == alone and alone["q"]["text"] == answer


def test_the_same_span_from_two_windows_counts_once(qa_tokenizer) -> None:
    context, answer, start = words_context(30, ["paris"], 13)  # context token 13: in windows 1 and 2
    examples = {"id": ["q"], "question": [QUESTION], "context": [context]}
    features = prepare_eval_features(examples, qa_tokenizer, **WINDOW)
    start_logits, end_logits = np.zeros((5, 20)), np.zeros((5, 20))
    for f, value in ((1, 3.0), (2, 4.0)):
        start_logits[f, token_at(features["offset_mapping"][f], char_start=start)] = value
        end_logits[f, token_at(features["offset_mapping"][f], char_start=start)] = value
    prediction = postprocess_predictions(examples, features, start_logits, end_logits)["q"]
    assert (prediction["text"], prediction["logit"]) == (answer, 8.0)
    spans = [(n["start_char"], n["end_char"]) for n in prediction["n_best"]]
    assert len(spans) == len(set(spans))


# One feature: [CLS] 7 question tokens [SEP] 12 context tokens [SEP]; context token c is at index 9 + c.
SHORT_CONTEXT = "paris is the capital of france . the dog ran fast ."
CTX = 9
SEP = CTX + 12
ONE_WINDOW = {"max_seq_length": 64, "doc_stride": 16}
VALID = (CTX + 9, CTX + 10)  # "ran fast"
# Each decoy pair scores 12 + 12 against the valid span's 10 + 10; mixed with the valid tokens it is invalid too.
DECOYS = {
    "cls": (0, 0),
    "question": (1, 2),
    "end_before_start": (CTX + 3, CTX + 1),
    "sep": (CTX + 2, SEP),
    "too_long": (CTX + 0, CTX + 5),  # 6 tokens, max_answer_length 3
    "padding": (SEP + 2, SEP + 2),  # past the feature's tokens: logits padded by a batch
}


@pytest.mark.parametrize("decoy", sorted(DECOYS))
def test_the_best_valid_span_wins_over_a_better_invalid_one(qa_tokenizer, decoy: str) -> None:
    examples = {"id": ["q"], "question": [QUESTION], "context": [SHORT_CONTEXT]}
    features = prepare_eval_features(examples, qa_tokenizer, **ONE_WINDOW)
    assert len(features["input_ids"][0]) == SEP + 1
    start_logits, end_logits = np.full((1, SEP + 4), -10.0), np.full((1, SEP + 4), -10.0)
    start_logits[0, VALID[0]], end_logits[0, VALID[1]] = 10.0, 10.0
    start_logits[0, DECOYS[decoy][0]], end_logits[0, DECOYS[decoy][1]] = 12.0, 12.0
    prediction = postprocess_predictions(examples, features, start_logits, end_logits, max_answer_length=3)["q"]
    assert prediction["text"] == "ran fast"
    assert SHORT_CONTEXT[prediction["start_char"] : prediction["end_char"]] == "ran fast"


def test_without_a_valid_span_the_answer_is_empty(qa_tokenizer) -> None:
    examples = {"id": ["q"], "question": [QUESTION], "context": [SHORT_CONTEXT]}
    features = prepare_eval_features(examples, qa_tokenizer, **ONE_WINDOW)
    start_logits, end_logits = np.zeros((1, SEP + 1)), np.zeros((1, SEP + 1))
    start_logits[0, CTX + 5], end_logits[0, CTX + 2] = 1.0, 1.0  # the only candidate ends before it starts
    prediction = postprocess_predictions(examples, features, start_logits, end_logits, n_best_size=1)["q"]
    assert prediction == {"text": "", "start_char": 0, "end_char": 0, "score": 0.0, "logit": None, "n_best": []}


def test_scores_are_a_softmax_over_the_n_best(qa_tokenizer) -> None:
    examples = {"id": ["q"], "question": [QUESTION], "context": [SHORT_CONTEXT]}
    features = prepare_eval_features(examples, qa_tokenizer, **ONE_WINDOW)
    rng = np.random.default_rng(0)
    start_logits, end_logits = rng.normal(size=(1, SEP + 1)), rng.normal(size=(1, SEP + 1))
    prediction = postprocess_predictions(examples, features, start_logits, end_logits, n_best_size=5)["q"]
    n_best = prediction["n_best"]
    assert 1 < len(n_best) <= 5
    scores = [n["score"] for n in n_best]
    assert sum(scores) == pytest.approx(1.0)
    assert scores == sorted(scores, reverse=True) and prediction["score"] == scores[0]
    logits = np.array([n["start_logit"] + n["end_logit"] for n in n_best])
    np.testing.assert_allclose(scores, np.exp(logits) / np.exp(logits).sum())
    assert all(SHORT_CONTEXT[n["start_char"] : n["end_char"]] == n["text"] for n in n_best)


def test_logits_must_match_the_features(qa_tokenizer) -> None:
    examples = {"id": ["q"], "question": [QUESTION], "context": [SHORT_CONTEXT]}
    features = prepare_eval_features(examples, qa_tokenizer, **ONE_WINDOW)
    with pytest.raises(ValueError, match="F = 1 features"):
        postprocess_predictions(examples, features, np.zeros((2, 30)), np.zeros((2, 30)))


# ---------------------------------------------------------------------------------------------------- data


SQUAD = {
    "version": "1.1",
    "data": [
        {
            "title": "Capitals",
            "paragraphs": [
                {
                    "context": "paris is the capital of france .",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "capital of france ?",
                            "answers": [{"text": "paris", "answer_start": 0}],
                        },
                        {
                            "id": "q2",
                            "question": "what is paris ?",
                            "answers": [
                                {"text": "the capital of france", "answer_start": 9},
                                {"text": "capital", "answer_start": 13},
                            ],
                        },
                    ],
                },
                {
                    "context": "rome is the capital of italy .",
                    "qas": [{"id": "q3", "question": "italy ?", "answers": [{"text": "rome", "answer_start": 0}]}],
                },
            ],
        }
    ],
}


def test_load_squad_json_flattens_to_the_hub_schema(tmp_path: Path) -> None:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(SQUAD), encoding="utf-8")
    dataset = load_squad_json(path)
    assert dataset.features == SQUAD_FEATURES
    assert dataset["id"][:] == ["q1", "q2", "q3"]
    assert dataset[1] == {
        "id": "q2",
        "title": "Capitals",
        "context": "paris is the capital of france .",
        "question": "what is paris ?",
        "answers": {"text": ["the capital of france", "capital"], "answer_start": [9, 13]},
    }
    assert dataset[2]["context"] == "rome is the capital of italy ."
    check_answers(dataset)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "the top level is a list"),
        ('{"data": [{"paragraphs": [{"context": "x"}]}]}', r"data\[0\].paragraphs\[0\] has no 'qas' field"),
        (
            '{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "a", "question": "b", '
            '"answers": [{"text": "x", "answer_start": "0"}]}]}]}]}',
            r"data\[0\].paragraphs\[0\].qas\[0\].answers\[0\].answer_start is '0', expected a int",
        ),
        ('{"data": []}', "holds no questions"),
    ],
)
def test_load_squad_json_names_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        load_squad_json(path)
    assert str(path) in str(error.value)


def squad_rows(**answers_of: dict) -> Dataset:
    """Two examples over one context, "a" answered correctly; `answers_of` replaces answers by id."""
    answers = {"a": {"text": ["paris"], "answer_start": [0]}, "b": {"text": ["france"], "answer_start": [24]}}
    answers.update(answers_of)
    return Dataset.from_dict(
        {
            "id": list(answers),
            "question": ["where ?", "what ?"],
            "context": ["paris is the capital of france ."] * 2,
            "answers": list(answers.values()),
        }
    )


def test_check_answers_accepts_answers_found_at_their_start() -> None:
    check_answers(squad_rows())


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"text": ["france"], "answer_start": [23]}, r"'france' is not at answer_start=23: the context reads ' franc'"),
        ({"text": ["france", "paris"], "answer_start": [24]}, "2 texts but 1 answer_start values"),
        ({"text": [""], "answer_start": [0]}, "text is '', expected a non-empty text"),
        ({"text": [], "answer_start": []}, "has no answer"),
    ],
)
def test_check_answers_names_the_bad_example(answers: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        check_answers(squad_rows(b=answers))
    assert "train example 'b' (row 1)" in str(error.value)


def test_unanswered_examples_pass_only_outside_training() -> None:
    unanswered = squad_rows(b={"text": [], "answer_start": []})
    check_answers(unanswered, split_name="validation")
    with pytest.raises(ValueError, match="validation example 'b'"):
        check_answers(unanswered, split_name="validation", require_answer=True)


def test_check_answers_names_the_row_without_ids_and_a_missing_column() -> None:
    rows = squad_rows(a={"text": ["rome"], "answer_start": [0]}).remove_columns("id")
    with pytest.raises(ValueError, match="train example 0 \\(row 0\\)"):
        check_answers(rows)
    with pytest.raises(ValueError, match="column='passage'"):
        check_answers(rows, context_column="passage")


# ---------------------------------------------------------------------------------------------------- inference


class FixedSpanForQuestionAnswering(torch.nn.Module):
    """A stand-in QA model: start logit 10 on `start_word`'s tokens, end logit 10 on `end_word`'s, 0 elsewhere."""

    def __init__(self, start_id: int, end_id: int) -> None:
        super().__init__()
        self.start_id, self.end_id = start_id, end_id
        self.config = SimpleNamespace(max_position_embeddings=64)
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the module a device

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    def forward(self, input_ids: torch.Tensor, **kwargs: torch.Tensor) -> QuestionAnsweringModelOutput:
        return QuestionAnsweringModelOutput(
            start_logits=(input_ids == self.start_id).float() * 10, end_logits=(input_ids == self.end_id).float() * 10
        )


def test_answer_question_reads_the_answer_from_the_right_window(qa_tokenizer, monkeypatch) -> None:
    calls = []
    for name in ("prepare_eval_features", "postprocess_predictions"):
        original = getattr(inference, name)
        monkeypatch.setattr(inference, name, lambda *a, _f=original, _n=name, **k: calls.append(_n) or _f(*a, **k))
    # Words 28 and 29 lie only in the last window, shorter than the others: padded in the batch.
    context, answer, start = words_context(30, ANSWER_WORDS, 28)
    start_id, end_id = qa_tokenizer.convert_tokens_to_ids(ANSWER_WORDS)
    model = FixedSpanForQuestionAnswering(start_id, end_id)
    result = answer_question((model, qa_tokenizer), QUESTION, context, **WINDOW)
    assert result["answer"] == answer and (result["start"], result["end"]) == (start, start + len(answer))
    assert 0.0 < result["score"] <= 1.0
    assert calls == ["prepare_eval_features", "postprocess_predictions"]
    with pytest.raises(ValueError, match="not both"):
        answer_question((model, qa_tokenizer), QUESTION, context, tokenizer=qa_tokenizer, **WINDOW)


class RowCountingForQuestionAnswering(FixedSpanForQuestionAnswering):
    """`FixedSpanForQuestionAnswering` that notes the rows (windows) of each forward pass."""

    def __init__(self, start_id: int, end_id: int) -> None:
        super().__init__(start_id, end_id)
        self.rows: list[int] = []

    def forward(self, input_ids: torch.Tensor, **kwargs: torch.Tensor) -> QuestionAnsweringModelOutput:
        self.rows.append(len(input_ids))
        return super().forward(input_ids, **kwargs)


def test_answer_question_many_runs_batch_size_windows_per_forward_pass(qa_tokenizer) -> None:
    """batch_size counts windows, as transformers' chunked pipelines (token classification) count a batch: a long
    context's windows are split across forward passes, and the answers are those of one pass over all windows."""
    long_context, answer, start = words_context(30, ANSWER_WORDS, 28)
    contexts = [long_context, SHORT_CONTEXT, long_context]
    examples = {"id": ["0", "1", "2"], "question": [QUESTION] * 3, "context": contexts}
    windows = len(prepare_eval_features(examples, qa_tokenizer, **WINDOW)["input_ids"])
    assert windows > 2 * len(contexts)  # several windows a question
    model = RowCountingForQuestionAnswering(*qa_tokenizer.convert_tokens_to_ids(ANSWER_WORDS))
    answers = list(
        inference.answer_question_many((model, qa_tokenizer), [QUESTION] * 3, contexts, batch_size=2, **WINDOW)
    )
    assert max(model.rows) <= 2 and sum(model.rows) == windows
    model.rows.clear()
    assert (
        list(
            inference.answer_question_many(
                (model, qa_tokenizer), [QUESTION] * 3, contexts, batch_size=windows, **WINDOW
            )
        )
        == answers
    )
    assert model.rows == [windows]
    assert (answers[0]["answer"], answers[0]["start"]) == (answer, start) and answers[2] == answers[0]
    model.rows.clear()  # one question: its windows batch_size at a time, one per pass by default
    assert (
        inference.answer_question((model, qa_tokenizer), QUESTION, long_context, batch_size=4, **WINDOW) == answers[0]
    )
    assert max(model.rows) == 4 and len(model.rows) > 1
    model.rows.clear()
    assert inference.answer_question((model, qa_tokenizer), QUESTION, long_context, **WINDOW) == answers[0]
    assert set(model.rows) == {1}


# "Washington" is three WordPiece tokens here (was ##h ##ington); each Chinese character is a word of its own.
SUBWORD_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "went", "?", "george", "was", "##h", "##ington"]
SUBWORD_VOCAB += ["to", "paris", ".", "我", "去", "北", "京"]
WASHINGTON = "George Washington went to Paris ."  # was [7:10], ##h [10:11], ##ington [11:17], went [18:22]


@pytest.fixture(scope="module")
def subword_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> BertTokenizerFast:
    path = tmp_path_factory.mktemp("subword") / "vocab.txt"
    path.write_text("\n".join(SUBWORD_VOCAB) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path))


@pytest.mark.parametrize(
    ("context", "start_token", "end_token", "token_span", "word_span"),
    [
        (WASHINGTON, "##h", "went", (10, 22), (7, 22)),  # "hington went" -> "Washington went"
        (WASHINGTON, "george", "was", (0, 10), (0, 17)),  # "George Was" -> "George Washington"
        (WASHINGTON, "##h", "##h", (10, 11), (7, 17)),  # "h" -> "Washington"
        (WASHINGTON, "went", "paris", (18, 31), (18, 31)),  # whole words already
        ("我去北京", "北", "北", (2, 3), (2, 3)),  # no spaces: the tokenizer's words are the characters
    ],
)
def test_answer_question_widens_the_answer_to_whole_words(
    subword_tokenizer, context: str, start_token: str, end_token: str, token_span: tuple, word_span: tuple
) -> None:
    """As transformers 4's question-answering pipeline (align_to_words=True): the span's first and last tokens are
    widened to the tokenizer's words; align_to_words=False keeps the tokens' characters, the span evaluation scores
    (run_qa.py's postprocessing, `postprocess_predictions`)."""
    model = FixedSpanForQuestionAnswering(*subword_tokenizer.convert_tokens_to_ids([start_token, end_token]))
    found = answer_question((model, subword_tokenizer), "who went ?", context)
    start, end = word_span
    assert (found["answer"], found["start"], found["end"]) == (context[start:end], start, end)
    assert found["score"] > 0.5
    for align_to_words, (start, end) in ((True, word_span), (False, token_span)):
        result = answer_question((model, subword_tokenizer), "who went ?", context, align_to_words=align_to_words)
        assert result == {"answer": context[start:end], "start": start, "end": end, "score": found["score"]}
    examples = {"id": ["q"], "question": ["who went ?"], "context": [context]}
    features = prepare_eval_features(examples, subword_tokenizer)
    logits = model(torch.tensor(features["input_ids"]))
    (evaluated,) = postprocess_predictions(
        examples, features, logits.start_logits.numpy(), logits.end_logits.numpy()
    ).values()
    assert (evaluated["start_char"], evaluated["end_char"]) == token_span


def test_postprocess_needs_unique_example_ids(qa_tokenizer) -> None:
    examples = {"id": ["q", "q"], "question": [QUESTION] * 2, "context": [SHORT_CONTEXT] * 2}
    features = prepare_eval_features(examples, qa_tokenizer, **ONE_WINDOW)
    with pytest.raises(ValueError, match=r"repeated: \['q'\]"):
        postprocess_predictions(examples, features, np.zeros((2, SEP + 1)), np.zeros((2, SEP + 1)))


@pytest.fixture
def qa_model_dir(tiny_config, qa_tokenizer, tmp_path: Path) -> Path:
    """A randomly initialised tiny BertScratchForQuestionAnswering saved with its tokenizer."""
    BertScratchForQuestionAnswering(tiny_config).save_pretrained(tmp_path)
    qa_tokenizer.save_pretrained(tmp_path)
    return tmp_path


def test_answer_question_end_to_end_with_a_saved_model(qa_model_dir: Path) -> None:
    context, _, _ = words_context(50, ANSWER_WORDS, 30)  # several 32-token windows
    result = answer_question(qa_model_dir, QUESTION, context, max_seq_length=32, doc_stride=8)
    assert set(result) == {"answer", "start", "end", "score"}
    assert result["answer"] and context[result["start"] : result["end"]] == result["answer"]
    assert 0.0 < result["score"] <= 1.0
    model = BertScratchForQuestionAnswering.from_pretrained(qa_model_dir)
    tokenizer = load_tokenizer(str(qa_model_dir))
    assert answer_question((model, tokenizer), QUESTION, context, max_seq_length=32, doc_stride=8) == result


def test_answer_question_refuses_a_checkpoint_without_a_qa_head(tiny_config, qa_tokenizer, tmp_path: Path) -> None:
    BertScratchForMaskedLM(tiny_config).save_pretrained(tmp_path)
    qa_tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"\*ForQuestionAnswering"):
        answer_question(tmp_path, QUESTION, SHORT_CONTEXT)
    with pytest.raises(ValueError, match=r"\*ForQuestionAnswering"):
        answer_question((BertScratchForMaskedLM(tiny_config), qa_tokenizer), QUESTION, SHORT_CONTEXT)


@pytest.mark.parametrize(
    ("question", "context", "kwargs", "message"),
    [
        ("  ", SHORT_CONTEXT, {}, "Question is empty"),
        (QUESTION, "", {}, "Context is empty"),
        (
            QUESTION,
            SHORT_CONTEXT,
            {"max_seq_length": 384},
            "max_seq_length 384 exceeds the model.s max_position_embeddings 64: use --max_seq_length 64 or less",
        ),
    ],
)
def test_answer_question_rejects_bad_input(
    qa_model_dir, question: str, context: str, kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        answer_question(qa_model_dir, question, context, **kwargs)
