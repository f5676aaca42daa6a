"""Sphinx extension: the Reproductions page pastes every paper-versus-ours table of the course.

A chapter shows such a table with ``show_reproduction("key", ...)`` (``lecture_lib.reproductions``), which
glues it under its key when the book executes the notebook. When Sphinx reads ``book/reproductions.md``,
this extension finds every call in ``notebooks/NN_name.py`` and appends, chapter by chapter, one
``{glue:any}`` directive per key that pastes the table from the executed notebook. A new table therefore
reaches the page without editing it, and a key the executed notebook did not glue fails the build (a
missing glue reference is a warning, and the book builds with ``--warningiserror``). A chapter's "What we saw"
(``show_what_we_saw("key", ...)``) reaches the page the same way.

At the top of the page, when Sphinx writes it (after every notebook was executed), the extension inserts the
course's figure: the count of claims per outcome and of checks, chapter by chapter and in total, then one line
per claim that is not reproduced or inconclusive, with its reason, read from the executed notebooks in
``_build/jupyter_execute`` (``lecture_lib.reproductions.chapter_records``, the same as
``python -m lecture_lib.reproductions summary``).
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.util import logging

from lecture_lib.reproductions import chapter_records, reproduction_keys, unsettled, verdict_counts

logger = logging.getLogger(__name__)

PAGE = "book/reproductions"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
COUNT_COLUMNS = ["chapter", "claims", "reproduced", "not reproduced", "inconclusive", "mechanism only", "checks"]


def reproductions_by_chapter(notebooks: Path) -> dict[str, list[str]]:
    """Notebook stem -> its keys, for the notebooks that show a table; a key used twice is an error."""
    chapters, seen = {}, {}
    for path in sorted(notebooks.glob("[0-9][0-9]_*.py")):
        keys = reproduction_keys(path.read_text(encoding="utf-8"), path.name)
        for key in keys:
            if key in seen:
                raise ValueError(f"key {key!r} is used by {seen[key]} and again by {path.name}: expected unique keys")
            seen[key] = path.name
        if keys:
            chapters[path.stem] = keys
    return chapters


def chapter_title(notebook: Path) -> str:
    """The notebook's title, from its first ``# # `` line: ``01 · Attention``."""
    for line in notebook.read_text(encoding="utf-8").splitlines():
        if line.startswith("# # "):
            return line.removeprefix("# # ").strip()
    raise ValueError(f"{notebook.name}: expected a title line '# # NN Title', found none")


def page_sections(notebooks: Path) -> str:
    """The MyST text appended to the page: a heading per chapter, a glue directive per table."""
    parts = []
    for stem, keys in reproductions_by_chapter(notebooks).items():
        parts.append(f"\n## {chapter_title(notebooks / f'{stem}.py')}\n")
        parts += [f"\n:::{{glue:any}} {key}\n:doc: ../notebooks/{stem}.ipynb\n:::\n" for key in keys]
    return "".join(parts)


def append_tables(app, docname: str, source: list[str]) -> None:
    if docname == PAGE:
        source[0] += page_sections(NOTEBOOKS)


def count_rows(chapters: dict[str, tuple[list[dict], list[dict]]]) -> list[list[str]]:
    """The rows of the course's figure: one per chapter (claims per outcome, checks) and a total."""
    rows = [
        [chapter] + [str(n) for n in verdict_counts(claims, checks).values()]
        for chapter, (claims, checks) in chapters.items()
    ]
    total = verdict_counts(
        (c for claims, _ in chapters.values() for c in claims), (k for _, checks in chapters.values() for k in checks)
    )
    return rows + [["total"] + [str(n) for n in total.values()]]


def table_node(header: list[str], rows: list[list[str]]) -> nodes.table:
    """A docutils table with a header row."""
    group = nodes.tgroup(cols=len(header))
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(cells):
        line = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += nodes.paragraph(text=cell)
            line += entry
        return line

    head, body = nodes.thead(), nodes.tbody()
    head += row(header)
    body += [row(cells) for cells in rows]
    group += [head, body]
    table = nodes.table(classes=["table"])
    table += group
    return table


def insert_counts(app, doctree, docname: str) -> None:
    """At the top of the page: the course's figure, then the claims not reproduced or inconclusive, one a line."""
    if docname != PAGE:
        return
    executed = Path(app.outdir).parent / "jupyter_execute"
    chapters = chapter_records(executed) if executed.is_dir() else {}
    if not chapters:
        logger.warning(f"reproductions: no executed notebooks under {executed}, the verdict counts are missing")
        return
    section = next(iter(doctree.findall(nodes.section)))
    intro = nodes.paragraph(
        text="Claims of each chapter's \u201cWhat we saw\u201d, by the outcome its code computed "
        "from this build's runs by the rules its chapter module declares, and the checks "
        "listed apart:"
    )
    lines = unsettled(chapters)
    heading = nodes.paragraph(
        text=f"Not reproduced, inconclusive, or a check that fails ({len(lines)}), with the reason:"
    )
    listing = nodes.bullet_list()
    for line in lines:
        item = nodes.list_item()
        item += nodes.paragraph(text=line)
        listing += item
    for node in reversed([intro, table_node(COUNT_COLUMNS, count_rows(chapters)), heading, listing]):
        section.insert(1, node)


def reread_page(app, env, added, changed, removed) -> list[str]:
    """Read the page on every build: a notebook's new table changes it, though its own file did not change."""
    return [PAGE] if PAGE in env.found_docs else []


def setup(app):
    app.connect("source-read", append_tables)
    app.connect("env-get-outdated", reread_page)
    app.connect("doctree-resolved", insert_counts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
