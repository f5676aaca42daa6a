"""lecture_lib.analysis.syntactic_heads: the word alignment against transformers' tokenizer, and scores of
maps built to point along the gold arcs."""

import torch
import transformers

from lecture_lib.analysis.syntactic_heads import (
    align_words,
    head_hits,
    offset_baseline,
    syntactic_heads,
    word_attention,
)
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


def test_align_words_matches_transformers_word_ids(minilm):
    ours = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    theirs = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    for sentence in SyntheticLanguage(0).sentences(20, seed=3):
        ids, words = align_words(ours, sentence.words)
        encoded = theirs(sentence.words, is_split_into_words=True)
        assert ids == encoded["input_ids"]
        assert words == [-1 if w is None else w for w in encoded.word_ids()]


def test_word_attention_sums_to_pieces_and_averages_from_pieces():
    torch.manual_seed(0)
    a = torch.rand(2, 3, 6, 6).softmax(-1)  # (layers, heads, T, T)
    pieces = [-1, 0, 1, 1, 2, -1]
    words = word_attention(a, pieces)
    assert words.shape == (2, 3, 3, 3)
    torch.testing.assert_close(words[..., 1, 1], (a[..., 2, 2] + a[..., 2, 3] + a[..., 3, 2] + a[..., 3, 3]) / 2)
    torch.testing.assert_close(words[..., 0, 2], a[..., 1, 4])


def gold_maps(sentence, layers=2, heads=3):
    """Word maps where head (1, 2) points each word to its gold head (the root to itself), the others uniform."""
    n = len(sentence)
    maps = torch.full((layers, heads, n, n), 1.0 / n)
    maps[1, 2] = 0
    for i, h in enumerate(sentence.heads):
        maps[1, 2, i, h - 1 if h else i] = 1
    return maps


def test_a_head_that_follows_the_tree_scores_one_and_beats_the_offset_baseline():
    sentences = SyntheticLanguage(0).sentences(30, seed=4)
    heads, deprels = [s.heads for s in sentences], [s.deprels for s in sentences]
    maps = [gold_maps(s) for s in sentences]
    hits, total = head_hits(maps, heads, deprels, "nsubj")
    assert hits[0, 1, 2] == total > 0
    rows = {row.relation: row for row in syntactic_heads(maps, heads, deprels, ["det", "nsubj", "missing"])}
    assert rows.keys() == {"det", "nsubj"}
    assert (rows["nsubj"].layer, rows["nsubj"].head, rows["nsubj"].direction) == (1, 2, "dependent->head")
    assert rows["nsubj"].accuracy == 1.0 > rows["nsubj"].baseline
    offsets = [h - 1 - i for s in sentences for i, (h, d) in enumerate(zip(s.heads, s.deprels)) if d == "det"]
    best = max(set(offsets), key=offsets.count)
    assert offset_baseline(heads, deprels, "det") == (best, offsets.count(best) / len(offsets))
