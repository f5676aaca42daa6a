"""The attention viewer: self-contained (the book's offline check finds nothing to load), and its embedded
data are the weights given."""

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from lecture_lib.analysis.attention_viewer import HEAD_COLOURS, attention_html, head_colours

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_offline", ROOT / "book" / "check_offline.py")
check_offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_offline)

TOKENS = ["[CLS]", "the", "</script>", "sat", "[SEP]"]


def viewer():
    torch.manual_seed(0)
    return attention_html(TOKENS, torch.rand(2, 3, 5, 5).softmax(-1), layers=[4, 5], title="a <b>title</b>")


def test_the_book_offline_check_finds_nothing_to_load_and_would_flag_a_web_script(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{viewer()}</body></html>")
    assert check_offline.external_loads(page) == []
    page.write_text(f'<html><body>{viewer()}<script src="https://cdn.example.org/d3.js"></script></body></html>')
    assert check_offline.external_loads(page) == ["<script src='https://cdn.example.org/d3.js'>"]


def test_the_embedded_data_are_the_weights_and_tokens():
    torch.manual_seed(0)
    weights = torch.rand(2, 3, 5, 5).softmax(-1)
    page = viewer()
    assert page.count("<script>") == 1 and page.count("</script>") == 1  # the token cannot close the script
    data = json.loads(re.search(r"var data = (.*);\n", page).group(1).replace("<\\/", "</"))
    assert data["tokens"] == TOKENS and data["layers"] == ["layer 4", "layer 5"]
    torch.testing.assert_close(torch.tensor(data["weights"], dtype=torch.float64), weights.double(), atol=5e-4, rtol=0)
    assert "a &lt;b&gt;title&lt;/b&gt;" in page


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match=r"expected attentions of shape \(layers, heads, 5, 5\)"):
        attention_html(TOKENS, torch.rand(2, 3, 4, 4))
    with pytest.raises(ValueError, match="expected 2 layer names"):
        attention_html(TOKENS, torch.rand(2, 3, 5, 5), layers=[1])


# A stand-in for the browser's DOM, just enough for the viewer's script: elements that keep their children,
# listeners and style. The script runs under Node.js; hovering token 2 must shade each head's row by its weights.
FAKE_DOM = """
function Element(tag) {
  this.tag = tag; this.children = []; this.style = {}; this.listeners = {}; this.value = "0";
}
Element.prototype.appendChild = function (child) { this.children.push(child); return child; };
Element.prototype.addEventListener = function (name, f) { this.listeners[name] = f; };
var select = new Element("select"), rows = new Element("div");
var root = {querySelector: function (s) { return s === "select" ? select : rows; }};
var document = {
  getElementById: function () { return root; },
  createElement: function (tag) { return new Element(tag); },
};
"""
REPORT = """
select.value = "1";
rows.children[0].children[3].listeners.mouseenter();
console.log(JSON.stringify(rows.children.map(function (row) {
  return row.children.slice(1).map(function (cell) { return cell.style.background; });
})));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the viewer's script")
def test_hovering_a_token_shades_each_head_by_its_weights(tmp_path):
    torch.manual_seed(0)
    weights = torch.rand(2, 3, 5, 5).softmax(-1)
    script = re.search(r"<script>(.*)</script>", viewer(), re.DOTALL).group(1)
    (tmp_path / "viewer.js").write_text(FAKE_DOM + script + REPORT)
    out = subprocess.run(["node", str(tmp_path / "viewer.js")], capture_output=True, text=True, check=True).stdout
    backgrounds = json.loads(out)  # heads x tokens, "rgba(r,g,b,w)"
    shown = torch.tensor(
        [[float(b.rstrip(")").split(",")[-1]) for b in row] for row in backgrounds], dtype=torch.float64
    )
    torch.testing.assert_close(shown, weights[1, :, 2].double(), atol=5e-4, rtol=0)  # layer 1, from token 2


def test_every_head_shown_gets_its_own_colour_and_rows_do_not_wrap():
    page = attention_html(TOKENS, torch.rand(1, 12, 5, 5).softmax(-1))
    data = json.loads(re.search(r"var data = (\{.*?\});", page).group(1))
    assert len(data["colours"]) == 12 and len({tuple(c) for c in data["colours"]}) == 12
    assert "white-space: nowrap" in page
    assert head_colours(4) == list(HEAD_COLOURS[:4])  # the first ten keep their familiar colours
