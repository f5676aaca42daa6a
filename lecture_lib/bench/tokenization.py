"""Tokenization benchmarks on the embedded corpus: BPE training and encoding speed.

``python -m lecture_lib.bench tokenization [--merges N] [--documents N] [--repeats N]`` prints, from one run:

1. our incremental byte-level BPE trainer (:func:`~lecture_lib.tokenization.byte_level.train_merges`) against
   the naive loop that recounts every pair after every merge (:func:`~lecture_lib.tokenization.bpe.learn_bpe`
   on the same words, same tie-breaking), both from the same word counts; their merges must agree;
2. our whole training (pre-tokenize, count, merge) against Hugging Face ``tokenizers``' ``BpeTrainer``
   with the same pre-tokenization and vocabulary size (Rust, using every core);
3. encoding throughput in MB/s of UTF-8 text: ours with an empty and with a warm cache of encoded pieces,
   against ``tokenizers`` (one call per text, and the parallel ``encode_batch``; its BPE model keeps a cache
   too).

Taught in: 03_tokenization ("An efficient trainer").
"""

from __future__ import annotations

import os

from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.data.corpus import corpus_texts
from lecture_lib.measure import time_call
from lecture_lib.tokenization.bpe import learn_bpe
from lecture_lib.tokenization.byte_level import (
    ByteLevelBPE,
    byte_ids,
    to_standin,
    train_merges,
)


def hf_byte_level_trainer(vocab_size: int):
    """A ``tokenizers`` byte-level BPE with GPT-2's pre-tokenization, and its trainer (the reference)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    return tokenizer, trainer


def compare_trainers(texts: list[str], merges: int) -> dict[str, float]:
    """Seconds of the naive and the incremental trainer from the same word counts, and whether they agree."""
    counts = ByteLevelBPE().count_words(texts)
    id_words = {tuple(byte_ids(w)): n for w, n in counts.items()}
    standin_words = {to_standin(w.encode("utf-8")): n for w, n in counts.items()}
    result: dict = {}
    incremental = time_call(
        lambda: result.__setitem__("ours", train_merges(id_words, 256 + merges)), repeats=1, warmup=0
    )
    naive = time_call(
        lambda: result.__setitem__("naive", learn_bpe(standin_words, len(result["ours"]), tie_break="lowest_ids")),
        repeats=1,
        warmup=0,
    )
    vocab = ByteLevelBPE(result["ours"]).vocab
    ours = [(to_standin(vocab[a]), to_standin(vocab[b])) for a, b in result["ours"]]
    return {
        "words": len(counts),
        "merges": len(ours),
        "naive_s": naive,
        "ours_s": incremental,
        "same_merges": ours == result["naive"],
    }


def compare_with_tokenizers(texts: list[str], merges: int, repeats: int) -> dict[str, float]:
    """Training seconds and encoding MB/s, ours against ``tokenizers``; and whether the ids agree."""
    ours = ByteLevelBPE()
    ours_train = time_call(lambda: ours.train(texts, 256 + merges), repeats=1, warmup=0)
    hf, trainer = hf_byte_level_trainer(256 + merges)
    hf_train = time_call(lambda: hf.train_from_iterator(texts, trainer), repeats=1, warmup=0)
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    cold = time_call(
        lambda: [fresh.encode(t) for fresh in [ByteLevelBPE(list(ours.merges))] for t in texts],
        repeats=repeats,
        warmup=0,
    )  # a new tokenizer each time: its cache of pieces starts empty
    ours_encode = time_call(lambda: [ours.encode(t) for t in texts], repeats=repeats, warmup=1)
    hf_encode = time_call(lambda: [hf.encode(t) for t in texts], repeats=repeats, warmup=1)
    hf_batch = time_call(lambda: hf.encode_batch(texts), repeats=repeats, warmup=1)
    same = [ours.encode(t) for t in texts] == [e.ids for e in hf.encode_batch(texts)]
    return {
        "ours_train_s": ours_train,
        "hf_train_s": hf_train,
        "megabytes": megabytes,
        "ours_mb_s": megabytes / ours_encode,
        "ours_cold_mb_s": megabytes / cold,
        "hf_mb_s": megabytes / hf_encode,
        "hf_batch_mb_s": megabytes / hf_batch,
        "same_ids": same,
    }


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench tokenization")
    add_ranged(parser, "--merges", int, Range(1), "BPE merges to learn", default=2000)
    add_ranged(parser, "--documents", int, Range(1), "first N documents (default: all)")
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=5)
    args = parser.parse_args(argv)
    texts = corpus_texts()[: args.documents]
    print(f"corpus: {len(texts)} documents, {sum(map(len, texts)):,} characters; {os.cpu_count()} CPU cores")

    t = compare_trainers(texts, args.merges)
    print(f"\n1. trainer, {t['merges']} merges from {t['words']:,} distinct pre-tokenized words")
    print(f"   naive recount every merge : {t['naive_s']:8.2f} s")
    print(
        f"   incremental (ours)        : {t['ours_s']:8.2f} s   -> {t['naive_s'] / t['ours_s']:.0f}x faster "
        f"(target >= 20x); same merges: {t['same_merges']}"
    )

    h = compare_with_tokenizers(texts, args.merges, args.repeats)
    print(f"\n2. whole training (pre-tokenize + count + {args.merges} merges)")
    print(f"   ours                      : {h['ours_train_s']:8.2f} s")
    print(
        f"   tokenizers (Rust)         : {h['hf_train_s']:8.2f} s   -> ours takes "
        f"{h['ours_train_s'] / h['hf_train_s']:.1f}x as long (target within 10x)"
    )
    print(f"\n3. encoding {h['megabytes']:.2f} MB (median of {args.repeats}); identical ids: {h['same_ids']}")
    print(f"   ours, empty piece cache   : {h['ours_cold_mb_s']:8.2f} MB/s")
    print(f"   ours, warm piece cache    : {h['ours_mb_s']:8.2f} MB/s")
    for name, key in (("tokenizers, one call/text", "hf_mb_s"), ("tokenizers, encode_batch ", "hf_batch_mb_s")):
        print(
            f"   {name} : {h[key]:8.2f} MB/s   -> {h[key] / h['ours_cold_mb_s']:.1f}x ours with an empty cache, "
            f"{h[key] / h['ours_mb_s']:.1f}x ours warm"
        )
