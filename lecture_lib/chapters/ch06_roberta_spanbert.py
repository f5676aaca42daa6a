"""Chapter 06, RoBERTa and SpanBERT: the chapter's sizes, the synthetic corpus with its gold units, and the
small pretraining runs behind the input-format study (RoBERTa Table 2) and the masking-scheme study
(SpanBERT Tables 6 and 7), each trained once and its scores kept in the disk cache: held-out masked LM, and
chapter 05's question answering (a span task: the answer is a span of the passage) fine-tuned on the
pretrained encoder, the papers' kind of column.

Every run is the generic :func:`lecture_lib.pretraining.pretrain` on a stream from
:meth:`~lecture_lib.pretraining.PretrainingData.from_rows`: the rows of one input format
(:mod:`lecture_lib.objectives.input_formats`), or DOC-SENTENCES rows masked by whole units
(:class:`~lecture_lib.objectives.span_masking.UnitMaskedDataset`). All runs of a study are scored on the
same held-out rows (DOC-SENTENCES rows of held-out documents), masked token by token, and for the masking
study also by SpanBERT's spans. :func:`seeded_runs` repeats runs over the config's seeds (the seed draws the
documents, the vocabulary, the initial weights, the masks and the fine-tuning), the missing ones two at a time
(:func:`~lecture_lib.cache.compute_all`). Every run is cached under a name made from its call.

Taught in: 06_roberta_spanbert ("The input-format study", "Masking whole units", "The span boundary objective").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from lecture_lib import profile
from lecture_lib.analysis.gradient_noise import noise_scale, single_examples
from lecture_lib.cache import build_all, cached_call, compute_all
from lecture_lib.config import build_config, built_by
from lecture_lib.data.synthetic import Sentence, SyntheticLanguage
from lecture_lib.finetuning.finetune import Task, finetune_budget, finetune_from
from lecture_lib.finetuning.tasks import WordEncoder, encode_qa, qa_examples, split_people
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertForPreTraining, BertModel
from lecture_lib.models.heads import BertForQuestionAnswering
from lecture_lib.models.spanbert import SpanBertForPreTraining
from lecture_lib.objectives.input_formats import FORMATS, collate_segments, format_rows, pack_sentences
from lecture_lib.objectives.masking import MaskingStrategy, replace_selected
from lecture_lib.objectives.masking_units import NOUN_PHRASE_DEPENDENTS, SCHEMES, word_units
from lecture_lib.objectives.span_masking import NOT_MASKABLE, UnitMaskedDataset, mask_spans, mask_units, span_boundaries
from lecture_lib.pretraining import PretrainConfig, PretrainingData, evaluate, pretrain, tokenize_documents
from lecture_lib.profile import pick
from lecture_lib.reproductions import Check, Demonstration, Gate, ParameterCount, Rule, Seeds
from lecture_lib.runtime import generator, seed_everything
from lecture_lib.tokenization import WordPieceTokenizer
from lecture_lib.train import TrainConfig

# ``quick`` (the notebook, two CPU cores): a BERT of 2 layers of width 64, a 600-token WordPiece vocabulary
# of the synthetic language, 650 documents of fourteen sentences (about 100 tokens, so a DOC-SENTENCES row
# holds a whole document and SpanBERT's spans are seldom cut), 400 steps of 16 rows of up to 128 tokens per
# run on one thread (about half a minute each), two runs at a time. Fewer steps leave the models near the
# most-frequent-token guess (12%): on these rows, DOC-SENTENCES on seed 0 reaches 13.4% held-out masked-LM
# accuracy after 175 steps of 12 rows (the recipe this one replaced), 19.3% after 400 steps of 16, and 20.9%
# after 600 steps of 32.
# The rows that a claim compares run on every seed of LECTURE_SEEDS; those of the span task are then fine-tuned
# on chapter 05's question answering, as is the same model from random weights. In ``quick`` the other rows are
# illustrative, on the first seed; ``full`` (a GPU) runs every row on every seed. The quick profile's budget
# (180 s on two cores) pays for the claims the chapter is about: the input formats, span masking against
# subword tokens, SBO and longer training. Table 3's batch sizes and the linguistic masking units (whole words,
# entities, noun phrases) are pretrained in ``full`` only: at quick's sizes each would cost about 120 CPU-seconds.
QUICK = dict(
    pretrain=dict(
        model=dict(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=256,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            initializer_range=0.1,
        ),
        data=dict(vocab_size=600, seq_len=128, eval_pairs=256),
        objective=dict(pairs=None),
        train=dict(steps=400, batch_size=16, lr=3e-3, warmup_steps=40, eval_every=0, num_threads=1),
    ),
    documents=650,
    sentences_per_document=14,
    held_out_documents=100,
    schemes=("subword tokens", "geometric spans"),
    finetune=dict(steps=75, batch_size=16, lr=1e-3, num_threads=1),
    every_row_seeded=False,
)
FULL = dict(
    pretrain=dict(
        model=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
        data=dict(vocab_size=1000, seq_len=128, eval_pairs=1024),
        objective=dict(pairs=None),
        train=dict(steps=3000, batch_size=64, lr=5e-4, warmup_steps=300, eval_every=0),
    ),
    documents=8600,
    sentences_per_document=14,
    batch_sizes=((16, 12_000, 2.5e-4), (64, 3000, 5e-4), (256, 750, 1e-3)),
    finetune=dict(steps=1000, batch_size=32, lr=5e-4),
    task_examples=4000,
    test_examples=1000,
    every_row_seeded=True,
)

# RoBERTa Table 3: batch size, steps, learning rate at equal compute; held-out perplexity, MNLI-m, SST-2.
PAPER_BATCH_SIZES = (
    (256, "1M", 1e-4, 3.99, 84.7, 92.7),
    (2048, "125K", 7e-4, 3.68, 85.2, 92.9),
    (8192, "31K", 1e-3, 3.77, 84.6, 92.8),
)
# The papers' numbers beside ours. RoBERTa Table 2 (SQuAD 1.1/2.0 F1, MNLI-m, SST-2, RACE accuracy).
PAPER_FORMATS = {
    "segment-pair": ("90.4/78.7", 84.0, 92.9, 64.2),
    "sentence-pair": ("88.7/76.2", 82.9, 92.1, 63.0),
    "full-sentences": ("90.4/79.1", 84.7, 92.5, 64.8),
    "doc-sentences": ("90.6/79.7", 84.7, 92.7, 65.6),
}

_FLOOR_MARGIN = 0.02  # a compared model must beat its floor by two points (F1 or accuracy) on every seed
LONGER_FORMAT = "sentence-pair"  # the format of Table 4's runs: its pretraining pays on the span task (section 2)
LONGER_SHARES = (0.25, 0.5)  # Table 4's shorter runs, as shares of the recipe's steps (the rule reads the last)
# The rows of a study that run on every seed (the others on the first, unless every_row_seeded).
FORMAT_CLAIMED = ("doc-sentences", "sentence-pair")  # Table 2's comparison on the span task
FORMAT_SEEDED = (*FORMAT_CLAIMED, "segment-pair")  # and the NSP row the paper sets against DOC-SENTENCES
SPAN_TASK_SCHEMES = ("subword tokens", "geometric spans")  # SpanBERT's span-task comparison, fine-tuned
# ... and the linguistic units that geometric spans is judged against
SCHEME_SEEDED = (*SPAN_TASK_SCHEMES, "named entities", "noun phrases")
CLAIMS = (
    Rule(
        "06-doc-sentences-beat-sentence-pairs",
        "whole-document inputs beat single-sentence pairs",
        paper="SQuAD 2.0 F1 79.7 (DOC-SENTENCES) vs 76.2 (SENTENCE-PAIR)",
        source="Liu et al. (2019), Table 2",
        metric="QA F1 fine-tuned on the pretrained encoder",
        data="questions about people unseen in fine-tuning",
        compared="DOC-SENTENCES",
        baseline="SENTENCE-PAIR",
        seeds=Seeds("pretraining"),
        gates=(
            Gate("DOC-SENTENCES", "no pretraining", _FLOOR_MARGIN),
            Gate("SENTENCE-PAIR", "no pretraining", _FLOOR_MARGIN),
        ),
    ),
    Rule(
        "06-no-nsp-matches-or-helps",
        "dropping NSP matches or helps",
        paper="SQuAD 2.0 F1 79.7 (DOC-SENTENCES, no NSP) vs 78.7 (SEGMENT-PAIR, NSP)",
        source="Liu et al. (2019), Table 2",
        metric="held-out masked-LM accuracy",
        data="DOC-SENTENCES rows of held-out documents",
        compared="DOC-SENTENCES (no NSP)",
        baseline="SEGMENT-PAIR (NSP)",
        seeds=Seeds("pretraining"),
        gates=(
            Gate("DOC-SENTENCES (no NSP)", "most-frequent-token guess", _FLOOR_MARGIN),
            Gate("SEGMENT-PAIR (NSP)", "most-frequent-token guess", _FLOOR_MARGIN),
        ),
    ),
    Rule(
        "06-bigger-batches",
        "bigger batches at equal compute train better",
        paper="perplexity 3.99 (batch 256) → 3.68 (2K)",
        source="Liu et al. (2019), Table 3",
        metric="held-out masked-LM perplexity",
        data="DOC-SENTENCES rows of held-out documents",
        compared="the second batch size",
        baseline="the first batch size",
        higher=False,
        seeds=Seeds("pretraining"),
        quick="Table 3's rows run in the full profile only: the quick budget goes to the input formats and spans",
        gates=(Gate("the second batch size (MLM accuracy)", "most-frequent-token guess", _FLOOR_MARGIN),),
    ),
    Rule(
        "06-longer-pretraining-helps",
        "pretraining longer improves the downstream task",
        paper="SQuAD 2.0 F1 87.7 after 100K steps, 88.7 after 300K, 89.4 after 500K",
        source="Liu et al. (2019), Table 4",
        metric="QA F1 fine-tuned on the pretrained encoder",
        data=f"questions about people unseen in fine-tuning, after pretraining on {LONGER_FORMAT.upper()} rows (the "
        "format whose encoders beat no pretraining on them), each run with its own schedule",
        compared="the recipe's steps",
        baseline="half the steps",
        margin=_FLOOR_MARGIN,
        seeds=Seeds("pretraining"),
        gates=(
            Gate("the recipe's steps", "no pretraining", _FLOOR_MARGIN),
            Gate("half the steps", "no pretraining", _FLOOR_MARGIN),
        ),
    ),
    Demonstration(
        "06-whole-word-masking",
        "whole-word masking never splits a word",
        paper="SQuAD 1.1 F1 91.0 → 92.8 for BERT-Large",
        source="BERT's README (2019)",
        shows="how often 300 masks of each rule split philammon's three pieces",
    ),
    Rule(
        "06-geometric-spans-as-good",
        "random geometric spans are as good as linguistic units",
        paper="SQuAD 2.0 F1 85.4 (geometric spans) vs 84.8 (named entities), 85.0 (noun phrases)",
        source="Joshi et al. (2020), Table 6",
        metric="held-out accuracy with SpanBERT's spans masked",
        data="DOC-SENTENCES rows of held-out documents",
        compared="geometric spans",
        baseline="the better of named entities and noun phrases",
        seeds=Seeds("pretraining"),
        quick="the linguistic units are pretrained in the full profile only: the quick budget goes to the span task",
        gates=(
            Gate("geometric spans", "most-frequent-token guess", _FLOOR_MARGIN),
            Gate("the better of named entities and noun phrases", "most-frequent-token guess", _FLOOR_MARGIN),
        ),
    ),
    Rule(
        "06-span-masking-helps-span-tasks",
        "masking spans helps tasks whose answers are spans",
        paper="SQuAD 2.0 F1 85.4 (geometric spans) vs 83.8 (subword tokens)",
        source="Joshi et al. (2020), Table 6",
        metric="QA F1 fine-tuned on the pretrained encoder",
        data="questions about people unseen in fine-tuning",
        compared="geometric spans",
        baseline="subword tokens",
        seeds=Seeds("pretraining"),
        gates=(
            Gate("geometric spans", "no pretraining", _FLOOR_MARGIN),
            Gate("subword tokens", "no pretraining", _FLOOR_MARGIN),
        ),
    ),
    Rule(
        "06-sbo-helps",
        "the span boundary objective helps",
        paper="SQuAD 2.0 F1 86.7 with SBO vs 85.8 without (one segment, span masking)",
        source="Joshi et al. (2020), Table 7",
        metric="QA F1 fine-tuned on the pretrained encoder",
        data="questions about people unseen in fine-tuning",
        compared="spans + SBO",
        baseline="spans",
        seeds=Seeds("pretraining"),
        gates=(
            Gate("spans + SBO", "no pretraining", _FLOOR_MARGIN),
            Gate("spans", "no pretraining", _FLOOR_MARGIN),
        ),
    ),
)
CHECKS = (
    Check(
        "06-roberta-is-bert",
        "our RobertaForMaskedLM gives transformers' logits on a left-padded batch",
        source="Liu et al. (2019), section 3",
        reference="transformers' RobertaForMaskedLM in float64",
        tolerance=1e-10,
    ),
    ParameterCount(
        "06-vocabulary-cost",
        "the byte-level vocabulary's extra embeddings at H = 768",
        source="Liu et al. (2019), section 4.4",
        paper="15M",
    ),
    ParameterCount(
        "06-vocabulary-cost-large",
        "the byte-level vocabulary's extra embeddings at H = 1024",
        source="Liu et al. (2019), section 4.4",
        paper="20M",
    ),
    Check(
        "06-span-length-mean",
        "span lengths from Geo(0.2) restricted to 1..10 have mean 3.8",
        source="Joshi et al. (2020), section 3.1",
        reference="3.8 to the paper's rounding",
        tolerance=0.005,
    ),
)


@dataclass
class Chapter06Config:
    """The chapter's sizes: the pretraining recipe of every run, and the synthetic documents it reads.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """

    pretrain: PretrainConfig
    documents: int = 1500
    sentences_per_document: int = 6
    held_out_documents: int = 150
    language_seed: int = 0
    batch_sizes: tuple[tuple[int, int, float], ...] = ()  # Table 3's rows: (batch size, steps, peak lr), if any
    schemes: tuple[str, ...] = SCHEMES  # Table 6's masking units pretrained, SPAN_TASK_SCHEMES among them
    finetune: TrainConfig = built_by(finetune_budget)  # the span task's budget (its seed: the run's pretraining seed)
    task_examples: int = 1000  # span-task questions to fine-tune on, about one half of the people
    test_examples: int = 400  # and to score, about the other half
    passage_sentences: int = 3  # the span task's passages, as chapter 05's
    seeds: tuple[int, ...] = (0, 1, 2)  # pretraining seeds of the rows a claim compares (LECTURE_SEEDS)
    every_row_seeded: bool = False  # also the illustrative rows on every seed (else on the first)

    def __post_init__(self) -> None:
        for name in (
            "documents",
            "sentences_per_document",
            "held_out_documents",
            "task_examples",
            "test_examples",
            "passage_sentences",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"expected {name} ≥ 1, got {getattr(self, name)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"expected distinct seeds, at least one, got {list(self.seeds)}")
        if any(len(row) != 3 for row in self.batch_sizes):
            raise ValueError(f"expected batch_sizes of (batch size, steps, lr) rows, got {self.batch_sizes}")
        self.schemes = tuple(self.schemes)
        if not set(SPAN_TASK_SCHEMES) <= set(self.schemes) <= set(SCHEMES):
            raise ValueError(f"expected schemes of {SCHEMES}, {SPAN_TASK_SCHEMES} among them, got {self.schemes}")


def chapter_config(**overrides) -> Chapter06Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`) with ``overrides`` (``pretrain`` a nested dict),
    the seeds from ``LECTURE_SEEDS`` (:func:`~lecture_lib.profile.claim_seeds`).

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    return build_config(Chapter06Config, pick(quick=QUICK, full=FULL), dict(seeds=profile.claim_seeds()), overrides)


# ---------------------------------------------------------------- the corpus and its units


@dataclass
class Corpus:
    """Synthetic documents (training and held-out) and the WordPiece tokenizer learned from the training ones."""

    train: list[list[Sentence]]
    test: list[list[Sentence]]
    tokenizer: WordPieceTokenizer


def synthetic_corpus(config: Chapter06Config) -> Corpus:
    """Documents of the synthetic language, the held-out ones drawn with another seed.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    lang = SyntheticLanguage(config.language_seed)
    seed = config.pretrain.seed
    train = lang.documents(config.documents, seed, config.sentences_per_document)
    test = lang.documents(config.held_out_documents, seed + 1, config.sentences_per_document)
    tokenizer = WordPieceTokenizer.train([s.text for doc in train for s in doc], config.pretrain.data.vocab_size)
    return Corpus(train, test, tokenizer)


def unit_rows(
    documents: list[list[Sentence]],
    tokenizer: WordPieceTokenizer,
    scheme: str,
    seq_len: int,
    dependents: set[str] | None = None,
) -> dict[str, torch.Tensor]:
    """DOC-SENTENCES rows ``[CLS] sentences [SEP]`` with ``unit_ids`` (N, T) for ``scheme``: one unit per token
    for subword tokens, per word for whole words and geometric spans (word ids), per entity or noun phrase.

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    encoder, unit_of = WordEncoder(tokenizer), {}
    tokenized = []  # documents of sentences of (token id, unit key) pairs, unit keys unique in the corpus
    for d, doc in enumerate(documents):
        sentences = []
        for s, sentence in enumerate(doc):
            ids, word_ids = encoder.encode(sentence.words)
            units = word_units(sentence, scheme, NOUN_PHRASE_DEPENDENTS if dependents is None else dependents)
            keys = [(d, s, t if scheme == "subword tokens" else units[w]) for t, w in enumerate(word_ids)]
            sentences.append(list(zip(ids, keys)))
        tokenized.append(sentences)
    segments = pack_sentences(tokenized, seq_len - 2, cross_documents=False)
    rows = collate_segments(
        [[t for t, _ in seg] for seg in segments],
        length=seq_len,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    unit_ids = torch.full_like(rows["input_ids"], NOT_MASKABLE)
    for r, seg in enumerate(segments):
        unit_of.clear()
        unit_ids[r, 1 : len(seg) + 1] = torch.tensor([unit_of.setdefault(k, len(unit_of)) for _, k in seg])
    rows["unit_ids"] = unit_ids
    return rows


def mean_masked_run(
    documents: list[list[Sentence]],
    tokenizer: WordPieceTokenizer,
    scheme: str,
    seq_len: int,
    dependents: set[str] | None = None,
) -> float:
    """The mean length in tokens of a run of masked tokens when ``scheme``'s units are masked at 15% (section
    "Masking whole units" counts it; exercise 2 compares noun phrases with and without ``nmod``).

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    rows = unit_rows(documents, tokenizer, scheme, seq_len, dependents)
    mask = mask_spans if scheme == "geometric spans" else mask_units
    _, labels = mask(
        rows["input_ids"],
        rows["unit_ids"],
        generator=generator("budget", scheme),
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size,
    )
    return (labels != IGNORE_INDEX).sum().item() / span_boundaries(labels)["offset"].eq(0).sum().item()


# ---------------------------------------------------------------- the span task


def span_task(config: Chapter06Config, tokenizer: WordPieceTokenizer) -> Task:
    """Chapter 05's question answering (:func:`~lecture_lib.finetuning.tasks.qa_examples`, passages of
    ``config.passage_sentences`` sentences about two people) in ``tokenizer``'s pieces: ``config.task_examples``
    questions about one half of the people to fine-tune on, ``config.test_examples`` about the other half to
    score. The answer is a span of the passage (a name, a city, a company), found by its first and last tokens,
    as SQuAD's. ``[CLS] question [SEP] passage [SEP]`` has one segment type, as RoBERTa's inputs: the [SEP]
    alone tells question from passage, so no model reads a segment embedding its pretraining never trained
    (rows of one segment, DOC-SENTENCES' and every masking scheme's, leave segment B's at its random start).

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    lang = SyntheticLanguage(config.language_seed)
    train_people, test_people = split_people(lang.world)
    length = config.pretrain.data.seq_len
    encoded = []
    for n, seed, people in ((config.task_examples, 1, train_people), (config.test_examples, 2, test_people)):
        examples = qa_examples(lang, n, seed, people, sentences_per_passage=config.passage_sentences)
        task = encode_qa(examples, tokenizer, length)
        task.features["token_type_ids"] = torch.zeros_like(task.features["token_type_ids"])
        encoded.append((task, examples))
    (train, _), (test, test_examples) = encoded
    return Task("qa", BertForQuestionAnswering, 2, train, test, test_examples)


def span_task_scores(
    config: Chapter06Config, encoder: BertModel | None, tokenizer: WordPieceTokenizer
) -> dict[str, float]:
    """``qa_f1`` and ``qa_exact``: :func:`span_task` fine-tuned on ``encoder`` (``None``: a random encoder of the
    config's shape, no pretraining) with ``config.finetune``'s budget, seeded by the pretraining seed.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    task, start = span_task(config, tokenizer), encoder or config.pretrain.model
    scores = finetune_from(task, start, config.finetune, config.pretrain.seed).scores
    return {"qa_f1": scores["f1"], "qa_exact": scores["exact_match"]}


# ---------------------------------------------------------------- the runs


def _held_out(corpus: Corpus, config: Chapter06Config) -> tuple[dict[str, torch.Tensor], list[dict], list[dict]]:
    """The held-out DOC-SENTENCES rows (with word ids), and their batches masked by tokens and by spans."""
    rows = unit_rows(corpus.test, corpus.tokenizer, "whole words", config.pretrain.data.seq_len)
    rows = {k: v[: config.pretrain.data.eval_pairs] for k, v in rows.items()}
    tokens = PretrainingData.from_rows(config.pretrain, corpus.tokenizer, rows, rows).eval_batches()
    masked, labels = mask_spans(
        rows["input_ids"],
        rows["unit_ids"],
        mask_token_id=corpus.tokenizer.mask_token_id,
        vocab_size=corpus.tokenizer.vocab_size,
        generator=generator("held-out spans"),
    )
    spans = [
        {
            "input_ids": masked[i : i + 128],
            "attention_mask": rows["attention_mask"][i : i + 128],
            "token_type_ids": rows["token_type_ids"][i : i + 128],
            "labels": labels[i : i + 128],
        }
        for i in range(0, len(masked), 128)
    ]
    return rows, tokens, spans


def unpadded_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """:func:`~lecture_lib.pretraining.pretraining_loss` with the encoder run on the real tokens only
    (``unpad=True``): the same loss and gradients up to float rounding, without the compute spent on padding
    (a SENTENCE-PAIR row is two thirds padding). The study's BERT runs train with it.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    return model(**batch, masked_only=True, unpad=True).loss


@cached_call(ignore=("progress",))
def format_run(
    config: Chapter06Config, name: str, span_task: bool = True, match_tokens: bool = True, progress: bool = True
) -> dict[str, float]:
    """One row of the input-format study: pretrain on format ``name`` (with NSP for the two pair formats, as
    in RoBERTa's Table 2), then score held-out MLM on the common held-out rows, and (``span_task``) the span
    task fine-tuned on the pretrained encoder (:func:`span_task_scores`). Cached under a name made from the call.

    With ``match_tokens``, every format's batch holds as many tokens as SEGMENT-PAIR's: the short SENTENCE-PAIR
    rows come in a larger batch, as in the paper (which also enlarged DOC-SENTENCES' batches dynamically; ours
    are fixed per run). Without it the batch is the config's own, for runs compared in rows of one format.
    Returns ``mlm_accuracy``, ``mlm_loss``, ``nsp_accuracy`` (pair formats; on the format's own held-out
    pairs), ``tokens_per_row``, ``batch_size``, and with the span task ``qa_f1`` and ``qa_exact``.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    if name not in FORMATS:
        raise ValueError(f"expected an input format in {list(FORMATS)}, got {name!r}")
    pretrain_config = config.pretrain
    corpus = synthetic_corpus(config)
    tok = corpus.tokenizer
    ids = dict(
        length=pretrain_config.data.seq_len,
        cls_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id,
        pad_token_id=tok.pad_token_id,
    )
    train_docs, test_docs = (
        tokenize_documents(tok, [[s.text for s in doc] for doc in docs]) for docs in (corpus.train, corpus.test)
    )
    rows = {f: format_rows(f, train_docs, seed=pretrain_config.seed, **ids) for f in ("segment-pair", name)}
    tokens_per_row = {f: float(r["attention_mask"].sum(1).double().mean()) for f, r in rows.items()}
    batch = pretrain_config.train.batch_size
    if match_tokens:
        batch = round(batch * tokens_per_row["segment-pair"] / tokens_per_row[name])
    run_config = replace(
        pretrain_config,
        objective=replace(pretrain_config.objective, pairs="nsp" if FORMATS[name] else None),
        train=replace(pretrain_config.train, batch_size=batch),
    )
    test = format_rows(name, test_docs, seed=pretrain_config.seed + 1, **ids)
    test = {k: v[: pretrain_config.data.eval_pairs] for k, v in test.items()}
    data = PretrainingData.from_rows(run_config, tok, rows[name], test)
    result = pretrain(run_config, data=data, progress=progress, loss=unpadded_loss)
    _, tokens, _ = _held_out(corpus, config)
    scores = evaluate(result.model, tokens)
    own = result.history.evals[-1][1] if result.history.evals else {}
    return {
        "mlm_accuracy": scores["mlm_accuracy"],
        "mlm_loss": scores["mlm_loss"],
        "nsp_accuracy": own.get("nsp_accuracy"),
        "tokens_per_row": tokens_per_row[name],
        "batch_size": batch,
        **(span_task_scores(config, result.model.bert, tok) if span_task else {}),
    }


def batch_size_calls(config: Chapter06Config) -> list[tuple]:
    """The calls of :func:`format_run` behind :func:`batch_size_runs`, one per row of ``config.batch_sizes`` and seed.

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    calls = []
    for row, (batch_size, steps, lr) in enumerate(config.batch_sizes):
        train = replace(
            config.pretrain.train, batch_size=batch_size, steps=steps, lr=lr, warmup_steps=max(1, steps // 10)
        )
        for seed in config.seeds if row < 2 or config.every_row_seeded else config.seeds[:1]:
            run_config = with_seed(replace(config, pretrain=replace(config.pretrain, train=train)), seed)
            calls.append((run_config, "doc-sentences", False, False, False))  # no span task, own batch, no bar
    return calls


def batch_size_runs(config: Chapter06Config, *, workers: int | None = None) -> dict[int, dict[int, dict[str, float]]]:
    """RoBERTa Table 3 in shape: DOC-SENTENCES runs (no NSP) at the same batch size × steps, the learning rate
    raised with the batch (about as its square root), one per row of ``config.batch_sizes``; each returns
    :func:`format_run`'s scores and the held-out ``perplexity`` exp(MLM loss), ``{batch size: {seed: scores}}``.
    The first two rows (the paper's 256 and 2K) run on every seed, the others on the first seed unless
    ``config.every_row_seeded``; the missing runs two at a time. Pretraining only, each at its row's own batch
    (not matched to SEGMENT-PAIR's tokens), so every row trains on exactly batch × steps rows.

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    jobs = batch_size_calls(config)
    runs: dict[int, dict[int, dict[str, float]]] = {}
    for (run_config, *_), scores in zip(jobs, compute_all(format_run, jobs, workers=workers, desc="batch sizes")):
        train = run_config.pretrain.train
        runs.setdefault(train.batch_size, {})[run_config.pretrain.seed] = {
            **scores,
            "steps": train.steps,
            "lr": train.lr,
            "perplexity": math.exp(scores["mlm_loss"]),
        }
    return runs


def bigger_batches_in_range(batch_sizes: Sequence[int], simple_noise_scale: float) -> bool:
    """The range of RoBERTa's Table 3 claim, declared with the claims: the larger compared batch is at most the
    simple noise scale B_simple at the end of the chapter's run. Above it, McCandlish et al. (2018) find that a
    bigger batch needs more examples to reach the same loss, so at equal compute it cannot train better; below
    it, a bigger batch costs about no extra examples and the claim can show. Out of range, the notebook says so.

    >>> bigger_batches_in_range([6, 12], 250.0), bigger_batches_in_range([6, 12], 10.0)
    (True, False)

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    return max(batch_sizes) <= simple_noise_scale


@cached_call
def batch_noise_scales(config: Chapter06Config, examples: int = 256) -> dict[str, float]:
    """McCandlish et al.'s (2018) simple noise scale B_simple = tr(Σ) / |G|² (:func:`~lecture_lib.analysis.
    gradient_noise.noise_scale`) of the chapter's loss on DOC-SENTENCES training rows, from the per-example
    gradients of ``examples`` rows masked as in training: at the initial weights (``initial``) and at the end
    (``end``) of the chapter's own recipe, which is :func:`batch_size_runs`' row of the config's batch size,
    trained again to keep its model. Also each one's ``*_trace`` and ``*_squared_norm``, the end model's
    held-out ``perplexity`` (the same as that row's), and ``examples``.

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    run, corpus = config.pretrain, synthetic_corpus(config)
    tok = corpus.tokenizer
    documents = tokenize_documents(tok, [[s.text for s in doc] for doc in corpus.train])
    specials = dict(cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id, pad_token_id=tok.pad_token_id)
    rows = format_rows("doc-sentences", documents, length=run.data.seq_len, seed=run.seed, **specials)
    held_out, tokens, _ = _held_out(corpus, config)

    def stream(batch_size: int) -> PretrainingData:
        return PretrainingData.from_rows(
            replace(run, train=replace(run.train, batch_size=batch_size)), tok, rows, held_out
        )

    sample = single_examples(stream(examples).batch(0))  # one training draw of rows and masks
    seed_everything(run.seed)  # the run's initial weights, as pretrain draws them
    scales = {"initial": noise_scale(BertForPreTraining(run.model), unpadded_loss, sample)}
    model = pretrain(run, data=stream(run.train.batch_size), progress=False, loss=unpadded_loss).model
    scales["end"] = noise_scale(model, unpadded_loss, sample)
    return {
        "examples": examples,
        "perplexity": math.exp(evaluate(model, tokens)["mlm_loss"]),
        **{name: s.simple for name, s in scales.items()},
        **{f"{name}_trace": s.trace for name, s in scales.items()},
        **{f"{name}_squared_norm": s.squared_norm for name, s in scales.items()},
    }


@cached_call(ignore=("progress",))
def scheme_run(
    config: Chapter06Config, scheme: str, span_task: bool = True, sbo: bool = False, progress: bool = True
) -> dict[str, float]:
    """One row of the masking study: pretrain on DOC-SENTENCES rows masked by ``scheme``'s units at 15% (with
    the span boundary objective when ``sbo``), no NSP; score held-out MLM with tokens masked one by one
    (``mlm_accuracy``) and with SpanBERT's spans masked (``span_accuracy``), and (``span_task``) the span task
    fine-tuned on the pretrained encoder (``qa_f1``, ``qa_exact``). Whole words draw 80/10/10 for each piece, as
    Google's ``create_pretraining_data.py``; entities, noun phrases and spans once per unit, as SpanBERT. Cached
    under a name made from the call, :data:`NOUN_PHRASE_DEPENDENTS` included (exercise 2 changes it).

    Taught in: 06_roberta_spanbert ("Masking whole units", "The span boundary objective").
    """
    if scheme not in SCHEMES:
        raise ValueError(f"expected a masking scheme in {SCHEMES}, got {scheme!r}")
    pretrain_config = config.pretrain
    corpus = synthetic_corpus(config)
    tok = corpus.tokenizer
    rows = unit_rows(corpus.train, tok, scheme, pretrain_config.data.seq_len, NOUN_PHRASE_DEPENDENTS)
    masks = UnitMaskedDataset(
        rows["input_ids"],
        rows["unit_ids"],
        mask_token_id=tok.mask_token_id,
        vocab_size=tok.vocab_size,
        spans=scheme == "geometric spans",
        seed=pretrain_config.seed,
        replacement="per piece" if scheme == "whole words" else "per unit",
    )
    test, tokens, spans = _held_out(corpus, config)
    data = PretrainingData.from_rows(pretrain_config, tok, rows, test, masks)
    # a run of masked tokens (adjacent spans merge) is never longer than the row: one position per token;
    # the weights drawn from the run's seed, whatever ran before in this process
    seed_everything(pretrain_config.seed)
    model = (
        SpanBertForPreTraining(pretrain_config.model, max_span_tokens=pretrain_config.data.seq_len)
        if sbo
        else BertForPreTraining(pretrain_config.model)
    )
    # SpanBERT's boundary head reads the padded (B, T, H) states
    result = pretrain(
        pretrain_config, data=data, model=model, progress=progress, **({} if sbo else {"loss": unpadded_loss})
    )
    by_tokens, by_spans = evaluate(result.model, tokens), evaluate(result.model, spans)
    return {
        "mlm_accuracy": by_tokens["mlm_accuracy"],
        "mlm_loss": by_tokens["mlm_loss"],
        "span_accuracy": by_spans["mlm_accuracy"],
        "span_loss": by_spans["mlm_loss"],
        **(span_task_scores(config, result.model.bert, tok) if span_task else {}),
    }


@cached_call
def scratch_run(config: Chapter06Config) -> dict[str, float]:
    """The span task's trivial baseline: :func:`span_task_scores` of a randomly initialised encoder (no
    pretraining), in the vocabulary of ``config``'s corpus, with the same fine-tuning budget and seed.

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    return span_task_scores(config, None, synthetic_corpus(config).tokenizer)


STUDIES = {"format": format_run, "scheme": scheme_run, "no pretraining": scratch_run}


def with_seed(config: Chapter06Config, seed: int) -> Chapter06Config:
    """``config`` pretrained (and fine-tuned) with ``seed``: other documents, vocabulary, weights and masks. The
    run's config names only its own seed, so its cache name does not depend on which other seeds a table repeats."""
    return replace(config, seeds=(seed,), pretrain=replace(config.pretrain, seed=seed))


def seeded_calls(
    config: Chapter06Config,
    study: str,
    names: Sequence[str],
    compared: Sequence[str] = (),
    *,
    span_task: Sequence[str] | None = None,
) -> list[tuple[str, tuple]]:
    """The ``(name, call)`` of each run of :func:`seeded_runs` (same arguments), the call's function being
    ``STUDIES[study]``.

    Taught in: 06_roberta_spanbert ("The input-format study", "Masking whole units").
    """
    if study not in STUDIES:
        raise ValueError(f"expected a study in {list(STUDIES)}, got {study!r}")
    tasked = names if span_task is None else span_task
    unknown = sorted((set(compared) | set(tasked)) - set(names))
    if unknown:
        raise ValueError(f"expected the compared rows and those with the span task among {list(names)}, got {unknown}")
    seeded = names if config.every_row_seeded else compared
    runs = [
        (name, with_seed(config, seed))
        for name in names
        for seed in (config.seeds if name in seeded else config.seeds[:1])
    ]
    return [
        (name, (run_config,) if study == "no pretraining" else (run_config, name, name in tasked))
        for name, run_config in runs
    ]


def seeded_runs(
    config: Chapter06Config,
    study: str,
    names: Sequence[str],
    compared: Sequence[str] = (),
    *,
    span_task: Sequence[str] | None = None,
    workers: int | None = None,
) -> dict[str, dict[int, dict[str, float]]]:
    """The rows of a ``study`` ("format": :func:`format_run`, "scheme": :func:`scheme_run`, each called as
    ``(config, name, span_task)``; "no pretraining": :func:`scratch_run`, whatever the name): every name on the
    first seed of ``config.seeds``, the ``compared`` ones (every one when ``config.every_row_seeded``) on every seed; ``{name: {seed: scores}}``. The rows named in
    ``span_task`` (``None``: every row) are fine-tuned on the span task, the others only pretrained. The runs not
    in the cache go two at a time on two cores (:func:`~lecture_lib.cache.compute_all`; each on one thread, so
    the same scores as one after the other).

    Taught in: 06_roberta_spanbert ("The input-format study", "Masking whole units").
    """
    runs = seeded_calls(config, study, names, compared, span_task=span_task)
    scores = compute_all(STUDIES[study], [call for _, call in runs], workers=workers, desc=f"{study} runs")
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for (name, (run_config, *_)), row in zip(runs, scores):
        rows.setdefault(name, {})[run_config.pretrain.seed] = row
    return rows


def scheme_study(config: Chapter06Config) -> dict[str, tuple[str, ...]]:
    """The rows of section 6's study, as the keywords of :func:`seeded_runs` and :func:`seeded_calls`: the
    config's schemes, those of :data:`SCHEME_SEEDED` among them on every seed, :data:`SPAN_TASK_SCHEMES`
    fine-tuned on the span task.

    >>> scheme_study(chapter_config(schemes=("geometric spans", "whole words", "subword tokens")))["compared"]
    ('subword tokens', 'geometric spans')

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    compared = tuple(scheme for scheme in SCHEME_SEEDED if scheme in config.schemes)
    return dict(names=config.schemes, compared=compared, span_task=SPAN_TASK_SCHEMES)


def with_pretraining_steps(config: Chapter06Config, steps: int) -> Chapter06Config:
    """``config`` pretrained for ``steps`` steps, warming up over the same share of them as the recipe, so each
    run has a whole schedule of its own (as RoBERTa's Table 4 rows): in the quick profile (400 steps, 40 of
    warm-up), ``with_pretraining_steps(config, 100).pretrain.train.warmup_steps == 10``.

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    train = config.pretrain.train
    warmup = round(train.warmup_steps * steps / train.steps)
    return replace(config, pretrain=replace(config.pretrain, train=replace(train, steps=steps, warmup_steps=warmup)))


def longer_runs(config: Chapter06Config, *, workers: int | None = None) -> dict[int, dict[int, dict[str, float]]]:
    """RoBERTa's "pretrain longer" in shape: :data:`LONGER_FORMAT` pretrained for each of :data:`LONGER_SHARES`
    of the recipe's steps and for all of them, on every seed, each fine-tuned on the span task (:func:`format_run`; the
    recipe's runs are the input-format study's, read from the cache); ``{steps: {seed: scores}}``. The missing
    runs go two at a time (:func:`~lecture_lib.cache.compute_all`).

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    calls = longer_calls(config)
    scores = compute_all(format_run, [call for *_, call in calls], workers=workers, desc="longer runs")
    rows: dict[int, dict[int, dict[str, float]]] = {}
    for (steps, seed, _), row in zip(calls, scores):
        rows.setdefault(steps, {})[seed] = row
    return rows


def longer_calls(config: Chapter06Config) -> list[tuple[int, int, tuple]]:
    """``(steps, seed, call of format_run)`` for each run of :func:`longer_runs`.

    Taught in: 06_roberta_spanbert ("Bigger batches and longer training").
    """
    total = config.pretrain.train.steps
    steps = (*(round(share * total) for share in LONGER_SHARES), total)
    return [
        (s, seed, (with_pretraining_steps(with_seed(config, seed), s), LONGER_FORMAT, True))
        for s in steps
        for seed in config.seeds
    ]


def sbo_runs(config: Chapter06Config, *, workers: int | None = None) -> dict[int, dict[str, float]]:
    """SpanBERT's one segment with the span boundary objective: :func:`scheme_run` with geometric spans and SBO
    on every seed, fine-tuned on the span task; ``{seed: scores}``, the missing runs ``workers`` at a time.

    Taught in: 06_roberta_spanbert ("The span boundary objective").
    """
    calls = sbo_calls(config)
    return {call[0].pretrain.seed: row for call, row in zip(calls, compute_all(scheme_run, calls, workers=workers))}


def sbo_calls(config: Chapter06Config) -> list[tuple]:
    """The calls of :func:`scheme_run` behind :func:`sbo_runs`: geometric spans, the span task and SBO, per seed."""
    return [(with_seed(config, seed), "geometric spans", True, True) for seed in config.seeds]


def roberta_spanbert_jobs(config: Chapter06Config) -> list[tuple]:
    """Every cached run the notebook reads, as ``(function, call)``, the longest first: section 3's noise scales
    and batch sizes (if the profile has any), section 7's SBO runs, section 6's schemes, section 2's formats,
    section 3's shorter runs, and the span task from random weights.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    return [
        (batch_noise_scales, (with_seed(config, config.seeds[0]),)),
        *((format_run, call) for call in batch_size_calls(config)),
        *((scheme_run, call) for call in sbo_calls(config)),
        *((scheme_run, call) for _, call in seeded_calls(config, "scheme", **scheme_study(config))),
        *((format_run, call) for _, call in seeded_calls(config, "format", FORMATS, FORMAT_SEEDED)),
        *((format_run, call) for *_, call in longer_calls(config)),
        *(
            (scratch_run, call)
            for _, call in seeded_calls(config, "no pretraining", ["no pretraining"], ["no pretraining"])
        ),
    ]


def train_roberta_spanbert_runs(config: Chapter06Config, *, workers: int | None = None) -> int:
    """Train every run of :func:`roberta_spanbert_jobs` not yet in the cache, ``workers`` at a time in one pool
    (:func:`~lecture_lib.cache.build_all`), so that no section waits with a core idle for its last run; the
    sections then read their runs from the cache. Returns how many runs were trained.

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    return build_all(roberta_spanbert_jobs(config), workers=workers, desc="pretraining")


@cached_call
def unigram_guess(config: Chapter06Config) -> dict[str, float]:
    """The held-out accuracy of always guessing the most frequent training token of ``config``'s corpus: what a
    model that learned nothing about context scores, for tokens masked one by one (``tokens``) and by spans
    (``spans``).

    Taught in: 06_roberta_spanbert ("The input-format study").
    """
    corpus = synthetic_corpus(config)
    tok = corpus.tokenizer
    words = [w for doc in corpus.train for s in doc for w in s.words]
    ids = torch.tensor([i for w in words for i in tok.encode(w)])
    guess = int(ids.bincount().argmax())
    _, tokens, spans = _held_out(corpus, config)
    scores = {}
    for name, batches in (("tokens", tokens), ("spans", spans)):
        labels = torch.cat([b["labels"].flatten() for b in batches])
        scores[name] = float((labels[labels >= 0] == guess).double().mean())
    return scores


# ---------------------------------------------------------------- exercises


@torch.no_grad()
def left_padding_shift(
    model: BertModel, input_ids: torch.Tensor, padding: int, *, arange_positions: bool = False
) -> float:
    """max |h_t(left-padded) − h_t(unpadded)| over the real tokens of ``input_ids`` (B, T, no padding) when
    ``padding`` masked pad tokens are put before them. With ``arange`` positions (BERT's, or RoBERTa's forced
    with ``arange_positions``) every real token moves ``padding`` places; RoBERTa's own
    :func:`~lecture_lib.models.roberta.position_ids_after_padding` keeps its position id.

    Exercise 1 of chapter 06.
    """
    was_training = model.training
    model.eval()
    pads = torch.full(
        (input_ids.shape[0], padding), model.config.pad_token_id, dtype=input_ids.dtype, device=input_ids.device
    )
    padded = torch.cat([pads, input_ids], dim=1)  # (B, p + T)

    def hidden(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)[None, :] if arange_positions else None
        return model(ids, attention_mask=mask, position_ids=positions).last_hidden_state  # (B, T, H)

    plain = hidden(input_ids, torch.ones_like(input_ids))
    shifted = hidden(padded, torch.cat([torch.zeros_like(pads), torch.ones_like(input_ids)], dim=1))[:, padding:]
    model.train(was_training)
    return float((shifted - plain).abs().max())


def no_nsp_holds(formats: dict[str, dict[str, float]]) -> bool:
    """ "No NSP ≥ NSP" on one seed's :func:`format_run` rows (Liu et al., 2019, Table 2), as section 2 reads it:
    the best held-out MLM accuracy of the formats without NSP is at least the best of those with NSP.

    Exercise 3 of chapter 06 asks it of every seed of the full profile.
    """
    with_nsp = max(row["mlm_accuracy"] for name, row in formats.items() if FORMATS[name])
    without = max(row["mlm_accuracy"] for name, row in formats.items() if not FORMATS[name])
    return without >= with_nsp


def mask_chosen_per_token(
    input_ids: torch.Tensor,
    chosen: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator | None,
    strategy: MaskingStrategy,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's 80/10/10 drawn for every token of the chosen spans: a drop-in for SpanBERT's once-per-span
    ``span_masking._mask_chosen`` (same arguments), under which a span of ℓ tokens keeps at least one of its
    tokens with chance 1 − 0.9^ℓ instead of 0.1.

    Exercise 4 of chapter 06.
    """
    return replace_selected(
        input_ids,
        chosen >= 0,
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        generator=generator,
        strategy=strategy,
    )


def spans_showing_a_token(input_ids: torch.Tensor, masked_input_ids: torch.Tensor, chosen: torch.Tensor) -> float:
    """The share of chosen spans (``chosen`` (B, T): the span id of each chosen token, -1 elsewhere) of which at
    least one token is shown to the model as it was.

    Exercise 4 of chapter 06.
    """
    shown = total = 0
    for row, span_ids in enumerate(chosen):
        for span in span_ids[span_ids >= 0].unique():
            tokens = span_ids == span
            shown += bool((masked_input_ids[row, tokens] == input_ids[row, tokens]).any())
            total += 1
    return shown / total
