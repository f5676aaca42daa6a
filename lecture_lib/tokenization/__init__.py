"""Subword tokenization, one module per algorithm.

- :mod:`~lecture_lib.tokenization.bpe`: byte-pair encoding as compression (Gage 1994) and as Sennrich
  et al.'s (2016) subword learner (:func:`learn_bpe`);
- :mod:`~lecture_lib.tokenization.byte_level`: GPT-2's byte-level BPE with an incremental trainer
  (:class:`ByteLevelBPE`);
- :mod:`~lecture_lib.tokenization.wordpiece`: BERT's WordPiece tokenizer and a trainer by likelihood
  gain (:class:`WordPieceTokenizer`);
- :mod:`~lecture_lib.tokenization.tradeoff`: vocabulary size against sequence length.

Taught in: 03_tokenization.
"""

from lecture_lib.tokenization.bpe import (
    apply_bpe,
    compress,
    get_stats,
    learn_bpe,
    merge_pair,
)
from lecture_lib.tokenization.byte_level import ByteLevelBPE, bytes_to_unicode
from lecture_lib.tokenization.tradeoff import bpe_curve, tokens_per_word_shares, wordpiece_curve
from lecture_lib.tokenization.wordpiece import (
    SPECIAL_TOKENS,
    WordPieceTokenizer,
    basic_tokenize,
    count_words,
    frame_ids,
    learn_wordpiece,
    longest_match_first,
    pad_ids,
)

__all__ = [
    "ByteLevelBPE",
    "SPECIAL_TOKENS",
    "WordPieceTokenizer",
    "apply_bpe",
    "basic_tokenize",
    "bpe_curve",
    "bytes_to_unicode",
    "compress",
    "count_words",
    "frame_ids",
    "get_stats",
    "learn_bpe",
    "learn_wordpiece",
    "longest_match_first",
    "merge_pair",
    "pad_ids",
    "tokens_per_word_shares",
    "wordpiece_curve",
]
