"""The scores of the four fine-tuning tasks, defined as their benchmarks define them.

- accuracy, and Matthews' correlation coefficient (what GLUE reports for CoLA);
- span-level precision, recall and F1 of BIO tags, counted exactly as CoNLL's ``conlleval`` counts them
  (a chunk is right only if its type, start and end are all right);
- SQuAD's exact match and F1 over normalised answer strings (lower-cased, punctuation and the
  articles a/an/the removed, whitespace collapsed), the best over the reference answers; an
  unanswerable question (SQuAD 2.0) has the empty string as its answer, and its official script
  scores 1 when the prediction is empty too and 0 when only one of the two is;
- Pearson's and Spearman's correlation between predicted and true scores (what GLUE reports for STS-B).

And one score of pretraining: masked-LM accuracy at the positions that show ``[MASK]``, the only positions
where the answer is not in the input (chapter 04).

Scores are fractions in [0, 1]; the papers print them times 100.

Translation is scored by BLEU (Papineni et al., 2002) as ``sacrebleu`` computes it (Post, 2018), which
reports it on a 0-100 scale, as the papers do.

Taught in: 05_bert_finetuning ("Scoring the tasks"), 04_bert_pretraining ("Pretraining a small BERT"),
02_transformer ("A task with structure: translation").
"""

from __future__ import annotations

import math
import re
import statistics
import string
from collections import Counter
from typing import Sequence

import sacrebleu
import torch


def _as_list(values: Sequence | torch.Tensor) -> list:
    return values.tolist() if isinstance(values, torch.Tensor) else list(values)


def _check_pair(predictions: list, labels: list) -> None:
    if len(predictions) != len(labels):
        raise ValueError(f"expected as many predictions as labels, got {len(predictions)} and {len(labels)}")
    if not labels:
        raise ValueError("expected at least one label, got none")


def accuracy(predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor) -> float:
    """Fraction of predictions equal to their label.

    >>> accuracy([1, 0, 1, 1], [1, 1, 1, 0])
    0.5

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    predictions, labels = _as_list(predictions), _as_list(labels)
    _check_pair(predictions, labels)
    return sum(p == y for p, y in zip(predictions, labels)) / len(labels)


def matthews_corrcoef(predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor) -> float:
    """Matthews' correlation, for any number of classes (Gorodkin 2004's generalisation).

    With the confusion matrix's total s, its trace c (correct), the true count t_k and predicted count
    p_k of each class k:

        MCC = (c s - Σ_k p_k t_k) / sqrt((s² - Σ_k p_k²)(s² - Σ_k t_k²)),

    which for two classes is (TP·TN - FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)). It is 0 when a
    factor under the root is 0 (all predictions, or all labels, in one class), as in scikit-learn.

    >>> matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0])  # TP=1 FP=1 TN=2 FN=0: 2/sqrt(2*1*3*2)
    0.5773502691896258

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    predictions, labels = _as_list(predictions), _as_list(labels)
    _check_pair(predictions, labels)
    s = len(labels)
    c = sum(p == y for p, y in zip(predictions, labels))
    p_k, t_k = Counter(predictions), Counter(labels)
    covariance = c * s - sum(p_k[k] * t_k[k] for k in t_k)
    denominator = (s * s - sum(v * v for v in p_k.values())) * (s * s - sum(v * v for v in t_k.values()))
    return covariance / math.sqrt(denominator) if denominator else 0.0


def accuracy_at_masks(
    predictions: torch.Tensor, labels: torch.Tensor, input_ids: torch.Tensor, mask_token_id: int
) -> float:
    """Masked-LM accuracy over the positions whose *input* is ``[MASK]`` only.

    Of the positions selected for prediction, BERT's rule shows 10% unchanged: there the answer is in the
    input, and a model that copies it scores without using any context. At a ``[MASK]`` it must come from
    the context (or from word frequencies: give constant ``predictions`` of the most frequent token to
    score that baseline on the same positions). ``predictions``, ``labels`` and ``input_ids`` are (B, T);
    ``labels`` holds the true token at every selected position.

    >>> inputs = torch.tensor([[2, 4, 9, 4, 3]])  # [CLS] [MASK] "is" [MASK] [SEP], [MASK] = 4
    >>> labels = torch.tensor([[-100, 7, 9, 8, -100]])  # "is" was selected and left as it is
    >>> accuracy_at_masks(torch.tensor([[0, 7, 9, 5, 0]]), labels, inputs, mask_token_id=4)
    0.5

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    if not predictions.shape == labels.shape == input_ids.shape:
        raise ValueError(
            f"expected predictions, labels and input_ids of one shape, got {tuple(predictions.shape)}, "
            f"{tuple(labels.shape)} and {tuple(input_ids.shape)}"
        )
    at_masks = input_ids == mask_token_id
    if not at_masks.any():
        raise ValueError(f"expected at least one [MASK] (id {mask_token_id}) in input_ids, got none")
    return (predictions[at_masks] == labels[at_masks]).float().mean().item()


def conll_chunks(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The (type, start, end) chunks of one sentence's BIO tags, end exclusive, as conlleval reads them.

    A chunk ends at a ``B-``, an ``O`` or a change of type; it starts at a ``B-``, and also at an
    ``I-`` that does not continue the chunk before it (conlleval's rule for ill-formed tags):

    >>> conll_chunks(["B-PER", "I-PER", "O", "I-LOC", "I-ORG", "B-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('ORG', 4, 5), ('ORG', 5, 6)]

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    chunks: list[tuple[str, int, int]] = []
    start, kind = -1, ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, tag_type = tag.partition("-")
        if prefix not in ("B", "I", "O") or (prefix == "O") != (tag_type == ""):
            raise ValueError(f"expected BIO tags such as 'B-PER', 'I-PER' or 'O', got {tag!r}")
        if start >= 0 and (prefix != "I" or tag_type != kind):
            chunks.append((kind, start, i))
            start = -1
        if prefix == "B" or (prefix == "I" and start < 0):
            start, kind = i, tag_type
    return chunks


def span_f1(true_tags: Sequence[Sequence[str]], predicted_tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """CoNLL's micro-averaged chunk precision, recall and F1 over sentences of BIO tags.

    >>> span_f1([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]])
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5}

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    if len(true_tags) != len(predicted_tags):
        raise ValueError(
            f"expected as many predicted sentences as true ones, got {len(predicted_tags)} and {len(true_tags)}"
        )
    true, predicted = set(), set()
    for n, (t, p) in enumerate(zip(true_tags, predicted_tags)):
        if len(t) != len(p):
            raise ValueError(f"sentence {n}: expected {len(t)} predicted tags, got {len(p)}")
        true.update((n, *chunk) for chunk in conll_chunks(t))
        predicted.update((n, *chunk) for chunk in conll_chunks(p))
    correct = len(true & predicted)
    precision = correct / len(predicted) if predicted else 0.0
    recall = correct / len(true) if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower-case, drop punctuation, drop a/an/the, collapse whitespace.

    >>> normalize_answer("  The Northwind-Bank, Inc. ")
    'northwindbank inc'

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def _answers(answers: str | Sequence[str]) -> list[str]:
    answers = [answers] if isinstance(answers, str) else list(answers)
    if not answers:
        raise ValueError("expected at least one reference answer, got none")
    return answers


def exact_match(prediction: str, answers: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals some normalised reference answer.

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    return float(any(normalize_answer(prediction) == normalize_answer(a) for a in _answers(answers)))


def _token_f1(prediction: str, answer: str) -> float:
    predicted, reference = normalize_answer(prediction).split(), normalize_answer(answer).split()
    if not predicted or not reference:  # SQuAD 2.0: no answer is right only when none was expected
        return float(predicted == reference)
    same = sum((Counter(predicted) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def qa_f1(prediction: str, answers: str | Sequence[str]) -> float:
    """SQuAD's F1: bag-of-tokens overlap with the best reference answer.

    >>> qa_f1("Bluebird Foods", "Bluebird")  # precision 1/2, recall 1/1
    0.6666666666666666

    The empty string is SQuAD 2.0's "no answer": it scores 1 against an empty reference (also one that
    normalisation empties, such as "the"), and 0 against any other, whichever side is empty:

    >>> qa_f1("", ""), qa_f1("", "Oslo"), qa_f1("Oslo", ""), qa_f1("The", "")
    (1.0, 0.0, 0.0, 1.0)

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    return max(_token_f1(prediction, a) for a in _answers(answers))


def squad_scores(predictions: Sequence[str], answers: Sequence[str | Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1 over a data set (fractions; SQuAD prints them times 100).

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    predictions, answers = list(predictions), list(answers)
    _check_pair(predictions, answers)
    return {
        "exact_match": sum(exact_match(p, a) for p, a in zip(predictions, answers)) / len(answers),
        "f1": sum(qa_f1(p, a) for p, a in zip(predictions, answers)) / len(answers),
    }


def corpus_bleu(
    hypotheses: Sequence[str], references: Sequence[str], *, other_references: Sequence[Sequence[str]] = ()
) -> float:
    """Corpus BLEU on a 0-100 scale, one reference per hypothesis, computed by ``sacrebleu`` on the texts as
    they are, split at spaces (``tokenize="none"``: our words are already tokens). Each list in
    ``other_references`` is one more reference per hypothesis: an n-gram's count is then clipped by its largest
    count in any of a hypothesis' references, and the brevity penalty reads the reference length closest to the
    hypothesis' (Papineni et al., 2002).

    >>> round(corpus_bleu(["the cat sat on the mat ."], ["the cat sat on the mat ."]), 6)
    100.0
    >>> round(corpus_bleu(["the cat sat on a mat ."], ["the cat sat on the mat ."]), 2)  # one word wrong
    48.89
    >>> round(corpus_bleu(["on the mat sat the cat ."], ["the cat sat on the mat ."],
    ...                   other_references=[["on the mat sat the cat ."]]), 6)  # the second reference's order
    100.0

    Taught in: 02_transformer ("A task with structure: translation").
    """
    hypotheses, streams = list(hypotheses), [list(references), *(list(other) for other in other_references)]
    for stream in streams:
        _check_pair(hypotheses, stream)
    return sacrebleu.corpus_bleu(hypotheses, streams, tokenize="none", force=True).score


def _check_scores(
    predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    predictions, labels = _as_list(predictions), _as_list(labels)
    _check_pair(predictions, labels)
    if len(labels) < 2:
        raise ValueError(f"a correlation needs at least 2 pairs, got {len(labels)}")
    return torch.tensor(predictions, dtype=torch.float64), torch.tensor(labels, dtype=torch.float64)


def pearson_correlation(predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor) -> float:
    """Pearson's r: the covariance of the two score lists over the product of their standard deviations,

        r = Σ (x_i - x̄)(y_i - ȳ) / sqrt(Σ (x_i - x̄)² Σ (y_i - ȳ)²),

    0.0 when either list is constant (r is undefined there).

    >>> pearson_correlation([1, 2, 3, 4], [2, 4, 5, 9])
    0.9647638212377322

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    x, y = _check_scores(predictions, labels)
    x, y = x - x.mean(), y - y.mean()
    denominator = float((x @ x) * (y @ y)) ** 0.5
    return float(x @ y) / denominator if denominator else 0.0


def average_ranks(values: Sequence | torch.Tensor) -> torch.Tensor:
    """1-based ranks, ties sharing the mean of the ranks they span (as ``scipy.stats.rankdata``).

    >>> average_ranks([10, 30, 20, 20]).tolist()
    [1.0, 4.0, 2.5, 2.5]

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    x = torch.as_tensor(_as_list(values), dtype=torch.float64)
    _, group, counts = x.unique(return_inverse=True, return_counts=True)  # groups of equal values, in order
    last = counts.cumsum(0).to(torch.float64)  # the rank of each group's last member
    return ((last - counts + 1 + last) / 2)[group]  # a group spans ranks last - count + 1 .. last: their mean


def spearman_correlation(predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor) -> float:
    """Spearman's rho: Pearson's r between the ranks (:func:`average_ranks`) of the two lists, so it asks
    only whether the predictions put the pairs in the right order.

    >>> spearman_correlation([1, 2, 3, 4], [2, 4, 5, 9]), spearman_correlation([1, 2, 3, 4], [1, 8, 27, 64])
    (1.0, 1.0)

    Taught in: 05_bert_finetuning ("Scoring the tasks").
    """
    x, y = _check_scores(predictions, labels)
    return pearson_correlation(average_ranks(x), average_ranks(y))


SPREADS = ("sd", "range")  # how seed_summary writes the spread over seeds: standard deviation, or min–max


def mean_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """The mean of per-seed values and their spread, the sample standard deviation (0.0 for a single value).

    >>> mean_and_spread([1.0, 2.0, 3.0])
    (2.0, 1.0)

    Taught in: 09_t5_bart ("The objectives table at toy scale").
    """
    if not values:
        raise ValueError("expected at least one value")
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def seed_summary(values: Sequence[float], spec: str = ".3f", spread: str = "sd") -> str:
    """The course's one way to write a result over seeds: the mean, its spread named in the text, and the number
    of seeds, each number written with the format ``spec``. ``spread="sd"`` gives ``mean ± sample standard
    deviation`` (:func:`mean_and_spread`); ``spread="range"`` gives the mean and the smallest and largest value.
    A spread needs at least two seeds. A standard deviation is written without the sign a ``spec`` may ask for.

    >>> seed_summary([0.5, 0.6, 0.7])
    '0.600 ± 0.100 (sd, 3 seeds)'
    >>> seed_summary([0.5, 0.6, 0.7], ".1%", spread="range")
    '60.0% (range 50.0%–70.0%, 3 seeds)'
    >>> seed_summary([-2.5, -1.5, -0.5], "+.1f")
    '-1.5 ± 1.0 (sd, 3 seeds)'

    Taught in: 07_albert ("Sentence-order prediction"), 08_electra ("Matched compute"),
    09_t5_bart ("The objectives table at toy scale").
    """
    if len(values) < 2:
        raise ValueError(f"expected at least two seeds' values, got {list(values)}")
    if spread not in SPREADS:
        raise ValueError(f"expected spread in {SPREADS}, got {spread!r}")
    mean, sd = mean_and_spread(values)
    if spread == "range":
        return f"{mean:{spec}} (range {min(values):{spec}}–{max(values):{spec}}, {len(values)} seeds)"
    return f"{mean:{spec}} ± {sd:{spec.replace('+', '', 1)}} (sd, {len(values)} seeds)"
