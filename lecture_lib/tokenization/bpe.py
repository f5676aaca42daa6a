"""Byte-pair encoding: Gage's (1994) compression, and Sennrich et al.'s (2016) subword learner.

Both repeat two operations: count the adjacent pairs of symbols (:func:`get_stats`), and replace every
occurrence of the most frequent pair by a new symbol (:func:`merge_pair`). Sennrich et al. run them on a
dictionary of words with their frequencies; the ordered list of merges is the tokenizer, and a new word
is segmented by replaying the merges (:func:`apply_bpe`).

Taught in: 03_tokenization ("BPE as compression", "BPE for words").
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable, Literal, Mapping, Sequence, TypeVar

S = TypeVar("S", bound=Hashable)
Pair = tuple[str, str]
TieBreak = Literal["first_seen", "lowest_ids"]


def get_stats(symbols: Sequence[S], counts: Counter | None = None, weight: int = 1) -> Counter:
    """Add ``weight`` to ``counts`` for every adjacent pair of ``symbols`` (overlaps count twice).

    >>> get_stats(["a", "a", "a", "b"])
    Counter({('a', 'a'): 2, ('a', 'b'): 1})

    Taught in: 03_tokenization ("BPE as compression").
    """
    counts = Counter() if counts is None else counts
    for pair in zip(symbols, symbols[1:]):
        counts[pair] += weight
    return counts


def merge_pair(symbols: Sequence[S], pair: tuple[S, S], new: S) -> list[S]:
    """Replace each occurrence of ``pair`` by ``new``, scanning left to right without overlaps.

    >>> merge_pair(["a", "a", "a", "b"], ("a", "a"), "aa")
    ['aa', 'a', 'b']

    Taught in: 03_tokenization ("BPE as compression").
    """
    out: list[S] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _symbols(word: str | tuple[str, ...], end_of_word: str | None) -> tuple[str, ...]:
    if isinstance(word, tuple):
        symbols = word
    elif isinstance(word, str):
        symbols = tuple(word)
    else:
        raise TypeError(f"expected words as str or tuple of str, got {type(word).__name__}")
    return symbols + (end_of_word,) if end_of_word is not None else symbols


def learn_bpe(
    word_counts: Mapping[str | tuple[str, ...], int],
    num_merges: int,
    end_of_word: str | None = None,
    tie_break: TieBreak = "first_seen",
) -> list[Pair]:
    """Sennrich et al.'s algorithm: the ``num_merges`` most frequent pairs, merged one after another.

    Each word is a sequence of characters (a tuple key gives its symbols directly), followed by the
    symbol ``end_of_word`` if one is given (the paper's ``</w>``, which lets ``est</w>`` differ from an
    ``est`` inside a word). Every iteration recounts all pairs, weighted by word frequency, and merges the
    most frequent. It stops early when no pair is left.

    Ties between equally frequent pairs:

    - ``"first_seen"`` (default): the pair met first when the dictionary is scanned in its order, each
      word left to right. This is what ``max(stats, key=stats.get)`` returns in the paper's reference
      code on Python 3.7+, where dictionaries keep insertion order.
    - ``"lowest_ids"``: the pair with the smallest (left id, right id), where the initial symbols are
      numbered in sorted order and each new symbol gets the next id when it is first created. This is
      the rule of Hugging Face ``tokenizers``' BPE trainer; :class:`ByteLevelBPE` uses it.

    >>> learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 3)
    [('e', 's'), ('es', 't'), ('l', 'o')]

    Taught in: 03_tokenization ("BPE for words").
    """
    if num_merges < 0:
        raise ValueError(f"expected num_merges >= 0, got {num_merges}")
    if tie_break not in ("first_seen", "lowest_ids"):
        raise ValueError(f"expected tie_break 'first_seen' or 'lowest_ids', got {tie_break!r}")
    words = [(_symbols(word, end_of_word), count) for word, count in word_counts.items()]
    ids = {symbol: i for i, symbol in enumerate(sorted({s for symbols, _ in words for s in symbols}))}
    merges: list[Pair] = []
    for _ in range(num_merges):
        stats: Counter = Counter()
        for symbols, count in words:
            get_stats(symbols, stats, count)
        if not stats:
            break
        if tie_break == "first_seen":
            best = max(stats, key=stats.get)
        else:
            best = min(stats, key=lambda p: (-stats[p], ids[p[0]], ids[p[1]]))
        new = best[0] + best[1]
        ids.setdefault(new, len(ids))
        words = [
            (merge_pair(symbols, best, new) if best in zip(symbols, symbols[1:]) else symbols, count)
            for symbols, count in words
        ]
        merges.append(best)
    return merges


def apply_bpe(word: str, merges: Sequence[Pair], end_of_word: str | None = None) -> list[str]:
    """Segment ``word`` by replaying ``merges``: repeatedly merge the adjacent pair learned earliest.

    >>> apply_bpe("lowest", [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w")])
    ['low', 'est']

    Taught in: 03_tokenization ("BPE for words").
    """
    rank = {pair: i for i, pair in enumerate(merges)}
    symbols = list(_symbols(word, end_of_word))
    while len(symbols) > 1:
        pair = min(zip(symbols, symbols[1:]), key=lambda p: rank.get(p, len(rank)))
        if pair not in rank:
            break
        symbols = merge_pair(symbols, pair, pair[0] + pair[1])
    return symbols


def compress(text: str, num_merges: int, new_symbols: str = "ZYXWVUTSRQPONM") -> list[tuple[str, dict[str, str]]]:
    """Gage's byte-pair compression: each step writes the most frequent pair as one unused symbol.

    Returns, after each step, the compressed text and the table of replacements. Ties go to the pair of
    older symbols (``tie_break="lowest_ids"`` in :func:`learn_bpe`).

    >>> compress("aaabdaaabac", 2)
    [('ZabdZabac', {'Z': 'aa'}), ('ZYdZYac', {'Z': 'aa', 'Y': 'ab'})]

    Taught in: 03_tokenization ("BPE as compression").
    """
    if num_merges > len(new_symbols):
        raise ValueError(f"expected at most {len(new_symbols)} merges (one new symbol each), got {num_merges}")
    if set(new_symbols) & set(text):
        raise ValueError(f"expected new_symbols unused in the text, but {sorted(set(new_symbols) & set(text))} occur")
    merges = learn_bpe({text: 1}, num_merges, tie_break="lowest_ids")
    name: dict[str, str] = {}  # merged string -> its one-letter symbol
    steps = []
    for k, (left, right) in enumerate(merges):
        name[left + right] = new_symbols[k]
        table = {name[a + b]: name.get(a, a) + name.get(b, b) for a, b in merges[: k + 1]}
        segments = apply_bpe(text, merges[: k + 1])
        steps.append(("".join(name.get(s, s) for s in segments), table))
    return steps
