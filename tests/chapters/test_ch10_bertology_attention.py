"""Chapter 10's inputs: documentation pairs framed as BERT's, masked sentences as in pretraining, word maps."""

from collections import Counter

import pytest
import torch
import transformers

from lecture_lib.analysis.attention_stats import attention_maps
from lecture_lib.analysis.syntactic_heads import align_words, word_attention
from lecture_lib.chapters.ch10_bertology_attention import (
    chapter_config,
    documentation_pairs,
    masked_sentences,
    token_frequencies,
    word_maps,
)
from lecture_lib.data.corpus import load_corpus
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.models.bert import BertConfig, BertModel
from lecture_lib.pretraining import PretrainResult
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tokenizer(minilm):
    return WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")


def test_documentation_pairs_are_framed_as_transformers_frames_them(tokenizer, minilm):
    pairs = documentation_pairs(tokenizer, chapter_config(pairs=6, max_length=40))
    theirs = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    assert pairs["input_ids"].shape[0] == 6 and pairs["input_ids"].shape[1] <= 40
    for row in range(6):
        n = int(pairs["attention_mask"][row].sum())
        ids = pairs["input_ids"][row, :n].tolist()
        first_sep = ids.index(tokenizer.sep_token_id)
        a, b = (theirs.decode(part) for part in (ids[1:first_sep], ids[first_sep + 1:-1]))
        encoded = theirs(a, b)
        assert ids == encoded["input_ids"] and pairs["token_type_ids"][row, :n].tolist() == encoded["token_type_ids"]
        assert pairs["special_tokens_mask"][row].nonzero().flatten().tolist() == [0, first_sep, n - 1]
        assert (pairs["input_ids"][row, n:] == tokenizer.pad_token_id).all()


def test_token_frequencies_count_the_documentation(tokenizer):
    frequency = token_frequencies(tokenizer)
    counts = Counter(i for doc in load_corpus()["sentences"][:50] for s in doc for i in tokenizer.encode(s))
    token, count = counts.most_common(1)[0]
    assert frequency.shape == (tokenizer.vocab_size,) and frequency[token] >= count
    assert frequency[tokenizer.cls_token_id] == 0 and int(frequency.sum()) > 100_000


def test_masked_sentences_select_words_only_and_keep_the_originals_as_labels(tokenizer):
    sentences = SyntheticLanguage(0).sentences(40, seed=5)
    result = PretrainResult(model=None, tokenizer=tokenizer, history=None, config=None)
    batches = masked_sentences(result, sentences, seed=0, batch_size=16)
    assert [len(b["input_ids"]) for b in batches] == [16, 16, 8]
    for batch in batches:
        selected = batch["labels"] != -100
        assert selected.any()
        assert not (selected & (batch["attention_mask"] == 0)).any()
        assert not (selected[:, 0]).any()  # never [CLS]
        kept = ~selected & (batch["attention_mask"] == 1)
        assert not (batch["input_ids"][kept] == tokenizer.mask_token_id).any()
    again = masked_sentences(result, sentences, seed=0, batch_size=16)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, again))


def test_word_maps_of_a_padded_batch_are_those_of_each_sentence_alone(tokenizer):
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64, initializer_range=0.5))
    sentences = SyntheticLanguage(0).sentences(5, seed=6)
    batched = word_maps(model, tokenizer, sentences, batch_size=3)
    for sentence, maps in zip(sentences, batched):
        ids, word_of_piece = align_words(tokenizer, sentence.words)
        alone = attention_maps(model, torch.tensor([ids]))[0]
        torch.testing.assert_close(maps, word_attention(alone, word_of_piece), atol=1e-5, rtol=1e-5)
        assert maps.shape == (2, 2, len(sentence), len(sentence))
