"""Vocabulary size against sequence length: what a bigger vocabulary buys, measured on held-out text.

Both BPE and WordPiece grow their vocabularies one unit at a time, so the first k learned units *are*
the vocabulary a shorter training run would have produced: one training run gives the whole curve
(:meth:`ByteLevelBPE.truncated`, and a prefix of a WordPiece vocabulary list).

Taught in: 03_tokenization ("Vocabulary size against sequence length").
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from lecture_lib.tokenization.byte_level import ByteLevelBPE
from lecture_lib.tokenization.wordpiece import UNK_TOKEN, WordPieceTokenizer


def _row(vocab_size: int, tokens: int, texts: Sequence[str], unknown: int = 0) -> dict[str, float]:
    words = sum(len(t.split()) for t in texts)
    return {
        "vocab_size": vocab_size,
        "tokens": tokens,
        "tokens_per_word": tokens / words,
        "bytes_per_token": sum(len(t.encode("utf-8")) for t in texts) / tokens,
        "unknown_rate": unknown / tokens,
    }


def bpe_curve(tokenizer: ByteLevelBPE, texts: Sequence[str], vocab_sizes: Sequence[int]) -> list[dict[str, float]]:
    """Tokens, tokens per white-space word and bytes per token of ``texts`` at each vocabulary size.

    Sizes count the byte and merged tokens (256 is bytes only); the tokenizer's special tokens come on top.

    Taught in: 03_tokenization ("Vocabulary size against sequence length").
    """
    specials = len(tokenizer.special_tokens)
    if max(vocab_sizes) > len(tokenizer) - specials:
        raise ValueError(
            f"expected vocabulary sizes up to the tokenizer's {len(tokenizer) - specials}, got {max(vocab_sizes)}"
        )
    rows = []
    for size in vocab_sizes:
        small = tokenizer.truncated(size + specials)
        rows.append(_row(size, sum(len(small.encode(t)) for t in texts), texts))
    return rows


def wordpiece_curve(
    vocab: Sequence[str], texts: Sequence[str], vocab_sizes: Sequence[int], lowercase: bool = True
) -> list[dict[str, float]]:
    """The same measures for the WordPiece vocabularies made of the first ``k`` entries of ``vocab``.

    ``unknown_rate`` is the fraction of tokens that are ``[UNK]``.

    Taught in: 03_tokenization ("Vocabulary size against sequence length").
    """
    if max(vocab_sizes) > len(vocab):
        raise ValueError(f"expected vocabulary sizes up to {len(vocab)}, got {max(vocab_sizes)}")
    rows = []
    for size in vocab_sizes:
        tokenizer = WordPieceTokenizer(vocab[:size], lowercase=lowercase)
        tokens = [t for text in texts for t in tokenizer.tokenize(text)]
        rows.append(_row(size, len(tokens), texts, unknown=tokens.count(UNK_TOKEN)))
    return rows


def tokens_per_word_shares(
    tokenizer: ByteLevelBPE, words: Sequence[str], vocab_sizes: Sequence[int], longest: int = 5
) -> dict[int, list[float]]:
    """For each vocabulary size, the share of ``words`` (each encoded on its own) split into 1, 2, ...,
    ``longest - 1`` tokens, and last the share split into ``longest`` or more.

    >>> bpe = ByteLevelBPE().train("low low low lowest", 256 + 3)
    >>> tokens_per_word_shares(bpe, ["low", "low", "lowest", "x"], [256, 259], longest=4)
    {256: [0.25, 0.0, 0.5, 0.25], 259: [0.75, 0.0, 0.0, 0.25]}

    Taught in: 03_tokenization ("Vocabulary size against sequence length").
    """
    specials = len(tokenizer.special_tokens)
    if max(vocab_sizes) > len(tokenizer) - specials:
        raise ValueError(
            f"expected vocabulary sizes up to the tokenizer's {len(tokenizer) - specials}, got {max(vocab_sizes)}"
        )
    if not words or not all(words):
        raise ValueError("expected a non-empty list of non-empty words")
    counts = Counter(words)
    shares = {}
    for size in vocab_sizes:
        small = tokenizer.truncated(size + specials)
        histogram = [0] * longest
        for word, n in counts.items():
            histogram[min(len(small.encode(word)), longest) - 1] += n
        shares[size] = [h / len(words) for h in histogram]
    return shares
