"""lecture_lib.analysis.probes: probes recover a planted linear signal, a rank-k probe only k directions,
an MLP probe memorises what a linear one cannot, and the control task keeps one label per word type with the
task's label distribution."""

import pytest
import torch

from lecture_lib.analysis.probes import (
    ProbeScore,
    control_labels,
    fit_probe,
    linear_probe,
    mlp_probe,
    probe_accuracy,
    probe_layers,
)


def planted(n: int, g: torch.Generator, directions: int = 3):
    """Labels = argmax of 3 fixed directions of 16-dimensional vectors, scaled and shifted per coordinate
    (standardisation must undo it)."""
    x = torch.randn(n, 16, generator=g)
    labels = x[:, :directions].argmax(-1)
    return x * torch.linspace(0.1, 10, 16) + 5, labels


def test_a_linear_probe_recovers_a_planted_linear_signal():
    g = torch.Generator().manual_seed(0)
    x, y = planted(2000, g)
    x_test, y_test = planted(500, g)
    probe = fit_probe(linear_probe(16, 3, generator=g), x, y, steps=300, lr=0.05)
    assert probe_accuracy(probe, x_test, y_test) > 0.95
    assert (
        probe_accuracy(
            fit_probe(linear_probe(16, 3, generator=g), x, y[torch.randperm(2000, generator=g)]), x_test, y_test
        )
        < 0.5
    )  # shuffled labels: near chance (1/3)


def test_a_rank_one_probe_reads_one_direction_only():
    g = torch.Generator().manual_seed(1)
    x, y = planted(2000, g)
    x_test, y_test = planted(500, g)
    rank1 = fit_probe(linear_probe(16, 3, rank=1, generator=g), x, y, steps=300, lr=0.05)
    rank2 = fit_probe(linear_probe(16, 3, rank=2, generator=g), x, y, steps=300, lr=0.05)
    assert probe_accuracy(rank1, x_test, y_test) < 0.8 < probe_accuracy(rank2, x_test, y_test)
    assert rank1[1][0].weight.shape == (1, 16)
    with pytest.raises(ValueError, match="rank"):
        linear_probe(16, 3, rank=17)


def test_control_labels_are_per_type_and_follow_the_label_distribution():
    g = torch.Generator().manual_seed(0)
    words = [f"w{i % 500}" for i in range(5000)]
    labels = [0] * 4000 + [1] * 1000
    control = control_labels(words, labels, g)
    assert all(control[i] == control[i % 500] for i in range(5000))
    assert 0.7 < sum(c == 0 for c in control[:500]) / 500 < 0.9  # 80% of types drawn as 0
    with pytest.raises(ValueError, match="a label per word"):
        control_labels(words, labels[:10], g)


def test_probe_layers_scores_each_layer_on_task_and_control():
    g = torch.Generator().manual_seed(2)
    x, y = planted(1000, g)
    noise = torch.randn(1000, 16, generator=g)
    words = torch.randint(0, 50, (1000,), generator=g).tolist()
    control = torch.tensor(control_labels(words, y.tolist(), g))
    split = slice(0, 800), slice(800, None)
    layers = [noise, x]  # layer 0 knows nothing, layer 1 holds the signal
    scores = probe_layers(
        [f[split[0]] for f in layers],
        [f[split[1]] for f in layers],
        (y[split[0]], y[split[1]]),
        (control[split[0]], control[split[1]]),
        3,
        g,
        steps=200,
    )
    assert scores[0].accuracy < 0.5 < 0.9 < scores[1].accuracy
    assert scores[1].selectivity > 0.4  # the words are random: the control is near chance everywhere
    assert ProbeScore(0.9, 0.6).selectivity == pytest.approx(0.3)


def test_an_mlp_probe_memorises_random_labels_that_a_linear_probe_cannot_fit():
    """Hewitt and Liang's point in small: 400 points in 8 dimensions with random labels of 4 classes; a linear
    probe fits about a third of them, the MLP probe all of them."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(400, 8, generator=g), torch.randint(4, (400,), generator=g)
    linear = probe_accuracy(fit_probe(linear_probe(8, 4, generator=g), x, y, steps=300, lr=0.05), x, y)
    mlp = probe_accuracy(fit_probe(mlp_probe(8, 4, 256, generator=g), x, y, steps=300, lr=0.05), x, y)
    assert linear < 0.45 and mlp > 0.95, (linear, mlp)
