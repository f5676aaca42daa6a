"""The pretraining recipe as a nested config: the model (BERT or ALBERT, with each family's pretraining class
and sentence-pair head), the data, the objective, the optimisation and the seed.

Taught in: 04_bert_pretraining ("Pretraining a small BERT"), 07_albert ("Sentence-order prediction").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from lecture_lib.config import (
    FieldError,
    OneOf,
    Range,
    build_fields,
    build_part,
    check_fields,
    merge_dicts,
)
from lecture_lib.models.albert import AlbertConfig, AlbertForPreTraining
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.hf import PreTrainedModule
from lecture_lib.objectives.masking import (
    MaskingStrategy,
)
from lecture_lib.objectives.sentence_pairs import (
    NUM_SPECIAL_IN_PAIR,
    make_order_pairs,
    make_pairs,
)
from lecture_lib.train import (
    TrainConfig,
)

# The sentence-pair objectives a run can add to masked LM (None: MLM only): how pairs are cut, and the key
# of their labels in the collated tensors.
PAIR_TASKS = {"nsp": (make_pairs, "next_sentence_label"), "sop": (make_order_pairs, "sentence_order_label")}


@dataclass(frozen=True)
class PretrainingHead:
    """A family's pretraining class and its sentence-pair head: the label argument, the logits field, the metric."""

    model_class: type[PreTrainedModule]
    label: str
    logits: str
    metric: str


# Each family's own pair head reads whichever pairs the objective cuts (ALBERT's SOP head can learn NSP).
PRETRAINING_HEADS = {
    "bert": PretrainingHead(BertForPreTraining, "next_sentence_label", "seq_relationship_logits", "nsp_accuracy"),
    "albert": PretrainingHead(AlbertForPreTraining, "sentence_order_label", "sop_logits", "sop_accuracy"),
}


def pretraining_head(model_config: BertConfig | AlbertConfig) -> PretrainingHead:
    """The pretraining class and pair head of ``model_config``'s family.

    Taught in: 07_albert ("Sentence-order prediction").
    """
    return PRETRAINING_HEADS[model_config.family.model_type]


@dataclass
class DataConfig:
    """The text a run reads: a WordPiece vocabulary of ``vocab_size`` tokens learned from the training
    documents, pairs of at most ``seq_len`` positions, ``held_out_fraction`` of the documents held out
    and ``eval_pairs`` of their pairs evaluated.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    vocab_size: int = field(default=3000, metadata=Range(1).rule())
    seq_len: int = field(
        default=64, metadata=Range(NUM_SPECIAL_IN_PAIR + 2, why="[CLS], two [SEP] and a token per segment").rule()
    )
    held_out_fraction: float = field(default=0.1, metadata=Range(0, 1, open=True).rule())
    eval_pairs: int = field(default=512, metadata=Range(1).rule())

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class ObjectiveConfig:
    """What the model learns to predict: masked LM, selecting ``mlm_probability`` of the positions and
    replacing them by the ``masking`` rule (MASK/SAME/RND in percent, a :class:`MaskingStrategy` name),
    drawn anew each epoch (``dynamic_masking``) or fixed in ``static_copies`` copies; plus the
    sentence-pair task ``pairs`` (``"nsp"``, ``"sop"`` (sentence order), or ``None`` for masked LM only).

    Taught in: 04_bert_pretraining ("Pretraining a small BERT", "The masking ablation").
    """

    mlm_probability: float = field(default=0.15, metadata=Range(0, 1).rule())
    masking: str = "80/10/10"
    dynamic_masking: bool = True
    static_copies: int = field(default=1, metadata=Range(1).rule())
    pairs: str | None = field(default="nsp", metadata=OneOf(tuple(PAIR_TASKS)).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        try:
            MaskingStrategy.from_name(self.masking)  # the rule is the strategy's own: three percentages summing to 100
        except ValueError as error:
            raise FieldError(["masking"], str(error)) from None


# Pretraining's optimisation unless a recipe says otherwise (a :class:`~lecture_lib.train.TrainConfig`'s fields):
# ``steps`` AdamW steps of ``batch_size`` pairs, peak learning rate ``lr`` after ``warmup_steps``, then BERT's
# linear decay. A recipe's ``train`` dict changes these field by field: ``{"train": {"steps": 100}}`` is 100
# steps at 2e-3 with 30 of warm-up.
PRETRAIN_DEFAULTS = dict(steps=300, batch_size=32, lr=2e-3, warmup_steps=30, schedule="linear")


# The model's fields that the data decides: the tokenizer's vocabulary and the sequence length.
DERIVED_FROM_DATA = {
    ("model", "vocab_size"): ("data", "vocab_size"),
    ("model", "max_position_embeddings"): ("data", "seq_len"),
}


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on, by part: the ``model`` (a :class:`BertConfig` or an
    :class:`AlbertConfig`, whose
    ``vocab_size`` and ``max_position_embeddings`` must equal ``data``'s ``vocab_size`` and ``seq_len``),
    the ``data``, the ``objective``, the optimisation (``train``, a :class:`~lecture_lib.train.TrainConfig`
    with :data:`PRETRAIN_DEFAULTS`) and the ``seed`` of all of them.
    :meth:`from_dict` builds one from nested dicts and fills the model's two derived sizes.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """

    model: BertConfig | AlbertConfig
    data: DataConfig = field(default_factory=DataConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    train: TrainConfig = field(default_factory=partial(TrainConfig, **PRETRAIN_DEFAULTS))
    seed: int = field(default=0, metadata=Range(0).rule())

    def __post_init__(self) -> None:
        check_fields(self)
        for (part, name), (source, size) in DERIVED_FROM_DATA.items():
            ours, theirs = getattr(getattr(self, part), name), getattr(getattr(self, source), size)
            if ours != theirs:
                raise ValueError(
                    f"expected {part}.{name} = {source}.{size} = {theirs}, got {ours}: "
                    f"leave {part}.{name} out and set {source}.{size}"
                )

    @classmethod
    def from_dict(cls, *layers: dict[str, Any]) -> "PretrainConfig":
        """A config from nested dicts (``{"model": {...}, "train": {"steps": 100}, "seed": 1}``), later
        ``layers`` overriding earlier ones field by field; the model's derived sizes come from ``data``.
        The model's ``model_type`` (default ``"bert"``) names its family."""
        values = merge_dicts(*layers)
        data = build_part("data", DataConfig, values.get("data", {}))
        derived = {name: getattr(data, size) for (_, name), (_, size) in DERIVED_FROM_DATA.items()}
        model = values.get("model", {})
        if isinstance(model, dict):
            model = dict(model)
            model_type = model.pop("model_type", "bert")
            if model_type not in PRETRAINING_HEADS:
                raise ValueError(f"expected model.model_type in {sorted(PRETRAINING_HEADS)}, got {model_type!r}")
            config_class = PRETRAINING_HEADS[model_type].model_class.family.config_class
            model = build_part("model", config_class, {**derived, **model})
        return build_fields(cls, {**values, "model": model, "data": data})

    @classmethod
    def from_nested(cls, values: dict[str, Any]) -> "PretrainConfig":
        """:meth:`from_dict` of one dict: how :func:`~lecture_lib.config.build_dataclass` builds a recipe
        held in a bigger config (a chapter's ``pretrain=dict(train=dict(steps=100))``)."""
        return cls.from_dict(values)


def config_dict(config: PretrainConfig) -> dict[str, Any]:
    """``asdict(config)`` with the model's ``model_type``: what :meth:`PretrainConfig.from_dict` reads back."""
    return {**asdict(config), "model": {"model_type": config.model.family.model_type, **asdict(config.model)}}
