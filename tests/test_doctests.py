"""Every worked example in lecture_lib's docstrings runs and prints what it claims."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import lecture_lib

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(lecture_lib.__path__, "lecture_lib.") if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_every_folder_of_the_package_is_walked():
    """A folder without ``__init__.py`` is a namespace package that ``walk_packages`` skips: its doctests never run."""
    root = Path(lecture_lib.__file__).parent
    folders = {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    assert not [str(f.relative_to(root)) for f in folders if not (f / "__init__.py").is_file()]
