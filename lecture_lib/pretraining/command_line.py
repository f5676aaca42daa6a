"""Pretraining a BERT from scratch from the command line: one flag per leaf of the nested config, every value checked (and
the output folder) before any work starts.

Taught in: 04_bert_pretraining ("A training loop for real runs").
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import types
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch.distributed as dist

from lecture_lib.config import (
    FieldError,
    FlagParser,
    flag_type,
    rule_of,
)
from lecture_lib.pretraining.config import DERIVED_FROM_DATA, PretrainConfig, config_dict
from lecture_lib.pretraining.run import RESULT_FILES, PretrainResult, pretrain
from lecture_lib.profile import ENV_VAR, PROFILES, current
from lecture_lib.runtime import (
    existing_device,
)
from lecture_lib.train import (
    CHECKPOINT_EVERY,
    distributed_context,
)


def config_leaves(config: Any = PretrainConfig, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every settable leaf of a nested config (a class, or an instance) as ``(path, type)``, e.g.
    ``(("train", "steps"), int)``; the model's sizes that the data decides (:data:`DERIVED_FROM_DATA`) are
    left out. The model's fields are those of the instance's model config, or of BERT's for the class."""
    hints = typing.get_type_hints(config if isinstance(config, type) else type(config))
    for f in fields(config):
        path, kind = (*prefix, f.name), hints[f.name]
        if not isinstance(config, type) and is_dataclass(getattr(config, f.name)):
            yield from config_leaves(getattr(config, f.name), path)
        elif typing.get_origin(kind) in (typing.Union, types.UnionType) and is_dataclass(typing.get_args(kind)[0]):
            yield from config_leaves(typing.get_args(kind)[0], path)  # a model family: BERT's fields
        elif is_dataclass(kind):
            yield from config_leaves(kind, path)
        elif path not in DERIVED_FROM_DATA:
            yield path, kind


def _leaf_type(kind: Any) -> tuple[str, Callable[[str], Any]]:
    """The metavar and parser of a flag for a field of type ``kind`` (bool, int, float, str, or X | None)."""
    optional = type(None) in typing.get_args(kind)
    base = next(k for k in typing.get_args(kind) if k is not type(None)) if optional else kind
    parse = {bool: _boolean, int: int, float: float, str: str}[base]
    if not optional:
        return base.__name__.upper(), parse

    def parse_or_none(text: str) -> Any:
        return None if text.lower() == "none" else parse(text)

    parse_or_none.__name__ = f"{base.__name__} or none"  # argparse's "invalid int or none value: 'x'"
    return f"{base.__name__.upper()}|none", parse_or_none


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1", "yes")


def _shown(value: Any) -> str:
    """A default as the command line reads it: true/false, none."""
    return str(value).lower() if value is None or isinstance(value, bool) else str(value)


def _lookup(config: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        config = getattr(config, name)
    return config


def leaf_rule(config: Any, path: tuple[str, ...]) -> Any:
    """The rule of the field at ``path`` (:mod:`lecture_lib.config`), or ``None``."""
    return rule_of(type(_lookup(config, path[:-1])), path[-1])


def flag_parser(argv: Sequence[str] | None, *, defaults: Callable[..., PretrainConfig], prog: str) -> FlagParser:
    """The command line: run options, then one flag per leaf of the config (``--model.hidden_size 256``,
    ``--train.steps 100``, ``--objective.pairs none``), whose help shows the field's rule and ``defaults()``'s
    value under the profile ``argv`` chooses."""
    profile = argparse.ArgumentParser(add_help=False)
    profile.add_argument("--profile", choices=PROFILES)
    chosen, _ = profile.parse_known_args(argv)
    if chosen.profile:
        os.environ[ENV_VAR] = chosen.profile
    base = defaults()
    parser = FlagParser(
        prog=prog,
        description=__doc__.split("\n\n")[0],
        epilog=f"Defaults shown: the chapter's, {current()} profile. Booleans read true or false; a field that may "
        "be empty reads none. The model's vocab_size and max_position_embeddings are data.vocab_size and "
        "data.seq_len. Every value is checked before any work starts, and so is --out.",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="output directory: new, empty, or this recipe's earlier run (rerun to resume from its checkpoint)",
    )
    parser.add_argument(
        "--profile", choices=PROFILES, help="the chapter's sizes (default: $LECTURE_PROFILE, else quick)"
    )
    checkpoint_rule = CHECKPOINT_EVERY  # the rule train() applies to its checkpoint_every
    parser.add_argument(
        "--checkpoint-every",
        type=flag_type(int, checkpoint_rule),
        default=500,
        help=f"steps between checkpoints, {checkpoint_rule} (0: at the end only; default: 500)",
    )
    parser.add_argument(
        "--device",
        type=flag_type(existing_device),
        help="cpu, cuda, cuda:1, mps: one this machine has (default: the best available)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    groups = {
        f.name: parser.add_argument_group(f"{f.name} ({type(getattr(base, f.name)).__name__})")
        for f in fields(base)
        if is_dataclass(getattr(base, f.name))
    }
    for path, kind in config_leaves(base):
        metavar, parse = _leaf_type(kind)
        rule = leaf_rule(base, path)
        group = groups[path[0]] if len(path) > 1 else parser
        group.add_argument(
            "--" + ".".join(path),
            dest=".".join(path),
            metavar=metavar,
            type=parse,
            default=argparse.SUPPRESS,
            help=f"{f'{rule}; ' if rule else ''}default: {_shown(_lookup(base, path))}",
        )
    return parser


def config_from_flags(
    parser: argparse.ArgumentParser, args: argparse.Namespace, defaults: Callable[..., PretrainConfig]
) -> PretrainConfig:
    """``defaults`` with the flags given, validated whole; a value a config refuses is ``parser``'s error,
    naming the flag(s) the user gave among the fields at fault (a rule between two fields names both when
    both were given, else the one given)."""
    overrides: dict[str, Any] = {}
    for path, _ in config_leaves(defaults()):
        if ".".join(path) in vars(args):
            *parents, leaf = path
            level = overrides
            for name in parents:
                level = level.setdefault(name, {})
            level[leaf] = vars(args)[".".join(path)]
    try:
        return defaults(**overrides)
    except FieldError as error:
        given = [name for name in error.fields if name in vars(args)] or list(error.fields)
        parser.error(f"{' and '.join('--' + name for name in given)}: {error.reason}")


def check_output_folder(out: Path, config: PretrainConfig) -> None:
    """Refuse, with a ``ValueError`` of one line, an ``out`` this run cannot write or must not: a path
    through a file, a folder where nothing can be written (tried, not read off its permissions), a folder
    holding files other than a run's outputs, or another recipe's run. Creates nothing.

    ======================================================  =======================================
    ``out``                                                 verdict
    ======================================================  =======================================
    absent, or empty                                        a new run
    this recipe's ``pretrain_config.json`` (+ checkpoint)   resume (or return at once when done)
    another recipe's ``pretrain_config.json``               refused, naming the first difference
    ======================================================  =======================================
    """
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(
            f"{out} is a file, not a folder" if existing == out else f"{out} is under {existing}, which is a file"
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise ValueError(f"cannot write in {existing}: {error.strerror}") from None
    if existing != out:
        return
    others = sorted(
        p.name
        for p in out.iterdir()
        if p.name not in (*RESULT_FILES, "checkpoint") and not (p.name.startswith(".") and p.name.endswith(".tmp"))
    )  # atomic_open's, cut by a kill
    if others:
        raise ValueError(
            f"{out} holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}, which this "
            "command does not write: choose a new or empty folder"
        )
    recipe = out / "pretrain_config.json"
    if recipe.exists():
        try:
            theirs = _leaves(json.loads(recipe.read_text()))
        except (ValueError, AttributeError):  # not JSON, or not a dict of the recipe's parts
            raise ValueError(f"{recipe} is not a recipe this command wrote: choose another folder") from None
        ours = _leaves(config_dict(config))
        differ = next((name for name in ours if ours[name] != theirs.get(name)), None)
        if differ is not None:
            raise ValueError(
                f"{out} holds a run of another recipe ({differ} {_shown(theirs.get(differ))} there, "
                f"{_shown(ours[differ])} here): give its flags to resume it, or choose another folder"
            )


def _leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict's leaves by dotted path: ``{"train": {"steps": 3}}`` -> ``{"train.steps": 3}``."""
    flat = {}
    for name, value in values.items():
        flat.update(_leaves(value, f"{prefix}{name}.") if isinstance(value, dict) else {prefix + name: value})
    return flat


def parse_command_line(
    argv: Sequence[str] | None, *, defaults: Callable[..., PretrainConfig], prog: str
) -> tuple[PretrainConfig, argparse.Namespace]:
    """The recipe and the run options, every one checked before any work: a bad value is one line on stderr
    naming its flag, and exit status 2; no corpus, tokenizer, model or output folder is made before."""
    parser = flag_parser(argv, defaults=defaults, prog=prog)
    args = parser.parse_args(argv)
    config = config_from_flags(parser, args, defaults)
    try:
        check_output_folder(Path(args.out), config)
    except ValueError as error:
        parser.error(f"--out: {error}")
    return config, args


def main(argv: Sequence[str] | None = None, *, defaults: Callable[..., PretrainConfig], prog: str) -> PretrainResult:
    """Pretrain from the command line: ``--out DIR [--profile full] [--train.steps N] ...``; prints the final
    metrics. ``defaults(**overrides)`` gives the recipe (a chapter's ``chapter_config``, which takes nested
    dicts such as ``train={"steps": 100}``); ``prog`` is the command's name in ``--help``.
    """
    config, args = parse_command_line(argv, defaults=defaults, prog=prog)
    rank, world = distributed_context()
    result = pretrain(
        config,
        out_dir=args.out,
        progress=not args.no_progress,
        device=args.device,
        checkpoint_every=args.checkpoint_every,
    )
    if rank == 0:
        final = result.history.evals[-1][1] if result.history.evals else {}
        print(
            json.dumps(
                {
                    "out": str(Path(args.out).resolve()),
                    "workers": world,
                    "steps": config.train.steps,
                    "final_train_loss": result.history.loss[-1],
                    **final,
                }
            )
        )
    if world > 1:
        dist.destroy_process_group()
    return result
