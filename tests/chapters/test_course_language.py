"""lecture_lib.chapters.course_language and lecture_lib.finetuning.finetune: the chapter's sizes, the cached pretraining on the synthetic language, the tasks it
builds, and the fine-tuning loop's scores (recomputed here from the model's own predictions)."""

import dataclasses

import pytest
import torch

import lecture_lib.pretraining as pretrain_module
from lecture_lib.chapters.course_language import (
    HARDER_TASK_NAMES,
    TASK_NAMES,
    build_harder_tasks,
    build_tasks,
    chapter_config,
    synthetic_pretrained_bert,
    synthetic_pretraining_data,
)
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune, finetune_from, new_head, predict
from lecture_lib.finetuning.peft import bitfit
from lecture_lib.finetuning.tasks import best_spans, split_people, word_tags
from lecture_lib.metrics import (
    accuracy,
    matthews_corrcoef,
    pearson_correlation,
    span_f1,
    spearman_correlation,
    squad_scores,
)
from lecture_lib.models.bert import BertModel
from lecture_lib.runtime import parallel_map
from lecture_lib.tokenization import WordPieceTokenizer


def _tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    config = chapter_config(documents=40, train_examples=48, test_examples=24, finetune=dict(steps=3, batch_size=8),
                            max_length=128, pretrain=dict(train=dict(steps=3, batch_size=8, warmup_steps=1),
                                                          data=dict(eval_pairs=16, vocab_size=300, seq_len=128)))
    return config


def test_profiles_pick_the_sizes(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    quick = chapter_config()
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    full = chapter_config()
    assert quick.pretrain.model.hidden_size < full.pretrain.model.hidden_size
    assert quick.finetune.steps < full.finetune.steps
    assert chapter_config(finetune=dict(lr=0.5), pretrain=dict(seed=3)).finetune.lr == 0.5
    assert chapter_config(pretrain=dict(seed=3)).pretrain.seed == 3
    longer = chapter_config(pretrain=dict(train=dict(steps=1600))).pretrain  # merged field by field
    assert longer.train.steps == 1600 and longer.train.batch_size == full.pretrain.train.batch_size


def test_pretraining_data_comes_from_the_synthetic_language(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    data = synthetic_pretraining_data(config)
    assert data.tokenizer.vocab_size == 300
    batch = data.batch(0)
    assert batch["input_ids"].shape[0] == 8 and "next_sentence_label" in batch
    first = data.tokenizer.decode(data.train["input_ids"][0].tolist(), skip_special_tokens=True)
    lang = SyntheticLanguage(config.language_seed)
    words = {w.lower() for s in lang.sentences(2000, seed=0) for w in s.words}
    assert set(first.split()) <= words | {"."}
    # another model's vocabulary (further pretraining): the same documents, cut into its pieces
    other = WordPieceTokenizer.train(["a tiny vocabulary of other words"], 60)
    again = synthetic_pretraining_data(config, other)
    assert again.tokenizer is other
    assert other.decode(again.train["input_ids"][0].tolist(), skip_special_tokens=True).replace(" ##", "") != ""
    assert int(again.train["input_ids"].max()) < other.vocab_size < data.tokenizer.vocab_size


def test_pretrained_model_is_cached_on_disk(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    first = synthetic_pretrained_bert(config)
    assert first.path.parent == tmp_path and first.path.name.startswith("synthetic-bert-")
    assert not (first.path / "checkpoint").exists()

    def fail(*args, **kwargs):
        raise AssertionError("a cached model must not be trained again")

    monkeypatch.setattr(pretrain_module, "pretrain", fail)
    again = synthetic_pretrained_bert(config)
    assert again.path == first.path
    for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()):
        torch.testing.assert_close(a, b)
    other = dataclasses.replace(config, documents=41)  # another recipe: not in the cache, so it trains
    with pytest.raises(AssertionError, match="must not be trained again"):
        synthetic_pretrained_bert(other)


def test_tasks_hold_out_people_and_fine_tuning_scores_the_test_set(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    tasks = build_tasks(tokenizer, config)
    assert tuple(tasks) == TASK_NAMES
    train_people, test_people = split_people(lang.world)
    test_words = {w for e in tasks["ner"].test_examples for w in e.words}
    test_words |= {w for e in tasks["qa"].test_examples for w in e.passage}
    assert not test_words & {part for p in train_people for part in p.name.split()}
    assert test_words & {part for p in test_people for part in p.name.split()}
    encoder = BertModel(config.pretrain.model)
    for name in ("acceptability", "ner"):
        task = tasks[name]
        result = finetune(task, new_head(task, encoder, config.finetune), config.finetune)
        assert len(result.history.loss) == config.finetune.steps and result.seconds > 0
        logits = predict(result.model, task.test)["logits"]
        if name == "acceptability":
            expected = matthews_corrcoef(logits.argmax(-1), task.test.features["labels"])
            assert result.scores["mcc"] == pytest.approx(expected)
        else:
            expected = span_f1([e.tags for e in task.test_examples], word_tags(logits, task.test))["f1"]
            assert result.scores["f1"] == pytest.approx(expected)
    qa = tasks["qa"]
    scores = finetune(qa, new_head(qa, config.pretrain.model, config.finetune), config.finetune).scores
    assert set(scores) == {"exact_match", "f1"} and 0 <= scores["exact_match"] <= scores["f1"] <= 1


def test_harder_tasks_fine_tune_and_score_every_new_shape(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    assert config.seeded_finetune.steps == 100 and config.seeded_finetune.lr == config.finetune.lr  # the quick table
    assert chapter_config(table_finetune=dict(steps=7)).seeded_finetune.steps == 7
    assert (config.feature_finetune.steps, config.feature_finetune.lr) == (300, config.head_lr)  # the quick taggers
    untuned = dataclasses.replace(config, tagger_finetune=None)  # no tagger budget: the seeded one at head_lr
    assert untuned.feature_finetune == dataclasses.replace(config.seeded_finetune, lr=config.head_lr)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    tasks = build_harder_tasks(tokenizer, config)
    assert tuple(tasks) == HARDER_TASK_NAMES
    assert tasks["choice"].train.features["input_ids"].shape[:2] == (48, 4)
    assert tasks["similarity"].train.features["labels"].max() <= 1.0  # scores of 0..5, divided by 5
    encoder = BertModel(config.pretrain.model)
    for name in ("similarity", "choice", "unanswerable_qa"):
        task = tasks[name]
        result = finetune(task, new_head(task, encoder, config.finetune), config.finetune)
        out = predict(result.model, task.test)
        if name == "similarity":
            labels = task.test.features["labels"]
            assert result.scores["pearson"] == pytest.approx(pearson_correlation(out["logits"].squeeze(-1), labels))
            assert result.scores["spearman"] == pytest.approx(spearman_correlation(out["logits"].squeeze(-1), labels))
        elif name == "choice":
            assert out["logits"].shape == (24, 4)
            assert result.scores["accuracy"] == pytest.approx(accuracy(out["logits"].argmax(-1), task.test.features["labels"]))
        else:
            spans = best_spans(out["start_logits"], out["end_logits"], task.test, null_threshold=0.0)
            predicted = [" ".join(e.passage[a:b]) for e, (a, b) in zip(task.test_examples, spans)]
            expected = squad_scores(predicted, [e.answer for e in task.test_examples])
            assert result.scores["f1"] == pytest.approx(expected["f1"])
            unanswerable = [e for e in task.test_examples if not e.answer]
            assert unanswerable and result.scores["no_answer_exact_match"] == pytest.approx(
                sum(not p for p, e in zip(predicted, task.test_examples) if not e.answer) / len(unanswerable))


def test_harder_tasks_by_name_are_those_of_the_full_set(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    every, some = build_harder_tasks(tokenizer, config), build_harder_tasks(tokenizer, config, names=("context_ner",))
    assert list(some) == ["context_ner"]
    for part in ("train", "test"):
        ours, theirs = getattr(some["context_ner"], part).features, getattr(every["context_ner"], part).features
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    with pytest.raises(ValueError, match="expected task names"):
        build_harder_tasks(tokenizer, config, names=("context_ner", "ner"))


def test_fused_adamw_fine_tunes_to_the_same_weights_up_to_rounding(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    task = build_tasks(tokenizer, config)["acceptability"]
    kernels, adamw = [], torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *args, fused=None, **kw: kernels.append(fused) or adamw(*args, fused=fused, **kw))
    runs = [finetune(task, new_head(task, config.pretrain.model, budget), budget).model
            for budget in (config.finetune, dataclasses.replace(config.finetune, fused=True))]
    for (name, plain), fused in zip(runs[0].named_parameters(), runs[1].parameters()):
        torch.testing.assert_close(fused, plain, atol=1e-6, rtol=1e-5, msg=name)
    assert kernels == [False, True]  # FinetuneConfig.fused reached the optimizer
    assert config.seeded_finetune.fused and config.feature_finetune.fused  # the quick tables' budgets use it


def test_fine_tuning_in_worker_processes_gives_the_loops_weights_and_scores(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    tasks = build_tasks(tokenizer, config)
    encoder = BertModel(dataclasses.replace(config.pretrain.model, vocab_size=tokenizer.vocab_size))
    jobs = [(tasks[name], start, dataclasses.replace(config.finetune, seed=seed), None)
            for name in ("acceptability", "ner") for start in (encoder, encoder.config) for seed in (0, 1)]
    jobs.append((tasks["ner"], encoder, config.finetune, bitfit))
    in_workers = parallel_map(finetune_from, jobs, workers=2)
    for (task, start, budget, adapt), ours in zip(jobs, in_workers):
        model = new_head(task, start, budget)  # the loop, here, as the notebook wrote it
        loop = finetune(task, adapt(model) if adapt else model, budget)
        assert ours.scores == loop.scores
        for (name, theirs), mine in zip(loop.model.state_dict().items(), ours.model.state_dict().values()):
            assert torch.equal(mine, theirs), name
    assert in_workers[0].scores != in_workers[1].scores or not torch.equal(  # the seeds made different runs
        in_workers[0].model.classifier.weight, in_workers[1].model.classifier.weight)
    assert sum(p.requires_grad for p in in_workers[-1].model.parameters()) < len(list(encoder.parameters()))  # BitFit
