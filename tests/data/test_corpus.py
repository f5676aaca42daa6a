"""lecture_lib.data.corpus against the interpreter it reads: pydoc's topics and the objects' own docstrings."""

import doctest
import inspect
import json
import subprocess
import sys
from pydoc_data.topics import topics

import datasets
import pytest

from lecture_lib.data.corpus import (
    STDLIB_MODULES,
    corpus_stats,
    corpus_texts,
    is_held_out,
    load_corpus,
    load_sentences,
    split_corpus,
    split_sentences,
)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def test_columns_and_types(corpus):
    assert isinstance(corpus, datasets.Dataset)
    assert corpus.column_names == ["doc_id", "source", "title", "text", "sentences"]
    assert corpus["doc_id"] == list(range(len(corpus)))
    assert set(corpus["source"]) == {"pydoc_topics", "docstrings"}
    assert len(set(corpus["title"])) == len(corpus), "titles must be unique"
    assert all(isinstance(t, str) and t.strip() == t and t for t in corpus["text"])


def test_every_pydoc_topic_is_a_document_verbatim(corpus):
    rows = {
        title: text
        for title, text, source in zip(corpus["title"], corpus["text"], corpus["source"])
        if source == "pydoc_topics"
    }
    assert rows == {f"topic:{name}": text.strip() for name, text in topics.items()}


@pytest.mark.parametrize(
    "title, obj",
    [
        ("json", __import__("json")),
        ("json.dumps", json.dumps),
        ("builtins.len", len),
        ("collections.OrderedDict", __import__("collections").OrderedDict),
        ("inspect.Signature.bind", inspect.Signature.bind),
    ],
)
def test_docstrings_are_the_objects_own(corpus, title, obj):
    text = dict(zip(corpus["title"], corpus["text"]))[title]
    assert text.split() == obj.__doc__.split()  # same words; only indentation and trailing spaces differ


def test_modules_are_the_listed_ones_in_order(corpus):
    modules = [t for t, s in zip(corpus["title"], corpus["source"]) if s == "docstrings" and t in STDLIB_MODULES]
    assert modules == [m for m in STDLIB_MODULES if m in modules]
    assert len(modules) > 100
    assert not {"this", "antigravity", "tkinter", "idlelib", "test", "turtle"} & set(STDLIB_MODULES)


def test_same_corpus_in_any_process_even_after_libraries_patch_the_stdlib():
    # fresh interpreters (their string hashes are randomised differently), one of which first patches the
    # standard library the way some libraries do (transformers adds methods to logging.Logger)
    patch = (
        "import logging, inspect, functools;"
        "logging.Logger.warning_once = functools.wraps(logging.Logger.warning)(lambda self, *a: None);"
        "logging.Logger.warning_once.__module__ = 'somelib';"
        "inspect.getfile = (lambda f: lambda o: f(o))(inspect.getfile);"
    )
    code = (
        "import sys, hashlib; from lecture_lib.data.corpus import corpus_texts, corpus_stats;"
        "print(hashlib.sha256('\\x00'.join(corpus_texts()).encode()).hexdigest(), corpus_stats());"
        "print(sorted({'this', 'antigravity', 'tkinter', 'idlelib', 'turtle', 'test.support'} & set(sys.modules)))"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", prefix + code], stdout=subprocess.PIPE, text=True)
        for prefix in ("", patch)
    ]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert outputs[0] == outputs[1]
    assert outputs[0].splitlines()[0].endswith(str(corpus_stats()))
    assert outputs[0].splitlines()[1] == "[]"


def test_cached_in_memory():
    assert load_corpus() is load_corpus()
    assert corpus_texts() == load_corpus()["text"]


def test_stats_count_what_they_say(corpus):
    stats = corpus_stats()
    assert stats["documents"] == len(corpus)
    assert stats["sentences"] == len(load_sentences()) == sum(map(len, corpus["sentences"]))
    assert stats["characters"] == sum(map(len, corpus["text"]))
    assert stats["words"] == sum(len(t.split()) for t in corpus["text"])
    assert stats["documents"] > 2000 and stats["words"] > 100_000 and stats["sentences"] > 5000


def test_sentences_worked_example_and_provenance(corpus):
    text = "Title\n=====\n\nOne line\nwraps here. Then a second one!\n\n   >>> code()\n\nToo short. Then e.g. a list."
    assert split_sentences(text) == ["One line wraps here.", "Then a second one!", "Then e.g. a list."]
    for sentences, text in zip(corpus["sentences"][:300], corpus["text"][:300]):
        flat = " ".join(text.split())
        for sentence in sentences:
            assert all(word in flat for word in sentence.split()), (sentence, text[:200])
            assert ">>>" not in sentence


def test_sentence_rows_follow_documents():
    rows = load_sentences()
    assert rows.column_names == ["doc_id", "sentence_id", "text"]
    corpus = load_corpus()
    first = corpus[int(rows[0]["doc_id"])]["sentences"]
    assert rows["text"][: len(first)] == first
    assert rows["sentence_id"][: len(first)] == list(range(len(first)))


def test_split_is_by_document_stable_and_near_the_fraction(corpus):
    parts = split_corpus(0.1)
    train, test = parts["train"], parts["test"]
    assert len(train) + len(test) == len(corpus)
    assert not set(train["title"]) & set(test["title"])
    assert 0.07 < len(test) / len(corpus) < 0.13
    assert all(is_held_out(t) for t in test["title"]) and not any(is_held_out(t) for t in train["title"])
    assert set(split_corpus(0.2)["test"]["title"]) >= set(test["title"]), "a larger held-out set contains the smaller"
    assert len(split_corpus(0.0)["test"]) == 0 and len(split_corpus(1.0)["train"]) == 0


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_bad_fraction_raises(fraction):
    with pytest.raises(ValueError, match=r"held_out_fraction in \[0, 1\]"):
        split_corpus(fraction)


def test_docstring_examples():
    import lecture_lib.data.corpus as module

    assert doctest.testmod(module).failed == 0
