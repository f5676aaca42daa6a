"""lecture_lib.models.activations against transformers' table of the same names."""

import pytest
import torch
from transformers.activations import ACT2FN

from lecture_lib.models.activations import ACTIVATIONS, activation
from lecture_lib.models.bert import BertConfig
from lecture_lib.models.transformer import TransformerConfig


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_equals_transformers(name):
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    torch.testing.assert_close(activation(name)(x), ACT2FN[name](x))


def test_both_configs_accept_the_same_names_and_refuse_others():
    for name in ACTIVATIONS:
        assert BertConfig(hidden_act=name).hidden_act == name
        assert TransformerConfig(activation_function=name).activation_function == name
    with pytest.raises(
        ValueError, match="hidden_act: expected one of gelu, gelu_new, gelu_pytorch_tanh, relu, got 'swish'"
    ):
        BertConfig(hidden_act="swish")
