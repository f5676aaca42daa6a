"""Queries on the gold annotation of a synthetic sentence (:class:`~lecture_lib.data.synthetic.Sentence`): which
words a phrase covers, as ``[start, end)`` word ranges, one named definition per kind of phrase.

- a word's subtree (:func:`subtree_span`), and a predicate, the verb phrase (:func:`predicate_span`);
- a named entity, from the BIO tags (:func:`entity_spans`);
- a noun phrase, in two definitions, because chapters 06 and 11 ask two different questions of it:

  - :func:`noun_chunks`, chapter 06's masking unit: a noun or name with the dependents of a few relations
    (the chapter's ``det``, ``amod``, ``flat``) and the words between them, *not* the prepositional phrases
    or relative clauses attached to it. SpanBERT masks whole noun phrases within a 15% budget; a unit
    should be a few tokens long, and masking "nurses" should not mask "that walk to this church" with it.
    The chapter's exercise 2 changes the relations (``nmod`` added) and watches the units grow.
  - the NP of :func:`constituents`, chapter 11's edge-probing label: the noun's *whole* subtree, as a
    constituency treebank brackets it (Tenney et al. probe OntoNotes' constituents), so that NPs nest and a
    relative clause belongs to its noun's NP.

  On "those kind nurses that walk to this church are kind ." the chunks are "those kind nurses" and
  "this church"; the constituent NPs are "those kind nurses that walk to this church" and "this church".
- the (spans, label) examples of each edge-probing task (:func:`edge_examples`), among them a
  coreference-like one (:func:`coreference_examples`).

The synthetic trees are projective, so every subtree is a contiguous range of words.
"""

from __future__ import annotations

from typing import Collection, Sequence

from lecture_lib.data.synthetic import Sentence

NOUNS = ("NOUN", "PROPN")  # the parts of speech that head a noun phrase
EDGE_TASKS = ("dependency", "constituent", "entity", "relation", "negation", "coreference")
Spans = tuple[tuple[int, int], ...]  # one or two [start, end) word ranges of one sentence


def subtree_span(heads: Sequence[int], word: int) -> tuple[int, int]:
    """The ``[start, end)`` words of ``word``'s subtree (itself and its descendants); the synthetic trees are
    projective, so a subtree is a contiguous range.

    >>> subtree_span([2, 3, 0, 3], 1)  # "the dog barks ." : "the dog"
    (0, 2)

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    inside = [word]
    for w in inside:  # grows while it is read: breadth-first over the children
        inside += [d for d, h in enumerate(heads) if h == w + 1]
    start, end = min(inside), max(inside) + 1
    if end - start != len(inside):
        raise ValueError(f"expected a projective tree, got a gap in the subtree of word {word} of heads {heads}")
    return start, end


def predicate_span(sentence: Sentence, word: int) -> tuple[int, int]:
    """From ``word`` to the end of its subtree, trailing punctuation left out: a verb's VP (its subject,
    auxiliaries and "not", all before it, stay outside).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> predicate_span(s, 4), predicate_span(s, 9)  # "walk to this church", "kind"
    ((4, 8), (9, 10))

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    end = subtree_span(sentence.heads, word)[1]
    while sentence.pos[end - 1] == "PUNCT":
        end -= 1
    return word, end


def noun_chunks(sentence: Sentence, dependents: Collection[str]) -> list[tuple[int, int]]:
    """Chapter 06's noun phrases: for every noun or name that heads one (not the later parts of a name, which
    hang on its first part by ``flat``), the ``[start, end)`` words from the leftmost to the rightmost of the
    head and its children whose relation is in ``dependents``; one-word chunks included. Unlike the NPs of
    :func:`constituents`, a chunk leaves out the noun's prepositional phrases and relative clauses (the
    module's docstring says why each chapter reads its own).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> [" ".join(s.words[a:b]) for a, b in noun_chunks(s, {"det", "amod", "flat"})]
    ['those kind nurses', 'this church']

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    chunks = []
    for head in range(len(sentence)):
        if sentence.pos[head] not in NOUNS or sentence.deprels[head] == "flat":
            continue
        members = [head] + [
            i
            for i, (h, deprel) in enumerate(zip(sentence.heads, sentence.deprels))
            if h == head + 1 and deprel in dependents
        ]
        chunks.append((min(members), max(members) + 1))
    return chunks


def constituents(sentence: Sentence) -> list[tuple[Spans, str]]:
    """Phrases of two words or more, each labelled by its head word: a noun or name's subtree is an NP, or a
    PP when it is an ``obl``/``nmod`` with a ``case`` child (the NP inside it, without the preposition, is
    an NP too); a verb's VP runs from the verb to the end of its subtree, punctuation left out (the
    subject and auxiliaries before the verb are not part of it). An NP here is the whole subtree, relative
    clauses included (chapter 06's :func:`noun_chunks` are the short noun phrases).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> [(" ".join(s.words[a:b]), label) for ((a, b),), label in constituents(s)]  # doctest: +NORMALIZE_WHITESPACE
    [('those kind nurses that walk to this church', 'NP'), ('walk to this church', 'VP'),
     ('to this church', 'PP'), ('this church', 'NP')]

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    out = []
    for word, (pos, deprel) in enumerate(zip(sentence.pos, sentence.deprels)):
        start, end = subtree_span(sentence.heads, word)
        children = [d for d, h in zip(sentence.deprels, sentence.heads) if h == word + 1]
        if pos in ("VERB", "AUX"):
            found = [(predicate_span(sentence, word), "VP")]
        elif pos in NOUNS and deprel in ("obl", "nmod", "obl:agent") and "case" in children:
            found = [((start, end), "PP"), ((start + 1, end), "NP")]
        elif pos in NOUNS:
            found = [((start, end), "NP")]
        else:
            found = []
        out += [((span,), label) for span, label in found if span[1] - span[0] >= 2]
    return out


def entity_spans(sentence: Sentence) -> list[tuple[tuple[int, int], str]]:
    """The named entities of a sentence's BIO tags, as (``[start, end)``, type).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> entity_spans(SyntheticLanguage(0).sentences(14, seed=0)[13])  # "Acme employs Sven Quist ."
    [((0, 1), 'ORG'), ((2, 4), 'PER')]

    Taught in: 06_roberta_spanbert ("Masking whole units"),
    11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    out = []
    for i, tag in enumerate(sentence.entities):
        if tag.startswith("B-"):
            end = i + 1
            while end < len(sentence) and sentence.entities[end] == "I-" + tag[2:]:
                end += 1
            out.append(((i, end), tag[2:]))
    return out


def coreference_examples(sentence: Sentence) -> list[tuple[Spans, str]]:
    """A coreference-like task: for each relative ``who`` or ``that``, a pair of spans (the pronoun, and one noun
    or name of the sentence: a common noun's word, a name's words) for every noun and name, labelled whether
    the pronoun refers to it (its antecedent, the noun its clause modifies). The pronoun is the same word
    whatever it refers to; only its place in the sentence tells.

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> coreference_examples(s)
    [(((3, 4), (2, 3)), 'True'), (((3, 4), (7, 8)), 'False')]

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    nouns = [(i, i + 1) for i, p in enumerate(sentence.pos) if p == "NOUN"] + [
        span for span, _ in entity_spans(sentence)
    ]
    out = []
    for word, (pos, head) in enumerate(zip(sentence.pos, sentence.heads)):
        if pos == "PRON" and sentence.deprels[head - 1] == "acl:relcl":
            antecedent = sentence.heads[head - 1] - 1
            out += [(((word, word + 1), span), str(span[0] == antecedent)) for span in sorted(nouns)]
    return out


def edge_examples(sentence: Sentence, task: str) -> list[tuple[Spans, str]]:
    """The (spans, gold label) examples an edge-probing task reads from a sentence: ``dependency`` each
    (head, dependent) pair of words (two spans) -> the dependent's label; ``constituent`` each phrase of
    :func:`constituents` -> NP, PP or VP; ``entity`` each named entity -> PER, LOC or ORG; ``relation`` the
    subject's and the object's names in a fact sentence (two spans) -> the fact's relation; ``negation``
    the main predicate (the root word to the end of its subtree, punctuation left out) -> whether the
    clause is negated: the "not" lies *outside* the span, before it, so only context can tell;
    ``coreference`` each relative pronoun with each noun or name of its sentence (:func:`coreference_examples`).

    >>> from lecture_lib.data.synthetic import SyntheticLanguage
    >>> s = SyntheticLanguage(0).sentences(14, seed=0)[13]  # "Acme employs Sven Quist ."
    >>> edge_examples(s, "relation")  # the subject, Sven Quist, comes second in the sentence
    [(((2, 4), (0, 1)), 'works_for')]
    >>> edge_examples(s, "dependency")[:2]  # "employs" heads "Acme" and "Sven"
    [(((1, 2), (0, 1)), 'nsubj'), (((1, 2), (2, 3)), 'obj')]
    >>> edge_examples(s, "negation")
    [(((1, 4),), 'False')]

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    if task == "dependency":
        return [
            (((h - 1, h), (d, d + 1)), label) for d, (h, label) in enumerate(zip(sentence.heads, sentence.deprels)) if h
        ]
    if task == "constituent":
        return constituents(sentence)
    if task == "entity":
        return [((span,), label) for span, label in entity_spans(sentence)]
    if task == "relation":
        if sentence.fact is None:
            return []
        where = {" ".join(sentence.words[a:b]): (a, b) for (a, b), _ in entity_spans(sentence)}
        return [((where[sentence.fact.subject], where[sentence.fact.object]), sentence.fact.relation)]
    if task == "negation":
        return [((predicate_span(sentence, sentence.heads.index(0)),), str(sentence.negated))]
    if task == "coreference":
        return coreference_examples(sentence)
    raise ValueError(f"unknown edge-probing task {task!r}; expected one of {EDGE_TASKS}")
