"""The figure kinds the chapters repeat: training curves, attention maps, attention masks, grouped bars; and the
course's diagrams (:mod:`lecture_lib.plots.diagrams`), re-exported here.

Each chart function draws on the matplotlib axes it is given and returns them, so that a notebook lays out its
own subplots and adds its own titles, reference lines and legends. Each diagram function draws its own figure,
needs no arguments, and returns the figure.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

from typing import Sequence

import torch
from matplotlib.axes import Axes

from lecture_lib.plots.diagrams import (
    albert_diagram,
    beam_search_diagram,
    beam_search_example,
    bert_input_diagram,
    bert_pretraining_diagram,
    decoder_block_diagram,
    electra_diagram,
    encoder_block_diagram,
    layer_norm_placement_diagram,
    multi_head_attention_diagram,
    seq2seq_attention_diagram,
    span_corruption_diagram,
    transformer_diagram,
)
from lecture_lib.train import History

__all__ = [
    # charts: drawn on the axes they are given
    "plot_attention",
    "plot_dependencies",
    "plot_grouped_bars",
    "plot_head_grid",
    "plot_history",
    "plot_mask",
    "plot_seed_band",
    # diagrams: one figure each, no arguments needed
    "albert_diagram",
    "beam_search_diagram",
    "beam_search_example",
    "bert_input_diagram",
    "bert_pretraining_diagram",
    "decoder_block_diagram",
    "electra_diagram",
    "encoder_block_diagram",
    "layer_norm_placement_diagram",
    "multi_head_attention_diagram",
    "seq2seq_attention_diagram",
    "span_corruption_diagram",
    "transformer_diagram",
]


def plot_history(
    ax: Axes, history: History, quantity: str = "loss", *, smooth: int | None = None, **line_kwargs
) -> Axes:
    """One point per optimizer step (step 0 first) of ``history.loss`` or ``history.lr``.

    With ``smooth=w`` the per-step values are drawn faint, with the mean of each ``w`` consecutive steps
    over them, placed at the window's last step: m_t = (x_{t-w+1} + ... + x_t) / w for t >= w - 1.

    Taught in: 01_attention ("The bottleneck, measured").
    """
    values = getattr(history, quantity)
    if smooth is None:
        ax.plot(values, **line_kwargs)
        return ax
    if not 1 <= smooth <= len(values):
        raise ValueError(f"expected a window of 1 to {len(values)} steps, got smooth={smooth}")
    ax.plot(values, alpha=0.3, label="per step", **line_kwargs)
    means = torch.tensor(values).unfold(0, smooth, 1).mean(1)
    ax.plot(range(smooth - 1, len(values)), means, label=f"mean of {smooth} steps", **line_kwargs)
    return ax


def plot_attention(
    ax: Axes,
    weights: torch.Tensor,
    queries: Sequence[str],
    keys: Sequence[str],
    *,
    title: str | None = None,
    xlabel: str = "key",
    ylabel: str = "query",
) -> Axes:
    """Attention weights (queries, keys) as a grey-scale image on the scale 0 (white) to 1 (black), with
    each row labelled by its query token and each column by its key token.

    Taught in: 01_attention ("Attention in equations").
    """
    if tuple(weights.shape) != (len(queries), len(keys)):
        raise ValueError(
            f"expected weights of shape ({len(queries)}, {len(keys)}) for the labels given, got {tuple(weights.shape)}"
        )
    ax.imshow(weights.detach().cpu().numpy(), cmap="Greys", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys)
    ax.set_yticks(range(len(queries)), queries)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return ax


def plot_head_grid(
    ax: Axes, values: torch.Tensor, title: str, *, label: str, digits: int | None = None, vmin: float | None = None
) -> Axes:
    """One number per attention head, a (layers, heads) grid: a heatmap with a tick on every layer and head (0 to
    L−1, 0 to H−1), a colour bar named ``label``, and each cell's value written in it when ``digits`` is given.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    if values.dim() != 2:
        raise ValueError(f"expected values of shape (layers, heads), got {tuple(values.shape)}")
    grid = values.detach().float().cpu()
    image = ax.imshow(grid.numpy(), cmap="viridis", vmin=vmin)
    layers, heads = grid.shape
    ax.set(title=title, xlabel="head", ylabel="layer", xticks=range(heads), yticks=range(layers))
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label=label)
    if digits is not None:
        for (layer, head), v in zip(
            torch.cartesian_prod(torch.arange(layers), torch.arange(heads)).tolist(), grid.flatten().tolist()
        ):
            ax.text(head, layer, f"{v:.{digits}f}", ha="center", va="center", color="w", fontsize=8)
    return ax


def plot_mask(ax: Axes, mask: torch.Tensor, title: str, *, xlabel: str = "key", ylabel: str = "query") -> Axes:
    """A boolean attention mask (queries, keys): blue where the query may attend to the key, white where not.

    Taught in: 01_attention ("Masks: a matrix added before the softmax").
    """
    if mask.dim() != 2:
        raise ValueError(f"expected a mask of shape (queries, keys), got {tuple(mask.shape)}")
    ax.imshow(mask.float().cpu().numpy(), cmap="Blues", vmin=0, vmax=1.3)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return ax


def plot_seed_band(ax: Axes, x: Sequence[float], values: torch.Tensor, style: str, label: str) -> Axes:
    """A curve repeated over seeds, ``values`` (seeds, points): its mean as a line drawn in ``style``, and the
    band from the lowest to the highest seed around it, in the line's colour.

    Taught in: 10_bertology_attention ("Pruning by importance").
    """
    if values.dim() != 2 or values.shape[1] != len(x):
        raise ValueError(f"expected values of shape (seeds, {len(x)}), got {tuple(values.shape)}")
    values = values.detach().float().cpu()
    (line,) = ax.plot(x, values.mean(0).tolist(), style, label=label)
    ax.fill_between(x, values.min(0).values.tolist(), values.max(0).values.tolist(), color=line.get_color(), alpha=0.2)
    return ax


def plot_grouped_bars(
    ax: Axes, groups: Sequence[str], series: dict[str, Sequence[float]], *, bar_width: float = 0.4
) -> Axes:
    """One group of bars per entry of ``groups``, one bar per series in each, side by side and centred on
    the group's tick: series k of n sits at group + bar_width * (k - (n - 1) / 2). Each series is labelled
    by its key, for a legend.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    for k, (label, values) in enumerate(series.items()):
        if len(values) != len(groups):
            raise ValueError(f"expected {len(groups)} values per series, got {len(values)} for {label!r}")
        offset = bar_width * (k - (len(series) - 1) / 2)
        ax.bar([i + offset for i in range(len(groups))], values, width=bar_width, label=label)
    ax.set_xticks(range(len(groups)), groups)
    return ax


def plot_dependencies(
    ax: Axes, words: Sequence[str], heads: Sequence[int], labels: Sequence[str], *, tags: Sequence[str] | None = None
) -> Axes:
    """A dependency tree: the words on a line (word i at x = i, each tag in grey below it), and an arc from
    each word's head to it, labelled, as high as 0.45 times the distance it spans, with a marker at the
    dependent's end; the root gets an arrow from above. ``heads`` are CoNLL-U's: 1-based word indices, 0 for
    the root.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """
    if not len(words) == len(heads) == len(labels) == len(tags if tags is not None else words):
        raise ValueError(
            f"expected one head, label (and tag) per word for {len(words)} words, got "
            f"{len(heads)} heads, {len(labels)} labels" + (f", {len(tags)} tags" if tags else "")
        )
    if not all(0 <= head <= len(words) for head in heads):
        raise ValueError(f"expected heads in 0..{len(words)} (1-based, 0 the root), got {list(heads)}")
    for i, word in enumerate(words):
        ax.text(i, 0, word, ha="center", va="top", fontsize=11)
        if tags is not None:
            ax.text(i, -0.35, tags[i], ha="center", va="top", fontsize=8, color="grey")
    for i, (head, label) in enumerate(zip(heads, labels)):
        if head == 0:
            ax.annotate("", (i, 0.1), (i, 2.6), arrowprops=dict(arrowstyle="->"))
            ax.text(i, 2.7, "root", ha="center", fontsize=8)
            continue
        left, right = sorted((i, head - 1))
        height = 0.45 * (right - left)
        xs = torch.linspace(0, torch.pi, 30)
        ax.plot(left + (right - left) * (1 - torch.cos(xs)) / 2, 0.1 + height * torch.sin(xs), color="C0", lw=1)
        ax.plot(i, 0.12, "v", color="C0", ms=4)  # the arrow ends at the dependent
        ax.text((left + right) / 2, 0.15 + height, label, ha="center", fontsize=8, color="C3")
    ax.set(xlim=(-0.7, len(words) - 0.3), ylim=(-0.8, 3.2))
    ax.axis("off")
    return ax
