"""lecture_lib.data.treebank: spans against brute force over the gold trees, the two noun phrases, the edge
examples against the annotation."""

import pytest

from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.data.treebank import constituents, edge_examples, noun_chunks, subtree_span


@pytest.fixture(scope="module")
def sentences():
    return SyntheticLanguage(0).sentences(80, seed=5)


def descendants(heads, word):
    """Brute force: every word whose chain of heads passes through ``word``."""
    out = set()
    for w in range(len(heads)):
        v = w
        while v != -1:
            if v == word:
                out.add(w)
                break
            v = heads[v] - 1
    return out


def test_edge_examples_follow_the_gold_trees_entities_and_facts(sentences):
    for s in sentences:
        for w in range(len(s)):
            start, end = subtree_span(s.heads, w)
            assert set(range(start, end)) == descendants(s.heads, w)
        for ((a, b),), label in constituents(s):
            head = next(w for w in range(a, b) if s.heads[w] - 1 not in range(a, b))  # the span's one head
            assert b - a >= 2 and label == {"VERB": "VP", "AUX": "VP"}.get(
                s.pos[head], "PP" if s.deprels[a] == "case" else "NP"
            )
        for ((a, b),), label in edge_examples(s, "entity"):
            assert s.entities[a] == "B-" + label and all(e == "I-" + label for e in s.entities[a + 1 : b])
        for ((h, _), (d, _)), label in edge_examples(s, "dependency"):
            assert s.heads[d] == h + 1 and s.deprels[d] == label
        for ((a, b), (c, e)), label in edge_examples(s, "relation"):
            assert (" ".join(s.words[a:b]), label, " ".join(s.words[c:e])) == (
                s.fact.subject,
                s.fact.relation,
                s.fact.object,
            )
        [(((a, b),), negated)] = edge_examples(s, "negation")
        assert s.heads[a] == 0 and negated == str(s.negated) and "not" not in s.words[a:b]
    assert sum(bool(edge_examples(s, "relation")) for s in sentences) == sum(s.fact is not None for s in sentences)
    with pytest.raises(ValueError, match="unknown edge-probing task"):
        edge_examples(sentences[0], "sentiment")


def test_coreference_pairs_each_relative_pronoun_with_every_noun_and_only_its_antecedent_is_true(sentences):
    """Brute force: in this grammar a relative clause follows its noun at once, so the antecedent is the noun
    (or the last word of the name) just before "who" or "that"."""
    checked = 0
    for s in sentences:
        examples = edge_examples(s, "coreference")
        pronouns = [i for i, w in enumerate(s.words) if w in ("who", "that")]
        nouns = sum(p == "NOUN" for p in s.pos) + sum(e.startswith("B-") for e in s.entities)
        assert len(examples) == len(pronouns) * nouns
        for i in pronouns:
            mine = [(span, label) for ((p, _), span), label in examples if p == i]
            assert [label for span, label in mine].count("True") == 1
            [(a, b)] = [span for span, label in mine if label == "True"]
            assert b == i and s.pos[a] in ("NOUN", "PROPN")
            checked += 1
    assert checked >= 5


def test_a_noun_chunk_lies_inside_its_nouns_constituent_np_and_stops_at_its_modifiers(sentences):
    """The two noun phrases: chapter 06's chunk holds the head and its listed dependents only; chapter 11's NP
    is the head's whole subtree, so every chunk lies inside it, and a noun with a relative clause or a PP
    has an NP longer than its chunk."""
    longer = 0
    for s in sentences:
        for start, end in noun_chunks(s, {"det", "amod", "flat"}):
            head = next(w for w in range(start, end) if s.heads[w] - 1 not in range(start, end))
            subtree = subtree_span(s.heads, head)
            assert subtree[0] <= start and end <= subtree[1] and s.pos[head] in ("NOUN", "PROPN")
            longer += subtree[1] - subtree[0] > end - start
        assert noun_chunks(s, set()) == [
            (w, w + 1) for w in range(len(s)) if s.pos[w] in ("NOUN", "PROPN") and s.deprels[w] != "flat"
        ]
    assert longer > 0
