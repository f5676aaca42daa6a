"""lecture_lib.tokenization.bpe: the lecture's worked examples, Sennrich et al.'s reference loop, and `tokenizers`."""

import doctest
import json
import re
from collections import Counter

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import lecture_lib.tokenization.bpe as bpe
from lecture_lib.tokenization.bpe import (
    apply_bpe,
    compress,
    get_stats,
    learn_bpe,
    merge_pair,
)

SLIDES = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


def test_docstring_examples():
    assert doctest.testmod(bpe).failed == 0


def test_compression_worked_example():
    assert compress("aaabdaaabac", 2) == [("ZabdZabac", {"Z": "aa"}), ("ZYdZYac", {"Z": "aa", "Y": "ab"})]


def test_sennrich_dictionary_learns_es_est_lo():
    assert learn_bpe(SLIDES, 3) == [("e", "s"), ("es", "t"), ("l", "o")]
    # each iteration's dictionary, as on the slides
    assert apply_bpe("newest", [("e", "s")]) == ["n", "e", "w", "es", "t"]
    assert apply_bpe("widest", [("e", "s"), ("es", "t")]) == ["w", "i", "d", "est"]
    assert apply_bpe("lower", [("e", "s"), ("es", "t"), ("l", "o")]) == ["lo", "w", "e", "r"]


def _paper_reference(vocab: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Algorithm 1 of Sennrich et al. (2016), on space-separated strings with a regular expression."""
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for word, freq in vocab.items():
            symbols = word.split()
            for i in range(len(symbols) - 1):
                pairs[symbols[i], symbols[i + 1]] += freq
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        pattern = re.compile(r"(?<!\S)" + re.escape(" ".join(best)) + r"(?!\S)")
        vocab = {pattern.sub("".join(best), word): freq for word, freq in vocab.items()}
        merges.append(best)
    return merges


def test_end_of_word_symbol_gives_the_papers_merges():
    expected = [
        ("e", "s"),
        ("es", "t"),
        ("est", "</w>"),
        ("l", "o"),
        ("lo", "w"),
        ("n", "e"),
        ("ne", "w"),
        ("new", "est</w>"),
        ("low", "</w>"),
        ("w", "i"),
    ]
    assert learn_bpe(SLIDES, 10, end_of_word="</w>") == expected
    paper_vocab = {" ".join(w) + " </w>": n for w, n in SLIDES.items()}
    assert _paper_reference(paper_vocab, 10) == expected


def test_matches_the_paper_loop_on_corpus_words():
    text = open(bpe.__file__, encoding="utf-8").read()
    words = Counter(re.findall(r"[A-Za-z]+", text))
    reference = _paper_reference({" ".join(w) + " </w>": n for w, n in words.items()}, 60)
    assert learn_bpe(words, 60, end_of_word="</w>") == reference


def _hf_trained_merges(words: Counter, num_merges: int) -> list[tuple[str, str]]:
    alphabet = sorted({c for w in words for c in w})
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + num_merges, show_progress=False)
    tokenizer.train_from_iterator([" ".join([w] * n) for w, n in words.items()], trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def test_lowest_ids_tie_break_matches_tokenizers_trainer():
    text = open(bpe.__file__, encoding="utf-8").read()
    words = Counter(re.findall(r"[a-z]+", text))
    assert learn_bpe(words, 150, tie_break="lowest_ids") == _hf_trained_merges(words, 150)
    assert learn_bpe(SLIDES, 8, tie_break="lowest_ids") == _hf_trained_merges(Counter(SLIDES), 8)


def test_apply_bpe_replays_merges_like_tokenizers():
    text = open(bpe.__file__, encoding="utf-8").read()
    words = Counter(re.findall(r"[a-z]+", text))
    merges = learn_bpe(words, 200, tie_break="lowest_ids")
    vocab = {s: i for i, s in enumerate(sorted({c for w in words for c in w}))}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    reference = Tokenizer(models.BPE(vocab, merges))
    for word in ["tokenization", "replaying", "merges", "abracadabra", *list(words)[:300]]:
        assert apply_bpe(word, merges) == reference.encode(word, add_special_tokens=False).tokens, word


def test_not_greedy_longest_match():
    assert apply_bpe("abc", [("a", "b"), ("b", "c")]) == ["ab", "c"]
    assert apply_bpe("abc", [("b", "c"), ("a", "b")]) == ["a", "bc"]


def test_pair_helpers():
    assert get_stats("aaab") == Counter({("a", "a"): 2, ("a", "b"): 1})
    assert get_stats(["x", "y"], Counter({("x", "y"): 1}), weight=3)[("x", "y")] == 4
    assert merge_pair([1, 1, 1, 1, 2], (1, 1), 9) == [9, 9, 2]
    assert merge_pair([1, 2, 1, 2], (2, 1), 9) == [1, 9, 2]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="num_merges >= 0"):
        learn_bpe(SLIDES, -1)
    with pytest.raises(ValueError, match="tie_break"):
        learn_bpe(SLIDES, 1, tie_break="random")
    with pytest.raises(TypeError, match="words as str or tuple"):
        learn_bpe({3: 1}, 1)
    with pytest.raises(ValueError, match="unused in the text"):
        compress("aZb", 1)
    with pytest.raises(ValueError, match="at most 2 merges"):
        compress("aaaa", 3, new_symbols="ZY")
