"""Head masking and pruning in lecture_lib.models.bert against transformers with the heads' weights zeroed.

transformers 5 has neither ``head_mask`` nor ``prune_heads``: the reference is weight surgery on its BertModel.
Head h of a layer owns rows h·d … (h+1)·d of ``query``, ``key``, ``value`` and the same columns of
``attention.output.dense``; zeroing the value rows (weights and bias) makes the head output 0, as a mask of 0 does.
"""

import pytest
import torch
import transformers

from lecture_lib.models.bert import BertConfig, BertForPreTraining, BertModel
from lecture_lib.models.heads import BertForSequenceClassification
from tests.models.test_bert import SMALL, hf_pair, inputs

pytestmark = pytest.mark.usefixtures("float64")

REMOVED = {0: [1, 3], 1: [2]}


def head_mask_of(removed, layers=2, heads=4):
    mask = torch.ones(layers, heads, dtype=torch.float64)
    for layer, hs in removed.items():
        mask[layer, hs] = 0
    return mask


def zero_heads(hf, removed, parts=("value",)):
    """Zero, in transformers' model, the rows of ``parts`` (weights and biases) that belong to the removed heads."""
    d = hf.config.hidden_size // hf.config.num_attention_heads
    with torch.no_grad():
        for layer, hs in removed.items():
            attention = hf.encoder.layer[layer].attention
            for h in hs:
                rows = slice(h * d, (h + 1) * d)
                for part in parts:
                    if part == "output":
                        attention.output.dense.weight[:, rows] = 0
                    else:
                        getattr(attention.self, part).weight[rows] = 0
                        getattr(attention.self, part).bias[rows] = 0
    return hf


def test_head_mask_equals_transformers_with_the_value_rows_zeroed():
    ours, hf = hf_pair(BertModel, "BertModel")
    batch = inputs()
    expected = zero_heads(hf, REMOVED)(**batch).last_hidden_state
    got = ours(**batch, head_mask=head_mask_of(REMOVED)).last_hidden_state
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


def test_zeroing_the_output_columns_removes_a_head_too():
    ours, hf = hf_pair(BertModel, "BertModel")
    batch = inputs()
    expected = zero_heads(hf, REMOVED, parts=("output",))(**batch).last_hidden_state
    torch.testing.assert_close(ours(**batch, head_mask=head_mask_of(REMOVED)).last_hidden_state, expected)


def test_zeroing_queries_and_keys_alone_does_not_remove_a_head():
    ours, hf = hf_pair(BertModel, "BertModel")
    batch = inputs()
    uniform = zero_heads(hf, REMOVED, parts=("query", "key"))(**batch, output_attentions=True)
    removed = ours(**batch, head_mask=head_mask_of(REMOVED)).last_hidden_state
    # with q = k = 0 every score is 0: the head attends uniformly over the real tokens, and still mixes their values
    real = batch["attention_mask"][:, None, :].expand(-1, 9, -1).double()
    torch.testing.assert_close(uniform.attentions[0][:, 1], real / real.sum(-1, keepdim=True))
    assert (uniform.last_hidden_state - removed).abs().max() > 1e-3


@pytest.mark.parametrize("unpad", [False, True], ids=["padded", "unpadded"])
def test_masking_zeroing_and_pruning_give_equal_logits(unpad):
    model = BertForPreTraining(BertConfig(**SMALL)).eval()
    batch = inputs()
    real = batch["attention_mask"].bool()  # unpadded, the padded positions are not computed
    masked = model(**batch, head_mask=head_mask_of(REMOVED), unpad=unpad).prediction_logits[real]
    hf = model.to_hf().eval()
    zero_heads(hf.bert, REMOVED)
    torch.testing.assert_close(masked, hf(**batch).prediction_logits[real])
    model.prune_heads(REMOVED)
    torch.testing.assert_close(model(**batch, unpad=unpad).prediction_logits[real], masked)
    attention = model.bert.encoder.layer[0].attention
    assert attention.self.query.weight.shape == (16, 32) and attention.output.dense.weight.shape == (32, 16)
    assert attention.self.heads == [0, 2] and model.config.pruned_heads == {0: [1, 3], 1: [2]}


def test_a_mask_on_a_pruned_model_is_read_by_original_head_index():
    model = BertModel(BertConfig(**SMALL)).eval()
    batch = inputs()
    both = head_mask_of({0: [1, 2]})
    expected = model(**batch, head_mask=both).last_hidden_state
    model.prune_heads({0: [1]})
    model.prune_heads({0: [1, 2]})  # head 1 is gone already: skipped
    torch.testing.assert_close(model(**batch, head_mask=head_mask_of({})).last_hidden_state, expected)
    torch.testing.assert_close(model(**batch, head_mask=both).last_hidden_state, expected)
    assert model.config.pruned_heads == {0: [1, 2]}


def test_pruning_nothing_and_masking_nothing_change_nothing():
    model = BertModel(BertConfig(**SMALL)).eval()
    batch = inputs()
    before = model(**batch).last_hidden_state
    config = model.config
    model.prune_heads({})
    model.prune_heads({1: []})
    assert model.config.pruned_heads == {} and model.encoder.layer[1].attention.self.query.weight.shape == (32, 32)
    torch.testing.assert_close(model(**batch).last_hidden_state, before, atol=0, rtol=0)
    torch.testing.assert_close(model(**batch, head_mask=head_mask_of({})).last_hidden_state, before, atol=0, rtol=0)
    assert config.pruned_heads == {}


def test_a_pruned_model_saves_and_loads_and_leaves_a_shared_config_alone(tmp_path):
    encoder = BertModel(BertConfig(**SMALL)).eval()
    head = BertForSequenceClassification.from_encoder(encoder, 3).eval()
    head.prune_heads(REMOVED)
    assert encoder.config.pruned_heads == {} and head.bert.config is head.config
    head.save_pretrained(tmp_path)
    loaded = BertForSequenceClassification.from_pretrained(tmp_path).to(torch.float64)
    assert loaded.config.pruned_heads == REMOVED
    batch = inputs()
    torch.testing.assert_close(loaded(**batch).logits, head(**batch).logits)
    copy = BertForSequenceClassification.from_encoder(head.bert, 3, dropout=0.0)
    assert copy.config.pruned_heads == REMOVED
    with pytest.raises(ValueError, match="transformers 5 has no pruned heads"):
        head.to_hf()


def test_bad_head_masks_and_prunings_raise():
    model = BertModel(BertConfig(**SMALL))
    batch = inputs()
    with pytest.raises(ValueError, match=r"head_mask of shape \(2, 4\)"):
        model(**batch, head_mask=torch.ones(4))
    with pytest.raises(ValueError, match="cannot remove all 4 heads of layer 1"):
        model.prune_heads({1: [0, 1, 2, 3]})
    with pytest.raises(ValueError, match="cannot remove all 4 heads of layer 1"):
        model.prune_heads({1: [0, 1]})
        model.prune_heads({1: [2, 3]})
    with pytest.raises(ValueError, match=r"expected layers in \[0, 2\)"):
        model.prune_heads({2: [0]})
    with pytest.raises(ValueError, match=r"expected heads in \[0, 4\)"):
        model.prune_heads({0: [4]})


def test_attention_weights_equal_transformers_eager_on_the_real_minilm(minilm):
    ours = BertModel.from_pretrained(minilm)
    hf = transformers.BertModel.from_pretrained(str(minilm), attn_implementation="eager").eval()
    batch = {k: v[:, :9] for k, v in inputs(vocab=1000).items()}
    a, b = ours(**batch, output_attentions=True), hf(**batch, output_attentions=True)
    for x, y in zip(a.attentions, b.attentions):
        torch.testing.assert_close(x, y.to(x.dtype), atol=1e-5, rtol=1e-5)
