"""Chapter 05, fine-tuning BERT: its fine-tuning runs, cached, and its claims. The chapter's sizes, language,
pretrained BERT and tasks are those of :mod:`lecture_lib.chapters.course_language`, which the later chapters read
too.

A fine-tuning run is cached as the model it trained, under a name made from the call: the task's training data
and head, the encoder it starts from (its weights, or the config of a random one), the budget and what ``adapt``
trains. The test scores are computed afresh from the model on every call, so one run serves every test set it is
scored on (section 7's development sweep and its test scores read the same training), and a second execution of
the notebook reads every model instead of training it. Section 8's frozen and fine-tuned scores are cached as the
two numbers they are.

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

from lecture_lib.cache import cached_build, cached_call, describe
from lecture_lib.finetuning.features import frozen_and_fine_tuned
from lecture_lib.finetuning.finetune import FinetuneResult, Task, finetune_from, new_head, score
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.reproductions import Demonstration, Gate, Rule, Seeds
from lecture_lib.runtime import default_device
from lecture_lib.train import History, TrainConfig

_FLOOR_MARGIN = 0.02  # a compared model must beat its floor by two points of its score on every seed
FEW_LABELS = 10  # sections 7 and 9 fine-tune on 1/10 of the labelled sentences: on all, every recipe nears F1 1
_FEW_LABELS_DATA = f"context entities, 1/{FEW_LABELS} of the labelled sentences"
_ANSWERING_NOTHING = "always answering nothing"  # SQuAD 2.0's floor: it scores the share of unanswerable questions
PAPERS = {  # Devlin et al. (2019): the benchmark of each task shape, its score and BERT-base's figure
    "acceptability": ("CoLA", "MCC", "52.1"),
    "inference": ("MNLI", "accuracy", "84.6"),
    "context_ner": ("CoNLL-2003", "F1 (test)", "92.4"),
    "unanswerable_qa": ("SQuAD 2.0", "F1", "83.1 (BERT-large)"),
    "similarity": ("STS-B", "Spearman", "85.8"),
    "choice": ("SWAG", "accuracy (dev)", "81.6 (BERT-large: 86.6)"),
}
MAIN_SCORES = {
    "acceptability": "MCC",
    "inference": "accuracy",
    "context_ner": "span F1",
    "unanswerable_qa": "SQuAD F1",
    "similarity": "Spearman correlation",
    "choice": "accuracy",
}


def _pretraining_claim_key(task: str) -> str:
    """The key of "pretraining beats scratch" on ``task``: ``05-pretraining-beats-scratch-context-ner``, and
    ``05-pretraining-helps-inference`` (the claim's name since the inference task was rebuilt)."""
    if task == "inference":
        return "05-pretraining-helps-inference"
    return f"05-pretraining-beats-scratch-{task.replace('_', '-')}"


def _pretraining_beats_scratch(task: str) -> Rule:
    benchmark, score_name, figure = PAPERS[task]
    return Rule(
        _pretraining_claim_key(task),
        f"pretraining beats training from scratch: {task}",
        paper=f"{benchmark} {figure} ({score_name}); no scratch baseline in the paper",
        source="Devlin et al. (2019); Hao et al. (2019) compare the two",
        metric=MAIN_SCORES[task],
        data=f"the {task.replace('_', ' ')} test set, about people unseen in fine-tuning",
        compared="pretrained",
        baseline="from scratch",
        seeds=Seeds("fine-tuning"),
        gates=(Gate("pretrained", _ANSWERING_NOTHING if task == "unanswerable_qa" else "chance", _FLOOR_MARGIN),),
    )


CLAIMS = (
    Demonstration(
        "05-one-layer-per-task-shape",
        "one added layer turns BERT into a model for each task shape",
        paper="one output layer per task",
        source="Devlin et al. (2019), Figure 4 and sections 4.1-4.4",
        shows="seven heads written out by hand (equal to transformers' classes in the tests)",
    ),
    *(_pretraining_beats_scratch(task) for task in PAPERS),
    Demonstration(
        "05-small-data-is-unstable",
        "fine-tuning on small data is unstable across seeds",
        paper="restarts for BERT-large on small GLUE sets",
        source="Devlin et al. (2019); Dodge et al. (2020)",
        shows="each task's range of scores over the fine-tuning seeds, with no larger-data run to compare",
    ),
    Rule(
        "05-null-threshold-moves-f1",
        "SQuAD 2.0's no-answer threshold τ, tuned on dev, helps on test",
        paper="τ chosen on dev to maximise F1",
        source="Devlin et al. (2019), section 4.3",
        metric="SQuAD F1",
        data="a test set with more unanswerable questions than training",
        compared="τ tuned on dev",
        baseline="τ = 0",
        seeds=Seeds("fine-tuning"),
        gates=(Gate("τ tuned on dev", _ANSWERING_NOTHING, _FLOOR_MARGIN),),
    ),
    Rule(
        "05-deeper-layers-beat-embeddings",
        "deeper layers make better features than the embeddings",
        paper="dev F1 91.0 (embeddings) to 96.1 (concat last four)",
        source="Devlin et al. (2019), Table 7",
        metric="span F1 (points) of a linear tagger on frozen features",
        data=_FEW_LABELS_DATA,
        compared="the weakest Transformer-layer choice",
        baseline="embeddings",
        margin=10,
        seeds=Seeds("probe fit"),
        gates=(Gate("the weakest Transformer-layer choice", "chance", 100 * _FLOOR_MARGIN),),
    ),
    Rule(
        "05-fine-tuning-beats-features",
        "fine-tuning is at least as good as the best frozen features",
        paper="dev F1 96.4 (fine-tuned) vs 96.1 (concat last four, the best frozen)",
        source="Devlin et al. (2019), Table 7",
        metric="span F1 (points), each recipe at its rate chosen on dev",
        data=_FEW_LABELS_DATA,
        compared="fine-tuning",
        baseline="concat last four",
        seeds=Seeds("fine-tuning"),
        gates=(
            Gate("fine-tuning", "chance", 100 * _FLOOR_MARGIN),
            Gate("concat last four", "chance", 100 * _FLOOR_MARGIN),
        ),
    ),
    Demonstration(
        "05-in-domain-beats-general",
        "in-domain pretraining beats general pretraining, frozen and fine-tuned",
        paper="SciBERT about 2 points ahead of BERT-Base in both columns",
        source="Beltagy et al. (2019), Table 1",
        shows="span F1 of an encoder pretrained on the language, of one pretrained on other text (no "
        "better than none: not a general model) and of a never-pretrained one",
    ),
    Rule(
        "05-further-pretraining-helps",
        "further pretraining on the domain helps",
        paper="in all four domains",
        source="Gururangan et al. (2020)",
        metric="span F1, fine-tuned",
        data="context entities",
        compared="general + further pretraining",
        baseline="general",
        seeds=Seeds("pretraining"),
        quick="one pretraining run of each encoder (chapter 04's), and only fine-tuning seeds vary",
        gates=(
            Gate("general + further pretraining", "no pretraining", _FLOOR_MARGIN),
            Gate("general", "no pretraining", _FLOOR_MARGIN),
        ),
    ),
    Rule(
        "05-adapters-near-full",
        "adapters come within a fraction of a point of full fine-tuning",
        paper="within 0.4 GLUE points with 3.6% of the parameters",
        source="Houlsby et al. (2019)",
        metric="span F1",
        data=_FEW_LABELS_DATA,
        compared="adapters",
        baseline="full fine-tuning",
        factor=0.99,
        seeds=Seeds("fine-tuning"),
        gates=(Gate("adapters", "chance", _FLOOR_MARGIN),),
    ),
    Rule(
        "05-prompt-tuning-needs-scale",
        "prompt tuning is competitive only at very large scale",
        paper="matches fine-tuning only near 10B parameters",
        source="Lester et al. (2021), Figure 1",
        metric="span F1",
        data=_FEW_LABELS_DATA,
        compared="prompt tuning",
        baseline="full fine-tuning",
        higher=False,
        margin=0.05,
        seeds=Seeds("fine-tuning"),
        quick="a trend over model size, and the chapter measures one size: only that size's gap is shown",
        gates=(Gate("prompt tuning", "chance", _FLOOR_MARGIN),),
    ),
)


def adapt_recipe(adapt: Callable[[nn.Module], nn.Module] | None) -> Any:
    """``adapt`` as the cache describes a call's arguments (:func:`~lecture_lib.cache.describe`): the function or
    class by its name and code, and a ``functools.partial`` (which the cache does not describe) as its function
    with its arguments; ``None`` for none.

    >>> from functools import partial
    >>> from lecture_lib.finetuning.peft import add_adapters
    >>> recipe = adapt_recipe(partial(add_adapters, bottleneck=8))
    >>> recipe["partial"]["code"], recipe["keywords"]
    ('lecture_lib.finetuning.peft.add_adapters', {'bottleneck': 8})
    """
    if isinstance(adapt, functools.partial):
        return {"partial": describe(adapt.func), "args": describe(adapt.args), "keywords": describe(adapt.keywords)}
    return describe(adapt)


def cached_finetune_from(
    task: Task,
    encoder: BertModel | BertConfig,
    config: TrainConfig,
    seed: int = 0,
    adapt: Callable[[nn.Module], nn.Module] | None = None,
    *,
    dropout: float = 0.0,
) -> FinetuneResult:
    """:func:`~lecture_lib.finetuning.finetune.finetune_from` with its trained model cached: the same model, history
    and seconds on every call, on the default device (a run read back scores where the trained one did), the
    scores computed on ``task``'s test set each time. A module function of its arguments alone, so it runs in a
    worker of :func:`~lecture_lib.runtime.parallel_map` as ``finetune_from`` does.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    path = _fine_tuned(
        task, task.train, task.head, task.num_labels, encoder, config, seed, dropout, adapt, adapt_recipe(adapt)
    )
    model = new_head(task, encoder, seed=seed, dropout=dropout)
    model = adapt(model) if adapt else model
    model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
    model.to(default_device())
    run = json.loads((path / "run.json").read_text())
    return FinetuneResult(model, score(task, model), run["seconds"], History.from_dict(run["history"]))


@cached_build(load=Path, ignore=("task", "adapt"))
def _fine_tuned(
    path: Path,
    task: Task,
    train: EncodedTask,
    head: type,
    num_labels: int,
    encoder: BertModel | BertConfig,
    config: TrainConfig,
    seed: int,
    dropout: float,
    adapt: Callable[[nn.Module], nn.Module] | None,
    adapt_name: Any,
) -> None:
    """The model :func:`cached_finetune_from` trains, saved at ``path``: named by the task's training part (its
    data, head and labels; its test set is scored afresh) and by ``adapt`` through ``adapt_name``."""
    trained = finetune_from(task, encoder, config, seed, adapt, dropout=dropout)
    path.mkdir(parents=True, exist_ok=True)
    torch.save(trained.model.state_dict(), path / "model.pt")
    (path / "run.json").write_text(json.dumps({"seconds": trained.seconds, "history": asdict(trained.history)}))


@cached_call
def cached_frozen_and_fine_tuned(
    task: Task,
    encoder: BertModel | BertConfig,
    tagger_config: TrainConfig,
    finetune_config: TrainConfig,
    tagger_seed: int = 0,
    finetune_seed: int = 0,
    *,
    dropout: float = 0.0,
) -> dict[str, float]:
    """:func:`~lecture_lib.finetuning.features.frozen_and_fine_tuned`'s two span F1s, computed once per call (the
    task's data, the encoder's weights or a random one's config, the budgets, the seeds, the dropout), then read from the cache. A module
    function, for :func:`~lecture_lib.runtime.parallel_map`.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    return frozen_and_fine_tuned(
        task, encoder, tagger_config, finetune_config, tagger_seed, finetune_seed, dropout=dropout
    )
