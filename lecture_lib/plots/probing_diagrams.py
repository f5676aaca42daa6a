"""Chapter 11's diagram: a probe on one frozen layer, and the structural probe's distance.

Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
"""

from __future__ import annotations

from matplotlib.figure import Figure

from lecture_lib.plots.drawing import arrow, box, canvas, frame, label

_WORDS = ("the", "kind", "chefs", "are", "happy")


def probe_diagram(layers: int = 4, probed: int = 2) -> Figure:
    """Left, a probing classifier (Liu et al. 2019): the encoder's layers are frozen, one word's vector
    $h^{(\\ell)}_w$ of layer ``probed`` goes into a linear probe softmax($W h + b$), the only part that learns.
    Right, Hewitt and Manning's (2019) structural probe: two words' vectors of one layer, the projection
    $B$ of their difference, whose squared length is fitted to the number of edges between them in the tree.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if not 0 <= probed <= layers:
        raise ValueError(f"expected a probed layer in [0, {layers}], got {probed}")
    fig, ax = canvas(24.0, 9.6)
    step = 1.45
    rows = []
    for layer in range(layers + 1):
        y = 1.6 + layer * step
        rows.append(
            [
                box(
                    ax,
                    3.0 + 1.6 * i,
                    y,
                    "",
                    width=1.2,
                    height=0.5,
                    color="head" if (layer == probed and i == 1) else "state",
                )
                for i in range(len(_WORDS))
            ]
        )
        label(ax, 0.3, y, f"layer {layer}", ha="left")
    for i, word in enumerate(_WORDS):
        label(ax, rows[0][i].x, 0.8, word, italic=True)
    frame(ax, 2.2, 1.2, 10.2, rows[-1][0].y + 0.45)
    label(ax, 6.2, rows[-1][0].y + 0.85, "frozen encoder (no gradient)", bold=True)
    chosen = rows[probed][1]
    probe = box(ax, 14.2, chosen.y + 1.6, "linear probe\nsoftmax($W h + b$)", width=3.6, height=1.1, color="ffn")
    lane = chosen.y + step / 2
    arrow(ax, chosen.top, (chosen.x, lane), (11.2, lane), (11.2, probe.y), probe.left)
    label(ax, 11.4, lane - 0.35, "$h^{(\\ell)}_w$", ha="left")
    out = box(ax, 14.2, probe.y + 1.9, "label: number = Plur", width=3.6, height=0.6)
    arrow(ax, probe.top, out.bottom)
    label(ax, 14.2, 1.4, "only the probe learns;\nits test accuracy per layer\nis the probing curve", size=8)

    left, right = (
        box(ax, 18.0, 2.0, "$h_i$", width=1.0, height=0.6, color="state"),
        box(ax, 22.2, 2.0, "$h_j$", width=1.0, height=0.6, color="state"),
    )
    difference = box(ax, 20.1, 3.7, "$B(h_i - h_j)$", width=2.6, height=0.7, color="ffn")
    arrow(ax, left.top, difference.bottom_at(19.5))
    arrow(ax, right.top, difference.bottom_at(20.7))
    squared = box(ax, 20.1, 5.4, "$d_B^2 = \\|B(h_i - h_j)\\|^2$", width=4.2, height=0.7)
    arrow(ax, difference.top, squared.bottom)
    tree = box(
        ax,
        20.1,
        7.1,
        "$\\approx d_T(i, j)$: edges between\n$w_i$ and $w_j$ in the parse tree",
        width=4.6,
        height=1.0,
        color="head",
    )
    arrow(ax, squared.top, tree.bottom)
    label(ax, 20.1, 8.6, "structural probe", bold=True)
    return fig
