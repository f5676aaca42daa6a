"""Chapter 01, attention: the bottleneck experiment (a GRU encoder-decoder with and without attention,
reversing strings) and the cost of naive against fused attention as the length grows.

Taught in: 01_attention ("The bottleneck, measured", "What attention costs").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.attention import scaled_dot_product_attention
from lecture_lib.cache import cached_build, compute_all
from lecture_lib.chapters.solutions.ch01_attention import AdditiveAttentionSeq2Seq
from lecture_lib.config import build_config
from lecture_lib.data.toy import NUM_SPECIAL, PAD, Seq2SeqBatch, reversal_batch
from lecture_lib.decoding import sequences_equal
from lecture_lib.measure import saved_tensor_bytes, time_call
from lecture_lib.models.rnn_seq2seq import RNNSeq2Seq
from lecture_lib.profile import pick
from lecture_lib.reproductions import Check, Gate, Rule, Seeds
from lecture_lib.runtime import generator, seed_everything
from lecture_lib.train import History, TrainConfig, load_trained, save_trained, train


def rnn_seq2seq_loss(model: RNNSeq2Seq, batch: Seq2SeqBatch) -> torch.Tensor:
    """Token-level cross-entropy against ``tgt_out``, ignoring padding."""
    logits, _ = model(batch)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD)


def rnn_greedy_exact_match(model: RNNSeq2Seq, batch: Seq2SeqBatch) -> torch.Tensor:
    """Per-sequence bool (B,): did greedy decoding reproduce the whole target, EOS included?

    The recurrent decoder writes a token at every step, also after its EOS; the target's padding
    positions are blanked in the prediction, so only the target's real positions are compared, by
    :func:`lecture_lib.decoding.sequences_equal`, the rule of ``greedy_exact_match`` for the Transformer.
    """
    predicted, _ = model.greedy(batch.src, batch.src_lengths, batch.tgt_out.shape[1])
    return sequences_equal(predicted.masked_fill(batch.tgt_out == PAD, PAD), batch.tgt_out)


@dataclass
class Chapter01Config:
    """The bottleneck experiment's sizes: the RNNs' hidden size, the strings' lengths and alphabet, and how the
    models are trained (``train``: steps, batch of strings, learning rate), with and without attention.

    Taught in: 01_attention ("The bottleneck, measured").
    """

    hidden_size: int
    min_len: int
    max_len: int
    train: TrainConfig
    num_symbols: int = 10


QUICK = dict(hidden_size=64, min_len=4, max_len=14, train=dict(steps=700, batch_size=64, lr=3e-3))
FULL = dict(hidden_size=256, min_len=4, max_len=30, train=dict(steps=4000, batch_size=128, lr=3e-3))


def chapter_config(**overrides) -> Chapter01Config:
    """The chapter's sizes for the active profile (:data:`QUICK` or :data:`FULL`, see :mod:`lecture_lib.profile`),
    with ``overrides``: ``chapter_config(train=dict(steps=100))``."""
    return build_config(Chapter01Config, pick(quick=QUICK, full=FULL), overrides)


def reversal_stream(exp: Chapter01Config, seed: int) -> Callable[[int], Seq2SeqBatch]:
    """``batch_fn`` for :func:`lecture_lib.train.train`: micro-batch i is drawn from ``generator("reversal", seed, i)``."""
    return lambda i: reversal_batch(
        exp.train.batch_size, exp.min_len, exp.max_len, exp.num_symbols, generator("reversal", seed, i)
    )


def reversal_model(attention: bool | str, exp: Chapter01Config) -> RNNSeq2Seq:
    """The untrained encoder-decoder of :func:`train_reversal` (``"additive"``: exercise 1's model)."""
    vocab_size = NUM_SPECIAL + exp.num_symbols
    if attention == "additive":
        return AdditiveAttentionSeq2Seq(vocab_size, exp.hidden_size)
    return RNNSeq2Seq(vocab_size, exp.hidden_size, attention)


@cached_build(load=load_trained)
def trained_reversal(directory: Path, attention: bool | str, exp: Chapter01Config, seed: int) -> None:
    """Train :func:`reversal_model` to reverse strings on the default device, seeded by ``seed``, and write it into
    ``directory`` (:func:`lecture_lib.train.save_trained`); cached, so a second run of the notebook loads it."""
    seed_everything(seed)
    model = reversal_model(attention, exp)
    history = train(model, reversal_stream(exp, seed), rnn_seq2seq_loss, exp.train)
    save_trained(directory, model, history)


def train_reversal(attention: bool | str, exp: Chapter01Config, seed: int = 0) -> tuple[RNNSeq2Seq, History]:
    """An :class:`RNNSeq2Seq` trained to reverse strings (:func:`trained_reversal`, from the cache after the first
    time), on the CPU, where the notebook's analysis reads its attention with batches it makes by hand.
    ``attention="additive"`` trains :class:`AdditiveAttentionSeq2Seq` (exercise 1)."""
    state, history = trained_reversal(attention, exp, seed)
    model = reversal_model(attention, exp)
    model.load_state_dict(state)
    return model, history


def accuracy_by_length(
    model: RNNSeq2Seq, exp: Chapter01Config, per_length: int = 200, seed: int = 0
) -> dict[int, float]:
    """Exact-match rate of greedy decoding on fresh strings of each length min_len..max_len."""
    strings = generator("reversal by length", seed)
    return {
        n: rnn_greedy_exact_match(model, reversal_batch(per_length, n, n, exp.num_symbols, strings))
        .float()
        .mean()
        .item()
        for n in range(exp.min_len, exp.max_len + 1)
    }


def bottleneck_models(
    exp: Chapter01Config, seeds: list[int], trained: dict[int, tuple[RNNSeq2Seq, RNNSeq2Seq]]
) -> dict[int, tuple[RNNSeq2Seq, RNNSeq2Seq]]:
    """The models without and with attention for every seed of ``seeds``: those already ``trained`` (seed ->
    models) are reused, the others are trained by :func:`train_reversal`, as many at a time as there are CPU cores."""
    new = [seed for seed in seeds if seed not in trained]
    compute_all(trained_reversal, [(attention, exp, seed) for seed in new for attention in (False, True)])
    return {
        seed: trained[seed]
        if seed in trained
        else (train_reversal(False, exp, seed)[0], train_reversal(True, exp, seed)[0])
        for seed in seeds
    }


def alignment_shares(model: RNNSeq2Seq, strings: Seq2SeqBatch) -> tuple[float, float]:
    """Of greedy decoding's attention on ``strings``: the share of strings whose first step looks hardest at the
    last symbol, and the share of later steps t >= 1 that look hardest at the symbol just written (N - t)."""
    _, alignments = model.greedy(strings.src, strings.src_lengths, int(strings.src_lengths.max()) + 1)
    first_step, later_steps = [], []
    for alignment, n in zip(alignments, strings.src_lengths.tolist()):
        looked_at = alignment[: n + 1, :n].argmax(dim=-1)  # steps 0..n (n = the end-of-sequence step)
        first_step.append(looked_at[0].item() == n - 1)
        later_steps += (looked_at[1:] == n - torch.arange(1, n + 1)).tolist()
    return sum(first_step) / len(first_step), sum(later_steps) / len(later_steps)


LEARNED_SHORT_STRINGS = "{} at the shortest length"  # a gate: the model learned the task where it is easy
CLAIMS = (
    Rule(
        "01-attention-removes-the-bottleneck",
        "an encoder-decoder without attention degrades with length, one with attention much less",
        paper="English→French BLEU 17.82 (RNNencdec-50) against 26.75 (RNNsearch-50), the gap widening on long "
        "sentences (Figure 2)",
        source="Bahdanau et al. (2015), Table 1",
        metric="exact match of greedy decoding",
        data="200 held-out strings of the longest training length",
        compared="with attention",
        baseline="without attention",
        margin=0.3,
        seeds=Seeds("training"),
        gates=(
            Gate(LEARNED_SHORT_STRINGS.format("without attention"), "chance", 0.5),
            Gate(LEARNED_SHORT_STRINGS.format("with attention"), "chance", 0.5),
        ),
    ),
    Rule(
        "01-exposure-bias",
        "teacher forcing trains on gold prefixes; inference, on the model's own, is worse",
        paper="the train/inference mismatch of teacher forcing",
        source="Williams and Zipser (1989); Ranzato et al. (2016), section 1",
        metric="tokens right",
        data="500 held-out strings of the longest training length",
        compared="with attention, decoding greedily on its own prefixes",
        baseline="the same, fed the gold prefixes",
        higher=False,
        margin=0.03,
        seeds=Seeds("training"),
        gates=(Gate(LEARNED_SHORT_STRINGS.format("with attention"), "chance", 0.5),),
    ),
    Rule(
        "01-unsupervised-alignment",
        "attention learns alignments without supervision",
        paper="near-monotone alignments of English and French words",
        source="Bahdanau et al. (2015), Figure 3",
        metric="share of decoding steps t ≥ 1 that look hardest at the symbol just written",
        data="200 held-out strings of every training length",
        compared="with attention",
        baseline=0.8,
        seeds=Seeds("training"),
        gates=(Gate(LEARNED_SHORT_STRINGS.format("with attention"), "chance", 0.5),),
    ),
)
CHECKS = (
    Check(
        "01-running-mean-is-attention",
        "a uniform causal attention is the running mean",
        source="Nadaraya (1964), Watson (1964)",
        reference="the running-mean matrix (1/t on the first t entries)",
        tolerance=1e-6,
    ),
    Check(
        "01-dot-products-have-variance-dk",
        "unscaled dot products of unit-variance vectors have variance dₖ",
        source="Vaswani et al. (2017), footnote 4",
        reference="1 (Var(q·k)/dₖ, at every dₖ)",
        tolerance=0.1,
    ),
    Check(
        "01-scaling-keeps-gradients",
        "unscaled, the softmax saturates and its gradient vanishes",
        source="Vaswani et al. (2017), section 3.2.1",
        reference="0 (the unscaled scores' median gradient over the scaled ones', at the largest dₖ)",
        tolerance=0.01,
    ),
    Check(
        "01-fused-attention-memory-is-linear",
        "attention's memory is quadratic, fused kernels make it linear",
        source="Rabe and Staats (2021); Dao et al. (2022)",
        reference="×4 naive and ×2 fused, the memory's growth at the last doubling of n",
        tolerance=0.5,
    ),
    Check(
        "01-softmax-tile-by-tile",
        "the softmax can be computed tile by tile with a running maximum and sum",
        source="Milakov and Gimelshein (2018); Dao et al. (2022)",
        reference="0 (the largest difference to the full softmax, tiles of 128 and of 7 keys)",
        tolerance=1e-5,
    ),
    Check(
        "01-windows-are-linear",
        "windows make attention linear in n",
        source="Beltagy et al. (2020)",
        reference="n(2w+1), the pairs that doubling n adds to a window of w",
    ),
)


def cost_lengths() -> list[int]:
    """Sequence lengths of the cost curve for the active profile."""
    return pick(quick=[64, 128, 256, 512, 1024, 2048], full=[256, 512, 1024, 2048, 4096, 8192])


def _forward_backward(attend, q, k, v):
    def run():
        out = attend(q, k, v)
        out.backward(torch.ones_like(out))
        return out

    return run


def cost_by_length(
    lengths: list[int],
    *,
    heads: int = 4,
    head_dim: int = 64,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> list[dict[str, float]]:
    """Forward+backward seconds and activation bytes of naive vs fused attention, one row per length.

    Naive: :func:`lecture_lib.attention.scaled_dot_product_attention`, which builds the (n, n) score
    matrix and keeps it for the backward pass. Fused: ``torch.nn.functional.scaled_dot_product_attention``.
    """
    draws = generator("attention cost", seed)
    rows = []
    for n in lengths:
        q, k, v = (torch.randn(1, heads, n, head_dim, generator=draws).to(device).requires_grad_() for _ in range(3))
        naive = _forward_backward(lambda *t: scaled_dot_product_attention(*t)[0], q, k, v)
        fused = _forward_backward(lambda *t: F.scaled_dot_product_attention(*t), q, k, v)
        rows.append(
            {
                "length": n,
                "naive_seconds": time_call(naive, repeats=repeats, warmup=1, device=device),
                "fused_seconds": time_call(fused, repeats=repeats, warmup=1, device=device),
                "naive_bytes": saved_tensor_bytes(lambda: scaled_dot_product_attention(q, k, v)[0]),
                "fused_bytes": saved_tensor_bytes(lambda: F.scaled_dot_product_attention(q, k, v)),
            }
        )
    return rows


def key_variance_scores(d_k: int, key_std: float, scale: float, draws: int = 4000, seed: int = 0) -> float:
    """Exercise 2 of chapter 01: Var(scale · q·k) over ``draws`` pairs, q ~ N(0, I) and k ~ N(0, key_std² I).

    Var(q·k) = d_k · key_std², so scale = 1/(key_std √d_k) gives 1.
    """
    g = generator("key variance", d_k, seed)
    q = torch.randn(draws, d_k, generator=g)
    k = key_std * torch.randn(draws, d_k, generator=g)
    return (scale * (q * k).sum(-1)).var().item()


def neighbour_heads(x: torch.Tensor) -> torch.Tensor:
    """Exercise 3 of chapter 01: two heads, one forced by its mask onto j = i-1 and one onto j = i+1, each with
    the identity as value map, concatenated: (n, d) -> (n, 2d), row i = (x_{i-1}, x_{i+1}) for 0 < i < n-1.

    Rows 0 and n-1 lack a neighbour; their heads have nothing to attend to and give NaN.
    """
    n = x.shape[0]
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i
    heads = [scaled_dot_product_attention(x, x, x, offsets == step)[0] for step in (-1, 1)]
    return torch.cat(heads, dim=-1)


def single_head_error(
    d: int = 4, n: int = 8, *, neighbours_only: bool = False, steps: int = 300, batch: int = 64, seed: int = 0
) -> float:
    """Exercise 3 of chapter 01: train one head (W^Q, W^K, W^V of width 2d) towards (x_{i-1}, x_{i+1}) at
    positions 1..n-2 of independent N(0, I) inputs; return its relative squared error on fresh inputs,
    Σ‖out - target‖² / Σ‖target‖². Its output W^V Σ_j α_ij x_j spans d of the target's 2d dimensions: ≥ 0.5.
    ``neighbours_only`` masks every key but j = i ± 1, the best a head can do: α = ½ on each, error 0.5.
    """
    g = generator("single head", seed)
    seed_everything(seed)
    wq, wk, wv = (nn.Linear(d, 2 * d, bias=False) for _ in range(3))
    optimizer = torch.optim.Adam([p for m in (wq, wk, wv) for p in m.parameters()], lr=1e-2)
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i
    mask = offsets.abs() == 1 if neighbours_only else None

    def error(x: torch.Tensor) -> torch.Tensor:
        out, _ = scaled_dot_product_attention(wq(x), wk(x), wv(x), mask)  # (B, n, 2d)
        target = torch.cat([x[:, :-2], x[:, 2:]], dim=-1)  # (B, n-2, 2d): (x_{i-1}, x_{i+1})
        return ((out[:, 1:-1] - target) ** 2).sum() / (target**2).sum()

    for _ in range(steps):
        optimizer.zero_grad()
        error(torch.randn(batch, n, d, generator=g)).backward()
        optimizer.step()
    with torch.no_grad():
        return error(torch.randn(16 * batch, n, d, generator=g)).item()


def layers_to_reach(mask: torch.Tensor, source: int, target: int) -> int:
    """Exercise 4 of chapter 01: how many layers of attention with ``mask`` (n, n) (row i: whom i reads)
    carry information from ``source`` to ``target``; each layer applies reach <- mask · reach."""
    reach = torch.zeros(mask.shape[0], dtype=torch.bool)
    reach[source] = True
    for layers in range(1, mask.shape[0] + 1):
        reach = mask.float() @ reach.float() > 0
        if reach[target]:
            return layers
    raise ValueError(f"position {target} never hears from position {source}")
