"""lecture_lib.objectives.denoising: T5's Table 3, row by row, and the target lengths each objective implies."""

import pytest
import torch

from lecture_lib.objectives.denoising import (
    OBJECTIVES,
    apply_objective,
    bert_style,
    deshuffle,
    drop_tokens,
    iid_noise_mask,
    prefix_lm,
)
from lecture_lib.objectives.span_corruption import span_corrupt

WORDS = "Thank you for inviting me to your party last week .".split()
NOISE = [w in ("for", "inviting", "last") for w in WORDS]


def test_table_3_rows_exactly():
    assert prefix_lm(WORDS, 4) == ("Thank you for inviting".split(), "me to your party last week .".split())
    mass = bert_style(WORDS, NOISE)
    assert mass == ("Thank you <M> <M> me to your party <M> week .".split(), WORDS)
    assert drop_tokens(WORDS, NOISE) == ("Thank you me to your party week .".split(), "for inviting last".split())
    spans = span_corrupt(
        WORDS, [w in ("for", "inviting", "me", "your", "party", "last") for w in WORDS], sentinels=["<X>", "<Y>", "<Z>"]
    )
    assert spans == ("Thank you <X> to <Y> week .".split(), "<X> for inviting me <Y> your party last <Z>".split())


def test_deshuffling_keeps_the_words():
    inputs, targets = deshuffle(WORDS, list(reversed(range(11))))
    assert inputs == WORDS[::-1] and targets == WORDS
    with pytest.raises(ValueError, match="permutation"):
        deshuffle(WORDS, [0] * 11)


def test_target_lengths_as_the_definitions_imply():
    words = [f"w{i}" for i in range(60)]
    for seed in range(30):
        g = lambda name: torch.Generator().manual_seed(seed)  # noqa: E731 - the same noise for every objective
        out = {name: apply_objective(name, words, vocabulary=["apple"], generator=g(name)) for name in OBJECTIVES}
        assert out["bert_style"][1] == words and out["deshuffling"][1] == words
        assert len(out["bert_style"][0]) == 60 and sorted(out["deshuffling"][0]) == sorted(words)
        inputs, targets = out["prefix_lm"]
        assert inputs + targets == words
        dropped = len(out["drop_tokens"][1])
        assert len(out["drop_tokens"][0]) + dropped == 60 and dropped < 60  # shorter than BERT-style's full text
        replaced = out["replace_spans"]
        assert len(replaced[1]) >= dropped + 1  # the same noise, plus the sentinels
        assert len(out["random_spans"][1]) == 9 + 3 + 1  # 60 * 0.15 = 9 noise tokens in 3 spans, 4 sentinels


def test_iid_noise_rate():
    # 100000 Bernoulli(0.15) draws: sd sqrt(0.15 * 0.85 / 1e5) = 0.0011, so +-0.006 is over 5 sd.
    rate = iid_noise_mask(100_000, generator=torch.Generator().manual_seed(0)).float().mean()
    assert abs(float(rate) - 0.15) < 0.006


def test_bad_input():
    with pytest.raises(ValueError, match="noise mask of shape"):
        drop_tokens(WORDS, NOISE[:3])
    with pytest.raises(ValueError, match="0 < split"):
        prefix_lm(WORDS, 0)
    with pytest.raises(ValueError, match="one replacement"):
        bert_style(WORDS, NOISE, ["x"])
    with pytest.raises(ValueError, match="expected an objective"):
        apply_objective("mass", WORDS)
