"""The feed-forward activations, under the names Hugging Face's configs use (``hidden_act``, ``activation_function``).

``gelu`` is the exact form x·Φ(x); ``gelu_new`` and ``gelu_pytorch_tanh`` are both the tanh approximation
0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) of GPT-2 and BERT's TensorFlow code.

Taught in: 04_bert_pretraining ("The model").
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
}


def activation(name: str, field: str = "hidden_act") -> Callable[[torch.Tensor], torch.Tensor]:
    """The function called ``name``; ``field`` names the config field in the error for an unknown name.

    >>> activation("relu")(torch.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    if name not in ACTIVATIONS:
        raise ValueError(f"expected {field} in {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]
