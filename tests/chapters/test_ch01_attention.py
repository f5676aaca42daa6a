import torch

from lecture_lib.chapters.ch01_attention import (
    BottleneckExperiment,
    accuracy_by_length,
    cost_by_length,
    rnn_greedy_exact_match,
    rnn_seq2seq_loss,
    train_reversal,
)
from lecture_lib.data.toy import EOS, PAD, make_batch
from lecture_lib.models.rnn_seq2seq import RNNSeq2Seq


def test_training_is_deterministic_and_learns():
    exp = BottleneckExperiment(hidden_size=32, steps=60, batch_size=32, min_len=2, max_len=4)
    model_a, history_a = train_reversal(True, exp, seed=1)
    model_b, history_b = train_reversal(True, exp, seed=1)
    assert history_a.loss == history_b.loss
    assert history_a.loss[-1] < 0.7 * history_a.loss[0]
    assert accuracy_by_length(model_a, exp, per_length=20) == accuracy_by_length(model_b, exp, per_length=20)


def test_loss_ignores_padding_positions():
    torch.manual_seed(0)
    model = RNNSeq2Seq(13, 8, attention=False)
    batch = make_batch([torch.tensor([4, 5])], [torch.tensor([5, 4])])
    logits, _ = model(batch)
    expected = torch.nn.functional.cross_entropy(logits[0], batch.tgt_out[0])
    torch.testing.assert_close(rnn_seq2seq_loss(model, batch), expected)



class FixedGreedy:
    """Stands in for an RNNSeq2Seq whose greedy decoding writes the given tokens."""

    def __init__(self, tokens):
        self.tokens = torch.tensor(tokens)

    def greedy(self, src, lengths, max_len):
        return self.tokens[:, :max_len], None


def test_rnn_exact_match_compares_the_targets_real_positions_only():
    batch = make_batch([torch.tensor([4, 5, 6]), torch.tensor([4]), torch.tensor([7])],
                       [torch.tensor([6, 5, 4]), torch.tensor([4]), torch.tensor([7])])
    assert batch.tgt_out.tolist() == [[6, 5, 4, EOS], [4, EOS, PAD, PAD], [7, EOS, PAD, PAD]]
    written = [[6, 5, 4, EOS],  # the target, EOS included: a match
               [4, EOS, 9, 9],  # the target, then tokens after EOS where the target is padding: a match
               [7, 8, EOS, PAD]]  # a token too many before EOS: no match
    assert rnn_greedy_exact_match(FixedGreedy(written), batch).tolist() == [True, True, False]


def test_naive_attention_memory_is_quadratic_and_fused_linear():
    small, large = cost_by_length([256, 512], repeats=1)
    assert large["naive_bytes"] / small["naive_bytes"] > 3.0
    assert large["fused_bytes"] / small["fused_bytes"] < 2.2

