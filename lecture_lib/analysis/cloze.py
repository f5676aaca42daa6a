"""Cloze probes (Petroni et al. 2019, LAMA; Goldberg 2019; Ettinger 2019): ask a masked language model to fill
a blank, and read its knowledge or its grammar from the log-probabilities it gives the candidates.

A candidate that is one WordPiece is scored by the log-probability of that piece at one ``[MASK]``. A
candidate of several pieces ("New Harbor" may be ``new``, ``harbor``; a name may split into ``##`` pieces)
gets **one ``[MASK]`` per piece** and the **sum of the pieces' log-probabilities**, all masks predicted in
the same forward pass: ``score(c) = sum_i log p(c_i | text with |c| masks)``. LAMA itself kept only objects
of one piece; summing lets every name compete, but a longer candidate adds more negative terms, so the
score leans towards short names; the chapter shows the ranking and says so.

Taught in: 11_bertology_probing ("Knowledge the model could learn").
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from lecture_lib.runtime import module_device
from lecture_lib.tokenization import WordPieceTokenizer


def cloze_scores(
    model: nn.Module, tokenizer: WordPieceTokenizer, left: str, right: str, candidates: Sequence[str]
) -> torch.Tensor:
    """The score of each candidate for the blank between ``left`` and ``right``: the summed log-probability
    of its pieces, with one ``[MASK]`` per piece (see the module's docstring); (len(candidates),).
    ``model`` is a BERT with an MLM head returning ``prediction_logits``.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    return blank_scores(model, tokenizer, [(left, right, candidates)])[0]


def blank_scores(
    model: nn.Module,
    tokenizer: WordPieceTokenizer,
    blanks: Sequence[tuple[str, str, Sequence[str]]],
    batch_size: int = 64,
) -> list[torch.Tensor]:
    """:func:`cloze_scores` of each blank ``(left, right, candidates)``, in forward passes of ``batch_size``
    rows, one row per blank and candidate. Rows are padded on the right and the padding is masked, so a row
    scores as it would alone, up to float rounding.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    rows, targets = [], []  # targets: per row, the position of its first [MASK] and the candidate's pieces
    for left, right, candidates in blanks:
        if not candidates:
            raise ValueError("expected at least one candidate")
        prefix, suffix = tokenizer.encode(left), tokenizer.encode(right)
        for candidate in candidates:
            ids = tokenizer.encode(candidate)
            if not ids:
                raise ValueError(f"candidate {candidate!r} has no tokens")
            rows.append(torch.tensor(tokenizer.frame(prefix + [tokenizer.mask_token_id] * len(ids) + suffix)[0]))
            targets.append((1 + len(prefix), torch.tensor(ids)))  # after [CLS] and the left context
    model.eval()
    device = module_device(model)
    scores = []
    for at in range(0, len(rows), batch_size):
        batch = rows[at : at + batch_size]
        input_ids = pad_sequence(batch, batch_first=True, padding_value=tokenizer.pad_token_id)
        attention_mask = pad_sequence([torch.ones_like(r) for r in batch], batch_first=True)
        with torch.no_grad():  # (B, T, V), read on the CPU
            logits = model(input_ids.to(device), attention_mask.to(device)).prediction_logits.cpu()
        for row, (start, ids) in enumerate(targets[at : at + batch_size]):
            at_masks = logits[row, start + torch.arange(len(ids))].log_softmax(-1)
            scores.append(at_masks[torch.arange(len(ids)), ids].sum())
    return list(torch.stack(scores).split([len(candidates) for _, _, candidates in blanks]))


def ranked(candidates: Sequence[str], scores: torch.Tensor, k: int | None = None) -> list[tuple[str, float]]:
    """The candidates best first, with their scores (the first ``k`` only, if given).

    >>> ranked(["Oslo", "Rome"], torch.tensor([-2.0, -0.5]))
    [('Rome', -0.5), ('Oslo', -2.0)]

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    order = scores.argsort(descending=True, stable=True)[:k]
    return [(candidates[i], scores[i].item()) for i in order]


def frequency_baseline(answers: Sequence[Hashable]) -> tuple[Hashable, float]:
    """LAMA's frequency baseline: always answer the most frequent answer; its precision at 1 is that
    answer's share (ties go to the first one seen).

    >>> frequency_baseline(["Oslo", "Rome", "Oslo", "Lima"])
    ('Oslo', 0.5)

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    if not answers:
        raise ValueError("expected at least one answer")
    answer, count = Counter(answers).most_common(1)[0]
    return answer, count / len(answers)


def form_preferences(
    model: nn.Module, tokenizer: WordPieceTokenizer, items: Sequence[tuple[Sequence[str], int, str]]
) -> list[float]:
    """Goldberg's agreement test for each ``(words, index, alternative)``: with word ``index`` masked,
    ``log p(words[index]) - log p(alternative)`` (each by :func:`cloze_scores`, all items batched by
    :func:`blank_scores`). Positive: the model prefers the form the sentence has. The masked input does not
    depend on which form the sentence had, so a sentence and its twin with ``alternative`` in place score
    exactly opposite.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    blanks = []
    for words, index, alternative in items:
        if not 0 <= index < len(words):
            raise ValueError(f"expected a word index in [0, {len(words)}), got {index}")
        blanks.append((" ".join(words[:index]), " ".join(words[index + 1 :]), [words[index], alternative]))
    return [(scores[0] - scores[1]).item() for scores in blank_scores(model, tokenizer, blanks)]


def form_preference(
    model: nn.Module, tokenizer: WordPieceTokenizer, words: Sequence[str], index: int, alternative: str
) -> float:
    """:func:`form_preferences` of one sentence.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    return form_preferences(model, tokenizer, [(words, index, alternative)])[0]
