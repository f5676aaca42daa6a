"""The book's chapter map: which chapter to read before which, drawn as book/chapter_map.svg.

    .venv/bin/python book/chapter_map.py     # rewrite book/chapter_map.svg after changing READ_FIRST or LABELS

The intro page and the README show the SVG; tests/test_chapter_map.py fails when it is not what this script
draws. An arrow A -> B means "read A before B". Only the direct needs are listed: 06 needs 05, and so 04, 03, 02
and 01 before it, which the arrows 04 -> 05, 03 -> 04 and so on already say.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from lecture_lib.plots.drawing import arrow, box, canvas  # noqa: E402

SVG = Path(__file__).resolve().parent / "chapter_map.svg"

LABELS = {
    "01": "Attention",
    "02": "The Transformer",
    "03": "Tokenization",
    "04": "BERT pretraining",
    "05": "Fine-tuning BERT",
    "06": "RoBERTa, SpanBERT",
    "07": "ALBERT",
    "08": "ELECTRA",
    "09": "T5 and BART",
    "10": "BERTology I: heads",
    "11": "BERTology II: probes",
    "12": "Compression",
}
# chapter -> the chapters it builds on directly (their models, code or results)
READ_FIRST = {
    "02": ("01",),
    "04": ("02", "03"),
    "05": ("04",),
    "06": ("05",),
    "07": ("05",),
    "08": ("05",),
    "09": ("05",),
    "10": ("05",),
    "11": ("10",),
    "12": ("07", "10"),
}
# where each box sits (diagram units), and its colour: the foundations, BERT, its variants, BERTology, compression
PLACES = {
    "01": (6.7, 9.0),
    "03": (15.5, 9.0),
    "02": (6.7, 7.4),
    "04": (11.1, 5.8),
    "05": (11.1, 4.2),
    "06": (2.3, 2.6),
    "08": (6.7, 2.6),
    "09": (11.1, 2.6),
    "07": (15.5, 2.6),
    "10": (19.9, 2.6),
    "12": (15.5, 1.0),
    "11": (19.9, 1.0),
}
COLOURS = {
    "01": "attention",
    "02": "attention",
    "03": "attention",
    "04": "embedding",
    "05": "embedding",
    "06": "ffn",
    "07": "ffn",
    "08": "ffn",
    "09": "ffn",
    "10": "head",
    "11": "head",
    "12": "norm",
}


def chapter_map() -> Figure:
    """Each chapter a box, each arrow from a chapter to one that builds on it directly."""
    fig, ax = canvas(22.2, 9.8)
    boxes = {
        ch: box(ax, x, y, f"{ch}\n{LABELS[ch]}", width=4.1, height=1.1, color=COLOURS[ch], size=10)
        for ch, (x, y) in PLACES.items()
    }
    for chapter, needs in READ_FIRST.items():
        for need in needs:
            arrow(ax, boxes[need].bottom, boxes[chapter].top)
    return fig


def write_svg(path: Path = SVG) -> None:
    """The map as SVG, byte for byte the same on every run (no date, no random ids)."""
    with matplotlib.rc_context({"svg.hashsalt": "chapter-map", "svg.fonttype": "path"}):
        chapter_map().savefig(path, format="svg", metadata={"Date": None, "Creator": None})


if __name__ == "__main__":
    write_svg(Path(sys.argv[1]) if len(sys.argv) > 1 else SVG)
