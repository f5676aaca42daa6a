"""lecture_lib.chapters.ch09_t5_bart: the text-to-text framing, the bias curves
against the model's own table, and the experiment's plumbing on a tiny recipe."""

import pytest
import torch

from lecture_lib.chapters import ch09_t5_bart
from lecture_lib.chapters.ch09_t5_bart import (
    ANSWER_TASKS,
    CHECKS,
    CLAIMS,
    TASKS,
    TextToTextData,
    bart_corrupt,
    bias_by_offset,
    chapter_config,
    cross_attention_ratio,
    gains_in_standard_errors,
    hidden_word_accuracy,
    hidden_words,
    mass_style,
    mass_style_lengths,
    mean_task_score,
    most_frequent_answers,
    noise_at_the_end,
    noising_runs,
    objective_runs,
    pack,
    pretrain_then_finetune,
    row_run,
    span_corruption_lengths,
    text_to_text,
    tiny_bart,
    tiny_t5,
    unseen_names_written,
)
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.tasks import qa_examples
from lecture_lib.objectives.span_corruption import random_spans_noise_mask, span_corrupt, span_counts
from lecture_lib.objectives.text_to_text import NUM_SENTINELS, SPECIALS, batch_of


def test_every_task_is_prefixed_text_with_a_text_answer():
    lang = SyntheticLanguage(0)
    prefixes = {"acceptability": "acceptability:", "entailment": "premise:", "question": "question:", "facts": "facts:"}
    for task in TASKS:
        for inputs, target in text_to_text(lang, task, 20, seed=4, people=lang.world.people):
            assert inputs[0] == prefixes[task] and target
    qa = qa_examples(lang, 5, 4, lang.world.people)
    assert [t for _, t in text_to_text(lang, "question", 5, 4, lang.world.people)] == [e.answer.split() for e in qa]
    facts = text_to_text(lang, "facts", 50, seed=4, people=lang.world.people)
    assert {t[0] for _, t in facts} == {"lives_in", "works_for"}
    assert all(set(t[1:]) <= set(i) for i, t in facts)  # the triple names what the sentence names


def test_bias_curves_read_the_models_table():
    model = tiny_t5(chapter_config(), 50)
    curves = bias_by_offset(model, range(-3, 4))
    table = model.encoder.position_bias().weight
    assert torch.allclose(torch.tensor(curves["encoder"])[:, 3], table[0])  # offset 0 -> bucket 0
    assert torch.allclose(torch.tensor(curves["encoder"])[:, 4], table[17])  # offset +1 -> bucket 16 + 1
    assert torch.allclose(torch.tensor(curves["decoder"])[:, 0], model.decoder.position_bias().weight[3])


def test_the_experiment_runs_every_objective_on_a_tiny_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    recipe = chapter_config(
        pretrain=dict(steps=2, batch_size=4),
        finetune=dict(steps=2, batch_size=4),
        train_examples=20,
        eval_examples=4,
        documents=30,
        objectives=("drop_tokens", "random_spans"),
        seeds=(0, 1),
        probe_documents=8,
    )
    results = objective_runs(recipe)
    assert set(results["runs"]) == {"no pretraining", "drop_tokens", "random_spans"}
    assert results["runs"]["no pretraining"]["pretrain_loss"] is None
    for run in results["runs"].values():
        assert len(run["seed_scores"]) == 2 and all(set(s) == set(TASKS) for s in run["seed_scores"])
        assert run["scores"] == {t: (run["seed_scores"][0][t] + run["seed_scores"][1][t]) / 2 for t in TASKS}
        assert mean_task_score(run) == [sum(s.values()) / len(TASKS) for s in run["seed_scores"]]
    assert len(results["bias"]["encoder"]) == recipe.num_heads and len(results["offsets"]) == 81
    assert "probe" not in results["runs"]["no pretraining"]
    for name in ("drop_tokens", "random_spans"):
        probe = results["runs"][name]["probe"]
        assert set(probe) == {"accuracy", "unigram", "per_text"} and 0 <= probe["accuracy"] <= 1
    assert all(len(run["names_written"]) == 2 for run in results["runs"].values())
    assert objective_runs(recipe) == results  # read back from the cache
    bart = noising_runs(recipe)["runs"]
    assert set(bart) == set(recipe.noisings) and all(run["pretrain_loss"] is not None for run in bart.values())
    assert all(len(run["seed_scores"]) == 2 for run in bart.values())


def test_a_table_job_refuses_a_family_it_does_not_know():
    with pytest.raises(ValueError, match="expected the family 't5' or 'bart', got 'gpt'"):
        row_run.__wrapped__(chapter_config(documents=30, train_examples=20, eval_examples=4), "gpt", "prefix_lm", (0,))


def test_rolled_random_spans_put_noise_at_the_end_as_often_as_anywhere():
    texts = [["w"] * length for length in range(16, 37)] * 60  # 1,260 texts of the documents' lengths
    unrolled, rolled = (noise_at_the_end(texts, random_roll=roll) for roll in (False, True))
    assert unrolled["at_end"] == 1.0  # the mask always ends with noise
    assert unrolled["one_span"] == sum(span_counts(len(t))[1] == 1 for t in texts) / len(texts)  # 16 to 30 words
    expected = sum(span_counts(len(t))[0] / len(t) for t in texts) / len(texts)  # n_noise / L, by brute force
    assert unrolled["uniform"] == rolled["uniform"] == pytest.approx(expected)
    assert abs(rolled["at_end"] - expected) < 3 * (expected * (1 - expected) / len(texts)) ** 0.5
    shares = torch.zeros(20)  # rolled, every position of a 20-word text is noise equally often: 3 / 20
    for seed in range(2000):
        shares += random_spans_noise_mask(20, generator=torch.Generator().manual_seed(seed), random_roll=True)
    assert (shares / 2000 - 0.15).abs().max() < 0.04  # 4.7 standard errors of 0.008, over 20 positions


def test_pack_cuts_the_stream_into_full_rows():
    docs = [[f"d{i}w{j}" for j in range(n)] for i, n in enumerate((5, 7, 3, 9))]
    rows = pack(docs, 7)
    assert [w for row in rows for w in row] == [w for d in docs for w in d][:21] and {len(r) for r in rows} == {7}
    with pytest.raises(ValueError, match="at least 2"):
        pack(docs, 1)


def test_tiny_bart_is_initialised_at_the_scale_of_its_width():
    recipe = chapter_config(d_model=64, d_ff=256)
    default, bart_own = tiny_bart(recipe, 500), tiny_bart(chapter_config(bart_init_std=0.02), 500)
    for model, std in ((default, 64**-0.5), (bart_own, 0.02)):
        assert model.model.shared.weight.std().item() == pytest.approx(std, rel=0.05)
        assert model.model.encoder.layers[0].ffn.fc1.weight.std().item() == pytest.approx(std, rel=0.05)


def test_bart_corruptions_compose():
    doc = "a b c . d e . f g h i .".split()
    g = torch.Generator().manual_seed(0)
    both = bart_corrupt("text_infilling+sentence_permutation", doc, g)
    assert "<M>" in both and set(both) - {"<M>"} <= set(doc)
    assert bart_corrupt("document_rotation", doc, torch.Generator().manual_seed(1)) != doc
    with pytest.raises(ValueError, match="joined by"):
        bart_corrupt("shuffle", doc, g)


def test_exercise_3_mass_style_writes_the_whole_text_from_15_percent_masks():
    """Exercise 3's expected outcome: inputs and targets as long as the document, about 15% of the inputs <M>."""
    inputs, targets = mass_style(
        "Thank you for inviting me to your party last week .".split(), generator=torch.Generator().manual_seed(0)
    )
    assert targets == "Thank you for inviting me to your party last week .".split() and len(inputs) == len(targets)
    assert all(i in ("<M>", t) for i, t in zip(inputs, targets))
    docs = SyntheticLanguage(0).documents(300, seed=1, sentences_per_document=3)
    documents = [[w for s in doc for w in s.words] for doc in docs]
    lengths = mass_style_lengths(documents)
    average = sum(map(len, documents)) / len(documents)
    assert lengths["input"] == lengths["target"] == average
    assert abs(lengths["masked"] - 0.15) < 0.02  # ~9,000 words: one standard error 0.004


def test_exercise_1_half_the_tokens_in_spans_of_ten_make_282_inputs_and_283_targets():
    """Exercise 1: 512 tokens, density 0.5, mean span 10: 256 noise tokens in 26 spans, inputs of 282 and
    targets of 283 tokens, as long as span_corrupt's outputs on any such mask."""
    assert span_corruption_lengths(512, 0.5, 10) == (282, 283)
    words = [f"w{i}" for i in range(512)]
    for seed in range(3):
        mask = random_spans_noise_mask(
            512, noise_density=0.5, mean_noise_span_length=10, generator=torch.Generator().manual_seed(seed)
        )
        inputs, targets = span_corrupt(words, mask)
        assert int(mask.sum()) == 256 and (len(inputs), len(targets)) == (282, 283)
    for length, density, mean in ((100, 0.15, 3), (37, 0.3, 2)):
        mask = random_spans_noise_mask(
            length, noise_density=density, mean_noise_span_length=mean, generator=torch.Generator().manual_seed(0)
        )
        inputs, targets = span_corrupt(words[:length], mask)
        assert span_corruption_lengths(length, density, mean) == (len(inputs), len(targets))


def test_exercise_2_a_gain_counts_in_standard_errors_of_the_difference():
    """Exercise 2: on 100 questions, 0.45 against no pretraining's 0.30 is a gain of 2.2 standard errors (it beats
    it), 0.35 one of 0.8 (within the noise); the standard error is that of simulated differences of such scores."""
    runs = {
        "no pretraining": {"scores": {"question": 0.30}},
        "bert_style": {"scores": {"question": 0.45}},
        "random_spans": {"scores": {"question": 0.35}},
    }
    gains = gains_in_standard_errors(runs, "question", n=100)
    assert set(gains) == {"bert_style", "random_spans"}
    assert abs(gains["bert_style"] - 2.2) < 0.05 and abs(gains["random_spans"] - 0.76) < 0.05, gains
    g = torch.Generator().manual_seed(0)
    for name, gain in gains.items():  # 40,000 draws: the standard deviation to about 0.4%
        p, p0 = runs[name]["scores"]["question"], 0.30
        draws = torch.binomial(torch.full((40_000,), 100.0), torch.tensor(p).expand(40_000), generator=g) / 100
        baseline = torch.binomial(torch.full((40_000,), 100.0), torch.tensor(p0).expand(40_000), generator=g) / 100
        assert gain == pytest.approx((p - p0) / float((draws - baseline).std()), rel=0.02)
    assert (
        gains_in_standard_errors({"no pretraining": {"scores": {"question": 1.0}}, "x": {"scores": {"question": 1.0}}})[
            "x"
        ]
        == 0.0
    )


def test_exercise_4_bart_init_std_002_leaves_the_decoder_deaf_to_the_encoder():
    """Exercise 4: at initialisation, at width 64, the cross-attention output is under 0.01 of the residual stream
    (about 0.006) with σ = 0.02 against about 0.55 with σ = 64^-1/2, as transformers' BART measures it; the σ = 0.02
    BART gives one answer to every test input of every task, the width-matched one does not."""
    sizes = dict(
        d_model=64, num_layers=2, num_heads=4, d_kv=16, d_ff=128, train_examples=40, eval_examples=30, documents=40
    )
    data = TextToTextData(chapter_config(**sizes))
    batch = data.finetuning_batches(64)(0)
    models = {
        std: tiny_bart(chapter_config(bart_init_std=std, **sizes), len(data.vocab)).eval() for std in (0.02, None)
    }
    ratios = {std: cross_attention_ratio(model, batch) for std, model in models.items()}
    assert all(r < 0.01 for r in ratios[0.02]) and all(0.4 < r < 0.7 for r in ratios[None]), ratios
    hf = models[None].to_hf().eval()
    expected = []
    hooks = [
        layer.encoder_attn.register_forward_hook(
            lambda m, args, out: expected.append(float(out[0].norm(dim=-1).mean() / args[0].norm(dim=-1).mean()))
        )
        for layer in hf.model.decoder.layers
    ]
    with torch.no_grad():
        hf(**batch)
    for hook in hooks:
        hook.remove()
    assert ratios[None] == pytest.approx(expected, rel=1e-4)

    deaf, hearing = (most_frequent_answers(models[std], data) for std in (0.02, None))
    assert all(share == 1.0 for _, share in deaf.values()), deaf
    assert all(share < 0.9 for _, share in hearing.values()), hearing
    for task, (answer, share) in hearing.items():  # the count, from transformers' greedy search
        ids = batch_of(data.test[task], data.vocab)["input_ids"]
        longest = max(len(b) for _, b in data.test[task]) + 1
        with torch.no_grad():
            out = hf.generate(
                input_ids=ids,
                attention_mask=(ids != 0).long(),
                max_new_tokens=longest,
                do_sample=False,
                num_beams=1,
                forced_eos_token_id=None,
                forced_bos_token_id=None,
            )
        answers = [" ".join(data.vocab.decode(row[1:])) for row in out.tolist()]
        assert answers.count(answer) / len(answers) == share == max(map(answers.count, answers)) / len(answers)


TINY = dict(
    d_model=16,
    d_kv=4,
    d_ff=32,
    num_layers=1,
    pretrain=dict(batch_size=4),
    finetune=dict(batch_size=4),
    train_examples=20,
    eval_examples=12,
    documents=40,
)


def test_hidden_words_are_what_the_input_does_not_show():
    data = TextToTextData(chapter_config(**TINY))
    first_word = len(SPECIALS) + NUM_SENTINELS
    for objective in ("bert_style", "random_spans", "prefix_lm", "drop_tokens"):
        batch = data.pretraining_batches(objective, 16)(0)
        hidden = hidden_words(objective, batch)
        for row in range(16):  # brute force, one target token at a time
            inputs, labels = batch["input_ids"][row].tolist(), batch["labels"][row].tolist()
            for t, label in enumerate(labels):
                if objective == "bert_style":
                    expected = label != -100 and (t >= len(inputs) or inputs[t] != label)
                else:
                    expected = label >= first_word  # a word: not padding, </s>, <M> or a sentinel
                assert bool(hidden[row, t]) == expected, (objective, row, t)
        if objective == "bert_style":  # about 15% of the text is noise; a random word may happen to be the same
            share = float(hidden.sum() / (batch["labels"] > 1).sum())
            assert 0.05 < share < 0.3, share


def test_hidden_word_accuracy_counts_the_argmax_on_hidden_words():
    recipe = chapter_config(**TINY)
    data = TextToTextData(recipe)
    model = tiny_t5(recipe, len(data.vocab))
    out = hidden_word_accuracy(model, data, "random_spans", batch_size=8, batch_index=5)
    batch = data.pretraining_batches("random_spans", 8)(5)
    with torch.no_grad():
        predicted = model(**batch).logits.argmax(-1)
    pairs = [
        (int(p), int(w))
        for p, w, keep in zip(
            predicted.flatten(), batch["labels"].flatten(), hidden_words("random_spans", batch).flatten()
        )
        if keep
    ]
    words = [w for _, w in pairs]
    assert out["accuracy"] == pytest.approx(sum(p == w for p, w in pairs) / len(pairs))
    assert out["unigram"] == pytest.approx(max(words.count(w) for w in words) / len(words))
    assert out["per_text"] == len(words) / 8


def test_unseen_names_written_reads_the_name_of_the_triple(monkeypatch):
    data = TextToTextData(chapter_config(**TINY))
    pairs = data.test["facts"]
    assert all(" ".join(target[1:3]) in " ".join(inputs) for inputs, target in pairs)  # the sentence's person
    assert {" ".join(t[1:3]) for _, t in pairs} <= {p.name for p in data.test_people}  # names fine-tuning never shows
    answers = [list(t) for _, t in pairs]
    for wrong in answers[::3]:
        wrong[1] = "Anna"  # another first name: the name is not written
    monkeypatch.setattr(ch09_t5_bart, "greedy_answers", lambda model, given, vocab: answers)
    assert unseen_names_written(None, data) == sum(i % 3 != 0 for i in range(len(pairs))) / len(pairs)


def test_mean_task_score_averages_the_tasks_named():
    run = {"seed_scores": [{"acceptability": 1.0, "entailment": 0.5, "question": 0.2, "facts": 0.4}]}
    assert mean_task_score(run) == [pytest.approx(0.525)]
    assert mean_task_score(run, ANSWER_TASKS) == [pytest.approx(0.3)]
    with pytest.raises(ValueError, match="expected tasks"):
        mean_task_score(run, ("summaries",))


@pytest.mark.parametrize("varies, pretrainings", [("fine-tuning", [None]), ("pretraining", [0, 1])])
def test_the_seeds_vary_what_the_config_says(varies, pretrainings):
    """One pretraining shared by the seeds' fine-tunings (the quick profile), or one pretraining per seed: the
    runs a claim about a pretraining objective needs."""
    recipe = chapter_config(
        **{**TINY, "pretrain": dict(steps=1, batch_size=4), "finetune": dict(steps=1, batch_size=4)},
        seeds=(0, 1),
        seed_varies=varies,
    )
    data = TextToTextData(recipe)
    asked, models = [], []

    def pretraining(seed):
        asked.append(seed)
        return data.pretraining_batches("random_spans", recipe.pretrain.batch_size, seed)

    def make_model(seed):
        models.append(seed)
        return tiny_t5(recipe, len(data.vocab), seed)

    run, _ = pretrain_then_finetune(make_model, pretraining, data, recipe)
    assert asked == pretrainings and models == [0 if seed is None else seed for seed in pretrainings]
    assert len(run["seed_scores"]) == 2 and run["pretrain_loss"] is not None


def test_the_pretraining_streams_differ_by_seed_and_the_shared_one_is_unseeded():
    data = TextToTextData(chapter_config(**TINY))
    first = [data.pretraining_batches("random_spans", 4, seed)(0)["input_ids"] for seed in (None, 0, 1)]
    assert not torch.equal(first[1], first[2])
    assert torch.equal(first[0], data.pretraining_batches("random_spans", 4)(0)["input_ids"])


def test_the_config_refuses_what_it_cannot_run():
    for overrides, name in (
        (dict(noisings=("token_masking+shuffling",)), "noisings"),
        (dict(objectives=("mass",)), "objectives"),
        (dict(seeds=(0, 0)), "seeds"),
        (dict(seed_varies="data"), "seed_varies"),
        (dict(pretrain=dict(steps=0)), "pretrain.steps"),
        (dict(finetune=dict(lr=-1.0)), "finetune.lr"),
    ):
        with pytest.raises(ValueError, match=f"^{name}: expected"):
            chapter_config(**overrides)


def test_the_claims_about_objectives_vary_pretraining_in_both_profiles(monkeypatch):
    rules = [claim for claim in CLAIMS if hasattr(claim, "seeds")]
    assert {rule.key for rule in rules} == {
        "09-denoising-beats-no-pretraining",
        "09-span-corruption-matches-bert-style",
        "09-denoising-beats-prefix-lm",
        "09-infilling-beats-rotation",
    }
    assert all(rule.seeds.kind == "pretraining" and not rule.quick for rule in rules)
    for profile in ("quick", "full"):  # every profile pretrains one model per seed, as the rules need
        monkeypatch.setenv("LECTURE_PROFILE", profile)
        assert chapter_config().seed_varies == "pretraining"
    assert all(gate.floor == "most-frequent-token guess" for rule in rules for gate in rule.gates)
    assert len(CHECKS) == 6
