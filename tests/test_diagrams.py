"""Every diagram draws without arguments, says what the notebooks call things, and keeps its text on the page,
inside its boxes and clear of other text; the beam-search tree shows what the search really did."""

import math

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

from lecture_lib import plots
from lecture_lib.data.toy import BOS, EOS
from lecture_lib.decoding import beam_search_one

matplotlib.use("Agg")

# The names each diagram must show, as the notebook that uses it writes them (a renamed module or symbol in a
# notebook should be renamed here and in the diagram).
EXPECTED_LABELS = {
    "seq2seq_attention_diagram": [
        "$h_1$",
        "$s_t$",
        "tgt_in",
        "$e^t_i = s_t^\\top h_i$",
        "$\\alpha^t$",
        "$a_t = \\sum_i \\alpha^t_i h_i$",
        "$[a_t; s_t]$",
        "softmax",
    ],
    "multi_head_attention_diagram": [
        "q_proj",
        "k_proj",
        "v_proj",
        "out_proj",
        "head 1",
        "head 4",
        "d = E / h",
        "concatenate",
        "MultiHead(Q, K, V)",
    ],
    "transformer_diagram": [
        "embed_tokens",
        "encoder_positions",
        "decoder_positions",
        "self_attn",
        "masked self_attn",
        "encoder_attn",
        "cross-attention",
        "ffn",
        "self_attn_layer_norm",
        "encoder_attn_layer_norm",
        "ffn_layer_norm",
        "encoder_layers",
        "decoder_layers",
        "memory M",
        "lm_head",
        "tgt_in",
        "post-LN",
    ],
    "encoder_block_diagram": [
        "EncoderLayer",
        "self_attn",
        "self_attn_layer_norm",
        "ffn",
        "ffn_layer_norm",
        "fc1",
        "fc2",
        "d_model",
        "d_ff",
    ],
    "decoder_block_diagram": [
        "DecoderLayer",
        "masked self_attn",
        "encoder_attn",
        "encoder_attn_layer_norm",
        "causal mask",
        "memory M",
        "ffn_layer_norm",
    ],
    "layer_norm_placement_diagram": [
        "post-LN",
        "pre-LN",
        "Vaswani et al., 2017",
        "Xiong et al., 2020",
        "\\mathrm{LayerNorm}(x + F(x))",
        "x + F(\\mathrm{LayerNorm}(x))",
        "final layer_norm",
        "residual stream",
    ],
    "beam_search_diagram": ["Beam search, width 2", "<s>", "</s>", "pruned", "step 1"],
    "bert_pretraining_diagram": [
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "NSP head",
        "IsNext / NotNext",
        "MLM head",
        "C",
        "$T_1$",
        "softmax($C\\,W^\\top$)",
        "softmax($T_i W^\\top$)",
        "$S\\cdot T_i$",
        "$E\\cdot T_j$",
        "initialise",
    ],
    "albert_diagram": [
        "word_embeddings",
        "V × H",
        "V × E",
        "E × H",
        "embedding_hidden_mapping_in",
        "AlbertLayer",
        "23.0M",
        "3.8M",
    ],
    "electra_diagram": [
        "$x^\\mathrm{masked}$",
        "$x^\\mathrm{corrupt}$",
        "[MASK]",
        "generator $p_G$",
        "discriminator D",
        "original",
        "replaced",
        "$L_\\mathrm{MLM}$",
        "$\\lambda L_\\mathrm{Disc}$",
        "\\hat x_i \\sim p_G(x_i \\mid x^\\mathrm{masked})",
    ],
    "span_corruption_diagram": ["<X>", "<Y>", "<Z>", "inputs", "targets", "noise", "Thank", "inviting"],
    "bert_input_diagram": [
        "Input",
        "token $T_{x_i}$",
        "segment $S_{s_i}$",
        "position $P_i$",
        "LayerNorm(sum)",
        "$S_A$",
        "$S_B$",
        "$P_{9}$",
        "[CLS]",
        "playing",
    ],
}
DIAGRAMS = sorted(EXPECTED_LABELS)


@pytest.fixture(params=DIAGRAMS)
def drawn(request):
    fig = getattr(plots, request.param)()
    fig.canvas.draw()
    yield request.param, fig
    matplotlib.pyplot.close(fig)


def _texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


def test_every_diagram_function_is_listed_here():
    assert sorted(n for n in plots.__all__ if n.endswith("_diagram")) == DIAGRAMS


def test_a_diagram_is_a_figure_with_the_notebooks_names(drawn):
    name, fig = drawn
    assert isinstance(fig, Figure)
    texts = [t.get_text() for t in _texts(fig)]
    missing = [want for want in EXPECTED_LABELS[name] if not any(want in text for text in texts)]
    assert not missing, f"{name} lacks the labels {missing}; it shows {texts}"


def test_text_stays_on_the_page_inside_its_box_and_clear_of_other_text(drawn):
    name, fig = drawn
    renderer = fig.canvas.get_renderer()
    page = fig.bbox.padded(1)
    extents = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    outside = [
        text
        for text, extent in extents
        if not (page.contains(extent.x0, extent.y0) and page.contains(extent.x1, extent.y1))
    ]
    assert not outside, f"{name}: text off the page: {outside}"

    boxes = [p.get_window_extent(renderer) for p in fig.findobj(FancyBboxPatch) if p.get_facecolor()[3] > 0]
    overflowing = []
    for text, extent in extents:
        centre = ((extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2)
        for b in boxes:
            if b.contains(*centre) and not (
                b.padded(1).contains(extent.x0, extent.y0) and b.padded(1).contains(extent.x1, extent.y1)
            ):
                overflowing.append(text)
    assert not overflowing, f"{name}: text wider or taller than its box: {overflowing}"

    overlapping = [
        (a, b)
        for i, (a, ea) in enumerate(extents)
        for b, eb in extents[i + 1 :]
        if ea.shrunk(0.95, 0.8).overlaps(eb.shrunk(0.95, 0.8))
    ]
    assert not overlapping, f"{name}: text on text: {overlapping}"


class _NextTokenTable:
    """P(next | last token) from a table: the garden path of tests/test_decoding.py, where greedy goes wrong."""

    def __init__(self, table: dict[int, dict[int, float]], vocab: int = 8):
        self.log_p = torch.full((vocab, vocab), -math.inf, dtype=torch.float64)
        for last, row in table.items():
            for token, p in row.items():
                self.log_p[last, token] = math.log(p)

    def encode(self, src):
        return src

    def decode_step(self, prefix, state):
        return self.log_p[prefix[:, -1]]


def test_the_beam_tree_highlights_the_best_hypothesis_the_search_returned_and_greys_what_it_pruned():
    model = _NextTokenTable(
        {
            BOS: {3: 0.6, 4: 0.4},
            3: {5: 0.34, 6: 0.33, 7: 0.33},
            4: {EOS: 1.0},
            5: {EOS: 1.0},
            6: {EOS: 1.0},
            7: {EOS: 1.0},
        }
    )
    trace = []
    best = beam_search_one(model, torch.zeros(1, 1, dtype=torch.long), beam_width=2, max_len=5, trace=trace)[0]
    fig = plots.beam_search_diagram(trace, lambda t: "</s>" if t == EOS else f"w{t}", children=3)
    nodes = [t for t in _texts(fig) if "\n" in t.get_text() and not t.get_text().startswith("each node")]
    on_path = [t.get_text() for t in nodes if t.get_fontweight() == "bold"]
    assert best.tokens == [4, EOS]
    assert on_path == [f"w4\n{math.log(0.4):.2f}", f"</s>\n{math.log(0.4):.2f}"]
    # step 1 shows both first words (kept); step 2 the three continuations of w3 (w5 kept, w6 and w7 pruned) and
    # w4's only one, </s>; then the search stops, since w5 (log 0.6 * 0.34) can no longer beat w4 </s> (log 0.4)
    greyed = sorted(t.get_text().split("\n")[0] for t in nodes if t.get_color() == "#999999")
    assert greyed == ["w6", "w7"]
    assert len(nodes) == 1 + 2 + 4
    matplotlib.pyplot.close(fig)


def test_the_span_corruption_diagram_draws_what_span_corrupt_returns():
    words = "a b c d e f".split()
    fig = plots.span_corruption_diagram(words, [False, True, True, False, True, False])
    texts = [t.get_text() for t in _texts(fig)]
    # in drawing order: the words, the inputs, the targets (then the row names and the title)
    assert texts[:6] == words
    assert texts[6:17] == ["a", "<X>", "d", "<Y>", "f", "<X>", "b", "c", "<Y>", "e", "<Z>"]
    matplotlib.pyplot.close(fig)


def test_diagram_arguments_are_checked():
    with pytest.raises(ValueError, match="expected 1 to 6 heads, got 7"):
        plots.multi_head_attention_diagram(num_heads=7)
    with pytest.raises(ValueError, match="expected a trace of at least one beam-search step, got none"):
        plots.beam_search_diagram([])
    with pytest.raises(ValueError, match=r"expected one segment \(0 or 1\) per token, 2 in all, got \[0\]"):
        plots.bert_input_diagram(["[CLS]", "[SEP]"], [0])
    matplotlib.pyplot.close("all")
