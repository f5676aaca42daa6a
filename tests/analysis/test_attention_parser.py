"""lecture_lib.analysis.attention_parser: single heads read as parsers and the attention-only probe, against
loops written out here, a hand-worked sentence, and maps built to point along the gold arcs."""

import itertools

import pytest
import torch

from lecture_lib.analysis.attention_parser import (
    attachment_score,
    attention_parse,
    fit_attention_parser,
    head_features,
    right_branching,
    single_head_uas,
)
from lecture_lib.data.synthetic import SyntheticLanguage


def test_hand_worked_sentence():
    """ "the dog runs": heads [2, 3, 0] (the -> dog -> runs, the root). One layer, two heads: head 0 looks at
    the next word (right-branching), head 1 from each word to the previous one (so read backwards, by its
    column, the word attending most to "the" is "dog" and to "dog" is "runs")."""
    gold = [[2, 3, 0]]
    nxt = torch.tensor([[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.5, 0.4, 0.1]])
    prev = torch.tensor([[0.8, 0.1, 0.1], [0.8, 0.1, 0.1], [0.1, 0.8, 0.1]])
    maps = [torch.stack([nxt, prev])[None]]  # (1 layer, 2 heads, 3, 3)
    uas = single_head_uas(maps, gold)
    # rows: head 0 guesses the->dog, dog->runs (both right); head 1 guesses the->dog (self excluded:
    # row [0.8, 0.1, 0.1] without the diagonal ties at 0.1, argmax takes the first, "dog"), dog->the (wrong)
    assert uas[0, 0].tolist() == [1.0, 0.5]
    # columns: head 1, word "the" is attended most by "dog" (0.8, self excluded), "dog" by "runs": both right
    assert uas[1, 0, 1] == 1.0
    assert right_branching(3) == [2, 3, 0]
    assert attachment_score([right_branching(3)], gold) == 1.0


def brute_force_uas(word_maps, heads):
    """Every (direction, layer, head) parsed by explicit loops over words and candidates."""
    layers, n_heads = word_maps[0].shape[:2]
    out = torch.zeros(2, layers, n_heads)
    arcs = sum(1 for h in heads for x in h if x > 0)
    for d, layer, head in itertools.product(range(2), range(layers), range(n_heads)):
        right = 0
        for m, gold in zip(word_maps, heads):
            a = m[layer, head] if d == 0 else m[layer, head].T
            for i, g in enumerate(gold):
                if g == 0:
                    continue
                best = max((j for j in range(len(gold)) if j != i), key=lambda j: (a[i, j].item(), -j))
                right += best == g - 1
        out[d, layer, head] = right / arcs
    return out


def test_single_head_uas_equals_brute_force():
    torch.manual_seed(0)
    sentences = SyntheticLanguage(0).sentences(6, seed=1)
    maps = [torch.rand(2, 3, len(s.words), len(s.words)).softmax(-1) for s in sentences]
    heads = [s.heads for s in sentences]
    torch.testing.assert_close(single_head_uas(maps, heads), brute_force_uas(maps, heads))


def test_features_and_parse_follow_the_equation():
    torch.manual_seed(1)
    m = torch.rand(2, 2, 5, 5)
    f = head_features(m)
    assert f.shape == (5, 5, 8)
    assert f[1, 3, 2] == m[1, 0, 1, 3] and f[1, 3, 6] == m[1, 0, 3, 1]  # k = layer 1, head 0: α_ij then α_ji
    w = torch.zeros(8)
    w[6] = 1.0  # only head (1, 0) read backwards
    expected = [max((j for j in range(5) if j != i), key=lambda j: m[1, 0, j, i].item()) + 1 for i in range(5)]
    assert attention_parse(w, [m]) == [expected]


def gold_pointing_maps(sentence, layers=2, heads=3, noise=0.0):
    """Random maps, plus one head (1, 2) whose row for each word points to its gold head."""
    n = len(sentence.words)
    maps = torch.rand(layers, heads, n, n)
    for i, h in enumerate(sentence.heads):
        maps[1, 2, i] = noise * torch.rand(n)
        maps[1, 2, i, (h - 1) if h > 0 else i] = 1.0
    return maps


def test_probe_finds_the_head_that_holds_the_tree():
    torch.manual_seed(2)
    sentences = SyntheticLanguage(0).sentences(20, seed=5)
    maps = [gold_pointing_maps(s, noise=0.5) for s in sentences]
    heads = [s.heads for s in sentences]
    weights = fit_attention_parser(maps[:12], heads[:12])
    assert attachment_score(attention_parse(weights, maps[12:]), heads[12:]) == 1.0
    assert int(weights.argmax()) == 1 * 3 + 2  # the forward weight of head (1, 2)
    right = attachment_score([right_branching(len(h)) for h in heads[12:]], heads[12:])
    assert right < 0.9


def test_errors():
    with pytest.raises(ValueError, match="layers, heads, W, W"):
        head_features(torch.rand(3, 3))
    with pytest.raises(ValueError, match="non-root"):
        attachment_score([[0]], [[0]])
