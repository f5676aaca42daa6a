"""lecture_lib.objectives.text_to_text: the vocabulary's layout, encoding and decoding, and the padded batch."""

from lecture_lib.objectives.text_to_text import Vocabulary, batch_of


def test_vocabulary_and_batches():
    vocab = Vocabulary([["b", "a"], ["a", "c"]])
    assert vocab.words[:3] == ["<pad>", "</s>", "<unk>"] and vocab.encode(["a", "zzz"])[-2:] == [2, 1]
    assert vocab.decode(vocab.encode(["c", "a"]) + [0, 0]) == ["c", "a"]
    batch = batch_of([(["a", "b"], ["c"]), (["a"], ["c", "b"])], vocab)
    assert batch["input_ids"].shape == (2, 3) and batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"][0, -1] == -100 and batch["labels"][1, -1] == 1


def test_a_sentinel_in_the_texts_keeps_its_one_id():
    from lecture_lib.objectives.text_to_text import NUM_SENTINELS, SPECIALS

    vocab = Vocabulary([["a", "<extra_id_0>"], ["</s>", "b"]])
    assert len(vocab.words) == len(set(vocab.words)) == len(SPECIALS) + NUM_SENTINELS + 2
    assert vocab.ids["<extra_id_0>"] == vocab.words.index("<extra_id_0>") < len(SPECIALS) + NUM_SENTINELS
