"""DistilBERT (Sanh et al. 2019): a BERT with half the layers, trained to imitate a full BERT; this file is the
difference from BERT.

The encoder layers are BERT's, unchanged (:class:`~lecture_lib.models.bert.BertLayer`: post-LayerNorm
attention and feed-forward). What differs:

1. **No segments.** There is no ``token_type_embeddings`` table (no NSP, so no sentence B to mark):
   E = LayerNorm(E_token[w] + E_position[t]). A student cut out of a BERT therefore loses the segment-0
   vector that the teacher adds to every token of a single sentence (see :func:`distilbert_from_bert`).
2. **No pooler.** The sequence classifier reads the final [CLS] vector through its own
   ``pre_classifier`` → **ReLU** → dropout (``seq_classif_dropout``, 0.2) → ``classifier``, where BERT's
   reads the tanh pooler.
3. **Sinusoidal positions as an option.** ``sinusoidal_pos_embds=True`` starts the position table at
   Vaswani et al.'s sines and cosines (still a weight, as ``transformers`` 5 keeps it); released models
   learn it (``False``).
4. **Other names.** The config says ``dim``, ``hidden_dim``, ``n_layers``, ``n_heads``, ``activation``,
   ``dropout``, ``attention_dropout``; every LayerNorm's epsilon is fixed at 1e-12. In ``transformers``
   the stack is ``transformer.layer.{i}`` with ``attention.{q,k,v,out}_lin``, ``sa_layer_norm``,
   ``ffn.lin1``/``lin2`` and ``output_layer_norm``; here the layers keep BERT's module names, and the
   family's rename table (:data:`DISTILBERT`) maps one to the other. The MLM head is BERT's
   ``cls.predictions`` renamed ``vocab_transform`` → activation → ``vocab_layer_norm`` → ``vocab_projector``
   (tied to the word embeddings, with its own bias).

What makes DistilBERT DistilBERT is the recipe, not the model: initialise from every other teacher layer
(:func:`student_layers`, :func:`distilbert_from_bert`) and train on the teacher's soft targets
(:mod:`lecture_lib.compression.distillation`).

Taught in: 12_compression ("A DistilBERT-style student").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.config import check_divisible, check_fields, check_indices, same_rule_as
from lecture_lib.models.activations import activation as activation_function
from lecture_lib.models.bert import (
    BertConfig,
    BertEncoder,
    BertForPreTraining,
    BertModel,
    BertModelOutput,
    pruned_heads_table,
)
from lecture_lib.models.heads import (
    LabelCount,
    NoPooler,
    SequenceClassifierOutput,
    TokenClassifierOutput,
    sequence_classification_loss,
    token_classification_loss,
)
from lecture_lib.models.hf import Family, HFConfig, PreTrainedModule
from lecture_lib.models.masked_lm import MaskedLMOutput, check_mlm_labels, mlm_logits_and_loss

LAYER_NORM_EPS = 1e-12  # transformers' DistilBERT hard-codes it; the config has no field for it

# ---------------------------------------------------------------- configuration


@dataclass
class DistilBertConfig(HFConfig):
    """DistilBERT's sizes under ``transformers``' field names; the defaults are distilbert-base (66M parameters).

    The properties give the same sizes under BERT's names, which the shared layers read.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    vocab_size: int = field(default=30522, metadata=same_rule_as(BertConfig, "vocab_size"))
    max_position_embeddings: int = field(default=512, metadata=same_rule_as(BertConfig, "max_position_embeddings"))
    sinusoidal_pos_embds: bool = False
    n_layers: int = field(default=6, metadata=same_rule_as(BertConfig, "num_hidden_layers"))
    n_heads: int = field(default=12, metadata=same_rule_as(BertConfig, "num_attention_heads"))
    dim: int = field(default=768, metadata=same_rule_as(BertConfig, "hidden_size"))
    hidden_dim: int = field(default=3072, metadata=same_rule_as(BertConfig, "intermediate_size"))
    dropout: float = field(default=0.1, metadata=same_rule_as(BertConfig, "hidden_dropout_prob"))
    attention_dropout: float = field(default=0.1, metadata=same_rule_as(BertConfig, "attention_probs_dropout_prob"))
    activation: str = field(default="gelu", metadata=same_rule_as(BertConfig, "hidden_act"))
    initializer_range: float = field(default=0.02, metadata=same_rule_as(BertConfig, "initializer_range"))
    qa_dropout: float = field(default=0.1, metadata=same_rule_as(BertConfig, "hidden_dropout_prob"))
    seq_classif_dropout: float = field(default=0.2, metadata=same_rule_as(BertConfig, "hidden_dropout_prob"))
    pad_token_id: int = field(default=0, metadata=same_rule_as(BertConfig, "pad_token_id"))

    layer_norm_eps: ClassVar[float] = LAYER_NORM_EPS

    def __post_init__(self) -> None:
        check_fields(self)
        check_divisible(self, "dim", "n_heads")
        check_indices(self, "vocab_size", "pad_token_id")
        self.pruned_heads: dict[int, list[int]] = {}  # as BertConfig's: an attribute, not a field

    # BERT's names for the same sizes
    hidden_size = property(lambda self: self.dim)
    intermediate_size = property(lambda self: self.hidden_dim)
    num_hidden_layers = property(lambda self: self.n_layers)
    num_attention_heads = property(lambda self: self.n_heads)
    hidden_act = property(lambda self: self.activation)
    hidden_dropout_prob = property(lambda self: self.dropout)
    attention_probs_dropout_prob = property(lambda self: self.attention_dropout)

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        if self.pruned_heads:
            values["pruned_heads"] = {str(layer): heads for layer, heads in self.pruned_heads.items()}
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "DistilBertConfig":
        config = super().from_dict(values)
        config.pruned_heads = pruned_heads_table(config, values.get("pruned_heads") or {})
        return config


DISTILBERT = Family(
    model_type="distilbert",
    config_class=DistilBertConfig,
    hf_config_class="DistilBertConfig",
    # ours (BERT's layer names) -> transformers'; the attention's own output names come before the FFN's
    renames=(
        ("encoder.layer.", "transformer.layer."),
        ("attention.self.query", "attention.q_lin"),
        ("attention.self.key", "attention.k_lin"),
        ("attention.self.value", "attention.v_lin"),
        ("attention.output.dense", "attention.out_lin"),
        ("attention.output.LayerNorm", "sa_layer_norm"),
        ("intermediate.dense", "ffn.lin1"),
        ("output.dense", "ffn.lin2"),
        ("output.LayerNorm", "output_layer_norm"),
    ),
    dropped=("embeddings.position_ids",),
)


def sinusoidal_positions(positions: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s table (positions, dim): sin(t / 10000^(2i/dim)) in column 2i, cos of the same in 2i + 1.

    >>> sinusoidal_positions(2, 4)
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    t = torch.arange(positions, dtype=torch.float64)[:, None]  # (P, 1)
    pair = torch.arange(dim, dtype=torch.float64) // 2  # i of columns 2i and 2i + 1
    angles = t / 10000 ** (2 * pair / dim)  # (P, dim)
    table = torch.where(torch.arange(dim) % 2 == 0, angles.sin(), angles.cos())
    return table.float()


# ---------------------------------------------------------------- the encoder


class DistilBertEmbeddings(nn.Module):
    """E = LayerNorm(E_token[w] + E_position[t]): BERT's embeddings without the segment table.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.dim, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.dim)
        self.LayerNorm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``token_type_ids`` is not read (there is no segment table); the argument keeps BERT's call."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]  # (1, T)
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # (B, T, H)
        return self.dropout(self.LayerNorm(embeddings))


class DistilBertModel(BertModel):
    """The DistilBERT encoder: :class:`DistilBertEmbeddings`, then BERT's layers; no pooler (``pooler_output`` is None).

    BERT's forward is reused as it is (attention masks, ``head_mask``, ``unpad``, ``prune_heads``), without
    segment ids.

    >>> config = DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
    ...                           max_position_embeddings=16)
    >>> out = DistilBertModel(config).eval()(torch.tensor([[2, 7, 9, 3, 0]]),
    ...                                      attention_mask=torch.tensor([[1, 1, 1, 1, 0]]))
    >>> tuple(out.last_hidden_state.shape), out.pooler_output
    ((1, 5, 32), None)

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    family = DISTILBERT
    base_model_prefix = "distilbert"
    hf_class = "DistilBertModel"

    def __init__(self, config: DistilBertConfig) -> None:
        PreTrainedModule.__init__(self)  # not BertModel's: no segment table, no pooler
        self.config = config
        self.embeddings = DistilBertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = NoPooler()
        self.apply(self._init_weights)
        if config.sinusoidal_pos_embds:
            with torch.no_grad():
                self.embeddings.position_embeddings.weight.copy_(
                    sinusoidal_positions(config.max_position_embeddings, config.dim)
                )
        for layer, heads in config.pruned_heads.items():
            self.encoder.layer[layer].attention.prune_heads(heads)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        unpad: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """As :meth:`BertModel.forward <lecture_lib.models.bert.BertModel.forward>`, without ``token_type_ids``."""
        return super().forward(
            input_ids, attention_mask, None, position_ids, output_attentions, output_hidden_states, unpad, head_mask
        )


class DistilBertPreTrainedModel(PreTrainedModule):
    """What every DistilBERT with a head shares: the family and the encoder under ``distilbert``.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    family = DISTILBERT
    base_model_prefix = "distilbert"


class _DistilBertTaskHead(LabelCount, DistilBertPreTrainedModel):
    """What the two task heads share: a new head on a copy of a (distilled) encoder."""

    @classmethod
    def from_encoder(cls, encoder: DistilBertModel, num_labels: int = 2, *, dropout: float | None = None):
        """A new head on a copy of ``encoder``; ``dropout`` replaces every dropout probability of the copy.

        Taught in: 12_compression ("A DistilBERT-style student").
        """
        config = encoder.config
        if dropout is not None:
            config = dataclasses.replace(
                config, dropout=dropout, attention_dropout=dropout, seq_classif_dropout=dropout
            )
            config.pruned_heads = encoder.config.pruned_heads
        first = next(encoder.parameters())
        head = cls(config, num_labels).to(device=first.device, dtype=first.dtype)
        head.distilbert.load_state_dict(encoder.state_dict())
        return head


# ---------------------------------------------------------------- heads


class DistilBertForMaskedLM(DistilBertPreTrainedModel):
    """The encoder and the masked-LM head: logits = LayerNorm(act(W h)) E_tokenᵀ + b.

    ``labels`` (B, T): the original token where a position was selected, -100 elsewhere; the loss is their
    mean cross-entropy.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    hf_class = "DistilBertForMaskedLM"

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__()
        self.config = config
        self.distilbert = DistilBertModel(config)
        self.vocab_transform = nn.Linear(config.dim, config.dim)
        self.act = activation_function(config.activation, field="activation")
        self.vocab_layer_norm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)
        self.vocab_projector = nn.Linear(config.dim, config.vocab_size)
        self.vocab_projector.weight = self.distilbert.embeddings.word_embeddings.weight
        for module in (self.vocab_transform, self.vocab_layer_norm):
            module.apply(self._init_weights)
        nn.init.zeros_(self.vocab_projector.bias)

    def tied_keys(self) -> set[str]:
        return {"vocab_projector.weight"}

    def _lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.vocab_projector(self.vocab_layer_norm(self.act(self.vocab_transform(hidden))))  # (..., V)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> MaskedLMOutput:
        check_mlm_labels(input_ids, labels, masked_only=False)
        out = self.distilbert(
            input_ids, attention_mask, position_ids, output_attentions, output_hidden_states, head_mask=head_mask
        )
        logits, loss = mlm_logits_and_loss(self._lm_logits, out.last_hidden_state, labels)
        return MaskedLMOutput(logits, loss, out.hidden_states, out.attentions)


class DistilBertForSequenceClassification(_DistilBertTaskHead):
    """final [CLS] vector → ``pre_classifier`` → ReLU → dropout → ``classifier``: one label per text.

    Cross-entropy over classes, or mean squared error with ``num_labels=1``, as BERT's head.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    hf_class = "DistilBertForSequenceClassification"

    def __init__(self, config: DistilBertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self._set_num_labels(num_labels)
        self.config = config
        self.distilbert = DistilBertModel(config)
        self.pre_classifier = nn.Linear(config.dim, config.dim)
        self.dropout = nn.Dropout(config.seq_classif_dropout)
        self.classifier = nn.Linear(config.dim, num_labels)
        for module in (self.pre_classifier, self.classifier):
            module.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        out = self.distilbert(
            input_ids, attention_mask, position_ids, output_attentions, output_hidden_states, head_mask=head_mask
        )
        pooled = self.dropout(F.relu(self.pre_classifier(out.last_hidden_state[:, 0])))  # (B, H)
        logits = self.classifier(pooled)  # (B, K)
        loss = sequence_classification_loss(logits, labels, self.num_labels) if labels is not None else None
        return SequenceClassifierOutput(logits, loss, out.hidden_states, out.attentions)


class DistilBertForTokenClassification(_DistilBertTaskHead):
    """every final hidden state → dropout → ``classifier``: one tag per token (-100 labels carry no loss), as
    BERT's token head but for its dropout, DistilBERT's ``dropout``.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    hf_class = "DistilBertForTokenClassification"

    def __init__(self, config: DistilBertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self._set_num_labels(num_labels)
        self.config = config
        self.distilbert = DistilBertModel(config)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.dim, num_labels)
        self.classifier.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> TokenClassifierOutput:
        out = self.distilbert(
            input_ids, attention_mask, position_ids, output_attentions, output_hidden_states, head_mask=head_mask
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, K)
        loss = token_classification_loss(logits, labels, input_ids) if labels is not None else None
        return TokenClassifierOutput(logits, loss, out.hidden_states, out.attentions)


# ---------------------------------------------------------------- a student cut out of a BERT


def student_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """Which teacher layers a student of ``student_layers`` starts from: evenly spread, first and last kept.

    Sanh et al. take "one layer out of two"; their script's choice for 12 → 6 is exactly this rule:

    >>> student_layers(12, 6)
    [0, 2, 4, 7, 9, 11]
    >>> student_layers(4, 2), student_layers(4, 4)
    ([0, 3], [0, 1, 2, 3])

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    if not 1 <= student_layers <= teacher_layers:
        raise ValueError(f"expected 1 <= student_layers <= {teacher_layers}, got {student_layers}")
    if student_layers == 1:
        return [0]
    step = (teacher_layers - 1) / (student_layers - 1)
    return [math.floor(i * step + 0.5) for i in range(student_layers)]


def distilbert_config(teacher: BertConfig, n_layers: int, **overrides: Any) -> DistilBertConfig:
    """A DistilBERT config with the teacher's widths and ``n_layers`` layers (``overrides`` change any field).

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    if teacher.layer_norm_eps != LAYER_NORM_EPS:
        raise ValueError(
            f"DistilBERT's LayerNorm epsilon is fixed at {LAYER_NORM_EPS}; the teacher uses {teacher.layer_norm_eps}"
        )
    sizes = dict(
        vocab_size=teacher.vocab_size,
        max_position_embeddings=teacher.max_position_embeddings,
        n_layers=n_layers,
        n_heads=teacher.num_attention_heads,
        dim=teacher.hidden_size,
        hidden_dim=teacher.intermediate_size,
        dropout=teacher.hidden_dropout_prob,
        attention_dropout=teacher.attention_probs_dropout_prob,
        activation=teacher.hidden_act,
        initializer_range=teacher.initializer_range,
        pad_token_id=teacher.pad_token_id,
    )
    return DistilBertConfig(**{**sizes, **overrides})


def distilbert_from_bert(
    teacher: BertForPreTraining, layers: Sequence[int] | None = None, *, fold_segment: bool = True
) -> DistilBertForMaskedLM:
    """A DistilBERT MLM model initialised from a BERT, as Sanh et al.'s ``extract_distilbert.py`` does.

    Copied: word and position embeddings and their LayerNorm; teacher layer ``layers[i]`` into student
    layer i (default: :func:`student_layers` for half the teacher's depth); the MLM head
    (``cls.predictions.transform.dense`` → ``vocab_transform``, its LayerNorm → ``vocab_layer_norm``, the
    output bias → ``vocab_projector.bias``). Dropped: the segment table, the pooler and the NSP head.

    The teacher adds the segment-0 vector to every token of a single sentence; with ``fold_segment`` (ours,
    not the original script's) that vector is added into the student's position table, so that the student's
    embeddings equal the teacher's on one-segment input. Without it, the two differ from the embeddings on.

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    source = teacher.config
    layers = list(
        layers
        if layers is not None
        else student_layers(source.num_hidden_layers, max(1, source.num_hidden_layers // 2))
    )
    if any(not 0 <= i < source.num_hidden_layers for i in layers) or not layers:
        raise ValueError(f"expected teacher layers in [0, {source.num_hidden_layers}), got {layers}")
    if source.pruned_heads:
        raise ValueError(f"expected a teacher with all its heads, got pruned heads {source.pruned_heads}")
    first = next(teacher.parameters())
    student = DistilBertForMaskedLM(distilbert_config(source, len(layers))).to(device=first.device, dtype=first.dtype)
    bert, predictions = teacher.bert, teacher.cls.predictions
    embeddings = student.distilbert.embeddings
    with torch.no_grad():
        embeddings.word_embeddings.weight.copy_(bert.embeddings.word_embeddings.weight)
        positions = bert.embeddings.position_embeddings.weight
        if fold_segment:
            positions = positions + bert.embeddings.token_type_embeddings.weight[0]
        embeddings.position_embeddings.weight.copy_(positions)
        embeddings.LayerNorm.load_state_dict(bert.embeddings.LayerNorm.state_dict())
        for mine, theirs in zip(student.distilbert.encoder.layer, layers):
            mine.load_state_dict(bert.encoder.layer[theirs].state_dict())
        student.vocab_transform.load_state_dict(predictions.transform.dense.state_dict())
        student.vocab_layer_norm.load_state_dict(predictions.transform.LayerNorm.state_dict())
        student.vocab_projector.bias.copy_(predictions.bias)
    return student.train(teacher.training)
