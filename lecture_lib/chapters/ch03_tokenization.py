"""Chapter 03, tokenization: the sizes of the vocabularies trained and of the length curves, and what the
exercises measure on a trained byte-level BPE.

Taught in: 03_tokenization ("Vocabulary size against sequence length").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import regex

from lecture_lib.config import build_config
from lecture_lib.profile import pick
from lecture_lib.tokenization.byte_level import ByteLevelBPE, to_standin


@dataclass(frozen=True)
class TokenizationExperiment:
    """The chapter's sizes: the BPE and WordPiece vocabularies trained, and the points of the curves.

    ``bpe_vocab_size`` counts bytes and merged tokens, not special tokens.
    """

    bpe_vocab_size: int
    wordpiece_vocab_size: int
    bpe_curve_sizes: tuple[int, ...]
    wordpiece_curve_sizes: tuple[int, ...]
    comparison_documents: int  # documents for the naive-vs-incremental timing in the notebook


QUICK = dict(bpe_vocab_size=4096, wordpiece_vocab_size=3000, bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096),
             wordpiece_curve_sizes=(600, 1000, 2000, 3000), comparison_documents=300)
FULL = dict(bpe_vocab_size=16384, wordpiece_vocab_size=8000,
            bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096, 8192, 16384),
            wordpiece_curve_sizes=(600, 1000, 2000, 4000, 8000), comparison_documents=1000)


def tokenization_experiment(**overrides) -> TokenizationExperiment:
    """The experiment's sizes for the active profile (:data:`QUICK` or :data:`FULL`, see
    :mod:`lecture_lib.profile`), with ``overrides``."""
    return build_config(TokenizationExperiment, pick(quick=QUICK, full=FULL), overrides)



def letter_punctuation_merges(tokenizer: ByteLevelBPE) -> list[str]:
    """The merged tokens that hold a letter and a character that is neither letter, digit nor white space
    (the classes GPT-2's pattern keeps apart): exercise 2 of 03_tokenization.

    >>> letter_punctuation_merges(ByteLevelBPE(pattern=r"\\S+|\\s+").train("s. s. s. ab ab", 256 + 2))
    ['s.']
    """
    tokens = [tokenizer.vocab[new].decode("utf-8", errors="replace") for new in tokenizer.merges.values()]
    return [t for t in tokens if regex.search(r"\p{L}", t) and regex.search(r"[^\s\p{L}\p{N}]", t)]


def replay_against_greedy(tokenizer: ByteLevelBPE, words: Iterable[str],
                          greedy: Callable[[str, set[str]], list[str]]) -> dict[str, int]:
    """Each word encoded on its own by merge replay and by ``greedy(word in stand-ins, vocabulary)`` (section 5's
    ``longest_prefix_first``): how many words, how many the two split differently, on how many ``greedy`` gives
    more or fewer tokens, and the tokens of each rule. Exercise 3 of 03_tokenization.
    """
    vocabulary = set(tokenizer.convert_ids_to_tokens(range(len(tokenizer.vocab))))
    counts = dict.fromkeys(("words", "differ", "greedy_more", "greedy_fewer", "replay_tokens", "greedy_tokens"), 0)
    for word in words:
        replay = tokenizer.convert_ids_to_tokens(tokenizer.encode(word))
        longest = greedy(to_standin(word.encode("utf-8")), vocabulary)
        counts["words"] += 1
        counts["differ"] += replay != longest
        counts["greedy_more"] += len(longest) > len(replay)
        counts["greedy_fewer"] += len(longest) < len(replay)
        counts["replay_tokens"] += len(replay)
        counts["greedy_tokens"] += len(longest)
    return counts
