"""Chapter 02, the Transformer: the chapter's training runs (a small encoder-decoder that reverses
symbol strings, and the same model translating the synthetic language into a head-final one), its loss,
the harsher run that separates post-LN from pre-LN, and the free-order translation runs on which greedy
decoding and beam search part.

Taught in: 02_transformer ("Training", "Post-LN or pre-LN", "A task with structure: translation",
"Where beam search pays: two right orders").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.cache import cached_build, compute_all
from lecture_lib.config import build_config
from lecture_lib.data.seq2seq_tasks import FreeOrderTranslationTask, ReversalTask, TranslationTask
from lecture_lib.data.synthetic import Sentence
from lecture_lib.data.toy import EOS, Seq2SeqBatch
from lecture_lib.decoding import EncoderDecoder, Hypothesis, beam_search, beam_search_one, greedy_decode
from lecture_lib.metrics import corpus_bleu
from lecture_lib.models.transformer import Transformer, TransformerConfig
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Demonstration, Gate, ParameterCount, Rule, Seeds
from lecture_lib.runtime import default_device, seed_everything
from lecture_lib.train import History, TrainConfig, load_trained, save_trained, train


def seq2seq_loss(model: Transformer, batch: Seq2SeqBatch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of next-token prediction over the real target tokens, with label smoothing ε:
    the target puts 1 - ε on the right token and spreads ε evenly over the whole vocabulary.

    Taught in: 02_transformer ("Training").
    """
    logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
    return F.cross_entropy(
        logits.flatten(0, 1),
        batch.tgt_out.flatten(),
        ignore_index=model.config.pad_token_id,
        label_smoothing=label_smoothing,
    )


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


@dataclass(frozen=True)
class Chapter02Config:
    """The chapter's sizes: the reversal task's strings, the model, the optimisation, the translation run's
    sentences and steps, the harsh runs' steps, and the seeds of the claims' runs (``$LECTURE_SEEDS``).

    Taught in: 02_transformer ("Training").
    """

    num_symbols: int
    max_len: int
    d_model: int
    layers: int  # in the encoder and in the decoder
    ffn_dim: int
    train: TrainConfig
    translation_max_words: int
    translation_steps: int
    stability_steps: int
    seeds: tuple[int, ...] = field(default_factory=claim_seeds)

    def __post_init__(self) -> None:
        for name in ("num_symbols", "d_model", "layers", "ffn_dim", "translation_steps", "stability_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected at least 1, got {getattr(self, name)}")
        if self.max_len < REVERSAL_MIN_LEN:
            raise ValueError(f"max_len: expected at least the shortest string's {REVERSAL_MIN_LEN}, got {self.max_len}")
        if self.translation_max_words < 4:
            raise ValueError(
                f"translation_max_words: expected at least 4 (a sentence), got {self.translation_max_words}"
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected distinct seeds, at least one, got {self.seeds}")


REVERSAL_MIN_LEN = 3
QUICK = dict(
    num_symbols=10,
    max_len=8,
    d_model=64,
    layers=2,
    ffn_dim=128,
    train=dict(steps=400, lr=3e-3, warmup_steps=50, eval_every=50, schedule="inverse_sqrt"),
    translation_max_words=16,
    translation_steps=300,
    stability_steps=100,
)
FULL = dict(
    num_symbols=20,
    max_len=16,
    d_model=256,
    layers=4,
    ffn_dim=1024,
    train=dict(steps=4000, lr=1e-3, warmup_steps=400, eval_every=250, schedule="inverse_sqrt"),
    translation_max_words=20,
    translation_steps=3000,
    stability_steps=1000,
)


def chapter_config(**overrides: Any) -> Chapter02Config:
    """The chapter's sizes for the active profile (:data:`QUICK` or :data:`FULL`, see :mod:`lecture_lib.profile`),
    with ``overrides``: ``chapter_config(train=dict(steps=100), seeds=(0,))``.

    Taught in: 02_transformer ("Training").
    """
    return build_config(Chapter02Config, pick(quick=QUICK, full=FULL), overrides)


def reversal_experiment(config: Chapter02Config | None = None, **model_overrides: Any) -> Experiment:
    """The chapter's run at ``config``'s size (default :func:`chapter_config`): a small model that reverses symbol
    strings, its vocabulary and longest sequence (string, BOS and EOS) the task's; ``model_overrides`` change the
    model.

    Taught in: 02_transformer ("The whole model", "Training").
    """
    config = config or chapter_config()
    task = ReversalTask(min_len=REVERSAL_MIN_LEN, num_symbols=config.num_symbols, max_len=config.max_len)
    fixed = dict(
        vocab_size=task.vocab_size, num_attention_heads=4, dropout=0.0, max_position_embeddings=task.max_len + 2
    )
    sizes = dict(
        d_model=config.d_model, encoder_layers=config.layers, decoder_layers=config.layers, ffn_dim=config.ffn_dim
    )
    return Experiment(task, build_config(TransformerConfig, fixed, sizes, model_overrides), config.train)


def translation_experiment(config: Chapter02Config | None = None, seed: int = 0, **model_overrides: Any) -> Experiment:
    """The chapter's second run, with seed ``seed``: translating the synthetic language into a head-final one,
    with the reversal run's model sizes and schedule.

    Taught in: 02_transformer ("A task with structure: translation").
    """
    config = config or chapter_config()
    task = TranslationTask(max_words=config.translation_max_words)
    exp = reversal_experiment(
        config, vocab_size=task.vocab_size, max_position_embeddings=2 * task.max_words, **model_overrides
    )
    return replace(exp, task=task, seed=seed, train=replace(exp.train, steps=config.translation_steps, eval_every=0))


def free_order_experiment(seed: int = 0, config: Chapter02Config | None = None) -> Experiment:
    """The translation run made harder for decoding: :class:`FreeOrderTranslationTask`, whose references put
    the object phrase first in half of the sentences (a coin the source does not show, so the model must spread
    its probability over two right orders), trained with seed ``seed`` for half of :func:`translation_experiment`'s
    steps on batches of half the size (a quarter of its training sentences, so that three seeds cost less than
    the one run of :func:`translation_experiment`): a model that has not solved its task.

    Taught in: 02_transformer ("Where beam search pays: two right orders").
    """
    exp = translation_experiment(config)
    task = FreeOrderTranslationTask(max_words=exp.task.max_words, batch_size=exp.task.batch_size // 2)
    return replace(exp, task=task, seed=seed, train=replace(exp.train, steps=exp.train.steps // 2))


def stability_experiment(norm_first: bool, seed: int = 0, config: Chapter02Config | None = None) -> Experiment:
    """The chapter's run made harsh, with seed ``seed``: no warm-up, the learning rate starts at 1e-2; post-LN or
    pre-LN.

    Taught in: 02_transformer ("Post-LN or pre-LN").
    """
    config = config or chapter_config()
    exp = reversal_experiment(config, norm_first=norm_first)
    harsh = replace(exp.train, steps=config.stability_steps, lr=1e-2, warmup_steps=0)  # lr 1e-2 / sqrt(step)
    return replace(exp, seed=seed, train=harsh)


def decoder_gradient_norms(exp: Experiment, norm_first: bool, seed: int) -> list[float]:
    """The gradient norm of each decoder layer's second feed-forward matrix, at initialisation with seed ``seed``,
    in a 6+6-layer version of ``exp``'s model (post-LN, or pre-LN with ``norm_first``), on one training batch.

    Taught in: 02_transformer ("Post-LN or pre-LN").
    """
    seed_everything(seed)
    deep = Transformer(replace(exp.model, norm_first=norm_first, encoder_layers=6, decoder_layers=6))
    seq2seq_loss(deep, exp.task.train_batch(exp.task.batch_size, step=0, seed=seed)).backward()
    return [layer.ffn.fc2.weight.grad.norm().item() for layer in deep.decoder.layers]


VASWANI = "Vaswani et al. (2017)"
CLAIMS = (
    Demonstration(
        "02-learned-positions-as-good",
        "sinusoids and learned positions do about equally well",
        paper="25.7 vs 25.8 dev BLEU",
        source=f"{VASWANI}, Table 3 row E",
        shows="why a learned table's rows stop at the training lengths (the comparison is exercise 1)",
    ),
    Rule(
        "02-post-ln-gradients-grow",
        "at initialisation post-LN's gradients grow towards the output, pre-LN's stay of one order",
        paper="post-LN's gradient norm grows with the layer index, pre-LN's stays level",
        source="Xiong et al. (2020), section 3 and Figure 3",
        metric="gradient norm of the top decoder layer's W₂ over the bottom layer's",
        data="a 6+6-layer model at initialisation, one training batch",
        compared="post-LN",
        baseline="pre-LN",
        seeds=Seeds("training"),
    ),
    Rule(
        "02-pre-ln-needs-no-warmup",
        "pre-LN trains without warm-up, post-LN does worse",
        paper="pre-LN without warm-up trains faster than post-LN with it",
        source="Xiong et al. (2020), Figure 3",
        metric="mean training loss of the last 20 steps",
        data="reversal, no warm-up, learning rate 1e-2/√step",
        compared="pre-LN",
        baseline="post-LN",
        higher=False,
        seeds=Seeds("training"),
    ),
    Demonstration(
        "02-recipe-trains",
        "label smoothing and warm-up train the model",
        paper="label smoothing ε = 0.1, 4000 warm-up steps, 27.3 BLEU EN-DE (base)",
        source=f"{VASWANI}, section 5",
        shows="the recipe trains the reversal model; no run without it",
    ),
    Rule(
        "02-heads-learn-alignments",
        "attention heads learn alignments",
        paper="heads that follow the alignment",
        source=f"{VASWANI}, attention visualisations",
        metric="share of output steps whose strongest source "
        "position is the mirrored one, for the best cross-attention head",
        data="200 held-out reversal strings",
        compared="the best head",
        baseline=0.9,
        seeds=Seeds("training"),
        gates=(Gate("exact match of greedy decoding", "chance", 0.5),),
    ),
    Demonstration(
        "02-beam-finds-more-probable",
        "beam search finds more probable outputs",
        paper="beam size 4",
        source=f"{VASWANI}, section 6.1; Wu et al. (2016)",
        shows="beam's mean log-probability beside greedy decoding's on a half-trained model, the search "
        "doing what it is for",
    ),
    Rule(
        "02-transformer-translates",
        "the Transformer translates",
        paper="BLEU 27.3 EN-DE and 38.1 EN-FR (base), 28.4 and 41.8 (big), newstest2014",
        source=f"{VASWANI}, Table 2",
        metric="corpus BLEU of greedy decoding",
        data="100 held-out sentences of the synthetic head-final language",
        compared="the Transformer",
        baseline="copying the source",
        margin=50,
        seeds=Seeds("training"),
    ),
    Rule(
        "02-beam-search-helps",
        "a beam of 4 translates better than greedy decoding",
        paper="beam size 4 and length penalty 0.6 for the reported BLEU",
        source=f"{VASWANI}, section 6.1",
        metric="corpus BLEU against both right orders",
        data="100 held-out sentences of the free-order translation task",
        compared="beam of 4",
        baseline="greedy decoding",
        seeds=Seeds("training"),
    ),
)
CHECKS = (
    Check(
        "02-constant-path-length",
        "self-attention needs O(1) sequential operations and path length, recurrence O(n)",
        source=f"{VASWANI}, Table 1",
        reference="the same path for self-attention at every n, and a GRU path that grows linearly in n (the same "
        "operations per added position between every two n)",
    ),
    Check(
        "02-attention-ignores-order",
        "attention without positions ignores order",
        source=f"{VASWANI}, section 3.5",
        reference="0, the largest difference between SA(PX) and P·SA(X)",
        tolerance=1e-5,
    ),
    ParameterCount("02-base-parameters", "the base Transformer", source=f"{VASWANI}, Table 3", paper="65M"),
)


def train_experiment(
    exp: Experiment, evaluate: Callable[[nn.Module], dict[str, float]] | None = None, batch_size: int | None = None
) -> tuple[Transformer, History]:
    """Seed, build the model, and train it on ``exp.task``'s training split with :func:`lecture_lib.train.train`
    (on the default device; ``evaluate`` is called every ``exp.train.eval_every`` steps and at the end). A run
    without ``evaluate`` is cached (:func:`trained_experiment`): a second call loads it.

    Taught in: 02_transformer ("Training").
    """
    if evaluate is None:
        state, history = trained_experiment(exp, batch_size)
        model = Transformer(exp.model)
        model.load_state_dict(state)
        return model.to(default_device()), history
    return _train(exp, evaluate, batch_size)


@cached_build(load=load_trained)
def trained_experiment(directory: Path, exp: Experiment, batch_size: int | None) -> None:
    """:func:`train_experiment` without evaluations, written into ``directory`` (:func:`lecture_lib.train.save_trained`)."""
    save_trained(directory, *_train(exp, None, batch_size))


def train_in_parallel(experiments: Sequence[Experiment], desc: str = "training runs") -> None:
    """Train the ``experiments`` not yet in the cache, as many at a time as there are CPU cores
    (:func:`lecture_lib.cache.compute_all`); :func:`train_experiment` then loads each of them.

    Taught in: 02_transformer ("What we saw").
    """
    compute_all(trained_experiment, [(exp, None) for exp in experiments], desc=desc)


def _train(
    exp: Experiment, evaluate: Callable[[nn.Module], dict[str, float]] | None, batch_size: int | None
) -> tuple[Transformer, History]:
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


def greedy_against_beam(
    model: EncoderDecoder,
    task: TranslationTask,
    pairs: list[tuple[Sentence, list[str]]],
    *,
    beam_width: int = 4,
    length_penalty: float = 0.6,
) -> DecoderComparison:
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
    bleu = {
        name: corpus_bleu(outputs, references[0], other_references=references[1:])
        for name, outputs in (("greedy", greedy), ("beam", beam))
    }
    return DecoderComparison(
        greedy, beam, greedy_scores.double(), torch.tensor([h.score for h in beams], dtype=torch.float64), bleu
    )


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


def length_penalty_changes(
    model: EncoderDecoder, src: torch.Tensor, beam_width: int, max_len: int
) -> list[tuple[int, Hypothesis, Hypothesis]]:
    """Exercise 3 of chapter 02: the sources of ``src`` (B, S) whose best beam changes between ranking by the
    sum of log-probabilities (``length_penalty=0``) and by their mean per token (``1.0``):
    ``(index, best by sum, best by mean)``."""
    changes = []
    for i, row in enumerate(src):
        by_sum, by_mean = (
            beam_search_one(model, row[None], beam_width, max_len, length_penalty=alpha)[0] for alpha in (0.0, 1.0)
        )
        if by_sum.tokens != by_mean.tokens:
            changes.append((i, by_sum, by_mean))
    return changes
