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
