"""Compression benchmarks: one BERT-base feed-forward matrix in float32, in int8 with integer products, with half
its weights zeroed (magnitude pruning: same shape), and with half its neurons removed (structured pruning).

``python -m lecture_lib.bench compression [--tokens N] [--repeats N]`` prints the median times and the ratios
(and, where ``torch.ao`` still has it, PyTorch's own dynamic int8 layer beside ours, for reference).

Taught in: 12_compression ("Pruning").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.compression.pruning import magnitude_masks
from lecture_lib.compression.quantization import Int8Linear, torch_dynamic_int8
from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.measure import interleaved_medians


def linear_variants(in_features: int = 768, out_features: int = 3072, seed: int = 0) -> dict[str, nn.Module]:
    """The same layer five ways: float, int8 (ours), 50% magnitude-pruned, 50% of the outputs removed, and
    PyTorch's dynamic int8 layer when ``torch.ao.quantization`` is available."""
    torch.manual_seed(seed)
    dense = nn.Linear(in_features, out_features).eval()
    sparse = nn.Linear(in_features, out_features).eval()
    narrow = nn.Linear(in_features, out_features // 2).eval()
    with torch.no_grad():
        sparse.load_state_dict(dense.state_dict())
        sparse.weight.mul_(magnitude_masks([dense.weight], 0.5)[0])
        narrow.weight.copy_(dense.weight[: out_features // 2])
        narrow.bias.copy_(dense.bias[: out_features // 2])
    variants = {
        "float32": dense,
        "int8 (ours)": Int8Linear(dense),
        "50% zero weights": sparse,
        "50% of neurons removed": narrow,
    }
    wrapped = torch_dynamic_int8(nn.Sequential(dense))
    if wrapped is not None:
        variants["int8 (torch.ao, reference)"] = wrapped
    return variants


def time_variants(tokens: int = 128, repeats: int = 20, **sizes: int) -> dict[str, float]:
    """Median seconds of one forward pass of each variant on ``tokens`` rows, interleaved."""
    variants = linear_variants(**sizes)
    x = torch.randn(tokens, next(iter(variants.values())).in_features)
    with torch.no_grad():
        return interleaved_medians({name: (lambda m=m: m(x)) for name, m in variants.items()}, repeats=repeats)


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench compression")
    add_ranged(parser, "--tokens", int, Range(1), "tokens per forward pass", default=128)
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=20)
    args = parser.parse_args(argv)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}; a 768 x 3072 linear layer, "
        f"{args.tokens} tokens, forward only (median):"
    )
    times = time_variants(args.tokens, args.repeats)
    for name, seconds in times.items():
        print(f"  {name:28s} {seconds * 1e3:8.3f} ms   speed-up x{times['float32'] / seconds:.2f}")
