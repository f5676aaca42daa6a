"""The book's offline check (book/check_offline.py) catches what would load from the web."""

import importlib.util
from pathlib import Path

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
