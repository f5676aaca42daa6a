"""Chapter 11's glue: the gold labels each probe reads, the cloze queries cut from fact sentences, the random
twin, and the structural scores on vectors that hold the gold trees by construction."""

import random

import pytest
import torch

from lecture_lib.chapters.ch11_bertology_probing import (
    attractors,
    cloze_query,
    constituents,
    edge_examples,
    random_twin,
    span_batch,
    structural_scores,
    subtree_span,
    task_data,
    word_labels,
)
from lecture_lib.data.synthetic import RELATIONS, SyntheticLanguage
from lecture_lib.models.bert import BertConfig, BertModel


@pytest.fixture(scope="module")
def sentences():
    return SyntheticLanguage(0).sentences(80, seed=5)


def test_word_labels_and_task_data_follow_the_gold_annotation(sentences):
    s = sentences[0]
    assert word_labels(s, "pos") == list(enumerate(s.pos))
    assert word_labels(s, "deprel") == list(enumerate(s.deprels))
    assert word_labels(s, "entity") == list(enumerate(s.entities))
    assert word_labels(s, "negated") == [(s.heads.index(0), str(s.negated))]
    with pytest.raises(ValueError, match="unknown probing task"):
        word_labels(s, "sentiment")
    vectors = [torch.arange(3 * len(t) * 2.0).reshape(3, len(t), 2) for t in sentences[:2]]
    layers, labels, words = task_data(vectors, sentences[:2], "deprel")
    assert len(layers) == 3 and layers[1].shape == (len(sentences[0]) + len(sentences[1]), 2)
    assert labels == sentences[0].deprels + sentences[1].deprels
    assert words[0] == sentences[0].words[0].lower()
    torch.testing.assert_close(layers[2][len(sentences[0])], vectors[1][2, 0])


def test_attractors_count_nouns_of_the_other_number_between_subject_and_verb(sentences):
    checked = 0
    for s in sentences:
        for a in s.agreement:
            other = "Sing" if a.plural else "Plur"
            expected = [i for i in range(a.subject + 1, a.verb) if s.number[i] == other and s.pos[i] != "VERB"]
            assert attractors(s, a) == len(expected)
            checked += bool(expected)
    assert checked > 0  # the sample holds sentences with attractors


def test_cloze_queries_cut_the_object_out_of_every_template():
    language = SyntheticLanguage(0)
    rng = random.Random(0)
    for relation in RELATIONS:
        fact = next(f for f in language.world.facts() if f.relation == relation)
        for negated in (False, True):
            for _ in range(10):
                sentence = language.fact_sentence(fact, rng, negated)
                left, right = cloze_query(sentence)
                assert " ".join(w for w in (left, fact.object, right) if w) == sentence.text
    with pytest.raises(ValueError, match="fact sentence"):
        cloze_query(next(s for s in language.sentences(50, seed=1) if s.fact is None))


def test_the_random_twin_is_seeded_fresh_and_leaves_the_global_generator_alone():
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32))
    state = torch.random.get_rng_state()
    a, b, c = random_twin(model, 0), random_twin(model, 0), random_twin(model, 1)
    assert torch.equal(torch.random.get_rng_state(), state)
    w = "encoder.layer.0.attention.self.query.weight"
    assert torch.equal(a.state_dict()[w], b.state_dict()[w]) and not torch.equal(a.state_dict()[w], c.state_dict()[w])
    assert not torch.equal(a.state_dict()[w], model.state_dict()[w])


def tree_vectors(sentence, g):
    """Word i at the sum of one direction per edge on its path to the root (so squared distances are tree
    distances and squared norms depths), then noise coordinates."""
    position = torch.zeros(len(sentence), 32)
    for i in range(len(sentence)):
        w = i
        while sentence.heads[w]:
            position[i, w] += 1
            w = sentence.heads[w] - 1
    return torch.cat([position, torch.randn(len(sentence), 8, generator=g)], -1)


def test_structural_scores_find_the_trees_that_the_vectors_hold(sentences):
    g = torch.Generator().manual_seed(0)
    short = [s for s in sentences if len(s) <= 32]
    vectors = [tree_vectors(s, g) for s in short]
    scores = structural_scores(vectors[:50], vectors[50:], short[:50], short[50:], rank=32, steps=300, seed=0)
    assert scores["uuas"] > 0.95 and scores["root"] > 0.9
    assert scores["dspr"] > 0.9 and scores["nspr"] > 0.9
    assert len(scores["trees"]) == min(10, len(short) - 50)


def test_sense_measures_cover_every_word_and_layer(minilm):
    from lecture_lib.chapters.ch11_bertology_probing import sense_measures
    from lecture_lib.tokenization.wordpiece import WordPieceTokenizer

    model = BertModel.from_pretrained(minilm)
    measures, baseline = sense_measures(model, WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt"), seed=0)
    assert set(measures) == {"bank", "play", "restrain"} and len(baseline) == 7
    for m in measures.values():
        assert len(m.knn) == len(m.self_similarity) == 7 and m.majority == 0.5
        assert m.adjusted == pytest.approx([s - b for s, b in zip(m.self_similarity, baseline)])


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
            assert b - a >= 2 and label == {"VERB": "VP", "AUX": "VP"}.get(s.pos[head], "PP" if s.deprels[a] == "case"
                                                                             else "NP")
        for ((a, b),), label in edge_examples(s, "entity"):
            assert s.entities[a] == "B-" + label and all(e == "I-" + label for e in s.entities[a + 1:b])
        for ((h, _), (d, _)), label in edge_examples(s, "dependency"):
            assert s.heads[d] == h + 1 and s.deprels[d] == label
        for ((a, b), (c, e)), label in edge_examples(s, "relation"):
            assert (" ".join(s.words[a:b]), label, " ".join(s.words[c:e])) == (s.fact.subject, s.fact.relation,
                                                                               s.fact.object)
        [(((a, b),), negated)] = edge_examples(s, "negation")
        assert s.heads[a] == 0 and negated == str(s.negated) and "not" not in s.words[a:b]
    assert sum(bool(edge_examples(s, "relation")) for s in sentences) == sum(s.fact is not None for s in sentences)
    with pytest.raises(ValueError, match="unknown edge-probing task"):
        edge_examples(sentences[0], "coreference")


def test_span_batch_stacks_the_sentences_and_shifts_their_spans(sentences):
    vectors = [torch.arange(len(s), dtype=torch.float).expand(3, len(s))[..., None] + 100 * i
               for i, s in enumerate(sentences)]  # (layers, W, 1): the word's index, plus 100 x the sentence's
    batch, labels = span_batch(vectors, sentences, "relation")
    facts = [i for i, s in enumerate(sentences) if s.fact]
    assert batch.words.shape == (3, sum(len(sentences[i]) for i in facts), 1)
    assert labels == [sentences[i].fact.relation for i in facts]
    for (subject, obj), i in zip(batch.spans.tolist(), facts):
        [(((a, b), (c, e)), _)] = edge_examples(sentences[i], "relation")
        assert batch.words[0, subject[0]:subject[1], 0].tolist() == [100 * i + w for w in range(a, b)]
        assert batch.words[0, obj[0]:obj[1], 0].tolist() == [100 * i + w for w in range(c, e)]
