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
    with pytest.raises(
        ValueError, match=r"LECTURE_PROFILE='fast' is not a known profile; expected one of \('quick', 'full'\)"
    ):
        profile.current()


@pytest.mark.parametrize(
    "seconds, spoken",
    [(3, "10 s"), (24, "20 s"), (25, "30 s"), (86, "90 s"), (95, "1.5 min"), (135, "2.5 min"), (260, "4.5 min")],
)
def test_expect_says_the_quick_time_rounded(monkeypatch, capsys, seconds, spoken):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    profile.expect(seconds, "Training")
    assert capsys.readouterr().out == f"Training: about {spoken} in the quick profile on two CPU cores\n"


def test_expect_does_not_claim_a_time_for_the_full_profile(monkeypatch, capsys):
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    profile.expect(40, "Training")
    assert capsys.readouterr().out == "Training: the full profile's time has not been measured (a GPU is advised)\n"
    with pytest.raises(ValueError, match="expected a positive duration in seconds, got 0"):
        profile.expect(0, "Training")


@pytest.mark.parametrize(
    "value, expected", [(None, (0, 1, 2)), ("", (0, 1, 2)), ("3,4,5", (3, 4, 5)), (" 7 , 0 ", (7, 0)), ("11", (11,))]
)
def test_claim_seeds_come_from_lecture_seeds_else_0_1_2(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("LECTURE_SEEDS", raising=False)
    else:
        monkeypatch.setenv("LECTURE_SEEDS", value)
    assert profile.claim_seeds() == expected


@pytest.mark.parametrize("value", ["a,b", "1,,2", "-1,2", "1.5", "3;4", "1,2,"])
def test_claim_seeds_refuse_what_is_not_a_list_of_non_negative_integers(monkeypatch, value):
    monkeypatch.setenv("LECTURE_SEEDS", value)
    with pytest.raises(
        ValueError,
        match=r"expected comma-separated non-negative integers like 3,4,5, got " + repr(value).replace(".", r"\."),
    ):
        profile.claim_seeds()


def test_claim_seeds_refuse_a_seed_given_twice(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "1,2,1")
    with pytest.raises(ValueError, match="expected each seed once, got '1,2,1'"):
        profile.claim_seeds()
