"""The Transformer encoder-decoder of Vaswani et al. (2017): positions, blocks, stacks, the whole model.

Every attention inside is :class:`lecture_lib.attention.MultiHeadAttention`, with its mask convention
(bool ``True`` = may attend, or an additive float mask). A block wraps each sublayer F in a residual
connection and a LayerNorm, in one of two orders:

- post-LN, as in the paper and ``torch.nn.Transformer``'s default:  x <- LayerNorm(x + Dropout(F(x)))
- pre-LN (``norm_first=True``; Xiong et al. 2020):                  x <- x + Dropout(F(LayerNorm(x)))

Taught in: 02_transformer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
)
from lecture_lib.config import FieldError, OneOf, Range, check_divisible, check_fields, check_indices
from lecture_lib.data.toy import BOS, EOS, PAD
from lecture_lib.models.activations import ACTIVATIONS, activation

POSITION_TYPES = ("sinusoidal", "learned")

# ---------------------------------------------------------------- configuration


@dataclass
class TransformerConfig:
    """Sizes and switches of an encoder-decoder. The defaults are the paper's base model (6+6 layers,
    d_model 512, 8 heads, d_ff 2048, dropout 0.1; with its shared vocabulary of about 37000 tokens that is
    63.1M parameters by our count, 65M in the paper). Field names follow Hugging Face's BART/Marian
    configs, except ``norm_first``, PyTorch's name for pre-LN.

    ``final_layer_norm`` adds a LayerNorm after the last block of each stack; ``None`` means "only with
    pre-LN", whose stack output is otherwise un-normalised. ``torch.nn.Transformer`` always has one, so
    :meth:`Transformer.from_torch` sets it to ``True``.

    Taught in: 02_transformer ("The encoder block").
    """

    vocab_size: int = field(default=37000, metadata=Range(1).rule())
    d_model: int = field(default=512, metadata=Range(1).rule())
    encoder_layers: int = field(default=6, metadata=Range(1).rule())
    decoder_layers: int = field(default=6, metadata=Range(1).rule())
    num_attention_heads: int = field(default=8, metadata=Range(1).rule())
    ffn_dim: int = field(default=2048, metadata=Range(1).rule())
    activation_function: str = field(default="relu", metadata=OneOf(tuple(ACTIVATIONS)).rule())
    dropout: float = field(default=0.1, metadata=Range(0, 1).rule())
    attention_dropout: float = field(default=0.0, metadata=Range(0, 1).rule())
    activation_dropout: float = field(default=0.0, metadata=Range(0, 1).rule())
    max_position_embeddings: int = field(default=512, metadata=Range(1).rule())
    position_embedding_type: str = field(default="sinusoidal", metadata=OneOf(POSITION_TYPES).rule())
    norm_first: bool = False
    final_layer_norm: bool | None = None
    layer_norm_eps: float = field(default=1e-5, metadata=Range(0, open=True).rule())
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    pad_token_id: int = PAD
    bos_token_id: int = BOS
    eos_token_id: int = EOS

    def __post_init__(self) -> None:
        check_fields(self)
        check_divisible(self, "d_model", "num_attention_heads")
        if self.d_model % 2:
            raise FieldError(["d_model"], f"expected an even d_model (sin/cos pairs), got {self.d_model}")
        check_indices(self, "vocab_size", "pad_token_id", "bos_token_id", "eos_token_id")

    @property
    def has_final_layer_norm(self) -> bool:
        return self.norm_first if self.final_layer_norm is None else self.final_layer_norm


# ---------------------------------------------------------------- positions


def sinusoidal_position_encoding(max_len: int, d_model: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The (max_len, d_model) table PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same angle).

    Column pair (2i, 2i+1) turns at its own frequency, from one radian per position (i = 0) down to
    1/10000 of that, so each position gets a distinct pattern of values in [-1, 1]. Row 0 is
    (sin 0, cos 0, ...) = (0, 1, 0, 1, ...):

    >>> sinusoidal_position_encoding(2, 4)
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])

    Taught in: 02_transformer ("Sinusoidal position encoding").
    """
    if max_len < 1 or d_model < 2 or d_model % 2:
        raise ValueError(f"expected max_len >= 1 and an even d_model >= 2, got max_len={max_len}, d_model={d_model}")
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model / 2,)
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2)
    pe = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # interleave: sin, cos, sin, cos, ...
    return pe.to(dtype or torch.get_default_dtype())


class SinusoidalPositionEmbedding(nn.Module):
    """Fixed positions: ``forward(T)`` returns the first T rows of :func:`sinusoidal_position_encoding`.

    Taught in: 02_transformer ("Sinusoidal position encoding").
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_position_encoding(max_len, d_model), persistent=False)

    def forward(self, length: int) -> torch.Tensor:
        _check_length(length, self.max_len)
        return self.table[:length]  # (T, C)


class LearnedPositionEmbedding(nn.Module):
    """Learned positions (as in BERT and GPT): one trained vector per position, none beyond ``max_len``.

    Taught in: 02_transformer ("Learned positions").
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * d_model**-0.5)

    def forward(self, length: int) -> torch.Tensor:
        _check_length(length, self.max_len)
        return self.weight[:length]  # (T, C)


def _check_length(length: int, max_len: int) -> None:
    if not 1 <= length <= max_len:
        raise ValueError(f"expected a sequence length in [1, {max_len}] (max_position_embeddings), got {length}")


def position_embedding(config: TransformerConfig) -> nn.Module:
    """The position module the config names (sinusoidal or learned).

    Taught in: 02_transformer ("Learned positions").
    """
    kind = SinusoidalPositionEmbedding if config.position_embedding_type == "sinusoidal" else LearnedPositionEmbedding
    return kind(config.max_position_embeddings, config.d_model)


# ---------------------------------------------------------------- blocks


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately (d_model -> ffn_dim -> d_model).

    Taught in: 02_transformer ("The encoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)
        self.activation = activation(config.activation_function, "activation_function")
        self.dropout = nn.Dropout(config.activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))  # (B, T, C)


class ResidualBlock(nn.Module):
    """What encoder and decoder blocks share: the residual + LayerNorm wrapping of a sublayer.

    Post-LN: x <- LayerNorm(x + Dropout(F(x))).  Pre-LN: x <- x + Dropout(F(LayerNorm(x))).
    A block calls ``sublayer_input`` to get what F reads, then ``add_residual`` with F's output.

    Taught in: 02_transformer ("The encoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        self.dropout = nn.Dropout(config.dropout)

    def sublayer_input(self, x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        return norm(x) if self.norm_first else x

    def add_residual(self, x: torch.Tensor, fx: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        x = x + self.dropout(fx)
        return x if self.norm_first else norm(x)


def _attention(config: TransformerConfig) -> MultiHeadAttention:
    return MultiHeadAttention(config.d_model, config.num_attention_heads, config.attention_dropout)


def _layer_norm(config: TransformerConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)


class EncoderLayer(ResidualBlock):
    """Self-attention over the whole source, then the feed-forward network, each wrapped as above.

    ``mask``: bool or additive, broadcastable to (B, H, S, S); the source padding mask (B, 1, 1, S).
    Returns the new states (B, S, C) and the attention weights (B, H, S, S) if ``need_weights``.

    Taught in: 02_transformer ("The encoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.self_attn = _attention(config)
        self.self_attn_layer_norm = _layer_norm(config)
        self.ffn = FeedForward(config)
        self.ffn_layer_norm = _layer_norm(config)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.sublayer_input(x, self.self_attn_layer_norm)
        a, weights = self.self_attn(h, mask=mask, need_weights=need_weights)
        x = self.add_residual(x, a, self.self_attn_layer_norm)  # (B, S, C)
        h = self.sublayer_input(x, self.ffn_layer_norm)
        return self.add_residual(x, self.ffn(h), self.ffn_layer_norm), weights


class DecoderLayer(ResidualBlock):
    """Masked self-attention, then encoder-decoder attention, then the feed-forward network.

    In the encoder-decoder ("cross") attention the queries come from the decoder, the keys and values
    from the encoder output ``memory``. ``self_mask`` (causal, and target padding) broadcasts to
    (B, H, T, T); ``memory_mask`` (source padding) to (B, H, T, S). Returns the new states (B, T, C)
    and, if ``need_weights``, the self- and cross-attention weights.

    Taught in: 02_transformer ("The decoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.self_attn = _attention(config)
        self.self_attn_layer_norm = _layer_norm(config)
        self.encoder_attn = _attention(config)
        self.encoder_attn_layer_norm = _layer_norm(config)
        self.ffn = FeedForward(config)
        self.ffn_layer_norm = _layer_norm(config)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        h = self.sublayer_input(x, self.self_attn_layer_norm)
        a, self_weights = self.self_attn(h, mask=self_mask, need_weights=need_weights)
        x = self.add_residual(x, a, self.self_attn_layer_norm)  # (B, T, C)
        h = self.sublayer_input(x, self.encoder_attn_layer_norm)
        a, cross_weights = self.encoder_attn(h, memory, memory, mask=memory_mask, need_weights=need_weights)
        x = self.add_residual(x, a, self.encoder_attn_layer_norm)  # (B, T, C)
        h = self.sublayer_input(x, self.ffn_layer_norm)
        return self.add_residual(x, self.ffn(h), self.ffn_layer_norm), self_weights, cross_weights


# ---------------------------------------------------------------- stacks


@dataclass
class EncoderOutput:
    """The top layer's states (B, S, C) and, when asked for, each layer's self-attention (B, H, S, S).

    Taught in: 02_transformer ("The encoder block").
    """

    last_hidden_state: torch.Tensor
    attentions: tuple[torch.Tensor, ...] = ()


@dataclass
class DecoderOutput:
    """The top layer's states (B, T, C); per layer, self-attention (B, H, T, T) and cross-attention (B, H, T, S).

    Taught in: 02_transformer ("The decoder block").
    """

    last_hidden_state: torch.Tensor
    attentions: tuple[torch.Tensor, ...] = ()
    cross_attentions: tuple[torch.Tensor, ...] = ()


class Encoder(nn.Module):
    """N encoder layers, each reading the previous one's output (plus a final LayerNorm if configured).

    Taught in: 02_transformer ("The encoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.layer_norm = _layer_norm(config) if config.has_final_layer_norm else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False) -> EncoderOutput:
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights)  # (B, S, C)
            attentions.append(weights)
        x = self.layer_norm(x) if self.layer_norm is not None else x
        return EncoderOutput(x, tuple(attentions) if need_weights else ())


class Decoder(nn.Module):
    """N decoder layers; every layer attends to the same encoder output ``memory``.

    Taught in: 02_transformer ("The decoder block").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.layer_norm = _layer_norm(config) if config.has_final_layer_norm else None

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        attentions, cross_attentions = [], []
        for layer in self.layers:
            x, self_weights, cross_weights = layer(x, memory, self_mask, memory_mask, need_weights)  # (B, T, C)
            attentions.append(self_weights)
            cross_attentions.append(cross_weights)
        x = self.layer_norm(x) if self.layer_norm is not None else x
        if not need_weights:
            return DecoderOutput(x)
        return DecoderOutput(x, tuple(attentions), tuple(cross_attentions))


# ---------------------------------------------------------------- the model


@dataclass
class Seq2SeqOutput:
    """Next-token logits (B, T, V) and, when asked for, every layer's attention weights.

    Taught in: 02_transformer ("Cross-attention as alignment").
    """

    logits: torch.Tensor
    encoder_attentions: tuple[torch.Tensor, ...] = ()
    decoder_attentions: tuple[torch.Tensor, ...] = ()
    cross_attentions: tuple[torch.Tensor, ...] = ()


def token_padding_mask(ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """(B, 1, 1, T) "may attend" mask of right-padded token ids: True on real tokens.

    >>> token_padding_mask(torch.tensor([[5, 6, 0], [7, 0, 0]]), 0)[:, 0, 0]
    tensor([[ True,  True, False],
            [ True, False, False]])

    Taught in: 02_transformer ("Checking against PyTorch").
    """
    if ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(
            f"expected token ids of shape (B, T) and dtype torch.int64, got {tuple(ids.shape)} {ids.dtype}"
        )
    real = ids != pad_token_id
    mask = padding_mask(real.sum(dim=1), ids.shape[1])  # (B, 1, 1, T)
    if not torch.equal(mask[:, 0, 0], real):
        raise ValueError("expected right-padded sequences (padding only after the last real token)")
    if not bool(real[:, 0].all()):
        raise ValueError("expected every sequence to hold at least one real token, got an all-padding row")
    return mask


class Transformer(nn.Module):
    """The encoder-decoder: embeddings + positions -> Encoder; embeddings + positions -> Decoder -> logits.

    One vocabulary serves source and target, with one embedding matrix (the paper shares it between
    both embeddings and the output projection when ``tie_word_embeddings``); embeddings are multiplied
    by sqrt(d_model) when ``scale_embedding``. Padding is ``pad_token_id``, on the right.

    For decoding (:mod:`lecture_lib.decoding`) it exposes ``encode(src) -> state`` and
    ``decode_step(prefix, state) -> logits``.

    Taught in: 02_transformer ("The whole model").
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder_positions = position_embedding(config)
        self.decoder_positions = position_embedding(config)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform matrices (as ``torch.nn.Transformer``), zero biases, unit LayerNorms, and token
        embeddings N(0, 1/d_model) so that after the sqrt(d_model) scaling they are as large as the positions."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        nn.init.normal_(self.embed_tokens.weight, std=self.config.d_model**-0.5)
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def embed(self, ids: torch.Tensor, positions: nn.Module) -> torch.Tensor:
        """Token embedding * sqrt(d_model) + position encoding, then dropout: (B, T) -> (B, T, C)."""
        return self.dropout(self.embed_tokens(ids) * self.embed_scale + positions(ids.shape[1]))

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Source ids (B, S) -> ``(memory (B, S, C), memory_mask (B, 1, 1, S))``, the decoder's state."""
        src_mask = token_padding_mask(src, self.config.pad_token_id)
        return self.encoder(self.embed(src, self.encoder_positions), src_mask).last_hidden_state, src_mask

    def target_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """(B, 1, T, T): causal (position t sees 1..t) and blind to target padding."""
        return causal_mask(tgt.shape[1], tgt.device) & token_padding_mask(tgt, self.config.pad_token_id)

    def decode(
        self, tgt_in: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], need_weights: bool = False
    ) -> tuple[torch.Tensor, DecoderOutput]:
        """Target ids (B, T) and the encoder state -> next-token logits (B, T, V) and the decoder's output."""
        memory, memory_mask = state
        out = self.decoder(
            self.embed(tgt_in, self.decoder_positions), memory, self.target_mask(tgt_in), memory_mask, need_weights
        )
        return self.lm_head(out.last_hidden_state), out

    def decode_step(self, prefix: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Logits (B, V) of the token after ``prefix`` (B, t). Recomputes the whole prefix (no cache):
        simple, and cheap at the lengths of this chapter."""
        return self.decode(prefix, state)[0][:, -1]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, need_weights: bool = False) -> Seq2SeqOutput:
        """Source ids (B, S) and decoder input ids (B, T), both right-padded -> logits (B, T, V) (+ weights)."""
        src_mask = token_padding_mask(src, self.config.pad_token_id)
        enc = self.encoder(self.embed(src, self.encoder_positions), src_mask, need_weights)
        logits, dec = self.decode(tgt_in, (enc.last_hidden_state, src_mask), need_weights)
        return Seq2SeqOutput(logits, enc.attentions, dec.attentions, dec.cross_attentions)

    @classmethod
    def from_torch(cls, module: nn.Transformer, vocab_size: int, **config_overrides: Any) -> "Transformer":
        """A model whose encoder and decoder stacks carry the weights of a batch-first ``torch.nn.Transformer``.

        PyTorch's module has no embeddings or output projection: those stay freshly initialised (the
        sizes, dropout, activation and LayerNorm order are read from ``module``; ``config_overrides``
        set the rest, e.g. ``position_embedding_type``). With equal inputs and masks,
        ``ours.encoder``/``ours.decoder`` compute what ``module.encoder``/``module.decoder`` compute.

        Taught in: 02_transformer ("Checking against PyTorch").
        """
        if not isinstance(module, nn.Transformer):
            raise TypeError(f"expected a torch.nn.Transformer, got {type(module).__name__}")
        enc0 = module.encoder.layers[0]
        if not module.batch_first:
            raise ValueError("expected a batch-first torch.nn.Transformer (batch_first=True), got batch_first=False")
        if enc0.activation not in (F.relu, F.gelu):
            raise ValueError(f"expected relu or gelu activation, got {enc0.activation}")
        config = TransformerConfig(
            vocab_size=vocab_size,
            d_model=module.d_model,
            encoder_layers=len(module.encoder.layers),
            decoder_layers=len(module.decoder.layers),
            num_attention_heads=module.nhead,
            ffn_dim=enc0.linear1.out_features,
            activation_function="relu" if enc0.activation is F.relu else "gelu",
            dropout=enc0.dropout.p,
            attention_dropout=enc0.self_attn.dropout,
            activation_dropout=enc0.dropout.p,
            norm_first=enc0.norm_first,
            final_layer_norm=True,
            layer_norm_eps=enc0.norm1.eps,
            **config_overrides,
        )
        ours = cls(config).to(device=enc0.linear1.weight.device, dtype=enc0.linear1.weight.dtype)
        for mine, theirs in zip(ours.encoder.layers, module.encoder.layers):
            _copy_layer(mine, theirs, [("self_attn", "self_attn", "norm1")], "norm2")
        for mine, theirs in zip(ours.decoder.layers, module.decoder.layers):
            attn = [("self_attn", "self_attn", "norm1"), ("encoder_attn", "multihead_attn", "norm2")]
            _copy_layer(mine, theirs, attn, "norm3")
        ours.encoder.layer_norm.load_state_dict(module.encoder.norm.state_dict())
        ours.decoder.layer_norm.load_state_dict(module.decoder.norm.state_dict())
        return ours


def _copy_layer(mine: ResidualBlock, theirs: nn.Module, attention: list[tuple[str, str, str]], ffn_norm: str) -> None:
    """Copy one PyTorch encoder/decoder layer: attention sublayers named (ours, theirs, their norm), then the FFN."""
    if theirs.linear1.bias is None or theirs.norm1.bias is None:
        raise ValueError("expected a torch.nn.Transformer with biases (bias=True)")
    if theirs.norm_first != mine.norm_first:
        raise ValueError(
            f"expected every layer with norm_first={mine.norm_first}, got a layer with {theirs.norm_first}"
        )
    for ours_name, their_name, norm_name in attention:
        setattr(mine, ours_name, MultiHeadAttention.from_torch(getattr(theirs, their_name)))
        getattr(mine, f"{ours_name}_layer_norm").load_state_dict(getattr(theirs, norm_name).state_dict())
    mine.ffn.fc1.load_state_dict(theirs.linear1.state_dict())
    mine.ffn.fc2.load_state_dict(theirs.linear2.state_dict())
    mine.ffn_layer_norm.load_state_dict(getattr(theirs, ffn_norm).state_dict())
