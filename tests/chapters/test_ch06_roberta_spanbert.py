"""lecture_lib.chapters.ch06_roberta_spanbert: gold units against the annotation, rows that carry them, bad names."""

import pytest
import torch

from lecture_lib.cache import key
from lecture_lib.chapters.ch06_roberta_spanbert import (
    SCHEMES,
    chapter_config,
    format_run,
    mean_masked_run,
    scheme_run,
    synthetic_corpus,
    unit_rows,
    word_units,
)
from lecture_lib.data.synthetic import SyntheticLanguage


def sentences(n=200):
    return [s for doc in SyntheticLanguage(0).documents(n // 6, 0, 6) for s in doc]


def test_entity_units_are_the_bio_spans():
    for s in sentences():
        units = word_units(s, "named entities")
        for i, tag in enumerate(s.entities):
            same_as_previous = i > 0 and units[i] == units[i - 1]
            assert same_as_previous == tag.startswith("I-"), (s.words, s.entities, units)


def test_noun_phrase_units_hold_each_nominal_head_with_its_det_amod_flat_dependents():
    for s in sentences():
        units = word_units(s, "noun phrases")
        assert units == sorted(units) and units[0] == 0  # contiguous, numbered in order
        for i, (head, rel) in enumerate(zip(s.heads, s.deprels)):
            if rel in ("det", "amod", "flat") and s.pos[head - 1] in ("NOUN", "PROPN"):
                assert units[i] == units[head - 1], (s.words, s.deprels, units)


def test_unit_rows_carry_units_that_cover_the_real_tokens():
    config = chapter_config(documents=60, held_out_documents=12)
    corpus = synthetic_corpus(config)
    for scheme in SCHEMES:
        rows = unit_rows(corpus.train, corpus.tokenizer, scheme, 64)
        real = (rows["attention_mask"] == 1) & ~rows["special_tokens_mask"]
        assert torch.equal(rows["unit_ids"] >= 0, real)
        if scheme == "subword tokens":
            assert torch.equal(rows["unit_ids"][real], torch.cat([torch.arange(int(n)) for n in real.sum(1)]))


def test_bad_names_raise():
    config = chapter_config(documents=60, held_out_documents=12)
    with pytest.raises(ValueError, match="expected an input format in"):
        format_run(config, "documents")
    with pytest.raises(ValueError, match="expected a masking scheme in"):
        scheme_run(config, "clauses")
    with pytest.raises(ValueError, match="expected a masking scheme in"):
        word_units(sentences(6)[0], "clauses")


def test_exercise_2_nmod_grows_the_noun_phrases_and_is_a_new_run(monkeypatch):
    """Exercise 2: with nmod in NOUN_PHRASE_DEPENDENTS the mean masked run grows (the budget stays 15%), and
    scheme_run's cache key sees the change (it used to return the cached run of the old set)."""
    from lecture_lib.chapters import ch06_roberta_spanbert as ch06

    config = chapter_config(documents=300, held_out_documents=12)  # section 6 counts on 300 documents
    corpus = synthetic_corpus(config)
    seq_len = config.pretrain.data.seq_len
    before = mean_masked_run(corpus.train, corpus.tokenizer, "noun phrases", seq_len)
    after = mean_masked_run(corpus.train, corpus.tokenizer, "noun phrases", seq_len,
                            ch06.NOUN_PHRASE_DEPENDENTS | {"nmod"})
    assert after > before + 0.05, (before, after)  # 1.65 -> 1.79 tokens on the quick profile's documents
    names = []
    monkeypatch.setattr(ch06, "cached_json", lambda name, recipe, run: names.append(f"{name}-{key(recipe)}"))
    scheme_run(config, "noun phrases", corpus)
    monkeypatch.setattr(ch06, "NOUN_PHRASE_DEPENDENTS", ch06.NOUN_PHRASE_DEPENDENTS | {"nmod"})
    scheme_run(config, "noun phrases", corpus)
    scheme_run(config, "whole words", corpus)
    assert names[0] != names[1], names
