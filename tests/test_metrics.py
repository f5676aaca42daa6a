"""lecture_lib.metrics on hand-worked cases, span F1 against seqeval, Matthews against other formulas."""

import math
import random
from collections import Counter

import pytest
import torch
from seqeval.metrics import f1_score, precision_score, recall_score

from lecture_lib.metrics import (
    accuracy,
    accuracy_at_masks,
    average_ranks,
    conll_chunks,
    corpus_bleu,
    exact_match,
    matthews_corrcoef,
    normalize_answer,
    pearson_correlation,
    qa_f1,
    seed_summary,
    span_f1,
    spearman_correlation,
    squad_scores,
)


def test_accuracy_by_hand_and_on_tensors():
    assert accuracy([1, 0, 2, 2], [1, 1, 2, 0]) == 0.5
    assert accuracy(torch.tensor([3, 3, 3]), torch.tensor([3, 3, 1])) == pytest.approx(2 / 3)


def test_accuracy_at_masks_counts_only_positions_that_show_mask():
    mask = 4
    inputs = torch.tensor([[2, 4, 11, 4, 3, 0], [2, 4, 17, 12, 3, 0]])
    labels = torch.tensor([[-100, 7, 11, 8, -100, -100], [-100, 9, 13, -100, -100, -100]])
    # selected: (0,1) [MASK] 7, (0,2) kept 11, (0,3) [MASK] 8, (1,1) [MASK] 9, (1,2) random 17 for 13
    predictions = torch.tensor([[0, 7, 11, 5, 0, 0], [0, 9, 13, 0, 0, 0]])
    # at the three [MASK]s: 7 right, 8 wrong (5), 9 right; the kept and random positions do not count
    assert accuracy_at_masks(predictions, labels, inputs, mask) == pytest.approx(2 / 3)
    # the unigram baseline: always the same token, scored at the same positions
    assert accuracy_at_masks(torch.full_like(labels, 8), labels, inputs, mask) == pytest.approx(1 / 3)
    copy = inputs.clone()  # copying the input scores at the kept position only, never at a [MASK]
    assert accuracy_at_masks(copy, labels, inputs, mask) == 0.0
    with pytest.raises(ValueError, match="one shape"):
        accuracy_at_masks(predictions[:, :3], labels, inputs, mask)
    with pytest.raises(ValueError, match=r"at least one \[MASK\]"):
        accuracy_at_masks(predictions, labels, inputs, mask_token_id=99)


def test_binary_matthews_by_hand():
    # TP=2 (i=0,1), FN=1 (i=2), FP=1 (i=3), TN=2 (i=4,5): (2*2 - 1*1) / sqrt(3*3*3*3) = 3/9
    predictions = [1, 1, 0, 1, 0, 0]
    labels = [1, 1, 1, 0, 0, 0]
    assert matthews_corrcoef(predictions, labels) == pytest.approx(1 / 3)
    assert matthews_corrcoef(labels, labels) == 1.0
    assert matthews_corrcoef([1 - y for y in labels], labels) == -1.0
    assert matthews_corrcoef([1] * 6, labels) == 0.0  # one predicted class: defined as 0


def test_binary_matthews_equals_the_direct_formula_on_random_data():
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(2, 40)
        labels = [rng.randint(0, 1) for _ in range(n)]
        predictions = [rng.randint(0, 1) for _ in range(n)]
        tp = sum(p == 1 and y == 1 for p, y in zip(predictions, labels))
        tn = sum(p == 0 and y == 0 for p, y in zip(predictions, labels))
        fp = sum(p == 1 and y == 0 for p, y in zip(predictions, labels))
        fn = sum(p == 0 and y == 1 for p, y in zip(predictions, labels))
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        expected = (tp * tn - fp * fn) / denominator if denominator else 0.0
        assert matthews_corrcoef(predictions, labels) == pytest.approx(expected)


def test_multiclass_matthews_by_hand_and_as_a_correlation_of_one_hot_matrices():
    # s=6, c=4, t=(2,2,2), p=(2,3,1): (4*6 - 12) / sqrt((36-14)(36-12)) = 12/sqrt(528)
    assert matthews_corrcoef([0, 1, 1, 1, 2, 0], [0, 0, 1, 1, 2, 2]) == pytest.approx(12 / math.sqrt(528))
    # Gorodkin's R_K is the correlation of the centred one-hot matrices X (predicted) and Y (true)
    rng = random.Random(1)
    for _ in range(20):
        labels = torch.tensor([rng.randint(0, 3) for _ in range(30)])
        predictions = torch.tensor([rng.randint(0, 3) for _ in range(30)])
        x = torch.nn.functional.one_hot(predictions, 4).double()
        y = torch.nn.functional.one_hot(labels, 4).double()
        x, y = x - x.mean(0), y - y.mean(0)
        expected = (x * y).sum() / ((x * x).sum() * (y * y).sum()).sqrt()
        assert matthews_corrcoef(predictions, labels) == pytest.approx(expected.item())


def test_conll_chunks_by_hand():
    assert conll_chunks(["O", "B-PER", "I-PER", "I-PER", "O"]) == [("PER", 1, 4)]
    assert conll_chunks(["B-LOC", "B-LOC"]) == [("LOC", 0, 1), ("LOC", 1, 2)]
    # conlleval: an I- after O starts a chunk; a change of type ends one and starts another
    assert conll_chunks(["I-ORG", "I-ORG", "I-PER"]) == [("ORG", 0, 2), ("PER", 2, 3)]
    assert conll_chunks(["B-ORG", "I-LOC"]) == [("ORG", 0, 1), ("LOC", 1, 2)]
    assert conll_chunks(["O", "O"]) == []


def test_span_f1_by_hand():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "O"]]
    # true chunks: PER(0,2) LOC(3,4) ORG(0,2); predicted: PER(0,2) ORG(3,4) ORG(0,1); 1 correct of 3 and 3
    scores = span_f1(true, predicted)
    assert scores == pytest.approx({"precision": 1 / 3, "recall": 1 / 3, "f1": 1 / 3})
    assert span_f1(true, true)["f1"] == 1.0
    assert span_f1([["O", "O"]], [["O", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def _random_tags(rng: random.Random, n: int) -> list[str]:
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    return [rng.choice(tags) for _ in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_span_f1_equals_seqeval_on_random_tag_sequences(seed):
    rng = random.Random(seed)
    true, predicted = [], []
    for _ in range(rng.randint(1, 8)):
        n = rng.randint(1, 12)
        true.append(_random_tags(rng, n))
        # mostly copy the truth, so scores spread over (0, 1) rather than sit near 0
        predicted.append([t if rng.random() < 0.6 else rng.choice(_random_tags(rng, 1)) for t in true[-1]])
    ours = span_f1(true, predicted)
    assert ours["precision"] == pytest.approx(precision_score(true, predicted, zero_division=0))
    assert ours["recall"] == pytest.approx(recall_score(true, predicted, zero_division=0))
    assert ours["f1"] == pytest.approx(f1_score(true, predicted, zero_division=0))


def test_span_f1_rejects_bad_input():
    with pytest.raises(ValueError, match="BIO tags"):
        span_f1([["B-PER"]], [["E-PER"]])
    with pytest.raises(ValueError, match="BIO tags"):
        conll_chunks(["B"])
    with pytest.raises(ValueError, match="expected 2 predicted tags, got 1"):
        span_f1([["O", "O"]], [["O"]])


def test_squad_normalisation_and_scores_by_hand():
    assert normalize_answer("The  Bank of Oslo!") == "bank of oslo"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert exact_match("the Oslo", "Oslo") == 1.0
    assert exact_match("Oslo harbour", ["Oslo", "Lima"]) == 0.0
    # "anna berg lives" vs "anna berg": precision 2/3, recall 1 -> F1 0.8
    assert qa_f1("Anna Berg lives", "Anna Berg") == pytest.approx(0.8)
    assert qa_f1("Berg", ["Lima", "Anna Berg"]) == pytest.approx(2 / 3)  # best reference counts
    assert qa_f1("", "Oslo") == 0.0  # an empty side scores 0 unless both are empty (SQuAD 2.0's rule)
    assert qa_f1("the", "a") == 1.0 == exact_match("the", "a")  # both empty after normalisation
    # repeated tokens count as a bag (min of the counts)
    assert qa_f1("bank bank", "bank") == pytest.approx(2 * 0.5 * 1 / 1.5)
    scores = squad_scores(["Oslo", "Acme Corp", "Lima"], ["Oslo", ["Acme"], "Porto"])
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="as many predictions as labels, got 2 and 3"):
        accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="at least one label"):
        matthews_corrcoef([], [])
    with pytest.raises(ValueError, match="at least one reference answer"):
        qa_f1("Oslo", [])


def _bleu_by_hand(hypotheses, reference_sets):
    """Papineni et al. (2002), one or more references per hypothesis: each n-gram clipped by its largest count
    in any reference, and r the sum of the reference lengths closest to each hypothesis' (the shorter on a tie)."""
    matches, totals, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for h, refs in zip(hypotheses, reference_sets):
        h, refs = h.split(), [r.split() for r in refs]
        hyp_len += len(h)
        ref_len += min((abs(len(r) - len(h)), len(r)) for r in refs)[1]
        for n in range(1, 5):
            h_grams = Counter(tuple(h[i : i + n]) for i in range(len(h) - n + 1))
            most = Counter()
            for r in refs:
                most |= Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1))  # | keeps the larger count
            matches[n - 1] += sum((h_grams & most).values())
            totals[n - 1] += max(len(h) - n + 1, 0)
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * brevity * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)


def test_corpus_bleu_is_papinenis_formula():
    rng = random.Random(0)
    words = "a b c d e f g".split()
    references = [" ".join(rng.choices(words, k=rng.randint(6, 12))) for _ in range(50)]
    hypotheses = [
        " ".join(w if rng.random() < 0.8 else rng.choice(words) for w in r.split()[: rng.randint(5, 12)])
        for r in references
    ]
    assert math.isclose(
        corpus_bleu(hypotheses, references), _bleu_by_hand(hypotheses, [[r] for r in references]), rel_tol=1e-9
    )
    assert math.isclose(corpus_bleu(references, references), 100.0)
    assert math.isclose(corpus_bleu(["x . y z"], ["x . y z"]), 100.0)  # tokens are taken as they are, "." included
    with pytest.raises(ValueError, match="as many"):
        corpus_bleu(["a"], ["a", "b"])


def test_corpus_bleu_with_other_references_clips_by_the_best_reference():
    rng = random.Random(1)
    words = "a b c d e f g".split()
    first = [" ".join(rng.choices(words, k=rng.randint(6, 12))) for _ in range(50)]
    second = [" ".join(reversed(r.split()[: rng.randint(5, 12)])) for r in first]
    hypotheses = [
        " ".join(w if rng.random() < 0.8 else rng.choice(words) for w in rng.choice(pair).split())
        for pair in zip(first, second)
    ]
    assert math.isclose(
        corpus_bleu(hypotheses, first, other_references=[second]),
        _bleu_by_hand(hypotheses, list(zip(first, second))),
        rel_tol=1e-9,
    )
    assert corpus_bleu(hypotheses, first, other_references=[first]) == corpus_bleu(hypotheses, first)
    assert math.isclose(corpus_bleu(second, first, other_references=[second]), 100.0)
    with pytest.raises(ValueError, match="as many"):
        corpus_bleu(["a"], ["a"], other_references=[["a", "b"]])


@pytest.mark.parametrize("seed", range(5))
def test_correlations_equal_scipy_on_random_scores_with_ties(seed):
    from scipy.stats import pearsonr, spearmanr

    g = torch.Generator().manual_seed(seed)
    truth = torch.randint(0, 6, (40,), generator=g).double()  # STS-like: many ties
    predicted = truth + torch.randn(40, generator=g, dtype=torch.float64)
    predicted[::7] = predicted[1]  # ties in the predictions too
    assert pearson_correlation(predicted, truth) == pytest.approx(pearsonr(predicted, truth).statistic, abs=1e-12)
    assert spearman_correlation(predicted, truth) == pytest.approx(spearmanr(predicted, truth).statistic, abs=1e-12)


def test_average_ranks_equal_scipy():
    from scipy.stats import rankdata

    values = [3.0, 1.0, 3.0, 2.0, 3.0, -1.0, 2.0]
    assert average_ranks(values).tolist() == rankdata(values).tolist()


def test_correlations_by_hand_and_bad_input():
    assert pearson_correlation([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) < 0.95
    assert pearson_correlation([2, 2, 2], [1, 2, 3]) == 0.0  # a constant list: undefined, reported as 0
    with pytest.raises(ValueError, match="at least 2 pairs, got 1"):
        spearman_correlation([1.0], [2.0])
    with pytest.raises(ValueError, match="as many predictions as labels, got 2 and 3"):
        pearson_correlation([1, 2], [1, 2, 3])


def _official_squad2_f1(prediction, gold):
    """The SQuAD 2.0 script's compute_f1, rewritten from its rules: an empty side scores int(both empty)."""
    gold_tokens, predicted_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)
    common = sum(min(gold_tokens.count(t), predicted_tokens.count(t)) for t in set(gold_tokens))
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def test_squad2_unanswerable_questions_score_as_the_official_script():
    cases = [("", ""), ("", "Oslo"), ("Oslo", ""), ("the", ""), ("a Oslo", "Oslo"), ("Port Elm", "Elm Port Elm")]
    for prediction, gold in cases:
        assert qa_f1(prediction, gold) == pytest.approx(_official_squad2_f1(prediction, gold))
    scores = squad_scores(["", "Oslo", "", "Lima"], ["", "", "Lima", "Lima"])
    assert scores == {"exact_match": 0.5, "f1": 0.5}


@pytest.mark.parametrize("values", [[0.5, 0.6, 0.7], [0.61, 0.65, 0.73, 0.7], [1.0, 3.0]])
def test_seed_summary_names_its_spread_and_the_number_of_seeds(values):
    import statistics

    mean, sd = statistics.mean(values), statistics.stdev(values)
    assert seed_summary(values) == f"{mean:.3f} ± {sd:.3f} (sd, {len(values)} seeds)"
    assert seed_summary(values, ".1%", spread="range") == (
        f"{mean:.1%} (range {min(values):.1%}–{max(values):.1%}, {len(values)} seeds)"
    )
    # a signed spec signs the mean and the range's ends, never the standard deviation
    assert seed_summary(values, "+.2f") == f"{mean:+.2f} ± {sd:.2f} (sd, {len(values)} seeds)"


def test_seed_summary_refuses_one_seed_and_an_unknown_spread():
    with pytest.raises(ValueError, match="at least two seeds"):
        seed_summary([0.5])
    with pytest.raises(ValueError, match=r"expected spread in \('sd', 'range'\), got 'iqr'"):
        seed_summary([0.5, 0.6], spread="iqr")
