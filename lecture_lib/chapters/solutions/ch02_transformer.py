"""Chapter 02's exercise answers: exercise 4, greedy decoding with a key-value cache.

Taught in: 02_transformer ("Exercises").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lecture_lib.attention import merge_heads, scaled_dot_product_attention, split_heads
from lecture_lib.models.transformer import Transformer


@dataclass
class DecoderCache:
    """What :class:`KVCacheDecoder` keeps between steps: per decoder layer the self-attention keys and values
    of the tokens written so far (B, H, t, D), and the cross-attention keys and values of the encoder output
    (B, H, S, D), computed once."""

    memory_mask: torch.Tensor
    cross: list[tuple[torch.Tensor, torch.Tensor]]
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)
    length: int = 0


class KVCacheDecoder:
    """Exercise 4 of chapter 02: ``model``'s greedy decoding with a key-value cache. ``decode_step`` runs only the
    newest token through the decoder: its query attends over the cached keys and values of the whole prefix
    (the last position may see all of them: no causal mask), and cross-attention reuses the encoder's keys and
    values. Same ``encode``/``decode_step`` interface as :class:`Transformer`, for ``greedy_decode``; one
    decoding per ``encode`` (beam search, which reorders the prefixes, would have to reorder the cache too)."""

    def __init__(self, model: Transformer) -> None:
        self.model = model

    def encode(self, src: torch.Tensor) -> DecoderCache:
        memory, memory_mask = self.model.encode(src)
        layers = self.model.decoder.layers
        cross = [
            (
                split_heads(layer.encoder_attn.k_proj(memory), layer.encoder_attn.num_heads),
                split_heads(layer.encoder_attn.v_proj(memory), layer.encoder_attn.num_heads),
            )
            for layer in layers
        ]
        return DecoderCache(memory_mask, cross, [None] * len(layers), [None] * len(layers))

    def decode_step(self, prefix: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """Logits (B, V) of the token after ``prefix`` (B, t), of which only the last token is new to ``cache``."""
        t = prefix.shape[1] - 1  # the position of the newest token
        if t != cache.length:
            raise ValueError(f"expected a prefix one token longer than the cache's {cache.length}, got {t + 1}")
        model = self.model
        x = model.embed_tokens(prefix[:, -1:]) * model.embed_scale + model.decoder_positions(t + 1)[-1:]  # (B, 1, C)
        for i, layer in enumerate(model.decoder.layers):
            attn = layer.self_attn
            h = layer.sublayer_input(x, layer.self_attn_layer_norm)
            q, k, v = (split_heads(p(h), attn.num_heads) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
            cache.keys[i] = k if cache.keys[i] is None else torch.cat([cache.keys[i], k], dim=2)  # (B, H, t+1, D)
            cache.values[i] = v if cache.values[i] is None else torch.cat([cache.values[i], v], dim=2)
            a = attn.out_proj(merge_heads(scaled_dot_product_attention(q, cache.keys[i], cache.values[i])[0]))
            x = layer.add_residual(x, a, layer.self_attn_layer_norm)
            cross = layer.encoder_attn
            h = layer.sublayer_input(x, layer.encoder_attn_layer_norm)
            q = split_heads(cross.q_proj(h), cross.num_heads)
            a, _ = scaled_dot_product_attention(q, *cache.cross[i], cache.memory_mask)  # (B, H, 1, D)
            x = layer.add_residual(x, cross.out_proj(merge_heads(a)), layer.encoder_attn_layer_norm)
            h = layer.sublayer_input(x, layer.ffn_layer_norm)
            x = layer.add_residual(x, layer.ffn(h), layer.ffn_layer_norm)
        cache.length += 1
        x = model.decoder.layer_norm(x) if model.decoder.layer_norm is not None else x
        return model.lm_head(x)[:, -1]
