"""The notebook pairs: each py:percent source and its .ipynb hold the same cells, and the .ipynb is output-free.

(Executing the notebooks is nbval's job: pytest collects notebooks/*.ipynb with --nbval-lax.)
"""

import json
import re
from pathlib import Path

import jupytext
import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def _cells(notebook):
    return [(cell.cell_type, cell.source.strip(), cell.metadata.get("tags", [])) for cell in notebook.cells]


def test_there_are_notebooks():
    assert SOURCES, "no notebooks/NN_name.py found"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_pair_holds_the_same_cells(source):
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make notebooks`"
    from_py = jupytext.read(source)
    from_ipynb = jupytext.read(paired)
    assert _cells(from_py) == _cells(from_ipynb), f"{source.name} and {paired.name} have drifted: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_ipynb_is_output_free(source):
    cells = json.loads(source.with_suffix(".ipynb").read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None, f"{source.name}: commit output-free"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_notebook_opens_with_title_colab_link_and_install_cell(source):
    notebook = jupytext.read(source)
    title, install, imports = notebook.cells[:3]
    assert title.cell_type == "markdown" and title.source.startswith(f"# {source.stem[:2]} ")
    colab = f"https://colab.research.google.com/github/{REPOSITORY.removeprefix('https://github.com/')}/blob/main/notebooks/{source.stem}.ipynb"
    assert colab in title.source, f"{source.name}: the title cell should link to {colab}"
    assert install.cell_type == "code" and '"google.colab" in sys.modules' in install.source
    assert f"lecture-lib[colab] @ git+{REPOSITORY}" in install.source, "the Colab cell installs the colab extra"
    # The book leaves the install cell out and folds the import cell (its output, e.g. the profile, stays).
    assert install.metadata.get("tags") == ["remove-cell"], f"{source.name}: tag the install cell remove-cell"
    assert imports.cell_type == "code" and imports.metadata.get("tags") == ["hide-input"], (
        f"{source.name}: tag the import cell hide-input"
    )


def test_readme_lists_every_notebook_with_a_colab_badge():
    readme = (ROOT / "README.md").read_text()
    for source in SOURCES:
        assert re.search(rf"colab\.research\.google\.com/github/.*/notebooks/{source.stem}\.ipynb", readme), (
            f"README.md has no Colab badge for {source.stem}"
        )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_notebook_never_silences_a_progress_bar(source):
    assert not re.search(r"\bprogress\s*=\s*False", source.read_text()), (
        f"{source.name}: keep the progress bars (a student waiting on a silent cell cannot tell it from a hang)"
    )


def test_progress_bars_are_widgets_in_jupyter():
    """tqdm.auto draws a widget in Jupyter and Colab; plain tqdm writes text to stderr, shown red there."""
    files = sorted((ROOT / "lecture_lib").rglob("*.py")) + SOURCES
    plain = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in files
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from tqdm import|import tqdm\b|from tqdm\.(std|notebook) import)", line)
    ]
    assert not plain, f"import tqdm.auto's tqdm instead: {plain}"
