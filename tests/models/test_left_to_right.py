"""lecture_lib.models.left_to_right: BERT's encoder with a causal mask, proven causal by its gradients and equal to
``transformers``' BERT run as a decoder (``is_decoder=True``: causal self-attention), and its task heads."""

import pytest
import torch
import transformers

from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.heads import BertForQuestionAnswering, BertForTokenClassification
from lecture_lib.models.left_to_right import LeftToRightBertModel, left_to_right_head

CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
IDS = torch.tensor([[2, 7, 9, 11, 5, 3], [2, 8, 6, 3, 0, 0]])
KEEP = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])


def _influence(model: BertModel) -> torch.Tensor:
    """(T, T): |d output[i] / d embedding[j]| summed over the batch's first row, from the gradients."""
    captured = {}

    def keep_embeddings(module, inputs, output):
        output.retain_grad()
        captured["x"] = output

    handle = model.embeddings.register_forward_hook(keep_embeddings)
    out = model(IDS[:1], KEEP[:1]).last_hidden_state  # (1, T, H)
    handle.remove()
    direction = torch.randn(
        out.shape[-1], generator=torch.Generator().manual_seed(0)
    )  # a LayerNorm's outputs sum to a constant
    rows = []
    for i in range(IDS.shape[1]):
        (grad,) = torch.autograd.grad(out[0, i] @ direction, captured["x"], retain_graph=True)
        rows.append(grad[0].norm(dim=-1))
    return torch.stack(rows)


def test_no_position_reads_a_later_token():
    torch.manual_seed(0)
    causal = LeftToRightBertModel(CONFIG).eval()
    influence = _influence(causal)
    later = torch.ones_like(influence, dtype=torch.bool).triu(1)
    assert influence[later].abs().max() == 0  # nothing to the right reaches a position
    assert (influence[~later] > 0).all()  # and everything on its left (and itself) does
    bidirectional = BertModel(CONFIG).eval()
    bidirectional.load_state_dict(causal.state_dict())
    assert (_influence(bidirectional)[later] > 0).all()  # the same weights without the mask read the right side


def test_equals_transformers_bert_as_a_decoder():
    torch.manual_seed(0)
    ours = LeftToRightBertModel(CONFIG).double().eval()
    hf_config = ours.to_hf(attn_implementation="eager").config
    hf_config.is_decoder = True
    theirs = transformers.BertModel(hf_config).double().eval()
    theirs.load_state_dict(ours.to_hf().state_dict())
    types = torch.zeros_like(IDS)
    with torch.no_grad():
        a = ours(IDS, KEEP, types).last_hidden_state
        b = theirs(input_ids=IDS, attention_mask=KEEP, token_type_ids=types).last_hidden_state
    real = KEEP.bool()
    torch.testing.assert_close(a[real], b[real], atol=1e-9, rtol=1e-9)


def test_heads_copy_the_encoder_and_stay_causal():
    torch.manual_seed(0)
    encoder = BertModel(CONFIG)
    head_class = left_to_right_head(BertForTokenClassification)
    assert head_class is left_to_right_head(BertForTokenClassification)  # one class per head
    tagger = head_class.from_encoder(encoder, 7).eval()
    assert isinstance(tagger.bert, LeftToRightBertModel)
    assert all(torch.equal(a, b) for a, b in zip(tagger.bert.state_dict().values(), encoder.state_dict().values()))
    changed = IDS.clone()
    changed[:, 4] = 13
    with torch.no_grad():
        before, after = tagger(IDS).logits, tagger(changed).logits
    torch.testing.assert_close(before[:, :4], after[:, :4])  # the tags before position 4 cannot see it
    assert not torch.allclose(before[0, 4:], after[0, 4:])
    assert isinstance(left_to_right_head(BertForQuestionAnswering).from_encoder(encoder).bert, LeftToRightBertModel)


def test_refuses_what_it_cannot_do():
    model = LeftToRightBertModel(CONFIG)
    with pytest.raises(ValueError, match="unpad"):
        model(IDS, KEEP, unpad=True)
    with pytest.raises(ValueError, match="BERT task head"):
        left_to_right_head(torch.nn.Linear)
