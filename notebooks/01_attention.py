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
# **What you will build.** A recurrent encoder-decoder fails to reverse long strings because everything
# it knows about the input must squeeze through one vector; giving its decoder *attention* fixes that,
# and we will measure by how much. From there we strip attention down to its matrix form,
# $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$, find out by experiment why the $\sqrt{d_k}$ is there, add the
# masks that handle padding and the future, split attention into several heads, and measure what it costs
# as sequences grow: the $n^2$ that motivates fused kernels and the sparse patterns of Longformer.
# Every piece is checked against PyTorch's own implementation.
#
# [Open this notebook in Colab](https://colab.research.google.com/github/transformers-bert-course/course/blob/main/notebooks/01_attention.ipynb)

# %%
# In Colab, install the course library first; everywhere else it is already installed.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "lecture-lib @ git+https://github.com/transformers-bert-course/course"], check=True)

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib import profile
from lecture_lib.attention import (
    MultiHeadAttention,
    additive_mask,
    causal_mask,
    dilated_window_mask,
    global_window_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from lecture_lib.chapters.ch01_attention import (
    accuracy_by_length,
    bottleneck_experiment,
    cost_by_length,
    cost_lengths,
    train_reversal,
)
from lecture_lib.data.toy import reversal_batch
from lecture_lib.plots import plot_attention, plot_history, plot_mask
from lecture_lib.runtime import limit_cpu_threads, seed_everything

print("profile:", profile.current(), " CPU threads:", limit_cpu_threads())  # tiny models: one CPU thread

# %% [markdown]
# ## 1. The bottleneck, measured
#
# A sequence-to-sequence model (Sutskever et al., 2014) has two recurrent networks. The **encoder** reads
# the source $x_1,\dots,x_N$ and produces hidden states $h_1,\dots,h_N \in \mathbb{R}^h$; the **decoder**
# starts from the last one, $h_N$, and writes the output one token at a time, each step conditioned on the
# token it wrote before. Whatever the decoder will ever know about the source has to pass through that
# single vector $h_N$: a fixed budget of $h$ numbers, whether the source has three words or fifty.
#
# A clean way to feel the squeeze is a task that is trivial to state and needs the whole input: **reverse a
# string of symbols**. The first output is the last input, the last output is the first input, and no
# output can be written before everything has been read. We train two models with the same sizes, the same
# data and the same number of steps; the only difference is that the second one's decoder may look back at
# every encoder state (the mechanism of section 2).

# %%
exp = bottleneck_experiment()
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
ax_acc.set(xlabel="source length", ylabel="exact match (greedy)", ylim=(-0.02, 1.02),
           title="Reversing held-out strings")
ax_acc.legend()
plt.tight_layout()
plt.show()
for n in lengths:
    print(f"length {n:2d}: without attention {plain_accuracy[n]:.2f}   with attention {attentive_accuracy[n]:.2f}")

# %% [markdown]
# Both models handle short strings. As the strings grow, the model without attention collapses: its one
# vector cannot hold a dozen symbols in order, while the model with attention keeps most of its accuracy.
# Bahdanau et al. (2015) saw the same shape on English→French translation, where the plain encoder-decoder's
# quality fell steeply with sentence length and the attention model's did not.

# %%
longest = exp.max_len
assert attentive_accuracy[longest] > plain_accuracy[longest] + 0.3, "attention should win clearly on long strings"
assert sum(attentive_accuracy.values()) > sum(plain_accuracy.values())
assert plain_accuracy[exp.min_len] > 0.5, "both models should manage the shortest strings"

# %% [markdown]
# ## 2. Attention in equations
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
plot_attention(ax, greedy_alignments[0], out_symbols, src_symbols, title="Alignment α of the trained model",
               xlabel="source symbol", ylabel="output symbol (greedy)")
plt.show()

# %% [markdown]
# The picture is an anti-diagonal, and nobody told the model to produce one: the alignment is a by-product of
# learning to reverse. Look closely and it sits one place to the right of where you might first put it. To
# write output $t$ (which is source symbol $N-1-t$), the decoder looks hardest at source position $N-t$:
# the symbol it *has just written*. That is content-based addressing at work. The query knows which symbol
# the decoder just emitted and finds it in the source; the encoder is a left-to-right GRU, so the state
# $h_{N-t}$ there also carries the symbol before it, which is exactly the next one to write. Only the first
# step, with nothing written yet, looks directly at the last source symbol. We check both on 200 fresh
# strings of all lengths.

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
# ## 3. Scaled dot-product attention
#
# Take away the recurrent networks and keep the mechanism. Give it a set of **queries** (what each position
# is looking for), **keys** (what each position offers to be found by) and **values** (what it hands over when
# found). Stack them as matrices $Q \in \mathbb{R}^{L\times d_k}$, $K \in \mathbb{R}^{S\times d_k}$,
# $V \in \mathbb{R}^{S\times d_v}$; then all $L$ queries attend at once (Vaswani et al., 2017):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V,$$
#
# with the softmax taken over each row; the shapes chain as
# $[L\times d_k]\,[d_k\times S]\,[S\times d_v] = [L\times d_v]$. In section 2, $Q$ held the decoder states and $K = V$ the encoder
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
# ## 4. Why divide by $\sqrt{d_k}$?
#
# Suppose the components of a query and a key are independent with mean 0 and variance 1. Their dot product
# $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ independent terms of variance 1, so
#
# $$\mathrm{Var}(q\cdot k) = d_k, \qquad \mathrm{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1 .$$
#
# Unscaled, the scores spread wider as $d_k$ grows, and a softmax of widely spread numbers is almost one-hot.
# That hurts learning: the softmax's Jacobian is $\mathrm{diag}(p) - pp^\top$, which is zero when $p$ is
# one-hot, so almost no gradient reaches the scores. Vaswani et al. (2017) give this argument in a footnote;
# here we measure all three steps: the variance, the saturation, and the vanishing gradient. For the gradient
# we report the median over 400 random queries, the typical case: a mean would be carried by the few queries
# whose softmax happens not to saturate.

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
print(f"{'d_k':>5} {'Var(q.k)':>9} {'max p (raw)':>12} {'max p (scaled)':>15} {'grad raw':>11} {'grad scaled':>14}")
for d, (var, p_raw, g_raw), (_, p_scaled, g_scaled) in zip(dims, unscaled, scaled):
    print(f"{d:>5} {var:>9.1f} {p_raw:>12.3f} {p_scaled:>15.3f} {g_raw:>11.2e} {g_scaled:>14.2e}")

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
# ## 5. Masks: a matrix added before the softmax
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

# %%
keep_padding = padding_mask(torch.tensor([5, 3]), 5)  # two sequences, the second padded by 2
keep_causal = causal_mask(5)
keep_both = keep_causal & keep_padding  # broadcasts to (2, 1, 5, 5)
print("M for the padded sequence (padding and causal):\n", additive_mask(keep_both[1, 0]))

seed_everything(1)
x = torch.randn(2, 1, 5, 8)
_, masked_weights = scaled_dot_product_attention(x, x, x, keep_both)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
for ax, (title, keep) in zip(axes, [("padding", keep_padding[1, 0].expand(5, 5)), ("causal", keep_causal),
                                    ("causal and padding", keep_both[1, 0])]):
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

# %% [markdown]
# ## 6. Multi-head attention
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
    theirs, their_weights = reference(tokens, tokens, tokens, key_padding_mask=~keep[:, 0, 0],
                                      average_attn_weights=False)
print("parameters:", sum(p.numel() for p in mha.parameters()), "= 4(E^2 + E) =", 4 * (E * E + E))
print("per-head weights:", tuple(head_weights.shape), "(batch, heads, queries, keys)")
print("largest difference to nn.MultiheadAttention:", (ours - theirs).abs().max().item())

# %%
torch.testing.assert_close(ours, by_the_book)
torch.testing.assert_close(ours, theirs)
torch.testing.assert_close(fused, theirs)
torch.testing.assert_close(head_weights, their_weights)
assert sum(p.numel() for p in mha.parameters()) == 4 * (E * E + E)

# %% [markdown]
# ## 7. What attention costs
#
# The score matrix $QK^\top$ has one entry per (query, key) pair: for self-attention over $n$ tokens that is
# $n^2$ numbers per head, computed in $O(n^2 d)$ time and, in the naive implementation, **stored** for the
# backward pass. Doubling the length quadruples that memory. Fused kernels (Rabe and Staats, 2021; Dao et al.,
# 2022, FlashAttention) compute exactly the same result in tiles, with an online softmax, and keep only $O(n)$
# numbers per head (the softmax's normaliser) for the backward pass, recomputing the tiles when needed.
#
# We measure both, forward and backward, on this machine: the time, and the bytes autograd keeps for the
# backward pass (counted with `torch.autograd.graph.saved_tensors_hooks`, which works the same on CPU and
# GPU).

# %%
rows = cost_by_length(cost_lengths())
print(f"{'n':>6} {'naive ms':>9} {'fused ms':>9} {'naive MiB':>10} {'fused MiB':>10}")
for r in rows:
    print(f"{r['length']:>6} {r['naive_seconds'] * 1e3:>9.1f} {r['fused_seconds'] * 1e3:>9.1f} "
          f"{r['naive_bytes'] / 2**20:>10.2f} {r['fused_bytes'] / 2**20:>10.2f}")
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
    torch.testing.assert_close(mha(tokens, mask=keep, need_weights=False)[0], mha(tokens, mask=keep, need_weights=True)[0])

# %% [markdown]
# ## 8. Sparse attention patterns
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
# Written as masks they can be used by any attention function; a real speed-up additionally needs a kernel
# that skips the masked blocks (Longformer wrote a banded CUDA kernel), which a dense kernel with a mask does
# not do.

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
# The check: with a window mask, a query's output must not change when a key outside its window changes,
# and the number of scored pairs must be at most $n(2w+1)$, linear in $n$.

# %%
window = patterns[f"sliding window, w={w}"]
assert int(window.sum()) <= n * (2 * w + 1)
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
# | claim | the papers | this notebook (quick profile) |
# |---|---|---|
# | an encoder-decoder without attention degrades with length | Bahdanau et al. (2015), English→French BLEU on all test sentences: 17.82 (RNNencdec-50) vs 26.75 (RNNsearch-50), with the gap widening on long sentences | exact match on reversal at the longest length: printed in section 1, without vs with attention |
# | attention learns alignments without supervision | Bahdanau et al. (2015), their Figure 3 | the anti-diagonal of section 2 (one place to the right of the naive guess, for a reason we could explain), asserted on ≥ 80% of steps |
# | unscaled dot products have variance $d_k$ and saturate the softmax | Vaswani et al. (2017), footnote 4 | Var$(q\cdot k)/d_k$ within 10% of 1 for $d_k$ from 4 to 1024; a typical query's gradient over 100 times smaller unscaled at $d_k=1024$ (printed in section 4) |
# | attention's memory is quadratic, fused kernels make it linear | Rabe and Staats (2021); Dao et al. (2022) | growth per doubling, section 7: about ×4 naive, about ×2 fused |
# | windows make attention linear in $n$ | Beltagy et al. (2020) | $n(2w+1)$ pairs, section 8 |
#
# What did not carry over: translation quality itself (we reverse strings, a task chosen because its ideal
# alignment is known), and absolute speed, which depends on the machine; on a GPU the gap between the naive
# and fused kernels is much wider than on a CPU.
#
# ## Exercises
#
# 1. Make the decoder's attention *additive* (Bahdanau et al., 2015): $e^t_i = v^\top \tanh(W_1 h_i + W_2 s_t)$.
#    Does it learn reversal faster or slower than the dot product in section 1?
# 2. In section 4, replace the Gaussian keys by keys whose components have variance 4. Which scale factor
#    restores unit variance, and what does that suggest about initialising $W^Q$ and $W^K$?
# 3. Show that multi-head attention with $h$ heads of width $E/h$ can represent single-head attention of
#    width $E$ only in special cases: construct a case the single head cannot express.
# 4. Using `global_window_mask`, count how many layers a sliding window of $w=3$ needs before position 0 can
#    influence position 31, with and without a global token at position 0.
