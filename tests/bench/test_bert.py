"""lecture_lib.bench.bert on CPU: the code the CUDA run shares (the rows, compiled models, MFU) runs and prints."""

from lecture_lib.bench.bert import SIZES, main
from lecture_lib.models.bert import BertConfig, training_flops_per_token


def test_the_technique_table_runs_on_cpu_and_prints_every_row_with_its_mfu(capsys):
    main(
        [
            "--table",
            "--batch-size",
            "4",
            "--seq-len",
            "16",
            "--steps",
            "1",
            "--compile-backend",
            "eager",
            "--peak-tflops",
            "1",
        ]
    )
    out = capsys.readouterr().out
    rows = [
        "ours, none of them",
        "+ MLM head on masked positions",
        "+ fused attention",
        "+ unpadding",
        "+ torch.compile",
        "+ fused AdamW",
        "transformers",
        "transformers, compiled",
    ]
    for row in rows:
        line = next(line for line in out.splitlines() if line.strip().startswith(row + " "))
        tokens_per_s, ratio, mfu = line[len(line) - len(line.lstrip()) + len(row) :].split()
        assert float(tokens_per_s) > 0 and float(ratio) > 0 and mfu.endswith("%"), line
        # MFU: the real tokens' FLOPs (three sequences of 16, one padded to 12) at this rate, over 1 TFLOP/s
        config = BertConfig(**SIZES["mini"])
        flops = (3 * 16 * training_flops_per_token(config, 16) + 12 * training_flops_per_token(config, 12)) / 60
        assert abs(float(mfu[:-1]) - 100 * float(tokens_per_s) * flops / 1e12) < 0.1, line
    assert "(60 real tokens)" in out and "MFU over 1 TFLOP/s dense bf16" in out
