"""Chapter 08's exercise answers: exercise 4, ELECTRA's classification head in place of BERT's pooler.

:class:`ElectraHeadForSequenceClassification` reads token 0 through ELECTRA's dense -> GELU -> dense; the chapter
fine-tunes with it through ``with_electra_head`` (``finetune_scores(..., electra_head=True)``).

Taught in: 08_electra ("Exercises").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.models.bert import BertConfig, BertModelOutput
from lecture_lib.models.heads import BertForSequenceClassification


class ElectraHeadForSequenceClassification(BertForSequenceClassification):
    """ELECTRA's classification head in place of BERT's pooler: scores = W_out · Dropout(GELU(W · Dropout(h_0)))
    on token 0 (``transformers``' ``ElectraClassificationHead``); the encoder's pooler is not used.

    Exercise 4 of chapter 08: fine-tune with ELECTRA's head instead of BERT's pooler.
    """

    with_pooler = False

    def __init__(self, config: BertConfig, num_labels: int = 2, classifier_dropout: float | None = None) -> None:
        super().__init__(config, num_labels, classifier_dropout)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self._init_weights(self.dense)

    def _logits(self, out: BertModelOutput) -> torch.Tensor:
        x = F.gelu(self.dense(self.dropout(out.last_hidden_state[:, 0])))  # (B, H)
        return self.classifier(self.dropout(x))  # (B, K)

    def to_hf(self, *args, **kwargs):
        raise TypeError(
            "ElectraHeadForSequenceClassification has no transformers class (ELECTRA's head on a BERT "
            "encoder): it cannot be exported; keep its state_dict instead"
        )

    save_pretrained = to_hf
