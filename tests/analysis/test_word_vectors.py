"""lecture_lib.analysis.word_vectors: per-layer word vectors equal the mean over each word's pieces of
transformers' hidden states."""

import pytest
import torch
import transformers

from lecture_lib.analysis.word_vectors import piece_means, word_vectors
from lecture_lib.models.bert import BertModel
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


def test_word_vectors_equal_transformers_hidden_states_averaged_over_pieces(minilm):
    ours = BertModel.from_pretrained(minilm)
    tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    theirs = transformers.BertModel.from_pretrained(minilm).eval()
    hf_tokenizer = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    sentences = [["Northwind", "Bank", "employs", "Anna", "Berg", "."], ["the", "chef", "is", "out", "of", "food"]]
    vectors = word_vectors(ours, tokenizer, sentences, batch_size=1)
    for words, got in zip(sentences, vectors):
        encoded = hf_tokenizer(words, is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            hidden = torch.stack(theirs(**encoded, output_hidden_states=True).hidden_states)[:, 0]  # (L+1, T, H)
        ids = encoded.word_ids()
        expected = torch.stack(
            [hidden[:, [t for t, w in enumerate(ids) if w == i]].mean(1) for i in range(len(words))], 1
        )
        assert got.shape == (7, len(words), 384)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    batched = word_vectors(ours, tokenizer, sentences)  # padding one sentence changes nothing
    for a, b in zip(batched, vectors):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_piece_means_checks_the_alignment():
    with pytest.raises(ValueError, match="a word index for each of 3 pieces"):
        piece_means(torch.zeros(3, 2), [0, 1])
