"""Run profiles: how big the course's experiments are.

``quick`` keeps every notebook to a few minutes on two CPU cores and is the default on every machine,
with a GPU or without: a notebook then uses the GPU for the same quick sizes (the training loop moves to
:func:`lecture_lib.runtime.default_device`). ``full`` runs only when asked for
(``LECTURE_PROFILE=full``): the sizes at which each chapter's headline effect is expected to show on one GPU in
about 10 minutes per notebook (BERT-mini-sized models, longer runs, every row of the papers' tables), not the
papers' own sizes. Its running times have not been measured (no GPU was at hand when it was written): the
10 minutes are a target; the README lists what each chapter trains.

Notebooks never write both sizes themselves: each chapter module asks
:func:`pick` for its settings (``pick(quick=64, full=512)`` is 64 in the quick profile), so the
choice lives in one place. The seeds of the chapters' claims come from one place too: :func:`claim_seeds`
(``LECTURE_SEEDS=3,4,5`` reruns every verdict on fresh seeds).
"""

from __future__ import annotations

import math
import os
from typing import TypeVar

PROFILES = ("quick", "full")
DEFAULT = "quick"
ENV_VAR = "LECTURE_PROFILE"
SEEDS_ENV_VAR = "LECTURE_SEEDS"
DEFAULT_SEEDS = (0, 1, 2)

T = TypeVar("T")


def current() -> str:
    """The active profile: ``$LECTURE_PROFILE`` if set, else ``quick`` (on any machine, with a GPU too)."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return DEFAULT
    if value not in PROFILES:
        raise ValueError(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not a known profile; expected one of {PROFILES}")
    return value


def pick(*, quick: T, full: T) -> T:
    """Return the value for the active profile."""
    return quick if current() == "quick" else full


def claim_seeds() -> tuple[int, ...]:
    """The seeds of every claim's runs: ``$LECTURE_SEEDS`` (comma-separated non-negative integers, each once),
    else ``0,1,2``: ``LECTURE_SEEDS=3,4,5`` gives ``(3, 4, 5)``, ``LECTURE_SEEDS=a,b`` is a ``ValueError`` that
    says what was expected. A run is cached under its seed, so other seeds are other runs.
    """
    text = os.environ.get(SEEDS_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_SEEDS
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(f"{SEEDS_ENV_VAR}: expected comma-separated non-negative integers like 3,4,5, got {text!r}")
    seeds = tuple(int(part) for part in parts)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{SEEDS_ENV_VAR}: expected each seed once, got {text!r}")
    return seeds


def expect(seconds: float, what: str) -> None:
    """Print, before a long cell, how long it takes: ``seconds`` is its time in the quick profile on two CPU
    cores (a first run, nothing cached). Other profiles' times were not measured, and the line says so.

    >>> expect(42, "Training 3 models")
    Training 3 models: about 40 s in the quick profile on two CPU cores
    >>> expect(130, "Pretraining")
    Pretraining: about 2 min in the quick profile on two CPU cores
    """
    if seconds <= 0:
        raise ValueError(f"expected a positive duration in seconds, got {seconds}")
    if current() == "quick":
        print(f"{what}: about {_spoken(seconds)} in the quick profile on two CPU cores")
    else:
        print(f"{what}: the {current()} profile's time has not been measured (a GPU is advised)")


def _spoken(seconds: float) -> str:
    """``seconds`` as one says it: to the nearest 10 s below 90 s, else to the nearest half minute (halves up)."""
    if seconds < 90:
        return f"{max(10, 10 * math.floor(seconds / 10 + 0.5))} s"
    return f"{math.floor(seconds / 30 + 0.5) / 2:g} min"
