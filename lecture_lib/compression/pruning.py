"""Pruning: removing weights (unstructured) or whole pieces of the network (structured).

**Magnitude pruning** (Han et al. 2015; Gordon et al. 2020 for BERT) zeroes the fraction p of the linear
layers' weights with the smallest |w|, ranked over all layers at once (global). The zeros stay zeros while
training goes on because the layer computes with W ⊙ M, M the fixed 0/1 mask, whatever the optimizer does to
W. The matrices keep their shape: a dense kernel multiplies the zeros as fast as any other number.

**Structured pruning** removes rows and columns, so the matrices shrink and dense kernels run faster:

- attention heads, least important first (Michel et al. 2019's importance,
  :func:`lecture_lib.analysis.head_importance.head_importance`), through BERT's ``prune_heads``;
- feed-forward neurons: neuron i owns row i of W_1 (and b_1[i]) and column i of W_2; its size is
  ‖W_1[i]‖ · ‖W_2[:, i]‖, the scale of what it can add to the output;
- whole layers (Fan et al. 2019's LayerDrop pruning keeps every other layer).

Taught in: 12_compression ("Pruning").
"""

from __future__ import annotations

import copy
import dataclasses
import math

import torch
from torch import nn
from torch.nn.utils import parametrize

from lecture_lib.analysis.head_importance import pruning_order
from lecture_lib.compression.quantization import encoder_linears
from lecture_lib.models.bert import keep_features


def _check_fraction(fraction: float, what: str) -> None:
    if not 0 <= fraction < 1:
        raise ValueError(f"expected a fraction of {what} in [0, 1), got {fraction}")


class WeightMask(nn.Module):
    """The parametrization W ↦ W ⊙ M: the layer always computes with its pruned weights zero.

    Taught in: 12_compression ("Pruning").
    """

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight * self.mask


def magnitude_masks(weights: list[torch.Tensor], sparsity: float) -> list[torch.Tensor]:
    """0/1 masks zeroing the ``round(sparsity · N)`` smallest |w| among all N entries of ``weights`` (ties:
    the earlier entry first).

    >>> magnitude_masks([torch.tensor([[0.1, -3.0]]), torch.tensor([[2.0, -0.2]])], 0.5)
    [tensor([[0., 1.]]), tensor([[1., 0.]])]

    Taught in: 12_compression ("Pruning").
    """
    _check_fraction(sparsity, "weights to prune")
    scores = torch.cat([w.detach().abs().flatten() for w in weights])
    keep = torch.ones_like(scores)
    keep[scores.argsort(stable=True)[: round(sparsity * scores.numel())]] = 0
    return [m.view_as(w).to(w.dtype) for m, w in zip(keep.split([w.numel() for w in weights]), weights)]


def magnitude_prune_(model: nn.Module, sparsity: float) -> list[nn.Linear]:
    """Global magnitude pruning, in place, of every linear layer of
    :func:`~lecture_lib.compression.quantization.encoder_linears`: each gets a :class:`WeightMask`.

    Returns the pruned layers; :func:`sparsity_of` reads their sparsity back, :func:`make_permanent_` removes
    the parametrizations (the zeros written into the weights).

    Taught in: 12_compression ("Pruning").
    """
    layers = [layer for _, _, layer in encoder_linears(model)]
    for layer in layers:
        if parametrize.is_parametrized(layer, "weight"):
            raise ValueError("the model is already pruned: call make_permanent_ first, or prune a fresh copy")
    for layer, mask in zip(layers, magnitude_masks([layer.weight for layer in layers], sparsity)):
        parametrize.register_parametrization(layer, "weight", WeightMask(mask))
    return layers


def sparsity_of(layers: list[nn.Linear]) -> float:
    """The fraction of zero weights over ``layers``.

    Taught in: 12_compression ("Pruning").
    """
    zeros = sum(int((layer.weight == 0).sum()) for layer in layers)
    return zeros / sum(layer.weight.numel() for layer in layers)


def make_permanent_(layers: list[nn.Linear]) -> None:
    """Write W ⊙ M into each weight and drop the masks (the model is a plain model again).

    Taught in: 12_compression ("Pruning").
    """
    for layer in layers:
        parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)


# ---------------------------------------------------------------- structured


def csr_bytes(weight: torch.Tensor, value_bytes: int = 4) -> int:
    """Bytes to store a matrix in compressed sparse rows (CSR): each non-zero's value (``value_bytes``) and
    column index, plus one offset per row and one more; indices and offsets in the smallest unsigned integer
    type that holds them (1, 2 or 4 bytes). What a magnitude-pruned matrix costs once its zeros are dropped.

    >>> csr_bytes(torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]]))  # 2 values, 2 column indices, 3 offsets
    13

    Taught in: 12_compression ("The compression table").
    """
    if weight.dim() != 2:
        raise ValueError(f"expected a matrix, got shape {tuple(weight.shape)}")

    def width(largest: int) -> int:
        return 1 if largest < 2**8 else 2 if largest < 2**16 else 4

    nonzero = int((weight != 0).sum())
    rows, columns = weight.shape
    return nonzero * (value_bytes + width(columns - 1)) + (rows + 1) * width(nonzero)


def heads_to_prune(importance: torch.Tensor, fraction: float) -> dict[int, list[int]]:
    """``{layer: heads}`` for the least important ``⌈fraction · heads⌉`` heads, skipping any head that would leave
    its layer empty (the next least important one is taken instead). Rounding up, a share is never undercut: 40%
    of 16 heads is 7 (44%), as chapter 10 counts Michel et al.'s 40%, not 6 (38%).

    >>> heads_to_prune(torch.tensor([[0.5, 0.1], [0.05, 0.2]]), 0.5)
    {1: [0], 0: [1]}
    >>> sum(map(len, heads_to_prune(torch.rand(4, 4, generator=torch.Generator().manual_seed(0)), 0.4).values()))
    7

    Taught in: 12_compression ("Pruning").
    """
    _check_fraction(fraction, "heads")
    layers, heads = importance.shape
    chosen: dict[int, list[int]] = {}
    wanted = math.ceil(round(fraction * layers * heads, 9))  # 0.3 · 10 is 3.0000000000000004 in floats
    for flat in pruning_order(importance).tolist():
        if sum(map(len, chosen.values())) == wanted:
            break
        layer, head = divmod(flat, heads)
        if len(chosen.get(layer, [])) < heads - 1:
            chosen.setdefault(layer, []).append(head)
    return chosen


def neuron_scores(layer: nn.Module) -> torch.Tensor:
    """‖W_1[i]‖ · ‖W_2[:, i]‖ for every feed-forward neuron i of a BERT layer.

    Taught in: 12_compression ("Pruning").
    """
    return layer.intermediate.dense.weight.detach().norm(dim=1) * layer.output.dense.weight.detach().norm(dim=0)


def prune_ffn_neurons_(model: nn.Module, fraction: float) -> None:
    """Remove, in place, the ``round(fraction · intermediate_size)`` smallest neurons (:func:`neuron_scores`) of
    every layer: W_1 loses rows and W_2 columns. The model computes what it computed with those neurons'
    outputs set to zero. (The config still says ``intermediate_size``: such a model is for measuring, not saving.)

    Taught in: 12_compression ("Pruning").
    """
    _check_fraction(fraction, "neurons")
    for layer in model.base_model.encoder.layer:
        scores = neuron_scores(layer)
        kept = scores.argsort(descending=True, stable=True)[: scores.numel() - round(fraction * scores.numel())]
        kept = kept.sort().values
        layer.intermediate.dense = keep_features(layer.intermediate.dense, kept, dim=0)
        layer.output.dense = keep_features(layer.output.dense, kept, dim=1)


def keep_layers(model: nn.Module, layers: list[int]) -> nn.Module:
    """A copy of a BERT-family model with only the encoder layers listed (in their order), its config's
    ``num_hidden_layers`` (or ``n_layers``) set to match.

    Taught in: 12_compression ("Pruning").
    """
    total = len(model.base_model.encoder.layer)
    if not layers or any(not 0 <= i < total for i in layers):
        raise ValueError(f"expected a non-empty list of layers in [0, {total}), got {layers}")
    pruned = copy.deepcopy(model)
    encoder = pruned.base_model.encoder
    encoder.layer = nn.ModuleList(encoder.layer[i] for i in layers)
    field = "n_layers" if hasattr(model.config, "n_layers") else "num_hidden_layers"
    config = dataclasses.replace(model.config, **{field: len(layers)})
    config.pruned_heads = {
        j: model.config.pruned_heads[i] for j, i in enumerate(layers) if i in model.config.pruned_heads
    }
    pruned.config = pruned.base_model.config = config
    return pruned
