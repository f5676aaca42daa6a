"""Harder tasks, and the task shapes BERT's Figure 4 leaves out, built from the synthetic language with
their ground truth.

The first four tasks (:mod:`lecture_lib.finetuning.tasks`) saturate: an entity's type is fixed by the
word itself, and a contradiction is always a negation. These builders take away the shortcuts:

- **context entities** (CoNLL-2003, the hard part): the surnames of the world also name places and
  companies. "Weber" is a person in "Anna Weber sings", a city in "Bruno Costa lives in Weber", a
  company in "Weber Foods employs Anna Costa": only the words around it tell which;
- **three-way inference** (MNLI): entailment, *neutral* and contradiction, and contradictions that are
  not negations. A person lives in one city and works for one company, so "lives in Oslo" contradicts
  "lives in Lima" and entails "does not live in Lima", while "does not live in Oslo" says nothing about
  Lima (neutral), nor does anything said about where someone lives say whom they work for;
- **similarity** (STS-B, regression): how much two fact sentences share, a real number in [0, 5];
- **multiple choice** (SWAG's shape): a context and four candidate sentences, one of which follows
  from it; the other three are minimal edits of it (another person, another object, a negation);
- **question answering with unanswerable questions** (SQuAD 2.0): about a quarter of the questions
  ask about a fact the passage does not state; the right answer is then the empty string.

Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from lecture_lib.data.synthetic import CITIES, ORGANISATIONS, Fact, Person, SyntheticLanguage
from lecture_lib.finetuning.tasks import ClassificationExample, QAExample, TaggingExample, qa_examples
from lecture_lib.metrics import conll_chunks
from lecture_lib.runtime import seed_of

NLI_LABELS = ("entailment", "neutral", "contradiction")
SIMILARITY_WEIGHTS = {"relation": 2.0, "polarity": 1.5, "subject": 1.0, "object": 0.5}  # they sum to 5
COMPANY_SUFFIXES = tuple(sorted({org.split(" ")[-1] for org in ORGANISATIONS if " " in org}))


@dataclass
class RegressionExample:
    """A sentence pair and a real-valued score (STS-B: similarity from 0 to 5).

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """

    words_a: list[str]
    words_b: list[str]
    score: float


@dataclass
class ChoiceExample:
    """A context, candidate continuations, and the index of the right one.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """

    context: list[str]
    choices: list[list[str]]
    label: int


def _surnames(people: Sequence[Person]) -> list[str]:
    return sorted({p.name.split(" ")[-1] for p in people})


def context_ner_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None, p_rename: float = 0.5
) -> list[TaggingExample]:
    """Sentences of the language whose places and companies are often (``p_rename``) named after the
    surnames of ``people``: a place becomes the bare surname, a company the surname and a company word.

    >>> for e in context_ner_examples(SyntheticLanguage(0), 8, seed=0)[1::3]:
    ...     print(" ".join(f"{w}/{t}" if t != "O" else w for w, t in zip(e.words, e.tags)))
    some neighbours that swim near Okafor/B-LOC sit .
    Sato/B-ORG Media/I-ORG employs Boris/B-PER Zeller/I-PER .
    Sato/B-ORG Media/I-ORG is based in Eklund/B-LOC .

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    people = people or lang.world.people
    surnames = _surnames(people)
    rng = random.Random(seed_of("context entities", seed))
    examples = []
    for sentence in lang.sentences(n, seed_of("context entity sentences", seed), people):
        words, tags, done = [], [], 0
        for kind, start, end in conll_chunks(sentence.entities):
            words += sentence.words[done:start]
            tags += sentence.entities[done:start]
            if kind == "PER" or rng.random() >= p_rename:
                words += sentence.words[start:end]
                tags += sentence.entities[start:end]
            elif kind == "LOC":
                words.append(rng.choice(surnames))
                tags.append("B-LOC")
            else:
                words += [rng.choice(surnames), rng.choice(COMPANY_SUFFIXES)]
                tags += ["B-ORG", "I-ORG"]
            done = end
        examples.append(TaggingExample(words + sentence.words[done:], tags + sentence.entities[done:]))
    return examples


def nli_label(premise: Fact, premise_negated: bool, hypothesis: Fact, hypothesis_negated: bool) -> int:
    """The index in :data:`NLI_LABELS` of (premise, hypothesis), for ``lives_in`` and ``works_for``:
    everyone lives in exactly one city and works for exactly one company.

    >>> oslo, lima = Fact("lives_in", "Anna Berg", "Oslo"), Fact("lives_in", "Anna Berg", "Lima")
    >>> [NLI_LABELS[nli_label(oslo, False, h, neg)] for h, neg in ((lima, False), (lima, True))]
    ['contradiction', 'entailment']
    >>> NLI_LABELS[nli_label(oslo, True, lima, False)]  # not in Oslo: Lima is possible, not certain
    'neutral'

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    if (premise.relation, premise.subject) != (hypothesis.relation, hypothesis.subject):
        return NLI_LABELS.index("neutral")
    if premise.object == hypothesis.object:
        return NLI_LABELS.index("entailment" if premise_negated == hypothesis_negated else "contradiction")
    if premise_negated:
        return NLI_LABELS.index("neutral")
    return NLI_LABELS.index("entailment" if hypothesis_negated else "contradiction")


def _random_fact(rng: random.Random, name: str, relation: str | None = None) -> Fact:
    """Where ``name`` lives or whom they work for, with a random object (not the world's)."""
    relation = relation or rng.choice(("lives_in", "works_for"))
    return Fact(relation, name, rng.choice(CITIES if relation == "lives_in" else ORGANISATIONS))


def _edit(fact: Fact, rng: random.Random, people: Sequence[Person], part: str) -> Fact:
    """The fact with its subject, relation or object replaced by a different one."""
    if part == "subject":
        other = rng.choice([p for p in people if p.name != fact.subject])
        return Fact(fact.relation, other.name, fact.object)
    if part == "relation":
        return _random_fact(rng, fact.subject, "works_for" if fact.relation == "lives_in" else "lives_in")
    objects = CITIES if fact.relation == "lives_in" else ORGANISATIONS
    return Fact(fact.relation, fact.subject, rng.choice([o for o in objects if o != fact.object]))


def nli_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[ClassificationExample]:
    """(premise, hypothesis) pairs labelled by :func:`nli_label`, a third of each label.

    The premise states a random fact (not the world's: the premise alone decides), as the pretraining
    documents state facts; the hypothesis keeps the fact, or changes its object, relation or person, and
    is negated or not. The label is drawn first, then a hypothesis with that label, so no surface feature
    predicts it: a negation is as often an entailment as a contradiction, and so is a change of city. A
    hypothesis that restates the premise's fact is worded differently (never the premise's own words).

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    people = people or lang.world.people
    rng = random.Random(seed_of("three-way inference", seed))
    examples = []
    for i in range(n):
        target = i % len(NLI_LABELS)
        premise = _random_fact(rng, rng.choice(people).name)
        while True:
            part = rng.choice(("same", "same", "object", "object", "relation", "subject"))
            hypothesis = premise if part == "same" else _edit(premise, rng, people, part)
            hypothesis_denied = rng.random() < 0.5
            if nli_label(premise, False, hypothesis, hypothesis_denied) == target:
                break
        premise_words = lang.fact_sentence(premise, rng).words
        hypothesis_words = premise_words
        while hypothesis_words == premise_words:  # every fact has at least two wordings
            hypothesis_words = lang.fact_sentence(hypothesis, rng, hypothesis_denied).words
        examples.append(ClassificationExample(premise_words, target, hypothesis_words))
    return examples


def similarity(a: Fact, a_negated: bool, b: Fact, b_negated: bool) -> float:
    """How much two statements share, from 0 to 5: the :data:`SIMILARITY_WEIGHTS` of the parts they
    have in common (person, relation, object, and whether both affirm or both deny).

    >>> similarity(Fact("lives_in", "Anna Berg", "Oslo"), False, Fact("lives_in", "Anna Berg", "Lima"), True)
    3.0

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    same = {
        "subject": a.subject == b.subject,
        "relation": a.relation == b.relation,
        "object": a.object == b.object,
        "polarity": a_negated == b_negated,
    }
    return sum(weight for part, weight in SIMILARITY_WEIGHTS.items() if same[part])


def similarity_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[RegressionExample]:
    """Pairs of fact sentences scored by :func:`similarity`: the second keeps each part of the first
    with probability 1/2, in its own wording, so every score from 0 to 5 occurs.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    people = people or lang.world.people
    rng = random.Random(seed_of("similarity", seed))
    examples = []
    for _ in range(n):
        a, a_negated = _random_fact(rng, rng.choice(people).name), rng.random() < 0.5
        b = a
        for part in ("subject", "relation", "object"):
            if rng.random() < 0.5 and not (part == "object" and b.relation != a.relation):
                b = _edit(b, rng, people, part)
        b_negated = a_negated if rng.random() < 0.5 else not a_negated
        examples.append(
            RegressionExample(
                lang.fact_sentence(a, rng, a_negated).words,
                lang.fact_sentence(b, rng, b_negated).words,
                similarity(a, a_negated, b, b_negated),
            )
        )
    return examples


def choice_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None, num_choices: int = 4
) -> list[ChoiceExample]:
    """A fact as context and ``num_choices`` candidate sentences: the fact again in other words (the
    answer), and edits of it that do not follow, three of four kinds: the negation, the other relation,
    another object, another person; each in its own wording.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    if not 2 <= num_choices <= 5:
        raise ValueError(f"expected 2 to 5 choices (the answer and up to four kinds of edit), got {num_choices}")
    people = people or lang.world.people
    rng = random.Random(seed_of("multiple choice", seed))
    examples = []
    for _ in range(n):
        fact = _random_fact(rng, rng.choice(people).name)
        edits = rng.sample(("negation", "relation", "object", "subject"), num_choices - 1)
        choices = [lang.fact_sentence(fact, rng).words]
        for edit in edits:
            negated = edit == "negation"
            choices.append(lang.fact_sentence(fact if negated else _edit(fact, rng, people, edit), rng, negated).words)
        order = rng.sample(range(num_choices), num_choices)
        examples.append(ChoiceExample(lang.fact_sentence(fact, rng).words, [choices[k] for k in order], order.index(0)))
    return examples


def unanswerable_qa_examples(
    lang: SyntheticLanguage,
    n: int,
    seed: int,
    people: Sequence[Person] | None = None,
    people_per_passage: int = 2,
    sentences_per_passage: int = 3,
    p_unanswerable: float = 0.4,
) -> list[QAExample]:
    """:func:`~lecture_lib.finetuning.tasks.qa_examples`, where each passage that leaves a fact about
    one of its people untold (about two in three), with probability ``p_unanswerable``, gets a question
    it cannot answer: where that person lives when only their employer is given, or the reverse. Such an example has the empty
    answer span (``answer_start == answer_end == 0``), SQuAD 2.0's empty answer.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    people = people or lang.world.people
    answerable = qa_examples(lang, n, seed, people, people_per_passage, sentences_per_passage)
    rng = random.Random(seed_of("unanswerable questions", seed))
    examples = []
    for example in answerable:
        passage = " ".join(example.passage)
        untold = [
            f
            for p in people
            if p.name in passage
            for f in lang.world.facts(p)
            if f.relation != "based_in" and not _states(passage, f)
        ]
        if untold and rng.random() < p_unanswerable:
            question, _ = lang.question(rng.choice(untold), rng, ask_subject=False)
            example = QAExample(question.words, example.passage, 0, 0)
        examples.append(example)
    return examples


def _states(passage: str, fact: Fact) -> bool:
    """Whether a passage of fact sentences tells ``fact``'s relation for its subject, in any of the
    affirmative wordings of :data:`~lecture_lib.data.synthetic.FACT_TEMPLATES`."""
    if fact.relation == "lives_in":
        return any(f"{fact.subject} {w}" in passage for w in ("lives in", "is a resident", "has a home"))
    return any(
        phrase in passage
        for phrase in (
            f"{fact.subject} works",
            f"employs {fact.subject}",
            f"{fact.subject} is employed",
            f"{fact.subject} has a job",
        )
    )
