"""The synthetic language's annotations, checked against rules written independently of its generator."""

import dataclasses
import random

import pytest

from lecture_lib.data.synthetic import (
    ADJECTIVES,
    ANIMATE_NOUNS,
    CITIES,
    INTRANSITIVE_VERBS,
    ORGANISATIONS,
    PLACE_ADJECTIVES,
    PLACE_NOUNS,
    THING_NOUNS,
    TRANSITIVE_VERBS,
    Fact,
    GrammarConfig,
    SyntheticLanguage,
    World,
    corrupt_agreement,
)

LANG = SyntheticLanguage(seed=0)
SENTENCES = LANG.sentences(3000, seed=1) + [s for d in LANG.documents(50, seed=2) for s in d]

NOUNS = ANIMATE_NOUNS + PLACE_NOUNS + THING_NOUNS
SINGULAR_NOUNS = {sg for sg, _ in NOUNS}
PLURAL_NOUNS = {pl for _, pl in NOUNS}
SINGULAR_VERBS = {v[0] for v in TRANSITIVE_VERBS + INTRANSITIVE_VERBS} | {
    "is",
    "does",
    "has",
    "lives",
    "works",
    "employs",
}
PLURAL_VERBS = {v[1] for v in TRANSITIVE_VERBS + INTRANSITIVE_VERBS} | {"are", "do", "have", "live", "work", "employ"}
# which UPOS each dependency label may attach
LABEL_POS = {
    "det": {"DET"},
    "amod": {"ADJ"},
    "case": {"ADP"},
    "cop": {"AUX"},
    "aux": {"AUX"},
    "aux:pass": {"AUX"},
    "advmod": {"PART", "ADV"},
    "punct": {"PUNCT"},
    "flat": {"PROPN"},
    "acl:relcl": {"VERB"},
    "nsubj": {"NOUN", "PROPN", "PRON"},
    "nsubj:pass": {"PROPN"},
    "obj": {"NOUN", "PROPN"},
    "obl": {"NOUN", "PROPN"},
    "obl:agent": {"PROPN"},
    "nmod": {"NOUN", "PROPN"},
    "root": {"VERB", "ADJ", "NOUN"},
}


def test_same_seed_same_sentences_and_world():
    again = SyntheticLanguage(seed=0)
    assert [s.words for s in again.sentences(200, seed=1)] == [s.words for s in SENTENCES[:200]]
    assert [s.heads for s in again.sentences(200, seed=1)] == [s.heads for s in SENTENCES[:200]]
    assert again.world == LANG.world
    assert SyntheticLanguage(seed=1).world != LANG.world
    assert [s.words for s in LANG.sentences(50, seed=9)] != [s.words for s in LANG.sentences(50, seed=10)]


def test_the_worked_example_in_the_docstring_is_what_the_language_writes():
    import lecture_lib.data.synthetic as synthetic

    sentence = SyntheticLanguage(seed=0).sentences(72, seed=1)[71]
    assert sentence.conllu() in "\n".join(line[4:] for line in synthetic.__doc__.splitlines())
    assert f"agreement: {sentence.agreement}" in synthetic.__doc__
    assert corrupt_agreement(sentence).text in synthetic.corrupt_agreement.__doc__


def test_annotations_have_one_entry_per_word():
    for s in SENTENCES:
        n = len(s.words)
        assert n == len(s.pos) == len(s.heads) == len(s.deprels) == len(s.entities) == len(s.number) > 2


def test_every_dependency_tree_is_a_projective_tree():
    for s in SENTENCES:
        n = len(s)
        assert s.heads.count(0) == 1, s.conllu()
        assert all(0 <= h <= n and h != i + 1 for i, h in enumerate(s.heads)), s.conllu()
        for i in range(n):  # following heads from any word reaches the root without a cycle
            seen, j = set(), i + 1
            while j != 0:
                assert j not in seen, s.conllu()
                seen.add(j)
                j = s.heads[j - 1]
        arcs = [tuple(sorted((i + 1, h))) for i, h in enumerate(s.heads) if h]
        for a, b in arcs:  # no two arcs cross
            assert not any(a < c < b < d for c, d in arcs), s.conllu()


def test_labels_agree_with_parts_of_speech():
    for s in SENTENCES:
        for word, pos, head, deprel in zip(s.words, s.pos, s.heads, s.deprels):
            assert (head == 0) == (deprel == "root"), s.conllu()
            assert pos in LABEL_POS[deprel], (word, pos, deprel, s.text)
        assert s.words[-1] == "." and s.deprels[-1] == "punct"


def test_subject_verb_agreement_is_right_by_construction():
    with_attractor = 0
    for s in SENTENCES:
        assert s.agreement, s.text
        for a in s.agreement:
            subject, verb = s.words[a.subject], s.words[a.verb]
            if s.pos[a.subject] == "PROPN":
                subject_plural = False
            else:
                assert subject in SINGULAR_NOUNS | PLURAL_NOUNS
                subject_plural = subject in PLURAL_NOUNS
            assert subject_plural == a.plural, s.text
            assert verb in (PLURAL_VERBS if a.plural else SINGULAR_VERBS), s.text
            assert s.number[a.verb] == ("Plur" if a.plural else "Sing")
            # the verb is the subject's head, the copula or auxiliary of that head, or (relative clause) its dependent
            head = s.heads[a.subject] - 1
            assert a.verb == head or s.heads[a.verb] - 1 == head or s.heads[a.verb] - 1 == a.subject, s.conllu()
        main = s.agreement[-1]
        between = range(main.subject + 1, main.verb)
        with_attractor += any(s.pos[i] == "NOUN" and (s.words[i] in PLURAL_NOUNS) != main.plural for i in between)
    assert with_attractor > 0.1 * len(SENTENCES)  # agreement across an attractor is common


def test_corrupting_agreement_changes_only_the_main_verb_number():
    for s in SENTENCES[:500]:
        bad = corrupt_agreement(s)
        changed = [i for i, (x, y) in enumerate(zip(s.words, bad.words)) if x != y]
        main = s.agreement[-1]
        assert changed == [main.verb]
        assert bad.words[main.verb] in (SINGULAR_VERBS if main.plural else PLURAL_VERBS)
    with pytest.raises(ValueError, match="no subject-verb agreement"):
        corrupt_agreement(dataclasses.replace(SENTENCES[0], agreement=[]))


def test_entities_are_well_formed_names_of_the_right_kind():
    people = {p.name for p in LANG.world.people}
    kinds = {"PER": people, "LOC": set(CITIES), "ORG": set(ORGANISATIONS)}
    for s in SENTENCES:
        i = 0
        while i < len(s):
            tag = s.entities[i]
            assert not tag.startswith("I-"), s.text  # every entity starts with B-
            if tag.startswith("B-"):
                j = i + 1
                while j < len(s) and s.entities[j] == "I-" + tag[2:]:
                    j += 1
                assert " ".join(s.words[i:j]) in kinds[tag[2:]], s.text
                assert all(p == "PROPN" for p in s.pos[i:j])
                i = j
            else:
                assert s.pos[i] != "PROPN" and not s.words[i][0].isupper(), s.text
                i += 1


def test_fact_sentences_are_true_in_the_world_and_negation_is_marked():
    facts = [s for s in SENTENCES if s.fact is not None]
    assert len(facts) > 500
    for s in SENTENCES:
        assert s.negated == ("not" in s.words), s.text
        if s.fact is not None:
            assert LANG.world.holds(s.fact) and not s.negated
            assert s.fact.subject in s.text and s.fact.object in s.text
    rng = random.Random(0)
    person = LANG.world.people[0]
    wrong = next(c for c in CITIES if c != person.city)
    negated = LANG.fact_sentence(Fact("lives_in", person.name, wrong), rng, negated=True)
    assert negated.negated and "not" in negated.words and not LANG.world.holds(negated.fact)


def test_questions_name_their_answer_slot():
    rng = random.Random(0)
    for person in LANG.world.people[:20]:
        q, answer = LANG.question(Fact("lives_in", person.name, person.city), rng, ask_subject=False)
        assert answer == person.city and person.name in q.text and q.words[-1] == "?"
        q, answer = LANG.question(Fact("works_for", person.name, person.employer), rng, ask_subject=True)
        assert answer == person.name and person.employer in q.text


def test_world_is_consistent():
    world = World.generate(seed=3, num_people=40)
    assert len({p.name for p in world.people}) == 40
    assert all(world.holds(f) for f in world.facts())
    p = world.people[0]
    assert not world.holds(Fact("lives_in", p.name, next(c for c in CITIES if c != p.city)))


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="num_people must be in"):
        World.generate(seed=0, num_people=0)
    with pytest.raises(ValueError, match="unknown relation 'born_in'"):
        LANG.fact_sentence(Fact("born_in", "Anna Berg", "Oslo"), random.Random(0))
    with pytest.raises(ValueError, match="no person named 'Nobody'"):
        LANG.world.person("Nobody")
    with pytest.raises(ValueError, match="no question asks for the subject"):
        LANG.question(Fact("based_in", "Acme", "Oslo"), random.Random(0), ask_subject=True)


def test_config_changes_the_mixture():
    no_facts = SyntheticLanguage(0, GrammarConfig(p_fact=0.0, p_negation=1.0)).sentences(200, seed=0)
    assert all(s.fact is None and s.negated for s in no_facts)


def test_attractor_sentences_hold_exactly_the_attractors_asked_for_and_agree_with_their_subject():
    rng = random.Random(0)
    for attractors in (0, 1, 2, 3):
        for _ in range(50):
            s = LANG.attractor_sentence(rng, attractors, chain=3)
            [agreement] = s.agreement
            subject_number = s.number[agreement.subject]
            between = [i for i in range(agreement.subject + 1, agreement.verb) if s.pos[i] == "NOUN"]
            assert len(between) == 3 and sum(s.number[i] != subject_number for i in between) == attractors
            verb = s.words[agreement.verb]
            assert verb in (PLURAL_VERBS if agreement.plural else SINGULAR_VERBS)
            assert (subject_number == "Plur") == agreement.plural == (s.words[agreement.subject] in PLURAL_NOUNS)
            assert s.heads.count(0) == 1 and s.deprels[s.heads.index(0)] == "root"
            for i in between:  # each prepositional noun hangs on the noun before it
                assert s.deprels[i] == "nmod" and s.pos[s.heads[i] - 1] == "NOUN" and s.heads[i] - 1 < i
    with pytest.raises(ValueError, match="attractors"):
        LANG.attractor_sentence(rng, 3, chain=2)


def test_attractor_sentences_draw_their_subjects_from_the_subset_given():
    rng = random.Random(1)
    subjects = [("chef", "chefs"), ("child", "children")]
    drawn = [LANG.attractor_sentence(rng, 1, subjects=subjects) for _ in range(60)]
    assert {s.words[s.agreement[0].subject] for s in drawn} == {"chef", "chefs", "child", "children"}
    # a people noun keeps the adjectives of people, as with the whole list
    adjectives = [s.words[s.agreement[0].subject - 1] for s in drawn if s.pos[s.agreement[0].subject - 1] == "ADJ"]
    assert adjectives and set(adjectives) <= set(ADJECTIVES) and not set(adjectives) <= set(PLACE_ADJECTIVES)
    for bad in ([], [("store", "stores")]):
        with pytest.raises(ValueError, match="subset of ANIMATE_NOUNS"):
            LANG.attractor_sentence(rng, 1, subjects=bad)
