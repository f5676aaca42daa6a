"""The structural probe (Hewitt and Manning 2019): is the parse tree written into the geometry of a layer?

A linear map ``B`` (k, H) is fitted so that squared distances after it, ``d_B(h_i, h_j)^2 = |B (h_i - h_j)|^2``,
match the number of edges between words i and j in the gold tree (the *distance probe*), or so that
``|B h_i|^2`` matches word i's depth (the *depth probe*). The loss is the mean absolute error per sentence,
divided by the number of word pairs (the squared length) or of words, averaged over sentences.

Scores, as in the paper: the minimum spanning tree of the predicted distances against the gold tree's
undirected edges (UUAS, *unlabelled undirected attachment score*); per word, the Spearman correlation of its
predicted and gold distances to the others (DSpr), averaged within each sentence length from 5 to 50 and
then over lengths; the share of sentences whose shallowest word is the root (root%); the Spearman
correlation of predicted and gold depths (NSpr), averaged in the same way. Punctuation is left out of every
score. Heads are CoNLL-U style (1-based, 0 for the root).

Taught in: 11_bertology_probing ("The structural probe").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch
from torch import nn

from lecture_lib.metrics import spearman_correlation
from lecture_lib.runtime import progress_bar


def _check_heads(heads: Sequence[int]) -> None:
    n = len(heads)
    if sum(h == 0 for h in heads) != 1 or any(not 0 <= h <= n for h in heads):
        raise ValueError(f"expected heads in [0, {n}] with exactly one root (0), got {list(heads)}")


def tree_depths(heads: Sequence[int]) -> torch.Tensor:
    """Edges from each word up to the root, (W,): the root has depth 0.

    >>> tree_depths([2, 0, 2, 3]).tolist()  # "the dog chased cats": 2 is the root
    [1, 0, 1, 2]

    Taught in: 11_bertology_probing ("The structural probe").
    """
    _check_heads(heads)
    return torch.tensor([len(_ancestors(heads, i)) - 1 for i in range(len(heads))])


def _ancestors(heads: Sequence[int], word: int) -> list[int]:
    """``word`` and the words above it, up to the root (0-based)."""
    path = [word]
    while heads[path[-1]]:
        path.append(heads[path[-1]] - 1)
        if len(path) > len(heads):
            raise ValueError(f"the heads hold a cycle: {list(heads)}")
    return path


def tree_distances(heads: Sequence[int]) -> torch.Tensor:
    """Edges on the path between every two words, (W, W): from i up to their lowest common ancestor and
    down to j, ``depth(i) + depth(j) - 2 depth(lca)``.

    >>> tree_distances([2, 0, 2, 3]).tolist()
    [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]

    Taught in: 11_bertology_probing ("The structural probe").
    """
    _check_heads(heads)
    n = len(heads)
    above = torch.zeros(n, n, dtype=torch.bool)  # above[i, a]: a is i or one of its ancestors
    for i in range(n):
        above[i, _ancestors(heads, i)] = True
    depth = above.sum(1) - 1
    shared = above[:, None, :] & above[None, :, :]  # (W, W, W): the common ancestors of i and j
    lca_depth = torch.where(shared, depth, -1).amax(-1)  # the lowest common ancestor is the deepest
    return depth[:, None] + depth[None, :] - 2 * lca_depth


def minimum_spanning_tree(distances: torch.Tensor) -> set[tuple[int, int]]:
    """Prim's algorithm on a symmetric (n, n) distance matrix: the n - 1 edges (i, j), i < j, of a tree of
    least total distance (ties go to the lower index).

    >>> sorted(minimum_spanning_tree(torch.tensor([[0., 1., 4.], [1., 0., 2.], [4., 2., 0.]])))
    [(0, 1), (1, 2)]

    Taught in: 11_bertology_probing ("The structural probe").
    """
    n = distances.shape[0]
    if distances.shape != (n, n):
        raise ValueError(f"expected a square distance matrix, got shape {tuple(distances.shape)}")
    in_tree = torch.zeros(n, dtype=torch.bool)
    in_tree[0] = True
    best, parent = distances[0].clone(), torch.zeros(n, dtype=torch.long)
    edges = set()
    for _ in range(n - 1):
        nearest = int(torch.where(in_tree, torch.inf, best).argmin())
        edges.add((min(nearest, int(parent[nearest])), max(nearest, int(parent[nearest]))))
        in_tree[nearest] = True
        closer = distances[nearest] < best
        best, parent = torch.where(closer, distances[nearest], best), torch.where(closer, nearest, parent)
    return edges


def gold_edges(heads: Sequence[int], keep: Sequence[bool] | None = None) -> set[tuple[int, int]]:
    """The tree's undirected edges (i, j), i < j, between kept words, renumbered among the kept words
    (dropping punctuation leaves a tree: it hangs from other words and heads none in UD).

    Taught in: 11_bertology_probing ("The structural probe").
    """
    keep = [True] * len(heads) if keep is None else list(keep)
    new_index = {old: new for new, old in enumerate(i for i, k in enumerate(keep) if k)}
    return {
        tuple(sorted((new_index[i], new_index[h - 1]))) for i, h in enumerate(heads) if h and keep[i] and keep[h - 1]
    }


def uuas(predicted: Sequence[set[tuple[int, int]]], gold: Sequence[set[tuple[int, int]]]) -> float:
    """Share of gold edges, over all sentences, that the predicted trees contain.

    >>> uuas([{(0, 1), (1, 2)}], [{(0, 1), (0, 2)}])
    0.5

    Taught in: 11_bertology_probing ("The structural probe").
    """
    found = sum(len(p & g) for p, g in zip(predicted, gold, strict=True))
    return found / sum(len(g) for g in gold)


def right_branching_edges(n: int) -> set[tuple[int, int]]:
    """The baseline tree that links every word to the next: {(0, 1), (1, 2), ...}.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    return {(i, i + 1) for i in range(n - 1)}


def length_averaged_spearman(
    predicted: Sequence[torch.Tensor], gold: Sequence[torch.Tensor], min_length: int = 5, max_length: int = 50
) -> float:
    """Hewitt and Manning's DSpr / NSpr: Spearman's rho between each predicted row and its gold row (a word's
    distances to all words, or a sentence's depths), averaged over the sentences of each length in
    [min_length, max_length], then over lengths. Rows are (n,) depths or (n, n) distances per sentence.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    by_length = defaultdict(list)
    for p, g in zip(predicted, gold, strict=True):
        if min_length <= len(g) <= max_length:
            rows = zip(p, g) if g.dim() == 2 else [(p, g)]
            by_length[len(g)] += [spearman_correlation(pr, gr) for pr, gr in rows]
    if not by_length:
        raise ValueError(f"no sentence has a length in [{min_length}, {max_length}]")
    return sum(sum(v) / len(v) for v in by_length.values()) / len(by_length)


class StructuralProbe(nn.Module):
    """``B`` (k, H): squared distances ``|B (h_i - h_j)|^2`` between a sentence's words (``depth=False``) or
    squared norms ``|B h_i|^2`` (``depth=True``). Inputs (N, W, H), outputs (N, W, W) or (N, W).

    Taught in: 11_bertology_probing ("The structural probe").
    """

    def __init__(
        self, hidden_size: int, rank: int, depth: bool = False, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.depth = depth
        self.proj = nn.Parameter(torch.empty(rank, hidden_size).uniform_(-0.05, 0.05, generator=generator))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.geometry(hidden @ self.proj.T)

    def geometry(self, z: torch.Tensor) -> torch.Tensor:
        """Squared norms (N, W) or squared distances (N, W, W) of projected vectors ``z = B h`` (N, W, k)."""
        norms = (z * z).sum(-1)  # (N, W)
        if self.depth:
            return norms
        # |z_i - z_j|^2 = |z_i|^2 + |z_j|^2 - 2 z_i . z_j, without forming the (N, W, W, k) differences
        return norms[:, :, None] + norms[:, None, :] - 2 * z @ z.transpose(1, 2)


def pad_sentences(rows: Sequence[torch.Tensor], square: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sentence tensors, (W_s,) or (W_s, H), or (W_s, W_s) with ``square=True`` -> one zero-padded
    tensor (N, W, ...) and the (N, W) mask of real words.

    >>> pad_sentences([torch.ones(1, 1), torch.ones(2, 2)], square=True)[0][0]
    tensor([[1., 0.],
            [0., 0.]])

    Taught in: 11_bertology_probing ("The structural probe").
    """
    width = max(len(r) for r in rows)
    tail = (width,) if square else tuple(rows[0].shape[1:])
    out = torch.zeros(len(rows), width, *tail, dtype=rows[0].dtype)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, r in enumerate(rows):
        out[(i, *[slice(0, n) for n in r.shape])] = r
        mask[i, : len(r)] = True
    return out, mask


def structural_loss(predicted: torch.Tensor, gold: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hewitt and Manning's L1 loss: per sentence the summed |gold - predicted| over its words (depth) or
    word pairs (distance), divided by that count, then averaged over the sentences.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    pairs = mask if predicted.dim() == 2 else mask[:, :, None] & mask[:, None, :]
    error = ((gold - predicted).abs() * pairs).flatten(1).sum(-1)
    return (error / pairs.flatten(1).sum(-1)).mean()


def fit_structural_probe(
    probe: StructuralProbe,
    hidden: Sequence[torch.Tensor],
    targets: Sequence[torch.Tensor],
    steps: int = 200,
    lr: float = 0.01,
    description: str | None = None,
) -> StructuralProbe:
    """Fit ``probe`` to gold distances (or depths) of every sentence: full-batch Adam on
    :func:`structural_loss`; ``hidden`` holds a (W_s, H) matrix per sentence.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    words = torch.cat(list(hidden))  # (total words, H): projecting these, not the padding, saves time
    y, mask = pad_sentences([t.float() for t in targets], square=not probe.depth)
    optimizer = torch.optim.Adam(probe.parameters(), lr=lr)
    for _ in progress_bar(range(steps), desc=description, disable=description is None, leave=False):
        optimizer.zero_grad()
        z = torch.zeros(*mask.shape, probe.proj.shape[0]).masked_scatter(mask[..., None], words @ probe.proj.T)
        structural_loss(probe.geometry(z), y, mask).backward()
        optimizer.step()
    return probe
