import math

import pytest
import torch
from torch import nn

from lecture_lib.analysis.gradient_noise import NoiseScale, noise_scale, single_examples


def squared_error(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return 0.5 * (model(batch["x"]).squeeze(-1) - batch["y"]).pow(2).mean()


def regression(n: int, dim: int, noise: float, seed: int) -> tuple[nn.Linear, dict[str, torch.Tensor], torch.Tensor]:
    """Linear regression y = w*·x + ε, x ~ N(0, I), and a model at w = w* + d (no bias): the model, the data, d."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    true = torch.randn(dim, generator=g, dtype=torch.float64)
    y = x @ true + noise * torch.randn(n, generator=g, dtype=torch.float64)
    model = nn.Linear(dim, 1, bias=False).double()
    d = torch.randn(dim, generator=g, dtype=torch.float64)
    with torch.no_grad():
        model.weight.copy_((true + d)[None])
    return model, {"x": x, "y": y}, d


def test_matches_closed_form_per_example_gradients():
    # per-example gradient of ½(w·x − y)² is (w·x − y) x: the estimator written with matrices, independently
    model, data, _ = regression(50, 3, 0.5, seed=0)
    ours = noise_scale(model, squared_error, single_examples(data))
    w = model.weight.detach()[0]
    grads = (data["x"] @ w - data["y"])[:, None] * data["x"]  # (N, D)
    trace = grads.var(dim=0, unbiased=True).sum()
    squared_norm = grads.mean(0).pow(2).sum() - trace / 50
    assert ours.examples == 50
    assert ours.trace == pytest.approx(float(trace), rel=1e-10)
    assert ours.squared_norm == pytest.approx(float(squared_norm), rel=1e-10)
    assert ours.simple == pytest.approx(float(trace / squared_norm), rel=1e-10)
    assert model.weight.grad is None  # the parameters' gradients are left alone


def test_estimates_the_population_noise_scale():
    # x ~ N(0, I_D), ε ~ N(0, σ²), model off by d: G = d and tr Σ = |d|²(D + 1) + σ² D (Gaussian fourth moments)
    n, dim, sigma = 4000, 4, 0.5
    model, data, d = regression(n, dim, sigma, seed=1)
    ours = noise_scale(model, squared_error, single_examples(data))
    trace = float(d.pow(2).sum() * (dim + 1) + sigma**2 * dim)
    # the sample trace of 4,000 heavy-tailed gradients is within a few percent; |G|² with B_simple ≈ 5 too
    assert ours.trace == pytest.approx(trace, rel=0.08)
    assert ours.squared_norm == pytest.approx(float(d.pow(2).sum()), rel=0.08)
    assert ours.simple == pytest.approx(trace / float(d.pow(2).sum()), rel=0.15)


def test_unresolved_gradient_gives_an_infinite_scale_and_too_few_examples_raise():
    assert NoiseScale(trace=2.0, squared_norm=-0.1, examples=10).simple == math.inf
    model, data, _ = regression(1, 2, 0.1, seed=0)
    with pytest.raises(ValueError, match="at least 2 examples"):
        noise_scale(model, squared_error, single_examples(data))


def test_examples_follow_a_model_on_an_accelerator():
    """A model that training left on the GPU, examples on the host: the same scale (the fake device fails as CUDA)."""
    from tests.fake_accelerator import FakeAccelerator

    model, data, _ = regression(20, 3, 0.5, seed=2)
    on_host = noise_scale(model, squared_error, single_examples(data))
    with FakeAccelerator() as device:
        on_device = noise_scale(model.to(device), squared_error, single_examples(data))
    assert on_device.trace == pytest.approx(on_host.trace, rel=1e-12)
    assert on_device.squared_norm == pytest.approx(on_host.squared_norm, rel=1e-12)
