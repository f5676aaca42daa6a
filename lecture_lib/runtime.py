"""Where and how code runs: the device, and seeds that make a rerun print the same numbers."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import torch


def default_device() -> torch.device:
    """CUDA when available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices); return a CPU generator seeded the same way."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def seed_of(*keys: str | int) -> int:
    """A 63-bit seed that is a fixed function of ``keys``: the first 8 bytes of
    sha256(json([k_1, ..., k_n])), shifted right by one bit.

    The keys are encoded as a JSON list, so their boundaries and types count: ``("a", 1)``, ``("a1",)``
    and ``("a", "1")`` give three different seeds, as do ``(1, 23)`` and ``(12, 3)``. Python's ``hash()``
    of a string changes with ``PYTHONHASHSEED``; this does not, so every process draws the same stream.

    >>> seed_of("reversal", 0, 3)
    1834002258070650756
    >>> seed_of("reversal", 0, 3) == seed_of("reversal", 0, 3) != seed_of("reversal", 0, 4)
    True
    """
    if not keys:
        raise ValueError("expected at least one key (say what the stream is for, e.g. 'reversal'), got none")
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise TypeError(f"expected keys of type str or int, got {key!r} of type {type(key).__name__}")
    encoding = json.dumps(list(keys), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return int.from_bytes(hashlib.sha256(encoding).digest()[:8], "big") >> 1


def generator(*keys: str | int) -> torch.Generator:
    """A CPU generator seeded with :func:`seed_of` ``(*keys)``: one stream per purpose and index.

    Name the stream by what it is for, then the run's seed, then the position in the stream; streams with
    different keys get different seeds (up to a collision of 63-bit hashes, about 1 in 10^19 per pair)::

        generator("reversal", seed, step)          training batch ``step`` of a run with ``seed``
        generator("reversal test", seed)           that run's held-out strings
        generator("masking", seed, example, draw)  the ``draw``-th mask of one example

    >>> torch.randint(10, (6,), generator=generator("reversal", 0, 3)).tolist()
    [0, 0, 6, 3, 6, 8]
    """
    return torch.Generator().manual_seed(seed_of(*keys))


def limit_cpu_threads(threads: int = 1) -> int:
    """Without CUDA, run PyTorch's CPU operations on ``threads`` threads; return the number in use.

    The course's quick-profile models are tiny: their matrix products gain little from being split across
    cores, and on a busy machine the threads mostly wait for one another. One thread also makes the
    printed numbers identical on any number of cores. With CUDA the models run on the GPU and nothing changes.
    """
    if not torch.cuda.is_available():
        torch.set_num_threads(threads)
    return torch.get_num_threads()
