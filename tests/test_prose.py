"""The course's prose targets (tests/prose.py) hold in every chapter, except the misses listed in STILL_MISSING.

STILL_MISSING is the one list of what is left to fix: a chapter listed there must miss exactly the targets
listed, so the test fails both when a chapter misses a target that is not listed (a regression) and when it now
meets a listed one (then remove it from the list, so that it stays met). `make prose` prints the measures.
"""

import ast
import doctest
import json
from pathlib import Path

import pytest

from tests import prose

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Chapter number -> the targets it still misses (tests/prose.py's TARGETS), as printed by
# `.venv/bin/python -m tests.prose --still-missing notebooks/*.ipynb`; `make prose` shows the measures.
STILL_MISSING = {
    "05": {"lesson", "paragraph", "sentence", "pointers", "history"},
    "11": {"lesson", "paragraph", "sentence", "history", "absent"},
}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def test_chapter_meets_its_prose_targets(notebook):
    row = prose.measure(notebook)
    missed = row.misses()
    listed = STILL_MISSING.get(notebook.stem[:2], set())
    new = {name: text for name, text in missed.items() if name not in listed}
    assert not new, (
        f"{notebook.name} misses {new} (targets {prose.TARGETS}); "
        f"`.venv/bin/python -m tests.prose --show {notebook.stem[:2]} notebooks/*.ipynb` lists the passages"
    )
    met = listed - set(missed)
    assert not met, (
        f"{notebook.name} now meets {sorted(met)}: remove them from STILL_MISSING[{notebook.stem[:2]!r}] "
        "in tests/test_prose.py so that they stay met"
    )


def test_still_missing_names_only_chapters_and_targets_that_exist():
    chapters = {p.stem[:2] for p in NOTEBOOKS}
    assert len(chapters) == 12, chapters
    assert set(STILL_MISSING) <= chapters, set(STILL_MISSING) - chapters
    unknown = {ch: names - set(prose.TARGETS) for ch, names in STILL_MISSING.items() if names - set(prose.TARGETS)}
    assert not unknown, f"not targets of tests/prose.py: {unknown}"
    assert all(STILL_MISSING.values()), "a chapter listed with no missed target: remove it"


def test_the_worked_example_of_the_docstring():
    assert doctest.testmod(prose, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def _notebook(tmp_path, *cells):
    path = tmp_path / "99_example.ipynb"
    path.write_text(
        json.dumps(
            {
                "cells": [{"cell_type": "markdown", "source": text} for text in cells]
                + [{"cell_type": "code", "source": "x = '{glue:text}`not prose`'"}]
            }
        )
    )
    return path


def test_parts_folding_and_flagged_phrases(tmp_path):
    long = " ".join(["word"] * 151) + "."
    path = _notebook(
        tmp_path,
        "# Title\n\nA short lesson of six words, then a formula $x^2$.",
        f"<details><summary>Audit</summary>\n\n{long}\n\n</details>",
        "## What we saw\n\nThe table, as the first version of this chapter said.",
        "Between.\n\n## Exercises\n\n1. Use the slides and {glue:text}`key`; see the share printed under section 5.",
    )
    row = prose.measure(path)
    # headings count as words; the folded paragraph counts in neither part; "Exercises" ends the summary
    assert (row.lesson, row.summary) == (1 + 9 + 1, 3 + 10 + 1)
    assert row.exercises == 15  # "1." and "glue", "text", "key" are words
    assert row.folded == 4 + 151 + 1  # the tags' names are words: "details", "summary", "Audit", "summary"
    assert row.paragraph == 10 and row.sentence == 7.0  # sentences of 10, 10 and 1 words
    assert (row.history, row.absent, row.myst, row.pointers) == (1, 1, 1, 1)  # code cells are not read
    assert set(row.misses()) == {"history", "absent", "myst"}
    unfolded = _notebook(tmp_path, long)
    assert prose.measure(unfolded).misses() == {"paragraph": "151 > 150", "sentence": "151.0 > 25"}


def test_sentences_do_not_end_at_abbreviations_and_code_is_not_prose():
    text = "Devlin et al. report it, e.g. on MNLI. Then it fell.\n\n```python\nprint('a. B. C.')\n```\n\n| a | b |"
    assert prose.sentence_lengths(text) == [8, 3]
    assert prose.paragraphs(text) == ["Devlin et al. report it, e.g. on MNLI. Then it fell."]


def test_the_command_line_prints_the_table_and_refuses_no_notebook(capsys, tmp_path):
    assert prose.main([str(NOTEBOOKS[0]), "--show", "01"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| chapter | lesson |") and NOTEBOOKS[0].stem in out
    assert prose.main(["--still-missing", *map(str, NOTEBOOKS)]) == 0
    name, _, literal = capsys.readouterr().out.partition(" = ")  # a Python literal, to paste above
    measured = {p.stem[:2]: set(prose.measure(p).misses()) for p in NOTEBOOKS if prose.measure(p).misses()}
    assert name == "STILL_MISSING" and ast.literal_eval(literal) == measured
    with pytest.raises(SystemExit):
        prose.main([str(tmp_path / "a.py")])
    assert "expected at least one .ipynb" in capsys.readouterr().err
