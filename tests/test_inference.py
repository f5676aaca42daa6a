from types import SimpleNamespace

import pytest
import torch
from torch import nn

from lecture_lib.inference import forward_in_batches


class Tagger(nn.Module):
    """Embeddings, dropout and a linear layer; returns logits and, on request, both hidden layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask, output_hidden_states=False):
        hidden = self.dropout(self.embed(input_ids)) * attention_mask[..., None]
        return SimpleNamespace(
            logits=self.out(hidden), hidden_states=(hidden, hidden * 2) if output_hidden_states else None
        )


def test_batches_give_the_outputs_of_one_forward_pass_in_eval_mode():
    torch.manual_seed(0)
    model = Tagger().train()
    inputs = {"input_ids": torch.randint(20, (10, 5)), "attention_mask": torch.randint(2, (10, 5))}
    out = forward_in_batches(
        model, inputs, ("logits", "hidden_states", "start_logits"), batch_size=4, output_hidden_states=True
    )
    assert model.training  # the mode it was in is restored
    reference = model.eval()(**inputs, output_hidden_states=True)  # one batch of all 10, dropout off
    assert set(out) == {"logits", "hidden_states"}  # start_logits: not returned by this model
    torch.testing.assert_close(out["logits"], reference.logits)
    assert len(out["hidden_states"]) == 2
    for ours, theirs in zip(out["hidden_states"], reference.hidden_states):
        torch.testing.assert_close(ours, theirs)
    assert not out["logits"].requires_grad


def test_inputs_must_share_their_first_dimension():
    with pytest.raises(ValueError, match="one common first dimension, got sizes"):
        forward_in_batches(Tagger(), {"input_ids": torch.zeros(3, 2), "attention_mask": torch.zeros(4, 2)}, ("logits",))
