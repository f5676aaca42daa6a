"""The pieces every diagram is drawn with: a canvas measured in diagram units, boxes, sum nodes, arrows, labels
and dashed frames around a repeated group.

A diagram places its boxes where they sit on the page and then connects them, so that its function reads like
the picture. Coordinates are diagram units with y pointing up; one unit is ``UNIT`` inches on the page, so a
box's text keeps its size whatever the diagram's size. Colours name what a box is (``COLORS``), the same in
every diagram: attention is orange, a feed-forward network blue, a LayerNorm yellow, an embedding pink.

Taught in: 01_attention ("Multi-head attention"), 02_transformer ("The whole model").
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path
from matplotlib.text import Text

UNIT = 0.42  # inches per diagram unit
FONT_SIZE = 8.5
COLORS = {
    "plain": "white",
    "attention": "#f8cba0",
    "ffn": "#b3d6f2",
    "norm": "#f6eda2",
    "embedding": "#f5c1cb",
    "head": "#bfe3b4",
    "state": "#e4e4e4",
    "rnn": "#d8cdf0",
    "faded": "#f2f2f2",
}
HEAD_COLORS = ("#e5746a", "#5b9bd5", "#70ad47", "#b07cc6", "#e0a030", "#4bacc6")  # one per attention head

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A box's centre and size in diagram units, and the points where arrows meet it.

    >>> b = Box(x=2.0, y=1.0, width=2.0, height=0.5)
    >>> b.top, b.bottom, b.left, b.right
    ((2.0, 1.25), (2.0, 0.75), (1.0, 1.0), (3.0, 1.0))
    >>> b.top_at(2.5), b.bottom_at(1.5)
    ((2.5, 1.25), (1.5, 0.75))
    """

    x: float
    y: float
    width: float
    height: float

    @property
    def top(self) -> Point:
        return (self.x, self.y + self.height / 2)

    @property
    def bottom(self) -> Point:
        return (self.x, self.y - self.height / 2)

    @property
    def left(self) -> Point:
        return (self.x - self.width / 2, self.y)

    @property
    def right(self) -> Point:
        return (self.x + self.width / 2, self.y)

    def top_at(self, x: float) -> Point:
        return (x, self.y + self.height / 2)

    def bottom_at(self, x: float) -> Point:
        return (x, self.y - self.height / 2)


def canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure of ``width`` x ``height`` diagram units whose one axes fills it, without ticks or frame."""
    if width <= 0 or height <= 0:
        raise ValueError(f"expected a positive width and height, got {width} x {height}")
    fig = plt.figure(figsize=(width * UNIT, height * UNIT))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def box(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    width: float = 2.0,
    height: float = 0.7,
    color: str = "plain",
    dashed: bool = False,
    faded: bool = False,
    bold: bool = False,
    size: float = FONT_SIZE,
) -> Box:
    """A rounded box centred on (x, y) with its text in the middle, filled with ``color`` (a name of ``COLORS`` or
    any matplotlib colour); ``faded`` greys out box and text (a pruned part), ``dashed`` draws its edge dashed
    (an optional part)."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0,rounding_size=0.12",
            linewidth=1.0,
            facecolor=COLORS["faded"] if faded else COLORS.get(color, color),
            edgecolor="#aaaaaa" if faded else "black",
            linestyle="--" if dashed else "-",
        )
    )
    label(ax, x, y, text, color="#999999" if faded else "black", bold=bold, size=size)
    return Box(x, y, width, height)


def sum_node(ax: Axes, x: float, y: float, symbol: str = "+", radius: float = 0.2) -> Box:
    """A small circle holding an operator, where a residual connection adds back in (or two inputs combine)."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="black", linewidth=1.0))
    label(ax, x, y, symbol, size=FONT_SIZE + 1)
    return Box(x, y, 2 * radius, 2 * radius)


def arrow(
    ax: Axes, *points: Point, color: str = "black", dashed: bool = False, head: bool = True, width: float = 1.0
) -> FancyArrowPatch:
    """A line through ``points`` (two or more, a polyline for a path around boxes) with its head on the last."""
    if len(points) < 2:
        raise ValueError(f"expected at least two points, got {len(points)}")
    patch = FancyArrowPatch(
        path=Path(points),
        arrowstyle="-|>" if head else "-",
        mutation_scale=9,
        color=color,
        linewidth=width,
        linestyle="--" if dashed else "-",
        shrinkA=0,
        shrinkB=0,
    )
    ax.add_patch(patch)
    return patch


def label(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    size: float = FONT_SIZE,
    ha: str = "center",
    va: str = "center",
    color: str = "black",
    bold: bool = False,
    italic: bool = False,
) -> Text:
    """Text at (x, y), centred on it unless ``ha``/``va`` say otherwise."""
    return ax.text(
        x,
        y,
        text,
        fontsize=size,
        ha=ha,
        va=va,
        color=color,
        fontweight="bold" if bold else "normal",
        fontstyle="italic" if italic else "normal",
        linespacing=1.25,
    )


def frame(
    ax: Axes, left: float, bottom: float, right: float, top: float, text: str | None = None, *, text_side: str = "left"
) -> Box:
    """A dashed rounded frame around a group of boxes (a block repeated N times), its text outside on one side."""
    if text_side not in ("left", "right"):
        raise ValueError(f"expected text_side 'left' or 'right', got {text_side!r}")
    ax.add_patch(
        FancyBboxPatch(
            (left, bottom),
            right - left,
            top - bottom,
            boxstyle="round,pad=0,rounding_size=0.25",
            facecolor="none",
            edgecolor="#777777",
            linestyle="--",
            linewidth=1.0,
        )
    )
    if text is not None:
        x = left - 0.15 if text_side == "left" else right + 0.15
        label(ax, x, (bottom + top) / 2, text, ha="right" if text_side == "left" else "left")
    return Box((left + right) / 2, (bottom + top) / 2, right - left, top - bottom)
