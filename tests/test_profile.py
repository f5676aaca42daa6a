import pytest
import torch

from lecture_lib import profile, runtime, train


@pytest.mark.parametrize("cuda", [False, True])
def test_default_is_quick_with_or_without_a_gpu(monkeypatch, cuda):
    monkeypatch.delenv("LECTURE_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert profile.current() == "quick"
    assert profile.pick(quick=1, full=2) == 1


@pytest.mark.parametrize("cuda, expected", [(False, "cpu"), (True, "cuda")])
def test_the_quick_profile_trains_on_the_gpu_when_there_is_one(monkeypatch, cuda, expected):
    monkeypatch.delenv("LECTURE_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert runtime.default_device().type == expected
    assert train._pick_device(None, world_size=1).type == expected


@pytest.mark.parametrize("value, expected", [("quick", "quick"), ("full", "full"), (" FULL ", "full")])
def test_environment_overrides(monkeypatch, value, expected):
    monkeypatch.setenv("LECTURE_PROFILE", value)
    assert profile.current() == expected
    assert profile.pick(quick=1, full=2) == (1 if expected == "quick" else 2)


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "fast")
    with pytest.raises(ValueError, match=r"LECTURE_PROFILE='fast' is not a known profile; expected one of \('quick', 'full'\)"):
        profile.current()
