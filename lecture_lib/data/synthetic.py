"""A seeded synthetic language that knows everything about the sentences it writes.

A small probabilistic grammar writes English-like sentences, and every sentence comes with its ground
truth: part-of-speech tags (Universal Dependencies' UPOS), a dependency tree (heads and labels, UD
style), the grammatical number of nouns and finite verbs, which subject each finite verb agrees with,
named entities (people, places, organisations, in BIO tags), whether the main clause is negated, and,
for sentences that state a fact, which fact. A small *world* (who lives where, who works for whom,
where each organisation is based) is drawn from the seed, and fact sentences tell it in varied words,
so the text is consistent with one world: a model pretrained on it can learn the facts.

Subject-verb agreement crosses prepositional phrases and relative clauses whose nouns have the other
number (attractors), as in Linzen et al. (2016). Worked example: sentence 71 of
``SyntheticLanguage(seed=0).sentences(72, seed=1)``, printed with :meth:`Sentence.conllu`::

     1  those   DET     3  det         O      -
     2  kind    ADJ     3  amod        O      -
     3  nurses  NOUN   10  nsubj       O      Plur
     4  that    PRON    5  nsubj       O      -
     5  walk    VERB    3  acl:relcl   O      Plur
     6  to      ADP     8  case        O      -
     7  this    DET     8  det         O      -
     8  church  NOUN    5  obl         O      Sing
     9  are     AUX    10  cop         O      Plur
    10  kind    ADJ     0  root        O      -
    11  .       PUNCT  10  punct       O      -

    agreement: [Agreement(subject=2, verb=4, plural=True), Agreement(subject=2, verb=8, plural=True)]

"are" agrees with "nurses" across the singular attractor "church"; so does "walk", the relative
clause's verb. Heads follow CoNLL-U (1-based index of the head word, 0 for the root); labels follow
Universal Dependencies (a copula is not the head: "kind" is). Words are joined by single spaces
(``Sentence.text``), which makes character offsets simple; proper names are capitalised.

Everything is a function of the seeds: ``SyntheticLanguage(seed).sentences(n, seed=s)`` returns the same
sentences on every run. Generation is plain Python and fast: the notebook measures well over 10,000
sentences per second on one core.

Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

from lecture_lib.runtime import seed_of

# ---------------------------------------------------------------------------------------------
# The lexicon. Nouns and present-tense verbs come as (singular, plural) pairs; verbs also carry a
# past form, which shows no agreement.

ANIMATE_NOUNS = (
    ("chef", "chefs"),
    ("teacher", "teachers"),
    ("farmer", "farmers"),
    ("doctor", "doctors"),
    ("child", "children"),
    ("woman", "women"),
    ("man", "men"),
    ("student", "students"),
    ("pilot", "pilots"),
    ("baker", "bakers"),
    ("artist", "artists"),
    ("lawyer", "lawyers"),
    ("nurse", "nurses"),
    ("driver", "drivers"),
    ("dog", "dogs"),
    ("cat", "cats"),
    ("bird", "birds"),
    ("neighbour", "neighbours"),
    ("singer", "singers"),
    ("painter", "painters"),
)
PLACE_NOUNS = (
    ("store", "stores"),
    ("river", "rivers"),
    ("bridge", "bridges"),
    ("park", "parks"),
    ("house", "houses"),
    ("station", "stations"),
    ("garden", "gardens"),
    ("market", "markets"),
    ("library", "libraries"),
    ("hill", "hills"),
    ("road", "roads"),
    ("tree", "trees"),
    ("table", "tables"),
    ("window", "windows"),
    ("church", "churches"),
    ("boat", "boats"),
)
THING_NOUNS = (
    ("book", "books"),
    ("letter", "letters"),
    ("song", "songs"),
    ("box", "boxes"),
    ("car", "cars"),
    ("picture", "pictures"),
    ("cake", "cakes"),
    ("key", "keys"),
)
ADJECTIVES = (  # for animate nouns and predicates
    "happy",
    "tall",
    "old",
    "young",
    "quiet",
    "busy",
    "tired",
    "clever",
    "kind",
    "brave",
    "calm",
    "angry",
    "hungry",
    "famous",
    "small",
    "proud",
)
PLACE_ADJECTIVES = ("old", "new", "small", "big", "red", "green", "quiet", "famous", "dark", "empty")
DETERMINERS = {False: ("the", "the", "a", "this", "every"), True: ("the", "the", "some", "these", "those")}

# (third person singular, plural/base, past, what the object may be). Object kinds:
# a = animate noun, p = place noun, t = thing noun, P = person, L = location, O = organisation.
TRANSITIVE_VERBS = (
    ("likes", "like", "liked", "aptPL"),
    ("sees", "see", "saw", "aptPL"),
    ("helps", "help", "helped", "aP"),
    ("visits", "visit", "visited", "apPLO"),
    ("follows", "follow", "followed", "aP"),
    ("knows", "know", "knew", "aPL"),
    ("watches", "watch", "watched", "atP"),
    ("calls", "call", "called", "aP"),
    ("finds", "find", "found", "t"),
    ("paints", "paint", "painted", "apt"),
    ("admires", "admire", "admired", "aptPO"),
)
# (third person singular, plural/base, past, prepositions the verb takes)
INTRANSITIVE_VERBS = (
    ("runs", "run", "ran", ("to", "from", "near")),
    ("walks", "walk", "walked", ("to", "near", "behind")),
    ("sleeps", "sleep", "slept", ("near", "under", "behind", "in")),
    ("waits", "wait", "waited", ("near", "behind", "at", "in")),
    ("sings", "sing", "sang", ("near", "in", "behind")),
    ("swims", "swim", "swam", ("near", "under", "in")),
    ("sits", "sit", "sat", ("near", "under", "behind", "beside", "at")),
)
# prepositions that take a city name as well as a place noun
CITY_PREPOSITIONS = frozenset({"to", "from", "near", "in"})
SUBJECT_PREPOSITIONS = ("near", "behind", "beside", "with", "from")

FIRST_NAMES = (
    "Anna",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Lars",
    "Maya",
    "Nikos",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
    "Ulla",
    "Viktor",
    "Wanda",
    "Xavier",
    "Yara",
    "Zoltan",
    "Amara",
    "Boris",
    "Carmen",
    "Dario",
    "Esther",
    "Felix",
)
LAST_NAMES = (
    "Berg",
    "Costa",
    "Dahl",
    "Eklund",
    "Ferreira",
    "Garcia",
    "Holm",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Novak",
    "Okafor",
    "Petrov",
    "Quist",
    "Rossi",
    "Sato",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Yilmaz",
    "Zeller",
    "Abara",
    "Brandt",
    "Castell",
    "Dubois",
)
CITIES = (
    "Oslo",
    "Lima",
    "Porto",
    "Kyoto",
    "Dakar",
    "Quito",
    "Perth",
    "Turin",
    "Leeds",
    "Bergen",
    "Hanoi",
    "Riga",
    "New Harbor",
    "Port Elm",
    "San Lorel",
    "Lake Vista",
)
ORGANISATIONS = (
    "Acme",
    "Northwind Bank",
    "Bluebird Foods",
    "Kestrel Labs",
    "Orion Motors",
    "Juniper Press",
    "Granite Works",
    "Lumen Health",
    "Harbor Air",
    "Cedar Tech",
    "Falcon Media",
    "Silverline Rail",
)

# Every finite verb form and its form of the other number: flipping one breaks agreement
# (the verbs of the fact sentences and questions, FACT_VERBS, are always singular there).
OTHER_NUMBER: dict[str, str] = {}
FACT_VERBS = (
    ("is", "are"),
    ("does", "do"),
    ("has", "have"),
    ("lives", "live"),
    ("works", "work"),
    ("employs", "employ"),
)
for _sg, _pl, *_ in TRANSITIVE_VERBS + INTRANSITIVE_VERBS + FACT_VERBS:
    OTHER_NUMBER[_sg], OTHER_NUMBER[_pl] = _pl, _sg

RELATIONS = ("lives_in", "works_for", "based_in")


# ---------------------------------------------------------------------------------------------
# Annotated sentences


@dataclass(frozen=True, slots=True)
class Agreement:
    """A finite verb (0-based word index) that agrees in number with its subject's head word.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    subject: int
    verb: int
    plural: bool


@dataclass(frozen=True, slots=True)
class Fact:
    """A proposition about the world: ``Fact("lives_in", "Anna Berg", "Oslo")``.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    relation: str
    subject: str
    object: str


@dataclass(slots=True)
class Sentence:
    """One sentence and its ground truth, one entry per word.

    ``heads`` follow CoNLL-U (1-based head index, 0 for the root). ``entities`` are BIO tags over
    PER, LOC and ORG. ``number`` is ``"Sing"``, ``"Plur"`` or ``""`` (nouns, names and finite verbs
    carry it). ``agreement`` lists every finite verb with the subject it agrees with. A sentence that
    states a fact names it in ``fact``; with ``negated=True`` it says the fact does *not* hold.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    words: list[str]
    pos: list[str]
    heads: list[int]
    deprels: list[str]
    entities: list[str]
    number: list[str]
    agreement: list[Agreement] = field(default_factory=list)
    negated: bool = False
    fact: Fact | None = None

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def __len__(self) -> int:
        return len(self.words)

    def conllu(self) -> str:
        """One line per word: index, word, UPOS, head, label, entity tag, number."""
        width = max(len(w) for w in self.words)
        return "\n".join(
            f"{i + 1:>2}  {w:<{width}}  {p:<5}  {h:>2}  {d:<10}  {e:<5}  {n or '-'}"
            for i, (w, p, h, d, e, n) in enumerate(
                zip(self.words, self.pos, self.heads, self.deprels, self.entities, self.number)
            )
        )


def corrupt_agreement(sentence: Sentence) -> Sentence:
    """The same sentence with the main clause's finite verb switched to the other number.

    The main clause's verb is the last agreement entry (relative clauses come before it):
    "those kind nurses that walk to this church are kind ." -> "those kind nurses that walk to this church is kind ."

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """
    if not sentence.agreement:
        raise ValueError(f"sentence has no subject-verb agreement to break: {sentence.text!r}")
    verb = sentence.agreement[-1].verb
    words = list(sentence.words)
    words[verb] = OTHER_NUMBER[words[verb]]
    number = list(sentence.number)
    number[verb] = "Sing" if number[verb] == "Plur" else "Plur"
    return Sentence(
        words,
        list(sentence.pos),
        list(sentence.heads),
        list(sentence.deprels),
        list(sentence.entities),
        number,
        list(sentence.agreement),
        sentence.negated,
        sentence.fact,
    )


class _Builder:
    """Appends words with their annotations; heads are 0-based while building, -1 for the root."""

    __slots__ = ("words", "pos", "heads", "deprels", "entities", "number", "agreement")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.pos: list[str] = []
        self.heads: list[int] = []
        self.deprels: list[str] = []
        self.entities: list[str] = []
        self.number: list[str] = []
        self.agreement: list[Agreement] = []

    def add(self, word: str, pos: str, deprel: str = "", head: int = -1, number: str = "", entity: str = "O") -> int:
        self.words.append(word)
        self.pos.append(pos)
        self.heads.append(head)
        self.deprels.append(deprel)
        self.entities.append(entity)
        self.number.append(number)
        return len(self.words) - 1

    def attach(self, index: int, head: int, deprel: str) -> None:
        self.heads[index] = head
        self.deprels[index] = deprel

    def name(self, name: str, kind: str) -> int:
        """A proper name of one or more words: the first word heads the rest (UD's ``flat``)."""
        parts = name.split(" ")
        first = self.add(parts[0], "PROPN", number="Sing", entity="B-" + kind)
        for part in parts[1:]:
            self.add(part, "PROPN", "flat", first, "Sing", "I-" + kind)
        return first

    def sentence(self, negated: bool = False, fact: Fact | None = None) -> Sentence:
        return Sentence(
            self.words,
            self.pos,
            [h + 1 for h in self.heads],
            self.deprels,
            self.entities,
            self.number,
            self.agreement,
            negated,
            fact,
        )


# ---------------------------------------------------------------------------------------------
# Fact sentences and questions are written from templates: "word/UPOS/head/label" items with
# 1-based heads inside the template; {P}, {C}, {O} are a person, a city and an organisation;
# a '*' marks the finite verb that agrees with the subject (always singular here).

FACT_TEMPLATES = {
    ("lives_in", False): (
        "{P}/PROPN/2/nsubj lives*/VERB/0/root in/ADP/4/case {C}/PROPN/2/obl ./PUNCT/2/punct",
        "{P}/PROPN/4/nsubj is*/AUX/4/cop a/DET/4/det resident/NOUN/0/root of/ADP/6/case {C}/PROPN/4/nmod ./PUNCT/4/punct",
        "{P}/PROPN/2/nsubj has*/VERB/0/root a/DET/4/det home/NOUN/2/obj in/ADP/6/case {C}/PROPN/4/nmod ./PUNCT/2/punct",
    ),
    ("lives_in", True): (
        "{P}/PROPN/4/nsubj does*/AUX/4/aux not/PART/4/advmod live/VERB/0/root in/ADP/6/case {C}/PROPN/4/obl ./PUNCT/4/punct",
        "{P}/PROPN/5/nsubj is*/AUX/5/cop not/PART/5/advmod a/DET/5/det resident/NOUN/0/root of/ADP/7/case {C}/PROPN/5/nmod ./PUNCT/5/punct",
    ),
    ("works_for", False): (
        "{P}/PROPN/2/nsubj works*/VERB/0/root for/ADP/4/case {O}/PROPN/2/obl ./PUNCT/2/punct",
        "{O}/PROPN/2/nsubj employs*/VERB/0/root {P}/PROPN/2/obj ./PUNCT/2/punct",
        "{P}/PROPN/3/nsubj:pass is*/AUX/3/aux:pass employed/VERB/0/root by/ADP/5/case {O}/PROPN/3/obl:agent ./PUNCT/3/punct",
        "{P}/PROPN/2/nsubj has*/VERB/0/root a/DET/4/det job/NOUN/2/obj at/ADP/6/case {O}/PROPN/4/nmod ./PUNCT/2/punct",
    ),
    ("works_for", True): (
        "{P}/PROPN/4/nsubj does*/AUX/4/aux not/PART/4/advmod work/VERB/0/root for/ADP/6/case {O}/PROPN/4/obl ./PUNCT/4/punct",
        "{O}/PROPN/4/nsubj does*/AUX/4/aux not/PART/4/advmod employ/VERB/0/root {P}/PROPN/4/obj ./PUNCT/4/punct",
        "{P}/PROPN/4/nsubj:pass is*/AUX/4/aux:pass not/PART/4/advmod employed/VERB/0/root by/ADP/6/case {O}/PROPN/4/obl:agent ./PUNCT/4/punct",
    ),
    ("based_in", False): (
        "{O}/PROPN/3/nsubj:pass is*/AUX/3/aux:pass based/VERB/0/root in/ADP/5/case {C}/PROPN/3/obl ./PUNCT/3/punct",
        "{O}/PROPN/2/nsubj has*/VERB/0/root an/DET/4/det office/NOUN/2/obj in/ADP/6/case {C}/PROPN/4/nmod ./PUNCT/2/punct",
    ),
    ("based_in", True): (
        "{O}/PROPN/4/nsubj:pass is*/AUX/4/aux:pass not/PART/4/advmod based/VERB/0/root in/ADP/6/case {C}/PROPN/4/obl ./PUNCT/4/punct",
        "{O}/PROPN/4/nsubj does*/AUX/4/aux not/PART/4/advmod have/VERB/0/root an/DET/6/det office/NOUN/4/obj in/ADP/8/case {C}/PROPN/6/nmod ./PUNCT/4/punct",
    ),
}
# Questions about a fact; the answer is the slot named after the colon.
QUESTION_TEMPLATES = {
    "lives_in": (
        ("C", "where/ADV/4/advmod does*/AUX/4/aux {P}/PROPN/4/nsubj live/VERB/0/root ?/PUNCT/4/punct"),
        (
            "C",
            "in/ADP/3/case which/DET/3/det city/NOUN/6/obl does*/AUX/6/aux {P}/PROPN/6/nsubj live/VERB/0/root ?/PUNCT/6/punct",
        ),
        ("P", "who/PRON/2/nsubj lives*/VERB/0/root in/ADP/4/case {C}/PROPN/2/obl ?/PUNCT/2/punct"),
    ),
    "works_for": (
        ("O", "who/PRON/2/nsubj employs*/VERB/0/root {P}/PROPN/2/obj ?/PUNCT/2/punct"),
        (
            "O",
            "for/ADP/3/case which/DET/3/det company/NOUN/6/obl does*/AUX/6/aux {P}/PROPN/6/nsubj work/VERB/0/root ?/PUNCT/6/punct",
        ),
        ("P", "who/PRON/2/nsubj works*/VERB/0/root for/ADP/4/case {O}/PROPN/2/obl ?/PUNCT/2/punct"),
    ),
    "based_in": (
        ("C", "where/ADV/4/advmod is*/AUX/4/aux:pass {O}/PROPN/4/nsubj:pass based/VERB/0/root ?/PUNCT/4/punct"),
        (
            "C",
            "in/ADP/3/case which/DET/3/det city/NOUN/6/obl is*/AUX/6/aux:pass {O}/PROPN/6/nsubj:pass based/VERB/0/root ?/PUNCT/6/punct",
        ),
    ),
}
SLOT_KINDS = {"P": "PER", "C": "LOC", "O": "ORG"}
# which slot of a fact holds its subject and its object
RELATION_SLOTS = {"lives_in": ("P", "C"), "works_for": ("P", "O"), "based_in": ("O", "C")}


def _compile(template: str) -> tuple[tuple[str, str, int, str, bool], ...]:
    items = []
    for item in template.split(" "):
        word, pos, head, deprel = item.rsplit("/", 3)
        agrees = word.endswith("*")
        items.append((word.rstrip("*"), pos, int(head), deprel, agrees))
    return tuple(items)


_FACTS = {key: tuple(_compile(t) for t in ts) for key, ts in FACT_TEMPLATES.items()}
_QUESTIONS = {rel: tuple((slot, _compile(t)) for slot, t in ts) for rel, ts in QUESTION_TEMPLATES.items()}


def _realise(template: tuple, fillers: dict[str, str], negated: bool = False, fact: Fact | None = None) -> Sentence:
    """Expand slots into (possibly multi-word) names and resolve the template's heads to word indices."""
    b = _Builder()
    first_word = []  # template item -> index of its first word
    for word, pos, _, deprel, _ in template:
        if word[0] == "{":
            slot = word[1]
            first_word.append(b.name(fillers[slot], SLOT_KINDS[slot]))
        else:
            first_word.append(b.add(word, pos))
    subject = verb = -1
    for item, (word, pos, head, deprel, agrees) in enumerate(template):
        i = first_word[item]
        b.attach(i, first_word[head - 1] if head else -1, deprel)
        if agrees:
            verb = i
            b.number[i] = "Sing"
        if deprel.startswith("nsubj"):
            subject = i
    if verb >= 0:
        b.agreement.append(Agreement(subject, verb, False))
    return b.sentence(negated, fact)


# ---------------------------------------------------------------------------------------------
# The world


@dataclass(frozen=True, slots=True)
class Person:
    """Someone in the world: their full name, the city they live in, the organisation they work for.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    name: str
    city: str
    employer: str


@dataclass(frozen=True)
class World:
    """Who lives where and works for whom, and where each organisation is based.

    >>> world = World.generate(seed=0, num_people=3)
    >>> len(world.people), world.holds(world.facts()[0])
    (3, True)

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    people: tuple[Person, ...]
    based_in: dict[str, str]
    by_name: dict[str, Person] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {p.name: p for p in self.people})

    @classmethod
    def generate(cls, seed: int, num_people: int) -> "World":
        if not 1 <= num_people <= len(FIRST_NAMES) * len(LAST_NAMES):
            raise ValueError(f"num_people must be in [1, {len(FIRST_NAMES) * len(LAST_NAMES)}], got {num_people}")
        rng = random.Random(seed_of("world", seed))
        names = rng.sample([f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES], num_people)
        based_in = {org: rng.choice(CITIES) for org in ORGANISATIONS}
        people = tuple(Person(n, rng.choice(CITIES), rng.choice(ORGANISATIONS)) for n in names)
        return cls(people, based_in)

    def facts(self, person: Person | None = None) -> list[Fact]:
        """Every fact of the world (or the facts about one person)."""
        people = self.people if person is None else (person,)
        facts = [f for p in people for f in (Fact("lives_in", p.name, p.city), Fact("works_for", p.name, p.employer))]
        if person is None:
            facts += [Fact("based_in", org, city) for org, city in self.based_in.items()]
        return facts

    def holds(self, fact: Fact) -> bool:
        if fact.relation == "based_in":
            return self.based_in.get(fact.subject) == fact.object
        person = self.person(fact.subject)
        return (person.city if fact.relation == "lives_in" else person.employer) == fact.object

    def person(self, name: str) -> Person:
        if name not in self.by_name:
            raise ValueError(f"no person named {name!r} in this world")
        return self.by_name[name]


# ---------------------------------------------------------------------------------------------
# The grammar


@dataclass
class GrammarConfig:
    """Probabilities of the grammar's choices, and the size of the world.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    num_people: int = 160
    p_fact: float = 0.3  # a sentence states a fact of the world (else the free grammar)
    p_plural: float = 0.5  # a common-noun phrase is plural
    p_adjective: float = 0.3
    p_name_subject: float = 0.15  # the subject is a person's name
    p_subject_pp: float = 0.25  # the subject noun carries a prepositional phrase
    p_subject_rc: float = 0.3  # ... or a relative clause
    p_rc_present: float = 0.5  # the relative clause is in the present tense (its verb agrees too)
    p_negation: float = 0.2
    p_entity_object: float = 0.3  # an object or a prepositional object is a name


class SyntheticLanguage:
    """The grammar plus its world, both fixed by ``seed``.

    >>> lang = SyntheticLanguage(seed=0)
    >>> s = lang.sentences(1, seed=1)[0]
    >>> len(s.words) == len(s.pos) == len(s.heads) == len(s.entities)
    True

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """

    def __init__(self, seed: int = 0, config: GrammarConfig | None = None) -> None:
        self.seed = seed
        self.config = config or GrammarConfig()
        self.world = World.generate(seed, self.config.num_people)

    # -- sampling ---------------------------------------------------------------------------
    def sentences(self, n: int, seed: int, people: Sequence[Person] | None = None) -> list[Sentence]:
        """``n`` sentences drawn with their own seed (same seed, same sentences).

        ``people`` restricts the persons named to a subset of the world (to hold names out of a split).
        """
        rng = random.Random(seed_of("sentences", seed))
        return [self.sentence(rng, people) for _ in range(n)]

    def sentence(self, rng: random.Random, people: Sequence[Person] | None = None) -> Sentence:
        """A fact of the world told in some words (probability ``p_fact``), else a free sentence."""
        people = people or self.world.people
        if rng.random() < self.config.p_fact:
            return self.fact_sentence(self._true_fact(rng, people), rng)
        return self.grammar_sentence(rng, people=people)

    def documents(
        self, n: int, seed: int, sentences_per_document: int = 6, people: Sequence[Person] | None = None
    ) -> list[list[Sentence]]:
        """``n`` short documents, each about two people (for next-sentence prediction)."""
        rng = random.Random(seed_of("documents", seed))
        return [self.document(rng, sentences_per_document, people) for _ in range(n)]

    def document(
        self, rng: random.Random, num_sentences: int, people: Sequence[Person] | None = None
    ) -> list[Sentence]:
        """Facts about two people, mixed with free sentences that name only those two; a fact already
        told is often told again in other words, as texts restate what they said."""
        pair = rng.sample(people or self.world.people, 2)
        facts = [f for p in pair for f in self.world.facts(p)]
        told: list[Fact] = []
        out = []
        for _ in range(num_sentences):
            r = rng.random()
            if told and r < 0.35:
                out.append(self.fact_sentence(rng.choice(told), rng))
            elif r < 0.7:
                told.append(rng.choice(facts))
                out.append(self.fact_sentence(told[-1], rng))
            else:
                out.append(self.grammar_sentence(rng, people=pair))
        return out

    def _true_fact(self, rng: random.Random, people: Sequence[Person]) -> Fact:
        if rng.random() < 0.2:
            org = rng.choice(ORGANISATIONS)
            return Fact("based_in", org, self.world.based_in[org])
        p = rng.choice(people)
        return Fact("lives_in", p.name, p.city) if rng.random() < 0.5 else Fact("works_for", p.name, p.employer)

    # -- facts and questions ----------------------------------------------------------------
    def fact_sentence(self, fact: Fact, rng: random.Random, negated: bool = False) -> Sentence:
        """``fact`` in one of its wordings; ``negated=True`` says that it does not hold."""
        if fact.relation not in RELATIONS:
            raise ValueError(f"unknown relation {fact.relation!r}; expected one of {RELATIONS}")
        subject_slot, object_slot = RELATION_SLOTS[fact.relation]
        template = rng.choice(_FACTS[fact.relation, negated])
        return _realise(template, {subject_slot: fact.subject, object_slot: fact.object}, negated, fact)

    def question(self, fact: Fact, rng: random.Random, ask_subject: bool | None = None) -> tuple[Sentence, str]:
        """A question whose answer is the fact's object (or its subject, where the relation allows).

        >>> q, answer = SyntheticLanguage(0).question(Fact("lives_in", "Anna Berg", "Oslo"), random.Random(0), False)
        >>> q.text, answer
        ('in which city does Anna Berg live ?', 'Oslo')
        """
        subject_slot, object_slot = RELATION_SLOTS[fact.relation]
        options = _QUESTIONS[fact.relation]
        if ask_subject is not None:
            options = tuple(o for o in options if (o[0] == subject_slot) == ask_subject)
            if not options:
                raise ValueError(f"no question asks for the subject of {fact.relation!r}")
        slot, template = rng.choice(options)
        fillers = {subject_slot: fact.subject, object_slot: fact.object}
        return _realise(template, fillers), fillers[slot]

    # -- the free grammar -------------------------------------------------------------------
    def grammar_sentence(
        self, rng: random.Random, subject_name: str | None = None, people: Sequence[Person] | None = None
    ) -> Sentence:
        """Subject (with an optional PP or relative clause), then a copular, transitive or
        intransitive predicate, optionally negated, then a full stop. Names come from ``people``."""
        c = self.config
        people = people or self.world.people
        b = _Builder()
        if subject_name is not None or rng.random() < c.p_name_subject:
            subject = b.name(subject_name or rng.choice(people).name, "PER")
            plural = False
        else:
            plural = rng.random() < c.p_plural
            subject = self._common_np(b, rng, ANIMATE_NOUNS, plural)
            r = rng.random()
            if r < c.p_subject_pp:
                self._pp(b, rng, rng.choice(SUBJECT_PREPOSITIONS), subject, "nmod")
            elif r < c.p_subject_pp + c.p_subject_rc:
                self._relative_clause(b, rng, subject, plural, people)
        negated = rng.random() < c.p_negation
        kind = rng.random()
        if kind < 0.3:  # copula: is/are (not) ADJ
            verb = b.add("are" if plural else "is", "AUX", number="Plur" if plural else "Sing")
            if negated:
                b.add("not", "PART", "advmod", verb + 2)
            root = b.add(rng.choice(ADJECTIVES), "ADJ")
            b.attach(verb, root, "cop")
        else:
            transitive = kind < 0.7
            sg, pl, _, arg = rng.choice(TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS)
            number = "Plur" if plural else "Sing"
            if negated:
                verb = b.add("do" if plural else "does", "AUX", number=number)
                b.add("not", "PART", "advmod", verb + 2)
                root = b.add(pl, "VERB")
                b.attach(verb, root, "aux")
            else:
                root = verb = b.add(pl if plural else sg, "VERB", number=number)
            if transitive:
                self._object(b, rng, arg, root, "obj", people)
            elif rng.random() < 0.8:
                self._pp(b, rng, rng.choice(arg), root, "obl")
        b.attach(root, -1, "root")
        b.attach(subject, root, "nsubj")
        b.agreement.append(Agreement(subject, verb, plural))
        b.add(".", "PUNCT", "punct", root)
        return b.sentence(negated)

    def attractor_sentence(
        self, rng: random.Random, attractors: int, chain: int = 2, subjects: Sequence[tuple[str, str]] = ANIMATE_NOUNS
    ) -> Sentence:
        """A sentence built to test agreement across attractors (Linzen et al. 2016): an animate subject (a noun
        of ``subjects``, a subset of :data:`ANIMATE_NOUNS`), a chain of ``chain`` prepositional phrases each
        attached to the noun before it, and a present-tense predicate (a copula with an adjective, or an
        intransitive verb) that agrees with the subject. Exactly ``attractors`` of the chain's nouns, drawn at
        random, have the other number than the subject; the rest share its number, so that every count comes
        with the same length and shape:
        "the chef near the stores behind the bridge is happy ." has one attractor.

        >>> s = SyntheticLanguage(0).attractor_sentence(random.Random(0), attractors=2)
        >>> [s.number[i] for i in range(len(s)) if s.pos[i] == "NOUN"].count(s.number[s.agreement[0].verb])
        1

        Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
        """
        if not 0 <= attractors <= chain:
            raise ValueError(f"attractors must be in [0, chain={chain}], got {attractors}")
        if not subjects or not set(subjects) <= set(ANIMATE_NOUNS):
            raise ValueError(f"subjects must be a non-empty subset of ANIMATE_NOUNS, got {subjects!r}")
        b = _Builder()
        plural = rng.random() < self.config.p_plural
        subject = previous = self._common_np(b, rng, tuple(subjects), plural)
        other = set(rng.sample(range(chain), attractors))
        for link in range(chain):
            prep = b.add(rng.choice(SUBJECT_PREPOSITIONS[:-2]), "ADP", "case")  # near, behind, beside
            noun = self._common_np(b, rng, PLACE_NOUNS, plural != (link in other))
            b.attach(prep, noun, "case")
            b.attach(noun, previous, "nmod")
            previous = noun
        number = "Plur" if plural else "Sing"
        if rng.random() < 0.5:
            verb = b.add("are" if plural else "is", "AUX", number=number)
            root = b.add(rng.choice(ADJECTIVES), "ADJ")
            b.attach(verb, root, "cop")
        else:
            sg, pl, *_ = rng.choice(INTRANSITIVE_VERBS)
            root = verb = b.add(pl if plural else sg, "VERB", number=number)
        b.attach(root, -1, "root")
        b.attach(subject, root, "nsubj")
        b.agreement.append(Agreement(subject, verb, plural))
        b.add(".", "PUNCT", "punct", root)
        return b.sentence()

    def _common_np(self, b: _Builder, rng: random.Random, nouns: tuple, plural: bool) -> int:
        """DET (ADJ) NOUN; returns the noun's index (its own head and label are set by the caller)."""
        det = b.add(rng.choice(DETERMINERS[plural]), "DET", "det")
        adjectives = ADJECTIVES if nouns[0] in ANIMATE_NOUNS else PLACE_ADJECTIVES  # people's, or places
        adj = b.add(rng.choice(adjectives), "ADJ", "amod") if rng.random() < self.config.p_adjective else -1
        noun = b.add(rng.choice(nouns)[plural], "NOUN", number="Plur" if plural else "Sing")
        b.heads[det] = noun
        if adj >= 0:
            b.heads[adj] = noun
        return noun

    def _pp(self, b: _Builder, rng: random.Random, preposition: str, head: int, deprel: str) -> None:
        prep = b.add(preposition, "ADP", "case")
        if preposition in CITY_PREPOSITIONS and rng.random() < self.config.p_entity_object:
            noun = b.name(rng.choice(CITIES), "LOC")
        else:
            nouns = ANIMATE_NOUNS if preposition == "with" else PLACE_NOUNS
            noun = self._common_np(b, rng, nouns, rng.random() < self.config.p_plural)
        b.attach(prep, noun, "case")
        b.attach(noun, head, deprel)

    def _object(
        self, b: _Builder, rng: random.Random, kinds: str, head: int, deprel: str, people: Sequence[Person]
    ) -> None:
        kind = rng.choice(kinds)
        entity_kinds = [k for k in kinds if k in "PLO"]
        if entity_kinds and rng.random() < self.config.p_entity_object:
            kind = rng.choice(entity_kinds)
        elif kind in "PLO":
            kind = rng.choice([k for k in kinds if k in "apt"])
        if kind == "P":
            noun = b.name(rng.choice(people).name, "PER")
        elif kind == "L":
            noun = b.name(rng.choice(CITIES), "LOC")
        elif kind == "O":
            noun = b.name(rng.choice(ORGANISATIONS), "ORG")
        else:
            nouns = {"a": ANIMATE_NOUNS, "p": PLACE_NOUNS, "t": THING_NOUNS}[kind]
            noun = self._common_np(b, rng, nouns, rng.random() < self.config.p_plural)
        b.attach(noun, head, deprel)

    def _relative_clause(
        self, b: _Builder, rng: random.Random, antecedent: int, plural: bool, people: Sequence[Person]
    ) -> None:
        """who/that + verb: a present-tense verb agrees with the antecedent, a past one shows nothing."""
        rel = b.add(rng.choice(("who", "that")), "PRON")
        present = rng.random() < self.config.p_rc_present
        if rng.random() < 0.6:
            sg, pl, past, kinds = rng.choice(TRANSITIVE_VERBS)
            verb = b.add(
                (pl if plural else sg) if present else past,
                "VERB",
                number=("Plur" if plural else "Sing") if present else "",
            )
            self._object(b, rng, kinds, verb, "obj", people)
        else:
            sg, pl, past, preps = rng.choice(INTRANSITIVE_VERBS)
            verb = b.add(
                (pl if plural else sg) if present else past,
                "VERB",
                number=("Plur" if plural else "Sing") if present else "",
            )
            self._pp(b, rng, rng.choice(preps), verb, "obl")
        b.attach(rel, verb, "nsubj")
        b.attach(verb, antecedent, "acl:relcl")
        if present:
            b.agreement.append(Agreement(antecedent, verb, plural))
