"""The course's diagrams, drawn by code so that they build offline and can be regenerated: one function per
diagram, each callable without arguments and returning its matplotlib Figure.

Every label uses the name the notebook uses for the same thing (a module attribute such as ``self_attn``, a
symbol of the equations such as $\\alpha^t$), so a diagram can be read next to the code it illustrates. The
pieces (boxes, arrows, sum nodes) come from :mod:`lecture_lib.plots.drawing`.

Taught in: 01_attention ("Attention in equations", "Multi-head attention"), 02_transformer ("The whole model"),
04_bert_pretraining ("Pretraining, then fine-tuning", "The input: three embeddings"), 07_albert
("Factorized embeddings"), 08_electra
("Replaced-token detection"), 09_t5_bart ("Span corruption, exactly").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lecture_lib.data.toy import BOS, EOS, PAD
from lecture_lib.decoding import BeamStep, beam_search_one
from lecture_lib.objectives.span_corruption import noise_spans, span_corrupt
from lecture_lib.plots.drawing import COLORS, HEAD_COLORS, Box, arrow, box, canvas, frame, label, sum_node

_ACCENT = "#c0504d"  # what a diagram points out: the query, the memory, the path of the best hypothesis

# ----------------------------------------------------------------------------------------------- chapter 01


def seq2seq_attention_diagram() -> Figure:
    """A recurrent encoder-decoder with attention at decoder step t: the query $s_t$ scores every encoder state
    $h_i$, the softmax turns the scores $e^t$ into weights $\\alpha^t$, and their weighted sum $a_t$ is
    concatenated with $s_t$ to predict the next token.

    Taught in: 01_attention ("Attention in equations").
    """
    fig, ax = canvas(17, 11)
    weights = (0.08, 0.12, 0.62, 0.18)  # an example attention distribution over the four source positions
    xs = [1.6 + 1.9 * i for i in range(len(weights))]
    encoder = [box(ax, x, 2.2, f"$h_{i + 1}$", width=1.1, height=0.8, color="rnn") for i, x in enumerate(xs)]
    for i, (x, h) in enumerate(zip(xs, encoder)):
        label(ax, x, 0.8, f"$x_{i + 1}$")
        arrow(ax, (x, 1.05), h.bottom)
    for a, b in zip(encoder, encoder[1:]):
        arrow(ax, a.right, b.left)
    label(ax, xs[0] - 0.7, 0.25, "encoder GRU reads the source", ha="left", italic=True)

    decoder = [
        box(ax, x, 2.2, text, width=1.1, height=0.8, color="rnn")
        for x, text in ((10.4, "$s_1$"), (12.3, "$s_2$"), (14.2, "$s_t$"))
    ]
    for d, text in zip(decoder, ("<s>", "$y_1$", "$y_{t-1}$")):
        label(ax, d.x, 0.8, text)
        arrow(ax, (d.x, 1.05), d.bottom)
    arrow(ax, decoder[0].right, decoder[1].left)
    arrow(ax, decoder[1].right, decoder[2].left, dashed=True)
    label(ax, 9.8, 0.25, "decoder GRU, fed tgt_in", ha="left", italic=True)
    arrow(ax, encoder[-1].right, decoder[0].left)
    label(ax, 8.5, 1.55, "$h_N$ starts\nthe decoder", size=7.5)

    # scores: one dot product per encoder state, all with the same query s_t
    dots = [sum_node(ax, x, 3.4, symbol="·") for x in xs]
    for h, d in zip(encoder, dots):
        arrow(ax, h.top, d.bottom)
    query = decoder[-1]
    arrow(ax, query.top, (query.x, 3.4), (dots[-1].right[0] + 0.05, 3.4), color=_ACCENT)
    for a, b in zip(dots, dots[1:]):
        arrow(ax, (b.left[0], 3.4), a.right, color=_ACCENT)
    label(ax, 11.4, 3.7, "query $s_t$: scores $e^t_i = s_t^\\top h_i$", color=_ACCENT)

    softmax = box(ax, (xs[0] + xs[-1]) / 2, 4.45, "softmax", width=xs[-1] - xs[0] + 1.2, height=0.55, color="plain")
    for d in dots:
        arrow(ax, d.top, softmax.bottom_at(d.x))
    bar_base, bar_height = 4.95, 2.2
    for x, w in zip(xs, weights):
        ax.add_patch(_bar(x, bar_base, 0.7, w * bar_height))
        label(ax, x, bar_base + w * bar_height + 0.22, f"{w:.2f}", size=7.5)
    label(ax, xs[-1] + 0.8, bar_base + 0.6, "attention\ndistribution $\\alpha^t$", ha="left")

    context = box(ax, softmax.x, 7.7, "$a_t = \\sum_i \\alpha^t_i h_i$", width=3.0, height=0.8, color="attention")
    for x, w in zip(xs, weights):
        arrow(
            ax,
            (x, bar_base + w * bar_height + 0.45),
            context.bottom_at(context.x + (x - context.x) * 0.4),
            width=0.6 + 3 * w,
        )
    concat = box(ax, query.x, 7.7, "$[a_t; s_t]$", width=1.8, height=0.7, color="state")
    arrow(ax, query.top, concat.bottom)
    arrow(ax, context.right, concat.left)
    label(ax, (context.right[0] + concat.left[0]) / 2, 7.95, "attention output $a_t$", size=7.5)
    layer = box(ax, query.x, 8.95, "$\\tanh(W_c[a_t; s_t])$", width=2.6, height=0.7, color="ffn")
    arrow(ax, concat.top, layer.bottom)
    output = box(ax, query.x, 10.2, "softmax: $P(y_t)$", width=2.6, height=0.7, color="head")
    arrow(ax, layer.top, output.bottom)
    label(ax, 0.3, 10.3, "Attention at decoder step t", ha="left", bold=True, size=10)
    return fig


def _bar(x: float, base: float, width: float, height: float) -> Rectangle:
    return Rectangle(
        (x - width / 2, base), width, height, facecolor=COLORS["attention"], edgecolor="black", linewidth=0.8
    )


def multi_head_attention_diagram(num_heads: int = 4) -> Figure:
    """Multi-head attention in four steps: project with q_proj, k_proj, v_proj; split the width E into
    ``num_heads`` heads of width d = E/h; attend in every head at once; concatenate and project with out_proj.

    Taught in: 01_attention ("Multi-head attention").
    """
    if not 1 <= num_heads <= len(HEAD_COLORS):
        raise ValueError(f"expected 1 to {len(HEAD_COLORS)} heads, got {num_heads}")
    fig, ax = canvas(17, 12.4)
    roles = {"Q": "q_proj  $W^Q$", "K": "k_proj  $W^K$", "V": "v_proj  $W^V$"}
    xs = (2.0, 5.3, 8.6)
    cell = 0.55  # width of one head's slice of a vector
    heads_x = [1.5 + 7.6 * (i + 0.5) / num_heads for i in range(num_heads)]
    head_boxes = [
        box(ax, x, 6.2, f"head {i + 1}", width=min(1.6, 7.6 / num_heads - 0.2), height=0.8, color="attention")
        for i, x in enumerate(heads_x)
    ]
    for j, (x, (role, projection)) in enumerate(zip(xs, roles.items())):
        inputs = box(ax, x, 0.7, role, width=2.2, height=0.6, color="state")
        proj = box(ax, x, 2.1, projection, width=2.6, height=0.7, color="ffn")
        arrow(ax, inputs.top, proj.bottom)
        slices = _split_vector(ax, x, 3.6, num_heads, cell)
        arrow(ax, proj.top, (x, 3.6 - 0.2))
        for i, (piece, head) in enumerate(zip(slices, head_boxes)):
            offset = 0.3 * (j - 1)  # Q, K and V arrive side by side
            arrow(ax, piece.top, head.bottom_at(head.x + offset), color=HEAD_COLORS[i], width=0.9)
    concat = _split_vector(ax, 5.3, 8.0, num_heads, 0.9)
    for i, (head, piece) in enumerate(zip(head_boxes, concat)):
        arrow(ax, head.top, piece.bottom, color=HEAD_COLORS[i], width=0.9)
    out_proj = box(ax, 5.3, 9.5, "out_proj  $W^O$", width=2.6, height=0.7, color="ffn")
    arrow(ax, (5.3, 8.2), out_proj.bottom)
    output = box(ax, 5.3, 10.9, "MultiHead(Q, K, V)", width=3.2, height=0.7, color="state")
    arrow(ax, out_proj.top, output.bottom)

    steps = (
        (2.1, "1. project: one E × E matrix per role"),
        (3.6, "2. split the width E into h heads\n    of width d = E / h"),
        (6.2, "3. attend in every head at once:\n    head$_i$ = softmax($Q_i K_i^\\top / \\sqrt{d}$) $V_i$"),
        (8.0, "4. concatenate the heads ..."),
        (9.5, "    ... and project with $W^O$"),
    )
    for y, text in steps:
        label(ax, 10.6, y, text, ha="left")
    label(ax, 0.3, 12.0, f"Multi-head attention, h = {num_heads} heads", ha="left", bold=True, size=10)
    return fig


def _split_vector(ax: Axes, x: float, y: float, pieces: int, cell: float) -> list[Box]:
    """A vector drawn as ``pieces`` coloured slices side by side, centred on (x, y): one slice per head."""
    left = x - pieces * cell / 2
    return [
        box(ax, left + cell * (i + 0.5), y, str(i + 1), width=cell, height=0.4, size=7, color=HEAD_COLORS[i])
        for i in range(pieces)
    ]


# ----------------------------------------------------------------------------------------------- chapter 02

_F_HEIGHT, _NORM_HEIGHT, _GAP = 0.9, 0.5, 0.35  # a sublayer's box, a LayerNorm's box, the space between parts


def _residual_sublayer(
    ax: Axes,
    x: float,
    y: float,
    name: str,
    norm_name: str,
    *,
    norm_first: bool,
    width: float,
    bypass: str = "left",
    path_color: str | None = None,
) -> tuple[float, Box]:
    """One sublayer F inside its residual connection, entered at (x, y) from below; returns the height where it
    exits and F's box.

    Post-LN: F, then add the input back, then LayerNorm. Pre-LN: LayerNorm, then F, then add the input back.
    With ``path_color`` the residual stream (the bypass and everything above the addition) is drawn thick in
    that colour: in pre-LN it reaches the exit through the addition only, in post-LN through the LayerNorm.
    """
    order = ("norm", "F", "add") if norm_first else ("F", "add", "norm")
    top, parts = y + _GAP, {}
    for kind in order:
        if kind == "add":
            parts[kind] = sum_node(ax, x, top + 0.2)
            top += 0.4 + _GAP
            continue
        height = _F_HEIGHT if kind == "F" else _NORM_HEIGHT
        color = ("ffn" if name.startswith("ffn") else "attention") if kind == "F" else "norm"
        parts[kind] = box(
            ax, x, top + height / 2, name if kind == "F" else norm_name, width=width, height=height, color=color
        )
        top += height + _GAP
    stream = {"color": path_color or "black", "width": 2.0 if path_color else 1.0}
    arrow(ax, (x, y), parts[order[0]].bottom)
    for lower, upper in zip(order, order[1:]):
        arrow(ax, parts[lower].top, parts[upper].bottom, **(stream if lower == "add" else {}))
    arrow(ax, parts[order[-1]].top, (x, top), head=False, **stream)
    side = -1 if bypass == "left" else 1
    add, bend = parts["add"], x + side * (width / 2 + 0.45)
    arrow(ax, (x, y + _GAP / 2), (bend, y + _GAP / 2), (bend, add.y), add.left if side < 0 else add.right, **stream)
    return top, parts["F"]


def _block(
    ax: Axes,
    x: float,
    y: float,
    sublayers: Sequence[tuple[str, str]],
    *,
    norm_first: bool = False,
    width: float = 3.4,
    bypass: str = "left",
    path_color: str | None = None,
) -> tuple[float, list[Box]]:
    """Sublayers (module name, its LayerNorm's name) in their residual connections, stacked from (x, y) up;
    returns the exit height and the sublayers' boxes."""
    boxes = []
    for name, norm_name in sublayers:
        y, sublayer = _residual_sublayer(
            ax, x, y, name, norm_name, norm_first=norm_first, width=width, bypass=bypass, path_color=path_color
        )
        boxes.append(sublayer)
    return y, boxes


_ENCODER_SUBLAYERS = (("self_attn", "self_attn_layer_norm"), ("ffn", "ffn_layer_norm"))
_DECODER_SUBLAYERS = (
    ("masked self_attn", "self_attn_layer_norm"),
    ("encoder_attn\n(cross-attention)", "encoder_attn_layer_norm"),
    ("ffn", "ffn_layer_norm"),
)


def transformer_diagram() -> Figure:
    """The Transformer of Vaswani et al. (2017, Figure 1) with our module names: a stack of N encoder layers over
    the source, N decoder layers over the shifted target, each decoder layer reading the encoder's output (the
    memory M) through cross-attention, and the shared embedding matrix as the output projection.

    Taught in: 02_transformer ("The whole model").
    """
    fig, ax = canvas(19, 17.1)
    width, tops, sublayers = 4.2, {}, {}
    for side, x in (("encoder", 5.6), ("decoder", 13.0)):
        label(ax, x, 0.4, "source tokens src" if side == "encoder" else "target shifted right: tgt_in")
        embed = box(ax, x, 1.5, "embed_tokens × $\\sqrt{d_{model}}$", width=width, height=0.7, color="embedding")
        arrow(ax, (x, 0.7), embed.bottom)
        add = sum_node(ax, x, 2.7)
        arrow(ax, embed.top, add.bottom)
        outward = -1 if side == "encoder" else 1
        positions = box(ax, x + outward * 3.4, 2.7, f"{side}_positions", width=2.9, height=0.6, color="embedding")
        arrow(
            ax, positions.right if side == "encoder" else positions.left, add.left if side == "encoder" else add.right
        )
        arrow(ax, add.top, (x, 3.4), head=False)
        top, sublayers[side] = _block(
            ax,
            x,
            3.4,
            _ENCODER_SUBLAYERS if side == "encoder" else _DECODER_SUBLAYERS,
            width=width,
            bypass="left" if side == "encoder" else "right",
        )
        edge = (
            (x - width / 2 - 0.7, x + width / 2 + 0.25)
            if side == "encoder"
            else (x - width / 2 - 0.25, x + width / 2 + 0.7)
        )
        frame(
            ax,
            edge[0],
            3.2,
            edge[1],
            top + 0.1,
            f"× N\n{side}_layers",
            text_side="left" if side == "encoder" else "right",
        )
        tops[side] = top
    encoder_x, cross = 5.6, sublayers["decoder"][1]
    memory_y, bend = tops["encoder"] + 1.0, cross.left[0] - 0.9
    arrow(
        ax,
        (encoder_x, tops["encoder"] + 0.1),
        (encoder_x, memory_y),
        (bend, memory_y),
        (bend, cross.y),
        cross.left,
        color=_ACCENT,
        width=1.4,
    )
    label(
        ax,
        encoder_x + 0.2,
        memory_y + 0.12,
        "memory M: keys and values\nfor every encoder_attn",
        color=_ACCENT,
        ha="left",
        va="bottom",
    )
    x = 13.0
    lm_head = box(
        ax, x, tops["decoder"] + 0.9, "lm_head (tied to embed_tokens)", width=width + 0.8, height=0.7, color="head"
    )
    arrow(ax, (x, tops["decoder"] + 0.1), lm_head.bottom)
    softmax = box(ax, x, lm_head.y + 1.2, "softmax", width=2.0, height=0.6, color="head")
    arrow(ax, lm_head.top, softmax.bottom)
    label(ax, x, softmax.y + 0.75, "P(next token)")
    label(ax, 0.3, 16.7, "The Transformer (post-LN, as in the paper)", ha="left", bold=True, size=10)
    return fig


def encoder_block_diagram() -> Figure:
    """One post-LN encoder layer (``EncoderLayer``): self-attention over all positions, then the position-wise
    feed-forward network, each inside a residual connection followed by its LayerNorm.

    Taught in: 02_transformer ("The encoder block").
    """
    fig, ax = canvas(12, 8.9)
    top, (attention, ffn) = _block(ax, 4.3, 0.8, _ENCODER_SUBLAYERS, width=4.0)
    label(ax, 4.3, 0.45, "x: (B, T, d_model), padding mask")
    label(ax, 4.3, top + 0.1, "to the next layer: (B, T, d_model)", va="bottom")
    label(
        ax,
        attention.right[0] + 0.3,
        attention.y,
        "queries, keys, values: all x;\nevery position reads every position",
        ha="left",
        size=7.5,
    )
    label(
        ax,
        ffn.right[0] + 0.3,
        ffn.y,
        "fc1 (d_model → d_ff), ReLU,\nfc2 (d_ff → d_model),\nper position",
        ha="left",
        size=7.5,
    )
    label(ax, 0.3, 8.55, "EncoderLayer (post-LN)", ha="left", bold=True, size=10)
    return fig


def decoder_block_diagram() -> Figure:
    """One post-LN decoder layer (``DecoderLayer``): causally masked self-attention, cross-attention whose keys
    and values are the encoder's output M, and the feed-forward network, each in its residual connection.

    Taught in: 02_transformer ("The decoder block").
    """
    fig, ax = canvas(13.6, 12.2)
    top, (masked, cross, ffn) = _block(ax, 4.3, 0.8, _DECODER_SUBLAYERS, width=4.4)
    label(ax, 4.3, 0.45, "x: the target so far, (B, T, d_model)")
    label(ax, 4.3, top + 0.1, "to the next layer", va="bottom")
    notes = (
        (masked, "causal mask: position t reads\npositions 1..t only"),
        (cross, "queries from x;\nkeys and values from M"),
        (ffn, "fc1, ReLU, fc2, per position"),
    )
    for sublayer, text in notes:
        label(ax, sublayer.right[0] + 0.3, sublayer.top[1] + 0.05, text, ha="left", va="bottom", size=7.5)
    memory = box(ax, 11.9, cross.y, "memory M\n(encoder output)", width=2.6, height=0.9, color="state")
    arrow(ax, memory.left, cross.right, color=_ACCENT, width=1.4)
    label(ax, 0.3, 11.85, "DecoderLayer (post-LN)", ha="left", bold=True, size=10)
    return fig


def layer_norm_placement_diagram() -> Figure:
    """Post-LN and pre-LN encoder layers side by side, with the residual stream drawn thick: in pre-LN it runs
    from the input to the output through additions only, in post-LN every sublayer's LayerNorm sits on it.

    Taught in: 02_transformer ("Post-LN or pre-LN").
    """
    fig, ax = canvas(15, 10.8)
    stream = "#4f8f3a"
    for x, norm_first, title, rule in (
        (4.0, False, "post-LN (Vaswani et al., 2017)", "$x \\leftarrow \\mathrm{LayerNorm}(x + F(x))$"),
        (11.0, True, "pre-LN (Xiong et al., 2020)", "$x \\leftarrow x + F(\\mathrm{LayerNorm}(x))$"),
    ):
        label(ax, x, 10.4, title, bold=True)
        label(ax, x, 9.85, rule)
        label(ax, x, 0.35, "x")
        top, _ = _block(ax, x, 0.6, _ENCODER_SUBLAYERS, norm_first=norm_first, width=4.0, path_color=stream)
        if norm_first:
            box(
                ax,
                x,
                top + 0.4,
                "final layer_norm\n(once, on top of the stack)",
                width=4.0,
                height=0.8,
                color="norm",
                dashed=True,
            )
    label(ax, 7.5, 0.35, "thick: the residual stream", color=stream)
    return fig


def _example_model() -> tuple[Callable[[torch.Tensor, object], torch.Tensor], dict[int, str]]:
    """A next-word table on which greedy decoding goes wrong: 'the' is the likelier first word, but every
    continuation of it is unsure, while 'a' is almost always followed by 'cat'."""
    words = ("the", "a", "dog", "cat", "barks", "sleeps")
    ids = {w: i + 3 for i, w in enumerate(words)}
    table = {
        (): {"the": 0.5, "a": 0.4, "dog": 0.1},
        ("the",): {"dog": 0.32, "cat": 0.28, "barks": 0.2, "sleeps": 0.2},
        ("a",): {"cat": 0.9, "dog": 0.1},
        ("the", "dog"): {"barks": 0.6, "sleeps": 0.3, "</s>": 0.1},
        ("the", "cat"): {"sleeps": 0.7, "</s>": 0.3},
        ("a", "cat"): {"sleeps": 0.8, "barks": 0.1, "</s>": 0.1},
        ("a", "dog"): {"barks": 0.9, "</s>": 0.1},
    }
    names = {i: w for w, i in ids.items()} | {EOS: "</s>", BOS: "<s>", PAD: "<pad>"}

    class NextWordTable:
        def encode(self, src: torch.Tensor) -> torch.Tensor:
            return src

        def decode_step(self, prefix: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
            logits = torch.full((prefix.shape[0], len(names)), float("-inf"), dtype=torch.float64)
            for row, tokens in enumerate(prefix[:, 1:].tolist()):
                for word, p in table.get(tuple(names[t] for t in tokens), {"</s>": 1.0}).items():
                    logits[row, EOS if word == "</s>" else ids[word]] = math.log(p)
            return logits

    return NextWordTable(), names


def beam_search_example() -> tuple[list[BeamStep], dict[int, str]]:
    """The trace of a beam search of width 2 on a small next-word table (the default of
    :func:`beam_search_diagram`), and the words of its token ids.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    model, names = _example_model()
    trace: list[BeamStep] = []
    beam_search_one(model, torch.zeros(1, 1, dtype=torch.long), beam_width=2, max_len=5, trace=trace)
    return trace, names


@dataclass(frozen=True)
class _Node:
    """One extension drawn in the beam-search tree: of which live hypothesis, by which token, at what score."""

    parent: int  # the live hypothesis it extends (its index in the step's prefixes)
    token: int
    score: float
    status: str  # "kept", "finished" (kept, and ends in eos) or "pruned"
    live: int | None  # its index among the next step's live hypotheses, if it stays in the beam


def beam_search_diagram(
    trace: Sequence[BeamStep] | None = None,
    symbol: Callable[[int], str] | None = None,
    *,
    children: int = 3,
    eos: int = EOS,
) -> Figure:
    """A beam search as a tree, one column per step: every live hypothesis with its ``children`` best
    extensions (and any kept one beyond those), each labelled by its token and its score, the sum of
    log-probabilities so far. Kept extensions are black, pruned ones grey with a dashed edge, finished ones
    (ending in ``eos``) green, and the path to the best finished hypothesis red.

    ``trace`` is what :func:`lecture_lib.decoding.beam_search_one` records; ``symbol`` turns a token id into
    its text. Without arguments: the search of :func:`beam_search_example`.

    Taught in: 02_transformer ("Decoding: greedy and beam search").
    """
    if trace is None:
        trace, names = beam_search_example()
        symbol = names.__getitem__
    if not trace:
        raise ValueError("expected a trace of at least one beam-search step, got none")
    if children < 1:
        raise ValueError(f"expected children >= 1, got {children}")
    symbol = symbol or str
    columns = _beam_columns(trace, children, eos)
    best = _best_path(columns)
    rows, spacing, column_width = max(len(column) for column in columns), 1.0, 2.3
    fig, ax = canvas(max(12.0, 1.8 + column_width * len(columns)), rows * spacing + 2.8)
    middle = rows * spacing / 2 + 1.0
    live = {0: box(ax, 1.0, middle, "<s>\n0.00", width=1.2, height=0.8, color="state")}
    for step, column in enumerate(columns):
        x, top, following = 1.0 + column_width * (step + 1), middle + (len(column) - 1) * spacing / 2, {}
        for k, node in enumerate(column):
            on_path, pruned = (step, k) in best, node.status == "pruned"
            drawn = box(
                ax,
                x,
                top - k * spacing,
                f"{symbol(node.token)}\n{node.score:.2f}",
                width=1.3,
                height=0.8,
                color="head" if node.status == "finished" else "plain",
                faded=pruned,
                bold=on_path,
            )
            arrow(
                ax,
                live[node.parent].right,
                drawn.left,
                dashed=pruned,
                width=2.0 if on_path else 1.0,
                color="#bbbbbb" if pruned else (_ACCENT if on_path else "black"),
            )
            if node.live is not None:
                following[node.live] = drawn
        live = following
        label(ax, x, 0.35, f"step {step + 1}", color="#666666")
    width = max(len(step.kept) for step in trace)
    label(ax, 0.3, rows * spacing + 2.4, f"Beam search, width {width}", ha="left", bold=True, size=10)
    label(
        ax,
        0.3,
        rows * spacing + 1.75,
        "each node: a token and the log-probability so far\nblack: kept, grey: pruned, green: finished, red: the best",
        ha="left",
        size=7.5,
    )
    return fig


def _beam_columns(trace: Sequence[BeamStep], children: int, eos: int) -> list[list[_Node]]:
    """Per step, the nodes to draw, grouped by the hypothesis they extend (in the order those hypotheses are
    drawn, so that edges do not cross) and best first within each group."""
    columns, drawn_order = [], [0]  # drawn_order: the live hypotheses from top to bottom
    for step in trace:
        next_live = {pair: i for i, pair in enumerate(p for p in step.kept if p[1] != eos)}
        column = []
        for r in drawn_order:
            scores = step.candidate_scores[r]
            order = scores.argsort(descending=True).tolist()
            shown = [v for v in order[:children] if math.isfinite(scores[v])]
            shown += [v for v in order[children:] if (r, v) in step.kept]
            for v in shown:
                status = "pruned" if (r, v) not in step.kept else ("finished" if v == eos else "kept")
                column.append(_Node(r, v, float(scores[v]), status, next_live.get((r, v))))
        columns.append(column)
        drawn_order = [node.live for node in column if node.live is not None]
    return columns


def _best_path(columns: list[list[_Node]]) -> set[tuple[int, int]]:
    """(step, row) of every node on the path to the best finished hypothesis (the best last one if none finished)."""
    ends = [
        (node.score, step, k)
        for step, column in enumerate(columns)
        for k, node in enumerate(column)
        if node.status == "finished"
    ]
    if not ends:
        ends = [(node.score, len(columns) - 1, k) for k, node in enumerate(columns[-1]) if node.status == "kept"]
    _, step, k = max(ends)
    path = {(step, k)}
    for previous in range(step - 1, -1, -1):
        parent = columns[previous + 1][k].parent
        k = next(i for i, node in enumerate(columns[previous]) if node.live == parent)
        path.add((previous, k))
    return path


# ----------------------------------------------------------------------------------------------- chapter 04


def bert_pretraining_diagram() -> Figure:
    """BERT's two stages (after Devlin et al., 2019, Figure 1). Pretraining: the pair `[CLS] A [SEP] B [SEP]`
    with masked tokens, the MLM head on the output $T_i$ of each masked position, and the NSP head (IsNext or
    NotNext) on C, the pooled `[CLS]` output. Fine-tuning: the same encoder, initialised from the pretrained
    weights, with one small head per task shape.

    Taught in: 04_bert_pretraining ("Pretraining, then fine-tuning"), 05_bert_finetuning ("Four task shapes").
    """
    fig, ax = canvas(24.4, 8.2)
    pretraining = ("[CLS]", "my", "[MASK]", "is", "cute", "[SEP]", "he", "[MASK]", "[SEP]")
    encoder = _bert_column(ax, 0.6, pretraining, "Pretraining on unlabelled pairs: MLM + NSP")
    outputs = encoder["outputs"]
    nsp = box(ax, outputs[0].x + 0.55, 6.2, "NSP head\nIsNext / NotNext", width=2.6, height=0.9, color="head")
    arrow(ax, outputs[0].top, nsp.bottom_at(outputs[0].x))
    masked = [o for o, t in zip(outputs, pretraining) if t == "[MASK]"]
    mlm = box(
        ax,
        (masked[0].x + masked[-1].x) / 2,
        6.2,
        "MLM head: restore the masked tokens\n(dog, likes) from both sides",
        width=masked[-1].x - masked[0].x + 0.7,
        height=0.9,
        color="head",
    )
    for o in masked:
        arrow(ax, o.top, mlm.bottom_at(o.x))

    finetuning = ("[CLS]", "$A_1$", "$A_2$", "$A_3$", "[SEP]", "$B_1$", "$B_2$", "$B_3$", "[SEP]")
    tuned = _bert_column(ax, 13.4, finetuning, "Fine-tuning: the same weights, one small head per task")
    outputs = tuned["outputs"]
    heads = (
        (outputs[0].x + 0.25, 2.4, "class:\nsoftmax($C\\,W^\\top$)", outputs[:1]),
        (outputs[2].x + 0.9, 2.9, "tag per token:\nsoftmax($T_i W^\\top$)", outputs[1:4]),
        (outputs[6].x + 0.4, 2.9, "span: start $S\\cdot T_i$,\nend $E\\cdot T_j$", outputs[5:8]),
    )
    for x, width, text, sources in heads:
        head = box(ax, x, 6.2, text, width=width, height=0.9, color="head")
        for o in sources:
            arrow(ax, o.top, head.bottom_at(head.x + (o.x - head.x) * 0.5))
    arrow(ax, encoder["encoder"].right, tuned["encoder"].left, color=_ACCENT, width=1.6)
    label(
        ax,
        (encoder["encoder"].right[0] + tuned["encoder"].left[0]) / 2,
        encoder["encoder"].y + 0.15,
        "initialise",
        color=_ACCENT,
        va="bottom",
    )
    return fig


def _bert_column(ax: Axes, left: float, tokens: Sequence[str], title: str) -> dict:
    """A token row, the encoder over it, and the output vectors (C over [CLS], T_i over the rest)."""
    step = 1.2
    xs = [left + 0.6 + step * i for i in range(len(tokens))]
    inputs = [box(ax, x, 0.7, t, width=1.1, height=0.6, color="embedding", size=7.5) for x, t in zip(xs, tokens)]
    encoder = box(
        ax,
        (xs[0] + xs[-1]) / 2,
        2.6,
        "BERT encoder: L layers of self-attention over the whole pair",
        width=xs[-1] - xs[0] + 1.1,
        height=1.1,
        color="attention",
    )
    outputs = [
        box(ax, x, 4.4, "C" if i == 0 else f"$T_{i}$", width=1.0, height=0.6, color="state") for i, x in enumerate(xs)
    ]
    for i, o in zip(inputs, outputs):
        arrow(ax, i.top, encoder.bottom_at(i.x))
        arrow(ax, encoder.top_at(o.x), o.bottom)
    label(ax, encoder.x, 7.7, title, bold=True)
    return {"encoder": encoder, "outputs": outputs}


BERT_EXAMPLE = ("[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "playing", "[SEP]")


def bert_input_diagram(tokens: Sequence[str] = BERT_EXAMPLE, segments: Sequence[int] | None = None) -> Figure:
    """BERT's input representation (after Devlin et al., 2019, Figure 2): each position's vector is the sum of
    its token embedding $T_{x_i}$, its segment embedding ($S_A$ or $S_B$) and its position embedding $P_i$,
    then a LayerNorm. ``segments`` (0 for A, 1 for B) default to A up to and including the first `[SEP]`.

    Taught in: 04_bert_pretraining ("The input: three embeddings").
    """
    if segments is None:
        first_sep = list(tokens).index("[SEP]") if "[SEP]" in tokens else len(tokens) - 1
        segments = [0 if i <= first_sep else 1 for i in range(len(tokens))]
    if len(segments) != len(tokens) or not set(segments) <= {0, 1}:
        raise ValueError(f"expected one segment (0 or 1) per token, {len(tokens)} in all, got {list(segments)}")
    step, left = 1.45, 4.4
    fig, ax = canvas(left + step * len(tokens) + 0.2, 7.7)
    xs = [left + step * (i + 0.5) for i in range(len(tokens))]
    rows = (
        ("Input", 7.0),
        ("token $T_{x_i}$", 5.6),
        ("segment $S_{s_i}$", 4.1),
        ("position $P_i$", 2.6),
        ("$E_i$ = LayerNorm(sum)", 0.8),
    )
    for text, y in rows:
        label(ax, 0.3, y, text, ha="left", bold=text == "Input")
    for i, (x, token, segment) in enumerate(zip(xs, tokens, segments)):
        word = box(ax, x, 7.0, token, width=1.3, height=0.6, size=8)
        name = token.replace("[", "").replace("]", "").replace("#", "\\#")
        vectors = [
            box(ax, x, 5.6, f"$T_{{\\mathrm{{{name}}}}}$", width=1.3, height=0.65, color="embedding"),
            box(
                ax,
                x,
                4.1,
                "$S_A$" if segment == 0 else "$S_B$",
                width=1.3,
                height=0.65,
                color="attention" if segment == 0 else "ffn",
            ),
            box(ax, x, 2.6, f"$P_{{{i}}}$", width=1.3, height=0.65, color="norm"),
        ]
        arrow(ax, word.bottom, vectors[0].top)
        for upper, lower in zip(vectors, vectors[1:]):
            label(ax, x, (upper.bottom[1] + lower.top[1]) / 2, "+", size=11)
        column = frame(ax, x - 0.72, vectors[-1].bottom[1] - 0.12, x + 0.72, vectors[0].top[1] + 0.12)
        result = box(ax, x, 0.8, f"$E_{{{i}}}$", width=1.3, height=0.65, color="state")
        arrow(ax, column.bottom, result.top)
    return fig


# ----------------------------------------------------------------------------------------------- chapter 07


def albert_diagram(vocab_size: int = 30000, embedding_size: int = 128, hidden_size: int = 768) -> Figure:
    """ALBERT's two changes to BERT (Lan et al., 2020), at ALBERT-base's sizes by default. Factorized embeddings:
    a V x E token table then an E x H projection in place of BERT's V x H table. Cross-layer sharing: one
    ``AlbertLayer`` applied at every depth in place of L layers of their own.

    Taught in: 07_albert ("Factorized embeddings", "Cross-layer sharing").
    """
    V, E, H = vocab_size, embedding_size, hidden_size
    fig, ax = canvas(19.5, 8.6)
    label(ax, 4.6, 8.1, "Factorized embeddings", bold=True, size=10)
    label(ax, 0.3, 6.0, "BERT", ha="left", bold=True)
    table = box(ax, 3.6, 6.0, f"word_embeddings\nV × H\n{V * H / 1e6:.1f}M", width=3.0, height=2.0, color="embedding")
    label(ax, 0.3, 2.6, "ALBERT", ha="left", bold=True)
    narrow = box(ax, 3.0, 2.6, f"V × E\n{V * E / 1e6:.1f}M", width=1.3, height=2.0, color="embedding")
    mapping = box(ax, 5.9, 2.6, f"E × H: {E * H / 1e6:.1f}M", width=2.6, height=0.6, color="ffn")
    arrow(ax, narrow.right, mapping.left)
    label(ax, (narrow.right[0] + mapping.left[0]) / 2, 2.9, "E", size=7.5)
    label(ax, 3.0, 1.2, "word_embeddings", size=7.5)
    label(ax, 5.9, 2.0, "embedding_hidden_mapping_in", size=7.5)
    for source, y in ((table, 6.0), (mapping, 2.6)):
        arrow(ax, source.right, (8.1, y))
        label(ax, 8.2, y, "H", ha="left")
    label(ax, 4.6, 0.35, f"V = {V:,}, E = {E}, H = {H}", color="#666666")

    label(ax, 14.7, 8.1, "Cross-layer sharing", bold=True, size=10)
    depths = ("layer 1", "layer 2", "...", "layer L")
    for i, text in enumerate(depths):
        y = 1.2 + 1.6 * i
        if text == "...":
            label(ax, 11.6, y, "...")
            label(ax, 15.0, y, "...")
            continue
        box(ax, 11.6, y, text, width=2.4, height=0.8, color=HEAD_COLORS[i % len(HEAD_COLORS)])
        shared = box(ax, 15.0, y, "AlbertLayer", width=2.4, height=0.8, color="attention")
        arrow(ax, (17.4, 4.0), shared.right, dashed=True, color=_ACCENT)
    for x, name in ((11.6, "BERT: L layers,\neach its own weights"), (15.0, "ALBERT: one layer,\napplied L times")):
        label(ax, x, 7.2, name)
    for x in (11.6, 15.0):
        for lower, upper in zip((1.2, 2.8, 4.4), (2.8, 4.4, 6.0)):
            arrow(ax, (x, lower + 0.4), (x, upper - 0.4))
    label(ax, 17.5, 4.0, "one set\nof weights", ha="left", color=_ACCENT)
    return fig


# ------------------------------------------------------------------------------------------ chapters 08, 09


def electra_diagram() -> Figure:
    """ELECTRA's replaced-token detection (after Clark et al., 2020, Figure 1): the generator, a small masked
    LM, fills the masked positions of $x^\\text{masked}$ with samples $\\hat x_i \\sim p_G$; the discriminator
    reads $x^\\text{corrupt}$ and labels every token original or replaced (a sample equal to the original
    counts as original).

    Taught in: 08_electra ("Replaced-token detection").
    """
    fig, ax = canvas(17.5, 9.6)
    original = ("the", "chef", "cooked", "the", "meal")
    masked = {0: "the", 2: "ate"}  # position: the generator's sample there
    xs = [3.6 + 1.6 * i for i in range(len(original))]
    rows = {"$x$": 0.7, "$x^\\mathrm{masked}$": 2.1, "$x^\\mathrm{corrupt}$": 5.3, "label": 8.5}
    for text, y in rows.items():
        label(ax, 0.3, y, text, ha="left")
    for i, (x, word) in enumerate(zip(xs, original)):
        given = box(ax, x, 0.7, word, width=1.4, height=0.6)
        hidden = box(
            ax,
            x,
            2.1,
            "[MASK]" if i in masked else word,
            width=1.4,
            height=0.6,
            color="embedding" if i in masked else "plain",
        )
        arrow(ax, given.top, hidden.bottom)
    generator = box(
        ax,
        (xs[0] + xs[-1]) / 2,
        3.7,
        "generator $p_G$: a small masked LM",
        width=xs[-1] - xs[0] + 1.4,
        height=0.9,
        color="ffn",
    )
    discriminator = box(
        ax,
        generator.x,
        6.9,
        "discriminator D: is each token original or replaced?",
        width=generator.width,
        height=0.9,
        color="attention",
    )
    for i, (x, word) in enumerate(zip(xs, original)):
        arrow(ax, (x, 2.4), generator.bottom_at(x))
        shown = masked.get(i, word)
        corrupt = box(
            ax,
            x,
            5.3,
            shown,
            width=1.4,
            height=0.6,
            bold=shown != word,
            color=("head" if shown != word else "state") if i in masked else "plain",
        )
        arrow(
            ax, generator.top_at(x), corrupt.bottom, color=_ACCENT if i in masked else "black", dashed=i not in masked
        )
        arrow(ax, corrupt.top, discriminator.bottom_at(x))
        verdict = "replaced" if shown != word else "original"
        answer = box(ax, x, 8.5, verdict, width=1.5, height=0.6, color="head" if verdict == "replaced" else "plain")
        arrow(ax, discriminator.top_at(x), answer.bottom)
    notes = (
        (3.7, "$L_\\mathrm{MLM}$ at the masked positions"),
        (4.5, "sample $\\hat x_i \\sim p_G(x_i \\mid x^\\mathrm{masked})$;\nno gradient flows through it"),
        (6.9, "$\\lambda L_\\mathrm{Disc}$ on every token, $\\lambda = 50$"),
    )
    for y, text in notes:
        label(ax, xs[-1] + 1.05, y, text, ha="left", size=8, color=_ACCENT if "sample" in text else "black")
    label(ax, 0.3, 9.3, "ELECTRA: replaced-token detection", ha="left", bold=True, size=10)
    return fig


T5_EXAMPLE = "Thank you for inviting me to your party last week .".split()


def span_corruption_diagram(words: Sequence[str] = T5_EXAMPLE, noise: Sequence[bool] | None = None) -> Figure:
    """T5's span corruption (after Raffel et al., 2020, Figure 2), computed by
    :func:`lecture_lib.objectives.span_corruption.span_corrupt`: each run of noise words (``noise``, by default
    the paper's "for inviting" and "last") becomes one sentinel in the inputs, and the targets list each
    sentinel with the words it hid, closed by one more sentinel. One colour per span.

    Taught in: 09_t5_bart ("Span corruption, exactly").
    """
    noise = [w in ("for", "inviting", "last") for w in words] if noise is None else list(noise)
    spans = noise_spans(torch.tensor(noise, dtype=torch.bool))
    sentinels = [f"<{chr(ord('X') + i)}>" if i < 3 else f"<S{i}>" for i in range(len(spans) + 1)]
    inputs, targets = span_corrupt(words, noise, sentinels=sentinels)
    if len(spans) + 1 > len(HEAD_COLORS):
        raise ValueError(f"expected at most {len(HEAD_COLORS) - 1} noise spans to draw, got {len(spans)}")
    step, left, width = 1.45, 3.0, 1.35
    fig, ax = canvas(left + step * len(words) + 0.3, 6.4)
    xs = [left + step * (i + 0.5) for i in range(len(words))]
    span_of = {i: k for k, (start, end) in enumerate(spans) for i in range(start, end)}
    for i, (x, word) in enumerate(zip(xs, words)):
        box(ax, x, 4.6, word, width=width, height=0.6, color=HEAD_COLORS[span_of[i]] if i in span_of else "plain")
    kept = [x for i, x in enumerate(xs) if i not in span_of]
    sentinel_x = [(xs[start] + xs[end - 1]) / 2 for start, end in spans]
    placed = iter(sorted(kept + sentinel_x))
    for token in inputs:  # inputs keep the words in order, a sentinel where each span was
        x = next(placed)
        color = HEAD_COLORS[sentinels.index(token)] if token in sentinels else "plain"
        drawn = box(ax, x, 2.9, token, width=width, height=0.6, color=color)
        arrow(ax, (x, 4.3), drawn.top, color="#999999")
    for j, token in enumerate(targets):
        color = HEAD_COLORS[sentinels.index(token)] if token in sentinels else "plain"
        box(ax, xs[j], 1.1, token, width=width, height=0.6, color=color, bold=token in sentinels)
    for text, y in (("text, noise\nin colour", 4.6), ("inputs\n(encoder)", 2.9), ("targets\n(decoder)", 1.1)):
        label(ax, 0.3, y, text, ha="left")
    label(
        ax,
        0.3,
        6.0,
        f"Span corruption: {len(spans)} spans, {len(inputs)} input and {len(targets)} target tokens "
        f"for {len(words)} words",
        ha="left",
        bold=True,
        size=10,
    )
    return fig
