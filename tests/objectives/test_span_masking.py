"""lecture_lib.objectives.span_masking: span lengths, the 15% budget, whole units only, 80/10/10 per unit."""

import math

import pytest
import torch

from lecture_lib.objectives.span_masking import (
    mask_spans,
    mask_units,
    mask_whole_words,
    sample_span_lengths,
    span_boundaries,
    span_length_distribution,
)

MASK, VOCAB = 4, 1000


def test_the_renormalised_geometric_has_mean_3_8_and_clipping_would_give_4_46():
    lengths = torch.arange(1, 11, dtype=torch.float64)
    weights = 0.2 * 0.8 ** (lengths - 1)
    torch.testing.assert_close(span_length_distribution(), weights / weights.sum())
    assert round(float((span_length_distribution() * lengths).sum()), 3) == 3.797
    # min(x, 10) of an unrestricted geometric puts the tail's mass 0.8^9 on 10 instead
    clipped = float((weights[:9] * lengths[:9]).sum() + 10 * 0.8 ** 9)
    assert round(clipped, 2) == 4.46


def test_sampled_span_lengths_have_mean_3_80():
    draws = sample_span_lengths(100_000, generator=torch.Generator().manual_seed(0))
    assert draws.dtype == torch.long and draws.min() == 1 and draws.max() == 10
    # the standard deviation of one draw is about 2.6, so the mean of 1e5 has a standard error of 0.008;
    # ± 0.05 is six standard errors
    assert abs(draws.double().mean().item() - 3.80) < 0.05
    counts = torch.bincount(draws, minlength=11)[1:].double() / len(draws)
    torch.testing.assert_close(counts, span_length_distribution(), atol=0.005, rtol=0)


def corpus(rows=400, length=64, seed=0):
    """Rows [CLS] words... [SEP] pad: words of 1-3 pieces, and gold "entities" of 1-3 consecutive words."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(10, VOCAB, (rows, length), generator=g)
    words = torch.full((rows, length), -1)
    entities = torch.full((rows, length), -1)
    for r in range(rows):
        real = int(torch.randint(length - 20, length, (1,), generator=g))
        t, w, e = 1, 0, 0
        while t < real - 1:
            span_words = int(torch.randint(1, 4, (1,), generator=g)) if torch.rand(1, generator=g) < 0.3 else 1
            for _ in range(span_words):
                pieces = min(int(torch.randint(1, 4, (1,), generator=g)), real - 1 - t)
                if pieces <= 0:
                    break
                words[r, t:t + pieces] = w
                entities[r, t:t + pieces] = e
                t, w = t + pieces, w + 1
            e += 1
    return input_ids, words, entities


def whole_units_only(labels, units):
    """Every unit is labelled in all its tokens or in none."""
    masked = labels != -100
    for r in range(units.shape[0]):
        for u in units[r][units[r] >= 0].unique():
            covered = masked[r][units[r] == u]
            assert covered.all() or not covered.any(), f"row {r}: unit {int(u)} masked in part"
    assert not masked[units < 0].any(), "a token outside every unit was masked"


SCHEMES = {
    "whole words": lambda ids, words, entities, g: mask_whole_words(ids, words, mask_token_id=MASK,
                                                                     vocab_size=VOCAB, generator=g),
    "entities": lambda ids, words, entities, g: mask_units(ids, entities, mask_token_id=MASK, vocab_size=VOCAB,
                                                           generator=g),
    "geometric spans": lambda ids, words, entities, g: mask_spans(ids, words, mask_token_id=MASK,
                                                                  vocab_size=VOCAB, generator=g),
}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_keeps_the_15_percent_budget_and_masks_whole_units(scheme):
    ids, words, entities = corpus()
    masked, labels = SCHEMES[scheme](ids, words, entities, torch.Generator().manual_seed(1))
    fraction = (labels != -100).sum().item() / (words >= 0).sum().item()
    # each row meets round(15%) to within one unit (at most 9 tokens short, rarely): about 21,000 maskable
    # tokens in all, so the fraction is 15% minus a few tenths of a percent at worst
    assert abs(fraction - 0.15) < 0.01, fraction
    whole_units_only(labels, words)
    if scheme == "entities":
        whole_units_only(labels, entities)
    assert torch.equal(masked[labels == -100], ids[labels == -100])


def test_replacement_is_80_10_10_and_decided_once_per_unit():
    ids, words, entities = corpus(rows=800)
    masked, labels = mask_units(ids, entities, mask_token_id=MASK, vocab_size=VOCAB,
                                generator=torch.Generator().manual_seed(2))
    fates, split = [], 0
    for r in range(ids.shape[0]):
        for u in entities[r][(labels[r] != -100)].unique():
            tokens = entities[r] == u
            is_mask = masked[r][tokens] == MASK
            split += bool(is_mask.any() and not is_mask.all())  # only a random token that happens to be [MASK]
            unchanged = masked[r][tokens] == ids[r][tokens]
            fates.append("mask" if is_mask.all() else "same" if unchanged.all() else "random")
    n = len(fates)
    # decided per token, about a third of the multi-token units would be split; per unit, only by the 1/1000
    # chance that a random replacement is [MASK] itself
    assert split / n < 0.005, split
    # binomial standard error of a 10% share over n ~ 3,000 units: sqrt(0.09 / n) ~ 0.55%; allow 4 of them
    share = {f: fates.count(f) / n for f in ("mask", "same", "random")}
    tolerance = 4 * math.sqrt(0.16 / n)
    assert abs(share["mask"] - 0.8) < tolerance and abs(share["same"] - 0.1) < tolerance, share


def test_whole_word_masking_on_the_paper_example():
    tokens = "[CLS] the man jumped up , put his basket on phil ##am ##mon ' s head [SEP]".split()
    word_of = []
    w = -1
    for t in tokens:
        w += not t.startswith("##")
        word_of.append(w)
    word_ids = torch.tensor([[-1] + word_of[1:-1] + [-1]])
    ids = torch.arange(10, 10 + len(tokens))[None]
    for seed in range(200):
        _, labels = mask_whole_words(ids, word_ids, mask_token_id=MASK, vocab_size=VOCAB,
                                     generator=torch.Generator().manual_seed(seed))
        chosen = (labels[0] != -100).tolist()
        assert sum(chosen) in (2, 3)  # round(15% of 15) = 2 tokens, or phil ##am ##mon when it comes first
        assert len({chosen[i] for i in (10, 11, 12)}) == 1  # phil ##am ##mon together or not at all


def test_span_boundaries_against_a_written_out_loop():
    _, words, _ = corpus(rows=50)
    ids = torch.randint(10, VOCAB, words.shape)
    _, labels = mask_spans(ids, words, mask_token_id=MASK, vocab_size=VOCAB, generator=torch.Generator().manual_seed(3))
    got = span_boundaries(labels)
    expected = {k: [] for k in got}
    for r, row in enumerate((labels != -100).tolist()):
        for i, m in enumerate(row):
            if m:
                s, e = i, i
                while row[s - 1]:
                    s -= 1
                while row[e + 1]:
                    e += 1
                for k, v in zip(expected, (r, s - 1, e + 1, i - s, int(labels[r, i]))):
                    expected[k].append(v)
    assert {k: v.tolist() for k, v in got.items()} == expected


def test_bad_input_raises():
    ids, words, _ = corpus(rows=2)
    options = dict(mask_token_id=MASK, vocab_size=VOCAB)
    for budget in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"expected a masking budget in \(0, 1\)"):
            mask_whole_words(ids, words, budget=budget, **options)
    with pytest.raises(ValueError, match="do not cover the tokens"):
        mask_whole_words(ids, words[:, :-1], **options)
    scattered = words.clone()
    scattered[0, 5] = scattered[0, 30]
    with pytest.raises(ValueError, match="not contiguous"):
        mask_whole_words(ids, scattered, **options)
    short = torch.tensor([[-1, 0, 1, 1, 2, -1]])
    with pytest.raises(ValueError, match="longer than the sequence"):
        mask_spans(torch.arange(6)[None], short, **options)
    with pytest.raises(ValueError, match="expected p in"):
        sample_span_lengths(3, p=0)
    with pytest.raises(ValueError, match="no boundary token"):
        span_boundaries(torch.tensor([[5, -100, -100]]))
