"""lecture_lib.analysis.edge_probing against independent references: the scalar mix against a hand-written
weighted sum and torch.einsum, span attention against torch's softmax over the span's slice, the expected
layer against a brute-force sum, and an edge probe that must read a label from outside one span."""

import pytest
import torch
from torch.nn import functional as F

from lecture_lib.analysis.edge_probing import (
    EdgeProbe,
    SpanBatch,
    centre_of_gravity,
    cumulative_deltas,
    expected_layer,
    masked_softmax,
    pool_spans,
    scalar_mix,
    span_windows,
)
from lecture_lib.analysis.probes import fit_full_batch, probe_accuracy


def test_scalar_mix_is_the_weighted_sum_of_the_layers():
    g = torch.Generator().manual_seed(0)
    layers, logits = torch.randn(7, 5, 3, generator=g), torch.randn(7, generator=g)
    weights = torch.exp(logits) / torch.exp(logits).sum()
    by_hand = sum(weights[layer] * layers[layer] for layer in range(7))
    torch.testing.assert_close(scalar_mix(layers, logits, 1.5), 1.5 * by_hand)
    torch.testing.assert_close(scalar_mix(layers, logits), torch.einsum("l,lwh->wh", weights, layers))
    with pytest.raises(ValueError, match="one logit per layer"):
        scalar_mix(layers, logits[:6])


def test_span_attention_is_softmax_over_the_span_and_exactly_zero_outside():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(10, generator=g)
    spans = torch.tensor([[2, 6], [7, 8], [0, 10]])
    positions, mask = span_windows(spans, 10)
    weights = masked_softmax(logits[positions], mask)
    for (start, end), row, real in zip(spans.tolist(), weights, mask):
        torch.testing.assert_close(row[: end - start], F.softmax(logits[start:end], -1))
        assert (row[~real] == 0).all()  # padding gets weight exactly 0, not a small number
    assert positions[0, :4].tolist() == [2, 3, 4, 5] and mask.sum(-1).tolist() == [4, 1, 10]


def test_pooling_a_span_is_its_attention_weighted_average_and_one_word_is_that_word():
    g = torch.Generator().manual_seed(2)
    projected, scorer = torch.randn(9, 4, generator=g), torch.randn(4, generator=g)
    pooled = pool_spans(projected, scorer, torch.tensor([[3, 4], [1, 6]]))
    torch.testing.assert_close(pooled[0], projected[3])
    alpha = F.softmax(projected[1:6] @ scorer, -1)
    torch.testing.assert_close(pooled[1], (alpha[:, None] * projected[1:6]).sum(0))


@pytest.mark.parametrize(
    "spans, problem",
    [
        ([[2, 2]], "end > start"),
        ([[3, 1]], "end > start"),
        ([[-1, 2]], "0 <= start"),
        ([[4, 11]], "end <= 10"),
        ([], "non-empty"),
    ],
)
def test_bad_spans_are_refused_with_the_problem_named(spans, problem):
    with pytest.raises(ValueError, match=problem):
        span_windows(torch.tensor(spans, dtype=torch.long).reshape(-1, 2), 10)


def test_centre_of_gravity_of_a_one_hot_mix_is_that_layer():
    for layer in range(5):
        assert centre_of_gravity(F.one_hot(torch.tensor(layer), 5).float()) == layer
    assert centre_of_gravity(torch.tensor([0.5, 0.5]), layers=[3, 4]) == 3.5


def test_expected_layer_matches_a_brute_force_sum():
    scores = [0.40, 0.55, 0.52, 0.70, 0.71, 0.90]
    deltas = [scores[layer] - scores[layer - 1] for layer in range(1, 6)]
    assert cumulative_deltas(scores) == pytest.approx(deltas)
    brute = sum(layer * d for layer, d in zip(range(1, 6), deltas)) / sum(deltas)
    assert expected_layer(scores) == pytest.approx(brute)
    assert expected_layer([0.3, 0.3, 0.3, 0.8]) == pytest.approx(3.0)  # all the gain at layer 3
    with pytest.raises(ValueError, match="above layer 0"):
        expected_layer([0.9, 0.95, 0.9])


def test_edge_probe_reads_a_label_that_only_context_outside_the_span_holds():
    """Word 0 of each 'sentence' carries a sign; the label is that sign, asked of the span [1, 3). Layer 0
    holds each word alone; layer 1 adds word 0's vector to every word of its sentence (context). The probe
    on layer 0 stays near chance, the mix of layers 0..1 reads the label and puts its weight on layer 1."""
    g = torch.Generator().manual_seed(3)
    sentences, width, hidden = 300, 4, 8
    lexical = torch.randn(sentences, width, hidden, generator=g)
    sign = torch.randint(0, 2, (sentences,), generator=g)
    lexical[:, 0, 0] = 3.0 * (2 * sign - 1)
    context = lexical + lexical[:, :1]
    words = torch.stack([lexical, context]).reshape(2, sentences * width, hidden)
    spans = torch.tensor([[[s * width + 1, s * width + 3]] for s in range(sentences)])
    train, test = SpanBatch(words, spans[:200]), SpanBatch(words, spans[200:])
    scores = {}
    for top in (0, 1):
        probe = EdgeProbe(range(top + 1), hidden, 1, 2, projection=8, generator=torch.Generator().manual_seed(0))
        fit_full_batch(probe, train, sign[:200], 150, 0.02, parameters=probe.parameter_groups(0.2))
        scores[top] = probe_accuracy(probe, test, sign[200:])
    majority = max(sign[200:].float().mean().item(), 1 - sign[200:].float().mean().item())
    assert scores[0] < majority + 0.15 and scores[1] > 0.95
    assert centre_of_gravity(probe.mix_weights()) > 0.5  # the mix leans on the contextual layer
    with pytest.raises(ValueError, match="range"):
        EdgeProbe([0, 2], hidden, 1, 2)
    with pytest.raises(ValueError, match="2 spans"):
        EdgeProbe(range(2), hidden, 2, 2)(train)
