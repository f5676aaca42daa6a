"""Measuring cost: wall-clock time and the memory a computation keeps for its backward pass.

Memory is counted with autograd's saved-tensor hooks, so it works the same on CPU and GPU:
every tensor autograd stores to compute gradients is added up once (shared storages counted once).

Taught in: 01_attention ("What attention costs").
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def saved_tensor_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Bytes of the distinct tensors autograd saves while running ``fn()`` (activation memory).

    >>> x = torch.randn(4, 8, requires_grad=True)
    >>> saved_tensor_bytes(lambda: (x * x).sum())  # x is saved once (shared), 4*8 floats
    128
    """
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[(storage.data_ptr(), t.device.index or 0)] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_medians(
    fns: dict[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1, device: torch.device | str = "cpu"
) -> dict[str, float]:
    """Median wall-clock seconds of each function, the functions timed in turns: A, B, A, B, ...

    ``warmup`` untimed rounds, then ``repeats`` timed rounds of every function in the dict's order; each call
    is timed alone (the device synchronised before and after it), so a slow moment of a shared machine hits
    every function alike instead of the one that happened to run then.
    """
    if repeats < 1:
        raise ValueError(f"expected repeats >= 1, got {repeats}")
    device = torch.device(device)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def time_call(
    fn: Callable[[], object], *, repeats: int = 5, warmup: int = 2, device: torch.device | str = "cpu"
) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    return interleaved_medians({"call": fn}, repeats=repeats, warmup=warmup, device=device)["call"]
