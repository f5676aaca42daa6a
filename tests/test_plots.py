import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from lecture_lib.plots import (
    plot_attention,
    plot_dependencies,
    plot_grouped_bars,
    plot_head_grid,
    plot_history,
    plot_mask,
    plot_seed_band,
)
from lecture_lib.plots.tokenization_figures import plot_merge_tree, plot_vocabulary_curve
from lecture_lib.tokenization import learn_bpe
from lecture_lib.train import History


@pytest.fixture
def ax():
    plt.switch_backend("Agg")  # draw off-screen
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_history_lines_carry_the_values_per_step(ax):
    history = History(loss=[4.0, 3.0, 2.5, 2.0, 1.0], lr=[0.1, 0.2, 0.3, 0.2, 0.1])
    assert plot_history(ax, history, label="run") is ax
    plot_history(ax, history, "lr")
    (loss, lr) = ax.get_lines()
    assert loss.get_xdata().tolist() == [0, 1, 2, 3, 4] and loss.get_ydata().tolist() == history.loss
    assert loss.get_label() == "run" and lr.get_ydata().tolist() == history.lr


def test_smoothed_history_is_a_running_mean_ending_at_each_step(ax):
    history = History(loss=[4.0, 3.0, 2.5, 2.0, 1.0])
    plot_history(ax, history, smooth=2)
    raw, smooth = ax.get_lines()
    assert raw.get_ydata().tolist() == history.loss and raw.get_label() == "per step"
    assert smooth.get_label() == "mean of 2 steps"
    assert list(smooth.get_xdata()) == [1, 2, 3, 4]
    expected = np.convolve(history.loss, np.ones(2) / 2, mode="valid")  # the window ending at steps 1..4
    np.testing.assert_allclose(np.asarray(smooth.get_ydata()), expected)
    with pytest.raises(ValueError, match="expected a window of 1 to 5 steps, got smooth=6"):
        plot_history(ax, history, smooth=6)


def test_mask_image_is_the_mask(ax):
    mask = torch.tensor([[True, False, False], [True, True, False]])
    assert plot_mask(ax, mask, "causal") is ax
    (image,) = ax.get_images()
    assert np.asarray(image.get_array()).tolist() == mask.float().tolist()
    assert image.get_clim() == (0, 1.3)  # False is white and True a mid blue, whatever the mask holds
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("causal", "key", "query")
    with pytest.raises(ValueError, match=r"expected a mask of shape \(queries, keys\), got \(1, 2, 3\)"):
        plot_mask(ax, mask[None], "three dimensions")


def test_head_grid_ticks_every_layer_and_head_and_names_its_colour_bar(ax):
    values = torch.arange(12.0).reshape(4, 3) / 10  # 4 layers, 3 heads
    assert plot_head_grid(ax, values, "importance", label="share", digits=1) is ax
    (image,) = ax.get_images()
    np.testing.assert_allclose(np.asarray(image.get_array()), values.numpy())
    assert ax.get_yticks().tolist() == [0, 1, 2, 3] and ax.get_xticks().tolist() == [0, 1, 2]  # not -0.5, 0.5, ...
    (colour_bar,) = [a for a in ax.figure.axes if a is not ax]
    assert colour_bar.get_ylabel() == "share"
    assert [t.get_text() for t in ax.texts] == [f"{v:.1f}" for v in values.flatten().tolist()]
    assert ax.texts[5].get_position() == (2, 1)  # layer 1, head 2: x is the head, y the layer
    with pytest.raises(ValueError, match=r"expected values of shape \(layers, heads\), got \(12,\)"):
        plot_head_grid(ax, values.flatten(), "flat", label="share")


def test_attention_map_labels_rows_by_query_and_columns_by_key(ax):
    weights = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    plot_attention(ax, weights, ["a", "b", "</s>"], ["x", "y"], title="alignment")
    (image,) = ax.get_images()
    np.testing.assert_allclose(np.asarray(image.get_array()), weights.numpy())
    assert image.get_clim() == (0, 1)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "</s>"]
    with pytest.raises(ValueError, match=r"expected weights of shape \(2, 2\) for the labels given, got \(3, 2\)"):
        plot_attention(ax, weights, ["a", "b"], ["x", "y"])


def test_grouped_bars_sit_side_by_side_around_each_group(ax):
    plot_grouped_bars(ax, ["g0", "g1"], {"A": [1.0, 2.0], "B": [3.0, 4.0], "C": [5.0, 6.0]}, bar_width=0.25)
    bars = ax.patches
    centres = [round(b.get_x() + b.get_width() / 2, 6) for b in bars]
    assert centres == [-0.25, 0.75, 0.0, 1.0, 0.25, 1.25]  # series A, B, C left to right in each group
    assert [b.get_height() for b in bars] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["g0", "g1"]
    assert [c.get_label() for c in ax.containers] == ["A", "B", "C"]
    with pytest.raises(ValueError, match="expected 2 values per series, got 1 for 'D'"):
        plot_grouped_bars(ax, ["g0", "g1"], {"D": [1.0]})


def test_dependency_arcs_join_each_head_to_its_dependent(ax):
    """In "the nurse walks" the root is "walks" (an arrow from above), "nurse" hangs off it (an arc spanning one word,
    0.45 high) and "the" off "nurse"; each arc is labelled above its middle, each word has its tag below."""
    words, heads, labels, tags = ["the", "nurse", "walks"], [2, 3, 0], ["det", "nsubj", "root"], ["DET", "NOUN", "VERB"]
    assert plot_dependencies(ax, words, heads, labels, tags=tags) is ax
    texts = {(t.get_text(), tuple(np.round(t.get_position(), 2))) for t in ax.texts}
    assert {
        ("the", (0, 0)),
        ("nurse", (1, 0)),
        ("walks", (2, 0)),
        ("DET", (0, -0.35)),
        ("VERB", (2, -0.35)),
        ("root", (2, 2.7)),
        ("det", (0.5, 0.6)),
        ("nsubj", (1.5, 0.6)),
    } <= texts
    arcs = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
    spans = sorted((float(min(a.get_xdata())), float(max(a.get_xdata())), float(max(a.get_ydata()))) for a in arcs)
    np.testing.assert_allclose(spans, [(0, 1, 0.55), (1, 2, 0.55)], atol=1e-3)
    markers = sorted(float(line.get_xdata()[0]) for line in ax.get_lines() if len(line.get_xdata()) == 1)
    assert markers == [0, 1]  # one at each dependent; the root has the arrow instead
    with pytest.raises(ValueError, match="expected one head, label .and tag. per word for 3 words, got 2 heads"):
        plot_dependencies(ax, words, heads[:2], labels)
    with pytest.raises(ValueError, match=r"expected heads in 0..3 \(1-based, 0 the root\), got \[4, 3, 0\]"):
        plot_dependencies(ax, words, [4, 3, 0], labels)


def test_merge_tree_draws_each_piece_at_the_rank_of_its_merge(ax):
    merges = learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10, end_of_word="</w>")
    assert plot_merge_tree(ax, "lowest", merges, end_of_word="</w>") is ax
    nodes = {(t.get_text(), t.get_position()[1]) for t in ax.texts}
    rank = {pair: i + 1 for i, pair in enumerate(merges)}
    assert nodes == {
        ("l", 0),
        ("o", 0),
        ("w", 0),
        ("e", 0),
        ("s", 0),
        ("t", 0),
        ("</w>", 0),
        ("es", rank[("e", "s")]),
        ("est", rank[("es", "t")]),
        ("est</w>", rank[("est", "</w>")]),
        ("lo", rank[("l", "o")]),
        ("low", rank[("lo", "w")]),
    }
    bold = {t.get_text() for t in ax.texts if t.get_fontweight() == "bold"}
    assert bold == {"low", "est</w>"}  # apply_bpe's answer
    assert len(ax.get_lines()) == 2 * 5  # each of the five merges joins two children to its node
    assert [int(t) for t in ax.get_yticks()] == [0, 1, 2, 3, 4, 5]
    assert ax.get_xlabel() == "symbol position in the word (0 = first character)"
    assert ax.get_ylabel() == "merge rank (1 = learned first)"
    with pytest.raises(ValueError, match="expected a non-empty word"):
        plot_merge_tree(ax, "", merges)


def test_vocabulary_curve_plots_each_tokenizer_on_plain_power_of_two_ticks(ax):
    bpe = [{"vocab_size": 256, "tokens_per_word": 6.5}, {"vocab_size": 1024, "tokens_per_word": 3.0}]
    wordpiece = [{"vocab_size": 600, "tokens_per_word": 2.5}, {"vocab_size": 3000, "tokens_per_word": 1.4}]
    assert plot_vocabulary_curve(ax, {"BPE": bpe, "WordPiece": wordpiece}) is ax
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["BPE", "WordPiece"]
    assert list(lines[1].get_xdata()) == [600, 3000] and list(lines[1].get_ydata()) == [2.5, 1.4]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "vocabulary size (tokens)"
    assert list(ax.get_xticks()) == [256, 512, 1024, 2048]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "1,024", "2,048"]
    assert len(ax.xaxis.get_minorticklocs()) == 0  # no minor labels to collide with the major ones
    with pytest.raises(ValueError, match="expected at least one curve"):
        plot_vocabulary_curve(ax, {"empty": []})


def test_plot_seed_band_draws_the_mean_and_the_range_over_seeds():
    values = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 5.0, 2.0]])
    fig, ax = plt.subplots()
    plot_seed_band(ax, [0, 1, 2], values, "o-", "curve")
    (line,) = ax.get_lines()
    assert line.get_label() == "curve" and list(line.get_ydata()) == [2.0, 3.0, 2.0]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert min(band) == 1.0 and max(band) == 5.0
    with pytest.raises(ValueError, match="seeds, 3"):
        plot_seed_band(ax, [0, 1, 2], values[:, :2], "o-", "curve")
    plt.close(fig)
