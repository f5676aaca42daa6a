"""lecture_lib.models.spanbert: the span boundary head against its equations written out, and L = L_MLM + L_SBO."""

import pytest
import torch
import torch.nn.functional as F

from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.spanbert import SpanBertForPreTraining
from lecture_lib.objectives.span_masking import span_boundaries

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)

pytestmark = pytest.mark.usefixtures("float64")


def batch():
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 97, (2, 12), generator=g)
    labels = torch.full_like(input_ids, -100)
    labels[0, 3:7] = input_ids[0, 3:7]  # a span of 4 tokens: boundaries 2 and 7
    labels[0, 9] = input_ids[0, 9]
    labels[1, 1:3] = input_ids[1, 1:3]
    masked = torch.where(labels != -100, 4, input_ids)
    return masked, labels


def written_out(model, hidden, labels):
    """y_i = LN(GELU(W2 LN(GELU(W1 [x_(s-1); x_(e+1); p_(i-s)])))), logits y_i Eᵀ + b, token by token."""
    first, _, norm1, second, _, norm2 = model.sbo.mlp
    embeddings = model.bert.embeddings.word_embeddings.weight
    logits, targets = [], []
    for r, row in enumerate(labels.tolist()):
        for i, label in enumerate(row):
            if label == -100:
                continue
            s, e = i, i
            while row[s - 1] != -100:
                s -= 1
            while row[e + 1] != -100:
                e += 1
            h0 = torch.cat([hidden[r, s - 1], hidden[r, e + 1], model.sbo.position_embeddings.weight[i - s]])
            h1 = F.layer_norm(F.gelu(h0 @ first.weight.T + first.bias), (32,), norm1.weight, norm1.bias, 1e-12)
            y = F.layer_norm(F.gelu(h1 @ second.weight.T + second.bias), (32,), norm2.weight, norm2.bias, 1e-12)
            logits.append(y @ embeddings.T + model.sbo.bias)
            targets.append(label)
    return torch.stack(logits), torch.tensor(targets)


def test_sbo_head_equals_its_equations_and_the_loss_is_mlm_plus_sbo():
    torch.manual_seed(0)
    model = SpanBertForPreTraining(BertConfig(**SMALL)).eval()
    with torch.no_grad():
        for p in model.sbo.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    masked, labels = batch()
    out = model(masked, labels=labels)
    hidden = model.bert(masked).last_hidden_state
    spans = span_boundaries(labels)
    logits = model.sbo(hidden, spans["row"], spans["left"], spans["right"], spans["offset"])
    expected_logits, targets = written_out(model, hidden, labels)
    torch.testing.assert_close(logits, expected_logits)
    torch.testing.assert_close(out.sbo_loss, F.cross_entropy(expected_logits, targets))
    torch.testing.assert_close(out.loss, out.mlm_loss + out.sbo_loss)
    # the MLM part is BERT's own, on the same weights
    bert = BertForPreTraining(BertConfig(**SMALL)).eval()
    bert.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("sbo.")})
    torch.testing.assert_close(out.mlm_loss, bert(masked, labels=labels).mlm_loss)
    # and with NSP labels the pair loss is added too
    with_nsp = model(masked, labels=labels, next_sentence_label=torch.tensor([0, 1]))
    torch.testing.assert_close(with_nsp.loss, with_nsp.mlm_loss + with_nsp.sbo_loss + with_nsp.nsp_loss)


def test_the_sbo_reads_only_the_boundaries():
    """The head sees the final states at the two boundaries, never those of the span's own tokens."""
    model = SpanBertForPreTraining(BertConfig(**SMALL)).eval()
    masked, labels = batch()
    hidden = model.bert(masked).last_hidden_state.detach().requires_grad_()
    spans = span_boundaries(labels)
    model.sbo(hidden, spans["row"], spans["left"], spans["right"], spans["offset"]).sum().backward()
    touched = hidden.grad.abs().sum(-1) > 0
    assert not touched[labels != -100].any()
    assert touched[0, 2] and touched[0, 7] and touched[1, 0] and touched[1, 3]


def test_masked_only_and_too_long_spans():
    model = SpanBertForPreTraining(BertConfig(**SMALL), max_span_tokens=3).eval()
    masked, labels = batch()
    with pytest.raises(ValueError, match="a masked span of 4 tokens is longer than the 3 relative positions"):
        model(masked, labels=labels)
    model = SpanBertForPreTraining(BertConfig(**SMALL)).eval()
    torch.testing.assert_close(model(masked, labels=labels, masked_only=True).loss, model(masked, labels=labels).loss)
