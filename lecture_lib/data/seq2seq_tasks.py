"""Toy sequence-to-sequence tasks with a held-out split that no training batch can touch.

The reversal task of :mod:`lecture_lib.data.toy` draws fresh random strings at every step, so a string
of the test set could also turn up in training. Here every string is assigned to a split by a hash
of its content: one string in ``test_every`` belongs to the test split, and training batches are
drawn from the others only. The test accuracy is then measured on strings the model never saw.

The translation task translates sentences of the synthetic language of chapter 05 into a head-final
language (:func:`head_final`): verbs move to the end of their clause, prepositions become postpositions,
relative clauses move in front of their noun, subjects and objects carry case particles, and adjectives
agree in number with their noun. Its alignments cross, unlike reversal's single anti-diagonal.
:class:`FreeOrderTranslationTask` (exercise 5 of chapter 02) lets the object phrase come first in half of the
sentences: the case particles still say which phrase is which.

Taught in: 02_transformer ("Training", "A task with structure: translation").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

import torch

from lecture_lib.data import synthetic
from lecture_lib.data.synthetic import GrammarConfig, Sentence, SyntheticLanguage
from lecture_lib.data.toy import NUM_SPECIAL, Seq2SeqBatch, make_batch, reversal_batch
from lecture_lib.runtime import generator, seed_of

HASH_BASE, HASH_MODULUS = 31, 1_000_003


def content_hash(tokens: list[int]) -> int:
    """Polynomial hash sum_t tokens[t] * 31^t mod 1000003: a fixed function of the string alone.

    >>> content_hash([3, 4])  # 3 + 4 * 31
    127

    Taught in: 02_transformer ("Training").
    """
    return sum(t * HASH_BASE**i for i, t in enumerate(tokens)) % HASH_MODULUS


@dataclass
class ReversalTask:
    """Reverse a string of ``num_symbols`` symbols, of length in [min_len, max_len], split by content hash.

    Taught in: 02_transformer ("Training").
    """

    num_symbols: int = 10
    min_len: int = 3
    max_len: int = 8
    batch_size: int = 64
    test_every: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"expected 1 <= min_len <= max_len, got {self.min_len} and {self.max_len}")
        if self.num_symbols < 1 or self.test_every < 2:
            raise ValueError(
                f"expected num_symbols >= 1 and test_every >= 2, got {self.num_symbols}, {self.test_every}"
            )

    @property
    def vocab_size(self) -> int:
        return NUM_SPECIAL + self.num_symbols

    def is_test(self, tokens: list[int]) -> bool:
        """Whether a source string belongs to the held-out split."""
        return content_hash(tokens) % self.test_every == 0

    def sources(self, n: int, test: bool, generator: torch.Generator) -> list[torch.Tensor]:
        """``n`` random source strings of the chosen split (drawn with the toy reversal generator, then filtered)."""
        kept: list[torch.Tensor] = []
        while len(kept) < n:
            batch = reversal_batch(n, self.min_len, self.max_len, self.num_symbols, generator)
            for row, length in zip(batch.src, batch.src_lengths.tolist()):
                source = row[:length]
                if self.is_test(source.tolist()) == test and len(kept) < n:
                    kept.append(source)
        return kept

    def batch(self, sources: list[torch.Tensor]) -> Seq2SeqBatch:
        """Each source paired with its reverse."""
        return make_batch(sources, [s.flip(0) for s in sources])

    def train_batch(self, batch_size: int, step: int, seed: int = 0) -> Seq2SeqBatch:
        """The training batch of ``step``: the same batch whenever it is asked for (``train``'s ``batch_fn``)."""
        return self.batch(self.sources(batch_size, test=False, generator=generator("reversal task", seed, step)))

    def test_batch(self, size: int, seed: int = 0) -> Seq2SeqBatch:
        """``size`` held-out strings (a string may repeat when the test split is small)."""
        return self.batch(self.sources(size, test=True, generator=generator("reversal task test", seed)))


# ---------------------------------------------------------------------------------------------
# Translation into a head-final language

CASE_PARTICLES = {"nsubj": "ga", "obj": "o"}  # after a subject or object noun phrase
AFTER_HEAD = frozenset({"case", "cop", "aux", "advmod", "punct"})  # postpositions, copula, auxiliaries, "not", "."
PLURAL_SUFFIX = "-pl"  # an adjective modifying a plural noun


def head_final(sentence: Sentence) -> list[str]:
    """The sentence in the head-final target language, read off its dependency tree.

    Every word is written after its dependents, except the dependents in ``AFTER_HEAD`` (prepositions,
    which become postpositions, the copula, auxiliaries, negation and the full stop), which follow it. A
    subject or object noun phrase ends with its case particle, and an adjective modifying a plural noun
    takes the suffix ``-pl``.

    >>> lang = SyntheticLanguage(seed=0, config=TranslationTask.grammar)
    >>> s = lang.grammar_sentence(random.Random(31))
    >>> s.text
    'these tall children walk behind the dark churches .'
    >>> " ".join(head_final(s))
    'these tall-pl children ga the dark-pl churches behind walk .'
    """
    return [word for word, _ in _head_final(sentence)]


def head_final_alignment(sentence: Sentence) -> list[int]:
    """For each word of :func:`head_final`'s translation, the index of the source word it translates
    (-1 for a case particle, which translates no single word).

    >>> lang = SyntheticLanguage(seed=0, config=TranslationTask.grammar)
    >>> head_final_alignment(lang.grammar_sentence(random.Random(31)))
    [0, 1, 2, -1, 5, 6, 7, 4, 3, 8]
    """
    return [source for _, source in _head_final(sentence)]


def _head_final(sentence: Sentence) -> list[tuple[str, int]]:
    """(target word, source index or -1) in target order."""
    dependents: list[list[int]] = [[] for _ in sentence.words]
    root = -1
    for i, head in enumerate(sentence.heads):
        if head == 0:
            root = i
        else:
            dependents[head - 1].append(i)

    def phrase(i: int) -> list[tuple[str, int]]:
        before = [w for d in dependents[i] if sentence.deprels[d] not in AFTER_HEAD for w in phrase(d)]
        after = [w for d in dependents[i] if sentence.deprels[d] in AFTER_HEAD for w in phrase(d)]
        word = sentence.words[i]
        if sentence.deprels[i] == "amod" and sentence.number[sentence.heads[i] - 1] == "Plur":
            word += PLURAL_SUFFIX
        is_argument = sentence.pos[i] == "NOUN" and sentence.deprels[i] in CASE_PARTICLES
        particle = [(CASE_PARTICLES[sentence.deprels[i]], -1)] if is_argument else []
        return before + [(word, i)] + after + particle

    return phrase(root)


def _lexicon() -> list[str]:
    """Every word the translation task's grammar can write, in either language (no names)."""
    nouns = [w for pair in synthetic.ANIMATE_NOUNS + synthetic.PLACE_NOUNS + synthetic.THING_NOUNS for w in pair]
    adjectives = sorted(set(synthetic.ADJECTIVES + synthetic.PLACE_ADJECTIVES))
    verbs = [w for v in synthetic.TRANSITIVE_VERBS + synthetic.INTRANSITIVE_VERBS for w in v[:3]]
    prepositions = sorted({p for v in synthetic.INTRANSITIVE_VERBS for p in v[3]} | set(synthetic.SUBJECT_PREPOSITIONS))
    determiners = sorted({d for ds in synthetic.DETERMINERS.values() for d in ds})
    function_words = ["is", "are", "does", "do", "not", "who", "that", ".", *CASE_PARTICLES.values()]
    words = (
        nouns
        + adjectives
        + [a + PLURAL_SUFFIX for a in adjectives]
        + verbs
        + prepositions
        + determiners
        + function_words
    )
    return list(dict.fromkeys(words))


@dataclass
class TranslationTask:
    """Translate synthetic-language sentences into the head-final language of :func:`head_final`.

    Sentences come from the free grammar of :class:`~lecture_lib.data.synthetic.SyntheticLanguage` without
    names (``grammar``), at most ``max_words`` words long, split into train and test by a hash of their
    word ids as in :class:`ReversalTask`; training batches are drawn from a pool of ``train_pool_size``
    training pairs. Tokens are whole words of one vocabulary shared by both languages.

    Taught in: 02_transformer ("A task with structure: translation").
    """

    max_words: int = 12
    train_pool_size: int = 4000
    batch_size: int = 64
    test_every: int = 10
    seed: int = 0
    words: list[str] = field(default_factory=_lexicon)
    grammar = GrammarConfig(p_fact=0.0, p_name_subject=0.0, p_entity_object=0.0)

    def __post_init__(self) -> None:
        if self.max_words < 3 or self.test_every < 2:
            raise ValueError(f"expected max_words >= 3 and test_every >= 2, got {self.max_words}, {self.test_every}")
        self.language = SyntheticLanguage(self.seed, self.grammar)
        self.ids = {w: NUM_SPECIAL + i for i, w in enumerate(self.words)}

    @property
    def vocab_size(self) -> int:
        return NUM_SPECIAL + len(self.words)

    def encode(self, words: list[str]) -> torch.Tensor:
        """Word ids of ``words``; a word outside the vocabulary is an error."""
        unknown = [w for w in words if w not in self.ids]
        if unknown:
            raise ValueError(f"expected words of the task's vocabulary, got {unknown}")
        return torch.tensor([self.ids[w] for w in words])

    def decode(self, ids: list[int]) -> list[str]:
        """The words of ``ids``, special tokens dropped."""
        return [self.words[i - NUM_SPECIAL] for i in ids if i >= NUM_SPECIAL]

    @cached_property
    def train_pool(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The ``train_pool_size`` training pairs, as word ids, that batches are drawn from (writing
        sentences is plain Python, too slow to redo for every batch)."""
        pairs = self.pairs(self.train_pool_size, False, random.Random(seed_of("translation task", self.seed)))
        return [(self.encode(s.words), self.encode(t)) for s, t in pairs]

    def pairs(self, n: int, test: bool, rng: random.Random) -> list[tuple[Sentence, list[str]]]:
        """``n`` (sentence, translation) pairs of the chosen split."""
        kept: list[tuple[Sentence, list[str]]] = []
        while len(kept) < n:
            sentence = self.language.grammar_sentence(rng)
            if (
                len(sentence) <= self.max_words
                and (content_hash(self.encode(sentence.words).tolist()) % self.test_every == 0) == test
            ):
                kept.append((sentence, head_final(sentence)))
        return kept

    def batch(self, pairs: list[tuple[Sentence, list[str]]]) -> Seq2SeqBatch:
        return make_batch([self.encode(s.words) for s, _ in pairs], [self.encode(t) for _, t in pairs])

    def train_batch(self, batch_size: int, step: int, seed: int = 0) -> Seq2SeqBatch:
        """The training batch of ``step``, drawn from the pool (the same whenever it is asked for)."""
        rows = torch.randint(len(self.train_pool), (batch_size,), generator=generator("translation task", seed, step))
        return make_batch(*zip(*[self.train_pool[i] for i in rows.tolist()]))

    def test_pairs(self, size: int, seed: int = 0) -> list[tuple[Sentence, list[str]]]:
        """``size`` held-out pairs (a sentence may repeat)."""
        return self.pairs(size, True, random.Random(seed_of("translation task test", seed)))

    def test_batch(self, size: int, seed: int = 0) -> Seq2SeqBatch:
        return self.batch(self.test_pairs(size, seed))

    def references(self, sentence: Sentence) -> list[list[str]]:
        """Every right translation of ``sentence``: here the one, :func:`head_final`'s."""
        return [head_final(sentence)]


def free_order(sentence: Sentence, object_first: bool) -> list[str]:
    """Exercise 5 of chapter 02: :func:`head_final`'s translation, with the main clause's object phrase (case
    particle ``o`` included) moved before its subject phrase (``ga``) when ``object_first``; the particles
    still say which is which, so both orders are right."""
    target = head_final(sentence)
    root = sentence.heads.index(0)
    arguments = {
        sentence.deprels[i]: i
        for i, head in enumerate(sentence.heads)
        if head == root + 1 and sentence.deprels[i] in CASE_PARTICLES
    }
    if not object_first or len(arguments) < 2:
        return target
    alignment = head_final_alignment(sentence)

    def span(i: int) -> tuple[int, int]:
        """The target positions of the phrase headed by source word i, its particle included."""
        inside = [t for t, source in enumerate(alignment) if source >= 0 and _dominates(sentence, i, source)]
        return min(inside), max(inside) + 2  # the particle follows the phrase

    (s0, s1), (o0, o1) = span(arguments["nsubj"]), span(arguments["obj"])
    return target[:s0] + target[o0:o1] + target[s0:s1] + target[s1:o0] + target[o1:]


def _dominates(sentence: Sentence, head: int, word: int) -> bool:
    """Is source word ``word`` in the subtree of source word ``head`` (0-based)?"""
    while word != head and sentence.heads[word]:
        word = sentence.heads[word] - 1
    return word == head


@dataclass
class FreeOrderTranslationTask(TranslationTask):
    """Exercise 5 of chapter 02: :class:`TranslationTask` whose references put the object first in half of the
    sentences (:func:`free_order`, a coin per sentence from its word ids' hash)."""

    def pairs(self, n: int, test: bool, rng: random.Random) -> list[tuple[Sentence, list[str]]]:
        # The coin hashes the words reversed: TranslationTask picks test sentences by the same hash of the words,
        # so the plain hash would make every test sentence's coin alike.
        return [
            (sentence, free_order(sentence, content_hash(self.encode(sentence.words[::-1]).tolist()) % 2 == 1))
            for sentence, _ in super().pairs(n, test, rng)
        ]

    def references(self, sentence: Sentence) -> list[list[str]]:
        """Both right translations of ``sentence``, subject first then object first (the same twice when the
        main clause lacks a subject or an object): what multi-reference BLEU scores against."""
        return [free_order(sentence, object_first) for object_first in (False, True)]
