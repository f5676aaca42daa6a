"""Pretraining a BERT from scratch, by concern: the recipe as a nested config (:mod:`.config`), the data
stream (:mod:`.data`), the losses (:mod:`.losses`), the evaluation (:mod:`.evaluation`), the run with its
save, load and cache (:mod:`.run`), and a command line that walks the config (:mod:`.command_line`). Every
public name of these modules is importable from ``lecture_lib.pretraining``.

A run is three things: a batch stream from the objective (:class:`PretrainingData`: pairs cut from
documents, masked as :class:`ObjectiveConfig` says), a model (:class:`BertForPreTraining` of
``config.model``, or the pretraining class of its family: :class:`AlbertForPreTraining` for an
:class:`AlbertConfig`) and a :class:`~lecture_lib.train.TrainConfig` (``config.train``). The recipe
at small scale is BERT's: a WordPiece vocabulary learned from the training documents (chapter 03),
next-sentence pairs cut from those documents, masked LM with 15% selection and the 80/10/10 rule, AdamW
with warm-up and linear decay. Held-out documents (whole documents, never trained on) give the MLM and
NSP accuracies.

Command line (a chapter's :func:`main` with its sizes; resumes from ``OUT/checkpoint`` when rerun; several
GPUs through ``torchrun``)::

    python -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small --profile full
    torchrun --nproc_per_node 8 -m lecture_lib.chapters.ch04_bert_pretraining --out runs/bert-small \\
        --profile full --train.compile true --train.steps 100000

``OUT`` then holds ``config.json``, ``model.safetensors`` and ``vocab.txt`` in Hugging Face's layout
(``BertForPreTraining.from_pretrained(OUT)`` here, or ``transformers``' own ``from_pretrained``),
plus ``history.json`` and ``pretrain_config.json``.

Taught in: 04_bert_pretraining ("Pretraining a small BERT", "A training loop for real runs"),
07_albert ("Sentence-order prediction").
"""

from lecture_lib.pretraining.command_line import (
    check_output_folder,
    config_from_flags,
    config_leaves,
    flag_parser,
    leaf_rule,
    main,
    parse_command_line,
)
from lecture_lib.pretraining.config import (
    DERIVED_FROM_DATA,
    PAIR_TASKS,
    PRETRAIN_DEFAULTS,
    PRETRAINING_HEADS,
    DataConfig,
    ObjectiveConfig,
    PretrainConfig,
    PretrainingHead,
    config_dict,
    pretraining_head,
)
from lecture_lib.pretraining.data import PretrainingData, tokenize_documents
from lecture_lib.pretraining.evaluation import (
    eval_outputs,
    evaluate,
    evaluate_at_masks,
    evaluate_left_to_right,
    masked_lm_counts,
)
from lecture_lib.pretraining.losses import (
    causal_prediction_logits,
    left_to_right_logits,
    left_to_right_loss,
    pretraining_loss,
    unmasked_text,
)
from lecture_lib.pretraining.run import (
    RESULT_FILES,
    PretrainResult,
    cached_pretraining,
    load_result,
    pretrain,
    save_result,
    write_recipe,
)

__all__ = [
    "DERIVED_FROM_DATA",
    "PAIR_TASKS",
    "PRETRAIN_DEFAULTS",
    "PRETRAINING_HEADS",
    "RESULT_FILES",
    "DataConfig",
    "ObjectiveConfig",
    "PretrainConfig",
    "PretrainResult",
    "PretrainingData",
    "PretrainingHead",
    "cached_pretraining",
    "causal_prediction_logits",
    "check_output_folder",
    "config_dict",
    "config_from_flags",
    "config_leaves",
    "eval_outputs",
    "evaluate",
    "evaluate_at_masks",
    "evaluate_left_to_right",
    "flag_parser",
    "leaf_rule",
    "left_to_right_logits",
    "left_to_right_loss",
    "load_result",
    "main",
    "masked_lm_counts",
    "parse_command_line",
    "pretrain",
    "pretraining_head",
    "pretraining_loss",
    "save_result",
    "tokenize_documents",
    "unmasked_text",
    "write_recipe",
]
