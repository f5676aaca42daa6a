"""lecture_lib.tokenization.wordpiece against transformers' BertTokenizer on the real bert-base-uncased vocabulary."""

import doctest
import itertools
import math
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from tokenizers import decoders
from transformers import BertTokenizer

from lecture_lib.data.corpus import corpus_texts, split_corpus
from lecture_lib.data.minilm import bert_uncased_vocab_file
from lecture_lib.tokenization.wordpiece import (
    SPECIAL_TOKENS,
    WordPieceTokenizer,
    basic_tokenize,
    count_words,
    frame_ids,
    learn_wordpiece,
    likelihood_gain,
    longest_match_first,
)


@pytest.fixture(scope="module")
def bert_vocab_file(minilm) -> Path:
    """bert-base-uncased's vocab.txt, as the package finds it (shipped by the optional MiniLM package)."""
    return bert_uncased_vocab_file()


def _reference(vocab_file, lowercase=True) -> BertTokenizer:
    tokens = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return BertTokenizer(vocab={t: i for i, t in enumerate(tokens)}, do_lower_case=lowercase)


@pytest.fixture(scope="module")
def bert(bert_vocab_file):
    return WordPieceTokenizer.from_vocab_file(bert_vocab_file), _reference(bert_vocab_file)


def _theirs(reference, texts):
    return [e.tokens for e in reference.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]


HARD_CASES = [
    "",
    " ",
    "   \t\n  ",
    "\u3000\u00a0\u2028\u2029",
    "Héllo Wörld! Ça va? naïve café résumé Ångström ÉCOLE",
    "İstanbul ΟΔΟΣ Straße ﬁne Ǆemal ǅ ½ ² ⅷ",
    "東京は日本の首都です。北京 서울 ひらがな カタカナ 𠀋𪚲",
    "emoji 😀👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✓",
    "ctrl\x00\x01\x07\x0b\x0c\x1b\x7f\x85\u200b\u200d\ufeff\ufffd|end",
    "a" * 100,
    "b" * 101,
    "x" * 250 + " tail",
    "supercalifragilisticexpialidocious" * 4,
    "!!!???...,,,;;;:::---___***",
    "(((nested)))[[brackets]]{{braces}}",
    "<<>>==++$$^^``~~||",
    "don't can't won't it's",
    "e-mail foo_bar foo.bar foo/bar 3.14 1,000,000 -42 +7",
    "[CLS] [SEP] [MASK] [PAD] [UNK] x[MASK]y [mask] [CLS[SEP]]",
    "ﾊﾝｶｸ　ｶﾀｶﾅ ＡＢＣ １２３",
    "a\u0301 e\u0308 o\u0302\u0323",
    "mixed\tTABS\r\nand\rCR",
    "unaffable unbelievably antidisestablishmentarianism",
]


def test_every_line_of_the_corpus_matches_bert_tokenizer(bert):
    ours, reference = bert
    lines = [line for text in corpus_texts() for line in text.splitlines()]
    assert len(lines) > 20_000
    mismatches = [
        (line, mine, theirs)
        for line, mine, theirs in zip(lines, map(ours.tokenize, lines), _theirs(reference, lines))
        if mine != theirs
    ]
    assert mismatches == []


def test_hard_cases_match_bert_tokenizer(bert):
    ours, reference = bert
    for text, theirs in zip(HARD_CASES, _theirs(reference, HARD_CASES)):
        assert ours.tokenize(text) == theirs, text
    assert ours.tokenize("b" * 101) == ["[UNK]"] and ours.tokenize("") == [] and ours.tokenize(" \t ") == []


def test_every_long_standing_character_matches_bert_tokenizer(bert):
    # every code point assigned in Unicode 3.2 whose category has not changed since, between two letters;
    # characters newer than the reference's Unicode tables are the documented difference
    ours, reference = bert
    old = unicodedata.ucd_3_2_0
    chars = [
        chr(c)
        for c in range(0x30000)
        if not 0xD800 <= c < 0xE000
        and old.category(chr(c)) != "Cn"
        and old.category(chr(c)) == unicodedata.category(chr(c))
    ]
    assert len(chars) > 90_000
    texts = [" ".join(f"a{c}b" for c in chars[i : i + 64]) for i in range(0, len(chars), 64)]
    for text, theirs in zip(texts, _theirs(reference, texts)):
        assert ours.tokenize(text) == theirs, ascii(text[:80])


def test_cased_vocabulary_keeps_case_and_accents(bert_vocab_file):
    vocab_file = bert_vocab_file
    ours = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=False)
    reference = _reference(vocab_file, lowercase=False)
    assert [ours.tokenize(t) for t in HARD_CASES] == _theirs(reference, HARD_CASES)


@pytest.mark.parametrize(
    "a, b",
    [
        ("my dog is cute", "he likes playing"),
        ("The [MASK] sat.", None),
        ("x", "y"),
        ("", None),
        ("", ""),
        ("one two three", ""),
    ],
)
def test_frame_matches_bert_tokenizer_for_single_texts_and_pairs(bert, bert_vocab_file, a, b):
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    # transformers 5 keeps the three framing methods on the Python tokenizer only.
    ours, reference = bert[0], BertTokenizerLegacy(str(bert_vocab_file))
    ids_a = reference.encode(a, add_special_tokens=False)
    ids_b = None if b is None else reference.encode(b, add_special_tokens=False)
    input_ids, token_type_ids, special_tokens_mask = ours.frame(ids_a, ids_b)
    assert input_ids == reference.build_inputs_with_special_tokens(ids_a, ids_b)
    assert token_type_ids == reference.create_token_type_ids_from_sequences(ids_a, ids_b)
    assert special_tokens_mask == reference.get_special_tokens_mask(ids_a, ids_b)
    assert frame_ids(ids_a, ids_b, cls_token_id=101, sep_token_id=102) == (
        input_ids,
        token_type_ids,
        special_tokens_mask,
    )


def test_ids_pairs_and_special_tokens_match_bert_tokenizer(bert):
    ours, reference = bert
    a, b = "The [MASK] sat on the mat.", "It was ﬂuffy!"
    assert ours.encode(a) == reference.encode(a, add_special_tokens=False)
    assert ours.encode(a, add_special_tokens=True) == reference.encode(a)
    assert ours.encode(a, b, add_special_tokens=True) == reference.encode(a, b)
    assert ours.encode(a, b) == reference.encode(a, b, add_special_tokens=False)
    input_ids, token_type_ids, _ = ours.frame(ours.encode(a), ours.encode(b))
    expected = reference(a, b)
    assert (input_ids, token_type_ids) == (expected["input_ids"], expected["token_type_ids"])
    assert (
        [ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id]
        == [
            reference.pad_token_id,
            reference.unk_token_id,
            reference.cls_token_id,
            reference.sep_token_id,
            reference.mask_token_id,
        ]
        == [0, 100, 101, 102, 103]
    )
    assert ours.vocab_size == len(ours) == reference.vocab_size == 30522
    assert ours.convert_ids_to_tokens([101, 7592, 102]) == reference.convert_ids_to_tokens([101, 7592, 102])


def test_decode_matches_the_wordpiece_decoder(bert):
    ours, _ = bert
    decoder = decoders.WordPiece(prefix="##", cleanup=False)
    for text in [*HARD_CASES, *corpus_texts()[:200]]:
        ids = ours.encode(text, add_special_tokens=True)
        assert ours.decode(ids) == decoder.decode(ours.convert_ids_to_tokens(ids))
    assert (
        ours.decode(ours.encode("Tokenization, undone!", add_special_tokens=True), skip_special_tokens=True)
        == "tokenization , undone !"
    )


def test_greedy_longest_match_first_has_no_backtracking():
    vocab = {"un", "una", "##aff", "##able", "##ffable"}
    assert longest_match_first("unaffable", vocab) == ["una", "##ffable"]
    assert longest_match_first("unaffable", vocab - {"##ffable"}) == ["[UNK]"], "'una' leaves 'ffable' uncovered"
    assert longest_match_first("unaffable", vocab - {"una"}) == ["un", "##aff", "##able"]
    assert longest_match_first("x" * 101, {"x", "##x"}) == ["[UNK]"]
    assert longest_match_first("x" * 100, {"x" * 100}) == ["x" * 100]


def test_basic_tokenizer_steps():
    assert basic_tokenize("Héllo,WORLD!! 東京") == ["hello", ",", "world", "!", "!", "東", "京"]
    assert basic_tokenize("Héllo", lowercase=False) == ["Héllo"]
    assert basic_tokenize("$5+x<y^z`") == ["$", "5", "+", "x", "<", "y", "^", "z", "`"]


def test_save_and_load_round_trip(bert, bert_vocab_file, tmp_path):
    ours, _ = bert
    ours.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_bytes() == bert_vocab_file.read_bytes()
    again = WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    assert again.id_to_token == ours.id_to_token


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "at least one token"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n".encode(), r"missing \['\[MASK\]'\]"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n".encode(), "duplicates"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n\nthe\n".encode(), "non-empty tokens"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe cat\n".encode(), "without spaces"),
        (b"[PAD]\n[UNK]\n\xff\xfe\n", "UTF-8"),
    ],
)
def test_malformed_vocabulary_files_raise(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        WordPieceTokenizer.from_vocab_file(path)


def test_bad_inputs_raise(bert, tmp_path):
    ours, _ = bert
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "missing.txt")
    for bad in (None, 3, b"bytes", ["a list"]):
        with pytest.raises(TypeError, match="expected text as str"):
            ours.tokenize(bad)
    with pytest.raises(ValueError, match=r"expected token ids in \[0, 30522\)"):
        ours.decode([5, 30522])
    with pytest.raises(ValueError, match="expected vocab_size >="):
        learn_wordpiece({"abc": 3}, 8)


# ---------------------------------------------------------------- training


def _unigram_log_likelihood(segmented: dict[tuple[str, ...], int]) -> float:
    counts = Counter()
    for units, freq in segmented.items():
        for unit in units:
            counts[unit] += freq
    total = sum(counts.values())
    return sum(n * math.log(n / total) for n in counts.values())


def _resegment(segmented, a, b):
    merged = a + b[2:]
    out = {}
    for units, freq in segmented.items():
        new, i = [], 0
        while i < len(units):
            if i + 1 < len(units) and (units[i], units[i + 1]) == (a, b):
                new.append(merged)
                i += 2
            else:
                new.append(units[i])
                i += 1
        out[tuple(new)] = out.get(tuple(new), 0) + freq
    return out


def test_each_merge_is_the_best_by_brute_force_likelihood():
    # the reference re-segments the words for every candidate merge and recounts L from scratch
    words = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5, "aaaa": 3, "aaa": 2, "baa": 6, "gnu": 1}
    vocab = learn_wordpiece(words, 5 + 2 * 8 + 12)
    learned = vocab[5 + 2 * 8 :]
    segmented = {(w[0], *("##" + c for c in w[1:])): n for w, n in words.items()}
    for unit in learned:
        base = _unigram_log_likelihood(segmented)
        gains = {}
        for units in segmented:
            for a, b in zip(units, units[1:]):
                gains[(a, b)] = _unigram_log_likelihood(_resegment(segmented, a, b)) - base
        best = max(gains.values())
        winners = [p for p, g in gains.items() if math.isclose(g, best, rel_tol=1e-9, abs_tol=1e-9)]
        assert any(a + b[2:] == unit for a, b in winners), (unit, winners)
        a, b = next(p for p in winners if p[0] + p[1][2:] == unit)
        segmented = _resegment(segmented, a, b)


def test_likelihood_gain_formula_matches_recounting():
    segmented = {("h", "##u", "##g"): 10, ("p", "##u", "##g"): 5, ("h", "##u", "##g", "##s"): 5}
    base = _unigram_log_likelihood(segmented)
    direct = _unigram_log_likelihood(_resegment(segmented, "##u", "##g")) - base
    assert math.isclose(float(likelihood_gain(20, 20, 20, 0, 65, False)), direct, rel_tol=1e-12)
    direct = _unigram_log_likelihood(_resegment(segmented, "h", "##u")) - base
    assert math.isclose(float(likelihood_gain(15, 15, 20, 0, 65, False)), direct, rel_tol=1e-12)


def test_trained_vocabulary_works_in_bert_tokenizer(tmp_path):
    parts = split_corpus()
    train_texts = list(parts["train"]["text"][:600])
    tokenizer = WordPieceTokenizer.train(train_texts, 1200)
    assert tokenizer.vocab_size == 1200 and tokenizer.id_to_token[:5] == list(SPECIAL_TOKENS)
    tokenizer.save(tmp_path / "vocab.txt")
    loaded = WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    reference = _reference(tmp_path / "vocab.txt")
    held_out = [line for text in parts["test"]["text"] for line in text.splitlines()]
    assert [loaded.tokenize(t) for t in held_out] == _theirs(reference, held_out)
    covered = count_words(train_texts)
    assert not any("[UNK]" in tokenizer.tokenize(w) for w in itertools.islice(covered, 3000) if len(w) <= 100)
    pieces = sum(len(tokenizer.tokenize(t)) for t in train_texts)
    assert pieces < 1.6 * sum(covered.values()), "1,200 learned units should keep most words whole"


def test_docstring_examples():
    import lecture_lib.tokenization.wordpiece as module

    assert doctest.testmod(module).failed == 0


def test_documented_differences_from_the_legacy_python_tokenizer(bert, bert_vocab_file):
    from transformers import BertTokenizerLegacy

    ours, reference = bert
    legacy = BertTokenizerLegacy(vocab_file=str(bert_vocab_file))
    same = [t for t in HARD_CASES if "ΟΔΟΣ" not in t] + corpus_texts()[:40]
    assert [ours.tokenize(t) for t in same] == [legacy.tokenize(t) for t in same]
    for text in ["a\u0378b", "ΟΔΟΣ", "a\U0002b820b"]:  # unassigned, final sigma, CJK extension E start
        assert ours.tokenize(text) == _theirs(reference, [text])[0] != legacy.tokenize(text)
