"""Fine-tuning BERT on the four task shapes: the chapter's sizes, a BERT pretrained on the synthetic
language (trained once, then read from the disk cache), and the loop that fine-tunes and scores.

Which pretraining: the tasks are written in the synthetic language, so the encoder is pretrained on
documents of that language (chapter 04's recipe: a WordPiece vocabulary learned from the text,
masked LM with 80/10/10, next-sentence prediction, AdamW with warm-up and linear decay). A BERT
pretrained on the documentation corpus would share neither vocabulary nor domain with the tasks,
and in the quick profile's minute of pretraining it could not learn enough English to help;
pretraining on the language itself is the small-scale version of what BERT did (pretrain on text of
the kind the tasks use), and what it learns (agreement, the names of the world, where names occur)
is exactly what the tasks test. The world's people are split: fine-tuning sees some of them, the test
sets name only the others, whom only pretraining has shown the model.

Taught in: 05_bert_finetuning ("A BERT pretrained on the language", "Pretrained or from scratch").
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
import torch
from torch import nn

from lecture_lib.bert import BertConfig, BertModel
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from lecture_lib.metrics import accuracy, matthews_corrcoef, span_f1, squad_scores
from lecture_lib.pretrain import (
    PretrainConfig,
    PretrainingData,
    PretrainResult,
    cached_pretraining,
    fingerprint,
)
from lecture_lib.profile import pick
from lecture_lib.runtime import seed_everything
from lecture_lib.tasks import (
    ACCEPTABILITY_LABELS,
    ENTAILMENT_LABELS,
    NER_LABELS,
    EncodedTask,
    Tokenizer,
    acceptability_examples,
    best_spans,
    encode_classification,
    encode_qa,
    encode_tagging,
    entailment_examples,
    ner_examples,
    qa_examples,
    split_people,
    word_tags,
)
from lecture_lib.train import History, TrainConfig, train

TASK_NAMES = ("acceptability", "entailment", "ner", "qa")


@dataclass
class ChapterConfig:
    """The chapter's sizes: the pretraining recipe, the data, and the fine-tuning budget (per task).

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """

    pretrain: PretrainConfig
    language_seed: int = 0
    documents: int = 3000  # synthetic documents for pretraining
    sentences_per_document: int = 3
    train_examples: int = 1000  # per task
    test_examples: int = 400
    steps: int = 150  # fine-tuning steps per task, the same for pretrained and from-scratch models
    batch_size: int = 32
    lr: float = 1e-3
    head_lr: float = 1e-2  # feature-based taggers and cheap fine-tuning: few or freshly initialised weights
    dropout: float = 0.0  # while fine-tuning, as in pretraining: at these budgets dropout only slows learning
    warmup_fraction: float = 0.1
    max_length: int = 64
    people_per_passage: int = 2
    sentences_per_passage: int = 3
    num_threads: int | None = None  # PyTorch CPU threads while training (None: leave them)
    seed: int = 0


def chapter_config(**overrides) -> ChapterConfig:
    """The active profile's sizes.

    ``quick``: a 4-layer, H = 64 BERT with a 600-token WordPiece vocabulary, pretrained for 800 steps
    of 64 pairs on 4,000 synthetic documents of three sentences; each task fine-tuned on 1,000
    examples for 150 steps of 32. Both on one CPU thread: for matrices this small a second thread
    mostly waits, and on a busy machine it can make a run several times slower.
    ``full``: 6 layers of H = 256 (BERT-mini's width), 5,000 pretraining steps on 50,000 documents,
    8,000 training examples and 2,000 steps per task.

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    sizes = pick(
        quick=dict(
            pretrain=dict(vocab_size=600, seq_len=64, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                          intermediate_size=128, dropout=0.0, steps=800, batch_size=64, lr=2e-3, warmup_steps=80,
                          eval_every=0, eval_pairs=256, num_threads=1),
            documents=4000, train_examples=1000, test_examples=400, steps=150, batch_size=32, lr=1e-3,
            num_threads=1),
        full=dict(
            pretrain=dict(vocab_size=1000, seq_len=128, hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
                          intermediate_size=1024, steps=5000, batch_size=128, lr=5e-4, warmup_steps=500,
                          eval_every=500, eval_pairs=1024),
            documents=50_000, train_examples=8000, test_examples=1000, steps=2000, batch_size=32, lr=2e-4),
    )
    pretrain_sizes = {**sizes.pop("pretrain"), **overrides.pop("pretrain", {})}
    return ChapterConfig(pretrain=PretrainConfig(**pretrain_sizes), **{**sizes, **overrides})


# ---------------------------------------------------------------- pretraining on the synthetic language


def synthetic_pretraining_data(config: ChapterConfig) -> PretrainingData:
    """Chapter 04's masked next-sentence batches, cut from documents of the synthetic language.

    The held-out documents (for the MLM and NSP accuracies) are drawn with another seed.

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    lang = SyntheticLanguage(config.language_seed)
    pretrain_config = config.pretrain
    test_size = max(2, round(config.documents * pretrain_config.held_out_fraction))
    train_docs, test_docs = (
        [[s.text for s in doc] for doc in lang.documents(n, seed, config.sentences_per_document)]
        for n, seed in ((config.documents, pretrain_config.seed), (test_size, pretrain_config.seed + 1)))
    return PretrainingData(pretrain_config, train_docs, test_docs)


def synthetic_pretrained_bert(config: ChapterConfig | None = None, *, progress: bool = False) -> PretrainResult:
    """A BERT pretrained on the synthetic language: trained once per recipe, then read from the disk cache
    (``$LECTURE_CACHE`` or ``~/.cache/lecture_lib``, as chapter 04's model).

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    config = config or chapter_config()
    recipe = {"pretrain": fingerprint(config.pretrain), "language_seed": config.language_seed,
              "documents": config.documents, "sentences_per_document": config.sentences_per_document}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    return cached_pretraining(f"synthetic-bert-{key}", config.pretrain, lambda: synthetic_pretraining_data(config),
                              progress=progress)


# ---------------------------------------------------------------- the four tasks


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


def build_tasks(tokenizer: Tokenizer, config: ChapterConfig | None = None) -> dict[str, Task]:
    """The four tasks, trained on sentences about one set of people and tested on sentences about others.

    Taught in: 05_bert_finetuning ("Four task shapes").
    """
    config = config or chapter_config()
    lang = SyntheticLanguage(config.language_seed)
    train_people, test_people = split_people(lang.world)
    n, m, length = config.train_examples, config.test_examples, config.max_length
    tasks = {}
    for name, build, encode, head, num_labels in (
        ("acceptability", acceptability_examples,
         lambda e: encode_classification(e, tokenizer, length, len(ACCEPTABILITY_LABELS)),
         BertForSequenceClassification, len(ACCEPTABILITY_LABELS)),
        ("entailment", entailment_examples,
         lambda e: encode_classification(e, tokenizer, length, len(ENTAILMENT_LABELS)),
         BertForSequenceClassification, len(ENTAILMENT_LABELS)),
        ("ner", ner_examples, lambda e: encode_tagging(e, tokenizer, length), BertForTokenClassification,
         len(NER_LABELS)),
        ("qa", lambda lang, k, seed, people: qa_examples(lang, k, seed, people, config.people_per_passage,
                                                              config.sentences_per_passage),
         lambda e: encode_qa(e, tokenizer, length), BertForQuestionAnswering, 2),
    ):
        train_examples = build(lang, n, config.seed + 1, train_people)
        test_examples = build(lang, m, config.seed + 2, test_people)
        tasks[name] = Task(name, head, num_labels, encode(train_examples), encode(test_examples), test_examples)
    return tasks


@torch.no_grad()
def predict(model: nn.Module, encoded: EncodedTask, batch_size: int = 128) -> dict[str, torch.Tensor]:
    """The model's logits on every example, in eval mode: ``logits`` (N, K) or (N, T, K), or
    ``start_logits`` and ``end_logits`` (N, T).

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    model.eval()
    device = next(model.parameters()).device
    labels = ("labels", "start_positions", "end_positions")
    inputs = {k: v for k, v in encoded.features.items() if k not in labels}
    outputs: dict[str, list[torch.Tensor]] = {}
    for i in range(0, len(encoded), batch_size):
        out = model(**{k: v[i:i + batch_size].to(device) for k, v in inputs.items()})
        for name in ("logits", "start_logits", "end_logits"):
            if hasattr(out, name):
                outputs.setdefault(name, []).append(getattr(out, name).float().cpu())
    return {k: torch.cat(v) for k, v in outputs.items()}


def score(task: Task, model: nn.Module) -> dict[str, float]:
    """The task's metrics on its test set: accuracy and MCC; accuracy; span F1; exact match and F1.

    Taught in: 05_bert_finetuning ("Scoring the four tasks").
    """
    out = predict(model, task.test)
    if task.name == "acceptability":
        predicted, labels = out["logits"].argmax(-1), task.test.features["labels"]
        return {"accuracy": accuracy(predicted, labels), "mcc": matthews_corrcoef(predicted, labels)}
    if task.name == "entailment":
        return {"accuracy": accuracy(out["logits"].argmax(-1), task.test.features["labels"])}
    if task.name == "ner":
        return {"f1": span_f1([e.tags for e in task.test_examples], word_tags(out["logits"], task.test))["f1"]}
    spans = best_spans(out["start_logits"], out["end_logits"], task.test)
    predicted = [" ".join(e.passage[a:b]) for e, (a, b) in zip(task.test_examples, spans)]
    return squad_scores(predicted, [e.answer for e in task.test_examples])


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


def finetune(task: Task, model: nn.Module, config: ChapterConfig | None = None) -> FinetuneResult:
    """Fine-tune ``model`` (a head, pretrained or not) on ``task`` with the chapter's budget; score it.

    AdamW with a linear warm-up and decay (as BERT's fine-tuning), the same steps, batches and learning
    rate whatever the model, so that pretrained and from-scratch runs spend the same budget.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    config = config or chapter_config()
    seed_everything(config.seed)
    start = time.perf_counter()
    train_config = TrainConfig(steps=config.steps, lr=config.lr, schedule="linear", progress=False,
                               warmup_steps=round(config.warmup_fraction * config.steps),
                               num_threads=config.num_threads)
    history = train(model, task.train.batches(config.batch_size, config.seed), task_loss, train_config)
    scores = score(task, model)
    return FinetuneResult(model, scores, time.perf_counter() - start, history)


def new_head(task: Task, encoder: BertModel | BertConfig, config: ChapterConfig | None = None) -> nn.Module:
    """The task's head on a copy of a pretrained encoder, or (given a BERT config) on a randomly
    initialised one of the same shape; either way with the chapter's fine-tuning dropout.

    Taught in: 05_bert_finetuning ("Pretrained or from scratch").
    """
    config = config or chapter_config()
    seed_everything(config.seed)  # the same initial weights, whatever ran before
    if isinstance(encoder, BertConfig):
        encoder = BertModel(encoder)
    return task.head.from_encoder(encoder, task.num_labels, dropout=config.dropout)
