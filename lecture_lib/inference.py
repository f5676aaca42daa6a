"""Running a trained model over a whole data set: eval mode, no gradients, batches on the model's device.

Taught in: 05_bert_finetuning ("Pretrained or from scratch", "Feature-based or fine-tuned").
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from lecture_lib.runtime import module_device, to_device


@torch.no_grad()
def forward_in_batches(
    model: nn.Module, inputs: dict[str, torch.Tensor], names: Sequence[str], *, batch_size: int = 128, **forward_kwargs
) -> dict[str, torch.Tensor | tuple[torch.Tensor, ...]]:
    """The outputs ``names`` of ``model(**inputs[i:i + batch_size], **forward_kwargs)`` over every batch,
    concatenated along the batch axis on the CPU.

    Rows i .. i + batch_size of every input tensor (N, ...) go to the model's device together; an output
    the model does not return is left out, and a tuple output (``hidden_states``) is gathered element by
    element. The model runs in eval mode (no dropout) and is put back in the mode it was in.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    sizes = {k: len(v) for k, v in inputs.items()}
    if not sizes or len(set(sizes.values())) != 1:
        raise ValueError(f"expected input tensors with one common first dimension, got sizes {sizes}")
    (count,) = set(sizes.values())
    was_training = model.training
    model.eval()
    device = module_device(model)
    chunks: dict[str, list] = {}
    for i in range(0, count, batch_size):
        out = model(**to_device({k: v[i : i + batch_size] for k, v in inputs.items()}, device), **forward_kwargs)
        for name in names:
            value = getattr(out, name, None)
            if value is not None:
                chunks.setdefault(name, []).append(
                    value.cpu() if torch.is_tensor(value) else tuple(t.cpu() for t in value)
                )
    model.train(was_training)
    return {
        name: torch.cat(parts) if torch.is_tensor(parts[0]) else tuple(map(torch.cat, zip(*parts)))
        for name, parts in chunks.items()
    }
