"""The training loop every chapter uses: any device, a learning-rate schedule, clipping, accumulation,
bf16 autocast on CUDA, checkpoints that resume exactly, and data-parallel training under ``torchrun``.

The data stream is a function of the step, ``batch_fn(i) -> batch``: the i-th micro-batch is the
same whenever it is asked for, so a run is reproducible from its seed alone, a resumed run reads
the batches the interrupted one would have read, and data-parallel workers split the stream by
index: with W workers, worker r reads micro-batches r, W + r, 2W + r, ... One optimizer step of W
workers with ``grad_accum=k`` therefore sees the same micro-batches as one process with
``grad_accum=k * W``, and computes the same update.

Taught in: 01_attention ("The bottleneck, measured"), 02_transformer ("Training"),
04_bert_pretraining ("A training loop for real runs").
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch import nn

from lecture_lib.cache import atomic_open
from lecture_lib.config import FieldError, OneOf, Range, check_fields
from lecture_lib.runtime import default_device, progress_bar, to_device

Batch = Any
LossFn = Callable[[nn.Module, Batch], torch.Tensor]

CHECKPOINT_NAME = "checkpoint.pt"
PRECISIONS = ("auto", "fp32", "bf16")
LOG_EVERY = 100  # steps between reads of the training loss from the device (each read waits for it)
# Steps between checkpoints (0: only at the end): the rule of train()'s ``checkpoint_every`` and of its flag.
CHECKPOINT_EVERY = Range(0)
# Fields that change what a run computes: a checkpoint resumes only under the same values.
_RESUME_FIELDS = ("steps", "lr", "weight_decay", "warmup_steps", "schedule", "grad_clip", "grad_accum", "precision")


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


@dataclass
class TrainConfig:
    """How the weights are fitted: the course's one optimisation config, read by the training loop, by
    pretraining (``PretrainConfig.train``), by fine-tuning and by the chapters' own runs.

    ``steps`` AdamW optimizer steps, each averaging ``grad_accum`` micro-batches of ``batch_size`` examples
    (what the caller's batch function draws: the loop itself does not read ``batch_size``); peak learning
    rate ``lr`` after ``warmup_steps`` (:func:`warmup_from_fraction` for a share of the steps), then the
    ``schedule``: ``"constant"``, ``"linear"`` (warm-up, then linear decay to 0, as BERT) or
    ``"inverse_sqrt"`` (warm-up, then 1/sqrt(step), as Vaswani et al. 2017); clipping at ``grad_clip``;
    evaluation every ``eval_every`` steps (0: at the end only). ``precision``: ``"auto"`` is bf16 autocast
    on CUDA and fp32 elsewhere; ``"bf16"`` autocasts on any device. ``compile`` runs the model through
    ``torch.compile`` with ``compile_backend``; ``fused`` picks the fused AdamW kernel (``None``: on CUDA).
    ``num_threads`` sets PyTorch's CPU threads for the run (``None``: leave them): for small models one
    thread is often faster than several, which mostly wait for each other.

    What cannot change a result (the progress bar, where and how often checkpoints are written) is not
    here but an argument of :func:`train`, so that a config stays the name of what a run computes.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs").
    """

    steps: int = field(metadata=Range(1).rule())
    batch_size: int = field(default=32, metadata=Range(1).rule())
    lr: float = field(default=1e-3, metadata=Range(0).rule())  # 0: a run that must leave the weights as they were
    weight_decay: float = field(default=0.01, metadata=Range(0).rule())
    warmup_steps: int = field(default=0, metadata=Range(0).rule())
    schedule: str = field(default="constant", metadata=OneOf(tuple(SCHEDULES)).rule())
    grad_clip: float | None = field(default=1.0, metadata=Range(0, open=True).rule())
    grad_accum: int = field(default=1, metadata=Range(1).rule())
    eval_every: int = field(default=0, metadata=Range(0).rule())
    precision: str = field(default="auto", metadata=OneOf(PRECISIONS).rule())
    compile: bool = False
    compile_backend: str = "inductor"
    fused: bool | None = None
    num_threads: int | None = field(default=None, metadata=Range(1).rule())

    def __post_init__(self) -> None:
        check_fields(self)


def warmup_from_fraction(steps: int, fraction: float) -> int:
    """The warm-up steps of a run whose warm-up is ``fraction`` of its ``steps``, rounded as Python rounds
    (half to even): BERT's fine-tuning warms up over 10% of its steps, ``warmup_from_fraction(75, 0.1) == 8``.
    For a run whose steps are chosen at run time; a config with its steps known states ``warmup_steps``.
    """
    return round(fraction * steps)


def recipe_config(defaults: dict[str, Any], warmup: Callable[[int], int], **values: Any) -> TrainConfig:
    """A :class:`TrainConfig` of ``values`` over a recipe's ``defaults``, warming up over ``warmup(steps)`` steps
    unless ``values`` state ``warmup_steps``: how each recipe's builder (fine-tuning's, ELECTRA's, T5's, the
    students') completes a budget that a chapter config gives in part, its warm-up following its steps.

    >>> recipe_config({"lr": 2e-3}, lambda steps: steps // 10, steps=45).warmup_steps
    4
    >>> recipe_config({"lr": 2e-3}, lambda steps: steps // 10, steps=45, warmup_steps=0).warmup_steps
    0
    """
    values = {**defaults, **values}
    values.setdefault("warmup_steps", warmup(values["steps"]))
    return TrainConfig(**values)


@dataclass
class History:
    """Per optimizer step: mean training loss and learning rate; evaluations as (step, metrics)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "History":
        """Inverse of ``dataclasses.asdict`` (JSON and checkpoints store the tuples as lists)."""
        return cls(list(values["loss"]), list(values["lr"]), [(int(s), dict(m)) for s, m in values["evals"]])


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups as in BERT: decay matrices, not biases or LayerNorm/embedding-free vectors."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


# ---------------------------------------------------------------- checkpoints


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """``torch.save`` to a temporary file in the same directory, then rename it over ``path``
    (:func:`lecture_lib.cache.atomic_open`).

    The rename is atomic, so ``path`` always holds either the previous checkpoint or the new one,
    never half a file, even if the process dies while writing.

    Taught in: 04_bert_pretraining ("A training loop for real runs").
    """
    with atomic_open(path) as f:
        torch.save(state, f)
    return Path(path)


def save_trained(directory: Path, model: nn.Module, history: History) -> None:
    """Write a finished run into ``directory``: the model's weights (``model.safetensors``) and its
    :class:`History` (``history.json``). The build of a cached training run
    (:func:`lecture_lib.cache.cached_build`); :func:`load_trained` reads it back without executing code.

    Taught in: 01_attention ("The bottleneck, measured"), 02_transformer ("Training").
    """
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}  # tied: copies
    save_file(state, directory / "model.safetensors")
    (directory / "history.json").write_text(json.dumps(asdict(history)) + "\n")


def load_trained(directory: Path) -> tuple[dict[str, torch.Tensor], History]:
    """The weights and the :class:`History` that :func:`save_trained` wrote into ``directory``."""
    history = History.from_dict(json.loads((directory / "history.json").read_text()))
    return load_file(directory / "model.safetensors"), history


def load_checkpoint(path: str | os.PathLike, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)``: tensors and plain containers only, no code.

    A file that cannot be read (cut short by a full disk, overwritten, not a checkpoint) raises ``OSError``
    naming it: deleting it restarts the run from step 0.
    """
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as error:
        reason = str(error).strip().split("\n")[0]
        raise OSError(
            f"{path} is not a readable training checkpoint ({type(error).__name__}: {reason}); it is "
            f"truncated or corrupted. Delete it to restart the run from step 0."
        ) from None


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


# ---------------------------------------------------------------- data parallelism


def distributed_context() -> tuple[int, int]:
    """(rank, world_size): joins the process group that ``torchrun`` describes in the environment.

    Under ``torchrun --nproc_per_node W`` (WORLD_SIZE > 1) the first call initialises the default
    group: NCCL on CUDA, gloo otherwise. A plain process returns (0, 1).

    Taught in: 04_bert_pretraining ("A training loop for real runs").
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _pick_device(device: torch.device | str | None, world_size: int) -> torch.device:
    if device is not None:
        return torch.device(device)
    if world_size > 1 and torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return default_device()


# ---------------------------------------------------------------- the loop


@contextlib.contextmanager
def cpu_threads(n: int | None):
    """Run the ``with`` block on ``n`` PyTorch CPU threads (``None``: leave them), then restore the count."""
    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def train(
    model: nn.Module,
    batch_fn: Callable[[int], Batch],
    loss_fn: LossFn,
    config: TrainConfig,
    *,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
) -> History:
    """Train ``model`` for ``config.steps`` optimizer steps with AdamW; return the history.

    Each optimizer step averages ``config.grad_accum`` micro-batches ``batch_fn(step * grad_accum + j)``
    (under W data-parallel workers, worker r reads ``batch_fn((step * grad_accum + j) * W + r)``).
    ``loss_fn(model, batch)`` receives the model as it runs (compiled, data-parallel): it should call
    it rather than reach into its submodules. Every batch is moved to the model's device with
    :func:`~lecture_lib.runtime.to_device` (tensors in dicts, lists, tuples and dataclasses); a loss that
    needs other modules (a teacher, a frozen encoder) is an ``nn.Module`` holding them, and moves with the
    model. The losses stay on the device and are read every ``LOG_EVERY`` steps, at evaluations,
    checkpoints and the end, so a GPU is not made to wait for the host at every step. ``evaluate(model)``
    receives the plain model in eval mode, under ``torch.no_grad``. ``progress`` shows a progress bar.

    With ``checkpoint_dir``, ``checkpoint.pt`` is written there every ``checkpoint_every`` steps (0: only at
    the end) and read back on the next call, which then continues from it: weights, optimizer moments, step,
    history and random-number state, so the run ends exactly where an uninterrupted one would. These run
    settings cannot change what is computed, so they are arguments, not fields of ``config``.

    Taught in: 04_bert_pretraining ("A training loop for real runs").
    """
    if not CHECKPOINT_EVERY.allows(checkpoint_every):
        raise FieldError(["checkpoint_every"], CHECKPOINT_EVERY.reason(checkpoint_every))
    checkpoint = Path(checkpoint_dir) / CHECKPOINT_NAME if checkpoint_dir else None
    with cpu_threads(config.num_threads):
        return _train(model, batch_fn, loss_fn, config, evaluate, device, progress, checkpoint, checkpoint_every)


def _train(
    model: nn.Module,
    batch_fn: Callable[[int], Batch],
    loss_fn: LossFn,
    config: TrainConfig,
    evaluate: Callable[[nn.Module], dict[str, float]] | None,
    device: torch.device | str | None,
    progress: bool,
    checkpoint: Path | None,
    checkpoint_every: int,
) -> History:
    rank, world = distributed_context()
    device = _pick_device(device, world)
    model.to(device)
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)  # what the loss needs beside the model (a teacher, a frozen encoder) goes with it
    fused = config.fused if config.fused is not None else device.type == "cuda"
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr, fused=fused)
    history, start = History(), 0
    if checkpoint is not None and checkpoint.is_file():
        start, history = _resume(checkpoint, model, optimizer, config, world, device)

    running = model
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        running = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if config.compile:
        running = torch.compile(running, backend=config.compile_backend)
    bf16 = config.precision == "bf16" or (config.precision == "auto" and device.type == "cuda")
    factor = SCHEDULES[config.schedule]
    bar = progress_bar(
        range(start, config.steps),
        initial=start,
        total=config.steps,
        desc="training",
        mininterval=1.0,
        disable=not progress or rank != 0,
    )
    pending: list[torch.Tensor] = []  # the steps' micro-batch losses, still on the device

    def read_losses() -> None:  # one wait for the device per LOG_EVERY steps, not one per step
        if not pending:
            return
        totals = [sum(row) for row in torch.stack(pending).tolist()]
        if world > 1:
            reduced = torch.tensor(totals, device=device)
            dist.all_reduce(reduced)
            totals = [total / world for total in reduced.tolist()]
        history.loss.extend(totals)
        pending.clear()
        bar.set_postfix(loss=f"{history.loss[-1]:.3f}", refresh=False)

    for step in bar:
        lr = config.lr * factor(step, config.warmup_steps, config.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        running.train()
        losses = []
        for j in range(config.grad_accum):
            batch = to_device(batch_fn((step * config.grad_accum + j) * world + rank), device)
            skip_sync = world > 1 and j + 1 < config.grad_accum  # all-reduce once, on the last micro-batch
            with running.no_sync() if skip_sync else contextlib.nullcontext():
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss = loss_fn(running, batch) / config.grad_accum
                loss.backward()
            losses.append(loss.detach())
        if config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(torch.stack(losses))
        history.lr.append(lr)
        done = step + 1
        evaluating = evaluate is not None and (
            (config.eval_every and done % config.eval_every == 0) or done == config.steps
        )
        saving = checkpoint is not None and (
            (checkpoint_every and done % checkpoint_every == 0) or done == config.steps
        )
        if evaluating or saving or done % LOG_EVERY == 0 or done == config.steps:
            read_losses()
        if evaluating:
            model.eval()
            with torch.no_grad():
                history.evals.append((done, evaluate(model)))
        if saving:
            if rank == 0:
                save_checkpoint(checkpoint, _state(model, optimizer, config, world, done, history))
            if world > 1:
                dist.barrier()
    model.eval()
    return history


def _state(
    model: nn.Module, optimizer: torch.optim.Optimizer, config: TrainConfig, world: int, step: int, history: History
) -> dict[str, Any]:
    return {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": asdict(history),
        "rng": _rng_state(),
        "config": {name: getattr(config, name) for name in _RESUME_FIELDS},
        "world_size": world,
    }


def _resume(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    config: TrainConfig,
    world: int,
    device: torch.device,
) -> tuple[int, History]:
    state = load_checkpoint(path, map_location=device)
    expected = {name: getattr(config, name) for name in _RESUME_FIELDS}
    if state["config"] != expected or state["world_size"] != world:
        raise ValueError(
            f"checkpoint {path} was written by a different run: it has {state['config']} on "
            f"{state['world_size']} workers, this run is {expected} on {world}; "
            "use another checkpoint_dir"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    _set_rng_state(state["rng"])
    return int(state["step"]), History.from_dict(state["history"])
