"""Task heads on BERT, one per shape of the fine-tuning figure (Devlin et al. 2019, Figure 4).

Each head is one linear layer on top of the encoder; fine-tuning trains it together with the whole
encoder. With the final hidden states T_i (B, T, H) and the pooled [CLS] vector C (B, H):

- sentence or pair classification:  P(class) = softmax(C Wᵀ),  W (K, H)
- token tagging:                    P(tag at i) = softmax(T_i Wᵀ),  W (K, H)
- multiple choice:                  P(choice = i) = softmax_i(w · C_i), C_i the pooled vector of choice i
- span extraction:                  P(start = i) = softmax_i(S · T_i),  P(end = j) = softmax_j(E · T_j),
                                    S and E the two rows of one (2, H) matrix; the span score is
                                    S · T_i + E · T_j with j >= i.

The modules and parameters carry the names of Hugging Face's classes of the same names (``bert``,
``classifier``, ``qa_outputs``), and ``from_hf`` / ``to_hf`` convert to and from them. As there, the
token and span heads have no pooler.

Taught in: 05_bert_finetuning ("Four task shapes").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertConfig, BertModel, BertModelOutput, BertPreTrainedModel


@dataclass
class SequenceClassifierOutput:
    """Logits (B, num_labels), and the loss when labels were given.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    logits: torch.Tensor  # (B, num_labels)
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class TokenClassifierOutput:
    """Logits (B, T, num_labels), and the loss when labels were given.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    logits: torch.Tensor  # (B, T, num_labels)
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class QuestionAnsweringModelOutput:
    """Start and end logits (B, T) each, and the loss when positions were given.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    start_logits: torch.Tensor  # (B, T)
    end_logits: torch.Tensor  # (B, T)
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class NoPooler(nn.Module):
    """Stands in for the pooler of an encoder whose head never reads [CLS]'s pooled vector.

    Hugging Face builds its token and span heads with ``add_pooling_layer=False``; removing ours the
    same way keeps the state dicts equal, and the parameter counts honest.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    def forward(self, hidden_states: torch.Tensor) -> None:
        return None


def _check_labels(labels: torch.Tensor, num_labels: int, what: str) -> None:
    """Class labels must lie in [0, num_labels) or be the ignore index -100."""
    if labels.is_floating_point():
        raise ValueError(f"expected integer class {what}, got dtype {labels.dtype}")
    bad = (labels != IGNORE_INDEX) & ((labels < 0) | (labels >= num_labels))
    if bad.any():
        raise ValueError(
            f"{what} {sorted(set(labels[bad].tolist()))[:5]} are outside the label set "
            f"0..{num_labels - 1} (or -100 to ignore a position)"
        )


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, num_labels: int) -> torch.Tensor:
    """Cross-entropy over the classes, or the mean squared error with ``num_labels`` 1 (regression, as STS-B).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    if num_labels == 1:
        return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
    _check_labels(labels, num_labels, "labels")
    return F.cross_entropy(logits, labels.reshape(-1), ignore_index=IGNORE_INDEX)


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of one tag per token, ``logits`` (B, T, K) against ``labels`` (B, T) shaped as
    ``input_ids``; positions labelled -100 carry no loss.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    if labels.shape != input_ids.shape:
        raise ValueError(f"expected labels of shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")
    num_labels = logits.shape[-1]
    _check_labels(labels, num_labels, "labels")
    return F.cross_entropy(logits.reshape(-1, num_labels), labels.reshape(-1), ignore_index=IGNORE_INDEX)


class LabelCount:
    """Saves and reads a head's ``num_labels`` with its config: as we write it, or as transformers does (one
    ``id2label`` entry per label, 2 when absent). Listed before the family's pretrained-model class."""

    num_labels: int

    def _set_num_labels(self, num_labels: int) -> None:
        if num_labels < 1:
            raise ValueError(f"expected num_labels >= 1, got {num_labels}")
        self.num_labels = num_labels

    @classmethod
    def _init_kwargs(cls, values: dict[str, Any]) -> dict[str, Any]:
        if "num_labels" in values:
            return {"num_labels": values["num_labels"]}
        return {"num_labels": len(values["id2label"]) if "id2label" in values else 2}  # transformers' default

    def _config_extras(self) -> dict[str, Any]:
        return {"num_labels": self.num_labels}


class _TaskHead(LabelCount, BertPreTrainedModel):
    """What the three heads share: an encoder under ``bert``, and the ``transformers`` class of the same name.

    Another family's heads set ``encoder_class`` and ``base_model_prefix`` (RoBERTa's: ``roberta``).
    """

    with_pooler = True
    encoder_class: type[BertModel] = BertModel

    def __init__(self, config: BertConfig, num_labels: int) -> None:
        super().__init__()
        self._set_num_labels(num_labels)
        self.config = config
        setattr(self, self.base_model_prefix, self.encoder_class(config))
        if not self.with_pooler:
            self.base_model.pooler = NoPooler()

    @classmethod
    def from_encoder(
        cls, encoder: BertModel, num_labels: int = 2, *, dropout: float | None = None, **kwargs: Any
    ) -> "_TaskHead":
        """A new head on a copy of ``encoder`` (a pretrained one): the usual start of fine-tuning.

        ``dropout`` replaces the encoder's dropout probabilities (BERT fine-tunes with 0.1).
        """
        config = encoder.config
        if dropout is not None:
            config = dataclasses.replace(config, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
            config.pruned_heads = encoder.config.pruned_heads  # an attribute, not a field: replace() drops it
        first = next(encoder.parameters())
        head = cls(config, num_labels, **kwargs).to(device=first.device, dtype=first.dtype)
        state = {k: v for k, v in encoder.state_dict().items() if head.with_pooler or not k.startswith("pooler.")}
        head.base_model.load_state_dict(state)  # copies the values: the encoder itself is left as it was
        return head


class _ClassifierHead(_TaskHead):
    """A task head whose last step is dropout then one linear layer to ``num_labels`` scores
    (to one score per sequence where ``scores_per_sequence`` is 1)."""

    scores_per_sequence: int | None = None  # None: num_labels

    def __init__(self, config: BertConfig, num_labels: int = 2, classifier_dropout: float | None = None) -> None:
        super().__init__(config, num_labels)
        self.classifier_dropout = classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, self.scores_per_sequence or num_labels)
        self._init_weights(self.classifier)

    @classmethod
    def _init_kwargs(cls, values: dict[str, Any]) -> dict[str, Any]:
        return {**super()._init_kwargs(values), "classifier_dropout": values.get("classifier_dropout")}

    def _config_extras(self) -> dict[str, Any]:
        return {**super()._config_extras(), "classifier_dropout": self.classifier_dropout}


class BertForSequenceClassification(_ClassifierHead):
    """[CLS] -> pooler -> dropout -> linear: one label per sentence or sentence pair.

    ``labels`` (B,) are class indices and the loss is cross-entropy; with ``num_labels=1`` they are real
    numbers and the loss is the mean squared error (regression, as STS-B), as in Hugging Face.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    hf_class = "BertForSequenceClassification"

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        out = self.base_model(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            output_attentions,
            output_hidden_states,
            head_mask=head_mask,
        )
        logits = self._logits(out)  # (B, K)
        loss = sequence_classification_loss(logits, labels, self.num_labels) if labels is not None else None
        return SequenceClassifierOutput(logits, loss, out.hidden_states, out.attentions)

    def _logits(self, out: BertModelOutput) -> torch.Tensor:
        """BERT's: the pooled [CLS] vector, dropout, one linear layer."""
        return self.classifier(self.dropout(out.pooler_output))


class BertForTokenClassification(_ClassifierHead):
    """Every final hidden state -> dropout -> linear: one tag per token (-100 labels carry no loss).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    hf_class = "BertForTokenClassification"
    with_pooler = False

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> TokenClassifierOutput:
        out = self.base_model(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            output_attentions,
            output_hidden_states,
            head_mask=head_mask,
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, K)
        loss = token_classification_loss(logits, labels, input_ids) if labels is not None else None
        return TokenClassifierOutput(logits, loss, out.hidden_states, out.attentions)


class BertForQuestionAnswering(_TaskHead):
    """Every final hidden state -> (start score, end score); the loss is the mean of the two
    cross-entropies over the positions of the sequence, as in BERT's SQuAD fine-tuning.

    ``start_positions`` and ``end_positions`` (B,) must lie inside the sequence.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    hf_class = "BertForQuestionAnswering"
    with_pooler = False

    def __init__(self, config: BertConfig, num_labels: int = 2) -> None:
        if num_labels != 2:
            raise ValueError(f"a span head scores a start and an end: expected num_labels=2, got {num_labels}")
        super().__init__(config, num_labels)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self._init_weights(self.qa_outputs)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> QuestionAnsweringModelOutput:
        out = self.base_model(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            output_attentions,
            output_hidden_states,
            head_mask=head_mask,
        )
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(-1)  # (B, T) each
        loss = None
        if (start_positions is None) != (end_positions is None):
            raise ValueError("expected both start_positions and end_positions, or neither")
        if start_positions is not None:
            length = input_ids.shape[1]
            for name, positions in (("start_positions", start_positions), ("end_positions", end_positions)):
                if ((positions < 0) | (positions >= length)).any():
                    raise ValueError(f"{name} {positions.tolist()} must lie inside the sequence [0, {length})")
            loss = (
                F.cross_entropy(start_logits, start_positions.reshape(-1))
                + F.cross_entropy(end_logits, end_positions.reshape(-1))
            ) / 2
        return QuestionAnsweringModelOutput(
            start_logits.contiguous(), end_logits.contiguous(), loss, out.hidden_states, out.attentions
        )


@dataclass
class MultipleChoiceModelOutput:
    """One score per choice (B, C), and the loss when the right choices were given.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    logits: torch.Tensor  # (B, C)
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class BertForMultipleChoice(_ClassifierHead):
    """Each ``[CLS] context [SEP] choice [SEP]`` -> pooler -> dropout -> one score; a softmax over the
    C choices of an example, and cross-entropy with the right one (SWAG, Devlin et al. 2019, section 4.4).

    Inputs are (B, C, T): the encoder reads the B C sequences as one batch. With C_i the pooled vector
    of choice i and a single weight vector w, P(choice = i) = softmax_i(w · C_i + b). ``num_labels`` is
    the number of choices (the weights do not depend on it: any C works).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    hf_class = "BertForMultipleChoice"
    scores_per_sequence = 1

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> MultipleChoiceModelOutput:
        if input_ids.dim() != 3:
            raise ValueError(f"expected input_ids of shape (batch, choices, length), got {tuple(input_ids.shape)}")
        batch, choices, length = input_ids.shape

        def flat(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.reshape(batch * choices, length)

        out = self.base_model(
            flat(input_ids),
            flat(attention_mask),
            flat(token_type_ids),
            flat(position_ids),
            output_attentions,
            output_hidden_states,
        )
        logits = self.classifier(self.dropout(out.pooler_output)).view(batch, choices)  # (B, C)
        loss = None
        if labels is not None:
            _check_labels(labels, choices, "labels")
            loss = F.cross_entropy(logits, labels.reshape(-1), ignore_index=IGNORE_INDEX)
        return MultipleChoiceModelOutput(logits, loss, out.hidden_states, out.attentions)
