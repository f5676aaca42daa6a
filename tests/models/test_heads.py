"""lecture_lib.models.heads against transformers' classes of the same names, on random weights: logits, loss, gradients."""

import pytest
import torch
import transformers

from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from tests.hf_equivalence import assert_equivalent

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=40,
    type_vocab_size=2,
)


def _hf(name, **config):
    torch.manual_seed(0)
    hf_config = transformers.BertConfig(**SMALL, attn_implementation="eager", **config)
    model = getattr(transformers, name)(hf_config).double().eval()
    with torch.no_grad():  # random, not initial, weights: biases and LayerNorms away from 0 and 1
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _inputs(batch=3, length=9):
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, SMALL["vocab_size"], (batch, length), generator=g)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[0, 6:] = 0
    attention_mask[2, 4:] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, 3:] = 1
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def _assert_same(ours, theirs, label_args, outputs):
    assert_equivalent(ours, theirs, {**_inputs(), **label_args}, lambda out: out.loss, outputs=outputs)


@pytest.mark.parametrize("num_labels", [1, 3])
def test_sequence_classification_equals_transformers(num_labels):
    hf = _hf("BertForSequenceClassification", num_labels=num_labels)
    ours = BertForSequenceClassification.from_hf(hf)
    labels = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64) if num_labels == 1 else torch.tensor([2, 0, 1])
    _assert_same(ours, hf, {"labels": labels}, ["logits"])
    back = ours.to_hf()  # and ours -> transformers gives the same logits again
    torch.testing.assert_close(back(**_inputs()).logits, hf(**_inputs()).logits)


def test_token_classification_equals_transformers():
    hf = _hf("BertForTokenClassification", num_labels=7)
    ours = BertForTokenClassification.from_hf(hf)
    labels = torch.randint(0, 7, (3, 9), generator=torch.Generator().manual_seed(2))
    labels[:, 0] = -100
    labels[0, 6:] = -100
    _assert_same(ours, hf, {"labels": labels}, ["logits"])
    assert not any(k.startswith("bert.pooler") for k in ours.state_dict())  # as add_pooling_layer=False


def test_question_answering_equals_transformers():
    hf = _hf("BertForQuestionAnswering")
    ours = BertForQuestionAnswering.from_hf(hf)
    labels = {"start_positions": torch.tensor([4, 3, 1]), "end_positions": torch.tensor([5, 8, 2])}
    _assert_same(ours, hf, labels, ["start_logits", "end_logits"])
    torch.testing.assert_close(ours.to_hf()(**_inputs()).end_logits, hf(**_inputs()).end_logits)


def test_multiple_choice_equals_transformers():
    hf = _hf("BertForMultipleChoice")
    ours = BertForMultipleChoice.from_hf(hf)
    inputs = {k: torch.stack([v, v.roll(1, 0)], dim=1) for k, v in _inputs().items()}  # (3, 2 choices, 9)
    inputs["labels"] = torch.tensor([1, 0, 1])
    out, _ = assert_equivalent(ours, hf, inputs, lambda out: out.loss, outputs=["logits"])
    assert out.logits.shape == (3, 2)
    with pytest.raises(ValueError, match=r"expected input_ids of shape \(batch, choices, length\), got \(3, 9\)"):
        ours(**_inputs())


def test_to_hf_from_a_fresh_head_round_trips():
    torch.manual_seed(3)
    ours = BertForTokenClassification(BertConfig(**SMALL), num_labels=5).double().eval()
    again = BertForTokenClassification.from_hf(ours.to_hf())
    torch.testing.assert_close(again(**_inputs()).logits, ours(**_inputs()).logits)


def test_from_encoder_copies_the_encoder_and_leaves_it_untouched():
    torch.manual_seed(4)
    encoder = BertModel(BertConfig(**SMALL)).eval()
    head = BertForQuestionAnswering.from_encoder(encoder).eval()
    inputs = _inputs()
    torch.testing.assert_close(head.base_model(**inputs).last_hidden_state, encoder(**inputs).last_hidden_state)
    with torch.no_grad():
        head.base_model.embeddings.word_embeddings.weight.add_(1.0)
    assert encoder.pooler.dense.weight.shape == (32, 32)  # the original keeps its pooler
    assert not torch.equal(head.base_model.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    classifier = BertForSequenceClassification.from_encoder(encoder, num_labels=3)
    torch.testing.assert_close(classifier.base_model.pooler.dense.weight, encoder.pooler.dense.weight)


def test_bad_labels_get_clear_errors():
    torch.manual_seed(5)
    config = BertConfig(**SMALL)
    inputs = _inputs()
    with pytest.raises(ValueError, match=r"labels \[3\] are outside the label set 0..2"):
        BertForSequenceClassification(config, num_labels=3)(**inputs, labels=torch.tensor([0, 3, 1]))
    with pytest.raises(ValueError, match=r"labels \[7, 9\] are outside the label set 0..6"):
        labels = torch.zeros(3, 9, dtype=torch.long)
        labels[0, 1], labels[1, 2] = 9, 7
        BertForTokenClassification(config, num_labels=7)(**inputs, labels=labels)
    with pytest.raises(ValueError, match="expected integer class labels"):
        BertForSequenceClassification(config, num_labels=3)(**inputs, labels=torch.tensor([0.0, 1.0, 2.0]))
    qa = BertForQuestionAnswering(config)
    with pytest.raises(ValueError, match=r"end_positions \[5, 9, 2\] must lie inside the sequence \[0, 9\)"):
        qa(**inputs, start_positions=torch.tensor([4, 3, 1]), end_positions=torch.tensor([5, 9, 2]))
    with pytest.raises(ValueError, match="expected num_labels=2"):
        BertForQuestionAnswering(config, num_labels=3)
    with pytest.raises(TypeError, match="expected a transformers BertForTokenClassification"):
        BertForTokenClassification.from_hf(_hf("BertForSequenceClassification"))
