"""The disk cache: the one place that writes under ``$LECTURE_CACHE`` (default ``~/.cache/lecture_lib``).

What the course trains once (a pretrained BERT, an ablation's table) is stored under a name made of its
recipe's key, so a changed recipe is a new name and never a stale hit. Every write is atomic: a file is
written beside its target and renamed over it, a directory is built as ``<name>.partial`` and renamed to
``<name>`` when complete, so an interrupted run leaves either nothing or the previous result, never half
of one (``os.replace`` is atomic on POSIX and Windows within one file system). Processes that need the same
result at once (two test workers, two notebooks) take turns: the first builds it while the others wait on a
lock file under ``<root>/.locks``, then load what it built.

Taught in: 04_bert_pretraining ("Pretraining a small BERT").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator, TypeVar

import torch

CACHE_ENV_VAR = "LECTURE_CACHE"
CACHE_FORMAT = 2  # bump when what a recipe builds changes in a way the recipe does not show (2: the
#                  streams of runtime.generator, held-out documents without the sentences seen in training)

T = TypeVar("T")


def cache_root() -> Path:
    """``$LECTURE_CACHE``, else ``~/.cache/lecture_lib``: where the course keeps what it trains once."""
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "lecture_lib")


def key(recipe: Any) -> str:
    """A stable name for ``recipe`` (JSON-serialisable): 16 hex digits of the SHA-256 of its JSON with
    sorted keys, together with the Python version (it decides the embedded corpus), the torch version
    and the cache :data:`CACHE_FORMAT`. The same recipe gives the same key in every process (no ``hash()``).
    """
    stamped = {"recipe": recipe, "python": list(sys.version_info[:3]), "torch": torch.__version__,
               "format": CACHE_FORMAT}
    return hashlib.sha256(json.dumps(stamped, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(thing: Any) -> str:
    """16 hex digits that change with a model's weights, with a dict of tensors (a data set's features), or with a
    tokenizer's vocabulary and casing: the part of a recipe that is an object rather than a value (a probe's result
    depends on the encoder it reads).

    >>> import torch
    >>> layer = torch.nn.Linear(2, 2)
    >>> before = fingerprint(layer)
    >>> with torch.no_grad():
    ...     layer.bias[0] += 1e-3
    >>> fingerprint(layer) == before
    False
    """
    digest = hashlib.sha256(type(thing).__name__.encode())
    if isinstance(thing, torch.nn.Module) or (isinstance(thing, dict) and all(isinstance(v, torch.Tensor)
                                                                              for v in thing.values())):
        for name, tensor in (thing.state_dict() if isinstance(thing, torch.nn.Module) else thing).items():
            data = tensor.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name} {data.dtype} {tuple(tensor.shape)}".encode())
            digest.update(data.view(torch.uint8).numpy().tobytes())
    elif hasattr(thing, "get_vocab") or isinstance(getattr(thing, "vocab", None), dict):
        vocab = thing.get_vocab() if hasattr(thing, "get_vocab") else thing.vocab
        casing = getattr(thing, "lowercase", getattr(thing, "do_lower_case", None))
        accents = getattr(thing, "strip_accents", None)
        digest.update(json.dumps([sorted(vocab.items(), key=lambda item: item[1]), casing, accents]).encode())
    else:
        raise TypeError(f"expected a torch.nn.Module, a dict of tensors or a tokenizer with a vocabulary, got "
                        f"{type(thing).__name__}")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` only when the ``with`` block ends without an error.

    It is a temporary file in ``path``'s folder (so the rename stays on one file system), flushed to disk
    and renamed over ``path``; on an error it is deleted and ``path`` keeps its previous content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically: :func:`atomic_open`, then ``write``."""
    with atomic_open(path) as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return Path(path)


def cached(name: str, build: Callable[[Path], None], load: Callable[[Path], T]) -> T:
    """``load(<root>/<name>)``, first building it if absent.

    ``build(path)`` writes a file or a directory at ``path = <root>/<name>.partial``; it may be called on
    what an interrupted build left there (to resume or overwrite it). Only a build that returns is renamed
    to ``<root>/<name>``; if another process renamed its own build there first, theirs is kept.
    """
    final = cache_root() / name
    if not final.exists():
        with build_lock(name):
            if not final.exists():  # another process may have built it while we waited
                partial = final.with_name(final.name + ".partial")
                partial.parent.mkdir(parents=True, exist_ok=True)
                build(partial)
                try:
                    os.replace(partial, final)
                except OSError:  # a directory of the same recipe is already there: keep it
                    shutil.rmtree(partial, ignore_errors=True)
    return load(final)


def cached_json(name: str, recipe: Any, run: Callable[[], Any]) -> Any:
    """``run()``'s result (JSON-serialisable), computed once per ``recipe`` and then read from
    ``<root>/<name>-<key(recipe)>.json``; the first call returns it read back too, so that both calls give the
    same value (tuples as lists, dictionary keys as strings).

    ``recipe`` must hold every value that changes the result: a value left out of it serves a stale result.
    """
    def build(partial: Path) -> None:
        partial.write_text(json.dumps(run(), indent=2) + "\n")

    return cached(cached_json_path(name, recipe).name, build, lambda path: json.loads(path.read_text()))


def cached_json_path(name: str, recipe: Any) -> Path:
    """Where :func:`cached_json` keeps ``recipe``'s result under ``name``: it exists once the run was made (so a
    caller can send only the missing runs to worker processes and read the others here)."""
    return cache_root() / f"{name}-{key(recipe)}.json"


@contextlib.contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Hold the exclusive lock of result ``name`` (``<root>/.locks/<name>``, an ``fcntl`` lock the system
    releases when its holder exits, even by a crash). A process that has to wait says so on stderr, and for how
    long it waited. Where ``fcntl`` is missing (Windows) it holds nothing,
    and two processes building the same result at once each build it, the first rename winning.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = cache_root() / ".locks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # say so: a wait of a minute must not look like a hang
            print(f"waiting for another process to finish building {name} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            fcntl.flock(handle, fcntl.LOCK_EX)
            print(f"waited {time.perf_counter() - start:.0f} s for {name}", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
