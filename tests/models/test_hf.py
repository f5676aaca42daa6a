"""lecture_lib.models.hf: checkpoints that transformers writes and reads, and clear errors for damaged ones."""

import json
import pickle

import pytest
import torch
import transformers

from lecture_lib.models.bert import BERT, BertConfig, BertForPreTraining, BertModel
from lecture_lib.models.heads import BertForQuestionAnswering, BertForSequenceClassification
from lecture_lib.models.hf import CorruptCheckpointError, Family

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=16,
)


def _ids():
    return torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(0))


@pytest.fixture
def checkpoint(tmp_path):
    torch.manual_seed(0)
    BertModel(BertConfig(**SMALL)).save_pretrained(tmp_path)
    return tmp_path


def test_a_head_saved_by_transformers_loads_here_and_ours_loads_there(tmp_path):
    torch.manual_seed(1)
    theirs = transformers.BertForSequenceClassification(
        transformers.BertConfig(**SMALL, num_labels=3, classifier_dropout=0.3)
    ).eval()
    theirs.save_pretrained(tmp_path / "theirs")  # writes id2label, not num_labels
    ours = BertForSequenceClassification.from_pretrained(tmp_path / "theirs")
    assert ours.num_labels == 3 and ours.classifier_dropout == 0.3
    torch.testing.assert_close(ours(_ids()).logits, theirs(_ids()).logits)

    ours.save_pretrained(tmp_path / "ours")
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["model_type"] == BERT.model_type
    again = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    assert again.config.num_labels == 3
    torch.testing.assert_close(again(_ids()).logits, theirs(_ids()).logits)


def test_an_encoder_checkpoint_starts_a_head_but_lacks_its_weights(checkpoint):
    with pytest.raises(ValueError, match=r"missing \['qa_outputs.bias', 'qa_outputs.weight'\]"):
        BertForQuestionAnswering.from_pretrained(checkpoint)


def test_another_family_is_refused(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(ValueError, match="expected a config with model_type 'bert', got 'roberta'"):
        BertModel.from_pretrained(checkpoint)


def test_a_rename_table_applies_both_ways():
    family = Family(
        "toy",
        dict,
        "ToyConfig",
        renames=(("attn.", "attention.self."),),
        old_names=(("LayerNorm.gamma", "LayerNorm.weight"),),
        dropped=("position_ids",),
    )
    assert family.to_theirs("layer.0.attn.query.weight") == "layer.0.attention.self.query.weight"
    assert family.to_ours("layer.0.attention.self.query.weight") == "layer.0.attn.query.weight"
    assert family.to_ours("layer.0.LayerNorm.gamma") == "layer.0.LayerNorm.weight"
    assert family.is_dropped("embeddings.position_ids") and not family.is_dropped("embeddings.word_embeddings")


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path):
    path.write_bytes(bytes(range(256)) * 8)


@pytest.mark.parametrize("damage", [_cut, _garbage], ids=["truncated", "garbage"])
def test_a_damaged_safetensors_file_names_itself_and_the_remedy(checkpoint, damage):
    damage(checkpoint / "model.safetensors")
    with pytest.raises(CorruptCheckpointError, match="model.safetensors is not a readable safetensors file") as info:
        BertModel.from_pretrained(checkpoint)
    assert f"delete the directory {checkpoint}" in str(info.value) and "Save the model there again" in str(info.value)


@pytest.mark.parametrize("damage", [_cut, _garbage], ids=["truncated", "garbage"])
def test_a_damaged_pytorch_file_names_itself_and_the_remedy(checkpoint, damage):
    state = BertModel.from_pretrained(checkpoint).state_dict()
    (checkpoint / "model.safetensors").unlink()
    torch.save(state, checkpoint / "pytorch_model.bin")
    damage(checkpoint / "pytorch_model.bin")
    with pytest.raises(
        CorruptCheckpointError, match="pytorch_model.bin is not a readable PyTorch weights file"
    ) as info:
        BertModel.from_pretrained(checkpoint)
    assert f"delete the directory {checkpoint}" in str(info.value)
    assert "weights_only" not in str(info.value)  # no advice to unpickle a file we could not trust


class _RunsCode:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_pickle_with_code_is_refused_and_never_run(checkpoint, capsys):
    (checkpoint / "model.safetensors").unlink()
    (checkpoint / "pytorch_model.bin").write_bytes(
        pickle.dumps({"embeddings.word_embeddings.weight": _RunsCode()}, protocol=2)
    )
    with pytest.raises(CorruptCheckpointError, match="objects other than tensors"):
        BertModel.from_pretrained(checkpoint)
    assert "this must never run" not in capsys.readouterr().out


@pytest.mark.parametrize("text", ['{"vocab_size": 97, "hidden', "\udcff", "[1, 2]"], ids=["cut", "not-utf8", "a-list"])
def test_a_damaged_config_names_itself(checkpoint, text):
    (checkpoint / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(CorruptCheckpointError, match="config.json is not a readable JSON config") as info:
        BertForPreTraining.from_pretrained(checkpoint)
    assert f"delete the directory {checkpoint}" in str(info.value)


def test_base_model_is_the_encoder_under_the_heads():
    config = BertConfig(**SMALL)
    pretraining, encoder = BertForPreTraining(config), BertModel(config)
    assert pretraining.base_model is pretraining.bert and encoder.base_model is encoder
    assert BertForPreTraining.base_model_prefix == transformers.BertForPreTraining.base_model_prefix
