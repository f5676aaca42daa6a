"""Kinds of attention heads: Kovaleva et al.'s (2019) five map patterns, and Voita et al.'s (2019) confident,
positional and rare-token heads.

Kovaleva et al. sorted maps into five patterns by eye and a classifier trained on 400 maps they labelled.
We use a transparent rule on three shares of each map's attention, averaged over its real, non-special
queries: ``vertical``, the mass on [CLS] and [SEP]; ``diagonal``, the mass on the previous and next
words; ``block``, the mass on the other words of the query's own segment, its neighbours left out::

    vertical >= 0.5                         -> vertical
    diagonal >= 0.5                         -> diagonal
    vertical + diagonal >= 0.5, both >= 0.2 -> vertical+diagonal
    block >= 0.5 (a sentence pair)          -> block
    otherwise                               -> heterogeneous

Voita et al.: a head's *confidence* is the mean over tokens of its largest attention weight; a head is
*positional* when at least 90% of its argmaxes fall at one relative position, -1 or +1; the *rare-token*
head sends its argmax to the least frequent token of the sentence. Voita et al. leave out the end-of-sentence
token, the target of no-op attention; we leave out [CLS] and [SEP], as queries and as keys for confidence.

Taught in: 10_bertology_attention ("Five patterns", "Confident, positional and rare-token heads").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lecture_lib.analysis.attention_stats import offset_weights, query_mean

PATTERNS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
DOMINANT = 0.5  # a share at least this large names the pattern
MIXED = 0.2  # each of vertical and diagonal, for the mixed pattern
POSITIONAL = 0.9  # Voita et al.'s threshold


def _per_sentence_mean(values: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """(B, L, H, T) values -> (B, L, H) means over each sentence's selected queries."""
    weights = queries[:, None, None, :].to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)


def pattern_shares(
    attentions: torch.Tensor,
    attention_mask: torch.Tensor,
    special: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The vertical, diagonal and block shares of every map, (B, layers, heads) each.

    ``special`` (B, T) is True on [CLS] and [SEP]; ``token_type_ids`` the segments (one segment if omitted).

    Taught in: 10_bertology_attention ("Five patterns").
    """
    real = attention_mask.bool()
    queries = real & ~special
    segments = torch.zeros_like(attention_mask) if token_type_ids is None else token_type_ids
    positions = torch.arange(attention_mask.shape[1], device=real.device)
    near = (positions[:, None] - positions[None, :]).abs() <= 1  # the diagonal's keys
    same = (segments[:, :, None] == segments[:, None, :]) & queries[:, None, :] & ~near  # (B, T, T)
    vertical = (attentions * special[:, None, None, None, :].to(attentions.dtype)).sum(-1)
    to_words = attentions * queries[:, None, None, None, :].to(attentions.dtype)  # [CLS], [SEP] are vertical's
    diagonal = offset_weights(to_words, -1) + offset_weights(to_words, 1)
    block = (attentions * same[:, None, None].to(attentions.dtype)).sum(-1)
    return {
        name: _per_sentence_mean(values, queries)
        for name, values in (("vertical", vertical), ("diagonal", diagonal), ("block", block))
    }


def classify_patterns(shares: dict[str, torch.Tensor]) -> torch.Tensor:
    """The pattern of each map as an index into :data:`PATTERNS`, by the rule of the module's docstring.

    >>> shares = {"vertical": torch.tensor([.9, .1, .3, .1, .1]), "diagonal": torch.tensor([0, .8, .3, .1, .2]),
    ...           "block": torch.tensor([0, 0, 0, .7, .3])}
    >>> [PATTERNS[i] for i in classify_patterns(shares)]
    ['vertical', 'diagonal', 'vertical+diagonal', 'block', 'heterogeneous']

    Taught in: 10_bertology_attention ("Five patterns").
    """
    vertical, diagonal, block = shares["vertical"], shares["diagonal"], shares["block"]
    pattern = torch.full(vertical.shape, PATTERNS.index("heterogeneous"), dtype=torch.long)
    rules = (  # the last rule that holds wins: write them from the weakest claim to the strongest
        ("block", block >= DOMINANT),
        ("vertical+diagonal", (vertical + diagonal >= DOMINANT) & (vertical >= MIXED) & (diagonal >= MIXED)),
        ("diagonal", diagonal >= DOMINANT),
        ("vertical", vertical >= DOMINANT),
    )
    for name, holds in rules:
        pattern[holds] = PATTERNS.index(name)
    return pattern


@dataclass
class VoitaClasses:
    """Per head (layers, heads): ``confidence``, the share of argmaxes on the ``previous`` and on the ``next``
    token, and the share on the sentence's rarest token (``rare``), with what a uniform guess would score
    (``rare_chance``, the mean of 1 / number of words).

    Taught in: 10_bertology_attention ("Confident, positional and rare-token heads").
    """

    confidence: torch.Tensor
    previous: torch.Tensor
    next: torch.Tensor
    rare: torch.Tensor
    rare_chance: float

    def positional(self, threshold: float = POSITIONAL) -> torch.Tensor:
        """True for the heads whose argmax lies at -1 or at +1 for at least ``threshold`` of the tokens."""
        return torch.maximum(self.previous, self.next) >= threshold


def voita_classes(
    attentions: torch.Tensor, attention_mask: torch.Tensor, special: torch.Tensor, frequency: torch.Tensor
) -> VoitaClasses:
    """Voita et al.'s measures of every head over a batch of sentences.

    ``special`` (B, T) is True on [CLS] and [SEP]; ``frequency`` (B, T) holds each token's count in a
    reference corpus (the rarest word of a sentence is its real, non-special token of lowest count).

    Taught in: 10_bertology_attention ("Confident, positional and rare-token heads").
    """
    words = attention_mask.bool() & ~special
    confidence = attentions.masked_fill(~words[:, None, None, None, :], 0).amax(-1)  # (B, L, H, T)
    argmax = attentions.argmax(-1)  # (B, L, H, T)
    positions = torch.arange(attentions.shape[-1], device=argmax.device)
    counts = frequency.double().masked_fill(~words, float("inf"))
    rarest = counts.argmin(-1)  # (B,)
    is_rarest = argmax == rarest[:, None, None, None]
    return VoitaClasses(
        confidence=query_mean(confidence, words),
        previous=query_mean((argmax == positions - 1).double(), words),
        next=query_mean((argmax == positions + 1).double(), words),
        rare=query_mean(is_rarest.double(), words),
        rare_chance=float((1 / words.sum(-1).double()).mean()),
    )
