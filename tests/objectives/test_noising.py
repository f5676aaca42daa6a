"""lecture_lib.objectives.noising: BART's five transformations keep or change what their definitions say."""

import math
from collections import Counter

import pytest
import torch

from lecture_lib.objectives.noising import (
    MASK,
    NOISING,
    document_rotation,
    infill_spans,
    rotate,
    sentence_permutation,
    sentences_of,
    text_infilling,
    token_deletion,
    token_masking,
)

DOC = [f"w{i}" if i % 6 else "." for i in range(1, 61)]  # ten sentences of five words and a full stop


def gen(seed):
    return torch.Generator().manual_seed(seed)


def test_masking_keeps_length_and_deletion_keeps_order():
    for seed in range(20):
        masked = token_masking(DOC, generator=gen(seed))
        assert len(masked) == len(DOC) and all(m in (MASK, w) for m, w in zip(masked, DOC))
        kept = token_deletion(DOC, generator=gen(seed))
        it = iter(DOC)
        assert all(w in it for w in kept) and len(kept) < len(DOC)  # a subsequence


def test_infilling_hides_the_budget_with_one_mask_per_run():
    for seed in range(50):
        out = text_infilling(DOC, mask_ratio=0.3, generator=gen(seed))
        kept = [w for w in out if w != MASK]
        it = iter(DOC)
        assert all(w in it for w in kept)
        assert len(DOC) - len(kept) <= round(0.3 * 60)  # overlapping spans merge: at most the budget is hidden
        assert not any(a == b == MASK for a, b in zip(out, out[1:]))


def test_infill_spans_examples():
    words = "A B C . D E .".split()
    assert infill_spans(words, [(0, 0)]) == [MASK] + words
    assert infill_spans(words, [(7, 0)]) == words + [MASK]
    assert infill_spans(words, [(1, 2), (2, 2)]) == ["A", MASK, "D", "E", "."]
    with pytest.raises(ValueError, match="spans inside"):
        infill_spans(words, [(6, 2)])


def test_span_lengths_are_poisson_three():
    # Long budget, lengths observed through the draws: mean of Poisson(3) is 3; 20000 draws give sd 0.012.
    g = gen(0)
    draws = [int(torch.poisson(torch.tensor(3.0), generator=g)) for _ in range(20000)]
    assert abs(sum(draws) / len(draws) - 3) < 0.06
    assert abs(Counter(draws)[0] / len(draws) - math.exp(-3)) < 0.01  # the 0-length spans that insert a mask


def test_permutation_and_rotation_keep_the_words():
    for seed in range(20):
        permuted = sentence_permutation(DOC, generator=gen(seed))
        assert sorted(map(tuple, sentences_of(permuted))) == sorted(map(tuple, sentences_of(DOC)))
        rotated = document_rotation(DOC, generator=gen(seed))
        k = rotated.index(DOC[0]) if rotated[0] != DOC[0] else 0
        assert rotate(rotated, k) == DOC
    with pytest.raises(ValueError, match="0 <= start"):
        rotate(DOC, 60)


def test_every_noising_function_is_seeded():
    for name, noise in NOISING.items():
        assert noise(DOC, generator=gen(3)) == noise(DOC, generator=gen(3)), name
