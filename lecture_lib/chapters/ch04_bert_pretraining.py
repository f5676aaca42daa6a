"""Chapter 04, BERT pretraining: the chapter's sizes, its two small pretrained BERTs (trained once, then read
from the disk cache) and its ablations.

Two texts. The Python documentation (real English, ``QUICK``/``FULL``) is what the chapter's data pipeline
cuts, masks and pairs, and a BERT pretrained on it for the quick profile's 400 steps learns word
frequencies and little more. Chapter 05's synthetic language (``SYNTHETIC_QUICK``/``SYNTHETIC_FULL``: about
300 words, a grammar with agreement) is learned within the same budget well enough to show a BERT using
context, and so carries the experiments: the masking ablation (BERT's Table 8, probed on held-out text), the
objectives (Table 5: no NSP, a left-to-right LM) and the sizes (Table 6), each pretrained with section 7's recipe
and fine-tuned over three seeds on two tagging tasks: chapter 05's context entities with held-out names (where
pretraining pays) and entities told apart only by the word on their right (where the direction of attention
decides).

The synthetic language comes from :mod:`lecture_lib.chapters.course_language`, as in every chapter.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The masking ablation",
"BERT's ablations: objectives and size", "Bidirectional or left to right").
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from typing import Iterable, Sequence

import torch

from lecture_lib.cache import Deferred, build_all, cached_call, compute_all
from lecture_lib.chapters import course_language
from lecture_lib.config import build_config, merge_dicts
from lecture_lib.data.synthetic import CITIES, ORGANISATIONS, Person, Sentence, SyntheticLanguage
from lecture_lib.data.treebank import entity_spans
from lecture_lib.finetuning.finetune import Task, finetune_from
from lecture_lib.finetuning.harder_tasks import COMPANY_SUFFIXES
from lecture_lib.finetuning.tasks import NER_LABELS, TaggingExample, encode_tagging, split_people
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertConfig, BertModel, training_flops_per_token
from lecture_lib.models.heads import BertForTokenClassification
from lecture_lib.models.left_to_right import left_to_right_head
from lecture_lib.objectives.masking import MaskingStrategy
from lecture_lib.pretraining import (
    PretrainConfig,
    PretrainingData,
    PretrainResult,
    cached_pretraining,
    evaluate,
    evaluate_at_masks,
    left_to_right_loss,
)
from lecture_lib.pretraining import main as pretraining_main
from lecture_lib.profile import claim_seeds, current, pick
from lecture_lib.reproductions import Check, Demonstration, Gate, ParameterCount, Rule, Seeds
from lecture_lib.runtime import seed_of
from lecture_lib.train import cpu_threads

# ``quick`` (the notebook, one CPU core, about 10 s): a 2-layer BERT of width H = 64 with 4 heads and a
# 2,000-token vocabulary, 400 steps of 16 pairs of 64 tokens (about 2 passes over the corpus's 200k
# prose tokens: enough to show what English needs, which is far more). At that size dropout only slows learning, and BERT's initialisation, N(0, 0.02) for a
# width of 768, is too small for a width of 64: we use 0.1. Matrices this small are multiplied fastest
# by one CPU thread (two mostly wait for each other, badly so on a busy machine). ``full`` (a GPU):
# BERT-mini's shape, 4 layers of H = 256 with an 8,000-token vocabulary, 128-token pairs, 4,000 steps
# of 64 pairs (about 90 passes over the corpus: it is small), BERT's dropout and initialisation.
# Unnamed fields keep the defaults of BertConfig, DataConfig, ObjectiveConfig and PRETRAIN_DEFAULTS.
QUICK = dict(
    model=dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.1,
    ),
    data=dict(vocab_size=2000, seq_len=64),
    train=dict(steps=400, batch_size=16, lr=2e-3, warmup_steps=40, eval_every=100, num_threads=1),
)
FULL = dict(
    model=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    data=dict(vocab_size=8000, seq_len=128),
    train=dict(steps=4000, batch_size=64, lr=5e-4, warmup_steps=400, eval_every=250),
)


def chapter_config(**overrides) -> PretrainConfig:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`) with ``overrides``, nested dicts merged
    field by field: ``chapter_config(train=dict(steps=100), objective=dict(pairs=None))``.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return build_config(PretrainConfig, pick(quick=QUICK, full=FULL), overrides)


# The synthetic language (chapter 05's, read there), pretrained with the same recipe. ``quick``: the
# documentation model's shape, 600 steps of 32 pairs on 2,000 documents of three sentences (about 20 s on
# one core); a 700-token vocabulary, which keeps nearly every word of the language whole (1,000 would
# keep all: the trainer stops at 722), so that fill-mask can name whole words. Tables 5 and 6 pretrain each
# row with this recipe and fine-tune it with chapter 05's seeded budget (100 steps of 16, three seeds). ``full``:
# BERT-mini's width, 4 layers, 4,000 steps on 20,000 documents.
SYNTHETIC_QUICK = dict(
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
        data=dict(vocab_size=700, seq_len=64, eval_pairs=256),
        train=dict(steps=600, batch_size=32, lr=2e-3, warmup_steps=60, eval_every=100, num_threads=1),
    ),
    documents=2000,
)
SYNTHETIC_FULL = dict(
    pretrain=dict(
        model=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
        data=dict(vocab_size=700, seq_len=64, eval_pairs=1024),
        train=dict(steps=4000, batch_size=128, lr=5e-4, warmup_steps=400, eval_every=500),
    ),
    documents=20_000,
)


def synthetic_config(**overrides) -> course_language.CourseLanguageConfig:
    """The synthetic language's recipe (:data:`SYNTHETIC_QUICK` or :data:`SYNTHETIC_FULL` over chapter 05's
    fine-tuning sizes), with ``overrides`` as :func:`lecture_lib.chapters.course_language.chapter_config`
    takes them: ``synthetic_config(pretrain=dict(train=dict(steps=100)), documents=500)``.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return course_language.chapter_config(**merge_dicts(pick(quick=SYNTHETIC_QUICK, full=SYNTHETIC_FULL), overrides))


def synthetic_bert(
    config: course_language.CourseLanguageConfig | None = None, *, progress: bool = True
) -> PretrainResult:
    """A BERT pretrained on the synthetic language with :func:`synthetic_config`'s recipe (cached).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return course_language.synthetic_pretrained_bert(config or synthetic_config(), progress=progress)


# The masking ablation's runs: the synthetic language's model and data, fewer steps each.
ABLATION_QUICK = dict(pretrain=dict(train=dict(steps=150, warmup_steps=15, eval_every=0)))
ABLATION_FULL = dict(pretrain=dict(train=dict(steps=2000, warmup_steps=200, eval_every=0)))


def ablation_config(**overrides) -> course_language.CourseLanguageConfig:
    """The masking ablation's runs (:data:`ABLATION_QUICK` or :data:`ABLATION_FULL` over :func:`synthetic_config`),
    with ``overrides``.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    return synthetic_config(**merge_dicts(pick(quick=ABLATION_QUICK, full=ABLATION_FULL), overrides))


def small_pretrained_bert(config: PretrainConfig | None = None, *, progress: bool = True) -> PretrainResult:
    """The chapter's small pretrained BERT: trained once per recipe, then read from the disk cache.

    The first call trains (``chapter_config()``: about 10 seconds on one CPU core in the quick
    profile) inside ``<cache>/<name>.partial`` (checkpointed: an interrupted run resumes; the name made
    from the call by :func:`~lecture_lib.pretraining.cached_pretraining`) and renames it to ``<cache>/<name>``
    when done; later calls load it. Training is seeded, so a cold cache rebuilds the same model. ``result.path`` is a Hugging Face
    checkpoint directory: ``BertModel.from_pretrained(result.path)`` gives the bare encoder.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    config = config or chapter_config()
    return cached_pretraining(config, progress=progress)


PROBES = {
    "[MASK]": MaskingStrategy(1.0, 0.0, 0.0),
    "same": MaskingStrategy(0.0, 1.0, 0.0),
    "random": MaskingStrategy(0.0, 0.0, 1.0),
}
# The rules the notebook compares: BERT's, and always [MASK], which never shows the model a real token at
# a selected position.
MASKING_RULES = ("80/10/10", "100/0/0")


def masking_ablation(
    config: course_language.CourseLanguageConfig | None = None,
    *,
    rules: Sequence[str] = MASKING_RULES,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """One model per masking rule (MLM only, the synthetic language; the models are cached), each probed on
    the same held-out positions in three ways.

    Returns ``{rule: {probe: MLM accuracy}}`` where the probe says what the selected held-out positions show
    the model: ``[MASK]`` (the pretraining condition BERT optimises for), ``same`` (the true token, as
    every token is at fine-tuning time: can the model still say what is there?) and ``random`` (a wrong
    token to correct); plus ``unigram``, the most frequent token's accuracy on the same positions. Cached
    as JSON, named from the call.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    return _masking_ablation(*masking_ablation_call(config, rules=rules), progress=progress)


def masking_ablation_call(
    config: course_language.CourseLanguageConfig | None = None, *, rules: Sequence[str] = MASKING_RULES
) -> tuple:
    """The call of the cached run that :func:`masking_ablation` makes: MLM only, ``config`` (default
    :func:`ablation_config`), the rules as a tuple.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    return _with_pretrain(config or ablation_config(), dict(pairs=None)), tuple(rules)


@cached_call(ignore=("progress",))
def _masking_ablation(
    config: course_language.CourseLanguageConfig, rules: tuple[str, ...], progress: bool = True
) -> dict:
    corpus = course_language.synthetic_pretraining_data(config)
    results = {}
    for rule in rules:
        model = course_language.synthetic_pretrained_bert(
            _with_pretrain(config, dict(masking=rule)), progress=progress
        ).model
        with cpu_threads(config.pretrain.train.num_threads):
            results[rule] = {
                probe: evaluate(model, corpus.eval_batches(strategy))["mlm_accuracy"]
                for probe, strategy in PROBES.items()
            }
    results["unigram"] = frequency_guess(corpus)
    return results


def frequency_guess(corpus: PretrainingData) -> float:
    """The held-out accuracy of always guessing the training text's most frequent token, on the positions the
    run's own rule masks (:meth:`~lecture_lib.pretraining.PretrainingData.eval_batches`): the floor a masked LM
    that learned no context sits at.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    labels = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in corpus.eval_batches()])
    return float((labels == corpus.most_frequent_token()).float().mean())


# Liu et al.'s static against dynamic masking where it can matter: a small corpus seen for many epochs, so that
# a static mask repeats. ``quick``: 400 documents (half as many held out), 300 steps of 32 pairs, about 20 epochs
# (some 15 s a run on one core); ``full``: 4,000 documents, 1,000 steps of 128, about 25 epochs. MLM alone.
_SCHEDULE_DATA = dict(data=dict(held_out_fraction=0.5), objective=dict(pairs=None))
SCHEDULE_QUICK = dict(
    documents=400, pretrain=dict(**_SCHEDULE_DATA, train=dict(steps=300, warmup_steps=30, eval_every=0))
)
SCHEDULE_FULL = dict(
    documents=4000, pretrain=dict(**_SCHEDULE_DATA, train=dict(steps=1000, warmup_steps=100, eval_every=0))
)
# The schedules compared: a fresh mask every epoch (RoBERTa), and one mask drawn once (BERT's rule, without the
# ten copies that made each of its masks come back only four times)
MASK_SCHEDULES = {"dynamic": dict(dynamic_masking=True), "static": dict(dynamic_masking=False, static_copies=1)}


def masking_schedules(
    seeds: Sequence[int] | None = None, *, workers: int | None = None, **overrides
) -> dict[str, list[float]]:
    """Static against dynamic masking: for each of :data:`MASK_SCHEDULES` and each pretraining seed (default
    :func:`~lecture_lib.profile.claim_seeds`), the held-out masked-LM accuracy of a model pretrained with that
    schedule on the same small corpus (:data:`SCHEDULE_QUICK` or :data:`SCHEDULE_FULL` with ``overrides``, as
    :func:`synthetic_config` takes them; the seed draws the corpus, the weights and the masks); and ``"guess"``,
    the :func:`frequency_guess` of each seed's corpus. Each run is cached on its own; the runs not yet cached go
    ``workers`` at a time (:func:`~lecture_lib.cache.compute_all`).

    Taught in: 04_bert_pretraining ("Static against dynamic masking").
    """
    rows = compute_all(
        _schedule_run, masking_schedule_calls(seeds, **overrides), workers=workers, desc="masking schedules"
    )
    runs = {name: [row["accuracy"] for row in rows[k :: len(MASK_SCHEDULES)]] for k, name in enumerate(MASK_SCHEDULES)}
    return {**runs, "guess": [row["guess"] for row in rows[:: len(MASK_SCHEDULES)]]}


@cached_call(ignore=("progress",))
def _schedule_run(config: course_language.CourseLanguageConfig, progress: bool = True) -> dict[str, float]:
    corpus = course_language.synthetic_pretraining_data(config)
    model = course_language.synthetic_pretrained_bert(config, progress=progress).model
    with cpu_threads(config.pretrain.train.num_threads):
        accuracy = evaluate(model, corpus.eval_batches())["mlm_accuracy"]
    return {"accuracy": accuracy, "guess": frequency_guess(corpus)}


def schedule_downstream(
    seeds: Sequence[int] | None = None, *, workers: int | None = None, **overrides
) -> dict[str, list[list[float]]]:
    """The models of :func:`masking_schedules` (the same seeds and ``overrides``) downstream: for each of
    :data:`MASK_SCHEDULES` and each pretraining seed, the entity F1 on context entities per fine-tuning seed
    (:func:`downstream_scores`); and ``"no pretraining"``, the same network from random weights, fine-tuned on
    the same task cut by that seed's vocabulary. Each row is cached on its own; the rows not yet cached run in
    the workers of :func:`~lecture_lib.cache.compute_all`.

    Taught in: 04_bert_pretraining ("Static against dynamic masking").
    """
    scores = compute_all(
        _schedule_f1,
        schedule_downstream_calls(seeds, **overrides),
        workers=workers,
        desc="masking schedules downstream",
    )
    names = [*MASK_SCHEDULES, "no pretraining"]
    return {name: scores[k :: len(names)] for k, name in enumerate(names)}


def masking_schedule_calls(seeds: Sequence[int] | None = None, **overrides) -> list[tuple]:
    """The calls of the cached runs that :func:`masking_schedules` makes: each seed, each of :data:`MASK_SCHEDULES`.

    Taught in: 04_bert_pretraining ("Static against dynamic masking").
    """
    return [(config, False) for config in _schedule_configs(seeds, overrides, MASK_SCHEDULES.values())]


def schedule_downstream_calls(seeds: Sequence[int] | None = None, **overrides) -> list[tuple]:
    """The calls of the cached runs that :func:`schedule_downstream` makes: for each seed, each of
    :data:`MASK_SCHEDULES` pretrained, then the network from random weights (in the dynamic run's vocabulary).

    Taught in: 04_bert_pretraining ("Static against dynamic masking").
    """
    rows = [*((objective, True) for objective in MASK_SCHEDULES.values()), (MASK_SCHEDULES["dynamic"], False)]
    configs = _schedule_configs(seeds, overrides, [objective for objective, _ in rows])
    return [(config, pretrained) for config, (_, pretrained) in zip(configs, itertools.cycle(rows))]


def _schedule_configs(
    seeds: Sequence[int] | None, overrides: dict, objectives: Iterable[dict]
) -> list[course_language.CourseLanguageConfig]:
    """The schedules' recipe (:data:`SCHEDULE_QUICK` or :data:`SCHEDULE_FULL` with ``overrides``) for each pretraining
    seed (default :func:`~lecture_lib.profile.claim_seeds`), then each of ``objectives`` within a seed."""
    seeds = claim_seeds() if seeds is None else seeds
    recipe = merge_dicts(pick(quick=SCHEDULE_QUICK, full=SCHEDULE_FULL), overrides)
    objectives = list(objectives)
    return [
        _with_pretrain(synthetic_config(**merge_dicts(recipe, dict(pretrain=dict(seed=seed)))), objective)
        for seed in seeds
        for objective in objectives
    ]


@cached_call(ignore=("progress",))
def _schedule_f1(config: course_language.CourseLanguageConfig, pretrained: bool, progress: bool = False) -> list[float]:
    """One job of :func:`schedule_downstream`. Cached as JSON, named from the call."""
    result = course_language.synthetic_pretrained_bert(config, progress=progress)
    task = downstream_tasks(result.tokenizer, config)["context entities"]
    encoder = result.model.bert if pretrained else config.pretrain.model
    return downstream_scores({"context entities": task}, encoder, config)["context entities"]


# BERT's Table 5 rows, as (pair task, language model): MLM + NSP, MLM alone, a left-to-right LM alone.
TABLE5_ROWS = {
    "BERT (MLM + NSP)": ("nsp", "masked"),
    "No NSP": (None, "masked"),
    "LTR & No NSP": (None, "left-to-right"),
}
# Table 6's sizes as (layers L, width H, heads A), smallest first: the last one is section 7's shape.
TABLE6_SIZES = {"quick": ((1, 32, 2), (2, 32, 2), (2, 64, 4)), "full": ((2, 128, 2), (2, 256, 4), (4, 256, 4))}
# The two downstream tasks of the tables, both tagging, both scored by entity F1 over the fine-tuning seeds, and the
# rows scored on both (every row is scored on the first); "No pretraining" is scored on both as well.
DOWNSTREAM_TASKS = ("context entities", "right-context entities")
BOTH_TASKS_ROWS = ("No NSP", "LTR & No NSP")
# The language's one verb whose object may be a place or a company (TRANSITIVE_VERBS' "visits", object kinds L
# and O), in the present and the past.
VISIT_VERBS = ("visits", "visited")


def right_context_entity_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None
) -> list[TaggingExample]:
    """ "P visits X ." where X is named after a surname of ``people``: a place (the bare surname, ``B-LOC``) or a
    company (the surname and a company word, ``B-ORG I-ORG``), each with probability 1/2. Up to and including the
    surname the two readings are the same words, so the surname's tag is told only by the word on its right.

    >>> for e in right_context_entity_examples(SyntheticLanguage(0), 3, seed=0):
    ...     print(" ".join(f"{w}/{t}" if t != "O" else w for w, t in zip(e.words, e.tags)))
    Rosa/B-PER Brandt/I-PER visits Brandt/B-ORG Works/I-ORG .
    Greta/B-PER Novak/I-PER visited Eklund/B-ORG Motors/I-ORG .
    Farid/B-PER Varga/I-PER visits Okafor/B-ORG Foods/I-ORG .

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    people = people or lang.world.people
    surnames = sorted({p.name.split(" ")[-1] for p in people})
    rng = random.Random(seed_of("right-context entities", seed))
    examples = []
    for _ in range(n):
        first, last = rng.choice(people).name.split(" ")
        verb, surname = rng.choice(VISIT_VERBS), rng.choice(surnames)
        if rng.random() < 0.5:
            place, tags = [surname], ["B-LOC"]
        else:
            place, tags = [surname, rng.choice(COMPANY_SUFFIXES)], ["B-ORG", "I-ORG"]
        examples.append(TaggingExample([first, last, verb, *place, "."], ["B-PER", "I-PER", "O", *tags, "O"]))
    return examples


def best_left_to_right_tags(examples: Sequence[TaggingExample]) -> list[list[str]]:
    """What the best tagger that reads each word's left side only can say about
    :func:`right_context_entity_examples`: every entity right, except the place or company, whose type the left
    side of its first word does not tell; the tagger gives it the more frequent of ``LOC`` and ``ORG`` in
    ``examples``, over all its words. Its entity F1, (sentences + entities of that type) / (2 × sentences), is a
    left-to-right model's ceiling on the task.

    >>> one = TaggingExample(["Anna", "Berg", "visits", "Dahl", "."], ["B-PER", "I-PER", "O", "B-LOC", "O"])
    >>> two = TaggingExample(["Anna", "Berg", "visits", "Dahl", "Air", "."], ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O"])
    >>> best_left_to_right_tags([one, one, two])[2]
    ['B-PER', 'I-PER', 'O', 'B-LOC', 'I-LOC', 'O']

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    place = [e.tags[3] for e in examples]
    if not place or set(place) - {"B-LOC", "B-ORG"}:
        raise ValueError("expected examples of right_context_entity_examples: a place or a company as fourth word")
    kind = max(("LOC", "ORG"), key=lambda k: place.count(f"B-{k}"))
    return [[*e.tags[:3], f"B-{kind}", *[f"I-{kind}"] * (len(e.tags) - 5), "O"] for e in examples]


# Subjects told only by their predicate: a bare surname is a company ("Weber employs ...") or a person called by
# their surname ("Weber works for ..."). The wordings are the language's fact templates; fine-tuning shows one
# predicate per kind, the test others, with no word in common: what "is based in" or "has a home in" says about its
# subject, only pretraining (where the language's companies and people say it) can teach.
SUBJECT_PREDICATES = {
    "train": {"ORG": ("employs {P}",), "PER": ("works for {O}",)},
    "test": {
        "ORG": ("is based in {C}", "has an office in {C}"),
        "PER": ("is a resident of {C}", "has a home in {C}", "is employed by {O}", "has a job at {O}"),
    },
}


def subject_by_predicate_examples(
    lang: SyntheticLanguage, n: int, seed: int, people: Sequence[Person] | None = None, split: str = "train"
) -> list[TaggingExample]:
    """ "X <predicate> ." where X is a surname of ``people`` standing alone, a company (``B-ORG``) or a person
    (``B-PER``) with probability 1/2 each, and the predicate one of :data:`SUBJECT_PREDICATES` ``[split]`` for that
    kind. Only the subject is tagged; only the words on its right tell its kind.

    >>> for e in subject_by_predicate_examples(SyntheticLanguage(0), 3, seed=0, split="test"):
    ...     print(" ".join(f"{w}/{t}" if t != "O" else w for w, t in zip(e.words, e.tags)))
    Castell/B-ORG is based in New Harbor .
    Berg/B-PER has a home in Port Elm .
    Garcia/B-PER is a resident of Oslo .

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    if split not in SUBJECT_PREDICATES:
        raise ValueError(f"expected split 'train' or 'test', got {split!r}")
    people = people or lang.world.people
    surnames = sorted({p.name.split(" ")[-1] for p in people})
    rng = random.Random(seed_of("subject by predicate", seed))
    examples = []
    for _ in range(n):
        kind = rng.choice(("ORG", "PER"))
        fillers = {"P": rng.choice(people).name, "C": rng.choice(CITIES), "O": rng.choice(ORGANISATIONS)}
        predicate = rng.choice(SUBJECT_PREDICATES[split][kind]).format(**fillers).split(" ")
        words = [rng.choice(surnames), *predicate, "."]
        examples.append(TaggingExample(words, [f"B-{kind}"] + ["O"] * (len(words) - 1)))
    return examples


def downstream_tasks(tokenizer, config: course_language.CourseLanguageConfig) -> dict[str, Task]:
    """The tables' two tagging tasks (:data:`DOWNSTREAM_TASKS`), trained on sentences about some people and
    tested on sentences about others, encoded by ``tokenizer``: chapter 05's *context entities* (surnames that
    also name places and companies, told apart by the words around them, mostly on their left) and
    :func:`right_context_entity_examples` (told apart only by the word on their right). Both are scored as
    chapter 05's context entities, by entity F1.

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size").
    """
    lang = SyntheticLanguage(config.language_seed)
    train_people, test_people = split_people(lang.world)
    tasks = {
        "context entities": course_language.build_harder_tasks(tokenizer, config, names=("context_ner",))["context_ner"]
    }
    train, test = (
        right_context_entity_examples(lang, n, config.seed + offset, people)
        for n, offset, people in ((config.train_examples, 1, train_people), (config.test_examples, 2, test_people))
    )
    encode = lambda examples: encode_tagging(examples, tokenizer, config.max_length)  # noqa: E731
    tasks["right-context entities"] = Task(
        "context_ner", BertForTokenClassification, len(NER_LABELS), encode(train), encode(test), test
    )
    return tasks


def pretrained_row(
    config: course_language.CourseLanguageConfig, language_model: str = "masked", *, progress: bool = True
) -> PretrainResult:
    """The synthetic language's BERT pretrained with ``config`` (cached) as a masked LM (:func:`synthetic_bert`: MLM,
    with NSP where ``config`` pairs sentences) or, with ``language_model="left-to-right"``, as a left-to-right LM:
    the same network, data and steps, each position predicting the next token through a causal mask
    (:func:`~lecture_lib.pretraining.left_to_right_loss`).

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size").
    """
    if language_model == "masked":
        return synthetic_bert(config, progress=progress)
    if language_model != "left-to-right":
        raise ValueError(f"expected language_model 'masked' or 'left-to-right', got {language_model!r}")
    return cached_pretraining(
        config.pretrain,
        Deferred(course_language.synthetic_pretraining_data, config),
        progress=progress,
        loss=left_to_right_loss,
    )


def downstream_scores(
    tasks: dict[str, Task],
    encoder: BertModel | BertConfig,
    config: course_language.CourseLanguageConfig,
    *,
    left_to_right: bool = False,
) -> dict[str, list[float]]:
    """Entity F1 of ``encoder`` (pretrained weights, or a config for random ones) fine-tuned on each task, one score
    per fine-tuning seed of ``config.seeds`` (``config.seeded_finetune``'s budget). With ``left_to_right`` the
    tagger keeps a causal mask (:func:`~lecture_lib.models.left_to_right.left_to_right_head`), as Devlin et al.
    fine-tuned their left-to-right model.

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size", "Bidirectional or left to right").
    """
    scores = {}
    for name, task in tasks.items():
        if left_to_right:
            task = replace(task, head=left_to_right_head(task.head))
        scores[name] = [
            finetune_from(task, encoder, config.seeded_finetune, seed, dropout=config.finetune_dropout).scores["f1"]
            for seed in config.seeds
        ]
    return scores


@cached_call(ignore=("progress",))
def _table_row(
    config: course_language.CourseLanguageConfig,
    language_model: str | None,
    names: tuple[str, ...],
    progress: bool = False,
) -> dict:
    """One row of Tables 5 and 6 (a job of :func:`pretraining_ablations`): pretrain (cached; ``None``: no
    pretraining, the same network from random weights), score the masked LM on held-out text, fine-tune on the
    tasks ``names`` of :func:`downstream_tasks`. Cached as JSON, named from the call.

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size").
    """
    if language_model is None:  # the masked LM's vocabulary: every row's tokenizer cuts the same words alike
        tasks = downstream_tasks(synthetic_bert(config, progress=progress).tokenizer, config)
        return {"downstream": downstream_scores({name: tasks[name] for name in names}, config.pretrain.model, config)}
    result = pretrained_row(config, language_model, progress=progress)
    tasks = downstream_tasks(result.tokenizer, config)
    tasks = {name: tasks[name] for name in names}
    row = {"parameters": sum(p.numel() for p in result.model.bert.parameters())}
    if language_model == "masked":
        held_out = course_language.synthetic_pretraining_data(
            _with_pretrain(config, dict(pairs=None)), result.tokenizer
        )
        batches = held_out.eval_batches()
        with cpu_threads(config.pretrain.train.num_threads):
            row |= {
                **evaluate(result.model, batches),
                **evaluate_at_masks(
                    result.model, batches, held_out.tokenizer.mask_token_id, held_out.most_frequent_token()
                ),
            }
    row["downstream"] = downstream_scores(
        tasks, result.model.bert, config, left_to_right=language_model == "left-to-right"
    )
    return row


def _with_pretrain(
    config: course_language.CourseLanguageConfig, objective: dict | None = None, model: dict | None = None
):
    pretrain = config.pretrain
    pretrain = replace(
        pretrain,
        objective=replace(pretrain.objective, **(objective or {})),
        model=replace(pretrain.model, **(model or {})),
    )
    return replace(config, pretrain=pretrain)


def _sized(
    config: course_language.CourseLanguageConfig, layers: int, width: int, heads: int
) -> course_language.CourseLanguageConfig:
    """``config`` (MLM + NSP) with L layers of width H, A heads and a feed-forward width of 4H."""
    return _with_pretrain(
        config,
        dict(pairs="nsp"),
        dict(num_hidden_layers=layers, hidden_size=width, num_attention_heads=heads, intermediate_size=4 * width),
    )


def pretraining_ablations(
    config: course_language.CourseLanguageConfig | None = None,
    *,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> dict[str, dict[str, dict]]:
    """BERT's Tables 5 and 6 in shape, on the synthetic language with section 7's recipe (default
    :func:`synthetic_config`: the same data and steps for every row). ``"objectives"``: the rows of
    :data:`TABLE5_ROWS`, and ``"No pretraining"``, the same network fine-tuned from random weights.
    ``"sizes"``: one MLM + NSP BERT per (L, H, A) of ``sizes`` (default :data:`TABLE6_SIZES`). Each row holds its
    ``downstream`` entity F1 per fine-tuning seed (:func:`downstream_scores`) on context entities, and on
    right-context entities too for the rows the notebook compares there (:data:`BOTH_TASKS_ROWS`),
    and for a masked LM its held-out ``mlm_loss``, ``mask_accuracy`` and ``unigram_at_masks`` (at the positions
    showing ``[MASK]``), and ``parameters``. Each row is cached on its own, named from its call; the rows not yet
    cached run in the workers of :func:`~lecture_lib.cache.compute_all`.

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size", "Bidirectional or left to right").
    """
    jobs = ablation_calls(config, sizes=sizes)
    rows = compute_all(_table_row, list(jobs.values()), workers=workers, desc="pretraining rows")
    tables = {"objectives": {}, "sizes": {}}
    for (table, name), row in zip(jobs, rows):
        tables[table][name] = row
    return tables


def ablation_calls(
    config: course_language.CourseLanguageConfig | None = None, *, sizes: Sequence[tuple[int, int, int]] | None = None
) -> dict[tuple[str, str], tuple]:
    """The calls of the cached rows that :func:`pretraining_ablations` makes, keyed by (table, row name).

    Taught in: 04_bert_pretraining ("BERT's ablations: objectives and size").
    """
    config = config or synthetic_config()
    sizes = [tuple(size) for size in sizes or TABLE6_SIZES[current()]]
    context = DOWNSTREAM_TASKS[:1]
    calls = {
        ("objectives", name): (
            _with_pretrain(config, dict(pairs=pairs)),
            lm,
            DOWNSTREAM_TASKS if name in BOTH_TASKS_ROWS else context,
        )
        for name, (pairs, lm) in TABLE5_ROWS.items()
    }
    calls[("objectives", "No pretraining")] = (config, None, DOWNSTREAM_TASKS)
    return calls | {("sizes", "/".join(map(str, size))): (_sized(config, *size), "masked", context) for size in sizes}


# The rows of the direction rule as (language model, budget of left_to_right_steps), pretrained on the "No NSP"
# documents, each fine-tuned with full attention on subject_task; "no pretraining" is the network from random
# weights. The rule compares the first two, at equal steps; the two other budgets are views, not judged, and
# run in the full profile only (in quick they would cost 66 of the chapter's 421 CPU-seconds).
DIRECTION_ROWS = {
    "masked LM": ("masked", "equal steps"),
    "left-to-right LM": ("left-to-right", "equal steps"),
    "left-to-right LM, equal FLOPs": ("left-to-right", "equal FLOPs"),
    "left-to-right LM, equal predicted tokens": ("left-to-right", "equal predicted tokens"),
    "no pretraining": (None, "equal steps"),
}
DIRECTION_VIEWS = ("left-to-right LM, equal FLOPs", "left-to-right LM, equal predicted tokens")


def direction_rows() -> dict[str, tuple[str | None, str]]:
    """The rows :func:`direction_runs` trains in the active profile: :data:`DIRECTION_ROWS`, less the views of
    :data:`DIRECTION_VIEWS` in the quick profile.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    judged = {name: row for name, row in DIRECTION_ROWS.items() if name not in DIRECTION_VIEWS}
    return pick(quick=judged, full=DIRECTION_ROWS)


def predictions_per_step(config: course_language.CourseLanguageConfig) -> dict[str, float]:
    """What a step of ``config``'s recipe (without sentence pairs) gives each objective, counted on its first
    batch: the tokens each predicts (``"masked LM"``: the selected ones; ``"left-to-right"``: every next token)
    and ``"FLOPs ratio"``, the left-to-right LM's training FLOPs per token over the masked LM's (its output layer
    runs at every position, the masked LM's at the selected ones: :func:`training_flops_per_token`).

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    batch = course_language.synthetic_pretraining_data(_with_pretrain(config, dict(pairs=None))).batch(0)
    tokens, seq_len = int(batch["attention_mask"].sum()), batch["input_ids"].shape[1]
    masked = int((batch["labels"] != IGNORE_INDEX).sum())
    model = config.pretrain.model
    flops_masked = training_flops_per_token(model, seq_len, masked_fraction=masked / tokens)
    return {
        "masked LM": masked,
        "left-to-right": int(batch["attention_mask"][:, 1:].sum()),
        "FLOPs ratio": training_flops_per_token(model, seq_len) / flops_masked,
    }


def left_to_right_steps(config: course_language.CourseLanguageConfig) -> dict[str, int]:
    """The left-to-right LM's pretraining steps against the masked LM's ``config.pretrain.train.steps``: the same
    (``"equal steps"``, the paper's comparison), as many FLOPs (``"equal FLOPs"``), and as many predicted tokens
    (``"equal predicted tokens"``), by :func:`predictions_per_step`; one step at least.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    counts, steps = predictions_per_step(config), config.pretrain.train.steps
    return {
        "equal steps": steps,
        "equal FLOPs": max(1, round(steps / counts["FLOPs ratio"])),
        "equal predicted tokens": max(1, round(steps * counts["masked LM"] / counts["left-to-right"])),
    }


def subject_task(tokenizer, config: course_language.CourseLanguageConfig) -> Task:
    """:func:`subject_by_predicate_examples` as a tagging task: trained on the train predicates and the surnames
    of some people, tested on the test predicates and the surnames of others, scored by entity F1.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    lang = SyntheticLanguage(config.language_seed)
    train_people, test_people = split_people(lang.world)
    train, test = (
        subject_by_predicate_examples(lang, n, config.seed + offset, people, split)
        for n, offset, people, split in (
            (config.train_examples, 1, train_people, "train"),
            (config.test_examples, 2, test_people, "test"),
        )
    )
    encode = lambda examples: encode_tagging(examples, tokenizer, config.max_length)  # noqa: E731
    return Task("context_ner", BertForTokenClassification, len(NER_LABELS), encode(train), encode(test), test)


def direction_runs(
    config: course_language.CourseLanguageConfig | None = None,
    seeds: Sequence[int] | None = None,
    *,
    workers: int | None = None,
) -> dict[str, list[list[float]]]:
    """Bidirectional against left to right, both fine-tuned as BERT is, with full attention: for each row of
    :func:`direction_rows` (its steps from :func:`left_to_right_steps`) and each pretraining seed (default
    :func:`~lecture_lib.profile.claim_seeds`), the entity F1 on :func:`subject_task` per fine-tuning seed.
    ``config`` (default :func:`synthetic_config`) gives the recipe, without sentence pairs; each row is cached on
    its own, and the rows not yet cached run in the workers of :func:`~lecture_lib.cache.compute_all`.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    scores = compute_all(_direction_row, direction_calls(config, seeds), workers=workers, desc="direction rows")
    rows = direction_rows()
    return {name: scores[k :: len(rows)] for k, name in enumerate(rows)}


def direction_calls(
    config: course_language.CourseLanguageConfig | None = None, seeds: Sequence[int] | None = None
) -> list[tuple]:
    """The calls of the cached rows that :func:`direction_runs` makes: for each seed, each of :func:`direction_rows`.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    config = _with_pretrain(config or synthetic_config(), dict(pairs=None))
    seeds = claim_seeds() if seeds is None else seeds
    budgets = left_to_right_steps(config)
    return [
        (_with_steps(replace(config, pretrain=replace(config.pretrain, seed=seed)), budgets[budget]), language_model)
        for seed in seeds
        for language_model, budget in direction_rows().values()
    ]


def _with_steps(config: course_language.CourseLanguageConfig, steps: int) -> course_language.CourseLanguageConfig:
    """``config`` pretrained for ``steps``, a tenth of them warm-up as in the recipe; unchanged at its own steps."""
    train = config.pretrain.train
    if steps == train.steps:
        return config
    return replace(
        config, pretrain=replace(config.pretrain, train=replace(train, steps=steps, warmup_steps=max(1, steps // 10)))
    )


@cached_call(ignore=("progress",))
def _direction_row(
    config: course_language.CourseLanguageConfig, language_model: str | None, progress: bool = False
) -> list[float]:
    """One job of :func:`direction_runs`. Cached as JSON, named from the call. Every row cuts words with the
    vocabulary learned from the documents; "no pretraining" takes it from the masked LM, as in Table 5."""
    if language_model is None:
        tokenizer, encoder = synthetic_bert(config, progress=progress).tokenizer, config.pretrain.model
    else:
        result = pretrained_row(config, language_model, progress=progress)
        tokenizer, encoder = result.tokenizer, result.model.bert
    return downstream_scores({"subjects": subject_task(tokenizer, config)}, encoder, config)["subjects"]


# The rows of the NSP rule, each pretrained with section 7's recipe on the same documents, then fine-tuned on chapter
# 05's three-way inference (a sentence-pair task on held-out people): MLM with NSP whose NotNext segments come from
# documents about one of the same people, MLM alone (the direction rule's masked LM), the network from random weights.
NSP_ROWS = ("MLM + NSP", "MLM only", "no pretraining")


def documents_sharing_a_person(documents: Sequence[Sequence[Sentence]]) -> list[list[int]]:
    """For each document, the other documents that name one of its people (a ``PER`` entity); a document whose
    people appear nowhere else gets every other document.

    >>> docs = SyntheticLanguage(0).documents(400, seed=0, sentences_per_document=3)
    >>> sharing = documents_sharing_a_person(docs)
    >>> for d in (0, sharing[0][0]):
    ...     print(d, " | ".join(s.text for s in docs[d]))
    0 Sven Dahl is employed by Silverline Rail . | Silverline Rail employs Sven Dahl . | Sven Dahl has a job at Silverline Rail .
    28 Felix Ueda lives in Dakar . | Felix Ueda works for Harbor Air . | Sven Dahl has a job at Silverline Rail .

    Taught in: 04_bert_pretraining ("NSP on a sentence-pair task").
    """
    named = [
        {" ".join(s.words[i:j]) for s in doc for (i, j), kind in entity_spans(s) if kind == "PER"} for doc in documents
    ]
    by_person: dict[str, set[int]] = {}
    for d, people in enumerate(named):
        for person in people:
            by_person.setdefault(person, set()).add(d)
    everyone = range(len(documents))
    return [
        sorted(set().union(*(by_person[p] for p in people)) - {d}) or [j for j in everyone if j != d]
        for d, people in enumerate(named)
    ]


def same_people_pretraining_data(config: course_language.CourseLanguageConfig) -> PretrainingData:
    """:func:`~lecture_lib.chapters.course_language.synthetic_pretraining_data` (its documents, vocabulary and
    masking) with each NotNext segment taken from a document about one of the same people
    (:func:`documents_sharing_a_person`): who is named no longer tells a NotNext, only what is said of them.

    Taught in: 04_bert_pretraining ("NSP on a sentence-pair task").
    """
    documents = course_language.synthetic_documents(config)
    train, test = ([[s.text for s in doc] for doc in docs] for docs in documents)
    sources = tuple(documents_sharing_a_person(docs) for docs in documents)
    return PretrainingData(config.pretrain, train, test, negative_sources=sources)


def nsp_runs(
    config: course_language.CourseLanguageConfig | None = None,
    seeds: Sequence[int] | None = None,
    *,
    workers: int | None = None,
) -> dict[str, list[list[float]]]:
    """MLM + NSP against MLM alone on a sentence-pair task: for each row of :data:`NSP_ROWS` and each pretraining
    seed (default :func:`~lecture_lib.profile.claim_seeds`), the three-way inference accuracy per fine-tuning seed
    (chapter 05's budget for the task).
    ``config`` (default :func:`synthetic_config`) gives the recipe; each row is cached on its own, and the rows not
    yet cached run in the workers of :func:`~lecture_lib.cache.compute_all`.

    Taught in: 04_bert_pretraining ("NSP on a sentence-pair task").
    """
    scores = compute_all(_nsp_row, nsp_calls(config, seeds), workers=workers, desc="NSP rows")
    return {row: scores[k :: len(NSP_ROWS)] for k, row in enumerate(NSP_ROWS)}


def nsp_calls(
    config: course_language.CourseLanguageConfig | None = None, seeds: Sequence[int] | None = None
) -> list[tuple]:
    """The calls of the cached rows that :func:`nsp_runs` makes: for each seed, each of :data:`NSP_ROWS`.

    Taught in: 04_bert_pretraining ("NSP on a sentence-pair task").
    """
    config = config or synthetic_config()
    seeds = claim_seeds() if seeds is None else seeds
    return [(replace(config, pretrain=replace(config.pretrain, seed=seed)), row) for seed in seeds for row in NSP_ROWS]


def bert_pretraining_jobs(config: course_language.CourseLanguageConfig | None = None) -> list[tuple]:
    """Every cached run that sections 8 and 9 read, as ``(function, call)``, with ``config`` (default
    :func:`synthetic_config`) as the tables' recipe: first the runs that pretrain a model, then those that only
    fine-tune one that another run pretrains (:func:`_only_fine_tunes`), so that no worker waits on another's model.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    jobs = [
        *((_direction_row, call) for call in direction_calls(config)),
        *((_nsp_row, call) for call in nsp_calls(config)),
        *((_table_row, call) for call in ablation_calls(config).values()),
        (_masking_ablation, masking_ablation_call()),
        *((_schedule_run, call) for call in masking_schedule_calls()),
        *((_schedule_f1, call) for call in schedule_downstream_calls()),
    ]
    return sorted(jobs, key=lambda job: _only_fine_tunes(*job))  # stable: each part keeps its order


def _only_fine_tunes(fn, call: tuple) -> bool:
    """Whether a job of :func:`bert_pretraining_jobs` fine-tunes a model that another of its jobs pretrains: the rows
    from random weights (which read a pretrained row's vocabulary), the NSP rule's "MLM only" (the direction rule's
    masked LM), the tables' rows without NSP (the direction rule's seed-0 models) and the schedules' fine-tuning."""
    if fn is _direction_row:
        return call[1] is None
    if fn is _nsp_row:
        return call[1] != "MLM + NSP"
    if fn is _table_row:
        return call[1] is None or call[0].pretrain.objective.pairs is None
    return fn is _schedule_f1


def train_bert_pretraining_runs(
    config: course_language.CourseLanguageConfig | None = None, *, workers: int | None = None
) -> int:
    """Train every run of :func:`bert_pretraining_jobs` not yet in the cache, ``workers`` at a time in one pool
    (:func:`~lecture_lib.cache.build_all`), so that no section waits with a core idle for its last run; the
    sections then read their runs from the cache. Returns how many runs were trained.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return build_all(bert_pretraining_jobs(config), workers=workers, desc="pretraining")


@cached_call(ignore=("progress",))
def _nsp_row(config: course_language.CourseLanguageConfig, row: str, progress: bool = False) -> list[float]:
    """One job of :func:`nsp_runs`. Cached as JSON, named from the call. "no pretraining" cuts words with the
    masked LM's vocabulary, which the NSP model's documents also give."""
    if row == "MLM + NSP":
        config = _with_pretrain(config, dict(pairs="nsp"))
        result = cached_pretraining(config.pretrain, Deferred(same_people_pretraining_data, config), progress=progress)
    else:
        result = synthetic_bert(_with_pretrain(config, dict(pairs=None)), progress=progress)
    encoder = config.pretrain.model if row == "no pretraining" else result.model.bert
    task = course_language.build_harder_tasks(result.tokenizer, config, names=("inference",))["inference"]
    budget = config.seeded_finetune_for("inference")
    return [
        finetune_from(task, encoder, budget, seed, dropout=config.finetune_dropout).scores["accuracy"]
        for seed in config.seeds
    ]


def pretraining_seeds() -> tuple[int, ...]:
    """The pretraining seeds of the claims about a pretraining recipe (Tables 5 and 6, section 7's models): every
    seed of ``$LECTURE_SEEDS`` in the full profile, the first alone in the quick one, where those claims show as
    mechanism only (:data:`_ONE_PRETRAINING_RUN`).

    Taught in: 04_bert_pretraining ("What we saw").
    """
    return pick(quick=claim_seeds()[:1], full=claim_seeds())


DEVLIN = "Devlin et al. (2019)"
_ONE_PRETRAINING_RUN = (
    "one pretraining run per row in the quick profile (the fine-tuning seeds do not vary what the claim is about)"
)
TABLE_F1 = "entity F1 on context entities with held-out names, the mean of 3 fine-tuning seeds"
F1_MARGIN = 0.01  # one point of F1: a smaller difference is not called a gain
ACCURACY_MARGIN = 0.01  # one point of accuracy, likewise
LEARNED = 0.05  # five points (F1 or accuracy) over the same network from random weights: the row learned
CLAIMS = (
    Demonstration(
        "04-mlm-selection-rates",
        "MLM selects 15% and replaces 80/10/10",
        paper="15%; 80/10/10",
        source=f"{DEVLIN}, section 3.1",
        shows="our rule's rates, counted over 200k tokens",
    ),
    Rule(
        "04-dynamic-masking",
        "dynamic masking beats a static mask that repeats",
        paper="SQuAD 2.0 78.3 → 78.7, MNLI 84.3 → 84.0, SST-2 92.5 → 92.9 (static: 10 copies, each mask seen 4 times)",
        source="Liu et al. (2019), Table 1",
        metric="held-out masked-LM accuracy",
        data="a small corpus of the synthetic language seen for about 20 epochs, one static copy (each mask seen "
        "about 20 times)",
        compared="dynamic masking",
        baseline="static masking",
        margin=0.02,  # two points: about twice the standard error of the held-out positions' accuracy
        seeds=Seeds("pretraining"),
        gates=(
            Gate("dynamic masking", "most-frequent-token guess", 0.05),
            Gate("static masking", "most-frequent-token guess", 0.05),
        ),
    ),
    Rule(
        "04-dynamic-masking-downstream",
        "dynamic masking beats a static mask that repeats, downstream",
        paper="SQuAD 2.0 78.3 → 78.7, MNLI 84.3 → 84.0, SST-2 92.5 → 92.9 (static: 10 copies, each mask seen 4 times)",
        source="Liu et al. (2019), Table 1",
        metric=TABLE_F1,
        data="the models of the rule above, fine-tuned",
        compared="dynamic masking",
        baseline="static masking",
        margin=F1_MARGIN,
        seeds=Seeds("pretraining"),
        gates=(
            Gate("dynamic masking", "no pretraining", LEARNED),
            Gate("static masking", "no pretraining", LEARNED),
        ),
    ),
    Rule(
        "04-pretraining-teaches-context-english",
        "pretraining teaches context (English text)",
        paper="BERT-base's held-out MLM perplexity 3.99",
        source=f"{DEVLIN}, Table 6",
        metric="accuracy at [MASK]",
        data="held-out Python documentation",
        compared="the pretrained BERT",
        baseline="the most-frequent-token guess",
        factor=2,
        seeds=Seeds("pretraining"),
        quick=_ONE_PRETRAINING_RUN,
    ),
    Rule(
        "04-pretraining-teaches-context",
        "pretraining teaches context (the synthetic language)",
        paper="BERT-base's held-out MLM perplexity 3.99",
        source=f"{DEVLIN}, Table 6",
        metric="accuracy at [MASK]",
        data="held-out documents of the synthetic language",
        compared="the pretrained BERT",
        baseline="the most-frequent-token guess",
        factor=2,
        seeds=Seeds("pretraining"),
        quick=_ONE_PRETRAINING_RUN,
    ),
    Demonstration(
        "04-mask-only-hurts-features",
        "always [MASK] (100/0/0) hurts the feature-based use",
        paper="NER feature-based 94.0 (100/0/0) vs 94.9 (80/10/10)",
        source=f"{DEVLIN}, Table 8",
        shows="what each rule's model names when shown the true token: 100/0/0 never asks its head about "
        "a visible token, so it sits at the frequency level by construction; the feature-based "
        "task itself is not run",
    ),
    Rule(
        "04-nsp-helps",
        "NSP helps downstream on a sentence-pair task",
        paper="No NSP −0.5 MNLI, −3.5 QNLI",
        source=f"{DEVLIN}, Table 5",
        metric="accuracy of chapter 05's three-way inference (premise, hypothesis) on held-out people, the mean of 3 "
        "fine-tuning seeds",
        data="the synthetic language, the same documents and steps; NSP's NotNext segments about the same people",
        compared="MLM + NSP",
        baseline="MLM only",
        margin=ACCURACY_MARGIN,
        seeds=Seeds("pretraining"),
        gates=(Gate("MLM + NSP", "no pretraining", LEARNED), Gate("MLM only", "no pretraining", LEARNED)),
    ),
    Demonstration(
        "04-left-to-right-tagger-cannot-see-right",
        "a tagger fine-tuned left to right cannot use the word on its right",
        paper="LTR & No NSP −10.7 SQuAD, −9.2 MRPC, −2.3 MNLI, fine-tuned with the causal mask",
        source=f"{DEVLIN}, Table 5",
        shows="on right-context entities a causal tagger's F1 is bounded by the left-side-only ceiling, which the "
        "fine-tuning mask decides, not the pretraining objective",
    ),
    Rule(
        "04-bidirectional-beats-left-to-right",
        "a masked LM beats a left-to-right LM downstream, both fine-tuned with full attention",
        paper="LTR & No NSP −10.7 SQuAD, −9.2 MRPC, −2.3 MNLI",
        source=f"{DEVLIN}, Table 5",
        metric="entity F1 of a bare surname whose kind (person or company) only a predicate on its right tells, the "
        "test's predicates never seen in fine-tuning, held-out names; the mean of 3 fine-tuning seeds",
        data="the synthetic language, the same documents, steps and batches for both",
        compared="masked LM",
        baseline="left-to-right LM",
        margin=F1_MARGIN,
        seeds=Seeds("pretraining"),
        gates=(Gate("masked LM", "no pretraining", LEARNED), Gate("left-to-right LM", "no pretraining", LEARNED)),
    ),
    Rule(
        "04-bigger-lowers-perplexity",
        "bigger models reach lower held-out perplexity",
        paper="5.84 (3 layers) … 3.23 (24 layers)",
        source=f"{DEVLIN}, Table 6",
        metric="held-out MLM loss, its least drop from one size to the next larger",
        data="the synthetic language, equal steps",
        compared="the least drop",
        baseline=0.0,
        seeds=Seeds("pretraining"),
        quick=_ONE_PRETRAINING_RUN,
    ),
    Rule(
        "04-bigger-is-better-downstream",
        "bigger models score higher downstream",
        paper="MNLI-m 77.9 (3 layers, H = 768) … 86.6 (24 layers, H = 1024)",
        source=f"{DEVLIN}, Table 6",
        metric=f"{TABLE_F1}, its least gain from one size to the next larger",
        data="the synthetic language, equal steps",
        compared="the least gain",
        baseline=0.0,
        seeds=Seeds("pretraining"),
        quick=_ONE_PRETRAINING_RUN,
        gates=(Gate("the weakest size", "no pretraining", LEARNED),),
    ),
    Rule(
        "04-pretraining-pays-downstream",
        "pretraining pays downstream",
        paper="every GLUE task above pre-BERT models trained on the task alone",
        source=f"{DEVLIN}, Tables 1 and 6",
        metric=TABLE_F1,
        data="the synthetic language",
        compared="MLM + NSP",
        baseline="no pretraining",
        margin=F1_MARGIN,
        seeds=Seeds("pretraining"),
        quick=_ONE_PRETRAINING_RUN,
    ),
    Demonstration(
        "04-bidirectional-leaks",
        "a bidirectional LM cannot be trained left to right",
        paper="each word would see itself",
        source=f"{DEVLIN}, section 3.1",
        shows="the held-out next-token loss of a full-attention model with the answer in view against "
        "hidden: it learns to copy",
    ),
    Rule(
        "04-contextual-vectors-separate-senses",
        "contextual vectors separate word senses",
        paper="occurrences of a word in the same sense lie closer",
        source="Peters et al. (2018); Ethayarajh (2019)",
        metric="mean cosine of one word's last-layer vectors",
        data="six sentences, three for each of two senses of one word",
        compared="pairs of the same sense",
        baseline="pairs of different senses",
        seeds=Seeds("none", 1),
    ),
    Demonstration(
        "04-pretraining-cost",
        "pretraining BERT-base costs thousands of dollars",
        paper="64 V100 for 79 h, 1,507 kWh, 3,751–12,571 USD",
        source="Strubell et al. (2019), Table 3",
        shows="the arithmetic of the paper's figures: BERT-base's FLOPs in V100-hours at 30% utilisation",
    ),
)
CHECKS = (
    ParameterCount("04-base-parameters", "BERT-base", source=f"{DEVLIN}, section 3", paper="110M"),
    Check(
        "04-model-matches-transformers",
        "a layer is attention and a feed-forward, each with a residual and "
        "LayerNorm; the MLM decoder is the embedding table",
        source=f"{DEVLIN}; Vaswani et al. (2017)",
        reference="0, the largest difference to `transformers`' BertModel",
        tolerance=1e-5,
    ),
)


def main(argv: list[str] | None = None) -> PretrainResult:
    """``python -m lecture_lib.chapters.ch04_bert_pretraining --out DIR [--profile full] [--train.steps N] ...``:
    the chapter's recipe from the command line (see :func:`lecture_lib.pretraining.main`).

    Taught in: 04_bert_pretraining ("A training loop for real runs").
    """
    return pretraining_main(argv, defaults=chapter_config, prog="python -m lecture_lib.chapters.ch04_bert_pretraining")


def initial_sublayer_scale(hidden_size: int, initializer_range: float, samples: int = 4096) -> float:
    """Standard deviation of a freshly initialised layer's attention output projection (H × H, entries of standard
    deviation ``initializer_range``) applied to unit-variance vectors: about ``initializer_range`` · √H.
    Exercise 1 of 04_bert_pretraining.
    """
    config = BertConfig(
        vocab_size=8,
        hidden_size=hidden_size,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        initializer_range=initializer_range,
    )
    with torch.random.fork_rng(devices=[]):  # a seeded draw that leaves the caller's random state as it was
        torch.manual_seed(0)
        dense = BertModel(config).encoder.layer[0].attention.output.dense
    x = torch.randn(samples, hidden_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return float((x @ dense.weight.T).std())


def mask_accuracy_on(config: PretrainConfig, held_out: PretrainingData) -> dict[str, float]:
    """The chapter's BERT pretrained with ``config`` (cached), scored at ``[MASK]`` on ``held_out``'s evaluation
    batches: a model pretrained at 40% masking scored on the 15% test of section 7 (exercise 2 of
    04_bert_pretraining), or any recipe on the same test (exercise 1).
    """
    model = small_pretrained_bert(config, progress=False).model
    with cpu_threads(config.train.num_threads):
        return evaluate_at_masks(
            model, held_out.eval_batches(), held_out.tokenizer.mask_token_id, held_out.most_frequent_token()
        )


# Section 11's two senses of "bank": three sentences by a river, then three about a business.
BANK_SENTENCES = (
    "we sat on the bank of the river and watched the boats .",
    "the river overflowed its bank after the storm .",
    "fish gathered near the muddy bank of the stream .",
    "she opened an account at the bank downtown .",
    "the bank raised its interest rates again .",
    "he asked the bank for a loan to buy a house .",
)


def sense_similarities(vectors: torch.Tensor, senses: Sequence[int]) -> tuple[float, float]:
    """Mean cosine similarity of the occurrences' vectors (S, H) between pairs of the same sense (not a vector
    with itself) and between pairs of different senses (section 11; exercise 5 of 04_bert_pretraining takes
    the mean of the last four layers as the vectors).

    >>> sense_similarities(torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]]), [0, 0, 1])
    (1.0, 0.0)
    """
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    cosine = unit @ unit.T
    labels = torch.tensor(senses)
    same = labels[:, None] == labels[None, :]
    return float(cosine[same & ~torch.eye(len(labels), dtype=torch.bool)].mean()), float(cosine[~same].mean())


# BERT-base's pretraining (Devlin et al., 2019, appendix A.2): 1,000,000 steps of 256 sequences, 90% of the
# steps with 128 tokens and the last 10% with 512; tokens per sequence length.
BERT_BASE_TOKENS = {128: 0.9 * 1_000_000 * 256 * 128, 512: 0.1 * 1_000_000 * 256 * 512}


def bert_base_pretraining_flops() -> float:
    """Training FLOPs of BERT-base's pretraining run: :func:`training_flops_per_token` over
    :data:`BERT_BASE_TOKENS`.

    Taught in: 04_bert_pretraining ("How fast").
    """
    return sum(training_flops_per_token(BertConfig(), length) * n for length, n in BERT_BASE_TOKENS.items())


def gpu_hours_and_kwh(
    flops: float, peak: float, utilisation: float, watts: float, pue: float = 1.0
) -> tuple[float, float]:
    """GPU-hours of ``flops`` at ``utilisation`` of ``peak`` FLOP/s, and the energy in kWh at ``watts`` per GPU
    times the data centre's ``pue``: ``hours = flops / (peak · utilisation) / 3600``. Exercise 6 redoes it for
    an H100.

    Taught in: 04_bert_pretraining ("How fast").
    """
    gpu_hours = flops / (peak * utilisation) / 3600
    return gpu_hours, gpu_hours * watts / 1000 * pue


def gap_neighbour_probe(
    batch: dict[str, torch.Tensor], special_token_ids: Sequence[int], *, delete: bool = True, pad_token_id: int = 0
) -> dict[str, torch.Tensor]:
    """The masking ablation's fourth probe (exercise 4 of 04_bert_pretraining): every selected position gets its
    true token back, and the tokens next to a selected position (not selected, not special) become the targets,
    each shown as itself; with ``delete`` the selected positions are removed and the rows shortened (padded
    at the end with ``pad_token_id``). The new batch is on the batch's device.

    For ``[CLS] a [MASK] c d [SEP]`` with b selected at position 2: ``delete=False`` shows ``[CLS] a b c d [SEP]``,
    ``delete=True`` shows ``[CLS] a c d [SEP] [PAD]``; in both the targets are a and c.
    """
    device = batch["input_ids"].device
    specials = torch.tensor(list(special_token_ids), device=device)
    rows = []
    for ids, mask, types, labels in zip(
        batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], batch["labels"]
    ):
        n = int(mask.sum())
        selected = labels[:n] != IGNORE_INDEX
        true = torch.where(selected, labels[:n], ids[:n])
        next_to_gap = torch.zeros(n, dtype=torch.bool, device=device)
        next_to_gap[:-1] |= selected[1:]
        next_to_gap[1:] |= selected[:-1]
        target = next_to_gap & ~selected & ~torch.isin(true, specials)
        keep = ~selected if delete else torch.ones(n, dtype=torch.bool, device=device)
        rows.append((true[keep], types[:n][keep], torch.where(target, true, IGNORE_INDEX)[keep]))
    width = batch["input_ids"].shape[1]

    def padded(i, fill):
        return torch.stack([torch.nn.functional.pad(r[i], (0, width - len(r[i])), value=fill) for r in rows])

    return {
        "input_ids": padded(0, pad_token_id),
        "token_type_ids": padded(1, 0),
        "labels": padded(2, IGNORE_INDEX),
        "attention_mask": torch.stack([(torch.arange(width, device=device) < len(r[0])).long() for r in rows]),
    }


if __name__ == "__main__":
    main()
