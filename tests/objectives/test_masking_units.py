"""lecture_lib.objectives.masking_units: gold units against the annotation, and a bad scheme's name."""

import pytest

from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.objectives.masking_units import word_units


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


def test_a_bad_scheme_raises():
    with pytest.raises(ValueError, match="expected a masking scheme in"):
        word_units(sentences(6)[0], "clauses")
