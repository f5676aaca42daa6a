"""Diagrams of chapter 12, one per method: DistilBERT's three losses between teacher and student, symmetric
int8 quantization and dequantization, and the masks of unstructured and structured pruning.

Taught in: 12_compression ("A DistilBERT-style student", "Quantization from scratch", "Pruning").
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lecture_lib.plots.drawing import arrow, box, canvas, label

_LOSS = "#c0392b"


def distillation_diagram() -> Figure:
    """Teacher and student read the same masked sentence; the student's loss is 5·L_ce (its softened
    predictions against the teacher's, T = 2) + 2·L_mlm (against the true token) + 1·L_cos (its last hidden
    states against the teacher's). The student starts from every other teacher layer.

    Taught in: 12_compression ("A DistilBERT-style student").
    """
    fig, ax = canvas(17.0, 8.0)
    box(ax, 8.5, 0.6, "the cat [MASK] on the mat", width=5.0, height=0.6, color="state")
    teacher = [
        box(ax, 3.0, 1.9 + 1.0 * i, f"teacher layer {i}", width=2.8, height=0.7, color="attention") for i in range(4)
    ]
    student = [box(ax, 14.0, 2.4 + 2.0 * i, f"student layer {i}", width=2.8, height=0.7, color="ffn") for i in range(2)]
    for lower, upper in zip(teacher, teacher[1:]):
        arrow(ax, lower.top, upper.bottom)
    arrow(ax, student[0].top, student[1].bottom)
    arrow(ax, (8.5, 0.9), teacher[0].bottom)
    arrow(ax, (8.5, 0.9), student[0].bottom)
    for s, t in ((0, 0), (1, 2)):  # one layer out of two
        arrow(ax, teacher[t].right, student[s].left, dashed=True, color="#777777")
    label(ax, 8.5, 3.45, "initialised from\nteacher layers 0, 2", color="#777777", size=7.5)
    t_out = box(ax, 3.0, 6.4, "softmax(z / T)", width=2.8, height=0.6, color="head")
    s_out = box(ax, 14.0, 6.4, "softmax(s / T)", width=2.8, height=0.6, color="head")
    arrow(ax, teacher[-1].top, t_out.bottom)
    arrow(ax, student[-1].top, s_out.bottom)
    ce = box(ax, 8.5, 7.3, r"$5\,L_{ce}$: KL(teacher $\|$ student) $\times T^2$", width=5.6, height=0.6, color="white")
    arrow(ax, t_out.top, (3.0, 7.3), ce.left, color=_LOSS)
    arrow(ax, s_out.top, (14.0, 7.3), ce.right, color=_LOSS)
    cos = box(ax, 8.5, 5.3, r"$1\,L_{cos}$: 1 − cos(h$_s$, h$_t$)", width=4.2, height=0.6, color="white")
    arrow(ax, teacher[-1].right, (5.5, 5.3), cos.left, color=_LOSS)
    arrow(ax, student[-1].top_at(13.2), (13.2, 5.3), cos.right, color=_LOSS)
    mlm = box(ax, 16.0, 7.3, r"$2\,L_{mlm}$" + '\n"sat"', width=1.6, height=0.9, color="white")
    arrow(ax, s_out.right, (16.0, 6.4), mlm.bottom, color=_LOSS)
    label(ax, 3.0, 7.75, "teacher (frozen)", bold=True)
    label(ax, 14.0, 7.75, "student", bold=True)
    return fig


def quantization_diagram(values: tuple[float, ...] = (-0.62, -0.31, -0.04, 0.09, 0.35, 0.9), bits: int = 3) -> Figure:
    """Symmetric quantization of a few numbers: the scale s = max|x| / q_max, the integer grid q ∈ [−q_max,
    q_max], each x rounded to its nearest grid point and read back as s·q, an error of at most s/2.

    Taught in: 12_compression ("Quantization from scratch").
    """
    levels = 2 ** (bits - 1) - 1
    x = torch.tensor(values)
    scale = float(x.abs().max()) / levels
    q = torch.clamp(torch.round(x / scale), -levels, levels)
    fig, ax = canvas(16.4, 5.2)
    left, right = 2.6, 15.0

    def place(v: float) -> float:
        return left + (v + levels * scale) / (2 * levels * scale) * (right - left)

    for y, name in ((3.9, "float x"), (1.4, "integers q")):
        arrow(ax, (left - 0.3, y), (right + 0.3, y), head=False, color="#777777")
        label(ax, left - 0.5, y, name, ha="right", size=8)
    for k in range(-levels, levels + 1):
        ax.plot([place(k * scale)] * 2, [1.25, 1.55], color="black", lw=1)
        label(ax, place(k * scale), 1.0, f"{k}", size=7.5)
        ax.plot([place(k * scale)] * 2, [3.8, 4.0], color="#bbbbbb", lw=1)
    for v, k in zip(x.tolist(), q.tolist()):
        ax.plot(place(v), 3.9, "o", color="#2e75b6", ms=5)
        label(ax, place(v), 4.35, f"{v:+.2f}", size=7)
        arrow(ax, (place(v), 3.75), (place(k * scale), 1.65), color="#2e75b6", width=0.8)
    label(
        ax,
        8.8,
        2.75,
        rf"$q = \mathrm{{clamp}}(\mathrm{{round}}(x / s), -{levels}, {levels})$,  "
        rf"$s = \max|x| / {levels} = {scale:.3f}$;  read back: $\hat x = s\,q$, $|x - \hat x| \leq s/2$",
        size=8,
        color="#333333",
    )
    label(
        ax,
        8.8,
        0.35,
        f"{bits} bits here for a picture; int8 has the same rule with q_max = 127",
        size=7.5,
        color="#666666",
    )
    return fig


def pruning_masks_diagram(size: int = 8, seed: int = 0) -> Figure:
    """One weight matrix (rows: output neurons, columns: inputs) pruned three ways: unstructured magnitude
    pruning (scattered zeros, same shape), neurons removed (whole rows and, in the next layer, columns), a head
    removed (the head's block of rows in Q, K, V and its columns in W^O).

    Taught in: 12_compression ("Pruning").
    """
    g = torch.Generator().manual_seed(seed)
    weights = torch.randn(size, size, generator=g)
    unstructured = weights.abs() > weights.abs().flatten().kthvalue(size * size // 2).values
    neurons = torch.ones(size, size, dtype=torch.bool)
    neurons[[1, 4, 6]] = False
    head = torch.ones(size, size, dtype=torch.bool)
    head[size // 2 :] = False
    fig, ax = canvas(17.0, 6.6)
    for k, (mask, title, note) in enumerate(
        (
            (unstructured, "magnitude: 50% smallest |w| zeroed", "same shape: a dense kernel\nmultiplies the zeros"),
            (neurons, "FFN neurons: whole rows", "the matrix loses rows:\nsmaller and faster"),
            (head, "a head: its block of rows", "Q, K, V lose the head's rows,\nW^O its columns"),
        )
    ):
        x0 = 0.8 + 5.6 * k
        cell = 4.2 / size
        for i in range(size):
            for j in range(size):
                kept = bool(mask[i, j])
                ax.add_patch(
                    Rectangle(
                        (x0 + j * cell, 5.2 - (i + 1) * cell),
                        cell,
                        cell,
                        facecolor="#5b9bd5" if kept else "white",
                        edgecolor="#999999",
                        lw=0.5,
                    )
                )
        label(ax, x0 + 2.1, 5.65, title, size=8, bold=True)
        label(ax, x0 + 2.1, 0.45, note, size=7.5, color="#555555")
    return fig
