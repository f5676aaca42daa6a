"""Chapter 11, BERTology II: the chapter's sizes, its three encoders (the real MiniLM, chapter 05's BERT of the
synthetic language and a randomly initialised twin of MiniLM), the gold labels every probe reads from the
synthetic language (among them tasks whose label the context decides), the control task on held-out word
types, linear against MLP probes, the knowledge text with controlled frequencies and the further pretraining
on it, and the cached runs of the probes.

Taught in: 11_bertology_probing ("Three encoders and a treebank", "Probing classifiers, layer by layer",
"The structural probe", "Edge probing: spans and the order of the pipeline",
"Subject-verb agreement across attractors", "Knowledge the model could learn", "Word senses in context").
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Sequence

import torch
from torch import nn

from lecture_lib.analysis.cloze import blank_scores, form_preferences, frequency_baseline
from lecture_lib.analysis.edge_probing import EdgeProbe, SpanBatch
from lecture_lib.analysis.probes import (
    ProbeScore,
    control_labels,
    fit_full_batch,
    probe_accuracy,
    probe_layers,
)
from lecture_lib.analysis.structural_probe import (
    StructuralProbe,
    fit_structural_probe,
    gold_edges,
    length_averaged_spearman,
    minimum_spanning_tree,
    tree_depths,
    tree_distances,
    uuas,
)
from lecture_lib.analysis.word_senses import (
    knn_accuracy,
    mean_pairwise_cosine,
    occurrence_vectors,
    random_word_vectors,
    sense_sentences,
)
from lecture_lib.analysis.word_vectors import word_vectors
from lecture_lib.cache import build_all, cached_call, compute_all, job
from lecture_lib.chapters import course_language
from lecture_lib.config import build_config
from lecture_lib.data.synthetic import (
    ANIMATE_NOUNS,
    CITIES,
    ORGANISATIONS,
    OTHER_NUMBER,
    Agreement,
    Fact,
    Sentence,
    SyntheticLanguage,
)
from lecture_lib.data.treebank import EDGE_TASKS, edge_examples
from lecture_lib.models.bert import BertModel
from lecture_lib.objectives.masking import replace_selected, select_positions
from lecture_lib.pretraining import PretrainResult
from lecture_lib.profile import claim_seeds, pick
from lecture_lib.reproductions import Demonstration, Gate, Rule, Seeds
from lecture_lib.runtime import generator, module_device, progress_bar, seed_of, to_device
from lecture_lib.tokenization.wordpiece import pad_ids

# what each probing classifier predicts, from which words (see :func:`word_labels`)
PROBING_TASKS = ("pos", "deprel", "role", "number")
CONTEXT_TASKS = ("role", "number")  # tasks whose label the word's type does not decide
ROLES = ("nsubj", "obj", "obl", "nmod")  # the grammatical roles of the ``role`` task
# the chapter's word tasks in the order of Tenney, Das and Pavlick's pipeline, declared before the run: part of
# speech, dependency labels, then the roles and agreement the context decides (tasks of one tier may tie)
PIPELINE_ORDER = (("pos",), ("deprel",), CONTEXT_TASKS)
# Hewitt and Liang's linear-against-MLP comparison (part of speech on ELMo's first layer), on the course's BERT:
# its 64 dimensions are fewer than the language's word types, as ELMo's are fewer than the treebank's
FAMILY_TASK = "pos"
FAMILY_LAYER = 1  # the first layer above the embeddings, as ELMo's layer 1
MLP_WIDTH = 256  # the MLP probe's hidden width
SHOWN_TREES = 10  # predicted trees kept per layer, for drawing
SENSE_NEIGHBOURS = 5  # k of the k-nearest-neighbour sense accuracy
ANISOTROPY_WORDS = 200  # random words whose mean pairwise cosine is the anisotropy baseline


@dataclass
class Chapter11Config:
    """The chapter's sizes: synthetic sentences to train and test the probes on, optimisation steps of the
    probes, the structural probe's rank and the ranks swept, and the sentences and facts of the cloze probes;
    ``seeds`` are the claims' seeds (:func:`~lecture_lib.profile.claim_seeds`), each a run of the probes (held-out
    word types, control labels, initialisations), of the further pretraining and of the data samples.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """

    train_sentences: int
    test_sentences: int
    probe_steps: int  # full-batch Adam steps of each probing classifier
    structural_steps: int  # ... and of each structural probe
    ranks: tuple[int, ...]  # the structural probe's ranks swept at the best layer
    edge_train_sentences: int  # the first training sentences, the edge probes' training set
    edge_steps: int  # full-batch Adam steps of each edge probe
    agreement_per_bucket: int  # sentences per number of attractors (0 to attractor_chain)
    knowledge_steps: int  # further-pretraining steps on the knowledge text
    structural_rank: int = 64
    edge_lr: float = 0.02  # the edge probes' learning rate,
    edge_mix_lr: float = 0.2  # ... and that of the scalar mix's logits
    edge_projection: int = 16  # width of the edge probes' span projection
    attractor_chain: int = 2  # prepositional phrases between the subject and its verb
    attractor_text_sentences: int = 3000  # sentences of the attractor text (see :func:`attractor_text`),
    attractor_steps: int = 1500  # ... further-pretraining steps on it: enough for its own subjects to agree,
    attractor_lr: float = 1e-3  # ... and their learning rate
    seed: int = 0  # of the treebank and the random twin
    knowledge_people: int = 8  # people per frequency bucket of the knowledge text
    knowledge_free: float = 0.25  # free sentences of the grammar per fact sentence in it
    knowledge_batch: int = 32  # sentences per further-pretraining step (both texts),
    knowledge_lr: float = 4e-3  # ... and its learning rate
    seeds: tuple[int, ...] = field(default_factory=claim_seeds)
    held_out: float = 1 / 3  # share of word types left out of the probes' training words and of the attractor text

    def __post_init__(self) -> None:
        counts = (
            "train_sentences",
            "test_sentences",
            "probe_steps",
            "structural_steps",
            "edge_train_sentences",
            "edge_steps",
            "agreement_per_bucket",
            "knowledge_steps",
            "structural_rank",
            "edge_projection",
            "attractor_chain",
            "attractor_text_sentences",
            "attractor_steps",
            "knowledge_people",
            "knowledge_batch",
        )
        for name in counts:
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name}: expected a whole number >= 1, got {getattr(self, name)!r}")
        if self.edge_train_sentences > self.train_sentences:
            raise ValueError(
                f"edge_train_sentences: expected at most train_sentences ({self.train_sentences}), "
                f"got {self.edge_train_sentences}"
            )
        if not self.ranks or min(self.ranks) < 1:
            raise ValueError(f"ranks: expected ranks >= 1, got {self.ranks!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected distinct seeds, at least one, got {self.seeds!r}")
        if not 0 < self.held_out < 1:
            raise ValueError(f"held_out: expected a share in (0, 1), got {self.held_out!r}")


QUICK = dict(
    train_sentences=300,
    test_sentences=150,
    probe_steps=100,
    structural_steps=100,
    ranks=(1, 2, 4, 8, 16, 32, 64, 128),
    edge_train_sentences=150,
    edge_steps=40,
    agreement_per_bucket=150,
    knowledge_steps=500,
)
FULL = dict(
    train_sentences=3000,
    test_sentences=1500,
    probe_steps=300,
    structural_steps=300,
    ranks=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    edge_train_sentences=3000,
    edge_steps=300,
    agreement_per_bucket=1000,
    knowledge_steps=1500,
)


def chapter_config(**overrides) -> Chapter11Config:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), with ``overrides``.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    return build_config(Chapter11Config, pick(quick=QUICK, full=FULL), overrides)


def treebank(config: Chapter11Config) -> tuple[list[Sentence], list[Sentence]]:
    """Training and test sentences of chapter 05's language, each drawn with a seed of its own.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    return (
        course_language.synthetic_sentences(config.train_sentences, seed_of("ch11 train", config.seed)),
        course_language.synthetic_sentences(config.test_sentences, seed_of("ch11 test", config.seed)),
    )


def random_twin(model: BertModel, seed: int) -> BertModel:
    """A BERT of the same shape as ``model`` with freshly initialised weights (the seed's own draw).

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_of("ch11 random twin", seed))
        return BertModel(model.config).eval()


def word_labels(sentence: Sentence, task: str, roles: Sequence[str] = ROLES) -> list[tuple[int, str]]:
    """(word index, gold label) pairs a probing task reads from a sentence: ``pos`` every word's UPOS tag,
    ``deprel`` every word's dependency label, ``entity`` every word's BIO entity tag, ``negated`` whether
    the main clause is negated, read at the root word only; and the two tasks whose label the word's type
    does not decide (:data:`CONTEXT_TASKS`): ``role``, the grammatical role (one of ``roles``: ``nsubj``, ``obj``,
    ``obl`` or ``nmod``) of every common noun and the first word of every name, and ``number``, the number of the noun
    that a number-neutral word belongs to (``the`` and adjectives: the noun they modify; a copula's
    adjective: its subject; a relative ``who`` or ``that`` and a relative clause's past-tense verb: the noun
    the clause modifies).

    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> word_labels(s, "number"), word_labels(s, "role")
    ([(1, 'Plur'), (3, 'Plur'), (9, 'Plur')], [(2, 'nsubj'), (7, 'obl')])

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if task == "negated":
        return [(sentence.heads.index(0), str(sentence.negated))]
    if task == "role":
        return [
            (i, label)
            for i, (pos, label) in enumerate(zip(sentence.pos, sentence.deprels))
            if pos in ("NOUN", "PROPN") and label in roles
        ]
    if task == "number":
        return [
            (i, sentence.number[_noun_of(sentence, i)]) for i in range(len(sentence)) if _number_neutral(sentence, i)
        ]
    columns = {"pos": sentence.pos, "deprel": sentence.deprels, "entity": sentence.entities}
    if task not in columns:
        raise ValueError(f"unknown probing task {task!r}; expected one of {PROBING_TASKS + ('entity', 'negated')}")
    return list(enumerate(columns[task]))


def _number_neutral(sentence: Sentence, word: int) -> bool:
    """Whether ``word``'s form is the same for both numbers while the noun phrase it belongs to has one:
    ``the``, an adjective (modifying a noun, or the predicate of a copula), a relative pronoun, or the
    past-tense verb of a relative clause."""
    pos, label, head = sentence.pos[word], sentence.deprels[word], sentence.heads[word] - 1
    return (
        (sentence.words[word] == "the" and label == "det")
        or (pos == "ADJ" and label in ("amod", "root"))
        or (pos == "PRON" and sentence.deprels[head] == "acl:relcl")
        or (label == "acl:relcl" and not sentence.number[word])
    )


def _noun_of(sentence: Sentence, word: int) -> int:
    """The noun a number-neutral word belongs to: a copula predicate's subject, a relative pronoun's
    antecedent (its clause's head), else the word's head."""
    if sentence.deprels[word] == "root":
        return next(
            i
            for i, (h, label) in enumerate(zip(sentence.heads, sentence.deprels))
            if h == word + 1 and label == "nsubj"
        )
    head = sentence.heads[word] - 1
    return sentence.heads[head] - 1 if sentence.pos[word] == "PRON" else head


def word_type_baseline(train: Sequence[Sentence], test: Sequence[Sentence], task: str) -> float:
    """How lexical a task is: the test accuracy of answering each word with its type's most frequent label in
    the training sentences (the training set's most frequent label for a type never seen).

    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> word_type_baseline([s], [s], "pos"), word_type_baseline([s], [s], "number")
    (1.0, 1.0)

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    overall: dict[str, int] = defaultdict(int)
    for sentence in train:
        for index, label in word_labels(sentence, task):
            counts[sentence.words[index].lower()][label] += 1
            overall[label] += 1
    fallback = max(overall, key=overall.get)
    answers = [
        (max(counts[w], key=counts[w].get) if (w := s.words[i].lower()) in counts else fallback) == label
        for s in test
        for i, label in word_labels(s, task)
    ]
    return sum(answers) / len(answers)


def task_data(
    vectors: Sequence[torch.Tensor], sentences: Sequence[Sentence], task: str, roles: Sequence[str] = ROLES
) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """A task's examples: one (N, H) matrix per layer, the N gold labels, and the N words (lower-cased,
    for the control task).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    rows, labels, words = [], [], []
    for v, sentence in zip(vectors, sentences, strict=True):
        for index, label in word_labels(sentence, task, roles):
            rows.append(v[:, index])
            labels.append(label)
            words.append(sentence.words[index].lower())
    return list(torch.stack(rows, 1)), labels, words


def _probe_task(
    train: tuple,
    test: tuple,
    task: str,
    config: Chapter11Config,
    model_name: str,
    rank: int | None = None,
    width: int | None = None,
    seed: int | None = None,
) -> list[ProbeScore]:
    """Layer-wise task and control probes of one task (MLPs of ``width`` with it), drawn with ``seed`` (default
    :attr:`~Chapter11Config.seed`); labels are numbered over train and test together."""
    seed = config.seed if seed is None else seed
    (x_train, y_train, w_train), (x_test, y_test, w_test) = train, test
    names = sorted(set(y_train) | set(y_test))
    index = [names.index(y) for y in y_train + y_test]
    control = control_labels(w_train + w_test, index, generator("ch11 control", task, seed))
    n = len(y_train)
    labels = torch.tensor(index)
    control = torch.tensor(control)
    return probe_layers(
        x_train,
        x_test,
        (labels[:n], labels[n:]),
        (control[:n], control[n:]),
        len(names),
        generator("ch11 probes", model_name, task, seed),
        rank=rank,
        steps=config.probe_steps,
        description=f"{model_name}: {task}",
        width=width,
    )


def probe_at_layer(
    vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
    sentences: tuple[Sequence[Sentence], Sequence[Sentence]],
    task: str,
    layer: int,
    config: Chapter11Config,
    *,
    rank: int | None = None,
    steps: int | None = None,
    width: int | None = None,
    seed: int | None = None,
    model_name: str = "minilm",
) -> ProbeScore:
    """Section 3's task and control probes on one layer, trained and scored on all words (every type seen in
    training): linear, of rank ``rank`` (:func:`~lecture_lib.analysis.probes.linear_probe`'s W = A B, A of
    ``rank`` columns), or an MLP of hidden ``width``; trained for ``steps`` instead of
    :attr:`~Chapter11Config.probe_steps`, drawn with ``seed``. ``vectors`` are the treebank's (train, test)
    word vectors, ``sentences`` its (train, test) sentences. Exercises 1 and 2 of chapter 11, and
    :func:`probe_families`.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    train, test = (
        ([x[layer]], y, w) for x, y, w in (task_data(v, split, task) for v, split in zip(vectors, sentences))
    )
    config = replace(config, probe_steps=steps or config.probe_steps)
    return _probe_task(train, test, task, config, model_name, rank, width, seed)[0]


@cached_call
def probe_families(model_name: str, model: nn.Module, tokenizer, config: Chapter11Config) -> dict:
    """Hewitt and Liang's comparison of probe families: on :data:`FAMILY_TASK` at :data:`FAMILY_LAYER` of
    ``model``, all words, the linear probe and the MLP probe of hidden width :data:`MLP_WIDTH`
    (:func:`probe_at_layer`), task and control, once per seed of :attr:`~Chapter11Config.seeds` (other control
    labels and initialisations, the same for both families); with the majority label's share of the test
    words (``majority``). Cached under the call (the model and tokenizer by their weights and vocabulary).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    sentences = treebank(config)
    vectors = tuple(word_vectors(model, tokenizer, [s.words for s in split]) for split in sentences)
    test_labels = [label for sentence in sentences[1] for _, label in word_labels(sentence, FAMILY_TASK)]
    out = dict(majority=max(map(test_labels.count, set(test_labels))) / len(test_labels))
    for family, width in (("linear", None), ("MLP", MLP_WIDTH)):
        out[family] = [
            vars(
                probe_at_layer(
                    vectors, sentences, FAMILY_TASK, FAMILY_LAYER, config, width=width, seed=seed, model_name=model_name
                )
            )
            for seed in config.seeds
        ]
    return out


def held_out_types(words: Sequence[str], seed: int, share: float = 1 / 3) -> set[str]:
    """A share ``share`` of the distinct ``words``, drawn at random with ``seed``: the types left out of a
    probe's training words (Hewitt and Liang's control task can then fail, see :func:`held_out_probes`).

    >>> sorted(held_out_types(["a", "b", "c", "a", "d", "e", "f"], seed=0))
    ['d', 'f']

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    types = sorted(set(words))
    order = torch.randperm(len(types), generator=generator("ch11 unseen types", seed)).tolist()
    return {types[i] for i in order[: round(share * len(types))]}


def held_out_probes(train: tuple, test: tuple, task: str, config: Chapter11Config, model_name: str, seed: int) -> dict:
    """Task and control probes on every layer, trained on the training words whose type is *not* in
    :func:`held_out_types` and scored on the test words whose type *is*: a probe that memorised words
    knows nothing there, so the control task falls to chance while the task keeps what the vectors hold
    beyond the word's identity. ``train`` and ``test`` are :func:`task_data`; ``seed`` draws the held-out
    types, the control labels and the probes' initialisations. Returns ``layers`` (accuracy, control,
    selectivity per layer), ``majority`` (the most frequent task label's share of the scored words) and
    the numbers of training and scored words.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    (x_train, y_train, w_train), (x_test, y_test, w_test) = train, test
    names = sorted(set(y_train) | set(y_test))
    index = [names.index(y) for y in y_train + y_test]
    control = torch.tensor(control_labels(w_train + w_test, index, generator("ch11 control", task, seed)))
    labels = torch.tensor(index)
    unseen = held_out_types(w_train + w_test, seed_of(task, seed), config.held_out)
    seen_rows = torch.tensor([w not in unseen for w in w_train])
    scored = torch.tensor([w in unseen for w in w_test])
    n = len(y_train)
    scores = probe_layers(
        [x[seen_rows] for x in x_train],
        [x[scored] for x in x_test],
        (labels[:n][seen_rows], labels[n:][scored]),
        (control[:n][seen_rows], control[n:][scored]),
        len(names),
        generator("ch11 probes", model_name, task, seed),
        steps=config.probe_steps,
        description=f"{model_name}: {task}, seed {seed}",
    )
    return dict(
        layers=[dict(accuracy=s.accuracy, control=s.control, selectivity=s.selectivity) for s in scores],
        majority=float(torch.bincount(labels[n:][scored]).max()) / int(scored.sum()),
        train_words=int(seen_rows.sum()),
        test_words=int(scored.sum()),
    )


@cached_call(ignore=("vectors",))
def layerwise_probing(
    model_name: str,
    model: nn.Module,
    tokenizer,
    config: Chapter11Config,
    tasks: Sequence[str] = PROBING_TASKS,
    vectors: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
) -> dict[str, list[dict]]:
    """For each task, one :func:`held_out_probes` per seed of :attr:`~Chapter11Config.seeds` (the
    treebank is the same; each seed holds out other word types and draws other control labels and probes);
    cached under the call (the model and the tokenizer by their weights and vocabulary, :data:`ROLES` read
    here); ``model_name`` seeds the probes. ``vectors`` are the treebank's word vectors when the caller has them
    already (else computed).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    train, test = treebank(config)
    splits = vectors or [word_vectors(model, tokenizer, [s.words for s in split]) for split in (train, test)]
    out = {}
    for task in tasks:
        data = [task_data(v, split, task, ROLES) for v, split in zip(splits, (train, test))]
        out[task] = [held_out_probes(data[0], data[1], task, config, model_name, seed) for seed in config.seeds]
    return out


def pairs_out_of_order(best_layers: dict[str, int], order: Sequence[Sequence[str]] = PIPELINE_ORDER) -> int:
    """How many pairs of tasks from different tiers of ``order`` (:data:`PIPELINE_ORDER`) break it: the later
    task's best layer is at or below the earlier one's. Tasks of one tier may tie.

    >>> pairs_out_of_order({"pos": 1, "deprel": 2, "role": 3, "number": 2})  # number ties with deprel
    1

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    tiers = [(rank, task) for rank, tier in enumerate(order) for task in tier]
    return sum(best_layers[b] <= best_layers[a] for i, a in tiers for j, b in tiers if j > i)


def _kept(sentence: Sentence) -> torch.Tensor:
    """The words every structural score counts: all but punctuation."""
    return torch.tensor([p != "PUNCT" for p in sentence.pos])


def structural_scores(
    train_vectors: Sequence[torch.Tensor],
    test_vectors: Sequence[torch.Tensor],
    train: Sequence[Sentence],
    test: Sequence[Sentence],
    rank: int,
    steps: int,
    seed: int,
    depth: bool = True,
    shown: int = SHOWN_TREES,
) -> dict:
    """Fit a distance probe (and, with ``depth``, a depth probe) of rank ``rank`` on one layer's (W, H)
    vectors per sentence and score them on the test sentences: UUAS, DSpr, the first ``shown`` predicted trees
    (edges among the kept words), and root% and NSpr; punctuation is left out.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    hidden = train_vectors[0].shape[-1]
    kept = [_kept(s) for s in test]
    distance = fit_structural_probe(
        StructuralProbe(hidden, rank, generator=generator("ch11 distance", seed)),
        train_vectors,
        [tree_distances(s.heads) for s in train],
        steps,
    )
    with torch.no_grad():
        predicted = [distance(v[None])[0][k][:, k] for v, k in zip(test_vectors, kept)]
    trees = [minimum_spanning_tree(d) for d in predicted]
    scores = dict(
        uuas=uuas(trees, [gold_edges(s.heads, k.tolist()) for s, k in zip(test, kept)]),
        dspr=length_averaged_spearman(predicted, [tree_distances(s.heads)[k][:, k] for s, k in zip(test, kept)]),
        trees=[sorted(t) for t in trees[:shown]],
    )
    if depth:
        probe = fit_structural_probe(
            StructuralProbe(hidden, rank, depth=True, generator=generator("ch11 depth", seed)),
            train_vectors,
            [tree_depths(s.heads) for s in train],
            steps,
        )
        with torch.no_grad():
            depths = [probe(v[None])[0][k] for v, k in zip(test_vectors, kept)]
        roots = [int(d.argmin()) == int(k[: s.heads.index(0)].sum()) for d, s, k in zip(depths, test, kept)]
        scores.update(
            root=sum(roots) / len(roots),
            nspr=length_averaged_spearman(depths, [tree_depths(s.heads)[k] for s, k in zip(test, kept)]),
        )
    return scores


@cached_call(ignore=("vectors",))
def structural_probing(
    model_name: str,
    model: nn.Module,
    tokenizer,
    config: Chapter11Config,
    rank_sweep: bool = False,
    depth: bool = True,
    vectors: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
    seed: int = 0,
) -> dict:
    """The structural probe on every layer (``layers``: one dict of scores per layer, see
    :func:`structural_scores`; the depth probe too with ``depth``) and, with ``rank_sweep``, the distance
    probe over :attr:`~Chapter11Config.ranks` at the layer of best UUAS (``ranks``: rank -> scores), each probe
    initialised from ``seed``; ``vectors`` are the treebank's word vectors when the caller has them already
    (else computed); cached under the call.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    train, test = treebank(config)
    splits = vectors or [word_vectors(model, tokenizer, [s.words for s in split]) for split in (train, test)]

    def at(layer: int, rank: int, with_depth: bool) -> dict:
        return structural_scores(
            [v[layer] for v in splits[0]],
            [v[layer] for v in splits[1]],
            train,
            test,
            rank,
            config.structural_steps,
            seed_of(seed, layer, rank),
            with_depth,
            SHOWN_TREES,
        )

    layers = len(splits[0][0])
    out = dict(
        layers=[
            at(layer, config.structural_rank, depth)
            for layer in progress_bar(range(layers), desc=f"{model_name}: layers")
        ]
    )
    if rank_sweep:
        best = max(range(layers), key=lambda layer: out["layers"][layer]["uuas"])
        out.update(
            best_layer=best,
            ranks={
                str(rank): at(best, rank, False) for rank in progress_bar(config.ranks, desc=f"{model_name}: ranks")
            },
        )
    return out


# ---------------------------------------------------------------- edge probing on spans


def span_batch(
    vectors: Sequence[torch.Tensor], sentences: Sequence[Sentence], task: str
) -> tuple[SpanBatch, list[str]]:
    """A task's examples over a split: the word vectors (L + 1, W, H) of the sentences that hold an example,
    stacked, and each example's spans shifted to rows of that stack; with the gold labels.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    spans, labels, words, offset = [], [], [], 0
    for v, sentence in zip(vectors, sentences, strict=True):
        examples = edge_examples(sentence, task)
        if examples:  # sentences without an example are left out of the stack
            spans += [[[offset + a, offset + b] for a, b in spans_of] for spans_of, _ in examples]
            labels += [label for _, label in examples]
            words.append(v)
            offset += len(sentence)
    return SpanBatch(torch.cat(words, 1), torch.tensor(spans)), labels


def edge_scores(
    train: SpanBatch,
    test: SpanBatch,
    labels: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    layers: range,
    config: Chapter11Config,
    seed_keys: tuple,
) -> dict:
    """Fit one edge probe on the mix of ``layers``, initialised from ``seed_keys``; its test accuracy and its
    mixing weights.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    probe = EdgeProbe(
        layers,
        train.words.shape[-1],
        train.spans.shape[1],
        num_classes,
        config.edge_projection,
        generator=generator("ch11 edge", *seed_keys),
    )
    fit_full_batch(
        probe,
        train,
        labels[0],
        config.edge_steps,
        config.edge_lr,
        parameters=probe.parameter_groups(config.edge_mix_lr),
    )
    return dict(
        accuracy=probe_accuracy(probe, test, labels[1]), weights=probe.mix_weights().tolist(), gamma=probe.gamma.item()
    )


def standardised_span_batches(
    vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
    sentences: tuple[Sequence[Sentence], Sequence[Sentence]],
    task: str,
) -> tuple:
    """A task's training and test :func:`span_batch` es, word vectors standardised per layer with the training
    words' mean and standard deviation: ``(x_train, x_test, (train ids, test ids), (train labels, test
    labels), label names)``.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    (x_train, y_train), (x_test, y_test) = (
        span_batch(v[: len(split)], split, task) for v, split in zip(vectors, sentences)
    )
    mean, std = x_train.words.mean(1, keepdim=True), x_train.words.std(1, keepdim=True) + 1e-6
    x_train, x_test = (x._replace(words=(x.words - mean) / std) for x in (x_train, x_test))
    names = sorted(set(y_train) | set(y_test))
    ids = tuple(torch.tensor([names.index(y) for y in split]) for split in (y_train, y_test))
    return x_train, x_test, ids, (y_train, y_test), names


@cached_call(ignore=("vectors",))
def edge_probing(
    model_name: str,
    model: nn.Module,
    tokenizer,
    config: Chapter11Config,
    tasks: Sequence[str] = EDGE_TASKS,
    sweep: bool = True,
    vectors: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
    seed: int = 0,
) -> dict:
    """Per task: the number of training and test examples, the majority label's share of the test examples,
    and the edge probe on the mix of all layers (``mix``: accuracy, mixing weights, gamma); with ``sweep``
    the accuracies of the cumulative probes ``P^(0)..P^(L)`` too (``cumulative``; the last is ``mix``) and of
    the probe on each single layer (``single``). Every probe is initialised from ``seed``.
    The probes train on the first :attr:`~Chapter11Config.edge_train_sentences` of the treebank's
    training sentences; word vectors are standardised per layer with the training words' statistics.
    ``vectors`` are the treebank's word vectors when the caller has them already (else computed); cached
    under the call.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    train, test = treebank(config)
    train = train[: config.edge_train_sentences]
    train_vectors, test_vectors = vectors or [
        word_vectors(model, tokenizer, [s.words for s in split]) for split in (train, test)
    ]
    out = {}
    for task in progress_bar(tasks, desc=f"{model_name}: edge probes"):
        x_train, x_test, labels, (y_train, y_test), names = standardised_span_batches(
            (train_vectors, test_vectors), (train, test), task
        )
        layers = x_train.words.shape[0]

        def at(top: int) -> dict:  # the probe P^(top), on the mix of layers 0..top
            return edge_scores(
                x_train, x_test, labels, len(names), range(top + 1), config, (model_name, task, top, seed)
            )

        row = dict(
            examples=[len(y_train), len(y_test)],
            majority=max(map(y_test.count, set(y_test))) / len(y_test),
            mix=at(layers - 1),
        )
        if sweep:
            row["cumulative"] = [at(top)["accuracy"] for top in range(layers - 1)] + [row["mix"]["accuracy"]]
            row["single"] = [
                edge_scores(
                    x_train,
                    x_test,
                    labels,
                    len(names),
                    range(layer, layer + 1),
                    config,
                    (model_name, task, "single", layer, seed),
                )["accuracy"]
                for layer in range(layers)
            ]
        out[task] = row
    return out


# ---------------------------------------------------------------- cloze probes of the course's BERT


def attractors(sentence: Sentence, agreement: Agreement) -> int:
    """Nouns (and names) between the subject and its verb whose number differs from the subject's, as in
    Linzen et al. (2016).

    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> attractors(s, s.agreement[-1])
    1

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    number = "Plur" if agreement.plural else "Sing"
    between = range(agreement.subject + 1, agreement.verb)
    return sum(sentence.pos[i] in ("NOUN", "PROPN") and sentence.number[i] not in ("", number) for i in between)


def agreement_sentences(
    config: Chapter11Config, seed: int, subjects: Sequence[tuple[str, str]] = ANIMATE_NOUNS
) -> list[Sentence]:
    """:attr:`~Chapter11Config.agreement_per_bucket` sentences for every number of attractors from 0 to
    :attr:`~Chapter11Config.attractor_chain` (:meth:`~lecture_lib.data.synthetic.SyntheticLanguage.attractor_sentence`:
    the same shape and length in every bucket), drawn with ``seed`` (one data sample per seed), their subjects
    drawn from ``subjects``. Only sentences whose verb is the copula are kept: as Goldberg kept verbs whose two
    forms are single pieces of BERT's vocabulary, "is" and "are" are one piece each, where "walks" is two
    ("walk ##s"), and a sum of pieces' log-probabilities would favour the one-piece form.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    language = SyntheticLanguage(course_language.chapter_config().language_seed)
    rng = random.Random(seed_of("ch11 agreement", seed))
    out = []
    for count in range(config.attractor_chain + 1):
        bucket = []
        while len(bucket) < config.agreement_per_bucket:
            sentence = language.attractor_sentence(rng, count, config.attractor_chain, subjects)
            if sentence.pos[sentence.agreement[-1].verb] == "AUX":
                bucket.append(sentence)
        out += bucket
    return out


def agreement_preferences(model: nn.Module, tokenizer, sentences: Sequence[Sentence]) -> list[tuple[int, float]]:
    """For each sentence's main verb: (attractors, log p(right form) - log p(wrong form)) with the verb
    masked (Goldberg 2019), the sentences batched (:func:`~lecture_lib.analysis.cloze.form_preferences`).

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    main = [s.agreement[-1] for s in sentences]  # each sentence's main subject-verb agreement
    items = [(s.words, a.verb, OTHER_NUMBER[s.words[a.verb]]) for s, a in zip(sentences, main)]
    preferences = form_preferences(model, tokenizer, items)
    return [(attractors(s, a), p) for s, a, p in zip(sentences, main, preferences)]


def nearest_noun_agrees(sentence: Sentence, agreement: Agreement) -> bool:
    """Whether the nearest-noun heuristic gets a verb's number right: the last noun or name before the verb has
    the subject's number. It is right without an attractor and wrong whenever the nearest noun is one.

    >>> s = SyntheticLanguage(0).sentences(72, seed=1)[71]  # "those kind nurses that walk to this church are kind ."
    >>> nearest_noun_agrees(s, s.agreement[-1])  # "church" is singular, "are" plural
    False

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    nearest = max(i for i in range(agreement.verb) if sentence.pos[i] in ("NOUN", "PROPN"))
    return sentence.number[nearest] == ("Plur" if agreement.plural else "Sing")


def held_out_subjects(config: Chapter11Config, seed: int) -> tuple[tuple[str, str], ...]:
    """The animate nouns (singular, plural) that the seed's :func:`attractor_text` never uses: a share
    :attr:`~Chapter11Config.held_out` of them, drawn with ``seed``. The agreement test's subjects come from them.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    rng = random.Random(seed_of("ch11 held-out subjects", seed))
    return tuple(rng.sample(ANIMATE_NOUNS, max(1, round(config.held_out * len(ANIMATE_NOUNS)))))


def attractor_text(config: Chapter11Config, seed: int) -> list[Sentence]:
    """A text where attractors are common: :attr:`~Chapter11Config.attractor_text_sentences` sentences of
    :meth:`~lecture_lib.data.synthetic.SyntheticLanguage.attractor_sentence`'s shape, each with a chain of 0 to
    :attr:`~Chapter11Config.attractor_chain` phrases and, among the chain's nouns, 0 to all attractors (both
    drawn uniformly with ``seed``). Its subjects are the animate nouns not in :func:`held_out_subjects`. With a
    chain of two, 7 in 18 sentences carry an attractor, and the nearest noun gives the verb's number in only 2
    of 3 (:func:`nearest_noun_agrees`).

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    language = SyntheticLanguage(course_language.chapter_config().language_seed)
    held_out = held_out_subjects(config, seed)
    subjects = [noun for noun in ANIMATE_NOUNS if noun not in held_out]
    rng = random.Random(seed_of("ch11 attractor text", seed))
    text = []
    for _ in range(config.attractor_text_sentences):
        chain = rng.randint(0, config.attractor_chain)
        text.append(language.attractor_sentence(rng, rng.randint(0, chain), chain, subjects))
    return text


def right_form_rates(model: nn.Module, tokenizer, sentences: Sequence[Sentence]) -> list[float]:
    """Per number of attractors (0, 1, ...): the share of ``sentences`` whose main verb's right form ``model``
    prefers (:func:`agreement_preferences`).

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    right = defaultdict(list)
    for count, preference in agreement_preferences(model, tokenizer, sentences):
        right[count].append(preference > 0)
    return [sum(right[count]) / len(right[count]) for count in sorted(right)]


def attractor_training(course: PretrainResult, config: Chapter11Config) -> list[dict]:
    """For every seed of :attr:`~Chapter11Config.seeds`, :func:`attractor_run`: the course's BERT further pretrained on
    that seed's :func:`attractor_text`, and its agreement before and after; the missing runs two at a time, one
    per core, each cached.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    return compute_all(
        attractor_run, further_pretraining_calls(course, config), desc="further pretraining on the attractor text"
    )


@cached_call
def attractor_run(model: nn.Module, tokenizer, config: Chapter11Config, seed: int) -> dict:
    """One seed of :func:`attractor_training`: ``model`` (with an MLM head) further pretrained on the seed's
    :func:`attractor_text` (:func:`further_pretrain`). Per number of attractors, the share of right forms on
    :func:`agreement_sentences` whose subjects are the seed's :func:`held_out_subjects`: before (``before``) and
    after (``after``), beside the nearest-noun heuristic's (``nearest``); and after, on sentences whose subjects
    the text used (``seen``).
    """
    held_out = held_out_subjects(config, seed)
    test = agreement_sentences(config, seed, held_out)
    seen = agreement_sentences(config, seed, [noun for noun in ANIMATE_NOUNS if noun not in held_out])
    text = attractor_text(config, seed)
    trained = further_pretrain(
        model,
        tokenizer,
        text,
        seed,
        steps=config.attractor_steps,
        batch=config.knowledge_batch,
        lr=config.attractor_lr,
        progress=False,  # the workers' bars would interleave; compute_all shows the runs'
    )
    nearest = defaultdict(list)
    for s in test:
        nearest[attractors(s, s.agreement[-1])].append(nearest_noun_agrees(s, s.agreement[-1]))
    return dict(
        held_out=[singular for singular, _ in held_out],
        before=right_form_rates(model, tokenizer, test),
        after=right_form_rates(trained, tokenizer, test),
        nearest=[sum(nearest[count]) / len(nearest[count]) for count in sorted(nearest)],
        seen=right_form_rates(trained, tokenizer, seen),
    )


def candidates_for(relation: str) -> list[str]:
    """The objects a relation can take: the world's cities, or its organisations for ``works_for``.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    return list(ORGANISATIONS if relation == "works_for" else CITIES)


# ---------------------------------------------------------------- knowledge the model could learn

# how often the knowledge text states each fact of a bucket's people (section "Knowledge the model could learn")
KNOWLEDGE_FREQUENCIES = {"frequent": 30, "medium": 6, "rare": 1, "never stated": 0}
# the cloze queries, LAMA-style templates with the object blanked: (relation, negated) -> text with ___
KNOWLEDGE_QUERIES = {
    ("lives_in", False): "{} lives in ___ .",
    ("lives_in", True): "{} does not live in ___ .",
    ("works_for", False): "{} works for ___ .",
    ("works_for", True): "{} does not work for ___ .",
}


def knowledge_text(
    config: Chapter11Config, seed: int, frequencies: dict[str, int] = KNOWLEDGE_FREQUENCIES
) -> tuple[dict[str, list[Fact]], list[Sentence]]:
    """A small world's facts with controlled frequencies, and a text that states them: for each bucket of
    ``frequencies`` (:data:`KNOWLEDGE_FREQUENCIES`), :attr:`~Chapter11Config.knowledge_people` people of the course's world
    (drawn with ``seed``) whose two facts (where they live, whom they work for) are each told that many
    times, in the language's varied affirmative wordings; free sentences of the grammar naming the same people
    are mixed in, :attr:`~Chapter11Config.knowledge_free` of them per fact sentence. Returns the facts per bucket and the shuffled sentences.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    language = SyntheticLanguage(course_language.chapter_config().language_seed)
    rng = random.Random(seed_of("ch11 knowledge", seed))
    people = rng.sample(language.world.people, config.knowledge_people * len(frequencies))
    facts = {
        bucket: [
            f
            for p in people[i * config.knowledge_people : (i + 1) * config.knowledge_people]
            for f in language.world.facts(p)
        ]
        for i, bucket in enumerate(frequencies)
    }
    text = [
        language.fact_sentence(fact, rng)
        for bucket, told in facts.items()
        for fact in told
        for _ in range(frequencies[bucket])
    ]
    text += [language.grammar_sentence(rng, people=people) for _ in range(round(config.knowledge_free * len(text)))]
    rng.shuffle(text)
    return facts, text


def name_pieces(tokenizer, sentence: Sentence) -> tuple[list[int], list[list[int]]]:
    """A sentence's piece ids framed with [CLS] and [SEP], and the positions of each name's pieces (from
    its BIO entity tags).

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    ids, names = [tokenizer.cls_token_id], []
    for word, tag in zip(sentence.words, sentence.entities):
        pieces = tokenizer.encode(word)
        if tag.startswith("B-"):
            names.append([])
        if tag != "O":
            names[-1] += range(len(ids), len(ids) + len(pieces))
        ids += pieces
    return ids + [tokenizer.sep_token_id], names


def further_pretrain(
    model: nn.Module,
    tokenizer,
    text: Sequence[Sentence],
    seed: int,
    *,
    steps: int,
    batch: int,
    lr: float,
    progress: bool = True,
) -> nn.Module:
    """A copy of ``model`` (a BERT with an MLM head) trained further on ``text`` with masked LM: ``steps``
    AdamW steps at learning rate ``lr`` on batches of ``batch`` sentences drawn at random with ``seed``. Each piece is
    selected with BERT's 15% and, as in ERNIE's entity masking (Sun et al. 2019), every name with a
    probability of a half, all its pieces together; the selected pieces are replaced 80/10/10.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    model = copy.deepcopy(model).train()
    framed = [name_pieces(tokenizer, sentence) for sentence in text]
    draw = generator("ch11 knowledge batches", seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in progress_bar(range(steps), desc=f"further pretraining, seed {seed}", disable=not progress):
        rows = [framed[i] for i in torch.randint(len(framed), (batch,), generator=draw).tolist()]
        ids = pad_ids([r[0] for r in rows], tokenizer.pad_token_id)
        attention = pad_ids([[1] * len(r[0]) for r in rows], 0)
        special = (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id) | (attention == 0)
        selected = select_positions(ids.shape, special_tokens_mask=special, generator=draw)
        chosen = torch.rand(sum(len(r[1]) for r in rows), generator=draw) < 0.5
        for row, (_, names) in enumerate(rows):
            for name, take in zip(names, chosen[: len(names)].tolist()):
                selected[row, name] |= take
            chosen = chosen[len(names) :]
        masked, labels = replace_selected(
            ids, selected, mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer.vocab), generator=draw
        )
        masked, attention, labels = to_device((masked, attention, labels), module_device(model))
        loss = model(masked, attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def knowledge_scores(
    model: nn.Module,
    tokenizer,
    facts: dict[str, list[Fact]],
    text: Sequence[Sentence],
    queries: dict[tuple[str, bool], str] = KNOWLEDGE_QUERIES,
) -> dict:
    """Per bucket of facts: LAMA's precision at 1 of the affirmative query (``queries``: :data:`KNOWLEDGE_QUERIES`), the
    frequency baseline's (each relation's object stated most often in ``text`` answers every query of it),
    the true object's P@1 in the negated query, and the share of facts whose top candidate the negation
    leaves ``unchanged`` (Ettinger 2020). Candidates are all the world's cities or organisations.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    stated = defaultdict(list)
    for sentence in text:
        if sentence.fact is not None:
            stated[sentence.fact.relation].append(sentence.fact.object)
    baseline = {relation: frequency_baseline(objects)[0] for relation, objects in stated.items()}
    out = {}
    for bucket, told in facts.items():
        top = {}
        for negated in (False, True):
            blanks = []
            for fact in told:
                left, right = queries[fact.relation, negated].format(fact.subject).split("___")
                blanks.append((left.strip(), right.strip(), candidates_for(fact.relation)))
            scores = blank_scores(model, tokenizer, blanks)
            top[negated] = [candidates[int(s.argmax())] for (_, _, candidates), s in zip(blanks, scores)]
        n = len(told)
        out[bucket] = dict(
            facts=n,
            p1=sum(t == f.object for t, f in zip(top[False], told)) / n,
            baseline=sum(baseline[f.relation] == f.object for f in told) / n,
            p1_negated=sum(t == f.object for t, f in zip(top[True], told)) / n,
            unchanged=sum(a == b for a, b in zip(top[False], top[True])) / n,
        )
    return out


def knowledge_probing(course: PretrainResult, config: Chapter11Config) -> list[dict]:
    """For every seed of :attr:`~Chapter11Config.seeds`, :func:`knowledge_run`: the course's BERT further pretrained
    on that seed's :func:`knowledge_text`, and its :func:`knowledge_scores` before (``before``) and after
    (``after``); the missing runs two at a time, one per core, each cached under the model's weights, the
    tokenizer's vocabulary, the config and the seed.

    Taught in: 11_bertology_probing ("Knowledge the model could learn").
    """
    return compute_all(
        knowledge_run, further_pretraining_calls(course, config), desc="further pretraining on the knowledge text"
    )


@cached_call
def knowledge_run(model: nn.Module, tokenizer, config: Chapter11Config, seed: int) -> dict:
    """One seed of :func:`knowledge_probing`, for a model with an MLM head and its tokenizer
    (:data:`KNOWLEDGE_FREQUENCIES` and :data:`KNOWLEDGE_QUERIES` read here, so in the cache name)."""
    facts, text = knowledge_text(config, seed, KNOWLEDGE_FREQUENCIES)
    trained = further_pretrain(
        model,
        tokenizer,
        text,
        seed,
        steps=config.knowledge_steps,
        batch=config.knowledge_batch,
        lr=config.knowledge_lr,
        progress=False,  # the workers' bars would interleave; compute_all shows the runs'
    )
    return dict(
        sentences=len(text),
        before=knowledge_scores(model, tokenizer, facts, text, KNOWLEDGE_QUERIES),
        after=knowledge_scores(trained, tokenizer, facts, text, KNOWLEDGE_QUERIES),
    )


@dataclass
class SenseMeasures:
    """One word's measures per layer (index 0 the embeddings): leave-one-out k-NN sense accuracy, the share of
    its most frequent sense (the majority baseline), self-similarity, and self-similarity minus the anisotropy
    baseline.

    Taught in: 11_bertology_probing ("Word senses in context").
    """

    knn: list[float]
    majority: float
    self_similarity: list[float]
    adjusted: list[float]


def sense_measures(model: nn.Module, tokenizer, seed: int) -> tuple[dict[str, SenseMeasures], list[float]]:
    """The measures of each word of :func:`sense_sentences`, and the anisotropy baseline per layer (the mean
    cosine of :data:`ANISOTROPY_WORDS` words drawn from all the sentences).

    Taught in: 11_bertology_probing ("Word senses in context").
    """
    occurrences, every_sentence = {}, []
    for word, senses in sense_sentences().items():
        sentences = [sentence for group in senses.values() for sentence in group]
        labels = [i for i, group in enumerate(senses.values()) for _ in group]
        vectors, sentence_vectors = occurrence_vectors(model, tokenizer, word, sentences)
        occurrences[word] = vectors, labels
        every_sentence += sentence_vectors
    drawn = random_word_vectors(every_sentence, ANISOTROPY_WORDS, generator("ch11 anisotropy", seed))
    baseline = mean_pairwise_cosine(drawn)
    measures = {}
    for word, (vectors, labels) in occurrences.items():
        similarity = mean_pairwise_cosine(vectors)
        measures[word] = SenseMeasures(
            knn_accuracy(vectors, labels, SENSE_NEIGHBOURS).tolist(),
            max(map(labels.count, set(labels))) / len(labels),
            similarity.tolist(),
            (similarity - baseline).tolist(),
        )
    return measures, baseline.tolist()


# ---------------------------------------------------------------- the chapter's runs, in one pool


def further_pretraining_calls(course: PretrainResult, config: Chapter11Config) -> list[tuple]:
    """The calls of :func:`attractor_run` and :func:`knowledge_run`: the course's BERT, once per seed of
    :attr:`~Chapter11Config.seeds`.

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    return [(course.model, course.tokenizer, config, seed) for seed in config.seeds]


def minilm_probe_jobs(minilm: BertModel, tokenizer, vectors: tuple, config: Chapter11Config) -> list[tuple]:
    """The cached probes of MiniLM and of its random twin that the chapter's sections read, each called as its
    section calls it, as jobs of :func:`~lecture_lib.cache.build_all`, the longest first. ``vectors``, MiniLM's word
    vectors of the treebank's training and test sentences, go with its jobs (the twin's are computed in its own);
    they are not part of a probe's name.

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    twin = random_twin(minilm, config.seed)
    mixed = (*SYNTACTIC_EDGE_TASKS, *SEMANTIC_EDGE_TASKS)
    return [
        *(
            job(structural_probing, "minilm", minilm, tokenizer, config, rank_sweep=True, vectors=vectors, seed=seed)
            for seed in config.seeds
        ),
        job(layerwise_probing, "random-minilm", twin, tokenizer, config),
        job(layerwise_probing, "minilm", minilm, tokenizer, config, vectors=vectors),
        job(edge_probing, "minilm", minilm, tokenizer, config, vectors=vectors),
        *(
            job(edge_probing, "minilm", minilm, tokenizer, config, mixed, sweep=False, vectors=vectors, seed=seed)
            for seed in config.seeds
        ),
        *(
            job(edge_probing, "random-minilm", twin, tokenizer, config, mixed, sweep=False, seed=seed)
            for seed in config.seeds
        ),
        job(edge_probing, "random-minilm", twin, tokenizer, config, ("negation", "coreference"), sweep=False),
    ]


def course_bert_jobs(course: PretrainResult, config: Chapter11Config) -> list[tuple]:
    """The cached runs of the chapter on the course's BERT, as jobs of :func:`~lecture_lib.cache.build_all`: the
    further pretraining of :func:`attractor_training` and :func:`knowledge_probing` first, then the probes.

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    model, tokenizer = course.model, course.tokenizer
    calls = further_pretraining_calls(course, config)
    return [
        *((attractor_run, call) for call in calls),
        *((knowledge_run, call) for call in calls),
        job(layerwise_probing, "course-bert", model, tokenizer, config),
        job(probe_families, "course-bert", model, tokenizer, config),
        job(structural_probing, "course-bert", model, tokenizer, config, depth=False),
    ]


def train_chapter_runs(
    minilm: BertModel, tokenizer, vectors: tuple, config: Chapter11Config, *, workers: int | None = None
) -> PretrainResult:
    """Every run of the chapter that trains something, ``workers`` at a time (:func:`~lecture_lib.cache.build_all`),
    so that no core waits while the other trains: first the course's BERT (chapter 05's) beside MiniLM's probes
    (:func:`minilm_probe_jobs`, with ``vectors``), then what needs that BERT (:func:`course_bert_jobs`). Each run is
    made once; the sections read them from the cache. Returns the course's BERT.

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    bert = course_language.chapter_config()
    first = [course_language.synthetic_pretraining_job(bert), *minilm_probe_jobs(minilm, tokenizer, vectors, config)]
    build_all(first, workers=workers, desc="the course's BERT and MiniLM's probes")
    course = course_language.synthetic_pretrained_bert(bert)
    build_all(
        course_bert_jobs(course, config), workers=workers, desc="further pretraining and the course BERT's probes"
    )
    return course


# ---------------------------------------------------------------- the claims, declared before the run

# Tenney, Das and Pavlick's pipeline, in the edge tasks the chapter probes (negation is not one of theirs)
SYNTACTIC_EDGE_TASKS = ("dependency", "constituent")
SEMANTIC_EDGE_TASKS = ("entity", "relation", "coreference")
_HELD_OUT = "the test words of held-out types, MiniLM"
ABOVE_MAJORITY = "{} at MiniLM's best layer (chance: the majority label's share)"
MIX_ACCURACY = "the mix's accuracy on {} (mean; no pretraining: the random twin's)"
FAMILY_ACCURACY = "the {} probe's task accuracy (chance: the majority label's share)"
CONTEXT_GATES = tuple(Gate(ABOVE_MAJORITY.format(task), "chance", 0.05) for task in CONTEXT_TASKS)
CLAIMS = (
    Rule(
        "11-context-tasks-peak-above-layer-0",
        "tasks that need the context are read best above layer 0",
        paper="lexical properties peak low, contextual ones in middle layers",
        source="Tenney et al. (2019); Liu et al. (2019), Figure 5",
        metric="probe accuracy",
        data=_HELD_OUT,
        compared="the best layer's gain over layer 0, the smaller of role and number",
        baseline=0.0,
        margin=0.1,
        seeds=Seeds("probe fit"),
        gates=CONTEXT_GATES,
    ),
    Demonstration(
        "11-selectivity-held-out-types",
        "with held-out word types the control task fails",
        paper="selectivity = task accuracy − control accuracy",
        source="Hewitt and Liang (2019)",
        shows="the control probe at the majority label's share on unseen types, by construction: a probe "
        "cannot know the random label of a word it never saw",
    ),
    Rule(
        "11-selectivity-from-pretraining",
        "the random twin reads the contextual tasks worse than the trained model",
        paper="random-encoder baselines below the trained encoders",
        source="Hewitt and Liang (2019); Tenney et al. (2019), Table 2",
        metric="probe accuracy at the best layer",
        data=_HELD_OUT,
        compared="MiniLM minus its random twin (no pretraining), the smaller of role and number",
        baseline=0.0,
        margin=0.05,
        seeds=Seeds("probe fit"),
        gates=CONTEXT_GATES,
    ),
    Rule(
        "11-linear-probes-more-selective",
        "a linear probe is more selective than an MLP probe",
        paper="MLP probes about as accurate as linear ones, and markedly less selective (linear: selectivity 26.0)",
        source="Hewitt and Liang (2019), part of speech on ELMo's layer 1",
        metric="selectivity (task minus control accuracy)",
        data=f"{FAMILY_TASK} on all test words (every type seen in training), the course's BERT layer {FAMILY_LAYER}",
        compared="the linear probe",
        baseline=f"the MLP probe (hidden width {MLP_WIDTH})",
        margin=0.1,  # "markedly": twice the 0.05 that the chapter's other probe claims take for noise
        seeds=Seeds("probe fit"),
        gates=tuple(Gate(FAMILY_ACCURACY.format(family), "chance", 0.05) for family in ("linear", "MLP")),
    ),
    Rule(
        "11-pipeline-order",
        "part of speech is read lowest, then dependencies, then roles and agreement (the pipeline's order)",
        paper="POS < constituents ≈ dependencies < entities < SRL < coreference",
        source="Tenney, Das and Pavlick (2019), Figure 1",
        metric="pairs of tasks out of the paper's order (a later task's best layer at or below an earlier one's)",
        data=f"{_HELD_OUT}, the order {' < '.join(' ≈ '.join(tier) for tier in PIPELINE_ORDER)}",
        compared="the pairs out of order",
        baseline=1.0,
        higher=False,
        seeds=Seeds("probe fit"),
        gates=tuple(Gate(ABOVE_MAJORITY.format(task), "chance", 0.05) for tier in PIPELINE_ORDER for task in tier),
    ),
    Rule(
        "11-trees-are-distances",
        "parse trees are distances in a projection of the vectors",
        paper="BERT-base layer 7: UUAS 79.8",
        source="Hewitt and Manning (2019), Table 1",
        metric="UUAS",
        data="the test sentences, MiniLM's best layer, probe of rank 64",
        compared="the structural probe",
        baseline="right-branching trees",
        margin=0.2,
        seeds=Seeds("probe fit"),
    ),
    Rule(
        "11-trees-are-low-rank",
        "a low-rank projection is enough",
        paper="UUAS flat from rank 64 on, 65.9 at rank 8",
        source="Hewitt and Manning (2019), Figure 2",
        metric="UUAS points lost",
        data="the test sentences, MiniLM's best layer",
        compared="the best rank's UUAS minus the best of ranks ≤ 16",
        baseline=0.02,
        higher=False,
        seeds=Seeds("probe fit"),
    ),
    Rule(
        "11-semantics-above-syntax",
        "the layers follow the classical pipeline: semantics above syntax",
        paper="POS < constituents ≈ dependencies < entities < SRL < coreference",
        source="Tenney, Das and Pavlick (2019), Figure 1",
        metric="centre of gravity of the scalar mix, in layers",
        data="edge probes on MiniLM's layers 0–6",
        compared=f"the mean of {', '.join(SEMANTIC_EDGE_TASKS)}",
        baseline=f"the mean of {', '.join(SYNTACTIC_EDGE_TASKS)}",
        seeds=Seeds("probe fit"),
        gates=tuple(
            Gate(MIX_ACCURACY.format(", ".join(tasks)), "no pretraining", 0.05)
            for tasks in (SEMANTIC_EDGE_TASKS, SYNTACTIC_EDGE_TASKS)
        ),
    ),
    Rule(
        "11-agreement-across-attractors",
        "a BERT agrees verbs with subjects across attractors",
        paper="well over 90% right with attractors",
        source="Goldberg (2019)",
        metric="share of sentences whose right verb form is preferred",
        data="sentences with one or two attractors, the course's BERT",
        compared="the course's BERT",
        baseline=0.9,
        seeds=Seeds("data sample"),
        gates=(Gate("the course's BERT without an attractor", "chance", 0.05),),
    ),
    # declared before its first run, after the course's BERT had read 56% and 43% above (issue 49, item 4)
    Rule(
        "11-agreement-learned-from-attractors",
        "a BERT whose text puts attractors between many subjects and their verbs agrees across them",
        paper="well over 90% right with attractors",
        source="Goldberg (2019); Linzen et al. (2016)",
        metric="share of sentences whose right verb form is preferred",
        data="sentences with one or two attractors, subjects held out of the attractor text",
        compared="the course's BERT further pretrained on the attractor text",
        baseline=0.9,
        seeds=Seeds("pretraining"),
        gates=(Gate("the further-pretrained BERT without an attractor", "chance", 0.3),),
    ),
    Rule(
        "11-knowledge-above-frequency",
        "a masked LM stores facts it read often",
        paper="BERT-large P@1 32.3 on T-REx, far above the frequency baseline",
        source="Petroni et al. (2019), Table 2",
        metric="P@1",
        data="facts stated 30 times in the knowledge text",
        compared="the course's BERT after further pretraining",
        baseline="the frequency baseline",
        margin=0.1,
        seeds=Seeds("pretraining"),
    ),
    Rule(
        "11-negation-changes-prediction",
        "negation leaves BERT's prediction unchanged",
        paper="BERT completes negated and affirmative probes alike",
        source="Ettinger (2020)",
        metric="share of facts whose top candidate the negation leaves unchanged",
        data="facts stated 30 times in the knowledge text",
        compared="the course's BERT after further pretraining",
        baseline=0.5,
        seeds=Seeds("pretraining"),
        gates=(Gate("P@1 of the affirmative queries", "most-frequent-token guess", 0.05),),
    ),
    Rule(
        "11-senses-cluster",
        "contextual vectors cluster by sense",
        paper="k-NN word sense disambiguation",
        source="Wiedemann et al. (2019)",
        metric="leave-one-out k-NN sense accuracy",
        data="20 occurrences of each of bank, play and restrain",
        compared="MiniLM's best layer, the smallest lead over layer 0, the majority sense and the random twin",
        baseline=0.0,
        margin=0.15,
        seeds=Seeds("data sample"),
    ),
    Rule(
        "11-deeper-is-more-context-specific",
        "deeper layers are more context-specific",
        paper="self-similarity minus the anisotropy baseline falls in upper layers",
        source="Ethayarajh (2019), Figure 2",
        metric="self-similarity minus the anisotropy baseline",
        data="20 occurrences of each of bank, play and restrain, MiniLM",
        compared="the smallest fall from layer 0 to the lowest layer above it",
        baseline=0.0,
        margin=0.1,
        seeds=Seeds("data sample"),
    ),
)
