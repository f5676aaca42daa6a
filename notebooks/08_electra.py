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
# # 08 · ELECTRA
#
# **The lesson.** ELECTRA trains BERT's encoder to spot replaced words instead of restoring masked ones, so
# every token gives a training signal, not 15% of them. The paper finds that this learns more per unit of
# compute, once the encoder judges words by their context. At a notebook's budget ours does not get there:
# when its run ends, the discriminator still misses most replacements, and masked LM is level or ahead. The
# chapter measures both, and `LECTURE_PROFILE=full` trains longer on a GPU.
#
# **What you will build.** ELECTRA (Clark et al., 2020) keeps BERT's encoder and changes what it learns
# from. A small masked LM, the *generator*, fills the masked positions by sampling. The encoder we keep, the
# *discriminator*, says for every token whether it is the original or a replacement, so every token carries a
# loss.
#
# We write the objective: which positions, what the generator sees, how samples are drawn and labelled, and
# the loss $L_\text{MLM} + 50\,L_\text{Disc}$. We build the two networks as their difference from BERT, and
# the pair that shares one embedding module. Then we count the compute of both networks with chapter 04's
# formula. We pretrain ELECTRA and masked LM on the same data at the same FLOPs, over three pretraining seeds,
# and fine-tune checkpoints on two of chapter 05's tasks: NER, and acceptability, which asks whether a verb
# agrees with its subject, the kind of misfit the discriminator is trained to notice (the paper's Figure 1 and
# Table 1 in shape). The generator's size (Figure 3) follows at the same compute; the efficiency ablation
# (Table 5) runs in the full profile. Our `ElectraForPreTraining` and `ElectraForMaskedLM` are tested equal to
# `transformers`' in float64 (`tests/models/test_electra.py`).
#
# [Open this notebook in Colab](https://colab.research.google.com/github/transformers-bert-course/course/blob/main/notebooks/08_electra.ipynb)

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
import time

import matplotlib.pyplot as plt
import torch
import transformers
from IPython.display import Markdown, display

from lecture_lib import plots, profile
from lecture_lib.chapters.ch08_electra import (
    CURVE_VARIANTS,
    PAPER_BERT_SMALL,
    PAPER_CHECKPOINTS,
    PAPER_TABLE5,
    budget,
    chapter_config,
    chapter_data_of,
    chapter_runs,
    detection_accuracy,
    flops_per_step,
    flops_per_token,
    mean_score,
    replaced_token_example,
    scratch_scores,
    seeded,
    seeded_scores,
    steps_for,
)
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.metrics import seed_summary
from lecture_lib.models.bert import BertConfig, training_flops_per_token
from lecture_lib.models.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraPretrainingModel,
    discriminator_loss,
    electra_training_flops_per_token,
)
from lecture_lib.objectives.replaced_tokens import (
    choose_positions,
    mask_for_generator,
    replace_tokens,
    sample_tokens,
)
from lecture_lib.reproductions import markdown_table, show_reproduction
from lecture_lib.runtime import limit_cpu_threads

notebook_start = time.perf_counter()
print("profile:", profile.current(), " CPU threads:", limit_cpu_threads())  # tiny models: one CPU thread
config = chapter_config()
print(config.model)
data = chapter_data_of(config)  # chapter 05's synthetic language: its vocabulary, sentence pairs and tasks
tokens = data.tokenizer.convert_ids_to_tokens

# %% [markdown]
# ## 1. Why masked LM is sample-inefficient
#
# BERT's loss reads 15% of the positions: the other 85% pass through the whole network, forward and
# backward, and contribute no loss term of their own. A sequence of 64 tokens gives masked LM about 10
# predictions and ELECTRA's discriminator 64. The cost of a training step hardly depends on how many
# positions carry a loss. The encoder runs on all of them either way; only the output layer is saved where
# nothing is predicted. What changes is the number of learning signals per FLOP. The masked positions also
# show the model a [MASK] token that never occurs at fine-tuning time.

# %%
batch = data.batch(0)
real = batch["attention_mask"].bool()
chosen = batch["labels"] != IGNORE_INDEX
print(
    f"one batch: {int(real.sum())} real tokens, {int(chosen.sum())} with a masked-LM loss "
    f"({chosen.sum() / real.sum():.1%}), {int(real.sum())} with a discriminator loss (100%)"
)

# %%
assert not (chosen & ~real).any() and not chosen[:, 0].any()  # only real tokens are chosen, never [CLS]

# %% [markdown]
# ## 2. Replaced-token detection
#
# With $m$ the chosen positions and $\hat x_i \sim p_G(x_i \mid x^\text{masked})$ the generator's samples,
#
# $$x^\text{corrupt} = \text{REPLACE}(x, m, \hat x), \qquad
#   L_\text{Disc} = \sum_{t} -\mathbb 1(x^\text{corrupt}_t = x_t)\log\big(1 - D(x^\text{corrupt}, t)\big)
#                   - \mathbb 1(x^\text{corrupt}_t \ne x_t)\log D(x^\text{corrupt}, t),$$
#
# with $D$ the probability of "replaced" (the sign convention of `transformers`; the paper writes $D$ for
# "original"). The training loss is $L_\text{MLM} + \lambda L_\text{Disc}$, $\lambda = 50$, and no gradient
# flows through the sampling: the generator learns masked LM by maximum likelihood, not to fool the
# discriminator.
#
# The details follow the authors' code. A sequence of $n$ tokens gets exactly $\text{round}(0.15\,n)$
# positions, not BERT's coin flip per position. The generator sees 85% of them as [MASK] and 15% unchanged;
# *none* is replaced by a random token. A sample that happens to equal the original is labelled original. We
# write each step by hand on a toy row, then check that the library's functions agree.

# %% [markdown]
# The pipeline on the paper's example sentence (after Clark et al., 2020, Figure 1), read bottom to top. Two
# positions are masked, and the generator's samples are written into them. One sample equals the original
# "the", so its label is original. At the top, the discriminator's label for every token.

# %%
plots.electra_diagram()
plt.show()

# %%
ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 3, 0, 0]])
attention = (ids != 0).long()
special = torch.isin(ids, torch.tensor([0, 2, 3])).long()
n = int(attention.sum())
print(f"n = {n} tokens -> round(0.15 n) = round({0.15 * n:.2f}) = {round(0.15 * n)} positions")

# by hand: draw a score per candidate and keep the k lowest
g = torch.Generator().manual_seed(0)
scores = torch.rand(ids.shape, generator=g).masked_fill((special == 1) | (attention == 0), 2.0)
k = round(0.15 * n)
by_hand = torch.zeros_like(ids, dtype=torch.bool)
by_hand[0, scores[0].argsort()[:k]] = True
library = choose_positions(attention, special, generator=torch.Generator().manual_seed(0))
print("chosen positions:", by_hand.nonzero()[:, 1].tolist(), library.nonzero()[:, 1].tolist())

# %%
assert torch.equal(by_hand, library) and int(library.sum()) == k

# %% [markdown]
# Sampling uses the Gumbel-max trick: $\arg\max_v(\ell_v + g_v)$ with $g_v = -\log(-\log u_v)$, $u_v$
# uniform, is a sample from $\text{softmax}(\ell)$. It draws with one uniform number per vocabulary entry and
# no cumulative sum. We check the frequencies against the softmax, then label one row by hand.
#
# One change from the paper. A young generator also samples entries of the vocabulary that the text never
# uses (WordPiece keeps pieces that tokenizing the corpus never produces). A discriminator spots those by the
# token alone, without reading its context, and learns nothing transferable from them. So our generator draws
# only among the tokens of the pretraining text: the softmax renormalised over those, set to zero elsewhere.

# %%
logits = torch.tensor([1.5, 0.5, 0.0, -1.0])
draws = sample_tokens(logits.expand(20000, 4), generator=torch.Generator().manual_seed(1))
frequencies = torch.bincount(draws, minlength=4) / len(draws)
print("softmax    ", [f"{p:.3f}" for p in torch.softmax(logits, 0).tolist()])
print("Gumbel-max ", [f"{p:.3f}" for p in frequencies.tolist()])
in_text = data.in_text()  # the vocabulary entries the pretraining text uses
print(f"tokens of the text: {int(in_text.sum())} of the {len(in_text)} vocabulary entries")
allowed = torch.tensor([False, True, True, True])  # as if token 0 never occurred in the text
restricted = (
    torch.bincount(
        sample_tokens(logits.expand(20000, 4), generator=torch.Generator().manual_seed(1), allowed=allowed), minlength=4
    )
    / 20000
)
print("allowed 1-3", [f"{p:.3f}" for p in restricted.tolist()], "(the softmax over tokens 1-3)")

masked, labels = mask_for_generator(ids, library, mask_token_id=4, generator=torch.Generator().manual_seed(2))
sampled = torch.tensor([ids[0, int(library.nonzero()[0, 1])], 99])  # the first sample equals its original
corrupted, replaced = replace_tokens(ids, labels, sampled)
replaced_by_hand = (corrupted != ids).long()
for name, row in (("original", ids), ("generator in", masked), ("corrupted", corrupted), ("label", replaced)):
    print(f"{name:13s}", " ".join(f"{v:3d}" for v in row[0, :n].tolist()))

# %%
assert (frequencies - torch.softmax(logits, 0)).abs().max() < 0.015  # 4 standard errors at 20,000 draws
assert restricted[0] == 0 and (restricted[1:] - torch.softmax(logits[1:], 0)).abs().max() < 0.015
assert torch.equal(replaced, replaced_by_hand) and int(replaced.sum()) == 1  # the equal sample counts as original
assert ((masked[library] == 4) | (masked[library] == ids[library])).all()  # [MASK] or unchanged, never random

# %% [markdown]
# ## 3. Generator and discriminator
#
# Both networks are BERT's encoder with three differences: embeddings of their own width $E$, projected to
# $H$ only when $E \ne H$ (ELECTRA-Small: $E = 128$, $H = 256$); no pooler; and their heads. The
# discriminator maps each $h_t$ through dense, activation, dense to one logit,
# $D(x, t) = \sigma(w^\top \text{act}(W h_t))$; the generator is a masked LM whose output matrix is its own
# token table, $p_G(x_t \mid x) \propto \exp(e(x_t)^\top \text{LN}(\text{GELU}(W h_t)) + b)$, with $W: H \to E$.
# One trap in matching `transformers`: its generator head always uses the exact GELU, whatever the config's
# `hidden_act` says. Here a small ELECTRA-Small-shaped pair is compared with `transformers` on one batch.

# %%
torch.manual_seed(0)
tiny = dict(
    vocab_size=97,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
hf_disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(**tiny)).double().eval()
hf_gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**tiny)).double().eval()
ours_disc, ours_gen = ElectraForPreTraining.from_hf(hf_disc), ElectraForMaskedLM.from_hf(hf_gen)
x = torch.randint(5, 97, (2, 12))
mask = torch.ones_like(x)
mask[1, 8:] = 0
y = torch.randint(0, 2, x.shape)
gen_labels = torch.where(torch.rand(x.shape, generator=torch.Generator().manual_seed(3)) < 0.3, x, IGNORE_INDEX)
gap_d = (ours_disc(x, mask).logits - hf_disc(x, attention_mask=mask).logits).abs().max().detach()
gap_g = (ours_gen(x, mask).logits - hf_gen(x, attention_mask=mask).logits).abs().max().detach()
ours_loss, hf_loss = ours_disc(x, mask, labels=y).loss, hf_disc(x, attention_mask=mask, labels=y).loss
print(f"largest logit difference: discriminator {gap_d:.1e}, generator {gap_g:.1e}")
print(f"discriminator loss: ours {ours_loss:.6f}, transformers {hf_loss:.6f} (its labels.float() makes it float32)")

# %%
assert gap_d < 1e-10 and gap_g < 1e-10 and abs(ours_loss.item() - hf_loss.item()) < 1e-6
# the loss ignores padding: other logits and labels at the padded positions give the same loss
logits_d = ours_disc(x, mask).logits.detach()
shifted, flipped = logits_d.clone(), y.clone()
shifted[1, 8:] += 10.0
flipped[1, 8:] = 1 - flipped[1, 8:]
assert torch.equal(discriminator_loss(shifted, flipped, mask), discriminator_loss(logits_d, y, mask))

# %% [markdown]
# Now the pair the chapter trains: a discriminator of two layers of $H = E = 64$, and a generator of a
# quarter of its width ($H = 16$). Both learn chapter 05's synthetic language; section 5 says for how long.
# The cell below pretrains every run of the chapter and fine-tunes each, all at once, and the later sections
# read them. Then one held-out sequence goes through the first seed's pair: what the generator saw, what it
# sampled, the label, and the discriminator's probability of "replaced".
#
# <details><summary>Which runs, and how they are scheduled</summary>
#
# The quick profile runs ELECTRA, masked LM and ELECTRA with a unigram generator, once per pretraining seed;
# the full profile adds Table 5's rows and more generator sizes. Each run trains on one CPU thread, as many at
# a time as the machine has cores, and each is cached. The fine-tuning of each run's checkpoints follows its run
# in the same pool, so no core sits idle for long.
#
# </details>

# %%
profile.expect(165, "Pretraining every run of the chapter and fine-tuning each, as many at a time as there are cores")
table5_runs, sweep = chapter_runs(config)
electra = table5_runs["ELECTRA"][config.seed]
walk = replaced_token_example(electra, config, data)
print(f"{'original':>12s} {'generator in':>13s} {'corrupted':>12s}  label  P(replaced)")
for t in walk:
    flag = " <-" if t["replaced"] else ""
    print(
        f"{t['original']:>12s} {t['generator_input']:>13s} {t['corrupted']:>12s}  {t['replaced']:5d}  "
        f"{t['p_replaced']:10.2f}{flag}"
    )
held_out = detection_accuracy(electra, config, data)
print({k: round(v, 3) for k, v in held_out.items()})

# %%
assert all(t["replaced"] == int(t["original"] != t["corrupted"]) for t in walk)

# %% [markdown]
# ## 4. Sharing embeddings
#
# The paper shares the token and position embeddings of the two networks; the authors' code shares the
# whole embedding module, segment table and LayerNorm too. The generator's output matrix is its token
# table, so it is the shared table as well. Sharing is one module object used by both networks: one set of
# Parameters, updated by both losses. The discriminator alone would update only the embeddings of the
# tokens it sees; through the generator's softmax every token's embedding gets a gradient at every step.
# Clark et al. (2020) measured GLUE 83.6 without tying, 84.3 tying the token embeddings and 84.4 tying all weights
# (equal sizes, 500k steps). Because `transformers` has no class for the pair, `to_hf()` returns its two
# halves, each holding a copy of the shared tables.

# %%
pair = ElectraPretrainingModel.from_config(ElectraConfig(**tiny), generator_size=0.5)
gen_emb, disc_emb = pair.generator.electra.embeddings, pair.discriminator.electra.embeddings
print(
    "same module:",
    gen_emb is disc_emb,
    "| output matrix is the token table:",
    pair.generator.generator_lm_head.weight is disc_emb.word_embeddings.weight,
)
count = sum(p.numel() for p in pair.parameters())
separate = sum(p.numel() for p in pair.generator.parameters()) + sum(p.numel() for p in pair.discriminator.parameters())
print(f"parameters: {count:,} in the pair, {separate:,} if the embeddings were counted twice")
hf_halves = pair.to_hf()
print("transformers halves:", [type(m).__name__ for m in hf_halves])

# %%
assert gen_emb is disc_emb and count == separate - sum(p.numel() for p in disc_emb.parameters())
for half in hf_halves:
    assert torch.equal(half.electra.embeddings.word_embeddings.weight, disc_emb.word_embeddings.weight)

# %% [markdown]
# ## 5. Matched compute
#
# Chapter 04 counted training compute as $6N + 12LTH$ FLOPs per token (forward and backward), $N$ the weights
# of the matrix products a token passes through. An ELECTRA step costs the generator's forward and backward
# pass, with its output matrix on the masked 15% only. It costs the discriminator's *as well*, with a head of
# $H^2 + H$ on every token. A masked-LM step costs one network of the discriminator's size, with a generator
# head on the masked 15%. The budget is what ELECTRA's steps cost. Every run gets the steps the budget pays
# for, so masked LM, cheaper per step, gets more of them.
#
# The cell first checks the formula against chapter 04's for a BERT of the same sizes. Then it prints each
# network's count per token, and the steps and FLOPs each run spends.
#
# <details><summary>Why padding does not change the count</summary>
#
# Every sequence is counted at the full length $T$, for every run alike, although each batch is cut after its
# longest row. The columns cut off are padding, which no attention and no loss reads, so they would change no
# output.
#
# </details>

# %%
sizes = config.model
bert_same = BertConfig(
    **{
        k: getattr(sizes, k)
        for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    }
)
T = sizes.max_position_embeddings
print(
    f"per token: masked LM (full head) {electra_training_flops_per_token(sizes, T, 'generator') / 1e6:.3f} MFLOP, "
    f"chapter 04's BERT formula {training_flops_per_token(bert_same, T) / 1e6:.3f} MFLOP"
)
print(
    f"budget: {budget(config):.3e} FLOPs "
    f"(ELECTRA's {config.pretrain.steps} steps of {config.pretrain.batch_size} x {T} tokens)"
)
spent = {}
for variant, size in (("ELECTRA", config.generator_size), ("BERT", None)):
    parts = flops_per_token(variant, config, size)
    spent[variant] = steps_for(variant, config, size) * flops_per_step(variant, config, size)
    print(
        f"{variant:8s} per token "
        + " + ".join(f"{name} {value / 1e6:.4f}" for name, value in parts.items())
        + f" MFLOP = {flops_per_step(variant, config, size) / 1e9:.3f} GFLOP a step; "
        f"{steps_for(variant, config, size)} steps spend {spent[variant]:.3e} FLOPs"
    )
mlm_steps, electra_steps = steps_for("BERT", config, None), config.pretrain.steps
print(
    f"At equal FLOPs masked LM takes {mlm_steps / electra_steps - 1:.0%} more steps than ELECTRA: that share is "
    "what ELECTRA's small generator adds to each step."
)

# %%
assert electra_training_flops_per_token(sizes, T, "generator") == training_flops_per_token(bert_same, T)
assert all(abs(flops / budget(config) - 1) < 0.01 for flops in spent.values())  # the same compute, within a step

# %% [markdown]
# The headline experiment, repeated over pretraining seeds. We keep copies of the encoder at fractions of the
# budget, as the paper's "x% trained" rows do. Each copy is fine-tuned on two of chapter 05's tasks, and its
# score is their mean. NER's test sentences name only people whom pretraining, and not fine-tuning, has shown,
# so it reads what pretraining learned about each token. Acceptability asks whether the main verb agrees with
# its subject: it rewards noticing a word that does not fit its context, which is the discriminator's own
# task. We report the mean and spread (standard deviation) over seeds. A model fine-tuned from random weights
# marks the floor.
#
# The paper's claim is judged at the budgets below the whole one, where its Figure 1 shows the widest gap: the
# fewer the steps, the more a loss on every token should count. A second table shows what ELECTRA's
# discriminator has learned at each checkpoint, beside ELECTRA's lead over masked LM there.
#
# <details><summary>What a seed fixes, and what the checkpoints are</summary>
#
# For each seed both runs draw their initialisation, batch order, masked positions and samples from it. The
# two read the same batches with the same masked positions. The language, the documents and the task examples
# are the same for every seed. The checkpoints all come from one run, so the learning-rate schedule is the
# whole run's. Each copy is fine-tuned with the seed's fine-tuning seed.
#
# </details>
#
# <details><summary>The discriminator's columns</summary>
#
# Each row measures the whole pair as it was at that share of its run, on held-out batches. *Recall on
# replacements* is the share of the replaced tokens that it calls replaced. Every replacement is a token of
# the text, so only its context gives it away.
#
# *Guess loss removed* sets its held-out loss per token against the loss of a constant guess at the share of
# tokens replaced (the entropy of that share). The share of the guess's loss it has removed is how much of the
# per-token signal it has turned into knowledge.
#
# </details>

# %%
electra_runs, mlm_runs = (table5_runs[variant] for variant in CURVE_VARIANTS)  # ELECTRA, then BERT
curve = {
    "ELECTRA": seeded_scores(electra_runs, config, config.fractions),
    "masked LM (BERT)": seeded_scores(mlm_runs, config, config.fractions),
}
from_scratch = [mean_score(scratch_scores(seeded(config, seed))) for seed in config.seeds]
ahead = {f: sum(e > m for e, m in zip(curve["ELECTRA"][f], curve["masked LM (BERT)"][f])) for f in config.fractions}
show_reproduction(
    "ch08-electra-table1",
    "Paper (Clark et al., 2020), Table 1: ELECTRA-Small checkpoints and BERT-Small at "
    "ELECTRA-Small's FLOPs (GLUE dev); ours: fine-tuned "
    + ", ".join(config.tasks)
    + " score over seeds "
    + ", ".join(map(str, config.seeds)),
    [
        "share of the budget",
        "our FLOPs",
        "ELECTRA (ours)",
        "masked LM (ours)",
        "seeds with ELECTRA ahead",
        "ELECTRA-Small (paper)",
        "BERT-Small (paper)",
    ],
    [
        [
            f"{f:.4g}",
            f"{f * budget(config):.2e}",
            seed_summary(curve["ELECTRA"][f]),
            seed_summary(curve["masked LM (BERT)"][f]),
            f"{ahead[f]} of {len(config.seeds)}",
            f"{PAPER_CHECKPOINTS[f]:.1f}",
            f"{PAPER_BERT_SMALL}" if f == 1.0 else None,
        ]
        for f in config.fractions
    ]
    + [["0 (from scratch)", "0", seed_summary(from_scratch), seed_summary(from_scratch), None, None, None]],
    note="The paper's ELECTRA-Small is ahead of BERT-Small at equal FLOPs; its Figure 1 shows the gap widest at "
    'the small budgets. Our verdict is in "What we saw".',
)
detection_at = {
    f: {seed: detection_accuracy(run, seeded(config, seed), data, fraction=f) for seed, run in electra_runs.items()}
    for f in config.fractions
}
recall_at = {f: [d["recall on replacements"] for d in at.values()] for f, at in detection_at.items()}
learned_at = {
    f: [1 - d["discriminator loss"] / d["constant guess loss"] for d in at.values()] for f, at in detection_at.items()
}
lead = {f: [e - m for e, m in zip(curve["ELECTRA"][f], curve["masked LM (BERT)"][f])] for f in config.fractions}
display(
    Markdown(
        "**The discriminator at each checkpoint**\n\n"
        + markdown_table(
            ["share of the budget", "recall on replacements", "guess loss removed", "ELECTRA − masked LM"],
            [
                [f"{f:.4g}", seed_summary(recall_at[f]), seed_summary(learned_at[f]), seed_summary(lead[f])]
                for f in config.fractions
            ],
        )
    )
)
detection, learned, recall = detection_at[1.0], learned_at[1.0], recall_at[1.0]  # the whole run
print(
    "at the end, per seed: recall on replacements",
    ", ".join(f"{r:.3f}" for r in recall),
    "| accuracy on the originals",
    ", ".join(f"{d['accuracy on originals']:.3f}" for d in detection.values()),
    "| held-out loss per token",
    ", ".join(f"{d['discriminator loss']:.3f}" for d in detection.values()),
    "nats against a constant guess's",
    ", ".join(f"{d['constant guess loss']:.3f}" for d in detection.values()),
)
smaller = [f for f in config.fractions if f < 1.0]  # the smaller budgets, where Figure 1's gap is widest

fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(11, 3.8))
for name, points in curve.items():
    flops = [f * budget(config) for f in points]
    means = torch.tensor([list(seeds) for seeds in points.values()]).double()
    ax.errorbar(flops, means.mean(1), yerr=means.std(1), fmt="o-", capsize=3, label=name)
ax.axhline(sum(from_scratch) / len(from_scratch), color="gray", ls=":", label="no pretraining")
ax.set_xscale("log")
ax.set_xlabel("pretraining FLOPs")
ax.set_ylabel("fine-tuned score (" + ", ".join(config.tasks) + ")")
ax.set_title("Figure 1 in shape: score against compute (mean ± spread)")
ax.legend()
for name, run in (("ELECTRA (L_MLM + 50 L_Disc)", electra), ("masked LM", mlm_runs[config.seeds[0]])):
    ax_loss.plot(range(1, len(run.loss) + 1), run.loss, label=name)
ax_loss.set_yscale("log")
ax_loss.set_xlabel("step")
ax_loss.set_ylabel("training loss")
ax_loss.set_title(f"the two runs of seed {config.seeds[0]}")
ax_loss.legend()
plt.tight_layout()
plt.show()

# %%
assert len(config.seeds) >= 3 and all(0 <= r <= 1 for r in recall) and smaller
assert all(d["discriminator loss"] < d["constant guess loss"] for d in detection.values())  # it has learned something
# ELECTRA's encoder is what its discriminator trained: it finds replacements far above the rate of a guess that
# calls tokens replaced as often as it calls originals so (1 - accuracy on the originals)
assert all(d["recall on replacements"] > 2 * (1 - d["accuracy on originals"]) for d in detection.values())
# and it learns to judge tokens by their context during the run: on every seed it finds more of the replacements
# at the end than at the first checkpoint
assert all(end > start for end, start in zip(recall_at[1.0], recall_at[config.fractions[0]]))

# %% [markdown]
# ## 6. Table 5 at equal FLOPs
#
# Where does ELECTRA's gain come from? Table 5 separates the two changes: learning from all tokens, and
# never showing [MASK] to the network that is kept.
#
# - **ELECTRA 15%**: the discriminator's loss on the masked positions only (the same inputs).
#
# - **Replace MLM**: masked LM whose masked positions hold generator samples instead of [MASK].
#
# - **All-Tokens MLM**: Replace MLM predicting every token, with a copy mechanism
#   $p(x_t) = D_t\,\mathbb 1[x_t = \text{input}_t] + (1 - D_t)\,\text{softmax}(\ell_t)[x_t]$.
#
# - **BERT**: masked LM as in section 5.
#
# Every row gets the same FLOP budget and the same seeds as section 5; the table gives each row's FLOPs. The
# cell also prints the share of the masked positions whose token the generator replaced. That is the share of
# ELECTRA 15%'s labels that say "replaced": near 1, its loss is nearly a constant. The quick profile's budget
# pays for ELECTRA and masked LM only; `LECTURE_PROFILE=full` runs the other three rows over the same seeds.

# %%
table5 = {variant: seeded_scores(runs, config)[1.0] for variant, runs in table5_runs.items()}
show_reproduction(
    "ch08-electra-table5",
    "Paper (Clark et al., 2020), Table 5: the efficiency ablation at equal compute, "
    "ELECTRA-Base (GLUE dev); ours: fine-tuned "
    + ", ".join(config.tasks)
    + " score over seeds "
    + ", ".join(map(str, config.seeds)),
    ["model", "our steps", "our FLOPs", "ours", "paper"],
    [
        [
            variant,
            table5_runs[variant][config.seeds[0]].steps,
            f"{table5_runs[variant][config.seeds[0]].flops:.3e}",
            seed_summary(table5[variant]),
            f"{PAPER_TABLE5[variant]:.1f}",
        ]
        for variant in PAPER_TABLE5
        if variant in table5
    ],
    note="The paper's reading: most of ELECTRA's gain over BERT comes from learning from all tokens (All-Tokens "
    'MLM close to ELECTRA), less from never showing [MASK]; its verdicts are in "What we saw".',
)
replaced_share = [d["replaced share"] for d in detection.values()]
print("masked positions the generator replaced, per seed:", ", ".join(f"{s:.3f}" for s in replaced_share))
print("rows not run in this profile:", ", ".join(v for v in PAPER_TABLE5 if v not in table5) or "none")

# %%
# every row spent the budget, within a step of its own
assert all(abs(runs[config.seeds[0]].flops / budget(config) - 1) < 0.01 for runs in table5_runs.values())

# %% [markdown]
# ## 7. The generator's size
#
# A generator as large as the discriminator makes the task too hard. Most of its samples are plausible, and
# the discriminator spends its capacity on them; the pair also costs twice as much. The paper found a quarter
# to a half of the discriminator's width best, and a unigram generator (tokens drawn by frequency, nothing
# learned) clearly worse. Each size here spends the same FLOPs. So a larger generator means fewer steps, and
# the unigram generator, which costs nothing, gets the most.
#
# Beside each score, the table shows what the generator gives the discriminator to learn from. One column is
# its accuracy at the masked positions; the unigram generator's is the most frequent token's. The other is the
# trained discriminator's recall on its replacements.
#
# <details><summary>Which sizes run, and their feed-forward width</summary>
#
# The quick profile compares the chapter's generator with the unigram one on every pretraining seed. The full
# profile adds 1/8, 1/2 and 1.
#
# The authors' rule gives a generator a feed-forward layer of 4 x its width. Our quick discriminator has 2 x,
# so at size 1 its generator would be the discriminator with a feed-forward layer twice as wide.
#
# </details>

# %%
sweep_scores, sweep_detection, rows = {}, {}, []
for size, runs in sorted(sweep.items(), key=lambda item: str(item[0])):
    sweep_scores[size] = seeded_scores(runs, config)[1.0]
    sweep_detection[size] = [detection_accuracy(run, seeded(config, seed), data) for seed, run in runs.items()]
    rows.append(
        [
            str(size),
            runs[config.seed].steps,
            seed_summary(sweep_scores[size]),
            seed_summary([d["generator accuracy"] for d in sweep_detection[size]]),
            seed_summary([d["recall on replacements"] for d in sweep_detection[size]]),
        ]
    )
show_reproduction(
    "ch08-electra-figure3",
    "Paper (Clark et al., 2020), Figure 3: the generator's size at equal compute (GLUE): "
    "best at 1/4-1/2 of the discriminator, an equal size and a unigram generator worse; ours: fine-tuned "
    + ", ".join(config.tasks)
    + " score over seeds "
    + ", ".join(map(str, config.seeds)),
    [
        "generator (share of the discriminator's width)",
        "steps",
        "score",
        "its accuracy at the masked positions",
        "discriminator's recall on its replacements",
    ],
    rows,
    note='The paper\'s order (1/4 above the unigram generator) is judged in "What we saw".',
)

# %% [markdown]
# A unigram generator's replacements are often words of the wrong kind in their place, so its discriminator
# finds far more of them than the learned generator's, whose samples fit better. Easy labels teach a young
# discriminator quickly; the paper's point is that harder ones teach it more in the end.

# %%
unigram_recall = [d["recall on replacements"] for d in sweep_detection["unigram"]]
learned_recall = [d["recall on replacements"] for d in sweep_detection[config.generator_size]]
assert all(u > learned for u, learned in zip(unigram_recall, learned_recall))  # its replacements are easier
assert all(min(scores) > max(from_scratch) for scores in sweep_scores.values())  # both pretrained models learned

# %% [markdown]
# ## What we saw
#
# The cell below makes this table from this run's numbers. The claims and their rules are declared in
# `lecture_lib/chapters/ch08_electra.py` (`CLAIMS`, `CHECKS`) before anything runs. Each score is a model's
# mean over the chapter's tasks, fine-tuned once per pretraining seed. Each verdict follows the rule in its
# column.

# %%
from lecture_lib.chapters.ch08_electra import CHECKS, CLAIMS  # noqa: E402
from lecture_lib.reproductions import checked, measured, show_what_we_saw, shown  # noqa: E402

seeds = list(config.seeds)
first_batch = data.batch(0)
row_lengths = first_batch["attention_mask"].sum(1).tolist()
real_tokens = int(sum(row_lengths))
mlm_tokens = int((first_batch["labels"] != IGNORE_INDEX).sum())
worst = {name: [min(points[f][i] for f in smaller) for i in range(len(seeds))] for name, points in curve.items()}
worst_lead = [min(lead[f][i] for f in smaller) for i in range(len(seeds))]
above_scratch = {name: (values, from_scratch) for name, values in table5.items()}
budgets = " and ".join(f"{f:.0%}" for f in smaller)
if set(table5) == set(PAPER_TABLE5):  # the full profile: every row of Table 5 ran
    midpoint = [(e + b) / 2 for e, b in zip(table5["ELECTRA"], table5["BERT"])]  # half of ELECTRA's gain over BERT
    table5_claims = {
        "08-electra-beats-electra-15pct": measured(
            f"ELECTRA {seed_summary(table5['ELECTRA'])}, ELECTRA 15% {seed_summary(table5['ELECTRA 15%'])}, from "
            f"scratch {seed_summary(from_scratch)}; replaced share of the masked positions "
            + ", ".join(f"{s:.3f}" for s in replaced_share)
            + " (section 6)",
            table5["ELECTRA"],
            table5["ELECTRA 15%"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={name: above_scratch[name] for name in ("ELECTRA", "ELECTRA 15%")},
        ),
        "08-all-tokens-is-most-of-the-gain": measured(
            ", ".join(f"{variant} {seed_summary(scores)}" for variant, scores in table5.items()) + " (section 6)",
            table5["All-Tokens MLM"],
            midpoint,
            seeds=seeds,
            seed_kind="pretraining",
            gates={name: above_scratch[name] for name in ("All-Tokens MLM", "ELECTRA", "BERT")},
        ),
        "08-replace-mlm-beats-bert": measured(
            f"Replace MLM {seed_summary(table5['Replace MLM'])}, BERT {seed_summary(table5['BERT'])} (section 6)",
            table5["Replace MLM"],
            table5["BERT"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={name: above_scratch[name] for name in ("Replace MLM", "BERT")},
        ),
    }
else:
    table5_claims = {  # the rules the quick profile does not judge: Table 5's
        claim.key: shown("Table 5's other rows run in the full profile only (section 6)")
        for claim in CLAIMS
        if getattr(claim, "quick", "")
    }
show_what_we_saw(
    "ch08-what-we-saw",
    "What we saw: chapter 08",
    CLAIMS,
    {
        "08-electra-beats-mlm-at-matched-compute": measured(
            "; ".join(
                f"{f:.0%} of {budget(config):.2e} FLOPs: ELECTRA {seed_summary(curve['ELECTRA'][f])}, masked LM "
                f"{seed_summary(curve['masked LM (BERT)'][f])}"
                for f in config.fractions
            )
            + f"; from scratch {seed_summary(from_scratch)}; ELECTRA's lead at the worse of {budgets}, per seed: "
            + ", ".join(f"{x:+.3f}" for x in worst_lead)
            + " (section 5)",
            worst_lead,
            seeds=seeds,
            seed_kind="pretraining",
            gates={
                "ELECTRA at its worst checkpoint below the whole budget": (worst["ELECTRA"], from_scratch),
                "masked LM at its worst checkpoint below the whole budget": (worst["masked LM (BERT)"], from_scratch),
            },
        ),
        **table5_claims,
        "08-small-generator-beats-unigram": measured(
            "; ".join(
                f"{size}: score {seed_summary(scores)}, recall "
                f"{seed_summary([d['recall on replacements'] for d in sweep_detection[size]])}"
                for size, scores in sweep_scores.items()
            )
            + " (section 7)",
            sweep_scores[config.generator_size],
            sweep_scores["unigram"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={
                "ELECTRA with the chapter's generator": (sweep_scores[config.generator_size], from_scratch),
                "ELECTRA with the unigram generator": (sweep_scores["unigram"], from_scratch),
            },
        ),
    },
    CHECKS,
    {
        "08-all-tokens-carry-a-loss": checked(
            f"{mlm_tokens} of {real_tokens} real tokens of a batch ({mlm_tokens / real_tokens:.1%}) carry an MLM loss, "
            f"all {real_tokens} a discriminator loss (section 1)",
            [mlm_tokens, real_tokens],
            [sum(round(0.15 * n) for n in row_lengths), real_tokens],
        ),
        "08-masking-as-the-code": checked(
            "positions and labels by hand and by the library, equal (section 2); tested over thousands of rows",
            [float(torch.equal(by_hand, library)), float(torch.equal(replaced, replaced_by_hand))],
            1.0,
        ),
        "08-matches-transformers": checked(
            f"largest logit difference {gap_d:.1e} (discriminator), {gap_g:.1e} (generator) (section 3); every "
            "gradient equal to 1e-9 in the tests",
            [float(gap_d), float(gap_g)],
            0.0,
        ),
    },
)
# %% [markdown]
# ## What the numbers say
#
# ELECTRA's gain needs a discriminator that judges tokens by their context. The cell prints how far ours got,
# and where masked LM stands.

# %%
first, last = config.fractions[0], config.fractions[-1]
print(
    f"ELECTRA's discriminator found {min(recall_at[first]):.0%}-{max(recall_at[first]):.0%} of the replacements "
    f"at {first:.0%} of its budget and {min(recall_at[last]):.0%}-{max(recall_at[last]):.0%} at the end "
    f"(the unigram generator's, {min(unigram_recall):.0%}-{max(unigram_recall):.0%})."
)
print(
    f"ELECTRA minus masked LM, at the worse of {budgets} per seed: "
    + ", ".join(f"{x:+.3f}" for x in worst_lead)
    + "; at the whole budget: "
    + ", ".join(f"{x:+.3f}" for x in lead[1.0])
    + "."
)

# %% [markdown]
# Not at this scale, then. When the budget ends, our discriminator is still learning to read context, while
# masked LM learns which token fits where from its first steps. The full profile (`LECTURE_PROFILE=full`, a
# GPU: 2,000 steps of 64 sequences at width 128, and every row of Table 5) was not run for this notebook.
#
# ## Exercises
#
# 1. Set $\lambda = 1$ in the loss (`discriminator_weight=1.0`). How do the two losses move, and why does
#    the paper weight the discriminator by 50?
#
# <details><summary>Hint</summary>
#
# `chapter_config(discriminator_weight=1.0)` sets the field (a new run: the weight is part of its cache key), and
# `pretrain_run("ELECTRA", that_config, that_config.generator_size)` trains it. For the final weights of both runs
# (`run.final_state`, loaded into `build_model("ELECTRA", ...)`), compute the output's `mlm_loss` and `discriminator_loss` on a few of
# `data.batch`'s batches. Compare their sizes: a loss averaged over 15% of the tokens with a 600-way softmax
# against a binary loss over all tokens.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# With $\lambda = 1$ the generator's masked-LM loss dominates the sum, and the discriminator's loss should fall
# more slowly than with $\lambda = 50$. The binary loss is much smaller than the masked-LM loss; the weight 50
# puts the two on a comparable scale, so the shared embeddings serve the discriminator, which is the model kept.
#
# </details>
#
# 2. The discriminator could learn a shortcut from the 15% of chosen positions that keep their token: the
#    generator sees the original there. Measure how often the generator's sample is right at those
#    positions and at the [MASK] ones.
#
# <details><summary>Hint</summary>
#
# Select the positions where the input kept the original token (chosen, but not `[MASK]`); compare the generator's
# samples there with the originals, and do the same at the `[MASK]` positions. The solution is
# `generator_right_by_input(model, data.batch(step), data.tokenizer.mask_token_id)` in
# `lecture_lib/chapters/ch08_electra.py`, for a model of section 7 (`build_model` with a run's `final_state`).
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# At the kept positions the generator sees the true token, yet the trained generators of section 7 copy it only
# part of the time: in the quick profile they are right at about 45% of the kept positions, against about 13% at
# `[MASK]` (section 7's table counts both kinds together). A discriminator could learn that a chosen position
# whose input token is real is "original", and so learn little there; the two rates say how much of the 15% is
# such free labels.
#
# </details>
#
# 3. Count ELECTRA-Small's training FLOPs per token with `electra_training_flops_per_token` (E = 128,
#    H = 256, 12 layers, a generator of H = 64, 128 tokens) and check the paper's 1.4e18 for 1M steps of
#    128 sequences. What does the paper's count include that ours does not, or the other way round?
#
# <details><summary>Hint</summary>
#
# ELECTRA-Small: `ElectraConfig()` for the discriminator and
# `ElectraConfig(hidden_size=64, num_attention_heads=1, intermediate_size=256)` for the generator; add both
# networks' `electra_training_flops_per_token` at 128 tokens and multiply by the run's tokens: $10^6$ steps of
# 128 sequences of 128 tokens, $1.64 \times 10^{10}$. The solution is `electra_small_training_flops` in
# `lecture_lib/chapters/ch08_electra.py`.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# About $1.48 \times 10^{18}$ with the generator's LM head over every position ($9.0 \times 10^7$ FLOPs per
# token), and $1.15 \times 10^{18}$ with the head on the 15% masked positions only, close to the paper's
# $1.4 \times 10^{18}$. What differs is the bookkeeping: ours counts the matrix products and the attention term
# ($6N + 12LTH$), while the authors' FLOP script also counts smaller operations (for example layer norms,
# softmaxes and activations), and where the generator's output layer is applied moves the total by a quarter.
#
# </details>
#
# 4. Fine-tune with the ELECTRA classification head (token 0, dense, GELU, dense) instead of BERT's pooler.
#    Does it change the curve?
#
# <details><summary>Hint</summary>
#
# Replace the pooler with dense → GELU → dense on token 0 (ELECTRA's classification head), keep the rest of the
# fine-tuning loop and plot the same curve. The solution is `ElectraHeadForSequenceClassification` in
# `lecture_lib/chapters/solutions/ch08_electra.py` and `with_electra_head` in `lecture_lib/chapters/ch08_electra.py`:
# `finetune_scores(run.variant, config, run.generator_size, f, electra_head=True)` fine-tunes each checkpoint with
# it (cached apart from the pooler's scores).
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# The head computes what `transformers`' `ElectraClassificationHead` computes on the same weights. Only the
# sentence tasks (acceptability, and entailment in the full profile) read BERT's pooler, so only they get the new
# head; NER's head reads every token and no pooler, and its scores stay exactly as they were. Expect the
# acceptability scores to move by less than the spread between seeds, since the heads differ by an activation,
# which fine-tuning absorbs.
#
# </details>

# %% [markdown]
# ## Further reading
#
# - Clark, Luong, Le and Manning (2020). *ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
#   Generators*. The paper, with the compute-matched comparisons of sections 5-7.
# - Goodfellow et al. (2014). *Generative Adversarial Nets*. The adversarial setup ELECTRA resembles but does not
#   use: its generator is trained by maximum likelihood.
# - He, Gao and Chen (2023). *DeBERTaV3: Improving DeBERTa using ELECTRA-Style Pre-Training with
#   Gradient-Disentangled Embedding Sharing*. Replaced-token detection at scale, and a fix for the shared embeddings
#   of section 4.
# - Meng et al. (2021). *COCO-LM: Correcting and Contrasting Text Sequences for Language Model Pretraining*. A
#   successor that asks the main model to correct the replaced tokens, not only spot them.

# %%
print(f"whole notebook: {time.perf_counter() - notebook_start:.0f} s")
