"""Chapter 11's diagram (:mod:`lecture_lib.plots.probing_diagrams`) draws without arguments, shows the names the
notebook uses, and passes the layout checks every course diagram passes (tests/test_diagrams.py)."""

import matplotlib
import pytest

from lecture_lib.plots.probing_diagrams import probe_diagram
from tests import test_diagrams

matplotlib.use("Agg")


def test_the_probe_diagram_shows_a_frozen_encoder_a_probe_on_one_layer_and_the_structural_distance():
    fig = probe_diagram()
    fig.canvas.draw()
    texts = " | ".join(t.get_text() for t in test_diagrams._texts(fig))
    for want in (
        "frozen encoder",
        "layer 0",
        "layer 4",
        "linear probe",
        "softmax($W h + b$)",
        "$h^{(\\ell)}_w$",
        "$B(h_i - h_j)$",
        "d_T(i, j)",
        "structural probe",
        "kind",
    ):
        assert want in texts, f"{want!r} missing from {texts}"
    test_diagrams.test_text_stays_on_the_page_inside_its_box_and_clear_of_other_text(("probe_diagram", fig))
    matplotlib.pyplot.close(fig)


def test_the_probed_layer_must_exist():
    with pytest.raises(ValueError, match="probed layer"):
        probe_diagram(layers=4, probed=5)
