"""The harder task builders' labels against the world and the rules they state, and the new encodings
against transformers' tokenizer (real bert-base-uncased vocabulary)."""

import itertools

import pytest
import torch
from transformers import BertTokenizerFast

from lecture_lib.data.synthetic import CITIES, LAST_NAMES, ORGANISATIONS, Fact, SyntheticLanguage
from lecture_lib.finetuning.harder_tasks import (
    NLI_LABELS,
    SIMILARITY_WEIGHTS,
    choice_examples,
    context_ner_examples,
    nli_examples,
    nli_label,
    similarity,
    similarity_examples,
    unanswerable_qa_examples,
)
from lecture_lib.finetuning.tasks import (
    best_spans,
    encode_choices,
    encode_qa,
    encode_regression,
    split_people,
)
from lecture_lib.metrics import conll_chunks
from lecture_lib.runtime import seed_of
from tests.finetuning.test_tasks import Adapter


@pytest.fixture(scope="module")
def hf(minilm):
    return BertTokenizerFast.from_pretrained(str(minilm))


@pytest.fixture(scope="module")
def lang():
    return SyntheticLanguage(0)


def _entails(p, p_neg, h, h_neg, cities=CITIES, orgs=ORGANISATIONS):
    """Entailment by brute force over possible worlds: the subject lives in one city and works for one company."""

    def holds(fact, negated, city, org):
        value = {"lives_in": city, "works_for": org}[fact.relation] == fact.object
        return value != negated

    worlds = [(c, o) for c in cities for o in orgs]
    models = [w for w in worlds if holds(p, p_neg, *w)]
    if all(holds(h, h_neg, *w) for w in models):
        return "entailment"
    if not any(holds(h, h_neg, *w) for w in models):
        return "contradiction"
    return "neutral"


def test_nli_label_agrees_with_possible_worlds():
    facts = [
        Fact(r, "Anna Berg", o)
        for r, o in (("lives_in", "Oslo"), ("lives_in", "Lima"), ("works_for", "Acme"), ("works_for", "Harbor Air"))
    ]
    for (p, p_neg), (h, h_neg) in itertools.product(itertools.product(facts, (False, True)), repeat=2):
        assert NLI_LABELS[nli_label(p, p_neg, h, h_neg)] == _entails(p, p_neg, h, h_neg), (p, p_neg, h, h_neg)
    other = Fact("lives_in", "Bruno Costa", "Oslo")
    assert NLI_LABELS[nli_label(facts[0], False, other, False)] == "neutral"


def test_nli_examples_are_balanced_and_labelled_from_their_facts(lang):
    examples = nli_examples(lang, 300, seed=0)
    counts = [sum(e.label == k for e in examples) for k in range(3)]
    assert counts == [100, 100, 100]
    negated = [e for e in examples if "not" in e.words_b]
    assert {e.label for e in negated} == {0, 1, 2}  # a negation does not give the label away


def test_context_entities_rename_places_and_companies_with_surnames(lang):
    train, _ = split_people(lang.world)
    surnames = {p.name.split(" ")[1] for p in train}
    examples = context_ner_examples(lang, 400, seed=1, people=train)
    kinds_of_surnames = set()
    for e in examples:
        for kind, start, end in conll_chunks(e.tags):
            for word in e.words[start:end]:
                if word in LAST_NAMES:
                    assert word in surnames  # only the split's surnames
                    kinds_of_surnames.add(kind)
            if kind == "PER":
                assert " ".join(e.words[start:end]) in {p.name for p in train}
    assert kinds_of_surnames == {"PER", "LOC", "ORG"}
    unchanged = context_ner_examples(lang, 50, seed=1, p_rename=0.0)
    sentences = lang.sentences(50, seed=seed_of("context entity sentences", 1))
    assert [(e.words, e.tags) for e in unchanged] == [(s.words, s.entities) for s in sentences]


def test_similarity_scores_and_their_spread(lang):
    a = Fact("works_for", "Anna Berg", "Acme")
    assert similarity(a, True, a, True) == 5.0 == sum(SIMILARITY_WEIGHTS.values())
    assert similarity(a, False, Fact("lives_in", "Bruno Costa", "Oslo"), True) == 0.0
    scores = {e.score for e in similarity_examples(lang, 400, seed=0)}
    assert {0.0, 5.0} <= scores and len(scores) >= 10


def test_choice_examples_have_one_entailed_choice(lang):
    examples = choice_examples(lang, 200, seed=0)
    assert sorted({e.label for e in examples}) == [0, 1, 2, 3]
    for e in examples:
        answer = e.choices[e.label]
        assert "not" not in answer
        names = [w for w in e.context if w[0].isupper()]
        assert all(w in answer for w in names)  # same person, same object
        for k, choice in enumerate(e.choices):
            if k != e.label:
                assert "not" in choice or any(w not in choice for w in names)


def test_unanswerable_questions_ask_what_the_passage_does_not_tell(lang):
    examples = unanswerable_qa_examples(lang, 300, seed=0)
    empty = [e for e in examples if e.answer == ""]
    assert 0.2 < len(empty) / len(examples) < 0.4
    for e in empty:
        question = " ".join(e.question)
        person = next(p for p in lang.world.people if p.name in question)
        sentences = " ".join(e.passage).split(" . ")
        about = [s for s in sentences if person.name in s]
        assert about, "the question is about someone the passage names"
        keyword = "live" if "live" in question else "work"
        told = person.city if keyword == "live" else person.employer
        assert not any(told in s for s in about), (question, sentences)


def test_regression_and_choice_encodings_match_transformers(hf, lang):
    tokenizer = Adapter(hf)
    examples = similarity_examples(lang, 5, seed=3)
    encoded = encode_regression(examples, tokenizer, 64)
    theirs = hf(
        [" ".join(e.words_a) for e in examples],
        [" ".join(e.words_b) for e in examples],
        padding=True,
        return_tensors="pt",
    )
    for k in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(encoded.features[k], theirs[k])
    assert encoded.features["labels"].tolist() == [e.score for e in examples]

    choices = choice_examples(lang, 3, seed=4)
    encoded = encode_choices(choices, tokenizer, 64)
    flat = hf(
        [" ".join(e.context) for e in choices for _ in e.choices],
        [" ".join(c) for e in choices for c in e.choices],
        padding=True,
        return_tensors="pt",
    )
    assert torch.equal(encoded.features["input_ids"], flat["input_ids"].view(3, 4, -1))
    batch = encoded.batch([2, 0])
    assert batch["input_ids"].shape[:2] == (2, 4) and batch["labels"].tolist() == [choices[2].label, choices[0].label]
    assert batch["attention_mask"][:, :, -1].any()  # cut to the longest choice, no further


def test_unanswerable_questions_point_at_cls_and_the_null_threshold_decides(hf, lang):
    tokenizer = Adapter(hf)
    examples = [e for e in unanswerable_qa_examples(lang, 40, seed=5)][:12]
    with pytest.raises(ValueError, match="is not inside the passage"):
        encode_qa([e for e in examples if not e.answer], tokenizer, 96)
    encoded = encode_qa(examples, tokenizer, 96, allow_unanswerable=True)
    no_answer = torch.tensor([not e.answer for e in examples])
    assert (encoded.features["start_positions"][no_answer] == 0).all()
    assert (encoded.features["end_positions"][no_answer] == 0).all()
    # peaked logits at the gold positions: [CLS] for the unanswerable ones
    start = torch.full(encoded.features["input_ids"].shape, -5.0)
    end = start.clone()
    rows = torch.arange(len(examples))
    start[rows, encoded.features["start_positions"]] = 5.0
    end[rows, encoded.features["end_positions"]] = 5.0
    spans = best_spans(start, end, encoded, null_threshold=0.0)
    assert [(a, b) for a, b in spans] == [(e.answer_start, e.answer_end) for e in examples]
    assert all(a < b for a, b in best_spans(start, end, encoded))  # without a threshold: always a span
    assert best_spans(start, end, encoded, null_threshold=100.0) == best_spans(start, end, encoded)


def _fact_of(words, people):
    """The (fact, negated) a fact sentence of the language states, read back from its words."""
    text = " ".join(words)
    person = next(p.name for p in people if p.name in text)
    city = [c for c in CITIES if c in text]
    org = [o for o in ORGANISATIONS if o in text]
    relation, obj = ("lives_in", city[0]) if city else ("works_for", max(org, key=len))
    return Fact(relation, person, obj), "not" in words


def test_nli_labels_by_brute_force_from_the_sentences_and_no_copied_hypothesis(lang):
    examples = nli_examples(lang, 300, seed=3)
    for e in examples:
        (p, p_neg), (h, h_neg) = _fact_of(e.words_a, lang.world.people), _fact_of(e.words_b, lang.world.people)
        assert not p_neg, "the premise states a fact, as the pretraining documents do"
        expected = "neutral" if p.subject != h.subject else _entails(p, p_neg, h, h_neg)
        assert NLI_LABELS[e.label] == expected, (e.words_a, e.words_b)
        assert e.words_a != e.words_b, "a hypothesis never copies the premise's words"
    restated = [
        e
        for e in examples
        if _fact_of(e.words_a, lang.world.people)[0] == _fact_of(e.words_b, lang.world.people)[0]
        and "not" not in e.words_b
    ]
    assert restated and all(NLI_LABELS[e.label] == "entailment" for e in restated)  # the same fact in other words
