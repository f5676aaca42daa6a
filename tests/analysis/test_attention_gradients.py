"""lecture_lib.analysis.attention_gradients: Clark et al.'s no-op test, its gradients against transformers'
(eager attention, ``retain_grad``) and its shares against loops written out here."""

import tempfile

import pytest
import torch
import transformers

from lecture_lib.analysis.attention_gradients import no_op_profile, row_shares
from lecture_lib.models.bert import BertConfig, BertModel


def test_row_shares_by_hand():
    """Two rows of one head: row 0 sends 0.8 to key 0 (S) and has gradients 0.1, -0.3 (a quarter on S); row 1
    gets no gradient and is left out; row 2 is not a query."""
    w = torch.tensor([[[[0.8, 0.2, 0.0], [0.5, 0.5, 0.0], [0.3, 0.3, 0.4]]]])
    g = torch.tensor([[[[0.1, -0.3, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]]])
    mass, share, rows = row_shares(w, g, torch.tensor([[True, False, False]]), torch.tensor([[True, True, False]]))
    torch.testing.assert_close(mass, torch.tensor([0.8]))
    torch.testing.assert_close(share, torch.tensor([0.25]))
    assert rows.tolist() == [1]


def test_no_op_profile_equals_transformers_gradients_and_written_out_shares():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    ours = BertModel(config).eval()
    with tempfile.TemporaryDirectory() as directory:
        ours.save_pretrained(directory)
        theirs = transformers.BertModel.from_pretrained(directory, attn_implementation="eager").eval()
    ids = torch.tensor([[2, 7, 9, 3, 0], [2, 5, 6, 8, 3]])
    mask = (ids != 0).long()
    direction = torch.randn(2, 5, 16)
    batch = dict(input_ids=ids, attention_mask=mask)

    def forward(b):
        out = ours(b["input_ids"], attention_mask=b["attention_mask"], output_attentions=True)
        return (out.last_hidden_state * direction).sum(), out.attentions

    target = ids == 2  # the [CLS]-like first token
    profile = no_op_profile(
        forward, [batch], {"first": lambda b: b["input_ids"] == 2}, lambda b: b["attention_mask"].bool()
    )["first"]

    out = theirs(input_ids=ids, attention_mask=mask, output_attentions=True)
    for a in out.attentions:
        a.retain_grad()
    (out.last_hidden_state * direction).sum().backward()
    for layer, a in enumerate(out.attentions):
        for head in range(2):
            masses, shares = [], []
            for b in range(2):
                for i in range(5):
                    if not mask[b, i]:
                        continue
                    g = a.grad[b, head, i].abs()
                    masses.append(float(a.detach()[b, head, i][target[b]].sum()))
                    shares.append(float(g[target[b]].sum() / g.sum()))
            assert float(profile.mass[layer, head]) == pytest.approx(sum(masses) / len(masses), rel=1e-5)
            assert float(profile.gradient[layer, head]) == pytest.approx(sum(shares) / len(shares), rel=1e-4)


def test_a_key_the_output_ignores_gets_no_gradient_share():
    """The no-op by construction: a key whose value vector is zero changes nothing, whatever weight it gets."""
    torch.manual_seed(1)
    scores = torch.randn(1, 1, 4, 4, requires_grad=True)
    values = torch.randn(1, 1, 4, 3)
    values[..., 0, :] = 0  # key 0 contributes nothing to the output

    def forward(_):
        weights = scores.softmax(-1)
        return (weights @ values).pow(2).sum(), (weights,)

    batch = dict(ids=torch.zeros(1, 4))
    profile = no_op_profile(
        forward,
        [batch],
        {"key 0": lambda b: torch.tensor([[True, False, False, False]])},
        lambda b: torch.ones(1, 4, dtype=torch.bool),
    )["key 0"]
    assert float(profile.mass) > 0.05 and float(profile.gradient) == 0.0
