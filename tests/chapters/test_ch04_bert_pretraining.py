"""lecture_lib.chapters.ch04_bert_pretraining: the two recipes' sizes, and the ablations' runs on a tiny
recipe (their scores recomputed here from the cached models and the library's metrics)."""

import dataclasses
import math

import pytest
import torch

from lecture_lib.chapters import course_language
from lecture_lib.chapters.ch04_bert_pretraining import (
    MASKING_RULES,
    TABLE5_ROWS,
    ablation_config,
    chapter_config,
    further_pretrained_bert,
    further_pretraining_config,
    masking_ablation,
    objective_ablation,
    size_sweep,
    small_pretrained_bert,
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
    assert quick.finetune == course_language.chapter_config().finetune  # chapter 05's fine-tuning budget
    further = further_pretraining_config()
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    full = synthetic_config()
    longer = further_pretraining_config()  # the full documentation model's shape, the full synthetic documents
    assert further.pretrain.train.steps < longer.pretrain.train.steps
    assert (longer.pretrain.model, longer.documents) == (chapter_config().model, full.documents)
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
    held_out = course_language.synthetic_pretraining_data(config)
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


def _general_and_further(monkeypatch, tmp_path, **train):
    """A tiny documentation model and the recipe that pretrains it further on the synthetic language."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    general = small_pretrained_bert(chapter_config(train=dict(steps=2, batch_size=8, warmup_steps=1, eval_every=0),
                                                   data=dict(vocab_size=300, eval_pairs=16)), progress=False)
    config = further_pretraining_config(general.config, documents=40,
                                        pretrain=dict(train=dict(batch_size=8, eval_every=0, **train)))
    return general, config


def test_further_pretraining_starts_from_the_general_model_and_keeps_its_vocabulary(monkeypatch, tmp_path):
    general, config = _general_and_further(monkeypatch, tmp_path, steps=1, warmup_steps=0, lr=0.0)
    assert config.pretrain.model == general.config.model and config.pretrain.data == general.config.data
    default, in_domain = further_pretraining_config(), synthetic_config()  # the in-domain model's documents
    assert (default.documents, default.language_seed) == (in_domain.documents, in_domain.language_seed)
    assert default.pretrain.model == chapter_config().model  # the documentation model's shape
    further = further_pretrained_bert(general, config, progress=False)
    # at learning rate 0 (AdamW's decay is scaled by it too) no weight moves: the run began at the general
    # model's exact weights, not at a fresh initialisation
    assert further.model.state_dict().keys() == general.model.state_dict().keys()
    assert all(torch.equal(a, general.model.state_dict()[name]) for name, a in further.model.state_dict().items())
    assert further.tokenizer.vocab == general.tokenizer.vocab
    assert further.path.name.startswith("further-bert-")


def test_further_pretraining_moves_a_copy_and_is_cached(monkeypatch, tmp_path):
    general, config = _general_and_further(monkeypatch, tmp_path, steps=2, warmup_steps=1)
    before = {name: t.clone() for name, t in general.model.state_dict().items()}
    further = further_pretrained_bert(general, config, progress=False)
    assert all(torch.equal(t, before[name]) for name, t in general.model.state_dict().items())  # untouched
    assert not all(torch.equal(t, before[name]) for name, t in further.model.state_dict().items())
    again = further_pretrained_bert(general, config, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(further.model.state_dict().values(), again.model.state_dict().values()))
    wider = dataclasses.replace(config, pretrain=dataclasses.replace(
        config.pretrain, model=dataclasses.replace(config.pretrain.model, intermediate_size=64)))
    with pytest.raises(ValueError, match="general model's shape"):
        further_pretrained_bert(general, wider, progress=False)
