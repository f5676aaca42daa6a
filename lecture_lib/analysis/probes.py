"""Probing classifiers (Liu et al. 2019; Hewitt and Liang 2019): a small classifier trained on frozen
vectors to predict a property, and a control task that asks whether the probe learned the property or only
memorised the words.

A linear probe is softmax regression, ``p(y | h) = softmax(W h + b)``; a rank-k probe factors ``W = A B``
with ``B`` (k, H), so it may only read a k-dimensional projection of ``h``; an MLP probe puts one hidden layer
of ReLUs between, ``softmax(W2 relu(W1 h + b1) + b2)``. All are fitted full-batch with Adam on the
cross-entropy. The *control task* (Hewitt and Liang 2019) gives every word type a label drawn
at random from the task's label distribution, once, and keeps it in every context: a probe can solve it
only by remembering word identities. *Selectivity* = task accuracy - control accuracy: a good probe is
accurate on the task and poor on the control.

Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from lecture_lib.runtime import progress_bar


def linear_probe(
    hidden_size: int, num_classes: int, rank: int | None = None, generator: torch.Generator | None = None
) -> nn.Module:
    """``W h + b`` with ``W`` (C, H), or, with ``rank`` k, ``A (B h) + b`` with ``B`` (k, H) and ``A`` (C, k).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if rank is not None and not 1 <= rank <= hidden_size:
        raise ValueError(f"expected a rank in [1, {hidden_size}], got {rank}")
    layers = (
        [nn.Linear(hidden_size, rank, bias=False), nn.Linear(rank, num_classes)]
        if rank
        else [nn.Linear(hidden_size, num_classes)]
    )
    return initialised(nn.Sequential(*layers), generator)


def mlp_probe(hidden_size: int, num_classes: int, width: int, generator: torch.Generator | None = None) -> nn.Module:
    """``W2 relu(W1 h + b1) + b2`` with ``W1`` (width, H): Hewitt and Liang's MLP probe with one hidden layer.

    >>> mlp_probe(384, 10, 256)(torch.zeros(5, 384)).shape
    torch.Size([5, 10])

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    layers = nn.Sequential(nn.Linear(hidden_size, width), nn.ReLU(), nn.Linear(width, num_classes))
    return initialised(layers, generator)


def initialised(module: nn.Module, generator: torch.Generator | None) -> nn.Module:
    """``module`` with every ``nn.Linear`` drawn from ``generator``: weights uniform in
    ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``, biases zero (so a probe's draw depends on its seed only).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            bound = layer.in_features**-0.5
            with torch.no_grad():
                layer.weight.uniform_(-bound, bound, generator=generator)
                if layer.bias is not None:
                    layer.bias.zero_()
    return module


def fit_probe(
    probe: nn.Module,
    features: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 150,
    lr: float = 0.01,
    weight_decay: float = 0.0,
) -> nn.Module:
    """Train ``probe`` on (N, H) features and (N,) labels: ``steps`` full-batch Adam steps on the
    cross-entropy. The features are standardised with the training set's mean and standard deviation first
    (folded into the probe, which then reads raw vectors), so one learning rate suits every layer.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if features.shape[0] != labels.shape[0]:
        raise ValueError(f"expected a label per feature row, got {features.shape[0]} rows, {labels.shape[0]} labels")
    mean, std = features.mean(0), features.std(0) + 1e-6
    fit_full_batch(probe, (features - mean) / std, labels, steps, lr, weight_decay)
    return nn.Sequential(Standardise(mean, std), probe)


def fit_full_batch(
    model: nn.Module,
    inputs,
    labels: torch.Tensor,
    steps: int,
    lr: float = 0.01,
    weight_decay: float = 0.0,
    parameters=None,
) -> nn.Module:
    """``steps`` full-batch Adam steps on the cross-entropy of ``model(inputs)`` (N, C) against the (N,)
    ``labels``; ``inputs`` is whatever ``model`` reads (a feature matrix, or spans with their word vectors).
    ``parameters`` (default: all of ``model``'s) may be Adam's parameter groups, to give some their own rate.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    optimizer = torch.optim.Adam(
        model.parameters() if parameters is None else parameters, lr=lr, weight_decay=weight_decay
    )
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    return model


class Standardise(nn.Module):
    """``(h - mean) / std`` with the training features' statistics, kept with the probe they trained."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def probe_accuracy(probe: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose argmax class is the label.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    with torch.no_grad():
        return (probe(features).argmax(-1) == labels).float().mean().item()


def control_labels(words: Sequence[Hashable], labels: Sequence[int], generator: torch.Generator) -> list[int]:
    """Hewitt and Liang's control task: each distinct word gets one label, drawn from the empirical
    distribution of ``labels``, and keeps it wherever it occurs. ``words`` and ``labels`` are aligned lists
    (the training and test words together, so a word has the same control label in both).

    >>> c = control_labels(["a", "dog", "a", "cat"], [0, 1, 0, 1], torch.Generator().manual_seed(0))
    >>> c[0] == c[2]
    True

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if len(words) != len(labels):
        raise ValueError(f"expected a label per word, got {len(words)} words and {len(labels)} labels")
    counts = torch.bincount(torch.as_tensor(labels)).double()
    types = list(dict.fromkeys(words))
    drawn = torch.multinomial(counts, len(types), replacement=True, generator=generator).tolist()
    label_of = dict(zip(types, drawn))
    return [label_of[w] for w in words]


@dataclass
class ProbeScore:
    """A probe's test accuracy on the task and on its control task; selectivity is their difference.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """

    accuracy: float
    control: float

    @property
    def selectivity(self) -> float:
        return self.accuracy - self.control


def probe_layers(
    train: Sequence[torch.Tensor],
    test: Sequence[torch.Tensor],
    labels: tuple[torch.Tensor, torch.Tensor],
    control: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    generator: torch.Generator,
    rank: int | None = None,
    steps: int = 150,
    description: str = "layers",
    width: int | None = None,
) -> list[ProbeScore]:
    """One probe per layer for the task and one for its control: ``train`` and ``test`` hold a (N, H) matrix
    per layer; ``labels`` and ``control`` are (train, test) label vectors. The probes are linear (of rank
    ``rank``), or with ``width`` MLPs of that hidden width.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    scores = []
    for x_train, x_test in zip(progress_bar(train, desc=description), test):
        accuracies = []
        for y_train, y_test in (labels, control):
            if width is None:
                probe = linear_probe(x_train.shape[-1], num_classes, rank, generator)
            else:
                probe = mlp_probe(x_train.shape[-1], num_classes, width, generator)
            probe = fit_probe(probe, x_train, y_train, steps)
            accuracies.append(probe_accuracy(probe, x_test, y_test))
        scores.append(ProbeScore(*accuracies))
    return scores
