"""Paper-versus-ours tables: their Markdown, their errors, the glue the book reads, and the page that collects them."""

import functools
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbclient import NotebookClient

from lecture_lib import reproductions
from lecture_lib.reproductions import (
    Claim,
    Demonstration,
    ReproductionTable,
    Verdict,
    chapter_claims,
    claims_table,
    main,
    markdown_table,
    notebook_claims,
    show_reproduction,
    show_what_we_saw,
    shown,
)

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _page():
    """book/_ext/reproductions_page.py, the Sphinx extension that writes the Reproductions page: it needs the book's
    packages (docutils, Sphinx: pip install -e '.[book]'), and the tests that read it are skipped without them."""
    for package in ("docutils", "sphinx"):
        pytest.importorskip(package, reason=f"the book's extension needs {package}, from the `book` extra")
    path = ROOT / "book" / "_ext" / "reproductions_page.py"
    page = importlib.util.module_from_spec(importlib.util.spec_from_file_location("reproductions_page", path))
    page.__spec__.loader.exec_module(page)
    return page


HEADER = ["model", "F1", "paper"]
ROWS = [["ours", 0.91234, "92.4"], ["a|b", None, float("nan")]]


def test_table_has_a_header_a_rule_and_one_line_per_row():
    assert markdown_table(HEADER, ROWS).splitlines() == [
        "| model | F1 | paper |",
        "|---|---|---|",
        "| ours | 0.912 | 92.4 |",
        "| a\\|b | – | – |",
    ]


def test_table_parses_as_the_cells_it_was_given():
    html = MarkdownIt("commonmark").enable("table").render(markdown_table(HEADER, ROWS))
    cells = re.findall(r"<t[hd]>(.*?)</t[hd]>", html)
    assert cells == ["model", "F1", "paper", "ours", "0.912", "92.4", "a|b", "–", "–"]


@pytest.mark.parametrize(
    "header, rows, message",
    [
        ([], [], "empty header"),
        (HEADER, [["ours", 0.9]], "row 0 has 2 cells, expected 3"),
        (HEADER, [["ours", 0.9, "1"], ["ours", 0.9, "1", "extra"]], "row 1 has 4 cells, expected 3"),
    ],
)
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
    assert (
        show_reproduction("ch99-test", "Paper (Author, 2020), Table 1", HEADER, ROWS[:1], note="It reproduced.") is None
    )  # a cell that ends with the call shows the table once
    text = "**Paper (Author, 2020), Table 1**\n\n" + markdown_table(HEADER, ROWS[:1]) + "\n\nIt reproduced."
    assert [m.data for m in shown] == [text]


def test_the_html_rendering_is_the_markdown_table():
    table = ReproductionTable(markdown_table(HEADER, ROWS))
    html = table._repr_html_()
    assert html.startswith('<table class="table">') and html.count("<tr>") == 3
    assert table._repr_markdown_() == markdown_table(HEADER, ROWS)


def test_an_executed_notebook_carries_the_glued_table():
    """What myst-nb reads from the executed notebook: an output named by the key, with HTML and Markdown."""
    pytest.importorskip("myst_nb", reason="tables are glued by myst-nb, from the `book` extra")
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("from lecture_lib.reproductions import show_reproduction"),
            nbformat.v4.new_code_cell(
                'show_reproduction("ch99-glued", "Paper (Author, 2020), Table 2", ["a", "b"], '
                '[["ours", 0.5]], note="Half of it.");'
            ),
        ]
    )
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
    return _page().reproduction_keys(source, "01_test.py")


def test_page_pastes_each_key_from_its_notebook(tmp_path):
    (tmp_path / "01_first.py").write_text('# # 01 · First\nshow_reproduction("ch01-x", c, h, r)\n')
    (tmp_path / "02_none.py").write_text("# # 02 · No table\n")
    (tmp_path / "03_third.py").write_text(
        '# # 03 · Third\nshow_reproduction("ch03-y", c, h, r)\nshow_reproduction("ch03-z", c, h, r)\n'
    )
    page = _page().page_sections(tmp_path)
    assert page.count("## ") == 2 and "## 01 · First" in page and "No table" not in page
    assert re.findall(r":::\{glue:any\} (\S+)\n:doc: (\S+)", page) == [
        ("ch01-x", "../notebooks/01_first.ipynb"),
        ("ch03-y", "../notebooks/03_third.ipynb"),
        ("ch03-z", "../notebooks/03_third.ipynb"),
    ]


def test_a_key_used_twice_is_an_error(tmp_path):
    for name in ("01_a.py", "02_b.py"):
        (tmp_path / name).write_text('show_reproduction("ch01-x", c, h, r)\n')
    with pytest.raises(ValueError, match="'ch01-x' is used by 01_a.py and again by 02_b.py"):
        _page().reproductions_by_chapter(tmp_path)


def test_every_table_of_the_course_reaches_the_page():
    """Each chapter's keys are unique, start with its number, and are pasted from its own notebook."""
    chapters = _page().reproductions_by_chapter(ROOT / "notebooks")
    assert {
        "01_attention",
        "02_transformer",
        "03_tokenization",
        "06_roberta_spanbert",
        "07_albert",
        "10_bertology_attention",
    } <= set(chapters)
    page = _page().page_sections(ROOT / "notebooks")
    for stem, keys in chapters.items():
        assert all(key.startswith(f"ch{stem[:2]}-") for key in keys), (stem, keys)
        for key in keys:
            assert f":::{{glue:any}} {key}\n:doc: ../notebooks/{stem}.ipynb\n:::" in page
    assert (ROOT / "book" / "reproductions.md").is_file()


# --- "What we saw": claims, verdicts, the summary command ------------------------------------------------------


def claim(key="01-attention-keeps-long-strings", verdict=None):
    return Claim(
        key,
        "attention keeps long strings",
        "26.75 vs 17.82 BLEU (Bahdanau et al., 2015)",
        "0.77 vs 0.05",
        verdict or Verdict("reproduced", "with attention above without"),
    )


def test_a_verdict_is_one_of_four_and_names_its_rule():
    with pytest.raises(ValueError, match="expected a verdict in"):
        Verdict("partly", "r")
    with pytest.raises(ValueError, match="expected the rule"):
        Verdict("reproduced", "")
    with pytest.raises(ValueError, match="expected a reason exactly for an inconclusive verdict"):
        Verdict("inconclusive", "r")


@pytest.mark.parametrize("key", ["1-x", "01", "01-", "01_x", "01-X", "ch01-x", "001-x"])
def test_bad_claim_keys_are_refused(key):
    with pytest.raises(ValueError, match="expected a claim key"):
        claim(key)


def test_a_claim_needs_a_computed_verdict():
    with pytest.raises(TypeError, match="expected a Verdict"):
        Claim("01-x", "c", "p", "o", "reproduced")


def test_claims_table_has_one_row_per_claim_with_its_verdict_and_rule():
    rows = [
        claim("01-a"),
        claim("01-b", Verdict("mechanism only", "running mean = softmax")),
        claim("01-c", Verdict("not reproduced", "x > y")),
    ]
    lines = claims_table(rows).splitlines()
    assert lines[0] == "| claim | the paper | ours | verdict | the rule | reason |" and len(lines) == 5
    assert [line.split(" | ")[3] for line in lines[2:]] == [
        "**reproduced**",
        "**mechanism only**",
        "**not reproduced**",
    ]
    assert lines[3].endswith("| running mean = softmax | – |")
    with pytest.raises(ValueError, match=r"expected unique claim keys, got \['01-a'\]"):
        claims_table([claim("01-a"), claim("01-a")])


def demonstration(key="01-a"):
    return Demonstration(key, "attention reads by content", "p", "Bahdanau et al. (2015)", "the weights")


@pytest.mark.parametrize(
    "key, keys, message",
    [
        ("ch01-what-we-saw", [], "all start with the chapter number"),
        ("ch02-what-we-saw", ["01-a"], "all start with the chapter number"),
        ("ch01-what-we-saw", ["01-a", "02-b"], "all start with the chapter number"),
        ("Ch01", ["01-a"], "expected a key of lower-case words"),
    ],
)
def test_bad_claim_tables_are_refused(key, keys, message):
    with pytest.raises(ValueError, match=message):
        show_what_we_saw(key, "What we saw", [demonstration(k) for k in keys], {k: shown("o") for k in keys})


def test_without_myst_nb_the_claims_are_shown_and_carried(monkeypatch):
    displayed = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)
    monkeypatch.setattr(reproductions, "display", displayed.append)
    claims, values = [demonstration()], {"01-a": shown("the weights peak on the aligned word")}
    assert show_what_we_saw("ch01-what-we-saw", "What we saw", claims, values, note="Scale differs.") is None
    markdown, metadata = displayed[0]._repr_markdown_()
    row = Claim(
        "01-a",
        "attention reads by content",
        "Bahdanau et al. (2015): p",
        "the weights peak on the aligned word",
        Verdict("mechanism only", "shows the weights; no outcome measured"),
    )
    assert markdown == (
        "**What we saw**\n\n" + claims_table([row]) + "\n\nNo claim of this table varies a seed.\n\nScale differs."
    )
    assert metadata == {
        "lecture_checks": [],
        "lecture_claims": [
            {
                "key": "01-a",
                "claim": "attention reads by content",
                "paper": "Bahdanau et al. (2015): p",
                "ours": "the weights peak on the aligned word",
                "verdict": "mechanism only",
                "rule": "shows the weights; no outcome measured",
                "reason": "",
                "declared": {
                    "kind": "Demonstration",
                    "key": "01-a",
                    "claim": "attention reads by content",
                    "paper": "p",
                    "source": "Bahdanau et al. (2015)",
                    "shows": "the weights",
                },
                "measured": {"values": [], "baseline": None, "seeds": [], "seed_kind": "none", "gates": {}},
            }
        ],
    }


def test_an_executed_notebook_carries_its_claims():
    """Executed by a kernel, glued by myst-nb: the output's metadata holds the claims the summary counts."""
    pytest.importorskip("myst_nb", reason="tables are glued by myst-nb, from the `book` extra")
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "from lecture_lib.reproductions import Demonstration, Rule, Seeds, measured, show_what_we_saw, shown\n"
                "rule = Rule('04-a', 'c', paper='p', source='s', metric='m', data='d', compared='a', baseline='b',\n"
                "            seeds=Seeds('none', 1))\n"
                "show_what_we_saw('ch04-what-we-saw', 'What we saw', [rule, Demonstration('04-b', 'c', 'p', 's', 'x')],\n"
                "    {'04-a': measured('o', 0.5, 0.6, seeds=[0], seed_kind='none'), '04-b': shown('o')});"
            )
        ]
    )
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert len(outputs) == 1 and outputs[0]["metadata"]["scrapbook"]["name"] == "ch04-what-we-saw"
    row = "| c | s: p | o | **not reproduced** | m on d: a above b, in one deterministic measurement | – |"
    assert row in outputs[0]["data"]["text/markdown"]
    assert [(c["key"], c["verdict"]) for c in notebook_claims(notebook)] == [
        ("04-a", "not reproduced"),
        ("04-b", "mechanism only"),
    ]


def executed_notebook(path, *claims, checks=(), glued=True):
    """A notebook as the book's execution leaves it: a table output whose metadata carries the claims."""
    records = [
        {
            "key": key,
            "claim": "c",
            "paper": "p",
            "ours": "o",
            "verdict": verdict,
            "rule": "r",
            "reason": "why" if verdict == "inconclusive" else "",
        }
        for key, verdict in claims
    ]
    metadata = {
        "text/markdown": {"lecture_claims": records, "lecture_checks": [{"key": key, "passed": True} for key in checks]}
    }
    if glued:
        metadata["scrapbook"] = {"name": f"ch{path.name[:2]}-what-we-saw", "mime_prefix": ""}
    output = nbformat.v4.new_output("display_data", data={"text/markdown": "| table |"}, metadata=metadata)
    cells = [nbformat.v4.new_markdown_cell("## What we saw"), nbformat.v4.new_code_cell("show_what_we_saw(...)")]
    cells[1].outputs = [output] if claims else []
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


@pytest.fixture
def executed(tmp_path):
    folder = tmp_path / "jupyter_execute"
    executed_notebook(
        folder / "notebooks" / "01_attention.ipynb",
        ("01-a", "reproduced"),
        ("01-b", "mechanism only"),
        ("01-c", "reproduced"),
        checks=["01-d", "01-e"],
    )
    executed_notebook(
        folder / "notebooks" / "02_transformer.ipynb",
        ("02-a", "not reproduced"),
        ("02-b", "reproduced"),
        ("02-c", "inconclusive"),
        glued=False,
    )  # JupyterLab: no glue, still counted
    executed_notebook(folder / "notebooks" / "03_tokenization.ipynb")
    (folder / "reproductions.ipynb").write_text("{}")  # not a chapter: ignored
    return folder


def run_summary(*args):
    result = subprocess.run(
        [sys.executable, "-m", "lecture_lib.reproductions", "summary", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return result.returncode, result.stdout.splitlines(), result.stderr


TOTAL = "total claims=6 reproduced=3 not=1 inconclusive=1 mechanism=1 checks=2"


def test_summary_prints_a_line_per_chapter_and_a_total(executed):
    assert run_summary(executed) == (
        0,
        [
            "01 claims=3 reproduced=2 not=0 inconclusive=0 mechanism=1 checks=2",
            "02 claims=3 reproduced=1 not=1 inconclusive=1 mechanism=0 checks=0",
            "03 claims=0 reproduced=0 not=0 inconclusive=0 mechanism=0 checks=0",
            TOTAL,
        ],
        "",
    )


def test_summary_lists_the_claims(executed):
    assert run_summary(executed, "--claims") == (
        0,
        [
            "01 01-a reproduced",
            "01 01-b mechanism only",
            "01 01-c reproduced",
            "02 02-a not reproduced",
            "02 02-b reproduced",
            "02 02-c inconclusive",
        ],
        "",
    )


def test_summary_json_gives_every_claim_and_check_with_its_chapter(executed):
    code, out, _ = run_summary(executed, "--json")
    data = json.loads("\n".join(out))
    assert code == 0 and [(c["chapter"], c["key"], c["reason"]) for c in data["claims"]][-1] == ("02", "02-c", "why")
    assert [(k["chapter"], k["key"]) for k in data["checks"]] == [("01", "01-d"), ("01", "01-e")]


def test_summary_of_a_folder_without_notebooks_fails(tmp_path):
    code, out, err = run_summary(tmp_path)
    assert code == 2 and out == [] and "found none" in err


def test_a_claim_key_twice_in_the_course_is_an_error(tmp_path):
    executed_notebook(tmp_path / "01_a.ipynb", ("01-a", "reproduced"))
    executed_notebook(tmp_path / "02_b.ipynb", ("01-a", "reproduced"))
    with pytest.raises(ValueError, match="'01-a' does not start with its chapter, 02"):
        chapter_claims(tmp_path)
    executed_notebook(tmp_path / "02_b.ipynb", ("02-a", "reproduced"), ("02-a", "reproduced"))
    with pytest.raises(ValueError, match="'02-a' is shown by 02_b.ipynb and again by 02_b.ipynb"):
        chapter_claims(tmp_path)


def test_main_prints_what_the_command_prints(executed, capsys):
    assert main(["summary", str(executed)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == TOTAL


def test_the_page_counts_verdicts_per_chapter_and_in_total(executed):
    rows = _page().count_rows(reproductions.chapter_records(executed))
    assert rows == [
        ["01", "3", "2", "0", "0", "1", "2"],
        ["02", "3", "1", "1", "1", "0", "0"],
        ["03", "0", "0", "0", "0", "0", "0"],
        ["total", "6", "3", "1", "1", "1", "2"],
    ]
    table = _page().table_node(_page().COUNT_COLUMNS, rows)
    assert [entry.astext() for entry in table.findall(_page().nodes.entry)][:7] == [
        "chapter",
        "claims",
        "reproduced",
        "not reproduced",
        "inconclusive",
        "mechanism only",
        "checks",
    ]
    assert len(list(table.findall(_page().nodes.row))) == 5


def test_claims_tables_reach_the_page_and_claim_keys_are_unique_in_the_course():
    """Every ``show_what_we_saw`` key is pasted like a reproduction table; claim keys (string literals of the form
    ``"NN-words"`` in a notebook's source) start with their chapter and are unique in the course."""
    assert reproduction_keys('show_what_we_saw("ch01-what-we-saw", "C", claims, m)') == ["ch01-what-we-saw"]
    seen = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        source = path.read_text(encoding="utf-8")
        keys = re.findall(r'"([0-9]{2}-[a-z0-9]+(?:-[a-z0-9]+)*)"', source)
        shows = "show_what_we_saw(" in source
        assert bool(keys) == shows, f"{path.name}: a claims table and its literal keys"
        for key in keys:
            assert key.startswith(path.name[:3].replace("_", "-")), (path.name, key)
            assert key not in seen, f"claim {key!r} in {seen.get(key)} and {path.name}"
            seen[key] = path.name


def test_the_counts_table_goes_under_the_page_title(executed):
    """What Sphinx's doctree-resolved event does to the page: a sentence and the counts table after the title."""
    from types import SimpleNamespace

    _page()  # skipped without docutils
    from docutils import nodes
    from docutils.utils import new_document

    document = new_document("reproductions")
    section = nodes.section()
    section += [nodes.title(text="Reproductions"), nodes.paragraph(text="Every chapter ...")]
    document += section
    app = SimpleNamespace(outdir=str(executed.parent / "html"))
    _page().insert_counts(app, document, "book/other")
    assert len(section.children) == 2  # another page: untouched
    _page().insert_counts(app, document, _page().PAGE)
    title, intro, table, heading, listing, rest = section.children
    assert isinstance(table, nodes.table) and "What we saw" in intro.astext() and rest.astext() == "Every chapter ..."
    assert [entry.astext() for entry in table.findall(nodes.entry)][-7:] == ["total", "6", "3", "1", "1", "1", "2"]
    assert "(2)" in heading.astext()
    assert [item.astext() for item in listing.children] == ["02-a not reproduced: r; ours: o", "02-c inconclusive: why"]
