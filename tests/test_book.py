"""The book's offline check (book/check_offline.py) catches what would load from the web."""

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_offline", ROOT / "book" / "check_offline.py")
check_offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_offline)


def test_external_scripts_styles_and_images_are_flagged(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        '<html><head><script src="https://cdn.example.org/mathjax.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/a.css"><script src="_static/local.js"></script></head>'
        '<body><a href="https://example.org">a link is fine</a><img src="http://example.org/x.png">'
        '<img srcset="https://example.org/y.png 2x" src="_static/y.png">'
        '<script>const URL = "https://unpkg.com/thebe/lib/index.js"; const x = 1 // 2;</script></body></html>'
    )
    found = check_offline.external_loads(page)
    assert len(found) == 5, found
    assert any("unpkg.com" in f for f in found)
    assert check_offline.main([str(tmp_path)]) == 1


def test_a_clean_page_passes(tmp_path):
    (tmp_path / "index.html").write_text(
        '<script src="_static/mathjax/tex-chtml-full.js"></script><a href="https://x.org">x</a>'
    )
    assert check_offline.main([str(tmp_path)]) == 0


def test_book_serves_mathjax_locally():
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    mathjax = config["sphinx"]["config"]["mathjax_path"]
    assert not check_offline.is_external(mathjax)
    assert (ROOT / "book" / "_static" / mathjax).is_file()
    assert (ROOT / "book" / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def test_the_executed_copy_replaces_the_output_free_one_myst_nb_writes_in_cache_mode(tmp_path):
    """book/_ext/executed_copies.py: the notebook in jupyter_execute gets the cached outputs; a notebook that is
    not in the cache (myst-nb executed it and wrote it) and a page that is not a notebook are left alone."""
    from types import SimpleNamespace

    import nbformat

    pytest.importorskip("jupyter_cache", reason="the book's cache needs jupyter-cache, from the `book` extra")
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    spec = importlib.util.spec_from_file_location("executed_copies", ROOT / "book" / "_ext" / "executed_copies.py")
    executed_copies = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(executed_copies)

    def notebook(source, outputs=()):
        cell = nbformat.v4.new_code_cell(source, outputs=list(outputs), execution_count=1 if outputs else None)
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), cell])

    cache, folder = tmp_path / "cache", tmp_path / "jupyter_execute"
    (folder / "notebooks").mkdir(parents=True)
    printed = nbformat.v4.new_output("stream", name="stdout", text="2\n")
    get_cache(str(cache)).cache_notebook_bundle(
        CacheBundleIn(notebook("print(1 + 1)", [printed]), "a.ipynb"), check_validity=False
    )
    nbformat.write(notebook("print(1 + 1)"), folder / "notebooks" / "a.ipynb")
    nbformat.write(notebook("print(2 + 2)"), folder / "notebooks" / "b.ipynb")
    for docname in ("notebooks/a", "notebooks/b", "book/intro"):
        config = SimpleNamespace(output_folder=str(folder), execution_mode="cache", execution_cache_path=str(cache))
        executed_copies.write_executed_copy(
            SimpleNamespace(env=SimpleNamespace(mystnb_config=config, docname=docname)), None
        )
    assert nbformat.read(folder / "notebooks" / "a.ipynb", 4).cells[1].outputs[0].text == "2\n"
    assert nbformat.read(folder / "notebooks" / "b.ipynb", 4).cells[1].outputs == []
    assert not (folder / "book").exists()


def test_each_page_says_which_profile_produced_it(monkeypatch):
    """book/_ext/profile_note.py: the note goes right under the page's title (after what another extension put
    there first), names $LECTURE_PROFILE, and is added once; a page without a section is left alone."""
    import pytest

    pytest.importorskip("docutils", reason="the book's extension needs docutils, from the `book` extra")
    from docutils import nodes
    from docutils.utils import new_document

    spec = importlib.util.spec_from_file_location("profile_note", ROOT / "book" / "_ext" / "profile_note.py")
    profile_note = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile_note)

    document = new_document("page")
    section = nodes.section()
    section += [nodes.title(text="08 ELECTRA"), nodes.paragraph(text="The lesson.")]
    document += section
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    for _ in range(2):
        profile_note.add_profile_note(None, document, "notebooks/08_electra")
    assert [child.astext() for child in section.children] == [
        "08 ELECTRA",
        "Built with the full profile (LECTURE_PROFILE=full).",
        "The lesson.",
    ]
    empty = new_document("empty")
    profile_note.add_profile_note(None, empty, "book/empty")
    assert empty.children == []
    monkeypatch.setenv("LECTURE_PROFILE", "fast")
    other = new_document("other")
    other += nodes.section()
    with pytest.raises(ValueError, match="not a known profile"):
        profile_note.add_profile_note(None, other, "book/other")


def test_the_jupyterlab_check_picks_chapters_with_a_fold(tmp_path, capsys):
    """book/check_jupyterlab.py checks the notebooks whose markdown has a <details> block (the check itself starts
    JupyterLab and Chromium, tens of seconds a notebook: CONTRIBUTING.md gives its command)."""
    import json

    spec = importlib.util.spec_from_file_location("check_jupyterlab", ROOT / "book" / "check_jupyterlab.py")
    check_jupyterlab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_jupyterlab)

    def notebook(name, markdown, code="x = 1"):
        path = tmp_path / name
        path.write_text(
            json.dumps(
                {"cells": [{"cell_type": "markdown", "source": markdown}, {"cell_type": "code", "source": code}]}
            )
        )
        return path

    assert check_jupyterlab.has_details(notebook("a.ipynb", ["1. Why?\n", "\n", "<details><summary>Hint</summary>"]))
    assert not check_jupyterlab.has_details(notebook("b.ipynb", ":::{admonition} Hint", code="s = '<details>'"))
    import pytest

    with pytest.raises(SystemExit):
        check_jupyterlab.main([str(tmp_path / "c.py")])
    assert "expected .ipynb files" in capsys.readouterr().err
