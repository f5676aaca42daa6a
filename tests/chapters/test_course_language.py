"""lecture_lib.chapters.course_language and lecture_lib.finetuning.finetune: the chapter's sizes, the cached pretraining on the synthetic language, the tasks it
builds, and the fine-tuning loop's scores (recomputed here from the model's own predictions)."""

import copy
import dataclasses

import pytest
import torch
import transformers

import lecture_lib.pretraining as pretrain_module
import lecture_lib.pretraining.run as pretrain_run
from lecture_lib.chapters import ch05_bert_finetuning, course_language
from lecture_lib.chapters.course_language import (
    HARDER_TASK_NAMES,
    TASK_NAMES,
    build_harder_tasks,
    build_tasks,
    chapter_config,
    object_swap_entailment_task,
    synthetic_pretrained_bert,
    synthetic_pretraining_data,
)
from lecture_lib.data.synthetic import LAST_NAMES, SyntheticLanguage
from lecture_lib.finetuning.features import frozen_and_fine_tuned
from lecture_lib.finetuning.finetune import finetune, finetune_from, new_head, predict, reinitialize_pooler
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
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.heads import BertForSequenceClassification
from lecture_lib.runtime import parallel_map
from lecture_lib.tokenization import WordPieceTokenizer
from tests.chapters.tiny_language import tiny_language


def _tiny(monkeypatch, tmp_path):
    return chapter_config(**tiny_language(monkeypatch, tmp_path))


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
    assert first.path.parent == tmp_path and first.path.name.startswith("cached_pretraining-")
    assert not (first.path / "checkpoint").exists()

    def fail(*args, **kwargs):
        raise AssertionError("a cached model must not be trained again")

    monkeypatch.setattr(pretrain_run, "pretrain", fail)  # where cached_pretraining finds it
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
        result = finetune(task, new_head(task, encoder), config.finetune)
        assert len(result.history.loss) == config.finetune.steps and result.seconds > 0
        logits = predict(result.model, task.test)["logits"]
        if name == "acceptability":
            expected = matthews_corrcoef(logits.argmax(-1), task.test.features["labels"])
            assert result.scores["mcc"] == pytest.approx(expected)
        else:
            expected = span_f1([e.tags for e in task.test_examples], word_tags(logits, task.test))["f1"]
            assert result.scores["f1"] == pytest.approx(expected)
    qa = tasks["qa"]
    scores = finetune(qa, new_head(qa, config.pretrain.model), config.finetune).scores
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
        result = finetune(task, new_head(task, encoder), config.finetune)
        out = predict(result.model, task.test)
        if name == "similarity":
            labels = task.test.features["labels"]
            assert result.scores["pearson"] == pytest.approx(pearson_correlation(out["logits"].squeeze(-1), labels))
            assert result.scores["spearman"] == pytest.approx(spearman_correlation(out["logits"].squeeze(-1), labels))
        elif name == "choice":
            assert out["logits"].shape == (24, 4)
            assert result.scores["accuracy"] == pytest.approx(
                accuracy(out["logits"].argmax(-1), task.test.features["labels"])
            )
        else:
            spans = best_spans(out["start_logits"], out["end_logits"], task.test, null_threshold=0.0)
            predicted = [" ".join(e.passage[a:b]) for e, (a, b) in zip(task.test_examples, spans)]
            expected = squad_scores(predicted, [e.answer for e in task.test_examples])
            assert result.scores["f1"] == pytest.approx(expected["f1"])
            unanswerable = [e for e in task.test_examples if not e.answer]
            assert unanswerable and result.scores["no_answer_exact_match"] == pytest.approx(
                sum(not p for p, e in zip(predicted, task.test_examples) if not e.answer) / len(unanswerable)
            )


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
    monkeypatch.setattr(
        torch.optim, "AdamW", lambda *args, fused=None, **kw: kernels.append(fused) or adamw(*args, fused=fused, **kw)
    )
    runs = [
        finetune(task, new_head(task, config.pretrain.model), budget).model
        for budget in (config.finetune, dataclasses.replace(config.finetune, fused=True))
    ]
    for (name, plain), fused in zip(runs[0].named_parameters(), runs[1].parameters()):
        torch.testing.assert_close(fused, plain, atol=1e-6, rtol=1e-5, msg=name)
    assert kernels == [False, True]  # the budget's fused reached the optimizer
    assert config.seeded_finetune.fused and config.feature_finetune.fused  # the quick tables' budgets use it


def test_fine_tuning_in_worker_processes_gives_the_loops_weights_and_scores(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    tasks = build_tasks(tokenizer, config)
    encoder = BertModel(dataclasses.replace(config.pretrain.model, vocab_size=tokenizer.vocab_size))
    jobs = [
        (tasks[name], start, config.finetune, seed, None)
        for name in ("acceptability", "ner")
        for start in (encoder, encoder.config)
        for seed in (0, 1)
    ]
    jobs.append((tasks["ner"], encoder, config.finetune, 0, bitfit))
    in_workers = parallel_map(finetune_from, jobs, workers=2)
    for (task, start, budget, seed, adapt), ours in zip(jobs, in_workers):
        model = new_head(task, start, seed=seed)  # the loop, here, as the notebook wrote it
        loop = finetune(task, adapt(model) if adapt else model, budget, seed)
        assert ours.scores == loop.scores
        for (name, theirs), mine in zip(loop.model.state_dict().items(), ours.model.state_dict().values()):
            assert torch.equal(mine, theirs), name
    assert in_workers[0].scores != in_workers[1].scores or not torch.equal(  # the seeds made different runs
        in_workers[0].model.classifier.weight, in_workers[1].model.classifier.weight
    )
    assert sum(p.requires_grad for p in in_workers[-1].model.parameters()) < len(list(encoder.parameters()))  # BitFit


def test_exercise_1_the_object_swap_task_is_entailment_split_by_people(monkeypatch, tmp_path):
    """Exercise 1: object_swap_entailment_task is section 3's entailment task (head, labels, people split) with the
    object-swap rule: half its training pairs contradict, and its test pairs, never negated, name held-out people."""
    config = _tiny(monkeypatch, tmp_path)
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    task = object_swap_entailment_task(tokenizer, config)
    negated = build_tasks(tokenizer, config)["entailment"]
    assert (task.name, task.head, task.num_labels) == (negated.name, negated.head, negated.num_labels)
    assert int(task.train.features["labels"].sum()) == config.train_examples // 2
    assert not any("not" in e.words_a + e.words_b for e in task.test_examples)
    test_people = {p.name for p in split_people(lang.world)[1]}
    for e in task.test_examples:
        named = {p.name for p in lang.world.people if f" {p.name} " in f" {' '.join(e.words_a)} "}
        assert named and named <= test_people, " ".join(e.words_a)


def test_exercise_2_twice_the_steps_and_dropout_reach_section_6s_runs(monkeypatch, tmp_path):
    """Exercise 2: table_finetune=dict(steps=200) doubles section 6's budget (100 -> 200 steps of 16) and
    finetune_dropout=0.1 reaches it; finetune_from then trains that many steps with every dropout of the
    model at p = 0.1 (encoder and head: two passes in training differ, in evaluation they agree)."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    assert (chapter_config().seeded_finetune.steps, chapter_config().finetune_dropout) == (100, 0.0)
    exercise = chapter_config(table_finetune=dict(steps=200), finetune_dropout=0.1)
    budget = exercise.seeded_finetune
    assert (budget.steps, budget.batch_size, budget.warmup_steps, exercise.finetune_dropout) == (200, 16, 20, 0.1)
    config = dataclasses.replace(_tiny(monkeypatch, tmp_path), table_finetune=dataclasses.replace(budget, steps=6))
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    task = build_harder_tasks(tokenizer, config, names=("context_ner",))["context_ner"]
    encoder = BertModel(dataclasses.replace(config.pretrain.model, vocab_size=tokenizer.vocab_size))
    result = finetune_from(task, encoder, config.seeded_finetune, dropout=exercise.finetune_dropout)
    assert len(result.history.loss) == 6
    model = result.model
    assert model.config.hidden_dropout_prob == model.config.attention_probs_dropout_prob == 0.1
    dropouts = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(dropouts) >= 2 * config.pretrain.model.num_hidden_layers + 2 and set(dropouts) == {0.1}
    batch = {k: v for k, v in task.test.batch(range(4)).items() if k != "labels"}
    model.train()
    assert not torch.equal(model(**batch).logits, model(**batch).logits)
    model.eval()
    assert torch.equal(model(**batch).logits, model(**batch).logits)


def test_exercise_3_reinitialize_pooler_draws_what_transformers_init_draws():
    """Exercise 3: the pooler and the top layer, drawn afresh, equal what transformers' own _init_weights draws
    from the same seed (N(0, 0.3) matrices, zero biases, unit LayerNorms); every other weight is left as it was."""
    torch.manual_seed(0)
    encoder = BertModel(
        BertConfig(
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
            initializer_range=0.3,
        )
    )
    for p in encoder.parameters():  # plays the pretrained encoder: no weight at its initial value
        p.data.add_(0.5)
    model = BertForSequenceClassification.from_encoder(encoder, 3)
    hf = transformers.BertForSequenceClassification(model.to_hf().config)
    hf.load_state_dict(model.to_hf().state_dict())
    for p in hf.parameters():
        p._is_hf_initialized = False  # transformers skips weights it marks as loaded
    torch.manual_seed(7)
    reinitialize_pooler(model, top_layers=1)
    torch.manual_seed(7)
    for module in (hf.bert.pooler, hf.bert.encoder.layer[-1]):
        module.apply(hf._init_weights)
    ours = model.to_hf().state_dict()
    for name, theirs in hf.state_dict().items():
        torch.testing.assert_close(ours[name], theirs, msg=name)
    assert ours["bert.pooler.dense.weight"].std() == pytest.approx(0.3, rel=0.25)
    assert torch.equal(ours["bert.encoder.layer.1.output.dense.bias"], torch.zeros(16))
    torch.testing.assert_close(
        model.bert.encoder.layer[0].output.dense.weight, encoder.encoder.layer[0].output.dense.weight
    )
    only_pooler = BertForSequenceClassification.from_encoder(encoder, 3)
    torch.manual_seed(7)
    reinitialize_pooler(only_pooler)
    torch.testing.assert_close(only_pooler.bert.pooler.dense.weight, model.bert.pooler.dense.weight)
    torch.testing.assert_close(
        only_pooler.bert.encoder.layer[1].output.dense.weight, encoder.encoder.layer[1].output.dense.weight
    )


def test_exercise_5_twice_the_pretraining_is_a_new_run_of_the_same_recipe(monkeypatch):
    """Exercise 5: pretrain=dict(train=dict(steps=1600)) trains a new model (its own cache entry, never section 2's
    800-step one) whose recipe differs from section 2's in the steps alone."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    runs = []
    monkeypatch.setattr(
        course_language,
        "cached_pretraining",
        lambda config, *args, **kw: runs.append(
            (pretrain_module.cached_pretraining.cache_name(config, *args, **kw), config)
        ),
    )
    synthetic_pretrained_bert(chapter_config())
    synthetic_pretrained_bert(chapter_config(pretrain=dict(train=dict(steps=1600))))
    (section_2, short), (longer, long) = runs
    assert longer != section_2 and longer.startswith("cached_pretraining-")
    assert (short.train.steps, long.train.steps) == (800, 1600)
    assert dataclasses.replace(long, train=dataclasses.replace(long.train, steps=800)) == short


def test_exercise_6_the_general_texts_own_vocabulary_cuts_surnames_into_more_pieces(monkeypatch):
    """Exercise 6's hint at the quick recipe's documents: a vocabulary learned from section 8's general text alone
    cuts the language's surnames into more pieces than the vocabulary both texts share, and cuts both texts into
    pretraining data of its own pieces."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    recipe = ch05_bert_finetuning.domain_recipe(0)
    texts = ch05_bert_finetuning.domain_texts(recipe)
    general, domain = ([s for d in texts[name][0] for s in d] for name in ("general", "in-domain"))
    own = WordPieceTokenizer.train(general, recipe.pretrain.data.vocab_size)
    shared = WordPieceTokenizer.train(general + domain, recipe.pretrain.data.vocab_size)

    def pieces_per_surname(tokenizer):
        return sum(len(tokenizer.tokenize(name)) for name in LAST_NAMES) / len(LAST_NAMES)

    assert pieces_per_surname(own) > pieces_per_surname(shared)
    small = dataclasses.replace(  # the hint's recipe: the model's vocabulary as large as the tokenizer's
        recipe.pretrain,
        model=dataclasses.replace(recipe.pretrain.model, vocab_size=own.vocab_size),
        data=dataclasses.replace(recipe.pretrain.data, eval_pairs=8, vocab_size=own.vocab_size),
        train=dataclasses.replace(recipe.pretrain.train, steps=2, warmup_steps=1),
    )
    data = {name: pretrain_module.PretrainingData(small, *texts[name], own) for name in ("general", "in-domain")}
    assert all(d.tokenizer is own and int(d.train["input_ids"].max()) < own.vocab_size for d in data.values())
    # the hint's runs, two steps each: the general model, its further pretraining, scored in its own vocabulary
    general_model = pretrain_module.pretrain(small, data=data["general"], progress=False).model
    further = pretrain_module.pretrain(
        small, data=data["in-domain"], model=copy.deepcopy(general_model), progress=False
    )
    config = chapter_config(train_examples=48, test_examples=24, finetune=dict(steps=2, batch_size=8))
    task = build_harder_tasks(own, config, names=("context_ner",))["context_ner"]
    tagger, budget = dataclasses.replace(config.feature_finetune, steps=2), config.seeded_finetune
    scores = frozen_and_fine_tuned(task, further.model.bert, tagger, budget, 0, 0)
    assert set(scores) == {"frozen", "fine-tuned"} and all(0 <= v <= 1 for v in scores.values())
