"""Masked language modelling's corruption: choose 15% of the positions, then hide most of them.

BERT's data code (Devlin et al. 2019, ``create_pretraining_data.py``) selects a fixed count per
sequence: ``min(max_predictions_per_seq, max(1, round(0.15 * len(tokens))))`` positions, drawn without
replacement among the non-special ones (20 at most for 128 tokens). This module, like Hugging Face's
``DataCollatorForLanguageModeling``, selects each non-special position independently with probability 15%
(:func:`select_positions`): the same rate on average, a count that varies from sequence to sequence. A selected
position is replaced by [MASK] 80% of the time, by a random token 10% of the time, and left
unchanged 10% of the time; the model must predict the original token at every selected position,
and nowhere else (label -100). Because [MASK] never appears at fine-tuning time, the 20% that are
not [MASK] keep the model from learning that only [MASK] positions matter.

*When* the mask is drawn is a second choice: BERT drew it once, while preparing the data (static
masking, with the data copied 10 times so that each sequence had 10 masks); RoBERTa (Liu et al.
2019) draws a new mask every time a sequence is fed to the model (dynamic masking).

Taught in: 04_bert_pretraining ("Masked LM", "Static and dynamic masking", "The masking ablation").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.runtime import generator


@dataclass(frozen=True)
class MaskingStrategy:
    """What happens to a selected position, as fractions in the order of the BERT paper's Table 8:
    ``mask`` → [MASK], ``same`` → left unchanged, ``random`` → a uniformly random token.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """

    mask: float = 0.8
    same: float = 0.1
    random: float = 0.1

    def __post_init__(self) -> None:
        parts = (self.mask, self.same, self.random)
        if min(parts) < 0 or abs(sum(parts) - 1) > 1e-9:
            raise ValueError(f"expected non-negative fractions (mask, same, random) summing to 1, got {parts}")

    @property
    def name(self) -> str:
        """``"80/10/10"``: MASK/SAME/RND in percent, as the paper's table reads."""
        return "/".join(f"{round(100 * x)}" for x in (self.mask, self.same, self.random))

    @classmethod
    def from_name(cls, name: str) -> "MaskingStrategy":
        """Inverse of :attr:`name`: ``"80/0/20"`` is 80% [MASK], 0% unchanged, 20% random."""
        parts = name.split("/")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"expected a strategy name MASK/SAME/RND in percent such as '80/10/10', got {name!r}")
        return cls(*(int(p) / 100 for p in parts))


BERT_MASKING = MaskingStrategy(0.8, 0.1, 0.1)
# The six rows of Devlin et al. (2019), Table 8, in its order (MASK / SAME / RND).
ABLATION_STRATEGIES = (
    BERT_MASKING,
    MaskingStrategy(1.0, 0.0, 0.0),
    MaskingStrategy(0.8, 0.0, 0.2),
    MaskingStrategy(0.8, 0.2, 0.0),
    MaskingStrategy(0.0, 0.2, 0.8),
    MaskingStrategy(0.0, 0.0, 1.0),
)


def select_positions(
    shape: torch.Size | tuple[int, ...],
    *,
    special_tokens_mask: torch.Tensor | None = None,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Bool mask of the positions to predict: each one independently with ``mlm_probability``,
    never where ``special_tokens_mask`` is True ([CLS], [SEP], padding).

    Taught in: 04_bert_pretraining ("Masked LM").
    """
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"expected mlm_probability in [0, 1], got {mlm_probability}")
    draws = torch.rand(shape, generator=generator, device=device, dtype=torch.float32)
    selected = draws < mlm_probability
    if special_tokens_mask is not None:
        selected &= ~special_tokens_mask.bool()
    return selected


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    special_tokens_mask: torch.Tensor | None = None,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    strategy: MaskingStrategy = BERT_MASKING,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(masked_input_ids, labels)`` for masked LM; ``input_ids`` is left untouched.

    ``special_tokens_mask`` (same shape, True = never select) must mark [CLS], [SEP] *and padding*.
    Selected positions keep their original id in ``labels``; all others get -100. Of the selected,
    ``strategy.mask`` become ``mask_token_id``, ``strategy.random`` a token drawn uniformly from
    ``[0, vocab_size)`` (which, as in BERT, may by chance be the original), the rest stay as they are.
    Every random number comes from ``generator``: the same generator state gives the same masks.

    Worked example (the draws are fixed here to make the rule visible)::

        input_ids       [CLS]  my   dog   is   hairy  [SEP]
        special         True   .    .     .    .      True
        selected?       -      no   no    no   yes    -        (15% chance each)
        replacement     -      -    -     -    [MASK]  -       (80%; 10% random, 10% same)
        masked_ids      [CLS]  my   dog   is   [MASK] [SEP]
        labels          -100   -100 -100  -100 hairy  -100

    Taught in: 04_bert_pretraining ("Masked LM").
    """
    if input_ids.dtype not in (torch.long, torch.int):
        raise ValueError(f"expected integer input_ids, got dtype {input_ids.dtype}")
    if special_tokens_mask is not None and special_tokens_mask.shape != input_ids.shape:
        raise ValueError(
            f"expected special_tokens_mask of shape {tuple(input_ids.shape)}, got {tuple(special_tokens_mask.shape)}"
        )
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"expected mask_token_id in [0, {vocab_size}), got {mask_token_id}")
    selected = select_positions(
        input_ids.shape,
        special_tokens_mask=special_tokens_mask,
        mlm_probability=mlm_probability,
        generator=generator,
        device=input_ids.device,
    )
    return replace_selected(
        input_ids, selected, mask_token_id=mask_token_id, vocab_size=vocab_size, generator=generator, strategy=strategy
    )


def replace_selected(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    strategy: MaskingStrategy = BERT_MASKING,
    draws: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked_input_ids, labels)`` for positions already ``selected``: the 80/10/10 step of :func:`mask_tokens`.

    One uniform draw per position decides its fate: [0, mask) -> [MASK], [mask, mask + random) -> a random
    token, the rest unchanged. ``draws`` (same shape) replaces those draws: giving every position of a unit
    the same draw replaces the unit as a whole (all [MASK], all random, or all unchanged), as SpanBERT does
    for its spans.

    Taught in: 04_bert_pretraining ("Masked LM"), 06_roberta_spanbert ("Masking whole units").
    """
    if selected.shape != input_ids.shape or (draws is not None and draws.shape != input_ids.shape):
        raise ValueError(
            f"expected selected and draws of shape {tuple(input_ids.shape)}, got "
            f"{tuple(selected.shape)} and {None if draws is None else tuple(draws.shape)}"
        )
    labels = torch.where(selected, input_ids, IGNORE_INDEX)
    if draws is None:
        draws = torch.rand(input_ids.shape, generator=generator, device=input_ids.device, dtype=torch.float32)
    to_mask = selected & (draws < strategy.mask)
    to_random = selected & (draws >= strategy.mask) & (draws < strategy.mask + strategy.random)
    random_ids = torch.randint(
        vocab_size, input_ids.shape, generator=generator, device=input_ids.device, dtype=input_ids.dtype
    )
    masked = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(to_random, random_ids, masked)
    return masked, labels


# ---------------------------------------------------------------- when the mask is drawn


class MaskedDataset:
    """Sequences that are masked either once at preprocessing (static) or every time they are seen (dynamic).

    ``input_ids`` and ``special_tokens_mask`` are (N, T). ``batch(indices, epoch)`` returns the masked
    ids and the labels of those rows in that epoch. Example ``n`` in epoch ``e`` is masked by
    :func:`lecture_lib.runtime.generator` ``("masking", seed, n, draw)`` with draw ``e`` (dynamic) or
    ``e % copies`` (static; BERT used ``copies=10``), so a static dataset with one copy shows every epoch
    the mask a dynamic one shows in epoch 0. The static masks are computed in the constructor, as BERT's
    preprocessing script wrote them to disk.

    Taught in: 04_bert_pretraining ("Static and dynamic masking").
    """

    def __init__(
        self,
        input_ids: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        *,
        mask_token_id: int,
        vocab_size: int,
        dynamic: bool,
        copies: int = 1,
        seed: int = 0,
        mlm_probability: float = 0.15,
        strategy: MaskingStrategy = BERT_MASKING,
    ) -> None:
        if input_ids.dim() != 2 or special_tokens_mask.shape != input_ids.shape:
            raise ValueError(
                f"expected input_ids (N, T) and a special_tokens_mask of the same shape, got "
                f"{tuple(input_ids.shape)} and {tuple(special_tokens_mask.shape)}"
            )
        if copies < 1:
            raise ValueError(f"expected copies >= 1, got {copies}")
        self.input_ids, self.special_tokens_mask = input_ids, special_tokens_mask
        self.dynamic, self.copies, self.seed = dynamic, copies, seed
        self.options = dict(
            mask_token_id=mask_token_id, vocab_size=vocab_size, mlm_probability=mlm_probability, strategy=strategy
        )
        self.static = None if dynamic else [self._mask_all(draw) for draw in range(copies)]

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def _mask_one(self, n: int, draw: int) -> tuple[torch.Tensor, torch.Tensor]:
        return mask_tokens(
            self.input_ids[n],
            special_tokens_mask=self.special_tokens_mask[n],
            generator=generator("masking", self.seed, n, draw),
            **self.options,
        )

    def _mask_all(self, draw: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [self._mask_one(n, draw) for n in range(len(self))]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    def batch(self, indices: torch.Tensor | list[int], epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked_input_ids, labels), each (len(indices), T), for these rows in this epoch."""
        indices = torch.as_tensor(indices, dtype=torch.long)
        if self.static is not None:
            masked, labels = self.static[epoch % self.copies]
            return masked[indices], labels[indices]
        rows = [self._mask_one(int(n), epoch) for n in indices]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])
