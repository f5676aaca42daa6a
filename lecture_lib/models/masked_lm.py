"""The masked-LM output, the same in every encoder family (BERT, ALBERT, ELECTRA's generator, RoBERTa, DistilBERT):
the head reads the final hidden states, all of them or only the labelled ones, and the loss is the mean
cross-entropy over the labelled positions. Each family keeps its own head (its names, its activation, its
width); what is written here is what comes after the encoder, once.

``labels`` (B, T) hold the original token where a position was selected for prediction and -100 elsewhere
(see :func:`lecture_lib.objectives.masking.mask_tokens`). ``masked_only=True`` runs the head on the N labelled
positions only (about 15% of them): logits (N, V) instead of (B, T, V), the same loss and gradients for less
compute. ``masked_only=LabelledPositions.of(labels)`` does the same with the positions found before the step.

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


@dataclass(frozen=True)
class LabelledPositions:
    """The positions that a (B, T) ``labels`` tensor labels (not -100), found before the training step.

    ``masked_only=True`` finds them inside the step with a boolean index, whose size (how many positions) the
    GPU must report before the head can run: the host waits, and a compiled step breaks its graph there.
    Found on the host where the batch is made, and moved to the device with it, they cost the step nothing.
    ``rows`` index the hidden states flattened to (B·T, H); ``targets`` are the labels there.

    >>> LabelledPositions.of(torch.tensor([[-100, 2, -100, 0], [5, -100, -100, -100]]))
    LabelledPositions(rows=tensor([1, 3, 4]), targets=tensor([2, 0, 5]))

    With the batch's ``attention_mask``, a label on a padded position is refused (an unpadded encoder computes
    nothing there).

    Taught in: 04_bert_pretraining ("How fast").
    """

    rows: torch.Tensor  # (N,) flat positions b·T + t
    targets: torch.Tensor  # (N,)

    @classmethod
    def of(cls, labels: torch.Tensor, attention_mask: torch.Tensor | None = None) -> LabelledPositions:
        if attention_mask is not None:
            check_labels_on_real_tokens(labels, attention_mask)
        rows = (labels.flatten() != IGNORE_INDEX).nonzero().flatten()
        return cls(rows, labels.flatten()[rows])

    def to(self, device: torch.device | str) -> LabelledPositions:
        return LabelledPositions(self.rows.to(device), self.targets.to(device))


def check_labels_on_real_tokens(labels: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """An unpadded encoder computes no padded position, so none may carry a label."""
    if ((labels != IGNORE_INDEX) & (attention_mask == 0)).any():
        raise ValueError("unpad computes no padded position: expected labels -100 wherever attention_mask is 0")


def check_mlm_labels(
    input_ids: torch.Tensor, labels: torch.Tensor | None, masked_only: bool | LabelledPositions
) -> None:
    """Labels of the inputs' shape (B, T); ``masked_only`` needs them (it keeps the positions they label)."""
    if masked_only and labels is None:
        raise ValueError("masked_only=True needs labels (it keeps the positions whose label is not -100)")
    if labels is not None and labels.shape != input_ids.shape:
        raise ValueError(f"expected labels of shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")


def mlm_logits_and_loss(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    labels: torch.Tensor | None,
    masked_only: bool | LabelledPositions = False,
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
    if isinstance(masked_only, LabelledPositions):  # found before the step: no value of the batch is read here
        logits = head(hidden.flatten(0, 1)[masked_only.rows])  # (N, V)
        return logits, F.cross_entropy(logits, masked_only.targets)
    selected = labels != IGNORE_INDEX if masked_only else slice(None)  # (B, T), or every position
    logits = head(hidden[selected])  # (B, T, V), or (N, V) with masked_only
    if labels is None:
        return logits, None
    return logits, F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels[selected].reshape(-1), ignore_index=IGNORE_INDEX
    )
