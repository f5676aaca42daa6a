"""T5's three architectures (Raffel et al. 2020, Table 2 and Figure 4) as attention masks over one sequence.

Write the input x_1..x_n and the target y_1..y_m as one sequence of n + m positions; each architecture says
which position may read which, and with which weights:

- **encoder-decoder**: the encoder's self-attention is fully visible over x; the decoder reads all of x
  through cross-attention and y causally through its own self-attention (two stacks, two sets of weights);
- **language model**: one stack, causal over the whole sequence (x included);
- **prefix LM**: one stack, fully visible over the prefix x and causal over y.

The prefix LM's pattern is the encoder-decoder's, with one set of weights where that has two: that is why T5
found it close behind, and the plain language model, whose input tokens cannot see ahead, further back.

Taught in: 09_t5_bart ("T5: the model").
"""

from __future__ import annotations

import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from lecture_lib.attention import causal_mask, prefix_lm_mask

# What a cell of :func:`architecture_masks` holds: which attention lets that query read that key.
NONE, SELF, CROSS, DECODER_SELF = 0, 1, 2, 3
KIND_NAMES = {
    SELF: "self-attention (one stack, or the encoder)",
    CROSS: "decoder cross-attention",
    DECODER_SELF: "decoder self-attention",
}
KIND_COLORS = ("white", "#5b9bd5", "#e0a030", "#70ad47")
ARCHITECTURES = ("encoder-decoder", "language model", "prefix LM")


def architecture_masks(input_length: int, target_length: int) -> dict[str, torch.Tensor]:
    """For each of :data:`ARCHITECTURES`, an (n + m, n + m) integer mask over the input's n and the target's m
    positions: :data:`NONE` where the query may not read the key, else which attention reads it (:data:`SELF`,
    :data:`CROSS`, :data:`DECODER_SELF`).

    >>> masks = architecture_masks(2, 2)
    >>> masks["encoder-decoder"].tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [2, 2, 3, 0], [2, 2, 3, 3]]
    >>> (masks["prefix LM"] > 0).equal(masks["encoder-decoder"] > 0), masks["language model"][0].tolist()
    (True, [1, 0, 0, 0])

    Taught in: 09_t5_bart ("T5: the model").
    """
    if input_length < 1 or target_length < 1:
        raise ValueError(f"expected at least one input and one target position, got {input_length} and {target_length}")
    n, total = input_length, input_length + target_length
    encoder_decoder = torch.zeros(total, total, dtype=torch.long)
    encoder_decoder[:n, :n] = SELF
    encoder_decoder[n:, :n] = CROSS
    encoder_decoder[n:, n:] = DECODER_SELF * causal_mask(target_length).long()
    return {
        "encoder-decoder": encoder_decoder,
        "language model": SELF * causal_mask(total).long(),
        "prefix LM": SELF * prefix_lm_mask(total, n).long(),
    }


def t5_architectures_figure(input_length: int = 4, target_length: int = 3) -> Figure:
    """The three masks of :func:`architecture_masks` side by side, coloured by the attention that reads each
    key, the input and target positions labelled and split by a line.

    Taught in: 09_t5_bart ("T5: the model").
    """
    import matplotlib.pyplot as plt

    masks = architecture_masks(input_length, target_length)
    labels = [f"x{i + 1}" for i in range(input_length)] + [f"y{j + 1}" for j in range(target_length)]
    fig, axes = plt.subplots(1, len(masks), figsize=(3.3 * len(masks), 3.6))
    cmap = ListedColormap(KIND_COLORS)
    for ax, (name, mask) in zip(axes, masks.items()):
        ax.imshow(mask.numpy(), cmap=cmap, vmin=NONE, vmax=DECODER_SELF)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_yticks(range(len(labels)), labels)
        for line in (ax.axhline, ax.axvline):
            line(input_length - 0.5, color="grey", lw=0.8)
        ax.set(title=name, xlabel="key (read)", ylabel="query (reading)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=KIND_COLORS[kind]) for kind in KIND_NAMES]
    fig.legend(handles, KIND_NAMES.values(), loc="lower center", ncol=len(KIND_NAMES), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
