"""lecture_lib.plots.tokenization_figures: the merge tree's nodes and edges, and the vocabulary curve's data and axes."""

import matplotlib.pyplot as plt
import pytest

from lecture_lib.plots.tokenization_figures import plot_merge_tree, plot_vocabulary_curve
from lecture_lib.tokenization import learn_bpe


@pytest.fixture
def ax():
    plt.switch_backend("Agg")  # draw off-screen
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_merge_tree_draws_each_piece_at_the_rank_of_its_merge(ax):
    merges = learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10, end_of_word="</w>")
    assert plot_merge_tree(ax, "lowest", merges, end_of_word="</w>") is ax
    nodes = {(t.get_text(), t.get_position()[1]) for t in ax.texts}
    rank = {pair: i + 1 for i, pair in enumerate(merges)}
    assert nodes == {("l", 0), ("o", 0), ("w", 0), ("e", 0), ("s", 0), ("t", 0), ("</w>", 0),
                     ("es", rank[("e", "s")]), ("est", rank[("es", "t")]), ("est</w>", rank[("est", "</w>")]),
                     ("lo", rank[("l", "o")]), ("low", rank[("lo", "w")])}
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
