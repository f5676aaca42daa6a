import pytest
import torch

from lecture_lib import measure
from lecture_lib.measure import interleaved_medians, saved_tensor_bytes, time_call


def test_saved_tensor_bytes_counts_what_autograd_keeps():
    x = torch.randn(10, 20, requires_grad=True)
    w = torch.randn(20, 30, requires_grad=True)
    # x @ w saves both operands for the backward pass: (10*20 + 20*30) float32 values.
    assert saved_tensor_bytes(lambda: x @ w) == (10 * 20 + 20 * 30) * 4
    with torch.no_grad():
        assert saved_tensor_bytes(lambda: x @ w) == 0


def test_time_call_is_a_median_of_positive_times():
    assert time_call(lambda: torch.randn(100, 100) @ torch.randn(100, 100), repeats=3, warmup=1) > 0


def test_interleaved_medians_alternates_calls_and_takes_medians(monkeypatch):
    clock = [0.0]
    calls = []
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])

    def fake(name, durations):
        left = iter(durations)

        def run():
            calls.append(name)
            clock[0] += next(left)

        return run

    # One warm-up call each (its duration, 100 s, must not count), then three timed rounds.
    fns = {"a": fake("a", [100.0, 1.0, 5.0, 2.0]), "b": fake("b", [100.0, 30.0, 10.0, 20.0])}
    medians = interleaved_medians(fns, repeats=3, warmup=1)
    assert calls == ["a", "b"] * 4
    assert medians == {"a": 2.0, "b": 20.0}  # the middle of (1, 5, 2) and of (30, 10, 20)


def test_interleaved_medians_of_an_even_count_is_the_mean_of_the_middle_two(monkeypatch):
    clock = [0.0]
    durations = iter([1.0, 2.0, 4.0, 8.0])
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])

    def run():
        clock[0] += next(durations)

    assert interleaved_medians({"only": run}, repeats=4, warmup=0) == {"only": 3.0}
    with pytest.raises(ValueError, match="expected repeats >= 1, got 0"):
        interleaved_medians({"only": run}, repeats=0)
