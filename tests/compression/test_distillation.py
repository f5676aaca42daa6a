"""Distillation losses against their definitions written with PyTorch's own losses."""

import pytest
import torch
import torch.nn.functional as F

from lecture_lib.compression.distillation import (
    TripleLoss,
    cosine_hidden_loss,
    distillation_loss,
    soft_targets,
)


def logits(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_loss_is_zero_when_the_student_equals_the_teacher():
    teacher = logits(4, 7, 11)
    for t in (1.0, 2.0, 4.0):
        assert distillation_loss(teacher.clone(), teacher, t).abs() < 1e-6
        assert distillation_loss(teacher + 3.0, teacher, t).abs() < 1e-6  # a constant per row changes no softmax
        assert distillation_loss(logits(4, 7, 11, seed=1), teacher, t) > 0.01
    hidden = logits(4, 7, 16)
    assert cosine_hidden_loss(2 * hidden, hidden).abs() < 1e-6  # the angle, not the length


def test_loss_equals_distilberts_kldiv_times_t_squared_over_the_real_positions():
    s, t = logits(3, 5, 9, seed=2), logits(3, 5, 9, seed=3)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).bool()
    expected = torch.nn.KLDivLoss(reduction="batchmean")(F.log_softmax(s[mask] / 2, -1), F.softmax(t[mask] / 2, -1)) * 4
    torch.testing.assert_close(distillation_loss(s, t, 2.0, mask), expected)
    reference = torch.nn.CosineEmbeddingLoss()(s[mask], t[mask], torch.ones(int(mask.sum())))
    torch.testing.assert_close(cosine_hidden_loss(s, t, mask), reference)


def test_t_squared_keeps_the_gradient_size_at_high_temperature():
    """Hinton et al. §2.1: for large T, ∂KL/∂s_i ≈ (s_i − z_i) / (N T²), so T² · gradient hardly depends on T."""
    s = (0.1 * logits(64, 10, seed=4)).requires_grad_()
    z = 0.1 * logits(64, 10, seed=5)
    s0, z0 = s - s.mean(-1, keepdim=True), z - z.mean(-1, keepdim=True)
    norms = {}
    for t in (4.0, 8.0):
        (gradient,) = torch.autograd.grad(distillation_loss(s0, z0, t), s)
        norms[t] = gradient.norm()
        torch.testing.assert_close(gradient, ((s0 - z0) / 10 / 64).detach(), rtol=0.05, atol=1e-5)
    assert abs(norms[8.0] / norms[4.0] - 1) < 0.02
    (unscaled,) = torch.autograd.grad(distillation_loss(s0, z0, 8.0) / 64, s)
    assert unscaled.norm() < norms[8.0] / 50  # without T² the soft term would vanish as 1/T²


def test_soft_targets_and_the_triple_loss():
    z = torch.tensor([3.0, 1.0, 0.0])
    assert soft_targets(z, 1.0)[0] > soft_targets(z, 4.0)[0] > 1 / 3
    with pytest.raises(ValueError, match="temperature"):
        soft_targets(z, 0.0)
    s, t, h, g = logits(2, 3, 5), logits(2, 3, 5, seed=1), logits(2, 3, 8, seed=2), logits(2, 3, 8, seed=3)
    mlm = torch.tensor(1.5)
    terms = TripleLoss()(s, t, mlm, h, g)
    torch.testing.assert_close(terms["loss"], 5 * terms["ce"] + 2 * mlm + terms["cos"])
    only_soft = TripleLoss(alpha_mlm=0, alpha_cos=0)(s, t, mlm)
    assert only_soft.keys() == {"ce", "loss"}
    torch.testing.assert_close(only_soft["loss"], 5 * terms["ce"])
    with pytest.raises(ValueError, match="one shape"):
        distillation_loss(s, t[:, :2])
