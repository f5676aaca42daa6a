"""Chapter 11's glue: the gold labels each probe reads (the contextual ones checked against the grammar by
brute force), the held-out word types, the knowledge text and its further pretraining, the random twin, and the
structural scores on vectors that hold the gold trees by construction."""

import inspect
import random

import pytest
import torch

from lecture_lib.analysis.word_vectors import word_vectors
from lecture_lib.chapters.ch11_bertology_probing import (
    KNOWLEDGE_FREQUENCIES,
    QUICK,
    ROLES,
    SEMANTIC_EDGE_TASKS,
    SYNTACTIC_EDGE_TASKS,
    Chapter11Config,
    agreement_sentences,
    attractor_run,
    attractor_text,
    attractor_training,
    attractors,
    course_bert_jobs,
    edge_probing,
    further_pretrain,
    held_out_probes,
    held_out_subjects,
    held_out_types,
    knowledge_probing,
    knowledge_run,
    knowledge_text,
    layerwise_probing,
    minilm_probe_jobs,
    name_pieces,
    nearest_noun_agrees,
    pairs_out_of_order,
    probe_at_layer,
    random_twin,
    span_batch,
    structural_probing,
    structural_scores,
    task_data,
    treebank,
    word_labels,
    word_type_baseline,
)
from lecture_lib.data.synthetic import ADJECTIVES, ANIMATE_NOUNS, PLACE_ADJECTIVES, SyntheticLanguage
from lecture_lib.data.treebank import edge_examples
from lecture_lib.models.bert import BertConfig, BertForPreTraining, BertModel
from lecture_lib.runtime import seed_of
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


def tiny_mlm_bert(vocab_size: int) -> BertForPreTraining:
    """A one-layer BERT with its MLM head, width 16, in eval mode, the same weights every call."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    return BertForPreTraining(config).eval()


@pytest.fixture(scope="module")
def sentences():
    return SyntheticLanguage(0).sentences(80, seed=5)


def test_word_labels_and_task_data_follow_the_gold_annotation(sentences):
    s = sentences[0]
    assert word_labels(s, "pos") == list(enumerate(s.pos))
    assert word_labels(s, "deprel") == list(enumerate(s.deprels))
    assert word_labels(s, "entity") == list(enumerate(s.entities))
    assert word_labels(s, "negated") == [(s.heads.index(0), str(s.negated))]
    with pytest.raises(ValueError, match="unknown probing task"):
        word_labels(s, "sentiment")
    vectors = [torch.arange(3 * len(t) * 2.0).reshape(3, len(t), 2) for t in sentences[:2]]
    layers, labels, words = task_data(vectors, sentences[:2], "deprel")
    assert len(layers) == 3 and layers[1].shape == (len(sentences[0]) + len(sentences[1]), 2)
    assert labels == sentences[0].deprels + sentences[1].deprels
    assert words[0] == sentences[0].words[0].lower()
    torch.testing.assert_close(layers[2][len(sentences[0])], vectors[1][2, 0])


def test_attractors_count_nouns_of_the_other_number_between_subject_and_verb(sentences):
    checked = 0
    for s in sentences:
        for a in s.agreement:
            other = "Sing" if a.plural else "Plur"
            expected = [i for i in range(a.subject + 1, a.verb) if s.number[i] == other and s.pos[i] != "VERB"]
            assert attractors(s, a) == len(expected)
            checked += bool(expected)
    assert checked > 0  # the sample holds sentences with attractors


@pytest.fixture(scope="module")
def many_sentences():
    return SyntheticLanguage(0).sentences(1500, seed=7)


def test_the_role_task_labels_every_noun_and_name_head_with_its_role(many_sentences):
    for s in many_sentences:
        expected = []
        for i in range(len(s)):
            is_name_start = s.pos[i] == "PROPN" and s.entities[i].startswith("B-")
            if (s.pos[i] == "NOUN" or is_name_start) and s.deprels[i] in ROLES:
                expected.append((i, s.deprels[i]))
        assert word_labels(s, "role") == expected


def test_the_number_task_reads_the_number_a_neutral_word_agrees_with(many_sentences):
    """Brute force: `the` and an adjective agree with the noun they sit before (the first noun to their right),
    a copula's adjective with its copula (is/are), a relative word with the noun just before the relative
    clause; and every such word type occurs with both numbers, so the type cannot decide the label."""
    seen = {}
    for s in many_sentences:
        expected = []
        for i, (word, pos, label) in enumerate(zip(s.words, s.pos, s.deprels)):
            if (word == "the" and label == "det") or (pos == "ADJ" and label == "amod"):
                noun = next(j for j in range(i + 1, len(s)) if s.pos[j] == "NOUN")
                expected.append((i, s.number[noun]))
            elif pos == "ADJ" and label == "root":
                copula = next(j for j in range(i) if s.deprels[j] == "cop")
                expected.append((i, {"is": "Sing", "are": "Plur"}[s.words[copula]]))
            elif word in ("who", "that") or (label == "acl:relcl" and not s.number[i]):
                start = next(j for j in range(i, -1, -1) if s.words[j] in ("who", "that"))
                expected.append((i, s.number[start - 1]))
        assert word_labels(s, "number") == expected, s.conllu()
        for i, label in expected:
            seen.setdefault(s.words[i].lower(), set()).add(label)
    assert seen["the"] == seen["who"] == {"Sing", "Plur"}
    adjectives = set(ADJECTIVES) | set(PLACE_ADJECTIVES)
    assert sum(seen[a] == {"Sing", "Plur"} for a in adjectives if a in seen) >= 0.9 * len(adjectives)


def test_the_word_type_baseline_answers_each_word_with_its_types_most_frequent_training_label(many_sentences):
    from collections import Counter

    train, test = many_sentences[:1000], many_sentences[1000:]
    for task in ("pos", "role", "number"):
        by_type = {}
        for s in train:
            for i, label in word_labels(s, task):
                by_type.setdefault(s.words[i].lower(), Counter())[label] += 1
        fallback = Counter(label for s in train for _, label in word_labels(s, task)).most_common(1)[0][0]
        right = [
            label == (by_type[s.words[i].lower()].most_common(1)[0][0] if s.words[i].lower() in by_type else fallback)
            for s in test
            for i, label in word_labels(s, task)
        ]
        assert word_type_baseline(train, test, task) == pytest.approx(sum(right) / len(right))
    assert word_type_baseline(train, test, "pos") > 0.95 > 0.7 > word_type_baseline(train, test, "number")


def test_agreement_sentences_fill_every_attractor_bucket(many_sentences):
    config = Chapter11Config(**{**QUICK, "agreement_per_bucket": 40})
    sentences = agreement_sentences(config, seed=0)
    counts = [attractors(s, s.agreement[-1]) for s in sentences]
    assert counts == [k for k in range(config.attractor_chain + 1) for _ in range(40)]
    for s in sentences:
        assert [h for h in s.heads].count(0) == 1 and len({len(x) for x in (s.words, s.heads, s.number)}) == 1


def test_agreement_sentences_test_the_copula_on_the_subjects_given():
    config = Chapter11Config(**{**QUICK, "agreement_per_bucket": 30})
    subjects = held_out_subjects(config, seed=1)
    nouns = {form for pair in subjects for form in pair}
    for s in agreement_sentences(config, seed=1, subjects=subjects):
        agreement = s.agreement[-1]
        assert s.words[agreement.verb] in ("is", "are") and s.words[agreement.subject] in nouns


def test_the_nearest_noun_is_right_exactly_when_no_attractor_sits_last_before_the_verb():
    language = SyntheticLanguage(0)
    rng = random.Random(0)
    for count in range(3):
        for _ in range(30):
            s = language.attractor_sentence(rng, count, chain=2)
            agreement = s.agreement[-1]
            last = max(i for i in range(agreement.verb) if s.pos[i] == "NOUN")
            expected = s.number[last] == s.number[agreement.subject]
            assert nearest_noun_agrees(s, agreement) == expected
            assert expected or count > 0  # without an attractor the heuristic is always right
            assert not expected or count < 2  # with two of two it is always wrong


def test_the_attractor_text_leaves_the_held_out_subjects_out_and_defeats_the_nearest_noun():
    config = Chapter11Config(**QUICK)
    held_out = held_out_subjects(config, seed=0)
    assert len(held_out) == round(len(ANIMATE_NOUNS) / 3) and held_out != held_out_subjects(config, seed=1)
    text = attractor_text(config, seed=0)
    held_forms = {form for pair in held_out for form in pair}
    assert len(text) == config.attractor_text_sentences
    assert not any(s.words[s.agreement[-1].subject] in held_forms for s in text)
    attracted = sum(attractors(s, s.agreement[-1]) > 0 for s in text) / len(text)
    nearest = sum(nearest_noun_agrees(s, s.agreement[-1]) for s in text) / len(text)
    assert attracted == pytest.approx(7 / 18, abs=0.03) and nearest == pytest.approx(2 / 3, abs=0.03)
    assert text[0].words == attractor_text(config, seed=0)[0].words  # seeded


def test_held_out_types_leave_a_share_of_the_types_out_and_the_control_falls_to_chance():
    words = [f"w{i % 30}" for i in range(600)]
    unseen = held_out_types(words, seed=0)
    assert len(unseen) == 10 and unseen == held_out_types(words, seed=0) != held_out_types(words, seed=1)
    # vectors that hold the label (first coordinate) and the word's identity (a random vector per type): the
    # task generalises to unseen types, the control (a label per type) cannot
    g = torch.Generator().manual_seed(0)
    labels = [str(int(x)) for x in torch.randint(2, (600,), generator=g)]
    identity = torch.randn(30, 8, generator=g)[[i % 30 for i in range(600)]]
    x = torch.cat([torch.tensor([[float(y)] for y in labels]) * 3, identity, torch.randn(600, 4, generator=g)], 1)
    config = Chapter11Config(**QUICK)
    out = held_out_probes(
        ([x[:400]], labels[:400], words[:400]), ([x[400:]], labels[400:], words[400:]), "toy", config, "toy", seed=0
    )
    [layer] = out["layers"]
    assert out["test_words"] == sum(w in held_out_types(words, seed_of("toy", 0)) for w in words[400:])
    assert layer["accuracy"] > 0.95 and layer["control"] < 0.75 and layer["selectivity"] > 0.25, out


def test_pairs_out_of_order_count_ties_across_tiers_and_allow_them_within_one():
    """The pipeline's tiers pos < deprel < role ≈ number: a tie within the last tier is allowed, a tie or a
    drop across tiers breaks the order (five pairs cross tiers)."""
    assert pairs_out_of_order({"pos": 0, "deprel": 1, "role": 3, "number": 3}) == 0
    assert pairs_out_of_order({"pos": 2, "deprel": 2, "role": 3, "number": 3}) == 1
    assert pairs_out_of_order({"pos": 4, "deprel": 3, "role": 2, "number": 1}) == 5


def test_the_knowledge_text_states_each_fact_as_often_as_its_bucket_says():
    config = Chapter11Config(**QUICK, knowledge_people=3)
    facts, text = knowledge_text(config, seed=0)
    assert list(facts) == list(KNOWLEDGE_FREQUENCIES) and all(len(f) == 6 for f in facts.values())
    stated = [s.fact for s in text if s.fact is not None]
    for bucket, told in facts.items():
        for fact in told:
            assert stated.count(fact) == KNOWLEDGE_FREQUENCIES[bucket]
    assert not any(s.negated for s in text if s.fact is not None)  # the text never negates a fact
    assert len(text) - len(stated) == round(config.knowledge_free * len(stated))
    assert knowledge_text(config, seed=0)[1] == text


def test_name_pieces_find_every_name_and_further_pretraining_leaves_the_model_alone():
    language = SyntheticLanguage(0)
    sentences = language.sentences(40, seed=3)
    tokenizer = WordPieceTokenizer.train([s.text for s in sentences], vocab_size=120)
    for s in sentences:
        ids, names = name_pieces(tokenizer, s)
        assert ids == tokenizer.frame(tokenizer.encode(s.text))[0]
        expected = [
            " ".join(
                s.words[i]
                for i in range(len(s))
                if s.entities[i] != "O" and sum(t.startswith("B-") for t in s.entities[: i + 1]) == k + 1
            ).lower()
            for k in range(sum(t.startswith("B-") for t in s.entities))
        ]
        assert [tokenizer.decode([ids[p] for p in name]) for name in names] == expected
    model = tiny_mlm_bert(len(tokenizer.vocab))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trained = further_pretrain(model, tokenizer, sentences, seed=0, steps=3, batch=4, lr=1e-3)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert not trained.training and not torch.equal(
        trained.state_dict()[next(iter(before))], before[next(iter(before))]
    )


def test_an_attractor_run_scores_the_model_before_and_after_on_the_same_sentences(monkeypatch, tmp_path):
    """One seed of attractor_training on a tiny BERT: per number of attractors, the untrained model's rates
    (recomputed here by hand from form_preference), the trained model's, the heuristic's; cached, and read back."""
    from lecture_lib.analysis.cloze import form_preference
    from lecture_lib.data.synthetic import OTHER_NUMBER

    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    config = Chapter11Config(
        **{**QUICK, "agreement_per_bucket": 6, "attractor_text_sentences": 40, "attractor_steps": 3}
    )
    text = attractor_text(config, seed=0)
    tokenizer = WordPieceTokenizer.train([s.text for s in text] + ["is are"], vocab_size=150)
    model = tiny_mlm_bert(len(tokenizer.vocab))
    run = attractor_run(model, tokenizer, config, 0)
    test = agreement_sentences(config, 0, held_out_subjects(config, 0))
    by_hand = [[], [], []]
    for s in test:
        a = s.agreement[-1]
        by_hand[attractors(s, a)].append(
            form_preference(model, tokenizer, s.words, a.verb, OTHER_NUMBER[s.words[a.verb]]) > 0
        )
    assert run["before"] == pytest.approx([sum(r) / len(r) for r in by_hand])
    assert run["nearest"] == [1.0, run["nearest"][1], 0.0] and len(run["after"]) == len(run["seen"]) == 3
    assert sorted(run["held_out"]) == sorted(singular for singular, _ in held_out_subjects(config, 0))
    assert attractor_run.is_cached(model, tokenizer, config, 0) and attractor_run(model, tokenizer, config, 0) == run


def test_the_random_twin_is_seeded_fresh_and_leaves_the_global_generator_alone():
    model = BertModel(
        BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    )
    state = torch.random.get_rng_state()
    a, b, c = random_twin(model, 0), random_twin(model, 0), random_twin(model, 1)
    assert torch.equal(torch.random.get_rng_state(), state)
    w = "encoder.layer.0.attention.self.query.weight"
    assert torch.equal(a.state_dict()[w], b.state_dict()[w]) and not torch.equal(a.state_dict()[w], c.state_dict()[w])
    assert not torch.equal(a.state_dict()[w], model.state_dict()[w])


def test_the_pools_jobs_are_the_entries_that_the_sections_read(monkeypatch):
    """train_chapter_runs trains in a pool what the sections then read: its jobs name the entries of the
    sections' calls, written here as the notebook writes them (keywords, vectors given or not), each once; the
    further pretraining is attractor_training's and knowledge_probing's own."""
    from lecture_lib.pretraining import PretrainResult

    config = Chapter11Config(**QUICK)
    train, test = treebank(config)
    tokenizer = WordPieceTokenizer.train([" ".join(s.words) for s in train + test], vocab_size=300)
    minilm = BertModel(
        BertConfig(
            vocab_size=len(tokenizer.vocab),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    ).eval()
    twin = random_twin(minilm, config.seed)
    vectors = tuple(word_vectors(minilm, tokenizer, [s.words for s in split]) for split in (train, test))
    jobs = minilm_probe_jobs(minilm, tokenizer, vectors, config)
    names = [fn.cache_name(*call) for fn, call in jobs]
    mixed = (*SYNTACTIC_EDGE_TASKS, *SEMANTIC_EDGE_TASKS)
    sections = [
        layerwise_probing.cache_name("minilm", minilm, tokenizer, config, vectors=([], [])),
        layerwise_probing.cache_name("random-minilm", twin, tokenizer, config),
        structural_probing.cache_name("minilm", minilm, tokenizer, config, rank_sweep=True),
        edge_probing.cache_name("minilm", minilm, tokenizer, config),
        edge_probing.cache_name(
            "random-minilm", twin, tokenizer, config, tasks=("negation", "coreference"), sweep=False
        ),
        *(
            fn.cache_name(name, model, tokenizer, config, **kwargs, seed=seed)
            for seed in config.seeds
            for fn, name, model, kwargs in (
                (structural_probing, "minilm", minilm, dict(rank_sweep=True)),
                (edge_probing, "minilm", minilm, dict(tasks=mixed, sweep=False)),
                (edge_probing, "random-minilm", twin, dict(tasks=mixed, sweep=False)),
            )
        ),
    ]
    assert sorted(names) == sorted(set(sections)) == sorted(set(names))
    given = [call[list(inspect.signature(fn).parameters).index("vectors")] for fn, call in jobs]
    assert [v is vectors for v in given] == [call[1] is minilm for _, call in jobs]  # the twin computes its own
    assert all(v is None for v, (_, call) in zip(given, jobs) if call[1] is not minilm)

    course = PretrainResult(tiny_mlm_bert(len(tokenizer.vocab)), tokenizer, None, None)
    built = {fn: [] for fn in (attractor_run, knowledge_run)}
    for fn, call in course_bert_jobs(course, config)[: 2 * len(config.seeds)]:
        built[fn].append(fn.cache_name(*call))
    read = {}
    monkeypatch.setattr(
        "lecture_lib.chapters.ch11_bertology_probing.compute_all",
        lambda fn, calls, **kwargs: read.setdefault(fn, [fn.cache_name(*call) for call in calls]),
    )
    attractor_training(course, config), knowledge_probing(course, config)
    assert read == built and len(set(read[attractor_run])) == len(config.seeds)


def tree_vectors(sentence, g):
    """Word i at the sum of one direction per edge on its path to the root (so squared distances are tree
    distances and squared norms depths), then noise coordinates."""
    position = torch.zeros(len(sentence), 32)
    for i in range(len(sentence)):
        w = i
        while sentence.heads[w]:
            position[i, w] += 1
            w = sentence.heads[w] - 1
    return torch.cat([position, torch.randn(len(sentence), 8, generator=g)], -1)


def test_structural_scores_find_the_trees_that_the_vectors_hold(sentences):
    g = torch.Generator().manual_seed(0)
    short = [s for s in sentences if len(s) <= 32]
    vectors = [tree_vectors(s, g) for s in short]
    scores = structural_scores(vectors[:50], vectors[50:], short[:50], short[50:], rank=32, steps=300, seed=0)
    assert scores["uuas"] > 0.95 and scores["root"] > 0.9
    assert scores["dspr"] > 0.9 and scores["nspr"] > 0.9
    assert len(scores["trees"]) == min(10, len(short) - 50)


def test_sense_measures_cover_every_word_and_layer(minilm):
    from lecture_lib.chapters.ch11_bertology_probing import sense_measures
    from lecture_lib.tokenization.wordpiece import WordPieceTokenizer

    model = BertModel.from_pretrained(minilm)
    measures, baseline = sense_measures(model, WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt"), seed=0)
    assert set(measures) == {"bank", "play", "restrain"} and len(baseline) == 7
    for m in measures.values():
        assert len(m.knn) == len(m.self_similarity) == 7 and m.majority == 0.5
        assert m.adjusted == pytest.approx([s - b for s, b in zip(m.self_similarity, baseline)])


def test_span_batch_stacks_the_sentences_and_shifts_their_spans(sentences):
    vectors = [
        torch.arange(len(s), dtype=torch.float).expand(3, len(s))[..., None] + 100 * i for i, s in enumerate(sentences)
    ]  # (layers, W, 1): the word's index, plus 100 x the sentence's
    batch, labels = span_batch(vectors, sentences, "relation")
    facts = [i for i, s in enumerate(sentences) if s.fact]
    assert batch.words.shape == (3, sum(len(sentences[i]) for i in facts), 1)
    assert labels == [sentences[i].fact.relation for i in facts]
    for (subject, obj), i in zip(batch.spans.tolist(), facts):
        [(((a, b), (c, e)), _)] = edge_examples(sentences[i], "relation")
        assert batch.words[0, subject[0] : subject[1], 0].tolist() == [100 * i + w for w in range(a, b)]
        assert batch.words[0, obj[0] : obj[1], 0].tolist() == [100 * i + w for w in range(c, e)]


@pytest.fixture(scope="module")
def minilm_treebank(minilm):
    """MiniLM's word vectors of the quick profile's treebank (300 training, 150 test sentences): ~2 s."""

    config = Chapter11Config(**QUICK)  # the quick profile's sizes, whatever LECTURE_PROFILE says
    model, tokenizer = (
        BertModel.from_pretrained(minilm).eval(),
        WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt"),
    )
    sentences = treebank(config)
    with torch.no_grad():
        vectors = tuple(word_vectors(model, tokenizer, [s.words for s in split]) for split in sentences)
    return vectors, sentences, config


def test_exercise_1_a_rank_2_probe_keeps_negation_and_loses_the_many_class_tasks(minilm_treebank):
    """Exercise 1: at layer 3, rank 2 keeps negated (2 classes) at 0.97 against 0.98; pos (12 classes) falls
    from 1.00 to 0.93 and deprel (about twenty) from 0.96 to 0.78."""
    vectors, sentences, config = minilm_treebank
    classes = {task: len(set(task_data(vectors[0], sentences[0], task)[1])) for task in ("negated", "pos", "deprel")}
    assert classes["negated"] == 2 and 10 <= classes["pos"] <= 14 and 17 <= classes["deprel"] <= 24, classes
    full, low = (
        {task: probe_at_layer(vectors, sentences, task, 3, config, rank=rank).accuracy for task in classes}
        for rank in (None, 2)
    )
    assert full["negated"] - low["negated"] < 0.02 and low["negated"] > 0.95, (full, low)
    assert 0.03 < full["pos"] - low["pos"] < 0.12, (full, low)  # 7 points
    assert 0.12 < full["deprel"] - low["deprel"] < 0.25, (full, low)  # 18 points: the largest loss
    assert abs(low["pos"] - 0.93) < 0.03 and abs(low["deprel"] - 0.78) < 0.04, low


def test_exercise_2_longer_training_lifts_the_control_and_lowers_the_selectivity(minilm_treebank):
    """Exercise 2: deprel at layer 3 for 30, 100, 400 steps: the task stays at 0.96 while the control climbs
    0.90 -> 0.94 -> 0.96, so the selectivity falls from about 6 points to under 1."""
    vectors, sentences, config = minilm_treebank
    scores = [probe_at_layer(vectors, sentences, "deprel", 3, config, steps=steps) for steps in (30, 100, 400)]
    assert all(abs(s.accuracy - 0.96) < 0.015 for s in scores), scores
    assert scores[0].control + 0.02 < scores[1].control < scores[2].control, scores
    assert abs(scores[0].control - 0.90) < 0.02 and abs(scores[2].control - 0.96) < 0.015, scores
    assert scores[0].selectivity > 0.04 > 0.015 > scores[2].selectivity, scores


def test_exercise_3_rank_8_holds_nearly_the_whole_tree(minilm_treebank):
    """Exercise 3: the distance probe at MiniLM's best layer (3, section 4's sweep) reaches UUAS 0.91 at rank 8
    against 0.95 at rank 64, about 4 points below."""
    (train_vectors, test_vectors), (train, test), config = minilm_treebank
    uuas = {
        rank: structural_scores(
            [v[3] for v in train_vectors],
            [v[3] for v in test_vectors],
            train,
            test,
            rank,
            config.structural_steps,
            seed_of(config.seed, 3, rank),
            depth=False,
        )["uuas"]
        for rank in (8, 64)
    }
    assert abs(uuas[8] - 0.91) < 0.02 and abs(uuas[64] - 0.95) < 0.02 and 0.01 < uuas[64] - uuas[8] < 0.07, uuas


def test_the_config_refuses_sizes_that_cannot_run_and_takes_the_claims_seeds(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "3,4,5")
    assert Chapter11Config(**QUICK).seeds == (3, 4, 5)
    with pytest.raises(ValueError, match="edge_train_sentences: expected at most train_sentences"):
        Chapter11Config(**{**QUICK, "edge_train_sentences": QUICK["train_sentences"] + 1})
    with pytest.raises(ValueError, match="probe_steps: expected a whole number >= 1, got 0"):
        Chapter11Config(**{**QUICK, "probe_steps": 0})
    with pytest.raises(ValueError, match="held_out: expected a share"):
        Chapter11Config(**QUICK, held_out=1.0)
