"""The course's language: the synthetic language's sizes, a BERT pretrained on it (trained once, then read
from the disk cache), and the tasks and sentences built from that language. Chapter 05 teaches it; chapters 04,
07, 08, 10, 11 and 12 read it from here, so that no chapter imports another chapter.

Which pretraining: the tasks are written in the synthetic language, so the encoder is pretrained on
documents of that language (chapter 04's recipe: a WordPiece vocabulary learned from the text,
masked LM with 80/10/10, next-sentence prediction, AdamW with warm-up and linear decay). A BERT
pretrained on the documentation corpus would share neither vocabulary nor domain with the tasks,
and in the quick profile's minute of pretraining it could not learn enough English to help;
pretraining on the language itself is the small-scale version of what BERT did (pretrain on text of
the kind the tasks use), and what it learns (agreement, the names of the world, where names occur)
is exactly what the tasks test. The world's people are split: fine-tuning sees some of them, the test
sets name only the others, whom only pretraining has shown the model.

Taught in: 05_bert_finetuning ("A BERT pretrained on the language", "Four task shapes").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

from lecture_lib.cache import Deferred
from lecture_lib.config import build_dataclass, built_by, merge_dicts
from lecture_lib.data.synthetic import Sentence, SyntheticLanguage
from lecture_lib.finetuning.finetune import Task, finetune_budget, with_steps
from lecture_lib.finetuning.harder_tasks import (
    NLI_LABELS,
    choice_examples,
    context_ner_examples,
    nli_examples,
    similarity_examples,
    unanswerable_qa_examples,
)
from lecture_lib.finetuning.tasks import (
    ACCEPTABILITY_LABELS,
    ENTAILMENT_LABELS,
    NER_LABELS,
    Tokenizer,
    acceptability_examples,
    encode_choices,
    encode_classification,
    encode_qa,
    encode_regression,
    encode_tagging,
    entailment_examples,
    ner_examples,
    object_swap_entailment_examples,
    qa_examples,
    split_people,
)
from lecture_lib.models.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from lecture_lib.pretraining import (
    PretrainConfig,
    PretrainingData,
    PretrainResult,
    cached_pretraining,
)
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.runtime import seed_of
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer
from lecture_lib.train import TrainConfig

TASK_NAMES = ("acceptability", "entailment", "ner", "qa")
HARDER_TASK_NAMES = ("acceptability", "inference", "context_ner", "unanswerable_qa", "similarity", "choice")


@dataclass
class CourseLanguageConfig:
    """The chapter's sizes: the pretraining recipe, the synthetic data, and the fine-tuning budget per task
    (:func:`~lecture_lib.finetuning.finetune.finetune_budget`) with the heads' dropout while fine-tuning.

        Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """

    pretrain: PretrainConfig
    finetune: TrainConfig = built_by(finetune_budget)
    finetune_dropout: float = 0.0  # the encoder's and the head's dropout while fine-tuning (new_head's dropout)
    language_seed: int = 0
    documents: int = 3000  # synthetic documents for pretraining
    sentences_per_document: int = 3
    train_examples: int = 1000  # per task
    test_examples: int = 400
    head_lr: float = 1e-2  # feature-based taggers and cheap fine-tuning: few or freshly initialised weights
    max_length: int = 64
    people_per_passage: int = 2
    sentences_per_passage: int = 3
    seed: int = 0  # of the task examples
    seeds: tuple[int, ...] = (0, 1, 2)  # seeds of the runs a claim repeats (LECTURE_SEEDS, by chapter_config)
    table_finetune: TrainConfig | None = None  # the budget of those runs (None: ``finetune``'s)
    tagger_finetune: TrainConfig | None = None  # feature-based taggers' steps (None: the seeded runs')

    def __post_init__(self) -> None:
        for name in (
            "documents",
            "sentences_per_document",
            "train_examples",
            "test_examples",
            "max_length",
            "people_per_passage",
            "sentences_per_passage",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"expected {name} ≥ 1, got {getattr(self, name)}")
        if not 0 <= self.finetune_dropout < 1:
            raise ValueError(f"expected finetune_dropout in [0, 1), got {self.finetune_dropout}")
        if not self.head_lr > 0:
            raise ValueError(f"expected head_lr > 0, got {self.head_lr}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"expected distinct seeds, at least one, got {list(self.seeds)}")

    @property
    def seeded_finetune(self) -> TrainConfig:
        """The fine-tuning budget of the runs repeated over :attr:`seeds`."""
        return self.table_finetune or self.finetune

    def seeded_finetune_for(self, task: str) -> TrainConfig:
        """:attr:`seeded_finetune` for the task named ``task``: three times the steps for three-way inference, the
        one task that compares two sentences word by word, warming up over a tenth of them as every budget.

        Taught in: 05_bert_finetuning ("Pretrained or from scratch").
        """
        budget = self.seeded_finetune
        return with_steps(budget, 3 * budget.steps) if task == "inference" else budget

    @property
    def feature_finetune(self) -> TrainConfig:
        """The budget of the taggers trained on a frozen encoder's features (section "Feature-based or
        fine-tuned"), at ``head_lr``: they train few weights on precomputed features, so steps are cheap."""
        return dataclasses.replace(self.tagger_finetune or self.seeded_finetune, lr=self.head_lr)


# ``quick`` trains without dropout (at these budgets it only slows learning), the seeded runs with AdamW's fused
# kernel (the same updates up to rounding, often faster), all on one CPU thread: for matrices this small a
# second thread mostly waits, and on a busy machine it can make a run several times slower. ``full`` is
# BERT-mini's width.
QUICK = dict(
    pretrain=dict(
        model=dict(
            hidden_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=128,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        data=dict(vocab_size=600, seq_len=64, eval_pairs=256),
        train=dict(steps=800, batch_size=64, lr=2e-3, warmup_steps=80, eval_every=0, num_threads=1),
    ),
    finetune=dict(steps=150, batch_size=32, lr=1e-3, num_threads=1),
    table_finetune=dict(steps=100, batch_size=16, fused=True),
    tagger_finetune=dict(steps=300, batch_size=32, fused=True),
    documents=4000,
    train_examples=1000,
    test_examples=400,
)
FULL = dict(
    pretrain=dict(
        model=dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024),
        data=dict(vocab_size=1000, seq_len=128, eval_pairs=1024),
        train=dict(steps=5000, batch_size=128, lr=5e-4, warmup_steps=500, eval_every=500),
    ),
    finetune=dict(steps=2000, batch_size=32, lr=2e-4),
    documents=50_000,
    train_examples=8000,
    test_examples=1000,
)


def chapter_config(**overrides) -> CourseLanguageConfig:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), the seeds from ``LECTURE_SEEDS``
    (:func:`~lecture_lib.profile.claim_seeds`), with ``overrides``; ``pretrain`` and
    ``finetune`` overrides are dicts merged into the profile's (``pretrain`` nested as a
    :class:`PretrainConfig`: ``pretrain=dict(train=dict(steps=1600))``; ``finetune`` built by
    :func:`~lecture_lib.finetuning.finetune.finetune_budget`, its warm-up 10% of its steps); ``table_finetune``
    and ``tagger_finetune`` are derived: changes to ``finetune``, built the same way (none: ``None``).

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    values = merge_dicts(pick(quick=QUICK, full=FULL), dict(seeds=claim_seeds()), overrides)
    finetune = values["finetune"]
    finetune = finetune if isinstance(finetune, dict) else dataclasses.asdict(finetune)
    for name in ("table_finetune", "tagger_finetune"):  # budgets given as changes to ``finetune``'s
        values[name] = finetune_budget(**merge_dicts(finetune, values[name])) if values.get(name) else None
    return build_dataclass(CourseLanguageConfig, values)


def synthetic_pretraining_data(
    config: CourseLanguageConfig, tokenizer: WordPieceTokenizer | None = None
) -> PretrainingData:
    """Chapter 04's masked next-sentence batches, cut from documents of the synthetic language.

    The held-out documents (for the MLM and NSP accuracies) are drawn with another seed. Without a
    ``tokenizer``, a WordPiece vocabulary of ``config.pretrain.data.vocab_size`` pieces is learned from the
    documents; with one (another model's vocabulary, for further pretraining), the documents are cut into
    its pieces.

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    train_docs, test_docs = ([[s.text for s in doc] for doc in docs] for docs in synthetic_documents(config))
    return PretrainingData(config.pretrain, train_docs, test_docs, tokenizer)


def synthetic_documents(config: CourseLanguageConfig) -> tuple[list[list[Sentence]], list[list[Sentence]]]:
    """The training and held-out documents of :func:`synthetic_pretraining_data`, as sentences with their
    ground truth; the held-out ones (``config.pretrain.data.held_out_fraction`` as many) drawn with another seed.

    Taught in: 04_bert_pretraining ("NSP on a sentence-pair task").
    """
    lang = SyntheticLanguage(config.language_seed)
    pretrain_config = config.pretrain
    test_size = max(2, round(config.documents * pretrain_config.data.held_out_fraction))
    train_docs, test_docs = (
        lang.documents(n, seed, config.sentences_per_document)
        for n, seed in ((config.documents, pretrain_config.seed), (test_size, pretrain_config.seed + 1))
    )
    return train_docs, test_docs


def synthetic_pretrained_bert(config: CourseLanguageConfig | None = None, *, progress: bool = True) -> PretrainResult:
    """A BERT pretrained on the synthetic language: trained once per recipe, then read from the disk cache
    (``$LECTURE_CACHE`` or ``~/.cache/lecture_lib``, as chapter 04's model).

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    fn, call = synthetic_pretraining_job(config or chapter_config())
    return fn(*call, progress=progress)


def synthetic_pretraining_job(config: CourseLanguageConfig) -> tuple[Callable[..., None], tuple]:
    """:func:`synthetic_pretrained_bert`'s training as a job of :func:`~lecture_lib.cache.build_all`, to run in a
    pool beside other runs: ``(cached_pretraining, (pretraining config, deferred data))``.

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    return cached_pretraining, (config.pretrain, Deferred(synthetic_pretraining_data, config))


def synthetic_sentences(n: int, seed: int) -> list[Sentence]:
    """``n`` sentences of the course's language (its world and grammar), drawn with a seed of their own.

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    language = SyntheticLanguage(chapter_config().language_seed)
    return language.sentences(n, seed=seed_of("ch10 sentences", seed))


def _acceptability_spec(tokenizer: Tokenizer, length: int) -> tuple:
    return (
        "acceptability",
        acceptability_examples,
        lambda e: encode_classification(e, tokenizer, length, len(ACCEPTABILITY_LABELS)),
        BertForSequenceClassification,
        len(ACCEPTABILITY_LABELS),
    )


def _entailment_spec(tokenizer: Tokenizer, length: int, build: Callable) -> tuple:
    return (
        "entailment",
        build,
        lambda e: encode_classification(e, tokenizer, length, len(ENTAILMENT_LABELS)),
        BertForSequenceClassification,
        len(ENTAILMENT_LABELS),
    )


def _split_tasks(specs: tuple, config: CourseLanguageConfig) -> dict[str, Task]:
    """Each (name, build, encode, head, num_labels): train examples about the train people, test examples
    about the test people (:func:`split_people`), encoded."""
    lang = SyntheticLanguage(config.language_seed)
    train_people, test_people = split_people(lang.world)
    tasks = {}
    for name, build, encode, head, num_labels in specs:
        train_examples = build(lang, config.train_examples, config.seed + 1, train_people)
        test_examples = build(lang, config.test_examples, config.seed + 2, test_people)
        tasks[name] = Task(name, head, num_labels, encode(train_examples), encode(test_examples), test_examples)
    return tasks


def build_tasks(tokenizer: Tokenizer, config: CourseLanguageConfig | None = None) -> dict[str, Task]:
    """The four tasks, trained on sentences about one set of people and tested on sentences about others.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    config = config or chapter_config()
    length = config.max_length
    return _split_tasks(
        (
            _acceptability_spec(tokenizer, length),
            _entailment_spec(tokenizer, length, entailment_examples),
            (
                "ner",
                ner_examples,
                lambda e: encode_tagging(e, tokenizer, length),
                BertForTokenClassification,
                len(NER_LABELS),
            ),
            (
                "qa",
                lambda lang, k, seed, people: qa_examples(
                    lang, k, seed, people, config.people_per_passage, config.sentences_per_passage
                ),
                lambda e: encode_qa(e, tokenizer, length),
                BertForQuestionAnswering,
                2,
            ),
        ),
        config,
    )


def object_swap_entailment_task(tokenizer: Tokenizer, config: CourseLanguageConfig | None = None) -> Task:
    """:func:`build_tasks`' entailment task with contradictions that swap the object instead of negating
    (:func:`~lecture_lib.finetuning.tasks.object_swap_entailment_examples`), split by people as the others.

    Exercise 1 of chapter 05: fine-tune on it with :func:`~lecture_lib.finetuning.finetune.finetune_from`.
    """
    config = config or chapter_config()
    spec = _entailment_spec(tokenizer, config.max_length, object_swap_entailment_examples)
    return _split_tasks((spec,), config)["entailment"]


def build_harder_tasks(
    tokenizer: Tokenizer, config: CourseLanguageConfig | None = None, names: Sequence[str] = HARDER_TASK_NAMES
) -> dict[str, Task]:
    """:data:`HARDER_TASK_NAMES`: acceptability as in :func:`build_tasks`, then the harder and the new
    shapes of :mod:`lecture_lib.finetuning.harder_tasks`, split by people as the first four. The
    similarity targets are divided by 5 (see :func:`~lecture_lib.finetuning.tasks.encode_regression`).
    ``names`` builds only those tasks (each the same as in the full set): a vocabulary that cuts words
    into more pieces may not fit every task's passages into ``config.max_length``.

    Taught in: 05_bert_finetuning ("Harder tasks and three more shapes").
    """
    unknown = sorted(set(names) - set(HARDER_TASK_NAMES))
    if unknown:
        raise ValueError(f"expected task names among {HARDER_TASK_NAMES}, got {unknown}")
    config = config or chapter_config()
    length = config.max_length
    specs = (
        _acceptability_spec(tokenizer, length),
        (
            "inference",
            nli_examples,
            lambda e: encode_classification(e, tokenizer, length, len(NLI_LABELS)),
            BertForSequenceClassification,
            len(NLI_LABELS),
        ),
        (
            "context_ner",
            context_ner_examples,
            lambda e: encode_tagging(e, tokenizer, length),
            BertForTokenClassification,
            len(NER_LABELS),
        ),
        (
            "unanswerable_qa",
            lambda lang, k, seed, people: unanswerable_qa_examples(
                lang, k, seed, people, config.people_per_passage, config.sentences_per_passage
            ),
            lambda e: encode_qa(e, tokenizer, length, allow_unanswerable=True),
            BertForQuestionAnswering,
            2,
        ),
        (
            "similarity",
            similarity_examples,
            lambda e: encode_regression(e, tokenizer, length, scale=1 / 5),
            BertForSequenceClassification,
            1,
        ),
        ("choice", choice_examples, lambda e: encode_choices(e, tokenizer, length), BertForMultipleChoice, 4),
    )
    return _split_tasks(tuple(spec for spec in specs if spec[0] in names), config)
