"""Diaries: short documents whose topic and whose sentence order are both set by construction.

Each diary is kept by one person of one *setting* (a farm, a harbour, a school, ...), whose people, verbs and
things belong to that setting alone, about the two things that person looks after. It has one entry on each
of a few of the first ten days of a month, in the order of the dates, every entry of the same
ten-word shape:

    on the 2nd the sailor mends ropes and nets .
    on the 7th the sailor loads ropes and nets .
    on the 8th the sailor ties ropes and nets .

Two cues tell whether a second entry continues a first, and the two sentence-pair tasks of chapter 07 read
different ones (:func:`entry_pairs`):

- the *topic*: next-sentence prediction (NSP) draws its random second entry from a diary of another setting,
  as a random document of a large corpus is almost always about something else, so NSP can be solved by
  asking whether the two entries name the same person and things;
- the *order*: sentence-order prediction (SOP) swaps two consecutive entries of one diary, so the person
  and the things say nothing, and only the dates (which one is later) tell the order.

The dates also help NSP, but less: a true continuation is always later, and a random entry is later about
half the time. Ten dates, not seven weekdays, make the order slower to learn than the names: in chapter 07's
trial runs with seven weekdays, the NSP-trained model often read the days as well as the names (with
fourteen dates, the SOP-trained model often failed to learn the order at all).

Taught in: 07_albert ("Sentence-order prediction").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lecture_lib.runtime import seed_of

DATES = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th")

# Each setting: (people, verbs, things), no word shared with another setting.
SETTINGS = {
    "farm": (
        ("farmer", "shepherd", "milkmaid", "ploughman"),
        ("feeds", "milks", "shears", "herds"),
        ("goats", "cows", "sheep", "hens", "pigs"),
    ),
    "harbour": (
        ("sailor", "fisherman", "captain", "docker"),
        ("mends", "loads", "rows", "ties"),
        ("nets", "boats", "ropes", "crates", "sails"),
    ),
    "school": (
        ("teacher", "pupil", "headmaster", "tutor"),
        ("reads", "marks", "writes", "grades"),
        ("essays", "books", "lessons", "exams", "maps"),
    ),
    "hospital": (
        ("nurse", "surgeon", "doctor", "porter"),
        ("treats", "bandages", "examines", "cures"),
        ("wounds", "patients", "scans", "fevers", "wards"),
    ),
    "bakery": (
        ("baker", "apprentice", "cook", "confectioner"),
        ("bakes", "kneads", "slices", "glazes"),
        ("loaves", "buns", "cakes", "pies", "rolls"),
    ),
    "theatre": (
        ("actor", "dancer", "director", "singer"),
        ("rehearses", "performs", "stages", "learns"),
        ("plays", "scenes", "songs", "dances", "operas"),
    ),
    "forge": (
        ("smith", "miner", "welder", "forger"),
        ("forges", "heats", "digs", "sharpens"),
        ("swords", "nails", "ore", "coal", "horseshoes"),
    ),
    "garden": (
        ("gardener", "florist", "botanist", "weeder"),
        ("prunes", "sows", "grows", "trims"),
        ("roses", "tulips", "hedges", "herbs", "apples"),
    ),
}
WORDS_PER_ENTRY = 10  # on the <date> the <person> <verb> <thing> and <thing> .


@dataclass(frozen=True)
class Diary:
    """One diary: its setting, the index in :data:`DATES` of each entry's date (increasing), and its entries."""

    setting: str
    dates: tuple[int, ...]
    entries: tuple[str, ...]


def write_diary(rng: random.Random, min_entries: int, max_entries: int) -> Diary:
    """A diary of ``min_entries`` to ``max_entries`` entries by one person about two things, on distinct
    dates among the first ten of a month, in their order (not always consecutive dates).

    >>> diary = write_diary(random.Random(0), 3, 3)
    >>> diary.dates, diary.entries[0]
    ((4, 6, 7), 'on the 5th the tutor writes essays and lessons .')
    """
    if not 2 <= min_entries <= max_entries <= len(DATES):
        raise ValueError(
            f"expected 2 <= min_entries <= max_entries <= {len(DATES)}, got {min_entries} and {max_entries}"
        )
    setting = rng.choice(sorted(SETTINGS))
    people, verbs, things = SETTINGS[setting]
    person, (thing, other) = rng.choice(people), rng.sample(things, 2)
    dates = tuple(sorted(rng.sample(range(len(DATES)), rng.randint(min_entries, max_entries))))
    entries = tuple(f"on the {DATES[date]} the {person} {rng.choice(verbs)} {thing} and {other} ." for date in dates)
    return Diary(setting, dates, entries)


def diaries(n: int, seed: int, min_entries: int = 3, max_entries: int = 5) -> list[Diary]:
    """``n`` diaries, the same for the same seed."""
    rng = random.Random(seed_of("diaries", seed))
    return [write_diary(rng, min_entries, max_entries) for _ in range(n)]


def entry_pairs(documents: list[Diary], task: str, seed: int) -> list[tuple[str, str, int]]:
    """One pair ``(A, B, label)`` per two consecutive entries of a diary, label 0 or 1 with even odds.

    ``task="nsp"``: label 1 replaces B with a random entry of a random diary of *another* setting (BERT's
    NotNext); ``task="sop"``: label 1 swaps A and B (ALBERT's swapped order). Label 0 keeps the entries as
    written. The labels follow ``transformers``' ``next_sentence_label`` and ``sentence_order_label``.

    >>> [label for *_, label in entry_pairs(diaries(2, seed=0), "sop", seed=0)]
    [0, 1, 0, 0, 0]
    """
    if task not in ("nsp", "sop"):
        raise ValueError(f"expected task 'nsp' or 'sop', got {task!r}")
    if task == "nsp" and len({d.setting for d in documents}) < 2:
        raise ValueError("NSP draws its random entries from another setting: expected diaries of two settings")
    rng = random.Random(seed_of("diary pairs", task, seed))
    elsewhere = {setting: [d for d in documents if d.setting != setting] for setting in {d.setting for d in documents}}
    pairs = []
    for diary in documents:
        for first, second in zip(diary.entries, diary.entries[1:]):
            label = int(rng.random() < 0.5)
            if label and task == "sop":
                first, second = second, first
            elif label:
                other = rng.choice(elsewhere[diary.setting])
                second = rng.choice(other.entries)
            pairs.append((first, second, label))
    return pairs


def date_gap_pairs(documents: list[Diary], gap: int) -> list[tuple[str, str, int]]:
    """Every two entries of a diary in their order, ``(A, B, label)``: label 1 when B is at most ``gap`` days
    after A, else 0. Both entries name the same person and things, so the topic says nothing, and their order is
    always the written one: only the two dates tell the label. Chapter 07's downstream task of two sentences.

    >>> diary = Diary("farm", (1, 2, 6), ("on the 2nd a", "on the 3rd b", "on the 7th c"))
    >>> [(a[-1], b[-1], label) for a, b, label in date_gap_pairs([diary], gap=2)]
    [('a', 'b', 1), ('a', 'c', 0), ('b', 'c', 0)]
    """
    if gap < 1:
        raise ValueError(f"expected a gap of at least one day, got {gap}")
    return [
        (diary.entries[i], diary.entries[j], int(diary.dates[j] - diary.dates[i] <= gap))
        for diary in documents
        for i in range(len(diary.entries))
        for j in range(i + 1, len(diary.entries))
    ]
