"""The four task shapes of BERT's fine-tuning figure (Devlin et al. 2019, Figure 4), built offline from the
synthetic language, and their encoding into the tensors the heads read.

- single sentence -> class: **acceptability** (as CoLA): is subject-verb agreement respected? Half of
  the sentences have their main verb switched to the other number; attractors make it hard;
- sentence pair -> class: **entailment** (as MNLI, two classes): a premise states or denies a fact
  about a person; does the hypothesis, worded its own way, follow from it or contradict it?
- sentence -> one tag per word: **named entities** (as CoNLL-2003): PER, LOC, ORG in BIO tags;
- question + passage -> span: **question answering** (as SQuAD v1.1): the answer is a span of the
  passage, predicted as a start and an end token.

The builders return word-level examples; the ``encode_*`` functions turn them into ``[CLS] A [SEP]
(B [SEP])`` token ids with any WordPiece-like tokenizer (one that has ``encode(text) -> ids`` without
special tokens, and ``cls_token_id``, ``sep_token_id``, ``pad_token_id``). Words are encoded one at a
time, so every token knows the word it came from (``word_ids``): a tag goes to the first sub-word of
its word and the others get -100, as in the BERT paper's NER set-up.

A split can hold the names of some people out (``split_people``): a model fine-tuned on one set of
people is tested on sentences about others, whom only pretraining has shown it.

Taught in: 05_bert_finetuning ("Four task shapes").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import torch

from lecture_lib.data.synthetic import (
    CITIES,
    FIRST_NAMES,
    LAST_NAMES,
    ORGANISATIONS,
    Fact,
    Person,
    SyntheticLanguage,
    World,
    corrupt_agreement,
)
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.objectives.sentence_pairs import truncate_pair
from lecture_lib.runtime import epoch_batch, seed_of
from lecture_lib.tokenization.wordpiece import frame_ids, pad_ids

ACCEPTABILITY_LABELS = ("unacceptable", "acceptable")
ENTAILMENT_LABELS = ("entailment", "contradiction")
NER_LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")


class Tokenizer(Protocol):
    """What the encoders need from a tokenizer (a WordPiece tokenizer, or an adapter around one).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    cls_token_id: int
    sep_token_id: int
    pad_token_id: int

    def encode(self, text: str) -> list[int]: ...


# ---------------------------------------------------------------------------------------------
# Word-level examples


@dataclass
class ClassificationExample:
    """One sentence (``words_b`` None) or a sentence pair, and its class index.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    words_a: list[str]
    label: int
    words_b: list[str] | None = None


@dataclass
class TaggingExample:
    """A sentence's words and their BIO entity tags, one per word.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    words: list[str]
    tags: list[str]


@dataclass
class QAExample:
    """A question, a passage, and the answer's word span ``passage[answer_start:answer_end]``.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    question: list[str]
    passage: list[str]
    answer_start: int
    answer_end: int

    @property
    def answer(self) -> str:
        return " ".join(self.passage[self.answer_start : self.answer_end])


def split_people(world: World) -> tuple[tuple[Person, ...], tuple[Person, ...]]:
    """(train, test) people whose names share no part: the first and last names of the lexicon are cut
    in two halves; train people take both names from the first halves, test people from the second.

    People who mix the halves belong to neither split (pretraining text still names them, as it names
    everyone). A model fine-tuned on the train people thus meets, at test time, names whose words it
    never saw in fine-tuning: only pretraining can have shown them.

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language", "Four task shapes").
    """
    first, last = set(FIRST_NAMES[: len(FIRST_NAMES) // 2]), set(LAST_NAMES[: len(LAST_NAMES) // 2])
    train, test = [], []
    for person in world.people:
        given, family = person.name.split(" ")
        if given in first and family in last:
            train.append(person)
        elif given not in first and family not in last:
            test.append(person)
    if len(train) < 3 or len(test) < 3:
        raise ValueError(
            f"expected at least 3 people on each side of the split, got {len(train)} and {len(test)}: "
            f"the world of {len(world.people)} people is too small"
        )
    return tuple(train), tuple(test)


def acceptability_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[ClassificationExample]:
    """Sentences labelled 1 (acceptable) or 0 (main verb in the wrong number), half and half.

    >>> lang = SyntheticLanguage(0)
    >>> for e in acceptability_examples(lang, 4, seed=7)[::2]:
    ...     print(e.label, " ".join(e.words_a))
    0 every pilot that sat near this empty market are not famous .
    0 these painters who sit under this church does not swim .

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    rng = random.Random(seed_of("acceptability", seed))
    examples = []
    for i in range(n):
        sentence = lang.sentence(rng, people)
        acceptable = i % 2 == 0
        if not acceptable:
            sentence = corrupt_agreement(sentence)
        examples.append(ClassificationExample(sentence.words, int(acceptable)))
    rng.shuffle(examples)
    return examples


def entailment_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[ClassificationExample]:
    """(premise, hypothesis) pairs: 0 = the hypothesis follows from the premise, 1 = it contradicts it.

    The premise states, or denies, where a person lives or whom they work for; the hypothesis says the
    same thing again in its own wording (entailment) or says the opposite (contradiction):

        premise: Anna Berg is not a resident of Oslo .
        hypothesis: Anna Berg does not live in Oslo .     -> entailment
        hypothesis: Anna Berg lives in Oslo .             -> contradiction

    The object is drawn at random, not from the world, so the premise alone decides the label.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    people = people or lang.world.people
    rng = random.Random(seed_of("entailment", seed))
    examples = []
    for i in range(n):
        fact, _ = _random_fact(rng, people)
        denied = rng.random() < 0.5
        entailed = i % 2 == 0
        premise = lang.fact_sentence(fact, rng, negated=denied)
        hypothesis = lang.fact_sentence(fact, rng, negated=denied != (not entailed))
        examples.append(ClassificationExample(premise.words, 0 if entailed else 1, hypothesis.words))
    rng.shuffle(examples)
    return examples


def _random_fact(rng: random.Random, people: Sequence[Person]) -> tuple[Fact, tuple[str, ...]]:
    """A person's residence or employer drawn at random (not the world's), and the objects it was drawn from."""
    person = rng.choice(people)
    relation = rng.choice(("lives_in", "works_for"))
    objects = CITIES if relation == "lives_in" else ORGANISATIONS
    return Fact(relation, person.name, rng.choice(objects)), objects


def object_swap_entailment_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[ClassificationExample]:
    """(premise, hypothesis) pairs whose contradictions change the *object* instead of negating; neither
    sentence is ever negated, so the one cue is a city or employer to compare with the premise's
    (0 = entailment, 1 = contradiction, half and half)::

        premise: Anna Berg lives in Oslo .
        hypothesis: Anna Berg is a resident of Oslo .   -> entailment
        hypothesis: Anna Berg lives in Lima .           -> contradiction (another city of the language)

    Exercise 1 of chapter 05: the contradiction rule that swaps the object.
    """
    people = people or lang.world.people
    rng = random.Random(seed_of("object-swap entailment", seed))
    examples = []
    for i in range(n):
        fact, objects = _random_fact(rng, people)
        entailed = i % 2 == 0
        claim = (
            fact
            if entailed
            else Fact(fact.relation, fact.subject, rng.choice([o for o in objects if o != fact.object]))
        )
        examples.append(
            ClassificationExample(
                lang.fact_sentence(fact, rng).words, 0 if entailed else 1, lang.fact_sentence(claim, rng).words
            )
        )
    rng.shuffle(examples)
    return examples


def ner_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[TaggingExample]:
    """Sentences of the language with their BIO entity tags.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    return [TaggingExample(s.words, s.entities) for s in lang.sentences(n, seed, people)]


def _find(words: list[str], phrase: list[str], start: int = 0) -> int:
    for i in range(start, len(words) - len(phrase) + 1):
        if words[i : i + len(phrase)] == phrase:
            return i
    raise ValueError(f"{' '.join(phrase)!r} does not occur in {' '.join(words)!r}")


def qa_examples(
    lang: SyntheticLanguage,
    n: int,
    seed: int,
    people: Sequence[Person] | None = None,
    people_per_passage: int = 2,
    sentences_per_passage: int = 4,
) -> list[QAExample]:
    """Passages of facts about a few people (and where one employer is based), one question each.

    The passage tells ``sentences_per_passage`` of those facts, always the one asked about; the answer
    span is taken in the sentence that states it. "Who lives in C?" is asked only when one person of
    the passage is said to live in C, so every question has one right answer.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    people = people or lang.world.people
    rng = random.Random(seed_of("question answering", seed))
    examples = []
    for _ in range(n):
        group = rng.sample(people, people_per_passage)
        facts = [f for p in group for f in lang.world.facts(p)]
        org = rng.choice(group).employer
        facts.append(Fact("based_in", org, lang.world.based_in[org]))
        target = rng.choice(facts)
        facts = [target] + rng.sample([f for f in facts if f != target], min(len(facts) - 1, sentences_per_passage - 1))
        rng.shuffle(facts)
        sentences = [lang.fact_sentence(f, rng) for f in facts]
        same_object = [f for f in facts if f.relation == target.relation and f.object == target.object]
        ask_subject = target.relation != "based_in" and len(same_object) == 1 and rng.random() < 0.3
        question, answer = lang.question(target, rng, ask_subject)
        k = facts.index(target)
        start = sum(len(s) for s in sentences[:k]) + _find(sentences[k].words, answer.split(" "))
        passage = [w for s in sentences for w in s.words]
        examples.append(QAExample(question.words, passage, start, start + len(answer.split(" "))))
    return examples


# ---------------------------------------------------------------------------------------------
# Encoding


class WordEncoder:
    """Encodes word lists one word at a time (memoised: the language has a closed vocabulary).

    ``encode(words)`` returns (ids, word_ids), ``word_ids[t]`` being the index of the word that token t
    came from; with a vocabulary that splits "Lindqvist" into "lind ##q ##vist"::

        ["Anna", "Lindqvist", "sings"]  ->  ids of [anna, lind, ##q, ##vist, sings], word_ids [0, 1, 1, 1, 2]

    The callers add the special tokens.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.cache: dict[str, list[int]] = {}

    def word(self, word: str) -> list[int]:
        ids = self.cache.get(word)
        if ids is None:
            ids = list(self.tokenizer.encode(word))
            if not ids:
                raise ValueError(f"the tokenizer turned the word {word!r} into no tokens")
            self.cache[word] = ids
        return ids

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        ids, word_ids = [], []
        for i, w in enumerate(words):
            pieces = self.word(w)
            ids.extend(pieces)
            word_ids.extend([i] * len(pieces))
        return ids, word_ids


@dataclass
class EncodedTask:
    """A task's tensors, (N,) or (N, T, ...) right-padded along T (labels as the head wants them), and
    for each example the word index of every token (-1 for special tokens and question tokens).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    features: dict[str, torch.Tensor]
    word_ids: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return self.features["input_ids"].shape[0]

    def batch(self, indices: torch.Tensor | Sequence[int]) -> dict[str, torch.Tensor]:
        """The rows ``indices``, cut to their longest sequence (less padding, less compute)."""
        indices = torch.as_tensor(indices, dtype=torch.long)
        length = int(self.features["attention_mask"][indices].sum(1).max())
        return {k: v[indices, :length] if v.dim() >= 2 else v[indices] for k, v in self.features.items()}

    def batches(self, batch_size: int, seed: int) -> Callable[[int], dict[str, torch.Tensor]]:
        """``batch_fn(i)`` for :func:`lecture_lib.train.train`: epochs of a seeded shuffle, one batch per step."""
        n = len(self)
        if not 1 <= batch_size <= n:
            raise ValueError(f"expected batch_size in [1, {n}], got {batch_size}")

        def batch_fn(step: int) -> dict[str, torch.Tensor]:
            return self.batch(epoch_batch(step, n, batch_size, "fine-tuning order", seed)[1])

        return batch_fn


def _frame(ids_a: list[int], ids_b: list[int] | None, tokenizer: Tokenizer) -> tuple[list[int], list[int], list[int]]:
    """:func:`lecture_lib.tokenization.wordpiece.frame_ids` with ``tokenizer``'s ``[CLS]`` and ``[SEP]``."""
    return frame_ids(ids_a, ids_b, cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id)


def _features(ids: list[list[int]], types: list[list[int]], pad_token_id: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": pad_ids(ids, pad_token_id),
        "token_type_ids": pad_ids(types, 0),
        "attention_mask": pad_ids([[1] * len(r) for r in ids], 0),
    }


def _encode_pairs(
    pairs: Sequence[tuple[list[str], list[str] | None]], tokenizer: Tokenizer, max_length: int
) -> dict[str, torch.Tensor]:
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` per (A, B or None): a pair trimmed longest-first, a
    single sentence cut at its end, to ``max_length`` tokens."""
    words = WordEncoder(tokenizer)
    all_ids, all_types = [], []
    for words_a, words_b in pairs:
        a, _ = words.encode(words_a)
        if words_b is None:
            a, b = a[: max_length - 2], None
        else:
            a, b = truncate_pair(a, words.encode(words_b)[0], max_length - 3)
        ids, types, _ = _frame(a, b, tokenizer)
        all_ids.append(ids)
        all_types.append(types)
    return _features(all_ids, all_types, tokenizer.pad_token_id)


def encode_classification(
    examples: Sequence[ClassificationExample], tokenizer: Tokenizer, max_length: int, num_labels: int
) -> EncodedTask:
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` with ``labels`` (N,).

    A pair longer than ``max_length`` is trimmed longest-first (:func:`lecture_lib.objectives.sentence_pairs.truncate_pair`);
    a single sentence loses its end.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    if not examples:
        raise ValueError("expected at least one example, got none")
    for n, example in enumerate(examples):
        if not 0 <= example.label < num_labels:
            raise ValueError(f"example {n}: label {example.label} is outside the label set 0..{num_labels - 1}")
    features = _encode_pairs([(e.words_a, e.words_b) for e in examples], tokenizer, max_length)
    features["labels"] = torch.tensor([e.label for e in examples], dtype=torch.long)
    return EncodedTask(features)


def encode_regression(examples: Sequence, tokenizer: Tokenizer, max_length: int, scale: float = 1.0) -> EncodedTask:
    """``[CLS] A [SEP] B [SEP]`` with real-valued ``labels`` (N,), each example's ``score`` times ``scale``
    (STS-B's shape, for a head with ``num_labels=1``).

    A target of the size of a fresh head's outputs (``scale=1/5`` for STS-B's 0-5) trains faster: AdamW
    moves each weight by about the learning rate per step, so a head that starts near 0 needs many steps
    to reach targets near 2.5. Correlations do not change with the scale.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    if not examples:
        raise ValueError("expected at least one example, got none")
    features = _encode_pairs([(e.words_a, e.words_b) for e in examples], tokenizer, max_length)
    features["labels"] = torch.tensor([float(e.score) * scale for e in examples])
    return EncodedTask(features)


class EncodedChoices(EncodedTask):
    """A multiple-choice task's tensors: (N, C, T) inputs, (N,) labels.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """

    def batch(self, indices: torch.Tensor | Sequence[int]) -> dict[str, torch.Tensor]:
        """The rows ``indices``, cut to the longest sequence of any of their choices."""
        indices = torch.as_tensor(indices, dtype=torch.long)
        length = int(self.features["attention_mask"][indices].sum(-1).max())
        return {k: v[indices, :, :length] if v.dim() == 3 else v[indices] for k, v in self.features.items()}


def encode_choices(examples: Sequence, tokenizer: Tokenizer, max_length: int) -> EncodedChoices:
    """``[CLS] context [SEP] choice [SEP]`` for every choice of every example: inputs (N, C, T), and
    ``labels`` (N,) the index of the right choice (SWAG's shape, for :class:`BertForMultipleChoice`).

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    if not examples:
        raise ValueError("expected at least one example, got none")
    choices = len(examples[0].choices)
    for n, example in enumerate(examples):
        if len(example.choices) != choices:
            raise ValueError(f"example {n}: expected {choices} choices like example 0, got {len(example.choices)}")
        if not 0 <= example.label < choices:
            raise ValueError(f"example {n}: label {example.label} is not one of the choices 0..{choices - 1}")
    flat = _encode_pairs([(e.context, c) for e in examples for c in e.choices], tokenizer, max_length)
    features = {k: v.view(len(examples), choices, -1) for k, v in flat.items()}
    features["labels"] = torch.tensor([e.label for e in examples], dtype=torch.long)
    return EncodedChoices(features)


def encode_tagging(
    examples: Sequence[TaggingExample], tokenizer: Tokenizer, max_length: int, labels: Sequence[str] = NER_LABELS
) -> EncodedTask:
    """``[CLS] words [SEP]``; each word's tag on its first sub-word, -100 on the rest and on specials.

    Worked example (the tokenizer splits "Kowalski" into "kowal ##ski")::

        tokens    [CLS]  Anna   Kowal  ##ski  sings  .  [SEP]
        word_ids  -1     0      1      1      2      3  -1
        labels    -100   B-PER  I-PER  -100   O      O  -100

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    if not examples:
        raise ValueError("expected at least one example, got none")
    index = {tag: i for i, tag in enumerate(labels)}
    words = WordEncoder(tokenizer)
    all_ids, all_word_ids, all_labels = [], [], []
    for n, example in enumerate(examples):
        if len(example.words) != len(example.tags):
            raise ValueError(f"example {n}: {len(example.words)} words but {len(example.tags)} tags")
        unknown = sorted(set(example.tags) - set(index))
        if unknown:
            raise ValueError(f"example {n}: tags {unknown} are outside the label set {list(labels)}")
        ids, word_ids = words.encode(example.words)
        if len(ids) + 2 > max_length:
            raise ValueError(f"example {n} needs {len(ids) + 2} tokens, more than max_length={max_length}")
        row = [IGNORE_INDEX] * len(ids)
        for t, w in enumerate(word_ids):
            if t == 0 or word_ids[t - 1] != w:
                row[t] = index[example.tags[w]]
        all_ids.append(_frame(ids, None, tokenizer)[0])
        all_word_ids.append([-1, *word_ids, -1])
        all_labels.append([IGNORE_INDEX, *row, IGNORE_INDEX])
    features = _features(all_ids, [[0] * len(r) for r in all_ids], tokenizer.pad_token_id)
    features["labels"] = pad_ids(all_labels, IGNORE_INDEX)
    return EncodedTask(features, all_word_ids)


def encode_qa(
    examples: Sequence[QAExample], tokenizer: Tokenizer, max_length: int, allow_unanswerable: bool = False
) -> EncodedTask:
    """``[CLS] question [SEP] passage [SEP]`` with ``start_positions`` and ``end_positions`` (N,): the
    first sub-word of the answer's first word and the last sub-word of its last word.

    With ``allow_unanswerable``, an example whose answer span is empty (``answer_start ==
    answer_end``) has no answer in its passage, and both its positions point at ``[CLS]`` (index 0),
    as in BERT's SQuAD 2.0 fine-tuning.

    There is no sliding window here: a passage that does not fit next to its question is an error,
    as are an empty passage, an empty question, and a question that leaves no room for any passage.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    if not examples:
        raise ValueError("expected at least one example, got none")
    words = WordEncoder(tokenizer)
    all_ids, all_types, all_word_ids, starts, ends = [], [], [], [], []
    for n, example in enumerate(examples):
        if not example.passage:
            raise ValueError(f"example {n}: the passage is empty")
        if not example.question:
            raise ValueError(f"example {n}: the question is empty")
        unanswerable = allow_unanswerable and example.answer_start == example.answer_end
        if not unanswerable and not 0 <= example.answer_start < example.answer_end <= len(example.passage):
            raise ValueError(
                f"example {n}: answer span [{example.answer_start}, {example.answer_end}) is not "
                f"inside the passage of {len(example.passage)} words"
            )
        question, _ = words.encode(example.question)
        if len(question) > max_length - 4:
            raise ValueError(
                f"example {n}: the question has {len(question)} tokens; with [CLS], two [SEP] and at "
                f"least one passage token it must be at most max_length - 4 = {max_length - 4}"
            )
        passage, passage_word_ids = words.encode(example.passage)
        if len(question) + len(passage) + 3 > max_length:
            raise ValueError(
                f"example {n}: question and passage need {len(question) + len(passage) + 3} tokens, "
                f"more than max_length={max_length}"
            )
        ids, types, _ = _frame(question, passage, tokenizer)
        offset = len(question) + 2
        word_ids = [-1] * offset + passage_word_ids + [-1]
        if unanswerable:
            starts.append(0)
            ends.append(0)
        else:
            starts.append(word_ids.index(example.answer_start))
            ends.append(len(word_ids) - 1 - word_ids[::-1].index(example.answer_end - 1))
        all_ids.append(ids)
        all_types.append(types)
        all_word_ids.append(word_ids)
    features = _features(all_ids, all_types, tokenizer.pad_token_id)
    features["start_positions"] = torch.tensor(starts)
    features["end_positions"] = torch.tensor(ends)
    return EncodedTask(features, all_word_ids)


# ---------------------------------------------------------------------------------------------
# Decoding predictions back to words


def word_tags(logits: torch.Tensor, encoded: EncodedTask, labels: Sequence[str] = NER_LABELS) -> list[list[str]]:
    """Per example, the tag predicted at each word's first sub-word. ``logits`` (N, T, num_labels).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    predicted = logits.argmax(-1).tolist()
    out = []
    for row, word_ids in zip(predicted, encoded.word_ids):
        out.append([labels[row[t]] for t, w in enumerate(word_ids) if w >= 0 and (t == 0 or word_ids[t - 1] != w)])
    return out


def best_spans(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    encoded: EncodedTask,
    max_answer_tokens: int = 8,
    null_threshold: float | None = None,
) -> list[tuple[int, int]]:
    """Per example, the passage word span [start, end) maximising start score + end score.

    As in BERT's SQuAD code: the start and end tokens must lie in the passage, end >= start, and the
    span may hold at most ``max_answer_tokens`` tokens. Logits are (N, T).

    With ``null_threshold`` (SQuAD 2.0), the answer is the empty span (0, 0), "no answer", when the
    null score, start and end both at ``[CLS]``, beats the best span's score by more than the threshold:
    ``s_0 + e_0 > max_{i<=j} (s_i + e_j) + null_threshold``.

    Taught in: 05_bert_finetuning ("Four task shapes", "Harder tasks and three more shapes").
    """
    spans = []
    length = start_logits.shape[1]
    allowed = torch.ones(length, length, dtype=torch.bool).triu().tril(max_answer_tokens - 1)  # (T, T): s <= e < s + k
    for n, word_ids in enumerate(encoded.word_ids):
        in_passage = torch.zeros(length, dtype=torch.bool)
        in_passage[: len(word_ids)] = torch.tensor(word_ids) >= 0
        scores = start_logits[n][:, None] + end_logits[n][None, :]  # (T, T)
        mask = allowed & in_passage[:, None] & in_passage[None, :]
        best = int(scores.masked_fill(~mask, float("-inf")).argmax())
        start, end = divmod(best, length)
        if null_threshold is not None and float(scores[0, 0]) > float(scores[start, end]) + null_threshold:
            spans.append((0, 0))
        else:
            spans.append((word_ids[start], word_ids[end] + 1))
    return spans
