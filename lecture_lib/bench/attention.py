"""Attention benchmarks: our multi-head attention against PyTorch's, and naive against fused attention.

``python -m lecture_lib.bench attention [--repeats N]`` prints forward+backward times measured in one run.

Taught in: 01_attention ("What attention costs").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.attention import MultiHeadAttention
from lecture_lib.chapters.ch01_attention import cost_by_length, cost_lengths
from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.measure import interleaved_medians
from lecture_lib.runtime import default_device


def compare_multihead(
    batch: int = 8,
    length: int = 256,
    width: int = 256,
    heads: int = 8,
    repeats: int = 20,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> dict[str, float]:
    """Median forward+backward seconds of ours vs ``nn.MultiheadAttention`` with identical weights.

    Both run in training mode without returning attention weights (PyTorch: ``need_weights=False``),
    interleaved so that a slow moment of the machine hits both.
    """
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(width, heads, batch_first=True).to(device).train()
    ours = MultiHeadAttention.from_torch(theirs).train()
    x = torch.randn(batch, length, width, device=device, requires_grad=True)

    def step(module, **kwargs):
        def run():
            out = module(x, x, x, **kwargs)[0]
            out.backward(torch.ones_like(out))

        return run

    runs = {
        "ours": step(ours),
        "torch": step(theirs, need_weights=False),
        "torch_with_weights": step(theirs, need_weights=True),
    }
    return interleaved_medians(runs, repeats=repeats, warmup=1, device=device)


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench attention")
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=20)
    args = parser.parse_args(argv)
    device = default_device()
    print(f"device: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    t = compare_multihead(repeats=args.repeats, device=device)
    print("multi-head attention, forward+backward, batch 8, length 256, width 256, 8 heads (median):")
    print(f"  ours (fused kernel)                   {t['ours'] * 1e3:8.2f} ms")
    print(f"  nn.MultiheadAttention(need_weights=F) {t['torch'] * 1e3:8.2f} ms")
    print(f"  nn.MultiheadAttention(need_weights=T) {t['torch_with_weights'] * 1e3:8.2f} ms")
    print(f"  ratio ours / torch = {t['ours'] / t['torch']:.3f}  (target <= 1.1)")
    print("naive vs fused scaled dot-product attention, 4 heads of 64, forward+backward:")
    print(f"  {'length':>6} {'naive ms':>9} {'fused ms':>9} {'naive MiB':>10} {'fused MiB':>10}")
    for row in cost_by_length(cost_lengths(), device=device):
        print(
            f"  {row['length']:>6} {row['naive_seconds'] * 1e3:>9.2f} {row['fused_seconds'] * 1e3:>9.2f}"
            f" {row['naive_bytes'] / 2**20:>10.2f} {row['fused_bytes'] / 2**20:>10.2f}"
        )
