"""The synthetic language at the smallest size the chapter tests train on (40 documents, 3 steps of 8), shared by
chapter 04's and chapter 05's tests, with the quick profile and an empty cache of the test's own."""

from __future__ import annotations

import copy

TINY_LANGUAGE = dict(
    documents=40,
    train_examples=48,
    test_examples=24,
    finetune=dict(steps=3, batch_size=8),
    max_length=128,
    pretrain=dict(
        train=dict(steps=3, batch_size=8, warmup_steps=1), data=dict(eval_pairs=16, vocab_size=300, seq_len=128)
    ),
)


def tiny_language(monkeypatch, tmp_path) -> dict:
    """The overrides above (a copy), after pointing ``LECTURE_PROFILE`` at quick and ``LECTURE_CACHE`` at
    ``tmp_path``, so that nothing a test trains is read from or left in the course's cache."""
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    return copy.deepcopy(TINY_LANGUAGE)
