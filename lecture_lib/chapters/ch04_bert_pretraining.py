"""Chapter 04, BERT pretraining: the chapter's sizes, its small pretrained BERT (trained once, then read
from the disk cache), and the masking ablation.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The masking ablation").
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

from lecture_lib.cache import cached, key
from lecture_lib.objectives.masking import ABLATION_STRATEGIES, MaskingStrategy
from lecture_lib.pretraining import (
    PretrainConfig,
    PretrainingData,
    PretrainResult,
    cached_pretraining,
    evaluate,
    merge_dicts,
    pretrain,
)
from lecture_lib.pretraining import main as pretraining_main
from lecture_lib.profile import pick
from lecture_lib.train import cpu_threads

# ``quick`` (the notebook, two CPU cores, about 20 s): a 2-layer BERT of width H = 64 with 4 heads and a
# 2,000-token vocabulary, 1,000 steps of 16 pairs of 64 tokens (about 4 passes over the corpus's 200k
# prose tokens). At that size dropout only slows learning, and BERT's initialisation, N(0, 0.02) for a
# width of 768, is too small for a width of 64: we use 0.1. Matrices this small are multiplied fastest
# by one CPU thread (two mostly wait for each other, badly so on a busy machine). ``full`` (a GPU):
# BERT-mini's shape, 4 layers of H = 256 with an 8,000-token vocabulary, 128-token pairs, 4,000 steps
# of 64 pairs (about 90 passes over the corpus: it is small), BERT's dropout and initialisation.
# Unnamed fields keep the defaults of BertConfig, DataConfig, ObjectiveConfig and OptimizationConfig.
QUICK = dict(
    model=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.1),
    data=dict(vocab_size=2000, seq_len=64),
    train=dict(steps=1000, batch_size=16, lr=2e-3, warmup_steps=100, eval_every=100, num_threads=1),
)
FULL = dict(
    model=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    data=dict(vocab_size=8000, seq_len=128),
    train=dict(steps=4000, batch_size=64, lr=5e-4, warmup_steps=400, eval_every=250),
)


def chapter_config(**overrides) -> PretrainConfig:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`) with ``overrides``, nested dicts merged
    field by field: ``chapter_config(train=dict(steps=100), objective=dict(pairs=None))``.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    return PretrainConfig.from_dict(pick(quick=QUICK, full=FULL), overrides)


def ablation_config(**overrides) -> PretrainConfig:
    """The masking ablation's runs: the chapter's model and data, MLM only, a shorter budget per strategy.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    ablation = dict(objective=dict(pairs=None),
                    train=dict(steps=pick(quick=150, full=2000), eval_every=0, warmup_steps=pick(quick=15, full=200)))
    return chapter_config(**merge_dicts(ablation, overrides))


def small_pretrained_bert(config: PretrainConfig | None = None, *, data: PretrainingData | None = None,
                          progress: bool = False) -> PretrainResult:
    """The chapter's small pretrained BERT: trained once per recipe, then read from the disk cache.

    The first call trains (``chapter_config()``: about 20 seconds on two CPU cores in the quick
    profile) inside ``<cache>/bert-<key>.partial`` (checkpointed: an interrupted run resumes)
    and renames it to ``<cache>/bert-<key>`` when done; later calls load it. Training is
    seeded, so a cold cache rebuilds the same model. ``data`` (built from the same ``config``) saves
    re-tokenizing the corpus when the caller has it already. ``result.path`` is a Hugging Face
    checkpoint directory: ``BertModel.from_pretrained(result.path)`` gives the bare encoder.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    config = config or chapter_config()
    return cached_pretraining(f"bert-{key(asdict(config))}", config, lambda: data, progress=progress)


PROBES = {"[MASK]": MaskingStrategy(1.0, 0.0, 0.0), "same": MaskingStrategy(0.0, 1.0, 0.0),
          "random": MaskingStrategy(0.0, 0.0, 1.0)}


def masking_ablation(config: PretrainConfig | None = None, *,
                     strategies: Sequence[MaskingStrategy] = ABLATION_STRATEGIES,
                     data: PretrainingData | None = None, progress: bool = False) -> dict[str, dict[str, float]]:
    """One model per masking strategy, each probed on the same held-out positions in three ways.

    Returns ``{strategy name: {probe: MLM accuracy}}`` where the probe says what the selected held-out
    positions show the model: ``[MASK]`` (the pretraining condition BERT optimises for), ``same`` (the
    true token, as every token is at fine-tuning time: can the model still say what is there?) and
    ``random`` (a wrong token to correct). Results are cached as JSON next to the models.

    Taught in: 04_bert_pretraining ("The masking ablation").
    """
    config = config or ablation_config()
    names = [s.name for s in strategies]

    def build(path: Path) -> None:
        corpus = data or PretrainingData.from_corpus(config)
        results = {}
        for name in names:
            run = replace(config, objective=replace(config.objective, masking=name))
            model = pretrain(run, data=corpus.with_config(run), progress=progress).model
            with cpu_threads(config.train.num_threads):
                results[name] = {probe: evaluate(model, corpus.eval_batches(strategy))["mlm_accuracy"]
                                 for probe, strategy in PROBES.items()}
        path.write_text(json.dumps(results, indent=2) + "\n")

    name = f"masking-ablation-{key({'config': asdict(config), 'strategies': names})}.json"
    return cached(name, build, lambda path: json.loads(path.read_text()))


def main(argv: list[str] | None = None) -> PretrainResult:
    """``python -m lecture_lib.chapters.ch04_bert_pretraining --out DIR [--profile full] [--train.steps N] ...``:
    the chapter's recipe from the command line (see :func:`lecture_lib.pretraining.main`).

    Taught in: 04_bert_pretraining ("A training loop for real runs").
    """
    return pretraining_main(argv, defaults=chapter_config, prog="python -m lecture_lib.chapters.ch04_bert_pretraining")


if __name__ == "__main__":
    main()
