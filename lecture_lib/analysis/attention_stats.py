"""Where attention goes (Clark et al. 2019, "What Does BERT Look At?"): per layer and head, the mass on
chosen tokens ([CLS], [SEP], punctuation), on the previous and the next token, and the entropy of the rows.

Every statistic is an average over *query* tokens: for each real query i of each sentence, a number read
from its row a_i· (which sums to 1 over the keys), then the mean over the queries selected (the real
tokens by default). Padding is no query, and no key receives attention, so padding a sentence changes none
of them. Shapes: ``attentions`` (B, layers, heads, T, T) as :func:`attention_maps` returns them; token
masks (B, T), True on the tokens meant; every statistic (layers, heads).

Taught in: 10_bertology_attention ("Where attention goes").
"""

from __future__ import annotations

import torch
from torch import nn


def attention_maps(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Every head's attention weights, (B, layers, heads, T, T), of a BERT (bare or with a head), in eval mode.

    Taught in: 10_bertology_attention ("Where attention goes").
    """
    encoder = getattr(model, "base_model", model)
    was_training = encoder.training
    encoder.eval()
    with torch.no_grad():
        out = encoder(input_ids, attention_mask, token_type_ids, output_attentions=True)
    encoder.train(was_training)
    return torch.stack(out.attentions, dim=1)


def _queries(attentions: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    batch, _, _, length, _ = attentions.shape
    if queries.shape != (batch, length):
        raise ValueError(f"expected a query mask of shape {(batch, length)}, got {tuple(queries.shape)}")
    return queries.bool()


def query_mean(values: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Mean over the selected queries of per-query values (B, layers, heads, T) -> (layers, heads).

    >>> values = torch.tensor([1., 3., 100.]).view(1, 1, 1, 3)
    >>> query_mean(values, torch.tensor([[True, True, False]]))
    tensor([[2.]])
    """
    weights = queries[:, None, None, :].to(values.dtype)  # (B, 1, 1, T)
    total = weights.sum(dim=(0, 3))
    if (total == 0).any():
        raise ValueError("expected at least one query selected")
    return (values * weights).sum(dim=(0, 3)) / total


def key_mass(attentions: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Σ_{j in keys} a_ij averaged over the queries i: how much attention the chosen tokens receive.

    Taught in: 10_bertology_attention ("Where attention goes").
    """
    queries = _queries(attentions, queries)
    mass = (attentions * keys[:, None, None, None, :].to(attentions.dtype)).sum(-1)  # (B, L, H, T)
    return query_mean(mass, queries)


def offset_weights(attentions: torch.Tensor, offset: int) -> torch.Tensor:
    """a_{i, i + offset} for every query i, 0 where i + offset falls outside the sequence: (B, L, H, T).

    >>> a = torch.tensor([[.5, .5, 0.], [.2, .3, .5], [0., .9, .1]]).view(1, 1, 1, 3, 3)
    >>> offset_weights(a, -1)[0, 0, 0]  # attention to the previous token: none for the first
    tensor([0.0000, 0.2000, 0.9000])
    """
    diagonal = attentions.diagonal(offset=offset, dim1=-2, dim2=-1)  # (B, L, H, T - |offset|)
    padding = (max(-offset, 0), max(offset, 0))  # queries without a key at that offset
    return nn.functional.pad(diagonal, padding)


def offset_mass(attentions: torch.Tensor, offset: int, queries: torch.Tensor) -> torch.Tensor:
    """a_{i, i + offset} averaged over the queries: -1 the previous token, +1 the next.

    Taught in: 10_bertology_attention ("Where attention goes").
    """
    return query_mean(offset_weights(attentions, offset), _queries(attentions, queries))


def row_entropy(attentions: torch.Tensor) -> torch.Tensor:
    """-Σ_j a_ij log a_ij for every row, in nats (0 log 0 = 0): (B, L, H, T)."""
    logs = torch.where(attentions > 0, attentions.log(), torch.zeros_like(attentions))
    return -(attentions * logs).sum(-1)


def attention_entropy(attentions: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """The entropy of each query's attention, averaged: log n for a head spread evenly over n tokens, 0 for
    one that looks at a single token (Clark et al.'s broad and focused heads).

    >>> uniform = torch.full((1, 1, 1, 4, 4), 0.25)
    >>> attention_entropy(uniform, torch.ones(1, 4, dtype=torch.bool))  # log 4
    tensor([[1.3863]])

    Taught in: 10_bertology_attention ("Where attention goes").
    """
    return query_mean(row_entropy(attentions), _queries(attentions, queries))


def mass_profile(
    attentions: torch.Tensor, targets: dict[str, torch.Tensor], queries: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Clark et al.'s Figure 2 as data: the mass on each named set of tokens (``targets``, e.g. [CLS], [SEP],
    "." and ","), on the previous and the next token, and the entropy, each (layers, heads).

    Taught in: 10_bertology_attention ("Where attention goes").
    """
    profile = {name: key_mass(attentions, keys, queries) for name, keys in targets.items()}
    profile["previous"] = offset_mass(attentions, -1, queries)
    profile["next"] = offset_mass(attentions, 1, queries)
    profile["entropy"] = attention_entropy(attentions, queries)
    return profile
