"""Seeded toy sequence-to-sequence tasks: small enough to train on a CPU in seconds, with known answers.

Token ids: 0 = padding, 1 = beginning of sequence, 2 = end of sequence, then the symbols.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lecture_lib.tokenization.wordpiece import pad_ids

PAD, BOS, EOS = 0, 1, 2  # token ids (WordPiece names its token strings PAD_TOKEN ... in tokenization.wordpiece)
NUM_SPECIAL = 3


@dataclass
class Seq2SeqBatch:
    """src (B, S) and target (B, T) padded with PAD; ``tgt_in`` starts with BOS, ``tgt_out`` ends with EOS."""

    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def make_batch(sources: list[torch.Tensor], targets: list[torch.Tensor]) -> Seq2SeqBatch:
    """Pad sources; frame targets as BOS + y (decoder input) and y + EOS (what it must predict)."""
    bos, eos = torch.tensor([BOS]), torch.tensor([EOS])
    return Seq2SeqBatch(
        src=pad_ids(sources, PAD),
        src_lengths=torch.tensor([len(s) for s in sources]),
        tgt_in=pad_ids([torch.cat([bos, t]) for t in targets], PAD),
        tgt_out=pad_ids([torch.cat([t, eos]) for t in targets], PAD),
    )


def reversal_batch(
    batch_size: int, min_len: int, max_len: int, num_symbols: int, generator: torch.Generator
) -> Seq2SeqBatch:
    """Random symbol strings of random length in [min_len, max_len], each paired with its reverse.

    Reversal needs the whole input before the first output word, and its ideal alignment is the
    anti-diagonal: output position t looks at input position n - 1 - t.
    """
    if not 1 <= min_len <= max_len:
        raise ValueError(f"expected 1 <= min_len <= max_len, got {min_len} and {max_len}")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    sources = [torch.randint(NUM_SPECIAL, NUM_SPECIAL + num_symbols, (int(n),), generator=generator) for n in lengths]
    return make_batch(sources, [s.flip(0) for s in sources])
