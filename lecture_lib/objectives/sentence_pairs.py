"""Next-sentence prediction: sentence pairs [CLS] A [SEP] B [SEP], where B follows A or comes from elsewhere.

Half of the time segment B is the text that really follows A in the same document (label 0,
IsNext); half of the time it is taken from another document (label 1, NotNext), so the [CLS]
vector must learn something about how two pieces of text relate (Devlin et al. 2019). Labels
follow Hugging Face's ``next_sentence_label``.

Pairs are cut as in BERT's data preparation: consecutive sentences of a document are gathered
until the token budget is reached, split at a random sentence boundary into A and B, and then
:func:`truncate_pair` trims the longer segment until the pair fits, so both segments survive.

Sentence-order prediction (ALBERT, Lan et al. 2020) keeps the pairs whose B truly follows A and swaps
half of them (:func:`make_order_pairs`): both segments always come from one document, so the topic says
nothing and only coherence is left to learn. Labels follow Hugging Face's ``sentence_order_label``:
0 = original order, 1 = swapped.

Taught in: 04_bert_pretraining ("Next-sentence prediction"), 07_albert ("Sentence-order prediction").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import torch

from lecture_lib.runtime import seed_of
from lecture_lib.tokenization.wordpiece import frame_ids

IS_NEXT, NOT_NEXT = 0, 1
IN_ORDER, SWAPPED = 0, 1
NUM_SPECIAL_IN_PAIR = 3  # [CLS], [SEP], [SEP]


@dataclass
class SentencePair:
    """Token ids of segments A and B (no special tokens) and whether B was drawn at random."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool

    @property
    def label(self) -> int:
        return NOT_NEXT if self.is_random_next else IS_NEXT


@dataclass
class SentenceOrderPair:
    """Token ids of segments A and B (no special tokens) and whether they were swapped."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_swapped: bool

    @property
    def label(self) -> int:
        return SWAPPED if self.is_swapped else IN_ORDER


def truncate_pair(
    tokens_a: Sequence[int], tokens_b: Sequence[int], max_num_tokens: int, rng: random.Random | None = None
) -> tuple[list[int], list[int]]:
    """Trim the longer segment (B on a tie) one token at a time until len(A) + len(B) <= ``max_num_tokens``.

    Without ``rng`` tokens go from the end, which is the "longest_first" truncation of Hugging Face
    tokenizers; with ``rng`` each token goes from the front or the back at random, as in BERT's
    pretraining data, so the model does not learn that segments always end where sentences end.
    Both segments keep at least one token.

    >>> truncate_pair([1, 2, 3, 4, 5], [6, 7], 4)
    ([1, 2], [6, 7])

    Taught in: 04_bert_pretraining ("Next-sentence prediction").
    """
    if max_num_tokens < 2:
        raise ValueError(f"expected max_num_tokens >= 2 (one token per segment), got {max_num_tokens}")
    if not tokens_a or not tokens_b:
        raise ValueError(f"expected two non-empty segments, got lengths {len(tokens_a)} and {len(tokens_b)}")
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng is not None and rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


def _random_segment(
    documents: list[list[list[int]]], avoid: int, target: int, rng: random.Random, sources: list[int] | None
) -> list[int]:
    """Consecutive sentences of a random other document (one of ``sources`` when given), from a random sentence,
    until ``target`` tokens."""
    if sources is None:
        other = rng.randrange(len(documents) - 1)
        other += other >= avoid  # uniform over the documents other than ``avoid``
    else:
        other = rng.choice(sources)
    document = documents[other]
    segment: list[int] = []
    for sentence in document[rng.randrange(len(document)) :]:
        segment.extend(sentence)
        if len(segment) >= target:
            break
    return segment


def _kept_sources(docs: list[list[list[int]]], negative_sources: Sequence[Sequence[int]]) -> list[list[int]]:
    """:func:`make_pairs`' ``negative_sources`` re-indexed over the non-empty documents, without the document
    itself; a non-empty document left without a source is an error."""
    if len(negative_sources) != len(docs):
        raise ValueError(
            f"expected one list of negative sources per document ({len(docs)}), got {len(negative_sources)}"
        )
    kept = {old: new for new, old in enumerate(i for i, doc in enumerate(docs) if doc)}
    sources = []
    for d, listed in enumerate(negative_sources):
        if d in kept:
            sources.append([kept[j] for j in listed if j in kept and j != d])
            if not sources[-1]:
                raise ValueError(f"document {d} has no other non-empty document among its negative sources {listed}")
    return sources


def make_pairs(
    documents: Sequence[Sequence[Sequence[int]]],
    max_num_tokens: int,
    *,
    seed: int = 0,
    random_next_prob: float = 0.5,
    negative_sources: Sequence[Sequence[int]] | None = None,
) -> list[SentencePair]:
    """Cut NSP pairs from ``documents`` (each a list of sentences, each a list of token ids).

    ``max_num_tokens`` is the budget for A + B, i.e. the sequence length minus 3 special tokens.
    When B is random, the sentences of the chunk that B did not use start the next chunk (as in BERT).
    Two departures from BERT, because our documents are short: a chunk closes only once it holds two
    sentences, even past the budget (truncation then trims it), and a last sentence left alone is
    skipped. BERT gives such one-sentence chunks a random B, which on short documents would make
    most pairs NotNext.

    ``negative_sources[d]`` lists the documents (indices into ``documents``) that document ``d``'s NotNext
    segments may come from, say those about the same people, so that the topic does not give a NotNext away;
    by default every other document. Empty documents and ``d`` itself are dropped from each list.

    >>> docs = [[[1], [2]], [[3], [4]], [[5], [6]]]
    >>> pairs = make_pairs(docs, 4, random_next_prob=1.0, negative_sources=[[2], [2], [0]])
    >>> [(p.tokens_a, p.tokens_b) for p in pairs]
    [([1], [5, 6]), ([3], [6]), ([5], [1, 2])]

    Taught in: 04_bert_pretraining ("Next-sentence prediction").
    """
    if not 0.0 <= random_next_prob <= 1.0:
        raise ValueError(f"expected random_next_prob in [0, 1], got {random_next_prob}")
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    sources = None if negative_sources is None else _kept_sources(docs, negative_sources)
    docs = [doc for doc in docs if doc]
    if len(docs) < 2:
        raise ValueError(
            f"expected at least 2 non-empty documents (a random B comes from another one), got {len(docs)}"
        )
    rng = random.Random(seed_of("sentence pairs", seed))
    pairs = []
    for d, doc in enumerate(docs):
        chunk: list[list[int]] = []
        length, i = 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if len(chunk) >= 2 and (length >= max_num_tokens or i == len(doc) - 1):
                split = rng.randint(1, len(chunk) - 1)
                a = [t for sentence in chunk[:split] for t in sentence]
                if rng.random() < random_next_prob:
                    b = _random_segment(docs, d, max(1, max_num_tokens - len(a)), rng, sources and sources[d])
                    i -= len(chunk) - split  # put the unused sentences back
                    is_random = True
                else:
                    b = [t for sentence in chunk[split:] for t in sentence]
                    is_random = False
                pairs.append(SentencePair(*truncate_pair(a, b, max_num_tokens, rng), is_random))
                chunk, length = [], 0
            i += 1
    return pairs


def make_order_pairs(
    documents: Sequence[Sequence[Sequence[int]]], max_num_tokens: int, *, seed: int = 0, swap_prob: float = 0.5
) -> list[SentenceOrderPair]:
    """Cut sentence-order pairs: NSP's chunks with B always the true continuation, swapped with ``swap_prob``.

    The same chunks as :func:`make_pairs` with ``random_next_prob=0``; each pair is then kept (label 0)
    or swapped, B before A (label 1). Worked example, three documents of one-token sentences:

    ========================  ============================  =====
    document                  pair (A | B)                  label
    ========================  ============================  =====
    [10] [11] [12] [13]       [10, 11, 12] | [13]           0
    [20] [21]                 [21] | [20]                   1
    [30] [31] [32]            [30] | [31, 32]               0
    ========================  ============================  =====

    >>> docs = [[[10], [11], [12], [13]], [[20], [21]], [[30], [31], [32]]]
    >>> [(p.tokens_a, p.tokens_b, p.label) for p in make_order_pairs(docs, 8, seed=3)]
    [([10, 11, 12], [13], 0), ([21], [20], 1), ([30], [31, 32], 0)]

    Taught in: 07_albert ("Sentence-order prediction").
    """
    if not 0.0 <= swap_prob <= 1.0:
        raise ValueError(f"expected swap_prob in [0, 1], got {swap_prob}")
    rng = random.Random(seed_of("sentence order", seed))
    pairs = []
    for pair in make_pairs(documents, max_num_tokens, seed=seed, random_next_prob=0.0):
        swapped = rng.random() < swap_prob
        a, b = (pair.tokens_b, pair.tokens_a) if swapped else (pair.tokens_a, pair.tokens_b)
        pairs.append(SentenceOrderPair(a, b, swapped))
    return pairs


def collate_pairs(
    pairs: Sequence[SentencePair | SentenceOrderPair],
    *,
    length: int,
    cls_token_id: int,
    sep_token_id: int,
    pad_token_id: int,
    label_name: str = "next_sentence_label",
) -> dict[str, torch.Tensor]:
    """Frame (:func:`lecture_lib.tokenization.wordpiece.frame_ids`) and right-pad pairs to ``length``: the
    tensors BERT's pretraining reads, each (N, length).

    ``special_tokens_mask`` is True on [CLS], [SEP] and padding (never selected for MLM); the pair labels
    (N,) are under ``label_name`` (``"sentence_order_label"`` for sentence-order pairs).

    Taught in: 04_bert_pretraining ("Next-sentence prediction").
    """
    n = len(pairs)
    input_ids = torch.full((n, length), pad_token_id, dtype=torch.long)
    token_type_ids = torch.zeros((n, length), dtype=torch.long)
    attention_mask = torch.zeros((n, length), dtype=torch.long)
    special = torch.ones((n, length), dtype=torch.bool)
    for row, pair in enumerate(pairs):
        ids, types, specials = frame_ids(
            pair.tokens_a, pair.tokens_b, cls_token_id=cls_token_id, sep_token_id=sep_token_id
        )
        if len(ids) > length:
            raise ValueError(f"pair {row} needs {len(ids)} positions, more than length={length}; truncate first")
        k = len(ids)
        input_ids[row, :k] = torch.tensor(ids)
        token_type_ids[row, :k] = torch.tensor(types)
        attention_mask[row, :k] = 1
        special[row, :k] = torch.tensor(specials, dtype=torch.bool)
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "special_tokens_mask": special,
        label_name: torch.tensor([p.label for p in pairs], dtype=torch.long),
    }
