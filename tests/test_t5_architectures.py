"""lecture_lib.plots.t5_architectures: T5's Table 2 architectures as masks, checked cell by cell."""

import matplotlib.pyplot as plt
import pytest
import torch

from lecture_lib.plots.t5_architectures import (
    CROSS,
    DECODER_SELF,
    NONE,
    SELF,
    architecture_masks,
    t5_architectures_figure,
)


def test_each_cell_says_which_attention_reads_the_key():
    n, m = 3, 4
    masks = architecture_masks(n, m)
    for name, mask in masks.items():
        for query in range(n + m):
            for key in range(n + m):
                in_x = query < n
                if name == "encoder-decoder":
                    expected = (
                        (SELF if key < n else NONE)
                        if in_x
                        else (CROSS if key < n else DECODER_SELF if key <= query else NONE)
                    )
                elif name == "language model":
                    expected = SELF if key <= query else NONE
                else:  # prefix LM: the input fully visible, the target causal
                    expected = SELF if key < n or key <= query else NONE
                assert mask[query, key] == expected, (name, query, key)


def test_the_figure_draws_the_three_masks():
    plt.switch_backend("Agg")
    fig = t5_architectures_figure(4, 3)
    images = [ax.get_images()[0].get_array() for ax in fig.axes]
    assert [ax.get_title() for ax in fig.axes] == ["encoder-decoder", "language model", "prefix LM"]
    for image, mask in zip(images, architecture_masks(4, 3).values()):
        assert torch.equal(torch.as_tensor(image.data), mask)
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        architecture_masks(0, 3)
