"""lecture_lib.chapters.ch07_albert: the parameter formulas against transformers' counts, Figure 1's measure
against a direct computation on transformers' hidden states, and the BERT twin."""

import math

import pytest
import torch
import transformers

from lecture_lib.chapters.ch07_albert import (
    bert_twin,
    chapter_config,
    count_on_meta,
    encoder_parameters,
    layer_transitions,
    main,
    paper_configs,
)
from lecture_lib.models.albert import AlbertConfig, AlbertForPreTraining
from lecture_lib.models.bert import BertConfig
from tests.command_line import assert_refused, refused_in_process, rule_rows, run_command, trap_pretraining

VARIANTS = [dict(), dict(num_hidden_groups=2), dict(num_hidden_groups=4, inner_group_num=2),
            dict(embedding_size=64, intermediate_size=100)]


@pytest.mark.parametrize("sizes", VARIANTS, ids=str)
def test_the_albert_formula_counts_what_transformers_builds(sizes):
    config = AlbertConfig(**{**dict(vocab_size=300, embedding_size=16, hidden_size=64, num_hidden_layers=4,
                                    num_attention_heads=4, intermediate_size=256), **sizes})
    assert encoder_parameters(config) == count_on_meta(lambda: transformers.AlbertModel(config.to_hf()))


@pytest.mark.parametrize("name", ["BERT base", "BERT large", "ALBERT base", "ALBERT xxlarge"])
def test_the_paper_configs_count_as_transformers_does(name):
    config = paper_configs()[name]
    hf_class = transformers.AlbertModel if isinstance(config, AlbertConfig) else transformers.BertModel
    assert encoder_parameters(config) == count_on_meta(lambda: hf_class(config.to_hf()))


def test_layer_transitions_are_the_mean_distance_and_angle_between_transformers_hidden_states():
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                          num_attention_heads=2, intermediate_size=32)
    ours = AlbertForPreTraining(config)
    hf = transformers.AlbertModel(config.to_hf()).eval()
    hf.load_state_dict({k.removeprefix("albert."): v for k, v in ours.state_dict().items()
                        if k.startswith("albert.")}, strict=False)
    batch = dict(input_ids=torch.randint(1, 50, (2, 5)), attention_mask=torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]),
                 token_type_ids=torch.zeros(2, 5, dtype=torch.long))
    curves = layer_transitions(ours, [batch])
    with torch.no_grad():
        states = hf(**batch, output_hidden_states=True).hidden_states
    tokens = [(b, t) for b in range(2) for t in range(5) if batch["attention_mask"][b, t]]
    for layer in range(3):
        x, y = states[layer], states[layer + 1]
        distance = sum(float((y[b, t] - x[b, t]).norm()) for b, t in tokens) / len(tokens)
        angle = sum(math.degrees(math.acos(min(1.0, float(x[b, t] @ y[b, t] / (x[b, t].norm() * y[b, t].norm())))))
                    for b, t in tokens) / len(tokens)
        assert curves["l2"][layer] == pytest.approx(distance, rel=1e-4)
        assert curves["angle"][layer] == pytest.approx(angle, rel=1e-3)


def test_the_bert_twin_has_the_albert_sizes_and_bert_layers():
    config = chapter_config()
    twin = bert_twin(config)
    assert isinstance(twin.model, BertConfig) and twin.data == config.data and twin.train == config.train
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "hidden_act", "initializer_range", "max_position_embeddings"):
        assert getattr(twin.model, name) == getattr(config.model, name), name


def test_the_command_line_takes_the_albert_recipe_and_its_own_fields(monkeypatch, capsys):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: python -m lecture_lib.chapters.ch07_albert")
    assert "--model.embedding_size " in help_text and "--model.num_hidden_groups " in help_text

    class Captured(Exception):
        pass

    def capture(config, **kwargs):
        raise Captured(config)

    monkeypatch.setattr("lecture_lib.pretraining.pretrain", capture)
    with pytest.raises(Captured) as captured:
        main(["--out", "x", "--model.embedding_size", "32", "--model.num_hidden_groups", "2",
              "--objective.pairs", "sop"])
    config = captured.value.args[0]
    assert isinstance(config.model, AlbertConfig)
    assert (config.model.embedding_size, config.model.num_hidden_groups, config.objective.pairs) == (32, 2, "sop")
    assert config.model.hidden_size == chapter_config().model.hidden_size  # the rest is the chapter's recipe


# ALBERT's own rules, then one row per rule of the recipe's fields (the family's fields included).
BAD_INPUT = [
    (["--model.num_hidden_groups", "3"], "--model.num_hidden_groups",
     "num_hidden_layers 4 is not divisible by num_hidden_groups 3 (each group serves L / G consecutive layers)"),
    (["--model.embedding_size", "0"], "--model.embedding_size", "expected a value >= 1, got 0"),
    (["--model.classifier_dropout_prob", "1.5"], "--model.classifier_dropout_prob", "expected a value in [0, 1]"),
    (["--objective.pairs", "rtd"], "--objective.pairs", "expected one of nsp, sop, got 'rtd'"),
]


def test_every_constrained_flag_is_refused_in_one_line_before_any_work(monkeypatch, tmp_path, capsys):
    trap_pretraining(monkeypatch, tmp_path)
    rows = BAD_INPUT + rule_rows(chapter_config)
    assert any(flag == "--model.inner_group_num" for _, flag, _ in rows)  # ALBERT's fields, not BERT's
    for argv, flag, reason in rows:
        assert_refused(*refused_in_process(main, ["--out", "run", *argv], capsys), flag, reason)
    assert not any(tmp_path.iterdir()), "no output folder, no cache entry"


def test_the_command_refuses_bad_input_as_a_user_sees_it(tmp_path):
    argv, flag, reason = BAD_INPUT[0]
    result = run_command("lecture_lib.chapters.ch07_albert", ["--out", "run", *argv], tmp_path)
    assert_refused(result.returncode, result.stderr, result.stdout, flag, reason)
    assert not any(tmp_path.iterdir())
