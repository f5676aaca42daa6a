"""The course on a GPU, checked: every notebook in the quick profile on CUDA from an empty cache, then the
CUDA-only tests.

``python -m lecture_lib.bench gpu_check [--device cuda|cpu] [--slow SECONDS] [NOTEBOOK ...]`` (``make gpu-check``;
``make gpu-check DEVICE=cpu`` runs the same check on the CPU) executes each notebook's code cells in order, in
one Jupyter kernel per notebook (nbclient, no server, nothing from the network), with ``LECTURE_PROFILE=quick``
and a fresh temporary ``LECTURE_CACHE`` that is deleted at the end. It prints each notebook's time, every cell
slower than ``--slow`` seconds (default 10) and, where a cell fails, that cell's source line and traceback; the
notebook stops there and the next one starts. Then it runs the tests whose names say ``on_cuda`` (they skip
themselves without CUDA). The exit status is 0 when no cell and no test failed.

Without a GPU it refuses, unless told ``--device cpu``; with ``--device cpu`` on a machine that has one, the
kernels are started with ``CUDA_VISIBLE_DEVICES`` empty, so that the notebooks pick the CPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from lecture_lib.config import FlagParser, Range, add_ranged, flag_type

ROOT = Path(__file__).resolve().parents[2]
SLOW_SECONDS = 10.0
CUDA_TESTS = "on_cuda"  # the tests that only mean something on CUDA carry this in their names


@dataclass
class CellFailure:
    """The first cell of a notebook that raised: its index among the notebook's cells, first line, traceback."""

    index: int
    first_line: str
    traceback: str


@dataclass
class NotebookReport:
    """One notebook's run: its total time, its slow cells as (index, first line, seconds), the first failure,
    and the notebook with the outputs of the cells that ran."""

    name: str
    seconds: float = 0.0
    slow: list[tuple[int, str, float]] = field(default_factory=list)
    failure: CellFailure | None = None
    notebook: Any = None


def kernel_environment(device: str, cache: str | os.PathLike) -> dict[str, str]:
    """The notebooks' environment: quick profile, the given cache, and on ``cpu`` no visible GPU."""
    env = {**os.environ, "LECTURE_PROFILE": "quick", "LECTURE_CACHE": str(cache)}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def check_notebook(
    path: str | os.PathLike, env: dict[str, str], *, slow: float = SLOW_SECONDS, cell_timeout: int = 1800
) -> NotebookReport:
    """Run the code cells of the notebook at ``path`` in order in a fresh kernel; stop at the first that fails."""
    try:  # the test extra's nbval brings them; `make gpu-check` installs it
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as error:
        raise SystemExit(
            f"gpu_check runs notebooks with nbclient and nbformat ({error}); "
            "install the test extra: pip install -e '.[test]'"
        ) from None

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=cell_timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    report = NotebookReport(path.stem, notebook=notebook)
    start = time.perf_counter()
    with client.setup_kernel(env=env, cwd=str(path.parent)):
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            first_line = cell.source.strip().splitlines()[0][:80]
            began = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as error:
                report.failure = CellFailure(index, first_line, str(error))
                break
            finally:
                seconds = time.perf_counter() - began
                if seconds > slow:
                    report.slow.append((index, first_line, seconds))
    report.seconds = time.perf_counter() - start
    return report


def print_report(report: NotebookReport) -> None:
    status = "FAILED" if report.failure else "ok"
    print(f"{report.name}: {status}, {report.seconds:.1f} s", flush=True)
    for index, first_line, seconds in report.slow:
        print(f"    cell {index} took {seconds:.1f} s: {first_line}", flush=True)
    if report.failure:
        print(f"    cell {report.failure.index} failed: {report.failure.first_line}", flush=True)
        print("\n".join("      " + line for line in report.failure.traceback.splitlines()), flush=True)


def existing_notebook(text: str) -> Path:
    """A notebook argument: an existing ``.ipynb`` file, else a ``ValueError`` that names it."""
    path = Path(text)
    if path.suffix != ".ipynb" or not path.is_file():
        raise ValueError(f"expected an existing .ipynb file, got {text!r}")
    return path


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "the CPU"


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument(
        "notebooks",
        nargs="*",
        type=flag_type(existing_notebook),
        help="notebooks to run (default: every notebooks/NN_*.ipynb)",
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cuda (default; refused without a GPU) or cpu (the same check on the CPU)",
    )
    add_ranged(parser, "--slow", float, Range(0), "print cells slower than this many seconds", default=SLOW_SECONDS)
    parser.add_argument("--no-tests", action="store_true", help="skip the CUDA-only tests")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(
            "--device: no CUDA GPU is visible to PyTorch here, so there is nothing to check on one; run it "
            "on a machine with a GPU, or the same check on the CPU: make gpu-check DEVICE=cpu"
        )
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    cache = tempfile.mkdtemp(prefix="lecture-gpu-check-")
    env = kernel_environment(args.device, cache)
    print(
        f"gpu_check: {len(notebooks)} notebooks, quick profile, on {device_name(args.device)} "
        f"(torch {torch.__version__}), empty cache {cache}",
        flush=True,
    )
    failed = []
    try:
        for path in notebooks:
            report = check_notebook(path, env, slow=args.slow)
            print_report(report)
            if report.failure:
                failed.append(report.name)
        tests = 0
        if not args.no_tests:
            print(f"\nthe CUDA-only tests (pytest -k {CUDA_TESTS}):", flush=True)
            tests = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    str(ROOT / "tests"),
                    "-k",
                    CUDA_TESTS,
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-rs",
                ],
                cwd=ROOT,
                env=env,
            ).returncode
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(
        f"\ngpu_check: {len(notebooks) - len(failed)} of {len(notebooks)} notebooks ran without a failing cell"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + ("; the CUDA-only tests failed" if tests else "")
    )
    if failed or tests:
        sys.exit(1)
