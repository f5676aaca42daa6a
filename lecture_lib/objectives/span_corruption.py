"""T5's span corruption (Raffel et al. 2020): drop spans of the input, and predict only what was dropped.

Each maximal run of noise tokens in the input is replaced by one *sentinel*, a token unique within the
example; the target lists, for each sentinel in order, the sentinel and the tokens it hid, and ends with
one more sentinel that closes the last span. With the paper's noise on "for inviting" and "last":

=========  ===========================================================
original   Thank you **for inviting** me to your party **last** week .
inputs     Thank you <X> me to your party <Y> week .
targets    <X> for inviting <Y> last <Z>
=========  ===========================================================

The target is short (here 6 tokens for an 11-token text): the decoder predicts only the corrupted part.
T5's default noise hides 15% of the tokens in spans of mean length 3, drawn by
:func:`random_spans_noise_mask` exactly as T5's own code does.

Taught in: 09_t5_bart ("Span corruption, exactly", "Random spans").
"""

from __future__ import annotations

from typing import Sequence

import torch

T5_SENTINELS = tuple(f"<extra_id_{i}>" for i in range(100))  # the 100 sentinels of T5's vocabulary


def noise_spans(noise_mask: torch.Tensor | Sequence[bool]) -> list[tuple[int, int]]:
    """The maximal runs of True in a 1-d mask, as (start, end) pairs with ``end`` exclusive.

    >>> noise_spans([False, True, True, False, True])
    [(1, 3), (4, 5)]
    """
    mask = torch.as_tensor(noise_mask, dtype=torch.bool)
    if mask.dim() != 1:
        raise ValueError(f"expected a 1-d noise mask, got shape {tuple(mask.shape)}")
    edges = torch.diff(mask.int(), prepend=torch.zeros(1, dtype=torch.int), append=torch.zeros(1, dtype=torch.int))
    starts, ends = (edges == 1).nonzero().flatten(), (edges == -1).nonzero().flatten()
    return list(zip(starts.tolist(), ends.tolist()))


def span_corrupt(
    words: Sequence[str], noise_mask: torch.Tensor | Sequence[bool], sentinels: Sequence[str] | None = None
) -> tuple[list[str], list[str]]:
    """Replace each noise span of ``words`` by a sentinel; the target is each sentinel with what it hid.

    ``noise_mask`` has one bool per word; ``sentinels`` default to T5's ``<extra_id_0>``, ``<extra_id_1>``, ...
    n noise spans use n + 1 sentinels: the target ends with one that closes the last span.

    >>> words = "Thank you for inviting me to your party last week .".split()
    >>> noise = [w in ("for", "inviting", "last") for w in words]
    >>> inputs, targets = span_corrupt(words, noise, sentinels=["<X>", "<Y>", "<Z>"])
    >>> " ".join(inputs)
    'Thank you <X> me to your party <Y> week .'
    >>> " ".join(targets)
    '<X> for inviting <Y> last <Z>'

    Taught in: 09_t5_bart ("Span corruption, exactly").
    """
    sentinels = T5_SENTINELS if sentinels is None else sentinels
    mask = torch.as_tensor(noise_mask, dtype=torch.bool)
    if mask.shape != (len(words),):
        raise ValueError(f"expected a noise mask of shape ({len(words)},), one per word, got {tuple(mask.shape)}")
    spans = noise_spans(mask)
    if len(spans) + 1 > len(sentinels):
        raise ValueError(
            f"{len(spans)} noise spans need {len(spans) + 1} sentinels (one closes the target), got {len(sentinels)}"
        )
    inputs, targets, previous_end = [], [], 0
    for sentinel, (start, end) in zip(sentinels, spans):
        inputs += [*words[previous_end:start], sentinel]
        targets += [sentinel, *words[start:end]]
        previous_end = end
    inputs += words[previous_end:]
    targets.append(sentinels[len(spans)])
    return inputs, targets


def random_segmentation(num_items: int, num_segments: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Split ``num_items`` into ``num_segments`` positive lengths, every such split equally likely.

    The cuts are ``num_segments - 1`` distinct places among the ``num_items - 1`` gaps between items.

    >>> lengths = random_segmentation(10, 3, generator=torch.Generator().manual_seed(0))
    >>> int(lengths.sum()), len(lengths), bool((lengths >= 1).all())
    (10, 3, True)
    """
    if not 1 <= num_segments <= num_items:
        raise ValueError(f"expected 1 <= num_segments <= num_items, got {num_segments} segments of {num_items} items")
    cuts = torch.randperm(num_items - 1, generator=generator)[: num_segments - 1].sort().values + 1
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.tensor([num_items])])
    return bounds.diff()


def span_counts(length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> tuple[int, int]:
    """(noise tokens, noise spans) of T5's rule: round(density · length) tokens, at least 1 and at most
    length - 1, in round(tokens / mean) spans (at least 1); Python's ``round``, half to even, as NumPy's.

    >>> span_counts(512)  # 76.8 -> 77 tokens; 25.67 -> 26 spans
    (77, 26)
    >>> span_counts(10)  # 1.5 -> 2 (half to even); 0.67 -> 1
    (2, 1)

    Taught in: 09_t5_bart ("Random spans").
    """
    if length < 2:
        raise ValueError(f"expected length >= 2 (at least one kept and one noise token), got {length}")
    if not 0 < noise_density < 1 or mean_noise_span_length < 1:
        raise ValueError(
            f"expected 0 < noise_density < 1 and mean_noise_span_length >= 1, got "
            f"{noise_density} and {mean_noise_span_length}"
        )
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    return num_noise, max(round(num_noise / mean_noise_span_length), 1)


def random_spans_noise_mask(
    length: int,
    *,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    generator: torch.Generator | None = None,
    random_roll: bool = False,
) -> torch.Tensor:
    """T5's noise mask: (length,) bools, :func:`span_counts` noise tokens in that many spans, the first token kept.

    Noise and kept tokens are each cut into the same number of spans by :func:`random_segmentation`, then
    interleaved kept, noise, kept, noise, ...: the mask starts with kept tokens and *ends with noise*. With one
    span (short inputs: up to 22 tokens) that span is always the input's last words. ``random_roll=True`` is
    the reference's remedy (``random_roll`` of T5's ``random_spans_noise_mask``): the mask is rolled by an
    offset drawn uniformly from [0, length), so every position is noise with the same probability.

    >>> mask = random_spans_noise_mask(20, generator=torch.Generator().manual_seed(0))
    >>> int(mask.sum()), len(noise_spans(mask)), bool(mask[0]), bool(mask[-1])
    (3, 1, False, True)
    >>> rolled = random_spans_noise_mask(20, generator=torch.Generator().manual_seed(0), random_roll=True)
    >>> int(rolled.sum()), bool(rolled[-1])
    (3, False)

    Taught in: 09_t5_bart ("Random spans").
    """
    num_noise, num_spans = span_counts(length, noise_density, mean_noise_span_length)
    noise_lengths = random_segmentation(num_noise, num_spans, generator=generator)
    kept_lengths = random_segmentation(length - num_noise, num_spans, generator=generator)
    interleaved = torch.stack([kept_lengths, noise_lengths], dim=1).flatten()  # kept_0, noise_0, kept_1, ...
    is_noise = torch.tensor([False, True]).repeat(num_spans)
    mask = is_noise.repeat_interleave(interleaved)
    if random_roll:
        mask = mask.roll(int(torch.randint(length, (), generator=generator)))
    return mask
