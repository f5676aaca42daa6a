"""Chapter 03, tokenization: the sizes of the vocabularies trained and of the length curves.

Taught in: 03_tokenization ("Vocabulary size against sequence length").
"""

from __future__ import annotations

from dataclasses import dataclass

from lecture_lib.profile import pick


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


def tokenization_experiment() -> TokenizationExperiment:
    """The experiment's sizes for the active profile (see :mod:`lecture_lib.profile`)."""
    return pick(
        quick=TokenizationExperiment(bpe_vocab_size=4096, wordpiece_vocab_size=3000,
                                     bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096),
                                     wordpiece_curve_sizes=(600, 1000, 2000, 3000), comparison_documents=300),
        full=TokenizationExperiment(bpe_vocab_size=16384, wordpiece_vocab_size=8000,
                                    bpe_curve_sizes=(256, 384, 512, 1024, 2048, 4096, 8192, 16384),
                                    wordpiece_curve_sizes=(600, 1000, 2000, 4000, 8000), comparison_documents=1000),
    )

