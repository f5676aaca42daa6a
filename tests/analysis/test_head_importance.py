"""lecture_lib.analysis.head_importance: Michel et al.'s identity (gate gradient = head output times its
gradient, summed), and the ablation experiments on a score whose value for every mask is known."""

import pytest
import torch

from lecture_lib.analysis.head_importance import (
    all_heads,
    head_importance,
    one_head_per_layer,
    pruning_curve,
    pruning_order,
    without_each_head,
)
from lecture_lib.models.bert import BertConfig, BertForPreTraining

SMALL = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)


def mlm_loss(model, batch, head_mask):
    return model(**batch, head_mask=head_mask).loss


@pytest.mark.usefixtures("float64")
def test_gate_gradient_equals_head_output_times_its_gradient():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**SMALL))
    batches = [dict(input_ids=torch.randint(4, 50, (3, 8)), labels=torch.randint(4, 50, (3, 8))) for _ in range(2)]
    importance = head_importance(model, batches, mlm_loss, normalize=False)
    assert all(p.grad is None for p in model.parameters())
    # the reference: each head's output (the input of attention.output.dense, at gates 1) and its gradient
    outputs = []
    for layer in model.bert.encoder.layer:
        layer.attention.output.dense.register_forward_hook(lambda m, inputs, out: outputs.append(inputs[0]))
    expected = torch.zeros(2, 4, dtype=torch.float64)
    for batch in batches:
        outputs.clear()
        loss = model.eval()(**batch).loss
        gradients = torch.autograd.grad(loss, outputs)
        for layer, (out, grad) in enumerate(zip(outputs, gradients)):
            per_head = (out * grad).view(3, 8, 4, 8).sum(dim=(0, 1, 3))  # Σ over batch, tokens, features
            expected[layer] += per_head.abs()
    torch.testing.assert_close(importance, expected / 2, atol=1e-12, rtol=1e-9)
    normalized = head_importance(model, batches, mlm_loss)
    torch.testing.assert_close(normalized.norm(dim=-1), torch.ones(2, dtype=torch.float64))


def test_ablation_experiments_place_each_score():
    weights = torch.arange(6.0).view(2, 3)

    def evaluate(mask):
        return float((mask * weights).sum())

    mask = torch.ones(2, 3)
    assert without_each_head(evaluate, mask).tolist() == [[15, 14, 13], [12, 11, 10]]
    assert one_head_per_layer(evaluate, mask).tolist() == [[12, 13, 14], [6, 7, 8]]
    order = pruning_order(weights)
    assert order.tolist() == [0, 1, 2, 3, 4, 5]
    assert pruning_curve(evaluate, order, [0, 1, 3, 6], mask) == [15, 15, 12, 0]
    assert all_heads(BertForPreTraining(BertConfig(**SMALL))).shape == (2, 4)
