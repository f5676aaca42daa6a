"""lecture_lib.chapters.ch08_electra: the FLOP accounting per variant against the formula, the budgets, the
shared batches, the BERT view of an ELECTRA encoder, and Table 5's variants against direct computations."""

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
import transformers
from transformers.models.electra.modeling_electra import ElectraClassificationHead

from lecture_lib.cache import build_all, compute_all
from lecture_lib.chapters import course_language
from lecture_lib.chapters.ch08_electra import (
    PAPER_CHECKPOINTS,
    VARIANTS,
    Chapter08Config,
    ElectraChapterData,
    Run,
    as_bert,
    budget,
    build_model,
    chapter05_config,
    chapter_config,
    chapter_runs,
    detection_accuracy,
    electra_budget,
    electra_small_training_flops,
    finetune_scores,
    flops_per_step,
    flops_per_token,
    generator_right_by_input,
    pretrain_run,
    run_budget,
    run_loss,
    scratch_scores,
    seeded,
    steps_for,
    with_electra_head,
)
from lecture_lib.chapters.solutions.ch08_electra import ElectraHeadForSequenceClassification
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune, finetune_budget, new_head
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraModel,
    electra_training_flops_per_token,
)
from lecture_lib.models.electra_variants import AllTokensMLM, ReplaceMLM
from lecture_lib.models.heads import BertForSequenceClassification
from lecture_lib.objectives.replaced_tokens import sample_tokens
from lecture_lib.tokenization import WordPieceTokenizer

MODEL = dict(
    vocab_size=300,
    embedding_size=32,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=32,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def small_config(steps=40, **overrides):
    pretrain = electra_budget(steps=steps, batch_size=8)
    return Chapter08Config(model=ElectraConfig(**MODEL), pretrain=pretrain, documents=150, **overrides)


@pytest.fixture(scope="module")
def data():
    return ElectraChapterData(small_config())


def test_flops_per_step_is_the_formula_summed_over_the_networks_trained():
    config = small_config()
    tokens, length, disc = 8 * 32, 32, config.model
    gen = electra_training_flops_per_token(disc.generator(0.25), length, "generator", masked_fraction=0.15)
    d = electra_training_flops_per_token(disc, length, "discriminator")
    mlm = electra_training_flops_per_token(disc, length, "generator", masked_fraction=0.15)
    assert flops_per_step("ELECTRA", config, 0.25) == (gen + d) * tokens
    assert flops_per_step("ELECTRA 15%", config, 0.25) == (gen + d) * tokens
    assert flops_per_step("BERT", config, 0.25) == mlm * tokens
    assert flops_per_step("Replace MLM", config, 0.25) == (gen + mlm) * tokens
    assert flops_per_step("ELECTRA", config, "unigram") == d * tokens
    everything = electra_training_flops_per_token(disc, length, "generator")
    assert flops_per_step("All-Tokens MLM", config, 0.25) == (gen + everything + 6 * 32) * tokens


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_spends_the_budget_within_one_step(variant):
    config = small_config()
    spent = steps_for(variant, config, 0.25) * flops_per_step(variant, config, 0.25)
    assert abs(spent - budget(config)) <= flops_per_step(variant, config, 0.25) / 2


def test_batches_are_the_same_for_every_run_and_choose_exactly_round_015_n(data):
    a, b = data.batch(3), data.batch(3)
    assert all(torch.equal(a[k], b[k]) for k in a)
    n = a["attention_mask"].sum(1)
    chosen = a["labels"] != IGNORE_INDEX
    assert chosen.sum(1).tolist() == [max(1, round(0.15 * int(k))) for k in n]
    assert not torch.equal(a["input_ids"], data.batch(4)["input_ids"])


def test_batches_end_at_their_longest_row_and_give_the_losses_of_the_full_width():
    """The columns cut off are padding: padded back to the full length, every variant's loss is the same."""
    full = 128  # longer than the documents' pairs, so that rows end in padding
    data = ElectraChapterData(
        Chapter08Config(
            model=ElectraConfig(**{**MODEL, "max_position_embeddings": full}),
            pretrain=electra_budget(steps=40, batch_size=8),
            documents=150,
        )
    )
    batches = [data.batch(step, test=True) for step in range(4)]
    assert all(b["input_ids"].shape[1] == int(b["attention_mask"].sum(1).max()) for b in batches)
    batch = min(batches, key=lambda b: b["input_ids"].shape[1])
    assert batch["input_ids"].shape[1] < full
    pad = {
        name: F.pad(tensor, (0, full - tensor.shape[1]), value=IGNORE_INDEX if name == "labels" else 0)
        if tensor.dim() == 2
        else tensor
        for name, tensor in batch.items()
    }
    for variant in ("ELECTRA", "BERT", "All-Tokens MLM"):
        model = build_model(variant, data.config, data, 0.25).double()
        loss = run_loss(variant, seed=0)
        assert loss(model, pad).item() == pytest.approx(loss(model, batch).item(), rel=1e-10)


def test_an_electra_encoder_is_a_bert_with_a_fresh_pooler():
    torch.manual_seed(0)
    config = ElectraConfig(**MODEL)
    electra = ElectraModel(config).eval()
    bert = as_bert(config, electra.state_dict()).eval()
    ids = torch.randint(5, 300, (2, 10))
    torch.testing.assert_close(bert(ids).last_hidden_state, electra(ids).last_hidden_state)
    with pytest.raises(ValueError, match="expected embedding_size = hidden_size"):
        as_bert(ElectraConfig(**{**MODEL, "embedding_size": 16}), {})


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_trains_on_a_batch(variant, data):
    model = build_model(variant, small_config(), data, 0.5)
    loss = run_loss(variant, 0)(model, data.batch(0))
    loss.backward()
    assert math.isfinite(loss.item()) and loss.item() > 0
    assert all(
        p.grad is not None
        for n, p in model.named_parameters()
        if "position_embeddings" not in n and "token_type" not in n
    )


def test_unigram_generator_is_for_electra_only(data):
    with pytest.raises(ValueError, match="the unigram generator is for ELECTRA"):
        build_model("BERT 15%", small_config(), data, "unigram")
    with pytest.raises(ValueError, match="expected a variant in"):
        build_model("XLNet", small_config(), data, 0.5)


def test_replace_mlm_shows_samples_not_mask_at_the_chosen_positions(data):
    model = build_model("Replace MLM", small_config(), data, 0.5)
    assert isinstance(model, ReplaceMLM)
    batch = {k: v for k, v in data.batch(0).items() if k != "step"}
    _, corrupted, original = model.corrupt(batch, torch.Generator().manual_seed(0))
    chosen = batch["labels"] != IGNORE_INDEX
    assert not (corrupted[chosen] == data.tokenizer.mask_token_id).any()
    assert torch.equal(corrupted[~chosen], original[~chosen])


def test_all_tokens_mlm_is_the_copy_mixture_written_with_probabilities(data):
    torch.manual_seed(0)
    config = small_config()
    model = AllTokensMLM(ElectraForMaskedLM(config.model.generator(0.5)), ElectraForMaskedLM(config.model))
    batch = {k: v for k, v in data.batch(0).items() if k != "step"}
    loss = model(batch, torch.Generator().manual_seed(1))
    generated, corrupted, original = model.corrupt(batch, torch.Generator().manual_seed(1))
    student = model.discriminator
    hidden = student.electra(corrupted, batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    p_vocab = F.softmax(student.generator_lm_head(student.generator_predictions(hidden)), -1)
    d = torch.sigmoid(model.copy_gate(hidden).squeeze(-1))
    p = d * (corrupted == original) + (1 - d) * p_vocab.gather(-1, original[..., None]).squeeze(-1)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(loss, generated.loss - p[real].log().mean())


def test_the_quick_profile_keeps_the_papers_fractions(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    config = chapter_config()
    assert set(config.fractions) <= set(PAPER_CHECKPOINTS) and config.model.embedding_size == config.model.hidden_size
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    assert set(chapter_config().fractions) == set(PAPER_CHECKPOINTS)
    assert set(chapter_config().variants) == set(VARIANTS)


def test_the_pretraining_budget_is_a_train_config_whose_warm_up_follows_each_runs_steps(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    pretrain = chapter_config().pretrain
    assert (pretrain.steps, pretrain.batch_size, pretrain.lr, pretrain.warmup_steps) == (1200, 24, 2e-3, 120)
    assert (pretrain.schedule, pretrain.num_threads) == ("linear", 1)
    assert chapter_config(pretrain=dict(steps=150)).pretrain.warmup_steps == 15
    run = run_budget(chapter_config(), 75)
    assert (run.steps, run.warmup_steps, run.lr, run.batch_size) == (75, 8, 2e-3, 24)  # round(7.5) == 8
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    assert chapter_config().pretrain.num_threads is None


def test_exercise_1_the_discriminator_weight_is_a_field_that_reaches_the_loss_and_the_cache_key(
    data, tmp_path, monkeypatch
):
    """Exercise 1: chapter_config(discriminator_weight=1.0) weights L_Disc by 1; at the start the masked-LM loss
    (a 300-way softmax) dominates the sum, the binary loss is several times smaller."""
    from lecture_lib.runtime import generator

    model = build_model("ELECTRA", small_config(discriminator_weight=1.0), data, 0.5)
    batch = data.batch(0)
    parts = dict(batch)
    step = int(parts.pop("step"))
    with torch.no_grad():
        out = model(**parts, sampling_generator=generator("electra samples", 0, step))
        for weight in (1.0, 50.0):
            loss = run_loss("ELECTRA", 0, weight)(model, batch)
            torch.testing.assert_close(loss, out.mlm_loss + weight * out.discriminator_loss)
    assert out.mlm_loss > 4 * out.discriminator_loss  # λ = 1: the generator's loss dominates the sum
    names = {
        pretrain_run.cache_name("ELECTRA", small_config(discriminator_weight=weight), 0.5) for weight in (1.0, 50.0)
    }
    assert len(names) == 2, names  # a new weight is a new recipe, never the cached run of the other


def test_exercise_3_electra_small_flops():
    """Exercise 3's expected outcome: about 1.48e18 with the generator's head everywhere, 1.15e18 on the 15%."""
    assert abs(electra_small_training_flops() / 1.48e18 - 1) < 0.005
    assert abs(electra_small_training_flops(masked_fraction=0.15) / 1.15e18 - 1) < 0.005


def test_exercise_2_the_generator_copies_the_kept_tokens_it_sees(data):
    """Exercise 2: the two shares are the samples equal to the originals at the kept and at the [MASK] positions
    (counted here from the replaced labels); a generator that has learned to copy its input (its logits made
    the one-hot of the input token) is right at every kept position and almost never at [MASK]."""
    from lecture_lib.runtime import generator

    model = build_model("ELECTRA", small_config(), data, 0.5)
    mask_id = data.tokenizer.mask_token_id
    batches = [data.batch(step) for step in range(4)]
    shares = [generator_right_by_input(model, b, mask_id, generator("exercise 2", i)) for i, b in enumerate(batches)]
    for i, (batch, share) in enumerate(zip(batches, shares)):
        parts = {k: v for k, v in batch.items() if k != "step"}
        with torch.no_grad():
            out = model(**parts, sampling_generator=generator("exercise 2", i))
        chosen, shows_mask = batch["labels"] != IGNORE_INDEX, batch["input_ids"] == mask_id
        kept = chosen & ~shows_mask
        assert 0.05 < kept.sum() / chosen.sum() < 0.3  # 15% of the chosen positions keep their token
        assert share["kept"] == pytest.approx(1 - out.replaced[kept].float().mean().item())
        assert share["[MASK]"] == pytest.approx(1 - out.replaced[chosen & shows_mask].float().mean().item())

    class Copier(torch.nn.Module):
        def forward(self, input_ids, attention_mask, token_type_ids, labels, masked_only):
            one_hot = F.one_hot(input_ids[labels != IGNORE_INDEX], vocab_size).float()
            return SimpleNamespace(logits=one_hot * 100, loss=torch.zeros(()))

    vocab_size = model.generator.config.vocab_size
    model.generator = Copier()
    share = generator_right_by_input(model, batches[0], mask_id, generator("exercise 2", 0))
    assert share["kept"] == 1.0 and share["[MASK]"] < 0.05


def test_exercise_4_electras_head_is_transformers_and_reaches_the_sentence_tasks_only(monkeypatch):
    """Exercise 4: the head's logits equal transformers' ElectraClassificationHead on the same weights and hidden
    states (dropout included, same seed); with_electra_head gives it to the sentence tasks only (acceptability in
    the quick profile, acceptability and entailment in the full one), which read token 0 through it, and leaves
    NER's head on every token as it was; its scores are cached apart from the pooler's."""
    torch.manual_seed(0)
    encoder = BertModel(
        BertConfig(
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
        )
    )
    model = ElectraHeadForSequenceClassification.from_encoder(encoder, 3, dropout=0.2)
    hf_config = transformers.ElectraConfig(hidden_size=16, num_labels=3, hidden_dropout_prob=0.2)
    head = ElectraClassificationHead(hf_config)
    head.load_state_dict(
        {
            "dense.weight": model.dense.weight,
            "dense.bias": model.dense.bias,
            "out_proj.weight": model.classifier.weight,
            "out_proj.bias": model.classifier.bias,
        }
    )
    input_ids = torch.randint(0, 40, (2, 7))
    with torch.no_grad():
        hidden = model.eval().bert(input_ids).last_hidden_state
        torch.testing.assert_close(model(input_ids).logits, head.eval()(hidden))
        torch.manual_seed(1)
        ours = model.train()._logits(SimpleNamespace(last_hidden_state=hidden))
        torch.manual_seed(1)
        torch.testing.assert_close(ours, head.train()(hidden))
    assert not any(name.startswith("bert.pooler.") for name in model.state_dict())
    language = SyntheticLanguage(0)
    tokenizer = WordPieceTokenizer.train([s.text for s in language.sentences(500, seed=0)], 300)
    tasks = course_language.build_tasks(
        tokenizer, course_language.chapter_config(train_examples=8, test_examples=8, max_length=128)
    )
    swapped = with_electra_head(tasks)
    assert [name for name in tasks if swapped[name].head is ElectraHeadForSequenceClassification] == [
        "acceptability",
        "entailment",
    ]
    assert all(swapped[name] is tasks[name] for name in ("ner", "qa"))
    for profile, sentence_tasks in (("quick", {"acceptability"}), ("full", {"acceptability", "entailment"})):
        monkeypatch.setenv("LECTURE_PROFILE", profile)
        assert {name for name in chapter_config().tasks if tasks[name].head is BertForSequenceClassification} == (
            sentence_tasks
        )
    names = {
        finetune_scores.cache_name("ELECTRA", small_config(), 0.25, 1.0, electra_head) for electra_head in (False, True)
    }
    assert len(names) == 2, names


def test_seeded_changes_the_runs_seeds_and_not_the_data(data):
    """A seed's config draws its own initialisation, batches, masking and fine-tuning; the tasks stay the same."""
    config = small_config()
    one = seeded(config, 1)
    assert (one.seed, one.finetune_seed) == (1, 1) and replace(one, seed=0, finetune_seed=0) == config
    assert chapter05_config(one) == chapter05_config(config)  # the same documents, tokenizer and task examples
    a, b = data.batch(2), data.batch(2, seed=1)
    assert all(torch.equal(a[k], data.batch(2, seed=0)[k]) for k in a)
    assert not torch.equal(a["input_ids"], b["input_ids"])


def test_flops_per_token_names_each_network_and_sums_to_a_step():
    config = small_config()
    assert set(flops_per_token("ELECTRA", config, 0.25)) == {"generator", "discriminator"}
    assert set(flops_per_token("BERT", config, 0.25)) == {"masked LM"}
    assert set(flops_per_token("ELECTRA", config, "unigram")) == {"discriminator"}
    for variant in VARIANTS:
        total = sum(flops_per_token(variant, config, 0.25).values()) * config.pretrain.batch_size * 32
        assert flops_per_step(variant, config, 0.25) == total


def test_detection_accuracy_counts_the_unigram_discriminators_calls(data):
    """The unigram run's recall, accuracy on originals and generator accuracy, counted directly from its
    discriminator's logits on the same corrupted batches."""
    from lecture_lib.runtime import generator

    config = small_config()
    model = build_model("ELECTRA", config, data, "unigram").eval()
    first = {k: v for k, v in data.batch(0, test=True).items() if k != "step"}
    with torch.no_grad():  # centre the logits, so that the untrained discriminator calls both ways
        logits = model.discriminator(first["input_ids"], first["attention_mask"], first["token_type_ids"]).logits
        model.discriminator.discriminator_predictions.dense_prediction.bias -= logits.median()
    run = Run("ELECTRA", "unigram", 1, 1.0, [], {}, model.state_dict())
    measured = detection_accuracy(run, config, data, batches=2)
    said_right = replaced_total = originals_right = originals_total = most_frequent = chosen_total = 0
    in_text = data.in_text()
    bce = 0.0
    for i in range(2):
        batch = {k: v for k, v in data.batch(i, test=True).items() if k != "step"}
        corrupted, replaced = model.corrupt(batch, generator("electra eval", config.seed, i))
        with torch.no_grad():
            logits = model.discriminator(corrupted, batch["attention_mask"], batch["token_type_ids"]).logits
        calls = logits > 0
        real = batch["attention_mask"].bool()
        p = torch.sigmoid(logits[real].double())
        bce -= float(torch.where(replaced[real] == 1, p.log(), (1 - p).log()).sum())
        said_right += int((calls & (replaced == 1) & real).sum())
        replaced_total += int(((replaced == 1) & real).sum())
        originals_right += int((~calls & (replaced == 0) & real).sum())
        originals_total += int(((replaced == 0) & real).sum())
        assert in_text[corrupted[(replaced == 1) & real]].all()  # the unigram generator draws words of the text
        chosen = batch["labels"] != IGNORE_INDEX
        most_frequent += int((batch["labels"][chosen] == int(data.unigram().argmax())).sum())
        chosen_total += int(chosen.sum())
    assert 0 < said_right < replaced_total
    assert measured["recall on replacements"] == pytest.approx(said_right / replaced_total)
    assert measured["accuracy on originals"] == pytest.approx(originals_right / originals_total)
    assert measured["generator accuracy"] == pytest.approx(most_frequent / chosen_total)
    real_total = replaced_total + originals_total
    assert measured["discriminator loss"] == pytest.approx(bce / real_total, rel=1e-5)
    share = replaced_total / real_total  # a constant guess at the share scores the entropy of the share
    assert measured["constant guess loss"] == pytest.approx(
        -share * math.log(share) - (1 - share) * math.log(1 - share)
    )


def test_compute_all_trains_the_missing_runs_and_returns_what_the_loop_returns(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    config = small_config(steps=3, fractions=(1.0,))
    jobs = [("ELECTRA", config, 0.25, False), ("BERT", seeded(config, 1), 0.25, False)]
    runs = compute_all(pretrain_run, jobs, workers=1)
    assert [(run.variant, run.generator_size) for run in runs] == [("ELECTRA", 0.25), ("BERT", 0.25)]
    assert runs[1].flops == runs[1].steps * flops_per_step("BERT", config, 0.25)
    again = pretrain_run("BERT", seeded(config, 1), 0.25, progress=False)
    assert all(torch.equal(again.final_state[k], runs[1].final_state[k]) for k in again.final_state)
    monkeypatch.setattr("lecture_lib.runtime.parallel_map", lambda *a, **k: pytest.fail("retrained"))
    compute_all(pretrain_run, jobs, workers=1)  # all cached: nothing trains


def test_a_checkpoints_fine_tuning_is_named_by_its_runs_call_and_shares_the_runs_pool(tmp_path, monkeypatch):
    """finetune_scores reads the run that its call names, so build_all can list it after that run in one pool; its
    scores are those of fine-tuning the run's checkpoint by hand with the library's finetune."""
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    config = replace(
        small_config(steps=4, fractions=(0.5, 1.0)),
        model=ElectraConfig(**{**MODEL, "vocab_size": 600, "max_position_embeddings": 64}),  # every task fits
        finetune=finetune_budget(steps=3, batch_size=4),
    )
    run_call = ("ELECTRA", config, 0.25, False)
    tune_calls = [("ELECTRA", config, 0.25, f, False) for f in config.fractions]
    built = build_all([(pretrain_run, run_call), *((finetune_scores, call) for call in tune_calls)], workers=1)
    assert built == 3
    run = pretrain_run(*run_call)
    task = ElectraChapterData(config).tasks["ner"]
    for fraction, call in zip(config.fractions, tune_calls):
        encoder = as_bert(config.model, run.checkpoints[fraction], config.seed)
        by_hand = finetune(task, new_head(task, encoder, seed=config.finetune_seed), config.finetune, 0)
        assert finetune_scores(*call) == {"ner": by_hand.scores["f1"]}
    monkeypatch.setattr("lecture_lib.runtime.parallel_map", lambda *a, **k: pytest.fail("built again"))
    assert build_all([(finetune_scores, call) for call in tune_calls]) == 0


def test_replacements_are_tokens_of_the_text_and_detection_accuracy_counts_their_recall(data):
    """A learned (here untrained) generator samples only vocabulary entries the training text uses, which an
    unrestricted one would not; the recall detection_accuracy reports is a direct count of the calls."""
    from lecture_lib.runtime import generator

    config = small_config()
    model = build_model("ELECTRA", config, data, 0.25).eval()
    in_text = data.in_text()
    assert torch.equal(in_text, data.unigram() > 0) and not in_text.all()
    batches = [{k: v for k, v in data.batch(i, test=True).items() if k != "step"} for i in range(2)]
    found = [0, 0]  # replacements called replaced, all replacements
    with torch.no_grad():  # centre the logits, so that the untrained discriminator calls both ways
        first = model(**batches[0], sampling_generator=generator("electra eval", config.seed, 0))
        bias = first.logits[batches[0]["attention_mask"].bool()].median()
        model.discriminator.discriminator_predictions.dense_prediction.bias -= bias
        for i, batch in enumerate(batches):
            out = model(**batch, sampling_generator=generator("electra eval", config.seed, i))
            replaced = (out.replaced == 1) & batch["attention_mask"].bool()
            assert in_text[out.corrupted_ids[replaced]].all()
            found[0] += int(((out.logits > 0) & replaced).sum())
            found[1] += int(replaced.sum())
        inputs = (batches[0]["input_ids"], batches[0]["attention_mask"], batches[0]["token_type_ids"])
        anywhere = sample_tokens(model.generator(*inputs).logits.flatten(0, 1), generator=generator("free", 0))
        assert not in_text[anywhere].all()  # without the restriction, entries the text never uses are drawn
    measured = detection_accuracy(Run("ELECTRA", 0.25, 1, 1.0, [], {}, model.state_dict()), config, data, batches=2)
    assert 0 < found[0] < found[1]
    assert measured["recall on replacements"] == pytest.approx(found[0] / found[1])


def test_a_run_keeps_the_whole_pair_at_each_fraction(data, tmp_path, monkeypatch):
    """The snapshots hold generator and discriminator as they were at each fraction: the last is the final
    state, and each holds the encoder kept for fine-tuning at that fraction."""
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    run = pretrain_run("ELECTRA", small_config(steps=4, fractions=(0.5, 1.0)), 0.25, progress=False)
    assert set(run.snapshots) == set(run.checkpoints) == {0.5, 1.0}
    assert all(torch.equal(run.snapshots[1.0][k], v) for k, v in run.final_state.items())
    for fraction, encoder in run.checkpoints.items():
        assert all(torch.equal(run.snapshots[fraction]["discriminator.electra." + k], v) for k, v in encoder.items())
    assert any(
        not torch.equal(run.snapshots[0.5][k], v) for k, v in run.final_state.items() if k.startswith("generator.")
    )


def test_chapter_runs_lays_out_the_rows_per_seed_and_the_sweep(monkeypatch):
    config = replace(small_config(), variants=("ELECTRA", "BERT"), seeds=(0, 1), generator_sizes=(0.25, "unigram"))
    asked = []

    def fake(fn, calls, workers=None, desc=None):
        asked.extend(calls)
        return [(variant, cfg.seed, size) for variant, cfg, size, _ in calls]

    built = []
    monkeypatch.setattr("lecture_lib.chapters.ch08_electra.compute_all", fake)
    monkeypatch.setattr("lecture_lib.chapters.ch08_electra.build_all", lambda jobs, **kwargs: built.extend(jobs))
    table, sweep = chapter_runs(config)
    assert table == {
        "ELECTRA": {0: ("ELECTRA", 0, 0.25), 1: ("ELECTRA", 1, 0.25)},
        "BERT": {0: ("BERT", 0, 0.25), 1: ("BERT", 1, 0.25)},
    }
    assert sweep == {0.25: table["ELECTRA"], "unigram": {0: ("ELECTRA", 0, "unigram"), 1: ("ELECTRA", 1, "unigram")}}
    assert [cfg.finetune_seed for _, cfg, _, _ in asked] == [0, 1, 0, 1, 0, 1]
    # one pool: the runs, then each seed's fine-tuning from random weights, which needs none of them, then the
    # fine-tuning of the runs in their order: every checkpoint of the curve's rows, the whole budget of the others
    assert [call for fn, call in built if fn is pretrain_run] == asked
    floors = built[len(asked) : len(asked) + 2]
    assert [(fn, call[0].seed) for fn, call in floors] == [(scratch_scores, 0), (scratch_scores, 1)]
    tunes = built[len(asked) + 2 :]
    assert {fn for fn, _ in tunes} == {finetune_scores}
    assert [(variant, cfg.seed, size, f) for variant, cfg, size, f, _ in (call for _, call in tunes)] == [
        *((variant, seed, 0.25, f) for variant in ("ELECTRA", "BERT") for seed in (0, 1) for f in config.fractions),
        ("ELECTRA", 0, "unigram", 1.0),
        ("ELECTRA", 1, "unigram", 1.0),
    ]


def test_the_claims_seeds_come_from_lecture_seeds_and_bad_fields_are_refused(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "3,4,5")
    assert (chapter_config().seeds, chapter_config().seed) == ((3, 4, 5), 3)
    for overrides, message in (
        (dict(variants=("BERT",)), r"variants: expected ELECTRA and others of"),
        (dict(generator_sizes=(0.5,)), r"expected the chapter's generator 0.25 among them"),
        (dict(fractions=(0.5,)), r"fractions: expected shares of the budget in \(0, 1\]"),
        (dict(tasks=("parsing",)), r"tasks: expected some of"),
        (dict(seeds=(2, 2)), r"seeds: expected distinct non-negative seeds"),
        (dict(pretrain=dict(steps=0)), r"pretrain.steps: expected a value >= 1, got 0"),
        (dict(pretrain=dict(batch_size=0)), r"pretrain.batch_size: expected a value >= 1, got 0"),
    ):
        with pytest.raises(ValueError, match=message):
            chapter_config(**overrides)
