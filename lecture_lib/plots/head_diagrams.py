"""Diagrams of chapter 10: a gate on every attention head (Michel et al., 2019).

Taught in: 10_bertology_attention ("Which heads matter").
"""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from lecture_lib.plots.drawing import HEAD_COLORS, arrow, box, canvas, label, sum_node


def head_masking_diagram(gates: Sequence[int] = (1, 0, 1, 1)) -> Figure:
    """Multi-head attention with a gate ξ_h on each head's output before the concatenation and W^O: a head
    whose gate is 0 (``gates[h] == 0``) is drawn faded, removed; its value rows and its columns of W^O are what
    pruning cuts out of the weights.

    Taught in: 10_bertology_attention ("Which heads matter").
    """
    if not gates or any(g not in (0, 1) for g in gates):
        raise ValueError(f"expected gates of 0 or 1, one per head, got {list(gates)}")
    heads = len(gates)
    width = 3.0 * heads + 0.6
    fig, ax = canvas(width, 8.4)
    x_input = box(ax, width / 2, 0.6, "x (T × H)", width=2.4, height=0.6, color="state")
    concat = box(
        ax,
        width / 2,
        5.4,
        r"concatenate $[\xi_1 \mathrm{head}_1; \dots; \xi_h \mathrm{head}_h]$",
        width=3.0 * heads - 0.4,
        height=0.6,
        color="state",
    )
    output = box(ax, width / 2, 6.6, "$W^O$", width=2.4, height=0.6, color="attention")
    arrow(ax, concat.top, output.bottom)
    arrow(ax, output.top, (output.x, 7.7))
    label(
        ax,
        0.2,
        7.6,
        "$\\xi = 1$: the model as trained\n$\\xi_h = 0$: head $h$ removed\n"
        "$I_h = \\mathbb{E}_x|\\partial L / \\partial \\xi_h|$ at $\\xi = 1$",
        ha="left",
        size=8,
        color="#555555",
    )
    for h, gate in enumerate(gates):
        x = 1.8 + 3.0 * h
        removed = gate == 0
        colour = HEAD_COLORS[h % len(HEAD_COLORS)]
        attention = box(
            ax,
            x,
            2.2,
            f"head {h + 1}\n" + r"softmax$(QK^\top\!/\sqrt{d})V$",
            width=2.7,
            height=0.9,
            color=colour,
            faded=removed,
        )
        arrow(ax, x_input.top, attention.bottom, color="#aaaaaa" if removed else "black")
        gate_node = sum_node(ax, x, 3.8, "×")
        arrow(ax, attention.top, gate_node.bottom, color="#aaaaaa" if removed else "black")
        arrow(ax, gate_node.top, concat.bottom_at(x), color="#aaaaaa" if removed else "black")
        label(
            ax,
            x + 0.35,
            3.8,
            f"$\\xi_{h + 1} = {gate}$",
            ha="left",
            color="#c0392b" if removed else "black",
            bold=removed,
        )
    return fig
