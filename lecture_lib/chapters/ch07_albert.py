"""Chapter 07, ALBERT: the chapter's sizes, the exact parameter counts beside the paper's, and the small
pretraining runs behind Tables 3, 4 and 5 and Figure 1 (each trained once, then read from the disk cache).

Taught in: 07_albert ("Counting parameters exactly", "Factorized embeddings", "Cross-layer sharing",
"Sentence-order prediction").
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

import torch
from torch import nn

from lecture_lib.cache import Deferred, build_all, cached_call, compute_all
from lecture_lib.chapters.course_language import chapter_config as language_chapter_config
from lecture_lib.chapters.course_language import synthetic_pretraining_data
from lecture_lib.config import build_config, merge_dicts
from lecture_lib.data.diaries import WORDS_PER_ENTRY, Diary, date_gap_pairs, diaries, entry_pairs
from lecture_lib.finetuning.finetune import Task, finetune_budget, finetune_from
from lecture_lib.finetuning.tasks import ClassificationExample, EncodedTask, encode_classification
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.albert import (
    AlbertConfig,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertModel,
    share_across_layers,
)
from lecture_lib.models.bert import BertConfig, BertForPreTraining, training_flops_per_token
from lecture_lib.objectives.sentence_pairs import SentenceOrderPair, SentencePair, collate_pairs
from lecture_lib.pretraining import (
    PAIR_TASKS,
    PretrainConfig,
    PretrainingData,
    PretrainResult,
    cached_pretraining,
    evaluate,
    pretrain,
    pretraining_head,
)
from lecture_lib.pretraining import main as pretraining_main
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Gate, ParameterCount, Rule, Seeds
from lecture_lib.runtime import default_device, module_device, seed_everything, seed_of, to_device
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer
from lecture_lib.train import cpu_threads

# The chapter's ALBERT, the command line's recipe, on the Python documentation (``full``: a GPU). As in chapter 04,
# no dropout and N(0, 0.1) initialisation at quick's width. Unnamed fields keep the defaults of AlbertConfig
# (ALBERT-base's), DataConfig, ObjectiveConfig and PRETRAIN_DEFAULTS.
ALBERT_QUICK = dict(
    model=dict(
        model_type="albert",
        hidden_size=64,
        embedding_size=16,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=256,
        initializer_range=0.1,
        classifier_dropout_prob=0.0,
    ),
    data=dict(vocab_size=1000, seq_len=64),
    objective=dict(pairs=None),
    train=dict(steps=250, batch_size=16, lr=3e-3, warmup_steps=25, eval_every=0, num_threads=1),
)
ALBERT_FULL = dict(
    model=dict(
        model_type="albert",
        hidden_size=256,
        embedding_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=1024,
    ),
    data=dict(vocab_size=8000, seq_len=128),
    objective=dict(pairs=None),
    train=dict(steps=3000, batch_size=64, lr=5e-4, warmup_steps=300, eval_every=0),
)
# The notebook's runs change the chapter's ALBERT: ``sharing`` (Tables 3 and 4, Figure 1) reads chapter 05's
# synthetic language, whose regular grammar a few hundred steps learn (on the documentation text every model this
# small stays at the unigram guess), masked LM only, single segments; ``sharing_rows`` are the rows of Tables 3
# and 4 it trains, as (E, sharing), E = None meaning E = H ("not-shared" at E = H is BERT itself). ``pairs``
# (Table 5) reads diaries (lecture_lib.data.diaries): each pair is two entries of ten words, [CLS] A [SEP] B [SEP]
# in 23 positions, so no pair is truncated and no date cut off, over a vocabulary that holds every word whole.
QUICK = dict(
    sharing=merge_dicts(
        ALBERT_QUICK,
        dict(
            data=dict(vocab_size=600, seq_len=32, eval_pairs=256),
            train=dict(steps=400, batch_size=32, lr=2e-3, warmup_steps=40),
        ),
    ),
    sharing_rows=((16, "all-shared"), (16, "not-shared"), (None, "not-shared")),
    wide_hidden=128,
    wide_embedding=32,
    wide_judged=False,
    pairs=merge_dicts(
        ALBERT_QUICK,
        dict(
            model=dict(embedding_size=64),
            data=dict(vocab_size=423, seq_len=2 * WORDS_PER_ENTRY + 3, eval_pairs=600),
            train=dict(steps=1200, batch_size=32, lr=2e-3, warmup_steps=120),
        ),
    ),
)
FULL = dict(
    sharing=merge_dicts(
        ALBERT_FULL,
        dict(
            data=dict(vocab_size=1000, seq_len=64, eval_pairs=1024),
            train=dict(steps=3000, batch_size=64, lr=5e-4, warmup_steps=300),
        ),
    ),
    sharing_rows=(
        (32, "all-shared"),
        (32, "not-shared"),
        (64, "all-shared"),
        (64, "not-shared"),
        (None, "all-shared"),
        (None, "shared-attention"),
        (None, "shared-ffn"),
        (None, "not-shared"),
    ),
    wide_hidden=616,
    wide_embedding=64,
    pairs=merge_dicts(
        ALBERT_FULL,
        dict(
            data=dict(vocab_size=423, seq_len=2 * WORDS_PER_ENTRY + 3, eval_pairs=1024),
            train=dict(steps=3000, batch_size=64, lr=5e-4, warmup_steps=300),
        ),
    ),
)
SHARINGS = ("all-shared", "shared-attention", "shared-ffn", "not-shared")
PAIR_DIARIES = (3000, 600)  # training diaries, held-out diaries
GRID_TASKS = ("nsp", "sop")

# Table 1 of the paper, and the parameters it prints.
PAPER_PARAMETERS = {
    "BERT base": "108M",
    "BERT large": "334M",
    "ALBERT base": "12M",
    "ALBERT large": "18M",
    "ALBERT xlarge": "60M",
    "ALBERT xxlarge": "235M",
}


@dataclass
class Chapter07Config:
    """The notebook's runs: section 3's sharing runs (their recipe and the rows of Tables 3 and 4 they train),
    section 4's sentence-pair grid, and the seeds every claim's runs are repeated on (each a pretraining run:
    initialisation, masks, batch order, and for the sharing runs the synthetic documents).

    Taught in: 07_albert ("Cross-layer sharing", "Sentence-order prediction").
    """

    sharing: PretrainConfig
    pairs: PretrainConfig
    sharing_rows: tuple[tuple[int | None, str], ...] = ((None, "all-shared"), (None, "not-shared"))
    wide_hidden: int = 128  # the wide all-shared ALBERT's H (its FFN 4H), about BERT's parameters at ...
    wide_embedding: int = 32  # ... this E (:func:`wide_runs`)
    wide_judged: bool = True  # both views on every seed (else BERT's steps on the first seed: does it learn?)
    seeds: tuple[int, ...] = field(default_factory=claim_seeds)

    def __post_init__(self) -> None:
        self.sharing_rows = tuple((width, sharing) for width, sharing in self.sharing_rows)
        self.seeds = tuple(self.seeds)
        unknown = [sharing for _, sharing in self.sharing_rows if sharing not in SHARINGS]
        if unknown:
            raise ValueError(f"sharing_rows: expected sharing strategies in {SHARINGS}, got {unknown}")
        if (
            "all-shared" not in [sharing for _, sharing in self.sharing_rows]
            or (None, "not-shared") not in self.sharing_rows
        ):
            raise ValueError(
                "sharing_rows: expected an all-shared row and BERT's (None, 'not-shared') row, the two "
                f"curves of Figure 1, got {list(self.sharing_rows)}"
            )
        model = self.sharing.model
        if self.wide_hidden <= model.hidden_size or self.wide_hidden % model.num_attention_heads:
            raise ValueError(
                f"wide_hidden: expected a width above the sharing runs' {model.hidden_size} and divisible by their "
                f"{model.num_attention_heads} heads, got {self.wide_hidden}"
            )
        if not 1 <= self.wide_embedding <= self.wide_hidden:
            raise ValueError(f"wide_embedding: expected 1 <= E <= wide_hidden, got {self.wide_embedding}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ValueError(f"seeds: expected distinct non-negative seeds, at least one, got {list(self.seeds)}")


def chapter_config(**overrides) -> Chapter07Config:
    """The active profile's runs (:data:`QUICK` or :data:`FULL`) with ``overrides``, nested dicts merged field by
    field: ``chapter_config(pairs=dict(train=dict(steps=2400)), seeds=(0,))``.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    return build_config(Chapter07Config, pick(quick=QUICK, full=FULL), overrides)


def albert_config(**overrides) -> PretrainConfig:
    """The chapter's ALBERT recipe (:data:`ALBERT_QUICK` or :data:`ALBERT_FULL`) with ``overrides``:
    ``albert_config(model=dict(embedding_size=64), objective=dict(pairs="sop"))``; the command line's defaults.

    Taught in: 07_albert ("Factorized embeddings").
    """
    return build_config(PretrainConfig, pick(quick=ALBERT_QUICK, full=ALBERT_FULL), overrides)


MLM_ACCURACY = "held-out masked-LM accuracy"
SYNTHETIC = "held-out masked positions of chapter 05's synthetic language"
LEARNED_TEXT = "{} masked-LM accuracy"  # a gate: the model learned the language at all
WIDE_ALBERT = "the wide all-shared ALBERT"  # twice BERT's width, about its parameters (Chapter07Config.wide_hidden)
_WIDE_IN_FULL = (
    "the quick profile trains the wide ALBERT on its first seed only, at BERT's steps, to see whether it learns "
    "(section 3); a verdict needs every seed and both views, which the full profile runs"
)
DATE_GAP_PAIRS = "held-out pairs of one diary's entries, in order: is the second within two days of the first?"
SOP_PAIRS, NSP_PAIRS = "held-out SOP pairs of the diaries", "held-out NSP pairs of the diaries"
CLAIMS = (
    Rule(
        "07-sharing-costs-accuracy",
        "sharing every layer costs accuracy",
        paper="all-shared 79.0 against not-shared 81.3 (E = 64, average of GLUE, SQuAD and RACE)",
        source="Lan et al. (2020), Table 3",
        metric=MLM_ACCURACY,
        data=SYNTHETIC,
        compared="not-shared ALBERT, E = 16",
        baseline="all-shared ALBERT, E = 16",
        seeds=Seeds("pretraining"),
        gates=(
            Gate(LEARNED_TEXT.format("all-shared ALBERT"), "most-frequent-token guess", 0.01),
            Gate(LEARNED_TEXT.format("not-shared ALBERT"), "most-frequent-token guess", 0.01),
        ),
    ),
    Rule(
        "07-unshared-full-width-is-best",
        "unshared at full width (BERT) is best",
        paper="not-shared 81.3 (E = 64) against 82.3 (E = 768 = H)",
        source="Lan et al. (2020), Table 3",
        metric=MLM_ACCURACY,
        data=SYNTHETIC,
        compared="BERT (not shared, E = H)",
        baseline="not-shared ALBERT, E = 16",
        seeds=Seeds("pretraining"),
        gates=(
            Gate(LEARNED_TEXT.format("not-shared ALBERT"), "most-frequent-token guess", 0.01),
            Gate(LEARNED_TEXT.format("BERT"), "most-frequent-token guess", 0.01),
        ),
    ),
    Rule(
        "07-sharing-smooths-transitions",
        "sharing smooths layer-to-layer transitions",
        paper="ALBERT-large's L2 distance and angle fall smoothly with depth, BERT-large's oscillate",
        source="Lan et al. (2020), Figure 1",
        metric="angle between a token's vectors before and after the last layer (degrees)",
        data="held-out segments of the synthetic language",
        compared="all-shared ALBERT",
        baseline="BERT",
        higher=False,
        seeds=Seeds("pretraining"),
        gates=(
            Gate(LEARNED_TEXT.format("all-shared ALBERT"), "most-frequent-token guess", 0.01),
            Gate(LEARNED_TEXT.format("BERT"), "most-frequent-token guess", 0.01),
        ),
    ),
    # declared before their first run (issue 49, item 2): ALBERT's headline, a wider model sharing one layer
    Rule(
        "07-wide-shared-beats-bert-at-equal-parameters",
        "a wider ALBERT sharing one layer beats BERT with no more parameters",
        paper="ALBERT-xxlarge (235M) 88.7 against BERT-large (334M) 85.2 (average of SQuAD, MNLI, SST-2, RACE)",
        source="Lan et al. (2020), Table 2",
        metric=MLM_ACCURACY,
        data=SYNTHETIC,
        compared=WIDE_ALBERT,
        baseline="BERT",
        seeds=Seeds("pretraining"),
        quick=_WIDE_IN_FULL,
        gates=(
            Gate(LEARNED_TEXT.format(WIDE_ALBERT), "most-frequent-token guess", 0.01),
            Gate(LEARNED_TEXT.format("BERT"), "most-frequent-token guess", 0.01),
        ),
    ),
    Rule(
        "07-wide-shared-beats-bert-at-equal-compute",
        "the wider ALBERT still beats BERT when both train for the same compute",
        paper="ALBERT-xxlarge (125k steps, 32 h) 88.7 against BERT-large (400k steps, 34 h) 87.2",
        source="Lan et al. (2020), Table 6",
        metric=MLM_ACCURACY,
        data=SYNTHETIC,
        compared=WIDE_ALBERT + ", its steps cut to BERT's training FLOPs",
        baseline="BERT",
        seeds=Seeds("pretraining"),
        quick=_WIDE_IN_FULL,
        gates=(
            Gate(LEARNED_TEXT.format(WIDE_ALBERT + " at equal compute"), "most-frequent-token guess", 0.01),
            Gate(LEARNED_TEXT.format("BERT"), "most-frequent-token guess", 0.01),
        ),
    ),
    Rule(
        "07-sop-learnable",
        "SOP is learnable where NSP's topic cue is absent",
        paper="the SOP model 86.5% on SOP",
        source="Lan et al. (2020), Table 5",
        metric="accuracy",
        data=SOP_PAIRS,
        compared="the SOP model",
        baseline="the majority label",
        margin=0.05,
        seeds=Seeds("pretraining"),
    ),
    Rule(
        "07-nsp-model-fails-sop",
        "a model trained on NSP does not solve SOP",
        paper="the NSP model 90.5% on NSP, 52.0% on SOP",
        source="Lan et al. (2020), Table 5",
        metric="accuracy above the majority label",
        data=SOP_PAIRS,
        compared="the NSP model",
        baseline=0.1,
        higher=False,
        seeds=Seeds("pretraining"),
        gates=(Gate("the NSP model on NSP pairs", "chance", 0.1),),
    ),
    Rule(
        "07-sop-model-transfers-to-nsp",
        "a model trained on SOP also solves much of NSP",
        paper="the SOP model 78.9% on NSP",
        source="Lan et al. (2020), Table 5",
        metric="accuracy",
        data=NSP_PAIRS,
        compared="the SOP model",
        baseline="the majority label",
        margin=0.1,
        seeds=Seeds("pretraining"),
        gates=(Gate("the SOP model on SOP pairs", "chance", 0.1),),
    ),
    # declared before its first run (issue 49, item 2): Table 5's downstream columns, on a task of two sentences
    Rule(
        "07-sop-helps-a-multi-sentence-task",
        "SOP pretraining helps a task that reads two sentences together more than NSP pretraining",
        paper="RACE 64.0 (SOP) against 62.3 (NSP); SQuAD 2.0 F1 80.0 against 77.2",
        source="Lan et al. (2020), Table 5",
        metric="accuracy after fine-tuning on few labels",
        data=DATE_GAP_PAIRS,
        compared="the SOP model, fine-tuned",
        baseline="the NSP model, fine-tuned",
        margin=0.01,
        seeds=Seeds("pretraining"),
        gates=(
            Gate("the SOP model, fine-tuned", "chance", 0.05),
            Gate("the NSP model, fine-tuned", "chance", 0.05),
        ),
    ),
)
CHECKS = (
    ParameterCount("07-albert-base-parameters", "ALBERT-base", source="Lan et al. (2020), Table 1", paper="12M"),
    ParameterCount(
        "07-bert-base-parameters",
        "BERT-base (V = 30,000, without its pooler)",
        source="Lan et al. (2020), Table 1",
        paper="108M",
    ),
    ParameterCount("07-albert-xlarge-parameters", "ALBERT-xlarge", source="Lan et al. (2020), Table 1", paper="60M"),
    ParameterCount("07-albert-xxlarge-parameters", "ALBERT-xxlarge", source="Lan et al. (2020), Table 1", paper="235M"),
    Check(
        "07-table3-parameters",
        "Table 3's parameter column, ALBERT-base by E and sharing",
        source="Lan et al. (2020), Table 3",
        reference="every row: the paper's figure, our count rounded to "
        "millions with or without the pooler (the E = H not-shared row as BERT-base)",
    ),
    Check(
        "07-factorized-rank",
        "the factorized embedding table has rank at most E",
        source="Lan et al. (2020), section 3.1",
        reference="E for ALBERT's V×E·E×H product, H for BERT's V×H table",
    ),
)


# ---------------------------------------------------------------- counting parameters


def layer_parameters(hidden: int, intermediate: int) -> int:
    """One encoder layer: 4H² + 4H (q, k, v, o) + 2H (LayerNorm) + 2HI + I + H (FFN) + 2H (LayerNorm).

    >>> layer_parameters(768, 3072) == 12 * 768 ** 2 + 13 * 768
    True

    Taught in: 07_albert ("Counting parameters exactly").
    """
    return 4 * hidden * hidden + 2 * hidden * intermediate + 9 * hidden + intermediate


def encoder_parameters(config: BertConfig | AlbertConfig) -> int:
    """A ``BertModel`` or ``AlbertModel`` (with its pooler H² + H), from the sizes alone:

    BERT   = (V + P + T)·H + 2H                 + L·layer + H² + H
    ALBERT = (V + P + T)·E + 2E + (E·H + H)     + G·layer + H² + H   (G groups of distinct layers)

    Taught in: 07_albert ("Counting parameters exactly").
    """
    rows = config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    hidden, layer = config.hidden_size, layer_parameters(config.hidden_size, config.intermediate_size)
    pooler = hidden * hidden + hidden
    if isinstance(config, AlbertConfig):
        width = config.embedding_size
        distinct_layers = config.num_hidden_groups * config.inner_group_num
        return rows * width + 2 * width + width * hidden + hidden + distinct_layers * layer + pooler
    return rows * hidden + 2 * hidden + config.num_hidden_layers * layer + pooler


def paper_configs() -> dict[str, BertConfig | AlbertConfig]:
    """Table 1's six models, with ALBERT's 30,000-token vocabulary for all (as the paper's counts assume).

    Taught in: 07_albert ("Counting parameters exactly").
    """
    bert_large = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    return {
        "BERT base": BertConfig(vocab_size=30000),
        "BERT large": BertConfig(vocab_size=30000, **bert_large),
        **{f"ALBERT {name}": AlbertConfig.preset(name) for name in ("base", "large", "xlarge", "xxlarge")},
    }


def count_on_meta(build) -> int:
    """Distinct parameters of ``build()`` made on the meta device: shapes without memory, so xxlarge is instant.

    Taught in: 07_albert ("Counting parameters exactly").
    """
    with torch.device("meta"):
        model = build()
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- the runs


def bert_twin(config: PretrainConfig) -> PretrainConfig:
    """The same recipe with a BERT of the ALBERT's sizes (E = H, no sharing, no projection): the paper's
    not-shared, E = H row, which *is* BERT.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    albert = config.model
    shared = {f.name: getattr(albert, f.name) for f in fields(BertConfig) if hasattr(albert, f.name)}
    return replace(config, model=BertConfig(**shared))


class DiaryPairs:
    """Entry pairs of diaries (:func:`lecture_lib.data.diaries.entry_pairs`): :data:`PAIR_DIARIES` training
    diaries and held-out ones drawn with another seed, one WordPiece vocabulary learned from the training
    diaries, NSP and SOP pairs each cut once, on first use, for any recipe of the same data sizes."""

    def __init__(self, config: PretrainConfig) -> None:
        self.config = config
        self.sizes = PAIR_DIARIES
        self._data: dict[str, PretrainingData] = {}

    def cache_recipe(self) -> dict:
        """What the pairs are cut from, beyond the run's own recipe: the numbers of diaries, their seeds and the
        data sizes of the vocabulary and the pairs (part of every cache name of a run on these pairs)."""
        return {"diaries": self.sizes, "seeds": [self.config.seed, self.config.seed + 1], "data": self.config.data}

    @cached_property
    def train_documents(self) -> list[Diary]:
        return diaries(self.sizes[0], self.config.seed)

    @cached_property
    def test_documents(self) -> list[Diary]:
        return diaries(self.sizes[1], self.config.seed + 1)

    @cached_property
    def tokenizer(self) -> WordPieceTokenizer:
        entries = [entry for diary in self.train_documents for entry in diary.entries]
        return WordPieceTokenizer.train(entries, self.config.data.vocab_size)

    def __call__(self, config: PretrainConfig) -> PretrainingData:
        task = config.objective.pairs or "nsp"
        if task not in self._data:
            base = replace(self.config, objective=replace(self.config.objective, pairs=task))
            train, test = (
                self._rows(documents, task, seed, limit)
                for documents, seed, limit in (
                    (self.train_documents, base.seed, None),
                    (self.test_documents, base.seed + 1, base.data.eval_pairs),
                )
            )
            self._data[task] = PretrainingData.from_rows(base, self.tokenizer, train, test)
        return self._data[task].with_config(config)

    def _rows(self, documents: list[Diary], task: str, seed: int, limit: int | None) -> dict[str, torch.Tensor]:
        encode, tok = self.tokenizer.encode, self.tokenizer
        pair_type = SentencePair if task == "nsp" else SentenceOrderPair
        pairs = [pair_type(encode(a), encode(b), bool(label)) for a, b, label in entry_pairs(documents, task, seed)]
        return collate_pairs(
            pairs[:limit],
            length=self.config.data.seq_len,
            cls_token_id=tok.cls_token_id,
            sep_token_id=tok.sep_token_id,
            pad_token_id=tok.pad_token_id,
            label_name=PAIR_TASKS[task][1],
        )


def pretrained(
    config: PretrainConfig, data: Callable[[PretrainConfig], PretrainingData], *, progress: bool = True
) -> PretrainResult:
    """One run of the chapter on ``data(config)`` (a :class:`DiaryPairs` or :class:`SyntheticData`):
    trained once per recipe and text, then read from the disk cache. The model is on the default device
    either way (a fresh run leaves it there, a run read back is moved there), so a rerun scores where the
    first run did.

    Taught in: 07_albert ("Factorized embeddings").
    """
    result = cached_pretraining(config, Deferred(data, config), progress=progress)
    result.model.to(default_device())
    return result


class SyntheticData:
    """Segments of chapter 05's synthetic language (its documents and held-out documents, at chapter 05's
    profile sizes) with one tokenizer, built on first use, for any recipe of the same data sizes."""

    def __init__(self, config: PretrainConfig) -> None:
        self.config = config
        self._data: PretrainingData | None = None

    def __call__(self, config: PretrainConfig) -> PretrainingData:
        if self._data is None:
            self._data = synthetic_pretraining_data(self._language())
        return self._data.with_config(config)

    def _language(self):
        return replace(language_chapter_config(), pretrain=self.config)

    def cache_recipe(self) -> dict:
        """The synthetic language the segments are cut from (part of every cache name of a run on them)."""
        return {"language": self._language()}


def unigram_baseline(data: PretrainingData) -> float:
    """MLM accuracy of always guessing the training pairs' most frequent token, on the held-out positions."""
    special = set(data.tokenizer.special_token_ids)
    counts = Counter(t for t in data.train["input_ids"].flatten().tolist() if t not in special)
    guess = counts.most_common(1)[0][0]
    labels = torch.cat([batch["labels"].flatten() for batch in data.eval_batches()])
    labels = labels[labels != IGNORE_INDEX]
    return float((labels == guess).float().mean())


@torch.no_grad()
def layer_transitions(
    model: BertForPreTraining | AlbertForPreTraining, batches: list[dict[str, torch.Tensor]]
) -> dict[str, list[float]]:
    """Figure 1's two curves: per layer l, the token mean of ‖h_l − h_{l−1}‖₂ and of the angle
    arccos(cos(h_l, h_{l−1})) in degrees, over the real (unpadded) tokens of ``batches``.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    model.eval()
    sums = None
    tokens = 0
    for batch in batches:
        batch = to_device(batch, module_device(model))
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], output_hidden_states=True)
        real = batch["attention_mask"].bool()  # (B, T)
        per_layer = []
        for before, after in zip(out.hidden_states[:-1], out.hidden_states[1:]):
            x, y = before[real], after[real]  # (N, H)
            cos = torch.nn.functional.cosine_similarity(x, y, dim=-1).clamp(-1, 1)
            per_layer.append(((y - x).norm(dim=-1).sum(), torch.rad2deg(torch.arccos(cos)).sum()))
        tokens += int(real.sum())
        sums = per_layer if sums is None else [(a + c, b + d) for (a, b), (c, d) in zip(sums, per_layer)]
    return {"l2": [float(a) / tokens for a, _ in sums], "angle": [float(b) / tokens for _, b in sums]}


def sharing_calls(config: Chapter07Config) -> list[tuple]:
    """The calls of :func:`sharing_row` behind :func:`sharing_runs`: each row of ``config.sharing_rows`` per seed."""
    return [
        (replace(config.sharing, seed=seed), width, sharing)
        for seed in config.seeds
        for width, sharing in config.sharing_rows
    ]


def sharing_runs(config: Chapter07Config | None = None, *, workers: int | None = None) -> dict:
    """Tables 3 and 4 and Figure 1 in shape, MLM only on the synthetic language (``config.sharing``): each row of
    ``config.sharing_rows`` pretrained once per seed of ``config.seeds`` (:func:`sharing_row`, the missing runs
    ``workers`` at a time), the not-shared E = H row being BERT (:func:`bert_twin`).

    Returns ``{"seeds": [...], "runs": {label: {"E", "sharing", "parameters", "mlm_accuracy": [per seed]}},
    "baseline": [the unigram guess per seed], "figure1": {"BERT": [curves per seed], "ALBERT": [...]}}``, Figure 1's
    ALBERT being the first all-shared row.

    Taught in: 07_albert ("Factorized embeddings", "Cross-layer sharing").
    """
    config = config or chapter_config()
    rows = compute_all(sharing_row, sharing_calls(config), workers=workers, desc="sharing runs")
    first_all_shared = [sharing for _, sharing in config.sharing_rows].index("all-shared")
    runs, figure1 = {}, {"BERT": [], "ALBERT": []}
    for i, row in enumerate(rows):
        scores = runs.setdefault(row["label"], {name: row[name] for name in ("E", "sharing", "parameters")})
        scores.setdefault("mlm_accuracy", []).append(row["mlm_accuracy"])
        if row["label"].endswith("(BERT)"):
            figure1["BERT"].append(row["curves"])
        elif i % len(config.sharing_rows) == first_all_shared:
            figure1["ALBERT"].append(row["curves"])
    baseline = [row["unigram"] for row in rows[:: len(config.sharing_rows)]]
    return {"seeds": list(config.seeds), "runs": runs, "baseline": baseline, "figure1": figure1}


@cached_call
def sharing_row(config: PretrainConfig, width: int | None, sharing: str) -> dict:
    """One run of :func:`sharing_runs`, trained (or read from the cache) and scored: the ALBERT of ``config`` with
    embedding width ``width`` (None: E = H) and ``sharing``, or BERT for the not-shared E = H row. Returns its
    label, E, sharing, parameters, held-out MLM accuracy, Figure 1's curves (:func:`layer_transitions`) and the
    unigram guess's accuracy on the same positions (:func:`unigram_baseline`).

    Taught in: 07_albert ("Cross-layer sharing").
    """
    data, width = SyntheticData(config), width or config.model.hidden_size
    groups = 1 if sharing == "all-shared" else config.model.num_hidden_layers
    run = replace(config, model=replace(config.model, embedding_size=width, num_hidden_groups=groups))
    if sharing == "not-shared" and width == config.model.hidden_size:
        run = bert_twin(config)
    with cpu_threads(config.train.num_threads):
        if sharing.startswith("shared-"):
            model = AlbertForPreTraining(run.model)
            share_across_layers(model.albert.encoder, sharing.removeprefix("shared-"))
            model = pretrain(run, data=data(run), progress=False, model=model).model
        else:
            model = pretrained(run, data, progress=False).model
        batches = data(run).eval_batches()
        return {
            "label": f"{sharing}, E={width}" + (" (BERT)" if isinstance(run.model, BertConfig) else ""),
            "E": width,
            "sharing": sharing,
            "parameters": sum(p.numel() for p in model.parameters()),
            "mlm_accuracy": evaluate(model, batches)["mlm_accuracy"],
            "curves": layer_transitions(model, batches),
            "unigram": unigram_baseline(data(run)),
        }


def wide_albert(config: Chapter07Config, seed: int, equal_compute: bool = False) -> PretrainConfig:
    """The sharing runs' recipe for ALBERT's headline model (Table 2): one layer shared across the depth, of width
    :attr:`~Chapter07Config.wide_hidden` (FFN four times that) and embedding width
    :attr:`~Chapter07Config.wide_embedding`, which gives it about BERT's parameters. With ``equal_compute`` its steps
    (and warm-up) are cut to BERT's training FLOPs, each model's FLOPs per token counted by chapter 04's
    :func:`~lecture_lib.models.bert.training_flops_per_token` (at quick's sizes, about a quarter of the steps).
    That formula counts BERT's MLM head, H² + HV, for ALBERT too; ALBERT's own, HE + EV, is smaller, so the wide
    model's count runs high (by about 8% at quick's sizes) and its equal-compute steps a little low.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    run = replace(config.sharing, seed=seed)
    wide = replace(
        run.model,
        hidden_size=config.wide_hidden,
        intermediate_size=4 * config.wide_hidden,
        embedding_size=config.wide_embedding,
        num_hidden_groups=1,
    )
    train = run.train
    if equal_compute:
        seq_len = run.data.seq_len
        share = training_flops_per_token(bert_twin(run).model, seq_len) / training_flops_per_token(wide, seq_len)
        train = replace(train, steps=round(train.steps * share), warmup_steps=round(train.warmup_steps * share))
    return replace(run, model=wide, train=train)


WIDE_VIEWS = {"equal parameters": False, "equal compute": True}  # the wide runs' views: equal_compute of wide_albert


def wide_runs(config: Chapter07Config | None = None, *, workers: int | None = None) -> dict:
    """ALBERT's headline at the chapter's scale: the wide all-shared ALBERT (:func:`wide_albert`) pretrained on the
    sharing runs' data (:func:`sharing_row`) with BERT's steps and with its training FLOPs, on the seeds and views
    of :func:`wide_plan`. Returns ``{"parameters", "seeds", "steps": {view: steps}, "mlm_accuracy": {view: [per
    seed]}}``, each view of the plan.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    config = config or chapter_config()
    seeds, views = wide_plan(config)
    rows = compute_all(sharing_row, wide_calls(config), workers=workers, desc="wide ALBERT runs")
    return {
        "parameters": rows[0]["parameters"],
        "seeds": list(seeds),
        "steps": {view: wide_albert(config, seeds[0], WIDE_VIEWS[view]).train.steps for view in views},
        "mlm_accuracy": {
            view: [row["mlm_accuracy"] for row in rows[i * len(seeds) : (i + 1) * len(seeds)]]
            for i, view in enumerate(views)
        },
    }


def wide_plan(config: Chapter07Config) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The seeds and views :func:`wide_runs` trains: every seed and both views when ``config.wide_judged`` (the
    rules can then be judged), else the first seed at BERT's steps only, which shows whether the wide model
    learns at all.

    >>> wide_plan(chapter_config(seeds=(3, 4), wide_judged=False))
    ((3,), ('equal parameters',))
    """
    if config.wide_judged:
        return config.seeds, tuple(WIDE_VIEWS)
    return config.seeds[:1], ("equal parameters",)


def wide_calls(config: Chapter07Config) -> list[tuple]:
    """The calls of :func:`sharing_row` behind :func:`wide_runs`: the wide ALBERT of each view per seed of
    :func:`wide_plan`, BERT's steps first."""
    seeds, views = wide_plan(config)
    return [
        (wide_albert(config, seed, WIDE_VIEWS[view]), config.wide_embedding, "all-shared")
        for view in views
        for seed in seeds
    ]


@torch.no_grad()
def pair_predictions(model: AlbertForPreTraining, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """The pair head's predicted label (0: B follows A, 1: it does not) for every pair of ``batches``."""
    was_training = model.training
    model.eval()
    logits, device = pretraining_head(model.config).logits, module_device(model)
    predicted = torch.cat(
        [
            getattr(model(b["input_ids"], b["attention_mask"], b["token_type_ids"]), logits).argmax(-1)
            for b in (to_device(batch, device) for batch in batches)
        ]
    ).cpu()
    model.train(was_training)
    return predicted


def pair_task_grid(config: Chapter07Config | None = None, *, workers: int | None = None) -> dict:
    """Table 5 in shape: ALBERTs pretrained (``config.pairs``) with MLM + NSP and with MLM + SOP on diaries, once
    per seed of ``config.seeds`` (the initialisation, masks and batch order; the pairs are the same), each scored on
    the same held-out NSP pairs and SOP pairs with its one pair head (:func:`pair_run_scores`, the missing runs
    ``workers`` at a time, by default one per core).

    Returns ``{"seeds", "rows": {task: {"mlm_accuracy", "nsp", "sop", "follows_share": {"nsp", "sop"}}},
    "majority": {"nsp", "sop"}}``, each row's scores a list over the seeds; ``follows_share`` is the share of
    the held-out pairs the head calls "B follows A" (a head that says one thing for every pair scores 0 or 1).

    Taught in: 07_albert ("Sentence-order prediction").
    """
    config = config or chapter_config()
    jobs = pair_calls(config)
    scores = compute_all(pair_run_scores, jobs, workers=workers, desc="pair-task grid")
    rows = {
        task: {"mlm_accuracy": [], **{t: [] for t in GRID_TASKS}, "follows_share": {t: [] for t in GRID_TASKS}}
        for task in GRID_TASKS
    }
    for (_, task, _), score in zip(jobs, scores):
        rows[task]["mlm_accuracy"].append(score["mlm_accuracy"])
        for tested in GRID_TASKS:
            rows[task][tested].append(score[tested])
            rows[task]["follows_share"][tested].append(score["follows_share"][tested])
    return {"seeds": list(config.seeds), "rows": rows, "majority": scores[0]["majority"]}


def pair_calls(config: Chapter07Config) -> list[tuple]:
    """The calls of :func:`pair_run_scores` behind :func:`pair_task_grid`: each of :data:`GRID_TASKS` per seed."""
    return [(config.pairs, task, seed) for seed in config.seeds for task in GRID_TASKS]


@cached_call
def pair_run_scores(config: PretrainConfig, task: str, seed: int) -> dict:
    """One run of :func:`pair_task_grid`: the ALBERT of ``config`` pretrained with MLM + ``task`` on seed ``seed``
    (read from the cache once trained), scored on held-out masked words and on both pair tasks. Returns
    ``{"mlm_accuracy", "nsp", "sop", "follows_share": {"nsp", "sop"}, "majority": {"nsp", "sop"}}``, the last the
    share of the commoner label among the held-out pairs of each task.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    data = DiaryPairs(config)
    run = replace(_with_pairs(config, task), seed=seed)
    with cpu_threads(config.train.num_threads):
        model = pretrained(run, data, progress=False).model
        scores: dict = {
            "mlm_accuracy": evaluate(model, data(run).eval_batches())["mlm_accuracy"],
            "follows_share": {},
            "majority": {},
        }
        for tested in GRID_TASKS:
            held = data(_with_pairs(config, tested))
            predicted = pair_predictions(model, held.eval_batches())
            scores[tested] = float((predicted == held.test[held.label_key]).float().mean())
            scores["follows_share"][tested] = float((predicted == 0).float().mean())
            scores["majority"][tested] = _majority(held.test[held.label_key])
    return scores


# Section 4's downstream task (Table 5's right-hand columns): is the second of two entries of a diary at most
# DATE_GAP days after the first? Few labelled pairs, so that what pretraining taught decides the score.
DATE_GAP = 2
DATE_GAP_LABELS = 256
DATE_GAP_BUDGET = dict(steps=150, batch_size=32, lr=1e-3)


def date_gap_task(config: PretrainConfig, seed: int) -> Task:
    """The downstream task on the diaries of :class:`DiaryPairs` ``(config)``: :data:`DATE_GAP_LABELS` training pairs
    of :func:`~lecture_lib.data.diaries.date_gap_pairs` drawn with ``seed``, and the first ``config.data.eval_pairs``
    pairs of the held-out diaries as its test set, for ALBERT's sequence-classification head.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    data = DiaryPairs(config)
    labelled = random.Random(seed_of("date-gap labels", seed)).sample(
        date_gap_pairs(data.train_documents, DATE_GAP), DATE_GAP_LABELS
    )
    held_out = date_gap_pairs(data.test_documents, DATE_GAP)[: config.data.eval_pairs]

    def encoded(pairs: list[tuple[str, str, int]]) -> tuple[EncodedTask, list[ClassificationExample]]:
        examples = [ClassificationExample(a.split(), label, b.split()) for a, b, label in pairs]
        return encode_classification(examples, data.tokenizer, config.data.seq_len, 2), examples

    (train, _), (test, test_examples) = encoded(labelled), encoded(held_out)
    return Task("date_gap", AlbertForSequenceClassification, 2, train, test, test_examples)


@cached_call
def date_gap_score(config: PretrainConfig, pretraining: str | None, seed: int) -> float:
    """Held-out accuracy on :func:`date_gap_task` of the ALBERT of the pair grid pretrained with MLM + ``pretraining``
    (``"nsp"`` or ``"sop"``) on seed ``seed`` (read from the cache once trained), or of one never pretrained
    (``None``, initialised with ``seed``), fine-tuned with ``seed`` on :data:`DATE_GAP_BUDGET`.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    task = date_gap_task(config, seed)
    with cpu_threads(config.train.num_threads):
        if pretraining is None:
            seed_everything(seed)
            encoder = AlbertModel(config.model)
        else:
            run = replace(_with_pairs(config, pretraining), seed=seed)
            encoder = pretrained(run, DiaryPairs(config), progress=False).model.albert
        result = finetune_from(task, encoder, finetune_budget(**DATE_GAP_BUDGET), seed)
    return result.scores["accuracy"]


def date_gap_runs(config: Chapter07Config | None = None, *, workers: int | None = None) -> dict:
    """Table 5's downstream columns in shape: the NSP and SOP models of :func:`pair_task_grid` and a never-pretrained
    ALBERT, each fine-tuned on :func:`date_gap_task` once per seed of ``config.seeds`` (:func:`date_gap_score`).
    Returns ``{"seeds", "rows": {"sop", "nsp", "no pretraining": [accuracy per seed]}, "majority"}``, the last the
    share of the commoner label among the held-out pairs.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    config = config or chapter_config()
    rows = {"sop": "sop", "nsp": "nsp", "no pretraining": None}
    scores = compute_all(
        date_gap_score, date_gap_calls(config, rows.values()), workers=workers, desc="date-gap fine-tuning"
    )
    n = len(config.seeds)
    labels = date_gap_task(config.pairs, config.seeds[0]).test.features["labels"]
    return {
        "seeds": list(config.seeds),
        "rows": {name: scores[i * n : (i + 1) * n] for i, name in enumerate(rows)},
        "majority": _majority(labels),
    }


def date_gap_calls(config: Chapter07Config, pretrainings: Iterable[str | None]) -> list[tuple]:
    """The calls of :func:`date_gap_score` behind :func:`date_gap_runs`: each of ``pretrainings`` per seed."""
    return [(config.pairs, pretraining, seed) for pretraining in pretrainings for seed in config.seeds]


def albert_jobs(config: Chapter07Config) -> list[tuple]:
    """Every cached run the notebook reads, as ``(function, call)``, the longest first: the pair-task grid, the wide
    ALBERTs (at equal parameters, then at equal compute), the sharing runs, then the date-gap fine-tuning (which
    reads the grid's models, trained by then).

    Taught in: 07_albert ("Cross-layer sharing").
    """
    return [
        *((pair_run_scores, call) for call in pair_calls(config)),
        *((sharing_row, call) for call in wide_calls(config)),
        *((sharing_row, call) for call in sharing_calls(config)),
        *((date_gap_score, call) for call in date_gap_calls(config, [None, "sop", "nsp"])),
    ]


def train_albert_runs(config: Chapter07Config, *, workers: int | None = None) -> int:
    """Train every run of :func:`albert_jobs` not yet in the cache, ``workers`` at a time in one pool
    (:func:`~lecture_lib.cache.build_all`), so that no section waits with a core idle for its last run; the
    sections then read their runs from the cache. Returns how many runs were trained.

    Taught in: 07_albert ("Cross-layer sharing").
    """
    return build_all(albert_jobs(config), workers=workers, desc="pretraining")


def _with_pairs(config: PretrainConfig, task: str) -> PretrainConfig:
    return replace(config, objective=replace(config.objective, pairs=task))


def _majority(labels: torch.Tensor) -> float:
    share = float(labels.float().mean())
    return max(share, 1 - share)


# ---------------------------------------------------------------- exercises


def layer_applications(model: nn.Module, layer_type: type[nn.Module], input_ids: torch.Tensor) -> int:
    """How many times one forward pass of ``model`` on ``input_ids`` runs a module of ``layer_type``:
    applications, not distinct layers, so L · ``inner_group_num`` for an ALBERT whatever its sharing.

    Exercise 1 of chapter 07: ALBERT-base with ``inner_group_num = 2`` applies 24 layers.
    """
    calls = 0

    def count(*_) -> None:
        nonlocal calls
        calls += 1

    hooks = [module.register_forward_hook(count) for module in model.modules() if isinstance(module, layer_type)]
    try:
        with torch.no_grad():
            model(input_ids)
    finally:
        for hook in hooks:
            hook.remove()
    return calls


def effective_word_table(model: BertForPreTraining | AlbertForPreTraining) -> torch.Tensor:
    """The V × H table of word vectors the first layer receives (bias and positions left out):
    W_word W_projᵀ for an ALBERT, a product of rank at most E, and W_word itself for a BERT.

    Exercise 2 of chapter 07.
    """
    encoder = model.base_model
    words = encoder.embeddings.word_embeddings.weight  # (V, E) or (V, H)
    if isinstance(encoder.config, AlbertConfig):
        return words @ encoder.encoder.embedding_hidden_mapping_in.weight.T  # (V, E) @ (E, H)
    return words


def energy_rank(matrix: torch.Tensor, share: float = 0.9) -> int:
    """The fewest singular directions that carry ``share`` of a matrix's energy: the smallest k with
    σ₁² + … + σ_k² ≥ share · Σᵢ σᵢ² (singular values σ largest first).

    >>> energy_rank(torch.diag(torch.tensor([3.0, 1.0, 1.0, 1.0])))  # 9 + 1 + 1 = 11 of 12 ≥ 10.8
    3

    Exercise 2 of chapter 07.
    """
    energy = torch.linalg.svdvals(matrix.detach().double()) ** 2
    return int((energy.cumsum(0) < share * energy.sum()).sum()) + 1


def main(argv: list[str] | None = None) -> PretrainResult:
    """``python -m lecture_lib.chapters.ch07_albert --out DIR [--profile full] [--model.num_hidden_groups 2] ...``:
    the chapter's ALBERT recipe from the command line (see :func:`lecture_lib.pretraining.main`); the
    output folder is a checkpoint that ``transformers.AlbertForPreTraining`` loads.

    Taught in: 07_albert ("Factorized embeddings").
    """
    return pretraining_main(argv, defaults=albert_config, prog="python -m lecture_lib.chapters.ch07_albert")


if __name__ == "__main__":
    main()
