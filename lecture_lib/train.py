"""The training loop every chapter uses: any device, a learning-rate schedule, clipping, accumulation.

The data stream is a function of the step, ``batch_fn(i) -> batch``: the i-th micro-batch is the
same whenever it is asked for, so a run is reproducible from its seed alone.

Taught in: 01_attention ("A seq2seq model with attention"), 02_transformer ("Training").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from tqdm import tqdm

from lecture_lib.runtime import default_device

Batch = Any
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass
class TrainConfig:
    """What a run does. ``schedule`` is ``"constant"``, ``"linear"`` (warm-up, then linear decay to 0,
    as BERT) or ``"inverse_sqrt"`` (warm-up, then 1/sqrt(step), as Vaswani et al. 2017)."""

    steps: int
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 0
    schedule: str = "constant"
    grad_clip: float | None = 1.0
    grad_accum: int = 1
    eval_every: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.steps < 1 or self.grad_accum < 1:
            raise ValueError(f"steps and grad_accum must be >= 1, got {self.steps} and {self.grad_accum}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; expected one of {sorted(SCHEDULES)}")


@dataclass
class History:
    """Per optimizer step: mean training loss and learning rate; evaluations as (step, metrics)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: list[tuple[int, dict[str, float]]] = field(default_factory=list)


def constant(step: int, warmup: int, total: int) -> float:
    """Multiplier 1 after a linear warm-up."""
    return min(1.0, (step + 1) / warmup) if warmup else 1.0


def linear(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1, then linear decay to 0 at ``total``: 0.1, 0.2, ... 1.0, ..., 0."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def inverse_sqrt(step: int, warmup: int, total: int) -> float:
    """Vaswani et al.'s schedule, scaled to peak at 1: min(s / w, sqrt(w / s)) with s = step + 1."""
    s, w = step + 1, max(1, warmup)
    return min(s / w, math.sqrt(w / s))


SCHEDULES = {"constant": constant, "linear": linear, "inverse_sqrt": inverse_sqrt}


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups as in BERT: decay matrices, not biases or LayerNorm/embedding-free vectors."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move every tensor inside a (nested) dict, list or tuple to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def train(
    model: nn.Module,
    batch_fn: Callable[[int], Batch],
    loss_fn: LossFn,
    config: TrainConfig,
    *,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    device: torch.device | str | None = None,
) -> History:
    """Train ``model`` for ``config.steps`` optimizer steps with AdamW; return the history.

    Each optimizer step averages ``config.grad_accum`` micro-batches ``batch_fn(step * grad_accum + j)``.
    """
    device = torch.device(device) if device is not None else default_device()
    model.to(device)
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr)
    factor = SCHEDULES[config.schedule]
    history = History()
    bar = tqdm(range(config.steps), disable=not config.progress, desc="training", mininterval=1.0)
    for step in bar:
        lr = config.lr * factor(step, config.warmup_steps, config.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.train()
        total = 0.0
        for j in range(config.grad_accum):
            batch = to_device(batch_fn(step * config.grad_accum + j), device)
            loss = loss_fn(model, batch) / config.grad_accum
            loss.backward()
            total += loss.item()
        if config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        history.loss.append(total)
        history.lr.append(lr)
        bar.set_postfix(loss=f"{total:.3f}", refresh=False)
        last = step + 1 == config.steps
        if evaluate is not None and ((config.eval_every and (step + 1) % config.eval_every == 0) or last):
            model.eval()
            with torch.no_grad():
                history.evals.append((step + 1, evaluate(model)))
    model.eval()
    return history
