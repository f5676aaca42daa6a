"""Paper-versus-ours tables: shown in the notebook, collected on the book's "Reproductions" page.

A chapter calls :func:`show_reproduction` once per table that sets a paper's numbers beside ours. The table is
displayed as Markdown, so it reads the same in JupyterLab, Colab and the book. When the notebook is executed
by the book (``myst_nb`` importable), the same table is also *glued* under its key, with an HTML rendering
beside the Markdown: myst-nb pastes only HTML, images and plain text across pages. The book's extension
``book/_ext/reproductions_page.py`` finds every ``show_reproduction("key", ...)`` call of the notebooks and
pastes each key into the page ``book/reproductions.md`` from the executed notebook, so the page is generated
from what the notebooks computed and is never copied by hand.

A chapter's closing "What we saw" is such a table made of :class:`Claim` rows (:func:`show_claims`): the claim,
the paper's figure (a literal, with its source), ours (formatted from the run's variables) and a verdict that
code computes from our numbers by a stated rule:

- ``reproduced``: the paper's direction holds, on every seed the row names (:func:`direction`, :func:`holds`);
- ``mechanism only``: the mechanism is shown, the paper's outcome is not measured (:func:`mechanism_only`);
- ``not reproduced``: the rule was measured and failed.

The claims also travel in the output's metadata, so that ``python -m lecture_lib.reproductions summary DIR``
counts the verdicts of every executed notebook under ``DIR`` (the book's ``_build/jupyter_execute``)::

    01 claims=8 reproduced=6 mechanism=2 not=0
    ...
    total claims=... reproduced=... mechanism=... not=...

and ``--claims`` lists them, one ``NN KEY VERDICT`` line each.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from IPython.display import Markdown, display

try:  # the book's Markdown renderer; myst_nb, which alone glues tables, depends on it
    from markdown_it import MarkdownIt
except ImportError:
    MarkdownIt = None

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
CLAIM_KEY = re.compile(r"^(?P<chapter>[0-9]{2})-[a-z0-9]+(?:-[a-z0-9]+)*$")
REPRODUCED, MECHANISM_ONLY, NOT_REPRODUCED = "reproduced", "mechanism only", "not reproduced"
VERDICTS = (REPRODUCED, MECHANISM_ONLY, NOT_REPRODUCED)
CLAIMS_METADATA = "lecture_claims"  # the output metadata field that carries a table's claims


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

    With ``claims``, the Markdown output's metadata carries them (``{"lecture_claims": [...]}``), which is what
    :func:`notebook_claims` reads back from an executed notebook.

    >>> print(ReproductionTable("| a |\\n|---|\\n| 1 |")._repr_html_().splitlines()[0])
    <table class="table">
    """

    def __init__(self, markdown: str, claims: Sequence[Claim] = ()) -> None:
        self.markdown = markdown
        self.claims = list(claims)

    def _repr_markdown_(self) -> str | tuple[str, dict]:
        if self.claims:
            return self.markdown, {CLAIMS_METADATA: [claim.as_record() for claim in self.claims]}
        return self.markdown

    def _repr_html_(self) -> str | None:
        if MarkdownIt is None:  # no HTML rendering: IPython shows the Markdown
            return None
        html = MarkdownIt("commonmark").enable("table").render(self.markdown)
        return html.replace("<table>", '<table class="table">')


# --- "What we saw": claims with computed verdicts ------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """One of :data:`VERDICTS` and the rule that gave it, in words a reader can check against the numbers."""

    verdict: str
    rule: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"expected a verdict in {VERDICTS}, got {self.verdict!r}")
        if not self.rule:
            raise ValueError("expected the rule that gives the verdict, got an empty string")


def holds(condition: bool, rule: str) -> Verdict:
    """``reproduced`` when the measured ``condition`` (the paper's direction, stated in ``rule``) is true.

    >>> holds(0.77 > 0.05, "with attention above without at length 14")
    Verdict(verdict='reproduced', rule='with attention above without at length 14')
    >>> holds(False, "x").verdict
    'not reproduced'
    """
    return Verdict(REPRODUCED if bool(condition) else NOT_REPRODUCED, rule)


def direction(ours: Sequence[float], baseline: Sequence[float], *, seeds: Sequence[int], rule: str,
              higher: bool = True, margin: float = 0.0) -> Verdict:
    """``reproduced`` when ours beats the baseline by more than ``margin`` on *every* seed named, else not.

    ``ours[i]`` and ``baseline[i]`` are seed ``seeds[i]``'s scores; ``higher=False`` when lower is better (a
    loss). The seeds are named in the rule, so the table says over which runs the direction held.

    >>> direction([0.8, 0.7], [0.1, 0.2], seeds=[0, 1], rule="attention ahead").rule
    'attention ahead, on every seed of 0, 1'
    >>> direction([0.8], [0.1], seeds=[3], rule="attention ahead").rule
    'attention ahead, on seed 3'
    >>> direction([0.8, 0.1], [0.1, 0.2], seeds=[0, 1], rule="attention ahead").verdict
    'not reproduced'
    >>> direction([2.0], [2.5], seeds=[0], rule="lower loss", higher=False, margin=0.1).verdict
    'reproduced'
    """
    ours, baseline, seeds = list(ours), list(baseline), list(seeds)
    if not seeds or not len(ours) == len(baseline) == len(seeds):
        raise ValueError(f"expected one score of ours and of the baseline per seed, got {len(ours)} and "
                         f"{len(baseline)} for seeds {seeds}")
    sign = 1.0 if higher else -1.0
    won = all(sign * (a - b) > margin for a, b in zip(ours, baseline))
    named = f"on seed {seeds[0]}" if len(seeds) == 1 else f"on every seed of {', '.join(map(str, seeds))}"
    return holds(won, f"{rule}, {named}")


def mechanism_only(rule: str) -> Verdict:
    """``mechanism only``: the mechanism is shown (``rule`` says how), the paper's outcome is not measured.

    >>> mechanism_only("the running mean is a softmax of equal scores").verdict
    'mechanism only'
    """
    return Verdict(MECHANISM_ONLY, rule)


@dataclass(frozen=True)
class Claim:
    """A row of a chapter's "What we saw": a paper's claim, its figure, ours, and the verdict on ours.

    ``key`` is the claim's stable name across the course: the chapter's two digits, then lower-case words
    joined by ``-`` (``"04-pretraining-pays-downstream"``). ``paper`` is the paper's figure as a literal, with
    its source; ``ours`` is formatted from the run's own variables.
    """

    key: str
    claim: str
    paper: str
    ours: str
    verdict: Verdict

    def __post_init__(self) -> None:
        if not CLAIM_KEY.match(self.key):
            raise ValueError("expected a claim key of the chapter's two digits and lower-case words joined by '-', "
                             f"like '04-pretraining-pays-downstream', got {self.key!r}")
        if not isinstance(self.verdict, Verdict):
            raise TypeError(f"expected a Verdict (from holds, direction or mechanism_only), got {self.verdict!r}")

    @property
    def chapter(self) -> str:
        return self.key[:2]

    def as_record(self) -> dict[str, str]:
        """The claim as plain strings, as stored in the notebook's output."""
        record = asdict(self)
        record.update(verdict=self.verdict.verdict, rule=self.verdict.rule)
        return record


CLAIMS_HEADER = ["claim", "the paper", "ours", "verdict", "by the rule"]


def claims_table(claims: Sequence[Claim]) -> str:
    """The Markdown table of a chapter's claims, one row each, in the order given; keys must be unique.

    >>> print(claims_table([Claim("01-x", "x grows", "2.0 (A, 2020)", "1.5", holds(True, "ours > 1"))]))
    | claim | the paper | ours | verdict | by the rule |
    |---|---|---|---|---|
    | x grows | 2.0 (A, 2020) | 1.5 | **reproduced** | ours > 1 |
    """
    keys = [claim.key for claim in claims]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"expected unique claim keys, got {repeated} more than once")
    rows = [[c.claim, c.paper, c.ours, f"**{c.verdict.verdict}**", c.verdict.rule] for c in claims]
    return markdown_table(CLAIMS_HEADER, rows)


def show_claims(key: str, caption: str, claims: Sequence[Claim], *, note: str = "") -> str:
    """Display a chapter's "What we saw" table of claims and glue it under ``key`` for the Reproductions page.

    ``key`` follows :func:`show_reproduction` (``"ch01-what-we-saw"``); every claim's key starts with the same
    chapter number. The table's Markdown output carries the claims in its metadata (see :func:`notebook_claims`).
    Returns the Markdown text.

    Taught in: 01_attention ("What we saw").
    """
    if not KEY_PATTERN.match(key):
        raise ValueError(f"expected a key of lower-case words joined by '-', like 'ch01-what-we-saw', got {key!r}")
    if not claims:
        raise ValueError("expected at least one claim, got none")
    chapters = {claim.chapter for claim in claims}
    if len(chapters) != 1 or not key.startswith(f"ch{next(iter(chapters))}-"):
        raise ValueError(f"expected every claim of {key!r} to start with its chapter number, got "
                         f"{[claim.key for claim in claims]}")
    text = f"**{caption}**\n\n{claims_table(claims)}"
    if note:
        text += f"\n\n{note}"
    table = ReproductionTable(text, claims)
    try:
        from myst_nb import glue
    except ImportError:  # Colab and plain Jupyter: show it, nothing to collect
        display(table)
    else:
        glue(key, table, display=True)
    return text


def glue_number(key: str, value: float) -> float:
    """Glue a number of the run under ``key`` for the prose's ``{glue:text}`key``` (quiet), and return it.

    In the book (``myst_nb`` importable) the number reaches the sentence that quotes it; in JupyterLab and Colab
    nothing is glued, so the notebook prints the same number beside the sentence.

    Taught in: 02_transformer ("A task with structure: translation").
    """
    if not KEY_PATTERN.match(key):
        raise ValueError(f"expected a key of lower-case words joined by '-', like 'ch02-beam-changed', got {key!r}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"expected an int or a float (a string would be quoted by {{glue:text}}), got {value!r}")
    try:
        from myst_nb import glue
    except ImportError:
        return value
    glue(key, value, display=False)
    return value


# --- reading executed notebooks: the course's fidelity figure --------------------------------------------------

def notebook_claims(notebook: dict) -> list[dict[str, str]]:
    """Every claim an executed notebook (its JSON, as a dict) shows, in order of output."""
    claims = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            for metadata in output.get("metadata", {}).values():
                if isinstance(metadata, dict) and CLAIMS_METADATA in metadata:
                    claims += metadata[CLAIMS_METADATA]
    return claims


def chapter_claims(folder: Path | str) -> dict[str, list[dict[str, str]]]:
    """Chapter number -> its claims, for every executed notebook ``NN_name.ipynb`` under ``folder``.

    A chapter without claims is listed with none. A claim whose key names another chapter, or a key used twice
    in the course, is an error.
    """
    chapters: dict[str, list[dict[str, str]]] = {}
    seen: dict[str, str] = {}
    paths = sorted(Path(folder).rglob("[0-9][0-9]_*.ipynb"), key=lambda p: p.name)
    for path in paths:
        if ".ipynb_checkpoints" in path.parts:
            continue
        chapter = path.name[:2]
        if chapter in chapters:
            raise ValueError(f"expected one executed notebook per chapter, found two for {chapter} ({path})")
        claims = notebook_claims(json.loads(path.read_text(encoding="utf-8")))
        for claim in claims:
            if not claim["key"].startswith(f"{chapter}-"):
                raise ValueError(f"{path.name}: claim {claim['key']!r} does not start with its chapter, {chapter}")
            if claim["key"] in seen:
                raise ValueError(f"claim {claim['key']!r} is shown by {seen[claim['key']]} and again by {path.name}")
            seen[claim["key"]] = path.name
        chapters[chapter] = claims
    return chapters


def verdict_counts(claims: Iterable[dict[str, str]]) -> dict[str, int]:
    """``{"claims": C, "reproduced": R, "mechanism": M, "not": N}`` of a list of claim records.

    >>> verdict_counts([{"verdict": "reproduced"}, {"verdict": "mechanism only"}])
    {'claims': 2, 'reproduced': 1, 'mechanism': 1, 'not': 0}
    """
    verdicts = [claim["verdict"] for claim in claims]
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"expected verdicts in {VERDICTS}, got {sorted(unknown)}")
    return {"claims": len(verdicts), "reproduced": verdicts.count(REPRODUCED),
            "mechanism": verdicts.count(MECHANISM_ONLY), "not": verdicts.count(NOT_REPRODUCED)}


def summary_lines(chapters: dict[str, list[dict[str, str]]], *, claims: bool = False) -> list[str]:
    """The summary command's lines: one per chapter and a total, or with ``claims`` one per claim.

    >>> summary_lines({"01": [{"key": "01-a", "verdict": "reproduced"}], "02": []})
    ['01 claims=1 reproduced=1 mechanism=0 not=0', '02 claims=0 reproduced=0 mechanism=0 not=0', \
'total claims=1 reproduced=1 mechanism=0 not=0']
    >>> summary_lines({"01": [{"key": "01-a", "verdict": "mechanism only"}]}, claims=True)
    ['01 01-a mechanism only']
    """
    if claims:
        return [f"{chapter} {c['key']} {c['verdict']}" for chapter, cs in chapters.items() for c in cs]

    def line(label: str, counts: dict[str, int]) -> str:
        return label + " " + " ".join(f"{name}={count}" for name, count in counts.items())

    lines = [line(chapter, verdict_counts(cs)) for chapter, cs in chapters.items()]
    return lines + [line("total", verdict_counts(c for cs in chapters.values() for c in cs))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecture_lib.reproductions",
                                     description="Count the verdicts of the claims of executed notebooks.")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="verdict counts per chapter and in total")
    summary.add_argument("folder", type=Path, help="a folder of executed notebooks, e.g. _build/jupyter_execute")
    summary.add_argument("--claims", action="store_true", help="one line per claim: NN KEY VERDICT")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"expected a folder of executed notebooks, got {args.folder}")
    chapters = chapter_claims(args.folder)
    if not chapters:
        parser.error(f"expected executed notebooks NN_name.ipynb under {args.folder}, found none")
    print("\n".join(summary_lines(chapters, claims=args.claims)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
