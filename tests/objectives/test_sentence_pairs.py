"""lecture_lib.objectives.sentence_pairs against Hugging Face tokenizers (pair encoding, longest-first truncation) and
against the provenance of every token in synthetic documents."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models

from lecture_lib.objectives.sentence_pairs import (
    IN_ORDER,
    IS_NEXT,
    NOT_NEXT,
    SWAPPED,
    collate_pairs,
    make_order_pairs,
    make_pairs,
    truncate_pair,
)


def word_level(n=200) -> Tokenizer:
    return Tokenizer(models.WordLevel({str(i): i for i in range(n)}, unk_token="0"))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(2, 60))
def test_truncation_matches_transformers_longest_first(len_a, len_b, budget):
    from types import SimpleNamespace

    from transformers.tokenization_python import PythonBackend

    a, b = list(range(1, len_a + 1)), list(range(100, 100 + len_b))
    tokenizer = SimpleNamespace(truncation_side="right")  # the only attribute the method reads
    remove = max(0, len_a + len_b - budget)
    expected_a, expected_b, _ = PythonBackend.truncate_sequences(
        tokenizer, a, b, num_tokens_to_remove=remove, truncation_strategy="longest_first"
    )
    assert truncate_pair(a, b, budget) == (expected_a, expected_b)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(2, 60))
def test_truncation_amounts_match_tokenizers_up_to_the_tie_break(len_a, len_b, budget):
    """The Rust tokenizers agree on how much goes, except that a tie trims A there and B here (and in BERT)."""
    a, b = list(range(1, len_a + 1)), list(range(100, 100 + len_b))
    tokenizer = word_level()
    tokenizer.enable_truncation(max_length=budget, strategy="longest_first")
    encoding = tokenizer.encode([str(t) for t in a], [str(t) for t in b], is_pretokenized=True)
    kept = sorted([encoding.sequence_ids.count(0), encoding.sequence_ids.count(1)])
    ours = truncate_pair(a, b, budget)
    assert sorted(map(len, ours)) == kept


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(2, 60), st.integers(0, 1000))
def test_random_truncation_keeps_contiguous_slices_of_both_segments(len_a, len_b, budget, seed):
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    ta, tb = truncate_pair(a, b, budget, random.Random(seed))
    assert (len(ta), len(tb)) == tuple(map(len, truncate_pair(a, b, budget)))  # same amounts as longest-first
    assert 1 <= len(ta) and 1 <= len(tb) and len(ta) + len(tb) <= max(budget, 2)
    for kept, original in ((ta, a), (tb, b)):
        start = original.index(kept[0])
        assert kept == original[start : start + len(kept)]


def test_collate_pairs_matches_bert_tokenizer_on_the_real_vocab(minilm):
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast(str(minilm / "vocab.txt"))
    a = tokenizer("my dog is cute", add_special_tokens=False)["input_ids"]
    b = tokenizer("he likes playing", add_special_tokens=False)["input_ids"]
    batch = collate_pairs(
        [make_pair(a, b), make_pair(b, a, random_next=True)],
        length=16,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    reference = tokenizer(
        ["my dog is cute", "he likes playing"],
        ["he likes playing", "my dog is cute"],
        padding="max_length",
        max_length=16,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(batch[key], reference[key]), key
    assert torch.equal(batch["special_tokens_mask"], reference["special_tokens_mask"].bool())
    assert batch["next_sentence_label"].tolist() == [IS_NEXT, NOT_NEXT]


def make_pair(a, b, random_next=False):
    from lecture_lib.objectives.sentence_pairs import SentencePair

    return SentencePair(list(a), list(b), random_next)


def synthetic_documents(n_docs=60, seed=0):
    """Token id = 100000 * document + position in the document, so every token says where it came from."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        position, sentences = 0, []
        for _ in range(rng.randint(3, 12)):
            length = rng.randint(3, 25)
            sentences.append([100000 * d + position + k for k in range(length)])
            position += length
        docs.append(sentences)
    return docs


def test_pairs_come_from_the_right_places():
    docs = synthetic_documents()
    budget = 40
    pairs = make_pairs(docs, budget, seed=1)
    assert len(pairs) > 150
    for pair in pairs:
        a, b = pair.tokens_a, pair.tokens_b
        assert a and b and len(a) + len(b) <= budget
        doc_a = a[0] // 100000
        assert all(t // 100000 == doc_a for t in a) and a == list(range(a[0], a[0] + len(a)))
        assert b == list(range(b[0], b[0] + len(b)))
        if pair.is_random_next:
            assert b[0] // 100000 != doc_a
        else:
            assert b[0] // 100000 == doc_a and b[0] > a[-1]
    random_share = sum(p.is_random_next for p in pairs) / len(pairs)
    assert 0.45 < random_share < 0.55
    assert make_pairs(docs, budget, seed=1) == pairs  # deterministic
    assert make_pairs(docs, budget, seed=2) != pairs


def test_negatives_come_only_from_the_listed_documents():
    docs = synthetic_documents()
    # each document's NotNext may come only from the two documents after it (its "same people")
    sources = [[(d + 1) % len(docs), (d + 2) % len(docs), d] for d in range(len(docs))]
    pairs = make_pairs(docs, 40, seed=1, negative_sources=sources)
    negatives = [p for p in pairs if p.is_random_next]
    assert len(negatives) > 50
    for pair in negatives:
        doc_a, doc_b = pair.tokens_a[0] // 100000, pair.tokens_b[0] // 100000
        assert doc_b in sources[doc_a][:2]
    # every other document listed: the same NotNext/IsNext draws and lengths as the default (only B's source moves)
    everyone = [[j for j in range(len(docs)) if j != d] for d in range(len(docs))]
    listed = make_pairs(docs, 40, seed=1, negative_sources=everyone)
    default = make_pairs(docs, 40, seed=1)
    assert [p.is_random_next for p in listed] == [p.is_random_next for p in default]
    assert [p.tokens_a for p in listed if not p.is_random_next] == [p.tokens_a for p in default if not p.is_random_next]


def test_all_true_next_when_asked():
    docs = synthetic_documents()
    pairs = make_pairs(docs, 200, seed=0, random_next_prob=0.0)
    assert not any(p.is_random_next for p in pairs)
    # with no random B, nothing is put back: every sentence but a lone last one is used exactly once
    used = sorted(t for p in pairs for t in p.tokens_a + p.tokens_b)
    assert len(used) == len(set(used)) and len(used) > 0.8 * sum(len(s) for d in docs for s in d)


def test_order_pairs_are_consecutive_segments_of_one_document_swapped_half_the_time():
    docs = synthetic_documents()
    pairs = make_order_pairs(docs, 40, seed=1)
    n = len(pairs)
    assert n > 100
    for pair in pairs:
        first, second = (pair.tokens_b, pair.tokens_a) if pair.label == SWAPPED else (pair.tokens_a, pair.tokens_b)
        assert first[0] // 100000 == second[0] // 100000  # one document: no topic cue
        assert second[0] > first[-1]  # the first segment (label 0: A) comes first in the document
    # the swap count is Binomial(n, 1/2): standard deviation sqrt(n)/2, and 4 of them fail once in 16,000 seeds
    swapped = sum(p.label == SWAPPED for p in pairs)
    assert abs(swapped - n / 2) < 4 * n**0.5 / 2
    unswapped = [(p.tokens_a, p.tokens_b) for p in make_order_pairs(docs, 40, seed=1, swap_prob=0.0)]
    assert unswapped == [(p.tokens_a, p.tokens_b) for p in make_pairs(docs, 40, seed=1, random_next_prob=0.0)]
    assert make_order_pairs(docs, 40, seed=1) == pairs


def test_order_pairs_collate_under_the_transformers_label_name():
    pairs = make_order_pairs([[[5], [6]], [[7], [8]]], 8, seed=0, swap_prob=1.0)
    batch = collate_pairs(
        pairs, length=6, cls_token_id=2, sep_token_id=3, pad_token_id=0, label_name="sentence_order_label"
    )
    assert batch["input_ids"].tolist() == [[2, 6, 3, 5, 3, 0], [2, 8, 3, 7, 3, 0]]
    assert batch["sentence_order_label"].tolist() == [SWAPPED, SWAPPED] and IN_ORDER == 0


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="at least 2"):
        make_pairs([[[1, 2, 3]]], 10)
    with pytest.raises(ValueError, match="one list of negative sources per document"):
        make_pairs([[[1], [2]], [[3], [4]]], 10, negative_sources=[[1]])
    with pytest.raises(ValueError, match="document 1 has no other non-empty document"):
        make_pairs([[[1], [2]], [[3], [4]], []], 10, negative_sources=[[1], [1, 2], [0]])
    with pytest.raises(ValueError, match="swap_prob in"):
        make_order_pairs([[[1], [2]], [[3], [4]]], 10, swap_prob=2.0)
    with pytest.raises(ValueError, match="max_num_tokens >= 2"):
        truncate_pair([1], [2], 1)
    with pytest.raises(ValueError, match="non-empty"):
        truncate_pair([], [2], 5)
    with pytest.raises(ValueError, match="length=4"):
        collate_pairs([make_pair([1, 2], [3])], length=4, cls_token_id=2, sep_token_id=3, pad_token_id=0)
