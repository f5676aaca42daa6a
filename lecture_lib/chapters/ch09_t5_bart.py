"""Chapter 09, T5 and BART: the text-to-text tasks of the synthetic language, and the small runs behind T5's
objectives table (one tiny T5 pretrained per objective, then fine-tuned on all tasks at once; cached).

Taught in: 09_t5_bart ("Text-to-text", "The objectives table at toy scale").
"""

from __future__ import annotations

import copy
import functools
import math
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence, Union

import torch

from lecture_lib.cache import cached_call, compute_all
from lecture_lib.config import FieldError, OneOf, Range, build_config, built_by, check_fields
from lecture_lib.data.synthetic import CITIES, ORGANISATIONS, SyntheticLanguage
from lecture_lib.decoding import greedy_decode
from lecture_lib.finetuning.tasks import acceptability_examples, entailment_examples, qa_examples, split_people
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.metrics import exact_match, qa_f1
from lecture_lib.models.bart import BartConfig, BartForConditionalGeneration
from lecture_lib.models.t5 import T5Config, T5ForConditionalGeneration, relative_position_bucket
from lecture_lib.objectives.denoising import OBJECTIVES, apply_objective, bert_style, iid_noise_mask
from lecture_lib.objectives.noising import NOISING, sentence_permutation
from lecture_lib.objectives.span_corruption import noise_spans, random_spans_noise_mask, span_counts
from lecture_lib.objectives.text_to_text import NUM_SENTINELS, SPECIALS, Vocabulary, batch_of
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Demonstration, Gate, ParameterCount, Rule, Seeds
from lecture_lib.runtime import generator, module_device, seed_of, to_device
from lecture_lib.train import TrainConfig, recipe_config, train

TASKS = ("acceptability", "entailment", "question", "facts")
# the tasks that write their answer, T5's SQuAD and CNN/DM columns: the answer's words come from an input about
# people whom fine-tuning never names; the other two answer with a label word that fine-tuning teaches
ANSWER_TASKS = ("question", "facts")
Seq2Seq = Union[T5ForConditionalGeneration, BartForConditionalGeneration]


# Both phases' recipe: AdamW with a linear schedule, one CPU thread per run; a phase's budget is a TrainConfig (the
# course's one optimisation config) built by seq2seq_budget.
SEQ2SEQ_DEFAULTS = dict(schedule="linear", num_threads=1)


def seq2seq_budget(**values) -> TrainConfig:
    """The budget of a pretraining or fine-tuning phase: a :class:`~lecture_lib.train.TrainConfig` of ``values``
    (``steps``, ``batch_size`` examples per step, peak ``lr``, ...) over :data:`SEQ2SEQ_DEFAULTS`, warming up over a
    tenth of its steps (rounded down) unless ``values`` state ``warmup_steps``: ``seq2seq_budget(steps=450,
    lr=3e-3).warmup_steps == 45``. :class:`Chapter09Config`'s ``pretrain`` and ``finetune`` are built by it
    (:func:`lecture_lib.config.built_by`).

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    return recipe_config(SEQ2SEQ_DEFAULTS, lambda steps: steps // 10, **values)


@dataclass(frozen=True)
class Chapter09Config:
    """What the objectives experiment trains: a T5's sizes, the budget of each phase (``pretrain`` and ``finetune``,
    built by :func:`seq2seq_budget`), the objectives compared.

    Both profiles pretrain one model per seed and objective (``seed_varies="pretraining"``), which is what a claim
    about a pretraining objective needs; ``seed_varies="fine-tuning"`` (the field's default, for a cheaper look)
    pretrains one model per objective and fine-tunes it once per seed.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """

    d_model: int = field(metadata=Range(1).rule())
    num_layers: int = field(metadata=Range(1).rule())
    num_heads: int = field(metadata=Range(1).rule())
    d_kv: int = field(metadata=Range(1).rule())
    d_ff: int = field(metadata=Range(1).rule())
    objectives: tuple[str, ...]
    pretrain: TrainConfig = built_by(seq2seq_budget, steps=450, batch_size=32, lr=3e-3)  # of each pretraining run
    finetune: TrainConfig = built_by(seq2seq_budget, steps=100, batch_size=32, lr=3e-3)  # of each fine-tuning run
    noisings: tuple[str, ...] = ("text_infilling", "document_rotation")
    bart_init_std: float | None = field(default=None, metadata=Range(0, open=True).rule())  # None: d_model ** -0.5
    train_examples: int = field(default=2000, metadata=Range(1).rule())  # per task
    eval_examples: int = field(default=100, metadata=Range(1).rule())  # per task
    documents: int = field(default=4000, metadata=Range(1).rule())
    sentences_per_document: int = field(default=3, metadata=Range(1).rule())
    language_seed: int = 0
    input_length: int | None = field(default=None, metadata=Range(2).rule())  # None: the documents; n: rows of n words
    random_roll: bool = True  # roll each random-spans mask (T5's reference option), or leave its noise at the end
    seeds: tuple[int, ...] = (0, 1, 2)  # each row's runs, one per seed (profile.claim_seeds() in chapter_config)
    seed_varies: str = field(default="fine-tuning", metadata=OneOf(("fine-tuning", "pretraining")).rule())
    probe_documents: int = field(default=512, metadata=Range(1).rule())  # documents of hidden_word_accuracy

    def __post_init__(self) -> None:
        check_fields(self)
        unknown = sorted(set(self.objectives) - set(OBJECTIVES))
        if unknown:
            raise FieldError(["objectives"], f"expected objectives among {OBJECTIVES}, got {unknown}")
        for noising in self.noisings:
            try:
                noising_parts(noising)
            except ValueError as error:
                raise FieldError(["noisings"], str(error)) from None
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise FieldError(["seeds"], f"expected distinct seeds, at least one, got {list(self.seeds)}")


# Pretraining takes the larger share of the steps, as in T5 (2^19 pretraining steps against 2^18 of fine-tuning).
# Both profiles pretrain one model per seed and objective. The quick profile runs two denoising rows of T5's Table
# 3 and the prefix LM, and BART's best and worst rows; the full profile packs the text into inputs of 128 words (6 spans each) and runs every objective and six BART rows.
QUICK = dict(
    d_model=64,
    num_layers=2,
    num_heads=4,
    d_kv=16,
    d_ff=128,
    pretrain=dict(steps=450, batch_size=32, lr=3e-3),
    finetune=dict(steps=100, batch_size=32, lr=3e-3),
    objectives=("bert_style", "random_spans", "prefix_lm"),
    seed_varies="pretraining",
)
FULL = dict(
    d_model=128,
    num_layers=4,
    num_heads=4,
    d_kv=32,
    d_ff=512,
    pretrain=dict(steps=3000, batch_size=64, lr=1e-3),
    finetune=dict(steps=1500, batch_size=64, lr=1e-3),
    objectives=OBJECTIVES,
    input_length=128,
    seed_varies="pretraining",
    noisings=(
        "token_masking",
        "token_deletion",
        "text_infilling",
        "document_rotation",
        "sentence_permutation",
        "text_infilling+sentence_permutation",
    ),
)

# T5's Tables 1, 4 and 5 (the columns that our tasks mirror): GLUE average, CNN/DM ROUGE-2, SQuAD EM.
PAPER_ROWS = {
    "no pretraining": (66.22, 17.60, 50.31),
    "prefix_lm": (80.69, 18.94, 77.99),
    "bert_style": (82.96, 19.17, 80.65),
    "deshuffling": (73.17, 18.59, 67.61),
    "replace_spans": (83.28, 19.24, 80.88),
    "drop_tokens": (84.44, 19.31, 80.52),
    "random_spans": (83.49, 19.62, 81.84),  # Table 7, mean span length 3
}

# BART's Table 1 (base size, 1M steps; the columns that our tasks mirror): SQuAD 1.1 F1, MNLI accuracy, and
# CNN/DM perplexity (lower is better). BART's table has no row without pretraining.
BART_PAPER_ROWS = {
    "token_masking": (90.4, 84.1, 6.10),
    "token_deletion": (90.4, 84.1, 5.87),
    "text_infilling": (90.8, 84.0, 5.83),
    "document_rotation": (77.2, 75.3, 10.59),
    "sentence_permutation": (85.4, 81.5, 7.89),
    "text_infilling+sentence_permutation": (90.8, 83.8, 5.41),
}


# The claims, declared before the run. The objective claims are about pretraining: they vary the pretraining seed
# (seed_varies="pretraining", in both profiles).
ALL_TASKS = "100 unseen-name examples of each of the four tasks"
_ABOVE_MAJORITY = 0.05  # a gate: a row that answers every input alike scores the majority answer at best
CLAIMS = (
    Rule(
        "09-denoising-beats-no-pretraining",
        "denoising pretraining beats no pretraining",
        paper="GLUE 83.28, CNN/DM ROUGE-2 19.24, SQuAD EM 80.88 against 66.22, 17.60 and 50.31 without pretraining",
        source="Raffel et al. (2020), Table 1",
        metric="mean over the tasks of exact match (token F1 for facts)",
        data=ALL_TASKS,
        compared="each denoising objective (BERT-style and random spans, the lower of the two)",
        baseline="no pretraining",
        margin=0.01,
        seeds=Seeds("pretraining"),
        gates=tuple(
            Gate(name, "most-frequent-token guess", _ABOVE_MAJORITY)
            for name in ("BERT-style", "random spans", "no pretraining")
        ),
    ),
    Rule(
        "09-span-corruption-matches-bert-style",
        "span corruption does about as well as BERT-style",
        paper="GLUE 83.49 (random spans) against 82.96 (BERT-style)",
        source="Raffel et al. (2020), Tables 4 and 7",
        metric="mean over the tasks of exact match (token F1 for facts)",
        data=ALL_TASKS,
        compared="random spans",
        baseline="BERT-style",
        factor=0.95,
        seeds=Seeds("pretraining"),
        gates=tuple(
            Gate(name, "most-frequent-token guess", _ABOVE_MAJORITY) for name in ("random spans", "BERT-style")
        ),
    ),
    Rule(
        "09-denoising-beats-prefix-lm",
        "BERT-style denoising pretrains better than the prefix LM",
        paper="GLUE 82.96, CNN/DM ROUGE-2 19.17, SQuAD EM 80.65 (BERT-style) against 80.69, 18.94 and 77.99 "
        "(prefix LM)",
        source="Raffel et al. (2020), Table 4",
        metric="mean over the tasks of exact match (token F1 for facts)",
        data=ALL_TASKS,
        compared="BERT-style",
        baseline="prefix LM",
        margin=0.01,
        seeds=Seeds("pretraining"),
        gates=tuple(Gate(name, "most-frequent-token guess", _ABOVE_MAJORITY) for name in ("BERT-style", "prefix LM")),
    ),
    Rule(
        "09-infilling-beats-rotation",
        "text infilling pretrains far better than document rotation",
        paper="SQuAD F1 90.8, MNLI 84.0 (text infilling) against 77.2, 75.3 (document rotation)",
        source="Lewis et al. (2020), Table 1",
        metric="mean over the tasks of exact match (token F1 for facts)",
        data=ALL_TASKS,
        compared="text infilling",
        baseline="document rotation",
        seeds=Seeds("pretraining"),
        gates=tuple(
            Gate(name, "most-frequent-token guess", _ABOVE_MAJORITY) for name in ("text infilling", "document rotation")
        ),
    ),
    Demonstration(
        "09-t5-architecture",
        "no 1/√d, RMS norm, bias in block 0; T5 1.0's tied output scaled by d^-1/2, T5 1.1's untied and gated",
        paper="the model of section 2.1",
        source="Raffel et al. (2020), section 2.1; transformers' T5",
        shows="the RMS norm by hand, the one bias table per stack and T5 1.1's extra parameters; both "
        "versions are tested equal to transformers in float64",
    ),
    Demonstration(
        "09-t5-architectures-as-masks",
        "encoder-decoder, language model and prefix LM differ in what each position reads",
        paper="GLUE 83.28 (encoder-decoder), 81.82 (prefix LM), 74.70 (language model)",
        source="Raffel et al. (2020), Table 2 and Figure 4",
        shows="the three masks; the architectures are not trained here",
    ),
    Demonstration(
        "09-position-buckets",
        "relative positions in buckets, exact to 8, logarithmic to 128",
        paper="32 buckets, max_distance 128",
        source="Raffel et al. (2020), section 2.1",
        shows="the bucket table; the buckets' effect is not measured",
    ),
    Demonstration(
        "09-bart-architecture",
        "BART is the Transformer with learned positions (two extra rows), and classifies from the last </s>",
        paper="the model of section 2.1 and Figure 3a",
        source="Lewis et al. (2020)",
        shows="our stacks are chapter 02's layers; generation and classification are tested equal to transformers",
    ),
    Demonstration(
        "09-bart-corruptions",
        "BART's five corruptions",
        paper="token masking, token deletion, text infilling, sentence permutation, document rotation",
        source="Lewis et al. (2020), Figure 2",
        shows="each corruption on a document, not compared",
    ),
)
CHECKS = (
    Check(
        "09-span-corruption-example",
        "span corruption of the paper's sentence",
        source="Raffel et al. (2020), Figure 2",
        reference="0 (tokens that differ from the figure's inputs and targets)",
    ),
    Check(
        "09-noise-span-counts",
        "15% noise in spans of mean length 3 at L = 512",
        source="Raffel et al. (2020), section 3.3, and its random_spans_noise_mask",
        reference="77 noise tokens in 26 spans",
    ),
    Check(
        "09-random-spans-not-at-the-end",
        "rolled random spans end the text no more often than a uniform placement",
        source="T5's random_spans_noise_mask(random_roll=True)",
        reference="the uniform share n_noise / L (within 0.025: three standard errors of a share near 0.15 over "
        "2,000 masks)",
        tolerance=0.025,
    ),
    Check(
        "09-target-lengths",
        "BERT-style's target is the whole text",
        source="Raffel et al. (2020), Table 3",
        reference="the documents' mean length",
    ),
    ParameterCount("09-t5-small-parameters", "t5-small", source="Raffel et al. (2020), section 3.7", paper="60M"),
    Check(
        "09-bart-base-parameters",
        "bart-base as transformers builds it",
        source="Lewis et al. (2020); transformers' BartForConditionalGeneration",
        reference="139,420,416 parameters",
    ),
)


def chapter_config(**overrides) -> Chapter09Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), the claims' seeds
    (:func:`lecture_lib.profile.claim_seeds`), and ``overrides``.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    return build_config(Chapter09Config, pick(quick=QUICK, full=FULL), {"seeds": claim_seeds(), **overrides})


# ---------------------------------------------------------------- text-to-text


def fact_example(lang: SyntheticLanguage, rng: random.Random, people: Sequence) -> tuple[list[str], list[str]]:
    """A fact told in words -> its canonical triple: "facts: Anna Berg lives in Oslo ." -> "lives_in Anna Berg Oslo"."""
    person = rng.choice(people)
    relation = rng.choice(("lives_in", "works_for"))
    fact = lang.world.facts(person)[0 if relation == "lives_in" else 1]
    words = lang.fact_sentence(fact, rng).words
    return ["facts:", *words], [fact.relation, *fact.subject.split(), *fact.object.split()]


def text_to_text(
    lang: SyntheticLanguage, task: str, n: int, seed: int, people: Sequence
) -> list[tuple[list[str], list[str]]]:
    """``n`` examples of a task of chapter 05 as (input words, target words), the input led by the task's prefix.

    >>> lang = SyntheticLanguage(0)
    >>> inputs, target = text_to_text(lang, "entailment", 1, seed=0, people=lang.world.people)[0]
    >>> " ".join(inputs), target
    ('premise: Greta Novak is a resident of Port Elm . hypothesis: Greta Novak is a resident of Port Elm .', ['entailment'])

    Taught in: 09_t5_bart ("Text-to-text").
    """
    if task == "acceptability":
        return [
            (["acceptability:", *e.words_a], ["acceptable" if e.label else "unacceptable"])
            for e in acceptability_examples(lang, n, seed, people)
        ]
    if task == "entailment":
        return [
            (["premise:", *e.words_a, "hypothesis:", *e.words_b], ["contradiction" if e.label else "entailment"])
            for e in entailment_examples(lang, n, seed, people)
        ]
    if task == "question":
        return [
            (["question:", *e.question, "context:", *e.passage], e.answer.split())
            for e in qa_examples(lang, n, seed, people)
        ]
    if task == "facts":
        rng = random.Random(seed_of("facts", seed))
        return [fact_example(lang, rng, people) for _ in range(n)]
    raise ValueError(f"expected a task in {TASKS}, got {task!r}")


class TextToTextData:
    """The pretraining documents and the text-to-text tasks (train people for training, unseen names for testing)."""

    def __init__(self, recipe: Chapter09Config) -> None:
        lang = SyntheticLanguage(recipe.language_seed)
        self.train_people, self.test_people = split_people(lang.world)
        docs = lang.documents(recipe.documents, seed=1, sentences_per_document=recipe.sentences_per_document)
        self.documents = [[w for s in doc for w in s.words] for doc in docs]
        self.packed = self.documents if recipe.input_length is None else pack(self.documents, recipe.input_length)
        self.random_roll = recipe.random_roll
        self.train = {t: text_to_text(lang, t, recipe.train_examples, 2, self.train_people) for t in TASKS}
        self.test = {t: text_to_text(lang, t, recipe.eval_examples, 3, self.test_people) for t in TASKS}
        extra = [[*CITIES, *ORGANISATIONS, "lives_in", "works_for", "based_in"]]
        every = [*self.documents, *extra, *(x for t in TASKS for pair in self.train[t] + self.test[t] for x in pair)]
        self.vocab = Vocabulary(every)
        self.content_words = [w for w in self.vocab.words[len(SPECIALS) + NUM_SENTINELS :]]

    def pretraining_batches(
        self, objective: str, batch_size: int, seed: int | None = None
    ) -> Callable[[int], dict[str, torch.Tensor]]:
        """Batch i: packed inputs (:func:`pack`) drawn at random, each corrupted by ``objective``, all from
        :func:`pretraining_stream`; random spans rolled when the recipe says so."""

        def batch_fn(i: int) -> dict[str, torch.Tensor]:
            g = pretraining_stream("ch09 pretraining", objective, seed, i)
            picks = torch.randint(len(self.packed), (batch_size,), generator=g).tolist()
            pairs = [
                apply_objective(
                    objective, self.packed[j], vocabulary=self.content_words, generator=g, random_roll=self.random_roll
                )
                for j in picks
            ]
            return batch_of(pairs, self.vocab)

        return batch_fn

    def noising_batches(
        self, noising: str, batch_size: int, seed: int | None = None
    ) -> Callable[[int], dict[str, torch.Tensor]]:
        """Batch i: documents corrupted by BART's ``noising`` (:func:`bart_corrupt`); the target is the document;
        drawn from :func:`pretraining_stream`."""

        def batch_fn(i: int) -> dict[str, torch.Tensor]:
            g = pretraining_stream("ch09 bart", noising, seed, i)
            picks = torch.randint(len(self.documents), (batch_size,), generator=g).tolist()
            return batch_of(
                [(bart_corrupt(noising, self.documents[j], g), self.documents[j]) for j in picks], self.vocab
            )

        return batch_fn

    def finetuning_batches(self, batch_size: int, seed: int = 0) -> Callable[[int], dict[str, torch.Tensor]]:
        """Batch i: examples of every task mixed in equal shares, as T5's multi-task mixture, drawn by ``seed``."""
        pool = [pair for t in TASKS for pair in self.train[t]]

        def batch_fn(i: int) -> dict[str, torch.Tensor]:
            g = generator("ch09 fine-tuning", seed, i)
            picks = torch.randint(len(pool), (batch_size,), generator=g).tolist()
            return batch_of([pool[j] for j in picks], self.vocab)

        return batch_fn


def pretraining_stream(purpose: str, objective: str, seed: int | None, i: int) -> torch.Generator:
    """The generator of pretraining batch ``i``: one stream per objective when pretraining does not vary
    (``seed`` None, the quick profile's one run per objective), one per objective and seed when it does."""
    return generator(purpose, objective, i) if seed is None else generator(purpose, objective, seed, i)


def pack(documents: Sequence[Sequence[str]], length: int) -> list[list[str]]:
    """The documents' words in one stream, cut into consecutive rows of ``length`` words (the last, shorter
    row dropped), as T5 packs C4 into 512-token inputs: a row may start or end inside a document.

    >>> pack([["a", "b", "c"], ["d", "e"], ["f"]], 4)
    [['a', 'b', 'c', 'd']]

    Taught in: 09_t5_bart ("Random spans").
    """
    if length < 2:
        raise ValueError(f"expected rows of at least 2 words, got length {length}")
    stream = [w for doc in documents for w in doc]
    return [stream[i : i + length] for i in range(0, len(stream) - length + 1, length)]


def noise_at_the_end(texts: Sequence[Sequence[str]], *, random_roll: bool) -> dict[str, float]:
    """Where T5's random spans fall on ``texts`` (text i's mask drawn from ``generator("ch09 end", i)``):

    - ``"at_end"``: the share of masks whose last noise span ends the text (its last word is noise);
    - ``"uniform"``: the share that a uniform placement gives, every word equally likely noise: the mean of
      n_noise / L over the texts (:func:`span_counts`);
    - ``"one_span"``: the share of masks that are a single span.

    Unrolled, T5's mask always ends with noise (``at_end`` 1.0); rolled, ``at_end`` is ``uniform`` up to chance.

    Taught in: 09_t5_bart ("Random spans").
    """
    at_end = uniform = one_span = 0.0
    for i, text in enumerate(texts):
        mask = random_spans_noise_mask(len(text), generator=generator("ch09 end", i), random_roll=random_roll)
        at_end += bool(mask[-1])
        uniform += span_counts(len(text))[0] / len(text)
        one_span += len(noise_spans(mask)) == 1
    return {"at_end": at_end / len(texts), "uniform": uniform / len(texts), "one_span": one_span / len(texts)}


def task_score(task: str, prediction: Sequence[str], target: Sequence[str]) -> float:
    """Exact match (SQuAD's: case, punctuation and articles aside); for "facts", token F1, a ROUGE-1-like credit
    for the words of the triple that are right.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    metric = qa_f1 if task == "facts" else exact_match
    return metric(" ".join(prediction), " ".join(target))


def evaluate_task(model: Seq2Seq, task: str, pairs: Sequence[tuple[list[str], list[str]]], vocab: Vocabulary) -> float:
    """Mean :func:`task_score` of the model's greedy outputs on ``pairs``.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    answers = greedy_answers(model, pairs, vocab)
    return sum(task_score(task, answer, b) for answer, (_, b) in zip(answers, pairs)) / len(pairs)


def unseen_names_written(model: Seq2Seq, data: TextToTextData) -> float:
    """The share of the "facts" test examples whose greedy answer writes the person's name exactly (the triple's
    second and third words). Test people are named only in the test split and in pretraining: fine-tuning never
    asks the decoder to write those words, so a model writes them only if pretraining taught it to.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    pairs = data.test["facts"]
    answers = greedy_answers(model, pairs, data.vocab)
    return sum(answer[1:3] == target[1:3] for answer, (_, target) in zip(answers, pairs)) / len(pairs)


def greedy_answers(model: Seq2Seq, pairs: Sequence[tuple[list[str], list[str]]], vocab: Vocabulary) -> list[list[str]]:
    """The model's greedy output words for each input of ``pairs``, at most as many tokens as the longest target.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    batch = batch_of(pairs, vocab)
    longest = int((batch["labels"] != IGNORE_INDEX).sum(1).max())
    c = model.config
    tokens, _ = greedy_decode(
        model,
        batch["input_ids"].to(module_device(model)),
        longest,
        bos=c.decoder_start_token_id,
        eos=c.eos_token_id,
        pad=c.pad_token_id,
        banned=(),
    )
    return [vocab.decode(row) for row in tokens.tolist()]


def model_loss(model: Seq2Seq, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's own loss on a batch of :func:`batch_of` (cross-entropy of the labels, -100 skipped)."""
    return model(**batch).loss


def tiny_t5(recipe: Chapter09Config, vocab_size: int, seed: int = 0) -> T5ForConditionalGeneration:
    """The recipe's T5, initialised from ``seed``, without dropout (short runs on tiny data gain nothing from it)."""
    torch.manual_seed(seed_of("ch09 model", seed))
    return T5ForConditionalGeneration(
        T5Config(
            vocab_size=vocab_size,
            d_model=recipe.d_model,
            d_kv=recipe.d_kv,
            d_ff=recipe.d_ff,
            num_layers=recipe.num_layers,
            num_heads=recipe.num_heads,
            dropout_rate=0.0,
        )
    )


def hidden_words(objective: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, T) bools over ``batch["labels"]``: the target words that the objective hid from the input. BERT-style
    writes the whole text aligned with its input, so its hidden words are the positions where the input shows
    another token (``<M>`` or a random word); every other objective writes only what the input lacks, so all its
    target words are hidden (the sentinels and ``</s>``, which follow from the input, are not words).

    >>> batch = batch_of([(["a", "<M>", "c"], ["a", "b", "c"])], Vocabulary([["a", "b", "c"]]))
    >>> hidden_words("bert_style", batch).tolist()
    [[False, True, False, False]]

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    labels = batch["labels"]
    if objective == "bert_style":
        inputs = batch["input_ids"]
        width = min(labels.shape[1], inputs.shape[1])
        hidden = torch.zeros_like(labels, dtype=torch.bool)
        hidden[:, :width] = (labels[:, :width] != inputs[:, :width]) & (labels[:, :width] != IGNORE_INDEX)
        return hidden
    return labels >= len(SPECIALS) + NUM_SENTINELS


def hidden_word_accuracy(
    model: T5ForConditionalGeneration,
    data: TextToTextData,
    objective: str,
    batch_size: int = 512,
    batch_index: int = -1,
) -> dict[str, float]:
    """How much of what ``objective`` teaches a pretrained ``model`` has learned: on a batch of ``batch_size``
    documents corrupted afresh (batch ``batch_index`` of :meth:`TextToTextData.pretraining_batches`, never a
    training batch), the share of the hidden words (:func:`hidden_words`) that the model's most likely next
    token gets right, the target's earlier tokens given; beside it ``"unigram"``, the share that always guessing
    the most frequent hidden word gets, and ``"per_text"``, the hidden words per document.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    batch = data.pretraining_batches(objective, batch_size)(batch_index)
    hidden = hidden_words(objective, batch)
    with torch.no_grad():
        logits = model(**to_device(batch, module_device(model))).logits.cpu()
    words = batch["labels"][hidden]
    right = (logits.argmax(-1)[hidden] == words).float().mean()
    return {
        "accuracy": float(right),
        "unigram": Counter(words.tolist()).most_common(1)[0][1] / len(words),
        "per_text": len(words) / batch_size,
    }


def bias_by_offset(model: T5ForConditionalGeneration, offsets: range) -> dict[str, list[list[float]]]:
    """Each head's learned bias b_h(bucket(offset)) over ``offsets``, for the encoder and the decoder: [head][offset].

    Taught in: 09_t5_bart ("The relative position bias").
    """
    out = {}
    for name, stack, bidirectional in (("encoder", model.encoder, True), ("decoder", model.decoder, False)):
        buckets = relative_position_bucket(torch.tensor(list(offsets)), bidirectional=bidirectional)
        out[name] = stack.position_bias().weight.detach()[buckets].T.tolist()
    return out


def finetune_and_score(
    model: Seq2Seq, data: TextToTextData, recipe: Chapter09Config, seed: int = 0
) -> dict[str, float]:
    """Fine-tune ``model`` in place on the task mixture drawn by ``seed``; :func:`task_score` per task on the test.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    train(model, data.finetuning_batches(recipe.finetune.batch_size, seed), model_loss, recipe.finetune)
    with torch.no_grad():
        return {t: evaluate_task(model, t, data.test[t], data.vocab) for t in TASKS}


def pretrain_then_finetune(
    make_model: Callable[[int], Seq2Seq],
    pretraining: Callable[[int | None], Callable[[int], dict]] | None,
    data: TextToTextData,
    recipe: Chapter09Config,
    probe: Callable[[Seq2Seq], dict] | None = None,
) -> tuple[dict, Seq2Seq]:
    """One row of an objectives table, one run per seed of the recipe: fine-tune with that seed's batches and
    score. ``pretraining(seed)`` gives the pretraining batches: with ``recipe.seed_varies == "fine-tuning"``
    one model, ``make_model(0)``, is pretrained once on ``pretraining(None)`` and each seed fine-tunes a copy of
    it; with ``"pretraining"`` each seed pretrains its own, ``make_model(seed)`` on ``pretraining(seed)``.
    Without pretraining (``pretraining`` None) each seed draws its own initialisation, ``make_model(seed)``.

    Returns ``({"pretrain_loss", "seed_scores": [{task: score} per seed], "scores": {task: mean over seeds},
    "names_written": [:func:`unseen_names_written` per seed]}, the last fine-tuned model)``; with a ``probe``,
    the run also holds ``"probe"``: what it returns for the first pretrained model, before fine-tuning (whose
    last loss is ``"pretrain_loss"``).

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """

    def pretrained(seed: int | None) -> tuple[Seq2Seq, float]:
        model = make_model(0 if seed is None else seed)
        history = train(model, pretraining(seed), model_loss, recipe.pretrain)
        return model, history.loss[-1]

    shared = pretrained(None) if pretraining is not None and recipe.seed_varies == "fine-tuning" else None
    first, seed_scores, names = None, [], []
    for seed in recipe.seeds:
        if pretraining is None:
            model, loss = make_model(seed), None
        elif shared is not None:
            model, loss = copy.deepcopy(shared[0]), shared[1]
        else:
            model, loss = pretrained(seed)
        if first is None:
            first = {"pretrain_loss": loss, **({} if probe is None or loss is None else {"probe": probe(model)})}
        seed_scores.append(finetune_and_score(model, data, recipe, seed))
        with torch.no_grad():
            names.append(unseen_names_written(model, data))
    mean = {t: sum(s[t] for s in seed_scores) / len(seed_scores) for t in TASKS}
    return {**first, "seed_scores": seed_scores, "scores": mean, "names_written": names}, model


def mean_task_score(run: dict, tasks: Sequence[str] = TASKS) -> list[float]:
    """Per seed, the mean of a run's scores on ``tasks`` (:func:`pretrain_then_finetune`'s ``seed_scores``).

    >>> mean_task_score({"seed_scores": [{"question": 0.2, "facts": 0.4}]}, ("question", "facts"))
    [0.30000000000000004]

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    unknown = sorted(set(tasks) - set(TASKS))
    if not tasks or unknown:
        raise ValueError(f"expected tasks among {TASKS}, got {list(tasks)}")
    return [sum(scores[t] for t in tasks) / len(tasks) for scores in run["seed_scores"]]


BIAS_OFFSETS = range(-40, 41)  # the offsets of the relative position bias drawn in section 7


def seed_groups(recipe: Chapter09Config) -> list[tuple[int, ...]]:
    """The seeds of a row that one run trains together: each seed alone when each pretrains its own model
    (``seed_varies="pretraining"``), else all of them, fine-tuning copies of one pretrained model.

    >>> [seed_groups(chapter_config(seeds=(0, 1), seed_varies=v)) for v in ("pretraining", "fine-tuning")]
    [[(0,), (1,)], [(0, 1)]]
    """
    return [(seed,) for seed in recipe.seeds] if recipe.seed_varies == "pretraining" else [tuple(recipe.seeds)]


@cached_call
def row_run(recipe: Chapter09Config, family: str, row: str, seeds: tuple[int, ...]) -> dict:
    """One job of a table (:func:`objective_runs`, :func:`pretraining_tables`): :func:`pretrain_then_finetune` of one
    row on ``seeds`` (one group of :func:`seed_groups`). ``family`` ``"t5"``: a tiny T5 and ``row`` an objective or
    ``"no pretraining"``, probed by :func:`hidden_word_accuracy` on the recipe's first seed; the random-spans row
    also keeps :func:`bias_by_offset` of its model after the recipe's last seed. ``family`` ``"bart"``: a tiny BART
    and ``row`` a noising.

    Taught in: 09_t5_bart ("The objectives table at toy scale", "BART's noising functions").
    """
    data, part, size = TextToTextData(recipe), replace(recipe, seeds=seeds), recipe.pretrain.batch_size
    if family == "bart":
        batches = functools.partial(data.noising_batches, row, size)
        return pretrain_then_finetune(lambda seed: tiny_bart(recipe, len(data.vocab), seed), batches, data, part)[0]
    if family != "t5":
        raise ValueError(f"expected the family 't5' or 'bart', got {family!r}")
    batches = None if row == "no pretraining" else functools.partial(data.pretraining_batches, row, size)
    probe = None
    if seeds[0] == recipe.seeds[0]:
        probe = lambda pretrained: hidden_word_accuracy(pretrained, data, row, recipe.probe_documents)  # noqa: E731
    run, model = pretrain_then_finetune(lambda seed: tiny_t5(recipe, len(data.vocab), seed), batches, data, part, probe)
    if row == "random_spans" and seeds[-1] == recipe.seeds[-1]:
        run["bias"] = bias_by_offset(model, BIAS_OFFSETS)
    return run


def _table_calls(recipe: Chapter09Config, family: str) -> list[tuple]:
    rows = ("no pretraining", *recipe.objectives) if family == "t5" else recipe.noisings
    return [(recipe, family, row, seeds) for row in rows for seeds in seed_groups(recipe)]


def _joined(calls: list[tuple], parts: list[dict]) -> dict[str, dict]:
    """The rows of a table from its jobs' parts: the seeds' scores and names in the recipe's order, their means,
    and the first seed's pretraining loss and probe."""
    rows: dict[str, list[dict]] = {}
    for (_, _, row, _), part in zip(calls, parts):
        rows.setdefault(row, []).append(part)
    out = {}
    for row, group in rows.items():
        seed_scores = [scores for part in group for scores in part["seed_scores"]]
        first = {key: group[0][key] for key in ("pretrain_loss", "probe") if key in group[0]}
        out[row] = {
            **first,
            "seed_scores": seed_scores,
            "scores": {t: sum(s[t] for s in seed_scores) / len(seed_scores) for t in TASKS},
            "names_written": [name for part in group for name in part["names_written"]],
        }
    return out


def objective_runs(recipe: Chapter09Config, *, workers: int | None = None) -> dict:
    """T5's objectives table in shape: for each objective of the recipe (and for no pretraining), a tiny T5
    pretrained with it, then fine-tuned on the four tasks at once per seed; :func:`task_score` per task on
    unseen names (:func:`pretrain_then_finetune`); each pretrained model is probed by :func:`hidden_word_accuracy`
    before fine-tuning (the row without pretraining has no ``"probe"``). The jobs (:func:`row_run`, one per row
    and group of :func:`seed_groups`) not yet in the cache run ``workers`` at a time.

    Returns ``{"runs": {objective: {"pretrain_loss", "probe", "seed_scores", "scores", "names_written"}}, "bias":
    {encoder, decoder curves of the random-spans model, after fine-tuning on the last seed}, "offsets": [...],
    "tasks": TASKS}``.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    calls = _table_calls(recipe, "t5")
    parts = compute_all(row_run, calls, workers=workers, desc="T5 runs")
    bias = next((part["bias"] for part in parts if "bias" in part), None)
    runs = _joined(calls, parts)
    return {"runs": runs, "bias": bias, "offsets": list(BIAS_OFFSETS), "tasks": list(TASKS)}


def pretraining_tables(recipe: Chapter09Config, *, workers: int | None = None) -> tuple[dict, dict]:
    """(:func:`objective_runs`, :func:`noising_runs`) of ``recipe``, their jobs not yet in the cache run together,
    ``workers`` at a time (by default one per core), so that neither table waits for the other; the rows without
    pretraining, which only fine-tune, go last.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    calls = _table_calls(recipe, "t5") + _table_calls(recipe, "bart")
    shortest_last = sorted(calls, key=lambda call: call[2] == "no pretraining")  # they fill the pool's end
    compute_all(row_run, shortest_last, workers=workers, desc="pretraining")
    return objective_runs(recipe), noising_runs(recipe)


def gains_in_standard_errors(
    runs: dict, task: str = "question", n: int = 100, baseline: str = "no pretraining"
) -> dict[str, float]:
    """Exercise 2 of chapter 09: each objective's gain over ``baseline`` on ``task``, in standard errors of the
    difference of two mean scores over ``n`` test examples each, (p − p₀) / √((p(1 − p) + p₀(1 − p₀)) / n).
    Above 2: the objective beats the baseline by more than two standard errors. ``runs`` is
    :func:`objective_runs`'s ``"runs"``; ``n`` the recipe's ``eval_examples``.
    """
    p0 = runs[baseline]["scores"][task]
    gains = {}
    for name, run in runs.items():
        if name != baseline:
            p = run["scores"][task]
            error = math.sqrt((p * (1 - p) + p0 * (1 - p0)) / n)
            if error:
                gains[name] = (p - p0) / error
            else:  # both scores 0 or 1: no noise at all
                gains[name] = 0.0 if p == p0 else math.copysign(math.inf, p - p0)
    return gains


def span_corruption_lengths(
    length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0
) -> tuple[int, int]:
    """Exercise 1 of chapter 09: the input and target lengths of T5's span corruption of ``length`` tokens,
    without the end-of-sequence token. With n noise tokens in s spans (:func:`span_counts`), the input keeps
    length - n tokens and adds a sentinel per span; the target holds the n tokens, a sentinel per span and a
    closing one: (length - n + s, n + s + 1).
    """
    noise, spans = span_counts(length, noise_density, mean_noise_span_length)
    return length - noise + spans, noise + spans + 1


def mass_style(
    words: Sequence[str], *, noise_density: float = 0.15, generator: torch.Generator | None = None
) -> tuple[list[str], list[str]]:
    """T5's "MASS-style" row (Table 3): i.i.d. noise words all become ``<M>``, the target is the whole text.

    BERT-style without its 10% random words; exercise 3's solution.

    Taught in: 09_t5_bart ("The objectives of T5's Table 3").
    """
    return bert_style(words, iid_noise_mask(len(words), noise_density=noise_density, generator=generator))


def mass_style_lengths(documents: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean input and target length of :func:`mass_style` over ``documents`` and the share of ``<M>`` inputs.

    Exercise 3's measurement, with section 4's generators (``generator("mass_style", i)`` for document i).
    """
    pairs = [mass_style(doc, generator=generator("mass_style", i)) for i, doc in enumerate(documents)]
    masks = sum(inputs.count("<M>") for inputs, _ in pairs)
    words = sum(len(inputs) for inputs, _ in pairs)
    return {"input": words / len(pairs), "target": sum(len(t) for _, t in pairs) / len(pairs), "masked": masks / words}


def noising_parts(noising: str) -> list[str]:
    """The noising functions of ``noising``, BART's names joined by "+"; a name not in :data:`NOISING` is an error.

    >>> noising_parts("text_infilling+sentence_permutation")
    ['text_infilling', 'sentence_permutation']
    """
    parts = noising.split("+")
    if any(p not in NOISING for p in parts):
        raise ValueError(f"expected noising functions from {sorted(NOISING)} joined by '+', got {noising!r}")
    return parts


def bart_corrupt(noising: str, words: Sequence[str], g: torch.Generator) -> list[str]:
    """A document corrupted by one of BART's functions, or two joined by "+" (sentence permutation first).

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    parts = noising_parts(noising)
    out = sentence_permutation(words, generator=g) if "sentence_permutation" in parts else list(words)
    for part in (p for p in parts if p != "sentence_permutation"):
        masked = {"mask_token": "<M>"} if part in ("token_masking", "text_infilling") else {}
        out = NOISING[part](out, generator=g, **masked)
    return out


def tiny_bart(recipe: Chapter09Config, vocab_size: int, seed: int = 0) -> BartForConditionalGeneration:
    """A BART of the recipe's sizes on the chapter's vocabulary (pad 0; </s> 1 ends and starts decoding).

    Every matrix and the embedding are drawn from N(0, σ²) with σ = ``recipe.bart_init_std``, by default
    d_model^-1/2. BART's own σ = 0.02 suits its widths (768^-1/2 = 0.036, 1024^-1/2 = 0.031); at width 64
    it makes each sublayer's output about (0.02² · 64)^-1 = 40 times smaller than the residual stream it is
    added to, so the post-LN decoder starts as a language model of its own prefix that ignores the encoder
    (in the chapter's short runs it then fine-tuned to nearly one answer per task).

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    torch.manual_seed(seed_of("ch09 bart model", seed))
    init_std = recipe.d_model**-0.5 if recipe.bart_init_std is None else recipe.bart_init_std
    return BartForConditionalGeneration(
        BartConfig(
            vocab_size=vocab_size,
            max_position_embeddings=256,
            d_model=recipe.d_model,
            encoder_layers=recipe.num_layers,
            decoder_layers=recipe.num_layers,
            encoder_attention_heads=recipe.num_heads,
            decoder_attention_heads=recipe.num_heads,
            encoder_ffn_dim=recipe.d_ff,
            decoder_ffn_dim=recipe.d_ff,
            dropout=0.0,
            init_std=init_std,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=1,
            decoder_start_token_id=1,
        )
    )


def cross_attention_ratio(model: BartForConditionalGeneration, batch: dict[str, torch.Tensor]) -> list[float]:
    """Per decoder layer: mean ‖cross-attention output‖ / mean ‖the residual stream it reads and adds to‖ on
    ``batch`` (norms over the width, means over batch and positions). Section 9 measures it at initialisation;
    exercise 4 of chapter 09 after fine-tuning too.

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    ratios = []

    def measure(module, args, output):
        stream, added = args[0], output[0]  # (B, T, C): what the layer reads, what cross-attention adds to it
        ratios.append(float(added.norm(dim=-1).mean() / stream.norm(dim=-1).mean()))

    hooks = [layer.encoder_attn.register_forward_hook(measure) for layer in model.model.decoder.layers]
    try:
        with torch.no_grad():
            model(**to_device(batch, module_device(model)))
    finally:
        for hook in hooks:
            hook.remove()
    return ratios


def most_frequent_answers(model: Seq2Seq, data: TextToTextData) -> dict[str, tuple[str, float]]:
    """Exercise 4 of chapter 09: each task's most frequent greedy answer on its test examples, and the share of
    the examples given it (1.0: the model answers every input alike).
    """
    out = {}
    with torch.no_grad():
        for task in TASKS:
            answers = [" ".join(words) for words in greedy_answers(model, data.test[task], data.vocab)]
            answer, count = Counter(answers).most_common(1)[0]
            out[task] = (answer, count / len(answers))
    return out


def noising_runs(recipe: Chapter09Config, *, workers: int | None = None) -> dict:
    """BART's Table 1 in shape: a tiny BART pretrained per noising function of the recipe, then fine-tuned per
    seed and scored as :func:`objective_runs` does, its jobs (:func:`row_run`) not yet in the cache ``workers`` at
    a time.

    Returns ``{"runs": {noising: {"pretrain_loss", "seed_scores", "scores", "names_written"}}, "tasks": TASKS}``.

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    calls = _table_calls(recipe, "bart")
    parts = compute_all(row_run, calls, workers=workers, desc="BART runs")
    return {"runs": _joined(calls, parts), "tasks": list(TASKS)}


def majority_baseline(recipe: Chapter09Config) -> dict[str, float]:
    """The score (:func:`task_score`) of always answering a task's most frequent training target: the one to beat.

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    data = TextToTextData(recipe)
    out = {}
    for task in TASKS:
        targets = [tuple(b) for _, b in data.train[task]]
        guess = max(set(targets), key=targets.count)
        out[task] = sum(task_score(task, guess, b) for _, b in data.test[task]) / len(data.test[task])
    return out
