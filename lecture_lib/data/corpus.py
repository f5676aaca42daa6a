"""The embedded corpus: Python's own documentation, read from the running interpreter.

Every CPython ships English prose about itself, so the course has a real corpus with no network:

- ``pydoc_data.topics``: the language-reference topics that ``help("assert")`` prints, one document
  per topic (79 topics in Python 3.11);
- the docstrings of the standard-library modules listed in :data:`STDLIB_MODULES`: each module's own
  docstring, and the docstrings of its public classes and functions and of those classes' public
  methods and properties. One document per docstring, titled by its dotted name (``json.dumps``).

Only the modules in :data:`STDLIB_MODULES` are imported. The list leaves out on purpose modules with
side effects on import (``this`` prints a poem, ``antigravity`` opens a browser), GUI and IDE packages
(``tkinter``, ``turtle``, ``idlelib``), test packages (``test``, ``unittest.test``), platform-specific
modules (``os``, ``posix``, ``subprocess``, ``selectors``, ``signal``), and modules deprecated or removed
between Python 3.10 and 3.13 (``cgi``, ``imp``, ``asyncore``...). A module missing from the running
Python is skipped. Objects whose attribute access warns (``typing.io``) are skipped too. The docstrings are read
in a fresh interpreter, so that libraries imported earlier (which may patch the standard library) cannot
change them.

The order and content are deterministic for a given Python version: topics in sorted order, then the
modules in the listed order, their members in sorted name order; a docstring already seen (an alias)
is not repeated. The corpus is built once per process (about a second) and kept in memory.

Each document is split into sentences for the tasks that need them (next-sentence pairs in 04):
paragraphs that begin at the left margin are prose; indented blocks and ``>>>`` examples are code and
are left out of ``sentences`` (they stay in ``text``).

Taught in: 03_tokenization ("The corpus").
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
import subprocess
import sys
import warnings
import zlib
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import datasets

STDLIB_MODULES: tuple[str, ...] = (
    "abc", "argparse", "array", "ast", "asyncio.events", "asyncio.futures", "asyncio.locks",
    "asyncio.queues", "asyncio.streams", "asyncio.tasks", "base64", "bdb", "binascii", "bisect",
    "builtins", "bz2", "calendar", "cmath", "cmd", "code", "codecs", "codeop", "collections",
    "collections.abc", "colorsys", "configparser", "contextlib", "contextvars", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "dis", "doctest", "email.message", "enum",
    "filecmp", "fnmatch", "fractions", "ftplib", "functools", "getopt", "gettext", "glob", "graphlib",
    "gzip", "hashlib", "heapq", "hmac", "html", "html.parser", "http.client", "http.cookies", "inspect",
    "io", "ipaddress", "itertools", "json", "json.decoder", "json.encoder", "keyword", "linecache",
    "logging", "logging.handlers", "lzma", "mailbox", "math", "mimetypes", "netrc", "numbers",
    "operator", "optparse", "pathlib", "pdb", "pickle", "pickletools", "plistlib", "pprint", "queue",
    "quopri", "random", "re", "reprlib", "sched", "secrets", "shelve", "shlex", "shutil", "smtplib",
    "socketserver", "sqlite3", "statistics", "string", "struct", "tabnanny", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "trace", "traceback", "types", "typing",
    "unicodedata", "unittest.case", "unittest.mock", "urllib.parse", "urllib.request", "uuid",
    "warnings", "wave", "weakref", "xml.dom.minidom", "xml.etree.ElementTree", "zipapp", "zipfile",
    "zipimport", "zlib",
)  # fmt: skip

SOURCES = ("pydoc_topics", "docstrings")

# ---------------------------------------------------------------- reading the interpreter


def iter_topics() -> Iterator[tuple[str, str]]:
    """``(title, text)`` for each ``pydoc_data`` topic, in sorted order; titles are ``topic:NAME``."""
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield f"topic:{name}", topics[name].strip()


def _own_docstring(obj: object) -> str | None:
    """The docstring ``obj`` carries itself, cleaned; ``None`` if none or if reading it warns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    except Warning:
        return None
    if not isinstance(doc, str) or not doc.strip():
        return None
    return "\n".join(line.rstrip() for line in inspect.cleandoc(doc).splitlines()).strip("\n")


def _defined_in(obj: object, module_name: str) -> bool:
    """Whether ``obj`` was defined in ``module_name`` (objects without a ``__module__``, such as C method
    descriptors, count as defined where they are found)."""
    target = obj.fget if isinstance(obj, property) else obj
    owner = getattr(target, "__module__", None)
    return owner is None or owner == module_name


def _members(module_name: str, module: object) -> Iterator[tuple[str, object]]:
    """Public classes and functions defined in ``module``, then each class's public methods and properties."""
    for name in sorted(vars(module)):
        obj = vars(module)[name]
        if name.startswith("_") or not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        if getattr(obj, "__module__", None) != module_name:
            continue  # re-exported from elsewhere: documented where it is defined
        yield f"{module_name}.{name}", obj
        if inspect.isclass(obj):
            for attr in sorted(vars(obj)):
                member = vars(obj)[attr]
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if attr.startswith("_") or not (inspect.isroutine(member) or isinstance(member, property)):
                    continue
                if _defined_in(member, module_name):  # not a method some other library patched in
                    yield f"{module_name}.{name}.{attr}", member


def iter_docstrings(modules: tuple[str, ...] = STDLIB_MODULES) -> Iterator[tuple[str, str]]:
    """``(dotted name, docstring)`` for the modules in ``modules`` and their public members, read in this process.

    A docstring identical to one already yielded (an alias such as ``ElementTree.XML``) is skipped. What this
    process has imported before can change the answer (``transformers`` adds methods to ``logging.Logger``,
    and other libraries wrap standard functions), so the corpus reads them in a fresh interpreter
    (:func:`read_docstrings`).
    """
    seen: set[str] = set()
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # not built into this Python
        for title, obj in [(module_name, module), *_members(module_name, module)]:
            doc = _own_docstring(obj)
            if doc is not None and doc not in seen:
                seen.add(doc)
                yield title, doc


def read_docstrings() -> list[tuple[str, str]]:
    """:func:`iter_docstrings` run in a fresh interpreter: this Python, with nothing but the standard library.

    Taught in: 03_tokenization ("The corpus").
    """
    # -I -S: no environment variables, no site-packages; the module file runs on its own, outside the package
    code = "import json, runpy, sys; json.dump(list(runpy.run_path(sys.argv[1])['iter_docstrings']()), sys.stdout)"
    run = subprocess.run([sys.executable, "-I", "-S", "-c", code, __file__], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"reading the standard library's docstrings in {sys.executable} failed:\n{run.stderr}")
    return [(title, text) for title, text in json.loads(run.stdout)]


# ---------------------------------------------------------------- sentences

_UNDERLINE = re.compile(r"^\s*([*=\-~^])\1{2,}\s*$")
_BULLET = re.compile(r"^(?:[*\-+]|\d+\.|\(\d+\))\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def _prose_paragraphs(text: str) -> Iterator[str]:
    """Paragraphs of prose: blocks that start at the left margin, headings and examples removed."""
    lines = text.splitlines()
    kept: list[str] = []
    for i, line in enumerate(lines):
        underline_next = i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and line.strip()
        if _UNDERLINE.match(line) or underline_next:
            kept.append("")  # a heading (title + underline) ends the paragraph and is dropped
        else:
            kept.append(line)
    for block in re.split(r"\n\s*\n", "\n".join(kept)):
        block_lines = [line for line in block.split("\n") if line.strip()]
        if not block_lines or block_lines[0][:1].isspace() or block_lines[0].lstrip().startswith(">>>"):
            continue  # code, or an indented quotation
        if any(line.lstrip().startswith((">>>", "...")) for line in block_lines):
            continue
        yield " ".join(_BULLET.sub("", line.strip()) for line in block_lines)


def split_sentences(text: str, min_words: int = 3) -> list[str]:
    """The prose sentences of a document, in order (code, headings and short fragments left out).

    A sentence ends at ``.``, ``!`` or ``?`` followed by white space and a capital letter or digit,
    so ``e.g. a list`` stays whole. Fragments of fewer than ``min_words`` words are dropped.

    >>> split_sentences("Title\\n=====\\n\\nOne line\\nwraps here. Then a second one!\\n\\n   >>> code()\\n")
    ['One line wraps here.', 'Then a second one!']

    Taught in: 03_tokenization ("The corpus").
    """
    sentences = []
    for paragraph in _prose_paragraphs(text):
        for sentence in _SENTENCE_END.split(re.sub(r"\s+", " ", paragraph).strip()):
            if len(sentence.split()) >= min_words:
                sentences.append(sentence)
    return sentences


# ---------------------------------------------------------------- the dataset


@functools.lru_cache(maxsize=1)
def _columns() -> dict[str, list]:
    columns: dict[str, list] = {"doc_id": [], "source": [], "title": [], "text": [], "sentences": []}
    for source, documents in (("pydoc_topics", iter_topics()), ("docstrings", read_docstrings())):
        for title, text in documents:
            columns["doc_id"].append(len(columns["doc_id"]))
            columns["source"].append(source)
            columns["title"].append(title)
            columns["text"].append(text)
            columns["sentences"].append(split_sentences(text))
    return columns


@functools.lru_cache(maxsize=1)
def load_corpus() -> datasets.Dataset:
    """The embedded corpus as a ``datasets.Dataset``, one row per document.

    Columns: ``doc_id`` (int, the row number), ``source`` (``"pydoc_topics"`` or ``"docstrings"``),
    ``title`` (``"topic:assert"``, ``"json.dumps"``...; unique), ``text`` (the document) and
    ``sentences`` (its prose sentences, see :func:`split_sentences`). Built once per process.

    Taught in: 03_tokenization ("The corpus").
    """
    import datasets  # imported here: reading the texts alone does not need it

    return datasets.Dataset.from_dict(_columns())


def corpus_texts() -> list[str]:
    """The ``text`` column of :func:`load_corpus` as a plain list (shared, do not modify)."""
    return _columns()["text"]


def load_sentences() -> datasets.Dataset:
    """One row per sentence: ``doc_id``, ``sentence_id`` (position in its document) and ``text``.

    Consecutive rows with the same ``doc_id`` are consecutive sentences of one document.

    Taught in: 03_tokenization ("The corpus").
    """
    import datasets

    columns = _columns()
    rows: dict[str, list] = {"doc_id": [], "sentence_id": [], "text": []}
    for doc_id, sentences in zip(columns["doc_id"], columns["sentences"]):
        rows["doc_id"].extend([doc_id] * len(sentences))
        rows["sentence_id"].extend(range(len(sentences)))
        rows["text"].extend(sentences)
    return datasets.Dataset.from_dict(rows)


def is_held_out(title: str, held_out_fraction: float = 0.1) -> bool:
    """Whether the document titled ``title`` belongs to the held-out split.

    The rule hashes the title (CRC-32, modulo 10,000), so a document keeps its side of the split
    whatever else the corpus holds, on every Python version that has it.
    """
    if not 0.0 <= held_out_fraction <= 1.0:
        raise ValueError(f"expected held_out_fraction in [0, 1], got {held_out_fraction}")
    return zlib.crc32(title.encode("utf-8")) % 10_000 < round(held_out_fraction * 10_000)


def split_corpus(held_out_fraction: float = 0.1) -> datasets.DatasetDict:
    """``DatasetDict(train=..., test=...)``: whole documents, held out by :func:`is_held_out`.

    Taught in: 03_tokenization ("The corpus").
    """
    import datasets

    corpus = load_corpus()
    held_out = [is_held_out(title, held_out_fraction) for title in corpus["title"]]
    return datasets.DatasetDict(
        train=corpus.select([i for i, h in enumerate(held_out) if not h]),
        test=corpus.select([i for i, h in enumerate(held_out) if h]),
    )


def corpus_stats() -> dict[str, int]:
    """Size of the corpus: documents, sentences, characters and white-space separated words."""
    columns = _columns()
    return {
        "documents": len(columns["text"]),
        "sentences": sum(len(s) for s in columns["sentences"]),
        "characters": sum(len(t) for t in columns["text"]),
        "words": sum(len(t.split()) for t in columns["text"]),
    }
