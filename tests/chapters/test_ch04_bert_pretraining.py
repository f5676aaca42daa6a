"""lecture_lib.chapters.ch04_bert_pretraining: the two recipes' sizes, and the ablations' runs on a tiny
recipe (their scores recomputed here from the cached models and the library's metrics)."""

import math

import pytest
import torch

from lecture_lib.chapters import ch05_bert_finetuning as ch05
from lecture_lib.chapters.ch04_bert_pretraining import (
    MASKING_RULES,
    TABLE5_ROWS,
    ablation_config,
    chapter_config,
    masking_ablation,
    objective_ablation,
    size_sweep,
    synthetic_bert,
    synthetic_config,
)
from lecture_lib.pretraining import evaluate_at_masks


def _tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    return ablation_config(documents=40, train_examples=48, test_examples=24, finetune=dict(steps=3, batch_size=8),
                           max_length=128,
                           pretrain=dict(train=dict(steps=3, batch_size=8, warmup_steps=1),
                                         data=dict(eval_pairs=16, vocab_size=300, seq_len=128)))


def test_profiles_pick_the_sizes(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    quick, quick_docs = synthetic_config(), chapter_config()
    assert quick.finetune == ch05.chapter_config().finetune  # chapter 05's fine-tuning budget
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    full = synthetic_config()
    assert quick.pretrain.model.hidden_size < full.pretrain.model.hidden_size
    assert quick.pretrain.model.hidden_size == quick_docs.model.hidden_size  # the documentation model's shape
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    shorter = ablation_config()
    assert shorter.pretrain.train.steps < quick.pretrain.train.steps
    assert shorter.pretrain.model == quick.pretrain.model and shorter.documents == quick.documents


def test_masking_ablation_trains_one_cached_model_per_rule(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    results = masking_ablation(config)
    assert set(results) == {*MASKING_RULES, "unigram"}
    assert all(set(results[rule]) == {"[MASK]", "same", "random"} for rule in MASKING_RULES)
    assert all(0 <= v <= 1 for rule in MASKING_RULES for v in results[rule].values())
    assert masking_ablation(config) == results  # read back from the cache


def test_objective_ablation_and_size_sweep_rows(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    rows = objective_ablation(config)
    assert list(rows) == [*TABLE5_ROWS, "No pretraining"]
    assert set(rows["LTR & No NSP"]) == {"lm_loss", "mask_accuracy", "parameters", "downstream"}
    assert all(-1 <= row["downstream"] <= 1 for row in rows.values())
    # the BERT row's [MASK] accuracy, recomputed from its cached model
    bert = synthetic_bert(config)
    held_out = ch05.synthetic_pretraining_data(config)
    recomputed = evaluate_at_masks(bert.model, held_out.eval_batches(), held_out.tokenizer.mask_token_id,
                                   held_out.most_frequent_token())
    assert rows["BERT (MLM + NSP)"]["mask_accuracy"] == pytest.approx(recomputed["mask_accuracy"])
    sizes = size_sweep(config, sizes=[(1, 16, 2), (2, 32, 4)])
    assert list(sizes) == ["1/16/2", "2/32/4"]
    assert sizes["1/16/2"]["parameters"] < sizes["2/32/4"]["parameters"]
    assert all(math.isfinite(row["mlm_loss"]) for row in sizes.values())
    with pytest.raises(ValueError, match="hidden_size"):
        size_sweep(config, sizes=[(1, 30, 4)])  # 30 is not a multiple of 4 heads


def test_synthetic_bert_is_cached(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    first = synthetic_bert(config)
    second = synthetic_bert(config)
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(),
                                                  second.model.state_dict().values()))
