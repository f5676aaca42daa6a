import math

import torch

from lecture_lib.attention import global_window_mask, sliding_window_mask
from lecture_lib.chapters.ch01_attention import (
    Chapter01Config,
    accuracy_by_length,
    cost_by_length,
    key_variance_scores,
    layers_to_reach,
    neighbour_heads,
    rnn_greedy_exact_match,
    rnn_seq2seq_loss,
    single_head_error,
    train_reversal,
)
from lecture_lib.chapters.solutions.ch01_attention import AdditiveAttentionSeq2Seq
from lecture_lib.data.toy import EOS, PAD, make_batch
from lecture_lib.models.rnn_seq2seq import RNNSeq2Seq
from lecture_lib.train import TrainConfig


def test_training_is_deterministic_and_learns():
    exp = Chapter01Config(hidden_size=32, min_len=2, max_len=4, train=TrainConfig(steps=60, batch_size=32, lr=3e-3))
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
    batch = make_batch(
        [torch.tensor([4, 5, 6]), torch.tensor([4]), torch.tensor([7])],
        [torch.tensor([6, 5, 4]), torch.tensor([4]), torch.tensor([7])],
    )
    assert batch.tgt_out.tolist() == [[6, 5, 4, EOS], [4, EOS, PAD, PAD], [7, EOS, PAD, PAD]]
    written = [
        [6, 5, 4, EOS],  # the target, EOS included: a match
        [4, EOS, 9, 9],  # the target, then tokens after EOS where the target is padding: a match
        [7, 8, EOS, PAD],
    ]  # a token too many before EOS: no match
    assert rnn_greedy_exact_match(FixedGreedy(written), batch).tolist() == [True, True, False]


def test_naive_attention_memory_is_quadratic_and_fused_linear():
    small, large = cost_by_length([256, 512], repeats=1)
    assert large["naive_bytes"] / small["naive_bytes"] > 3.0
    assert large["fused_bytes"] / small["fused_bytes"] < 2.2


def test_exercise_1_additive_attention_scores_and_keeps_long_strings():
    """Exercise 1: α^t_i = softmax_i(vᵀ tanh(W_1 h_i + W_2 s_t)) over the real source positions, written out one
    score at a time; trained, the additive model keeps most of its exact match on the longest strings, far
    above the model without attention."""
    torch.manual_seed(0)
    model = AdditiveAttentionSeq2Seq(13, 8).eval()
    batch = make_batch([torch.tensor([4, 5, 6]), torch.tensor([7])], [torch.tensor([6, 5, 4]), torch.tensor([7])])
    with torch.no_grad():
        _, alpha = model(batch)
        states, last = model.encode(batch.src, batch.src_lengths)
        s, _ = model.decoder(model.embed(batch.tgt_in), last)
        for b, n in enumerate(batch.src_lengths.tolist()):
            for t in range(batch.tgt_in.shape[1]):
                e = torch.stack(
                    [
                        model.v.weight[0] @ torch.tanh(model.w1.weight @ states[b, i] + model.w2.weight @ s[b, t])
                        for i in range(n)
                    ]
                )
                torch.testing.assert_close(alpha[b, t, :n], e.softmax(0))
                assert (alpha[b, t, n:] == 0).all()  # padded source positions get no weight
    exp = Chapter01Config(hidden_size=32, min_len=2, max_len=7, train=TrainConfig(steps=300, batch_size=32, lr=3e-3))
    additive = accuracy_by_length(train_reversal("additive", exp)[0], exp, per_length=100)
    plain = accuracy_by_length(train_reversal(False, exp)[0], exp, per_length=100)
    assert additive[exp.max_len] > 0.5 * additive[exp.min_len], additive  # 0.91 against 0.98
    assert additive[exp.max_len] > plain[exp.max_len] + 0.3, (additive, plain)  # 0.91 against 0.03


def test_exercise_2_keys_of_variance_4_need_the_factor_one_over_2_sqrt_dk():
    """Exercise 2: Var(q·k)/d_k ≈ 4 (3.91 at d_k = 16, 4.00 at 256 over 4,000 draws) and 1/(2√d_k) brings the
    variance back to about 1 (0.98 and 1.00). Tolerance: the variance of 4,000 draws has a relative standard
    error of about √((κ - 1)/4000) ≈ 0.025 (kurtosis κ ≤ 3.4), so 0.3 on 4 is over 3 standard errors."""
    for d_k, raw, scaled in ((16, 3.91, 0.98), (256, 4.00, 1.00)):
        variance = key_variance_scores(d_k, 2.0, 1.0) / d_k
        restored = key_variance_scores(d_k, 2.0, 1 / (2 * math.sqrt(d_k)))
        assert abs(variance - 4) < 0.3 and abs(restored - 1) < 0.075, (d_k, variance, restored)
        assert (round(variance, 2), round(restored, 2)) == (raw, scaled)  # the numbers the exercise quotes
        assert abs(key_variance_scores(d_k, 2.0, 1 / math.sqrt(d_k)) - 4) < 0.3  # the paper's factor leaves 4


def test_exercise_3_two_heads_give_both_neighbours_one_head_cannot():
    """Exercise 3: the masked two-head construction equals (x_{i-1}, x_{i+1}) to float rounding; one trained
    head stops at a relative squared error of 0.5 or more, and 0.5 is reached when its mask allows only the two
    neighbours (α = ½ each), so the bound is tight and the training able to find it."""
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(neighbour_heads(x)[1:-1], torch.cat([x[:-2], x[2:]], dim=-1), atol=1e-6, rtol=0)
    assert single_head_error() > 0.5 - 0.03  # no position information: it cannot even find the neighbours
    assert abs(single_head_error(neighbours_only=True) - 0.5) < 0.03  # 0.497


def test_exercise_4_a_window_of_3_needs_11_layers_a_global_token_1():
    """Exercise 4: 11 layers (3 · 10 = 30 < 31 ≤ 3 · 11) from position 0 to 31 without a global token, 1 with
    one at position 0; checked against the powers of the mask (position 31 hears position 0 after L layers
    when (M^L)[31, 0] > 0)."""
    window = sliding_window_mask(32, 3)
    assert layers_to_reach(window, 0, 31) == math.ceil(31 / 3) == 11
    assert layers_to_reach(global_window_mask(32, 3, [0]), 0, 31) == 1
    powers = [torch.linalg.matrix_power(window.double(), n)[31, 0] > 0 for n in (10, 11)]
    assert powers == [False, True]
