"""The compression benchmark's variants compute what they claim, on a small layer."""

import torch

from lecture_lib.bench.compression import linear_variants, time_variants


def test_variants_agree_where_they_should():
    variants = linear_variants(in_features=32, out_features=16)
    x = torch.randn(5, 32)
    with torch.no_grad():
        dense = variants["float32"](x)
        assert (variants["int8 (ours)"](x) - dense).abs().max() < 0.05
        torch.testing.assert_close(variants["50% of neurons removed"](x), dense[:, :8])
        assert (variants["50% zero weights"].weight == 0).sum() == 32 * 16 // 2
        if "int8 (torch.ao, reference)" in variants:
            assert (variants["int8 (torch.ao, reference)"](x) - variants["int8 (ours)"](x)).abs().max() < 0.05
    assert set(time_variants(tokens=4, repeats=1, in_features=32, out_features=16)) == set(variants)
