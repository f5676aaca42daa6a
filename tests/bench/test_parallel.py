"""The parallel benchmark times the loop and the workers on the same jobs and compares their results."""

import dataclasses

from lecture_lib.bench.parallel import loop_and_workers, same_results
from lecture_lib.chapters.course_language import build_tasks, chapter_config
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune_from
from lecture_lib.models.bert import BertModel
from lecture_lib.tokenization import WordPieceTokenizer


def test_loop_and_workers_agree_and_a_changed_run_does_not(monkeypatch, tmp_path):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    config = chapter_config(train_examples=32, test_examples=16, max_length=128, finetune=dict(steps=3, batch_size=8))
    lang = SyntheticLanguage(config.language_seed)
    tokenizer = WordPieceTokenizer.train([s.text for s in lang.sentences(500, seed=0)], 300)
    task = build_tasks(tokenizer, config)["acceptability"]
    encoder = BertModel(dataclasses.replace(config.pretrain.model, vocab_size=tokenizer.vocab_size))
    jobs = [(task, encoder, config.finetune, seed) for seed in (0, 1, 2)]
    result = loop_and_workers(jobs, workers=2)
    assert result["same"] and result["loop"] > 0 and result["workers"] > 0
    runs = [finetune_from(*job) for job in jobs]
    assert same_results(runs, runs) and not same_results(runs, runs[1:] + runs[:1])  # another seed, another run
