"""Words to ids for the text-to-text tasks: T5's vocabulary layout over whole words, and the batch of (input,
target) pairs that a T5 or BART model reads.

=======  ========================================================================
ids      words
=======  ========================================================================
0 1 2 3  ``<pad>`` ``</s>`` ``<unk>`` (T5's specials), ``<M>`` (the BERT-style objective's mask)
4 ...    the first :data:`NUM_SENTINELS` sentinels, ``<extra_id_0>`` ...
then     every other word seen, sorted
=======  ========================================================================

Every encoded text ends with ``</s>``; a batch pads inputs with ``<pad>`` and labels with -100.

Taught in: 09_t5_bart ("Text-to-text").
"""

from __future__ import annotations

from typing import Sequence

import torch

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.objectives.span_corruption import T5_SENTINELS

SPECIALS = ("<pad>", "</s>", "<unk>", "<M>")  # ids 0, 1, 2 as in T5's vocabulary
NUM_SENTINELS = 20


class Vocabulary:
    """Words <-> ids: T5's specials first (pad 0, </s> 1, unk 2), then <M>, the sentinels, and the words seen.

    Taught in: 09_t5_bart ("Text-to-text").
    """

    def __init__(self, texts: Sequence[Sequence[str]]) -> None:
        words = sorted({w for text in texts for w in text})
        reserved = [*SPECIALS, *T5_SENTINELS[:NUM_SENTINELS]]
        self.words = [*reserved, *(w for w in words if w not in reserved)]
        self.ids = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, words: Sequence[str]) -> list[int]:
        """The ids of ``words`` followed by </s>; an unknown word is <unk>."""
        return [self.ids.get(w, 2) for w in words] + [1]

    def decode(self, ids: Sequence[int]) -> list[str]:
        """Words up to the first </s>, pads skipped."""
        out = []
        for i in ids:
            if i == 1:
                break
            if i != 0:
                out.append(self.words[i])
        return out


def batch_of(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], vocab: Vocabulary) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 on padding) of (inputs, targets) pairs."""
    sources = [vocab.encode(a) for a, _ in pairs]
    targets = [vocab.encode(b) for _, b in pairs]
    width_s, width_t = max(map(len, sources)), max(map(len, targets))
    input_ids = torch.tensor([s + [0] * (width_s - len(s)) for s in sources])
    labels = torch.tensor([t + [IGNORE_INDEX] * (width_t - len(t)) for t in targets])
    return dict(input_ids=input_ids, attention_mask=(input_ids != 0).long(), labels=labels)
