"""lecture_lib.data.seq2seq_tasks: the content-hash split keeps test strings out of every training batch."""

from itertools import product

import pytest
import torch

from lecture_lib.data.seq2seq_tasks import ReversalTask, content_hash
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
    test_strings = {s for n in (2, 3) for s in product(range(NUM_SPECIAL, NUM_SPECIAL + 4), repeat=n)
                    if content_hash(list(s)) % task.test_every == 0}
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
