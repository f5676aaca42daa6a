"""The checks on executed notebooks (tests/notebook_checks.py), on small notebooks built here: each must flag
what issue 36 found in the course's prose and reruns (and a table shown in one profile only), and let through
what the course writes correctly."""

import nbformat
import pytest

from tests.notebook_checks import WALL_CLOCK, rerun_differences, unglued_tables, unquoted_results

new_code_cell, new_markdown, new_output = (
    nbformat.v4.new_code_cell,
    nbformat.v4.new_markdown_cell,
    nbformat.v4.new_output,
)


def printing(text: str, source: str = "print(...)", tags=()):
    cell = new_code_cell(source, outputs=[new_output("stream", name="stdout", text=text)])
    cell.metadata["tags"] = list(tags)
    return cell


def notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def quoted(prose: str, printed: str = "", source: str = "x = 1") -> list[str]:
    return [quote.number for quote in unquoted_results(notebook(printing(printed, source), new_markdown(prose)))]


@pytest.mark.parametrize(
    "prose, printed, flagged",
    [
        # the findings: prose quoting what the build no longer printed
        ("With attention the accuracy is 0.81 to 0.83 at length 14.", "length 14: 0.7712", ["0.81", "0.83"]),
        (
            "Greedy BLEU is 98.1 to 98.3 on 200 held-out sentences, about 98.",
            "greedy BLEU 95.6 on 100 sentences",
            ["98.1", "98.3"],
        ),
        (
            "The masking rates give 0.38/0.52 and 0.24/0.36.",
            "| 0.41 | 0.50 |\n| 0.21 | 0.343 |",
            ["0.38", "0.52", "0.24", "0.36"],
        ),
        ("The pruned model is forty times smaller.", "compression ×16", ["forty times"]),
        ("Pruning saves 39% at batch 1.", "saved 23% at batch 32", ["39%"]),
        # what the course writes correctly
        ("With attention the accuracy is 0.77 at length 14.", "length 14: 0.7712", []),
        ("The selection covers 33.8% of the words.", "share 0.338", []),
        ("BERT-base has 108.5M parameters.", "parameters: 108,543,744", []),
        ("Fine-tuning takes 2.4× longer.", "ratio 2.41", []),
    ],
)
def test_a_quoted_result_must_be_one_the_run_printed(prose, printed, flagged):
    assert quoted(prose, printed) == flagged


@pytest.mark.parametrize(
    "prose",
    [
        "Devlin et al. (2019) report 84.6 on MNLI-m.",
        "On MNLI-m BERT-base scores 84.6 (Devlin et al., 2019, Table 1).",
        "Liu et al.'s (2019) Table 1 gives 78.3 → 78.7.",
        "Call `mask(p=0.15)` to select 15% of the tokens.",
        "The scale is $0.02 \\cdot \\sqrt{64} = 0.16$.",
        "## Exercises\n\nExpect a mean run of about 1.79 tokens.",
    ],
)
def test_cited_code_mathematics_and_exercises_are_not_prose_quotes(prose):
    assert quoted(prose, "nothing", source="p = 0.15") == []


@pytest.mark.parametrize(
    "prose",
    [
        "After 2000 steps it reaches 0.93.",  # a capitalised word and a year-like number are not a citation
        "The paper's gap is 5 points, ours 0.93.",  # "the paper" alone does not exempt our number beside it
    ],
)
def test_what_is_not_a_citation(prose):
    assert quoted(prose, "0.81") == ["0.93"]


def test_a_typed_figure_in_a_comment_or_string_is_not_printed():
    assert quoted("The model reaches 0.93.", "0.81", source="x = 1  # it reached 0.93 once") == ["0.93"]
    assert quoted("The model reaches 0.93.", "0.81", source="note = 'reached 0.93'") == ["0.93"]
    assert quoted("The margin is 0.93.", "0.81", source="assert score > 0.93") == []


def test_a_citation_covers_its_own_sentence_only():
    prose = "Devlin et al. (2019) report 84.6. Our model reaches 61.3 there."
    assert quoted(prose, "61.25") == []
    assert quoted(prose, "59.0") == ["61.3"]


def test_a_rerun_must_print_the_same_text():
    first = notebook(printing("loss 5.066\n"), new_markdown("text"), printing("accuracy 0.77\n"))
    assert rerun_differences(first, first) == []
    second = notebook(printing("loss 5.073\n"), new_markdown("text"), printing("accuracy 0.77\n"))
    assert rerun_differences(first, second) == ["code cell 0, line 1: 'loss 5.066' then 'loss 5.073'"]


def test_timings_addresses_and_stderr_may_differ_and_nothing_else():
    def run(seconds: str, address: str, rate: str, warning: str):
        cell = printing(f"trained in {seconds} s; accuracy 0.77\n<Table at 0x{address}>\n")
        cell.outputs.append(new_output("stream", name="stderr", text=warning))
        return notebook(cell, printing(f"{rate} sentences per second\n", tags=[WALL_CLOCK]))

    assert rerun_differences(run("51.7", "7f01", "42,549", "100%|###|"), run("58.1", "7f99", "34,897", "")) == []
    a, b = run("51.7", "7f01", "42,549", ""), run("51.7", "7f01", "42,549", "")
    b.cells[0].outputs[0].text = b.cells[0].outputs[0].text.replace("0.77", "0.78")
    assert len(rerun_differences(a, b)) == 1


def glued(key: str):
    """An output as myst-nb's glue leaves it: the table's text, its key in the scrapbook metadata."""
    output = new_output("display_data", data={"text/markdown": "| a |"})
    output.metadata["scrapbook"] = {"mime_prefix": "", "name": key}
    return output


def test_every_table_the_code_shows_must_be_glued_in_this_run():
    """Chapter 06's Table 3 in the quick profile: shown only when its rows ran, so its key was never glued and the
    book's Reproductions page failed to build."""
    code = (
        'show_reproduction("ch06-a", "A", h, rows)\n'
        'if batches:\n    show_reproduction(\n        "ch06-b", "B", h, rows)\n'
        'show_what_we_saw("ch06-what-we-saw", "C", claims, m)'
    )
    shown_all = new_code_cell(code, outputs=[glued("ch06-a"), glued("ch06-b"), glued("ch06-what-we-saw")])
    assert unglued_tables(notebook(shown_all)) == []
    one_profile = new_code_cell(code, outputs=[glued("ch06-a"), glued("ch06-what-we-saw")])
    assert unglued_tables(notebook(one_profile, new_markdown('show_reproduction("ch06-c", ...)'))) == ["ch06-b"]
    with pytest.raises(ValueError, match="to name its key as a literal"):
        unglued_tables(notebook(new_code_cell("show_reproduction(key, c, h, r)")))
