"""Chapter 02, the Transformer: the chapter's training runs (a small encoder-decoder that reverses
symbol strings, and the same model translating the synthetic language into a head-final one), its loss,
and the harsher run that separates post-LN from pre-LN.

Taught in: 02_transformer ("Training", "Post-LN or pre-LN", "A task with structure: translation").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.config import build_config
from lecture_lib.data.seq2seq_tasks import ReversalTask, TranslationTask
from lecture_lib.data.toy import Seq2SeqBatch
from lecture_lib.decoding import EncoderDecoder, Hypothesis, beam_search_one
from lecture_lib.models.transformer import Transformer, TransformerConfig
from lecture_lib.profile import pick
from lecture_lib.runtime import seed_everything
from lecture_lib.train import History, TrainConfig, train


def seq2seq_loss(model: Transformer, batch: Seq2SeqBatch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of next-token prediction over the real target tokens, with label smoothing ε:
    the target puts 1 - ε on the right token and spreads ε evenly over the whole vocabulary.

    Taught in: 02_transformer ("Training").
    """
    logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.config.pad_token_id,
                           label_smoothing=label_smoothing)


@dataclass
class Experiment:
    """The chapter's training run: the task, the model, the optimisation, and the label smoothing.

    Taught in: 02_transformer ("Training").
    """

    task: ReversalTask | TranslationTask
    model: TransformerConfig
    train: TrainConfig
    label_smoothing: float = 0.1
    seed: int = 0


# The reversal run's sizes by profile: the task's strings, the model, the optimisation.
QUICK = dict(task=dict(num_symbols=10, max_len=8),
             model=dict(d_model=64, encoder_layers=2, decoder_layers=2, ffn_dim=128),
             train=dict(steps=400, lr=3e-3, warmup_steps=50, eval_every=50))
FULL = dict(task=dict(num_symbols=20, max_len=16),
            model=dict(d_model=256, encoder_layers=4, decoder_layers=4, ffn_dim=1024),
            train=dict(steps=4000, lr=1e-3, warmup_steps=400, eval_every=250))


def reversal_experiment(**model_overrides: Any) -> Experiment:
    """The chapter's run at the active profile's size (:data:`QUICK` or :data:`FULL`): a small model that
    reverses symbol strings, its vocabulary and longest sequence (string, BOS and EOS) the task's;
    ``model_overrides`` change the model.

    Taught in: 02_transformer ("The whole model", "Training").
    """
    sizes = pick(quick=QUICK, full=FULL)
    task = ReversalTask(min_len=3, **sizes["task"])
    fixed = dict(vocab_size=task.vocab_size, num_attention_heads=4, dropout=0.0, max_position_embeddings=task.max_len + 2)
    model = build_config(TransformerConfig, fixed, sizes["model"], model_overrides)
    return Experiment(task, model, build_config(TrainConfig, sizes["train"], dict(schedule="inverse_sqrt")))


def translation_experiment(**model_overrides: Any) -> Experiment:
    """The chapter's second run: translating the synthetic language into a head-final one, with the
    reversal run's model sizes and schedule.

    Taught in: 02_transformer ("A task with structure: translation").
    """
    task = TranslationTask(max_words=pick(quick=16, full=20))
    exp = reversal_experiment(vocab_size=task.vocab_size, max_position_embeddings=2 * task.max_words,
                              **model_overrides)
    return replace(exp, task=task, train=replace(exp.train, steps=pick(quick=300, full=3000), eval_every=0))


def stability_experiment(norm_first: bool) -> Experiment:
    """The chapter's run made harsh: no warm-up, the learning rate starts at 1e-2; post-LN or pre-LN.

    Taught in: 02_transformer ("Post-LN or pre-LN").
    """
    exp = reversal_experiment(norm_first=norm_first)
    harsh = replace(exp.train, steps=pick(quick=100, full=1000), lr=1e-2, warmup_steps=0)  # lr 1e-2 / sqrt(step)
    return replace(exp, train=harsh)


def train_experiment(
    exp: Experiment, evaluate: Callable[[nn.Module], dict[str, float]] | None = None, batch_size: int | None = None
) -> tuple[Transformer, History]:
    """Seed, build the model, and train it on ``exp.task``'s training split with :func:`lecture_lib.train.train`
    (on the default device; ``evaluate`` is called every ``exp.train.eval_every`` steps and at the end).

    Taught in: 02_transformer ("Training").
    """
    seed_everything(exp.seed)
    model = Transformer(exp.model)
    batch_fn = partial(exp.task.train_batch, batch_size or exp.task.batch_size, seed=exp.seed)
    loss_fn = partial(seq2seq_loss, label_smoothing=exp.label_smoothing)
    history = train(model, batch_fn, loss_fn, exp.train, evaluate=evaluate)
    return model, history


def initial_position_tables(exp: Experiment) -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise 1 of chapter 02: the encoder's and decoder's learned position tables of a model freshly built
    with ``exp``'s seed, what :func:`train_experiment` starts from. A trained row that no training string
    reached got no gradient: AdamW only shrank it, by Π_t (1 - lr_t · weight_decay)."""
    seed_everything(exp.seed)
    fresh = Transformer(exp.model)
    return fresh.encoder_positions.weight.detach(), fresh.decoder_positions.weight.detach()


def label_smoothing_floor(eps: float, vocab_size: int) -> float:
    """Exercise 2 of chapter 02: the least label-smoothed loss, the entropy of the smoothed target
    q = (1 - ε) onehot(y) + ε/V: H(q) = -(1 - ε + ε/V) log(1 - ε + ε/V) - (V - 1) (ε/V) log(ε/V)."""
    right, other = 1 - eps + eps / vocab_size, eps / vocab_size
    return -right * math.log(right) - (vocab_size - 1) * (other * math.log(other) if other else 0.0)


def length_penalty_changes(model: EncoderDecoder, src: torch.Tensor, beam_width: int,
                           max_len: int) -> list[tuple[int, Hypothesis, Hypothesis]]:
    """Exercise 3 of chapter 02: the sources of ``src`` (B, S) whose best beam changes between ranking by the
    sum of log-probabilities (``length_penalty=0``) and by their mean per token (``1.0``):
    ``(index, best by sum, best by mean)``."""
    changes = []
    for i, row in enumerate(src):
        by_sum, by_mean = (beam_search_one(model, row[None], beam_width, max_len, length_penalty=alpha)[0]
                           for alpha in (0.0, 1.0))
        if by_sum.tokens != by_mean.tokens:
            changes.append((i, by_sum, by_mean))
    return changes
