"""Fail the book build if any generated page would load something from the web.

Usage: python book/check_offline.py _build/html

Every <script src>, <link href>, <img src>, <iframe src>, <source src>, <video src>, <audio src>,
<embed src> and <object data> in every HTML page must point inside the book, and no inline <script>
may mention a web address (it could load it later). Links a reader clicks (<a href>) may point
anywhere: following them is the reader's choice, not a request the page makes.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

LOADING_ATTRIBUTES = {
    "script": "src",
    "link": "href",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
    "embed": "src",
    "object": "data",
}


WEB_ADDRESS = re.compile(r"(?:https?:)?//[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.IGNORECASE)


def is_external(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://", "//", "ftp://"))


class ExternalLoads(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_script = tag == "script"
        wanted = LOADING_ATTRIBUTES.get(tag)
        for name, value in attrs:
            if value and (name == wanted or name == "srcset") and is_external(value):
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag: str) -> None:
        self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.found += [f"inline <script> mentions {m.group(0)!r}" for m in WEB_ADDRESS.finditer(data)]


def external_loads(page: Path) -> list[str]:
    parser = ExternalLoads()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    return parser.found


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python book/check_offline.py BUILT_HTML_DIR", file=sys.stderr)
        return 2
    pages = sorted(Path(argv[0]).rglob("*.html"))
    if not pages:
        print(f"no HTML pages under {argv[0]}: did the build run?", file=sys.stderr)
        return 1
    problems = [f"{page}: {load}" for page in pages for load in external_loads(page)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{len(problems)} external load(s) in {len(pages)} pages: the book must work offline", file=sys.stderr)
        return 1
    print(f"offline check: {len(pages)} pages, no script, stylesheet, image or frame loaded from the web")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
