"""Chapter 03, tokenization: the sizes of the vocabularies trained and of the length curves, the claims the
chapter judges, and what the exercises measure on a trained byte-level BPE.

Taught in: 03_tokenization ("Vocabulary size against sequence length").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import regex

from lecture_lib.config import build_config
from lecture_lib.profile import pick
from lecture_lib.reproductions import Check, Demonstration, Rule, Seeds
from lecture_lib.tokenization.byte_level import ByteLevelBPE, to_standin


@dataclass(frozen=True)
class Chapter03Config:
    """The chapter's sizes: the BPE and WordPiece vocabularies trained, and the points of the curves.

    ``bpe_vocab_size`` counts bytes and merged tokens, not special tokens. Each curve rises to its vocabulary's
    size, and the BPE curve starts at the 256 bytes.
    """

    bpe_vocab_size: int
    wordpiece_vocab_size: int
    bpe_curve_sizes: tuple[int, ...]
    wordpiece_curve_sizes: tuple[int, ...]
    comparison_documents: int  # documents for the naive-vs-incremental timing in the notebook

    def __post_init__(self) -> None:
        for name, sizes, top in (
            ("bpe_curve_sizes", self.bpe_curve_sizes, self.bpe_vocab_size),
            ("wordpiece_curve_sizes", self.wordpiece_curve_sizes, self.wordpiece_vocab_size),
        ):
            if list(sizes) != sorted(set(sizes)) or not sizes or sizes[-1] != top:
                raise ValueError(f"{name}: expected increasing sizes ending at the vocabulary's {top}, got {sizes}")
        if self.bpe_curve_sizes[0] < 256:
            raise ValueError(f"bpe_curve_sizes: expected sizes of at least the 256 bytes, got {self.bpe_curve_sizes}")
        if self.comparison_documents < 1:
            raise ValueError(f"comparison_documents: expected at least 1, got {self.comparison_documents}")


QUICK = dict(
    bpe_vocab_size=4096,
    wordpiece_vocab_size=3000,
    bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096),
    wordpiece_curve_sizes=(600, 1000, 2000, 3000),
    comparison_documents=300,
)
FULL = dict(
    bpe_vocab_size=16384,
    wordpiece_vocab_size=8000,
    bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096, 8192, 16384),
    wordpiece_curve_sizes=(600, 1000, 2000, 4000, 8000),
    comparison_documents=1000,
)


def chapter_config(**overrides) -> Chapter03Config:
    """The chapter's sizes for the active profile (:data:`QUICK` or :data:`FULL`, see
    :mod:`lecture_lib.profile`), with ``overrides``."""
    return build_config(Chapter03Config, pick(quick=QUICK, full=FULL), overrides)


SENNRICH = "Sennrich et al. (2016)"
CLAIMS = (
    Demonstration(
        "03-vocabulary-sizes",
        "vocabulary sizes used in practice",
        paper="89,500 merges (Sennrich et al.); 30,522 WordPiece units (BERT); 50,257 tokens (GPT-2)",
        source=f"{SENNRICH}, section 4; Devlin et al. (2019); Radford et al. (2019)",
        shows="the size of our byte-level vocabulary, set by a far smaller corpus",
    ),
    Rule(
        "03-bigger-vocabulary-shorter-text",
        "larger vocabularies give shorter sequences",
        paper="the number of merges trades the vocabulary's size against the text's length in tokens",
        source=f"{SENNRICH}, section 3.2",
        metric="held-out tokens per word, its least drop from one vocabulary size to the next larger",
        data="held-out documents, over both curves (byte-level BPE and WordPiece)",
        compared="the least drop",
        baseline=0.0,
        seeds=Seeds("none", 1),
    ),
)
CHECKS = (
    Check(
        "03-bpe-compresses",
        "BPE compresses by replacing frequent pairs",
        source="Gage (1994)",
        reference="Gage's two steps, aaabdaaabac → ZabdZabac → ZYdZYac (steps identical)",
    ),
    Check(
        "03-bpe-learns-subwords",
        "BPE learns subwords from a word dictionary",
        source=f"{SENNRICH}, Algorithm 1",
        reference="the merges worked by hand on {low: 5, lower: 2, newest: 6, widest: 3}: es, est, lo; and ten "
        "with </w> (merges identical, in order)",
    ),
    Check(
        "03-byte-level-no-unknowns",
        "byte-level BPE has no unknown tokens",
        source="Radford et al. (2019)",
        reference="every held-out document and awkward string decoding to itself (strings that round-trip)",
    ),
    Check(
        "03-trainer-equals-reference",
        "our BPE trainer equals the reference",
        source="Hugging Face `tokenizers`' BpeTrainer",
        reference="its merges, in order (merges identical)",
    ),
    Check(
        "03-wordpiece-equals-bert",
        "our WordPiece equals BERT's",
        source="`transformers`' BertTokenizer on bert-base-uncased's vocabulary",
        reference="its tokens on every text (texts tokenized identically)",
    ),
)


def letter_punctuation_merges(tokenizer: ByteLevelBPE) -> list[str]:
    """The merged tokens that hold a letter and a character that is neither letter, digit nor white space
    (the classes GPT-2's pattern keeps apart): exercise 2 of 03_tokenization.

    >>> letter_punctuation_merges(ByteLevelBPE(pattern=r"\\S+|\\s+").train("s. s. s. ab ab", 256 + 2))
    ['s.']
    """
    tokens = [tokenizer.vocab[new].decode("utf-8", errors="replace") for new in tokenizer.merges.values()]
    return [t for t in tokens if regex.search(r"\p{L}", t) and regex.search(r"[^\s\p{L}\p{N}]", t)]


def replay_against_greedy(
    tokenizer: ByteLevelBPE, words: Iterable[str], greedy: Callable[[str, set[str]], list[str]]
) -> dict[str, int]:
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
