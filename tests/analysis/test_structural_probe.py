"""lecture_lib.analysis.structural_probe: tree distances against a breadth-first search, the spanning tree
against brute force, the Spearman averages against scipy, and probes fitted to a planted tree geometry."""

import itertools
import random
from collections import deque

import pytest
import torch
from scipy.stats import spearmanr

from lecture_lib.analysis.structural_probe import (
    StructuralProbe,
    fit_structural_probe,
    gold_edges,
    length_averaged_spearman,
    minimum_spanning_tree,
    pad_sentences,
    right_branching_edges,
    structural_loss,
    tree_depths,
    tree_distances,
    uuas,
)


def random_heads(n: int, rng: random.Random) -> list[int]:
    """A random tree over n words as CoNLL-U heads: words attach, in a random order, to one already placed."""
    order = rng.sample(range(n), n)
    heads = [0] * n
    for k, word in enumerate(order[1:], start=1):
        heads[word] = order[rng.randrange(k)] + 1
    return heads


def bfs_distances(heads: list[int]) -> list[list[int]]:
    n = len(heads)
    neighbours = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h:
            neighbours[i].append(h - 1)
            neighbours[h - 1].append(i)
    out = []
    for source in range(n):
        seen = {source: 0}
        queue = deque([source])
        while queue:
            w = queue.popleft()
            for v in neighbours[w]:
                if v not in seen:
                    seen[v] = seen[w] + 1
                    queue.append(v)
        out.append([seen[j] for j in range(n)])
    return out


def test_tree_distances_and_depths_equal_a_breadth_first_search():
    rng = random.Random(0)
    for _ in range(200):
        heads = random_heads(rng.randint(1, 15), rng)
        bfs = bfs_distances(heads)
        assert tree_distances(heads).tolist() == bfs
        root = heads.index(0)
        assert tree_depths(heads).tolist() == bfs[root]


def test_heads_that_are_no_tree_are_rejected():
    with pytest.raises(ValueError, match="exactly one root"):
        tree_distances([0, 0])
    with pytest.raises(ValueError, match="cycle"):
        tree_depths([2, 3, 2, 0])


def brute_force_mst_weight(d: torch.Tensor) -> float:
    n = d.shape[0]
    edges = list(itertools.combinations(range(n), 2))
    best = float("inf")
    for chosen in itertools.combinations(edges, n - 1):
        parent = list(range(n))

        def find(a):
            while parent[a] != a:
                a = parent[a]
            return a

        acyclic = True
        for i, j in chosen:
            ri, rj = find(i), find(j)
            if ri == rj:
                acyclic = False
                break
            parent[ri] = rj
        if acyclic:
            best = min(best, sum(d[i, j].item() for i, j in chosen))
    return best


def test_the_spanning_tree_is_a_tree_of_least_weight_by_brute_force():
    g = torch.Generator().manual_seed(0)
    for n in range(1, 7):
        for _ in range(10):
            d = torch.rand(n, n, generator=g)
            d = d + d.T
            edges = minimum_spanning_tree(d)
            assert len(edges) == n - 1 and all(i < j for i, j in edges)
            assert len({w for e in edges for w in e} | {0}) == n  # spans every word
            assert sum(d[i, j].item() for i, j in edges) == pytest.approx(brute_force_mst_weight(d))


def test_the_spanning_tree_of_gold_distances_is_the_gold_tree():
    rng = random.Random(1)
    for _ in range(50):
        heads = random_heads(rng.randint(2, 12), rng)
        assert minimum_spanning_tree(tree_distances(heads).float()) == gold_edges(heads)


def test_gold_edges_renumber_the_kept_words_and_uuas_counts_shared_edges():
    # "dogs bark ." with the full stop attached to the root and left out
    assert gold_edges([2, 0, 2], keep=[True, True, False]) == {(0, 1)}
    assert right_branching_edges(4) == {(0, 1), (1, 2), (2, 3)}
    assert uuas([right_branching_edges(3), {(0, 2), (1, 2)}], [{(0, 1), (0, 2)}, {(0, 2), (1, 2)}]) == 0.75


def test_length_averaged_spearman_equals_scipy_averaged_by_length():
    g = torch.Generator().manual_seed(0)
    predicted, gold, expected = [], [], {}
    for n in (3, 5, 5, 7, 60):
        heads = random_heads(n, random.Random(n + len(gold)))
        d = tree_distances(heads)
        p = d + 2 * torch.rand(n, n, generator=g)
        predicted.append(p)
        gold.append(d)
        if 5 <= n <= 50:
            rows = [spearmanr(p[i].numpy(), d[i].numpy()).statistic for i in range(n)]
            expected.setdefault(n, []).extend(rows)
    reference = sum(sum(v) / len(v) for v in expected.values()) / len(expected)
    assert length_averaged_spearman(predicted, gold) == pytest.approx(reference, abs=1e-9)
    depths = [tree_depths(random_heads(6, random.Random(k))) for k in range(3)]
    noisy = [d + torch.rand(6, generator=g) for d in depths]
    reference = sum(spearmanr(p.numpy(), d.numpy()).statistic for p, d in zip(noisy, depths)) / 3
    assert length_averaged_spearman(noisy, depths) == pytest.approx(reference, abs=1e-9)


def test_the_probe_computes_squared_distances_and_norms_and_the_loss_is_normalised():
    torch.manual_seed(0)
    probe = StructuralProbe(4, 3)
    h = torch.randn(2, 5, 4)
    z = h @ probe.proj.T
    torch.testing.assert_close(probe(h), torch.cdist(z, z) ** 2, atol=1e-5, rtol=1e-5)
    probe.depth = True
    torch.testing.assert_close(probe(h), z.pow(2).sum(-1))
    predicted, mask = pad_sentences([torch.ones(2, 2), torch.zeros(3, 3)], square=True)
    gold = torch.zeros_like(predicted)
    # sentence 1: |1 - 0| on its 4 pairs / 4 = 1; sentence 2: 0; padding never counts
    assert structural_loss(predicted, gold, mask).item() == pytest.approx(0.5)


def test_a_distance_probe_recovers_a_planted_tree_geometry():
    """Vectors whose first 8 coordinates place each word at its tree position (the sum of one-hot edge
    vectors from the root, so squared distances = tree distances), hidden among noise coordinates."""
    rng, g = random.Random(0), torch.Generator().manual_seed(0)
    hidden, distances, heads_list = [], [], []
    for _ in range(60):
        heads = random_heads(rng.randint(5, 8), rng)
        n = len(heads)
        basis = torch.eye(8)
        position = torch.zeros(n, 8)
        for i in range(n):  # word i sits at the sum of one direction per edge on its path up to the root
            w = i
            while heads[w]:
                position[i] += basis[w]  # the edge from w to its head
                w = heads[w] - 1
        noise = torch.randn(n, 24, generator=g)
        hidden.append(torch.cat([position, noise], -1))
        distances.append(tree_distances(heads))
        heads_list.append(heads)
    probe = fit_structural_probe(StructuralProbe(32, 8, generator=g), hidden[:40], distances[:40], steps=300, lr=0.05)
    with torch.no_grad():
        predicted = [probe(h[None])[0] for h in hidden[40:]]
    trees = [minimum_spanning_tree(p) for p in predicted]
    assert uuas(trees, [gold_edges(h) for h in heads_list[40:]]) > 0.95
    assert length_averaged_spearman(predicted, distances[40:]) > 0.9
