"""A pretraining run: train, save in Hugging Face's layout (plus the history and the recipe), load, and the
cached run that trains once per recipe.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs").
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from lecture_lib.cache import Deferred, atomic_write, cached_build
from lecture_lib.models.albert import AlbertForPreTraining
from lecture_lib.models.bert import BertForPreTraining
from lecture_lib.pretraining.config import PretrainConfig, config_dict, pretraining_head
from lecture_lib.pretraining.data import PretrainingData
from lecture_lib.pretraining.evaluation import evaluate
from lecture_lib.pretraining.losses import pretraining_loss
from lecture_lib.runtime import (
    default_device,
    seed_everything,
)
from lecture_lib.tokenization import WordPieceTokenizer
from lecture_lib.train import (
    History,
    distributed_context,
    train,
)

RESULT_FILES = ("config.json", "model.safetensors", "vocab.txt", "history.json", "pretrain_config.json")


@dataclass
class PretrainResult:
    """A pretrained model with its tokenizer, training history, recipe, and the directory it lives in."""

    model: BertForPreTraining | AlbertForPreTraining
    tokenizer: WordPieceTokenizer
    history: History
    config: PretrainConfig
    path: Path | None = None


def pretrain(
    config: PretrainConfig,
    *,
    out_dir: str | os.PathLike | None = None,
    data: PretrainingData | None = None,
    progress: bool = True,
    device: torch.device | str | None = None,
    checkpoint_every: int = 0,
    model: nn.Module | None = None,
    loss: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] = pretraining_loss,
) -> PretrainResult:
    """Train a BERT from scratch with ``config``; with ``out_dir``, checkpoint there and save the result.

    The run: the objective's batch stream (``data``, by default cut from the corpus as ``config`` says),
    the pretraining class of ``config.model`` (:func:`pretraining_head`; or ``model``, freshly built from it
    with a change the config cannot state, such as ALBERT's shared-attention ablation, or already pretrained
    and trained further, as domain-adaptive pretraining does), and the loop's :class:`TrainConfig`
    ``config.train`` (AdamW's fused kernel on CPU and CUDA unless it says otherwise); ``loss`` (default :func:`pretraining_loss`) may train another objective on the same
    batches, such as :func:`left_to_right_loss`. Rerunning with the same ``out_dir`` resumes from its checkpoint (or returns at
    once when done).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    seed_everything(config.seed)
    data = data or PretrainingData.from_corpus(config)
    if data.tokenizer.vocab_size != config.model.vocab_size:
        raise ValueError(
            f"expected a tokenizer of model.vocab_size = {config.model.vocab_size} tokens, "
            f"got {data.tokenizer.vocab_size}"
        )
    model = model if model is not None else pretraining_head(config.model).model_class(config.model)
    out = Path(out_dir) if out_dir is not None else None
    train_config = config.train if config.train.fused is not None else replace(config.train, fused=_fused_adamw(device))
    eval_batches = data.eval_batches()
    if out is not None and distributed_context()[0] == 0:
        write_recipe(config, out)
    history = train(
        model,
        data.batch,
        loss,
        train_config,
        evaluate=lambda m: evaluate(m, eval_batches),
        device=device,
        progress=progress,
        checkpoint_dir=out / "checkpoint" if out else None,
        checkpoint_every=checkpoint_every,
    )
    result = PretrainResult(model, data.tokenizer, history, config, out)
    if out is not None and distributed_context()[0] == 0:
        save_result(result, out)
    return result


def _fused_adamw(device: torch.device | str | None) -> bool:
    """PyTorch has fused AdamW kernels for CPU and CUDA (several times faster than the loop for small models)."""
    return (torch.device(device) if device is not None else default_device()).type in ("cpu", "cuda")


def save_result(result: PretrainResult, directory: Path) -> None:
    """Hugging Face files (config.json, model.safetensors, vocab.txt) plus history.json and pretrain_config.json."""
    result.model.save_pretrained(directory)
    result.tokenizer.save(directory / "vocab.txt")
    atomic_write(directory / "history.json", json.dumps(asdict(result.history)) + "\n")
    write_recipe(result.config, directory)


def write_recipe(config: PretrainConfig, directory: Path) -> None:
    """``pretrain_config.json``: written when a run starts, so that a folder a kill left half done says which
    recipe it holds (:func:`check_output_folder`), and again with the results."""
    atomic_write(directory / "pretrain_config.json", json.dumps(config_dict(config), indent=2) + "\n")


def load_result(directory: str | os.PathLike) -> PretrainResult:
    """Read back what :func:`save_result` wrote."""
    directory = Path(directory)
    missing = [name for name in RESULT_FILES if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(f"expected {list(RESULT_FILES)} in {directory}, missing {missing}")
    config = PretrainConfig.from_dict(json.loads((directory / "pretrain_config.json").read_text()))
    history = History.from_dict(json.loads((directory / "history.json").read_text()))
    tokenizer = WordPieceTokenizer.from_vocab_file(directory / "vocab.txt")
    model = pretraining_head(config.model).model_class.from_pretrained(directory)
    return PretrainResult(model, tokenizer, history, config, directory)


@cached_build(load=load_result, ignore=("progress",))
def cached_pretraining(
    path: Path,
    config: PretrainConfig,
    data: Deferred | None = None,
    *,
    progress: bool = True,
    loss: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] = pretraining_loss,
    model: Deferred | None = None,
) -> None:
    """``pretrain(config)``, trained once and then loaded from the disk cache (:func:`lecture_lib.cache.cached_build`,
    named from the call: the config field by field, the data's and the model's deferred calls, the ``loss``):
    called as ``cached_pretraining(config, data, ...)``, it trains in ``<name>.partial``, checkpointed so that an
    interrupted run resumes, renamed to ``<name>`` when complete, without its checkpoint. ``data`` is a
    :class:`~lecture_lib.cache.Deferred` call that builds the :class:`PretrainingData` (``None``: the corpus data
    of ``config``), made only when training is needed, and so is ``model`` (``None``: a fresh model of
    ``config.model``; or, say, ``Deferred(copy.deepcopy, pretrained)`` to pretrain further)::

        cached_pretraining(config, Deferred(synthetic_pretraining_data, language), loss=left_to_right_loss)

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    pretrain(
        config,
        out_dir=path,
        data=data() if data is not None else None,
        progress=progress,
        checkpoint_every=max(1, config.train.steps // 4),
        loss=loss,
        model=model() if model is not None else None,
    )
    shutil.rmtree(path / "checkpoint", ignore_errors=True)
