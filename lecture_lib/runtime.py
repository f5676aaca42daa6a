"""Where and how code runs: the device, and seeds that make a rerun print the same numbers."""

from __future__ import annotations

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


def limit_cpu_threads(threads: int = 1) -> int:
    """Without CUDA, run PyTorch's CPU operations on ``threads`` threads; return the number in use.

    The course's quick-profile models are tiny: their matrix products gain little from being split across
    cores, and on a busy machine the threads mostly wait for one another. One thread also makes the
    printed numbers identical on any number of cores. With CUDA the models run on the GPU and nothing changes.
    """
    if not torch.cuda.is_available():
        torch.set_num_threads(threads)
    return torch.get_num_threads()
