"""lecture_lib.models.albert against transformers' AlbertModel, AlbertForPreTraining and AlbertForMaskedLM."""

import numpy as np
import pytest
import torch
import transformers

from lecture_lib.models.albert import (
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertModel,
    albert_from_bert,
    low_rank_factors,
    share_across_layers,
)
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from tests.hf_equivalence import assert_equivalent, assert_round_trip
from tests.models.test_bert import inputs, pretraining_labels

SMALL = dict(
    vocab_size=97,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)


pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def hf_pair(cls_ours, cls_hf, **config):
    hf_config = transformers.AlbertConfig(**{**SMALL, **config}, attn_implementation="eager")
    hf = getattr(transformers, cls_hf)(hf_config).eval()
    return cls_ours.from_hf(hf).eval(), hf


GROUPS = [
    dict(),
    dict(num_hidden_groups=2),
    dict(num_hidden_groups=2, inner_group_num=2),
    dict(num_hidden_groups=4, hidden_act="gelu"),
]


@pytest.mark.parametrize("config", GROUPS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "shared")
def test_albert_model_equals_transformers(config):
    ours, hf = hf_pair(AlbertModel, "AlbertModel", **config)
    batch = dict(inputs(), output_hidden_states=True)
    a, _ = assert_equivalent(
        ours,
        hf,
        batch,
        lambda out: out.last_hidden_state.sum() + out.pooler_output.sum(),
        outputs=["last_hidden_state", "pooler_output", "hidden_states"],
    )
    depth = SMALL["num_hidden_layers"] * config.get("inner_group_num", 1)
    assert len(a.hidden_states) == depth + 1


def test_albert_attentions_equal_transformers():
    ours, hf = hf_pair(AlbertModel, "AlbertModel")
    batch = dict(inputs(), output_attentions=True)
    a, b = ours(**batch), hf(**batch)
    assert len(a.attentions) == len(b.attentions) == SMALL["num_hidden_layers"]
    for x, y in zip(a.attentions, b.attentions):
        torch.testing.assert_close(x, y, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("config", GROUPS[:2], ids=["shared", "two-groups"])
def test_albert_for_pretraining_equals_transformers_logits_loss_and_gradients(config):
    ours, hf = hf_pair(AlbertForPreTraining, "AlbertForPreTraining", **config)
    batch = inputs()
    labels, order = pretraining_labels(batch)
    batch = dict(batch, labels=labels, sentence_order_label=order)
    a, b = assert_equivalent(ours, hf, batch, lambda out: out.loss, outputs=["prediction_logits", "sop_logits"])
    torch.testing.assert_close(a.loss, a.mlm_loss + a.sop_loss)


def test_albert_for_masked_lm_equals_transformers():
    ours, hf = hf_pair(AlbertForMaskedLM, "AlbertForMaskedLM")
    batch = inputs()
    labels, _ = pretraining_labels(batch)
    assert ours.albert.pooler is None and "albert.pooler.weight" not in ours.state_dict()
    a, _ = assert_equivalent(ours, hf, dict(batch, labels=labels), lambda out: out.loss, outputs=["logits"])
    assert a.sop_logits is None
    with pytest.raises(ValueError, match="no sentence-order head"):
        ours(**batch, sentence_order_label=torch.tensor([0, 1, 0]))


def test_masked_only_gives_the_same_loss_and_gradients():
    model = AlbertForPreTraining(AlbertConfig(**SMALL)).eval()  # no dropout before the SOP classifier
    batch = inputs()
    labels, order = pretraining_labels(batch)
    losses, grads = [], []
    for masked_only in (False, True):
        model.zero_grad()
        out = model(**batch, labels=labels, sentence_order_label=order, masked_only=masked_only)
        out.loss.backward()
        losses.append(out.loss)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    torch.testing.assert_close(losses[0], losses[1])
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)


def test_the_shared_layer_is_one_module_stored_once():
    model = AlbertModel(AlbertConfig(**SMALL))
    layers = model.encoder.layers()
    assert len(layers) == 4 and all(layer is layers[0] for layer in layers)
    keys = [k for k in model.state_dict() if "albert_layer_groups" in k]
    assert all(k.startswith("encoder.albert_layer_groups.0.albert_layers.0.") for k in keys)
    assert len(keys) == len(dict(layers[0].named_parameters()))


@pytest.mark.parametrize("part", ["attention", "ffn"])
def test_sharing_one_part_shares_exactly_that_part(part):
    config = AlbertConfig(**{**SMALL, "num_hidden_groups": 4})
    encoder = share_across_layers(AlbertModel(config).encoder, part)
    layers = encoder.layers()
    assert len(set(layers)) == 4
    assert all((layer.attention is layers[0].attention) == (part == "attention") for layer in layers[1:])
    assert all((layer.ffn is layers[0].ffn) == (part == "ffn") for layer in layers[1:])
    h, i = 32, 48
    attention, ffn = 4 * h * h + 4 * h + 2 * h, 2 * h * i + i + h + 2 * h  # q, k, v, o + LayerNorm; W1, W2 + LayerNorm
    shared = attention if part == "attention" else ffn
    projection = 16 * h + h
    assert sum(p.numel() for p in encoder.parameters()) == projection + 4 * (attention + ffn) - 3 * shared


def test_sharing_one_part_needs_one_group_per_layer():
    with pytest.raises(ValueError, match="num_hidden_groups = num_hidden_layers"):
        share_across_layers(AlbertModel(AlbertConfig(**SMALL)).encoder, "ffn")
    with pytest.raises(ValueError, match="expected part in"):
        share_across_layers(AlbertModel(AlbertConfig(**SMALL)).encoder, "pooler")


def _count(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", ["base", "large", "xlarge", "xxlarge"])
def test_preset_parameter_counts_equal_transformers(name):
    ours_config = AlbertConfig.preset(name)
    with torch.device("meta"):
        ours = AlbertForPreTraining(ours_config)
        theirs = transformers.AlbertForPreTraining(ours_config.to_hf())
        ours_bare, theirs_bare = AlbertModel(ours_config), transformers.AlbertModel(ours_config.to_hf())
    assert _count(ours) == _count(theirs)
    assert _count(ours_bare) == _count(theirs_bare)


@pytest.mark.parametrize(
    "sizes",
    [dict(), dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)],
    ids=["base", "large"],
)
def test_bert_parameter_counts_equal_transformers(sizes):
    config = BertConfig(vocab_size=30000, **sizes)
    with torch.device("meta"):
        assert _count(BertForPreTraining(config)) == _count(transformers.BertForPreTraining(config.to_hf()))


def test_presets_follow_the_paper_table():
    sizes = {
        name: (c.hidden_size, c.num_hidden_layers, c.embedding_size, c.intermediate_size)
        for name in ("base", "large", "xlarge", "xxlarge")
        for c in [AlbertConfig.preset(name)]
    }
    assert sizes == {
        "base": (768, 12, 128, 3072),
        "large": (1024, 24, 128, 4096),
        "xlarge": (2048, 24, 128, 8192),
        "xxlarge": (4096, 12, 128, 16384),
    }
    with pytest.raises(ValueError, match="expected a preset in"):
        AlbertConfig.preset("huge")


def test_round_trip_through_disk(tmp_path):
    model = AlbertForPreTraining(AlbertConfig(**{**SMALL, "num_hidden_groups": 2}))
    model.save_pretrained(tmp_path)
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path)
    back = AlbertForPreTraining.from_pretrained(tmp_path)
    for key, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    assert_round_trip(back, hf)


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="not divisible by num_attention_heads"):
        AlbertConfig(**{**SMALL, "num_attention_heads": 5})
    with pytest.raises(ValueError, match="not divisible by num_hidden_groups"):
        AlbertConfig(**{**SMALL, "num_hidden_groups": 3})
    with pytest.raises(ValueError, match="expected a config with model_type 'albert', got 'bert'"):
        AlbertConfig.from_dict({**SMALL, "model_type": "bert"})
    with pytest.raises(TypeError, match="expected a transformers AlbertModel, got BertModel"):
        AlbertModel.from_hf(
            transformers.BertModel(transformers.BertConfig(**{k: v for k, v in SMALL.items() if k != "embedding_size"}))
        )


@pytest.mark.parametrize("num_labels", [3, 1], ids=["classes", "regression"])
def test_albert_for_sequence_classification_equals_transformers(num_labels):
    hf_config = transformers.AlbertConfig(**SMALL, num_labels=num_labels, attn_implementation="eager")
    hf = transformers.AlbertForSequenceClassification(hf_config).eval()
    ours = AlbertForSequenceClassification.from_hf(hf).eval()
    assert ours.num_labels == num_labels
    labels = torch.tensor([0.5, 1.0, -2.0]) if num_labels == 1 else torch.tensor([0, 2, 1])
    assert_equivalent(ours, hf, dict(inputs(), labels=labels), lambda out: out.loss, outputs=["logits"])


def test_sequence_classification_from_an_encoder_without_pooler():
    encoder = AlbertForMaskedLM(AlbertConfig(**SMALL)).albert
    head = AlbertForSequenceClassification.from_encoder(encoder, 3, dropout=0.2)
    assert head.albert.pooler is not None and head.dropout.p == head.albert.config.hidden_dropout_prob == 0.2
    for name, value in encoder.state_dict().items():
        assert torch.equal(head.albert.state_dict()[name], value), name
    head.albert.embeddings.word_embeddings.weight.data.zero_()
    assert encoder.embeddings.word_embeddings.weight.abs().sum() > 0  # a copy: the encoder is left as it was
    with pytest.raises(ValueError, match="expected num_labels >= 1"):
        AlbertForSequenceClassification(AlbertConfig(**SMALL), 0)


@pytest.mark.parametrize("rank", [1, 5, 16])
def test_low_rank_factors_are_the_best_rank_r_approximation(rank):
    matrix = torch.randn(40, 16, generator=torch.Generator().manual_seed(rank))
    a, b = low_rank_factors(matrix, rank)
    assert a.shape == (40, rank) and b.shape == (rank, 16)
    torch.testing.assert_close(b @ b.T, torch.eye(rank))  # orthonormal rows
    torch.testing.assert_close(a, matrix @ b.T)  # A is M projected on those rows
    u, s, vh = np.linalg.svd(matrix.numpy(), full_matrices=False)  # an independent SVD
    torch.testing.assert_close(a @ b, torch.from_numpy((u[:, :rank] * s[:rank]) @ vh[:rank]))
    error = float(torch.linalg.matrix_norm(matrix - a @ b))  # Eckart and Young: the discarded singular values
    assert error == pytest.approx(float(np.sqrt((s[rank:] ** 2).sum())), abs=1e-9)
    with pytest.raises(ValueError, match="expected a rank in"):
        low_rank_factors(matrix, 17)


def _bert(**sizes):
    config = BertConfig(**{**{k: v for k, v in SMALL.items() if k != "embedding_size"}, **sizes})
    torch.manual_seed(0)
    bert = BertForPreTraining(config).eval()
    with torch.no_grad():  # LayerNorms away from their initial 1 and 0, so that a missed copy shows
        for name, p in bert.named_parameters():
            if "LayerNorm" in name or "bias" in name:
                p.add_(0.1 * torch.randn_like(p))
    return bert


@pytest.mark.parametrize("shared_layer", [0, 2])
def test_albert_from_bert_shares_one_copy_of_the_chosen_layer(shared_layer):
    bert = _bert()
    student = albert_from_bert(bert, 8, shared_layer).eval()
    layers = student.albert.encoder.layers()
    assert len(layers) == 4 and all(layer is layers[0] for layer in layers)
    x = torch.randn(3, 9, 32)
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., 6:] = False
    with torch.no_grad():  # the same function as the teacher's layer: every tensor went to its ALBERT name
        torch.testing.assert_close(
            layers[0](x, mask, False)[0], bert.bert.encoder.layer[shared_layer](x, mask, False)[0]
        )
    stored = sum(p.numel() for p in student.albert.encoder.albert_layer_groups.parameters())
    assert stored == sum(p.numel() for p in bert.bert.encoder.layer[shared_layer].parameters())


def test_albert_from_bert_factorises_the_embeddings():
    bert = _bert()
    rank = 8
    student = albert_from_bert(bert, rank, 0)
    table = student.albert.embeddings.word_embeddings.weight.detach()
    teacher_table = bert.bert.embeddings.word_embeddings.weight.detach()
    assert table.shape == (SMALL["vocab_size"], rank)
    s = np.linalg.svd(teacher_table.numpy(), compute_uv=False)
    _, directions = low_rank_factors(teacher_table, rank)
    error = float(torch.linalg.matrix_norm(teacher_table - table @ directions))
    assert error == pytest.approx(float(np.sqrt((s[rank:] ** 2).sum())), rel=1e-9)  # the best rank-E table
    positions = bert.bert.embeddings.position_embeddings.weight.detach()
    torch.testing.assert_close(student.albert.embeddings.position_embeddings.weight.detach(), positions @ directions.T)
    torch.testing.assert_close(student.predictions.bias.detach(), bert.cls.predictions.bias.detach())
    assert student.predictions.decoder.weight is student.albert.embeddings.word_embeddings.weight  # tied, V x E
    with pytest.raises(ValueError, match="expected shared_layer in"):
        albert_from_bert(bert, rank, 4)
