"""Pruning: torch.nn.utils.prune as the reference for magnitude masks; pruned models against masked ones."""

import pytest
import torch
import torch.nn.utils.prune  # noqa: F401 (torch.nn.utils.prune is not an attribute before this import)
from torch import nn

from lecture_lib.compression.pruning import (
    csr_bytes,
    heads_to_prune,
    keep_layers,
    magnitude_masks,
    magnitude_prune_,
    make_permanent_,
    neuron_scores,
    prune_ffn_neurons_,
    sparsity_of,
)
from lecture_lib.models.bert import BertConfig, BertModel

CONFIG = dict(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def model():
    torch.manual_seed(0)
    return BertModel(BertConfig(**CONFIG)).eval()


def ids():
    return torch.randint(1, 50, (3, 9), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("sparsity", [0.1, 0.5, 0.9])
def test_magnitude_pruning_reaches_the_sparsity_and_equals_torch_global_pruning(sparsity):
    bert = model()
    reference = [nn.Linear(1, 1) for _ in range(3)]
    for layer, source in zip(
        reference, (bert.encoder.layer[0].attention.self.query, bert.encoder.layer[1].output.dense, bert.pooler.dense)
    ):
        layer.weight = nn.Parameter(source.weight.detach().clone())
    torch.nn.utils.prune.global_unstructured(
        [(layer, "weight") for layer in reference], pruning_method=torch.nn.utils.prune.L1Unstructured, amount=sparsity
    )
    ours = magnitude_masks([layer.weight_orig for layer in reference], sparsity)
    for mask, layer in zip(ours, reference):
        assert torch.equal(mask, layer.weight_mask)
    layers = magnitude_prune_(bert, sparsity)
    total = sum(layer.weight.numel() for layer in layers)
    assert abs(sparsity_of(layers) * total - round(sparsity * total)) <= 1


def test_pruned_weights_stay_zero_after_an_optimizer_step():
    bert = model()
    layers = magnitude_prune_(bert, 0.5)
    zero = [layer.weight == 0 for layer in layers]
    optimizer = torch.optim.AdamW(bert.parameters(), lr=0.1, weight_decay=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        bert(ids()).last_hidden_state.pow(2).sum().backward()
        optimizer.step()
    assert all(torch.equal(layer.weight[z], torch.zeros(int(z.sum()))) for layer, z in zip(layers, zero))
    assert any((layer.parametrizations.weight.original[z] != 0).any() for layer, z in zip(layers, zero))
    make_permanent_(layers)
    assert all(isinstance(layer.weight, nn.Parameter) for layer in layers)
    assert sparsity_of(layers) == pytest.approx(0.5, abs=1e-3)


def test_heads_to_prune_takes_the_least_important_and_never_empties_a_layer():
    importance = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6], [0.01, 0.02, 0.03, 0.04]])
    assert heads_to_prune(importance, 0.25) == {2: [0, 1, 2]}  # the fourth head of layer 2 stays
    assert heads_to_prune(importance, 0.3) == {2: [0, 1, 2], 0: [0]}  # 30% of 12 heads is 3.6: four go
    chosen = heads_to_prune(importance, 0.5)
    assert chosen == {2: [0, 1, 2], 0: [0, 1, 2]}
    bert = model()
    bert.prune_heads(chosen)
    assert bert(ids()).last_hidden_state.shape == (3, 9, 32)


def test_ffn_neuron_pruning_equals_zeroing_those_neurons():
    bert = model()
    masked = model()
    for layer in masked.encoder.layer:
        scores = neuron_scores(layer)
        drop = scores.argsort()[:16]  # a quarter of 64
        with torch.no_grad():
            layer.output.dense.weight[:, drop] = 0
    prune_ffn_neurons_(bert, 0.25)
    assert bert.encoder.layer[0].intermediate.dense.out_features == 48
    torch.testing.assert_close(bert(ids()).last_hidden_state, masked(ids()).last_hidden_state)


def test_keep_layers_is_the_model_without_the_others():
    bert = model()
    half = keep_layers(bert, [0, 2])
    assert half.config.num_hidden_layers == 2 and bert.config.num_hidden_layers == 3
    x = bert.embeddings(ids())
    expected = bert.encoder.layer[2](bert.encoder.layer[0](x, None, False)[0], None, False)[0]
    torch.testing.assert_close(half(ids()).last_hidden_state, expected)
    with pytest.raises(ValueError, match="layers"):
        keep_layers(bert, [3])


def test_csr_bytes_counts_values_indices_and_row_offsets():
    """A 300 x 70000 matrix with 4 non-zeros: column indices need 4 bytes (70000 > 65535), offsets 1 byte (4 < 256)."""
    weight = torch.zeros(300, 70_000)
    weight[0, 1], weight[5, 69_999], weight[299, 0], weight[299, 7] = 1, 2, 3, 4
    assert csr_bytes(weight) == 4 * (4 + 4) + 301 * 1
    assert csr_bytes(weight, value_bytes=1) == 4 * (1 + 4) + 301
    dense = torch.ones(3, 4)  # every entry stored: more bytes than the dense 48
    assert csr_bytes(dense) == 12 * (4 + 1) + 4 * 1 > 48
