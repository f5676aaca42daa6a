from dataclasses import replace

import torch

from lecture_lib.chapters.ch02_transformer import (
    reversal_experiment,
    seq2seq_loss,
    train_experiment,
    translation_experiment,
)
from lecture_lib.data.seq2seq_tasks import ReversalTask
from lecture_lib.data.toy import PAD
from lecture_lib.decoding import greedy_exact_match
from lecture_lib.models.transformer import Transformer, TransformerConfig

VOCAB = 11


def _tiny_config():
    return TransformerConfig(vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2, num_attention_heads=4,
                             ffn_dim=24, max_position_embeddings=12)


def test_loss_is_label_smoothed_cross_entropy_over_real_tokens():
    torch.manual_seed(0)
    model = Transformer(_tiny_config()).eval()
    batch = ReversalTask(num_symbols=VOCAB - 3).train_batch(4, step=0)
    eps = 0.1
    log_p = model(batch.src, batch.tgt_in).logits.log_softmax(-1)  # (B, T, V)
    real = batch.tgt_out != PAD
    nll = -log_p.gather(-1, batch.tgt_out[..., None])[..., 0]
    uniform = -log_p.mean(-1)  # cross-entropy against the uniform distribution over the vocabulary
    expected = ((1 - eps) * nll + eps * uniform)[real].mean()
    torch.testing.assert_close(seq2seq_loss(model, batch, label_smoothing=eps), expected)


def _small_experiment(seed):
    exp = reversal_experiment(d_model=16, ffn_dim=32, encoder_layers=1, decoder_layers=1, dropout=0.1)
    return replace(exp, seed=seed, train=replace(exp.train, steps=4, warmup_steps=2))


def test_training_is_deterministic_across_runs():
    model_a, history_a = train_experiment(_small_experiment(seed=0), batch_size=8)
    model_b, history_b = train_experiment(_small_experiment(seed=0), batch_size=8)
    model_c, history_c = train_experiment(_small_experiment(seed=1), batch_size=8)
    assert history_a.loss == history_b.loss and history_a.loss != history_c.loss
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name


def test_quick_profile_model_learns_reversal(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    exp = reversal_experiment()
    model, history = train_experiment(exp)
    accuracy = greedy_exact_match(model, exp.task.test_batch(500)).float().mean().item()
    assert accuracy >= 0.95, f"held-out exact match {accuracy:.3f}"
    assert history.loss[-1] < history.loss[0] / 3



def test_translation_experiment_fits_its_task():
    exp = translation_experiment(d_model=16, ffn_dim=32, encoder_layers=1, decoder_layers=1)
    assert exp.model.vocab_size == exp.task.vocab_size
    longest_target = max(len(target) for _, target in exp.task.test_pairs(500)) + 1  # with BOS or EOS
    assert exp.model.max_position_embeddings >= max(longest_target, exp.task.max_words)
    short = replace(exp, train=replace(exp.train, steps=3, warmup_steps=1))
    _, history = train_experiment(short, batch_size=8)
    assert len(history.loss) == 3 and all(torch.isfinite(torch.tensor(history.loss)))
