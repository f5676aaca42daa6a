"""Are sixteen heads better than one? (Michel et al. 2019): head importance from gates, ablations, pruning.

Every head's output is multiplied by a gate ξ_h (``head_mask`` of :class:`~lecture_lib.models.bert.BertModel`);
at ξ = 1 the model is unchanged, at ξ_h = 0 head h is gone. The importance of a head is how much the loss
would move if its gate moved::

    I_h = E_x | ∂L(x) / ∂ξ_h |    at ξ = 1
        = E_x | Σ_t Att_h(x)_t · ∂L(x) / ∂Att_h(x)_t |      (the chain rule through out = ξ_h · Att_h)

the expectation over batches as in the authors' code (the absolute value of each batch's gradient), then
normalised to unit L2 norm within each layer (their ``normalize_pruning_by_layer``). The experiments take an
``evaluate(head_mask) -> score`` function, so they run on any model, task and metric.

Taught in: 10_bertology_attention ("Which heads matter").
"""

from __future__ import annotations

from itertools import product
from typing import Callable, Iterable, Sequence

import torch
from torch import nn

Evaluate = Callable[[torch.Tensor], float]
GatedLoss = Callable[[nn.Module, dict[str, torch.Tensor], torch.Tensor], torch.Tensor]


def all_heads(model: nn.Module) -> torch.Tensor:
    """A head mask that keeps every head: ones (layers, heads) in the model's dtype and device."""
    config = model.config
    first = next(model.parameters())
    return torch.ones(config.num_hidden_layers, config.num_attention_heads, dtype=first.dtype, device=first.device)


def head_importance(
    model: nn.Module,
    batches: Iterable[dict[str, torch.Tensor]],
    loss: GatedLoss,
    *,
    normalize: bool = True,
    at: torch.Tensor | None = None,
) -> torch.Tensor:
    """Michel et al.'s I_h, (layers, heads): the mean over ``batches`` of |∂L/∂ξ_h| at ξ = 1 (or at the gates
    ``at``, a head mask of pruned heads), in eval mode.

    ``loss(model, batch, head_mask)`` is the scalar the importance is measured on (a task's loss, MLM).
    Only the gates' gradient is taken: the model's parameters are left without gradients.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    was_training = model.training
    model.eval()
    gates = (all_heads(model) if at is None else at.to(all_heads(model))).clone().requires_grad_()
    total, count = torch.zeros_like(gates), 0
    for batch in batches:
        (gradient,) = torch.autograd.grad(loss(model, batch, gates), gates)
        total += gradient.abs()
        count += 1
    model.train(was_training)
    if not count:
        raise ValueError("expected at least one batch")
    importance = total / count
    if normalize:
        importance = importance / importance.norm(dim=-1, keepdim=True).clamp(min=1e-20)
    return importance


def without_each_head(evaluate: Evaluate, mask: torch.Tensor) -> torch.Tensor:
    """The score with each head removed alone (Michel et al.'s Table 1), (layers, heads).

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    scores = torch.empty(mask.shape, dtype=torch.float64)
    for layer, head in product(*map(range, mask.shape)):
        ablated = mask.clone()
        ablated[layer, head] = 0
        scores[layer, head] = evaluate(ablated)
    return scores


def one_head_per_layer(evaluate: Evaluate, mask: torch.Tensor) -> torch.Tensor:
    """The score with one layer reduced to a single head h, the other layers whole (Michel et al.'s Table 2):
    (layers, heads), entry (l, h) keeping only head h in layer l.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    scores = torch.empty(mask.shape, dtype=torch.float64)
    for layer, head in product(*map(range, mask.shape)):
        reduced = mask.clone()
        reduced[layer] = 0
        reduced[layer, head] = 1
        scores[layer, head] = evaluate(reduced)
    return scores


def pruning_order(importance: torch.Tensor) -> torch.Tensor:
    """The heads, least important first, as flat indices layer · heads + head (ties: the earlier head first).

    >>> pruning_order(torch.tensor([[0.5, 0.1], [0.9, 0.2]]))
    tensor([1, 3, 0, 2])

    Taught in: 10_bertology_attention ("Pruning by importance").
    """
    return importance.flatten().argsort(stable=True)


def pruning_curve(evaluate: Evaluate, order: torch.Tensor, counts: Sequence[int], mask: torch.Tensor) -> list[float]:
    """The score with the first ``n`` heads of ``order`` masked, for each ``n`` in ``counts``.

    Taught in: 10_bertology_attention ("Pruning by importance").
    """
    scores = []
    for n in counts:
        pruned = mask.clone().flatten()
        pruned[order[:n]] = 0
        scores.append(evaluate(pruned.view(mask.shape)))
    return scores
