"""lecture_lib.objectives.span_corruption: the paper's example exactly, and T5's noise rule over many seeds."""

import numpy as np
import pytest
import torch

from lecture_lib.objectives.span_corruption import (
    T5_SENTINELS,
    noise_spans,
    random_segmentation,
    random_spans_noise_mask,
    span_corrupt,
    span_counts,
)

WORDS = "Thank you for inviting me to your party last week .".split()
NOISE = [w in ("for", "inviting", "last") for w in WORDS]


def test_the_papers_example_exactly():
    inputs, targets = span_corrupt(WORDS, NOISE, sentinels=["<X>", "<Y>", "<Z>"])
    assert inputs == "Thank you <X> me to your party <Y> week .".split()
    assert targets == "<X> for inviting <Y> last <Z>".split()


def test_default_sentinels_are_t5s_extra_ids():
    inputs, targets = span_corrupt(WORDS, NOISE)
    assert inputs[2] == "<extra_id_0>" and inputs[7] == "<extra_id_1>"
    assert targets == ["<extra_id_0>", "for", "inviting", "<extra_id_1>", "last", "<extra_id_2>"]
    assert len(T5_SENTINELS) == 100


def test_inputs_and_targets_rebuild_the_text():
    for seed in range(50):
        g = torch.Generator().manual_seed(seed)
        words = [f"w{i}" for i in range(40)]
        mask = torch.rand(40, generator=g) < 0.3
        inputs, targets = span_corrupt(words, mask)
        spans = {s: [] for s in T5_SENTINELS}
        current = None
        for t in targets:
            if t in spans:
                current = t
            else:
                spans[current].append(t)
        rebuilt = [w for t in inputs for w in (spans[t] if t in spans else [t])]
        assert rebuilt == words
        n = len(noise_spans(mask))
        assert len(inputs) == 40 - int(mask.sum()) + n and len(targets) == int(mask.sum()) + n + 1


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match=r"noise mask of shape \(11,\)"):
        span_corrupt(WORDS, NOISE[:-1])
    with pytest.raises(ValueError, match="2 noise spans need 3 sentinels"):
        span_corrupt(WORDS, NOISE, sentinels=["<X>", "<Y>"])
    with pytest.raises(ValueError, match="length >= 2"):
        random_spans_noise_mask(1)
    with pytest.raises(ValueError, match="num_segments"):
        random_segmentation(3, 4)


def test_counts_follow_t5s_rounding():
    assert span_counts(512) == (77, 26)  # the paper's inputs: 512 - 77 + 26 + 1 = 462 tokens, targets 104
    for length in range(2, 300):
        noise = int(np.round(length * 0.15))
        noise = min(max(noise, 1), length - 1)
        assert span_counts(length) == (noise, max(int(np.round(noise / 3.0)), 1))
    assert span_counts(10) == (2, 1)  # 1.5 rounds half to even (2); 0.67 -> 1


@pytest.mark.parametrize("length", [2, 11, 30, 114, 512])
def test_random_mask_properties_over_many_seeds(length):
    num_noise, num_spans = span_counts(length)
    for seed in range(200):
        mask = random_spans_noise_mask(length, generator=torch.Generator().manual_seed(seed))
        assert mask.dtype == torch.bool and mask.shape == (length,)
        assert int(mask.sum()) == num_noise and len(noise_spans(mask)) == num_spans
        assert not mask[0]


def test_mean_span_length_is_three():
    lengths = [
        e - s
        for seed in range(400)
        for s, e in noise_spans(random_spans_noise_mask(512, generator=torch.Generator().manual_seed(seed)))
    ]
    assert abs(np.mean(lengths) - 77 / 26) < 1e-9  # every mask: 77 tokens in 26 spans, so the mean is 2.96


def test_segmentation_is_uniform_over_compositions():
    # 5 items in 3 positive parts: C(4, 2) = 6 compositions, each with probability 1/6. Over 6000 draws each
    # count is Binomial(6000, 1/6): sd 28.9, so +-150 is more than 5 sd.
    counts = {}
    g = torch.Generator().manual_seed(0)
    for _ in range(6000):
        key = tuple(random_segmentation(5, 3, generator=g).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6 and all(abs(c - 1000) < 150 for c in counts.values())
