"""Pretraining a BERT from scratch: the recipe as a nested config, the data stream, the loss, the
evaluation, the cached run, and a command line that walks the config.

A run is three things: a batch stream from the objective (:class:`PretrainingData`: pairs cut from
documents, masked as :class:`ObjectiveConfig` says), a model (:class:`BertForPreTraining` of
``config.model``, or the pretraining class of its family: :class:`AlbertForPreTraining` for an
:class:`AlbertConfig`) and a :class:`~lecture_lib.train.TrainConfig` (from ``config.train``). The recipe
at small scale is BERT's: a WordPiece vocabulary learned from the training documents (chapter 03),
next-sentence pairs cut from those documents, masked LM with 15% selection and the 80/10/10 rule, AdamW
with warm-up and linear decay. Held-out documents (whole documents, never trained on) give the MLM and
NSP accuracies.

Command line (a chapter's :func:`main` with its sizes; resumes from ``OUT/checkpoint`` when rerun; several
GPUs through ``torchrun``)::

    python -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small --profile full
    torchrun --nproc_per_node 8 -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small \\
        --profile full --train.compile true --train.steps 100000

``OUT`` then holds ``config.json``, ``model.safetensors`` and ``vocab.txt`` in Hugging Face's layout
(``BertForPreTraining.from_pretrained(OUT)`` here, or ``transformers``' own ``from_pretrained``),
plus ``history.json`` and ``pretrain_config.json``.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs"),
07_albert ("Sentence-order prediction").
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import tempfile
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn

from lecture_lib.attention import causal_mask
from lecture_lib.cache import atomic_write, cached
from lecture_lib.config import (
    FieldError,
    FlagParser,
    OneOf,
    Range,
    build_fields,
    build_part,
    check_fields,
    flag_type,
    merge_dicts,
    rule_of,
    same_rule_as,
)
from lecture_lib.data.corpus import split_corpus
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.metrics import accuracy_at_masks
from lecture_lib.models.albert import AlbertConfig, AlbertForPreTraining
from lecture_lib.models.bert import BertConfig, BertForPreTraining, mlm_accuracy
from lecture_lib.models.hf import PreTrainedModule
from lecture_lib.objectives.masking import (
    MaskedDataset,
    MaskingStrategy,
    mask_tokens,
)
from lecture_lib.objectives.sentence_pairs import (
    NUM_SPECIAL_IN_PAIR,
    collate_pairs,
    make_order_pairs,
    make_pairs,
)
from lecture_lib.profile import ENV_VAR, PROFILES, current
from lecture_lib.runtime import (
    default_device,
    epoch_batch,
    existing_device,
    generator,
    module_device,
    seed_everything,
    to_device,
)
from lecture_lib.tokenization import WordPieceTokenizer
from lecture_lib.train import (
    History,
    TrainConfig,
    distributed_context,
    train,
)

RESULT_FILES = ("config.json", "model.safetensors", "vocab.txt", "history.json", "pretrain_config.json")
# The sentence-pair objectives a run can add to masked LM (None: MLM only): how pairs are cut, and the key
# of their labels in the collated tensors.
PAIR_TASKS = {"nsp": (make_pairs, "next_sentence_label"), "sop": (make_order_pairs, "sentence_order_label")}


@dataclass(frozen=True)
class PretrainingHead:
    """A family's pretraining class and its sentence-pair head: the label argument, the logits field, the metric."""

    model_class: type[PreTrainedModule]
    label: str
    logits: str
    metric: str


# Each family's own pair head reads whichever pairs the objective cuts (ALBERT's SOP head can learn NSP).
PRETRAINING_HEADS = {
    "bert": PretrainingHead(BertForPreTraining, "next_sentence_label", "seq_relationship_logits", "nsp_accuracy"),
    "albert": PretrainingHead(AlbertForPreTraining, "sentence_order_label", "sop_logits", "sop_accuracy"),
}


def pretraining_head(model_config: BertConfig | AlbertConfig) -> PretrainingHead:
    """The pretraining class and pair head of ``model_config``'s family.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    return PRETRAINING_HEADS[model_config.family.model_type]


@dataclass
class DataConfig:
    """The text a run reads: a WordPiece vocabulary of ``vocab_size`` tokens learned from the training
    documents, pairs of at most ``seq_len`` positions, ``held_out_fraction`` of the documents held out
    and ``eval_pairs`` of their pairs evaluated.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    vocab_size: int = field(default=3000, metadata=Range(1).rule())
    seq_len: int = field(default=64, metadata=Range(NUM_SPECIAL_IN_PAIR + 2,
                                                    why="[CLS], two [SEP] and a token per segment").rule())
    held_out_fraction: float = field(default=0.1, metadata=Range(0, 1, open=True).rule())
    eval_pairs: int = field(default=512, metadata=Range(1).rule())

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class ObjectiveConfig:
    """What the model learns to predict: masked LM, selecting ``mlm_probability`` of the positions and
    replacing them by the ``masking`` rule (MASK/SAME/RND in percent, a :class:`MaskingStrategy` name),
    drawn anew each epoch (``dynamic_masking``) or fixed in ``static_copies`` copies; plus the
    sentence-pair task ``pairs`` (``"nsp"``, ``"sop"`` (sentence order), or ``None`` for masked LM only).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The masking ablation").
    """

    mlm_probability: float = field(default=0.15, metadata=Range(0, 1).rule())
    masking: str = "80/10/10"
    dynamic_masking: bool = True
    static_copies: int = field(default=1, metadata=Range(1).rule())
    pairs: str | None = field(default="nsp", metadata=OneOf(tuple(PAIR_TASKS)).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        try:
            MaskingStrategy.from_name(self.masking)  # the rule is the strategy's own: three percentages summing to 100
        except ValueError as error:
            raise FieldError(["masking"], str(error)) from None


@dataclass
class OptimizationConfig:
    """How the weights are fitted: ``steps`` AdamW steps of ``batch_size`` pairs, peak learning rate ``lr``
    after ``warmup_steps``, then the ``schedule`` (BERT's linear decay), clipping at ``grad_clip``;
    evaluation every ``eval_every`` steps (0: at the end only); ``precision``, ``compile`` and
    ``num_threads`` as in :class:`~lecture_lib.train.TrainConfig`.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs").
    """

    steps: int = field(default=300, metadata=same_rule_as(TrainConfig, "steps"))
    batch_size: int = field(default=32, metadata=Range(1).rule())
    lr: float = field(default=2e-3, metadata=same_rule_as(TrainConfig, "lr"))
    warmup_steps: int = field(default=30, metadata=same_rule_as(TrainConfig, "warmup_steps"))
    weight_decay: float = field(default=0.01, metadata=same_rule_as(TrainConfig, "weight_decay"))
    schedule: str = field(default="linear", metadata=same_rule_as(TrainConfig, "schedule"))
    grad_clip: float | None = field(default=1.0, metadata=same_rule_as(TrainConfig, "grad_clip"))
    eval_every: int = field(default=0, metadata=same_rule_as(TrainConfig, "eval_every"))
    precision: str = field(default="auto", metadata=same_rule_as(TrainConfig, "precision"))
    compile: bool = False
    num_threads: int | None = field(default=None, metadata=same_rule_as(TrainConfig, "num_threads"))

    def __post_init__(self) -> None:
        check_fields(self)

    def train_config(self, **run: Any) -> TrainConfig:
        """The training loop's config: these settings plus ``run``'s (progress, checkpoints, fused)."""
        recipe = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "batch_size"}
        return TrainConfig(**recipe, **run)


# The model's fields that the data decides: the tokenizer's vocabulary and the sequence length.
DERIVED_FROM_DATA = {("model", "vocab_size"): ("data", "vocab_size"),
                     ("model", "max_position_embeddings"): ("data", "seq_len")}


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on, by part: the ``model`` (a :class:`BertConfig` or an
    :class:`AlbertConfig`, whose
    ``vocab_size`` and ``max_position_embeddings`` must equal ``data``'s ``vocab_size`` and ``seq_len``),
    the ``data``, the ``objective``, the optimisation (``train``) and the ``seed`` of all of them.
    :meth:`from_dict` builds one from nested dicts and fills the model's two derived sizes.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    model: BertConfig | AlbertConfig
    data: DataConfig = field(default_factory=DataConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    train: OptimizationConfig = field(default_factory=OptimizationConfig)
    seed: int = field(default=0, metadata=Range(0).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        for (part, name), (source, size) in DERIVED_FROM_DATA.items():
            ours, theirs = getattr(getattr(self, part), name), getattr(getattr(self, source), size)
            if ours != theirs:
                raise ValueError(f"expected {part}.{name} = {source}.{size} = {theirs}, got {ours}: "
                                 f"leave {part}.{name} out and set {source}.{size}")

    @classmethod
    def from_dict(cls, *layers: dict[str, Any]) -> "PretrainConfig":
        """A config from nested dicts (``{"model": {...}, "train": {"steps": 100}, "seed": 1}``), later
        ``layers`` overriding earlier ones field by field; the model's derived sizes come from ``data``.
        The model's ``model_type`` (default ``"bert"``) names its family."""
        values = merge_dicts(*layers)
        data = build_part("data", DataConfig, values.get("data", {}))
        derived = {name: getattr(data, size) for (_, name), (_, size) in DERIVED_FROM_DATA.items()}
        model = values.get("model", {})
        if isinstance(model, dict):
            model = dict(model)
            model_type = model.pop("model_type", "bert")
            if model_type not in PRETRAINING_HEADS:
                raise ValueError(f"expected model.model_type in {sorted(PRETRAINING_HEADS)}, got {model_type!r}")
            config_class = PRETRAINING_HEADS[model_type].model_class.family.config_class
            model = build_part("model", config_class, {**derived, **model})
        return build_fields(cls, {**values, "model": model, "data": data})

    @classmethod
    def from_nested(cls, values: dict[str, Any]) -> "PretrainConfig":
        """:meth:`from_dict` of one dict: how :func:`~lecture_lib.config.build_dataclass` builds a recipe
        held in a bigger config (a chapter's ``pretrain=dict(train=dict(steps=100))``)."""
        return cls.from_dict(values)


def config_dict(config: PretrainConfig) -> dict[str, Any]:
    """``asdict(config)`` with the model's ``model_type``: what :meth:`PretrainConfig.from_dict` reads back."""
    return {**asdict(config), "model": {"model_type": config.model.family.model_type, **asdict(config.model)}}


# ---------------------------------------------------------------- data


def tokenize_documents(tokenizer: WordPieceTokenizer, documents: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Each document's sentences as lists of token ids (no special tokens)."""
    return [[tokenizer.encode(sentence) for sentence in sentences] for sentences in documents]


class PretrainingData:
    """The objective's batch stream: pairs cut from documents, masked (with the pair labels of
    ``config.objective.pairs``, under the name the model's pair head reads): ``batch(step)`` for training,
    ``eval_batches`` held out.

    ``train_documents`` and ``test_documents`` are lists of documents, each a list of sentences
    (strings). Without a ``tokenizer``, a WordPiece vocabulary of ``config.data.vocab_size`` tokens is
    learned from the training sentences (chapter 03). Training pairs are shuffled anew each epoch;
    the mask of each pair is drawn anew each epoch (``dynamic_masking``) or fixed at preprocessing.
    The held-out pairs carry masks fixed once per strategy, so every evaluation of every model sees
    the same corrupted inputs. :meth:`from_corpus` builds it from the embedded Python documentation.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    def __init__(self, config: PretrainConfig, train_documents: Sequence[Sequence[str]],
                 test_documents: Sequence[Sequence[str]], tokenizer: WordPieceTokenizer | None = None) -> None:
        self.config = config
        if tokenizer is None:
            tokenizer = WordPieceTokenizer.train([s for doc in train_documents for s in doc], config.data.vocab_size)
        self.tokenizer = tokenizer
        seq_len = config.data.seq_len
        budget = seq_len - NUM_SPECIAL_IN_PAIR
        cut, self.label_key = PAIR_TASKS[config.objective.pairs or "nsp"]
        ids = dict(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                   pad_token_id=tokenizer.pad_token_id, label_name=self.label_key)
        train = collate_pairs(cut(tokenize_documents(tokenizer, train_documents), budget, seed=config.seed),
                              length=seq_len, **ids)
        test_pairs = cut(tokenize_documents(tokenizer, test_documents), budget, seed=config.seed + 1)
        self._hold(train, collate_pairs(test_pairs[: config.data.eval_pairs], length=seq_len, **ids))

    def _hold(self, train: dict[str, torch.Tensor], test: dict[str, torch.Tensor], masks: Any = None) -> None:
        if len(train["input_ids"]) < self.config.train.batch_size:
            raise ValueError(f"expected at least batch_size={self.config.train.batch_size} training pairs, "
                             f"got {len(train['input_ids'])}")
        self.train, self.test = train, test
        self.masks = masks if masks is not None else self._masked_dataset(self.config)
        self._test_masks: dict[MaskingStrategy, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def from_rows(cls, config: PretrainConfig, tokenizer: WordPieceTokenizer, train: dict[str, torch.Tensor],
                  test: dict[str, torch.Tensor], masks: Any = None) -> "PretrainingData":
        """The stream of rows cut and collated elsewhere (another input format: RoBERTa's, chapter 06), as
        :func:`~lecture_lib.objectives.sentence_pairs.collate_pairs` gives them (with the pair labels when
        ``config.objective.pairs`` is set). ``masks`` replaces the objective's token masking: any object with
        ``len()`` and ``batch(indices, epoch) -> (masked_input_ids, labels)``, as :class:`MaskedDataset`.
        The held-out rows are masked token by token, as always.

        Taught in: 06_roberta_spanbert ("The input-format study").
        """
        data = cls.__new__(cls)
        data.config, data.tokenizer = config, tokenizer
        data.label_key = PAIR_TASKS[config.objective.pairs or "nsp"][1]
        data._hold(train, test, masks)
        return data

    def _masked_dataset(self, config: PretrainConfig) -> MaskedDataset:
        objective = config.objective
        return MaskedDataset(
            self.train["input_ids"], self.train["special_tokens_mask"], mask_token_id=self.tokenizer.mask_token_id,
            vocab_size=self.tokenizer.vocab_size, dynamic=objective.dynamic_masking, copies=objective.static_copies,
            seed=config.seed, mlm_probability=objective.mlm_probability,
            strategy=MaskingStrategy.from_name(objective.masking),
        )

    def with_config(self, config: PretrainConfig) -> "PretrainingData":
        """The same tokenizer and pairs, batched and masked as ``config`` says (its objective, batch size
        and seed); ``config.data`` (vocabulary, lengths, split) and the pair task must not change."""
        if config.data != self.config.data:
            raise ValueError(f"with_config keeps the pairs: expected data {self.config.data}, got {config.data}")
        if PAIR_TASKS[config.objective.pairs or "nsp"][1] != self.label_key:
            raise ValueError(f"with_config keeps the pairs: expected pairs {self.config.objective.pairs!r}, "
                             f"got {config.objective.pairs!r}")
        other = copy.copy(self)
        other.config, other.masks = config, self._masked_dataset(config)
        probability = config.objective.mlm_probability
        if config.seed != self.config.seed or probability != self.config.objective.mlm_probability:
            other._test_masks = {}
        return other

    @classmethod
    def from_corpus(cls, config: PretrainConfig, tokenizer: WordPieceTokenizer | None = None) -> "PretrainingData":
        """Pairs from the embedded corpus (Python's documentation), split by whole documents.

        Only documents with at least two prose sentences are used, so that a true next sentence exists.
        Python's documentation repeats passages across pages (about one held-out sentence in six also
        stands, word for word, in a training document), so those sentences are removed from the held-out
        documents: a held-out score measures text the model has never seen.
        """
        corpus = split_corpus(config.data.held_out_fraction)
        train_docs = [s for s in corpus["train"]["sentences"] if len(s) >= 2]
        seen = {sentence for document in train_docs for sentence in document}
        unseen = ([s for s in document if s not in seen] for document in corpus["test"]["sentences"])
        test_docs = [document for document in unseen if len(document) >= 2]
        return cls(config, train_docs, test_docs, tokenizer)

    def most_frequent_token(self) -> int:
        """The training pairs' most frequent token, special tokens aside: what a model that knows the word
        frequencies and nothing of the context guesses at every position."""
        return int(torch.bincount(self.train["input_ids"][~self.train["special_tokens_mask"]]).argmax())

    @property
    def batches_per_epoch(self) -> int:
        return len(self.masks) // self.config.train.batch_size

    def _inputs(self, tensors: dict[str, torch.Tensor], rows: torch.Tensor, masked: torch.Tensor,
                labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model's keyword arguments, cut to the longest sequence of the batch (rounded up to 8)."""
        length = int(tensors["attention_mask"][rows].sum(1).max())
        length = min(self.config.data.seq_len, -(-length // 8) * 8)
        batch = {
            "input_ids": masked[:, :length],
            "attention_mask": tensors["attention_mask"][rows, :length],
            "token_type_ids": tensors["token_type_ids"][rows, :length],
            "labels": labels[:, :length],
        }
        if self.config.objective.pairs is not None:
            batch[pretraining_head(self.config.model).label] = tensors[self.label_key][rows]
        return batch

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        """Training micro-batch ``step``: the same whenever it is asked for (``train``'s ``batch_fn``)."""
        epoch, rows = epoch_batch(step, len(self.masks), self.config.train.batch_size, "pretraining order",
                                  self.config.seed)
        masked, labels = self.masks.batch(rows, epoch)
        return self._inputs(self.train, rows, masked, labels)

    def eval_batches(self, strategy: MaskingStrategy | None = None, batch_size: int = 128) -> list[dict]:
        """The held-out pairs, masked once with ``strategy`` (default: the run's own) and a fixed seed."""
        strategy = strategy or MaskingStrategy.from_name(self.config.objective.masking)
        if strategy not in self._test_masks:
            self._test_masks[strategy] = mask_tokens(
                self.test["input_ids"], mask_token_id=self.tokenizer.mask_token_id,
                vocab_size=self.tokenizer.vocab_size, special_tokens_mask=self.test["special_tokens_mask"],
                mlm_probability=self.config.objective.mlm_probability, strategy=strategy,
                generator=generator("eval masks", self.config.seed))
        masked, labels = self._test_masks[strategy]
        n = masked.shape[0]
        return [self._inputs(self.test, torch.arange(i, min(i + batch_size, n)), masked[i:i + batch_size],
                             labels[i:i + batch_size]) for i in range(0, n, batch_size)]


def pretraining_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """MLM loss on the selected positions (+ the pair loss when the batch has pair labels).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return model(**batch, masked_only=True).loss


@torch.no_grad()
def evaluate(model: BertForPreTraining | AlbertForPreTraining, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Held-out MLM loss and accuracy over the selected positions only, and the pair head's accuracy
    (``nsp_accuracy`` for BERT's head, ``sop_accuracy`` for ALBERT's, whichever pairs it is shown).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    head = pretraining_head(model.config)
    loss_sum, correct, total, pair_correct, pairs = 0.0, 0, 0, 0, 0
    for batch in batches:
        batch = to_device(batch, device)
        out = model(**batch, masked_only=True)
        right, n = mlm_accuracy(out.prediction_logits, batch["labels"])
        if n:
            loss_sum += out.mlm_loss.item() * n
        correct, total = correct + right, total + n
        if head.label in batch:
            pair_correct += int((getattr(out, head.logits).argmax(-1) == batch[head.label]).sum())
            pairs += len(batch[head.label])
    model.train(was_training)
    metrics = {"mlm_loss": loss_sum / total, "mlm_accuracy": correct / total}
    if pairs:
        metrics[head.metric] = pair_correct / pairs
    return metrics


@torch.no_grad()
def evaluate_at_masks(model: BertForPreTraining | AlbertForPreTraining, batches: list[dict[str, torch.Tensor]],
                      mask_token_id: int, frequent_token: int) -> dict[str, float]:
    """Held-out MLM accuracy at the positions that show ``[MASK]`` (:func:`~lecture_lib.metrics.accuracy_at_masks`),
    and on the same positions the accuracy of always guessing ``frequent_token`` (the training text's most
    frequent token: what word frequencies alone score).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    predictions, labels, inputs = [], [], []
    for batch in batches:
        batch = to_device(batch, device)
        logits = model(**batch, masked_only=True).prediction_logits  # (N, V) at the selected positions
        predicted = torch.full_like(batch["labels"], IGNORE_INDEX)
        predicted[batch["labels"] != IGNORE_INDEX] = logits.argmax(-1)
        predictions.append(predicted.flatten().cpu())
        labels.append(batch["labels"].flatten().cpu())
        inputs.append(batch["input_ids"].flatten().cpu())
    model.train(was_training)
    predictions, labels, inputs = torch.cat(predictions), torch.cat(labels), torch.cat(inputs)
    return {"mask_accuracy": accuracy_at_masks(predictions, labels, inputs, mask_token_id),
            "unigram_at_masks": accuracy_at_masks(torch.full_like(labels, frequent_token), labels, inputs,
                                                  mask_token_id)}


def unmasked_text(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The text a masked batch was drawn from: the selected tokens put back in place. (B, T)"""
    return torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"], batch["input_ids"])


def left_to_right_logits(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """BERT's encoder run as a left-to-right LM (GPT's objective, the "LTR" model of BERT's Table 5): the
    unmasked text in, each position attending to itself and the positions before it, the MLM head
    reading position i as a guess of token i + 1. (B, T, V)

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    return causal_prediction_logits(model, {**batch, "input_ids": unmasked_text(batch)})


def causal_prediction_logits(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The MLM head's logits (B, T, V) for ``batch["input_ids"]`` with a causal mask in every layer:
    position i sees itself and the positions before it, nothing to its right.

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    if not isinstance(model, BertForPreTraining):
        raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
    input_ids = batch["input_ids"]
    keep = causal_mask(input_ids.shape[1], input_ids.device) & batch["attention_mask"].bool()[:, None, None, :]
    x = model.bert.embeddings(input_ids, batch["token_type_ids"])  # (B, T, H)
    for layer in model.bert.encoder.layer:
        x, _ = layer(x, keep, False)
    return model.cls.predictions(x)  # (B, T, V)


def left_to_right_loss(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy over every real position of the unmasked text (padding ignored).

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    targets = unmasked_text(batch)[:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, IGNORE_INDEX)
    logits = left_to_right_logits(model, batch)[:, :-1]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                       ignore_index=IGNORE_INDEX)


@torch.no_grad()
def evaluate_left_to_right(model: BertForPreTraining, batches: list[dict[str, torch.Tensor]],
                           mask_token_id: int) -> dict[str, float]:
    """A left-to-right LM on the held-out batches: its next-token loss (``lm_loss``), and its accuracy at
    the positions a masked LM is scored on (``mask_accuracy``: those that show ``[MASK]``), guessed from
    the left context only.

    Taught in: 04_bert_pretraining ("The road to BERT").
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    losses, predictions, labels, inputs = [], [], [], []
    for batch in batches:
        batch = to_device(batch, device)
        losses.append(left_to_right_loss(model, batch).item() * int(batch["attention_mask"][:, 1:].sum()))
        predicted = torch.full_like(batch["labels"], IGNORE_INDEX)
        predicted[:, 1:] = left_to_right_logits(model, batch)[:, :-1].argmax(-1)
        predictions.append(predicted.flatten().cpu())
        labels.append(batch["labels"].flatten().cpu())
        inputs.append(batch["input_ids"].flatten().cpu())
    model.train(was_training)
    tokens = sum(int(b["attention_mask"][:, 1:].sum()) for b in batches)
    return {"lm_loss": sum(losses) / tokens,
            "mask_accuracy": accuracy_at_masks(torch.cat(predictions), torch.cat(labels), torch.cat(inputs),
                                               mask_token_id)}


# ---------------------------------------------------------------- a run, and its cache


@dataclass
class PretrainResult:
    """A pretrained model with its tokenizer, training history, recipe, and the directory it lives in."""

    model: BertForPreTraining | AlbertForPreTraining
    tokenizer: WordPieceTokenizer
    history: History
    config: PretrainConfig
    path: Path | None = None


def pretrain(config: PretrainConfig, *, out_dir: str | os.PathLike | None = None,
             data: PretrainingData | None = None, progress: bool = True,
             device: torch.device | str | None = None, checkpoint_every: int = 0,
             model: nn.Module | None = None,
             loss: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] = pretraining_loss) -> PretrainResult:
    """Train a BERT from scratch with ``config``; with ``out_dir``, checkpoint there and save the result.

    The run: the objective's batch stream (``data``, by default cut from the corpus as ``config`` says),
    the pretraining class of ``config.model`` (:func:`pretraining_head`; or ``model``, freshly built from it
    with a change the config cannot state, such as ALBERT's shared-attention ablation, or already pretrained
    and trained further, as domain-adaptive pretraining does), and the loop's :class:`TrainConfig` from
    ``config.train``; ``loss`` (default :func:`pretraining_loss`) may train another objective on the same
    batches, such as :func:`left_to_right_loss`. Rerunning with the same ``out_dir`` resumes from its checkpoint (or returns at
    once when done).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    seed_everything(config.seed)
    data = data or PretrainingData.from_corpus(config)
    if data.tokenizer.vocab_size != config.model.vocab_size:
        raise ValueError(f"expected a tokenizer of model.vocab_size = {config.model.vocab_size} tokens, "
                         f"got {data.tokenizer.vocab_size}")
    model = model if model is not None else pretraining_head(config.model).model_class(config.model)
    out = Path(out_dir) if out_dir is not None else None
    train_config = config.train.train_config(
        progress=progress, checkpoint_dir=str(out / "checkpoint") if out else None,
        checkpoint_every=checkpoint_every, fused=_fused_adamw(device))
    eval_batches = data.eval_batches()
    if out is not None and distributed_context()[0] == 0:
        write_recipe(config, out)
    history = train(model, data.batch, loss, train_config, evaluate=lambda m: evaluate(m, eval_batches),
                    device=device)
    result = PretrainResult(model, data.tokenizer, history, config, out)
    if out is not None and distributed_context()[0] == 0:
        save_result(result, out)
    return result


def _fused_adamw(device: torch.device | str | None) -> bool:
    """PyTorch has fused AdamW kernels for CPU and CUDA (several times faster than the loop for small models)."""
    return (torch.device(device) if device is not None else default_device()).type in ("cpu", "cuda")


def save_result(result: PretrainResult, directory: Path) -> None:
    """Hugging Face files (config.json, model.safetensors, vocab.txt) plus history.json and pretrain_config.json."""
    result.model.save_pretrained(directory)
    result.tokenizer.save(directory / "vocab.txt")
    atomic_write(directory / "history.json", json.dumps(asdict(result.history)) + "\n")
    write_recipe(result.config, directory)


def write_recipe(config: PretrainConfig, directory: Path) -> None:
    """``pretrain_config.json``: written when a run starts, so that a folder a kill left half done says which
    recipe it holds (:func:`check_output_folder`), and again with the results."""
    atomic_write(directory / "pretrain_config.json", json.dumps(config_dict(config), indent=2) + "\n")


def load_result(directory: str | os.PathLike) -> PretrainResult:
    """Read back what :func:`save_result` wrote."""
    directory = Path(directory)
    missing = [name for name in RESULT_FILES if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(f"expected {list(RESULT_FILES)} in {directory}, missing {missing}")
    config = PretrainConfig.from_dict(json.loads((directory / "pretrain_config.json").read_text()))
    history = History.from_dict(json.loads((directory / "history.json").read_text()))
    tokenizer = WordPieceTokenizer.from_vocab_file(directory / "vocab.txt")
    model = pretraining_head(config.model).model_class.from_pretrained(directory)
    return PretrainResult(model, tokenizer, history, config, directory)


def cached_pretraining(name: str, config: PretrainConfig, make_data: Callable[[], PretrainingData | None],
                       *, progress: bool = True,
                       loss: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] = pretraining_loss,
                       make_model: Callable[[], nn.Module] | None = None) -> PretrainResult:
    """Load ``<cache>/<name>``, or first pretrain it there (:func:`lecture_lib.cache.cached`): in
    ``<name>.partial``, checkpointed so that an interrupted run resumes, renamed to ``<name>`` when
    complete, without its checkpoint. ``make_data`` is called only when training is needed (``None``
    from it: the corpus data of ``config``), and so is ``make_model`` (``None``: a fresh model of
    ``config.model``; or, say, a copy of a pretrained model to pretrain further). Name it after the recipe:
    ``cache.key(asdict(config))`` (and the ``loss``, when it is not :func:`pretraining_loss`; and the
    starting model's recipe, with ``make_model``).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    def build(partial: Path) -> None:
        pretrain(config, out_dir=partial, data=make_data(), progress=progress,
                 checkpoint_every=max(1, config.train.steps // 4), loss=loss,
                 model=make_model() if make_model is not None else None)
        shutil.rmtree(partial / "checkpoint", ignore_errors=True)

    return cached(name, build, load_result)


# ---------------------------------------------------------------- command line


def config_leaves(config: Any = PretrainConfig,
                  prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every settable leaf of a nested config (a class, or an instance) as ``(path, type)``, e.g.
    ``(("train", "steps"), int)``; the model's sizes that the data decides (:data:`DERIVED_FROM_DATA`) are
    left out. The model's fields are those of the instance's model config, or of BERT's for the class."""
    hints = typing.get_type_hints(config if isinstance(config, type) else type(config))
    for f in fields(config):
        path, kind = (*prefix, f.name), hints[f.name]
        if not isinstance(config, type) and is_dataclass(getattr(config, f.name)):
            yield from config_leaves(getattr(config, f.name), path)
        elif typing.get_origin(kind) in (typing.Union, types.UnionType) and is_dataclass(typing.get_args(kind)[0]):
            yield from config_leaves(typing.get_args(kind)[0], path)  # a model family: BERT's fields
        elif is_dataclass(kind):
            yield from config_leaves(kind, path)
        elif path not in DERIVED_FROM_DATA:
            yield path, kind


def _leaf_type(kind: Any) -> tuple[str, Callable[[str], Any]]:
    """The metavar and parser of a flag for a field of type ``kind`` (bool, int, float, str, or X | None)."""
    optional = type(None) in typing.get_args(kind)
    base = next(k for k in typing.get_args(kind) if k is not type(None)) if optional else kind
    parse = {bool: _boolean, int: int, float: float, str: str}[base]
    if not optional:
        return base.__name__.upper(), parse

    def parse_or_none(text: str) -> Any:
        return None if text.lower() == "none" else parse(text)
    parse_or_none.__name__ = f"{base.__name__} or none"  # argparse's "invalid int or none value: 'x'"
    return f"{base.__name__.upper()}|none", parse_or_none


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1", "yes")


def _shown(value: Any) -> str:
    """A default as the command line reads it: true/false, none."""
    return str(value).lower() if value is None or isinstance(value, bool) else str(value)


def _lookup(config: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        config = getattr(config, name)
    return config


def leaf_rule(config: Any, path: tuple[str, ...]) -> Any:
    """The rule of the field at ``path`` (:mod:`lecture_lib.config`), or ``None``."""
    return rule_of(type(_lookup(config, path[:-1])), path[-1])


def flag_parser(argv: Sequence[str] | None, *, defaults: Callable[..., PretrainConfig], prog: str) -> FlagParser:
    """The command line: run options, then one flag per leaf of the config (``--model.hidden_size 256``,
    ``--train.steps 100``, ``--objective.pairs none``), whose help shows the field's rule and ``defaults()``'s
    value under the profile ``argv`` chooses."""
    profile = argparse.ArgumentParser(add_help=False)
    profile.add_argument("--profile", choices=PROFILES)
    chosen, _ = profile.parse_known_args(argv)
    if chosen.profile:
        os.environ[ENV_VAR] = chosen.profile
    base = defaults()
    parser = FlagParser(
        prog=prog, description=__doc__.split("\n\n")[0],
        epilog=f"Defaults shown: the chapter's, {current()} profile. Booleans read true or false; a field that may "
               "be empty reads none. The model's vocab_size and max_position_embeddings are data.vocab_size and "
               "data.seq_len. Every value is checked before any work starts, and so is --out.")
    parser.add_argument("--out", required=True, help="output directory: new, empty, or this recipe's earlier run "
                                                     "(rerun to resume from its checkpoint)")
    parser.add_argument("--profile", choices=PROFILES, help="the chapter's sizes (default: $LECTURE_PROFILE, "
                                                            "else quick)")
    checkpoint_rule = rule_of(TrainConfig, "checkpoint_every")
    parser.add_argument("--checkpoint-every", type=flag_type(int, checkpoint_rule), default=500,
                        help=f"steps between checkpoints, {checkpoint_rule} (0: at the end only; default: 500)")
    parser.add_argument("--device", type=flag_type(existing_device),
                        help="cpu, cuda, cuda:1, mps: one this machine has (default: the best available)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    groups = {f.name: parser.add_argument_group(f"{f.name} ({type(getattr(base, f.name)).__name__})")
              for f in fields(base) if is_dataclass(getattr(base, f.name))}
    for path, kind in config_leaves(base):
        metavar, parse = _leaf_type(kind)
        rule = leaf_rule(base, path)
        group = groups[path[0]] if len(path) > 1 else parser
        group.add_argument("--" + ".".join(path), dest=".".join(path), metavar=metavar, type=parse,
                           default=argparse.SUPPRESS,
                           help=f"{f'{rule}; ' if rule else ''}default: {_shown(_lookup(base, path))}")
    return parser


def config_from_flags(parser: argparse.ArgumentParser, args: argparse.Namespace,
                      defaults: Callable[..., PretrainConfig]) -> PretrainConfig:
    """``defaults`` with the flags given, validated whole; a value a config refuses is ``parser``'s error,
    naming the flag(s) the user gave among the fields at fault (a rule between two fields names both when
    both were given, else the one given)."""
    overrides: dict[str, Any] = {}
    for path, _ in config_leaves(defaults()):
        if ".".join(path) in vars(args):
            *parents, leaf = path
            level = overrides
            for name in parents:
                level = level.setdefault(name, {})
            level[leaf] = vars(args)[".".join(path)]
    try:
        return defaults(**overrides)
    except FieldError as error:
        given = [name for name in error.fields if name in vars(args)] or list(error.fields)
        parser.error(f"{' and '.join('--' + name for name in given)}: {error.reason}")


def check_output_folder(out: Path, config: PretrainConfig) -> None:
    """Refuse, with a ``ValueError`` of one line, an ``out`` this run cannot write or must not: a path
    through a file, a folder where nothing can be written (tried, not read off its permissions), a folder
    holding files other than a run's outputs, or another recipe's run. Creates nothing.

    ======================================================  =======================================
    ``out``                                                 verdict
    ======================================================  =======================================
    absent, or empty                                        a new run
    this recipe's ``pretrain_config.json`` (+ checkpoint)   resume (or return at once when done)
    another recipe's ``pretrain_config.json``               refused, naming the first difference
    ======================================================  =======================================
    """
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"{out} is a file, not a folder" if existing == out else f"{out} is under {existing}, "
                         "which is a file")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise ValueError(f"cannot write in {existing}: {error.strerror}") from None
    if existing != out:
        return
    others = sorted(p.name for p in out.iterdir() if p.name not in (*RESULT_FILES, "checkpoint")
                    and not (p.name.startswith(".") and p.name.endswith(".tmp")))  # atomic_open's, cut by a kill
    if others:
        raise ValueError(f"{out} holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}, which this "
                         "command does not write: choose a new or empty folder")
    recipe = out / "pretrain_config.json"
    if recipe.exists():
        try:
            theirs = _leaves(json.loads(recipe.read_text()))
        except (ValueError, AttributeError):  # not JSON, or not a dict of the recipe's parts
            raise ValueError(f"{recipe} is not a recipe this command wrote: choose another folder") from None
        ours = _leaves(config_dict(config))
        differ = next((name for name in ours if ours[name] != theirs.get(name)), None)
        if differ is not None:
            raise ValueError(f"{out} holds a run of another recipe ({differ} {_shown(theirs.get(differ))} there, "
                             f"{_shown(ours[differ])} here): give its flags to resume it, or choose another folder")


def _leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict's leaves by dotted path: ``{"train": {"steps": 3}}`` -> ``{"train.steps": 3}``."""
    flat = {}
    for name, value in values.items():
        flat.update(_leaves(value, f"{prefix}{name}.") if isinstance(value, dict) else {prefix + name: value})
    return flat


def parse_command_line(argv: Sequence[str] | None, *, defaults: Callable[..., PretrainConfig],
                       prog: str) -> tuple[PretrainConfig, argparse.Namespace]:
    """The recipe and the run options, every one checked before any work: a bad value is one line on stderr
    naming its flag, and exit status 2; no corpus, tokenizer, model or output folder is made before."""
    parser = flag_parser(argv, defaults=defaults, prog=prog)
    args = parser.parse_args(argv)
    config = config_from_flags(parser, args, defaults)
    try:
        check_output_folder(Path(args.out), config)
    except ValueError as error:
        parser.error(f"--out: {error}")
    return config, args


def main(argv: Sequence[str] | None = None, *, defaults: Callable[..., PretrainConfig], prog: str) -> PretrainResult:
    """Pretrain from the command line: ``--out DIR [--profile full] [--train.steps N] ...``; prints the final
    metrics. ``defaults(**overrides)`` gives the recipe (a chapter's ``chapter_config``, which takes nested
    dicts such as ``train={"steps": 100}``); ``prog`` is the command's name in ``--help``.
    """
    config, args = parse_command_line(argv, defaults=defaults, prog=prog)
    rank, world = distributed_context()
    result = pretrain(config, out_dir=args.out, progress=not args.no_progress, device=args.device,
                      checkpoint_every=args.checkpoint_every)
    if rank == 0:
        final = result.history.evals[-1][1] if result.history.evals else {}
        print(json.dumps({"out": str(Path(args.out).resolve()), "workers": world, "steps": config.train.steps,
                          "final_train_loss": result.history.loss[-1], **final}))
    if world > 1:
        dist.destroy_process_group()
    return result
