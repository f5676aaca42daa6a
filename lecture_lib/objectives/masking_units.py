"""The masking units of a sentence: which words a whole-unit masking scheme masks together.

Under ``whole words`` each word is a unit; under ``named entities`` and ``noun phrases`` a phrase of the gold
annotation (:mod:`lecture_lib.data.treebank`) is one unit and every other word a unit of its own. The unit ids
go, per token, to :func:`lecture_lib.objectives.span_masking.mask_units`; ``subword tokens`` and
``geometric spans`` are cut from tokens and words elsewhere (their units here are the words).

Taught in: 06_roberta_spanbert ("Masking whole units").
"""

from __future__ import annotations

from collections.abc import Collection

from lecture_lib.data.synthetic import Sentence
from lecture_lib.data.treebank import entity_spans, noun_chunks

SCHEMES = ("subword tokens", "whole words", "named entities", "noun phrases", "geometric spans")
NOUN_PHRASE_DEPENDENTS = frozenset({"det", "amod", "flat"})  # a noun phrase: a noun or name with these dependents


def word_units(sentence: Sentence, scheme: str, dependents: Collection[str] = NOUN_PHRASE_DEPENDENTS) -> list[int]:
    """The unit of each word under a masking ``scheme`` (a name in :data:`SCHEMES`), from the gold annotation:
    an entity (:func:`~lecture_lib.data.treebank.entity_spans`) or a noun phrase
    (:func:`~lecture_lib.data.treebank.noun_chunks`: a NOUN or PROPN head with its ``det``, ``amod`` and ``flat``
    dependents, and any word between them) is one unit; every other word is a unit of its own.
    ``dependents`` are the relations of a noun phrase (:data:`NOUN_PHRASE_DEPENDENTS` by default).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).documents(1, 0, 4)[0][3]
    >>> s.words[:5], word_units(s, "noun phrases")[:5], word_units(s, "named entities")[:2]
    (['every', 'chef', 'from', 'the', 'churches'], [0, 0, 1, 2, 2], [0, 1])

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    if scheme == "named entities":
        phrases = [span for span, _ in entity_spans(sentence)]
    elif scheme == "noun phrases":
        phrases = noun_chunks(sentence, dependents)
    elif scheme in SCHEMES:
        phrases = []  # words (subword tokens and spans are cut elsewhere)
    else:
        raise ValueError(f"expected a masking scheme in {SCHEMES}, got {scheme!r}")
    starts = [True] * len(sentence)
    for start, end in phrases:
        starts[start + 1 : end] = [False] * (end - start - 1)
    return [sum(starts[: i + 1]) - 1 for i in range(len(sentence))]
