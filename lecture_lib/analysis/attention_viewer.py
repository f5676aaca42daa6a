"""An attention viewer in the spirit of bertviz (Vig 2019): hover a token, see where each head of a layer
sends its attention.

The page is one self-contained piece of HTML, CSS and JavaScript written here: the weights travel inside
it as JSON, and it loads nothing (no script, style sheet or font from the web), so it works in Jupyter, in
Colab and in the offline book alike. Show it with ``IPython.display.HTML(attention_html(...))``.

Taught in: 10_bertology_attention ("An attention viewer").
"""

from __future__ import annotations

import colorsys
import hashlib
import html
import json
from typing import Sequence

import torch

# one colour per head, cycled (red, green, blue triples)
HEAD_COLOURS = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
)


def head_colours(heads: int) -> list[tuple[int, int, int]]:
    """A distinct colour for each of ``heads`` heads: :data:`HEAD_COLOURS` when they suffice, else ``heads``
    hues evenly spaced around the colour wheel (so no two heads of a layer share a colour).

    >>> head_colours(2)
    [(31, 119, 180), (255, 127, 14)]
    >>> len(set(head_colours(12)))
    12

    Taught in: 10_bertology_attention ("An attention viewer").
    """
    if heads <= len(HEAD_COLOURS):
        return list(HEAD_COLOURS[:heads])
    return [tuple(round(255 * c) for c in colorsys.hsv_to_rgb(h / heads, 0.75, 0.85)) for h in range(heads)]


_SCRIPT = """
(function () {
  var root = document.getElementById(%(id)s);
  var data = %(data)s;
  var select = root.querySelector("select");
  var rows = root.querySelector(".rows");
  var cells = [];
  data.layers.forEach(function (name, layer) {
    var option = document.createElement("option");
    option.value = layer; option.textContent = name; select.appendChild(option);
  });
  data.colours.forEach(function (colour, head) {
    var row = document.createElement("div");
    var label = document.createElement("span");
    label.textContent = "head " + head; label.className = "label";
    label.style.color = "rgb(" + colour.join(",") + ")";
    row.appendChild(label);
    cells.push(data.tokens.map(function (token, position) {
      var cell = document.createElement("span");
      cell.textContent = token; cell.className = "token";
      cell.addEventListener("mouseenter", function () { show(position); });
      cell.addEventListener("mouseleave", function () { show(-1); });
      row.appendChild(cell);
      return cell;
    }));
    rows.appendChild(row);
  });
  function show(query) {
    var weights = data.weights[select.value];
    cells.forEach(function (row, head) {
      row.forEach(function (cell, key) {
        var w = query < 0 ? 0 : weights[head][query][key];
        cell.style.background = "rgba(" + data.colours[head].join(",") + "," + w + ")";
        cell.style.outline = key === query ? "1px solid #333" : "none";
      });
    });
  }
  select.addEventListener("change", function () { show(-1); });
})();
"""


def attention_html(
    tokens: Sequence[str], attentions: torch.Tensor, *, layers: Sequence[int] | None = None, title: str = ""
) -> str:
    """A viewer for one sentence: ``tokens`` (T) and its maps (layers, heads, T, T); choose the layer in a
    menu, hover a token to shade every token by the weight it receives from it, one row per head.

    ``layers`` names the layers given (default 0, 1, ...). Weights are rounded to three decimals.

    >>> page = attention_html(["[CLS]", "hi", "[SEP]"], torch.full((1, 2, 3, 3), 1 / 3))
    >>> "<script src" in page, page.count('"token"') > 0
    (False, True)

    Taught in: 10_bertology_attention ("An attention viewer").
    """
    if attentions.dim() != 4 or attentions.shape[-2:] != (len(tokens), len(tokens)):
        raise ValueError(
            f"expected attentions of shape (layers, heads, {len(tokens)}, {len(tokens)}), got {tuple(attentions.shape)}"
        )
    layers = list(range(attentions.shape[0])) if layers is None else list(layers)
    if len(layers) != attentions.shape[0]:
        raise ValueError(f"expected {attentions.shape[0]} layer names, got {len(layers)}")
    heads = attentions.shape[1]
    data = {
        "tokens": list(tokens),
        "layers": [f"layer {layer}" for layer in layers],
        "colours": head_colours(heads),
        "weights": attentions.double().round(decimals=3).tolist(),
    }
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")  # no "</script>" inside the JSON
    element = "attention-viewer-" + hashlib.sha256(payload.encode()).hexdigest()[:12]
    style = (
        f"#{element} .rows > div {{ white-space: nowrap; overflow-x: auto }} "  # a row never wraps
        f"#{element} .token {{ display: inline-block; padding: 0 2px; margin: 1px 0; border-radius: 2px; "
        f"font: 11px monospace; cursor: default }} #{element} .label {{ display: inline-block; "
        f"width: 4em; font: 11px sans-serif }}"
    )
    script = _SCRIPT % {"id": json.dumps(element), "data": payload}
    return (
        f'<div id="{element}"><style>{style}</style>'
        f'<div style="font: 13px sans-serif; margin-bottom: 4px">{html.escape(title)} '
        f"<select></select> hover a token to see where each head attends from it</div>"
        f'<div class="rows"></div></div><script>{script}</script>'
    )
