"""Measuring cost: wall-clock time and the memory a computation keeps for its backward pass.

Memory is counted with autograd's saved-tensor hooks, so it works the same on CPU and GPU:
every tensor autograd stores to compute gradients is added up once (shared storages counted once).

Taught in: 01_attention ("What attention costs").
"""

from __future__ import annotations

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


def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 2,
              device: torch.device | str = "cpu") -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]
