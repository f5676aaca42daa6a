"""Symmetric integer quantization, written from scratch: weights, dynamic activations, integer products, QAT.

A tensor x is stored as integers q and one scale s (per tensor, or one per output channel)::

    q_max = 2^(b−1) − 1          (127 for b = 8, 7 for b = 4)
    s     = max|x| / q_max
    q     = clamp(round(x / s), −q_max, q_max),    x̂ = s · q

so |x − x̂| ≤ s / 2 everywhere (rounding, never clipping: the largest |x| maps to q_max). One bit has no
symmetric grid; there x̂ = sign(x) · mean|x| (the binary-weight rule of Rastegari et al. 2016).

A linear layer y = x Wᵀ + b runs in integers when both sides are quantized: with W per output channel (row
scales s_w) and x per row (token scales s_x, computed from each input as it comes: *dynamic* quantization)::

    y ≈ (q_x q_wᵀ) ⊙ (s_x s_wᵀ) + b,      q_x q_wᵀ an int8 × int8 → int32 product (``torch._int_mm``)

Quantization-aware training (Jacob et al. 2018; Q8BERT, Zafrir et al. 2019) runs x̂ in the forward pass
(*fake* quantization, still floats) and passes the gradient straight through the rounding (the
straight-through estimator): ∂x̂/∂x = 1 inside the clipping range, 0 outside.

Taught in: 12_compression ("Quantization from scratch", "Quantization-aware training").
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def max_level(bits: int) -> int:
    """q_max = 2^(bits−1) − 1, the largest integer of the symmetric grid (bits ≥ 2).

    >>> [max_level(b) for b in (8, 4, 2)]
    [127, 7, 1]

    Taught in: 12_compression ("Quantization from scratch").
    """
    if not 2 <= bits <= 16:
        raise ValueError(f"expected 2 <= bits <= 16 for a symmetric integer grid, got {bits}")
    return 2 ** (bits - 1) - 1


def _absmax(x: torch.Tensor, per_channel: bool) -> torch.Tensor:
    """max|x| over the whole tensor (a 0-d tensor), or over each row (rows, 1) when ``per_channel``."""
    if per_channel:
        if x.dim() < 2:
            raise ValueError(
                f"per-channel quantization needs a matrix (rows = output channels), got shape {tuple(x.shape)}"
            )
        return x.detach().abs().amax(dim=tuple(range(1, x.dim())), keepdim=True)
    return x.detach().abs().amax()


@dataclass
class Quantized:
    """Integers ``q`` (int8 up to 8 bits, else int16) and their ``scale`` (0-d, or (rows, 1) per channel).

    Taught in: 12_compression ("Quantization from scratch").
    """

    q: torch.Tensor
    scale: torch.Tensor
    bits: int

    def dequantize(self) -> torch.Tensor:
        """x̂ = s · q, as floats of the scale's dtype."""
        return self.q.to(self.scale.dtype) * self.scale

    @property
    def nbytes(self) -> int:
        """Storage at ``bits`` per integer (packed), plus the scales in their own dtype."""
        return (self.q.numel() * self.bits + 7) // 8 + self.scale.numel() * self.scale.element_size()


def quantize(x: torch.Tensor, bits: int = 8, per_channel: bool = False) -> Quantized:
    """Symmetric quantization of ``x`` to ``bits`` with one scale, or one per row (output channel).

    >>> w = torch.tensor([[0.5, -1.0], [0.02, 0.01]])
    >>> quantize(w, bits=4).q.tolist(), quantize(w, bits=4, per_channel=True).q.tolist()
    ([[3, -7], [0, 0]], [[3, -7], [7, 4]])

    Taught in: 12_compression ("Quantization from scratch").
    """
    levels = max_level(bits)
    scale = (_absmax(x, per_channel) / levels).clamp(min=torch.finfo(x.dtype).tiny)  # an all-zero row: any scale
    q = torch.clamp(torch.round(x.detach() / scale), -levels, levels)
    return Quantized(q.to(torch.int8 if bits <= 8 else torch.int16), scale, bits)


def binarize(x: torch.Tensor, per_channel: bool = False) -> torch.Tensor:
    """One bit per weight: sign(x) · mean|x| (per tensor, or per row), the L2-best scale for a sign pattern.

    >>> binarize(torch.tensor([0.5, -1.5, 1.0]))
    tensor([ 1., -1.,  1.])

    Taught in: 12_compression ("Quantization from scratch").
    """
    dims = tuple(range(1, x.dim())) if per_channel else tuple(range(x.dim()))
    return torch.where(x >= 0, 1.0, -1.0).to(x.dtype) * x.abs().mean(dim=dims, keepdim=per_channel)


def round_trip(x: torch.Tensor, bits: int, per_channel: bool = False) -> torch.Tensor:
    """dequantize(quantize(x)): what the model computes with after quantizing ``x`` to ``bits`` (1 bit: :func:`binarize`).

    Taught in: 12_compression ("Quantization from scratch").
    """
    if bits == 1:
        return binarize(x, per_channel)
    return quantize(x, bits, per_channel).dequantize()


# ---------------------------------------------------------------- integer products


def int8_matmul(a: torch.Tensor, b: torch.Tensor, pad: bool | None = None) -> torch.Tensor:
    """The exact int32 product of int8 matrices a (M, K) and b (K, N), by ``torch._int_mm``.

    On the CPU ``_int_mm`` takes any shape. On CUDA it wants M > 16 and K, N multiples of 8; ``pad``
    (default: on CUDA only) pads with zero rows and columns, which add nothing to the sums, and cuts the
    result back.

    >>> a, b = torch.tensor([[1, -2, 3]], dtype=torch.int8), torch.tensor([[4], [5], [-6]], dtype=torch.int8)
    >>> int8_matmul(a, b), int8_matmul(a, b, pad=True)
    (tensor([[-24]], dtype=torch.int32), tensor([[-24]], dtype=torch.int32))

    Taught in: 12_compression ("Quantization from scratch").
    """
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"expected int8 matrices (M, K) and (K, N), got {a.dtype} {tuple(a.shape)} and {b.dtype} {tuple(b.shape)}"
        )
    if pad is None:
        pad = a.is_cuda
    if not pad:
        return torch._int_mm(a, b)
    (m, k), n = a.shape, b.shape[1]
    up = lambda size, multiple: -(-size // multiple) * multiple  # noqa: E731 (round up)
    rows, inner, cols = max(17, m), up(k, 8), up(n, 8)
    a_padded = F.pad(a, (0, inner - k, 0, rows - m))
    b_padded = F.pad(b, (0, cols - n, 0, inner - k))
    return torch._int_mm(a_padded, b_padded)[:m, :n]


class Int8Linear(nn.Module):
    """A linear layer in integers: int8 weights per output channel, int8 activations per row computed on the
    fly, an int8 × int8 → int32 product, then one float rescale and the float bias. With ``per_channel=False``,
    Q8BERT's symmetric per-tensor scheme instead: one scale max|W|/127 for the whole weight matrix and one
    max|x|/127 for the whole input (Zafrir et al. 2019 calibrate the input's from training; here it is
    taken from each input as it comes).

    The weights are stored as int8 (``weight_q``, (out, in)) with float scales (``weight_scale``, (out, 1), or
    one number per tensor);
    the bias stays float (a few hundred numbers). LayerNorm, softmax and GELU around it stay float, as in
    Q8BERT.

    Taught in: 12_compression ("Quantization from scratch").
    """

    def __init__(self, linear: nn.Linear, per_channel: bool = True) -> None:
        super().__init__()
        weight = quantize(linear.weight, 8, per_channel=per_channel)
        self.per_channel = per_channel
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight_q", weight.q)  # (out, in) int8
        self.register_buffer("weight_scale", weight.scale)  # (out, 1)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected inputs with {self.in_features} features, got {tuple(x.shape)}")
        rows = x.reshape(-1, self.in_features)  # (M, in)
        activations = quantize(rows, 8, per_channel=self.per_channel)  # a scale per row (token), or one
        product = int8_matmul(activations.q, self.weight_q.t().contiguous())  # (M, out) int32
        y = product.to(x.dtype) * activations.scale * self.weight_scale.reshape(1, -1).to(x.dtype)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


# ---------------------------------------------------------------- quantization-aware training


class _RoundThrough(torch.autograd.Function):
    """round(x) forward, the identity backward: the straight-through estimator."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def fake_quantize(x: torch.Tensor, scale: torch.Tensor | float, bits: int = 8) -> torch.Tensor:
    """x̂ = s · clamp(round(x / s), −q_max, q_max) in floats, with the straight-through gradient: 1 where
    |x / s| ≤ q_max, 0 where the clamp cut x (the clamp's own gradient; the rounding passes it through).

    >>> x = torch.tensor([0.26, 2.0], requires_grad=True)
    >>> y = fake_quantize(x, scale=0.5, bits=2); y.sum().backward()
    >>> y.detach(), x.grad
    (tensor([0.5000, 0.5000]), tensor([1., 0.]))

    Taught in: 12_compression ("Quantization-aware training").
    """
    levels = max_level(bits)
    return _RoundThrough.apply(torch.clamp(x / scale, -levels, levels)) * scale


class FakeQuantLinear(nn.Module):
    """Q8BERT's training-time linear layer: weights fake-quantized per output channel by their max |W|,
    inputs fake-quantized per tensor by an exponential moving average of max |x| (updated in training,
    frozen in eval), both with the straight-through estimator. Holds the float weights it trains.
    ``quantize_inputs=False`` quantizes the weights alone (the inputs stay float), as
    :func:`quantize_weights_` does after training.

    Taught in: 12_compression ("Quantization-aware training").
    """

    def __init__(self, linear: nn.Linear, bits: int = 8, momentum: float = 0.9, quantize_inputs: bool = True) -> None:
        super().__init__()
        self.linear, self.bits, self.momentum, self.quantize_inputs = linear, bits, momentum, quantize_inputs
        self.register_buffer("input_range", torch.zeros((), dtype=linear.weight.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        levels = max_level(self.bits)
        w = self.linear.weight
        w_hat = fake_quantize(w, _absmax(w, per_channel=True).clamp(min=1e-8) / levels, self.bits)
        if not self.quantize_inputs:
            return F.linear(x, w_hat, self.linear.bias)
        if self.training:
            current = x.detach().abs().amax()
            started = bool(self.input_range > 0)
            self.input_range.copy_(
                self.momentum * self.input_range + (1 - self.momentum) * current if started else current
            )
        x_hat = fake_quantize(x, self.input_range.clamp(min=1e-8) / levels, self.bits)
        return F.linear(x_hat, w_hat, self.linear.bias)


# ---------------------------------------------------------------- whole models


def encoder_linears(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """Every ``nn.Linear`` of the model as (parent, attribute, layer), the MLM decoder excepted (it is the
    word-embedding matrix, kept as an embedding).

    Taught in: 12_compression ("Quantization from scratch").
    """
    found = []
    for parent in model.modules():
        for name, child in parent.named_children():
            tied = child.weight is _word_embeddings(model) if isinstance(child, nn.Linear) else False
            if isinstance(child, nn.Linear) and not tied:
                found.append((parent, name, child))
    return found


def _word_embeddings(model: nn.Module) -> torch.Tensor | None:
    embeddings = getattr(getattr(model, "base_model", model), "embeddings", None)
    return None if embeddings is None else embeddings.word_embeddings.weight


def replace_linears(model: nn.Module, make) -> nn.Module:
    """The model with every linear layer of :func:`encoder_linears` replaced by ``make(layer)``, in place.

    Taught in: 12_compression ("Quantization from scratch").
    """
    for parent, name, linear in encoder_linears(model):
        setattr(parent, name, make(linear))
    return model


def torch_dynamic_int8(model: nn.Module) -> nn.Module | None:
    """A copy of the model with every ``nn.Linear`` replaced by PyTorch's own dynamic int8 layer
    (``torch.ao.quantization.quantize_dynamic``: int8 weights per tensor, activations quantized per tensor as
    they come), the reference our :class:`Int8Linear` is compared with; None where this PyTorch lacks it.

    Taught in: 12_compression ("Quantization from scratch").
    """
    quantization = getattr(getattr(torch, "ao", None), "quantization", None)
    if quantization is None or not hasattr(quantization, "quantize_dynamic"):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch 2.13 deprecates torch.ao.quantization
        return quantization.quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)


def quantize_weights_(model: nn.Module, bits: int, per_channel: bool = True) -> nn.Module:
    """Every linear layer's weight replaced, in place, by dequantize(quantize(W)) at ``bits`` (simulated:
    the arithmetic stays float, the values are exactly those the integers represent). Embeddings untouched.

    Taught in: 12_compression ("Quantization from scratch").
    """
    with torch.no_grad():
        for _, _, linear in encoder_linears(model):
            linear.weight.copy_(round_trip(linear.weight, bits, per_channel))
    return model


def weight_rounding_error(model: nn.Module, bits: int, per_channel: bool = True) -> float:
    """‖Ŵ − W‖ / ‖W‖ over every linear layer's weight (Frobenius norms of all of them together), Ŵ what
    :func:`quantize_weights_` writes at ``bits``; the model is left as it was. Exercise 2 of chapter 12 compares
    per-tensor and per-channel scales with it.
    """
    before = [layer.weight.detach().clone() for _, _, layer in encoder_linears(model)]
    after = [
        layer.weight.detach()
        for _, _, layer in encoder_linears(quantize_weights_(copy.deepcopy(model), bits, per_channel))
    ]
    error = sum(float((a - b).pow(2).sum()) for a, b in zip(after, before))
    return (error / sum(float(b.pow(2).sum()) for b in before)) ** 0.5


def model_bytes(model: nn.Module, weight_bits: int | None = None) -> int:
    """Bytes to store the model: every parameter and buffer once (tied tensors once), at its dtype's size;
    with ``weight_bits``, the linear layers' weights counted at that many bits plus a float32 scale per row.

    Taught in: 12_compression ("Quantization from scratch").
    """
    linear_weights = {id(layer.weight) for _, _, layer in encoder_linears(model)} if weight_bits else set()
    seen, total = set(), 0
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if id(tensor) in linear_weights:
            total += (tensor.numel() * weight_bits + 7) // 8 + tensor.shape[0] * 4
        else:
            total += tensor.numel() * tensor.element_size()
    return total
