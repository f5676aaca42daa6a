"""Chapter 12's glue: the distillation text, the objective on a tiny teacher, segment-free tasks."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from lecture_lib.chapters.ch12_compression import (
    FULL,
    QUICK,
    _masked_batches,
    _student_head,
    chapter_config,
    distillation_objective,
    distillation_text,
    kept_squared_norm,
    masked_word_accuracy,
    scratch_student,
    seeded,
    soft_or_hard_labels,
    student_on_task,
    students_on_task_in_parallel,
    without_segments,
)
from lecture_lib.compression.distillation import TripleLoss, soft_gradient_norm
from lecture_lib.compression.pruning import magnitude_prune_, sparsity_of
from lecture_lib.compression.quantization import encoder_linears, model_bytes, weight_rounding_error
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import Task, finetune, finetune_budget
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.models.albert import albert_from_bert
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.distilbert import (
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    distilbert_from_bert,
)
from lecture_lib.models.heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    sentences = [s.text for s in SyntheticLanguage(0).sentences(300, seed=0)]
    return WordPieceTokenizer.train(sentences, 200)


def test_profiles_build(monkeypatch):
    for name, sizes in (("quick", QUICK), ("full", FULL)):
        monkeypatch.setenv("LECTURE_PROFILE", name)
        config = chapter_config()
        assert (config.distill.steps, config.distill.batch_size, config.distill.lr) == tuple(
            sizes["distill"][k] for k in ("steps", "batch_size", "lr")
        )
        assert config.distill.warmup_steps == sizes["distill"]["steps"] // 10
        assert (config.distill.schedule, config.distill.num_threads, config.distill.fused) == ("linear", 1, True)
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
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
    student = distilbert_from_bert(teacher, layers=[0, 1]).eval()
    text = distillation_text(tokenizer, chapter_config(distill_sentences=8))
    labels = torch.full_like(text["input_ids"], -100)
    labels[:, 1] = text["input_ids"][:, 1]
    batch = dict(input_ids=text["input_ids"], attention_mask=text["attention_mask"], labels=labels)
    loss = distillation_objective(teacher, TripleLoss())(student, batch)
    torch.testing.assert_close(loss, 2 * student(**batch).loss, atol=1e-4, rtol=1e-4)  # L_ce = L_cos = 0


def test_seeded_changes_the_distillation_and_the_fine_tuning_seeds_only():
    config = chapter_config()
    run = seeded(config, 2)
    assert run.seed == 2 and run.finetune_seed == 2
    assert dataclasses.replace(run, seed=config.seed, finetune_seed=config.finetune_seed) == config


def test_masked_word_accuracy_counts_right_masked_tokens_for_a_teacher_and_its_whole_copy(tokenizer):
    """The teacher and a student with all its layers (segment folded in) predict the same words; the share
    equals a count by hand over the same draw of masked sentences."""
    torch.manual_seed(0)
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
    config = chapter_config(distill_sentences=64, distill=dict(batch_size=8))
    ours = masked_word_accuracy(teacher, tokenizer, config, batches=2)
    assert ours == masked_word_accuracy(distilbert_from_bert(teacher, layers=[0, 1]), tokenizer, config, batches=2)
    draw = _masked_batches(distillation_text(tokenizer, config), tokenizer, seeded(config, -1))
    right = total = 0
    for step in range(2):
        batch = draw(step)
        with torch.no_grad():
            logits = teacher(batch["input_ids"], batch["attention_mask"]).prediction_logits
        for b, t in (batch["labels"] != -100).nonzero().tolist():
            right += int(logits[b, t].argmax() == batch["labels"][b, t])
            total += 1
    assert ours == pytest.approx(100 * right / total)


def test_an_albert_style_student_takes_the_same_objective(tokenizer):
    torch.manual_seed(0)
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
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
    features = dict(
        input_ids=torch.ones(3, 4, dtype=torch.long),
        attention_mask=torch.ones(3, 4, dtype=torch.long),
        token_type_ids=torch.zeros(3, 4, dtype=torch.long),
        labels=torch.zeros(3, dtype=torch.long),
    )
    task = Task("acceptability", object, 2, EncodedTask(dict(features)), EncodedTask(dict(features)), [])
    stripped = without_segments(task)
    assert set(stripped.train.features) == {"input_ids", "attention_mask", "labels"}
    assert "token_type_ids" in task.train.features and dataclasses.is_dataclass(stripped)


def test_soft_and_hard_labels_learn_from_one_sample_drawn_with_the_fine_tuning_seed(monkeypatch, tmp_path):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    n = 40
    features = dict(
        input_ids=torch.arange(n).unsqueeze(1).repeat(1, 4),  # row i is made of token i: its identity
        attention_mask=torch.ones(n, 4, dtype=torch.long),
        token_type_ids=torch.zeros(n, 4, dtype=torch.long),
        labels=torch.arange(n) % 2,
    )
    task = Task("acceptability", object, 2, EncodedTask(dict(features)), EncodedTask(dict(features)), [])
    student = distilbert_from_bert(BertForPreTraining(_tiny_classifier().config))
    samples = {}

    def one_epoch(head, batches, loss_fn, tune, progress):  # train's place: record the rows of one batch
        samples[len(samples)] = set(batches(0)["input_ids"][:, 0].tolist())

    monkeypatch.setattr("lecture_lib.chapters.ch12_compression.train", one_epoch)
    for soft, seed in ((False, 0), (True, 0), (False, 1)):
        soft_or_hard_labels(student, _tiny_classifier(), task, 8, soft, seeded(chapter_config(), seed))
    assert len(samples[0]) == 8 and samples[0] == samples[1]  # soft and hard targets: the same 8 sentences
    assert samples[0] != samples[2]  # another fine-tuning seed draws another sample


def test_students_fine_tuned_two_at_a_time_are_those_the_kernel_fine_tunes(monkeypatch, tmp_path):
    """students_on_task_in_parallel fine-tunes in worker processes and student_on_task then reads each student from
    the cache: weight for weight what student_on_task trains in this process from an empty cache."""
    n = 40
    features = dict(
        input_ids=torch.arange(n).unsqueeze(1).repeat(1, 4) + 5,  # row i repeats token i + 5, past the special ids
        attention_mask=torch.ones(n, 4, dtype=torch.long),
        token_type_ids=torch.zeros(n, 4, dtype=torch.long),
        labels=torch.arange(n) % 2,
    )
    task = Task("acceptability", BertForSequenceClassification, 2, EncodedTask(features), EncodedTask(features), [])
    budget = finetune_budget(steps=6, batch_size=8, lr=1e-2, num_threads=1, fused=True)
    config = dataclasses.replace(chapter_config(), finetune=budget)
    teacher = BertForPreTraining(_tiny_classifier().config)
    runs = [
        (distilbert_from_bert(teacher), task, config),
        (distilbert_from_bert(teacher), task, seeded(config, 1)),  # the same student, another fine-tuning seed
        (albert_from_bert(teacher, 8, shared_layer=1), task, config),
    ]
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "workers"))
    students_on_task_in_parallel(runs)
    with monkeypatch.context() as cache_only:  # each student is now read back, not fine-tuned again
        cache_only.setattr("lecture_lib.chapters.ch12_compression.finetune", _refuse)
        from_workers = [student_on_task(*run) for run in runs]
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "kernel"))
    for run, theirs in zip(runs, from_workers):
        mine = student_on_task(*run)
        for (name, a), b in zip(mine.state_dict().items(), theirs.state_dict().values()):
            assert torch.equal(a, b), name
    first, second = (dict(m.named_parameters()) for m in from_workers[:2])
    assert not torch.equal(first["classifier.weight"], second["classifier.weight"])  # the seeds made two runs
    start = dict(runs[0][0].named_parameters())["distilbert.embeddings.word_embeddings.weight"]
    assert not torch.equal(first["distilbert.embeddings.word_embeddings.weight"], start)  # fine-tuning moved them


def _refuse(*args, **kwargs):
    raise AssertionError("fine-tuned again: the run was not in the cache")


def _tiny_classifier(vocab_size: int = 200) -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(
        BertConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=32,
        ),
        2,
    )


def test_exercise_1_without_t_squared_the_soft_gradient_falls_sixteenfold_from_t2_to_t8():
    """Exercise 1: on section 2's logits, the unscaled soft term's gradient norm is 16.0 times smaller at T = 8
    than at T = 2 ((8/2)^2), the T²-scaled one the same within 1%; the norms are PyTorch's KL's."""
    g = torch.Generator().manual_seed(0)
    student, teacher = 0.1 * torch.randn(256, 10, generator=g), 0.1 * torch.randn(256, 10, generator=g)
    norms = {}
    for t in (2, 8):
        norms[t] = soft_gradient_norm(student, teacher, t), soft_gradient_norm(student, teacher, t, scaled=False)
        s = student.clone().requires_grad_()
        kl = F.kl_div(F.log_softmax(s / t, -1), F.softmax(teacher / t, -1), reduction="batchmean")
        (bare,) = torch.autograd.grad(kl, s)
        assert norms[t] == pytest.approx((t**2 * float(bare.norm()), float(bare.norm())), rel=1e-5)
    assert norms[2][1] / norms[8][1] == pytest.approx(16, rel=0.01)
    assert norms[8][0] / norms[2][0] == pytest.approx(1, abs=0.01)


def test_exercise_2_per_tensor_scales_round_about_1_4_times_worse_than_per_channel():
    """Exercise 2: on a tiny random BERT, quantize_weights_ per tensor leaves about 1.4 times the per-channel
    rounding error from 8 down to 3 bits, and more at every width down to 1; the errors are those of PyTorch's
    fake-quantization ops."""
    model = _tiny_classifier()
    weights = [layer.weight.detach() for _, _, layer in encoder_linears(model)]
    norm = sum(float(w.pow(2).sum()) for w in weights) ** 0.5
    for bits in (8, 6, 4, 3, 2):
        levels = 2 ** (bits - 1) - 1
        tensor_error = sum(
            float(
                (torch.fake_quantize_per_tensor_affine(w, float(w.abs().max()) / levels, 0, -levels, levels) - w)
                .pow(2)
                .sum()
            )
            for w in weights
        )
        channel_error = sum(
            float(
                (
                    torch.fake_quantize_per_channel_affine(
                        w, w.abs().amax(1) / levels, torch.zeros(w.shape[0], dtype=torch.int32), 0, -levels, levels
                    )
                    - w
                )
                .pow(2)
                .sum()
            )
            for w in weights
        )
        per_tensor, per_channel = weight_rounding_error(model, bits, False), weight_rounding_error(model, bits, True)
        assert per_tensor == pytest.approx(tensor_error**0.5 / norm, rel=1e-4)
        assert per_channel == pytest.approx(channel_error**0.5 / norm, rel=1e-4)
        assert (1.3 < per_tensor / per_channel < 1.6) if bits >= 3 else per_tensor > per_channel, bits
    assert weight_rounding_error(model, 1, False) > weight_rounding_error(model, 1, True)
    assert all(torch.equal(w, layer.weight) for w, (_, _, layer) in zip(weights, encoder_linears(model)))


def test_exercise_3_fine_tuning_with_the_masks_in_place_keeps_exactly_half_the_weights_zero():
    """Exercise 3: magnitude_prune_ at 0.5 then finetune: the sparsity is exactly 0.5 after training, the zeros
    are the globally smallest half of the weights before it (torch.kthvalue), and the other weights moved."""
    model = _tiny_classifier(30)
    g = torch.Generator().manual_seed(0)
    features = dict(
        input_ids=torch.randint(5, 30, (32, 8), generator=g),
        attention_mask=torch.ones(32, 8, dtype=torch.long),
        token_type_ids=torch.zeros(32, 8, dtype=torch.long),
        labels=torch.randint(2, (32,), generator=g),
    )
    task = Task(
        "acceptability", BertForSequenceClassification, 2, EncodedTask(dict(features)), EncodedTask(dict(features)), []
    )
    before = [layer.weight.detach().clone() for _, _, layer in encoder_linears(model)]
    threshold = torch.cat([w.abs().flatten() for w in before]).kthvalue(sum(w.numel() for w in before) // 2).values
    layers = magnitude_prune_(model, 0.5)
    finetune(task, model, finetune_budget(steps=20, batch_size=8, lr=1e-3))
    assert sparsity_of(layers) == 0.5
    for w, layer in zip(before, layers):
        kept = w.abs() > threshold
        assert torch.equal(layer.weight != 0, kept)
        assert bool((layer.weight[kept] != w[kept]).float().mean() > 0.9)  # trained


def test_exercise_4_the_factorised_table_keeps_the_top_e_squared_singular_values():
    """Exercise 4: kept_squared_norm is the share of ‖W‖² in the truncated SVD's rank-E table and in
    albert_from_bert's factorised table (about 0.22 at E = 4 and 0.67 at E = 16 on a tiny random BERT of width 32,
    all of it at E = H = 32); the larger E, the larger the student (model_bytes)."""
    torch.manual_seed(0)
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=200,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=32,
        )
    )
    W = teacher.bert.embeddings.word_embeddings.weight.detach()
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    shares, sizes = {}, {}
    for e in (4, 16, 32):
        shares[e] = kept_squared_norm(W, e)
        truncated = (U[:, :e] * S[:e]) @ Vh[:e]
        assert shares[e] == pytest.approx(float(truncated.pow(2).sum() / W.pow(2).sum()), rel=1e-4)
        student = albert_from_bert(teacher, e, 1)
        table = student.albert.embeddings.word_embeddings.weight.detach()  # (V, E) = U_E S_E
        assert shares[e] == pytest.approx(float(table.pow(2).sum() / W.pow(2).sum()), rel=1e-4)
        sizes[e] = model_bytes(student)
    assert abs(shares[4] - 0.22) < 0.02 and abs(shares[16] - 0.67) < 0.02 and shares[32] == pytest.approx(1.0)
    assert sizes[4] < sizes[16] < sizes[32] < model_bytes(teacher)


def test_the_config_refuses_sizes_that_cannot_run_and_takes_the_claims_seeds(monkeypatch):
    monkeypatch.setenv("LECTURE_SEEDS", "3,4,5")
    assert chapter_config().seeds == (3, 4, 5)
    with pytest.raises(ValueError, match="distill.steps: expected a value >= 1, got 0"):
        chapter_config(distill=dict(steps=0))
    with pytest.raises(ValueError, match="distill.lr: expected a value >= 0, got -1"):
        chapter_config(distill=dict(lr=-1))
    assert chapter_config(distill=dict(steps=45)).distill.warmup_steps == 4  # the warm-up follows the steps
    with pytest.raises(ValueError, match="bits: expected bit widths from 1 to 8"):
        chapter_config(bits=(9,))
    with pytest.raises(ValueError, match="sparsities: expected shares in"):
        chapter_config(sparsities=(1.0,))


def test_the_scratch_student_has_the_students_shape_and_its_seeds_weights(tokenizer):
    teacher = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
    pretrained = SimpleNamespace(model=teacher)
    a, b, c = (scratch_student(pretrained, seeded(chapter_config(), seed)) for seed in (0, 0, 1))
    assert a.config.n_layers == 2 and a.config.dim == 32
    weight = "distilbert.encoder.layer.0.attention.self.query.weight"
    assert torch.equal(a.state_dict()[weight], b.state_dict()[weight])
    assert not torch.equal(a.state_dict()[weight], c.state_dict()[weight])


def test_a_student_is_fine_tuned_with_its_own_family_s_head_for_the_task_shape():
    """A DistilBERT student takes the sentence or token head of its family; an ALBERT student has a sentence head
    only, and a task shape without a head of the family is refused by name."""
    teacher = BertForPreTraining(
        BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    )
    distilled, albert = distilbert_from_bert(teacher), albert_from_bert(teacher, 8, shared_layer=1)

    def task(head):
        return SimpleNamespace(name=head.__name__, head=head)

    assert _student_head(distilled, task(BertForSequenceClassification)) is DistilBertForSequenceClassification
    assert _student_head(distilled, task(BertForTokenClassification)) is DistilBertForTokenClassification
    with pytest.raises(ValueError, match="BertForTokenClassification"):
        _student_head(albert, task(BertForTokenClassification))
    with pytest.raises(ValueError, match="BertForQuestionAnswering"):
        _student_head(distilled, task(BertForQuestionAnswering))
