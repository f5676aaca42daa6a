"""lecture_lib.chapters.ch06_roberta_spanbert: gold units against the annotation, rows that carry them, bad names."""

import inspect

import pytest
import torch

from lecture_lib.chapters.ch06_roberta_spanbert import (
    SCHEMES,
    batch_noise_scales,
    chapter_config,
    format_run,
    left_padding_shift,
    longer_runs,
    mask_chosen_per_token,
    mean_masked_run,
    no_nsp_holds,
    scheme_run,
    seeded_runs,
    span_task,
    spans_showing_a_token,
    synthetic_corpus,
    unit_rows,
    with_pretraining_steps,
)
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.tasks import qa_examples, split_people
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.roberta import RobertaConfig, RobertaModel
from lecture_lib.objectives.span_masking import span_length_distribution


def test_unit_rows_carry_units_that_cover_the_real_tokens():
    config = chapter_config(documents=60, held_out_documents=12)
    corpus = synthetic_corpus(config)
    for scheme in SCHEMES:
        rows = unit_rows(corpus.train, corpus.tokenizer, scheme, 64)
        real = (rows["attention_mask"] == 1) & ~rows["special_tokens_mask"]
        assert torch.equal(rows["unit_ids"] >= 0, real)
        if scheme == "subword tokens":
            assert torch.equal(rows["unit_ids"][real], torch.cat([torch.arange(int(n)) for n in real.sum(1)]))


def test_bad_names_raise():
    config = chapter_config(documents=60, held_out_documents=12)
    with pytest.raises(ValueError, match="expected an input format in"):
        format_run(config, "documents")
    with pytest.raises(ValueError, match="expected a masking scheme in"):
        scheme_run(config, "clauses")


def test_exercise_2_nmod_grows_the_noun_phrases_and_is_a_new_run(monkeypatch):
    """Exercise 2: with nmod in NOUN_PHRASE_DEPENDENTS the mean masked run grows (the budget stays 15%), and
    scheme_run's cache key sees the change (it used to return the cached run of the old set)."""
    from lecture_lib.chapters import ch06_roberta_spanbert as ch06

    config = chapter_config(documents=300, held_out_documents=12)  # section 6 counts on 300 documents
    corpus = synthetic_corpus(config)
    seq_len = config.pretrain.data.seq_len
    before = mean_masked_run(corpus.train, corpus.tokenizer, "noun phrases", seq_len)
    after = mean_masked_run(
        corpus.train, corpus.tokenizer, "noun phrases", seq_len, ch06.NOUN_PHRASE_DEPENDENTS | {"nmod"}
    )
    assert after > before + 0.05, (before, after)  # 1.65 -> 1.79 tokens on the quick profile's documents
    before = scheme_run.cache_name(config, "noun phrases")
    monkeypatch.setattr(ch06, "NOUN_PHRASE_DEPENDENTS", ch06.NOUN_PHRASE_DEPENDENTS | {"nmod"})
    assert scheme_run.cache_name(config, "noun phrases") != before


def _hf_left_padding_shift(hf_model, input_ids, padding, pad_token_id, position_ids=None):
    """The same measurement on transformers' model, written out: outputs at the real tokens, padded or not."""
    pads = torch.full((input_ids.shape[0], padding), pad_token_id)
    padded = torch.cat([pads, input_ids], dim=1)
    mask = torch.cat([torch.zeros_like(pads), torch.ones_like(input_ids)], dim=1)
    arange = (lambda ids: torch.arange(ids.shape[1])[None, :]) if position_ids == "arange" else (lambda ids: None)
    with torch.no_grad():
        plain = hf_model(input_ids, position_ids=arange(input_ids)).last_hidden_state
        shifted = hf_model(padded, attention_mask=mask, position_ids=arange(padded)).last_hidden_state[:, padding:]
    return float((shifted - plain).abs().max())


def test_exercise_1_left_padding_moves_bert_not_roberta():
    """Exercise 1: left padding changes BERT's outputs at the real tokens clearly, RoBERTa's only by rounding, and
    RoBERTa forced to arange positions changes as BERT does; transformers' models measure the same."""
    torch.manual_seed(0)
    sizes = dict(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.1,
    )
    bert = BertModel(BertConfig(max_position_embeddings=32, **sizes))
    roberta = RobertaModel(RobertaConfig(max_position_embeddings=34, **sizes))
    input_ids = torch.randint(3, 60, (2, 8))  # no pad id (0 for BERT, 1 for RoBERTa)
    shifts = {
        "BERT": left_padding_shift(bert, input_ids, 3),
        "RoBERTa": left_padding_shift(roberta, input_ids, 3),
        "RoBERTa, arange": left_padding_shift(roberta, input_ids, 3, arange_positions=True),
    }
    assert shifts["BERT"] > 0.05 and shifts["RoBERTa, arange"] > 0.05, shifts
    assert shifts["RoBERTa"] < 1e-5, shifts
    references = {
        "BERT": _hf_left_padding_shift(bert.to_hf().eval(), input_ids, 3, 0),
        "RoBERTa": _hf_left_padding_shift(roberta.to_hf().eval(), input_ids, 3, 1),
        "RoBERTa, arange": _hf_left_padding_shift(roberta.to_hf().eval(), input_ids, 3, 1, "arange"),
    }
    for name, shift in shifts.items():
        assert shift == pytest.approx(references[name], abs=1e-5), (name, shifts, references)


def test_exercise_3_the_full_profile_is_a_new_study_judged_by_the_same_rule(monkeypatch):
    """Exercise 3: LECTURE_PROFILE=full gives FULL's sizes and new format runs (never the quick profile's cached
    rows); no_nsp_holds is section 2's rule, best MLM without NSP >= best with NSP."""
    names = []
    for profile in ("quick", "full"):
        monkeypatch.setenv("LECTURE_PROFILE", profile)
        config = chapter_config()
        names.append(format_run.cache_name(config, "doc-sentences"))
    assert config.pretrain.model.hidden_size == 256 and config.pretrain.train.steps == 3000
    assert config.documents == 8600 and config.sentences_per_document == 14
    assert names[0] != names[1], names
    row = lambda accuracy: {"mlm_accuracy": accuracy}  # noqa: E731
    formats = {
        "segment-pair": row(0.50),
        "sentence-pair": row(0.40),
        "full-sentences": row(0.50),
        "doc-sentences": row(0.49),
    }
    assert no_nsp_holds(formats)  # a tie counts: "at least as good"
    assert not no_nsp_holds({**formats, "segment-pair": row(0.51)})


def test_exercise_4_a_draw_per_token_shows_a_quarter_of_the_spans_a_token(monkeypatch):
    """Exercise 4: with 80/10/10 drawn per token a span of ℓ tokens keeps one with chance 1 − 0.9^ℓ (0.307 over
    the renormalised Geo(0.2) lengths); the budget passes over long spans, so in 64-token rows of one-token words
    about 25% of the chosen spans show a token, against 10% when drawn once per span. 4,000 rows: about 13,600
    spans, a standard error of 0.4 points; tolerance 2 points."""
    from lecture_lib.objectives import span_masking

    lengths = torch.arange(1, 11, dtype=torch.float64)
    assert float((span_length_distribution() * (1 - 0.9**lengths)).sum()) == pytest.approx(0.307, abs=0.0005)
    input_ids = torch.randint(5, 30_000, (4000, 64), generator=torch.Generator().manual_seed(0))
    word_ids = torch.arange(64).expand(4000, 64)
    once_per_span = span_masking._mask_chosen
    for replacement in (once_per_span, mask_chosen_per_token):
        seen = []

        def recording(input_ids, chosen, *args, replacement=replacement):
            seen.append(chosen)
            return replacement(input_ids, chosen, *args)

        monkeypatch.setattr(span_masking, "_mask_chosen", recording)
        masked, _ = span_masking.mask_spans(
            input_ids, word_ids, mask_token_id=1, vocab_size=30_000, generator=torch.Generator().manual_seed(1)
        )
        share = spans_showing_a_token(input_ids, masked, seen[0])
        if replacement is once_per_span:
            assert share == pytest.approx(0.10, abs=0.02)
            continue
        span_lengths = torch.tensor([int((row == span).sum()) for row in seen[0] for span in row[row >= 0].unique()])
        assert share == pytest.approx(float((1 - 0.9 ** span_lengths.double()).mean()), abs=0.02)
        assert share == pytest.approx(0.25, abs=0.02)


def tiny_config(**overrides):
    """A study small enough to train in a test: 60 documents, 3 pretraining steps, 2 fine-tuning steps."""
    return chapter_config(
        documents=60,
        held_out_documents=12,
        task_examples=32,
        test_examples=16,
        pretrain=dict(train=dict(steps=3, warmup_steps=1, batch_size=8), data=dict(eval_pairs=16)),
        finetune=dict(steps=2, batch_size=8),
        **overrides,
    )


def test_the_span_task_points_at_its_answers_and_tests_on_other_people():
    """Brute force: the tokens from start to end position are the answer's words in the tokenizer's pieces (the
    training examples rebuilt as span_task draws them), and no training person is named in a test passage."""
    config = tiny_config()
    tokenizer = synthetic_corpus(config).tokenizer
    task = span_task(config, tokenizer)
    train_people, test_people = split_people(SyntheticLanguage(config.language_seed).world)
    train_examples = qa_examples(
        SyntheticLanguage(config.language_seed), config.task_examples, 1, train_people, sentences_per_passage=3
    )
    for encoded, examples in ((task.train, train_examples), (task.test, task.test_examples)):
        assert len(examples) == len(encoded)
        ids = encoded.features["input_ids"]
        for n, example in enumerate(examples):
            start, end = int(encoded.features["start_positions"][n]), int(encoded.features["end_positions"][n])
            answer = [i for w in example.answer.split(" ") for i in tokenizer.encode(w)]
            assert ids[n, start : end + 1].tolist() == answer, (example.answer, start, end)
    for example in task.test_examples:
        assert not any(person.name in " ".join(example.passage) for person in train_people)
    # one segment type, as RoBERTa's inputs: question and passage told apart by [SEP] alone
    assert not task.train.features["token_type_ids"].any() and not task.test.features["token_type_ids"].any()


def test_seeded_runs_run_every_row_on_the_first_seed_and_the_compared_ones_on_every_seed(monkeypatch):
    """Every row on the first seed, the compared ones on every seed (every row with every_row_seeded); each run's
    config names its own seed only, and the rows without the span task are pretrained only."""
    from lecture_lib.chapters import ch06_roberta_spanbert as ch06

    calls = []

    def compute_all(fn, jobs, **kwargs):
        calls.append((fn, jobs))
        return [{"f1": job[0].pretrain.seed} for job in jobs]

    monkeypatch.setattr(ch06, "compute_all", compute_all)
    config = chapter_config(seeds=(3, 4, 5))
    compared = ("subword tokens", "geometric spans")
    runs = seeded_runs(config, "scheme", SCHEMES, compared=compared, span_task=compared)
    assert {name: sorted(r) for name, r in runs.items()} == {
        name: [3, 4, 5] if name in compared else [3] for name in SCHEMES
    }
    assert all(row["f1"] == seed for r in runs.values() for seed, row in r.items())
    fn, jobs = calls[-1]
    assert fn is scheme_run and len(jobs) == 9
    assert all(
        job[0].seeds == (job[0].pretrain.seed,) and job[0].pretrain.train == config.pretrain.train for job in jobs
    )
    # as scheme_run reads its arguments: the others pretrained only, and no row trained with SBO
    bound = [inspect.signature(scheme_run).bind(*job).arguments for job in jobs]
    assert all(args["span_task"] == (args["scheme"] in compared) and not args.get("sbo") for args in bound)
    every = seeded_runs(chapter_config(seeds=(3, 4, 5), every_row_seeded=True), "scheme", SCHEMES)
    assert all(sorted(r) == [3, 4, 5] for r in every.values())
    scratch = seeded_runs(config, "no pretraining", ["no pretraining"], compared=["no pretraining"])
    assert sorted(scratch["no pretraining"]) == [3, 4, 5] and all(len(job) == 1 for job in calls[-1][1])
    with pytest.raises(ValueError, match="expected the compared rows and those with the span task among"):
        seeded_runs(config, "scheme", compared, span_task=["whole words"])
    with pytest.raises(ValueError, match="expected the compared rows and those with the span task among"):
        seeded_runs(config, "format", ["doc-sentences"], compared=["sentence-pair"])
    with pytest.raises(ValueError, match="expected a study in"):
        seeded_runs(config, "formats", ["doc-sentences"])


def test_longer_runs_give_each_length_its_own_schedule_and_reuse_the_recipes_runs(monkeypatch):
    """A quarter, half and all of the recipe's steps on every seed, each warming up over the recipe's share of its
    steps; the whole recipe's run is the input-format study's call, so it comes from the same cache entry."""
    from lecture_lib.chapters import ch06_roberta_spanbert as ch06

    calls = []

    def compute_all(fn, jobs, **kwargs):
        calls.append((fn, jobs))
        return [{"qa_f1": job[0].pretrain.train.steps + job[0].pretrain.seed / 10} for job in jobs]

    monkeypatch.setattr(ch06, "compute_all", compute_all)
    config = chapter_config(seeds=(3, 4), pretrain=dict(train=dict(steps=400, warmup_steps=40)))
    runs = longer_runs(config)
    assert {s: sorted(r) for s, r in runs.items()} == {100: [3, 4], 200: [3, 4], 400: [3, 4]}
    assert runs[200][4]["qa_f1"] == 200.4
    fn, jobs = calls[-1]
    assert fn is format_run
    bound = [inspect.signature(format_run).bind(*job).arguments for job in jobs]
    assert all(args["name"] == "sentence-pair" and args["span_task"] for args in bound)
    assert [(job[0].pretrain.train.steps, job[0].pretrain.train.warmup_steps) for job in jobs[::2]] == [
        (100, 10),
        (200, 20),
        (400, 40),
    ]
    whole = [job for job in jobs if job[0].pretrain.train.steps == 400]
    assert all(job[0] == ch06.with_seed(config, job[0].pretrain.seed) for job in whole)  # the study's own configs
    assert with_pretraining_steps(config, 400) == config


def test_a_seed_is_one_cached_run_whatever_the_other_seeds():
    """A run of seed 4 has the same cache name in a study of seeds (3, 4, 5) as in one of (4,), and another
    name than seed 5's; the config refuses repeated seeds."""
    from lecture_lib.chapters.ch06_roberta_spanbert import with_seed

    name = format_run.cache_name(with_seed(chapter_config(seeds=(3, 4, 5)), 4), "doc-sentences")
    assert name == format_run.cache_name(with_seed(chapter_config(seeds=(4,)), 4), "doc-sentences")
    assert name != format_run.cache_name(with_seed(chapter_config(seeds=(3, 4, 5)), 5), "doc-sentences")
    with pytest.raises(ValueError, match="expected distinct seeds"):
        chapter_config(seeds=(1, 1))


def test_the_seeds_come_from_lecture_seeds(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "7,8,9")
    assert chapter_config().seeds == (7, 8, 9)


def test_a_scheme_run_does_not_depend_on_what_ran_before():
    """The run's initial weights come from its seed, not from the global random state it was called in (a worker
    of seeded_runs and the notebook's kernel have different histories), and its span task is scored."""
    config = tiny_config()
    rows = []
    for history in (0, 1):
        torch.manual_seed(history)
        torch.rand(history + 1)
        rows.append(scheme_run.__wrapped__(config, "whole words", progress=False))
    assert rows[0] == rows[1]
    assert 0 <= rows[0]["qa_exact"] <= rows[0]["qa_f1"] <= 1


def test_the_noise_scales_are_measured_on_the_batch_size_study_run():
    """batch_noise_scales trains the chapter's own recipe again: its end model scores the held-out perplexity of
    format_run's DOC-SENTENCES row at the config's batch, and both noise scales come from resolved gradients."""
    import math

    config = tiny_config()
    noise = batch_noise_scales.__wrapped__(config, examples=8)
    row = format_run.__wrapped__(config, "doc-sentences", span_task=False, match_tokens=False, progress=False)
    assert noise["perplexity"] == pytest.approx(math.exp(row["mlm_loss"]), rel=1e-9)
    for name in ("initial", "end"):
        assert noise[f"{name}_trace"] > 0
        assert noise[name] == pytest.approx(noise[f"{name}_trace"] / noise[f"{name}_squared_norm"])


def test_the_unpadded_loss_is_the_padded_one_with_the_same_gradients():
    """unpadded_loss (the study's runs) against pretraining_loss on rows padded to different lengths, NSP labels
    included: the same loss and every gradient, in float64."""
    from lecture_lib.chapters.ch06_roberta_spanbert import unpadded_loss
    from lecture_lib.models.bert import BertForPreTraining
    from lecture_lib.pretraining import pretraining_loss

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=12,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    ).double()
    lengths = torch.tensor([12, 5, 9, 2])
    mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, 50, (4, 12)) * mask
    labels = torch.where((torch.rand(4, 12) < 0.3) & mask.bool(), ids, -100)
    labels[:, 0] = ids[:, 0]  # every row has a label
    batch = dict(
        input_ids=ids,
        attention_mask=mask,
        token_type_ids=torch.zeros_like(ids),
        labels=labels,
        next_sentence_label=torch.tensor([0, 1, 1, 0]),
    )
    results = []
    for loss in (pretraining_loss, unpadded_loss):
        model.zero_grad()
        value = loss(model, batch)
        value.backward()
        results.append((value.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (padded, padded_grads), (unpadded, unpadded_grads) = results
    assert torch.allclose(padded, unpadded, atol=1e-12)
    assert len(padded_grads) == len(unpadded_grads)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(padded_grads, unpadded_grads))


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_chapters_jobs_are_every_run_its_sections_read_the_longest_first(monkeypatch, profile):
    """:func:`train_roberta_spanbert_runs` trains, in one pool, what each section then reads from the cache: the
    calls its section functions make with the profile's rows, and section 3's noise scales. Table 3's batch
    sizes and the linguistic masking units are the full profile's only."""
    from lecture_lib.chapters import ch06_roberta_spanbert as ch06

    monkeypatch.setenv("LECTURE_PROFILE", profile)

    made = [(ch06.batch_noise_scales, (ch06.with_seed(chapter_config(seeds=(3, 4, 5)), 3),))]

    def compute_all(fn, calls, **kwargs):
        made.extend((fn, tuple(call)) for call in calls)
        return [{"mlm_loss": 1.0} for _ in calls]

    monkeypatch.setattr(ch06, "compute_all", compute_all)
    config = chapter_config(seeds=(3, 4, 5))
    seeded_runs(config, "format", ch06.FORMATS, compared=ch06.FORMAT_SEEDED)
    seeded_runs(config, "no pretraining", ["no pretraining"], compared=["no pretraining"])
    seeded_runs(config, "scheme", **ch06.scheme_study(config))
    ch06.batch_size_runs(config), longer_runs(config), ch06.sbo_runs(config)

    def names(jobs):
        return {(fn.__qualname__, fn.cache_name(*call)) for fn, call in jobs}

    jobs = ch06.roberta_spanbert_jobs(config)
    assert names(jobs) == names(made) and len(names(jobs)) < len(jobs)  # the whole recipe's longer runs: the formats'
    assert jobs[0][0] is ch06.batch_noise_scales and jobs[-1][0] is ch06.scratch_run
    schemes = {call[1] for fn, call in jobs if fn is scheme_run}
    assert (schemes == set(SCHEMES)) == (profile == "full") and schemes >= set(ch06.SPAN_TASK_SCHEMES)
    assert bool(ch06.batch_size_calls(config)) == (profile == "full")
    with pytest.raises(ValueError, match="expected schemes of"):
        chapter_config(schemes=("whole words", "geometric spans"))
