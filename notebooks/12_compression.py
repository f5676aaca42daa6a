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
# # 12 · Compression: distillation, quantization, pruning
#
# **The lesson.** A trained BERT can be made several times smaller with little loss. Distillation trains a
# smaller student on the teacher's softened predictions, quantization stores numbers in 8 bits or fewer, and
# pruning removes what the model barely uses. Each trades accuracy for size in its own way, and this chapter
# measures the trade on one small teacher. The clearest effect is at 2 bits per weight: fine-tuning with the
# rounding in the loop keeps the task on every seed, far above rounding the trained teacher afterwards.
#
# **At our scale** four of the papers' results do not show. A student copied from the teacher's layers does as
# well fine-tuned alone as distilled, and with 64 labels the teacher's soft targets teach it no more than hard
# labels. Rounding to 2 bits without retraining does not lose the task outright: on one seed it loses less than
# the rule's 10 points. Pruning 40% of the weights, or of the heads, loses two points or more on one seed of
# three, where the papers lose nothing noticeable. Sections 3, 4 and 6 measure them.
#
# **What you will build.** A trained BERT is big and slow for what it does. This chapter makes one smaller in
# the three ways the Primer in BERTology (Rogers et al., 2020) sorts its Table 1 by, and ends with the Primer's
# compression table at small scale.
#
# *Distillation* (Hinton et al., 2015; Sanh et al., 2019) trains a student with half the layers, started from
# every other layer of the teacher, on the teacher's softened predictions. *Quantization* (Zafrir et al., 2019)
# stores weights and activations as 8-bit (or fewer) integers, with real integer matrix products. *Pruning* (Han
# et al., 2015; Michel et al., 2019) removes weights, heads, neurons and layers. From the table's "other" rows
# comes ALBERT's *sharing* (Lan et al., 2020): one layer applied at every depth, the embeddings factorised.
#
# Every method is written from its equation in `lecture_lib.compression`. Our `DistilBertModel`,
# `DistilBertForMaskedLM` and `DistilBertForSequenceClassification` are tested equal to `transformers`' in
# float64 (`tests/models/test_distilbert.py`).
#
# [Open this notebook in Colab](https://colab.research.google.com/github/transformers-bert-course/course/blob/main/notebooks/12_compression.ipynb)

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
import copy

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
import transformers

from lecture_lib import profile
from lecture_lib.analysis.head_importance import head_importance
from lecture_lib.chapters.ch12_compression import (
    FEW_BITS,
    FEW_EXAMPLES,
    NO_LOSS_POINTS,
    PRUNED_SHARE,
    StudentRecipe,
    chapter_config,
    chapter_task,
    course_teacher,
    distil_in_parallel,
    distilled_student,
    fine_tuned_teacher,
    headline_score,
    labels_in_parallel,
    latencies,
    masked_word_accuracy,
    qat_model,
    scratch_student,
    seeded,
    soft_or_hard_labels,
    student_on_task,
    students_on_task_in_parallel,
)
from lecture_lib.compression.distillation import TripleLoss, distillation_loss, soft_targets
from lecture_lib.compression.pruning import (
    csr_bytes,
    heads_to_prune,
    keep_layers,
    magnitude_prune_,
    make_permanent_,
    prune_ffn_neurons_,
    sparsity_of,
)
from lecture_lib.compression.quantization import (
    Int8Linear,
    int8_matmul,
    model_bytes,
    quantize,
    quantize_weights_,
    replace_linears,
    round_trip,
    torch_dynamic_int8,
)
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.metrics import seed_summary
from lecture_lib.models.albert import albert_from_bert
from lecture_lib.models.distilbert import distilbert_from_bert, student_layers
from lecture_lib.plots.compression_diagrams import distillation_diagram, pruning_masks_diagram, quantization_diagram
from lecture_lib.reproductions import show_reproduction
from lecture_lib.runtime import limit_cpu_threads, parallel_map

print("profile:", profile.current(), " CPU threads:", limit_cpu_threads())  # tiny models: one CPU thread
config = chapter_config()


def parameters(model):
    return sum(p.numel() for p in model.parameters())


def listed(values):
    return ", ".join(f"{v:.1f}" for v in values)


# %% [markdown]
# ## 1. The teacher and its task
#
# The teacher is chapter 05's BERT of the synthetic language (in the quick profile 4 layers of width 64). It is
# fine-tuned on one of chapter 05's tasks, **acceptability**: is the sentence grammatical? This CoLA-like task is
# scored by accuracy on sentences about people the fine-tuning never saw. We pick it because it is not solved:
# every model of this chapter answers the entailment task perfectly, so that task could not tell a good student
# from a bad one. Every score below is a percentage of this teacher's, as the Primer's "performance" column is.
#
# If chapter 05's BERT is not in the cache yet it is pretrained first: about 75 s of one CPU core.

# %%
profile.expect(150, "Pretraining chapter 05's BERT, only if it is not in the cache yet")
pretrained = course_teacher()
tokenizer = pretrained.tokenizer
task = chapter_task(tokenizer, config)
teacher = fine_tuned_teacher(pretrained, task, config)
labels = task.test.features["labels"]
majority = 100 * max(float((labels == k).float().mean()) for k in labels.unique())
teacher_score = headline_score(teacher, task)
print(f"teacher: {parameters(teacher):,} parameters, {model_bytes(teacher):,} bytes in float32")
print(f"acceptability accuracy: teacher {teacher_score:.1f}%, always the majority class {majority:.1f}%")
assert teacher_score > majority + 10  # the teacher learned the task: there is something to keep

# %% [markdown]
# ## 2. Distillation from first principles
#
# A trained classifier's softmax puts most of its mass on its top classes; what it believes about the *others*
# (this sentence is a little like a grammatical one) sits in small probabilities. Hinton et al. (2015) raise them
# with a temperature T,
#
# $$p_i(T) = \frac{\exp(z_i / T)}{\sum_j \exp(z_j / T)},$$
#
# and train the student's softened distribution q(T) towards the teacher's p(T): the loss is
# $T^2 \cdot \mathrm{KL}(p(T)\,\|\,q(T))$. Below is the teacher's MLM prediction at T = 1, 2, 4 for the masked
# word it is surest of among 64 sentences (the code picks it). The higher T, the more of the ranking below the top
# word the student gets to see. The code also prints the top word's probability at each T.

# %%
masked_position = 3


def masked_word_logits(text):
    """The teacher's MLM logits for the word at `masked_position` of `text`, that word masked."""
    ids = torch.tensor([tokenizer.frame(tokenizer.encode(text))[0]])
    ids[0, masked_position] = tokenizer.mask_token_id
    with torch.no_grad():
        return pretrained.model.eval()(ids).prediction_logits[0, masked_position]


texts = [sentence.text for sentence in SyntheticLanguage(0).sentences(64, seed=7)]
candidates = [masked_word_logits(text) for text in texts]
chosen = max(range(len(texts)), key=lambda i: float(soft_targets(candidates[i], 1).max()))
text, word_logits = texts[chosen], candidates[chosen]
top = word_logits.argsort(descending=True)[:6]
words = tokenizer.convert_ids_to_tokens(top.tolist())
fig, ax = plt.subplots(figsize=(8, 2.8))
for shift, t in zip((-0.25, 0, 0.25), (1, 2, 4)):
    ax.bar(torch.arange(6) + shift, soft_targets(word_logits, t)[top], width=0.25, label=f"T = {t}")
ax.set_xticks(range(6), words)
ax.set_ylabel("probability")
ax.set_title(
    f"the teacher's soft targets for the third word of: {text}\n(its surest prediction among {len(texts)} sentences)",
    fontsize=9,
)
ax.legend()
plt.show()
entropy = {t: float(-(soft_targets(word_logits, t) * F.log_softmax(word_logits / t, -1)).sum()) for t in (1, 2, 4)}
print("entropy of the soft targets (nats):", {t: round(h, 2) for t, h in entropy.items()})
top_probability = float(soft_targets(word_logits, 1).max())
print(
    "the top word's probability at T = 1, 2, 4:",
    ", ".join(f"{float(soft_targets(word_logits, t).max()):.3f}" for t in (1, 2, 4)),
)
assert entropy[1] < entropy[2] < entropy[4]  # a higher temperature always flattens

# %% [markdown]
# **Why T².** The gradient of the soft loss with respect to a student logit is $(q_i - p_i)/T$. For T large against
# the logits, $q_i - p_i \approx (s_i - z_i)/(N T)$ (zero-mean logits over N classes), so the gradient shrinks as
# $1/T^2$. Multiplying the loss by T² makes the soft term's gradients the same size whatever T, so that a
# temperature can be changed without retuning the weight of the soft term. Numerically, on small random logits:

# %%
g = torch.Generator().manual_seed(0)
student_logits = (0.1 * torch.randn(256, 10, generator=g)).requires_grad_()
teacher_logits = 0.1 * torch.randn(256, 10, generator=g)
print(" T   |grad| with T²   |grad| without")
norms = {}
for t in (1, 2, 4, 8):
    scaled = distillation_loss(student_logits, teacher_logits, t)
    (gradient,) = torch.autograd.grad(scaled, student_logits)
    kl = F.kl_div(F.log_softmax(student_logits / t, -1), F.softmax(teacher_logits / t, -1), reduction="batchmean")
    (bare,) = torch.autograd.grad(kl, student_logits)
    assert torch.allclose(gradient, t**2 * bare)  # the library's loss is T² times the plain KL
    norms[t] = (float(gradient.norm()), float(bare.norm()))
    print(f"{t:2d}   {norms[t][0]:.2e}        {norms[t][1]:.2e}")
assert abs(norms[8][0] / norms[4][0] - 1) < 0.05  # scaled: barely changes from T = 4 to T = 8
assert norms[8][1] < norms[4][1] / 3.5  # unscaled: falls about fourfold

# %% [markdown]
# ## 3. A DistilBERT-style student
#
# DistilBERT (Sanh et al., 2019) is BERT with half the layers, **no segment embeddings and no pooler**. It starts
# from the teacher's weights "taking one layer out of two" (for BERT-base, layers 0, 2, 4, 7, 9 and 11). It is
# trained on the pretraining text with three losses: the soft targets at T = 2, the masked-LM loss on the true
# tokens, and a cosine loss pulling its last hidden states towards the teacher's,
#
# $$L = 5\,L_{ce} + 2\,L_{mlm} + 1\,L_{cos}.$$
#
# %%
distillation_diagram()
plt.show()

# %% [markdown]
# The copy first, and its trap: the teacher adds the segment-0 vector to every token before its embedding
# LayerNorm, and the student has no segment table. We fold that vector into the student's position table, so that a
# student given *all* the teacher's layers computes exactly the teacher's function.

# %%
layers = student_layers(pretrained.model.config.num_hidden_layers, pretrained.model.config.num_hidden_layers // 2)
print("BERT-base -> DistilBERT:", student_layers(12, 6), "| our teacher -> student:", layers)
student0 = distilbert_from_bert(pretrained.model)
for s, t in enumerate(layers):
    mine, theirs = (
        student0.distilbert.encoder.layer[s].state_dict(),
        pretrained.model.bert.encoder.layer[t].state_dict(),
    )
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)  # the copy is exact
whole = distilbert_from_bert(pretrained.model, layers=range(pretrained.model.config.num_hidden_layers)).eval()
batch = task.test.batch(torch.arange(8))
with torch.no_grad():
    reference = pretrained.model(batch["input_ids"], batch["attention_mask"]).prediction_logits
    copy_logits = whole(batch["input_ids"], batch["attention_mask"]).logits
print("all layers copied, segment folded in: max |logit difference| =", float((copy_logits - reference).abs().max()))
assert torch.allclose(copy_logits, reference, atol=1e-4)
with torch.device("meta"):
    hf_count = parameters(transformers.DistilBertModel(transformers.DistilBertConfig(**student0.config.to_dict())))
assert parameters(student0.distilbert) == hf_count
print(
    f"student encoder: {parameters(student0.distilbert):,} parameters "
    f"(transformers' DistilBertModel at this size: {hf_count:,}); teacher encoder {parameters(pretrained.model.bert):,}"
)

# %% [markdown]
# Now the distillation runs, with DistilBERT's Table 4 ablations. Each is labelled as the paper labels it: the
# three loss terms in the order $L_{ce}$, $L_{cos}$, $L_{mlm}$, with ∅ where a term is dropped, and the triple
# loss from a random initialisation. Each student is then fine-tuned on the task with the teacher's budget.
#
# Two more students run beside them. The baseline that matters most is the student **copied from the teacher
# and fine-tuned without any distillation**. The floor is the same student drawn at random and fine-tuned with
# **no pretraining** at all. Every row runs on three seeds. About a minute of CPU the first time, one run per
# core at a time (cached afterwards).
#
# <details><summary>What the seeds vary, and a narrower student</summary>
#
# A seed sets the distillation's batches and masking, and the fine-tuning's order. A `width = 0.5` student (half
# of every width, randomly initialised, TinyBERT-like; one seed) joins the compression table at the end. It
# cannot use L_cos, because the widths differ.
#
# </details>

# %%
profile.expect(80, "Distilling sixteen students (the first time; then they load from the cache)")
table4 = {  # the paper's label -> our recipe
    "triple loss": StudentRecipe(),
    "∅ − L_cos − L_mlm (without L_ce)": StudentRecipe(TripleLoss(alpha_ce=0)),
    "L_ce − ∅ − L_mlm (without L_cos)": StudentRecipe(TripleLoss(alpha_cos=0)),
    "L_ce − L_cos − ∅ (without L_mlm)": StudentRecipe(TripleLoss(alpha_mlm=0)),
    "triple loss + random weights initialization": StudentRecipe(from_teacher=False),
}
seeds = list(config.seeds)
half_width = StudentRecipe(TripleLoss(alpha_cos=0), from_teacher=False, width=0.5)
table4_runs = [(recipe, seeded(config, seed)) for seed in seeds for recipe in table4.values()]
distil_in_parallel(pretrained, table4_runs + [(half_width, config)])
distilled = {
    (name, seed): distilled_student(pretrained, recipe, seeded(config, seed))
    for seed in seeds
    for name, recipe in table4.items()
}
before_task = {  # (row, seed) -> the student the row fine-tunes on the task
    **distilled,
    **{("copied, not distilled", seed): student0 for seed in seeds},
    **{("no pretraining", seed): scratch_student(pretrained, seeded(config, seed)) for seed in seeds},
}
students_on_task_in_parallel(  # one per CPU core; student_on_task then reads each from the cache
    [(student, task, seeded(config, seed)) for (_, seed), student in before_task.items()]
    + [(distilled_student(pretrained, half_width, config), task, config)]
)
on_task = {
    (row, seed): student_on_task(model, task, seeded(config, seed)) for (row, seed), model in before_task.items()
}
seed_scores = {
    name: [headline_score(on_task[name, seed], task) for seed in seeds]
    for name in [*table4, "copied, not distilled", "no pretraining"]
}
students = {
    "triple loss": on_task["triple loss", seeds[0]],
    "half width, L_ce + L_mlm": student_on_task(distilled_student(pretrained, half_width, config), task, config),
}
student_scores = {name: headline_score(model, task) for name, model in students.items()}
print(f"{'':46s} " + "  ".join(f"seed {s}" for s in seeds) + "   over the seeds")
for name, values in seed_scores.items():
    print(f"{name:46s} " + "  ".join(f"{v:6.1f}" for v in values) + f"   {seed_summary(values, '.1f')}")
print(f"teacher {teacher_score:.1f}%, majority class {majority:.1f}%")
assert all(min(v) > majority for v in seed_scores.values())  # every student learned something of the task

# %%
paper_delta = {
    "∅ − L_cos − L_mlm (without L_ce)": -2.96,
    "L_ce − ∅ − L_mlm (without L_cos)": -1.46,
    "L_ce − L_cos − ∅ (without L_mlm)": -0.31,
    "triple loss + random weights initialization": -3.69,
}
deltas = {name: [a - b for a, b in zip(seed_scores[name], seed_scores["triple loss"])] for name in paper_delta}
show_reproduction(
    "ch12-distilbert-table4",
    "DistilBERT (Sanh et al., 2019), Table 4: ablations, change against the triple loss with teacher initialisation",
    ["ablation (the paper's label)", "paper Δ GLUE macro-score", "ours Δ accuracy over the seeds", "per seed"],
    [
        [name, delta, seed_summary(deltas[name], "+.1f"), ", ".join(f"{d:+.1f}" for d in deltas[name])]
        for name, delta in paper_delta.items()
    ],
    note="The paper's Δ are of its GLUE macro-score; ours of one small task's accuracy. A row reproduces where "
    "its Δ is negative by more than its spread.",
)
# %% [markdown]
# What the seeds say at this scale. The random initialisation is the one ablation that costs more than the
# seeds' spread, as the paper's −3.69 is its largest row (the table gives the Δ per seed). The loss terms'
# differences are within what the seeds move. The paper's −2.96 for dropping L_ce and −1.46 for dropping L_cos
# are GLUE averages over eight tasks, and our single 400-sentence test set cannot resolve a point.
#
# The copied student is the harder baseline: fine-tuned without any distillation, it scores about what the
# distilled students score. Distillation does what it optimises, which we can measure: the share of masked
# words each model predicts right on held-out text of the synthetic language.

# %%
copied_mlm = masked_word_accuracy(student0, tokenizer, config)
distilled_mlm = [masked_word_accuracy(distilled["triple loss", seed], tokenizer, config) for seed in seeds]
teacher_mlm = masked_word_accuracy(pretrained.model, tokenizer, config)
print(
    f"masked-word accuracy: teacher {teacher_mlm:.1f}%, copied student {copied_mlm:.1f}%, distilled (triple "
    f"loss) " + ", ".join(f"{v:.1f}%" for v in distilled_mlm)
)
assert min(distilled_mlm) > copied_mlm + 5  # distillation restores what the dropped layers did for the MLM

# %% [markdown]
# The copy loses much of the teacher's masked-word accuracy when it drops half the layers, and the short
# distillation wins it all back: the student imitates the teacher's predictions. The task, though, is
# fine-tuned on a thousand labelled sentences. That fine-tuning gives the copied student what the task needs,
# whatever its masked-word accuracy. What acceptability asks of the encoder is within reach of two layers (the
# teacher is only a few points ahead of the copy). DistilBERT's gain over a copy comes on GLUE, whose tasks need
# what the full model learned in pretraining more than their fine-tuning data can teach. At this size the
# fine-tuning data suffices for acceptability, so "distillation beats the copy" does not reproduce there.
#
# **A task that needs pretraining.** Chapter 05's entity tagging is tested on sentences about people that no
# fine-tuning sentence names. To tag a surname it was never shown a label for, a model must already know, from
# pretraining, that the word is a name. The same three students (distilled, copied, unpretrained) are fine-tuned
# on it with the same budget and seeds. Nine short runs, about 25 s of CPU the first time, one per core at a time.

# %%
profile.expect(25, "Fine-tuning nine students on entity tagging (the first time; then they load from the cache)")
names_task = chapter_task(tokenizer, config, config.names_task)
names_students = {
    "triple loss": lambda seed: distilled["triple loss", seed],
    "copied, not distilled": lambda seed: student0,
    "no pretraining": lambda seed: scratch_student(pretrained, seeded(config, seed)),
}
students_on_task_in_parallel(
    [(student(seed), names_task, seeded(config, seed)) for student in names_students.values() for seed in seeds]
)
names_scores = {
    name: [
        headline_score(student_on_task(student(seed), names_task, seeded(config, seed)), names_task) for seed in seeds
    ]
    for name, student in names_students.items()
}
print(f"entity F1 (%) on unseen people {'':17s} " + "  ".join(f"seed {s}" for s in seeds))
for name, values in names_scores.items():
    print(f"{name:48s} " + "  ".join(f"{v:6.1f}" for v in values))
gaps = [d - c for d, c in zip(names_scores["triple loss"], names_scores["copied, not distilled"])]
print("distilled minus copied: " + ", ".join(f"{g:+.1f}" for g in gaps) + " points")

# %% [markdown]
# The task does need pretraining: the unpretrained student tags unseen people's names far worse than the others.
# But the copy needs no distillation to do it. What makes a word a name is held in the token embeddings and the
# first layers, and the copy keeps both. What the copy lost, and distillation restores, is the dropped layers'
# prediction of masked words, which tagging does not use. Both students sit near the ceiling, and the difference
# between them is a fraction of a point either way, so this task shows no gain from distillation either.

# %%
assert min(names_scores["copied, not distilled"]) > max(names_scores["no pretraining"]) + 5

# %% [markdown]
# ### Dark knowledge
#
# Hinton et al.'s argument for soft targets is strongest with little data: a soft target says, for each training
# input, how much it resembles each class, which a hard label cannot. We fine-tune the copied student on only
# 64 (then 256) labelled sentences, for 50 steps at the same learning rate. It learns once from their true
# labels and once from the fine-tuned teacher's soft targets at T = 2. Each seed draws its own sample and
# fine-tunes its own teacher (the three teachers return for the int8 rows). Twelve short runs, about 25 s of one
# CPU core the first time, spread over the cores (cached afterwards).

# %%
teachers = {seed: fine_tuned_teacher(pretrained, task, seeded(config, seed)) for seed in seeds}
runs = {
    (n, seed, soft): (student0, teachers[seed], task, n, soft, seeded(config, seed))
    for n in config.dark_knowledge_examples
    for seed in seeds
    for soft in (False, True)
}
labels_in_parallel(list(runs.values()))
dark = {}  # (examples, seed) -> (hard labels, soft targets) accuracy
print("examples  seed   hard labels   teacher's soft targets")
for n in config.dark_knowledge_examples:
    for seed in seeds:
        dark[n, seed] = [headline_score(soft_or_hard_labels(*runs[n, seed, soft]), task) for soft in (False, True)]
        print(f"{n:8d}  {seed:4d}   {dark[n, seed][0]:10.1f}%   {dark[n, seed][1]:10.1f}%")
hard_few, soft_few = ([dark[FEW_EXAMPLES, seed][i] for seed in seeds] for i in (0, 1))
assert min(min(pair) for pair in dark.values()) > majority  # every student learned something of the task

# %% [markdown]
# The rule, declared before the run, asks the soft targets to win at 64 sentences on every seed. Read the table
# seed by seed: here the hard labels come out ahead at 64 sentences, and the soft targets lead only at 256. A
# binary task whose teacher is itself only about 80% right has little dark knowledge to pass on. Hinton et al.'s
# (2015) striking case had thousands of classes: a speech model trained on 3% of the data keeps most of its
# accuracy with soft targets, and overfits with hard ones.
#
# ### ALBERT-style sharing
#
# ALBERT (Lan et al., 2020; chapter 07) saves parameters in the two places where BERT spends them. One layer is
# held once and applied at every depth, and the V × H token table becomes a V × E table times an E × H projection.
# Chapter 07 pretrains its ALBERTs from scratch; here we cut one out of the teacher, as DistilBERT is cut out of
# BERT. The shared layer is a copy of the teacher's last layer. The token table W becomes its best rank-E
# approximation, from the truncated singular value decomposition $W = U S V^\top$:
#
# $$W \approx A B, \quad A = U_E S_E \;(V \times E), \quad B = V_E^\top \;(E \times H), \qquad
# \lVert W - A B \rVert_F = \sqrt{\textstyle\sum_{i > E} \sigma_i^2},$$
#
# and by Eckart and Young (1936) no rank-E product is closer. Then the student is distilled with the triple loss
# (its width is the teacher's, so L_cos applies) and fine-tuned, as the DistilBERT-style students were. E is 16,
# chapter 07's choice.
#
# <details><summary>The rest of the initialisation</summary>
#
# The position and segment tables are projected on the same E directions ($P B^\top$). The projection back to H
# is $B^\top$, scaled by the teacher's embedding LayerNorm gain and by $\sqrt{H/E}$: a LayerNorm over E
# coordinates divides by a standard deviation that much larger. The MLM head's first matrix is projected the same
# way. Which teacher layer to share was a choice: the first and the last were both run on three seeds, and
# neither was ahead on all of them, so the student keeps the last.
#
# </details>
#
# First the two facts the initialisation rests on, by hand:

# %%
embedding_size = 16
albert_recipe = StudentRecipe(embedding_size=embedding_size, shared_layer=pretrained.model.config.num_hidden_layers - 1)
albert0 = albert_from_bert(pretrained.model, embedding_size, albert_recipe.shared_layer)
W = pretrained.model.bert.embeddings.word_embeddings.weight.detach()  # (V, H)
U, S, Vh = torch.linalg.svd(W, full_matrices=False)
A, B = U[:, :embedding_size] * S[:embedding_size], Vh[:embedding_size]  # (V, E), (E, H)
assert torch.allclose(albert0.albert.embeddings.word_embeddings.weight, A, atol=1e-5)  # the library's table
error, eckart_young = float(torch.linalg.matrix_norm(W - A @ B)), float(S[embedding_size:].pow(2).sum().sqrt())
print(
    f"token table {tuple(W.shape)} -> {tuple(A.shape)} x {tuple(B.shape)}: error {error:.4f}, "
    f"Eckart-Young {eckart_young:.4f}; {float(S[:embedding_size].pow(2).sum() / S.pow(2).sum()):.0%} of the "
    f"squared norm kept"
)
assert abs(error - eckart_young) < 1e-3 * eckart_young  # the best rank-E table
shared = albert0.albert.encoder.layers()
assert all(layer is shared[0] for layer in shared)  # one module, applied at every depth
x = torch.randn(2, 7, W.shape[1], generator=g)
with torch.no_grad():  # the shared layer computes what the teacher's layer does
    assert torch.allclose(
        shared[0](x, None, False)[0],
        pretrained.model.bert.encoder.layer[albert_recipe.shared_layer](x, None, False)[0],
        atol=1e-6,
    )
print(
    f"ALBERT-style encoder: {parameters(albert0.albert):,} parameters "
    f"(the teacher's {parameters(pretrained.model.bert):,})"
)

# %% [markdown]
# Distilled (about 4 s on one CPU core the first time), then fine-tuned on the task with the teacher's budget
# (about 2 s), on every seed:

# %%
albert_runs = [config] + [seeded(config, seed) for seed in seeds]
distil_in_parallel(pretrained, [(albert_recipe, run) for run in albert_runs])
students_on_task_in_parallel([(distilled_student(pretrained, albert_recipe, run), task, run) for run in albert_runs])
albert_student = student_on_task(distilled_student(pretrained, albert_recipe, config), task, config)
albert_score = headline_score(albert_student, task)
albert_scores = [
    headline_score(
        student_on_task(distilled_student(pretrained, albert_recipe, seeded(config, seed)), task, seeded(config, seed)),
        task,
    )
    for seed in seeds
]
print(
    f"ALBERT-style student: {albert_score:.1f}% ({100 * albert_score / teacher_score:.1f}% of the teacher); "
    f"{parameters(albert_student):,} parameters against the teacher's {parameters(teacher):,}; per seed "
    + ", ".join(f"{v:.1f}%" for v in albert_scores)
)
same_work = latencies({"teacher": teacher, "ALBERT-style": albert_student}, task, 32, config.latency_repeats)
print(
    "one forward pass of 32 test sentences, one thread:",
    ", ".join(f"{name} {1e3 * seconds:.2f} ms" for name, seconds in same_work.items()),
)

# %% [markdown]
# A quarter of the teacher's parameters, no accuracy lost, and no computation saved. The four layers still run,
# each of the teacher's size, so a batch does the teacher's multiply-adds; its wall time may differ (timings are
# printed, never asserted). That is the Primer's point about ALBERT: sharing saves parameters, not computation.
# As for the accuracy, the student can even score *above* its teacher; the line above says where this run's
# landed.
#
# The student's start is only an approximation of the teacher, and distillation trains it towards the teacher's
# predictions; whether it needs them more than the copy of section 3 did is not tested here. ALBERT's own rows
# are not this: ALBERT-base, pretrained from scratch at BERT-base's width, keeps 97% of BERT-base's scores in
# the Primer's table, which the compression table at the end sets beside ours.
#
# <details><summary>Where the start differs, and open questions</summary>
#
# Two things change in the cut: the embedding LayerNorm now normalises 16 coordinates, and the MLM head's
# activation comes after the projection, not before. Fine-tuning the student straight from that start (not run
# here) is the comparison to make. Why it can beat the teacher we did not test. A guess is that one layer applied
# four times is a strong constraint on a task learned from 1,000 sentences.
#
# </details>

# %% [markdown]
# ## 4. Quantization from scratch
#
# Symmetric quantization stores a matrix as integers and a scale: with $q_{max} = 2^{b-1} - 1$,
# $s = \max|W| / q_{max}$, $q = \mathrm{round}(W / s)$ and $\hat W = s\,q$, so that $|W - \hat W| \le s/2$. One
# scale per *output channel* (row) fits each row's own range. Written by hand first, then checked against the
# library and the half-step bound:

# %%
quantization_diagram()
plt.show()

# %%
W = teacher.bert.encoder.layer[0].intermediate.dense.weight.detach()
scale = W.abs().max() / 127
by_hand = torch.clamp(torch.round(W / scale), -127, 127) * scale
assert torch.equal(by_hand, round_trip(W, 8))
for per_channel in (False, True):
    q = quantize(W, 8, per_channel)
    assert bool(((q.dequantize() - W).abs() <= q.scale / 2 + 1e-8).all())
errors = {
    bits: [float((round_trip(W, bits, pc) - W).pow(2).mean().sqrt()) for pc in (False, True)] for bits in config.bits
}
print("bits  RMS error per tensor  per channel")
for bits, (tensor_error, channel_error) in errors.items():
    print(f"{bits:4d}  {tensor_error:.2e}            {channel_error:.2e}")
    assert channel_error <= tensor_error * 1.0001

# %% [markdown]
# Quantizing the weights alone leaves float arithmetic. To compute in integers, the activations are quantized too,
# *dynamically* (one scale per token, taken from the values as they come), and the product of two int8 matrices is
# accumulated in int32: $y \approx (q_x q_w^\top) \odot (s_x s_w^\top) + b$. `torch._int_mm` does that product;
# it equals the int32 reference exactly. `Int8Linear` is that layer; replacing every linear layer of the teacher
# by it gives an integer model (embeddings, LayerNorm, softmax and GELU stay float, as in Q8BERT).

# %%
a = quantize(torch.randn(5, 64, generator=g), 8, per_channel=True).q
b = quantize(torch.randn(64, 16, generator=g), 8).q
assert torch.equal(int8_matmul(a, b), a.to(torch.int32) @ b.to(torch.int32))
int8_teacher = replace_linears(copy.deepcopy(teacher), Int8Linear).eval()
int8_score = headline_score(int8_teacher, task)
embeddings_bytes = sum(p.numel() * 4 for p in teacher.bert.embeddings.parameters())
print(
    f"int8 (dynamic, integer products): {int8_score:.1f}% (float teacher {teacher_score:.1f}%); "
    f"{model_bytes(int8_teacher):,} bytes against {model_bytes(teacher):,} "
    f"(embeddings kept in float32: {embeddings_bytes:,} bytes)"
)

# %% [markdown]
# **Per tensor, as Q8BERT does it.** Our layer above uses the finer scheme: a scale per output channel and per
# token. Q8BERT (Zafrir et al., 2019) uses the simplest one, *symmetric per-tensor*: one scale max|W|/127 for a
# whole weight matrix and one for the whole input of the layer, $x_q = \mathrm{clamp}(\mathrm{round}(x \cdot
# 127/\max|x|), -127, 127)$. Its "≈ lossless" claim rests on that scheme. We run both beside the float model
# and PyTorch's own dynamic int8 layers (`torch.ao.quantization.quantize_dynamic`, per-tensor weights), on three
# teachers fine-tuned with different seeds, and measure the accuracy and how far the logits move,
# $\lVert \hat y - y\rVert / \lVert y \rVert$ over the test set.


# %%
def test_logits(model):
    features = {k: v for k, v in task.test.batch(torch.arange(len(labels))).items() if k != "labels"}
    with torch.no_grad():
        return model(**features).logits


schemes = {
    "int8 per channel (ours)": lambda m: replace_linears(copy.deepcopy(m), Int8Linear).eval(),
    "int8 per tensor (Q8BERT)": lambda m: replace_linears(
        copy.deepcopy(m), lambda layer: Int8Linear(layer, per_channel=False)
    ).eval(),
    "int8 torch.ao dynamic": torch_dynamic_int8,
}
float_scores, two_bit_scores = [], []
int8_scores, logit_errors = {name: [] for name in schemes}, {name: [] for name in schemes}
for seed in seeds:
    model = teachers[seed]
    float_scores.append(headline_score(model, task))
    two_bit_scores.append(headline_score(quantize_weights_(copy.deepcopy(model), FEW_BITS), task))
    reference_logits = test_logits(model)
    for name, make in schemes.items():
        quantized = make(model)
        if quantized is None:  # a PyTorch without torch.ao.quantization
            continue
        int8_scores[name].append(headline_score(quantized, task))
        logit_errors[name].append(float((test_logits(quantized) - reference_logits).norm() / reference_logits.norm()))
print(f"{'':26s} " + "  ".join(f"seed {s}" for s in seeds) + "   relative logit error")
print(f"{'float32':26s} " + "  ".join(f"{v:6.1f}" for v in float_scores))
for name, values in int8_scores.items():
    print(
        f"{name:26s} "
        + "  ".join(f"{v:6.1f}" for v in values)
        + "   "
        + ", ".join(f"{e:.3f}" for e in logit_errors[name])
    )
per_tensor = int8_scores["int8 per tensor (Q8BERT)"]

# %% [markdown]
# Per tensor is as good as per channel on this model's accuracy. Both are within two points of the float teachers
# on every seed, as Q8BERT reports for BERT-base (at most 1.32% relative, on RTE). The logits tell the schemes
# apart: per-tensor rounding moves them more than per-channel. One scale must cover the largest weight of the
# whole matrix and the loudest token of the batch, so most values get fewer integer levels. PyTorch's dynamic
# layers, per tensor too, move them the most of the three. A classifier's decision survives that; for what it
# does not survive, Q8BERT adds quantization-aware training, the next section.

# %% [markdown]
# **How few bits?** Eight, three, one: every linear layer's weights rounded to b bits per output channel
# (1 bit: sign × mean |W|), the activations left in float, no retraining.

# %%
bit_scores = {}
for bits in config.bits:
    bit_scores[bits] = headline_score(quantize_weights_(copy.deepcopy(teacher), bits), task)
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(list(bit_scores), list(bit_scores.values()), "o-", label="weights quantized, no retraining")
ax.axhline(teacher_score, color="k", ls="--", label="float32 teacher")
ax.axhline(majority, color="gray", ls=":", label="majority class")
ax.set_xlabel("bits per weight")
ax.set_ylabel("accuracy (%)")
ax.invert_xaxis()
ax.legend()
plt.show()
print({bits: round(s, 1) for bits, s in bit_scores.items()})
assert abs(bit_scores[8] - teacher_score) <= 2.0

# %% [markdown]
# ## 5. Quantization-aware training
#
# Q8BERT (Zafrir et al., 2019) fine-tunes with the quantization in the loop. The forward pass uses $\hat W$ and
# $\hat x$ (*fake* quantization: the rounded values, still as floats). The backward pass treats the rounding as
# the identity, the straight-through estimator (gradient 1 inside the clipping range, 0 outside). The activations'
# range is a moving average of max |x| seen in training. We fine-tune the pretrained BERT that way at 8 bits (the
# full profile adds a run at 4), with the teacher's budget. We compare it with rounding the float teacher
# afterwards (post-training quantization). About 5 s on one CPU core.

# %%
qat_scores = {bits: headline_score(qat_model(pretrained, task, bits, config), task) for bits in config.qat_bits}
post_training = {8: int8_score, **{bits: bit_scores[bits] for bits in config.qat_bits if bits != 8}}
rows = [
    [
        f"acceptability{'' if bits == 8 else f', {bits} bits'} (ours)",
        "accuracy",
        round(teacher_score, 1),
        round(post_training[bits], 1),
        round(qat_scores[bits], 1),
        f"{100 * (teacher_score - qat_scores[bits]) / teacher_score:.2f}%",
    ]
    for bits in config.qat_bits
]
rows += [
    ["CoLA (Q8BERT)", "MCC", 58.48, "–", 58.48, "0.00%"],
    ["SST-2 (Q8BERT)", "accuracy", 92.36, "–", 92.24, "0.13%"],
    ["RTE (Q8BERT)", "accuracy", 69.7, "–", 68.78, "1.32%"],
]
show_reproduction(
    "ch12-q8bert",
    "Q8BERT (Zafrir et al., 2019): BERT-base against 8-bit quantization-aware training, relative reduction",
    ["task", "metric", "float", "post-training", "quantization-aware", "relative reduction"],
    rows,
    note="Q8BERT's point reproduces: at 8 bits, rounding the trained model loses nothing here. The quantization-"
    "aware runs are new fine-tunings (single seeds), so they differ from the float teacher by what any "
    "fine-tuning run does, a few points either way, and can land above it.",
)

# %% [markdown]
# **Where rounding afterwards fails.** At 2 bits, each weight is one of −1, 0, 1 times its row's scale, and
# rounding the trained teachers' weights to that grid lost much of what they learned (section 4). Q-BERT
# (Shen et al., 2020) keeps such low-bit models useful by fine-tuning with the rounding in the loop. Here the
# forward pass uses the 2-bit weights, and the straight-through gradient moves the float weights behind them,
# so training looks for weights whose *rounded* versions do the task. The inputs stay in float, as in the
# rounding the run is compared with. Each seed fine-tunes from the same pretrained BERT, with its teacher's
# seed and budget (a few seconds per seed on one core).

# %%
few_bit_models = parallel_map(  # one seed per CPU core, each on one thread as in the kernel
    qat_model, [(pretrained, task, FEW_BITS, seeded(config, seed), False) for seed in seeds], desc="2-bit fine-tuning"
)
few_bit_aware = [headline_score(model, task) for model in few_bit_models]
print(f"{'':34s} " + "  ".join(f"seed {s}" for s in seeds))
for name, values in (
    ("float teacher", float_scores),
    (f"teacher rounded to {FEW_BITS} bits", two_bit_scores),
    (f"fine-tuned at {FEW_BITS} bits", few_bit_aware),
):
    print(f"{name:34s} " + "  ".join(f"{v:6.1f}" for v in values))
print(f"{'majority class':34s} {majority:6.1f}")
for name, reference in (("rounded teacher", two_bit_scores), ("float teacher", float_scores)):
    gaps = ", ".join(f"{a - r:+.1f}" for a, r in zip(few_bit_aware, reference))
    print(f"fine-tuned at {FEW_BITS} bits minus the {name}: {gaps} points")

# %% [markdown]
# On every seed the model fine-tuned at 2 bits keeps the task that rounding afterwards lost, and it even lands
# above its float teacher on some seeds. Rounding a trained model hopes its weights survive the error; training
# on the grid chooses weights that the grid can hold. Above the float teacher is not the claim, and one task on a small
# model cannot say whether the coarse weights act as a regularizer. Q-BERT needs more than this (a scale per
# group of rows, more bits where the loss is sharper) to keep BERT-base's GLUE scores at 2 or 3 bits.

# %%
assert all(aware > rounded + NO_LOSS_POINTS for aware, rounded in zip(few_bit_aware, two_bit_scores))
# %% [markdown]
# ## 6. Pruning
#
# **Unstructured**: zero the fraction p of all linear weights with the smallest |w| (one global ranking), no
# retraining. The layer computes with $W \odot M$, so the zeros stay zeros if training goes on. The matrices keep
# their shape, so a dense kernel is no faster.

# %%
pruning_masks_diagram()
plt.show()


# %%
def magnitude_pruned(model, sparsity):
    """A copy of `model` with the share `sparsity` of its linear weights zeroed, smallest |w| first."""
    pruned = copy.deepcopy(model)
    assert abs(sparsity_of(magnitude_prune_(pruned, sparsity)) - sparsity) < 1e-3
    return pruned.eval()


sparsity_scores = {
    sparsity: headline_score(magnitude_pruned(teacher, sparsity), task) for sparsity in config.sparsities
}
print({s: round(v, 1) for s, v in sparsity_scores.items()})
magnitude_scores = [headline_score(magnitude_pruned(teachers[seed], PRUNED_SHARE), task) for seed in seeds]
print(
    f"{PRUNED_SHARE:.0%} of the weights pruned, the teachers of seeds {seeds}: {listed(magnitude_scores)}% "
    f"(float {listed(float_scores)}%)"
)

# %% [markdown]
# **Structured**: remove whole heads (the least important by Michel et al.'s gate gradient, chapter 10), whole
# feed-forward neurons (smallest ‖W₁[i]‖·‖W₂[:, i]‖), or whole layers. The matrices shrink, and so does the time.


# %%
def gated_loss(model, batch, head_mask):
    return model(**batch, head_mask=head_mask).loss


def without_heads(model, share):
    """A copy of `model` without its `share` least important heads (Michel et al.'s I_h), and the heads removed."""
    importance = head_importance(
        model, [task.train.batch(torch.arange(i, i + 64)) for i in range(0, 256, 64)], gated_loss
    )
    cut = heads_to_prune(importance, share)
    pruned = copy.deepcopy(model)
    pruned.prune_heads(cut)
    return pruned.eval(), cut


heads_pruned, head_cut = without_heads(teacher, PRUNED_SHARE)
neurons_pruned = copy.deepcopy(teacher)
prune_ffn_neurons_(neurons_pruned, 0.5)
half_layers = keep_layers(teacher, layers)  # the layers that section 3's student copies
magnitude_50 = copy.deepcopy(teacher)
make_permanent_(magnitude_prune_(magnitude_50, 0.5))
structured = {"40% of heads": heads_pruned, "50% of FFN neurons": neurons_pruned, "half the layers": half_layers}
print("heads removed per layer:", head_cut)
structured_scores = {name: headline_score(model.eval(), task) for name, model in structured.items()}
for name, model in structured.items():
    print(f"{name:20s} {structured_scores[name]:5.1f}%  parameters {parameters(model):,}")
print(
    f"the same layers {layers} copied from the pretrained model and fine-tuned (section 3): "
    + ", ".join(f"{v:.1f}%" for v in seed_scores["copied, not distilled"])
)
# cut without retraining, the layers lose most of the teacher's lead over the majority; fine-tuned, they keep it
cut = structured_scores["half the layers"]
assert cut - majority < (teacher_score - majority) / 2
assert min(seed_scores["copied, not distilled"]) > cut + 5
head_scores = [headline_score(without_heads(teachers[seed], PRUNED_SHARE)[0], task) for seed in seeds]
print(
    f"{PRUNED_SHARE:.0%} of the heads pruned, the teachers of seeds {seeds}: {listed(head_scores)}% "
    f"(float {listed(float_scores)}%)"
)

# %% [markdown]
# Removing half the layers, without retraining, takes the accuracy most of the way down to the majority class.
# Yet the copied student of section 3, made of the *same* layers of the pretrained model, scores close to the
# teacher once it is fine-tuned. The cut is not what fails; it is using the cut model without retraining. Each kept layer now reads
# the output of a layer two steps down, which it never saw in training. The classifier reads the output of a
# layer it was not trained on, and the errors compound through the depth. Fan et al.'s (2019) LayerDrop trains
# with random layers dropped so that such a cut works without retraining; Sanh et al. (2019) distil the cut
# model. Removing heads or neurons takes out a small part of each layer's sum, and the residual stream carries
# the rest, so those cuts degrade gently.
#
# Gordon et al. (2020) and Michel et al. (2019) call 40% of the weights, or of the heads, prunable "without
# loss". Our rules read that as less than 2 points lost on every teacher, one standard error of a score on 400
# test sentences; 40% of our 16 heads is rounded up to 7, as in chapter 10. In this run each cut misses that bar
# on one teacher, by losing exactly two points (both are printed above). A guess we did not test: a model of 16
# heads may hold fewer redundant ones than BERT-base with its 144.

# %% [markdown]
# Latency, on batches of 32 test examples, one CPU thread; the median of repeated runs. Only the structured cuts
# can be faster on dense kernels; the magnitude-pruned model multiplies its zeros.
#
# <details><summary>Reading the timings, and a benchmark at BERT-base's sizes</summary>
#
# Timings are printed, never asserted. They depend on the machine, and on a small model the Python around each
# layer weighs as much as the products.
#
# At BERT-base's sizes, where the products dominate, `python -m lecture_lib.bench compression` times one 768 ×
# 3072 feed-forward matrix the same ways. It runs float32, our int8 layer (integer products), half the weights
# zero, half the neurons removed, and PyTorch's own dynamic int8 layer for reference.
#
# </details>

# %% tags=["wall-clock"]
speed = latencies(
    {"teacher": teacher, "50% magnitude-pruned": magnitude_50, **structured}, task, 32, config.latency_repeats
)
speed = {name: speed["teacher"] / seconds for name, seconds in speed.items() if name != "teacher"}
for name, ratio in speed.items():
    print(f"{name:22s} speed-up ×{ratio:.2f}")
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot([100 * s for s in sparsity_scores], list(sparsity_scores.values()), "o-", label="magnitude pruning")
ax.axhline(teacher_score, color="k", ls="--", label="teacher")
ax.axhline(majority, color="gray", ls=":", label="majority class")
ax.set_xlabel("sparsity of the linear layers (%)")
ax.set_ylabel("accuracy (%)")
ax.legend()
plt.show()

# %% [markdown]
# ## 7. The compression table
#
# The Primer's columns:
#
# - **compression** = the teacher's stored bytes over the model's;
# - **performance** = accuracy as % of the teacher's;
# - **speed-up** = the teacher's latency over the model's, batch 1, one CPU thread, this machine.
#
# The ALBERT-style row is the one to read against its speed-up. It stores about a quarter of the teacher's bytes
# but still runs four layers of the teacher's width, so on a batch of 32 it does the teacher's work. At batch 1
# it can come out a little ahead, from less Python around the same products, not from fewer products. The
# Primer's (Rogers et al., 2020) ×5.6 for ALBERT-base is training throughput against BERT-large (chapter 07),
# not inference against BERT-base.
#
# <details><summary>How the bytes are counted</summary>
#
# The students and the structured cuts count their parameters; the quantized rows count int8 or 4-bit storage.
# Magnitude pruning stores the linear weights in compressed sparse rows: every kept weight with its column index,
# and an offset per row. So the indices take back part of what the zeros saved.
#
# </details>

# %% tags=["wall-clock"]
teacher_bytes = model_bytes(teacher)
pruned_linears = [m for m in magnitude_50.modules() if isinstance(m, torch.nn.Linear)]
sparse_bytes = (
    teacher_bytes
    - sum(4 * m.weight.numel() for m in pruned_linears)
    + sum(csr_bytes(m.weight.detach()) for m in pruned_linears)
)  # the linear weights stored as CSR
print(
    f"50% magnitude-pruned: {sparse_bytes:,} bytes with the linear weights in compressed sparse rows, "
    f"{teacher_bytes:,} dense: ×{teacher_bytes / sparse_bytes:.2f}"
)
table = [
    ("teacher (BERT, 4 layers)", teacher, teacher_bytes, teacher_score, "BERT4"),
    (
        "DistilBERT-style student",
        students["triple loss"],
        model_bytes(students["triple loss"]),
        student_scores["triple loss"],
        "BERT2",
    ),
    (
        "½-width distilled student",
        students["half width, L_ce + L_mlm"],
        model_bytes(students["half width, L_ce + L_mlm"]),
        student_scores["half width, L_ce + L_mlm"],
        "BERT2†",
    ),
    (
        f"ALBERT-style sharing, E = {embedding_size}",
        albert_student,
        model_bytes(albert_student),
        albert_score,
        "BERT4**",
    ),
    ("int8, post-training", int8_teacher, model_bytes(int8_teacher), int8_score, "BERT4"),
    ("int8, quantization-aware", None, model_bytes(int8_teacher), qat_scores[8], "BERT4"),
    ("4-bit weights", None, model_bytes(teacher, weight_bits=4), bit_scores[4], "BERT4"),
    ("40% of heads pruned", heads_pruned, model_bytes(heads_pruned), headline_score(heads_pruned, task), "BERT4"),
    ("50% magnitude-pruned", None, sparse_bytes, sparsity_scores[0.5], "BERT4"),
]
timed = latencies({name: model for name, model, *_ in table if model is not None}, task, 1, config.latency_repeats)
rows = []
for name, model, size, value, shape in table:
    speedup = f"×{timed[table[0][0]] / timed[name]:.1f}" if model is not None else "–"
    rows.append(
        [name, f"×{teacher_bytes / size:.1f}", f"{100 * value / teacher_score:.0f}%", speedup, shape, "acceptability"]
    )
show_reproduction(
    "ch12-primer-table1",
    "Primer in BERTology (Rogers et al., 2020), Table 1, in its columns: our compressions of a 4-layer BERT",
    ["model", "compression", "performance", "speed-up", "model", "evaluation"],
    rows,
    note="† the hidden size is halved; ** the embedding dimension is reduced, and one layer serves all four. "
    "Compression counts stored bytes against the float32 teacher (embeddings in float32 throughout). Speed-ups "
    "are one machine's, at batch 1 on one thread, where a small model's time is mostly Python overhead: halving "
    "the layers shows, integer kernels called from Python do not, and sharing a layer saves no computation.",
)
show_reproduction(
    "ch12-primer-table1-paper",
    "Primer in BERTology (Rogers et al., 2020), Table 1 (excerpt): against BERT-base",
    ["model", "compression", "performance", "speed-up", "model", "evaluation"],
    [
        ["DistilBERT", "×2.5", "90%", "×1.6", "BERT6", "All GLUE tasks"],
        ["TinyBERT", "×7.5", "96%", "×9.4", "BERT4*†", "All GLUE tasks"],
        ["BERT6-PKD", "×1.6", "97%", "×1.9", "BERT6", "No WNLI, CoLA and STS-B"],
        ["Q-BERT", "×13", "99%", "–", "BERT12", "MNLI, SST-2"],
        ["Q8BERT", "×4", "99%", "–", "BERT12", "All GLUE tasks"],
        ["ALBERT-base", "×9", "97%", "×5.6", "BERT12**", "MNLI, SST-2"],
    ],
    note="DistilBERT's own paper says 110M → 66M parameters (×1.66), 97% of BERT-base's GLUE score and 60% faster "
    "(Table 3: 668 s against 410 s on CPU); the Primer prints ×2.5, 90%, ×1.6: both are as printed, under "
    "different definitions. ALBERT's ×5.6 is training throughput against BERT-large, not inference speed.",
)
# %% [markdown]
# ## What we saw
#
# The cell below passes this run's numbers to the rules declared before the run in `CLAIMS` and `CHECKS` of
# `lecture_lib.chapters.ch12_compression`, which compute each verdict (scores are accuracy on the task's test set,
# in %).

# %%
from lecture_lib.chapters.ch12_compression import CHECKS, CLAIMS, DISTILLED  # noqa: E402
from lecture_lib.reproductions import checked, measured, show_what_we_saw, shown  # noqa: E402

floor = {"no pretraining": seed_scores["no pretraining"], "chance": [majority] * len(seeds)}
per_channel = int8_scores["int8 per channel (ours)"]
teacher_learned = {"the float teacher": (float_scores, floor["chance"])}


def points_lost(ours, scores):
    """A rule's measurement: the points each float teacher loses to its compressed copy's score in `scores`."""
    lost = [f - q for f, q in zip(float_scores, scores)]
    return measured(ours, lost, seeds=seeds, seed_kind="fine-tuning", gates=teacher_learned)


show_what_we_saw(
    "ch12-what-we-saw",
    "What we saw: chapter 12",
    CLAIMS,
    {
        "12-temperature-softens": shown(
            "entropy of the teacher's prediction at T = 1, 2, 4: "
            + ", ".join(f"{h:.2f}" for h in entropy.values())
            + f" nats; top probability {top_probability:.3f} at T = 1 (section 2)"
        ),
        "12-student-keeps-most": measured(
            f"triple loss {listed(seed_scores['triple loss'])}% against teachers of the same seeds "
            f"{listed(float_scores)}%; no pretraining {listed(floor['no pretraining'])}% (sections 3 and 4)",
            seed_scores["triple loss"],
            float_scores,
            seeds=seeds,
            seed_kind="pretraining",
            gates={DISTILLED: (seed_scores["triple loss"], floor["no pretraining"])},
        ),
        "12-teacher-init-helps": measured(
            f"triple loss {listed(seed_scores['triple loss'])}%, from a random initialisation "
            f"{listed(seed_scores['triple loss + random weights initialization'])}% (section 3)",
            seed_scores["triple loss"],
            seed_scores["triple loss + random weights initialization"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={DISTILLED: (seed_scores["triple loss"], floor["no pretraining"])},
        ),
        "12-distillation-beats-copy": measured(
            f"triple loss {listed(seed_scores['triple loss'])}%, copied and fine-tuned "
            f"{listed(seed_scores['copied, not distilled'])}%; masked words: distilled {listed(distilled_mlm)}%, "
            f"copied {copied_mlm:.1f}% (section 3)",
            seed_scores["triple loss"],
            seed_scores["copied, not distilled"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={
                DISTILLED: (seed_scores["triple loss"], floor["no pretraining"]),
                "the copied student": (seed_scores["copied, not distilled"], floor["no pretraining"]),
            },
        ),
        "12-distillation-beats-copy-on-held-out-names": measured(
            f"entity F1 on unseen people: triple loss {listed(names_scores['triple loss'])}%, copied and fine-tuned "
            f"{listed(names_scores['copied, not distilled'])}%, no pretraining "
            f"{listed(names_scores['no pretraining'])}% (section 3)",
            names_scores["triple loss"],
            names_scores["copied, not distilled"],
            seeds=seeds,
            seed_kind="pretraining",
            gates={
                DISTILLED: (names_scores["triple loss"], names_scores["no pretraining"]),
                "the copied student": (names_scores["copied, not distilled"], names_scores["no pretraining"]),
            },
        ),
        "12-soft-targets-help-with-little-data": measured(
            f"{FEW_EXAMPLES} labelled sentences: soft targets {listed(soft_few)}%, hard labels {listed(hard_few)}% "
            "(section 3)",
            soft_few,
            hard_few,
            seeds=seeds,
            seed_kind="fine-tuning",
            gates={
                "the student on soft targets": (soft_few, floor["chance"]),
                "the student on hard labels": (hard_few, floor["chance"]),
            },
        ),
        "12-sharing-keeps-score": measured(
            f"{listed(albert_scores)}% against teachers of the same seeds {listed(float_scores)}%, "
            f"×{teacher_bytes / model_bytes(albert_student):.1f} smaller (sections 3, 4 and 7)",
            [t - a for t, a in zip(float_scores, albert_scores)],
            seeds=seeds,
            seed_kind="pretraining",
            gates={"the ALBERT-style student": (albert_scores, floor["no pretraining"])},
        ),
        "12-int8-loses-little": points_lost(
            f"int8 per channel {listed(per_channel)}% against float {listed(float_scores)}% (section 4)", per_channel
        ),
        "12-int8-per-tensor-close-to-float": measured(
            f"float {listed(float_scores)}%, per tensor {listed(per_tensor)}%, per channel {listed(per_channel)}%"
            + (
                f", torch.ao {listed(int8_scores['int8 torch.ao dynamic'])}%"
                if int8_scores["int8 torch.ao dynamic"]
                else ""
            )
            + " (section 4)",
            [abs(f - q) for f, q in zip(float_scores, per_tensor)],
            seeds=seeds,
            seed_kind="fine-tuning",
            gates=teacher_learned,
        ),
        "12-few-bits-lose": points_lost(
            f"weights rounded to {FEW_BITS} bits {listed(two_bit_scores)}% against float {listed(float_scores)}%; the teacher's "
            "sweep: "
            + ", ".join(f"{b} bit{'s' if b > 1 else ''} {v:.1f}%" for b, v in bit_scores.items())
            + f" (majority {majority:.1f}%, section 4)",
            two_bit_scores,
        ),
        "12-quantization-aware-beats-rounding-after": measured(
            f"fine-tuned at {FEW_BITS} bits {listed(few_bit_aware)}%, teachers rounded to {FEW_BITS} bits "
            f"{listed(two_bit_scores)}%, majority {majority:.1f}% (section 5)",
            few_bit_aware,
            two_bit_scores,
            seeds=seeds,
            seed_kind="fine-tuning",
            gates={**teacher_learned, "the quantization-aware model": (few_bit_aware, floor["chance"])},
        ),
        "12-magnitude-pruning-keeps-score": points_lost(
            f"{PRUNED_SHARE:.0%} of the weights pruned {listed(magnitude_scores)}% against float "
            f"{listed(float_scores)}% (section 6)",
            magnitude_scores,
        ),
        "12-heads-prunable": points_lost(
            f"{PRUNED_SHARE:.0%} of the heads pruned {listed(head_scores)}% against float {listed(float_scores)}% "
            "(section 6)",
            head_scores,
        ),
        "12-structured-pruning-is-faster": shown(
            "the speed-ups at batch 32 of "
            + ", ".join(speed)
            + ": printed in section 6, where they are one run's timings (a rerun prints others)"
        ),
    },
    CHECKS,
    {
        "12-t-squared-keeps-gradients": checked(
            f"gradient norm from T = 4 to 8: ×{norms[8][0] / norms[4][0]:.2f} with T², ×{norms[8][1] / norms[4][1]:.2f} "
            "without (section 2)",
            [norms[8][0] / norms[4][0], norms[8][1] / norms[4][1]],
            [1.0, 0.25],
        ),
    },
)

# %% [markdown]
# ## Exercises
#
# 1. Distil at T = 1 and at T = 8 instead of 2 (`StudentRecipe(TripleLoss(temperature=...))`). Does the student's
#    accuracy move more than the spread of three fine-tuning seeds? And what would T = 8 do without the factor T²?
#
# <details><summary>Hint</summary>
#
# Build the recipe, pass it to `distilled_student` and `student_on_task`; rerun `student_on_task` with
# `config.finetune_seed` set to 1 and 2 for the spread. For the factor, `soft_gradient_norm(student_logits,
# teacher_logits, t, scaled=False)` of `lecture_lib.compression.distillation` on the random logits of the T² check.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# The T² factor is what keeps T = 8 from training the soft term sixteen times more slowly than T = 2: without it
# the gradient shrinks as $1/T^2$, and on the T² check's logits the unscaled norm at T = 2 is 16.0 times that at
# T = 8, $(8/2)^2$, while the scaled norms agree within 1%. Whether the accuracy moves more than the seed spread
# is what your runs print: three students (a few seconds of distillation each, the first time), three seeds.
#
# </details>
#
# 2. Quantize per tensor instead of per channel in the bit sweep (`quantize_weights_(model, bits, per_channel=False)`).
#    At which bit width does the accuracy first fall below the majority class?
#
# <details><summary>Hint</summary>
#
# Per tensor, the step is set by the largest weight of the whole matrix; the rows with small weights round to zero
# first. `weight_rounding_error(model, bits, per_channel)` of `lecture_lib.compression.quantization` measures
# the relative rounding error of all the linear weights either way.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# Per tensor, every bit width rounds with a larger error: on a tiny random BERT (width 32, two layers) about 1.4
# times the per-channel error from 8 down to 3 bits, and more at 2 and 1 bit (section 4 prints the same comparison
# on one of the teacher's matrices). So expect the per-tensor accuracy to collapse at the same bit width as the
# per-channel one or a higher one; the sweep on the teacher (a few seconds) prints at which.
#
# </details>
#
# 3. Fine-tune the 50% magnitude-pruned teacher for 100 more steps with its masks in place (`magnitude_prune_`
#    without `make_permanent_`, then `finetune`). How much of the lost accuracy comes back, and are the zeros still zero?
#
# <details><summary>Hint</summary>
#
# The masks are parametrizations: `layer.weight` is always `original * mask`; check `sparsity_of(layers)` after training.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# The sparsity stays at 0.5 exactly, and the zeros are the same weights as before training (the smallest half of
# all |w|), while every other weight moves. How much accuracy comes back is what your run prints: compare it with
# the 50% point of the sparsity sweep and with the teacher's score.
#
# </details>
#
# 4. Give the ALBERT-style student other embedding sizes, E = 4 and E = 64 (`StudentRecipe(embedding_size=...,
#    shared_layer=3)`, then `distilled_student` and `student_on_task`). How much of the token table's squared norm
#    does each keep, and how do the accuracy and the compression move?
#
# <details><summary>Hint</summary>
#
# The share kept is the sum of the first E squared singular values over the sum of all of them
# (`torch.linalg.svdvals`; `kept_squared_norm(W, E)` of `lecture_lib.chapters.ch12_compression`); `model_bytes`
# gives the compression.
#
# </details>
#
# <details><summary>Expected outcome</summary>
#
# The share is the one the ALBERT-style check prints for E = 16, and it grows with E up to all of it at E = 64,
# the quick teacher's width H: the factorised table $U_E S_E$ holds exactly that share of $\lVert W \rVert^2$ (on
# a tiny random BERT of width 32, 0.22 at E = 4 and 0.67 at E = 16). The student grows with E ($V E + E H$ numbers
# for the table), so the compression falls below the compression table's E = 16 figure at E = 64 and rises at
# E = 4. The accuracies are what your two students print (about 6 s each, the first time); expect E = 4, which
# drops most of the table, to lose the most.
#
# </details>
#
# ## Further reading
#
# - Hinton, Vinyals and Dean (2015), *Distilling the Knowledge in a Neural Network*: soft targets, temperature,
#   and the T² argument of section 2.
# - Sanh, Debut, Chaumond and Wolf (2019), *DistilBERT, a distilled version of BERT*: the recipe of section 3 and
#   its ablations.
# - Zafrir, Boudoukh, Izsak and Wasserblat (2019), *Q8BERT: Quantized 8Bit BERT*: quantization-aware training
#   with the straight-through estimator.
# - Shen, Dong, Ye, Ma, Yao, Gholami, Mahoney and Keutzer (2020), *Q-BERT: Hessian Based Ultra Low Precision
#   Quantization of BERT*: 2- and 3-bit BERT by quantization-aware fine-tuning with group-wise, mixed precision.
# - Michel, Levy and Neubig (2019), *Are Sixteen Heads Really Better than One?*: head importance and pruning.
# - Gordon, Duh and Andrews (2020), *Compressing BERT: Studying the Effects of Weight Pruning on Transfer
#   Learning*: magnitude pruning of BERT, before and after fine-tuning.
# - Rogers, Kovaleva and Rumshisky (2020), *A Primer in BERTology*: the compression table this chapter rebuilds.
