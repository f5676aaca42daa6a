"""lecture_lib.objectives.input_formats: RoBERTa's four ways to cut documents into rows."""

import pytest
import torch

from lecture_lib.objectives.input_formats import (
    FORMATS,
    format_rows,
    frame_roberta_ids,
    make_sentence_pairs,
    pack_sentences,
)

CLS, SEP, PAD = 2, 3, 0


def documents(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    docs, token = [], 10
    for _ in range(n):
        doc = []
        for _ in range(int(torch.randint(2, 7, (1,), generator=g))):
            length = int(torch.randint(3, 12, (1,), generator=g))
            doc.append(list(range(token, token + length)))  # every token id unique: its origin is known
            token += length
        docs.append(doc)
    return docs


def origin(docs):
    return {t: (d, s) for d, doc in enumerate(docs) for s, sentence in enumerate(doc) for t in sentence}


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_frames_and_fits_its_rows(name):
    rows = format_rows(name, documents(), length=32, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD)
    ids, special = rows["input_ids"], rows["special_tokens_mask"]
    assert ids.shape[1] == 32 and (ids[:, 0] == CLS).all()
    assert torch.equal(special, (ids == CLS) | (ids == SEP) | (ids == PAD))
    assert ("next_sentence_label" in rows) == FORMATS[name]


def test_packing_keeps_whole_sentences_in_order_and_separates_documents():
    docs = documents()
    where = origin(docs)
    for cross in (True, False):
        rows = pack_sentences(docs, 30, cross_documents=cross, separator=SEP)
        assert all(len(row) <= 30 for row in rows)
        tokens = [t for row in rows for t in row if t != SEP]
        assert tokens == [t for doc in docs for s in doc for t in s]  # nothing lost, nothing reordered
        for row in rows:
            parts = [[where[t][0] for t in part] for part in _split(row)]
            if cross:  # documents change only across a separator
                assert all(len(set(p)) == 1 for p in parts)
            else:
                assert SEP not in row and len({where[t][0] for t in row}) == 1


def _split(row):
    part = []
    for t in row:
        if t == SEP:
            yield part
            part = []
        else:
            part.append(t)
    if part:
        yield part


def test_sentence_pairs_are_single_sentences_and_shorter_than_segment_pairs():
    docs = documents()
    where = origin(docs)
    pairs = make_sentence_pairs(docs, 62, seed=1)
    assert 0.3 < sum(p.label for p in pairs) / len(pairs) < 0.7
    for p in pairs:
        (da, sa), (db, sb) = where[p.tokens_a[0]], where[p.tokens_b[0]]
        assert {where[t] for t in p.tokens_a} == {(da, sa)} and {where[t] for t in p.tokens_b} == {(db, sb)}
        assert (da == db and sb == sa + 1) == (p.label == 0)
    lengths = {
        name: format_rows(name, docs, length=64, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD)["attention_mask"]
        .sum(1)
        .double()
        .mean()
        for name in FORMATS
    }
    assert lengths["sentence-pair"] < lengths["segment-pair"]


def test_bad_input_raises():
    with pytest.raises(ValueError, match="expected an input format in"):
        format_rows("documents", documents(), length=32, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD)
    with pytest.raises(ValueError, match="expected a separator token id"):
        pack_sentences(documents(), 30, cross_documents=True)
    with pytest.raises(ValueError, match="at least 2 non-empty documents"):
        make_sentence_pairs(documents(1), 30)


def test_roberta_framing_equals_the_tokenizers_post_processor():
    from tokenizers import Tokenizer, models
    from tokenizers.processors import RobertaProcessing

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, **{f"w{i}": i for i in range(10, 20)}}
    reference = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    reference.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    a, b = ["w10", "w11", "w12"], ["w13", "w14"]
    ids_a, ids_b = [vocab[w] for w in a], [vocab[w] for w in b]
    assert frame_roberta_ids(ids_a, ids_b) == reference.encode(a, b, is_pretokenized=True).ids
    assert frame_roberta_ids(ids_a) == reference.encode(a, is_pretokenized=True).ids
