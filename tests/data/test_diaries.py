"""lecture_lib.data.diaries: each diary keeps to its setting's words, one person and two things, and dated
entries in the order of their dates; NSP's random entries come from another setting."""

import random

import pytest

from lecture_lib.data.diaries import DATES, SETTINGS, WORDS_PER_ENTRY, diaries, entry_pairs, write_diary


def test_settings_share_no_word():
    words = [{w for group in groups for w in group} for groups in SETTINGS.values()]
    assert sum(len(w) for w in words) == len(set().union(*words))
    assert not set().union(*words) & (set(DATES) | {"on", "the", "and", "."})


def test_every_diary_keeps_its_setting_its_person_and_its_order():
    for diary in diaries(300, seed=5, min_entries=2, max_entries=len(DATES)):
        people, verbs, things = SETTINGS[diary.setting]
        kept = set()
        for entry, date in zip(diary.entries, diary.dates, strict=True):
            on, the, day, the_, person, verb, thing, conjunction, other, stop = entry.split()
            assert len(entry.split()) == WORDS_PER_ENTRY
            assert (on, the, the_, conjunction, stop) == ("on", "the", "the", "and", ".")
            assert day == DATES[date] and person in people and verb in verbs and {thing, other} <= set(things)
            assert thing != other
            kept.add((person, thing, other))
        assert len(kept) == 1
        assert list(diary.dates) == sorted(set(diary.dates))


@pytest.mark.parametrize("task", ["nsp", "sop"])
def test_entry_pairs_follow_their_rule(task):
    """Brute force against the diaries: label 0 is two consecutive entries as written; label 1 is the same two
    swapped (SOP) or A with an entry of a diary of another setting (NSP); one pair per consecutive two."""
    documents = diaries(200, seed=2)
    pairs = entry_pairs(documents, task, seed=4)
    assert len(pairs) == sum(len(d.entries) - 1 for d in documents)
    setting_of = {}
    for diary in documents:
        for entry in diary.entries:
            setting_of.setdefault(entry, set()).add(diary.setting)
    expected = iter([(a, b) for d in documents for a, b in zip(d.entries, d.entries[1:])])
    for first, second, label in pairs:
        a, b = next(expected)
        if label == 0:
            assert (first, second) == (a, b)
        elif task == "sop":
            assert (first, second) == (b, a)
        else:
            assert first == a and not setting_of[second] & setting_of[a]
    assert 0.4 < sum(label for *_, label in pairs) / len(pairs) < 0.6


def test_diaries_are_a_function_of_the_seed():
    assert diaries(20, seed=1) == diaries(20, seed=1) != diaries(20, seed=2)
    assert entry_pairs(diaries(20, seed=1), "nsp", 0) == entry_pairs(diaries(20, seed=1), "nsp", 0)


@pytest.mark.parametrize("entries", [(1, 3), (4, 3), (3, len(DATES) + 1)])
def test_impossible_lengths_are_refused(entries):
    with pytest.raises(ValueError, match="min_entries"):
        write_diary(random.Random(0), *entries)


def test_unknown_task_and_single_setting_are_refused():
    with pytest.raises(ValueError, match="task"):
        entry_pairs(diaries(5, seed=0), "mlm", 0)
    one_setting = [d for d in diaries(100, seed=0) if d.setting == "farm"]
    with pytest.raises(ValueError, match="another setting"):
        entry_pairs(one_setting, "nsp", 0)
