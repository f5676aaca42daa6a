"""Syntactic heads (Clark et al. 2019, Table 1): for each dependency relation, the single attention head
whose most-attended word is most often the relation's other end, against the best fixed-offset baseline.

Attention is between WordPiece tokens and trees are between words, so the maps are first taken to the
word level as Clark et al. do: attention *to* a word is the sum over its pieces (the mass it receives),
attention *from* a word the mean over its pieces (each piece's row sums to 1, so the mean does too).
[CLS] and [SEP] are dropped. A relation is scored in both directions, dependent -> head and head ->
dependent (Clark et al.'s det head points from the determiner to its noun; their pobj head from the
preposition to its object), and so is the baseline: "the word at offset k", for the best k.

Taught in: 10_bertology_attention ("Syntactic heads").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

DIRECTIONS = ("dependent->head", "head->dependent")


class PieceTokenizer(Protocol):
    cls_token_id: int
    sep_token_id: int

    def encode(self, text: str) -> list[int]: ...


def align_words(tokenizer: PieceTokenizer, words: Sequence[str]) -> tuple[list[int], list[int]]:
    """``[CLS] pieces [SEP]`` for a sentence given as words, and the word of every piece (-1 for [CLS], [SEP]).

    Each word is tokenized on its own, so its pieces are known (for BERT's tokenizer, the same pieces as
    the whole text gives when the words hold no punctuation inside them).

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    ids, word_of_piece = [tokenizer.cls_token_id], [-1]
    for index, word in enumerate(words):
        pieces = tokenizer.encode(word)
        if not pieces:
            raise ValueError(f"word {index} ({word!r}) has no tokens")
        ids += pieces
        word_of_piece += [index] * len(pieces)
    return ids + [tokenizer.sep_token_id], word_of_piece + [-1]


def word_membership(word_of_piece: Sequence[int], pieces: int, like: torch.Tensor) -> torch.Tensor:
    """The (W, T) matrix whose row w marks the pieces of word w (1.0, else 0.0), in ``like``'s dtype and
    device; pieces of word -1 ([CLS], [SEP]) belong to no row.

    >>> word_membership([-1, 0, 0, 1], 4, torch.zeros(1))
    tensor([[0., 1., 1., 0.],
            [0., 0., 0., 1.]])

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    words = torch.as_tensor(word_of_piece, device=like.device)
    if words.shape[0] != pieces:
        raise ValueError(f"expected a word index for each of {pieces} pieces, got {words.shape[0]}")
    count = int(words.max()) + 1
    return (words[None, :] == torch.arange(count, device=words.device)[:, None]).to(like.dtype)


def word_attention(attentions: torch.Tensor, word_of_piece: Sequence[int]) -> torch.Tensor:
    """Piece-level maps (..., T, T) of one sentence -> word-level maps (..., W, W): sum over the pieces a
    word is attended through, mean over the pieces it attends from.

    >>> a = torch.tensor([[.5, .25, .25], [.2, .4, .4], [0., .6, .4]])  # "dog", "play", "##s"
    >>> word_attention(a, [0, 1, 1])
    tensor([[0.5000, 0.5000],
            [0.1000, 0.9000]])

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    member = word_membership(word_of_piece, attentions.shape[-1], attentions)
    mean_rows = member / member.sum(-1, keepdim=True)
    return mean_rows @ attentions @ member.T


@dataclass
class RelationScore:
    """One row of Clark et al.'s Table 1: the best head (layer, head, direction, accuracy) of a relation over
    ``count`` arcs, and the best fixed offset with its accuracy.

    Taught in: 10_bertology_attention ("Syntactic heads").
    """

    relation: str
    count: int
    layer: int
    head: int
    direction: str
    accuracy: float
    offset: int
    baseline: float


def _arcs(heads: Sequence[int], deprels: Sequence[str], relation: str) -> list[tuple[int, int]]:
    """(dependent, head) word indices, 0-based, of the relation's arcs (CoNLL-U heads are 1-based)."""
    return [(i, h - 1) for i, (h, d) in enumerate(zip(heads, deprels)) if d == relation and h > 0]


def head_hits(
    word_maps: Sequence[torch.Tensor], heads: Sequence[Sequence[int]], deprels: Sequence[Sequence[str]], relation: str
) -> tuple[torch.Tensor, int]:
    """For each direction, layer and head, how many arcs of ``relation`` its argmax gets right:
    (2, layers, heads) counts, and the number of arcs. ``word_maps`` are (layers, heads, W, W) per sentence.

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    hits, total = torch.zeros(2, *word_maps[0].shape[:2], dtype=torch.long), 0
    for maps, sentence_heads, sentence_deprels in zip(word_maps, heads, deprels):
        argmax = maps.argmax(-1)  # (L, H, W): the most attended word of each word
        for dependent, head in _arcs(sentence_heads, sentence_deprels, relation):
            hits[0] += argmax[..., dependent] == head
            hits[1] += argmax[..., head] == dependent
            total += 1
    return hits, total


def offset_baseline(
    heads: Sequence[Sequence[int]], deprels: Sequence[Sequence[str]], relation: str
) -> tuple[int, float]:
    """The fixed offset k that best predicts the relation's other end (the word k after the dependent, or, if
    better, the word k after the head), as (signed offset, accuracy); the offset is counted from the word
    the prediction starts at, so the two directions' offsets have opposite signs.

    >>> offset_baseline([[2, 0], [2, 0, 2]], [["det", "root"], ["det", "root", "amod"]], "det")
    (1, 1.0)

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    offsets = Counter()
    total = 0
    for sentence_heads, sentence_deprels in zip(heads, deprels):
        for dependent, head in _arcs(sentence_heads, sentence_deprels, relation):
            offsets[head - dependent] += 1  # both directions: from the head, the offset is the opposite
            total += 1
    if not total:
        raise ValueError(f"no arcs of relation {relation!r}")
    offset, count = offsets.most_common(1)[0]
    return offset, count / total


def syntactic_heads(
    word_maps: Sequence[torch.Tensor],
    heads: Sequence[Sequence[int]],
    deprels: Sequence[Sequence[str]],
    relations: Sequence[str],
) -> list[RelationScore]:
    """Clark et al.'s Table 1: for each relation that occurs, its best head against the best offset.

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    rows = []
    for relation in relations:
        hits, total = head_hits(word_maps, heads, deprels, relation)
        if not total:
            continue
        direction, layer, head = (int(i) for i in torch.unravel_index(hits.argmax(), hits.shape))
        offset, baseline = offset_baseline(heads, deprels, relation)
        rows.append(
            RelationScore(
                relation,
                total,
                layer,
                head,
                DIRECTIONS[direction],
                int(hits[direction, layer, head]) / total,
                offset,
                baseline,
            )
        )
    return rows
