"""lecture_lib.decoding against exhaustive search, hand-computed probabilities, and full teacher-forced passes."""

import math
from itertools import product

import pytest
import torch

from lecture_lib.data.toy import BOS, EOS, PAD, make_batch
from lecture_lib.decoding import (
    Hypothesis,
    beam_search,
    beam_search_one,
    greedy_decode,
    greedy_exact_match,
    hypotheses_to_tensor,
    select_rows,
    sequences_equal,
)
from lecture_lib.models.transformer import Transformer, TransformerConfig

SYMBOLS = (3, 4)
VOCAB = 3 + len(SYMBOLS)


class TableModel:
    """P(next | last token) from a fixed table: a Markov chain posing as an encoder-decoder (the protocol only)."""

    def __init__(self, probs: dict[int, dict[int, float]], vocab: int = 8):
        self.log_table = torch.full((vocab, vocab), float("-inf"), dtype=torch.float64)
        for last, row in probs.items():
            for token, p in row.items():
                self.log_table[last, token] = math.log(p)

    def encode(self, src):
        return src  # no use for the source, but the state must follow the beams

    def decode_step(self, prefix, state):
        assert state.shape[0] == prefix.shape[0]
        return self.log_table[prefix[:, -1]]


# BOS -> 3 (0.6) or 4 (0.4); after 3 the mass spreads over three tokens; after 4, EOS is certain.
GARDEN_PATH = {
    BOS: {3: 0.6, 4: 0.4},
    3: {5: 0.34, 6: 0.33, 7: 0.33},
    4: {EOS: 1.0},
    5: {EOS: 1.0},
    6: {EOS: 1.0},
    7: {EOS: 1.0},
}


def test_beam_search_beats_greedy_on_a_garden_path():
    model, src = TableModel(GARDEN_PATH), torch.zeros(1, 1, dtype=torch.long)
    tokens, score = greedy_decode(model, src, max_len=5)
    assert tokens.tolist() == [[3, 5, EOS]] and score.item() == pytest.approx(math.log(0.6 * 0.34))
    best = beam_search(model, src, beam_width=2, max_len=5)[0]
    assert best.tokens == [4, EOS] and best.score == pytest.approx(math.log(0.4))


def test_greedy_exact_match_compares_whole_outputs():
    model = TableModel(GARDEN_PATH)
    sources = [torch.tensor([3]), torch.tensor([4, 5])]  # the table ignores the source
    batch = make_batch(sources, [torch.tensor([3, 5]), torch.tensor([4])])  # greedy says "3 5 EOS" for both
    assert greedy_exact_match(model, batch).tolist() == [True, False]


def test_length_penalty_prefers_the_longer_hypothesis_when_asked():
    # "4 EOS" has probability 0.5; "3 3 3 EOS" has 0.5 * 0.9^3 ≈ 0.36 but mean log-probability -0.33 > -0.35
    model = TableModel({BOS: {3: 0.5, 4: 0.5}, 3: {3: 0.9, EOS: 0.1}, 4: {EOS: 1.0}})
    src = torch.zeros(1, 1, dtype=torch.long)
    hypotheses = beam_search_one(model, src, beam_width=4, max_len=4)
    assert hypotheses[0].tokens == [4, EOS]
    normalised = beam_search_one(model, src, beam_width=4, max_len=4, length_penalty=1.0)[0]
    assert normalised.tokens == [3, 3, 3, 3] and normalised.score == pytest.approx(math.log(0.5 * 0.9**3))


def test_max_len_stops_unfinished_hypotheses_and_finished_rows_are_padded():
    model = TableModel({BOS: {3: 1.0}, 3: {3: 0.7, EOS: 0.3}})
    assert beam_search(model, torch.zeros(1, 1, dtype=torch.long), 1, max_len=3)[0].tokens == [3, 3, 3]
    table = TableModel({BOS: {3: 0.6, EOS: 0.4}, 3: {EOS: 1.0}})
    tokens, _ = greedy_decode(table, torch.zeros(2, 1, dtype=torch.long), max_len=6)
    assert tokens.tolist() == [[3, EOS], [3, EOS]]  # stops as soon as every row has ended


# ---------------------------------------------------------------- a tiny random Transformer, float64


def _random_model(seed):
    torch.manual_seed(seed)
    config = TransformerConfig(
        vocab_size=VOCAB,
        d_model=8,
        encoder_layers=1,
        decoder_layers=1,
        num_attention_heads=2,
        ffn_dim=16,
        max_position_embeddings=8,
        dropout=0.0,
    )
    model = Transformer(config).double().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(3.0)  # sharper next-token distributions than at initialisation
    return model


def _sequence_log_prob(model, src, tokens):
    """log P(tokens | src) from one teacher-forced pass over the whole sequence (not step by step)."""
    tgt_in = torch.tensor([[BOS, *tokens[:-1]]])
    log_probs = model(src, tgt_in).logits.log_softmax(-1)[0]  # (T, V)
    return sum(log_probs[t, token].item() for t, token in enumerate(tokens))


def _all_hypotheses(max_len):
    """Every sequence a search may return: symbols then EOS, or max_len symbols that never ended."""
    ended = [[*w, EOS] for n in range(max_len) for w in product(SYMBOLS, repeat=n)]
    return ended + [list(w) for w in product(SYMBOLS, repeat=max_len)]


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_beam_as_wide_as_the_search_space_finds_the_exhaustive_optimum(length_penalty):
    max_len, beam_beat_greedy = 4, 0
    everything = _all_hypotheses(max_len)
    assert len(everything) == 31
    for seed in range(6):
        model, src = _random_model(seed), torch.tensor([[3, 4, 4, 3]])
        scored = [(_sequence_log_prob(model, src, h) / len(h) ** length_penalty, h) for h in everything]
        best_score, best = max(scored)
        found = beam_search(model, src, beam_width=len(everything), max_len=max_len, length_penalty=length_penalty)[0]
        assert found.tokens == best
        assert found.ranking_score(length_penalty) == pytest.approx(best_score, abs=1e-9)
        greedy = greedy_decode(model, src, max_len)[0][0]
        beam_beat_greedy += greedy[greedy != PAD].tolist() != best
    assert beam_beat_greedy > 0  # the search space is not so easy that greedy already solves it


def test_the_trace_holds_every_step_its_scored_extensions_and_the_best_ones_kept():
    model, src = _random_model(1), torch.tensor([[3, 4, 4, 3]])
    trace = []
    hypotheses = beam_search_one(model, src, beam_width=3, max_len=4, trace=trace)
    assert trace[0].prefixes == [[]] and len(trace) >= 2
    for step, following in zip(trace, [*trace[1:], None]):
        for r, prefix in enumerate(step.prefixes):  # each score is the log-probability of the extended prefix
            for v in SYMBOLS + (EOS,):
                assert step.candidate_scores[r, v].item() == pytest.approx(_sequence_log_prob(model, src, prefix + [v]))
        flat = step.candidate_scores.flatten().tolist()
        best = sorted(range(len(flat)), key=lambda i: -flat[i])[:3]
        assert step.kept == [divmod(i, VOCAB) for i in best]  # the three best extensions, best first
        alive = [step.prefixes[r] + [v] for r, v in step.kept if v != EOS]
        if following is not None:
            assert following.prefixes == alive
    finished = [step.prefixes[r] + [v] for step in trace for r, v in step.kept if v == EOS]
    assert all(h in [h.tokens for h in hypotheses] for h in finished)


def test_beam_width_one_is_greedy():
    src = torch.tensor([[3, 4, 3, 3], [4, 4, PAD, PAD], [3, PAD, PAD, PAD]])
    for seed in range(5):
        model = _random_model(seed)
        tokens, scores = greedy_decode(model, src, max_len=6)
        beams = beam_search(model, src, beam_width=1, max_len=6)
        assert torch.equal(hypotheses_to_tensor(beams), tokens)
        torch.testing.assert_close(torch.tensor([h.score for h in beams], dtype=torch.float64), scores)


def test_greedy_scores_are_the_sequence_log_probabilities_and_rows_are_independent():
    model = _random_model(0)
    src = torch.tensor([[3, 4, 3, 3], [4, 4, PAD, PAD]])
    tokens, scores = greedy_decode(model, src, max_len=6)
    for row, (ids, score) in enumerate(zip(tokens, scores)):
        hypothesis = ids[ids != PAD].tolist()
        single = src[row : row + 1, : int((src[row] != PAD).sum())]
        assert greedy_decode(model, single, max_len=6)[0][0, : len(hypothesis)].tolist() == hypothesis
        assert score.item() == pytest.approx(_sequence_log_prob(model, single, hypothesis), abs=1e-9)


def test_helpers_and_errors():
    state = (torch.arange(3), torch.arange(6).view(3, 2))
    picked = select_rows(state, torch.tensor([2, 2, 0]))
    assert picked[0].tolist() == [2, 2, 0] and picked[1].tolist() == [[4, 5], [4, 5], [0, 1]]
    assert sequences_equal(torch.tensor([[5, EOS, PAD], [5, 6, EOS]]), torch.tensor([[5, EOS], [5, EOS]])).tolist() == [
        True,
        False,
    ]
    assert hypotheses_to_tensor([Hypothesis([3, EOS], 0.0), Hypothesis([4], 0.0)]).tolist() == [[3, EOS], [4, PAD]]
    model = TableModel(GARDEN_PATH)
    with pytest.raises(ValueError, match=r"expected source ids of shape \(B, S\), got \(3,\)"):
        greedy_decode(model, torch.tensor([3, 4, 5]), 4)
    with pytest.raises(ValueError, match="expected max_len >= 1, got 0"):
        beam_search(model, torch.zeros(1, 1, dtype=torch.long), 2, 0)
    with pytest.raises(ValueError, match="beam_width >= 1"):
        beam_search(model, torch.zeros(1, 1, dtype=torch.long), 0, 4)
    with pytest.raises(ValueError, match=r"one source \(1, S\)"):
        beam_search_one(model, torch.zeros(2, 1, dtype=torch.long), 2, 4)
    with pytest.raises(ValueError, match=r"shape \(B, n\) with equal B"):
        sequences_equal(torch.zeros(2, 3), torch.zeros(3, 3))
