"""lecture_lib.chapters.ch04_bert_pretraining: the two recipes' sizes, and the ablations' runs on a tiny
recipe (their scores recomputed here from the cached models and the library's metrics)."""

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from lecture_lib.chapters import ch04_bert_pretraining as ch04
from lecture_lib.chapters import course_language
from lecture_lib.chapters.ch04_bert_pretraining import (
    BANK_SENTENCES,
    BOTH_TASKS_ROWS,
    DIRECTION_ROWS,
    DOWNSTREAM_TASKS,
    MASKING_RULES,
    TABLE5_ROWS,
    VISIT_VERBS,
    ablation_config,
    bert_base_pretraining_flops,
    best_left_to_right_tags,
    chapter_config,
    direction_runs,
    downstream_scores,
    downstream_tasks,
    gap_neighbour_probe,
    gpu_hours_and_kwh,
    initial_sublayer_scale,
    mask_accuracy_on,
    masking_ablation,
    pretraining_ablations,
    pretraining_seeds,
    right_context_entity_examples,
    sense_similarities,
    small_pretrained_bert,
    subject_by_predicate_examples,
    subject_task,
    synthetic_bert,
    synthetic_config,
)
from lecture_lib.data.synthetic import CITIES, FACT_TEMPLATES, ORGANISATIONS, SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune_from
from lecture_lib.finetuning.harder_tasks import COMPANY_SUFFIXES
from lecture_lib.finetuning.tasks import TaggingExample, split_people
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.metrics import span_f1
from lecture_lib.models.heads import BertForTokenClassification
from lecture_lib.models.left_to_right import LeftToRightBertModel
from lecture_lib.pretraining import PretrainingData, evaluate_at_masks, pretrain
from tests.chapters.tiny_language import tiny_language


def _tiny(monkeypatch, tmp_path):
    return ablation_config(**tiny_language(monkeypatch, tmp_path))


def test_profiles_pick_the_sizes(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    quick, quick_docs = synthetic_config(), chapter_config()
    assert quick.finetune == course_language.chapter_config().finetune  # chapter 05's fine-tuning budget
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    full = synthetic_config()
    assert quick.pretrain.model.hidden_size < full.pretrain.model.hidden_size
    assert quick.pretrain.model.hidden_size == quick_docs.model.hidden_size  # the documentation model's shape
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    shorter = ablation_config()
    assert shorter.pretrain.train.steps < quick.pretrain.train.steps
    assert shorter.pretrain.model == quick.pretrain.model and shorter.documents == quick.documents


def test_pretraining_seeds_are_lecture_seeds_in_full_and_the_first_alone_in_quick(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "3,4,5")
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    assert pretraining_seeds() == (3, 4, 5)
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    assert pretraining_seeds() == (3,)


def test_masking_ablation_trains_one_cached_model_per_rule(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    results = masking_ablation(config)
    assert set(results) == {*MASKING_RULES, "unigram"}
    assert all(set(results[rule]) == {"[MASK]", "same", "random"} for rule in MASKING_RULES)
    assert all(0 <= v <= 1 for rule in MASKING_RULES for v in results[rule].values())
    assert masking_ablation(config) == results  # read back from the cache


def test_masking_schedules_pretrain_both_schedules_on_each_seed_and_score_the_guess(monkeypatch, tmp_path):
    """Each seed pretrains a static and a dynamic model on one corpus; the guess is the most frequent training
    token's share of the held-out labels, counted here by hand."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    tiny = dict(
        documents=40,
        pretrain=dict(data=dict(vocab_size=300, eval_pairs=16), train=dict(steps=6, batch_size=8, warmup_steps=1)),
    )
    runs = ch04.masking_schedules([0, 1], workers=1, **tiny)
    assert set(runs) == {"dynamic", "static", "guess"} and all(len(v) == 2 for v in runs.values())
    assert runs["dynamic"] != runs["static"]  # one schedule each, both trained
    config = ch04.synthetic_config(**ch04.merge_dicts(ch04.SCHEDULE_QUICK, tiny, dict(pretrain=dict(seed=1))))
    assert config.pretrain.objective.pairs is None and config.documents == 40
    corpus = course_language.synthetic_pretraining_data(config)
    tokens = corpus.train["input_ids"][~corpus.train["special_tokens_mask"]].tolist()
    frequent = max(set(tokens), key=tokens.count)
    labels = [t for b in corpus.eval_batches() for t in b["labels"].flatten().tolist() if t != IGNORE_INDEX]
    assert runs["guess"][1] == pytest.approx(labels.count(frequent) / len(labels))
    assert ch04.masking_schedules([0, 1], workers=1, **tiny) == runs  # read back from the cache


def test_schedule_downstream_fine_tunes_the_schedules_models(monkeypatch, tmp_path):
    """The rows are the cached models of :func:`masking_schedules` (and the same network from random weights),
    fine-tuned on context entities; the static row of seed 1 and the untrained row are recomputed here."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    tiny = dict(
        documents=40,
        train_examples=48,
        test_examples=24,
        table_finetune=dict(steps=30, batch_size=16, lr=3e-3),
        pretrain=dict(data=dict(vocab_size=300, eval_pairs=16), train=dict(steps=6, batch_size=8, warmup_steps=1)),
    )
    rows = ch04.schedule_downstream([0, 1], workers=1, **tiny)
    assert list(rows) == [*ch04.MASK_SCHEDULES, "no pretraining"]
    assert all(len(per_seed) == 2 and all(len(f1) == 3 for f1 in per_seed) for per_seed in rows.values())
    base = ch04.synthetic_config(**ch04.merge_dicts(ch04.SCHEDULE_QUICK, tiny, dict(pretrain=dict(seed=1))))
    static = ch04._with_pretrain(base, ch04.MASK_SCHEDULES["static"])
    model = course_language.synthetic_pretrained_bert(static)
    task = {"f1": downstream_tasks(model.tokenizer, static)["context entities"]}
    assert downstream_scores(task, model.model.bert, static)["f1"] == rows["static"][1]
    assert downstream_scores(task, static.pretrain.model, static)["f1"] == rows["no pretraining"][1]
    dynamic = course_language.synthetic_pretrained_bert(ch04._with_pretrain(base, ch04.MASK_SCHEDULES["dynamic"]))
    assert not torch.equal(
        dynamic.model.bert.embeddings.word_embeddings.weight, model.model.bert.embeddings.word_embeddings.weight
    )
    assert any(f1 > 0 for f1 in rows["static"][1])  # the recomputed scores are not all zero
    assert ch04.schedule_downstream([0, 1], workers=1, **tiny) == rows  # read back from the cache


SIZES = [(1, 16, 2), (2, 64, 4)]
TINY_BUDGET = dict(steps=3, batch_size=8)  # the seeded fine-tuning runs' budget (chapter 05's is 100 steps of 16)


def test_pretraining_ablations_rows(monkeypatch, tmp_path):
    config = ablation_config(**tiny_language(monkeypatch, tmp_path), seeds=(0, 1), table_finetune=TINY_BUDGET)
    tables = pretraining_ablations(config, sizes=SIZES, workers=1)
    rows, sizes = tables["objectives"], tables["sizes"]
    assert list(rows) == [*TABLE5_ROWS, "No pretraining"]
    assert set(rows["LTR & No NSP"]) == {"parameters", "downstream"}  # a left-to-right LM fills no [MASK]
    for name, row in [*rows.items(), *sizes.items()]:
        both = name in (*BOTH_TASKS_ROWS, "No pretraining")
        assert list(row["downstream"]) == list(DOWNSTREAM_TASKS if both else DOWNSTREAM_TASKS[:1])
    assert all(
        len(f1) == 2 and all(0 <= x <= 1 for x in f1) for row in rows.values() for f1 in row["downstream"].values()
    )
    # the BERT row's [MASK] accuracy, recomputed from its cached model on the held-out text without pairs
    bert = synthetic_bert(config)
    held_out = course_language.synthetic_pretraining_data(
        dataclasses.replace(
            config,
            pretrain=dataclasses.replace(
                config.pretrain, objective=dataclasses.replace(config.pretrain.objective, pairs=None)
            ),
        ),
        bert.tokenizer,
    )
    recomputed = evaluate_at_masks(
        bert.model, held_out.eval_batches(), held_out.tokenizer.mask_token_id, held_out.most_frequent_token()
    )
    assert rows["BERT (MLM + NSP)"]["mask_accuracy"] == pytest.approx(recomputed["mask_accuracy"])
    # its downstream scores, recomputed: each seed fine-tuned anew
    tasks = downstream_tasks(bert.tokenizer, config)
    assert (
        downstream_scores({"context entities": tasks["context entities"]}, bert.model.bert, config)
        == rows["BERT (MLM + NSP)"]["downstream"]
    )
    assert list(sizes) == ["1/16/2", "2/64/4"]  # the second is the BERT row's shape: one run serves both tables
    assert sizes["2/64/4"] == rows["BERT (MLM + NSP)"] and sizes["1/16/2"]["parameters"] < sizes["2/64/4"]["parameters"]
    assert all(math.isfinite(row["mlm_loss"]) for row in sizes.values())
    assert pretraining_ablations(config, sizes=SIZES, workers=1) == tables  # from the cache
    with pytest.raises(ValueError, match="hidden_size"):
        pretraining_ablations(config, sizes=[(1, 30, 4)], workers=1)  # 30 is not a multiple of 4 heads


def test_right_context_entity_labels_by_brute_force():
    """Every tag rederived from the words: a first name and a surname are a person; after the verb, a surname
    followed by a company word is a company, a surname followed by "." a place; and up to the surname the
    two readings are the same words, so the left side cannot tell them apart."""
    lang = SyntheticLanguage(0)
    train_people, test_people = split_people(lang.world)
    for people in (train_people, test_people):
        surnames = {p.name.split(" ")[1] for p in people}
        examples = right_context_entity_examples(lang, 400, seed=3, people=people)
        prefixes = {"B-LOC": set(), "B-ORG": set()}
        for e in examples:
            words = e.words
            assert " ".join(words[:2]) in {p.name for p in people} and words[2] in VISIT_VERBS and words[-1] == "."
            assert words[3] in surnames
            company = len(words) == 6
            assert not company or words[4] in COMPANY_SUFFIXES
            expected = (
                ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O"] if company else ["B-PER", "I-PER", "O", "B-LOC", "O"]
            )
            assert e.tags == expected
            prefixes[e.tags[3]].add(tuple(words[2:4]))  # the verb and the surname: the left side of the tag
        places = sum(e.tags[3] == "B-LOC" for e in examples)
        assert 160 < places < 240  # a coin per sentence: 400 draws, 200 ± 40 is over four standard deviations
        assert len(prefixes["B-LOC"] & prefixes["B-ORG"]) > 0.5 * len(prefixes["B-LOC"])  # same left side, both tags
    assert right_context_entity_examples(lang, 20, seed=3) == right_context_entity_examples(lang, 20, seed=3)


def _language_predicates(slot: str) -> set[str]:
    """The language's affirmative fact wordings whose subject is ``slot`` ("O" a company, "P" a person), each as
    the words after its subject, with the object's slot left in braces: the independent reference the task's
    predicates are checked against."""
    wordings = set()
    for (_, negated), templates in FACT_TEMPLATES.items():
        for template in templates:
            words = [item.split("/")[0].rstrip("*") for item in template.split(" ")]
            if not negated and words[0] == "{" + slot + "}":
                wordings.add(" ".join(words[1:-1]))
    return wordings


def test_subject_by_predicate_examples_by_brute_force():
    """Each sentence is a surname of ``people``, one of the language's own wordings for a company or a person
    subject, and a full stop; only the subject is tagged, by that wording's kind; and no word of the test
    predicates is ever seen at fine-tuning."""
    lang = SyntheticLanguage(0)
    kinds = {"ORG": _language_predicates("O"), "PER": _language_predicates("P")}
    fillers = {"{C}": CITIES, "{O}": ORGANISATIONS}
    train_people, test_people = split_people(lang.world)
    seen = {"train": set(), "test": set()}
    for split, people in (("train", train_people), ("test", test_people)):
        people_names = {p.name for p in people}
        examples = subject_by_predicate_examples(lang, 400, seed=3, people=people, split=split)
        for e in examples:
            kind = e.tags[0][2:]
            assert e.words[0] in {name.split(" ")[1] for name in people_names} and e.words[-1] == "."
            assert e.tags == [f"B-{kind}"] + ["O"] * (len(e.words) - 1)
            text = " ".join(e.words[1:-1])
            matches = [
                w
                for w in kinds[kind]
                for slot, options in (*fillers.items(), ("{P}", people_names))
                if slot in w and any(text == w.replace(slot, o) for o in options)
            ]
            assert len(matches) == 1, text  # a wording of the subject's own kind, its object filled
            seen[split].add(matches[0])
        organisations = sum(e.tags[0] == "B-ORG" for e in examples)
        assert 160 < organisations < 240  # a coin per sentence: 200 ± 40 is over four standard deviations

    def words(wordings):
        return {w for wording in wordings for w in wording.split(" ") if not w.startswith("{")}

    assert not words(seen["train"]) & words(seen["test"])
    assert len(seen["test"]) == 6 and len(seen["train"]) == 2  # every wording drawn
    with pytest.raises(ValueError, match="split"):
        subject_by_predicate_examples(lang, 1, seed=0, split="dev")


def test_direction_runs_rows(monkeypatch, tmp_path):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    budget = dict(steps=40, batch_size=8)  # enough for the tiny taggers to tag some subjects
    config = ablation_config(**tiny_language(monkeypatch, tmp_path), seeds=(0, 1), table_finetune=budget)
    runs = direction_runs(config, [0, 1], workers=1)
    assert list(runs) == [name for name in DIRECTION_ROWS if name not in ch04.DIRECTION_VIEWS]  # quick: no views
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    assert list(ch04.direction_rows()) == list(DIRECTION_ROWS)
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    assert all(len(per_seed) == 2 and all(len(f1) == 2 for f1 in per_seed) for per_seed in runs.values())
    # recomputed: the masked LM of pretraining seed 1 (MLM alone) and the untrained network, both with full attention
    no_pairs = dataclasses.replace(
        config,
        pretrain=dataclasses.replace(
            config.pretrain, seed=1, objective=dataclasses.replace(config.pretrain.objective, pairs=None)
        ),
    )
    bert = synthetic_bert(no_pairs)
    task = {"subjects": subject_task(bert.tokenizer, no_pairs)}
    assert downstream_scores(task, bert.model.bert, no_pairs)["subjects"] == runs["masked LM"][1]
    assert downstream_scores(task, no_pairs.pretrain.model, no_pairs)["subjects"] == runs["no pretraining"][1]
    left_to_right = ch04.pretrained_row(no_pairs, "left-to-right").model.bert  # its tagger: full attention
    assert downstream_scores(task, left_to_right, no_pairs)["subjects"] == runs["left-to-right LM"][1]
    assert len({tuple(f1) for per_seed in runs.values() for f1 in per_seed}) > 1 and runs["masked LM"][1] != [0, 0]
    assert direction_runs(config, [0, 1], workers=1) == runs  # from the cache


def test_documents_sharing_a_person_by_brute_force():
    """Each document's list, redone from the text: the other documents in which one of the world's full names that
    the document contains also appears (the language's names are its people's; no name contains another)."""
    lang = SyntheticLanguage(0)
    documents = lang.documents(120, seed=3, sentences_per_document=3)
    texts = [" ".join(s.text for s in doc) for doc in documents]
    names = [{p.name for p in lang.world.people if f"{p.name} " in text} for text in texts]
    expected = [[j for j in range(len(texts)) if j != d and names[d] & names[j]] for d in range(len(texts))]
    everyone = [[j for j in range(len(texts)) if j != d] for d in range(len(texts))]
    listed = ch04.documents_sharing_a_person(documents)
    assert listed == [e or everyone[d] for d, e in enumerate(expected)]
    assert sum(map(bool, expected)) > 60  # most documents share a person with another


def test_nsp_runs_rows(monkeypatch, tmp_path):
    budget = dict(steps=20, batch_size=8)
    config = ablation_config(**tiny_language(monkeypatch, tmp_path), seeds=(0, 1), table_finetune=budget)
    runs = ch04.nsp_runs(config, [1], workers=1)
    assert list(runs) == list(ch04.NSP_ROWS) and all(len(per_seed) == 1 for per_seed in runs.values())
    seeded = dataclasses.replace(config, pretrain=dataclasses.replace(config.pretrain, seed=1))
    inference_budget = seeded.seeded_finetune_for("inference")
    assert inference_budget.steps == 3 * budget["steps"]

    def accuracies(tokenizer, encoder):
        task = course_language.build_harder_tasks(tokenizer, seeded, names=("inference",))["inference"]
        return [finetune_from(task, encoder, inference_budget, s).scores["accuracy"] for s in seeded.seeds]

    # recomputed: MLM alone is the direction rule's masked LM; MLM + NSP pretrains on same-people negatives
    mlm = synthetic_bert(ch04._with_pretrain(seeded, dict(pairs=None)))
    assert accuracies(mlm.tokenizer, mlm.model.bert) == runs["MLM only"][0]
    assert accuracies(mlm.tokenizer, seeded.pretrain.model) == runs["no pretraining"][0]
    with_nsp = ch04._with_pretrain(seeded, dict(pairs="nsp"))
    data = ch04.same_people_pretraining_data(with_nsp)
    assert data.tokenizer.vocab == mlm.tokenizer.vocab  # the same documents, so the same vocabulary
    nsp = pretrain(with_nsp.pretrain, data=data, progress=False)
    assert accuracies(nsp.tokenizer, nsp.model.bert) == runs["MLM + NSP"][0]
    assert ch04.nsp_runs(config, [1], workers=1) == runs  # from the cache


def test_left_to_right_budgets_match_the_masked_lm(monkeypatch, tmp_path):
    """The counts of one batch, redone by hand: the masked LM predicts about 15% of the real tokens, the
    left-to-right LM every token after the first of each row; the steps give the left-to-right LM the masked
    LM's FLOPs (6 N per token, N its matrices' weights) or its predicted tokens."""
    config = ablation_config(**tiny_language(monkeypatch, tmp_path))
    counts, steps = ch04.predictions_per_step(config), ch04.left_to_right_steps(config)
    no_pairs = ch04._with_pretrain(config, dict(pairs=None))
    batch = course_language.synthetic_pretraining_data(no_pairs).batch(0)
    rows, tokens = batch["input_ids"].shape[0], int(batch["attention_mask"].sum())
    assert counts["left-to-right"] == tokens - rows  # every row starts with [CLS]
    assert 0.1 < counts["masked LM"] / tokens < 0.2
    model, length = config.pretrain.model, batch["input_ids"].shape[1]
    h, v, layers = model.hidden_size, model.vocab_size, model.num_hidden_layers
    encoder = layers * (4 * h * h + 2 * h * model.intermediate_size) + h * h
    attention = 12 * layers * length * h
    by_hand = (6 * (encoder + h * v) + attention) / (6 * (encoder + counts["masked LM"] / tokens * h * v) + attention)
    assert counts["FLOPs ratio"] == pytest.approx(by_hand)
    total = config.pretrain.train.steps
    assert steps == {
        "equal steps": total,
        "equal FLOPs": max(1, round(total / by_hand)),
        "equal predicted tokens": max(1, round(total * counts["masked LM"] / counts["left-to-right"])),
    }


def test_best_left_to_right_tags_is_the_majority_at_the_place_word():
    examples = right_context_entity_examples(SyntheticLanguage(0), 200, seed=1)
    best = best_left_to_right_tags(examples)
    places = [e.tags[3] for e in examples]
    kind = "LOC" if places.count("B-LOC") >= places.count("B-ORG") else "ORG"
    for e, tags in zip(examples, best):
        assert tags[:3] == e.tags[:3] and tags[-1] == "O" and len(tags) == len(e.tags)
        assert tags[3:-1] == [f"B-{kind}"] + [f"I-{kind}"] * (len(tags) - 5)
    # its F1: every person right, and the places or companies of the majority type only, with no extra entity
    right = places.count(f"B-{kind}")
    assert span_f1([e.tags for e in examples], best)["f1"] == pytest.approx(
        (len(examples) + right) / (2 * len(examples))
    )
    with pytest.raises(ValueError, match="fourth word"):
        best_left_to_right_tags([TaggingExample(["Anna", "Berg", "sings", "."], ["B-PER", "I-PER", "O", "O"])])


def test_downstream_scores_fine_tune_left_to_right_through_a_causal_head(monkeypatch, tmp_path):
    config = ablation_config(**tiny_language(monkeypatch, tmp_path), seeds=(0,), table_finetune=TINY_BUDGET)
    bert = synthetic_bert(config)
    tasks = downstream_tasks(bert.tokenizer, config)
    heads = []
    monkeypatch.setattr(
        ch04,
        "finetune_from",
        lambda task, encoder, budget, seed, dropout: (
            heads.append((task.head, seed, dropout)) or SimpleNamespace(scores={"f1": 0.5})
        ),
    )
    assert downstream_scores(tasks, bert.model.bert, config, left_to_right=True) == {name: [0.5] for name in tasks}
    assert {(seed, dropout) for _, seed, dropout in heads} == {(0, config.finetune_dropout)}  # the seed's run
    heads = [head for head, _, _ in heads]
    assert all(
        issubclass(head, BertForTokenClassification) and head.encoder_class is LeftToRightBertModel for head in heads
    )


def test_synthetic_bert_is_cached(monkeypatch, tmp_path):
    config = _tiny(monkeypatch, tmp_path)
    first = synthetic_bert(config)
    second = synthetic_bert(config)
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()))


def test_exercise_1_bert_initialisation_is_three_times_smaller_at_h_64():
    """Exercise 1: with entries of standard deviation 0.02, the layer's output projection maps unit-variance
    vectors to 0.02·√768 ≈ 0.55 at H = 768 and 0.02·√64 = 0.16 at H = 64 (√12 ≈ 3.5 times smaller). Tolerance:
    the sample standard deviation over 4,096 × H values is within 1% of the matrix's, itself within 2%."""
    wide, narrow = initial_sublayer_scale(768, 0.02), initial_sublayer_scale(64, 0.02)
    assert wide == pytest.approx(0.02 * math.sqrt(768), rel=0.03) and round(wide, 2) == 0.55
    assert narrow == pytest.approx(0.16, rel=0.05)
    assert 3 < wide / narrow < 4
    assert initial_sublayer_scale(64, 0.1) == pytest.approx(0.8, rel=0.05)  # the quick profile's 0.1


def test_exercise_2_forty_percent_model_scored_at_fifteen(monkeypatch, tmp_path):
    """Exercise 2: the 40% model is scored on the 15% data's held-out batches (its accuracy at the [MASK] those show,
    recounted here with the full MLM head), and its training batches hold about 0.4/0.15 = 2.7 times the
    predictions of the 15% recipe's."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    tiny = dict(data=dict(vocab_size=300, eval_pairs=64), train=dict(steps=3, batch_size=8, warmup_steps=1))
    fifteen, forty = chapter_config(**tiny), chapter_config(**tiny, objective=dict(mlm_probability=0.4))
    held_out, data_40 = PretrainingData.from_corpus(fifteen), PretrainingData.from_corpus(forty)
    scores = mask_accuracy_on(forty, held_out)
    model = small_pretrained_bert(forty, progress=False).model.eval()
    right = shown = 0
    for batch in held_out.eval_batches():
        with torch.no_grad():
            predicted = model(
                batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
            ).prediction_logits.argmax(-1)
        at_mask = batch["input_ids"] == held_out.tokenizer.mask_token_id
        right += int((predicted[at_mask] == batch["labels"][at_mask]).sum())
        shown += int(at_mask.sum())
    assert scores["mask_accuracy"] == pytest.approx(right / shown)
    selected = [sum(int((d.batch(i)["labels"] != IGNORE_INDEX).sum()) for i in range(8)) for d in (held_out, data_40)]
    assert selected[1] / selected[0] == pytest.approx(0.4 / 0.15, rel=0.1)


def test_exercise_3_another_pretraining_seed_changes_the_pretraining_only(monkeypatch):
    """Exercise 3: `synthetic_config(pretrain=dict(seed=1))` is section 9's recipe with another pretraining seed."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    base, other = synthetic_config(), synthetic_config(pretrain=dict(seed=1))
    assert other.pretrain.seed == 1 != base.pretrain.seed
    assert dataclasses.replace(other, pretrain=dataclasses.replace(other.pretrain, seed=base.pretrain.seed)) == base


def test_exercise_4_deleting_the_selected_positions_shortens_the_rows():
    """Exercise 4: the deletion probe on a worked example: `[CLS] a [MASK] c d [SEP]` with b selected becomes
    `[CLS] a c d [SEP]` (intact: `[CLS] a b c d [SEP]`), scored at a and c shown as themselves."""
    cls, sep, a, b, c, d, mask = 2, 3, 10, 11, 12, 13, 4
    batch = {
        "input_ids": torch.tensor([[cls, a, mask, c, d, sep, 0], [cls, mask, a, sep, 0, 0, 0]]),
        "attention_mask": torch.tensor([[1] * 6 + [0], [1] * 4 + [0] * 3]),
        "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 0], [0] * 7]),
        "labels": torch.tensor([[-100, -100, b, -100, -100, -100, -100], [-100, d, -100, -100, -100, -100, -100]]),
    }
    deleted = gap_neighbour_probe(batch, [0, 1, cls, sep, mask])
    assert deleted["input_ids"].tolist() == [[cls, a, c, d, sep, 0, 0], [cls, a, sep, 0, 0, 0, 0]]
    assert deleted["attention_mask"].tolist() == [[1] * 5 + [0] * 2, [1] * 3 + [0] * 4]
    assert deleted["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 0, 0], [0] * 7]
    assert deleted["labels"].tolist() == [[-100, a, c, -100, -100, -100, -100], [-100, a] + [-100] * 5]
    intact = gap_neighbour_probe(batch, [0, 1, cls, sep, mask], delete=False)
    assert intact["input_ids"].tolist() == [[cls, a, b, c, d, sep, 0], [cls, d, a, sep, 0, 0, 0]]
    assert intact["labels"].tolist() == [[-100, a, -100, c, -100, -100, -100], [-100, -100, a, -100, -100, -100, -100]]


def test_exercise_5_mean_of_last_four_layers_narrows_the_sense_gap(minilm):
    """Exercise 5 with all-MiniLM-L6-v2 run by `transformers`: same sense against other sense, last layer 0.85
    against 0.75 (gap 0.10), mean of the last four layers 0.92 against 0.83 (gap 0.08); the cosines are
    recomputed with `torch.nn.functional.cosine_similarity`."""
    import transformers

    tokenizer = transformers.BertTokenizer.from_pretrained(minilm)
    encoder = transformers.BertModel.from_pretrained(minilm).eval()
    sentences = list(BANK_SENTENCES)
    encoded = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        layers = torch.stack(encoder(**encoded, output_hidden_states=True).hidden_states)  # (L + 1, S, T, H)
    position = (encoded["input_ids"] == tokenizer.convert_tokens_to_ids("bank")).int().argmax(1)
    vectors = layers[:, torch.arange(6), position]  # (L + 1, S, H)
    found = []
    for v in (vectors[-1], vectors[-4:].mean(0)):
        within, across = sense_similarities(v, [0, 0, 0, 1, 1, 1])
        cos = torch.nn.functional.cosine_similarity(v[:, None], v[None, :], dim=-1)
        assert within == pytest.approx(float((cos[:3, :3].sum() - 3 + cos[3:, 3:].sum() - 3) / 12), abs=1e-5)
        assert across == pytest.approx(float(cos[:3, 3:].mean()), abs=1e-5)
        found.append((round(within, 2), round(across, 2), round(within - across, 2)))
    assert found == [(0.85, 0.75, 0.10), (0.92, 0.83, 0.08)]


def test_exercise_6_bert_base_is_about_20_h100_hours():
    """Exercise 6: 2.9e19 FLOPs; at 990 TFLOP/s and 40%, 20.3 H100-hours, 14 kWh at 700 W (22.5 with a PUE of
    1.58), against section 13's 215 V100-hours (125 TFLOP/s at 30%): about ten times fewer. The FLOPs are checked
    against 6N per token plus attention's 12·L·T·H, with N the weights of BERT-base's matrix products counted here."""
    flops = bert_base_pretraining_flops()
    L, H, V, inner = 12, 768, 30522, 3072
    n = L * (4 * H * H + 2 * H * inner) + H * H + H * V  # layers, the MLM transform, the tied output layer
    assert flops == pytest.approx(
        sum((6 * n + 12 * L * t * H) * tokens for t, tokens in ((128, 0.9e6 * 256 * 128), (512, 0.1e6 * 256 * 512))),
        rel=0.02,
    )
    assert round(flops / 1e19, 1) == 2.9
    hours, kwh = gpu_hours_and_kwh(flops, 990e12, 0.4, 700)
    assert (round(hours, 1), round(kwh)) == (20.3, 14)
    assert round(gpu_hours_and_kwh(flops, 990e12, 0.4, 700, 1.58)[1], 1) == 22.5
    v100_hours = gpu_hours_and_kwh(flops, 125e12, 0.30, 300, 1.58)[0]
    assert round(v100_hours) == 215 and 9.5 < v100_hours / hours < 11


def test_the_chapters_jobs_are_every_run_sections_8_and_9_read_each_model_pretrained_first(monkeypatch):
    """:func:`train_bert_pretraining_runs` trains, in one pool, what sections 8 and 9 then read from the cache: the
    calls their functions make as the notebook makes them. A run that only fine-tunes a model comes after the run
    that pretrains it, so that a worker does not wait on another's model."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.delenv("LECTURE_SEEDS", raising=False)
    made = [(ch04._masking_ablation, ch04.masking_ablation_call(ch04.ablation_config()))]

    def compute_all(fn, calls, **kwargs):
        made.extend((fn, tuple(call)) for call in calls)
        return [{"accuracy": 0.0, "guess": 0.0} for _ in calls]

    monkeypatch.setattr(ch04, "compute_all", compute_all)
    config = ch04.synthetic_config()
    ch04.masking_schedules(), ch04.schedule_downstream(), ch04.pretraining_ablations(config)
    ch04.direction_runs(config), ch04.nsp_runs(config)

    def names(jobs):
        return {(fn.__qualname__, fn.cache_name(*call)) for fn, call in jobs}

    jobs = ch04.bert_pretraining_jobs(config)
    assert names(jobs) == names(made)

    def at(fn, row=lambda call: True):
        return [i for i, (f, call) in enumerate(jobs) if f is fn and row(call)]

    def seed(call):
        return call[0].pretrain.seed

    # each run that reads a model comes after the run that pretrains it
    assert max(at(ch04._schedule_run)) < min(at(ch04._schedule_f1))
    for s in config.seeds:
        masked = at(ch04._direction_row, lambda c: seed(c) == s and c[1] == "masked")
        readers = at(ch04._direction_row, lambda c: seed(c) == s and c[1] is None)
        readers += at(ch04._nsp_row, lambda c: seed(c) == s and c[1] != "MLM + NSP")
        assert len(masked) == 1 and masked[0] < min(readers)
    no_nsp_rows = at(ch04._table_row, lambda c: c[0].pretrain.objective.pairs is None)
    assert max(at(ch04._direction_row, lambda c: seed(c) == 0 and c[1] is not None)) < min(no_nsp_rows)
    bert_row = at(ch04._table_row, lambda c: c[0] == config and c[1] == "masked")
    assert bert_row[0] < min(at(ch04._table_row, lambda c: c[1] is None))
