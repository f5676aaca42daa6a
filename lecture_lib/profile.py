"""Run profiles: how big the course's experiments are on this machine.

``quick`` keeps every notebook near a minute on two CPU cores; ``full`` uses the real
sizes and is meant for a GPU. The default is ``full`` when CUDA is available and
``quick`` otherwise; the environment variable ``LECTURE_PROFILE`` overrides it.

Notebooks never write both sizes themselves: each chapter module asks
:func:`pick` for its settings (``pick(quick=64, full=512)`` is 64 in the quick profile), so the
choice lives in one place.
"""

from __future__ import annotations

import os
from typing import TypeVar

import torch

PROFILES = ("quick", "full")
ENV_VAR = "LECTURE_PROFILE"

T = TypeVar("T")


def current() -> str:
    """The active profile: ``$LECTURE_PROFILE`` if set, else ``full`` with CUDA, else ``quick``."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return "full" if torch.cuda.is_available() else "quick"
    if value not in PROFILES:
        raise ValueError(
            f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not a known profile; expected one of {PROFILES}"
        )
    return value


def pick(*, quick: T, full: T) -> T:
    """Return the value for the active profile."""
    return quick if current() == "quick" else full
