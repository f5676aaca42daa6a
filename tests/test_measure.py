import torch

from lecture_lib.measure import saved_tensor_bytes, time_call


def test_saved_tensor_bytes_counts_what_autograd_keeps():
    x = torch.randn(10, 20, requires_grad=True)
    w = torch.randn(20, 30, requires_grad=True)
    # x @ w saves both operands for the backward pass: (10*20 + 20*30) float32 values.
    assert saved_tensor_bytes(lambda: x @ w) == (10 * 20 + 20 * 30) * 4
    with torch.no_grad():
        assert saved_tensor_bytes(lambda: x @ w) == 0


def test_time_call_is_a_median_of_positive_times():
    assert time_call(lambda: torch.randn(100, 100) @ torch.randn(100, 100), repeats=3, warmup=1) > 0


