"""Clark et al.'s (2019) attention-based dependency parsers: a single head read as a parser, and the
"attention-only" probe that weighs every head's attention in both directions.

Each word i (not the root) picks its head among the other words j of the sentence. A single head of layer l
guesses ``argmax_{j != i} α_ij`` (the word i attends to most; "dependent → head") or ``argmax_{j != i} α_ji``
(the word that attends most to i; "head → dependent"). The attention-only probe scores every candidate with
one weight per head and direction::

    p(head(i) = j) = softmax_{j != i} ( Σ_k w_k α^k_ij + u_k α^k_ji )

trained by cross-entropy on gold trees (Clark et al., section 5: UAS 61 on the PTB from BERT-base's attention
alone; the best single head 34.5; the right-branching baseline 26.3). The unlabelled attachment score (UAS)
is the share of non-root words whose predicted head is their gold head; the root word is left out of every
score here (no candidate "root").

Taught in: 10_bertology_attention ("An attention-based parser").
"""

from __future__ import annotations

from typing import Sequence

import torch


def _gold(heads: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """CoNLL-U heads (1-based, 0 the root) -> (dependents, their 0-based heads) of the non-root words."""
    pairs = [(i, h - 1) for i, h in enumerate(heads) if h > 0]
    if not pairs:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    dependents, governors = zip(*pairs)
    return torch.tensor(dependents), torch.tensor(governors)


def head_features(word_map: torch.Tensor) -> torch.Tensor:
    """The probe's features of one sentence: (W, W, 2·L·H) from its word maps (L, H, W, W), entry [i, j] the
    attention of every head from i to j, then from j to i.

    >>> head_features(torch.tensor([[[[0.9, 0.1], [0.3, 0.7]]]]))[0, 1]
    tensor([0.1000, 0.3000])

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    if word_map.dim() != 4 or word_map.shape[-1] != word_map.shape[-2]:
        raise ValueError(f"expected word maps (layers, heads, W, W), got shape {tuple(word_map.shape)}")
    forward = word_map.flatten(0, 1).permute(1, 2, 0)  # (W, W, L·H): α_ij
    return torch.cat([forward, forward.transpose(0, 1)], dim=-1)


def _candidate_scores(scores: torch.Tensor) -> torch.Tensor:
    """(..., W, W) scores with the diagonal (a word is never its own head) set to -inf."""
    n = scores.shape[-1]
    return scores.masked_fill(torch.eye(n, dtype=torch.bool, device=scores.device), -torch.inf)


def single_head_uas(word_maps: Sequence[torch.Tensor], heads: Sequence[Sequence[int]]) -> torch.Tensor:
    """The UAS of every head used alone as a parser, (2, layers, heads): direction 0 reads each word's row
    (``argmax_j α_ij``), direction 1 its column (``argmax_j α_ji``), as in
    :data:`~lecture_lib.analysis.syntactic_heads.DIRECTIONS`.

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    hits, total = torch.zeros(2, *word_maps[0].shape[:2]), 0
    for word_map, sentence_heads in zip(word_maps, heads):
        dependents, governors = _gold(sentence_heads)
        for direction, scores in enumerate((word_map, word_map.transpose(-1, -2))):
            guess = _candidate_scores(scores).argmax(-1)[..., dependents]  # (L, H, arcs)
            hits[direction] += (guess == governors).sum(-1)
        total += len(dependents)
    if not total:
        raise ValueError("expected sentences with at least one non-root word")
    return hits / total


def right_branching(length: int) -> list[int]:
    """The right-branching tree in CoNLL-U heads: every word's head is the next word, the last is the root.

    >>> right_branching(4)
    [2, 3, 4, 0]

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    return [i + 2 for i in range(length - 1)] + [0]


def attachment_score(predicted: Sequence[Sequence[int]], heads: Sequence[Sequence[int]]) -> float:
    """UAS: the share of gold non-root words whose predicted CoNLL-U head equals the gold one.

    >>> attachment_score([[2, 0, 2], [0, 1]], [[2, 0, 1], [2, 0]])
    0.3333333333333333

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    right = total = 0
    for guess, gold in zip(predicted, heads, strict=True):
        for g, h in zip(guess, gold, strict=True):
            if h > 0:
                right, total = right + (g == h), total + 1
    if not total:
        raise ValueError("expected sentences with at least one non-root word")
    return right / total


def _padded_problem(
    word_maps: Sequence[torch.Tensor], heads: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All sentences at once: features (N, W, W, F) padded with zeros, a candidate mask (N, W, W) (real, off
    the diagonal) and the gold 0-based heads (N, W), -100 on the roots and the padding."""
    width = max(m.shape[-1] for m in word_maps)
    features = torch.zeros(
        len(word_maps), width, width, 2 * word_maps[0].shape[0] * word_maps[0].shape[1], dtype=word_maps[0].dtype
    )
    candidates = torch.zeros(len(word_maps), width, width, dtype=torch.bool)
    gold = torch.full((len(word_maps), width), -100)
    for n, (word_map, sentence_heads) in enumerate(zip(word_maps, heads, strict=True)):
        w = word_map.shape[-1]
        features[n, :w, :w] = head_features(word_map)
        candidates[n, :w, :w] = ~torch.eye(w, dtype=torch.bool)
        dependents, governors = _gold(sentence_heads)
        gold[n, dependents] = governors
    return features, candidates, gold


def fit_attention_parser(
    word_maps: Sequence[torch.Tensor], heads: Sequence[Sequence[int]], *, steps: int = 100, lr: float = 0.1
) -> torch.Tensor:
    """Clark et al.'s attention-only probe: the weights (2·L·H,) of :func:`head_features` that minimise the
    mean cross-entropy of the gold heads of the non-root words, from zero (so deterministic), full-batch Adam.

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    features, candidates, gold = _padded_problem(word_maps, heads)
    if not bool((gold >= 0).any()):
        raise ValueError("expected sentences with at least one non-root word")
    weights = torch.zeros(features.shape[-1], dtype=features.dtype, requires_grad=True)
    optimizer = torch.optim.Adam([weights], lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        scores = (features @ weights).masked_fill(~candidates, -torch.inf)  # (N, W, W)
        rows = gold >= 0  # only real, non-root words have a row to score (the others may be all -inf)
        torch.nn.functional.cross_entropy(scores[rows], gold[rows]).backward()
        optimizer.step()
    return weights.detach()


def attention_parse(weights: torch.Tensor, word_maps: Sequence[torch.Tensor]) -> list[list[int]]:
    """Each sentence's predicted CoNLL-U heads under the probe's ``weights``: every word's best other word
    (1-based); no word is predicted as the root, so score with :func:`attachment_score`, which skips gold roots.

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    return [(_candidate_scores(head_features(m).to(weights) @ weights).argmax(-1) + 1).tolist() for m in word_maps]
