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
    (tmp_path / "index.html").write_text('<script src="_static/mathjax/tex-chtml-full.js"></script><a href="https://x.org">x</a>')
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
    get_cache(str(cache)).cache_notebook_bundle(CacheBundleIn(notebook("print(1 + 1)", [printed]), "a.ipynb"),
                                                check_validity=False)
    nbformat.write(notebook("print(1 + 1)"), folder / "notebooks" / "a.ipynb")
    nbformat.write(notebook("print(2 + 2)"), folder / "notebooks" / "b.ipynb")
    for docname in ("notebooks/a", "notebooks/b", "book/intro"):
        config = SimpleNamespace(output_folder=str(folder), execution_mode="cache", execution_cache_path=str(cache))
        executed_copies.write_executed_copy(SimpleNamespace(env=SimpleNamespace(mystnb_config=config,
                                                                                docname=docname)), None)
    assert nbformat.read(folder / "notebooks" / "a.ipynb", 4).cells[1].outputs[0].text == "2\n"
    assert nbformat.read(folder / "notebooks" / "b.ipynb", 4).cells[1].outputs == []
    assert not (folder / "book").exists()
