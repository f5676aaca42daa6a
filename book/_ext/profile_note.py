"""Under each page's title, the profile that produced it: "Built with the quick profile (LECTURE_PROFILE=quick)".

The book renders the notebooks as executed in the profile that ``$LECTURE_PROFILE`` names when the book is built
(``make book`` sets ``quick``; the execution cache keeps a notebook's outputs per profile, see
tests/executed_notebooks.py), so every number on a page is that profile's. The note is a plain paragraph, not an
admonition, and is added when the page is written, after the Reproductions page has placed its counts.
"""

from __future__ import annotations

from docutils import nodes

from lecture_lib import profile

CLASS = "profile-note"


def profile_note(name: str) -> nodes.paragraph:
    """The note for profile ``name``, e.g. ``Built with the quick profile (LECTURE_PROFILE=quick).``"""
    note = nodes.paragraph(classes=[CLASS])
    note += nodes.emphasis(text=f"Built with the {name} profile ({profile.ENV_VAR}={name}).")
    return note


def add_profile_note(app, doctree, docname: str) -> None:
    """Insert the note right under the title of the page's first section (a page without one is left alone)."""
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or any(CLASS in node["classes"] for node in section.findall(nodes.paragraph)):
        return
    title = section.first_child_matching_class(nodes.title)
    section.insert(0 if title is None else title + 1, profile_note(profile.current()))


def setup(app):
    app.connect("doctree-resolved", add_profile_note, priority=600)  # after reproductions_page (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
