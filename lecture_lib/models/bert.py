"""BERT (Devlin et al. 2019): a Transformer encoder pretrained with masked LM and next-sentence prediction.

The modules carry Hugging Face's names (``embeddings``, ``attention.self.query``, ``intermediate``,
``output``, ``pooler``, ``cls.predictions``), so a state dict of ``transformers``' ``BertModel`` or
``BertForPreTraining`` loads here key for key, and ours loads there. The conversions (``from_hf``,
``to_hf``, ``from_pretrained``, ``save_pretrained``) are :mod:`lecture_lib.models.hf`'s, for every
family; what is BERT's is the family entry :data:`BERT`: its names and the older names checkpoints carry.

One encoder layer, post-LayerNorm as in Vaswani et al. (2017)::

    a = LayerNorm(x + Dropout(W_O · MultiHead(x)))      # attention.self, attention.output
    y = LayerNorm(a + Dropout(W_2 · GELU(W_1 · a)))     # intermediate, output

Taught in: 04_bert_pretraining ("The input: three embeddings", "The model").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.attention import attend, merge_heads, split_heads
from lecture_lib.config import OneOf, Range, check_divisible, check_fields, check_indices
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.activations import ACTIVATIONS, activation
from lecture_lib.models.hf import Family, HFConfig, PreTrainedModule
from lecture_lib.models.masked_lm import (
    LabelledPositions,
    check_labels_on_real_tokens,
    check_mlm_labels,
    mlm_logits_and_loss,
)
from lecture_lib.models.unpadding import Packing, attend_packed

# ---------------------------------------------------------------- configuration


@dataclass
class BertConfig(HFConfig):
    """The sizes of a BERT, with Hugging Face's field names; the defaults are BERT-base (110M parameters).

    Taught in: 04_bert_pretraining ("The model").
    """

    vocab_size: int = field(default=30522, metadata=Range(1).rule())
    hidden_size: int = field(default=768, metadata=Range(1).rule())
    num_hidden_layers: int = field(default=12, metadata=Range(1).rule())
    num_attention_heads: int = field(default=12, metadata=Range(1).rule())
    intermediate_size: int = field(default=3072, metadata=Range(1).rule())
    hidden_act: str = field(default="gelu", metadata=OneOf(tuple(ACTIVATIONS)).rule())
    hidden_dropout_prob: float = field(default=0.1, metadata=Range(0, 1).rule())
    attention_probs_dropout_prob: float = field(default=0.1, metadata=Range(0, 1).rule())
    max_position_embeddings: int = field(default=512, metadata=Range(1).rule())
    type_vocab_size: int = field(default=2, metadata=Range(1).rule())
    initializer_range: float = field(default=0.02, metadata=Range(0).rule())
    layer_norm_eps: float = field(default=1e-12, metadata=Range(0, open=True).rule())
    pad_token_id: int = field(default=0, metadata=Range(0).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        check_divisible(self, "hidden_size", "num_attention_heads")
        check_indices(self, "vocab_size", "pad_token_id")
        # {layer: [heads]} removed by BertModel.prune_heads: an attribute, not a field, so that recipes (and
        # their cache keys) and the command line's flags stay as they were; config.json carries it when not empty
        self.pruned_heads: dict[int, list[int]] = {}

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        if self.pruned_heads:  # JSON keys are strings, as transformers 4 writes them
            values["pruned_heads"] = {str(layer): heads for layer, heads in self.pruned_heads.items()}
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "BertConfig":
        """:meth:`HFConfig.from_dict`, and ``pruned_heads`` ({layer: [heads]}, keys as ints or strings)."""
        config = super().from_dict(values)
        config.pruned_heads = pruned_heads_table(config, values.get("pruned_heads") or {})
        return config


def pruned_heads_table(config: BertConfig, heads: dict[Any, Iterable[int]]) -> dict[int, list[int]]:
    """``{layer: heads}`` checked against the config's sizes, with int keys and sorted, distinct heads.

    >>> pruned_heads_table(BertConfig(num_hidden_layers=2), {"1": [3, 0, 3]})
    {1: [0, 3]}
    """
    table = {}
    for layer, removed in heads.items():
        layer, removed = int(layer), sorted({int(h) for h in removed})
        if not 0 <= layer < config.num_hidden_layers:
            raise ValueError(f"expected layers in [0, {config.num_hidden_layers}), got layer {layer}")
        if any(not 0 <= h < config.num_attention_heads for h in removed):
            raise ValueError(f"expected heads in [0, {config.num_attention_heads}), got {removed} in layer {layer}")
        if len(removed) == config.num_attention_heads:
            raise ValueError(
                f"cannot remove all {config.num_attention_heads} heads of layer {layer}: keep one, "
                "or silence them all with head_mask"
            )
        if removed:
            table[layer] = removed
    return table


BERT = Family(
    model_type="bert",
    config_class=BertConfig,
    hf_config_class="BertConfig",
    old_names=(("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias")),  # TensorFlow-era
    dropped=("embeddings.position_ids", "embeddings.token_type_ids"),  # buffers, not weights
    # transformers config fields that would change the architecture away from the encoder written here
    unsupported={"position_embedding_type": "absolute", "is_decoder": False, "add_cross_attention": False},
)


def training_flops_per_token(config: BertConfig, seq_len: int, *, masked_fraction: float = 1.0) -> float:
    """Floating-point operations to train on one token: 6 N + 12 L T H (forward 1/3, backward 2/3).

    ``N`` counts the weights of every matrix multiplication a token goes through (encoder layers and the
    MLM head; the embeddings are look-ups, not products); each weight costs a multiply and an add forward
    and twice that backward. The attention term is q·kᵀ and weights·v: 2·2·T·H per token and layer forward.
    ``masked_fraction`` < 1 counts an MLM head applied to the masked positions only.

    Taught in: 04_bert_pretraining ("How fast").
    """
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    encoder = layers * (4 * h * h + 2 * h * inter)
    head = h * h + masked_fraction * h * config.vocab_size
    return 6 * (encoder + head) + 12 * layers * seq_len * h


# ---------------------------------------------------------------- outputs


@dataclass
class BertModelOutput:
    """``last_hidden_state`` (B, T, H); ``pooler_output`` (B, H); per-layer tuples when asked for:
    ``hidden_states`` (embeddings, then each layer) and ``attentions`` (B, heads, T, T)."""

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class BertForPreTrainingOutput:
    """Logits of both heads; ``loss = mlm_loss + nsp_loss`` over the labels that were given.

    ``prediction_logits`` is (B, T, V), or (N, V) for the N labelled positions with ``masked_only=True``.
    """

    prediction_logits: torch.Tensor
    seq_relationship_logits: torch.Tensor
    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# ---------------------------------------------------------------- embeddings


class BertEmbeddings(nn.Module):
    """E = LayerNorm(E_token[w] + E_segment[s] + E_position[t]): the sum drawn under "[CLS] my dog is cute [SEP]".

    ``width`` is the embeddings' size, ``hidden_size`` unless given (ALBERT's smaller ``embedding_size``).

    Taught in: 04_bert_pretraining ("The input: three embeddings").
    """

    def __init__(self, config: BertConfig, width: int | None = None) -> None:
        super().__init__()
        width = width or config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        length = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)[None, :]  # (1, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )  # (B, T, H)
        return self.dropout(self.LayerNorm(embeddings))


# ---------------------------------------------------------------- one encoder layer


class BertSelfAttention(nn.Module):
    """Multi-head self-attention with Hugging Face's parameter names ``query``, ``key``, ``value``.

    With ``output_attentions=True`` it takes the written-out path of :mod:`lecture_lib.attention`
    and returns the weights; otherwise PyTorch's fused kernel, which never stores the T x T matrix.
    Given a :class:`~lecture_lib.models.unpadding.Packing` as ``mask``, the tokens are packed (1, N, H)
    and attend within their own sequence (:func:`~lecture_lib.models.unpadding.attend_packed`).

    ``head_mask`` (the config's ``num_attention_heads``,) multiplies each head's output (its context
    vectors): 1 keeps a head, 0 removes it, a value between scales it (Michel et al.'s gate ξ_h). ``heads``
    lists the heads still present, by their original index: :meth:`BertAttention.prune_heads` removes some.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.heads = list(range(config.num_attention_heads))
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | Packing | None = None,
        output_attentions: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.num_attention_heads
        q = split_heads(self.query(hidden_states), h)  # (B, heads, T, D)
        k = split_heads(self.key(hidden_states), h)
        v = split_heads(self.value(hidden_states), h)
        p = self.dropout.p if self.training else 0.0
        if isinstance(mask, Packing):
            context, weights = attend_packed(q, k, v, mask, p), None  # (1, heads, N, D)
        else:
            context, weights = attend(q, k, v, mask, p, need_weights=output_attentions)  # (B, heads, T, D)
        if head_mask is not None:
            context = context * head_mask[self.heads].to(context.dtype)[:, None, None]  # ξ_h · head_h
        return merge_heads(context), weights  # (B, T, H), or (1, N, H) packed


class BertSelfOutput(nn.Module):
    """a = LayerNorm(x + Dropout(W_O · context)): the output projection and the first residual.

    :class:`BertOutput` is the same step after the feed-forward layer, from ``intermediate_size`` features.
    """

    def __init__(self, config: BertConfig, in_features: int | None = None) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features or config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, sublayer_output: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(sublayer_output)))


def keep_features(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A smaller copy of ``linear`` keeping the output features (``dim=0``: rows of the weight, and the bias)
    or the input features (``dim=1``: columns; the bias stays whole) listed in ``index``.

    >>> layer = nn.Linear(4, 3)
    >>> tuple(keep_features(layer, torch.tensor([0, 2]), dim=1).weight.shape)
    (3, 2)
    """
    weight = linear.weight.index_select(dim, index)
    kept = nn.Linear(weight.shape[1], weight.shape[0], bias=linear.bias is not None)
    kept.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        kept.weight.copy_(weight)
        if linear.bias is not None:
            kept.bias.copy_(linear.bias if dim == 1 else linear.bias[index])
    return kept


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, output_attentions: bool, head_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, weights = self.self(x, mask, output_attentions, head_mask)
        return self.output(context, x), weights

    def prune_heads(self, heads: Iterable[int]) -> None:
        """Remove ``heads`` (original indices; those already gone are skipped): head h owns rows h·d … (h+1)·d
        of ``query``, ``key`` and ``value`` and the same columns of ``output.dense``."""
        attention = self.self
        kept = [h for h in attention.heads if h not in set(heads)]
        if len(kept) == len(attention.heads):
            return
        d = attention.query.out_features // attention.num_attention_heads
        positions = [attention.heads.index(h) for h in kept]
        index = torch.cat([torch.arange(p * d, (p + 1) * d) for p in positions]).to(attention.query.weight.device)
        for name in ("query", "key", "value"):
            setattr(attention, name, keep_features(getattr(attention, name), index, dim=0))
        self.output.dense = keep_features(self.output.dense, index, dim=1)
        attention.heads, attention.num_attention_heads = kept, len(kept)


class BertIntermediate(nn.Module):
    """GELU(W_1 · a): the feed-forward expansion to ``intermediate_size`` (4 H in BERT)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(a))


class BertOutput(BertSelfOutput):
    """y = LayerNorm(a + Dropout(W_2 · GELU(W_1 · a))): back to H, and the second residual."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config, in_features=config.intermediate_size)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, output_attentions: bool, head_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        a, weights = self.attention(x, mask, output_attentions, head_mask)
        return self.output(self.intermediate(a), a), weights


class BertEncoder(nn.Module):
    """The stack of layers (a container: :func:`run_layers` runs the loop, collecting what was asked for)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))


class BertPooler(nn.Module):
    """tanh(W · h_[CLS]): the sentence vector the NSP classifier reads."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (B, H)


# ---------------------------------------------------------------- the encoder


def keys_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor | None:
    """(B, T) with 1 on real tokens and 0 on padding -> bool (B, 1, 1, T): every query skips the padded keys."""
    if attention_mask is None:
        return None
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"expected attention_mask of shape {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}"
        )
    return attention_mask.bool()[:, None, None, :]


def check_inputs(config: BertConfig, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> None:
    """Integer ids (B, T) no longer than the position table, and segment ids of the same shape."""
    if input_ids.dim() != 2 or input_ids.dtype not in (torch.long, torch.int):
        raise ValueError(f"expected integer input_ids of shape (B, T), got {input_ids.dtype} {tuple(input_ids.shape)}")
    if input_ids.shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings {config.max_position_embeddings}"
        )
    if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
        raise ValueError(
            f"expected token_type_ids of shape {tuple(input_ids.shape)}, got {tuple(token_type_ids.shape)}"
        )


def check_head_mask(config: BertConfig, head_mask: torch.Tensor | None) -> None:
    """A (layers, heads) floating tensor: 1 keeps a head, 0 removes it (a pruned head's entry is not read)."""
    if head_mask is None:
        return
    expected = (config.num_hidden_layers, config.num_attention_heads)
    if tuple(head_mask.shape) != expected or not head_mask.is_floating_point():
        raise ValueError(
            f"expected a floating head_mask of shape {expected} (layers, heads), "
            f"got {head_mask.dtype} {tuple(head_mask.shape)}"
        )


def _unchanged(hidden: torch.Tensor) -> torch.Tensor:
    return hidden


def run_layers(
    layers: Iterable[nn.Module],
    x: torch.Tensor,
    mask: torch.Tensor | Packing | None,
    *,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
    head_mask: torch.Tensor | None = None,
    pooler: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
    restore: Callable[[torch.Tensor], torch.Tensor] = _unchanged,
) -> BertModelOutput:
    """The encoder's loop: each layer reads the previous one's output; ``pooler`` (if any) reads the last.

    ``x`` is the layers' input (B, T, H) (the embeddings); ``hidden_states`` are ``x`` then each layer's output,
    ``attentions`` each layer's weights, kept when asked for. Layer i gets ``head_mask[i]`` when a head mask is
    given. ``restore`` takes packed states (1, N, H) back to (B, T, H) (``unpad``; unchanged otherwise).
    """
    hidden_states, attentions = [x], []
    for i, layer in enumerate(layers):
        heads = () if head_mask is None else (head_mask[i],)
        x, weights = layer(x, mask, output_attentions, *heads)  # (B, T, H), or (1, N, H) packed
        hidden_states.append(x)
        attentions.append(weights)
    x = restore(x)
    return BertModelOutput(
        last_hidden_state=x,
        pooler_output=pooler(x) if pooler is not None else None,
        hidden_states=tuple(map(restore, hidden_states)) if output_hidden_states else None,
        attentions=tuple(attentions) if output_attentions else None,
    )


class BertPreTrainedModel(PreTrainedModule):
    """What every BERT with or without heads shares: the family (names, checkpoints) and the encoder under ``bert``.

    Taught in: 04_bert_pretraining ("The model").
    """

    family = BERT
    base_model_prefix = "bert"

    def prune_heads(self, heads_to_prune: dict[int, Iterable[int]]) -> None:
        """Remove attention heads for good, ``{layer: [heads]}`` by their original indices (Michel et al. 2019).

        Each layer's ``query``, ``key``, ``value`` lose the heads' rows and ``attention.output.dense`` their
        columns; the model computes what it computed with those heads masked (``head_mask`` 0), in less
        time. ``config.pruned_heads`` records every head removed so far (transformers 4's convention), so
        :meth:`save_pretrained` and :meth:`from_pretrained` keep the smaller shapes. The config is copied,
        not changed in place: a model that shared it keeps its own.

        Taught in: 10_bertology_attention ("Pruning heads for good").
        """
        merged = dict(self.config.pruned_heads)
        for layer, heads in pruned_heads_table(self.config, heads_to_prune).items():
            merged[layer] = sorted(set(merged.get(layer, [])) | set(heads))
        config = copy.copy(self.config)
        config.pruned_heads = pruned_heads_table(config, merged)  # refuses a layer left without heads
        for layer, heads in config.pruned_heads.items():
            self.base_model.encoder.layer[layer].attention.prune_heads(heads)
        self.config = self.base_model.config = config

    def to_hf(self, attn_implementation: str = "eager") -> nn.Module:
        if self.config.pruned_heads:
            raise ValueError(
                f"transformers 5 has no pruned heads (this model has {self.config.pruned_heads}): "
                "save_pretrained writes them for transformers 4, or zero the heads' weights instead"
            )
        return super().to_hf(attn_implementation)


class BertModel(BertPreTrainedModel):
    """The BERT encoder: embeddings, ``num_hidden_layers`` post-LN layers, and the [CLS] pooler.

    >>> model = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                              num_attention_heads=4, intermediate_size=64)).eval()
    >>> out = model(torch.tensor([[2, 7, 9, 3, 0]]), attention_mask=torch.tensor([[1, 1, 1, 1, 0]]))
    >>> tuple(out.last_hidden_state.shape), tuple(out.pooler_output.shape)
    ((1, 5, 32), (1, 32))

    Taught in: 04_bert_pretraining ("The model").
    """

    hf_class = "BertModel"

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)
        self.apply(self._init_weights)
        for layer, heads in config.pruned_heads.items():  # a pruned checkpoint's shapes
            self.encoder.layer[layer].attention.prune_heads(heads)

    @staticmethod
    def _pack(
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        output_attentions: bool,
        packing: Packing | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Packing]:
        """The inputs packed (1, N) and their :class:`Packing` (``packing`` if found before the step, else
        found here): every token keeps its segment and position."""
        if output_attentions:
            raise ValueError(
                "unpad=True attends per sequence without forming the weights: pass unpad=False for output_attentions"
            )
        batch, length = input_ids.shape
        if packing is None:
            packing = Packing.of(torch.ones_like(input_ids) if attention_mask is None else attention_mask)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)
        position_ids = position_ids.expand(batch, length)
        return (*(packing.gather(t) for t in (input_ids, token_type_ids, position_ids)), packing)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        unpad: bool | Packing = False,
        head_mask: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """``input_ids`` (B, T); ``attention_mask`` (B, T), 1 on tokens and 0 on padding; segments 0/1.

        ``unpad=True`` runs the layers on the real tokens only, packed (1, N, H) (:mod:`~lecture_lib.models.unpadding`;
        right padding only); the outputs come back (B, T, H), equal at the real positions and 0 at the padding.
        ``unpad=Packing.of(attention_mask)``, found before the step (on the host), packs without reading any
        value of the batch: no wait for the GPU, no graph break when compiled.
        ``head_mask`` (layers, heads) multiplies each head's output: 1 keeps it, 0 removes it (see
        :class:`BertSelfAttention`); the attention weights returned are the heads' softmax, unmasked.
        """
        check_inputs(self.config, input_ids, token_type_ids)
        check_head_mask(self.config, head_mask)
        mask = keys_mask(attention_mask, input_ids)
        restore = _unchanged
        if unpad is not False:
            packing = unpad if isinstance(unpad, Packing) else None
            input_ids, token_type_ids, position_ids, mask = self._pack(
                input_ids, attention_mask, token_type_ids, position_ids, output_attentions, packing
            )
            restore = mask.pad
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H), or (1, N, H) packed
        return run_layers(
            self.encoder.layer,
            x,
            mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            head_mask=head_mask,
            pooler=self.pooler,
            restore=restore,
        )


# ---------------------------------------------------------------- pretraining heads


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """MLM logits = LayerNorm(GELU(W h)) E_tokenᵀ + b: the output matrix *is* the word-embedding matrix.

    ``decoder.weight`` is tied to the word embeddings and ``decoder.bias`` to ``bias`` (as in Hugging Face).
    """

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.weight = word_embeddings.weight
        self.decoder.bias = self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(x))  # (..., V)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)  # 0 = IsNext, 1 = NotNext


class BertForPreTraining(BertPreTrainedModel):
    """BERT with its two pretraining heads: masked LM over the vocabulary and next-sentence prediction.

    ``labels`` (B, T) hold the original token where a position was selected for prediction and -100
    elsewhere (see :func:`lecture_lib.objectives.masking.mask_tokens`); ``next_sentence_label`` (B,) is 0 when
    segment B follows A and 1 when it is random. The loss is the sum of the mean cross-entropies of
    whichever labels are given. ``masked_only=True`` runs the MLM head on the labelled positions only
    (about 15% of them): the same loss and gradients for less compute; ``unpad=True`` runs the encoder on
    the real tokens only (see :class:`BertModel`), which needs the labels of padded positions to be -100.
    Given ``masked_only=LabelledPositions.of(labels, attention_mask)`` and ``unpad=Packing.of(attention_mask)``,
    both found on the host before the step, the step reads no value of the batch: it never waits for the GPU,
    and compiled it is one graph (``tests/models/test_graph_breaks.py``).

    Taught in: 04_bert_pretraining ("Masked LM", "Next-sentence prediction", "Pretraining a small BERT").
    """

    hf_class = "BertForPreTraining"

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings)
        self.cls.predictions.transform.apply(self._init_weights)  # not the decoder: it is the embedding matrix
        self.cls.seq_relationship.apply(self._init_weights)

    def tied_keys(self) -> set[str]:
        return {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}

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
        masked_only: bool | LabelledPositions = False,
        unpad: bool | Packing = False,
        head_mask: torch.Tensor | None = None,
    ) -> BertForPreTrainingOutput:
        check_mlm_labels(input_ids, labels, masked_only)
        if (
            unpad is not False
            and labels is not None
            and attention_mask is not None
            and not isinstance(masked_only, LabelledPositions)
        ):  # LabelledPositions.of(labels, attention_mask) checked it before
            check_labels_on_real_tokens(labels, attention_mask)
        out = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            output_attentions,
            output_hidden_states,
            unpad,
            head_mask,
        )
        logits, mlm_loss = mlm_logits_and_loss(self.cls.predictions, out.last_hidden_state, labels, masked_only)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        nsp_loss = None
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.reshape(-1))
        if mlm_loss is None or nsp_loss is None:
            loss = nsp_loss if mlm_loss is None else mlm_loss
        else:
            loss = mlm_loss + nsp_loss
        return BertForPreTrainingOutput(
            prediction_logits=logits,
            seq_relationship_logits=nsp_logits,
            loss=loss,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )


def mlm_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """(correct, total) argmax predictions over the labelled positions (label != -100) only.

    Works for dense logits (B, T, V) with labels (B, T), and for ``masked_only`` logits (N, V) with
    labels (B, T) of which N are labelled.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    selected = labels != IGNORE_INDEX
    if logits.dim() == labels.dim() + 1:
        logits = logits[selected]
    targets = labels[selected]
    if logits.shape[0] != targets.shape[0]:
        raise ValueError(f"expected logits for {targets.shape[0]} labelled positions, got {tuple(logits.shape)}")
    return int((logits.argmax(-1) == targets).sum()), int(targets.numel())
