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
    if not argv or argv[0] not in names:  # one line, exit status 2, as the benchmarks' own flags
        got = repr(argv[0]) if argv else "nothing"
        print(
            f"python -m lecture_lib.bench: error: NAME: expected one of {', '.join(names)}, got {got} "
            "(usage: python -m lecture_lib.bench NAME [ARGS]; NAME --help lists its flags)",
            file=sys.stderr,
        )
        sys.exit(2)
    importlib.import_module(f"lecture_lib.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
