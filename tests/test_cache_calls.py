"""lecture_lib.cache's names made from the call: a cached function's entry is named by the function, every argument
(configs field by field, models by fingerprint, data objects by their recipe) and the module constants it reads;
equal calls get equal names in every process; ``compute_all`` runs only the calls missing from the cache."""

import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecture_lib import cache
from lecture_lib.cache import (
    Deferred,
    build_all,
    cache_root,
    cached_build,
    cached_call,
    call_recipe,
    compute_all,
    job,
)

SCALE = 3
WORDS = ("a", "b")


@dataclass(frozen=True)
class Inner:
    rate: float = 0.1
    name: str = "a"


@dataclass(frozen=True)
class Outer:
    steps: int = 3
    inner: Inner = field(default_factory=Inner)
    sizes: tuple = (1, 2)


@cached_call(ignore=("progress",))
def scaled(config: Outer, n: int, flag: bool = False, progress: bool = True) -> dict:
    """A cached run that reads two module constants."""
    return {"value": config.steps * SCALE * n, "words": list(WORDS), "flag": flag}


@cached_call
def logged(n: int, log: str) -> int:
    """A cached run that leaves a mark in ``log`` each time it is computed (in whichever process)."""
    (Path(log) / f"{n}.ran").write_text("ran")
    return n * n


@cached_build(load=lambda path: path.read_text())
def written(path: Path, text: str) -> None:
    path.write_text(text.upper())


@pytest.fixture(autouse=True)
def _root(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "cache"))


configs = st.builds(
    Outer,
    steps=st.integers(0, 5),
    sizes=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    inner=st.builds(Inner, rate=st.sampled_from([0.1, 0.2, 1.0]), name=st.sampled_from("ab")),
)


@settings(max_examples=200, deadline=None)
@given(configs, configs, st.integers(0, 3), st.integers(0, 3), st.booleans(), st.booleans())
def test_two_calls_share_a_name_exactly_when_their_configs_and_arguments_are_equal(a, b, n, m, f, g):
    same_call = (a, n, f) == (b, m, g)
    assert (scaled.cache_name(a, n, f) == scaled.cache_name(b, m, g)) == same_call
    assert scaled.cache_name(a, n, f) == scaled.cache_name(replace(a), n=n, flag=f)  # equal, not the same object


@pytest.mark.parametrize("constant, other", [("SCALE", 4), ("WORDS", ("a", "c"))])
def test_a_module_constant_the_function_reads_is_in_its_name(constant, other, monkeypatch):
    before = scaled.cache_name(Outer(), 1)
    monkeypatch.setattr(sys.modules[__name__], constant, other)
    assert scaled.cache_name(Outer(), 1) != before


def test_an_ignored_argument_keeps_the_name_and_a_result_is_computed_once():
    assert scaled.cache_name(Outer(), 2, progress=False) == scaled.cache_name(Outer(), 2)
    assert scaled(Outer(steps=2), 5) == {"value": 30, "words": ["a", "b"], "flag": False}
    assert scaled.is_cached(Outer(steps=2), 5) and not scaled.is_cached(Outer(steps=2), 6)
    assert scaled.__wrapped__(Outer(steps=2), 5)["value"] == 30


def test_a_build_is_written_once_at_its_name_and_loaded():
    assert written("abc") == "ABC" and (cache_root() / written.cache_name("abc")).read_text() == "ABC"
    assert written.cache_name("abc") != written.cache_name("abd")


def test_models_tokenizers_and_data_objects_are_named_by_their_content():
    torch.manual_seed(0)
    layer = torch.nn.Linear(2, 2)
    before = call_recipe(sorted, (layer,))
    with torch.no_grad():
        layer.bias[0] += 1e-3
    assert call_recipe(sorted, (layer,)) != before

    class Diaries:  # a data object: named by what it is built from
        def __init__(self, seed):
            self.seed = seed

        def cache_recipe(self):
            return {"seed": self.seed}

    assert cache.describe(Diaries(1)) == cache.describe(Diaries(1)) != cache.describe(Diaries(2))
    assert cache.describe(Deferred(sorted, [2, 1])) != cache.describe(Deferred(sorted, [1, 2]))
    assert cache.describe(Outer.__eq__) != cache.describe(Inner.__eq__)  # functions: named by their module and code
    assert cache.describe(Outer(steps=1).__repr__) != cache.describe(Outer(steps=2).__repr__)  # a method, its object


def test_an_argument_that_cannot_be_named_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"argument 'n' of scaled: expected plain data.*got object"):
        scaled.cache_name(Outer(), object())
    with pytest.raises(TypeError, match=r"argument 'n' of scaled: .*lambda"):
        scaled.cache_name(Outer(), lambda: 1)


def test_the_code_is_in_the_name_but_not_its_docstring_or_comments(tmp_path, monkeypatch):
    body = "def run(x):\n    {doc}\n    return x + {k}  # {comment}\n"
    for name, doc, k, comment in (
        ("one", '"""Doc."""', 1, "a"),
        ("two", '"""Other doc."""', 1, "b"),
        ("three", '"""Doc."""', 2, "a"),
    ):
        (tmp_path / f"code_{name}.py").write_text(body.format(doc=doc, k=k, comment=comment))
    monkeypatch.syspath_prepend(str(tmp_path))
    one, two, three = (__import__(f"code_{name}").run for name in ("one", "two", "three"))
    digest = [call_recipe(fn, (1,))["function"]["digest"] for fn in (one, two, three)]
    assert digest[0] == digest[1] != digest[2]


def test_equal_calls_get_equal_names_in_another_process_under_another_hash_seed():
    script = (
        "from tests.test_cache_calls import scaled, Outer, Inner; "
        "print(scaled.cache_name(Outer(inner=Inner(name='b')), 2, True))"
    )
    names = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert names == {scaled.cache_name(Outer(inner=Inner(name="b")), 2, True)}


def test_compute_all_runs_only_the_missing_calls_in_workers_then_reads_every_result(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    assert logged(1, str(log)) == 1  # already in the cache
    (log / "1.ran").unlink()
    calls = [(n, str(log)) for n in (1, 2, 3, 2)]
    assert compute_all(logged, calls, workers=2) == [1, 4, 9, 4]
    assert sorted(p.name for p in log.iterdir()) == ["2.ran", "3.ran"]  # each missing call once, 1 never again
    for p in log.iterdir():
        p.unlink()
    assert compute_all(logged, calls, workers=2) == [1, 4, 9, 4] and not list(log.iterdir())
    with pytest.raises(TypeError, match="decorated with cached_call"):
        compute_all(sorted, calls)


def test_build_all_builds_the_missing_calls_of_several_functions_once_each(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    jobs = [(logged, (5, str(log))), (written, ("one",)), (logged, (5, str(log))), (logged, (6, str(log)))]
    assert build_all(jobs, workers=2) == 3  # the repeated call once
    assert sorted(p.name for p in log.iterdir()) == ["5.ran", "6.ran"]
    assert written("one") == "ONE" and logged(6, str(log)) == 36
    assert build_all(jobs, workers=2) == 0  # all in the cache now
    with pytest.raises(TypeError, match="decorated with cached_call"):
        build_all([(logged, (1, str(log))), (sorted, ([2, 1],))])


def test_a_job_passes_its_call_by_position_and_builds_the_entry_that_the_keyword_call_reads():
    fn, call = job(scaled, Outer(steps=2), flag=True, n=4)
    assert fn is scaled and call == (Outer(steps=2), 4, True, True)  # in order, the default filled in
    assert build_all([(fn, call)], workers=1) == 1
    assert scaled.is_cached(Outer(steps=2), n=4, flag=True) and not scaled.is_cached(Outer(steps=2), n=4)

    def keyed(x, *, y=1):
        return x + y

    with pytest.raises(ValueError, match=r"takes \['y'\] by keyword only"):
        job(keyed, 1)
