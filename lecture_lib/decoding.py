"""Turning a trained encoder-decoder into output sequences: greedy decoding and beam search.

Both work with any model that follows this protocol (:class:`EncoderDecoder`):

- ``model.encode(src)``: source ids (B, S) -> a *state*, a tensor or a tuple of tensors whose first
  dimension is the batch (for the Transformer: the encoder output and the source padding mask);
- ``model.decode_step(prefix, state)``: the tokens so far (B, t), starting with BOS, and the state
  -> logits (B, V) of the next token.

The decoders only ever select and repeat rows of the state, so they never need to know what is in it.
A hypothesis y_1..y_n is scored by its log-probability, score = sum_t log P(y_t | y_<t, x); with
``length_penalty`` α the search ranks score / n^α instead (α = 1: mean log-probability per token).

Token conventions: decoding starts from ``bos``, a hypothesis ends when it emits ``eos`` (which is
part of it and counts in its length), and after ``max_len`` tokens it stops where it is. Tokens in
``banned`` (by default PAD and BOS) are never generated.

Taught in: 02_transformer ("Decoding: greedy and beam search").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Union

import torch
from torch import nn

from lecture_lib.data.toy import BOS, EOS, PAD, Seq2SeqBatch
from lecture_lib.runtime import module_device

State = Union[torch.Tensor, tuple[torch.Tensor, ...]]


class EncoderDecoder(Protocol):
    """What a model must expose to be decoded (see the module docstring).

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """

    def encode(self, src: torch.Tensor) -> State: ...

    def decode_step(self, prefix: torch.Tensor, state: State) -> torch.Tensor: ...


def select_rows(state: State, index: torch.Tensor) -> State:
    """Rows ``index`` of every tensor in the state (repeats allowed): how beams copy their source.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    return tuple(s.index_select(0, index) for s in state)


def next_token_log_probs(
    model: EncoderDecoder, prefix: torch.Tensor, state: State, banned: tuple[int, ...]
) -> torch.Tensor:
    """log P(next token | prefix, source), (B, V), with the banned tokens at -inf.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    logits = model.decode_step(prefix, state)  # (B, V)
    log_probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)
    log_probs[:, list(banned)] = float("-inf")
    return log_probs


def _check(src: torch.Tensor, max_len: int) -> None:
    if src.dim() != 2:
        raise ValueError(f"expected source ids of shape (B, S), got {tuple(src.shape)}")
    if max_len < 1:
        raise ValueError(f"expected max_len >= 1, got {max_len}")


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    src: torch.Tensor,
    max_len: int,
    *,
    bos: int = BOS,
    eos: int = EOS,
    pad: int = PAD,
    banned: tuple[int, ...] = (PAD, BOS),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed back the most probable token at every step, for the whole batch at once.

    Returns the tokens (B, n <= max_len), each row its hypothesis followed by ``pad`` after its
    ``eos``, and each hypothesis' score (B,), the sum of the log-probabilities of its tokens.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    _check(src, max_len)
    state = model.encode(src)
    prefix = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)  # (B, 1)
    scores = torch.zeros(src.shape[0], dtype=torch.float64, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        best, token = next_token_log_probs(model, prefix, state, banned).max(dim=-1)  # (B,), (B,)
        token = token.masked_fill(done, pad)
        scores += best.masked_fill(done, 0.0)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        done |= token == eos
        if bool(done.all()):
            break
    return prefix[:, 1:], scores


@dataclass
class Hypothesis:
    """A decoded sequence (``eos`` included if it finished) and its sum of log-probabilities.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """

    tokens: list[int]
    score: float

    def ranking_score(self, length_penalty: float) -> float:
        """score / length^α: what the search maximises."""
        return self.score / len(self.tokens) ** length_penalty


@dataclass
class BeamStep:
    """One step of a beam search, as :func:`beam_search_one` records it when given a ``trace`` list: what the
    beam held, every extension it scored, and the extensions it kept (the rest were pruned).

    ``prefixes`` are the live hypotheses' tokens before the step (without ``bos``), ``candidate_scores`` (k, V)
    the score of hypothesis r extended by token v (``-inf`` for banned tokens), and ``kept`` the (r, v) pairs
    kept, best first; those whose v is ``eos`` finished at this step.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """

    prefixes: list[list[int]]
    candidate_scores: torch.Tensor
    kept: list[tuple[int, int]]


@torch.no_grad()
def beam_search_one(
    model: EncoderDecoder,
    src: torch.Tensor,
    beam_width: int,
    max_len: int,
    *,
    length_penalty: float = 0.0,
    bos: int = BOS,
    eos: int = EOS,
    banned: tuple[int, ...] = (PAD, BOS),
    trace: list[BeamStep] | None = None,
) -> list[Hypothesis]:
    """Beam search for one source (1, S); returns every completed hypothesis, best first.

    Each step extends every live hypothesis by every allowed token and keeps the ``beam_width`` best
    extensions by score. An extension ending in ``eos`` leaves the beam and is complete, so the beam
    narrows as hypotheses finish; after ``max_len`` tokens the live ones are complete as they stand.
    Without a length penalty a search stops early once no live hypothesis can still beat the best
    complete one (scores only fall as tokens are added). Beam width 1 is greedy decoding. Given a list as
    ``trace``, the search appends one :class:`BeamStep` per step to it (what the beam-search diagram draws).

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    _check(src, max_len)
    if src.shape[0] != 1 or beam_width < 1:
        raise ValueError(f"expected one source (1, S) and beam_width >= 1, got {tuple(src.shape)} and {beam_width}")
    state = model.encode(src)
    prefix = torch.full((1, 1), bos, dtype=torch.long, device=src.device)  # (k, t): the live hypotheses
    scores = torch.zeros(1, dtype=torch.float64, device=src.device)  # (k,)
    complete: list[Hypothesis] = []
    for _ in range(max_len):
        rows = torch.zeros(prefix.shape[0], dtype=torch.long, device=src.device)
        log_probs = next_token_log_probs(model, prefix, select_rows(state, rows), banned)  # (k, V)
        candidates = (scores[:, None] + log_probs).flatten()  # (k * V,)
        allowed = int(torch.isfinite(candidates).sum())
        top_scores, top = candidates.topk(min(beam_width, allowed))
        parent, token = top // log_probs.shape[1], top % log_probs.shape[1]
        if trace is not None:
            trace.append(
                BeamStep(
                    prefix[:, 1:].tolist(),
                    candidates.view_as(log_probs).cpu(),
                    list(zip(parent.tolist(), token.tolist())),
                )
            )
        prefix = torch.cat([prefix[parent], token[:, None]], dim=1)
        ended = token == eos
        complete += [Hypothesis(p[1:].tolist(), s) for p, s in zip(prefix[ended], top_scores[ended].tolist())]
        prefix, scores = prefix[~ended], top_scores[~ended]
        best_complete = max((h.score for h in complete), default=float("-inf"))
        if len(prefix) == 0 or (length_penalty == 0 and best_complete >= float(scores.max())):
            break
    else:  # max_len reached: the live hypotheses are complete as they stand
        complete += [Hypothesis(p[1:].tolist(), s) for p, s in zip(prefix, scores.tolist())]
    return sorted(complete, key=lambda h: h.ranking_score(length_penalty), reverse=True)


def beam_search(
    model: EncoderDecoder,
    src: torch.Tensor,
    beam_width: int,
    max_len: int,
    *,
    length_penalty: float = 0.0,
    bos: int = BOS,
    eos: int = EOS,
    banned: tuple[int, ...] = (PAD, BOS),
) -> list[Hypothesis]:
    """The best hypothesis of :func:`beam_search_one` for each source of the batch (B, S), one at a time.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    _check(src, max_len)
    return [
        beam_search_one(
            model, row[None], beam_width, max_len, length_penalty=length_penalty, bos=bos, eos=eos, banned=banned
        )[0]
        for row in src
    ]


def sequences_equal(predicted: torch.Tensor, target: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """Per sequence (B,): is the prediction token for token the target, once both are padded alike?

    >>> sequences_equal(torch.tensor([[5, 2, 0], [5, 6, 2]]), torch.tensor([[5, 2], [5, 2]]))
    tensor([ True, False])

    Taught in: 02_transformer ("Training").
    """
    if predicted.dim() != 2 or target.dim() != 2 or predicted.shape[0] != target.shape[0]:
        raise ValueError(
            f"expected predicted and target of shape (B, n) with equal B, got "
            f"{tuple(predicted.shape)} and {tuple(target.shape)}"
        )
    width = max(predicted.shape[1], target.shape[1])
    predicted = torch.nn.functional.pad(predicted, (0, width - predicted.shape[1]), value=pad)
    target = torch.nn.functional.pad(target, (0, width - target.shape[1]), value=pad)
    return (predicted == target).all(dim=1)


def greedy_exact_match(model: EncoderDecoder, batch: Seq2SeqBatch) -> torch.Tensor:
    """Per sequence (B,): does greedy decoding reproduce ``batch.tgt_out`` (EOS included)? Runs on the
    model's device.

    Taught in: 02_transformer ("Training").
    """
    device = module_device(model) if isinstance(model, nn.Module) else batch.src.device
    predicted, _ = greedy_decode(model, batch.src.to(device), max_len=batch.tgt_out.shape[1])
    return sequences_equal(predicted.cpu(), batch.tgt_out.cpu())


def hypotheses_to_tensor(hypotheses: list[Hypothesis], pad: int = PAD) -> torch.Tensor:
    """Stack hypotheses' tokens into (B, n), right-padded with ``pad`` (the layout greedy_decode returns).

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    width = max(len(h.tokens) for h in hypotheses)
    return torch.tensor([h.tokens + [pad] * (width - len(h.tokens)) for h in hypotheses], dtype=torch.long)
