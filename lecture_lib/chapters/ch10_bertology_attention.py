"""Chapter 10, BERTology I: the chapter's sizes, the two models it opens (the real MiniLM and chapter 05's BERT
of the synthetic language), and the inputs and scores its sections share.

Taught in: 10_bertology_attention ("Two models and their inputs", "Syntactic heads", "Which heads matter").
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn

from lecture_lib.analysis.attention_stats import attention_maps
from lecture_lib.analysis.syntactic_heads import align_words, word_attention
from lecture_lib.chapters import course_language
from lecture_lib.data.corpus import load_corpus
from lecture_lib.data.minilm import minilm_dir
from lecture_lib.data.synthetic import Sentence
from lecture_lib.models.bert import BertModel, mlm_accuracy
from lecture_lib.objectives.masking import mask_tokens
from lecture_lib.pretraining import PretrainResult
from lecture_lib.profile import pick
from lecture_lib.runtime import generator
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer

# the dependency relations of the synthetic language scored in Table 1's shape
DEPENDENCY_RELATIONS = ("nsubj", "obj", "det", "amod", "case", "obl", "cop", "aux", "acl:relcl", "flat")


@dataclass
class AttentionChapterConfig:
    """The chapter's sizes: documentation pairs for the statistics, synthetic sentences for syntax and for
    the masked-LM score, random pruning orders, and the latency batch.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """

    pairs: int = 48  # sentence pairs of the documentation, for where attention goes
    max_length: int = 64  # pieces per pair, [CLS] and [SEP]s included
    syntax_sentences: int = 150  # synthetic sentences with gold trees
    mlm_sentences: int = 512  # held-out synthetic sentences, masked, for importance and pruning
    random_orders: int = 3  # random pruning orders averaged
    latency_batch: int = 32
    latency_repeats: int = 3
    seed: int = 0


# ``quick``: 48 pairs (about 3,000 pieces) through MiniLM, 150 synthetic sentences for the syntactic heads,
# 256 masked sentences for the importance of chapter 05's 16 heads. ``full``: ten times the text.
QUICK = dict()
FULL = dict(pairs=512, max_length=128, syntax_sentences=2000, mlm_sentences=2048, random_orders=10,
            latency_batch=64, latency_repeats=10)


def chapter_config(**overrides) -> AttentionChapterConfig:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), with ``overrides``.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    return AttentionChapterConfig(**{**pick(quick=QUICK, full=FULL), **overrides})


def load_minilm() -> tuple[BertModel, WordPieceTokenizer]:
    """The real MiniLM (all-MiniLM-L6-v2) and its bert-base-uncased WordPiece tokenizer, from the package's
    files or the hub's (:func:`lecture_lib.data.minilm.minilm_dir`, which says what to install without either).

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    directory = minilm_dir()
    return BertModel.from_pretrained(directory), WordPieceTokenizer.from_vocab_file(directory / "vocab.txt")


def course_bert() -> PretrainResult:
    """Chapter 05's BERT of the synthetic language (read from the cache, trained there first if missing).

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    return course_language.synthetic_pretrained_bert(course_language.chapter_config())


def pad_rows(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Lists of ids right-padded with ``pad_id`` to the longest: (N, T).

    >>> pad_rows([[5, 6, 7], [8]], 0)
    tensor([[5, 6, 7],
            [8, 0, 0]])
    """
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row)
    return out


def documentation_pairs(tokenizer: WordPieceTokenizer, config: AttentionChapterConfig) -> dict[str, torch.Tensor]:
    """Pairs of consecutive sentences of the Python documentation, ``[CLS] A [SEP] B [SEP]``, that fit
    ``max_length``, from documents drawn at random: ``input_ids``, ``token_type_ids``, ``attention_mask``
    and ``special_tokens_mask`` (True on [CLS] and [SEP] only), right-padded to the longest pair.

    Taught in: 10_bertology_attention ("Two models and their inputs").
    """
    documents = [d for d in load_corpus()["sentences"] if len(d) >= 2]
    rng = random.Random(config.seed)
    framed = []
    for document in rng.sample(documents, len(documents)):
        start = rng.randrange(len(document) - 1)
        ids, types, special = tokenizer.frame(*(tokenizer.encode(s) for s in document[start:start + 2]))
        if len(ids) <= config.max_length:
            framed.append((ids, types, special))
        if len(framed) == config.pairs:
            break
    ids, types, special = (list(column) for column in zip(*framed))
    input_ids = pad_rows(ids, tokenizer.pad_token_id)
    attention_mask = pad_rows([[1] * len(row) for row in ids], 0)
    return dict(input_ids=input_ids, token_type_ids=pad_rows(types, 0), attention_mask=attention_mask,
                special_tokens_mask=pad_rows(special, 0).bool())


def token_frequencies(tokenizer: WordPieceTokenizer) -> torch.Tensor:
    """How often each token id occurs in the documentation's sentences: (vocab_size,) counts.

    Taught in: 10_bertology_attention ("Confident, positional and rare-token heads").
    """
    counts = Counter(i for document in load_corpus()["sentences"] for s in document for i in tokenizer.encode(s))
    frequency = torch.zeros(tokenizer.vocab_size, dtype=torch.long)
    frequency[list(counts)] = torch.tensor(list(counts.values()))
    return frequency


def word_maps(model: nn.Module, tokenizer: WordPieceTokenizer, sentences: list[Sentence],
              batch_size: int = 64) -> list[torch.Tensor]:
    """Each sentence's word-level attention maps (layers, heads, W, W), from its words' pieces.

    Taught in: 10_bertology_attention ("Syntactic heads").
    """
    maps = []
    for start in range(0, len(sentences), batch_size):
        aligned = [align_words(tokenizer, s.words) for s in sentences[start:start + batch_size]]
        input_ids = pad_rows([ids for ids, _ in aligned], tokenizer.pad_token_id)
        attention_mask = pad_rows([[1] * len(ids) for ids, _ in aligned], 0)
        pieces = attention_maps(model, input_ids, attention_mask)  # (B, L, H, T, T)
        for row, (ids, word_of_piece) in enumerate(aligned):
            n = len(ids)
            maps.append(word_attention(pieces[row, ..., :n, :n], word_of_piece))
    return maps


def masked_sentences(result: PretrainResult, sentences: list[Sentence], seed: int,
                     batch_size: int = 64) -> list[dict[str, torch.Tensor]]:
    """Single sentences framed ``[CLS] s [SEP]``, masked as in pretraining (15%, 80/10/10), in batches with
    their MLM labels.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    tokenizer = result.tokenizer
    framed = [tokenizer.frame(tokenizer.encode(s.text)) for s in sentences]
    batches = []
    for start in range(0, len(framed), batch_size):
        rows = framed[start:start + batch_size]
        input_ids = pad_rows([ids for ids, _, _ in rows], tokenizer.pad_token_id)
        attention_mask = pad_rows([[1] * len(ids) for ids, _, _ in rows], 0)
        special = pad_rows([s for _, _, s in rows], 1).bool()  # padding is never selected either
        masked, labels = mask_tokens(input_ids, mask_token_id=tokenizer.mask_token_id,
                                     vocab_size=tokenizer.vocab_size, special_tokens_mask=special,
                                     generator=generator("ch10 masking", seed, start))
        batches.append(dict(input_ids=masked, attention_mask=attention_mask, labels=labels))
    return batches


def mlm_loss(model: nn.Module, batch: dict[str, torch.Tensor], head_mask: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss of a :class:`~lecture_lib.models.bert.BertForPreTraining` with its heads gated.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    return model(**batch, head_mask=head_mask, masked_only=True).mlm_loss


def masked_lm_accuracy(model: nn.Module, batches: list[dict[str, torch.Tensor]], head_mask: torch.Tensor) -> float:
    """The share of masked positions predicted right with ``head_mask`` applied.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in batches:
            logits = model(**batch, head_mask=head_mask, masked_only=True).prediction_logits
            right, n = mlm_accuracy(logits, batch["labels"])
            correct, total = correct + right, total + n
    return correct / total
