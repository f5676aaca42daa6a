"""Pretraining a small BERT on the embedded corpus: the data, the loss, the evaluation, a disk cache,
and a command line for real runs.

The recipe is BERT's at small scale: a WordPiece vocabulary learned from the training documents
(chapter 03), next-sentence pairs cut from those documents, masked LM with 15% selection and the
80/10/10 rule, AdamW with warm-up and linear decay. Held-out documents (whole documents, never
trained on) give the MLM and NSP accuracies.

Command line (resumes from ``OUT/checkpoint`` when rerun; several GPUs through ``torchrun``)::

    python -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small --profile full
    torchrun --nproc_per_node 8 -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small --profile full --compile true

``OUT`` then holds ``config.json``, ``model.safetensors`` and ``vocab.txt`` in Hugging Face's layout
(``BertForPreTraining.from_pretrained(OUT)`` here, or ``transformers``' own ``from_pretrained``),
plus ``history.json`` and ``pretrain_config.json``.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs").
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from lecture_lib.data.corpus import split_corpus
from lecture_lib.models.bert import BertConfig, BertForPreTraining, mlm_accuracy
from lecture_lib.objectives.masking import (
    MaskedDataset,
    MaskingStrategy,
    mask_tokens,
)
from lecture_lib.objectives.sentence_pairs import (
    NUM_SPECIAL_IN_PAIR,
    collate_pairs,
    make_pairs,
)
from lecture_lib.profile import ENV_VAR, PROFILES
from lecture_lib.runtime import default_device, generator, seed_everything
from lecture_lib.tokenization import WordPieceTokenizer
from lecture_lib.train import (
    History,
    TrainConfig,
    distributed_context,
    train,
)

CACHE_ENV_VAR = "LECTURE_CACHE"
CACHE_FORMAT = 1  # bump when the recipe changes in a way the config does not show
RESULT_FILES = ("config.json", "model.safetensors", "vocab.txt", "history.json", "pretrain_config.json")


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on. ``masking`` names a :class:`MaskingStrategy` (MASK/SAME/RND)."""

    vocab_size: int = 3000
    seq_len: int = 64
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 512
    dropout: float = 0.1
    initializer_range: float = 0.02
    steps: int = 300
    batch_size: int = 32
    lr: float = 2e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    mlm_probability: float = 0.15
    masking: str = "80/10/10"
    dynamic_masking: bool = True
    static_copies: int = 1
    nsp: bool = True
    eval_every: int = 0
    eval_pairs: int = 512
    held_out_fraction: float = 0.1
    seed: int = 0
    precision: str = "auto"
    compile: bool = False
    num_threads: int | None = None

    def __post_init__(self) -> None:
        MaskingStrategy.from_name(self.masking)  # raises on a malformed name
        if self.seq_len < NUM_SPECIAL_IN_PAIR + 2:
            raise ValueError(f"expected seq_len >= {NUM_SPECIAL_IN_PAIR + 2} ([CLS], two [SEP] and a token per "
                             f"segment), got {self.seq_len}")

    def bert_config(self) -> BertConfig:
        """The model's sizes: positions up to ``seq_len``, the vocabulary of the learned tokenizer."""
        return BertConfig(
            vocab_size=self.vocab_size, hidden_size=self.hidden_size, num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads, intermediate_size=self.intermediate_size,
            hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout,
            max_position_embeddings=self.seq_len, initializer_range=self.initializer_range,
        )


# ---------------------------------------------------------------- data


def tokenize_documents(tokenizer: WordPieceTokenizer, documents: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Each document's sentences as lists of token ids (no special tokens)."""
    return [[tokenizer.encode(sentence) for sentence in sentences] for sentences in documents]


class PretrainingData:
    """Masked NSP batches cut from documents: ``batch(step)`` for training, ``eval_batches`` held out.

    ``train_documents`` and ``test_documents`` are lists of documents, each a list of sentences
    (strings). Without a ``tokenizer``, a WordPiece vocabulary of ``config.vocab_size`` tokens is
    learned from the training sentences (chapter 03). Training pairs are shuffled anew each epoch;
    the mask of each pair is drawn anew each epoch (``dynamic_masking``) or fixed at preprocessing.
    The held-out pairs carry masks fixed once per strategy, so every evaluation of every model sees
    the same corrupted inputs. :meth:`from_corpus` builds it from the embedded Python documentation.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    def __init__(self, config: PretrainConfig, train_documents: Sequence[Sequence[str]],
                 test_documents: Sequence[Sequence[str]], tokenizer: WordPieceTokenizer | None = None) -> None:
        self.config = config
        if tokenizer is None:
            tokenizer = WordPieceTokenizer.train([s for doc in train_documents for s in doc], config.vocab_size)
        self.tokenizer = tokenizer
        budget = config.seq_len - NUM_SPECIAL_IN_PAIR
        ids = dict(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                   pad_token_id=tokenizer.pad_token_id)
        self.train = collate_pairs(make_pairs(tokenize_documents(tokenizer, train_documents), budget,
                                              seed=config.seed), length=config.seq_len, **ids)
        test_pairs = make_pairs(tokenize_documents(tokenizer, test_documents), budget, seed=config.seed + 1)
        self.test = collate_pairs(test_pairs[: config.eval_pairs], length=config.seq_len, **ids)
        if len(self.train["input_ids"]) < config.batch_size:
            raise ValueError(f"expected at least batch_size={config.batch_size} training pairs, "
                             f"got {len(self.train['input_ids'])}")
        self.masks = self._masked_dataset(config)
        self._orders: dict[int, torch.Tensor] = {}
        self._test_masks: dict[MaskingStrategy, tuple[torch.Tensor, torch.Tensor]] = {}

    def _masked_dataset(self, config: PretrainConfig) -> MaskedDataset:
        return MaskedDataset(
            self.train["input_ids"], self.train["special_tokens_mask"], mask_token_id=self.tokenizer.mask_token_id,
            vocab_size=self.tokenizer.vocab_size, dynamic=config.dynamic_masking, copies=config.static_copies,
            seed=config.seed, mlm_probability=config.mlm_probability,
            strategy=MaskingStrategy.from_name(config.masking),
        )

    def with_config(self, config: PretrainConfig) -> "PretrainingData":
        """The same tokenizer and pairs, batched and masked as ``config`` says (strategy, static/dynamic,
        batch size, NSP on or off); the vocabulary, lengths and split must not change."""
        fixed = ("vocab_size", "seq_len", "eval_pairs", "held_out_fraction")
        changed = [f for f in fixed if getattr(config, f) != getattr(self.config, f)]
        if changed:
            ours, theirs = ([getattr(c, f) for f in changed] for c in (self.config, config))
            raise ValueError(f"with_config keeps the pairs: expected the same {changed}, {ours}; got {theirs}")
        other = copy.copy(self)
        other.config, other.masks, other._orders = config, self._masked_dataset(config), {}
        if config.seed != self.config.seed or config.mlm_probability != self.config.mlm_probability:
            other._test_masks = {}
        return other

    @classmethod
    def from_corpus(cls, config: PretrainConfig, tokenizer: WordPieceTokenizer | None = None) -> "PretrainingData":
        """Pairs from the embedded corpus (Python's documentation), split by whole documents.

        Only documents with at least two prose sentences are used, so that a true next sentence exists.
        """
        corpus = split_corpus(config.held_out_fraction)
        train_docs = [s for s in corpus["train"]["sentences"] if len(s) >= 2]
        test_docs = [s for s in corpus["test"]["sentences"] if len(s) >= 2]
        return cls(config, train_docs, test_docs, tokenizer)

    @property
    def batches_per_epoch(self) -> int:
        return len(self.masks) // self.config.batch_size

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch not in self._orders:
            generator = torch.Generator().manual_seed(self.config.seed * 100_003 + epoch)
            self._orders = {epoch: torch.randperm(len(self.masks), generator=generator)}  # keep one epoch
        return self._orders[epoch]

    def _inputs(self, tensors: dict[str, torch.Tensor], rows: torch.Tensor, masked: torch.Tensor,
                labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model's keyword arguments, cut to the longest sequence of the batch (rounded up to 8)."""
        length = int(tensors["attention_mask"][rows].sum(1).max())
        length = min(self.config.seq_len, -(-length // 8) * 8)
        batch = {
            "input_ids": masked[:, :length],
            "attention_mask": tensors["attention_mask"][rows, :length],
            "token_type_ids": tensors["token_type_ids"][rows, :length],
            "labels": labels[:, :length],
        }
        if self.config.nsp:
            batch["next_sentence_label"] = tensors["next_sentence_label"][rows]
        return batch

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        """Training micro-batch ``step``: the same whenever it is asked for (``train``'s ``batch_fn``)."""
        epoch, k = divmod(step, self.batches_per_epoch)
        size = self.config.batch_size
        rows = self._order(epoch)[k * size:(k + 1) * size]
        masked, labels = self.masks.batch(rows, epoch)
        return self._inputs(self.train, rows, masked, labels)

    def eval_batches(self, strategy: MaskingStrategy | None = None, batch_size: int = 128) -> list[dict]:
        """The held-out pairs, masked once with ``strategy`` (default: the run's own) and a fixed seed."""
        strategy = strategy or MaskingStrategy.from_name(self.config.masking)
        if strategy not in self._test_masks:
            self._test_masks[strategy] = mask_tokens(
                self.test["input_ids"], mask_token_id=self.tokenizer.mask_token_id,
                vocab_size=self.tokenizer.vocab_size, special_tokens_mask=self.test["special_tokens_mask"],
                mlm_probability=self.config.mlm_probability, strategy=strategy,
                generator=generator("eval masks", self.config.seed))
        masked, labels = self._test_masks[strategy]
        n = masked.shape[0]
        return [self._inputs(self.test, torch.arange(i, min(i + batch_size, n)), masked[i:i + batch_size],
                             labels[i:i + batch_size]) for i in range(0, n, batch_size)]


def pretraining_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """MLM loss on the selected positions (+ NSP loss when the batch has NSP labels).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return model(**batch, masked_only=True).loss


@torch.no_grad()
def evaluate(model: BertForPreTraining, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Held-out MLM loss and accuracy over the selected positions only, and NSP accuracy.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_sum, correct, total, nsp_correct, pairs = 0.0, 0, 0, 0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(**batch, masked_only=True)
        right, n = mlm_accuracy(out.prediction_logits, batch["labels"])
        if n:
            loss_sum += out.mlm_loss.item() * n
        correct, total = correct + right, total + n
        if "next_sentence_label" in batch:
            nsp_correct += int((out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum())
            pairs += len(batch["next_sentence_label"])
    model.train(was_training)
    metrics = {"mlm_loss": loss_sum / total, "mlm_accuracy": correct / total}
    if pairs:
        metrics["nsp_accuracy"] = nsp_correct / pairs
    return metrics


# ---------------------------------------------------------------- a run, and its cache


@dataclass
class PretrainResult:
    """A pretrained model with its tokenizer, training history, recipe, and the directory it lives in."""

    model: BertForPreTraining
    tokenizer: WordPieceTokenizer
    history: History
    config: PretrainConfig
    path: Path | None = None


def pretrain(config: PretrainConfig, *, out_dir: str | os.PathLike | None = None,
             data: PretrainingData | None = None, progress: bool = True,
             device: torch.device | str | None = None, checkpoint_every: int = 0) -> PretrainResult:
    """Train a BERT from scratch with ``config``; with ``out_dir``, checkpoint there and save the result.

    Rerunning with the same ``out_dir`` resumes from its checkpoint (or returns at once when done).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    seed_everything(config.seed)
    data = data or PretrainingData.from_corpus(config)
    if data.tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"expected a tokenizer of {config.vocab_size} tokens, got {data.tokenizer.vocab_size}")
    model = BertForPreTraining(config.bert_config())
    out = Path(out_dir) if out_dir is not None else None
    train_config = TrainConfig(
        steps=config.steps, lr=config.lr, weight_decay=config.weight_decay, warmup_steps=config.warmup_steps,
        schedule="linear", grad_clip=1.0, eval_every=config.eval_every, progress=progress,
        checkpoint_dir=str(out / "checkpoint") if out else None, checkpoint_every=checkpoint_every,
        precision=config.precision, compile=config.compile, fused=_fused_adamw(device),
        num_threads=config.num_threads,
    )
    eval_batches = data.eval_batches()
    history = train(model, data.batch, pretraining_loss, train_config, evaluate=lambda m: evaluate(m, eval_batches),
                    device=device)
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
    (directory / "history.json").write_text(json.dumps(asdict(result.history)) + "\n")
    (directory / "pretrain_config.json").write_text(json.dumps(asdict(result.config), indent=2) + "\n")


def load_result(directory: str | os.PathLike) -> PretrainResult:
    """Read back what :func:`save_result` wrote."""
    directory = Path(directory)
    missing = [name for name in RESULT_FILES if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(f"expected {list(RESULT_FILES)} in {directory}, missing {missing}")
    config = PretrainConfig(**json.loads((directory / "pretrain_config.json").read_text()))
    history = History.from_dict(json.loads((directory / "history.json").read_text()))
    tokenizer = WordPieceTokenizer.from_vocab_file(directory / "vocab.txt")
    return PretrainResult(BertForPreTraining.from_pretrained(directory), tokenizer, history, config, directory)


def cache_root() -> Path:
    """``$LECTURE_CACHE``, else ``~/.cache/lecture_lib``: where the course keeps what it trains once."""
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "lecture_lib")


def fingerprint(config: PretrainConfig) -> str:
    """A name for ``config``'s result: the recipe, the Python version (it decides the corpus), the cache format."""
    recipe = {"config": asdict(config), "python": sys.version_info[:3], "format": CACHE_FORMAT,
              "torch": torch.__version__}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def cached_pretraining(name: str, config: PretrainConfig, make_data: Callable[[], PretrainingData | None],
                       *, progress: bool = False) -> PretrainResult:
    """Load ``<cache>/<name>``, or first pretrain it there: in ``<name>.partial`` (checkpointed, so an
    interrupted run resumes), renamed to ``<name>`` only when complete. ``make_data`` is called only when
    training is needed (``None`` from it: the corpus data of ``config``).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    final = cache_root() / name
    if not final.is_dir():
        partial = final.with_name(final.name + ".partial")
        pretrain(config, out_dir=partial, data=make_data(), progress=progress,
                 checkpoint_every=max(1, config.steps // 4))
        shutil.rmtree(partial / "checkpoint", ignore_errors=True)
        try:
            os.replace(partial, final)
        except OSError:  # another process finished the same recipe first: keep theirs
            shutil.rmtree(partial, ignore_errors=True)
    return load_result(final)


# ---------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lecture_lib.chapters.ch04_bert_pretraining", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory (rerun to resume from its checkpoint)")
    parser.add_argument("--profile", choices=PROFILES, help="default sizes (default: $LECTURE_PROFILE, or by device)")
    parser.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: the best available)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    for f in fields(PretrainConfig):  # one flag per field: --vocab-size, --num-hidden-layers, ...
        kind = str(f.type).removesuffix(" | None")
        parser.add_argument("--" + f.name.replace("_", "-"), metavar=kind.upper(),
                            type={"bool": _boolean, "int": int, "float": float, "str": str}[kind])
    return parser.parse_args(argv)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1", "yes")


def main(argv: Sequence[str] | None = None, *, defaults: Callable[..., PretrainConfig] = PretrainConfig) -> PretrainResult:
    """Pretrain from the command line: ``--out DIR [--profile full] [--steps N] ...``; prints the final metrics.

    ``defaults(**overrides)`` gives the recipe (a chapter's ``chapter_config``), read after ``--profile`` is set.
    """
    args = parse_args(argv)
    if args.profile:
        os.environ[ENV_VAR] = args.profile
    overrides = {f.name: getattr(args, f.name) for f in fields(PretrainConfig) if getattr(args, f.name) is not None}
    config = defaults(**overrides)
    rank, world = distributed_context()
    result = pretrain(config, out_dir=args.out, progress=not args.no_progress, device=args.device,
                      checkpoint_every=args.checkpoint_every)
    if rank == 0:
        final = result.history.evals[-1][1] if result.history.evals else {}
        print(json.dumps({"out": str(Path(args.out).resolve()), "workers": world, "steps": config.steps,
                          "final_train_loss": result.history.loss[-1], **final}))
    if world > 1:
        dist.destroy_process_group()
    return result

