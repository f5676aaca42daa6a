import pytest
import torch

from lecture_lib import profile


def test_default_follows_cuda(monkeypatch):
    monkeypatch.delenv("LECTURE_PROFILE", raising=False)
    assert profile.current() == ("full" if torch.cuda.is_available() else "quick")


@pytest.mark.parametrize("value, expected", [("quick", "quick"), ("full", "full"), (" FULL ", "full")])
def test_environment_overrides(monkeypatch, value, expected):
    monkeypatch.setenv("LECTURE_PROFILE", value)
    assert profile.current() == expected
    assert profile.pick(quick=1, full=2) == (1 if expected == "quick" else 2)


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "fast")
    with pytest.raises(ValueError, match=r"LECTURE_PROFILE='fast' is not a known profile; expected one of \('quick', 'full'\)"):
        profile.current()
