"""The one bridge to Hugging Face ``transformers``: a description per model family, and a base class that
converts any of our models to and from its ``transformers`` class and its checkpoint directories.

A family is data (:class:`Family`): its ``model_type``, our config class, the ``transformers`` config class,
and how its state-dict keys differ from ``transformers``' (a rename table of key fragments, the old names
checkpoints still carry, the buffers that are not weights). A model is a :class:`PreTrainedModule` that
names its family and its ``transformers`` class; everything else (``from_hf``, ``to_hf``,
``load_hf_state_dict``, ``from_pretrained``, ``save_pretrained``) is written once, here. Adding RoBERTa or
ELECTRA means a family entry and the modules, nothing more.

Checkpoints are read without executing code (safetensors, or ``torch.load(weights_only=True)``), and a
truncated or corrupted file raises :class:`CorruptCheckpointError`, naming the file and what to do.

Taught in: 04_bert_pretraining ("Static and contextual vectors").
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from lecture_lib.cache import atomic_write

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the safe format first; older checkpoints lack it


_NOT_TENSORS = "truncated, corrupted, or holds objects other than tensors (never unpickled: that could run code)"


class CorruptCheckpointError(OSError):
    """A checkpoint file that exists but cannot be read: truncated, overwritten, or not the format its name says."""


# ---------------------------------------------------------------- families


@dataclass(frozen=True)
class Family:
    """How one model family's names differ from ``transformers``' (and from older checkpoints').

    ``renames`` pairs fragments of our state-dict keys with ``transformers``' (ours, theirs), applied both
    ways; ``old_names`` pairs names that older checkpoints carry with today's (old, theirs), applied on
    loading only; keys ending in one of ``dropped`` are buffers, not weights, and are skipped.
    ``unsupported`` maps ``transformers`` config fields to the only value our modules implement.
    Creating a family registers it as ``config_class.family``.

    >>> fam = Family("toy", dict, "ToyConfig", renames=(("norm.", "ln."),), old_names=(("gamma", "weight"),))
    >>> fam.to_theirs("layer.0.norm.weight"), fam.to_ours("layer.0.ln.gamma")
    ('layer.0.ln.weight', 'layer.0.norm.weight')

    Taught in: 04_bert_pretraining ("The model").
    """

    model_type: str
    config_class: type
    hf_config_class: str  # the name of the transformers config class
    renames: tuple[tuple[str, str], ...] = ()
    old_names: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()
    unsupported: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.config_class, type) and issubclass(self.config_class, HFConfig):
            self.config_class.family = self

    def to_theirs(self, key: str) -> str:
        """Our state-dict key -> ``transformers``' key."""
        for ours, theirs in self.renames:
            key = key.replace(ours, theirs)
        return key

    def to_ours(self, key: str) -> str:
        """A checkpoint's key (today's or an older name) -> ours."""
        for old, theirs in self.old_names:
            key = key.replace(old, theirs)
        for ours, theirs in self.renames:
            key = key.replace(theirs, ours)
        return key

    def is_dropped(self, key: str) -> bool:
        return key.endswith(self.dropped)


class HFConfig:
    """What every family's config dataclass shares: ``config.json`` dicts and ``transformers`` configs.

    Taught in: 04_bert_pretraining ("The model").
    """

    family: ClassVar[Family]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Any:
        """Read the fields we know from a ``config.json`` dict; refuse another family, or settings we do not implement.

        A ``None`` is ``transformers``' "unset" (``pad_token_id``, for one): our default stands.
        """
        family = cls.family
        if values.get("model_type", family.model_type) != family.model_type:
            raise ValueError(f"expected a config with model_type {family.model_type!r}, got {values['model_type']!r}")
        for key, expected in family.unsupported.items():
            if values.get(key, expected) != expected:
                raise ValueError(
                    f"unsupported {family.model_type} variant: expected {key}={expected!r}, got {values[key]!r}"
                )
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known and v is not None})

    @classmethod
    def from_hf(cls, hf_config: Any) -> Any:
        """From the family's ``transformers`` config."""
        return cls.from_dict(hf_config.to_dict())

    def to_hf(self, **kwargs: Any) -> Any:
        """The family's ``transformers`` config with the same sizes (``kwargs`` such as ``attn_implementation`` pass on)."""
        import transformers

        return getattr(transformers, self.family.hf_config_class)(**self.to_dict(), **kwargs)


# ---------------------------------------------------------------- models


class PreTrainedModule(nn.Module):
    """Base of every model that converts to a ``transformers`` class: initialisation and the bridges.

    A subclass sets ``family``, ``hf_class`` (the ``transformers`` class's name) and ``base_model_prefix``
    (as ``transformers`` does: ``"bert"``), and keeps its encoder under that attribute (``self.bert``) when
    it has heads; :attr:`base_model` is that encoder, or the model itself when it *is* the encoder.
    """

    family: ClassVar[Family]
    hf_class: ClassVar[str]
    base_model_prefix: ClassVar[str]
    config: Any

    @property
    def base_model(self) -> nn.Module:
        """The encoder under the heads (``model.bert`` for BERT), or the model itself when it has no heads."""
        return getattr(self, self.base_model_prefix, self)

    def _init_weights(self, module: nn.Module) -> None:
        """N(0, initializer_range) for matrices and embeddings, zero biases, LayerNorm at identity (as BERT)."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                nn.init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def tied_keys(self) -> set[str]:
        """State-dict keys that alias another key (saved once, restored by tying)."""
        return set()

    @classmethod
    def _init_kwargs(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Constructor arguments beyond the config, read from a ``config.json`` dict."""
        return {}

    def _config_extras(self) -> dict[str, Any]:
        """The same arguments, for ``transformers``' config and ``config.json``."""
        return {}

    # ------------------------------------------------ to and from transformers

    @classmethod
    def from_hf(cls, hf_model: nn.Module) -> "PreTrainedModule":
        """Copy a ``transformers`` model of the matching class (same keys, same values, same dtype and device).

        Taught in: 04_bert_pretraining ("The model").
        """
        if type(hf_model).__name__ != cls.hf_class:
            raise TypeError(f"expected a transformers {cls.hf_class}, got {type(hf_model).__name__}")
        if getattr(hf_model.config, "chunk_size_feed_forward", 0):
            raise ValueError("expected chunk_size_feed_forward=0 (no feed-forward chunking)")
        values = hf_model.config.to_dict()
        ours = cls(cls.family.config_class.from_dict(values), **cls._init_kwargs(values))
        first = next(hf_model.parameters())
        ours.to(device=first.device, dtype=first.dtype)  # before copying, so no value passes through float32
        ours.load_hf_state_dict(hf_model.state_dict())
        return ours.train(hf_model.training)

    def to_hf(self, attn_implementation: str = "eager") -> nn.Module:
        """The same weights in ``transformers``' class; ``eager`` attention so it can return its weights.

        Taught in: 04_bert_pretraining ("The model").
        """
        import transformers

        hf_config = self.config.to_hf(attn_implementation=attn_implementation, **self._config_extras())
        hf = getattr(transformers, self.hf_class)(hf_config)
        self._prepare_hf(hf)
        first = next(self.parameters())
        hf.to(device=first.device, dtype=first.dtype)
        state = {self.family.to_theirs(k): v for k, v in self.state_dict().items()}
        missing, unexpected = hf.load_state_dict(state, strict=False)
        if unexpected or any(not self.family.is_dropped(k) for k in missing):
            raise ValueError(f"state dicts do not match: missing {missing}, unexpected {unexpected}")
        return hf.train(self.training)

    def _prepare_hf(self, hf: nn.Module) -> None:
        """Make a freshly built ``transformers`` model fit our weights before :meth:`to_hf` copies them (by
        default nothing to do)."""

    def _our_key(self, key: str, ours: dict[str, torch.Tensor], prefixed: bool) -> str | None:
        """Where a checkpoint key goes here: its prefix added or removed, or ``None`` to skip it."""
        key = self.family.to_ours(key)
        if self.family.is_dropped(key):
            return None
        prefix = self.base_model_prefix + "."
        if self.base_model is self:  # the bare encoder: from a checkpoint with heads, keep the encoder only
            if not prefixed:
                return key
            return key.removeprefix(prefix) if key.startswith(prefix) else None
        return prefix + key if prefix + key in ours else key  # a bare encoder's keys, under the prefix

    def load_hf_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a ``transformers`` state dict of this family, in any of the layouts checkpoints come in.

        Handles: the encoder under its prefix or not (``bert.embeddings...`` or ``embeddings...``); the
        family's renames and old names (BERT's TensorFlow-era ``LayerNorm.gamma``/``beta``); buffers that are
        not weights (dropped); tied keys that the file omits; for a bare encoder, the heads of a checkpoint
        that has them (ignored). A missing weight, a leftover key or a wrong shape raises ``ValueError``.
        """
        ours = self.state_dict()
        prefixed = any(key.startswith(self.base_model_prefix + ".") for key in state)
        renamed = {}
        for key, value in state.items():
            our_key = self._our_key(key, ours, prefixed)
            if our_key is not None:
                renamed[our_key] = value
        tied = self.tied_keys()
        missing = sorted(set(ours) - set(renamed) - tied)
        unexpected = sorted(set(renamed) - set(ours))
        if missing or unexpected:
            raise ValueError(
                f"checkpoint does not fit {type(self).__name__}: missing {missing}, unexpected {unexpected}"
            )
        for key, value in renamed.items():
            if tuple(value.shape) != tuple(ours[key].shape):
                raise ValueError(f"{key}: expected shape {tuple(ours[key].shape)}, got {tuple(value.shape)}")
        with torch.no_grad():
            for key, value in renamed.items():
                if key not in tied:
                    ours[key].copy_(value)

    # ------------------------------------------------ checkpoint directories

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike) -> "PreTrainedModule":
        """Load a checkpoint directory (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``).

        A name that is not a local path is looked up on the Hugging Face hub, which needs a network:
        with ``HF_HUB_OFFLINE=1`` or no connection it fails at once with ``OSError`` (a copy already in
        the local hub cache is used when there is one). Weights are read with safetensors or
        ``torch.load(weights_only=True)``: loading never executes code. A truncated or corrupted file
        raises :class:`CorruptCheckpointError`.

        Taught in: 04_bert_pretraining ("Static and contextual vectors").
        """
        directory = resolve_checkpoint(name_or_path)
        values = read_config(directory)
        model = cls(cls.family.config_class.from_dict(values), **cls._init_kwargs(values))
        model.load_hf_state_dict(read_weights(directory))
        return model.eval()

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json`` (with the family's ``model_type``) and ``model.safetensors`` (tied keys once).

        ``transformers``' ``from_pretrained`` reads the directory as well as ours does.

        Taught in: 04_bert_pretraining ("Pretraining a small BERT").
        """
        from safetensors.torch import save

        directory = Path(directory)
        hf_config = {
            "architectures": [self.hf_class],
            "model_type": self.family.model_type,
            **self.config.to_dict(),
            **self._config_extras(),
        }
        atomic_write(directory / "config.json", json.dumps(hf_config, indent=2) + "\n")
        tied = self.tied_keys()
        state = {
            self.family.to_theirs(k): v.detach().contiguous().cpu()
            for k, v in self.state_dict().items()
            if k not in tied
        }
        atomic_write(directory / "model.safetensors", save(state, metadata={"format": "pt"}))
        return directory


# ---------------------------------------------------------------- reading checkpoints


def resolve_checkpoint(name_or_path: str | os.PathLike) -> Path:
    """A local checkpoint directory, or the hub snapshot of ``name_or_path`` (needs a network)."""
    path = Path(name_or_path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"expected {path / 'config.json'} in the checkpoint directory")
        return path
    text = str(name_or_path)
    looks_like_path = path.is_absolute() or text.startswith((".", "~")) or text.count("/") > 1 or path.exists()
    if looks_like_path:
        raise FileNotFoundError(
            f"expected a checkpoint directory at {text!r} (config.json + model.safetensors); it does not exist"
        )
    return _download(text)


def _download(repo_id: str) -> Path:
    import huggingface_hub
    from huggingface_hub import constants

    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    snapshot = None
    for weights in WEIGHT_FILES:
        try:
            snapshot = Path(
                huggingface_hub.snapshot_download(
                    repo_id, allow_patterns=["config.json", weights], local_files_only=offline, etag_timeout=5
                )
            )
        except Exception as error:  # the hub client raises many kinds; all mean "not available here"
            reason = "the hub is switched off (HF_HUB_OFFLINE=1)" if offline else f"the hub is unreachable ({error})"
            raise OSError(
                f"{repo_id!r} is not a local directory, and {reason}; pass the path of a directory "
                f"holding config.json and model.safetensors"
            ) from None
        if (snapshot / weights).is_file():
            break
    return snapshot


def _corrupt(path: Path, what: str, error: Exception, damage: str = "truncated or corrupted") -> CorruptCheckpointError:
    """The error for a file that cannot be read: which file, the reader's reason (its first sentence), what to do."""
    reason = str(error).strip().split("\n")[0].split(". ")[0]
    return CorruptCheckpointError(
        f"{path} is not a readable {what} ({type(error).__name__}: {reason}); the file is {damage}. "
        f"Save the model there again, or delete the directory {path.parent} so that it is rebuilt "
        "(a cached run) or downloaded again (a hub snapshot)."
    )


def read_config(directory: Path) -> dict[str, Any]:
    """``config.json`` as a dict; :class:`CorruptCheckpointError` when it is not a JSON object."""
    path = directory / "config.json"
    try:
        values = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _corrupt(path, "JSON config", error) from None
    if not isinstance(values, dict):
        raise _corrupt(path, "JSON config", TypeError(f"expected an object, got {type(values).__name__}"))
    return values


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors from safetensors, else from a pickle read with ``weights_only=True``.

    Neither executes code from the file; one that cannot be read raises :class:`CorruptCheckpointError`.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    safe, pickled = (directory / name for name in WEIGHT_FILES)
    if safe.is_file():
        try:
            return load_file(str(safe))
        except (SafetensorError, OSError) as error:
            raise _corrupt(safe, "safetensors file", error) from None
    if pickled.is_file():
        try:
            state = torch.load(pickled, map_location="cpu", weights_only=True)
        except Exception as error:  # zip, pickle and weights-only readers each raise their own kinds
            raise _corrupt(pickled, "PyTorch weights file", error, _NOT_TENSORS) from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise _corrupt(pickled, "PyTorch weights file", TypeError("expected a dict of tensors"), _NOT_TENSORS)
        return state
    raise FileNotFoundError(f"expected model.safetensors or pytorch_model.bin in {directory}")
