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
    "plot_attention", "plot_grouped_bars", "plot_history", "plot_mask",
    # diagrams: one figure each, no arguments needed
    "albert_diagram", "beam_search_diagram", "beam_search_example", "bert_input_diagram", "bert_pretraining_diagram",
    "decoder_block_diagram", "electra_diagram", "encoder_block_diagram", "layer_norm_placement_diagram",
    "multi_head_attention_diagram", "seq2seq_attention_diagram", "span_corruption_diagram", "transformer_diagram",
]


def plot_history(ax: Axes, history: History, quantity: str = "loss", *, smooth: int | None = None,
                 **line_kwargs) -> Axes:
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


def plot_attention(ax: Axes, weights: torch.Tensor, queries: Sequence[str], keys: Sequence[str], *,
                   title: str | None = None, xlabel: str = "key", ylabel: str = "query") -> Axes:
    """Attention weights (queries, keys) as a grey-scale image on the scale 0 (white) to 1 (black), with
    each row labelled by its query token and each column by its key token.

    Taught in: 01_attention ("Attention in equations").
    """
    if tuple(weights.shape) != (len(queries), len(keys)):
        raise ValueError(f"expected weights of shape ({len(queries)}, {len(keys)}) for the labels given, "
                         f"got {tuple(weights.shape)}")
    ax.imshow(weights.detach().cpu().numpy(), cmap="Greys", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys)
    ax.set_yticks(range(len(queries)), queries)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
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


def plot_grouped_bars(ax: Axes, groups: Sequence[str], series: dict[str, Sequence[float]], *,
                      bar_width: float = 0.4) -> Axes:
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
