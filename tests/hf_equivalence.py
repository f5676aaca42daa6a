"""The comparison every model family's tests make against ``transformers``: outputs, loss, every gradient, round trip.

Call :func:`assert_equivalent` with our model and the ``transformers`` model holding the same weights (one
made from the other by ``from_hf`` or ``to_hf``), both in float64 so that a real difference cannot hide
in float32 rounding.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import nn


def _assert_same_output(name: str, a: Any, b: Any, atol: float, rtol: float) -> None:
    if isinstance(a, tuple) or isinstance(b, tuple):  # per-layer hidden states or attentions
        assert a is not None and b is not None and len(a) == len(b), f"{name}: {a!r:.80} vs {b!r:.80}"
        for i, (x, y) in enumerate(zip(a, b)):
            torch.testing.assert_close(x, y, atol=atol, rtol=rtol, msg=f"{name}[{i}]")
    else:
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, msg=name)


def _gradients(model: nn.Module, rename: Callable[[str], str] = str) -> dict[str, torch.Tensor | None]:
    return {rename(name): p.grad for name, p in model.named_parameters()}


def assert_equivalent(
    ours: nn.Module,
    theirs: nn.Module,
    inputs: dict[str, Any],
    loss: Callable[[Any], torch.Tensor],
    *,
    outputs: Sequence[str],
    atol: float = 1e-9,
    rtol: float = 1e-9,
) -> tuple[Any, Any]:
    """Assert that ``ours`` and ``theirs`` compute the same function, loss and gradients, and that ours round-trips.

    - every field in ``outputs`` equal (tuples element by element), on ``inputs`` fed to both;
    - ``loss(output)`` equal, and after one backward pass each, the same parameters with a gradient
      (``transformers``' names, through the family's rename table) and every gradient equal;
    - ``ours.to_hf()`` has ``theirs``' state dict (same keys, equal tensors), and ``from_hf`` of it gives
      back ours, key for key and bit for bit.

    Returns both outputs for the checks a test adds.
    """
    for model in (ours, theirs):
        dtypes = {p.dtype for p in model.parameters()}
        assert dtypes == {torch.float64}, f"compare in float64, got {type(model).__name__} in {dtypes}"
    ours.zero_grad(set_to_none=True)
    theirs.zero_grad(set_to_none=True)
    a, b = ours(**inputs), theirs(**inputs)
    for name in outputs:
        _assert_same_output(name, getattr(a, name), getattr(b, name), atol, rtol)
    loss_a, loss_b = loss(a), loss(b)
    assert loss_a.dim() == 0, f"expected a scalar loss, got shape {tuple(loss_a.shape)}"
    torch.testing.assert_close(loss_a, loss_b, atol=atol, rtol=rtol, msg="loss")
    loss_a.backward()
    loss_b.backward()
    ga, gb = _gradients(ours, ours.family.to_theirs), _gradients(theirs)
    assert ga.keys() == gb.keys(), f"parameters differ: {sorted(ga.keys() ^ gb.keys())}"
    for name in ga:
        assert (ga[name] is None) == (gb[name] is None), f"{name}: a gradient in one model only"
        if ga[name] is not None:
            torch.testing.assert_close(ga[name], gb[name], atol=atol, rtol=rtol, msg=f"gradient of {name}")
    assert any(g is not None for g in ga.values()), "the loss reached no parameter"
    assert_round_trip(ours, theirs)
    return a, b


def assert_round_trip(ours: nn.Module, theirs: nn.Module | None = None) -> None:
    """``ours -> to_hf -> from_hf`` gives equal tensors under the same keys; ``to_hf`` equals ``theirs`` when given."""
    hf = ours.to_hf()
    if theirs is not None:
        expected, got = theirs.state_dict(), hf.state_dict()
        assert got.keys() == expected.keys(), f"keys differ: {sorted(got.keys() ^ expected.keys())}"
        for key, value in expected.items():
            assert torch.equal(got[key], value), f"to_hf changed {key}"
    back = type(ours).from_hf(hf)
    original, returned = ours.state_dict(), back.state_dict()
    assert list(returned) == list(original), "from_hf(to_hf(model)) has other keys"
    for key, value in original.items():
        assert returned[key].dtype == value.dtype and torch.equal(returned[key], value), f"round trip changed {key}"
