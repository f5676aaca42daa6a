"""lecture_lib.models.electra against transformers' ElectraModel, ElectraForPreTraining and ElectraForMaskedLM."""

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from lecture_lib.models.bert import BertConfig, training_flops_per_token
from lecture_lib.models.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraModel,
    ElectraPretrainingModel,
    discriminator_loss,
    electra_training_flops_per_token,
)
from tests.hf_equivalence import assert_equivalent, assert_round_trip
from tests.models.test_bert import inputs, pretraining_labels

SMALL = dict(
    vocab_size=97,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)
# E != H (ELECTRA-Small's shape, with the projection) and E = H (Base's, without); gelu_new checks that the
# discriminator head follows hidden_act while the generator head keeps the exact GELU.
SHAPES = [dict(), dict(embedding_size=32), dict(hidden_act="gelu_new")]
IDS = ["E<H", "E=H", "gelu_new"]

pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def hf_pair(cls_ours, cls_hf, **config):
    hf_config = transformers.ElectraConfig(**{**SMALL, **config}, attn_implementation="eager")
    hf = getattr(transformers, cls_hf)(hf_config).eval()
    return cls_ours.from_hf(hf).eval(), hf


def replaced_labels(batch):
    return torch.randint(0, 2, batch["input_ids"].shape)


@pytest.mark.parametrize("config", SHAPES, ids=IDS)
def test_electra_model_equals_transformers(config):
    ours, hf = hf_pair(ElectraModel, "ElectraModel", **config)
    assert (ours.embeddings_project is None) == (config.get("embedding_size") == 32)
    batch = dict(inputs(), output_hidden_states=True, output_attentions=True)
    a, _ = assert_equivalent(
        ours,
        hf,
        batch,
        lambda out: out.last_hidden_state.sum(),
        outputs=["last_hidden_state", "hidden_states", "attentions"],
    )
    assert a.pooler_output is None and len(a.hidden_states) == SMALL["num_hidden_layers"] + 1


def active_loss(labels, attention_mask):
    """transformers' discriminator loss, written as its forward does it, with the labels cast to the logits'
    dtype: its ``labels.float()`` makes the loss float32 even for a float64 model, too coarse for comparing
    gradients at 1e-9 (the float32 value itself is compared in the test)."""

    def loss(out):
        if attention_mask is None:
            return torch.nn.BCEWithLogitsLoss()(out.logits, labels.to(out.logits.dtype))
        active = attention_mask.view(-1, out.logits.shape[1]) == 1
        return torch.nn.BCEWithLogitsLoss()(
            out.logits.view(-1, out.logits.shape[1])[active], labels[active].to(out.logits.dtype)
        )

    return loss


@pytest.mark.parametrize("masked", [True, False], ids=["padded", "no-mask"])
@pytest.mark.parametrize("config", SHAPES, ids=IDS)
def test_discriminator_equals_transformers_logits_loss_and_gradients(config, masked):
    ours, hf = hf_pair(ElectraForPreTraining, "ElectraForPreTraining", **config)
    batch = inputs()
    if not masked:
        del batch["attention_mask"]
    batch = dict(batch, labels=replaced_labels(batch))
    a, b = assert_equivalent(
        ours, hf, batch, active_loss(batch["labels"], batch.get("attention_mask")), outputs=["logits"]
    )
    assert a.logits.shape == batch["input_ids"].shape
    torch.testing.assert_close(a.loss, active_loss(batch["labels"], batch.get("attention_mask"))(a), rtol=0, atol=0)
    torch.testing.assert_close(a.loss.float(), b.loss, rtol=1e-6, atol=1e-7)  # theirs is float32


def test_discriminator_loss_ignores_padding_exactly():
    logits = torch.randn(2, 5)
    labels = torch.randint(0, 2, (2, 5))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    real = mask.bool()
    expected = torch.nn.BCEWithLogitsLoss()(logits[real], labels[real].double())  # the mean over 8 real tokens
    torch.testing.assert_close(discriminator_loss(logits, labels, mask), expected)
    changed, flipped = logits.clone(), labels.clone()
    changed[0, 3:] = 100.0  # whatever the model says, and whatever the label, at padding: no change
    flipped[0, 3:] = 1 - flipped[0, 3:]
    torch.testing.assert_close(discriminator_loss(changed, flipped, mask), expected)
    with pytest.raises(ValueError, match="expected labels of shape"):
        discriminator_loss(logits, labels[:, :4], mask)


@pytest.mark.parametrize("config", SHAPES, ids=IDS)
def test_generator_equals_transformers_logits_loss_and_gradients(config):
    ours, hf = hf_pair(ElectraForMaskedLM, "ElectraForMaskedLM", **config)
    assert ours.generator_lm_head.weight is ours.electra.embeddings.word_embeddings.weight
    batch = inputs()
    labels, _ = pretraining_labels(batch)
    assert_equivalent(ours, hf, dict(batch, labels=labels), lambda out: out.loss, outputs=["logits"])


def test_generator_masked_only_gives_the_same_loss_and_gradients():
    model = ElectraForMaskedLM(ElectraConfig(**SMALL)).eval()
    batch = inputs()
    labels, _ = pretraining_labels(batch)
    results = []
    for masked_only in (False, True):
        model.zero_grad()
        out = model(**batch, labels=labels, masked_only=masked_only)
        out.loss.backward()
        results.append((out.loss, {n: p.grad.clone() for n, p in model.named_parameters()}))
    torch.testing.assert_close(results[0][0], results[1][0])
    for name, grad in results[0][1].items():
        torch.testing.assert_close(grad, results[1][1][name], msg=name)
    with pytest.raises(ValueError, match="masked_only=True needs labels"):
        model(**batch, masked_only=True)


def test_joint_model_shares_the_embedding_parameters_themselves():
    model = ElectraPretrainingModel.from_config(
        ElectraConfig(**{**SMALL, "hidden_size": 64, "intermediate_size": 96}), generator_size=0.5
    )
    g, d = model.generator.electra.embeddings, model.discriminator.electra.embeddings
    assert g is d
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm"):
        assert getattr(g, name).weight is getattr(d, name).weight
    assert model.generator.generator_lm_head.weight is d.word_embeddings.weight
    assert model.generator.config.hidden_size == 32 and model.generator.electra.embeddings_project is not None
    # counted once: the pair has the two networks' parameters less one copy of the embeddings
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    alone = ElectraForMaskedLM(model.generator.config), ElectraForPreTraining(model.discriminator.config)
    assert count(model) == count(alone[0]) + count(alone[1]) - count(alone[0].electra.embeddings)


def test_joint_model_draws_replacements_only_among_the_allowed_tokens():
    torch.manual_seed(0)
    allowed = torch.zeros(SMALL["vocab_size"], dtype=torch.bool)
    allowed[[5, 6, 7, 11, 40, 60]] = True
    free = ElectraPretrainingModel.from_config(ElectraConfig(**SMALL))
    model = ElectraPretrainingModel(free.generator, free.discriminator, sample_from=allowed)
    assert model.state_dict().keys() == free.state_dict().keys()  # the mask is not a weight
    batch = inputs()
    labels, _ = pretraining_labels(batch)
    chosen = labels != -100
    drawn = torch.cat(
        [
            model(**batch, labels=labels, sampling_generator=torch.Generator().manual_seed(i)).corrupted_ids[chosen]
            for i in range(50)
        ]
    )
    assert allowed[drawn].all()
    unrestricted = free(**batch, labels=labels, sampling_generator=torch.Generator().manual_seed(0))
    assert not allowed[unrestricted.corrupted_ids[chosen]].all()  # without the mask, other tokens are drawn


def test_joint_model_to_hf_writes_the_shared_tables_into_both_halves():
    model = ElectraPretrainingModel.from_config(ElectraConfig(**SMALL), generator_size=0.5)
    with torch.no_grad():
        model.discriminator.electra.embeddings.word_embeddings.weight.add_(1.0)  # one update, seen by both
    hf_g, hf_d = model.to_hf()
    assert isinstance(hf_g, transformers.ElectraForMaskedLM) and isinstance(hf_d, transformers.ElectraForPreTraining)
    shared = model.discriminator.electra.embeddings.state_dict()
    for hf in (hf_g, hf_d):
        for key, value in shared.items():
            assert torch.equal(hf.state_dict()[f"electra.embeddings.{key}"], value), key
    assert torch.equal(hf_g.generator_lm_head.weight, shared["word_embeddings.weight"])
    batch = inputs()
    labels, _ = pretraining_labels(batch)
    torch.testing.assert_close(
        model.generator.eval()(**batch, labels=labels).loss, hf_g.eval()(**batch, labels=labels).loss
    )
    back = ElectraPretrainingModel.from_hf(hf_g, hf_d)
    assert back.generator.electra.embeddings is back.discriminator.electra.embeddings
    for key, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key


def test_joint_model_refuses_embeddings_of_two_sizes():
    with pytest.raises(ValueError, match="shared embeddings need one embedding_size"):
        ElectraPretrainingModel(
            ElectraForMaskedLM(ElectraConfig(**{**SMALL, "embedding_size": 8})),
            ElectraForPreTraining(ElectraConfig(**SMALL)),
        )


def test_generator_config_follows_the_authors_rule():
    small = ElectraConfig()  # ELECTRA-Small's discriminator: H = 256
    sizes = {
        f: (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_hidden_layers, c.embedding_size)
        for f in (1 / 8, 1 / 4, 1 / 2, 1.0)
        for c in [small.generator(f)]
    }
    assert sizes == {
        1 / 8: (32, 128, 1, 12, 128),
        1 / 4: (64, 256, 1, 12, 128),
        1 / 2: (128, 512, 2, 12, 128),
        1.0: (256, 1024, 4, 12, 128),
    }
    with pytest.raises(ValueError, match="expected a generator size in"):
        small.generator(0.0)


def test_defaults_equal_transformers_defaults():
    ours, theirs = ElectraConfig(), transformers.ElectraConfig()
    for name, value in ours.to_dict().items():
        assert getattr(theirs, name) == value, name


def test_round_trip_through_disk(tmp_path):
    model = ElectraForPreTraining(ElectraConfig(**SMALL))
    model.save_pretrained(tmp_path)
    hf = transformers.ElectraForPreTraining.from_pretrained(tmp_path)
    back = ElectraForPreTraining.from_pretrained(tmp_path)
    for key, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    assert_round_trip(back, hf)


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="not divisible by num_attention_heads"):
        ElectraConfig(**{**SMALL, "num_attention_heads": 5})
    with pytest.raises(ValueError, match="expected a config with model_type 'electra', got 'bert'"):
        ElectraConfig.from_dict({**SMALL, "model_type": "bert"})
    with pytest.raises(TypeError, match="expected a transformers ElectraForPreTraining, got ElectraForMaskedLM"):
        ElectraForPreTraining.from_hf(transformers.ElectraForMaskedLM(transformers.ElectraConfig(**SMALL)))


# ---------------------------------------------------------------- compute


def test_flop_formula_is_the_course_formula_for_a_bert_shaped_network():
    """With E = H and no projection, the generator is BERT's MLM network: the course's formula, term for term."""
    sizes = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256)
    electra, bert = ElectraConfig(embedding_size=64, **sizes), BertConfig(**sizes)
    assert electra_training_flops_per_token(electra, 128, "generator") == training_flops_per_token(bert, 128)
    # with the head on the masked 15% only, ours also skips the head's H x H transform elsewhere
    assert (
        electra_training_flops_per_token(electra, 128, "generator", masked_fraction=0.15)
        == training_flops_per_token(bert, 128, masked_fraction=0.15) - 6 * 0.85 * 64 * 64
    )
    # the discriminator head (H² + H) instead of the MLM head (H² + f·H·V): the same formula, another N
    assert (
        electra_training_flops_per_token(electra, 128, "discriminator")
        == training_flops_per_token(bert, 128, masked_fraction=0.0) + 6 * 64
    )
    with pytest.raises(ValueError, match="expected head in"):
        electra_training_flops_per_token(electra, 128, "pooler")


@pytest.mark.parametrize("head", ["generator", "discriminator"])
def test_flop_formula_matches_pytorch_flop_counter(head):
    torch.set_default_dtype(torch.float32)
    config = ElectraConfig(**{**SMALL, "max_position_embeddings": 64})  # E = 16 != H = 32: the projection counts
    batch, length = 2, 64
    ids = torch.randint(1, 97, (batch, length))
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = ids[:, ::4]  # a quarter of the positions through the generator's output matrix
    model = ElectraForMaskedLM(config) if head == "generator" else ElectraForPreTraining(config)
    extra = dict(labels=labels, masked_only=True) if head == "generator" else {}
    with FlopCounterMode(display=False) as counter:  # the written-out attention: the counter sees its products
        model(ids, output_attentions=True, **extra).logits.sum().backward()
    expected = electra_training_flops_per_token(config, length, head, masked_fraction=0.25) * batch * length
    assert counter.get_total_flops() == expected
