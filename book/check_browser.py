"""Open every page of the built book in headless Chromium, as a reader would, and fail on what goes wrong.

Usage: python book/check_browser.py _build/html [--screenshots DIR]

The book is served on 127.0.0.1 by Python's own HTTP server and each page is loaded until the network is
idle. A page fails when
- a script throws (an uncaught exception) or the console logs an error (a missing file logs one too);
- it requests anything outside the book: such requests are recorded, then refused, so the check never
  touches the network;
- a request inside the book answers with an HTTP error.
A screenshot of each page's first screen is saved to DIR (default: _build/screenshots).

`book/check_offline.py` reads the HTML for addresses on the web; this check also sees what scripts request
once they run. It needs Debian's `chromium` (`apt-get install chromium`) and the `playwright` package (in
requirements.lock); without them it prints why it is skipped and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# Chromium's own background traffic (updates, sync, Google lookups) is not the book's: switch it off.
CHROMIUM_FLAGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-gpu",
]
INSIDE_SCHEMES = ("data:", "blob:", "about:")


def why_skipped() -> str | None:
    """The reason the check cannot run here, or None when Chromium and Playwright are both present."""
    if shutil.which(CHROMIUM) is None:
        return f"{CHROMIUM} not found (install Debian's chromium: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (it is in requirements.lock)"
    return None


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the check reports, not the server
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free local port for the duration of the block; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def check_page(browser, base: str, name: str, screenshot: Path) -> list[str]:
    """Load ``base + name`` in a fresh tab; return its problems and save a screenshot of its first screen."""
    found: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    def route(route) -> None:
        url = route.request.url
        if url.startswith(base) or url.startswith(INSIDE_SCHEMES):
            route.continue_()
        else:
            found.append(f"requested outside the book: {url}")
            route.abort()

    def console(message) -> None:
        if message.type == "error":
            found.append(f"console error: {message.text} ({message.location.get('url', '')})")

    def response(response) -> None:
        if response.status >= 400:
            found.append(f"HTTP {response.status}: {response.url}")

    page.route("**/*", route)
    page.on("pageerror", lambda error: found.append(f"script error: {error}"))
    page.on("console", console)
    page.on("response", response)
    page.goto(base + name, wait_until="networkidle")
    page.screenshot(path=screenshot)
    page.close()
    return found


def check_pages(root: Path, pages: list[Path], screenshots: Path) -> dict[str, list[str]]:
    """Load each page (a path under ``root``) in one browser; return the problems found, by page."""
    from playwright.sync_api import sync_playwright

    screenshots.mkdir(parents=True, exist_ok=True)
    with serve(root) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        names = [page.relative_to(root).as_posix() for page in pages]
        problems = {name: check_page(browser, base, name, screenshots / screenshot_name(name)) for name in names}
        browser.close()
    return problems


def screenshot_name(page: str) -> str:
    """``notebooks/01_attention.html`` -> ``notebooks__01_attention.png``."""
    return page.removesuffix(".html").replace("/", "__") + ".png"


def book_pages(root: Path) -> list[Path]:
    """The pages a reader opens: every HTML page except Sphinx's generated index and search pages."""
    skip = {"genindex.html", "search.html", "py-modindex.html"}
    return sorted(
        p for p in root.rglob("*.html") if p.name not in skip and not p.relative_to(root).parts[0].startswith("_")
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    parser.add_argument("--screenshots", type=Path, default=None, help="default: a sibling of HTML, 'screenshots'")
    args = parser.parse_args(argv)
    if not args.html.is_dir():
        print(f"{args.html} is not a directory: build the book first (make book)", file=sys.stderr)
        return 2
    reason = why_skipped()
    if reason:
        print(f"browser check skipped: {reason}")
        return 0
    pages = book_pages(args.html)
    if not pages:
        print(f"no HTML pages under {args.html}: did the build run?", file=sys.stderr)
        return 1
    screenshots = args.screenshots or args.html.parent / "screenshots"
    problems = check_pages(args.html, pages, screenshots)
    for page, found in problems.items():
        for problem in found:
            print(f"{page}: {problem}", file=sys.stderr)
    failed = sum(bool(found) for found in problems.values())
    if failed:
        print(f"browser check: {failed} of {len(pages)} pages failed", file=sys.stderr)
        return 1
    print(
        f"browser check: {len(pages)} pages opened in Chromium, no script error, nothing requested outside "
        f"the book; screenshots in {screenshots}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
