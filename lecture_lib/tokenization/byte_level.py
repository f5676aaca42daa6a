"""Byte-level BPE (Radford et al. 2019, GPT-2): BPE over the UTF-8 bytes of pre-tokenized text.

Starting from the 256 byte values, every string can be encoded: there is no unknown token. The text is
first cut by GPT-2's regular expression (words with their leading space, numbers, runs of punctuation,
white space), so merges never cross those boundaries; each piece is then spelled in bytes.

Training keeps, instead of recounting every pair after every merge (Sennrich et al.'s loop, which
:func:`lecture_lib.tokenization.bpe.learn_bpe` runs), three structures that it updates incrementally:
the count of every pair, the set of words each pair occurs in, and a priority queue (a heap) of pairs by
count. A merge then touches only the words that contain the merged pair.

Token ids follow GPT-2 and Hugging Face ``tokenizers``: the 256 bytes are numbered in the order of their
printable stand-in characters (:func:`bytes_to_unicode`: ``!`` is 0, the space ``Ġ`` is 220), merged
tokens follow in the order they were learned, special tokens come last. With the same tie-breaking rule
as ``tokenizers`` (equal counts: the smallest pair of ids), training on the same text gives the same
merges and the same ids.

Taught in: 03_tokenization ("Byte-level BPE").
"""

from __future__ import annotations

import functools
import heapq
import json
import numbers
import os
from collections import Counter
from typing import Iterable, Mapping, Sequence

import regex

from lecture_lib.tokenization.bpe import merge_pair

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
FORMAT = "lecture_lib.ByteLevelBPE"
Pair = tuple[int, int]


@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte: itself if printable Latin-1, else chr(256 + k).

    >>> bytes_to_unicode()[ord("a")], bytes_to_unicode()[ord(" ")], bytes_to_unicode()[ord("\\n")]
    ('a', 'Ġ', 'Ċ')

    Taught in: 03_tokenization ("Byte-level BPE").
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    for k, b in enumerate(b for b in range(256) if b not in mapping):
        mapping[b] = chr(256 + k)
    return mapping


@functools.lru_cache(maxsize=1)
def byte_alphabet() -> tuple[bytes, ...]:
    """The 256 one-byte tokens in id order (sorted by stand-in character)."""
    return tuple(bytes([b]) for b, _ in sorted(bytes_to_unicode().items(), key=lambda item: item[1]))


@functools.lru_cache(maxsize=1)
def _byte_to_id() -> tuple[int, ...]:
    ids = [0] * 256
    for i, token in enumerate(byte_alphabet()):
        ids[token[0]] = i
    return tuple(ids)


def byte_ids(text: str) -> list[int]:
    """The ids of the one-byte tokens spelling ``text`` in UTF-8: ``byte_ids("a ")`` is ``[64, 220]``."""
    table = _byte_to_id()
    return [table[b] for b in text.encode("utf-8")]


def to_standin(token: bytes) -> str:
    """A token's bytes written with their stand-ins: ``b" the"`` -> ``"Ġthe"``."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def _check_texts(texts: str | Iterable[str]) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    texts = list(texts)
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"expected texts as str or an iterable of str, got an item of type {bad[0]}")
    return texts


# ---------------------------------------------------------------- the incremental trainer


def train_merges(
    word_counts: Mapping[tuple[int, ...], int], vocab_size: int, vocab: Sequence[bytes] | None = None
) -> list[Pair]:
    """Merges learned from ``word_counts`` (words spelled in token ids) until ``vocab_size`` tokens.

    The most frequent pair wins; equal counts go to the smallest pair ``(left id, right id)``. Pair counts
    are position counts weighted by word frequency (a run ``a a a`` holds ``(a, a)`` twice), as in
    Sennrich et al. and ``tokenizers``. A merge whose bytes are already a token (``a`` + ``bc`` after
    ``ab`` + ``c``) reuses that token's id, so the vocabulary grows by at most one token per merge.

    Each step pops the heap's top; an entry whose count is stale (the pair lost occurrences since it was
    pushed) is pushed back with its current count, so the heap never needs a search. Counts of pairs that
    do not involve the new token can only fall, which is what makes the stale entries safe upper bounds.

    Taught in: 03_tokenization ("An efficient trainer").
    """
    tokens = list(byte_alphabet() if vocab is None else vocab)
    token_id = {t: i for i, t in enumerate(tokens)}
    words = [list(w) for w in word_counts]
    freqs = list(word_counts.values())
    pair_count: Counter = Counter()
    where: dict[Pair, set[int]] = {}
    for index, (word, freq) in enumerate(zip(words, freqs)):
        for pair, n in Counter(zip(word, word[1:])).items():
            pair_count[pair] += n * freq
            where.setdefault(pair, set()).add(index)
    heap = [(-count, pair) for pair, count in pair_count.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(tokens) < vocab_size and heap:
        negative, pair = heapq.heappop(heap)
        count = pair_count[pair]
        if -negative != count:  # stale entry
            if count > 0:
                heapq.heappush(heap, (-count, pair))
            continue
        new = token_id.setdefault(tokens[pair[0]] + tokens[pair[1]], len(tokens))
        if new == len(tokens):
            tokens.append(tokens[pair[0]] + tokens[pair[1]])
        merges.append(pair)
        formed: set[Pair] = set()
        for index in sorted(where.pop(pair)):
            before, freq = words[index], freqs[index]
            after = merge_pair(before, pair, new)
            old, now = Counter(zip(before, before[1:])), Counter(zip(after, after[1:]))
            for p, n in now.items():
                delta = n - old.get(p, 0)
                if delta:
                    pair_count[p] += delta * freq
                    if delta > 0:
                        formed.add(p)
                if p not in old:
                    where.setdefault(p, set()).add(index)
            for p, n in old.items():
                if p not in now:
                    pair_count[p] -= n * freq
                    if p in where:
                        where[p].discard(index)
            words[index] = after
        for p in sorted(formed):
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
    return merges


# ---------------------------------------------------------------- the tokenizer


class ByteLevelBPE:
    """GPT-2-style byte-level BPE: ``train``, ``encode``, ``decode``, ``save``, ``load``.

    ``merges`` are pairs of token ids in the order learned; ``special_tokens`` (e.g. ``"<|endoftext|>"``)
    get the last ids, and wherever one is written in a text it is encoded as that single token.

    >>> tok = ByteLevelBPE().train(["low lower lowest newest"], vocab_size=256 + 5)
    >>> tok.convert_ids_to_tokens(tok.encode("lowest newer"))  # 'Ġ' is the space
    ['lo', 'west', 'Ġ', 'n', 'e', 'we', 'r']

    Taught in: 03_tokenization ("Byte-level BPE").
    """

    def __init__(
        self, merges: Sequence[Pair] = (), special_tokens: Sequence[str] = (), pattern: str = GPT2_PATTERN
    ) -> None:
        self._set_state(merges, special_tokens, pattern)

    def _set_state(self, merges: Sequence[Pair], special_tokens: Sequence[str], pattern: str) -> None:
        self.pattern = pattern
        self._split = regex.compile(pattern)
        self.vocab: list[bytes] = list(byte_alphabet())  # id -> bytes of every non-special token
        token_id = {t: i for i, t in enumerate(self.vocab)}
        self.merges: dict[Pair, int] = {}  # pair -> id of the merged token; dict order = rank
        for rank, pair in enumerate(merges):
            if len(pair) != 2 or not all(isinstance(i, int) and 0 <= i < len(self.vocab) for i in pair):
                raise ValueError(
                    f"expected merge {rank} as two ids of existing tokens (< {len(self.vocab)}), got {pair!r}"
                )
            token = self.vocab[pair[0]] + self.vocab[pair[1]]
            new = token_id.setdefault(token, len(self.vocab))
            if new == len(self.vocab):
                self.vocab.append(token)
            self.merges[tuple(pair)] = new
        self._rank = {pair: rank for rank, pair in enumerate(self.merges)}
        self.special_tokens: dict[str, int] = {}
        for token in special_tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"expected special tokens as non-empty str, got {token!r}")
            self.special_tokens.setdefault(token, len(self.vocab) + len(self.special_tokens))
        specials = sorted(self.special_tokens, key=len, reverse=True)
        self._special_split = regex.compile("(" + "|".join(map(regex.escape, specials)) + ")") if specials else None
        self._cache: dict[str, list[int]] = {}

    # ------------------------------------------------------------ training

    def train(
        self, texts: str | Iterable[str], vocab_size: int, special_tokens: Sequence[str] | None = None
    ) -> "ByteLevelBPE":
        """Learn merges from ``texts`` until the vocabulary (bytes + merges + specials) has ``vocab_size`` tokens.

        Returns ``self``, retrained (earlier merges are discarded). Special tokens written in the texts are
        cut out before counting, so no merge crosses them.

        Taught in: 03_tokenization ("Byte-level BPE").
        """
        specials = list(self.special_tokens if special_tokens is None else special_tokens)
        if not isinstance(vocab_size, int) or vocab_size < 256 + len(specials):
            raise ValueError(
                f"expected vocab_size >= {256 + len(specials)} (256 bytes + {len(specials)} special "
                f"tokens), got {vocab_size!r}"
            )
        self._set_state([], specials, self.pattern)
        word_counts = {tuple(byte_ids(word)): n for word, n in self.count_words(texts).items()}
        self._set_state(train_merges(word_counts, vocab_size - len(specials)), specials, self.pattern)
        return self

    def count_words(self, texts: str | Iterable[str]) -> Counter:
        """How often each pre-tokenized piece (``" the"``, ``"."``, ``"\\n    "``...) occurs in ``texts``."""
        counts: Counter = Counter()
        for text in _check_texts(texts):
            for chunk, special in self._chunks(text):
                if not special:
                    counts.update(self._split.findall(chunk))
        return counts

    # ------------------------------------------------------------ encoding

    def _chunks(self, text: str) -> list[tuple[str, bool]]:
        if self._special_split is None:
            return [(text, False)]
        return [(chunk, i % 2 == 1) for i, chunk in enumerate(self._special_split.split(text)) if chunk]

    def _encode_piece(self, piece: str) -> list[int]:
        ids = self._cache.get(piece)
        if ids is None:
            ids = byte_ids(piece)
            while len(ids) > 1:
                pair = min(zip(ids, ids[1:]), key=lambda p: self._rank.get(p, len(self._rank)))
                if pair not in self._rank:
                    break
                ids = merge_pair(ids, pair, self.merges[pair])
            if len(self._cache) < 500_000:
                self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: pre-tokenize, then replay the merges in each piece, earliest learned first.

        Not greedy longest match: with merges ``(a, b)`` then ``(b, c)``, ``"abc"`` is ``ab c`` even if
        ``bc`` is also a token.

        Taught in: 03_tokenization ("Byte-level BPE").
        """
        if not isinstance(text, str):
            raise TypeError(f"expected text as str, got {type(text).__name__}")
        ids: list[int] = []
        for chunk, special in self._chunks(text):
            if special:
                ids.append(self.special_tokens[chunk])
            else:
                for piece in self._split.findall(chunk):
                    ids.extend(self._encode_piece(piece))
        return ids

    def token_bytes(self, i: int) -> bytes:
        """The bytes token ``i`` stands for (a special token's UTF-8 text)."""
        if not isinstance(i, numbers.Integral) or not 0 <= i < len(self):
            raise ValueError(f"expected a token id in [0, {len(self)}), got {i!r}")
        if i < len(self.vocab):
            return self.vocab[i]
        return list(self.special_tokens)[i - len(self.vocab)].encode("utf-8")

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (bytes that are not valid UTF-8 become U+FFFD)."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Tokens written with the printable stand-ins, as ``tokenizers`` shows them (``"Ġthe"``)."""
        specials = {i: t for t, i in self.special_tokens.items()}
        return [specials[i] if i in specials else to_standin(self.token_bytes(i)) for i in ids]

    def __len__(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    @property
    def vocab_size(self) -> int:
        return len(self)

    def truncated(self, vocab_size: int) -> "ByteLevelBPE":
        """The tokenizer made of the first merges only, up to ``vocab_size`` tokens (BPE vocabularies nest).

        Taught in: 03_tokenization ("Vocabulary size against sequence length").
        """
        budget = vocab_size - len(self.special_tokens)
        if budget < 256:
            raise ValueError(f"expected vocab_size >= {256 + len(self.special_tokens)}, got {vocab_size}")
        merges = []
        for pair, new in self.merges.items():
            if new >= budget:
                break
            merges.append(pair)
        return ByteLevelBPE(merges, list(self.special_tokens), self.pattern)

    # ------------------------------------------------------------ files

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer as JSON: the pattern, special tokens, and merges in stand-in characters."""
        state = {
            "format": FORMAT,
            "version": 1,
            "pattern": self.pattern,
            "special_tokens": list(self.special_tokens),
            "merges": [[to_standin(self.vocab[a]), to_standin(self.vocab[b])] for a, b in self.merges],
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f, ensure_ascii=False, indent=0)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ByteLevelBPE":
        """Read a file written by :meth:`save`; a missing file or a malformed one raises a clear error."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no tokenizer file at {os.fspath(path)!r}")
        try:
            with open(path, encoding="utf-8") as f:
                state = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(
                f"expected a JSON tokenizer file written by ByteLevelBPE.save, {os.fspath(path)!r} is not ({error})"
            ) from None
        if not isinstance(state, dict) or state.get("format") != FORMAT or state.get("version") != 1:
            raise ValueError(
                f"expected format {FORMAT!r} version 1 in {os.fspath(path)!r}, got "
                f"{state.get('format') if isinstance(state, dict) else type(state).__name__!r}"
            )
        merges = state.get("merges")
        if (
            not isinstance(merges, list)
            or not isinstance(state.get("pattern"), str)
            or not isinstance(state.get("special_tokens"), list)
        ):
            raise ValueError(f"expected 'pattern', 'special_tokens' and a list of 'merges' in {os.fspath(path)!r}")
        token_id = {to_standin(t): i for i, t in enumerate(byte_alphabet())}
        pairs = []
        for rank, merge in enumerate(merges):
            if not (isinstance(merge, list) and len(merge) == 2 and all(m in token_id for m in merge)):
                raise ValueError(
                    f"malformed merge {rank} in {os.fspath(path)!r}: {merge!r} is not two tokens "
                    f"built by the bytes and earlier merges"
                )
            pairs.append((token_id[merge[0]], token_id[merge[1]]))
            token_id.setdefault(merge[0] + merge[1], len(token_id))
        return cls(pairs, state["special_tokens"], state["pattern"])
