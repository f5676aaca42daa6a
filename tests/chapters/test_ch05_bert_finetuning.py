"""lecture_lib.chapters.ch05_bert_finetuning: a cached fine-tuning run gives back the model, history and scores of
the run it stands for, rebuilt for every kind of ``adapt``, and scores it on whichever test set it is given."""

import dataclasses
from functools import partial

import pytest
import torch

from lecture_lib.chapters import ch05_bert_finetuning
from lecture_lib.chapters.ch05_bert_finetuning import (
    DOMAIN_ENCODERS,
    GENERAL_GRAMMAR,
    adapt_recipe,
    cached_finetune_from,
    domain_adaptation_calls,
    domain_adaptation_run,
    domain_adaptation_scores,
    domain_texts,
    pretrain_chapter_models,
)
from lecture_lib.chapters.course_language import build_harder_tasks, chapter_config
from lecture_lib.data.synthetic import LAST_NAMES, SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune_from, new_head, null_threshold_scores, predict, score
from lecture_lib.finetuning.peft import PromptTuning, add_adapters, bitfit
from lecture_lib.models.bert import BertModel
from lecture_lib.pretraining import PretrainingData
from lecture_lib.tokenization import WordPieceTokenizer
from tests.chapters.tiny_language import tiny_language


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    config = chapter_config(**tiny_language(monkeypatch, tmp_path))
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    tasks = build_harder_tasks(tokenizer, config, names=("acceptability", "context_ner", "unanswerable_qa"))
    torch.manual_seed(0)
    encoder = BertModel(dataclasses.replace(config.pretrain.model, vocab_size=tokenizer.vocab_size))
    return config, tasks, encoder


@pytest.mark.parametrize(
    "adapt", [None, bitfit, partial(add_adapters, bottleneck=2), partial(PromptTuning, num_prompts=2)]
)
def test_a_cached_run_is_the_run_it_stands_for_read_back(tiny, monkeypatch, adapt):
    config, tasks, encoder = tiny
    task = tasks["context_ner"]
    direct = finetune_from(task, encoder, config.finetune, 0, adapt)
    first = cached_finetune_from(task, encoder, config.finetune, 0, adapt)
    monkeypatch.setattr(ch05_bert_finetuning, "finetune_from", lambda *args: pytest.fail("trained again"))
    again = cached_finetune_from(task, encoder, config.finetune, 0, adapt)
    for run in (first, again):
        assert run.scores == direct.scores and run.history == direct.history
        assert type(run.model) is type(direct.model)
        for (name, theirs), mine in zip(direct.model.state_dict().items(), run.model.state_dict().values()):
            assert torch.equal(mine, theirs), name
        assert [p.requires_grad for p in run.model.parameters()] == [p.requires_grad for p in direct.model.parameters()]


def test_a_cached_run_is_scored_on_the_test_set_it_is_given_and_named_by_what_trains_it(tiny, monkeypatch):
    config, tasks, encoder = tiny
    task = tasks["acceptability"]
    run = cached_finetune_from(task, encoder, config.finetune)
    agreeing = predict(run.model, task.test)["logits"].argmax(-1)  # a test set labelled by the model's own answers
    other_test = dataclasses.replace(
        task, test=dataclasses.replace(task.test, features={**task.test.features, "labels": agreeing})
    )
    monkeypatch.setattr(ch05_bert_finetuning, "finetune_from", lambda *args: pytest.fail("trained again"))
    same_training = cached_finetune_from(other_test, encoder, config.finetune)
    assert same_training.scores == score(other_test, run.model) and same_training.scores["accuracy"] == 1.0
    trained = []
    monkeypatch.setattr(
        ch05_bert_finetuning, "finetune_from", lambda *args, **kw: trained.append(args) or finetune_from(*args, **kw)
    )
    cached_finetune_from(task, encoder, config.finetune, 1)  # another seed
    cached_finetune_from(task, encoder, config.finetune, dropout=0.1)  # another dropout
    cached_finetune_from(task, encoder.config, config.finetune)  # random weights
    fewer = dataclasses.replace(
        task, train=dataclasses.replace(task.train, features={k: v[:-1] for k, v in task.train.features.items()})
    )
    cached_finetune_from(fewer, encoder, config.finetune)  # other training data
    assert len(trained) == 4


def test_adapt_recipe_names_the_function_and_a_partials_arguments():
    assert adapt_recipe(None) is None
    assert adapt_recipe(bitfit)["code"] == "lecture_lib.finetuning.peft.bitfit"
    assert adapt_recipe(partial(add_adapters, bottleneck=2)) != adapt_recipe(partial(add_adapters, bottleneck=8))
    assert (
        adapt_recipe(partial(PromptTuning, num_prompts=8))["partial"]["code"]
        == "lecture_lib.finetuning.peft.PromptTuning"
    )


def test_null_threshold_scores_are_the_scores_at_each_threshold(tiny):
    config, tasks, encoder = tiny
    task = tasks["unanswerable_qa"]
    model = new_head(task, encoder)
    thresholds = [-3.0, 0.0, 3.0]
    scores = null_threshold_scores(task, model, thresholds)
    assert scores == [score(task, model, null_threshold=t) for t in thresholds]
    assert scores[0]["no_answer_f1"] >= scores[2]["no_answer_f1"]  # a lower threshold answers nothing more often


def _share_with_a_surname(documents):
    sentences = [s for document in documents for s in document]
    return sum(any(word in LAST_NAMES for word in s.split()) for s in sentences) / len(sentences)


def test_section_8s_general_text_is_the_grammar_without_facts_and_with_few_names(monkeypatch, tmp_path):
    recipe = chapter_config(**tiny_language(monkeypatch, tmp_path))
    texts = domain_texts(recipe)
    (domain_train, domain_test), (general_train, general_test) = texts["in-domain"], texts["general"]
    assert (len(general_train), len(general_test)) == (len(domain_train), len(domain_test))
    assert {len(d) for d in general_train + domain_train} == {recipe.sentences_per_document}
    assert _share_with_a_surname(general_train) < _share_with_a_surname(domain_train) / 4
    assert not any(s.fact for s in SyntheticLanguage(0, GENERAL_GRAMMAR).sentences(300, seed=0))
    other = domain_texts(dataclasses.replace(recipe, pretrain=dataclasses.replace(recipe.pretrain, seed=1)))
    assert other["general"][0] != general_train and other["in-domain"][0] != domain_train  # a seed draws new text


def test_section_8s_further_pretraining_continues_the_general_model_on_the_domain(monkeypatch, tmp_path):
    recipe = chapter_config(**tiny_language(monkeypatch, tmp_path))
    real, runs = ch05_bert_finetuning.pretrain, []

    def spy(config, *, data, model=None, progress):
        start = None if model is None else {k: v.clone() for k, v in model.state_dict().items()}
        result = real(config, data=data, model=model, progress=progress)
        runs.append((config, data, start, {k: v.clone() for k, v in result.model.state_dict().items()}))
        return result

    monkeypatch.setattr(ch05_bert_finetuning, "pretrain", spy)
    scores = domain_adaptation_run(recipe, recipe, "general")
    assert set(scores) == {"general", "general + further"}
    (general_config, general_data, general_start, general_end), (further_config, further_data, start, _) = runs
    assert general_start is None and all(torch.equal(start[k], general_end[k]) for k in general_end)
    assert further_config.train.steps == general_config.train.steps // 2
    assert further_data.tokenizer is general_data.tokenizer  # one vocabulary for both texts
    domain = PretrainingData(recipe.pretrain, *domain_texts(recipe)["in-domain"], general_data.tokenizer)
    assert torch.equal(further_data.train["input_ids"], domain.train["input_ids"])
    assert not torch.equal(general_data.train["input_ids"], domain.train["input_ids"])
    for name, values in scores.items():
        assert set(values) == {"frozen", "fine-tuned", "mlm_accuracy"}, name
        assert all(0 <= v <= 1 for v in values.values()), name


def test_section_2s_pool_trains_section_8s_runs_which_are_then_read(monkeypatch, tmp_path):
    tasks = dataclasses.replace(chapter_config(**tiny_language(monkeypatch, tmp_path)), seeds=(0, 1))
    monkeypatch.setattr(ch05_bert_finetuning, "domain_recipe", lambda seed: _seeded(tasks, seed))
    bert = pretrain_chapter_models(tasks)
    assert bert.config == tasks.pretrain and bert.path.exists()  # section 2's BERT
    assert all(domain_adaptation_run.is_cached(*call) for call in domain_adaptation_calls(tasks))
    monkeypatch.setattr(ch05_bert_finetuning, "pretrain", lambda *a, **k: pytest.fail("pretrained again"))
    table = domain_adaptation_scores(tasks)
    assert list(table) == list(DOMAIN_ENCODERS)
    assert all(len(values) == 2 for runs in table.values() for values in runs.values())
    assert "mlm_accuracy" not in table["never pretrained"]
    with pytest.raises(ValueError, match="expected text"):
        domain_adaptation_run(tasks, tasks, "wikipedia")


def _seeded(config, seed):
    return dataclasses.replace(config, pretrain=dataclasses.replace(config.pretrain, seed=seed))


def test_a_run_read_back_is_on_the_device_where_a_fresh_run_leaves_it(tiny):
    """On a GPU a fresh run's model stays there; one read from the cache must too, or the rerun of the notebook
    would score on the CPU and print other numbers (the fake accelerator stands in for CUDA)."""
    from tests.fake_accelerator import FakeAccelerator

    config, tasks, encoder = tiny
    budget = dataclasses.replace(config.finetune, steps=2)
    with FakeAccelerator() as device:
        fresh = cached_finetune_from(tasks["acceptability"], encoder, budget)
        again = cached_finetune_from(tasks["acceptability"], encoder, budget)
        assert {p.device for p in fresh.model.parameters()} == {p.device for p in again.model.parameters()} == {device}
        assert again.scores == fresh.scores
