"""Unpadding (MosaicBERT; FlashAttention's variable-length path): compute on the real tokens of a batch only.

A padded batch (B, T) spends every pointwise step (embeddings, projections, feed-forward, LayerNorm) on the
padding too. Unpadding packs the real tokens of all sequences into one (N, H) tensor, N = Σ_b length_b, runs
the pointwise steps on it, and restricts attention to each sequence: on the packed tokens the attention mask
is block-diagonal, one block per sequence, its edges at the cumulative lengths ``cu_seqlens``::

    mask = [[1, 1, 1, 1, 0, 0, 0],      lengths 4, 1, 2:  cu_seqlens = [0, 4, 5, 7]
            ...  (4 x 4 block)          token i may attend to token j  <=>  seq(i) == seq(j)
            [0, 0, 0, 0, 1, 0, 0],
            [0, 0, 0, 0, 0, 1, 1],
            [0, 0, 0, 0, 0, 1, 1]]

:func:`attend_packed` computes that attention per sequence, without the N x N matrix. Every output at a real
position, the loss and every gradient are those of the padded computation.

Taught in: 04_bert_pretraining ("How fast").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lecture_lib.attention import attend, padding_mask

varlen_attn = None  # the variable-length flash kernel runs on CUDA only; importing it costs a second (torch._dynamo)
if torch.cuda.is_available():
    try:
        from torch.nn.attention.varlen import varlen_attn  # PyTorch >= 2.9; the package asks for >= 2.3
    except ImportError:
        pass


def sequence_lengths(attention_mask: torch.Tensor) -> torch.Tensor:
    """The lengths (B,) of a right-padded (B, T) mask: each row 1 on its first ``length`` positions, 0 after.

    Unpadding packs sequence b into the rows ``cu_seqlens[b] : cu_seqlens[b + 1]`` in order, so its token t is
    at position t of the sequence: a mask with holes or left padding would break that, and is refused.

    >>> sequence_lengths(torch.tensor([[1, 1, 1], [1, 0, 0]]))
    tensor([3, 1])
    >>> sequence_lengths(torch.tensor([[1, 0, 1]]))
    Traceback (most recent call last):
    ...
    ValueError: expected a right-padded attention_mask (each row 1...1 then 0...0, at least one 1), got rows [0]: [[1, 0, 1]]
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"expected attention_mask of shape (B, T), got {tuple(attention_mask.shape)}")
    if ((attention_mask != 0) & (attention_mask != 1)).any():
        raise ValueError(f"expected an attention_mask of 0s and 1s, got values {attention_mask.unique().tolist()}")
    mask = attention_mask.long()
    bad = (mask[:, 1:] > mask[:, :-1]).any(dim=1) | (mask[:, 0] == 0)
    if bad.any():
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(
            f"expected a right-padded attention_mask (each row 1...1 then 0...0, at least one 1), "
            f"got rows {rows}: {mask[rows[:3]].tolist()}"
        )
    return mask.sum(dim=1)


def unpad(hidden: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(B, T, ...) -> ``(packed, indices, cu_seqlens, max_len)``: the real tokens, one after the other.

    ``packed`` (N, ...) holds ``hidden.flatten(0, 1)[indices]``; ``indices`` (N,) are the flat positions
    b·T + t of the real tokens; ``cu_seqlens`` (B + 1,) int32 the cumulative lengths (sequence b is
    ``packed[cu_seqlens[b]:cu_seqlens[b + 1]]``); ``max_len`` the longest sequence.

    >>> ids = torch.tensor([[11, 12, 13], [21, 0, 0], [31, 32, 0]])
    >>> unpad(ids, torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]]))
    (tensor([11, 12, 13, 21, 31, 32]), tensor([0, 1, 2, 3, 6, 7]), tensor([0, 3, 4, 6], dtype=torch.int32), 3)

    Taught in: 04_bert_pretraining ("How fast").
    """
    if hidden.shape[:2] != attention_mask.shape:
        raise ValueError(
            f"expected hidden of shape ({', '.join(map(str, attention_mask.shape))}, ...) "
            f"like the attention_mask, got {tuple(hidden.shape)}"
        )
    lengths = sequence_lengths(attention_mask)
    indices = attention_mask.flatten().nonzero().flatten()
    cu_seqlens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
    return hidden.flatten(0, 1)[indices], indices, cu_seqlens, int(lengths.max())


def pad(packed: torch.Tensor, indices: torch.Tensor, batch: int, length: int) -> torch.Tensor:
    """(N, ...) -> (batch, length, ...): the inverse of :func:`unpad`, zeros at the padded positions.

    >>> pad(torch.tensor([11, 12, 13, 21, 31, 32]), torch.tensor([0, 1, 2, 3, 6, 7]), 3, 3)
    tensor([[11, 12, 13],
            [21,  0,  0],
            [31, 32,  0]])

    Taught in: 04_bert_pretraining ("How fast").
    """
    if packed.shape[0] != indices.shape[0]:
        raise ValueError(
            f"expected one index per packed row, got {indices.shape[0]} indices for {packed.shape[0]} rows"
        )
    rest = packed.shape[1:]
    grid = packed.new_zeros(batch * length, *rest)
    return grid.index_copy(0, indices, packed).view(batch, length, *rest)


def block_diagonal_mask(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Mask (N, N) over packed tokens: True where both tokens belong to the same sequence.

    >>> block_diagonal_mask(torch.tensor([0, 2, 3, 5])).int()
    tensor([[1, 1, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 0, 1, 0, 0],
            [0, 0, 0, 1, 1],
            [0, 0, 0, 1, 1]], dtype=torch.int32)

    Taught in: 04_bert_pretraining ("How fast").
    """
    lengths = cu_seqlens.diff().long()
    sequence = torch.repeat_interleave(torch.arange(len(lengths), device=cu_seqlens.device), lengths)  # (N,)
    return sequence[:, None] == sequence[None, :]


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a right-padded (``batch``, ``length``) batch went: see :func:`unpad`.

    ``attention_indices`` are the same tokens' positions b·max_len + t in a (batch, max_len) grid, where
    :func:`attend_packed` lays them out to attend per sequence; ``key_mask`` (batch, 1, 1, max_len) marks
    the real keys of that grid.

    Finding the packing reads the mask's values (how many tokens, the longest sequence), so on a GPU it waits
    for the device. A training step that must not wait, or a compiled one that must not break its graph,
    takes the packing found beforehand, on the host, where the batch is made, and moved with the batch:

    >>> mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    >>> packing = Packing.of(mask)  # on the CPU, before the step
    >>> packing.max_len, packing.cu_seqlens.tolist()
    (3, [0, 3, 4])
    >>> packing.gather(torch.tensor([[11, 12, 13], [21, 0, 0]]))  # in the step: no value is read
    tensor([[11, 12, 13, 21]])

    Taught in: 04_bert_pretraining ("How fast").
    """

    indices: torch.Tensor  # (N,)
    cu_seqlens: torch.Tensor  # (B + 1,) int32
    max_len: int
    batch: int
    length: int
    attention_indices: torch.Tensor  # (N,)
    key_mask: torch.Tensor  # (B, 1, 1, max_len)

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> Packing:
        """The packing of a right-padded ``attention_mask`` (B, T), checked (see :func:`sequence_lengths`)."""
        batch, length = attention_mask.shape
        _, indices, cu_seqlens, max_len = unpad(attention_mask, attention_mask)
        attention_indices = indices // length * max_len + indices % length
        key_mask = padding_mask(cu_seqlens.diff().long(), max_len)
        return cls(indices, cu_seqlens, max_len, batch, length, attention_indices, key_mask)

    @classmethod
    def pack(cls, attention_mask: torch.Tensor, *tensors: torch.Tensor) -> tuple[Packing, list[torch.Tensor]]:
        """The packing of ``attention_mask`` (B, T), and each (B, T, ...) tensor packed to (1, N, ...)."""
        packing = cls.of(attention_mask)
        return packing, [packing.gather(t) for t in tensors]

    def to(self, device: torch.device | str) -> Packing:
        """The same packing with its tensors on ``device`` (``max_len`` and the sizes stay Python ints)."""
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.__dict__.items()}
        return Packing(**moved)

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (1, N, ...): the real tokens, one after the other.

        The leading 1 makes the packed tokens a batch of one long sequence, so that modules written for
        (B, T, ...) inputs run on them unchanged.
        """
        if tensor.shape[:2] != (self.batch, self.length):
            raise ValueError(
                f"expected a tensor of shape ({self.batch}, {self.length}, ...) like the packed "
                f"attention_mask, got {tuple(tensor.shape)}"
            )
        return tensor.flatten(0, 1)[self.indices][None]

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """(1, N, ...) -> (batch, length, ...), zeros at the padding."""
        return pad(packed[0], self.indices, self.batch, self.length)


def attend_packed(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packing: Packing, dropout_p: float = 0.0
) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d) + M) v over packed tokens, M the :func:`block_diagonal_mask`: attention per sequence.

    Shapes: q, k, v (1, heads, N, d) -> (1, heads, N, d). On CUDA in half precision without dropout, PyTorch's
    variable-length flash kernel (PyTorch >= 2.9) reads ``cu_seqlens`` directly, at a cost of Σ_b length_b²;
    elsewhere the tokens are laid out in a (B, heads, max_len, d) grid, attended with the padding mask by the
    fused kernel of :func:`attend`, and packed again, at B · max_len². Neither forms the N x N matrix.

    Taught in: 04_bert_pretraining ("How fast").
    """
    heads, dim = q.shape[1], q.shape[-1]
    q, k, v = (x[0].transpose(0, 1) for x in (q, k, v))  # (N, heads, d)
    if varlen_attn is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16) and dropout_p == 0.0:
        cu, n = packing.cu_seqlens, packing.max_len
        return varlen_attn(q, k, v, cu, cu, n, n).transpose(0, 1)[None]
    grid = [pad(x, packing.attention_indices, packing.batch, packing.max_len).transpose(1, 2) for x in (q, k, v)]
    out, _ = attend(*grid, packing.key_mask, dropout_p)  # (B, heads, max_len, d)
    out = out.transpose(1, 2).reshape(-1, heads, dim)[packing.attention_indices]  # (N, heads, d)
    return out.transpose(0, 1)[None]
