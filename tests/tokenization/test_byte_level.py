"""lecture_lib.tokenization.byte_level against Hugging Face `tokenizers`' byte-level BPE, trained on the same text."""

import doctest
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from lecture_lib.data.corpus import split_corpus
from lecture_lib.tokenization import ByteLevelBPE, learn_bpe
from lecture_lib.tokenization.byte_level import (
    bytes_to_unicode,
    to_standin,
    train_merges,
)

VOCAB_SIZE = 256 + 1000


def _hf_byte_level(texts, vocab_size, special_tokens=()):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(special_tokens),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


@pytest.fixture(scope="module")
def trained():
    parts = split_corpus()
    train, test = list(parts["train"]["text"]), list(parts["test"]["text"])
    return ByteLevelBPE().train(train, VOCAB_SIZE), _hf_byte_level(train, VOCAB_SIZE), test


def test_merges_and_ids_identical_to_tokenizers(trained):
    ours, theirs, _ = trained
    hf_merges = json.loads(theirs.to_str())["model"]["merges"]
    hf_merges = [m.split(" ") if isinstance(m, str) else m for m in hf_merges]
    assert [[to_standin(ours.vocab[a]), to_standin(ours.vocab[b])] for a, b in ours.merges] == hf_merges
    assert {to_standin(t): i for i, t in enumerate(ours.vocab)} == theirs.get_vocab()
    assert len(ours) == VOCAB_SIZE


def test_held_out_encodings_identical_to_tokenizers(trained):
    ours, theirs, held_out = trained
    assert [ours.encode(t) for t in held_out] == [e.ids for e in theirs.encode_batch(held_out)]
    assert sum(len(ours.encode(t)) for t in held_out) < 0.4 * sum(len(t.encode()) for t in held_out)


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_decode_encode_round_trip_on_arbitrary_unicode(trained, text):
    ours, theirs, _ = trained
    ids = ours.encode(text)
    assert ours.decode(ids) == text
    assert ids == theirs.encode(text).ids


SPECIAL = ByteLevelBPE().train(
    ["ab ab aab <|endoftext|> abs's"] * 3, 256 + 5 + 2, special_tokens=["<|endoftext|>", "<pad>"]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "b", " ", "\n", "'s", "é", "東", "😀", "<|endoftext|>", "<|", "endoftext", "|>", "<pad>", "<"]
        ),
        max_size=20,
    ).map("".join)
)
def test_special_tokens_are_single_tokens_and_round_trip(text):
    ids = SPECIAL.encode(text)
    assert SPECIAL.decode(ids) == text
    assert ids.count(SPECIAL.special_tokens["<|endoftext|>"]) == text.count("<|endoftext|>")
    assert ids.count(SPECIAL.special_tokens["<pad>"]) == text.count("<pad>")
    assert SPECIAL.special_tokens == {"<|endoftext|>": 256 + 5, "<pad>": 256 + 6} and len(SPECIAL) == 256 + 7


def test_efficient_trainer_equals_recounting_every_merge():
    texts = list(split_corpus()["train"]["text"][100:400])  # 300 docstrings
    counts = ByteLevelBPE().count_words(texts)
    standin_words = {to_standin(w.encode()): n for w, n in counts.items()}
    naive = learn_bpe(standin_words, 120, tie_break="lowest_ids")
    ours = ByteLevelBPE().train(texts, 256 + 120)
    assert [(to_standin(ours.vocab[a]), to_standin(ours.vocab[b])) for a, b in ours.merges] == naive


def test_replays_merges_by_rank_not_longest_match():
    a, b, c = (ByteLevelBPE().encode(ch)[0] for ch in "abc")
    tok = ByteLevelBPE([(a, b), (b, c)])
    assert tok.convert_ids_to_tokens(tok.encode("abc")) == ["ab", "c"]
    tok = ByteLevelBPE([(b, c), (a, b)])
    assert tok.convert_ids_to_tokens(tok.encode("abc")) == ["a", "bc"]


def test_duplicate_merge_reuses_the_token():
    a, b, c = (ByteLevelBPE().encode(ch)[0] for ch in "abc")
    tok = ByteLevelBPE([(a, b), (b, c), (256, c), (a, 257)])  # ab, bc, (ab)c = abc, a(bc) = abc again
    assert len(tok) == 256 + 3 and tok.merges[(a, 257)] == tok.merges[(256, c)] == 258


def test_vocabularies_nest():
    texts = list(split_corpus()["train"]["text"][:300])
    big, small = ByteLevelBPE().train(texts, 256 + 300), ByteLevelBPE().train(texts, 256 + 100)
    assert list(big.truncated(256 + 100).merges) == list(small.merges) and len(big.truncated(256 + 100)) == 356
    standins = sorted(bytes_to_unicode().values())  # with no merges, each byte is its own token
    assert big.truncated(256).encode("hi ü") == [standins.index(bytes_to_unicode()[b]) for b in "hi ü".encode()]


def test_save_load_round_trip(trained, tmp_path):
    ours, _, held_out = trained
    ours.save(tmp_path / "bpe.json")
    loaded = ByteLevelBPE.load(tmp_path / "bpe.json")
    assert loaded.merges == ours.merges and loaded.vocab == ours.vocab and loaded.pattern == ours.pattern
    assert [loaded.encode(t) for t in held_out[:50]] == [ours.encode(t) for t in held_out[:50]]
    tok = ByteLevelBPE().train(["a b"], 258, special_tokens=["<s>"])
    tok.save(tmp_path / "special.json")
    assert ByteLevelBPE.load(tmp_path / "special.json").special_tokens == {"<s>": 257}


@pytest.mark.parametrize(
    "content, error, message",
    [
        ("not json", ValueError, "expected a JSON tokenizer file"),
        ('{"format": "other", "version": 1}', ValueError, "expected format"),
        (
            '{"format": "lecture_lib.ByteLevelBPE", "version": 1, "pattern": "x", "special_tokens": []}',
            ValueError,
            "list of 'merges'",
        ),
        (
            '{"format": "lecture_lib.ByteLevelBPE", "version": 1, "pattern": "x", "special_tokens": [],'
            ' "merges": [["a", "b"], ["ab", "zz"]]}',
            ValueError,
            "malformed merge 1",
        ),
    ],
)
def test_malformed_files_raise(tmp_path, content, error, message):
    path = tmp_path / "bpe.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(error, match=message):
        ByteLevelBPE.load(path)


def test_bad_inputs_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        ByteLevelBPE.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r"vocab_size >= 256 \(256 bytes"):
        ByteLevelBPE().train(["text"], 255)
    with pytest.raises(ValueError, match=r"vocab_size >= 257"):
        ByteLevelBPE().train(["text"], 256, special_tokens=["<s>"])
    with pytest.raises(TypeError, match="expected text as str"):
        ByteLevelBPE().encode(b"bytes")
    with pytest.raises(TypeError, match="iterable of str"):
        ByteLevelBPE().train(["ok", 3], 300)
    with pytest.raises(ValueError, match="token id in"):
        ByteLevelBPE().decode([256])
    with pytest.raises(ValueError, match="merge 0 as two ids"):
        ByteLevelBPE([(0, 999)])


def test_train_merges_stops_when_no_pair_is_left():
    assert train_merges({(1, 2): 3, (4,): 2}, 10_000) == [(1, 2)]


def test_docstring_examples():
    import lecture_lib.tokenization.byte_level as module

    assert doctest.testmod(module).failed == 0
