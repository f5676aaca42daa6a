"""lecture_lib.models.bart against transformers' BartForConditionalGeneration: logits, loss, gradients, decoding."""

import pytest
import torch
import transformers
from transformers.models.bart.modeling_bart import shift_tokens_right

from lecture_lib.decoding import greedy_decode
from lecture_lib.labels import shift_right
from lecture_lib.models.bart import BartConfig, BartForConditionalGeneration
from lecture_lib.models.transformer import DecoderLayer, EncoderLayer
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(vocab_size=61, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=20,
             dropout=0.0)

pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def hf_pair(**config):
    hf_config = transformers.BartConfig(**{**SMALL, **config}, attn_implementation="eager")
    hf = transformers.BartForConditionalGeneration(hf_config).eval()
    with torch.no_grad():
        hf.final_logits_bias.normal_()  # a buffer that is zero at initialisation: make it count
        for name, p in hf.named_parameters():
            if "layer_norm" in name or "layernorm" in name:
                p.normal_(mean=float(name.endswith("weight")), std=0.1)  # LayerNorms away from identity
    return BartForConditionalGeneration.from_hf(hf).eval(), hf


def batch(source_length=12, target_length=9):
    input_ids = torch.randint(3, SMALL["vocab_size"], (3, source_length))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 8:] = 0
    attention_mask[2, 3:] = 0
    input_ids[attention_mask == 0] = 1
    labels = torch.randint(3, SMALL["vocab_size"], (3, target_length))
    decoder_attention_mask = torch.ones_like(labels)
    decoder_attention_mask[1, 6:] = 0
    decoder_attention_mask[2, 2:] = 0
    labels[decoder_attention_mask == 0] = -100
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                decoder_attention_mask=decoder_attention_mask)


@pytest.mark.parametrize("config", [dict(), dict(scale_embedding=True, activation_function="relu")],
                         ids=["bart", "scaled-relu"])
def test_bart_equals_transformers_logits_loss_and_gradients(config):
    ours, hf = hf_pair(**config)
    a, _ = assert_equivalent(ours, hf, batch(), lambda out: out.loss, outputs=["logits", "encoder_last_hidden_state"])
    assert a.loss > 0


def test_the_stacks_are_chapter_02s_layers():
    model = BartForConditionalGeneration(BartConfig(**SMALL))
    assert all(type(layer) is EncoderLayer for layer in model.model.encoder.layers)
    assert all(type(layer) is DecoderLayer for layer in model.model.decoder.layers)
    assert model.model.encoder.layer_norm is None and not model.model.encoder.layers[0].norm_first
    assert model.model.encoder.embed_positions.weight.shape == (22, 32)  # 20 positions + the offset of 2


def test_shift_right_equals_transformers():
    labels = batch()["labels"]
    assert torch.equal(shift_right(labels, start=2, pad=1), shift_tokens_right(labels, 1, 2))


def test_positions_ignore_padding_as_transformers_does():
    """Left padding shifts BART's positions (no cumsum as in RoBERTa): the same text, padded on the left, differs."""
    ours, hf = hf_pair()
    right = torch.tensor([[5, 6, 7, 1]])
    left = torch.tensor([[1, 5, 6, 7]])
    dec = torch.tensor([[2, 9]])
    a = ours(right, (right != 1).long(), dec).logits
    b = ours(left, (left != 1).long(), dec).logits
    torch.testing.assert_close(b, hf(left, (left != 1).long(), dec).logits)
    assert not torch.allclose(a, b)


def test_greedy_decoding_equals_transformers_generate():
    hf = hf_pair(vocab_size=13)[1]
    with torch.no_grad():  # logits as large as tokens' embeddings, and a start token (</s>) that is not echoed
        hf.final_logits_bias.zero_()
        hf.model.shared.weight.normal_()
        hf.model.shared.weight[2].mul_(0.3)
    ours = BartForConditionalGeneration.from_hf(hf).eval()
    src = torch.randint(3, 13, (6, 8))
    src[3, 5:] = 1
    src[4, 2:] = 1
    tokens, _ = greedy_decode(ours, src, 10, bos=2, eos=2, pad=1, banned=())
    expected = hf.generate(input_ids=src, attention_mask=(src != 1).long(), max_new_tokens=10, do_sample=False,
                           num_beams=1, forced_eos_token_id=None, forced_bos_token_id=None)
    assert torch.equal(tokens, expected[:, 1:])  # generate's rows start with the decoder start token
    assert tokens.shape[1] == 10 and (tokens != 2).all()


def test_round_trip_and_bad_input():
    model = BartForConditionalGeneration(BartConfig(**SMALL)).to(torch.float64)
    assert_round_trip(model)
    assert model.lm_head.weight is model.model.shared.weight is model.model.decoder.embed_tokens.weight
    with pytest.raises(ValueError, match="equal heads and ffn_dim"):
        BartConfig(**{**SMALL, "decoder_ffn_dim": 64})
    with pytest.raises(ValueError, match="attention mask of shape"):
        model(torch.tensor([[3, 4]]), attention_mask=torch.ones(1, 3), labels=torch.tensor([[5]]))
    with pytest.raises(ValueError, match="decoder_input_ids or labels"):
        model(torch.tensor([[3, 4]]))
