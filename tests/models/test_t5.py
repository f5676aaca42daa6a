"""lecture_lib.models.t5 against transformers' T5ForConditionalGeneration: logits, loss, gradients, greedy decoding."""

import pytest
import torch
import transformers
from torch import nn
from transformers.models.t5.modeling_t5 import T5Attention as HFT5Attention

from lecture_lib.decoding import greedy_decode
from lecture_lib.models.t5 import T5Config, T5ForConditionalGeneration, relative_position_bucket
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(
    vocab_size=61,
    d_model=32,
    d_kv=6,
    d_ff=48,
    num_layers=3,
    num_decoder_layers=2,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=12,
    dropout_rate=0.0,
)

pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def hf_pair(**config):
    hf_config = transformers.T5Config(**{**SMALL, **config}, decoder_start_token_id=0, attn_implementation="eager")
    hf = transformers.T5ForConditionalGeneration(hf_config).eval()
    return T5ForConditionalGeneration.from_hf(hf).eval(), hf


def batch(source_length=15, target_length=11):
    """Three sources and three targets, padded on the right; long enough for the logarithmic buckets (> 4)."""
    input_ids = torch.randint(2, SMALL["vocab_size"], (3, source_length))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 9:] = 0
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.randint(2, SMALL["vocab_size"], (3, target_length))
    decoder_attention_mask = torch.ones_like(labels)
    decoder_attention_mask[1, 7:] = 0
    decoder_attention_mask[2, 3:] = 0
    labels[decoder_attention_mask == 0] = -100
    return dict(
        input_ids=input_ids, attention_mask=attention_mask, labels=labels, decoder_attention_mask=decoder_attention_mask
    )


def test_buckets_equal_transformers_both_directions():
    offsets = torch.arange(-400, 401)
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (8, 12), (16, 64)):
            ours = relative_position_bucket(
                offsets, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance
            )
            theirs = HFT5Attention._relative_position_bucket(
                offsets, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance
            )
            assert torch.equal(ours, theirs)


def test_the_default_bucket_table_starts_its_last_bucket_at_91_and_113():
    offsets = torch.arange(-200, 201)
    enc = relative_position_bucket(offsets, bidirectional=True)
    dec = relative_position_bucket(offsets, bidirectional=False)
    assert offsets[enc == 15].max() == -91 and offsets[enc == 31].min() == 91 and not (enc == 16).any()
    assert offsets[dec == 31].max() == -113 and (dec[offsets >= 0] == 0).all()


@pytest.mark.parametrize("config", [dict(), dict(feed_forward_proj="gated-gelu")], ids=["relu", "gated-gelu"])
def test_t5_equals_transformers_logits_loss_and_gradients(config):
    ours, hf = hf_pair(**config)
    a, b = assert_equivalent(ours, hf, batch(), lambda out: out.loss, outputs=["logits", "encoder_last_hidden_state"])
    assert a.loss > 0


def untied_hf_pair():
    """T5 1.1 (gated GELU, an output matrix of its own) as ``transformers`` 5 holds it after loading a 1.1
    checkpoint: built tied, then untied because the checkpoint's two matrices differ."""
    hf_config = transformers.T5Config(
        **SMALL,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
        attn_implementation="eager",
    )
    hf = transformers.T5ForConditionalGeneration(hf_config).eval()
    hf.lm_head.weight = nn.Parameter(torch.randn_like(hf.shared.weight))
    assert not hf.config.scale_decoder_outputs
    return T5ForConditionalGeneration.from_hf(hf).eval(), hf


def test_t5_v1_1_untied_equals_transformers_logits_loss_and_gradients():
    ours, hf = untied_hf_pair()
    assert not ours.config.tie_word_embeddings and ours.lm_head.weight is not ours.shared.weight
    assert "lm_head.weight" not in ours.tied_keys()
    assert_equivalent(ours, hf, batch(), lambda out: out.loss, outputs=["logits", "encoder_last_hidden_state"])
    assert ours.lm_head.weight.grad is not None and not torch.equal(ours.lm_head.weight.grad, ours.shared.weight.grad)
    tied = T5ForConditionalGeneration(T5Config(**SMALL, feed_forward_proj="gated-gelu")).eval()
    tied.load_state_dict({k: v for k, v in ours.state_dict().items() if k != "lm_head.weight"}, strict=False)
    with torch.no_grad():  # the wrong model (tied, rescaled) gives other logits on the same weights
        assert not torch.allclose(tied(**batch()).logits, ours(**batch()).logits)


def test_t5_v1_1_checkpoints_load_both_ways(tmp_path):
    ours, _ = untied_hf_pair()
    inputs = batch()
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.T5ForConditionalGeneration.from_pretrained(
        tmp_path / "ours", attn_implementation="eager"
    ).eval()
    assert theirs.lm_head.weight is not theirs.shared.weight and not theirs.config.scale_decoder_outputs
    with torch.no_grad():
        torch.testing.assert_close(theirs(**inputs).logits, ours(**inputs).logits, atol=1e-10, rtol=1e-10)
        theirs.save_pretrained(tmp_path / "theirs")  # written with scale_decoder_outputs=False
        back = T5ForConditionalGeneration.from_pretrained(tmp_path / "theirs")
        assert not back.config.tie_word_embeddings
        torch.testing.assert_close(back(**inputs).logits, ours(**inputs).logits, atol=1e-10, rtol=1e-10)


def test_t5_with_explicit_decoder_inputs_equals_transformers():
    ours, hf = hf_pair()
    inputs = batch()
    inputs["decoder_input_ids"] = hf._shift_right(inputs.pop("labels"))
    assert_equivalent(ours, hf, inputs, lambda out: out.logits.pow(2).mean(), outputs=["logits"])


def test_greedy_decoding_equals_transformers_generate():
    hf = hf_pair(vocab_size=13)[1]  # a small vocabulary: the random model emits </s> (id 1) now and then
    with torch.no_grad():  # else the tied random model echoes its start token (pad) forever
        hf.shared.weight[0] = 0
        for name, p in hf.named_parameters():
            if name.endswith(("o.weight", "wo.weight")):
                p.mul_(4)  # sublayers that outweigh the embedding on the residual stream
    ours = T5ForConditionalGeneration.from_hf(hf).eval()
    src = torch.randint(2, 13, (6, 8))
    src[3, 5:] = 0
    src[4, 2:] = 0
    tokens, _ = greedy_decode(ours, src, 12, bos=0, eos=1, pad=0, banned=())
    expected = hf.generate(
        input_ids=src, attention_mask=(src != 0).long(), max_new_tokens=12, do_sample=False, num_beams=1
    )
    assert torch.equal(tokens, expected[:, 1:])  # generate's rows start with the decoder start token
    assert (tokens == 1).any() and len(set(tokens[:, 0].tolist())) > 2, "expected varied rows, one ending in </s>"


def test_round_trip_and_shapes():
    model = T5ForConditionalGeneration(T5Config(**SMALL)).to(torch.float64)
    assert_round_trip(model)
    assert model.lm_head.weight is model.shared.weight is model.encoder.embed_tokens.weight
    assert model.decoder.position_bias().weight.shape == (8, 4)
    assert not hasattr(model.encoder.block[1].layer[0].SelfAttention, "relative_attention_bias")


def test_bad_input():
    model = T5ForConditionalGeneration(T5Config(**SMALL))
    with pytest.raises(ValueError, match="decoder_input_ids or labels"):
        model(torch.tensor([[3, 4]]))
    with pytest.raises(ValueError, match="attention mask of shape"):
        model(torch.tensor([[3, 4]]), attention_mask=torch.ones(1, 3), labels=torch.tensor([[5]]))
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5Config(feed_forward_proj="swish")
    with pytest.raises(ValueError, match="is_decoder"):
        T5Config.from_dict({"model_type": "t5", "is_decoder": True})
