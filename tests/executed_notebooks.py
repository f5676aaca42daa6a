"""Each notebook executed once for both commands, notebooks first and on whichever worker is free.

A pytest plugin (registered by the root ``conftest.py``) with four jobs:

- **Keep what nbval executed.** When every cell of a notebook passes under nbval, and its checks (below)
  pass too, the notebook is stored with the outputs nbval received into the book's jupyter-cache (``_build/.jupyter_cache``), the cache myst-nb
  reads in ``make book`` (``execute_notebooks: cache`` in ``book/_config.yml``). ``make book`` after
  ``make test`` then renders without executing anything.
- **Never serve stale outputs.** jupyter-cache matches a notebook by its code cells alone. The outputs also
  depend on ``lecture_lib``, the locked dependencies, the profile and the Python and torch versions, so a
  stamp of those is kept beside the cache: a session that finds another stamp empties the cache first, and
  a notebook is not kept when the code changed while it ran.
- **Check what each notebook printed.** After a notebook's cells, three more items run on the same worker
  (:mod:`tests.notebook_checks`): ``NN.ipynb::rerun-prints-the-same`` executes the notebook a second time, now
  from the ``$LECTURE_CACHE`` its first execution filled, and compares the text of the two;
  ``NN.ipynb::no-unprinted-result-in-prose`` finds numbers in the prose that look like results and that the run
  did not print; and ``NN.ipynb::every-table-reaches-the-book`` requires each table the code shows to be glued
  for the book's Reproductions page.
- **Schedule the notebooks well.** Under ``--dist loadgroup`` each notebook's cells form one unit of work
  (they share a kernel and run in order on one worker) and unit tests are spread one by one
  (:func:`pytest_xdist_make_scheduler`). Notebooks come first, in :data:`NOTEBOOK_ORDER`, so that the long
  ones start at once and the unit tests fill the gaps at the end.

Keeping needs the book's packages (jupyter-cache, in the ``book`` extra); without them the plugin keeps nothing,
says so in the session's header, and does its other jobs. ``--skip-executed`` (``make book``) deselects the notebooks whose outputs are already in the cache. At the end,
the session prints each notebook's time (its cells' setup, call and teardown, added up), so that a notebook
that grows shows in every log, and each check's time over all notebooks.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import notebook_checks

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = CACHE.parent / ".jupyter_cache.stamp"
_STAMP = pytest.StashKey[str]()
# jupyter-cache comes with the book's packages (pip install -e ".[book]"), not with the test extra.
CAN_KEEP = importlib.util.find_spec("jupyter_cache") is not None
WITHOUT_CACHE = "jupyter-cache is not installed (it is in the `book` extra: pip install -e '.[book]')"

# The first two go one to each worker: 05, which builds the two small BERTs of chapter 04 and the BERT that
# 10, 11 and 12 load from $LECTURE_CACHE, and 07, the longest of those that need none of them. 10, 11 and 12
# come after 05 has had time to build its BERT (else they would wait on its lock), 04 after 05 has built its
# BERTs, and the short ones last. Notebooks not listed run after these, before the unit tests.
NOTEBOOK_ORDER = ("05", "07", "06", "09", "11", "10", "12", "08", "04", "02", "01", "03")


def pytest_addoption(parser):
    parser.addoption(
        "--skip-executed",
        action="store_true",
        help="deselect the notebooks whose outputs are in the book's jupyter-cache (make book)",
    )


# --- The stamp: what else decides a notebook's outputs -------------------------------------------------------


def stamp() -> str:
    """SHA-256 of lecture_lib's files, the locked dependencies, the profile, the claims' seeds ($LECTURE_SEEDS) and
    the Python and torch versions."""
    import torch

    digest = hashlib.sha256()
    for path in sorted((ROOT / "lecture_lib").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    for path in (ROOT / "requirements.lock", ROOT / "pyproject.toml"):
        digest.update(path.read_bytes())
    profile, seeds = os.environ.get("LECTURE_PROFILE", "quick"), os.environ.get("LECTURE_SEEDS", "")
    digest.update(f"{profile} {seeds} {sys.version} {torch.__version__}".encode())
    return digest.hexdigest()


def pytest_configure(config):
    config.stash[_STAMP] = stamp()  # what this process's kernels will import


def pytest_sessionstart(session):
    """In the controlling process only (not in xdist's workers): empty a cache that another stamp filled."""
    if hasattr(session.config, "workerinput"):
        return
    current = session.config.stash[_STAMP]
    if STAMP.exists() and STAMP.read_text() == current:
        return
    shutil.rmtree(CACHE, ignore_errors=True)
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(current)


# --- Order, groups and --skip-executed --------------------------------------------------------------------


def _notebook_of(item) -> Path | None:
    path = Path(str(item.fspath))
    return path if path.suffix == ".ipynb" else None


def _rank(item) -> tuple:
    notebook = _notebook_of(item)
    if notebook is None:
        return (1, 0, "")
    prefix = notebook.name[:2]
    return (0, NOTEBOOK_ORDER.index(prefix) if prefix in NOTEBOOK_ORDER else len(NOTEBOOK_ORDER), notebook.name)


def pytest_report_header(config):
    return None if CAN_KEEP else f"executed notebooks are not kept for `make book`: {WITHOUT_CACHE}"


def pytest_collection_modifyitems(config, items):
    if config.getoption("--skip-executed"):
        if not CAN_KEEP:
            raise pytest.UsageError(f"--skip-executed reads the book's cache, but {WITHOUT_CACHE}")
        cached = {path for path in {_notebook_of(item) for item in items} - {None} if _in_cache(path)}
        config.hook.pytest_deselected(items=[item for item in items if _notebook_of(item) in cached])
        items[:] = [item for item in items if _notebook_of(item) not in cached]
    notebooks = dict.fromkeys(item.parent for item in items if _notebook_of(item) is not None)
    items += [
        NotebookCheck.from_parent(notebook, name=name, check=check)
        for notebook in notebooks
        for name, check in NOTEBOOK_CHECKS.items()
    ]
    items.sort(key=_rank)  # stable: a notebook's cells keep their order, and its checks come after them


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: one unit of work per notebook, one per unit test, sent in collection order.

    xdist's own loadgroup reads an ``@group`` suffix that it appends to ``item._nodeid``, which pytest 9 no
    longer uses for ``item.nodeid``: every cell would be sent alone, to either worker, and fail without the
    cells before it. This scheduler finds a notebook from the node id itself.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # send in collection order (NOTEBOOK_ORDER), not the largest first

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") else nodeid

    return NotebookScheduling(config, log)


# --- What nbval executed, checked and kept -----------------------------------------------------------------


@contextmanager
def _cache():
    """The jupyter-cache, held by this process alone (two workers may finish a notebook at once)."""
    from jupyter_cache import get_cache

    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / ".jupyter_cache.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield get_cache(str(CACHE))


def _in_cache(path: Path) -> bool:
    import nbformat

    with _cache() as cache:
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            return False
    return True


_failed: set[str] = set()  # notebooks (node ids) with a failed or skipped cell in this worker


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if _notebook_of(item) is not None and (report.failed or report.skipped):
        _failed.add(item.parent.nodeid)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    result = yield
    last_of_its_notebook = nextitem is None or nextitem.parent is not item.parent
    if _notebook_of(item) is not None and last_of_its_notebook and item.parent.nodeid not in _failed:
        _store(item.parent)
    return result


def _executed(notebook_file):
    """The notebook as nbval read it, each code cell given the outputs nbval received; None if a cell did not run
    (it failed, or was deselected)."""
    outputs = {
        id(cell_item.cell): cell_item.test_outputs
        for cell_item in notebook_file.session.items
        if cell_item.parent is notebook_file and hasattr(cell_item, "test_outputs")
    }
    executed = copy.deepcopy(notebook_file.nb)
    code_cells = [
        (cell, original) for cell, original in zip(executed.cells, notebook_file.nb.cells) if cell.cell_type == "code"
    ]
    if any(outputs.get(id(original)) is None for _, original in code_cells):
        return None
    for count, (cell, original) in enumerate(code_cells, start=1):
        cell.outputs, cell.execution_count = copy.deepcopy(outputs[id(original)]), count
    return executed


class NotebookCheck(pytest.Item):
    """A check on what a notebook's cells printed, run after them on the same worker."""

    def __init__(self, *, check, **kwargs):
        super().__init__(**kwargs)
        self.check = check

    def runtest(self):
        executed = _executed(self.parent)
        if executed is None:
            pytest.skip("a cell of this notebook failed or did not run, so its outputs are not complete")
        self.check(Path(str(self.parent.fspath)), executed)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.name}"


def _rerun_prints_the_same(path: Path, executed) -> None:
    from lecture_lib.bench.gpu_check import check_notebook

    report = check_notebook(path, dict(os.environ))
    if report.failure:
        pytest.fail(f"the second execution failed at cell {report.failure.index}:\n{report.failure.traceback}")
    differences = notebook_checks.rerun_differences(executed, report.notebook)
    assert not differences, (
        f"{path.name}: a second execution, from the filled $LECTURE_CACHE, printed other text "
        "(seed each model and draw where it is made; tag a cell that prints timings "
        f"'{notebook_checks.WALL_CLOCK}'):\n" + "\n".join(differences)
    )


def _no_unprinted_result_in_prose(path: Path, executed) -> None:
    quotes = notebook_checks.unquoted_results(executed)
    assert not quotes, (
        f"{path.name}: numbers in the prose that this run did not print (print them from their "
        "cell, cite the paper in their sentence, or rephrase):\n" + "\n".join(map(str, quotes))
    )


def _every_table_reaches_the_book(path: Path, executed) -> None:
    if importlib.util.find_spec("myst_nb") is None:
        pytest.skip("myst-nb is not installed (the `book` extra), so no table was glued for the book")
    missing = notebook_checks.unglued_tables(executed)
    assert not missing, (
        f"{path.name}: tables the book's Reproductions page pastes, which this run did not show (show each one in "
        f"every profile, with empty cells where the profile has no rows): {missing}"
    )


NOTEBOOK_CHECKS = {
    "rerun-prints-the-same": _rerun_prints_the_same,
    "no-unprinted-result-in-prose": _no_unprinted_result_in_prose,
    "every-table-reaches-the-book": _every_table_reaches_the_book,
}


def _store(notebook_file) -> None:
    """The executed notebook (:func:`_executed`) into the book's jupyter-cache."""
    from jupyter_cache.base import CacheBundleIn

    executed = _executed(notebook_file)
    if executed is None or not CAN_KEEP:
        return
    with _cache() as cache:
        if STAMP.read_text() != notebook_file.config.stash[_STAMP]:
            return  # the code changed since this session started: these outputs are not the code's any more
        cache.cache_notebook_bundle(
            CacheBundleIn(executed, str(Path(str(notebook_file.fspath)))), check_validity=False, overwrite=True
        )


# --- Each notebook's time ----------------------------------------------------------------------------------

_seconds: Counter = Counter()  # notebook file name -> seconds of its cells, from the reports that reach us
_check_seconds: Counter = Counter()  # check name -> seconds, all notebooks together


def pytest_runtest_logreport(report):
    path, _, name = report.nodeid.partition("::")
    if path.endswith(".ipynb"):
        (_check_seconds if name in NOTEBOOK_CHECKS else _seconds)[
            name if name in NOTEBOOK_CHECKS else Path(path).stem
        ] += report.duration


def pytest_terminal_summary(terminalreporter):
    if _seconds and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.section("notebook times")
        for name, seconds in sorted(_seconds.items()):
            terminalreporter.line(f"{seconds:7.1f} s  {name}")
        terminalreporter.line(f"{sum(_seconds.values()):7.1f} s  all notebooks, one after another")
        for name, seconds in sorted(_check_seconds.items()):
            terminalreporter.line(f"{seconds:7.1f} s  {name}, all notebooks")
