"""Toy sequence-to-sequence tasks with a held-out split that no training batch can touch.

The reversal task of :mod:`lecture_lib.data.toy` draws fresh random strings at every step, so a string
of the test set could also turn up in training. Here every string is assigned to a split by a hash
of its content: one string in ``test_every`` belongs to the test split, and training batches are
drawn from the others only. The test accuracy is then measured on strings the model never saw.

Taught in: 02_transformer ("Training").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lecture_lib.data.toy import NUM_SPECIAL, Seq2SeqBatch, make_batch, reversal_batch
from lecture_lib.runtime import generator

HASH_BASE, HASH_MODULUS = 31, 1_000_003


def content_hash(tokens: list[int]) -> int:
    """Polynomial hash sum_t tokens[t] * 31^t mod 1000003: a fixed function of the string alone.

    >>> content_hash([3, 4])  # 3 + 4 * 31
    127

    Taught in: 02_transformer ("Training").
    """
    return sum(t * HASH_BASE**i for i, t in enumerate(tokens)) % HASH_MODULUS


@dataclass
class ReversalTask:
    """Reverse a string of ``num_symbols`` symbols, of length in [min_len, max_len], split by content hash.

    Taught in: 02_transformer ("Training").
    """

    num_symbols: int = 10
    min_len: int = 3
    max_len: int = 8
    batch_size: int = 64
    test_every: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"expected 1 <= min_len <= max_len, got {self.min_len} and {self.max_len}")
        if self.num_symbols < 1 or self.test_every < 2:
            raise ValueError(f"expected num_symbols >= 1 and test_every >= 2, got {self.num_symbols}, {self.test_every}")

    @property
    def vocab_size(self) -> int:
        return NUM_SPECIAL + self.num_symbols

    def is_test(self, tokens: list[int]) -> bool:
        """Whether a source string belongs to the held-out split."""
        return content_hash(tokens) % self.test_every == 0

    def sources(self, n: int, test: bool, generator: torch.Generator) -> list[torch.Tensor]:
        """``n`` random source strings of the chosen split (drawn with the toy reversal generator, then filtered)."""
        kept: list[torch.Tensor] = []
        while len(kept) < n:
            batch = reversal_batch(n, self.min_len, self.max_len, self.num_symbols, generator)
            for row, length in zip(batch.src, batch.src_lengths.tolist()):
                source = row[:length]
                if self.is_test(source.tolist()) == test and len(kept) < n:
                    kept.append(source)
        return kept

    def batch(self, sources: list[torch.Tensor]) -> Seq2SeqBatch:
        """Each source paired with its reverse."""
        return make_batch(sources, [s.flip(0) for s in sources])

    def train_batch(self, batch_size: int, step: int, seed: int = 0) -> Seq2SeqBatch:
        """The training batch of ``step``: the same batch whenever it is asked for (``train``'s ``batch_fn``)."""
        return self.batch(self.sources(batch_size, test=False, generator=generator("reversal task", seed, step)))

    def test_batch(self, size: int, seed: int = 0) -> Seq2SeqBatch:
        """``size`` held-out strings (a string may repeat when the test split is small)."""
        return self.batch(self.sources(size, test=True, generator=generator("reversal task test", seed)))
