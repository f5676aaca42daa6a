"""lecture_lib.models.bart against transformers' BartForConditionalGeneration: logits, loss, gradients, decoding."""

import pytest
import torch
import transformers
from transformers.models.bart.modeling_bart import shift_tokens_right

from lecture_lib.decoding import greedy_decode
from lecture_lib.labels import shift_right
from lecture_lib.models.bart import BartConfig, BartForConditionalGeneration, BartForSequenceClassification
from lecture_lib.models.transformer import DecoderLayer, EncoderLayer
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(
    vocab_size=61,
    d_model=32,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=48,
    decoder_ffn_dim=48,
    max_position_embeddings=20,
    dropout=0.0,
)

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
    return dict(
        input_ids=input_ids, attention_mask=attention_mask, labels=labels, decoder_attention_mask=decoder_attention_mask
    )


@pytest.mark.parametrize(
    "config", [dict(), dict(scale_embedding=True, activation_function="relu")], ids=["bart", "scaled-relu"]
)
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
    expected = hf.generate(
        input_ids=src,
        attention_mask=(src != 1).long(),
        max_new_tokens=10,
        do_sample=False,
        num_beams=1,
        forced_eos_token_id=None,
        forced_bos_token_id=None,
    )
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


def classification_batch():
    """Three rows of bos, words, </s>, right-padded; one </s> each (the last is what the head reads)."""
    input_ids = torch.randint(3, SMALL["vocab_size"], (3, 10))
    input_ids[:, 0] = 0
    for row, length in enumerate((10, 7, 4)):
        input_ids[row, length - 1] = 2
        input_ids[row, length:] = 1
    return dict(input_ids=input_ids, attention_mask=(input_ids != 1).long(), labels=torch.tensor([0, 2, 1]))


def test_classification_from_the_last_eos_equals_transformers():
    hf_config = transformers.BartConfig(**SMALL, num_labels=3, attn_implementation="eager")
    hf = transformers.BartForSequenceClassification(hf_config).eval()
    ours = BartForSequenceClassification.from_hf(hf).eval()
    assert ours.num_labels == 3
    inputs = classification_batch()
    a, _ = assert_equivalent(ours, hf, inputs, lambda out: out.loss, outputs=["logits"])
    assert a.logits.shape == (3, 3)
    with torch.no_grad():  # the state at the last </s>, not at the first token or at the end of the padded row
        states = ours.model.decoder(
            shift_right(inputs["input_ids"], start=2, pad=1),
            None,
            ours.model.encoder(inputs["input_ids"], inputs["attention_mask"]),
            inputs["attention_mask"],
        )
        at_eos = states[torch.arange(3), torch.tensor([9, 6, 3])]
        torch.testing.assert_close(ours.classification_head(at_eos), a.logits)
        assert not torch.allclose(ours.classification_head(states[:, -1]), a.logits)


def test_classification_needs_one_eos_count():
    model = BartForSequenceClassification(BartConfig(**SMALL))
    with pytest.raises(ValueError, match="same number of </s>"):
        model(torch.tensor([[0, 5, 2], [0, 2, 2]]))
    with pytest.raises(ValueError, match="same number of </s>"):
        model(torch.tensor([[0, 5, 6]]))


def test_t5_small_and_bart_base_parameter_counts_on_the_meta_device():
    """t5-small 60,506,624 and bart-base 139,420,416 parameters (tied matrices once), as transformers counts them."""
    from lecture_lib.models.t5 import T5Config, T5ForConditionalGeneration

    def count(model):
        return sum(p.numel() for p in model.parameters())

    with torch.device("meta"):
        ours = {
            "t5-small": T5ForConditionalGeneration(T5Config()),
            "bart-base": BartForConditionalGeneration(BartConfig()),
        }
        theirs = {
            "t5-small": transformers.T5ForConditionalGeneration(transformers.T5Config()),
            "bart-base": transformers.BartForConditionalGeneration(BartConfig().to_hf()),
        }
    assert {name: count(m) for name, m in ours.items()} == {"t5-small": 60_506_624, "bart-base": 139_420_416}
    assert {name: count(m) for name, m in theirs.items()} == {name: count(m) for name, m in ours.items()}
