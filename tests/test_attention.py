"""lecture_lib.attention against PyTorch's own scaled_dot_product_attention and nn.MultiheadAttention."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.attention import (
    MultiHeadAttention,
    additive_mask,
    attend,
    causal_mask,
    dilated_window_mask,
    global_window_mask,
    merge_heads,
    padding_mask,
    prefix_lm_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    split_heads,
)

pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def _qkv(batch=2, heads=3, length=5, source=7, d_k=8, d_v=4):
    return (
        torch.randn(batch, heads, length, d_k, requires_grad=True),
        torch.randn(batch, heads, source, d_k, requires_grad=True),
        torch.randn(batch, heads, source, d_v, requires_grad=True),
    )


def _grads(out, inputs):
    return torch.autograd.grad(out, inputs, torch.ones_like(out))


def _random_bool_mask(*shape):
    mask = torch.rand(*shape) > 0.4
    mask[..., 0] = True  # every query keeps at least one key
    return mask


@pytest.mark.parametrize(
    "make_mask",
    [
        lambda: None,
        lambda: _random_bool_mask(2, 3, 5, 7),
        lambda: _random_bool_mask(2, 1, 1, 7),  # key padding, broadcast over heads and queries
        lambda: torch.randn(2, 3, 5, 7),  # additive floats
        lambda: additive_mask(_random_bool_mask(5, 7), torch.float64),
    ],
    ids=["none", "bool", "bool-broadcast", "float", "additive-from-bool"],
)
def test_sdpa_matches_torch_outputs_and_gradients(make_mask):
    q, k, v = _qkv()
    mask = make_mask()
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs)
    for g_ours, g_theirs in zip(_grads(ours, (q, k, v)), _grads(theirs, (q, k, v))):
        torch.testing.assert_close(g_ours, g_theirs)


@pytest.mark.parametrize("need_weights", [True, False], ids=["written-out", "fused"])
@pytest.mark.parametrize("scale", [None, 1.0, 0.3], ids=["default-scale", "T5-scale-1", "scale-0.3"])
@pytest.mark.parametrize(
    "make_mask",
    [lambda: None, lambda: _random_bool_mask(2, 1, 1, 7), lambda: torch.randn(2, 3, 5, 7)],
    ids=["no-mask", "bool", "float"],
)
def test_attend_matches_torch_on_both_paths(need_weights, scale, make_mask):
    q, k, v = _qkv()
    mask = make_mask()
    # the reference reaches a custom scale through PyTorch's default one: (c·sqrt(d)·q) kᵀ / sqrt(d) = c q kᵀ
    factor = 1.0 if scale is None else scale * q.shape[-1] ** 0.5
    theirs = F.scaled_dot_product_attention(q * factor, k, v, attn_mask=mask)
    ours, weights = attend(q, k, v, mask, need_weights=need_weights, scale=scale)
    torch.testing.assert_close(ours, theirs)
    for g_ours, g_theirs in zip(_grads(ours, (q, k, v)), _grads(theirs, (q, k, v))):
        torch.testing.assert_close(g_ours, g_theirs)
    if need_weights:
        torch.testing.assert_close(weights @ v, theirs)  # no dropout: the weights give the output
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    else:
        assert weights is None


def test_attend_drops_out_on_both_paths_only_when_asked():
    q, k, v = _qkv()
    for need_weights in (True, False):
        kept, _ = attend(q, k, v, dropout_p=0.0, need_weights=need_weights)
        dropped, _ = attend(q, k, v, dropout_p=0.5, need_weights=need_weights)
        torch.testing.assert_close(kept, F.scaled_dot_product_attention(q, k, v))
        assert not torch.allclose(dropped, kept)


def test_sdpa_causal_equals_torch_is_causal():
    q, k, v = _qkv(source=5)
    ours, weights = scaled_dot_product_attention(q, k, v, causal_mask(5))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(weights.triu(1) == 0)


def test_sdpa_weights_are_the_softmax_of_scaled_scores():
    q, k, v = _qkv()
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))


def test_sdpa_dropout_statistics():
    q, k, v = _qkv()
    v = torch.ones_like(v)  # output = row sums of the dropped weights: 1/(1-p) in expectation
    outs = torch.stack([scaled_dot_product_attention(q, k, v, dropout_p=0.5)[0] for _ in range(400)])
    assert abs(outs.mean().item() - 1.0) < 0.02


@pytest.mark.parametrize(
    "args, match",
    [
        (
            (torch.randn(4), torch.randn(3, 4), torch.randn(3, 4)),
            r"expected q of shape \(..., length, dim\), got \(4,\)",
        ),
        (
            (torch.randn(2, 5, 8), torch.randn(2, 7, 6), torch.randn(2, 7, 4)),
            r"same last dim d_k.*\(2, 5, 8\).*\(2, 7, 6\)",
        ),
        (
            (torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 6, 4)),
            r"same length S.*\(2, 7, 8\).*\(2, 6, 4\)",
        ),
        ((torch.randn(2, 5, 8), torch.randn(3, 7, 8), torch.randn(3, 7, 4)), r"same leading"),
        ((torch.randn(1, 2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 4)), r"equal rank"),
        ((torch.ones(2, 5, 8, dtype=torch.long),) * 3, r"floating-point q"),
    ],
)
def test_sdpa_rejects_bad_shapes(args, match):
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(*args)


def test_sdpa_rejects_bad_masks():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"broadcastable to \(2, 3, 5, 7\), got \(2, 7\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(2, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"bool or floating-point mask, got dtype torch.int64"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 7, dtype=torch.long))


def test_split_and_merge_heads_are_inverse():
    x = torch.randn(2, 5, 12)
    assert split_heads(x, 3).shape == (2, 3, 5, 4)
    torch.testing.assert_close(merge_heads(split_heads(x, 3)), x)
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(x, 5)


# ---------------------------------------------------------------- multi-head vs nn.MultiheadAttention


def _torch_mha(bias=True):
    return nn.MultiheadAttention(16, 4, bias=bias, batch_first=True).eval()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_matches_torch_self_attention_with_padding(bias, need_weights):
    reference = _torch_mha(bias)
    ours = MultiHeadAttention.from_torch(reference)
    x = torch.randn(3, 6, 16, requires_grad=True)
    lengths = torch.tensor([6, 4, 1])
    keep = padding_mask(lengths, 6)  # (B, 1, 1, S), True = real token
    out, weights = ours(x, mask=keep, need_weights=need_weights)
    ref_out, ref_weights = reference(x, x, x, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False)
    torch.testing.assert_close(out, ref_out)
    if need_weights:
        torch.testing.assert_close(weights, ref_weights)
    else:
        assert weights is None
    dx, dq_proj = _grads(out, (x, ours.q_proj.weight))
    ref_dx, ref_in_proj = _grads(ref_out, (x, reference.in_proj_weight))
    torch.testing.assert_close(dx, ref_dx)
    torch.testing.assert_close(dq_proj, ref_in_proj[:16])  # the query third of PyTorch's stacked matrix


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_matches_torch_cross_attention_with_causal_and_padding(need_weights):
    reference = _torch_mha()
    ours = MultiHeadAttention.from_torch(reference)
    query, memory = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    keep = causal_mask(5) & padding_mask([5, 3], 5)  # (B, 1, 5, 5)
    out, weights = ours(query, memory, memory, mask=keep, need_weights=need_weights)
    ref_out, ref_weights = reference(
        query,
        memory,
        memory,
        attn_mask=~causal_mask(5),  # PyTorch's module: True = may NOT attend
        key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2]),
        average_attn_weights=False,
    )
    torch.testing.assert_close(out, ref_out)
    if need_weights:
        torch.testing.assert_close(weights, ref_weights)


def test_mha_dropout_only_in_training():
    ours = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 6, 16)
    ours.eval()
    torch.testing.assert_close(ours(x)[0], ours(x)[0])
    ours.train()
    assert not torch.allclose(ours(x)[0], ours(x)[0])


def test_mha_rejects_bad_input():
    mha = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match=r"expected query of shape \(B, T, 16\), got \(6, 16\)"):
        mha(torch.randn(6, 16))
    with pytest.raises(ValueError, match=r"expected key of shape \(B, T, 16\), got \(2, 6, 8\)"):
        mha(torch.randn(2, 6, 16), torch.randn(2, 6, 8))
    with pytest.raises(ValueError, match=r"key and value \(B, S, E\)"):
        mha(torch.randn(2, 6, 16), torch.randn(2, 6, 16), torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match=r"broadcastable to \(2, 4, 6, 6\), got \(2, 6\)"):
        mha(torch.randn(2, 6, 16), mask=torch.ones(2, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="kdim = vdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8))


# ---------------------------------------------------------------- masks, against independent constructions


def test_masks_against_loops():
    n = 9
    for i in range(n):
        for j in range(n):
            assert causal_mask(n)[i, j] == (j <= i)
            assert sliding_window_mask(n, 2)[i, j] == (abs(i - j) <= 2)
            assert dilated_window_mask(n, 2, 3)[i, j] == (abs(i - j) <= 6 and (i - j) % 3 == 0)
            assert global_window_mask(n, 1, [0, 4])[i, j] == (abs(i - j) <= 1 or i in (0, 4) or j in (0, 4))


def test_causal_mask_equals_torch_subsequent_mask():
    torch.testing.assert_close(
        additive_mask(causal_mask(6)), nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float32)
    )


def test_padding_mask_and_errors():
    assert padding_mask([2, 0], 3).shape == (2, 1, 1, 3)
    assert padding_mask([2, 0], 3)[:, 0, 0].tolist() == [[True, True, False], [False, False, False]]
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 2\]"):
        padding_mask([3], 2)
    with pytest.raises(ValueError, match=r"expected lengths of shape \(B,\)"):
        padding_mask(torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="global positions"):
        global_window_mask(4, 1, [4])
    with pytest.raises(ValueError, match="expected a bool mask"):
        additive_mask(torch.zeros(2, 2))


def test_prefix_lm_mask_by_its_definition():
    n, prefix = 7, 3
    keep = prefix_lm_mask(n, prefix)
    for i in range(n):
        for j in range(n):
            assert keep[i, j] == (j < prefix or j <= i)
    torch.testing.assert_close(prefix_lm_mask(n, 0), causal_mask(n))
    assert prefix_lm_mask(n, n).all()
    with pytest.raises(ValueError, match="prefix_len"):
        prefix_lm_mask(n, n + 1)
