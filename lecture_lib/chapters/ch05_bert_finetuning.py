"""Chapter 05, fine-tuning BERT: its fine-tuning runs, cached. The chapter's sizes, language, pretrained BERT and
tasks are those of :mod:`lecture_lib.chapters.course_language`, which the later chapters read too.

A fine-tuning run is cached as the model it trained, under a name made of what decides that model: the task's
training data, the head, the encoder it starts from (its weights, or the config of a random one), the budget and
what ``adapt`` trains. The test scores are computed afresh from the model on every call, so one run serves every
test set it is scored on (section 7's development sweep scores the same training as section 6 on other
sentences), and a second execution of the notebook reads every model instead of training it. Section 8's frozen and
fine-tuned scores are cached as the two numbers they are.

Taught in: 05_bert_finetuning ("Pretrained or from scratch", "Domain-adaptive pretraining").
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from lecture_lib.cache import cached, cached_json, fingerprint, key
from lecture_lib.finetuning.features import frozen_and_fine_tuned
from lecture_lib.finetuning.finetune import FinetuneConfig, FinetuneResult, Task, finetune_from, new_head, score
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.runtime import default_device
from lecture_lib.train import History


def adapt_recipe(adapt: Callable[[nn.Module], nn.Module] | None) -> Any:
    """A stable description of ``adapt`` for a cache key: the function's (or class's) module and name, with a
    ``functools.partial``'s arguments; ``None`` for none.

    >>> from functools import partial
    >>> from lecture_lib.finetuning.peft import add_adapters
    >>> adapt_recipe(partial(add_adapters, bottleneck=8))
    {'function': 'lecture_lib.finetuning.peft.add_adapters', 'args': [], 'keywords': {'bottleneck': '8'}}
    """
    if adapt is None:
        return None
    if isinstance(adapt, functools.partial):
        return {"function": adapt_recipe(adapt.func), "args": [repr(a) for a in adapt.args],
                "keywords": {k: repr(v) for k, v in sorted(adapt.keywords.items())}}
    return f"{adapt.__module__}.{adapt.__qualname__}"


def cached_finetune_from(task: Task, encoder: BertModel | BertConfig, config: FinetuneConfig,
                         adapt: Callable[[nn.Module], nn.Module] | None = None) -> FinetuneResult:
    """:func:`~lecture_lib.finetuning.finetune.finetune_from` with its trained model cached: the same model, history
    and seconds on every call, on the device where a fresh run leaves it (the default device: a run read back
    scores where the trained one did), the scores computed on ``task``'s test set each time. A module function of
    its arguments alone, so it runs in a worker of :func:`~lecture_lib.runtime.parallel_map` as ``finetune_from``
    does.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    recipe = {"train": fingerprint(task.train.features), "train_word_ids": task.train.word_ids, "task": task.name,
              "head": f"{task.head.__module__}.{task.head.__qualname__}", "num_labels": task.num_labels,
              "encoder": _encoder_recipe(encoder), "finetune": asdict(config), "adapt": adapt_recipe(adapt)}

    trained = []  # the run this call trained, if it did: returned as it is

    def build(path: Path) -> None:
        trained.append(finetune_from(task, encoder, config, adapt))
        path.mkdir(parents=True, exist_ok=True)
        torch.save(trained[0].model.state_dict(), path / "model.pt")
        (path / "run.json").write_text(json.dumps({"seconds": trained[0].seconds,
                                                   "history": asdict(trained[0].history)}))

    def load(path: Path) -> FinetuneResult:
        if trained:
            return trained[0]
        model = new_head(task, encoder, config)
        model = adapt(model) if adapt else model
        model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
        model.to(default_device())
        run = json.loads((path / "run.json").read_text())
        return FinetuneResult(model, score(task, model), run["seconds"], History.from_dict(run["history"]))

    return cached(f"ch05-finetune-{key(recipe)}", build, load)


def cached_frozen_and_fine_tuned(task: Task, encoder: BertModel | BertConfig, tagger_config: FinetuneConfig,
                                 finetune_config: FinetuneConfig) -> dict[str, float]:
    """:func:`~lecture_lib.finetuning.features.frozen_and_fine_tuned`'s two span F1s, computed once per task (its
    training and test data), encoder (its weights, or the config of a random one) and budgets, then read from the
    cache. A module function, for :func:`~lecture_lib.runtime.parallel_map`.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    recipe = {"train": fingerprint(task.train.features), "test": fingerprint(task.test.features),
              "word_ids": [task.train.word_ids, task.test.word_ids], "test_examples": repr(task.test_examples),
              "task": task.name, "head": f"{task.head.__module__}.{task.head.__qualname__}",
              "num_labels": task.num_labels, "encoder": _encoder_recipe(encoder),
              "tagger": asdict(tagger_config), "finetune": asdict(finetune_config)}
    return cached_json("ch05-frozen-and-fine-tuned", recipe,
                       lambda: frozen_and_fine_tuned(task, encoder, tagger_config, finetune_config))


def _encoder_recipe(encoder: BertModel | BertConfig) -> str | dict:
    """A pretrained encoder's fingerprint, or a random one's config."""
    return fingerprint(encoder) if isinstance(encoder, nn.Module) else asdict(encoder)
