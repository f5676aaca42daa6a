"""ALBERT (Lan et al. 2020): BERT with fewer parameters, by three changes; everything else is BERT's.

1. **Factorized embeddings**: the V x H token table becomes V x E then E x H (``embedding_size`` E, 128 in
   every ALBERT): (V + P + T)·E + E·H parameters instead of (V + P + T)·H. The embeddings are
   :class:`~lecture_lib.models.bert.BertEmbeddings` of width E, then ``embedding_hidden_mapping_in``.
2. **Cross-layer sharing**: ``num_hidden_groups`` G groups of ``inner_group_num`` layers; layer i of the
   L applies group ``i // (L / G)``. With G = 1 (every ALBERT) one layer is held once and applied L times:
   ``model.encoder.albert_layer_groups[0]`` is the same module object at every depth, and its weights
   appear once in the state dict.
3. **Sentence-order prediction** instead of NSP: the head ``sop_classifier`` reads the pooled [CLS] and
   says whether two consecutive segments come in their order (label 0) or swapped (1).

One layer is BERT's post-LayerNorm layer under other names (``attention.dense``, ``attention.LayerNorm``,
``ffn``, ``ffn_output``, ``full_layer_layer_norm``), which are ``transformers``' names: the family needs
no rename table. ``transformers``' ALBERT has the projection E -> H even when E = H, and its activation
is ``gelu_new`` (the tanh approximation).

Chapter 12 builds an ALBERT-style student out of a trained BERT (:func:`albert_from_bert`) and fine-tunes
it with :class:`AlbertForSequenceClassification`.

Taught in: 07_albert ("Factorized embeddings", "Cross-layer sharing", "Sentence-order prediction").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.config import OneOf, Range, check_divisible, check_fields, check_indices
from lecture_lib.models.activations import ACTIVATIONS, activation
from lecture_lib.models.bert import (
    BertEmbeddings,
    BertForPreTraining,
    BertModelOutput,
    BertSelfAttention,
    check_inputs,
    keys_mask,
    run_layers,
)
from lecture_lib.models.heads import LabelCount, SequenceClassifierOutput, sequence_classification_loss
from lecture_lib.models.hf import Family, HFConfig, PreTrainedModule
from lecture_lib.models.masked_lm import check_mlm_labels, mlm_logits_and_loss

# ---------------------------------------------------------------- configuration

# Table 1 of the paper: (hidden_size, num_hidden_layers, num_attention_heads); intermediate 4 H, E = 128.
PRESETS = {"base": (768, 12, 12), "large": (1024, 24, 16), "xlarge": (2048, 24, 16), "xxlarge": (4096, 12, 64)}


@dataclass
class AlbertConfig(HFConfig):
    """The sizes of an ALBERT, with ``transformers``' field names; the defaults are ALBERT-base.

    ``AlbertConfig.preset("large")`` gives one of the paper's four (Table 1). (``transformers``' own
    ``AlbertConfig()`` defaults to xxlarge.)

    Taught in: 07_albert ("Counting parameters exactly").
    """

    vocab_size: int = field(default=30000, metadata=Range(1).rule())
    embedding_size: int = field(default=128, metadata=Range(1).rule())
    hidden_size: int = field(default=768, metadata=Range(1).rule())
    num_hidden_layers: int = field(default=12, metadata=Range(1).rule())
    num_hidden_groups: int = field(default=1, metadata=Range(1).rule())
    num_attention_heads: int = field(default=12, metadata=Range(1).rule())
    intermediate_size: int = field(default=3072, metadata=Range(1).rule())
    inner_group_num: int = field(default=1, metadata=Range(1).rule())
    hidden_act: str = field(default="gelu_new", metadata=OneOf(tuple(ACTIVATIONS)).rule())
    hidden_dropout_prob: float = field(default=0.0, metadata=Range(0, 1).rule())
    attention_probs_dropout_prob: float = field(default=0.0, metadata=Range(0, 1).rule())
    max_position_embeddings: int = field(default=512, metadata=Range(1).rule())
    type_vocab_size: int = field(default=2, metadata=Range(1).rule())
    initializer_range: float = field(default=0.02, metadata=Range(0).rule())
    layer_norm_eps: float = field(default=1e-12, metadata=Range(0, open=True).rule())
    classifier_dropout_prob: float = field(default=0.1, metadata=Range(0, 1).rule())
    pad_token_id: int = field(default=0, metadata=Range(0).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        check_divisible(self, "hidden_size", "num_attention_heads")
        check_indices(self, "vocab_size", "pad_token_id")
        check_divisible(self, "num_hidden_layers", "num_hidden_groups", "each group serves L / G consecutive layers")

    @classmethod
    def preset(cls, name: str, **overrides) -> "AlbertConfig":
        """One of the paper's configurations: ``"base"``, ``"large"``, ``"xlarge"``, ``"xxlarge"``.

        >>> AlbertConfig.preset("xxlarge").intermediate_size
        16384
        """
        if name not in PRESETS:
            raise ValueError(f"expected a preset in {sorted(PRESETS)}, got {name!r}")
        hidden, layers, heads = PRESETS[name]
        return cls(
            **{
                "hidden_size": hidden,
                "num_hidden_layers": layers,
                "num_attention_heads": heads,
                "intermediate_size": 4 * hidden,
                **overrides,
            }
        )


ALBERT = Family(
    model_type="albert",
    config_class=AlbertConfig,
    hf_config_class="AlbertConfig",
    dropped=("embeddings.position_ids", "embeddings.token_type_ids"),  # buffers, not weights
    unsupported={"position_embedding_type": "absolute", "is_decoder": False, "add_cross_attention": False},
)


@dataclass
class AlbertForPreTrainingOutput:
    """Logits of both heads; ``loss = mlm_loss + sop_loss`` over the labels that were given.

    ``prediction_logits`` is (B, T, V), or (N, V) for the N labelled positions with ``masked_only=True``.
    """

    prediction_logits: torch.Tensor
    sop_logits: torch.Tensor | None
    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None

    @property
    def logits(self) -> torch.Tensor:
        """The MLM logits under the name of ``transformers``' ``AlbertForMaskedLM`` output."""
        return self.prediction_logits


# ---------------------------------------------------------------- one layer (BERT's, other names)


class AlbertAttention(BertSelfAttention):
    """a = LayerNorm(x + Dropout(W_O · MultiHead(x))): BERT's self-attention with its output step inside."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.output_dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, weights = super().forward(x, mask, output_attentions)  # (B, T, H)
        return self.LayerNorm(x + self.output_dropout(self.dense(context))), weights


class AlbertLayer(nn.Module):
    """y = LayerNorm(a + W_2 · GELU(W_1 · a)) after the attention step a (no dropout here, as in ``transformers``)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, output_attentions: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        a, weights = self.attention(x, mask, output_attentions)
        return self.full_layer_layer_norm(a + self.ffn_output(self.act(self.ffn(a)))), weights


class AlbertLayerGroup(nn.Module):
    """``inner_group_num`` different layers, applied one after the other (1 in every ALBERT)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(config) for _ in range(config.inner_group_num))


class AlbertTransformer(nn.Module):
    """The projection E -> H and the G layer groups (a container: :class:`AlbertModel` runs the loop over :meth:`layers`)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.num_hidden_layers = config.num_hidden_layers
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(config) for _ in range(config.num_hidden_groups))

    def layers(self) -> list[AlbertLayer]:
        """The layer applied at each depth, in order: group i // (L / G)'s layers, so the same objects recur.

        Taught in: 07_albert ("Cross-layer sharing").
        """
        per_group = self.num_hidden_layers // len(self.albert_layer_groups)
        return [
            layer
            for i in range(self.num_hidden_layers)
            for layer in self.albert_layer_groups[i // per_group].albert_layers
        ]


# ---------------------------------------------------------------- the encoder


class AlbertPreTrainedModel(PreTrainedModule):
    """What every ALBERT shares: the family (names, checkpoints) and the encoder under ``albert``.

    Taught in: 07_albert ("Counting parameters exactly").
    """

    family = ALBERT
    base_model_prefix = "albert"


class AlbertModel(AlbertPreTrainedModel):
    """The ALBERT encoder: embeddings of width E, the projection to H, the shared layers, the [CLS] pooler.

    >>> model = AlbertModel(AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=32, num_hidden_layers=3,
    ...                                  num_attention_heads=4, intermediate_size=64)).eval()
    >>> out = model(torch.tensor([[2, 7, 9, 3]]), output_hidden_states=True)
    >>> tuple(out.last_hidden_state.shape), len(out.hidden_states), len(set(model.encoder.layers()))
    ((1, 4, 32), 4, 1)

    Taught in: 07_albert ("Factorized embeddings", "Cross-layer sharing").
    """

    hf_class = "AlbertModel"

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config, width=config.embedding_size)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """As :class:`~lecture_lib.models.bert.BertModel`; ``hidden_states`` starts with the projected embeddings."""
        check_inputs(self.config, input_ids, token_type_ids)
        mask = keys_mask(attention_mask, input_ids)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, E)
        x = self.encoder.embedding_hidden_mapping_in(x)  # (B, T, H)
        return run_layers(
            self.encoder.layers(),
            x,
            mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            pooler=self._pool if self.pooler is not None else None,
        )

    def _pool(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.pooler(hidden[:, 0]))  # (B, H)


# ---------------------------------------------------------------- pretraining heads


class AlbertMLMHead(nn.Module):
    """MLM logits = LayerNorm(GELU(W h)) E_tokenᵀ + b, with W: H -> E, so the output matrix is the V x E table."""

    def __init__(self, config: AlbertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.weight = word_embeddings.weight
        self.decoder.bias = self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(self.act(self.dense(x))))  # (..., V)


class AlbertSOPHead(nn.Module):
    """Two logits from the pooled [CLS]: 0 = the segments in their order, 1 = swapped."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))  # (B, 2)


class AlbertForPreTraining(AlbertPreTrainedModel):
    """ALBERT with its pretraining heads: masked LM and sentence-order prediction; the loss is their sum.

    ``labels`` as :class:`~lecture_lib.models.bert.BertForPreTraining`'s; ``sentence_order_label`` (B,) is 0
    when the segments are in order and 1 when swapped (or, to train this head on NSP, NSP's labels).
    ``masked_only=True`` runs the MLM head on the labelled positions only. ``sop_logits`` is ``None`` for
    :class:`AlbertForMaskedLM`, which has no pooler and no SOP head.

    Taught in: 07_albert ("Sentence-order prediction").
    """

    hf_class = "AlbertForPreTraining"
    with_pooler = True

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, add_pooling_layer=self.with_pooler)
        self.predictions = AlbertMLMHead(config, self.albert.embeddings.word_embeddings)
        self.predictions.dense.apply(self._init_weights)  # not the decoder: it is the embedding matrix
        self.predictions.LayerNorm.apply(self._init_weights)
        if self.with_pooler:
            self.sop_classifier = AlbertSOPHead(config)
            self.sop_classifier.apply(self._init_weights)

    def tied_keys(self) -> set[str]:
        return {"predictions.decoder.weight", "predictions.decoder.bias"}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
    ) -> AlbertForPreTrainingOutput:
        check_mlm_labels(input_ids, labels, masked_only)
        if sentence_order_label is not None and not self.with_pooler:
            raise ValueError(f"{type(self).__name__} has no sentence-order head: expected sentence_order_label=None")
        out = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, output_attentions, output_hidden_states
        )
        logits, mlm_loss = mlm_logits_and_loss(self.predictions, out.last_hidden_state, labels, masked_only)
        sop_logits = self.sop_classifier(out.pooler_output) if self.with_pooler else None
        sop_loss = None
        if sentence_order_label is not None:
            sop_loss = F.cross_entropy(sop_logits, sentence_order_label.reshape(-1))
        losses = [x for x in (mlm_loss, sop_loss) if x is not None]
        return AlbertForPreTrainingOutput(
            prediction_logits=logits,
            sop_logits=sop_logits,
            loss=sum(losses[1:], losses[0]) if losses else None,
            mlm_loss=mlm_loss,
            sop_loss=sop_loss,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )


class AlbertForMaskedLM(AlbertForPreTraining):
    """ALBERT with the masked-LM head only (no pooler and no SOP head, as in ``transformers``).

    Taught in: 07_albert ("Sentence-order prediction").
    """

    hf_class = "AlbertForMaskedLM"
    with_pooler = False


# ---------------------------------------------------------------- sharing one part only


SHARABLE_PARTS = {"attention": ("attention",), "ffn": ("ffn", "ffn_output", "full_layer_layer_norm")}


def share_across_layers(encoder: AlbertTransformer, part: str) -> AlbertTransformer:
    """Make every layer use the first layer's ``part`` (``"attention"`` or ``"ffn"``): the paper's
    shared-attention and shared-FFN rows (Table 4), on an encoder built with one group per layer.

    The shared module is one object assigned to every layer, so ``parameters()`` counts it once. This
    form has no ``transformers`` equivalent (its state dict repeats the shared tensors).

    Taught in: 07_albert ("Cross-layer sharing").
    """
    if part not in SHARABLE_PARTS:
        raise ValueError(f"expected part in {sorted(SHARABLE_PARTS)}, got {part!r}")
    layers = [layer for group in encoder.albert_layer_groups for layer in group.albert_layers]
    if len(layers) != encoder.num_hidden_layers:
        raise ValueError(
            f"expected one distinct layer per depth ({encoder.num_hidden_layers}), got {len(layers)}: "
            "build with num_hidden_groups = num_hidden_layers"
        )
    for layer in layers[1:]:
        for name in SHARABLE_PARTS[part]:
            setattr(layer, name, getattr(layers[0], name))
    return encoder


# ---------------------------------------------------------------- a task head


class AlbertForSequenceClassification(LabelCount, AlbertPreTrainedModel):
    """[CLS] -> pooler -> dropout -> linear, as BERT's head (``transformers``' class of the same name).

    Taught in: 12_compression ("ALBERT-style sharing").
    """

    hf_class = "AlbertForSequenceClassification"

    def __init__(self, config: AlbertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self._set_num_labels(num_labels)
        self.config = config
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.classifier.apply(self._init_weights)

    @classmethod
    def from_encoder(
        cls, encoder: AlbertModel, num_labels: int = 2, *, dropout: float | None = None
    ) -> "AlbertForSequenceClassification":
        """A new head on a copy of ``encoder``; ``dropout`` replaces every dropout probability of the copy. An
        encoder without a pooler (that of :class:`AlbertForMaskedLM`) gets a new one.

        Taught in: 12_compression ("ALBERT-style sharing").
        """
        config = encoder.config
        if dropout is not None:
            config = dataclasses.replace(
                config,
                hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=dropout,
                classifier_dropout_prob=dropout,
            )
        first = next(encoder.parameters())
        head = cls(config, num_labels).to(device=first.device, dtype=first.dtype)
        missing, unexpected = head.albert.load_state_dict(encoder.state_dict(), strict=False)
        if unexpected or any(not k.startswith("pooler.") for k in missing):
            raise ValueError(f"expected an AlbertModel's weights, got missing {missing}, unexpected {unexpected}")
        return head

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> SequenceClassifierOutput:
        out = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, output_attentions, output_hidden_states
        )
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, K)
        loss = sequence_classification_loss(logits, labels, self.num_labels) if labels is not None else None
        return SequenceClassifierOutput(logits, loss, out.hidden_states, out.attentions)


# ---------------------------------------------------------------- an ALBERT cut out of a BERT


def low_rank_factors(matrix: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The best rank-``rank`` approximation of ``matrix`` (m, n) as a product A B, A (m, r) and B (r, n), from the
    truncated SVD M = U S Vᵀ: A = U_r S_r, B = V_rᵀ. B's rows are orthonormal, so A = M Bᵀ (M's rows
    projected on the r leading directions), and by Eckart and Young no rank-r product is closer to M.

    >>> a, b = low_rank_factors(torch.tensor([[3.0, 0.0], [0.0, 1.0]]), 1)
    >>> a @ b
    tensor([[3., 0.],
            [0., 0.]])

    Taught in: 12_compression ("ALBERT-style sharing").
    """
    if not 1 <= rank <= min(matrix.shape):
        raise ValueError(
            f"expected a rank in [1, {min(matrix.shape)}] for a matrix of shape {tuple(matrix.shape)}, got {rank}"
        )
    u, s, vh = torch.linalg.svd(matrix, full_matrices=False)
    return u[:, :rank] * s[:rank], vh[:rank]


def albert_from_bert(teacher: BertForPreTraining, embedding_size: int, shared_layer: int) -> AlbertForMaskedLM:
    """An ALBERT MLM model of the teacher's sizes, initialised from it: one layer (a copy of teacher layer
    ``shared_layer``) applied at every depth, and the embeddings factorised to ``embedding_size`` E.

    With B (E, H) the leading right singular vectors of the teacher's token table (:func:`low_rank_factors`),
    the three tables become their projections on those E directions (word, position, segment: rows times
    Bᵀ), and the projection E -> H maps back with Bᵀ, scaled by the teacher's LayerNorm gain and √(H / E) (a
    LayerNorm over E coordinates divides by a standard deviation √(H / E) times larger than over H), its bias
    the teacher's LayerNorm bias. The MLM head's first matrix is projected the same way (B W), its output
    bias copied. This is a start, not an equivalence: the LayerNorms now work in E coordinates, and the
    head's activation comes after the projection; distillation does the rest. The pooler and NSP head are
    dropped.

    Taught in: 12_compression ("ALBERT-style sharing").
    """
    source = teacher.config
    if not 0 <= shared_layer < source.num_hidden_layers:
        raise ValueError(f"expected shared_layer in [0, {source.num_hidden_layers}), got {shared_layer}")
    if source.pruned_heads:
        raise ValueError(f"expected a teacher with all its heads, got pruned heads {source.pruned_heads}")
    config = AlbertConfig(
        vocab_size=source.vocab_size,
        embedding_size=embedding_size,
        hidden_size=source.hidden_size,
        num_hidden_layers=source.num_hidden_layers,
        num_attention_heads=source.num_attention_heads,
        intermediate_size=source.intermediate_size,
        hidden_act=source.hidden_act,
        hidden_dropout_prob=source.hidden_dropout_prob,
        attention_probs_dropout_prob=source.attention_probs_dropout_prob,
        max_position_embeddings=source.max_position_embeddings,
        type_vocab_size=source.type_vocab_size,
        initializer_range=source.initializer_range,
        layer_norm_eps=source.layer_norm_eps,
        pad_token_id=source.pad_token_id,
    )
    first = next(teacher.parameters())
    student = AlbertForMaskedLM(config).to(device=first.device, dtype=first.dtype)
    bert, predictions = teacher.bert, teacher.cls.predictions
    albert = student.albert
    with torch.no_grad():
        table, directions = low_rank_factors(bert.embeddings.word_embeddings.weight, embedding_size)  # (V, E), (E, H)
        albert.embeddings.word_embeddings.weight.copy_(table)
        for name in ("position_embeddings", "token_type_embeddings"):
            getattr(albert.embeddings, name).weight.copy_(getattr(bert.embeddings, name).weight @ directions.T)
        gain = bert.embeddings.LayerNorm.weight[:, None] * (source.hidden_size / embedding_size) ** 0.5
        albert.encoder.embedding_hidden_mapping_in.weight.copy_(gain * directions.T)  # (H, E)
        albert.encoder.embedding_hidden_mapping_in.bias.copy_(bert.embeddings.LayerNorm.bias)
        _copy_bert_layer(bert.encoder.layer[shared_layer], albert.encoder.albert_layer_groups[0].albert_layers[0])
        student.predictions.dense.weight.copy_(directions @ predictions.transform.dense.weight)
        student.predictions.dense.bias.copy_(directions @ predictions.transform.dense.bias)
        student.predictions.bias.copy_(predictions.bias)
    return student.train(teacher.training)


# BERT's layer names -> ALBERT's, within one layer
BERT_LAYER_NAMES = {
    "attention.self.query": "attention.query",
    "attention.self.key": "attention.key",
    "attention.self.value": "attention.value",
    "attention.output.dense": "attention.dense",
    "attention.output.LayerNorm": "attention.LayerNorm",
    "intermediate.dense": "ffn",
    "output.dense": "ffn_output",
    "output.LayerNorm": "full_layer_layer_norm",
}


def _copy_bert_layer(source: nn.Module, target: AlbertLayer) -> None:
    """Copy a BERT layer's tensors into an ALBERT layer, name by name (:data:`BERT_LAYER_NAMES`)."""
    state = {}
    for name, tensor in source.state_dict().items():
        module, _, kind = name.rpartition(".")
        state[f"{BERT_LAYER_NAMES[module]}.{kind}"] = tensor
    target.load_state_dict(state)
