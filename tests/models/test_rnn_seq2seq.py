import torch

from lecture_lib.attention import scaled_dot_product_attention
from lecture_lib.data.toy import BOS, EOS, PAD, make_batch, reversal_batch
from lecture_lib.models.rnn_seq2seq import (
    RNNSeq2Seq,
)


def test_reversal_batch_framing():
    batch = reversal_batch(4, 2, 5, 10, torch.Generator().manual_seed(0))
    for i, n in enumerate(batch.src_lengths.tolist()):
        source = batch.src[i, :n]
        assert torch.all(batch.src[i, n:] == PAD)
        assert batch.tgt_in[i, 0] == BOS and torch.equal(batch.tgt_in[i, 1 : n + 1], source.flip(0))
        assert torch.equal(batch.tgt_out[i, :n], source.flip(0)) and batch.tgt_out[i, n] == EOS


def test_attention_ignores_padding_and_alignments_are_distributions():
    torch.manual_seed(0)
    model = RNNSeq2Seq(13, 16, attention=True).eval()
    short = make_batch([torch.tensor([5, 6, 7])], [torch.tensor([7, 6, 5])])
    padded = make_batch(
        [torch.tensor([5, 6, 7]), torch.tensor([3, 4, 5, 6, 7, 8])],
        [torch.tensor([7, 6, 5]), torch.tensor([8, 7, 6, 5, 4, 3])],
    )
    logits_short, alpha_short = model(short)
    logits_padded, alpha_padded = model(padded)
    torch.testing.assert_close(logits_short[0], logits_padded[0, :4])
    assert torch.all(alpha_padded[0, :, 3:] == 0)
    torch.testing.assert_close(alpha_padded.sum(-1), torch.ones(2, 7))


def test_decoder_attention_is_the_unscaled_dot_product_of_the_equations():
    torch.manual_seed(0)
    model = RNNSeq2Seq(13, 8, attention=True).eval()
    batch = make_batch([torch.tensor([4, 5, 6, 7])], [torch.tensor([7, 6, 5, 4])])
    with torch.no_grad():
        h, last = model.encode(batch.src, batch.src_lengths)
        s, _ = model.decoder(model.embed(batch.tgt_in), last)
        _, _, alpha = model.decode(batch.tgt_in, h, batch.src_lengths, last)
    torch.testing.assert_close(alpha, torch.softmax(s @ h.transpose(1, 2), dim=-1))
    torch.testing.assert_close(alpha, scaled_dot_product_attention(s, h, h, scale=1.0)[1])
