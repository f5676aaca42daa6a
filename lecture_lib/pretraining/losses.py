"""The losses a pretraining run can train: masked LM (+ the sentence-pair task), and BERT's encoder run as
a left-to-right LM (the "LTR" model of BERT's Table 5).

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The road to BERT").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.attention import causal_mask
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertForPreTraining


def pretraining_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """MLM loss on the selected positions (+ the pair loss when the batch has pair labels).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return model(**batch, masked_only=True).loss


def unmasked_text(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The text a masked batch was drawn from: the selected tokens put back in place. (B, T)"""
    return torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"], batch["input_ids"])


def left_to_right_logits(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """BERT's encoder run as a left-to-right LM (GPT's objective, the "LTR" model of BERT's Table 5): the
    unmasked text in, each position attending to itself and the positions before it, the MLM head
    reading position i as a guess of token i + 1. (B, T, V)

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    return causal_prediction_logits(model, {**batch, "input_ids": unmasked_text(batch)})


def causal_prediction_logits(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The MLM head's logits (B, T, V) for ``batch["input_ids"]`` with a causal mask in every layer:
    position i sees itself and the positions before it, nothing to its right.

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    if not isinstance(model, BertForPreTraining):
        raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
    input_ids = batch["input_ids"]
    keep = causal_mask(input_ids.shape[1], input_ids.device) & batch["attention_mask"].bool()[:, None, None, :]
    x = model.bert.embeddings(input_ids, batch["token_type_ids"])  # (B, T, H)
    for layer in model.bert.encoder.layer:
        x, _ = layer(x, keep, False)
    return model.cls.predictions(x)  # (B, T, V)


def left_to_right_loss(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy over every real position of the unmasked text (padding ignored).

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    targets = unmasked_text(batch)[:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, IGNORE_INDEX)
    logits = left_to_right_logits(model, batch)[:, :-1]
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX
    )
