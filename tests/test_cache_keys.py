"""Cache keys that see every input: a property test over every cached recipe of the chapters (issue 36, item 5).

A chapter caches what it trains under a name made of its recipe's key (:mod:`lecture_lib.cache`), so a stale hit
happens exactly when something that changes the result is missing from the recipe. Chapter 06's exercise 2 was
such a case: the student changed ``NOUN_PHRASE_DEPENDENTS`` and got the old run back. Here every entry point
that caches is called with the cache replaced by a recorder (nothing trains), once as the chapter calls it and
then once per change of one input:

- every field of its configuration, however deep (each value replaced by a valid neighbour);
- every other argument that the chapter passes (another value a student might pass);
- every module constant (upper-case name) that the entry point reads, directly or through the functions of
  its module that it calls (found in their code).

Each change must change the names the entry point asks the cache for, unless :data:`NOT_IN_THE_RESULT` says why
that input cannot change what is cached. A new cached entry point goes into :data:`ENTRY_POINTS`;
``test_every_cached_entry_point_is_listed`` finds the ones that are not.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import inspect
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from lecture_lib import pretraining, profile
from lecture_lib.chapters import ch04_bert_pretraining as ch04
from lecture_lib.chapters import ch07_albert as ch07
from lecture_lib.chapters import course_language
from lecture_lib.tokenization import WordPieceTokenizer

CHAPTERS = Path(course_language.__file__).parent
CACHE_CALLS = ("cached", "cached_json", "cached_pretraining")


def tiny_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##c"])


def result(name: str, **fields) -> SimpleNamespace:
    """What a cached pretraining returns, as far as the callers below read it before they cache."""
    return SimpleNamespace(**{"path": Path(name), "model": mock.MagicMock(), "tokenizer": tiny_tokenizer(), **fields})


# name -> (the call as the chapter makes it: a function of the inputs, the inputs, other values of the
# non-configuration inputs). The inputs are built anew for every call, so that a changed constant reaches them.
ENTRY_POINTS = {
    "ch04.small_pretrained_bert": (ch04.small_pretrained_bert, lambda: dict(config=ch04.chapter_config()), {}),
    "ch04.pretrained_row": (
        ch04.pretrained_row,
        lambda: dict(config=ch04.synthetic_config(), language_model="left-to-right"),
        {"language_model": "masked"},
    ),
    "course_language.synthetic_pretrained_bert": (
        course_language.synthetic_pretrained_bert,
        lambda: dict(config=course_language.chapter_config()),
        {},
    ),
    "ch07.pretrained": (
        ch07.pretrained,
        lambda: dict(config=ch07.chapter_config().pairs, data=ch07.DiaryPairs(ch07.chapter_config().pairs)),
        {},
    ),
}

# (entry point, input) -> why changing that input cannot change what the entry point caches. An input is a
# configuration field's dotted path ("config.train.steps", "*" for any rest of it), an argument's name or a module
# constant's name.
_PRETRAINING_ONLY = "pretraining reads the pretraining recipe and the language's documents, not the tasks' settings"
_TASK_FIELDS = (
    "finetune.*",
    "table_finetune.*",
    "tagger_finetune.*",
    "train_examples",
    "test_examples",
    "head_lr",
    "max_length",
    "people_per_passage",
    "sentences_per_passage",
    "seed",
    "seeds",
)
NOT_IN_THE_RESULT: dict[tuple[str, str], str] = {
    **{
        (entry, f"config.{field}"): _PRETRAINING_ONLY
        for field in _TASK_FIELDS
        for entry in (
            "course_language.synthetic_pretrained_bert",
            "ch04.pretrained_row",
        )
    },
}


def exempt(entry: str, label: str) -> bool:
    return any(
        entry == exempt_entry and fnmatch.fnmatchcase(label, pattern) for exempt_entry, pattern in NOT_IN_THE_RESULT
    )


# --- Calling an entry point with the cache replaced by a recorder --------------------------------------------


def cache_names(monkeypatch, call, inputs: dict) -> tuple[str, ...]:
    """The names the call asks the cache for (each carries its recipe's key), in order; nothing is built."""
    asked = []

    def cached(name, build, load):
        asked.append(name)
        return mock.MagicMock()

    def cached_json(name, recipe, run):
        from lecture_lib.cache import key

        asked.append(f"{name}-{key(recipe)}")
        return mock.MagicMock()

    def cached_pretraining(config, *args, **kwargs):
        name = pretraining.cached_pretraining.cache_name(config, *args, **kwargs)
        asked.append(name)
        return result(name, config=config)

    for module in (ch04, ch07, course_language):
        for name, stub in (
            ("cached", cached),
            ("cached_json", cached_json),
            ("cached_pretraining", cached_pretraining),
        ):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, stub)
    call(**inputs)
    return tuple(asked)


# --- Neighbouring values -----------------------------------------------------------------------------------


def neighbours(value):
    """Other values of the same kind, nearest first: what a student might set instead."""
    return [other for other in _candidates(value) if other != value]


def _candidates(value):
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value * 2, value - 1]
    if isinstance(value, float):
        return [value * 0.5, value + 0.1, value * 2]
    if isinstance(value, str):
        return [value + "-other"]
    if isinstance(value, (tuple, list)):
        return (
            [value[:-1], value[1:], type(value)(list(value) * 2)] if len(value) > 1 else [type(value)(list(value) * 2)]
        )
    if isinstance(value, (set, frozenset)):
        return [type(value)(sorted(value)[:-1])] if len(value) > 1 else [type(value)(set(value) | {"other"})]
    if isinstance(value, dict):  # every value changed (a table keyed by profile changes in the active one too)
        changed = {k: neighbours(v)[0] for k, v in value.items() if neighbours(v)}
        return [{**value, **changed}, dict(list(value.items())[1:])]
    return []


def leaves(config, path=()):
    """Dotted paths to the fields of a (nested) dataclass that are not dataclasses themselves."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            yield from leaves(value, (*path, field.name))
        else:
            yield (*path, field.name)


def replaced(config, path, value):
    if len(path) == 1:
        return dataclasses.replace(config, **{path[0]: value})
    return dataclasses.replace(config, **{path[0]: replaced(getattr(config, path[0]), path[1:], value)})


def configuration_changes(inputs: dict):
    """(dotted path, inputs with that field set to a valid neighbour) for every field of every dataclass input."""
    for argument, config in inputs.items():
        if not dataclasses.is_dataclass(config):
            continue
        for path in leaves(config):
            value = config
            for part in path:
                value = getattr(value, part)
            for other in neighbours(value):
                try:
                    changed = replaced(config, path, other)
                except (ValueError, TypeError):
                    continue  # the config's own rules refuse it; try the next neighbour
                yield ".".join((argument, *path)), {**inputs, argument: changed}
                break


# --- The constants an entry point reads ----------------------------------------------------------------------


def constants_read(function) -> set[str]:
    """Upper-case names that ``function``'s module defines and that its body reads, or the bodies of the module's
    functions it calls, transitively. (A default value is read once, when the module is imported; an imported
    constant, such as ``IGNORE_INDEX``, is the library's convention, not a setting of the chapter.)"""
    module = inspect.getmodule(function)
    tree = ast.parse(Path(module.__file__).read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    defined = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.isupper()
    }
    found, seen, todo = set(), set(), [function.__name__]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in (node for statement in functions[name].body for node in ast.walk(statement)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in defined:
                    found.add(node.id)
                todo.append(node.id)
    return found


def other_profile(name: str) -> bool:
    """QUICK, FULL, SYNTHETIC_FULL, ...: a table of the profile that is not active cannot reach this run."""
    active, other = ("QUICK", "FULL") if profile.current() == "quick" else ("FULL", "QUICK")
    return name == other or name.endswith("_" + other)


# --- The property ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_input_that_changes_the_result_changes_the_cache_name(entry, monkeypatch):
    call, make_inputs, other_arguments = ENTRY_POINTS[entry]
    base = cache_names(monkeypatch, call, make_inputs())
    assert base, f"{entry} asked the cache for nothing"
    unseen = []

    def check(label, names):
        if names == base and not exempt(entry, label):
            unseen.append(label)

    def names_or_refused(inputs):
        try:
            return cache_names(monkeypatch, call, inputs)
        except ValueError:
            return None  # refused before anything is cached (a shape that does not fit, say): no stale hit

    for label, inputs in configuration_changes(make_inputs()):
        check(label, names_or_refused(inputs))
    for argument, value in other_arguments.items():
        check(argument, names_or_refused({**make_inputs(), argument: value}))
    module = inspect.getmodule(call)
    for constant in sorted(constants_read(call)):
        if other_profile(constant):
            continue
        original = getattr(module, constant)
        for other in neighbours(original)[:1]:
            with monkeypatch.context() as patch:
                patch.setattr(module, constant, other)
                try:
                    names = cache_names(patch, call, make_inputs())
                except (ValueError, TypeError, KeyError):
                    continue  # the changed table is refused before anything is cached: no stale hit possible
            check(constant, names)
    assert not unseen, (
        f"{entry}: changing these leaves the cache names as they were, so the cache would return "
        f"a stale result (add them to the recipe, or say in NOT_IN_THE_RESULT why they cannot "
        f"change it):\n" + "\n".join(unseen)
    )


def test_every_cached_entry_point_is_listed():
    """Each public chapter function that calls the cache itself is in ENTRY_POINTS (a private helper is reached
    through the public function that calls it)."""
    listed = {(inspect.getmodule(call).__name__, call.__name__) for call, _, _ in ENTRY_POINTS.values()}
    calling = set()
    for path in CHAPTERS.glob("*.py"):
        module = f"lecture_lib.chapters.{path.stem}"
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith("_")
                and any(
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name)
                    and n.func.id in CACHE_CALLS + ("_cached_model",)
                    for n in ast.walk(node)
                )
            ):
                calling.add((module, node.name))
    assert calling - listed == set(), f"cached entry points missing from ENTRY_POINTS: {sorted(calling - listed)}"
