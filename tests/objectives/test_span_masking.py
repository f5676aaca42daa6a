"""lecture_lib.objectives.span_masking: span lengths, the 15% budget, whole units only, 80/10/10 per unit or per
piece, the spans the budget cuts."""

import math

import pytest
import torch

from lecture_lib.objectives.span_masking import (
    UnitMaskedDataset,
    mask_spans,
    mask_units,
    mask_whole_words,
    sample_span_lengths,
    span_boundaries,
    span_length_distribution,
    span_truncation,
)

MASK, VOCAB = 4, 1000


def test_the_renormalised_geometric_has_mean_3_8_and_clipping_would_give_4_46():
    lengths = torch.arange(1, 11, dtype=torch.float64)
    weights = 0.2 * 0.8 ** (lengths - 1)
    torch.testing.assert_close(span_length_distribution(), weights / weights.sum())
    assert round(float((span_length_distribution() * lengths).sum()), 3) == 3.797
    # min(x, 10) of an unrestricted geometric puts the tail's mass 0.8^9 on 10 instead
    clipped = float((weights[:9] * lengths[:9]).sum() + 10 * 0.8**9)
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
                words[r, t : t + pieces] = w
                entities[r, t : t + pieces] = e
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
    "whole words": lambda ids, words, entities, g: mask_whole_words(
        ids, words, mask_token_id=MASK, vocab_size=VOCAB, generator=g
    ),
    "entities": lambda ids, words, entities, g: mask_units(
        ids, entities, mask_token_id=MASK, vocab_size=VOCAB, generator=g
    ),
    "geometric spans": lambda ids, words, entities, g: mask_spans(
        ids, words, mask_token_id=MASK, vocab_size=VOCAB, generator=g
    ),
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
    masked, labels = mask_units(
        ids, entities, mask_token_id=MASK, vocab_size=VOCAB, generator=torch.Generator().manual_seed(2)
    )
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


def fates_of_selected_words(replacement, rows=400, words_per_row=100, pieces=3, seed=0):
    """Rows of words of ``pieces`` pieces each, masked by whole words; the fate of every selected piece (0 [MASK],
    1 random, 2 kept), one row per selected word."""
    word_ids = torch.arange(words_per_row * pieces).div(pieces, rounding_mode="floor").expand(rows, -1)
    ids = torch.randint(10, VOCAB, word_ids.shape, generator=torch.Generator().manual_seed(seed))
    masked, labels = mask_whole_words(
        ids,
        word_ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        replacement=replacement,
        generator=torch.Generator().manual_seed(seed + 1),
    )
    whole_units_only(labels, word_ids)
    chosen = labels != -100
    fate = torch.where(masked == MASK, 0, torch.where(masked == ids, 2, 1))
    return fate[chosen].view(-1, pieces)  # a selected word's pieces are consecutive selected positions


def test_whole_word_masking_draws_80_10_10_for_each_piece_as_google_does():
    """Google's create_pretraining_data.py selects whole words, then decides [MASK] / kept / random for every
    selected piece on its own: over 400 rows (about 6,000 words, 18,000 pieces) the pieces' shares are 80/10/10
    and a word's three pieces differ in fate with chance 1 - 0.8^3 - 0.1^3 - 0.1^3 = 0.486; per unit, never
    (save a random token that happens to be [MASK] or the original, 2 in 1,000)."""
    per_piece = fates_of_selected_words("per piece")
    n = per_piece.numel()
    shares = [(per_piece == k).double().mean().item() for k in range(3)]
    tolerance = 4 * math.sqrt(0.16 / n)  # four binomial standard errors of the 80% share
    assert abs(shares[0] - 0.8) < tolerance and abs(shares[1] - 0.1) < tolerance, shares
    mixed = (per_piece != per_piece[:, :1]).any(1).double()
    expected = 1 - 0.8**3 - 2 * 0.1**3
    assert abs(mixed.mean().item() - expected) < 4 * math.sqrt(expected * (1 - expected) / len(mixed)), mixed.mean()
    per_unit = fates_of_selected_words("per unit")
    assert (per_unit != per_unit[:, :1]).any(1).double().mean() < 0.005
    # the default of mask_whole_words is Google's rule; that of mask_units, SpanBERT's
    ids, words, _ = corpus(rows=20)
    g = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    options = dict(mask_token_id=MASK, vocab_size=VOCAB)
    default = mask_whole_words(ids, words, generator=g(), **options)
    assert all(
        torch.equal(a, b)
        for a, b in zip(default, mask_units(ids, words, generator=g(), replacement="per piece", **options))
    )


def test_span_truncation_replays_the_selection_of_mask_spans():
    """span_truncation sees the spans mask_spans chooses with the same generator: with one-token words the words
    they keep are the masked tokens, and there are at least as many spans as masked runs (adjacent spans merge);
    in 64-token rows the 9-token budget cuts a third of the spans and never keeps 10 words, in 512-token rows it
    cuts few and the kept spans reach 10."""
    words = torch.cat([torch.full((300, 1), -1), torch.arange(62).expand(300, -1), torch.full((300, 1), -1)], 1)
    ids = torch.randint(10, VOCAB, words.shape, generator=torch.Generator().manual_seed(0))
    _, labels = mask_spans(ids, words, mask_token_id=MASK, vocab_size=VOCAB, generator=torch.Generator().manual_seed(1))
    short = span_truncation(words, generator=torch.Generator().manual_seed(1))
    masked = int((labels != -100).sum())
    runs = int(span_boundaries(labels)["offset"].eq(0).sum())
    # the mean kept length times the number of spans is the masked count; so the spans number masked / taken
    spans = masked / short["taken"]
    assert abs(spans - round(spans)) < 1e-6 and round(spans) >= runs
    assert short["cut"] > 0.2 and short["longest"] <= 9 and short["taken"] < short["drawn"]
    long = span_truncation(torch.arange(512).expand(100, -1), generator=torch.Generator().manual_seed(2))
    assert long["cut"] < 0.1 and long["longest"] == 10
    with pytest.raises(ValueError, match="no span was chosen"):
        span_truncation(torch.full((2, 8), -1))


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
        _, labels = mask_whole_words(
            ids, word_ids, mask_token_id=MASK, vocab_size=VOCAB, generator=torch.Generator().manual_seed(seed)
        )
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
    with pytest.raises(ValueError, match="expected replacement in"):
        mask_whole_words(ids, words, replacement="per word", **options)
    with pytest.raises(ValueError, match="once per span"):
        UnitMaskedDataset(ids, words, spans=True, replacement="per piece", **options)
    with pytest.raises(ValueError, match="no boundary token"):
        span_boundaries(torch.tensor([[5, -100, -100]]))
