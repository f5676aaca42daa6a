"""lecture_lib.analysis.word_senses: k-NN sense accuracy against scikit-learn's leave-one-out classifier,
mean pairwise cosine against scipy's distances, planted clusters, the course's sentences and MiniLM's
occurrence vectors."""

import pytest
import torch
import transformers
from scipy.spatial.distance import pdist
from sklearn.neighbors import KNeighborsClassifier

from lecture_lib.analysis.word_senses import (
    knn_accuracy,
    mean_pairwise_cosine,
    occurrence_vectors,
    random_word_vectors,
    sense_sentences,
)
from lecture_lib.analysis.word_vectors import word_vectors
from lecture_lib.models.bert import BertModel
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


def sklearn_leave_one_out(vectors: torch.Tensor, labels: list[int], k: int) -> float:
    hits = 0
    for i in range(len(labels)):
        rest = [j for j in range(len(labels)) if j != i]
        classifier = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute")
        classifier.fit(vectors[rest].numpy(), [labels[j] for j in rest])
        hits += int(classifier.predict(vectors[i : i + 1].numpy())[0] == labels[i])
    return hits / len(labels)


@pytest.mark.parametrize("k", [1, 4, 5])
def test_knn_accuracy_equals_sklearn_leave_one_out_per_layer(k):
    g = torch.Generator().manual_seed(k)
    labels = torch.randint(0, 3, (30,), generator=g).tolist()
    vectors = torch.randn(3, 30, 8, generator=g) + 1.5 * torch.eye(8)[labels]  # three layers, loose clusters
    got = knn_accuracy(vectors, labels, k)
    expected = [sklearn_leave_one_out(layer, labels, k) for layer in vectors]
    assert 1 / 3 < min(expected) and max(expected) < 1  # above chance, not perfect: the vote matters
    torch.testing.assert_close(got, torch.tensor(expected))


def test_knn_accuracy_finds_planted_senses_and_not_shuffled_ones():
    g = torch.Generator().manual_seed(0)
    labels = [0] * 10 + [1] * 10
    centres = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
    vectors = centres[labels] + 0.1 * torch.randn(20, 4, generator=g)
    assert knn_accuracy(vectors, labels, 5).item() == 1.0
    identical = torch.ones(20, 4)  # nothing to tell senses apart: leave-one-out leaves the other sense ahead
    assert knn_accuracy(identical + 1e-6 * torch.randn(20, 4, generator=g), labels, 5).item() < 0.5
    with pytest.raises(ValueError, match="one label per vector"):
        knn_accuracy(vectors, labels[:5])
    with pytest.raises(ValueError, match="1 <= k < 20"):
        knn_accuracy(vectors, labels, 20)


def test_mean_pairwise_cosine_equals_scipy_and_a_loop():
    g = torch.Generator().manual_seed(1)
    vectors = torch.randn(2, 12, 5, generator=g, dtype=torch.float64)
    got = mean_pairwise_cosine(vectors)
    for layer, value in zip(vectors, got):
        assert value.item() == pytest.approx(1 - pdist(layer.numpy(), "cosine").mean(), abs=1e-12)
        loop = [
            torch.nn.functional.cosine_similarity(layer[i], layer[j], dim=0)
            for i in range(12)
            for j in range(12)
            if i != j
        ]
        assert value.item() == pytest.approx(torch.stack(loop).mean().item(), abs=1e-12)
    with pytest.raises(ValueError, match="at least 2 vectors"):
        mean_pairwise_cosine(vectors[:, :1])


def test_random_word_vectors_draw_distinct_words_from_every_sentence():
    sentences = [torch.arange(3 * w * 1.0).reshape(3, w, 1) + 100 * s for s, w in enumerate([4, 6, 5])]
    drawn = random_word_vectors(sentences, 15, torch.Generator().manual_seed(0))
    pool = torch.cat(sentences, 1)
    assert drawn.shape == (3, 15, 1)
    assert sorted(drawn[1, :, 0].tolist()) == sorted(pool[1, :, 0].tolist())  # all 15, each once
    with pytest.raises(ValueError, match="at most 15 words"):
        random_word_vectors(sentences, 16, torch.Generator())


def test_the_course_sentences_hold_their_word_once_in_two_balanced_senses():
    data = sense_sentences()
    assert set(data) == {"bank", "play", "restrain"}
    for word, senses in data.items():
        assert len(senses) == 2 and all(len(group) >= 8 for group in senses.values())
        assert len({len(group) for group in senses.values()}) == 1
        for group in senses.values():
            assert all(sentence.split().count(word) == 1 for sentence in group)


def test_occurrence_vectors_are_transformers_hidden_states_at_the_word(minilm):
    """Chapter 04's contextual vectors: each layer's output at the word, the sentence read whole by transformers."""
    ours = BertModel.from_pretrained(minilm)
    tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    theirs = transformers.BertModel.from_pretrained(minilm).eval()
    hf_tokenizer = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    sentences = ["the river overflowed its bank after the storm .", "she opened an account at the bank downtown ."]
    got, _ = occurrence_vectors(ours, tokenizer, "bank", sentences)
    (bank,) = hf_tokenizer.convert_tokens_to_ids(["bank"])
    for s, sentence in enumerate(sentences):
        encoded = hf_tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            hidden = torch.stack(theirs(**encoded, output_hidden_states=True).hidden_states)[:, 0]  # (L+1, T, H)
        torch.testing.assert_close(
            got[:, s], hidden[:, encoded.input_ids[0].tolist().index(bank)], atol=1e-4, rtol=1e-4
        )
    assert not torch.allclose(got[-1, 0], got[-1, 1], atol=1e-2)  # the same word, two vectors


def test_occurrence_vectors_pick_the_word_from_each_sentence(minilm):
    model = BertModel.from_pretrained(minilm)
    tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    sentences = ["the bank was closed", "we sat on the river bank"]
    got, every = occurrence_vectors(model, tokenizer, "bank", sentences)
    expected = word_vectors(model, tokenizer, [s.split() for s in sentences])
    assert got.shape == (7, 2, 384)
    torch.testing.assert_close(got[:, 0], expected[0][:, 1])
    torch.testing.assert_close(got[:, 1], expected[1][:, 5])
    torch.testing.assert_close(every[1], expected[1])
    with pytest.raises(ValueError, match="'bank' once in each sentence, got 2"):
        occurrence_vectors(model, tokenizer, "bank", ["the bank by the bank"])
