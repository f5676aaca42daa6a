"""Where and how code runs: the device, seeds that make a rerun print the same numbers, and independent
runs spread over the CPU's cores."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import random
import signal
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from lecture_lib.cache import CACHE_ENV_VAR
from lecture_lib.profile import ENV_VAR as PROFILE_ENV_VAR
from lecture_lib.profile import SEEDS_ENV_VAR


def default_device() -> torch.device:
    """CUDA when available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def available_devices() -> list[str]:
    """The devices this machine has: ``cpu``, then ``cuda:0`` ... and ``mps`` where present."""
    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return ["cpu", *cuda, *(["mps"] if torch.backends.mps.is_available() else [])]


def existing_device(name: str) -> torch.device:
    """``torch.device(name)`` if this machine has it (``cuda`` is ``cuda:0``), else a ``ValueError`` naming
    it and the devices there are; nothing is allocated on it."""
    available = available_devices()
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"expected a device such as {', '.join(available)}, got {name!r}") from None
    full = f"cuda:{device.index or 0}" if device.type == "cuda" else device.type
    if full not in available:
        raise ValueError(f"device {name!r} is not available here; available: {', '.join(available)}")
    return device


def to_device(batch: Any, device: torch.device | str) -> Any:
    """``batch`` with every tensor in it on ``device``: a tensor, a (nested) dict, list or tuple (named tuples
    kept), or a dataclass of tensors (a copy with its fields moved); anything else is returned as it is.

    The one way a loop puts a batch where its model is (:func:`module_device`): :func:`lecture_lib.train.train`,
    the evaluation loops and :func:`lecture_lib.inference.forward_in_batches` call it.

    >>> from lecture_lib.data.toy import make_batch
    >>> moved = to_device({"x": torch.ones(2), "pair": (make_batch([torch.tensor([5])], [torch.tensor([6])]), 3)}, "meta")
    >>> moved["x"].device, moved["pair"][0].src.device, moved["pair"][1]
    (device(type='meta'), device(type='meta'), 3)
    """
    device = torch.device(device)
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=device.type != "cpu")
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        moved = {f.name: to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch) if f.init}
        return dataclasses.replace(batch, **moved)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of ``module``'s first parameter (or buffer); the CPU for a module that has neither."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices); return a CPU generator seeded the same way."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def seed_of(*keys: str | int) -> int:
    """A 63-bit seed that is a fixed function of ``keys``: the first 8 bytes of
    sha256(json([k_1, ..., k_n])), shifted right by one bit.

    The keys are encoded as a JSON list, so their boundaries and types count: ``("a", 1)``, ``("a1",)``
    and ``("a", "1")`` give three different seeds, as do ``(1, 23)`` and ``(12, 3)``. Python's ``hash()``
    of a string changes with ``PYTHONHASHSEED``; this does not, so every process draws the same stream.

    >>> seed_of("reversal", 0, 3)
    1834002258070650756
    >>> seed_of("reversal", 0, 3) == seed_of("reversal", 0, 3) != seed_of("reversal", 0, 4)
    True
    """
    if not keys:
        raise ValueError("expected at least one key (say what the stream is for, e.g. 'reversal'), got none")
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise TypeError(f"expected keys of type str or int, got {key!r} of type {type(key).__name__}")
    encoding = json.dumps(list(keys), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return int.from_bytes(hashlib.sha256(encoding).digest()[:8], "big") >> 1


def generator(*keys: str | int) -> torch.Generator:
    """A CPU generator seeded with :func:`seed_of` ``(*keys)``: one stream per purpose and index.

    Name the stream by what it is for, then the run's seed, then the position in the stream; streams with
    different keys get different seeds (up to a collision of 63-bit hashes, about 1 in 10^19 per pair)::

        generator("reversal", seed, step)          training batch ``step`` of a run with ``seed``
        generator("reversal test", seed)           that run's held-out strings
        generator("masking", seed, example, draw)  the ``draw``-th mask of one example

    >>> torch.randint(10, (6,), generator=generator("reversal", 0, 3)).tolist()
    [0, 0, 6, 3, 6, 8]
    """
    return torch.Generator().manual_seed(seed_of(*keys))


def epoch_batch(step: int, rows: int, batch_size: int, *keys: str | int) -> tuple[int, torch.Tensor]:
    """Training batch ``step`` of epochs of a seeded shuffle: ``(epoch, row indices)``, with
    ``epoch, k = divmod(step, rows // batch_size)`` and the indices the ``k``-th ``batch_size`` of epoch
    ``epoch``'s order, a permutation of ``range(rows)`` drawn from :func:`generator` ``(*keys, epoch)``. Every
    epoch is shuffled anew; the rows after its last whole batch sit that epoch out. A function of ``step``
    alone, so a resumed run reads the batches it would have read.

    >>> [epoch_batch(step, 5, 2, "example", 0)[1].tolist() for step in range(4)]  # two batches an epoch
    [[1, 4], [0, 2], [4, 1], [0, 3]]
    """
    if not 1 <= batch_size <= rows:
        raise ValueError(f"expected batch_size in [1, {rows}], got {batch_size}")
    epoch, k = divmod(step, rows // batch_size)
    return epoch, _epoch_order(rows, (*keys, epoch))[k * batch_size : (k + 1) * batch_size].clone()


@functools.lru_cache(maxsize=8)
def _epoch_order(rows: int, keys: tuple[str | int, ...]) -> torch.Tensor:
    """One epoch's order, drawn once for all the batches of that epoch (callers get copies of its slices)."""
    return torch.randperm(rows, generator=generator(*keys))


def limit_cpu_threads(threads: int = 1) -> int:
    """Without CUDA, run PyTorch's CPU operations on ``threads`` threads; return the number in use.

    The course's quick-profile models are tiny: their matrix products gain little from being split across
    cores, and on a busy machine the threads mostly wait for one another. One thread also makes the
    printed numbers identical on any number of cores. With CUDA the models run on the GPU and nothing changes.
    """
    if not torch.cuda.is_available():
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def cpu_workers() -> int:
    """How many processes independent runs should use: one per CPU core this process may run on, or 1 with
    CUDA or MPS (the runs would share one GPU, and each already keeps it busy)."""
    if default_device().type != "cpu":
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# kept between calls (a new worker takes seconds to import torch), with the course's settings it started under
_pools: dict[int, tuple[ProcessPoolExecutor, tuple[str | None, ...]]] = {}
WORKER_SETTINGS = (CACHE_ENV_VAR, PROFILE_ENV_VAR, SEEDS_ENV_VAR)  # the environment a worker reads once, at its start


_in_worker = False  # set in each worker of parallel_map's pools, at its start


def in_worker() -> bool:
    """Whether this process is a worker of :func:`parallel_map` (the notebook's process is not)."""
    return _in_worker


def progress_bar(iterable: Iterable | None = None, **kwargs) -> tqdm:
    """tqdm's bar over ``iterable`` (a widget in Jupyter and Colab, text in a terminal), with tqdm's keywords, and
    silent in a worker of :func:`parallel_map`: there the pool's one bar counts the jobs, and each job's own bars
    would print to the notebook as lines of text, one after another.

    >>> bar = progress_bar(range(3), desc="steps", disable=True)
    >>> list(bar), bar.disable
    ([0, 1, 2], True)
    """
    return tqdm(iterable, **{**kwargs, "disable": kwargs.get("disable", False) or in_worker()})


def _start_worker() -> None:
    global _in_worker
    _in_worker = True
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the notebook's to handle: it cancels the jobs


def _pool(workers: int) -> ProcessPoolExecutor:
    """The kept pool of ``workers`` processes, started afresh if the cache, profile or seeds have changed since it
    started: its workers would still read the old ones."""
    settings = tuple(os.environ.get(name) for name in WORKER_SETTINGS)
    if workers in _pools and _pools[workers][1] != settings:
        _pools.pop(workers)[0].shutdown()
    if workers not in _pools:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker)
        _pools[workers] = pool, settings
    return _pools[workers][0]


def parallel_map(
    fn: Callable[..., Any], jobs: Sequence[tuple], *, workers: int | None = None, desc: str | None = None
) -> list:
    """``[fn(*job) for job in jobs]``, computed by ``workers`` processes (default :func:`cpu_workers`; with
    1, the loop runs in this process), with a progress bar; the results come back in the order of ``jobs``.

    The course's quick-profile models gain little from a second CPU thread, so each worker runs on one
    thread and a two-core machine runs two jobs at a time. Each job must depend on its arguments alone (it
    seeds itself, as :func:`~lecture_lib.finetuning.finetune.finetune` does). A job that trains on one thread
    in the loop too (fine-tuning, whose budget sets ``num_threads=1``) then gives the loop's result bit for
    bit, as ``tests/chapters/test_course_language.py`` checks for weights and scores; one that the loop
    ran on more threads may differ in the last bits of its floats, as on a machine with another core count.
    Workers are started fresh (the ``spawn`` method) and kept for the next call (started afresh once
    ``LECTURE_CACHE``, ``LECTURE_PROFILE`` or ``LECTURE_SEEDS`` has changed), so ``fn`` must be importable: a function of a module, not a lambda or a function defined in a notebook.
    An exception in a job is raised here, with the worker's traceback.
    """
    jobs = list(jobs)
    workers = cpu_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"expected workers >= 1, got {workers}")
    if min(workers, len(jobs)) <= 1:
        return [fn(*job) for job in tqdm(jobs, desc=desc)]
    if getattr(fn, "__module__", "") == "__main__" or "<" in getattr(fn, "__qualname__", ""):
        raise ValueError(
            f"parallel_map needs a function that a new process can import; {fn!r} is defined in "
            f"__main__ (a notebook or a script) or is a lambda or a local function: move it into a "
            f"module, or pass workers=1"
        )
    pool = _pool(workers)
    futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
    results = [None] * len(jobs)
    try:
        for future in tqdm(as_completed(futures), total=len(jobs), desc=desc):
            results[futures[future]] = future.result()
    except BrokenProcessPool:
        _pools.pop(workers)[0].shutdown(
            cancel_futures=True
        )  # a worker died (e.g. out of memory): start afresh next time
        raise
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    return results


T = TypeVar("T")


def invoke(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: the job function with which one :func:`parallel_map` runs different functions side by side,
    ``parallel_map(invoke, [(f, x), (g, y, z)])`` is ``[f(x), g(y, z)]`` (``f`` and ``g`` importable).

    Taught in: 05_bert_finetuning ("A BERT pretrained on the language").
    """
    return fn(*args)
