"""lecture_lib.models.transformer against torch.nn.Transformer, Hugging Face's sinusoidal table, and worked-out facts."""

import math

import pytest
import torch
from torch import nn
from transformers.models.marian.modeling_marian import (
    MarianSinusoidalPositionalEmbedding,
)

from lecture_lib.attention import causal_mask, padding_mask
from lecture_lib.data.toy import PAD
from lecture_lib.models.transformer import (
    EncoderLayer,
    LearnedPositionEmbedding,
    SinusoidalPositionEmbedding,
    Transformer,
    TransformerConfig,
    sinusoidal_position_encoding,
    token_padding_mask,
)

VOCAB = 11


def _tiny_config(**overrides):
    base = dict(
        vocab_size=VOCAB,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        num_attention_heads=4,
        ffn_dim=24,
        max_position_embeddings=12,
    )
    return TransformerConfig(**{**base, **overrides})


# ---------------------------------------------------------------- positions


def test_sinusoidal_matches_the_formula_element_by_element():
    pe = sinusoidal_position_encoding(20, 512, dtype=torch.float64)
    assert pe.shape == (20, 512)
    for pos in (0, 1, 7, 19):
        for i in (0, 1, 100, 255):
            angle = pos / 10000 ** (2 * i / 512)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    assert pe[0, 0::2].eq(0).all() and pe[0, 1::2].eq(1).all()
    assert pe.abs().max() <= 1


def test_sinusoidal_matches_marian_up_to_column_order():
    # Hugging Face's Marian puts all the sines first and all the cosines second
    theirs = MarianSinusoidalPositionalEmbedding(50, 64).create_weight()
    ours = sinusoidal_position_encoding(50, 64, dtype=torch.float32)
    torch.testing.assert_close(ours[:, 0::2], theirs[:, :32])
    torch.testing.assert_close(ours[:, 1::2], theirs[:, 32:])


def test_sinusoidal_dot_products_depend_only_on_the_offset():
    pe = sinusoidal_position_encoding(64, 32, dtype=torch.float64)
    gram = pe @ pe.T  # PE(p)·PE(q) = sum_i cos((p - q) w_i)
    for offset in (1, 5, 17):
        diagonal = gram.diagonal(offset)
        torch.testing.assert_close(diagonal, diagonal[0].expand_as(diagonal))


def test_position_modules_and_length_errors():
    sin = SinusoidalPositionEmbedding(10, 8)
    torch.testing.assert_close(sin(4), sinusoidal_position_encoding(10, 8)[:4])
    assert not any(True for _ in sin.parameters())  # fixed, nothing to train
    learned = LearnedPositionEmbedding(10, 8)
    learned(3).sum().backward()
    assert learned.weight.grad[:3].abs().sum() > 0 and learned.weight.grad[3:].eq(0).all()
    for module in (sin, learned):
        with pytest.raises(ValueError, match=r"sequence length in \[1, 10\].*got 11"):
            module(11)
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_position_encoding(4, 5)


def test_self_attention_is_permutation_equivariant_until_positions_are_added():
    torch.manual_seed(0)
    layer = EncoderLayer(_tiny_config()).eval()
    x, perm = torch.randn(2, 7, 16), torch.randperm(7)
    torch.testing.assert_close(layer(x[:, perm])[0], layer(x)[0][:, perm])
    model = Transformer(_tiny_config()).eval()
    src = torch.tensor([[3, 4, 5, 6, 7, 8, 9]])
    memory, _ = model.encode(src)
    permuted_memory, _ = model.encode(src[:, perm])
    assert not torch.allclose(permuted_memory, memory[:, perm], atol=1e-3)


# ---------------------------------------------------------------- equivalence with torch.nn.Transformer


def _torch_pair(norm_first=False, activation="relu"):
    torch.manual_seed(0)
    reference = nn.Transformer(
        d_model=16,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=24,
        dropout=0.1,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    ).eval()
    with torch.no_grad():  # every weight distinct, LayerNorms included (PyTorch starts them all at 1 and 0)
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return reference, Transformer.from_torch(reference, VOCAB).eval()


def _their_name_to_ours(name):
    """Parameter name in torch.nn.Transformer -> the list of our parameter names it holds (stacked)."""
    parts = name.split(".")
    if parts[1] == "norm":
        return [f"{parts[0]}.layer_norm.{parts[2]}"]
    stack, index, module, rest = parts[0], parts[2], parts[3], parts[4:]
    prefix = f"{stack}.layers.{index}"
    if module in ("self_attn", "multihead_attn"):
        ours = "self_attn" if module == "self_attn" else "encoder_attn"
        if rest[0] == "out_proj":
            return [f"{prefix}.{ours}.out_proj.{rest[1]}"]
        kind = "weight" if rest[0] == "in_proj_weight" else "bias"
        return [f"{prefix}.{ours}.{p}_proj.{kind}" for p in "qkv"]
    norms = {
        "norm1": "self_attn_layer_norm",
        "norm2": "ffn_layer_norm" if stack == "encoder" else "encoder_attn_layer_norm",
        "norm3": "ffn_layer_norm",
    }
    renamed = {"linear1": "ffn.fc1", "linear2": "ffn.fc2", **norms}[module]
    return [f"{prefix}.{renamed}.{rest[0]}"]


def _torch_masks(src_lengths, tgt_lengths, s, t):
    src_keep = padding_mask(src_lengths, s)[:, 0, 0]  # (B, S)
    tgt_keep = padding_mask(tgt_lengths, t)[:, 0, 0]  # (B, T)
    # PyTorch's convention is the opposite of ours: True = may NOT attend
    return dict(
        src_key_padding_mask=~src_keep,
        tgt_mask=~causal_mask(t),
        tgt_key_padding_mask=~tgt_keep,
        memory_key_padding_mask=~src_keep,
    )


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's note on its inference fast path
@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (False, "gelu"), (True, "relu")])
def test_stacks_match_torch_transformer_outputs_and_gradients(norm_first, activation):
    reference, ours = _torch_pair(norm_first, activation)
    assert ours.config.norm_first == norm_first and ours.config.activation_function == activation
    src_lengths, tgt_lengths = torch.tensor([5, 3, 1]), torch.tensor([4, 2, 3])
    x_src = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
    x_tgt = torch.randn(3, 4, 16, dtype=torch.float64, requires_grad=True)

    src_mask = padding_mask(src_lengths, 5)  # (B, 1, 1, S)
    memory = ours.encoder(x_src, src_mask).last_hidden_state
    out = ours.decoder(x_tgt, memory, causal_mask(4) & padding_mask(tgt_lengths, 4), src_mask).last_hidden_state
    ref_out = reference(x_src, x_tgt, **_torch_masks(src_lengths, tgt_lengths, 5, 4))
    torch.testing.assert_close(out, ref_out)

    weights = torch.randn_like(out)
    ours_named = dict(ours.named_parameters())
    ours_grads = torch.autograd.grad((out * weights).sum(), [x_src, x_tgt, *ours_named.values()], allow_unused=True)
    ref_named = dict(reference.named_parameters())
    ref_grads = torch.autograd.grad((ref_out * weights).sum(), [x_src, x_tgt, *ref_named.values()])
    torch.testing.assert_close(ours_grads[0], ref_grads[0])
    torch.testing.assert_close(ours_grads[1], ref_grads[1])
    ours_grad = dict(zip(ours_named, ours_grads[2:]))
    for name, grad in zip(ref_named, ref_grads[2:]):  # every one of PyTorch's parameters is checked
        torch.testing.assert_close(torch.cat([ours_grad[n] for n in _their_name_to_ours(name)]), grad, msg=name)


def test_full_model_masks_from_tokens_match_torch_key_padding_masks():
    reference, ours = _torch_pair()
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, PAD, PAD], [5, PAD, PAD, PAD, PAD]])
    tgt = torch.tensor([[1, 7, 6, 5], [1, 10, PAD, PAD], [1, 5, 4, PAD]])
    logits = ours(src, tgt).logits  # masks built from the PAD tokens
    embedded_src, embedded_tgt = ours.embed(src, ours.encoder_positions), ours.embed(tgt, ours.decoder_positions)
    masks = _torch_masks(torch.tensor([5, 3, 1]), torch.tensor([4, 2, 3]), 5, 4)
    torch.testing.assert_close(logits, ours.lm_head(reference(embedded_src, embedded_tgt, **masks)))


def test_need_weights_path_agrees_and_weights_are_distributions():
    _, ours = _torch_pair()
    src = torch.tensor([[3, 4, 5], [6, 7, PAD]])
    tgt = torch.tensor([[1, 5, 4], [1, 7, 6]])
    plain, with_weights = ours(src, tgt), ours(src, tgt, need_weights=True)
    torch.testing.assert_close(plain.logits, with_weights.logits)
    assert len(with_weights.cross_attentions) == 2 and with_weights.cross_attentions[0].shape == (2, 4, 3, 3)
    for cross in with_weights.cross_attentions:
        torch.testing.assert_close(cross.sum(-1), torch.ones(2, 4, 3, dtype=torch.float64))
        assert cross[1, :, :, 2].eq(0).all()  # nobody attends to the padded source position
    assert with_weights.decoder_attentions[0].triu(1).eq(0).all()  # causal


def test_decoder_is_causal_and_ignores_padding():
    torch.manual_seed(0)
    model = Transformer(_tiny_config()).eval()
    src, tgt = torch.tensor([[3, 4, 5, 6]]), torch.tensor([[1, 5, 6, 7, 8]])
    logits = model(src, tgt).logits
    changed = model(src, torch.tensor([[1, 5, 6, 9, 8]])).logits
    torch.testing.assert_close(changed[:, :3], logits[:, :3])  # positions before the change see nothing of it
    assert not torch.allclose(changed[:, 3:], logits[:, 3:])
    padded = model(torch.tensor([[3, 4, 5, 6, PAD, PAD]]), torch.tensor([[1, 5, 6, 7, 8, PAD]])).logits
    torch.testing.assert_close(padded[:, :5], logits, atol=1e-5, rtol=1e-5)


def test_tied_embeddings_and_learned_positions():
    model = Transformer(_tiny_config(position_embedding_type="learned"))
    assert model.lm_head.weight is model.embed_tokens.weight
    names = {n for n, _ in model.named_parameters()}
    assert {"encoder_positions.weight", "decoder_positions.weight"} <= names
    untied = Transformer(_tiny_config(tie_word_embeddings=False))
    assert untied.lm_head.weight is not untied.embed_tokens.weight


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_bad_input_raises():
    with pytest.raises(ValueError, match="not divisible by num_attention_heads 3"):
        _tiny_config(num_attention_heads=3)
    with pytest.raises(
        ValueError, match="activation_function: expected one of gelu, gelu_new, gelu_pytorch_tanh, relu, got 'tanh'"
    ):
        _tiny_config(activation_function="tanh")
    with pytest.raises(ValueError, match="position_embedding_type: expected one of sinusoidal, learned, got 'rotary'"):
        _tiny_config(position_embedding_type="rotary")
    with pytest.raises(ValueError, match=r"expected eos_token_id in \[0, 2\)"):
        _tiny_config(vocab_size=2)
    with pytest.raises(ValueError, match="right-padded"):
        token_padding_mask(torch.tensor([[PAD, 3, 4]]), PAD)
    with pytest.raises(ValueError, match="all-padding row"):
        token_padding_mask(torch.tensor([[3, 4], [PAD, PAD]]), PAD)
    with pytest.raises(ValueError, match=r"shape \(B, T\) and dtype torch.int64, got \(3,\)"):
        token_padding_mask(torch.tensor([3, 4, 5]), PAD)
    with pytest.raises(TypeError, match="expected a torch.nn.Transformer, got Linear"):
        Transformer.from_torch(nn.Linear(2, 2), VOCAB)
    with pytest.raises(ValueError, match="batch_first=True"):
        Transformer.from_torch(nn.Transformer(16, 4, 1, 1, 24), VOCAB)
    model = Transformer(_tiny_config())
    with pytest.raises(ValueError, match=r"sequence length in \[1, 12\]"):
        model(torch.full((1, 13), 3), torch.tensor([[1]]))


# ---------------------------------------------------------------- training
