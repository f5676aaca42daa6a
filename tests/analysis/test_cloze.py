"""lecture_lib.analysis.cloze: scores equal transformers' masked-LM log-probabilities (multi-piece names
summed over one [MASK] per piece), also in padded batches of many blanks; the agreement preference is
antisymmetric; the majority baseline."""

import pytest
import torch
import transformers

from lecture_lib.analysis.cloze import (
    blank_scores,
    cloze_scores,
    form_preference,
    form_preferences,
    frequency_baseline,
    ranked,
)
from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tiny(minilm):
    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    model = BertForPreTraining(config).eval()
    return model, WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt"), minilm


def transformers_score(theirs, hf_tokenizer, left: str, right: str, candidate: str) -> float:
    """The summed log-probability of the candidate's pieces at one [MASK] each, by transformers' BERT."""
    pieces = hf_tokenizer(candidate, add_special_tokens=False)["input_ids"]
    encoded = hf_tokenizer(f"{left} {' '.join(['[MASK]'] * len(pieces))} {right}", return_tensors="pt")
    with torch.no_grad():
        log_probs = theirs(**encoded).prediction_logits[0].log_softmax(-1)
    masks = (encoded["input_ids"][0] == hf_tokenizer.mask_token_id).nonzero().flatten()
    assert len(masks) == len(pieces)
    return log_probs[masks, pieces].sum().item()


def test_cloze_scores_equal_transformers_summed_over_one_mask_per_piece(tiny):
    model, tokenizer, minilm = tiny
    theirs = model.to_hf().eval()
    hf_tokenizer = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    candidates = ["Oslo", "Northwind Bank", "Quillfeather"]
    got = cloze_scores(model, tokenizer, "Anna Berg works for", ".", candidates)
    for candidate, score in zip(candidates, got):
        expected = transformers_score(theirs, hf_tokenizer, "Anna Berg works for", ".", candidate)
        assert score.item() == pytest.approx(expected, abs=1e-4)
    assert len(hf_tokenizer("Quillfeather", add_special_tokens=False)["input_ids"]) > 1  # the test covers pieces


def test_blank_scores_of_padded_batches_equal_transformers_one_blank_at_a_time(tiny):
    model, tokenizer, minilm = tiny
    theirs = model.to_hf().eval()
    hf_tokenizer = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    blanks = [
        ("Anna Berg works for", ".", ["Oslo", "Northwind Bank", "Quillfeather"]),
        ("the", "of the old river that runs through the town is blue .", ["bank", "water"]),
        ("", "sings .", ["she"]),
    ]
    got = blank_scores(model, tokenizer, blanks, batch_size=2)  # batches that cut across blanks, padded rows
    assert [len(scores) for scores in got] == [3, 2, 1]
    for (left, right, candidates), scores in zip(blanks, got):
        expected = [transformers_score(theirs, hf_tokenizer, left, right, c) for c in candidates]
        assert scores.tolist() == pytest.approx(expected, abs=1e-4)
    with pytest.raises(ValueError, match="at least one candidate"):
        blank_scores(model, tokenizer, [("a", "b", [])])


def test_form_preference_is_antisymmetric_between_a_sentence_and_its_corrupted_twin(tiny):
    model, tokenizer, _ = tiny
    words = "the chef who ran to the stores is out of food".split()
    twin = list(words)
    twin[7] = "are"
    forward = form_preference(model, tokenizer, words, 7, "are")
    assert forward != 0
    assert form_preference(model, tokenizer, twin, 7, "is") == pytest.approx(-forward, abs=1e-5)
    other = "the chefs sing .".split()
    batched = form_preferences(model, tokenizer, [(words, 7, "are"), (other, 2, "sings"), (twin, 7, "is")])
    assert batched == pytest.approx([forward, form_preference(model, tokenizer, other, 2, "sings"), -forward], abs=1e-5)
    with pytest.raises(ValueError, match="word index"):
        form_preference(model, tokenizer, words, 11, "are")


def test_ranked_and_the_frequency_baseline():
    assert ranked(["a", "b", "c"], torch.tensor([0.0, 2.0, 1.0]), k=2) == [("b", 2.0), ("c", 1.0)]
    assert frequency_baseline(["x", "y", "y"]) == ("y", pytest.approx(2 / 3))
    with pytest.raises(ValueError, match="at least one"):
        frequency_baseline([])
