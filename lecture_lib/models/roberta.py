"""RoBERTa (Liu et al. 2019): BERT's architecture, retrained with a better recipe; this file is the difference.

The encoder layers are BERT's, unchanged (:mod:`lecture_lib.models.bert`). What differs is small:

1. **Positions start after the padding index.** A real token at count c (1, 2, ...) among the real tokens
   of its row gets position ``padding_idx + c``; padding gets ``padding_idx`` itself, a row of the position
   table that stays zero. With ``pad_token_id = 1`` the first real token is at position 2 whether the row
   is padded on the right or on the left, and ``max_position_embeddings = 514`` leaves 512 usable positions.
2. **One segment.** ``type_vocab_size = 1``: no NSP, so no segment B to tell apart; pairs are framed
   ``<s> A </s></s> B </s>`` instead.
3. **The LM head** ``lm_head``: dense -> exact GELU (whatever ``hidden_act`` says) -> LayerNorm -> the tied
   word embeddings; task models have **no pooler**, and the sequence classifier reads ``<s>`` through its
   own dense + tanh layer.
4. **Other defaults**: ``layer_norm_eps = 1e-5``, ``<s> = 0``, ``<pad> = 1``, ``</s> = 2``, a 50,265-unit
   byte-level BPE vocabulary.

The rest of RoBERTa (no NSP, dynamic masking, longer training on bigger batches and more data) is the
recipe, not the model: see :mod:`lecture_lib.objectives.input_formats`.

Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.config import same_rule_as
from lecture_lib.models.bert import BERT, BertConfig, BertEmbeddings, BertModel, BertModelOutput
from lecture_lib.models.heads import BertForSequenceClassification, NoPooler
from lecture_lib.models.hf import Family, PreTrainedModule
from lecture_lib.models.masked_lm import MaskedLMOutput, check_mlm_labels, mlm_logits_and_loss

# ---------------------------------------------------------------- configuration


@dataclass
class RobertaConfig(BertConfig):
    """BERT's sizes with RoBERTa-base's defaults (``transformers``' own ``RobertaConfig()`` keeps BERT's).

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """

    vocab_size: int = field(default=50265, metadata=same_rule_as(BertConfig, "vocab_size"))
    max_position_embeddings: int = field(default=514, metadata=same_rule_as(BertConfig, "max_position_embeddings"))
    type_vocab_size: int = field(default=1, metadata=same_rule_as(BertConfig, "type_vocab_size"))
    layer_norm_eps: float = field(default=1e-5, metadata=same_rule_as(BertConfig, "layer_norm_eps"))
    pad_token_id: int = field(default=1, metadata=same_rule_as(BertConfig, "pad_token_id"))
    bos_token_id: int = 0
    eos_token_id: int = 2

    @property
    def max_length(self) -> int:
        """The longest input: positions ``pad_token_id + 1 ... max_position_embeddings - 1`` (512 in RoBERTa-base)."""
        return self.max_position_embeddings - self.pad_token_id - 1


ROBERTA = Family(
    model_type="roberta",
    config_class=RobertaConfig,
    hf_config_class="RobertaConfig",
    dropped=BERT.dropped,
    unsupported=BERT.unsupported,
)


def position_ids_after_padding(input_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """RoBERTa's position ids: real tokens count up from ``padding_idx + 1``, padding stays at ``padding_idx``.

    Right and left padding give the first real token the same position (here ``padding_idx = 1``):

    >>> position_ids_after_padding(torch.tensor([[0, 5, 6, 2, 1, 1],
    ...                                          [1, 1, 0, 7, 8, 2]]), padding_idx=1)
    tensor([[2, 3, 4, 5, 1, 1],
            [1, 1, 2, 3, 4, 5]])

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """
    real = input_ids.ne(padding_idx).long()  # (B, T)
    return real.cumsum(dim=1) * real + padding_idx


# ---------------------------------------------------------------- the encoder


class RobertaEmbeddings(BertEmbeddings):
    """BERT's three embeddings, with a position table whose padding row stays zero and gets no gradient."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size, padding_idx=config.pad_token_id
        )


class RobertaModel(BertModel):
    """The RoBERTa encoder: BERT's, with :class:`RobertaEmbeddings` and positions from :func:`position_ids_after_padding`.

    >>> config = RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    ...                        intermediate_size=64, max_position_embeddings=34)
    >>> model = RobertaModel(config, add_pooling_layer=False).eval()
    >>> out = model(torch.tensor([[0, 7, 9, 2, 1]]), attention_mask=torch.tensor([[1, 1, 1, 1, 0]]))
    >>> tuple(out.last_hidden_state.shape), out.pooler_output, config.max_length
    ((1, 5, 32), None, 32)

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """

    family = ROBERTA
    base_model_prefix = "roberta"
    hf_class = "RobertaModel"

    def __init__(self, config: RobertaConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = RobertaEmbeddings(config)
        self.embeddings.apply(self._init_weights)
        if not add_pooling_layer:
            self.pooler = NoPooler()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        unpad: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """As :class:`~lecture_lib.models.bert.BertModel`; padding is read from ``input_ids == pad_token_id``."""
        if input_ids.dim() == 2 and input_ids.shape[1] > self.config.max_length:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} exceeds the {self.config.max_length} positions "
                f"after the padding index (max_position_embeddings {self.config.max_position_embeddings})"
            )
        if position_ids is None:
            position_ids = position_ids_after_padding(input_ids, self.config.pad_token_id)
        return super().forward(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            output_attentions,
            output_hidden_states,
            unpad,
            head_mask,
        )


class RobertaPreTrainedModel(PreTrainedModule):
    """What every RoBERTa with a head shares: the family and the encoder under ``roberta``.

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """

    family = ROBERTA
    base_model_prefix = "roberta"


# ---------------------------------------------------------------- heads


class RobertaLMHead(nn.Module):
    """MLM logits = LayerNorm(GELU(W h)) E_tokenᵀ + b, GELU exact (erf) whatever ``hidden_act`` says.

    BERT's head is the same computation with ``hidden_act``, under ``cls.predictions.transform``.
    """

    def __init__(self, config: RobertaConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.weight = word_embeddings.weight
        self.decoder.bias = self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(F.gelu(self.dense(x))))  # (..., V)


class RobertaForMaskedLM(RobertaPreTrainedModel):
    """RoBERTa's pretraining model: the encoder without a pooler, and the masked-LM head; no NSP.

    ``labels`` (B, T): the original token where a position was selected, -100 elsewhere; the loss is their
    mean cross-entropy. ``masked_only=True`` runs the head on the labelled positions only (same loss and
    gradients, less compute).

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """

    hf_class = "RobertaForMaskedLM"

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__()
        self.config = config
        self.roberta = RobertaModel(config, add_pooling_layer=False)
        self.lm_head = RobertaLMHead(config, self.roberta.embeddings.word_embeddings)
        self.lm_head.dense.apply(self._init_weights)  # not the decoder: it is the embedding matrix
        self.lm_head.layer_norm.apply(self._init_weights)

    def tied_keys(self) -> set[str]:
        return {"lm_head.decoder.weight", "lm_head.decoder.bias"}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
    ) -> MaskedLMOutput:
        check_mlm_labels(input_ids, labels, masked_only)
        out = self.roberta(
            input_ids, attention_mask, token_type_ids, position_ids, output_attentions, output_hidden_states
        )
        logits, loss = mlm_logits_and_loss(self.lm_head, out.last_hidden_state, labels, masked_only)
        return MaskedLMOutput(logits, loss, out.hidden_states, out.attentions)


class RobertaClassificationHead(nn.Module):
    """scores = W_out · Dropout(tanh(W · Dropout(h_<s>))): a pooler of the head's own, on the first token."""

    def __init__(self, config: RobertaConfig, num_labels: int, dropout: nn.Dropout) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = dropout
        self.out_proj = nn.Linear(config.hidden_size, num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.dense(self.dropout(hidden_states[:, 0])))  # (B, H)
        return self.out_proj(self.dropout(x))  # (B, K)


class RobertaForSequenceClassification(BertForSequenceClassification):
    """One label per text or pair, read from ``<s>`` by :class:`RobertaClassificationHead`; the encoder has no pooler.

    Labels, losses (cross-entropy, or mean squared error with ``num_labels=1``) and ``from_encoder`` are
    :class:`~lecture_lib.models.heads.BertForSequenceClassification`'s.

    Taught in: 06_roberta_spanbert ("RoBERTa: the same model, a different recipe").
    """

    family = ROBERTA
    base_model_prefix = "roberta"
    hf_class = "RobertaForSequenceClassification"
    encoder_class = RobertaModel
    with_pooler = False

    def __init__(self, config: RobertaConfig, num_labels: int = 2, classifier_dropout: float | None = None) -> None:
        super().__init__(config, num_labels, classifier_dropout)
        self.classifier = RobertaClassificationHead(config, num_labels, self.dropout)
        self.classifier.apply(self._init_weights)

    def _logits(self, out: BertModelOutput) -> torch.Tensor:
        return self.classifier(out.last_hidden_state)
