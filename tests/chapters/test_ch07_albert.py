"""lecture_lib.chapters.ch07_albert: the parameter formulas against transformers' counts, Figure 1's measure
against a direct computation on transformers' hidden states, and the BERT twin."""

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers

from lecture_lib.chapters.ch07_albert import (
    DATE_GAP,
    DATE_GAP_LABELS,
    DiaryPairs,
    albert_config,
    bert_twin,
    chapter_config,
    count_on_meta,
    date_gap_task,
    effective_word_table,
    encoder_parameters,
    energy_rank,
    layer_applications,
    layer_transitions,
    main,
    pair_run_scores,
    pair_task_grid,
    paper_configs,
    pretrained,
    wide_albert,
    wide_runs,
)
from lecture_lib.data.diaries import DATES, date_gap_pairs
from lecture_lib.models.albert import (
    AlbertConfig,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertLayer,
    AlbertModel,
)
from lecture_lib.models.bert import BertConfig, BertForPreTraining, training_flops_per_token
from lecture_lib.pretraining import cached_pretraining
from tests.command_line import (
    assert_refused,
    recipe_passed_to_pretrain,
    refused_in_process,
    rule_rows,
    run_command,
    trap_pretraining,
)

VARIANTS = [
    dict(),
    dict(num_hidden_groups=2),
    dict(num_hidden_groups=4, inner_group_num=2),
    dict(embedding_size=64, intermediate_size=100),
]


@pytest.mark.parametrize("sizes", VARIANTS, ids=str)
def test_the_albert_formula_counts_what_transformers_builds(sizes):
    config = AlbertConfig(
        **{
            **dict(
                vocab_size=300,
                embedding_size=16,
                hidden_size=64,
                num_hidden_layers=4,
                num_attention_heads=4,
                intermediate_size=256,
            ),
            **sizes,
        }
    )
    assert encoder_parameters(config) == count_on_meta(lambda: transformers.AlbertModel(config.to_hf()))


@pytest.mark.parametrize("name", ["BERT base", "BERT large", "ALBERT base", "ALBERT xxlarge"])
def test_the_paper_configs_count_as_transformers_does(name):
    config = paper_configs()[name]
    hf_class = transformers.AlbertModel if isinstance(config, AlbertConfig) else transformers.BertModel
    assert encoder_parameters(config) == count_on_meta(lambda: hf_class(config.to_hf()))


def test_layer_transitions_are_the_mean_distance_and_angle_between_transformers_hidden_states():
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=50,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
    )
    ours = AlbertForPreTraining(config)
    hf = transformers.AlbertModel(config.to_hf()).eval()
    hf.load_state_dict(
        {k.removeprefix("albert."): v for k, v in ours.state_dict().items() if k.startswith("albert.")}, strict=False
    )
    batch = dict(
        input_ids=torch.randint(1, 50, (2, 5)),
        attention_mask=torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]),
        token_type_ids=torch.zeros(2, 5, dtype=torch.long),
    )
    curves = layer_transitions(ours, [batch])
    with torch.no_grad():
        states = hf(**batch, output_hidden_states=True).hidden_states
    tokens = [(b, t) for b in range(2) for t in range(5) if batch["attention_mask"][b, t]]
    for layer in range(3):
        x, y = states[layer], states[layer + 1]
        distance = sum(float((y[b, t] - x[b, t]).norm()) for b, t in tokens) / len(tokens)
        angle = sum(
            math.degrees(math.acos(min(1.0, float(x[b, t] @ y[b, t] / (x[b, t].norm() * y[b, t].norm())))))
            for b, t in tokens
        ) / len(tokens)
        assert curves["l2"][layer] == pytest.approx(distance, rel=1e-4)
        assert curves["angle"][layer] == pytest.approx(angle, rel=1e-3)


def test_the_bert_twin_has_the_albert_sizes_and_bert_layers():
    config = albert_config()
    twin = bert_twin(config)
    assert isinstance(twin.model, BertConfig) and twin.data == config.data and twin.train == config.train
    for name in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "initializer_range",
        "max_position_embeddings",
    ):
        assert getattr(twin.model, name) == getattr(config.model, name), name


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_wide_albert_shares_one_wider_layer_with_at_most_berts_parameters(monkeypatch, profile):
    """Tables 2 and 6 in shape: the wide ALBERT is all-shared, twice (quick) or more as wide as BERT, with no more
    parameters (counted on transformers' models, not ours) and not 5% fewer; at equal compute its steps times its
    FLOPs per token are BERT's, to within one step."""
    monkeypatch.setenv("LECTURE_PROFILE", profile)
    config = chapter_config()
    assert config.wide_judged == (profile == "full")  # the rules are judged where the wide runs cover every seed
    wide, bert = wide_albert(config, seed=2), bert_twin(replace(config.sharing, seed=2))
    assert wide.seed == 2 and wide.model.num_hidden_groups == 1 and wide.data == config.sharing.data
    assert wide.model.hidden_size >= 2 * bert.model.hidden_size
    assert wide.model.num_hidden_layers == bert.model.num_hidden_layers
    with torch.device("meta"):
        counts = [
            sum(p.numel() for p in model.parameters())
            for model in (
                transformers.AlbertForPreTraining(wide.model.to_hf()),
                transformers.BertForPreTraining(bert.model.to_hf()),
            )
        ]
    assert 0.95 * counts[1] <= counts[0] <= counts[1]
    cheap = wide_albert(config, seed=2, equal_compute=True)
    seq = config.sharing.data.seq_len
    per_step = training_flops_per_token(cheap.model, seq)
    assert abs(cheap.train.steps * per_step - bert.train.steps * training_flops_per_token(bert.model, seq)) <= per_step
    assert cheap.train.steps < bert.train.steps and cheap.train.warmup_steps < bert.train.warmup_steps
    with pytest.raises(ValueError, match="wide_hidden: expected a width above"):
        chapter_config(wide_hidden=config.sharing.model.hidden_size)
    with pytest.raises(ValueError, match="wide_embedding"):
        chapter_config(wide_embedding=0)


def test_the_wide_runs_train_each_view_once_per_seed_and_read_back(monkeypatch, tmp_path):
    """Judged (the full profile's plan): both views on every seed, two trainings that differ, read back from the
    cache. The quick profile's plan trains the first seed at BERT's steps only, and that run is the judged plan's."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    tiny = chapter_config(
        wide_judged=True,
        sharing=dict(
            model=dict(
                hidden_size=16, embedding_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
            ),
            train=dict(steps=8, batch_size=4, warmup_steps=2),
        ),
        wide_hidden=32,
        wide_embedding=8,
        seeds=(0, 1),
    )
    runs = wide_runs(tiny, workers=1)
    assert runs["steps"] == {"equal parameters": 8, "equal compute": wide_albert(tiny, 0, True).train.steps}
    assert all(len(values) == 2 and all(0 <= v <= 1 for v in values) for values in runs["mlm_accuracy"].values())
    assert runs["parameters"] == sum(p.numel() for p in AlbertForPreTraining(wide_albert(tiny, 0).model).parameters())
    assert runs["mlm_accuracy"]["equal parameters"] != runs["mlm_accuracy"]["equal compute"]  # two trainings
    assert wide_runs(tiny, workers=1) == runs  # read back from the cache
    assert runs["seeds"] == [0, 1] and not chapter_config().wide_judged
    shown = wide_runs(replace(tiny, wide_judged=False), workers=1)
    assert shown["seeds"] == [0] and shown["steps"] == {"equal parameters": 8}
    assert shown["mlm_accuracy"] == {"equal parameters": runs["mlm_accuracy"]["equal parameters"][:1]}


def test_the_date_gap_task_labels_each_pair_by_its_two_dates(monkeypatch):
    """Section 4's downstream task: the label is whether the second entry is at most DATE_GAP days after the first,
    both entries of one diary in their order (the same person and things), read off the encoded words; the labelled
    pairs are drawn per seed, the test pairs are fixed."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    config = chapter_config().pairs
    task, again = date_gap_task(config, seed=0), date_gap_task(config, seed=1)
    assert task.head is AlbertForSequenceClassification and task.num_labels == 2
    assert len(task.test_examples) == config.data.eval_pairs and task.train.features["labels"].shape == (
        DATE_GAP_LABELS,
    )
    assert torch.equal(task.test.features["input_ids"], again.test.features["input_ids"])
    assert not torch.equal(task.train.features["input_ids"], again.train.features["input_ids"])
    for example in task.test_examples:
        a, b = example.words_a, example.words_b
        assert (a[4], a[6], a[8]) == (b[4], b[6], b[8])  # one diary: its person and things
        gap = DATES.index(b[2]) - DATES.index(a[2])
        assert gap >= 1 and example.label == int(gap <= DATE_GAP)
    labels = task.test.features["labels"].float().mean()
    assert 0.3 < labels < 0.7  # both answers are common
    with pytest.raises(ValueError, match="gap of at least one day"):
        date_gap_pairs(DiaryPairs(config).test_documents, 0)


def test_the_command_line_takes_the_albert_recipe_and_its_own_fields(monkeypatch, capsys):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: python -m lecture_lib.chapters.ch07_albert")
    assert "--model.embedding_size " in help_text and "--model.num_hidden_groups " in help_text

    config = recipe_passed_to_pretrain(
        monkeypatch,
        main,
        ["--out", "x", "--model.embedding_size", "32", "--model.num_hidden_groups", "2", "--objective.pairs", "sop"],
    )
    assert isinstance(config.model, AlbertConfig)
    assert (config.model.embedding_size, config.model.num_hidden_groups, config.objective.pairs) == (32, 2, "sop")
    assert config.model.hidden_size == albert_config().model.hidden_size  # the rest is the chapter's recipe


# ALBERT's own rules, then one row per rule of the recipe's fields (the family's fields included).
BAD_INPUT = [
    (
        ["--model.num_hidden_groups", "3"],
        "--model.num_hidden_groups",
        "num_hidden_layers 4 is not divisible by num_hidden_groups 3 (each group serves L / G consecutive layers)",
    ),
    (["--model.embedding_size", "0"], "--model.embedding_size", "expected a value >= 1, got 0"),
    (["--model.classifier_dropout_prob", "1.5"], "--model.classifier_dropout_prob", "expected a value in [0, 1]"),
    (["--objective.pairs", "rtd"], "--objective.pairs", "expected one of nsp, sop, got 'rtd'"),
]


def test_every_constrained_flag_is_refused_in_one_line_before_any_work(monkeypatch, tmp_path, capsys):
    trap_pretraining(monkeypatch, tmp_path)
    rows = BAD_INPUT + rule_rows(albert_config)
    assert any(flag == "--model.inner_group_num" for _, flag, _ in rows)  # ALBERT's fields, not BERT's
    for argv, flag, reason in rows:
        assert_refused(*refused_in_process(main, ["--out", "run", *argv], capsys), flag, reason)
    assert not any(tmp_path.iterdir()), "no output folder, no cache entry"


def test_the_command_refuses_bad_input_as_a_user_sees_it(tmp_path):
    argv, flag, reason = BAD_INPUT[0]
    result = run_command("lecture_lib.chapters.ch07_albert", ["--out", "run", *argv], tmp_path)
    assert_refused(result.returncode, result.stderr, result.stdout, flag, reason)
    assert not any(tmp_path.iterdir())


def test_exercise_1_a_second_layer_per_group_adds_one_layer_and_doubles_the_applications():
    """Exercise 1: ALBERT-base with inner_group_num = 2 has 12H² + 13H = 7,087,872 more parameters (18,771,456
    against 11,683,584, as transformers builds it) and its forward pass applies 24 layers, as transformers' does."""
    base = AlbertConfig.preset("base")
    two = AlbertConfig(**{**base.__dict__, "inner_group_num": 2})
    ours = count_on_meta(lambda: AlbertModel(two))
    assert ours == count_on_meta(lambda: transformers.AlbertModel(two.to_hf())) == 18_771_456
    assert count_on_meta(lambda: AlbertModel(base)) == 11_683_584
    assert ours - 11_683_584 == 12 * 768**2 + 13 * 768 == 7_087_872
    input_ids = torch.zeros(1, 4, dtype=torch.long, device="meta")
    with torch.device("meta"):
        applied = layer_applications(AlbertModel(two), AlbertLayer, input_ids)
        hf_applied = layer_applications(
            transformers.AlbertModel(two.to_hf()), transformers.models.albert.modeling_albert.AlbertLayer, input_ids
        )
    assert applied == hf_applied == 24


def test_exercise_2_the_factorized_table_uses_at_most_e_directions():
    """Exercise 2: W_word W_projᵀ is the table transformers' ALBERT feeds its first layer (rank ≤ E, so k ≤ E
    for 90% of its energy); a BERT table of the same width needs more directions; k from numpy's SVD."""
    torch.manual_seed(0)
    sizes = dict(
        vocab_size=200,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        initializer_range=0.1,
    )
    albert = AlbertForPreTraining(AlbertConfig(embedding_size=8, **sizes))
    table = effective_word_table(albert)  # (V, H)
    hf = transformers.AlbertModel(albert.config.to_hf())
    hf.load_state_dict(
        {k.removeprefix("albert."): v for k, v in albert.state_dict().items() if k.startswith("albert.")}, strict=False
    )
    with torch.no_grad():
        projected = hf.encoder.embedding_hidden_mapping_in(hf.embeddings.word_embeddings.weight)
    torch.testing.assert_close(table + hf.encoder.embedding_hidden_mapping_in.bias, projected)
    bert_table = effective_word_table(BertForPreTraining(BertConfig(**sizes)))
    for matrix in (table, bert_table):
        energy = np.linalg.svd(matrix.detach().double().numpy(), compute_uv=False) ** 2
        assert energy_rank(matrix) == 1 + int(np.searchsorted(np.cumsum(energy) / energy.sum(), 0.9))
    assert energy_rank(table) <= 8 < energy_rank(bert_table)
    assert energy_rank(torch.diag(torch.tensor([3.0, 1.0, 1.0, 1.0]))) == 3  # 9 + 1 + 1 of 12 ≥ 10.8


def test_exercise_3_a_longer_run_is_a_new_run_and_the_grid_counts_its_heads(monkeypatch, tmp_path):
    """Exercise 3: train=dict(steps=2400) is a new recipe, never section 4's cached run; the grid scores each
    pair head on the held-out NSP and SOP pairs (checked by a direct count), and its "B follows A" share."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    names = []
    monkeypatch.setattr(
        "lecture_lib.chapters.ch07_albert.cached_pretraining",
        lambda *args, **kw: (
            names.append(cached_pretraining.cache_name(*args, **kw)) or SimpleNamespace(model=torch.nn.Identity())
        ),
    )
    for steps in (1200, 2400):
        config = chapter_config(pairs=dict(objective=dict(pairs="nsp"), train=dict(steps=steps))).pairs
        pretrained(config, DiaryPairs(config))
    assert names[0] != names[1], names
    monkeypatch.undo()
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    chapter = chapter_config(
        pairs=dict(
            model=dict(
                hidden_size=16, embedding_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
            ),
            train=dict(steps=20, batch_size=8, warmup_steps=2),
        ),
        seeds=(3,),
    )
    grid = pair_task_grid(chapter, workers=1)
    tiny = chapter.pairs
    data = DiaryPairs(tiny)
    sop = replace(tiny, seed=3, objective=replace(tiny.objective, pairs="sop"))
    model = pretrained(sop, data, progress=False).model.eval()  # read back from the cache
    for task in ("nsp", "sop"):
        held = data(replace(tiny, objective=replace(tiny.objective, pairs=task)))
        right = follows = total = 0
        with torch.no_grad():
            for batch in held.eval_batches():
                out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
                labels = batch["sentence_order_label"]  # NSP's labels too, under the name of ALBERT's pair head
                right += int((out.sop_logits.argmax(-1) == labels).sum())
                follows += int((out.sop_logits.argmax(-1) == 0).sum())
                total += len(labels)
        assert grid["rows"]["sop"][task] == [pytest.approx(right / total)]
        assert grid["rows"]["sop"]["follows_share"][task] == [pytest.approx(follows / total)]
        labels = held.test[held.label_key].float()
        assert grid["majority"][task] == pytest.approx(max(labels.mean(), 1 - labels.mean()))
    assert grid["seeds"] == [3]


def test_diary_pairs_labels_match_the_diaries_they_come_from():
    """Brute force over every held-out pair: an NSP pair labelled "follows" is two consecutive entries of one
    diary, and one labelled "random" has a second entry found only in diaries of another setting; an SOP pair
    is two consecutive entries of one diary, and its label says whether the first shown is the later one.
    Every pair is two whole entries; every word is one token."""
    config = chapter_config().pairs
    data = DiaryPairs(config)
    entry_of = {}
    for number, diary in enumerate(data.test_documents):
        for index, entry in enumerate(diary.entries):
            entry_of.setdefault(entry, []).append((number, index))
    words = {w for diary in data.train_documents for entry in diary.entries for w in entry.split()}
    assert all(len(data.tokenizer.tokenize(w)) == 1 for w in words)
    for task in ("nsp", "sop"):
        held = data(replace(config, objective=replace(config.objective, pairs=task)))
        assert len(held.test["input_ids"]) == config.data.eval_pairs
        for ids, types, label in zip(held.test["input_ids"], held.test["token_type_ids"], held.test[held.label_key]):
            tokens = data.tokenizer.convert_ids_to_tokens(ids.tolist())
            first, second = (
                " ".join(
                    t for t, s in zip(tokens[1:], types[1:].tolist()) if s == segment and t not in ("[SEP]", "[PAD]")
                )
                for segment in (0, 1)
            )
            a, b = entry_of[first], entry_of[second]
            consecutive = any(i == j and k + 1 == m for i, k in a for j, m in b)
            reversed_ = any(i == j and m + 1 == k for i, k in a for j, m in b)
            if task == "sop":
                assert (consecutive, reversed_) == ((False, True) if int(label) else (True, False))
            elif int(label) == 0:
                assert consecutive
            else:
                settings = {data.test_documents[i].setting for i, _ in a}
                assert not settings & {data.test_documents[j].setting for j, _ in b}


@pytest.mark.parametrize("seq_len, ratio", [(512, 7.3), (128, 7.6)])
def test_exercise_4_xxlarge_costs_seven_bert_large_per_token(seq_len, ratio):
    """Exercise 4: chapter 04's 6N + 12LTH for ALBERT-xxlarge against BERT-large, N counted here from the
    weights of transformers' layers (xxlarge applies its one layer 12 times) plus the MLM head H² + HV."""
    configs = paper_configs()
    xxlarge = training_flops_per_token(configs["ALBERT xxlarge"], seq_len)
    large = training_flops_per_token(configs["BERT large"], seq_len)
    with torch.device("meta"):
        layers = {
            "ALBERT xxlarge": transformers.AlbertModel(configs["ALBERT xxlarge"].to_hf()).encoder.albert_layer_groups[
                0
            ],
            "BERT large": transformers.BertModel(configs["BERT large"].to_hf()).encoder.layer[0],
        }
    for name, flops in (("ALBERT xxlarge", xxlarge), ("BERT large", large)):
        config = configs[name]
        h, n = config.hidden_size, config.num_hidden_layers
        per_layer = sum(m.weight.numel() for m in layers[name].modules() if isinstance(m, torch.nn.Linear))
        weights = n * per_layer + h * h + h * config.vocab_size
        assert flops == 6 * weights + 12 * n * seq_len * h
    if seq_len == 512:
        assert xxlarge == pytest.approx(1.56e10, rel=0.005) and large == pytest.approx(2.15e9, rel=0.005)
    assert xxlarge / large == pytest.approx(ratio, abs=0.05)


def test_the_pair_runs_score_on_the_accelerator_fresh_and_read_back(monkeypatch, tmp_path):
    """On a GPU a fresh run's model stays on the device and a run read from the cache is moved there, and the
    held-out batches follow the model: both score as on the CPU, so a rerun prints the same. Figure 1's curves
    too. (The fake accelerator stands in for CUDA and fails as it would.)"""
    from tests.fake_accelerator import FakeAccelerator

    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    tiny = chapter_config(
        pairs=dict(
            model=dict(
                hidden_size=16, embedding_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
            ),
            data=dict(eval_pairs=16),
            train=dict(steps=3, batch_size=8, warmup_steps=1),
        )
    ).pairs
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "cpu"))
    on_cpu = pair_run_scores(tiny, "sop", 3)
    model = AlbertForPreTraining(tiny.model)
    batches = DiaryPairs(tiny)(tiny).eval_batches()
    curves = layer_transitions(model, batches)
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "device"))
    with FakeAccelerator() as device:
        assert pair_run_scores(tiny, "sop", 3) == on_cpu  # trained on the device
        assert pair_run_scores(tiny, "sop", 3) == on_cpu  # read back from the cache
        on_device = layer_transitions(model.to(device), batches)
    assert {name: pytest.approx(values) for name, values in curves.items()} == on_device


def test_a_runs_cache_name_changes_with_the_diaries_it_reads(monkeypatch):
    """The same recipe on other diaries (how many, or drawn with another seed) is another run, never a stale
    hit: the diaries are part of the run's cache name."""
    names = []

    def record(*args, **kwargs):
        names.append(cached_pretraining.cache_name(*args, **kwargs))
        return SimpleNamespace(model=torch.nn.Linear(1, 1))

    monkeypatch.setattr("lecture_lib.chapters.ch07_albert.cached_pretraining", record)
    config = chapter_config().pairs
    pretrained(config, DiaryPairs(config))
    pretrained(config, DiaryPairs(replace(config, seed=1)))
    monkeypatch.setattr("lecture_lib.chapters.ch07_albert.PAIR_DIARIES", (300, 60))
    pretrained(config, DiaryPairs(config))
    pretrained(config, DiaryPairs(config))
    assert len(set(names[:3])) == 3 and names[3] == names[2]


def test_the_claims_seeds_come_from_lecture_seeds_and_bad_rows_are_refused(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "3,4,5")
    assert chapter_config().seeds == (3, 4, 5)
    with pytest.raises(ValueError, match=r"sharing_rows: expected sharing strategies in .*got \['half-shared'\]"):
        chapter_config(sharing_rows=((16, "half-shared"), (None, "not-shared")))
    with pytest.raises(ValueError, match="expected an all-shared row and BERT's"):
        chapter_config(sharing_rows=((16, "not-shared"), (None, "not-shared")))
    with pytest.raises(ValueError, match=r"seeds: expected distinct non-negative seeds, at least one, got \[1, 1\]"):
        chapter_config(seeds=(1, 1))


def test_the_chapters_jobs_are_every_run_its_sections_read_the_pair_models_before_their_fine_tuning(monkeypatch):
    """:func:`train_albert_runs` trains, in one pool, what each section then reads from the cache: the calls its section
    functions make; the date-gap rows that read a pair model come after every pair run."""
    from lecture_lib.chapters import ch07_albert as ch07

    made = []

    def compute_all(fn, calls, **kwargs):
        made.extend((fn, tuple(call)) for call in calls)
        score = {
            "mlm_accuracy": 0.5,
            "parameters": 1,
            "label": "x",
            "E": 16,
            "sharing": "x",
            "curves": [],
            "unigram": 0.1,
        }
        pair = {"mlm_accuracy": 0.5, "nsp": 0.5, "sop": 0.5, "follows_share": {"nsp": 0.5, "sop": 0.5}, "majority": 0}
        return [pair if fn is pair_run_scores else 0.5 if fn is ch07.date_gap_score else score for _ in calls]

    monkeypatch.setattr(ch07, "compute_all", compute_all)
    monkeypatch.setattr(
        ch07,
        "date_gap_task",
        lambda config, seed: SimpleNamespace(test=SimpleNamespace(features={"labels": torch.tensor([0, 1])})),
    )
    config = chapter_config(seeds=(3, 4, 5))
    ch07.sharing_runs(config), wide_runs(config), pair_task_grid(config), ch07.date_gap_runs(config)

    def names(jobs):
        return [(fn.__qualname__, fn.cache_name(*call)) for fn, call in jobs]

    jobs = ch07.albert_jobs(config)
    assert sorted(names(jobs)) == sorted(names(made))
    kinds = [fn for fn, _ in jobs]
    last_pair = max(i for i, fn in enumerate(kinds) if fn is pair_run_scores)
    assert last_pair < kinds.index(ch07.date_gap_score) and kinds[-1] is ch07.date_gap_score
