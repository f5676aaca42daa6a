"""lecture_lib.models.bert against transformers' BertModel and BertForPreTraining, on random and on real weights."""

import json
import time

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from lecture_lib.models.bert import (
    BertConfig,
    BertForPreTraining,
    BertModel,
    mlm_accuracy,
    training_flops_per_token,
)
from tests.hf_equivalence import assert_equivalent, assert_round_trip

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)


pytestmark = pytest.mark.usefixtures("float64")  # compare to ~1e-10, not float32 noise


def inputs(batch=3, length=9, vocab=97):
    input_ids = torch.randint(1, vocab, (batch, length))
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, 6:] = 0  # padded sequences, as in a real batch
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[0, 5:] = 1
    token_type_ids[1, 3:6] = 1
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def pretraining_labels(batch):
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 7]] = torch.tensor([5, 6, 7])
    labels[1, 2] = 11
    labels[2, 1] = 40
    return labels, torch.tensor([0, 1, 0])


def hf_pair(cls_ours, cls_hf, **config):
    hf_config = transformers.BertConfig(**{**SMALL, **config}, attn_implementation="eager")
    hf = getattr(transformers, cls_hf)(hf_config).eval()
    return cls_ours.from_hf(hf).eval(), hf


def grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("output_attentions", [True, False], ids=["explicit-attention", "fused-attention"])
def test_bert_model_equals_transformers(output_attentions):
    ours, hf = hf_pair(BertModel, "BertModel")
    batch = dict(inputs(), output_attentions=output_attentions, output_hidden_states=True)
    fields = ["last_hidden_state", "pooler_output", "hidden_states"] + ["attentions"] * output_attentions
    a, b = assert_equivalent(
        ours, hf, batch, lambda out: out.last_hidden_state.sum() + out.pooler_output.sum(), outputs=fields
    )
    assert len(a.hidden_states) == len(b.hidden_states) == 3
    if output_attentions:
        assert torch.all(a.attentions[0][1, :, :, 6:] == 0)  # nobody attends to padding
    else:
        assert a.attentions is None


def test_bert_for_pretraining_equals_transformers_logits_loss_and_gradients():
    ours, hf = hf_pair(BertForPreTraining, "BertForPreTraining", hidden_act="gelu")
    batch = inputs()
    labels, nsp = pretraining_labels(batch)
    batch = dict(batch, labels=labels, next_sentence_label=nsp, output_attentions=True)
    assert_equivalent(
        ours, hf, batch, lambda out: out.loss, outputs=["prediction_logits", "seq_relationship_logits", "attentions"]
    )
    # the MLM output matrix is the word-embedding matrix, in both
    assert ours.cls.predictions.decoder.weight is ours.base_model.embeddings.word_embeddings.weight


def test_training_mode_with_dropout_matches_transformers_under_the_same_seed():
    ours, hf = hf_pair(BertModel, "BertModel", hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.0)
    batch = inputs()
    ours.train(), hf.train()
    torch.manual_seed(1)
    a = ours(**batch).last_hidden_state
    torch.manual_seed(1)
    b = hf(**batch).last_hidden_state
    torch.testing.assert_close(a, b)


def test_masked_only_head_gives_the_same_loss_and_gradients():
    model = BertForPreTraining(BertConfig(**SMALL)).eval()
    batch = inputs()
    labels, nsp = pretraining_labels(batch)
    dense = model(**batch, labels=labels, next_sentence_label=nsp)
    dense.loss.backward()
    g_dense = {n: g.clone() for n, g in grads(model).items()}
    model.zero_grad()
    sparse = model(**batch, labels=labels, next_sentence_label=nsp, masked_only=True)
    sparse.loss.backward()
    assert sparse.prediction_logits.shape == (5, 97)
    torch.testing.assert_close(sparse.loss, dense.loss)
    torch.testing.assert_close(sparse.prediction_logits, dense.prediction_logits[labels != -100])
    for name, g in grads(model).items():
        torch.testing.assert_close(g, g_dense[name], msg=name)
    assert mlm_accuracy(sparse.prediction_logits, labels) == mlm_accuracy(dense.prediction_logits, labels)


def test_mlm_accuracy_counts_only_labelled_positions():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = logits[0, 1, 1] = logits[0, 2, 3] = 1.0  # argmax 2, 1, 3
    assert mlm_accuracy(logits, torch.tensor([[2, -100, 0]])) == (1, 2)


def test_round_trip_through_transformers_and_through_disk(tmp_path):
    ours = BertForPreTraining(BertConfig(**SMALL)).eval()
    assert_round_trip(ours)

    ours.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["model_type"] == "bert"
    loaded = BertForPreTraining.from_pretrained(tmp_path)
    encoder = BertModel.from_pretrained(tmp_path)  # a pretraining checkpoint feeds the bare encoder too
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = inputs()
    expected = ours(**batch)
    torch.testing.assert_close(loaded(**batch).prediction_logits, expected.prediction_logits)
    torch.testing.assert_close(theirs(**batch).prediction_logits, expected.prediction_logits)
    torch.testing.assert_close(encoder(**batch).last_hidden_state, ours.base_model(**batch).last_hidden_state)


def test_from_pretrained_reads_the_real_minilm_checkpoint_like_transformers(minilm):
    path = minilm
    torch.set_default_dtype(torch.float32)
    ours = BertModel.from_pretrained(path)
    theirs = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    tokenizer = transformers.BertTokenizerFast(str(path / "vocab.txt"))
    batch = dict(
        tokenizer(
            ["my dog is cute", "the bank of the river was muddy after the rain"],
            ["he likes playing", "she went to the bank"],
            padding=True,
            return_tensors="pt",
        )
    )
    a = ours(**batch, output_attentions=True)
    b = theirs(**batch, output_attentions=True)
    assert ours.config.num_hidden_layers == 6 and ours.config.hidden_size == 384
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state)
    torch.testing.assert_close(a.pooler_output, b.pooler_output)
    for x, y in zip(a.attentions, b.attentions):
        torch.testing.assert_close(x, y)
    # and without attentions, through PyTorch's fused kernel
    torch.testing.assert_close(ours(**batch).last_hidden_state, b.last_hidden_state, rtol=1e-4, atol=1e-4)


def test_checkpoint_layouts(tmp_path):
    """TensorFlow-era gamma/beta names and a pytorch_model.bin read with weights_only=True."""
    ours = BertModel(BertConfig(**SMALL))
    state = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in ours.state_dict().items()
    }
    torch.save({"bert." + k: v for k, v in state.items()}, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, "model_type": "bert"}))
    loaded = BertModel.from_pretrained(tmp_path)
    for k, v in ours.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v)
    with pytest.raises(ValueError, match="missing"):
        BertForPreTraining.from_pretrained(tmp_path)  # no pretraining heads in this checkpoint


def test_hub_names_fail_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache: nothing to fall back on
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    start = time.perf_counter()
    with pytest.raises(OSError, match="HF_HUB_OFFLINE"):
        BertModel.from_pretrained("google-bert/bert-base-uncased")
    assert time.perf_counter() - start < 5
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BertModel.from_pretrained(tmp_path / "no" / "such" / "dir")


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="position_embedding_type"):
        BertConfig.from_dict({"position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act="swish")
    model = BertForPreTraining(BertConfig(**SMALL))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        model(torch.ones(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.ones(2, 5))
    with pytest.raises(ValueError, match="masked_only"):
        model(torch.ones(2, 5, dtype=torch.long), masked_only=True)
    with pytest.raises(TypeError, match="BertForPreTraining"):
        BertForPreTraining.from_hf(transformers.BertModel(transformers.BertConfig(**SMALL)))


def test_flop_formula_matches_pytorch_flop_counter():
    torch.set_default_dtype(torch.float32)
    config = BertConfig(**{**SMALL, "max_position_embeddings": 64})
    model = BertForPreTraining(config)
    batch, length = 2, 64
    ids = torch.randint(1, 97, (batch, length))
    with FlopCounterMode(display=False) as counter:  # the written-out attention: the counter sees its products
        model(ids, output_attentions=True).prediction_logits.sum().backward()
    expected = training_flops_per_token(config, length) * batch * length
    # the counter also sees the pooler and NSP head, once per sequence: a fraction of a percent here
    assert counter.get_total_flops() == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("unpad", [False, True], ids=["padded", "unpadded"])
def test_torch_compile_gives_the_eager_loss_and_gradients(unpad):
    """Compiled through AOTAutograd (backend "aot_eager": the joint forward-backward graph that inductor would
    turn into kernels, run by PyTorch's own ops, so the test takes seconds on CPU instead of minutes).
    Data-dependent shapes (the masked positions, the packed tokens) split the graph; the result is the same."""
    model = BertForPreTraining(BertConfig(**SMALL)).eval()
    batch = inputs()
    labels, nsp = pretraining_labels(batch)
    batch = dict(batch, labels=labels, next_sentence_label=nsp, masked_only=True, unpad=unpad)
    torch._dynamo.reset()
    results = []
    for forward in (model, torch.compile(model, backend="aot_eager")):
        model.zero_grad(set_to_none=True)
        loss = forward(**batch).loss
        loss.backward()
        results.append((loss.detach(), {n: g.clone() for n, g in grads(model).items()}))
    (eager_loss, eager_grads), (compiled_loss, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, eager_loss, atol=1e-12, rtol=1e-12)
    assert compiled_grads.keys() == eager_grads.keys() and len(eager_grads) == len(list(model.parameters()))
    for name, g in compiled_grads.items():
        torch.testing.assert_close(g, eager_grads[name], atol=1e-12, rtol=1e-12, msg=name)
