"""The unsupervised objectives T5 compares (Raffel et al. 2020, Table 3), each as words in, (inputs, targets) out.

With the noise on "for inviting" and "last" of "Thank you for inviting me to your party last week .":

=========================  ==============================================  =============================
objective                  inputs                                          targets
=========================  ==============================================  =============================
prefix LM                  Thank you for inviting                          me to your party last week .
BERT-style                 Thank you <M> <M> me to your party <M> week .   (the original text)
deshuffling                (the words in a random order)                   (the original text)
i.i.d. noise, replace      Thank you <X> me to your party <Y> week .       <X> for inviting <Y> last <Z>
i.i.d. noise, drop         Thank you me to your party week .               for inviting last
random spans               (as "replace", with T5's random spans)          (the spans, after sentinels)
=========================  ==============================================  =============================

BERT-style and deshuffling make the decoder write the whole text, the prefix LM the rest of it; the last
three only what was corrupted, so their targets are shorter (T5 found them as good, and faster). "Replace" and "random spans" are
:func:`~lecture_lib.objectives.span_corruption.span_corrupt` with an i.i.d. or a
:func:`~lecture_lib.objectives.span_corruption.random_spans_noise_mask`.

Taught in: 09_t5_bart ("The objectives of T5's Table 3").
"""

from __future__ import annotations

from typing import Sequence

import torch

from lecture_lib.objectives.span_corruption import random_spans_noise_mask, span_corrupt

OBJECTIVES = ("prefix_lm", "bert_style", "deshuffling", "replace_spans", "drop_tokens", "random_spans")


def _check_mask(words: Sequence[str], noise_mask: torch.Tensor | Sequence[bool]) -> torch.Tensor:
    mask = torch.as_tensor(noise_mask, dtype=torch.bool)
    if mask.shape != (len(words),):
        raise ValueError(f"expected a noise mask of shape ({len(words)},), one per word, got {tuple(mask.shape)}")
    return mask


def prefix_lm(words: Sequence[str], split: int) -> tuple[list[str], list[str]]:
    """The text cut in two at ``split``: the encoder reads the prefix, the decoder writes the rest.

    >>> prefix_lm("Thank you for inviting me to your party last week .".split(), 4)[1]
    ['me', 'to', 'your', 'party', 'last', 'week', '.']

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    if not 0 < split < len(words):
        raise ValueError(f"expected 0 < split < {len(words)} (a non-empty prefix and target), got {split}")
    return list(words[:split]), list(words[split:])


def bert_style(
    words: Sequence[str],
    noise_mask: torch.Tensor | Sequence[bool],
    replacements: Sequence[str | None] | None = None,
    *,
    mask_token: str = "<M>",
) -> tuple[list[str], list[str]]:
    """Every noise word becomes ``mask_token``, or ``replacements[i]`` where that is a word; the target is the text.

    T5's BERT-style objective masks 90% of the noise words and swaps 10% for a random word ("apple" for
    "last" in its Table 3); with no replacements this is the MASS-style row.

    >>> words = "Thank you for inviting me to your party last week .".split()
    >>> noise = [w in ("for", "inviting", "last") for w in words]
    >>> " ".join(bert_style(words, noise, [None] * 8 + ["apple"] + [None] * 2)[0])
    'Thank you <M> <M> me to your party apple week .'

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    mask = _check_mask(words, noise_mask)
    replacements = [None] * len(words) if replacements is None else replacements
    if len(replacements) != len(words):
        raise ValueError(f"expected one replacement (or None) per word, {len(words)}, got {len(replacements)}")
    inputs = [
        (r if r is not None else mask_token) if noisy else w for w, noisy, r in zip(words, mask.tolist(), replacements)
    ]
    return inputs, list(words)


def deshuffle(words: Sequence[str], order: Sequence[int]) -> tuple[list[str], list[str]]:
    """The words in the given ``order`` (a permutation); the target is the text in its own order.

    >>> deshuffle(["a", "b", "c"], [2, 0, 1])
    (['c', 'a', 'b'], ['a', 'b', 'c'])

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    if sorted(order) != list(range(len(words))):
        raise ValueError(f"expected a permutation of range({len(words)}), got {list(order)}")
    return [words[i] for i in order], list(words)


def drop_tokens(words: Sequence[str], noise_mask: torch.Tensor | Sequence[bool]) -> tuple[list[str], list[str]]:
    """The noise words leave the input, with no trace of where; the target is exactly those words.

    >>> words = "Thank you for inviting me to your party last week .".split()
    >>> [" ".join(x) for x in drop_tokens(words, [w in ("for", "inviting", "last") for w in words])]
    ['Thank you me to your party week .', 'for inviting last']

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    mask = _check_mask(words, noise_mask).tolist()
    return [w for w, noisy in zip(words, mask) if not noisy], [w for w, noisy in zip(words, mask) if noisy]


def iid_noise_mask(
    length: int, *, noise_density: float = 0.15, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(length,) bools, each True with probability ``noise_density`` on its own (T5's "i.i.d." corruption).

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    if not 0 <= noise_density <= 1:
        raise ValueError(f"expected 0 <= noise_density <= 1, got {noise_density}")
    return torch.rand(length, generator=generator) < noise_density


def apply_objective(
    name: str,
    words: Sequence[str],
    *,
    vocabulary: Sequence[str] = (),
    noise_density: float = 0.15,
    generator: torch.Generator | None = None,
    random_roll: bool = False,
) -> tuple[list[str], list[str]]:
    """One random example of the objective ``name`` (one of :data:`OBJECTIVES`), all draws from ``generator``.

    The prefix LM cuts at a uniform place; BERT-style swaps 10% of its noise words for a uniform word of
    ``vocabulary`` (the rest become <M>); deshuffling draws a uniform permutation; ``random_roll`` rolls the
    random spans' mask (:func:`~lecture_lib.objectives.span_corruption.random_spans_noise_mask`).

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    n = len(words)
    if name == "prefix_lm":
        return prefix_lm(words, int(torch.randint(1, n, (), generator=generator)))
    if name == "deshuffling":
        return deshuffle(words, torch.randperm(n, generator=generator).tolist())
    if name == "random_spans":
        mask = random_spans_noise_mask(n, noise_density=noise_density, generator=generator, random_roll=random_roll)
        return span_corrupt(words, mask)
    noise = iid_noise_mask(n, noise_density=noise_density, generator=generator)
    if name == "bert_style":
        swap = (torch.rand(n, generator=generator) < 0.1).tolist()
        picks = torch.randint(len(vocabulary) or 1, (n,), generator=generator).tolist()
        return bert_style(words, noise, [vocabulary[p] if s and vocabulary else None for s, p in zip(swap, picks)])
    if name == "replace_spans":
        return span_corrupt(words, noise)
    if name == "drop_tokens":
        return drop_tokens(words, noise)
    raise ValueError(f"expected an objective in {OBJECTIVES}, got {name!r}")
