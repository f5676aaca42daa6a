"""WordPiece as BERT uses it: a basic tokenizer, then greedy longest-match-first with ``##`` pieces.

Tokenizing (Devlin et al. 2019; Wu et al. 2016) runs in two stages:

1. the *basic tokenizer* cleans the text (drops NUL, U+FFFD and control characters, turns every kind of
   white space into a space), puts spaces around CJK ideographs, strips accents (NFD, then drops the
   non-spacing marks) and lower-cases, then splits on white space and isolates every punctuation mark;
2. each word is cut greedily into the *longest* prefix that is in the vocabulary, then the longest
   continuation ``##...`` of the rest, and so on. A word with a piece the vocabulary cannot cover, or
   longer than 100 characters, becomes the single token ``[UNK]``.

Training (:func:`learn_wordpiece`) follows Schuster and Nakajima (2012): start from characters and add,
one at a time, the merge of two units that raises the likelihood of the training words the most under
a unigram language model over units, where BPE adds the most *frequent* pair.

The rules match Hugging Face's ``BertTokenizer`` (its ``tokenizers`` backend), including three details
that ``transformers``' original Python tokenizer (``BertTokenizerLegacy``) does differently: unassigned code
points are kept (and become ``[UNK]``) rather than dropped, lower-casing goes one character at a time (a
final capital sigma becomes σ, not ς), and U+2B820-U+2B91F are not treated as CJK ideographs.
Special tokens (``[CLS]``, ``[MASK]``...) written in the text are kept whole, as in ``transformers``.
Character classes come from Python's ``unicodedata``, whose Unicode version is newer than the reference's
tables: about 500 code points added in recent versions (new punctuation, marks, format characters) are
classified differently. Every character whose category has not changed since Unicode 3.2 agrees (tested).

Taught in: 03_tokenization ("WordPiece, BERT's tokenizer", "Training WordPiece by likelihood").
"""

from __future__ import annotations

import functools
import numbers
import os
import re
import unicodedata
from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch

from lecture_lib.cache import atomic_write
from lecture_lib.tokenization.bpe import merge_pair

# Token strings (the ids depend on the vocabulary; lecture_lib.data.toy's PAD, BOS, EOS are ids of another vocabulary).
PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)
PREFIX = "##"
MAX_INPUT_CHARS_PER_WORD = 100

# ---------------------------------------------------------------- the basic tokenizer


def is_control(char: str) -> bool:
    """Control, format, surrogate and private-use characters, except tab, newline and CR.

    Unassigned code points (Cn) are kept, as the reference does; they end up as ``[UNK]``.
    """
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co")


def is_whitespace(char: str) -> bool:
    """Unicode white space (tab, newline, CR, the Zs spaces, U+2028, U+2029...)."""
    return char.isspace()


def is_punctuation(char: str) -> bool:
    """Unicode punctuation (categories P*) and every ASCII symbol that is not a letter, digit or space.

    ``$``, ``+``, ``<``, ``^`` and backquote are symbols in Unicode, but BERT splits them like punctuation.
    """
    return (char.isascii() and not char.isalnum() and char.isprintable() and char != " ") or unicodedata.category(
        char
    ).startswith("P")


def is_cjk(char: str) -> bool:
    """A CJK Unified Ideograph (BERT's "Chinese character": Hanzi, Kanji, Hanja; not kana or Hangul).

    The blocks are BERT's, except that extension E starts at U+2B920 instead of U+2B820, as in the
    reference (``tokenizers``' BertNormalizer).
    """
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B920 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


@functools.lru_cache(maxsize=None)
def _clean_char(char: str) -> str:
    if char in ("\x00", "\ufffd") or is_control(char):
        return ""
    if is_whitespace(char):
        return " "
    return f" {char} " if is_cjk(char) else char


_ASCII_CLEAN = {i: (" " if chr(i) in "\t\n\r" else None) for i in range(32)} | {127: None}  # VT, FF: control


def _lower_each(text: str) -> str:
    """Lower-case character by character (Python's ``str.lower`` would turn a word-final Σ into ς)."""
    return "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()


def normalize(text: str, lowercase: bool = True, strip_accents: bool | None = None) -> str:
    """BERT's normalizer: clean, space out CJK ideographs, strip accents, lower-case (in that order).

    ``strip_accents=None`` follows ``lowercase``, as in the uncased BERT models.

    >>> normalize("Héllo\\tWÖRLD\\x00 東京")
    'hello world  東  京 '

    Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
    """
    if not isinstance(text, str):
        raise TypeError(f"expected text as str, got {type(text).__name__}")
    if text.isascii():  # fast path: no accents, ideographs or exotic spaces
        text = text.translate(_ASCII_CLEAN)
        return text.lower() if lowercase else text
    text = "".join(map(_clean_char, text))
    strip = lowercase if strip_accents is None else strip_accents
    if strip:
        text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return _lower_each(text) if lowercase else text


def split_on_punctuation(word: str) -> list[str]:
    """``"don't!"`` -> ``["don", "'", "t", "!"]``: every punctuation mark becomes its own word."""
    if word.isalnum():
        return [word]
    pieces: list[str] = []
    start = 0
    for i, char in enumerate(word):
        if is_punctuation(char):
            if start < i:
                pieces.append(word[start:i])
            pieces.append(char)
            start = i + 1
    if start < len(word):
        pieces.append(word[start:])
    return pieces


def basic_tokenize(text: str, lowercase: bool = True, strip_accents: bool | None = None) -> list[str]:
    """The words BERT's WordPiece stage sees: normalize, split on white space, isolate punctuation.

    >>> basic_tokenize("Hello, WORLD!! naïve 東京")
    ['hello', ',', 'world', '!', '!', 'naive', '東', '京']

    Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
    """
    return [piece for word in normalize(text, lowercase, strip_accents).split() for piece in split_on_punctuation(word)]


# ---------------------------------------------------------------- greedy longest-match-first


def longest_match_first(
    word: str,
    vocab: Mapping[str, int] | set[str],
    unk_token: str = UNK_TOKEN,
    max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
    max_piece_chars: int | None = None,
) -> list[str]:
    """Cut ``word`` into the longest vocabulary prefix, then the longest ``##`` continuations.

    Greedy, not optimal: the first piece is as long as possible even if that leaves a rest the
    vocabulary cannot cover, and then the whole word is ``[UNK]`` (there is no backtracking).
    ``max_piece_chars`` (the longest vocabulary entry) only shortens the search.

    >>> longest_match_first("unaffable", {"un", "##aff", "##able", "una"})
    ['[UNK]']
    >>> longest_match_first("unaffable", {"un", "##aff", "##able"})
    ['un', '##aff', '##able']

    Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
    """
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    longest = len(word) if max_piece_chars is None else max_piece_chars
    pieces = []
    start = 0
    while start < len(word):
        for end in range(min(len(word), start + longest), start, -1):
            piece = word[start:end] if start == 0 else PREFIX + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# ---------------------------------------------------------------- the tokenizer


def read_vocab_file(path: str | os.PathLike) -> list[str]:
    """Tokens of a BERT ``vocab.txt``: one per line, UTF-8, the line number is the id."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no vocabulary file at {os.fspath(path)!r}")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"expected a UTF-8 vocabulary file, {os.fspath(path)!r} is not ({error})") from None
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def frame_ids(
    ids_a: Sequence[int], ids_b: Sequence[int] | None = None, *, cls_token_id: int, sep_token_id: int
) -> tuple[list[int], list[int], list[int]]:
    """BERT's input for one text, ``[CLS] A [SEP]``, or a pair, ``[CLS] A [SEP] B [SEP]``: returns
    ``(input_ids, token_type_ids, special_tokens_mask)``, three lists of the same length.

    ``token_type_ids`` is the segment: 0 up to and including the first ``[SEP]``, then 1.
    ``special_tokens_mask`` is 1 on the added ``[CLS]`` and ``[SEP]`` (never masked for MLM), else 0.
    With ``[CLS]`` = 2 and ``[SEP]`` = 3::

        input_ids            2  7  8  3  9  3
        token_type_ids       0  0  0  0  1  1
        special_tokens_mask  1  0  0  1  0  1

    >>> frame_ids([7, 8], [9], cls_token_id=2, sep_token_id=3)
    ([2, 7, 8, 3, 9, 3], [0, 0, 0, 0, 1, 1], [1, 0, 0, 1, 0, 1])
    >>> frame_ids([7, 8], cls_token_id=2, sep_token_id=3)
    ([2, 7, 8, 3], [0, 0, 0, 0], [1, 0, 0, 1])

    Taught in: 04_bert_pretraining ("The input: three embeddings").
    """
    input_ids = [cls_token_id, *ids_a, sep_token_id]
    token_type_ids = [0] * len(input_ids)
    special_tokens_mask = [1, *[0] * len(ids_a), 1]
    if ids_b is not None:
        input_ids += [*ids_b, sep_token_id]
        token_type_ids += [1] * (len(ids_b) + 1)
        special_tokens_mask += [*[0] * len(ids_b), 1]
    return input_ids, token_type_ids, special_tokens_mask


def pad_ids(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    """Rows of ids (lists or 1-D tensors) of different lengths, right-padded with ``value`` to the longest: one
    (N, T) int64 tensor, the batch a model reads (``value`` the ``[PAD]`` id, 0 for an attention mask or
    token types, ``IGNORE_INDEX`` for labels).

    >>> pad_ids([[5, 6, 7], [8]], 0)
    tensor([[5, 6, 7],
            [8, 0, 0]])
    """
    out = torch.full((len(rows), max(map(len, rows))), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row)
    return out


class WordPieceTokenizer:
    """BERT's tokenizer: :func:`basic_tokenize`, then :func:`longest_match_first` on each word.

    ``vocab`` lists the tokens in id order and must hold ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]`` and
    ``[MASK]``. Nothing is added to an encoding unless asked (``add_special_tokens=True`` gives BERT's
    ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``).

    Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
    """

    def __init__(
        self,
        vocab: Sequence[str],
        lowercase: bool = True,
        strip_accents: bool | None = None,
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
    ) -> None:
        tokens = list(vocab)
        bad = [(i, t) for i, t in enumerate(tokens) if not isinstance(t, str) or not t or t != t.strip() or " " in t]
        if bad:
            i, token = bad[0]
            raise ValueError(f"expected non-empty tokens without spaces, got {token!r} at id {i}")
        duplicates = [t for t, n in Counter(tokens).items() if n > 1]
        if duplicates:
            raise ValueError(f"expected each token once in the vocabulary, got duplicates {duplicates[:5]}")
        missing = [t for t in SPECIAL_TOKENS if t not in tokens]
        if missing:
            raise ValueError(f"expected the special tokens {list(SPECIAL_TOKENS)} in the vocabulary, missing {missing}")
        self.id_to_token: list[str] = tokens
        self.vocab: dict[str, int] = {t: i for i, t in enumerate(tokens)}
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.max_input_chars_per_word = max_input_chars_per_word
        self._max_piece_chars = max(len(t[len(PREFIX) :]) if t.startswith(PREFIX) else len(t) for t in tokens)
        self._special_pattern = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike, lowercase: bool = True, **kwargs) -> "WordPieceTokenizer":
        """Load a BERT ``vocab.txt`` (one token per line); ``lowercase=False`` for cased models.

        Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
        """
        tokens = read_vocab_file(path)
        if not tokens:
            raise ValueError(f"expected at least one token in the vocabulary file {os.fspath(path)!r}, got none")
        try:
            return cls(tokens, lowercase=lowercase, **kwargs)
        except ValueError as error:
            raise ValueError(f"malformed vocabulary file {os.fspath(path)!r}: {error}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the vocabulary as a BERT ``vocab.txt`` (atomically: the file is whole or as it was)."""
        atomic_write(path, "".join(t + "\n" for t in self.id_to_token))

    # ------------------------------------------------------------ vocabulary access

    def __len__(self) -> int:
        return len(self.id_to_token)

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    pad_token_id = property(lambda self: self.vocab[PAD_TOKEN])
    unk_token_id = property(lambda self: self.vocab[UNK_TOKEN])
    cls_token_id = property(lambda self: self.vocab[CLS_TOKEN])
    sep_token_id = property(lambda self: self.vocab[SEP_TOKEN])
    mask_token_id = property(lambda self: self.vocab[MASK_TOKEN])

    @property
    def special_token_ids(self) -> list[int]:
        """Ids of ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``, in that order."""
        return [self.vocab[t] for t in SPECIAL_TOKENS]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; a token outside the vocabulary maps to ``[UNK]``'s id."""
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        tokens = []
        for i in ids:
            if not isinstance(i, numbers.Integral) or not 0 <= i < len(self.id_to_token):
                raise ValueError(f"expected token ids in [0, {len(self.id_to_token)}), got {i!r}")
            tokens.append(self.id_to_token[i])
        return tokens

    # ------------------------------------------------------------ tokenizing

    def _wordpiece(self, word: str) -> list[str]:
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = longest_match_first(
                word, self.vocab, UNK_TOKEN, self.max_input_chars_per_word, self._max_piece_chars
            )
            if len(self._cache) < 1_000_000:
                self._cache[word] = pieces
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of ``text``, without special tokens (those written in the text are kept).

        >>> tok = WordPieceTokenizer([*SPECIAL_TOKENS, "the", "cat", "##s", "sat", "!"])
        >>> tok.tokenize("The cats [MASK] sat!")
        ['the', 'cat', '##s', '[MASK]', 'sat', '!']

        Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
        """
        if not isinstance(text, str):
            raise TypeError(f"expected text as str, got {type(text).__name__}")
        tokens: list[str] = []
        for i, chunk in enumerate(self._special_pattern.split(text)):
            if i % 2:  # a special token written in the text
                tokens.append(chunk)
                continue
            for word in basic_tokenize(chunk, self.lowercase, self.strip_accents):
                tokens.extend(self._wordpiece(word))
        return tokens

    def encode(self, text: str, pair: str | None = None, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text`` (and ``pair``); with ``add_special_tokens``, framed as BERT's input.

        Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
        """
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None if pair is None else self.convert_tokens_to_ids(self.tokenize(pair))
        if add_special_tokens:
            return self.frame(ids_a, ids_b)[0]
        return ids_a + (ids_b or [])

    def frame(self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None) -> tuple[list[int], list[int], list[int]]:
        """:func:`frame_ids` with this vocabulary's ``[CLS]`` and ``[SEP]``.

        >>> WordPieceTokenizer([*SPECIAL_TOKENS]).frame([7, 8], [9])
        ([2, 7, 8, 3, 9, 3], [0, 0, 0, 0, 1, 1], [1, 0, 0, 1, 0, 1])

        Taught in: 04_bert_pretraining ("The input: three embeddings").
        """
        return frame_ids(ids_a, ids_b, cls_token_id=self.cls_token_id, sep_token_id=self.sep_token_id)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Tokens joined by spaces, each ``##`` continuation glued to the piece before it.

        The result is the normalized text, words separated by single spaces (``"Hello, World"`` ->
        ``"hello , world"``): lower-casing and accents are not undone.
        """
        special = set(SPECIAL_TOKENS) if skip_special_tokens else set()
        words: list[str] = []
        for token in self.convert_ids_to_tokens(ids):
            if token in special:
                continue
            if words and token.startswith(PREFIX):
                words[-1] += token[len(PREFIX) :]
            else:
                words.append(token)
        return " ".join(words)

    # ------------------------------------------------------------ training

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, lowercase: bool = True) -> "WordPieceTokenizer":
        """A tokenizer whose vocabulary :func:`learn_wordpiece` learns from ``texts``.

        Taught in: 03_tokenization ("Training WordPiece by likelihood").
        """
        return cls(learn_wordpiece(count_words(texts, lowercase), vocab_size), lowercase=lowercase)


# ---------------------------------------------------------------- training by likelihood


def count_words(texts: Iterable[str], lowercase: bool = True) -> Counter:
    """How often each word of :func:`basic_tokenize` occurs in ``texts``."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(basic_tokenize(text, lowercase))
    return counts


def xlogx(x: np.ndarray) -> np.ndarray:
    """f(x) = x log x, with f(0) = 0."""
    x = np.asarray(x, dtype=np.float64)
    return x * np.log(np.where(x > 0, x, 1.0))


def likelihood_gain(
    pair_count: np.ndarray,
    left_count: np.ndarray,
    right_count: np.ndarray,
    merged_count: np.ndarray,
    total: int,
    same: np.ndarray,
    f: np.ndarray | None = None,
) -> np.ndarray:
    """Change of the unigram log-likelihood when ``m`` occurrences of a pair (a, b) become one unit ab.

    With unit counts n_x and N = Σ n_x, the corpus log-likelihood is L = Σ_x n_x log n_x - N log N.
    Merging m occurrences sets n_a -= m, n_b -= m (n_a -= 2m when a = b), n_ab += m and N -= m, so
    with f(x) = x log x,

        ΔL = f(n_ab + m) - f(n_ab) + f(n_a - m) - f(n_a) + f(n_b - m) - f(n_b) - f(N - m) + f(N).

    The count arguments are integer arrays over candidate pairs (``same`` marks a = b); ``total`` is N.
    ``f``, if given, is the table ``xlogx(arange(N + 1))``, so that ΔL is a few lookups per pair.

    >>> round(float(likelihood_gain(20, 20, 20, 0, 65, False)), 2)  # hug: 10, pug: 5, hugs: 5 -> merge ##u ##g
    40.12

    Taught in: 03_tokenization ("Training WordPiece by likelihood").
    """
    F = xlogx if f is None else f.__getitem__
    m = pair_count
    gain = F(merged_count + m) - F(merged_count) - F(total - m) + F(np.asarray(total))
    gain = gain + F(np.where(same, left_count - 2 * m, left_count - m)) - F(left_count)
    return gain + np.where(same, 0.0, F(right_count - m) - F(right_count))


def pairs_by_association(
    pair_counts: Mapping[tuple[str, str], int], unit_counts: Mapping[str, int]
) -> list[tuple[tuple[str, str], float]]:
    """Pairs (a, b) with the score m / (n_a n_b) often quoted for WordPiece, highest first (ties: larger m).

    The score is at most 1 / max(n_a, n_b): a pair whose two units occur only together scores 1 even if it
    occurs once, where :func:`likelihood_gain` (about m times a log ratio) ranks it by its m.

    >>> pairs_by_association({("t", "##h"): 4, ("q", "##z"): 1}, {"t": 6, "##h": 5, "q": 1, "##z": 1})
    [(('q', '##z'), 1.0), (('t', '##h'), 0.13333333333333333)]

    Exercise 4 of 03_tokenization.
    """
    scores = {pair: m / (unit_counts[pair[0]] * unit_counts[pair[1]]) for pair, m in pair_counts.items()}
    return sorted(scores.items(), key=lambda item: (-item[1], -pair_counts[item[0]]))


def _merge_counts(symbols: Sequence[int]) -> Counter:
    """How many times each adjacent pair would be merged (left to right, so a run a a a holds one a a)."""
    counts: Counter = Counter()
    skip_at = -1
    for i in range(len(symbols) - 1):
        pair = (symbols[i], symbols[i + 1])
        if i == skip_at:
            continue
        counts[pair] += 1
        if pair[0] == pair[1]:
            skip_at = i + 1
    return counts


class _PairTable:
    """Pair counts in growable arrays (scored all at once with NumPy) and the words each pair occurs in.

    ``target[slot]`` is the id of the unit the pair would merge into, or -1 while that unit does not
    exist yet (``a`` + ``##bc`` and ``ab`` + ``##c`` both make ``abc``).
    """

    def __init__(self, units: list[str], unit_id: dict[str, int]) -> None:
        self.units, self.unit_id = units, unit_id
        self.slot: dict[tuple[int, int], int] = {}
        self.left, self.right, self.count, self.target = (np.zeros(1024, dtype=np.int64) for _ in range(4))
        self.words: dict[tuple[int, int], set[int]] = {}
        self.waiting: dict[str, list[int]] = {}  # merged string not in the vocabulary yet -> slots

    def merged(self, pair: tuple[int, int]) -> str:
        return self.units[pair[0]] + self.units[pair[1]][len(PREFIX) :]

    def _new_slot(self, pair: tuple[int, int]) -> int:
        slot = self.slot[pair] = len(self.slot)
        if slot == len(self.count):
            self.left, self.right, self.count, self.target = (
                np.concatenate([a, np.zeros_like(a)]) for a in (self.left, self.right, self.count, self.target)
            )
        self.left[slot], self.right[slot] = pair
        merged = self.merged(pair)
        self.target[slot] = self.unit_id.get(merged, -1)
        if self.target[slot] < 0:
            self.waiting.setdefault(merged, []).append(slot)
        self.words[pair] = set()
        return slot

    def add(self, pair: tuple[int, int], delta: int, word: int, present: bool) -> None:
        """Add ``delta`` to the pair's count; record whether ``word`` still holds the pair."""
        slot = self.slot.get(pair)
        if slot is None:
            slot = self._new_slot(pair)
        self.count[slot] += delta
        (self.words[pair].add if present else self.words[pair].discard)(word)

    def unit_added(self, unit: str, new_id: int) -> None:
        for slot in self.waiting.pop(unit, []):
            self.target[slot] = new_id


def learn_wordpiece(
    word_counts: Mapping[str, int], vocab_size: int, special_tokens: Sequence[str] = SPECIAL_TOKENS
) -> list[str]:
    """A WordPiece vocabulary of ``vocab_size`` tokens, grown by likelihood gain.

    Start: the special tokens, then every character seen (``c``) and its continuation form (``##c``),
    so that every word of the training text can be tokenized. Each word is spelled as its first character
    and ``##`` continuations. Then, until the vocabulary is full (or no two units are adjacent any more),
    add the merge of two adjacent units a, b with the largest :func:`likelihood_gain` (ties: the smallest
    pair of unit ids) and re-spell the words. BPE would take the most frequent pair; the likelihood gain
    also weighs how frequent a and b are on their own, so two common units that often occur apart score
    lower than their joint count alone suggests.

    >>> learn_wordpiece({"hug": 10, "pug": 5, "hugs": 5}, 19)[5:]
    ['g', 'h', 'p', 's', 'u', '##g', '##h', '##p', '##s', '##u', '##ug', 'hug', 'pug', 'hugs']

    Taught in: 03_tokenization ("Training WordPiece by likelihood").
    """
    words = [w for w in word_counts if w]
    alphabet = sorted({c for w in words for c in w})
    units = list(dict.fromkeys([*special_tokens, *alphabet, *(PREFIX + c for c in alphabet)]))
    if vocab_size < len(units):
        raise ValueError(
            f"expected vocab_size >= {len(units)} (special tokens + characters + ## characters), got {vocab_size}"
        )
    unit_id = {u: i for i, u in enumerate(units)}
    spelled = [[unit_id[w[0]], *(unit_id[PREFIX + c] for c in w[1:])] for w in words]
    freq = [word_counts[w] for w in words]
    counts: Counter = Counter()
    table = _PairTable(units, unit_id)
    for index, (symbols, f) in enumerate(zip(spelled, freq)):
        for unit in symbols:
            counts[unit] += f
        for pair, n in _merge_counts(symbols).items():
            table.add(pair, n * f, index, present=True)
    unit_count = np.zeros(vocab_size, dtype=np.int64)
    unit_count[list(counts)] = list(counts.values())
    total = int(unit_count.sum())
    f = xlogx(np.arange(total + 1))  # every count stays in [0, total]
    while len(units) < vocab_size:
        live = np.flatnonzero(table.count[: len(table.slot)] > 0)
        if live.size == 0:
            break
        left, right, target = table.left[live], table.right[live], table.target[live]
        gain = likelihood_gain(
            table.count[live],
            unit_count[left],
            unit_count[right],
            np.where(target >= 0, unit_count[np.maximum(target, 0)], 0),
            total,
            left == right,
            f,
        )
        best = live[gain == gain.max()]
        best = best[np.lexsort((table.right[best], table.left[best]))[0]]
        a, b = int(table.left[best]), int(table.right[best])
        merged = table.merged((a, b))
        new = unit_id.setdefault(merged, len(units))
        if new == len(units):
            units.append(merged)
            table.unit_added(merged, new)
        occurrences = 0
        for index in sorted(table.words[(a, b)]):
            before = spelled[index]
            after = merge_pair(before, (a, b), new)
            old_counts, new_counts = _merge_counts(before), _merge_counts(after)
            for pair in old_counts.keys() | new_counts.keys():
                delta = new_counts.get(pair, 0) - old_counts.get(pair, 0)
                if delta:
                    table.add(pair, delta * freq[index], index, present=pair in new_counts)
            occurrences += (len(before) - len(after)) * freq[index]
            spelled[index] = after
        unit_count[a] -= occurrences
        unit_count[b] -= occurrences
        unit_count[new] += occurrences
        total -= occurrences
    return units
