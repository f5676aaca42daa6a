"""Edge probing (Tenney et al. 2019, "What do you learn from context?" and "BERT rediscovers the classical NLP
pipeline"): a probe that reads a label from one or two *spans* of a sentence, from a learned mix of layers.

A span is a half-open range of word positions ``[i, j)``. The probe projects each word vector, ``p_t = P h_t``,
and pools a span by self-attention over its own words (Lee et al. 2017),

    alpha_t = exp(w . p_t) / sum_{u in [i, j)} exp(w . p_u),        r = sum_{t in [i, j)} alpha_t p_t,

so a one-word span is just its projected word. A two-span task (a head and its dependent, two entities) pools
each span with its own ``w`` and concatenates ``[r_1; r_2]``; a small MLP reads the label. Tenney et al.'s
outputs are independent sigmoids (a span may carry several labels); every span of our tasks has exactly one
label, so ours is a softmax trained on the cross-entropy, and its score is accuracy (= micro-F1 here).

The word vectors ``h_t`` are a *scalar mix* of the layers, ``h = gamma sum_l softmax(a)_l h^(l)``, learned with
the probe. Two summaries say where a task's information sits: the mix's *centre of gravity*
``E_s[l] = sum_l l s_l``, and the *expected layer* of cumulative scoring. Train a probe ``P^(l)`` on the mix of
layers ``0..l`` for every ``l``; the gain of adding layer ``l`` is ``Delta^(l) = Score(P^(l)) - Score(P^(l-1))``
and ``E_Delta[l] = sum_l l Delta^(l) / sum_l Delta^(l)``: the layer at which, on average, the task's score was
gained.

Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import nn

from lecture_lib.analysis.probes import initialised


class SpanBatch(NamedTuple):
    """Spans with the word vectors they index: ``words`` (L + 1, W, H), every word of every sentence at every
    layer (a span never crosses a sentence, so its words are contiguous); ``spans`` (N, S, 2), S spans
    ``[start, end)`` per example.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """

    words: torch.Tensor
    spans: torch.Tensor


def span_windows(spans: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The positions of each span's words, padded to the longest span's width K, and which of them are real.

    ``spans`` (..., 2) holds ``[start, end)`` pairs into a sequence of ``length`` positions; returns positions
    (..., K) (padding repeats a valid position) and the mask (..., K).

    >>> positions, mask = span_windows(torch.tensor([[2, 3], [0, 3]]), length=4)
    >>> positions.tolist(), mask.tolist()
    ([[2, 3, 3], [0, 1, 2]], [[True, False, False], [True, True, True]])
    >>> span_windows(torch.tensor([[3, 2]]), length=4)
    Traceback (most recent call last):
    ...
    ValueError: expected spans with end > start, got [3, 2]

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    if spans.shape[-1] != 2 or spans.numel() == 0:
        raise ValueError(
            f"expected spans as a non-empty (..., 2) tensor of [start, end), got shape {tuple(spans.shape)}"
        )
    start, end = spans[..., 0], spans[..., 1]
    for bad, problem in ((end <= start, "end > start"), ((start < 0) | (end > length), f"0 <= start, end <= {length}")):
        if bad.any():
            raise ValueError(f"expected spans with {problem}, got {spans[tuple(bad.nonzero()[0].tolist())].tolist()}")
    offsets = torch.arange(int((end - start).max()))
    positions = start[..., None] + offsets
    return positions.clamp(max=length - 1), offsets < (end - start)[..., None]


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension among the positions where ``mask`` is True; the others get exactly 0.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    return logits.masked_fill(~mask, float("-inf")).softmax(-1)


def pool_spans(projected: torch.Tensor, scorer: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """Self-attentive pooling: projected word vectors (W, D), the attention vector ``w`` (D,) and spans (N, 2)
    -> (N, D), ``r = sum_{t in [i, j)} softmax_t(w . p_t) p_t``.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    positions, mask = span_windows(spans, projected.shape[0])
    vectors = projected[positions]  # (N, K, D)
    alpha = masked_softmax(vectors @ scorer, mask)
    return (alpha[..., None] * vectors).sum(-2)


def scalar_mix(layers: torch.Tensor, logits: torch.Tensor, gamma: torch.Tensor | float = 1.0) -> torch.Tensor:
    """``gamma sum_l softmax(a)_l h^(l)``: ``layers`` (L, ...) with the layer axis first, ``logits`` the L
    mixing logits ``a``.

    >>> scalar_mix(torch.tensor([[1., 2.], [3., 6.]]), torch.zeros(2), gamma=2.0)  # 2 * (h0 + h1) / 2
    tensor([4., 8.])

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    if logits.shape != layers.shape[:1]:
        raise ValueError(f"expected one logit per layer ({layers.shape[0]}), got shape {tuple(logits.shape)}")
    return gamma * torch.tensordot(logits.softmax(-1), layers, dims=1)  # one matrix-vector product


def centre_of_gravity(weights: torch.Tensor, layers: Sequence[int] | None = None) -> float:
    """``E_s[l] = sum_l l s_l`` for mixing weights ``s`` over ``layers`` (default 0, 1, ..., L).

    >>> centre_of_gravity(torch.tensor([0.5, 0.0, 0.5]))
    1.0

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    index = torch.arange(len(weights)) if layers is None else torch.tensor(list(layers))
    return float((index * weights).sum())


def cumulative_deltas(scores: Sequence[float]) -> list[float]:
    """``Delta^(l) = Score(P^(l)) - Score(P^(l-1))`` for l = 1..L, from the scores of ``P^(0)..P^(L)``.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    return [after - before for before, after in zip(scores, scores[1:])]


def expected_layer(scores: Sequence[float]) -> float:
    """``E_Delta[l] = sum_l l Delta^(l) / sum_l Delta^(l)`` from the cumulative scores of ``P^(0)..P^(L)``.

    A layer that loses score counts against the layers that gain it; if the last mix scores no better than
    layer 0 alone, nothing was gained and the expected layer is undefined.

    >>> expected_layer([0.5, 0.75, 0.75, 1.0])  # a quarter gained at layer 1, another at layer 3
    2.0
    >>> expected_layer([0.5, 0.75, 0.5, 1.0])  # (1 * 0.25 - 2 * 0.25 + 3 * 0.5) / 0.5: layer 2's loss counts
    2.5

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    deltas = cumulative_deltas(scores)
    total = sum(deltas)
    if total <= 0:
        raise ValueError(f"expected the mix of all layers to score above layer 0, got {list(scores)}")
    return sum(layer * delta for layer, delta in enumerate(deltas, start=1)) / total


class EdgeProbe(nn.Module):
    """Scalar mix of the ``layers`` (a range: ``range(l + 1)`` is the cumulative probe ``P^(l)``,
    ``range(l, l + 1)`` layer ``l`` alone) -> projection to ``projection`` dimensions -> one self-attentive
    pooling per span -> MLP (one hidden layer of ``hidden`` tanh units) -> one logit per class. Reads a
    :class:`SpanBatch`.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """

    def __init__(
        self,
        layers: range,
        hidden_size: int,
        spans: int,
        num_classes: int,
        projection: int = 32,
        hidden: int = 64,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(layers, range) or layers.step != 1 or not layers:
            raise ValueError(f"expected the mixed layers as a non-empty range with step 1, got {layers!r}")
        self.layers = layers
        self.mix_logits = nn.Parameter(torch.zeros(len(layers)))
        self.gamma = nn.Parameter(torch.ones(()))
        self.projection = nn.Linear(hidden_size, projection)
        self.mlp = nn.Sequential(nn.Linear(spans * projection, hidden), nn.Tanh(), nn.Linear(hidden, num_classes))
        initialised(self, generator)
        self.scorers = nn.Parameter(torch.zeros(spans, projection))  # start from a uniform average of the span

    def parameter_groups(self, mix_lr: float) -> list[dict]:
        """Adam's parameter groups: the scalar mix's logits with their own learning rate ``mix_lr`` (a short
        full-batch fit moves each logit by about lr per step, so the mix needs a larger rate to leave the
        uniform start), the rest at the optimiser's rate."""
        rest = [p for name, p in self.named_parameters() if name != "mix_logits"]
        return [dict(params=[self.mix_logits], lr=mix_lr), dict(params=rest)]

    def mix_weights(self) -> torch.Tensor:
        """The mixing weights ``s = softmax(a)`` over :attr:`layers`."""
        return self.mix_logits.detach().softmax(-1)

    def forward(self, batch: SpanBatch) -> torch.Tensor:
        if batch.spans.shape[1] != len(self.scorers):
            raise ValueError(f"expected {len(self.scorers)} spans per example, got {batch.spans.shape[1]}")
        mixed = scalar_mix(batch.words[self.layers.start : self.layers.stop], self.mix_logits, self.gamma)
        projected = self.projection(mixed)
        pooled = [pool_spans(projected, scorer, batch.spans[:, k]) for k, scorer in enumerate(self.scorers)]
        return self.mlp(torch.cat(pooled, -1))
