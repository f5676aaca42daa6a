import pytest

from lecture_lib.chapters import course_language
from lecture_lib.chapters.ch12_compression import chapter_config as ch12_config
from lecture_lib.config import FieldError
from lecture_lib.finetuning.finetune import FINETUNE_DEFAULTS, finetune_budget, with_steps
from lecture_lib.train import TrainConfig


def test_a_budget_is_a_train_config_warming_up_over_a_tenth_of_its_steps():
    budget = finetune_budget()
    assert isinstance(budget, TrainConfig) and budget.schedule == "linear"
    assert (budget.steps, budget.batch_size, budget.lr, budget.warmup_steps) == (150, 32, 1e-3, 15)
    assert FINETUNE_DEFAULTS["steps"] == 150
    assert finetune_budget(steps=75).warmup_steps == 8  # Python's round: 7.5 -> 8
    assert finetune_budget(steps=75, warmup_steps=0).warmup_steps == 0  # stated, not derived
    assert with_steps(finetune_budget(steps=100), 300).warmup_steps == 30


def test_a_chapter_budget_given_as_a_dict_derives_its_warm_up_and_names_a_bad_field(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    assert course_language.chapter_config(finetune=dict(steps=75)).finetune.warmup_steps == 8
    config = ch12_config(finetune=dict(steps=50))
    assert (config.finetune.warmup_steps, config.finetune.fused, config.finetune.num_threads) == (5, True, 1)
    with pytest.raises(FieldError, match=r"^finetune.lr: "):
        ch12_config(finetune=dict(lr=-1.0))
    with pytest.raises(FieldError, match=r"^steps: "):
        finetune_budget(steps=0)
    with pytest.raises(ValueError, match="finetune_dropout"):
        course_language.chapter_config(finetune_dropout=1.5)
