"""Every worked example in lecture_lib's docstrings runs and prints what it claims."""

import doctest
import importlib
import pkgutil

import pytest

import lecture_lib

MODULES = sorted(m.name for m in pkgutil.walk_packages(lecture_lib.__path__, "lecture_lib.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
