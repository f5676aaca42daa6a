"""Chapter 02, the Transformer: the chapter's training runs (a small encoder-decoder that reverses
symbol strings, and the same model translating the synthetic language into a head-final one), its loss,
the harsher run that separates post-LN from pre-LN, and the free-order translation runs on which greedy
decoding and beam search part.

Taught in: 02_transformer ("Training", "Post-LN or pre-LN", "A task with structure: translation",
"Where beam search pays: two right orders").
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
from lecture_lib.data.seq2seq_tasks import FreeOrderTranslationTask, ReversalTask, TranslationTask
from lecture_lib.data.synthetic import Sentence
from lecture_lib.data.toy import EOS, Seq2SeqBatch
from lecture_lib.decoding import EncoderDecoder, Hypothesis, beam_search, beam_search_one, greedy_decode
from lecture_lib.metrics import corpus_bleu
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


def free_order_experiment(seed: int = 0) -> Experiment:
    """The translation run made harder for decoding: :class:`FreeOrderTranslationTask`, whose references put
    the object phrase first in half of the sentences (a coin the source does not show, so the model must spread
    its probability over two right orders), trained with seed ``seed`` for half of :func:`translation_experiment`'s
    steps on batches of half the size (a quarter of its training sentences, so that three seeds cost less than
    the one run of :func:`translation_experiment`): a model that has not solved its task.

    Taught in: 02_transformer ("Where beam search pays: two right orders").
    """
    exp = translation_experiment()
    task = FreeOrderTranslationTask(max_words=exp.task.max_words, batch_size=exp.task.batch_size // 2)
    return replace(exp, task=task, seed=seed, train=replace(exp.train, steps=exp.train.steps // 2))


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


def words_until_end(task: TranslationTask, tokens: list[int] | torch.Tensor) -> str:
    """A decoded output as text: its words up to the first ``EOS`` (padding and special tokens dropped).

    Taught in: 02_transformer ("A task with structure: translation").
    """
    tokens = list(tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens)
    return " ".join(task.decode(tokens[: tokens.index(EOS)] if EOS in tokens else tokens))


@dataclass
class DecoderComparison:
    """Greedy decoding against beam search on the same sources: the outputs as text, their summed
    log-probabilities under the model, and corpus BLEU against every right translation.

    Taught in: 02_transformer ("Where beam search pays: two right orders").
    """

    greedy: list[str]
    beam: list[str]
    greedy_scores: torch.Tensor  # (B,) float64
    beam_scores: torch.Tensor  # (B,) float64
    bleu: dict[str, float]  # "greedy", "beam"

    @property
    def differing(self) -> list[int]:
        """The sources whose two outputs differ."""
        return [i for i, (g, b) in enumerate(zip(self.greedy, self.beam)) if g != b]

    @property
    def beam_more_probable(self) -> int:
        """Of :attr:`differing`, how many beam outputs have the higher log-probability."""
        return sum(bool(self.beam_scores[i] > self.greedy_scores[i]) for i in self.differing)


def greedy_against_beam(model: EncoderDecoder, task: TranslationTask, pairs: list[tuple[Sentence, list[str]]], *,
                     beam_width: int = 4, length_penalty: float = 0.6) -> DecoderComparison:
    """Decode the sources of ``pairs`` greedily and with a beam of ``beam_width`` ranked by score / length^α
    (α = ``length_penalty``; Vaswani et al. used 4 and 0.6), and score both by corpus BLEU against every
    translation that ``task.references`` accepts (multi-reference BLEU).

    Taught in: 02_transformer ("Where beam search pays: two right orders").
    """
    if not pairs:
        raise ValueError("expected at least one (sentence, translation) pair, got none")
    batch = task.batch(pairs)
    max_len = batch.tgt_out.shape[1] + 2
    greedy_tokens, greedy_scores = greedy_decode(model, batch.src, max_len)
    beams = beam_search(model, batch.src, beam_width, max_len, length_penalty=length_penalty)
    greedy = [words_until_end(task, row) for row in greedy_tokens]
    beam = [words_until_end(task, h.tokens) for h in beams]
    references = list(zip(*[[" ".join(r) for r in task.references(sentence)] for sentence, _ in pairs]))
    bleu = {name: corpus_bleu(outputs, references[0], other_references=references[1:])
            for name, outputs in (("greedy", greedy), ("beam", beam))}
    return DecoderComparison(greedy, beam, greedy_scores.double(),
                             torch.tensor([h.score for h in beams], dtype=torch.float64), bleu)


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
