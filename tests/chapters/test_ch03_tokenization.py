from lecture_lib.chapters.ch03_tokenization import tokenization_experiment


def test_profiles_pick_the_sizes(monkeypatch):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    quick = tokenization_experiment()
    monkeypatch.setenv("LECTURE_PROFILE", "full")
    full = tokenization_experiment()
    assert quick.bpe_vocab_size < full.bpe_vocab_size and quick.wordpiece_vocab_size < full.wordpiece_vocab_size
    for exp in (quick, full):
        assert max(exp.bpe_curve_sizes) == exp.bpe_vocab_size and min(exp.bpe_curve_sizes) == 256
        assert max(exp.wordpiece_curve_sizes) == exp.wordpiece_vocab_size

