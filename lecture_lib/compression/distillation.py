"""Knowledge distillation (Hinton et al. 2015; Sanh et al. 2019): a student trained on a teacher's soft targets.

The teacher's logits z, softened by a temperature T, give the targets the student's logits s are pulled to::

    p_i(T) = exp(z_i / T) / Σ_j exp(z_j / T)
    L_ce   = T² · KL(p(T) ‖ q(T)),    q(T) the student's softmax at the same T

At large T the gradient of KL with respect to s_i is about (s_i − z_i) / (N T²) (for zero-mean logits over
N classes), so the factor T² keeps the soft term's gradients the same size whatever T. DistilBERT adds the
masked-LM loss on the true tokens and a cosine loss pulling the student's last hidden states towards the
teacher's (same width, so no projection), and sums them with weights α::

    L = α_ce · L_ce + α_mlm · L_mlm + α_cos · L_cos,    (α_ce, α_mlm, α_cos) = (5, 2, 1),  T = 2

Taught in: 12_compression ("Distillation from first principles", "A DistilBERT-style student").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn


def soft_targets(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(z / T) over the last axis: T = 1 is the usual softmax, larger T flattens it.

    >>> soft_targets(torch.tensor([2.0, 0.0]), 1.0), soft_targets(torch.tensor([2.0, 0.0]), 4.0)
    (tensor([0.8808, 0.1192]), tensor([0.6225, 0.3775]))

    Taught in: 12_compression ("Distillation from first principles").
    """
    if temperature <= 0:
        raise ValueError(f"expected a temperature > 0, got {temperature}")
    return F.softmax(logits / temperature, dim=-1)


def _selected(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The rows of x (..., D) where ``mask`` (...) is true, as (N, D); every row without a mask."""
    if mask is None:
        return x.reshape(-1, x.shape[-1])
    if mask.shape != x.shape[:-1]:
        raise ValueError(f"expected a mask of shape {tuple(x.shape[:-1])}, got {tuple(mask.shape)}")
    return x[mask.bool()]


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    temperature: float = 2.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """T² · KL(softmax(z/T) ‖ softmax(s/T)), averaged over the rows (positions) where ``mask`` is true.

    The teacher's logits are targets: no gradient flows into them. Zero when the student's logits equal
    the teacher's (up to a constant per row).

    Taught in: 12_compression ("Distillation from first principles").
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"expected student and teacher logits of one shape, got {tuple(student_logits.shape)} "
            f"and {tuple(teacher_logits.shape)}"
        )
    s = _selected(student_logits, mask)
    t = _selected(teacher_logits.detach(), mask)
    log_q = F.log_softmax(s / temperature, dim=-1)
    log_p = F.log_softmax(t / temperature, dim=-1)
    kl = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    return kl * temperature**2


def soft_gradient_norm(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float, scaled: bool = True
) -> float:
    """‖∂L/∂s‖ of the soft term at ``temperature``: L = :func:`distillation_loss` (``scaled``), or the plain KL
    without the factor T², whose gradient falls as 1/T² (sixteen times from T = 2 to T = 8). Exercise 1 of
    chapter 12.
    """
    s = student_logits.detach().requires_grad_()
    loss = distillation_loss(s, teacher_logits, temperature)
    (gradient,) = torch.autograd.grad(loss if scaled else loss / temperature**2, s)
    return float(gradient.norm())


def cosine_hidden_loss(
    student_hidden: torch.Tensor, teacher_hidden: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean of 1 − cos(h_student, h_teacher) over the positions where ``mask`` is true (DistilBERT's L_cos).

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    if student_hidden.shape != teacher_hidden.shape:
        raise ValueError(
            f"expected hidden states of one shape, got {tuple(student_hidden.shape)} and {tuple(teacher_hidden.shape)}"
        )
    s, t = _selected(student_hidden, mask), _selected(teacher_hidden.detach(), mask)
    return (1 - F.cosine_similarity(s, t, dim=-1)).mean()


@dataclass(frozen=True)
class TripleLoss:
    """DistilBERT's weights and temperature: α_ce · L_ce + α_mlm · L_mlm + α_cos · L_cos (a weight 0 drops a term).

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    alpha_ce: float = 5.0
    alpha_mlm: float = 2.0
    alpha_cos: float = 1.0
    temperature: float = 2.0

    def __call__(
        self,
        student_logits: torch.Tensor,
        teacher_logits: torch.Tensor,
        mlm_loss: torch.Tensor,
        student_hidden: torch.Tensor | None = None,
        teacher_hidden: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """The terms with a weight (``"ce"``, ``"mlm"``, ``"cos"``) and their weighted sum ``"loss"``, over the
        real (unpadded) positions ``mask``; the hidden states are needed only when ``alpha_cos`` is not 0."""
        terms = {}
        if self.alpha_ce:
            terms["ce"] = distillation_loss(student_logits, teacher_logits, self.temperature, mask)
        if self.alpha_mlm:
            terms["mlm"] = mlm_loss
        if self.alpha_cos:
            if student_hidden is None or teacher_hidden is None:
                raise ValueError("alpha_cos > 0 needs the student's and the teacher's hidden states")
            terms["cos"] = cosine_hidden_loss(student_hidden, teacher_hidden, mask)
        if not terms:
            raise ValueError("expected at least one loss weight above 0")
        weights = {"ce": self.alpha_ce, "mlm": self.alpha_mlm, "cos": self.alpha_cos}
        terms["loss"] = sum(weights[k] * terms[k] for k in list(terms))
        return terms


class DistillationObjective(nn.Module):
    """``loss_fn(student, batch)`` for :func:`~lecture_lib.train.train` that reads a teacher: ``loss(student,
    teacher, batch)``. The objective holds a frozen copy of the teacher (eval mode, no gradients) as a
    submodule, so the loop moves it to the student's device with the objective: a student on the GPU never
    meets a teacher left on the CPU, and the caller's teacher stays where it was.

    Taught in: 12_compression ("A DistilBERT-style student").
    """

    def __init__(self, teacher: nn.Module, loss: Callable[[nn.Module, nn.Module, Any], torch.Tensor]) -> None:
        super().__init__()
        self.teacher = copy.deepcopy(teacher).eval().requires_grad_(False)
        self.loss = loss

    def forward(self, student: nn.Module, batch: Any) -> torch.Tensor:
        self.teacher.eval()
        return self.loss(student, self.teacher, batch)
