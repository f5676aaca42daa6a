"""SpanBERT's span boundary objective (Joshi et al. 2020): predict each masked token of a span from the two
tokens just outside it and its place in the span, never from the span's own representations.

For a span x_s ... x_e and a token x_i inside it (i = s + offset)::

    h0 = [x_(s-1); x_(e+1); p_(offset)]            # the boundary tokens' final states, a position embedding
    h1 = LayerNorm(GELU(W1 h0))
    y_i = LayerNorm(GELU(W2 h1))
    P(x_i | boundaries) = softmax(y_i E_tokenᵀ + b)  # the output embeddings are the input word embeddings

and the loss is L_MLM + L_SBO, both summed over the span's tokens (here averaged: each is a mean over the
masked tokens). The encoder is BERT's, and SpanBERT's checkpoints are ``transformers``' ``BertModel``
checkpoints; the SBO head is used in pretraining only and has no ``transformers`` class.

Taught in: 06_roberta_spanbert ("The span boundary objective").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.models.bert import BertConfig, BertForPreTraining, BertForPreTrainingOutput
from lecture_lib.objectives.span_masking import span_boundaries

MAX_SPAN_TOKENS = 32  # rows of the relative-position table; a longer run of masked tokens raises


class SpanBoundaryHead(nn.Module):
    """Logits (N, V) for N masked tokens from their spans' boundary states and offsets (the module's equations).

    Taught in: 06_roberta_spanbert ("The span boundary objective").
    """

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding, max_span_tokens: int = MAX_SPAN_TOKENS):
        super().__init__()
        h = config.hidden_size
        self.position_embeddings = nn.Embedding(max_span_tokens, h)
        self.mlp = nn.Sequential(
            nn.Linear(3 * h, h),
            nn.GELU(),
            nn.LayerNorm(h, eps=config.layer_norm_eps),
            nn.Linear(h, h),
            nn.GELU(),
            nn.LayerNorm(h, eps=config.layer_norm_eps),
        )
        self.decoder = nn.Linear(h, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.weight = word_embeddings.weight
        self.decoder.bias = self.bias

    def forward(
        self, hidden: torch.Tensor, row: torch.Tensor, left: torch.Tensor, right: torch.Tensor, offset: torch.Tensor
    ) -> torch.Tensor:
        """``hidden`` (B, T, H) final states; the rest (N,) as :func:`~lecture_lib.objectives.span_masking.span_boundaries`."""
        if len(offset) and int(offset.max()) >= self.position_embeddings.num_embeddings:
            raise ValueError(
                f"a masked span of {int(offset.max()) + 1} tokens is longer than the "
                f"{self.position_embeddings.num_embeddings} relative positions of the head"
            )
        h0 = torch.cat([hidden[row, left], hidden[row, right], self.position_embeddings(offset)], dim=-1)  # (N, 3H)
        return self.decoder(self.mlp(h0))  # (N, V)


@dataclass
class SpanBertForPreTrainingOutput(BertForPreTrainingOutput):
    """BERT's pretraining outputs plus the span boundary objective's: ``loss = mlm_loss + sbo_loss (+ nsp_loss)``."""

    sbo_loss: torch.Tensor | None = None


class SpanBertForPreTraining(BertForPreTraining):
    """BERT's pretraining model with the span boundary head ``sbo`` beside the MLM head (and BERT's NSP head,
    trained only when ``next_sentence_label`` is given). With ``labels``, the loss adds L_SBO over the same
    masked tokens as L_MLM. ``to_hf`` refuses it: ``transformers`` has no class with an SBO head (SpanBERT
    released its encoders alone, as ``BertModel`` checkpoints).

    Taught in: 06_roberta_spanbert ("The span boundary objective").
    """

    def __init__(self, config: BertConfig, max_span_tokens: int = MAX_SPAN_TOKENS) -> None:
        super().__init__(config)
        self.sbo = SpanBoundaryHead(config, self.bert.embeddings.word_embeddings, max_span_tokens)
        self.sbo.position_embeddings.apply(self._init_weights)
        self.sbo.mlp.apply(self._init_weights)

    def tied_keys(self) -> set[str]:
        return super().tied_keys() | {"sbo.decoder.weight", "sbo.decoder.bias"}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
    ) -> SpanBertForPreTrainingOutput:
        out = super().forward(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            labels,
            next_sentence_label,
            output_attentions,
            True,
            masked_only,
        )
        sbo_loss = None
        if labels is not None:
            spans = span_boundaries(labels)
            logits = self.sbo(out.hidden_states[-1], spans["row"], spans["left"], spans["right"], spans["offset"])
            sbo_loss = F.cross_entropy(logits, spans["target"])
        return SpanBertForPreTrainingOutput(
            prediction_logits=out.prediction_logits,
            seq_relationship_logits=out.seq_relationship_logits,
            loss=out.loss + sbo_loss if sbo_loss is not None else out.loss,
            mlm_loss=out.mlm_loss,
            nsp_loss=out.nsp_loss,
            hidden_states=out.hidden_states if output_hidden_states else None,
            attentions=out.attentions,
            sbo_loss=sbo_loss,
        )
