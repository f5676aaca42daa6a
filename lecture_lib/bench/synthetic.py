"""Speed of the synthetic language's generator: sentences per second on one core.

``python -m lecture_lib.bench synthetic [--sentences N] [--repeats N]`` prints the median rate; the target
is at least 10,000 sentences per second, so that the data never holds back pretraining or fine-tuning.

Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
"""

from __future__ import annotations

import torch

from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.measure import time_call


def sentences_per_second(count: int = 20_000, repeats: int = 3) -> float:
    """Median rate of ``SyntheticLanguage(seed=0).sentences(count)``, a fresh seed each repeat.

    Taught in: 05_bert_finetuning ("A synthetic language with ground truth").
    """
    lang = SyntheticLanguage(seed=0)
    seeds = iter(range(repeats + 1))
    return count / time_call(lambda: lang.sentences(count, seed=next(seeds)), repeats=repeats, warmup=1)


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench synthetic")
    add_ranged(parser, "--sentences", int, Range(1), "sentences per timing", default=20_000)
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rate = sentences_per_second(args.sentences, args.repeats)
    print(
        f"synthetic language, {args.sentences:,} sentences, median of {args.repeats}: "
        f"{rate:,.0f} sentences/s on one core (target >= 10,000)"
    )
