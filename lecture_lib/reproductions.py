"""Paper-versus-ours tables: shown in the notebook, collected on the book's "Reproductions" page.

A chapter calls :func:`show_reproduction` once per table that sets a paper's numbers beside ours. The table is
displayed as Markdown, so it reads the same in JupyterLab, Colab and the book. When the notebook is executed
by the book (``myst_nb`` importable), the same table is also *glued* under its key, with an HTML rendering
beside the Markdown: myst-nb pastes only HTML, images and plain text across pages. The book's extension
``book/_ext/reproductions_page.py`` finds every ``show_reproduction("key", ...)`` call of the notebooks and
pastes each key into the page ``book/reproductions.md`` from the executed notebook, so the page is generated
from what the notebooks computed and is never copied by hand.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from IPython.display import Markdown, display

try:  # the book's Markdown renderer; myst_nb, which alone glues tables, depends on it
    from markdown_it import MarkdownIt
except ImportError:
    MarkdownIt = None

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def format_cell(value: object) -> str:
    """A table cell: floats to 3 significant decimals, ``None``/NaN as an en dash, ``|`` escaped.

    >>> [format_cell(v) for v in (0.8552, 12, None, float("nan"), "a|b", 84.4)]
    ['0.855', '12', '–', '–', 'a\\\\|b', '84.400']
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; every row must have as many cells as the header.

    >>> print(markdown_table(["model", "F1"], [["ours", 0.5], ["paper", "92.4"]]))
    | model | F1 |
    |---|---|
    | ours | 0.500 |
    | paper | 92.4 |
    """
    if not header:
        raise ValueError("expected at least one column, got an empty header")
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"row {i} has {len(row)} cells, expected {len(header)} (one per column of {list(header)})")
    lines = ["| " + " | ".join(format_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def show_reproduction(key: str, caption: str, header: Sequence[str], rows: Sequence[Sequence[object]], *,
                      note: str = "") -> str:
    """Display a paper-versus-ours table and record it for the book's Reproductions page.

    ``key`` names the table across the course (lower-case words joined by ``-``, for example
    ``"ch04-bert-table5"``); ``caption`` says which paper and table it reproduces; ``note`` says in a sentence
    what did and did not reproduce. Returns the Markdown text.

    Taught in: 01_attention ("The bottleneck, measured").
    """
    if not KEY_PATTERN.match(key):
        raise ValueError(f"expected a key of lower-case words joined by '-', like 'ch04-bert-table5', got {key!r}")
    text = f"**{caption}**\n\n{markdown_table(header, rows)}"
    if note:
        text += f"\n\n{note}"
    try:
        from myst_nb import glue
    except ImportError:  # Colab and plain Jupyter: show it, nothing to collect
        display(Markdown(text))
    else:
        glue(key, ReproductionTable(text), display=True)
    return text


class ReproductionTable:
    """A table's Markdown with an HTML rendering: the two outputs a glued table carries.

    >>> print(ReproductionTable("| a |\\n|---|\\n| 1 |")._repr_html_().splitlines()[0])
    <table class="table">
    """

    def __init__(self, markdown: str) -> None:
        self.markdown = markdown

    def _repr_markdown_(self) -> str:
        return self.markdown

    def _repr_html_(self) -> str | None:
        if MarkdownIt is None:  # no HTML rendering: IPython shows the Markdown
            return None
        html = MarkdownIt("commonmark").enable("table").render(self.markdown)
        return html.replace("<table>", '<table class="table">')
