"""Chapters 10 and 12's diagrams (``lecture_lib.plots.head_diagrams``, ``lecture_lib.plots.compression_diagrams``):
each draws, shows the notebook's names, and passes tests/test_diagrams.py's page, box and overlap checks."""

import matplotlib
import pytest

from lecture_lib.plots.compression_diagrams import distillation_diagram, pruning_masks_diagram, quantization_diagram
from lecture_lib.plots.head_diagrams import head_masking_diagram
from tests import test_diagrams as shared

matplotlib.use("Agg")

EXPECTED_LABELS = {
    head_masking_diagram: ["head 1", "head 4", "$W^O$", "concatenate", r"$\xi_2 = 0$"],
    distillation_diagram: ["teacher layer 0", "student layer 1", "$5\\,L_{ce}$", "$1\\,L_{cos}$", "$2\\,L_{mlm}$"],
    quantization_diagram: ["float x", "integers q", "-3", "3"],
    pruning_masks_diagram: ["magnitude", "FFN neurons", "a head"],
}


@pytest.fixture(params=list(EXPECTED_LABELS), ids=lambda f: f.__name__)
def drawn(request):
    fig = request.param()
    fig.canvas.draw()
    yield request.param, fig
    matplotlib.pyplot.close(fig)


def test_labels_and_layout(drawn):
    function, fig = drawn
    texts = [t.get_text() for t in shared._texts(fig)]
    missing = [want for want in EXPECTED_LABELS[function] if not any(want in text for text in texts)]
    assert not missing, f"{function.__name__} lacks {missing}; it shows {texts}"
    shared.test_text_stays_on_the_page_inside_its_box_and_clear_of_other_text((function.__name__, fig))


def test_head_masking_fades_the_removed_heads_and_checks_its_gates():
    fig = head_masking_diagram((0, 1, 1))
    greyed = [t.get_text() for t in shared._texts(fig) if t.get_color() == "#999999"]
    assert any("head 1" in text for text in greyed) and not any("head 2" in text for text in greyed)
    with pytest.raises(ValueError, match="gates of 0 or 1"):
        head_masking_diagram((1, 2))
