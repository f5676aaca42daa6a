"""lecture_lib.analysis.head_classes on attention maps built by hand, whose classes are known."""

import torch

from lecture_lib.analysis.head_classes import PATTERNS, classify_patterns, pattern_shares, voita_classes

# one pair "[CLS] a b c d [SEP] e f g h i [SEP]": its specials and segments
LENGTH = 12
MASK = torch.ones(1, LENGTH, dtype=torch.long)
SPECIAL = torch.zeros(1, LENGTH, dtype=torch.bool)
SPECIAL[0, [0, 5, 11]] = True
SEGMENTS = (torch.arange(LENGTH) > 5).long()[None]
WORDS = (~SPECIAL[0]).nonzero().flatten().tolist()


def head(rule):
    """A (12, 12) map whose row i is ``rule(i)``: a dict {key: weight} (rows of specials attend to themselves)."""
    a = torch.zeros(LENGTH, LENGTH, dtype=torch.float64)
    for i in range(LENGTH):
        for j, weight in (rule(i) if i in WORDS else {i: 1.0}).items():
            a[i, j] += weight
    return a


def neighbour(i):
    return i - 1 if i - 1 in WORDS else i + 1


def same_segment_far(i):
    return [j for j in WORDS if SEGMENTS[0, j] == SEGMENTS[0, i] and abs(i - j) > 1]


def test_patterns_of_handmade_maps():
    specials = {0: 1 / 3, 5: 1 / 3, 11: 1 / 3}
    maps = torch.stack(
        [
            head(lambda i: specials),
            head(lambda i: {neighbour(i): 1.0}),
            head(lambda i: {**{j: 0.4 * w for j, w in specials.items()}, neighbour(i): 0.4, i: 0.2}),
            head(lambda i: {j: 1 / len(same_segment_far(i)) for j in same_segment_far(i)}),
            head(lambda i: {j: 1 / LENGTH for j in range(LENGTH)}),
        ]
    )[None, None]  # (1, 1, 5, T, T)
    shares = pattern_shares(maps, MASK, SPECIAL, SEGMENTS)
    torch.testing.assert_close(shares["vertical"][0, 0, :3], torch.tensor([1, 0, 0.4], dtype=torch.float64))
    torch.testing.assert_close(shares["diagonal"][0, 0, :3], torch.tensor([0, 1, 0.4], dtype=torch.float64))
    torch.testing.assert_close(shares["block"][0, 0, 3], torch.tensor(1.0, dtype=torch.float64))
    assert [PATTERNS[i] for i in classify_patterns(shares)[0, 0]] == [
        "vertical",
        "diagonal",
        "vertical+diagonal",
        "block",
        "heterogeneous",
    ]


def test_voita_classes_of_handmade_maps():
    frequency = torch.tensor([[0, 50, 40, 30, 60, 0, 2, 9, 70, 80, 90, 0]])  # word 6 is the rarest
    previous = head(lambda i: {i - 1: 0.7, i: 0.3})
    rare = head(lambda i: {6: 0.6, 0: 0.4})
    classes = voita_classes(torch.stack([previous, rare])[None, None], MASK, SPECIAL, frequency)
    assert classes.positional().tolist() == [[True, False]]
    assert classes.previous.tolist() == [[1.0, 1 / 9]]  # word 7 looks at word 6, its previous token
    assert classes.rare.tolist() == [[1 / 9, 1.0]]
    assert classes.rare_chance == 1 / 9
    # confidence leaves [CLS] and [SEP] out: words 1 and 6 put 0.7 on one of them and 0.3 on themselves
    torch.testing.assert_close(classes.confidence, torch.tensor([[(7 * 0.7 + 2 * 0.3) / 9, 0.6]], dtype=torch.float64))
