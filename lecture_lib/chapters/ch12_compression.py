"""Chapter 12, compression: the chapter's sizes, the teacher (chapter 05's BERT of the synthetic language,
fine-tuned on one of its tasks), the DistilBERT-style and ALBERT-style distillation runs, and the scores and
timings the compression table is made of.

Every run that trains is cached under its recipe: the fine-tuned teacher, each distilled student, each
quantization-aware fine-tuning.

Taught in: 12_compression ("The teacher and its task", "Dark knowledge", "A DistilBERT-style student",
"ALBERT-style sharing", "The compression table").
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.cache import cached_build, compute_all
from lecture_lib.chapters import course_language
from lecture_lib.compression.distillation import DistillationObjective, TripleLoss, distillation_loss
from lecture_lib.compression.quantization import FakeQuantLinear, replace_linears
from lecture_lib.config import build_config, built_by, seeded
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import Task, finetune, finetune_budget, new_head, score, with_steps
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.measure import interleaved_medians
from lecture_lib.models.albert import AlbertForMaskedLM, AlbertForSequenceClassification, albert_from_bert
from lecture_lib.models.bert import BertForPreTraining
from lecture_lib.models.distilbert import (
    DistilBertForMaskedLM,
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    DistilBertPreTrainedModel,
    distilbert_config,
    distilbert_from_bert,
)
from lecture_lib.models.heads import BertForSequenceClassification, BertForTokenClassification
from lecture_lib.objectives.masking import mask_tokens
from lecture_lib.pretraining import PretrainResult, masked_lm_counts
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Demonstration, Gate, Rule, Seeds
from lecture_lib.runtime import default_device, generator, seed_everything
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer, pad_ids
from lecture_lib.train import TrainConfig, recipe_config, train

SOFT_TARGETS_T = 2.0  # the temperature of the teacher's soft targets in the dark-knowledge runs (Hinton et al.)

# The students' distillation recipe: AdamW with a linear schedule, one CPU thread per run, AdamW's fused kernel
# (as the fine-tunings'); a budget is a TrainConfig (the course's one optimisation config) built by distill_budget.
DISTILL_DEFAULTS = dict(schedule="linear", num_threads=1, fused=True)


def distill_budget(**values) -> TrainConfig:
    """The students' distillation budget: a :class:`~lecture_lib.train.TrainConfig` of ``values`` (``steps``,
    ``batch_size`` sentences per step, peak ``lr``, ...) over :data:`DISTILL_DEFAULTS`, warming up over a tenth of
    its steps (rounded down) unless ``values`` state ``warmup_steps``: ``distill_budget(steps=100).warmup_steps ==
    10``. :attr:`Chapter12Config.distill` is built by it (:func:`lecture_lib.config.built_by`).

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    return recipe_config(DISTILL_DEFAULTS, lambda steps: steps // 10, **values)


@dataclass
class Chapter12Config:
    """The chapter's sizes: the task, the distillation text and budget, the sweeps, the latency batch; ``seeds``
    are the claims' seeds (:func:`~lecture_lib.profile.claim_seeds`), each a distillation run with its fine-tuning
    and a fine-tuning of the teacher (for the int8 rows).

    The task is acceptability: entailment is solved at 100% by every model here, so it cannot tell them apart.

    Taught in: 12_compression ("The teacher and its task").
    """

    distill_sentences: int  # unlabelled sentences of the synthetic language
    qat_bits: tuple[int, ...]  # bits of the quantization-aware fine-tunings
    latency_repeats: int
    dark_knowledge_steps: int | None  # fine-tuning steps of the dark-knowledge runs; None: the teacher's
    distill: TrainConfig = built_by(distill_budget, steps=100, batch_size=32, lr=3e-3)  # the students' distillation
    finetune: TrainConfig = built_by(finetune_budget, steps=150, batch_size=32, lr=1e-3, num_threads=1, fused=True)
    finetune_seed: int = 0  # of the fine-tunings: the heads' weights and the batches (seeded() sets it)
    task: str = "acceptability"
    names_task: str = "ner"  # the distillation rule's task about people unseen in fine-tuning
    mlm_probability: float = 0.15
    bits: tuple[int, ...] = (8, 6, 4, 3, 2, 1)
    sparsities: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    dark_knowledge_examples: tuple[int, ...] = (64, 256)  # labelled examples, soft against hard labels
    seeds: tuple[int, ...] = field(default_factory=claim_seeds)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("distill_sentences", "latency_repeats"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name}: expected a whole number >= 1, got {getattr(self, name)!r}")
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"mlm_probability: expected a share in (0, 1), got {self.mlm_probability!r}")
        for name in ("bits", "qat_bits"):
            if not getattr(self, name) or not all(1 <= b <= 8 for b in getattr(self, name)):
                raise ValueError(f"{name}: expected bit widths from 1 to 8, got {getattr(self, name)!r}")
        if not self.sparsities or not all(0 < p < 1 for p in self.sparsities):
            raise ValueError(f"sparsities: expected shares in (0, 1), got {self.sparsities!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected distinct seeds, at least one, got {self.seeds!r}")


# the quick profile's students are distilled at 3e-3 (200 steps at 2e-3 ranked them alike on seed 0, in twice the
# time); every run uses AdamW's fused kernel (the same updates up to rounding; on a CPU, about 12% faster here)
QUICK = dict(
    distill_sentences=6000,
    distill=dict(steps=100, batch_size=32, lr=3e-3),
    qat_bits=(8,),
    latency_repeats=20,
    dark_knowledge_steps=50,
)
FULL = dict(
    distill_sentences=50_000,
    distill=dict(steps=3000, batch_size=64, lr=5e-4),
    qat_bits=(8, 4),
    latency_repeats=50,
    dark_knowledge_steps=None,
    finetune=dict(steps=2000, batch_size=32, lr=2e-4),
)


def chapter_config(**overrides) -> Chapter12Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), with ``overrides`` (``finetune`` a dict of
    changes to the teacher's default budget, as in the tables).

    Taught in: 12_compression ("The teacher and its task").
    """
    return build_config(Chapter12Config, pick(quick=QUICK, full=FULL), overrides)


# ---------------------------------------------------------------- the teacher


def course_teacher() -> PretrainResult:
    """Chapter 05's pretrained BERT of the synthetic language (read from the cache; trained there first if missing).

    Taught in: 12_compression ("The teacher and its task").
    """
    return course_language.synthetic_pretrained_bert(course_language.chapter_config())


def chapter_task(tokenizer: WordPieceTokenizer, config: Chapter12Config, name: str | None = None) -> Task:
    """The task of chapter 05 named ``name`` (``None``: ``config.task``), its people split as there.

    Taught in: 12_compression ("The teacher and its task", "A DistilBERT-style student").
    """
    tasks = course_language.build_tasks(tokenizer)
    name = config.task if name is None else name
    if name not in tasks:
        raise ValueError(f"expected one of chapter 05's tasks {sorted(tasks)}, got {name!r}")
    return tasks[name]


def without_segments(task: Task) -> Task:
    """The task with no ``token_type_ids`` (a DistilBERT has no segment table).

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    def strip(encoded: EncodedTask) -> EncodedTask:
        return EncodedTask({k: v for k, v in encoded.features.items() if k != "token_type_ids"}, encoded.word_ids)

    return dataclasses.replace(task, train=strip(task.train), test=strip(task.test))


def fine_tuned_teacher(pretrained: PretrainResult, task: Task, config: Chapter12Config) -> nn.Module:
    """The pretrained BERT fine-tuned on the task with the chapter's budget (cached), in eval mode.

    Taught in: 12_compression ("The teacher and its task").
    """
    return _fine_tuned_teacher(pretrained.model, task, task.name, config.finetune, config.finetune_seed).eval()


@cached_build(load=BertForSequenceClassification.from_pretrained, ignore=("task",))
def _fine_tuned_teacher(
    path: Path, pretrained: BertForPreTraining, task: Task, task_name: str, tune: TrainConfig, seed: int
) -> None:
    """:func:`fine_tuned_teacher`, saved at ``path``: named by the pretrained weights, the task's name (its data
    follows from the name and the pretrained model's tokenizer) and the fine-tuning config and seed."""
    finetune(task, new_head(task, pretrained.bert, seed=seed), tune, seed).model.save_pretrained(path)


# ---------------------------------------------------------------- distillation


def distillation_text(tokenizer: WordPieceTokenizer, config: Chapter12Config) -> dict[str, torch.Tensor]:
    """Single sentences of the synthetic language, ``[CLS] s [SEP]``, right-padded: ``input_ids``,
    ``attention_mask`` and ``special_tokens_mask`` (True on [CLS], [SEP] and padding). Built once per
    tokenizer, size and seed, and shared by every student (read, never written).

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    return _framed_sentences(tokenizer, config.distill_sentences, 1000 + config.seed)


@functools.lru_cache(maxsize=4)
def _framed_sentences(tokenizer: WordPieceTokenizer, count: int, seed: int) -> dict[str, torch.Tensor]:
    sentences = [s.text for s in SyntheticLanguage(0).sentences(count, seed=seed)]
    framed = [tokenizer.frame(tokenizer.encode(s))[0] for s in sentences]
    input_ids = pad_ids(framed, tokenizer.pad_token_id)
    attention_mask = (input_ids != tokenizer.pad_token_id).long()
    special = (input_ids == tokenizer.cls_token_id) | (input_ids == tokenizer.sep_token_id) | (attention_mask == 0)
    return dict(input_ids=input_ids, attention_mask=attention_mask, special_tokens_mask=special)


def _masked_batches(
    text: dict[str, torch.Tensor], tokenizer: WordPieceTokenizer, config: Chapter12Config
) -> Callable[[int], dict[str, torch.Tensor]]:
    """``batch_fn(step)``: a seeded draw of sentences, freshly masked each step (dynamic masking, no NSP)."""
    n = text["input_ids"].shape[0]

    def batch_fn(step: int) -> dict[str, torch.Tensor]:
        g = generator("ch12 distillation", config.seed, step)
        rows = torch.randint(n, (config.distill.batch_size,), generator=g)
        length = int(text["attention_mask"][rows].sum(1).max())
        ids, mask = text["input_ids"][rows, :length], text["attention_mask"][rows, :length]
        masked, labels = mask_tokens(
            ids,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=tokenizer.vocab_size,
            special_tokens_mask=text["special_tokens_mask"][rows, :length],
            mlm_probability=config.mlm_probability,
            generator=g,
        )
        return dict(input_ids=masked, attention_mask=mask, labels=labels)

    return batch_fn


def distillation_objective(teacher: BertForPreTraining, loss: TripleLoss) -> DistillationObjective:
    """``loss_fn(student, batch)`` for :func:`~lecture_lib.train.train`: the teacher's MLM logits and last
    hidden states (no gradient) against the student's, over the real tokens. The cosine term needs equal
    widths: a narrower student is trained with ``alpha_cos = 0`` (the hidden states are then not compared).
    The teacher travels inside the objective, so ``train`` puts it on the student's device.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    def loss_fn(student: nn.Module, teacher: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            t = teacher(batch["input_ids"], batch["attention_mask"], output_hidden_states=True)
        s = student(**batch, output_hidden_states=True)
        return loss(
            s.logits,
            t.prediction_logits,
            s.loss,
            s.hidden_states[-1],
            t.hidden_states[-1],
            mask=batch["attention_mask"].bool(),
        )["loss"]

    return DistillationObjective(teacher, loss_fn)


@dataclass(frozen=True)
class StudentRecipe:
    """One distillation run: the loss weights, the initialisation, the student's width (1 = the teacher's); with
    an ``embedding_size`` E, an ALBERT-style student instead (:func:`~lecture_lib.models.albert.albert_from_bert`:
    the teacher's depth, every layer one copy of teacher layer ``shared_layer``, embeddings factorised to E).

    Taught in: 12_compression ("A DistilBERT-style student", "ALBERT-style sharing").
    """

    loss: TripleLoss = TripleLoss()
    from_teacher: bool = True
    width: float = 1.0
    embedding_size: int | None = None
    shared_layer: int = 0


def distilled_student(
    pretrained: PretrainResult, recipe: StudentRecipe, config: Chapter12Config
) -> DistilBertForMaskedLM | AlbertForMaskedLM:
    """A student with half the teacher's layers, distilled on the synthetic language's sentences (cached).

    ``from_teacher``: initialised from every other teacher layer (:func:`distilbert_from_bert`), else at
    random. ``width`` < 1 narrows the hidden and feed-forward sizes (heads of 16 dimensions), which rules out
    copying the teacher's layers and the cosine term. With ``embedding_size``, an ALBERT-style student of the
    teacher's depth and width, started from the teacher (:func:`albert_from_bert`) and distilled the same way.

    Taught in: 12_compression ("A DistilBERT-style student", "ALBERT-style sharing").
    """
    build = _distilbert_student if recipe.embedding_size is None else _albert_student
    return build(pretrained.model, pretrained.tokenizer, recipe, config).eval()


def distil_in_parallel(pretrained: PretrainResult, runs: Sequence[tuple[StudentRecipe, Chapter12Config]]) -> None:
    """Distil the students of ``runs`` (recipe, config) not yet in the cache, as many at a time as there are CPU
    cores (:func:`lecture_lib.cache.compute_all`); :func:`distilled_student` then loads each of them.

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    for build, albert in ((_distilbert_student, False), (_albert_student, True)):
        calls = [
            (pretrained.model, pretrained.tokenizer, recipe, config)
            for recipe, config in runs
            if (recipe.embedding_size is not None) == albert
        ]
        compute_all(build, calls, desc="distilling students")


@cached_build(load=DistilBertForMaskedLM.from_pretrained)
def _distilbert_student(
    path: Path,
    teacher: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    recipe: StudentRecipe,
    config: Chapter12Config,
) -> None:
    """A DistilBERT-style student of :func:`distilled_student`, saved at ``path``."""
    seed_everything(config.seed)
    if recipe.from_teacher:
        student = distilbert_from_bert(teacher)
    else:
        sizes = {}
        if recipe.width != 1.0:
            dim = int(teacher.config.hidden_size * recipe.width)
            sizes = dict(
                dim=dim, hidden_dim=int(teacher.config.intermediate_size * recipe.width), n_heads=max(1, dim // 16)
            )
        student = DistilBertForMaskedLM(distilbert_config(teacher.config, _student_layers(teacher), **sizes))
    _distil(student, teacher, tokenizer, recipe, config).save_pretrained(path)


@cached_build(load=AlbertForMaskedLM.from_pretrained)
def _albert_student(
    path: Path,
    teacher: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    recipe: StudentRecipe,
    config: Chapter12Config,
) -> None:
    """An ALBERT-style student of :func:`distilled_student`, saved at ``path``."""
    seed_everything(config.seed)
    student = albert_from_bert(teacher, recipe.embedding_size, recipe.shared_layer)
    _distil(student, teacher, tokenizer, recipe, config).save_pretrained(path)


def _student_layers(teacher: BertForPreTraining) -> int:
    return max(1, teacher.config.num_hidden_layers // 2)


def _distil(
    student: nn.Module,
    teacher: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    recipe: StudentRecipe,
    config: Chapter12Config,
) -> nn.Module:
    """``student`` trained on the distillation text towards ``teacher`` with ``recipe``'s loss."""
    text = distillation_text(tokenizer, config)
    batches = _masked_batches(text, tokenizer, config)
    train(student, batches, distillation_objective(teacher, recipe.loss), config.distill)
    return student


def scratch_student(pretrained: PretrainResult, config: Chapter12Config) -> DistilBertForMaskedLM:
    """The students' shape (half the teacher's layers) with random weights drawn with ``config.seed``, neither
    pretrained nor distilled: fine-tuned on the task (:func:`student_on_task`), it is the floor "no
    pretraining" every student must beat.

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    seed_everything(config.seed)
    return DistilBertForMaskedLM(distilbert_config(pretrained.model.config, _student_layers(pretrained.model)))


def student_on_task(
    student: DistilBertForMaskedLM | AlbertForMaskedLM, task: Task, config: Chapter12Config
) -> nn.Module:
    """The student's encoder with a new classifier, fine-tuned on the task as the teacher was (a DistilBERT
    without segment ids: it has no segment table); cached, so a second run of the notebook loads it.

    Taught in: 12_compression ("A DistilBERT-style student", "ALBERT-style sharing").
    """
    path = _student_on_task(*_on_task_call(student, task, config))
    return _student_head(student, task).from_pretrained(path).to(default_device()).eval()


def students_on_task_in_parallel(runs: Sequence[tuple]) -> None:
    """Fine-tune the students of ``runs`` (each the arguments of :func:`student_on_task`: student, task, config)
    not yet in the cache, as many at a time as there are CPU cores (:func:`lecture_lib.cache.compute_all`), each on
    one thread as in the kernel; :func:`student_on_task` then loads each of them.

    Taught in: 12_compression ("A DistilBERT-style student", "ALBERT-style sharing").
    """
    compute_all(_student_on_task, [_on_task_call(*run) for run in runs], desc="fine-tuning students")


def _on_task_call(student: DistilBertForMaskedLM | AlbertForMaskedLM, task: Task, config: Chapter12Config) -> tuple:
    """The arguments of :func:`_student_on_task` for the arguments of :func:`student_on_task`."""
    return student, task, task.name, config.finetune, config.finetune_seed


def _student_head(student: DistilBertForMaskedLM | AlbertForMaskedLM, task: Task) -> type:
    """The student family's class for the task's head: a DistilBERT's sentence or token head, an ALBERT's
    sentence head."""
    if isinstance(student, AlbertForMaskedLM):
        heads = {BertForSequenceClassification: AlbertForSequenceClassification}
    else:
        heads = {
            BertForSequenceClassification: DistilBertForSequenceClassification,
            BertForTokenClassification: DistilBertForTokenClassification,
        }
    if task.head not in heads:
        raise ValueError(
            f"expected a task with one of the heads {[h.__name__ for h in heads]} for a {type(student).__name__} "
            f"student, got {task.name!r} with {task.head.__name__}"
        )
    return heads[task.head]


@cached_build(load=Path, ignore=("task",))
def _student_on_task(
    path: Path,
    student: DistilBertForMaskedLM | AlbertForMaskedLM,
    task: Task,
    task_name: str,
    tune: TrainConfig,
    seed: int,
) -> None:
    """:func:`student_on_task`, saved at ``path``: named by the student's weights, the task's name and the
    fine-tuning config, as :func:`_fine_tuned_teacher` is."""
    seed_everything(seed)
    head_class = _student_head(student, task)
    if isinstance(student, AlbertForMaskedLM):
        head = head_class.from_encoder(student.albert, task.num_labels, dropout=0.0)
    else:
        task = without_segments(task)
        head = head_class.from_encoder(student.distilbert, task.num_labels, dropout=0.0)
    finetune(task, head, tune, seed).model.save_pretrained(path)


def soft_or_hard_labels(
    student: DistilBertForMaskedLM,
    teacher_on_task: nn.Module,
    task: Task,
    examples: int,
    soft: bool,
    config: Chapter12Config,
    temperature: float = SOFT_TARGETS_T,
) -> nn.Module:
    """The student fine-tuned on ``examples`` training examples only, a sample drawn with
    ``config.finetune_seed``, on their true labels (``soft`` False: cross-entropy) or on the fine-tuned
    teacher's soft targets at ``temperature`` (Hinton et al.'s setting: the same few inputs, richer targets).
    Same sample, steps and learning rate either way; cached, in eval mode.

    Taught in: 12_compression ("Dark knowledge").
    """
    run = (student, teacher_on_task, task, examples, soft, config, temperature)
    return _soft_or_hard_labels(*_labels_call(run)).eval()


def labels_in_parallel(runs: Sequence[tuple]) -> None:
    """Fine-tune the students of ``runs`` (each the arguments of :func:`soft_or_hard_labels`) not yet in the cache,
    as many at a time as there are CPU cores (:func:`lecture_lib.cache.compute_all`); :func:`soft_or_hard_labels`
    then loads each of them.

    Taught in: 12_compression ("Dark knowledge").
    """
    compute_all(_soft_or_hard_labels, [_labels_call(run) for run in runs], desc="fine-tuning on few labels")


def _labels_call(run: tuple) -> tuple:
    """The arguments of :func:`_soft_or_hard_labels` for ``run``, the arguments of :func:`soft_or_hard_labels`
    (its temperature optional)."""
    student, teacher_on_task, task, examples, soft, config, *temperature = run
    tune = config.finetune
    if config.dark_knowledge_steps:  # the teacher's budget at other steps, warming up over the same share of them
        tune = with_steps(tune, config.dark_knowledge_steps)
    return student, teacher_on_task, task, task.name, examples, soft, tune, config.finetune_seed, *temperature


@cached_build(load=DistilBertForSequenceClassification.from_pretrained, ignore=("task",))
def _soft_or_hard_labels(
    path: Path,
    student: DistilBertForMaskedLM,
    teacher_on_task: nn.Module,
    task: Task,
    task_name: str,
    examples: int,
    soft: bool,
    tune: TrainConfig,
    seed: int,
    temperature: float = SOFT_TARGETS_T,
) -> None:
    """:func:`soft_or_hard_labels`, saved at ``path``: named by both models' weights, the task's name, the
    sample's size, the targets, the fine-tuning config, seed and temperature."""
    rows = torch.randperm(len(task.train), generator=generator("ch12 dark knowledge", seed))[:examples]
    few = EncodedTask({k: v[rows] for k, v in task.train.features.items()})  # a sentence task: no word_ids

    def loss(model: nn.Module, teacher: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "token_type_ids")}
        logits = model(**inputs).logits
        if not soft:
            return F.cross_entropy(logits, batch["labels"])
        with torch.no_grad():
            target = teacher(**{k: v for k, v in batch.items() if k != "labels"}).logits
        return distillation_loss(logits, target, temperature)

    seed_everything(seed)
    head = DistilBertForSequenceClassification.from_encoder(student.distilbert, task.num_labels, dropout=0.0)
    batches = few.batches(min(tune.batch_size, examples), seed)
    train(head, batches, DistillationObjective(teacher_on_task, loss), tune, progress=False)
    head.save_pretrained(path)


def kept_squared_norm(table: torch.Tensor, embedding_size: int) -> float:
    """The share of ‖W‖² that W's best rank-E approximation keeps: Σ_{i ≤ E} σ_i² / Σ_i σ_i² (Eckart and Young),
    what an ALBERT-style student's factorised token table keeps of the teacher's. Exercise 4 of chapter 12.
    """
    squares = torch.linalg.svdvals(table.detach().double()).pow(2)
    return float(squares[:embedding_size].sum() / squares.sum())


def masked_word_accuracy(
    model: nn.Module, tokenizer: WordPieceTokenizer, config: Chapter12Config, batches: int = 8
) -> float:
    """The share of masked tokens a masked-LM (the pretrained teacher, a student) predicts right, in percent,
    on ``batches`` batches of the distillation text drawn and masked with a seed no distillation run uses.

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    draw = _masked_batches(distillation_text(tokenizer, config), tokenizer, seeded(config, -1))
    model.eval()
    right, total = masked_lm_counts(model, (draw(step) for step in range(batches)))
    return 100 * right / total


# ---------------------------------------------------------------- quantization-aware training


def qat_model(
    pretrained: PretrainResult, task: Task, bits: int, config: Chapter12Config, quantize_inputs: bool = True
) -> nn.Module:
    """Q8BERT's recipe: fine-tune the pretrained BERT on the task with every linear layer fake-quantized to
    ``bits`` (:class:`~lecture_lib.compression.quantization.FakeQuantLinear`; ``quantize_inputs=False``: the
    weights alone), from the same start and with the same budget as the float teacher. Returned in eval mode
    (input ranges frozen); not cached across sessions (a module of fake-quantized layers has no checkpoint
    format), trained in a few seconds.

    Taught in: 12_compression ("Quantization-aware training").
    """
    model = new_head(task, pretrained.model.bert, seed=config.finetune_seed)
    replace_linears(model, lambda linear: FakeQuantLinear(linear, bits, quantize_inputs=quantize_inputs))
    return finetune(task, model, config.finetune, config.finetune_seed).model.eval()


# ---------------------------------------------------------------- measuring


def headline_score(model: nn.Module, task: Task) -> float:
    """The task's headline score (accuracy, or F1), in percent; a student is scored without segment ids.

    Taught in: 12_compression ("The teacher and its task").
    """
    if isinstance(model, DistilBertPreTrainedModel):
        task = without_segments(task)
    scores = score(task, model)
    for metric in ("accuracy", "f1"):
        if metric in scores:
            return 100 * scores[metric]
    raise ValueError(f"expected a task scored by accuracy or F1, got {task.name!r} with {sorted(scores)}")


def latencies(models: dict[str, nn.Module], task: Task, batch_size: int, repeats: int) -> dict[str, float]:
    """Median seconds of one forward pass of each model on the first ``batch_size`` test examples, one CPU
    thread, the models timed in turns (a slow moment of a shared machine hits them all alike). Printed, never
    asserted.

    Taught in: 12_compression ("Pruning", "The compression table").
    """
    features = task.test.batch(torch.arange(batch_size))
    calls = {}
    for name, model in models.items():
        inputs = {k: v for k, v in features.items() if k != "labels"}
        if isinstance(model, DistilBertPreTrainedModel):
            inputs.pop("token_type_ids", None)
        calls[name] = lambda model=model, inputs=inputs: model(**inputs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            return interleaved_medians(calls, repeats=repeats, warmup=3)
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- the claims, declared before the run

TASK = "the acceptability test sentences"
GATE_POINTS = 5.0  # points of accuracy a model must gain over its floor to count as having learned the task
# the pruning rules' "without (noticeable) loss": one standard error of an accuracy near 80% on the 400 test
# sentences, √(0.8 · 0.2 / 400) = 2 points, a change the test set cannot tell from noise
NO_LOSS_POINTS = 2.0
PRUNED_SHARE = 0.4  # of the weights (Gordon et al.) and of the heads (Michel et al.) the pruning rules remove
FEW_BITS = 2  # the few-bits rules' weights: 2 bits per weight, a grid of −1, 0, 1 times each row's scale
FEW_EXAMPLES = 64  # labelled sentences of the dark-knowledge rule, a sample drawn with each fine-tuning seed
DISTILLED = "the distilled student (triple loss)"


def _points_lost(
    key: str, claim: str, *, paper: str, source: str, compressed: str, bar: float, higher: bool = False
) -> Rule:
    """A rule on the accuracy points the float teacher loses to ``compressed`` (a compressed copy of it), on each
    of its fine-tuning seeds (the teachers of the int8 rows): below the fixed ``bar`` (``higher``: above it)."""
    return Rule(
        key,
        claim,
        paper=paper,
        source=source,
        metric="accuracy points lost",
        data=TASK,
        compared=f"the float teacher minus {compressed}",
        baseline=bar,
        higher=higher,
        seeds=Seeds("fine-tuning"),
        gates=(Gate("the float teacher", "chance", GATE_POINTS),),
    )


CLAIMS = (
    Demonstration(
        "12-temperature-softens",
        "a temperature raises the small probabilities of the soft targets",
        paper="softer distributions at higher T",
        source="Hinton et al. (2015), section 2",
        shows="the entropy of one prediction of the teacher at T = 1, 2, 4",
    ),
    Rule(
        "12-student-keeps-most",
        "a distilled student with half the layers keeps most of the teacher's score",
        paper="DistilBERT keeps 97% of BERT-base's GLUE score (the Primer's Table 1: 90%)",
        source="Sanh et al. (2019), Table 1",
        metric="accuracy (%)",
        data=TASK,
        compared=DISTILLED,
        baseline="the teacher fine-tuned with the same seed",
        factor=0.9,
        seeds=Seeds("pretraining"),
        gates=(Gate(DISTILLED, "no pretraining", GATE_POINTS),),
    ),
    Rule(
        "12-teacher-init-helps",
        "initialising the student from the teacher's layers helps",
        paper="−3.69 GLUE macro-score from a random initialisation",
        source="Sanh et al. (2019), Table 4",
        metric="accuracy (%)",
        data=TASK,
        compared=DISTILLED,
        baseline="the same distillation from random weights",
        seeds=Seeds("pretraining"),
        gates=(Gate(DISTILLED, "no pretraining", GATE_POINTS),),
    ),
    Rule(
        "12-distillation-beats-copy",
        "distilling the copied student beats fine-tuning the copy alone",
        paper="the distilled DistilBERT keeps 97% of BERT-base (the copy alone is not reported)",
        source="Sanh et al. (2019), section 3",
        metric="accuracy (%)",
        data=TASK,
        compared=DISTILLED,
        baseline="the copied student fine-tuned without distillation",
        seeds=Seeds("pretraining"),
        gates=(
            Gate(DISTILLED, "no pretraining", GATE_POINTS),
            Gate("the copied student", "no pretraining", GATE_POINTS),
        ),
    ),
    Rule(
        "12-distillation-beats-copy-on-held-out-names",
        "on a task that needs pretraining, distilling the copied student beats fine-tuning the copy alone",
        paper="the distilled DistilBERT keeps 97% of BERT-base (the copy alone is not reported)",
        source="Sanh et al. (2019), section 3",
        metric="entity F1 (%)",
        data="chapter 05's entity tagging, tested on sentences about people no fine-tuning sentence names",
        compared=DISTILLED,
        baseline="the copied student fine-tuned without distillation",
        seeds=Seeds("pretraining"),
        gates=(
            Gate(DISTILLED, "no pretraining", GATE_POINTS),
            Gate("the copied student", "no pretraining", GATE_POINTS),
        ),
    ),
    Rule(
        "12-soft-targets-help-with-little-data",
        "with few labelled examples, the teacher's soft targets teach more than the hard labels",
        paper="3% of the speech data: 57.0% frame accuracy with soft targets, 44.5% with hard labels",
        source="Hinton et al. (2015), Table 3",
        metric="accuracy (%)",
        data=TASK,
        compared=f"the copied student fine-tuned on {FEW_EXAMPLES} sentences with the teacher's soft targets (T = 2)",
        baseline="the same student on their hard labels",
        seeds=Seeds("fine-tuning"),
        gates=(
            Gate("the student on soft targets", "chance", GATE_POINTS),
            Gate("the student on hard labels", "chance", GATE_POINTS),
        ),
    ),
    Rule(
        "12-sharing-keeps-score",
        "sharing one layer with a small embedding keeps the score",
        paper="ALBERT-base ×9 smaller, 97% of BERT-base",
        source="Lan et al. (2020) via the Primer's Table 1",
        metric="accuracy points lost",
        data=TASK,
        compared="the teacher fine-tuned with the same seed minus the ALBERT-style student",
        baseline=3.0,
        higher=False,
        seeds=Seeds("pretraining"),
        gates=(Gate("the ALBERT-style student", "no pretraining", GATE_POINTS),),
    ),
    _points_lost(
        "12-int8-loses-little",
        "8-bit quantization loses almost nothing",
        paper="at most 1.32% relative (RTE)",
        source="Zafrir et al. (2019), Q8BERT, Table 1",
        compressed="its int8 copy (per channel, integer products)",
        bar=NO_LOSS_POINTS,
    ),
    Rule(
        "12-int8-per-tensor-close-to-float",
        "symmetric per-tensor int8 (Q8BERT's scheme) is close to float",
        paper="0.00–1.32% relative reduction over eight GLUE tasks and SQuAD",
        source="Zafrir et al. (2019), Q8BERT, Table 1",
        metric="accuracy points apart",
        data=TASK,
        compared="the float teacher against its int8 copy per tensor, either way",
        baseline=2.0,
        higher=False,
        seeds=Seeds("fine-tuning"),
        gates=(Gate("the float teacher", "chance", GATE_POINTS),),
    ),
    _points_lost(
        "12-few-bits-lose",
        "at ultra-low precision, rounding without retraining loses the task",
        paper="direct 2-bit quantization collapses; Q-BERT needs group-wise mixed precision",
        source="Shen et al. (2020), Q-BERT, Table 1",
        compressed=f"its weights rounded to {FEW_BITS} bits",
        bar=10.0,
        higher=True,
    ),
    Rule(
        "12-quantization-aware-beats-rounding-after",
        "at few bits, fine-tuning with the rounding in the loop beats rounding after fine-tuning",
        paper="2-bit weights: direct quantization collapses, Q-BERT's quantization-aware fine-tuning keeps most "
        "of the score",
        source="Shen et al. (2020), Q-BERT, Table 1",
        metric="accuracy (%)",
        data=TASK,
        compared=f"fine-tuning with the weights fake-quantized to {FEW_BITS} bits (per channel, inputs in float)",
        baseline=f"the float teacher of the same seed, its weights rounded to {FEW_BITS} bits the same way",
        margin=NO_LOSS_POINTS,
        seeds=Seeds("fine-tuning"),
        gates=(
            Gate("the float teacher", "chance", GATE_POINTS),
            Gate("the quantization-aware model", "chance", GATE_POINTS),
        ),
    ),
    _points_lost(
        "12-magnitude-pruning-keeps-score",
        "30–40% of the weights can be magnitude-pruned without loss",
        paper="pruning 30–40% of the weights does not affect pretraining loss or transfer at all",
        source="Gordon et al. (2020), abstract",
        compressed=f"its copy with {PRUNED_SHARE:.0%} of the linear weights magnitude-pruned (no retraining)",
        bar=NO_LOSS_POINTS,
    ),
    _points_lost(
        "12-heads-prunable",
        "40% of the heads can be pruned without noticeable loss",
        paper="40% of BERT's heads pruned on MNLI without noticeable loss",
        source="Michel et al. (2019), Figure 4",
        compressed=f"its copy without its {PRUNED_SHARE:.0%} least important heads (no retraining)",
        bar=NO_LOSS_POINTS,
    ),
    Demonstration(
        "12-structured-pruning-is-faster",
        "only structured pruning is faster on dense kernels",
        paper="fewer heads and layers run faster; sparse weights need sparse kernels",
        source="Michel et al. (2019); Gordon et al. (2020)",
        shows="one run's timings at batch 32 (a rerun prints others; timings are never judged)",
    ),
)
CHECKS = (
    Check(
        "12-t-squared-keeps-gradients",
        "the soft loss's gradients shrink as 1/T²; multiplying by T² keeps them",
        source="Hinton et al. (2015), section 2",
        reference="×1 with T² and ×1/4 without, the gradient norm's change from T = 4 to T = 8",
        tolerance=0.05,
    ),
)
