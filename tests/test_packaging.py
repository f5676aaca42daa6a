"""The install paths agree: pyproject's dependencies are all pinned in requirements.lock, and the torch pin
is the same in the Makefile, the `cpu` extra and environment.yml."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


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
    wanted = project["dependencies"] + [r for extra in ("notebooks", "test", "book")
                                        for r in project["optional-dependencies"][extra]]
    missing = {_name(r) for r in wanted} - set(_lock()) - {"torch"}
    assert not missing, f"requirements.lock lacks {sorted(missing)}: regenerate it"
    assert "torch" not in _lock(), "torch is installed by the Makefile's TORCH variable, not the lock"


def test_torch_pin_is_the_same_everywhere():
    makefile_pin = re.search(r"^TORCH\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert PYPROJECT["project"]["optional-dependencies"]["cpu"] == [makefile_pin]
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert makefile_pin in pip_section and "-r requirements.lock" in pip_section and "-e ." in pip_section


def test_ci_runs_the_readme_test_command():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]
    assert "make test" in (ROOT / "README.md").read_text()


def test_lecture_lib_imports_only_declared_dependencies():
    import ast
    import sys
    from importlib.metadata import packages_distributions

    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    distributions = packages_distributions()
    undeclared = set()
    for path in (ROOT / "lecture_lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
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
