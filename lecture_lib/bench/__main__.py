"""``python -m lecture_lib.bench NAME [ARGS]``: run the benchmark module ``lecture_lib.bench.NAME``."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import lecture_lib.bench as bench


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def main(argv: list[str]) -> None:
    names = available()
    if not argv or argv[0] not in names:
        sys.exit(f"usage: python -m lecture_lib.bench NAME [ARGS]; NAME is one of {names}")
    importlib.import_module(f"lecture_lib.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
