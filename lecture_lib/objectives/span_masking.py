"""Masking whole units instead of single tokens: whole words (BERT-WWM), named entities, noun phrases, and
SpanBERT's random spans (Joshi et al. 2020), all at BERT's 15% budget.

A masking scheme here is two steps. **Selection** chooses whole units (a word, an entity, a span of
words) in a random order until 15% of the maskable tokens are chosen; a unit that would overshoot the
budget is passed over, so the budget is met within one unit and no unit is ever cut. **Replacement** is
BERT's 80/10/10 (:func:`lecture_lib.objectives.masking.replace_selected`), decided once per unit
(``replacement="per unit"``), as SpanBERT does for its spans: a unit becomes all [MASK], all random tokens, or
stays as it was; or decided for every piece on its own (``replacement="per piece"``), as Google's
``create_pretraining_data.py`` does for whole-word masking: it selects whole words, then draws 80/10/10 for each
selected piece, so ``phil ##am ##mon`` may become ``[MASK] ##am [MASK]``. The model still predicts every
selected token on its own.

Units are given per token, as ``transformers``' ``word_ids()`` gives words: ``unit_ids[b, t]`` is the
unit that token t of row b belongs to, and -1 marks tokens never masked ([CLS], [SEP], padding). A unit's
tokens must be contiguous.

SpanBERT's span lengths, in words, follow a geometric distribution with p = 0.2 restricted to 1..10 and
renormalised (:func:`span_length_distribution`), which has mean 3.8 words; clipping the geometric draw
at 10 instead (``min(x, 10)``) would put all the tail's mass on 10 and give a mean of 4.46. In a short row
the 15% budget is smaller than many drawn spans (9 tokens in 64), and a span is cut where the budget ends:
:func:`span_truncation` measures how often, and the mean run actually masked.

Taught in: 06_roberta_spanbert ("Whole-word masking", "Span lengths", "Masking whole units").
"""

from __future__ import annotations

import torch

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.objectives.masking import BERT_MASKING, MaskingStrategy, replace_selected
from lecture_lib.runtime import generator

NOT_MASKABLE = -1  # the unit id of [CLS], [SEP] and padding
REPLACEMENTS = ("per unit", "per piece")  # where 80/10/10 is drawn: once for a unit's tokens, or for each token


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


def sample_span_lengths(
    n: int, *, p: float = 0.2, max_length: int = 10, generator: torch.Generator | None = None
) -> torch.Tensor:
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


def _check(input_ids: torch.Tensor, unit_ids: torch.Tensor, budget: float, replacement: str = "per unit") -> None:
    """(B, T) ids, units that cover them and are contiguous, a budget strictly between 0 and 1, a known replacement."""
    if replacement not in REPLACEMENTS:
        raise ValueError(f"expected replacement in {REPLACEMENTS}, got {replacement!r}")
    if not 0 < budget < 1:
        raise ValueError(f"expected a masking budget in (0, 1), got {budget}")
    if input_ids.dim() != 2:
        raise ValueError(f"expected input_ids of shape (B, T), got {tuple(input_ids.shape)}")
    if unit_ids.shape != input_ids.shape:
        raise ValueError(
            f"the unit (word) ids do not cover the tokens: expected shape {tuple(input_ids.shape)}, "
            f"got {tuple(unit_ids.shape)}"
        )
    if (unit_ids < NOT_MASKABLE).any():
        raise ValueError(
            f"expected unit ids >= 0, or {NOT_MASKABLE} for tokens never masked; got {int(unit_ids.min())}"
        )
    starts = unit_ids.ne(torch.nn.functional.pad(unit_ids, (1, 0), value=-2)[:, :-1]) & (unit_ids >= 0)
    for row, ids in enumerate(unit_ids):
        begun = ids[starts[row]]
        if len(begun) != len(begun.unique()):
            raise ValueError(
                f"row {row}: a unit's tokens are not contiguous (unit ids {ids.tolist()}); "
                "expected every word or unit to cover one run of tokens"
            )


def _target(units: torch.Tensor, budget: float) -> int:
    """How many tokens a row masks: ``budget`` of its maskable tokens, rounded, at least one (as BERT)."""
    return max(1, round(budget * int((units >= 0).sum())))


# ---------------------------------------------------------------- selection


def _select_units(units: torch.Tensor, budget: float, generator: torch.Generator | None) -> torch.Tensor:
    """One row: whole units in a random order until the budget; (T,) ids 0, 1, ... of the chosen units, -1 elsewhere."""
    maskable = units >= 0
    _, unit_of, sizes = units[maskable].unique(return_inverse=True, return_counts=True)
    target, count, sizes = _target(units, budget), 0, sizes.tolist()
    label = [NOT_MASKABLE] * len(sizes)  # per unit, in order: its own index once chosen
    for k in torch.randperm(len(sizes), generator=generator).tolist():
        if count + sizes[k] <= target:
            label[k] = k
            count += sizes[k]
        if count == target:
            break
    return _labelled(units, maskable, unit_of, label)


def _labelled(units: torch.Tensor, maskable: torch.Tensor, unit_of: torch.Tensor, label: list[int]) -> torch.Tensor:
    """(T,) each maskable token's unit's ``label`` (``unit_of``: its unit's index among the row's units), -1 elsewhere."""
    chosen = torch.full_like(units, NOT_MASKABLE)
    chosen[maskable] = torch.tensor(label, dtype=units.dtype)[unit_of]
    return chosen


def _select_spans(
    words: torch.Tensor, budget: float, p: float, max_length: int, generator: torch.Generator | None
) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """One row: SpanBERT's spans of whole words until the budget; (T,) span ids 0, 1, ..., -1 elsewhere, and
    (drawn length, words taken) of each chosen span.

    Draw a length ℓ in words and a start word uniformly; skip the span if it overlaps one already chosen;
    take its words (fewer at the end of the row or of the budget, so a short row gets short spans). Stop at the
    budget, or after ``10 × budget`` draws (a row whose free words are all too long for what is left).
    """
    maskable = words >= 0
    _, word_of, sizes = words[maskable].unique(return_inverse=True, return_counts=True)  # words in order
    target, count, sizes = _target(words, budget), 0, sizes.tolist()
    if not sizes:  # a row with nothing to mask
        return torch.full_like(words, NOT_MASKABLE), []
    lengths = sample_span_lengths(10 * target, p=p, max_length=max_length, generator=generator).tolist()
    starts = torch.randint(len(sizes), (10 * target,), generator=generator).tolist()
    label, spans = [NOT_MASKABLE] * len(sizes), []  # per word, in order: its span's id once taken
    for length, start in zip(lengths, starts):
        stop = min(start + length, len(sizes))
        if any(label[w] != NOT_MASKABLE for w in range(start, stop)):
            continue
        for w in range(start, stop):
            if count + sizes[w] > target:
                break
            label[w] = len(spans)
            count += sizes[w]
        if label[start] != NOT_MASKABLE:
            spans.append((length, sum(label[w] != NOT_MASKABLE for w in range(start, stop))))
        if count == target:
            break
    return _labelled(words, maskable, word_of, label), spans


def _mask_chosen(
    input_ids: torch.Tensor,
    chosen: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator | None,
    strategy: MaskingStrategy,
    replacement: str = "per unit",
) -> tuple[torch.Tensor, torch.Tensor]:
    """80/10/10 per chosen unit (one uniform draw per unit id, shared by the unit's tokens) or per piece (one
    draw per token)."""
    draws = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)  # (B, T) >= units per row
    if replacement == "per unit":
        draws = draws.gather(1, chosen.clamp(min=0))
    return replace_selected(
        input_ids,
        chosen >= 0,
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        generator=generator,
        strategy=strategy,
        draws=draws,
    )


# ---------------------------------------------------------------- the schemes


def mask_units(
    input_ids: torch.Tensor,
    unit_ids: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    budget: float = 0.15,
    generator: torch.Generator | None = None,
    strategy: MaskingStrategy = BERT_MASKING,
    replacement: str = "per unit",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked_input_ids, labels)`` with whole units masked, ``budget`` of each row's maskable tokens, 80/10/10
    drawn once per unit or for each piece (``replacement``, see the module's docstring).

    ``unit_ids`` (B, T) as in the module's docstring: words give whole-word masking
    (:func:`mask_whole_words`); an entity (or a noun phrase) as one unit, and every other word as its own,
    gives entity (or phrase) masking. Worked example, the units fixed and the draws made visible::

        tokens    [CLS]  anna  lind  ##q  ##vist  sings  [SEP]
        unit_ids   -1     0     0     0     0       1      -1      (the entity "anna lindqvist" is unit 0)
        chosen     -      no (4 tokens > budget)            yes    (budget: 15% of 5 -> 1 token)
        masked    [CLS]  anna  lind  ##q  ##vist  [MASK] [SEP]

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    _check(input_ids, unit_ids, budget, replacement)
    chosen = torch.stack([_select_units(row, budget, generator) for row in unit_ids])
    return _mask_chosen(input_ids, chosen, mask_token_id, vocab_size, generator, strategy, replacement)


def mask_whole_words(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    budget: float = 0.15,
    generator: torch.Generator | None = None,
    strategy: MaskingStrategy = BERT_MASKING,
    replacement: str = "per piece",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole-word masking (BERT-WWM, Google 2019): every piece of a chosen word is selected, none of the others.

    BERT's original rule masks pieces on their own: ``on phil [MASK] ##mon 's``, where ``##am`` is easy
    to guess from ``phil`` and ``##mon``. Whole-word masking gives ``on [MASK] [MASK] [MASK] 's``.
    :func:`mask_units` with the words as units; 80/10/10 drawn for each selected piece, as Google's
    ``create_pretraining_data.py`` does (``replacement="per unit"``: once per word).

    Taught in: 06_roberta_spanbert ("Whole-word masking").
    """
    return mask_units(
        input_ids,
        word_ids,
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        budget=budget,
        generator=generator,
        strategy=strategy,
        replacement=replacement,
    )


def mask_spans(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    budget: float = 0.15,
    p: float = 0.2,
    max_length: int = 10,
    generator: torch.Generator | None = None,
    strategy: MaskingStrategy = BERT_MASKING,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SpanBERT's masking: spans of whole words, lengths from :func:`sample_span_lengths`, 80/10/10 per span.

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    _check(input_ids, word_ids, budget)
    if max_length > input_ids.shape[1]:
        raise ValueError(
            f"spans of up to max_length={max_length} words are longer than the sequence of {input_ids.shape[1]} tokens"
        )
    chosen = torch.stack([_select_spans(row, budget, p, max_length, generator)[0] for row in word_ids])
    return _mask_chosen(input_ids, chosen, mask_token_id, vocab_size, generator, strategy)


def span_truncation(
    word_ids: torch.Tensor,
    *,
    budget: float = 0.15,
    p: float = 0.2,
    max_length: int = 10,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """How :func:`mask_spans`' selection cuts the drawn spans in these rows (``word_ids`` (B, T) as it reads them;
    the same draws for the same generator): ``drawn``, the mean length in words drawn for the chosen spans;
    ``taken``, the mean words they kept; ``cut``, the share of chosen spans that kept fewer words than drawn (at the
    budget's end or the row's); ``longest``, the longest span taken.

    >>> words = torch.arange(512)[None]  # 512 one-token words: a budget of 77 tokens
    >>> stats = span_truncation(words, generator=torch.Generator().manual_seed(0))
    >>> stats["cut"] < 0.1 and stats["longest"] == 10
    True

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """
    _check(word_ids, word_ids, budget)
    spans = [span for row in word_ids for span in _select_spans(row, budget, p, max_length, generator)[1]]
    if not spans:
        raise ValueError("no span was chosen in these rows: expected rows with maskable words")
    drawn, taken = (torch.tensor(column, dtype=torch.float64) for column in zip(*spans))
    return {
        "drawn": float(drawn.mean()),
        "taken": float(taken.mean()),
        "cut": float((taken < drawn).double().mean()),
        "longest": int(taken.max()),
    }


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
        raise ValueError(
            "a masked span touches the edge of the sequence, so it has no boundary token there; "
            "expected [CLS] and the last [SEP] (or padding) never masked"
        )
    positions = torch.arange(labels.shape[1], device=labels.device).expand_as(labels)
    before = torch.nn.functional.pad(masked, (1, 0))[:, :-1]
    after = torch.nn.functional.pad(masked, (0, 1))[:, 1:]
    start = torch.where(masked & ~before, positions, -1).cummax(dim=1).values
    end = torch.where(masked & ~after, positions, labels.shape[1]).flip(1).cummin(dim=1).values.flip(1)
    row, column = masked.nonzero(as_tuple=True)
    return {
        "row": row,
        "left": start[row, column] - 1,
        "right": end[row, column] + 1,
        "offset": column - start[row, column],
        "target": labels[row, column],
    }


class UnitMaskedDataset:
    """Rows masked anew every epoch by whole units (or SpanBERT's spans): the interface of
    :class:`~lecture_lib.objectives.masking.MaskedDataset`, ``batch(indices, epoch) -> (masked_ids, labels)``.

    ``unit_ids`` (N, T) as :func:`mask_units` reads them (word ids for ``spans=True``). A batch is masked by
    :func:`lecture_lib.runtime.generator` ``("unit masking", seed, epoch, first index)``: the same batch of
    the same epoch gets the same masks. ``replacement`` as :func:`mask_units` (units; spans are always per unit).

    Taught in: 06_roberta_spanbert ("Masking whole units").
    """

    def __init__(
        self,
        input_ids: torch.Tensor,
        unit_ids: torch.Tensor,
        *,
        mask_token_id: int,
        vocab_size: int,
        spans: bool = False,
        budget: float = 0.15,
        seed: int = 0,
        replacement: str = "per unit",
    ) -> None:
        _check(input_ids, unit_ids, budget, replacement)
        if spans and replacement != "per unit":
            raise ValueError("SpanBERT draws 80/10/10 once per span: expected replacement='per unit' with spans")
        self.input_ids, self.unit_ids, self.spans, self.seed = input_ids, unit_ids, spans, seed
        self.options = dict(mask_token_id=mask_token_id, vocab_size=vocab_size, budget=budget)
        if not spans:
            self.options["replacement"] = replacement

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def batch(self, indices: torch.Tensor | list[int], epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        indices = torch.as_tensor(indices, dtype=torch.long)
        g = generator("unit masking", self.seed, epoch, int(indices[0]))
        mask = mask_spans if self.spans else mask_units
        return mask(self.input_ids[indices], self.unit_ids[indices], generator=g, **self.options)
