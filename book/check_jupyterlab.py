"""Open chapters in a real JupyterLab in headless Chromium and check that their folded text is folded there.

Usage: python book/check_jupyterlab.py [NOTEBOOK.ipynb ...] [--screenshots DIR]

Without notebooks, it checks every chapter under notebooks/ whose markdown has a ``<details>`` block. For each,
it starts ``jupyter lab`` (the lock's version, from this Python) on 127.0.0.1 with a random token, no browser,
``--allow-root`` when run as root, and a fresh settings folder (cells rendered all at once, no news), on a
temporary copy of the notebook; then loads the notebook's page in Chromium and checks that
- the first ``<details>`` of a rendered markdown cell is closed: its summary is visible, the text under it is not;
- a click on the summary shows that text (the fold works, the text was not simply lost);
- no rendered markdown cell shows MyST-only markup as raw text (``{glue``, ``:::{``), which JupyterLab does not
  render: a number quoted that way would read as an identifier.
It saves a screenshot of the fold, closed and then open, to DIR (default: _build/jupyterlab). Requests that
leave 127.0.0.1 are refused, so the check never touches the network. Like book/check_browser.py it needs Debian's
``chromium`` and the ``playwright`` package; without them it prints why it is skipped and exits 0. It takes
a minute or more (80 s for one notebook on a busy two-core machine), so it is not part of ``make test``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_browser", Path(__file__).with_name("check_browser.py"))
check_browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_browser)

RAW_MYST = ("{glue", ":::{")
# JupyterLab's settings for the check: every cell in the page, so that each one can be inspected; no news toast.
SETTINGS = {
    "notebook-extension/tracker": {"windowingMode": "none"},
    "apputils-extension/notification": {"fetchNews": "false"},
}


def has_details(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text())["cells"]
    return any("<details" in "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyter_lab(folder: Path, timeout: float = 120) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on ``folder``; yields its base URL (``http://127.0.0.1:PORT``) and its token."""
    port, token = free_port(), secrets.token_hex(16)
    settings = folder / ".lab-settings"
    for plugin, values in SETTINGS.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(folder / ".ws"),
        JUPYTER_CONFIG_DIR=str(folder / ".config"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={folder}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = (folder / ".server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter lab did not start: {(folder / '.server.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def check_notebook(browser, base: str, token: str, name: str, screenshots: Path) -> list[str]:
    """The problems of one notebook's page (empty when its first fold is closed, opens, and no MyST shows)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
    page.goto(f"{base}/lab/tree/{name}?token={token}")
    page.wait_for_selector(".jp-MarkdownCell .jp-RenderedMarkdown", timeout=60_000)
    page.wait_for_timeout(1000)  # the rest of the cells render
    problems = []
    rendered = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown")
    raw = [
        f"a markdown cell shows {marker!r}: {text.strip()[:80]!r}"
        for text in rendered.all_inner_texts()
        for marker in RAW_MYST
        if marker in text
    ]
    problems += raw[:5]
    details = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown details").first
    if details.count() == 0:
        return problems + ["no <details> block in a rendered markdown cell"]
    summary, folded = details.locator("summary"), details.locator(":scope > :not(summary)").first
    details.evaluate("d => d.scrollIntoView({block: 'center'})")  # a cell far down renders once scrolled to
    page.wait_for_timeout(1000)
    stem = Path(name).stem
    page.screenshot(path=str(screenshots / f"{stem}-closed.png"))
    if details.evaluate("d => d.open") or not summary.is_visible() or folded.is_visible():
        problems.append("the first <details> is not rendered closed with its summary showing")
    summary.click()
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / f"{stem}-open.png"))
    if not folded.is_visible():
        problems.append("a click on the summary does not show the folded text")
    page.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "jupyterlab")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.notebooks if p.suffix != ".ipynb" or not p.is_file()]
    if missing:
        parser.error(f"expected .ipynb files, got {missing}")
    reason = check_browser.why_skipped()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    notebooks = args.notebooks or [p for p in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")) if has_details(p)]
    if not notebooks:
        print("no notebook to check: expected a chapter with a <details> block, or notebooks named on the command line")
        return 1
    from playwright.sync_api import sync_playwright

    args.screenshots.mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory() as folder, jupyter_lab(Path(folder)) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=check_browser.CHROMIUM, headless=True, args=["--no-sandbox", *check_browser.CHROMIUM_FLAGS]
        )
        for notebook in notebooks:
            shutil.copy(notebook, Path(folder) / notebook.name)
            problems = check_notebook(browser, base, token, notebook.name, args.screenshots)
            failed += bool(problems)
            print(f"{notebook.name}: " + ("; ".join(problems) if problems else "the first fold is closed and opens"))
        browser.close()
    print(f"screenshots in {args.screenshots}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
