"""lecture_lib.tokenization.tradeoff: each point of the curve against a tokenizer trained at that size by the reference."""

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import BertTokenizer

from lecture_lib.data.corpus import split_corpus
from lecture_lib.tokenization import (
    ByteLevelBPE,
    WordPieceTokenizer,
    bpe_curve,
    tokens_per_word_shares,
    wordpiece_curve,
)


@pytest.fixture(scope="module")
def texts():
    parts = split_corpus()
    return list(parts["train"]["text"][100:700]), list(parts["test"]["text"][:120])


def _hf_bpe_tokens(train, test, vocab_size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(train, trainer)
    return sum(len(e.ids) for e in tokenizer.encode_batch(test))


def test_bpe_curve_points_equal_tokenizers_trained_at_each_size(texts):
    train, test = texts
    tokenizer = ByteLevelBPE().train(train, 256 + 400 + 1, special_tokens=["<|endoftext|>"])
    rows = bpe_curve(tokenizer, test, [256, 400, 656])
    assert rows[0]["tokens"] == sum(len(t.encode("utf-8")) for t in test) and rows[0]["bytes_per_token"] == 1.0
    assert [r["tokens"] for r in rows[1:]] == [_hf_bpe_tokens(train, test, n) for n in (400, 656)]
    words = sum(len(t.split()) for t in test)
    assert all(r["tokens_per_word"] == r["tokens"] / words and r["unknown_rate"] == 0 for r in rows)


def test_wordpiece_curve_points_equal_bert_tokenizer_on_each_prefix(texts):
    train, test = texts
    vocab = WordPieceTokenizer.train(train, 700).id_to_token
    sizes = [250, 400, 700]
    rows = wordpiece_curve(vocab, test, sizes)
    for size, row in zip(sizes, rows):
        reference = BertTokenizer(vocab={t: i for i, t in enumerate(vocab[:size])})
        tokens = [t for e in reference.backend_tokenizer.encode_batch(test, add_special_tokens=False) for t in e.tokens]
        assert row["tokens"] == len(tokens)
        assert row["unknown_rate"] == tokens.count("[UNK]") / len(tokens)
    assert rows[0]["tokens"] > rows[1]["tokens"] > rows[2]["tokens"]


def test_sizes_beyond_the_vocabulary_raise(texts):
    train, test = texts
    tokenizer = ByteLevelBPE().train(train[:20], 300)
    with pytest.raises(ValueError, match="up to the tokenizer's 300"):
        bpe_curve(tokenizer, test, [256, 301])
    with pytest.raises(ValueError, match="up to 5"):
        wordpiece_curve(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], test, [6])


def test_tokens_per_word_shares_count_each_word_as_encoded_at_each_size(texts):
    train, test = texts
    tokenizer = ByteLevelBPE().train(train, 256 + 300 + 1, special_tokens=["<|endoftext|>"])
    words = [w for t in test for w in t.split()]
    shares = tokens_per_word_shares(tokenizer, words, [256, 556], longest=4)
    assert shares[256][0] == sum(len(w.encode("utf-8")) == 1 for w in words) / len(words)  # bytes only
    small = tokenizer.truncated(556 + 1)
    lengths = [min(len(small.encode(w)), 4) for w in words]
    assert shares[556] == [lengths.count(k) / len(words) for k in (1, 2, 3, 4)]
    with pytest.raises(ValueError, match="up to the tokenizer's 556"):
        tokens_per_word_shares(tokenizer, words, [557])
    with pytest.raises(ValueError, match="non-empty words"):
        tokens_per_word_shares(tokenizer, ["a", ""], [256])
