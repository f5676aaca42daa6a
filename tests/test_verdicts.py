"""Claims declared before the run and judged after it: the declarations' errors, the four outcomes, the seeds a
rule needs, the one rule for parameter counts, the table and its checks, and the course's chapters and notebooks
(a notebook passes measured values only; every declared key is shown, every shown key declared)."""

import importlib
import re
import sys
from pathlib import Path

import nbformat
import pytest

from lecture_lib import reproductions
from lecture_lib.reproductions import (
    Check,
    Demonstration,
    Gate,
    ParameterCount,
    Rule,
    Seeds,
    checked,
    judge,
    measured,
    parameter_count_matches,
    show_what_we_saw,
    shown,
    validate_declarations,
)

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [0, 1, 2]


def rule(**changes):
    fields = dict(
        key="04-nsp-helps",
        claim="NSP helps downstream",
        paper="−3.5 QNLI",
        source="Devlin et al. (2019), Table 5",
        metric="F1",
        data="held-out names",
        compared="MLM + NSP",
        baseline="MLM only",
        margin=0.01,
        seeds=Seeds("pretraining"),
        gates=(Gate("MLM only", "no pretraining", 0.05),),
    )
    return Rule(**{**fields, **changes})


def run(ours, baseline, gate=(0.5, 0.5, 0.5), floor=(0.3, 0.3, 0.3), **changes):
    return judge(
        rule(**changes),
        measured("o", ours, baseline, seeds=SEEDS, seed_kind="pretraining", gates={"MLM only": (gate, floor)}),
    )


# --- the declarations -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Gate("MLM only", "", 0.05), "expected a gate's floor in"),
        (lambda: Gate("MLM only", "the paper's score", 0.05), "expected a gate's floor in"),
        (lambda: Gate("MLM only", "chance", -0.1), "expected a gate margin"),
        (lambda: Seeds("pretraining", 1), "expected at least 3 pretraining runs"),
        (lambda: Seeds("epochs"), "expected a seed kind"),
        (lambda: Seeds("none", 3), "expected one run for a deterministic"),
        (lambda: rule(key="4-nsp"), "expected a claim key"),
        (lambda: rule(metric="Var$(q\\cdot k)$"), "TeX math"),
        (lambda: rule(paper=""), "expected a non-empty paper"),
        (lambda: rule(margin=-1), "expected margin ≥ 0"),
        (lambda: rule(gates=(Gate("a", "chance", 0), Gate("a", "uniform", 0))), "one gate per model"),
        (lambda: ParameterCount("02-x", "base", "Vaswani et al. (2017)", "65 million"), "as printed"),
    ],
)
def test_bad_declarations_are_refused(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_the_rule_text_is_rendered_from_the_declaration():
    assert rule().text() == (
        "F1 on held-out names: MLM + NSP above MLM only by more than 0.01, on each of 3 "
        "pretraining runs; gate: MLM only above no pretraining by more than 0.05"
    )
    assert (
        rule(baseline=2.0, factor=3, higher=False, gates=())
        .text()
        .startswith("F1 on held-out names: MLM + NSP below 2 / 3 by more than 0.01")
    )


def test_a_chapter_declares_each_key_once_and_of_one_chapter():
    demo = Demonstration("04-a", "c", "p", "s", "x")
    with pytest.raises(ValueError, match=r"\['04-a'\] more than once"):
        validate_declarations([demo], [Check("04-a", "s", "s", "r")])
    with pytest.raises(TypeError, match="expected CHECKS of Check or ParameterCount"):
        validate_declarations([demo], [demo])


# --- the four outcomes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ours, baseline, gate, expected",
    [
        ([0.6, 0.7, 0.6], [0.5, 0.5, 0.5], [0.5] * 3, "reproduced"),
        ([0.6, 0.505, 0.6], [0.5, 0.5, 0.5], [0.5] * 3, "not reproduced"),  # seed 1 wins by less than the margin
        ([0.4, 0.4, 0.4], [0.5, 0.5, 0.5], [0.5] * 3, "not reproduced"),
        ([0.6, 0.7, 0.6], [0.5, 0.5, 0.5], [0.5, 0.34, 0.5], "inconclusive"),  # MLM only ≈ no pretraining on seed 1
    ],
)
def test_judge_gives_one_of_four_outcomes(ours, baseline, gate, expected):
    verdict = run(ours, baseline, gate)
    assert verdict.verdict == expected and verdict.rule == rule().text()
    assert bool(verdict.reason) == (expected == "inconclusive")


def test_a_verdict_names_the_runs_it_judged_not_the_fewest_the_rule_needs():
    """LECTURE_SEEDS may give a claim more runs than its rule's minimum: all are judged, and the text says so."""
    four = measured(
        "o",
        [0.6] * 4,
        [0.5] * 4,
        seeds=[0, 1, 2, 3],
        seed_kind="pretraining",
        gates={"MLM only": ([0.5] * 4, [0.3] * 4)},
    )
    verdict = judge(rule(), four)
    assert verdict.verdict == "reproduced" and "on each of 4 pretraining runs" in verdict.rule
    assert "on each of 3 pretraining runs" in run([0.6] * 3, [0.5] * 3).rule


def test_an_inconclusive_row_says_which_gate_failed_where():
    assert run([0.6] * 3, [0.5] * 3, [0.5, 0.34, 0.5]).reason == (
        "MLM only does not beat no pretraining by more than 0.05 on seed 1 (0.34 against 0.3)"
    )


def test_a_model_that_answers_no_better_than_answering_nothing_is_not_ranked():
    """SQuAD 2.0's floor: a threshold that beats τ = 0 but not "always answering nothing" ranks nothing."""
    tuned = Gate("τ tuned on dev", "always answering nothing", 0.02)
    squad2 = rule(compared="τ tuned on dev", baseline="τ = 0", margin=0.0, seeds=Seeds("fine-tuning"), gates=(tuned,))
    floor = [0.58] * 3

    def verdict(values):
        gates = {"τ tuned on dev": (values, floor)}
        return judge(squad2, measured("o", values, [0.23] * 3, seeds=SEEDS, seed_kind="fine-tuning", gates=gates))

    assert verdict([0.63, 0.64, 0.62]).verdict == "reproduced"
    assert verdict([0.63, 0.59, 0.62]).reason == (
        "τ tuned on dev does not beat always answering nothing by more than 0.02 on seed 1 (0.59 against 0.58)"
    )


def test_rows_at_the_ceiling_cannot_be_ranked():
    verdict = run([1.0, 1.0, 0.995], [1.0, 0.999, 1.0], ceiling=1.0)
    assert verdict.verdict == "inconclusive" and "ceiling" in verdict.reason
    assert run([1.0, 1.0, 1.0], [0.9, 0.9, 0.9], ceiling=1.0).verdict == "reproduced"


def test_a_fixed_bar_and_a_factor():
    bar = rule(baseline=0.8, gates=(), seeds=Seeds("training"), margin=0.0)
    assert judge(bar, measured("o", [0.9, 0.85, 0.81], seeds=SEEDS, seed_kind="training")).verdict == "reproduced"
    assert judge(bar, measured("o", [0.9, 0.8, 0.81], seeds=SEEDS, seed_kind="training")).verdict == "not reproduced"
    twice = rule(factor=2, margin=0.0, gates=())
    assert (
        judge(twice, measured("o", [0.3] * 3, [0.12, 0.14, 0.149], seeds=SEEDS, seed_kind="pretraining")).verdict
        == "reproduced"
    )
    assert (
        judge(twice, measured("o", [0.3] * 3, [0.12, 0.15, 0.1], seeds=SEEDS, seed_kind="pretraining")).verdict
        == "not reproduced"
    )


def test_seeds_that_do_not_vary_the_claim_give_no_verdict():
    with pytest.raises(ValueError, match="varies pretraining seeds, got fine-tuning seeds"):
        judge(
            rule(),
            measured(
                "o",
                [0.6] * 3,
                [0.5] * 3,
                seeds=SEEDS,
                seed_kind="fine-tuning",
                gates={"MLM only": ([0.5] * 3, [0.3] * 3)},
            ),
        )
    with pytest.raises(ValueError, match=r"needs 3 pretraining runs, got 1 \(seed 0\).*quick="):
        judge(rule(), measured("o", 0.6, 0.5, seeds=[0], seed_kind="pretraining", gates={"MLM only": (0.5, 0.3)}))


def test_the_measurement_must_match_the_declaration():
    with pytest.raises(ValueError, match="expected values for the gates"):
        judge(rule(), measured("o", [0.6] * 3, [0.5] * 3, seeds=SEEDS, seed_kind="pretraining"))
    with pytest.raises(ValueError, match="baseline values per seed exactly when"):
        judge(
            rule(),
            measured("o", [0.6] * 3, seeds=SEEDS, seed_kind="pretraining", gates={"MLM only": ([0.5] * 3, [0.3] * 3)}),
        )
    with pytest.raises(ValueError, match=r"one value of ours per seed \[0, 1, 2\], got 2"):
        measured("o", [0.6] * 2, [0.5] * 3, seeds=SEEDS, seed_kind="pretraining")


def test_a_claim_the_quick_profile_cannot_power_is_mechanism_only_there(monkeypatch):
    slow = rule(quick="three pretraining runs per row take 8 minutes")
    one_run = measured("o", 0.6, 0.5, seeds=[0], seed_kind="pretraining", gates={"MLM only": (0.5, 0.3)})
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    verdict = judge(slow, one_run)
    assert verdict.verdict == "mechanism only" and verdict.rule.endswith("take 8 minutes")
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    with pytest.raises(ValueError, match="needs 3 pretraining runs"):
        judge(slow, one_run)


def test_a_demonstration_is_mechanism_only():
    verdict = judge(Demonstration("04-a", "c", "p", "s", "the rates counted"), shown("15.0%"))
    assert (verdict.verdict, verdict.rule) == ("mechanism only", "shows the rates counted; no outcome measured")


# --- checks -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ours, paper, matches",
    [
        (109_482_240, "110M", True),
        (63_100_000, "65M", False),
        (58_700_000, "60M", True),
        (64_600_000, "65M", True),
        (335_141_888, "340M", True),
        (11_683_584, "12M", True),
        (17_700_000, "18M", True),
        (1_340_000_000, "1.3B", True),
        (12_460_000, "12.5M", True),
        (12_440_000, "12.5M", False),
        (223_000_000, "235M", False),
    ],
)
def test_one_rule_for_parameter_counts(ours, paper, matches):
    assert parameter_count_matches(ours, paper) is matches
    assert ParameterCount("02-x", "base", "s", paper).passes(ours) is matches


def test_a_check_compares_ours_with_its_reference():
    assert Check("01-x", "s", "s", "0", tolerance=1e-6).passes([1e-7, 0.0], 0.0)
    assert not Check("01-x", "s", "s", "0", tolerance=1e-6).passes(2e-6, 0.0)
    with pytest.raises(ValueError, match="as many reference values"):
        Check("01-x", "s", "s", "r").passes([1, 2], [1, 2, 3])


# --- the table ----------------------------------------------------------------------------------------------------

CLAIMS = (rule(), Demonstration("04-mlm-rates", "MLM selects 15%", "15%", "Devlin et al. (2019)", "the rates"))
CHECKS = (ParameterCount("04-base-parameters", "BERT-base", "Devlin et al. (2019)", "110M"),)


def measurements(**changes):
    values = {
        "04-nsp-helps": measured(
            "0.6 vs 0.5",
            [0.6] * 3,
            [0.5] * 3,
            seeds=SEEDS,
            seed_kind="pretraining",
            gates={"MLM only": ([0.5] * 3, [0.3] * 3)},
        ),
        "04-mlm-rates": shown("15.0% selected"),
    }
    return {**values, **changes}


def show(monkeypatch, claims=CLAIMS, values=None, checks=CHECKS, check_values=None):
    displayed = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)
    monkeypatch.setattr(reproductions, "display", displayed.append)
    result = show_what_we_saw(
        "ch04-what-we-saw",
        "What we saw",
        claims,
        measurements() if values is None else values,
        checks,
        {"04-base-parameters": checked("109.5M", 109_482_240)} if check_values is None else check_values,
    )
    assert result is None  # a cell that ends with the call shows the table once
    return displayed[0]._repr_markdown_()


def test_the_table_shows_the_outcomes_the_seeds_and_the_checks(monkeypatch):
    markdown, metadata = show(monkeypatch)
    lines = markdown.splitlines()
    assert lines[2] == "| claim | the paper | ours | verdict | the rule | reason |"
    assert lines[4].startswith(
        "| NSP helps downstream | Devlin et al. (2019), Table 5: −3.5 QNLI | 0.6 vs 0.5 | "
        "**reproduced** | F1 on held-out names"
    )
    assert "| **mechanism only** | shows the rates; no outcome measured | – |" in lines[5]
    assert "Seeds 0, 1, 2, from `LECTURE_SEEDS` (default 0,1,2)" in markdown
    assert "`LECTURE_SEEDS=3,4,5 pytest notebooks/04_*.ipynb`" in markdown
    assert markdown.endswith(
        "- BERT-base has 110M parameters (Devlin et al. (2019)): 109.5M; our count rounded to "
        "the paper's printed precision equals 110M: **✓ holds**"
    )
    record = metadata["lecture_claims"][0]
    assert record["declared"]["seeds"] == {"kind": "pretraining", "count": 3}
    assert list(record["declared"]["gates"]) == [{"model": "MLM only", "floor": "no pretraining", "margin": 0.05}]
    assert record["measured"] == {
        "values": [0.6] * 3,
        "baseline": [0.5] * 3,
        "seeds": SEEDS,
        "seed_kind": "pretraining",
        "gates": {"MLM only": {"model": [0.5] * 3, "floor": [0.3] * 3}},
    }
    assert metadata["lecture_checks"][0]["passed"] is True


def test_every_declared_key_is_measured_and_every_measured_key_declared(monkeypatch):
    values = measurements()
    del values["04-mlm-rates"]
    with pytest.raises(ValueError, match=r"missing \['04-mlm-rates'\]"):
        show(monkeypatch, values=values)
    with pytest.raises(ValueError, match=r"not declared \['04-extra'\]"):
        show(monkeypatch, values=measurements(**{"04-extra": shown("x")}))
    with pytest.raises(ValueError, match=r"declared check and no other: missing \['04-base-parameters'\]"):
        show(monkeypatch, check_values={})
    with pytest.raises(ValueError, match="a demonstration measures no outcome"):
        show(monkeypatch, values=measurements(**{"04-mlm-rates": measured("x", 1.0, seeds=[0], seed_kind="none")}))


def test_ours_in_tex_is_refused():
    with pytest.raises(ValueError, match="TeX math"):
        shown("$d_k$ = 64")


# --- the course: chapters declare, notebooks pass measured values -------------------------------------------------

DECLARATIONS = ("Rule", "Demonstration", "Check", "ParameterCount", "Gate", "Seeds")
# A verdict built in the notebook: by hand, or with the helpers of the deleted hand-built path (show_claims, holds,
# direction, mechanism_only), which a stale notebook would otherwise only trip over when it runs.
HAND_BUILT = ("Claim", "Verdict", "judge", "show_claims", "holds", "direction", "mechanism_only")


def chapters():
    """(chapter number, its module, its notebook's code cells as one string) for every chapter of the course."""
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        modules = sorted((ROOT / "lecture_lib" / "chapters").glob(f"ch{path.name[:2]}_*.py"))
        assert len(modules) == 1, f"{path.name}: expected one chapter module, got {modules}"
        module = importlib.import_module(f"lecture_lib.chapters.{modules[0].stem}")
        code = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")
        yield path.name[:2], module, code


def called(code: str, names: tuple[str, ...]) -> list[str]:
    return sorted({name for name in names if re.search(rf"(?<!\w){name}\(", code)})


def test_every_chapter_declares_its_claims():
    undeclared = sorted(chapter for chapter, module, _ in chapters() if not hasattr(module, "CLAIMS"))
    assert undeclared == [], "every chapter module declares CLAIMS: the hand-built path is gone"


def test_a_declared_chapter_is_shown_by_its_notebook_from_measured_values_only():
    for chapter, module, code in chapters():
        validate_declarations(module.CLAIMS, getattr(module, "CHECKS", ()))
        assert not called(code, DECLARATIONS + HAND_BUILT), f"{chapter}: the notebook builds a rule or a verdict"
        assert "show_what_we_saw(" in code, chapter
        declared = {item.key for item in (*module.CLAIMS, *getattr(module, "CHECKS", ()))}
        passed = set(re.findall(rf'"({chapter}-[a-z0-9]+(?:-[a-z0-9]+)*)"', code))
        assert passed == declared, (
            f"{chapter}: keys passed but not declared {sorted(passed - declared)}, "
            f"declared but not shown {sorted(declared - passed)}"
        )
        assert all(key.startswith(f"{chapter}-") for key in declared), chapter


def test_the_static_scan_sees_a_rule_built_in_a_notebook():
    assert called('x = Rule("01-a", ...)\nshow_what_we_saw(...)', DECLARATIONS) == ["Rule"]
    assert called("v = Verdict('reproduced', 'r')\nshow_claims('ch01-x', c, rows)", HAND_BUILT) == [
        "Verdict",
        "show_claims",
    ]
    assert called("lecture_lib.reproductions.Gate(", DECLARATIONS) == ["Gate"]
    assert called("measured(x); checked(y)", DECLARATIONS + HAND_BUILT) == []
