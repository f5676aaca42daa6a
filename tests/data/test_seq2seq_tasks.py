"""lecture_lib.data.seq2seq_tasks: the content-hash split keeps test strings out of every training batch."""

from itertools import product

import pytest
import torch

from lecture_lib.data.seq2seq_tasks import (
    PLURAL_SUFFIX,
    ReversalTask,
    TranslationTask,
    content_hash,
    head_final,
    head_final_alignment,
)
from lecture_lib.data.toy import BOS, EOS, NUM_SPECIAL, PAD


def _strings(batch):
    return [tuple(row[:n].tolist()) for row, n in zip(batch.src, batch.src_lengths.tolist())]


def test_content_hash_is_the_polynomial_hash():
    tokens = [7, 3, 12, 5, 9]
    expected = sum(t * pow(31, i, 1_000_003) for i, t in enumerate(tokens)) % 1_000_003
    assert content_hash(tokens) == expected
    assert content_hash([3, 4]) == 3 + 4 * 31


def test_training_batches_never_hold_test_strings():
    task = ReversalTask(num_symbols=4, min_len=2, max_len=3)  # few strings, so collisions would show
    test_strings = {
        s
        for n in (2, 3)
        for s in product(range(NUM_SPECIAL, NUM_SPECIAL + 4), repeat=n)
        if content_hash(list(s)) % task.test_every == 0
    }
    assert 0 < len(test_strings) < 20  # about one in ten of the 80 strings
    seen_in_training = {s for step in range(50) for s in _strings(task.train_batch(32, step))}
    assert seen_in_training.isdisjoint(test_strings)
    assert set(_strings(task.test_batch(200))) <= test_strings


def test_split_fraction_and_batches():
    task = ReversalTask(num_symbols=10, min_len=3, max_len=3)
    share = sum(task.is_test(list(s)) for s in product(range(3, 13), repeat=3)) / 1000
    assert 0.07 < share < 0.13
    batch = task.train_batch(16, step=5, seed=2)
    again, other = task.train_batch(16, step=5, seed=2), task.train_batch(16, step=6, seed=2)
    assert torch.equal(batch.src, again.src) and not torch.equal(batch.src, other.src)
    for src, n, tgt_in, tgt_out in zip(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out):
        assert tgt_in[0] == BOS and tgt_out[n] == EOS
        assert tgt_out[:n].tolist() == src[:n].flip(0).tolist()
        assert src[n:].eq(PAD).all()


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="1 <= min_len <= max_len, got 5 and 3"):
        ReversalTask(min_len=5, max_len=3)
    with pytest.raises(ValueError, match="test_every >= 2"):
        ReversalTask(test_every=1)


@pytest.fixture(scope="module")
def translation():
    return TranslationTask(train_pool_size=300)


def test_translation_moves_every_source_word_once_and_adds_only_particles(translation):
    for sentence, target in translation.test_pairs(300):
        alignment = head_final_alignment(sentence)
        assert len(alignment) == len(target)
        assert sorted(i for i in alignment if i >= 0) == list(range(len(sentence)))  # a permutation of the source
        for word, i in zip(target, alignment):
            if i < 0:
                assert word in ("ga", "o")
            else:  # the source word itself, an adjective maybe marked plural
                assert word in (sentence.words[i], sentence.words[i] + PLURAL_SUFFIX)
        assert target[-1] == "." and sentence.words[-1] == "."


def test_translation_rules_on_the_tree(translation):
    for sentence, target in translation.test_pairs(300):
        alignment = head_final_alignment(sentence)
        where = {i: t for t, i in enumerate(alignment) if i >= 0}
        root = sentence.heads.index(0)
        for i, (head, deprel) in enumerate(zip(sentence.heads, sentence.deprels)):
            if head == 0 or deprel == "punct":
                continue
            follows = deprel in ("case", "cop", "aux", "advmod")
            assert (where[i] > where[head - 1]) == follows, (sentence.text, i)
            if deprel in ("nsubj", "obj") and sentence.pos[i] == "NOUN":  # the phrase ends in its particle
                assert "ga o".split()[deprel == "obj"] in target[where[i] + 1 :]
            if deprel == "amod":
                assert target[where[i]].endswith(PLURAL_SUFFIX) == (sentence.number[head - 1] == "Plur")
        # the root (verb or predicate) ends the sentence; only its copula, auxiliary, "not" and "." follow
        assert set(target[where[root] + 1 :]) <= {"is", "are", "does", "do", "not", "."}


def test_translation_alignments_cross(translation):
    crossing = [
        any(a > b for a, b in zip(al, al[1:]) if a >= 0 and b >= 0)
        for al in (head_final_alignment(s) for s, _ in translation.test_pairs(300))
    ]
    assert sum(crossing) / len(crossing) > 0.5


def test_translation_split_vocabulary_and_batches(translation):
    test_sources = {tuple(translation.encode(s.words).tolist()) for s, _ in translation.test_pairs(200)}
    for src, _ in translation.train_pool:
        assert content_hash(src.tolist()) % translation.test_every != 0
        assert tuple(src.tolist()) not in test_sources
    assert all(content_hash(list(ids)) % translation.test_every == 0 for ids in test_sources)
    batch = translation.train_batch(8, step=3)
    torch.testing.assert_close(batch.src, translation.train_batch(8, step=3).src)  # the same batch every time
    assert (batch.tgt_in[:, 0] == BOS).all()
    assert translation.decode(batch.src[0].tolist()) == translation.decode(
        translation.encode(translation.decode(batch.src[0].tolist())).tolist()
    )
    assert int(batch.src.max()) < translation.vocab_size
    with pytest.raises(ValueError, match="vocabulary"):
        translation.encode(["the", "Oslo"])
    with pytest.raises(ValueError, match="max_words"):
        TranslationTask(max_words=2)


def test_translation_words_are_plain_words_in_order():
    lang_sentence = TranslationTask(train_pool_size=1).test_pairs(1)[0][0]
    assert " ".join(head_final(lang_sentence)).count(" ") == len(head_final(lang_sentence)) - 1
