"""The chapters' training and evaluation on an accelerator, checked on the CPU: each run below happens inside
:class:`tests.fake_accelerator.FakeAccelerator`, where the course's device is a simulated CUDA and a tensor
left on the host fails as it does on a GPU. Tiny sizes, a few steps each: the point is where every tensor
lives, not what the model learns. ``make gpu-check`` runs the same code on a real GPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lecture_lib.chapters import (
    ch01_attention,
    ch02_transformer,
    ch07_albert,
    ch09_t5_bart,
    ch11_bertology_probing,
    ch12_compression,
)
from lecture_lib.compression.distillation import TripleLoss
from lecture_lib.config import build_config
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.decoding import greedy_exact_match
from lecture_lib.finetuning.finetune import Task, finetune, finetune_budget, new_head
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.distilbert import distilbert_from_bert
from lecture_lib.models.heads import BertForSequenceClassification
from lecture_lib.pretraining import PretrainConfig, PretrainingData, PretrainResult, evaluate_left_to_right, pretrain
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer
from lecture_lib.train import TrainConfig
from tests.fake_accelerator import MISMATCH, FakeAccelerator


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch, tmp_path):
    """Every run is built here, not read from a cache a CPU run filled."""
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "cache"))


def test_chapter_02_trains_and_evaluates_its_transformer_on_the_accelerator():
    """The crash of notebook 02 on CUDA: ``train`` moved the model, the Seq2SeqBatch stayed on the CPU."""
    exp = ch02_transformer.reversal_experiment(d_model=16, ffn_dim=32)
    exp = dataclasses.replace(exp, train=dataclasses.replace(exp.train, steps=3, eval_every=2))
    test = exp.task.test_batch(8)
    with FakeAccelerator() as device:
        model, history = ch02_transformer.train_experiment(
            exp, evaluate=lambda m: {"exact_match": greedy_exact_match(m, test).float().mean().item()}, batch_size=4
        )
        assert next(model.parameters()).device == device
    assert len(history.loss) == 3 and [step for step, _ in history.evals] == [2, 3]


def test_chapter_01_trains_its_recurrent_models_on_the_accelerator_and_hands_them_to_the_cpu():
    exp = ch01_attention.Chapter01Config(
        hidden_size=8, min_len=3, max_len=4, train=TrainConfig(steps=2, batch_size=4, lr=3e-3)
    )
    with FakeAccelerator():
        model, history = ch01_attention.train_reversal(attention=True, exp=exp)
        accuracy = ch01_attention.accuracy_by_length(model, exp, per_length=4)
    assert next(model.parameters()).device == torch.device("cpu")  # the notebook's analysis runs there
    assert len(history.loss) == 2 and set(accuracy) == {3, 4}


def test_chapter_09_pretrains_fine_tunes_and_scores_t5_and_bart_on_the_accelerator():
    recipe = build_config(
        ch09_t5_bart.Chapter09Config,
        ch09_t5_bart.QUICK,
        dict(
            d_model=16,
            d_kv=4,
            d_ff=32,
            num_layers=1,
            pretrain=dict(steps=2, batch_size=4),
            finetune=dict(steps=2, batch_size=4),
            objectives=("random_spans",),
            noisings=("text_infilling",),
            train_examples=8,
            eval_examples=4,
            documents=20,
        ),
    )
    with FakeAccelerator():
        t5 = ch09_t5_bart.objective_runs(recipe, workers=1)  # in this process, where the accelerator is
        bart = ch09_t5_bart.noising_runs(recipe, workers=1)
    assert set(t5["runs"]) == {"no pretraining", "random_spans"}
    assert set(bart["runs"]) == {"text_infilling"}  # BART has no no-pretraining row


def test_chapter_12_distils_a_student_with_its_teacher_on_the_accelerator(tmp_path):
    """The crash of notebook 12 on CUDA: ``train`` moved the student and the batch, the teacher stayed on the CPU."""
    sentences = [s.text for s in SyntheticLanguage(0).sentences(200, seed=0)]
    tokenizer = WordPieceTokenizer.train(sentences, 150)
    torch.manual_seed(0)
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
    )
    pretrained = PretrainResult(teacher, tokenizer, history=None, config=None, path=tmp_path / "teacher")
    config = ch12_compression.chapter_config(distill_sentences=16, distill=dict(steps=2, batch_size=4))
    with FakeAccelerator():
        student = ch12_compression.distilled_student(pretrained, ch12_compression.StudentRecipe(TripleLoss()), config)
    assert student.config.n_layers == 1
    assert next(teacher.parameters()).device == torch.device("cpu")  # the notebook's teacher stays where it was


def test_chapter_11_trains_the_course_bert_further_and_asks_it_cloze_questions_on_the_accelerator():
    """Sections 6 and 7 with the course's BERT on a GPU: the further pretraining on the attractor and knowledge
    texts, and the cloze scores before and after (the crash: batches and queries built on the host)."""
    config = ch11_bertology_probing.Chapter11Config(
        **{
            **ch11_bertology_probing.QUICK,
            "agreement_per_bucket": 3,
            "attractor_text_sentences": 20,
            "attractor_steps": 2,
            "knowledge_steps": 2,
            "knowledge_people": 1,
        }
    )
    text = ch11_bertology_probing.attractor_text(config, 0)
    _, told = ch11_bertology_probing.knowledge_text(config, 0)
    tokenizer = WordPieceTokenizer.train([s.text for s in text + told] + ["is are"], vocab_size=200)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=len(tokenizer.vocab), **TINY_BERT | dict(max_position_embeddings=64))
    )
    with FakeAccelerator() as device:
        model.to(device)
        agreement = ch11_bertology_probing.attractor_run.__wrapped__(model, tokenizer, config, 0)
        knowledge = ch11_bertology_probing.knowledge_run.__wrapped__(model, tokenizer, config, 0)
    assert len(agreement["after"]) == 3 and set(knowledge["after"]) == set(ch11_bertology_probing.KNOWLEDGE_FREQUENCIES)


def test_chapter_07_fine_tunes_its_pair_models_on_the_date_gap_pairs_on_the_accelerator():
    pairs = ch07_albert.chapter_config(
        pairs=dict(
            model=dict(
                hidden_size=16, embedding_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
            ),
            data=dict(eval_pairs=16),
            train=dict(steps=2, batch_size=8, warmup_steps=1),
        )
    ).pairs
    with FakeAccelerator():
        scores = [ch07_albert.date_gap_score.__wrapped__(pairs, pretraining, 0) for pretraining in ("sop", None)]
    assert all(0 <= score <= 1 for score in scores)


def test_the_fake_accelerator_fails_as_cuda_does():
    with FakeAccelerator() as device:
        layer = torch.nn.Linear(3, 2).to(device)
        x = torch.ones(4, 3)
        with pytest.raises(RuntimeError, match=MISMATCH):
            layer(x)
        y = layer(x.to(device))
        assert y.device == device and y.is_cuda and not x.is_cuda
        assert (y + torch.tensor(1.0)).device == device  # a host scalar may join, as on CUDA
        assert y.detach().sum().item() == pytest.approx(float(layer(x.to(device)).detach().sum()))
        with pytest.raises(TypeError, match="numpy"):
            y.numpy()
        assert y.cpu().device == torch.device("cpu") and torch.equal(y.cpu(), y.detach().cpu())
        assert torch.zeros(2, device=y.device).device == device


def _tiny_task(vocab_size: int) -> Task:
    g = torch.Generator().manual_seed(0)
    features = dict(
        input_ids=torch.randint(5, vocab_size, (8, 6), generator=g),
        attention_mask=torch.ones(8, 6, dtype=torch.long),
        token_type_ids=torch.zeros(8, 6, dtype=torch.long),
        labels=torch.randint(2, (8,), generator=g),
    )
    return Task(
        "acceptability", BertForSequenceClassification, 2, EncodedTask(dict(features)), EncodedTask(dict(features)), []
    )


TINY_BERT = dict(
    hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, max_position_embeddings=16
)


def test_chapter_12_fine_tunes_a_student_on_its_teachers_soft_targets_on_the_accelerator():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, **TINY_BERT)
    teacher_on_task = BertForSequenceClassification(config, 2).eval()
    student = distilbert_from_bert(BertForPreTraining(config))
    task = _tiny_task(30)
    chapter = ch12_compression.chapter_config(finetune=dict(steps=2, batch_size=4), dark_knowledge_steps=2)
    with FakeAccelerator():
        head = ch12_compression.soft_or_hard_labels(student, teacher_on_task, task, 8, True, chapter)
        assert 0 <= ch12_compression.headline_score(head, task) <= 100
    assert next(teacher_on_task.parameters()).device == torch.device("cpu")


def test_pretraining_evaluation_and_fine_tuning_run_on_the_accelerator(minilm):
    """What chapters 04-12 build on: pretrain (with its evaluations), the left-to-right loss, fine-tune and score."""
    tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    config = PretrainConfig.from_dict(
        dict(model=TINY_BERT, data=dict(seq_len=16, eval_pairs=16), train=dict(batch_size=4, steps=2, eval_every=1)),
        dict(data=dict(vocab_size=tokenizer.vocab_size)),
    )
    data = PretrainingData.from_corpus(config, tokenizer=tokenizer)
    with FakeAccelerator() as device:
        result = pretrain(config, data=data, progress=False)
        left_to_right = evaluate_left_to_right(result.model, data.eval_batches(), tokenizer.mask_token_id)
        tuned = finetune(
            _tiny_task(100),
            new_head(_tiny_task(100), result.model.bert),
            finetune_budget(steps=2, batch_size=4),
        )
        assert next(tuned.model.parameters()).device == device
    assert len(result.history.evals) == 2 and left_to_right["lm_loss"] > 0 and "accuracy" in tuned.scores


def test_the_exercise_measurements_run_on_a_model_on_the_accelerator():
    """Exercises 1 of 06, 2 of 10 and 4 of 09 measure a model the student may have trained on a GPU, with a batch
    or ids built on the CPU (or on the model's device): each measurement must work where the model is."""
    from lecture_lib.analysis.attention_gradients import no_op_profile
    from lecture_lib.chapters import ch06_roberta_spanbert, ch10_bertology_attention
    from lecture_lib.models.bert import BertModel

    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(
            vocab_size=60,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    )
    recipe = build_config(
        ch09_t5_bart.Chapter09Config,
        ch09_t5_bart.QUICK,
        dict(d_model=16, d_kv=4, d_ff=32, num_layers=1, train_examples=8, eval_examples=4, documents=20),
    )
    data = ch09_t5_bart.TextToTextData(recipe)
    batch = data.finetuning_batches(4)(0)
    with FakeAccelerator() as device:
        bert.to(device)
        ids = torch.randint(5, 60, (2, 6), device=device)
        assert ch06_roberta_spanbert.left_padding_shift(bert, ids, 2) > 0
        pairs = dict(
            input_ids=torch.tensor([[2, 5, 6, 3], [2, 6, 7, 3]]), attention_mask=torch.ones(2, 4, dtype=torch.long)
        )
        profile = no_op_profile(
            ch10_bertology_attention.similarity_forward(bert),
            [pairs],
            {"[CLS]": lambda b: b["input_ids"] == 2},
            lambda b: b["attention_mask"].bool(),
        )
        assert (profile["[CLS]"].mass > 0).all() and (profile["[CLS]"].gradient > 0).all()
        assert all(parameter.grad is None for parameter in bert.parameters())  # the model is left untouched
        bart = ch09_t5_bart.tiny_bart(recipe, len(data.vocab)).to(device).eval()
        assert len(ch09_t5_bart.cross_attention_ratio(bart, batch)) == 1
