"""Chapter 08, ELECTRA: the chapter's sizes, the pretraining runs (ELECTRA, masked LM and Table 5's variants,
each trained once at a matched FLOP budget, then read from the disk cache) and their fine-tuning scores on
chapter 05's tasks.

Every run reads the same data: chapter 05's synthetic language, its WordPiece vocabulary and its
sentence pairs (the pair labels unused), and at step ``s`` the same masked positions (exactly
round(0.15·n) per sequence, 85% [MASK], 15% unchanged). What differs is what is learned from them. Every
generator, learned or unigram, replaces a token only by a token of the text, so that only its context gives a
replacement away (the paper's generator samples the whole vocabulary).
Compute is counted with the course's 6 N + 12 L T H per token for every network a run trains, and each
run gets as many steps as the budget pays for: masked LM, cheaper per step than ELECTRA's two networks,
gets more steps. Checkpoints at fractions of the budget are copies of the encoder taken during the one
run (as the paper's "x% trained" rows), so the learning-rate schedule is the full run's.

Fine-tuning reads the discriminator's encoder (or the masked LM's) as a chapter-05 BERT: the keys are
BERT's, and both get the same fresh pooler. (``transformers``' ELECTRA classifier reads token 0 through
dense -> GELU -> dense; BERT's pooler is dense -> tanh, then the classifier: the same shape of head.)

Taught in: 08_electra ("Matched compute", "Table 5 at equal FLOPs", "The generator's size").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.cache import atomic_write, build_all, cached_build, cached_call, compute_all, key
from lecture_lib.chapters import course_language
from lecture_lib.chapters.solutions.ch08_electra import ElectraHeadForSequenceClassification
from lecture_lib.config import build_config, built_by, seeded
from lecture_lib.finetuning.finetune import Task, finetune, finetune_budget, new_head
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraPretrainingModel,
    discriminator_loss,
    electra_training_flops_per_token,
)
from lecture_lib.models.electra_variants import AllTokensMLM, ReplaceMLM, UnigramElectra
from lecture_lib.models.heads import BertForSequenceClassification
from lecture_lib.objectives.replaced_tokens import (
    DISCRIMINATOR_WEIGHT,
    MASK_PROBABILITY,
    choose_positions,
    mask_for_generator,
)
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Check, Gate, Rule, Seeds
from lecture_lib.runtime import epoch_batch, generator, module_device, seed_everything, to_device
from lecture_lib.train import TrainConfig, recipe_config, train, warmup_from_fraction

# Table 5's rows, and the names used for them here.
VARIANTS = ("ELECTRA", "ELECTRA 15%", "Replace MLM", "All-Tokens MLM", "BERT")
MAIN_SCORE = {"acceptability": "mcc", "entailment": "accuracy", "ner": "f1", "qa": "f1"}

SCORE = "fine-tuned score (the mean of chapter 05's tasks of the profile: NER F1 and acceptability MCC in quick)"
_HELD_OUT = "held-out sentences of chapter 05's synthetic language, each model pretrained at the same FLOPs"
ABOVE_SCRATCH = 0.02  # a pretrained row must beat the same network fine-tuned from random weights by this much
_TABLE5_IN_FULL = (
    "Table 5's other rows run in the full profile only: the quick profile's budget pays for ELECTRA, masked LM and "
    "the unigram generator, each over three pretraining seeds"
)
CLAIMS = (
    Rule(
        "08-electra-beats-mlm-at-matched-compute",
        "ELECTRA beats masked LM at the same compute, most clearly at small budgets",
        paper="ELECTRA-Small 74.1 … 79.9 at 6.25 … 100% of its compute; BERT-Small 75.1 at 100% "
        "(GLUE); the gap widest at small budgets (Figure 1)",
        source="Clark et al. (2020), Table 1",
        metric="ELECTRA's fine-tuned score minus masked LM's, at the worst of the checkpoints below the whole budget",
        data=_HELD_OUT,
        compared="ELECTRA's lead",
        baseline=0.0,
        seeds=Seeds("pretraining"),
        gates=(
            Gate("ELECTRA at its worst checkpoint below the whole budget", "no pretraining", ABOVE_SCRATCH),
            Gate("masked LM at its worst checkpoint below the whole budget", "no pretraining", ABOVE_SCRATCH),
        ),
    ),
    Rule(
        "08-electra-beats-electra-15pct",
        "the loss on every token beats the loss on the masked 15%",
        paper="ELECTRA 85.0, ELECTRA 15% 82.4 (GLUE)",
        source="Clark et al. (2020), Table 5",
        metric=SCORE,
        data=_HELD_OUT,
        compared="ELECTRA",
        baseline="ELECTRA 15%",
        seeds=Seeds("pretraining"),
        quick=_TABLE5_IN_FULL,
        gates=(Gate("ELECTRA", "no pretraining", ABOVE_SCRATCH), Gate("ELECTRA 15%", "no pretraining", ABOVE_SCRATCH)),
    ),
    Rule(
        "08-all-tokens-is-most-of-the-gain",
        "learning from all tokens is most of ELECTRA's gain over BERT",
        paper="ELECTRA 85.0, All-Tokens MLM 84.3, BERT 82.2 (GLUE)",
        source="Clark et al. (2020), Table 5",
        metric=SCORE,
        data=_HELD_OUT,
        compared="All-Tokens MLM",
        baseline="the midpoint of ELECTRA and BERT",
        seeds=Seeds("pretraining"),
        quick=_TABLE5_IN_FULL,
        gates=(
            Gate("All-Tokens MLM", "no pretraining", ABOVE_SCRATCH),
            Gate("ELECTRA", "no pretraining", ABOVE_SCRATCH),
            Gate("BERT", "no pretraining", ABOVE_SCRATCH),
        ),
    ),
    Rule(
        "08-replace-mlm-beats-bert",
        "never showing [MASK] helps a little: Replace MLM above BERT",
        paper="Replace MLM 82.4, BERT 82.2 (GLUE)",
        source="Clark et al. (2020), Table 5",
        metric=SCORE,
        data=_HELD_OUT,
        compared="Replace MLM",
        baseline="BERT",
        seeds=Seeds("pretraining"),
        quick=_TABLE5_IN_FULL,
        gates=(Gate("Replace MLM", "no pretraining", ABOVE_SCRATCH), Gate("BERT", "no pretraining", ABOVE_SCRATCH)),
    ),
    Rule(
        "08-small-generator-beats-unigram",
        "a small learned generator beats a unigram one",
        paper="best at 1/4–1/2 of the discriminator's width, the unigram generator lower (GLUE)",
        source="Clark et al. (2020), Figure 3",
        metric=SCORE,
        data=_HELD_OUT,
        compared="ELECTRA with the chapter's generator",
        baseline="ELECTRA with the unigram generator",
        seeds=Seeds("pretraining"),
        gates=(
            Gate("ELECTRA with the chapter's generator", "no pretraining", ABOVE_SCRATCH),
            Gate("ELECTRA with the unigram generator", "no pretraining", ABOVE_SCRATCH),
        ),
    ),
)
CHECKS = (
    Check(
        "08-all-tokens-carry-a-loss",
        "masked LM learns from 15% of the tokens, ELECTRA's discriminator from all",
        source="Clark et al. (2020), section 2",
        reference="round(0.15 n) of each row's n real tokens for masked LM, all of them for the discriminator",
    ),
    Check(
        "08-masking-as-the-code",
        'exactly round(0.15 n) positions, 85% [MASK], none random; an equal sample is "original"',
        source="the authors' code",
        reference="the positions and labels made by hand",
    ),
    Check(
        "08-matches-transformers",
        "our networks are transformers' ElectraForPreTraining and ElectraForMaskedLM",
        source="transformers",
        reference="transformers' logits (discriminator, generator)",
        tolerance=1e-10,
    ),
)


# The pretraining recipe: ELECTRA's 300 steps of 32 sequences at peak rate 2e-3, AdamW with a linear warm-up over
# ELECTRA_WARMUP of a run's steps then linear decay, one CPU thread per run. A budget is a TrainConfig (the course's
# one optimisation config) built by electra_budget; every variant's run re-derives the warm-up for its own steps.
ELECTRA_DEFAULTS = dict(steps=300, batch_size=32, lr=2e-3, schedule="linear", num_threads=1)
ELECTRA_WARMUP = 0.1  # the share of a run's steps spent warming up


def electra_budget(**values) -> TrainConfig:
    """The pretraining budget: a :class:`~lecture_lib.train.TrainConfig` of ``values`` over
    :data:`ELECTRA_DEFAULTS`, its ``steps`` ELECTRA's at 100% of the FLOP budget, ``batch_size`` the sequences per
    step of every run, its warm-up :data:`ELECTRA_WARMUP` of the steps (:func:`~lecture_lib.train.
    warmup_from_fraction`): ``electra_budget(steps=300).warmup_steps == 30``. :attr:`Chapter08Config.pretrain` is
    built by it (:func:`lecture_lib.config.built_by`); each variant's run takes the steps the budget pays for and
    warms up over :data:`ELECTRA_WARMUP` of them (:func:`run_budget`).

    Taught in: 08_electra ("Matched compute").
    """
    return recipe_config(ELECTRA_DEFAULTS, lambda steps: warmup_from_fraction(steps, ELECTRA_WARMUP), **values)


@dataclass
class Chapter08Config:
    """The chapter's sizes: the discriminator (the masked LM baseline is the same network with a generator's
    head), the generator's size, the pretraining budget (``pretrain``, :func:`electra_budget`: ELECTRA's steps at
    100% of the FLOP budget, the sequences per step, the learning rate), the checkpoints, the rows of
    Table 5 and of the generator sweep, chapter 05's data and fine-tuning budget, and the seeds every claim's runs
    are repeated on (``seed``, a run's own, is the first of them unless given).

    Taught in: 08_electra ("Matched compute").
    """

    model: ElectraConfig
    generator_size: float = 0.25
    discriminator_weight: float = DISCRIMINATOR_WEIGHT  # λ of the loss L_MLM + λ L_Disc (exercise 1 sets 1)
    pretrain: TrainConfig = built_by(electra_budget)  # ELECTRA's steps (the budget is what they cost), batch, lr
    fractions: tuple[float, ...] = (0.0625, 0.125, 0.25, 0.5, 1.0)
    variants: tuple[str, ...] = VARIANTS
    generator_sizes: tuple[float | str, ...] = (0.125, 0.25, 0.5, 1.0, "unigram")
    tasks: tuple[str, ...] = ("ner",)
    finetune: TrainConfig = built_by(finetune_budget)
    finetune_seed: int = 0  # of the fine-tuning runs: the head's weights and the batches (seeded() sets it)
    documents: int = 2000
    language_seed: int = 0
    data_seed: int = 0  # of chapter 05's task examples, the same for every training seed
    seeds: tuple[int, ...] = field(default_factory=claim_seeds)  # every row's pretraining runs
    seed: int | None = None  # of a run: initialisation, batch order, masking and sampling (fine-tuning: finetune_seed)

    def __post_init__(self) -> None:
        self.seeds = tuple(self.seeds)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ValueError(f"seeds: expected distinct non-negative seeds, at least one, got {list(self.seeds)}")
        self.seed = self.seeds[0] if self.seed is None else self.seed
        unknown = [variant for variant in self.variants if variant not in VARIANTS]
        if unknown or "ELECTRA" not in self.variants:
            raise ValueError(f"variants: expected ELECTRA and others of {VARIANTS}, got {list(self.variants)}")
        if self.generator_size not in self.generator_sizes:
            raise ValueError(
                f"generator_sizes: expected the chapter's generator {self.generator_size} among them, "
                f"got {list(self.generator_sizes)}"
            )
        if not all(0 < f <= 1 for f in self.fractions) or 1.0 not in self.fractions:
            raise ValueError(
                f"fractions: expected shares of the budget in (0, 1], the whole one included, got "
                f"{list(self.fractions)}"
            )
        if not self.tasks or set(self.tasks) - set(MAIN_SCORE):
            raise ValueError(f"tasks: expected some of {list(MAIN_SCORE)}, got {list(self.tasks)}")


# ``quick`` (the notebook: one CPU thread per run, two runs at a time on two cores). ELECTRA gets 1,200 steps of 24
# sequences: at 300 its discriminator found 10% of the replacements by words of the text; at 1,200 (sampling only
# tokens of the text) a quarter to a third, still rising, and about 70 s a run. To pay for them over three pretraining
# seeds, the quick profile keeps ELECTRA, masked LM and the unigram generator; Table 5's other rows and the other
# generator sizes run in the full profile. Two of chapter 05's tasks: NER, which rewards knowing each token, and
# acceptability (a main verb in the wrong number), which rewards noticing what does not fit its context, the skill
# the discriminator practises. Chapter 05's 150 fine-tuning steps, because at 50, fine-tuning noise is as large as
# the differences between runs. No dropout and N(0, 0.1) initialisation at this width, as in chapters 04 and 07.
# ``full``: a GPU.
QUICK = dict(
    model=dict(
        vocab_size=600,
        embedding_size=64,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.1,
    ),
    pretrain=dict(steps=1200, batch_size=24, lr=2e-3),
    fractions=(0.25, 0.5, 1.0),
    variants=("ELECTRA", "BERT"),
    generator_sizes=(0.25, "unigram"),
    tasks=("ner", "acceptability"),
    finetune=dict(steps=150, batch_size=32, lr=1e-3, num_threads=1, fused=True),
    documents=2000,
)
FULL = dict(
    model=dict(
        vocab_size=1000,
        embedding_size=128,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=128,
    ),
    pretrain=dict(steps=2000, batch_size=64, lr=1e-3, num_threads=None),
    tasks=("acceptability", "entailment", "ner", "qa"),
    finetune=dict(steps=1000, batch_size=32, lr=2e-4),
    documents=20_000,
)

# The paper's numbers (Clark et al. 2020): Table 1's ELECTRA-Small checkpoints (GLUE dev) against BERT-Small
# trained with the same FLOPs, Table 5 (Base, GLUE dev) and Figure 3's reading that 1/4-1/2 is best.
PAPER_CHECKPOINTS = {0.0625: 74.1, 0.125: 76.0, 0.25: 77.7, 0.5: 79.0, 1.0: 79.9}
PAPER_BERT_SMALL = 75.1
PAPER_TABLE5 = {"ELECTRA": 85.0, "All-Tokens MLM": 84.3, "Replace MLM": 82.4, "ELECTRA 15%": 82.4, "BERT": 82.2}


def chapter_config(**overrides) -> Chapter08Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`) with ``overrides`` (``model``, ``pretrain`` and
    ``finetune`` as dicts merged into the profile's; ``pretrain=dict(steps=150)`` warms up over 15 steps).

    Taught in: 08_electra ("Matched compute").
    """
    return build_config(Chapter08Config, pick(quick=QUICK, full=FULL), overrides)


# ---------------------------------------------------------------- data


def chapter05_config(config: Chapter08Config) -> course_language.CourseLanguageConfig:
    """Chapter 05's data settings at this chapter's vocabulary, length and number of documents."""
    return course_language.chapter_config(
        pretrain=dict(
            data=dict(vocab_size=config.model.vocab_size, seq_len=config.model.max_position_embeddings),
            train=dict(batch_size=config.pretrain.batch_size),
        ),
        documents=config.documents,
        language_seed=config.language_seed,
        seed=config.data_seed,
    )


class ElectraChapterData:
    """Chapter 05's pretraining pairs and tasks (one tokenizer), with the masked batches every run reads."""

    def __init__(self, config: Chapter08Config) -> None:
        self.config = config
        self.ch05 = chapter05_config(config)
        self.pairs = course_language.synthetic_pretraining_data(self.ch05)
        self.tokenizer = self.pairs.tokenizer
        self._tasks: dict[str, Task] | None = None

    @property
    def tasks(self) -> dict[str, Task]:
        if self._tasks is None:
            self._tasks = course_language.build_tasks(self.tokenizer, self.ch05)
        return self._tasks

    def batch(self, step: int, test: bool = False, seed: int | None = None) -> dict[str, torch.Tensor]:
        """Batch ``step``: its rows (shuffled each epoch), the chosen positions masked for the generator
        (``input_ids``, 85% [MASK]) and their originals (``labels``), the same for every run of ``seed``
        (``None``: the config's). The positions are drawn at the full length; the columns after the
        batch's longest row are then cut off: they are padding, masked out of every attention and loss, so
        the outputs are the same for less work (the FLOPs are still counted at the full length).

        Taught in: 08_electra ("Replaced-token detection").
        """
        seed = self.config.seed if seed is None else seed
        tensors = self.pairs.test if test else self.pairs.train
        _, rows = epoch_batch(step, len(tensors["input_ids"]), self.config.pretrain.batch_size, "electra order", seed)
        ids, attention = tensors["input_ids"][rows], tensors["attention_mask"][rows]
        draws = generator("electra masking", seed, int(test), step)
        chosen = choose_positions(attention, tensors["special_tokens_mask"][rows], generator=draws)
        masked, labels = mask_for_generator(ids, chosen, mask_token_id=self.tokenizer.mask_token_id, generator=draws)
        width = int(attention.sum(1).max())
        return dict(
            input_ids=masked[:, :width],
            labels=labels[:, :width],
            attention_mask=attention[:, :width],
            token_type_ids=tensors["token_type_ids"][rows][:, :width],
            step=torch.tensor(step),
        )

    def in_text(self) -> torch.Tensor:
        """(V,) bool: the vocabulary entries that occur in the training text, the only tokens a replacement may be.

        Taught in: 08_electra ("Replaced-token detection").
        """
        return self.unigram() > 0

    def unigram(self) -> torch.Tensor:
        """The training tokens' frequencies (V,), special tokens and padding excluded: the unigram generator."""
        tensors = self.pairs.train
        ids = tensors["input_ids"][~tensors["special_tokens_mask"].bool()]
        return torch.bincount(ids, minlength=self.config.model.vocab_size).double()


# ---------------------------------------------------------------- the variants of Table 5 and Figure 3


def build_model(
    variant: str, config: Chapter08Config, data: ElectraChapterData, generator_size: float | str
) -> nn.Module:
    """A fresh model of ``variant`` (a Table 5 row) with the given generator (a fraction, or ``"unigram"``)."""
    seed_everything(config.seed)
    disc, gen = config.model, None if generator_size == "unigram" else config.model.generator(generator_size)
    if variant == "BERT":
        return ElectraForMaskedLM(disc)
    if generator_size == "unigram":
        if variant != "ELECTRA":
            raise ValueError(f"the unigram generator is for ELECTRA, got {variant!r}")
        return UnigramElectra(ElectraForPreTraining(disc), data.unigram())
    if variant in ("ELECTRA", "ELECTRA 15%"):
        return ElectraPretrainingModel(ElectraForMaskedLM(gen), ElectraForPreTraining(disc), data.in_text())
    if variant in ("Replace MLM", "All-Tokens MLM"):
        cls = ReplaceMLM if variant == "Replace MLM" else AllTokensMLM
        return cls(ElectraForMaskedLM(gen), ElectraForMaskedLM(disc), data.in_text())
    raise ValueError(f"expected a variant in {VARIANTS}, got {variant!r}")


def run_loss(variant: str, seed: int, discriminator_weight: float = DISCRIMINATOR_WEIGHT):
    """The loss function of ``variant`` for :func:`~lecture_lib.train.train`: one sampling stream per step;
    ELECTRA's two rows weight the discriminator's loss by ``discriminator_weight``."""

    def loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        batch = dict(batch)
        step = int(batch.pop("step"))
        if variant == "BERT":
            return model(**batch, masked_only=True).loss
        draws = generator("electra samples", seed, step)
        if type(model) is ElectraPretrainingModel:  # ELECTRA and ELECTRA 15%; the other variants take (batch, draws)
            return model(
                **batch,
                sampling_generator=draws,
                masked_positions_only=variant == "ELECTRA 15%",
                discriminator_weight=discriminator_weight,
            ).loss
        return model(batch, draws)

    return loss


def encoder_of(model: nn.Module) -> nn.Module:
    """The network that is kept and fine-tuned: the discriminator's encoder (the masked LM's for BERT)."""
    main = model.discriminator if hasattr(model, "discriminator") else model
    return main.electra


# ---------------------------------------------------------------- counting compute


def flops_per_token(variant: str, config: Chapter08Config, generator_size: float | str) -> dict[str, float]:
    """Training FLOPs per token of each network ``variant`` trains (forward and backward, 6 N + 12 L T H):
    ``"generator"`` (its LM head on the 15% masked positions; none for the unigram generator) and the
    network that is kept, ``"discriminator"`` (ELECTRA's two rows) or ``"masked LM"`` (its head on the
    masked 15%, or on every position for All-Tokens MLM, plus its copy gate).

    Taught in: 08_electra ("Matched compute").
    """
    disc, length = config.model, config.model.max_position_embeddings
    counts = {}
    if variant != "BERT" and generator_size != "unigram":
        counts["generator"] = electra_training_flops_per_token(
            disc.generator(generator_size), length, "generator", masked_fraction=MASK_PROBABILITY
        )
    if variant in ("ELECTRA", "ELECTRA 15%"):
        counts["discriminator"] = electra_training_flops_per_token(disc, length, "discriminator")
    else:
        fraction = 1.0 if variant == "All-Tokens MLM" else MASK_PROBABILITY
        counts["masked LM"] = electra_training_flops_per_token(disc, length, "generator", masked_fraction=fraction)
        if variant == "All-Tokens MLM":
            counts["masked LM"] += 6 * disc.hidden_size  # the copy gate
    return counts


def flops_per_step(variant: str, config: Chapter08Config, generator_size: float | str) -> float:
    """Training FLOPs of one step of ``variant``: :func:`flops_per_token` summed over its networks, on
    ``pretrain.batch_size`` x ``max_position_embeddings`` tokens. The unigram generator costs nothing.

    Taught in: 08_electra ("Matched compute").
    """
    length = config.model.max_position_embeddings
    return sum(flops_per_token(variant, config, generator_size).values()) * config.pretrain.batch_size * length


def budget(config: Chapter08Config) -> float:
    """The FLOP budget: what ELECTRA's ``pretrain.steps`` cost with the chapter's generator.

    Taught in: 08_electra ("Matched compute").
    """
    return config.pretrain.steps * flops_per_step("ELECTRA", config, config.generator_size)


def steps_for(variant: str, config: Chapter08Config, generator_size: float | str) -> int:
    """The steps ``variant`` can afford within :func:`budget`.

    Taught in: 08_electra ("Matched compute").
    """
    return round(budget(config) / flops_per_step(variant, config, generator_size))


# ---------------------------------------------------------------- the runs


@dataclass
class Run:
    """One cached pretraining run: its losses, the encoder at each budget fraction (what is fine-tuned), the
    final model's state, and the whole model at each fraction (generator and discriminator head included:
    what :func:`detection_accuracy` reads at a checkpoint)."""

    variant: str
    generator_size: float | str
    steps: int
    flops: float
    loss: list[float]
    checkpoints: dict[float, dict[str, torch.Tensor]]
    final_state: dict[str, torch.Tensor]
    snapshots: dict[float, dict[str, torch.Tensor]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Run:
        """The run saved at ``path`` by :func:`pretrain_run`."""
        weights = torch.load(path / "weights.pt", weights_only=True)
        about = json.loads((path / "history.json").read_text())
        return cls(
            about["variant"],
            about["generator_size"],
            about["steps"],
            about["flops"],
            about["loss"],
            weights["checkpoints"],
            weights["final"],
            weights["snapshots"],
        )


def run_budget(config: Chapter08Config, steps: int) -> TrainConfig:
    """``config.pretrain`` run for ``steps`` (a variant's share of the budget, :func:`steps_for`), warming up over
    :data:`ELECTRA_WARMUP` of them: ``run_budget(config, 500).warmup_steps == 50``.

    Taught in: 08_electra ("Matched compute").
    """
    return replace(config.pretrain, steps=steps, warmup_steps=warmup_from_fraction(steps, ELECTRA_WARMUP))


def _state_copy(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s state on the CPU, which later training steps leave as it is."""
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


@cached_build(load=Run.load, ignore=("progress",))
def pretrain_run(
    path: Path, variant: str, config: Chapter08Config, generator_size: float | str, progress: bool = True
) -> None:
    """Pretrain ``variant`` with ``generator_size`` (a share of the discriminator's width, or ``"unigram"``) within
    the budget, keeping a copy of the encoder at each of ``config.fractions`` of its steps; called as
    ``pretrain_run(variant, config, generator_size)``, it trains once and then reads the :class:`Run` from the cache.

    Taught in: 08_electra ("Matched compute").
    """
    steps = steps_for(variant, config, generator_size)
    marks = {max(1, round(f * steps)): f for f in config.fractions}
    chapter_data = chapter_data_of(config)
    model = build_model(variant, config, chapter_data, generator_size)
    saved, whole, done = {}, {}, [0]

    def snapshot(trained: nn.Module) -> dict[str, float]:
        done[0] += 1
        if done[0] in marks:
            fraction = marks[done[0]]
            saved[fraction], whole[fraction] = _state_copy(encoder_of(trained)), _state_copy(trained)
        return {}

    history = train(
        model,
        partial(chapter_data.batch, seed=config.seed),
        run_loss(variant, config.seed, config.discriminator_weight),
        replace(run_budget(config, steps), eval_every=1),  # every step: the snapshots at the fractions
        evaluate=snapshot,
        progress=progress,
    )
    path.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"checkpoints": saved, "snapshots": whole, "final": {k: v.cpu() for k, v in model.state_dict().items()}},
        path / "weights.pt",
    )
    atomic_write(
        path / "history.json",
        json.dumps(
            {
                "variant": variant,
                "generator_size": generator_size,
                "steps": steps,
                "flops": steps * flops_per_step(variant, config, generator_size),
                "loss": history.loss,
            }
        ),
    )


_CHAPTER_DATA: dict[str, ElectraChapterData] = {}  # a process's data, built once per data recipe


def chapter_data_of(config: Chapter08Config) -> ElectraChapterData:
    """The chapter's data for ``config`` (:class:`ElectraChapterData`), built once per data recipe in a process (the
    notebook's, or a worker of :func:`~lecture_lib.cache.compute_all`) and kept for its next runs.

    Taught in: 08_electra ("Matched compute").
    """
    recipe = key(asdict(chapter05_config(config)))
    if recipe not in _CHAPTER_DATA:
        _CHAPTER_DATA[recipe] = ElectraChapterData(config)
    return _CHAPTER_DATA[recipe]


def electra_small_training_flops(
    *, masked_fraction: float = 1.0, steps: int = 1_000_000, batch_size: int = 128, seq_len: int = 128
) -> float:
    """ELECTRA-Small's pretraining FLOPs by the course's formula (exercise 3): discriminator plus generator per
    token, times ``steps * batch_size * seq_len`` tokens (1.64e10 for the paper's run); ``masked_fraction`` < 1
    applies the generator's LM head to that share of the positions only.

    Taught in: 08_electra ("Matched compute").
    """
    discriminator = ElectraConfig()
    generator_config = ElectraConfig(hidden_size=64, num_attention_heads=1, intermediate_size=256)
    per_token = electra_training_flops_per_token(
        discriminator, seq_len, "discriminator"
    ) + electra_training_flops_per_token(generator_config, seq_len, "generator", masked_fraction=masked_fraction)
    return per_token * steps * batch_size * seq_len


def bert_config(config: ElectraConfig) -> BertConfig:
    """The BERT of an ELECTRA network's sizes (E = H: the same keys, no projection).

    Taught in: 08_electra ("Matched compute").
    """
    if config.embedding_size != config.hidden_size:
        raise ValueError(
            f"expected embedding_size = hidden_size for a BERT, got {config.embedding_size} and {config.hidden_size}"
        )
    return BertConfig(**{f.name: getattr(config, f.name) for f in fields(BertConfig)})


def as_bert(config: ElectraConfig, state: dict[str, torch.Tensor], seed: int = 0) -> BertModel:
    """An ELECTRA encoder with E = H as chapter 05's BERT: the same keys, plus a fresh pooler (seeded).

    Taught in: 08_electra ("Matched compute").
    """
    seed_everything(seed)
    bert = BertModel(bert_config(config))
    missing, unexpected = bert.load_state_dict(state, strict=False)
    if unexpected or any(not k.startswith("pooler.") for k in missing):
        raise ValueError(f"not a BERT-shaped encoder: missing {missing}, unexpected {unexpected}")
    return bert


def _scores(tasks: dict[str, Task], encoder: BertModel | BertConfig, config: Chapter08Config) -> dict[str, float]:
    return {
        name: finetune(
            tasks[name],
            new_head(tasks[name], encoder, seed=config.finetune_seed),
            config.finetune,
            config.finetune_seed,
        ).scores[MAIN_SCORE[name]]
        for name in config.tasks
    }


@cached_call
def scratch_scores(config: Chapter08Config) -> dict[str, float]:
    """The same fine-tuning from random weights (no pretraining, 0 FLOPs): the floor of the curve (cached).

    Taught in: 08_electra ("Matched compute").
    """
    return _scores(chapter_data_of(config).tasks, bert_config(config.model), config)


@cached_call
def finetune_scores(
    variant: str, config: Chapter08Config, generator_size: float | str, fraction: float, electra_head: bool = False
) -> dict[str, float]:
    """The main score of each of ``config.tasks`` after fine-tuning, with ``config``'s seed, the checkpoint at
    ``fraction`` of the run ``pretrain_run(variant, config, generator_size)`` (cached). Named by the run's call,
    not by the run, so that it can join the pool that trains the run (:func:`chapter_runs`): it reads the run from
    the cache, or waits while another worker trains it. With ``electra_head``, the sentence tasks read token 0
    through :class:`ElectraHeadForSequenceClassification` instead of BERT's pooler.

    Taught in: 08_electra ("Matched compute").
    """
    run = pretrain_run(variant, config, generator_size, False)
    encoder = as_bert(config.model, run.checkpoints[fraction], config.seed)
    tasks = chapter_data_of(config).tasks
    return _scores(with_electra_head(tasks) if electra_head else tasks, encoder, config)


def mean_score(scores: dict[str, float]) -> float:
    """The mean of one fine-tuned model's main scores over the chapter's tasks."""
    return sum(scores.values()) / len(scores)


def chapter_runs(
    config: Chapter08Config, *, workers: int | None = None
) -> tuple[dict[str, dict[int, Run]], dict[float | str, dict[int, Run]]]:
    """Every pretraining run the chapter reads (:func:`pretrain_run`, the missing ones ``workers`` at a time): each
    row of ``config.variants`` once per seed of ``config.seeds`` (``{variant: {seed: run}}``), and ELECTRA with each
    generator of ``config.generator_sizes`` on the same seeds (``{size: {seed: run}}``; the chapter's generator is
    the ELECTRA row's runs).

    In the same pool, after the runs: each seed's fine-tuning from random weights (:func:`scratch_scores`, the
    floor of every table), then the fine-tuning the sections read (:func:`finetuning_calls`), in the order of the
    runs they read. So while the last runs train, the other cores fine-tune the runs already done, where a pool per
    table would leave a core idle at the end of each.

    Taught in: 08_electra ("Generator and discriminator", "Matched compute").
    """
    sizes = [size for size in config.generator_sizes if size != config.generator_size]
    calls = [
        (variant, seeded(config, seed), config.generator_size, False)
        for variant in config.variants
        for seed in config.seeds
    ] + [("ELECTRA", seeded(config, seed), size, False) for size in sizes for seed in config.seeds]
    floors = [(scratch_scores, (seeded(config, seed),)) for seed in config.seeds]
    tunes = [(finetune_scores, call) for call in finetuning_calls(calls, config)]
    build_all([(pretrain_run, call) for call in calls] + floors + tunes, workers=workers, desc="pretraining")
    runs = iter(compute_all(pretrain_run, calls))
    table = {variant: {seed: next(runs) for seed in config.seeds} for variant in config.variants}
    sweep = {size: {seed: next(runs) for seed in config.seeds} for size in sizes}
    return table, {config.generator_size: table["ELECTRA"], **sweep}


# The rows whose every checkpoint the chapter fine-tunes (Table 1's curve); every other run is fine-tuned at the end
# of its budget only (Table 5's other rows, the generator sweep).
CURVE_VARIANTS = ("ELECTRA", "BERT")


def finetuning_calls(runs: Sequence[tuple], config: Chapter08Config) -> list[tuple]:
    """The :func:`finetune_scores` calls the chapter's sections make on the pretraining calls ``runs`` (as
    :func:`chapter_runs` lists them), in their order: each checkpoint of ``config.fractions`` for
    :data:`CURVE_VARIANTS` with the chapter's generator, the whole budget for every other run.

    >>> config = chapter_config(seeds=(0,), fractions=(0.5, 1.0), generator_size=0.25)
    >>> runs = [("BERT", config, 0.25, False), ("ELECTRA", config, "unigram", False)]
    >>> [(variant, size, fraction) for variant, _, size, fraction, _ in finetuning_calls(runs, config)]
    [('BERT', 0.25, 0.5), ('BERT', 0.25, 1.0), ('ELECTRA', 'unigram', 1.0)]

    Taught in: 08_electra ("Matched compute").
    """
    return [
        (variant, seeded_config, size, fraction, False)
        for variant, seeded_config, size, _ in runs
        for fraction in (config.fractions if variant in CURVE_VARIANTS and size == config.generator_size else (1.0,))
    ]


def seeded_scores(
    runs: dict[int, Run], config: Chapter08Config, fractions: tuple[float, ...] = (1.0,)
) -> dict[float, list[float]]:
    """For each of ``fractions`` of the budget, the mean fine-tuned score of each seed's checkpoint (in the
    order of ``runs``), each fine-tuned with its own seed (:func:`finetune_scores`, the missing ones first, in
    worker processes).

    Taught in: 08_electra ("Matched compute").
    """
    calls = [
        (run.variant, seeded(config, seed), run.generator_size, f, False)
        for f in fractions
        for seed, run in runs.items()
    ]
    scores = iter(compute_all(finetune_scores, calls, desc="fine-tuning"))
    return {f: [mean_score(next(scores)) for _ in runs] for f in fractions}


def with_electra_head(tasks: dict[str, Task]) -> dict[str, Task]:
    """``tasks`` with :class:`ElectraHeadForSequenceClassification` as the head of every sentence task (those
    BERT reads through its pooler); the token and span tasks are left as they are.

    Exercise 4 of chapter 08.
    """
    return {
        name: replace(task, head=ElectraHeadForSequenceClassification)
        if task.head is BertForSequenceClassification
        else task
        for name, task in tasks.items()
    }


def replaced_token_example(run: Run, config: Chapter08Config, data: ElectraChapterData, row: int = 0) -> list[dict]:
    """One held-out sequence through the trained ELECTRA pair: per real token, the original, what the
    generator saw, the corrupted token, its label and the discriminator's probability that it was replaced.

    Taught in: 08_electra ("Generator and discriminator").
    """
    model = build_model("ELECTRA", config, data, run.generator_size)
    model.load_state_dict(run.final_state)
    batch = data.batch(0, test=True)
    batch = {k: v[row : row + 1] for k, v in batch.items() if k != "step"}
    with torch.no_grad():
        out = model.eval()(**batch, sampling_generator=generator("electra example", config.seed))
    original = torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"], batch["input_ids"])[0]
    n = int(batch["attention_mask"].sum())
    tokens = data.tokenizer.convert_ids_to_tokens
    return [
        dict(original=o, generator_input=g, corrupted=c, replaced=int(r), p_replaced=float(p))
        for o, g, c, r, p in zip(
            tokens(original[:n].tolist()),
            tokens(batch["input_ids"][0, :n].tolist()),
            tokens(out.corrupted_ids[0, :n].tolist()),
            out.replaced[0, :n],
            torch.sigmoid(out.logits[0, :n]),
        )
    ]


def detection_accuracy(
    run: Run, config: Chapter08Config, data: ElectraChapterData, batches: int = 4, fraction: float | None = None
) -> dict[str, float]:
    """An ELECTRA run (a learned or the unigram generator), trained to the end or to ``fraction`` of its budget,
    on held-out batches: the generator's accuracy at the masked positions (its most likely token; the unigram
    generator's is the most frequent token), the share of those positions it replaced, the discriminator's
    recall on the replacements (the share it calls "replaced"; every replacement is a token of the text, so
    only its context gives it away) and its accuracy on the original tokens; and its loss per real token beside
    the loss of a constant guess at the share of real tokens replaced (the entropy of that share, in nats): how
    much of the per-token signal it has learned.

    Taught in: 08_electra ("Generator and discriminator", "Matched compute").
    """
    model = build_model("ELECTRA", config, data, run.generator_size).eval()
    model.load_state_dict(run.final_state if fraction is None else run.snapshots[fraction])
    counts, loss_sum = torch.zeros(6), 0.0
    with torch.no_grad():
        for i in range(batches):
            batch = {k: v for k, v in data.batch(i, test=True).items() if k != "step"}
            draws = generator("electra eval", config.seed, i)
            chosen, real = batch["labels"] != IGNORE_INDEX, batch["attention_mask"].bool()
            if isinstance(model, UnigramElectra):
                corrupted, replaced = model.corrupt(batch, draws)
                logits = model.discriminator(corrupted, batch["attention_mask"], batch["token_type_ids"]).logits
                guesses = model.log_frequencies.argmax().expand(int(chosen.sum()))
            else:
                out = model(**batch, sampling_generator=draws)
                logits, replaced, guesses = out.logits, out.replaced, out.generator_logits.argmax(-1)
            said, replaced = logits > 0, replaced.bool() & real
            loss_sum += float(discriminator_loss(logits, replaced.long(), batch["attention_mask"]) * real.sum())
            counts += torch.tensor(
                [
                    (guesses == batch["labels"][chosen]).sum(),
                    chosen.sum(),
                    (said & replaced).sum(),
                    replaced.sum(),
                    (~said & ~replaced & real).sum(),
                    (~replaced & real).sum(),
                ],
                dtype=torch.float,
            )
    real_tokens = float(counts[3] + counts[5])
    share = torch.tensor(float(counts[3]) / real_tokens, dtype=torch.float64)
    return {
        "generator accuracy": float(counts[0] / counts[1]),
        "replaced share": float(counts[3] / counts[1]),
        "recall on replacements": float(counts[2] / counts[3]),
        "accuracy on originals": float(counts[4] / counts[5]),
        "discriminator loss": loss_sum / real_tokens,
        "constant guess loss": float(F.binary_cross_entropy(share, share)),
    }


# ---------------------------------------------------------------- exercises


@torch.no_grad()
def generator_right_by_input(
    model: ElectraPretrainingModel,
    batch: dict[str, torch.Tensor],
    mask_token_id: int,
    sampling_generator: torch.Generator | None = None,
) -> dict[str, float]:
    """The share of the generator's samples equal to the original token, at the chosen positions whose input
    kept the original (``"kept"``, 15% of the chosen) and at those that show [MASK] (``"[MASK]"``).

    Exercise 2 of chapter 08: a replaced token is what the discriminator must find, so the first share is how
    many of the kept positions are free "original" labels.
    """
    model.eval()  # no dropout in the measurement
    parts = to_device({name: tensor for name, tensor in batch.items() if name != "step"}, module_device(model))
    with torch.no_grad():
        out = model(**parts, sampling_generator=sampling_generator)
    chosen = parts["labels"] != IGNORE_INDEX
    right = out.corrupted_ids == parts["labels"]  # (B, T)
    shows_mask = parts["input_ids"] == mask_token_id
    return {
        "kept": float(right[chosen & ~shows_mask].float().mean()),
        "[MASK]": float(right[chosen & shows_mask].float().mean()),
    }
