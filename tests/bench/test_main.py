"""``python -m lecture_lib.bench NAME``: every benchmark refuses a bad flag in one line naming it, exit status 2,
before it builds a model, a batch or a corpus (the builders are trapped: reaching one fails the test)."""

import re

import pytest
import torch

from lecture_lib.bench import __main__ as bench
from tests.command_line import MISSING_DEVICE, assert_refused, refused_in_process, run_command, trap

# Where each benchmark's work starts: trapped, so that a row that gets past the checks fails loudly.
FIRST_WORK = {
    "attention": "compare_multihead",
    "bert": "BertForPreTraining",
    "compression": "time_variants",
    "gpu_check": "check_notebook",
    "parallel": "section6_jobs",
    "synthetic": "sentences_per_second",
    "tokenization": "corpus_texts",
    "transformer": "settings",
}
BAD_INPUT = [
    (["bert", "--batch-size", "0"], "--batch-size", "expected a value >= 1, got 0"),
    (["bert", "--steps", "0"], "--steps", "expected a value >= 1, got 0"),
    (["bert", "--device", MISSING_DEVICE], "--device", f"device {MISSING_DEVICE!r} is not available here"),
    (["bert", "--device", "gpu"], "--device", "expected a device such as cpu"),
    (["bert", "--seq-len", "1000"], "--seq-len", "expected a value in [8, 512], got 1000"),
    (["bert", "--min-len", "200"], "--min-len", "expected a value <= --seq-len 128, got 200"),
    (["bert", "--min-len", "0"], "--min-len", "expected a value >= 1, got 0"),
    (["bert", "--threads", "0"], "--threads", "expected a value >= 1, got 0"),
    (["bert", "--peak-tflops", "0"], "--peak-tflops", "expected a value > 0, got 0.0"),
    (["bert", "--size", "huge"], "--size", "invalid choice: 'huge'"),
    (["attention", "--repeats", "0"], "--repeats", "expected a value >= 1, got 0"),
    (["compression", "--tokens", "-3"], "--tokens", "expected a value >= 1, got -3"),
    (["compression", "--repeats", "x"], "--repeats", "expected int, got 'x'"),
    (["gpu_check", "--device", "cpu", "--slow", "-1"], "--slow", "expected a value >= 0, got -1.0"),
    (["gpu_check", "--device", "tpu"], "--device", "invalid choice: 'tpu'"),
    (
        ["gpu_check", "--device", "cpu", "missing.ipynb"],
        "notebooks",
        "expected an existing .ipynb file, got 'missing.ipynb'",
    ),
    (["parallel", "--jobs", "0"], "--jobs", "expected a value >= 1, got 0"),
    (["parallel", "--workers", "0"], "--workers", "expected a value >= 1, got 0"),
    (["synthetic", "--sentences", "0"], "--sentences", "expected a value >= 1, got 0"),
    (["synthetic", "--repeats", "0"], "--repeats", "expected a value >= 1, got 0"),
    (["tokenization", "--merges", "0"], "--merges", "expected a value >= 1, got 0"),
    (["tokenization", "--documents", "0"], "--documents", "expected a value >= 1, got 0"),
    (["transformer", "--repeats", "0"], "--repeats", "expected a value >= 1, got 0"),
    *([(["gpu_check"], "--device", "no CUDA GPU is visible to PyTorch here")] if not torch.cuda.is_available() else []),
    (
        ["nope"],
        "NAME",
        "expected one of attention, bert, compression, gpu_check, parallel, synthetic, tokenization, "
        "transformer, got 'nope'",
    ),
]


def test_every_bad_flag_is_refused_in_one_line_before_any_work(monkeypatch, capsys):
    assert sorted(FIRST_WORK) == bench.available()
    for name, builder in FIRST_WORK.items():
        monkeypatch.setattr(f"lecture_lib.bench.{name}.{builder}", trap)
    for argv, flag, reason in BAD_INPUT:
        assert_refused(*refused_in_process(bench.main, argv, capsys), flag, reason)


def test_the_command_refuses_bad_input_as_a_user_sees_it(tmp_path):
    """The issue's rows as a subprocess: the real stderr and exit status."""
    for argv, flag, reason in [BAD_INPUT[0], BAD_INPUT[2], BAD_INPUT[-1]]:
        result = run_command("lecture_lib.bench", argv, tmp_path)
        assert_refused(result.returncode, result.stderr, result.stdout, flag, reason)


@pytest.mark.parametrize("name", sorted(FIRST_WORK))
def test_help_shows_each_flags_range(name, capsys):
    with pytest.raises(SystemExit):
        bench.main([name, "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert re.search(r">= [01]; default: ", flat)
