"""Sentence-pair sampling for BERT's next-sentence-prediction (NSP) objective.

transformers 5 no longer ships `TextDatasetForNextSentencePrediction`, so this module rebuilds its sampling as a
batched `datasets.map` function: where the rows include blank ones (WikiText, plain-text books) consecutive non-empty
rows form a document and a blank row ends it, and where they include none (a CSV of reviews, a JSON Lines crawl such
as FineWeb-edu) each row is a document of its own; each row is split into sentences, and each example packs segment
A from a run of sentences and segment B either from the sentences that follow in the same document (IsNext, label
0, probability 1 - `random_next_probability`) or from a random other document (NotNext, label 1). The MLM masking of
the pairs is `DataCollatorForLanguageModeling`'s, which pads `token_type_ids` and keeps `next_sentence_label`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from transformers import PreTrainedTokenizerBase

# A sentence ends at ., ! or ? followed by whitespace; good enough for pairing, no language model needed.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _is_blank(text: str | None) -> bool:
    return not text or text.isspace()


def split_documents(texts: list[str]) -> list[list[str]]:
    """Documents as lists of sentences. Where `texts` has blank rows, consecutive non-empty rows form one document
    and blank rows separate them; where it has none, each row is one document (one review, one web page per row).
    A batch of a blank-separated corpus that happens to hold no blank row is read row by row as well."""
    one_per_row = not any(_is_blank(text) for text in texts)
    documents: list[list[str]] = [[]]
    for text in texts:
        if not _is_blank(text):
            documents[-1].extend(s for s in _SENTENCE_END.split(text.strip()) if s)
        if (one_per_row or _is_blank(text)) and documents[-1]:
            documents.append([])
    return [doc for doc in documents if doc]


def _truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, from a random end, until both fit in `max_tokens` (as BERT's data script does)."""
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        del longer[0 if rng.random() < 0.5 else -1]


def _pairs_of_document(
    doc: list[list[int]],
    others: list[list[list[int]]],
    max_tokens: int,
    random_next_probability: float,
    rng: random.Random,
) -> list[tuple[list[int], list[int], int]]:
    """(segment A, segment B, label) pairs packing `doc`'s tokenised sentences into `max_tokens`-long examples."""
    pairs, chunk, length, i = [], [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= max_tokens:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for sent in chunk[:a_end] for t in sent]
            if others and (len(chunk) == 1 or rng.random() < random_next_probability):
                other = rng.choice(others)
                start = rng.randrange(len(other))
                # B fills the room A leaves; an A that fills the pair alone leaves B half, and both are cut to fit
                room = max_tokens - len(a)
                b = [t for sent in other[start:] for t in sent][: room if room > 0 else max(1, max_tokens // 2)]
                label = 1
                i -= len(chunk) - a_end  # the unused sentences of this chunk start the next example
            else:
                b, label = [t for sent in chunk[a_end:] for t in sent], 0
            if a and b:
                _truncate_pair(a, b, max_tokens, rng)
                pairs.append((a, b, label))
            chunk, length = [], 0
        i += 1
    return pairs


def make_nsp_pairs_function(
    tokenizer: PreTrainedTokenizerBase,
    text_column: str,
    max_seq_length: int,
    random_next_probability: float,
    seed: int,
) -> Callable[[dict[str, list], list[int]], dict[str, list]]:
    """A batched `datasets.map` function (with `with_indices=True`) from raw text rows to NSP pair examples.

    Each output example has `input_ids` and `token_type_ids` ([CLS] A [SEP] B [SEP], at most `max_seq_length`
    tokens), `special_tokens_mask`, and `next_sentence_label` (0 IsNext, 1 NotNext). Sampling is seeded by `seed`
    and the batch's first row index, so results do not depend on `num_proc`.
    """
    max_tokens = max_seq_length - 3  # [CLS] A [SEP] B [SEP]

    def nsp_pairs(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        rng = random.Random(seed * 1_000_003 + (indices[0] if indices else 0))
        documents = split_documents(batch[text_column])
        encoded = [tokenizer(doc, add_special_tokens=False, verbose=False)["input_ids"] for doc in documents]
        encoded = [[s for s in doc if s] for doc in encoded]
        out: dict[str, list] = {
            "input_ids": [],
            "token_type_ids": [],
            "special_tokens_mask": [],
            "next_sentence_label": [],
        }
        for d, doc in enumerate(encoded):
            others = [other for o, other in enumerate(encoded) if o != d and other]
            for a, b, label in _pairs_of_document(doc, others, max_tokens, random_next_probability, rng):
                out["input_ids"].append(
                    [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id]
                )
                out["token_type_ids"].append([0] * (len(a) + 2) + [1] * (len(b) + 1))
                out["special_tokens_mask"].append([1] + [0] * len(a) + [1] + [0] * len(b) + [1])
                out["next_sentence_label"].append(label)
        return out

    return nsp_pairs


__all__ = ["make_nsp_pairs_function", "split_documents"]
