"""lecture_lib.models.unpadding: packing against per-sequence slicing, attention against PyTorch run on each
sequence alone, and BERT on packed tokens against transformers' padded BertForPreTraining (float64)."""

import pytest
import torch
import torch.nn.functional as F
import transformers

from lecture_lib.attention import attend
from lecture_lib.models.bert import BertConfig, BertForPreTraining, BertModel
from lecture_lib.models.unpadding import Packing, attend_packed, block_diagonal_mask, pad, sequence_lengths, unpad

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)
LENGTHS = [5, 1, 16, 9]  # very different lengths: a single token ([CLS] alone) and a full-length sequence
T = 16


pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def right_padded(lengths=LENGTHS, length=T):
    return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).long()  # (B, T)


def pretraining_batch(lengths=LENGTHS):
    attention_mask = right_padded(lengths)
    input_ids = torch.randint(1, 97, attention_mask.shape).masked_fill(attention_mask == 0, 0)
    token_type_ids = ((torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None] // 2) & (attention_mask == 1)).long()
    labels = torch.full_like(input_ids, -100)
    for b, n in enumerate(lengths):  # about a third of each sequence's real tokens, at least one
        where = torch.randperm(n)[: max(1, n // 3)]
        labels[b, where] = input_ids[b, where]
    return dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        labels=labels,
        next_sentence_label=torch.tensor([0, 1, 1, 0]),
    )


def test_unpad_and_pad_match_per_sequence_slicing():
    hidden = torch.randn(len(LENGTHS), T, 3, requires_grad=True)
    packed, indices, cu_seqlens, max_len = unpad(hidden, right_padded())
    expected = torch.cat([hidden[b, :n] for b, n in enumerate(LENGTHS)])
    assert torch.equal(packed, expected)
    assert cu_seqlens.tolist() == [0, 5, 6, 22, 31] and cu_seqlens.dtype == torch.int32 and max_len == 16
    assert indices.tolist() == [b * T + t for b, n in enumerate(LENGTHS) for t in range(n)]
    back = pad(packed, indices, len(LENGTHS), T)
    assert torch.equal(back, hidden * right_padded()[..., None])  # the real tokens back, zeros at the padding
    back.sum().backward()
    assert torch.equal(hidden.grad, right_padded()[..., None].expand_as(hidden).to(hidden.dtype))


def test_block_diagonal_mask_is_one_block_per_sequence():
    _, _, cu_seqlens, _ = unpad(torch.zeros(len(LENGTHS), T), right_padded())
    expected = torch.block_diag(*[torch.ones(n, n) for n in LENGTHS]).bool()
    assert torch.equal(block_diagonal_mask(cu_seqlens), expected)


def test_packed_attention_equals_attention_on_each_sequence_alone_in_values_and_gradients():
    heads, dim = 2, 8
    packing, _ = Packing.pack(right_padded(), torch.zeros(len(LENGTHS), T))
    n = int(packing.cu_seqlens[-1])
    q, k, v = (torch.randn(1, heads, n, dim, requires_grad=True) for _ in range(3))
    ours = attend_packed(q, k, v, packing)
    ours.pow(2).sum().backward()
    got = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    edges = packing.cu_seqlens.tolist()
    reference = torch.cat(
        [
            F.scaled_dot_product_attention(q[..., a:b, :], k[..., a:b, :], v[..., a:b, :])
            for a, b in zip(edges, edges[1:])
        ],
        dim=2,
    )  # PyTorch on each sequence alone
    torch.testing.assert_close(ours, reference, atol=1e-12, rtol=1e-12)
    reference.pow(2).sum().backward()
    for g, x in zip(got, (q, k, v)):
        torch.testing.assert_close(g, x.grad, atol=1e-12, rtol=1e-12)
    # and the written-out definition: one sequence of N tokens under the block-diagonal mask
    written_out, _ = attend(q, k, v, block_diagonal_mask(packing.cu_seqlens), need_weights=True)
    torch.testing.assert_close(ours, written_out, atol=1e-12, rtol=1e-12)


def hf_pretraining_pair():
    hf = transformers.BertForPreTraining(transformers.BertConfig(**SMALL, attn_implementation="eager")).eval()
    return BertForPreTraining.from_hf(hf).eval(), hf


@pytest.mark.parametrize("masked_only", [False, True], ids=["dense-head", "masked-only-head"])
def test_unpadded_pretraining_equals_padded_transformers_in_outputs_loss_and_every_gradient(masked_only):
    ours, hf = hf_pretraining_pair()
    batch = pretraining_batch()
    real = batch["attention_mask"].bool()
    a = ours(**batch, unpad=True, masked_only=masked_only, output_hidden_states=True)
    b = hf(**batch, output_hidden_states=True)
    tol = dict(atol=1e-10, rtol=1e-10)
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):  # embeddings, then every layer
        torch.testing.assert_close(x[real], y[real], **tol)
        assert torch.all(x[~real] == 0)  # nothing is computed at the padding
    expected_logits = b.prediction_logits[batch["labels"] != -100] if masked_only else b.prediction_logits[real]
    got_logits = a.prediction_logits if masked_only else a.prediction_logits[real]
    torch.testing.assert_close(got_logits, expected_logits, **tol)
    torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, **tol)
    torch.testing.assert_close(a.loss, b.loss, **tol)
    a.loss.backward()
    b.loss.backward()
    ours_grads = {ours.family.to_theirs(n): p.grad for n, p in ours.named_parameters()}
    theirs = dict(hf.named_parameters())
    assert ours_grads.keys() == theirs.keys()
    for name, g in ours_grads.items():
        torch.testing.assert_close(g, theirs[name].grad, **tol, msg=f"gradient of {name}")


def test_unpadded_encoder_equals_transformers_pooler_included_without_a_mask_and_with_position_ids():
    hf = transformers.BertModel(transformers.BertConfig(**SMALL, attn_implementation="eager")).eval()
    ours = BertModel.from_hf(hf).eval()
    batch = {k: v for k, v in pretraining_batch().items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    shuffled = dict(batch, position_ids=torch.randperm(T)[None, :])  # every token keeps the position it was given
    for inputs in (batch, dict(input_ids=batch["input_ids"]), shuffled):  # no mask: every token is real
        a, b = ours(**inputs, unpad=True), hf(**inputs)
        real = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
        torch.testing.assert_close(a.last_hidden_state[real], b.last_hidden_state[real], atol=1e-10, rtol=1e-10)
        torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize(
    "mask, message",
    [
        ([[1, 0, 1]], "right-padded"),  # a hole in the middle
        ([[0, 1, 1]], "right-padded"),  # left padding
        ([[1, 1, 1], [0, 0, 0]], "right-padded"),  # an empty sequence
        ([[1, 2, 0]], "0s and 1s"),
    ],
)
def test_masks_that_cannot_be_unpadded_are_refused(mask, message):
    with pytest.raises(ValueError, match=message):
        sequence_lengths(torch.tensor(mask))
    model = BertModel(BertConfig(**SMALL))
    mask = torch.tensor(mask)
    with pytest.raises(ValueError, match=message):
        model(torch.ones_like(mask), attention_mask=mask, unpad=True)


def test_other_bad_inputs_raise():
    model = BertForPreTraining(BertConfig(**SMALL))
    batch = pretraining_batch()
    with pytest.raises(ValueError, match="output_attentions"):
        model(batch["input_ids"], batch["attention_mask"], unpad=True, output_attentions=True)
    labels = batch["labels"].clone()
    labels[1, 3] = 7  # a label on a padded position
    with pytest.raises(ValueError, match="labels -100 wherever attention_mask is 0"):
        model(batch["input_ids"], batch["attention_mask"], labels=labels, unpad=True)
    with pytest.raises(ValueError, match="like the attention_mask"):
        unpad(torch.zeros(2, 3, 4), torch.ones(2, 4))
    with pytest.raises(ValueError, match="one index per packed row"):
        pad(torch.zeros(3, 4), torch.arange(2), 1, 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the variable-length flash kernel runs on CUDA only")
def test_unpadded_bf16_on_cuda_matches_the_padded_model():
    """bf16 autocast takes attend_packed's varlen_attn branch; the padded model is the reference, to bf16 rounding."""
    torch.set_default_dtype(torch.float32)
    model = BertForPreTraining(BertConfig(**SMALL)).cuda().eval()
    batch = {k: v.cuda() for k, v in pretraining_batch().items()}
    losses = []
    for unpadded in (False, True):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            losses.append(model(**batch, unpad=unpadded, masked_only=True).loss)
    torch.testing.assert_close(losses[1], losses[0], atol=2e-2, rtol=2e-2)
