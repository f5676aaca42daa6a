"""The gradient noise scale of McCandlish et al. (2018): how large a batch must be before its gradient is
mostly signal.

A batch of B examples estimates the full-batch gradient G with covariance Σ / B, Σ the covariance of the
per-example gradients. The *simple noise scale*

    B_simple = tr(Σ) / |G|²

is the batch at which the batch gradient's noise, tr(Σ) / B, is as large as the signal |G|². McCandlish et al.
find that it predicts the critical batch size: below it, doubling the batch halves the steps for about the same
number of examples; above it, a bigger batch needs more examples to reach the same loss.

From N per-example gradients g_i (exact: one backward pass per example), both terms are estimated without
bias: tr Σ̂ = Σᵢ |g_i − ḡ|² / (N − 1), and |G|² ≈ |ḡ|² − tr Σ̂ / N, since E|ḡ|² = |G|² + tr Σ / N.

Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from lecture_lib.runtime import module_device, to_device

Loss = Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]


@dataclass(frozen=True)
class NoiseScale:
    """The two unbiased estimates, from ``examples`` per-example gradients, and their ratio B_simple."""

    trace: float  # tr Σ: the summed variance of one example's gradient
    squared_norm: float  # |G|²: the squared norm of the full-batch gradient
    examples: int

    @property
    def simple(self) -> float:
        """B_simple = tr(Σ) / |G|²; infinite when |G|² is not resolved (its estimate ≤ 0) by this many examples."""
        return self.trace / self.squared_norm if self.squared_norm > 0 else math.inf


def single_examples(batch: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """A batch (every tensor (B, ...)) as B batches of one example each.

    >>> [b["x"].tolist() for b in single_examples({"x": torch.tensor([[1, 2], [3, 4]])})]
    [[[1, 2]], [[3, 4]]]
    """
    size = len(next(iter(batch.values())))
    return [{name: value[i : i + 1] for name, value in batch.items()} for i in range(size)]


def noise_scale(model: nn.Module, loss: Loss, examples: Sequence[dict[str, torch.Tensor]]) -> NoiseScale:
    """tr Σ and |G|² of ``loss(model, example)`` over the parameters that require a gradient, from one gradient
    per example (``torch.autograd.grad``: the parameters' ``.grad`` are left as they were), summed in float64.
    Each example goes to the model's device first (a model that training left on the GPU).

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    n = len(examples)
    if n < 2:
        raise ValueError(f"expected at least 2 examples to estimate a covariance, got {n}")
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]  # Σᵢ g_i
    squares = 0.0  # Σᵢ |g_i|²
    device = module_device(model)
    for example in examples:
        grads = torch.autograd.grad(loss(model, to_device(example, device)), params, allow_unused=True)
        for t, g in zip(total, grads):
            if g is not None:
                t += g.double()
                squares += float(g.double().pow(2).sum())
    mean_squared = sum(float(t.pow(2).sum()) for t in total) / n**2  # |ḡ|²
    trace = (squares - n * mean_squared) / (n - 1)
    return NoiseScale(trace, mean_squared - trace / n, n)
