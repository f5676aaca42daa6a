"""How a chapter reads: the course's prose targets, measured on the markdown cells of each notebook.

Run from the repository's root (``make prose`` does the same):

    .venv/bin/python -m tests.prose notebooks/*.ipynb           # one row per chapter, and the targets it misses
    .venv/bin/python -m tests.prose --show 08 notebooks/*.ipynb # chapter 08's long paragraphs and flagged phrases
    .venv/bin/python -m tests.prose --still-missing notebooks/*.ipynb  # tests/test_prose.py's list, measured now

A chapter has three parts, read in order through its markdown cells:

- the **lesson**, everything before the heading "What we saw" (or before "Exercises" where there is none);
- the **summary**, from "What we saw" to "Exercises";
- the **exercises**, after the "Exercises" heading (hints and expected outcomes included).

Text inside ``<details> … </details>`` is folded in every renderer (JupyterLab, Colab, GitHub, the book), so it
is counted apart ("folded") and left out of the lesson's and the summary's words, paragraphs and sentences.

A word is a run of letters, digits and ``' ’ . -`` that starts with a letter or a digit; a formula (``$…$`` or
``$$…$$``) counts as one word, and a code block as none. A paragraph is a block between blank lines, without its
heading, table and fence lines. A sentence ends at ``.``, ``!`` or ``?`` followed by a space and a capital (or
``(``, a backtick, ``$``, ``*``); "e.g.", "i.e.", "et al.", "cf.", "vs.", "Fig." and "Eq." end none.

>>> text = "The weights sum to one, so $\\\\sum_i \\\\alpha_i = 1$. See Fig. 2 below.\\n\\n<details>long aside</details>"
>>> count_words(text), count_words(fold(text)[0]), sentence_lengths(fold(text)[0])
(15, 11, [7, 4])

The targets (:data:`TARGETS`): the lesson at most 3,000 words, the summary at most 400, no unfolded paragraph over
150 words, sentences of at most 25 words on average, at most 4 pointers to printouts ("the share printed under
the table"), and none of: development history ("the first version of this chapter"), references to material a
student does not have ("the slides"), MyST-only markup that JupyterLab and Colab show as raw text (``{glue}``
roles, ``:::{admonition}`` fences). The counts of flagged phrases run over every markdown cell, folded or not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

TARGETS = {
    "lesson": 3000,
    "summary": 400,
    "paragraph": 150,
    "sentence": 25,
    "pointers": 4,
    "history": 0,
    "absent": 0,
    "myst": 0,
}

# Phrases counted over the whole chapter, one pattern per target.
FLAGGED = {
    "pointers": re.compile(
        r"\b(?:printed|shown|reported|listed)\s+(?:under|above|below|beside|in)\s+(?:the\s+)?"
        r"(?:section|§|table|cell|plot|figure|walk|share|column)"
        r"|\bsection \d+'s\b|\(section \d+\)|\bthe (?:table|plot|figure|column) (?:under|below|above) section",
        re.I,
    ),
    "history": re.compile(
        r"first (?:version|draft) of|previous version|earlier version|trial runs?\b|in our trials|we tried\b"
        r"|this issue\b|the issue of this|this session|a later session|TODO|FIXME",
        re.I,
    ),
    "absent": re.compile(
        r"seed deck|lecture deck|the slides?\b|chapter notes|the seeds?'s? (?:deck|example)|seed 00\d", re.I
    ),
    "myst": re.compile(r"\{glue(?::text|:figure)?\}|^:::\{|\{admonition\}|\{(?:doc|ref|numref)\}`", re.M),
}

_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")
_FORMULA = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)
_CODE_BLOCK = re.compile(r"```.*?```", re.S)
_DISPLAY_BLOCK = re.compile(r"```.*?```|\$\$.*?\$\$", re.S)
_FOLDED = re.compile(r"<details\b.*?</details>", re.S | re.I)
_NOT_PROSE_LINE = ("#", "|", ":::")
_ABBREVIATION = re.compile(r"\b(e\.g|i\.e|et al|cf|vs|Fig|Eq)\.")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`$*])")
_WHAT_WE_SAW = re.compile(r"^#+\s*What we saw", re.M | re.I)
_EXERCISES = re.compile(r"^#+\s*Exercises.*$", re.M | re.I)


def count_words(text: str) -> int:
    """Words of prose: a formula is one word, a code block none."""
    return len(_WORD.findall(_CODE_BLOCK.sub(" ", _FORMULA.sub(" x ", text))))


def fold(text: str) -> tuple[str, str]:
    """``(shown, folded)``: the text with each ``<details>`` block blanked out, and those blocks joined."""
    return _FOLDED.sub(" ", text), " ".join(_FOLDED.findall(text))


def paragraphs(text: str) -> list[str]:
    """Blocks between blank lines, each joined into one line; code blocks, display formulas, headings, table rows
    and fence lines are not prose."""
    found = []
    for block in re.split(r"\n\s*\n", _DISPLAY_BLOCK.sub("\n\n", text)):
        lines = [
            line.strip()
            for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith(_NOT_PROSE_LINE)
        ]
        if lines:
            found.append(" ".join(lines))
    return found


def sentence_lengths(text: str) -> list[int]:
    """The word count of each sentence of each paragraph (sentences of no word left out)."""
    lengths = []
    for paragraph in paragraphs(text):
        for sentence in _SENTENCE_END.split(_ABBREVIATION.sub(r"\1", paragraph)):
            if n := count_words(sentence):
                lengths.append(n)
    return lengths


def chapter_parts(cells: list[str]) -> dict[str, str]:
    """The lesson, summary and exercises of a chapter's markdown cells (the "Exercises" heading itself in none)."""
    parts: dict[str, list[str]] = {"lesson": [], "summary": [], "exercises": []}
    current = "lesson"
    for text in cells:
        if _WHAT_WE_SAW.search(text):
            current = "summary"
        heading = _EXERCISES.search(text)
        if heading:
            parts[current].append(text[: heading.start()])
            current = "exercises"
            text = text[heading.end() :]
        parts[current].append(text)
    return {name: "\n\n".join(texts) for name, texts in parts.items()}


@dataclass
class ProseStats:
    """One chapter's measures; the keys of :data:`TARGETS` are its fields with a target."""

    chapter: str
    lesson: int
    summary: int
    exercises: int
    folded: int
    paragraph: int
    sentence: float
    pointers: int
    history: int
    absent: int
    myst: int
    long_paragraphs: list[str] = field(default_factory=list, repr=False)
    phrases: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def misses(self) -> dict[str, str]:
        """Each missed target with its measure against the limit, e.g. ``{"sentence": "27.6 > 25"}``."""
        return {
            name: f"{getattr(self, name)} > {limit}" for name, limit in TARGETS.items() if getattr(self, name) > limit
        }


def markdown_cells(notebook: Path) -> list[str]:
    """The source of each markdown cell of an ``.ipynb``."""
    cells = json.loads(notebook.read_text())["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]


def measure(notebook: Path) -> ProseStats:
    cells = markdown_cells(notebook)
    parts = chapter_parts(cells)
    shown = {name: fold(text)[0] for name, text in parts.items()}
    unfolded = shown["lesson"] + "\n\n" + shown["summary"]
    lengths = sentence_lengths(unfolded)
    everything = "\n\n".join(cells)
    phrases = {name: [m.group(0) for m in pattern.finditer(everything)] for name, pattern in FLAGGED.items()}
    return ProseStats(
        chapter=notebook.stem,
        lesson=count_words(shown["lesson"]),
        summary=count_words(shown["summary"]),
        exercises=count_words(parts["exercises"]),
        folded=sum(count_words(fold(text)[1]) for text in parts.values()),
        paragraph=max((count_words(p) for p in paragraphs(unfolded)), default=0),
        sentence=round(sum(lengths) / len(lengths), 1) if lengths else 0,
        long_paragraphs=[p for p in paragraphs(unfolded) if count_words(p) > TARGETS["paragraph"]],
        phrases=phrases,
        **{name: len(found) for name, found in phrases.items()},
    )


COLUMNS = ("lesson", "summary", "exercises", "folded", "paragraph", "sentence", "pointers", "history", "absent", "myst")


def table(rows: list[ProseStats]) -> str:
    """A markdown table, one row per chapter, with the targets it misses."""
    lines = ["| chapter | " + " | ".join(COLUMNS) + " | misses |", "|---" * (len(COLUMNS) + 2) + "|"]
    for row in rows:
        missed = "; ".join(f"{name} {text}" for name, text in row.misses().items()) or "-"
        lines.append(f"| {row.chapter} | " + " | ".join(str(getattr(row, c)) for c in COLUMNS) + f" | {missed} |")
    lines.append("targets: " + ", ".join(f"{name} <= {limit}" for name, limit in TARGETS.items()))
    return "\n".join(lines)


def still_missing(rows: list[ProseStats]) -> str:
    """``STILL_MISSING = {...}``: each chapter that misses a target, with the targets it misses, in their order."""
    lines = ["STILL_MISSING = {"]
    for row in rows:
        if row.misses():
            names = ", ".join(f'"{name}"' for name in row.misses())
            lines.append(f'    "{row.chapter[:2]}": {{{names}}},')
    return "\n".join(lines + ["}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="output-free .ipynb files (other files are skipped)")
    parser.add_argument("--show", metavar="NN", help="list chapter NN's long paragraphs and flagged phrases")
    parser.add_argument(
        "--still-missing",
        action="store_true",
        help="print only the STILL_MISSING table of tests/test_prose.py, as measured now",
    )
    args = parser.parse_args(argv)
    rows = [measure(path) for path in sorted(args.notebooks) if path.suffix == ".ipynb"]
    if not rows:
        parser.error(f"expected at least one .ipynb, got {[str(p) for p in args.notebooks]}")
    if args.still_missing:
        print(still_missing(rows))
        return 0
    print(table(rows))
    for row in rows:
        if args.show and row.chapter.startswith(args.show):
            print(f"\n{row.chapter}: paragraphs over {TARGETS['paragraph']} words")
            for paragraph in row.long_paragraphs:
                print(f"  ({count_words(paragraph)} words) {paragraph[:160]}...")
            for name, found in row.phrases.items():
                if found:
                    print(f"  {name}: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
