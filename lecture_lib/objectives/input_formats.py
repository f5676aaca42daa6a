"""RoBERTa's four input formats (Liu et al. 2019, Section 4.2): how documents are cut into training rows.

=================  ==================================================================  ========
format             a row is                                                            NSP loss
=================  ==================================================================  ========
SEGMENT-PAIR       two segments of several sentences each (BERT's own pairs)           kept
SENTENCE-PAIR      two single natural sentences                                        kept
FULL-SENTENCES     whole sentences packed up to the length, across documents, with a   removed
                   separator token between two documents
DOC-SENTENCES      the same, stopping at the end of each document                      removed
=================  ==================================================================  ========

SEGMENT-PAIR is :func:`lecture_lib.objectives.sentence_pairs.make_pairs`; with NSP, B is the true
continuation half of the time and comes from another document otherwise. The rows come out as
:func:`~lecture_lib.objectives.sentence_pairs.collate_pairs` gives them, for
:meth:`lecture_lib.pretraining.PretrainingData.from_rows`.

Taught in: 06_roberta_spanbert ("The input-format study").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import torch

from lecture_lib.objectives.sentence_pairs import (
    NUM_SPECIAL_IN_PAIR,
    SentencePair,
    collate_pairs,
    make_pairs,
    truncate_pair,
)
from lecture_lib.runtime import seed_of

# Each format, and whether RoBERTa's study trained it with the NSP loss.
FORMATS = {"segment-pair": True, "sentence-pair": True, "full-sentences": False, "doc-sentences": False}

Documents = Sequence[Sequence[Sequence[int]]]  # documents of sentences of token ids


def frame_roberta_ids(
    ids_a: Sequence[int], ids_b: Sequence[int] | None = None, *, bos_token_id: int = 0, eos_token_id: int = 2
) -> list[int]:
    """RoBERTa's framing: ``<s> A </s>``, or ``<s> A </s></s> B </s>`` for a pair (no segment ids: one type).

    >>> frame_roberta_ids([10, 11], [12])
    [0, 10, 11, 2, 2, 12, 2]

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """
    framed = [bos_token_id, *ids_a, eos_token_id]
    return framed if ids_b is None else [*framed, eos_token_id, *ids_b, eos_token_id]


def make_sentence_pairs(
    documents: Documents, max_num_tokens: int, *, seed: int = 0, random_next_prob: float = 0.5
) -> list[SentencePair]:
    """SENTENCE-PAIR rows: sentence A, then its document's next sentence (IsNext) or, with
    ``random_next_prob``, a sentence of another document (NotNext); every sentence is an A once at most.

    >>> docs = [[[1, 1], [2], [3, 3, 3]], [[7], [8, 8]]]
    >>> [(p.tokens_a, p.tokens_b, p.label) for p in make_sentence_pairs(docs, 8, seed=0)]
    [([1, 1], [8, 8], 1), ([3, 3, 3], [8, 8], 1), ([7], [8, 8], 0)]

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    if sum(bool(doc) for doc in docs) < 2:
        raise ValueError(
            f"expected at least 2 non-empty documents (a random B comes from another one), "
            f"got {sum(bool(doc) for doc in docs)}"
        )
    rng = random.Random(seed_of("single-sentence pairs", seed))
    pairs = []
    for d, doc in enumerate(docs):
        for i in range(0, len(doc), 2):
            if rng.random() < random_next_prob or i + 1 == len(doc):
                other = rng.choice([k for k in range(len(docs)) if k != d and docs[k]])
                b, is_random = rng.choice(docs[other]), True
            else:
                b, is_random = doc[i + 1], False
            pairs.append(SentencePair(*truncate_pair(doc[i], b, max_num_tokens, rng), is_random))
    return pairs


def pack_sentences(
    documents: Documents, max_num_tokens: int, *, cross_documents: bool, separator: int | None = None
) -> list[list[int]]:
    """FULL-SENTENCES (``cross_documents=True``: ``separator`` between two documents) or DOC-SENTENCES rows:
    whole sentences in order, a new row whenever the next one would not fit (a sentence longer than the
    row is cut to it).

    >>> docs = [[[1, 1], [2]], [[3, 3, 3], [4]]]
    >>> pack_sentences(docs, 4, cross_documents=True, separator=0), pack_sentences(docs, 4, cross_documents=False)
    ([[1, 1, 2, 0], [3, 3, 3, 4]], [[1, 1, 2], [3, 3, 3, 4]])

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    if cross_documents and separator is None:
        raise ValueError("FULL-SENTENCES crosses documents: expected a separator token id")
    rows, row = [], []
    for doc in documents:
        if row and (not cross_documents or len(row) == max_num_tokens):
            rows.append(row)
            row = []
        elif row:
            row.append(separator)  # a boundary that falls between two rows needs none
        for sentence in doc:
            if row and len(row) + len(sentence) > max_num_tokens:
                rows.append(row)
                row = []
            row.extend(list(sentence)[:max_num_tokens])
    return rows + [row] if row else rows


@dataclass
class Segment:
    """One segment, no second one and no pair label: a row of FULL-SENTENCES or DOC-SENTENCES."""

    tokens_a: list[int]
    tokens_b: None = None
    label: int = 0  # collate_pairs reads one; collate_segments drops it


def collate_segments(
    segments: Sequence[Sequence[int]], *, length: int, cls_token_id: int, sep_token_id: int, pad_token_id: int
) -> dict[str, torch.Tensor]:
    """Single segments framed ``[CLS] x [SEP]`` and right-padded: :func:`collate_pairs`'s tensors with no pair
    label; a document separator inside a segment is a special token too (never masked).

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    rows = collate_pairs(
        [Segment(list(s)) for s in segments],
        length=length,
        cls_token_id=cls_token_id,
        sep_token_id=sep_token_id,
        pad_token_id=pad_token_id,
        label_name="no label",
    )
    del rows["no label"]
    rows["special_tokens_mask"] |= rows["input_ids"] == sep_token_id
    return rows


def format_rows(
    name: str,
    documents: Documents,
    *,
    length: int,
    cls_token_id: int,
    sep_token_id: int,
    pad_token_id: int,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """The collated rows of format ``name`` (a key of :data:`FORMATS`), ``length`` positions each; the pair
    formats carry ``next_sentence_label``.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    ids = dict(length=length, cls_token_id=cls_token_id, sep_token_id=sep_token_id, pad_token_id=pad_token_id)
    if name in ("segment-pair", "sentence-pair"):
        cut = make_pairs if name == "segment-pair" else make_sentence_pairs
        return collate_pairs(cut(documents, length - NUM_SPECIAL_IN_PAIR, seed=seed), **ids)
    if name in ("full-sentences", "doc-sentences"):
        segments = pack_sentences(
            documents, length - 2, cross_documents=name == "full-sentences", separator=sep_token_id
        )
        return collate_segments(segments, **ids)
    raise ValueError(f"expected an input format in {list(FORMATS)}, got {name!r}")
