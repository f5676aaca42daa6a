"""lecture_lib.config: field rules, the errors that name their field, and the one-line command-line errors."""

from dataclasses import dataclass, field

import pytest

from lecture_lib.config import (
    FieldError,
    FlagParser,
    OneOf,
    Range,
    add_ranged,
    build_config,
    check_fields,
    rule_of,
    same_rule_as,
)


@dataclass
class Recipe:
    steps: int = field(default=3, metadata=Range(1).rule())
    share: float = field(default=0.5, metadata=Range(0, 1, open=True, why="a part of the whole").rule())
    pairs: str | None = field(default=None, metadata=OneOf(("nsp", "sop")).rule())
    name: str = "run"

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class Copy:
    steps: int = field(default=3, metadata=same_rule_as(Recipe, "steps"))


@pytest.mark.parametrize(
    "values, expected",
    [
        (dict(steps=0), "steps: expected a value >= 1, got 0"),
        (dict(share=1.0), "share: expected a value in (0, 1) (a part of the whole), got 1.0"),
        (dict(pairs="rtd"), "pairs: expected one of nsp, sop, got 'rtd'"),
    ],
)
def test_a_field_outside_its_rule_is_refused_by_name(values, expected):
    with pytest.raises(FieldError) as error:
        Recipe(**values)
    assert str(error.value) == expected and error.value.fields == (next(iter(values)),)
    assert str(error.value.within("train")) == f"train.{expected}"


def test_unset_optional_fields_and_values_inside_the_rule_pass():
    assert Recipe(steps=1, share=0.999, pairs="sop") and Recipe(pairs=None)
    assert Range(1).allows(None) and not Range(0, 1).allows(1.5) and Range(0, 1).allows(1)


def test_a_copied_rule_is_the_same_rule():
    assert rule_of(Copy, "steps") is rule_of(Recipe, "steps") and rule_of(Recipe, "name") is None


@dataclass
class Study:
    recipe: Recipe = field(default_factory=lambda: Recipe(steps=10, name="study"))
    documents: int = 100


@dataclass
class Derived:
    """A config that fills a field itself: build_dataclass defers to its ``from_nested``."""

    steps: int
    warmup: int

    @classmethod
    def from_nested(cls, values):
        return cls(values["steps"], values["steps"] // 10)


@dataclass
class Holder:
    derived: Derived


def test_a_chapter_config_is_its_table_then_the_overrides_field_by_field():
    quick = dict(recipe=dict(share=0.25), documents=500)
    assert build_config(Study, quick, dict(recipe=dict(steps=3))) == Study(Recipe(3, 0.25, name="study"), 500)
    assert build_config(Study, quick, dict(recipe=Recipe())) == Study(Recipe(), 500)  # an instance replaces
    assert build_config(Holder, dict(derived=dict(steps=50))) == Holder(Derived(50, 5))


def test_a_bad_override_is_refused_naming_the_field_and_its_path():
    with pytest.raises(
        ValueError, match=r"unknown Study fields \['documnets'\]; expected some of \['recipe', 'documents'\]"
    ):
        build_config(Study, dict(documnets=1))
    with pytest.raises(FieldError, match=r"^recipe.steps: expected a value >= 1, got 0$"):
        build_config(Study, dict(recipe=dict(steps=0)))


def test_flag_errors_are_one_line_naming_the_flag_with_the_rule_in_help(capsys):
    parser = FlagParser(prog="demo")
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=20)
    assert "timed repeats; >= 1; default: 20" in " ".join(parser.format_help().split())
    assert parser.parse_args(["--repeats", "2"]).repeats == 2
    for value, reason in [("0", "expected a value >= 1, got 0"), ("x", "expected int, got 'x'")]:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(["--repeats", value])
        assert exit_.value.code == 2
        assert capsys.readouterr().err == f"demo: error: --repeats: {reason} (--help lists the flags)\n"


def test_an_override_keeps_the_defaults_at_every_depth():
    @dataclass
    class Optimiser:
        lr: float = 0.1
        wd: float = 0.0

    @dataclass
    class Finetune:
        steps: int = 10
        opt: Optimiser = field(default_factory=Optimiser)

    @dataclass
    class Chapter:
        finetune: Finetune = field(default_factory=lambda: Finetune(steps=150, opt=Optimiser(lr=5.0)))

    built = build_config(Chapter, dict(finetune=dict(opt=dict(wd=1.0))))
    assert built.finetune == Finetune(steps=150, opt=Optimiser(lr=5.0, wd=1.0))  # the default's 150 and 5.0 kept
