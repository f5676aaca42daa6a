"""Chapter 02, the Transformer: the chapter's training runs (a small encoder-decoder that reverses
symbol strings, and the same model translating the synthetic language into a head-final one), its loss,
and the harsher run that separates post-LN from pre-LN.

Taught in: 02_transformer ("Training", "Post-LN or pre-LN", "A task with structure: translation").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.attention import merge_heads, scaled_dot_product_attention, split_heads
from lecture_lib.config import build_config
from lecture_lib.data.seq2seq_tasks import (
    CASE_PARTICLES,
    ReversalTask,
    TranslationTask,
    content_hash,
    head_final,
    head_final_alignment,
)
from lecture_lib.data.synthetic import Sentence
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


@dataclass
class DecoderCache:
    """What :class:`KVCacheDecoder` keeps between steps: per decoder layer the self-attention keys and values
    of the tokens written so far (B, H, t, D), and the cross-attention keys and values of the encoder output
    (B, H, S, D), computed once."""

    memory_mask: torch.Tensor
    cross: list[tuple[torch.Tensor, torch.Tensor]]
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)
    length: int = 0


class KVCacheDecoder:
    """Exercise 4 of chapter 02: ``model``'s greedy decoding with a key-value cache. ``decode_step`` runs only the
    newest token through the decoder: its query attends over the cached keys and values of the whole prefix
    (the last position may see all of them: no causal mask), and cross-attention reuses the encoder's keys and
    values. Same ``encode``/``decode_step`` interface as :class:`Transformer`, for ``greedy_decode``; one
    decoding per ``encode`` (beam search, which reorders the prefixes, would have to reorder the cache too)."""

    def __init__(self, model: Transformer) -> None:
        self.model = model

    def encode(self, src: torch.Tensor) -> DecoderCache:
        memory, memory_mask = self.model.encode(src)
        layers = self.model.decoder.layers
        cross = [(split_heads(layer.encoder_attn.k_proj(memory), layer.encoder_attn.num_heads),
                  split_heads(layer.encoder_attn.v_proj(memory), layer.encoder_attn.num_heads)) for layer in layers]
        return DecoderCache(memory_mask, cross, [None] * len(layers), [None] * len(layers))

    def decode_step(self, prefix: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """Logits (B, V) of the token after ``prefix`` (B, t), of which only the last token is new to ``cache``."""
        t = prefix.shape[1] - 1  # the position of the newest token
        if t != cache.length:
            raise ValueError(f"expected a prefix one token longer than the cache's {cache.length}, got {t + 1}")
        model = self.model
        x = model.embed_tokens(prefix[:, -1:]) * model.embed_scale + model.decoder_positions(t + 1)[-1:]  # (B, 1, C)
        for i, layer in enumerate(model.decoder.layers):
            attn = layer.self_attn
            h = layer.sublayer_input(x, layer.self_attn_layer_norm)
            q, k, v = (split_heads(p(h), attn.num_heads) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
            cache.keys[i] = k if cache.keys[i] is None else torch.cat([cache.keys[i], k], dim=2)  # (B, H, t+1, D)
            cache.values[i] = v if cache.values[i] is None else torch.cat([cache.values[i], v], dim=2)
            a = attn.out_proj(merge_heads(scaled_dot_product_attention(q, cache.keys[i], cache.values[i])[0]))
            x = layer.add_residual(x, a, layer.self_attn_layer_norm)
            cross = layer.encoder_attn
            h = layer.sublayer_input(x, layer.encoder_attn_layer_norm)
            q = split_heads(cross.q_proj(h), cross.num_heads)
            a, _ = scaled_dot_product_attention(q, *cache.cross[i], cache.memory_mask)  # (B, H, 1, D)
            x = layer.add_residual(x, cross.out_proj(merge_heads(a)), layer.encoder_attn_layer_norm)
            h = layer.sublayer_input(x, layer.ffn_layer_norm)
            x = layer.add_residual(x, layer.ffn(h), layer.ffn_layer_norm)
        cache.length += 1
        x = model.decoder.layer_norm(x) if model.decoder.layer_norm is not None else x
        return model.lm_head(x)[:, -1]


def free_order(sentence: Sentence, object_first: bool) -> list[str]:
    """Exercise 5 of chapter 02: :func:`head_final`'s translation, with the main clause's object phrase (case
    particle ``o`` included) moved before its subject phrase (``ga``) when ``object_first``; the particles
    still say which is which, so both orders are right."""
    target = head_final(sentence)
    root = sentence.heads.index(0)
    arguments = {sentence.deprels[i]: i for i, head in enumerate(sentence.heads)
                 if head == root + 1 and sentence.deprels[i] in CASE_PARTICLES}
    if not object_first or len(arguments) < 2:
        return target
    alignment = head_final_alignment(sentence)

    def span(i: int) -> tuple[int, int]:
        """The target positions of the phrase headed by source word i, its particle included."""
        inside = [t for t, source in enumerate(alignment) if source >= 0 and _dominates(sentence, i, source)]
        return min(inside), max(inside) + 2  # the particle follows the phrase

    (s0, s1), (o0, o1) = span(arguments["nsubj"]), span(arguments["obj"])
    return target[:s0] + target[o0:o1] + target[s0:s1] + target[s1:o0] + target[o1:]


def _dominates(sentence: Sentence, head: int, word: int) -> bool:
    """Is source word ``word`` in the subtree of source word ``head`` (0-based)?"""
    while word != head and sentence.heads[word]:
        word = sentence.heads[word] - 1
    return word == head


@dataclass
class FreeOrderTranslationTask(TranslationTask):
    """Exercise 5 of chapter 02: :class:`TranslationTask` whose references put the object first in half of the
    sentences (:func:`free_order`, a coin per sentence from its word ids' hash)."""

    def pairs(self, n: int, test: bool, rng: random.Random) -> list[tuple[Sentence, list[str]]]:
        return [(sentence, free_order(sentence, content_hash(self.encode(sentence.words[::-1]).tolist()) % 2 == 1))
                for sentence, _ in super().pairs(n, test, rng)]
