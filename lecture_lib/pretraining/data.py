"""The objective's batch stream: pairs cut from documents, tokenized, masked and batched as a
:class:`~lecture_lib.pretraining.config.PretrainConfig` says, with held-out pairs masked once.

Taught in: 04_bert_pretraining ("Pretraining a small BERT").
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any, Sequence

import torch

from lecture_lib.data.corpus import split_corpus
from lecture_lib.objectives.masking import (
    MaskedDataset,
    MaskingStrategy,
    mask_tokens,
)
from lecture_lib.objectives.sentence_pairs import (
    NUM_SPECIAL_IN_PAIR,
    collate_pairs,
)
from lecture_lib.pretraining.config import PAIR_TASKS, PretrainConfig, pretraining_head
from lecture_lib.runtime import (
    epoch_batch,
    generator,
)
from lecture_lib.tokenization import WordPieceTokenizer


def tokenize_documents(tokenizer: WordPieceTokenizer, documents: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Each document's sentences as lists of token ids (no special tokens)."""
    return [[tokenizer.encode(sentence) for sentence in sentences] for sentences in documents]


class PretrainingData:
    """The objective's batch stream: pairs cut from documents, masked (with the pair labels of
    ``config.objective.pairs``, under the name the model's pair head reads): ``batch(step)`` for training,
    ``eval_batches`` held out.

    ``train_documents`` and ``test_documents`` are lists of documents, each a list of sentences
    (strings). Without a ``tokenizer``, a WordPiece vocabulary of ``config.data.vocab_size`` tokens is
    learned from the training sentences (chapter 03). ``negative_sources``, for NSP, lists for each training
    and each held-out document the documents its NotNext segments may come from
    (:func:`~lecture_lib.objectives.sentence_pairs.make_pairs`). Training pairs are shuffled anew each epoch;
    the mask of each pair is drawn anew each epoch (``dynamic_masking``) or fixed at preprocessing.
    The held-out pairs carry masks fixed once per strategy, so every evaluation of every model sees
    the same corrupted inputs. :meth:`from_corpus` builds it from the embedded Python documentation.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    def __init__(
        self,
        config: PretrainConfig,
        train_documents: Sequence[Sequence[str]],
        test_documents: Sequence[Sequence[str]],
        tokenizer: WordPieceTokenizer | None = None,
        *,
        negative_sources: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None,
    ) -> None:
        if negative_sources is not None and config.objective.pairs != "nsp":
            raise ValueError(
                f"negative_sources pick NSP's NotNext segments; the objective's pairs are {config.objective.pairs!r}"
            )
        self.config = config
        if tokenizer is None:
            tokenizer = WordPieceTokenizer.train([s for doc in train_documents for s in doc], config.data.vocab_size)
        self.tokenizer = tokenizer
        seq_len = config.data.seq_len
        budget = seq_len - NUM_SPECIAL_IN_PAIR
        cut, self.label_key = PAIR_TASKS[config.objective.pairs or "nsp"]
        train_cut, test_cut = cut, cut
        if negative_sources is not None:
            train_cut, test_cut = (partial(cut, negative_sources=sources) for sources in negative_sources)
        ids = dict(
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            pad_token_id=tokenizer.pad_token_id,
            label_name=self.label_key,
        )
        train = collate_pairs(
            train_cut(tokenize_documents(tokenizer, train_documents), budget, seed=config.seed), length=seq_len, **ids
        )
        test_pairs = test_cut(tokenize_documents(tokenizer, test_documents), budget, seed=config.seed + 1)
        self._hold(train, collate_pairs(test_pairs[: config.data.eval_pairs], length=seq_len, **ids))

    def _hold(self, train: dict[str, torch.Tensor], test: dict[str, torch.Tensor], masks: Any = None) -> None:
        if len(train["input_ids"]) < self.config.train.batch_size:
            raise ValueError(
                f"expected at least batch_size={self.config.train.batch_size} training pairs, "
                f"got {len(train['input_ids'])}"
            )
        self.train, self.test = train, test
        self.masks = masks if masks is not None else self._masked_dataset(self.config)
        self._test_masks: dict[MaskingStrategy, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def from_rows(
        cls,
        config: PretrainConfig,
        tokenizer: WordPieceTokenizer,
        train: dict[str, torch.Tensor],
        test: dict[str, torch.Tensor],
        masks: Any = None,
    ) -> "PretrainingData":
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
            self.train["input_ids"],
            self.train["special_tokens_mask"],
            mask_token_id=self.tokenizer.mask_token_id,
            vocab_size=self.tokenizer.vocab_size,
            dynamic=objective.dynamic_masking,
            copies=objective.static_copies,
            seed=config.seed,
            mlm_probability=objective.mlm_probability,
            strategy=MaskingStrategy.from_name(objective.masking),
        )

    def with_config(self, config: PretrainConfig) -> "PretrainingData":
        """The same tokenizer and pairs, batched and masked as ``config`` says (its objective, batch size
        and seed); ``config.data`` (vocabulary, lengths, split) and the pair task must not change."""
        if config.data != self.config.data:
            raise ValueError(f"with_config keeps the pairs: expected data {self.config.data}, got {config.data}")
        if PAIR_TASKS[config.objective.pairs or "nsp"][1] != self.label_key:
            raise ValueError(
                f"with_config keeps the pairs: expected pairs {self.config.objective.pairs!r}, "
                f"got {config.objective.pairs!r}"
            )
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

    def _inputs(
        self, tensors: dict[str, torch.Tensor], rows: torch.Tensor, masked: torch.Tensor, labels: torch.Tensor
    ) -> dict[str, torch.Tensor]:
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
        epoch, rows = epoch_batch(
            step, len(self.masks), self.config.train.batch_size, "pretraining order", self.config.seed
        )
        masked, labels = self.masks.batch(rows, epoch)
        return self._inputs(self.train, rows, masked, labels)

    def eval_batches(self, strategy: MaskingStrategy | None = None, batch_size: int = 128) -> list[dict]:
        """The held-out pairs, masked once with ``strategy`` (default: the run's own) and a fixed seed."""
        strategy = strategy or MaskingStrategy.from_name(self.config.objective.masking)
        if strategy not in self._test_masks:
            self._test_masks[strategy] = mask_tokens(
                self.test["input_ids"],
                mask_token_id=self.tokenizer.mask_token_id,
                vocab_size=self.tokenizer.vocab_size,
                special_tokens_mask=self.test["special_tokens_mask"],
                mlm_probability=self.config.objective.mlm_probability,
                strategy=strategy,
                generator=generator("eval masks", self.config.seed),
            )
        masked, labels = self._test_masks[strategy]
        n = masked.shape[0]
        return [
            self._inputs(
                self.test,
                torch.arange(i, min(i + batch_size, n)),
                masked[i : i + batch_size],
                labels[i : i + batch_size],
            )
            for i in range(0, n, batch_size)
        ]
