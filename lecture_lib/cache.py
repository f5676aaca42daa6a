"""The disk cache: the one place that writes under ``$LECTURE_CACHE`` (default ``~/.cache/lecture_lib``).

What the course trains once (a pretrained BERT, an ablation's table) is stored under a name made of its
recipe's key, so a changed recipe is a new name and never a stale hit. Every write is atomic: a file is
written beside its target and renamed over it, a directory is built as ``<name>.partial`` and renamed to
``<name>`` when complete, so an interrupted run leaves either nothing or the previous result, never half
of one (``os.replace`` is atomic on POSIX and Windows within one file system). Processes that need the same
result at once (two test workers, two notebooks) take turns: the first builds it while the others wait on a
lock file under ``<root>/.locks``, then load what it built.

How to cache a chapter's run
----------------------------
Decorate the function that computes the result; the cache layer names the entry from the call, so no
recipe dict is written by hand and nothing that changes the result can be left out of the name. The name is
``<function>-<key>``, the key made (:func:`call_recipe`) of the function (its module, name and code, docstring
and comments aside), every bound argument (defaults included), and the module constants its code reads::

    # before: the recipe typed by hand, and a size read outside it (a stale hit waiting to happen)
    def masking_ablation(config, rules=MASKING_RULES):
        recipe = {"config": asdict(config), "rules": [list(r) for r in rules], "seeds": SEEDS}
        return cached_json("masking-ablation", recipe, lambda: _ablation_rows(config, rules))

    # after: the call is the recipe (config field by field, rules, and SEEDS, which the body reads)
    @cache.cached_call
    def masking_ablation(config: AblationConfig, rules=MASKING_RULES) -> dict:
        return {name: _row(config, rule, SEEDS) for name, rule in rules}

A result saved as files (a model) uses :func:`cached_build`: the function writes into the folder it is given
first, and ``load`` reads it back (:func:`lecture_lib.pretraining.cached_pretraining` is one)::

    @cache.cached_build(load=BertForSequenceClassification.from_pretrained, ignore=("progress",))
    def teacher(path: Path, pretrained: nn.Module, config: ChapterConfig, progress: bool = True) -> None:
        fine_tune(pretrained, config, progress=progress).save_pretrained(path)

    model = teacher(pretrained, config)        # trains once, then loads <cache>/...teacher-<key>

What an argument may be (:func:`describe`): plain data (numbers, strings, None, lists, tuples, dicts), a
dataclass (hashed field by field, recursively), an enum, a model, a dict of tensors or a tokenizer (by
:func:`fingerprint`), a module-level function or class (by its name and code), an object with a
``cache_recipe()`` method (a data set names what it is built from), or a :class:`Deferred` call (built only
when the run must be made, named by its function and arguments). Anything else is a ``TypeError`` naming the
argument. An argument that cannot change the result (a progress bar, a worker count) is listed in ``ignore``.
A constant that a helper reads is not seen: read it in the decorated function, or pass it in.

Several runs, the missing ones in worker processes, then every one read back (:func:`compute_all`)::

    rows = cache.compute_all(scheme_run, [(config, scheme) for scheme in SCHEMES], workers=workers)

Taught in: 04_bert_pretraining ("Pretraining a small BERT").
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence, TypeVar

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
    stamped = {
        "recipe": recipe,
        "python": list(sys.version_info[:3]),
        "torch": torch.__version__,
        "format": CACHE_FORMAT,
    }
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
    if isinstance(thing, torch.nn.Module) or (
        isinstance(thing, dict) and all(isinstance(v, torch.Tensor) for v in thing.values())
    ):
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
        raise TypeError(
            f"expected a torch.nn.Module, a dict of tensors or a tokenizer with a vocabulary, got "
            f"{type(thing).__name__}"
        )
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


# ---------------------------------------------------------------- names made from the call


def cached_call(fn: Callable[..., Any] | None = None, *, ignore: Sequence[str] = ()) -> Any:
    """Decorate a function whose result is JSON-serialisable: computed once per call, kept in
    ``<root>/<function>-<key>.json`` (the key from :func:`call_recipe`), and read back, the first time
    too (tuples come back as lists, dictionary keys as strings). ``ignore`` names the arguments that cannot change
    the result (a progress bar). Used bare (``@cached_call``) or with arguments (``@cached_call(ignore=...)``).
    The decorated function has ``cache_name(*args, **kwargs)``, ``is_cached(*args, **kwargs)`` and
    ``call_recipe(*args, **kwargs)`` (what its name is made of), and ``__wrapped__``, the function uncached.

    >>> @cached_call
    ... def squares(n: int) -> dict:
    ...     return {i: i * i for i in range(n)}
    >>> squares.cache_name(3) == squares.cache_name(n=3), squares.cache_name(3) == squares.cache_name(4)
    (True, False)
    """
    if fn is None:
        return functools.partial(cached_call, ignore=ignore)

    def build(partial: Path, *args: Any, **kwargs: Any) -> None:
        partial.write_text(json.dumps(fn(*args, **kwargs), indent=2) + "\n")

    return _cached_entry(fn, build, lambda path: json.loads(path.read_text()), ".json", ignore, takes_path=False)


def cached_build(load: Callable[[Path], T], *, ignore: Sequence[str] = ()) -> Callable[..., Callable[..., T]]:
    """Decorate a function that writes its result at the path it is given first (a file, or a folder: a model's
    ``save_pretrained``): the decorated function takes the other arguments, builds once per call under
    ``<root>/<function>-<key>`` (atomically, as :func:`cached`) and returns ``load`` of it. The name
    is made of the call without the path (:func:`call_recipe`); ``ignore`` and the decorated function's
    attributes are :func:`cached_call`'s.
    """

    def decorate(fn: Callable[..., None]) -> Callable[..., T]:
        return _cached_entry(fn, fn, load, "", ignore, takes_path=True)

    return decorate


def _cached_entry(
    fn: Callable[..., Any],
    build: Callable[..., None],
    load: Callable[[Path], Any],
    suffix: str,
    ignore: Sequence[str],
    *,
    takes_path: bool,
) -> Callable[..., Any]:
    parameters = list(inspect.signature(fn).parameters)
    unknown = sorted(set(ignore) - set(parameters))
    if unknown:
        raise TypeError(f"ignore names {unknown}, which are not parameters of {fn.__qualname__}: {parameters}")
    skipped = (*ignore, *parameters[:1]) if takes_path else tuple(ignore)

    def recipe(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return call_recipe(fn, (None, *args) if takes_path else args, kwargs, ignore=skipped)

    def name(*args: Any, **kwargs: Any) -> str:
        return f"{fn.__qualname__}-{key(recipe(*args, **kwargs))}{suffix}"

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        return cached(name(*args, **kwargs), lambda partial: build(partial, *args, **kwargs), load)

    entry.call_recipe, entry.cache_name = recipe, name
    entry.is_cached = lambda *args, **kwargs: (cache_root() / name(*args, **kwargs)).exists()
    return entry


def compute_all(
    fn: Callable[..., T], calls: Sequence[tuple], *, workers: int | None = None, desc: str | None = None
) -> list[T]:
    """``[fn(*call) for call in calls]`` for a cached function ``fn`` (:func:`cached_call`, :func:`cached_build`):
    the calls not yet in the cache run first, each once, in ``workers`` processes (:func:`build_all`), then every
    result is read from the cache here, so that a rerun starts no worker and a result is the same whichever
    process made it. ``fn`` must be a module's function."""
    calls = [tuple(call) for call in calls]
    build_all([(fn, call) for call in calls], workers=workers, desc=desc or f"runs of {fn.__qualname__}")
    return [fn(*call) for call in calls]


def build_all(
    jobs: Sequence[tuple[Callable[..., Any], tuple]], *, workers: int | None = None, desc: str | None = None
) -> int:
    """Build the cache entries of ``jobs``, ``(cached function, call)`` pairs of any cached functions, that are not
    in the cache yet: each once, in the order given, ``workers`` at a time
    (:func:`~lecture_lib.runtime.parallel_map`). Several tables' runs given together keep every core busy until
    the last one ends, where one table at a time leaves a core idle while its last run finishes; put the longest
    runs first. Returns how many entries were built."""
    for fn, _ in jobs:
        if not hasattr(fn, "is_cached"):
            raise TypeError(f"expected a function decorated with cached_call or cached_build, got {fn!r}")
    from lecture_lib.runtime import parallel_map  # runtime's pool is needed only here

    missing = {(fn, fn.cache_name(*call)): (fn, *call) for fn, call in jobs if not fn.is_cached(*call)}
    if missing:
        parallel_map(_build_only, list(missing.values()), workers=workers, desc=desc)
    return len(missing)


def job(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> tuple[Callable[..., Any], tuple]:
    """The job of :func:`build_all` for the call ``fn(*args, **kwargs)``: ``(fn, call)``, the keyword arguments
    moved to their positions and the defaults filled in, so that a list of jobs reads as the calls it stands for.

    >>> def scaled(x, factor=2, offset=0):
    ...     return x * factor + offset
    >>> job(scaled, 3, offset=1)[1]
    (3, 2, 1)
    """
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise ValueError(
            f"a job passes its call by position, and {fn.__qualname__} takes {sorted(bound.kwargs)} by keyword only"
        )
    return fn, bound.args


def _build_only(fn: Callable[..., Any], *args: Any) -> None:
    """One worker's job of :func:`build_all`: build the entry, send nothing back (the caller reads the cache)."""
    fn(*args)


class Deferred:
    """A call made only when it is needed: ``Deferred(fn, *args, **kwargs)()`` is ``fn(*args, **kwargs)``. As an
    argument of a cached function it is named by its call (:func:`call_recipe`), so an input that is costly to
    build (a tokenized corpus) is built only when the result must be computed.

    >>> Deferred(sorted, [3, 1, 2])()
    [1, 2, 3]
    """

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)

    def cache_recipe(self) -> dict[str, Any]:
        return call_recipe(self.fn, self.args, self.kwargs)


def call_recipe(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    ignore: Sequence[str] = (),
) -> dict[str, Any]:
    """What a call's result depends on, as JSON: the function (:func:`describe`: its name and code), every
    argument bound to its parameter, defaults included (but those in ``ignore``), and the module constants its
    code reads (:func:`constants_read`). An argument :func:`describe` cannot name is a ``TypeError`` naming it.

    >>> def scaled(x, factor=2):
    ...     return x * factor
    >>> call_recipe(scaled, (3,))["arguments"] == call_recipe(scaled, (), {"x": 3, "factor": 2})["arguments"]
    True
    """
    try:
        bound = inspect.signature(fn).bind(*args, **(kwargs or {}))
    except ValueError:  # no signature (a builtin): the arguments as given
        arguments = {"args": list(args), **(kwargs or {})}
    else:
        bound.apply_defaults()
        arguments = bound.arguments
    where = getattr(fn, "__qualname__", type(fn).__qualname__)
    return {
        "function": describe(fn, f"the function {where}"),
        "arguments": {
            name: describe(value, f"argument {name!r} of {where}")
            for name, value in arguments.items()
            if name not in ignore
        },
        "constants": constants_read(fn),
    }


def constants_read(fn: Callable[..., Any]) -> dict[str, Any]:
    """The module constants ``fn``'s code names (its nested code too: comprehensions, inner functions), each
    :func:`describe`-d: globals that are plain data (numbers, strings, containers of them, dataclass instances,
    enums). Functions, classes and modules are code, not constants; a global that is not data is left out.

    >>> LIMIT = 3
    >>> def first(items):
    ...     return items[:LIMIT]
    >>> constants_read(first)
    {'LIMIT': 3}
    """
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    names, todo = set(), [code]
    while todo:
        code = todo.pop()
        names |= set(code.co_names)
        todo += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    scope = fn.__globals__
    return {
        name: describe(scope[name], f"the constant {name}")
        for name in sorted(names)
        if name in scope and _is_data(scope[name])
    }


def _is_data(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, enum.Enum)):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_data(item) for item in value)
    if isinstance(value, dict):
        return all(_is_data(k) and _is_data(v) for k, v in value.items())
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def describe(value: Any, where: str = "the value") -> Any:
    """``value`` as JSON that changes whenever ``value`` could change a result: plain data as itself (tuples as
    lists, sets sorted), a dataclass field by field with its class name, an enum by name, a model, a dict of
    tensors, a tensor or a tokenizer by :func:`fingerprint`, a module-level function or class by its qualified
    name and its code (docstring, comments and decorators aside), a method by its function and its object or
    class, an object with a ``cache_recipe()`` method by
    what that returns. Anything else (a lambda, a local function, an open file) is a ``TypeError`` naming
    ``where``.

    >>> describe((1, "a", None))
    [1, 'a', None]
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"enum": f"{_qualified(type(value))}.{value.name}"}
    if isinstance(value, (list, tuple)):
        return [describe(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((describe(item, where) for item in value), key=json.dumps)}
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return _describe_code(value, where)
    if isinstance(value, types.MethodType):  # a classmethod (PretrainingData.from_corpus), or an object's method
        return {"method": _describe_code(value.__func__, where), "of": describe(value.__self__, where)}
    if callable(getattr(value, "cache_recipe", None)):
        return {"class": _qualified(type(value)), "recipe": describe(value.cache_recipe(), where)}
    if dataclasses.is_dataclass(value):
        return {
            "class": _qualified(type(value)),
            "fields": {
                f.name: describe(getattr(value, f.name), f"{where}.{f.name}") for f in dataclasses.fields(value)
            },
        }
    if isinstance(value, torch.Tensor):
        return {"tensor": fingerprint({"tensor": value})}
    if isinstance(value, dict) and value and all(isinstance(v, torch.Tensor) for v in value.values()):
        return {"tensors": fingerprint(value)}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: describe(v, f"{where}[{k!r}]") for k, v in value.items()}
        return {
            "items": sorted(
                ([describe(k, where), describe(v, f"{where}[{k!r}]")] for k, v in value.items()), key=json.dumps
            )
        }
    if (
        isinstance(value, torch.nn.Module)
        or hasattr(value, "get_vocab")
        or isinstance(getattr(value, "vocab", None), dict)
    ):
        return {"fingerprint": fingerprint(value)}
    raise TypeError(
        f"cannot name a cached call by {where}: expected plain data, a dataclass, a model, a tokenizer, "
        f"a tensor, a module-level function or an object with cache_recipe(), got "
        f"{type(value).__qualname__}"
    )


def _describe_code(value: Callable[..., Any] | type, where: str) -> dict[str, Any]:
    if "<" in value.__qualname__:  # <lambda>, <locals>: what it closes over is out of sight
        raise TypeError(
            f"cannot name a cached call by {where}: {value.__qualname__} is a lambda or a local "
            "function; pass a module-level function, or a Deferred call of one"
        )
    return {"code": _qualified(value), "digest": _code_digest(value)}


def _qualified(kind: Any) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@functools.lru_cache(maxsize=None)
def _code_digest(fn: Callable[..., Any] | type) -> str | None:
    """16 hex digits of the syntax tree of ``fn``'s source without its docstring and decorators (so a reworded
    docstring or comment keeps the name, a changed statement does not); ``None`` without source (a builtin)."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.decorator_list = []
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


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
