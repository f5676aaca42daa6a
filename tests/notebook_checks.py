"""Three checks on an executed notebook, run by ``tests/executed_notebooks.py`` after each notebook's cells.

**A rerun prints the same** (:func:`rerun_differences`). A notebook executed twice on one machine, once from an
empty ``$LECTURE_CACHE`` and once from the filled one, must print the same text: every model and every draw is
seeded where it is made, and a result loaded from the cache prints as it did when it was computed. What is
compared is what a reader reads: each code cell's standard output and the text (``text/markdown``, else
``text/plain``) of its results and displays. Left out: standard error (progress bars, warnings, lock waits),
widgets, images and HTML. Object addresses (``at 0x7f…``) are masked, and so is a duration with its unit
(``51.7 s``, ``0.21 ms``). A cell tagged ``wall-clock`` prints what timings decide in other forms (a rate, a
speed-up), so all its digits are masked: its text must still match, its numbers may not.

**No quoted result without its run** (:func:`unquoted_results`). A number in the prose that looks like a result
(it has a decimal point, a ``%`` or a ``×``, or it is a spelled-out multiple such as "forty times") must be one
the run printed (or a numeric literal of its code, not one in a comment or a string), to the digits quoted: ``0.77`` is accounted for by a printed
``0.7712`` or ``0.77``, ``33.8%`` by ``0.338`` or ``33.8``. A paper's figure is exempt when its sentence cites
the paper by an author and a year (``Lan et al. (2020)``, ``(Clark et al., 2020, Table 1)``); "the paper"
alone does not, since such a sentence often sets our numbers beside the paper's. Numbers written as code (backticks) or as mathematics (``$…$``:
equations and the arithmetic of constants), and those of the Exercises section (their solution tests check
them) are not prose quotes.

**Every table reaches the book** (:func:`unglued_tables`). The book's Reproductions page pastes each table that a
notebook's code shows with ``show_reproduction`` or ``show_what_we_saw`` (its key, a literal, read from the source),
and the book fails to build on one the executed notebook did not glue: a table shown in one profile only. So each
key of the code must be glued in this run.

>>> import nbformat
>>> cells = [nbformat.v4.new_code_cell("print(0.7712)", outputs=[
...     nbformat.v4.new_output("stream", name="stdout", text="0.7712\\n")]),
...     nbformat.v4.new_markdown_cell("Attention reaches 0.77 and then 0.81 at length 14. "
...                                   "Devlin et al. (2019) report 84.6 on MNLI.")]
>>> [quote.number for quote in unquoted_results(nbformat.v4.new_notebook(cells=cells))]
['0.81']
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import tokenize
from dataclasses import dataclass

WALL_CLOCK = "wall-clock"  # the tag of a cell whose output measures time

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_DURATION = re.compile(r"\d[\d.,]*\s?(?:ms|µs|us|ns|s|min|seconds?)\b")
_DIGITS = re.compile(r"[-−]?\d+")
_SPACES = re.compile(r"[ \t]+")

# --- A rerun prints the same -------------------------------------------------------------------------------


def text_outputs(notebook) -> list[tuple[int, str]]:
    """(code cell number, its text) for each code cell: its standard output, then the text of its results and
    displays (two kernels' clients may interleave the two differently; figures are left out with their images).
    Runs of spaces count as one (a column's width follows its widest number)."""
    texts = []
    for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        printed, shown = [], []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                printed.append(output["text"])
            elif "data" in output and not any(mime.startswith("image/") or "widget" in mime for mime in output["data"]):
                shown.append(output["data"].get("text/markdown") or output["data"].get("text/plain") or "")
        text = _DURATION.sub("# s", _ADDRESS.sub(" at 0x…", "".join(printed) + "\n".join(shown)))
        if WALL_CLOCK in cell.get("metadata", {}).get("tags", []):
            text = _DIGITS.sub("#", text)
        texts.append((number, _SPACES.sub(" ", text)))
    return texts


def rerun_differences(first, second) -> list[str]:
    """One line per code cell whose text differs between two executions of a notebook, with its first change."""
    differences = []
    for (number, a), (_, b) in zip(text_outputs(first), text_outputs(second)):
        if a != b:
            lines_a, lines_b = a.splitlines(), b.splitlines()
            at = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
            shown = [lines[at][:100] if at < len(lines) else "(nothing)" for lines in (lines_a, lines_b)]
            differences.append(f"code cell {number}, line {at + 1}: {shown[0]!r} then {shown[1]!r}")
    return differences


# --- No quoted result without its run ----------------------------------------------------------------------

_QUOTE = re.compile(
    r"(?<![\w.])[−-]?\d+(?:,\d{3})*(?:\.\d+)?(?:\s?%|×|\s+times\b|(?:M|k|B)\b|\s(?:million|billion)\b)?"
    r"(?!\d)"
)
_UNITS = {"M": 1e6, "million": 1e6, "k": 1e3, "B": 1e9, "billion": 1e9}
_SPELLED = re.compile(
    r"\b(?:twice|thrice|(?:two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)(?:[- ]fold| times))\b",
    re.IGNORECASE,
)
_WORDS = {
    "twice": 2,
    "thrice": 3,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
}
_CITATION = re.compile(r"et al\.|\b[A-Z][\w-]+(?: and [A-Z][\w-]+)?(?:, | \()(?:19|20)\d\d[a-z]?\b")
_NOT_PROSE = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)|<[^>]+>", re.DOTALL)
_SENTENCE_END = re.compile(
    r"(?<=[.!?;])(?<!\bal\.)(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bcf\.)\s+(?=[A-Z(*])"
    r"|\n\s*\n|\n\|"
)
_PRINTED = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Quote:
    """A number in the prose that no output of the run accounts for: which markdown cell, the number, its sentence."""

    cell: int
    number: str
    sentence: str

    def __str__(self) -> str:
        return f"markdown cell {self.cell}: {self.number!r} in {self.sentence!r}"


def _code_numbers(source: str) -> set[float]:
    """The numeric literals of a code cell: not those in its comments or strings (a typed figure is not a result)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return set()
    numbers = set()
    for token in tokens:
        if token.type == tokenize.NUMBER:
            with contextlib.suppress(ValueError, SyntaxError):
                value = ast.literal_eval(token.string)
                if isinstance(value, (int, float)):
                    numbers.add(float(value))
    return numbers


def _printed_numbers(notebook) -> set[float]:
    """Every number in the text outputs of the run, and the numeric literals of its code."""
    text = "\n".join(text for _, text in text_outputs(notebook))
    numbers = {float(match.replace(",", "")) for match in _PRINTED.findall(text)}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            numbers |= _code_numbers(cell.source)
    return {number for number in numbers if math.isfinite(number)}


def _accounted(quote: str, printed: set[float]) -> bool:
    """Does a printed number, rounded to the quote's digits, give the quote? A percentage may be printed as a
    share (``33.8%`` from ``0.338``) and a count in millions, thousands or billions in full (``108.5M`` from
    ``108,543,744``)."""
    text = quote.replace("−", "-").replace(",", "").replace("times", "").strip()
    unit = next((unit for unit in _UNITS if text.endswith(unit)), None)
    text = text.removesuffix(unit).strip() if unit else text
    percent = text.endswith("%")
    text = text.rstrip("%×").strip()
    digits = len(text.partition(".")[2])
    value = abs(float(text))
    scales = (1, 100) if percent else (1, 1 / _UNITS[unit]) if unit else (1,)
    half_unit = 0.5 * 10**-digits + 1e-9  # a printed 61.25 may be quoted as 61.2 or 61.3
    return any(abs(abs(number) * scale - value) <= half_unit for number in printed for scale in scales)


def _looks_like_a_result(quote: str) -> bool:
    return "." in quote or "%" in quote or "×" in quote or "times" in quote


def _prose_cells(notebook):
    """(markdown cell number, its text) for the markdown cells outside the Exercises section."""
    in_exercises = False
    for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "markdown"):
        heading = re.search(r"^#{1,3} (.*)$", cell.source, re.MULTILINE)
        if heading:
            in_exercises = heading.group(1).strip().lower().startswith("exercises")
        if not in_exercises:
            yield number, _NOT_PROSE.sub(" ", cell.source)


def unquoted_results(notebook) -> list[Quote]:
    """The result-like numbers of the prose that neither the run printed nor a citation in their sentence covers."""
    printed = _printed_numbers(notebook)
    quotes = []
    for number, text in _prose_cells(notebook):
        for sentence in _SENTENCE_END.split(text):
            if _CITATION.search(sentence):
                continue
            shown = " ".join(sentence.split())[:160]
            for match in _QUOTE.finditer(sentence):
                if _looks_like_a_result(match.group()) and not _accounted(match.group(), printed):
                    quotes.append(Quote(number, " ".join(match.group().split()), shown))
            for match in _SPELLED.finditer(sentence):
                word = match.group().lower().split()[0].split("-")[0]
                if not _accounted(str(_WORDS[word]), printed):
                    quotes.append(Quote(number, match.group(), shown))
    return quotes


# --- Every table reaches the book ---------------------------------------------------------------------------


def unglued_tables(notebook) -> list[str]:
    """The keys of the tables the notebook's code shows (``show_reproduction``, ``show_what_we_saw``) that no output
    of this run glued under that key, in the code's order."""
    from lecture_lib.reproductions import reproduction_keys

    source = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    glued = {
        output.get("metadata", {}).get("scrapbook", {}).get("name")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    }
    return [key for key in reproduction_keys(source, "the notebook's code") if key not in glued]
