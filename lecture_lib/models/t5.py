"""T5 (Raffel et al. 2020): the Transformer encoder-decoder of chapter 02, with five changes.

1. **RMS norm without bias** before each sublayer (pre-LN): y = x / sqrt(mean(x²) + ε) · g, no mean
   subtracted, no bias (``transformers``' ``T5LayerNorm``, whose mean square is taken in float32).
2. **No score scaling**: softmax(q kᵀ + b) v, without 1/sqrt(d_kv); the scale lives in the initialisation
   (q ~ N(0, (d_model · d_kv)^-1/2)).
3. **No absolute positions**: a learned scalar b_h(bucket(j - i)) per head is added to the score of query i and
   key j. Offsets fall into 32 buckets, exact up to 8 (16 for the decoder), then logarithmic up to 128
   (:func:`relative_position_bucket`). The table lives in the first block of each stack; every later block
   reuses the same bias. It reaches :func:`~lecture_lib.attention.attend` as an additive mask, with the
   padding (and in the decoder the causal) mask added to it as -inf.
4. **One embedding matrix** for encoder, decoder and output, the decoder output scaled by d_model^-1/2 before
   the output projection (the tied T5 1.0 checkpoints). T5 1.1 (``tie_word_embeddings=False``, with the
   gated-GELU feed-forward) has an output matrix of its own and no rescale.
5. **Decoding starts from the pad token** (``decoder_start_token_id`` = 0): labels shifted right behind it.

The modules carry ``transformers``' names (``block.{i}.layer.{j}``, ``SelfAttention``, ``EncDecAttention``,
``DenseReluDense``), so the family needs no rename table.

Taught in: 09_t5_bart ("T5: the model", "The relative position bias").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from lecture_lib.attention import additive_mask, attend, causal_mask, merge_heads
from lecture_lib.config import OneOf, Range, check_fields, check_indices
from lecture_lib.models.activations import activation
from lecture_lib.models.encoder_decoder import EncoderDecoderLM
from lecture_lib.models.hf import Family, HFConfig

# ---------------------------------------------------------------- configuration


@dataclass
class T5Config(HFConfig):
    """The sizes of a T5, with ``transformers``' field names; the defaults are t5-small.

    ``feed_forward_proj`` is ``"relu"`` (T5 1.0) or ``"gated-gelu"`` (GEGLU, T5 1.1's feed-forward);
    ``tie_word_embeddings=False`` is T5 1.1's output: a matrix of its own, no d_model^-1/2 rescale.

    Taught in: 09_t5_bart ("T5: the model").
    """

    vocab_size: int = field(default=32128, metadata=Range(1).rule())
    d_model: int = field(default=512, metadata=Range(1).rule())
    d_kv: int = field(default=64, metadata=Range(1).rule())
    d_ff: int = field(default=2048, metadata=Range(1).rule())
    num_layers: int = field(default=6, metadata=Range(1).rule())
    num_decoder_layers: int | None = field(default=None, metadata=Range(1).rule())  # None: num_layers
    num_heads: int = field(default=8, metadata=Range(1).rule())
    relative_attention_num_buckets: int = field(default=32, metadata=Range(1).rule())
    relative_attention_max_distance: int = field(default=128, metadata=Range(1).rule())
    dropout_rate: float = field(default=0.1, metadata=Range(0, 1).rule())
    layer_norm_epsilon: float = field(default=1e-6, metadata=Range(0, open=True).rule())
    initializer_factor: float = field(default=1.0, metadata=Range(0).rule())
    feed_forward_proj: str = field(default="relu", metadata=OneOf(("relu", "gated-gelu")).rule())
    tie_word_embeddings: bool = True
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0

    def __post_init__(self) -> None:
        self.num_decoder_layers = self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers
        check_fields(self)
        check_indices(self, "vocab_size", "pad_token_id", "eos_token_id", "decoder_start_token_id")

    @classmethod
    def from_dict(cls, values: dict) -> "T5Config":
        """As :meth:`HFConfig.from_dict`; ``transformers`` 5 writes T5 1.1 as ``scale_decoder_outputs=False``
        (and ``tie_word_embeddings=True``, which its T5 ignores), T5 1.1's own ``config.json`` as
        ``tie_word_embeddings=False``: either is our untied, unscaled head."""
        if "scale_decoder_outputs" in values:
            values = {**values, "tie_word_embeddings": bool(values["scale_decoder_outputs"])}
        return super().from_dict(values)


T5 = Family(
    model_type="t5",
    config_class=T5Config,
    hf_config_class="T5Config",
    unsupported={"is_decoder": False},
)


# ---------------------------------------------------------------- parts


class T5LayerNorm(nn.Module):
    """RMS norm: y = x / sqrt(mean(x²) + ε) · g. No mean subtracted, no bias; the mean square in float32.

    >>> norm = T5LayerNorm(2)
    >>> norm(torch.tensor([[3.0, 4.0]]))  # rms = sqrt(12.5) = 3.536
    tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)

    Taught in: 09_t5_bart ("T5: the model").
    """

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean_square = x.to(torch.float32).pow(2).mean(-1, keepdim=True)  # (..., 1), in float32 even for half x
        y = x * torch.rsqrt(mean_square + self.eps)  # float32 for half x; float64 stays float64
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            y = y.to(self.weight.dtype)  # back to the half precision of the weights
        return self.weight * y


def relative_position_bucket(
    relative_position: torch.Tensor, *, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """The bucket of each offset j - i (key minus query): exact for small offsets, logarithmic up to max_distance.

    Bidirectional (encoder): half the buckets for keys before the query, half for keys after. Unidirectional
    (decoder): only the past, every future offset in bucket 0. Within a half of n buckets, offsets below n/2 get
    their own bucket; larger ones n/2 + floor(log(d / (n/2)) / log(max_distance / (n/2)) · n/2), capped at n - 1.

    >>> offsets = torch.tensor([-200, -91, -90, -8, -7, -1, 0, 1, 8, 91])
    >>> relative_position_bucket(offsets, bidirectional=True).tolist()
    [15, 15, 14, 8, 7, 1, 0, 17, 24, 31]
    >>> relative_position_bucket(offsets, bidirectional=False).tolist()
    [31, 29, 29, 8, 7, 1, 0, 0, 0, 0]

    Taught in: 09_t5_bart ("The relative position bias").
    """
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket += (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    scaled = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    far = torch.clamp(max_exact + scaled.to(torch.long), max=num_buckets - 1)
    return bucket + torch.where(distance < max_exact, distance, far)


class T5Attention(nn.Module):
    """Multi-head attention without biases or score scaling; optionally the relative position bias table.

    ``forward(x, memory, mask)``: queries from x (B, L, d_model), keys and values from ``memory`` (B, S, d_model)
    (x itself when ``None``); ``mask`` is added to the scores, broadcastable to (B, H, L, S).
    """

    def __init__(self, config: T5Config, has_relative_attention_bias: bool = False, bidirectional: bool = True) -> None:
        super().__init__()
        self.config, self.bidirectional = config, bidirectional
        inner = config.num_heads * config.d_kv  # can differ from d_model (T5-3B, 11B)
        self.q = nn.Linear(config.d_model, inner, bias=False)
        self.k = nn.Linear(config.d_model, inner, bias=False)
        self.v = nn.Linear(config.d_model, inner, bias=False)
        self.o = nn.Linear(inner, config.d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_heads)

    def compute_bias(self, query_length: int, key_length: int) -> torch.Tensor:
        """The bias b_h(bucket(j - i)) for every query i and key j: (1, H, L, S).

        Taught in: 09_t5_bart ("The relative position bias").
        """
        device = self.relative_attention_bias.weight.device
        offsets = torch.arange(key_length, device=device)[None, :] - torch.arange(query_length, device=device)[:, None]
        buckets = relative_position_bucket(
            offsets,
            bidirectional=self.bidirectional,
            num_buckets=self.config.relative_attention_num_buckets,
            max_distance=self.config.relative_attention_max_distance,
        )  # (L, S)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # (1, H, L, S)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:2], self.config.num_heads, self.config.d_kv).transpose(1, 2)  # (B, H, T, d_kv)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        memory = x if memory is None else memory
        q, k, v = self._heads(self.q(x)), self._heads(self.k(memory)), self._heads(self.v(memory))
        p = self.config.dropout_rate if self.training else 0.0
        out, _ = attend(q, k, v, mask, p, scale=1.0)  # softmax(q kᵀ + bias + mask) v
        return self.o(merge_heads(out))  # (B, L, d_model)


class T5Sublayer(nn.Module):
    """x + Dropout(F(RMSNorm(x))): the pre-LN residual wrapping every T5 sublayer shares."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.layer_norm = T5LayerNorm(config.d_model, config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)


class T5LayerSelfAttention(T5Sublayer):
    def __init__(self, config: T5Config, has_relative_attention_bias: bool, bidirectional: bool) -> None:
        super().__init__(config)
        self.SelfAttention = T5Attention(config, has_relative_attention_bias, bidirectional)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.SelfAttention(self.layer_norm(x), mask=mask))


class T5LayerCrossAttention(T5Sublayer):
    def __init__(self, config: T5Config) -> None:
        super().__init__(config)
        self.EncDecAttention = T5Attention(config)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.EncDecAttention(self.layer_norm(x), memory, mask))


class T5DenseActDense(nn.Module):
    """FFN(x) = W_o ReLU(W_i x), no biases; gated (T5 1.1): W_o (GELU(W_i0 x) * W_i1 x)."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.gated = config.feed_forward_proj.startswith("gated")
        if self.gated:
            self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
            self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        else:
            self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.act = activation("gelu_new" if self.gated else "relu")
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.wi_0(x)) * self.wi_1(x) if self.gated else self.act(self.wi(x))
        return self.wo(self.dropout(h))


class T5LayerFF(T5Sublayer):
    def __init__(self, config: T5Config) -> None:
        super().__init__(config)
        self.DenseReluDense = T5DenseActDense(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


class T5Block(nn.Module):
    """Self-attention, (in the decoder) cross-attention, feed-forward; each x + Dropout(F(RMSNorm(x)))."""

    def __init__(self, config: T5Config, is_decoder: bool, has_relative_attention_bias: bool) -> None:
        super().__init__()
        self.layer = nn.ModuleList([T5LayerSelfAttention(config, has_relative_attention_bias, not is_decoder)])
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(config))
        self.layer.append(T5LayerFF(config))

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.layer[0](x, mask)
        if memory is not None:
            x = self.layer[1](x, memory, memory_mask)
        return self.layer[-1](x)  # (B, T, d_model)


def keys_additive_mask(attention_mask: torch.Tensor | None, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, 1, T): 0 on the keys to attend to (``attention_mask`` 1), -inf on padding (0); all 0 without a mask."""
    if attention_mask is None:
        return torch.zeros(ids.shape[0], 1, 1, ids.shape[1], dtype=dtype, device=ids.device)
    if attention_mask.shape != ids.shape:
        raise ValueError(f"expected an attention mask of shape {tuple(ids.shape)}, got {tuple(attention_mask.shape)}")
    return additive_mask(attention_mask.bool()[:, None, None, :], dtype)


class T5Stack(nn.Module):
    """The embedding (shared), N blocks with the bias table in the first, the final RMS norm and dropout.

    Taught in: 09_t5_bart ("T5: the model").
    """

    def __init__(self, config: T5Config, embed_tokens: nn.Embedding, is_decoder: bool) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.embed_tokens = embed_tokens
        layers = config.num_decoder_layers if is_decoder else config.num_layers
        self.block = nn.ModuleList(T5Block(config, is_decoder, i == 0) for i in range(layers))
        self.final_layer_norm = T5LayerNorm(config.d_model, config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def position_bias(self) -> nn.Embedding:
        """The (num_buckets, heads) table of the relative position bias, held by the first block."""
        return self.block[0].layer[0].SelfAttention.relative_attention_bias

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.dropout(self.embed_tokens(input_ids))  # (B, T, d_model): no positions, no sqrt(d) scaling
        length = input_ids.shape[1]
        mask = self.block[0].layer[0].SelfAttention.compute_bias(length, length).to(x.dtype)  # (1, H, T, T)
        mask = mask + keys_additive_mask(attention_mask, input_ids, x.dtype)  # (B, H, T, T)
        if self.is_decoder:
            mask = mask + additive_mask(causal_mask(length, x.device), x.dtype)
        memory_mask = None
        if memory is not None:
            ids = torch.ones(memory.shape[:2], dtype=torch.long, device=memory.device)
            memory_mask = keys_additive_mask(memory_attention_mask, ids, x.dtype)  # (B, 1, 1, S): no bias
        for block in self.block:
            x = block(x, mask, memory, memory_mask)  # the same bias in every block
        return self.dropout(self.final_layer_norm(x))


# ---------------------------------------------------------------- the model


class T5ForConditionalGeneration(EncoderDecoderLM):
    """The encoder-decoder with its language-model head (tied in T5 1.0, its own in T5 1.1), as ``transformers``'
    class of that name.

    ``forward``, ``encode`` and ``decode_step`` are :class:`~lecture_lib.models.encoder_decoder.EncoderDecoderLM`'s
    (labels shifted right behind ``decoder_start_token_id``, 0 in T5); the stacks and :meth:`lm_logits` are T5's.

    >>> model = T5ForConditionalGeneration(T5Config(vocab_size=50, d_model=16, d_kv=4, d_ff=32, num_layers=2,
    ...                                             num_heads=4)).eval()
    >>> out = model(torch.tensor([[5, 6, 7, 1]]), labels=torch.tensor([[8, 9, 1]]))
    >>> tuple(out.logits.shape), out.loss.dim()
    ((1, 3, 50), 0)

    Taught in: 09_t5_bart ("T5: the model").
    """

    family = T5
    hf_class = "T5ForConditionalGeneration"
    base_model_prefix = "transformer"

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Stack(config, self.shared, is_decoder=False)
        self.decoder = T5Stack(config, self.shared, is_decoder=True)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.shared.weight
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """T5's initialisation: the scale that the unscaled scores lack is in q's (d_model · d_kv)^-1/2."""
        c, f = self.config, self.config.initializer_factor
        if isinstance(module, T5LayerNorm):
            nn.init.constant_(module.weight, f)
        elif isinstance(module, T5Attention):
            nn.init.normal_(module.q.weight, std=f * (c.d_model * c.d_kv) ** -0.5)
            nn.init.normal_(module.k.weight, std=f * c.d_model**-0.5)
            nn.init.normal_(module.v.weight, std=f * c.d_model**-0.5)
            nn.init.normal_(module.o.weight, std=f * (c.num_heads * c.d_kv) ** -0.5)
            if hasattr(module, "relative_attention_bias"):
                nn.init.normal_(module.relative_attention_bias.weight, std=f * c.d_model**-0.5)
        elif isinstance(module, T5DenseActDense):
            for linear in (module.wi_0, module.wi_1) if module.gated else (module.wi,):
                nn.init.normal_(linear.weight, std=f * c.d_model**-0.5)
            nn.init.normal_(module.wo.weight, std=f * c.d_ff**-0.5)
        elif module is self:
            nn.init.normal_(module.shared.weight, std=f)
            if not c.tie_word_embeddings:
                nn.init.normal_(module.lm_head.weight, std=f)

    def tied_keys(self) -> set[str]:
        head = {"lm_head.weight"} if self.config.tie_word_embeddings else set()
        return {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", *head}

    def _prepare_hf(self, hf: nn.Module) -> None:
        """``transformers`` 5 builds every T5 with its head tied (T5 1.1's checkpoints untie it on loading,
        their two matrices differing): give an untied head its own matrix before our weights are copied."""
        if not self.config.tie_word_embeddings:
            hf.lm_head.weight = nn.Parameter(hf.lm_head.weight.detach().clone())

    def stacks(self) -> tuple[T5Stack, T5Stack]:
        return self.encoder, self.decoder

    def lm_logits(self, decoder_states: torch.Tensor) -> torch.Tensor:
        """logits = (h · d_model^-1/2) Eᵀ: the rescale that keeps the tied output on the embeddings' scale;
        untied (T5 1.1), h Wᵀ with the head's own matrix and no rescale."""
        if self.config.tie_word_embeddings:
            decoder_states = decoder_states * self.config.d_model**-0.5
        return self.lm_head(decoder_states)  # (B, T, V)
