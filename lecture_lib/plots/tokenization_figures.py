"""Chapter 03's figures: a word's BPE merges drawn as a tree, and held-out sequence length against vocabulary size.

Each function draws on the axes it is given and returns them, like the charts of :mod:`lecture_lib.plots`.

Taught in: 03_tokenization ("BPE for words", "Vocabulary size against sequence length").
"""

from __future__ import annotations

import math
from typing import Sequence

from matplotlib.axes import Axes
from matplotlib.ticker import NullLocator

from lecture_lib.tokenization.bpe import Pair, apply_bpe


def _spans(pieces: Sequence[str], symbols: Sequence[str]) -> list[tuple[int, int]]:
    """The (start, end) symbol offsets of consecutive pieces, each a concatenation of consecutive ``symbols``:
    pieces ["lo", "w</w>"] of symbols ["l", "o", "w", "</w>"] -> [(0, 2), (2, 4)]."""
    spans, start = [], 0
    for piece in pieces:
        end, joined = start, ""
        while joined != piece:
            joined, end = joined + symbols[end], end + 1
        spans.append((start, end))
        start = end
    return spans


def plot_merge_tree(ax: Axes, word: str, merges: Sequence[Pair], end_of_word: str | None = None) -> Axes:
    """The merges that segment ``word``, as a tree: the word's symbols are leaves at height 0, and each merge
    that applies joins two adjacent pieces into a node drawn at the height of its rank (1 = learned first).
    The pieces left at the end, :func:`~lecture_lib.tokenization.apply_bpe`'s answer, are drawn in bold.

    Taught in: 03_tokenization ("BPE for words").
    """
    if not word:
        raise ValueError("expected a non-empty word, got ''")
    symbols = apply_bpe(word, [], end_of_word)
    levels = [(0, symbols)]
    for rank in range(1, len(merges) + 1):
        pieces = apply_bpe(word, merges[:rank], end_of_word)
        if len(pieces) < len(levels[-1][1]):
            levels.append((rank, pieces))
    height = {span: 0 for span in _spans(symbols, symbols)}  # span -> the rank of the merge that made it
    text = dict(zip(_spans(symbols, symbols), levels[0][1]))
    edges = []
    for (_, before), (rank, after) in zip(levels, levels[1:]):
        old = _spans(before, symbols)
        for span, piece in zip(_spans(after, symbols), after):
            if span not in height:
                height[span], text[span] = rank, piece
                edges += [(child, span) for child in old if span[0] <= child[0] and child[1] <= span[1]]
    final = set(_spans(levels[-1][1], symbols))
    centre = {span: (span[0] + span[1] - 1) / 2 for span in height}
    for child, parent in edges:
        ax.plot([centre[child], centre[parent]], [height[child], height[parent]], color="grey", lw=1, zorder=1)
    for span, rank in height.items():
        ax.text(
            centre[span],
            rank,
            text[span],
            ha="center",
            va="center",
            zorder=2,
            fontweight="bold" if span in final else "normal",
            bbox=dict(boxstyle="round,pad=0.25", fc="lightyellow" if span in final else "white", ec="grey"),
        )
    ranks = [rank for rank, _ in levels]
    ax.set_yticks(ranks, [str(r) for r in ranks])
    ax.set_xticks(range(len(symbols)))
    ax.set(
        xlim=(-0.7, len(symbols) - 0.3),
        ylim=(-0.6, ranks[-1] + 0.6),
        xlabel="symbol position in the word (0 = first character)",
        ylabel="merge rank (1 = learned first)",
    )
    return ax


def plot_vocabulary_curve(
    ax: Axes, curves: dict[str, Sequence[dict[str, float]]], quantity: str = "tokens_per_word"
) -> Axes:
    """One line per tokenizer of ``quantity`` (a column of :func:`~lecture_lib.tokenization.bpe_curve`'s rows)
    against vocabulary size, on a log axis ticked at the powers of two it spans and labelled in plain numbers.

    Taught in: 03_tokenization ("Vocabulary size against sequence length").
    """
    sizes = [row["vocab_size"] for rows in curves.values() for row in rows]
    if not sizes:
        raise ValueError("expected at least one curve with points, got none")
    for (label, rows), marker in zip(curves.items(), "os^vD"):
        ax.plot([r["vocab_size"] for r in rows], [r[quantity] for r in rows], marker + "-", label=label)
    ax.set_xscale("log")
    ticks = [2**k for k in range(math.ceil(math.log2(min(sizes))), math.floor(math.log2(max(sizes))) + 1)]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("vocabulary size (tokens)")
    ax.legend()
    return ax
