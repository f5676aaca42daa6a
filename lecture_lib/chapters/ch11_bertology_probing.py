"""Chapter 11, BERTology II: the chapter's sizes, its three encoders (the real MiniLM, chapter 05's BERT of the
synthetic language and a randomly initialised twin of MiniLM), the gold labels every probe reads from the
synthetic language, and the cached runs of the probes.

Taught in: 11_bertology_probing ("Three encoders and a treebank", "Probing classifiers, layer by layer",
"The structural probe", "Edge probing: spans and the order of the pipeline",
"Subject-verb agreement across attractors", "Negation: does the answer change?",
"Cloze knowledge of the world", "Word senses in context").
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from lecture_lib.analysis.cloze import cloze_scores, form_preference
from lecture_lib.analysis.edge_probing import EdgeProbe, SpanBatch
from lecture_lib.analysis.probes import (
    ProbeScore,
    control_labels,
    fit_full_batch,
    fit_probe,
    linear_probe,
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
from lecture_lib.cache import cached_json, fingerprint
from lecture_lib.chapters import course_language
from lecture_lib.config import build_config
from lecture_lib.data.synthetic import CITIES, ORGANISATIONS, OTHER_NUMBER, Agreement, Sentence, SyntheticLanguage
from lecture_lib.data.treebank import EDGE_TASKS, edge_examples
from lecture_lib.models.bert import BertModel
from lecture_lib.profile import pick
from lecture_lib.runtime import generator, seed_of

# what each probing classifier predicts, from which words (see :func:`word_labels`)
PROBING_TASKS = ("pos", "deprel", "entity", "negated")
SHOWN_TREES = 10  # predicted trees kept per layer, for drawing
SENSE_NEIGHBOURS = 5  # k of the k-nearest-neighbour sense accuracy
ANISOTROPY_WORDS = 200  # random words whose mean pairwise cosine is the anisotropy baseline


@dataclass
class ProbingChapterConfig:
    """The chapter's sizes: synthetic sentences to train and test the probes on, optimisation steps of the
    probes, the structural probe's rank and the ranks swept, and the sentences and facts of the cloze probes.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """

    train_sentences: int = 300
    test_sentences: int = 150
    probe_steps: int = 100  # full-batch Adam steps of each probing classifier
    structural_steps: int = 100  # ... and of each structural probe
    structural_rank: int = 64
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    edge_train_sentences: int = 150  # the first training sentences, the edge probes' training set
    edge_steps: int = 40  # full-batch Adam steps of each edge probe,
    edge_lr: float = 0.02  # ... their learning rate,
    edge_mix_lr: float = 0.2  # ... and that of the scalar mix's logits
    edge_projection: int = 16  # width of the edge probes' span projection
    agreement_sentences: int = 600
    cloze_facts: int = 150
    seed: int = 0


# ``quick``: 300 training and 150 test sentences (about 2,500 and 1,250 words), 100 steps per probe, ranks up
# to 128; the edge probes train on the first 150 training sentences for 40 steps each (35 of them on MiniLM,
# about 6 s of one CPU thread). ``full``: ten times the sentences, three times the steps, ranks up to 256,
# every fact of the world, edge probes on all 3,000 training sentences for 300 steps.
QUICK = dict()
FULL = dict(train_sentences=3000, test_sentences=1500, probe_steps=300, structural_steps=300,
            edge_train_sentences=3000, edge_steps=300,
            ranks=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            agreement_sentences=6000, cloze_facts=10_000)


def chapter_config(**overrides) -> ProbingChapterConfig:
    """The active profile's sizes (:data:`QUICK` or :data:`FULL`), with ``overrides``.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    return build_config(ProbingChapterConfig, pick(quick=QUICK, full=FULL), overrides)


def treebank(config: ProbingChapterConfig) -> tuple[list[Sentence], list[Sentence]]:
    """Training and test sentences of chapter 05's language, each drawn with a seed of its own.

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    return (course_language.synthetic_sentences(config.train_sentences, seed_of("ch11 train", config.seed)),
            course_language.synthetic_sentences(config.test_sentences, seed_of("ch11 test", config.seed)))


def random_twin(model: BertModel, seed: int) -> BertModel:
    """A BERT of the same shape as ``model`` with freshly initialised weights (the seed's own draw).

    Taught in: 11_bertology_probing ("Three encoders and a treebank").
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_of("ch11 random twin", seed))
        return BertModel(model.config).eval()


def word_labels(sentence: Sentence, task: str) -> list[tuple[int, str]]:
    """(word index, gold label) pairs a probing task reads from a sentence: ``pos`` every word's UPOS tag,
    ``deprel`` every word's dependency label, ``entity`` every word's BIO entity tag, ``negated`` whether
    the main clause is negated, read at the root word only.

    >>> s = SyntheticLanguage(0).sentences(1, seed=1)[0]
    >>> word_labels(s, "negated") == [(s.heads.index(0), str(s.negated))]
    True

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    if task == "negated":
        return [(sentence.heads.index(0), str(sentence.negated))]
    columns = {"pos": sentence.pos, "deprel": sentence.deprels, "entity": sentence.entities}
    if task not in columns:
        raise ValueError(f"unknown probing task {task!r}; expected one of {PROBING_TASKS}")
    return list(enumerate(columns[task]))


def task_data(vectors: Sequence[torch.Tensor], sentences: Sequence[Sentence],
              task: str) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """A task's examples: one (N, H) matrix per layer, the N gold labels, and the N words (lower-cased,
    for the control task).

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    rows, labels, words = [], [], []
    for v, sentence in zip(vectors, sentences, strict=True):
        for index, label in word_labels(sentence, task):
            rows.append(v[:, index])
            labels.append(label)
            words.append(sentence.words[index].lower())
    return list(torch.stack(rows, 1)), labels, words


def _probe_task(train: tuple, test: tuple, task: str, config: ProbingChapterConfig,
                model_name: str, rank: int | None = None) -> list[ProbeScore]:
    """Layer-wise task and control probes of one task; labels are numbered over train and test together."""
    (x_train, y_train, w_train), (x_test, y_test, w_test) = train, test
    names = sorted(set(y_train) | set(y_test))
    index = [names.index(y) for y in y_train + y_test]
    control = control_labels(w_train + w_test, index, generator("ch11 control", task, config.seed))
    n = len(y_train)
    labels = torch.tensor(index)
    control = torch.tensor(control)
    return probe_layers(x_train, x_test, (labels[:n], labels[n:]), (control[:n], control[n:]), len(names),
                        generator("ch11 probes", model_name, task, config.seed), rank=rank, steps=config.probe_steps,
                        description=f"{model_name}: {task}")


def probe_at_layer(vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
                   sentences: tuple[Sequence[Sentence], Sequence[Sentence]], task: str, layer: int,
                   config: ProbingChapterConfig, *, rank: int | None = None, steps: int | None = None,
                   model_name: str = "minilm") -> ProbeScore:
    """Exercises 1 and 2 of chapter 11: section 3's task and control probes on one layer, with a probe of
    rank ``rank`` (:func:`~lecture_lib.analysis.probes.linear_probe`'s W = A B, A of ``rank`` columns) or
    trained for ``steps`` instead of :attr:`~ProbingChapterConfig.probe_steps`. ``vectors`` are the
    treebank's (train, test) word vectors, ``sentences`` its (train, test) sentences.
    """
    train, test = (([x[layer]], y, w) for x, y, w in (task_data(v, split, task)
                                                      for v, split in zip(vectors, sentences)))
    return _probe_task(train, test, task, replace(config, probe_steps=steps or config.probe_steps),
                       model_name, rank)[0]


def unseen_type_control(vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
                        sentences: tuple[Sequence[Sentence], Sequence[Sentence]], task: str, layer: int,
                        config: ProbingChapterConfig, held_out: float = 1 / 3) -> dict[str, float]:
    """Exercise 3 of chapter 11: the control task made fair to a closed vocabulary. A share ``held_out`` of the
    word types is drawn at random and left out of the probes' training words; the task and control probes
    are scored on the test words of those unseen types only. Returns their accuracies, ``majority`` (the
    share of the most frequent control label on those words) and how many words each side holds.
    """
    (x_train, y_train, w_train), (x_test, y_test, w_test) = (task_data(v, split, task)
                                                             for v, split in zip(vectors, sentences))
    names = sorted(set(y_train) | set(y_test))
    labels = [names.index(y) for y in y_train + y_test]
    control = torch.tensor(control_labels(w_train + w_test, labels, generator("ch11 control", task, config.seed)))
    labels = torch.tensor(labels)
    types = sorted(set(w_train + w_test))
    order = torch.randperm(len(types), generator=generator("ch11 unseen types", task, config.seed)).tolist()
    unseen = {types[i] for i in order[:round(held_out * len(types))]}
    seen_rows = torch.tensor([w not in unseen for w in w_train])
    unseen_rows = torch.tensor([w in unseen for w in w_test])
    n = len(y_train)
    out = {}
    for name, y in (("task", labels), ("control", control)):
        probe = linear_probe(x_train[layer].shape[-1], len(names), generator=generator("ch11 unseen", name, task))
        probe = fit_probe(probe, x_train[layer][seen_rows], y[:n][seen_rows], config.probe_steps)
        out[name] = probe_accuracy(probe, x_test[layer][unseen_rows], y[n:][unseen_rows])
    out["majority"] = float(torch.bincount(control[n:][unseen_rows]).max()) / int(unseen_rows.sum())
    out.update(train_words=int(seen_rows.sum()), test_words=int(unseen_rows.sum()))
    return out


def layerwise_probing(model_name: str, model: nn.Module, tokenizer, config: ProbingChapterConfig,
                      tasks: Sequence[str] = PROBING_TASKS) -> dict[str, list[dict[str, float]]]:
    """For each task, per layer, the probe's test accuracy, its control task's and the selectivity; computed
    once per (model, recipe) and cached, keyed by the recipe, the model's weights and the tokenizer's vocabulary
    (:func:`~lecture_lib.cache.fingerprint`); ``model_name`` names the cache file and seeds the probes.

    Taught in: 11_bertology_probing ("Probing classifiers, layer by layer").
    """
    def run() -> dict:
        train, test = treebank(config)
        vectors = [word_vectors(model, tokenizer, [s.words for s in split]) for split in (train, test)]
        out = {}
        for task in tasks:
            data = [task_data(v, split, task) for v, split in zip(vectors, (train, test))]
            scores = _probe_task(data[0], data[1], task, config, model_name)
            out[task] = [dict(accuracy=s.accuracy, control=s.control, selectivity=s.selectivity) for s in scores]
        return out

    recipe = {"config": asdict(config), "tasks": list(tasks), "model": fingerprint(model),
              "tokenizer": fingerprint(tokenizer)}
    return cached_json(f"ch11-probing-{model_name}", recipe, run)


def _kept(sentence: Sentence) -> torch.Tensor:
    """The words every structural score counts: all but punctuation."""
    return torch.tensor([p != "PUNCT" for p in sentence.pos])


def structural_scores(train_vectors: Sequence[torch.Tensor], test_vectors: Sequence[torch.Tensor],
                      train: Sequence[Sentence], test: Sequence[Sentence], rank: int, steps: int,
                      seed: int, depth: bool = True) -> dict:
    """Fit a distance probe (and, with ``depth``, a depth probe) of rank ``rank`` on one layer's (W, H)
    vectors per sentence and score them on the test sentences: UUAS, DSpr, the first :data:`SHOWN_TREES` predicted trees
    (edges among the kept words), and root% and NSpr; punctuation is left out.

    Taught in: 11_bertology_probing ("The structural probe").
    """
    hidden = train_vectors[0].shape[-1]
    kept = [_kept(s) for s in test]
    distance = fit_structural_probe(StructuralProbe(hidden, rank, generator=generator("ch11 distance", seed)),
                                    train_vectors, [tree_distances(s.heads) for s in train], steps)
    with torch.no_grad():
        predicted = [distance(v[None])[0][k][:, k] for v, k in zip(test_vectors, kept)]
    trees = [minimum_spanning_tree(d) for d in predicted]
    scores = dict(uuas=uuas(trees, [gold_edges(s.heads, k.tolist()) for s, k in zip(test, kept)]),
                  dspr=length_averaged_spearman(predicted, [tree_distances(s.heads)[k][:, k]
                                                            for s, k in zip(test, kept)]),
                  trees=[sorted(t) for t in trees[:SHOWN_TREES]])
    if depth:
        probe = fit_structural_probe(StructuralProbe(hidden, rank, depth=True, generator=generator("ch11 depth", seed)),
                                     train_vectors, [tree_depths(s.heads) for s in train], steps)
        with torch.no_grad():
            depths = [probe(v[None])[0][k] for v, k in zip(test_vectors, kept)]
        roots = [int(d.argmin()) == int(k[:s.heads.index(0)].sum()) for d, s, k in zip(depths, test, kept)]
        scores.update(root=sum(roots) / len(roots),
                      nspr=length_averaged_spearman(depths, [tree_depths(s.heads)[k] for s, k in zip(test, kept)]))
    return scores


def structural_probing(model_name: str, model: nn.Module, tokenizer, config: ProbingChapterConfig,
                       rank_sweep: bool = False, depth: bool = True) -> dict:
    """The structural probe on every layer (``layers``: one dict of scores per layer, see
    :func:`structural_scores`; the depth probe too with ``depth``) and, with ``rank_sweep``, the distance
    probe over :attr:`~ProbingChapterConfig.ranks` at the layer of best UUAS (``ranks``: rank -> scores);
    cached per (model, recipe).

    Taught in: 11_bertology_probing ("The structural probe").
    """
    def run() -> dict:
        train, test = treebank(config)
        vectors = [word_vectors(model, tokenizer, [s.words for s in split]) for split in (train, test)]

        def at(layer: int, rank: int, with_depth: bool) -> dict:
            return structural_scores([v[layer] for v in vectors[0]], [v[layer] for v in vectors[1]], train, test,
                                     rank, config.structural_steps, seed_of(config.seed, layer, rank), with_depth)

        layers = len(vectors[0][0])
        out = dict(layers=[at(layer, config.structural_rank, depth)
                           for layer in tqdm(range(layers), desc=f"{model_name}: layers")])
        if rank_sweep:
            best = max(range(layers), key=lambda layer: out["layers"][layer]["uuas"])
            out.update(best_layer=best, ranks={str(rank): at(best, rank, False)
                                               for rank in tqdm(config.ranks, desc=f"{model_name}: ranks")})
        return out

    recipe = {"config": asdict(config), "sweep": rank_sweep, "depth": depth, "model": fingerprint(model),
              "tokenizer": fingerprint(tokenizer), "shown_trees": SHOWN_TREES}
    return cached_json(f"ch11-structural-{model_name}", recipe, run)


# ---------------------------------------------------------------- edge probing on spans


def span_batch(vectors: Sequence[torch.Tensor], sentences: Sequence[Sentence], task: str) -> tuple[SpanBatch, list[str]]:
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


def edge_scores(train: SpanBatch, test: SpanBatch, labels: tuple[torch.Tensor, torch.Tensor], num_classes: int,
                layers: range, config: ProbingChapterConfig, seed_keys: tuple) -> dict:
    """Fit one edge probe on the mix of ``layers``; its test accuracy and its mixing weights.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    probe = EdgeProbe(layers, train.words.shape[-1], train.spans.shape[1], num_classes, config.edge_projection,
                      generator=generator("ch11 edge", *seed_keys, config.seed))
    fit_full_batch(probe, train, labels[0], config.edge_steps, config.edge_lr,
                   parameters=probe.parameter_groups(config.edge_mix_lr))
    return dict(accuracy=probe_accuracy(probe, test, labels[1]), weights=probe.mix_weights().tolist(),
                gamma=probe.gamma.item())


def standardised_span_batches(vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
                              sentences: tuple[Sequence[Sentence], Sequence[Sentence]], task: str) -> tuple:
    """A task's training and test :func:`span_batch` es, word vectors standardised per layer with the training
    words' mean and standard deviation: ``(x_train, x_test, (train ids, test ids), (train labels, test
    labels), label names)``.

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    (x_train, y_train), (x_test, y_test) = (span_batch(v[:len(split)], split, task)
                                            for v, split in zip(vectors, sentences))
    mean, std = x_train.words.mean(1, keepdim=True), x_train.words.std(1, keepdim=True) + 1e-6
    x_train, x_test = (x._replace(words=(x.words - mean) / std) for x in (x_train, x_test))
    names = sorted(set(y_train) | set(y_test))
    ids = tuple(torch.tensor([names.index(y) for y in split]) for split in (y_train, y_test))
    return x_train, x_test, ids, (y_train, y_test), names


def single_layer_edge_scores(vectors: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]],
                             sentences: tuple[Sequence[Sentence], Sequence[Sentence]], config: ProbingChapterConfig,
                             task: str = "negation", model_name: str = "minilm") -> list[float]:
    """Exercise 5 of chapter 11: the edge probe of ``task`` on each layer alone (``range(layer, layer + 1)``),
    trained on the first :attr:`~ProbingChapterConfig.edge_train_sentences` training sentences as
    :func:`edge_probing` trains its mix; the test accuracy per layer, layer 0 (the embeddings) first.
    """
    train = sentences[0][:config.edge_train_sentences]
    x_train, x_test, ids, _, names = standardised_span_batches(vectors, (train, sentences[1]), task)
    return [edge_scores(x_train, x_test, ids, len(names), range(layer, layer + 1), config,
                        (model_name, task, "single", layer))["accuracy"] for layer in range(x_train.words.shape[0])]


def edge_probing(model_name: str, model: nn.Module, tokenizer, config: ProbingChapterConfig,
                 tasks: Sequence[str] = EDGE_TASKS, sweep: bool = True,
                 vectors: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None) -> dict:
    """Per task: the number of training and test examples, the majority label's share of the test examples,
    and the edge probe on the mix of all layers (``mix``: accuracy, mixing weights, gamma); with ``sweep``
    the accuracies of the cumulative probes ``P^(0)..P^(L)`` too (``cumulative``; the last is ``mix``).
    The probes train on the first :attr:`~ProbingChapterConfig.edge_train_sentences` of the treebank's
    training sentences; word vectors are standardised per layer with the training words' statistics.
    ``vectors`` are the treebank's word vectors when the caller has them already (else computed); cached
    per (model, recipe).

    Taught in: 11_bertology_probing ("Edge probing: spans and the order of the pipeline").
    """
    def run() -> dict:
        train, test = treebank(config)
        train = train[:config.edge_train_sentences]
        train_vectors, test_vectors = vectors or [word_vectors(model, tokenizer, [s.words for s in split])
                                                  for split in (train, test)]
        out = {}
        for task in tqdm(tasks, desc=f"{model_name}: edge probes"):
            x_train, x_test, labels, (y_train, y_test), names = standardised_span_batches(
                (train_vectors, test_vectors), (train, test), task)
            layers = x_train.words.shape[0]

            def at(top: int) -> dict:  # the probe P^(top), on the mix of layers 0..top
                return edge_scores(x_train, x_test, labels, len(names), range(top + 1), config,
                                   (model_name, task, top))

            row = dict(examples=[len(y_train), len(y_test)],
                       majority=max(map(y_test.count, set(y_test))) / len(y_test), mix=at(layers - 1))
            if sweep:
                row["cumulative"] = [at(top)["accuracy"] for top in range(layers - 1)] + [row["mix"]["accuracy"]]
            out[task] = row
        return out

    recipe = {"config": asdict(config), "tasks": list(tasks), "sweep": sweep, "model": fingerprint(model),
              "tokenizer": fingerprint(tokenizer)}
    return cached_json(f"ch11-edge-{model_name}", recipe, run)


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


def agreement_sentences(config: ProbingChapterConfig) -> list[Sentence]:
    """Sentences of chapter 05's language with at least one agreeing verb, drawn with a seed of their own
    (``agreement_sentences`` drawn, those without agreement dropped).

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    drawn = course_language.synthetic_sentences(config.agreement_sentences, seed_of("ch11 agreement", config.seed))
    return [s for s in drawn if s.agreement]


def agreement_preferences(model: nn.Module, tokenizer, sentences: Sequence[Sentence]) -> list[tuple[int, float]]:
    """For each sentence's main verb: (attractors, log p(right form) - log p(wrong form)) with the verb
    masked (Goldberg 2019).

    Taught in: 11_bertology_probing ("Subject-verb agreement across attractors").
    """
    out = []
    for s in tqdm(sentences, desc="agreement"):
        agreement = s.agreement[-1]
        verb = s.words[agreement.verb]
        out.append((attractors(s, agreement), form_preference(model, tokenizer, s.words, agreement.verb,
                                                               OTHER_NUMBER[verb])))
    return out


def candidates_for(relation: str) -> list[str]:
    """The objects a relation can take: the world's cities, or its organisations for ``works_for``.

    Taught in: 11_bertology_probing ("Cloze knowledge of the world").
    """
    return list(ORGANISATIONS if relation == "works_for" else CITIES)


def cloze_query(sentence: Sentence) -> tuple[str, str]:
    """A fact sentence with its object blanked: the text left and right of the object's name (its last
    occurrence: "Acme employs Anna Berg ." asks for the organisation at the start).

    Taught in: 11_bertology_probing ("Cloze knowledge of the world").
    """
    if sentence.fact is None:
        raise ValueError(f"expected a fact sentence, got {sentence.text!r}")
    name = sentence.fact.object.split(" ")
    n = len(name)
    start = next(i for i in range(len(sentence) - n, -1, -1) if sentence.words[i:i + n] == name)
    return " ".join(sentence.words[:start]), " ".join(sentence.words[start + n:])


def fact_probe(model: nn.Module, tokenizer, config: ProbingChapterConfig) -> list[dict]:
    """For facts of the world drawn at random: the affirmative and the negated sentence with the object
    blanked, and every candidate's score in each (:func:`~lecture_lib.analysis.cloze.cloze_scores`).

    Taught in: 11_bertology_probing ("Cloze knowledge of the world").
    """
    language = SyntheticLanguage(course_language.chapter_config().language_seed)
    rng = random.Random(seed_of("ch11 facts", config.seed))
    facts = language.world.facts()
    out = []
    for fact in tqdm(rng.sample(facts, min(config.cloze_facts, len(facts))), desc="facts"):
        candidates = candidates_for(fact.relation)
        row = dict(fact=asdict(fact), candidates=candidates)
        for negated in (False, True):
            left, right = cloze_query(language.fact_sentence(fact, rng, negated))
            row["negated" if negated else "affirmative"] = dict(
                query=f"{left} ___ {right}", scores=cloze_scores(model, tokenizer, left, right, candidates).tolist())
        out.append(row)
    return out


def world_objects(relation: str) -> list[str]:
    """Every object the world holds for ``relation`` (one per subject), for the frequency baseline.

    Taught in: 11_bertology_probing ("Cloze knowledge of the world").
    """
    world = SyntheticLanguage(course_language.chapter_config().language_seed).world
    return [f.object for f in world.facts() if f.relation == relation]



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
        measures[word] = SenseMeasures(knn_accuracy(vectors, labels, SENSE_NEIGHBOURS).tolist(),
                                       max(map(labels.count, set(labels))) / len(labels),
                                       similarity.tolist(), (similarity - baseline).tolist())
    return measures, baseline.tolist()
