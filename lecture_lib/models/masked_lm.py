"""The masked-LM output, the same in every encoder family (BERT, ALBERT, ELECTRA's generator, RoBERTa, DistilBERT):
the head reads the final hidden states, all of them or only the labelled ones, and the loss is the mean
cross-entropy over the labelled positions. Each family keeps its own head (its names, its activation, its
width); what is written here is what comes after the encoder, once.

``labels`` (B, T) hold the original token where a position was selected for prediction and -100 elsewhere
(see :func:`lecture_lib.objectives.masking.mask_tokens`). ``masked_only=True`` runs the head on the N labelled
positions only (about 15% of them): logits (N, V) instead of (B, T, V), the same loss and gradients for less
compute.

Taught in: 04_bert_pretraining ("Masked LM").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from lecture_lib.labels import IGNORE_INDEX


@dataclass
class MaskedLMOutput:
    """MLM ``logits`` (B, T, V), or (N, V) for the N labelled positions with ``masked_only=True``; the loss."""

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def check_mlm_labels(input_ids: torch.Tensor, labels: torch.Tensor | None, masked_only: bool) -> None:
    """Labels of the inputs' shape (B, T); ``masked_only`` needs them (it keeps the positions they label)."""
    if masked_only and labels is None:
        raise ValueError("masked_only=True needs labels (it keeps the positions whose label is not -100)")
    if labels is not None and labels.shape != input_ids.shape:
        raise ValueError(f"expected labels of shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")


def mlm_logits_and_loss(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor,
                        labels: torch.Tensor | None, masked_only: bool = False,
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``head``'s logits on the final hidden states ``hidden`` (B, T, H), and the mean cross-entropy over the
    labelled positions when ``labels`` are given (``None`` otherwise).

    >>> head = torch.nn.Linear(2, 3)
    >>> hidden, labels = torch.randn(1, 4, 2), torch.tensor([[-100, 2, -100, 0]])
    >>> dense, dense_loss = mlm_logits_and_loss(head, hidden, labels)
    >>> masked, masked_loss = mlm_logits_and_loss(head, hidden, labels, masked_only=True)
    >>> tuple(dense.shape), tuple(masked.shape), torch.allclose(dense_loss, masked_loss)
    ((1, 4, 3), (2, 3), True)
    """
    selected = labels != IGNORE_INDEX if masked_only else slice(None)  # (B, T), or every position
    logits = head(hidden[selected])  # (B, T, V), or (N, V) with masked_only
    if labels is None:
        return logits, None
    return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[selected].reshape(-1),
                                   ignore_index=IGNORE_INDEX)
