"""Chapter 10, BERTology I: the chapter's sizes, the two models it opens (the real MiniLM and chapter 05's BERT
of the synthetic language), and the inputs and scores its sections share.

Taught in: 10_bertology_attention ("Two models and their inputs", "Attention to [CLS] is a no-op", "Syntactic heads",
"Which heads matter").
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import nn

from lecture_lib.analysis import head_classes
from lecture_lib.analysis.attention_parser import (
    attachment_score,
    attention_parse,
    fit_attention_parser,
    right_branching,
    single_head_uas,
)
from lecture_lib.analysis.attention_stats import attention_maps
from lecture_lib.analysis.head_classes import PATTERNS, classify_patterns, voita_classes
from lecture_lib.analysis.head_importance import GatedLoss, head_importance, pruning_curve, pruning_order
from lecture_lib.analysis.syntactic_heads import DIRECTIONS, align_words, word_attention, word_membership
from lecture_lib.cache import cached_call
from lecture_lib.chapters import course_language
from lecture_lib.config import FieldError, Range, build_config, check_fields
from lecture_lib.data.corpus import load_corpus
from lecture_lib.data.minilm import minilm_dir
from lecture_lib.data.synthetic import Sentence
from lecture_lib.finetuning.finetune import finetune, new_head, score
from lecture_lib.models.bert import BertForPreTraining, BertModel
from lecture_lib.objectives.masking import mask_tokens
from lecture_lib.pretraining import PretrainResult, masked_lm_counts
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Demonstration, Gate, Rule, Seeds
from lecture_lib.runtime import generator, module_device, to_device
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer, pad_ids
from lecture_lib.train import TrainConfig

WordMaps = Callable[[torch.Tensor, Sequence[int]], torch.Tensor]

# the dependency relations of the synthetic language scored in Table 1's shape
DEPENDENCY_RELATIONS = ("nsubj", "obj", "det", "amod", "case", "obl", "cop", "aux", "acl:relcl", "flat")


@dataclass
class Chapter10Config:
    """The chapter's sizes: documentation pairs for the statistics, synthetic sentences for syntax and for
    the masked-LM score, random pruning orders, and the latency batch.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """

    pairs: int = field(metadata=Range(1).rule())  # sentence pairs of the documentation, for where attention goes
    max_length: int = field(metadata=Range(3).rule())  # pieces per pair, [CLS] and [SEP]s included
    syntax_sentences: int = field(metadata=Range(2).rule())  # synthetic sentences with gold trees
    mlm_sentences: int = field(metadata=Range(1).rule())  # held-out synthetic sentences, masked, for importance
    random_orders: int = field(metadata=Range(1).rule())  # random pruning orders averaged
    latency_batch: int = field(metadata=Range(1).rule())
    latency_repeats: int = field(metadata=Range(1).rule())
    seeds: tuple[int, ...] = (0, 1, 2)  # the samples the claims repeat on (profile.claim_seeds() in chapter_config)
    no_op_pairs: int = field(default=16, metadata=Range(1).rule())  # documentation pairs per seed, no-op test
    parser_train: int = field(default=100, metadata=Range(1).rule())  # syntax sentences that fit the parser
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        if self.parser_train >= self.syntax_sentences:
            raise FieldError(
                ["parser_train", "syntax_sentences"],
                f"expected fewer parser_train sentences than "
                f"syntax_sentences, to score the parser on the rest, got {self.parser_train} of "
                f"{self.syntax_sentences}",
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise FieldError(["seeds"], f"expected distinct seeds, at least one, got {list(self.seeds)}")


# ``full``: ten times the text, and more random orders and latency calls.
QUICK = dict(
    pairs=48,
    max_length=64,
    syntax_sentences=150,
    mlm_sentences=512,
    random_orders=3,
    latency_batch=32,
    latency_repeats=5,
)
FULL = dict(
    pairs=512,
    max_length=128,
    syntax_sentences=2000,
    mlm_sentences=2048,
    random_orders=10,
    latency_batch=64,
    latency_repeats=10,
)


def chapter_config(**overrides) -> Chapter10Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), the claims' seeds
    (:func:`lecture_lib.profile.claim_seeds`), and ``overrides``.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    return build_config(Chapter10Config, pick(quick=QUICK, full=FULL), {"seeds": claim_seeds(), **overrides})


DOCUMENTATION_PAIRS = "the documentation's sentence pairs of section 1"
_COURSE_MODEL = pick(quick=course_language.QUICK, full=course_language.FULL)["pretrain"]["model"]
COURSE_HEADS = _COURSE_MODEL["num_hidden_layers"] * _COURSE_MODEL["num_attention_heads"]  # quick 16, full 24
# Michel et al.'s 40% of heads, rounded up (quick: 7 of 16, 44%), and the loss that would be noticeable: two
# points of accuracy, about one standard error on the quick profile's 400 test sentences scored near 80%
PRUNED_HEADS = math.ceil(0.4 * COURSE_HEADS)
NOTICEABLE_LOSS = 0.02
CLAIMS = (
    Rule(
        "10-attention-parked-on-special-tokens",
        "much attention is parked on a special token",
        paper="over half of the attention of BERT-base's middle layers on [SEP], much of the early layers' on [CLS]",
        source="Clark et al. (2019), Figure 2",
        metric="the largest layer mean of the attention to [CLS] and [SEP]",
        data="MiniLM on " + DOCUMENTATION_PAIRS,
        compared="MiniLM",
        baseline=0.3,
        seeds=Seeds("none", 1),
    ),
    Rule(
        "10-no-op-attention",
        "attention parked on a special token is a no-op: its gradient is small",
        paper="attention to [SEP] high in layers 5–10, its gradient small there",
        source="Clark et al. (2019), Figure 3",
        metric="share of |∂L/∂a| on [CLS], in the heads with at least half their attention on it",
        data="MiniLM's sentence-similarity loss on 16 documentation pairs per sample",
        compared="the gradient share",
        baseline="the attention share",
        higher=False,
        factor=4,
        seeds=Seeds("data sample"),
    ),
    Rule(
        "10-early-heads-broad",
        "the first layer's heads are the broadest",
        paper="broad heads in the early layers",
        source="Clark et al. (2019), Figure 2",
        metric="mean entropy of the attention rows (nats)",
        data="MiniLM on " + DOCUMENTATION_PAIRS,
        compared="layer 0",
        baseline="the broadest other layer",
        seeds=Seeds("none", 1),
    ),
    Demonstration(
        "10-heterogeneous-fewer-than-half",
        "fewer than half of the maps are heterogeneous (not comparable here)",
        paper="fewer than half of BERT-base's maps heterogeneous, by a classifier trained on 400 hand-labelled maps",
        source="Kovaleva et al. (2019), Figure 2",
        shows="the five patterns' shares under a 0.5 threshold rule on distilled MiniLM; not comparable "
        "with the paper's trained classifier on BERT-base fine-tuned on GLUE, so not judged",
    ),
    Rule(
        "10-positional-heads",
        "positional heads exist",
        paper="heads whose argmax is at ±1 for at least 90% of tokens",
        source="Voita et al. (2019), section 5",
        metric="the best head's share of queries whose argmax is the previous token",
        data="MiniLM on " + DOCUMENTATION_PAIRS,
        compared="MiniLM's best head",
        baseline=0.9,
        seeds=Seeds("none", 1),
    ),
    Rule(
        "10-rare-token-head",
        "a rare-token head exists",
        paper="a head whose argmax falls on the sentence's rarest token",
        source="Voita et al. (2019), section 5",
        metric="the best of the 72 heads' share of queries whose argmax is the sentence's rarest word",
        data="MiniLM on " + DOCUMENTATION_PAIRS,
        compared="MiniLM's best head",
        baseline="the same maximum over the 72 heads with the words' frequencies "
        "shuffled within each sentence (one shuffle per seed)",
        factor=2,
        seeds=Seeds("data sample"),
    ),
    Rule(
        "10-syntactic-heads",
        "single heads track single relations better than fixed offsets",
        paper="det 94.3 against 51.7, nsubj 58.5 against 45.5",
        source="Clark et al. (2019), Table 1",
        metric="accuracy of the best head minus that of the best fixed offset, the lower of det and nsubj",
        data="MiniLM on 150 synthetic sentences with gold trees",
        compared="MiniLM's best heads",
        baseline=0.1,
        seeds=Seeds("none", 1),
    ),
    Rule(
        "10-attention-parser-beats-baseline",
        "a parser from attention alone beats the right-branching tree",
        paper="UAS 61 (attention only) and 34.5 (best head) against 26.3 (right-branching)",
        source="Clark et al. (2019), section 5",
        metric="UAS",
        data="the held-out synthetic sentences of a random split",
        compared="the attention-only probe on MiniLM",
        baseline="the right-branching tree",
        margin=0.1,
        seeds=Seeds("probe fit"),
    ),
    Rule(
        "10-few-heads-matter-alone",
        "removing one head changes the score little",
        paper="8 of 96 encoder heads change BLEU significantly when removed alone",
        source="Michel et al. (2019), section 3",
        metric=f"the largest change of masked-LM accuracy from removing one of the {COURSE_HEADS} heads",
        data=f"the course BERT on {pick(quick=QUICK, full=FULL)['mlm_sentences']} held-out masked synthetic sentences",
        compared="the course BERT",
        baseline=0.05,
        higher=False,
        seeds=Seeds("none", 1),
        gates=(Gate("the course BERT with all heads", "most-frequent-token guess", 0.05),),
    ),
    Rule(
        "10-importance-order-beats-random",
        "pruning by importance beats pruning at random",
        paper="the importance curve above the random curve",
        source="Michel et al. (2019), Figure 3",
        metric="masked-LM accuracy averaged over the pruning curve",
        data="the course BERT on held-out masked "
        "synthetic sentences (each seed its own sentences, masks and random orders)",
        compared="least important first (raw importance)",
        baseline="random order",
        margin=0.01,
        seeds=Seeds("data sample"),
    ),
    Rule(
        "10-forty-percent-of-heads-prunable",
        "on a fine-tuned task, 40% of the heads can be pruned without noticeable loss",
        paper="40% of BERT's heads pruned on MNLI without noticeable loss of accuracy",
        source="Michel et al. (2019), Figure 4",
        metric=f"test accuracy lost with the {PRUNED_HEADS} least important of the {COURSE_HEADS} heads removed",
        data="acceptability's test sentences, the course BERT fine-tuned",
        compared="pruning by importance",
        baseline=NOTICEABLE_LOSS,
        higher=False,
        seeds=Seeds("fine-tuning"),
        gates=(Gate("acceptability, fine-tuned (test MCC)", "chance", 0.1),),
    ),
    Demonstration(
        "10-pruning-speeds-inference",
        "pruning half the heads speeds inference",
        paper="up to 17% faster at large batch",
        source="Michel et al. (2019), section 6",
        shows="timings on a shared CPU, printed and not judged",
    ),
)
CHECKS = (
    Check(
        "10-masking-is-pruning",
        "masking a head equals zeroing its value slice and pruning it",
        source="the arithmetic of multi-head attention",
        reference="0 (largest difference of the last hidden states, zeroed values and pruned against masked)",
        tolerance=1e-5,
    ),
    Check(
        "10-importance-is-output-times-gradient",
        "importance |∂L/∂ξ_h| is the head's output times its gradient",
        source="Michel et al. (2019), section 4.1",
        reference="0 (largest difference in float64)",
        tolerance=1e-8,
    ),
)


def load_minilm() -> tuple[BertModel, WordPieceTokenizer]:
    """The real MiniLM (all-MiniLM-L6-v2) and its bert-base-uncased WordPiece tokenizer, from the package's
    files or the hub's (:func:`lecture_lib.data.minilm.minilm_dir`, which says what to install without either).

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    directory = minilm_dir()
    return BertModel.from_pretrained(directory), WordPieceTokenizer.from_vocab_file(directory / "vocab.txt")


def course_bert() -> PretrainResult:
    """Chapter 05's BERT of the synthetic language (read from the cache, trained there first if missing).

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    return course_language.synthetic_pretrained_bert(course_language.chapter_config())


def documentation_pairs(tokenizer: WordPieceTokenizer, config: Chapter10Config) -> dict[str, torch.Tensor]:
    """Pairs of consecutive sentences of the Python documentation, ``[CLS] A [SEP] B [SEP]``, that fit
    ``max_length``, from documents drawn at random: ``input_ids``, ``token_type_ids``, ``attention_mask``
    and ``special_tokens_mask`` (True on [CLS] and [SEP] only), right-padded to the longest pair.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    documents = [d for d in load_corpus()["sentences"] if len(d) >= 2]
    rng = random.Random(config.seed)
    framed = []
    for document in rng.sample(documents, len(documents)):
        start = rng.randrange(len(document) - 1)
        ids, types, special = tokenizer.frame(*(tokenizer.encode(s) for s in document[start : start + 2]))
        if len(ids) <= config.max_length:
            framed.append((ids, types, special))
        if len(framed) == config.pairs:
            break
    ids, types, special = (list(column) for column in zip(*framed))
    input_ids = pad_ids(ids, tokenizer.pad_token_id)
    attention_mask = pad_ids([[1] * len(row) for row in ids], 0)
    return dict(
        input_ids=input_ids,
        token_type_ids=pad_ids(types, 0),
        attention_mask=attention_mask,
        special_tokens_mask=pad_ids(special, 0).bool(),
    )


def shuffled_within_rows(values: torch.Tensor, keep: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``values`` (B, T) with the entries where ``keep`` is True permuted at random within each row, the others
    left in place: token identities shuffled among a sentence's words.

    >>> shuffled_within_rows(torch.tensor([[1, 2, 3, 4]]), torch.tensor([[False, True, True, True]]),
    ...                      torch.Generator().manual_seed(0))[0, 0].item()
    1
    """
    out = values.clone()
    for row in range(values.shape[0]):
        where = keep[row].nonzero().flatten()
        out[row, where] = values[row, where[torch.randperm(len(where), generator=generator)]]
    return out


def rare_token_null(
    attentions: torch.Tensor, attention_mask: torch.Tensor, special: torch.Tensor, frequency: torch.Tensor, seed: int
) -> float:
    """The null of the rare-token head: the largest share over all heads of queries whose argmax falls on the
    sentence's rarest word (:func:`~lecture_lib.analysis.head_classes.voita_classes`' ``rare``) when the words'
    frequencies are shuffled within each sentence (``generator("ch10 rare null", seed)``), so that the "rarest"
    word is a word drawn at random. A head that tracks rare words must beat the best of all heads at that.

    Taught in: 10_bertology_attention ("Confident, positional and rare-token heads").
    """
    words = attention_mask.bool() & ~special
    shuffled = shuffled_within_rows(frequency, words, generator("ch10 rare null", seed))
    return float(voita_classes(attentions, attention_mask, special, shuffled).rare.max())


def token_frequencies(tokenizer: WordPieceTokenizer) -> torch.Tensor:
    """How often each token id occurs in the documentation's sentences: (vocab_size,) counts.

    Taught in: 10_bertology_attention ("Confident, positional and rare-token heads").
    """
    counts = Counter(i for document in load_corpus()["sentences"] for s in document for i in tokenizer.encode(s))
    frequency = torch.zeros(tokenizer.vocab_size, dtype=torch.long)
    frequency[list(counts)] = torch.tensor(list(counts.values()))
    return frequency


def word_maps(
    model: nn.Module,
    tokenizer: WordPieceTokenizer,
    sentences: list[Sentence],
    batch_size: int = 64,
    to_words: WordMaps = word_attention,
) -> list[torch.Tensor]:
    """Each sentence's word-level attention maps (layers, heads, W, W), from its words' pieces by ``to_words``
    (Clark et al.'s :func:`~lecture_lib.analysis.syntactic_heads.word_attention`, or exercise 4's
    :func:`summed_row_attention`).

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    maps = []
    for start in range(0, len(sentences), batch_size):
        aligned = [align_words(tokenizer, s.words) for s in sentences[start : start + batch_size]]
        input_ids = pad_ids([ids for ids, _ in aligned], tokenizer.pad_token_id)
        attention_mask = pad_ids([[1] * len(ids) for ids, _ in aligned], 0)
        pieces = attention_maps(model, input_ids, attention_mask)  # (B, L, H, T, T)
        for row, (ids, word_of_piece) in enumerate(aligned):
            n = len(ids)
            maps.append(to_words(pieces[row, ..., :n, :n], word_of_piece))
    return maps


@dataclass(frozen=True)
class ParserScores:
    """UAS on the held-out sentences of one split: Clark et al.'s attention-only probe, the single head (and
    direction) that parses the fitting sentences best, and the right-branching baseline.

    Taught in: 10_bertology_attention ("An attention-based parser").
    """

    probe: float
    single: float
    single_head: tuple[str, int, int]
    right_branching: float


def parser_scores(maps: Sequence[torch.Tensor], sentences: Sequence[Sentence], seed: int, train: int) -> ParserScores:
    """Split the sentences at random (``seed``): fit the attention-only probe and pick the best single head on
    ``train`` of them, score both and the right-branching tree on the others.

    Taught in: 10_bertology_attention ("An attention-based parser").
    """
    if not 0 < train < len(sentences):
        raise ValueError(f"expected 0 < train < {len(sentences)} sentences, got {train}")
    order = torch.randperm(len(sentences), generator=generator("ch10 parser split", seed)).tolist()
    fit, held_out = order[:train], order[train:]
    heads = [s.heads for s in sentences]
    weights = fit_attention_parser([maps[i] for i in fit], [heads[i] for i in fit])
    test_maps, test_heads = [maps[i] for i in held_out], [heads[i] for i in held_out]
    single = single_head_uas([maps[i] for i in fit], [heads[i] for i in fit])
    direction, layer, head = (int(i) for i in torch.unravel_index(single.argmax(), single.shape))
    return ParserScores(
        probe=attachment_score(attention_parse(weights, test_maps), test_heads),
        single=float(single_head_uas(test_maps, test_heads)[direction, layer, head]),
        single_head=(DIRECTIONS[direction], layer, head),
        right_branching=attachment_score([right_branching(len(h)) for h in test_heads], test_heads),
    )


def masked_sentences(
    result: PretrainResult, sentences: list[Sentence], seed: int, batch_size: int = 64
) -> list[dict[str, torch.Tensor]]:
    """Single sentences framed ``[CLS] s [SEP]``, masked as in pretraining (15%, 80/10/10), in batches with
    their MLM labels.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    tokenizer = result.tokenizer
    framed = [tokenizer.frame(tokenizer.encode(s.text)) for s in sentences]
    batches = []
    for start in range(0, len(framed), batch_size):
        rows = framed[start : start + batch_size]
        input_ids = pad_ids([ids for ids, _, _ in rows], tokenizer.pad_token_id)
        attention_mask = pad_ids([[1] * len(ids) for ids, _, _ in rows], 0)
        special = pad_ids([s for _, _, s in rows], 1).bool()  # padding is never selected either
        masked, labels = mask_tokens(
            input_ids,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=tokenizer.vocab_size,
            special_tokens_mask=special,
            generator=generator("ch10 masking", seed, start),
        )
        batches.append(dict(input_ids=masked, attention_mask=attention_mask, labels=labels))
    return batches


def mlm_loss(model: nn.Module, batch: dict[str, torch.Tensor], head_mask: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss of a :class:`~lecture_lib.models.bert.BertForPreTraining` with its heads gated.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    return model(**batch, head_mask=head_mask, masked_only=True).mlm_loss


def gated_task_loss(model: nn.Module, batch: dict[str, torch.Tensor], head_mask: torch.Tensor) -> torch.Tensor:
    """The fine-tuned task's loss of a classifier or tagger with its heads gated.

    Taught in: 10_bertology_attention ("Pruning by importance").
    """
    return model(**batch, head_mask=head_mask).loss


@dataclass(frozen=True)
class TaskPruning:
    """Michel et al.'s experiment on one fine-tuned copy of the course BERT: its heads' importance under the task
    loss (layers, heads), raw; its test scores with every head; and its test accuracy with the ``n`` least important
    heads removed, and with ``n`` heads removed in a random order (the mean over the orders), for n = 0 .. all.

    Taught in: 10_bertology_attention ("Pruning by importance").
    """

    importance: torch.Tensor
    scores: dict[str, float]
    by_importance: list[float]
    at_random: list[float]

    def accuracy_lost(self, removed: int) -> tuple[float, float]:
        """Test accuracy lost with ``removed`` heads pruned: by importance, and at random."""
        return self.by_importance[0] - self.by_importance[removed], self.at_random[0] - self.at_random[removed]

    def mean_accuracy(self) -> tuple[float, float]:
        """Test accuracy averaged over the whole curve: by importance, and at random."""
        return sum(self.by_importance) / len(self.by_importance), sum(self.at_random) / len(self.at_random)

    def removable(self, loss: float) -> int:
        """The most heads that can go by importance with no count up to it losing more than ``loss`` of accuracy.

        >>> TaskPruning(torch.zeros(1, 4), {}, [0.8, 0.79, 0.7, 0.8, 0.5], [0.8] * 5).removable(0.02)
        1
        """
        kept = [accuracy >= self.by_importance[0] - loss for accuracy in self.by_importance]
        return kept.index(False) - 1 if False in kept else len(kept) - 1


def task_pruning(
    course: PretrainResult,
    task_name: str,
    config: TrainConfig,
    *,
    seed: int = 0,
    random_orders: int = 3,
    batches: int = 4,
    batch_size: int = 64,
) -> TaskPruning:
    """Michel et al.'s setting: a copy of ``course``'s encoder fine-tuned on chapter 05's ``task_name`` with
    ``config`` and ``seed``; its heads scored by |∂L/∂ξ_h| of that task's loss on ``batches`` training batches,
    then removed from the test-time model least important first (and in ``random_orders`` random orders, drawn
    from ``generator("ch10 random task pruning", seed, r)``). ``course`` is left as it was; the result is cached.

    Taught in: 10_bertology_attention ("Pruning by importance").
    """
    result = _task_pruning(course.model, course.tokenizer, task_name, config, seed, random_orders, batches, batch_size)
    return TaskPruning(
        torch.tensor(result["importance"]), result["scores"], result["by_importance"], result["at_random"]
    )


@cached_call
def _task_pruning(
    model: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    task_name: str,
    config: TrainConfig,
    seed: int,
    random_orders: int,
    batches: int,
    batch_size: int,
) -> dict:
    task = course_language.build_tasks(tokenizer)[task_name]
    tuned = finetune(task, new_head(task, model.bert, seed=seed), config, seed)
    device = module_device(tuned.model.eval())  # where fine-tuning left it: the GPU when there is one
    data = [
        to_device(task.train.batch(torch.arange(i, i + batch_size)), device)
        for i in range(0, batches * batch_size, batch_size)
    ]
    importance = head_importance(tuned.model, data, gated_task_loss, normalize=False)
    heads = torch.ones_like(importance)

    def accuracy(head_mask: torch.Tensor) -> float:
        return score(task, tuned.model, head_mask=head_mask.to(device))["accuracy"]

    counts = range(heads.numel() + 1)
    orders = [
        torch.randperm(heads.numel(), generator=generator("ch10 random task pruning", seed, r))
        for r in range(random_orders)
    ]
    at_random = torch.tensor([pruning_curve(accuracy, order, counts, heads) for order in orders]).mean(0)
    return {
        "importance": importance.tolist(),
        "scores": tuned.scores,
        "by_importance": pruning_curve(accuracy, pruning_order(importance), counts, heads),
        "at_random": at_random.tolist(),
    }


def masked_lm_accuracy(model: nn.Module, batches: list[dict[str, torch.Tensor]], head_mask: torch.Tensor) -> float:
    """The share of masked positions predicted right with ``head_mask`` applied.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    model.eval()
    correct, total = masked_lm_counts(model, batches, head_mask=head_mask, masked_only=True)
    return correct / total


def masked_lm_forward(model: nn.Module) -> Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, tuple]]:
    """Exercise 2 of chapter 10: Clark et al.'s no-op test with the masked-LM loss, for
    :func:`~lecture_lib.analysis.attention_gradients.no_op_profile`: ``forward(batch)`` returns the MLM loss
    of a :class:`~lecture_lib.models.bert.BertForPreTraining` on :func:`masked_sentences`' batch and every
    layer's attention weights.
    """

    def forward(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, tuple]:
        device = module_device(model)
        out = model(**{k: v.to(device) for k, v in batch.items()}, output_attentions=True, masked_only=True)
        return out.mlm_loss, out.attentions

    return forward


def summed_row_attention(attentions: torch.Tensor, word_of_piece: Sequence[int]) -> torch.Tensor:
    """Exercise 4 of chapter 10: piece maps (..., T, T) -> word maps (..., W, W) with attention *from* a word
    the sum over its pieces' rows instead of their mean: A_words = M A M^T, M the (W, T) membership matrix.
    A word of k pieces gets k times its row of :func:`~lecture_lib.analysis.syntactic_heads.word_attention`.
    """
    member = word_membership(word_of_piece, attentions.shape[-1], attentions)
    return member @ attentions @ member.T


def pattern_fractions(shares: dict[str, torch.Tensor], dominant: float) -> dict[str, float]:
    """Exercise 3 of chapter 10: the share of maps in each of :data:`~lecture_lib.analysis.head_classes.PATTERNS`
    with the rule's threshold :data:`~lecture_lib.analysis.head_classes.DOMINANT` set to ``dominant`` (and put
    back afterwards); ``shares`` as :func:`~lecture_lib.analysis.head_classes.pattern_shares` returns them.
    """
    default, head_classes.DOMINANT = head_classes.DOMINANT, dominant
    try:
        patterns = classify_patterns(shares)
    finally:
        head_classes.DOMINANT = default
    return {name: float((patterns == k).double().mean()) for k, name in enumerate(PATTERNS)}


def threshold_for_few_heterogeneous(shares: dict[str, torch.Tensor], start: float = 0.5, step: float = 0.05) -> float:
    """Exercise 3 of chapter 10: the largest threshold ``start - k * step`` that puts fewer than half of the
    maps in "heterogeneous" (each lowering can only move maps out of it: every rule is "a share >= DOMINANT").
    """
    threshold = start
    while pattern_fractions(shares, threshold)["heterogeneous"] >= 0.5:
        threshold = round(threshold - step, 10)
        if threshold <= 0:
            raise ValueError("no threshold above 0 puts fewer than half of the maps in heterogeneous")
    return threshold


def similarity_pairs(tokenizer: WordPieceTokenizer, seed: int, pairs: int, max_length: int) -> dict[str, torch.Tensor]:
    """Pairs of consecutive sentences of the Python documentation, each sentence framed alone ``[CLS] s [SEP]``
    (the way a sentence encoder reads it), from documents drawn at random by ``seed``: rows 0..n-1 hold the
    first sentences, rows n..2n-1 their successors; ``input_ids`` and ``attention_mask``, right-padded.

    Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
    """
    documents = [d for d in load_corpus()["sentences"] if len(d) >= 2]
    rng = random.Random(seed)
    chosen = []
    for document in rng.sample(documents, len(documents)):
        start = rng.randrange(len(document) - 1)
        framed = [tokenizer.frame(tokenizer.encode(s))[0] for s in document[start : start + 2]]
        if all(len(ids) <= max_length for ids in framed):
            chosen.append(framed)
        if len(chosen) == pairs:
            break
    rows = [a for a, _ in chosen] + [b for _, b in chosen]
    return dict(
        input_ids=pad_ids(rows, tokenizer.pad_token_id), attention_mask=pad_ids([[1] * len(r) for r in rows], 0)
    )


def similarity_forward(model: BertModel) -> Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, tuple]]:
    """The loss MiniLM was fine-tuned to lower, for :func:`~lecture_lib.analysis.attention_gradients.no_op_profile`:
    ``forward(batch)`` returns Σ_pairs 1 − cos(mean(h_a), mean(h_b)) over :func:`similarity_pairs`' rows (the
    last layer mean-pooled over the real tokens) and every layer's attention weights, in the loss's graph.

    Taught in: 10_bertology_attention ("Attention to [CLS] is a no-op").
    """

    def forward(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, tuple]:
        device = module_device(model)
        mask = batch["attention_mask"].to(device)
        out = model(batch["input_ids"].to(device), attention_mask=mask, output_attentions=True)
        real = mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
        pooled = (out.last_hidden_state * real).sum(1) / real.sum(1)  # (2n, H)
        first, second = pooled.chunk(2)
        return (1 - torch.nn.functional.cosine_similarity(first, second)).sum(), out.attentions

    return forward


def iterative_pruning_order(
    model: nn.Module, batches: list[dict[str, torch.Tensor]], loss: GatedLoss, step: int = 2
) -> torch.Tensor:
    """Exercise 1 of chapter 10: Michel et al.'s importance recomputed after each pruning step, as their code
    does: remove the ``step`` least important remaining heads, recompute I_h = E|∂L/∂ξ_h| at the gates of
    the pruned model (removed heads at ξ = 0), repeat. Returns the flat head indices in the order removed,
    like :func:`~lecture_lib.analysis.head_importance.pruning_order`.
    """
    mask = torch.ones(model.config.num_hidden_layers, model.config.num_attention_heads)
    order: list[int] = []
    while len(order) < mask.numel():
        importance = head_importance(model, batches, loss, at=mask).flatten()
        importance[order] = torch.inf  # removed heads are not removed again
        removed = importance.argsort(stable=True)[: min(step, mask.numel() - len(order))].tolist()
        order += removed
        mask.view(-1)[removed] = 0
    return torch.tensor(order)
