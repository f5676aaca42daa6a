"""lecture_lib.models.distilbert against transformers' DistilBertModel, DistilBertForMaskedLM,
DistilBertForSequenceClassification and DistilBertForTokenClassification, and the BERT -> DistilBERT
initialisation."""

import pytest
import torch
import transformers

from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.distilbert import (
    DistilBertConfig,
    DistilBertForMaskedLM,
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    DistilBertModel,
    distilbert_config,
    distilbert_from_bert,
    sinusoidal_positions,
    student_layers,
)
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(
    vocab_size=97,
    dim=32,
    n_layers=2,
    n_heads=4,
    hidden_dim=48,
    max_position_embeddings=14,
    activation="gelu",
    pad_token_id=0,
)

pytestmark = pytest.mark.usefixtures("float64")


def batch(length=9):
    """Rows of 9, 6, 4 and 3 real tokens, right-padded; no pad id among the real tokens."""
    g = torch.Generator().manual_seed(3)
    input_ids = torch.randint(1, SMALL["vocab_size"], (4, length), generator=g)
    attention_mask = torch.ones(4, length, dtype=torch.long)
    for row, real in enumerate((9, 6, 4, 3)):
        attention_mask[row, real:] = 0
    input_ids[attention_mask == 0] = 0
    return dict(input_ids=input_ids, attention_mask=attention_mask)


def hf_pair(cls_ours, name, **config):
    torch.manual_seed(0)
    hf = getattr(transformers, name)(
        transformers.DistilBertConfig(**{**SMALL, **config}, attn_implementation="eager")
    ).eval()
    with torch.no_grad():  # random, not initial, weights: biases and LayerNorms away from 0 and 1
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return cls_ours.from_hf(hf).eval(), hf


def test_distilbert_model_equals_transformers():
    ours, hf = hf_pair(DistilBertModel, "DistilBertModel")
    inputs = dict(batch(), output_hidden_states=True, output_attentions=True)
    a, _ = assert_equivalent(
        ours,
        hf,
        inputs,
        lambda out: out.last_hidden_state.sum(),
        outputs=["last_hidden_state", "hidden_states", "attentions"],
    )
    assert a.pooler_output is None and len(a.hidden_states) == 3
    assert not any("token_type" in k or "pooler" in k for k in ours.state_dict())


def test_distilbert_for_masked_lm_equals_transformers():
    ours, hf = hf_pair(DistilBertForMaskedLM, "DistilBertForMaskedLM", activation="gelu_new")
    inputs = batch()
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[0, [1, 4, 8]] = torch.tensor([5, 6, 7])
    labels[2, 3] = 40
    assert_equivalent(ours, hf, dict(inputs, labels=labels), lambda out: out.loss, outputs=["logits"])
    assert ours.vocab_projector.weight is ours.distilbert.embeddings.word_embeddings.weight


@pytest.mark.parametrize("num_labels", [1, 3])
def test_distilbert_for_sequence_classification_equals_transformers(num_labels):
    ours, hf = hf_pair(
        DistilBertForSequenceClassification, "DistilBertForSequenceClassification", num_labels=num_labels
    )
    labels = torch.tensor([0.5, -1.0, 2.0, 0.0]) if num_labels == 1 else torch.tensor([2, 0, 1, 1])
    assert_equivalent(ours, hf, dict(batch(), labels=labels), lambda out: out.loss, outputs=["logits"])
    assert ours.num_labels == num_labels


def test_distilbert_for_token_classification_equals_transformers():
    ours, hf = hf_pair(DistilBertForTokenClassification, "DistilBertForTokenClassification", num_labels=5)
    inputs = batch()
    labels = torch.randint(0, 5, inputs["input_ids"].shape, generator=torch.Generator().manual_seed(4))
    labels[inputs["attention_mask"] == 0] = -100
    assert_equivalent(ours, hf, dict(inputs, labels=labels), lambda out: out.loss, outputs=["logits"])
    assert ours.num_labels == 5
    with pytest.raises(ValueError, match="labels of shape"):
        ours(**inputs, labels=labels[:, :3])


def test_a_new_head_on_a_distilled_encoder_copies_it():
    encoder = DistilBertModel(DistilBertConfig(**SMALL))
    head = DistilBertForTokenClassification.from_encoder(encoder, 3, dropout=0.0)
    assert head.num_labels == 3 and head.config.dropout == 0.0
    for name, value in encoder.state_dict().items():
        assert torch.equal(head.distilbert.state_dict()[name], value)


def test_sinusoidal_positions_equal_transformers_table():
    hf = transformers.DistilBertModel(transformers.DistilBertConfig(**SMALL, sinusoidal_pos_embds=True))
    ours = DistilBertModel(DistilBertConfig(**SMALL, sinusoidal_pos_embds=True))
    expected = hf.embeddings.position_embeddings.weight
    torch.testing.assert_close(ours.embeddings.position_embeddings.weight, expected, atol=1e-7, rtol=0)
    torch.testing.assert_close(sinusoidal_positions(14, 32).double(), expected, atol=1e-7, rtol=0)
    assert_round_trip(ours)


def test_parameter_count_of_distilbert_base_equals_transformers():
    with torch.device("meta"):
        ours = sum(p.numel() for p in DistilBertModel(DistilBertConfig()).parameters())
        theirs = sum(p.numel() for p in transformers.DistilBertModel(transformers.DistilBertConfig()).parameters())
    assert ours == theirs == 66_362_880


def test_head_pruning_equals_masking():
    model = DistilBertModel(DistilBertConfig(**SMALL)).eval()
    mask = torch.ones(2, 4)
    mask[0, 1] = mask[1, 3] = 0
    masked = model(**batch(), head_mask=mask).last_hidden_state
    model.prune_heads({0: [1], 1: [3]})
    torch.testing.assert_close(model(**batch()).last_hidden_state, masked)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="not divisible"):
        DistilBertConfig(dim=30, n_heads=4)
    with pytest.raises(ValueError, match="activation"):
        DistilBertConfig(activation="swish")
    with pytest.raises(ValueError, match="epsilon"):
        distilbert_config(BertConfig(layer_norm_eps=1e-5), 3)


# ---------------------------------------------------------------- the initialisation from a BERT

TEACHER = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=14,
)


def random_teacher():
    torch.manual_seed(1)
    teacher = BertForPreTraining(BertConfig(**TEACHER)).eval()
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return teacher


def test_student_layers_are_spread_as_sanh_et_al():
    assert student_layers(12, 6) == [0, 2, 4, 7, 9, 11]  # extract_distilbert.py's choice
    assert student_layers(24, 12)[:3] == [0, 2, 4] and student_layers(24, 12)[-1] == 23
    assert student_layers(6, 1) == [0]
    with pytest.raises(ValueError, match="student_layers"):
        student_layers(4, 5)


def test_initialisation_copies_the_teacher_tensors_exactly():
    teacher = random_teacher()
    student = distilbert_from_bert(teacher, fold_segment=False)
    assert student.config.n_layers == 2
    theirs, mine = teacher.state_dict(), student.to_hf().state_dict()
    pairs = {
        "distilbert.embeddings.word_embeddings.weight": "bert.embeddings.word_embeddings.weight",
        "distilbert.embeddings.position_embeddings.weight": "bert.embeddings.position_embeddings.weight",
        "distilbert.embeddings.LayerNorm.weight": "bert.embeddings.LayerNorm.weight",
        "vocab_transform.weight": "cls.predictions.transform.dense.weight",
        "vocab_layer_norm.bias": "cls.predictions.transform.LayerNorm.bias",
        "vocab_projector.bias": "cls.predictions.bias",
    }
    names = {
        "attention.q_lin": "attention.self.query",
        "attention.k_lin": "attention.self.key",
        "attention.v_lin": "attention.self.value",
        "attention.out_lin": "attention.output.dense",
        "sa_layer_norm": "attention.output.LayerNorm",
        "ffn.lin1": "intermediate.dense",
        "ffn.lin2": "output.dense",
        "output_layer_norm": "output.LayerNorm",
    }
    for s, t in enumerate([0, 3]):  # extract_distilbert.py's key map, written out
        for hf_name, bert_name in names.items():
            for kind in ("weight", "bias"):
                pairs[f"distilbert.transformer.layer.{s}.{hf_name}.{kind}"] = (
                    f"bert.encoder.layer.{t}.{bert_name}.{kind}"
                )
    for key, source in pairs.items():
        assert torch.equal(mine[key], theirs[source]), key
    copied_layers = {k for k in pairs if ".layer." in k}
    assert copied_layers == {k for k in mine if ".layer." in k}  # every layer tensor comes from the teacher
    assert torch.equal(mine["vocab_projector.weight"], theirs["bert.embeddings.word_embeddings.weight"])


def test_folding_the_segment_vector_keeps_the_teacher_function():
    """All teacher layers copied: with the segment-0 vector folded in, the student *is* the teacher on one
    segment; without it, already the embeddings differ (the trap of an extracted student)."""
    teacher = random_teacher()
    inputs = batch()
    hidden = teacher(**inputs, output_hidden_states=True)
    folded = distilbert_from_bert(teacher, layers=[0, 1, 2, 3])(**inputs, output_hidden_states=True)
    torch.testing.assert_close(folded.logits, hidden.prediction_logits, atol=1e-10, rtol=1e-10)
    plain = distilbert_from_bert(teacher, layers=[0, 1, 2, 3], fold_segment=False)(**inputs, output_hidden_states=True)
    assert not torch.allclose(plain.hidden_states[0], hidden.hidden_states[0], atol=1e-3)
