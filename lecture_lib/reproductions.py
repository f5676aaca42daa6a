"""Paper-versus-ours tables, and the verdicts of a chapter's claims: declared before the run, computed after it.

A chapter calls :func:`show_reproduction` once per table that sets a paper's numbers beside ours. The table is
displayed as Markdown, so it reads the same in JupyterLab, Colab and the book. When the notebook is executed
by the book (``myst_nb`` importable), the same table is also *glued* under its key, with an HTML rendering
beside the Markdown: myst-nb pastes only HTML, images and plain text across pages. The book's extension
``book/_ext/reproductions_page.py`` finds every ``show_reproduction("key", ...)`` call of the notebooks and
pastes each key into the page ``book/reproductions.md`` from the executed notebook, so the page is generated
from what the notebooks computed and is never copied by hand.

**Claims: rules are data, stated before the run.** A chapter module declares its claims in a ``CLAIMS`` table
and its checks in a ``CHECKS`` table, next to its sizes. A :class:`Rule` says what the paper claims and where
(source and figure), the metric and the data, the compared model and the baseline, the direction, the margin,
which seeds vary and how many (:class:`Seeds`), and its :class:`Gate` s: each compared model must beat a
*floor* it can fail to beat (no pretraining, the most-frequent-token guess, chance, uniform, or on SQuAD 2.0
always answering nothing) by a margin on every seed. A :class:`Demonstration` shows a mechanism and measures no
outcome. A :class:`Check` (or a :class:`ParameterCount`) is an implementation equality, an exact count or a
replay: it cannot fail short of a bug, so it is listed under the table, not counted as a claim. The notebook
passes *measured values only* (:func:`measured`, :func:`shown`, :func:`checked`) to :func:`show_what_we_saw`,
which computes one of four outcomes with :func:`judge` and renders the rule's text from its declaration:

- ``reproduced``: every gate passes and the paper's direction holds by the rule, on every seed;
- ``not reproduced``: every gate passes and the rule fails;
- ``inconclusive``: a gate failed (a compared model does not beat its floor by the margin on every seed), or
  both rows sit at the metric's ceiling, so nothing can be ranked; the reason is printed in the row;
- ``mechanism only``: a demonstration, or a rule the quick profile cannot power (its ``quick`` field says why).

A rule's seeds are a promise: a claim about a pretraining objective varies the pretraining seed, three runs at
least (:data:`MIN_SEEDS`). A notebook that passes fewer seeds, or seeds of another kind (fine-tuning seeds for a
pretraining claim), gets a ``ValueError``, never a verdict: the chapter must then run the seeds, or declare
``quick="why"`` so that the quick profile shows the claim as ``mechanism only``.

A worked example. The chapter module declares, before anything runs::

    CLAIMS = (
        Rule("04-nsp-helps", "NSP helps downstream on a sentence-pair task",
             paper="No NSP −0.5 MNLI, −3.5 QNLI", source="Devlin et al. (2019), Table 5",
             metric="accuracy", data="three-way inference with held-out people",
             compared="MLM + NSP", baseline="MLM only", margin=0.01,
             seeds=Seeds("pretraining", 3),
             gates=(Gate("MLM + NSP", "no pretraining", 0.05), Gate("MLM only", "no pretraining", 0.05))),
        Demonstration("04-mlm-selection-rates", "MLM selects 15% and replaces 80/10/10",
                      paper="15%; 80/10/10", source="Devlin et al. (2019), section 3.1",
                      shows="the selection rates counted over 200k tokens"),
    )
    CHECKS = (ParameterCount("04-base-parameters", "BERT-base", source="Devlin et al. (2019), section 3",
                             paper="110M"),)

and its notebook, after the runs (one pretraining run per seed and row), passes only what it measured::

    show_what_we_saw("ch04-what-we-saw", "What we saw: chapter 04", CLAIMS, {
        "04-nsp-helps": measured(f"MLM + NSP {nsp_mean:.3f}, MLM only {mlm_mean:.3f}", nsp, mlm,
                                 seeds=seeds, seed_kind="pretraining",
                                 gates={"MLM + NSP": (nsp, scratch), "MLM only": (mlm, scratch)}),
        "04-mlm-selection-rates": shown(f"selected {rates['selected']:.2%}"),
    }, CHECKS, {"04-base-parameters": checked(f"{count / 1e6:.1f}M", count)})

Here ``nsp``, ``mlm`` and ``scratch`` are F1 per seed (``scratch`` is the same network fine-tuned from random
weights: the floor). If ``MLM only`` scores no better than ``scratch`` + 0.05 on some seed, the row reads
``inconclusive`` and says which model, which seed and by how much: two models that learned nothing are not
ranked.

The claims and checks also travel in the output's metadata, so that ``python -m lecture_lib.reproductions
summary DIR`` counts the outcomes of every executed notebook under ``DIR`` (the book's
``_build/jupyter_execute``)::

    01 claims=3 reproduced=3 not=0 inconclusive=0 mechanism=0 checks=6
    ...
    total claims=... reproduced=... not=... inconclusive=... mechanism=... checks=...

``--claims`` lists them, one ``NN KEY VERDICT`` line each, and ``--json`` every claim with its declared rule
and measured values.

Taught in: 01_attention ("The bottleneck, measured").
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence, Union

from IPython.display import Markdown, display

from lecture_lib import profile

try:  # the book's Markdown renderer; myst_nb, which alone glues tables, depends on it
    from markdown_it import MarkdownIt
except ImportError:
    MarkdownIt = None

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
CLAIM_KEY = re.compile(r"^(?P<chapter>[0-9]{2})-[a-z0-9]+(?:-[a-z0-9]+)*$")
LATEX = re.compile(r"(?<!\\)\$")  # an unescaped dollar opens TeX math, which a generated table must not hold
TABLE_CALL = re.compile(r"\bshow_(?:reproduction|what_we_saw)\(")
KEYED_TABLE_CALL = re.compile(r'\bshow_(?:reproduction|what_we_saw)\(\s*"(?P<key>[^"]+)"')
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, MECHANISM_ONLY = (
    "reproduced",
    "not reproduced",
    "inconclusive",
    "mechanism only",
)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, MECHANISM_ONLY)
CLAIMS_METADATA = "lecture_claims"  # the output metadata field that carries a table's claims
CHECKS_METADATA = "lecture_checks"  # ... and its checks
SEED_KINDS = {  # what a seed re-draws -> how the rule names its runs
    "pretraining": "pretraining runs",  # a whole pretraining run: initialisation, data order, masks
    "training": "training runs",  # a model trained from random weights on the task itself (no pretraining stage)
    "fine-tuning": "fine-tuning runs",  # fine-tuning of one pretrained model: its pretraining does not vary
    "probe fit": "probe fits",  # a probe fitted to one fixed model's features
    "data sample": "data samples",  # a fresh sample of data, for a measurement with no training
    "none": "",  # deterministic: a fixed model on fixed data
}
MIN_SEEDS = 3  # COURSE_DESIGN: claims are measured over at least three seeds
FLOORS = ("no pretraining", "most-frequent-token guess", "chance", "uniform", "always answering nothing")


def reproduction_keys(source: str, name: str) -> list[str]:
    """The keys of the ``show_reproduction`` and ``show_what_we_saw`` calls in one notebook's source, in order: the
    tables the book's Reproductions page pastes from that notebook. ``name`` names the source in the error.

    >>> reproduction_keys('show_reproduction("ch01-a", "Cap", h, r)\\nshow_reproduction(\\n    "ch01-b", c, h, r)', "x")
    ['ch01-a', 'ch01-b']
    """
    keys = [m.group("key") for m in KEYED_TABLE_CALL.finditer(source)]
    calls = len(TABLE_CALL.findall(source))
    if calls != len(keys):
        raise ValueError(
            f"{name}: expected every show_reproduction/show_what_we_saw call to name its key as a literal, "
            f"got {calls} calls and {len(keys)} literal keys"
        )
    return keys


def format_cell(value: object) -> str:
    """A table cell: floats to 3 significant decimals, ``None``/NaN as an en dash, ``|`` escaped.

    >>> [format_cell(v) for v in (0.8552, 12, None, float("nan"), "a|b", 84.4)]
    ['0.855', '12', '–', '–', 'a\\\\|b', '84.400']
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; every row must have as many cells as the header.

    >>> print(markdown_table(["model", "F1"], [["ours", 0.5], ["paper", "92.4"]]))
    | model | F1 |
    |---|---|
    | ours | 0.500 |
    | paper | 92.4 |
    """
    if not header:
        raise ValueError("expected at least one column, got an empty header")
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"row {i} has {len(row)} cells, expected {len(header)} (one per column of {list(header)})")
    lines = ["| " + " | ".join(format_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def show_reproduction(
    key: str, caption: str, header: Sequence[str], rows: Sequence[Sequence[object]], *, note: str = ""
) -> None:
    """Display a paper-versus-ours table and record it for the book's Reproductions page.

    ``key`` names the table across the course (lower-case words joined by ``-``, for example
    ``"ch04-bert-table5"``); ``caption`` says which paper and table it reproduces; ``note`` says in a sentence
    what did and did not reproduce. Returns nothing, so a cell that ends with the call shows the table once.

    Taught in: 01_attention ("The bottleneck, measured").
    """
    if not KEY_PATTERN.match(key):
        raise ValueError(f"expected a key of lower-case words joined by '-', like 'ch04-bert-table5', got {key!r}")
    text = f"**{caption}**\n\n{markdown_table(header, rows)}"
    if note:
        text += f"\n\n{note}"
    try:
        from myst_nb import glue
    except ImportError:  # Colab and plain Jupyter: show it, nothing to collect
        display(Markdown(text))
    else:
        glue(key, ReproductionTable(text), display=True)


class ReproductionTable:
    """A table's Markdown with an HTML rendering: the two outputs a glued table carries.

    With ``claims`` (and ``checks``), the Markdown output's metadata carries them (``{"lecture_claims": [...],
    "lecture_checks": [...]}``), which is what :func:`notebook_records` reads back from an executed notebook.

    >>> print(ReproductionTable("| a |\\n|---|\\n| 1 |")._repr_html_().splitlines()[0])
    <table class="table">
    """

    def __init__(self, markdown: str, claims: Sequence[Claim] = (), checks: Sequence[CheckResult] = ()) -> None:
        self.markdown = markdown
        self.claims = list(claims)
        self.checks = list(checks)

    def _repr_markdown_(self) -> str | tuple[str, dict]:
        if self.claims or self.checks:
            return self.markdown, {
                CLAIMS_METADATA: [claim.as_record() for claim in self.claims],
                CHECKS_METADATA: [check.as_record() for check in self.checks],
            }
        return self.markdown

    def _repr_html_(self) -> str | None:
        if MarkdownIt is None:  # no HTML rendering: IPython shows the Markdown
            return None
        html = MarkdownIt("commonmark").enable("table").render(self.markdown)
        return html.replace("<table>", '<table class="table">')


# --- declarations: a chapter's CLAIMS and CHECKS ---------------------------------------------------------------


def _require_key(key: str) -> None:
    if not CLAIM_KEY.match(key):
        raise ValueError(
            "expected a claim key of the chapter's two digits and lower-case words joined by '-', "
            f"like '04-pretraining-pays-downstream', got {key!r}"
        )


def _require_text(owner: str, **texts: str) -> None:
    """Every text of a declaration or a measurement is non-empty and holds no TeX math (tables show it raw)."""
    for name, text in texts.items():
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{owner}: expected a non-empty {name}, got {text!r}")
        if LATEX.search(text):
            raise ValueError(f"{owner}: expected {name} in plain text or Unicode (dₖ, √n, ×), got TeX math: {text!r}")


@dataclass(frozen=True)
class Seeds:
    """Which seed varies between a claim's runs (one of :data:`SEED_KINDS`) and how many runs the claim needs.

    A varying kind needs at least :data:`MIN_SEEDS`; ``"none"`` (a fixed model on fixed data) is one run.

    >>> Seeds("pretraining").text()
    'on each of 3 pretraining runs'
    >>> Seeds("none", 1).text()
    'in one deterministic measurement'
    >>> Seeds("fine-tuning", 1)
    Traceback (most recent call last):
    ...
    ValueError: expected at least 3 fine-tuning runs for a claim (COURSE_DESIGN), got 1: run more, or declare \
the rule's quick field so the quick profile shows it as mechanism only
    """

    kind: str
    count: int = MIN_SEEDS

    def __post_init__(self) -> None:
        if self.kind not in SEED_KINDS:
            raise ValueError(f"expected a seed kind in {list(SEED_KINDS)}, got {self.kind!r}")
        if self.kind == "none" and self.count != 1:
            raise ValueError(f"expected one run for a deterministic measurement (kind 'none'), got {self.count}")
        if self.kind != "none" and self.count < MIN_SEEDS:
            raise ValueError(
                f"expected at least {MIN_SEEDS} {SEED_KINDS[self.kind]} for a claim (COURSE_DESIGN), "
                f"got {self.count}: run more, or declare the rule's quick field so the quick profile "
                "shows it as mechanism only"
            )

    def text(self) -> str:
        if self.kind == "none":
            return "in one deterministic measurement"
        return f"on each of {self.count} {SEED_KINDS[self.kind]}"


@dataclass(frozen=True)
class Gate:
    """A model of the claim that must beat a floor (one of :data:`FLOORS`) by ``margin`` on every seed.

    The floor is what a model that learned nothing scores, so a model can fail to beat it; when one does, the
    claim is ``inconclusive``, not ranked.

    >>> Gate("MLM only", "no pretraining", 0.05).text()
    'MLM only above no pretraining by more than 0.05'
    """

    model: str
    floor: str
    margin: float

    def __post_init__(self) -> None:
        _require_text("gate", model=self.model)
        if self.floor not in FLOORS:
            raise ValueError(
                f"expected a gate's floor in {FLOORS} (something a trained model can fail to beat), got {self.floor!r}"
            )
        if not self.margin >= 0:
            raise ValueError(f"expected a gate margin ≥ 0, got {self.margin!r}")

    def text(self) -> str:
        return f"{self.model} above {self.floor} by more than {self.margin:g}"


@dataclass(frozen=True)
class Rule:
    """A claim about a measured outcome, declared before the run: the compared model against the baseline.

    ``baseline`` names a model measured beside ours, or is a number: a bar fixed in advance. The rule holds when
    ``compared > factor × baseline + margin`` on every seed (``higher=False``: ``compared < baseline / factor −
    margin``). ``ceiling`` is the metric's best value: when both rows are within ``margin`` of it on every seed,
    nothing can be ranked. ``quick`` says why the quick profile cannot power the claim; there it is shown as
    ``mechanism only``.

    >>> rule = Rule("01-x", "attention removes the bottleneck", paper="26.75 vs 17.82 BLEU",
    ...             source="Bahdanau et al. (2015), Table 1", metric="exact match", data="strings of length 14",
    ...             compared="with attention", baseline="without attention", margin=0.3,
    ...             seeds=Seeds("training"), gates=(Gate("without attention at length 4", "chance", 0.5),))
    >>> print(rule.text())
    exact match on strings of length 14: with attention above without attention by more than 0.3, on each of \
3 training runs; gate: without attention at length 4 above chance by more than 0.5
    >>> Rule("01-y", "c", paper="p", source="s", metric="m", data="d", compared="a", baseline=0.8,
    ...      seeds=Seeds("none", 1), higher=False, factor=2).text()
    'm on d: a below 0.8 / 2, in one deterministic measurement'
    """

    key: str
    claim: str
    paper: str  # the paper's figure
    source: str  # author (year), table or figure
    metric: str
    data: str  # what the metric is measured on
    compared: str
    baseline: Union[str, float]
    seeds: Seeds
    higher: bool = True
    margin: float = 0.0
    factor: float = 1.0
    gates: tuple[Gate, ...] = ()
    ceiling: float | None = None
    quick: str = ""  # why the quick profile cannot power it: there it is mechanism only

    def __post_init__(self) -> None:
        _require_key(self.key)
        _require_text(
            self.key,
            claim=self.claim,
            paper=self.paper,
            source=self.source,
            metric=self.metric,
            data=self.data,
            compared=self.compared,
        )
        if isinstance(self.baseline, str):
            _require_text(self.key, baseline=self.baseline)
        elif not isinstance(self.baseline, (int, float)) or isinstance(self.baseline, bool):
            raise TypeError(f"{self.key}: expected the baseline's name or a fixed bar, got {self.baseline!r}")
        if not isinstance(self.seeds, Seeds):
            raise TypeError(f"{self.key}: expected Seeds(kind, count), got {self.seeds!r}")
        if not (self.margin >= 0 and self.factor > 0):
            raise ValueError(f"{self.key}: expected margin ≥ 0 and factor > 0, got {self.margin!r} and {self.factor!r}")
        if not all(isinstance(gate, Gate) for gate in self.gates):
            raise TypeError(f"{self.key}: expected a tuple of Gate, got {self.gates!r}")
        models = [gate.model for gate in self.gates]
        if len(set(models)) != len(models):
            raise ValueError(f"{self.key}: expected one gate per model, got {models}")

    def text(self) -> str:
        """The rule in words, rendered from the declaration: what the table's "the rule" column shows."""
        baseline = f"{self.baseline:g}" if not isinstance(self.baseline, str) else self.baseline
        if self.factor != 1:
            baseline = f"{self.factor:g} × {baseline}" if self.higher else f"{baseline} / {self.factor:g}"
        margin = f" by more than {self.margin:g}" if self.margin else ""
        text = (
            f"{self.metric} on {self.data}: {self.compared} {'above' if self.higher else 'below'} {baseline}"
            f"{margin}, {self.seeds.text()}"
        )
        if self.gates:
            text += "; gate" + ("s: " if len(self.gates) > 1 else ": ") + "; ".join(g.text() for g in self.gates)
        if self.ceiling is not None:
            text += f"; the metric's ceiling is {self.ceiling:g}"
        return text

    def holds(self, ours: float, baseline: float) -> bool:
        if self.higher:
            return ours > self.factor * baseline + self.margin
        return ours < baseline / self.factor - self.margin

    def at_ceiling(self, value: float) -> bool:
        return self.ceiling is not None and abs(value - self.ceiling) <= self.margin + 1e-12


@dataclass(frozen=True)
class Demonstration:
    """A claim the chapter shows but does not measure an outcome of: always ``mechanism only``."""

    key: str
    claim: str
    paper: str
    source: str
    shows: str  # what the notebook shows

    def __post_init__(self) -> None:
        _require_key(self.key)
        _require_text(self.key, claim=self.claim, paper=self.paper, source=self.source, shows=self.shows)

    def text(self) -> str:
        return f"shows {self.shows}; no outcome measured"


@dataclass(frozen=True)
class Check:
    """An implementation equality, an exact count or a replay: ours equals ``reference`` within ``tolerance``.

    ``ours`` and the expected value may be sequences (compared entry by entry), or ours a sequence and the
    expected value one number for all.

    >>> check = Check("01-x", "doubling n adds n(2w+1) pairs", source="Beltagy et al. (2020)", reference="n(2w+1)")
    >>> check.passes(224, 224), check.passes([0.97, 1.05], 1.0), check.text()
    (True, False, 'equal to n(2w+1)')
    >>> Check("01-y", "s", "s", "×4 and ×2", tolerance=0.5).passes([3.7, 2.0], [4, 2])
    True
    """

    key: str
    statement: str
    source: str
    reference: str  # what ours is compared with, in words
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        _require_key(self.key)
        _require_text(self.key, statement=self.statement, source=self.source, reference=self.reference)
        if not self.tolerance >= 0:
            raise ValueError(f"{self.key}: expected a tolerance ≥ 0, got {self.tolerance!r}")

    def passes(self, ours: float | Sequence[float], expected: float | Sequence[float]) -> bool:
        values = list(ours) if isinstance(ours, (list, tuple)) else [ours]
        targets = list(expected) if isinstance(expected, (list, tuple)) else [expected] * len(values)
        if not values or len(targets) != len(values):
            raise ValueError(f"{self.key}: expected as many reference values as ours, got {targets} for {values}")
        return all(abs(value - target) <= self.tolerance for value, target in zip(values, targets))

    def text(self) -> str:
        return f"within {self.tolerance:g} of {self.reference}" if self.tolerance else f"equal to {self.reference}"


def parameter_count_matches(ours: int, paper: str) -> bool:
    """The course's one rule for parameter counts: ours, rounded to the paper's printed precision, is the paper's.

    ``paper`` is the figure as printed, in millions (``"110M"``, ``"12.5M"``) or billions (``"1.3B"``). Its
    precision is its significant digits, the trailing zeros of a whole number not counted ("110M": two, "60M":
    one, "12.5M": three). So 109.5M matches "110M" and 58.7M matches "60M", while 63.1M does not match "65M".

    >>> parameter_count_matches(109_482_240, "110M"), parameter_count_matches(63_100_000, "65M")
    (True, False)
    >>> parameter_count_matches(58_700_000, "60M"), parameter_count_matches(12_540_000, "12.5M")
    (True, True)
    >>> parameter_count_matches(1_340_000_000, "1.3B"), parameter_count_matches(11_400_000, "12M")
    (True, False)
    """
    match = re.fullmatch(r"(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[MB])", paper)
    if not match:
        raise ValueError(f"expected a parameter count as printed, like '110M' or '1.3B', got {paper!r}")
    number = match.group("number")
    digits = number.replace(".", "").lstrip("0") if "." in number else number.strip("0")
    ours_in_unit = ours / (1e6 if match.group("unit") == "M" else 1e9)
    return float(f"{ours_in_unit:.{max(len(digits), 1)}g}") == float(number)


@dataclass(frozen=True)
class ParameterCount:
    """A check that our count of a model's parameters is the paper's, by :func:`parameter_count_matches`."""

    key: str
    model: str
    source: str
    paper: str  # as printed: "110M"

    def __post_init__(self) -> None:
        _require_key(self.key)
        _require_text(self.key, model=self.model, source=self.source)
        parameter_count_matches(0, self.paper)  # refuses a figure not written as printed

    @property
    def statement(self) -> str:
        return f"{self.model} has {self.paper} parameters"

    def passes(self, ours: int, expected: None = None) -> bool:
        return parameter_count_matches(ours, self.paper)

    def text(self) -> str:
        return f"our count rounded to the paper's printed precision equals {self.paper}"


Declaration = Union[Rule, Demonstration]


def validate_declarations(claims: Sequence[Declaration], checks: Sequence[Check | ParameterCount] = ()) -> None:
    """A chapter's ``CLAIMS`` and ``CHECKS``: declarations of one chapter, each key once.

    >>> validate_declarations([Demonstration("01-a", "c", "p", "s", "x")], [Check("02-b", "s", "s", "r")])
    Traceback (most recent call last):
    ...
    ValueError: expected every declaration of one chapter, got keys of chapters ['01', '02']
    """
    for item in claims:
        if not isinstance(item, (Rule, Demonstration)):
            raise TypeError(f"expected CLAIMS of Rule or Demonstration, got {item!r}")
    for item in checks:
        if not isinstance(item, (Check, ParameterCount)):
            raise TypeError(f"expected CHECKS of Check or ParameterCount, got {item!r}")
    keys = [item.key for item in (*claims, *checks)]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"expected each key once among the claims and checks, got {repeated} more than once")
    chapters = sorted({key[:2] for key in keys})
    if len(chapters) > 1:
        raise ValueError(f"expected every declaration of one chapter, got keys of chapters {chapters}")


# --- measured values: what a notebook passes ------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """What a notebook measured for one claim: the text of "ours", and for a :class:`Rule` the values per seed."""

    ours: str
    values: tuple[float, ...] = ()
    baseline: tuple[float, ...] | None = None
    seeds: tuple[int, ...] = ()
    seed_kind: str = "none"
    gates: Mapping[str, tuple[tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)

    def record(self) -> dict:
        return {
            "values": list(self.values),
            "baseline": None if self.baseline is None else list(self.baseline),
            "seeds": list(self.seeds),
            "seed_kind": self.seed_kind,
            "gates": {model: {"model": list(m), "floor": list(f)} for model, (m, f) in self.gates.items()},
        }


def _per_seed(name: str, values: float | Sequence[float], seeds: Sequence[int]) -> tuple[float, ...]:
    values = tuple(float(v) for v in (values if isinstance(values, (list, tuple)) else [values]))
    if len(values) != len(seeds):
        raise ValueError(f"expected one value of {name} per seed {list(seeds)}, got {len(values)}")
    return values


def measured(
    ours: str,
    values: float | Sequence[float],
    baseline: float | Sequence[float] | None = None,
    *,
    seeds: Sequence[int],
    seed_kind: str,
    gates: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> Measurement:
    """A :class:`Rule`'s measurement: ``ours`` as shown, the compared model's and the baseline's value per seed
    (no baseline when the rule's baseline is a fixed bar), the seeds varied and their kind, and for each gate
    (keyed by its model) the model's and the floor's values per seed.

    >>> measured("0.81 vs 0.00", [0.81, 0.77, 0.84], [0.0, 0.01, 0.0], seeds=[0, 1, 2], seed_kind="training").values
    (0.81, 0.77, 0.84)
    """
    _require_text("measured", ours=ours)
    seeds = tuple(int(seed) for seed in seeds)
    if seed_kind not in SEED_KINDS:
        raise ValueError(f"expected a seed kind in {list(SEED_KINDS)}, got {seed_kind!r}")
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"expected distinct seeds, at least one, got {list(seeds)}")
    gate_values = {
        model: (_per_seed(f"gate {model!r}", m, seeds), _per_seed(f"the floor of {model!r}", f, seeds))
        for model, (m, f) in (gates or {}).items()
    }
    return Measurement(
        ours,
        _per_seed("ours", values, seeds),
        None if baseline is None else _per_seed("the baseline", baseline, seeds),
        seeds,
        seed_kind,
        gate_values,
    )


def shown(ours: str) -> Measurement:
    """A :class:`Demonstration`'s "ours": what the notebook showed, in words and numbers of the run."""
    _require_text("shown", ours=ours)
    return Measurement(ours)


@dataclass(frozen=True)
class Checked:
    """What a notebook measured for a check: ours as shown, the value, and the reference value."""

    ours: str
    value: float | tuple[float, ...]
    expected: float | tuple[float, ...] | None = None


def checked(ours: str, value: float | Sequence[float], expected: float | Sequence[float] | None = None) -> Checked:
    """A check's measurement; ``expected`` is the reference value (none for a :class:`ParameterCount`)."""
    _require_text("checked", ours=ours)
    return Checked(ours, _frozen(value), _frozen(expected))


def _frozen(value: float | Sequence[float] | None) -> float | tuple[float, ...] | None:
    return tuple(float(v) for v in value) if isinstance(value, (list, tuple)) else value


# --- the four outcomes ------------------------------------------------------------------------------------------


def _seed_list(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(map(str, seeds))


def _require_seeds(rule: Rule, measurement: Measurement) -> None:
    """The seeds varied are those the rule names, as many as it needs: otherwise the claim gets no verdict."""
    if measurement.seed_kind != rule.seeds.kind:
        raise ValueError(
            f"{rule.key}: the rule varies {rule.seeds.kind} seeds, got {measurement.seed_kind} seeds, "
            "which do not vary what the claim is about"
        )
    if len(measurement.seeds) < rule.seeds.count:
        raise ValueError(
            f"{rule.key}: the rule needs {rule.seeds.count} {SEED_KINDS[rule.seeds.kind] or 'runs'}, "
            f"got {len(measurement.seeds)} ({_seed_list(measurement.seeds)}): run them, or declare "
            "quick='why' so the quick profile shows the claim as mechanism only"
        )
    if (measurement.baseline is None) != (not isinstance(rule.baseline, str)):
        raise ValueError(
            f"{rule.key}: expected baseline values per seed exactly when the baseline is a model ({rule.baseline!r})"
        )
    if set(measurement.gates) != {gate.model for gate in rule.gates}:
        raise ValueError(
            f"{rule.key}: expected values for the gates {[g.model for g in rule.gates]}, got {list(measurement.gates)}"
        )


def _gate_failure(rule: Rule, measurement: Measurement) -> str:
    """The first gate a model fails, in words; empty when every gate passes."""
    for gate in rule.gates:
        model, floor = measurement.gates[gate.model]
        for seed, m, f in zip(measurement.seeds, model, floor):
            if not m > f + gate.margin:
                return (
                    f"{gate.model} does not beat {gate.floor} by more than {gate.margin:g} on seed {seed} "
                    f"({m:.3g} against {f:.3g})"
                )
    return ""


def judge(declaration: Declaration, measurement: Measurement) -> Verdict:
    """The outcome of a declared claim on what the notebook measured; see the module's docstring.

    >>> rule = Rule("01-x", "c", paper="p", source="s", metric="exact match", data="d", compared="with",
    ...             baseline="without", margin=0.3, seeds=Seeds("training"), gates=(Gate("without", "chance", 0.5),))
    >>> def run(ours, base, gate):
    ...     return judge(rule, measured("o", ours, base, seeds=[0, 1, 2], seed_kind="training",
    ...                                 gates={"without": (gate, [0.0] * 3)}))
    >>> run([0.8, 0.9, 0.8], [0.1, 0.0, 0.2], [0.9] * 3).verdict
    'reproduced'
    >>> run([0.8, 0.3, 0.8], [0.1, 0.0, 0.2], [0.9] * 3).verdict
    'not reproduced'
    >>> run([0.8, 0.9, 0.8], [0.1, 0.0, 0.2], [0.9, 0.4, 0.9]).reason
    'without does not beat chance by more than 0.5 on seed 1 (0.4 against 0)'

    A rule states the fewest runs it needs; its verdict's text names the runs judged, which may be more.
    """
    if isinstance(declaration, Demonstration):
        return Verdict(MECHANISM_ONLY, declaration.text())
    if not isinstance(declaration, Rule):
        raise TypeError(f"expected a Rule or a Demonstration, got {declaration!r}")
    rule = declaration
    if rule.quick and profile.current() == "quick":
        return Verdict(MECHANISM_ONLY, f"{rule.text()}; not judged in the quick profile: {rule.quick}")
    _require_seeds(rule, measurement)
    if rule.seeds.kind != "none":  # the verdict's text counts the runs judged
        rule = replace(rule, seeds=replace(rule.seeds, count=len(measurement.seeds)))
    ours = measurement.values
    baseline = measurement.baseline or (float(rule.baseline),) * len(ours)
    failure = _gate_failure(rule, measurement)
    if not failure and all(rule.at_ceiling(a) and rule.at_ceiling(b) for a, b in zip(ours, baseline)):
        failure = f"both rows within {rule.margin:g} of the ceiling {rule.ceiling:g} on every seed: nothing to rank"
    if failure:
        return Verdict(INCONCLUSIVE, rule.text(), failure)
    held = all(rule.holds(a, b) for a, b in zip(ours, baseline))
    return Verdict(REPRODUCED if held else NOT_REPRODUCED, rule.text())


# --- "What we saw": the table of claims and the list of checks -----------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One of :data:`VERDICTS`, the rule that gave it, and for ``inconclusive`` the reason."""

    verdict: str
    rule: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"expected a verdict in {VERDICTS}, got {self.verdict!r}")
        if not self.rule:
            raise ValueError("expected the rule that gives the verdict, got an empty string")
        if (self.verdict == INCONCLUSIVE) != bool(self.reason):
            raise ValueError(
                f"expected a reason exactly for an inconclusive verdict, got {self.verdict!r} with "
                f"reason {self.reason!r}"
            )


@dataclass(frozen=True)
class Claim:
    """A row of a chapter's "What we saw": a paper's claim, its figure, ours, and the verdict on ours.

    ``key`` is the claim's stable name across the course: the chapter's two digits, then lower-case words
    joined by ``-`` (``"04-pretraining-pays-downstream"``). :func:`show_what_we_saw` makes these rows from a
    chapter's declarations and ``declared``/``measured`` carry the rule's fields and the values per seed.
    """

    key: str
    claim: str
    paper: str
    ours: str
    verdict: Verdict
    declared: dict = field(default_factory=dict, compare=False)
    measured: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _require_key(self.key)
        if not isinstance(self.verdict, Verdict):
            raise TypeError(f"expected a Verdict (from judge), got {self.verdict!r}")

    @property
    def chapter(self) -> str:
        return self.key[:2]

    def as_record(self) -> dict:
        """The claim as stored in the notebook's output: strings, and the declaration and values if declared."""
        record = {name: getattr(self, name) for name in ("key", "claim", "paper", "ours")}
        record.update(verdict=self.verdict.verdict, rule=self.verdict.rule, reason=self.verdict.reason)
        if self.declared:
            record.update(declared=self.declared, measured=self.measured)
        return record


CLAIMS_HEADER = ["claim", "the paper", "ours", "verdict", "the rule", "reason"]


def claims_table(claims: Sequence[Claim]) -> str:
    """The Markdown table of a chapter's claims, one row each, in the order given; keys must be unique.

    >>> print(claims_table([Claim("01-x", "x grows", "2.0 (A, 2020)", "1.5", Verdict("reproduced", "ours > 1"))]))
    | claim | the paper | ours | verdict | the rule | reason |
    |---|---|---|---|---|---|
    | x grows | 2.0 (A, 2020) | 1.5 | **reproduced** | ours > 1 | – |
    """
    keys = [claim.key for claim in claims]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"expected unique claim keys, got {repeated} more than once")
    rows = [
        [c.claim, c.paper, c.ours, f"**{c.verdict.verdict}**", c.verdict.rule, c.verdict.reason or None] for c in claims
    ]
    return markdown_table(CLAIMS_HEADER, rows)


def _glue_or_display(key: str, table: ReproductionTable) -> None:
    try:
        from myst_nb import glue
    except ImportError:  # Colab and plain Jupyter: show it, nothing to collect
        display(table)
    else:
        glue(key, table, display=True)


def _require_one_chapter(key: str, keys: Sequence[str]) -> None:
    if not KEY_PATTERN.match(key):
        raise ValueError(f"expected a key of lower-case words joined by '-', like 'ch01-what-we-saw', got {key!r}")
    chapters = {k[:2] for k in keys}
    if not keys or len(chapters) != 1 or not key.startswith(f"ch{next(iter(chapters))}-"):
        raise ValueError(f"expected claims that all start with the chapter number of {key!r}, got {list(keys)}")


@dataclass(frozen=True)
class CheckResult:
    """A check as shown under the table: the declaration, ours, and whether it held."""

    check: Check | ParameterCount
    measured: Checked

    @property
    def passed(self) -> bool:
        return self.check.passes(self.measured.value, self.measured.expected)

    def as_record(self) -> dict:
        return {
            "key": self.check.key,
            "statement": self.check.statement,
            "source": self.check.source,
            "ours": self.measured.ours,
            "rule": self.check.text(),
            "passed": self.passed,
            "declared": {"kind": type(self.check).__name__, **asdict(self.check)},
            "measured": {"value": self.measured.value, "expected": self.measured.expected},
        }

    def line(self) -> str:
        mark = "✓ holds" if self.passed else "✗ fails"
        return f"- {self.check.statement} ({self.check.source}): {self.measured.ours}; {self.check.text()}: **{mark}**"


def _matched(kind: str, declared: Sequence, measured: Mapping[str, object]) -> None:
    missing = [item.key for item in declared if item.key not in measured]
    unknown = [key for key in measured if key not in {item.key for item in declared}]
    if missing or unknown:
        raise ValueError(
            f"expected a measurement for every declared {kind} and no other: missing {missing}, not declared {unknown}"
        )


def what_we_saw(
    claims: Sequence[Declaration],
    measurements: Mapping[str, Measurement],
    checks: Sequence[Check | ParameterCount] = (),
    check_values: Mapping[str, Checked] | None = None,
) -> tuple[list[Claim], list[CheckResult]]:
    """The rows of the table and the checks under it: each declaration judged on its measurement."""
    validate_declarations(claims, checks)
    check_values = check_values or {}
    _matched("claim", claims, measurements)
    _matched("check", checks, check_values)
    rows = []
    for item in claims:
        measurement = measurements[item.key]
        if isinstance(item, Demonstration) and measurement.values:
            raise ValueError(f"{item.key}: a demonstration measures no outcome, got values {measurement.values}")
        declared = {"kind": type(item).__name__, **asdict(item)}
        rows.append(
            Claim(
                item.key,
                item.claim,
                f"{item.source}: {item.paper}",
                measurement.ours,
                judge(item, measurement),
                declared,
                measurement.record(),
            )
        )
    results = [CheckResult(item, check_values[item.key]) for item in checks]
    return rows, results


def seeds_sentence(rows: Sequence[Claim]) -> str:
    """The sentence under the table: which seeds the claims varied, where they come from, how to rerun.

    >>> seeds_sentence([])
    'No claim of this table varies a seed.'
    """
    seeds = sorted(
        {seed for row in rows if row.measured.get("seed_kind", "none") != "none" for seed in row.measured["seeds"]}
    )
    if not seeds:
        return "No claim of this table varies a seed."
    chapter = rows[0].chapter
    return (
        f"Seeds {', '.join(map(str, seeds))}, from `LECTURE_SEEDS` (default 0,1,2). To judge every claim on "
        f"fresh seeds, run the notebook again with `LECTURE_SEEDS=3,4,5` set: from a shell, "
        f"`LECTURE_SEEDS=3,4,5 pytest notebooks/{chapter}_*.ipynb`."
    )


def show_what_we_saw(
    key: str,
    caption: str,
    claims: Sequence[Declaration],
    measurements: Mapping[str, Measurement],
    checks: Sequence[Check | ParameterCount] = (),
    check_values: Mapping[str, Checked] | None = None,
    *,
    note: str = "",
) -> None:
    """Display a chapter's "What we saw": its declared ``claims`` judged on the notebook's ``measurements``
    (:func:`measured`, :func:`shown`), a sentence on the seeds, and its ``checks`` listed under the table.

    Every declared key needs a measurement and every measurement a declaration. The table is glued under
    ``key`` (``"ch01-what-we-saw"``) for the Reproductions page; its output's metadata carries the claims (with
    their declared rules and values) and the checks (see :func:`notebook_records`). Returns nothing, so a cell
    that ends with the call shows the table once.

    Taught in: 01_attention ("What we saw").
    """
    _require_one_chapter(key, [item.key for item in (*claims, *checks)])
    rows, results = what_we_saw(claims, measurements, checks, check_values)
    text = f"**{caption}**\n\n{claims_table(rows)}\n\n{seeds_sentence(rows)}" if rows else f"**{caption}**"
    if results:
        text += (
            "\n\n**Checks** (implementation equalities, exact counts and replays; asserted in the sections "
            "above, not counted as claims):\n\n" + "\n".join(result.line() for result in results)
        )
    if note:
        text += f"\n\n{note}"
    _glue_or_display(key, ReproductionTable(text, rows, results))


# --- reading executed notebooks: the course's fidelity figure --------------------------------------------------


def notebook_records(notebook: dict) -> tuple[list[dict], list[dict]]:
    """The claims and the checks an executed notebook (its JSON, as a dict) shows, in order of output."""
    claims, checks = [], []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            for metadata in output.get("metadata", {}).values():
                if isinstance(metadata, dict) and CLAIMS_METADATA in metadata:
                    claims += metadata[CLAIMS_METADATA]
                    checks += metadata.get(CHECKS_METADATA, [])
    return claims, checks


def notebook_claims(notebook: dict) -> list[dict]:
    """Every claim an executed notebook shows, in order of output."""
    return notebook_records(notebook)[0]


def chapter_records(folder: Path | str) -> dict[str, tuple[list[dict], list[dict]]]:
    """Chapter number -> its claims and checks, for every executed notebook ``NN_name.ipynb`` under ``folder``.

    A chapter without claims is listed with none. A key that names another chapter, or a key used twice in the
    course, is an error.
    """
    chapters: dict[str, tuple[list[dict], list[dict]]] = {}
    seen: dict[str, str] = {}
    paths = sorted(Path(folder).rglob("[0-9][0-9]_*.ipynb"), key=lambda p: p.name)
    for path in paths:
        if ".ipynb_checkpoints" in path.parts:
            continue
        chapter = path.name[:2]
        if chapter in chapters:
            raise ValueError(f"expected one executed notebook per chapter, found two for {chapter} ({path})")
        claims, checks = notebook_records(json.loads(path.read_text(encoding="utf-8")))
        for record in claims + checks:
            if not record["key"].startswith(f"{chapter}-"):
                raise ValueError(f"{path.name}: claim {record['key']!r} does not start with its chapter, {chapter}")
            if record["key"] in seen:
                raise ValueError(f"claim {record['key']!r} is shown by {seen[record['key']]} and again by {path.name}")
            seen[record["key"]] = path.name
        chapters[chapter] = (claims, checks)
    return chapters


def chapter_claims(folder: Path | str) -> dict[str, list[dict]]:
    """Chapter number -> its claims (:func:`chapter_records` without the checks)."""
    return {chapter: claims for chapter, (claims, _) in chapter_records(folder).items()}


def verdict_counts(claims: Iterable[dict], checks: Iterable[dict] = ()) -> dict[str, int]:
    """The counts of a summary line, from claim and check records.

    >>> verdict_counts([{"verdict": "reproduced"}, {"verdict": "inconclusive"}], [{"passed": True}])
    {'claims': 2, 'reproduced': 1, 'not': 0, 'inconclusive': 1, 'mechanism': 0, 'checks': 1}
    """
    verdicts = [claim["verdict"] for claim in claims]
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"expected verdicts in {VERDICTS}, got {sorted(unknown)}")
    return {
        "claims": len(verdicts),
        "reproduced": verdicts.count(REPRODUCED),
        "not": verdicts.count(NOT_REPRODUCED),
        "inconclusive": verdicts.count(INCONCLUSIVE),
        "mechanism": verdicts.count(MECHANISM_ONLY),
        "checks": len(list(checks)),
    }


def summary_lines(chapters: dict[str, tuple[list[dict], list[dict]]], *, claims: bool = False) -> list[str]:
    """The summary command's lines: one per chapter and a total, or with ``claims`` one per claim.

    >>> summary_lines({"01": ([{"key": "01-a", "verdict": "reproduced"}], [{"key": "01-b"}]), "02": ([], [])})
    ['01 claims=1 reproduced=1 not=0 inconclusive=0 mechanism=0 checks=1', \
'02 claims=0 reproduced=0 not=0 inconclusive=0 mechanism=0 checks=0', \
'total claims=1 reproduced=1 not=0 inconclusive=0 mechanism=0 checks=1']
    >>> summary_lines({"01": ([{"key": "01-a", "verdict": "mechanism only"}], [])}, claims=True)
    ['01 01-a mechanism only']
    """
    if claims:
        return [f"{chapter} {c['key']} {c['verdict']}" for chapter, (cs, _) in chapters.items() for c in cs]

    def line(label: str, counts: dict[str, int]) -> str:
        return label + " " + " ".join(f"{name}={count}" for name, count in counts.items())

    lines = [line(chapter, verdict_counts(cs, ks)) for chapter, (cs, ks) in chapters.items()]
    total = verdict_counts(
        (c for cs, _ in chapters.values() for c in cs), (k for _, ks in chapters.values() for k in ks)
    )
    return lines + [line("total", total)]


def unsettled(chapters: dict[str, tuple[list[dict], list[dict]]]) -> list[str]:
    """One line per claim that is not reproduced or inconclusive, with its reason (or the rule that failed), and
    one per check that fails.

    >>> unsettled({"06": ([{"key": "06-a", "verdict": "inconclusive", "reason": "at the floor", "ours": "o"},
    ...                    {"key": "06-b", "verdict": "not reproduced", "rule": "a above b", "ours": "0.2 vs 0.3"},
    ...                    {"key": "06-c", "verdict": "reproduced"}],
    ...                   [{"key": "06-d", "passed": False, "rule": "equals 65M", "ours": "63.1M"}])})
    ['06-a inconclusive: at the floor', '06-b not reproduced: a above b; ours: 0.2 vs 0.3', \
'06-d check fails: equals 65M; ours: 63.1M']
    """
    lines = []
    for claims, checks in chapters.values():
        for c in claims:
            if c["verdict"] == INCONCLUSIVE:
                lines.append(f"{c['key']} inconclusive: {c.get('reason') or c['rule']}")
            elif c["verdict"] == NOT_REPRODUCED:
                lines.append(f"{c['key']} not reproduced: {c['rule']}; ours: {c['ours']}")
        lines += [f"{k['key']} check fails: {k['rule']}; ours: {k['ours']}" for k in checks if not k["passed"]]
    return lines


def summary_json(chapters: dict[str, tuple[list[dict], list[dict]]]) -> str:
    """Every claim and check, each with its chapter, its declared rule and its measured values, as JSON."""
    return json.dumps(
        {
            "claims": [{"chapter": chapter, **c} for chapter, (cs, _) in chapters.items() for c in cs],
            "checks": [{"chapter": chapter, **k} for chapter, (_, ks) in chapters.items() for k in ks],
        },
        indent=1,
        ensure_ascii=False,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lecture_lib.reproductions",
        description="Count the verdicts of the claims of executed notebooks.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="verdict counts per chapter and in total")
    summary.add_argument("folder", type=Path, help="a folder of executed notebooks, e.g. _build/jupyter_execute")
    shape = summary.add_mutually_exclusive_group()
    shape.add_argument("--claims", action="store_true", help="one line per claim: NN KEY VERDICT")
    shape.add_argument("--json", action="store_true", help="every claim and check with its rule and values")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"expected a folder of executed notebooks, got {args.folder}")
    chapters = chapter_records(args.folder)
    if not chapters:
        parser.error(f"expected executed notebooks NN_name.ipynb under {args.folder}, found none")
    print(summary_json(chapters) if args.json else "\n".join(summary_lines(chapters, claims=args.claims)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
