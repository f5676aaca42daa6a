"""Independent fine-tunings in a loop and in :func:`~lecture_lib.runtime.parallel_map`'s workers.

``python -m lecture_lib.bench parallel [--jobs N] [--workers N]`` runs the first ``N`` of notebook 05's section-6
fine-tunings (six tasks x pretrained or scratch x three seeds: 36) both ways, in the same process, and prints
each wall time, the speed-up and whether every weight and score came out the same. Chapter 05's BERT is read
from the cache (or pretrained first, about a minute).

Taught in: 05_bert_finetuning ("Pretrained or from scratch").
"""

from __future__ import annotations

import time

import torch

from lecture_lib.chapters.course_language import (
    HARDER_TASK_NAMES,
    build_harder_tasks,
    chapter_config,
    synthetic_pretrained_bert,
)
from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.finetuning.finetune import FinetuneResult, finetune_from
from lecture_lib.models.bert import BertModel
from lecture_lib.runtime import cpu_workers, parallel_map


def section6_jobs() -> list[tuple]:
    """``finetune_from``'s arguments for each (task, start, seed) of notebook 05's section 6, in its order."""
    config = chapter_config()
    pretrained = synthetic_pretrained_bert(config, progress=False)
    encoder = BertModel.from_pretrained(pretrained.path)
    tasks = build_harder_tasks(pretrained.tokenizer, config)
    return [
        (tasks[name], start, config.seeded_finetune, seed)
        for name in HARDER_TASK_NAMES
        for start in (encoder, encoder.config)
        for seed in config.seeds
    ]


def same_results(ours: list[FinetuneResult], theirs: list[FinetuneResult]) -> bool:
    """Every score and every tensor of every state dict equal, bit for bit."""
    return all(
        a.scores == b.scores
        and all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
        for a, b in zip(ours, theirs, strict=True)
    )


def loop_and_workers(jobs: list[tuple], workers: int) -> dict:
    """Wall seconds of the plain loop and of ``workers`` workers (started beforehand, as a notebook's second
    call finds them), and whether their results agree."""
    parallel_map(abs, [(-1,)] * workers, workers=workers)  # start the workers
    start = time.perf_counter()
    in_workers = parallel_map(finetune_from, jobs, workers=workers)
    middle = time.perf_counter()
    in_loop = [finetune_from(*job) for job in jobs]
    end = time.perf_counter()
    return dict(loop=end - middle, workers=middle - start, same=same_results(in_workers, in_loop))


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench parallel")
    add_ranged(parser, "--jobs", int, Range(1), "fine-tunings, the first of section 6's", default=36)
    add_ranged(parser, "--workers", int, Range(1), "worker processes", default=cpu_workers())
    args = parser.parse_args(argv)
    jobs = section6_jobs()[: args.jobs]
    result = loop_and_workers(jobs, args.workers)
    print(
        f"{len(jobs)} fine-tunings of notebook 05's section 6: loop {result['loop']:.1f} s, "
        f"{args.workers} workers {result['workers']:.1f} s, speed-up x{result['loop'] / result['workers']:.2f}; "
        f"same weights and scores: {result['same']}"
    )
