"""lecture_lib.finetuning.peft: which weights each method trains, that adapters start as the identity, and prompt
tuning against transformers run on the same weights with the prompt written into inputs_embeds."""

import pytest
import torch

from lecture_lib.finetuning.peft import (
    ADAPTER_POSITIONS,
    AdaptedLinear,
    Adapter,
    PromptTuning,
    add_adapters,
    bitfit,
    count_parameters,
    freeze_encoder,
)
from lecture_lib.models.bert import BertConfig
from lecture_lib.models.heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

CONFIG = BertConfig(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=24,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def _batch():
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 50, (3, 7), generator=g)
    input_ids[:, 0] = 2
    attention_mask = torch.ones(3, 7, dtype=torch.long)
    attention_mask[1, 5:] = 0
    token_type_ids = torch.zeros(3, 7, dtype=torch.long)
    token_type_ids[:, 4:] = 1
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def _model(cls=BertForTokenClassification, **kwargs):
    torch.manual_seed(1)
    return cls(CONFIG, **kwargs).eval()


def _trainable(model):
    return {n for n, p in model.named_parameters() if p.requires_grad}


def test_freeze_encoder_trains_the_head_only():
    model = freeze_encoder(_model(num_labels=5))
    assert _trainable(model) == {"classifier.weight", "classifier.bias"}
    assert count_parameters(model) == 16 * 5 + 5
    assert count_parameters(model, trainable_only=False) == sum(p.numel() for p in model.parameters())


def test_bitfit_trains_biases_and_head():
    model = bitfit(_model(num_labels=5))
    encoder_biases = [n for n, _ in model.named_parameters() if n.startswith("bert.") and n.endswith(".bias")]
    assert _trainable(model) == set(encoder_biases) | {"classifier.weight", "classifier.bias"}
    # per layer: q, k, v, attention output, 2 LayerNorms (16 each), intermediate (32), output (16); embeddings' LayerNorm
    assert count_parameters(model) == 2 * (6 * 16 + 32 + 16) + 16 + (16 * 5 + 5)


def test_adapters_start_as_the_identity_and_train_with_layernorms():
    model = _model(num_labels=5)
    before = model(**_batch()).logits
    add_adapters(model, bottleneck=3)
    torch.testing.assert_close(model(**_batch()).logits, before)
    adapter = 16 * 3 + 3 + 3 * 16 + 16
    layer_norms = 2 * (2 * 2 * 16) + 2 * 16
    assert count_parameters(model) == 2 * 2 * adapter + layer_norms + (16 * 5 + 5)
    labels = torch.randint(0, 5, (3, 7))
    model(**_batch(), labels=labels).loss.backward()
    assert model.base_model.encoder.layer[0].output.dense.adapter.up.weight.grad.abs().sum() > 0
    assert model.base_model.encoder.layer[0].output.dense.linear.weight.grad is None


@pytest.mark.parametrize("positions", [ADAPTER_POSITIONS, ("feed-forward",)])
def test_exercise_4_adapters_count_2hm_plus_h_plus_m_per_position(positions):
    """Exercise 4: an adapter of bottleneck m on width H = 16 holds 2Hm + H + m weights (those of a Linear(H, m)
    and a Linear(m, H)); the trainable count is L · positions · that, linear in m, plus the LayerNorms and the head,
    so one adapter per layer (after the feed-forward block only) halves the adapters' share."""
    layer_norms = sum(p.numel() for n, p in _model(num_labels=5).named_parameters() if "LayerNorm" in n)
    per_adapter = {}
    for m in (2, 8, 32):
        model = add_adapters(_model(num_labels=5), bottleneck=m, positions=positions)
        adapters = [module for module in model.modules() if isinstance(module, Adapter)]
        assert len(adapters) == 2 * len(positions)
        pair = torch.nn.Linear(16, m), torch.nn.Linear(m, 16)
        per_adapter[m] = sum(p.numel() for linear in pair for p in linear.parameters())
        assert per_adapter[m] == 2 * 16 * m + 16 + m
        assert count_parameters(model) == 2 * len(positions) * per_adapter[m] + layer_norms + 16 * 5 + 5
        attention_adapted = isinstance(model.bert.encoder.layer[0].attention.output.dense, AdaptedLinear)
        assert attention_adapted == ("attention" in positions)
        torch.testing.assert_close(model(**_batch()).logits, _model(num_labels=5)(**_batch()).logits)
    assert per_adapter[32] - per_adapter[8] == 4 * (per_adapter[8] - per_adapter[2])  # linear in m
    with pytest.raises(ValueError, match="expected positions"):
        add_adapters(_model(num_labels=5), positions=("after the pooler",))


def _hf_with_prompt(model, prompt, batch, **labels):
    """transformers' model on inputs_embeds = [CLS] prompt tokens..., the real tokens at their own positions."""
    hf = model.to_hf()
    k = prompt.shape[0]
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    words = hf.bert.embeddings.word_embeddings(ids)
    embeds = torch.cat([words[:, :1], prompt.expand(3, k, -1), words[:, 1:]], 1)
    positions = torch.arange(7).expand(3, 7)

    def insert(x, v):
        return torch.cat([x[:, :1], torch.full((3, k), v, dtype=x.dtype), x[:, 1:]], 1)

    return hf(
        inputs_embeds=embeds,
        attention_mask=insert(mask, 1),
        token_type_ids=insert(types, 0),
        position_ids=insert(positions, 0),
        **labels,
    )


def test_prompt_tuning_equals_transformers_with_the_prompt_in_inputs_embeds():
    model = _model(BertForSequenceClassification, num_labels=3)
    tuned = PromptTuning(model, num_prompts=4)
    assert _trainable(tuned) == {"prompt", "model.classifier.weight", "model.classifier.bias"}
    labels = torch.tensor([0, 2, 1])
    ours = tuned(**_batch(), labels=labels)
    theirs = _hf_with_prompt(model, tuned.prompt.detach(), _batch(), labels=labels)
    torch.testing.assert_close(ours.logits, theirs.logits)
    torch.testing.assert_close(ours.loss, theirs.loss)
    ours.loss.backward()
    assert tuned.prompt.grad.abs().sum() > 0
    assert model.base_model.embeddings.word_embeddings.weight.grad is None
    plain = model(**_batch()).logits  # the hook is gone once the call returns
    torch.testing.assert_close(plain, model.to_hf()(**_batch()).logits)


def test_prompt_tuning_token_and_span_outputs_drop_the_prompt_positions():
    model = _model(num_labels=5)
    tuned = PromptTuning(model, num_prompts=3)
    labels = torch.randint(0, 5, (3, 7))
    labels[:, 0] = -100
    out = tuned(**_batch(), labels=labels)
    hf_labels = torch.cat([labels[:, :1], torch.full((3, 3), -100), labels[:, 1:]], 1)
    theirs = _hf_with_prompt(model, tuned.prompt.detach(), _batch(), labels=hf_labels)
    assert out.logits.shape == (3, 7, 5)
    torch.testing.assert_close(out.logits, torch.cat([theirs.logits[:, :1], theirs.logits[:, 4:]], 1))
    torch.testing.assert_close(out.loss, theirs.loss)

    qa = _model(BertForQuestionAnswering)
    tuned = PromptTuning(qa, num_prompts=2)
    start, end = torch.tensor([4, 5, 1]), torch.tensor([5, 6, 3])
    out = tuned(**_batch(), start_positions=start, end_positions=end)
    theirs = _hf_with_prompt(qa, tuned.prompt.detach(), _batch(), start_positions=start + 2, end_positions=end + 2)
    assert out.start_logits.shape == (3, 7)
    torch.testing.assert_close(out.end_logits, torch.cat([theirs.end_logits[:, :1], theirs.end_logits[:, 3:]], 1))
    torch.testing.assert_close(out.loss, theirs.loss)


def test_bad_input():
    with pytest.raises(ValueError, match="expected num_prompts >= 1, got 0"):
        PromptTuning(_model(), num_prompts=0)
