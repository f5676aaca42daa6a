"""Clark et al.'s (2019) "no-op" test: does the attention a head parks on a special token change the loss?

For each attention weight α_ij (query i, key j) the gradient ∂L/∂α_ij says how much the loss would move if
that weight moved (Clark et al., section 3.2, with BERT's masked-LM loss). Per head, we compare two shares
of a query row, both averaged over the real query tokens::

    mass_h     = mean_i  Σ_{j ∈ S} α_ij                               (the attention that goes to S)
    gradient_h = mean_i  Σ_{j ∈ S} |∂L/∂α_ij| / Σ_j |∂L/∂α_ij|        (the share of the row's gradient on S)

with S the special token's positions. Were attention to S like attention anywhere else, the two shares
would match; a gradient share far below the mass share says the weight parked on S barely matters: a no-op.

Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

# forward(batch) -> (scalar loss, each layer's attention weights (B, heads, T, T), in the loss's graph)
AttentionForward = Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, Sequence[torch.Tensor]]]


@dataclass(frozen=True)
class NoOpProfile:
    """Per (layer, head): the share of attention that goes to the target tokens and the share of the
    attention gradient's magnitude that falls on them, both means over real query tokens.

    Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
    """

    mass: torch.Tensor
    gradient: torch.Tensor


def row_shares(
    weights: torch.Tensor, gradient: torch.Tensor, target: torch.Tensor, query: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sums over the queries of one layer, each (heads,): (Σ_i mass on S, Σ_i gradient share on S, number of
    rows counted). ``weights``, ``gradient``: (B, heads, T, T); ``target`` (B, T) True on S's keys;
    ``query`` (B, T) True on the rows to count; rows whose gradient is all zero are left out of both sums.

    >>> w = torch.tensor([[[[0.8, 0.2], [0.5, 0.5]]]]); g = torch.tensor([[[[0.1, 0.3], [0.0, 0.0]]]])
    >>> row_shares(w, g, torch.tensor([[True, False]]), torch.tensor([[True, True]]))
    (tensor([0.8000]), tensor([0.2500]), tensor([1]))

    Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
    """
    magnitude = gradient.abs()
    row_total = magnitude.sum(-1)  # (B, heads, T)
    counted = query[:, None, :] & (row_total > 0)  # (B, heads, T)
    on_target = target[:, None, None, :].to(weights.dtype)
    mass = (weights * on_target).sum(-1)
    share = (magnitude * on_target).sum(-1) / row_total.clamp(min=torch.finfo(row_total.dtype).tiny)
    return (mass * counted).sum((0, 2)), (share * counted).sum((0, 2)), counted.sum((0, 2))


def no_op_profile(
    forward: AttentionForward,
    batches: Iterable[dict[str, torch.Tensor]],
    targets: dict[str, Callable[[dict[str, torch.Tensor]], torch.Tensor]],
    query: Callable[[dict[str, torch.Tensor]], torch.Tensor],
) -> dict[str, NoOpProfile]:
    """A :class:`NoOpProfile` per target over ``batches``, from one backward pass per batch:
    ``forward(batch)`` gives the loss and the attention weights, ``targets[name](batch)`` the keys S (B, T)
    and ``query(batch)`` the rows counted (B, T), e.g. the real tokens.

    Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
    """
    totals: dict[str, torch.Tensor] = {}
    for batch in batches:
        loss, weights = forward(batch)
        gradients = torch.autograd.grad(loss, list(weights))
        rows = query(batch).to(weights[0].device)
        for name, target in targets.items():
            keys = target(batch).to(weights[0].device)
            sums = torch.stack(
                [torch.stack(row_shares(w.detach(), g, keys, rows)).double().cpu() for w, g in zip(weights, gradients)]
            )  # (layers, 3, heads)
            totals[name] = totals[name] + sums if name in totals else sums
    if not totals or not all(bool((t[:, 2] > 0).all()) for t in totals.values()):
        raise ValueError("expected every head to receive a gradient on at least one query row")
    return {name: NoOpProfile(t[:, 0] / t[:, 2], t[:, 1] / t[:, 2]) for name, t in totals.items()}
