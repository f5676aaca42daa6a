"""The rules a config's fields obey, stated once beside the field, the one way a chapter's sizes become its
config, and the command lines that read them.

A field's rule is its metadata, ``steps: int = field(default=300, metadata=Range(1).rule())``; the dataclass's
``__post_init__`` calls :func:`check_fields`, which raises a :class:`FieldError` naming the field. The command
lines show the same rule in ``--help`` (``>= 1``) and turn a :class:`FieldError` into a one-line error naming
the flag (``--train.steps: expected a value >= 1, got -5``), before any work starts.

A chapter's config is its profile's table (``QUICK`` or ``FULL``: nested dicts of field values) with the
caller's overrides merged in (:func:`merge_dicts`), built into the config's dataclass (:func:`build_dataclass`);
:func:`build_config` is both, so that every ``chapter_config`` reads
``build_config(Chapter06Config, pick(quick=QUICK, full=FULL), overrides)``.

Taught in: 04_bert_pretraining ("A training loop for real runs").
"""

from __future__ import annotations

import argparse
import functools
import typing
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable, Sequence

RULE = "rule"  # the metadata key of a field's rule
BUILDER = "builder"  # the metadata key of a field made by built_by: what builds it from keyword values


class FieldError(ValueError):
    """A value a config refuses: ``fields`` names the field(s) at fault (dotted paths once nested, as
    :meth:`within` makes them), ``reason`` says what was expected and what came."""

    def __init__(self, names: Sequence[str], reason: str) -> None:
        self.fields, self.reason = tuple(names), reason
        super().__init__(f"{', '.join(self.fields)}: {reason}")

    def within(self, part: str) -> FieldError:
        """The same error, its fields seen from the config that holds this one as ``part``."""
        return FieldError([f"{part}.{name}" for name in self.fields], self.reason)


@dataclass(frozen=True)
class Range:
    """Numbers from ``low`` to ``high`` (``None``: unbounded), both ends included unless ``open``; ``why``
    explains a bound that is not obvious. ``None`` passes (an optional field's "unset").

    >>> str(Range(0, 1)), str(Range(1)), str(Range(0, 1, open=True)), str(Range(0, open=True))
    ('in [0, 1]', '>= 1', 'in (0, 1)', '> 0')
    """

    low: float | None = None
    high: float | None = None
    open: bool = False
    why: str = ""

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.open else '>='} {self.low}"
        return f"in {'(' if self.open else '['}{self.low}, {self.high}{')' if self.open else ']'}"

    def allows(self, value: Any) -> bool:
        if value is None:
            return True
        above = self.low is None or (value > self.low if self.open else value >= self.low)
        return above and (self.high is None or (value < self.high if self.open else value <= self.high))

    def reason(self, value: Any) -> str:
        return f"expected a value {self}{f' ({self.why})' if self.why else ''}, got {value}"

    def rule(self) -> dict[str, Any]:
        """The field metadata that attaches this rule."""
        return {RULE: self}


@dataclass(frozen=True)
class OneOf:
    """One of ``values`` (``None`` passes: an optional field's "unset").

    >>> str(OneOf(("nsp", "sop")))
    'one of nsp, sop'
    """

    values: tuple[str, ...]

    def __str__(self) -> str:
        return f"one of {', '.join(self.values)}"

    def allows(self, value: Any) -> bool:
        return value is None or value in self.values

    def reason(self, value: Any) -> str:
        return f"expected {self}, got {value!r}"

    def rule(self) -> dict[str, Any]:
        return {RULE: self}


def rule_of(config_class: type, name: str) -> Range | OneOf | None:
    """The rule of field ``name`` of ``config_class`` (``None``: any value of its type)."""
    return next(f.metadata.get(RULE) for f in fields(config_class) if f.name == name)


def same_rule_as(config_class: type, name: str) -> dict[str, Any]:
    """The field metadata that gives a field the rule of field ``name`` of ``config_class``: one rule for a
    setting that two configs carry (a recipe's ``train.steps`` and the training loop's ``steps``)."""
    return {RULE: rule_of(config_class, name)}


def check_fields(config: Any) -> None:
    """Raise a :class:`FieldError` for the first field of ``config`` that its rule refuses."""
    for f in fields(config):
        rule, value = f.metadata.get(RULE), getattr(config, f.name)
        if rule is not None and not rule.allows(value):
            raise FieldError([f.name], rule.reason(value))


def check_divisible(config: Any, whole: str, part: str, why: str = "") -> None:
    """Raise a :class:`FieldError` naming both fields unless field ``part`` divides field ``whole`` evenly (a
    width split into heads, layers into groups); ``why`` explains the rule.

    >>> from types import SimpleNamespace
    >>> check_divisible(SimpleNamespace(hidden_size=32, num_attention_heads=3), "hidden_size", "num_attention_heads")
    Traceback (most recent call last):
    lecture_lib.config.FieldError: num_attention_heads, hidden_size: hidden_size 32 is not divisible by num_attention_heads 3
    """
    if getattr(config, whole) % getattr(config, part):
        raise FieldError(
            [part, whole],
            f"{whole} {getattr(config, whole)} is not divisible by {part} "
            f"{getattr(config, part)}{f' ({why})' if why else ''}",
        )


def check_indices(config: Any, size: str, *names: str) -> None:
    """Raise a :class:`FieldError` for the first field of ``names`` that is not an index into a table of field
    ``size`` rows, in [0, size): a special token's id and the vocabulary.

    >>> from types import SimpleNamespace
    >>> check_indices(SimpleNamespace(vocab_size=2, pad_token_id=0, eos_token_id=2), "vocab_size",
    ...               "pad_token_id", "eos_token_id")
    Traceback (most recent call last):
    lecture_lib.config.FieldError: eos_token_id, vocab_size: expected eos_token_id in [0, 2), got 2
    """
    for name in names:
        if not 0 <= getattr(config, name) < getattr(config, size):
            raise FieldError(
                [name, size], f"expected {name} in [0, {getattr(config, size)}), got {getattr(config, name)}"
            )


# ---------------------------------------------------------------- building a config from nested dicts


def seeded(config: Any, seed: int) -> Any:
    """``config`` for the run of ``seed``: its own ``seed`` and its fine-tuning's (``config.finetune_seed``)
    replaced, everything else (the data's settings among them) unchanged.

    >>> @dataclass(frozen=True)
    ... class Run:
    ...     seed: int = 0
    ...     finetune_seed: int = 0
    >>> seeded(Run(), 2)
    Run(seed=2, finetune_seed=2)
    """
    return replace(config, seed=seed, finetune_seed=seed)


def merge_dicts(*layers: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merged left to right: a dict merges into a dict field by field, anything else replaces.

    >>> merge_dicts({"train": {"steps": 300, "lr": 0.002}, "seed": 0}, {"train": {"steps": 5}, "seed": 1})
    {'train': {'steps': 5, 'lr': 0.002}, 'seed': 1}
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            both_dicts = isinstance(value, dict) and isinstance(merged.get(name), dict)
            merged[name] = merge_dicts(merged[name], value) if both_dicts else value
    return merged


def build_dataclass(cls: type, values: dict[str, Any] | Any) -> Any:
    """``cls`` from a (nested) dict: an instance of ``cls`` is returned as it is; a class that fills some
    fields itself (:class:`~lecture_lib.pretraining.PretrainConfig`: the model's sizes from its data) builds
    itself with its classmethod ``from_nested(values)``; any other is :func:`build_fields`."""
    if isinstance(values, cls):
        return values
    from_nested = getattr(cls, "from_nested", None)
    return from_nested(values) if from_nested is not None else build_fields(cls, values)


def built_by(builder: Callable[..., Any], **defaults: Any) -> Any:
    """A dataclass field whose value is built by ``builder`` from keyword values: its default is
    ``builder(**defaults)``, and :func:`build_fields` reads a dict given for it as ``builder(**defaults, **dict)``
    (the dict over ``defaults``), so that values the builder derives follow the dict: a fine-tuning budget
    ``finetune: TrainConfig = built_by(finetune_budget)`` given as ``dict(steps=75)`` warms up over 8 steps,
    not over the default's 15.

    >>> from dataclasses import make_dataclass
    >>> def budget(steps=10, warmup=None):
    ...     return {"steps": steps, "warmup": steps // 10 if warmup is None else warmup}
    >>> Run = make_dataclass("Run", [("budget", dict, built_by(budget, steps=20))])
    >>> Run().budget, build_fields(Run, {"budget": {"steps": 50}}).budget
    ({'steps': 20, 'warmup': 2}, {'steps': 50, 'warmup': 5})
    """
    build = functools.partial(builder, **defaults)
    return field(default_factory=build, metadata={BUILDER: build})


def build_fields(cls: type, values: dict[str, Any]) -> Any:
    """``cls(**values)``, each dataclass-typed field given as a dict built with :func:`build_dataclass`: the
    dict changes that field's default where it has one (a config whose ``pretrain`` defaults to a recipe reads
    ``pretrain=dict(seed=1)`` as that recipe with seed 1), else it is all the field's values; a field made by
    :func:`built_by` is its builder's call on the dict. Unknown names raise, naming the fields ``cls`` has.

    >>> from dataclasses import make_dataclass
    >>> Inner = make_dataclass("Inner", [("steps", int, 1), ("lr", float, 0.1)])
    >>> Outer = make_dataclass("Outer", [("inner", Inner), ("seed", int, 0)])
    >>> build_fields(Outer, {"inner": {"lr": 0.5}, "seed": 2})
    Outer(inner=Inner(steps=1, lr=0.5), seed=2)
    >>> build_fields(Outer, {"sede": 2})
    Traceback (most recent call last):
    ValueError: unknown Outer fields ['sede']; expected some of ['inner', 'seed']
    """
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields {unknown}; expected some of {list(known)}")
    return cls(**{name: _field_value(known[name], hints[name], value) for name, value in values.items()})


def _field_value(f: Field, hint: Any, value: Any) -> Any:
    """The value of field ``f`` (of type ``hint``) given as ``value``: see :func:`build_fields`."""
    build = f.metadata.get(BUILDER)
    if build is not None and isinstance(value, dict):
        try:
            return build(**value)
        except FieldError as error:
            raise error.within(f.name) from None
    if not is_dataclass(hint):
        return value
    default = f.default_factory() if f.default_factory is not MISSING else f.default
    if isinstance(value, dict) and is_dataclass(default):
        value = merge_dicts(_as_dict(default), value)
    return build_part(f.name, hint, value)


def _as_dict(config: Any) -> dict[str, Any]:
    """A dataclass's init fields as a dict, nested dataclasses as dicts too (so an override merges at any depth)."""
    return {g.name: _as_dict(v) if is_dataclass(v := getattr(config, g.name)) else v for g in fields(config) if g.init}


def build_part(part: str, cls: type, values: dict[str, Any] | Any) -> Any:
    """:func:`build_dataclass` of the config held as field ``part`` of a bigger one: a :class:`FieldError`
    names the field by its path (``train.steps``)."""
    try:
        return build_dataclass(cls, values)
    except FieldError as error:
        raise error.within(part) from None


def build_config(cls: type, *layers: dict[str, Any]) -> Any:
    """``cls`` built from nested dicts merged left to right: a chapter's config is
    ``build_config(Config, pick(quick=QUICK, full=FULL), overrides)``, its profile's table changed by the
    caller's overrides, a nested dict field by field (:func:`merge_dicts`, then :func:`build_dataclass`).

    >>> from dataclasses import make_dataclass
    >>> Train = make_dataclass("Train", [("steps", int, 1), ("lr", float, 0.1)])
    >>> Sizes = make_dataclass("Sizes", [("train", Train), ("documents", int, 100)])
    >>> QUICK = dict(train=dict(steps=300, lr=0.002), documents=500)
    >>> build_config(Sizes, QUICK, dict(train=dict(steps=5)))
    Sizes(train=Train(steps=5, lr=0.002), documents=500)
    """
    return build_dataclass(cls, merge_dicts(*layers))


# ---------------------------------------------------------------- command lines


class FlagParser(argparse.ArgumentParser):
    """argparse, with every error on one line of stderr naming the flag (``PROG: error: --steps: expected a
    value >= 1, got 0``) and exit status 2: no usage block above it (``--help`` shows that)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = message.removeprefix("argument ")  # argparse's "argument --x: ...", as the others read
        self.exit(2, f"{self.prog}: error: {message} (--help lists the flags)\n")


def flag_type(parse: Callable[[str], Any], rule: Range | OneOf | None = None) -> Callable[[str], Any]:
    """An argparse ``type``: ``parse`` the text (the message of its ``ValueError`` is the error), then refuse
    a value outside ``rule``; either way one line naming the flag."""

    def parse_flag(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError as error:
            simple = parse in (int, float)  # their messages ("invalid literal for int() ...") are Python's
            reason = f"expected {parse.__name__}, got {text!r}" if simple else str(error)
            raise argparse.ArgumentTypeError(reason) from None
        if rule is not None and not rule.allows(value):
            raise argparse.ArgumentTypeError(rule.reason(value))
        return value

    return parse_flag


def add_ranged(
    parser: argparse.ArgumentParser | Any,
    flag: str,
    parse: Callable[[str], Any],
    rule: Range | OneOf,
    help: str = "",
    **options: Any,
) -> None:
    """``parser.add_argument(flag)`` whose value is checked against ``rule`` as it is read, and whose help
    says the rule and the default."""
    default = options.get("default")
    shown = "; ".join(part for part in (help, str(rule), f"default: {default}" if default is not None else "") if part)
    parser.add_argument(flag, type=flag_type(parse, rule), help=shown, **options)
