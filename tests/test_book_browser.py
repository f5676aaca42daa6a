"""The browser check (book/check_browser.py) fails a page on a script error, a request outside the book or a
missing file, and passes a clean page. It needs Chromium and Playwright; elsewhere it is skipped, saying why."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_browser", ROOT / "book" / "check_browser.py")
check_browser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_browser)

needs_browser = pytest.mark.skipif(
    check_browser.why_skipped() is not None, reason=f"browser check cannot run here: {check_browser.why_skipped()}"
)

PAGES = {
    "clean.html": '<html><head><script src="_static/ok.js"></script></head><body><h1>fine</h1>'
    '<a href="https://example.org">a link is only followed when clicked</a></body></html>',
    "throws.html": "<html><body><script>undefinedFunction();</script></body></html>",
    "web.html": '<html><body><img src="https://example.org/picture.png"></body></html>',
    "fetches.html": "<html><body><script>fetch('https://example.org/data.json').catch(() => {});</script></body></html>",
    "missing.html": '<html><body><script src="_static/missing.js"></script></body></html>',
}


@pytest.fixture
def site(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "ok.js").write_text("document.title = 'ok';")
    for name, html in PAGES.items():
        (tmp_path / name).write_text(html)
    (tmp_path / "search.html").write_text("<html></html>")
    return tmp_path


def test_pages_are_every_html_page_but_sphinx_generated_ones_and_static_files(site):
    assert [p.name for p in check_browser.book_pages(site)] == sorted(PAGES)


@needs_browser
def test_each_kind_of_failure_is_reported_on_its_page_and_only_there(site, tmp_path_factory):
    shots = tmp_path_factory.mktemp("shots")
    problems = check_browser.check_pages(site, check_browser.book_pages(site), shots)
    assert problems["clean.html"] == []
    assert any(p.startswith("script error") and "undefinedFunction" in p for p in problems["throws.html"])
    assert "requested outside the book: https://example.org/picture.png" in problems["web.html"]
    assert "requested outside the book: https://example.org/data.json" in problems["fetches.html"]
    assert any(p.startswith("HTTP 404") and p.endswith("/_static/missing.js") for p in problems["missing.html"])
    assert sorted(p.name for p in shots.iterdir()) == sorted(name.replace(".html", ".png") for name in PAGES)
    assert all(p.stat().st_size > 1000 for p in shots.iterdir())  # a real rendered picture, not an empty file


@needs_browser
def test_main_fails_on_a_bad_page_and_passes_a_clean_book(site, tmp_path_factory, capsys):
    assert check_browser.main([str(site), "--screenshots", str(tmp_path_factory.mktemp("a"))]) == 1
    assert "4 of 5 pages failed" in capsys.readouterr().err
    for name in PAGES:
        if name != "clean.html":
            (site / name).unlink()
    assert check_browser.main([str(site), "--screenshots", str(tmp_path_factory.mktemp("b"))]) == 0


def test_a_missing_build_is_a_clear_error(tmp_path, capsys):
    assert check_browser.main([str(tmp_path / "nothing")]) == 2
    assert "build the book first" in capsys.readouterr().err
