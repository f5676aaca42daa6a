"""The task builders' labels against the world and the lexicon, and their encodings against transformers'
BertTokenizerFast (real bert-base-uncased WordPiece vocabulary, word_ids and offsets)."""

import pytest
import torch
from transformers import BertTokenizerFast

from lecture_lib.data.synthetic import (
    ANIMATE_NOUNS,
    CITIES,
    FACT_VERBS,
    INTRANSITIVE_VERBS,
    ORGANISATIONS,
    PLACE_NOUNS,
    THING_NOUNS,
    TRANSITIVE_VERBS,
    SyntheticLanguage,
    World,
)
from lecture_lib.finetuning.tasks import (
    IGNORE_INDEX,
    NER_LABELS,
    ClassificationExample,
    QAExample,
    TaggingExample,
    acceptability_examples,
    best_spans,
    encode_classification,
    encode_qa,
    encode_tagging,
    entailment_examples,
    ner_examples,
    object_swap_entailment_examples,
    qa_examples,
    split_people,
    word_tags,
)


@pytest.fixture(scope="module")
def hf(minilm):
    """transformers' tokenizer with the real bert-base-uncased WordPiece vocabulary, read offline."""
    return BertTokenizerFast.from_pretrained(str(minilm))


class Adapter:
    """transformers' tokenizer seen through the interface the encoders use."""

    def __init__(self, hf):
        self.hf = hf
        self.cls_token_id, self.sep_token_id, self.pad_token_id = hf.cls_token_id, hf.sep_token_id, hf.pad_token_id

    def encode(self, text):
        return self.hf.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def tokenizer(hf):
    return Adapter(hf)


LANG = SyntheticLanguage(seed=0)
TRAIN_PEOPLE, TEST_PEOPLE = split_people(LANG.world)
NOUNS = ANIMATE_NOUNS + PLACE_NOUNS + THING_NOUNS
SINGULAR_VERBS = {v[0] for v in TRANSITIVE_VERBS + INTRANSITIVE_VERBS + FACT_VERBS}
PLURAL_VERBS = {v[1] for v in TRANSITIVE_VERBS + INTRANSITIVE_VERBS + FACT_VERBS}


def _agrees(words):
    """An oracle for this grammar, written from its surface: the subject is the first noun or name
    (names are singular); the main finite verb is the last present-tense form, or the auxiliary two
    words before it when "not" precedes it (the bare form after "does not")."""
    first = next(w for w in words if w[0].isupper() or any(w in pair for pair in NOUNS))
    subject_plural = not first[0].isupper() and any(w == first for _, w in NOUNS)
    i = max(i for i, w in enumerate(words) if w in SINGULAR_VERBS | PLURAL_VERBS)
    if words[i - 1] == "not" and words[i] in PLURAL_VERBS and words[i - 2] in {"does", "do"}:
        i -= 2
    return (words[i] in PLURAL_VERBS) == subject_plural


def test_acceptability_labels_follow_agreement():
    examples = acceptability_examples(LANG, 600, seed=0, people=TRAIN_PEOPLE)
    assert sum(e.label for e in examples) == 300
    for e in examples:
        assert _agrees(e.words_a) == bool(e.label), " ".join(e.words_a)


def _statement(words):
    """(person, relation, object, negated) read off a fact sentence with the lexicon."""
    text = " ".join(words)
    person = next(p.name for p in LANG.world.people if p.name in text)
    city = [c for c in CITIES if f" {c} " in f" {text} "]
    org = [o for o in ORGANISATIONS if f" {o} " in f" {text} "]
    relation, obj = ("lives_in", city[0]) if city else ("works_for", org[0])
    return person, relation, obj, "not" in words


def test_entailment_labels_follow_the_premise():
    examples = entailment_examples(LANG, 400, seed=0, people=TRAIN_PEOPLE)
    assert sum(e.label for e in examples) == 200
    rewordings = denials = 0
    for e in examples:
        person, relation, obj, negated = _statement(e.words_b)
        premise = _statement(e.words_a)
        assert premise[:3] == (person, relation, obj)  # the same fact...
        assert e.label == (0 if negated == premise[3] else 1), (" ".join(e.words_a), " ".join(e.words_b))
        rewordings += [w for w in e.words_a if w != "not"] != [w for w in e.words_b if w != "not"]
        denials += premise[3]
    assert rewordings > 100 and 150 < denials < 250  # ...often in other words, and denied about half the time


def test_exercise_1_object_swap_contradictions_change_only_the_object():
    """Exercise 1: half the pairs contradict; read off with the lexicon, premise and hypothesis name the same person
    and relation, never a "not", and the object differs exactly in the contradictions (a city for a city, an employer
    for an employer); hypotheses are often reworded, so the object is the one cue."""
    examples = object_swap_entailment_examples(LANG, 400, seed=0, people=TRAIN_PEOPLE)
    assert sum(e.label for e in examples) == 200
    rewordings = cities = 0
    for e in examples:
        premise, hypothesis = _statement(e.words_a), _statement(e.words_b)
        assert premise[:2] == hypothesis[:2] and premise[0] in {p.name for p in TRAIN_PEOPLE}
        assert not premise[3] and not hypothesis[3], (" ".join(e.words_a), " ".join(e.words_b))
        assert e.label == (premise[2] != hypothesis[2]), (" ".join(e.words_a), " ".join(e.words_b))
        assert (premise[2] in CITIES) == (hypothesis[2] in CITIES)
        rewordings += e.label == 0 and e.words_a != e.words_b
        cities += premise[1] == "lives_in"
    assert rewordings > 50 and 150 < cities < 250


def test_qa_answers_occur_in_their_passages_and_are_right():
    for e in qa_examples(LANG, 300, seed=0, people=TRAIN_PEOPLE):
        assert e.answer == " ".join(e.passage[e.answer_start : e.answer_end])
        question = " ".join(e.question)
        if e.answer in ORGANISATIONS and "based" not in question:  # who employs P / for which company ...
            person = next(p for p in LANG.world.people if p.name in question)
            assert e.answer == person.employer
        elif e.answer in CITIES and "based" in question:
            org = next(o for o in ORGANISATIONS if o in question)
            assert e.answer == LANG.world.based_in[org]
        elif e.answer in CITIES:
            assert e.answer == next(p for p in LANG.world.people if p.name in question).city
        else:  # who lives in C / who works for O: the passage says so of one person only
            person = LANG.world.person(e.answer)
            place = person.city if person.city in question else person.employer
            assert place in question
            sentences = " ".join(e.passage).split(" . ")
            said = {p.name for p in LANG.world.people for s in sentences if p.name in s and f" {place}" in f" {s}"}
            assert said == {person.name}


def test_the_split_shares_no_name_and_training_sets_name_only_training_people():
    train_parts = {part for p in TRAIN_PEOPLE for part in p.name.split()}
    test_parts = {part for p in TEST_PEOPLE for part in p.name.split()}
    assert len(TRAIN_PEOPLE) >= 20 and len(TEST_PEOPLE) >= 20 and not train_parts & test_parts
    words = {w for e in ner_examples(LANG, 500, seed=0, people=TRAIN_PEOPLE) for w in e.words}
    words |= {w for e in qa_examples(LANG, 100, seed=0, people=TRAIN_PEOPLE) for w in e.passage}
    words |= {w for e in entailment_examples(LANG, 100, seed=0, people=TRAIN_PEOPLE) for w in e.words_a + e.words_b}
    assert not words & test_parts and train_parts <= words


def _aligned_labels_with_transformers(hf, example):
    """The BERT NER convention computed from transformers' own word_ids()."""
    encoding = hf(example.words, is_split_into_words=True)
    labels, previous = [], None
    for w in encoding.word_ids():
        labels.append(IGNORE_INDEX if w is None or w == previous else NER_LABELS.index(example.tags[w]))
        previous = w
    return encoding["input_ids"], labels


def test_tagging_alignment_matches_transformers_word_ids(hf, tokenizer):
    examples = ner_examples(LANG, 300, seed=1)
    examples.append(
        TaggingExample(["Xanthippe", "Quarmby", "visits", "Northwindbank", "."], ["B-PER", "I-PER", "O", "B-ORG", "O"])
    )  # words the vocabulary splits
    encoded = encode_tagging(examples, tokenizer, max_length=64)
    assert len(hf) == 30522 and hf.unk_token_id not in encoded.features["input_ids"]
    split_words = 0
    for n, example in enumerate(examples):
        ids, labels = _aligned_labels_with_transformers(hf, example)
        length = len(ids)
        assert encoded.features["input_ids"][n, :length].tolist() == ids
        assert encoded.features["labels"][n, :length].tolist() == labels
        assert (encoded.features["labels"][n, length:] == IGNORE_INDEX).all()
        assert encoded.features["attention_mask"][n].sum() == length
        split_words += length - 2 > len(example.words)
    assert split_words > 10  # the vocabulary splits some words (kowalski ##ville, north ##wind ##bank)


def test_word_tags_recover_the_tags_from_perfect_logits(tokenizer):
    examples = ner_examples(LANG, 50, seed=2)
    encoded = encode_tagging(examples, tokenizer, max_length=64)
    gold = encoded.features["labels"].clamp(min=0)
    logits = torch.nn.functional.one_hot(gold, len(NER_LABELS)).float()
    assert word_tags(logits, encoded) == [e.tags for e in examples]


def test_pair_encoding_matches_transformers(hf, tokenizer):
    examples = entailment_examples(LANG, 50, seed=3)
    encoded = encode_classification(examples, tokenizer, max_length=128, num_labels=2)
    for n, e in enumerate(examples):
        ref = hf(" ".join(e.words_a), " ".join(e.words_b))
        k = len(ref["input_ids"])
        assert encoded.features["input_ids"][n, :k].tolist() == ref["input_ids"]
        assert encoded.features["token_type_ids"][n, :k].tolist() == ref["token_type_ids"]
    assert encoded.features["labels"].tolist() == [e.label for e in examples]


def test_long_pairs_are_truncated_longest_first(hf, tokenizer):
    example = ClassificationExample(["the", "dog"] * 20, 1, ["cats", "sleep", "."])
    encoded = encode_classification([example], tokenizer, max_length=16, num_labels=2)
    ids = encoded.features["input_ids"][0].tolist()
    assert len(ids) == 16 and ids.count(tokenizer.sep_token_id) == 2
    assert ids[-4:] == hf.encode("cats sleep .", add_special_tokens=False) + [tokenizer.sep_token_id]


def test_qa_positions_match_transformers_offsets(hf, tokenizer):
    examples = qa_examples(LANG, 100, seed=4)
    encoded = encode_qa(examples, tokenizer, max_length=128)
    for n, e in enumerate(examples):
        passage = " ".join(e.passage)
        ref = hf(" ".join(e.question), passage)
        k = len(ref["input_ids"])
        assert encoded.features["input_ids"][n, :k].tolist() == ref["input_ids"]
        assert encoded.features["token_type_ids"][n, :k].tolist() == ref["token_type_ids"]
        char_start = len(" ".join(e.passage[: e.answer_start])) + (e.answer_start > 0)
        char_end = char_start + len(e.answer)
        assert encoded.features["start_positions"][n] == ref.char_to_token(char_start, sequence_index=1)
        assert encoded.features["end_positions"][n] == ref.char_to_token(char_end - 1, sequence_index=1)


def test_best_spans_find_the_answer_from_peaked_logits_and_respect_the_passage(tokenizer):
    examples = qa_examples(LANG, 40, seed=5)
    encoded = encode_qa(examples, tokenizer, max_length=128)
    n, length = encoded.features["input_ids"].shape
    start = torch.full((n, length), -5.0)
    end = torch.full((n, length), -5.0)
    rows = torch.arange(n)
    start[rows, encoded.features["start_positions"]] = 5.0
    end[rows, encoded.features["end_positions"]] = 5.0
    start[:, 0] = end[:, 0] = 50.0  # [CLS] and question tokens are never an answer
    spans = best_spans(start, end, encoded)
    assert [" ".join(e.passage[a:b]) for e, (a, b) in zip(examples, spans)] == [e.answer for e in examples]


def test_batches_are_deterministic_epochs_cut_to_their_longest_row(tokenizer):
    encoded = encode_tagging(ner_examples(LANG, 40, seed=6), tokenizer, max_length=64)
    batch_fn = encoded.batches(batch_size=8, seed=0)
    seen = torch.cat([batch_fn(i)["input_ids"][:, 0] * 0 + torch.arange(8) for i in range(5)])
    assert seen.numel() == 40
    for i in range(5):
        b = batch_fn(i)
        assert torch.equal(b["input_ids"], encoded.batches(8, seed=0)(i)["input_ids"])
        assert b["attention_mask"][:, -1].any() and b["input_ids"].shape[1] <= encoded.features["input_ids"].shape[1]
    rows = [tuple(r.tolist()) for i in range(5) for r in batch_fn(i)["labels"][:, :3]]
    assert len(rows) == 40
    assert not torch.equal(batch_fn(0)["input_ids"], encoded.batches(8, seed=1)(0)["input_ids"])


def test_bad_input_gets_clear_errors(tokenizer):
    with pytest.raises(ValueError, match=r"label 2 is outside the label set 0..1"):
        encode_classification([ClassificationExample(["a", "dog", "."], 2)], tokenizer, 16, num_labels=2)
    with pytest.raises(ValueError, match=r"tags \['B-DATE'\] are outside the label set"):
        encode_tagging([TaggingExample(["Oslo", "today"], ["B-LOC", "B-DATE"])], tokenizer, 16)
    long_question = QAExample(["where"] * 20 + ["?"], ["Anna", "lives", "in", "Oslo", "."], 3, 4)
    with pytest.raises(ValueError, match="the question has 21 tokens.*at most max_length - 4 = 12"):
        encode_qa([long_question], tokenizer, max_length=16)
    with pytest.raises(ValueError, match="the passage is empty"):
        encode_qa([QAExample(["where", "?"], [], 0, 0)], tokenizer, max_length=16)
    with pytest.raises(ValueError, match="need 15 tokens, more than max_length=12"):
        encode_qa([QAExample(["where", "?"], ["Anna", "lives", "in", "Oslo", "."] * 2, 3, 4)], tokenizer, 12)
    with pytest.raises(ValueError, match=r"answer span \[4, 9\) is not inside the passage of 5 words"):
        encode_qa([QAExample(["where", "?"], ["Anna", "lives", "in", "Oslo", "."], 4, 9)], tokenizer, 64)
    with pytest.raises(ValueError, match="at least one example"):
        encode_tagging([], tokenizer, 16)
    with pytest.raises(ValueError, match="at least 3 people on each side of the split"):
        split_people(World.generate(seed=0, num_people=4))
