"""What every command-line test checks of a refused input: run as a user would (a subprocess), or in-process
through the same ``main`` with the builders replaced by a trap, so that the order of events is asserted
(nothing built before the error), never a wall-clock rate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lecture_lib
from lecture_lib import pretraining
from lecture_lib.config import OneOf
from lecture_lib.pretraining import command_line as pretraining_command_line

SOURCE_ROOT = Path(lecture_lib.__file__).parents[1]
# A device no machine here has: CUDA on a machine without it, else one index past its GPUs.
MISSING_DEVICE = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


def run_command(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``cwd``, importing this checkout, with an empty cache under ``cwd``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(SOURCE_ROOT),
        "LECTURE_CACHE": str(cwd / "cache"),
        "LECTURE_PROFILE": "quick",
    }
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def assert_refused(status: int, err: str, out: str, flag: str, reason: str = "") -> None:
    """Exit status 2, one line on stderr naming ``flag`` (and ``reason``, when given), no traceback, no output."""
    assert status == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, f"expected one line, got:\n{err}"
    assert f"error: {flag}: {reason}" in err and "Traceback" not in err, err
    assert out == ""


class Built(Exception):
    """Raised by a trap set where work would start: seen instead of the refusal, the order is wrong."""


def trap(*args, **kwargs):
    raise Built("work started before the input was checked")


def refused_in_process(main, argv: list[str], capsys) -> tuple[int, str, str]:
    """``main(argv)``'s exit status, stderr and stdout, expecting it to exit before any trap fires."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    captured = capsys.readouterr()
    return exit_.value.code, captured.err, captured.out


def rule_rows(defaults) -> list[tuple[list[str], str, str]]:
    """A value just outside each rule of a chapter's recipe (``defaults()``), as flags: a row per constrained flag."""
    base, rows = defaults(), []
    for path, _ in pretraining.config_leaves(base):
        rule, flag = pretraining.leaf_rule(base, path), "--" + ".".join(path)
        if isinstance(rule, OneOf):
            rows.append(([flag, "nonsense"], flag, "expected one of"))
        elif rule is not None:
            bad = rule.high + 1 if rule.high is not None else rule.low if rule.open else rule.low - 1
            rows.append(([flag, str(bad)], flag, f"expected a value {rule}"))
    return rows


def trap_pretraining(monkeypatch, tmp_path: Path) -> Path:
    """``tmp_path`` as the working folder (and empty cache), where building the corpus or starting a run raises
    :class:`Built`."""
    monkeypatch.setattr(pretraining.PretrainingData, "from_corpus", trap)
    monkeypatch.setattr(pretraining_command_line, "pretrain", trap)
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def recipe_passed_to_pretrain(monkeypatch, main, argv: list[str]):
    """The config that ``main(argv)`` hands to ``pretraining.pretrain`` (stopped there: nothing trains)."""

    class Captured(Exception):
        pass

    def capture(config, **kwargs):
        raise Captured(config)

    monkeypatch.setattr(pretraining_command_line, "pretrain", capture)
    with pytest.raises(Captured) as captured:
        main(argv)
    return captured.value.args[0]
