"""Masking whole units instead of single tokens: whole words (BERT-WWM), named entities, noun phrases, and
SpanBERT's random spans (Joshi et al. 2020), all at BERT's 15% budget.

A masking scheme here is two steps. **Selection** chooses whole units (a word, an entity, a span of
words) in a random order until 15% of the maskable tokens are chosen; a unit that would overshoot the
budget is passed over, so the budget is met within one unit and no unit is ever cut. **Replacement** is
BERT's 80/10/10 (:func:`lecture_lib.objectives.masking.replace_selected`), decided once per unit, as
SpanBERT does for its spans: a unit becomes all [MASK], all random tokens, or stays as it was. The model
still predicts every selected token on its own.

Units are given per token, as ``transformers``' ``word_ids()`` gives words: ``unit_ids[b, t]`` is the
unit that token t of row b belongs to, and -1 marks tokens never masked ([CLS], [SEP], padding). A unit's
tokens must be contiguous.

SpanBERT's span lengths, in words, follow a geometric distribution with p = 0.2 restricted to 1..10 and
renormalised (:func:`span_length_distribution`), which has mean 3.8 words; clipping the geometric draw
at 10 instead (``min(x, 10)``) would put all the tail's mass on 10 and give a mean of 4.46.

Taught in: 06_roberta_spanbert ("Whole-word masking", "Span lengths", "Masking whole units").
"""

from __future__ import annotations

import torch

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.objectives.masking import BERT_MASKING, MaskingStrategy, replace_selected
from lecture_lib.runtime import generator

NOT_MASKABLE = -1  # the unit id of [CLS], [SEP] and padding


def span_length_distribution(p: float = 0.2, max_length: int = 10) -> torch.Tensor:
    """P(ℓ) ∝ p (1 - p)^(ℓ-1) for ℓ = 1..``max_length``, renormalised to sum to 1 (float64, index ℓ - 1).

    >>> probs = span_length_distribution()
    >>> [round(x, 3) for x in probs[:3].tolist()], round(float((probs * torch.arange(1, 11)).sum()), 3)
    ([0.224, 0.179, 0.143], 3.797)

    Taught in: 06_roberta_spanbert ("Span lengths").
    """
    if not 0 < p <= 1:
        raise ValueError(f"expected p in (0, 1], got {p}")
    if max_length < 1:
        raise ValueError(f"expected max_length >= 1, got {max_length}")
    lengths = torch.arange(1, max_length + 1, dtype=torch.float64)
    weights = p * (1 - p) ** (lengths - 1)
    return weights / weights.sum()


def sample_span_lengths(n: int, *, p: float = 0.2, max_length: int = 10,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` span lengths in words (int64), drawn from :func:`span_length_distribution`.

    >>> sample_span_lengths(8, generator=torch.Generator().manual_seed(0))
    tensor([10,  5,  3,  8,  4,  6,  1,  2])

    Taught in: 06_roberta_spanbert ("Span lengths").
    """
    if n < 0:
        raise ValueError(f"expected n >= 0 span lengths, got {n}")
    probs = span_length_distribution(p, max_length)
    return torch.multinomial(probs, n, replacement=True, generator=generator) + 1 if n else torch.zeros(0).long()


# ---------------------------------------------------------------- checks


def _check(input_ids: torch.Tensor, unit_ids: torch.Tensor, budget: float) -> None:
    """(B, T) ids, units that cover them and are contiguous, and a budget strictly between 0 and 1."""
    if not 0 < budget < 1:
        raise ValueError(f"expected a masking budget in (0, 1), got {budget}")
    if input_ids.dim() != 2:
        raise ValueError(f"expected input_ids of shape (B, T), got {tuple(input_ids.shape)}")
    if unit_ids.shape != input_ids.shape:
        raise ValueError(f"the unit (word) ids do not cover the tokens: expected shape {tuple(input_ids.shape)}, "
                         f"got {tuple(unit_ids.shape)}")
    if (unit_ids < NOT_MASKABLE).any():
        raise ValueError(f"expected unit ids >= 0, or {NOT_MASKABLE} for tokens never masked; got "
                         f"{int(unit_ids.min())}")
    starts = unit_ids.ne(torch.nn.functional.pad(unit_ids, (1, 0), value=-2)[:, :-1]) & (unit_ids >= 0)
    for row, ids in enumerate(unit_ids):
        begun = ids[starts[row]]
        if len(begun) != len(begun.unique()):
            raise ValueError(f"row {row}: a unit's tokens are not contiguous (unit ids {ids.tolist()}); "
                             "expected every word or unit to cover one run of tokens")


def _target(units: torch.Tensor, budget: float) -> int:
    """How many tokens a row masks: ``budget`` of its maskable tokens, rounded, at least one (as BERT)."""
    return max(1, round(budget * int((units >= 0).sum())))


# ---------------------------------------------------------------- selection


def _select_units(units: torch.Tensor, budget: float, generator: torch.Generator | None) -> torch.Tensor:
    """One row: whole units in a random order until the budget; (T,) ids 0, 1, ... of the chosen units, -1 elsewhere."""
    ids, sizes = units[units >= 0].unique(return_counts=True)
    target, count = _target(units, budget), 0
    chosen = torch.full_like(units, NOT_MASKABLE)
    for k in torch.randperm(len(ids), generator=generator).tolist():
        if count + sizes[k] <= target:
            chosen[units == ids[k]] = k
            count += int(sizes[k])
        if count == target:
            break
    return chosen


def _select_spans(words: torch.Tensor, budget: float, p: float, max_length: int,
                  generator: torch.Generator | None) -> torch.Tensor:
    """One row: SpanBERT's spans of whole words until the budget; (T,) span ids 0, 1, ..., -1 elsewhere.

    Draw a length ℓ in words and a start word uniformly; skip the span if it touches one already chosen;
    take its words (fewer at the end of the row or of the budget, so a short row gets short spans). Stop at the budget, or after
    ``10 × budget`` draws (a row whose free words are all too long for what is left).
    """
    ids, sizes = words[words >= 0].unique(return_counts=True)  # words in order: contiguous, increasing
    target, count = _target(words, budget), 0
    taken = torch.zeros(len(ids), dtype=torch.bool)
    chosen = torch.full_like(words, NOT_MASKABLE)
    lengths = sample_span_lengths(10 * target, p=p, max_length=max_length, generator=generator).tolist()
    starts = torch.randint(len(ids), (10 * target,), generator=generator).tolist()
    spans = 0
    for length, start in zip(lengths, starts):
        stop = min(start + length, len(ids))
        if taken[start:stop].any():
            continue
        for w in range(start, stop):
            if count + sizes[w] > target:
                break
            taken[w] = True
            chosen[words == ids[w]] = spans
            count += int(sizes[w])
        spans += bool(taken[start])
        if count == target:
            break
    return chosen


def _mask_chosen(input_ids: torch.Tensor, chosen: torch.Tensor, mask_token_id: int, vocab_size: int,
                 generator: torch.Generator | None, strategy: MaskingStrategy) -> tuple[torch.Tensor, torch.Tensor]:
    """80/10/10 per chosen unit: one uniform draw per unit id, shared by the unit's tokens."""
    per_unit = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)  # (B, T) >= units per row
    draws = per_unit.gather(1, chosen.clamp(min=0))
    return replace_selected(input_ids, chosen >= 0, mask_token_id=mask_token_id, vocab_size=vocab_size,
                            generator=generator, strategy=strategy, draws=draws)


# ---------------------------------------------------------------- the schemes


def mask_units(input_ids: torch.Tensor, unit_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int,
               budget: float = 0.15, generator: torch.Generator | None = None,
               strategy: MaskingStrategy = BERT_MASKING) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked_input_ids, labels)`` with whole units masked, ``budget`` of each row's maskable tokens.

    ``unit_ids`` (B, T) as in the module's docstring: words give whole-word masking
    (:func:`mask_whole_words`); an entity (or a noun phrase) as one unit, and every other word as its own,
    gives entity (or phrase) masking. Worked example, the units fixed and the draws made visible::

        tokens    [CLS]  anna  lind  ##q  ##vist  sings  [SEP]
        unit_ids   -1     0     0     0     0       1      -1      (the entity "anna lindqvist" is unit 0)
        chosen     -      no (4 tokens > budget)            yes    (budget: 15% of 5 -> 1 token)
        masked    [CLS]  anna  lind  ##q  ##vist  [MASK] [SEP]

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    _check(input_ids, unit_ids, budget)
    chosen = torch.stack([_select_units(row, budget, generator) for row in unit_ids])
    return _mask_chosen(input_ids, chosen, mask_token_id, vocab_size, generator, strategy)


def mask_whole_words(input_ids: torch.Tensor, word_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int,
                     budget: float = 0.15, generator: torch.Generator | None = None,
                     strategy: MaskingStrategy = BERT_MASKING) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole-word masking (BERT-WWM, Google 2019): every piece of a chosen word is masked, none of the others.

    BERT's original rule masks pieces on their own: ``on phil [MASK] ##mon 's``, where ``##am`` is easy
    to guess from ``phil`` and ``##mon``. Whole-word masking gives ``on [MASK] [MASK] [MASK] 's``.
    :func:`mask_units` with the words as units.

    Taught in: 06_roberta_spanbert ("Whole-word masking").
    """
    return mask_units(input_ids, word_ids, mask_token_id=mask_token_id, vocab_size=vocab_size, budget=budget,
                      generator=generator, strategy=strategy)


def mask_spans(input_ids: torch.Tensor, word_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int,
               budget: float = 0.15, p: float = 0.2, max_length: int = 10,
               generator: torch.Generator | None = None,
               strategy: MaskingStrategy = BERT_MASKING) -> tuple[torch.Tensor, torch.Tensor]:
    """SpanBERT's masking: spans of whole words, lengths from :func:`sample_span_lengths`, 80/10/10 per span.

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    _check(input_ids, word_ids, budget)
    if max_length > input_ids.shape[1]:
        raise ValueError(f"spans of up to max_length={max_length} words are longer than the sequence of "
                         f"{input_ids.shape[1]} tokens")
    chosen = torch.stack([_select_spans(row, budget, p, max_length, generator) for row in word_ids])
    return _mask_chosen(input_ids, chosen, mask_token_id, vocab_size, generator, strategy)


# ---------------------------------------------------------------- the span boundary objective's targets


def span_boundaries(labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """For every masked token (label != -100), where its span begins and ends: the inputs of the span-boundary
    objective. A span is a maximal run of masked tokens, so its boundary tokens x_(s-1) and x_(e+1) are
    never masked themselves.

    Returns (N,) tensors for the N masked tokens, in row-major order: ``row``, ``left`` (s - 1), ``right``
    (e + 1), ``offset`` (i - s: 0 for the span's first token) and ``target`` (the token to predict).

    >>> labels = torch.tensor([[-100, -100, 7, 8, 9, -100, 4, -100]])
    >>> {k: v.tolist() for k, v in span_boundaries(labels).items()}
    {'row': [0, 0, 0, 0], 'left': [1, 1, 1, 5], 'right': [5, 5, 5, 7], 'offset': [0, 1, 2, 0], 'target': [7, 8, 9, 4]}

    Taught in: 06_roberta_spanbert ("The span boundary objective").
    """
    masked = labels != IGNORE_INDEX  # (B, T)
    if masked[:, 0].any() or masked[:, -1].any():
        raise ValueError("a masked span touches the edge of the sequence, so it has no boundary token there; "
                         "expected [CLS] and the last [SEP] (or padding) never masked")
    positions = torch.arange(labels.shape[1], device=labels.device).expand_as(labels)
    before = torch.nn.functional.pad(masked, (1, 0))[:, :-1]
    after = torch.nn.functional.pad(masked, (0, 1))[:, 1:]
    start = torch.where(masked & ~before, positions, -1).cummax(dim=1).values
    end = torch.where(masked & ~after, positions, labels.shape[1]).flip(1).cummin(dim=1).values.flip(1)
    row, column = masked.nonzero(as_tuple=True)
    return {"row": row, "left": start[row, column] - 1, "right": end[row, column] + 1,
            "offset": column - start[row, column], "target": labels[row, column]}


class UnitMaskedDataset:
    """Rows masked anew every epoch by whole units (or SpanBERT's spans): the interface of
    :class:`~lecture_lib.objectives.masking.MaskedDataset`, ``batch(indices, epoch) -> (masked_ids, labels)``.

    ``unit_ids`` (N, T) as :func:`mask_units` reads them (word ids for ``spans=True``). A batch is masked by
    :func:`lecture_lib.runtime.generator` ``("unit masking", seed, epoch, first index)``: the same batch of
    the same epoch gets the same masks.

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """

    def __init__(self, input_ids: torch.Tensor, unit_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int,
                 spans: bool = False, budget: float = 0.15, seed: int = 0) -> None:
        _check(input_ids, unit_ids, budget)
        self.input_ids, self.unit_ids, self.spans, self.seed = input_ids, unit_ids, spans, seed
        self.options = dict(mask_token_id=mask_token_id, vocab_size=vocab_size, budget=budget)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def batch(self, indices: torch.Tensor | list[int], epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        indices = torch.as_tensor(indices, dtype=torch.long)
        g = generator("unit masking", self.seed, epoch, int(indices[0]))
        mask = mask_spans if self.spans else mask_units
        return mask(self.input_ids[indices], self.unit_ids[indices], generator=g, **self.options)
