"""lecture_lib.objectives.replaced_tokens and the ELECTRA pair's training step: exact counts, no random tokens,
samples from the generator's softmax, a sample equal to the original labelled original, the loss, and no
gradient through the sampling."""

import math

import pytest
import torch

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.electra import ElectraConfig, ElectraPretrainingModel
from lecture_lib.objectives.replaced_tokens import (
    choose_positions,
    electra_loss,
    mask_for_generator,
    replace_tokens,
    sample_tokens,
)

MASK = 4


def rows(batch=400, length=48, seed=0):
    """Rows of every real length from 3 to ``length``: [CLS] at 0, [SEP] last, then padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, length + 1, (batch,), generator=g)
    attention = (torch.arange(length)[None, :] < lengths[:, None]).long()
    special = 1 - attention
    special[:, 0] = 1
    special[torch.arange(batch), lengths - 1] = 1
    ids = torch.randint(5, 100, (batch, length), generator=g) * attention
    return ids, attention, special, lengths


def test_exactly_round_015_n_positions_never_special_or_padding():
    ids, attention, special, lengths = rows()
    chosen = choose_positions(attention, special, generator=torch.Generator().manual_seed(1))
    expected = [max(1, round(0.15 * n)) for n in lengths.tolist()]  # Python rounds half to even, as tf.round
    assert chosen.sum(1).tolist() == expected
    assert not (chosen & special.bool()).any()
    capped = choose_positions(attention, special, max_predictions=3, generator=torch.Generator().manual_seed(1))
    assert capped.sum(1).tolist() == [min(3, k) for k in expected]


def test_the_chosen_positions_are_uniform_over_the_candidates():
    attention, special = torch.ones(20000, 22, dtype=torch.long), torch.zeros(20000, 22, dtype=torch.long)
    special[:, [0, 21]] = 1
    chosen = choose_positions(attention, special, generator=torch.Generator().manual_seed(2))  # 3 of 20 each
    rate = chosen[:, 1:21].double().mean(0)
    assert (rate - 0.15).abs().max() < 4 * math.sqrt(0.15 * 0.85 / 20000)


def test_85_percent_mask_15_unchanged_none_random():
    ids, attention, special, _ = rows(batch=4000, seed=3)
    chosen = choose_positions(attention, special, generator=torch.Generator().manual_seed(4))
    masked, labels = mask_for_generator(ids, chosen, mask_token_id=MASK, generator=torch.Generator().manual_seed(5))
    assert torch.equal(labels != IGNORE_INDEX, chosen) and torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(masked[~chosen], ids[~chosen])
    at_chosen = masked[chosen]
    assert ((at_chosen == MASK) | (at_chosen == ids[chosen])).all()  # nothing random
    n = at_chosen.numel()
    assert abs((at_chosen == MASK).double().mean().item() - 0.85) < 4 * math.sqrt(0.85 * 0.15 / n)


def test_samples_follow_the_generator_softmax_and_carry_no_gradient():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0], requires_grad=True)
    draws = sample_tokens(logits.expand(40000, 4), generator=torch.Generator().manual_seed(6))
    assert not draws.requires_grad
    frequency = torch.bincount(draws, minlength=4).double() / draws.numel()
    probability = torch.softmax(logits.detach().double(), 0)
    assert (frequency - probability).abs().max() < 4 * math.sqrt(0.25 / 40000)
    hot = sample_tokens(logits.expand(40000, 4), temperature=0.25, generator=torch.Generator().manual_seed(6))
    assert (hot == 0).double().mean() > frequency[0] + 0.2  # a lower temperature sharpens the distribution
    again = sample_tokens(logits.expand(40000, 4), generator=torch.Generator().manual_seed(6))
    assert torch.equal(draws, again)


def test_allowed_tokens_are_drawn_from_the_renormalised_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    allowed = torch.tensor([False, True, True, True])
    draws = sample_tokens(logits.expand(40000, 4), generator=torch.Generator().manual_seed(6), allowed=allowed)
    frequency = torch.bincount(draws, minlength=4).double() / draws.numel()
    expected = torch.distributions.Categorical(logits=logits.double().masked_fill(~allowed, -math.inf)).probs
    assert frequency[0] == 0  # the most likely token, but not allowed
    assert (frequency - expected).abs().max() < 4 * math.sqrt(0.25 / 40000)
    with pytest.raises(ValueError, match="at least one True"):
        sample_tokens(logits.expand(2, 4), allowed=torch.zeros(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="a bool mask over the 4 tokens"):
        sample_tokens(logits.expand(2, 4), allowed=torch.ones(3, dtype=torch.bool))


def test_a_sample_equal_to_the_original_is_labelled_original():
    ids = torch.tensor([[2, 10, 11, 12, 13, 3, 0]])
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, [1, 3, 4]] = ids[0, [1, 3, 4]]
    corrupted, replaced = replace_tokens(ids, labels, torch.tensor([10, 50, 13]))
    assert corrupted.tolist() == [[2, 10, 11, 50, 13, 3, 0]]
    assert replaced.tolist() == [[0, 0, 0, 1, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"expected one sample per labelled position \(3,\)"):
        replace_tokens(ids, labels, torch.tensor([10, 50]))


def test_bad_inputs_raise():
    ids, attention, special, _ = rows(batch=2)
    with pytest.raises(ValueError, match="expected mask_probability in"):
        choose_positions(attention, special, mask_probability=0.0)
    with pytest.raises(ValueError, match="of one shape"):
        choose_positions(attention, special[:, :3])
    with pytest.raises(ValueError, match="expected temperature > 0"):
        sample_tokens(torch.zeros(2, 3), temperature=0)


# ---------------------------------------------------------------- the training step


def step_batch(seed=7):
    ids, attention, special, _ = rows(batch=6, length=20, seed=seed)
    chosen = choose_positions(attention, special, generator=torch.Generator().manual_seed(seed))
    masked, labels = mask_for_generator(ids, chosen, mask_token_id=MASK, generator=torch.Generator().manual_seed(seed))
    return dict(input_ids=masked, labels=labels, attention_mask=attention), ids


def pair():
    torch.manual_seed(0)
    config = ElectraConfig(
        vocab_size=100,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return ElectraPretrainingModel.from_config(config, generator_size=0.5)


def test_the_step_corrupts_labels_and_weights_the_losses():
    model, (batch, original) = pair(), step_batch()
    out = model(**batch, sampling_generator=torch.Generator().manual_seed(8))
    chosen = batch["labels"] != IGNORE_INDEX
    assert torch.equal(out.corrupted_ids[~chosen], original[~chosen])
    assert torch.equal(out.replaced, (out.corrupted_ids != original).long())
    torch.testing.assert_close(out.loss, out.mlm_loss + 50 * out.discriminator_loss)
    torch.testing.assert_close(out.loss, electra_loss(out.mlm_loss, out.discriminator_loss))
    real = batch["attention_mask"].bool()
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    torch.testing.assert_close(out.discriminator_loss, bce(out.logits[real], out.replaced[real].float()))
    only = model(**batch, sampling_generator=torch.Generator().manual_seed(8), masked_positions_only=True)
    torch.testing.assert_close(only.discriminator_loss, bce(only.logits[chosen], only.replaced[chosen].float()))


def test_no_gradient_reaches_the_generator_through_its_samples():
    """The generator's own weights (all but the shared embeddings) get the gradient of L_MLM alone."""
    model, (batch, _) = pair(), step_batch()
    model(**batch, sampling_generator=torch.Generator().manual_seed(8)).loss.backward()
    joint = {n: p.grad.clone() for n, p in model.generator.named_parameters() if "embeddings." not in n}
    model.zero_grad()
    model.generator(batch["input_ids"], batch["attention_mask"], labels=batch["labels"]).loss.backward()
    for name, grad in joint.items():
        torch.testing.assert_close(grad, model.generator.get_parameter(name).grad, msg=name)
    shared = model.discriminator.electra.embeddings.word_embeddings.weight
    model.zero_grad()
    model(**batch, sampling_generator=torch.Generator().manual_seed(8)).discriminator_loss.backward()
    assert shared.grad.abs().sum() > 0  # the discriminator trains the shared tables
