"""Sphinx extension: the Reproductions page pastes every paper-versus-ours table of the course.

A chapter shows such a table with ``show_reproduction("key", ...)`` (``lecture_lib.reproductions``), which
glues it under its key when the book executes the notebook. When Sphinx reads ``book/reproductions.md``,
this extension finds every call in ``notebooks/NN_name.py`` and appends, chapter by chapter, one
``{glue:any}`` directive per key that pastes the table from the executed notebook. A new table therefore
reaches the page without editing it, and a key the executed notebook did not glue fails the build (a
missing glue reference is a warning, and the book builds with ``--warningiserror``).
"""

from __future__ import annotations

import re
from pathlib import Path

PAGE = "book/reproductions"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CALL = re.compile(r"show_reproduction\(")
KEYED_CALL = re.compile(r'show_reproduction\(\s*"(?P<key>[^"]+)"')


def reproduction_keys(source: str, name: str) -> list[str]:
    """The keys of the ``show_reproduction`` calls in one notebook's source, in order.

    >>> reproduction_keys('show_reproduction("ch01-a", "Cap", h, r)\\nshow_reproduction(\\n    "ch01-b", c, h, r)', "x")
    ['ch01-a', 'ch01-b']
    """
    keys = [m.group("key") for m in KEYED_CALL.finditer(source)]
    calls = len(CALL.findall(source))
    if calls != len(keys):
        raise ValueError(f"{name}: expected every show_reproduction call to name its key as a string literal, "
                         f"got {calls} calls and {len(keys)} literal keys")
    return keys


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


def reread_page(app, env, added, changed, removed) -> list[str]:
    """Read the page on every build: a notebook's new table changes it, though its own file did not change."""
    return [PAGE] if PAGE in env.found_docs else []


def setup(app):
    app.connect("source-read", append_tables)
    app.connect("env-get-outdated", reread_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
