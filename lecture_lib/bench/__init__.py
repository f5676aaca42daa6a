"""Benchmarks, one module per chapter: ``python -m lecture_lib.bench NAME``.

Each module ``lecture_lib/bench/NAME.py`` defines ``main(argv: list[str]) -> None`` and prints its
figures as ratios against a reference measured in the same run.
"""
