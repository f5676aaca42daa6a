"""Attention: scaled dot-product attention, multi-head attention, and the masks that shape them.

One convention for masks throughout the course: a boolean mask is ``True`` where a query *may*
attend to a key (as in ``torch.nn.functional.scaled_dot_product_attention``); a floating mask is
*added* to the scores before the softmax (0 keeps a score, ``-inf`` removes it).
:func:`additive_mask` turns the first kind into the second.

Taught in: 01_attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------- checks


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ``ValueError`` unless q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) fit together."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(f"expected {name} of shape (..., length, dim), got {_shape(t)}")
        if not t.is_floating_point():
            raise ValueError(f"expected floating-point {name}, got dtype {t.dtype}")
    if not q.dim() == k.dim() == v.dim():
        raise ValueError(f"expected q, k, v of equal rank, got {_shape(q)}, {_shape(k)}, {_shape(v)}")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ValueError(
            f"expected q, k, v with the same leading (batch, head) dims, got {_shape(q)}, {_shape(k)}, {_shape(v)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"expected q and k with the same last dim d_k, got q {_shape(q)} and k {_shape(k)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"expected k and v of the same length S, got k {_shape(k)} and v {_shape(v)}")


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise ``ValueError`` unless ``mask`` is bool or floating and broadcasts to ``scores_shape``."""
    if not (mask.dtype == torch.bool or mask.is_floating_point()):
        raise ValueError(f"expected a bool or floating-point mask, got dtype {mask.dtype}")
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == torch.Size(scores_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"expected a mask broadcastable to {tuple(scores_shape)}, got {_shape(mask)}")


# ---------------------------------------------------------------- masks


def additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean "may attend" mask into the matrix added to the scores: 0 where True, -inf where False.

    >>> additive_mask(torch.tensor([[True, False], [True, True]]))
    tensor([[0., -inf],
            [0., 0.]])
    """
    if mask.dtype != torch.bool:
        raise ValueError(f"expected a bool mask, got dtype {mask.dtype}")
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def padding_mask(lengths: torch.Tensor | list[int], max_len: int | None = None) -> torch.Tensor:
    """Mask of shape (B, 1, 1, S): True on each sequence's real tokens, False on its padding.

    The two singleton axes broadcast over heads and queries, so every query ignores the padded keys.

    >>> padding_mask([3, 1])[:, 0, 0]
    tensor([[ True,  True,  True],
            [ True, False, False]])
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"expected lengths of shape (B,), got {_shape(lengths)}")
    max_len = int(lengths.max()) if max_len is None else max_len
    if int(lengths.max()) > max_len or int(lengths.min()) < 0:
        raise ValueError(f"lengths must lie in [0, {max_len}], got {lengths.tolist()}")
    positions = torch.arange(max_len, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Mask of shape (n, n): query i may attend to keys 0..i only (no peeking at the future).

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def prefix_lm_mask(n: int, prefix_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Mask of shape (n, n) for a prefix LM: every query sees the whole prefix, and the rest causally.

    Positions 0..prefix_len-1 (the input) attend to each other in both directions; a later position i (the
    output) attends to the prefix and to positions up to i (Raffel et al. 2020; Dong et al. 2019).
    ``prefix_len=0`` gives :func:`causal_mask`, ``prefix_len=n`` full attention.

    >>> prefix_lm_mask(4, 2).int()
    tensor([[1, 1, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    if not 0 <= prefix_len <= n:
        raise ValueError(f"expected 0 <= prefix_len <= n = {n}, got {prefix_len}")
    in_prefix = torch.arange(n, device=device) < prefix_len
    return causal_mask(n, device) | in_prefix[None, :]


def _offsets(n: int, device: torch.device | str | None) -> torch.Tensor:
    positions = torch.arange(n, device=device)
    return positions[:, None] - positions[None, :]  # (n, n): i - j


def sliding_window_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Mask of shape (n, n): query i attends to keys j with |i - j| <= window (Beltagy et al. 2020).

    >>> sliding_window_mask(5, 1).int()
    tensor([[1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [0, 1, 1, 1, 0],
            [0, 0, 1, 1, 1],
            [0, 0, 0, 1, 1]], dtype=torch.int32)
    """
    if window < 0:
        raise ValueError(f"expected window >= 0, got {window}")
    return _offsets(n, device).abs() <= window


def dilated_window_mask(n: int, window: int, dilation: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Mask of shape (n, n): keys j = i + m * dilation for |m| <= window, a window with gaps.

    The receptive field grows to ``window * dilation`` on each side at the same cost per query.

    >>> dilated_window_mask(6, 1, 2).int()
    tensor([[1, 0, 1, 0, 0, 0],
            [0, 1, 0, 1, 0, 0],
            [1, 0, 1, 0, 1, 0],
            [0, 1, 0, 1, 0, 1],
            [0, 0, 1, 0, 1, 0],
            [0, 0, 0, 1, 0, 1]], dtype=torch.int32)
    """
    if window < 0 or dilation < 1:
        raise ValueError(f"expected window >= 0 and dilation >= 1, got {window} and {dilation}")
    offsets = _offsets(n, device)
    return (offsets.abs() <= window * dilation) & (offsets % dilation == 0)


def global_window_mask(
    n: int, window: int, global_positions: list[int], device: torch.device | str | None = None
) -> torch.Tensor:
    """A sliding window plus global tokens that attend everywhere and are attended to from everywhere.

    Longformer gives [CLS] (position 0) global attention for classification.

    >>> global_window_mask(5, 0, [0]).int()
    tensor([[1, 1, 1, 1, 1],
            [1, 1, 0, 0, 0],
            [1, 0, 1, 0, 0],
            [1, 0, 0, 1, 0],
            [1, 0, 0, 0, 1]], dtype=torch.int32)
    """
    if any(not 0 <= p < n for p in global_positions):
        raise ValueError(f"global positions must lie in [0, {n}), got {global_positions}")
    mask = sliding_window_mask(n, window, device)
    is_global = torch.zeros(n, dtype=torch.bool, device=mask.device)
    is_global[list(global_positions)] = True
    return mask | is_global[:, None] | is_global[None, :]


# ---------------------------------------------------------------- attention


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    *,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / sqrt(d_k) + mask) v, written out; returns ``(output, weights)``.

    Shapes: q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) -> output (..., L, d_v), weights (..., L, S).
    ``mask`` is bool (True = may attend) or additive, broadcastable to (..., L, S). ``weights`` are the
    softmax probabilities before dropout. ``scale`` defaults to 1/sqrt(d_k); ``scale=1`` gives the
    plain dot-product attention of Luong et al. (2015). A query whose keys are all masked has no
    distribution to take: its row is NaN, as in PyTorch's reference implementation.
    """
    check_qkv(q, k, v)
    scores_shape = (*q.shape[:-1], k.shape[-2])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., L, S)
    if mask is not None:
        check_mask(mask, scores_shape)
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = scores.softmax(dim=-1)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    *,
    need_weights: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(scale · q kᵀ + mask) v by the cheaper route: returns ``(output, weights or None)``.

    With ``need_weights=True``, the written-out :func:`scaled_dot_product_attention`, which keeps the
    (..., L, S) weights to return; otherwise PyTorch's fused kernel (flash or memory-efficient attention),
    which never stores them. Same shapes, mask convention and ``scale`` (default 1/sqrt(d_k); T5 uses 1) as
    :func:`scaled_dot_product_attention`. Every attention layer of the course calls this one function.

    Taught in: 01_attention ("Multi-head attention").
    """
    if need_weights:
        return scaled_dot_product_attention(q, k, v, mask, dropout_p, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale), None


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, E) -> (B, H, T, E / H): each head sees its own slice of the features.

    >>> split_heads(torch.arange(8.).view(1, 2, 4), 2)[0]
    tensor([[[0., 1.],
             [4., 5.]],
    <BLANKLINE>
            [[2., 3.],
             [6., 7.]]])
    """
    batch, length, width = x.shape
    if width % num_heads:
        raise ValueError(f"width {width} is not divisible by num_heads {num_heads}")
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D) -> (B, T, H * D): concatenate the heads' outputs, undoing :func:`split_heads`."""
    batch, heads, length, dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * dim)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Batch-first: query (B, L, E), key and value (B, S, E). ``forward`` returns ``(output, weights)``
    with per-head weights (B, H, L, S) when ``need_weights=True``, else ``None``: without weights it
    dispatches to PyTorch's fused kernel (flash or memory-efficient attention), which never
    materialises the L x S matrix.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.embed_dim:
                raise ValueError(f"expected {name} of shape (B, T, {self.embed_dim}), got {_shape(t)}")
        if not query.shape[0] == key.shape[0] == value.shape[0] or key.shape[1] != value.shape[1]:
            raise ValueError(
                f"expected query (B, L, E), key and value (B, S, E), got {_shape(query)}, {_shape(key)}, {_shape(value)}"
            )

    def _project(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Q = query W^Q, K = key W^K, V = value W^V; for self-attention as one (E, 3E) matmul, as PyTorch does."""
        if key is query and value is query:
            projections = (self.q_proj, self.k_proj, self.v_proj)
            weight = torch.cat([p.weight for p in projections])
            bias = torch.cat([p.bias for p in projections]) if self.q_proj.bias is not None else None
            return F.linear(query, weight, bias).chunk(3, dim=-1)
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention when ``key`` and ``value`` are omitted; ``mask`` broadcastable to (B, H, L, S)."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        h = self.num_heads
        q, k, v = (split_heads(x, h) for x in self._project(query, key, value))  # (B, H, T, D) each
        if mask is not None:
            check_mask(mask, (query.shape[0], h, query.shape[1], key.shape[1]))
        p = self.dropout if self.training else 0.0
        out, weights = attend(q, k, v, mask, p, need_weights=need_weights)
        return self.out_proj(merge_heads(out)), weights  # (B, L, E)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (feed the copy batch-first tensors).

        PyTorch keeps the three input projections stacked in one (3E, E) matrix; we split it.
        """
        if not module._qkv_same_embed_dim or module.bias_k is not None or module.add_zero_attn:
            raise ValueError(
                "only nn.MultiheadAttention with kdim = vdim = embed_dim, no bias_k/bias_v, no add_zero_attn"
            )
        bias = module.in_proj_bias is not None
        ours = cls(module.embed_dim, module.num_heads, module.dropout, bias=bias)
        ours.to(device=module.in_proj_weight.device, dtype=module.in_proj_weight.dtype)
        with torch.no_grad():
            for proj, weight in zip((ours.q_proj, ours.k_proj, ours.v_proj), module.in_proj_weight.chunk(3)):
                proj.weight.copy_(weight)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if bias:
                for proj, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), module.in_proj_bias.chunk(3)):
                    proj.bias.copy_(b)
                ours.out_proj.bias.copy_(module.out_proj.bias)
        return ours
