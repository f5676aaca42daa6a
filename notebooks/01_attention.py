# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Attention
#
# **The lesson.** Attention replaces the one fixed summary vector of a recurrent encoder-decoder with a learned,
# content-weighted average over all the encoder's states. In matrix form it is
# $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$, and it costs $n^2$ in the length $n$.
#
# What you will see:
#
# - a model without attention fails to reverse long strings; the same model with attention keeps most of its
#   accuracy;
# - the alignment that attention learns, and why the $\sqrt{d_k}$ is there, measured;
# - masks, several heads, and the $n^2$ cost, with the two ways around it: fused kernels that work tile by tile,
#   and sparse patterns.
#
# Every piece is checked against PyTorch's own implementation.
#
# [Open this notebook in Colab](https://colab.research.google.com/github/transformers-bert-course/course/blob/main/notebooks/01_attention.ipynb)

# %% tags=["remove-cell"]
# In Colab, install the course library first; everywhere else it is already installed.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "lecture-lib[colab] @ git+https://github.com/transformers-bert-course/course",
        ],
        check=True,
    )

# %% tags=["hide-input"]
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib import plots, profile
from lecture_lib.attention import (
    MultiHeadAttention,
    additive_mask,
    causal_mask,
    dilated_window_mask,
    global_window_mask,
    padding_mask,
    prefix_lm_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from lecture_lib.chapters.ch01_attention import (
    accuracy_by_length,
    chapter_config,
    cost_by_length,
    cost_lengths,
    train_reversal,
)
from lecture_lib.data.toy import BOS, EOS, NUM_SPECIAL, PAD, reversal_batch
from lecture_lib.plots import plot_attention, plot_history, plot_mask
from lecture_lib.reproductions import show_reproduction
from lecture_lib.runtime import generator, limit_cpu_threads, seed_everything

print("profile:", profile.current(), " CPU threads:", limit_cpu_threads())  # tiny models: one CPU thread

# %% [markdown]
# ## 1. The bottleneck, measured
#
# A sequence-to-sequence model (Sutskever et al., 2014) has two recurrent networks. The **encoder** reads
# the source $x_1,\dots,x_N$ and produces hidden states $h_1,\dots,h_N \in \mathbb{R}^h$; the **decoder**
# starts from the last one, $h_N$, and writes the output one token at a time. Whatever the decoder will ever
# know about the source has to pass through that single vector $h_N$: a fixed budget of $h$ numbers, whether
# the source has three words or fifty.
#
# In training, the decoder reads the *gold* previous token at each step, not the one it would have written:
# this is **teacher forcing** (Williams and Zipser, 1989). Its input is the target shifted right by one place,
# with a beginning-of-sequence token in front (`tgt_in`). The output it must predict is the target with an
# end-of-sequence token behind (`tgt_out`). The table shows one training pair; every column is one decoder
# step, fed the top row and scored on the bottom one.

# %%
shown_pair = reversal_batch(1, 6, 6, 10, torch.Generator().manual_seed(0))
names = {PAD: "<pad>", BOS: "<s>", EOS: "</s>"}


def symbols_of(ids):
    return [names.get(t, str(t - NUM_SPECIAL)) for t in ids.tolist()]


print("source, read whole by the encoder:", " ".join(symbols_of(shown_pair.src[0])), "\n")
for name, row in (
    ("step", range(shown_pair.tgt_in.shape[1])),
    ("tgt_in", symbols_of(shown_pair.tgt_in[0])),
    ("tgt_out", symbols_of(shown_pair.tgt_out[0])),
):
    print(f"{name:>10}: " + " ".join(f"{s!s:>5}" for s in row))

# %%
assert shown_pair.tgt_in[0, 0] == BOS and shown_pair.tgt_out[0, -1] == EOS
torch.testing.assert_close(shown_pair.tgt_in[0, 1:], shown_pair.tgt_out[0, :-1])  # tgt_in is tgt_out shifted right
torch.testing.assert_close(shown_pair.tgt_out[0, :-1], shown_pair.src[0].flip(0))  # ... and the target is the reverse

# %% [markdown]
#
# A clean way to feel the squeeze is a task that is trivial to state and needs the whole input: **reverse a
# string of symbols**. The first output is the last input, the last output is the first input, and no
# output can be written before everything has been read. We train two models with the same sizes, the same
# data and the same number of steps; the only difference is that the second one's decoder may look back at
# every encoder state (the mechanism of section 3).

# %%
profile.expect(22, "Training two encoder-decoders, without and with attention")
exp = chapter_config()
print(exp)
plain, plain_history = train_reversal(attention=False, exp=exp)
attentive, attentive_history = train_reversal(attention=True, exp=exp)
plain_accuracy = accuracy_by_length(plain, exp)
attentive_accuracy = accuracy_by_length(attentive, exp)

# %%
fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.6))
plot_history(ax_loss, plain_history, label="without attention", alpha=0.8)
plot_history(ax_loss, attentive_history, label="with attention", alpha=0.8)
ax_loss.set(xlabel="training step", ylabel="cross-entropy", yscale="log", title="Training loss")
ax_loss.legend()
lengths = list(plain_accuracy)
ax_acc.plot(lengths, list(plain_accuracy.values()), "o-", label="without attention")
ax_acc.plot(lengths, list(attentive_accuracy.values()), "o-", label="with attention")
ax_acc.set(
    xlabel="source length", ylabel="exact match (greedy)", ylim=(-0.02, 1.02), title="Reversing held-out strings"
)
ax_acc.legend()
plt.tight_layout()
plt.show()
rows = [[f"ours: reversal, length {n}", f"{plain_accuracy[n]:.2f}", f"{attentive_accuracy[n]:.2f}"] for n in lengths]
rows.append(["paper: English→French BLEU, all test sentences (RNNencdec-50, RNNsearch-50)", "17.82", "26.75"])
show_reproduction(
    "ch01-bottleneck",
    "Bahdanau et al. (2015), Table 1 and Figure 2: an encoder-decoder with and without attention",
    ["", "without attention", "with attention"],
    rows,
    note="Ours is exact match on held-out strings. The shape reproduces (asserted): without attention "
    "accuracy collapses with length, with attention most of it is kept; translation quality "
    "itself is not measured here.",
)

# %% [markdown]
# Both models handle short strings. As the strings grow, the model without attention collapses: its one
# vector cannot hold a dozen symbols in order. The model with attention keeps most of its accuracy.
# Bahdanau et al. (2015) saw the same shape on English→French translation (their Figure 2).
#
# <details><summary>Bahdanau et al.'s Figure 2 in detail</summary>
#
# The plain encoder-decoders' BLEU fell steeply with sentence length. Of their attention models, the one trained
# on sentences of up to 50 words (RNNsearch-50) held its quality even beyond 50 words. The one trained on
# sentences of up to 30 words (RNNsearch-30) also degraded on long sentences, though far less than either plain
# model. Attention removes the bottleneck; it does not by itself teach a model lengths it never saw.
#
# </details>
#
# Teacher forcing has a price, called **exposure bias** (Ranzato et al., 2016). In training the decoder never
# sees its own mistakes, so at inference one wrong token puts it in a state it was never trained in. We measure
# it on the longest strings. Fed the gold previous tokens, a model shows what it learned; decoding greedily on
# its own outputs, it shows what it does at inference. The gap between the two is exposure bias at work.


# %%
def token_accuracies(model, batch):
    """Share of target tokens right with teacher forcing (gold previous tokens) and free-running (greedy)."""
    real = batch.tgt_out != PAD
    with torch.no_grad():
        teacher_forced = model(batch)[0].argmax(-1)
    free_running, _ = model.greedy(batch.src, batch.src_lengths, batch.tgt_out.shape[1])
    return [(tokens == batch.tgt_out)[real].float().mean().item() for tokens in (teacher_forced, free_running)]


longest = exp.max_len
long_strings = reversal_batch(500, longest, longest, exp.num_symbols, generator("exposure bias"))
token_accuracy = {
    name: token_accuracies(model, long_strings)
    for name, model in (("without attention", plain), ("with attention", attentive))
}
for name, (forced, free) in token_accuracy.items():
    print(f"{name:>17}, length {longest}: tokens right with teacher forcing {forced:.3f}, greedy on its own {free:.3f}")

# %%
assert min(plain_accuracy[exp.min_len], attentive_accuracy[exp.min_len]) > 0.5, "both manage the shortest strings"
assert plain_accuracy[longest] < 0.5 * plain_accuracy[exp.min_len], "without attention, accuracy collapses with length"
assert attentive_accuracy[longest] > 0.5 * attentive_accuracy[exp.min_len], "with attention, most of it is kept"
assert attentive_accuracy[longest] > plain_accuracy[longest] + 0.3, "attention should win clearly on long strings"
# exposure bias: fed its own outputs, each model gets fewer tokens right than fed the gold ones
assert all(forced > free + 0.03 for forced, free in token_accuracy.values())

# %% [markdown]
# ## 2. Attention is a weighted average
#
# Before any scores, queries or keys, the operation attention performs is an **average with weights that
# sum to one**. The simplest is the running mean of a sequence $x_1, \dots, x_n$,
# $y_t = \frac{1}{t}\sum_{j \le t} x_j$. Written for all $t$ at once it is a matrix product, $y = Ax$,
# with $A_{tj} = 1/t$ for $j \le t$ and $0$ after: each row of $A$ says how much output $t$ takes from
# each input. The same matrix is a softmax. Give every pair the same score, 0, add the causal mask of
# section 6 ($-\infty$ where $j > t$), and the softmax of row $t$ spreads its weight evenly over the $t$
# keys it may see:
#
# $$A = \mathrm{softmax}(0 + M_{\text{causal}}), \qquad y = Ax .$$
#
# Attention keeps exactly this form and changes one thing: the scores are no longer all equal but depend
# on what the positions contain, so each output takes more from the inputs that matter to it. That is the
# kernel regression of Nadaraya (1964) and Watson (1964): to predict at a point $q$, average the observed
# values $v_j$ with weights that fall with the distance between $q$ and the observed points $k_j$,
# $\mathrm{softmax}_j(-(q - k_j)^2 / 2\sigma^2)$. Below: the running mean three ways (a loop, the matrix,
# the masked softmax), and a kernel regression of a noisy sine, whose weight matrix is already an attention
# map.

# %%
seed_everything(0)
x = torch.randn(6, 3)  # six positions, three features each
loop_mean = torch.stack([x[: t + 1].mean(dim=0) for t in range(6)])
A = torch.tril(torch.ones(6, 6)) / torch.arange(1, 7)[:, None]  # row t: 1/t on the first t entries
A_softmax = torch.softmax(torch.zeros(6, 6) + additive_mask(causal_mask(6)), dim=-1)
print("A (running mean):\n", A_softmax.round(decimals=2))

keys = torch.linspace(0, 2 * math.pi, 40)  # where the sine was observed
values = torch.sin(keys) + 0.3 * torch.randn(40)  # what was observed there, with noise
queries = torch.linspace(0, 2 * math.pi, 25)  # where we predict
sigma = 0.4
kernel_weights = torch.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
prediction = kernel_weights @ values

fig, (ax_a, ax_fit, ax_w) = plt.subplots(1, 3, figsize=(13, 3.4))
plot_attention(
    ax_a,
    A_softmax,
    [str(t + 1) for t in range(6)],
    [str(j + 1) for j in range(6)],
    title="running mean: A = softmax(0 + M)",
    xlabel="input j",
    ylabel="output t",
)
ax_fit.plot(keys, values, ".", label="observed (keys, values)")
ax_fit.plot(queries, prediction, "o-", label="weighted average at the queries")
ax_fit.plot(queries, torch.sin(queries), "k:", label="sin")
ax_fit.set(xlabel="position", title=f"Kernel regression, σ = {sigma}")
ax_fit.legend(fontsize=8)
ax_w.imshow(kernel_weights, aspect="auto", cmap="viridis")
ax_w.set(xlabel="key (observed point)", ylabel="query", title="Its weights: an attention map")
plt.tight_layout()
plt.show()
print(
    f"kernel regression: mean squared error to sin {((prediction - torch.sin(queries)) ** 2).mean():.3f}, "
    f"of the raw observations {((values - torch.sin(keys)) ** 2).mean():.3f}"
)

# %%
torch.testing.assert_close(A @ x, loop_mean)  # the running mean is a matrix product
torch.testing.assert_close(A_softmax, A)  # ... and that matrix is a softmax of equal scores under a causal mask
torch.testing.assert_close(kernel_weights.sum(-1), torch.ones(25))  # every prediction is a weighted average
assert ((prediction - torch.sin(queries)) ** 2).mean() < 0.5 * ((values - torch.sin(keys)) ** 2).mean()

# %% [markdown]
# ## 3. Attention in equations
#
# At decoder step $t$ the decoder has a hidden state $s_t \in \mathbb{R}^h$. Attention lets it score every
# encoder state, turn the scores into a probability distribution, and read a weighted average:
#
# $$\begin{aligned}
# e^t &= [\,s_t^\top h_1, \dots, s_t^\top h_N\,] \in \mathbb{R}^N && \text{scores}\\
# \alpha^t &= \mathrm{softmax}(e^t) \in \mathbb{R}^N && \text{attention distribution}\\
# a_t &= \sum_{i=1}^N \alpha^t_i\, h_i \in \mathbb{R}^h && \text{attention output}
# \end{aligned}$$
#
# The attention output $a_t$ is concatenated with the decoder state, $[a_t; s_t] \in \mathbb{R}^{2h}$, and the
# prediction is made from that (our model applies a linear layer and $\tanh$, then the output layer, as in
# Luong et al., 2015). The weights $\alpha^t$ are the **alignment**: how much output step $t$ looks at each
# source position. Below we compute one step by hand, exactly as written above, and compare with the model.

# %% [markdown]
# One decoder step in a picture: follow the query $s_t$ along the red line to the dot product with every encoder
# state, the softmax that turns the scores $e^t$ into the weights $\alpha^t$ (the bars), and the weighted sum $a_t$
# that joins $s_t$ for the prediction. The thickest arrow carries the largest weight.

# %%
plots.seq2seq_attention_diagram()
plt.show()

# %%
batch = reversal_batch(1, longest, longest, exp.num_symbols, torch.Generator().manual_seed(3))
t = 4  # the decoder step we recompute by hand
with torch.no_grad():
    h, last = attentive.encode(batch.src, batch.src_lengths)  # h: (1, N, hidden)
    s, _ = attentive.decoder(attentive.embed(batch.tgt_in), last)  # s: (1, T, hidden)
    e = torch.stack([s[0, t] @ h[0, i] for i in range(h.shape[1])])  # e^t_i = s_t . h_i
    alpha = torch.softmax(e, dim=0)
    a = (alpha[:, None] * h[0]).sum(dim=0)  # a_t = sum_i alpha_i h_i
    a_and_s = torch.cat([a, s[0, t]])  # [a_t; s_t]
    _, _, alignments = attentive.decode(batch.tgt_in, h, batch.src_lengths, last)  # (1, T, N)
print("alpha^t by hand:", [round(x, 3) for x in alpha.tolist()])
print("[a_t; s_t] has", a_and_s.numel(), "numbers = 2 x hidden size", exp.hidden_size)

# %%
predicted, greedy_alignments = attentive.greedy(batch.src, batch.src_lengths, longest + 1)
src_symbols = [str(x - 3) for x in batch.src[0].tolist()]
out_symbols = [str(x - 3) if x > 2 else "</s>" for x in predicted[0].tolist()]
fig, ax = plt.subplots(figsize=(5.5, 5))
plot_attention(
    ax,
    greedy_alignments[0],
    out_symbols,
    src_symbols,
    title="Alignment α of the trained model",
    xlabel="source symbol",
    ylabel="output symbol (greedy)",
)
plt.show()

# %% [markdown]
# The picture is an anti-diagonal, and nobody told the model to produce one: the alignment is a by-product of
# learning to reverse. Look closely and it sits one place to the right of where you might first put it. To
# write output $t$ (which is source symbol $N-1-t$), the decoder looks hardest at source position $N-t$:
# the symbol it *has just written*.
#
# This is **content-based addressing**: the query finds a position by what it holds, not by where it is. The
# query knows which symbol the decoder just emitted and finds it in the source. The encoder is a left-to-right
# GRU, so the state $h_{N-t}$ also carries the symbol before it, which is exactly the next one to write. Only
# the first step, with nothing written yet, looks directly at the last source symbol. We check both on 200
# fresh strings of all lengths.

# %%
torch.testing.assert_close(alpha, alignments[0, t])  # our hand computation is the model's
strings = reversal_batch(200, exp.min_len, longest, exp.num_symbols, torch.Generator().manual_seed(4))
_, strings_alignments = attentive.greedy(strings.src, strings.src_lengths, longest + 1)
first_step, later_steps = [], []
for alignment, n in zip(strings_alignments, strings.src_lengths.tolist()):
    looked_at = alignment[: n + 1, :n].argmax(dim=-1)  # steps 0..n (n = the end-of-sequence step)
    first_step.append(looked_at[0].item() == n - 1)
    later_steps += (looked_at[1:] == n - torch.arange(1, n + 1)).tolist()  # step t looks at N - t
print(f"first step looks at the last symbol: {sum(first_step) / len(first_step):.0%} of strings")
print(f"step t >= 1 looks at the symbol just written (N - t): {sum(later_steps) / len(later_steps):.0%} of steps")
assert sum(first_step) / len(first_step) >= 0.9
assert sum(later_steps) / len(later_steps) >= 0.8

# %% [markdown]
# ## 4. Scaled dot-product attention
#
# Take away the recurrent networks and keep the mechanism. Give it a set of **queries** (what each position
# is looking for), **keys** (what each position offers to be found by) and **values** (what it hands over when
# found). Stack them as matrices $Q \in \mathbb{R}^{L\times d_k}$, $K \in \mathbb{R}^{S\times d_k}$,
# $V \in \mathbb{R}^{S\times d_v}$; then all $L$ queries attend at once (Vaswani et al., 2017):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V,$$
#
# with the softmax taken over each row; the shapes chain as
# $[L\times d_k]\,[d_k\times S]\,[S\times d_v] = [L\times d_v]$. In section 3, $Q$ held the decoder states and $K = V$ the encoder
# states. The line below is the whole idea; the library's version adds the checks and the masks, and we make
# sure all three agree, including PyTorch's fused kernel.


# %%
def attention_by_the_book(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1]), dim=-1) @ V


seed_everything(0)
Q, K, V = torch.randn(5, 16), torch.randn(7, 16), torch.randn(7, 4)
ours, weights = scaled_dot_product_attention(Q, K, V)
print("output:", tuple(ours.shape), " weights:", tuple(weights.shape), " row sums:", weights.sum(-1))

# %%
torch.testing.assert_close(ours, attention_by_the_book(Q, K, V))
torch.testing.assert_close(ours, F.scaled_dot_product_attention(Q, K, V))
torch.testing.assert_close(weights.sum(-1), torch.ones(5))

# %% [markdown]
# ## 5. Why divide by $\sqrt{d_k}$?
#
# Suppose the components of a query and a key are independent with mean 0 and variance 1. Their dot product
# $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ independent terms of variance 1, so
#
# $$\mathrm{Var}(q\cdot k) = d_k, \qquad \mathrm{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1 .$$
#
# Unscaled, the scores spread wider as $d_k$ grows, and a softmax of widely spread numbers is almost one-hot.
# That hurts learning: the softmax's Jacobian is $\mathrm{diag}(p) - pp^\top$, which is zero when $p$ is
# one-hot, so almost no gradient reaches the scores. Vaswani et al. (2017) give this argument in a footnote.
# Here we measure all three steps: the variance, the saturation, and the vanishing gradient.
#
# <details><summary>Why the median gradient</summary>
#
# For the gradient we report the median over 400 random queries, the typical case. A mean would be carried by
# the few queries whose softmax happens not to saturate.
#
# </details>


# %%
def score_statistics(d_k, scale, trials=400, n_keys=32, seed=0):
    """Variance of q.k, mean largest softmax weight, and the median gradient norm reaching the scores."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(trials, 1, d_k, generator=g)
    k = torch.randn(trials, n_keys, d_k, generator=g)
    v = torch.randn(trials, n_keys, 16, generator=g)
    upstream = torch.randn(trials, 1, 16, generator=g)  # a stand-in for dLoss/dOutput
    dots = (q @ k.transpose(-2, -1)).detach()
    scores = (dots * scale).requires_grad_()
    p = scores.softmax(dim=-1)
    (grad,) = torch.autograd.grad((p @ v * upstream).sum(), scores)
    return dots.var().item(), p.max(dim=-1).values.mean().item(), grad.norm(dim=-1).median().item()


dims = [4, 16, 64, 256, 1024]
unscaled = [score_statistics(d, 1.0) for d in dims]
scaled = [score_statistics(d, 1 / math.sqrt(d)) for d in dims]
rows = [
    [d, f"{var:.1f}", f"{p_raw:.3f}", f"{p_scaled:.3f}", f"{g_raw:.2e}", f"{g_scaled:.2e}"]
    for d, (var, p_raw, g_raw), (_, p_scaled, g_scaled) in zip(dims, unscaled, scaled)
]
show_reproduction(
    "ch01-scaled-dot-product",
    "Vaswani et al. (2017), footnote 4: q·k has variance d_k",
    ["d_k (the paper's Var(q·k))", "ours: Var(q·k)", "max p (raw)", "max p (scaled)", "grad raw", "grad scaled"],
    rows,
    note="Reproduced (asserted): the variance is within 10% of d_k; unscaled, the softmax saturates "
    "and a typical query's gradient is over 100 times smaller at d_k = 1024.",
)

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
axes[0].loglog(dims, [u[0] for u in unscaled], "o-", label=r"measured Var$(q\cdot k)$")
axes[0].loglog(dims, dims, "k--", label=r"$d_k$")
axes[0].set(xlabel=r"$d_k$", title="Dot products spread as $d_k$ grows")
axes[0].legend()
axes[1].semilogx(dims, [u[1] for u in unscaled], "o-", label="unscaled")
axes[1].semilogx(dims, [s[1] for s in scaled], "o-", label=r"scaled by $1/\sqrt{d_k}$")
axes[1].set(xlabel=r"$d_k$", ylabel="mean largest weight", title="The softmax saturates (32 keys)")
axes[1].legend()
axes[2].loglog(dims, [u[2] for u in unscaled], "o-", label="unscaled")
axes[2].loglog(dims, [s[2] for s in scaled], "o-", label="scaled")
axes[2].set(xlabel=r"$d_k$", ylabel="median gradient norm at the scores", title="...and its gradient vanishes")
axes[2].legend()
plt.tight_layout()
plt.show()

# %%
for d, (var, _, _), (_, p_scaled, g_scaled) in zip(dims, unscaled, scaled):
    assert abs(var / d - 1) < 0.1, f"Var(q.k) should be close to d_k={d}, measured {var:.1f}"
assert unscaled[-1][1] > 0.9, "unscaled scores at d_k=1024 give a nearly one-hot softmax"
assert all(s[1] < 0.35 for s in scaled), "scaled scores keep the softmax spread out at every d_k"
assert unscaled[-1][2] < 0.01 * scaled[-1][2], "unscaled, a typical query's gradient is over 100 times smaller"
assert max(s[2] for s in scaled) < 2 * min(s[2] for s in scaled), "the scaled gradient does not depend on d_k"

# %% [markdown]
# ## 6. Masks: a matrix added before the softmax
#
# Two situations require some scores to be ignored. In a **batch**, shorter sequences are padded to the
# longest, and no query should attend to padding. In a **decoder** that learns to predict the next token,
# position $i$ must not see positions after $i$, or it could copy the answer. Both are handled the same
# way: add a matrix $M$ to the scores,
#
# $$\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V, \qquad
#   M_{ij} = \begin{cases} 0 & \text{if query } i \text{ may attend to key } j,\\ -\infty & \text{otherwise.}\end{cases}$$
#
# Since $e^{-\infty} = 0$, the masked keys receive exactly zero weight and the rest renormalise among
# themselves. The library writes masks as booleans (`True` = may attend) and `additive_mask` turns them into
# $M$; the padding mask has shape (B, 1, 1, S) so that it broadcasts over heads and queries.
#
# A third pattern sits between the two. A **prefix LM** (Dong et al., 2019, UniLM; Raffel et al., 2020, T5)
# reads an input and writes an output in one stack: the input positions (the prefix) attend to each other
# in both directions, like an encoder, and the output positions attend to the whole prefix and causally to
# the outputs before them, like a decoder. Chapter 09 meets it again.

# %%
keep_padding = padding_mask(torch.tensor([5, 3]), 5)  # two sequences, the second padded by 2
keep_causal = causal_mask(5)
keep_both = keep_causal & keep_padding  # broadcasts to (2, 1, 5, 5)
print("M for the padded sequence (padding and causal):\n", additive_mask(keep_both[1, 0]))

seed_everything(1)
x = torch.randn(2, 1, 5, 8)
_, masked_weights = scaled_dot_product_attention(x, x, x, keep_both)
keep_prefix = prefix_lm_mask(5, 2)  # a 2-token input, then 3 output positions
fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
for ax, (title, keep) in zip(
    axes,
    [
        ("padding", keep_padding[1, 0].expand(5, 5)),
        ("causal", keep_causal),
        ("causal and padding", keep_both[1, 0]),
        ("prefix LM, prefix 2", keep_prefix),
    ],
):
    plot_mask(ax, keep, f"{title}: may attend")
plt.tight_layout()
plt.show()
print("weights of the padded sequence:\n", masked_weights[1, 0].round(decimals=3))

# %% [markdown]
# Two checks. The masked weights must be exactly zero and each row must still sum to one. And the outputs of
# the real tokens must not depend on what the padding contains: we overwrite the padded positions with
# random numbers and compare.

# %%
assert torch.all(masked_weights[~keep_both.expand_as(masked_weights)] == 0)
torch.testing.assert_close(masked_weights.sum(-1), torch.ones(2, 1, 5))
garbage = x.clone()
garbage[1, :, 3:] = torch.randn(1, 2, 8) * 100
out_clean, _ = scaled_dot_product_attention(x, x, x, keep_padding)
out_garbage, _ = scaled_dot_product_attention(garbage, garbage, garbage, keep_padding)
torch.testing.assert_close(out_clean[1, :, :3], out_garbage[1, :, :3])
# the prefix LM: the prefix is bidirectional (position 0 sees position 1), the outputs causal
assert keep_prefix[:2, :2].all() and torch.equal(keep_prefix[2:, 2:], causal_mask(3))
assert keep_prefix[2:, :2].all() and not keep_prefix[:2, 2:].any()  # outputs read the prefix, never the reverse

# %% [markdown]
# ## 7. Multi-head attention
#
# One attention distribution per query is a single way of looking. **Multi-head attention** runs $h$
# attentions side by side, each on its own learned projection to a smaller width $d = E/h$, and mixes their
# results (Vaswani et al., 2017):
#
# $$\begin{aligned}
# \mathrm{MultiHead}(Q,K,V) &= \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)\,W^O,\\
# \mathrm{head}_i &= \mathrm{Attention}(QW_i^Q,\; KW_i^K,\; VW_i^V).
# \end{aligned}$$
#
# Computing it is four steps: **project** with one $E\times E$ matrix per role (its $h$ column blocks are
# the $W_i$), **split** the width into $h$ heads, **attend** in every head at once, **concatenate** and
# project with $W^O$. The cost is about that of one full-width attention, and the parameters are
# $4(E^2+E)$. Below, the per-head loop written from the equation, the library's batched version, and
# PyTorch's `nn.MultiheadAttention` with the same weights.

# %% [markdown]
# The four steps drawn for $h = 4$: each projection's output is cut into four slices of width $d$, slice $i$ of
# the queries, keys and values goes to head $i$ (one colour per head), and the heads' outputs are laid side by
# side again before `out_proj` mixes them.

# %%
plots.multi_head_attention_diagram()
plt.show()

# %%
E, num_heads = 32, 4
seed_everything(2)
reference = nn.MultiheadAttention(E, num_heads, batch_first=True).eval()
mha = MultiHeadAttention.from_torch(reference).eval()
tokens = torch.randn(2, 6, E)
keep = padding_mask(torch.tensor([6, 4]), 6)


def multihead_by_the_book(module, x, keep):
    d = E // num_heads
    heads = []
    for i in range(num_heads):
        rows = slice(i * d, (i + 1) * d)  # W_i: the i-th block of rows of each projection
        q = x @ module.q_proj.weight[rows].T + module.q_proj.bias[rows]
        k = x @ module.k_proj.weight[rows].T + module.k_proj.bias[rows]
        v = x @ module.v_proj.weight[rows].T + module.v_proj.bias[rows]
        heads.append(attention_by_the_book_masked(q, k, v, keep[:, 0]))
    return module.out_proj(torch.cat(heads, dim=-1))


def attention_by_the_book_masked(Q, K, V, keep):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1]) + additive_mask(keep)
    return torch.softmax(scores, dim=-1) @ V


with torch.no_grad():
    by_the_book = multihead_by_the_book(mha, tokens, keep)
    ours, head_weights = mha(tokens, mask=keep, need_weights=True)
    fused, _ = mha(tokens, mask=keep)  # no weights requested: PyTorch's fused kernel
    theirs, their_weights = reference(
        tokens, tokens, tokens, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False
    )
print("parameters:", sum(p.numel() for p in mha.parameters()), "= 4(E^2 + E) =", 4 * (E * E + E))
print("per-head weights:", tuple(head_weights.shape), "(batch, heads, queries, keys)")
print("largest difference to nn.MultiheadAttention:", (ours - theirs).abs().max().item())

fig, axes = plt.subplots(1, num_heads, figsize=(3.2 * num_heads, 3))
positions = [str(i) for i in range(6)]
for head, ax in enumerate(axes):  # the second sequence: 4 real tokens, then 2 padding positions
    plot_attention(
        ax, head_weights[1, head], positions, positions, title=f"head {head + 1}", xlabel="key", ylabel="query"
    )
plt.tight_layout()
plt.show()

# %% [markdown]
# Each head has its own attention map over the same tokens; these heads are untrained, so their maps are
# shaped only by their random projections, but they already differ, and every one of them gives the padded
# keys 4 and 5 no weight. Chapter 02 draws the heads of a trained model, where they divide the work.

# %%
torch.testing.assert_close(ours, by_the_book)
torch.testing.assert_close(ours, theirs)
torch.testing.assert_close(fused, theirs)
torch.testing.assert_close(head_weights, their_weights)
assert sum(p.numel() for p in mha.parameters()) == 4 * (E * E + E)
assert all(not torch.allclose(head_weights[1, 0], head_weights[1, h]) for h in range(1, num_heads))  # maps differ
assert head_weights[1, :, :, 4:].eq(0).all()  # no head attends to padding

# %% [markdown]
# ## 8. What attention costs
#
# The score matrix $QK^\top$ has one entry per (query, key) pair. For self-attention over $n$ tokens that is
# $n^2$ numbers per head, computed in $O(n^2 d)$ time and, in the naive implementation, **stored** for the
# backward pass. Doubling the length quadruples that memory. Fused kernels (Rabe and Staats, 2021; Dao et al.,
# 2022, FlashAttention) compute the same result in tiles, with an online softmax. For the backward pass they
# keep only $O(n)$ numbers per head (the softmax's normaliser) and recompute the tiles when needed. Their result
# equals the naive one up to floating-point rounding, since they add the same numbers in a different order.
#
# The **online softmax** (Milakov and Gimelshein, 2018) is what makes tiles possible. A query's output
# $\sum_j e^{s_j} v_j / \sum_j e^{s_j}$ is two sums over the keys, so the keys can arrive one tile at a time.
# To keep the exponentials in range, keep a running maximum $m$, a running sum $\ell$ of $e^{s_j - m}$ and a
# running output $o$. When a new tile raises the maximum to $m'$, rescale the old $\ell$ and $o$ by
# $e^{m - m'}$ before adding the tile. Per query only $m$, $\ell$ and $o$ are kept, never a row of $n$ weights:
#
# $$m' = \max(m, \max_{j \in \text{tile}} s_j), \quad \ell' = e^{m - m'}\ell + \sum_{j \in \text{tile}} e^{s_j - m'},
#   \quad o' = e^{m - m'} o + \sum_{j \in \text{tile}} e^{s_j - m'} v_j, \qquad \text{output} = o / \ell .$$


# %%
def attention_tile_by_tile(Q, K, V, tile):
    """Attention over key tiles with a running max m, sum ell and output o: O(L) numbers kept, not L x S."""
    m = torch.full((Q.shape[0], 1), float("-inf"))
    ell = torch.zeros(Q.shape[0], 1)
    o = torch.zeros(Q.shape[0], V.shape[1])
    for start in range(0, K.shape[0], tile):
        s = Q @ K[start : start + tile].T / math.sqrt(K.shape[1])  # (L, tile): one tile of scores
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p = torch.exp(s - m_new)
        ell = torch.exp(m - m_new) * ell + p.sum(dim=-1, keepdim=True)
        o = torch.exp(m - m_new) * o + p @ V[start : start + tile]
        m = m_new
    return o / ell


seed_everything(4)
Q, K, V = torch.randn(64, 16), 3 * torch.randn(1000, 16), torch.randn(1000, 8)  # large scores: the max matters
tiled = attention_tile_by_tile(Q, K, V, tile=128)
print(
    f"tiles of 128 keys: kept per query {2 + V.shape[1]} numbers (m, l, o) instead of a row of {K.shape[0]}; "
    f"largest difference to the full softmax {(tiled - attention_by_the_book(Q, K, V)).abs().max():.1e}"
)

# %%
torch.testing.assert_close(tiled, attention_by_the_book(Q, K, V))  # equal up to rounding
torch.testing.assert_close(attention_tile_by_tile(Q, K, V, tile=7), attention_by_the_book(Q, K, V))  # any tile size

# %% [markdown]
#
# We measure both, forward and backward, on this machine: the time, and the bytes autograd keeps for the
# backward pass (counted with `torch.autograd.graph.saved_tensors_hooks`, which works the same on CPU and
# GPU).

# %% tags=["wall-clock"]
rows = cost_by_length(cost_lengths())
print(f"{'n':>6} {'naive ms':>9} {'fused ms':>9} {'naive MiB':>10} {'fused MiB':>10}")
for r in rows:
    print(
        f"{r['length']:>6} {r['naive_seconds'] * 1e3:>9.1f} {r['fused_seconds'] * 1e3:>9.1f} "
        f"{r['naive_bytes'] / 2**20:>10.2f} {r['fused_bytes'] / 2**20:>10.2f}"
    )
ns = [r["length"] for r in rows]
fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 3.6))
ax_t.loglog(ns, [r["naive_seconds"] for r in rows], "o-", label="naive (materialises n×n)")
ax_t.loglog(ns, [r["fused_seconds"] for r in rows], "o-", label="fused (F.scaled_dot_product_attention)")
ax_t.set(xlabel="sequence length n", ylabel="seconds (forward + backward)", title="Time")
ax_m.loglog(ns, [r["naive_bytes"] / 2**20 for r in rows], "o-", label="naive")
ax_m.loglog(ns, [r["fused_bytes"] / 2**20 for r in rows], "o-", label="fused")
ax_m.loglog(ns, [rows[-1]["naive_bytes"] / 2**20 * (n / ns[-1]) ** 2 for n in ns], "k:", label=r"$\propto n^2$")
ax_m.set(xlabel="sequence length n", ylabel="MiB kept for backward", title="Activation memory")
for ax in (ax_t, ax_m):
    ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The memory is the clean signal: the naive version's grows fourfold per doubling at long lengths (the
# $n\times n$ weights dominate), the fused one's twofold (only $Q$, $K$, $V$, the output and a normaliser per
# row). Time is noisier on a shared CPU, but the fused kernel is faster at long lengths because it never
# writes the $n\times n$ matrix to memory. The library's `MultiHeadAttention` therefore calls the fused
# kernel whenever the weights themselves are not requested; both paths give the same output.

# %%
naive_growth = rows[-1]["naive_bytes"] / rows[-2]["naive_bytes"]
fused_growth = rows[-1]["fused_bytes"] / rows[-2]["fused_bytes"]
print(f"memory growth for the last doubling: naive x{naive_growth:.2f}, fused x{fused_growth:.2f}")
assert naive_growth > 3.5, "naive attention's memory should grow like n^2"
assert fused_growth < 2.2, "fused attention's memory should grow like n"
with torch.no_grad():
    torch.testing.assert_close(
        mha(tokens, mask=keep, need_weights=False)[0], mha(tokens, mask=keep, need_weights=True)[0]
    )

# %% [markdown]
# ## 9. Sparse attention patterns
#
# A fused kernel makes attention's memory linear, but its time stays quadratic. To attend over thousands of
# tokens, Longformer (Beltagy et al., 2020) restricts *which* pairs are scored, with patterns that are masks:
#
# - a **sliding window**: token $i$ attends to $j$ with $|i-j|\le w$, so the cost is $n(2w+1)$ instead of
#   $n^2$, and stacking $\ell$ layers still lets information travel $\ell w$ positions;
# - a **dilated window**: the same number of keys, spaced $r$ apart, reaching $wr$ positions in one layer;
# - **global attention** on a few chosen tokens (such as [CLS]) that attend to everything and are
#   attended to by everything, so that a task-level summary can see the whole input.
#
# Written as masks they can be used by any attention function. A real speed-up also needs a kernel that skips
# the masked blocks, which a dense kernel with a mask does not do (Longformer wrote a banded CUDA kernel).

# %%
n, w = 32, 3
patterns = {
    "full": torch.ones(n, n, dtype=torch.bool),
    f"sliding window, w={w}": sliding_window_mask(n, w),
    f"dilated window, w={w}, r=2": dilated_window_mask(n, w, 2),
    f"global [0] + window, w={w}": global_window_mask(n, w, [0]),
}
fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
for ax, (title, keep) in zip(axes, patterns.items()):
    plot_mask(ax, keep, f"{title}\n{int(keep.sum())} of {n * n} pairs")
plt.tight_layout()
plt.show()

# %% [markdown]
# The check: with a window mask, a query's output must not change when a key outside its window changes.
# And the number of scored pairs must grow linearly in $n$: it is $n(2w+1) - w(w+1)$, so doubling $n$ adds
# exactly $n(2w+1)$ pairs where full attention adds $3n^2$.
#
# <details><summary>Counting the pairs</summary>
#
# Every query scores $2w+1$ keys except the $w$ at each end, which lose $1 + 2 + \dots + w$ keys between them on
# each side. That is $w(w+1)/2$ per side, $w(w+1)$ in all.
#
# </details>

# %%
window = patterns[f"sliding window, w={w}"]
assert int(window.sum()) == n * (2 * w + 1) - w * (w + 1)
assert int(sliding_window_mask(2 * n, w).sum() - window.sum()) == n * (2 * w + 1)  # linear in n
assert int(patterns[f"dilated window, w={w}, r=2"].sum(dim=-1).max()) == 2 * w + 1  # same keys per query...
assert int((window.nonzero()[:, 0] - window.nonzero()[:, 1]).abs().max()) == w
dilated = patterns[f"dilated window, w={w}, r=2"].nonzero()
assert int((dilated[:, 0] - dilated[:, 1]).abs().max()) == 2 * w  # ...reaching twice as far
seed_everything(3)
x = torch.randn(n, 8)
moved = x.clone()
moved[20] += 10.0  # a key far outside query 5's window
out_before, _ = scaled_dot_product_attention(x, x, x, window)
out_after, _ = scaled_dot_product_attention(moved, moved, moved, window)
torch.testing.assert_close(out_before[5], out_after[5])
assert not torch.allclose(out_before[20], out_after[20])

# %% [markdown]
# ## What we saw
#
# The cell below passes this run's numbers to the rules declared before the run in `CLAIMS` and `CHECKS` of
# `lecture_lib.chapters.ch01_attention`, which compute each verdict; it trains the two models again on the seeds
# that section 1 did not use, since a claim about trained models is judged on three training runs.

# %%
from lecture_lib.chapters.ch01_attention import CHECKS, CLAIMS, alignment_shares, bottleneck_models  # noqa: E402
from lecture_lib.reproductions import checked, measured, show_what_we_saw  # noqa: E402

seeds = list(profile.claim_seeds())
if set(seeds) - {0}:
    profile.expect(22 * len(set(seeds) - {0}), "Training the two models on the seeds section 1 did not use")
models = bottleneck_models(exp, seeds, trained={0: (plain, attentive)})
by_length = {seed: [accuracy_by_length(model, exp) for model in pair] for seed, pair in models.items()}
exposure = {seed: token_accuracies(pair[1], long_strings) for seed, pair in models.items()}
alignment = {
    seed: alignment_shares(
        pair[1], reversal_batch(200, exp.min_len, longest, exp.num_symbols, torch.Generator().manual_seed(4))
    )
    for seed, pair in models.items()
}
plain_long, attentive_long = ([by_length[seed][i][longest] for seed in seeds] for i in (0, 1))
chance = [exp.num_symbols**-exp.min_len] * len(seeds)  # exact match of a uniform guess at the shortest length
learned = {
    f"{name} at the shortest length": ([by_length[seed][i][exp.min_len] for seed in seeds], chance)
    for i, name in enumerate(("without attention", "with attention"))
}
with_attention_learned = {"with attention at the shortest length": learned["with attention at the shortest length"]}
per_seed = "; ".join
variance_ratios = [var / d for d, (var, _, _) in zip(dims, unscaled)]
pairs_added = int(sliding_window_mask(2 * n, w).sum() - window.sum())
tile_errors = [
    (attention_tile_by_tile(Q, K, V, tile=t) - attention_by_the_book(Q, K, V)).abs().max().item() for t in (128, 7)
]
show_what_we_saw(
    "ch01-what-we-saw",
    "What we saw: chapter 01",
    CLAIMS,
    {
        "01-attention-removes-the-bottleneck": measured(
            f"exact match at length {longest}, without against with attention: "
            + per_seed(f"seed {s} {a:.2f} vs {b:.2f}" for s, a, b in zip(seeds, plain_long, attentive_long))
            + " (section 1)",
            attentive_long,
            plain_long,
            seeds=seeds,
            seed_kind="training",
            gates=learned,
        ),
        "01-exposure-bias": measured(
            f"tokens right at length {longest} with attention, teacher-forced vs greedy: "
            + per_seed(f"seed {s} {exposure[s][0]:.3f} vs {exposure[s][1]:.3f}" for s in seeds)
            + " (section 1)",
            [exposure[s][1] for s in seeds],
            [exposure[s][0] for s in seeds],
            seeds=seeds,
            seed_kind="training",
            gates=with_attention_learned,
        ),
        "01-unsupervised-alignment": measured(
            "steps on the symbol just written: "
            + per_seed(f"seed {s} {alignment[s][1]:.0%}" for s in seeds)
            + "; first step on the last symbol: "
            + per_seed(f"seed {s} {alignment[s][0]:.0%}" for s in seeds)
            + " (section 3)",
            [alignment[s][1] for s in seeds],
            seeds=seeds,
            seed_kind="training",
            gates=with_attention_learned,
        ),
    },
    CHECKS,
    {
        "01-running-mean-is-attention": checked(
            f"largest difference {(A_softmax - A).abs().max():.1e} (section 2)", (A_softmax - A).abs().max().item(), 0.0
        ),
        "01-dot-products-have-variance-dk": checked(
            f"Var(q·k)/dₖ from {min(variance_ratios):.3f} to {max(variance_ratios):.3f} for dₖ from {dims[0]} to "
            f"{dims[-1]} (section 5)",
            variance_ratios,
            1.0,
        ),
        "01-scaling-keeps-gradients": checked(
            f"at dₖ = {dims[-1]}: largest weight {unscaled[-1][1]:.3f} unscaled vs {scaled[-1][1]:.3f} scaled; median "
            f"gradient {unscaled[-1][2]:.1e} vs {scaled[-1][2]:.1e} (section 5)",
            unscaled[-1][2] / scaled[-1][2],
            0.0,
        ),
        "01-fused-attention-memory-is-linear": checked(
            f"memory growth at the last doubling of n: ×{naive_growth:.2f} naive, ×{fused_growth:.2f} fused (section 8)",
            [naive_growth, fused_growth],
            [4.0, 2.0],
        ),
        "01-softmax-tile-by-tile": checked(
            f"largest difference to the full softmax: {tile_errors[0]:.1e} (tiles of 128 keys), {tile_errors[1]:.1e} "
            "(tiles of 7) (section 8)",
            tile_errors,
            0.0,
        ),
        "01-windows-are-linear": checked(
            f"{int(window.sum())} pairs at n = {n}, w = {w}; doubling n adds {pairs_added} (section 9)",
            pairs_added,
            n * (2 * w + 1),
        ),
    },
)

# %% [markdown]
# <details><summary>What did not carry over</summary>
#
# Translation quality itself: we reverse strings, a task chosen because its ideal alignment is known (chapter 02
# translates a synthetic language). And absolute speed, which depends on the machine: on a GPU the gap between
# the naive and fused kernels is much wider than on a CPU.
#
# </details>
#
# ## Exercises
#
# 1. Make the decoder's attention *additive* (Bahdanau et al., 2015): $e^t_i = v^\top \tanh(W_1 h_i + W_2 s_t)$.
#    Does it learn reversal faster or slower than the dot product in section 1?
#
# <details><summary>Hint</summary>
#
# Keep `train_reversal` as it is and change only the score: apply $W_1$ to all encoder states once per batch (a
# `nn.Linear` without bias), add $W_2 s_t$ at each decoder step, then $\tanh$ and $v$; mask the padded source
# positions before the softmax as in section 6. Compare loss curves and exact match by length on 2-3 seeds. One
# solution: `AdditiveAttentionSeq2Seq` in `lecture_lib.chapters.solutions.ch01_attention`, trained by
# `train_reversal("additive", exp)`.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# Like the dot-product model, the additive one keeps most of its exact match on the longest strings, far above the
# model without attention: at a small size (width 32, 300 steps, strings of 2 to 7 symbols) it keeps more than half
# of its exact match at length 7, at least 0.3 above the model without attention. Run it with the quick profile
# beside section 1's two models to compare all three; any difference in speed between the two scores is small next
# to the gap to the model without attention and has to be read over seeds. Luong et al. (2015) also found the
# additive ("concat") score no better than the dot product for translation.
#
# </details>
#
# 2. In section 5, replace the Gaussian keys by keys whose components have variance 4. Which scale factor
#    restores unit variance, and what does that suggest about initialising $W^Q$ and $W^K$?
#
# <details><summary>Hint</summary>
#
# If $q_i$ has variance 1 and $k_i$ variance $\sigma^2$, each product $q_i k_i$ has variance $\sigma^2$. Measure
# it with `score_statistics`-style code: draw `k = 2 * torch.randn(...)`.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# $\mathrm{Var}(q\cdot k)/d_k \approx 4$ (3.91 at $d_k=16$ and 4.00 at $d_k=256$ over 4,000 draws of
# `key_variance_scores` in `lecture_lib.chapters.ch01_attention`; one standard error is about 0.1), and the factor
# $1/(2\sqrt{d_k}) = 1/\sqrt{4 d_k}$ brings it back to about 1 (0.98 and 1.00). The paper's $1/\sqrt{d_k}$ assumes
# unit-variance components of $q$ and $k$: initialise $W^Q$ and $W^K$ with variance about $1/d_\text{model}$
# (Xavier-style) so that unit-variance inputs give unit-variance queries and keys; larger weights would saturate
# the softmax from the first step.
#
# </details>
#
# 3. Construct something two heads can do and one head cannot. Take two heads in which head 1 attends only
#    to the previous token and head 2 only to the next one (use masks to force it), with value projections
#    that write $x_{i-1}$ into the first half of the output and $x_{i+1}$ into the second half. Then show that
#    no single head, whatever its projections, gives $(x_{i-1}, x_{i+1})$ for every input: its output is
#    $\sum_j \alpha_{ij} W^V x_j$, a mix of vectors all made by the same map $W^V$, and writing $x_{i-1}$ and
#    $x_{i+1}$ into different halves would take two different maps. Check your construction numerically.
#
# <details><summary>Hint</summary>
#
# Give each head a boolean mask that allows only $j=i-1$ (head 1) or only $j=i+1$ (head 2), use the identity as
# each head's value map and concatenate; score positions 1 to $n-2$, which have both neighbours. For the single
# head, fit $W^Q, W^K, W^V$ by gradient descent to the same target and watch the loss.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# The two-head construction equals $(x_{i-1}, x_{i+1})$ to float rounding (about $10^{-6}$ in float32). A single
# head's output $W^V \bar x$ lies in a subspace of dimension at most $d$, while the targets fill all $2d$
# dimensions: with independent unit-variance inputs it leaves at least half of the target's variance unexplained,
# so the trained single head stops at a relative squared error of 0.5 or more (well above it with $d = 4$: without
# positions it cannot even find its neighbours), and reaches 0.5 only when a mask allows just $j = i \pm 1$
# ($\alpha = \tfrac12$ on each). `neighbour_heads` and `single_head_error` in `lecture_lib.chapters.ch01_attention`
# are one solution.
#
# </details>
#
# 4. Using `global_window_mask`, count how many layers a sliding window of $w=3$ needs before position 0 can
#    influence position 31, with and without a global token at position 0.
#
# <details><summary>Hint</summary>
#
# One layer lets position $i$ read positions within $w$ of it, so after $L$ layers information has moved at most
# $Lw$ places. Check it by propagating a boolean vector through the mask:
# `reach = mask.float() @ reach.float() > 0`.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# Without a global token, 11 layers ($3 \cdot 10 = 30 < 31 \le 3 \cdot 11$); with a global token at position 0, 1
# layer, since position 31 attends to position 0 directly (checked with `global_window_mask(32, 3, [0])`;
# `layers_to_reach` in `lecture_lib.chapters.ch01_attention` propagates the vector).
#
# </details>

# %% [markdown]
# ## Further reading
#
# - Bahdanau, Cho and Bengio (2015). *Neural Machine Translation by Jointly Learning to Align and Translate*. The
#   paper of sections 1 and 3: the bottleneck, additive attention and its alignment figures.
# - Luong, Pham and Manning (2015). *Effective Approaches to Attention-based Neural Machine Translation*. Dot,
#   general and additive scores compared on translation, and global against local attention.
# - Vaswani et al. (2017). *Attention Is All You Need*. Scaled dot-product and multi-head attention, in the model
#   of chapter 02.
# - Dao, Fu, Ermon, Rudra and Ré (2022). *FlashAttention: Fast and Memory-Efficient Exact Attention with
#   IO-Awareness*. The tiled softmax of section 8 turned into a GPU kernel, and why memory traffic, not FLOPs, sets
#   the speed.
# - Beltagy, Peters and Cohan (2020). *Longformer: The Long-Document Transformer*. Sliding windows with global
#   tokens (section 9) trained on documents of thousands of tokens.
