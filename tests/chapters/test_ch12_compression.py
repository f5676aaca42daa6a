"""Chapter 12's glue: the distillation text, the objective on a tiny teacher, segment-free tasks."""

import dataclasses

import pytest
import torch

from lecture_lib.chapters.ch12_compression import (
    FULL,
    QUICK,
    chapter_config,
    distillation_objective,
    distillation_text,
    without_segments,
)
from lecture_lib.compression.distillation import TripleLoss
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import Task
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.models.albert import albert_from_bert
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.distilbert import distilbert_from_bert
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    sentences = [s.text for s in SyntheticLanguage(0).sentences(300, seed=0)]
    return WordPieceTokenizer.train(sentences, 200)


def test_profiles_build(monkeypatch):
    for name, sizes in (("quick", QUICK), ("full", FULL)):
        monkeypatch.setenv("LECTURE_PROFILE", name)
        config = chapter_config()
        assert config.distill_steps == sizes.get("distill_steps", 300)
    assert chapter_config(finetune=dict(steps=7)).finetune.steps == 7


def test_distillation_text_is_framed_single_sentences(tokenizer):
    config = chapter_config(distill_sentences=20)
    text = distillation_text(tokenizer, config)
    ids, mask, special = text["input_ids"], text["attention_mask"], text["special_tokens_mask"]
    assert ids.shape[0] == 20 and (ids[:, 0] == tokenizer.cls_token_id).all()
    lengths = mask.sum(1)
    assert all(ids[i, n - 1] == tokenizer.sep_token_id for i, n in enumerate(lengths.tolist()))
    assert int((ids == tokenizer.sep_token_id).sum()) == 20  # one segment per row
    assert torch.equal(special, (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id) | (mask == 0))


def test_the_objective_is_the_mlm_loss_alone_for_a_student_that_is_the_teacher(tokenizer):
    torch.manual_seed(0)
    teacher = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
    student = distilbert_from_bert(teacher, layers=[0, 1]).eval()
    text = distillation_text(tokenizer, chapter_config(distill_sentences=8))
    labels = torch.full_like(text["input_ids"], -100)
    labels[:, 1] = text["input_ids"][:, 1]
    batch = dict(input_ids=text["input_ids"], attention_mask=text["attention_mask"], labels=labels)
    loss = distillation_objective(teacher, TripleLoss())(student, batch)
    torch.testing.assert_close(loss, 2 * student(**batch).loss, atol=1e-4, rtol=1e-4)  # L_ce = L_cos = 0


def test_an_albert_style_student_takes_the_same_objective(tokenizer):
    torch.manual_seed(0)
    teacher = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=3,
                                            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
    student = albert_from_bert(teacher, 8, shared_layer=1)
    text = distillation_text(tokenizer, chapter_config(distill_sentences=8))
    labels = torch.full_like(text["input_ids"], -100)
    labels[:, 1] = text["input_ids"][:, 1]
    batch = dict(input_ids=text["input_ids"], attention_mask=text["attention_mask"], labels=labels)
    loss = distillation_objective(teacher, TripleLoss())(student, batch)  # the cosine term too: equal widths
    loss.backward()
    shared = student.albert.encoder.albert_layer_groups[0].albert_layers[0]
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert shared.ffn.weight.grad.abs().sum() > 0 and student.albert.embeddings.word_embeddings.weight.grad is not None
    assert all(p.grad is None for p in teacher.parameters())  # the teacher is a target


def test_without_segments_drops_only_the_segment_ids():
    features = dict(input_ids=torch.ones(3, 4, dtype=torch.long), attention_mask=torch.ones(3, 4, dtype=torch.long),
                    token_type_ids=torch.zeros(3, 4, dtype=torch.long), labels=torch.zeros(3, dtype=torch.long))
    task = Task("acceptability", object, 2, EncodedTask(dict(features)), EncodedTask(dict(features)), [])
    stripped = without_segments(task)
    assert set(stripped.train.features) == {"input_ids", "attention_mask", "labels"}
    assert "token_type_ids" in task.train.features and dataclasses.is_dataclass(stripped)
