"""Held-out scores of a pretrained model: MLM loss and accuracy, the pair head's accuracy, accuracy at the
positions that show ``[MASK]`` beside the most-frequent-token guess, and a left-to-right LM's scores.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The road to BERT").
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import torch
from torch import nn

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.metrics import accuracy_at_masks
from lecture_lib.models.albert import AlbertForPreTraining
from lecture_lib.models.bert import BertForPreTraining, mlm_accuracy
from lecture_lib.pretraining.config import pretraining_head
from lecture_lib.pretraining.losses import left_to_right_logits, left_to_right_loss
from lecture_lib.runtime import (
    module_device,
    to_device,
)


def eval_outputs(
    model: nn.Module, batches: Iterable[dict[str, torch.Tensor]], **forward: Any
) -> Iterator[tuple[dict[str, torch.Tensor], Any]]:
    """Each of ``batches`` on the model's device with the model's output on it (``model(**batch, **forward)``),
    in eval mode and without gradients; the model's mode is restored once the batches are done."""
    was_training = model.training
    model.eval()
    device = module_device(model)
    try:
        with torch.no_grad():
            for batch in batches:
                batch = to_device(batch, device)
                yield batch, model(**batch, **forward)
    finally:
        model.train(was_training)


def masked_lm_counts(model: nn.Module, batches: Iterable[dict[str, torch.Tensor]], **forward: Any) -> tuple[int, int]:
    """Masked-LM accuracy over ``batches`` as ``(right, total)``: the argmax predictions at the selected positions
    (``labels`` != -100, :func:`~lecture_lib.models.bert.mlm_accuracy`), summed over the batches, for any masked
    LM whose output has ``prediction_logits`` (BERT's pretraining heads) or ``logits`` (a DistilBERT student);
    ``forward`` goes to every call (``masked_only=True``, ``head_mask=...``). The course's one masked-LM
    accuracy: :func:`evaluate` counts the same way, chapters 10 and 12 call this.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    right = total = 0
    for batch, out in eval_outputs(model, batches, **forward):
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        batch_right, batch_total = mlm_accuracy(logits, batch["labels"])
        right, total = right + batch_right, total + batch_total
    return right, total


def evaluate(
    model: BertForPreTraining | AlbertForPreTraining, batches: list[dict[str, torch.Tensor]]
) -> dict[str, float]:
    """Held-out MLM loss and accuracy over the selected positions only (counted as :func:`masked_lm_counts`
    does, in the same pass), and the pair head's accuracy (``nsp_accuracy`` for BERT's head, ``sop_accuracy``
    for ALBERT's, whichever pairs it is shown).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    head = pretraining_head(model.config)
    loss_sum, correct, total, pair_correct, pairs = 0.0, 0, 0, 0, 0
    for batch, out in eval_outputs(model, batches, masked_only=True):
        right, n = mlm_accuracy(out.prediction_logits, batch["labels"])
        if n:
            loss_sum += out.mlm_loss.item() * n
        correct, total = correct + right, total + n
        if head.label in batch:
            pair_correct += int((getattr(out, head.logits).argmax(-1) == batch[head.label]).sum())
            pairs += len(batch[head.label])
    metrics = {"mlm_loss": loss_sum / total, "mlm_accuracy": correct / total}
    if pairs:
        metrics[head.metric] = pair_correct / pairs
    return metrics


@torch.no_grad()
def evaluate_at_masks(
    model: BertForPreTraining | AlbertForPreTraining,
    batches: list[dict[str, torch.Tensor]],
    mask_token_id: int,
    frequent_token: int,
) -> dict[str, float]:
    """Held-out MLM accuracy at the positions that show ``[MASK]`` (:func:`~lecture_lib.metrics.accuracy_at_masks`),
    and on the same positions the accuracy of always guessing ``frequent_token`` (the training text's most
    frequent token: what word frequencies alone score).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    predictions, labels, inputs = [], [], []
    for batch in batches:
        batch = to_device(batch, device)
        logits = model(**batch, masked_only=True).prediction_logits  # (N, V) at the selected positions
        predicted = torch.full_like(batch["labels"], IGNORE_INDEX)
        predicted[batch["labels"] != IGNORE_INDEX] = logits.argmax(-1)
        predictions.append(predicted.flatten().cpu())
        labels.append(batch["labels"].flatten().cpu())
        inputs.append(batch["input_ids"].flatten().cpu())
    model.train(was_training)
    predictions, labels, inputs = torch.cat(predictions), torch.cat(labels), torch.cat(inputs)
    return {
        "mask_accuracy": accuracy_at_masks(predictions, labels, inputs, mask_token_id),
        "unigram_at_masks": accuracy_at_masks(torch.full_like(labels, frequent_token), labels, inputs, mask_token_id),
    }


@torch.no_grad()
def evaluate_left_to_right(
    model: BertForPreTraining, batches: list[dict[str, torch.Tensor]], mask_token_id: int
) -> dict[str, float]:
    """A left-to-right LM on the held-out batches: its next-token loss (``lm_loss``), and its accuracy at
    the positions a masked LM is scored on (``mask_accuracy``: those that show ``[MASK]``), guessed from
    the left context only.

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    losses, predictions, labels, inputs = [], [], [], []
    for batch in batches:
        batch = to_device(batch, device)
        losses.append(left_to_right_loss(model, batch).item() * int(batch["attention_mask"][:, 1:].sum()))
        predicted = torch.full_like(batch["labels"], IGNORE_INDEX)
        predicted[:, 1:] = left_to_right_logits(model, batch)[:, :-1].argmax(-1)
        predictions.append(predicted.flatten().cpu())
        labels.append(batch["labels"].flatten().cpu())
        inputs.append(batch["input_ids"].flatten().cpu())
    model.train(was_training)
    tokens = sum(int(b["attention_mask"][:, 1:].sum()) for b in batches)
    return {
        "lm_loss": sum(losses) / tokens,
        "mask_accuracy": accuracy_at_masks(torch.cat(predictions), torch.cat(labels), torch.cat(inputs), mask_token_id),
    }
