"""The intro page's chapter map (book/chapter_map.py) is what its script draws, and covers every chapter."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("chapter_map", ROOT / "book" / "chapter_map.py")
chapter_map = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chapter_map)


def test_the_checked_in_svg_is_what_the_script_draws(tmp_path):
    drawn = tmp_path / "chapter_map.svg"
    chapter_map.write_svg(drawn)
    assert drawn.read_bytes() == chapter_map.SVG.read_bytes(), (
        "book/chapter_map.svg is out of date: run `.venv/bin/python book/chapter_map.py` and commit it"
    )


def test_every_chapter_is_placed_and_each_arrow_points_forward():
    chapters = {p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert set(chapter_map.LABELS) == set(chapter_map.PLACES) == set(chapter_map.COLOURS) == chapters
    assert set(chapter_map.READ_FIRST) <= chapters
    backward = {(need, ch) for ch, needs in chapter_map.READ_FIRST.items() for need in needs if need >= ch}
    assert not backward, f"a chapter can only build on an earlier one: {backward}"
    # a chapter sits below each chapter it builds on, so that every arrow points down the page
    above = {
        (need, ch)
        for ch, needs in chapter_map.READ_FIRST.items()
        for need in needs
        if chapter_map.PLACES[need][1] <= chapter_map.PLACES[ch][1]
    }
    assert not above, above


def test_the_intro_and_the_readme_show_the_map():
    assert "chapter_map.svg" in (ROOT / "book" / "intro.md").read_text()
    assert "book/chapter_map.svg" in (ROOT / "README.md").read_text()
