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

import copy
import functools
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from lecture_lib.cache import cached_build, cached_call, compute_all, describe
from lecture_lib.chapters import course_language
from lecture_lib.chapters.course_language import CourseLanguageConfig, synthetic_documents, synthetic_pretrained_bert
from lecture_lib.config import merge_dicts
from lecture_lib.data.synthetic import GrammarConfig, SyntheticLanguage
from lecture_lib.finetuning.features import frozen_and_fine_tuned
from lecture_lib.finetuning.finetune import FinetuneResult, Task, finetune_from, new_head, score
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.pretraining import PretrainingData, PretrainResult, evaluate, pretrain
from lecture_lib.profile import pick
from lecture_lib.reproductions import Demonstration, Gate, Rule, Seeds
from lecture_lib.runtime import default_device, invoke, parallel_map, seed_of
from lecture_lib.tokenization import WordPieceTokenizer
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


_DOMAIN_DATA = (
    "context entities with held-out names; two texts of the language cut by one vocabulary: the general text "
    "(its grammar, few names, no facts) and the domain (facts about people)"
)


def _domain_gates(*models: str) -> tuple[Gate, ...]:
    """Section 8's gates: each compared encoder beats a never-pretrained one by :data:`_FLOOR_MARGIN` on every seed."""
    return tuple(Gate(model, "no pretraining", _FLOOR_MARGIN) for model in models)


def _in_domain_beats_general(column: str, metric: str, scores: str) -> Rule:
    """SciBERT's comparison in one of Table 1's two columns (``"fine-tuned"`` or ``"frozen"``), over pretraining
    seeds, gated by a never-pretrained encoder."""
    return Rule(
        "05-in-domain-beats-general" + ("-frozen" if column == "frozen" else ""),
        f"in-domain pretraining beats general pretraining, {column}",
        paper=f"SciBERT {scores} (Table 1's {column} columns, the Average row)",
        source="Beltagy et al. (2019), Table 1",
        metric=metric,
        data=_DOMAIN_DATA,
        compared="in-domain",
        baseline="general",
        seeds=Seeds("pretraining"),
        gates=_domain_gates("in-domain", "general"),
    )


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
    _in_domain_beats_general("fine-tuned", "span F1, fine-tuned", "79.27 against BERT-Base 77.16"),
    _in_domain_beats_general(
        "frozen", "span F1 of a linear tagger on the frozen last layer", "76.01 against BERT-Base 73.58"
    ),
    Rule(
        "05-further-pretraining-helps",
        "further pretraining on the domain helps",
        paper="in all four domains",
        source="Gururangan et al. (2020)",
        metric="span F1, fine-tuned",
        data=_DOMAIN_DATA,
        compared="general + further",
        baseline="general",
        seeds=Seeds("pretraining"),
        gates=_domain_gates("general + further", "general"),
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


# ---------------------------------------------------------------- section 8: domain-adaptive pretraining

# Section 8's two texts, each in documents of three sentences. The domain is the course's documents: facts about
# people (where they live, who employs them) and free sentences that name them. The general text is the same
# language's free grammar with no facts, and a surname in about one sentence in thirty: it teaches the grammar and
# the common words, and little about names. Both are cut by one WordPiece vocabulary learned from the two together, so
# that only the text differs. Chapter 04's recipe for the language (two layers of width 64, 600 steps of 32 pairs),
# in ``quick``; the further pretraining adds half as many steps on the domain.
GENERAL_GRAMMAR = GrammarConfig(p_fact=0.0, p_name_subject=0.02, p_entity_object=0.02)
DOMAIN_QUICK = dict(
    pretrain=dict(
        model=dict(num_hidden_layers=2, intermediate_size=256, initializer_range=0.1),
        data=dict(vocab_size=700),
        train=dict(steps=600, batch_size=32, warmup_steps=60),
    ),
    documents=2000,
)
DOMAIN_FULL = dict(
    pretrain=dict(
        model=dict(hidden_size=256, num_hidden_layers=4, intermediate_size=1024),
        data=dict(vocab_size=700),
        train=dict(steps=4000, batch_size=128, warmup_steps=400),
    ),
    documents=20_000,
)
DOMAIN_ENCODERS = ("in-domain", "general", "general + further", "never pretrained")


def domain_recipe(seed: int) -> CourseLanguageConfig:
    """The pretraining recipe of section 8's encoders (:data:`DOMAIN_QUICK` or :data:`DOMAIN_FULL`), with
    pretraining seed ``seed``: the documents of both texts, the vocabulary, the weights and the masks.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    return course_language.chapter_config(
        **merge_dicts(pick(quick=DOMAIN_QUICK, full=DOMAIN_FULL), dict(pretrain=dict(seed=seed)))
    )


def domain_texts(recipe: CourseLanguageConfig) -> dict[str, tuple[list[list[str]], list[list[str]]]]:
    """``"in-domain"`` and ``"general"``: the training and held-out documents of each text (lists of sentences),
    as many of each, drawn with ``recipe``'s pretraining seed.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    domain = [[[s.text for s in doc] for doc in docs] for docs in synthetic_documents(recipe)]
    general = SyntheticLanguage(recipe.language_seed, GENERAL_GRAMMAR)
    per_document = recipe.sentences_per_document

    def documents(n: int, seed: int) -> list[list[str]]:
        sentences = [s.text for s in general.sentences(n * per_document, seed_of("general text", seed))]
        return [sentences[i : i + per_document] for i in range(0, len(sentences), per_document)]

    seed = recipe.pretrain.seed
    return {
        "in-domain": tuple(domain),
        "general": (documents(len(domain[0]), seed), documents(len(domain[1]), seed + 1)),
    }


@cached_call
def domain_adaptation_run(recipe: CourseLanguageConfig, tasks: CourseLanguageConfig, text: str) -> dict[str, dict]:
    """Section 8's encoders of one pretraining seed (``recipe``'s), scored on context entities (``tasks``'
    examples and budgets, both seeded by the pretraining seed): ``text="in-domain"`` pretrains on the domain and
    returns ``"in-domain"`` and ``"never pretrained"`` (the same shape from random weights); ``text="general"``
    pretrains on the general text, then a copy further on the domain, and returns ``"general"`` and
    ``"general + further"``. Each encoder gets the ``"frozen"`` and ``"fine-tuned"`` span F1 of
    :func:`~lecture_lib.finetuning.features.frozen_and_fine_tuned`, and a pretrained one its held-out
    ``"mlm_accuracy"`` on the domain's documents. Both texts are cut by one vocabulary learned from the two.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    if text not in ("in-domain", "general"):
        raise ValueError(f"expected text 'in-domain' or 'general', got {text!r}")
    texts = domain_texts(recipe)
    all_sentences = (s for train, _ in texts.values() for doc in train for s in doc)
    tokenizer = WordPieceTokenizer.train(all_sentences, recipe.pretrain.data.vocab_size)
    pretrain_config, seed = recipe.pretrain, recipe.pretrain.seed
    domain = PretrainingData(pretrain_config, *texts["in-domain"], tokenizer)
    first = domain if text == "in-domain" else PretrainingData(pretrain_config, *texts["general"], tokenizer)
    model = pretrain(pretrain_config, data=first, progress=False).model
    encoders = {text: model}
    if text == "general":
        steps = pretrain_config.train.steps // 2
        further = replace(pretrain_config, train=replace(pretrain_config.train, steps=steps, warmup_steps=steps // 10))
        encoders["general + further"] = pretrain(further, data=domain, model=copy.deepcopy(model), progress=False).model
    task = course_language.build_harder_tasks(tokenizer, tasks, names=("context_ner",))["context_ner"]
    budgets = (tasks.feature_finetune, tasks.seeded_finetune, seed, seed)
    scores = {
        name: {
            **frozen_and_fine_tuned(task, model.bert, *budgets),
            "mlm_accuracy": evaluate(model, domain.eval_batches())["mlm_accuracy"],
        }
        for name, model in encoders.items()
    }
    if text == "in-domain":
        scores["never pretrained"] = frozen_and_fine_tuned(task, pretrain_config.model, *budgets)
    return scores


def domain_adaptation_calls(tasks: CourseLanguageConfig) -> list[tuple]:
    """The calls of :func:`domain_adaptation_run` that section 8 reads: both texts on each seed of ``tasks``.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    return [(domain_recipe(seed), tasks, text) for seed in tasks.seeds for text in ("general", "in-domain")]


def domain_adaptation_scores(tasks: CourseLanguageConfig) -> dict[str, dict[str, list[float]]]:
    """Section 8's table: for each encoder of :data:`DOMAIN_ENCODERS`, its ``"frozen"`` and ``"fine-tuned"`` span F1
    (and a pretrained one's ``"mlm_accuracy"``) on each seed of ``tasks``, read from the cache or computed in the
    workers of :func:`~lecture_lib.cache.compute_all`.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    runs = compute_all(domain_adaptation_run, domain_adaptation_calls(tasks), desc="domain-adaptive pretraining")
    merged = [runs[i] | runs[i + 1] for i in range(0, len(runs), 2)]  # one seed's two calls
    return {
        name: {key: [seed_runs[name][key] for seed_runs in merged] for key in merged[0][name]}
        for name in DOMAIN_ENCODERS
    }


def pretrain_chapter_models(config: CourseLanguageConfig, *, workers: int | None = None) -> PretrainResult:
    """Section 2's BERT (:func:`~lecture_lib.chapters.course_language.synthetic_pretrained_bert`) in one worker,
    section 8's runs (:func:`domain_adaptation_calls`) in the others and then in the first when it is free: each
    trained once, then read from the cache. Returns section 2's BERT.

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    jobs = [
        (synthetic_pretrained_bert, config),
        *((domain_adaptation_run, *call) for call in domain_adaptation_calls(config)),
    ]
    return parallel_map(invoke, jobs, workers=workers, desc="pretraining")[0]
