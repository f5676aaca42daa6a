"""Replaced-token detection (Clark et al. 2020, ELECTRA): corrupt with a generator's samples, label every token.

Masked LM learns from the 15% of positions it hides. ELECTRA hides the same 15%, lets a small masked LM
(the generator) *sample* a token for each, and trains a discriminator to say, at every position, whether
the token there is the original or a replacement: a loss on 100% of the tokens.

The rules, as the authors' code has them:

- **Which positions**: exactly round(0.15·n) per sequence of n real tokens (at least 1, at most
  ``max_predictions``), never a special token or padding; not BERT's independent 15% coin per position.
- **What the generator sees**: 85% of the chosen positions become [MASK], 15% keep their token, *none*
  becomes a random token (the generator's samples are the random tokens now).
- **Sampling**: x̂ ~ softmax(logits / temperature) at each chosen position, by the Gumbel-max trick,
  temperature 1; no gradient flows through the sample into the generator.
- **Labels**: 1 (replaced) where the corrupted token differs from the original, else 0. A sample that
  happens to equal the original is labelled *original*: the token there is the real one.
- **Loss**: L_MLM + λ·L_Disc with λ = 50, the MLM loss averaged over the chosen positions and the
  discriminator's over the real tokens.

Worked example (the draws fixed to make the rules visible): 14 real tokens, so round(0.15 x 14) =
round(2.1) = 2 positions, "chef" and "dog"; one becomes [MASK] and one, by the 15% draw, stays::

    original      [CLS] the chef   cooks the meal . the cat sees the dog    . [SEP]
    generator in  [CLS] the [MASK] cooks the meal . the cat sees the dog    . [SEP]
    sampled                 chef                                     bird
    corrupted     [CLS] the chef   cooks the meal . the cat sees the bird   . [SEP]
    labels          0    0   0       0    0   0   0  0   0   0    0   1     0   0

The generator guessed "chef" back, so that position is labelled original; "bird" is a replacement.
The MLM loss is -log p_G(chef) - log p_G(dog), over 2 positions; the discriminator's is over all 14.

Taught in: 08_electra ("Replaced-token detection").
"""

from __future__ import annotations

import torch

from lecture_lib.labels import IGNORE_INDEX

MASK_PROBABILITY = 0.15  # Small and Base; Large used 0.25
MASK_FRACTION = 0.85  # of the chosen positions become [MASK]; the rest keep their token
DISCRIMINATOR_WEIGHT = 50.0  # λ


def choose_positions(
    attention_mask: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    mask_probability: float = MASK_PROBABILITY,
    max_predictions: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Bool (B, T): exactly k = clamp(round(p·n), 1, max_predictions) positions of each row, chosen uniformly
    among its real non-special tokens, where n counts the real tokens (``attention_mask``, [CLS] and [SEP]
    included, as the authors' code counts ``input_mask``). Rounding is half to even, as ``tf.round``.

    >>> ids_mask = torch.ones(2, 22, dtype=torch.long)
    >>> ids_mask[1, 12:] = 0
    >>> special = torch.zeros(2, 22, dtype=torch.long)
    >>> special[:, 0] = special[0, 21] = special[1, 11] = 1
    >>> choose_positions(ids_mask, special, generator=torch.Generator().manual_seed(0)).sum(1).tolist()
    [3, 2]

    Taught in: 08_electra ("Replaced-token detection").
    """
    if attention_mask.shape != special_tokens_mask.shape or attention_mask.dim() != 2:
        raise ValueError(
            f"expected attention_mask and special_tokens_mask of one shape (B, T), got "
            f"{tuple(attention_mask.shape)} and {tuple(special_tokens_mask.shape)}"
        )
    if not 0 < mask_probability <= 1:
        raise ValueError(f"expected mask_probability in (0, 1], got {mask_probability}")
    candidates = attention_mask.bool() & ~special_tokens_mask.bool()  # (B, T)
    n = attention_mask.sum(1).double()
    k = torch.round(n * mask_probability).long().clamp(min=1)
    if max_predictions is not None:
        k = k.clamp(max=max_predictions)
    k = torch.minimum(k, candidates.sum(1))
    scores = torch.rand(attention_mask.shape, generator=generator, device=attention_mask.device)
    scores = scores.masked_fill(~candidates, 2.0)  # never before a candidate
    rank = scores.argsort(dim=1).argsort(dim=1)  # 0 for the lowest draw of the row
    return rank < k[:, None]


def mask_for_generator(
    input_ids: torch.Tensor,
    chosen: torch.Tensor,
    *,
    mask_token_id: int,
    mask_fraction: float = MASK_FRACTION,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked_ids, labels)``: ``mask_fraction`` of the chosen positions become [MASK], the others keep their
    token, none becomes a random token; ``labels`` holds the original at the chosen positions, -100 elsewhere.

    Taught in: 08_electra ("Replaced-token detection").
    """
    if chosen.shape != input_ids.shape:
        raise ValueError(f"expected chosen of shape {tuple(input_ids.shape)}, got {tuple(chosen.shape)}")
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    masked = torch.where(chosen & (u < mask_fraction), torch.full_like(input_ids, mask_token_id), input_ids)
    return masked, torch.where(chosen, input_ids, IGNORE_INDEX)


@torch.no_grad()
def sample_tokens(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """One token per row of ``logits`` (N, V), x̂ ~ softmax(logits / temperature), by the Gumbel-max trick:
    argmax(logits / temperature + g) with g = -log(-log u), u ~ U(0, 1). Outside the autograd graph.

    ``allowed`` (V,) bool restricts the draw to those tokens, renormalised among them: the chapter passes the
    tokens that occur in the pretraining text, so that a replacement is never a vocabulary entry the text never
    uses (which the token alone gives away, with no need to read its context).

    Taught in: 08_electra ("Replaced-token detection").
    """
    if temperature <= 0:
        raise ValueError(f"expected temperature > 0, got {temperature}")
    device = generator.device if generator is not None else logits.device  # a CPU stream for a GPU model too
    u = torch.rand(logits.shape, generator=generator, device=device, dtype=torch.float64).to(logits.device)
    gumbel = -torch.log(-torch.log(u.clamp(min=1e-20)))
    scores = logits.double() / temperature + gumbel
    if allowed is not None:
        if allowed.shape != logits.shape[-1:] or allowed.dtype != torch.bool or not allowed.any():
            raise ValueError(
                f"allowed: expected a bool mask over the {logits.shape[-1]} tokens with at least one True, "
                f"got {allowed.dtype} of shape {tuple(allowed.shape)}"
            )
        scores = scores.masked_fill(~allowed.to(scores.device), float("-inf"))
    return scores.argmax(-1)


def replace_tokens(
    input_ids: torch.Tensor, labels: torch.Tensor, sampled: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(corrupted_ids, replaced)``: the original ``input_ids`` with the N sampled tokens written at the N
    labelled positions (row-major order, as ``ids[labels != -100]``), and 1 where the result differs from
    the original, 0 where it does not, a sample equal to the original included.

    >>> ids = torch.tensor([[2, 10, 11, 12, 3]])
    >>> labels = torch.tensor([[-100, 10, -100, 12, -100]])
    >>> replace_tokens(ids, labels, torch.tensor([10, 40]))
    (tensor([[ 2, 10, 11, 40,  3]]), tensor([[0, 0, 0, 1, 0]]))

    Taught in: 08_electra ("Replaced-token detection").
    """
    chosen = labels != IGNORE_INDEX
    if sampled.shape != (int(chosen.sum()),):
        raise ValueError(
            f"expected one sample per labelled position ({int(chosen.sum())},), got {tuple(sampled.shape)}"
        )
    corrupted = input_ids.clone()
    corrupted[chosen] = sampled.to(input_ids.dtype)
    return corrupted, (corrupted != input_ids).long()


def electra_loss(
    mlm_loss: torch.Tensor, discriminator_loss: torch.Tensor, discriminator_weight: float = DISCRIMINATOR_WEIGHT
) -> torch.Tensor:
    """L_MLM + λ·L_Disc, λ = 50: the discriminator's per-token loss is small (most tokens are easy
    originals), so it is weighted up to count as much as the generator's.

    Taught in: 08_electra ("Replaced-token detection").
    """
    return mlm_loss + discriminator_weight * discriminator_loss
