"""Word senses in context: do a word's vectors cluster by the sense it is used in?

A static embedding gives "bank" one vector whatever the sentence; a contextual encoder gives each occurrence
its own. Two measures, per layer, on the vectors of one word's occurrences:

* **k-nearest-neighbour sense accuracy**: label each occurrence with the majority sense of its ``k`` most
  cosine-similar other occurrences (leave-one-out); a layer whose vectors cluster by sense scores near 1.
* **self-similarity** (Ethayarajh 2019): the mean cosine between the word's occurrences, beside the
  **anisotropy baseline**, the mean cosine between vectors of random words at the same layer. A layer whose
  vectors all point one way has a high baseline, so the self-similarity is read *minus* that baseline.

Taught in: 11_bertology_probing ("Word senses in context").
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.analysis.syntactic_heads import PieceTokenizer
from lecture_lib.analysis.word_vectors import word_vectors


def sense_sentences() -> dict[str, dict[str, list[str]]]:
    """The course's labelled sentences, ``{word: {sense: [sentence, ...]}}``: "bank" (river, money), "play"
    (theatre, game) and "restrain" (physical, self); each sentence holds its word once.

    Taught in: 11_bertology_probing ("Word senses in context").
    """
    text = resources.files("lecture_lib.data").joinpath("word_senses.json").read_text(encoding="utf-8")
    return {word: senses for word, senses in json.loads(text).items() if not word.startswith("_")}


def occurrence_vectors(
    model: nn.Module, tokenizer: PieceTokenizer, word: str, sentences: Sequence[str]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The vectors of ``word``'s occurrence in each of ``sentences`` (words separated by spaces), (L + 1, N, H),
    and every sentence's word vectors (L + 1, W, H), for the anisotropy baseline.

    Taught in: 04_bert_pretraining ("Static and contextual vectors"),
    11_bertology_probing ("Word senses in context").
    """
    split = [sentence.split() for sentence in sentences]
    for words, sentence in zip(split, sentences):
        if words.count(word) != 1:
            raise ValueError(f"expected {word!r} once in each sentence, got {words.count(word)} in {sentence!r}")
    vectors = word_vectors(model, tokenizer, split)
    return torch.stack([v[:, words.index(word)] for v, words in zip(vectors, split)], 1), vectors


def _cosines(vectors: torch.Tensor) -> torch.Tensor:
    """(..., N, H) -> the (..., N, N) cosine of every pair."""
    unit = F.normalize(vectors, dim=-1)
    return unit @ unit.transpose(-1, -2)


def knn_accuracy(vectors: torch.Tensor, labels: Sequence[int], k: int = 5) -> torch.Tensor:
    """Leave-one-out k-nearest-neighbour accuracy of ``labels`` (ints 0..C-1) on ``vectors`` (..., N, H) by
    cosine similarity, one accuracy per leading index (e.g. per layer). Each vector's k most similar *other*
    vectors vote; a tie goes to the smallest label.

    >>> knn_accuracy(torch.tensor([[1., 0.], [1., .1], [0., 1.], [.1, 1.]]), [0, 0, 1, 1], k=1)
    tensor(1.)

    Taught in: 11_bertology_probing ("Word senses in context").
    """
    labels = torch.as_tensor(labels)
    n = vectors.shape[-2]
    if labels.shape != (n,):
        raise ValueError(f"expected one label per vector, {n}, got {tuple(labels.shape)}")
    if not 1 <= k < n:
        raise ValueError(f"expected 1 <= k < {n} (the other vectors), got k={k}")
    similarity = _cosines(vectors).masked_fill(torch.eye(n, dtype=torch.bool), -torch.inf)
    neighbours = similarity.topk(k, dim=-1).indices  # (..., N, k)
    votes = F.one_hot(labels[neighbours], int(labels.max()) + 1).sum(-2)  # (..., N, C)
    return (votes.argmax(-1) == labels).float().mean(-1)


def mean_pairwise_cosine(vectors: torch.Tensor) -> torch.Tensor:
    """The mean cosine over the distinct pairs of ``vectors`` (..., N, H): a word's self-similarity when they
    are its occurrences, the anisotropy baseline when they are random words.

    >>> mean_pairwise_cosine(torch.tensor([[1., 0.], [0., 1.], [1., 1.]]))
    tensor(0.4714)

    Taught in: 11_bertology_probing ("Word senses in context").
    """
    n = vectors.shape[-2]
    if n < 2:
        raise ValueError(f"expected at least 2 vectors, got {n}")
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    return _cosines(vectors)[..., off_diagonal].mean(-1)


def random_word_vectors(vectors: Sequence[torch.Tensor], count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` word vectors (L + 1, count, H) drawn uniformly without replacement from all the words of
    ``vectors`` (one (L + 1, W, H) tensor per sentence): the anisotropy baseline's sample.

    Taught in: 11_bertology_probing ("Word senses in context").
    """
    pool = torch.cat(list(vectors), 1)
    if count > pool.shape[1]:
        raise ValueError(f"expected at most {pool.shape[1]} words to draw, got {count}")
    return pool[:, torch.randperm(pool.shape[1], generator=generator)[:count]]
