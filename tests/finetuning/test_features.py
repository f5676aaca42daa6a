"""lecture_lib.finetuning.features: the layers each choice reads, the hidden states against transformers', the scalar mix
against its formula, the tagger's handling of padding against an unpadded run, and the frozen-or-fine-tuned comparison
training the two models it names."""

import dataclasses

import pytest
import torch

from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning import features as features_module
from lecture_lib.finetuning.features import (
    FEATURE_CHOICES,
    FeatureTagger,
    ScalarMix,
    extract_features,
    feature_tagger_run,
    frozen_and_fine_tuned,
    principal_directions,
    selected_layers,
    tuned_feature_taggers,
    tuned_runs,
    with_features,
)
from lecture_lib.finetuning.finetune import FinetuneResult, Task, finetune, finetune_budget, new_head
from lecture_lib.finetuning.tasks import NER_LABELS, EncodedTask, encode_tagging, ner_examples
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.heads import BertForTokenClassification
from lecture_lib.tokenization import WordPieceTokenizer

CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=5,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
)


def _encoded():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 40, (6, 9), generator=g)
    mask = torch.ones(6, 9, dtype=torch.long)
    mask[2, 4:] = 0
    mask[5, 6:] = 0
    ids[mask == 0] = 0
    labels = torch.randint(0, 3, (6, 9), generator=g)
    labels[mask == 0] = -100
    return EncodedTask(
        {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels},
        [[0] * 9] * 6,
    )


def test_selected_layers_follow_the_papers_table():
    assert selected_layers("embeddings", 5) == [0]
    assert selected_layers("last", 5) == [5]
    assert selected_layers("second_to_last", 5) == [4]
    assert selected_layers("weighted_sum_last_four", 5) == [2, 3, 4, 5]
    assert selected_layers("concat_last_four", 5) == [2, 3, 4, 5]
    assert selected_layers("weighted_sum_all", 5) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="unknown feature choice 'sum_all'"):
        selected_layers("sum_all", 5)
    with pytest.raises(ValueError, match="needs at least 4 layers, the encoder has 3"):
        selected_layers("concat_last_four", 3)


def test_extracted_features_are_transformers_hidden_states():
    torch.manual_seed(0)
    encoder = BertModel(CONFIG).eval()
    encoded = _encoded()
    features = extract_features(encoder, encoded, batch_size=4).features["features"]
    assert features.shape == (6, 9, 6, 16)  # (N, T, L + 1, H)
    hf = encoder.to_hf()
    theirs = hf(
        input_ids=encoded.features["input_ids"],
        attention_mask=encoded.features["attention_mask"],
        output_hidden_states=True,
    ).hidden_states
    for layer, expected in enumerate(theirs):
        torch.testing.assert_close(features[:, :, layer], expected, atol=1e-5, rtol=1e-4)


def test_scalar_mix_is_gamma_times_a_softmax_weighted_sum():
    mix = ScalarMix(3)
    layers = torch.randn(2, 5, 3, 4)
    torch.testing.assert_close(mix(layers), layers.mean(2))  # zero scalars: the plain mean
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.5)
    w = torch.exp(torch.tensor([0.5, -1.0, 2.0]))
    w = w / w.sum()
    expected = 1.5 * (w[0] * layers[:, :, 0] + w[1] * layers[:, :, 1] + w[2] * layers[:, :, 2])
    torch.testing.assert_close(mix(layers), expected)


@pytest.mark.parametrize("lstm_size", [8, None])
@pytest.mark.parametrize("choice", FEATURE_CHOICES)
def test_tagger_ignores_padding_and_scores_real_tokens(choice, lstm_size):
    torch.manual_seed(1)
    encoded = extract_features(BertModel(CONFIG).eval(), _encoded())
    tagger = FeatureTagger(choice, 5, 16, 3, lstm_size=lstm_size).eval()
    batch = encoded.batch(range(6))
    out = tagger(**batch)
    assert out.logits.shape == (6, 9, 3)
    short = tagger(batch["features"][2:3, :4], batch["attention_mask"][2:3, :4])  # the padded row, unpadded
    torch.testing.assert_close(out.logits[2:3, :4], short.logits)
    kept = batch["labels"] != -100
    expected = torch.nn.functional.cross_entropy(out.logits[kept], batch["labels"][kept])
    torch.testing.assert_close(out.loss, expected)
    out.loss.backward()
    assert all(p.grad is not None for p in tagger.parameters())


def test_linear_tagger_scores_each_token_from_its_own_features():
    torch.manual_seed(2)
    features = extract_features(BertModel(CONFIG).eval(), _encoded()).features["features"]
    mask = torch.ones(features.shape[:2], dtype=torch.long)
    tagger = FeatureTagger("concat_last_four", 5, 16, 3, lstm_size=None)
    expected = (
        torch.cat([features[:, :, j] for j in (2, 3, 4, 5)], -1) @ tagger.classifier.weight.T + tagger.classifier.bias
    )
    torch.testing.assert_close(tagger(features, mask).logits, expected)
    changed = features.clone()
    changed[:, 3] += 1.0  # another token's features leave token 2's scores alone: no context of its own
    torch.testing.assert_close(tagger(changed, mask).logits[:, 2], tagger(features, mask).logits[:, 2])
    bilstm = FeatureTagger("concat_last_four", 5, 16, 3, lstm_size=8)  # the BiLSTM reads the neighbours
    assert not torch.allclose(bilstm(changed, mask).logits[:, 2], bilstm(features, mask).logits[:, 2])


def test_a_tagger_trained_on_extracted_features_leaves_the_encoder_unchanged():
    torch.manual_seed(3)
    encoder = BertModel(CONFIG).eval()
    before = {name: t.clone() for name, t in encoder.state_dict().items()}
    encoded = extract_features(encoder, _encoded())
    assert not encoded.features["features"].requires_grad  # no path back into the encoder
    tagger = FeatureTagger("last", 5, 16, 3, lstm_size=None)
    optimizer = torch.optim.SGD(tagger.parameters(), lr=1.0)
    for _ in range(3):
        optimizer.zero_grad()
        tagger(**encoded.batch(range(6))).loss.backward()
        optimizer.step()
    assert all(p.grad is not None for p in tagger.parameters())
    assert all(p.grad is None for p in encoder.parameters())
    assert all(torch.equal(t, before[name]) for name, t in encoder.state_dict().items())


def _ner_task():
    lang = SyntheticLanguage(seed=0)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(300, seed=0)], 200)
    train, test = ner_examples(lang, 48, seed=1), ner_examples(lang, 16, seed=2)
    return tokenizer, Task(
        "ner",
        BertForTokenClassification,
        len(NER_LABELS),
        encode_tagging(train, tokenizer, 48),
        encode_tagging(test, tokenizer, 48),
        test,
    )


@pytest.mark.parametrize("pretrained", [True, False])
def test_frozen_and_fine_tuned_trains_a_linear_tagger_on_the_frozen_last_layer_and_the_whole_network(
    monkeypatch, pretrained
):
    """The two runs it reports: a linear tagger (no BiLSTM) on the last layer's features of the untouched encoder,
    with the tagger's budget; then the task's head on a copy of the encoder, every weight trained, with the
    fine-tuning budget. A config stands for a random encoder, the one :func:`new_head` draws with that budget."""
    tokenizer, task = _ner_task()
    config = dataclasses.replace(
        CONFIG, vocab_size=tokenizer.vocab_size, max_position_embeddings=48, num_hidden_layers=2
    )
    torch.manual_seed(3)
    encoder = BertModel(config).eval() if pretrained else config
    tagger_config = finetune_budget(steps=4, batch_size=8, lr=1e-2)
    finetune_config = finetune_budget(steps=4, batch_size=8, lr=1e-3)
    expected_encoder = encoder if pretrained else new_head(task, config, seed=6).base_model
    before = {k: v.clone() for k, v in expected_encoder.state_dict().items()}
    runs, seeds = [], []

    def recording_finetune(task, model, run_config, seed=0):
        start = {k: v.clone() for k, v in model.state_dict().items()}
        result = finetune(task, model, run_config, seed)
        runs.append((task, model, run_config, start, result))
        seeds.append(seed)
        return result

    monkeypatch.setattr(features_module, "finetune", recording_finetune)
    f1 = frozen_and_fine_tuned(task, encoder, tagger_config, finetune_config, 5, 6)

    (tagger_task, tagger, tagger_run, _, tagger_result), (head_task, head, head_run, head_start, head_result) = runs
    assert f1 == {"frozen": tagger_result.scores["f1"], "fine-tuned": head_result.scores["f1"]}
    assert seeds == [5, 6]  # the tagger's seed, then the fine-tuning's
    assert 0.0 <= f1["frozen"] <= 1.0 and 0.0 <= f1["fine-tuned"] <= 1.0
    # frozen: a linear tagger on the last layer of this encoder, whose weights stay as they were
    assert isinstance(tagger, FeatureTagger) and tagger.lstm is None and tagger.layers == [2]
    assert tagger_run == tagger_config and tagger.classifier.out_features == len(NER_LABELS)
    torch.testing.assert_close(
        tagger_task.train.features["features"], extract_features(expected_encoder, task.train).features["features"]
    )
    if pretrained:
        assert all(torch.equal(v, before[k]) for k, v in encoder.state_dict().items())
    # fine-tuned: the task's head on a copy of the same encoder, and every weight of it trained
    assert isinstance(head, BertForTokenClassification) and head_task is task and head_run == finetune_config
    assert all(torch.equal(head_start[f"bert.{k}"], v) for k, v in before.items() if not k.startswith("pooler."))
    trained = {k: v for k, v in head.state_dict().items() if not k.startswith("bert.pooler.")}
    unchanged = [k for k, v in trained.items() if torch.equal(v, head_start[k]) and not k.endswith("position_ids")]
    assert not unchanged, unchanged


def test_principal_directions_span_the_top_eigenvectors_of_the_covariance():
    torch.manual_seed(4)
    encoded = extract_features(BertModel(CONFIG).eval(), _encoded())
    directions = principal_directions(encoded, "concat_last_four", 5, 6)
    assert directions.shape == (64, 6)
    rows = encoded.features["features"][:, :, [2, 3, 4, 5]].flatten(2)[encoded.features["attention_mask"].bool()]
    covariance = torch.cov(rows.double().T)  # an independent route: the covariance's eigenvectors
    _, vectors = torch.linalg.eigh(covariance)
    top = vectors[:, -6:].float()
    torch.testing.assert_close(directions @ directions.T, top @ top.T, atol=1e-3, rtol=1e-3)  # the same subspace
    with pytest.raises(ValueError, match="expected 1 <= k <= 16"):
        principal_directions(encoded, "last", 5, 17)


def test_a_projected_tagger_reads_the_features_through_the_fixed_matrix():
    torch.manual_seed(5)
    features = extract_features(BertModel(CONFIG).eval(), _encoded()).features["features"]
    mask = torch.ones(features.shape[:2], dtype=torch.long)
    projection = torch.randn(64, 16)
    tagger = FeatureTagger("concat_last_four", 5, 16, 3, lstm_size=None, projection=projection)
    assert tagger.classifier.in_features == 16 and "projection" not in dict(tagger.named_parameters())
    concat = torch.cat([features[:, :, j] for j in (2, 3, 4, 5)], -1)
    torch.testing.assert_close(
        tagger(features, mask).logits, concat @ projection @ tagger.classifier.weight.T + tagger.classifier.bias
    )
    with pytest.raises(ValueError, match="expected a projection with 16 rows"):
        FeatureTagger("last", 5, 16, 3, lstm_size=None, projection=projection)


def test_tuned_runs_give_every_recipe_the_same_steps_and_batch_and_pick_the_rate_on_dev(monkeypatch):
    """The fine-tuning and tagger budgets of section 7: equal in steps x batch, each rate chosen on dev."""
    task = Task("ner", BertForTokenClassification, 3, _encoded(), _encoded(), [])
    dev = dataclasses.replace(task, name="dev")
    budget = finetune_budget(steps=7, batch_size=5, lr=1.0)
    calls = []
    best_rate = {"fine-tuning": 2e-3, "tagger": 5e-2}

    def fake_run(on, recipe, config, seed):
        calls.append((recipe, on.name, config, seed))
        f1 = 1.0 - abs(config.lr - best_rate[recipe]) if on.name == "dev" else seed / 10
        return FinetuneResult(torch.nn.Linear(1, 1), {"f1": f1}, 0.0, None)

    monkeypatch.setattr(features_module, "score", lambda on, model: {"f1": 0.5})  # the test set's score
    tuned = {
        recipe: tuned_runs(fake_run, task, dev, budget, lrs, [3, 4, 5], "f1", args=(recipe,))
        for recipe, lrs in (("fine-tuning", (1e-3, 2e-3, 5e-3)), ("tagger", (1e-2, 5e-2, 1e-1)))
    }
    assert {config.steps * config.batch_size for _, _, config, _ in calls} == {7 * 5}  # the same for both recipes
    assert tuned["fine-tuning"].lr == 2e-3 and tuned["tagger"].lr == 5e-2
    for recipe, runs in tuned.items():
        mine = [(on, config) for r, on, config, _ in calls if r == recipe]
        assert [(on, seed) for r, on, _, seed in calls if r == recipe] == [("dev", 3)] * 3 + [("ner", 4), ("ner", 5)]
        assert all(c.lr == runs.lr for on, c in mine if on == "ner")
        assert runs.test_scores == [0.5, 0.4, 0.5]  # the first seed's dev-sweep model, scored on the test set
        assert runs.dev_scores == {c.lr: 1.0 - abs(c.lr - best_rate[recipe]) for on, c in mine if on == "dev"}
    with pytest.raises(ValueError, match="expected learning rates and seeds"):
        tuned_runs(fake_run, task, dev, budget, (), [0], "f1")


def test_feature_tagger_run_trains_a_linear_tagger_on_the_features():
    tokenizer, task = _ner_task()
    config = dataclasses.replace(CONFIG, vocab_size=tokenizer.vocab_size, max_position_embeddings=48)
    torch.manual_seed(6)
    features = with_features(task, BertModel(config).eval())
    result = feature_tagger_run(features, {"choice": "concat_last_four"}, finetune_budget(steps=3, batch_size=8), 2)
    assert isinstance(result.model, FeatureTagger) and result.model.lstm is None
    assert result.model.layers == [2, 3, 4, 5] and len(result.history.loss) == 3
    assert 0.0 <= result.scores["f1"] <= 1.0


def test_tuned_feature_taggers_are_tuned_runs_of_each_tagger():
    tokenizer, task = _ner_task()
    config = dataclasses.replace(CONFIG, vocab_size=tokenizer.vocab_size, max_position_embeddings=48)
    torch.manual_seed(7)
    features = with_features(task, BertModel(config).eval())
    budget, taggers = finetune_budget(steps=2, batch_size=8), [{"choice": "last"}, {"choice": "embeddings"}]
    together = tuned_feature_taggers(taggers, features, features, budget, (1e-2, 1e-1), [0, 1])
    alone = [
        tuned_runs(feature_tagger_run, features, features, budget, (1e-2, 1e-1), [0, 1], "f1", args=(t,))
        for t in taggers
    ]
    assert [(r.lr, r.dev_scores, r.test_scores) for r in together] == [
        (r.lr, r.dev_scores, r.test_scores) for r in alone
    ]
