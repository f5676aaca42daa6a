"""BERT as a feature extractor: freeze it, read some of its layers, and train a small tagger on top.

The BERT paper's feature-based experiment (Devlin et al. 2019, Table 7) fed the activations of one or
more layers of a frozen BERT-base, without fine-tuning, to a two-layer BiLSTM tagger for CoNLL-2003
NER, and compared six ways of choosing them (dev F1): embeddings only 91.0, second-to-last hidden
95.6, last hidden 94.9, weighted sum of the last four 95.9, concatenation of the last four 96.1,
weighted sum of all twelve layers 95.5; fine-tuning BERT-base gave 96.4.

A weighted sum is ELMo's scalar mix (Peters et al. 2018): with layers h_0 (embeddings) ... h_L,

    mix = γ Σ_j softmax(s)_j h_j,

with the scalars s_j and the scale γ learned with the tagger.

A BiLSTM reads the whole sentence, so it can build from the embeddings alone much of the context the
deeper layers hold; a linear tagger (``lstm_size=None``) cannot, and shows what each layer holds itself.

Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.finetuning.finetune import FinetuneResult, Task, finetune, new_head, score
from lecture_lib.finetuning.tasks import EncodedTask
from lecture_lib.inference import forward_in_batches
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.models.heads import TokenClassifierOutput
from lecture_lib.runtime import seed_everything
from lecture_lib.train import TrainConfig

FEATURE_CHOICES = (
    "embeddings",
    "second_to_last",
    "last",
    "weighted_sum_last_four",
    "concat_last_four",
    "weighted_sum_all",
)


def selected_layers(choice: str, num_hidden_layers: int) -> list[int]:
    """Indices into (embeddings, layer 1, ..., layer L) that a choice reads.

    >>> selected_layers("concat_last_four", 6), selected_layers("weighted_sum_all", 6)
    ([3, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6])

    "All" includes the embedding layer, as ELMo's mix does (the paper's "all 12 layers" of BERT-base
    may not have): with the four layers of the quick profile, the Transformer layers alone would be
    the same as "the last four".

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    if choice not in FEATURE_CHOICES:
        raise ValueError(f"unknown feature choice {choice!r}; expected one of {FEATURE_CHOICES}")
    last = num_hidden_layers
    if choice.endswith("last_four") and last < 4:
        raise ValueError(f"{choice!r} needs at least 4 layers, the encoder has {last}")
    return {
        "embeddings": [0],
        "second_to_last": [last - 1],
        "last": [last],
        "weighted_sum_last_four": list(range(last - 3, last + 1)),
        "concat_last_four": list(range(last - 3, last + 1)),
        "weighted_sum_all": list(range(0, last + 1)),
    }[choice]


def extract_features(encoder: BertModel, encoded: EncodedTask, batch_size: int = 128) -> EncodedTask:
    """``encoded`` plus ``features`` (N, T, L + 1, H): every layer's hidden states of the frozen encoder.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    inputs = {k: encoded.features[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    out = forward_in_batches(encoder, inputs, ("hidden_states",), batch_size=batch_size, output_hidden_states=True)
    features = torch.stack(out["hidden_states"], dim=2)  # (N, T, L + 1, H)
    return EncodedTask({**encoded.features, "features": features}, encoded.word_ids)


def with_features(task: Task, encoder: BertModel) -> Task:
    """``task`` with the frozen ``encoder``'s hidden states (:func:`extract_features`) in its train and test sets.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    return dataclasses.replace(
        task, train=extract_features(encoder, task.train), test=extract_features(encoder, task.test)
    )


class ScalarMix(nn.Module):
    """γ Σ_j softmax(s)_j h_j over the layer axis (Peters et al. 2018); starts as the plain mean.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """

    def __init__(self, num_layers: int) -> None:
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        weights = self.scalars.softmax(0)  # (L,)
        return self.gamma * torch.einsum("btlh,l->bth", layers, weights)  # (B, T, H)


class FeatureTagger(nn.Module):
    """Chosen layers of a frozen BERT -> one vector per token -> BiLSTM -> linear tag scores.

    The paper's tagger had two 768-unit BiLSTM layers; ``lstm_size`` scales it to our encoder. With
    ``lstm_size=None`` there is no BiLSTM: a linear layer scores each token from its own features alone,
    so whatever context the tag needs must already be in the chosen layers. A ``projection`` (a fixed
    matrix, e.g. :func:`principal_directions`) maps the chosen features to fewer numbers first, so that
    the concatenation of four layers can be read through as many inputs as one layer.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """

    def __init__(
        self,
        choice: str,
        num_hidden_layers: int,
        hidden_size: int,
        num_labels: int,
        lstm_size: int | None = 64,
        projection: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.choice = choice
        self.layers = selected_layers(choice, num_hidden_layers)
        self.mix = ScalarMix(len(self.layers)) if choice.startswith("weighted_sum") else None
        width = hidden_size * (len(self.layers) if choice == "concat_last_four" else 1)
        if projection is not None and projection.shape[0] != width:
            raise ValueError(
                f"expected a projection with {width} rows (the {choice!r} features), got {tuple(projection.shape)}"
            )
        self.register_buffer("projection", projection)  # fixed, not trained: (width, k) or None
        width = width if projection is None else projection.shape[1]
        self.lstm = None if lstm_size is None else nn.LSTM(width, lstm_size, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(width if lstm_size is None else 2 * lstm_size, num_labels)

    def forward(
        self,
        features: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
        **unused: torch.Tensor,
    ) -> TokenClassifierOutput:
        """``features`` (B, T, L + 1, H) from :func:`extract_features`; the other tensors (B, T)."""
        layers = features[:, :, self.layers]  # (B, T, k, H)
        if self.mix is not None:
            x = self.mix(layers)  # (B, T, H)
        else:
            x = layers.flatten(2)  # (B, T, k H): one layer, or the concatenation
        if self.projection is not None:
            x = x @ self.projection  # (B, T, k)
        logits = self.classifier(x if self.lstm is None else self._contextualise(x, attention_mask))  # (B, T, K)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return TokenClassifierOutput(logits, loss)

    def _contextualise(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The BiLSTM's states (B, T, 2 lstm_size) over the real tokens of each row."""
        lengths = attention_mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        states, _ = self.lstm(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=x.shape[1])
        return states


def frozen_and_fine_tuned(
    task: Task,
    encoder: BertModel | BertConfig,
    tagger_config: TrainConfig,
    finetune_config: TrainConfig,
    tagger_seed: int = 0,
    finetune_seed: int = 0,
    *,
    dropout: float = 0.0,
) -> dict[str, float]:
    """Span F1 of a tagging ``task`` two ways, SciBERT's "frozen" and "fine-tuned" columns (Beltagy et al.
    2019, Table 1): ``"frozen"``, a linear :class:`FeatureTagger` on the encoder's last layer, its features
    extracted once and the encoder left untouched, trained with ``tagger_config``; ``"fine-tuned"``, the task's
    head on a copy of the encoder, all of it trained with ``finetune_config`` (:func:`~lecture_lib.finetuning.
    finetune.finetune`) with ``finetune_seed`` and the head's ``dropout``. Given a
    :class:`~lecture_lib.models.bert.BertConfig`, the encoder is a never-pretrained one of that shape, its random
    weights drawn with ``finetune_seed``; the tagger's initial weights and its batches are drawn with ``tagger_seed``.

    Taught in: 05_bert_finetuning ("Domain-adaptive pretraining").
    """
    if isinstance(encoder, BertConfig):  # never pretrained: random weights of that shape
        encoder = new_head(task, encoder, seed=finetune_seed, dropout=dropout).base_model
    features = with_features(task, encoder)
    seed_everything(tagger_seed)
    tagger = FeatureTagger(
        "last", encoder.config.num_hidden_layers, encoder.config.hidden_size, task.num_labels, lstm_size=None
    )
    return {
        "frozen": finetune(features, tagger, tagger_config, tagger_seed).scores["f1"],
        "fine-tuned": finetune(
            task, new_head(task, encoder, seed=finetune_seed, dropout=dropout), finetune_config, finetune_seed
        ).scores["f1"],
    }


def principal_directions(features: EncodedTask, choice: str, num_hidden_layers: int, k: int) -> torch.Tensor:
    """The ``k`` principal directions (width, k) of the ``choice`` features (one layer or the concatenation)
    of the real tokens of ``features`` (from :func:`extract_features`): the columns of V in the SVD of the
    centred (tokens, width) matrix, largest singular value first. Computed without labels, so a tagger
    that reads its features through them gets no help from the task.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    chosen = features.features["features"][:, :, selected_layers(choice, num_hidden_layers)].flatten(2)  # (N, T, w)
    tokens = chosen[features.features["attention_mask"].bool()]  # (tokens, width)
    if not 1 <= k <= tokens.shape[1]:
        raise ValueError(f"expected 1 <= k <= {tokens.shape[1]} (the features' width), got {k}")
    _, _, vh = torch.linalg.svd(tokens - tokens.mean(0), full_matrices=False)
    return vh[:k].T.contiguous()


@dataclass
class TunedRuns:
    """A recipe's learning rate chosen on development data, and its runs on every seed at that rate.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """

    lr: float
    dev_scores: dict[float, float]  # learning rate -> the development score of the first seed's run
    test_scores: list[float]  # one per seed, at ``lr``
    results: list[FinetuneResult]  # one per seed, at ``lr``, with its test scores


def tuned_runs(
    run: Callable[..., FinetuneResult],
    task: Task,
    dev: Task,
    budget: TrainConfig,
    lrs: Sequence[float],
    seeds: Sequence[int],
    metric: str,
    args: tuple = (),
    map_jobs: Callable[[Callable, list[tuple]], list] | None = None,
) -> TunedRuns:
    """Choose a recipe's learning rate on ``dev``, then run it on every seed: ``run(dev, *args, config, seed)`` (``dev``
    a :class:`Task` whose test set is the development set; e.g. ``run=finetune_from, args=(encoder,)``) with ``budget``'s steps and batch at each of ``lrs``
    on the first seed; the learning rate with the best development ``metric`` (the first of a tie) wins;
    its first-seed model is scored on ``task``'s test set, and the other seeds run at that rate and are
    scored there too. ``map_jobs(fn, jobs)`` runs the jobs (default: a loop; or
    :func:`~lecture_lib.runtime.parallel_map` for a module function ``run``). Every run spends the same
    steps and batch, whatever its rate, so two recipes tuned this way get the same budget.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    if not lrs or not seeds:
        raise ValueError(f"expected learning rates and seeds, got {list(lrs)} and {list(seeds)}")
    map_jobs = map_jobs or (lambda fn, jobs: [fn(*job) for job in jobs])
    first, *others = seeds
    sweep = map_jobs(run, [(dev, *args, dataclasses.replace(budget, lr=lr), first) for lr in lrs])
    dev_scores = {lr: result.scores[metric] for lr, result in zip(lrs, sweep)}
    lr = max(lrs, key=lambda rate: (dev_scores[rate], -lrs.index(rate)))
    best = sweep[lrs.index(lr)]
    best = dataclasses.replace(best, scores=score(task, best.model))  # its scores on the test set, as the others'
    rest = map_jobs(run, [(task, *args, dataclasses.replace(budget, lr=lr), seed) for seed in others])
    results = [best, *rest]
    return TunedRuns(lr, dev_scores, [result.scores[metric] for result in results], results)


def feature_tagger_run(task: Task, tagger: dict, config: TrainConfig, seed: int = 0) -> FinetuneResult:
    """Train a fresh :class:`FeatureTagger` on ``task``'s extracted features with ``config`` (its initial weights
    and its batches drawn with ``seed``); ``tagger`` holds its keyword arguments other than the sizes (``choice``, and
    ``lstm_size``, default ``None``: linear, or ``projection``): a ``run`` for :func:`tuned_runs`,
    ``args=(tagger,)``.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    seed_everything(seed)
    layers, width = task.train.features["features"].shape[2:]
    model = FeatureTagger(
        num_hidden_layers=layers - 1, hidden_size=width, num_labels=task.num_labels, **{"lstm_size": None, **tagger}
    )
    return finetune(task, model, config, seed)


def tuned_feature_taggers(
    taggers: Sequence[dict],
    task: Task,
    dev: Task,
    budget: TrainConfig,
    lrs: Sequence[float],
    seeds: Sequence[int],
    metric: str = "f1",
) -> list[TunedRuns]:
    """:func:`tuned_runs` of :func:`feature_tagger_run` for each of ``taggers`` in turn, on ``task`` and ``dev``
    with extracted features (:func:`with_features`): one job of :func:`~lecture_lib.runtime.parallel_map`
    that is sent the features once and trains several taggers on them.

    Taught in: 05_bert_finetuning ("Feature-based or fine-tuned").
    """
    return [tuned_runs(feature_tagger_run, task, dev, budget, lrs, seeds, metric, args=(tagger,)) for tagger in taggers]
