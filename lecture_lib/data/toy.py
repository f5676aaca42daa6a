"""Seeded toy sequence-to-sequence tasks: small enough to train on a CPU in seconds, with known answers.

Token ids: 0 = padding, 1 = beginning of sequence, 2 = end of sequence, then the symbols.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PAD, BOS, EOS = 0, 1, 2  # token ids (WordPiece names its token strings PAD_TOKEN ... in tokenization.wordpiece)
NUM_SPECIAL = 3


@dataclass
class Seq2SeqBatch:
    """src (B, S) and target (B, T) padded with PAD; ``tgt_in`` starts with BOS, ``tgt_out`` ends with EOS."""

    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def pad_sequences(sequences: list[torch.Tensor], value: int = PAD) -> torch.Tensor:
    """Stack 1-D tensors of different lengths into (B, max_len), right-padded with ``value``.

    >>> pad_sequences([torch.tensor([5, 6, 7]), torch.tensor([8])])
    tensor([[5, 6, 7],
            [8, 0, 0]])
    """
    return torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=value)


def make_batch(sources: list[torch.Tensor], targets: list[torch.Tensor]) -> Seq2SeqBatch:
    """Pad sources; frame targets as BOS + y (decoder input) and y + EOS (what it must predict)."""
    bos, eos = torch.tensor([BOS]), torch.tensor([EOS])
    return Seq2SeqBatch(
        src=pad_sequences(sources),
        src_lengths=torch.tensor([len(s) for s in sources]),
        tgt_in=pad_sequences([torch.cat([bos, t]) for t in targets]),
        tgt_out=pad_sequences([torch.cat([t, eos]) for t in targets]),
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
