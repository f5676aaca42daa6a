"""lecture_lib.models.roberta against transformers' RobertaModel, RobertaForMaskedLM and RobertaForSequenceClassification."""

import json

import pytest
import torch
import transformers

from lecture_lib.models.hf import read_weights
from lecture_lib.models.roberta import (
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaForSequenceClassification,
    RobertaModel,
    position_ids_after_padding,
)
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=14,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    hidden_act="gelu_new",
)  # gelu_new in the layers, so the LM head's fixed exact GELU is tested apart
PAD = SMALL["pad_token_id"]

pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def ragged(side, batch=4, length=9):
    """<s> ... </s> rows of 9, 6, 4 and 1+2 real tokens, padded on ``side``; no pad id among the real tokens."""
    g = torch.Generator().manual_seed(3)
    input_ids = torch.randint(3, SMALL["vocab_size"], (batch, length), generator=g)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    for row, real in enumerate((9, 6, 4, 3)):
        pads = slice(real, None) if side == "right" else slice(0, length - real)
        attention_mask[row, pads] = 0
    input_ids[attention_mask == 0] = PAD
    return dict(input_ids=input_ids, attention_mask=attention_mask)


def hf_pair(cls_ours, name, **config):
    torch.manual_seed(0)
    hf = getattr(transformers, name)(
        transformers.RobertaConfig(**{**SMALL, **config}, attn_implementation="eager")
    ).eval()
    with torch.no_grad():  # random, not initial, weights: biases and LayerNorms away from 0 and 1
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return cls_ours.from_hf(hf).eval(), hf


def mlm_labels(batch):
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 8]] = torch.tensor([5, 6, 7])
    labels[1, 2] = 11
    labels[2, 3] = 40
    labels[3, 8] = 13
    return labels


@pytest.mark.parametrize("side", ["right", "left"])
def test_roberta_model_equals_transformers(side):
    ours, hf = hf_pair(RobertaModel, "RobertaModel")
    batch = dict(ragged(side), output_hidden_states=True, output_attentions=True)
    a, _ = assert_equivalent(
        ours,
        hf,
        batch,
        lambda out: out.last_hidden_state.sum() + out.pooler_output.sum(),
        outputs=["last_hidden_state", "pooler_output", "hidden_states", "attentions"],
    )
    assert len(a.hidden_states) == 3


@pytest.mark.parametrize("side", ["right", "left"])
def test_roberta_for_masked_lm_equals_transformers(side):
    ours, hf = hf_pair(RobertaForMaskedLM, "RobertaForMaskedLM")
    batch = ragged(side)
    batch = dict(batch, labels=mlm_labels(batch))
    assert_equivalent(ours, hf, batch, lambda out: out.loss, outputs=["logits"])
    assert not any(k.startswith("roberta.pooler") for k in ours.state_dict())
    assert ours.lm_head.decoder.weight is ours.roberta.embeddings.word_embeddings.weight


@pytest.mark.parametrize("num_labels", [1, 3])
def test_roberta_for_sequence_classification_equals_transformers(num_labels):
    ours, hf = hf_pair(RobertaForSequenceClassification, "RobertaForSequenceClassification", num_labels=num_labels)
    labels = torch.tensor([0.5, -1.0, 2.0, 0.0]) if num_labels == 1 else torch.tensor([2, 0, 1, 1])
    assert_equivalent(ours, hf, dict(ragged("left"), labels=labels), lambda out: out.loss, outputs=["logits"])
    assert not any(k.startswith("roberta.pooler") for k in ours.state_dict())


def test_positions_start_after_the_padding_index_on_either_side():
    right, left = ragged("right")["input_ids"], ragged("left")["input_ids"]
    hf_rule = transformers.models.roberta.modeling_roberta.RobertaEmbeddings.create_position_ids_from_input_ids
    for ids in (right, left):
        assert torch.equal(position_ids_after_padding(ids, PAD), hf_rule(ids, PAD))
    assert position_ids_after_padding(left, PAD)[2].tolist() == [1] * 5 + [2, 3, 4, 5]
    # an unpadded row is arange shifted by pad + 1; with left padding, arange would be wrong
    assert torch.equal(position_ids_after_padding(right[:1], PAD)[0], torch.arange(9) + PAD + 1)


def test_the_padding_rows_get_no_gradient():
    model = RobertaForMaskedLM(RobertaConfig(**SMALL))
    embeddings = model.roberta.embeddings
    assert embeddings.position_embeddings.weight[PAD].abs().sum() == 0
    batch = ragged("left")
    model(**batch, labels=mlm_labels(batch)).loss.backward()
    assert embeddings.position_embeddings.weight.grad[PAD].abs().sum() == 0
    assert embeddings.position_embeddings.weight.grad[2].abs().sum() > 0


def test_unpadded_run_equals_the_padded_one():
    model = RobertaModel(RobertaConfig(**SMALL)).eval()
    batch = ragged("right")
    padded = model(**batch).last_hidden_state
    packed = model(**batch, unpad=True).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(packed[real], padded[real])


def test_masked_only_gives_the_same_loss():
    model = RobertaForMaskedLM(RobertaConfig(**SMALL)).eval()
    batch = ragged("right")
    labels = mlm_labels(batch)
    dense, sparse = model(**batch, labels=labels), model(**batch, labels=labels, masked_only=True)
    torch.testing.assert_close(sparse.loss, dense.loss)
    torch.testing.assert_close(sparse.logits, dense.logits[labels != -100])


def test_defaults_are_roberta_base_and_differ_from_transformers_defaults():
    ours = RobertaConfig()
    assert (
        ours.vocab_size,
        ours.max_position_embeddings,
        ours.type_vocab_size,
        ours.layer_norm_eps,
        ours.max_length,
    ) == (50265, 514, 1, 1e-5, 512)
    theirs = transformers.RobertaConfig()
    assert (theirs.max_position_embeddings, theirs.type_vocab_size) == (512, 2)  # the trap from_hf avoids
    assert RobertaConfig.from_hf(theirs).max_position_embeddings == 512
    with torch.device("meta"):
        count = sum(p.numel() for p in RobertaForMaskedLM(ours).parameters())
        hf = transformers.RobertaForMaskedLM(ours.to_hf())
    assert count == sum(p.numel() for p in hf.parameters())
    # byte-level BPE's 50,265 units against BERT's 30,522: the paper's "about 15M" more parameters in BERT-base
    assert (ours.vocab_size - 30522) * ours.hidden_size == 15_162_624


def test_round_trip_through_disk(tmp_path):
    model = RobertaForMaskedLM(RobertaConfig(**SMALL))
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["RobertaForMaskedLM"] and config["model_type"] == "roberta"
    theirs = transformers.RobertaForMaskedLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    back = RobertaForMaskedLM.from_pretrained(tmp_path)
    encoder = RobertaModel(RobertaConfig(**SMALL), add_pooling_layer=False).eval()
    encoder.load_hf_state_dict(read_weights(tmp_path))  # a masked-LM checkpoint feeds the bare encoder too
    batch = ragged("left")
    expected = model.eval()(**batch).logits
    torch.testing.assert_close(back(**batch).logits, expected)
    torch.testing.assert_close(theirs(**batch).logits, expected)
    torch.testing.assert_close(encoder(**batch).last_hidden_state, model.roberta(**batch).last_hidden_state)
    assert_round_trip(back, theirs)


def test_bad_inputs_raise():
    model = RobertaModel(RobertaConfig(**SMALL))
    with pytest.raises(ValueError, match="exceeds the 12 positions after the padding index"):
        model(torch.full((1, 13), 5))
    with pytest.raises(ValueError, match="expected a config with model_type 'roberta', got 'bert'"):
        RobertaConfig.from_dict({**SMALL, "model_type": "bert"})
    with pytest.raises(TypeError, match="expected a transformers RobertaModel, got BertModel"):
        RobertaModel.from_hf(transformers.BertModel(transformers.BertConfig(**SMALL)))


def test_a_classifier_starts_from_a_pretrained_encoder():
    encoder = RobertaForMaskedLM(RobertaConfig(**SMALL)).roberta
    head = RobertaForSequenceClassification.from_encoder(encoder, num_labels=3, dropout=0.0).eval()
    for name, value in encoder.state_dict().items():
        assert torch.equal(head.roberta.state_dict()[name], value), name
    assert head.config.hidden_dropout_prob == 0.0 and head.classifier.out_proj.out_features == 3
    logits = head(**ragged("left")).logits
    assert logits.shape == (4, 3)
