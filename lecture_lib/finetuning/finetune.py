"""Fine-tuning a pretrained encoder on a task: the budget, a new head on a copy of the encoder, the
loop that trains it, and the scores on the task's test set.

Pretrained and from-scratch models get the same budget (steps, batches, learning rate), so that
comparing their scores compares what pretraining gave them.

Taught in: 05_bert_finetuning ("Pretrained or from scratch", "Scoring the tasks").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from lecture_lib.finetuning.tasks import (
    EncodedTask,
    best_spans,
    word_tags,
)
from lecture_lib.inference import forward_in_batches
from lecture_lib.metrics import (
    accuracy,
    matthews_corrcoef,
    pearson_correlation,
    span_f1,
    spearman_correlation,
    squad_scores,
)
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.runtime import seed_everything
from lecture_lib.train import History, TrainConfig, recipe_config, train, warmup_from_fraction

# BERT's fine-tuning recipe at the course's sizes: AdamW, a linear warm-up over FINETUNE_WARMUP of the steps, then
# linear decay. A budget is a TrainConfig (the course's one optimisation config) built by finetune_budget.
FINETUNE_DEFAULTS = dict(steps=150, batch_size=32, lr=1e-3, schedule="linear")
FINETUNE_WARMUP = 0.1  # the share of the steps spent warming up, when a budget does not state warmup_steps


def finetune_budget(**values) -> TrainConfig:
    """The fine-tuning budget of one task: a :class:`~lecture_lib.train.TrainConfig` of ``values`` over
    :data:`FINETUNE_DEFAULTS` (150 AdamW steps of 32 examples at peak rate 1e-3, linear schedule), its warm-up
    :data:`FINETUNE_WARMUP` of its steps (:func:`~lecture_lib.train.warmup_from_fraction`) unless ``values``
    state ``warmup_steps``: ``finetune_budget(steps=75).warmup_steps == 8``. ``fused`` picks AdamW's fused
    kernel (``None``: on CUDA; on a CPU it can save some of a small model's step, with the same updates up to
    rounding). A chapter config's budget field is built by it (:func:`lecture_lib.config.built_by`), so that
    ``finetune=dict(steps=75)`` warms up over 8 steps. The seed and the head's dropout are not part of it:
    they are arguments of :func:`finetune` and :func:`new_head`.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    return recipe_config(FINETUNE_DEFAULTS, lambda steps: warmup_from_fraction(steps, FINETUNE_WARMUP), **values)


def with_steps(budget: TrainConfig, steps: int) -> TrainConfig:
    """``budget`` run for ``steps`` steps, its warm-up :data:`FINETUNE_WARMUP` of them as
    :func:`finetune_budget` gives: ``with_steps(finetune_budget(steps=100), 300).warmup_steps == 30``.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    return dataclasses.replace(budget, steps=steps, warmup_steps=warmup_from_fraction(steps, FINETUNE_WARMUP))


@dataclass
class Task:
    """One task: its head, its encoded train and test sets, and the test examples (for scoring).

    Taught in: 05_bert_finetuning ("Four task shapes").
    """

    name: str
    head: type
    num_labels: int
    train: EncodedTask
    test: EncodedTask
    test_examples: list = field(repr=False)


def predict(model: nn.Module, encoded: EncodedTask, batch_size: int = 128, **forward_kwargs) -> dict[str, torch.Tensor]:
    """The model's logits on every example, in eval mode: ``logits`` (N, K) or (N, T, K), or
    ``start_logits`` and ``end_logits`` (N, T). ``forward_kwargs`` go to every call of the model (a
    ``head_mask``, say).

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    labels = ("labels", "start_positions", "end_positions")
    inputs = {k: v for k, v in encoded.features.items() if k not in labels}
    out = forward_in_batches(
        model, inputs, ("logits", "start_logits", "end_logits"), batch_size=batch_size, **forward_kwargs
    )
    return {k: v.float() for k, v in out.items()}


def score(task: Task, model: nn.Module, null_threshold: float = 0.0, **forward_kwargs) -> dict[str, float]:
    """The task's metrics on its test set, by the task's name: accuracy and MCC (acceptability);
    accuracy (entailment, inference, choice; chapter 07's date_gap); span F1 (ner, context_ner); Pearson and Spearman
    correlation (similarity); exact match and F1 (qa; and unanswerable_qa, also on the answerable and
    the unanswerable questions apart, "no answer" predicted past ``null_threshold``). ``forward_kwargs``
    go to the model with the inputs (chapter 10 scores a model with its heads gated by a ``head_mask``).

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    return _scores(task, predict(model, task.test, **forward_kwargs), null_threshold)


def null_threshold_scores(task: Task, model: nn.Module, thresholds: Sequence[float]) -> list[dict[str, float]]:
    """``[score(task, model, null_threshold=t) for t in thresholds]``, with the model run on the test set once.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    out = predict(model, task.test)
    return [_scores(task, out, threshold) for threshold in thresholds]


def _scores(task: Task, out: dict[str, torch.Tensor], null_threshold: float) -> dict[str, float]:
    """:func:`score` from the model's outputs on the test set (:func:`predict`)."""
    labels = task.test.features.get("labels")
    if task.name == "acceptability":
        predicted = out["logits"].argmax(-1)
        return {"accuracy": accuracy(predicted, labels), "mcc": matthews_corrcoef(predicted, labels)}
    if task.name in ("entailment", "inference", "choice", "date_gap"):
        return {"accuracy": accuracy(out["logits"].argmax(-1), labels)}
    if task.name in ("ner", "context_ner"):
        return {"f1": span_f1([e.tags for e in task.test_examples], word_tags(out["logits"], task.test))["f1"]}
    if task.name == "similarity":
        predicted = out["logits"].squeeze(-1)
        return {"pearson": pearson_correlation(predicted, labels), "spearman": spearman_correlation(predicted, labels)}
    unanswerable = task.name == "unanswerable_qa"
    spans = best_spans(
        out["start_logits"], out["end_logits"], task.test, null_threshold=null_threshold if unanswerable else None
    )
    predicted = [" ".join(e.passage[a:b]) for e, (a, b) in zip(task.test_examples, spans)]
    answers = [e.answer for e in task.test_examples]
    scores = squad_scores(predicted, answers)
    if unanswerable:
        for part, keep in (("has_answer", True), ("no_answer", False)):
            pairs = [(p, a) for p, a in zip(predicted, answers) if bool(a) == keep]
            scores.update({f"{part}_{k}": v for k, v in squad_scores(*zip(*pairs)).items()})
    return scores


def task_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The head's own loss: cross-entropy over classes, tags, or start and end positions.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    return model(**batch).loss


@dataclass
class FinetuneResult:
    """The fine-tuned model, its test scores, the seconds the run took, and its training history.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """

    model: nn.Module
    scores: dict[str, float]
    seconds: float
    history: History


def finetune(task: Task, model: nn.Module, config: TrainConfig, seed: int = 0) -> FinetuneResult:
    """Fine-tune ``model`` (a head, pretrained or not) on ``task`` with the chapter's budget (a
    :func:`finetune_budget`); score it. ``seed`` seeds the run and draws the order of the batches.

    AdamW with a linear warm-up and decay (as BERT's fine-tuning), the same steps, batches and learning
    rate whatever the model, so that pretrained and from-scratch runs spend the same budget.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    seed_everything(seed)
    start = time.perf_counter()
    history = train(model, task.train.batches(config.batch_size, seed), task_loss, config, progress=False)
    scores = score(task, model)
    return FinetuneResult(model, scores, time.perf_counter() - start, history)


def finetune_from(
    task: Task,
    encoder: BertModel | BertConfig,
    config: TrainConfig,
    seed: int = 0,
    adapt: Callable[[nn.Module], nn.Module] | None = None,
    *,
    dropout: float = 0.0,
) -> FinetuneResult:
    """One whole run from its inputs: :func:`new_head` on ``encoder`` (pretrained weights, or a config for
    random ones) with ``seed`` and ``dropout``, ``adapt`` applied to it if given (e.g.
    :func:`~lecture_lib.finetuning.peft.bitfit`, which chooses the weights that train), then :func:`finetune`
    with ``config`` and ``seed``. Being a module's function of its arguments alone, it can run in a worker of
    :func:`~lecture_lib.runtime.parallel_map` (a job ``(task, encoder, budget, seed)``).

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    model = new_head(task, encoder, seed=seed, dropout=dropout)
    return finetune(task, adapt(model) if adapt else model, config, seed)


def new_head(task: Task, encoder: BertModel | BertConfig, *, seed: int = 0, dropout: float = 0.0) -> nn.Module:
    """The task's head on a copy of a pretrained encoder, or (given a BERT config) on a randomly
    initialised one of the same shape; either way with the fine-tuning ``dropout``, its new weights drawn with
    ``seed``.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    seed_everything(seed)  # the same initial weights, whatever ran before
    if isinstance(encoder, BertConfig):
        encoder = BertModel(encoder)
    return task.head.from_encoder(encoder, task.num_labels, dropout=dropout)


def reinitialize_pooler(model: nn.Module, top_layers: int = 0) -> nn.Module:
    """Draw the pooler's weights (and those of the top ``top_layers`` encoder layers) afresh with the model's
    own initialisation, N(0, initializer_range) and zero biases, as Zhang et al. (2021) do before fine-tuning
    on small data sets; returns ``model``. As ``adapt`` of :func:`finetune_from`:
    ``finetune_from(task, encoder, budget, adapt=reinitialize_pooler)``.

    Exercise 3 of chapter 05: re-initialise the pooler (or the top layer) before fine-tuning acceptability.
    """
    encoder = model.base_model
    for module in (encoder.pooler, *encoder.encoder.layer[len(encoder.encoder.layer) - top_layers :]):
        module.apply(model._init_weights)
    return model
