"""Paper-versus-ours tables: their Markdown, their errors, the glue the book reads, and the page that collects them."""

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbclient import NotebookClient

from lecture_lib import reproductions
from lecture_lib.reproductions import ReproductionTable, markdown_table, show_reproduction

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("reproductions_page", ROOT / "book" / "_ext" / "reproductions_page.py")
reproductions_page = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reproductions_page)

HEADER = ["model", "F1", "paper"]
ROWS = [["ours", 0.91234, "92.4"], ["a|b", None, float("nan")]]


def test_table_has_a_header_a_rule_and_one_line_per_row():
    assert markdown_table(HEADER, ROWS).splitlines() == [
        "| model | F1 | paper |", "|---|---|---|", "| ours | 0.912 | 92.4 |", "| a\\|b | – | – |"]


def test_table_parses_as_the_cells_it_was_given():
    html = MarkdownIt("commonmark").enable("table").render(markdown_table(HEADER, ROWS))
    cells = re.findall(r"<t[hd]>(.*?)</t[hd]>", html)
    assert cells == ["model", "F1", "paper", "ours", "0.912", "92.4", "a|b", "–", "–"]


@pytest.mark.parametrize("header, rows, message", [
    ([], [], "empty header"),
    (HEADER, [["ours", 0.9]], "row 0 has 2 cells, expected 3"),
    (HEADER, [["ours", 0.9, "1"], ["ours", 0.9, "1", "extra"]], "row 1 has 4 cells, expected 3"),
])
def test_bad_tables_are_refused(header, rows, message):
    with pytest.raises(ValueError, match=message):
        markdown_table(header, rows)


@pytest.mark.parametrize("key", ["Ch01-Table", "ch01_table", "ch01 table", "-ch01", "ch01-", ""])
def test_bad_keys_are_refused(key):
    with pytest.raises(ValueError, match="expected a key of lower-case words"):
        show_reproduction(key, "Caption", HEADER, ROWS[:1])


def test_without_myst_nb_the_table_is_shown_as_markdown(monkeypatch):
    shown = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as in Colab: importing it fails
    monkeypatch.setattr(reproductions, "display", shown.append)
    text = show_reproduction("ch99-test", "Paper (Author, 2020), Table 1", HEADER, ROWS[:1], note="It reproduced.")
    assert text == "**Paper (Author, 2020), Table 1**\n\n" + markdown_table(HEADER, ROWS[:1]) + "\n\nIt reproduced."
    assert [m.data for m in shown] == [text]


def test_the_html_rendering_is_the_markdown_table():
    table = ReproductionTable(markdown_table(HEADER, ROWS))
    html = table._repr_html_()
    assert html.startswith('<table class="table">') and html.count("<tr>") == 3
    assert table._repr_markdown_() == markdown_table(HEADER, ROWS)


def test_an_executed_notebook_carries_the_glued_table():
    """What myst-nb reads from the executed notebook: an output named by the key, with HTML and Markdown."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from lecture_lib.reproductions import show_reproduction"),
        nbformat.v4.new_code_cell('show_reproduction("ch99-glued", "Paper (Author, 2020), Table 2", ["a", "b"], '
                                  '[["ours", 0.5]], note="Half of it.");'),
    ])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[1].outputs
    assert len(outputs) == 1, outputs
    assert outputs[0]["metadata"]["scrapbook"]["name"] == "ch99-glued"
    data = outputs[0]["data"]
    assert "| ours | 0.500 |" in data["text/markdown"] and data["text/markdown"].endswith("Half of it.")
    assert "<td>0.500</td>" in data["text/html"]


# --- the page ------------------------------------------------------------------------------------------------

def test_keys_are_read_from_calls_in_order():
    source = 'x = 1\nshow_reproduction("ch01-a", "A", h, r)\nshow_reproduction(\n    "ch01-b",\n    "B", h, r)\n'
    assert reproduction_keys(source) == ["ch01-a", "ch01-b"]


def test_a_call_without_a_literal_key_is_an_error():
    with pytest.raises(ValueError, match="got 2 calls and 1 literal keys"):
        reproduction_keys('show_reproduction("ch01-a", c, h, r)\nshow_reproduction(key, c, h, r)')


def reproduction_keys(source):
    return reproductions_page.reproduction_keys(source, "01_test.py")


def test_page_pastes_each_key_from_its_notebook(tmp_path):
    (tmp_path / "01_first.py").write_text('# # 01 · First\nshow_reproduction("ch01-x", c, h, r)\n')
    (tmp_path / "02_none.py").write_text("# # 02 · No table\n")
    (tmp_path / "03_third.py").write_text('# # 03 · Third\nshow_reproduction("ch03-y", c, h, r)\n'
                                          'show_reproduction("ch03-z", c, h, r)\n')
    page = reproductions_page.page_sections(tmp_path)
    assert page.count("## ") == 2 and "## 01 · First" in page and "No table" not in page
    assert re.findall(r":::\{glue:any\} (\S+)\n:doc: (\S+)", page) == [
        ("ch01-x", "../notebooks/01_first.ipynb"), ("ch03-y", "../notebooks/03_third.ipynb"),
        ("ch03-z", "../notebooks/03_third.ipynb")]


def test_a_key_used_twice_is_an_error(tmp_path):
    for name in ("01_a.py", "02_b.py"):
        (tmp_path / name).write_text('show_reproduction("ch01-x", c, h, r)\n')
    with pytest.raises(ValueError, match="'ch01-x' is used by 01_a.py and again by 02_b.py"):
        reproductions_page.reproductions_by_chapter(tmp_path)


def test_every_table_of_the_course_reaches_the_page():
    """Each chapter's keys are unique, start with its number, and are pasted from its own notebook."""
    chapters = reproductions_page.reproductions_by_chapter(ROOT / "notebooks")
    assert {"01_attention", "02_transformer", "03_tokenization", "06_roberta_spanbert", "07_albert",
            "10_bertology_attention"} <= set(chapters)
    page = reproductions_page.page_sections(ROOT / "notebooks")
    for stem, keys in chapters.items():
        assert all(key.startswith(f"ch{stem[:2]}-") for key in keys), (stem, keys)
        for key in keys:
            assert f":::{{glue:any}} {key}\n:doc: ../notebooks/{stem}.ipynb\n:::" in page
    assert (ROOT / "book" / "reproductions.md").is_file()
