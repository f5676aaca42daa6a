"""The rules of ../shared/ARCHITECTURE.md that a machine can check, read from the source files (nothing imported):

- every "Taught in" line names an existing notebook and, for each quoted heading, an existing heading in it;
- every module of the idea packages says which notebook teaches it;
- who may import whom, and who may call ``profile.pick``;
- a chapter's classes extend nothing of the library: models, data tasks and objectives live in their role;
- public names are unique across the package;
- ruff passes with the configuration in pyproject.toml.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lecture_lib"
NOTEBOOKS = ROOT / "notebooks"
MODULES = sorted(PACKAGE.rglob("*.py"))
NOTEBOOK_SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    """The string constants that are docstrings: of the module, of every class and of every function."""
    owners = [tree] + [
        n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    found = []
    for owner in owners:
        first = owner.body[0] if owner.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            found.append(first.value)
    return found


# --- "Taught in" -------------------------------------------------------------------------------------------
#
# The form: `Taught in: REF, REF, ... .` where REF is a notebook's stem, optionally followed by the headings it
# means in parentheses, each in double quotes:
#     Taught in: 01_attention.
#     Taught in: 04_bert_pretraining ("Masked LM", "The model").
#     Taught in: 01_attention ("The bottleneck, measured"), 02_transformer ("Training").
# A reference may wrap over lines. The matching rule for a heading: the text of a markdown heading of the notebook
# (`# ## 3. Scaled dot-product attention` in the py:percent source) after its section number ("3. "), compared
# exactly, case included. A trailing parenthesis of the heading, a citation such as "(Sennrich et al., 2016)",
# may be left out of the reference: "BPE for words" names `## 4. BPE for words (Sennrich et al., 2016)`.

TAUGHT_IN = "Taught in:"
_HEADINGS = r'"[^"\n]*"(?:\s*,\s*"[^"\n]*")*'
_REFERENCE = rf"(?P<notebook>\d\d_[a-z0-9_]+)(?:\s*\(\s*(?P<headings>{_HEADINGS})\s*\))?"
_REFERENCE_PLAIN = rf"\d\d_[a-z0-9_]+(?:\s*\(\s*{_HEADINGS}\s*\))?"
_LINE = re.compile(rf"{re.escape(TAUGHT_IN)}\s*(?P<refs>{_REFERENCE_PLAIN}(?:\s*,\s*{_REFERENCE_PLAIN})*)\.(?:\s|$)")


@dataclass(frozen=True)
class Reference:
    where: str  # path:line of the "Taught in" line
    notebook: str
    headings: tuple[str, ...]


def _references(source: str, name: str) -> tuple[list[Reference], list[str]]:
    """The references in the docstrings of one module's source, and the problems of form found on the way."""
    references, problems, seen = [], [], 0
    for node in _docstring_nodes(ast.parse(source)):
        text = node.value
        for start in (m.start() for m in re.finditer(re.escape(TAUGHT_IN), text)):
            seen += 1
            where = f"{name}:{node.lineno + text.count(chr(10), 0, start)}"
            line = _LINE.match(text, start)
            if line is None:
                snippet = " ".join(text[start:].split())[:100]
                problems.append(f'{where}: expected `Taught in: NN_name ("Heading", ...), ... .`, got `{snippet}`')
                continue
            for ref in re.finditer(_REFERENCE, line.group("refs")):
                headings = tuple(re.findall(r'"([^"\n]*)"', ref.group("headings") or ""))
                references.append(Reference(where, ref.group("notebook"), headings))
    if source.count(TAUGHT_IN) != seen:
        problems.append(f"{name}: {source.count(TAUGHT_IN) - seen} `{TAUGHT_IN}` outside a docstring")
    return references, problems


def _headings(notebook: Path) -> set[str]:
    """The names a reference may use for the markdown headings of a py:percent notebook (the rule above)."""
    names = set()
    for cell in jupytext.read(notebook).cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            heading = re.fullmatch(r"#{1,6}\s+(?:\d+\.\s+)?(?P<text>.+?)\s*", line)
            if heading:
                text = heading.group("text")
                names.add(text)
                names.add(re.sub(r"\s*\([^()]*\)$", "", text))
    return names


def test_every_taught_in_names_an_existing_notebook_and_heading():
    headings = {path.stem: _headings(path) for path in NOTEBOOK_SOURCES}
    found, broken = 0, []
    for path in MODULES:
        references, problems = _references(path.read_text(), _relative(path))
        broken += problems
        for ref in references:
            found += 1
            if ref.notebook not in headings:
                broken.append(f"{ref.where}: no notebook notebooks/{ref.notebook}.py (have {sorted(headings)})")
                continue
            broken += [
                f'{ref.where}: {ref.notebook} has no heading "{h}"'
                for h in ref.headings
                if h not in headings[ref.notebook]
            ]
    assert found > 100, f"expected the package's ~190 'Taught in' references, parsed {found}: is the parser broken?"
    assert not broken, "stale or malformed 'Taught in' references:\n" + "\n".join(broken)


def test_the_taught_in_parser_reads_every_form():
    """The forms the package uses, and the mistakes the check above must catch, on a module written here."""
    source = (
        '"""Doc.\n\nTaught in: 01_attention ("A", "B, with comma"), 02_transformer,\n'
        '04_bert_pretraining ("C").\n"""\n\n\n'
        'def f():\n    """Taught in: 03_tokenization."""\n\n\n'
        'def g():\n    """Taught in: 05_bert_finetuning ("D")"""\n'
        "# Taught in: a comment, not a docstring\n"
    )
    references, problems = _references(source, "example.py")
    assert [(r.notebook, r.headings) for r in references] == [
        ("01_attention", ("A", "B, with comma")),
        ("02_transformer", ()),
        ("04_bert_pretraining", ("C",)),
        ("03_tokenization", ()),
    ]
    assert len(problems) == 2 and "got `Taught in: 05_bert_finetuning" in problems[0] and "outside" in problems[1]


def test_heading_names_drop_the_number_and_may_drop_a_trailing_citation():
    names = _headings(NOTEBOOKS / "03_tokenization.py")
    assert {"The corpus", "BPE for words (Sennrich et al., 2016)", "BPE for words"} <= names
    assert "1. The corpus" not in names and "the corpus" not in names


IDEA_PACKAGES = ("models", "objectives", "finetuning", "analysis", "compression", "chapters")


def test_every_idea_module_says_which_notebook_teaches_it():
    """Each public module of the idea packages (and pretraining/) carries a module-level "Taught in" line."""
    modules = [
        p
        for p in MODULES
        if not p.name.startswith("_") and (p.parent.name in IDEA_PACKAGES or p.parent.name == "pretraining")
    ]
    assert modules
    missing = [_relative(p) for p in modules if TAUGHT_IN not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert not missing, f"modules without a module-level 'Taught in' line: {missing}"


# --- Who may import whom -----------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every lecture_lib module the file imports; `from lecture_lib.x import y` counts as x and as x.y (a
    submodule or a name, we cannot tell without importing, and a rule about a package covers both)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return {m for m in found if m == "lecture_lib" or m.startswith("lecture_lib.")}


def _within(module: str, prefixes: set[str] | tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _lib(*names: str) -> tuple[str, ...]:
    return tuple(f"lecture_lib.{n}" for n in names)


def _in_package(*folders: str) -> list[Path]:
    return [p for p in MODULES if p.relative_to(PACKAGE).parts[0] in folders]


# Core modules, used by three or more chapters (ARCHITECTURE.md's first line), and the building blocks beside them.
CORE = _lib(
    "profile",
    "runtime",
    "train",
    "measure",
    "metrics",
    "decoding",
    "attention",
    "cache",
    "plots",
    "labels",
    "inference",
)
# What analysis/, compression/ and finetuning/ may import: models, metrics and the core; the tokenizers, data,
# and the objectives (parameter-free idea modules: DistilBERT's distillation runs the MLM objective); and each
# other (pruning ranks heads by analysis' importance). Never the pretraining-chapter glue: lecture_lib.pretraining,
# lecture_lib.chapters, lecture_lib.bench.
DOWNSTREAM_MAY_IMPORT = CORE + _lib(
    "models", "tokenization", "data", "objectives", "analysis", "compression", "finetuning"
)


def _violations(paths: list[Path], allowed=None, forbidden=None) -> list[str]:
    bad = []
    for path in paths:
        for module in sorted(_imports(path)):
            if module == "lecture_lib":
                continue
            if (forbidden and _within(module, forbidden)) or (allowed and not _within(module, allowed)):
                bad.append(f"{_relative(path)} imports {module}")
    return bad


def test_models_never_import_training_pretraining_finetuning_or_chapters():
    forbidden = _lib("train", "pretraining", "finetuning", "chapters", "bench", "analysis", "compression")
    bad = _violations(_in_package("models"), forbidden=forbidden)
    assert not bad, f"models/ imports core and other models only: {bad}"


def test_objectives_import_only_runtime_tokenization_labels_data_and_objectives():
    """data/ for the gold annotation that defines masking units (objectives/masking_units.py); data/ never imports
    objectives/."""
    allowed = _lib("runtime", "tokenization", "labels", "data", "objectives")
    bad = _violations(_in_package("objectives"), allowed=allowed)
    assert not bad, f"objectives/ are token ids in, (inputs, labels) out: {bad}"
    assert not _violations(_in_package("data"), forbidden=_lib("objectives")), "data/ is below objectives/"


def test_tokenization_imports_only_the_core_and_itself():
    """Tokenizers are the floor that data/ and objectives/ stand on: they never import data/ (where the corpora and
    the real MiniLM's files are found) nor anything above it."""
    bad = _violations(_in_package("tokenization"), allowed=CORE + _lib("tokenization"))
    assert not bad, f"tokenization/ imports the core and tokenization/ only: {bad}"


def test_analysis_compression_finetuning_never_import_the_pretraining_glue():
    bad = _violations(_in_package("analysis", "compression", "finetuning"), allowed=DOWNSTREAM_MAY_IMPORT)
    assert not bad, f"allowed: {sorted(DOWNSTREAM_MAY_IMPORT)}; found: {bad}"


def test_only_bench_and_chapters_import_chapters():
    others = [p for p in MODULES if p.relative_to(PACKAGE).parts[0] not in ("bench", "chapters")]
    bad = _violations(others, forbidden=_lib("chapters"))
    assert not bad, f"nothing imports chapters/ except notebooks and bench/: {bad}"


SHARED_CHAPTER = "lecture_lib.chapters.course_language"  # the language, its BERT and its tasks, read by many
SOLUTIONS = "lecture_lib.chapters.solutions"  # the exercises' answers, one module per chapter


def _is_solution(path: Path) -> bool:
    return path.parent.name == "solutions"


def _chapters_it_may_import(path: Path) -> tuple[str, ...]:
    if _is_solution(path) or path.stem == "course_language":
        return ()
    return SHARED_CHAPTER, f"{SOLUTIONS}.{path.stem}"


def test_no_chapter_imports_another_chapter():
    """What several chapters use lives in chapters/course_language.py; a chapter imports that module, and its own
    exercises' answers (chapters/solutions/ under its own name), and no other chapter (an earlier chapter's module
    would make it a floor of the others, a later one a cycle in the reading order); the shared module and the
    answers import no chapter."""
    bad = [
        f"{_relative(path)} imports {module}"
        for path in _in_package("chapters")
        for module in sorted(_imports(path))
        if _within(module, _lib("chapters"))
        and module != "lecture_lib.chapters"
        and not _within(module, _chapters_it_may_import(path))
    ]
    assert not bad, f"a chapter imports {SHARED_CHAPTER} and its own answers in {SOLUTIONS}, no other chapter: {bad}"


# --- Library logic lives in its role -------------------------------------------------------------------------
#
# The rule: a class defined in lecture_lib/chapters/ has no base from torch.nn and none from the library outside
# chapters/ (nor a base of its own module that has one). A subclass of nn.Module is a model; a subclass of a
# library class is a variant of a model, a data task, a head or an objective, and belongs beside what it extends
# (ARCHITECTURE.md: "a class that is a model, a data builder or an objective belongs to its role"). What a chapter
# defines itself are plain classes: its sizes, its cached runs' results, the data it assembles from the library.


def _base_origins(tree: ast.Module) -> dict[str, str]:
    """Each name the module binds by import, as the dotted path it stands for (``nn`` -> ``torch.nn``)."""
    origins = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            origins |= {
                (a.asname or a.name.partition(".")[0]): (a.name if a.asname else a.name.partition(".")[0])
                for a in node.names
            }
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            origins |= {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}
    return origins


def _library_subclasses(source: str) -> dict[str, str]:
    """The classes of a module's source that extend torch.nn or the library outside chapters/, directly or through
    a class of the same module: class name -> the base that makes it one."""
    tree = ast.parse(source)
    origins, found = _base_origins(tree), {}
    for node in tree.body:  # in order: a class's local bases are defined above it
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            name = ast.unparse(base)
            head, _, rest = name.partition(".")
            dotted = origins.get(head, head) + (f".{rest}" if rest else "")
            if head in found:
                found[node.name] = f"{name}, a {found[head]}"
            elif _within(dotted, ("torch.nn",)) or (
                _within(dotted, ("lecture_lib",)) and not _within(dotted, _lib("chapters"))
            ):
                found[node.name] = dotted
    return found


def test_chapters_define_no_models_tasks_or_objectives():
    bad = [
        f"{_relative(path)}: {cls}({base})"
        for path in _in_package("chapters")
        if not _is_solution(path)
        for cls, base in _library_subclasses(path.read_text()).items()
    ]
    assert not bad, (
        "a subclass of nn.Module or of a library class is library logic: move it to its role "
        f"(models/, data/, objectives/, finetuning/ ...) and import it in the chapter: {bad}"
    )


def test_the_library_subclass_detector_sees_through_aliases_and_local_bases():
    source = (
        "import torch\nfrom torch import nn\nfrom torch.nn import Module as M\nfrom dataclasses import dataclass\n"
        "from lecture_lib.data.seq2seq_tasks import TranslationTask\nfrom lecture_lib.chapters import course_language\n"
        "class A(nn.Module): pass\nclass B(A): pass\nclass C(M): pass\nclass D(torch.nn.Linear): pass\n"
        "class E(TranslationTask): pass\nclass F(course_language.CourseLanguageConfig): pass\nclass G: pass\n"
        "@dataclass\nclass H(G): pass\n"
    )
    found = _library_subclasses(source)
    assert list(found) == ["A", "B", "C", "D", "E"], found
    assert found["B"] == "A, a torch.nn.Module" and found["E"] == "lecture_lib.data.seq2seq_tasks.TranslationTask"


def test_notebooks_never_import_bench():
    assert NOTEBOOK_SOURCES
    bad = _violations(NOTEBOOK_SOURCES, forbidden=_lib("bench"))
    assert not bad, f"benchmarks are run from the command line, not from a notebook: {bad}"


def _pick_calls(path: Path) -> list[str]:
    """Lines that import ``lecture_lib.profile.pick`` or read ``pick`` off the profile module (under any alias)."""
    tree = ast.parse(path.read_text())
    profile_names, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "lecture_lib.profile":
            found += [f"{_relative(path)}:{node.lineno}" for a in node.names if a.name in ("pick", "*")]
        elif isinstance(node, ast.ImportFrom) and node.module == "lecture_lib":
            profile_names |= {a.asname or a.name for a in node.names if a.name == "profile"}
        elif isinstance(node, ast.Import):
            profile_names |= {a.asname for a in node.names if a.name == "lecture_lib.profile" and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "pick":
            owner = ast.unparse(node.value)
            if owner in profile_names or owner == "lecture_lib.profile":
                found.append(f"{_relative(path)}:{node.lineno}")
    return found


def test_only_chapters_and_bench_pick_sizes_by_profile():
    """A chapter's sizes live in chapters/chNN_name.py (benchmarks' in bench/): the only callers of profile.pick."""
    elsewhere = [
        p
        for p in MODULES + NOTEBOOK_SOURCES
        if p.parent not in (PACKAGE / "chapters", PACKAGE / "bench") and p != PACKAGE / "profile.py"
    ]
    bad = [line for path in elsewhere for line in _pick_calls(path)]
    assert not bad, f"profile.pick outside lecture_lib/chapters and lecture_lib/bench: {bad}"
    assert _pick_calls(PACKAGE / "chapters" / "ch01_attention.py"), "the pick detector finds nothing: is it broken?"


# --- Cache names are made by the cache layer --------------------------------------------------------------

# What names a cache entry by hand: a recipe dict typed by the caller. Chapters decorate their runs instead
# (cache.cached_call, cache.cached_build), so the name is made from the call. (cache.key alone names no entry: a
# chapter may use it to memoise within a process.)
HAND_NAMING = {"cached", "cached_json", "cached_json_path"}


def _hand_named_cache_calls(path: Path) -> list[str]:
    """``file:line`` of every call of a hand-naming function of ``lecture_lib.cache`` (imported or as ``cache.f``)."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "lecture_lib.cache"
        for alias in node.names
        if alias.name in HAND_NAMING
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        by_name = isinstance(func, ast.Name) and func.id in imported
        by_module = (
            isinstance(func, ast.Attribute)
            and func.attr in HAND_NAMING
            and isinstance(func.value, ast.Name)
            and func.value.id == "cache"
        )
        if by_name or by_module:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_chapter_names_a_cache_entry_by_hand():
    """ARCHITECTURE.md: a cached call's name is made by the cache layer from everything the call reads."""
    chapters = sorted((PACKAGE / "chapters").rglob("*.py")) + NOTEBOOK_SOURCES
    bad = [line for path in chapters for line in _hand_named_cache_calls(path)]
    assert not bad, f"cache entries named by hand (decorate the run with cache.cached_call / cached_build): {bad}"


def test_the_hand_naming_detector_finds_both_spellings(tmp_path):
    source = tmp_path / "ch99_example.py"
    source.write_text(
        "from lecture_lib import cache\nfrom lecture_lib.cache import cached_json as cj\n"
        "cj('a', {}, f)\ncache.cached_json_path('b', {})\ncache.cached_call(f)\n"
    )
    assert [line.rsplit(":", 1)[1] for line in _hand_named_cache_calls(source)] == ["3", "4"]


# --- Unique public names -----------------------------------------------------------------------------------

# Names that several modules define on purpose, one per module of a kind: a runnable module's command line, and
# a chapter's sizes (ARCHITECTURE.md: chapters/chNN_name.py holds QUICK, FULL and chapter_config) and its declared
# claims and checks (lecture_lib.reproductions: CLAIMS and CHECKS).
CONVENTIONS = {
    "main": "lecture_lib/",
    "QUICK": "lecture_lib/chapters/",
    "FULL": "lecture_lib/chapters/",
    "chapter_config": "lecture_lib/chapters/",
    "CLAIMS": "lecture_lib/chapters/",
    "CHECKS": "lecture_lib/chapters/",
}


def _public_definitions(path: Path) -> list[str]:
    """Top-level public functions, classes and UPPER_CASE constants (TypeVars aside) the module defines itself."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("TypeVar"):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names += [e.id for e in elements if isinstance(e, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", e.id)]
    return [n for n in names if not n.startswith("_")]


def test_public_names_are_unique_across_the_package():
    where: dict[str, list[str]] = {}
    for path in MODULES:
        for name in _public_definitions(path):
            where.setdefault(name, []).append(_relative(path))
    duplicated = {}
    for name, paths in where.items():
        if name in CONVENTIONS:
            paths = [p for p in paths if not p.startswith(CONVENTIONS[name])]
        if len(paths) > 1:
            duplicated[name] = paths
    assert len(where) > 100, "the definition reader finds too few names: is it broken?"
    assert not duplicated, f"one name, one meaning: rename or merge {duplicated}"


# --- Lint --------------------------------------------------------------------------------------------------


def test_ruff_passes():
    """ruff with the configuration of pyproject.toml [tool.ruff], on the paths the README names."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed: it is in the `test` extra of pyproject.toml (pip install -e '.[test]')")
    paths = ["lecture_lib", "tests", "book"] + [_relative(p) for p in sorted(NOTEBOOKS.glob("*.py"))]
    result = subprocess.run([ruff, "check", "--no-cache", *paths], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check {' '.join(paths)}:\n{result.stdout}{result.stderr}"
