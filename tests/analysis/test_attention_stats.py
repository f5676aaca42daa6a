"""lecture_lib.analysis.attention_stats against loops written out in NumPy and against scipy's entropy."""

import numpy as np
import pytest
import torch
from scipy.stats import entropy

from lecture_lib.analysis.attention_stats import (
    attention_entropy,
    attention_maps,
    key_mass,
    mass_profile,
    offset_mass,
)
from lecture_lib.models.bert import BertConfig, BertModel

SMALL = dict(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    initializer_range=0.5,
)  # large weights: peaked attention, far from uniform


@pytest.fixture
def model():
    torch.manual_seed(0)
    return BertModel(BertConfig(**SMALL))


def batch():
    input_ids = torch.tensor([[2, 7, 9, 11, 3, 0, 0], [2, 5, 3, 8, 13, 14, 3]])
    return input_ids, (input_ids != 0).long()


def test_rows_sum_to_one_and_padding_receives_nothing(model):
    input_ids, mask = batch()
    maps = attention_maps(model, input_ids, mask)
    assert maps.shape == (2, 2, 4, 7, 7)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 4, 7))
    assert (maps[0, ..., 5:] == 0).all()


def test_statistics_agree_with_loops(model):
    input_ids, mask = batch()
    maps = attention_maps(model, input_ids, mask).double()
    keys = input_ids == 3  # [SEP]
    queries = mask.bool()
    a = maps.numpy()
    rows = [(b, i) for b in range(2) for i in range(7) if queries[b, i]]
    expected_sep = np.mean(
        [[[a[b, layer, h, i, keys[b].numpy()].sum() for h in range(4)] for layer in range(2)] for b, i in rows], axis=0
    )
    expected_previous = np.mean(
        [[[a[b, layer, h, i, i - 1] if i > 0 else 0 for h in range(4)] for layer in range(2)] for b, i in rows], axis=0
    )
    expected_entropy = np.mean(
        [[[entropy(a[b, layer, h, i]) for h in range(4)] for layer in range(2)] for b, i in rows], axis=0
    )
    np.testing.assert_allclose(key_mass(maps, keys, queries).numpy(), expected_sep, rtol=1e-12)
    np.testing.assert_allclose(offset_mass(maps, -1, queries).numpy(), expected_previous, rtol=1e-12)
    np.testing.assert_allclose(
        attention_entropy(maps, queries).numpy(), expected_entropy, rtol=1e-6
    )  # scipy renormalises float32 rows


def test_statistics_are_unchanged_when_the_sentence_is_padded(model):
    input_ids = torch.tensor([[2, 7, 9, 11, 4, 3]])
    padded = torch.cat([input_ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    profiles = []
    for ids in (input_ids, padded):
        mask = (ids != 0).long()
        maps = attention_maps(model, ids, mask)
        targets = {"[CLS]": ids == 2, "[SEP]": ids == 3, ".": ids == 4}
        profiles.append(mass_profile(maps, targets, mask.bool()))
    assert profiles[0].keys() == {"[CLS]", "[SEP]", ".", "previous", "next", "entropy"}
    for name in profiles[0]:
        torch.testing.assert_close(profiles[0][name], profiles[1][name], msg=name)


def test_an_empty_query_set_and_a_wrong_shape_raise(model):
    input_ids, mask = batch()
    maps = attention_maps(model, input_ids, mask)
    with pytest.raises(ValueError, match="at least one query"):
        key_mass(maps, mask.bool(), torch.zeros_like(mask, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"query mask of shape \(2, 7\)"):
        offset_mass(maps, 1, mask[:, :3].bool())
