"""The GPU check, run on the CPU: a small notebook with one passing cell, one slow cell and one failing cell."""

from __future__ import annotations

import nbformat
import pytest
import torch

from lecture_lib.bench import gpu_check


def _notebook(tmp_path):
    cells = [
        nbformat.v4.new_markdown_cell("# A notebook"),
        nbformat.v4.new_code_cell("import os, time\nanswer = 6 * 7\nprint(answer)"),
        nbformat.v4.new_code_cell("time.sleep(0.3)  # slow\nassert os.environ['LECTURE_PROFILE'] == 'quick'"),
        nbformat.v4.new_code_cell("def divide(a, b):\n    return a / b\n\ndivide(answer, 0)"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ]
    path = tmp_path / "01_example.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_the_report_names_the_slow_cell_and_the_failing_cell_with_its_traceback(tmp_path, capsys):
    env = gpu_check.kernel_environment("cpu", tmp_path / "cache")
    report = gpu_check.check_notebook(_notebook(tmp_path), env, slow=0.25)
    # on a loaded machine any cell may pass the threshold: the slow cell must be named, the others may be
    assert (2, "time.sleep(0.3)  # slow") in [(index, line) for index, line, _ in report.slow]
    assert report.failure.index == 3 and report.failure.first_line == "def divide(a, b):"
    assert "ZeroDivisionError" in report.failure.traceback and "return a / b" in report.failure.traceback
    gpu_check.print_report(report)
    printed = capsys.readouterr().out
    assert "01_example: FAILED" in printed and "cell 3 failed: def divide(a, b):" in printed
    assert "ZeroDivisionError" in printed and "cell 2 took" in printed and "never runs" not in printed


def test_main_runs_the_notebooks_on_the_cpu_and_fails_when_a_cell_fails(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        gpu_check.main(["--device", "cpu", "--no-tests", str(_notebook(tmp_path))])
    assert stopped.value.code == 1
    printed = capsys.readouterr().out
    assert "on the CPU" in printed and "0 of 1 notebooks ran without a failing cell; failed: 01_example" in printed


def test_without_a_gpu_it_refuses_unless_told_to_use_the_cpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        gpu_check.main([])
    assert stopped.value.code == 2 and "make gpu-check DEVICE=cpu" in capsys.readouterr().err
