"""lecture_lib.chapters.ch04_bert_pretraining: the two recipes' sizes, and the ablations' runs on a tiny
recipe (their scores recomputed here from the cached models and the library's metrics)."""

import dataclasses
import math

import pytest
import torch

from lecture_lib.chapters import course_language
from lecture_lib.chapters.ch04_bert_pretraining import (
    BANK_SENTENCES,
    MASKING_RULES,
    TABLE5_ROWS,
    ablation_config,
    bert_base_pretraining_flops,
    chapter_config,
    further_pretrained_bert,
    further_pretraining_config,
    gap_neighbour_probe,
    gpu_hours_and_kwh,
    initial_sublayer_scale,
    mask_accuracy_on,
    masking_ablation,
    objective_ablation,
    sense_similarities,
    size_sweep,
    small_pretrained_bert,
    synthetic_bert,
    synthetic_config,
)
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.pretraining import PretrainingData, evaluate_at_masks
from tests.chapters.tiny_language import tiny_language


def _tiny(monkeypatch, tmp_path):
    return ablation_config(**tiny_language(monkeypatch, tmp_path))


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
    scores = mask_accuracy_on(forty, held_out, training_data=data_40)
    model = small_pretrained_bert(forty, progress=False).model.eval()
    right = shown = 0
    for batch in held_out.eval_batches():
        with torch.no_grad():
            predicted = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).prediction_logits.argmax(-1)
        at_mask = batch["input_ids"] == held_out.tokenizer.mask_token_id
        right += int((predicted[at_mask] == batch["labels"][at_mask]).sum())
        shown += int(at_mask.sum())
    assert scores["mask_accuracy"] == pytest.approx(right / shown)
    selected = [sum(int((d.batch(i)["labels"] != IGNORE_INDEX).sum()) for i in range(8)) for d in (held_out, data_40)]
    assert selected[1] / selected[0] == pytest.approx(0.4 / 0.15, rel=0.1)


def test_exercise_3_the_override_triples_the_steps_only(monkeypatch):
    """Exercise 3: `ablation_config(pretrain=dict(train=dict(steps=450)))` is section 9's recipe with 3 × 150 steps."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    base, longer = ablation_config(), ablation_config(pretrain=dict(train=dict(steps=450)))
    assert longer.pretrain.train.steps == 3 * base.pretrain.train.steps == 450
    assert dataclasses.replace(longer, pretrain=dataclasses.replace(
        longer.pretrain, train=dataclasses.replace(longer.pretrain.train, steps=150))) == base


def test_exercise_4_deleting_the_selected_positions_shortens_the_rows():
    """Exercise 4: the deletion probe on a worked example: `[CLS] a [MASK] c d [SEP]` with b selected becomes
    `[CLS] a c d [SEP]` (intact: `[CLS] a b c d [SEP]`), scored at a and c shown as themselves."""
    cls, sep, a, b, c, d, mask = 2, 3, 10, 11, 12, 13, 4
    batch = {"input_ids": torch.tensor([[cls, a, mask, c, d, sep, 0], [cls, mask, a, sep, 0, 0, 0]]),
             "attention_mask": torch.tensor([[1] * 6 + [0], [1] * 4 + [0] * 3]),
             "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 0], [0] * 7]),
             "labels": torch.tensor([[-100, -100, b, -100, -100, -100, -100], [-100, d, -100, -100, -100, -100, -100]])}
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
    assert flops == pytest.approx(sum((6 * n + 12 * L * t * H) * tokens for t, tokens in
                                      ((128, 0.9e6 * 256 * 128), (512, 0.1e6 * 256 * 512))), rel=0.02)
    assert round(flops / 1e19, 1) == 2.9
    hours, kwh = gpu_hours_and_kwh(flops, 990e12, 0.4, 700)
    assert (round(hours, 1), round(kwh)) == (20.3, 14)
    assert round(gpu_hours_and_kwh(flops, 990e12, 0.4, 700, 1.58)[1], 1) == 22.5
    v100_hours = gpu_hours_and_kwh(flops, 125e12, 0.30, 300, 1.58)[0]
    assert round(v100_hours) == 215 and 9.5 < v100_hours / hours < 11
