"""Quantizers against their definitions; the int8 layer against float and int32 references; the STE's gradient."""

import pytest
import torch
from torch import nn

from lecture_lib.compression.quantization import (
    FakeQuantLinear,
    Int8Linear,
    binarize,
    fake_quantize,
    int8_matmul,
    model_bytes,
    quantize,
    quantize_weights_,
    replace_linears,
    round_trip,
)
from lecture_lib.models.bert import BertConfig, BertModel


def matrix(rows=48, cols=32, seed=0):
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))
    return w * torch.logspace(-2, 0, rows)[:, None]  # rows of very different ranges: where per-channel helps


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_round_trip_is_within_half_a_step(bits, per_channel):
    w = matrix()
    quantized = quantize(w, bits, per_channel)
    assert quantized.q.abs().max() <= 2 ** (bits - 1) - 1
    error = (quantized.dequantize() - w).abs()
    assert (error <= quantized.scale / 2 + 1e-7).all()
    assert (quantized.dequantize() == quantized.scale * quantized.q.float()).all()


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_per_channel_error_is_at_most_per_tensor(bits):
    w = matrix()
    per_tensor = (round_trip(w, bits) - w).pow(2).sum()
    per_channel = (round_trip(w, bits, per_channel=True) - w).pow(2).sum()
    assert per_channel <= per_tensor
    if bits >= 4:  # rows spanning two orders of magnitude: the small rows' steps are far finer
        assert per_channel < per_tensor / 4


def test_one_bit_is_sign_times_mean_absolute_value():
    w = matrix(4, 6)
    assert torch.equal(binarize(w), torch.sign(w) * w.abs().mean())
    torch.testing.assert_close(binarize(w, per_channel=True), torch.sign(w) * w.abs().mean(1, keepdim=True))
    with pytest.raises(ValueError, match="bits"):
        quantize(w, bits=1)


@pytest.mark.parametrize("shape", [(1, 64, 64), (3, 5, 7), (33, 24, 40)])
@pytest.mark.parametrize("pad", [False, True])
def test_int8_product_equals_the_int32_reference(shape, pad):
    m, k, n = shape
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-127, 128, (m, k), generator=g, dtype=torch.int8)
    b = torch.randint(-127, 128, (k, n), generator=g, dtype=torch.int8)
    product = int8_matmul(a, b, pad=pad)
    assert product.dtype == torch.int32
    assert torch.equal(product, a.to(torch.int32) @ b.to(torch.int32))
    with pytest.raises(ValueError, match="int8"):
        int8_matmul(a.float(), b)


def test_int8_linear_equals_its_quantized_float_computation():
    linear = nn.Linear(32, 24)
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))
    layer = Int8Linear(linear)
    assert layer.weight_q.dtype == torch.int8
    x_hat = round_trip(x.reshape(-1, 32), 8, per_channel=True).reshape(x.shape)
    w_hat = round_trip(linear.weight.detach(), 8, per_channel=True)
    expected = torch.nn.functional.linear(x_hat.double(), w_hat.double(), linear.bias.detach().double())
    torch.testing.assert_close(layer(x).double(), expected, atol=1e-5, rtol=1e-5)  # the integers are exact
    assert (layer(x) - linear(x)).abs().max() < 0.02  # and close to the float layer


def test_straight_through_gradient_is_one_inside_the_range_and_zero_outside():
    x = torch.linspace(-3, 3, 61, requires_grad=True)
    scale = 2.0 / 127  # clipping range ±2
    y = fake_quantize(x, scale, bits=8)
    y.backward(torch.ones_like(y))
    inside = x.detach().abs() <= 2.0
    assert torch.equal(x.grad, inside.float())
    reference = torch.fake_quantize_per_tensor_affine(x.detach(), scale, 0, -127, 127)
    torch.testing.assert_close(y.detach(), reference)


def test_fake_quant_linear_tracks_the_input_range_and_trains():
    layer = FakeQuantLinear(nn.Linear(8, 4), momentum=0.5)
    layer(torch.full((2, 8), 2.0))
    layer(torch.full((2, 8), 4.0))
    assert float(layer.input_range) == pytest.approx(3.0)
    layer.eval()
    layer(torch.full((2, 8), 100.0))
    assert float(layer.input_range) == pytest.approx(3.0)  # frozen in eval
    layer.train()
    layer(torch.randn(3, 8)).sum().backward()
    assert layer.linear.weight.grad is not None and layer.linear.weight.grad.abs().sum() > 0


def test_weight_only_fake_quant_linear_is_torch_per_channel_fake_quant_and_trains_through_it():
    linear = nn.Linear(6, 5)
    layer = FakeQuantLinear(linear, bits=2, quantize_inputs=False)
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(0))
    scale = linear.weight.detach().abs().amax(dim=1)  # 2 bits: q_max = 1, so the scale is max |w| of the row
    reference = torch.fake_quantize_per_channel_affine(
        linear.weight.detach(), scale, torch.zeros(5, dtype=torch.int32), 0, -1, 1
    )
    torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, reference, linear.bias))
    torch.testing.assert_close(layer(100 * x), torch.nn.functional.linear(100 * x, reference, linear.bias))  # float x
    assert float(layer.input_range) == 0.0  # no input range kept
    layer(x).sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


def test_quantizing_a_bert_keeps_embeddings_and_shrinks_linear_weights_fourfold():
    model = BertModel(
        BertConfig(
            vocab_size=50,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=16,
        )
    ).eval()
    ids = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(3))
    before = model(ids).last_hidden_state
    full = model_bytes(model)
    linear_weights = sum(
        p.numel()
        for n, p in model.named_parameters()
        if n.endswith("weight") and p.dim() == 2 and "embeddings" not in n
    )
    assert full - model_bytes(model, weight_bits=8) == linear_weights * 3 - 4 * (2 * (3 * 32 + 32 + 64 + 32) + 32)
    int8 = replace_linears(model, Int8Linear)
    assert model_bytes(int8) == model_bytes(model)  # buffers in int8 counted at one byte
    assert (int8(ids).last_hidden_state - before).abs().max() < 0.1
    simulated = quantize_weights_(BertModel(model.config), 4)
    assert simulated.encoder.layer[0].intermediate.dense.weight.unique().numel() <= 64 * 15


def test_per_tensor_int8_linear_equals_the_written_out_q8bert_scheme():
    """Q8BERT's symmetric per-tensor int8: one scale for W (max|W| / 127) and one for x (max|x| / 127),
    integers by round-then-clamp, the product accumulated exactly (integers below 2^24 in float64), then
    rescaled; written out element by element here for one small layer."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(5, 3)
    x = torch.randn(2, 4, 5)
    W, b = linear.weight.detach().double(), linear.bias.detach().double()
    s_w = W.abs().max() / 127
    s_x = x.double().abs().max() / 127
    q_w = [[max(-127, min(127, round(float(W[o, i] / s_w)))) for i in range(5)] for o in range(3)]
    rows = x.double().reshape(-1, 5)
    q_x = [[max(-127, min(127, round(float(rows[m, i] / s_x)))) for i in range(5)] for m in range(8)]
    reference = torch.tensor(
        [
            [sum(q_x[m][i] * q_w[o][i] for i in range(5)) * float(s_x) * float(s_w) + float(b[o]) for o in range(3)]
            for m in range(8)
        ],
        dtype=torch.float64,
    ).reshape(2, 4, 3)
    layer = Int8Linear(linear, per_channel=False)
    assert layer.weight_scale.numel() == 1 and layer.weight_q.dtype == torch.int8
    assert layer.weight_q.tolist() == q_w
    torch.testing.assert_close(layer(x).double(), reference, rtol=1e-5, atol=1e-6)
    # per channel is the default and differs on a matrix whose rows have different ranges
    linear.weight.data[0] *= 50
    assert not torch.allclose(Int8Linear(linear)(x), Int8Linear(linear, per_channel=False)(x))
